"""The search itself, as a pure function of the settings and the recorded step outcomes.

`replay` walks the outcomes (rate and verdict of each step, in order) through the search and
returns its state: the bracket, the phase, the next rate or why it ended. Nothing here runs
a benchmark, so the sequence of rates for any boundary can be tested without a server, and a
resumed campaign continues exactly where it stopped: replaying its recorded steps gives the
same state, hence the same next rate (a recorded rate that the search would not have asked
for is refused with a CampaignError: other search settings, or a manifest edited by hand).

The search (docs/adapt.md):

* exponential phase: the first step is at ``min_rps``; while every step passed, the next is
  the last times ``growth``, capped at ``max_rps``. A pass at ``max_rps`` ends the search
  ("max-rps passed"); a failure at ``min_rps`` ends it with no answer ("min-rps failed").
* binary phase, once a step failed above a passing one: the next rate is the middle of the
  bracket (highest passing, lowest failing); a pass raises the bottom, a failure lowers the
  top, until ``failing - passing <= precision`` ("converged"; precision is a fraction of the
  passing rate, or an absolute rate per worker).
* ``max_steps`` search steps at most ("step limit"); the answer is then the highest passing
  rate so far, with the bracket not yet narrow enough.
* confirmation: with ``confirm`` N > 0 and an answer, N more steps at the answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from .._exceptions import CampaignError
from ..options import round_rate

__all__ = ["Outcome", "SearchSettings", "SearchState", "replay"]

Phase = Literal["exponential", "binary", "confirm", "done"]
Reason = Literal["converged", "max-rps passed", "min-rps failed", "step limit"]


@dataclass(frozen=True)
class SearchSettings:
    """The search's parameters, per-worker rates as everywhere in a campaign."""

    min_rps: float
    max_rps: float
    growth: float = 2.0
    precision: float = 0.02
    precision_relative: bool = True
    max_steps: int = 30
    confirm: int = 0

    def width(self, passing: float) -> float:
        """The bracket width at which the search has converged, above `passing`."""
        return self.precision * passing if self.precision_relative else self.precision


@dataclass(frozen=True)
class Outcome:
    """One recorded step as the search sees it: its index, rate and verdict."""

    index: int
    rate: float
    passed: bool


@dataclass
class SearchState:
    """Where the search is after the outcomes replayed so far."""

    phase: Phase = "exponential"
    search_steps: int = 0
    passing: Outcome | None = None
    failing: Outcome | None = None
    reason: Reason | None = None
    next_rate: float | None = None
    confirmations: list[Outcome] = field(default_factory=list)

    @property
    def answer(self) -> float | None:
        """The highest passing rate, once the search ended (None before, or with none)."""
        if self.reason is None or self.passing is None:
            return None
        return self.passing.rate


def _advance(settings: SearchSettings, state: SearchState, steps: int) -> None:
    """Decide what comes after the outcomes taken so far (`steps` recorded in all)."""
    if state.phase in ("exponential", "binary"):
        passing, failing = state.passing, state.failing
        reason: Reason | None = None
        if steps == 0:
            state.next_rate = round_rate(settings.min_rps)
            return
        if passing is None:
            # Only a failure at min_rps can leave no passing step: the search starts there.
            reason = "min-rps failed"
        elif failing is None and passing.rate >= settings.max_rps:
            reason = "max-rps passed"
        elif failing is not None and failing.rate - passing.rate <= settings.width(passing.rate):
            reason = "converged"
        elif state.search_steps >= settings.max_steps:
            reason = "step limit"
        if reason is None:
            assert passing is not None
            if failing is None:
                state.next_rate = round_rate(min(passing.rate * settings.growth,
                                                 settings.max_rps))
            else:
                state.next_rate = round_rate((passing.rate + failing.rate) / 2)
            return
        state.reason = reason
        state.phase = "confirm" if settings.confirm > 0 and state.answer is not None else "done"
    if state.phase == "confirm":
        if len(state.confirmations) < settings.confirm:
            state.next_rate = state.answer
            return
        state.phase = "done"
    state.next_rate = None


def _take(state: SearchState, outcome: Outcome) -> None:
    if state.phase == "confirm":
        state.confirmations.append(outcome)
        return
    state.search_steps += 1
    if outcome.passed:
        if state.passing is None or outcome.rate >= state.passing.rate:
            state.passing = outcome
    elif state.failing is None or outcome.rate <= state.failing.rate:
        state.failing = outcome
    if state.failing is not None:
        state.phase = "binary"


def replay(settings: SearchSettings, outcomes: Sequence[Outcome]) -> SearchState:
    """The search's state after `outcomes` (in run order). CampaignError when a step's rate
    is not the one the search asked for, or a step follows the end of the search."""
    state = SearchState()
    _advance(settings, state, 0)
    for count, outcome in enumerate(outcomes, start=1):
        expected = state.next_rate
        if expected is None:
            raise CampaignError(
                f"step {outcome.index} follows the end of the search ({state.reason}); the "
                f"campaign was not run with these search settings")
        if abs(outcome.rate - expected) > 1e-6 * max(1.0, expected):
            raise CampaignError(
                f"step {outcome.index} ran at {outcome.rate:g} rps where the search asks for "
                f"{expected:g}; the campaign was run with other search settings")
        _take(state, outcome)
        _advance(settings, state, count)
    return state
