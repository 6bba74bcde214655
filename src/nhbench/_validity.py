"""Whether a run's numbers can be trusted: the checks behind `Result.validity`.

Each check compares one measure of the run with two limits and says ``valid``,
``suspect`` or ``invalid`` (or ``not tested`` when the run has nothing to test it with);
the run's verdict is its worst check. docs/trust.md "Validity" gives every limit with its
reason; the limits are the module constants below, so that the document and the code name
the same numbers.

- The load generator: each worker thread's CPU share of the measured phase and its
  run-queue wait (from the OS, read at the phase's two ends), the event loop's own lateness
  on the worker's 10 ms housekeeping timer (the hiccup meter), release lateness p99 against
  the inter-arrival time, blocked or dropped releases.
- The schedule kept: requests sent against the requests the schedule plans (a fixed rate,
  stages, an explicit schedule), and per interval of the timeline the releases made
  against the count the requested process plans over the interval's exact bounds
  (`Planned`): a relative deviation for a uniform schedule, a chi-square dispersion for a
  Poisson one.
- Stationarity: a Mann-Kendall trend test on the timeline's per-interval p99 and
  throughput (the throughput over the planned rate when there is a schedule, so that a
  ramp asked for is no trend), its variance corrected for the intervals' autocorrelation
  (Hamed & Rao 1998).

Mann-Kendall is written out here (scipy is no dependency of nhbench, and the test is the
S statistic, its variance with the tie correction and the normal tail: Kendall 1975,
Hirsch, Slack & Smith 1982; Sen's slope for the size of the trend, Sen 1968), as is the
chi-square tail (the regularized incomplete gamma function).
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, Field

from . import _histogram

__all__ = [
    "MannKendall",
    "Planned",
    "ValidityCheck",
    "ValidityInputs",
    "Verdict",
    "WorkerLoad",
    "assess",
    "IntervalCounts",
    "chi2_sf",
    "mann_kendall",
    "planned_offsets",
    "planned_rate",
    "planned_stages",
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
#: The hiccup meter's p99 (how late the loop ran its 10 ms housekeeping timer): scheduler wake-up
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
#: A Poisson schedule's count is random: a shortfall of the whole run counts only beyond
#: this many standard deviations (sqrt of the planned count) of the count planned.
SCHEDULE_POISSON_SIGMAS = 3.0
#: The releases per interval against the planned process: consecutive intervals are pooled
#: until they plan this many releases (the chi-square test's usual rule, Cochran 1954), and
#: the test needs this many pooled intervals.
ARRIVALS_MIN_PLANNED = 5.0
ARRIVALS_MIN_GROUPS = 3
#: Uniform: the worst interval's relative deviation from its planned count, beyond what a
#: kept schedule can be off by (one release per worker and burst, plus the releases of
#: ARRIVALS_SLACK at each bound): 5 % and 20 %, an interval kept as the `schedule` limits
#: ask of the whole run.
ARRIVALS_SUSPECT = 0.05
ARRIVALS_INVALID = 0.20
#: Where an interval's bound falls for each worker: the worker closes its interval when it
#: wakes up to the controller's signal, tens of microseconds after the bound, up to a
#: millisecond on a loaded virtual machine.
ARRIVALS_SLACK = 0.001
#: Poisson: the counts' chi-square against Poisson(planned) must be significant at this
#: level (a kept schedule is flagged in one run of a thousand) AND their dispersion (the
#: chi-square over its degrees of freedom, 1 for Poisson counts) large: releases that come
#: in clumps of c have a dispersion of about c, so 2 is pairs and 10 bursts of ten, as the
#: release lateness limits.
ARRIVALS_ALPHA = 0.001
DISPERSION_SUSPECT = 2.0
DISPERSION_INVALID = 10.0
#: Mann-Kendall: the trend counts when it is significant at this level AND large: Sen's
#: slope over the run is at least this share of the median (so that a tiny but steady
#: drift of a long run with many intervals is not called a broken run). The variance of S
#: is corrected for the intervals' autocorrelation (Hamed & Rao 1998), so the level is the
#: test's real false-alarm rate; 0.01 rather than 0.05 because two series are tested on
#: every run, and a clean run should be flagged by chance in about one run of fifty at most
#: before the size limits (which make it rarer still).
TREND_ALPHA = 0.01
#: Hamed & Rao's screen of the ranks' autocorrelations: a lag counts when it is significant
#: at 5 % (their choice): |r_k| > z(0.975) / sqrt(n).
TREND_LAG_Z = 1.959963984540054
#: A shaped schedule's throughput is tested as its ratio to the planned rate, on intervals
#: that plan at least this many releases per worker and burst (a ratio of fewer is the
#: rounding of the schedule, 5 % at 20).
TREND_MIN_PLANNED = 20.0
TREND_MIN_INTERVALS = 10
#: Mann-Kendall and Sen's slope are quadratic in the series' length (every pair of
#: intervals): an hour at 0.1 s intervals is 648 million pairs. A longer series is tested
#: on the means of consecutive groups of intervals, at most this many: 125,000 pairs, some
#: 0.1 s in Python, and a trend over the run survives the averaging (it is the short-range
#: noise that the means smooth).
TREND_MAX_POINTS = 500
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
                      "blocked, schedule, arrivals, trend_p99 or trend_rate.")
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
    var_s: float  #: with Hamed and Rao's correction when asked for (times n_ratio)
    z: float
    p: float  #: two-sided
    tau: float
    slope: float  #: Sen's slope: the median of the pairwise slopes, per step
    n_ratio: float = 1.0  #: Hamed and Rao's n/n*: 1 without the correction


def _ranks(x: Sequence[float]) -> list[float]:
    """Ranks from 1, ties sharing their mean rank."""
    order = sorted(range(len(x)), key=x.__getitem__)
    ranks = [0.0] * len(x)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and x[order[j + 1]] == x[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def _hamed_rao_ratio(x: Sequence[float], slope: float) -> float:
    """n/n*: the series less Sen's trend (x_i - slope * i), its ranks, and the
    autocorrelations of the ranks at every lag; the lags whose autocorrelation is
    significant (TREND_LAG_Z) add (n-k)(n-k-1)(n-k-2) r_k, times 2 / (n(n-1)(n-2))."""
    n = len(x)
    ranks = _ranks([v - slope * (i + 1) for i, v in enumerate(x)])
    mean = sum(ranks) / n
    y = [r - mean for r in ranks]
    c0 = sum(v * v for v in y)
    if c0 <= 0:
        return 1.0
    bound = TREND_LAG_Z / math.sqrt(n)
    total = 0.0
    for k in range(1, n):
        r = sum(y[i] * y[i + k] for i in range(n - k)) / c0
        if abs(r) > bound:
            total += (n - k) * (n - k - 1) * (n - k - 2) * r
    return 1 + 2 / (n * (n - 1) * (n - 2)) * total


def mann_kendall(values: Sequence[float], *, hamed_rao: bool = False) -> MannKendall:
    """The test of `values` (in time order; at least 3): S = sum of sign(x_j - x_i) over
    i < j, its variance n(n-1)(2n+5)/18 less the ties' term, Z with the continuity
    correction, the two-sided normal p-value, Kendall's tau and Sen's slope.

    With `hamed_rao`, the variance is multiplied by Hamed and Rao's n/n* (1998): intervals
    of a run are autocorrelated (a slow second is followed by another), which makes the
    plain test's p-value too small; their correction widens the variance by the
    significant autocorrelations of the detrended series' ranks (pymannkendall's
    hamed_rao_modification_test, which the tests compare with)."""
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
    slope = statistics.median(slopes)
    ratio = _hamed_rao_ratio(x, slope) if hamed_rao else 1.0
    if ratio <= 0:
        # Strong negative autocorrelations of a short series can take n/n* to zero or
        # below, a variance that means nothing. Negative autocorrelation shrinks the
        # variance (the corrected test is then the more liberal one), so the plain variance
        # is the conservative answer.
        ratio = 1.0
    var_s *= ratio
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
                       slope=slope, n_ratio=ratio)


def chi2_sf(x: float, k: int) -> float:
    """P(X >= x) for a chi-square of k degrees of freedom: the regularized upper incomplete
    gamma Q(k/2, x/2), by its series below a + 1 and its continued fraction (modified
    Lentz) above, as Numerical Recipes (6.2) gives them; to 1e-12 of scipy's."""
    if k <= 0:
        raise ValueError(f"degrees of freedom must be positive (got {k})")
    if x <= 0:
        return 1.0
    a, y = k / 2, x / 2
    log_front = a * math.log(y) - y - math.lgamma(a)
    if y < a + 1:
        term = total = 1 / a
        n = a
        for _ in range(10_000):
            n += 1
            term *= y / n
            total += term
            if abs(term) < abs(total) * 1e-15:
                break
        return max(0.0, 1 - total * math.exp(log_front))
    tiny = 1e-300
    b = y + 1 - a
    c = 1 / tiny
    d = 1 / b
    h = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        step = d * c
        h *= step
        if abs(step - 1) < 1e-15:
            break
    return math.exp(log_front) * h


