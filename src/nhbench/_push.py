"""Pushed metrics (docs/telemetry.md): a run's live intervals sent to statsd servers and to an
OTLP/HTTP endpoint while it goes.

`MetricsPush` sits on the run's ``on_interval``: it adds the closed intervals up (counter
growth, the exact latency count, sum, min, max and HdrHistogram buckets, which the records
carry when made with ``keep_latency``) and, once a flush interval has passed, hands one
`Flush` to every sink. Each sink sends from a thread of its own through a short queue, so a
sink that is down, refuses or is slow never holds up the run: what it cannot take is counted
as not delivered, and `MetricsPush.close` (the run's end: a last flush of what is left)
waits a bounded time and then reports each sink's failures once, in one line.

* `StatsdSink`: Envoy's StatsdSink line format (``PREFIX.NAME:VALUE|c``, ``|g``, ``|ms``)
  over UDP (a connected socket, so that a refused port is noticed) or TCP (one connection,
  lines ending in ``\\n``, reconnected at the next flush after a failure).
* `OtlpSink`: OpenTelemetry metrics built from the interval data and exported with the
  SDK's OTLP/HTTP exporter (the ``otlp`` extra, imported only here and only then).

Over a run the pushed data adds up exactly to the result: the statsd counter deltas and the
OTLP counter points to the run's counters, the latency counts to the count of
``benchmark_http_client.scheduled_to_response`` and the OTLP histogram sums to its sum.
"""

from __future__ import annotations

import logging
import queue
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from . import _histogram
from ._exceptions import NHBenchError
from ._names import SCHEDULED_TO_RESPONSE, error_total
from ._timeline import IntervalRecord

if TYPE_CHECKING:
    from .options import Options

R = TypeVar("R")

__all__ = [
    "LATENCY_BOUNDS",
    "Flush",
    "MetricsPush",
    "OtlpSink",
    "StatsdSink",
    "run_pushing",
    "statsd_lines",
]

_log = logging.getLogger(__name__)
_NS = 1_000_000_000
# The statsd names' middle part for the counters: Nighthawk's store keeps every counter of
# worker N under cluster.N. (its cluster is named after the worker); nhbench sums the
# workers, so the sum goes under one name that says whose it is.
STATSD_CLUSTER = "nhbench"
# One UDP datagram carries lines up to this size (a safe payload on a 1500-byte path).
_DATAGRAM = 1432
# Pushes waiting for a slow sink; past this a flush is counted as not delivered.
_QUEUE = 16
# Socket time-outs (s): connecting and sending to a statsd server.
_STATSD_TIMEOUT = 1.0
# An OTLP export's time-out (s), retries included.
_OTLP_TIMEOUT = 5.0
# What close() waits for each sink to send what is queued (s).
_CLOSE_WAIT = {"statsd": 2.0, "otlp": _OTLP_TIMEOUT + 1.0}
#: The OTLP latency histogram's explicit bucket upper bounds, seconds: 1-2-5 from 1 µs to
#: 50 s, then 60 s (the core's highest trackable latency).
LATENCY_BOUNDS: tuple[float, ...] = (
    *(m * 10.0 ** e for e in range(-6, 2) for m in (1, 2, 5)), 60.0,
)
_BOUNDS_NS = tuple(round(b * _NS) for b in LATENCY_BOUNDS)


@dataclass
class Flush:
    """What one push carries: the stretch of the run since the previous push."""

    start: float  # seconds from the first scheduled release
    end: float
    time_ns: int  # wall-clock time of the push (ns since the epoch)
    counters: dict[str, int]  # growth over the stretch: every counter used so far (0 too)
    count: int = 0  # latency (scheduled_to_response), ns
    sum: float = 0.0
    min: int = 0
    max: int = 0
    buckets: dict[int, int] = field(default_factory=dict)  # HdrHistogram index -> count

    @property
    def duration(self) -> float:
        return max(self.end - self.start, 0.0)

    def percentiles(self) -> dict[str, int]:
        """p50, p90, p99 and max of the stretch's latency (ns); empty without responses."""
        if not self.count:
            return {}
        points = _histogram.percentile_points(
            self.buckets.items(), (0.5, 0.9, 0.99), exact_min=self.min, exact_max=self.max)
        out = {name: p.value for name, p in zip(("p50", "p90", "p99"), points, strict=True)}
        out["max"] = self.max
        return out


