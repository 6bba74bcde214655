"""What every ``nhbench`` command shares: its name, its parser class, its one-line error exit.

The commands (one module each, listed in `_commands`) import these from here, never from the
package's ``__init__``, so that a command module depends on nothing that imports it back.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any, NoReturn

from .._format import printable
from .._version import __version__

__all__ = ["NOT_OPTIONS", "PROG", "Parser", "die", "note", "version_line"]

PROG = "nhbench"
#: Namespace entries that are argparse plumbing, not options.
NOT_OPTIONS = frozenset({"func", "subparser", "command", "version", "argv"})


#: A single-dash word that is a value, never a flag: a negative number (``--rps -1``,
#: ``-1e3``, ``-.5``) or anything else whose first character after the dash is a digit
#: (``-5s``): no flag of nhbench (or of Fortio or Nighthawk) starts with a digit.
_VALUE = re.compile(r"-\.?[0-9]")


class Parser(argparse.ArgumentParser):
    """argparse, but every error is exactly one line on stderr and exit status 2, and a
    single-dash word is read whole or refused by name (`_refuse_unknown_word`)."""

    def error(self, message: str) -> NoReturn:
        die(message, status=2)

    def _parse_optional(self, arg_string: str) -> Any:
        if self._subparsers is None:
            self._refuse_unknown_word(arg_string)
            if _VALUE.match(arg_string) and arg_string not in self._option_string_actions:
                return None  # argparse takes "-1e3" for an unknown flag: the value is lost
        elif arg_string.partition("=")[0] not in self._descendant_flags():
            # A parser with subcommands also sees every argument of the subcommand, whose
            # flags (-h2, -http1.0) are not its own: it leaves those to the subcommand, and
            # refuses a word no parser under it knows, which argparse would otherwise read
            # as its own -h with a value ("-httpbufferkb" before "install").
            self._refuse_unknown_word(arg_string)
        return super()._parse_optional(arg_string)

    def _descendant_flags(self) -> set[str]:
        flags = set(self._option_string_actions)
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                for parser in action.choices.values():
                    if isinstance(parser, Parser):
                        flags |= parser._descendant_flags()
                    else:
                        flags |= set(parser._option_string_actions)
        return flags

    def _refuse_unknown_word(self, arg: str) -> None:
        # argparse reads a single-dash word as a short flag with its value attached
        # ("-curl" is "-c url", "-no-reresolve" "-n o-reresolve"), as grouped switches
        # ("-httpbufferkb" was "-h ...": the help, exit 0, nothing sent) or as the
        # abbreviation of a longer flag ("-s 4" was "-sequential-warmup"), whatever
        # allow_abbrev says. Fortio's words look exactly like that, so every such reading
        # turned a flag nhbench does not have into one it has. A single-dash word is
        # therefore exactly a flag of this command, or "-flag=value" of one, or a value
        # (a negative number, "-" for stdin), or it is refused by name. The price: a short
        # flag takes its value as the next word only ("-c 10", never "-c10").
        if len(arg) < 2 or arg[0] not in self.prefix_chars or " " in arg:
            return
        head, equals, _value = arg.partition("=")
        action = self._option_string_actions.get(head)
        if action is not None:
            if equals and action.nargs == 0:
                # argparse would read the value as more grouped switches ("-k=Hx" as
                # "-k -H x") or ignore it; Go's "-keepalive=false" must not pass as "on".
                self.error(f"{arg}: {head} is a switch and takes no value")
            return
        if arg[1] in self.prefix_chars or _VALUE.match(arg):
            return  # --long flags are never abbreviated (allow_abbrev=False)
        from ..compat._native import foreign_word

        self.error(foreign_word(head) or (
            f"unrecognized arguments: {arg} (no such flag; a single-dash flag is one whole "
            f"word: no grouped switches, no abbreviation, no value attached to a short "
            f"flag; only -h or --help alone prints the help)"))


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
