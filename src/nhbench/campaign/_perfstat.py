"""The perf stat counts of a campaign's steps as step-table columns and as a table of their
own (``nhbench.capture`` takes them; docs/sweep.md "perf stat").

Per watched group (or ``all``): results.csv has ``perf_GROUP_EVENT`` for each event and
``perf_GROUP_ipc``, the value as a number or, when perf could not count it, the text
``unknown (why)`` (never 0 or an empty cell that reads as "nothing happened"); the
DataFrame has the same columns as numbers (None where unknown); report.txt and report.html
show ``GROUP IPC`` in the step table and every count in the perf stat table under it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..capture import ALL_CPUS_GROUP, PERF_STAT_EVENTS, PerfCount, PerfStatGroup, format_count
from ._models import CampaignManifest, StepRecord

__all__ = ["format_ipc", "perf_stat_columns", "perf_stat_layout", "perf_stat_rows",
           "step_perf_group"]


def perf_stat_layout(manifest: CampaignManifest) -> tuple[list[str], list[str]]:
    """The groups and events a campaign's perf stat columns show: the capture spec's first
    (so that a column exists before the first step ends), then any a step recorded."""
    groups: list[str] = []
    events: list[str] = []
    spec = manifest.target_capture or {}
    if spec.get("perf_stat"):
        groups += [str(name) for name in (spec.get("watch_cpus") or {})] or [ALL_CPUS_GROUP]
        events += [*PERF_STAT_EVENTS, *(str(e) for e in spec.get("perf_events") or ())]
    for step in manifest.steps:
        stat = step.target_capture.perf_stat if step.target_capture else None
        if stat is None:
            continue
        events += [event for event in stat.events if event not in events]
        groups += [group.name for group in stat.groups if group.name not in groups]
    return groups, list(dict.fromkeys(events))


def step_perf_group(step: StepRecord, name: str) -> PerfStatGroup | None:
    stat = step.target_capture.perf_stat if step.target_capture else None
    if stat is None:
        return None
    return next((group for group in stat.groups if group.name == name), None)


def _count(step: StepRecord, group: str, event: str) -> PerfCount | None:
    found = step_perf_group(step, group)
    return None if found is None else found.counts.get(event)


def _unknown_text(reason: str | None) -> str:
    return f"unknown ({reason or 'not counted'})"


def _skipped(step: StepRecord) -> str | None:
    capture = step.target_capture
    return None if capture is None else capture.skipped.get("perf stat")


def _csv_count(group: str, event: str) -> Callable[[StepRecord], Any]:
    def value(step: StepRecord) -> Any:
        count = _count(step, group, event)
        if count is None:
            skipped = _skipped(step)
            return None if skipped is None else _unknown_text(skipped)
        return count.value if count.value is not None else _unknown_text(count.unknown)

    return value


def _frame_count(group: str, event: str) -> Callable[[StepRecord], Any]:
    def value(step: StepRecord) -> Any:
        count = _count(step, group, event)
        return None if count is None else count.value

    return value


def format_ipc(found: PerfStatGroup | None, skipped: str | None = None) -> str:
    if found is None:
        return "-" if skipped is None else f"unknown ({skipped})"
    if found.ipc is None:
        return f"unknown ({found.ipc_unknown or 'not counted'})"
    return f"{found.ipc:.2f}"


def _csv_ipc(group: str) -> Callable[[StepRecord], Any]:
    def value(step: StepRecord) -> Any:
        found = step_perf_group(step, group)
        if found is None or found.ipc is None:
            text = format_ipc(found, _skipped(step))
            return None if text == "-" else text
        return found.ipc

    return value


def _ipc_value(group: str) -> Callable[[StepRecord], Any]:
    def value(step: StepRecord) -> Any:
        found = step_perf_group(step, group)
        return None if found is None else found.ipc

    return value


def perf_stat_columns(manifest: CampaignManifest, column: Any, shown: Any) -> list[Any]:
    """The step-table columns (`StepColumn`s, built with the table's `column` and `shown`
    classes, which this module cannot import without a cycle)."""
    groups, events = perf_stat_layout(manifest)
    out = []
    for group in groups:
        for event in events:
            name = f"perf_{group}_{event}"
            out.append(column(f"{name}/csv", _csv_count(group, event),
                              csv=shown(name, last=True)))
            out.append(column(name, _frame_count(group, event), frame=name))
        out.append(column(f"perf_{group}_ipc/csv", _csv_ipc(group),
                          csv=shown(f"perf_{group}_ipc", last=True)))
        out.append(column(f"perf_{group}_ipc", _ipc_value(group),
                          lambda step, g=group: format_ipc(step_perf_group(step, g),
                                                           _skipped(step)),
                          report=f"{group} IPC", frame=f"perf_{group}_ipc"))
    return out


def perf_stat_rows(manifest: CampaignManifest) -> tuple[list[str], list[list[str]]]:
    """The reports' perf stat table: one row per step and group, a column per event, IPC
    last; no rows when no step has perf stat counts or a reason they are missing."""
    groups, events = perf_stat_layout(manifest)
    headers = ["No.", "Group", *events, "IPC"]
    rows: list[list[str]] = []
    for step in manifest.steps:
        skipped = _skipped(step)
        for group in groups:
            found = step_perf_group(step, group)
            if found is None and skipped is None:
                continue
            if found is None:
                cells = [f"unknown ({skipped})"] * (len(events) + 1)
            else:
                cells = [format_count(found.counts.get(event)) for event in events]
                cells.append(format_ipc(found))
            rows.append([str(step.index), group, *cells])
    return headers, rows
