"""Machines a sweep works on: this one (`LocalHost`) or one reached over SSH (`SSHHost`),
and the facts a report records about them (`MachineFacts`, `collect_facts`)."""

from ._facts import collect_facts
from ._facts_model import MachineFacts, NicFacts
from ._host import BackgroundCommand, CommandResult, Host, LocalHost
from ._k8s import K8sError, collect_cluster, format_cpus, resolve_watched_pods
from ._k8s_model import ClusterFacts, ContainerCpus, K8sService, WatchedPod
from ._ssh import SSHHost
from ._ssh_connect import SSHTarget, password_from_environment, prompt_password

__all__ = [
    "BackgroundCommand",
    "ClusterFacts",
    "ContainerCpus",
    "K8sError",
    "K8sService",
    "WatchedPod",
    "collect_cluster",
    "format_cpus",
    "CommandResult",
    "Host",
    "LocalHost",
    "MachineFacts",
    "NicFacts",
    "SSHHost",
    "SSHTarget",
    "collect_facts",
    "password_from_environment",
    "prompt_password",
    "resolve_watched_pods",
]
