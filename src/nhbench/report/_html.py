"""report.html: the campaign as one self-contained page.

Rendered with jinja2 from ``templates/report.html.j2`` (package data), autoescaped. The page
has its CSS inline and its charts as inline SVG (`nhbench.campaign.sweep_charts`): it needs no
network and no JavaScript. Links to each step's ``result.json`` and flame graph are
relative to the campaign directory, where report.html is written, and are only made for
files that exist there (`campaign_dir` is used for that check, nothing else).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import jinja2
from markupsafe import Markup

from ..campaign import (
    CampaignManifest,
    StepRecord,
    intel_notes,
    perf_stat_rows,
    scrape_notes,
    sweep_charts,
    table_layout,
    watched_cpu_lines,
)
from ._adapt import describe_search, search_lines
from ._common import (
    cluster_rows,
    describe_plan,
    fact_sections,
    format_check,
    format_latency,
    format_percent,
    format_rate,
    highest_passing,
    machine_title,
    step_columns,
    validity_lines,
)

__all__ = ["render_html"]

TEMPLATE = "report.html.j2"


@dataclass(frozen=True)
class Link:
    label: str
    href: str


def _environment() -> jinja2.Environment:
    # PackageLoader reads the templates through importlib.resources, so they are found in
    # an installed wheel as well as in the source tree.
    return jinja2.Environment(
        loader=jinja2.PackageLoader("nhbench.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def _links(step: StepRecord, campaign_dir: Path) -> list[Link]:
    links: list[Link] = []
    candidates = [("result.json", f"{step.directory}/result.json")]
    for role, capture in (("target", step.target_capture), ("loadgen", step.loadgen_capture)):
        if capture is None:
            continue
        if capture.flamegraph_file:
            candidates.append((f"{role} flame graph",
                               f"{step.directory}/{capture.flamegraph_file}"))
        if capture.mpstat_file:
            candidates.append((f"{role} mpstat", f"{step.directory}/{capture.mpstat_file}"))
        if capture.perf_stat is not None and capture.perf_stat.file:
            candidates.append((f"{role} perf stat",
                               f"{step.directory}/{capture.perf_stat.file}"))
    for scrape in step.scrape:
        for phase, file in (("before", scrape.before_file), ("after", scrape.after_file)):
            if file:
                candidates.append((f"{scrape.name} metrics {phase}", f"{step.directory}/{file}"))
    for label, href in candidates:
        if (campaign_dir / href).is_file():
            links.append(Link(label, href))
    return links


def render_html(manifest: CampaignManifest, campaign_dir: Path) -> str:
    """The HTML report of a campaign (the content of report.html in `campaign_dir`)."""
    campaign_dir = Path(campaign_dir)
    columns = step_columns(manifest)
    rows = [
        {
            "cells": [column.text(step) for column in columns],
            "passed": step.passed,
            "links": _links(step, campaign_dir),
            "failed": [format_check(c) for c in step.slo if not c.passed],
        }
        for step in manifest.steps
    ]
    roles: list[str] = [role for role in ("target", "loadgen") if role in manifest.facts]
    roles += [role for role in manifest.facts if role not in roles]
    machines = [
        {"title": machine_title(role, manifest.facts[role]),
         "sections": fact_sections(manifest.facts[role])}
        for role in roles
    ]
    skipped: dict[str, list[int]] = {}
    for step in manifest.steps:
        for role, capture in (("target", step.target_capture), ("loadgen", step.loadgen_capture)):
            if capture is not None:
                for what, reason in capture.skipped.items():
                    skipped.setdefault(f"{role} {what}: {reason}", []).append(step.index)
    best = highest_passing(manifest)
    perf_headers, perf_rows = perf_stat_rows(manifest)
    template = _environment().get_template(TEMPLATE)
    return template.render(
        manifest=manifest,
        title=f"nhbench {manifest.kind}" + (
            f": {', '.join(manifest.label)}" if manifest.label else ""),
        plan=describe_plan(manifest.plan) if manifest.adapt is None else describe_search(
            manifest.adapt, manifest.plan.duration, manifest.plan.cooldown),
        search=search_lines(manifest),
        validity=validity_lines(manifest),
        watched=watched_cpu_lines(manifest),
        table_notes=intel_notes(manifest) if table_layout(manifest) == "intel" else [],
        metrics=scrape_notes(manifest),
        headers=[column.name for column in columns],
        numeric=[column.numeric for column in columns],
        rows=rows,
        charts=[Markup(chart) for chart in sweep_charts(manifest)],
        machines=machines,
        cluster=cluster_rows(manifest.facts.get("target")),
        skipped=skipped,
        best=best,
        best_p99=format_latency(best.latency.get("p99")) if best else None,
        format_rate=format_rate,
        format_percent=format_percent,
        perf_headers=perf_headers,
        perf_rows=perf_rows,
    )
