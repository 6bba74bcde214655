"""`AdaptStrategy`: the search as the sweep loop's step strategy.

The loop asks it for the next rate and whether the campaign ended; a failing step never ends
the campaign by itself, it only narrows the bracket. After every step the search state is
replayed from the recorded steps (`_search.replay`) and written into the manifest
(`AdaptState`), with the evidence: the steps on both sides of the boundary and their rule
values, and the confirmation runs' spread.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from ..campaign import (
    AdaptBound,
    AdaptConfirmation,
    AdaptState,
    CampaignManifest,
    CampaignStatus,
    StepRecord,
)
from ..options import AdaptOptions
from ..sweep import step_line
from ._search import Outcome, SearchSettings, SearchState, replay

__all__ = ["AdaptStrategy", "BLOCKED_CHECK", "invalid_twice", "search_settings"]

#: The check the sweep's records add for a step in which the load generator could not offer
#: the rate (``stop_on_blocked``); adapt always adds it.
BLOCKED_CHECK = "not blocked"


def search_settings(options: AdaptOptions) -> SearchSettings:
    precision, relative = options.precision_value
    return SearchSettings(
        min_rps=options.min_rps, max_rps=options.max_rps, growth=options.growth,
        precision=precision, precision_relative=relative, max_steps=options.max_steps,
        confirm=options.confirm,
    )


def _outcomes(steps: Sequence[StepRecord], strict: bool = False) -> list[Outcome]:
    # Under --validity strict an invalid step decides nothing: the search asks for its rate
    # again, as if it had not run (its record stays in the campaign, marked).
    return [Outcome(step.index, step.rps_per_worker, step.passed) for step in steps
            if not (strict and step.validity == "invalid")]


def invalid_twice(steps: Sequence[StepRecord]) -> StepRecord | None:
    """The last step, when it and the one before it were both invalid at the same rate:
    the re-measurement of an invalid step was invalid too (--validity strict ends there)."""
    if len(steps) < 2:
        return None
    last, before = steps[-1], steps[-2]
    if (last.validity == before.validity == "invalid"
            and last.rps_per_worker == before.rps_per_worker):
        return last
    return None


def _bound(outcome: Outcome | None, steps: Sequence[StepRecord]) -> AdaptBound | None:
    if outcome is None:
        return None
    record = next(step for step in steps if step.index == outcome.index)
    return AdaptBound(step=record.index, rps_per_worker=record.rps_per_worker,
                      requested_rps=record.requested_rps, achieved_rps=record.achieved_rps,
                      checks=list(record.slo))


def _spread(values: Sequence[float | None]) -> list[float | None]:
    known = [value for value in values if value is not None]
    if not known:
        return [None, None, None]
    return [min(known), statistics.median(known), max(known)]


def _confirmation(asked: int, state: SearchState,
                  steps: Sequence[StepRecord]) -> AdaptConfirmation | None:
    if asked <= 0 or state.answer is None:
        return None
    indices = [outcome.index for outcome in state.confirmations]
    records = [step for step in steps if step.index in set(indices)]
    values: dict[str, list[float | None]] = {}
    for record in records:
        for check in record.slo:
            values.setdefault(check.expression, []).append(check.value)
    values["achieved_rps"] = [record.achieved_rps for record in records]
    passed = sum(1 for record in records if record.passed)
    return AdaptConfirmation(
        asked=asked, steps=indices, passed=passed,
        held=(passed == asked) if len(records) >= asked else None,
        spread={name: _spread(found) for name, found in values.items()} if records else {},
    )


class AdaptStrategy:
    """The search, for `nhbench.sweep.Sweep` (a `StepStrategy`)."""

    def __init__(self, options: AdaptOptions,
                 settings: Mapping[str, Any] | None = None, *, strict: bool = False) -> None:
        self.options = options
        self.settings = search_settings(options)
        #: --validity strict: an invalid step is measured again, and a second invalid one
        #: at the same rate ends the campaign (docs/adapt.md "Validity").
        self.strict = strict
        # The campaign's settings as given (a resume's: the saved ones with what it changed,
        # --confirm or --max-steps), which the manifest keeps for the next --resume.
        self._given = None if settings is None else dict(settings)

    def state(self, manifest: CampaignManifest) -> SearchState:
        return replay(self.settings, _outcomes(manifest.steps, self.strict))

    def describe(self, manifest: CampaignManifest) -> AdaptState:
        """The manifest's `AdaptState` for the steps recorded so far."""
        options, settings = self.options, self.settings
        state = self.state(manifest)
        failing = _bound(state.failing, manifest.steps)
        # A blocked step measured the client as much as the server (a blocked open-loop
        # request also counts its wait in the latency, so the rules usually fail with it).
        client_limited = failing is not None and any(
            not check.passed and check.expression == BLOCKED_CHECK for check in failing.checks)
        return AdaptState(
            slo=list(options.slo), min_rps=settings.min_rps, max_rps=settings.max_rps,
            growth=settings.growth, precision=settings.precision,
            precision_relative=settings.precision_relative, confirm=settings.confirm,
            max_steps=settings.max_steps, phase=state.phase, search_steps=state.search_steps,
            next_rps=state.next_rate, highest_passing=_bound(state.passing, manifest.steps),
            lowest_failing=failing, answer_rps=state.answer, reason=state.reason,
            client_limited=client_limited,
            confirmation=_confirmation(settings.confirm, state, manifest.steps),
        )

    # ---- StepStrategy ------------------------------------------------------------------------

    def begin(self, manifest: CampaignManifest) -> None:
        manifest.kind = "adapt"
        if self._given is not None:
            manifest.settings = dict(self._given)
        manifest.adapt = self.describe(manifest)

    def ended(self, manifest: CampaignManifest) -> tuple[CampaignStatus, str] | None:
        twice = invalid_twice(manifest.steps) if self.strict else None
        if twice is not None:
            reasons = "; ".join(twice.validity_reasons) or "no reason recorded"
            return "stopped", (f"steps {twice.index - 1} and {twice.index} "
                               f"({twice.rps_per_worker:g} rps) invalid (--validity strict): "
                               f"{reasons}")
        state = self.state(manifest)
        if state.next_rate is not None:
            return None
        return "completed", _end_reason(self.settings, state)

    def next_rate(self, manifest: CampaignManifest) -> float:
        rate = self.state(manifest).next_rate
        assert rate is not None, "next_rate after the search ended"
        return rate

    def recorded(self, manifest: CampaignManifest, record: StepRecord) -> None:
        manifest.adapt = self.describe(manifest)

    def line(self, manifest: CampaignManifest, record: StepRecord) -> str:
        state = manifest.adapt
        assert state is not None
        low = state.highest_passing
        high = state.lowest_failing
        bracket = (f"{'-' if low is None else f'{low.rps_per_worker:g}'}.."
                   f"{'-' if high is None else f'{high.rps_per_worker:g}'}")
        if state.confirmation is not None and record.index in state.confirmation.steps:
            where = (f"confirmation {state.confirmation.steps.index(record.index) + 1}/"
                     f"{state.confirmation.asked}")
        else:
            where = f"search, bracket {bracket} rps per worker"
        return f"{step_line(record, None, False)} [{where}]"


def _end_reason(settings: SearchSettings, state: SearchState) -> str:
    passing, failing = state.passing, state.failing
    if state.reason == "min-rps failed":
        return f"min-rps failed: even {settings.min_rps:g} rps per worker breaks the SLO"
    assert passing is not None
    answer = f"highest passing {passing.rate:g} rps per worker"
    if state.reason == "max-rps passed":
        text = f"max-rps passed: {answer} (the limit; the capacity may be higher)"
    elif state.reason == "step limit":
        top = "none failed" if failing is None else f"lowest failing {failing.rate:g}"
        text = f"step limit: {answer}, {top} (not converged)"
    else:
        assert failing is not None
        text = f"converged: {answer}, lowest failing {failing.rate:g}"
    if state.confirmations:
        passed = sum(1 for outcome in state.confirmations if outcome.passed)
        text += f"; confirmation {passed}/{settings.confirm} passed"
    return text
