"""Inline SVG line charts, drawn in Python (no JavaScript, no chart library, nothing fetched
at view time): the one chart code of nhbench.

Two charts share the drawing (grid, frame, legend, lines, markers with ``<title>`` tooltips):

* `line_chart` draws series of (x, y) points on a linear x axis with "nice" ticks (1, 2, 5 x
  10^n) and a linear y axis, or a logarithmic one when the values span more than two decades
  (latency percentiles often do: p50 in microseconds, p99.9 in milliseconds). The sweep's
  report.html and `Campaign._repr_html_` use it.
* `percentile_chart` draws latency distributions the way HdrHistogram's plotter does: the x
  axis is ``1 / (1 - p)`` on a log scale, labelled 0%, 90%, 99%, 99.9%..., so that every
  "nine" of the tail gets the same width. `Result._repr_html_` and the result browser
  (`nhbench.browse`, which overlays up to eight runs) use it.

The SVG has no ``xmlns`` attribute because it is meant to be inlined into HTML5, where the
namespace is implied. All text is XML-escaped here, so the result can be marked safe in a
template. Two styles: by default the elements carry CSS classes (``grid``, ``tick``, ...)
that the page's stylesheet colours, which is what report.html does; with ``inline_style``
they also carry SVG presentation attributes and the chart draws its own white background,
so it looks the same where no stylesheet reaches it (a notebook output, which JupyterLab,
VS Code and GitHub's notebook viewer render without the page's CSS, in light or dark
themes).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from xml.sax.saxutils import escape

__all__ = [
    "PALETTE",
    "Series",
    "format_percentile_axis",
    "line_chart",
    "nice_ticks",
    "percentile_chart",
    "percentile_x",
]

#: Colour-blind-friendly series colours (Okabe-Ito).
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442",
           "#000000")

# What report.html's stylesheet gives each class, as SVG presentation attributes, for charts
# that are shown without that stylesheet (``inline_style=True``).
_INLINE = {
    "chart": 'font-family="system-ui, -apple-system, Segoe UI, Roboto, sans-serif" '
             'font-size="11"',
    "chart-title": 'font-size="14" font-weight="600" fill="#222"',
    "grid": 'stroke="#eee"',
    "frame": 'fill="none" stroke="#999"',
    "diagonal": 'stroke="#888" stroke-dasharray="5 4"',
    "tick": 'fill="#444"',
    "legend": 'fill="#444"',
    "axis": 'fill="#222" font-size="12"',
}


@dataclass
class Series:
    name: str
    points: list[tuple[float, float]] = field(default_factory=list)
    colour: str = PALETTE[0]
    #: Per point: False draws a hollow marker (a step that failed a stop rule).
    passed: list[bool] | None = None
    #: Per point: False draws no marker, only the line through it (None: every point has
    #: one). A distribution has dozens of points; only the named percentiles get markers.
    marked: list[bool] | None = None


@dataclass(frozen=True)
class _Axis:
    ticks: list[float]
    #: Where a value lies between the first and the last tick, 0..1.
    fraction: Callable[[float], float]
    log: bool = False


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


def _linear_axis(ticks: list[float]) -> _Axis:
    low, high = ticks[0], ticks[-1]
    return _Axis(ticks, lambda v: (v - low) / (high - low))


def _log_axis(ticks: list[float]) -> _Axis:
    low, high = math.log10(ticks[0]), math.log10(ticks[-1])
    return _Axis(ticks, lambda v: (math.log10(v) - low) / (high - low), log=True)


def _y_axis(ys: Sequence[float], *, allow_log: bool, top_value: float | None = None) -> _Axis:
    """Log scale when every value is positive and they span more than two decades; else a
    linear axis from 0 to `top_value` (default: the largest value)."""
    positive = [y for y in ys if y > 0]
    if allow_log and len(positive) == len(ys) and max(positive) / min(positive) > 100:
        return _log_axis(_log_ticks(min(positive), max(positive)))
    return _linear_axis(nice_ticks(0.0, top_value if top_value is not None else max(ys)))


def percentile_x(percentile: float) -> float:
    """The x position of a percentile (a fraction, 0 <= p < 1) on a percentile axis:
    ``1 / (1 - p)``, so p0 is 1, p90 is 10, p99 is 100."""
    return 1.0 / (1.0 - percentile)


def format_percentile_axis(x: float) -> str:
    """The percentile at position `x` of a percentile axis: ``0%``, ``90%``, ``99.9%``."""
    percent = round(100.0 * (1.0 - 1.0 / x), 8)
    return f"{percent:.10g}%"


def _attribute(text: str) -> str:
    """`text` escaped for a double-quoted XML attribute."""
    return escape(text, {'"': "&quot;"})


class _Canvas:
    """The element list of one chart, and the style rule for its classes."""

    def __init__(self, title: str, width: int, height: int, inline_style: bool) -> None:
        self.inline_style = inline_style
        self.width = width
        self.height = height
        chart_style = f" {_INLINE['chart']}" if inline_style else ""
        self.out = [
            (
                f'<svg class="chart" width="{width}" height="{height}" '
                f'viewBox="0 0 {width} {height}" role="img" '
                f'aria-label="{escape(title, {chr(34): "&quot;"})}"{chart_style}>'
            ),
        ]
        if inline_style:
            # A notebook may use a dark theme; the chart's colours assume white under them.
            self.out.append(f'<rect width="{width}" height="{height}" fill="#fff"/>')
        self.out.append(
            f'<text x="{width / 2:g}" y="18" text-anchor="middle" {self.cls("chart-title")}>'
            f"{escape(title)}</text>"
        )

    def cls(self, name: str) -> str:
        """The class attribute of an element, plus its presentation attributes when inline."""
        return f'class="{name}" {_INLINE[name]}' if self.inline_style else f'class="{name}"'

    def empty(self) -> str:
        self.out.append(
            f'<text x="{self.width / 2:g}" y="{self.height / 2:g}" text-anchor="middle">'
            "no data</text>"
        )
        return self.close()

    def close(self) -> str:
        self.out.append("</svg>")
        return "\n".join(self.out)


def _draw(
    canvas: _Canvas,
    series: Sequence[Series],
    x_axis: _Axis,
    y_axis: _Axis,
    *,
    x_label: str,
    y_label: str,
    x_format: Callable[[float], str],
    y_format: Callable[[float], str],
    diagonal: bool = False,
    right: int = 18,
    legend: bool = True,
) -> str:
    """Grid, ticks, frame, axis labels, legend, lines and markers; closes the SVG. `right`
    is the margin right of the plot, room for half of the last x tick's label. Without
    `legend` the page draws its own (the result browser's comparison lists its runs in a
    table whose swatches use the same colours, since eight long names do not fit one line)."""
    out, cls = canvas.out, canvas.cls
    left, top, bottom = 78, 56, 48
    plot_w, plot_h = canvas.width - left - right, canvas.height - top - bottom

    def px(x: float) -> float:
        return left + x_axis.fraction(x) * plot_w

    def py(y: float) -> float:
        return top + plot_h - y_axis.fraction(y) * plot_h

    # Grid and ticks.
    for value in y_axis.ticks:
        y = py(value)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" '
                   f'{cls("grid")}/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" {cls("tick")}>'
                   f"{escape(y_format(value))}</text>")
    for value in x_axis.ticks:
        x = px(value)
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + plot_h}" '
                   f'{cls("grid")}/>')
        out.append(f'<text x="{x:.1f}" y="{top + plot_h + 16}" text-anchor="middle" '
                   f'{cls("tick")}>{escape(x_format(value))}</text>')
    out.append(f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" {cls("frame")}/>')
    out.append(f'<text x="{left + plot_w / 2:g}" y="{canvas.height - 8}" text-anchor="middle" '
               f'{cls("axis")}>{escape(x_label)}</text>')
    out.append(f'<text transform="translate(14,{top + plot_h / 2:g}) rotate(-90)" '
               f'text-anchor="middle" {cls("axis")}>{escape(y_label)}'
               f'{" (log scale)" if y_axis.log else ""}</text>')

    if diagonal:
        end = min(x_axis.ticks[-1], y_axis.ticks[-1])
        out.append(f'<line x1="{px(0):.1f}" y1="{py(0):.1f}" x2="{px(end):.1f}" '
                   f'y2="{py(end):.1f}" {cls("diagonal")}><title>achieved = offered</title>'
                   "</line>")

    # Legend above the plot.
    legend_x = left
    for s in series if legend else ():
        out.append(f'<rect x="{legend_x}" y="30" width="12" height="12" fill="{s.colour}"/>')
        out.append(f'<text x="{legend_x + 16}" y="40" {cls("legend")}>{escape(s.name)}</text>')
        legend_x += 28 + 7 * len(s.name)
    if diagonal:
        out.append(f'<line x1="{legend_x}" y1="36" x2="{legend_x + 18}" y2="36" '
                   f'{cls("diagonal")}/>')
        out.append(f'<text x="{legend_x + 22}" y="40" {cls("legend")}>y = x</text>')

    for s in series:
        ordered = sorted(range(len(s.points)), key=lambda i: s.points[i][0])
        coords = [(px(s.points[i][0]), py(s.points[i][1])) for i in ordered]
        if len(coords) > 1:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
            # data-series names the line for scripts and tests that read the chart back.
            out.append(f'<polyline points="{path}" fill="none" stroke="{s.colour}" '
                       f'stroke-width="2" data-series="{_attribute(s.name)}"/>')
        for i, (x, y) in zip(ordered, coords, strict=True):
            if s.marked is not None and not s.marked[i]:
                continue
            passed = s.passed[i] if s.passed is not None else True
            fill = s.colour if passed else "#fff"
            value_x, value_y = s.points[i]
            tooltip = f"{s.name}: {y_format(value_y)} at {x_format(value_x)}"
            if not passed:
                tooltip += " (step failed a stop rule)"
            out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{fill}" '
                       f'stroke="{s.colour}" stroke-width="1.5"><title>{escape(tooltip)}'
                       "</title></circle>")
    return canvas.close()


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
    inline_style: bool = False,
    legend: bool = True,
) -> str:
    """An SVG line chart. `diagonal` adds the dashed y = x line (achieved vs offered);
    `y_max` fixes the top of a linear y axis (100 for CPU %); `legend` False leaves the
    legend to the page."""
    canvas = _Canvas(title, width, height, inline_style)
    points = [(x, y) for s in series for x, y in s.points]
    if not points:
        return canvas.empty()
    xs = [x for x, _ in points]
    ys = [y for _, y in points]
    x_axis = _linear_axis(nice_ticks(0.0, max(xs)))
    top_value = y_max if y_max is not None else max(ys + (xs if diagonal else []))
    y_axis = _y_axis(ys, allow_log=not diagonal and y_max is None, top_value=top_value)
    return _draw(canvas, series, x_axis, y_axis, x_label=x_label, y_label=y_label,
                 x_format=x_format, y_format=y_format, diagonal=diagonal, legend=legend)


def percentile_chart(
    title: str,
    series: Sequence[Series],
    *,
    y_label: str,
    y_format: Callable[[float], str] = lambda v: f"{v:g}",
    x_label: str = "percentile",
    width: int = 640,
    height: int = 340,
    inline_style: bool = False,
    legend: bool = True,
) -> str:
    """An SVG percentile-distribution chart ("HdrHistogram" axis). Each series' points are
    ``(percentile_x(p), value)``; the x axis runs from 0% to the first whole "nine" at or
    beyond the largest x, with one tick per nine. Several series overlay on the same axes
    (the result browser's comparison draws one per run); `legend` False leaves the legend
    to the page."""
    canvas = _Canvas(title, width, height, inline_style)
    points = [(x, y) for s in series for x, y in s.points]
    if not points:
        return canvas.empty()
    nines = max(1, math.ceil(math.log10(max(x for x, _ in points)) - 1e-9))
    x_axis = _log_axis([10.0**k for k in range(nines + 1)])
    y_axis = _y_axis([y for _, y in points], allow_log=True)
    # "99.9999%" is wider than any tick of report.html's charts.
    return _draw(canvas, series, x_axis, y_axis, x_label=x_label, y_label=y_label,
                 x_format=format_percentile_axis, y_format=y_format, right=36, legend=legend)
