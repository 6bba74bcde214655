"""Turn the C core's histogram counts into `hdrh.HdrHistogram` objects and statistics.

The core records every latency in nanoseconds into a counts array with exactly the layout of
an HdrHistogram with lowest trackable value 1, highest 60 s and 3 significant digits (see
docs/architecture.md), and returns only the non-zero buckets as ``(index, count)`` pairs. The
same layout in the PyPI ``hdrhistogram`` package means the counts can be copied index for
index: hdrh then provides merging and the standard compressed encoding ("HISTFAAA…") that
other HdrHistogram tools read.

Besides the buckets the core keeps the exact count, min, max, sum and sum of squares, so min,
max, mean and pstdev are exact rather than quantized to bucket boundaries.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hdrh.histogram import HdrHistogram

__all__ = [
    "HIST_LOWEST",
    "HIST_HIGHEST",
    "HIST_SIGFIG",
    "Summary",
    "PercentilePoint",
    "new_histogram",
    "from_core",
    "from_sparse",
    "summary_from_core",
    "percentile_points",
    "sparse_counts",
    "encode",
    "decode",
]

HIST_LOWEST = 1
HIST_HIGHEST = 60_000_000_000
HIST_SIGFIG = 3


@dataclass(frozen=True)
class Summary:
    """Exact moments of a recorded stream, in the unit it was recorded in (ns or bytes)."""

    count: int
    min: int
    max: int
    mean: float
    pstdev: float


@dataclass(frozen=True)
class PercentilePoint:
    """One reported percentile: `percentile` as a fraction, value, cumulative count."""

    percentile: float
    value: int
    count: int


def new_histogram() -> HdrHistogram:
    """An empty histogram with the core's layout."""
    return HdrHistogram(HIST_LOWEST, HIST_HIGHEST, HIST_SIGFIG)


def from_sparse(pairs: Iterable[Sequence[int]]) -> HdrHistogram:
    """Build an HdrHistogram from ``(index, count)`` pairs of the core's layout."""
    histogram = new_histogram()
    counts = histogram.counts
    length = histogram.counts_len
    total = 0
    lowest = -1
    highest = -1
    for index, count in pairs:
        index = int(index)
        count = int(count)
        if count <= 0:
            continue
        if not 0 <= index < length:
            raise ValueError(f"histogram bucket index {index} outside 0..{length - 1}")
        counts[index] += count
        total += count
        lowest = index if lowest < 0 else min(lowest, index)
        highest = max(highest, index)
    # hdrh keeps min, max and total outside the counts array; this is the hook it uses itself
    # after decoding or adding, and the (misspelled) name is its real name.
    histogram.set_internal_tacking_values(lowest, highest, total)
    return histogram


def from_core(d: Mapping[str, Any]) -> HdrHistogram:
    """Build an HdrHistogram from one entry of the core's ``histograms`` dict."""
    return from_sparse(d.get("counts") or ())


def sparse_counts(histogram: HdrHistogram) -> list[tuple[int, int]]:
    """The non-zero ``(index, count)`` pairs of a histogram (the core's format)."""
    counts = histogram.counts
    return [(i, int(counts[i])) for i in range(histogram.counts_len) if counts[i]]


def summary_from_core(d: Mapping[str, Any]) -> Summary:
    """Exact count, min, max, mean and pstdev from the core's count/min/max/sum/sumsq."""
    count = int(d.get("count", 0))
    if count <= 0:
        # An empty stream has no min or max; the core may hold sentinels there (UINT64_MAX),
        # which must not leak into a report as 584 years.
        return Summary(0, 0, 0, 0.0, 0.0)
    total = float(d.get("sum", 0.0))
    mean = total / count
    variance = float(d.get("sumsq", 0.0)) / count - mean * mean
    # E[x^2] - E[x]^2 can come out slightly negative from rounding when every value is equal.
    pstdev = math.sqrt(variance) if variance > 0 else 0.0
    return Summary(count, int(d.get("min", 0)), int(d.get("max", 0)), mean, pstdev)


def percentile_points(
    pairs: Iterable[Sequence[int]],
    points: Iterable[float],
    exact_min: int | None = None,
    exact_max: int | None = None,
) -> list[PercentilePoint]:
    """Value and cumulative count at each point (fractions in [0, 1]) of sparse counts.

    The values are what hdrh's ``get_percentile_to_value_dict`` gives for the same counts
    (highest equivalent value of the bucket where the cumulative count reaches the target;
    lowest equivalent value for percentile 0), computed from the sparse pairs instead of a
    scan of all 27648 buckets. When the exact min and max are known the value is clamped into
    [min, max]: the true value lies in both the bucket and that range, so the clamped value
    is never further from it, and p0 and p100 become the exact min and max.
    """
    ordered = sorted((int(i), int(c)) for i, c in pairs if int(c) > 0)
    total = sum(count for _, count in ordered)
    if total == 0:
        return []
    reference = new_histogram()  # for its bucket arithmetic only
    result = []
    for point in sorted(set(points)):
        # The same target count rule, in the same arithmetic, as hdrh's
        # get_target_count_at_percentile: round half up, at least 1.
        target = max(int(min(point * 100.0, 100.0) * total / 100 + 0.5), 1)
        cumulative = 0
        found = ordered[-1][0]
        for index, count in ordered:
            cumulative += count
            if cumulative >= target:
                found = index
                break
        bucket_value = reference.get_value_from_index(found)
        if point > 0:
            value = reference.get_highest_equivalent_value(bucket_value)
        else:
            value = reference.get_lowest_equivalent_value(bucket_value)
        if exact_max is not None:
            value = min(value, exact_max)
        if exact_min is not None:
            value = max(value, exact_min)
        result.append(PercentilePoint(point, int(value), cumulative))
    return result


def encode(histogram: HdrHistogram) -> str:
    """The standard compressed, base64 encoding ("HISTFAAA…") as text."""
    blob = histogram.encode()
    return blob.decode("ascii") if isinstance(blob, bytes) else str(blob)


def decode(text: str) -> HdrHistogram:
    """Decode an encoding made by `encode` (or any HdrHistogram V2 encoder)."""
    return HdrHistogram.decode(text.encode("ascii") if isinstance(text, str) else text)
