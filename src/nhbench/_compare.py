"""Statistically sound comparison of runs: `compare` and its verdict, `Comparison`
(docs/trust.md, "Comparing runs").

For p50, p90, p99, p99.9, the mean latency, the rate (2xx responses per second) and the
error rate, the candidate's value minus the baseline's, with a confidence interval from a
bootstrap, and a verdict per statistic: "regressed", "improved" or "no significant change"
(or "not tested", with the reason, when the data cannot give one).

The bootstrap resamples what a run is made of, not its requests one by one: consecutive
requests are not independent (a slow second makes its neighbours slow), so resampling them
one by one gives an interval far too narrow. A run that kept its interval histograms
(``stats_interval`` on: one HdrHistogram per interval in ``result.timeline``) is resampled
as a circular block bootstrap over its intervals (Politis & Romano 1992): blocks of
``block_length`` consecutive intervals, drawn with replacement, merged into one histogram
per resample, which keeps the dependence inside a block. The block length is the largest
of Politis & White's (2004, with Patton, Politis & White's 2009 correction) estimate for
the circular bootstrap over each run's per-interval mean latency and per-interval rate,
rounded up and kept within 1 .. a third of the shortest run's intervals; `block_length`
overrides it. A run without interval histograms (a Nighthawk file, a run with live
statistics off) is resampled request by request (its histogram multinomially, its errors
binomially), which is said in `Comparison.notes` since its interval is too narrow when the
run's latency is correlated, and gives no interval for its rate.

With several runs a side, each resample first draws the runs with replacement and then
resamples each drawn run as above (a two-level bootstrap, so that the run-to-run spread is
in the interval), and a Mann-Whitney U test on the runs' values of each statistic must agree
before a change is declared. The U test is computed here (exact distribution without ties,
normal approximation with the tie correction otherwise): scipy is not a dependency of
nhbench and the test is a few lines. When the runs are too few for the exact test to reach
the significance level at all (fewer than 4 a side at 95 %), the verdict rests on the
bootstrap alone and a note says so.

Everything is seeded (`seed`, default 0): the same inputs give the same numbers. numpy is
imported only when a comparison is computed, never at ``import nhbench``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ._format import format_latency, format_rate

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from ._result import Result

__all__ = [
    "COMPARED_STATISTICS",
    "Comparison",
    "StatisticComparison",
    "Verdict",
    "compare",
    "comparison_stats_interval",
    "single_threaded_blas",
]

Verdict = Literal["regressed", "improved", "no significant change", "not tested"]


def single_threaded_blas() -> None:
    """Have numpy's BLAS (OpenBLAS in numpy's wheels) use one thread in this process,
    unless the user chose otherwise (``OPENBLAS_NUM_THREADS`` set), before numpy is first
    imported; too late, it does nothing. The comparison's products are small (thousands of
    rows by tens), and OpenBLAS's threads cost more than they share: the browser's compare
    page took 175-205 ms of CPU with them, 89-94 ms with one, on 2 busy CPUs. Called by the
    commands that compare (``nhbench browse``, ``ui``, ``compare``); a library user's process
    is left as it is."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

#: The statistics a comparison covers, in its table's order, and which way is worse.
COMPARED_STATISTICS: tuple[tuple[str, str], ...] = (
    ("p50", "higher"), ("p90", "higher"), ("p99", "higher"), ("p99.9", "higher"),
    ("mean", "higher"), ("rate", "lower"), ("error_rate", "higher"),
)
_PERCENTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99, "p99.9": 0.999}
# A run's interval histograms are used when it has at least this many: fewer blocks than
# that cannot show how much the run's latency moves.
MIN_INTERVALS = 6
# Runs with more intervals are resampled over groups of consecutive intervals (at most this
# many groups): the resample is a (resamples x intervals) by (intervals x buckets) product.
MAX_GROUPS = 600
# The interval histograms of one comparison decode into at most this many counters (as the
# loader's bound per file): about 77,000 intervals of nhbench's layout.
MAX_DECODED_COUNTERS = 1 << 31
_NS = 1e9
_SUCCESS = "benchmark.http_2xx"


