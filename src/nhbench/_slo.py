"""SLO rules evaluated on a run's `Result`: `check_slo` gives a structured `SloOutcome`,
`assert_slo` raises `SloError` (an AssertionError too, so pytest shows a failed assertion).

The grammar and the evaluation of one rule are the sweep's (`nhbench.options.StopRule`, in
``options/_rules.py``); this module only adapts a `Result` to what a rule reads
(`ResultMeasures`: the `Measures` a sweep's step has, plus every statistic and counter by
name) and writes the verdict for people: one row per rule (measured against threshold) and a
compact percentile table, readable in a CI log without opening anything. The sweep evaluates
its stop rules through `ResultMeasures` too, so a rule means the same in ``nhbench run
--slo``, in a test and in ``nhbench sweep --stop-on-slo``.

It sits below `_result` (``Result.check_slo`` calls it) and knows `Result` only as a type.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._exceptions import OptionsError, SloError
from ._format import format_latency
from ._names import SEQUENCER_BLOCKING, blocked_total, error_rate, error_total
from .options import (
    HEADLINE_STATISTIC,
    SloCheck,
    StopRule,
    format_rule_value,
    parse_rule,
)

if TYPE_CHECKING:
    from ._result import GroupResult, Result, Statistic

__all__ = [
    "ResultMeasures",
    "SloOutcome",
    "SloVerdict",
    "assert_slo",
    "check_slo",
    "parse_slo_rules",
]

#: The percentiles of the compact table under a verdict (plus min, max and any percentile a
#: rule names).
TABLE_POINTS = (50.0, 90.0, 99.0, 99.9, 99.99)

_UNITS = {"latency": "s", "size": "B", "error_rate": "fraction", "achieved_ratio": "fraction",
          "rps": "rps", "errors": "count", "blocked": "count", "counter": "count",
          "check": "fraction"}


class _LatencyView(Mapping[str, "float | None"]):
    """The headline percentiles by ``"p99"``-style key, computed when asked for."""

    def __init__(self, measures: ResultMeasures) -> None:
        self._measures = measures

    def __getitem__(self, key: str) -> float | None:
        if not key.startswith("p"):
            raise KeyError(key)
        return self._measures.statistic_value(HEADLINE_STATISTIC, key)

    def __iter__(self) -> Iterator[str]:
        return iter(f"p{point:g}" for point in TABLE_POINTS)

    def __len__(self) -> int:
        return len(TABLE_POINTS)


class ResultMeasures:
    """A `Result` as rules read it: the `Measures` of a sweep's step (headline percentiles,
    error rate, rates, blocked and error counts) and `DetailedMeasures` (any statistic or
    counter by name). The definitions are `Result`'s own and `nhbench._names`' (the error
    count and rate every report uses)."""

    def __init__(self, result: Result) -> None:
        self._result = result
        self.latency: Mapping[str, float | None] = _LatencyView(self)

    @property
    def error_rate(self) -> float:
        return error_rate(self._result.counters)

    @property
    def error_count(self) -> int:
        return error_total(self._result.counters)

    @property
    def achieved_rps(self) -> float:
        return self._result.achieved_rps

    @property
    def requested_rps(self) -> float:
        return self._result.requested_rps

    @property
    def blocked_count(self) -> int:
        return blocked_total(self._result.counters, _samples(self._result, SEQUENCER_BLOCKING))

    def statistic_value(self, statistic: str, field: str) -> float | None:
        try:
            stat = self._result.stat(statistic)
        except KeyError:
            return None
        return _field_of(stat, field)

    def counter_value(self, name: str) -> int | None:
        try:
            return int(self._result.counters[name])
        except KeyError:
            return None

    def group_measures(self, name: str) -> _GroupMeasures | None:
        """One group's figures for a ``group:NAME:RULE`` (None: no such group)."""
        groups = self._result.groups
        for group in groups.groups if groups is not None else ():
            if group.name == name:
                return _GroupMeasures(group)
        return None


def _field_of(stat: Statistic, field: str) -> float | None:
    """A rule's field of a statistic: min, max, mean or pNN; None without data."""
    if stat.count == 0:
        return None
    if field in ("min", "max", "mean"):
        return float(getattr(stat, field))
    try:
        return stat.p(float(field[1:]))
    except ValueError:
        return None


