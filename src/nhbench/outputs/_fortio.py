"""The ``fortio`` and ``experimental_fortio_pedantic`` formats: what Nighthawk's
FortioOutputFormatterImpl and FortioPedanticOutputFormatterImpl write, for Fortio's report UI.

Both are functions of Nighthawk's ``Output`` JSON document (`nighthawk_output`), so
``nhbench transform`` turns a file Nighthawk wrote into them the way Nighthawk would. The
``fortio`` text is the proto3 JSON of Nighthawk's ``FortioResult`` message
(api/client/transform/fortio.proto) as Nighthawk prints it: one-space indentation, every
primitive field present, 64-bit counts as strings, doubles with protobuf's shortest
15-or-17-digit rendering, and the two well-known-type fields (StartTime, RequestedDuration)
last. ``experimental_fortio_pedantic`` is that text with Nighthawk's two regular-expression
fixes for Fortio's own types: RequestedQPS as a string, and counts as plain numbers.

Where nhbench knows more than Nighthawk's formatter uses (docs/outputs.md lists each case):

* ``RetCodes`` has one entry per status code from the per-status-code counters
  (``benchmark.http_<code>``); Nighthawk, which has no such counters, writes
  ``{"200": <2xx count>}``, and so does this module for a document without them.
* ``experimental_fortio_pedantic`` writes ``"RequestedQPS": "max"`` for an nhbench run at
  the maximum rate (``requests_per_second`` 0), as Fortio itself does.

Numbers are checked nowhere else: a document that lacks what the formatter needs (no
results, no ``global`` result) raises ValueError with one line saying so.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from .._names import status_counter_code
from ._nhfields import json_double
from ._nighthawk import nhbench_extension, nighthawk_output

if TYPE_CHECKING:
    from .._result import Result

__all__ = [
    "format_fortio",
    "format_fortio_pedantic",
    "render_fortio",
    "render_fortio_pedantic",
]

_NS = 1_000_000_000
_UINT32 = 2**32
_UINT64 = 2**64

REQUEST_TO_RESPONSE = "benchmark_http_client.request_to_response"
RESPONSE_BODY_SIZE = "benchmark_http_client.response_body_size"
RESPONSE_HEADER_SIZE = "benchmark_http_client.response_header_size"

# The points Nighthawk's iteratePercentiles picks from a statistic's percentiles, in order.
_PICKED_PERCENTILES = (0.0, 0.5, 0.75, 0.8, 0.9, 0.95, 0.99, 0.999, 1.0)


# ---- the document's values, as Nighthawk's proto JSON parser would read them ---------------


def _number(value: Any, what: str) -> float:
    """A proto3 JSON number: a JSON number or a decimal string (how 64-bit ints come)."""
    if isinstance(value, Mapping) and "value" in value:
        value = value["value"]  # a wrapper type written as an object
    if isinstance(value, bool):
        raise ValueError(f"{what}: expected a number (got {value!r})")
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            pass
        try:
            return float(value)
        except ValueError:
            pass
    raise ValueError(f"{what}: expected a number (got {value!r})")


def _uint(value: Any, what: str) -> int:
    number = _number(value, what)
    if isinstance(number, float):
        if not number.is_integer():
            raise ValueError(f"{what}: expected an integer (got {value!r})")
        number = int(number)
    if number < 0:
        raise ValueError(f"{what}: expected an unsigned integer (got {value!r})")
    return number


_DURATION = re.compile(r"^(-)?(\d+)(?:\.(\d{1,9}))?s$")


def _duration_ns(value: Any, what: str) -> int:
    """A google.protobuf.Duration in JSON (``"2.000000429s"``) as integer nanoseconds, exact
    (Nighthawk divides the integer nanoseconds by 1e9; a float parse could be off by one)."""
    if isinstance(value, str):
        match = _DURATION.match(value.strip())
        if match:
            sign, whole, frac = match.groups()
            ns = int(whole) * _NS + int((frac or "").ljust(9, "0"))
            return -ns if sign else ns
    elif isinstance(value, Mapping):  # {"seconds": ..., "nanos": ...}
        return _uint(value.get("seconds", 0), what) * _NS + int(_number(value.get("nanos", 0), what))
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        return round(value * _NS)  # seconds, as nhbench's Python side keeps them
    raise ValueError(f"{what}: expected a Duration such as '0.002s' (got {value!r})")


def _seconds(value: Any, what: str) -> float:
    return _duration_ns(value, what) / 1e9


def _get(mapping: Mapping[str, Any], *names: str) -> Any:
    """The first of `names` present: Nighthawk's field name first, then nhbench's own for a
    document in nhbench's native shape."""
    for name in names:
        if name in mapping and mapping[name] is not None:
            return mapping[name]
    return None


