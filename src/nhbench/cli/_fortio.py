"""``nhbench fortio <command> [flags] [target]``: Fortio's own command line (Go's flag
grammar, Fortio's defaults, output and exit statuses), carried out by
`nhbench.compat._fortio` (docs/compat.md, "Fortio").

A raw command: `nhbench.cli.main` hands `main` every argument after ``fortio`` untouched
(argparse would cluster and abbreviate Fortio's single-dash flags).

Exit status, as Fortio's: 0 when the run completed (errors counted, ``-abort-on`` stops
included), ``-h`` and ``help``; 1 when the run aborted (a warm-up error without
``-allow-initial-errors``), a missing target, an unknown command or a failed ``curl``; 2 for
a flag Go's grammar refuses or a Fortio flag nhbench refuses by name (one line, nothing
sent).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._commands import Command, Subparsers

__all__ = ["add_parser", "main", "run"]


def add_parser(commands: Subparsers, command: Command) -> argparse.ArgumentParser:
    return commands.add_parser(
        command.name, help=command.help, add_help=False,
        description="Fortio's command line (nhbench fortio help lists every flag).",
    )


def main(argv: list[str]) -> int:
    from ..compat._fortio import main as fortio_main

    return fortio_main(argv)


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    # Never reached: a raw command's arguments go to `main`.
    return main([])
