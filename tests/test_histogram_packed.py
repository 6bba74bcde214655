"""The run's result in the core's compact form (``ClientRun.result(compact=True)``): packed
uint64 (index, count) buckets whose percentiles the C core walks, and the lazy path that
makes Python pairs, the hdrh histogram and the encoding only when a consumer asks.

The core's percentiles must be what the `hdrh` package computes, exactly: they are compared
with hdrh's own ``get_percentile_to_value_dict`` (and with nhbench's Python walk, which the
result used before) on random histograms of many shapes and on the edge cases.
"""

from __future__ import annotations

import array
import math
import random

import pytest
from hdrh.histogram import HdrHistogram

import nhbench
from nhbench import _histogram
from nhbench._result import Result
from nhbench._run import Benchmark, load_core

core = load_core()
LEN = core.HIST_COUNTS_LEN

# Nighthawk's default points and odd ones (fractions whose percent is not exact in binary).
POINTS = [0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9999, 0.99999, 1.0,
          1 / 3, 0.123456789, 0.3, 0.7, 0.07, 0.5000000001]


def pack(pairs: list[tuple[int, int]]) -> bytes:
    words = array.array("Q")
    for index, count in sorted(pairs):
        words.extend((index, count))
    return words.tobytes()


def hdrh_of(pairs: list[tuple[int, int]]) -> HdrHistogram:
    h = HdrHistogram(1, 60_000_000_000, 3)
    for index, count in pairs:
        h.counts[index] += count
    h.set_internal_tacking_values(min(i for i, _ in pairs), max(i for i, _ in pairs),
                                  sum(c for _, c in pairs))
    return h


def check_against_hdrh(pairs: list[tuple[int, int]], points: list[float] = POINTS) -> None:
    ordered = sorted(set(points))
    got = core.histogram_percentiles(pack(pairs), ordered)
    reference = hdrh_of(pairs)
    expected = reference.get_percentile_to_value_dict([p * 100.0 for p in ordered])
    for point, (value, _) in zip(ordered, got, strict=True):
        if point * 100.0 in expected:
            assert value == expected[point * 100.0], point
        else:
            # hdrh answers nothing where its target, rounded in doubles, exceeds the total
            # (counts beyond 2^53); the walk, nhbench's before as now, ends at the last bucket.
            assert reference.get_target_count_at_percentile(point * 100.0) > \
                reference.total_count, point
            assert value == reference.get_highest_equivalent_value(
                reference.get_value_from_index(max(i for i, c in pairs if c)))
    # The cumulative counts and the values as nhbench's Python walk gives them.
    python = _histogram.percentile_points(pairs, ordered)
    assert got == [(p.value, p.count) for p in python]
    assert _histogram.packed_percentile_points(pack(pairs), points) == python


def shapes(rng: random.Random) -> list[list[tuple[int, int]]]:
    out = []
    for _ in range(40):
        n = rng.choice([1, 2, 3, 10, 100, 1000, 5000])
        kind = rng.choice(["uniform", "low", "high", "cluster", "heavy"])
        if kind == "uniform":
            indexes = rng.sample(range(LEN), n)
        elif kind == "low":
            indexes = rng.sample(range(min(LEN, 3000)), min(n, 3000))
        elif kind == "high":
            indexes = rng.sample(range(LEN - 3000, LEN), min(n, 3000))
        else:
            centre = rng.randrange(LEN)
            indexes = sorted({min(LEN - 1, max(0, int(rng.gauss(centre, 200))))
                              for _ in range(n)})
        if kind == "heavy":
            counts = [rng.choice([1, 1, 1, 2, 10 ** rng.randrange(1, 12)]) for _ in indexes]
        else:
            counts = [rng.randrange(1, 1000) for _ in indexes]
        out.append(list(zip(indexes, counts, strict=True)))
    return out


def test_random_histograms_match_hdrh() -> None:
    for pairs in shapes(random.Random(20261129)):
        check_against_hdrh(pairs)


def test_recorded_values_match_hdrh() -> None:
    # Through the C recorder: latency-like and spread values, with the recorder's pairs.
    rng = random.Random(7)
    for values in ([int(rng.lognormvariate(12, 1.0)) for _ in range(20000)],
                   [int(10 ** rng.uniform(0, 10.7)) for _ in range(20000)],
                   list(range(5000))):
        pairs = core.histogram_counts(values)["counts"]
        check_against_hdrh(pairs)


@pytest.mark.parametrize("pairs", [
    [(0, 1)],                          # one value, value 0's bucket
    [(1234, 1)],                       # one value
    [(LEN - 1, 5)],                    # the last bucket: the highest values
    [(LEN - 1, 1), (0, 1)],            # the two ends
    [(5000, 1_000_000)],               # everything in one bucket
    [(7, 2**61), (9, 2**61 - 5)],      # huge counts (hdrh's counters are signed 64-bit)
    [(3, 1), (4, 1)],                  # every point on one of two buckets, p50 exactly between
])
def test_edge_cases_match_hdrh(pairs: list[tuple[int, int]]) -> None:
    check_against_hdrh(pairs)


