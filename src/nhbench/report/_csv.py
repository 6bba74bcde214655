"""results.csv: one row per step, for spreadsheets and scripts.

Columns, always present and in this order (`CSV_COLUMNS`):

=====================  ================================================================
``index``              step number (the report's No.), 1-based
``directory``          step directory relative to the campaign directory
``rps_per_worker``     offered rate per worker (requests/s)
``workers``            worker count
``requested_rps``      rps_per_worker x workers
``achieved_rps``       2xx responses per second over the step
``duration_s``         measured seconds
``requests``           requests sent (upstream_rq_total)
``http_2xx``           2xx responses
``latency_p50_s``      headline latency (scheduled_to_response) percentiles, in seconds;
``latency_p90_s``      empty when the step has no value
``latency_p99_s``
``latency_p99_9_s``
``blocked``            ``true``/``false``: the sequencer blocked or the pool overflowed
``blocked_count``      blocked releases plus pool overflows
``errors``             the step's errors (nhbench._names.ERROR_COUNTERS, as every report)
``error_rate``         errors / finished requests, 0..1
``loadgen_cpu``        busy % of the load generator's worker CPUs (empty: not measured)
``nhbench_cpu``        CPU time of the nhbench process, % of one CPU per worker
``passed``             ``true``/``false``: no stop rule fired on this step
``failed_checks``      the failed rules, ``; ``-separated (empty when passed)
``started_at``         ISO 8601 with time zone
``ended_at``
=====================  ================================================================

Then, per watched CPU group of the target in the capture spec's order, ``target_cpu_NAME``
(busy %), and for percentiles a stop rule needed beyond the four above,
``latency_pN_s`` (``p95`` -> ``latency_p95_s``, ``p99.99`` -> ``latency_p99_99_s``). Numbers are
written unformatted (``repr`` of the float), so they read back exactly.
"""

from __future__ import annotations

import csv
import io

from ..campaign import LATENCY_KEYS, CampaignManifest, StepRecord
from ._common import watched_groups

__all__ = ["CSV_COLUMNS", "render_csv"]


def _latency_column(key: str) -> str:
    return "latency_" + key.replace(".", "_") + "_s"


CSV_COLUMNS: tuple[str, ...] = (
    "index",
    "directory",
    "rps_per_worker",
    "workers",
    "requested_rps",
    "achieved_rps",
    "duration_s",
    "requests",
    "http_2xx",
    *(_latency_column(key) for key in LATENCY_KEYS),
    "blocked",
    "blocked_count",
    "errors",
    "error_rate",
    "loadgen_cpu",
    "nhbench_cpu",
    "passed",
    "failed_checks",
    "started_at",
    "ended_at",
)


def _number(value: float | None) -> str:
    return "" if value is None else repr(value)


def _bool(value: bool) -> str:
    return "true" if value else "false"


def render_csv(manifest: CampaignManifest) -> str:
    """The CSV text (header line first) of the campaign's steps."""
    groups = watched_groups(manifest)
    extra_latency = sorted(
        {key for step in manifest.steps for key in step.latency} - set(LATENCY_KEYS),
        key=lambda key: float(key[1:]) if key[1:].replace(".", "", 1).isdigit() else 1e9,
    )
    header = [
        *CSV_COLUMNS,
        *(f"target_cpu_{group}" for group in groups),
        *(_latency_column(key) for key in extra_latency),
    ]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    for step in manifest.steps:
        writer.writerow(_row(step, groups, extra_latency))
    return buffer.getvalue()


def _row(step: StepRecord, groups: list[str], extra_latency: list[str]) -> list[str]:
    return [
        str(step.index),
        step.directory,
        _number(step.rps_per_worker),
        str(step.workers),
        _number(step.requested_rps),
        _number(step.achieved_rps),
        _number(step.duration),
        str(step.requests),
        str(step.http_2xx),
        *(_number(step.latency.get(key)) for key in LATENCY_KEYS),
        _bool(step.blocked),
        str(step.blocked_count),
        str(step.error_count),
        _number(step.error_rate),
        _number(step.loadgen_cpu),
        _number(step.nhbench_cpu),
        _bool(step.passed),
        "; ".join(check.expression for check in step.slo if not check.passed),
        step.started_at.isoformat(),
        step.ended_at.isoformat(),
        *(_number(step.target_cpu.get(group)) for group in groups),
        *(_number(step.latency.get(key)) for key in extra_latency),
    ]
