"""Reading a Nighthawk ``Output`` JSON document the way Nighthawk's C++ formatters read the
proto, and printing numbers the way they print them.

Shared by the ``dotted``, ``csv``, ``nighthawk_human`` and ``prometheus`` formats
(`_dotted`, `_csv`, `_nighthawk_human`, `_prometheus`; ``yaml`` uses `protobuf_double`
only), which are ports of Nighthawk's
``output_formatter_impl.cc`` over the JSON mapping instead of the proto: a document may come
from `nighthawk_output` or from a file Nighthawk wrote, so every accessor accepts what proto3
JSON allows (64-bit integers as strings or numbers, doubles as numbers or ``"NaN"`` and
``"Infinity"``, Durations as ``"1.000340s"``) and treats a missing field as the proto's
default, as the proto would.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

__all__ = [
    "FRIENDLY_NAMES",
    "TITLE",
    "counter_rate",
    "duration_micros",
    "duration_nanos",
    "duration_text",
    "entries",
    "fmt_double",
    "fmt_fixed2",
    "has",
    "int64_cast",
    "percentile_points",
    "protobuf_double",
    "results",
    "statistic_value",
    "to_double",
    "to_uint",
]

# proto3 JSON's Duration: a decimal number of seconds with at most nine fractional digits and
# a trailing "s" (google/protobuf/duration.proto).
_DURATION = re.compile(r"(-?)(\d+)(?:\.(\d{1,9}))?s")

# Nighthawk's iteratePercentiles: the percentiles every text format picks from a statistic's
# percentile list (output_formatter_impl.cc), in this order.
_PICKED = (0.0, 0.5, 0.75, 0.8, 0.9, 0.95, 0.99, 0.999, 1.0)

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1

#: The first line of Nighthawk's human and csv outputs.
TITLE = "Nighthawk - A layer 7 protocol benchmarking tool."

#: Nighthawk's statIdtoFriendlyStatName: the headings its human and csv outputs give the
#: statistics it knows by id (any other statistic is headed by its id).
FRIENDLY_NAMES = {
    "benchmark_http_client.queue_to_connect": "Queueing and connection setup latency",
    "benchmark_http_client.request_to_response": "Request start to response end",
    "sequencer.callback": "Initiation to completion",
    "sequencer.blocking": (
        "Blocking. Results are skewed when significant numbers are reported here."
    ),
    "benchmark_http_client.response_body_size": "Response body size in bytes",
    "benchmark_http_client.response_header_size": "Response header size in bytes",
}


def results(document: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The document's ``results`` (per worker, then ``global``), each a mapping."""
    value = _mapping(document, "document").get("results") or []
    if not isinstance(value, Sequence) or isinstance(value, str):
        raise ValueError("results: must be a list")
    return [_mapping(item, "results[]") for item in value]


def entries(parent: Mapping[str, Any], name: str) -> list[Mapping[str, Any]]:
    """A repeated message field (``statistics``, ``counters``, ``percentiles``) as mappings;
    absent means empty, as in proto3."""
    value = parent.get(name) or []
    if not isinstance(value, Sequence) or isinstance(value, str):
        raise ValueError(f"{name}: must be a list")
    return [_mapping(item, f"{name}[]") for item in value]


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ValueError(f"{where}: must be an object")
    return value


def has(message: Mapping[str, Any], name: str) -> bool:
    """Whether a message-typed (oneof) field is set: the key is present and not null."""
    return message.get(name) is not None


def to_uint(value: Any, name: str = "value") -> int:
    """A (u)int64/(u)int32 field: a JSON number or a decimal string; absent is 0."""
    if value is None:
        return 0
    if isinstance(value, bool):
        raise ValueError(f"{name}: must be an integer (got {value!r})")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value, 10)
        except ValueError:
            pass
    raise ValueError(f"{name}: must be an integer (got {value!r})")


def to_double(value: Any, name: str = "value") -> float:
    """A double field: a JSON number, a decimal string, or proto3 JSON's "NaN", "Infinity",
    "-Infinity"; absent is 0."""
    if value is None:
        return 0.0
    if isinstance(value, bool):
        raise ValueError(f"{name}: must be a number (got {value!r})")
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        special = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
        if value in special:
            return special[value]
        try:
            return float(value)
        except ValueError:
            pass
    raise ValueError(f"{name}: must be a number (got {value!r})")


def _duration(value: Any, name: str) -> tuple[int, int]:
    """A google.protobuf.Duration as (seconds, nanos), both carrying the sign, as the proto
    holds it."""
    if value is None:
        return 0, 0
    match = _DURATION.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise ValueError(f'{name}: must be a Duration such as "0.002s" (got {value!r})')
    sign = -1 if match.group(1) else 1
    nanos = int((match.group(3) or "").ljust(9, "0"))
    return sign * int(match.group(2)), sign * nanos


def _trunc_div(a: int, b: int) -> int:
    """C++ integer division (truncates toward zero), which protobuf's TimeUtil uses."""
    quotient = abs(a) // abs(b)
    return quotient if (a >= 0) == (b >= 0) else -quotient