@dataclass(frozen=True)
class StatisticComparison:
    """One statistic of a comparison. Latencies in seconds, rate in responses per second,
    error rate as a fraction; `difference` is candidate minus baseline, `low`/`high` its
    confidence interval, `relative*` the same over the baseline (None when it is 0)."""

    name: str
    worse: str
    baseline: float | None
    candidate: float | None
    difference: float | None = None
    low: float | None = None
    high: float | None = None
    relative: float | None = None
    relative_low: float | None = None
    relative_high: float | None = None
    p_value: float | None = None
    verdict: Verdict = "not tested"
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in self.__dataclass_fields__}

    def interval_text(self) -> str:
        """The difference and its interval for people: ``+12.3% [+8.1%, +16.0%]``, or in
        the statistic's unit when the baseline is 0."""
        if self.difference is None:
            return "-"
        if self.verdict == "not tested":
            # No interval to speak of: the difference alone.
            return (f"{self.relative * 100:+.1f}%" if self.relative is not None
                    else self.value_text(self.difference, signed=True))
        if self.relative is not None and self.relative_low is not None \
                and self.relative_high is not None:
            return (f"{self.relative * 100:+.1f}% [{self.relative_low * 100:+.1f}%, "
                    f"{self.relative_high * 100:+.1f}%]")
        if self.low is None or self.high is None:
            return self.value_text(self.difference, signed=True)
        return (f"{self.value_text(self.difference, signed=True)} "
                f"[{self.value_text(self.low, signed=True)}, "
                f"{self.value_text(self.high, signed=True)}]")

    def value_text(self, value: float | None, *, signed: bool = False) -> str:
        if value is None:
            return "-"
        sign = "+" if signed and value > 0 else ("-" if signed and value < 0 else "")
        magnitude = abs(value) if signed else value
        if self.name == "rate":
            return sign + format_rate(magnitude)
        if self.name == "error_rate":
            return f"{sign}{magnitude * 100:.3g}%"
        return sign + format_latency(magnitude)


@dataclass(frozen=True)
class Comparison:
    """The verdict of `compare`: one `StatisticComparison` a statistic, and how it was
    reached. ``comparison["p99"]`` is one statistic; ``comparison.regressed`` names the
    statistics that got worse; ``str(comparison)`` is the table ``nhbench compare`` prints."""

    statistics: tuple[StatisticComparison, ...]
    method: str
    block_length: int | None
    confidence: float
    resamples: int
    seed: int
    baseline_runs: int
    candidate_runs: int
    notes: tuple[str, ...] = field(default_factory=tuple)

    def __getitem__(self, name: str) -> StatisticComparison:
        for statistic in self.statistics:
            if statistic.name == name:
                return statistic
        raise KeyError(f"no statistic {name!r} (compared: "
                       f"{', '.join(s.name for s in self.statistics)})")

    def __iter__(self) -> Iterator[StatisticComparison]:
        return iter(self.statistics)

    @property
    def regressed(self) -> list[str]:
        """The statistics whose verdict is "regressed" (empty: no regression)."""
        return [s.name for s in self.statistics if s.verdict == "regressed"]

    @property
    def improved(self) -> list[str]:
        return [s.name for s in self.statistics if s.verdict == "improved"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method, "block_length": self.block_length,
            "confidence": self.confidence, "resamples": self.resamples, "seed": self.seed,
            "baseline_runs": self.baseline_runs, "candidate_runs": self.candidate_runs,
            "notes": list(self.notes),
            "statistics": [s.to_dict() for s in self.statistics],
            "regressed": self.regressed,
        }

    def table(self) -> str:
        """The statistics as aligned text rows."""
        level = f"{self.confidence * 100:g}%"
        rows = [["statistic", "baseline", "candidate", f"change [{level} CI]", "verdict"]]
        if self.baseline_runs > 1 or self.candidate_runs > 1:
            rows[0].insert(4, "U test p")
        for s in self.statistics:
            row = [s.name, s.value_text(s.baseline), s.value_text(s.candidate),
                   s.interval_text(), s.verdict]
            if self.baseline_runs > 1 or self.candidate_runs > 1:
                row.insert(4, "-" if s.p_value is None else f"{s.p_value:.3g}")
            rows.append(row)
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        lines = []
        for row in rows:
            cells = [row[0].ljust(widths[0])]
            cells += [cell.rjust(width) for cell, width in zip(row[1:-1], widths[1:-1],
                                                               strict=True)]
            cells.append(row[-1])
            lines.append("  ".join(cells).rstrip())
        return "\n".join(lines)

    def __str__(self) -> str:
        head = (f"{self.baseline_runs} baseline run{'s' if self.baseline_runs != 1 else ''} "
                f"against {self.candidate_runs} candidate run"
                f"{'s' if self.candidate_runs != 1 else ''}; {self.method}"
                + (f", block length {self.block_length} intervals"
                   if self.block_length else "")
                + f", {self.resamples} resamples, seed {self.seed}")
        lines = [head, self.table()]
        lines += [f"note: {note}" for note in self.notes]
        return "\n".join(lines)

    __repr__ = __str__


