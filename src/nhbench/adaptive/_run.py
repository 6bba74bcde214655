"""An adapt campaign: `prepare_adapt` (settings -> validated config, no side effects),
`AdaptOutcome` (what the search found), `outcome_of` and `adapt` (the Python face).

The campaign is the sweep's: the same `SweepConfig` (URL, duration, cooldown, out, resume,
SSH, captures, run options; validated by `prepare_sweep`), the same `Sweep` loop with its
store, reports and captures, and the search (`AdaptStrategy`) as its step strategy. The
sweep's plan is only a record here: its one step is --min-rps, its stop rules are the --slo
rules, and ``stop_on_blocked`` is on, so each step's record carries the rule checks and the
"not blocked" check the search reads.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from pydantic import BaseModel, Field

from .._exceptions import CampaignError
from ..campaign import (
    AdaptBound,
    AdaptConfirmation,
    AdaptState,
    CampaignManifest,
    CampaignStatus,
    StepRecord,
    load_manifest,
)
from ..hosts import Host
from ..options import AdaptOptions, split_adapt
from ..sweep import Sweep, SweepConfig, default_out, prepare_sweep
from ._search import replay
from ._strategy import AdaptStrategy, _outcomes, invalid_twice

__all__ = ["INVALID_RUN", "SLO_FAILED", "AdaptConfig", "AdaptOutcome", "adapt", "outcome_of", "prepare_adapt",
           "settings_for_resume"]

#: The exit status of ``nhbench adapt`` when even --min-rps breaks the SLO or a confirmation
#: run failed (the CLI's SLO_FAILED, the status of ``nhbench run --slo`` that fails).
SLO_FAILED = 99
#: ... and when, under --validity strict, a step and its re-measurement were both invalid
#: (the CLI's INVALID_RUN, the status of ``nhbench run --validity strict``).
INVALID_RUN = 98

# Settings that say where the campaign is, not what it is: never stored in the manifest.
_NOT_STORED = ("out", "resume")

# Search settings a resume must keep: they decide which rate each recorded step ran at and
# whether it passed. The others (--confirm, --max-steps) only decide how far the search goes
# on, so a resume may raise them.
_FIXED = ("slo", "min_rps", "max_rps", "growth", "precision", "precision_relative")


@dataclass
class AdaptConfig:
    """A validated adapt campaign: the search options and the sweep's config."""

    options: AdaptOptions
    sweep: SweepConfig

    @property
    def strategy(self) -> AdaptStrategy:
        return AdaptStrategy(self.options, settings=self.sweep.settings,
                             strict=self.sweep.options.validity == "strict")


def settings_for_resume(manifest: CampaignManifest, given: Mapping[str, Any]) -> dict[str, Any]:
    """The settings to resume with: the campaign's own, overridden by what was `given`."""
    if manifest.kind != "adapt":
        raise CampaignError("that campaign is a sweep campaign; continue it with nhbench "
                            "sweep --resume")
    return {**manifest.settings, **given}


def prepare_adapt(settings: Mapping[str, Any]) -> AdaptConfig:
    """Validate `settings` (option names in Python spelling) into an `AdaptConfig`, without
    side effects. OptionsError names the option at fault; CampaignError for an --out that
    cannot be used or a --resume that cannot continue."""
    options, rest = split_adapt(settings)
    precision, _ = options.precision_value
    sweep_settings = {
        **rest,
        "rps": options.min_rps,
        "stop_on_slo": list(options.slo),
        "stop_on_blocked": True,
    }
    config = prepare_sweep(sweep_settings)
    config.settings = {k: v for k, v in settings.items() if k not in _NOT_STORED}
    if config.out is None and config.resume is None:
        # Named like a sweep's default directory, with "adapt" where a sweep says "sweep".
        config.out = default_out(config.label or ["adapt"])
    adapt_config = AdaptConfig(options, config)
    if config.resume is not None:
        _check_resume(adapt_config, load_manifest(config.resume))
    return adapt_config


def _check_resume(config: AdaptConfig, manifest: CampaignManifest) -> None:
    saved = manifest.adapt
    if manifest.kind != "adapt" or saved is None:
        raise CampaignError("that campaign is a sweep campaign; continue it with nhbench "
                            "sweep --resume")
    duration = config.sweep.plan.duration
    if duration != manifest.plan.duration:
        raise CampaignError(
            f"cannot resume with a different search: duration {duration:g} s (campaign: "
            f"{manifest.plan.duration:g} s); only --confirm and --max-steps may change")
    new = config.strategy.describe(manifest.model_copy(update={"steps": []}))
    for name in _FIXED:
        if getattr(saved, name) != getattr(new, name):
            raise CampaignError(
                f"cannot resume with a different search: {name.replace('_', '-')} "
                f"{getattr(new, name)!r} (campaign: {getattr(saved, name)!r}); only --confirm "
                f"and --max-steps may change")
    confirmed = 0 if saved.confirmation is None else len(saved.confirmation.steps)
    if new.confirm < confirmed:
        raise CampaignError(f"cannot resume with --confirm {new.confirm}: the campaign already "
                            f"ran {confirmed} confirmation run(s)")
    if new.max_steps < saved.search_steps:
        raise CampaignError(f"cannot resume with --max-steps {new.max_steps}: the campaign "
                            f"already ran {saved.search_steps} search steps")
    try:
        replay(config.strategy.settings, _outcomes(manifest.steps, config.strategy.strict))
    except CampaignError as exc:
        raise CampaignError(f"cannot resume: {exc}") from None


