"""``nhbench adapt URL --slo RULE ...``: the highest rate that meets the SLO (docs/adapt.md).

Issue 15 seam: the parser and the command are filled in with the search.
"""

from __future__ import annotations

import argparse
from typing import Any

from . import _die

__all__ = ["add_adapt_parser"]


def add_adapt_parser(commands: argparse._SubParsersAction[Any]) -> None:
    parser = commands.add_parser(
        "adapt",
        help="search for the highest rate that still meets the SLO",
        description="Exponential then binary search over the offered rate, each step a full "
        "measured run recorded in a campaign directory. See docs/adapt.md.",
        argument_default=argparse.SUPPRESS,
        allow_abbrev=False,
    )
    parser.set_defaults(func=_cmd_adapt, subparser=parser)


def _cmd_adapt(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    _die("nhbench adapt is not implemented yet", status=1)
