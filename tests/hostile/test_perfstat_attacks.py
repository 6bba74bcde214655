"""Hostile input to perf stat per step (docs/sweep.md "perf stat"): event names that try
to run commands on the target through its shell, and perf stat output a compromised or
broken target could send back (it is read from the target's disk).

An event name goes to the target's shell, so it is quoted and limited to printable ASCII
without spaces; whatever perf then rejects is refused by name, before any campaign exists,
and nothing else runs. Output from the target is data: a line that is not a counter line
is a skip reason, "nan"/"inf" are no count, a marker perf never prints (``<=1+1>``) is an
unknown count, and every text lands escaped in report.html and as plain text in the CSV.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest
from support.cli import nhbench_cli

from nhbench.campaign import CampaignManifest, StepRecord, SweepPlan
from nhbench.capture import (
    CaptureResult,
    PerfStat,
    group_counts,
    parse_perf_stat,
)
from nhbench.capture._perf import probe_perf
from nhbench.hosts import LocalHost
from nhbench.report import render_csv, render_html


@pytest.mark.parametrize("event", [
    "$(touch${IFS}MARK)",
    "`touch${IFS}MARK`",
    "cycles;touch${IFS}MARK",
    "cycles'$(touch${IFS}MARK)'",
])
def test_an_event_name_never_runs_on_the_target(tmp_path: Path, event: str) -> None:
    if probe_perf(LocalHost()).skip_reason:
        pytest.skip("perf cannot run here: the event would not be checked")
    mark = tmp_path / "pwned"
    out = tmp_path / "campaign"
    done = nhbench_cli("sweep", "embedded", "--rps", "10", "--duration", "1s", "--out",
                       str(out), "--perf-stat", "--perf-event",
                       event.replace("MARK", str(mark)), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "--perf-event" in done.stderr and "rejects it" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not mark.exists()
    assert not out.exists()


@pytest.mark.parametrize("text", [
    "nan,,cycles,5,100.00,,\n",
    "inf,,cycles,5,100.00,,\n",
    "1e999,,cycles,5,100.00,,\n",
    "<html>,<script>alert(1)</script>\n",
    "\x1b[2J,,,\n",
])
def test_output_that_is_not_counts_is_refused_by_line(text: str) -> None:
    with pytest.raises(ValueError, match="line 1 is not a counter line"):
        parse_perf_stat(text)


def test_strange_markers_and_names_stay_text(tmp_path: Path) -> None:
    lines = parse_perf_stat("<=HYPERLINK(\"http://x\")>,,cycles,0,100.00,,\n"
                            "5,,instructions,1,100.00,,\n")
    (group,) = group_counts(lines, ["cycles", "instructions"], {})
    assert group.counts["cycles"].value is None
    assert group.ipc is None
    now = datetime.now(timezone.utc)
    capture = CaptureResult(host="local", perf_stat=PerfStat(
        events=["cycles", "instructions"], groups=[group]),
        skipped={"perf stat": "perf stat output not understood: <script>alert(1)</script>"})
    step = StepRecord(index=1, directory="steps/001-rps10", rps_per_worker=10, workers=1,
                      requested_rps=10, achieved_rps=10, duration=1, requests=10,
                      http_2xx=10, latency={}, blocked=False, passed=True,
                      target_capture=capture, started_at=now, ended_at=now)
    manifest = CampaignManifest(
        nhbench_version="0", created_at=now, updated_at=now, url="http://127.0.0.1:1/",
        options={},
        plan=SweepPlan(steps=[10], duration=1), target_capture={"perf_stat": True},
        steps=[step])
    html = render_html(manifest, tmp_path)
    assert "<script>" not in html
    assert "&lt;script&gt;" in html
    csv_text = render_csv(manifest)
    # A spreadsheet formula needs "=" first in its cell; the reason is inside "unknown (".
    assert 'unknown (=HYPERLINK(""http://x"")' in csv_text
    assert ",=" not in csv_text
