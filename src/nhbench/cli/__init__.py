"""The ``nhbench`` command: ``run``, ``sweep``, ``report``, ``server``, ``demo``.

``nhbench run URI [flags]`` takes Nighthawk's flag names (``--rps``, ``--connections``,
``--concurrency``, ``--duration``, ``--open-loop``, ``--failure-predicate``…) plus nhbench's
own (``--cpus``, ``--request-timeout``, ``--percentiles``, ``--output``, ``--drain-timeout``).

Exit status:

* 0: the run completed and no failure predicate fired. A run stopped by SIGINT or SIGTERM
  also ends with 0 when no predicate fired: the partial result is printed (and written with
  ``--output``) as usual and marked ``interrupted``.
* 1: a failure predicate fired (stderr names it), no request succeeded (no 2xx response at
  all; ``--allow-no-success`` allows it), or the run could not be carried out (unresolvable
  host, extension missing, output file not writable): one line on stderr.
* 2: invalid input (unknown flag, malformed URL, unsupported scheme, out-of-range value,
  malformed ``--slo`` rule): one line on stderr, ``nhbench: error: <what>``, never a
  traceback.
* 99: the run worked (status 0 otherwise) but an ``--slo`` rule failed; the verdict table
  (every rule, measured value and threshold, then a percentile table) is on stderr, as it
  is whenever ``--slo`` is given. A run that fails (1) exits 1 whatever its rules say.
* 130: a second Ctrl-C abandoned the run before it drained; no result.

Argument errors need no compiled extension: it is imported only when a run or server starts.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from .._exceptions import CoreUnavailableError, NHBenchError, OptionsError, RunError, ServerError
from .._format import format_seconds, printable
from .._version import __version__
from ._signals import stop_on_signals

# The option models (and pydantic under them) are imported by the functions that build the
# parser or validate options, not here: ``nhbench --version`` is answered by `main` before
# either, so that it costs an interpreter start and little more (docs/benchmarks.md,
# "Start-up").
if TYPE_CHECKING:
    from ..options import Options

__all__ = ["SLO_FAILED", "main", "run_and_report"]

#: Exit status of ``nhbench run --slo`` when the run worked but a rule failed: k6's status
#: for a failed threshold, distinct from 1 (the run failed) and 2 (bad input).
SLO_FAILED = 99

PROG = "nhbench"
# Namespace entries that are argparse plumbing, not options.
_NOT_OPTIONS = frozenset({"func", "subparser", "command", "version", "argv"})


class _Parser(argparse.ArgumentParser):
    """argparse, but every error is exactly one line on stderr and exit status 2, and
    single-dash flags are never read as grouped switches (`_refuse_grouped_switches`)."""

    def error(self, message: str) -> NoReturn:
        _die(message, status=2)

    def _parse_optional(self, arg_string: str) -> Any:
        self._refuse_grouped_switches(arg_string)
        return super()._parse_optional(arg_string)

    def _refuse_grouped_switches(self, arg_string: str) -> None:
        # argparse reads "-hX..." as the switch -h followed by the flag -X with the rest as
        # its value, so Fortio's "-httpbufferkb 256" (or "-hc", "-hn") printed the help and
        # exited 0 with nothing sent, and "-kc 5" would be "-k -c 5". nhbench's flags follow
        # Fortio's and Nighthawk's single-word spellings (-qps, -cacert), where grouping
        # short switches means nothing: a single-dash word that is no flag of this command
        # but starts with a switch (a flag that takes no value) is refused by name. A short
        # flag with its value attached (-c10) is still read as argparse always has.
        # Only a parser without subcommands checks: the top-level parser also sees every
        # argument of the subcommand, whose flags (-h2, -http1.0) it does not know.
        if self._subparsers is not None or len(arg_string) < 3 or " " in arg_string:
            return
        if arg_string[0] not in self.prefix_chars or arg_string[1] in self.prefix_chars:
            return
        head = arg_string.split("=", 1)[0]
        if head in self._option_string_actions:
            return
        first = self._option_string_actions.get(arg_string[:2])
        if first is not None and first.nargs == 0:
            self.error(f"unrecognized arguments: {arg_string} (no such flag; single-dash "
                       f"switches cannot be grouped, and only -h or --help alone prints "
                       f"the help)")


def _die(message: str, status: int) -> NoReturn:
    # Messages are collapsed to one line so that scripts and people get the same, greppable
    # "nhbench: error: ..." line whatever produced it.
    one_line = " ".join(str(message).split())
    # The message may quote a file's content or name: nothing in it may drive the terminal.
    sys.stderr.write(f"{PROG}: error: {printable(one_line)}\n")
    sys.stderr.flush()
    raise SystemExit(status)


def _note(message: str) -> None:
    sys.stderr.write(f"{PROG}: {message}\n")
    sys.stderr.flush()


# ---- verbosity (nhbench run -v LEVEL) --------------------------------------------------------
#
# What `nhbench run` prints on stderr besides its one-line fatal errors (which are always
# printed) goes through the "nhbench" logger: notes at info, problems at warning or error,
# the resolved address, the core config and per-worker counters at debug (nhbench._run logs
# those), the whole core config at trace. The level is the run's --verbosity.

_log = logging.getLogger("nhbench")
TRACE = 5
logging.addLevelName(TRACE, "TRACE")
LOG_LEVELS = {
    "trace": TRACE, "debug": logging.DEBUG, "info": logging.INFO,
    "warn": logging.WARNING, "error": logging.ERROR, "critical": logging.CRITICAL,
}


class _StderrHandler(logging.StreamHandler):
    """Writes each record to whatever ``sys.stderr`` is at that moment, so that a caller
    that swaps stderr (a test, a notebook) gets the lines, as with the plain writes."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


