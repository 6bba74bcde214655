"""``nhbench nighthawk client|transform|service|test-server``: Nighthawk's binaries with
their own command lines (TCLAP's grammar, Nighthawk's flags and defaults); the reading is
`nhbench.compat._nighthawk`'s, this module carries out its plan.

Exit statuses are nighthawk_client's: 0 the run completed and no failure predicate fired,
1 a predicate fired or the run failed (the output is still printed, as Nighthawk prints it);
2 invalid input (one line, nothing sent), where Nighthawk says "Bad argument" and exits 1.
``transform``, ``service`` and ``test-server`` exit as ``nhbench transform``, ``service`` and
``server`` do.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._commands import Command, Subparsers

__all__ = ["add_parser", "main", "run"]


def add_parser(commands: Subparsers, command: Command) -> argparse.ArgumentParser:
    # Listed in nhbench --help only: `main` reads the arguments (TCLAP's grammar).
    return commands.add_parser(command.name, help=command.help, add_help=False)


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    return main([])


def main(argv: list[str]) -> int:
    from ..compat._nighthawk import ClientRun, Done, plan

    action = plan(argv)
    if isinstance(action, Done):
        sys.stdout.write(action.stdout)
        sys.stdout.flush()
        return action.status
    if isinstance(action, ClientRun):
        from ._run import run_and_report

        return run_and_report(action.options)
    try:
        return _native(list(action.argv))
    finally:
        for path in action.temporary:
            with contextlib.suppress(OSError):
                os.unlink(path)


def _native(argv: list[str]) -> int:
    # ``nhbench ARGV...`` for one of nhbench's own commands, parsed by that command's own
    # parser (the package's main is not imported back: cli's layering).
    from ._commands import COMMANDS
    from ._common import PROG, Parser

    command = next(command for command in COMMANDS if command.name == argv[0])
    parser = Parser(prog=PROG, allow_abbrev=False)
    commands = parser.add_subparsers(dest="command", parser_class=Parser)
    sub = command.add_parser(commands, command)
    args = parser.parse_args(argv)
    args.argv = argv
    return int(command.run(args, sub))
