"""The ``nhbench`` command: ``run``, ``server``, ``demo``.

``nhbench run URI [flags]`` takes Nighthawk's flag names (``--rps``, ``--connections``,
``--concurrency``, ``--duration``, ``--open-loop``, ``--failure-predicate``…) plus nhbench's
own (``--cpus``, ``--request-timeout``, ``--percentiles``, ``--output``, ``--drain-timeout``).

Exit status:

* 0: the run completed and no failure predicate fired. A run stopped by SIGINT or SIGTERM
  also ends with 0 when no predicate fired: the partial result is printed (and written with
  ``--output``) as usual and marked ``interrupted``.
* 1: a failure predicate fired (stderr names it), or the run could not be carried out
  (unresolvable host, extension missing, output file not writable): one line on stderr.
* 2: invalid input (unknown flag, malformed URL, unsupported scheme, out-of-range value):
  one line on stderr, ``nhbench: error: <what>``, never a traceback.
* 130: a second Ctrl-C abandoned the run before it drained; no result.

Argument errors need no compiled extension: it is imported only when a run or server starts.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn

from pydantic import ValidationError

from .._exceptions import CoreUnavailableError, NHBenchError, OptionsError, RunError, ServerError
from .._options import Options, format_validation_error
from .._version import __version__

__all__ = ["main", "run_and_report"]

PROG = "nhbench"
# Namespace entries that are argparse plumbing, not options.
_NOT_OPTIONS = frozenset({"func", "subparser", "command", "version"})


class _Parser(argparse.ArgumentParser):
    """argparse, but every error is exactly one line on stderr and exit status 2."""

    def error(self, message: str) -> NoReturn:
        _die(message, status=2)


def _die(message: str, status: int) -> NoReturn:
    # Messages are collapsed to one line so that scripts and people get the same, greppable
    # "nhbench: error: ..." line whatever produced it.
    one_line = " ".join(str(message).split())
    sys.stderr.write(f"{PROG}: error: {one_line}\n")
    sys.stderr.flush()
    raise SystemExit(status)


def _note(message: str) -> None:
    sys.stderr.write(f"{PROG}: {message}\n")
    sys.stderr.flush()


def _help(field: str) -> str:
    description = Options.model_fields[field].description or ""
    return description.replace("%", "%%")


def _add_run_parser(commands: argparse._SubParsersAction[Any]) -> None:
    parser = commands.add_parser(
        "run",
        help="run a benchmark against a URI",
        description="Send HTTP/1.1 requests to URI at a fixed rate (or as fast as possible) "
        "and report latency and counters. Flags follow Nighthawk's names.",
        argument_default=argparse.SUPPRESS,
        allow_abbrev=False,
    )
    parser.add_argument("uri", metavar="URI", help=_help("uri"))
    add = parser.add_argument
    # Values are taken as strings and validated by Options, so that the CLI and the Python
    # API accept the same syntax and give the same messages.
    add("--rps", metavar="N", help=_help("rps") + " Default 5.")
    add("--connections", metavar="N", help=_help("connections") + " Default 100.")
    add("--concurrency", metavar="N|auto", help=_help("concurrency") + " Default 1.")
    add("--cpus", metavar="LIST", help=_help("cpus"))
    add("--duration", metavar="TIME", help=_help("duration"))
    add("--no-duration", action="store_true", help=_help("no_duration"))
    add("--timeout", metavar="TIME", help=_help("timeout") + " Default 30.")
    add("--request-timeout", metavar="TIME", help=_help("request_timeout") + " Default 30.")
    add("--request-method", metavar="METHOD", help=_help("request_method") + " Default GET.")
    add("--request-header", metavar="'NAME: VALUE'", action="append", help=_help("request_header"))
    add("--request-body-size", metavar="BYTES", help=_help("request_body_size"))
    add("--max-pending-requests", metavar="N", help=_help("max_pending_requests"))
    add("--max-requests-per-connection", metavar="N", help=_help("max_requests_per_connection"))
    add("--prefetch-connections", action="store_true", help=_help("prefetch_connections"))
    add("--open-loop", action="store_true", help=_help("open_loop"))
    add("--sequencer-idle-strategy", metavar="spin|poll|sleep",
        help=_help("sequencer_idle_strategy"))
    add("--burst-size", metavar="N", help=_help("burst_size"))
    add("--failure-predicate", metavar="COUNTER:N", action="append",
        help=_help("failure_predicate"))
    add("--termination-predicate", metavar="COUNTER:N", action="append",
        help=_help("termination_predicate"))
    add("--no-default-failure-predicates", action="store_true",
        help=_help("no_default_failure_predicates"))
    add("--percentiles", metavar="P,P,...", help=_help("percentiles")
        + " Default 50,75,90,99,99.9,99.99.")
    add("--output-format", metavar="human|json", help=_help("output_format") + " Default human.")
    add("--output", metavar="FILE", help=_help("output"))
    add("--label", metavar="TEXT", action="append", help=_help("label"))
    add("--address-family", metavar="auto|v4|v6", help=_help("address_family"))
    add("--drain-timeout", metavar="TIME", help=_help("drain_timeout") + " Default 5.")
    add("--start-delay", metavar="TIME", help=_help("start_delay") + " Default 0.2.")
    parser.set_defaults(func=_cmd_run, subparser=parser)


def _add_server_parser(commands: argparse._SubParsersAction[Any]) -> None:
    from .._server import ServerOptions

    fields = ServerOptions.model_fields
    parser = commands.add_parser(
        "server",
        help="run the HTTP/1.1 test server",
        description="Serve HTTP/1.1 on the given addresses until SIGINT or SIGTERM. Prints "
        "one line 'listening on http://HOST:PORT/' per bound address.",
        argument_default=argparse.SUPPRESS,
        allow_abbrev=False,
    )
    add = parser.add_argument
    add("--listen", metavar="HOST:PORT", action="append",
        help="Address to listen on; repeatable. Port 0 picks a free one. "
        "Default 127.0.0.1:0.")
    add("--workers", metavar="N", help=(fields["workers"].description or "") + " Default 1.")
    add("--cpus", metavar="LIST", help=fields["cpus"].description)
    add("--response-body-size", metavar="BYTES",
        help=(fields["response_body_size"].description or "") + " Default 0.")
    add("--static-delay", metavar="TIME",
        help="Fixed delay before each response (5ms, 0.1s). Default 0.")
    add("--response-header", metavar="'NAME: VALUE'", action="append",
        help="Extra response header; repeatable.")
    # Used by TestServer(subprocess=True) to collect the server's statistics at exit.
    add("--print-stats-json", action="store_true", help=argparse.SUPPRESS)
    parser.set_defaults(func=_cmd_server, subparser=parser)


def _add_demo_parser(commands: argparse._SubParsersAction[Any]) -> None:
    parser = commands.add_parser(
        "demo",
        help="start the embedded test server and benchmark it for 5 s",
        description="Start the embedded test server on a loopback port, run a short load "
        "against it and print the human report.",
        argument_default=argparse.SUPPRESS,
        allow_abbrev=False,
    )
    parser.add_argument("--rps", metavar="N", help="Requests per second. Default 10000.")
    parser.add_argument("--duration", metavar="TIME", help="Default 5s.")
    parser.add_argument("--connections", metavar="N", help="Default 10.")
    parser.add_argument("--output-format", metavar="human|json", help="Default human.")
    parser.set_defaults(func=_cmd_demo, subparser=parser)


def build_parser() -> argparse.ArgumentParser:
    """The complete argument parser (exposed for documentation tools and tests)."""
    parser = _Parser(
        prog=PROG,
        description="nhbench: an L7 HTTP load tester with Nighthawk's options and an "
        "exact, coordinated-omission-correct latency report.",
        allow_abbrev=False,
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    _add_run_parser(commands)
    _add_server_parser(commands)
    _add_demo_parser(commands)
    return parser


# --------------------------------------------------------------------------------------------
# nhbench run
# --------------------------------------------------------------------------------------------


@contextmanager
def _graceful_stop(stop: Callable[[], None]) -> Iterator[None]:
    """Make SIGTERM (and a first SIGINT) call `stop`; a second SIGINT aborts.

    Signal handlers run in the main thread between bytecodes; the run's wait loop wakes every
    0.1 s, so a signal takes effect within that.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    interrupted = False

    def on_signal(signum: int, frame: FrameType | None) -> None:
        nonlocal interrupted
        if signum == signal.SIGINT and interrupted:
            raise KeyboardInterrupt
        interrupted = True
        if sys.stderr.isatty():
            name = signal.Signals(signum).name
            sys.stderr.write(f"\r\x1b[K{PROG}: {name}: stopping, waiting for requests in "
                             f"flight (Ctrl-C again to abandon)\n")
        stop()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _check_output_path(path: str) -> None:
    directory = Path(path).expanduser().parent
    if not directory.is_dir():
        _die(f"--output: directory {str(directory)!r} does not exist", status=2)
    if Path(path).is_dir():
        _die(f"--output: {path!r} is a directory", status=2)
    if not os.access(directory, os.W_OK):
        _die(f"--output: directory {str(directory)!r} is not writable", status=2)


