"""What the reports say about an adaptive search (``nhbench adapt``): the search's settings
in place of a sweep's plan, and its end (the answer, the bracket with the rule values on both
sides of the boundary, why it stopped, the confirmation runs and their spread). Pure
functions of the manifest's `AdaptState`, shared by report.txt, report.html and the CLI.
"""

from __future__ import annotations

from collections.abc import Callable

from .._exceptions import OptionsError
from ..campaign import AdaptBound, AdaptState, CampaignManifest
from ..options import format_rule_value, parse_rule
from ._common import format_check, format_rate

__all__ = ["adapt_summary", "describe_search", "search_lines"]


def _precision(state: AdaptState) -> str:
    if state.precision_relative:
        return f"{state.precision * 100:g}% of the passing rate"
    return f"{state.precision:g} rps per worker"


def describe_search(state: AdaptState, duration: float, cooldown: float) -> list[str]:
    """The search's settings in a few lines (the plan lines of a sweep's report)."""
    return [
        f"adaptive search from {state.min_rps:g} to at most {state.max_rps:g} rps per worker "
        f"(x{state.growth:g}, then binary search to within {_precision(state)}); "
        f"{duration:g} s each, {cooldown:g} s cooldown",
        "SLO: " + ", ".join(state.slo) + " (a blocked step fails too)",
        f"at most {state.max_steps} search steps"
        + (f"; {state.confirm} confirmation run(s) at the answer" if state.confirm else ""),
    ]


def _bound(label: str, bound: AdaptBound | None) -> list[str]:
    if bound is None:
        return [f"{label}: none"]
    lines = [f"{label}: No. {bound.step}, {bound.rps_per_worker:g} rps per worker, "
             f"{format_rate(bound.requested_rps)} requested, "
             f"{format_rate(bound.achieved_rps)} achieved"]
    lines += [f"  {format_check(check)}" for check in bound.checks]
    return lines


def _value(value: float | None) -> str:
    return "-" if value is None else f"{value:.6g}"


def _formatter(name: str) -> Callable[[float | None], str]:
    # A rule's values are shown in the rule's own unit (ms for p99<5ms, % for error_rate).
    try:
        rule = parse_rule(name)
    except OptionsError:
        return _value
    return lambda value: format_rule_value(rule, value)


def search_lines(manifest: CampaignManifest) -> list[str]:
    """The "Search" section: answer, evidence on both sides, why it stopped, confirmation."""
    state = manifest.adapt
    if state is None:
        return []
    workers = manifest.steps[0].workers if manifest.steps else None
    lines = []
    if state.answer_rps is not None:
        total = "" if workers is None else (
            f" = {format_rate(state.answer_rps * workers)} total over {workers} worker(s)")
        lines.append(f"Answer: {state.answer_rps:g} rps per worker{total}")
    elif state.reason is not None:
        lines.append("Answer: none (even --min-rps breaks the SLO)")
    else:
        lines.append(f"Answer: not yet (phase {state.phase}, next step at "
                     f"{_value(state.next_rps)} rps per worker)")
    lines.append(f"Why it stopped: {state.reason or manifest.status}; "
                 f"{state.search_steps} search step(s)")
    lines += _bound("Highest passing", state.highest_passing)
    lines += _bound("Lowest failing", state.lowest_failing)
    if state.client_limited:
        lines.append("Note: the lowest failing step was blocked (the load generator could "
                     "not offer its rate): the boundary may be the client's, not the "
                     "server's; give it more connections or workers")
    confirmation = state.confirmation
    if confirmation is not None:
        verdict = {True: "held", False: "FAILED", None: "incomplete"}[confirmation.held]
        lines.append(f"Confirmation: {confirmation.passed}/{confirmation.asked} passed "
                     f"({verdict}); steps {', '.join(map(str, confirmation.steps)) or 'none'}")
        for name, (low, median, high) in confirmation.spread.items():
            show = _formatter(name)
            lines.append(f"  {name}: min {show(low)}, median {show(median)}, "
                         f"max {show(high)}")
    return lines


def adapt_summary(manifest: CampaignManifest) -> str:
    """One line: the answer and why the search stopped."""
    state = manifest.adapt
    if state is None:
        return "not an adapt campaign"
    if state.answer_rps is None:
        text = f"no answer: {state.reason or manifest.status}"
    else:
        workers = manifest.steps[0].workers if manifest.steps else 1
        text = (f"highest rate meeting the SLO: {state.answer_rps:g} rps per worker "
                f"({format_rate(state.answer_rps * workers)} total); {state.reason}")
        if state.lowest_failing is not None:
            text += f", lowest failing {state.lowest_failing.rps_per_worker:g}"
    if state.confirmation is not None and state.confirmation.held is not None:
        text += (f"; confirmation {state.confirmation.passed}/{state.confirmation.asked} "
                 f"{'held' if state.confirmation.held else 'FAILED'}")
    return text
