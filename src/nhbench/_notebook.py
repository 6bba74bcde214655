"""Notebook views of a `Result`: the one-line repr, the HTML shown when a notebook cell
evaluates a result, DataFrames and matplotlib figures.

The HTML is plain tables and one inline SVG chart (`nhbench._svg`) with inline styles: no
JavaScript, no stylesheet, nothing fetched, so it renders the same in JupyterLab, VS Code and
GitHub's notebook viewer, and every string from the run (URL, labels, error text) is
escaped. pandas and matplotlib are imported inside the functions that need them, so that
``import nhbench`` never loads them; `require` turns their absence into a one-line
ImportError that names the ``notebook`` extra.

The renderers only read a result, so `Result` is imported for annotations only (like
`nhbench.outputs`); the result layer, above this one, calls them.
"""

from __future__ import annotations

import html
import importlib
import math
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ._format import format_latency, format_rate
from ._names import REQUEST_TO_RESPONSE, SCHEDULED_TO_RESPONSE, describe_errors
from ._svg import PALETTE, Series, format_percentile_axis, percentile_chart, percentile_x

if TYPE_CHECKING:
    from ._result import Result, Statistic

__all__ = [
    "HEADLINE_PERCENTILES",
    "NOTEBOOK_EXTRA",
    "distribution",
    "plot_percentiles",
    "require",
    "result_frame",
    "result_html",
    "result_line",
    "result_verdict",
    "result_warnings",
    "statistic_line",
]

NOTEBOOK_EXTRA = "pip install 'nhbench[notebook]'"

#: The percentiles of the headline (max is added after them).
HEADLINE_PERCENTILES = (50.0, 90.0, 99.0, 99.9)

# Points of a drawn distribution: this many per "nine" (p0..p90, p90..p99, ...), evenly spaced
# on the 1 / (1 - p) axis, which is smooth at any zoom a chart this size allows.
_STEPS_PER_NINE = 10
# The axis ends at the first nine whose value is the max: the target count of a percentile
# rounds half up, so p reaches the last sample at 1 - 1/(2 count) (600 samples: p99.99, 400:
# p99.9). Never beyond six nines: the named-percentile ticks would crowd together, and a
# distribution that long is better read from `Statistic.p` than from a 600-pixel chart.
_MAX_NINES = 6
_MIN_NINES = 2

_CELL = "border:1px solid #ddd;padding:2px 8px;"
_NUM = _CELL + "text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap;"
_HEAD = _CELL + "background:#f3f3f3;font-weight:600;"
_TABLE = "border-collapse:collapse;font-size:12px;margin:4px 0;"


def require(module: str, feature: str) -> Any:
    """Import an optional dependency of the notebook views, or raise a one-line ImportError
    that says which feature needs it and how to install it. A missing module *inside* an
    installed package is a broken installation, not a missing extra, and is raised as is."""
    top = module.split(".")[0]
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is not None and exc.name.split(".")[0] != top:
            raise
        raise ImportError(f"{feature} needs {top}: {NOTEBOOK_EXTRA}") from None


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _requested(result: Result) -> str:
    return "max" if result.options.rps == 0 else f"{result.requested_rps:g}"


def _p(statistic: Statistic | None, percent: float) -> float | None:
    """The value at `percent`, or None (shown as ``-``) when the statistic has no samples, or
    the point was not reported and there is no histogram to compute it from (a result file
    written without its histograms)."""
    if statistic is None or statistic.count == 0:
        return None
    try:
        return statistic.p(percent)
    except ValueError:
        return None


def _latency(result: Result) -> Statistic | None:
    try:
        return result.latency
    except KeyError:
        return None


def result_line(result: Result) -> str:
    """``<Result 2000 rps asked, 1999.8 achieved, p99 1.23 ms, 0 errors>`` (plus ``FAILED``
    when the run failed): `Result.__repr__`."""
    failed = "" if result.success else ", FAILED"
    return (f"<Result {_requested(result)} rps asked, {result.achieved_rps:.1f} achieved, "
            f"p99 {format_latency(_p(_latency(result), 99))}, {result.error_count} errors"
            f"{failed}>")


def statistic_line(statistic: Statistic) -> str:
    """``<Statistic benchmark_http_client.scheduled_to_response: 6000 samples, p50 78.4 µs,
    p99 6.85 ms, max 13.7 ms>`` (sizes: min/mean/max as numbers): `Statistic.__repr__`."""
    if statistic.count == 0:
        return f"<Statistic {statistic.id}: no samples>"
    if statistic.raw:
        return (f"<Statistic {statistic.id}: {statistic.count} samples, min {statistic.min:g}, "
                f"mean {statistic.mean:.1f}, max {statistic.max:g}>")
    return (f"<Statistic {statistic.id}: {statistic.count} samples, "
            f"p50 {format_latency(_p(statistic, 50))}, p99 {format_latency(_p(statistic, 99))}, "
            f"max {format_latency(statistic.max)}>")


