"""Adaptive load search: the highest rate that still meets the SLO (``nhbench adapt``).

Exponential search up from --min-rps, then binary search between the last passing and the
first failing rate, each step a full measured run recorded in a campaign directory (the
sweep's store, resume, captures and reports), until the bracket is within --precision; then,
optionally, repeat runs at the answer to confirm it. docs/adapt.md.

Issue 15 seam: `adapt` and `AdaptOutcome` are the public face; the search replaces the
bodies below.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from .._exceptions import RunError

__all__ = ["AdaptOutcome", "adapt"]


class AdaptOutcome(BaseModel):
    """What an adaptive search found (``nhbench.adapt``)."""

    highest_passing_rps: float | None = None


def adapt(uri: str | None = None, /, **settings: Any) -> AdaptOutcome:
    """Search for the highest rate `uri` serves within the SLO rules (``slo=[...]``)."""
    raise RunError("adapt is not implemented yet")
