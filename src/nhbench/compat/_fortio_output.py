"""What ``nhbench fortio load`` prints and writes: Fortio 1.66.5's text report and its JSON
result, as functions of an nhbench `Result` and a `FortioRun` (what Fortio prints that a
Result does not hold). docs/compat.md, "Fortio's report and JSON", lists every line.

The layout is Fortio's own (its cli/fortio_main.go, periodic/periodic.go, stats/stats.go,
fhttp/httprunner.go, fgrpc/grpcrunner.go, tcprunner/ and udprunner/), with Go's number
formatting (`_gofmt`), so scripts that grep Fortio's output read ours. The numbers are
nhbench's:

* The latency histogram is Fortio's: its fixed bucket table times the resolution ``-r``,
  shifted by ``-offset``; each HdrHistogram bucket of nhbench's request-to-response latency
  lands, with its count, in the Fortio bucket of its median value (kept within the exact
  min and max). First start and last end are the exact min and max, as Fortio's.
* The ``# target NN% value`` lines and the JSON ``Percentiles`` are nhbench's exact
  percentiles (from the HdrHistogram, within 0.1%), not Fortio's interpolation inside a
  bucket.
* ``Error cases`` are the responses Fortio counts as errors (not 2xx and not 418), from the
  per-class latency histograms. A request that got no response (refused, reset, timed out)
  has no latency in nhbench: it is ``Code -1`` (Fortio's socket error) and in no histogram,
  so neither in the calls counted nor in the rates.
* Lines Fortio prints from data nhbench does not record are left out: ``Sleep times``
  (Fortio's per-call sleep), the per-connection ``[N] 1 socket used, resolved to ...,
  connection timing`` lines and the connection time histogram; their JSON fields
  (``Sockets``, ``ConnectionStats``) are null.
* The coordinated-omission-corrected latency (scheduled send to response end), which Fortio
  does not measure, follows the function time as lines beginning with ``# nhbench``.
"""

from __future__ import annotations

import base64
import ipaddress
import math
import os
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlsplit

from .._histogram import new_histogram, percentile_points, sparse_counts
from .._names import (
    LATENCY_BY_CLASS,
    REQUEST_TO_RESPONSE,
    RESPONSE_BODY_SIZE,
    RESPONSE_HEADER_SIZE,
    SCHEDULED_TO_RESPONSE,
    STATUS_CODE_RANGE,
    status_code_counter,
)
from .._result import Result, Statistic, WorkerResult
from .._version import __version__
from ..outputs._output_dir import fortio_id_text
from ._gofmt import go_duration, go_f, go_g, go_json

__all__ = [
    "FortioRun",
    "fortio_banner",
    "fortio_id",
    "fortio_json",
    "fortio_json_text",
    "fortio_report",
]

_NS = 1_000_000_000
# Fortio's version.Short() where Fortio prints its own ("Fortio 1.66.5 running at", the JSON
# Version): one word, as Fortio's, that says which tool ran.
_VERSION = f"nhbench-{__version__}"

# Fortio's histogram bucket ends (stats/histogram.go), in units of the resolution: bucket i
# holds the values above entry i-1 up to entry i; one more bucket past the last holds the
# rest. Bucket 0 holds every value at or below 0 (after the offset).
_BUCKETS = (
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 16, 18, 20, 25, 30, 35, 40, 45, 50,
    60, 70, 80, 90, 100, 120, 140, 160, 180, 200, 250, 300, 350, 400, 450, 500,
    600, 700, 800, 900, 1000, 2000, 3000, 4000, 5000, 7500, 10000,
    20000, 30000, 40000, 50000, 75000, 100000,
)
_LAST_BUCKET = len(_BUCKETS)

#: What Fortio calls a successful HTTP call (fhttp's codeIsOK): 2xx, and 418.
_TEAPOT = 418


