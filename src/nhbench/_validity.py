"""Whether a run's numbers can be trusted: the checks behind `Result.validity`.

Each check compares one measure of the run with two limits and says ``valid``,
``suspect`` or ``invalid`` (or ``not tested`` when the run has nothing to test it with);
the run's verdict is its worst check. docs/trust.md "Validity" gives every limit with its
reason; the limits are the module constants below, so that the document and the code name
the same numbers.

- The load generator: each worker thread's CPU share of the measured phase and its
  run-queue wait (from the OS, read at the phase's two ends), the event loop's own lateness
  on a 1 ms timer (the hiccup meter), release lateness p99 against the inter-arrival time,
  blocked or dropped releases.
- The schedule kept: requests sent per second against the rate asked for.
- Stationarity: a Mann-Kendall trend test on the timeline's per-interval p99 and
  throughput.

Mann-Kendall is written out here (scipy is no dependency of nhbench, and the test is the
S statistic, its variance with the tie correction and the normal tail: Kendall 1975,
Hirsch, Slack & Smith 1982; Sen's slope for the size of the trend, Sen 1968).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field

__all__ = [
    "MannKendall",
    "ValidityCheck",
    "ValidityInputs",
    "Verdict",
    "WorkerLoad",
    "assess",
    "mann_kendall",
    "merge_core_histograms",
    "worst",
]

Verdict = Literal["valid", "suspect", "invalid"]
CheckVerdict = Literal["valid", "suspect", "invalid", "not tested"]

# ---- the limits (docs/trust.md "Validity" gives the reason for each) ---------------------

#: A worker busy this share of the measured phase has little slack left: a release that
#: falls due while it works waits (at 80 % busy an M/M/1 queue waits 4 service times).
CPU_SHARE_SUSPECT = 0.80
#: ... and at this share it is the bottleneck: the schedule waits on the generator itself.
CPU_SHARE_INVALID = 0.95
#: Share of the measured phase a worker was runnable but waited for a CPU (another process
#: had it): beyond this the generator's own timing carries the wait.
WAIT_SHARE_SUSPECT = 0.10
WAIT_SHARE_INVALID = 0.25
#: The hiccup meter's p99 (how late the loop ran its own 1 ms timer): scheduler wake-up
#: noise on a virtual machine is tens to hundreds of microseconds, so a stall below these
#: floors says nothing; above them, compared with the latency the run reports, a stall
#: this large is part of what the run measured.
HICCUP_FLOOR_SUSPECT = 0.002
HICCUP_FLOOR_INVALID = 0.010
HICCUP_SHARE_SUSPECT = 0.25  # of the run's p99 latency
HICCUP_SHARE_INVALID = 0.5
#: Release lateness p99 in inter-arrival times: one means a release routinely goes out
#: when the next is already due (the requests leave in bursts, not on the schedule) ...
LATENESS_SUSPECT = 1.0
#: ... ten means bursts of ten: the arrival process is not the one asked for.
LATENESS_INVALID = 10.0
#: Lateness below this is never flagged: the timer floor (a wake-up costs tens of
#: microseconds on a virtual machine; see docs/benchmarks.md, the timers section).
LATENESS_FLOOR = 0.0005
#: Blocked or dropped releases (open loop): any is suspect; beyond this share of the
#: releases the load offered was not the load asked for.
BLOCKED_INVALID = 0.01
#: Requests sent per second against the rate asked for.
SCHEDULE_SUSPECT = 0.95
SCHEDULE_INVALID = 0.80
#: Mann-Kendall: the trend counts when it is significant at this level AND large: Sen's
#: slope over the run is at least this share of the median (so that a tiny but steady
#: drift of a long run with many intervals is not called a broken run).
TREND_ALPHA = 0.01
TREND_MIN_INTERVALS = 10
TREND_P99_SUSPECT = 0.25
TREND_P99_INVALID = 1.0
TREND_RATE_SUSPECT = 0.10
TREND_RATE_INVALID = 0.25


class WorkerLoad(BaseModel):
    """One worker thread's load in the measured phase, from the OS."""

    cpu_time: float = Field(description="Thread CPU time (CLOCK_THREAD_CPUTIME_ID), seconds.")
    wall_time: float = Field(description="Wall time between the same two samples, seconds.")
    wait_time: float | None = Field(
        default=None, description="Runnable but waiting for a CPU (Linux schedstat), "
        "seconds; None where the kernel does not say.")

    @property
    def cpu_share(self) -> float:
        return self.cpu_time / self.wall_time if self.wall_time > 0 else 0.0

    @property
    def wait_share(self) -> float | None:
        if self.wait_time is None or self.wall_time <= 0:
            return None
        return self.wait_time / self.wall_time


