"""The sweep's charts of a campaign: latency, achieved rate and CPU against offered load.

report.html shows them (styled by its stylesheet), and so does `Campaign._repr_html_` in a
notebook (with ``inline_style``, since no stylesheet reaches a notebook output); both call
`sweep_charts`, so the two always draw the same charts from the same manifest.
"""

from __future__ import annotations

import itertools

from .._format import format_latency, format_rate
from .._svg import PALETTE, Series, line_chart
from ._models import LATENCY_KEYS, CampaignManifest, StepRecord

__all__ = ["changed_groups", "group_cpus", "group_cpu_runs", "sweep_charts", "watched_groups"]


def watched_groups(manifest: CampaignManifest) -> list[str]:
    """Names of the target's watched CPU groups: those of the capture spec first, in its
    order, then any other a step recorded."""
    names: list[str] = []
    spec = manifest.target_capture or {}
    for name in (spec.get("watch_cpus") or {}):
        if name not in names:
            names.append(str(name))
    for step in manifest.steps:
        for name in step.target_cpu:
            if name not in names:
                names.append(name)
    return names


def group_cpus(manifest: CampaignManifest, step: StepRecord | None, group: str) -> list[int] | None:
    """The CPUs of watched group `group`: those the step watched (its record, else its
    capture), else those the campaign's capture spec names; None when the group is not
    watched. A --watch-pod group is resolved again before each step, so steps may differ."""
    if step is not None:
        if group in step.watch_cpus:
            return list(step.watch_cpus[group])
        if step.target_capture is not None:
            for load in step.target_capture.groups:
                if load.name == group:
                    return list(load.cpus)
    spec = (manifest.target_capture or {}).get("watch_cpus") or {}
    cpus = spec.get(group)
    return None if cpus is None else [int(cpu) for cpu in cpus]


def group_cpu_runs(manifest: CampaignManifest, group: str) -> list[tuple[list[int], list[int]]]:
    """(CPUs, step indices) of `group` for each CPU set its steps watched, in the order of
    their first step; [] without steps or when the steps watched what the capture spec
    names (the usual case: nothing changed)."""
    runs: dict[tuple[int, ...], list[int]] = {}
    for step in manifest.steps:
        cpus = group_cpus(manifest, step, group)
        if cpus is not None:
            runs.setdefault(tuple(cpus), []).append(step.index)
    if not runs or list(runs) == [tuple(group_cpus(manifest, None, group) or ())]:
        return []
    return [(list(cpus), indices) for cpus, indices in runs.items()]


def changed_groups(manifest: CampaignManifest) -> list[str]:
    """The watched groups whose CPUs differ between steps (a --watch-pod group whose pod
    moved during the campaign)."""
    return [group for group in watched_groups(manifest)
            if len(group_cpu_runs(manifest, group)) > 1]


def sweep_charts(manifest: CampaignManifest, *, inline_style: bool = False) -> list[str]:
    """The SVG charts of a campaign (none without steps): latency vs offered load, achieved
    vs offered load, and CPU busy vs offered load when any CPU was measured."""
    steps = manifest.steps
    if not steps:
        return []
    if manifest.kind == "adapt":
        # A search's rates go up and down; its lines are drawn in rate order (run order
        # among equal rates), not in the zigzag of the run order.
        steps = sorted(steps, key=lambda step: (step.requested_rps, step.index))
    passed = [step.passed for step in steps]
    charts: list[str] = []
    latency = []
    for colour, key in zip(PALETTE, LATENCY_KEYS, strict=False):  # more colours than keys
        points = [(s.requested_rps, value) for s in steps
                  if (value := s.latency.get(key)) is not None]
        flags = [s.passed for s in steps if s.latency.get(key) is not None]
        latency.append(Series(key, points, colour, flags))
    charts.append(line_chart(
        "Latency vs offered load", latency, x_label="requested RPS", y_label="latency",
        y_format=format_latency, x_format=format_rate, inline_style=inline_style,
    ))
    achieved = Series("achieved", [(s.requested_rps, s.achieved_rps) for s in steps],
                      PALETTE[0], passed)
    charts.append(line_chart(
        "Achieved vs offered load", [achieved], x_label="requested RPS",
        y_label="achieved RPS (2xx/s)", x_format=format_rate, y_format=format_rate,
        diagonal=True, inline_style=inline_style,
    ))
    cpu_series = []
    names = watched_groups(manifest)
    # More watched groups than colours reuse colours rather than drop groups from the chart.
    for colour, name in zip(itertools.cycle(PALETTE), names):
        points = [(s.requested_rps, value) for s in steps
                  if (value := s.target_cpu.get(name)) is not None]
        flags = [s.passed for s in steps if s.target_cpu.get(name) is not None]
        if points:
            cpu_series.append(Series(f"target {name}", points, colour, flags))
    loadgen = [(s.requested_rps, s.loadgen_cpu) for s in steps if s.loadgen_cpu is not None]
    if loadgen:
        flags = [s.passed for s in steps if s.loadgen_cpu is not None]
        cpu_series.append(Series("load generator", loadgen,
                                 PALETTE[len(cpu_series) % len(PALETTE)], flags))
    if cpu_series:
        charts.append(line_chart(
            "CPU busy vs offered load", cpu_series, x_label="requested RPS",
            y_label="CPU busy %", x_format=format_rate, y_format=lambda v: f"{v:g}",
            y_max=100.0, inline_style=inline_style,
        ))
    return charts
