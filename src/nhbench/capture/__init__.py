"""Captures taken on a host while a sweep step runs: mpstat per-CPU load and perf flame
graphs.

`StepCapture` runs them for one step on any `Host`; `check_tools` and `install_tools` deal
with missing mpstat/perf; the parse, fold and render functions are pure and usable on saved
files (``render_flamegraph(parse_folded(Path("perf.folded").read_text()))``).
"""

from ._flamegraph import render_flamegraph
from ._models import CaptureResult, CaptureSpec, CpuGroupLoad
from ._mpstat import (
    MpstatSamples,
    group_loads,
    parse_mpstat,
    parse_mpstat_json,
    parse_mpstat_text,
)
from ._perf import fold_perf_script, format_folded, parse_folded
from ._step import StepCapture, check_tools, install_tools

__all__ = [
    "CaptureResult",
    "CaptureSpec",
    "CpuGroupLoad",
    "MpstatSamples",
    "StepCapture",
    "check_tools",
    "fold_perf_script",
    "format_folded",
    "group_loads",
    "install_tools",
    "parse_folded",
    "parse_mpstat",
    "parse_mpstat_json",
    "parse_mpstat_text",
    "render_flamegraph",
]