# ---- statsd --------------------------------------------------------------------------------


def _number(value: float) -> str:
    return format(value, ".9g")


def statsd_lines(flush: Flush, prefix: str) -> list[str]:
    """The statsd lines of one flush, in Envoy's StatsdSink format (docs/telemetry.md):

    * counters: ``PREFIX.cluster.nhbench.NAME:DELTA|c``, every counter used so far (as
      Envoy flushes every counter that was ever incremented, a delta of 0 included);
    * gauges: ``PREFIX.nhbench.rps`` and, with responses, ``PREFIX.nhbench.latency_p50_us``
      (p90, p99, max): integers, as Envoy's gauges;
    * timers: ``PREFIX.benchmark_http_client.scheduled_to_response:MS|ms|@RATE``, one line
      per non-empty latency bucket, its value in milliseconds at the histogram's resolution
      and RATE = 1/count (statsd's sample rate), so a statsd server counts every response.
    """
    lines = [f"{prefix}.cluster.{STATSD_CLUSTER}.{name}:{delta}|c"
             for name, delta in sorted(flush.counters.items())]
    duration = flush.duration
    lines.append(f"{prefix}.nhbench.rps:{round(flush.count / duration) if duration else 0}|g")
    for name, ns in flush.percentiles().items():
        lines.append(f"{prefix}.nhbench.latency_{name}_us:{round(ns / 1000)}|g")
    reference = _histogram.new_histogram()
    timer = f"{prefix}.{SCHEDULED_TO_RESPONSE}"
    for index, count in sorted(flush.buckets.items()):
        value = reference.get_value_from_index(index)
        # The middle of the bucket, kept within the stretch's exact min and max.
        ns = (reference.get_lowest_equivalent_value(value)
              + reference.get_highest_equivalent_value(value)) // 2
        ns = min(max(ns, flush.min), flush.max)
        rate = "" if count == 1 else f"|@{1.0 / count!r}"
        lines.append(f"{timer}:{_number(ns / 1e6)}|ms{rate}")
    return lines


def _datagrams(lines: Iterable[str]) -> Iterable[bytes]:
    # Several lines per datagram, separated by newlines (statsd's multi-metric packets).
    batch: list[bytes] = []
    size = 0
    for line in lines:
        data = line.encode("ascii")
        if batch and size + 1 + len(data) > _DATAGRAM:
            yield b"\n".join(batch)
            batch, size = [], 0
        size += len(data) + (1 if batch else 0)
        batch.append(data)
    if batch:
        yield b"\n".join(batch)


# ---- sinks ---------------------------------------------------------------------------------


class _Sink:
    """A sink's thread, queue and failure count. Subclasses implement `send` and `name`."""

    kind = ""

    def __init__(self, name: str) -> None:
        self.name = name
        self.pushes = 0
        self.failures = 0
        self.first_error: str | None = None
        self._queue: queue.Queue[Flush | None] = queue.Queue(_QUEUE)
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name=f"nhbench-push-{self.kind}",
                                        daemon=True)
        self._thread.start()

    def send(self, flush: Flush) -> None:
        raise NotImplementedError

    def shut(self) -> None:
        """Release what the sink holds (sockets); called on its thread at the end."""

    def submit(self, flush: Flush) -> None:
        with self._lock:
            self.pushes += 1
        try:
            self._queue.put_nowait(flush)
        except queue.Full:
            self._failed("too slow: the push queue is full")

    def close(self, deadline: float) -> None:
        """Send what is queued, waiting until `deadline` (time.monotonic()) at most; what is
        still queued then is counted as not delivered."""
        try:
            self._queue.put(None, timeout=max(deadline - time.monotonic(), 0.0))
        except queue.Full:
            pass
        self._thread.join(max(deadline - time.monotonic(), 0.0))
        if self._thread.is_alive():
            pending = self._queue.qsize()
            self._failed(f"still sending after {_CLOSE_WAIT[self.kind]:g} s; given up",
                         count=max(pending, 1))

    def abandon(self) -> None:
        """Stop without sending what is queued (counted as not delivered)."""
        dropped = 0
        while True:
            try:
                if self._queue.get_nowait() is not None:
                    dropped += 1
            except queue.Empty:
                break
        if dropped:
            self._failed("the run was given up", count=dropped)
        try:
            self._queue.put_nowait(None)
        except queue.Full:
            pass

    def _failed(self, why: str, count: int = 1) -> None:
        with self._lock:
            self.failures += count
            if self.first_error is None:
                self.first_error = why

    def _loop(self) -> None:
        while True:
            flush = self._queue.get()
            if flush is None:
                break
            try:
                self.send(flush)
            except Exception as exc:  # noqa: BLE001 - any failure to push is counted, not raised
                self._failed(_describe(exc))
        try:
            self.shut()
        except Exception:  # noqa: BLE001, S110 - closing a socket that already failed
            pass

    def report(self) -> str | None:
        """One line when some pushes failed, else None."""
        with self._lock:
            if not self.failures:
                return None
            return (f"{self.name}: {min(self.failures, self.pushes)} of {self.pushes} pushes "
                    f"not delivered (first: {self.first_error})")


