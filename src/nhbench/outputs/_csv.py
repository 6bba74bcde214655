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
    FRIENDLY_NAMES,
    TITLE,
    counter_rate,
    duration_micros,
    duration_text,
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


def format_csv(document: Mapping[str, Any]) -> str:
    """The csv text of a Nighthawk ``Output`` JSON document."""
    out = [TITLE, ""]
    for result in results(document):
        if result.get("name") != "global":
            continue
        for statistic in entries(result, "statistics"):
            count = to_uint(statistic.get("count"), "count")
            if count == 0:
                continue
            stat_id = str(statistic.get("id") or "")
            out.append(f"{FRIENDLY_NAMES.get(stat_id, stat_id)} ({count} samples)")
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