def comparison_stats_interval(duration: float | None) -> float:
    """The live-statistics interval a run gets when it is made to be compared and none was
    asked for (``nhbench run --repeat``, the pytest plugin's --nhbench-save and statistical
    comparison): a twentieth of the duration, between 0.1 s and 1 s, so that a run of 2 s
    or more has the 20 intervals a block bootstrap needs to see its own variation."""
    if duration is None:
        return 1.0
    return min(1.0, max(0.1, duration / 20))


# --------------------------------------------------------------------------------------------
# A run as the resampler sees it
# --------------------------------------------------------------------------------------------


@dataclass
class _Run:
    """One run: interval histograms as rows over the comparison's bucket columns (or one
    row, the whole run, when it kept none), with each row's 2xx, errors and seconds."""

    counts: npt.NDArray[np.float64]  # rows x buckets
    ok: npt.NDArray[np.float64]
    errors: npt.NDArray[np.float64]
    seconds: npt.NDArray[np.float64]
    blocked: bool  # rows are intervals (block bootstrap), not the whole run


def _sparse_of(encoded: str, budget: Any) -> dict[int, int]:
    import numpy as np

    from . import _histogram

    histogram = _histogram.decode(encoded, budget=budget)
    if (histogram.lowest_trackable_value, histogram.significant_figures) != (
            _histogram.HIST_LOWEST, _histogram.HIST_SIGFIG):
        # Its bucket indices would mean other values than the other intervals'.
        raise _histogram.HistogramDecodeError(
            f"another layout than nhbench's (lowest {histogram.lowest_trackable_value}, "
            f"{histogram.significant_figures} digits)")
    counts = np.ctypeslib.as_array(histogram.counts)
    indices = np.nonzero(counts)[0]
    return {int(i): int(counts[i]) for i in indices}


def _run_rows(result: Result, budget: Any, where: str) -> tuple[
        list[dict[int, int]], list[float], list[float], list[float], bool]:
    """The run's rows as sparse counts, and their 2xx, errors and seconds; a histogram that
    does not decode is a HistogramDecodeError naming `where` and the interval."""
    from ._histogram import HistogramDecodeError
    from ._names import error_total

    # The warm-up's intervals are not the measured phase's: they are not resampled.
    timeline = [r for r in result.timeline if not r.warmup]
    if len(timeline) >= MIN_INTERVALS and all(r.hdr_histogram for r in timeline):
        rows = []
        for i, record in enumerate(timeline):
            try:
                rows.append(_sparse_of(record.hdr_histogram or "", budget))
            except HistogramDecodeError as exc:
                raise HistogramDecodeError(f"{where}, interval {i + 1}: {exc}") from None
        return (rows, [float(r.counters.get(_SUCCESS, 0)) for r in timeline],
                [float(r.errors) for r in timeline], [float(r.duration) for r in timeline],
                True)
    return ([_whole_histogram(result)], [float(result.counters[_SUCCESS])],
            [float(error_total(result.counters))], [float(result.duration)], False)


def _whole_histogram(result: Result) -> dict[int, int]:
    """The run's latency as sparse counts: the headline statistic's histogram, or for a
    file that has none (Nighthawk writes percentiles only, and no scheduled_to_response)
    the counts between its percentile points, each at the upper point's value."""
    from . import _histogram
    from ._names import REQUEST_TO_RESPONSE, SCHEDULED_TO_RESPONSE

    statistic = None
    for name in (SCHEDULED_TO_RESPONSE, REQUEST_TO_RESPONSE):
        try:
            statistic = result.stat(name)
        except KeyError:
            continue
        break
    if statistic is None or not statistic.count:
        return {}
    if statistic.has_histogram:
        return dict(_histogram.sparse_counts(statistic.histogram()))
    reference = _histogram.new_histogram()
    counts: dict[int, int] = {}
    previous = 0
    for point in sorted(statistic.percentiles, key=lambda p: (p.percentile, p.count)):
        if point.count > previous:
            nanoseconds = min(max(int(round(point.value * _NS)), _histogram.HIST_LOWEST),
                              _histogram.HIST_HIGHEST)
            index = reference._counts_index_for(nanoseconds)
            counts[index] = counts.get(index, 0) + point.count - previous
            previous = point.count
    return counts


