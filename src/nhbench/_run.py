"""Run a benchmark: Options -> core config dict -> ``_core.ClientRun`` -> `Result`.

`run()` is the one-call API. `Benchmark` is the same thing in steps (start, progress, stop,
wait, result) for callers that need to stop a run from a signal handler or another thread,
as the CLI does.

The compiled extension is imported only when a run starts, so that ``import nhbench``, the
options, the result models and the CLI's argument checking work (and fail cleanly) without
it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from types import ModuleType, TracebackType
from typing import Any, Protocol

from ._core_config import client_core_config
from ._exceptions import (
    ConfigRejectedError,
    CoreError,
    CoreUnavailableError,
    OptionsError,
)
from ._groups import group_plan, refuse_unknown_group_rules
from ._progress import Progress
from ._push import MetricsPush, run_pushing
from ._result import Result
from ._timeline import IntervalRecord
from ._tracing import SpanExporter
from ._until import UntilTracker, until_check, until_stats_interval
from ._validity import worst

# `resolve` lives with the address grammar in nhbench.options; it is re-exported here because
# callers have always found it next to the run.
from .options import (
    Options,
    core_check_error,
    format_address,
    make_options,
    nofile_refusal,
    raise_nofile,
    request_specs,
    resolve,
    source_family_refusal,
    target_addresses,
    until_targets,
)

__all__ = ["Benchmark", "BenchmarkProtocol", "load_core", "resolve"]

# How often the waiting thread wakes up. Between waits Python runs signal handlers (Ctrl-C
# becomes KeyboardInterrupt only then) and the progress callback; 0.1 s keeps Ctrl-C prompt
# while costing nothing measurable (the core releases the GIL while waiting).
_POLL_INTERVAL = 0.1
# When nothing but Ctrl-C and the watchdog needs the waiting thread (no progress callback,
# no intervals, no --until), it sleeps until the watchdog's deadline, at most this long: a
# signal wakes it through Python's signal wake-up fd at once (`_signal_wakeup`), a stop
# from another thread through the same pipe, the run's end through the core's.
_IDLE_POLL_MAX = 60.0
# Slack on top of start_delay + duration + drain_timeout before the watchdog stops a run that
# should have ended, and again before it gives up on the core finishing at all.
_WATCHDOG_SLACK = 10.0
# What a run tells at debug (the resolved address, the core config, per-worker counters) and
# the problems it notices (docs/engine.md, "Reading responses and logging"); the CLI's
# --verbosity decides what of it reaches stderr.
_log = logging.getLogger(__name__)
_TRACE = 5
# Counter of responses whose --latency-response-header-name header was malformed.
_ORIGIN_LATENCY_ERRORS = "benchmark.origin_latency_header_errors"


def load_core() -> ModuleType:
    """Import the compiled extension, or raise a CoreUnavailableError saying what to do."""
    try:
        from . import _core
    except ImportError as exc:
        raise CoreUnavailableError(
            f"the compiled extension nhbench._core is not available ({exc}); "
            f"install nhbench with 'pip install .' (see the README's Quick start)"
        ) from exc
    return _core


class BenchmarkProtocol(Protocol):
    """What the callers of a run rely on, wherever it happens: `Benchmark` on this machine,
    `distributed.ClusterBenchmark` on a Ray cluster. `distributed.make_benchmark` returns
    this type, so mypy checks that both provide it; the CLI, the sweep, adapt's steps, the
    service and ``nhbench.run`` use only these two members."""

    def run(
        self,
        on_progress: Callable[[Progress], object] | None = None,
        on_interval: Callable[[IntervalRecord], object] | None = None,
    ) -> Result:
        """Run to the end and return the result (partial when stopped)."""

    def stop(self) -> None:
        """End the run gracefully; safe from a signal handler or another thread, any time."""


class Benchmark:
    """One run, in steps. ``Benchmark(uri, **options).run()`` is what `run()` does.

    `stop()` may be called from a signal handler or another thread at any time, even before
    `start()`; the run then ends gracefully and `result()` is the partial result, marked
    ``interrupted``.
    """

    def __init__(self, uri: str | Options | None = None, /, **options: Any) -> None:
        self.options: Options = make_options(uri, **options)
        refuse_unknown_group_rules(self.options)
        self._planned_groups: list[str] | None = None
        self.address: str | None = None
        self.addresses: list[str] = []
        self._run: Any = None
        self._stop_requested = False
        self._started_at = 0.0
        self._started_wall = 0.0
        self._stopped_at: float | None = None
        # The write end of the waiting thread's wake-up pipe while it sleeps in the core's
        # wait (-1 otherwise): a stop from another thread writes to it so the wait ends and
        # the watchdog's give-up is timed from the stop, not from before it. Re-entrant: a
        # signal handler (main thread) may call stop() while the waiter holds it.
        self._wake_write = -1
        self._wake_lock = threading.RLock()
        self._timeline: list[IntervalRecord] = []
        self._spans: SpanExporter | None = None
        # --until (docs/trust.md "Running until the numbers are tight"): the estimate reads
        # the live intervals, so they are turned on when none was asked for, and the
        # result says so.
        self._until: UntilTracker | None = None
        self._until_chosen = False
        self._until_stopped = False
        if self.options.until:
            assert self.options.max_duration is not None, "until needs max_duration"
            if self.options.stats_interval is None:
                self.options = self.options.model_copy(update={
                    "stats_interval": until_stats_interval(self.options.max_duration)})
                self._until_chosen = True
            self._until = UntilTracker(until_targets(self.options.until),
                                       seed=self.options.seed or 0)

    # ---- steps ----------------------------------------------------------------------------

    def start(self) -> None:
        """Resolve the host, hand the config to the core and start the workers."""
        if self._run is not None:
            raise RuntimeError("this Benchmark was already started")
        config = self._prepare()
        spans = SpanExporter.for_run(self.options, config)
        _log.debug("resolved %s to %s", self.options.target.host,
                   ", ".join(self.addresses) or self.address)
        if _log.isEnabledFor(logging.DEBUG):
            _log.debug("core config: %s", config_summary(config))
            _log.log(_TRACE, "core config (full): %s", config_summary(config, full=True))
        core = load_core()
        try:
            run = core.ClientRun(config)
        except ValueError as exc:
            raise ConfigRejectedError("the core rejected the configuration: "
                                      f"{core_check_error(str(exc), self.options.check)}") from exc
        try:
            run.start()
        except (RuntimeError, OSError, ValueError) as exc:
            # The core's failures carry its error code and name (csrc/binding/module.cpp).
            raise CoreError(
                f"could not start the workers: {exc}",
                code=getattr(exc, "code", None),
                name=getattr(exc, "name", None),
            ) from exc
        self._run = run
        if spans is not None:
            # Traces (docs/telemetry.md): a thread drains the core's spans to the collector.
            spans.start(run)
            self._spans = spans
        self._started_at = time.monotonic()
        self._started_wall = time.time()
        if self._stop_requested:
            self._stop_core()

    def preflight(self) -> None:
        """Every refusal `start()` makes before it sends anything (the descriptor limit, the
        compiled extension, the target's resolution, the source addresses' family), without
        starting: a distributed run asks each node this before any node starts
        (docs/distributed.md, "Refused before anything is sent")."""
        self._prepare()

    def _prepare(self) -> dict[str, Any]:
        # What start() checks and resolves before the core has the config; nothing here
        # connects or sends. As Go does for Fortio: the soft descriptor limit up to the hard one; then a run
        # whose connections cannot all be open at once under it is refused by name before
        # anything is resolved or sent, rather than failing connections with EMFILE.
        raise_nofile("run")
        refusal = nofile_refusal(max(self.options.connections,
                                     len(self.options.multi_target_endpoint)),
                                 self.options.workers)
        if refusal is not None:
            raise OptionsError(f"connections: {refusal}", option="connections")
        load_core()  # a node without the core says so here, before any node starts
        target = self.options.target
        unix = self.options.unix_socket_path
        proxy = self.options.proxy_endpoint
        if proxy is not None:
            # The proxy resolves the origin's name; the connections go to the proxy.
            self.address = resolve(proxy.host, proxy.port, self.options.address_family)
        elif unix:
            self.address = f"unix:{unix}"
        elif self.options.multi_target_endpoint:
            self.address = resolve(target.host, target.port, self.options.address_family)
        else:
            # --resolve and --dns-method: every address new connections may go to.
            self.addresses = target_addresses(self.options)
            self.address = self.addresses[0]
        config = self.core_config()
        sources = [host for host, _ in config.get("source_addresses", ())]
        if sources and not unix:
            destinations = [t[1] for t in config.get("targets", ()) if t[0] == "tcp"]
            refusal = source_family_refusal(
                sources, destinations or self.addresses or [self.address])
            if refusal is not None:
                raise OptionsError(f"source_address: {refusal}", option="source_address")
        return config

    def core_config(self) -> dict[str, Any]:
        """The core's configuration for this run (the host already resolved). A front-end
        whose tool means more than `Options` holds extends it here: ``nhbench fortio``'s
        ``warmup_stop_on_error``."""
        assert self.address is not None, "core_config() is called by start()"
        return client_core_config(self.options, self.address, addresses=self.addresses)

    def endpoint_names(self) -> list[str]:
        """What the result's per-endpoint entries are named, in the core's order: the
        several targets as given, or the addresses (``ip:port``) connections spread over."""
        if self.options.multi_target_endpoint:
            return list(self.options.multi_target_endpoint)
        port = self.options.target.port
        return [format_address(address, port) for address in self.addresses]

    def stop(self) -> None:
        """Ask the run to stop gracefully (idempotent, safe from signal handlers)."""
        self._stop_requested = True
        if self._run is not None:
            self._stop_core()
            self._wake_waiter()

    def _wake_waiter(self) -> None:
        with self._wake_lock:
            if self._wake_write >= 0:
                with contextlib.suppress(OSError):  # full pipe: a wake-up is already there
                    os.write(self._wake_write, b"\0")

    @contextlib.contextmanager
    def _waiting(self, idle: bool) -> Iterator[int]:
        # The signal wake-up pipe, published for stop() while the wait may use it; cleared
        # under the lock before the pipe is closed, so stop() never writes to a closed (and
        # perhaps reused) descriptor.
        with _signal_wakeup(idle) as (read_fd, write_fd):
            with self._wake_lock:
                self._wake_write = write_fd
            try:
                yield read_fd
            finally:
                with self._wake_lock:
                    self._wake_write = -1

    @property
    def stop_requested(self) -> bool:
        return self._stop_requested

    def wait(self, timeout: float | None = None) -> bool:
        """Wait up to `timeout` seconds; True once the run has finished."""
        return bool(self._core_run().wait(timeout))

    def progress(self) -> Progress:
        """A live snapshot (cheap; any time after start)."""
        snapshot = self._core_run().progress()
        return Progress.from_core(snapshot, self.endpoint_names(),
                                  self._group_names(snapshot.get("groups")))

    def _group_names(self, groups: Any) -> list[str]:
        # The planned groups' names (by request kind or target), worked out once, when the
        # core first shows groups of that kind: a header's values name themselves.
        if not groups or groups[0].get("kind") != "index":
            return []
        if self._planned_groups is None:
            plan = group_plan(self.options, request_specs(self.options))
            self._planned_groups = list(plan.names) if plan is not None else []
        return self._planned_groups

    def intervals(self) -> list[IntervalRecord]:
        """The live-statistics intervals closed since the last call (docs/live.md); empty
        when ``stats_interval`` is off. They also go into ``result().timeline``."""
        if not self.options.effective_stats_interval:
            return []
        # Every interval keeps its histogram (encoded, about half a kilobyte): the
        # comparison of runs resamples them (docs/trust.md, "Comparing runs") and
        # --hdr-log writes them.
        latency = self.options.pushes_metrics
        records = [
            IntervalRecord.from_core(d, keep_histogram=True, keep_latency=latency)
            for d in self._core_run().take_intervals()
        ]
        self._timeline += records
        if self._until is not None:
            self._until.add(records)
        return records

    def result(self) -> Result:
        """The result, once `wait()` returned True."""
        # compact: the histograms' buckets as packed bytes, their percentiles walked in C;
        # (index, count) tuples only when a consumer asks (docs/benchmarks.md "The threads
        # besides the workers").
        core = self._core_run().result(compact=True)
        self.intervals()  # the last, partial interval is ready once the run has finished
        if self._spans is not None:
            core["global"]["counters"].update(self._spans.finish())
        # A run that --until stopped was not interrupted: it ended as asked.
        result = Result.from_core(core, self.options, timeline=self._timeline,
                                  endpoints=self.endpoint_names(),
                                  interrupted=False if self._until_stopped else None)
        if self._until is not None:
            self._until_result(result)
        if _log.isEnabledFor(logging.DEBUG):
            for worker in result.results:
                counters = worker.counter_values.nonzero()
                _log.debug("%s counters: %s", worker.name,
                           ", ".join(f"{name}={value}" for name, value in counters.items())
                           or "none")
        bad = result.counters[_ORIGIN_LATENCY_ERRORS]
        if bad:
            # Nighthawk logs "Bad origin delta" as it happens; one line at the end says the
            # same without a line per response.
            _log.warning("%d response%s carried a malformed or repeated %s header (not one "
                         "non-negative integer of nanoseconds); not in %s", bad,
                         "s" if bad != 1 else "", self.options.latency_response_header_name,
                         "benchmark_http_client.origin_latency_statistic")
        return result

    def run(
        self,
        on_progress: Callable[[Progress], object] | None = None,
        on_interval: Callable[[IntervalRecord], object] | None = None,
    ) -> Result:
        """Start (unless started), wait for the end and return the result.

        Ctrl-C (KeyboardInterrupt) stops the run gracefully and returns the partial result;
        a second Ctrl-C while it drains gives up and propagates. `on_progress` is called with
        a `Progress` about every 0.1 s; `on_interval` with each `IntervalRecord` as its
        interval closes (with ``stats_interval`` on), the last one included.
        """
        return run_pushing(self._metrics_push(),
                           lambda interval: self._run_to_end(on_progress, interval), on_interval)

    def _metrics_push(self) -> MetricsPush | None:
        # Built before the run starts: an OTLP endpoint without its extra refuses the run
        # before anything is sent.
        return MetricsPush(self.options) if self.options.pushes_metrics else None

    def _run_to_end(
        self,
        on_progress: Callable[[Progress], object] | None,
        on_interval: Callable[[IntervalRecord], object] | None,
    ) -> Result:
        if self._run is None:
            self.start()
        run = self._core_run()
        idle = (on_progress is None and on_interval is None and self._until is None
                and not self.options.effective_stats_interval)
        try:
            with self._waiting(idle) as wake_fd:
                while not run.wait(_POLL_INTERVAL if wake_fd < 0 else self._idle_timeout(),
                                   wake_fd):
                    if wake_fd >= 0:
                        _drain(wake_fd)
                    if on_progress is not None:
                        on_progress(self.progress())
                    self._deliver(on_interval)
                    self._check_until()
                    self._watchdog()
        except KeyboardInterrupt:
            if self._stop_requested:
                raise
            self.stop()
            while not run.wait(_POLL_INTERVAL):
                self._watchdog()
        except BaseException:
            # Whatever went wrong on this side (a failing progress callback, the watchdog),
            # the workers must not go on loading the target unattended.
            self.stop()
            raise
        self._deliver(on_interval)
        return self.result()

    # ---- context manager: a run never outlives the block that started it ------------------

    def __enter__(self) -> Benchmark:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._run is not None and not self._run.wait(0):
            self.stop()
            self._run.wait(self.options.drain_timeout + _WATCHDOG_SLACK)

    # ---- internals ------------------------------------------------------------------------

    def _core_run(self) -> Any:
        if self._run is None:
            raise RuntimeError("this Benchmark has not been started")
        return self._run

    def _deliver(self, on_interval: Callable[[IntervalRecord], object] | None) -> None:
        for record in self.intervals():
            if on_interval is not None:
                on_interval(record)

    def _check_until(self) -> None:
        # Estimated in this (the waiting) thread: the workers run on in the core meanwhile,
        # and an estimate costs tens of milliseconds (docs/trust.md).
        if self._until is None or self._stop_requested or not self._until.step():
            return
        reached = self._until.reached
        assert reached is not None
        _log.info("--until reached after %.3g s of intervals: %s; stopping", reached.seconds,
                  ", ".join(f"{s.statistic} ±{(s.half_width or 0) * 100:.2g}%"
                            for s in reached.statistics))
        self._until_stopped = True
        self.stop()

    def _until_result(self, result: Result) -> None:
        assert self._until is not None and self.options.max_duration is not None
        if self._until_stopped:
            result.terminated_by = "until"
            ended = "reached"
        elif result.interrupted:
            ended = "the run was stopped first"
        elif result.terminated_by == "duration":
            ended = f"max_duration {self.options.max_duration:g} s reached first"
        else:
            ended = f"the run ended first ({result.terminated_by})"
        until = self._until.summary(max_duration=self.options.max_duration,
                                    stats_interval=self.options.effective_stats_interval,
                                    chosen=self._until_chosen, ended=ended)
        result.until = until
        if result.validity is not None:
            checks = [*result.validity.checks, until_check(until)]
            result.validity = result.validity.model_copy(
                update={"checks": checks, "verdict": worst(checks)})

    def _stop_core(self) -> None:
        if self._stopped_at is None:
            self._stopped_at = time.monotonic()
        self._run.stop()

    def _watchdog(self) -> None:
        # The core ends a run by itself (duration, predicate, stop). Should it fail to, the
        # run must still end: stop it well after it should have finished, and give up with an
        # error if even the stop does not finish it. This is what keeps "never a hang" true
        # whatever the target does.
        due = self._watchdog_due()
        if due is None or time.monotonic() <= due:
            return
        if self._stopped_at is not None:
            limit = self.options.drain_timeout + _WATCHDOG_SLACK
            raise CoreError(f"the run did not finish within {limit:g} s of being stopped")
        self.stop()

    def _watchdog_due(self) -> float | None:
        """When (time.monotonic()) the watchdog acts unless the run has ended by then: a
        stopped run's give-up, or the stop of a run past its planned end; None for a run
        without a planned end."""
        options = self.options
        if self._stopped_at is not None:
            return self._stopped_at + options.drain_timeout + _WATCHDOG_SLACK
        duration = options.effective_duration
        if duration is None:
            return None
        deadline = options.start_delay + duration + options.drain_timeout + _WATCHDOG_SLACK
        # Schedule shapes: a scheduled start waits first, and a warm-up is one
        # more phase with its own drain.
        if options.scheduled_start is not None:
            deadline += max(0.0, options.scheduled_start - self._started_wall)
        if options.warmup is not None:
            deadline += options.warmup + options.drain_timeout
        elif options.simple_warmup or options.sequential_warmup:
            count = 1 if options.simple_warmup else options.connections
            deadline += count * (options.request_timeout or options.timeout) + options.timeout
        return self._started_at + deadline

    def _idle_timeout(self) -> float:
        # Until the watchdog's next deadline (a little past it), at most a minute.
        due = self._watchdog_due()
        if due is None:
            return _IDLE_POLL_MAX
        return min(_IDLE_POLL_MAX, max(_POLL_INTERVAL, due - time.monotonic() + _POLL_INTERVAL))


@contextlib.contextmanager
def _signal_wakeup(wanted: bool) -> Iterator[tuple[int, int]]:
    """A pipe Python's signal handler writes to (`signal.set_wakeup_fd`): its ends (read,
    write), the read end for the core's wait to poll beside the run's end: a wait then lasts
    until the run ends or a signal arrives, not a 0.1 s tick (10 wake-ups a second for a
    whole run). (-1, -1) (poll as before) when not `wanted`, outside the main thread (where
    no handler runs) or when the program already has a wake-up fd (asyncio's): that one is
    left alone."""
    if not wanted or threading.current_thread() is not threading.main_thread():
        yield -1, -1
        return
    read_fd, write_fd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        previous = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    except ValueError:
        previous = None
    try:
        if previous != -1:
            if previous is not None:
                signal.set_wakeup_fd(previous)
            yield -1, -1
            return
        try:
            yield read_fd, write_fd
        finally:
            signal.set_wakeup_fd(-1)
    finally:
        os.close(read_fd)
        os.close(write_fd)


def _drain(fd: int) -> None:
    # The signal numbers Python wrote; its handlers run on their own once the core returns.
    with contextlib.suppress(BlockingIOError):
        while os.read(fd, 512):
            pass


def config_summary(config: dict[str, Any], *, full: bool = False) -> str:
    """The core config as one ``key=value`` line for the debug log: bytes as their length
    (the request may be megabytes), long lists cut short; `full` shows the request head and
    every list entry (trace)."""
    parts = []
    for key, value in config.items():
        if key == "specs" and isinstance(value, (list, tuple)) and not full:
            # The request set: its size, as a single request's bytes are shown.
            size = sum(len(spec.get("request") or b"") for spec in value
                       if isinstance(spec, dict))
            text = f"<{len(value)} request{'s' if len(value) != 1 else ''}, {size} bytes>"
        elif isinstance(value, (bytes, bytearray)):
            text = f"<{len(value)} bytes>"
            if full:
                head = bytes(value).split(b"\r\n\r\n", 1)[0][:2048]
                text += f" {head!r}"
        elif isinstance(value, (list, tuple)) and not full and len(value) > 8:
            text = f"[{', '.join(map(repr, value[:8]))}, ... ({len(value)} entries)]"
        else:
            text = repr(value)
        parts.append(f"{key}={text}")
    return " ".join(parts)
