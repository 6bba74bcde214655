"""The browser's pages as HTML: the list, one result, a comparison, a campaign, an error.

Rendered with jinja2 from ``templates/`` (package data), autoescaped, so every string a
result file supplies (labels, URLs, error text, option values) is escaped; the list's rows
are written by `_row_html`, which escapes the same characters the same way (a template per
row cost ten times as much for a list of thousands). Each page carries
its CSS inline and its charts as inline SVG (`._charts`), and a Content-Security-Policy that
allows nothing to be fetched: the pages work offline, and a result file cannot make the
browser load anything. The list page has a few lines of inline script (the filter box and
the comparison selection); the other pages have none.

`result_page(..., standalone=True)` is what ``nhbench report RESULT.json -o page.html``
writes: the same page without the links back into the browser, so the file stands alone.

A page's size is bounded whatever the file holds: the result page shows at most
`MAX_TABLE_ROWS` rows of each table (percentiles, workers, statistics, counters) and
`MAX_CHART_POINTS` points per chart series, and clips each option value at
`MAX_OPTION_CHARS`, saying on the page what was left out. The list renders each row on its
own: a row that cannot be rendered becomes an "unreadable" row naming the reason.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import jinja2
from markupsafe import Markup

from .._format import format_latency, format_rate
from .._names import REQUEST_TO_RESPONSE, SCHEDULED_TO_RESPONSE, describe_errors
from .._notebook import HEADLINE_PERCENTILES, result_verdict, result_warnings
from .._svg import PALETTE
from .._version import __version__
from ..campaign import CampaignManifest, step_view, sweep_charts
from ._charts import (
    MAX_CHART_POINTS,
    curve,
    distribution_chart,
    phases_chart,
    streaming_chart,
    timeline_charts,
)
from ._scan import MAX_FILES, Entry, Listing, clip, headline_statistic, percentile

if TYPE_CHECKING:
    from .._compare import Comparison
    from .._result import Result, Statistic

__all__ = [
    "MAX_CHART_POINTS",
    "MAX_COMPARED",
    "MAX_OPTION_CHARS",
    "MAX_TABLE_ROWS",
    "campaign_page",
    "compare_page",
    "error_page",
    "list_page",
    "result_page",
    "result_url",
]

#: Runs one comparison overlays: one colour each from the colour-blind-friendly palette;
#: beyond eight, curves are no longer told apart.
MAX_COMPARED = len(PALETTE)
#: Rows of one table on a result page: a worker, statistic, counter or percentile list of a
#: hundred thousand entries (a hostile or broken file) would make a page of hundreds of MB.
MAX_TABLE_ROWS = 1000
#: Characters of one option's value on a result page.
MAX_OPTION_CHARS = 2000


def result_url(path: str) -> str:
    return "/result/" + quote(path, safe="/")


def campaign_url(path: str) -> str:
    return "/campaign/" + quote(path, safe="/")


def file_url(path: str) -> str:
    return "/files/" + quote(path, safe="/")


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("nhbench.browse", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        # The templates are the package's own files: no modification check per render.
        auto_reload=False,
        keep_trailing_newline=True,
    )
    env.filters.update(latency=format_latency, rate=_rate, when=_when, count=_count)
    env.globals.update(result_url=result_url, campaign_url=campaign_url, file_url=file_url,
                       version=__version__)
    return env


_ENV: jinja2.Environment | None = None


def _render(template: str, **context: Any) -> str:
    global _ENV
    if _ENV is None:
        _ENV = _environment()
    context.setdefault("standalone", False)
    return _ENV.get_template(template).render(**context)


def _rate(rps: float | None, requested: bool = False) -> str:
    if rps is None:
        return "-"
    if requested and rps == 0:
        return "max"
    return format_rate(rps)


def _when(moment: datetime | None) -> str:
    if moment is None:
        return "-"
    return moment.strftime("%Y-%m-%d %H:%M:%S %Z").strip()


def _count(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"




def _statistic(result: Result, stat_id: str) -> Statistic | None:
    try:
        return result.stat(stat_id)
    except KeyError:
        return None


def _name(result: Result, path: str) -> str:
    """What a run is called on a page: its labels, else its file name."""
    return clip(", ".join(result.options.label)) or path.rsplit("/", 1)[-1]


# ---- the list ------------------------------------------------------------------------------


def printable(text: str) -> str:
    """`text` with what UTF-8 cannot encode (a lone surrogate from a file, a file name that
    is not UTF-8) written as escapes, so that a page naming it can be sent."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