_handler: _StderrHandler | None = None


def configure_logging(verbosity: str) -> None:
    """Send the "nhbench" logger's records at `verbosity` and above to stderr as
    ``nhbench: <message>`` lines (idempotent: one handler, whose level is updated)."""
    global _handler
    if _handler is None:
        _handler = _StderrHandler()
        _handler.setFormatter(logging.Formatter(f"{PROG}: %(message)s"))
        _log.addHandler(_handler)
        # The CLI's lines are its own; an application's root handlers must not repeat them.
        _log.propagate = False
    _log.setLevel(LOG_LEVELS[verbosity])


def _add_run_parser(commands: argparse._SubParsersAction[Any]) -> None:
    parser = commands.add_parser(
        "run",
        help="run a benchmark against a URI",
        description="Send HTTP/1.1 or HTTP/2 requests (over TCP or TLS) to URI at a fixed "
        "rate (or as fast as possible) and report latency and counters. Flags follow "
        "Nighthawk's names.",
        argument_default=argparse.SUPPRESS,
        allow_abbrev=False,
    )
    from ..options import Options, add_model_flags

    add_model_flags(parser, Options, only=lambda name: name == "uri")
    add_run_options(parser)
    parser.set_defaults(func=_cmd_run, subparser=parser)


def add_run_options(parser: argparse.ArgumentParser, *, sweep: bool = False) -> None:
    """Add the flags of ``nhbench run`` (all of them but the URI) to `parser`.

    ``nhbench sweep`` calls this too, with `sweep` True, so that every run option works in a
    sweep with the same spelling, help and validation; only the run options a sweep passes
    on to its steps (`RUN_OPTION_KEYS`) are added then: the sweep defines rps, duration and
    label its own way (`SweepOptions`) and has no use for the others.
    """
    from ..options import RUN_OPTION_KEYS, Options, add_model_flags

    # Values are taken as strings and validated by Options, so that the CLI and the Python
    # API accept the same syntax and give the same messages. The flags, their help and their
    # groups are declared on the model's fields (nhbench.options, `Flag`).
    if sweep:
        add_model_flags(parser, Options, only=lambda name: name in RUN_OPTION_KEYS)
    else:
        add_model_flags(parser, Options, skip=("uri",))


