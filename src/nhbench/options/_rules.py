"""Service-level-objective rules in the style of k6 thresholds: ``p99<5ms``,
``error_rate<0.1%``, ``rps>=1990``, ``benchmark.http_5xx==0``.

A rule is ``METRIC OPERATOR VALUE`` and states what a *passing* measurement looks like, as
k6's thresholds do: ``p99<5ms`` passes while the p99 is below 5 ms. Metrics:

* ``p50``, ``p90``, ``p99``, ``p99.9``, any ``pNN`` (also k6's ``p(99)``), ``min``, ``max``,
  ``mean``: the headline latency, `benchmark_http_client.scheduled_to_response` (scheduled
  send to response end, coordinated-omission corrected). The value needs a unit: ``ns``,
  ``us`` (or ``µs``), ``ms`` or ``s``; k6's implicit milliseconds are not guessed.
* ``STATISTIC:FIELD``: any statistic by name, FIELD one of the above
  (``benchmark_http_client.request_to_response:p99<2ms``). The size statistics
  (``benchmark_http_client.response_body_size:max<=1024``) are plain numbers (bytes, an
  optional ``B``) and have min, max and mean only.
* ``error_rate``: failed requests over finished requests (`nhbench._names.error_rate`), as a
  fraction (``0.001``) or a percentage (``0.1%``).
* ``achieved/requested``: 2xx responses per second over the requested total rate, as a
  fraction or a percentage.
* ``rps``: the achieved rate, 2xx responses per second.
* ``errors``: the error count (`nhbench._names.error_total`); ``blocked``: releases the
  sequencer could not make on time plus requests dropped before sending
  (``sequencer.blocking`` samples + ``benchmark.pool_overflow``).
* any counter by name: ``benchmark.http_5xx==0``, ``upstream_cx_total<=10``.

Operators: ``<``, ``<=``, ``>``, ``>=``, ``==``.

This module is the grammar and the evaluation, nothing else: `StopRule.parse` reads one rule,
`StopRule.check` evaluates it on anything that has the `Measures` attributes (a sweep's
`StepRecord` has them; `nhbench._slo.ResultMeasures` gives them for a `Result`, with the
statistics and counters by name of `DetailedMeasures`), giving a `SloCheck`, and
`format_check` is the one way a check is written for people (progress lines, stop reasons,
reports, the SLO verdict table). It sits with the options so that `SweepOptions` and
`Options` validate ``--stop-on-slo`` and ``--slo`` before anything runs.
"""

from __future__ import annotations

import difflib
import math
import operator
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from .._exceptions import OptionsError
from .._format import format_latency
from .._names import COUNTERS, HISTOGRAM_IDS, SCHEDULED_TO_RESPONSE, STREAM_IDS, is_counter
from ._values import LATENCY_UNITS

__all__ = [
    "HEADLINE_STATISTIC",
    "DetailedMeasures",
    "Measures",
    "SloCheck",
    "StopRule",
    "format_check",
    "format_rule_value",
    "latency_points",
    "parse_rule",
    "parse_rules",
]

#: The statistic a percentile without a statistic name refers to.
HEADLINE_STATISTIC = SCHEDULED_TO_RESPONSE

