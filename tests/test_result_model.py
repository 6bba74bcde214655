"""Core result dict -> Result conversion, accessors, exact percentiles and JSON round trip.

The core dicts are built by hand in the exact contract shape (tests/support/fakecore.py); what is
tested is the conversion, not the engine.
"""

from __future__ import annotations

import json
import math
import statistics as pystats

import pytest
from hdrh.histogram import HdrHistogram
from support.fakecore import core_histogram, core_result, core_worker, spread

from nhbench import Options, Result
from nhbench._histogram import from_core, percentile_points, sparse_counts, summary_from_core
from nhbench._names import COUNTERS, SCHEDULED_TO_RESPONSE
from nhbench._result import format_json_duration, parse_json_duration

URI = "http://127.0.0.1:8080/"
POINTS = [0.0, 0.5, 0.75, 0.9, 0.99, 0.999, 0.9999, 1.0]


def make_result(workers: int = 1, n: int = 5000, rps: float = 1000, **core_kwargs) -> Result:
    options = Options(uri=URI, rps=rps, concurrency=workers)
    worker_dicts = [core_worker(spread(n, seed=i)) for i in range(workers)]
    return Result.from_core(core_result(worker_dicts, **core_kwargs), options)


# ---- histograms -------------------------------------------------------------------------------


def test_from_core_matches_hdrh() -> None:
    values = spread(20_000)
    reference = HdrHistogram(1, 60_000_000_000, 3)
    for v in values:
        reference.record_value(v)
    h = from_core(core_histogram(values))
    assert h.get_total_count() == len(values)
    assert h.get_min_value() == reference.get_min_value()
    assert h.get_max_value() == reference.get_max_value()
    asked = [50, 90, 99, 99.9, 100]
    assert h.get_percentile_to_value_dict(asked) == reference.get_percentile_to_value_dict(asked)
    assert sparse_counts(h) == core_histogram(values)["counts"]
    assert h.encode() == reference.encode()


def test_percentile_points_agree_with_hdrh() -> None:
    values = spread(12_345, seed=7)
    pairs = core_histogram(values)["counts"]
    h = from_core({"counts": pairs})
    fractions = [0.0, 0.1, 0.5, 0.75, 0.9, 0.99, 0.999, 0.9999, 1.0]
    expected = h.get_percentile_to_value_dict([f * 100 for f in fractions])
    for point in percentile_points(pairs, fractions):
        assert point.value == expected[point.percentile * 100]


def test_percentile_points_clamp_to_exact_min_max() -> None:
    values = [1_000_001, 1_000_002, 1_000_003]
    d = core_histogram(values)
    points = percentile_points(d["counts"], [0.0, 0.5, 1.0], d["min"], d["max"])
    assert points[0].value == 1_000_001  # exact min, not the bucket's lower bound
    assert points[-1].value == 1_000_003  # exact max, not the bucket's upper bound
    assert [p.count for p in points] == [3, 3, 3]  # all three share one bucket


def test_summary_is_exact() -> None:
    values = spread(999, seed=3)
    s = summary_from_core(core_histogram(values))
    assert (s.count, s.min, s.max) == (999, min(values), max(values))
    assert s.mean == pytest.approx(pystats.fmean(values), rel=1e-12)
    assert s.pstdev == pytest.approx(pystats.pstdev(values), rel=1e-9)
    constant = summary_from_core(core_histogram([123_456_789] * 1000))
    assert constant.pstdev == 0.0  # rounding must not produce a NaN or a negative variance
    empty = summary_from_core(core_histogram([]))
    assert (empty.count, empty.min, empty.max, empty.mean) == (0, 0, 0, 0.0)


# ---- conversion -------------------------------------------------------------------------------


def test_single_worker_has_only_global() -> None:
    result = make_result(workers=1)
    assert [r.name for r in result.results] == ["global"]
    assert result.workers == []
    assert result.worker_count == 1


def test_several_workers_are_named_like_nighthawk() -> None:
    result = make_result(workers=3, n=1000)
    assert [r.name for r in result.results] == ["worker_0", "worker_1", "worker_2", "global"]
    assert result.counters["benchmark.http_2xx"] == 3000
    assert result.workers[1].counter_values["benchmark.http_2xx"] == 1000
    assert result.requested_rps == 3000


