"""The step table's columns for the target's metrics (``--scrape-metric``): one per source
and selected series, in the order the steps first recorded them, and the lines under the
table that say why a cell is unknown.

A column holds the series' increase over the step (``Δ`` in its header) or its value after
the step, as the step's `StepScrape` recorded it; ``-`` when unknown.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._models import CampaignManifest, StepRecord
from ._table import Shown, StepColumn

__all__ = ["format_metric", "scrape_columns", "scrape_notes"]


def _recorded(manifest: CampaignManifest) -> list[tuple[str, str, str]]:
    """(source, series, mode) of every series the steps recorded, first seen first."""
    seen: dict[tuple[str, str], str] = {}
    for step in manifest.steps:
        for source in step.scrape:
            for series in source.series:
                seen.setdefault((source.name, series.series), series.mode)
    return [(source, series, mode) for (source, series), mode in seen.items()]


def _cell(source: str, key: str) -> Callable[[StepRecord], Any]:
    def value(step: StepRecord) -> float | None:
        for record in step.scrape:
            if record.name == source:
                for series in record.series:
                    if series.series == key:
                        return series.value
        return None

    return value


def format_metric(value: float | None) -> str:
    """A metric's cell: an integer as one, anything else to four significant digits."""
    if value is None:
        return "-"
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.4g}"


def scrape_columns(manifest: CampaignManifest) -> list[StepColumn]:
    recorded = _recorded(manifest)
    several = len({source for source, _, _ in recorded}) > 1
    columns = []
    for source, key, mode in recorded:
        value = _cell(source, key)
        header = ("Δ " if mode == "delta" else "") + (f"{source}: " if several else "") + key
        name = f"scrape:{source}:{key}"
        columns.append(StepColumn(
            name, value, lambda s, value=value: format_metric(value(s)),  # type: ignore[misc]
            csv=Shown(name, last=True), report=header, frame=name,
        ))
    return columns


def scrape_notes(manifest: CampaignManifest) -> list[str]:
    """Under the step table: each failed scrape and each unknown cell, with the reason, and
    each selector that matched nothing."""
    lines: list[str] = []
    unmatched: dict[str, list[int]] = {}
    for step in manifest.steps:
        for record in step.scrape:
            for phase, reason in record.errors.items():
                lines.append(f"No. {step.index} {record.name} {phase} the step: unknown "
                             f"({reason})")
            if not record.errors:
                lines += [f"No. {step.index} {record.name} {series.series}: unknown "
                          f"({series.unknown})"
                          for series in record.series if series.unknown is not None]
            for text in record.unmatched:
                unmatched.setdefault(f"{record.name}: --scrape-metric {text!r} matched no "
                                     f"series", []).append(step.index)
    for text, steps in unmatched.items():
        lines.append(f"{text} (step{'s' if len(steps) > 1 else ''} "
                     f"{', '.join(map(str, steps))})")
    return lines