_OPERATORS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "==": operator.eq,
    "<": operator.lt,
    ">": operator.gt,
}
_NUMBER = r"[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?|\.[0-9]+(?:[eE][-+]?[0-9]+)?"
# The metric is checked word by word in `_parse_metric`; the pattern only splits the rule at
# its operator, so that an unknown metric gets a message naming it.
_RULE = re.compile(
    r"^\s*(?P<metric>[A-Za-z0-9_.:/()\s-]+?)"
    r"\s*(?P<op><=|>=|==|<|>)\s*"
    rf"(?P<number>{_NUMBER})\s*(?P<unit>[a-zµμ%]*)\s*$",
    re.IGNORECASE,
)
_POINT = re.compile(r"^p(?:\((?P<paren>[^)]*)\)|(?P<bare>[0-9.]+))$")
_GRAMMAR = (
    "expected METRIC OP VALUE such as 'p99<5ms', 'error_rate<0.1%', 'rps>=1990' or "
    "'benchmark.http_5xx==0' (metrics pNN, min, max, mean, STATISTIC:pNN, error_rate, "
    "achieved/requested, rps, errors, blocked or a counter name; operators < <= > >= ==)"
)
# Metrics that are a fraction (or a percentage), and those that are a plain number.
_RATIOS = {"error_rate": "error_rate", "achieved/requested": "achieved_ratio"}
_NUMBERS = ("rps", "errors", "blocked")
_FIELDS = ("min", "max", "mean")
# check:NAME, a response check's pass share.
_CHECK_METRIC = re.compile(r"check:([A-Za-z0-9_-]{1,64})")
# group:NAME:RULE, a rule on one group of a run with --group-by (docs/engine.md "Groups").
# A group's rule has no colon, so NAME is everything up to the last one: targets
# (host:port) and header values may hold colons.
_GROUP_RULE = re.compile(r"group:(.{1,128}):([^:]+)", re.DOTALL)
_GROUP_METRICS = ("latency", "error_rate", "errors")


class SloCheck(BaseModel):
    """One rule evaluated on one measurement (a sweep's step, a run's `Result`)."""

    # defer_build: built on first use, not at import (docs/benchmarks.md, "Start-up").
    model_config = ConfigDict(extra="forbid", defer_build=True)

    expression: str
    value: float | None = Field(description="The measured left-hand side (None: no data).")
    passed: bool


class Measures(Protocol):
    """What every rule reads: a sweep's `StepRecord` has these attributes.

    `latency` maps ``"p50"``, ``"p99.9"``… (the percentile spelt with ``:g``) of the headline
    latency to seconds, or None when there were no samples. `error_rate` is a fraction,
    `blocked_count` blocked releases plus pool overflows, `error_count` the error total.
    """

    @property
    def latency(self) -> Mapping[str, float | None]: ...
    @property
    def error_rate(self) -> float: ...
    @property
    def achieved_rps(self) -> float: ...
    @property
    def requested_rps(self) -> float: ...
    @property
    def blocked_count(self) -> int: ...
    @property
    def error_count(self) -> int: ...


@runtime_checkable
class DetailedMeasures(Protocol):
    """What a whole `Result` offers on top of `Measures`: any statistic and counter by name.

    A measurement without these (a sweep's `StepRecord` keeps only the headline percentiles)
    answers rules about other statistics and counters with "no data", which fails them.
    """

    def statistic_value(self, statistic: str, field: str) -> float | None:
        """`field` ('p99', 'p99.9', 'min', 'max', 'mean') of `statistic`; None: no samples."""
        ...

    def counter_value(self, name: str) -> int | None:
        """The counter's value; None when the measurement has no such counter."""
        ...