class _GroupMeasures:
    """What a ``group:NAME:RULE`` reads (docs/engine.md "Groups"): the group's own
    request_to_response for any latency point, its error rate and errors; no counters."""

    def __init__(self, group: GroupResult) -> None:
        self._group = group
        self.latency: Mapping[str, float | None] = {}
        self.achieved_rps = self.requested_rps = 0.0
        self.blocked_count = 0

    @property
    def error_rate(self) -> float:
        return self._group.error_rate

    @property
    def error_count(self) -> int:
        return self._group.errors

    def statistic_value(self, statistic: str, field: str) -> float | None:
        del statistic
        return _field_of(self._group.latency, field)

    def counter_value(self, name: str) -> int | None:
        del name
        return None


def _samples(result: Result, statistic: str) -> int:
    try:
        return int(result.stat(statistic).count)
    except KeyError:
        return 0


@dataclass(frozen=True)
class SloVerdict:
    """One rule on one result: the rule, the measured value (None: no data, which fails),
    and whether it passed. `threshold` and `value` are in `unit`: seconds ('s'), bytes
    ('B'), a fraction, responses per second ('rps') or a count."""

    rule: StopRule
    value: float | None
    passed: bool

    @property
    def expression(self) -> str:
        return self.rule.expression

    @property
    def threshold(self) -> float:
        return self.rule.threshold

    @property
    def unit(self) -> str:
        return _UNITS[self.rule.metric]

    @property
    def measured(self) -> str:
        """The value in words, in the rule's unit: ``1.23 ms``, ``0.25%``, ``no data``."""
        return "no data" if self.value is None else format_rule_value(self.rule, self.value)

    @property
    def limit(self) -> str:
        """The threshold as the rule wrote it, with its operator: ``< 5ms``."""
        return f"{self.rule.op} {self.rule.limit}"

    @property
    def description(self) -> str:
        return self.rule.describe()

    def check(self) -> SloCheck:
        """The verdict as the sweep stores it."""
        return SloCheck(expression=self.expression, value=self.value, passed=self.passed)

    def __str__(self) -> str:
        verdict = "pass" if self.passed else "FAIL"
        return f"{verdict}: {self.expression} (measured {self.measured}; {self.description})"


