"""What every ``nhbench`` command shares: its name, its parser class, its one-line error exit.

The commands (one module each, listed in `_commands`) import these from here, never from the
package's ``__init__``, so that a command module depends on nothing that imports it back.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, NoReturn

from .._format import printable
from .._version import __version__

__all__ = ["NOT_OPTIONS", "PROG", "Parser", "die", "note", "version_line"]

PROG = "nhbench"
#: Namespace entries that are argparse plumbing, not options.
NOT_OPTIONS = frozenset({"func", "subparser", "command", "version", "argv"})


class Parser(argparse.ArgumentParser):
    """argparse, but every error is exactly one line on stderr and exit status 2, and
    single-dash flags are never read as grouped switches (`_refuse_grouped_switches`)."""

    def error(self, message: str) -> NoReturn:
        die(message, status=2)

    def _parse_optional(self, arg_string: str) -> Any:
        self._refuse_grouped_switches(arg_string)
        return super()._parse_optional(arg_string)

    def _refuse_grouped_switches(self, arg_string: str) -> None:
        # argparse reads "-hX..." as the switch -h followed by the flag -X with the rest as
        # its value, so Fortio's "-httpbufferkb 256" (or "-hc", "-hn") printed the help and
        # exited 0 with nothing sent, and "-kc 5" would be "-k -c 5". nhbench's flags follow
        # Fortio's and Nighthawk's single-word spellings (-qps, -cacert), where grouping
        # short switches means nothing: a single-dash word that is no flag of this command
        # but starts with a switch (a flag that takes no value) is refused by name. A short
        # flag with its value attached (-c10) is still read as argparse always has.
        # Only a parser without subcommands checks: the top-level parser also sees every
        # argument of the subcommand, whose flags (-h2, -http1.0) it does not know.
        if self._subparsers is not None or len(arg_string) < 3 or " " in arg_string:
            return
        if arg_string[0] not in self.prefix_chars or arg_string[1] in self.prefix_chars:
            return
        head = arg_string.split("=", 1)[0]
        if head in self._option_string_actions:
            return
        first = self._option_string_actions.get(arg_string[:2])
        if first is not None and first.nargs == 0:
            self.error(f"unrecognized arguments: {arg_string} (no such flag; single-dash "
                       f"switches cannot be grouped, and only -h or --help alone prints "
                       f"the help)")


def die(message: str, status: int) -> NoReturn:
    """Print ``nhbench: error: <message>`` (one line) on stderr and exit with `status`."""
    # Messages are collapsed to one line so that scripts and people get the same, greppable
    # "nhbench: error: ..." line whatever produced it.
    one_line = " ".join(str(message).split())
    # The message may quote a file's content or name: nothing in it may drive the terminal.
    sys.stderr.write(f"{PROG}: error: {printable(one_line)}\n")
    sys.stderr.flush()
    raise SystemExit(status)


def note(message: str) -> None:
    """Print ``nhbench: <message>`` on stderr."""
    sys.stderr.write(f"{PROG}: {message}\n")
    sys.stderr.flush()


def version_line() -> str:
    return f"{PROG} {__version__}"