def run_and_report(options: Options) -> int:
    """Run `options`, print or write the report, and return the exit status."""
    from .._output import render, write_atomic
    from .._progress import ProgressLine
    from .._run import Benchmark

    if options.output:
        _check_output_path(options.output)
    benchmark = Benchmark(options)
    # Live progress only when a person is watching: both streams on a terminal. Nothing
    # extra is written when the output is piped or redirected.
    progress = (
        ProgressLine(options.effective_duration)
        if sys.stdout.isatty() and sys.stderr.isatty()
        else None
    )
    with _graceful_stop(benchmark.stop):
        try:
            result = benchmark.run(progress)
        except (RunError, CoreUnavailableError) as exc:
            if progress is not None:
                progress.clear()
            _die(str(exc), status=1)
        if progress is not None:
            progress.clear()
    text = render(result, options.output_format)
    if options.output:
        try:
            write_atomic(Path(options.output).expanduser(), text)
        except OSError as exc:
            _die(f"cannot write --output {options.output!r}: {exc.strerror or exc}", status=1)
        if sys.stderr.isatty():
            _note(f"wrote {options.output_format} output to {options.output}")
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    if result.interrupted:
        _note(f"interrupted after {result.duration:.3f}s: the result is partial")
    if result.failed_predicates:
        fired = "; ".join(str(predicate) for predicate in result.fired)
        _note(f"failure predicate fired: {fired}")
        return 1
    if result.terminated_by == "error":
        _note(f"the run ended with an error: {result.error or 'unknown error'}")
        return 1
    return 0


