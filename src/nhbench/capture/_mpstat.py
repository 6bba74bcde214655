"""mpstat on a host during a step, and parsing its output into per-CPU busy percentages.

The Intel script ran ``mpstat -P ALL 1`` and took ``100 - %idle`` of each watched CPU. We do
the same: ``busy = 100 - %idle``, so steal, irq and softirq time count as busy, which is what
an operator watching a saturated ingress CPU wants to see.

Two output formats are read:

* JSON (``mpstat -o JSON``, sysstat 11 and later). It is what we ask for when the host's
  mpstat accepts it (`probe_json` runs ``mpstat -o JSON`` once, which prints a since-boot
  report immediately).
* Text, for older sysstat. Columns are found by name from each header line (the line with
  ``CPU`` and ``%idle``), so the sets of columns that differ between sysstat versions
  (``%guest`` and ``%gnice`` arrived late) and 12-hour time stamps (``04:23:01 PM``, one
  token more) do not matter.

The command runs with ``LC_ALL=C`` so numbers have decimal points, but the parsers also
accept decimal commas (``12,50``), which mpstat prints under locales such as de_DE, in case
a recorded file from such a machine is parsed later.

The per-CPU value is the mean over the interval samples. The ``Average:`` lines of the text
format (translated under other locales) are ignored: they average the same intervals, and
skipping them keeps the text and JSON paths identical (the JSON format has no average at all).

The parse functions are pure: they take the text and return data, and are tested on output
from real machines (tests/data/mpstat/).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ._models import CpuGroupLoad

__all__ = [
    "MpstatSamples",
    "group_loads",
    "mpstat_command",
    "parse_mpstat",
    "parse_mpstat_json",
    "parse_mpstat_text",
]


@dataclass
class MpstatSamples:
    """Busy percentages (100 - %idle) per CPU, one value per interval sample.

    `per_cpu` maps a CPU number to its samples in time order; the ``all`` row mpstat prints
    is kept apart in `overall`.
    """

    per_cpu: dict[int, list[float]] = field(default_factory=dict)
    overall: list[float] = field(default_factory=list)

    @property
    def samples(self) -> int:
        """The number of intervals seen (the longest series: a CPU that went offline in the
        middle of a step has fewer)."""
        lengths = [len(values) for values in self.per_cpu.values()]
        return max([len(self.overall), *lengths], default=0)

    def mean_busy(self) -> dict[int, float]:
        """Per-CPU mean busy % over the samples, rounded to 0.01 like mpstat's own output."""
        return {
            cpu: round(sum(values) / len(values), 2)
            for cpu, values in sorted(self.per_cpu.items())
            if values
        }

    def add(self, cpu: str, idle: float) -> None:
        # mpstat prints two decimals; rounding here keeps float noise (98.02 -> 1.9800000000000040)
        # out of the per-sample values.
        busy = round(max(0.0, min(100.0, 100.0 - idle)), 2)
        if cpu == "all":
            self.overall.append(busy)
        else:
            self.per_cpu.setdefault(int(cpu), []).append(busy)


def mpstat_command(output_path: str, *, json_format: bool, interval: int = 1) -> str:
    """The shell command that samples every CPU each `interval` seconds into `output_path`
    until it is interrupted. `exec` replaces the shell, so the SIGINT that stops it reaches
    mpstat itself, which then finishes its output (closing the JSON document)."""
    fmt = " -o JSON" if json_format else ""
    return f"LC_ALL=C exec mpstat -P ALL{fmt} {int(interval)} > {output_path}"


def _number(token: str) -> float:
    # A decimal comma ("12,50") is how mpstat prints numbers under e.g. de_DE.
    return float(token.replace(",", "."))