@functools.lru_cache(maxsize=2 * MAX_FILES)
def _row(entry: Entry) -> Markup:
    # Written here rather than in a template: a list of 5,000 rows rendered by jinja2 took
    # about 35 µs of CPU a row (180 ms for the first list of a browser process), this about
    # a tenth of it. Every text is escaped (markupsafe, as the templates' autoescape).
    # Cached by the entry (frozen: every field it shows): the list is rendered on every load.
    html = _row_html(entry)
    html.encode("utf-8")  # raises here, for this row, on what the page could not send
    return Markup(html)


def escape(text: str) -> str:
    """`text` escaped for HTML text and quoted attributes, as the templates' autoescape
    (markupsafe) escapes it: the same five characters, the same entities (``&`` first).
    Chained replaces: a tenth of the time of ``str.translate`` on the list's short texts."""
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&#34;").replace("'", "&#39;"))


def _row_html(entry: Entry) -> str:
    kind = entry.kind
    when = _when(entry.time)
    path = escape(entry.path)
    classes = kind
    if kind == "error":
        classes += " unreadable"
    elif not entry.ok:
        classes += " fail"
    head = (f'<tr class="{escape(classes)}" data-kind="{escape(kind)}" data-path="{path}" '
            f'data-search="{escape(_search_text(entry, when))}">\n')
    if kind == "error":
        return (f'{head}<td></td><td colspan="10"><span class="failed">unreadable:</span> '
                f'<span class="error">{escape(entry.error)}</span></td>'
                f'<td class="path">{path}</td>\n</tr>\n')
    label = escape(entry.label or "(no label)")
    if kind == "result":
        tick = (f'<input type="checkbox" name="id" value="{path}" '
                f'aria-label="compare {path}">')
        link = f'<a href="{escape(result_url(entry.path))}">{label}</a>'
    else:
        tick = ""
        link = f'<a href="{escape(campaign_url(entry.path))}">{label}</a>'
    validity = escape(entry.validity)
    return (f"{head}<td>{tick}</td>\n<td>{link}</td>\n"
            f'<td class="num">{escape(when)}</td>\n'
            f'<td class="path"><code>{escape(entry.url)}</code></td>\n'
            # Numbers formatted here: digits, separators and units, nothing to escape.
            f'<td class="num">{_rate(entry.requested_rps, True)}</td>\n'
            f'<td class="num">{_rate(entry.achieved_rps)}</td>\n'
            f'<td class="num">{format_latency(entry.p50)}</td>\n'
            f'<td class="num">{format_latency(entry.p99)}</td>\n'
            f'<td class="num">{_count(entry.errors)}</td>\n'
            f'<td class="verdict {"ok" if entry.ok else "failed"}">{escape(entry.verdict)}</td>\n'
            f'<td class="validity{f" validity-{validity}" if entry.validity else ""}">'
            f'{validity or "-"}</td>\n'
            f'<td class="path">{path}{"/" if kind == "campaign" else ""}</td>\n</tr>\n')


def list_page(listing: Listing, root: str, *, ui: bool = False) -> str:
    rows = []
    for entry in listing.entries:
        try:
            rows.append(_row(entry))
        except Exception as exc:  # noqa: BLE001 - one odd file must not take the list down
            reason = printable(f"{type(exc).__name__}: {exc}".splitlines()[0])
            path = printable(entry.path)
            rows.append(_row(Entry.failed(path, f"cannot show {path!r}: {reason}")))
    root = printable(root)
    return _render("list.html.j2", root=root, rows=rows, notes=listing.notes,
                   max_compared=MAX_COMPARED, title=f"nhbench results: {root}", ui=ui)


def _search_text(entry: Entry, when: str) -> str:
    words = [entry.path, entry.label, entry.url, when, entry.verdict, entry.error,
             entry.kind, entry.validity]
    return " ".join(words).lower()


# ---- one result ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Figure:
    name: str
    value: str
    note: str = ""


