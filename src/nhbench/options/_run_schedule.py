"""The shape of the schedule: jitter, no catch-up, an exact count, linear stages, warm-ups,
a wall-clock start and an explicit list of offsets (`Schedule`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from ._flags import Flag
from ._run_model import Data, RunPart
from ._values import (
    MAX_DURATION,
    parse_duration,
    parse_schedule_offsets,
    parse_scheduled_start,
    parse_stages,
)

if TYPE_CHECKING:
    from ._run import Options

__all__ = ["Schedule", "check_schedule_shapes", "schedule_shapes_first"]


# Jitter beyond an hour is a typo, not a schedule. A count of 10^12 releases outlasts any
# run yet stays exact in the core's arithmetic.
MAX_JITTER = 3600.0
MAX_REQUESTS = 10**12
# The core's generator takes a 64-bit seed.
MAX_SEED = 2**64 - 1


class Schedule(RunPart):
    """How releases are spread over time, beyond a constant rate."""

    jitter_uniform: Annotated[
        float | None, Flag(metavar="TIME", default="", group="Schedule shapes")
    ] = Field(
        default=None, ge=0, le=MAX_JITTER,
        description="Delay each release by a uniform random time in [0, TIME] (Nighthawk's "
        "--jitter-uniform); the jittered time is the release's scheduled time, so latency "
        "counts from it.",
    )
    jitter: Annotated[bool, Flag(aliases=("-jitter",), group="Schedule shapes")] = Field(
        default=False,
        description="Move each release by a uniform random +-10% of the interval (Fortio's "
        "-jitter). Needs a rate.",
    )
    uniform: Annotated[bool, Flag(aliases=("-uniform",), group="Schedule shapes")] = Field(
        default=False,
        description="Spread the workers' first releases over one interval (Fortio's "
        "-uniform). nhbench always does so; accepted for Fortio command lines.",
    )
    no_catchup: Annotated[bool, Flag(aliases=("-nocatchup",), group="Schedule shapes")] = Field(
        default=False,
        description="A release late by an interval or more moves the rest of the schedule "
        "instead of bursting to catch up (Fortio's -nocatchup). Hides the wait from latency "
        "(coordinated omission); reported in result.schedule. Needs a rate.",
    )
    requests: Annotated[int | None, Flag(metavar="N", aliases=("-n",), group="Schedule shapes")] = Field(
        default=None, ge=1, le=MAX_REQUESTS,
        description="Make exactly N releases in all (Fortio's -n), split across the workers, "
        "then drain and end. Without duration the run has no time limit; with one, whichever "
        "comes first ends it.",
    )
    stage: Annotated[
        tuple[tuple[float, float], ...],
        Flag(metavar="TIME:RPS", append=True, group="Schedule shapes"),
    ] = Field(
        default=(),
        description="A linear stage: ramp the per-worker rate from the previous stage's "
        "(0 before the first) to RPS over TIME; repeatable (--stage 30s:1000 --stage "
        "2m:1000 --stage 30s:0). The run lasts the stages' sum. Not with rps, duration.",
    )
    warmup: Annotated[float | None, Flag(metavar="TIME", default="", group="Schedule shapes")] = Field(
        default=None, gt=0, le=MAX_DURATION,
        description="A warm-up phase of TIME at the run's rate before the measured one; its "
        "results are kept apart (result.warmup).",
    )
    simple_warmup: Annotated[bool, Flag(group="Schedule shapes")] = Field(
        default=False,
        description="One warm-up request per worker before the measured phase (Nighthawk's "
        "--simple-warmup); kept apart in result.warmup.",
    )
    sequential_warmup: Annotated[
        bool, Flag(aliases=("-sequential-warmup",), group="Schedule shapes")
    ] = Field(
        default=False,
        description="Before the measured phase, open every connection and send one warm-up "
        "request per connection, one after another (Fortio's -sequential-warmup); kept "
        "apart in result.warmup.",
    )
    allow_initial_errors: Annotated[
        bool, Flag(aliases=("-allow-initial-errors",), group="Schedule shapes")
    ] = Field(
        default=False,
        description="Errors during the warm-up do not fail the run (Fortio's "
        "-allow-initial-errors): failure predicates are judged on the measured phase only.",
    )
    scheduled_start: Annotated[
        float | None, Flag(metavar="TIME", default="", group="Schedule shapes")
    ] = Field(
        default=None,
        description="Start the first release at this wall-clock time: RFC 3339 "
        "(2030-01-01T12:00:00Z) or epoch seconds (Nighthawk's --scheduled-start). At most "
        "24 h ahead; a time in the past is refused. Replaces start_delay.",
    )
    execution_id: Annotated[str | None, Flag(metavar="ID", default="", group="Schedule shapes")] = Field(
        default=None, max_length=256,
        description="An id recorded in the result and in Nighthawk's output options "
        "(Nighthawk's --execution-id).",
    )
    # An explicit schedule (request sources' replay sets it from a recording): each worker
    # releases request k at offset k (seconds after its start), exactly that many requests.
    schedule_offsets: Annotated[
        tuple[float, ...] | None, Flag(metavar="S,S,...", default="", group="Schedule shapes")
    ] = Field(
        default=None,
        description="Seconds after each worker's start at which it releases request k, "
        "non-decreasing (0,0.5,0.5,2); exactly that many requests per worker, then the run "
        "ends. rps is ignored. Set by replaying a recording's timing.",
    )

    arrival: Annotated[
        Literal["uniform", "poisson"], Flag(metavar="uniform|poisson", group="Schedule shapes")
    ] = Field(
        default="uniform",
        description="uniform: releases evenly spaced at the rate; poisson: an open-model "
        "arrival process, each worker's releases a Poisson process at its rate (exponential "
        "gaps; with stages a non-homogeneous one), so the workers together are one at the "
        "full rate. Latency counts from the drawn time. Needs rps or stages; not with "
        "jitter, jitter_uniform, no_catchup, burst_size or an explicit schedule.",
    )
    seed: Annotated[int | None, Flag(metavar="N", default="", group="Schedule shapes")] = Field(
        default=None, ge=0, le=MAX_SEED,
        description="Seed of the random schedule (arrival poisson, jitter, jitter_uniform): "
        "the same seed gives the same release times, another seed other ones. Without it "
        "each run draws from the clock.",
    )

    @field_validator("arrival", mode="before")
    @classmethod
    def _lower_arrival(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value

    @field_validator("jitter_uniform", "warmup", mode="before")
    @classmethod
    def _parse_schedule_time(cls, value: object) -> object:
        return None if value is None else parse_duration(value)

    @field_validator("stage", mode="before")
    @classmethod
    def _parse_stages(cls, value: object) -> object:
        return parse_stages(value)

    @field_validator("scheduled_start", mode="before")
    @classmethod
    def _parse_scheduled_start(cls, value: object, info: ValidationInfo) -> object:
        if value is None:
            return None
        echo = bool((info.context or {}).get("echo"))
        return parse_scheduled_start(value, check_now=not echo)

    @field_validator("execution_id")
    @classmethod
    def _check_execution_id(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or not value.isprintable()):
            raise ValueError(f"must be printable text (got {value!r})")
        return value

    @field_validator("schedule_offsets", mode="before")
    @classmethod
    def _parse_offsets(cls, value: object) -> object:
        return parse_schedule_offsets(value)


# ---- the normalisation steps and the checks (their order: _run_checks) ---------------------


def schedule_shapes_first(data: Data, info: ValidationInfo, model: type[BaseModel]) -> Data:
    # Stages set the rate and the duration themselves; a --requests run without a
    # duration has no time limit. Both decide before duration_default fills in 5 s.
    # (The echo of options in a Result holds every field, rps included: not checked.)
    if data.get("stage"):
        echo = bool((info.context or {}).get("echo"))
        for other in ("rps", "duration"):
            if not echo and data.get(other) is not None:
                raise PydanticCustomError(
                    "options_conflict", "{a}: mutually exclusive with {b}",
                    {"a": "stage", "b": other},
                )
        data = {**data, "no_duration": True}
    elif (data.get("requests") is not None or data.get("schedule_offsets") is not None) \
            and data.get("duration") is None:
        data = {**data, "no_duration": True}
    return data


def check_schedule_shapes(options: Options, info: ValidationInfo) -> None:
    def conflict(a: str, b: str) -> PydanticCustomError:
        return PydanticCustomError(
            "options_conflict", "{a}: mutually exclusive with {b}", {"a": a, "b": b}
        )
    warmups = [name for name in ("warmup", "simple_warmup", "sequential_warmup")
               if getattr(options, name)]
    if len(warmups) > 1:
        raise conflict(warmups[1], warmups[0])
    if options.allow_initial_errors and not warmups:
        # Alone it would be accepted and change nothing: the errors it forgives are the
        # warm-up's.
        raise PydanticCustomError(
            "options_needs", "{a}: needs {b}",
            {"a": "allow_initial_errors", "b": ["warmup", "simple_warmup", "sequential_warmup"]})
    if options.stage and options.schedule_offsets is not None:
        raise conflict("stage", "schedule_offsets")
    shaped = "stage" if options.stage else "schedule_offsets" if options.schedule_offsets else None
    if shaped is not None:
        for name in ("requests", "no_catchup", "jitter", "warmup"):
            if getattr(options, name):
                raise conflict(name, shaped)
    if options.arrival == "poisson":
        # Poisson times replace the uniform ones that jitter, --no-catchup and bursts
        # reshape; an explicit schedule (a replay at its original timing) has no rate to
        # draw from, and a run at the maximum rate no schedule at all.
        for name in ("jitter", "jitter_uniform", "no_catchup", "schedule_offsets"):
            if getattr(options, name):
                # A replay's original timing is what set the explicit schedule: say so.
                replayed = name == "schedule_offsets" and getattr(options, "replay", None)
                raise conflict("arrival poisson",
                               "replay_timing original" if replayed else name)
        if options.burst_size > 1:
            raise conflict("arrival poisson", "burst_size")
        if options.rps == 0 and not options.stage:
            raise PydanticCustomError(
                "options_needs", "{a}: needs {b}", {"a": "arrival poisson", "b": ["rps", "stage"]})
    if options.seed is not None and options.arrival != "poisson" \
            and not (options.jitter or options.jitter_uniform):
        # Alone it would be accepted and change nothing: a uniform schedule has no draws.
        raise PydanticCustomError(
            "options_needs", "{a}: needs {b}",
            {"a": "seed", "b": ["arrival poisson", "jitter", "jitter_uniform"]})
    needs_rate = "jitter" if options.jitter else "no_catchup" if options.no_catchup else None
    if needs_rate is not None and options.rps == 0 and shaped is None:
        raise PydanticCustomError(
            "options_needs", "{a}: needs {b} above 0", {"a": needs_rate, "b": "rps"}
        )
