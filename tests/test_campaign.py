"""The campaign directory: creation rules, atomic writes, resume compatibility, loading.

One real short run provides a `Result` to store; everything else is file handling.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path

import pytest
from support.files import assert_failed_rename_keeps_the_old_file

import nhbench
from nhbench import CampaignError, Result
from nhbench.campaign import (
    CampaignManifest,
    CampaignStore,
    StepRecord,
    SweepPlan,
    atomic_write_text,
    check_resume,
    load_campaign,
    load_manifest,
    step_directory,
)
from nhbench.sweep import build_plan, record_from_result

CPU = min(os.sched_getaffinity(0))


@pytest.fixture(scope="module")
def result() -> Result:
    with nhbench.TestServer(cpus=[max(os.sched_getaffinity(0))]) as server:
        return nhbench.run(server.url, rps=40, duration=0.3, cpus=[CPU], connections=2,
                           percentiles=[50, 90, 99, 99.9])


def manifest(plan: SweepPlan | None = None, **options: object) -> CampaignManifest:
    now = datetime.now(timezone.utc)
    return CampaignManifest(
        nhbench_version=nhbench.__version__, created_at=now, updated_at=now,
        url="http://127.0.0.1:9/", options={"connections": 2, **options},
        plan=plan or build_plan(rps=10, max_rps=30, step_rps=10, duration=0.3),
    )


def step(result: Result, index: int, rate: float) -> StepRecord:
    now = datetime.now(timezone.utc)
    return record_from_result(result, index=index, rate=rate,
                              directory=step_directory(index, rate), rules=[],
                              stop_on_blocked=False, started_at=now, ended_at=now)


def test_atomic_write_leaves_old_or_new(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "manifest.json"
    atomic_write_text(target, "old\n")
    assert target.read_text() == "old\n"
    # The same permissions as a file written with open(), not mkstemp's owner-only 0600.
    reference = tmp_path / "reference"
    reference.write_text("")
    assert target.stat().st_mode & 0o777 == reference.stat().st_mode & 0o777
    reference.unlink()
    assert_failed_rename_keeps_the_old_file(atomic_write_text, target, monkeypatch)


def test_create_refuses_used_directories(tmp_path: Path) -> None:
    CampaignStore.create(tmp_path / "a", manifest())
    with pytest.raises(CampaignError, match="already a campaign; continue it with --resume"):
        CampaignStore.create(tmp_path / "a", manifest())
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "x").write_text("x")
    with pytest.raises(CampaignError, match="not empty and is not a campaign"):
        CampaignStore.create(tmp_path / "b", manifest())
    (tmp_path / "c").mkdir()  # an empty directory is fine
    CampaignStore.create(tmp_path / "c", manifest())
    assert load_manifest(tmp_path / "c").status == "running"


def test_steps_round_trip_through_json(tmp_path: Path, result: Result) -> None:
    store = CampaignStore.create(tmp_path / "c", manifest())
    for index, rate in ((1, 10.0), (2, 20.0)):
        store.prepare_step(index, rate)
        store.record_step(step(result, index, rate), result)
    store.finish("completed", "all steps done")
    campaign = load_campaign(tmp_path / "c")
    assert campaign.manifest == store.manifest
    assert [s.directory for s in campaign.steps] == ["steps/001-rps10", "steps/002-rps20"]
    loaded = campaign.result(2)
    assert loaded.counters == result.counters
    assert loaded.latency.p(99) == result.latency.p(99)
    assert loaded.model_dump_json() == result.model_dump_json()
    with pytest.raises(KeyError, match="no step 3"):
        campaign.result(3)
    rows = campaign.rows()
    assert [row["step"] for row in rows] == [1, 2]
    assert rows[0]["p99"] == result.latency.p(99)


def test_resume_removes_unfinished_steps(tmp_path: Path, result: Result) -> None:
    store = CampaignStore.create(tmp_path / "c", manifest())
    store.prepare_step(1, 10)
    store.record_step(step(result, 1, 10), result)
    partial = store.prepare_step(2, 20)
    (partial / "result.json").write_text("{half")  # a crash in the middle of step 2
    (tmp_path / "c" / ".manifest.json.x.tmp").write_text("{")
    saved = load_manifest(tmp_path / "c")
    resumed = CampaignStore.resume(tmp_path / "c", check_resume(
        saved, options=saved.options, plan=saved.plan))
    assert [p.name for p in (tmp_path / "c" / "steps").iterdir()] == ["001-rps10"]
    assert not list((tmp_path / "c").glob(".*.tmp"))
    assert [s.index for s in resumed.manifest.steps] == [1]


def test_resume_compatibility(tmp_path: Path, result: Result) -> None:
    saved = manifest()
    saved.steps.append(step(result, 1, 10))
    same = saved.options
    # Extending the plan is allowed.
    longer = build_plan(rps=10, max_rps=50, step_rps=10, duration=0.3)
    assert check_resume(saved, options=same, plan=longer).plan.steps == [10, 20, 30, 40, 50]
    extended = build_plan(rps=10, max_rps=30, step_rps=10, duration=0.3, extend=True,
                          stop_on_blocked=True)
    with pytest.raises(CampaignError, match="different plan: a different --stop-on-blocked"):
        check_resume(saved, options=same, plan=extended)
    cases = [
        (build_plan(rps=10, max_rps=30, step_rps=10, duration=1), "duration 1 s"),
        (build_plan(rps=20, max_rps=30, step_rps=10, duration=0.3), "do not extend"),
        (build_plan(rps=10, max_rps=20, step_rps=10, duration=0.3), "do not extend"),
        (build_plan(rps=10, max_rps=30, step_rps=10, duration=0.3, stop_on_slo=["p99<1ms"]),
         "stop rules"),
    ]
    for plan, needle in cases:
        with pytest.raises(CampaignError, match=needle):
            check_resume(saved, options=same, plan=plan)
    with pytest.raises(CampaignError, match=r"different run options: connections=3 \(campaign: 2\)"):
        check_resume(saved, options={**same, "connections": 3}, plan=saved.plan)
    # The embedded server's URL changes every time and is ignored when asked to.
    other = {**same, "uri": "http://127.0.0.1:1234/"}
    check_resume(saved, options=other, plan=saved.plan, ignore=("uri",))


def test_load_errors_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(CampaignError, match="is not a directory"):
        load_campaign(tmp_path / "missing")
    with pytest.raises(CampaignError, match="not a campaign directory"):
        load_campaign(tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps({"format": "nhbench-campaign/1"}))
    with pytest.raises(CampaignError, match="not a valid campaign manifest") as info:
        load_campaign(tmp_path)
    assert "\n" not in str(info.value)


def test_to_dataframe_without_pandas(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    CampaignStore.create(tmp_path / "c", manifest())
    campaign = load_campaign(tmp_path / "c")
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match="needs pandas: pip install pandas"):
        campaign.to_dataframe()
