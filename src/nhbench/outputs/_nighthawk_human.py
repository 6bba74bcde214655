"""``--output-format nighthawk_human``: Nighthawk's ``human`` output
(ConsoleOutputFormatterImpl), byte for byte.

What Nighthawk users' scripts parse, for the ``global`` result only: the title line and a
blank line; per statistic with samples, its heading (Nighthawk's name for the six it knows,
else its id) with the sample count, a ``  min: … | mean: … | max: … | pstdev: …`` line and,
when Nighthawk picks any percentile strictly between 0 and 1, a blank line and a table of
them (columns 12, 12 and 15 wide, left-aligned, padded with trailing spaces as Nighthawk
pads them); a blank line; then the counters in columns 40 and 12 wide with their rate per
second of the global result's ``execution_duration`` (two decimals). Durations print as
``0s 000ms 000us`` (seconds modulo 1000, as Nighthawk does), sizes as raw numbers.
One deliberate difference: a control character in a statistic id or a counter name (which
Nighthawk's own statistics never have, but a hostile file may) is escaped, as nhbench's
human output escapes it, so the text cannot drive a terminal or forge a line of the layout.
nhbench's own ``human`` (`_human`) is the richer report; this one is the drop-in for
Nighthawk's. docs/outputs.md "nighthawk_human" has an example.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._format import printable
from ._nhfields import (
    FRIENDLY_NAMES,
    TITLE,
    counter_rate,
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

__all__ = ["format_nighthawk_human", "render_nighthawk_human"]


def _statistic_lines(statistic: Mapping[str, Any], count: int) -> list[str]:
    stat_id = str(statistic.get("id") or "")
    mmmp = [statistic_value(statistic, field, duration_text)
            for field in ("min", "mean", "max", "pstdev")]
    lines = [
        f"{printable(FRIENDLY_NAMES.get(stat_id, stat_id))} ({count} samples)",
        "  min: {} | mean: {} | max: {} | pstdev: {}".format(*mmmp),
    ]
    header_written = False
    for percentile in percentile_points(statistic):
        p = to_double(percentile.get("percentile"), "percentile")
        # Nighthawk leaves out 0 and 1: the min and max line already shows them.
        if not 0 < p < 1:
            continue
        if not header_written:
            lines += ["", f"  {'Percentile':<12}{'Count':<12}{'Value':<15}"]
            header_written = True
        if has(percentile, "duration"):
            value = duration_text(percentile["duration"])
        else:
            value = str(int64_cast(to_double(percentile.get("raw_value"), "raw_value")))
        count_text = str(to_uint(percentile.get("count"), "count"))
        lines.append(f"  {p:<12.8g}{count_text:<12}{value:<15}")
    lines.append("")
    return lines


def format_nighthawk_human(document: Mapping[str, Any]) -> str:
    """Nighthawk's human text of a Nighthawk ``Output`` JSON document."""
    out = [TITLE, ""]
    for result in results(document):
        if result.get("name") != "global":
            continue
        for statistic in entries(result, "statistics"):
            count = to_uint(statistic.get("count"), "count")
            if count == 0:
                continue
            out += _statistic_lines(statistic, count)
        out.append(f"{'Counter':<40}{'Value':<12}Per second")
        for counter in entries(result, "counters"):
            value = to_uint(counter.get("value"), "value")
            rate = counter_rate(value, result.get("execution_duration"))
            name = printable(str(counter.get("name") or ""))
            out.append(f"{name:<40}{value!s:<12}{fmt_fixed2(rate)}")
        out.append("")
    return "".join(line + "\n" for line in out)


def render_nighthawk_human(result: Result) -> str:
    """`format_nighthawk_human` of `result`'s Nighthawk document."""
    return format_nighthawk_human(nighthawk_output(result))
