"""What to capture on a host during a sweep step, and what came of it (data only)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["CaptureResult", "CaptureSpec", "CpuGroupLoad"]


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
    skipped: dict[str, str] = Field(default_factory=dict)
