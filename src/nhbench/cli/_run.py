"""``nhbench run URI [flags]``: a benchmark, its report and its exit status.

``nhbench run`` takes Nighthawk's flag names (``--rps``, ``--connections``,
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
* 98: ``--validity strict`` and the run's validity verdict is invalid (docs/trust.md
  "Validity": the load generator was starved or saturated, the schedule was not kept, or
  the latency drifted); the reasons are on stderr and in the report. A run that fails (1)
  or breaks an ``--slo`` rule (99) exits with that status instead.
* 130: a second Ctrl-C abandoned the run before it drained; no result.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from typing import TYPE_CHECKING, Any

from .._exceptions import CoreUnavailableError, NHBenchError, OptionsError, RunError
from .._format import format_seconds
from .._signals import stop_on_signals
from ._common import NOT_OPTIONS, PROG, die

# The option models (and pydantic under them) are imported by the functions that build the
# parser or validate options, not here: ``nhbench --version`` is answered by `main` before
# either, so that it costs an interpreter start and little more (docs/benchmarks.md,
# "Start-up").
if TYPE_CHECKING:
    from collections.abc import Callable

    from ..options import Options
    from ._commands import Command, Subparsers

__all__ = ["INVALID_RUN", "LOG_LEVELS", "SLO_FAILED", "TRACE", "add_parser", "add_run_options",
           "configure_logging", "run", "run_and_report"]

#: Exit status of ``nhbench run --slo`` when the run worked but a rule failed: k6's status
#: for a failed threshold, distinct from 1 (the run failed) and 2 (bad input).
SLO_FAILED = 99
#: ``--validity strict`` and an invalid run (docs/trust.md "Validity"): the numbers are not
#: to be trusted, which is neither a broken run (1) nor a breached objective (99).
INVALID_RUN = 98


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


def add_parser(commands: Subparsers,
               command: Command) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        command.name,
        help=command.help,
        description="Send HTTP/1.1 or HTTP/2 requests (over TCP or TLS) to URI at a fixed "
        "rate (or as fast as possible) and report latency and counters. Flags follow "
        "Nighthawk's names.",
        argument_default=argparse.SUPPRESS,
        allow_abbrev=False,
    )
    from ..options import Options, add_model_flags

    add_model_flags(parser, Options, only=lambda name: name == "uri")
    add_run_options(parser)
    parser.add_argument(
        "--repeat", metavar="N", dest="repeat",
        help="Run N times back to back with the same options, one result file per run in "
        "--output-dir (which it needs), for nhbench compare DIR_A DIR_B. Without "
        "--stats-interval, live statistics are on at a twentieth of the duration, between "
        "0.1 s and 1 s, so that each run keeps interval histograms. Exit status: the "
        "first failed run's (which ends the repetition), else 99 when a run broke its SLO, "
        "else 98 when one was invalid under --validity strict, else 0 (docs/trust.md).")
    return parser


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
        die(f"{flag}: {exc}", status=2)


def _check_output_dir(directory: str) -> None:
    from ..outputs._output_dir import check_output_dir

    try:
        check_output_dir(directory)
    except ValueError as exc:
        die(f"--output-dir: {exc}", status=2)


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
        die(f"--output-dir: {exc}", status=1)
    sys.stdout.write(f"{path}\n")
    sys.stdout.flush()


def run_and_report(options: Options) -> int:
    """Run `options`, print or write the report, and return the exit status."""
    return _run_and_report(options)[0]


def _run_and_report(options: Options, *, implicit_intervals: bool = False) -> tuple[int, bool]:
    """`run_and_report`, and whether the run was interrupted (which ends a --repeat);
    `implicit_intervals`: the options' stats_interval was set for the comparison, not asked
    for (no interval lines on a stderr that is not a terminal)."""
    from ..distributed import make_benchmark
    from ..outputs import render, write_atomic

    if options.output:
        _check_output_path(options.output)
    if options.hdr_log:
        _check_output_path(options.hdr_log, "--hdr-log")
        from .._io import same_output

        if options.output and same_output(options.output, options.hdr_log):
            # The log would replace the report (or the other way round) after the run.
            die(f"--hdr-log: is the same file as --output ({options.hdr_log!r})", status=2)
    if options.output_dir:
        _check_output_dir(options.output_dir)
    configure_logging(options.verbosity)
    # Live statistics (docs/live.md): one line per interval on stderr, by default only when
    # a person watches stderr; an explicit --stats-interval forces them in any mode. --until
    # picks its own interval (docs/trust.md "Running until the numbers are tight").
    if options.stats_interval is None and sys.stderr.isatty() and not options.until:
        options = options.model_copy(update={"stats_interval": 1.0})
    live = _LiveOutput(options, implicit_intervals=implicit_intervals)
    benchmark = make_benchmark(options)
    # The first SIGINT or SIGTERM drains and reports; a second SIGINT abandons (exit 130).
    # The run's wait loop wakes every 0.1 s while something is shown or served, and on a
    # signal otherwise (Benchmark's signal wake-up fd), so a signal takes effect at once.
    with stop_on_signals(lambda signum: benchmark.stop(), notice=_notice_run_stop):
        try:
            live.start()
            result = benchmark.run(*live.callbacks())
        except OptionsError as exc:
            # The core refused the configuration (ConfigRejectedError): invalid input that
            # Python's checks did not catch, such as a TLS group OpenSSL does not know; or
            # the start refused the connections the descriptor limit cannot hold, named by
            # the option's field, spelled here as its flag.
            live.close()
            message = str(exc)
            if exc.option and message.startswith(f"{exc.option}:"):
                message = "--" + exc.option.replace("_", "-") + message[len(exc.option):]
            die(message, status=2)
        except (RunError, CoreUnavailableError, NHBenchError) as exc:
            live.close()
            die(str(exc), status=1)
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
            die(f"--output: {exc}", status=1)
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
            die(f"--hdr-log: {exc}", status=1)
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
        return 1, result.interrupted
    if result.terminated_by == "error":
        _log.error("the run ended with an error: %s", result.error or "unknown error")
        return 1, result.interrupted
    reason = result.no_success_reason
    if reason is not None:
        _log.error("%s", reason)
        return 1, result.interrupted
    # A broken run (above) exits 1 whatever the objectives say; a run that worked but was
    # too slow exits with its own status, so that shell CI can tell the two apart.
    if slo is not None and not slo:
        return SLO_FAILED, result.interrupted
    if (options.validity == "strict" and result.validity is not None
            and result.validity.verdict == "invalid"):
        _log.error("the run is invalid (--validity strict): %s",
                   "; ".join(result.validity.reasons))
        return INVALID_RUN, result.interrupted
    return 0, result.interrupted


class _LiveOutput:
    """What ``nhbench run`` shows during a run: on a terminal (stderr) the rich display with
    the interval lines above it; otherwise the plain interval lines when intervals are on,
    and nothing else; plus the Prometheus endpoint with --prometheus-listen."""

    def __init__(self, options: Options, *, implicit_intervals: bool = False) -> None:
        from .._live import IntervalLines, LiveDisplay

        # Live lines are notes: shown at info and below, not at warn and above (the
        # intervals still go into the result's timeline).
        live = LOG_LEVELS[options.verbosity] <= logging.INFO
        self._display = (
            LiveDisplay(options.effective_duration) if live and sys.stderr.isatty() else None
        )
        # Pushed metrics (--statsd, --otlp-endpoint) close intervals too; they print lines
        # only when intervals were asked for (a piped stderr stays quiet otherwise).
        asked = ((options.stats_interval is not None and not implicit_intervals)
                 or options.prometheus_listen is not None)
        self._lines = (
            IntervalLines(sys.stderr)
            if live and self._display is None and options.effective_stats_interval > 0
            and asked
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
            die(f"--prometheus-listen: cannot listen: {exc.strerror or exc}", status=1)
        # Port 0 picks a free port: the line says which, for scrapers and tests.
        _log.info("prometheus metrics on http://%s/metrics", format_address(host, port))

    def callbacks(self) -> tuple[Callable[[Any], None] | None, Callable[[Any], None] | None]:
        """`on_progress` and `on_interval` for the run, None for what nothing consumes: a
        run without a display, interval lines or an endpoint then does not wake 10 times a
        second to call them (docs/benchmarks.md "The threads besides the workers")."""
        shows = self._display is not None or self._endpoint is not None
        return (self.on_progress if shows else None,
                self.on_interval if shows or self._lines is not None else None)

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


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from pydantic import ValidationError

    from ..options import Options, format_validation_error

    data = {k: v for k, v in vars(args).items() if k not in NOT_OPTIONS}
    repeat = data.pop("repeat", None)
    try:
        options = Options.model_validate(data)
    except ValidationError as exc:
        parser.error(format_validation_error(exc, cli=True))
    if repeat is None:
        return run_and_report(options)
    return _repeat(options, repeat)


#: The most runs one --repeat may ask for.
MAX_REPEAT = 10_000


def _repeat(options: Options, text: str) -> int:
    """``--repeat N``: N runs back to back, each written as its own file in --output-dir;
    stops at the first run that fails (status 1) or is interrupted."""
    try:
        count = int(text)
    except ValueError:
        die(f"--repeat: not a whole number: {text!r}", status=2)
    if not 1 <= count <= MAX_REPEAT:
        die(f"--repeat: must be in 1..{MAX_REPEAT} (got {text!r})", status=2)
    if not options.output_dir:
        die("--repeat: needs --output-dir DIR (one result file per run)", status=2)
    # --until picks its own interval (a finer one, for its first estimate: docs/trust.md).
    implicit = options.stats_interval is None and not options.until
    if implicit:
        from .._compare import comparison_stats_interval

        interval = comparison_stats_interval(options.effective_duration)
        options = options.model_copy(update={"stats_interval": interval})
    worst = 0
    for _ in range(count):
        status, interrupted = _run_and_report(options, implicit_intervals=implicit)
        if status not in (0, SLO_FAILED, INVALID_RUN):
            return status
        worst = max(worst, status)
        if interrupted:
            break
    return worst