def _cmd_run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    data = {k: v for k, v in vars(args).items() if k not in _NOT_OPTIONS}
    try:
        options = Options.model_validate(data)
    except ValidationError as exc:
        parser.error(format_validation_error(exc, cli=True))
    return run_and_report(options)


# --------------------------------------------------------------------------------------------
# nhbench server
# --------------------------------------------------------------------------------------------


def _cmd_server(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from .._server import ServerOptions, TestServer

    data = {k: v for k, v in vars(args).items()
            if k not in _NOT_OPTIONS and k != "print_stats_json"}
    try:
        options = ServerOptions.model_validate(data)
    except ValidationError as exc:
        parser.error(format_validation_error(exc, cli=True, model=ServerOptions))
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    server = TestServer.from_options(options)
    try:
        try:
            server.start()
        except (ServerError, CoreUnavailableError) as exc:
            _die(str(exc), status=1)
        for url in server.urls:
            sys.stdout.write(f"listening on {url}\n")
        sys.stdout.flush()
        while not stop.is_set():
            stop.wait(0.5)
    finally:
        server.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    try:
        stats = server.stats()
    except ServerError:
        stats = {}
    if getattr(args, "print_stats_json", False):
        sys.stdout.write(f"stats {json.dumps(stats, sort_keys=True)}\n")
        sys.stdout.flush()
    if stats:
        requests = int(stats.get("requests", 0))
        connections = int(stats.get("connections_total", 0))
        _note(
            f"server stopped: {requests} request{'s' if requests != 1 else ''} on "
            f"{connections} connection{'s' if connections != 1 else ''}"
        )
    return 0


# --------------------------------------------------------------------------------------------
# nhbench demo
# --------------------------------------------------------------------------------------------


def _cmd_demo(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from .. import demo

    argv: list[str] = []
    for name in ("rps", "duration", "connections", "output_format"):
        if hasattr(args, name):
            argv += ["--" + name.replace("_", "-"), str(getattr(args, name))]
    return demo.main(argv)


# --------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``nhbench`` console script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        sys.stdout.write(f"{PROG} {__version__}\n")
        return 0
    if args.command is None:
        parser.error("missing command: choose run, server or demo (see nhbench --help)")
    try:
        return int(args.func(args, args.subparser))
    except KeyboardInterrupt:
        sys.stderr.write(f"\n{PROG}: aborted\n")
        return 130
    except BrokenPipeError:
        # The reader went away (nhbench ... | head). Point stdout at /dev/null so the
        # interpreter's final flush does not raise again, and end quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except OptionsError as exc:
        _die(str(exc), status=2)
    except NHBenchError as exc:
        _die(str(exc), status=1)
