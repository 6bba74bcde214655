"""``nhbench ui DIR``: the result browser with a form that starts runs, their live charts,
and Fortio's REST API (`nhbench.compat._fortio_rest.start_fortio_ui`; docs/outputs.md,
"Running tests from the browser").

Exit status: 0 when stopped by SIGINT or SIGTERM (runs in progress are stopped and saved);
1 when the address cannot be bound; 2 for invalid input, one line on stderr.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from .._signals import stop_on_signals
from ._common import die, note

if TYPE_CHECKING:
    from ._commands import Command, Subparsers

__all__ = ["DEFAULT_LISTEN", "TOKEN_ENV", "add_parser", "run"]

DEFAULT_LISTEN = "127.0.0.1:8080"
#: The environment variable a token may be given in (kept out of the process list).
TOKEN_ENV = "NHBENCH_UI_TOKEN"


def add_parser(commands: Subparsers, command: Command) -> argparse.ArgumentParser:
    from ..options import DEFAULT_UI_LIMITS as LIMITS

    parser = commands.add_parser(
        command.name, help=command.help, allow_abbrev=False,
        description="Serve the result browser over DIR (as nhbench browse) plus a form that "
        "starts runs from this machine, draws their rate and latency per interval as they "
        "arrive, stops them and saves each result into DIR; and Fortio's REST API under "
        "/fortio/rest/. Loopback only unless a token guards it. See docs/outputs.md.")
    parser.add_argument("directory", metavar="DIR", help="The directory of results.")
    parser.add_argument("--listen", metavar="ADDRESS", default=DEFAULT_LISTEN,
                        help=f"HOST:PORT (default {DEFAULT_LISTEN}). Any address but a "
                        "loopback one requires a token to start or stop runs.")
    parser.add_argument("--token", metavar="TOKEN", default=None,
                        help=f"The token that starting or stopping a run needs (also "
                        f"${TOKEN_ENV}); generated and printed on stderr when the address is "
                        "not loopback and none is given.")
    parser.add_argument("--ui-unsafe-open", action="store_true",
                        help="Serve a non-loopback address WITHOUT a token, as Fortio does: "
                        "anyone who reaches it can send load from this machine anywhere.")
    parser.add_argument("--allow-target", metavar="CIDR|HOST", action="append", default=[],
                        help="Only these targets (repeatable): a network, an address or a "
                        "host name; a name must resolve inside an allowed network or be "
                        "listed. Default: any.")
    parser.add_argument("--max-rate", metavar="RPS", type=float, default=LIMITS.max_rate,
                        help=f"Requests/s of one run (default {LIMITS.max_rate:g}; 0: no cap, "
                        "and runs as fast as possible are allowed).")
    parser.add_argument("--max-connections", metavar="N", type=int,
                        default=LIMITS.max_connections,
                        help=f"Connections of one run (default {LIMITS.max_connections}; 0: "
                        "no cap).")
    parser.add_argument("--max-duration", metavar="SECONDS", type=float,
                        default=LIMITS.max_duration,
                        help=f"Seconds of one run (default {LIMITS.max_duration:g}; 0: no cap, "
                        "and runs until stopped are allowed).")
    parser.add_argument("--max-runs", metavar="N", type=int, default=LIMITS.max_runs,
                        help=f"Runs at once (default {LIMITS.max_runs}; 0: no cap).")
    parser.add_argument("--prefix", default="/fortio/",
                        help="The pages are also served under this path (default /fortio/, "
                        "Fortio's -ui-path).")
    return parser


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from .._compare import single_threaded_blas
    from ..compat._fortio_rest import start_fortio_ui
    from ..options import UILimits, format_address, parse_address

    # Before numpy is imported (a comparison imports it): see its doc.
    single_threaded_blas()

    directory = Path(args.directory)
    if not directory.is_dir():
        die(f"ui: {str(directory)!r} is not a directory", status=2)
    try:
        host, port = parse_address(args.listen)
    except ValueError as exc:
        die(f"--listen: {exc}", status=2)
    for name in ("max_rate", "max_connections", "max_duration", "max_runs"):
        if getattr(args, name) < 0:
            die(f"--{name.replace('_', '-')}: must be 0 (no cap) or more", status=2)
    for entry in args.allow_target:
        if not (_network(entry) or re.fullmatch(r"[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9])?",
                                                 entry)):
            die(f"--allow-target: {entry!r} is neither a network nor a host name", status=2)
    token = args.token if args.token is not None else os.environ.get(TOKEN_ENV) or None
    if token is not None and not token.strip():
        die("--token: must not be empty", status=2)
    limits = UILimits(max_rate=args.max_rate, max_connections=args.max_connections,
                    max_duration=args.max_duration, max_runs=args.max_runs,
                    allow_targets=tuple(args.allow_target))
    stop = threading.Event()
    with stop_on_signals(lambda signum: stop.set(), second_sigint_aborts=False):
        try:
            handle = start_fortio_ui(str(directory), host, port, prefix=args.prefix,
                                     token=token, unsafe_open=args.ui_unsafe_open,
                                     limits=limits)
        except ValueError as exc:
            die(str(exc), status=2)
        except OSError as exc:
            die(f"--listen: cannot listen on {format_address(host, port)}: "
                f"{exc.strerror or exc}", status=1)
        try:
            sys.stdout.write(f"http://{format_address(handle.host, handle.port)}/\n")
            sys.stdout.flush()
            note(f"serving {directory}: start runs at /run, Fortio's REST API at "
                 f"{args.prefix}rest/; Ctrl-C stops")
            while not stop.is_set():
                stop.wait(0.5)
        finally:
            handle.stop()
    return 0


def _network(entry: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_network(entry, strict=False)
    except ValueError:
        return False
    return True