@dataclass(frozen=True)
class SloOutcome:
    """Every rule evaluated on one `Result`. True when every rule passed.

    ``str(outcome)`` is the verdict table (one row per rule: verdict, rule, measured,
    threshold, what the metric is) followed by a compact percentile table of the latencies
    the rules read; `summary` is one line.
    """

    verdicts: tuple[SloVerdict, ...]
    result: Result | None = field(default=None, repr=False, compare=False)

    @property
    def passed(self) -> bool:
        return all(verdict.passed for verdict in self.verdicts)

    def __bool__(self) -> bool:
        return self.passed

    def __iter__(self) -> Iterator[SloVerdict]:
        return iter(self.verdicts)

    def __len__(self) -> int:
        return len(self.verdicts)

    @property
    def failed(self) -> list[SloVerdict]:
        return [verdict for verdict in self.verdicts if not verdict.passed]

    @property
    def checks(self) -> list[SloCheck]:
        return [verdict.check() for verdict in self.verdicts]

    def summary(self) -> str:
        """``SLO passed (2 rules)`` or ``SLO failed: 1 of 2 rules: p99<1ns (measured
        1.23 ms)``."""
        count = len(self.verdicts)
        if self.passed:
            return f"SLO passed ({count} rule{'s' if count != 1 else ''})"
        failed = self.failed
        listed = "; ".join(f"{v.expression} (measured {v.measured})" for v in failed)
        return f"SLO failed: {len(failed)} of {count} rule{'s' if count != 1 else ''}: {listed}"

    def table(self) -> str:
        """The verdict table: one row per rule."""
        rows = [("verdict", "rule", "measured", "threshold", "metric")]
        rows += [("pass" if v.passed else "FAIL", v.expression, v.measured, v.limit,
                  v.description) for v in self.verdicts]
        return "\n".join([self.summary(), *_columns(rows, indent=2)])

    def percentile_table(self) -> str:
        """Min, p50, p90, p99, p99.9, p99.99, max (and any percentile a rule names) of the
        headline latency and of every other latency statistic a rule reads, then the load
        (requested and achieved rate, errors)."""
        if self.result is None:
            return ""
        return percentile_table(self.result, [v.rule for v in self.verdicts])

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON-ready): passed, and per rule the rule, measured value, threshold,
        unit and verdict."""
        return {
            "passed": self.passed,
            "rules": [
                {"rule": v.expression, "value": v.value, "threshold": v.threshold,
                 "unit": v.unit, "passed": v.passed, "metric": v.description}
                for v in self.verdicts
            ],
        }

    def __str__(self) -> str:
        parts = [self.table()]
        table = self.percentile_table()
        if table:
            parts.append(table)
        return "\n".join(parts)


def percentile_table(result: Result, rules: Iterable[StopRule] = ()) -> str:
    """The compact latency table of `result` (see `SloOutcome.percentile_table`)."""
    rules = list(rules)
    points = sorted({*TABLE_POINTS, *(r.percentile for r in rules
                                      if r.metric == "latency" and r.percentile is not None)})
    statistics = [HEADLINE_STATISTIC]
    statistics += sorted({r.statistic for r in rules if r.metric == "latency"
                          and r.statistic and r.statistic != HEADLINE_STATISTIC})
    header = ("latency", "samples", "min", *(f"p{p:g}" for p in points), "max")
    rows: list[tuple[str, ...]] = [header]
    for stat_id in statistics:
        try:
            stat = result.stat(stat_id)
        except KeyError:
            continue
        name = stat_id + (" (CO-corrected)" if stat_id == HEADLINE_STATISTIC else "")
        rows.append((name, str(stat.count), *_points(stat, points)))
    requested = result.requested_rps
    asked = f"{requested:g} rps requested" if requested > 0 else "as fast as possible"
    errors = error_total(result.counters)
    load = (f"load: {asked}, {result.achieved_rps:.1f} achieved, {errors} "
            f"error{'s' if errors != 1 else ''}, {result.duration:.3g} s")
    return "\n".join([*_columns(rows, indent=2), "  " + load])


def _points(stat: Statistic, points: Iterable[float]) -> list[str]:
    if stat.count == 0:
        return ["-"] * (len(list(points)) + 2)
    values = [stat.min]
    for point in points:
        try:
            values.append(stat.p(point))
        except ValueError:
            values.append(math.nan)
    values.append(stat.max)
    return [format_latency(value) for value in values]


def _columns(rows: Sequence[tuple[str, ...]], indent: int = 0) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    pad = " " * indent
    return [pad + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
            for row in rows]


def parse_slo_rules(rules: Iterable[object]) -> list[StopRule]:
    """Rules from strings (or `StopRule`s, or lists of either); OptionsError ``SLO rule
    'p99<5': a latency needs a unit: ...`` for a malformed one, and for none at all: an
    objective that checks nothing cannot fail."""
    flat: list[object] = []
    for rule in rules:
        if isinstance(rule, (list, tuple)):
            flat.extend(rule)
        else:
            flat.append(rule)
    if not flat:
        raise OptionsError("SLO: no rule given (e.g. 'p99<5ms', 'error_rate<0.1%')")
    return [parse_rule(rule, flag="SLO rule", option=None) for rule in flat]


def check_slo(result: Result, *rules: object) -> SloOutcome:
    """Evaluate every rule on `result`; see `SloOutcome`."""
    parsed = parse_slo_rules(rules)
    measures = ResultMeasures(result)
    verdicts = []
    for rule in parsed:
        check = rule.check(measures)
        verdicts.append(SloVerdict(rule=rule, value=check.value, passed=check.passed))
    return SloOutcome(verdicts=tuple(verdicts), result=result)


def assert_slo(result: Result, *rules: object) -> SloOutcome:
    """`check_slo`, raising `SloError` (an AssertionError) with the verdict and percentile
    tables when a rule fails; the outcome otherwise."""
    outcome = check_slo(result, *rules)
    if not outcome:
        raise SloError(str(outcome), outcome=outcome)
    return outcome