def _grouped(rows: list[dict[int, int]], ok: list[float], errors: list[float],
             seconds: list[float]) -> tuple[list[dict[int, int]], list[float], list[float],
                                            list[float]]:
    if len(rows) <= MAX_GROUPS:
        return rows, ok, errors, seconds
    size = math.ceil(len(rows) / MAX_GROUPS)
    out: tuple[list[dict[int, int]], list[float], list[float], list[float]] = ([], [], [], [])
    for start in range(0, len(rows), size):
        merged: dict[int, int] = {}
        for row in rows[start:start + size]:
            for index, count in row.items():
                merged[index] = merged.get(index, 0) + count
        out[0].append(merged)
        out[1].append(sum(ok[start:start + size]))
        out[2].append(sum(errors[start:start + size]))
        out[3].append(sum(seconds[start:start + size]))
    return out


# --------------------------------------------------------------------------------------------
# Block length: Politis & White (2004), corrected by Patton, Politis & White (2009)
# --------------------------------------------------------------------------------------------


def politis_white(series: Sequence[float] | npt.NDArray[np.float64]) -> float:
    """The optimal block length of the circular block bootstrap for the mean of `series`
    (Politis & White 2004, with the 2009 correction): the autocorrelations decide how many
    lags matter (the first run of ``K_N`` lags within the 95 % band of an uncorrelated
    series), a flat-top lag window over twice that many estimates the long-run variance
    and its first moment, and ``b = (2 G^2 / D)^(1/3) n^(1/3)`` with ``D = 4/3 g(0)^2``.
    1.0 for an uncorrelated or constant series."""
    import numpy as np

    x = np.asarray(series, dtype=float)
    n = len(x)
    if n < 4:
        return 1.0
    x = x - x.mean()
    variance = float(np.dot(x, x)) / n
    if variance <= 0:
        return 1.0
    k_n = max(5, int(math.ceil(math.sqrt(math.log10(n)))))
    m_max = int(math.ceil(math.sqrt(n))) + k_n
    max_lag = min(n - 1, m_max + k_n)
    acov = np.array([float(np.dot(x[:n - k], x[k:])) / n for k in range(max_lag + 1)])
    rho = acov / acov[0]
    band = 2.0 * math.sqrt(math.log10(n) / n)
    m_hat = None
    for m in range(1, max_lag - k_n + 2):
        window = rho[m:m + k_n]
        if len(window) == k_n and bool(np.all(np.abs(window) < band)):
            m_hat = m
            break
    if m_hat is None:
        m_hat = max_lag
    lags = min(2 * m_hat, m_max, max_lag)
    if lags < 1:
        return 1.0
    k = np.arange(-lags, lags + 1)
    t = np.abs(k) / lags
    lam = np.where(t <= 0.5, 1.0, np.where(t <= 1.0, 2.0 * (1.0 - t), 0.0))
    r = acov[np.abs(k)]
    g_big = float(np.sum(lam * np.abs(k) * r))
    g_zero = float(np.sum(lam * r))
    d_cb = 4.0 / 3.0 * g_zero * g_zero
    if d_cb <= 0 or g_big == 0:
        return 1.0
    return float((2.0 * g_big * g_big / d_cb) ** (1.0 / 3.0) * n ** (1.0 / 3.0))