# ---- the schedule asked for --------------------------------------------------------------


@dataclass(frozen=True)
class Planned:
    """The arrival process a run asked for, as the releases it plans (all workers) by each
    time t, seconds after the run's start (the timeline's clock)."""

    what: str  #: "a fixed rate", "stages", "an explicit schedule"
    poisson: bool
    cumulative: Callable[[float], float]
    end: float  #: when the plan ends (the run's scheduled length or where it stopped)
    grain: float  #: releases a kept uniform schedule may be off by in any window
    slack: float = ARRIVALS_SLACK  #: seconds a release may move across a bound
    total: float = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "total", self.cumulative(self.end))

    def between(self, start: float, end: float) -> float:
        return max(0.0, self.cumulative(end) - self.cumulative(start))


def planned_rate(rps: float, end: float, *, count: int | None = None, poisson: bool = False,
                 grain: float = 1.0, slack: float = 0.0) -> Planned:
    """A fixed rate (`rps`, all workers) from 0 to `end`, at most `count` releases."""
    cap = math.inf if count is None else float(count)

    def cumulative(t: float) -> float:
        return min(cap, rps * min(max(t, 0.0), end))
    return Planned("a fixed rate", poisson, cumulative, end, grain, ARRIVALS_SLACK + slack)


def planned_stages(stages: Sequence[tuple[float, float]], workers: int, end: float | None = None,
                   *, poisson: bool = False) -> Planned:
    """Linear stages of per-worker rates (docs/engine.md "Shaping the schedule"): the
    integral of the piecewise linear rate, times the workers."""
    bounds = []
    t0 = done = previous = 0.0
    for seconds, rate in stages:
        bounds.append((t0, seconds, previous, rate, done))
        done += (previous + rate) / 2 * seconds
        t0 += seconds
        previous = rate
    stop = t0 if end is None else min(end, t0)

    def cumulative(t: float) -> float:
        t = min(max(t, 0.0), stop)
        for start, seconds, low, high, before in reversed(bounds):
            if t >= start:
                tau = min(t - start, seconds)
                ramp = (high - low) * tau * tau / (2 * seconds) if seconds > 0 else 0.0
                return workers * (before + low * tau + ramp)
        return 0.0
    return Planned("stages", poisson, cumulative, stop, float(workers))


