"""Comparing runs (nhbench._compare, docs/trust.md "Comparing runs").

The statistics on synthetic runs whose answer is known (a shift of known size, A/A pairs
with and without autocorrelation), the pieces with textbook answers (the Mann-Whitney U
test, Politis and White's block length on an AR(1) series), and runs against the real test
server: A/A pairs give "no significant change", a 5 ms response delay is "regressed".
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

import nhbench
from nhbench import _histogram
from nhbench._compare import mann_whitney, min_p_value, politis_white
from nhbench._names import SCHEDULED_TO_RESPONSE
from nhbench._result import Counter, Statistic, WorkerResult
from nhbench._timeline import IntervalRecord, Timeline

np = pytest.importorskip("numpy")

DATA = Path(__file__).resolve().parent / "data"
INTERVAL = 0.1


def synthetic(intervals: list[list[int]], errors: int = 0) -> nhbench.Result:
    """A run whose interval i saw the latencies (ns) intervals[i], every one a 2xx, and
    `errors` more requests in each interval that ended in a 5xx."""
    records = []
    merged = _histogram.new_histogram()
    for i, values in enumerate(intervals):
        histogram = _histogram.new_histogram()
        for value in values:
            histogram.record_value(value)
        merged.add(histogram)
        counters = {"benchmark.http_2xx": len(values)}
        if errors:
            counters["benchmark.http_5xx"] = errors
        records.append(IntervalRecord(
            start=i * INTERVAL, duration=INTERVAL, requests=len(values),
            rps=len(values) / INTERVAL, counters=counters, errors=errors,
            hdr_histogram=_histogram.encode(histogram)))
    flat = [v for values in intervals for v in values]
    latency = Statistic(id=SCHEDULED_TO_RESPONSE, count=len(flat), min=min(flat) / 1e9,
                        max=max(flat) / 1e9, mean=sum(flat) / len(flat) / 1e9,
                        hdr_histogram=_histogram.encode(merged))
    counters = [Counter(name="benchmark.http_2xx", value=len(flat))]
    if errors:
        counters.append(Counter(name="benchmark.http_5xx", value=errors * len(intervals)))
    worker = WorkerResult(name="global", statistics=[latency], counters=counters,
                          execution_duration=len(intervals) * INTERVAL)
    return nhbench.Result(options=nhbench.Options(uri="http://127.0.0.1:9/"),
                          results=[worker], timeline=Timeline(records))


def lognormal_run(seed: int, *, scale: float = 1.0, intervals: int = 30, per: int = 300,
                  drift: float = 0.0) -> nhbench.Result:
    """Latencies around 1 ms (lognormal, sigma 0.3) times `scale`; with `drift`, each
    interval's latencies are multiplied by exp(an AR(1) series with phi 0.9 and that
    innovation sd), as when the host's state wanders during a run."""
    rng = np.random.default_rng(seed)
    level = 0.0
    out = []
    for _ in range(intervals):
        level = 0.9 * level + drift * rng.standard_normal()
        values = rng.lognormal(np.log(1e6), 0.3, per) * scale * np.exp(level)
        out.append([int(v) for v in values])
    return synthetic(out)


# --------------------------------------------------------------------------------------------
# Known answers
# --------------------------------------------------------------------------------------------


def test_a_known_shift_lies_in_the_interval_and_is_regressed() -> None:
    base = lognormal_run(1)
    slower = lognormal_run(2, scale=1.10)
    comparison = slower.compare(base)
    for name in ("p50", "mean", "p90"):
        statistic = comparison[name]
        assert statistic.verdict == "regressed", comparison
        assert statistic.relative_low is not None and statistic.relative_high is not None
        assert statistic.relative_low < 0.10 < statistic.relative_high, comparison
    # The other way round it is an improvement of the same size.
    assert base.compare(slower)["p50"].verdict == "improved"
    assert comparison["rate"].verdict == "no significant change"
    assert comparison.regressed == ["p50", "p90", "p99", "p99.9", "mean"] or \
        {"p50", "p90", "mean"} <= set(comparison.regressed)


def test_seeded_and_reproducible() -> None:
    base, other = lognormal_run(3), lognormal_run(4, scale=1.02)
    first = other.compare(base).to_dict()
    assert other.compare(base).to_dict() == first
    assert nhbench.compare(base, other, seed=0).to_dict() == first
    reseeded = other.compare(base, seed=7).to_dict()
    # The mean's interval (continuous; a percentile's moves by whole buckets).
    assert reseeded["statistics"][4]["name"] == "mean"
    assert reseeded["statistics"][4]["low"] != first["statistics"][4]["low"]
    assert reseeded["statistics"][4]["baseline"] == first["statistics"][4]["baseline"]


