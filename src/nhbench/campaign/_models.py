"""The campaign's data: the plan, one record per finished step, and the manifest.

A campaign directory looks like this (all JSON written atomically)::

    DIR/manifest.json                 CampaignManifest: plan, options, facts, steps so far
    DIR/steps/001-rps100/result.json  the step's full Result (Nighthawk-shaped JSON)
    DIR/steps/001-rps100/step.json    the StepRecord (also copied into the manifest)
    DIR/steps/001-rps100/target/...   captures from the target host (mpstat, perf, SVG)
    DIR/steps/001-rps100/loadgen/...  captures from the load generator
    DIR/steps/001-rps100/scrape/...   the target's metrics before and after (--scrape)
    DIR/report.txt, results.csv, report.html

Every model round-trips through JSON (``model_dump_json`` / ``model_validate_json``), which
is what `load_campaign` and ``nhbench report DIR`` rely on.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .._names import error_total
from ..capture import CaptureResult
from ..hosts import MachineFacts

# A check is the outcome of a stop rule, defined with the rule grammar; a step keeps its checks.
from ..options import SloCheck
from ..scrape import StepScrape

__all__ = [
    "CAMPAIGN_FORMAT",
    "AdaptBound",
    "AdaptConfirmation",
    "AdaptState",
    "CampaignKind",
    "CampaignManifest",
    "CampaignStatus",
    "SloCheck",
    "StepRecord",
    "SweepPlan",
]

CAMPAIGN_FORMAT: Literal["nhbench-campaign/1"] = "nhbench-campaign/1"

CampaignStatus = Literal["running", "completed", "stopped", "interrupted", "failed"]

#: What walks the steps: a sweep's plan, or an adaptive search (``nhbench adapt``).
CampaignKind = Literal["sweep", "adapt"]

#: Why an adaptive search ended (docs/adapt.md "Output").
AdaptReason = Literal["converged", "max-rps passed", "min-rps failed", "step limit"]

#: The headline latency percentiles every step records, as keys of `StepRecord.latency`.
LATENCY_KEYS = ("p50", "p90", "p99", "p99.9")


class SweepPlan(BaseModel):
    """The offered-load steps and the rules that end a sweep early.

    Rates follow Nighthawk: `steps` are per worker; a step's total requested rate is the
    per-worker rate times the worker count.
    """

    model_config = ConfigDict(extra="forbid")

    steps: list[float] = Field(description="Per-worker requests per second, in order.")
    duration: float = Field(description="Seconds per step.")
    cooldown: float = Field(default=0.0, description="Seconds of idle between steps.")
    stop_on_blocked: bool = False
    stop_on_slo: list[str] = Field(
        default_factory=list,
        description="Expressions such as 'p99<5ms', 'error_rate<0.1%', "
        "'achieved/requested>0.95'.",
    )
    extend: bool = Field(
        default=False,
        description="Keep adding steps of `step` beyond the last until a stop rule fires "
        "(RPS-SLA mode).",
    )
    step: float | None = Field(default=None, description="Step size used when extending.")
    extend_limit: float | None = Field(
        default=None, description="Never extend beyond this per-worker rate."
    )


class StepRecord(BaseModel):
    """One finished step, as the report table and the DataFrame show it."""

    model_config = ConfigDict(extra="forbid")

    index: int = Field(description="1-based step number (the report's 'No.').")
    directory: str = Field(description="Step directory relative to the campaign directory.")
    rps_per_worker: float
    workers: int
    requested_rps: float = Field(description="rps_per_worker x workers.")
    achieved_rps: float = Field(description="benchmark.http_2xx per second of the step.")
    duration: float = Field(description="Measured seconds.")
    requests: int = Field(description="upstream_rq_total.")
    http_2xx: int
    latency: dict[str, float | None] = Field(
        description="Headline latency (scheduled_to_response) in seconds by 'p50', 'p90', "
        "'p99', 'p99.9'."
    )
    blocked: bool = Field(description="Any sequencer.blocking or benchmark.pool_overflow.")
    blocked_count: int = Field(default=0, description="Blocked releases plus pool overflows.")
    errors: dict[str, int] = Field(
        default_factory=dict,
        description="Non-zero error counters (nhbench._names.ERROR_COUNTERS) and the "
        "connection counters behind them (CONNECTION_ERROR_COUNTERS, not errors themselves).",
    )
    error_rate: float = Field(
        default=0.0, description="Errors / finished requests (2xx + errors), 0..1."
    )
    target_cpu: dict[str, float | None] = Field(
        default_factory=dict, description="Watched CPU group -> busy % on the target."
    )
    watch_cpus: dict[str, list[int]] = Field(
        default_factory=dict,
        description="Watched CPU group -> the target CPUs it was during this step (a "
        "--watch-pod group is resolved again before each step, and its pod may have moved); "
        "empty for a step recorded before steps carried it.")
    nhbench_cpu: float | None = Field(
        default=None,
        description="CPU time the nhbench process itself used during the step, as % of one "
        "CPU per worker. loadgen_cpu (mpstat) also counts anything else on those CPUs.",
    )
    loadgen_cpu: float | None = Field(
        default=None, description="Busy % of the load generator's worker CPUs."
    )
    slo: list[SloCheck] = Field(default_factory=list)
    passed: bool = Field(description="No stop rule fired on this step.")
    validity: Literal["valid", "suspect", "invalid"] | None = Field(
        default=None, description="The step's validity verdict (Result.validity, "
        "docs/trust.md \"Validity\"); None for a step recorded before steps carried it.")
    validity_reasons: list[str] = Field(
        default_factory=list, description="One line per check that is not valid, the "
        "invalid ones first (Validity.reasons).")
    target_capture: CaptureResult | None = None
    loadgen_capture: CaptureResult | None = None
    scrape: list[StepScrape] = Field(
        default_factory=list,
        description="The --scrape sources over the step: selected series with their "
        "deltas or values, the scrapes' files and why a scrape failed.")
    started_at: datetime
    ended_at: datetime

    @property
    def error_count(self) -> int:
        """The step's errors: `errors` summed over ERROR_COUNTERS only, as every report does
        (the connection counters in `errors` describe requests already counted)."""
        return error_total(self.errors)


class AdaptBound(BaseModel):
    """One side of the boundary an adaptive search found: the step and its rule values."""

    model_config = ConfigDict(extra="forbid")

    step: int = Field(description="Index of the step (StepRecord.index).")
    rps_per_worker: float
    requested_rps: float = Field(description="rps_per_worker x workers.")
    achieved_rps: float
    checks: list[SloCheck] = Field(default_factory=list)


class AdaptConfirmation(BaseModel):
    """The repeat runs at the answer (``--confirm N``) and their spread."""

    model_config = ConfigDict(extra="forbid")

    asked: int = Field(description="How many confirmation runs were asked for.")
    steps: list[int] = Field(default_factory=list, description="Their step indices so far.")
    passed: int = 0
    held: bool | None = Field(
        default=None, description="Every confirmation run passed (None until all ran).")
    spread: dict[str, list[float | None]] = Field(
        default_factory=dict,
        description="Rule expression (and 'achieved_rps') -> [min, median, max] over the "
        "confirmation runs.",
    )


class AdaptState(BaseModel):
    """An adaptive search: its settings, and its state after the recorded steps.

    The state is a pure function of the settings and the recorded steps (`nhbench.adapt`
    replays them on ``--resume``); it is kept here for the reports and for people.
    """

    model_config = ConfigDict(extra="forbid")

    slo: list[str] = Field(description="The SLO rules every step must meet.")
    min_rps: float = Field(description="First step, per worker.")
    max_rps: float = Field(description="Highest rate tried, per worker.")
    growth: float = Field(description="Factor of the exponential phase.")
    precision: float = Field(description="Bracket width at which the search stops.")
    precision_relative: bool = Field(
        description="precision is a fraction of the passing rate (else rps per worker).")
    confirm: int = Field(default=0, description="Repeat runs at the answer.")
    max_steps: int = Field(description="Search steps at most (confirmations excluded).")
    phase: Literal["exponential", "binary", "confirm", "done"] = "exponential"
    search_steps: int = 0
    next_rps: float | None = None
    highest_passing: AdaptBound | None = None
    lowest_failing: AdaptBound | None = None
    answer_rps: float | None = Field(
        default=None, description="The highest passing rate per worker once the search ended.")
    reason: AdaptReason | None = None
    client_limited: bool = Field(
        default=False,
        description="The lowest failing step was blocked: the load generator could not offer "
        "its rate, so the boundary found may be the client's rather than the server's.",
    )
    confirmation: AdaptConfirmation | None = None


class CampaignManifest(BaseModel):
    """The campaign: what was asked, on which machines, and the steps finished so far."""

    model_config = ConfigDict(extra="forbid")

    format: Literal["nhbench-campaign/1"] = CAMPAIGN_FORMAT
    kind: CampaignKind = Field(
        default="sweep", description="'sweep' (nhbench sweep) or 'adapt' (nhbench adapt).")
    nhbench_version: str
    created_at: datetime
    updated_at: datetime
    url: str
    label: list[str] = Field(default_factory=list)
    note: str | None = None
    command: list[str] = Field(
        default_factory=list, description="The command line, with secrets never present."
    )
    options: dict[str, Any] = Field(
        description="The run options every step shares (Options as JSON, rps excluded)."
    )
    plan: SweepPlan
    ssh: str | None = Field(default=None, description="user@host:port of the target host.")
    target_capture: dict[str, Any] | None = Field(
        default=None, description="CaptureSpec for the target host (as JSON)."
    )
    loadgen_capture: dict[str, Any] | None = None
    facts: dict[str, MachineFacts] = Field(
        default_factory=dict, description="'target' and 'loadgen' machine facts."
    )
    steps: list[StepRecord] = Field(default_factory=list)
    status: CampaignStatus = "running"
    stop_reason: str | None = None
    highest_passing_step: int | None = Field(
        default=None, description="index of the highest-rate step that passed every rule."
    )
    settings: dict[str, Any] = Field(
        default_factory=dict,
        description="The sweep's settings as given (CLI flags over the scenario file, Python "
        "spelling), which `--resume` starts from. Never holds a secret: a password is not a "
        "setting, only the name of the environment variable that holds it.",
    )
    adapt: AdaptState | None = Field(
        default=None, description="The adaptive search (kind 'adapt' only).")
