"""Compact numbers for tables and charts: latency with three significant digits and request
rates with thousands separators.

The sweep's reports (report.txt, report.html), their SVG charts and the notebook views of a
`Result` or a `Campaign` all print numbers through these two functions, so a p99 reads the
same wherever it is shown. They live in the lowest layer because the charts (`nhbench._svg`)
and the campaign, below the report package, need them too. The human run report keeps its
own fixed-decimal `nhbench._output.format_seconds`, which lines up in a column of figures.
"""

from __future__ import annotations

import math

__all__ = ["format_latency", "format_rate"]


def _significant(value: float, digits: int = 3) -> str:
    """`value` with `digits` significant digits, without exponent: 1.23, 12.3, 123, 1234."""
    if value == 0:
        return "0"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    return f"{value:.{decimals}f}"


def format_latency(seconds: float | None) -> str:
    """Seconds in the unit that reads best, three significant digits: ``850 µs``,
    ``1.23 ms``, ``2.50 s``; ``-`` for no value."""
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)):
        return "-"
    if seconds < 0:
        return "-" + format_latency(-seconds)
    if seconds == 0:
        return "0 s"
    # Round to three significant digits first, so that 999.6 µs becomes 1.00 ms and not
    # "1000 µs".
    seconds = float(f"{seconds:.3g}")
    if seconds < 1e-3:
        return f"{_significant(seconds * 1e6)} µs"
    if seconds < 1:
        return f"{_significant(seconds * 1e3)} ms"
    return f"{_significant(seconds)} s"


def format_rate(rps: float | None) -> str:
    """Requests per second for a table: thousands separated, one decimal below 100."""
    if rps is None:
        return "-"
    if abs(rps) < 100 and rps != int(rps):
        return f"{rps:.1f}"
    return f"{rps:,.0f}"