class AdaptOutcome(BaseModel):
    """What an adaptive search found (``nhbench.adapt``, ``nhbench adapt``).

    Rates are per worker (``--rps``'s unit, Nighthawk's); the ``*_total_rps`` fields are
    that times the worker count.
    """

    directory: str = Field(description="The campaign directory.")
    status: CampaignStatus = Field(description="The campaign's status (manifest.json).")
    stop_reason: str | None = None
    reason: str | None = Field(
        default=None, description="Why the search ended: 'converged', 'max-rps passed', "
        "'min-rps failed', 'step limit'; None if it did not end (interrupted, failed).")
    highest_passing_rps: float | None = Field(
        default=None, description="The answer: the highest passing rate per worker.")
    highest_passing_total_rps: float | None = None
    workers: int | None = None
    highest_passing: AdaptBound | None = Field(
        default=None, description="Evidence below the boundary: the step and its rule values.")
    lowest_failing: AdaptBound | None = Field(
        default=None, description="Evidence above the boundary.")
    client_limited: bool = False
    confirmation: AdaptConfirmation | None = None
    search: AdaptState | None = None
    steps: list[StepRecord] = Field(default_factory=list)

    @property
    def converged(self) -> bool:
        return self.reason == "converged"

    @property
    def confirmed(self) -> bool | None:
        """Whether every confirmation run passed (None: none asked, or not all ran)."""
        return None if self.confirmation is None else self.confirmation.held

    @property
    def exit_status(self) -> int:
        """``nhbench adapt``'s exit status for this outcome, signals aside: 0 an answer (and
        a confirmation that held, if asked), 99 no answer or a failed confirmation, 98 a
        step invalid twice under --validity strict, 1 a campaign that did not end its
        search."""
        if self.status == "stopped" and invalid_twice(self.steps) is not None:
            return INVALID_RUN
        if self.status != "completed":
            return 1
        if self.highest_passing_rps is None or self.confirmed is False:
            return SLO_FAILED
        return 0

    def _repr_html_(self) -> str:
        answer = ("none" if self.highest_passing_rps is None
                  else f"{self.highest_passing_rps:g} rps per worker "
                  f"({self.highest_passing_total_rps:g} total)")
        rows = "".join(
            f"<tr><td>{step.index}</td><td>{step.rps_per_worker:g}</td>"
            f"<td>{step.achieved_rps:.1f}</td><td>{'pass' if step.passed else 'FAIL'}</td></tr>"
            for step in self.steps)
        return (f"<div><b>nhbench adapt</b>: {html.escape(answer)}; "
                f"{html.escape(self.stop_reason or self.status)}<br>"
                f"<code>{html.escape(self.directory)}</code>"
                f"<table><tr><th>step</th><th>rps/worker</th><th>achieved</th>"
                f"<th>verdict</th></tr>{rows}</table></div>")


def outcome_of(directory: str | Path, manifest: CampaignManifest) -> AdaptOutcome:
    """The outcome an adapt campaign's manifest records."""
    state = manifest.adapt
    workers = manifest.steps[0].workers if manifest.steps else None
    answer = None if state is None else state.answer_rps
    return AdaptOutcome(
        directory=str(directory), status=manifest.status, stop_reason=manifest.stop_reason,
        reason=None if state is None else state.reason,
        highest_passing_rps=answer,
        highest_passing_total_rps=None if answer is None or workers is None
        else answer * workers,
        workers=workers,
        highest_passing=None if state is None else state.highest_passing,
        lowest_failing=None if state is None else state.lowest_failing,
        client_limited=False if state is None else state.client_limited,
        confirmation=None if state is None else state.confirmation,
        search=state, steps=list(manifest.steps),
    )


def adapt(
    url: str | None = None,
    /,
    *,
    slo: str | list[str] | tuple[str, ...] | None = None,
    out: str | Path | None = None,
    resume: str | Path | None = None,
    password: str | None = None,
    target_host: Host | None = None,
    captures: bool = True,
    facts: bool = True,
    reports: bool = True,
    on_step: Callable[[StepRecord], object] | None = None,
    stream: TextIO | None = None,
    **settings: Any,
) -> AdaptOutcome:
    """Search for the highest rate `url` serves within the SLO rules; return the outcome.

    ``nhbench.adapt("http://10.0.0.5/", slo=["p99<5ms", "error_rate<0.1%"], min_rps=100,
    max_rps=20000, precision="2%", duration="10s", connections=200, out="campaigns/gw")``.
    Keywords are ``nhbench adapt``'s options in Python spelling and every `nhbench.run`
    option; ``resume=DIR`` continues a campaign with its own settings. Invalid settings raise
    OptionsError before anything runs.
    """
    given = dict(settings)
    if url is not None:
        given["url"] = url
    if slo is not None:
        given["slo"] = slo
    if out is not None:
        given["out"] = str(out)
    if resume is not None:
        given = settings_for_resume(load_manifest(resume), given)
        given["resume"] = str(resume)
    config = prepare_adapt(given)
    sweep = Sweep(config.sweep, password=password, target_host=target_host, captures=captures,
                  facts=facts, reports=reports, on_step=on_step, stream=stream,
                  strategy=config.strategy)
    campaign = sweep.run()
    return outcome_of(campaign.directory, campaign.manifest)
