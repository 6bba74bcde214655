"""What the text and HTML reports share: units, the step table's columns, the plan in
words and the machine facts grouped for reading.

The renderers differ only in layout; the step table's ``report`` view (`campaign.STEP_TABLE`)
gives both their columns, so report.txt and report.html always say the same thing about a
step.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

from .._format import format_latency, format_rate
from ..campaign import (
    CampaignManifest,
    StepRecord,
    SweepPlan,
    ViewColumn,
    format_percent,
    report_view,
)
from ..hosts import MachineFacts

# A failed stop rule is written the same way in every output: its one formatter lives with
# the rule grammar (and a latency's in nhbench._format).
from ..options import format_check

__all__ = [
    "FactRow",
    "FactSection",
    "describe_plan",
    "cluster_rows",
    "fact_sections",
    "format_check",
    "format_latency",
    "format_percent",
    "format_rate",
    "highest_passing",
    "machine_title",
    "step_columns",
    "validity_lines",
]


def step_columns(manifest: CampaignManifest) -> list[ViewColumn]:
    """The step table's columns as report.txt and report.html show them: the ``report``
    view, or the Intel script's layout when the campaign's ``table`` setting is intel."""
    return report_view(manifest)


def validity_lines(manifest: CampaignManifest) -> list[str]:
    """Under the step table: each step that is not valid and why, one line per reason
    (``No. 3 invalid: run_queue_wait: ...``), so that a reader sees what its numbers are
    worth beside them."""
    lines = []
    for step in manifest.steps:
        if step.validity in (None, "valid"):
            continue
        reasons = step.validity_reasons or [f"{step.validity}: no reason recorded"]
        lines += [f"No. {step.index} {reason}" for reason in reasons]
    return lines


def highest_passing(manifest: CampaignManifest) -> StepRecord | None:
    """The step the manifest names as the highest passing one, else the passing step with
    the highest requested rate."""
    if manifest.highest_passing_step is not None:
        for step in manifest.steps:
            if step.index == manifest.highest_passing_step:
                return step
    passing = [step for step in manifest.steps if step.passed]
    return max(passing, key=lambda s: (s.requested_rps, s.index)) if passing else None


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
    if facts.calibration:
        sections.append(FactSection("Calibration", _calibration_rows(facts.calibration)))
    return sections


def _calibration_rows(cal: dict[str, Any]) -> list[FactRow]:
    """The headline figures of an ``nhbench calibrate`` (docs/trust.md) kept in the facts."""
    rows = [FactRow("Measured", str(cal.get("measured_at")), True),
            FactRow("Clock source", str(cal.get("host", {}).get("clock_source", {})
                                        .get("current")), True),
            FactRow("Clock read", f"{cal.get('clock_read_ns', 0):.1f} ns", True),
            FactRow("System call", f"{cal.get('syscall_ns', 0):.0f} ns", True)]
    for name, w in cal.get("wakeups", {}).items():
        rows.append(FactRow(f"Wake-up {name} p50/p99/max",
                            f"{w['p50_us']:.3g} / {w['p99_us']:.3g} / {w['max_us']:.3g} µs",
                            True))
    floor = cal.get("floor") or {}
    if floor.get("available"):
        rows.append(FactRow("Loopback floor", f"{floor['rtt_us']:.3g} µs round trip", True))
    else:
        rows.append(FactRow("Loopback floor", _unknown(floor.get("reason")), False))
    steal = cal.get("host", {}).get("steal_percent")
    rows.append(FactRow("Steal", "not reported" if steal is None else f"{steal:.2f} %",
                        steal is not None))
    return rows


_CLUSTER_FIELDS = (
    ("docker", "Docker version"),
    ("containerd", "containerd version"),
    ("kubernetes_server", "Kubernetes version"),
    ("kubelet", "kubelet version"),
    ("calico", "Calico version"),
    ("istio", "Istio version"),
    ("cpu_manager_policy", "CPU manager policy"),
)


def _pair(limit: str | None, request: str | None) -> str:
    return f"{limit or '-'}/{request or '-'}"


def cluster_rows(facts: MachineFacts | None) -> list[FactRow]:
    """The target node's cluster facts as the lab script's report header lists them:
    versions, then per watched pod its CPUs ("5,22,77,94 (4)") and its memory and CPU
    limits/requests; empty when there are none."""
    cluster = None if facts is None else facts.cluster
    if cluster is None:
        return []
    rows = []
    for name, label in _CLUSTER_FIELDS:
        value = getattr(cluster, name)
        rows.append(FactRow(label, _unknown(cluster.unknown.get(name)) if value is None
                            else str(value), value is not None))
    if cluster.service is not None:
        service = cluster.service
        port = service.port_name or str(service.port)
        rows.append(FactRow("Target service", f"{service.given} port {port} -> NodePort "
                            f"{service.node_port} on {service.node} ({service.address})", True))
    for pod in cluster.pods:
        sources = ", ".join(sorted({c.source for c in pod.containers}))
        cpus = f"{','.join(map(str, pod.cpus))} ({len(pod.cpus)})"
        rows.append(FactRow(f"{pod.group} cpu", f"{cpus} {sources}; {pod.given}", True))
        several = len({c.container for c in pod.containers}) > 1
        for c in pod.containers:
            label = f"{pod.group} {c.container}" if several else pod.group
            where = f" ({c.pod}/{c.container})"
            rows.append(FactRow(f"{label} memory (limits/requests)",
                                _pair(c.memory_limit, c.memory_request) + where, True))
            rows.append(FactRow(f"{label} cpu (limits/requests)",
                                _pair(c.cpu_limit, c.cpu_request) + where, True))
    return rows


def machine_title(role: str, facts: MachineFacts) -> str:
    return f"{role} ({facts.host})"
