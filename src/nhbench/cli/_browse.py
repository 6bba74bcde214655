"""``nhbench browse DIR [--listen ADDRESS] [--sync URL [--sync-interval T]]``: the result
browser (`nhbench.browse`), sharing DIR's results as Fortio does (``/data/index.tsv``) and
pulling a peer's (``--sync``).

Exit status: 0 when stopped by SIGINT or SIGTERM (the only way it ends); 1 when the address
cannot be bound or the first sync cannot read its listing; 2 for invalid input (DIR is not a
directory, a malformed address or URL), one line on stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from .._signals import stop_on_signals
from ._common import die, note

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
        "a comparison of selected runs. Shares the results as Fortio does (/data/index.tsv) and "
        "pulls a peer's (--sync). Prints the URL, serves until SIGINT or SIGTERM. "
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
    parser.add_argument(
        "--base-url", metavar="URL", default="",
        help="The URL this browser is reached at from elsewhere (behind a proxy or ingress), "
        "which starts the URLs of /data/index.tsv (Fortio's -base-url); default: the Host "
        "each request names.",
    )
    parser.add_argument(
        "--sync", metavar="URL",
        help="Before serving, fetch the results a peer lists into DIR: URL is an index.tsv "
        "(Fortio's or another nhbench browse's /data/index.tsv) or an S3/GCS bucket's XML "
        "listing (Fortio's -sync). Only http(s), only the listing's own host, sizes and MD5s "
        "checked, existing files never replaced (docs/outputs.md, \"Sharing results\").",
    )
    parser.add_argument(
        "--sync-interval", metavar="DURATION",
        help="Sync again every DURATION while serving (Fortio's -sync-interval; e.g. 10m).",
    )
    parser.add_argument(
        "--sync-any-host", action="store_true",
        help="Follow the listing's URLs to any http(s) host, as Fortio does (by default only "
        "the listing's own host: a listing must not make this machine fetch from elsewhere).",
    )
    return parser


def _sync_options(args: argparse.Namespace) -> float | None:
    """The checked --sync options: the interval in seconds (None: sync once)."""
    from urllib.parse import urlsplit

    from ..options import parse_duration, parse_go_duration

    for option, value in (("--sync", args.sync), ("--base-url", args.base_url or None)):
        if value is None:
            continue
        parts = urlsplit(value.strip())
        try:
            parts.port  # noqa: B018 - a malformed port raises here
        except ValueError as exc:
            die(f"{option}: {value!r}: {exc}", status=2)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            die(f"{option}: {value!r} is not an http:// or https:// URL", status=2)
    if args.sync_interval is None:
        if args.sync_any_host and args.sync is None:
            die("--sync-any-host: needs --sync", status=2)
        return None
    if args.sync is None:
        die("--sync-interval: needs --sync", status=2)
    try:
        go = parse_go_duration(args.sync_interval)
        interval = go if go is not None else parse_duration(args.sync_interval)
    except ValueError as exc:
        die(f"--sync-interval: {exc}", status=2)
    if not interval > 0:
        die(f"--sync-interval: must be more than 0, not {args.sync_interval!r}", status=2)
    return interval


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from .._compare import single_threaded_blas
    from ..browse import BrowseServer
    from ..options import format_address, parse_address

    # Before numpy is imported (a comparison imports it): see its doc.
    single_threaded_blas()

    directory = Path(args.directory)
    if not directory.is_dir():
        die(f"browse: {str(directory)!r} is not a directory", status=2)
    try:
        host, port = parse_address(args.listen)
    except ValueError as exc:
        die(f"--listen: {exc}", status=2)
    interval = _sync_options(args)
    if args.sync is not None and not os.access(directory, os.W_OK | os.X_OK):
        die(f"--sync: cannot write into {str(directory)!r}", status=2)
    loop = None
    if args.sync is not None:
        from ..browse import SyncError, SyncLoop, sync_results

        # Fortio syncs before it serves and stops when the listing cannot be read.
        try:
            report = sync_results(args.sync, directory, any_host=args.sync_any_host)
        except (SyncError, ValueError) as exc:
            die(f"--sync: {exc}", status=1)
        note(f"sync: {report.summary()}")
        for line in report.problems:
            note(f"sync: {line}")
        if interval is not None:
            loop = SyncLoop(args.sync, directory, interval, any_host=args.sync_any_host)
    server = BrowseServer(directory, host, port, base_url=args.base_url,
                          reading_processes=True)
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
            server.warm()
            if loop is not None:
                loop.start()
            # The wait wakes up now and then so that a signal takes effect at once.
            while not stop.is_set():
                stop.wait(0.5)
        finally:
            if loop is not None:
                loop.stop()
            server.stop()
    return 0