def planned_offsets(offsets: Sequence[float], workers: int, end: float | None = None
                    ) -> Planned:
    """An explicit schedule: every worker releases request k at offset k."""
    times = sorted(offsets)
    stop = times[-1] if end is None else end
    if end is None and times:
        stop = math.nextafter(times[-1], math.inf)

    def cumulative(t: float) -> float:
        # A release due at a bound is made at or after it: in the interval that starts there.
        return float(workers * bisect.bisect_left(times, min(t, stop)))
    return Planned("an explicit schedule", False, cumulative, stop, float(workers))


class IntervalCounts(NamedTuple):
    """One timeline interval: its start and duration (s), releases made, responses."""

    start: float
    duration: float
    released: int
    responses: int


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
    #: The process asked for; None for a closed loop or a run that plans nothing checkable.
    planned: Planned | None = None
    sent: int | None = None  #: requests sent (releases less dropped); None: use sent_rate
    #: Every interval of the timeline, in order, with its releases (empty without one).
    intervals: Sequence[IntervalCounts] = ()
    #: Why the intervals cannot be set against the plan, when they cannot ("" otherwise).
    intervals_note: str = ""


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
                for name in ("release_lateness", "blocked", "schedule", "arrivals")]
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
    out.append(_kept(inputs))
    out.append(_arrivals(inputs))
    return out


