"""Sweeps run in-process against the real embedded test server: the records, the stop
rules, extend mode, the campaign directory and `load_campaign`.

The load generator's worker is pinned to CPU 0 and the server to the last CPU, so that on a
2-core machine they do not compete. Steps are 0.5 s at low rates; assertions on rates are
wide ratios and counts are exact only where the engine makes them exact.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import nhbench
from nhbench.campaign import CampaignManifest, StepRecord
from nhbench.sweep import run_sweep

SERVER_CPU = max(os.sched_getaffinity(0))
CLIENT_CPU = min(os.sched_getaffinity(0))
QUICK = {"duration": "0.5s", "cpus": str(CLIENT_CPU), "captures": False, "facts": False,
         "reports": False}


@pytest.fixture
def server() -> Iterator[nhbench.TestServer]:
    with nhbench.TestServer(cpus=[SERVER_CPU]) as test_server:
        yield test_server


@pytest.fixture
def slow_server() -> Iterator[nhbench.TestServer]:
    """Every response takes 20 ms: p99 can never be under 5 ms, and one connection can
    carry at most 50 requests/s."""
    with nhbench.TestServer(cpus=[SERVER_CPU], static_delay="20ms") as test_server:
        yield test_server


def test_steps_are_recorded_with_their_results(server: nhbench.TestServer,
                                               tmp_path: Path) -> None:
    out = tmp_path / "campaign"
    seen: list[StepRecord] = []
    campaign = run_sweep(server.url, out=out, rps=40, max_rps=120, step_rps=40,
                         connections=5, note="unit test", label=["t1"], on_step=seen.append,
                         **QUICK)
    manifest = campaign.manifest
    assert manifest.status == "completed" and manifest.stop_reason == "all steps done"
    assert [step.index for step in campaign.steps] == [1, 2, 3]
    assert [step.rps_per_worker for step in campaign.steps] == [40, 80, 120]
    assert [step.index for step in seen] == [1, 2, 3]
    assert manifest.highest_passing_step == 3
    assert manifest.note == "unit test" and manifest.label == ["t1"]
    assert "rps" not in manifest.options and manifest.options["connections"] == 5
    total = 0
    for step in campaign.steps:
        result = campaign.result(step.index)
        counters = result.counters
        assert step.workers == 1 and step.requested_rps == step.rps_per_worker
        # Counts are the result's own, exactly; rates are compared as wide ratios.
        assert step.http_2xx == counters["benchmark.http_2xx"] > 0
        assert step.requests == counters["upstream_rq_total"]
        assert step.http_2xx == step.requests
        assert 0.5 < step.achieved_rps / step.requested_rps < 1.5
        assert step.errors == {} and step.error_rate == 0 and step.passed
        assert step.latency["p50"] is not None
        assert step.latency["p50"] <= step.latency["p90"] <= step.latency["p99"]
        assert step.latency["p99"] <= step.latency["p99.9"]
        assert step.latency["p99"] == result.latency.p(99)
        assert result.options.rps == step.rps_per_worker and result.options.label == ("t1",)
        assert step.loadgen_cpu is not None  # from the process's CPU time (no mpstat here)
        assert step.nhbench_cpu is not None and step.nhbench_cpu > 0
        step_dir = out / step.directory
        assert step.directory == f"steps/{step.index:03d}-rps{step.rps_per_worker:g}"
        # step.json is the record the manifest holds.
        assert StepRecord.model_validate_json((step_dir / "step.json").read_text()) == step
        total += step.http_2xx
    # Every request the client counted as answered reached the server.
    assert server.stats()["requests"] >= total
    # The files on disk are the manifest and the steps, nothing half-written.
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "steps"]
    assert not list(out.rglob("*.tmp"))
    saved = CampaignManifest.model_validate_json((out / "manifest.json").read_text())
    assert saved == manifest


def test_dataframe_has_one_row_per_step(server: nhbench.TestServer, tmp_path: Path) -> None:
    pytest.importorskip("pandas")
    run_sweep(server.url, out=tmp_path / "c", steps="30,60", connections=2, **QUICK)
    campaign = nhbench.load_campaign(tmp_path / "c")
    frame = campaign.to_dataframe()
    assert list(frame.index) == [1, 2]
    assert list(frame["rps_per_worker"]) == [30, 60]
    for column in ("requested_rps", "achieved_rps", "p50", "p90", "p99", "p99.9", "blocked",
                   "errors", "error_rate", "loadgen_cpu", "nhbench_cpu", "passed"):
        assert column in frame.columns, column
    assert frame["p99"].iloc[0] == campaign.steps[0].latency["p99"]


def test_p99_rule_stops_after_the_first_step(slow_server: nhbench.TestServer,
                                             tmp_path: Path) -> None:
    campaign = run_sweep(slow_server.url, out=tmp_path / "c", rps=10, max_rps=30,
                         step_rps=10, connections=5, stop_on_slo=["p99<5ms", "error_rate<1%"],
                         **QUICK)
    manifest = campaign.manifest
    assert len(campaign.steps) == 1
    step = campaign.steps[0]
    assert not step.passed and step.latency["p99"] >= 0.020
    checks = {check.expression: check for check in step.slo}
    assert not checks["p99<5ms"].passed and checks["p99<5ms"].value == step.latency["p99"]
    assert checks["error_rate<1%"].passed
    assert manifest.status == "stopped" and "p99<5ms" in (manifest.stop_reason or "")
    assert manifest.highest_passing_step is None
    # The failed step is recorded in full, and no directory exists for a step not run.
    assert [p.name for p in (tmp_path / "c" / "steps").iterdir()] == ["001-rps10"]


def test_stop_on_blocked_in_an_open_loop(slow_server: nhbench.TestServer,
                                         tmp_path: Path) -> None:
    # One connection answered in 20 ms carries at most 50 requests/s; at 200/s most releases
    # find it busy and are dropped (open loop), which counts as blocked.
    campaign = run_sweep(slow_server.url, out=tmp_path / "c", steps="200,400", connections=1,
                         open_loop=True, stop_on_blocked=True, **QUICK)
    assert len(campaign.steps) == 1
    step = campaign.steps[0]
    result = campaign.result(1)
    overflow = result.counters["benchmark.pool_overflow"]
    assert overflow > 0 and step.blocked and step.blocked_count >= overflow
    assert [c.expression for c in step.slo if not c.passed] == ["not blocked"]
    assert campaign.manifest.status == "stopped"


def test_extend_finds_the_highest_passing_step(tmp_path: Path) -> None:
    # Closed loop, one connection, 50 ms per response: at most 20 requests/s. Steps 5, 15,
    # 25, ... per second: 25/s (a release every 40 ms) must block; 5/s essentially never does.
    with nhbench.TestServer(cpus=[SERVER_CPU], static_delay="50ms") as slow:
        campaign = run_sweep(slow.url, out=tmp_path / "c", rps=5, step_rps=10, extend=True,
                             extend_limit=95, stop_on_blocked=True, connections=1, **QUICK)
    manifest = campaign.manifest
    steps = campaign.steps
    assert manifest.plan.steps == [5] and manifest.plan.extend
    assert [s.rps_per_worker for s in steps] == [5 + 10 * i for i in range(len(steps))]
    last = steps[-1]
    assert not last.passed and last.blocked and last.rps_per_worker <= 25
    assert all(s.passed for s in steps[:-1])
    assert manifest.status == "stopped"
    expected = steps[-2].index if len(steps) > 1 else None
    assert manifest.highest_passing_step == expected


def test_extend_limit_ends_a_sweep_that_never_fails(server: nhbench.TestServer,
                                                    tmp_path: Path) -> None:
    campaign = run_sweep(server.url, out=tmp_path / "c", rps=10, step_rps=10, extend=True,
                         extend_limit=30, stop_on_slo=["error_rate<50%"], connections=2,
                         **QUICK)
    assert [s.rps_per_worker for s in campaign.steps] == [10, 20, 30]
    assert campaign.manifest.status == "completed"
    assert campaign.manifest.stop_reason == "extend limit reached"
    assert campaign.manifest.highest_passing_step == 3


def test_failure_predicate_stops_the_sweep(tmp_path: Path) -> None:
    # Every response is a 503: Nighthawk's default predicate benchmark.http_5xx:0 ends the
    # run at once, so the step did not measure anything and the sweep stops there.
    with nhbench.TestServer(cpus=[SERVER_CPU], echo_default_params="status=503") as failing:
        campaign = run_sweep(failing.url, out=tmp_path / "c", steps="20,40", connections=2,
                             **QUICK)
    step = campaign.steps[0]
    assert len(campaign.steps) == 1 and not step.passed
    assert step.errors.get("benchmark.http_5xx", 0) > 0 and step.error_rate == 1.0
    assert any(c.expression == "failure predicate benchmark.http_5xx" for c in step.slo)
    assert campaign.manifest.status == "stopped"


def test_embedded_server_with_captures_facts_and_reports(tmp_path: Path) -> None:
    """The integrated flow on one machine: the embedded server, mpstat on the "target" and
    on the load generator, machine facts, and the reports after every step."""
    out = tmp_path / "c"
    campaign = run_sweep("embedded", out=out, steps="50,100", duration="1.2s",
                         cpus=str(CLIENT_CPU), connections=2,
                         watch_cpus=[f"server={SERVER_CPU}"])
    manifest = campaign.manifest
    assert manifest.status == "completed" and len(campaign.steps) == 2
    assert manifest.url.startswith("http://127.0.0.1:")
    assert manifest.settings["url"] == "embedded"
    assert set(manifest.facts) == {"target", "loadgen"}
    assert manifest.facts["loadgen"].cpus is not None
    for step in campaign.steps:
        for capture, role in ((step.target_capture, "target"),
                              (step.loadgen_capture, "loadgen")):
            assert capture is not None, role
            if "mpstat" in capture.skipped:
                continue  # mpstat missing on this machine: reported, not a failure
            assert capture.mpstat_file and (out / step.directory / capture.mpstat_file).is_file()
        if "mpstat" not in (step.target_capture.skipped if step.target_capture else {"mpstat"}):
            assert "server" in step.target_cpu
    try:
        from nhbench.report import write_reports  # noqa: F401
    except ImportError:
        pytest.skip("nhbench.report is not available: the reports were not checked")
    assert (out / "report.txt").is_file() and (out / "results.csv").is_file()
    assert (out / "report.html").is_file()


def test_manifest_is_plain_json(server: nhbench.TestServer, tmp_path: Path) -> None:
    run_sweep(server.url, out=tmp_path / "c", rps=20, connections=1, **QUICK)
    data = json.loads((tmp_path / "c" / "manifest.json").read_text())
    assert data["format"] == "nhbench-campaign/1"
    assert data["plan"]["steps"] == [20.0]
    assert data["steps"][0]["directory"] == "steps/001-rps20"