def _block_length(runs: Sequence[_Run], middle: Any) -> int:
    import numpy as np

    best = 1.0
    for run in runs:
        totals = run.counts.sum(axis=1)
        if len(totals) < MIN_INTERVALS:
            continue
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(totals > 0, (run.counts @ middle) / np.maximum(totals, 1),
                            0.0)
            rate = np.where(run.seconds > 0, run.ok / np.maximum(run.seconds, 1e-12), 0.0)
        best = max(best, politis_white(mean), politis_white(rate))
    shortest = min(len(run.ok) for run in runs)
    return int(max(1, min(math.ceil(best), max(1, shortest // 3))))


# --------------------------------------------------------------------------------------------
# Mann-Whitney U
# --------------------------------------------------------------------------------------------


def mann_whitney(a: Sequence[float], b: Sequence[float]) -> float:
    """The two-sided p-value of the Mann-Whitney U test of samples `a` and `b`: exact (the
    distribution of U by counting) without ties, the normal approximation with the tie
    correction and a continuity correction with ties."""
    n1, n2 = len(a), len(b)
    if n1 == 0 or n2 == 0:
        return 1.0
    pooled = sorted([(v, 0) for v in a] + [(v, 1) for v in b])
    ranks = [0.0] * len(pooled)
    ties = []
    i = 0
    while i < len(pooled):
        j = i
        while j + 1 < len(pooled) and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        for k in range(i, j + 1):
            ranks[k] = (i + j) / 2 + 1
        ties.append(j - i + 1)
        i = j + 1
    r1 = sum(rank for rank, (_, side) in zip(ranks, pooled, strict=True) if side == 0)
    u1 = r1 - n1 * (n1 + 1) / 2
    u = min(u1, n1 * n2 - u1)
    if all(t == 1 for t in ties) and n1 * n2 <= 2500:
        counts = _u_distribution(n1, n2)
        total = sum(counts)
        tail = sum(counts[: int(u) + 1])
        return min(1.0, 2.0 * tail / total)
    n = n1 + n2
    tie_term = sum(t ** 3 - t for t in ties) / (n * (n - 1))
    sigma = math.sqrt(n1 * n2 / 12.0 * ((n + 1) - tie_term))
    if sigma == 0:
        return 1.0
    z = (abs(u1 - n1 * n2 / 2) - 0.5) / sigma
    return min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2)))


def _u_distribution(n1: int, n2: int) -> list[int]:
    """How many arrangements give each U = 0..n1*n2 (the recursion f(u; m, n) =
    f(u - n; m - 1, n) + f(u; m, n - 1))."""
    # table[m][n] as lists, built up over n1 + n2.
    prev: list[list[list[int]]] = [[[1] for _ in range(n2 + 1)] for _ in range(n1 + 1)]
    for m in range(1, n1 + 1):
        for n in range(1, n2 + 1):
            left = prev[m - 1][n]
            right = prev[m][n - 1]
            size = m * n + 1
            out = [0] * size
            for u, c in enumerate(right):
                out[u] += c
            for u, c in enumerate(left):
                out[u + n] += c
            prev[m][n] = out
    return prev[n1][n2]


def min_p_value(n1: int, n2: int) -> float:
    """The smallest two-sided p-value the exact U test can give with these sizes."""
    return min(1.0, 2.0 / math.comb(n1 + n2, n1))


# --------------------------------------------------------------------------------------------
# The comparison
# --------------------------------------------------------------------------------------------


def _as_runs(value: Result | Sequence[Result], side: str) -> list[Result]:
    # Result is known here only as a type (this module sits below _result): a side is a
    # list of runs, or one run.
    runs = list(value) if isinstance(value, Sequence) else [value]
    if not runs:
        raise ValueError(f"{side}: no result to compare")
    for run in runs:
        if not hasattr(run, "timeline") or not hasattr(run, "global_result"):
            raise TypeError(f"{side}: expected Result objects, got {type(run).__name__}")
    return runs


def compare(baseline: Result | Sequence[Result], candidate: Result | Sequence[Result], *,
            confidence: float = 0.95, resamples: int = 2000, seed: int = 0,
            block_length: int | None = None) -> Comparison:
    """Compare `candidate` with `baseline` (one `Result` each, or lists of the runs of
    each side): see the module doc and docs/trust.md, "Comparing runs"."""
    import numpy as np

    from . import _histogram

    if not 0.5 <= confidence < 1:
        raise ValueError(f"confidence must be in [0.5, 1) (got {confidence!r})")
    if not 100 <= resamples <= 100_000:
        raise ValueError(f"resamples must be in 100..100000 (got {resamples!r})")
    if block_length is not None and block_length < 1:
        raise ValueError(f"block_length must be at least 1 (got {block_length!r})")
    sides = [_as_runs(baseline, "baseline"), _as_runs(candidate, "candidate")]
    budget = _histogram.DecodeBudget(MAX_DECODED_COUNTERS,
                                     f"the {MAX_DECODED_COUNTERS:,} counters nhbench "
                                     "decodes per comparison")
    raw = [[_run_rows(result, budget, f"{name} run {i + 1} of {len(side)}")
            for i, result in enumerate(side)]
           for name, side in zip(("baseline", "candidate"), sides, strict=True)]
    blocked = all(run[4] for side in raw for run in side)
    notes: list[str] = []
    if not blocked:
        # Mixed: every run resampled the same way, the way the weakest one allows.
        raw = [[_whole(run) for run in side] for side in raw]
        notes.append("not every run has interval histograms (live statistics were off, "
                     f"fewer than {MIN_INTERVALS} intervals, or a Nighthawk file): requests "
                     "are resampled one by one, so the interval is too narrow when latency "
                     "is correlated in time; runs with --stats-interval compare by blocks")
    raw = [[(*_grouped(*run[:4]), run[4]) for run in side] for side in raw]
    columns = sorted({index for side in raw for run in side for row in run[0] for index in row})
    position = {index: i for i, index in enumerate(columns)}
    reference = _histogram.new_histogram()
    highest = np.array([reference.get_highest_equivalent_value(
        reference.get_value_from_index(i)) for i in columns], dtype=float) / _NS
    lowest = np.array([reference.get_lowest_equivalent_value(
        reference.get_value_from_index(i)) for i in columns], dtype=float) / _NS
    # The mean reads each bucket at its middle, as hdrh's own mean does.
    middle = (lowest + highest) / 2
    runs: list[list[_Run]] = []
    for side in raw:
        built = []
        for rows, ok, errors, seconds, is_blocked in side:
            counts = np.zeros((len(rows), len(columns)))
            for r, row in enumerate(rows):
                for index, count in row.items():
                    counts[r, position[index]] = count
            built.append(_Run(counts, np.array(ok, float), np.array(errors, float),
                              np.array(seconds, float), is_blocked))
        runs.append(built)
    length = None
    if blocked:
        length = block_length or _block_length([run for side in runs for run in side], middle)
    rng = np.random.default_rng(seed)
    point = [_side_statistics(_merged(side, middle), highest) for side in runs]
    replicas = [_side_statistics(_resample(side, rng, resamples, length, middle), highest)
                for side in runs]
    n1, n2 = len(runs[0]), len(runs[1])
    several = n1 > 1 or n2 > 1
    per_run = None
    alpha = 1 - confidence
    if not several:
        notes.append("one run a side: the intervals cover how much each run varies within "
                     "itself, not how much runs on this host differ from one another; "
                     "several runs a side (nhbench run --repeat N, 4 or more) add that")
    else:
        per_run = [[_side_statistics(_merged([run], middle), highest) for run in side]
                   for side in runs]
        if min_p_value(n1, n2) > alpha:
            notes.append(f"{n1} against {n2} runs: the rank test cannot reach "
                         f"p < {alpha:g} with so few runs; the verdicts rest on the "
                         "bootstrap alone")
    statistics = []
    for name, worse in COMPARED_STATISTICS:
        statistics.append(_statistic(name, worse, point, replicas, per_run, confidence,
                                     alpha, min_p_value(n1, n2) if several else 1.0,
                                     blocked or several))
    if blocked:
        method = "circular block bootstrap over interval histograms"
    else:
        method = "bootstrap of requests (no interval histograms)"
    if several:
        method = "two-level bootstrap (runs, then " + (
            "blocks of intervals" if blocked else "requests") + ") and Mann-Whitney U"
    return Comparison(tuple(statistics), method, length, confidence, resamples, seed,
                      n1, n2, tuple(notes))


def _whole(run: tuple[list[dict[int, int]], list[float], list[float], list[float], bool]
           ) -> tuple[list[dict[int, int]], list[float], list[float], list[float], bool]:
    rows, ok, errors, seconds, _ = run
    merged: dict[int, int] = {}
    for row in rows:
        for index, count in row.items():
            merged[index] = merged.get(index, 0) + count
    return [merged], [sum(ok)], [sum(errors)], [sum(seconds)], False


@dataclass
class _Replicas:
    """What each statistic needs of a set of rows (resamples, or one row: a side's runs
    merged): their latency count, the sum of their latencies (each bucket at its middle),
    the bucket column of each of `_PERCENTILES`, and their 2xx, errors and seconds."""

    total: npt.NDArray[np.float64]
    weighted: npt.NDArray[np.float64]
    found: npt.NDArray[np.int64]  # rows x percentiles
    ok: npt.NDArray[np.float64]
    errors: npt.NDArray[np.float64]
    seconds: npt.NDArray[np.float64]


def _targets(total: Any) -> Any:
    """hdrh's target count of each percentile of each row: round half up, at least 1."""
    import numpy as np

    fractions = np.array(list(_PERCENTILES.values()))
    return np.maximum(np.floor(fractions[None, :] * total[:, None] + 0.5), 1)


def _first_reaching(cumulative: Any, targets: Any) -> Any:
    """The first column of each row of `cumulative` (running totals, non-decreasing along
    a row) that reaches each of the row's `targets` (a binary search per row); the last
    column for a row that reaches none (a row without counts)."""
    import numpy as np

    found = np.empty(targets.shape, dtype=np.int64)
    for row, row_targets in enumerate(targets):
        found[row] = np.searchsorted(cumulative[row], row_targets, side="left")
    return np.minimum(found, max(cumulative.shape[1] - 1, 0))


def _of_counts(counts: Any, ok: Any, errors: Any, seconds: Any, middle: Any) -> _Replicas:
    import numpy as np

    total = counts.sum(axis=1)
    found = _first_reaching(np.cumsum(counts, axis=1), _targets(total))
    return _Replicas(total, counts @ middle, found, ok, errors, seconds)


# Columns between two that the block bootstrap's percentile search computes for every
# resample; the columns in between are computed only for the resamples whose percentile
# falls there.
_COARSE = 32


def _of_blocks(parts: list[tuple[Any, Any]], middle: Any, ok: Any, errors: Any,
               seconds: Any) -> _Replicas:
    """The statistics of resamples that are weighted sums of interval rows: `parts` holds
    each run's (weights: resamples x rows, counts: rows x buckets). A resample's counts
    (resamples x buckets, tens of MB) are never formed: its running totals are its weights
    times the rows' running totals (the sum is linear), computed first at every
    `_COARSE`-th column and then, for the resamples whose percentile lies between two of
    those, at the columns between them. The counts are whole numbers far below 2^53, so
    the totals and percentiles are exactly those of the counts; the latency sum is summed
    in another order (per row first), which can move the mean in its last digits."""
    import numpy as np

    running = [(weights, np.cumsum(counts, axis=1)) for weights, counts in parts]
    columns = running[0][1].shape[1]
    resamples = parts[0][0].shape[0]
    total = sum(weights @ rows[:, -1] for weights, rows in running) if columns else \
        np.zeros(resamples)
    weighted = sum(weights @ (counts @ middle) for weights, counts in parts)
    targets = _targets(total)
    found = np.zeros(targets.shape, dtype=np.int64)
    if columns:
        marks = np.arange(min(_COARSE, columns) - 1, columns, _COARSE)
        if marks[-1] != columns - 1:
            marks = np.append(marks, columns - 1)
        coarse = sum(weights @ rows[:, marks] for weights, rows in running)
        block = _first_reaching(coarse, targets)  # the first mark reaching each target
        for mark in np.unique(block):
            low = int(marks[mark - 1]) + 1 if mark > 0 else 0
            high = int(marks[mark]) + 1
            for p in range(targets.shape[1]):
                rows_here = np.nonzero(block[:, p] == mark)[0]
                if not len(rows_here):
                    continue
                fine = sum(weights[rows_here] @ rows[:, low:high] for weights, rows in running)
                found[rows_here, p] = low + _first_reaching(fine, targets[rows_here, p:p + 1])[:, 0]
    return _Replicas(total, weighted, found, ok, errors, seconds)


def _resample(side: list[_Run], rng: Any, resamples: int, length: int | None, middle: Any
              ) -> _Replicas:
    """`resamples` resampled copies of the side: the runs drawn with replacement (several
    runs), then each drawn run's blocks of intervals (or its requests)."""
    import numpy as np

    n = len(side)
    draws = (rng.multinomial(n, [1.0 / n] * n, size=resamples) if n > 1
             else np.ones((resamples, 1), dtype=np.int64))
    columns = side[0].counts.shape[1]
    counts = None if length is not None else np.zeros((resamples, columns))
    parts = []
    ok = np.zeros(resamples)
    errors = np.zeros(resamples)
    seconds = np.zeros(resamples)
    for r, run in enumerate(side):
        times = draws[:, r]
        if run.blocked:
            assert length is not None
            rows = run.counts.shape[0]
            blocks = math.ceil(rows / length)
            starts = rng.multinomial(times * blocks, [1.0 / rows] * rows)
            # Each start covers `length` consecutive intervals, wrapping at the end.
            weights = np.zeros_like(starts, dtype=float)
            for j in range(length):
                weights += np.roll(starts, j, axis=1)
            parts.append((weights, run.counts))
            ok += weights @ run.ok
            errors += weights @ run.errors
            seconds += weights @ run.seconds
        else:
            assert counts is not None
            total = run.counts[0].sum()
            if total > 0:
                probabilities = run.counts[0] / total
                counts += rng.multinomial((times * total).astype(np.int64), probabilities)
            finished = run.ok[0] + run.errors[0]
            if finished > 0:
                drawn_errors = rng.binomial((times * finished).astype(np.int64),
                                            run.errors[0] / finished)
            else:
                drawn_errors = np.zeros(resamples)
            errors += drawn_errors
            ok += times * finished - drawn_errors
            seconds += times * run.seconds[0]
    if counts is None:
        return _of_blocks(parts, middle, ok, errors, seconds)
    return _of_counts(counts, ok, errors, seconds, middle)


def _merged(side: list[_Run], middle: Any) -> _Replicas:
    """The side's runs (all their rows) as one row."""
    import numpy as np

    counts = sum(run.counts.sum(axis=0) for run in side)[None, :]
    ok = np.array([sum(float(run.ok.sum()) for run in side)])
    errors = np.array([sum(float(run.errors.sum()) for run in side)])
    seconds = np.array([sum(float(run.seconds.sum()) for run in side)])
    return _of_counts(counts, ok, errors, seconds, middle)


def _side_statistics(replicas: _Replicas, highest: Any) -> dict[str, Any]:
    """Each statistic of each row of `replicas` (NaN where a row has none)."""
    import numpy as np

    total = replicas.total
    out: dict[str, Any] = {}
    for column, name in enumerate(_PERCENTILES):
        index = replicas.found[:, column]
        out[name] = np.where(total > 0, highest[index] if len(highest) else np.nan, np.nan)
    ok, errors, seconds = replicas.ok, replicas.errors, replicas.seconds
    with np.errstate(invalid="ignore", divide="ignore"):
        out["mean"] = np.where(total > 0, replicas.weighted / np.maximum(total, 1), np.nan)
        out["rate"] = np.where(seconds > 0, ok / np.where(seconds > 0, seconds, 1), np.nan)
        finished = ok + errors
        out["error_rate"] = np.where(finished > 0, errors / np.where(finished > 0, finished, 1),
                                     np.nan)
    return out


def _statistic(name: str, worse: str, point: list[dict[str, Any]],
               replicas: list[dict[str, Any]], per_run: list[list[dict[str, Any]]] | None,
               confidence: float, alpha: float, reachable: float,
               has_spread: bool) -> StatisticComparison:
    import numpy as np

    base = float(point[0][name][0])
    cand = float(point[1][name][0])
    if math.isnan(base) or math.isnan(cand):
        side = "baseline" if math.isnan(base) else "candidate"
        return StatisticComparison(name, worse, None if math.isnan(base) else base,
                                   None if math.isnan(cand) else cand,
                                   reason=f"the {side} has no {name}")
    diffs = replicas[1][name] - replicas[0][name]
    diffs = diffs[~np.isnan(diffs)]
    if len(diffs) < len(replicas[0][name]) / 2:
        # Most resamples drew intervals without a response (a run that was mostly idle):
        # what is left is not a distribution of the statistic.
        return StatisticComparison(name, worse, base, cand, cand - base,
                                   relative=cand / base - 1 if base else None,
                                   reason=f"most resamples have no {name}")
    tail = (1 - confidence) / 2
    low, high = (float(v) for v in np.quantile(diffs, [tail, 1 - tail]))
    relative = rel_low = rel_high = None
    if base != 0:
        with np.errstate(invalid="ignore", divide="ignore"):
            ratios = replicas[1][name] / replicas[0][name] - 1
        ratios = ratios[np.isfinite(ratios)]
        relative = cand / base - 1
        if len(ratios):
            rel_low, rel_high = (float(v) for v in np.quantile(ratios, [tail, 1 - tail]))
    p_value = None
    if per_run is not None:
        a = [float(run[name][0]) for run in per_run[0] if not math.isnan(run[name][0])]
        b = [float(run[name][0]) for run in per_run[1] if not math.isnan(run[name][0])]
        p_value = mann_whitney(a, b)
    result = StatisticComparison(name, worse, base, cand, cand - base, low, high, relative,
                                 rel_low, rel_high, p_value)
    if name == "rate" and not has_spread:
        return _with(result, "not tested", "one run a side without interval histograms: "
                     "nothing shows how much the rate varies")
    up, down = low > 0, high < 0
    if p_value is not None and reachable <= alpha and p_value >= alpha:
        up = down = False
    if not (up or down):
        return _with(result, "no significant change", "")
    worse_now = up if worse == "higher" else down
    return _with(result, "regressed" if worse_now else "improved", "")


def _with(result: StatisticComparison, verdict: Verdict, reason: str) -> StatisticComparison:
    from dataclasses import replace

    return replace(result, verdict=verdict, reason=reason)
