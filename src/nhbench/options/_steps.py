"""The offered-load steps of a sweep: the grammar of ``--rps``/``--max-rps``/``--step-rps``/
``--steps`` and the checks that tie them (and ``--extend``) together.

* ``--rps R`` alone: one step at R.
* ``--rps R --max-rps M [--step-rps S]``: R, R+S, … up to and including M (S defaults to 10,
  as in Intel's benchmark.sh). M itself is always the last step, even when M-R is not a
  multiple of S, so the range the user asked for is covered to its end.
* ``--steps 100,200,500``: exactly these steps, in this order.
* ``--extend`` (RPS-SLA mode): after the planned steps, keep adding S to the last step until
  a stop rule fires or the next step would exceed ``--extend-limit``.

Every rate is per worker, as Nighthawk's ``--rps``; a step's requested total is rate x
workers. `SweepOptions` validates with these functions, and the sweep builds its
`SweepPlan` with them, so a plan is checked in one place whichever way it is given.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .._exceptions import OptionsError

__all__ = [
    "DEFAULT_STEP_RPS",
    "MAX_COOLDOWN",
    "MAX_STEPS",
    "PLAN_KEYS",
    "check_cooldown",
    "check_extension",
    "parse_rate",
    "parse_step_list",
    "parse_steps",
    "plan_steps",
    "round_rate",
    "step_size",
]

#: Intel benchmark.sh's --step-rps default.
DEFAULT_STEP_RPS = 10.0
#: A guard against a typo turning a sweep into days of steps (--step-rps 0.001).
MAX_STEPS = 10_000
#: The longest --cooldown between steps, in seconds (a day).
MAX_COOLDOWN = 86400.0
#: Keys that choose the steps; giving any of them over a file or a resumed campaign replaces
#: all of them (see `nhbench.sweep.overlay`).
PLAN_KEYS = ("rps", "max_rps", "step_rps", "steps")


def parse_rate(value: object, *, allow_zero: bool = False) -> float:
    """A per-worker rate: a finite number > 0 (>= 0 with `allow_zero`). The ValueError's
    message follows ``--<flag>: `` directly."""
    try:
        rate = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"must be a number (got {value!r})") from None
    if not math.isfinite(rate) or rate < 0 or (rate == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"must be a finite number {bound} (got {value!r})")
    return rate


def _rate(name: str, value: object) -> float:
    try:
        return parse_rate(value)
    except ValueError as exc:
        raise OptionsError(f"--{name}: {exc}", name.replace("-", "_")) from None


def round_rate(value: float) -> float:
    """Steps are sums of decimal numbers (0.1 + 0.2); rounding to 9 decimals keeps 100.3 from
    turning into 100.30000000000001 in directory names and reports."""
    return round(value, 9)


def parse_step_list(value: object) -> list[float]:
    """``"100,200,500"``, a number or a list of numbers -> [100.0, 200.0, 500.0]; ValueError
    (a message that follows ``--steps: ``) otherwise."""
    if isinstance(value, str):
        items: Sequence[object] = [part for part in value.replace(" ", "").split(",")]
    elif isinstance(value, (int, float)):
        items = [value]
    elif isinstance(value, Sequence):
        items = list(value)
    else:
        raise ValueError(f"must be a list such as 100,200,500 (got {value!r})")
    if not items or any(item == "" for item in items):
        raise ValueError(f"must be a list such as 100,200,500 (got {value!r})")
    steps = [parse_rate(item) for item in items]
    if len(steps) > MAX_STEPS:
        raise ValueError(f"at most {MAX_STEPS} steps")
    return steps


def parse_steps(value: object) -> list[float]:
    """`parse_step_list`, raising OptionsError ``--steps: ...``."""
    try:
        return parse_step_list(value)
    except ValueError as exc:
        raise OptionsError(f"--steps: {exc}", "steps") from None


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
    rates = [round_rate(start + i * step) for i in range(count + 1)]
    if rates[-1] < stop:
        rates.append(round_rate(stop))
    return rates


def step_size(max_rps: object = None, step_rps: object = None) -> float | None:
    """The step of a range (and of --extend): --step-rps, or its default when there is a
    range; None for a single rate or an explicit list."""
    if step_rps is not None:
        return _rate("step-rps", step_rps)
    if max_rps is not None:
        return DEFAULT_STEP_RPS
    return None


def check_extension(
    rates: Sequence[float],
    step: float | None,
    *,
    extend: bool,
    extend_limit: object = None,
    stop_on_blocked: bool = False,
    stop_on_slo: Sequence[object] = (),
) -> float | None:
    """Check --extend and --extend-limit against the planned `rates` and `step`; return the
    limit (None: none given)."""
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
    return limit


def check_cooldown(cooldown: float) -> float:
    """The pause between steps, in seconds: 0 to a day. ValueError follows ``--cooldown: ``."""
    if cooldown < 0:
        raise ValueError(f"must be >= 0 (got {cooldown:g})")
    if cooldown > MAX_COOLDOWN:
        # time.sleep raises OverflowError on absurd values; a day between steps is plenty.
        raise ValueError(f"must be <= {MAX_COOLDOWN:g} s (got {cooldown:g})")
    return cooldown