def _describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


class StatsdSink(_Sink):
    """Statsd over UDP or TCP (`address` is ``udp://HOST:PORT`` or ``tcp://HOST:PORT``)."""

    kind = "statsd"

    def __init__(self, address: str, prefix: str) -> None:
        from .options import parse_address

        scheme, _, rest = address.partition("://")
        self.transport = scheme
        self.address = parse_address(rest)
        self.prefix = prefix
        self._sock: socket.socket | None = None
        super().__init__(f"statsd {address}")

    def _connect(self) -> socket.socket:
        host, port = self.address
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        if self.transport == "udp":
            sock = socket.socket(family, socket.SOCK_DGRAM)
            # Connected, so that an ICMP port unreachable comes back as ECONNREFUSED.
            sock.connect((host, port))
            sock.settimeout(_STATSD_TIMEOUT)
            return sock
        sock = socket.create_connection((host, port), timeout=_STATSD_TIMEOUT)
        sock.settimeout(_STATSD_TIMEOUT)
        return sock

    def send(self, flush: Flush) -> None:
        lines = statsd_lines(flush, self.prefix)
        if self._sock is None:
            self._sock = self._connect()
        try:
            if self.transport == "udp":
                for datagram in _datagrams(lines):
                    self._sock.send(datagram)
            else:
                self._sock.sendall("".join(f"{line}\n" for line in lines).encode("ascii"))
        except OSError:
            # The next flush starts with a fresh socket (TCP: a new connection; a partial
            # write must not run into the next line).
            self.shut()
            raise

    def shut(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


class _ExporterLog(logging.Handler):
    """Keeps the OTLP exporter's own failure messages as the sink's errors instead of
    letting them reach stderr one per push."""

    def __init__(self, sink: OtlpSink) -> None:
        super().__init__(logging.WARNING)
        self._sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        self._sink.last_log = record.getMessage()


class OtlpSink(_Sink):
    """OpenTelemetry metrics to an OTLP/HTTP endpoint (docs/telemetry.md "OTLP")."""

    kind = "otlp"

    def __init__(self, endpoint: str, temporality: str) -> None:
        try:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
                OTLPMetricExporter,
            )
            from opentelemetry.sdk.resources import Resource
        except ImportError:
            # Not installed: one line, exit status 1 (like --prometheus-listen's extra).
            raise NHBenchError(
                "--otlp-endpoint needs the OpenTelemetry SDK and its OTLP/HTTP exporter: "
                "pip install 'nhbench[otlp]'") from None
        self.endpoint = endpoint
        self.cumulative = temporality == "cumulative"
        self.last_log: str | None = None
        self._exporter = OTLPMetricExporter(endpoint=endpoint, timeout=_OTLP_TIMEOUT)
        # service.name nhbench unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES say
        # otherwise (Resource.create reads both).
        self._resource = Resource.create({"service.name": "nhbench"})
        self._logger = logging.getLogger("opentelemetry.exporter.otlp.proto.http")
        self._handler = _ExporterLog(self)
        self._logger.addHandler(self._handler)
        self._propagate = self._logger.propagate
        self._logger.propagate = False
        # Running totals, for cumulative temporality.
        self._start_ns: int | None = None
        self._last_ns: int | None = None
        self._counters: dict[str, int] = {}
        self._errors = 0
        self._latency = _OtlpLatency()
        super().__init__(f"otlp {endpoint}")

    def send(self, flush: Flush) -> None:
        from opentelemetry.sdk.metrics.export import MetricExportResult

        self.last_log = None
        data = self._metrics_data(flush)
        result = self._exporter.export(data, timeout_millis=_OTLP_TIMEOUT * 1000)
        if result != MetricExportResult.SUCCESS:
            raise RuntimeError(self.last_log or "the OTLP export failed")

    def shut(self) -> None:
        self._exporter.shutdown()
        self._logger.removeHandler(self._handler)
        self._logger.propagate = self._propagate

    def _metrics_data(self, flush: Flush) -> Any:
        from opentelemetry.sdk.metrics.export import (
            AggregationTemporality,
            Histogram,
            HistogramDataPoint,
            Metric,
            MetricsData,
            NumberDataPoint,
            ResourceMetrics,
            ScopeMetrics,
            Sum,
        )
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope

        from ._version import __version__

        end = flush.time_ns
        # Delta points tile time: each starts where the previous one ended (the first one
        # where its stretch of the run began).
        begin = self._last_ns if self._last_ns is not None \
            else end - round(flush.duration * _NS)
        self._last_ns = end
        if self._start_ns is None:
            self._start_ns = begin
        latency = _OtlpLatency.of(flush)
        errors = error_total(flush.counters)
        if self.cumulative:
            begin = self._start_ns
            for name, delta in flush.counters.items():
                self._counters[name] = self._counters.get(name, 0) + delta
            self._errors += errors
            self._latency.add(latency)
            counters, errors, latency = dict(self._counters), self._errors, self._latency
            temporality = AggregationTemporality.CUMULATIVE
        else:
            counters = dict(flush.counters)
            temporality = AggregationTemporality.DELTA
        points = [NumberDataPoint(attributes={"counter": name}, start_time_unix_nano=begin,
                                  time_unix_nano=end, value=value)
                  for name, value in sorted(counters.items())]
        metrics = [
            Metric(name="nhbench.counter", unit="1",
                   description="Core counters summed over workers (nhbench counter names).",
                   data=Sum(data_points=points, aggregation_temporality=temporality,
                            is_monotonic=True)),
            Metric(name="nhbench.errors", unit="1",
                   description="Requests that ended in an error (nhbench._names.ERROR_COUNTERS).",
                   data=Sum(data_points=[NumberDataPoint(
                       attributes=None, start_time_unix_nano=begin, time_unix_nano=end,
                       value=errors)],
                       aggregation_temporality=temporality, is_monotonic=True)),
            Metric(name="nhbench.latency", unit="s",
                   description="Coordinated-omission-corrected latency "
                   "(benchmark_http_client.scheduled_to_response).",
                   data=Histogram(data_points=[HistogramDataPoint(
                       attributes=None, start_time_unix_nano=begin, time_unix_nano=end,
                       count=latency.count, sum=latency.sum / _NS,
                       bucket_counts=list(latency.buckets), explicit_bounds=LATENCY_BOUNDS,
                       min=latency.min / _NS, max=latency.max / _NS)],
                       aggregation_temporality=temporality)),
        ]
        scope = InstrumentationScope("nhbench", __version__)
        return MetricsData(resource_metrics=[ResourceMetrics(
            resource=self._resource, schema_url="",
            scope_metrics=[ScopeMetrics(scope=scope, metrics=metrics, schema_url="")])])


