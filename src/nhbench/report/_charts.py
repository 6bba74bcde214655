"""Inline SVG line charts for report.html, drawn in Python (no JavaScript, no chart
library, nothing fetched at view time).

`line_chart` draws series of (x, y) points on linear axes with "nice" ticks (1, 2, 5 x 10^n),
or a logarithmic y axis when the values span more than two decades (latency percentiles
often do: p50 in microseconds, p99.9 in milliseconds). Each point carries a ``<title>``
tooltip. The SVG has no ``xmlns`` attribute because it is meant to be inlined into HTML5,
where the namespace is implied (and the report stays free of any URL but the target's).
All text is XML-escaped here, so the result can be marked safe in the template.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from xml.sax.saxutils import escape

__all__ = ["PALETTE", "Series", "line_chart", "nice_ticks"]

#: Colour-blind-friendly series colours (Okabe-Ito).
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442",
           "#000000")


@dataclass
class Series:
    name: str
    points: list[tuple[float, float]] = field(default_factory=list)
    colour: str = PALETTE[0]
    #: Per point: False draws a hollow marker (a step that failed a stop rule).
    passed: list[bool] | None = None


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """About `count` round tick values covering [low, high] (1, 2 or 5 times a power of
    ten apart)."""
    if high <= low:
        high = low + (abs(low) or 1.0)
    raw = (high - low) / max(1, count)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.floor(low / step) * step
    ticks = []
    value = first
    while value <= high + step * 1e-9:
        ticks.append(round(value, 12))
        value += step
    if ticks[-1] < high:
        ticks.append(round(value, 12))
    return ticks


def _log_ticks(low: float, high: float) -> list[float]:
    start, stop = math.floor(math.log10(low)), math.ceil(math.log10(high))
    ticks = [10.0**k for k in range(start, stop + 1)]
    if len(ticks) <= 3:
        ticks = sorted({m * 10.0**k for k in range(start, stop + 1) for m in (1, 2, 5)})
        ticks = [t for t in ticks if 10.0**start <= t <= 10.0**stop]
    return ticks


def line_chart(
    title: str,
    series: Sequence[Series],
    *,
    x_label: str,
    y_label: str,
    x_format: Callable[[float], str] = lambda v: f"{v:g}",
    y_format: Callable[[float], str] = lambda v: f"{v:g}",
    diagonal: bool = False,
    y_max: float | None = None,
    width: int = 640,
    height: int = 340,
) -> str:
    """An SVG line chart. `diagonal` adds the dashed y = x line (achieved vs offered);
    `y_max` fixes the top of a linear y axis (100 for CPU %)."""
    points = [(x, y) for s in series for x, y in s.points]
    left, right, top, bottom = 78, 18, 56, 48
    plot_w, plot_h = width - left - right, height - top - bottom
    out = [
        (
            f'<svg class="chart" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" '
            f'aria-label="{escape(title, {chr(34): "&quot;"})}">'
        ),
        (
            f'<text x="{width / 2:g}" y="18" text-anchor="middle" class="chart-title">'
            f"{escape(title)}</text>"
        ),
    ]
    if not points:
        out.append(
            f'<text x="{width / 2:g}" y="{height / 2:g}" text-anchor="middle">no data</text>'
        )
        out.append("</svg>")
        return "\n".join(out)

    xs = [x for x, _ in points]
    ys = [y for _, y in points]
    x_ticks = nice_ticks(0.0, max(xs))
    x_low, x_high = x_ticks[0], x_ticks[-1]
    positive = [y for y in ys if y > 0]
    log_y = (
        not diagonal and y_max is None and len(positive) == len(ys)
        and max(positive) / min(positive) > 100
    )
    if log_y:
        y_ticks = _log_ticks(min(positive), max(positive))
    else:
        top_value = y_max if y_max is not None else max(ys + (xs if diagonal else []))
        y_ticks = nice_ticks(0.0, top_value)
    y_low, y_high = y_ticks[0], y_ticks[-1]

    def px(x: float) -> float:
        return left + (x - x_low) / (x_high - x_low) * plot_w

    def py(y: float) -> float:
        if log_y:
            fraction = (math.log10(y) - math.log10(y_low)) / (
                math.log10(y_high) - math.log10(y_low))
        else:
            fraction = (y - y_low) / (y_high - y_low)
        return top + plot_h - fraction * plot_h

    # Grid and ticks.
    for value in y_ticks:
        y = py(value)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" '
                   'class="grid"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" class="tick">'
                   f"{escape(y_format(value))}</text>")
    for value in x_ticks:
        x = px(value)
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + plot_h}" '
                   'class="grid"/>')
        out.append(f'<text x="{x:.1f}" y="{top + plot_h + 16}" text-anchor="middle" '
                   f'class="tick">{escape(x_format(value))}</text>')
    out.append(f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" class="frame"/>')
    out.append(f'<text x="{left + plot_w / 2:g}" y="{height - 8}" text-anchor="middle" '
               f'class="axis">{escape(x_label)}</text>')
    out.append(f'<text transform="translate(14,{top + plot_h / 2:g}) rotate(-90)" '
               f'text-anchor="middle" class="axis">{escape(y_label)}'
               f'{" (log scale)" if log_y else ""}</text>')

    if diagonal:
        end = min(x_high, y_high)
        out.append(f'<line x1="{px(0):.1f}" y1="{py(0):.1f}" x2="{px(end):.1f}" '
                   f'y2="{py(end):.1f}" class="diagonal"><title>achieved = offered</title>'
                   "</line>")

    # Legend above the plot.
    legend_x = left
    for s in series:
        out.append(f'<rect x="{legend_x}" y="30" width="12" height="12" fill="{s.colour}"/>')
        out.append(f'<text x="{legend_x + 16}" y="40" class="legend">{escape(s.name)}</text>')
        legend_x += 28 + 7 * len(s.name)
    if diagonal:
        out.append(f'<line x1="{legend_x}" y1="36" x2="{legend_x + 18}" y2="36" '
                   'class="diagonal"/>')
        out.append(f'<text x="{legend_x + 22}" y="40" class="legend">y = x</text>')

    for s in series:
        ordered = sorted(range(len(s.points)), key=lambda i: s.points[i][0])
        coords = [(px(s.points[i][0]), py(s.points[i][1])) for i in ordered]
        if len(coords) > 1:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
            out.append(f'<polyline points="{path}" fill="none" stroke="{s.colour}" '
                       'stroke-width="2"/>')
        for i, (x, y) in zip(ordered, coords, strict=True):
            passed = s.passed[i] if s.passed is not None else True
            fill = s.colour if passed else "#fff"
            value_x, value_y = s.points[i]
            tooltip = f"{s.name}: {y_format(value_y)} at {x_format(value_x)}"
            if not passed:
                tooltip += " (step failed a stop rule)"
            out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{fill}" '
                       f'stroke="{s.colour}" stroke-width="1.5"><title>{escape(tooltip)}'
                       "</title></circle>")
    out.append("</svg>")
    return "\n".join(out)