def _add_server_parser(commands: argparse._SubParsersAction[Any]) -> None:
    from ..options import ServerOptions, add_model_flags

    parser = commands.add_parser(
        "server",
        help="run the test server (Nighthawk response options, Fortio echo)",
        description="Serve HTTP/1.1 and HTTP/2 (h2c on the same port, detected by its "
        "preface or by Upgrade: h2c; over TLS, h2 by ALPN, with --tls-cert/--tls-key or "
        "--tls-self-signed) on the given addresses until SIGINT or SIGTERM. Responses "
        "follow Nighthawk's response options (static here or per request in the "
        "x-nighthawk-test-server-config header) and Fortio's echo parameters (?delay=, "
        "status=, size=, close=, header=, gzip=). Prints one line per bound address: "
        "'listening on http://HOST:PORT/' (or 'unix:PATH'), 'admin on ...', 'tcp-echo on "
        "...', 'udp-echo on ...' (https:// with TLS). See docs/server.md.",
        argument_default=argparse.SUPPRESS,
        allow_abbrev=False,
    )
    # --config and --print-stats-json are the only flags written here: they are not options
    # (one names where options come from, the other is TestServer's plumbing). Every other
    # flag, its help and its section are declared on the ServerOptions fields (`Flag`), and
    # values are validated by ServerOptions, so that the CLI, config files and TestServer
    # accept the same syntax and give the same messages.
    parser.add_argument(
        "--config", metavar="FILE",
        help="JSON or YAML file with server options, or Nighthawk's ResponseOptions (or an "
        "Envoy bootstrap of Nighthawk's test server). Flags override it.",
    )
    add_model_flags(parser, ServerOptions)
    # Used by TestServer(subprocess=True) to collect the server's statistics at exit.
    parser.add_argument("--print-stats-json", action="store_true", help=argparse.SUPPRESS)
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
    from ._sweep import add_report_parser, add_sweep_parser

    add_sweep_parser(commands)
    add_report_parser(commands)
    from ._browse import add_browse_parser

    add_browse_parser(commands)
    from ._transform import add_transform_parser

    add_transform_parser(commands)
    # Issue 15: the adaptive search and Nighthawk's gRPC service.
    from ._adapt import add_adapt_parser
    from ._service import add_service_parser

    add_adapt_parser(commands)
    add_service_parser(commands)
    # Every subcommand answers --version with the same line as `nhbench --version` (as
    # nighthawk_client --version and fortio version do), so that a script that only knows
    # the subcommand it runs can record which nhbench ran it. Added here, after all of them,
    # so that a new subcommand gets it without having to remember.
    for sub in commands.choices.values():
        if "--version" not in sub._option_string_actions:
            sub.add_argument("--version", action="version", version=_version_line(),
                             help="print the version and exit")
    return parser


#: The subcommands `build_parser` adds (tests/test_startup.py checks the two agree): `main`
#: answers ``nhbench COMMAND --version`` for these without building the parser.
_COMMANDS = frozenset({"run", "server", "demo", "sweep", "report", "browse", "transform",
                       "adapt", "service"})


def _version_line() -> str:
    return f"{PROG} {__version__}"


# --------------------------------------------------------------------------------------------
# nhbench run
# --------------------------------------------------------------------------------------------


def _notice_run_stop(signum: int, first: bool) -> None:
    # Only a person at a terminal is told; the line clears the progress line first.
    if sys.stderr.isatty():
        name = signal.Signals(signum).name
        sys.stderr.write(f"\r\x1b[K{PROG}: {name}: stopping, waiting for requests in "
                         f"flight (Ctrl-C again to abandon)\n")


def _check_output_path(path: str, flag: str = "--output") -> None:
    # Everything that can be known before the run (a missing or read-only directory, a
    # directory or a block device at the path) is refused before any load is sent; the
    # rules are nhbench._io's, shared by every file the package writes.
    from .._io import check_output_path

    try:
        check_output_path(path)
    except ValueError as exc:
        _die(f"{flag}: {exc}", status=2)


