"""What a step records of its scrapes (`StepRecord.scrape`, in step.json and the manifest)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ScrapedSeries", "StepScrape"]


class ScrapedSeries(BaseModel):
    """One selected series over a step: a column of the step table."""

    model_config = ConfigDict(extra="forbid")

    series: str = Field(description='name{label="value",...}, labels sorted.')
    kind: str = Field(description="counter, gauge, histogram, summary or untyped.")
    mode: Literal["delta", "value"] = Field(
        description="delta: value is after - before (counters, histogram buckets, sums and "
        "counts); value: value is the value after the step.")
    before: float | None = None
    after: float | None = None
    value: float | None = Field(default=None, description="What the column shows.")
    unknown: str | None = Field(default=None, description="Why value is None.")


class StepScrape(BaseModel):
    """One --scrape source over one step."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="The source's name (--scrape NAME=URL; 'target').")
    url: str
    format: Literal["prometheus", "envoy"] | None = Field(
        default=None, description="What the page was read as (None: neither scrape read).")
    before_file: str | None = Field(
        default=None, description="The scrape before the step, relative to its directory.")
    after_file: str | None = None
    errors: dict[str, str] = Field(
        default_factory=dict,
        description="'before' / 'after' -> why that scrape failed (timed out, HTTP 503, "
        "not Prometheus text...).")
    series: list[ScrapedSeries] = Field(default_factory=list)
    unmatched: list[str] = Field(
        default_factory=list,
        description="The --scrape-metric selectors that matched no series of this source "
        "(in a scrape that was read).")
