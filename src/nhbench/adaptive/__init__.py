"""Adaptive load search: the highest rate that still meets the SLO (``nhbench adapt``).

Exponential search up from --min-rps, then binary search between the highest passing and the
lowest failing rate, each step a full measured run recorded in a campaign directory (the
sweep's store, resume, captures and reports), until the bracket is within --precision; then,
optionally, repeat runs at the answer to confirm it. docs/adapt.md.

The package is ``adaptive`` so that ``nhbench.adapt`` stays the function whatever was
imported first (a subpackage named ``adapt`` would replace that attribute once imported).

``_search``: the search as a pure function of the recorded outcomes (`replay`);
``_strategy``: the search as the sweep loop's step strategy, writing its state into the
manifest; ``_run``: settings -> `AdaptConfig`, `AdaptOutcome` and `adapt`.
"""

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