def _headline(result: Result) -> dict[str, Any]:
    latency, corrected = headline_statistic(result)
    ok, verdict = result_verdict(result)
    requested = result.requested_rps
    achieved = result.achieved_rps
    ratio = f"{100.0 * achieved / requested:.1f}% of requested" if requested > 0 else \
        "as fast as possible (closed loop)" if not result.options.open_loop else ""
    figures = [
        Figure("p99 (CO-corrected)", format_latency(percentile(latency, 99)),
               "from the intended send time") if corrected else
        Figure("p99 (not CO-corrected)", format_latency(percentile(latency, 99)),
               "from the actual send, as the tool that wrote this file measured"),
        Figure("achieved", f"{format_rate(achieved)} rps", ratio),
        Figure("requested", "max" if requested == 0 else f"{format_rate(requested)} rps",
               f"{result.worker_count} worker{'s' if result.worker_count != 1 else ''} x "
               f"{result.options.rps:g} rps" if requested else ""),
        Figure("errors", f"{result.error_count:,}",
               describe_errors(result.counters) if result.error_count else
               f"{result.error_rate:.2%} of finished requests"),
    ]
    percentiles = [(f"p{p:g}", format_latency(percentile(latency, p))) for p in HEADLINE_PERCENTILES]
    percentiles.append(("max", format_latency(latency.max if latency and latency.count
                                              else None)))
    validity = result.validity
    return {"ok": ok, "verdict": verdict, "figures": figures, "percentiles": percentiles,
            "validity": None if validity is None else validity.verdict,
            "validity_reasons": [] if validity is None else validity.reasons,
            "warnings": result_warnings(result), "corrected": corrected,
            "statistic": latency.id if latency else SCHEDULED_TO_RESPONSE,
            "exact": latency is None or latency.has_histogram}


def _description(result: Result) -> str:
    options = result.options
    workers = result.worker_count
    loop = "open loop" if options.open_loop else "closed loop"
    protocol = "HTTP/2" if options.protocol == "http2" else "HTTP/1.1"
    return (f"{options.request_method} {options.uri}: {workers} worker"
            f"{'s' if workers != 1 else ''} x {options.connections} connections, {loop}, "
            f"{protocol}, {format_latency(result.duration)}")


def _statistics_rows(result: Result) -> list[list[str]]:
    rows: list[list[str]] = []
    for statistic in result.global_result.statistics:
        if statistic.count == 0:
            continue
        if len(rows) == MAX_TABLE_ROWS:
            break
        if statistic.raw:
            rows.append([statistic.id, f"{statistic.count:,}", f"{statistic.min:g}",
                         f"{statistic.mean:.1f}", "-", "-", f"{statistic.max:g}"])
        else:
            rows.append([statistic.id, f"{statistic.count:,}", format_latency(statistic.min),
                         format_latency(statistic.mean),
                         format_latency(percentile(statistic, 50)), format_latency(percentile(statistic, 99)),
                         format_latency(statistic.max)])
    return rows


def _worker_rows(result: Result) -> list[list[str]]:
    rows = []
    for worker in result.workers[:MAX_TABLE_ROWS]:
        counters = worker.counter_values
        duration = worker.execution_duration
        ok = counters["benchmark.http_2xx"]
        try:
            latency: Statistic | None = worker.stat(SCHEDULED_TO_RESPONSE)
        except KeyError:
            latency = None
        rows.append([worker.name, f"{ok:,}",
                     format_rate(ok / duration) if duration > 0 else "-",
                     format_latency(percentile(latency, 50)), format_latency(percentile(latency, 99)),
                     format_latency(latency.max if latency and latency.count else None)])
    return rows


def _group_rows(result: Result) -> list[list[str]]:
    # --group-by: a row per request kind, target or header value (docs/engine.md "Groups").
    rows = []
    for group in result.groups.groups[:MAX_TABLE_ROWS] if result.groups is not None else ():
        latency = group.latency
        rows.append([clip(printable(group.name)), f"{group.requests:,}",
                     f"{100.0 * group.share:.1f}%", f"{group.errors:,}",
                     f"{100.0 * group.error_rate:.2f}%",
                     format_latency(percentile(latency, 50)), format_latency(percentile(latency, 99)),
                     format_latency(latency.max if latency.count else None)])
    return rows


def _option_rows(result: Result) -> list[tuple[str, str]]:
    rows = []
    for key, value in result.options.model_dump(mode="json").items():
        if value is None or value == [] or value == {}:
            continue
        text = value if isinstance(value, str) else json.dumps(value)
        rows.append((key, clip(text, MAX_OPTION_CHARS)))
    return rows