@dataclass(frozen=True)
class StopRule:
    """A parsed rule.

    `metric` is 'latency' (a latency statistic, seconds), 'size' (a size statistic, bytes),
    'error_rate' and 'achieved_ratio' (fractions), 'rps', 'errors', 'blocked' or 'counter'.
    For 'latency' and 'size', `statistic` is the statistic's id (`HEADLINE_STATISTIC` when
    the rule names none) and `field` the point read from it ('p99', 'min', 'max', 'mean');
    `percentile` is that point in percent (0-100) when it is a percentile. `counter` is the
    counter's name for 'counter'. `limit` is the value as written (``5ms``, ``0.1%``).

    ``str(rule)`` is the expression as it was written (without surrounding blanks): that is
    what the manifest keeps and what every message shows.
    """

    expression: str
    metric: str
    op: str
    threshold: float
    percentile: float | None = None
    statistic: str | None = None
    field: str | None = None
    counter: str | None = None
    limit: str = ""
    group: str | None = None  # group:NAME:RULE: the rule reads that group's figures

    def __str__(self) -> str:
        return self.expression

    @classmethod
    def parse(cls, text: object) -> StopRule:
        """Parse one expression; ValueError ``'<text>': <what is wrong>`` otherwise."""
        if isinstance(text, StopRule):
            return text
        expression = str(text).strip()
        grouped = _GROUP_RULE.fullmatch(expression)
        if grouped is not None:
            # A group's figures (--group-by): pNN/min/max/mean of its uncorrected latency
            # (request_to_response: the corrected one is run-wide), error_rate, errors.
            inner = cls.parse(grouped[2])
            # group:NAME:STATISTIC:pNN reads a statistic a group does not keep.
            named = grouped[1].rpartition(":")[2].strip()
            if inner.metric not in _GROUP_METRICS or inner.group is not None or (
                    inner.metric == "latency" and inner.statistic != HEADLINE_STATISTIC) or (
                    named in HISTOGRAM_IDS or named in STREAM_IDS):
                raise ValueError(f"{text!r}: a group's rule reads pNN, min, max, mean, "
                                 "error_rate or errors (group:NAME:p99<5ms)")
            return replace(inner, expression=expression, group=grouped[1].strip())
        match = _RULE.match(expression)
        if match is None:
            raise ValueError(f"{text!r}: {_GRAMMAR}")
        op = match["op"]
        number = float(match["number"])
        unit = match["unit"]
        limit = f"{match['number']}{unit}"
        if not math.isfinite(number):
            raise ValueError(f"{text!r}: the value must be finite")
        check = _CHECK_METRIC.fullmatch(match["metric"].strip())
        if check is not None:
            # A response check's pass share (docs/checks.md): check.NAME.pass over its pass
            # plus fail counters.
            if unit not in ("", "%"):
                raise ValueError(f"{text!r}: a check's pass share is a fraction (0.999) or a "
                                 f"percentage (99.9%), not {unit!r}")
            threshold = number / 100.0 if unit == "%" else number
            return cls(expression, "check", op, threshold, counter=check[1], limit=limit)
        if match["metric"].strip().lower().startswith("check:"):
            raise ValueError(f"{text!r}: a check is named check:NAME (letters, digits, _ and -)")
        metric, statistic, field, percentile = _parse_metric(text, match["metric"])
        if metric == "latency":
            scale = LATENCY_UNITS.get(unit) if unit else None
            if scale is None:
                scale = LATENCY_UNITS.get(unit.lower()) if unit else None
            if scale is None:
                raise ValueError(f"{text!r}: a latency needs a unit: ns, us, µs, ms or s")
            return cls(expression, "latency", op, number * scale, percentile,
                       statistic=statistic, field=field, limit=limit)
        if metric == "size":
            if unit not in ("", "b", "B"):
                raise ValueError(f"{text!r}: {statistic} is a size in bytes (1024 or 1024B), "
                                 f"not {unit!r}")
            return cls(expression, "size", op, number, statistic=statistic, field=field,
                       limit=limit)
        if metric in _RATIOS:
            if unit not in ("", "%"):
                raise ValueError(
                    f"{text!r}: {metric} is a fraction (0.01) or a percentage (1%), not {unit!r}"
                )
            threshold = number / 100.0 if unit == "%" else number
            return cls(expression, _RATIOS[metric], op, threshold, limit=limit)
        if unit:
            what = "a rate in responses per second" if metric == "rps" else "a count"
            raise ValueError(f"{text!r}: {metric} is {what}, a plain number without {unit!r}")
        if metric in _NUMBERS:
            return cls(expression, metric, op, number, limit=limit)
        return cls(expression, "counter", op, number, counter=metric, limit=limit)

    @classmethod
    def for_metric(cls, text: str) -> StopRule:
        """A rule's left-hand side alone (``p99``, ``rps``, ``STAT:max``), as a rule that
        reads it (its operator and threshold mean nothing): what compares two results
        metric by metric (the pytest plugin's ``--nhbench-compare-fail p99:10%``) uses to
        read and write a value. ValueError as `parse`."""
        raw = str(text).strip()
        if not raw or not re.fullmatch(r"[A-Za-z0-9_.:/()\s]+", raw):
            raise ValueError(f"{text!r}: expected a metric such as p99, max, rps or "
                             f"error_rate")
        metric, statistic, field, percentile = _parse_metric(text, raw)
        kind = _RATIOS.get(metric, metric)
        if kind not in ("latency", "size", *_RATIOS.values(), *_NUMBERS):
            return cls(raw, "counter", "<=", 0.0, counter=metric)
        return cls(raw, kind, "<=", 0.0, percentile, statistic=statistic, field=field)

    @property
    def headline(self) -> bool:
        """The rule reads the headline (coordinated-omission-corrected) latency."""
        return self.metric == "latency" and self.statistic == HEADLINE_STATISTIC \
            and self.group is None

    def value(self, measures: Measures) -> float | None:
        """The measured left-hand side, or None when there is no such data."""
        if self.group is not None:
            # No such group (or a measurement without groups): no data, which fails.
            view = getattr(measures, "group_measures", None)
            group = view(self.group) if view is not None else None
            return None if group is None else replace(self, group=None).value(group)
        if self.metric in ("latency", "size"):
            if isinstance(measures, DetailedMeasures):
                return measures.statistic_value(self.statistic or "", self.field or "")
            if self.headline and self.percentile is not None:
                return measures.latency.get(_latency_key(self.percentile))
            return None
        if self.metric == "error_rate":
            return measures.error_rate
        if self.metric == "achieved_ratio":
            if measures.requested_rps <= 0:
                # rps 0 (as fast as possible) requests no particular rate: nothing to compare.
                return None
            return measures.achieved_rps / measures.requested_rps
        if self.metric == "rps":
            return measures.achieved_rps
        if self.metric == "errors":
            return float(measures.error_count)
        if self.metric == "blocked":
            return float(measures.blocked_count)
        if self.metric == "check":
            # No data (no such check, or no response judged by it) fails the rule.
            if not isinstance(measures, DetailedMeasures):
                return None
            passed = measures.counter_value(f"check.{self.counter}.pass")
            failed = measures.counter_value(f"check.{self.counter}.fail")
            if passed is None or failed is None or passed + failed == 0:
                return None
            return passed / (passed + failed)
        if isinstance(measures, DetailedMeasures):
            count = measures.counter_value(self.counter or "")
            return None if count is None else float(count)
        return None

    def check(self, measures: Measures) -> SloCheck:
        """Evaluate on one measurement. A missing value (no latency samples at all) fails: a
        step that produced no responses cannot be said to meet a latency objective."""
        value = self.value(measures)
        passed = value is not None and _OPERATORS[self.op](value, self.threshold)
        return SloCheck(expression=self.expression, value=value, passed=passed)

    def describe(self) -> str:
        """What the metric is, in words: ``p99 of benchmark_http_client.scheduled_to_response
        (coordinated-omission corrected)``, ``error rate (errors / finished requests)``."""
        if self.group is not None:
            inner = replace(self, group=None)
            if self.metric == "latency":
                return f"group {self.group}: {self.field} of its request_to_response"
            return f"group {self.group}: {inner.describe()}"
        if self.metric in ("latency", "size"):
            what = f"{self.field} of {self.statistic}"
            if self.headline:
                what += " (coordinated-omission corrected)"
            return what
        return {
            "error_rate": "error rate (errors / finished requests)",
            "achieved_ratio": "achieved rate / requested rate",
            "rps": "achieved rate (2xx responses per second)",
            "errors": "errors (non-2xx responses, failed connections, resets, time-outs)",
            "blocked": "blocked releases + requests dropped before sending",
            "check": f"share of responses that passed check {self.counter}",
        }.get(self.metric, f"counter {self.counter}")


