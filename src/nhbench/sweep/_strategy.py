"""What the step loop asks between steps: `StepStrategy`, and the sweep's `PlanWalk`.

The loop (``_loop.Sweep``) runs, records and reports steps; a strategy decides which rate
comes next and when the campaign ends. ``nhbench sweep`` walks its plan and stops at the
first failing step (`PlanWalk`); ``nhbench adapt`` searches, and a failing step only
narrows its bracket (`nhbench.adapt`'s strategy). A strategy reads only the manifest (its
recorded steps and its own state there), so a resumed campaign continues exactly where it
stopped: the same recorded steps give the same next rate.
"""

from __future__ import annotations

from typing import Protocol

from ..campaign import CampaignManifest, CampaignStatus, StepRecord
from ..options import format_check
from ._plan import next_step
from ._records import step_line

__all__ = ["PlanWalk", "StepStrategy", "failed_reason"]


def failed_reason(record: StepRecord) -> str:
    """``step 3 (300 rps) failed: p99 = 7 ms, needs < 5 ms``: why a failing step failed."""
    fired = "; ".join(format_check(check) for check in record.slo if not check.passed)
    return f"step {record.index} ({record.rps_per_worker:g} rps) failed: {fired}"


class StepStrategy(Protocol):
    """Chooses the steps of a campaign. Every method reads the manifest as written so far."""

    def begin(self, manifest: CampaignManifest) -> None:
        """Called once the manifest is created or reopened, before any step: a strategy
        with state of its own writes it into the manifest here."""

    def ended(self, manifest: CampaignManifest) -> tuple[CampaignStatus, str] | None:
        """The status and reason the campaign ends with now, or None to run another step.
        A "stopped" end after a step ends the campaign at once (no cooldown)."""

    def next_rate(self, manifest: CampaignManifest) -> float:
        """The per-worker rate of the next step (only asked when `ended` is None)."""

    def recorded(self, manifest: CampaignManifest, record: StepRecord) -> None:
        """Called after `record` was appended to the manifest, before it is saved."""

    def line(self, manifest: CampaignManifest, record: StepRecord) -> str:
        """The progress line of a finished step."""


class PlanWalk:
    """``nhbench sweep``: the plan's steps in order (extended with --extend), ending at the
    first failing step."""

    def begin(self, manifest: CampaignManifest) -> None:
        return None

    def ended(self, manifest: CampaignManifest) -> tuple[CampaignStatus, str] | None:
        failed = next((step for step in manifest.steps if not step.passed), None)
        if failed is not None:
            return "stopped", failed_reason(failed)
        if self._next(manifest) is None:
            plan = manifest.plan
            return "completed", ("extend limit reached" if plan.extend else "all steps done")
        return None

    def next_rate(self, manifest: CampaignManifest) -> float:
        rate = self._next(manifest)
        assert rate is not None, "next_rate after the plan ended"
        return rate

    @staticmethod
    def _next(manifest: CampaignManifest) -> float | None:
        steps = manifest.steps
        return next_step(manifest.plan, len(steps),
                         steps[-1].rps_per_worker if steps else None)

    def recorded(self, manifest: CampaignManifest, record: StepRecord) -> None:
        return None

    def line(self, manifest: CampaignManifest, record: StepRecord) -> str:
        plan = manifest.plan
        return step_line(record, len(plan.steps), plan.extend)
