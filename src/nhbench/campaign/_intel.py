"""The step table as Intel's benchmark.sh prints it (``--table intel``).

The script's summary table has these columns, in this order::

    No. | Core/Thread | Protocol | RPS per worker | Requested RPS | Achieved RPS |
    P90 latency | P99 latency | Blocked | CPU Ingress [%] | Nighthawk Ingress [%] |
    Sidecar Ingress [%]

and its header names the CPU sets kubelet gave the target's pods ("Ingress cpu: 5,22,77,94
(4)", "Nighthawk cpu: ...", "Sidecar cpu: ..."). Its sample output shows "2C4T" beside that
four-CPU ingress set on a two-way SMT machine: Core/Thread describes the *ingress's* CPUs
(two physical cores, four hardware threads), not the load generator's, and the three CPU
columns are the load of the ingress, the Nighthawk server (the backend the ingress forwards
to) and the sidecars. Here they are the watched target groups named ``ingress``,
``nighthawk`` and ``sidecar``; the cores are counted from the target's CPU topology
(`MachineFacts.cpu_cores`: thread siblings from sysfs or lscpu on the target).

After the script's columns come nhbench's own that it has no counterpart for (P50, P99.9,
errors, other watched groups, the load generator's CPU under nhbench's names, target
metrics, result, validity), in the default table's order, so the layout loses nothing.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..options import TABLE_LAYOUTS, format_cpu_list
from ._charts import group_cpu_runs, group_cpus
from ._models import CampaignManifest, StepRecord
from ._table import ViewColumn, format_percent, protocol_of, step_view

__all__ = [
    "CORE_THREAD_GROUP",
    "INTEL_GROUPS",
    "TABLE_LAYOUTS",
    "core_thread",
    "group_cpus",
    "intel_notes",
    "intel_view",
    "report_view",
    "table_layout",
    "watched_cpu_lines",
]

#: The script's CPU columns and the watched group each one shows.
INTEL_GROUPS = (
    ("ingress", "CPU Ingress [%]"),
    ("nighthawk", "Nighthawk Ingress [%]"),
    ("sidecar", "Sidecar Ingress [%]"),
)

#: The group whose cores and threads the Core/Thread column counts.
CORE_THREAD_GROUP = "ingress"


def table_layout(manifest: CampaignManifest) -> str:
    """The campaign's step-table layout: its ``table`` setting, else "nhbench"."""
    value = str(manifest.settings.get("table") or "nhbench")
    return value if value in TABLE_LAYOUTS else "nhbench"


def core_thread(cpus: list[int], cores: list[list[int]] | None,
                unknown: str | None = None) -> tuple[str | None, str | None]:
    """("2C4T", None): the physical cores and hardware threads of `cpus`, counted with the
    machine's `cores` (CPUs grouped by core); or (None, why not)."""
    if cores is None:
        return None, f"the target's CPU topology is unknown ({unknown or 'not collected'})"
    core_of = {cpu: index for index, core in enumerate(cores) for cpu in core}
    missing = [cpu for cpu in cpus if cpu not in core_of]
    if missing:
        return None, f"CPU {missing[0]} is not one of the target's CPUs"
    threads = sorted(set(cpus))
    return f"{len({core_of[cpu] for cpu in threads})}C{len(threads)}T", None


def _target_cores(manifest: CampaignManifest) -> tuple[list[list[int]] | None, str | None]:
    facts = manifest.facts.get("target")
    if facts is None:
        return None, "no target facts"
    return facts.cpu_cores, facts.unknown.get("cpu_cores")


def _group_core_thread(manifest: CampaignManifest, step: StepRecord | None,
                       group: str) -> tuple[str | None, str | None]:
    cpus = group_cpus(manifest, step, group)
    if cpus is None:
        return None, f"no watched group named {group} (--watch-cpus {group}=LIST)"
    return core_thread(cpus, *_target_cores(manifest))


def _intel_protocol(manifest: CampaignManifest) -> str:
    # The script's "https" is HTTP/2 over TLS (its nighthawk_client runs -p http2 on an
    # https:// URI); anything else keeps nhbench's words.
    text = protocol_of(manifest)
    return "https" if text == "http2/tls" else text