class ValidityCheck(BaseModel):
    """One measure against its limits."""

    name: str = Field(description="cpu_share, run_queue_wait, hiccup, release_lateness, "
                      "blocked, schedule, trend_p99 or trend_rate.")
    verdict: CheckVerdict
    value: float | None = Field(default=None, description="The measure (its unit in `reason`).")
    reason: str = Field(description="One line: what was measured against what.")
    node: str | None = Field(
        default=None, description="A distributed run's node (its Result.hosts name) this "
        "check measured; None: the run as a whole.")


@dataclass(frozen=True)
class MannKendall:
    """Mann-Kendall's trend test of a series against its order."""

    n: int
    s: int
    var_s: float
    z: float
    p: float  #: two-sided
    tau: float
    slope: float  #: Sen's slope: the median of the pairwise slopes, per step


def mann_kendall(values: Sequence[float]) -> MannKendall:
    """The test of `values` (in time order; at least 3): S = sum of sign(x_j - x_i) over
    i < j, its variance n(n-1)(2n+5)/18 less the ties' term, Z with the continuity
    correction, the two-sided normal p-value, Kendall's tau and Sen's slope."""
    x = [float(v) for v in values]
    n = len(x)
    if n < 3:
        raise ValueError(f"Mann-Kendall needs at least 3 values (got {n})")
    s = 0
    slopes = []
    for i in range(n - 1):
        xi = x[i]
        for j in range(i + 1, n):
            d = x[j] - xi
            s += (d > 0) - (d < 0)
            slopes.append(d / (j - i))
    ties: dict[float, int] = {}
    for v in x:
        ties[v] = ties.get(v, 0) + 1
    var_s = (n * (n - 1) * (2 * n + 5)
             - sum(t * (t - 1) * (2 * t + 5) for t in ties.values() if t > 1)) / 18.0
    if var_s <= 0:
        z = 0.0
    elif s > 0:
        z = (s - 1) / math.sqrt(var_s)
    elif s < 0:
        z = (s + 1) / math.sqrt(var_s)
    else:
        z = 0.0
    p = math.erfc(abs(z) / math.sqrt(2.0))
    return MannKendall(n=n, s=s, var_s=var_s, z=z, p=p, tau=s / (n * (n - 1) / 2),
                       slope=statistics.median(slopes))


@dataclass(frozen=True)
class ValidityInputs:
    """What the checks read from a run (`Result.validity` fills it in)."""

    workers: Sequence[WorkerLoad]
    hiccup_p99: float | None  #: seconds; None without the hiccup meter
    spin: bool  #: the idle strategy spins: a worker is always busy by design
    requested_rps: float  #: all workers; 0: closed loop
    shaped: bool  #: stages or an explicit schedule: the rate changes by design
    worker_count: int
    latency_p99: float | None  #: the run's CO-corrected p99, seconds
    lateness_p99: float | None  #: release lateness p99, seconds
    blocked: int  #: blocked plus dropped releases
    released: int  #: releases of the measured phase
    sent_rate: float  #: requests that ended (any outcome) per second of the run
    interval_p99: Sequence[float]  #: per interval, in order (the intervals with responses)
    interval_rate: Sequence[float]


