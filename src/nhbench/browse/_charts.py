"""The browser's charts, as inline SVG from `nhbench._svg` (drawn here, in Python: the
pages need no chart library, no script and no network to show them).

* `distribution_chart`: latency by percentile on the "HdrHistogram" axis (x = 1 / (1 - p),
  labelled 0%, 90%, 99%, 99.9%...), one curve per series: the CO-corrected and the
  uncorrected latency of one run, or the CO-corrected latency of several runs overlaid.
* `timeline_charts`: latency (p50, p90, p99, max) and throughput over time, from
  ``result.timeline`` (one point per ``--stats-interval``, at most `MAX_TIMELINE_POINTS`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .._format import format_latency
from .._notebook import distribution
from .._svg import PALETTE, Series, line_chart, percentile_chart, percentile_x

if TYPE_CHECKING:
    from .._result import Result, Statistic
    from .._timeline import IntervalRecord

__all__ = ["curve", "distribution_chart", "named_percentile", "timeline_charts"]


def named_percentile(fraction: float) -> bool:
    """p0, p50 and every whole nine (p90, p99, p99.9...) get a marker on a curve."""
    if fraction in (0.0, 0.5):
        return True
    nines = -math.log10(1.0 - fraction)
    return abs(nines - round(nines)) < 1e-6


def curve(statistic: Statistic | None) -> list[tuple[float, float]]:
    """``(percentile fraction, seconds)`` points of a latency distribution: from the full
    histogram when the result has one (`nhbench._notebook.distribution`: ten points per
    nine), else the percentiles the file reports (a Nighthawk or Fortio file without an
    encoded histogram). p100 has no place on a 1 / (1 - p) axis and is left out; the max
    is in the page's tables."""
    if statistic is None or statistic.count == 0 or statistic.raw:
        return []
    points = distribution(statistic)
    if points:
        return points
    return sorted((p.percentile, p.value) for p in statistic.percentiles
                  if 0.0 <= p.percentile < 1.0 and math.isfinite(p.value))


def _series(name: str, points: Sequence[tuple[float, float]], colour: str) -> Series:
    return Series(name, [(percentile_x(f), value) for f, value in points], colour,
                  marked=[named_percentile(f) for f, _ in points])


def distribution_chart(
    curves: Sequence[tuple[str, Sequence[tuple[float, float]]]],
    *,
    title: str = "Latency by percentile",
    legend: bool = True,
    width: int = 760,
    height: int = 380,
) -> str:
    """One chart with a curve per ``(name, points)``, in `PALETTE` order (a curve without
    points keeps its colour, so the page's legend still matches)."""
    series = [_series(name, points, PALETTE[i % len(PALETTE)])
              for i, (name, points) in enumerate(curves) if points]
    return percentile_chart(title, series, y_label="latency", y_format=format_latency,
                            width=width, height=height, legend=legend)


#: The most points a timeline chart draws per curve. Each point is an SVG circle with its
#: tooltip (about 140 bytes, six curves): a 94-hour run at one-second intervals made a
#: 290 MB page and doubled the memory of `nhbench report`. 1000 points is more than the
#: chart's 760 pixels can show.
MAX_TIMELINE_POINTS = 1000


def _timeline_groups(timeline: Sequence[IntervalRecord]) -> list[Sequence[IntervalRecord]]:
    """Consecutive intervals, at most `MAX_TIMELINE_POINTS` groups: each interval alone
    when there are few enough."""
    size = max(1, math.ceil(len(timeline) / MAX_TIMELINE_POINTS))
    return [timeline[i:i + size] for i in range(0, len(timeline), size)]


def _worst(group: Sequence[IntervalRecord], key: str) -> float | None:
    values = [value for value in (getattr(r, key) for r in group) if value is not None]
    return max(values) if values else None


def _per_second(group: Sequence[IntervalRecord], key: str) -> float:
    if len(group) == 1 and key == "requests":
        return group[0].rps
    seconds = sum(r.duration for r in group)
    return sum(getattr(r, key) for r in group) / seconds if seconds > 0 else 0.0


def timeline_charts(result: Result) -> list[str]:
    """Latency over time and throughput over time, or nothing without a timeline. Each
    interval is one point at its end; an interval without responses has no latency point.
    A timeline of more than `MAX_TIMELINE_POINTS` intervals is drawn with that many points,
    each for consecutive intervals: the worst latency among them and their mean rates."""
    groups = _timeline_groups(list(result.timeline))
    if not groups:
        return []
    ends = [group[-1].start + group[-1].duration for group in groups]
    latency = []
    for i, key in enumerate(("p50", "p90", "p99", "max")):
        values = [_worst(group, key) for group in groups]
        points = [(end, value) for end, value in zip(ends, values, strict=True)
                  if value is not None]
        latency.append(Series(key, points, PALETTE[i]))
    rate = [
        Series("responses/s", [(end, _per_second(group, "requests"))
                               for end, group in zip(ends, groups, strict=True)], PALETTE[0]),
        Series("errors/s", [(end, _per_second(group, "errors"))
                            for end, group in zip(ends, groups, strict=True)], PALETTE[3]),
    ]
    return [
        line_chart("Latency over time (CO-corrected)", [s for s in latency if s.points],
                   x_label="seconds into the run", y_label="latency", y_format=format_latency,
                   width=760, height=340),
        line_chart("Throughput over time", rate, x_label="seconds into the run",
                   y_label="per second", width=760, height=300),
    ]
