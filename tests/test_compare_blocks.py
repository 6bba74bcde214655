"""The block bootstrap's statistics without forming each resample's counts
(`nhbench._compare._of_blocks`) are those of the counts formed (`_of_counts`): the same
latency counts and percentile buckets, and the same latency sums but for rounding. Runs
without any latency compare with their latency statistics "not tested"."""

from __future__ import annotations

import numpy as np
import pytest

from nhbench._compare import _COARSE, _of_blocks, _of_counts


@pytest.mark.parametrize("columns", [1, 5, _COARSE - 1, _COARSE, _COARSE + 1, 700, 2433])
def test_blocks_give_the_counts_statistics(columns: int) -> None:
    rng = np.random.default_rng(columns)
    parts = []
    for rows in (61, 7):
        counts = rng.integers(0, 50, (rows, columns)).astype(float)
        counts[rng.random(counts.shape) < 0.7] = 0  # sparse, as interval histograms are
        counts[rng.integers(0, rows)] = 0  # an interval without a response
        weights = rng.integers(0, 4, (300, rows)).astype(float)
        weights[:3] = 0  # resamples that drew nothing: no percentile
        parts.append((weights, counts))
    middle = rng.random(columns) * 1e-3
    ok, errors, seconds = np.ones(300), np.zeros(300), np.ones(300)
    quick = _of_blocks(parts, middle, ok, errors, seconds)
    formed = sum(weights @ counts for weights, counts in parts)
    full = _of_counts(formed, ok, errors, seconds, middle)
    assert np.array_equal(quick.total, full.total)
    assert (quick.total == 0).sum() == 3
    with_counts = full.total > 0
    assert np.array_equal(quick.found[with_counts], full.found[with_counts])
    assert np.allclose(quick.weighted, full.weighted, rtol=1e-12, atol=0)


def test_runs_without_any_response_compare_without_latencies() -> None:
    # Two real runs against a port that refuses every connection: no latency at all on
    # either side (no histogram bucket to compare), which made the percentile search fail
    # ("argmax of an empty sequence") before it searched row by row.
    import socket

    import nhbench

    with socket.socket() as sock:  # a port that was free a moment ago, now closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    runs = [nhbench.run(f"http://127.0.0.1:{port}/", rps=50, duration="0.2s", connections=1)
            for _ in range(2)]
    assert all(run.latency.count == 0 and run.error_count > 0 for run in runs)
    comparison = nhbench.compare(runs[0], runs[1])
    for name in ("p50", "p90", "p99", "p99.9", "mean"):
        assert comparison[name].verdict == "not tested", comparison[name]
        assert comparison[name].reason == f"the baseline has no {name}"
    assert comparison["error_rate"].baseline == 1.0
