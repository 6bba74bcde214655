"""``--output-format csv``: Nighthawk's CsvOutputFormatterImpl, byte for byte.

Nighthawk's "csv" is the human report's content as comma-separated tables, for the
``global`` result only: a title line, then per statistic with samples a heading line, a
``Min,Mean,Max,Pstdev`` table and a ``Percentile,Count,Value(microseconds),Value`` table of
the percentiles strictly between 0 and 1 that Nighthawk picks, then a
``Counter,Value,Per second`` table. Durations print as Nighthawk's ``"0s 001ms 000us"``;
like Nighthawk, nothing is quoted (a counter name with a comma would break a column).
docs/outputs.md "csv" has an example.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ._nhfields import (
    counter_rate,
    duration_micros,
    entries,
    fmt_fixed2,
    has,
    int64_cast,
    percentile_points,
    results,
    statistic_value,
    to_double,
    to_uint,
)
from ._nighthawk import nighthawk_output

if TYPE_CHECKING:
    from .._result import Result

__all__ = ["format_csv", "render_csv"]

_TITLE = "Nighthawk - A layer 7 protocol benchmarking tool."

# Nighthawk's statIdtoFriendlyStatName: the headings of the statistics it knows by id.
_FRIENDLY = {
    "benchmark_http_client.queue_to_connect": "Queueing and connection setup latency",
    "benchmark_http_client.request_to_response": "Request start to response end",
    "sequencer.callback": "Initiation to completion",
    "sequencer.blocking": (
        "Blocking. Results are skewed when significant numbers are reported here."
    ),
    "benchmark_http_client.response_body_size": "Response body size in bytes",
    "benchmark_http_client.response_header_size": "Response header size in bytes",
}


def _c_mod(a: int, b: int) -> int:
    """C++ ``%`` (the remainder takes the dividend's sign)."""
    remainder = abs(a) % abs(b)
    return remainder if a >= 0 else -remainder


def _c_div(a: int, b: int) -> int:
    """C++ ``/`` on integers (truncates toward zero)."""
    quotient = abs(a) // abs(b)
    return quotient if (a >= 0) == (b >= 0) else -quotient


def duration_text(value: Any, name: str = "duration") -> str:
    """Nighthawk's formatProtoDuration: ``"{s}s {ms:03}ms {us:03}us"`` from whole microseconds.

    The seconds are taken modulo 1000 as Nighthawk does (so 1234.5 s prints as
    "234s 500ms 000us"): this format copies Nighthawk's output, quirks included.
    """
    micros = duration_micros(value, name)
    seconds = _c_div(_c_mod(micros, 1_000_000_000), 1_000_000)
    millis = _c_div(_c_mod(micros, 1_000_000), 1_000)
    return f"{seconds}s {millis:03}ms {_c_mod(micros, 1_000):03}us"


def format_csv(document: Mapping[str, Any]) -> str:
    """The csv text of a Nighthawk ``Output`` JSON document."""
    out = [_TITLE, ""]
    for result in results(document):
        if result.get("name") != "global":
            continue
        for statistic in entries(result, "statistics"):
            count = to_uint(statistic.get("count"), "count")
            if count == 0:
                continue
            stat_id = str(statistic.get("id") or "")
            out.append(f"{_FRIENDLY.get(stat_id, stat_id)} ({count} samples)")
            out.append("Min,Mean,Max,Pstdev")
            out.append(
                ",".join(
                    statistic_value(statistic, field, duration_text)
                    for field in ("min", "mean", "max", "pstdev")
                )
            )
            header_written = False
            for percentile in percentile_points(statistic):
                p = to_double(percentile.get("percentile"), "percentile")
                if not 0 < p < 1:
                    continue
                if not header_written:
                    out.append("Percentile,Count,Value(microseconds),Value")
                    header_written = True
                # The microseconds column reads the duration even when the point holds a
                # raw value, where the unset Duration gives Nighthawk's 0.
                duration = percentile.get("duration") if has(percentile, "duration") else None
                value = (
                    duration_text(duration)
                    if duration is not None
                    else str(int64_cast(to_double(percentile.get("raw_value"), "raw_value")))
                )
                out.append(
                    f"{p:.8g},{to_uint(percentile.get('count'), 'count')},"
                    f"{duration_micros(duration)},{value}"
                )
            out.append("")
        out.append("Counter,Value,Per second")
        for counter in entries(result, "counters"):
            value_int = to_uint(counter.get("value"), "value")
            rate = counter_rate(value_int, result.get("execution_duration"))
            out.append(f"{counter.get('name') or ''},{value_int},{fmt_fixed2(rate)}")
        out.append("")
    return "".join(line + "\n" for line in out)


def render_csv(result: Result) -> str:
    """`format_csv` of `result`'s Nighthawk document."""
    return format_csv(nighthawk_output(result))