def test_percentiles_are_exactly_the_asked_points() -> None:
    result = make_result()
    points = [p.percentile for p in result.latency.percentiles]
    assert points == POINTS
    assert 0.990625 not in points
    assert all(isinstance(p, float) for p in points)


def test_latency_accessors() -> None:
    values = spread(5000, seed=0)
    scheduled = [v + 1_000 for v in values]  # what fakecore records as scheduled_to_response
    result = make_result(workers=1, n=5000)
    latency = result.latency
    assert latency.id == SCHEDULED_TO_RESPONSE
    assert latency.count == 5000
    assert latency.min == min(scheduled) / 1e9
    assert latency.max == max(scheduled) / 1e9
    assert latency.mean == pytest.approx(pystats.fmean(scheduled) / 1e9)
    assert latency.pstdev == pytest.approx(pystats.pstdev(scheduled) / 1e9)
    reference = HdrHistogram(1, 60_000_000_000, 3)
    for v in scheduled:
        reference.record_value(v)
    assert latency.p(99) == reference.get_value_at_percentile(99) / 1e9
    assert latency.p(50) == reference.get_value_at_percentile(50) / 1e9
    assert latency.p(0) == latency.min and latency.p(100) == latency.max
    # A point that was not asked for is computed from the histogram with the same rule.
    assert latency.p(95) == reference.get_value_at_percentile(95) / 1e9
    with pytest.raises(ValueError):
        latency.p(101)


def test_stat_lookup() -> None:
    result = make_result()
    assert result.stat("sequencer.blocking").count == 0
    assert result.stat("sequencer.blocking").percentiles == []
    body = result.stat("benchmark_http_client.response_body_size")
    assert body.raw and body.count == 5000 and body.min == body.max == body.mean == 10
    with pytest.raises(KeyError, match="no statistic 'nope'"):
        result.stat("nope")


def test_counters_mapping() -> None:
    result = make_result()
    counters = result.counters
    assert counters["benchmark.http_2xx"] == 5000
    assert counters["benchmark.http_5xx"] == 0
    assert set(COUNTERS) <= set(counters)
    with pytest.raises(KeyError):
        counters["benchmark.http_6xx"]
    assert "benchmark.http_5xx" not in counters.nonzero()


def test_rates_and_success() -> None:
    result = make_result(n=5000, rps=1000)
    assert result.duration == 5.0
    assert result.achieved_rps == pytest.approx(1000.0)
    assert result.requested_rps == 1000.0
    assert result.success and result.fired == []
    assert not result.interrupted


def test_failed_predicate() -> None:
    options = Options(uri=URI)
    worker = core_worker(spread(100), counters={"benchmark.http_5xx": 3})
    result = Result.from_core(
        core_result([worker], terminated_by="failure_predicate:benchmark.http_5xx",
                    failed_predicates=["benchmark.http_5xx"]),
        options,
    )
    assert not result.success
    assert [str(p) for p in result.fired] == ["benchmark.http_5xx = 3 > 0"]


def test_interrupted_and_error() -> None:
    result = make_result(terminated_by="stop", error="connect: connection refused")
    assert result.interrupted and result.error == "connect: connection refused"
    assert result.success  # interrupted is not failed
    assert not make_result(terminated_by="error").success


def test_histograms_and_encoding() -> None:
    result = make_result(n=3000)
    h = result.histogram(SCHEDULED_TO_RESPONSE)
    assert h.get_total_count() == 3000
    encoded = result.encoded_histograms()
    assert encoded[SCHEDULED_TO_RESPONSE].startswith("HISTFAAA")
    assert "benchmark_http_client.response_body_size" not in encoded  # no histogram for sizes
    decoded = HdrHistogram.decode(encoded[SCHEDULED_TO_RESPONSE])
    assert decoded.get_total_count() == 3000
    assert decoded.get_value_at_percentile(99) == h.get_value_at_percentile(99)


# ---- JSON -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (5, "5s"), (1.5, "1.500s"), (0.000195004, "0.000195004s"), (2e-6, "0.000002s"),
     (-0.25, "-0.250s"), (60, "60s")],
)
def test_json_duration_format(seconds: float, text: str) -> None:
    assert format_json_duration(seconds) == text
    assert parse_json_duration(text) == pytest.approx(seconds)