def _kept(inputs: ValidityInputs) -> ValidityCheck:
    planned = inputs.planned
    limits = f"(limits {SCHEDULE_SUSPECT:.0%}, {SCHEDULE_INVALID:.0%})"
    if planned is not None and inputs.sent is not None and planned.total > 0:
        kept = inputs.sent / planned.total
        noise = (SCHEDULE_POISSON_SIGMAS * math.sqrt(planned.total) if planned.poisson
                 else planned.grain)
        within = abs(planned.total - inputs.sent) <= noise
        graded = 1.0 if within else kept
        return ValidityCheck(
            name="schedule", verdict="invalid" if graded < SCHEDULE_INVALID
            else "suspect" if graded < SCHEDULE_SUSPECT else "valid", value=kept,
            reason=f"{inputs.sent:,} requests sent of {planned.total:,.0f} planned by "
            f"{planned.what} = {kept:.1%} {limits}"
            + (f"; within the Poisson count's {SCHEDULE_POISSON_SIGMAS:g} standard deviations"
               if within and planned.poisson and kept != 1 else ""))
    if inputs.shaped:
        return ValidityCheck(name="schedule", verdict="not tested",
                             reason="a shaped schedule without its plan")
    kept = inputs.sent_rate / inputs.requested_rps
    return ValidityCheck(
        name="schedule", verdict="invalid" if kept < SCHEDULE_INVALID
        else "suspect" if kept < SCHEDULE_SUSPECT else "valid", value=kept,
        reason=f"{inputs.sent_rate:,.0f} requests/s of {inputs.requested_rps:,.0f} asked "
        f"= {kept:.1%} {limits}")


def _pooled(planned: Planned, intervals: Sequence[IntervalCounts]
            ) -> list[tuple[float, float, float, int]]:
    """Consecutive intervals pooled until each group plans ARRIVALS_MIN_PLANNED releases:
    (start, span, planned, released) per group; a short remainder joins the last group."""
    groups: list[tuple[float, float, float, int]] = []
    start = span = expected = 0.0
    made = 0
    open_group = False
    for iv in intervals:
        if not open_group:
            start, span, expected, made, open_group = iv.start, 0.0, 0.0, 0, True
        expected += planned.between(iv.start, iv.start + iv.duration)
        made += iv.released
        span = iv.start + iv.duration - start
        if expected >= ARRIVALS_MIN_PLANNED:
            groups.append((start, span, expected, made))
            open_group = False
    if open_group and (expected > 0 or made > 0):
        if groups and expected < ARRIVALS_MIN_PLANNED:
            g_start, _, g_expected, g_made = groups.pop()
            groups.append((g_start, start + span - g_start, g_expected + expected,
                           g_made + made))
        elif expected > 0:
            groups.append((start, span, expected, made))
    return groups


def _arrivals(inputs: ValidityInputs) -> ValidityCheck:
    def untested(reason: str) -> ValidityCheck:
        return ValidityCheck(name="arrivals", verdict="not tested", reason=reason)
    planned = inputs.planned
    if planned is None:
        return untested(inputs.intervals_note or "no planned schedule")
    if inputs.intervals_note:
        return untested(inputs.intervals_note)
    if not inputs.intervals:
        return untested("no timeline (--stats-interval)")
    groups = _pooled(planned, inputs.intervals)
    if len(groups) < ARRIVALS_MIN_GROUPS:
        return untested(f"{len(groups)} intervals planning {ARRIVALS_MIN_PLANNED:g} releases or "
                        f"more (the test needs {ARRIVALS_MIN_GROUPS}; --stats-interval)")
    if planned.poisson:
        chi2 = sum((made - expected) ** 2 / expected for _, _, expected, made in groups)
        k = len(groups)
        dispersion = chi2 / k
        p = chi2_sf(chi2, k)
        verdict: Verdict = "valid"
        if p < ARRIVALS_ALPHA:
            verdict = _grade(dispersion, DISPERSION_SUSPECT, DISPERSION_INVALID)
        return ValidityCheck(
            name="arrivals", verdict=verdict, value=dispersion,
            reason=f"releases per interval against Poisson({planned.what}): dispersion "
            f"{dispersion:.3g} (chi-square {chi2:.4g}, {k} intervals, p={p:.2g}; limits "
            f"{DISPERSION_SUSPECT:g}, {DISPERSION_INVALID:g} at p<{ARRIVALS_ALPHA:g})"
            + (": not the process asked for" if verdict != "valid" else ""))
    worst_dev, at = -1.0, groups[0]
    for group in groups:
        start, span, expected, made = group
        tolerance = planned.grain + 2 * planned.slack * expected / span if span > 0 \
            else planned.grain
        # Ordered by the deviation beyond the tolerance, then by the raw one, so that a kept
        # schedule names its largest (tolerated) deviation.
        deviation = max(0.0, abs(made - expected) - tolerance) / expected
        key = deviation + abs(made - expected) / expected * 1e-9
        if key > worst_dev:
            worst_dev, at = key, group
    start, span, expected, made = at
    tolerance = planned.grain + 2 * planned.slack * expected / span if span > 0 \
        else planned.grain
    worst_dev = max(0.0, abs(made - expected) - tolerance) / expected
    verdict = _grade(worst_dev, ARRIVALS_SUSPECT, ARRIVALS_INVALID)
    return ValidityCheck(
        name="arrivals", verdict=verdict, value=worst_dev,
        reason=f"releases per interval against {planned.what}: worst {worst_dev:.1%} off "
        f"beyond the schedule's rounding ({made:,} made of {expected:,.0f} planned at "
        f"{start:.3g}-{start + span:.3g} s; {len(groups)} intervals; limits "
        f"{ARRIVALS_SUSPECT:.0%}, {ARRIVALS_INVALID:.0%})"
        + (": not the process asked for" if verdict != "valid" else ""))