class _OtlpLatency:
    """Latency in the OTLP histogram's buckets (`LATENCY_BOUNDS`), ns."""

    def __init__(self) -> None:
        self.count = 0
        self.sum = 0.0
        self.min = 0
        self.max = 0
        self.buckets = [0] * (len(LATENCY_BOUNDS) + 1)

    @classmethod
    def of(cls, flush: Flush) -> _OtlpLatency:
        out = cls()
        out.count, out.sum, out.min, out.max = flush.count, flush.sum, flush.min, flush.max
        reference = _histogram.new_histogram()
        for index, count in flush.buckets.items():
            # A bucket goes where its lowest value goes: a latency bucket straddling a bound
            # (above 2 µs the HdrHistogram buckets are 0.1% wide) is placed whole.
            value = reference.get_lowest_equivalent_value(reference.get_value_from_index(index))
            slot = next((i for i, bound in enumerate(_BOUNDS_NS) if value <= bound),
                        len(_BOUNDS_NS))
            out.buckets[slot] += count
        return out

    def add(self, other: _OtlpLatency) -> None:
        if other.count:
            self.min = other.min if not self.count else min(self.min, other.min)
            self.max = max(self.max, other.max)
        self.count += other.count
        self.sum += other.sum
        self.buckets = [a + b for a, b in zip(self.buckets, other.buckets, strict=True)]


