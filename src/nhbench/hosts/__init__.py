"""Machines a sweep works on: this one (`LocalHost`) or one reached over SSH (`SSHHost`),
and the facts a report records about them (`MachineFacts`)."""

from ._facts_model import MachineFacts, NicFacts
from ._host import BackgroundCommand, CommandResult, Host, LocalHost

__all__ = ["BackgroundCommand", "CommandResult", "Host", "LocalHost", "MachineFacts", "NicFacts"]
