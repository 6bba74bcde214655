"""The demo: the embedded test server on a loopback port, a 5 s load against it, the report.

``nhbench demo`` and ``python -m nhbench.demo`` both run `main`. It lives in the CLI package
because it is a command: it uses the CLI's parser, error exit and report printing. With more than one CPU the
client worker and the server are pinned to different CPUs, the way a benchmark should be set
up, so that neither steals the other's time.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ._common import Parser, die

if TYPE_CHECKING:
    from ._commands import Command, Subparsers

__all__ = ["main", "DEMO_RPS", "DEMO_CONNECTIONS", "DEMO_DURATION", "add_parser", "run"]

# 10k requests per second is well inside what one core can do, high enough that the
# sub-millisecond release schedule (one release every 100 us) shows in the release-lateness
# statistic, and low enough that the run stays a paced, open-to-inspection run rather than a
# saturation test.
DEMO_RPS = 10_000
DEMO_CONNECTIONS = 10
DEMO_DURATION = "5s"


def add_parser(commands: Subparsers,
               command: Command) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        command.name,
        help=command.help,
        description="Start the embedded test server on a loopback port, run a short load "
        "against it and print the human report.",
        argument_default=argparse.SUPPRESS,
        allow_abbrev=False,
    )
    parser.add_argument("--rps", metavar="N", help="Requests per second. Default 10000.")
    parser.add_argument("--duration", metavar="TIME", help="Default 5s.")
    parser.add_argument("--connections", metavar="N", help="Default 10.")
    parser.add_argument("--output-format", metavar="human|json", help="Default human.")
    return parser


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    argv: list[str] = []
    for name in ("rps", "duration", "connections", "output_format"):
        if hasattr(args, name):
            argv += ["--" + name.replace("_", "-"), str(getattr(args, name))]
    return main(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo and return the exit status (that of ``nhbench run``)."""
    from pydantic import ValidationError

    from .._exceptions import CoreUnavailableError, ServerError
    from .._server import TestServer
    from ..options import Options, affinity_cpus, format_validation_error
    from ._run import run_and_report

    parser = Parser(prog="nhbench demo", allow_abbrev=False)
    parser.add_argument("--rps", default=str(DEMO_RPS))
    parser.add_argument("--duration", default=DEMO_DURATION)
    parser.add_argument("--connections", default=str(DEMO_CONNECTIONS))
    parser.add_argument("--output-format", default="human")
    args = parser.parse_args(argv)

    cpus = affinity_cpus()
    client_cpu = cpus[0]
    server_cpus = [cpus[-1]] if len(cpus) > 1 else None
    try:
        server = TestServer(listen=("127.0.0.1", 0), workers=1, cpus=server_cpus)
        server.start()
    except (ServerError, CoreUnavailableError) as exc:
        die(str(exc), status=1)
    try:
        try:
            options = Options.model_validate(
                {
                    "uri": server.url,
                    "rps": args.rps,
                    "duration": args.duration,
                    "connections": args.connections,
                    "concurrency": 1,
                    "cpus": [client_cpu],
                    "output_format": args.output_format,
                    "label": ["demo"],
                }
            )
        except ValidationError as exc:
            parser.error(format_validation_error(exc, cli=True))
        if options.output_format == "human":
            where = f"CPU {server_cpus[0]}" if server_cpus else "unpinned"
            sys.stdout.write(
                f"nhbench demo: test server on {server.url} ({where}); client on CPU "
                f"{client_cpu}: {options.rps:g} rps over {options.connections} connections for "
                f"{options.duration:g} s\n\n"
            )
            sys.stdout.flush()
        return run_and_report(options)
    finally:
        server.stop()