def intel_view(manifest: CampaignManifest) -> list[ViewColumn]:
    """The step table's columns in the Intel layout (see the module doc)."""
    report = step_view(manifest, "report")
    by_key = {column.key: column for column in report}

    def renamed(key: str, name: str, **changes: Any) -> ViewColumn:
        return dataclasses.replace(by_key[key], name=name, **changes)

    protocol = _intel_protocol(manifest)

    def cpu_cell(group: str) -> Any:
        return lambda s: s.target_cpu.get(group)

    columns = [
        renamed("index", "No."),
        ViewColumn("target_core_thread", "Core/Thread", False,
                   lambda s: _group_core_thread(manifest, s, CORE_THREAD_GROUP)[0],
                   lambda s: _group_core_thread(manifest, s, CORE_THREAD_GROUP)[0] or "-",
                   None, False),
        ViewColumn("protocol", "Protocol", False, lambda s: protocol, lambda s: protocol,
                   None, False),
        renamed("rps_per_worker", "RPS per worker"),
        renamed("requested_rps", "Requested RPS"),
        renamed("achieved_rps", "Achieved RPS"),
        renamed("p90", "P90 latency"),
        renamed("p99", "P99 latency"),
        renamed("blocked", "Blocked", text=lambda s: "true" if s.blocked else "false"),
        *(ViewColumn(f"target_cpu_{group}", header, True, cpu_cell(group),
                     (lambda cell: lambda s: format_percent(cell(s)))(cpu_cell(group)),
                     None, False)
          for group, header in INTEL_GROUPS),
    ]
    used = {column.key for column in columns}
    return columns + [column for column in report if column.key not in used]


def report_view(manifest: CampaignManifest, table: str | None = None) -> list[ViewColumn]:
    """The columns report.txt and report.html show: the ``report`` view, or the Intel
    layout when the campaign (or `table`) asks for it."""
    if (table or table_layout(manifest)) == "intel":
        return intel_view(manifest)
    return step_view(manifest, "report")


def intel_notes(manifest: CampaignManifest) -> list[str]:
    """Under an Intel-layout table: why a Core/Thread or CPU cell reads "-" for every step
    (a group that is not watched, a topology that is unknown), one line each."""
    notes = []
    for group, header in INTEL_GROUPS:
        if group_cpus(manifest, None, group) is None and not any(
                group in step.target_cpu for step in manifest.steps):
            notes.append(f"{header}: no watched group named {group} "
                         f"(--watch-cpus {group}=LIST)")
    reasons = {_group_core_thread(manifest, step, CORE_THREAD_GROUP)[1]
               for step in manifest.steps} - {None}
    notes += [f"Core/Thread: {reason}" for reason in sorted(r for r in reasons if r)]
    return notes


def watched_cpu_lines(manifest: CampaignManifest) -> list[str]:
    """The watched target groups as the script's header names its pods' CPU sets, with their
    cores and threads: ``ingress: 5,22,77,94 (4 CPUs, 2C4T)``; a group whose steps watched
    several sets (a --watch-pod group whose pod moved) has a line per set, ending ``in
    step 1`` / ``in steps 2-3``."""
    spec = (manifest.target_capture or {}).get("watch_cpus") or {}
    lines = []

    def described(cpus: list[int]) -> str:
        text, reason = core_thread(cpus, *_target_cores(manifest))
        count = len(set(cpus))
        return (f"{format_cpu_list(cpus)} ({count} CPU{'s' * (count != 1)}, "
                f"{text or 'cores unknown: ' + (reason or '')})")

    for name in spec:
        runs = group_cpu_runs(manifest, str(name))
        if not runs:
            lines.append(f"{name}: {described(group_cpus(manifest, None, str(name)) or [])}")
            continue
        # The steps watched other CPUs than the campaign started with (a --watch-pod
        # group's pod moved): each set, a line each, with the steps that watched it.
        lines += [f"{name}: {described(cpus)} in {step_ranges(indices)}"
                  for cpus, indices in runs]
    return lines


def step_ranges(indices: list[int]) -> str:
    """[1, 2, 3, 5] -> "steps 1-3,5"; [2] -> "step 2"."""
    return ("step " if len(indices) == 1 else "steps ") + format_cpu_list(indices)
