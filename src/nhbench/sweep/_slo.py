"""Stop rules in the style of k6 thresholds: ``p99<5ms``, ``error_rate<0.1%``,
``achieved/requested>0.95``.

A rule is ``METRIC OPERATOR VALUE`` and states what a *passing* step looks like, as k6's
thresholds do: ``p99<5ms`` passes while the step's p99 is below 5 ms and stops the sweep on
the first step where it is not. Metrics:

* ``p50``, ``p90``, ``p99``, ``p99.9``, any ``pNN`` (also k6's ``p(99)``): a percentile of
  the headline latency (scheduled send to response end). The value needs a unit: ``ns``,
  ``us`` (or ``µs``), ``ms`` or ``s``; k6's implicit milliseconds are not guessed.
* ``error_rate``: failed requests over finished requests, as a fraction (``0.001``) or a
  percentage (``0.1%``).
* ``achieved/requested``: 2xx responses per second over the requested total rate, as a
  fraction or a percentage.

Operators: ``<``, ``<=``, ``>``, ``>=``. Rules are parsed once, before anything runs, so a
typo is a one-line `OptionsError` (exit status 2 on the command line), never a failure after
the first step.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from .._exceptions import OptionsError
from ..campaign import SloCheck, StepRecord
from ..options import LATENCY_UNITS as _LATENCY_UNITS

__all__ = ["StopRule", "evaluate_rules", "latency_points", "parse_rule", "parse_rules"]

_OPERATORS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "<": operator.lt,
    ">": operator.gt,
}
_NUMBER = r"[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?|\.[0-9]+(?:[eE][-+]?[0-9]+)?"
_RULE = re.compile(
    r"^\s*(?P<metric>p\(\s*[0-9.]+\s*\)|p[0-9.]+|error_rate|achieved\s*/\s*requested)"
    r"\s*(?P<op><=|>=|<|>)\s*"
    rf"(?P<number>{_NUMBER})\s*(?P<unit>[a-zµμ%]*)\s*$",
    re.IGNORECASE,
)
_GRAMMAR = (
    "expected METRIC OP VALUE such as 'p99<5ms', 'error_rate<0.1%' or "
    "'achieved/requested>0.95' (metrics pNN, error_rate, achieved/requested; "
    "operators < <= > >=)"
)


@dataclass(frozen=True)
class StopRule:
    """A parsed rule. `metric` is 'latency', 'error_rate' or 'achieved_ratio'; for latency
    `percentile` is 0-100 and `threshold` is in seconds; ratios are fractions."""

    expression: str
    metric: str
    op: str
    threshold: float
    percentile: float | None = None

    def value(self, record: StepRecord) -> float | None:
        """The step's measured left-hand side, or None when the step has no such data."""
        if self.metric == "latency":
            return record.latency.get(_latency_key(self.percentile or 0.0))
        if self.metric == "error_rate":
            return record.error_rate
        if record.requested_rps <= 0:
            # rps 0 (as fast as possible) requests no particular rate: nothing to compare.
            return None
        return record.achieved_rps / record.requested_rps

    def check(self, record: StepRecord) -> SloCheck:
        """Evaluate on one step. A missing value (no latency samples at all) fails: a step
        that produced no responses cannot be said to meet a latency objective."""
        value = self.value(record)
        passed = value is not None and _OPERATORS[self.op](value, self.threshold)
        return SloCheck(expression=self.expression, value=value, passed=passed)


def _latency_key(percentile: float) -> str:
    # The StepRecord's keys are 'p50', 'p90', 'p99', 'p99.9'; other percentiles are added
    # to the record under the same spelling by the runner (see `latency_points`).
    return f"p{percentile:g}"


def parse_rule(text: str) -> StopRule:
    """Parse one expression; raise OptionsError (option 'stop_on_slo') naming what is wrong."""
    expression = str(text).strip()
    match = _RULE.match(expression)
    if match is None:
        raise OptionsError(f"--stop-on-slo {text!r}: {_GRAMMAR}", option="stop_on_slo")
    metric = re.sub(r"[\s()]", "", match["metric"]).lower()
    op = match["op"]
    number = float(match["number"])
    unit = match["unit"]
    if not math.isfinite(number):
        raise OptionsError(f"--stop-on-slo {text!r}: the value must be finite", "stop_on_slo")
    if metric.startswith("p"):
        try:
            percentile = float(metric[1:])
        except ValueError:
            raise OptionsError(
                f"--stop-on-slo {text!r}: {metric!r} is not a percentile such as p99 or p99.9",
                option="stop_on_slo",
            ) from None
        if not 0 < percentile <= 100:
            raise OptionsError(
                f"--stop-on-slo {text!r}: the percentile must be in (0, 100]",
                option="stop_on_slo",
            )
        scale = _LATENCY_UNITS.get(unit) if unit else None
        if scale is None:
            scale = _LATENCY_UNITS.get(unit.lower()) if unit else None
        if scale is None:
            raise OptionsError(
                f"--stop-on-slo {text!r}: a latency needs a unit: ns, us, µs, ms or s",
                option="stop_on_slo",
            )
        return StopRule(expression, "latency", op, number * scale, percentile)
    if unit not in ("", "%"):
        raise OptionsError(
            f"--stop-on-slo {text!r}: {metric} is a fraction (0.01) or a percentage (1%), "
            f"not {unit!r}",
            option="stop_on_slo",
        )
    threshold = number / 100.0 if unit == "%" else number
    name = "error_rate" if metric == "error_rate" else "achieved_ratio"
    return StopRule(expression, name, op, threshold)


def parse_rules(texts: Iterable[str]) -> list[StopRule]:
    """Parse every expression (the first bad one raises)."""
    return [parse_rule(text) for text in texts]


def evaluate_rules(rules: Iterable[StopRule], record: StepRecord) -> list[SloCheck]:
    """One SloCheck per rule, in the order given."""
    return [rule.check(record) for rule in rules]


def latency_points(rules: Iterable[StopRule]) -> list[float]:
    """The percentiles (0-100) the rules refer to, so the runner records each of them."""
    return sorted({rule.percentile for rule in rules if rule.percentile is not None})