def _labels(options: Mapping[str, Any]) -> list[str]:
    value = _get(options, "labels", "label")
    if value is None:
        return []
    if isinstance(value, str):  # a repeated field written as one value (Nighthawk accepts it)
        return [value]
    return [str(label) for label in value]


def _counter(result: Mapping[str, Any], name: str) -> int:
    for counter in result.get("counters") or ():
        if counter.get("name") == name:
            return _uint(counter.get("value", 0), f"counter {name}")
    return 0


def _statistic(result: Mapping[str, Any], stat_id: str) -> Mapping[str, Any] | None:
    for statistic in result.get("statistics") or ():
        if statistic.get("id") == stat_id:
            found: Mapping[str, Any] = statistic
            return found
    return None


def _value(entry: Mapping[str, Any], name: str, what: str) -> float:
    """A statistic's or percentile's value: the Duration `name` in seconds when present (a
    latency), else ``raw_<name>`` (a size), else 0 (proto3's default)."""
    if name in entry:
        return _seconds(entry[name], f"{what}.{name}")
    raw = entry.get(f"raw_{name}", 0)
    return float(_number(raw, f"{what}.raw_{name}"))


def _version(document: Mapping[str, Any]) -> str:
    version = document.get("version")
    if isinstance(version, str):  # nhbench's own JSON: the version string itself
        return version
    inner = version.get("version", {}) if isinstance(version, Mapping) else {}
    parts = (inner.get("major_number", 0), inner.get("minor_number", 0), inner.get("patch", 0))
    return ".".join(str(_uint(part, "version")) for part in parts)


_TIMESTAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$")


def _timestamp(value: Any) -> str:
    """A google.protobuf.Timestamp as protobuf writes it: UTC, ``Z``, and 0, 3, 6 or 9
    fractional digits; the epoch when the document has none (an unset message field)."""
    if value is None:
        return "1970-01-01T00:00:00Z"
    match = _TIMESTAMP.match(str(value).strip())
    if not match:
        raise ValueError(f"timestamp: expected an RFC 3339 time (got {value!r})")
    whole, frac, zone = match.groups()
    moment = datetime.fromisoformat(whole + ("+00:00" if zone == "Z" else zone))
    utc = moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    return utc + _fraction(int((frac or "").ljust(9, "0"))) + "Z"


def _fraction(nanos: int) -> str:
    if nanos == 0:
        return ""
    if nanos % 1_000_000 == 0:
        return f".{nanos // 1_000_000:03d}"
    if nanos % 1_000 == 0:
        return f".{nanos // 1_000:06d}"
    return f".{nanos:09d}"


def _duration_text(ns: int) -> str:
    sign = "-" if ns < 0 else ""
    whole, nanos = divmod(abs(ns), _NS)
    return f"{sign}{whole}{_fraction(nanos)}s"


# ---- protobuf's JSON printer ----------------------------------------------------------------


class _Raw(str):
    """A JSON token already rendered (a number, a quoted string, true/false)."""


def _double(value: float) -> _Raw:
    """A double as protobuf prints it (see `_nhfields.protobuf_double`)."""
    return _Raw(json_double(value))


def _uint64(value: int) -> _Raw:
    return _Raw(f'"{value % _UINT64}"')


