"""What to capture on a host during a sweep step, and what came of it (data only)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["CaptureResult", "CaptureSpec", "CpuGroupLoad", "PerfCount", "PerfStat",
           "PerfStatGroup"]


class CaptureSpec(BaseModel):
    """The captures wanted on one host during each step."""

    model_config = ConfigDict(extra="forbid")

    mpstat: bool = Field(default=True, description="Per-CPU utilization with mpstat.")
    watch_cpus: dict[str, list[int]] = Field(
        default_factory=dict,
        description="Named CPU groups whose load the report shows, e.g. {'ingress': [5, 22]}.",
    )
    perf: bool = Field(default=False, description="perf record + flame graph.")
    perf_cpus: list[int] | None = Field(
        default=None, description="CPUs perf records on (None: all CPUs)."
    )
    perf_frequency: int = Field(default=99, ge=1, description="perf sampling frequency (Hz).")
    perf_stat: bool = Field(
        default=False,
        description="perf stat counters on each watched CPU group (all CPUs without groups).",
    )
    perf_events: list[str] = Field(
        default_factory=list,
        description="perf stat events beyond the default ones (nhbench.capture "
        "PERF_STAT_EVENTS).",
    )
    install_tools: bool = Field(
        default=False,
        description="Install missing sysstat/perf with the host's package manager.",
    )


class CpuGroupLoad(BaseModel):
    """Mean busy percentage (100 - %idle) of a named group of CPUs over a step."""

    model_config = ConfigDict(extra="forbid")

    name: str
    cpus: list[int]
    busy_percent: float | None = Field(
        default=None, description="Mean over the group's CPUs and the step's samples."
    )


class PerfCount(BaseModel):
    """One perf stat event summed over a group's CPUs for a step.

    `value` is None exactly when `unknown` says why ("not supported": the host has no
    counter for it, as on most virtual machines; "not counted": perf could not schedule it);
    a count perf did not report is never written as 0.
    """

    model_config = ConfigDict(extra="forbid")

    value: float | None = None
    unit: str = Field(default="", description="perf's unit ('msec' for task-clock), or ''.")
    running_percent: float | None = Field(
        default=None,
        description="Lowest share of the step the counter ran on any of the group's CPUs; "
        "below 100 perf multiplexed it and scaled the count up (an estimate).",
    )
    unknown: str | None = None


class PerfStatGroup(BaseModel):
    """perf stat's counts for one watched CPU group (or 'all' CPUs) over a step."""

    model_config = ConfigDict(extra="forbid")

    name: str
    cpus: list[int] | None = Field(default=None, description="None: every CPU (perf -a).")
    counts: dict[str, PerfCount] = Field(default_factory=dict, description="By event name.")
    ipc: float | None = Field(default=None, description="instructions / cycles.")
    ipc_unknown: str | None = Field(default=None, description="Why `ipc` is None.")


class PerfStat(BaseModel):
    """The perf stat capture of one step: events, per-group counts, the raw output's file."""

    model_config = ConfigDict(extra="forbid")

    events: list[str]
    groups: list[PerfStatGroup] = Field(default_factory=list)
    file: str | None = Field(
        default=None, description="perf stat -x, output as perf wrote it (perf-stat.csv).")


class CaptureResult(BaseModel):
    """The outcome of the captures on one host for one step.

    File names are relative to the step's directory, so a campaign directory can be moved.
    `skipped` maps a capture ("mpstat", "perf", "flamegraph") to the reason it was not taken;
    a skipped capture is never a failed step.
    """

    model_config = ConfigDict(extra="forbid")

    host: str
    groups: list[CpuGroupLoad] = Field(default_factory=list)
    cpu_busy: dict[int, float] = Field(
        default_factory=dict, description="Per-CPU mean busy % over the step."
    )
    samples: int = Field(default=0, description="mpstat intervals averaged.")
    mpstat_file: str | None = None
    perf_event: str | None = Field(
        default=None, description="Event perf sampled: 'cycles', or 'cpu-clock' as fallback."
    )
    folded_file: str | None = None
    flamegraph_file: str | None = None
    perf_stat: PerfStat | None = None
    skipped: dict[str, str] = Field(default_factory=dict)