def parse_mpstat_json(text: str) -> MpstatSamples:
    """Parse ``mpstat -P ALL -o JSON`` output.

    A complete document is read with `json`; a truncated one (mpstat killed before it could
    close the document) is read object by object: every per-CPU record is a flat
    ``{"cpu": "3", ..., "idle": 97.00}`` object on its own, so a regular expression finds the
    complete ones and the cut-off tail is dropped. Raises ValueError when there is no CPU
    record at all.
    """
    samples = MpstatSamples()
    try:
        document = json.loads(text)
    except json.JSONDecodeError:
        document = None
    if isinstance(document, dict):
        for host in document.get("sysstat", {}).get("hosts", []):
            for statistic in host.get("statistics", []):
                for record in statistic.get("cpu-load", []):
                    samples.add(str(record["cpu"]), _idle_of(record))
    else:
        for match in re.finditer(r'\{\s*"cpu"\s*:\s*"[^"]*"[^{}]*\}', text):
            try:
                record = json.loads(match.group(0))
            except json.JSONDecodeError:
                # Only a locale's decimal comma can break a complete flat object; rewrite
                # "idle": 97,00 into 97.00 and try once more.
                fixed = re.sub(r"(\d),(\d)", r"\1.\2", match.group(0))
                record = json.loads(fixed)
            samples.add(str(record["cpu"]), _idle_of(record))
    if not samples.per_cpu and not samples.overall:
        raise ValueError("no per-CPU records in mpstat JSON output")
    return samples


def _idle_of(record: Mapping[str, object]) -> float:
    value = record.get("idle")
    if value is None:
        raise ValueError(f"mpstat JSON record without 'idle': {dict(record)!r}")
    return _number(str(value))


_HEADER_CPU = "CPU"
_HEADER_IDLE = "%idle"
# Interval lines start with a time of day ("16:23:01", "04:23:01 PM"). Summary lines start
# with a word that mpstat translates ("Average:", "Durchschn.:", "Moyenne :"), so the time
# stamp, not the word, is what tells the two apart.
_TIME = re.compile(r"^\d{1,2}\D\d{2}\D\d{2}$")


def parse_mpstat_text(text: str) -> MpstatSamples:
    """Parse the text output of ``mpstat -P ALL INTERVAL`` (any sysstat version).

    Each header line (containing ``CPU`` and ``%idle``) gives the positions of the CPU and
    %idle columns counted from the CPU column; the data lines below it are read with the same
    positions. Lines that do not start with a time of day (the banner, blank lines and the
    summary lines, ``Average:`` in any language) are skipped. Raises ValueError when no data
    line is found.
    """
    samples = MpstatSamples()
    cpu_col: int | None = None
    idle_offset: int | None = None
    for line in text.splitlines():
        tokens = line.split()
        if not tokens or not _TIME.match(tokens[0]):
            continue
        if _HEADER_CPU in tokens and _HEADER_IDLE in tokens:
            cpu_col = tokens.index(_HEADER_CPU)
            idle_offset = tokens.index(_HEADER_IDLE) - cpu_col
            continue
        if cpu_col is None or idle_offset is None:
            continue
        if len(tokens) <= cpu_col + idle_offset:
            continue
        cpu = tokens[cpu_col]
        if cpu != "all" and not cpu.isdigit():
            continue
        try:
            idle = _number(tokens[cpu_col + idle_offset])
        except ValueError:
            continue
        samples.add(cpu, idle)
    if not samples.per_cpu and not samples.overall:
        raise ValueError("no per-CPU lines in mpstat text output")
    return samples


def parse_mpstat(text: str) -> MpstatSamples:
    """Parse mpstat output in either format (JSON when it starts with ``{``)."""
    if text.lstrip().startswith("{"):
        return parse_mpstat_json(text)
    return parse_mpstat_text(text)


def group_loads(
    cpu_busy: Mapping[int, float], groups: Mapping[str, Iterable[int]]
) -> tuple[list[CpuGroupLoad], dict[str, list[int]]]:
    """Mean busy % of each named group over the CPUs mpstat reported.

    Returns the loads (in the order of `groups`) and, per group, the CPUs mpstat did not
    report (a CPU number beyond the host's count, or an offline CPU). A group none of whose
    CPUs was reported gets ``busy_percent=None`` rather than a made-up 0.
    """
    loads: list[CpuGroupLoad] = []
    missing: dict[str, list[int]] = {}
    for name, cpus in groups.items():
        cpu_list = list(cpus)
        present = [cpu_busy[cpu] for cpu in cpu_list if cpu in cpu_busy]
        absent = [cpu for cpu in cpu_list if cpu not in cpu_busy]
        if absent:
            missing[name] = absent
        busy = round(sum(present) / len(present), 2) if present else None
        loads.append(CpuGroupLoad(name=name, cpus=cpu_list, busy_percent=busy))
    return loads, missing
