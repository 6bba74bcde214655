"""results.csv: one row per step, for spreadsheets and scripts.

The columns are the step table's ``csv`` view (`nhbench.campaign.STEP_TABLE`; docs/sweep.md
lists them): first the fixed ones, always present and in the same order (`CSV_COLUMNS`), then
per watched CPU group of the target, in the capture spec's order, ``target_cpu_NAME`` (busy
%), and for percentiles a stop rule needed beyond the headline four, ``latency_pN_s`` (``p95``
-> ``latency_p95_s``, ``p99.99`` -> ``latency_p99_99_s``).

A cell is written by its value's type: numbers unformatted (``repr`` of the float), so they
read back exactly; ``true``/``false``; times in ISO 8601 with their time zone; empty for no
value.
"""

from __future__ import annotations

import csv
import io
from datetime import datetime
from typing import Any

from ..campaign import CampaignManifest, step_view

__all__ = ["CSV_COLUMNS", "render_csv"]

CSV_COLUMNS: tuple[str, ...] = tuple(column.name for column in step_view(None, "csv"))


def csv_text(value: Any) -> str:
    """One cell: what `value` is, written so that it reads back exactly."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, str):
        return value
    return repr(value)


def render_csv(manifest: CampaignManifest) -> str:
    """The CSV text (header line first) of the campaign's steps."""
    columns = step_view(manifest, "csv")
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([column.name for column in columns])
    for step in manifest.steps:
        writer.writerow([csv_text(column.value(step)) for column in columns])
    return buffer.getvalue()