def _uint32(value: int) -> _Raw:
    return _Raw(str(value % _UINT32))


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r",
            "\t": "\\t"}


def _escaped_code_point(code: int) -> bool:
    """Whether protobuf's JSON printer writes this code point as \\uXXXX: C0 and C1 control
    characters and DEL, ``<`` and ``>`` (for HTML), and the invisible or formatting
    characters it escapes to keep JavaScript consumers safe."""
    return (code < 0x20 or 0x7f <= code < 0xa0 or code in (0x3c, 0x3e, 0xad, 0x6dd, 0x70f,
                                                            0x17b4, 0x17b5, 0xfeff)
            or 0x600 <= code <= 0x603 or 0x200b <= code <= 0x200f or 0x2028 <= code <= 0x202e
            or 0x2060 <= code <= 0x2064 or 0x206a <= code <= 0x206f
            or 0xfff9 <= code <= 0xfffb or code == 0xe0001 or 0x1d173 <= code <= 0x1d17a
            or 0xe0020 <= code <= 0xe007f)


def _string(text: str) -> _Raw:
    out = []
    for char in text:
        code = ord(char)
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif not _escaped_code_point(code):
            out.append(char)
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:  # a UTF-16 surrogate pair, as JSON spells characters beyond the BMP
            high, low = 0xd800 + ((code - 0x10000) >> 10), 0xdc00 + ((code - 0x10000) & 0x3ff)
            out.append(f"\\u{high:04x}\\u{low:04x}")
    return _Raw('"' + "".join(out) + '"')


def _dump(value: Any, indent: int) -> str:
    """Protobuf's pretty JSON: an object is a tuple of (key, value) pairs in the printer's
    order, an array a list; one space per level, empty ones as ``{}`` and ``[]``."""
    pad = " " * (indent + 1)
    if isinstance(value, _Raw):
        return str(value)
    if isinstance(value, tuple):  # an object: a tuple of pairs
        if not value:
            return "{}"
        items = [f'{pad}"{key}": {_dump(item, indent + 1)}' for key, item in value]
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    if not value:
        return "[]"
    items = [pad + _dump(item, indent + 1) for item in value]
    return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"


# ---- the formatter --------------------------------------------------------------------------