def _coarsened(series: Sequence[float], most: int) -> Sequence[float]:
    """`series` as at most `most` means of consecutive groups of equal size (the last
    group takes the remainder), or as it is when it is that short."""
    n = len(series)
    if n <= most:
        return series
    size = -(-n // most)
    return [statistics.fmean(series[i:i + size]) for i in range(0, n, size)]


def _trend(name: str, what: str, series: Sequence[float], suspect: float,
           invalid: float) -> ValidityCheck:
    if len(series) < TREND_MIN_INTERVALS:
        return ValidityCheck(
            name=name, verdict="not tested",
            reason=f"{len(series)} intervals (the trend test needs {TREND_MIN_INTERVALS}; "
            "--stats-interval)")
    intervals = len(series)
    series = _coarsened(series, TREND_MAX_POINTS)
    mk = mann_kendall(series, hamed_rao=True)
    if mk.n_ratio < 1:
        # Significant negative lags shrink the variance, and white noise has some by
        # chance: uncorrected, the test flagged 3-5 % of trendless series at the 1 % level
        # (docs/trust.md). The correction may only widen the plain test's variance.
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
        f"Hamed-Rao n/n*={mk.n_ratio:.3g}, {intervals} intervals"
        + (f" as {len(series)} means" if len(series) < intervals else "")
        + f"; limits {suspect:.0%}, "
        f"{invalid:.0%} at p<{TREND_ALPHA:g})"
        + (": not stationary" if verdict != "valid" else ""))


def assess(inputs: ValidityInputs) -> list[ValidityCheck]:
    """Every check of the run, in a fixed order."""
    checks = _cpu(inputs)
    checks.append(_hiccup(inputs))
    checks += _schedule(inputs)
    checks.append(_trend("trend_p99", "interval p99", inputs.interval_p99,
                         TREND_P99_SUSPECT, TREND_P99_INVALID))
    planned = inputs.planned
    if planned is not None and inputs.intervals and not inputs.intervals_note:
        checks.append(_trend("trend_rate", f"interval throughput over the rate planned by "
                             f"{planned.what}", _rate_ratios(planned, inputs.intervals),
                             TREND_RATE_SUSPECT, TREND_RATE_INVALID))
    elif inputs.shaped:
        checks.append(ValidityCheck(name="trend_rate", verdict="not tested",
                                    reason="a shaped schedule changes its rate by design, "
                                    "and the run has no timeline to set against its plan"))
    else:
        checks.append(_trend("trend_rate", "interval throughput", inputs.interval_rate,
                             TREND_RATE_SUSPECT, TREND_RATE_INVALID))
    return checks


def _rate_ratios(planned: Planned, intervals: Sequence[IntervalCounts]) -> list[float]:
    """Per interval inside the plan that plans TREND_MIN_PLANNED releases per worker and
    burst or more: responses over planned releases. A ramp that was asked for is flat here;
    a server that falls behind it is not."""
    out = []
    for iv in intervals:
        if iv.start + iv.duration > planned.end + planned.slack:
            break
        expected = planned.between(iv.start, iv.start + iv.duration)
        if expected >= TREND_MIN_PLANNED * planned.grain:
            out.append(iv.responses / expected)
    return out


def worst(checks: Sequence[ValidityCheck]) -> Verdict:
    verdicts = {c.verdict for c in checks}
    if "invalid" in verdicts:
        return "invalid"
    return "suspect" if "suspect" in verdicts else "valid"


def merge_core_histograms(dicts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The core's histogram dicts (count, min, max, sum, sumsq, sparse counts) of several
    workers as one: counts add bucket by bucket (HdrHistogram's merge)."""
    parts: list[Any] = []
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
        parts.append(d.get("counts") or ())
    return {"count": total, "min": low, "max": high, "sum": total_sum, "sumsq": total_sq,
            "counts": _histogram.merge_sparse(parts)}
