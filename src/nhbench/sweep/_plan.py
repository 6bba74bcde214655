"""The sweep's `SweepPlan`: the planned steps and stop rules, and the step after the last.

The grammar of the plan options and the checks that tie them together are
`nhbench.options`' (``options/_steps.py``, used by `SweepOptions` too); this module turns
them into the campaign's `SweepPlan` and walks it.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._exceptions import OptionsError
from ..campaign import SweepPlan
from ..options import (
    DEFAULT_STEP_RPS,
    MAX_STEPS,
    check_cooldown,
    check_extension,
    plan_steps,
    round_rate,
    step_size,
)

__all__ = ["DEFAULT_STEP_RPS", "MAX_STEPS", "build_plan", "next_step", "plan_steps"]


def build_plan(
    *,
    rps: object = None,
    max_rps: object = None,
    step_rps: object = None,
    steps: object = None,
    duration: float,
    cooldown: float = 0.0,
    extend: bool = False,
    extend_limit: object = None,
    stop_on_blocked: bool = False,
    stop_on_slo: Sequence[str] = (),
) -> SweepPlan:
    """A validated SweepPlan (OptionsError names the flag at fault)."""
    rates = plan_steps(rps, max_rps, step_rps, steps)
    step = step_size(max_rps, step_rps)
    limit = check_extension(rates, step, extend=extend, extend_limit=extend_limit,
                            stop_on_blocked=stop_on_blocked, stop_on_slo=stop_on_slo)
    try:
        check_cooldown(cooldown)
    except ValueError as exc:
        raise OptionsError(f"--cooldown: {exc}", "cooldown") from None
    return SweepPlan(
        steps=rates,
        duration=duration,
        cooldown=cooldown,
        stop_on_blocked=stop_on_blocked,
        stop_on_slo=[str(rule) for rule in stop_on_slo],
        extend=extend,
        step=step,
        extend_limit=limit,
    )


def next_step(plan: SweepPlan, done: int, last_rate: float | None) -> float | None:
    """The per-worker rate of step number `done` + 1 (0-based `done` steps finished, the
    last at `last_rate`), or None when the plan is exhausted."""
    if done < len(plan.steps):
        return plan.steps[done]
    if not plan.extend or plan.step is None or last_rate is None:
        return None
    if done >= MAX_STEPS:
        return None
    rate = round_rate(last_rate + plan.step)
    if plan.extend_limit is not None and rate > plan.extend_limit + 1e-9:
        return None
    return rate