def distribution(statistic: Statistic) -> list[tuple[float, float]]:
    """``(percentile, value)`` pairs that draw a latency distribution: percentiles as
    fractions from 0 to the first "nine" whose value is the max (at least p99, at most
    p99.9999), `_STEPS_PER_NINE` per nine, plus p50 and p75; values as `Statistic.p` gives
    them (seconds). Empty for a statistic without samples or without a histogram."""
    if statistic.count == 0 or statistic.raw or not statistic.has_histogram:
        return []
    nines = min(_MAX_NINES, max(_MIN_NINES, math.ceil(math.log10(2 * statistic.count))))
    fractions = {round(1.0 - 10.0 ** (-i / _STEPS_PER_NINE), 10)
                 for i in range(_STEPS_PER_NINE * nines + 1)}
    fractions |= {0.5, 0.75}
    ordered = sorted(fractions)
    return list(zip(ordered, statistic.values_at([f * 100.0 for f in ordered]), strict=True))


def _named(fraction: float) -> bool:
    """p0, p50 and every whole nine (p90, p99, p99.9, ...) get a marker on the chart."""
    if fraction in (0.0, 0.5):
        return True
    nines = -math.log10(1.0 - fraction)
    return abs(nines - round(nines)) < 1e-6


def _chart_series(statistic: Statistic, name: str, colour: str) -> Series | None:
    points = distribution(statistic)
    if not points:
        return None
    return Series(name, [(percentile_x(f), value) for f, value in points], colour,
                  marked=[_named(f) for f, _ in points])


