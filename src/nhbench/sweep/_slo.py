"""Stop rules on a sweep's steps.

The grammar (``p99<5ms``, ``error_rate<0.1%``, ``achieved/requested>0.95``), `StopRule` and
the one formatter of a check live in `nhbench.options` (``options/_rules.py``), where
`SweepOptions` validates ``--stop-on-slo`` before anything runs; this module evaluates the
rules on a finished step's `StepRecord`.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..campaign import SloCheck, StepRecord
from ..options import StopRule, latency_points, parse_rule, parse_rules

__all__ = ["StopRule", "evaluate_rules", "latency_points", "parse_rule", "parse_rules"]


def evaluate_rules(rules: Iterable[StopRule], record: StepRecord) -> list[SloCheck]:
    """One SloCheck per rule, in the order given."""
    return [rule.check(record) for rule in rules]