def test_a_a_pairs_without_autocorrelation_are_no_significant_change() -> None:
    # 20 pairs of runs from the same distribution: a 95 % interval holds 0 in about 19.
    unchanged = sum(
        lognormal_run(100 + 2 * i).compare(lognormal_run(101 + 2 * i), resamples=500)["p50"]
        .verdict == "no significant change" for i in range(20))
    assert unchanged >= 16


def test_blocks_keep_the_autocorrelation_that_single_intervals_lose() -> None:
    # Latency that wanders during each run: resampling intervals one by one (block length
    # 1) forgets that neighbours move together and gives too narrow an interval, hence
    # false alarms between two runs of the same distribution; blocks do not.
    block_unchanged = single_unchanged = 0
    widths = []
    for i in range(16):
        a = lognormal_run(300 + 2 * i, drift=0.03, intervals=100, per=50)
        b = lognormal_run(301 + 2 * i, drift=0.03, intervals=100, per=50)
        blocks = b.compare(a, resamples=500)
        single = b.compare(a, resamples=500, block_length=1)
        assert blocks.block_length is not None and blocks.block_length > 1
        block_unchanged += blocks["mean"].verdict == "no significant change"
        single_unchanged += single["mean"].verdict == "no significant change"
        widths.append((blocks["mean"].high - blocks["mean"].low)  # type: ignore[operator]
                      / (single["mean"].high - single["mean"].low))  # type: ignore[operator]
    # A 95 % interval: about 15 of 16 for a long run; a strongly correlated one of 100
    # intervals is known to cover a little less (13 here), one interval at a time far less.
    assert block_unchanged >= 12
    assert block_unchanged >= single_unchanged + 4
    assert sorted(widths)[len(widths) // 2] > 1.5


def test_block_length_rule_on_known_series() -> None:
    rng = np.random.default_rng(5)
    noise = rng.standard_normal(1000)
    assert politis_white(noise) <= 3
    # AR(1) with phi 0.5: the rule's theoretical value is
    # (1.5 (2 phi / (1 - phi^2))^2)^(1/3) n^(1/3), about 13.9 for n = 1000.
    series = np.zeros(1000)
    for t in range(1, 1000):
        series[t] = 0.5 * series[t - 1] + noise[t]
    assert 7 <= politis_white(series) <= 28
    assert politis_white([1.0] * 50) == 1.0


def test_mann_whitney_textbook_values() -> None:
    # Exact two-sided p of complete separation: 2 / C(10, 5) = 2/252.
    assert mann_whitney([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]) == pytest.approx(2 / 252)
    assert mann_whitney([1, 3, 5], [2, 4, 6]) == pytest.approx(0.7, abs=1e-9)
    assert min_p_value(3, 3) == pytest.approx(0.1)
    assert min_p_value(4, 4) == pytest.approx(2 / 70)
    # Ties: the normal approximation with the tie correction and the continuity correction
    # (as scipy's default): U1 = 3, |U1 - 12.5| - 0.5 = 9, sigma^2 = 25/12 (11 - 60/90),
    # z = 1.9397, p = 0.0524.
    assert mann_whitney([1, 1, 2, 2, 3], [2, 3, 3, 4, 4]) == pytest.approx(0.0524, abs=5e-4)


def test_error_rate_is_compared() -> None:
    values = [[1_000_000] * 100 for _ in range(30)]
    clean, failing = synthetic(values), synthetic(values, errors=3)
    comparison = failing.compare(clean)
    assert comparison["error_rate"].verdict == "regressed"
    assert comparison["error_rate"].candidate == pytest.approx(3 / 103)
    # Errors in one burst are a different story: whether the burst recurs is what the
    # blocks cannot tell, so one interval of 30 with errors is not a significant change.
    burst = [[1_000_000] * 100 for _ in range(30)]
    bursty = synthetic(burst[:1], errors=90)
    bursty.timeline.root.extend(synthetic(burst[1:]).timeline.root)
    assert bursty.compare(clean)["error_rate"].verdict == "no significant change"
    assert comparison["p50"].verdict == "no significant change"


def test_several_runs_need_the_rank_test_too() -> None:
    base = [lognormal_run(400 + i) for i in range(4)]
    slower = [lognormal_run(410 + i, scale=1.1) for i in range(4)]
    comparison = nhbench.compare(base, slower)
    assert comparison.baseline_runs == comparison.candidate_runs == 4
    # Complete separation of 4 and 4 runs: 2/70 exactly, or about that with tied values.
    assert comparison["p50"].p_value is not None and comparison["p50"].p_value < 0.05
    assert comparison["p50"].verdict == "regressed"
    same = nhbench.compare(base, [lognormal_run(420 + i) for i in range(4)])
    assert same["p50"].verdict == "no significant change"
    # Three a side cannot reach 5 %: said, and the bootstrap decides alone.
    few = nhbench.compare(base[:3], slower[:3])
    assert any("cannot reach" in note for note in few.notes)


def test_runs_without_interval_histograms_are_resampled_by_request_and_say_so() -> None:
    nighthawk = nhbench.load_result(DATA / "nighthawk" / "output_formatter.medium.proto.gold")
    comparison = nighthawk.compare(nighthawk)
    assert comparison.method.startswith("bootstrap of requests")
    assert any("too narrow" in note for note in comparison.notes)
    assert comparison["p50"].verdict == "no significant change"
    assert comparison["rate"].verdict == "not tested"


def test_bad_arguments_are_refused() -> None:
    run = lognormal_run(1, intervals=6, per=10)
    with pytest.raises(ValueError, match="confidence"):
        run.compare(run, confidence=1.0)
    with pytest.raises(ValueError, match="resamples"):
        run.compare(run, resamples=5)
    with pytest.raises(ValueError, match="no result"):
        nhbench.compare([], run)
    with pytest.raises(TypeError, match="Result"):
        nhbench.compare(run, ["x"])  # type: ignore[list-item]


# --------------------------------------------------------------------------------------------
# Real runs against the test server
# --------------------------------------------------------------------------------------------


def test_interval_histograms_survive_the_json_file(tmp_path: Path) -> None:
    with nhbench.TestServer() as server:
        result = nhbench.run(server.url, rps=500, duration="2s", stats_interval="0.1s")
    # About 20 intervals; a loaded host closes some late, so fewer, but not below the
    # comparison's minimum.
    assert len(result.timeline) >= 6 and all(r.hdr_histogram for r in result.timeline)
    path = tmp_path / "run.json"
    path.write_text(result.render("json"))
    written = json.loads(path.read_text())
    assert result.timeline[0].hdr_histogram in json.dumps(written)
    loaded = nhbench.load_result(path)
    assert [r.hdr_histogram for r in loaded.timeline] == \
        [r.hdr_histogram for r in result.timeline]
    comparison = loaded.compare(result)
    assert comparison.method.startswith("circular block bootstrap")
    # The same run against itself: no difference at all.
    assert all(s.difference == 0 for s in comparison)


def test_a_a_runs_against_the_test_server() -> None:
    # 16 runs of 2 s of one configuration; 10 pairs of sides of 4 runs drawn from them.
    with nhbench.TestServer() as server:
        runs = [nhbench.run(server.url, rps=1000, duration="2s", stats_interval="0.1s")
                for _ in range(16)]
    draw = random.Random(11)
    unchanged: dict[str, int] = {}
    for _ in range(10):
        picked = draw.sample(runs, 8)
        comparison = nhbench.compare(picked[:4], picked[4:], resamples=1000)
        for statistic in comparison:
            unchanged[statistic.name] = unchanged.get(statistic.name, 0) + (
                statistic.verdict == "no significant change")
    assert unchanged["p50"] >= 8, unchanged
    assert sum(unchanged.values()) >= 0.8 * 10 * len(unchanged), unchanged


def test_a_five_millisecond_delay_is_regressed() -> None:
    with nhbench.TestServer() as server:
        fast = nhbench.run(server.url, rps=500, duration="2s", stats_interval="0.1s")
    with nhbench.TestServer(response={"static_delay": "5ms"}) as server:
        slow = nhbench.run(server.url, rps=500, duration="2s", stats_interval="0.1s")
    comparison = slow.compare(fast)
    assert comparison["p50"].verdict == "regressed", comparison
    assert comparison["mean"].verdict == "regressed", comparison
    assert comparison["p50"].low is not None and comparison["p50"].low > 0.003
    assert fast.compare(slow)["p50"].verdict == "improved"
