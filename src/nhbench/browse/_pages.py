"""The browser's pages as HTML: the list, one result, a comparison, a campaign, an error.

Rendered with jinja2 from ``templates/`` (package data), autoescaped, so every string a
result file supplies (labels, URLs, error text, option values) is escaped. Each page carries
its CSS inline and its charts as inline SVG (`._charts`), and a Content-Security-Policy that
allows nothing to be fetched: the pages work offline, and a result file cannot make the
browser load anything. The list page has a few lines of inline script (the filter box and
the comparison selection); the other pages have none.

`result_page(..., standalone=True)` is what ``nhbench report RESULT.json -o page.html``
writes: the same page without the links back into the browser, so the file stands alone.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
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
from ..campaign import CampaignManifest, sweep_charts
from ._charts import MAX_TIMELINE_POINTS, curve, distribution_chart, timeline_charts
from ._scan import Entry, Listing, headline_statistic, percentile

if TYPE_CHECKING:
    from .._result import Result, Statistic

__all__ = [
    "MAX_COMPARED",
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
    return ", ".join(result.options.label) or path.rsplit("/", 1)[-1]


# ---- the list ------------------------------------------------------------------------------


def list_page(listing: Listing, root: str) -> str:
    rows = []
    for entry in listing.entries:
        rows.append({"entry": entry, "search": _search_text(entry)})
    return _render("list.html.j2", root=root, rows=rows, notes=listing.notes,
                   max_compared=MAX_COMPARED, title=f"nhbench results: {root}")


def _search_text(entry: Entry) -> str:
    words = [entry.path, entry.label, entry.url, _when(entry.time), entry.verdict, entry.error,
             entry.kind]
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
    return {"ok": ok, "verdict": verdict, "figures": figures, "percentiles": percentiles,
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
    rows = []
    for statistic in result.global_result.statistics:
        if statistic.count == 0:
            continue
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
    for worker in result.workers:
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


def _option_rows(result: Result) -> list[tuple[str, str]]:
    rows = []
    for key, value in result.options.model_dump(mode="json").items():
        if value is None or value == [] or value == {}:
            continue
        text = value if isinstance(value, str) else json.dumps(value)
        rows.append((key, text))
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
    return _render(
        "result.html.j2",
        title=f"nhbench result: {_name(result, path)}",
        standalone=standalone,
        path=path,
        result=result,
        description=_description(result),
        headline=_headline(result),
        chart=Markup(chart),
        percentile_rows=[(f"{p.percentile * 100:.10g}%", format_latency(p.value), f"{p.count:,}")
                         for p in (headline.percentiles if headline else [])],
        timeline=[Markup(svg) for svg in timeline_charts(result)],
        intervals=len(result.timeline),
        per_point=math.ceil(len(result.timeline) / MAX_TIMELINE_POINTS),
        statistics=_statistics_rows(result),
        workers=_worker_rows(result),
        counters=[(name, f"{value:,}", format_rate(value / duration) if duration > 0 else "-")
                  for name, value in counters.items()],
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


def compare_page(runs: Sequence[tuple[str, Result]]) -> str:
    """The comparison of `runs` (path, result): their CO-corrected latency curves overlaid
    in one chart and a table of each key figure with its difference from the first run."""
    names = [_name(result, path) for path, result in runs]
    # Two runs with the same label are told apart by their files.
    names = [f"{name} ({path})" if names.count(name) > 1 else name
             for name, (path, _) in zip(names, runs, strict=True)]
    chart = distribution_chart(
        [(name, curve(headline_statistic(result)[0]))
         for name, (_, result) in zip(names, runs, strict=True)],
        title="Latency by percentile (CO-corrected)" if all(
            headline_statistic(result)[1] for _, result in runs) else "Latency by percentile",
        legend=False, width=900, height=440)
    values = [_key_values(result) for _, result in runs]
    rows = []
    for key in _KEYS:
        base = values[0][key.name]
        cells = [_show(key.kind, base)]
        for other in values[1:]:
            cells.append(_show(key.kind, other[key.name]))
            cells.append(_delta(key.kind, base, other[key.name]))
        rows.append((key.name, cells))
    legend = [
        {"name": name, "colour": PALETTE[i % len(PALETTE)], "path": path,
         "time": _when(result.timestamp), "url": result.options.uri,
         "description": _description(result), "verdict": result_verdict(result)[1]}
        for i, (name, (path, result)) in enumerate(zip(names, runs, strict=True))
    ]
    return _render("compare.html.j2", title="nhbench comparison", runs=legend,
                   chart=Markup(chart), rows=rows, others=names[1:], base=names[0])


# ---- a campaign ----------------------------------------------------------------------------


def campaign_page(manifest: CampaignManifest, path: str, *, has_report: bool) -> str:
    prefix = "" if path == "." else path + "/"
    steps = [
        {"step": step, "result": prefix + step.directory + "/result.json"}
        for step in manifest.steps
    ]
    return _render(
        "campaign.html.j2",
        title="nhbench sweep" + (f": {', '.join(manifest.label)}" if manifest.label else ""),
        manifest=manifest, path=path, steps=steps,
        report=file_url(prefix + "report.html") if has_report else None,
        charts=[Markup(chart) for chart in sweep_charts(manifest)],
        max_compared=MAX_COMPARED,
    )


def error_page(status: int, message: str) -> str:
    return _render("error.html.j2", title=f"nhbench browse: {status}", status=status,
                   message=message)
