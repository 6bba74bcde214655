"""The validity verdict of a campaign's steps (docs/trust.md "Validity"; docs/sweep.md and
docs/adapt.md "Validity"): the step table's column in every output, the reasons under it,
and ``--validity strict`` on ``nhbench sweep`` (runs the plan, exits 98) and ``nhbench
adapt`` (an invalid step is measured again, never decides the search; invalid twice: 98).

The invalid step is a real run: one connection to a server that delays each response by
5 ms cannot carry 2,000 requests per second, so nearly every release is blocked (the
`blocked` and `schedule` checks: invalid whatever the host's load). The search's handling is
also checked on recorded steps (no server), where the verdict sequence can be chosen.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest

import nhbench
from nhbench.adaptive import AdaptStrategy, outcome_of
from nhbench.campaign import CampaignManifest, StepRecord, SweepPlan, load_campaign
from nhbench.cli._run import INVALID_RUN
from nhbench.options import split_adapt
from nhbench.report import render_csv, render_html, render_text
from tests.support.cli import nhbench_cli

# 20 requests per second fit one connection to the 5 ms server; 2,000 do not.
_SLOW = ("--duration", "1s", "--cooldown", "0", "--connections", "1")


@pytest.fixture(scope="module")
def slow() -> Iterator[nhbench.TestServer]:
    with nhbench.TestServer(static_delay="5ms") as server:
        yield server


def _rows(directory: Path) -> list[dict[str, str]]:
    with open(directory / "results.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_sweep_strict_runs_its_plan_and_exits_98(slow: nhbench.TestServer,
                                                 tmp_path: Path) -> None:
    out = tmp_path / "strict"
    proc = nhbench_cli("sweep", slow.url, "--steps", "20,2000", *_SLOW, "--validity", "strict",
                       "--out", str(out))
    assert proc.returncode == INVALID_RUN == 98, proc.stderr
    # Step 1 is valid on a quiet host; on a host short of CPU its run-queue wait can make it
    # invalid too (rightly), which the assertions below allow for.
    first_invalid = "step(s) 1, 2 invalid (--validity strict)" in proc.stderr
    assert first_invalid or "step(s) 2 invalid (--validity strict)" in proc.stderr
    assert "(validity: invalid)" in proc.stderr  # the step's progress line
    rows = _rows(out)
    # Both steps ran: strict does not cut the plan short.
    assert [row["index"] for row in rows] == ["1", "2"]
    assert (rows[0]["validity"] == "invalid") == first_invalid, rows[0]
    assert rows[1]["validity"] == "invalid"
    assert "invalid: blocked:" in rows[1]["validity_reasons"]
    # The step's own result.json says the same as its row.
    campaign = load_campaign(out)
    result = campaign.result(2)
    assert result.validity is not None and result.validity.verdict == "invalid"
    assert campaign.manifest.steps[1].validity_reasons == result.validity.reasons
    text = (out / "report.txt").read_text()
    header = next(line for line in text.splitlines() if line.startswith("No."))
    assert header.rstrip().endswith("Validity")
    assert "\n  No. 2 invalid: blocked: " in text
    html = (out / "report.html").read_text()
    assert "<th>Validity</th>" in html
    assert "<li>No. 2 invalid: blocked: " in html
    # No stop rule fired on step 2, but strict does not trust its numbers: the highest
    # passing step is the valid one.
    assert campaign.manifest.steps[1].passed
    if not first_invalid:
        assert campaign.manifest.highest_passing_step == 1
        assert "highest passing step 1:" in proc.stderr
    else:
        assert campaign.manifest.highest_passing_step is None


def test_sweep_report_mode_records_the_verdict_and_exits_0(slow: nhbench.TestServer,
                                                          tmp_path: Path) -> None:
    out = tmp_path / "report"
    proc = nhbench_cli("sweep", slow.url, "--steps", "2000", *_SLOW, "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert [row["validity"] for row in _rows(out)] == ["invalid"]
    # Reported, not judged: the step's rate passed its (absent) stop rules.
    assert load_campaign(out).manifest.highest_passing_step == 1


def test_adapt_strict_measures_an_invalid_step_again_then_stops_with_98(
        slow: nhbench.TestServer, tmp_path: Path) -> None:
    out = tmp_path / "adapt"
    proc = nhbench_cli("adapt", slow.url, "--slo", "p99<10s", "--min-rps", "2000",
                       "--max-rps", "4000", *_SLOW, "--validity", "strict", "--out", str(out))
    assert proc.returncode == INVALID_RUN, proc.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    steps = manifest["steps"]
    # The invalid first step decided nothing: the search asked for its rate again.
    assert [step["rps_per_worker"] for step in steps] == [2000.0, 2000.0]
    assert [step["validity"] for step in steps] == ["invalid", "invalid"]
    assert manifest["status"] == "stopped"
    assert "steps 1 and 2 (2000 rps) invalid (--validity strict)" in manifest["stop_reason"]
    outcome = outcome_of(out, load_campaign(out).manifest)
    assert outcome.exit_status == INVALID_RUN


def test_adapt_report_mode_lets_the_invalid_step_decide(slow: nhbench.TestServer,
                                                        tmp_path: Path) -> None:
    out = tmp_path / "adapt-report"
    proc = nhbench_cli("adapt", slow.url, "--slo", "p99<10s", "--min-rps", "2000",
                       "--max-rps", "4000", *_SLOW, "--out", str(out))
    # The blocked step failed (adapt's "not blocked" check) and so ended the search at
    # --min-rps, as before steps carried a verdict.
    assert proc.returncode == 99, proc.stderr
    steps = json.loads((out / "manifest.json").read_text())["steps"]
    assert [step["validity"] for step in steps] == ["invalid"]


@pytest.mark.parametrize("command", ["sweep", "adapt"])
def test_a_bad_validity_is_refused_by_name(command: str, tmp_path: Path) -> None:
    extra = ("--slo", "p99<1s", "--min-rps", "10") if command == "adapt" else ("--rps", "10")
    proc = nhbench_cli(command, "http://127.0.0.1:9/", *extra, "--validity", "lenient",
                       "--out", str(tmp_path / "x"))
    assert proc.returncode == 2, proc.stderr
    assert "--validity" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()


# ---- the search on recorded steps --------------------------------------------------------

_T = datetime(2025, 1, 1, tzinfo=timezone.utc)


def _record(index: int, rate: float, passed: bool, validity: str | None) -> StepRecord:
    return StepRecord(
        index=index, directory=f"steps/{index:03d}", rps_per_worker=rate, workers=1,
        requested_rps=rate, achieved_rps=rate, duration=1.0, requests=int(rate),
        http_2xx=int(rate), latency={"p99": 0.001}, blocked=False, passed=passed,
        validity=validity,  # type: ignore[arg-type]
        validity_reasons=[] if validity in (None, "valid") else [f"{validity}: hiccup: x"],
        started_at=_T, ended_at=_T)


def _strategy(strict: bool) -> tuple[AdaptStrategy, CampaignManifest]:
    options, _ = split_adapt({"url": "http://127.0.0.1:9/", "slo": ["p99<5ms"],
                              "min_rps": 100, "max_rps": 1600})
    manifest = CampaignManifest(nhbench_version="0", created_at=_T, updated_at=_T,
                                url="http://127.0.0.1:9/", options={},
                                plan=SweepPlan(steps=[100], duration=1))
    strategy = AdaptStrategy(options, strict=strict)
    strategy.begin(manifest)
    return strategy, manifest


def test_strict_search_repeats_an_invalid_step_and_goes_on_after_a_valid_one() -> None:
    strategy, manifest = _strategy(strict=True)
    manifest.steps.append(_record(1, 100, True, "valid"))
    assert strategy.next_rate(manifest) == 200
    # A failing invalid step at 200 does not lower the bracket's top: 200 again.
    manifest.steps.append(_record(2, 200, False, "invalid"))
    assert strategy.ended(manifest) is None
    assert strategy.next_rate(manifest) == 200
    # Measured again, valid and passing: the search goes on from it.
    manifest.steps.append(_record(3, 200, True, "suspect"))
    assert strategy.ended(manifest) is None
    assert strategy.next_rate(manifest) == 400
    assert strategy.state(manifest).search_steps == 2  # the invalid step did not count
    # Invalid, then invalid again at the same rate: the campaign stops.
    manifest.steps.append(_record(4, 400, True, "invalid"))
    assert strategy.next_rate(manifest) == 400
    manifest.steps.append(_record(5, 400, True, "invalid"))
    end = strategy.ended(manifest)
    assert end is not None and end[0] == "stopped"
    assert "steps 4 and 5 (400 rps) invalid" in end[1] and "hiccup: x" in end[1]


def test_report_search_lets_an_invalid_step_decide() -> None:
    strategy, manifest = _strategy(strict=False)
    manifest.steps.append(_record(1, 100, True, "valid"))
    manifest.steps.append(_record(2, 200, False, "invalid"))
    assert strategy.next_rate(manifest) == 150  # bisecting 100..200
    manifest.steps.append(_record(3, 150, True, "invalid"))
    assert strategy.ended(manifest) is None
    assert strategy.next_rate(manifest) == 175  # the invalid pass raised the bottom


def test_a_step_recorded_before_steps_carried_a_verdict_reads_as_unknown(
        tmp_path: Path) -> None:
    # A manifest of an older nhbench has no validity keys: it loads, and every output shows
    # "-" (the CSV an empty cell), with no reasons listed.
    step = _record(1, 100, True, None).model_dump(mode="json")
    del step["validity"], step["validity_reasons"]
    manifest = CampaignManifest.model_validate({
        "nhbench_version": "0", "created_at": _T.isoformat(), "updated_at": _T.isoformat(),
        "url": "http://127.0.0.1:9/", "options": {}, "plan": {"steps": [100], "duration": 1},
        "steps": [step]})
    assert manifest.steps[0].validity is None
    rows = list(csv.DictReader(render_csv(manifest).splitlines()))
    assert rows[0]["validity"] == "" and rows[0]["validity_reasons"] == ""
    text = render_text(manifest)
    assert "Validity (docs/trust.md)" not in text
    line = next(line for line in text.splitlines() if line.startswith("  1 "))
    assert line.rstrip().endswith("-")
    assert "<h3>Validity</h3>" not in render_html(manifest, tmp_path)
