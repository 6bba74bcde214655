"""Live-statistics intervals in the C core (csrc/client/interval.c), through the real client
against the real test server: the intervals' requests and counters add up exactly to the
run's, whatever ends the run; off means no intervals at all. Marked `core`: these run under
ASan+UBSan in ``nox -s asan`` (the file matches its test_engine*.py glob)."""

from __future__ import annotations

import threading

import pytest

import nhbench
from nhbench import Result
from nhbench._core_config import client_core_config
from nhbench._names import COUNTERS, SCHEDULED_TO_RESPONSE
from nhbench._run import Benchmark, load_core

pytestmark = pytest.mark.core


def _check_exact(result: Result) -> None:
    timeline = result.timeline
    assert len(timeline) >= 1
    assert timeline.requests == result.stat(SCHEDULED_TO_RESPONSE).count
    # Every fixed counter; the per-status-code ones (benchmark.http_<code>) are in the
    # result only, not in the intervals (docs/outputs.md, "Per-status-code counters").
    for name in COUNTERS:
        value = result.counters[name]
        assert sum(r.counters.get(name, 0) for r in timeline) == value, name
    starts = [r.start for r in timeline]
    assert starts == sorted(starts)
    assert all(r.duration >= 0 for r in timeline)


def test_intervals_add_up_to_the_run(server: nhbench.TestServer) -> None:
    result = nhbench.run(server.url, rps=500, concurrency=2, duration="1.2s",
                         stats_interval="200ms")
    assert result.success
    _check_exact(result)
    # 1.2 s at 0.2 s: about 6 intervals; a slow machine merges late ones, never splits.
    assert 3 <= len(result.timeline) <= 8
    assert result.timeline.requests == 1200
    full = [r for r in result.timeline if r.requests]
    assert all(r.p50 is not None and r.max is not None and r.p50 <= r.p99 <= r.max
               for r in full)  # type: ignore[operator]


def test_intervals_off_means_none(server: nhbench.TestServer) -> None:
    result = nhbench.run(server.url, rps=200, duration="0.5s")
    assert result.timeline.requests == 0 and len(result.timeline) == 0
    result = nhbench.run(server.url, rps=200, duration="0.5s", stats_interval="off")
    assert len(result.timeline) == 0


def test_intervals_http2_and_closed_loop(server: nhbench.TestServer) -> None:
    result = nhbench.run(server.url, rps=0, connections=2, protocol="http2",
                         duration="0.6s", stats_interval="100ms")
    _check_exact(result)
    assert result.timeline.requests > 0


def test_intervals_exact_when_stopped(server: nhbench.TestServer) -> None:
    bench = Benchmark(server.url, rps=1000, no_duration=True, stats_interval="100ms")
    seen = []
    timer = threading.Timer(0.8, bench.stop)
    timer.start()
    try:
        result = bench.run(on_interval=seen.append)
    finally:
        timer.cancel()
    assert result.interrupted
    _check_exact(result)
    # The callback saw every record, the last partial one included.
    assert [r.model_dump() for r in seen] == [r.model_dump() for r in result.timeline]


def test_core_refuses_an_interval_under_a_millisecond(server: nhbench.TestServer) -> None:
    core = load_core()
    config = client_core_config(nhbench.Options(uri=server.url), "127.0.0.1")
    config["stats_interval"] = 0.0005
    with pytest.raises(ValueError, match="stats_interval"):
        core.ClientRun(config)


def test_timeline_json_round_trip(server: nhbench.TestServer) -> None:
    result = nhbench.run(server.url, rps=300, duration="0.6s", stats_interval="200ms")
    text = result.render("json")
    loaded = Result.model_validate_json(text)
    assert loaded.timeline.model_dump() == result.timeline.model_dump()
    assert loaded.timeline.requests == result.stat(SCHEDULED_TO_RESPONSE).count
    # A JSON written without the key (Nighthawk's shape, an older nhbench) loads.
    import json

    data = json.loads(text)
    # The timeline is in the nhbench entry of the global result.
    del data["results"][-1]["user_defined_outputs"][0]["typed_output"]["value"]["run"][
        "timeline"]
    assert len(Result.model_validate(data).timeline) == 0
    # The DataFrame needs the notebook extra, which the sanitizer session does not install.
    pytest.importorskip("pandas")
    frame = result.timeline.to_dataframe()
    assert list(frame.columns[:4]) == ["start", "duration", "requests", "rps"]
    assert int(frame["requests"].sum()) == result.timeline.requests