def _grade(value: float, suspect: float, invalid: float) -> Verdict:
    if value >= invalid:
        return "invalid"
    return "suspect" if value >= suspect else "valid"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms"


def _cpu(inputs: ValidityInputs) -> list[ValidityCheck]:
    if not inputs.workers:
        return [ValidityCheck(name="cpu_share", verdict="not tested",
                              reason="no thread CPU time (a run made elsewhere)")]
    share = max(w.cpu_share for w in inputs.workers)
    if inputs.spin:
        cpu = ValidityCheck(name="cpu_share", verdict="not tested", value=share,
                            reason=f"busiest worker {share:.0%} busy: the spin idle "
                            "strategy keeps it busy by design")
    else:
        verdict = _grade(share, CPU_SHARE_SUSPECT, CPU_SHARE_INVALID)
        if verdict == "invalid" and inputs.requested_rps <= 0:
            verdict = "suspect"  # closed loop: the rate may be the generator's own limit
        cpu = ValidityCheck(
            name="cpu_share", verdict=verdict, value=share,
            reason=f"busiest worker {share:.0%} busy (limits {CPU_SHARE_SUSPECT:.0%}, "
            f"{CPU_SHARE_INVALID:.0%})" + (
                ": the rate may be the generator's limit" if inputs.requested_rps <= 0
                and verdict != "valid" else ""))
    waits = [w.wait_share for w in inputs.workers if w.wait_share is not None]
    if not waits:
        wait = ValidityCheck(name="run_queue_wait", verdict="not tested",
                             reason="the kernel keeps no run-queue wait (schedstat)")
    else:
        share = max(waits)
        verdict = _grade(share, WAIT_SHARE_SUSPECT, WAIT_SHARE_INVALID)
        wait = ValidityCheck(
            name="run_queue_wait", verdict=verdict, value=share,
            reason=f"a worker waited for a CPU {share:.0%} of the run (limits "
            f"{WAIT_SHARE_SUSPECT:.0%}, {WAIT_SHARE_INVALID:.0%})"
            + (": the host is short of CPU" if verdict != "valid" else ""))
    return [cpu, wait]


def _hiccup(inputs: ValidityInputs) -> ValidityCheck:
    h = inputs.hiccup_p99
    if h is None:
        return ValidityCheck(name="hiccup", verdict="not tested", reason="no hiccup meter")
    ref = inputs.latency_p99 or 0.0
    suspect = max(HICCUP_FLOOR_SUSPECT, HICCUP_SHARE_SUSPECT * ref)
    invalid = max(HICCUP_FLOOR_INVALID, HICCUP_SHARE_INVALID * ref)
    return ValidityCheck(
        name="hiccup", verdict=_grade(h, suspect, invalid), value=h,
        reason=f"event-loop stall p99 {_ms(h)} (limits {_ms(suspect)}, {_ms(invalid)}, from "
        f"the run's p99 {_ms(ref)})")


def _schedule(inputs: ValidityInputs) -> list[ValidityCheck]:
    if inputs.requested_rps <= 0:
        return [ValidityCheck(name=name, verdict="not tested", reason="closed loop: no schedule")
                for name in ("release_lateness", "blocked", "schedule")]
    out = []
    gap = inputs.worker_count / inputs.requested_rps  # a worker's inter-arrival time
    late = inputs.lateness_p99
    if late is None:
        out.append(ValidityCheck(name="release_lateness", verdict="not tested",
                                 reason="no release lateness recorded"))
    else:
        verdict: Verdict = "valid"
        if late >= LATENESS_FLOOR:
            verdict = _grade(late / gap, LATENESS_SUSPECT, LATENESS_INVALID)
        out.append(ValidityCheck(
            name="release_lateness", verdict=verdict, value=late,
            reason=f"release lateness p99 {_ms(late)} = {late / gap:.3g} inter-arrival times "
            f"of {_ms(gap)} (limits {LATENESS_SUSPECT:g}, {LATENESS_INVALID:g})"))
    share = inputs.blocked / inputs.released if inputs.released else 0.0
    verdict = ("invalid" if share > BLOCKED_INVALID else "suspect") if inputs.blocked else "valid"
    out.append(ValidityCheck(
        name="blocked", verdict=verdict, value=float(inputs.blocked),
        reason=f"{inputs.blocked} blocked or dropped releases of {inputs.released} "
        f"(invalid above {BLOCKED_INVALID:.0%})"))
    if inputs.shaped:
        out.append(ValidityCheck(name="schedule", verdict="not tested",
                                 reason="a shaped schedule (stages, offsets)"))
    else:
        kept = inputs.sent_rate / inputs.requested_rps
        out.append(ValidityCheck(
            name="schedule", verdict="invalid" if kept < SCHEDULE_INVALID
            else "suspect" if kept < SCHEDULE_SUSPECT else "valid", value=kept,
            reason=f"{inputs.sent_rate:,.0f} requests/s of {inputs.requested_rps:,.0f} asked "
            f"= {kept:.1%} (limits {SCHEDULE_SUSPECT:.0%}, {SCHEDULE_INVALID:.0%})"))
    return out


