"""``--until STAT:±X%``: re-estimate the confidence interval of the named statistics as the
run's live-statistics intervals close, and say when they are all tight enough
(docs/trust.md, "Running until the numbers are tight").

The interval is the one `nhbench compare` computes for a single run (``_compare``): a
circular block bootstrap over the interval histograms with Politis & White's block length,
here of the statistic itself rather than of a difference. Each estimate is seeded by the
run's seed and the number of intervals it reads, so the same intervals give the same
interval and the same decision, whenever the estimate runs. `UntilTracker` is fed the
intervals by ``Benchmark`` and estimated on a fixed stride (`stride`), so that the cost of
an estimate, which grows with the intervals up to ``_compare.MAX_GROUPS``, stays a small
share of the run.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from ._compare import _block_length, _Run, _sparse_of, comparison_stats_interval
from ._timeline import IntervalRecord
from ._validity import ValidityCheck
from .options import UNTIL_MIN_INTERVALS

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["UNTIL_CONFIDENCE", "UNTIL_RESAMPLES", "Until", "UntilStatistic", "UntilTracker",
           "estimate", "stride", "until_check", "until_stats_interval"]

#: The confidence level of the intervals --until waits for.
UNTIL_CONFIDENCE = 0.95
#: Resamples per estimate: enough for the 2.5th and 97.5th percentiles to sit 25 resamples
#: from each end (Efron & Tibshirani's rule of thumb for a percentile interval is 1000),
#: half of `nhbench compare`'s 2000 since an estimate runs again and again during the run.
UNTIL_RESAMPLES = 1000
#: A percentile's interval needs this many responses beyond it (p99: 1,000 responses,
#: p99.9: 10,000): with fewer, every resample draws the same few highest values and the
#: interval is narrow for want of data, not because the estimate is good.
TAIL_RESPONSES = 10
#: Up to this many intervals every interval is re-estimated; beyond, every
#: ``ceil(n / STRIDE_DIVISOR)``-th: the estimate's cost grows with n (docs/trust.md gives it
#: measured), and re-estimating after a fixed share of new data keeps the total cost linear.
STRIDE_DIVISOR = 10
#: Beyond this many intervals an estimate reads groups of consecutive intervals (at most
#: this many): the resample is a (resamples x groups) by (groups x buckets) product, and
#: this bounds it (docs/trust.md gives an estimate's cost measured).
UNTIL_MAX_GROUPS = 200
#: Neighbouring histogram buckets are merged up to this fraction of the tightest target:
#: a percentile then moves by at most a tenth of the width asked for, and at ±2 % the
#: 5,000 buckets of a wide latency distribution become about 600.
RESOLUTION_SHARE = 10
_PERCENTILE_FRACTIONS = {"p50": 0.5, "p90": 0.9, "p99": 0.99, "p99.9": 0.999}
_SUCCESS = "benchmark.http_2xx"
_NS = 1e9


class UntilStatistic(BaseModel):
    """One ``--until`` target and its last estimate."""

    statistic: str = Field(description="p50, p90, p99, p99.9, mean or rate.")
    target: float = Field(description="The half-width asked for, a fraction of the estimate.")
    estimate: float | None = Field(default=None, description="The statistic over the "
                                   "intervals read (seconds; rate: responses per second).")
    low: float | None = Field(default=None, description="The interval's lower end.")
    high: float | None = Field(default=None, description="The interval's upper end.")
    half_width: float | None = Field(
        default=None, description="(high - low) / 2 over the estimate: what the target "
        "is compared with.")
    reached: bool = False
    reason: str = Field(default="", description="Why there is no interval, when none.")


class Until(BaseModel):
    """What ``--until`` asked and what it got (``Result.until``): an nhbench key."""

    reached: bool = Field(description="Every statistic's interval was within its target.")
    reached_at: float | None = Field(
        default=None, description="Seconds of intervals read when it was reached (the run "
        "then stopped and drained); None when not reached.")
    max_duration: float
    intervals: int = Field(description="Intervals the last estimate read.")
    estimates: int = Field(description="Estimates made: during the run, and when not "
                           "reached the last one over every interval.")
    estimate_seconds: float = Field(
        default=0.0, description="Wall seconds the estimates took in all (in the thread "
        "that waits for the run; the workers go on meanwhile).")
    block_length: int | None = Field(default=None,
                                     description="The last estimate's block length.")
    stats_interval: float
    stats_interval_chosen: bool = Field(
        description="nhbench turned live statistics on for --until (none was given).")
    confidence: float = UNTIL_CONFIDENCE
    resamples: int = UNTIL_RESAMPLES
    seed: int = 0
    reason: str = Field(description="One line: reached when, or why not.")
    statistics: list[UntilStatistic] = Field(default_factory=list)

    def summary_line(self) -> str:
        parts = []
        for s in self.statistics:
            got = "no interval" if s.half_width is None else f"±{s.half_width * 100:.2g}%"
            parts.append(f"{s.statistic} {got} (target ±{s.target * 100:g}%)")
        head = "reached" if self.reached else "NOT REACHED"
        return f"{head}: {', '.join(parts)}; {self.reason}"


@dataclass
class Estimate:
    """One estimate: each target's statistic with its interval, and whether all hold."""

    intervals: int
    seconds: float
    block_length: int | None
    statistics: list[UntilStatistic]

    @property
    def reached(self) -> bool:
        return all(s.reached for s in self.statistics)


