"""perf on a host during a step: probing, the record command, and folding the stacks.

The Intel script ran ``perf record -C CPUS -F 99 -g``, then Brendan Gregg's
``stackcollapse-perf.pl`` and ``flamegraph.pl`` from a FlameGraph checkout. nhbench records
the same way and folds ``perf script`` output itself (`fold_perf_script`), so nothing but
``perf`` is needed on the host.

Privileges. Recording on CPUs (``-C``) or system-wide (``-a``) is a CPU-wide event, which an
unprivileged user may open only when ``kernel.perf_event_paranoid`` is 0 or lower (1 already
forbids CPU events; see the kernel's perf_event_paranoid documentation). So perf runs as root
(`Host.run(..., sudo=True)`, which uses ``sudo -n`` and never prompts) when that works, else
unprivileged when the paranoid level allows it, else the capture is skipped with a reason
saying which of the two to fix.

Event. Hardware ``cycles`` is what perf samples by default, but virtual machines often expose
no PMU (this project's 2-CPU development VM has none: ``perf stat -e cycles true`` prints
``<not supported>``). `probe_event` asks ``perf stat`` whether ``cycles`` counts and otherwise
picks the software event ``cpu-clock``; after recording, ``perf evlist`` tells which event
really was recorded (perf itself may fall back silently), and that is what
`CaptureResult.perf_event` reports.

Folding (replaces stackcollapse-perf.pl, with its default options plus kernel annotation).
``perf script`` prints, per sample, a header line and then one line per frame, leaf first::

    nhb-burner  9601 [001] 10434.736035:   10101010 cpu-clock:
            ff4b5 _PyEval_EvalFrameDefault+0x4945 (/usr/lib/libpython3.11.so.1.0)
     ffffffff821f2c2b pv_native_safe_halt+0xb ([kernel.kallsyms])

Each sample becomes one stack ``comm;outermost;...;leaf`` (the process name first, then
frames root first) and identical stacks are counted. Per frame: the ``+0x..`` offset is
dropped; an ``[unknown]`` symbol becomes the DSO's base name in brackets (``[libc.so.6]``)
when the DSO is known; kernel frames (an address in the upper half of the address space, or
a ``[kernel.kallsyms]``/vmlinux DSO) get the suffix ``_[k]`` that flamegraph.pl also uses
to colour them; ``;`` inside a name becomes ``:`` because it separates frames. The folded
file has one ``stack count`` line per distinct stack, sorted by stack, so it is
deterministic for a given input.
"""

from __future__ import annotations

import os
import re
import shlex
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # Only for annotations: capture works with any object that has the Host methods.
    from ..hosts import Host

__all__ = [
    "PerfProbe",
    "fold_perf_script",
    "format_folded",
    "parse_evlist",
    "parse_folded",
    "perf_record_command",
    "perf_script_command",
    "probe_event",
    "probe_perf",
]

HARDWARE_EVENT = "cycles"
SOFTWARE_EVENT = "cpu-clock"


@dataclass(frozen=True)
class PerfProbe:
    """What `probe_perf` found: whether perf can record CPU-wide on the host and how."""

    skip_reason: str | None
    sudo: bool = True

    @property
    def usable(self) -> bool:
        return self.skip_reason is None


def _first_line(text: str, default: str = "no output") -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else default


def probe_perf(host: Host) -> PerfProbe:
    """Find out whether perf is installed and may record CPU-wide events on `host`.

    Never raises for a missing tool or missing rights: the answer is a skip reason.
    """
    found = host.run("command -v perf", timeout=30)
    if not found.ok or not found.stdout.strip():
        return PerfProbe("perf is not installed (install linux-perf / linux-tools, or use "
                         "--install-tools)")
    # Ubuntu's /usr/bin/perf is a wrapper that fails when no perf matches the running
    # kernel, so being on PATH is not enough: it must run.
    version = host.run("perf --version", timeout=30)
    if not version.ok:
        return PerfProbe(f"perf does not run: {_first_line(version.stderr + version.stdout)}")
    as_root = host.run("true", sudo=True, timeout=30)
    sudo = as_root.ok
    if not sudo:
        paranoid = host.run("cat /proc/sys/kernel/perf_event_paranoid", timeout=30)
        level = paranoid.stdout.strip() if paranoid.ok else "unreadable"
        try:
            allowed = int(level) <= 0
        except ValueError:
            allowed = False
        if not allowed:
            return PerfProbe(
                "perf needs root for CPU-wide recording: sudo -n failed "
                f"({_first_line(as_root.stderr)}) and kernel.perf_event_paranoid is {level} "
                "(an unprivileged user needs 0 or lower)",
                sudo=False,
            )
    # The software event works wherever perf_event_open works at all, so it tells whether
    # this host (a container without CAP_PERFMON, a seccomp profile) can profile.
    check = host.run(f"perf stat -x, -e {SOFTWARE_EVENT} -- true", sudo=sudo, timeout=30)
    if not check.ok or "<not supported>" in check.stderr:
        return PerfProbe(
            f"perf cannot open events on this host: {_first_line(check.stderr + check.stdout)}",
            sudo=sudo,
        )
    return PerfProbe(None, sudo=sudo)


