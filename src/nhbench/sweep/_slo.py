"""Stop rules on a sweep's steps.

The grammar (``p99<5ms``, ``error_rate<0.1%``, ``achieved/requested>0.95``), `StopRule` and
the one formatter of a check live in `nhbench.options` (``options/_rules.py``), where
`SweepOptions` validates ``--stop-on-slo`` before anything runs; this module evaluates the
rules on a finished step (its `Result`, read as `Result.check_slo` reads it).
"""

from __future__ import annotations

from collections.abc import Iterable

from ..campaign import SloCheck
from ..options import Measures, StopRule, latency_points, parse_rule, parse_rules

__all__ = ["StopRule", "evaluate_rules", "latency_points", "parse_rule", "parse_rules"]


def evaluate_rules(rules: Iterable[StopRule], measures: Measures) -> list[SloCheck]:
    """One SloCheck per rule, in the order given, on a step's `StepRecord` or (what the loop
    passes) its Result as `nhbench._slo.ResultMeasures`."""
    return [rule.check(measures) for rule in rules]