def until_stats_interval(max_duration: float) -> float:
    """The live-statistics interval an --until run gets when none is given: the one the
    comparison of runs picks (`comparison_stats_interval`) for a fifth of the maximum
    duration, so that the first estimate's intervals are in by a fifth of the bound (with
    the comparison's own pick, a twentieth of the bound, they would be in only at its end
    for a bound under 20 s)."""
    return comparison_stats_interval(max_duration / 5)


def stride(intervals: int) -> int:
    """How many new intervals an estimate waits for once `intervals` have been read."""
    return max(1, math.ceil(intervals / STRIDE_DIVISOR))


def estimate(counts: npt.NDArray[np.float64], highest: npt.NDArray[np.float64],
             middle: npt.NDArray[np.float64], ok: Sequence[float], errors: Sequence[float],
             seconds: Sequence[float], targets: Sequence[tuple[str, float]], *, seed: int,
             resamples: int = UNTIL_RESAMPLES,
             confidence: float = UNTIL_CONFIDENCE) -> Estimate:
    """The interval of each target's statistic over these intervals: `counts` is one row of
    histogram counts per interval over bucket columns in ascending order (`highest` and
    `middle` each bucket's highest and middle value, seconds), with each interval's 2xx,
    errors and seconds."""
    import numpy as np

    n = counts.shape[0]
    ok_a = np.asarray(ok, dtype=float)
    errors_a = np.asarray(errors, dtype=float)
    seconds_a = np.asarray(seconds, dtype=float)
    if n > UNTIL_MAX_GROUPS:
        # Groups of consecutive intervals, as the comparison of runs does beyond its
        # MAX_GROUPS: the blocks are then made of groups, and an estimate costs the same
        # however long the run.
        size = math.ceil(n / UNTIL_MAX_GROUPS)
        starts = np.arange(0, n, size)
        counts = np.add.reduceat(counts, starts, axis=0)
        ok_a, errors_a, seconds_a = (np.add.reduceat(a, starts) for a in
                                     (ok_a, errors_a, seconds_a))
    run = _Run(counts, ok_a, errors_a, seconds_a, True)
    length = _block_length([run], middle)
    # Seeded by the intervals read: the same intervals give the same draws, whenever and
    # however often the estimate ran before.
    rng = np.random.default_rng([seed, n])
    weights = _block_weights(counts.shape[0], rng, resamples, length)
    point = _statistics(np.ones((1, counts.shape[0])), counts, highest, middle, ok_a,
                        seconds_a)
    replicas = _statistics(weights, counts, highest, middle, ok_a, seconds_a)
    total = float(counts.sum())
    tail = (1 - confidence) / 2
    out = []
    for name, target in targets:
        value = float(point[name][0])
        fraction = _PERCENTILE_FRACTIONS.get(name)
        if fraction is not None and total * (1 - fraction) < TAIL_RESPONSES:
            need = math.ceil(TAIL_RESPONSES / (1 - fraction))
            out.append(UntilStatistic(
                statistic=name, target=target, estimate=None if math.isnan(value) else value,
                reason=f"{int(total):,} responses; {name} needs {need:,} for an interval"))
            continue
        drawn = replicas[name][~np.isnan(replicas[name])]
        if math.isnan(value) or value <= 0 or len(drawn) < resamples / 2:
            out.append(UntilStatistic(statistic=name, target=target,
                                      estimate=None if math.isnan(value) else value,
                                      reason=f"no {name} in most resamples"))
            continue
        low, high = (float(v) for v in np.quantile(drawn, [tail, 1 - tail]))
        half = (high - low) / 2 / value
        out.append(UntilStatistic(statistic=name, target=target, estimate=value, low=low,
                                  high=high, half_width=half, reached=half <= target))
    return Estimate(n, float(seconds_a.sum()), length, out)


