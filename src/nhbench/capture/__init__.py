"""Captures taken on a host while a sweep step runs: mpstat per-CPU load, perf flame
graphs and perf stat counters.

`StepCapture` runs them for one step on any `Host`; `check_tools` and `install_tools` deal
with missing mpstat/perf; the parse, fold and render functions are pure and usable on saved
files (``render_flamegraph(parse_folded(Path("perf.folded").read_text()))``).
"""

from ._flamegraph import render_flamegraph
from ._models import (
    CaptureResult,
    CaptureSpec,
    CpuGroupLoad,
    PerfCount,
    PerfStat,
    PerfStatGroup,
)
from ._mpstat import (
    MpstatSamples,
    group_loads,
    parse_mpstat,
    parse_mpstat_json,
    parse_mpstat_text,
)
from ._perf import fold_perf_script, format_folded, parse_folded
from ._perfstat import (
    ALL_CPUS_GROUP,
    PERF_STAT_EVENTS,
    PerfStatLine,
    format_count,
    group_counts,
    parse_perf_stat,
)
from ._step import StepCapture, check_tools, install_tools, refused_perf_events

__all__ = [
    "ALL_CPUS_GROUP",
    "PERF_STAT_EVENTS",
    "CaptureResult",
    "CaptureSpec",
    "CpuGroupLoad",
    "MpstatSamples",
    "PerfCount",
    "PerfStat",
    "PerfStatGroup",
    "PerfStatLine",
    "StepCapture",
    "check_tools",
    "fold_perf_script",
    "format_count",
    "format_folded",
    "group_counts",
    "group_loads",
    "install_tools",
    "parse_folded",
    "parse_mpstat",
    "parse_mpstat_json",
    "parse_mpstat_text",
    "parse_perf_stat",
    "refused_perf_events",
    "render_flamegraph",
]
