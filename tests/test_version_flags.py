"""``--version`` on every subcommand prints the same line as ``nhbench --version``.

The subcommands are read from the parser itself, so that one added later is covered without
editing this file. Each case runs the real CLI (``python -m nhbench``) as users do; none
needs the compiled extension, and none needs the subcommand's required arguments (``run``
has a required URI).
"""

from __future__ import annotations

import argparse

import pytest
from test_cli_errors import nhbench_cli

from nhbench import __version__
from nhbench.cli import build_parser


def _subcommands() -> list[str]:
    parser = build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return sorted(action.choices)
    raise AssertionError("nhbench's parser has no subcommands")


SUBCOMMANDS = _subcommands()


def test_the_known_subcommands_are_found() -> None:
    # Guards the derivation above: an empty list would make the parametrized test vacuous.
    assert {"run", "server", "sweep", "report", "browse", "transform", "demo"} <= set(SUBCOMMANDS)


def test_top_level_version() -> None:
    proc = nhbench_cli("--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"nhbench {__version__}\n"


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_every_subcommand_prints_the_same_version_line(command: str) -> None:
    top = nhbench_cli("--version")
    proc = nhbench_cli(command, "--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == top.stdout == f"nhbench {__version__}\n"
    assert proc.stderr == ""


def test_version_wins_over_other_arguments_of_run() -> None:
    # A URI and flags may be there too (a script appends --version to its usual command).
    proc = nhbench_cli("run", "http://127.0.0.1:1/", "--rps", "10", "--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"nhbench {__version__}\n"
