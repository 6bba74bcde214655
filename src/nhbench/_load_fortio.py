"""Fortio's own JSON result (``fortio load -json FILE``, a file of ``fortio report``'s data
directory) as a `Result`, for ``nhbench.load_result``.

Fortio writes one HTTP run as its ``HTTPRunnerResults`` struct (fortio.org/fortio's
fhttp/httprunner.go, periodic/periodic.go): the run's options, a ``DurationHistogram``
(Fortio's own linear-bucket histogram: ``Data`` buckets plus interpolated ``Percentiles``),
``RetCodes`` by status code, and the body and header size histograms. The mapping
(docs/outputs.md, "Reading results back"):

* ``DurationHistogram`` becomes ``benchmark_http_client.request_to_response``: count, min,
  max, mean (Avg), pstdev (StdDev), and as percentile points both Fortio's ``Percentiles``
  (the values Fortio reports, counts rounded from the fraction) and every ``Data`` bucket's
  end (its Percent and cumulative count), so the buckets survive; where both give the same
  point, Fortio's reported percentile wins. There is no HdrHistogram: other percentiles
  cannot be computed from it.
* ``Sizes`` and ``HeaderSizes`` become the body and header size statistics (count and
  moments; sizes have no percentiles in nhbench, as in Nighthawk).
* ``RetCodes`` become ``benchmark.http_<code>`` counters and their class counters
  (``benchmark.http_2xx``...); Fortio's ``-1`` (the request failed at the socket) becomes
  ``benchmark.stream_resets``, and any other code outside 100-599 ``benchmark.http_xxx``.
  ``upstream_rq_total`` is the histogram's count, ``upstream_cx_total`` Fortio's SocketCount.
* Options: URL, the requested rate (``max`` is 0, one worker, so Fortio's total rate is the
  worker's), NumThreads as connections, the requested duration (an exact-count run becomes
  ``no_duration`` with a termination predicate at that count), Labels as one label, H2 as
  HTTP/2, HTTPReqTimeOut as the request timeout.

A file that is not an HTTP run (Fortio's gRPC and TCP results) or lacks a field the mapping
needs raises ValueError, which ``load_result`` turns into one line naming the file.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ._names import (
    REQUEST_TO_RESPONSE,
    RESPONSE_BODY_SIZE,
    RESPONSE_HEADER_SIZE,
    STATUS_CODE_RANGE,
    status_code_counter,
)
from ._result import Counter, Percentile, Result, Statistic, WorkerResult
from .options import Options

__all__ = ["load_fortio"]

_NS = 1_000_000_000
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0,
                   "m": 60.0, "h": 3600.0}
_GO_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def _number(data: Mapping[str, Any], key: str, default: float | None = None) -> float:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        if default is not None and value is None:
            return default
        raise ValueError(f"{key}: expected a number (got {_short(value)})")
    return float(value)


def _short(value: Any) -> str:
    # A value from the file in a message: one line, not the whole of a hostile list.
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _go_duration(text: str) -> float | None:
    """Seconds of a Go duration string (``"1s"``, ``"1m30s"``, ``"500ms"``), or None when
    `text` is not one (Fortio writes ``"exactly 100 calls"`` for a run of a fixed count)."""
    text = text.strip()
    if text in ("", "0"):
        return 0.0
    position, total = 0, 0.0
    for match in _GO_DURATION.finditer(text):
        if match.start() != position:
            return None
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        position = match.end()
    return total if position == len(text) and position else None


_TIME = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$")


def _time(value: Any) -> datetime | None:
    """Go's RFC 3339 time (nanoseconds, ``Z`` or an offset) at Python's microseconds."""
    if value is None:
        return None
    match = _TIME.match(str(value).strip())
    if not match:
        raise ValueError(f"StartTime: expected an RFC 3339 time (got {_short(value)})")
    whole, frac, zone = match.groups()
    micro = (frac or "").ljust(6, "0")[:6]
    return datetime.fromisoformat(f"{whole}.{micro}" + ("+00:00" if zone == "Z" else zone))


def _objects(data: Mapping[str, Any], key: str, name: str) -> list[Mapping[str, Any]]:
    """A histogram's list of objects (``Data``, ``Percentiles``); empty when absent."""
    value = data.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, Mapping) for item in value):
        raise ValueError(f"{name}.{key}: expected a list of objects")
    return value


def _fraction(data: Mapping[str, Any], key: str, name: str) -> float:
    """A percentage of Fortio's (0-100) as a fraction."""
    percent = _number(data, key)
    if not 0 <= percent <= 100:
        raise ValueError(f"{name}: {key} {percent:g} is outside 0..100")
    return round(percent / 100, 10)


