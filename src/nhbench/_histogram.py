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

import array
import base64
import binascii
import ctypes
import functools
import math
import struct
import threading
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyhdrh
from hdrh.codec import HdrPayload, PayloadHeader
from hdrh.histogram import HdrHistogram, get_bucket_count

__all__ = [
    "HIST_LOWEST",
    "HIST_HIGHEST",
    "HIST_SIGFIG",
    "Summary",
    "PercentilePoint",
    "new_histogram",
    "from_core",
    "from_sparse",
    "merge_sparse",
    "summary_from_core",
    "percentile_points",
    "packed_percentile_points",
    "unpack_buckets",
    "sparse_counts",
    "encode",
    "encode_sparse",
    "check",
    "decode",
    "HistogramDecodeError",
    "MAX_DECODED_COUNTS",
    "DecodeBudget",
    "decoded_counts_len",
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


@functools.lru_cache(maxsize=1)
def _reference() -> HdrHistogram:
    """One empty histogram of the core's layout, only ever read, for its bucket arithmetic:
    building one allocates and clears 27,648 counters (milliseconds), which every interval
    record's percentiles paid."""
    return new_histogram()


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


def merge_sparse(parts: Iterable[Sequence[Sequence[int]]]) -> list[tuple[int, int]]:
    """The ``(index, count)`` pairs of several histograms of the core's layout added bucket
    by bucket (HdrHistogram's merge, exact), sorted by index, without zero counts. The C
    core adds them (`nhbench._core.histogram_merge`): 256 workers' histograms are millions
    of pairs, which a dict in Python took half a second over. ValueError for an index
    outside the layout or a count outside 0..2^64-1 (or a sum beyond it)."""
    from . import _core

    return _core.histogram_merge(parts if isinstance(parts, (list, tuple)) else list(parts))


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
    reference = _reference()  # for its bucket arithmetic only
    result = []
    # The points in ascending order have non-decreasing targets: one walk over the buckets
    # serves them all (`reached` is the last bucket taken, `cumulative` the count up to it).
    reached = -1
    cumulative = 0
    last = len(ordered) - 1
    for point in sorted(set(points)):
        # The same target count rule, in the same arithmetic, as hdrh's
        # get_target_count_at_percentile: round half up, at least 1.
        target = max(int(min(point * 100.0, 100.0) * total / 100 + 0.5), 1)
        while cumulative < target and reached < last:
            reached += 1
            cumulative += ordered[reached][1]
        found = ordered[reached][0]
        bucket_value = reference.get_value_from_index(found)
        if point > 0:
            value = reference.get_highest_equivalent_value(bucket_value)
        else:
            value = reference.get_lowest_equivalent_value(bucket_value)
        result.append(PercentilePoint(point, _clamped(value, exact_min, exact_max), cumulative))
    return result


def _clamped(value: int, exact_min: int | None, exact_max: int | None) -> int:
    """A bucket's value kept within the exact minimum and maximum the histogram recorded
    (a bucket's edge can lie beyond them)."""
    if exact_max is not None:
        value = min(value, exact_max)
    if exact_min is not None:
        value = max(value, exact_min)
    return int(value)


def unpack_buckets(buckets: bytes) -> list[tuple[int, int]]:
    """The ``(index, count)`` pairs of the core's compact form (``ClientRun.result(
    compact=True)``'s "buckets": native uint64 index, count, index, count ...)."""
    words = array.array("Q")
    words.frombytes(buckets)
    return list(zip(words[0::2], words[1::2], strict=True))


def packed_percentile_points(
    buckets: bytes,
    points: Iterable[float],
    exact_min: int | None = None,
    exact_max: int | None = None,
) -> list[PercentilePoint]:
    """`percentile_points` of the core's compact buckets, the walk made by the C core
    (``_core.histogram_percentiles``, hdrh's rule in hdrh's arithmetic, tested against
    hdrh): no Python object per bucket. The buckets must be in index order, as the core
    writes them."""
    from . import _core

    ordered = sorted(set(points))
    result = []
    for point, (value, count) in zip(ordered, _core.histogram_percentiles(buckets, ordered),
                                     strict=False):
        result.append(PercentilePoint(point, _clamped(value, exact_min, exact_max), count))
    return result


def encode(histogram: HdrHistogram) -> str:
    """The standard compressed, base64 encoding ("HISTFAAA…") as text."""
    blob = histogram.encode()
    return blob.decode("ascii") if isinstance(blob, bytes) else str(blob)


def encode_sparse(pairs: Iterable[Sequence[int]]) -> str:
    """`encode` of the histogram of ``(index, count)`` pairs of the core's layout, byte for
    byte what hdrh writes (V2: zigzag LEB128 counts up to the highest non-zero one, each run
    of zeros as its negated length, zlib, base64), without building the hdrh histogram: a
    histogram object allocates and clears its 27,648 counters, which made keeping each
    live interval's histogram cost 7 ms an interval, the encoding alone well under one."""
    merged: dict[int, int] = {}
    for index, count in pairs:
        index, count = int(index), int(count)
        if count > 0:
            merged[index] = merged.get(index, 0) + count
    values: list[int] = []
    position = 0
    for index in sorted(merged):
        if index > position:
            values.append(position - index)
        values.append(merged[index])
        position = index + 1
    payload = bytearray()
    append = payload.append
    for value in values:
        # zigzag, then LEB128 (most counts fit one byte: one append, no loop)
        value = ((value << 1) ^ (value >> 63)) & 0xFFFF_FFFF_FFFF_FFFF
        while value >= 0x80:
            append((value & 0x7F) | 0x80)
            value >>= 7
        append(value)
    head = _PAYLOAD.pack(_ENCODING_COOKIE | 0x10, len(payload), 0, HIST_SIGFIG, HIST_LOWEST,
                         HIST_HIGHEST, 1.0)
    compressed = zlib.compress(head + bytes(payload))
    return base64.b64encode(_EXTERNAL.pack(_COMPRESSION_COOKIE | 0x10, len(compressed))
                            + compressed).decode("ascii")


class HistogramDecodeError(ValueError):
    """An encoded histogram that is not one nhbench decodes (one line: the reason)."""


#: The most counters one decoded histogram may have: 524,288 (4 MiB of 64-bit counts,
#: what hdrh's own MAX_COUNTS_SIZE means to allow). nhbench writes 27,648 (lowest 1,
#: highest 60 s, 3 digits); 3 digits up to 2^63 or 4 digits up to 60 s fit, 5 digits over
#: a wide range does not (a header claiming 5 digits up to 2^62 asks for 47 MB).
MAX_DECODED_COUNTS = 1 << 19

# The V2 encoding (hdrh.codec, HdrHistogram's Java and C libraries): base64 of an 8-byte
# header (cookie, length of what follows), then a zlib stream of a 40-byte payload header
# (cookie, payload length, normalizing offset, significant digits, lowest, highest,
# conversion ratio) and `payload length` bytes of ZigZag LEB128 counts (a negative one is a
# run of zeros), at most 9 bytes per counter.
_EXTERNAL = struct.Struct(">II")
_PAYLOAD = struct.Struct(">IIIIQQd")
_COMPRESSION_COOKIE = 0x1C849304
_ENCODING_COOKIE = 0x1C849303
_MAX_WORD_BYTES = 9


@dataclass
class DecodeBudget:
    """Counters a series of decodes may still allocate (one file's histograms, say)."""

    remaining: int
    what: str = "the limit"


def _cookie_base(cookie: int) -> int:
    return cookie & ~0xF0


def decoded_counts_len(lowest: int, highest: int, sigfig: int) -> int:
    """The length of the counts array hdrh allocates for these settings (its own
    arithmetic, without allocating it)."""
    unit_magnitude = int(math.floor(math.log(lowest) / math.log(2)))
    largest_single_unit = 2 * math.pow(10, sigfig)
    magnitude = int(math.ceil(math.log(largest_single_unit) / math.log(2)))
    half_magnitude = magnitude - 1 if magnitude > 1 else 0
    sub_bucket_count = int(math.pow(2, half_magnitude + 1))
    bucket_count = get_bucket_count(highest, sub_bucket_count, unit_magnitude)
    return int((bucket_count + 1) * (sub_bucket_count // 2))


class _DecodedPayload(HdrPayload):
    """hdrh's payload wrapper over bytes this module already inflated within bounds:
    hdrh's own ``_decompress`` inflates without any limit."""

    def __init__(self, data: bytes) -> None:
        super().__init__(8, compressed_payload=data)

    def _decompress(self, compressed_payload: bytes) -> None:
        self._data = compressed_payload
        self.payload = PayloadHeader.from_buffer_copy(compressed_payload)


def _inflate_header(text: str | bytes) -> tuple[zlib._Decompress, bytes]:
    try:
        blob = base64.b64decode(text, validate=False)
    except (binascii.Error, ValueError):
        raise HistogramDecodeError("not base64") from None
    if len(blob) < _EXTERNAL.size:
        raise HistogramDecodeError("shorter than its header")
    cookie, length = _EXTERNAL.unpack_from(blob)
    if _cookie_base(cookie) != _COMPRESSION_COOKIE:
        raise HistogramDecodeError(f"not an HdrHistogram V2 encoding (cookie {cookie:#x})")
    if length != len(blob) - _EXTERNAL.size:
        raise HistogramDecodeError(f"its header says {length} bytes, {len(blob) - 8} follow")
    inflater = zlib.decompressobj()
    try:
        head = inflater.decompress(blob[_EXTERNAL.size:], _PAYLOAD.size)
    except zlib.error:
        raise HistogramDecodeError("not a zlib stream") from None
    if len(head) < _PAYLOAD.size:
        raise HistogramDecodeError("its compressed part is shorter than a payload header")
    return inflater, head


def _checked_payload(text: str | bytes, max_counts: int,
                     budget: DecodeBudget | None) -> tuple[int, int, int, int, bytes]:
    """The lowest, highest, significant digits, counts length and inflated payload (header
    and counts) of a V2 encoding, every bound of `decode` checked (see there)."""
    inflater, head = _inflate_header(text)
    (cookie, payload_len, normalizing_offset, sigfig, lowest, highest,
     ratio) = _PAYLOAD.unpack(head)
    if _cookie_base(cookie) != _ENCODING_COOKIE:
        raise HistogramDecodeError(f"not an HdrHistogram V2 payload (cookie {cookie:#x})")
    if not 1 <= sigfig <= 5:
        raise HistogramDecodeError(f"significant digits {sigfig} outside 1..5")
    if lowest < 1 or highest < 2 * lowest or highest >= 1 << 63:
        raise HistogramDecodeError(f"lowest {lowest} and highest {highest} are not a range "
                                   "(1 <= 2*lowest <= highest < 2^63)")
    if normalizing_offset != 0:
        # hdrh ignores the offset; the counts would silently land in the wrong buckets.
        raise HistogramDecodeError(f"normalizing index offset {normalizing_offset} (only 0 "
                                   "is read)")
    if not (math.isfinite(ratio) and ratio > 0):
        raise HistogramDecodeError(f"conversion ratio {ratio} is not a positive number")
    counts_len = _counts_len(lowest, highest, sigfig)
    if counts_len > max_counts:
        raise HistogramDecodeError(
            f"{sigfig} digits from {lowest} to {highest} need {counts_len:,} counters, "
            f"more than the {max_counts:,} nhbench decodes")
    if budget is not None:
        if counts_len > budget.remaining:
            raise HistogramDecodeError(f"its {counts_len:,} counters exceed {budget.what}")
        budget.remaining -= counts_len
    if payload_len > counts_len * _MAX_WORD_BYTES:
        raise HistogramDecodeError(f"payload of {payload_len:,} bytes for {counts_len:,} "
                                   "counters")
    try:
        # One byte more than the header says: finding it means the stream is longer.
        body = inflater.decompress(inflater.unconsumed_tail, payload_len + 1)
        if len(body) == payload_len and not inflater.eof:
            if inflater.decompress(inflater.unconsumed_tail, 1):
                body += b"?"
    except zlib.error:
        raise HistogramDecodeError("its zlib stream is corrupt") from None
    if not inflater.eof and len(body) <= payload_len:
        raise HistogramDecodeError(f"its zlib stream is truncated ({len(body):,} of "
                                   f"{payload_len:,} payload bytes)")
    if len(body) != payload_len:
        raise HistogramDecodeError(f"its header says {payload_len:,} payload bytes, the stream "
                                   f"holds {'more' if len(body) > payload_len else len(body)}")
    return lowest, highest, sigfig, counts_len, head + body


@functools.lru_cache(maxsize=16)
def _counts_len(lowest: int, highest: int, sigfig: int) -> int:
    # Every histogram of a file has the same settings: the logarithms once per layout.
    return decoded_counts_len(lowest, highest, sigfig)


def decode(text: str | bytes, max_counts: int = MAX_DECODED_COUNTS,
           budget: DecodeBudget | None = None) -> HdrHistogram:
    """Decode a V2 encoding made by `encode` (or any HdrHistogram V2 encoder) whose counts
    array needs at most `max_counts` counters. The header is checked before anything is
    allocated and the payload inflated no further than the header's own length (itself at
    most 9 bytes per counter), so a hostile blob costs at most that much memory; anything
    else is a `HistogramDecodeError`. With a `budget`, its counters are taken from it (and
    refused when it has too few left)."""
    lowest, highest, sigfig, _, data = _checked_payload(text, max_counts, budget)
    try:
        histogram = HdrHistogram(lowest, highest, sigfig, hdr_payload=_DecodedPayload(data))
    except (IndexError, OverflowError, ValueError) as exc:
        # pyhdrh's decoder bounds-checks every write: more counters than the layout has, or
        # a run of zeros past its end.
        raise HistogramDecodeError(f"its counts do not fit its layout ({exc})") from None
    if histogram.total_count < 0:
        raise HistogramDecodeError("its total count overflows 64 bits")
    return histogram


class _Scratch(threading.local):
    """One counts array per thread that `check` decodes into and clears again."""

    counts: ctypes.Array[ctypes.c_ulonglong] | None = None


_scratch = _Scratch()


def check(text: str | bytes, max_counts: int = MAX_DECODED_COUNTS,
          budget: DecodeBudget | None = None) -> int:
    """What `decode` checks, the same `HistogramDecodeError` for what it refuses, without
    building the histogram; returns its total count. The counts are decoded (by hdrh's own
    C decoder) into a counts array this thread keeps and clears afterwards: an
    `HdrHistogram` allocates and clears a fresh array of 27,648 counters (216 KiB, fresh
    pages from the kernel each time), which was most of loading a result that holds 85
    histograms (14.0 ms of CPU before, 5.3 ms after: docs/benchmarks.md "Big results")."""
    _, _, _, counts_len, data = _checked_payload(text, max_counts, budget)
    counts = _scratch.counts
    if counts is None or len(counts) < counts_len:
        counts = _scratch.counts = (ctypes.c_ulonglong * counts_len)()
    address = ctypes.addressof(counts)
    try:
        results = pyhdrh.decode(data, _PAYLOAD.size, address, counts_len, 8)
    except (IndexError, OverflowError, ValueError) as exc:
        ctypes.memset(address, 0, counts_len * 8)
        raise HistogramDecodeError(f"its counts do not fit its layout ({exc})") from None
    # Only the span between the lowest and highest non-zero counter can hold anything but
    # zero (clearing all 216 KiB took longer than the decoding).
    low, high = results["min_nonzero_index"], results["max_nonzero_index"]
    if 0 <= low <= high < counts_len:
        ctypes.memset(address + low * 8, 0, (high - low + 1) * 8)
    elif results["total"]:
        ctypes.memset(address, 0, counts_len * 8)
    if results["total"] < 0:
        raise HistogramDecodeError("its total count overflows 64 bits")
    return int(results["total"])
