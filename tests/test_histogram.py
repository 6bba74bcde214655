"""The C recorder's counts array has exactly HdrHistogram's layout: what nhbench records and
encodes, the `hdrh` package decodes to the same counts and the same percentiles."""

from __future__ import annotations

import random

import pytest
from hdrh.histogram import HdrHistogram

from nhbench import _histogram
from nhbench._run import load_core

core = load_core()


def reference(values):
    h = HdrHistogram(1, 60_000_000_000, 3)
    for v in values:
        h.record_value(min(v, 60_000_000_000))
    return h


VALUE_SETS = {
    "small": list(range(0, 5000)),
    "log-spread": [int(10 ** random.Random(1).uniform(0, 10.7)) for _ in range(20000)],
    "latency-like": [int(random.Random(2).lognormvariate(12, 1.0)) for _ in range(20000)],
    "bucket-edges": [2 ** k + d for k in range(0, 36) for d in (-1, 0, 1) if 2 ** k + d >= 0],
    "over-the-top": [59_999_999_999, 60_000_000_000, 61_000_000_000, 2 ** 62],
}


def test_layout_constants_match_hdrh():
    h = HdrHistogram(core.HIST_LOWEST, core.HIST_HIGHEST, core.HIST_SIGFIG)
    assert h.counts_len == core.HIST_COUNTS_LEN


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_index_of_every_value_matches(name):
    h = HdrHistogram(1, 60_000_000_000, 3)
    for v in VALUE_SETS[name]:
        assert core.histogram_index(v) == h._counts_index_for(min(v, 60_000_000_000))


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_encode_in_nhbench_decode_in_hdrh(name):
    values = VALUE_SETS[name]
    ours = _histogram.from_core(core.histogram_counts(values))
    decoded = HdrHistogram.decode(ours.encode())
    ref = reference(values)
    assert decoded.get_total_count() == ref.get_total_count() == len(values)
    for i in range(ref.counts_len):
        assert decoded.get_count_at_index(i) == ref.get_count_at_index(i), i
    points = [0.0, 1.0, 25.0, 50.0, 90.0, 99.0, 99.9, 99.99, 100.0]
    for p in points:
        assert decoded.get_value_at_percentile(p) == ref.get_value_at_percentile(p)
    assert decoded.get_max_value() == ref.get_max_value()
    assert decoded.get_min_value() == ref.get_min_value()


def test_exact_moments_are_kept_beside_the_buckets():
    values = [1000, 2000, 3000, 4000]
    d = core.histogram_counts(values)
    assert (d["count"], d["min"], d["max"], d["sum"]) == (4, 1000, 4000, 10000.0)
    assert d["sumsq"] == sum(v * v for v in values)


def test_encode_sparse_writes_what_hdrh_writes() -> None:
    # The interval records' encoder skips building the hdrh histogram; its bytes must be
    # hdrh's own (zero runs, single zeros, large counts, an empty histogram, unsorted and
    # repeated indices).
    from nhbench._histogram import encode, encode_sparse, from_sparse

    for trial in range(200):
        draw = random.Random(trial)
        pairs = [(draw.randrange(0, 27648 if trial % 3 else 40),
                  draw.randrange(1, 1 << draw.randrange(1, 60)))
                 for _ in range(draw.randrange(0, 300))]
        assert encode_sparse(pairs) == encode(from_sparse(pairs)), trial
    assert encode_sparse([(5, 0), (7, 1), (5, 2)]) == encode(from_sparse([(7, 1), (5, 2)]))