# ---- the run's side ------------------------------------------------------------------------


def run_pushing(push: MetricsPush | None,
                run: Callable[[Callable[[IntervalRecord], object] | None], R],
                on_interval: Callable[[IntervalRecord], object] | None) -> R:
    """``run(on_interval)``, with `push` (if any) fed every interval before `on_interval`.

    Every placement of a run (here, on Ray, on --loadgen hosts) ends its pushes this way: a
    run given up (a second Ctrl-C, an error) does not wait for the sinks; one that ended
    makes the last flush and reports the sinks' failures once (docs/telemetry.md)."""
    if push is None:
        return run(on_interval)
    try:
        result = run(push.wrap(on_interval))
    except BaseException:
        push.close(wait=False)
        raise
    push.close()
    return result


class MetricsPush:
    """The pushes of one run: ``on_interval`` adds each closed interval up and flushes to
    every sink once `options.effective_flush_interval` has passed; `close` flushes the rest
    and reports failures. Building it builds the sinks (an OTLP endpoint without the extra
    raises NHBenchError before the run starts)."""

    def __init__(self, options: Options) -> None:
        self._interval = options.effective_stats_interval
        self._every = options.effective_flush_interval
        self._next = self._every
        self.sinks: list[_Sink] = []
        try:
            if options.otlp_endpoint is not None:
                self.sinks.append(OtlpSink(options.otlp_endpoint, options.otlp_temporality))
            self.sinks += [StatsdSink(address, options.statsd_prefix)
                           for address in options.statsd]
        except BaseException:
            self._stop_sinks(time.monotonic())
            raise
        self._used: set[str] = set()
        self._pending: Flush | None = None
        self._closed = False

    def wrap(self, on_interval: Callable[[IntervalRecord], object] | None
             ) -> Callable[[IntervalRecord], object]:
        """`on_interval` with this push in front of it."""
        def both(record: IntervalRecord) -> None:
            self.on_interval(record)
            if on_interval is not None:
                on_interval(record)
        return both

    def on_interval(self, record: IntervalRecord) -> None:
        end = record.start + record.duration
        pending = self._pending
        if pending is None:
            pending = self._pending = Flush(record.start, end, 0, {})
        pending.end = end
        for name, value in record.counters.items():
            pending.counters[name] = pending.counters.get(name, 0) + value
        latency = record.latency
        if latency is not None and latency.count:
            pending.min = latency.min if not pending.count else min(pending.min, latency.min)
            pending.max = max(pending.max, latency.max)
            pending.count += latency.count
            pending.sum += latency.sum
            for index, count in latency.counts:
                pending.buckets[index] = pending.buckets.get(index, 0) + count
        # An interval's measured end wanders a little around its nominal one: half an
        # interval of slack keeps a flush interval equal to the stats interval one-to-one.
        if end + self._interval / 2 >= self._next:
            self._flush()
            while self._next <= end + self._interval / 2:
                self._next += self._every

    def _flush(self) -> None:
        pending, self._pending = self._pending, None
        if pending is None:
            return
        self._used.update(pending.counters)
        pending.counters = {name: pending.counters.get(name, 0) for name in self._used}
        pending.time_ns = time.time_ns()
        for sink in self.sinks:
            sink.submit(pending)

    def close(self, wait: bool = True) -> list[str]:
        """Flush what is left, wait for the sinks (bounded), log and return one line per sink
        that failed to deliver. Without `wait` (a run given up) nothing more is sent and the
        sinks are not waited for."""
        if self._closed:
            return []
        self._closed = True
        if wait:
            self._flush()
            self._stop_sinks(time.monotonic())
        else:
            for sink in self.sinks:
                sink.abandon()
        lines = [line for line in (sink.report() for sink in self.sinks) if line]
        for line in lines:
            _log.warning("%s", line)
        return lines

    def _stop_sinks(self, now: float) -> None:
        for sink in self.sinks:
            sink.close(now + _CLOSE_WAIT[sink.kind])