def _result_chart(result: Result) -> str:
    series = []
    statistics = {s.id: s for s in result.global_result.statistics}
    for stat_id, name, colour in (
        (SCHEDULED_TO_RESPONSE, "CO-corrected (scheduled_to_response)", PALETTE[0]),
        (REQUEST_TO_RESPONSE, "uncorrected (request_to_response)", PALETTE[1]),
    ):
        statistic = statistics.get(stat_id)
        drawn = _chart_series(statistic, name, colour) if statistic is not None else None
        if drawn is not None:
            series.append(drawn)
    return percentile_chart("Latency by percentile", series, y_label="latency",
                            y_format=format_latency, width=600, height=320,
                            inline_style=True)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[bool],
           caption: str | None = None) -> str:
    """An HTML table of already-escaped cells."""
    out = [f'<table class="nhbench-table" style="{_TABLE}">']
    if caption:
        out.append(f'<caption style="text-align:left;font-weight:600;padding:2px 0;">'
                   f"{caption}</caption>")
    out.append("<thead><tr>" + "".join(f'<th style="{_HEAD}">{h}</th>' for h in header)
               + "</tr></thead><tbody>")
    for row in rows:
        out.append("<tr>" + "".join(
            f'<td style="{_NUM if num else _CELL}">{cell}</td>'
            for cell, num in zip(row, numeric, strict=True)) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def result_verdict(result: Result) -> tuple[bool, str]:
    """OK, or FAILED with the reason, in the words of the human report (also the result
    browser's verdict, nhbench.browse)."""
    if result.failed_predicates:
        fired = "; ".join(str(predicate) for predicate in result.fired)
        return False, f"FAILED: failure predicate fired: {fired}"
    if result.terminated_by == "error":
        return False, "FAILED: the run ended with an error"
    reason = result.no_success_reason
    if reason is not None:
        return False, f"FAILED: {reason}"
    return True, "OK"


def result_warnings(result: Result) -> list[str]:
    """What a reader must know before trusting the figures (dropped requests, a partial
    run, unverified TLS, the first error), one sentence each."""
    counters = result.counters
    notes = []
    dropped = counters["benchmark.pool_overflow"]
    if dropped:
        notes.append(f"{dropped} requests were DROPPED (benchmark.pool_overflow): they are "
                     "in no latency figure, so the latencies look better than the service was")
    if result.interrupted:
        notes.append("interrupted: this is a partial result")
    if result.insecure:
        notes.append("TLS certificates were NOT verified (insecure)")
    if result.error:
        notes.append(f"first error: {result.error}")
    return notes


def result_html(result: Result) -> str:
    """The HTML a notebook shows for a result: headline, counters, percentile chart."""
    options = result.options
    latency = _latency(result)
    ok, verdict = result_verdict(result)
    workers = result.worker_count
    loop = "open loop" if options.open_loop else "closed loop"
    protocol = "HTTP/2" if options.protocol == "http2" else "HTTP/1.1"
    description = (f"{workers} worker{'s' if workers != 1 else ''} x {options.connections} "
                   f"connections, {loop}, {protocol}")
    labels = f" [{', '.join(options.label)}]" if options.label else ""
    colour = "#1a7f37" if ok else "#cf222e"
    out = [
        '<div class="nhbench-result" style="font-family:system-ui,-apple-system,Segoe UI,'
        'Roboto,sans-serif;font-size:13px;color:#222;background:#fff;padding:6px;'
        'max-width:1100px;">',
        f'<div><b>nhbench</b> {_e(options.request_method)} <code>{_e(options.uri)}</code>'
        f"{_e(labels)} &middot; {_e(description)} &middot; "
        f'<b style="color:{colour}">{_e(verdict)}</b></div>',
    ]
    requested = "max" if options.rps == 0 else f"{format_rate(result.requested_rps)} rps"
    errors = result.error_count
    error_text = str(errors)
    if errors:
        error_text += f" ({describe_errors(result.counters)})"
    header = ["asked", "achieved", "duration", "2xx", "errors"]
    row = [_e(requested), _e(f"{result.achieved_rps:,.1f} rps"),
           _e(format_latency(result.duration)), _e(f"{result.succeeded:,}"), _e(error_text)]
    for percent in HEADLINE_PERCENTILES:
        header.append(f"p{percent:g}")
        row.append(_e(format_latency(_p(latency, percent))))
    header.append("max")
    row.append(_e(format_latency(latency.max if latency is not None and latency.count
                                 else None)))
    out.append(_table(header, [row], [True] * len(row)))
    out.append('<div style="font-size:11px;color:#555;">Latency: '
               "benchmark_http_client.scheduled_to_response, from each request&#x27;s "
               "scheduled send to the end of its response (coordinated-omission corrected: "
               "waiting for a connection counts). Rates: 2xx responses per second.</div>")
    for note in result_warnings(result):
        out.append(f'<div style="color:#cf222e;font-weight:600;">!! {_e(note)}</div>')
    blocked = result.counters["sequencer.blocked"]
    if blocked:
        # Closed loop: not an error, and already in the corrected latency, but it says the
        # connections, not the schedule, set the pace for a while.
        out.append(f'<div style="font-size:11px;color:#555;">The sequencer blocked {blocked:,} '
                   "times (no free connection when requests were due); the corrected latency "
                   "counts the wait.</div>")
    duration = result.duration
    counter_rows = [
        [_e(name), _e(f"{value:,}"), _e(f"{value / duration:,.1f}" if duration > 0 else "-")]
        for name, value in result.counters.nonzero().items()
    ]
    counters = _table(["counter", "value", "per second"], counter_rows, [False, True, True],
                      caption="Counters (non-zero)")
    out.append('<div style="display:flex;flex-wrap:wrap;gap:12px;align-items:flex-start;">')
    out.append(f"<div>{_result_chart(result)}</div>")
    out.append(f"<div>{counters}</div>")
    out.append("</div></div>")
    return "\n".join(out)


def result_frame(result: Result, wide: bool = False) -> Any:
    """`Result.to_dataframe`: the global statistics as a pandas DataFrame."""
    pandas = require("pandas", "Result.to_dataframe()")
    statistics = result.global_result.statistics
    if not wide:
        rows = [
            {"statistic": s.id, "percentile": round(p.percentile * 100.0, 8),
             "value": p.value, "count": p.count}
            for s in statistics for p in s.percentiles
        ]
        return pandas.DataFrame(rows, columns=["statistic", "percentile", "value", "count"])
    points = sorted({round(p.percentile * 100.0, 8) for s in statistics for p in s.percentiles}
                    - {0.0, 100.0})
    wide_rows = []
    for s in statistics:
        by_point = {round(p.percentile * 100.0, 8): p.value for p in s.percentiles}
        row: dict[str, Any] = {"statistic": s.id, "raw": s.raw, "count": s.count,
                               "min": s.min, "mean": s.mean, "pstdev": s.pstdev}
        for point in points:
            row[f"p{point:g}"] = by_point.get(point, math.nan)
        row["max"] = s.max
        wide_rows.append(row)
    frame = pandas.DataFrame(wide_rows)
    return frame.set_index("statistic") if len(frame) else frame


def groups_frame(result: Result) -> Any:
    """`Result.groups_dataframe`: one row per group (--group-by), indexed by its name."""
    pandas = require("pandas", "Result.groups_dataframe()")
    columns = ["group", "requests", "share", "errors", "error_rate", "status_2xx",
               "status_3xx", "status_4xx", "status_5xx", "status_other", "failures",
               "check_failed", "p50", "p90", "p99", "max"]
    rows = []
    for group in result.groups.groups if result.groups is not None else ():
        rows.append({
            "group": group.name, "requests": group.requests, "share": group.share,
            "errors": group.errors, "error_rate": group.error_rate,
            "status_2xx": group.status_2xx, "status_3xx": group.status_3xx,
            "status_4xx": group.status_4xx, "status_5xx": group.status_5xx,
            "status_other": group.status_other, "failures": group.failures,
            "check_failed": group.check_failed,
            "p50": _p(group.latency, 50), "p90": _p(group.latency, 90),
            "p99": _p(group.latency, 99),
            "max": group.latency.max if group.latency.count else None,
        })
    return pandas.DataFrame(rows, columns=columns).set_index("group")


def _default_label(result: Result) -> str:
    if result.options.label:
        return ", ".join(result.options.label)
    return f"{_requested(result)} rps"


def _show_figures_in_ipython(figure_class: type) -> None:
    """Let a notebook display a returned Figure even when pyplot was never imported.

    The figures here are made without pyplot (no global figure list to leak into, no second
    copy drawn at the end of the cell), and IPython registers its PNG formatter for figures
    only when pyplot selects the inline backend. When IPython is already running, register
    it here; IPython itself is never imported by nhbench.
    """
    if "IPython" not in sys.modules:
        return
    shell = sys.modules["IPython"].get_ipython()
    if shell is None:
        return
    formatter = shell.display_formatter.formatters["image/png"]
    try:
        formatter.lookup_by_type(figure_class)
    except KeyError:
        pylabtools = importlib.import_module("IPython.core.pylabtools")
        formatter.for_type(figure_class,
                           lambda fig: pylabtools.print_figure(fig, "png", bbox_inches="tight"))


def plot_percentiles(
    results: Sequence[Result] | Result,
    labels: Sequence[str] | None = None,
    *,
    statistic: str = SCHEDULED_TO_RESPONSE,
    title: str | None = None,
    log_y: bool | None = None,
) -> Any:
    """A matplotlib Figure with the latency distribution of each result, overlaid on one
    percentile ("HdrHistogram") axis: x is ``1 / (1 - p)`` on a log scale labelled 0%, 90%,
    99%, ...; y is the latency in milliseconds.

    `results` is a sequence of results (or one). `labels` name the lines (default: each
    result's labels, else its requested rate). `statistic` is any latency statistic id
    (default: the coordinated-omission corrected
    ``benchmark_http_client.scheduled_to_response``). `log_y` None picks a log y axis when
    the values span more than two decades, as the HTML chart does.
    """
    # One Result is taken as a list of one (a pydantic model is iterable: list() of it would
    # be its fields).
    runs = list(results) if isinstance(results, Sequence) else [results]
    if not runs:
        raise ValueError("plot_percentiles: no results to plot")
    names = [_default_label(r) for r in runs] if labels is None else [str(x) for x in labels]
    if len(names) != len(runs):
        raise ValueError(f"plot_percentiles: {len(names)} labels for {len(runs)} results")
    figure_module = require("matplotlib.figure", "plot_percentiles()")
    ticker = require("matplotlib.ticker", "plot_percentiles()")
    figure = figure_module.Figure(figsize=(8.0, 4.5), layout="constrained")
    axes = figure.add_subplot()
    distributions = [distribution(run.stat(statistic)) for run in runs]
    curves = []
    for index, (points, name) in enumerate(zip(distributions, names, strict=True)):
        if not points:
            name += " (no samples)"
        xs = [percentile_x(f) for f, _ in points]
        ys = [value * 1e3 for _, value in points]
        marks = [i for i, (f, _) in enumerate(points) if _named(f)]
        axes.plot(xs, ys, label=name, color=PALETTE[index % len(PALETTE)], linewidth=1.8,
                  marker="o", markersize=3.5, markevery=marks)
        curves.append(ys)
    values = [y for ys in curves for y in ys]
    if log_y is None:
        positive = [y for y in values if y > 0]
        log_y = bool(positive) and len(positive) == len(values) and max(positive) / min(
            positive) > 100
    largest = max((percentile_x(f) for points in distributions for f, _ in points),
                  default=100.0)
    nines = max(1, math.ceil(math.log10(largest) - 1e-9))
    axes.set_xscale("log")
    axes.set_xlim(1.0, 10.0**nines)
    axes.xaxis.set_major_locator(ticker.FixedLocator([10.0**k for k in range(nines + 1)]))
    axes.xaxis.set_major_formatter(ticker.FuncFormatter(lambda x, _pos: format_percentile_axis(x)))
    axes.xaxis.set_minor_locator(ticker.NullLocator())
    if log_y:
        axes.set_yscale("log")
    else:
        axes.set_ylim(bottom=0)
    axes.set_xlabel("percentile")
    axes.set_ylabel("latency (ms)" + (", log scale" if log_y else ""))
    axes.set_title(title if title is not None else f"Latency by percentile ({statistic})",
                   fontsize=10)
    axes.grid(True, which="major", color="#ddd", linewidth=0.8)
    axes.legend(loc="upper left")
    _show_figures_in_ipython(figure_module.Figure)
    return figure