def _block_weights(rows: int, rng: Any, resamples: int, length: int) -> Any:
    """How many times each interval is in each of `resamples` circular block resamples
    (resamples x rows): blocks of `length` consecutive intervals from uniform starts,
    wrapping at the end, as many as cover the run (as the comparison of runs draws)."""
    import numpy as np

    blocks = math.ceil(rows / length)
    starts = rng.multinomial(blocks, [1.0 / rows] * rows, size=resamples)
    weights = np.zeros_like(starts, dtype=float)
    for j in range(length):
        weights += np.roll(starts, j, axis=1)
    return weights


def _statistics(weights: Any, counts: Any, highest: Any, middle: Any, ok: Any,
                seconds: Any) -> dict[str, Any]:
    """Each statistic of each weighted merge of the intervals (one per row of `weights`).
    The percentiles read the weighted cumulative counts (the one large product, in single
    precision: a count off by one in ten million cannot move a percentile), the mean each
    interval's sum, the rate the 2xx over the seconds; percentiles as hdrh reports them."""
    import numpy as np

    cumulative = weights.astype(np.float32) @ np.cumsum(counts, axis=1).astype(np.float32)
    total = weights @ counts.sum(axis=1)
    out: dict[str, Any] = {}
    for name, fraction in _PERCENTILE_FRACTIONS.items():
        # hdrh's target count: round half up, at least 1.
        target = np.maximum(np.floor(fraction * total + 0.5), 1)
        index = np.minimum((cumulative < target[:, None] - 0.5).sum(axis=1),
                           len(highest) - 1)
        out[name] = np.where(total > 0, highest[index], np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        out["mean"] = np.where(total > 0, (weights @ (counts @ middle)) / np.maximum(total, 1),
                               np.nan)
        spent = weights @ seconds
        out["rate"] = np.where(spent > 0, (weights @ ok) / np.where(spent > 0, spent, 1),
                               np.nan)
    return out


class _Columns:
    """The intervals' histograms as a dense matrix that grows as intervals arrive: one row
    per interval, one column per bucket seen so far (in order of appearance; sorted when
    an estimate reads them), with each bucket's lowest and highest value kept."""

    def __init__(self) -> None:
        import numpy as np

        from . import _histogram

        self._reference = _histogram.new_histogram()
        self._position: dict[int, int] = {}
        self._indices: list[int] = []
        self._lowest: list[float] = []
        self._highest: list[float] = []
        self._data = np.zeros((64, 256))
        self.rows = 0

    def add(self, row: dict[int, int]) -> None:
        import numpy as np

        ref = self._reference
        for index in row:
            if index not in self._position:
                self._position[index] = len(self._indices)
                self._indices.append(index)
                value = ref.get_value_from_index(index)
                self._lowest.append(ref.get_lowest_equivalent_value(value) / _NS)
                self._highest.append(ref.get_highest_equivalent_value(value) / _NS)
        rows, cols = self._data.shape
        if self.rows >= rows or len(self._indices) > cols:
            grown = np.zeros((max(rows, 2 * (self.rows + 1)),
                              max(cols, 2 * len(self._indices))))
            grown[:rows, :cols] = self._data
            self._data = grown
        for index, count in row.items():
            self._data[self.rows, self._position[index]] = count
        self.rows += 1

    def matrix(self, n: int, resolution: float) -> tuple[Any, Any, Any]:
        """The first `n` rows over the sorted columns, neighbouring buckets merged while
        the merged bucket's width stays within `resolution` of its lowest value; and the
        columns' highest and middle values in seconds."""
        import numpy as np

        order = np.argsort(np.array(self._indices, dtype=np.int64), kind="stable")
        # Only the buckets these rows use: those of later intervals must not change how
        # the buckets are merged, or the same intervals would give another estimate.
        order = order[self._data[:n, order].sum(axis=0) > 0]
        counts = self._data[:n, order]
        lowest = np.array(self._lowest)[order]
        highest = np.array(self._highest)[order]
        starts = [0]
        for i in range(1, len(order)):
            if highest[i] > lowest[starts[-1]] * (1 + resolution):
                starts.append(i)
        if len(starts) < len(order):
            counts = np.add.reduceat(counts, starts, axis=1)
            ends = [*starts[1:], len(order)]
            lowest = lowest[starts]
            highest = highest[[end - 1 for end in ends]]
        return counts, highest, (lowest + highest) / 2


class UntilTracker:
    """The intervals of a run as they close, and the estimates on them."""

    def __init__(self, targets: Sequence[tuple[str, float]], *, seed: int = 0,
                 resamples: int = UNTIL_RESAMPLES) -> None:
        self.targets = list(targets)
        self.seed = seed
        self.resamples = resamples
        self._columns = _Columns()
        self.ok: list[float] = []
        self.errors: list[float] = []
        self.seconds: list[float] = []
        self.estimates = 0
        self.estimate_seconds = 0.0
        self.last: Estimate | None = None
        self.reached: Estimate | None = None
        self._next = UNTIL_MIN_INTERVALS
        self._budget: Any = None
        # Buckets are read at a tenth of the tightest target: finer than that cannot move
        # the decision, and fewer buckets make an estimate cheaper.
        self.resolution = min((target for _, target in self.targets), default=1.0) / RESOLUTION_SHARE

    @property
    def intervals(self) -> int:
        return len(self.ok)

    def add(self, records: Iterable[IntervalRecord]) -> None:
        from . import _histogram

        if self._budget is None:
            self._budget = _histogram.DecodeBudget(
                1 << 31, f"the {1 << 31:,} counters nhbench decodes for --until")
        for record in records:
            if record.warmup:  # not the measured phase's
                continue
            self._columns.add(_sparse_of(record.hdr_histogram, self._budget)
                              if record.hdr_histogram else {})
            self.ok.append(float(record.counters.get(_SUCCESS, 0)))
            self.errors.append(float(record.errors))
            self.seconds.append(float(record.duration))

    def _estimate(self, n: int) -> Estimate:
        started = time.perf_counter()
        counts, highest, middle = self._columns.matrix(n, self.resolution)
        self.estimates += 1
        out = estimate(counts, highest, middle, self.ok[:n], self.errors[:n],
                       self.seconds[:n], self.targets, seed=self.seed,
                       resamples=self.resamples)
        self.estimate_seconds += time.perf_counter() - started
        return out

    def step(self) -> bool:
        """Estimate when due (the minimum reached, and `stride` intervals since the last
        estimate); True once every target held (it stays True)."""
        while self.reached is None and self.intervals >= self._next:
            # Estimated at exactly the due counts, so that the decisions do not depend on
            # how many intervals one poll happened to deliver.
            n = self._next
            self.last = self._estimate(n)
            self._next = n + stride(n)
            if self.last.reached:
                self.reached = self.last
        return self.reached is not None

    def final(self) -> Estimate | None:
        """The estimate the result reports: the one that reached the targets, else one
        over every interval read (None with fewer than the minimum)."""
        if self.reached is not None:
            return self.reached
        n = self.intervals
        if n < UNTIL_MIN_INTERVALS:
            return None
        if self.last is None or self.last.intervals != n:
            self.last = self._estimate(n)
        return self.last

    def summary(self, *, max_duration: float, stats_interval: float, chosen: bool,
                ended: str) -> Until:
        """`Until` for the result; `ended` says how the run ended when not reached."""
        final = self.final()
        if final is None:
            statistics = [UntilStatistic(statistic=name, target=target,
                                         reason="no estimate") for name, target in self.targets]
            reason = (f"{self.intervals} intervals, fewer than the {UNTIL_MIN_INTERVALS} "
                      f"the first estimate needs; {ended}")
            return Until(reached=False, max_duration=max_duration, intervals=self.intervals,
                         estimates=self.estimates, estimate_seconds=self.estimate_seconds,
                         stats_interval=stats_interval,
                         stats_interval_chosen=chosen, resamples=self.resamples,
                         seed=self.seed, reason=reason, statistics=statistics)
        if self.reached is not None:
            reason = (f"after {final.seconds:.3g} s ({final.intervals} intervals, "
                      f"{self.estimates} estimate{'s' if self.estimates != 1 else ''}); "
                      "the run stopped there")
        else:
            reason = f"{ended}; the last estimate read {final.intervals} intervals"
        return Until(reached=self.reached is not None,
                     reached_at=final.seconds if self.reached is not None else None,
                     max_duration=max_duration, intervals=final.intervals,
                     estimates=self.estimates, estimate_seconds=self.estimate_seconds,
                     block_length=final.block_length,
                     stats_interval=stats_interval, stats_interval_chosen=chosen,
                     resamples=self.resamples, seed=self.seed, reason=reason,
                     statistics=final.statistics)


def until_check(until: Until) -> ValidityCheck:
    """The validity check of an --until run: suspect when the target was not reached (the
    numbers are less precise than asked for)."""
    if until.reached:
        return ValidityCheck(name="until", verdict="valid", value=until.reached_at,
                             reason="--until " + until.summary_line())
    return ValidityCheck(name="until", verdict="suspect",
                         reason="--until " + until.summary_line())
