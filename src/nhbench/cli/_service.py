"""``nhbench service --listen HOST:PORT``: Nighthawk's gRPC service (docs/service.md).

Issue 15 seam: the parser and the command are filled in with the service.
"""

from __future__ import annotations

import argparse
from typing import Any

from . import _die

__all__ = ["add_service_parser"]


def add_service_parser(commands: argparse._SubParsersAction[Any]) -> None:
    parser = commands.add_parser(
        "service",
        help="serve Nighthawk's gRPC service API (NighthawkService/ExecutionStream)",
        description="A gRPC server implementing nighthawk.client.NighthawkService, with "
        "server reflection and health, so that tools written against Nighthawk's service "
        "drive nhbench. See docs/service.md.",
        argument_default=argparse.SUPPRESS,
        allow_abbrev=False,
    )
    parser.set_defaults(func=_cmd_service, subparser=parser)


def _cmd_service(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    _die("nhbench service is not implemented yet", status=1)