def probe_event(host: Host, *, sudo: bool) -> str:
    """``cycles`` when the host counts hardware cycles, else ``cpu-clock``.

    ``perf stat -x,`` prints CSV on stderr whose first field is the count, or
    ``<not supported>`` / ``<not counted>`` when the PMU does not provide the event.
    """
    result = host.run(f"perf stat -x, -e {HARDWARE_EVENT} -- true", sudo=sudo, timeout=30)
    for line in result.stderr.splitlines():
        fields = line.split(",")
        if len(fields) >= 3 and fields[2].split(":")[0] == HARDWARE_EVENT:
            value = fields[0].strip()
            if result.ok and value and not value.startswith("<"):
                return HARDWARE_EVENT
    return SOFTWARE_EVENT


def perf_record_command(
    output_path: str, *, event: str, frequency: int, cpus: Sequence[int] | None
) -> str:
    """``perf record`` of call graphs on `cpus` (all CPUs when None) into `output_path`,
    until interrupted. `exec` makes the SIGINT that stops it reach perf, which then writes
    the file's header and exits; its own messages go to ``output_path.err``."""
    where = "-a" if not cpus else "-C " + ",".join(str(int(cpu)) for cpu in cpus)
    return (
        f"exec perf record -e {shlex.quote(event)} -F {int(frequency)} -g {where} "
        f"-o {output_path} 2> {output_path}.err"
    )


def perf_script_command(data_path: str, output_path: str) -> str:
    """``perf script`` of a recorded file into a text file on the host."""
    return f"perf script -i {data_path} > {output_path} 2> {output_path}.err"


def parse_evlist(text: str) -> str | None:
    """The event a perf.data file recorded, from ``perf evlist`` output, without modifiers
    (``cpu-clock:ppp`` -> ``cpu-clock``). perf adds a ``dummy`` event of its own, which is
    skipped. None when there is no event line."""
    for line in text.splitlines():
        name = line.strip().split(":")[0].strip()
        if name and name != "dummy" and not name.startswith("#"):
            return name
    return None


# "comm pid[/tid] [cpu] time: period event:" — comm may contain spaces, so it is the
# shortest prefix followed by a number (stackcollapse-perf.pl uses the same rule).
_SAMPLE_HEADER = re.compile(r"^(?P<comm>\S.*?)\s+(?P<pid>\d+)(?:/(?P<tid>\d+))?\s+")
# "  addr symbol+0xoff (dso)" — the symbol may contain spaces and parentheses (C++), the DSO
# is the last parenthesised group.
_FRAME = re.compile(r"^\s+(?P<addr>[0-9a-fA-F]+)\s+(?P<sym>.*?)\s*\((?P<dso>[^()]*)\)\s*$")
_OFFSET = re.compile(r"\+0x[0-9a-fA-F]+$")
_KERNEL_ADDRESS = 0xFFFF800000000000


def _frame_name(addr: str, sym: str, dso: str) -> str:
    sym = _OFFSET.sub("", sym.strip())
    if not sym or sym == "[unknown]":
        base = os.path.basename(dso) if dso and dso != "[unknown]" else ""
        sym = f"[{base.strip('[]')}]" if base else "[unknown]"
    try:
        kernel = int(addr, 16) >= _KERNEL_ADDRESS
    except ValueError:
        kernel = False
    if kernel or dso == "[kernel.kallsyms]" or "vmlinux" in dso:
        sym += "_[k]"
    return " ".join(sym.replace(";", ":").split())


def fold_perf_script(lines: Iterable[str]) -> dict[str, int]:
    """Fold ``perf script`` output (lines, e.g. an open file) into ``{stack: samples}``.

    See the module docstring for the rules. Lines that are neither a sample header nor a
    frame (perf's own warnings, a trailing partial sample) are ignored.
    """
    counts: Counter[str] = Counter()
    comm: str | None = None
    frames: list[str] = []

    def flush() -> None:
        if comm is not None:
            counts[";".join([comm, *reversed(frames)])] += 1

    for raw in lines:
        line = raw.rstrip("\n")
        if not line.strip():
            flush()
            comm, frames = None, []
            continue
        if line[0].isspace():
            if comm is None:
                continue
            match = _FRAME.match(line)
            if match:
                frames.append(_frame_name(match["addr"], match["sym"], match["dso"]))
            continue
        # A header line: a new sample starts (the previous one ends even without the blank
        # separator, which perf omits for samples without a call graph).
        flush()
        frames = []
        header = _SAMPLE_HEADER.match(line)
        comm = " ".join(header["comm"].replace(";", ":").split()) if header else None
    flush()
    return dict(counts)


def format_folded(counts: Mapping[str, int]) -> str:
    """The folded text: ``stack count`` lines sorted by stack (flamegraph.pl's input)."""
    return "".join(f"{stack} {count}\n" for stack, count in sorted(counts.items()) if count > 0)


def parse_folded(text: str) -> dict[str, int]:
    """Read folded stacks back. The count is the last space-separated field (frame names
    may contain spaces); repeated stacks are added up; malformed lines raise ValueError."""
    counts: Counter[str] = Counter()
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        stack, _, count = line.rstrip().rpartition(" ")
        if not stack or not count.isdigit():
            raise ValueError(f"folded stacks line {number} is not 'stack count': {line!r}")
        counts[stack] += int(count)
    return dict(counts)