def duration_micros(value: Any, name: str = "duration") -> int:
    """TimeUtil::DurationToMicroseconds: whole microseconds, truncated toward zero (so
    "0.000816497s" is 816)."""
    seconds, nanos = _duration(value, name)
    return seconds * 1_000_000 + _trunc_div(nanos, 1000)


def duration_nanos(value: Any, name: str = "duration") -> int:
    """TimeUtil::DurationToNanoseconds."""
    seconds, nanos = _duration(value, name)
    return seconds * 1_000_000_000 + nanos


def _c_mod(a: int, b: int) -> int:
    """C++ ``%`` (the remainder takes the dividend's sign)."""
    remainder = abs(a) % abs(b)
    return remainder if a >= 0 else -remainder


def duration_text(value: Any, name: str = "duration") -> str:
    """Nighthawk's formatProtoDuration (the human and csv formats): ``"{s}s {ms:03}ms
    {us:03}us"`` from whole microseconds.

    The seconds are taken modulo 1000 as Nighthawk does (so 1234.5 s prints as
    "234s 500ms 000us"): these formats copy Nighthawk's output, quirks included.
    """
    micros = duration_micros(value, name)
    seconds = _trunc_div(_c_mod(micros, 1_000_000_000), 1_000_000)
    millis = _trunc_div(_c_mod(micros, 1_000_000), 1_000)
    return f"{seconds}s {millis:03}ms {_c_mod(micros, 1_000):03}us"


def fmt_double(value: float) -> str:
    """A double as ``fmt::format("{}", value)`` prints it: the shortest text that reads back
    as the same double, without a trailing ".0" (1.118033988749895, 15.5, 780, 1e+16).

    Python's repr uses the same shortest digits and the same switch to exponent notation
    (below 1e-4, from 1e16 up), so only the ".0" of whole numbers differs.
    """
    if math.isnan(value):
        return "-nan" if math.copysign(1.0, value) < 0 else "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    text = repr(value)
    return text[:-2] if text.endswith(".0") else text


def protobuf_double(value: float) -> str:
    """A double as protobuf's JSON writer prints it (what Nighthawk's json and therefore its
    yaml contain): NaN and the infinities as proto3 JSON's "NaN", "Infinity", "-Infinity",
    else SimpleDtoa, ``%.15g`` when that reads back exactly and ``%.17g`` otherwise (so
    1.1180339887498949, where fmt and Python print 1.118033988749895)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    text = f"{value:.15g}"
    return text if float(text) == value else f"{value:.17g}"


def json_double(value: float) -> str:
    """`protobuf_double` as a JSON token: the non-finite spellings are JSON strings."""
    text = protobuf_double(value)
    return text if math.isfinite(value) else f'"{text}"'


def fmt_fixed2(value: float) -> str:
    """``fmt::format("{:.2f}", value)``; unlike Python's format, fmt keeps the sign of a
    NaN ("-nan")."""
    if math.isnan(value):
        return fmt_double(value)
    return f"{value:.2f}"


def int64_cast(value: float) -> int:
    """``static_cast<int64_t>(double)``: truncation toward zero; what x86-64 gives where C++
    leaves it undefined (NaN, out of range) is INT64_MIN, so that is what this gives too."""
    if math.isnan(value) or math.isinf(value):
        return _INT64_MIN
    truncated = int(value)
    return truncated if _INT64_MIN <= truncated <= _INT64_MAX else _INT64_MIN


def statistic_value(
    statistic: Mapping[str, Any], field: str, duration_text: Callable[[Any, str], str]
) -> str:
    """One of min, max, mean, pstdev as the text formats print it: ``duration_text(value,
    field name)`` of the Duration when the statistic holds a Duration (``has_min()`` in C++), else the raw value
    (``raw_min`` and ``raw_max`` are uint64, ``raw_mean`` and ``raw_pstdev`` doubles)."""
    if has(statistic, field):
        return duration_text(statistic[field], field)
    raw = statistic.get(f"raw_{field}")
    if field in ("min", "max"):
        return str(to_uint(raw, f"raw_{field}"))
    return fmt_double(to_double(raw, f"raw_{field}"))


def percentile_points(statistic: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """Nighthawk's iteratePercentiles: for each of 0, .5, .75, .8, .9, .95, .99, .999 and 1,
    the first listed percentile at or above it that is above the last one picked (so a
    percentile list of 0 .. 0.775, 1 yields 0, 0.5, 0.75 and 1, once each)."""
    listed = entries(statistic, "percentiles")
    values = [to_double(p.get("percentile"), "percentile") for p in listed]
    last = -1.0
    for wanted in _PICKED:
        for entry, value in zip(listed, values, strict=True):
            if value >= wanted and last < value:
                last = value
                yield entry
                break


def counter_rate(value: int, execution_duration: Any) -> float:
    """A counter's per-second rate as Nighthawk's csv (and human) formats compute it:
    ``value / (nanos / 1e9)`` in doubles. A zero duration divides by zero as C++ does:
    infinity, or for 0/0 the NaN x86-64 produces (its sign bit set, printed "-nan")."""
    seconds = duration_nanos(execution_duration, "execution_duration") / 1e9
    if seconds == 0:
        if value == 0:
            return -math.nan
        return math.inf
    return float(value) / seconds