def test_json_is_nighthawk_shaped() -> None:
    result = make_result(workers=2, n=1000)
    data = json.loads(result.model_dump_json())
    assert set(data) >= {"timestamp", "options", "results", "version"}
    assert data["timestamp"].endswith("Z")
    global_ = data["results"][-1]
    assert global_["name"] == "global"
    assert global_["execution_duration"] == "5s"
    assert global_["execution_start"].endswith("Z")
    counters = {c["name"]: c["value"] for c in global_["counters"]}
    assert counters["benchmark.http_2xx"] == "2000"  # uint64 as a string
    assert "benchmark.http_5xx" not in counters  # zero counters are left out
    stats = {s["id"]: s for s in global_["statistics"]}
    latency = stats[SCHEDULED_TO_RESPONSE]
    assert latency["count"] == "2000"
    assert latency["min"].endswith("s") and latency["mean"].endswith("s")
    assert [p["percentile"] for p in latency["percentiles"]] == POINTS
    assert all(p["duration"].endswith("s") and isinstance(p["count"], str)
               for p in latency["percentiles"])
    # The histogram is in the nhbench user_defined_outputs entry (Nighthawk's
    # Statistic has no field for it), and empty lists are written as Nighthawk writes them.
    assert "hdr_histogram" not in latency
    extension = global_["user_defined_outputs"][0]
    assert extension["plugin_name"] == "nhbench"
    extras = extension["typed_output"]["value"]["statistics"]
    assert extras[SCHEDULED_TO_RESPONSE]["hdr_histogram"].startswith("HISTFAAA")
    body = stats["benchmark_http_client.response_body_size"]
    assert body["raw_min"] == "10" and body["raw_mean"] == 10 and body["percentiles"] == []
    assert "min" not in body and "hdr_histogram" not in body
    blocking = stats["sequencer.blocking"]
    assert blocking["count"] == "0" and blocking["percentiles"] == []


def test_json_round_trip() -> None:
    result = make_result(workers=2, n=2000, terminated_by="stop", error="boom")
    again = Result.model_validate_json(result.model_dump_json())
    assert [r.name for r in again.results] == [r.name for r in result.results]
    assert again.options == result.options
    assert again.interrupted and again.error == "boom"
    assert again.latency.percentiles == result.latency.percentiles
    assert again.latency.p(99) == result.latency.p(99)
    assert again.latency.min == result.latency.min and again.latency.max == result.latency.max
    assert again.latency.mean == pytest.approx(result.latency.mean, abs=1e-9)
    assert dict(again.counters) == dict(result.counters)  # zeros come back as zeros
    assert again.achieved_rps == pytest.approx(result.achieved_rps)
    assert again.stat("benchmark_http_client.response_body_size").raw
    # The histogram survives through its encoding, so unasked points still work.
    assert again.latency.p(95) == result.latency.p(95)
    # And a second round trip is stable.
    assert Result.model_validate_json(again.model_dump_json()).model_dump_json() == \
        again.model_dump_json()


def test_python_round_trip() -> None:
    result = make_result(n=500)
    again = Result.model_validate(result.model_dump())
    assert again.latency.p(99) == result.latency.p(99)
    assert again.counters["upstream_rq_total"] == 500


def test_echo_from_another_machine_loads() -> None:
    result = make_result(n=10)
    data = json.loads(result.model_dump_json())
    # nhbench-only options are in the nhbench entry of the global result.
    run = data["results"][-1]["user_defined_outputs"][0]["typed_output"]["value"]["run"]
    run["options"]["cpus"] = [100_000]  # not a CPU of this machine
    data["options"]["concurrency"] = "auto"
    loaded = Result.model_validate_json(json.dumps(data))
    assert loaded.options.cpus == (100_000,)


def test_empty_result_converts() -> None:
    options = Options(uri=URI)
    result = Result.from_core(core_result([core_worker([])], terminated_by="error",
                                          error="connection refused"), options)
    assert result.latency.count == 0 and result.latency.percentiles == []
    assert result.latency.min == 0  # the core's empty-min sentinel does not leak
    assert result.achieved_rps == 0
    assert not math.isnan(result.latency.pstdev)
    json.loads(result.model_dump_json())