def _histogram(statistic: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    """Nighthawk's renderFortioDurationHistogram: one Data bucket per reported percentile
    (from the previous percentile's value to this one's, with the samples between), the
    summary, and Fortio's percentile points picked the way Nighthawk's console output picks
    them."""
    what = f"statistic {statistic.get('id', '')}"
    data = []
    previous_count = 0
    previous_end = 0.0
    percentiles = list(statistic.get("percentiles") or ())
    for index, point in enumerate(percentiles):
        count = _uint(point.get("count", 0), f"{what} percentile count")
        end = _value(point, "duration", what) if "duration" in point else float(
            _number(point.get("raw_value", 0), f"{what}.raw_value"))
        if index == 0:
            # Nighthawk starts the first bucket at its own end, so that it does not stretch
            # from 0 and look disproportionately big in Fortio's chart.
            previous_end = end
        percent = float(_number(point.get("percentile", 0), f"{what} percentile")) * 100
        data.append((
            ("Start", _double(previous_end)),
            ("End", _double(end)),
            ("Percent", _double(percent)),
            ("Count", _uint64(count - previous_count)),
        ))
        previous_count = count
        previous_end = end
    count = _uint(statistic.get("count", 0), f"{what}.count")
    avg = _value(statistic, "mean", what)
    picked = []
    last = -1.0
    for target in _PICKED_PERCENTILES:
        for point in percentiles:
            fraction = float(_number(point.get("percentile", 0), f"{what} percentile"))
            if fraction >= target and last < fraction:
                last = fraction
                if 0 < fraction < 1:
                    value = _value(point, "duration", what) if "duration" in point else float(
                        _number(point.get("raw_value", 0), f"{what}.raw_value"))
                    picked.append((
                        ("Percentile", _double(math.floor(fraction * 1000) / 10)),
                        ("Value", _double(value)),
                    ))
                break
    return (
        ("Count", _uint64(count)),
        ("Data", data),
        ("Min", _double(_value(statistic, "min", what))),
        ("Max", _double(_value(statistic, "max", what))),
        ("Sum", _double(count * avg)),
        ("Avg", _double(avg)),
        ("StdDev", _double(_value(statistic, "pstdev", what))),
        ("Percentiles", picked),
    )


def _ret_codes(global_result: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    codes: dict[int, int] = {}
    for counter in global_result.get("counters") or ():
        code = status_counter_code(str(counter.get("name", "")))
        if code is not None:
            codes[code] = _uint(counter.get("value", 0), f"counter {counter.get('name')}")
    if not codes:
        # What Nighthawk writes: Fortio's UI reads only "200" (its error percentage is
        # 1 - RetCodes[200] / DurationHistogram.Count), so the 2xx count stands in for it.
        return (("200", _uint64(_counter(global_result, "benchmark.http_2xx"))),)
    return tuple((str(code), _uint64(codes[code])) for code in sorted(codes))


def _nhbench_options(document: Mapping[str, Any]) -> Mapping[str, Any]:
    """The options an nhbench document carries in its extension (those Nighthawk's options
    have no field for: Fortio's -jitter, gRPC's ping...); empty for Nighthawk's own."""
    for entry in document.get("results") or ():
        run = (nhbench_extension(entry) or {}).get("run")
        options = run.get("options") if isinstance(run, Mapping) else None
        if isinstance(options, Mapping):
            return options
    return {}


def _go_duration_text(seconds: float) -> str:
    # Go's time.Duration.String() for what Fortio writes in a RunType: "10ms", "1.5s".
    ns = round(seconds * _NS)
    for unit, size in (("s", _NS), ("ms", 1_000_000), ("µs", 1000)):
        if ns >= size:
            return f"{ns / size:.9g}{unit}"
    return f"{ns}ns"


def _run_type(uri: str, extra: Mapping[str, Any]) -> str:
    """Fortio's RunType for the run's kind, as Fortio's runners set it: "HTTP" (fhttp),
    "TCP" (tcprunner), "UDP" (udprunner), "GRPC Ping" or "GRPC Health for 'SERVICE'"
    (fgrpc; nhbench's other gRPC methods, which Fortio does not call, are "GRPC METHOD")."""
    scheme = uri.partition("://")[0].lower()
    if scheme in ("tcp", "udp"):
        return scheme.upper()
    if scheme not in ("grpc", "grpcs"):
        return "HTTP"
    if extra.get("ping") is True:
        delay = extra.get("grpc_ping_delay")
        if isinstance(delay, (int, float)) and not isinstance(delay, bool) and delay > 0:
            return f"GRPC Ping Delay={_go_duration_text(delay)}"
        return "GRPC Ping"
    method = extra.get("grpc_method")
    if isinstance(method, str) and method:
        return f"GRPC {method}"
    service = extra.get("grpc_service")
    return f"GRPC Health for '{service if isinstance(service, str) else ''}'"


def _fortio_result(document: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    results: Sequence[Mapping[str, Any]] = document.get("results") or []
    if not results:
        raise ValueError("fortio: the result has no results (entries 'worker_N' and 'global')")
    global_result = next((r for r in results if r.get("name") == "global"), None)
    if global_result is None:
        raise ValueError("fortio: the result has no 'global' result")
    options: Mapping[str, Any] = document.get("options") or {}
    workers = 1 if len(results) == 1 else len(results) - 1
    rps = _number(_get(options, "requests_per_second", "rps") or 0, "requests_per_second")
    connections = _uint(_get(options, "connections") or 0, "connections")
    # Nighthawk's actual duration is the last result's, which it asserts is the global one.
    actual_ns = _duration_ns(results[-1].get("execution_duration", "0s"), "execution_duration")
    requests = _counter(global_result, "upstream_rq_total")
    seconds = actual_ns / 1e9
    if seconds:
        actual_qps = requests / seconds
    else:
        actual_qps = math.inf if requests else math.nan  # what C++'s division gives
    extra = _nhbench_options(document)
    jitter = _get(options, "jitter_uniform")
    fields: list[tuple[str, Any]] = [
        ("Labels", _string(" ".join(_labels(options)))),
        ("RequestedQPS", _uint32(int(workers * rps))),
        ("ActualQPS", _double(actual_qps)),
        ("ActualDuration", _double(float(actual_ns))),
        ("NumThreads", _uint32(connections * workers)),
    ]
    statistic = _statistic(global_result, REQUEST_TO_RESPONSE)
    if statistic is not None:
        fields.append(("DurationHistogram", _histogram(statistic)))
    fields += [
        ("RetCodes", _ret_codes(global_result)),
        ("URL", _string(str(_get(options, "uri") or ""))),
        ("Version", _string(_version(document))),
        # Nighthawk's rule (a jitter_uniform above zero), or Fortio's own -jitter.
        ("Jitter", _Raw("true" if extra.get("jitter") is True or (
            jitter is not None and _duration_ns(jitter, "jitter_uniform") > 0) else "false")),
        ("RunType", _string(_run_type(str(_get(options, "uri") or ""), extra))),
    ]
    for key, stat_id in (("Sizes", RESPONSE_BODY_SIZE), ("HeaderSizes", RESPONSE_HEADER_SIZE)):
        statistic = _statistic(global_result, stat_id)
        if statistic is not None:
            fields.append((key, _histogram(statistic)))
    duration = _get(options, "duration")
    fields += [
        ("BytesSent", _uint64(_counter(global_result, "upstream_cx_tx_bytes_total"))),
        ("BytesReceived", _uint64(_counter(global_result, "upstream_cx_rx_bytes_total"))),
        # Nighthawk's printer puts the well-known types after every other field.
        ("StartTime", _string(_timestamp(document.get("timestamp")))),
        ("RequestedDuration", _string(_duration_text(
            _duration_ns(duration, "duration") if duration is not None else 0))),
    ]
    return tuple(fields)


def format_fortio(document: Mapping[str, Any]) -> str:
    """Nighthawk's ``fortio`` output of a Nighthawk ``Output`` JSON document."""
    return _dump(_fortio_result(document), 0) + "\n"


# Nighthawk's two fixes, as regular expressions over its own output (and so with its reach:
# a label that contains such text inside the JSON string is not touched, because its quotes
# are escaped there).
_REQUESTED_QPS = re.compile(r'"RequestedQPS": ([0-9]*)')
_COUNTS = re.compile(r'"([0-9][0-9][0-9]|Count|BytesSent|BytesReceived)": "([0-9]*)"')


def format_fortio_pedantic(document: Mapping[str, Any]) -> str:
    """Nighthawk's ``experimental_fortio_pedantic`` output: ``fortio`` with Fortio's own
    types (RequestedQPS a string, counts numbers), so Fortio's Go decoder reads it too."""
    text = format_fortio(document)
    text = _REQUESTED_QPS.sub(r'"RequestedQPS": "\1"', text)
    text = _COUNTS.sub(r'"\1": \2', text)
    options: Mapping[str, Any] = document.get("options") or {}
    if _number(_get(options, "requests_per_second", "rps") or 0, "requests_per_second") == 0:
        # nhbench's maximum rate (Nighthawk's rate is at least 1): Fortio writes "max".
        text = text.replace('"RequestedQPS": "0"', '"RequestedQPS": "max"', 1)
    return text


def render_fortio(result: Result) -> str:
    """The ``fortio`` output of `result`."""
    return format_fortio(nighthawk_output(result))


def render_fortio_pedantic(result: Result) -> str:
    """The ``experimental_fortio_pedantic`` output of `result`."""
    return format_fortio_pedantic(nighthawk_output(result))
