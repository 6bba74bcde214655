"""A finished step's record: `record_from_result` turns a step's `Result` (and captures)
into its `StepRecord`, stop rules evaluated, and `step_line` is its one-line progress report.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from .._format import format_latency
from .._names import ERROR_COUNTERS, error_counters
from .._result import Result
from .._slo import ResultMeasures
from ..campaign import LATENCY_KEYS, SloCheck, StepRecord
from ..capture import CaptureResult
from ..options import StopRule, format_check, latency_points
from ._config import LOADGEN_GROUP
from ._slo import evaluate_rules

__all__ = ["ERROR_COUNTERS", "record_from_result", "step_line"]


def _percentile(result: Result, percent: float) -> float | None:
    try:
        return result.latency.p(percent)
    except (KeyError, ValueError):
        return None


def record_from_result(
    result: Result,
    *,
    index: int,
    rate: float,
    directory: str,
    rules: Sequence[StopRule],
    stop_on_blocked: bool,
    started_at: datetime,
    ended_at: datetime,
    target_capture: CaptureResult | None = None,
    loadgen_capture: CaptureResult | None = None,
    loadgen_cpu_fallback: float | None = None,
    nhbench_cpu: float | None = None,
) -> StepRecord:
    """Turn a step's `Result` (and captures) into its `StepRecord`, stop rules evaluated."""
    counters = result.counters
    points = sorted({float(key[1:]) for key in LATENCY_KEYS} | set(latency_points(rules)))
    latency = {f"p{point:g}": _percentile(result, point) for point in points}
    # Blocked releases plus pool overflows, and the error rate: Result's definitions (from
    # nhbench._names), the ones `nhbench run --slo` and the pytest plugin read.
    blocked_count = result.blocked_count
    # Error counters and, for the record, the connection counters behind them; only the
    # former are errors (nhbench._names, the definition `nhbench run` uses too).
    errors = error_counters(counters)
    error_rate = result.error_rate
    http_2xx = int(counters.get("benchmark.http_2xx", 0))

    target_cpu: dict[str, float | None] = {}
    if target_capture is not None:
        target_cpu = {group.name: group.busy_percent for group in target_capture.groups}
    loadgen_cpu = None
    if loadgen_capture is not None:
        for group in loadgen_capture.groups:
            if group.name == LOADGEN_GROUP:
                loadgen_cpu = group.busy_percent
    if loadgen_cpu is None:
        loadgen_cpu = loadgen_cpu_fallback

    record = StepRecord(
        index=index,
        directory=directory,
        rps_per_worker=rate,
        workers=result.worker_count,
        requested_rps=result.requested_rps,
        achieved_rps=result.achieved_rps,
        duration=result.duration,
        requests=int(counters.get("upstream_rq_total", 0)),
        http_2xx=http_2xx,
        latency=latency,
        blocked=blocked_count > 0,
        blocked_count=blocked_count,
        errors=errors,
        error_rate=error_rate,
        target_cpu=target_cpu,
        loadgen_cpu=loadgen_cpu,
        nhbench_cpu=nhbench_cpu,
        passed=True,
        validity=None if result.validity is None else result.validity.verdict,
        validity_reasons=[] if result.validity is None else result.validity.reasons,
        target_capture=target_capture,
        loadgen_capture=loadgen_capture,
        started_at=started_at,
        ended_at=ended_at,
    )
    # Rules read the Result itself (through the same evaluator as Result.check_slo), so a
    # rule on any statistic or counter works in a sweep too; the headline percentiles,
    # rates and counts it reads are the ones just written into the record.
    checks = evaluate_rules(rules, ResultMeasures(result))
    if stop_on_blocked:
        checks.append(SloCheck(expression="not blocked", value=float(blocked_count),
                               passed=blocked_count == 0))
    # A run cut short by a failure predicate (Nighthawk's defaults fire on the first 4xx/5xx,
    # reset or failed connection) did not measure the step: it fails, and the sweep stops.
    for name in result.failed_predicates:
        checks.append(SloCheck(expression=f"failure predicate {name}",
                               value=float(counters.get(name, 0)), passed=False))
    if result.terminated_by == "error":
        checks.append(SloCheck(expression="run ended without error", value=None, passed=False))
    # A step in which nothing succeeded measured nothing, whatever the rules say (as `nhbench
    # run` exits 1 for it); allow_no_success lets it pass, as it does for a run.
    if result.no_success_reason is not None:
        checks.append(SloCheck(expression="a request succeeded", value=0.0, passed=False))
    record.slo = checks
    record.passed = all(check.passed for check in checks)
    return record


def step_line(record: StepRecord, planned: int | None, extend: bool) -> str:
    """The one-line progress report of a finished step."""
    total = "" if planned is None else f"/{planned}{'+' if extend else ''}"
    verdict = "pass" if record.passed else "FAIL: " + "; ".join(
        format_check(check) for check in record.slo if not check.passed
    )
    errors = record.error_count
    blocked = f"yes ({record.blocked_count})" if record.blocked else "no"
    # A step whose numbers may not be the server's says so on its line as it ends.
    validity = ("" if record.validity in (None, "valid")
                else f" (validity: {record.validity})")
    return (
        f"step {record.index}{total}: {record.rps_per_worker:g} rps x {record.workers} = "
        f"{record.requested_rps:g} requested, achieved {record.achieved_rps:.1f}, "
        f"p99 {format_latency(record.latency.get('p99'))}, blocked {blocked}, "
        f"errors {errors}: {verdict}{validity}"
    )