def _parse_metric(text: object, raw: str) -> tuple[str, str | None, str | None, float | None]:
    """(metric, statistic, field, percentile) of a rule's left-hand side; ValueError naming
    what is wrong otherwise."""
    metric = re.sub(r"\s+", "", raw).lower()
    statistic: str | None
    if ":" in metric:
        statistic, _, point = metric.rpartition(":")
        if statistic not in HISTOGRAM_IDS and statistic not in STREAM_IDS:
            raise ValueError(f"{text!r}: unknown statistic {statistic!r}"
                             f"{_did_you_mean(statistic, (*HISTOGRAM_IDS, *STREAM_IDS))}")
    else:
        statistic, point = None, metric
    field, percentile = _parse_point(text, point, statistic is not None)
    if field is not None:
        statistic = statistic or HEADLINE_STATISTIC
        if statistic in STREAM_IDS:
            if percentile is not None:
                raise ValueError(f"{text!r}: {statistic} has no percentiles (a size "
                                 f"statistic): use min, max or mean")
            return "size", statistic, field, None
        return "latency", statistic, field, percentile
    if metric in _RATIOS or metric in _NUMBERS or is_counter(metric):
        return metric, None, None, None
    if metric in HISTOGRAM_IDS or metric in STREAM_IDS:
        raise ValueError(f"{text!r}: a statistic needs a field: '{metric}:p99' (pNN, min, "
                         f"max or mean)")
    known = (*_RATIOS, *_NUMBERS, *_FIELDS, "p99", *COUNTERS)
    raise ValueError(f"{text!r}: unknown metric {metric!r}{_did_you_mean(metric, known)}; "
                     f"{_GRAMMAR}")


