"""What the text, CSV and HTML reports share: units, the step table's columns, the plan in
words and the machine facts grouped for reading.

The renderers differ only in layout; keeping the cell values here means report.txt and
report.html always say the same thing about a step.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

from .._format import format_latency, format_rate
from ..campaign import (
    LATENCY_KEYS,
    CampaignManifest,
    StepRecord,
    SweepPlan,
    watched_groups,
)
from ..hosts import MachineFacts

# A failed stop rule is written the same way in every output: its one formatter lives with
# the rule grammar (and a latency's in nhbench._format).
from ..options import format_check, format_cpu_list

__all__ = [
    "LOADGEN_COLUMN",
    "NHBENCH_COLUMN",
    "Column",
    "FactRow",
    "FactSection",
    "describe_plan",
    "fact_sections",
    "format_check",
    "format_latency",
    "format_percent",
    "format_rate",
    "highest_passing",
    "machine_title",
    "protocol_of",
    "step_columns",
    "watched_groups",
    "workers_of",
]

LOADGEN_COLUMN = "Loadgen CPU %"
NHBENCH_COLUMN = "nhbench CPU %"


def format_percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"




def workers_of(manifest: CampaignManifest, step: StepRecord) -> str:
    """The "Core/Thread" column: the worker count, and the CPUs they were pinned to."""
    cpus = manifest.options.get("cpus")
    if cpus:
        return f"{step.workers} @{format_cpu_list([int(c) for c in cpus])}"
    return str(step.workers)


def protocol_of(manifest: CampaignManifest) -> str:
    """http1 / http2, with /tls for an https URL (the Intel table's http1, http2, https)."""
    protocol = str(manifest.options.get("protocol") or "http1")
    uri = str(manifest.options.get("uri") or manifest.url)
    return f"{protocol}/tls" if uri.lower().startswith("https:") else protocol


def highest_passing(manifest: CampaignManifest) -> StepRecord | None:
    """The step the manifest names as the highest passing one, else the passing step with
    the highest requested rate."""
    if manifest.highest_passing_step is not None:
        for step in manifest.steps:
            if step.index == manifest.highest_passing_step:
                return step
    passing = [step for step in manifest.steps if step.passed]
    return max(passing, key=lambda s: (s.requested_rps, s.index)) if passing else None


@dataclass(frozen=True)
class Column:
    """One column of the step table: its header, how to get the cell, and its alignment."""

    header: str
    cell: Any  # Callable[[StepRecord], str]
    numeric: bool = True


_LATENCY_HEADERS = {"p50": "P50", "p90": "P90", "p99": "P99", "p99.9": "P99.9"}


def step_columns(manifest: CampaignManifest) -> list[Column]:
    """The step table's columns, in the order of the Intel script's summary plus ours."""
    protocol = protocol_of(manifest)
    columns = [
        Column("No.", lambda s: str(s.index)),
        Column("Core/Thread", lambda s: workers_of(manifest, s)),
        Column("Protocol", lambda s: protocol, numeric=False),
        Column("RPS per worker", lambda s: format_rate(s.rps_per_worker)),
        Column("Requested RPS", lambda s: format_rate(s.requested_rps)),
        Column("Achieved RPS", lambda s: format_rate(s.achieved_rps)),
    ]
    for key in LATENCY_KEYS:
        columns.append(
            Column(_LATENCY_HEADERS[key], lambda s, key=key: format_latency(s.latency.get(key)))
        )
    columns.append(
        Column("Blocked", lambda s: f"yes ({s.blocked_count})" if s.blocked else "no",
               numeric=False)
    )
    columns.append(Column("Errors", _errors_cell))
    for group in watched_groups(manifest):
        columns.append(
            Column(f"{group} CPU %", lambda s, g=group: format_percent(s.target_cpu.get(g)))
        )
    columns.append(Column(LOADGEN_COLUMN, lambda s: format_percent(s.loadgen_cpu)))
    columns.append(Column(NHBENCH_COLUMN, lambda s: format_percent(s.nhbench_cpu)))
    columns.append(Column("Result", lambda s: "pass" if s.passed else "FAIL", numeric=False))
    return columns


def _errors_cell(step: StepRecord) -> str:
    total = step.error_count
    if total == 0:
        return "0"
    return f"{total} ({step.error_rate * 100:.2g}%)"


def describe_plan(plan: SweepPlan) -> list[str]:
    """The plan in a few lines of words."""
    steps = plan.steps
    if len(steps) >= 3 and all(
        math.isclose(b - a, steps[1] - steps[0]) for a, b in itertools.pairwise(steps)
    ):
        rates = (
            f"{steps[0]:g} to {steps[-1]:g} rps per worker in steps of "
            f"{steps[1] - steps[0]:g} ({len(steps)} steps)"
        )
    else:
        rates = ", ".join(f"{rate:g}" for rate in steps) + " rps per worker"
    lines = [f"{rates}; {plan.duration:g} s each, {plan.cooldown:g} s cooldown"]
    rules = []
    if plan.stop_on_blocked:
        rules.append("blocked")
    rules.extend(plan.stop_on_slo)
    lines.append("stop rules: " + (", ".join(rules) if rules else "none"))
    if plan.extend:
        step = f"{plan.step:g}" if plan.step is not None else "the last step size"
        limit = f" up to {plan.extend_limit:g}" if plan.extend_limit is not None else ""
        lines.append(f"extend by {step} rps per worker{limit} until a stop rule fires")
    return lines


@dataclass(frozen=True)
class FactRow:
    label: str
    value: str
    known: bool


@dataclass(frozen=True)
class FactSection:
    title: str
    rows: list[FactRow]


# Grouped as the Intel script's summary: the system, the CPU, its frequencies, the rest.
_FACT_GROUPS: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    (
        "System",
        (("hostname", "Hostname"), ("os", "OS"), ("kernel", "Kernel"),
         ("architecture", "Architecture")),
    ),
    (
        "CPU",
        (("cpu_model", "Model"), ("cpus", "Logical CPUs"), ("sockets", "Sockets"),
         ("cores_per_socket", "Cores per socket"), ("threads_per_core", "Threads per core"),
         ("numa_nodes", "NUMA nodes"), ("stepping", "Stepping"), ("smt", "SMT"),
         ("turbo", "Turbo")),
    ),
    (
        "Frequency",
        (("governors", "Governors"), ("min_frequency", "Min frequency"),
         ("max_frequency", "Max frequency"), ("uncore_frequency", "Uncore frequency")),
    ),
    ("Services", (("irqbalance", "irqbalance"),)),
)
_NIC_FIELDS = (
    ("interface", "Interface"),
    ("address", "Address"),
    ("driver", "Driver"),
    ("driver_version", "Driver version"),
    ("firmware", "Firmware"),
)


def _fact_value(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def _unknown(reason: str | None) -> str:
    return f"unknown ({reason})" if reason else "unknown"


def fact_sections(facts: MachineFacts) -> list[FactSection]:
    """The facts of one machine in sections; a fact that could not be read shows as
    ``unknown (reason)``."""
    sections: list[FactSection] = []
    for title, fields in _FACT_GROUPS:
        rows = []
        for name, label in fields:
            value = getattr(facts, name)
            if value is None:
                rows.append(FactRow(label, _unknown(facts.unknown.get(name)), False))
            else:
                rows.append(FactRow(label, _fact_value(value), True))
        sections.append(FactSection(title, rows))
    rows = []
    for name, label in _NIC_FIELDS:
        value = getattr(facts.nic, name) if facts.nic is not None else None
        if value is None:
            reason = facts.unknown.get(f"nic.{name}") or facts.unknown.get("nic")
            rows.append(FactRow(label, _unknown(reason), False))
        else:
            rows.append(FactRow(label, str(value), True))
    sections.append(FactSection("NIC", rows))
    return sections


def machine_title(role: str, facts: MachineFacts) -> str:
    return f"{role} ({facts.host})"
