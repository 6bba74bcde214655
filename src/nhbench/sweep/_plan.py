"""The offered-load steps of a sweep.

* ``--rps R`` alone: one step at R.
* ``--rps R --max-rps M [--step-rps S]``: R, R+S, … up to and including M (S defaults to 10,
  as in Intel's benchmark.sh). M itself is always the last step, even when M-R is not a
  multiple of S, so the range the user asked for is covered to its end.
* ``--steps 100,200,500``: exactly these steps, in this order.
* ``--extend`` (RPS-SLA mode): after the planned steps, keep adding S to the last step until
  a stop rule fires or the next step would exceed ``--extend-limit``.

Every rate is per worker, as Nighthawk's ``--rps``; a step's requested total is rate x
workers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .._exceptions import OptionsError
from ..campaign import SweepPlan

__all__ = ["DEFAULT_STEP_RPS", "MAX_STEPS", "build_plan", "next_step", "parse_steps", "plan_steps"]

#: Intel benchmark.sh's --step-rps default.
DEFAULT_STEP_RPS = 10.0
#: A guard against a typo turning a sweep into days of steps (--step-rps 0.001).
MAX_STEPS = 10_000
#: The longest --cooldown between steps, in seconds (a day).
MAX_COOLDOWN = 86400.0


def _rate(name: str, value: object, *, allow_zero: bool = False) -> float:
    try:
        rate = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise OptionsError(f"--{name}: must be a number (got {value!r})", name) from None
    if not math.isfinite(rate) or rate < 0 or (rate == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise OptionsError(f"--{name}: must be a finite number {bound} (got {value!r})", name)
    return rate


def _round(value: float) -> float:
    # Steps are sums of decimal numbers (0.1 + 0.2); rounding to 9 decimals keeps 100.3 from
    # turning into 100.30000000000001 in directory names and reports.
    return round(value, 9)


def parse_steps(value: object) -> list[float]:
    """``"100,200,500"`` or a list of numbers -> [100.0, 200.0, 500.0]."""
    if isinstance(value, str):
        items: Sequence[object] = [part for part in value.replace(" ", "").split(",")]
    elif isinstance(value, (int, float)):
        items = [value]
    elif isinstance(value, Sequence):
        items = list(value)
    else:
        raise OptionsError(f"--steps: must be a list such as 100,200,500 (got {value!r})", "steps")
    if not items or any(item == "" for item in items):
        raise OptionsError(f"--steps: must be a list such as 100,200,500 (got {value!r})", "steps")
    steps = [_rate("steps", item) for item in items]
    if len(steps) > MAX_STEPS:
        raise OptionsError(f"--steps: at most {MAX_STEPS} steps", "steps")
    return steps


def plan_steps(
    rps: object = None,
    max_rps: object = None,
    step_rps: object = None,
    steps: object = None,
) -> list[float]:
    """The planned per-worker rates (before any extension); see the module doc."""
    if steps is not None:
        given = [name for name, value in (("rps", rps), ("max-rps", max_rps)) if value is not None]
        if given:
            raise OptionsError(f"--steps: mutually exclusive with --{given[0]}", "steps")
        return parse_steps(steps)
    if rps is None:
        raise OptionsError("missing the load: give --rps (with --max-rps for a range) or --steps",
                           "rps")
    start = _rate("rps", rps)
    if max_rps is None:
        return [start]
    stop = _rate("max-rps", max_rps)
    if stop < start:
        raise OptionsError(f"--max-rps: must be >= --rps ({stop:g} < {start:g})", "max_rps")
    step = DEFAULT_STEP_RPS if step_rps is None else _rate("step-rps", step_rps)
    count = math.floor((stop - start) / step + 1e-9)
    if count + 1 > MAX_STEPS:
        raise OptionsError(
            f"--step-rps: {start:g} to {stop:g} in steps of {step:g} is more than {MAX_STEPS} "
            f"steps", "step_rps",
        )
    # Multiplying rather than adding repeatedly keeps the rounding error from accumulating.
    rates = [_round(start + i * step) for i in range(count + 1)]
    if rates[-1] < stop:
        rates.append(_round(stop))
    return rates


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
    step: float | None = None
    if step_rps is not None:
        step = _rate("step-rps", step_rps)
    elif max_rps is not None:
        step = DEFAULT_STEP_RPS
    limit = None if extend_limit is None else _rate("extend-limit", extend_limit)
    if extend:
        if step is None:
            raise OptionsError("--extend: needs --step-rps (the size of each added step)",
                               "step_rps")
        if not stop_on_blocked and not stop_on_slo and limit is None:
            raise OptionsError(
                "--extend: needs a stop rule (--stop-on-blocked, --stop-on-slo) or "
                "--extend-limit, or it would never end", "extend",
            )
        if limit is not None and limit < rates[-1]:
            raise OptionsError(
                f"--extend-limit: must be >= the last planned step ({limit:g} < {rates[-1]:g})",
                "extend_limit",
            )
    elif limit is not None:
        raise OptionsError("--extend-limit: only meaningful with --extend", "extend_limit")
    if cooldown < 0:
        raise OptionsError(f"--cooldown: must be >= 0 (got {cooldown:g})", "cooldown")
    if cooldown > MAX_COOLDOWN:
        # time.sleep raises OverflowError on absurd values; a day between steps is plenty.
        raise OptionsError(f"--cooldown: must be <= {MAX_COOLDOWN:g} s (got {cooldown:g})",
                           "cooldown")
    return SweepPlan(
        steps=rates,
        duration=duration,
        cooldown=cooldown,
        stop_on_blocked=stop_on_blocked,
        stop_on_slo=list(stop_on_slo),
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
    rate = _round(last_rate + plan.step)
    if plan.extend_limit is not None and rate > plan.extend_limit + 1e-9:
        return None
    return rate