def _parse_point(text: object, point: str, named: bool) -> tuple[str | None, float | None]:
    """('p99.9', 99.9), ('max', None)... or (None, None) when `point` is not a point."""
    if point in _FIELDS:
        return point, None
    match = _POINT.match(point)
    if match is None:
        if named:
            raise ValueError(f"{text!r}: {point!r} is not a statistic field: pNN, min, max or "
                             f"mean")
        return None, None
    digits = match["paren"] if match["paren"] is not None else match["bare"]
    try:
        percentile = float(digits)
    except ValueError:
        raise ValueError(
            f"{text!r}: {point!r} is not a percentile such as p99 or p99.9"
        ) from None
    if not 0 < percentile <= 100:
        raise ValueError(f"{text!r}: the percentile must be in (0, 100]")
    return _latency_key(percentile), percentile


def _did_you_mean(name: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.75)
    return f" (did you mean {close[0]}?)" if close else ""


def _latency_key(percentile: float) -> str:
    # A StepRecord's keys are 'p50', 'p90', 'p99', 'p99.9'; other percentiles are added to
    # the record under the same spelling by the sweep (see `latency_points`).
    return f"p{percentile:g}"


def parse_rule(text: object, *, flag: str = "--stop-on-slo",
               option: str | None = "stop_on_slo") -> StopRule:
    """Parse one expression; OptionsError naming `flag` and what is wrong:
    ``--stop-on-slo 'p99<5': a latency needs a unit: ...`` (`option` goes on the error)."""
    try:
        return StopRule.parse(text)
    except ValueError as exc:
        raise OptionsError(f"{flag} {exc}", option=option) from None


def parse_rules(texts: Iterable[object], *, flag: str = "--stop-on-slo",
                option: str | None = "stop_on_slo") -> list[StopRule]:
    """Parse every expression (the first bad one raises)."""
    return [parse_rule(text, flag=flag, option=option) for text in texts]


def latency_points(rules: Iterable[StopRule]) -> list[float]:
    """The headline percentiles (0-100) the rules refer to, so that a sweep records each."""
    return sorted({rule.percentile for rule in rules
                   if rule.percentile is not None and rule.headline})


# --------------------------------------------------------------------------------------------
# Writing checks for people
# --------------------------------------------------------------------------------------------


def _count(value: float) -> str:
    return str(int(value)) if value.is_integer() else f"{value:.4g}"


def format_rule_value(rule: StopRule | None, value: float | None) -> str:
    """A measured value (or a threshold) in the unit of `rule`'s metric: ``7.21 ms``,
    ``0.25%``, ``1999.8``, ``12``; ``-`` for no value. Without a rule, a count."""
    if value is None:
        return "-"
    if rule is None or rule.metric in ("errors", "blocked", "counter"):
        return _count(value)
    if rule.metric == "latency":
        return format_latency(value)
    if rule.metric == "error_rate":
        return f"{value * 100:.3g}%"
    if rule.metric == "check":
        return f"{value * 100:.4g}%"
    if rule.metric == "size":
        return f"{_count(value)} B"
    if rule.metric == "rps":
        return f"{value:.1f}"
    return f"{value:.4g}"


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
    return f"{check.expression} (was {format_rule_value(rule, check.value)})"