@dataclass(frozen=True)
class FortioRun:
    """What Fortio prints that a `Result` does not hold: the command line's settings."""

    run_type: str           # Fortio's RunType: "HTTP", "GRPC Ping", "GRPC Health for ''"...
    url: str                # the target as given
    labels: str             # Fortio's Labels
    requested_qps: float    # total; <= 0 means max
    requested_duration: float | None  # seconds; None when -n (exactly) or -t 0
    exactly: int            # -n, 0 when by duration
    connections: int        # -c (NumThreads)
    percentiles: tuple[float, ...]    # -p, e.g. (50, 75, 90, 99, 99.9)
    resolution: float       # -r (0.001)
    offset: float = 0.0     # -offset (seconds)
    jitter: bool = False
    uniform: bool = False
    nocatchup: bool = False
    run_id: int = 0         # -runid
    streams: int = 1        # gRPC -s
    warmup: int = 0         # warm-up calls made (one per connection)
    #: Fields of Fortio's JSON result that only Fortio's flags know (``{"FollowRedirects":
    #: True, "UserCredentials": "user:pw", "MethodOverride": "PUT", "Resolve": "10.0.0.1",
    #: "AccessLoggerInfo": ...}``): written as given over what the Result gives. A key that
    #: is not a field of the run type's JSON is refused (ValueError).
    json_fields: Mapping[str, Any] = field(default_factory=dict)
    #: The request payload as Fortio echoes it (its JSON ``Payload``); None: the options'
    #: ``payload`` text, if any.
    payload: bytes | None = None
    #: GOMAXPROCS as Fortio prints it ("2->2 procs"); 0: the CPUs this process may use.
    procs: int = 0

    @property
    def is_grpc(self) -> bool:
        return self.run_type.startswith("GRPC")

    @property
    def kind(self) -> str:
        """"http", "grpc", "tcp" or "udp": which of Fortio's runners this is."""
        if self.is_grpc:
            return "grpc"
        if self.run_type in ("TCP", "UDP"):
            return self.run_type.lower()
        return "http"


# ---- Fortio's numbers from nhbench's statistics ---------------------------------------------


@dataclass
class _Moments:
    """Exact count, min, max, sum and sum of squares (seconds), mergeable."""

    count: int = 0
    min: float = 0.0
    max: float = 0.0
    sum: float = 0.0
    sumsq: float = 0.0

    @classmethod
    def of(cls, stat: Statistic) -> _Moments:
        if stat.count <= 0:
            return cls()
        total = stat.mean * stat.count
        return cls(stat.count, stat.min, stat.max, total,
                   stat.count * (stat.pstdev ** 2 + stat.mean ** 2))

    def merge(self, other: _Moments) -> _Moments:
        if other.count == 0:
            return self
        if self.count == 0:
            return other
        return _Moments(self.count + other.count, min(self.min, other.min),
                        max(self.max, other.max), self.sum + other.sum,
                        self.sumsq + other.sumsq)

    @property
    def avg(self) -> float:
        return self.sum / self.count if self.count else 0.0

    @property
    def stddev(self) -> float:
        if not self.count:
            return 0.0
        variance = (self.sumsq - self.sum * self.sum / self.count) / self.count
        return math.sqrt(variance) if variance > 0 else 0.0


@dataclass
class _Histogram:
    """Fortio's exported HistogramData: moments, buckets, percentiles (seconds)."""

    moments: _Moments
    data: list[dict[str, Any]] | None
    percentiles: list[tuple[float, float]]

    def json(self, with_percentiles: bool = True) -> dict[str, Any]:
        m = self.moments
        out: dict[str, Any] = {"Count": m.count, "Min": m.min, "Max": m.max, "Sum": m.sum,
                               "Avg": m.avg, "StdDev": m.stddev, "Data": self.data}
        if with_percentiles and self.percentiles:
            out["Percentiles"] = [{"Percentile": p, "Value": v} for p, v in self.percentiles]
        return out


