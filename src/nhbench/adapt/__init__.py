"""Adaptive load search: the highest rate that still meets the SLO (``nhbench adapt``).

Exponential search up from --min-rps, then binary search between the highest passing and the
lowest failing rate, each step a full measured run recorded in a campaign directory (the
sweep's store, resume, captures and reports), until the bracket is within --precision; then,
optionally, repeat runs at the answer to confirm it. docs/adapt.md.

``_search``: the search as a pure function of the recorded outcomes (`replay`);
``_strategy``: the search as the sweep loop's step strategy, writing its state into the
manifest; ``_run``: settings -> `AdaptConfig`, `AdaptOutcome` and `adapt`.
"""

import sys
import types
from typing import Any

from ._run import (
    SLO_FAILED,
    AdaptConfig,
    AdaptOutcome,
    adapt,
    outcome_of,
    prepare_adapt,
    settings_for_resume,
)
from ._search import Outcome, SearchSettings, SearchState, replay
from ._strategy import AdaptStrategy, search_settings

__all__ = [
    "SLO_FAILED",
    "AdaptConfig",
    "AdaptOutcome",
    "AdaptStrategy",
    "Outcome",
    "SearchSettings",
    "SearchState",
    "adapt",
    "outcome_of",
    "prepare_adapt",
    "replay",
    "search_settings",
    "settings_for_resume",
]


class _CallablePackage(types.ModuleType):
    """``nhbench.adapt`` is both this package and, lazily, the `adapt` function. Once the
    package is imported (``from nhbench.adapt import AdaptOutcome``, or by the CLI), the
    import system makes ``nhbench.adapt`` the package; calling the package calls `adapt`, so
    ``nhbench.adapt(url, slo=[...])`` works whatever was imported first."""

    def __call__(self, *args: Any, **kwargs: Any) -> AdaptOutcome:
        return adapt(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
