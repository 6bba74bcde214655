"""``nhbench browse DIR [--listen ADDRESS]``: the result browser (`nhbench.browse`).

Exit status: 0 when stopped by SIGINT or SIGTERM (the only way it ends); 1 when the address
cannot be bound; 2 for invalid input (DIR is not a directory, a malformed address), one line
on stderr.
"""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from ._common import die, note
from ._signals import stop_on_signals

if TYPE_CHECKING:
    from ._commands import Command, Subparsers

__all__ = ["DEFAULT_LISTEN", "add_parser", "run"]

DEFAULT_LISTEN = "127.0.0.1:8080"


def add_parser(commands: Subparsers,
               command: Command) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        command.name,
        help=command.help,
        description="Serve a local web UI over DIR: a searchable list of the results in it "
        "(nhbench, Nighthawk and Fortio JSON, sweep campaign directories), one page per "
        "result (headline, latency by percentile, latency over time, counters, options) and "
        "a comparison of selected runs. Prints the URL, serves until SIGINT or SIGTERM. "
        "See docs/outputs.md.",
        allow_abbrev=False,
    )
    parser.add_argument("directory", metavar="DIR", help="The directory of results.")
    parser.add_argument(
        "--listen", metavar="ADDRESS", default=DEFAULT_LISTEN,
        help=f"HOST:PORT to serve on (default {DEFAULT_LISTEN}; port 0 picks a free one; "
        "[::1]:PORT for IPv6). Anything but a loopback address shows your results to the "
        "network.",
    )
    return parser


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from ..browse import BrowseServer
    from ..options import format_address, parse_address

    directory = Path(args.directory)
    if not directory.is_dir():
        die(f"browse: {str(directory)!r} is not a directory", status=2)
    try:
        host, port = parse_address(args.listen)
    except ValueError as exc:
        die(f"--listen: {exc}", status=2)
    server = BrowseServer(directory, host, port)
    stop = threading.Event()
    with stop_on_signals(lambda signum: stop.set(), second_sigint_aborts=False):
        try:
            bound = server.start()
        except OSError as exc:
            die(f"--listen: cannot listen on {format_address(host, port)}: "
                f"{exc.strerror or exc}", status=1)
        try:
            # The URL is the one line on stdout, so that a script (or a test) can read it.
            sys.stdout.write(f"http://{format_address(*bound)}/\n")
            sys.stdout.flush()
            note(f"browsing {directory}; Ctrl-C stops")
            # The wait wakes up now and then so that a signal takes effect at once.
            while not stop.is_set():
                stop.wait(0.5)
        finally:
            server.stop()
    return 0
