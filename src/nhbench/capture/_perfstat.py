"""perf stat on a host during a step: the command, the ``-x,`` output's parser, and the
counts per watched CPU group with IPC.

One ``perf stat`` runs per step, for the whole step, on the union of the watched groups'
CPUs with ``-A`` (one line per CPU and event), so that groups may overlap and each group's
count is the sum over its own CPUs; without watched groups it counts on every CPU (``-a``)
as the group ``all``. Like ``perf record`` it runs until SIGINT, on which perf writes its
counts to the ``-o`` file (kept as ``perf-stat.csv`` in the step's ``target/`` directory).

The CSV format (perf-stat(1), "CSV FORMAT"): an optional interval time stamp (``-I``), an
optional CPU, core or socket identifier, an optional number of CPUs aggregated, then the
counter value, its unit, the event name, the counter's run time, the percentage of the time
it ran, an optional variance (``-r``), an optional metric value and its unit; lines with
only a metric have every earlier field empty. perf has changed this layout before (the
``summary`` column of 5.13, the fields of older versions), so `parse_perf_stat` finds the
counter value by shape rather than by position: the first field that is a number or a
``<not supported>``/``<not counted>`` marker, followed by a unit that is not a number and
an event name (with ``--per-socket`` the CPU count, a number too, comes before the value).

A count that perf did not make is never 0: ``<not supported>`` (no such counter here: most
virtual machines expose no PMU, so cycles and instructions are not supported while
software events such as context-switches count) and ``<not counted>`` become
`PerfCount.unknown`, and IPC is unknown whenever cycles or instructions is. When there are
more hardware events than counters, perf multiplexes them and scales each count by the
share of time it ran: `PerfCount.running_percent` keeps that share.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..options import format_cpu_list
from ._models import PerfCount, PerfStatGroup

if TYPE_CHECKING:
    from ..hosts import Host

__all__ = [
    "ALL_CPUS_GROUP",
    "PERF_STAT_EVENTS",
    "PerfStatLine",
    "check_perf_events",
    "format_count",
    "group_counts",
    "parse_perf_stat",
    "perf_stat_command",
    "perf_stat_events",
]

#: What every perf stat capture counts; --perf-event adds to these.
PERF_STAT_EVENTS = ("cycles", "instructions", "cache-misses", "branch-misses",
                    "context-switches")

#: The group perf stat counts when no CPU group is watched.
ALL_CPUS_GROUP = "all"

_CPU_ID = re.compile(r"^CPU(\d+)$")
# An event printed by PMU, as perf does on hybrid CPUs for an event both PMUs have:
# "cycles" is counted as "cpu_core/cycles/" and "cpu_atom/cycles/".
_PMU_EVENT = re.compile(r"^[A-Za-z0-9_.-]+/(?P<event>[^/]+)/$")


def perf_stat_events(extra: Iterable[str] = ()) -> list[str]:
    """The default events, then `extra` in order, each once."""
    events = list(PERF_STAT_EVENTS)
    events += [event for event in dict.fromkeys(extra) if event not in events]
    return events


def perf_stat_command(output_path: str, *, events: Sequence[str],
                      cpus: Sequence[int] | None) -> str:
    """``perf stat`` of `events` on `cpus`, one line per CPU (all CPUs aggregated when None),
    into `output_path` until interrupted. `exec` makes the SIGINT that stops it reach perf;
    its own messages go to ``output_path.err``."""
    where = "-a" if not cpus else "-A -C " + ",".join(str(int(cpu)) for cpu in sorted(set(cpus)))
    selectors = " ".join(f"-e {shlex.quote(event)}" for event in events)
    return f"exec perf stat -x, {selectors} {where} -o {output_path} 2> {output_path}.err"


@dataclass(frozen=True)
class PerfStatLine:
    """One counter line of ``perf stat -x,`` output."""

    event: str
    value: float | None
    unit: str
    running_percent: float | None
    unknown: str | None = None
    cpu: int | None = None  # None: aggregated over the CPUs perf counted on
    interval: float | None = None  # the -I time stamp, when there is one


def _number(text: str) -> float | None:
    # perf prints finite decimals; "nan" or "inf" is no count, whatever wrote it.
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _is_value(text: str) -> bool:
    return _number(text) is not None or (text.startswith("<") and text.endswith(">"))


def _looks_like_event(text: str) -> bool:
    return bool(text) and _number(text) is None and not text.startswith("<")


def _parse_line(fields: list[str]) -> PerfStatLine | None:
    # The counter value is the first field that is a value with an event name two fields
    # on; the fields before it are the optional time stamp, CPU id and CPU count.
    for at in range(min(4, len(fields) - 2)):
        value, unit, event = (field.strip() for field in fields[at:at + 3])
        if not (_is_value(value) and _number(unit) is None and _looks_like_event(event)):
            continue
        prefix = [field.strip() for field in fields[:at]]
        cpu = next((int(match[1]) for field in prefix if (match := _CPU_ID.match(field))),
                   None)
        interval = _number(prefix[0]) if prefix and "." in prefix[0] else None
        running = _number(fields[at + 4].strip()) if len(fields) > at + 4 else None
        number = _number(value)
        unknown = None if number is not None else value.strip("<>").strip()
        return PerfStatLine(event=event, value=number, unit=unit,
                            running_percent=running, unknown=unknown, cpu=cpu,
                            interval=interval)
    return None


def parse_perf_stat(text: str, separator: str = ",") -> list[PerfStatLine]:
    """The counter lines of ``perf stat -x SEP`` output; comments (``# started on ...``),
    blank lines and metric-only lines are skipped. Raises ValueError on a line that is
    none of these, naming it."""
    lines: list[PerfStatLine] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split(separator)
        parsed = _parse_line(fields)
        if parsed is not None:
            lines.append(parsed)
            continue
        if not any(field.strip() for field in fields[:3]):
            continue  # "Additional metrics ... with all earlier fields being empty"
        raise ValueError(f"perf stat output line {number} is not a counter line: {raw!r}")
    return lines


def _event_of(printed: str, wanted: Sequence[str]) -> str | None:
    if printed in wanted:
        return printed
    match = _PMU_EVENT.match(printed)
    if match and match["event"] in wanted:
        return match["event"]
    return None


def _sum(lines: list[PerfStatLine], cpus: Sequence[int] | None) -> PerfCount:
    """One event's count over `cpus` (None: the aggregated lines) from its lines."""
    if cpus is None:
        chosen = [line for line in lines if line.cpu is None] or lines
        per_cpu: dict[int | None, list[PerfStatLine]] = {None: chosen}
    else:
        per_cpu = {cpu: [line for line in lines if line.cpu == cpu] for cpu in cpus}
    total = 0.0
    unit = ""
    running: float | None = None
    missing: dict[str, list[int]] = {}
    for cpu, found in per_cpu.items():
        # Hybrid CPUs print one line per PMU: a CPU is counted when any of them counted.
        counted = [line for line in found if line.value is not None]
        if not counted:
            reason = "; ".join(sorted({line.unknown or "not counted" for line in found}))
            missing.setdefault(reason or "not in perf's output", []).append(
                -1 if cpu is None else cpu)
            continue
        for line in counted:
            assert line.value is not None
            total += line.value
            unit = unit or line.unit
            if line.running_percent is not None:
                running = (line.running_percent if running is None
                           else min(running, line.running_percent))
    if missing:
        # The whole group unknown for one reason (no PMU on this host) is said as such;
        # the CPUs are named only when the others did count.
        unknown = sorted(missing.items())
        if len(unknown) == 1 and len(unknown[0][1]) == len(per_cpu):
            return PerfCount(unknown=unknown[0][0])
        return PerfCount(unknown="; ".join(
            f"{reason} on CPU{'s' if len(where) > 1 else ''} {format_cpu_list(where)}"
            for reason, where in unknown))
    return PerfCount(value=total, unit=unit, running_percent=running)


def group_counts(lines: Sequence[PerfStatLine], events: Sequence[str],
                 groups: Mapping[str, Sequence[int]]) -> list[PerfStatGroup]:
    """Each group's count of each event, summed over its CPUs, and its IPC. Without
    groups, the one group `ALL_CPUS_GROUP` of the aggregated (``-a``) counts."""
    by_event: dict[str, list[PerfStatLine]] = {event: [] for event in events}
    for line in lines:
        event = _event_of(line.event, events)
        if event is not None:
            by_event[event].append(line)
    wanted: dict[str, list[int] | None] = (
        {name: sorted(set(cpus)) for name, cpus in groups.items()} if groups
        else {ALL_CPUS_GROUP: None})
    result = []
    for name, cpus in wanted.items():
        counts = {event: _sum(by_event[event], cpus) for event in events}
        group = PerfStatGroup(name=name, cpus=cpus, counts=counts)
        _derive_ipc(group)
        result.append(group)
    return result


def _derive_ipc(group: PerfStatGroup) -> None:
    cycles, instructions = group.counts.get("cycles"), group.counts.get("instructions")
    if cycles is None or instructions is None:
        group.ipc_unknown = "needs the cycles and instructions events"
    elif cycles.unknown is not None or instructions.unknown is not None:
        if cycles.unknown == instructions.unknown:
            group.ipc_unknown = f"cycles and instructions {cycles.unknown}"
        else:
            group.ipc_unknown = ", ".join(
                f"{name} {count.unknown}" for name, count in
                (("cycles", cycles), ("instructions", instructions)) if count.unknown)
    elif not cycles.value or instructions.value is None:
        group.ipc_unknown = "no cycles counted"
    else:
        group.ipc = instructions.value / cycles.value


def check_perf_events(host: Host, events: Sequence[str], *, sudo: bool) -> dict[str, str]:
    """The events perf on `host` rejects (an unknown name, a syntax error, a PMU it lacks),
    each with perf's first line about it. An event perf knows but cannot count here
    (``<not supported>``) is not rejected: its column says so."""
    rejected: dict[str, str] = {}
    for event in events:
        result = host.run(f"perf stat -x, -e {shlex.quote(event)} -- true", sudo=sudo,
                          timeout=30)
        if result.ok:
            continue
        lines = [line.strip() for line in result.stderr.splitlines() if line.strip()]
        message = next((line for line in lines if "event" in line.lower()),
                       lines[0] if lines else f"exit status {result.exit_status}")
        rejected[event] = message
    return rejected


_SI = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def format_count(count: PerfCount | None) -> str:
    """A count for a table: three significant digits with an SI prefix (``1.23 G``), its
    unit, the share of time it ran when perf multiplexed it (``~812 M (50%)``), or
    ``unknown (why)``."""
    if count is None:
        return "-"
    if count.value is None:
        return f"unknown ({count.unknown or 'not counted'})"
    value = count.value
    unit = count.unit
    if unit == "msec":
        value, unit = value / 1000.0, "CPU-s"
    text = f"{value:.3g}"
    for scale, prefix in _SI:
        if abs(value) >= scale:
            text = f"{value / scale:.3g} {prefix}"
            break
    if unit:
        text += f" {unit}"
    if count.running_percent is not None and count.running_percent < 99.995:
        text = f"~{text} ({count.running_percent:.3g}%)"
    return text