def _check_output_dir(directory: str) -> None:
    from ..outputs._output_dir import check_output_dir

    try:
        check_output_dir(directory)
    except ValueError as exc:
        _die(f"--output-dir: {exc}", status=2)


def _write_in_output_dir(options: Options, result: Any, text: str) -> None:
    # Named like Fortio's -a (outputs/_output_dir.py); the path goes to stdout, where the
    # report would have gone, so that a script can capture it.
    from ..outputs._output_dir import EXTENSIONS, default_labels, result_id, write_in_dir

    assert options.output_dir is not None
    start = result.global_result.execution_start or result.timestamp
    labels = " ".join(options.label) if options.label else default_labels(options.uri)
    extension = EXTENSIONS.get(options.output_format, ".txt")
    try:
        path = write_in_dir(options.output_dir, result_id(start.timestamp(), labels),
                            extension, text)
    except OSError as exc:
        _die(f"--output-dir: {exc}", status=1)
    sys.stdout.write(f"{path}\n")
    sys.stdout.flush()


def run_and_report(options: Options) -> int:
    """Run `options`, print or write the report, and return the exit status."""
    from ..distributed import make_benchmark
    from ..outputs import render, write_atomic

    if options.output:
        _check_output_path(options.output)
    if options.hdr_log:
        _check_output_path(options.hdr_log, "--hdr-log")
        from .._io import same_output

        if options.output and same_output(options.output, options.hdr_log):
            # The log would replace the report (or the other way round) after the run.
            _die(f"--hdr-log: is the same file as --output ({options.hdr_log!r})", status=2)
    if options.output_dir:
        _check_output_dir(options.output_dir)
    configure_logging(options.verbosity)
    # Live statistics (docs/live.md): one line per interval on stderr, by default only when
    # a person watches stderr; an explicit --stats-interval forces them in any mode.
    if options.stats_interval is None and sys.stderr.isatty():
        options = options.model_copy(update={"stats_interval": 1.0})
    live = _LiveOutput(options)
    benchmark = make_benchmark(options)
    # The first SIGINT or SIGTERM drains and reports; a second SIGINT abandons (exit 130).
    # The run's wait loop wakes every 0.1 s, so a signal takes effect within that.
    with stop_on_signals(lambda signum: benchmark.stop(), notice=_notice_run_stop):
        try:
            live.start()
            result = benchmark.run(live.on_progress, live.on_interval)
        except OptionsError as exc:
            # The core refused the configuration (ConfigRejectedError): invalid input that
            # Python's checks did not catch, such as a TLS group OpenSSL does not know.
            live.close()
            _die(str(exc), status=2)
        except (RunError, CoreUnavailableError, NHBenchError) as exc:
            live.close()
            _die(str(exc), status=1)
        finally:
            live.close()
    text = render(result, options.output_format)
    if options.output_dir:
        _write_in_output_dir(options, result, text)
    elif options.output:
        try:
            write_atomic(options.output, text)
        except OSError as exc:
            # A runtime failure (a full disk, the reader of a FIFO gone): the run happened.
            _die(f"--output: {exc}", status=1)
        if sys.stderr.isatty():
            _log.info("wrote %s output to %s", options.output_format, options.output)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    if options.hdr_log:
        from ..outputs._hdrlog import write_hdr_log

        try:
            write_hdr_log(options.hdr_log, result)
        except OSError as exc:
            _die(f"--hdr-log: {exc}", status=1)
    if result.interrupted:
        _log.warning("interrupted after %s: the result is partial",
                     format_seconds(result.duration))
    slo = result.check_slo(*options.slo) if options.slo else None
    if slo is not None:
        # The verdict goes to stderr so that stdout stays the report (JSON stays parseable).
        sys.stderr.write(f"{slo}\n")
        sys.stderr.flush()
    if result.failed_predicates:
        fired = "; ".join(str(predicate) for predicate in result.fired)
        # The first error says why (a refused port, OpenSSL's reason for a failed handshake).
        cause = f" (first error: {result.error})" if result.error else ""
        _log.error("failure predicate fired: %s%s", fired, cause)
        return 1
    if result.terminated_by == "error":
        _log.error("the run ended with an error: %s", result.error or "unknown error")
        return 1
    reason = result.no_success_reason
    if reason is not None:
        _log.error("%s", reason)
        return 1
    # A broken run (above) exits 1 whatever the objectives say; a run that worked but was
    # too slow exits with its own status, so that shell CI can tell the two apart.
    if slo is not None and not slo:
        return SLO_FAILED
    return 0