def result_page(result: Result, path: str, *, standalone: bool = False) -> str:
    """The page of one result; `path` names it (relative to the browsed directory, or the
    file given to ``nhbench report``)."""
    latency = _statistic(result, SCHEDULED_TO_RESPONSE)
    uncorrected = _statistic(result, REQUEST_TO_RESPONSE)
    headline, _ = headline_statistic(result)
    chart = distribution_chart([
        ("CO-corrected (scheduled_to_response)", curve(latency)),
        ("uncorrected (request_to_response)", curve(uncorrected)),
    ])
    counters = result.counters.nonzero()
    duration = result.duration
    percentiles = headline.percentiles if headline else []
    statistics = sum(1 for s in result.global_result.statistics if s.count)
    left_out = {
        name: f"{total:,} {name}: the first {MAX_TABLE_ROWS:,} are shown"
        for name, total in (("percentiles", len(percentiles)),
                            ("workers", len(result.workers)),
                            ("statistics", statistics), ("counters", len(counters)))
        if total > MAX_TABLE_ROWS
    }
    return _render(
        "result.html.j2",
        title=f"nhbench result: {_name(result, path)}",
        standalone=standalone,
        path=path,
        heading=clip(", ".join(result.options.label)) or path,
        result=result,
        description=clip(_description(result)),
        headline=_headline(result),
        chart=Markup(chart),
        phases=Markup(phases_chart(result)),
        streaming=Markup(streaming_chart(result)),
        percentile_rows=[(f"{p.percentile * 100:.10g}%", format_latency(p.value), f"{p.count:,}")
                         for p in percentiles[:MAX_TABLE_ROWS]],
        timeline=[Markup(svg) for svg in timeline_charts(result)],
        intervals=len(result.timeline),
        max_points=MAX_CHART_POINTS,
        left_out=left_out,
        statistics=_statistics_rows(result),
        workers=_worker_rows(result),
        groups=_group_rows(result),
        group_by=result.groups.by if result.groups is not None else "",
        group_spread=(f"{result.groups.spread:.3f}"
                      if result.groups is not None and result.groups.spread is not None else ""),
        counters=[(name, f"{value:,}", format_rate(value / duration) if duration > 0 else "-")
                  for name, value in list(counters.items())[:MAX_TABLE_ROWS]],
        options=_option_rows(result),
    )


# ---- a comparison --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Key:
    name: str
    kind: str  # "latency", "rate", "count", "ratio"


_KEYS = (
    _Key("requested rps", "rate"), _Key("achieved rps", "rate"),
    _Key("p50", "latency"), _Key("p90", "latency"), _Key("p99", "latency"),
    _Key("p99.9", "latency"), _Key("max", "latency"), _Key("mean", "latency"),
    _Key("errors", "count"), _Key("error rate", "ratio"), _Key("duration", "latency"),
)


def _key_values(result: Result) -> dict[str, float | None]:
    latency, _ = headline_statistic(result)
    has = latency is not None and latency.count > 0
    return {
        "requested rps": result.requested_rps,
        "achieved rps": result.achieved_rps,
        "p50": percentile(latency, 50), "p90": percentile(latency, 90), "p99": percentile(latency, 99),
        "p99.9": percentile(latency, 99.9),
        "max": latency.max if has and latency else None,
        "mean": latency.mean if has and latency else None,
        "errors": float(result.error_count),
        "error rate": result.error_rate,
        "duration": result.duration,
    }


def _show(kind: str, value: float | None) -> str:
    if value is None:
        return "-"
    if kind == "latency":
        return format_latency(value)
    if kind == "rate":
        return format_rate(value)
    if kind == "ratio":
        return f"{value:.2%}"
    return f"{value:,.0f}"


def _delta(kind: str, base: float | None, value: float | None) -> str:
    """``+1.2 ms (+12.0%)``: the difference from the first run, and the relative one when the
    first run's value is not zero."""
    if base is None or value is None:
        return "-"
    difference = value - base
    sign = "+" if difference >= 0 else "-"
    if kind == "ratio":
        text = f"{sign}{abs(difference) * 100:.2f} pt"
    else:
        text = sign + _show(kind, abs(difference))
    if base != 0:
        text += f" ({difference / base:+.1%})"
    return text


def _compared(path: str, result: Result) -> dict[str, Any]:
    """What a comparison shows of one run: taken from the result as it is loaded, so that
    a comparison holds one result in memory at a time."""
    latency, corrected = headline_statistic(result)
    return {"name": _name(result, path), "path": path, "curve": curve(latency),
            "corrected": corrected, "values": _key_values(result),
            "time": _when(result.timestamp), "url": clip(result.options.uri),
            "description": clip(_description(result)), "verdict": result_verdict(result)[1],
            "validity": None if result.validity is None else result.validity.verdict}