def _trend(name: str, what: str, series: Sequence[float], suspect: float,
           invalid: float) -> ValidityCheck:
    if len(series) < TREND_MIN_INTERVALS:
        return ValidityCheck(
            name=name, verdict="not tested",
            reason=f"{len(series)} intervals (the trend test needs {TREND_MIN_INTERVALS}; "
            "--stats-interval)")
    mk = mann_kendall(series)
    median = statistics.median(series)
    change = mk.slope * (len(series) - 1) / median if median > 0 else 0.0
    verdict: Verdict = "valid"
    if mk.p < TREND_ALPHA:
        verdict = _grade(abs(change), suspect, invalid)
    direction = "rose" if change > 0 else "fell"
    return ValidityCheck(
        name=name, verdict=verdict, value=change,
        reason=f"{what} {direction} {abs(change):.0%} over the run (Mann-Kendall p={mk.p:.2g}, "
        f"{len(series)} intervals; limits {suspect:.0%}, {invalid:.0%} at p<{TREND_ALPHA:g})"
        + (": not stationary" if verdict != "valid" else ""))


def assess(inputs: ValidityInputs) -> list[ValidityCheck]:
    """Every check of the run, in a fixed order."""
    checks = _cpu(inputs)
    checks.append(_hiccup(inputs))
    checks += _schedule(inputs)
    checks.append(_trend("trend_p99", "interval p99", inputs.interval_p99,
                         TREND_P99_SUSPECT, TREND_P99_INVALID))
    rate: Sequence[float] = inputs.interval_rate
    if inputs.shaped:
        checks.append(ValidityCheck(name="trend_rate", verdict="not tested",
                                    reason="a shaped schedule changes its rate by design"))
    else:
        checks.append(_trend("trend_rate", "interval throughput", rate,
                             TREND_RATE_SUSPECT, TREND_RATE_INVALID))
    return checks


def worst(checks: Sequence[ValidityCheck]) -> Verdict:
    verdicts = {c.verdict for c in checks}
    if "invalid" in verdicts:
        return "invalid"
    return "suspect" if "suspect" in verdicts else "valid"


def merge_core_histograms(dicts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The core's histogram dicts (count, min, max, sum, sumsq, sparse counts) of several
    workers as one: counts add bucket by bucket (HdrHistogram's merge)."""
    counts: dict[int, int] = {}
    total = low = high = total_sum = total_sq = 0
    for d in dicts:
        n = int(d.get("count", 0))
        if not n:
            continue
        low = min(low, int(d["min"])) if total else int(d["min"])
        high = max(high, int(d["max"]))
        total += n
        total_sum += d.get("sum", 0)
        total_sq += d.get("sumsq", 0)
        for index, count in d.get("counts") or ():
            counts[int(index)] = counts.get(int(index), 0) + int(count)
    return {"count": total, "min": low, "max": high, "sum": total_sum, "sumsq": total_sq,
            "counts": sorted(counts.items())}