class _LiveOutput:
    """What ``nhbench run`` shows during a run: on a terminal (stderr) the rich display with
    the interval lines above it; otherwise the plain interval lines when intervals are on,
    and nothing else; plus the Prometheus endpoint with --prometheus-listen."""

    def __init__(self, options: Options) -> None:
        from .._live import IntervalLines, LiveDisplay

        # Live lines are notes: shown at info and below, not at warn and above (the
        # intervals still go into the result's timeline).
        live = LOG_LEVELS[options.verbosity] <= logging.INFO
        self._display = (
            LiveDisplay(options.effective_duration) if live and sys.stderr.isatty() else None
        )
        self._lines = (
            IntervalLines(sys.stderr)
            if live and self._display is None and options.effective_stats_interval > 0
            else None
        )
        self._endpoint: Any = None
        if options.prometheus_listen is not None:
            from .._prometheus import PrometheusEndpoint
            from ..options import parse_address

            self._endpoint = PrometheusEndpoint(*parse_address(options.prometheus_listen))

    def start(self) -> None:
        if self._endpoint is None:
            return
        from ..options import format_address

        try:
            host, port = self._endpoint.start()
        except OSError as exc:
            _die(f"--prometheus-listen: cannot listen: {exc.strerror or exc}", status=1)
        # Port 0 picks a free port: the line says which, for scrapers and tests.
        _log.info("prometheus metrics on http://%s/metrics", format_address(host, port))

    def on_progress(self, progress: Any) -> None:
        if self._display is not None:
            self._display.on_progress(progress)
        if self._endpoint is not None:
            self._endpoint.on_progress(progress)

    def on_interval(self, record: Any) -> None:
        if self._display is not None:
            self._display.on_interval(record)
        elif self._lines is not None:
            self._lines(record)
        if self._endpoint is not None:
            self._endpoint.on_interval(record)

    def close(self) -> None:
        if self._display is not None:
            self._display.close()
        if self._endpoint is not None:
            self._endpoint.stop()
            self._endpoint = None


def _cmd_run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from pydantic import ValidationError

    from ..options import Options, format_validation_error

    data = {k: v for k, v in vars(args).items() if k not in _NOT_OPTIONS}
    try:
        options = Options.model_validate(data)
    except ValidationError as exc:
        parser.error(format_validation_error(exc, cli=True))
    return run_and_report(options)


# --------------------------------------------------------------------------------------------
# nhbench server
# --------------------------------------------------------------------------------------------


def server_options_from_args(
    args: argparse.Namespace, parser: argparse.ArgumentParser
) -> Any:
    """ServerOptions from the parsed flags over the --config file; errors exit 2."""
    from pydantic import ValidationError

    from ..options import ServerOptions, format_validation_error, load_config_file

    data = {k: v for k, v in vars(args).items()
            if k not in _NOT_OPTIONS and k not in ("print_stats_json", "config")}
    config_name = getattr(args, "config", None)
    base: dict[str, Any] = {}
    if config_name is not None:
        try:
            base = load_config_file(config_name)
        except ValueError as exc:
            parser.error(f"--config: {exc}")
    try:
        return ServerOptions.model_validate({**base, **data})
    except ValidationError as exc:
        parser.error(format_validation_error(exc, ServerOptions, cli=True, cli_keys=data.keys(),
                                            config_name=config_name))


