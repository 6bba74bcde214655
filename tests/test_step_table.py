"""The step table (`nhbench.campaign.STEP_TABLE`): one record per column that every view of a
campaign's steps reads (results.csv, report.txt, report.html, `Campaign.rows` and its
DataFrame, the browser's campaign page, the notebook's table).

A column added to the table must show in every view it names, with its value and its text,
and nothing else may be needed for that; the views' own names are pinned here so that a
change to the table cannot rename a column of one view unnoticed.
"""

from __future__ import annotations

import csv
import io
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from nhbench.browse import campaign_page
from nhbench.campaign import (
    STEP_TABLE,
    VIEWS,
    Campaign,
    CampaignManifest,
    Shown,
    StepColumn,
    StepRecord,
    SweepPlan,
    step_view,
)
from nhbench.campaign import _table as table_module
from nhbench.report import CSV_COLUMNS, render_csv, render_html, render_text

T0 = datetime(2024, 1, 15, 10, 0, 0, tzinfo=timezone.utc)
DOCS = Path(__file__).resolve().parent.parent / "docs" / "sweep.md"


def _step(index: int) -> StepRecord:
    start = T0 + timedelta(seconds=20 * index)
    return StepRecord(
        index=index, directory=f"steps/{index:03d}-rps{100 * index}",
        rps_per_worker=100.0 * index, workers=2, requested_rps=200.0 * index,
        achieved_rps=199.0 * index, duration=10.0, requests=2000 * index,
        http_2xx=1990 * index, latency={"p50": 1e-3, "p90": 2e-3, "p99": 3e-3, "p99.9": 4e-3},
        blocked=index == 2, blocked_count=3 if index == 2 else 0,
        errors={"benchmark.http_5xx": index}, error_rate=index / 2000,
        target_cpu={"ingress": 40.0 + index}, loadgen_cpu=20.0, nhbench_cpu=10.0,
        passed=index == 1, started_at=start, ended_at=start + timedelta(seconds=10),
    )


def _manifest() -> CampaignManifest:
    return CampaignManifest(
        nhbench_version="0.1.0", created_at=T0, updated_at=T0, url="http://127.0.0.1:1/",
        options={"uri": "http://127.0.0.1:1/", "protocol": "http1"},
        plan=SweepPlan(steps=[100, 200], duration=10),
        target_capture={"watch_cpus": {"ingress": [1]}},
        steps=[_step(1), _step(2)], status="completed",
    )


def _names(view: str) -> list[str]:
    return [column.name for column in step_view(_manifest(), view)]  # type: ignore[arg-type]


def test_each_view_keeps_its_columns() -> None:
    # The names differ between views (index / No. / step, p50 / P50 / latency_p50_s,
    # passed / Result): each view keeps the spelling it has always had.
    assert _names("csv") == [
        *CSV_COLUMNS, "target_cpu_ingress"]
    assert list(CSV_COLUMNS) == [
        "index", "directory", "rps_per_worker", "workers", "requested_rps", "achieved_rps",
        "duration_s", "requests", "http_2xx", "latency_p50_s", "latency_p90_s",
        "latency_p99_s", "latency_p99_9_s", "blocked", "blocked_count", "errors", "error_rate",
        "loadgen_cpu", "nhbench_cpu", "passed", "failed_checks", "started_at", "ended_at",
        "validity", "validity_reasons"]
    assert _names("report") == [
        "No.", "Workers", "Protocol", "RPS per worker", "Requested RPS", "Achieved RPS",
        "P50", "P90", "P99", "P99.9", "Blocked", "Errors", "ingress CPU %", "Loadgen CPU %",
        "nhbench CPU %", "Result", "Validity"]
    assert _names("frame") == [
        "step", "rps_per_worker", "workers", "requested_rps", "achieved_rps", "p50", "p90",
        "p99", "p99.9", "blocked", "blocked_count", "errors", "error_rate", "cpu_ingress",
        "loadgen_cpu", "nhbench_cpu", "passed", "validity", "duration", "requests", "http_2xx",
        "started_at", "directory"]
    assert _names("browse") == [
        "No.", "rps per worker", "requested rps", "achieved rps", "p50", "p99", "errors",
        "passed", "validity"]
    assert _names("notebook") == [
        "No.", "requested", "achieved", "p50", "p90", "p99", "p99.9", "errors", "blocked",
        "passed", "validity"]


def test_keys_are_unique_and_every_column_is_shown_somewhere() -> None:
    manifest = _manifest()
    columns = [column for entry in STEP_TABLE for column in entry.columns(manifest)]
    keys = [column.key for column in columns]
    assert len(keys) == len(set(keys))
    for column in columns:
        assert any(column.shown(view) is not None for view in VIEWS), column.key


def test_docs_name_every_fixed_column() -> None:
    docs = DOCS.read_text()
    for name in CSV_COLUMNS:
        assert f"{name}," in docs or f"{name}`" in docs, name
    for column in step_view(None, "report"):
        assert column.name in docs, column.name


EXTRA = StepColumn(
    "queue_depth", lambda s: s.index * 7, lambda s: f"q{s.index * 7}",
    csv="queue_depth", report="Queue", frame="queue", browse="queue", notebook="queue",
)


def test_a_column_added_to_the_table_shows_in_every_view(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """One entry in the table is the whole change: every renderer picks it up."""
    at = next(i for i, entry in enumerate(STEP_TABLE) if entry.key == "achieved_rps") + 1
    monkeypatch.setattr(table_module, "STEP_TABLE",
                        (*STEP_TABLE[:at], EXTRA, *STEP_TABLE[at:]))
    manifest = _manifest()

    rows = list(csv.DictReader(io.StringIO(render_csv(manifest))))
    assert [row["queue_depth"] for row in rows] == ["7", "14"]

    text = render_text(manifest).splitlines()
    header = next(line for line in text if line.startswith("No."))
    assert re.search(r"Achieved RPS +Queue +P50", header)
    assert any(line.startswith("  1") and " q7 " in line for line in text)

    page = render_html(manifest, tmp_path)
    assert "<th>Achieved RPS</th><th>Queue</th><th>P50</th>" in page
    assert '<td class="num">q14</td>' in page

    campaign = Campaign(tmp_path, manifest)
    assert [row["queue"] for row in campaign.rows()] == [7, 14]
    assert list(campaign.rows()[0])[4:6] == ["achieved_rps", "queue"]
    pandas = pytest.importorskip("pandas")
    frame = campaign.to_dataframe()
    assert frame["queue"].dtype == pandas.Series([7]).dtype

    browser = campaign_page(manifest, ".", has_report=False)
    assert '<th class="num">achieved rps</th><th class="num">queue</th>' in browser
    assert '<td class="num">q7</td>' in browser

    notebook = campaign._repr_html_()
    assert ">achieved</th><th" in notebook and ">queue</th>" in notebook
    assert ">q14</td>" in notebook


def test_an_order_that_names_a_missing_column_is_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    stray = StepColumn("stray", lambda s: 1, csv=Shown("stray", after="no_such_column"))
    monkeypatch.setattr(table_module, "STEP_TABLE", (*STEP_TABLE, stray))
    with pytest.raises(ValueError, match="'stray' follows 'no_such_column'"):
        step_view(_manifest(), "csv")
