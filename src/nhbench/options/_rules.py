"""Stop rules (service-level objectives) in the style of k6 thresholds: ``p99<5ms``,
``error_rate<0.1%``, ``achieved/requested>0.95``.

A rule is ``METRIC OPERATOR VALUE`` and states what a *passing* measurement looks like, as
k6's thresholds do: ``p99<5ms`` passes while the p99 is below 5 ms. Metrics:

* ``p50``, ``p90``, ``p99``, ``p99.9``, any ``pNN`` (also k6's ``p(99)``): a percentile of
  the headline latency (scheduled send to response end). The value needs a unit: ``ns``,
  ``us`` (or ``µs``), ``ms`` or ``s``; k6's implicit milliseconds are not guessed.
* ``error_rate``: failed requests over finished requests, as a fraction (``0.001``) or a
  percentage (``0.1%``).
* ``achieved/requested``: 2xx responses per second over the requested total rate, as a
  fraction or a percentage.

Operators: ``<``, ``<=``, ``>``, ``>=``.

This module is the grammar and nothing else a sweep needs: `StopRule.parse` reads one rule,
`StopRule.check` evaluates it on anything that has the `Measures` attributes (a sweep's
`StepRecord` has them), giving a `SloCheck`, and `format_check` is the one way a check is
written for people (progress lines, stop reasons, reports). It sits with the options so that
`SweepOptions` can validate ``--stop-on-slo`` before anything runs, and so that other callers
(a test asserting an objective on a run) can reuse it without the sweep.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from .._exceptions import OptionsError
from .._format import format_latency
from ._values import LATENCY_UNITS

__all__ = [
    "Measures",
    "SloCheck",
    "StopRule",
    "format_check",
    "latency_points",
    "parse_rule",
    "parse_rules",
]

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


class SloCheck(BaseModel):
    """One stop-rule expression evaluated on one step."""

    model_config = ConfigDict(extra="forbid")

    expression: str
    value: float | None = Field(description="The measured left-hand side (None: no data).")
    passed: bool


class Measures(Protocol):
    """What a rule reads: a sweep's `StepRecord` has these attributes.

    `latency` maps ``"p50"``, ``"p99.9"``… (the percentile spelt with ``:g``) to seconds, or
    None when there were no samples.
    """

    @property
    def latency(self) -> Mapping[str, float | None]: ...
    @property
    def error_rate(self) -> float: ...
    @property
    def achieved_rps(self) -> float: ...
    @property
    def requested_rps(self) -> float: ...


@dataclass(frozen=True)
class StopRule:
    """A parsed rule. `metric` is 'latency', 'error_rate' or 'achieved_ratio'; for latency
    `percentile` is 0-100 and `threshold` is in seconds; ratios are fractions.

    ``str(rule)`` is the expression as it was written (without surrounding blanks): that is
    what the manifest keeps and what every message shows.
    """

    expression: str
    metric: str
    op: str
    threshold: float
    percentile: float | None = None

    def __str__(self) -> str:
        return self.expression

    @classmethod
    def parse(cls, text: object) -> StopRule:
        """Parse one expression; ValueError ``'<text>': <what is wrong>`` otherwise."""
        expression = str(text).strip()
        match = _RULE.match(expression)
        if match is None:
            raise ValueError(f"{text!r}: {_GRAMMAR}")
        metric = re.sub(r"[\s()]", "", match["metric"]).lower()
        op = match["op"]
        number = float(match["number"])
        unit = match["unit"]
        if not math.isfinite(number):
            raise ValueError(f"{text!r}: the value must be finite")
        if metric.startswith("p"):
            try:
                percentile = float(metric[1:])
            except ValueError:
                raise ValueError(
                    f"{text!r}: {metric!r} is not a percentile such as p99 or p99.9"
                ) from None
            if not 0 < percentile <= 100:
                raise ValueError(f"{text!r}: the percentile must be in (0, 100]")
            scale = LATENCY_UNITS.get(unit) if unit else None
            if scale is None:
                scale = LATENCY_UNITS.get(unit.lower()) if unit else None
            if scale is None:
                raise ValueError(f"{text!r}: a latency needs a unit: ns, us, µs, ms or s")
            return cls(expression, "latency", op, number * scale, percentile)
        if unit not in ("", "%"):
            raise ValueError(
                f"{text!r}: {metric} is a fraction (0.01) or a percentage (1%), not {unit!r}"
            )
        threshold = number / 100.0 if unit == "%" else number
        name = "error_rate" if metric == "error_rate" else "achieved_ratio"
        return cls(expression, name, op, threshold)

    def value(self, measures: Measures) -> float | None:
        """The measured left-hand side, or None when there is no such data."""
        if self.metric == "latency":
            return measures.latency.get(_latency_key(self.percentile or 0.0))
        if self.metric == "error_rate":
            return measures.error_rate
        if measures.requested_rps <= 0:
            # rps 0 (as fast as possible) requests no particular rate: nothing to compare.
            return None
        return measures.achieved_rps / measures.requested_rps

    def check(self, measures: Measures) -> SloCheck:
        """Evaluate on one measurement. A missing value (no latency samples at all) fails: a
        step that produced no responses cannot be said to meet a latency objective."""
        value = self.value(measures)
        passed = value is not None and _OPERATORS[self.op](value, self.threshold)
        return SloCheck(expression=self.expression, value=value, passed=passed)


def _latency_key(percentile: float) -> str:
    # A StepRecord's keys are 'p50', 'p90', 'p99', 'p99.9'; other percentiles are added to
    # the record under the same spelling by the sweep (see `latency_points`).
    return f"p{percentile:g}"


def parse_rule(text: object) -> StopRule:
    """Parse one ``--stop-on-slo`` expression; OptionsError (option 'stop_on_slo') naming the
    flag and what is wrong: ``--stop-on-slo 'p99<5': a latency needs a unit: ...``."""
    try:
        return StopRule.parse(text)
    except ValueError as exc:
        raise OptionsError(f"--stop-on-slo {exc}", option="stop_on_slo") from None


def parse_rules(texts: Iterable[object]) -> list[StopRule]:
    """Parse every expression (the first bad one raises)."""
    return [parse_rule(text) for text in texts]


def latency_points(rules: Iterable[StopRule]) -> list[float]:
    """The percentiles (0-100) the rules refer to, so that a sweep records each of them."""
    return sorted({rule.percentile for rule in rules if rule.percentile is not None})


# --------------------------------------------------------------------------------------------
# Writing checks for people
# --------------------------------------------------------------------------------------------


def format_check(check: SloCheck) -> str:
    """A check in words, the one spelling every output uses: ``p99<5ms (was 7.21 ms)``,
    ``error_rate<0.1% (was 0.25%)``, ``not blocked (was 12)``, ``... (no data)``.

    The value is written in the unit of the rule's metric; the checks a sweep adds that are
    not rules (``not blocked``, ``failure predicate benchmark.http_5xx``) carry counts.
    """
    if check.value is None:
        return f"{check.expression} (no data)"
    try:
        rule: StopRule | None = StopRule.parse(check.expression)
    except ValueError:
        rule = None
    value = check.value
    if rule is None:
        shown = str(int(value)) if value.is_integer() else f"{value:.4g}"
    elif rule.metric == "latency":
        shown = format_latency(value)
    elif rule.metric == "error_rate":
        shown = f"{value * 100:.3g}%"
    else:
        shown = f"{value:.4g}"
    return f"{check.expression} (was {shown})"