def compare_page(runs: Iterable[tuple[str, Result]]) -> str:
    """The comparison of `runs` (path, result), read one at a time: their CO-corrected
    latency curves overlaid in one chart and a table of each key figure with its difference
    from the first run."""
    compared = []
    # Each run against the first, statistically (docs/trust.md "Comparing runs"): the first
    # result is kept for that, so two are in memory at a time.
    first: Result | None = None
    verdicts: list[Comparison | str] = []
    for path, result in runs:
        compared.append(_compared(path, result))
        if first is None:
            first = result
            continue
        try:
            verdicts.append(result.compare(first))
        except (ValueError, TypeError) as exc:
            # A hostile or broken interval histogram: said in the cell, the page still shows.
            verdicts.append(f"not compared: {clip(str(exc))}")
    names = [run["name"] for run in compared]
    # Two runs with the same label are told apart by their files.
    names = [f"{name} ({run['path']})" if names.count(name) > 1 else name
             for name, run in zip(names, compared, strict=True)]
    chart = distribution_chart(
        [(name, run["curve"]) for name, run in zip(names, compared, strict=True)],
        title="Latency by percentile (CO-corrected)" if all(
            run["corrected"] for run in compared) else "Latency by percentile",
        legend=False, width=900, height=440)
    values = [run["values"] for run in compared]
    rows = []
    for key in _KEYS:
        base = values[0][key.name]
        cells = [_show(key.kind, base)]
        for other in values[1:]:
            cells.append(_show(key.kind, other[key.name]))
            cells.append(_delta(key.kind, base, other[key.name]))
        rows.append((key.name, cells))
    legend = [
        {"name": name, "colour": PALETTE[i % len(PALETTE)], "path": run["path"],
         "time": run["time"], "url": run["url"], "description": run["description"],
         "verdict": run["verdict"], "validity": run["validity"]}
        for i, (name, run) in enumerate(zip(names, compared, strict=True))
    ]
    return _render("compare.html.j2", title="nhbench comparison", runs=legend,
                   chart=Markup(chart), rows=rows, others=names[1:], base=names[0],
                   statistical=_statistical_rows(verdicts),
                   notes=sorted({note for v in verdicts if not isinstance(v, str)
                                 for note in v.notes}),
                   methods=sorted({f"{v.method}" + (f", block length {v.block_length}"
                                                     if v.block_length else "")
                                   + f", {v.resamples} resamples, seed {v.seed}"
                                   for v in verdicts if not isinstance(v, str)}))


def _statistical_rows(verdicts: list[Comparison | str]) -> list[tuple[str, list[tuple[str, str]]]]:
    """One row a compared statistic: for each other run, its change with the confidence
    interval and its verdict (the verdict is also the cell's class, for its colour)."""
    from .._compare import COMPARED_STATISTICS

    rows = []
    for name, _worse in COMPARED_STATISTICS:
        cells = []
        for verdict in verdicts:
            if isinstance(verdict, str):
                cells.append((verdict, "not tested"))
                continue
            statistic = verdict[name]
            text = statistic.interval_text()
            cells.append((text, statistic.verdict))
        rows.append((name, cells))
    return rows


# ---- a campaign ----------------------------------------------------------------------------


def campaign_page(manifest: CampaignManifest, path: str, *, has_report: bool) -> str:
    prefix = "" if path == "." else path + "/"
    columns = step_view(manifest, "browse")
    steps = [
        {"step": step, "result": prefix + step.directory + "/result.json",
         "cells": [{"text": column.text(step), "css": column.css_class(step),
                    "link": column.link} for column in columns]}
        for step in manifest.steps
    ]
    return _render(
        "campaign.html.j2",
        title="nhbench sweep" + (f": {', '.join(manifest.label)}" if manifest.label else ""),
        manifest=manifest, path=path, columns=columns, steps=steps,
        report=file_url(prefix + "report.html") if has_report else None,
        charts=[Markup(chart) for chart in sweep_charts(manifest)],
        max_compared=MAX_COMPARED,
    )


def error_page(status: int, message: str) -> str:
    return _render("error.html.j2", title=f"nhbench browse: {status}", status=status,
                   message=message)
