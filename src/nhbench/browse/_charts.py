"""The browser's charts, as inline SVG from `nhbench._svg` (drawn here, in Python: the
pages need no chart library, no script and no network to show them).

* `distribution_chart`: latency by percentile on the "HdrHistogram" axis (x = 1 / (1 - p),
  labelled 0%, 90%, 99%, 99.9%...), one curve per series: the CO-corrected and the
  uncorrected latency of one run, or the CO-corrected latency of several runs overlaid.
* `phases_chart`: where the time went, one curve per latency phase (docs/engine.md "Latency
  phases") on the same axis: connect, handshake, request write, time to first byte, transfer.
* `streaming_chart`: with --stream-stats, time to first event, the gaps between events and
  the stream durations by percentile (docs/engine.md "Streaming responses").
* `timeline_charts`: latency (p50, p90, p99, max) and throughput over time, from
  ``result.timeline`` (one point per ``--stats-interval``).

A series has at most `MAX_CHART_POINTS` points, so that a chart's size does not grow with
the file: a longer timeline is drawn from groups of consecutive intervals (the highest
latency of each group, its mean rate), a longer list of percentiles from an even
selection of them (`thin`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .._format import format_latency
from .._names import PHASE_IDS, STREAMING_IDS
from .._notebook import distribution
from .._svg import PALETTE, Series, line_chart, percentile_chart, percentile_x

if TYPE_CHECKING:
    from .._result import Result, Statistic

__all__ = ["MAX_CHART_POINTS", "curve", "distribution_chart", "named_percentile",
           "phases_chart", "streaming_chart", "thin", "timeline_charts", "timeline_group"]

#: Points of one chart series. A chart draws a marker with a tooltip per point of a line
#: chart: 100,000 intervals made a page of hundreds of megabytes; 1000 points fill the
#: chart's width.
MAX_CHART_POINTS = 1000


def thin(points: Sequence[tuple[float, float]], limit: int = MAX_CHART_POINTS
         ) -> list[tuple[float, float]]:
    """At most `limit` of `points`, evenly chosen, the first and the last kept."""
    if len(points) <= limit:
        return list(points)
    step = (len(points) - 1) / (limit - 1)
    return [points[round(i * step)] for i in range(limit)]


def timeline_group(intervals: int, limit: int = MAX_CHART_POINTS) -> int:
    """Consecutive intervals drawn as one point, so that a series has at most `limit`."""
    return max(1, math.ceil(intervals / limit))


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
        return thin(points)
    return thin(sorted((p.percentile, p.value) for p in statistic.percentiles
                       if 0.0 <= p.percentile < 1.0 and math.isfinite(p.value)))


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


def phases_chart(result: Result) -> str:
    """The latency phases by percentile, one curve each (a phase without samples, such as
    tls_handshake over plain HTTP, is left out), or "" when the result has none of them (a
    file from an older nhbench, Nighthawk or Fortio)."""
    by_id = {s.id: s for s in result.global_result.statistics}
    curves = [(sid.rsplit(".", 1)[1], curve(by_id[sid])) for sid in PHASE_IDS
              if sid in by_id and by_id[sid].count]
    if not any(points for _, points in curves):
        return ""
    return distribution_chart(curves, title="Latency phases by percentile")


def streaming_chart(result: Result) -> str:
    """The streaming statistics with percentiles (events per response has none), one curve
    each, or "" when the run did not measure them."""
    by_id = {s.id: s for s in result.global_result.statistics}
    curves = [(sid.rsplit(".", 1)[1], curve(by_id[sid])) for sid in STREAMING_IDS
              if sid in by_id and by_id[sid].count and not by_id[sid].raw]
    if not any(points for _, points in curves):
        return ""
    return distribution_chart(curves, title="Streaming: first event, gaps, durations")


def timeline_charts(result: Result) -> list[str]:
    """Latency over time and throughput over time, or nothing without a timeline. Each
    interval is one point at its end; an interval without responses has no latency point."""
    timeline = list(result.timeline)
    if not timeline:
        return []
    size = timeline_group(len(timeline))
    groups = [timeline[i:i + size] for i in range(0, len(timeline), size)]
    latency = []
    for i, key in enumerate(("p50", "p90", "p99", "max")):
        points = []
        for group in groups:
            values = [v for v in (getattr(r, key) for r in group) if v is not None]
            if values:
                points.append((group[-1].start + group[-1].duration, max(values)))
        latency.append(Series(key, points, PALETTE[i]))

    def mean(values: list[float]) -> float:
        return sum(values) / len(values)

    ends = [group[-1].start + group[-1].duration for group in groups]
    rate = [
        Series("responses/s", [(end, mean([r.rps for r in group]))
                               for end, group in zip(ends, groups, strict=True)], PALETTE[0]),
        Series("errors/s", [(end, mean([r.errors / r.duration if r.duration > 0 else 0.0
                                        for r in group]))
                            for end, group in zip(ends, groups, strict=True)], PALETTE[3]),
    ]
    return [
        line_chart("Latency over time (CO-corrected)", [s for s in latency if s.points],
                   x_label="seconds into the run", y_label="latency", y_format=format_latency,
                   width=760, height=340),
        line_chart("Throughput over time", rate, x_label="seconds into the run",
                   y_label="per second", width=760, height=300),
    ]