def _statistic(stat_id: str, data: Any, *, raw: bool, name: str) -> Statistic | None:
    if data is None:
        return None
    if not isinstance(data, Mapping):
        raise ValueError(f"{name}: expected Fortio's histogram object (got "
                         f"{type(data).__name__})")
    count = int(_number(data, "Count", 0))
    stat = Statistic(
        id=stat_id,
        count=count,
        min=_number(data, "Min", 0.0),
        max=_number(data, "Max", 0.0),
        mean=_number(data, "Avg", 0.0),
        pstdev=_number(data, "StdDev", 0.0),
        raw=raw,
    )
    if raw or count == 0:
        return stat
    points: dict[float, Percentile] = {}
    cumulative = 0
    for bucket in _objects(data, "Data", name):
        cumulative += int(_number(bucket, "Count"))
        fraction = _fraction(bucket, "Percent", name)
        points[fraction] = Percentile(percentile=fraction, count=cumulative,
                                      value=_number(bucket, "End"))
    for point in _objects(data, "Percentiles", name):
        fraction = _fraction(point, "Percentile", name)
        points[fraction] = Percentile(percentile=fraction, count=min(count, math.ceil(
            fraction * count - 1e-9)), value=_number(point, "Value"))
    stat.percentiles = [points[key] for key in sorted(points)]
    return stat


def _counters(data: Mapping[str, Any], requests: int) -> list[Counter]:
    values: dict[str, int] = {"upstream_rq_total": requests}
    codes = data.get("RetCodes") or {}
    if not isinstance(codes, Mapping):
        raise ValueError(f"RetCodes: expected an object of status code to count (got {_short(codes)})")
    for key in codes:
        try:
            code = int(key)
        except ValueError:
            raise ValueError(f"RetCodes: {_short(key)} is not an HTTP status code") from None
        count = int(_number(codes, key))
        if code in STATUS_CODE_RANGE:
            names = [status_code_counter(code), f"benchmark.http_{code // 100}xx"]
        elif code == -1:
            names = ["benchmark.stream_resets"]
        else:
            names = ["benchmark.http_xxx"]
        for name in names:
            values[name] = values.get(name, 0) + count
    sockets = data.get("SocketCount")
    if isinstance(sockets, int) and not isinstance(sockets, bool):
        values["upstream_cx_total"] = sockets
    return [Counter(name=name, value=value) for name, value in sorted(values.items()) if value]


def _options(data: Mapping[str, Any], duration: float) -> Options:
    url = data.get("URL")
    if not isinstance(url, str) or not url:
        raise ValueError("URL: missing (nhbench reads Fortio's HTTP results)")
    qps = str(data.get("RequestedQPS", "max")).strip()
    try:
        rps = 0.0 if qps == "max" else max(float(qps), 0.0)
    except ValueError:
        raise ValueError(f"RequestedQPS: expected a rate or 'max' (got {_short(qps)})") from None
    fields: dict[str, Any] = {
        "uri": url,
        "rps": rps,
        "connections": max(int(_number(data, "NumThreads", 1)), 1),
        "no_default_failure_predicates": True,
        "allow_no_success": True,
    }
    exactly = int(_number(data, "Exactly", 0))
    requested = _go_duration(str(data.get("RequestedDuration", "")))
    if exactly > 0:
        fields["no_duration"] = True
        fields["termination_predicate"] = {"upstream_rq_total": exactly - 1}
    else:
        fields["duration"] = requested if requested else (duration or None)
    labels = data.get("Labels")
    if isinstance(labels, str) and labels:
        fields["label"] = (labels,)
    if data.get("H2") is True:
        fields["protocol"] = "http2"
        fields["h2c"] = url.startswith("http://")
    timeout = data.get("HTTPReqTimeOut")
    if isinstance(timeout, int) and not isinstance(timeout, bool) and 0 < timeout <= 3600 * _NS:
        fields["request_timeout"] = timeout / _NS
    return Options(**fields)


def load_fortio(data: Any) -> Result:
    """The `Result` of a parsed Fortio JSON result (see the module doc for the mapping)."""
    if not isinstance(data, Mapping):
        raise ValueError("expected Fortio's JSON object")
    run_type = data.get("RunType")
    if run_type not in ("HTTP", "", None) or ("URL" not in data and "Destination" in data):
        raise ValueError(f"a Fortio {run_type or 'non-HTTP'} result: nhbench reads Fortio's "
                         "HTTP results only")
    histogram = data.get("DurationHistogram")
    latency = _statistic(REQUEST_TO_RESPONSE, histogram, raw=False, name="DurationHistogram")
    if latency is None:
        raise ValueError("DurationHistogram: missing")
    duration = _number(data, "ActualDuration", 0.0) / _NS
    start = _time(data.get("StartTime"))
    statistics = [latency]
    for stat_id, key in ((RESPONSE_BODY_SIZE, "Sizes"), (RESPONSE_HEADER_SIZE, "HeaderSizes")):
        stat = _statistic(stat_id, data.get(key), raw=True, name=key)
        if stat is not None:
            statistics.append(stat)
    entry = WorkerResult(name="global", statistics=statistics,
                         counters=_counters(data, latency.count), execution_start=start,
                         execution_duration=duration)
    fields: dict[str, Any] = {"options": _options(data, duration), "results": [entry],
                              "version": f"fortio {data.get('Version', '')}".strip()}
    if start is not None:
        fields["timestamp"] = start
    return Result(**fields)