def test_huge_values_at_the_top_of_the_range() -> None:
    index = core.histogram_index(60_000_000_000)
    [(value, count)] = core.histogram_percentiles(pack([(index, 3)]), [1.0])
    assert count == 3
    assert value == HdrHistogram(1, 60_000_000_000, 3).get_highest_equivalent_value(
        60_000_000_000) >= 60_000_000_000


def test_empty_histograms_have_no_percentiles() -> None:
    assert core.histogram_percentiles(b"", POINTS[:3]) == []
    assert core.histogram_percentiles(pack([(5, 0), (9, 0)]), [0.5]) == []
    assert _histogram.packed_percentile_points(b"", [0.5]) == []
    assert _histogram.percentile_points([], [0.5]) == []


def test_zero_counts_between_are_skipped_as_python_skips_them() -> None:
    pairs = [(2, 1), (3, 0), (8, 0), (9, 4)]
    words = array.array("Q", [w for pair in pairs for w in pair]).tobytes()
    assert core.histogram_percentiles(words, [0.0, 0.2, 0.5, 1.0]) == [
        (p.value, p.count) for p in _histogram.percentile_points(pairs, [0.0, 0.2, 0.5, 1.0])]


@pytest.mark.parametrize(("buckets", "points", "message"), [
    (b"\0" * 15, [0.5], "not whole"),
    (pack([(LEN, 1)]), [0.5], "outside"),
    (array.array("Q", [9, 1, 3, 1]).tobytes(), [0.5], "out of order"),
    (pack([(1, 2**63), (2, 2**63)]), [0.5], "beyond 64 bits"),
    (pack([(1, 1)]), [0.9, 0.5], "ascending"),
    (pack([(1, 1)]), [math.nan], "NaN"),
])
def test_bad_input_is_refused(buckets: bytes, points: list[float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        core.histogram_percentiles(buckets, points)


def test_clamping_to_exact_min_max_as_the_python_walk() -> None:
    pairs = core.histogram_counts([1_000_001, 2_000_003, 9_999_999])["counts"]
    assert _histogram.packed_percentile_points(pack(pairs), POINTS, 1_000_001, 9_999_999) == \
        _histogram.percentile_points(pairs, POINTS, 1_000_001, 9_999_999)


def test_unpack_gives_the_pairs() -> None:
    pairs = [(0, 1), (17, 2**64 - 1), (LEN - 1, 3)]
    assert _histogram.unpack_buckets(pack(pairs)) == pairs
    assert _histogram.unpack_buckets(b"") == []


# ---- a real run: the compact result against the tuple form ------------------------------------


def test_run_result_is_the_same_as_from_the_tuples(server: nhbench.TestServer) -> None:
    bench = Benchmark(server.url, rps=0, connections=4, duration="30s",
                      termination_predicate={"upstream_rq_total": 3000})
    bench.start()
    assert bench.wait(60)
    result = bench.result()
    compact = bench._core_run().result(compact=True)
    legacy = bench._core_run().result()
    # The same buckets in both forms, every histogram of the global result.
    for name, entry in legacy["global"]["histograms"].items():
        packed = compact["global"]["histograms"][name]
        assert "counts" not in packed
        assert _histogram.unpack_buckets(packed["buckets"]) == entry["counts"], name
    latency = result.latency
    assert latency.count >= 3000
    # The lazy path: after result() nothing per bucket was made in Python.
    for statistic in result.global_result.statistics:
        if not statistic.raw:
            assert statistic._packed is not None and statistic._sparse is None, statistic.id
            assert statistic._hist is None and statistic.hdr_histogram is None, statistic.id
    before = Result.from_core(legacy, bench.options, timeline=bench._timeline,
                              endpoints=bench.endpoint_names())
    before.timestamp = result.timestamp
    assert before.validity is not None and result.validity is not None
    # Every output byte for byte: the JSON (percentiles, encoded histograms) and the model.
    assert result.model_dump_json() == before.model_dump_json()
    assert result == before
    for ours, theirs in zip(result.global_result.statistics, before.global_result.statistics,
                            strict=True):
        if ours.raw or not ours.count:
            continue
        fresh = Result.from_core(bench._core_run().result(compact=True), bench.options)
        lazy = fresh.stat(ours.id)
        # Points not among the listed ones are walked in C from the packed buckets.
        assert lazy.values_at([12.5, 99.95, 37.0]) == theirs.values_at([12.5, 99.95, 37.0])
        assert lazy._sparse is None
        # Asked for, the histogram is built, equal to the one from the tuples.
        assert _histogram.sparse_counts(lazy.histogram()) == theirs._pairs()
        assert lazy.encoded() == theirs.encoded()