def _fortio_bucket(value: float, offset: float, divider: float) -> int:
    """Fortio's bucket index of a value (stats.Histogram.record, same float arithmetic)."""
    scaled = (value - offset) / divider
    if scaled <= _BUCKETS[0]:
        return 0
    if scaled > _BUCKETS[-1]:
        return _LAST_BUCKET
    whole = int(scaled)
    if scaled - whole < 1e-12:
        whole -= 1  # a value exactly on a bucket's end belongs to that bucket
    return bisect_right(_BUCKETS, whole)


def _buckets(stats: Iterable[Statistic], moments: _Moments, offset: float,
             divider: float) -> list[dict[str, Any]] | None:
    """Fortio's Data buckets of the merged HdrHistograms of `stats`, or None when one of
    them has samples but no histogram (a result read from a file without one)."""
    counts = [0] * (_LAST_BUCKET + 1)
    low_ns, high_ns = round(moments.min * _NS), round(moments.max * _NS)
    for stat in stats:
        if stat.count == 0:
            continue
        if not stat.has_histogram:
            return None
        histogram = stat.histogram()
        for index, count in sparse_counts(histogram):
            value = histogram.get_value_from_index(index)
            low = histogram.get_lowest_equivalent_value(value)
            high = histogram.get_highest_equivalent_value(value)
            middle = min(max((low + high + 1) // 2, low_ns), high_ns)
            counts[_fortio_bucket(middle / _NS, offset, divider)] += count
    return _bucket_data(counts, moments, offset, divider)


def _bucket_data(counts: Sequence[int], moments: _Moments, offset: float,
                 divider: float) -> list[dict[str, Any]] | None:
    """Fortio's Data buckets (stats.Histogram.Export) of the counts per Fortio bucket index
    (`_fortio_bucket`), or None when every count is 0."""
    data: list[dict[str, Any]] = []
    total = 0
    previous = _BUCKETS[0]
    for index, count in enumerate(counts):
        if count == 0:
            if index < len(_BUCKETS):
                previous = _BUCKETS[index]
            continue
        total += count
        start = moments.min if not data else divider * float(previous) + offset
        if index < len(_BUCKETS):
            end = divider * float(_BUCKETS[index]) + offset
            previous = _BUCKETS[index]
        else:
            end = moments.max
        data.append({"Start": start, "End": end, "Percent": 100.0 * total / moments.count,
                     "Count": count})
    if data:
        data[-1]["End"] = moments.max
    return data or None


def _percentiles(stats: Sequence[Statistic], moments: _Moments,
                 points: Sequence[float]) -> list[tuple[float, float]]:
    """nhbench's value at each of Fortio's percentiles: the merged HdrHistograms' (highest
    equivalent value, kept within the exact min and max), as every nhbench report."""
    present = [s for s in stats if s.count]
    if not present:
        return []
    if not all(s.has_histogram for s in present):
        if len(present) == 1:  # a result read from a file: the percentiles it lists
            return [(float(p), present[0].p(p)) for p in points if _listed(present[0], p)]
        return []
    merged = new_histogram()
    for stat in present:
        merged.add(stat.histogram())
    values = percentile_points(sparse_counts(merged), [round(p / 100.0, 10) for p in points],
                               exact_min=round(moments.min * _NS),
                               exact_max=round(moments.max * _NS))
    by_fraction = {point.percentile: point.value / _NS for point in values}
    return [(float(p), by_fraction[round(p / 100.0, 10)]) for p in points]


def _listed(stat: Statistic, percent: float) -> bool:
    try:
        stat.p(percent)
    except ValueError:
        return False
    return True


def _histogram(stats: Sequence[Statistic], run: FortioRun) -> _Histogram:
    moments = _Moments()
    for stat in stats:
        moments = moments.merge(_Moments.of(stat))
    if moments.count == 0:
        return _Histogram(moments, None, [])
    return _Histogram(moments, _buckets(stats, moments, run.offset, run.resolution),
                      _percentiles(stats, moments, run.percentiles))


def _size_histogram(stat: Statistic | None) -> _Histogram:
    """Fortio's Sizes/HeaderSizes: nhbench keeps only the moments of sizes, so the one
    bucket is known only when every size was the same."""
    if stat is None or stat.count == 0:
        return _Histogram(_Moments(), None, [])
    moments = _Moments.of(stat)
    data = None
    if stat.min == stat.max:
        data = [{"Start": stat.min, "End": stat.max, "Percent": 100.0, "Count": stat.count}]
    return _Histogram(moments, data, [])


def _stat(entry: WorkerResult, stat_id: str) -> Statistic | None:
    try:
        return entry.stat(stat_id)
    except KeyError:
        return None


def _latency(result: Result) -> Statistic:
    stat = _stat(result.global_result, REQUEST_TO_RESPONSE)
    return stat if stat is not None else Statistic(id=REQUEST_TO_RESPONSE)


def _error_stats(result: Result) -> list[Statistic]:
    """The latency classes Fortio counts as errors: every response but 2xx (and 418, when
    all the 4xx were teapots: one class holds all 4xx)."""
    counters = result.counters
    teapots_only = counters["benchmark.http_4xx"] == counters[status_code_counter(_TEAPOT)]
    out = []
    for stat_id in LATENCY_BY_CLASS:
        if stat_id.endswith("_2xx") or (stat_id.endswith("_4xx") and teapots_only):
            continue
        stat = _stat(result.global_result, stat_id)
        if stat is not None:
            out.append(stat)
    return out


# ---- the run's shape as Fortio plans it ------------------------------------------------------


@dataclass(frozen=True)
class _Plan:
    threads: int
    per_thread: int
    total: int
    left_over: int


def _plan(run: FortioRun) -> _Plan:
    """Threads and calls as Fortio's periodic runner plans them (runQPSSetup,
    runMaxQPSSetup): it lowers -c to half the calls, and at least 2 calls."""
    threads = max(run.connections, 1) * (max(run.streams, 1) if run.is_grpc else 1)
    if run.requested_qps > 0:
        if run.exactly <= 0 and not run.requested_duration:
            return _Plan(threads, 0, 0, 0)
        calls = run.exactly if run.exactly > 0 else int(
            run.requested_qps * (run.requested_duration or 0.0))
        if calls < 2:
            calls, threads = 2, 1
        if 2 * threads > calls:
            threads = calls // 2
        per_thread = calls // threads
        total = per_thread * threads
        return _Plan(threads, per_thread, total,
                     run.exactly - total if run.exactly > 0 else 0)
    if run.exactly > 0:
        return _Plan(threads, run.exactly // threads, run.exactly, run.exactly % threads)
    return _Plan(threads, 0, 0, 0)


def _procs(run: FortioRun) -> int:
    if run.procs > 0:
        return run.procs
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _duration_ns(seconds: float | None) -> int:
    return round((seconds or 0.0) * _NS)


def fortio_banner(run: FortioRun) -> str:
    """The lines Fortio prints before the run: ``Fortio X running at ...`` and ``Starting at
    ...`` (cli/fortio_main.go, periodic/periodic.go)."""
    procs = _procs(run)
    lines = [f"Fortio {_VERSION} running at {go_g(run.requested_qps)} queries per second, "
             f"{procs}->{procs} procs"]
    if run.exactly > 0:
        lines[0] += f", for {run.exactly} calls: {run.url}"
    elif not run.requested_duration or run.requested_duration <= 0:
        lines[0] += f", until interrupted: {run.url}"
    else:
        lines[0] += f", for {go_duration(_duration_ns(run.requested_duration))}: {run.url}"
    plan = _plan(run)
    duration = go_duration(_duration_ns(run.requested_duration))
    logger = run.json_fields.get("AccessLoggerInfo")
    extra = f" with access logger {logger}" if logger else ""
    forever = run.exactly <= 0 and not (run.requested_duration and run.requested_duration > 0)
    if run.requested_qps > 0:
        start = f"Starting at {go_g(run.requested_qps)} qps with {plan.threads} thread(s) " \
                f"[gomax {procs}]"
        if forever:
            lines.append(f"{start} until interrupted{extra}")
        elif run.exactly > 0:
            lines.append(f"{start} : exactly {run.exactly}, {plan.per_thread} calls each "
                         f"(total {plan.total} + {plan.left_over}){extra}")
        else:
            lines.append(f"{start} for {duration} : {plan.per_thread} calls each "
                         f"(total {plan.total}){extra}")
    else:
        start = f"Starting at max qps with {plan.threads} thread(s) [gomax {procs}]"
        if forever:
            lines.append(f"{start} until interrupted{extra}")
        elif run.exactly > 0:
            lines.append(f"{start} for exactly {run.exactly} calls ({plan.per_thread} per "
                         f"thread + {plan.left_over}){extra}")
        else:
            lines.append(f"{start} for {duration}{extra}")
    return "\n".join(lines) + "\n"


# ---- the text report -------------------------------------------------------------------------


def _counter_line(message: str, m: _Moments) -> str:
    """stats.Counter.Print."""
    return (f"{message} : count {m.count} avg {go_g(m.avg, 8)} +/- {go_g(m.stddev, 4)} "
            f"min {go_g(m.min)} max {go_g(m.max)} sum {go_g(m.sum, 9)}")


def _histogram_lines(message: str, h: _Histogram) -> list[str]:
    """stats.HistogramData.Print (the targets are nhbench's exact percentiles)."""
    if h.moments.count == 0:
        return [f"{message} : no data"]
    lines = [_counter_line(message, h.moments)]
    if h.data:
        lines.append("# range, mid point, percentile, count")
        for position, bucket in enumerate(h.data):
            start, end = bucket["Start"], bucket["End"]
            lines.append(f"{'>=' if position == 0 else '>'} {go_g(start, 6)} <= "
                         f"{go_g(end, 6)} , {go_g((start + end) / 2.0, 6)} , "
                         f"{go_f(bucket['Percent'], 2)}, {bucket['Count']}")
    lines += [f"# target {go_g(p)}% {go_g(v, 6)}" for p, v in h.percentiles]
    return lines


def _corrected_lines(result: Result, run: FortioRun) -> list[str]:
    """The coordinated-omission-corrected latency, in lines scripts reading Fortio's skip."""
    stat = _stat(result.global_result, SCHEDULED_TO_RESPONSE)
    if stat is None or stat.count == 0:
        return []
    h = _Histogram(_Moments.of(stat), None, _percentiles([stat], _Moments.of(stat),
                                                         run.percentiles))
    lines = [_counter_line("# nhbench corrected (scheduled send to response end)",
                           h.moments)]
    lines += [f"# nhbench corrected p{go_g(p)} {go_g(v, 6)}" for p, v in h.percentiles]
    return lines


def _elapsed_ns(result: Result) -> int:
    return round(result.duration * _NS)


def _actual_qps(count: int, result: Result) -> float:
    elapsed = _elapsed_ns(result)
    return count / (elapsed / _NS) if elapsed > 0 else 0.0


def _socket_failures(result: Result) -> int:
    """Requests that got no response at all: Fortio's code -1."""
    counters = result.counters
    return sum(counters[name] for name in (
        "benchmark.pool_connection_failure", "benchmark.stream_resets",
        "benchmark.request_timeout", "upstream_rq_retry_limit_exceeded",
        "benchmark.http_xxx"))


def _http_codes(result: Result) -> dict[int, int]:
    codes: dict[int, int] = {}
    for name, value in result.counters.nonzero().items():
        if name.startswith("benchmark.http_") and name[len("benchmark.http_"):].isdigit():
            code = int(name[len("benchmark.http_"):])
            if code in STATUS_CODE_RANGE:
                codes[code] = value
    failures = _socket_failures(result)
    if failures:
        codes[-1] = failures
    return dict(sorted(codes.items()))


def _echo_codes(result: Result, run: FortioRun) -> dict[str, int]:
    """Fortio's tcp/udp/gRPC RetCodes: the success key, then nhbench's failures by name."""
    counters = result.counters
    success = "SERVING" if run.is_grpc else "OK"
    codes = {success: counters["benchmark.http_2xx"]}
    if run.is_grpc:
        failed = result.error_count
        if failed:
            codes["ERROR"] = failed  # fgrpc's key for any failed call
        return {k: v for k, v in codes.items() if v}
    named = (("benchmark.echo_mismatch", "read not echoing writes"),  # tcprunner's errMismatch
             ("benchmark.request_timeout", "request time-out"),
             ("benchmark.pool_connection_failure", "connection failure"),
             ("benchmark.stream_resets", "reset"))
    for name, key in named:
        if counters[name]:
            codes[key] = counters[name]
    return {k: v for k, v in codes.items() if v}


def _address(run: FortioRun) -> str | None:
    """The ip:port every connection went to, when the target names an IP address (or
    -resolve gives one); None for a host name (nhbench does not record what it resolved)."""
    try:
        parts = urlsplit(run.url if "://" in run.url else "http://" + run.url)
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    resolve = run.json_fields.get("Resolve")
    if isinstance(resolve, str) and resolve:
        host = resolve
    if host is None:
        return None
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    if port is None:
        port = 443 if parts.scheme == "https" else 80
    return f"[{address}]:{port}" if address.version == 6 else f"{address}:{port}"


def _lifetime(result: Result, name: str) -> int:
    """A counter over the connections' whole life, as Fortio's clients count sockets and
    bytes: the warm-up's (which nhbench keeps apart) and the run's."""
    warmup = result.warmup.counter_values[name] if result.warmup is not None else 0
    return result.counters[name] + warmup


def _sockets(result: Result) -> int:
    return _lifetime(result, "upstream_cx_total")


def _ip_counts(result: Result, run: FortioRun) -> dict[str, int]:
    """Fortio's IPCountMap: sockets per ip:port, most used first. With several addresses
    (-dns-method over a name that has several) the result's per-endpoint counts; else the
    one address when the target or -resolve names it."""
    if result.endpoints:
        counts = {e.name: e.connections for e in result.endpoints if e.connections}
        return dict(sorted(counts.items(), key=lambda item: -item[1]))
    address = _address(run)
    sockets = _sockets(result)
    return {address: sockets} if address is not None and sockets else {}


def fortio_report(result: Result, run: FortioRun) -> str:
    """The text Fortio prints after the run, from ``Ended after`` to ``All done``."""
    latency = _histogram([_latency(result)], run)
    errors = _histogram(_error_stats(result), run)
    count = latency.moments.count
    plan = _plan(run)
    lines = [f"Ended after {go_duration(_elapsed_ns(result))} : {count} calls. "
             f"qps={go_g(_actual_qps(count, result), 5)}"]
    lines += _histogram_lines("Aggregated Function Time", latency)
    lines += _corrected_lines(result, run)
    lines += _histogram_lines("Error cases", errors)
    if run.kind == "http":
        codes = _http_codes(result)
        calls = sum(codes.values())
        sockets = _sockets(result)
        lines.append(f"Sockets used: {sockets} (for perfect keepalive, would be "
                     f"{plan.threads})")
        lines.append(f"Uniform: {_go_bool(run.uniform)}, Jitter: {_go_bool(run.jitter)}, "
                     f"Catchup allowed: {_go_bool(not run.nocatchup)}")
        lines.append("IP addresses distribution:")
        lines += [f"{address}: {count}" for address, count in _ip_counts(result, run).items()]
        for code, value in codes.items():
            lines.append(f"Code {code:3d} : {value} ({go_f(100.0 * value / calls, 1)} %)")
        header = _size_histogram(_stat(result.global_result, RESPONSE_HEADER_SIZE))
        body = _size_histogram(_stat(result.global_result, RESPONSE_BODY_SIZE))
        lines.append(_counter_line("Response Header Sizes", header.moments))
        lines.append(_counter_line("Response Body/Total Sizes", body.moments))
    elif run.kind == "grpc":
        lines.append(f"Jitter: {_go_bool(run.jitter)}")
        which = "Ping" if run.run_type.startswith("GRPC Ping") else "Health"
        lines += [f"{which} {key} : {value}" for key, value in _echo_codes(result, run).items()]
    else:
        codes_echo = _echo_codes(result, run)
        calls = sum(codes_echo.values())
        lines.append(f"Sockets used: {_sockets(result)} (for perfect no error run, would be "
                     f"{plan.threads})")
        lines.append(f"Total Bytes sent: {_lifetime(result, 'upstream_cx_tx_bytes_total')}, "
                     f"received: {_lifetime(result, 'upstream_cx_rx_bytes_total')}")
        lines += [f"{run.kind} {key} : {value} ({go_f(100.0 * value / calls, 1)} %)"
                  for key, value in codes_echo.items()]
    lines.append(f"All done {count} calls (plus {run.warmup} warmup) "
                 f"{go_f(1000.0 * latency.moments.avg, 3)} ms avg, "
                 f"{go_f(_actual_qps(count, result), 1)} qps")
    return "\n".join(lines) + "\n"


def _go_bool(value: bool) -> str:
    return "true" if value else "false"


# ---- the JSON result -------------------------------------------------------------------------


def _start(result: Result) -> datetime:
    start = result.global_result.execution_start or result.timestamp
    if start.tzinfo is None:
        start = start.replace(tzinfo=timezone.utc)
    return start.astimezone()  # Fortio writes its local time


def _go_time(moment: datetime) -> str:
    """Go's RFC 3339 with nanoseconds (trailing zeros of the fraction dropped)."""
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    if moment.microsecond:
        text += "." + f"{moment.microsecond:06d}".rstrip("0")
    offset = moment.utcoffset()
    if not offset:
        return text + "Z"
    minutes = int(offset.total_seconds()) // 60
    sign = "+" if minutes >= 0 else "-"
    return text + f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def fortio_id(result: Result, run: FortioRun) -> str:
    """Fortio's result ID (periodic's GenID) of the run: its start, ``_RunID`` when set,
    then the labels (`outputs._output_dir.fortio_id_text`). ``-a`` saves the JSON as
    ID.json."""
    return fortio_id_text(_start(result).strftime("%Y-%m-%d-%H%M%S"), run.labels, run.run_id)


def _requested_duration(result: Result, run: FortioRun, count: int) -> str:
    if run.exactly > 0:
        text = f"exactly {run.exactly} calls"
        if count != run.exactly:
            text += f", interrupted after {count}"
        return text
    if run.requested_duration and run.requested_duration > 0:
        return go_duration(_duration_ns(run.requested_duration))
    return "until stop" if run.requested_qps > 0 else ""


def _runner_fields(result: Result, run: FortioRun, latency: _Histogram,
                   errors: _Histogram) -> dict[str, Any]:
    count = latency.moments.count
    return {
        "RunType": run.run_type,
        "Labels": run.labels,
        "StartTime": _go_time(_start(result)),
        "RequestedQPS": "max" if run.requested_qps <= 0 else go_g(run.requested_qps, 9),
        "RequestedDuration": _requested_duration(result, run, count),
        "ActualQPS": _actual_qps(count, result),
        "ActualDuration": _elapsed_ns(result),
        "NumThreads": _plan(run).threads,
        "Version": _VERSION,
        "DurationHistogram": latency.json(),
        "ErrorsDurationHistogram": errors.json(),
        "Exactly": run.exactly,
        "Jitter": run.jitter,
        "Uniform": run.uniform,
        "NoCatchUp": run.nocatchup,
        "RunID": run.run_id,
        "AccessLoggerInfo": "",
        "ID": fortio_id(result, run),
    }


def _payload(result: Result, run: FortioRun) -> bytes | None:
    if run.payload is not None:
        return run.payload
    text = result.options.payload
    return text.encode() if text else None


def _http_fields(result: Result, run: FortioRun) -> dict[str, Any]:
    options = result.options
    codes = _http_codes(result)
    sockets = _sockets(result)
    payload = _payload(result, run)
    return {
        "RetCodes": {str(code): value for code, value in sorted(
            codes.items(), key=lambda item: str(item[0]))},
        "IPCountMap": _ip_counts(result, run),
        "Insecure": options.insecure,
        "MTLS": False,
        "CACert": options.cacert or "",
        "Cert": "",
        "Key": "",
        "UnixDomainSocket": options.unix_socket or "",
        "URL": run.url,
        "NumConnections": 1,
        "Compression": False,
        "DisableFastClient": False,
        "HTTP10": options.http1_0,
        "H2": options.protocol == "http2",
        "DisableKeepAlive": False,
        "AllowHalfClose": False,
        "FollowRedirects": False,
        "Resolve": "",
        "HTTPReqTimeOut": _duration_ns(options.request_timeout),
        "UserCredentials": "",
        "ContentType": options.content_type or "",
        "Payload": base64.b64encode(payload or b"").decode("ascii"),
        "MethodOverride": "",
        "LogErrors": True,
        "SequentialWarmup": options.sequential_warmup,
        "ConnReuseRange": [0, 0],
        "NoResolveEachConn": False,
        "Offset": _duration_ns(run.offset),
        "Resolution": float(run.resolution),
        "Sizes": _size_histogram(_stat(result.global_result, RESPONSE_BODY_SIZE)).json(),
        "HeaderSizes": _size_histogram(_stat(result.global_result,
                                             RESPONSE_HEADER_SIZE)).json(),
        "Sockets": None,
        "SocketCount": sockets,
        "ConnectionStats": None,
        "AbortOn": options.abort_on or 0,
    }


def _grpc_fields(result: Result, run: FortioRun) -> dict[str, Any]:
    metadata: dict[str, list[str]] = {}
    for header in result.options.request_header:
        name, _, value = header.partition(":")
        metadata.setdefault(name.strip().lower(), []).append(value.strip())
    return {
        "RetCodes": dict(sorted(_echo_codes(result, run).items())),
        "Destination": run.url,
        "Streams": max(run.streams, 1),
        "Ping": run.run_type.startswith("GRPC Ping"),
        "Metadata": dict(sorted(metadata.items())),
    }


def _echo_fields(result: Result, run: FortioRun) -> dict[str, Any]:
    payload = _payload(result, run)
    fields: dict[str, Any] = {
        "Destination": run.url,
        "Payload": None if payload is None else base64.b64encode(payload).decode("ascii"),
    }
    if run.kind == "tcp":
        fields["UnixDomainSocket"] = result.options.unix_socket or ""
    fields.update({
        "ReqTimeout": _duration_ns(result.options.request_timeout),
        "RetCodes": dict(sorted(_echo_codes(result, run).items())),
        "SocketCount": _sockets(result),
        "BytesSent": _lifetime(result, "upstream_cx_tx_bytes_total"),
        "BytesReceived": _lifetime(result, "upstream_cx_rx_bytes_total"),
    })
    return fields


def fortio_json(result: Result, run: FortioRun) -> dict[str, Any]:
    """Fortio's JSON result for the run type (HTTPRunnerResults, GRPCRunnerResults, the TCP
    and UDP RunnerResults), its fields in Fortio's order; `fortio_json_text` writes it as
    Fortio does."""
    latency = _histogram([_latency(result)], run)
    errors = _histogram(_error_stats(result), run)
    document = _runner_fields(result, run, latency, errors)
    kind = run.kind
    if kind == "http":
        document.update(_http_fields(result, run))
    elif kind == "grpc":
        document.update(_grpc_fields(result, run))
    else:
        document.update(_echo_fields(result, run))
    unknown = sorted(set(run.json_fields) - set(document))
    if unknown:
        raise ValueError(f"{', '.join(unknown)}: not a field of Fortio's {run.run_type} "
                         "result")
    document.update(run.json_fields)
    return document


def fortio_json_text(result: Result, run: FortioRun) -> str:
    """`fortio_json` as Fortio writes its ``-json`` file: Go's ``json.MarshalIndent`` with
    two spaces, and a newline."""
    return go_json(fortio_json(result, run))