def _cmd_server(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from .._server import TestServer, address_lines, stats_line

    options = server_options_from_args(args, parser)
    stop = threading.Event()
    # Every SIGINT or SIGTERM only stops serving: the final counters are always printed.
    with stop_on_signals(lambda signum: stop.set(), second_sigint_aborts=False):
        server = TestServer.from_options(options)
        try:
            try:
                server.start()
            except (ServerError, CoreUnavailableError) as exc:
                _die(str(exc), status=1)
            except OSError as exc:  # the address file could not be written
                _die(f"--address-file: cannot write {options.address_file!r}: "
                     f"{exc.strerror or exc}", status=1)
            lines = address_lines(
                [entry["url"] for entry in server.report()["listen"]],
                server.admin_url if server.admin_address is not None else None,
                server.tcp_echo_addresses,
                server.udp_echo_addresses,
            )
            sys.stdout.write("".join(line + "\n" for line in lines))
            sys.stdout.flush()
            if options.tls_ca_out:
                _note(f"TLS: self-signed certificate written to {options.tls_ca_out} "
                      f"(clients: --cacert {options.tls_ca_out})")
            elif options.tls_self_signed:
                _note("TLS: self-signed certificate; write it out for clients with --tls-ca-out "
                      "FILE (or let them skip verification: nhbench run -k, curl -k)")
            while not stop.is_set():
                stop.wait(0.5)
        finally:
            server.stop()
    try:
        stats = server.stats()
    except ServerError:
        stats = {}
    if getattr(args, "print_stats_json", False):
        sys.stdout.write(stats_line(stats) + "\n")
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
    from . import _demo

    argv: list[str] = []
    for name in ("rps", "duration", "connections", "output_format"):
        if hasattr(args, name):
            argv += ["--" + name.replace("_", "-"), str(getattr(args, name))]
    return _demo.main(argv)


# --------------------------------------------------------------------------------------------


def _escape_unencodable(exc: UnicodeError) -> tuple[str, int]:
    # \uXXXX (a surrogate pair above U+FFFF): JSON's and YAML's own escape, so a report
    # stays valid and decodes to the same text, and a person still sees which character.
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    escaped = []
    for char in exc.object[exc.start:exc.end]:
        code = ord(char)
        if code > 0xFFFF:
            code -= 0x10000
            escaped.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
        else:
            escaped.append(f"\\u{code:04x}")
    return "".join(escaped), exc.end


def _robust_standard_streams() -> None:
    """Make stdout and stderr escape what their encoding cannot hold instead of raising:
    with PYTHONIOENCODING=ascii (or a C locale on an old Python) a non-ASCII label or URL
    gave a UnicodeEncodeError traceback when the report was written, after the run."""
    import codecs

    try:
        codecs.lookup_error("nhbench-escape")
    except LookupError:
        codecs.register_error("nhbench-escape", _escape_unencodable)
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and getattr(stream, "errors", None) == "strict":
            try:
                reconfigure(errors="nhbench-escape")
            except (OSError, ValueError):
                pass


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``nhbench`` console script; returns the exit status."""
    _robust_standard_streams()
    given = list(sys.argv[1:] if argv is None else argv)
    # ``nhbench --version`` and ``nhbench COMMAND --version`` print the same line as the
    # parser would, without building it: building it imports every option model, which is
    # most of what a start costs. Anything else (--version among other arguments, an
    # unknown command) goes through the parser, which answers as it always has.
    if given == ["--version"] or (len(given) == 2 and given[0] in _COMMANDS
                                  and given[1] == "--version"):
        sys.stdout.write(_version_line() + "\n")
        return 0
    parser = build_parser()
    args = parser.parse_args(argv)
    # The command line as given, for the sweep's manifest (no flag takes a secret).
    args.argv = given
    if args.version:
        sys.stdout.write(_version_line() + "\n")
        return 0
    if args.command is None:
        parser.error("missing command: choose run, sweep, report, server or demo "
                     "(see nhbench --help)")
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
