"""Reports of a campaign: report.txt, results.csv, report.html.

Rendering is a pure function of the manifest, so the manifest is built by hand here (no
sweep is run): six steps at rising rates, two watched CPU groups, captures with a flame
graph and a skipped perf, target facts with unknowns and a load generator with most facts
missing, a note with markup in it.
"""

from __future__ import annotations

import csv
import io
import os
import re
import xml.etree.ElementTree as ET
from datetime import datetime, timedelta, timezone
from html.parser import HTMLParser
from pathlib import Path

import pytest

from nhbench.campaign import CampaignManifest, SloCheck, StepRecord, SweepPlan
from nhbench.capture import CaptureResult, CpuGroupLoad
from nhbench.hosts import MachineFacts, NicFacts
from nhbench.report import (
    CSV_COLUMNS,
    format_latency,
    render_csv,
    render_html,
    render_text,
    write_reports,
)

URL = "http://10.0.0.5:10000/echo?size=400"
NOTE = 'Istio 1.20 ingress, <script>alert("x")</script> & "quotes"'
T0 = datetime(2024, 1, 15, 10, 0, 0, tzinfo=timezone.utc)
GROUPS = {"ingress": [5, 22], "sidecar": [7]}

# (rps per worker, achieved total, p50, p90, p99, p99.9, blocked, errors, passed)
STEPS = [
    (100, 200.0, 850e-6, 1.2e-3, 2.5e-3, 4.0e-3, 0, {}, True),
    (200, 399.5, 900e-6, 1.3e-3, 2.8e-3, 5.1e-3, 0, {}, True),
    (300, 599.0, 1.0e-3, 1.6e-3, 3.9e-3, 9.0e-3, 0, {}, True),
    (400, 790.2, 1.4e-3, 2.9e-3, 4.7e-3, 20e-3, 0, {"benchmark.http_5xx": 3}, True),
    (500, 850.0, 4.0e-3, 9.0e-3, 48e-3, 1.25, 12, {"benchmark.http_5xx": 40}, False),
    (600, 851.0, None, None, None, None, 99, {}, False),
]


def _capture(index: int, with_files: bool) -> CaptureResult:
    busy = {5: 10.0 * index, 22: 10.0 * index + 2, 7: 5.0 * index}
    return CaptureResult(
        host="root@sut:22",
        groups=[
            CpuGroupLoad(name="ingress", cpus=[5, 22], busy_percent=10.0 * index + 1),
            CpuGroupLoad(name="sidecar", cpus=[7], busy_percent=5.0 * index),
        ],
        cpu_busy=busy,
        samples=10,
        mpstat_file="target/mpstat.json" if with_files else None,
        perf_event="cpu-clock" if with_files else None,
        folded_file="target/perf.folded" if with_files else None,
        flamegraph_file="target/flamegraph.svg" if with_files else None,
        skipped={} if with_files else {"perf": "perf is not installed"},
    )


def _step(index: int) -> StepRecord:
    rate, achieved, p50, p90, p99, p999, blocked, errors, passed = STEPS[index - 1]
    latency = {"p50": p50, "p90": p90, "p99": p99, "p99.9": p999}
    slo = [SloCheck(expression="p99<5ms", value=p99, passed=p99 is not None and p99 < 5e-3)]
    if blocked:
        slo.append(SloCheck(expression="not blocked", value=float(blocked), passed=False))
    start = T0 + timedelta(seconds=20 * index)
    requests = int(rate * 2 * 10)
    return StepRecord(
        index=index,
        directory=f"steps/{index:03d}-rps{rate}",
        rps_per_worker=float(rate),
        workers=2,
        requested_rps=float(rate * 2),
        achieved_rps=achieved,
        duration=10.0,
        requests=requests,
        http_2xx=int(achieved * 10),
        latency=latency,
        blocked=blocked > 0,
        blocked_count=blocked,
        errors=errors,
        error_rate=sum(errors.values()) / requests,
        target_cpu={"ingress": 10.0 * index + 1, "sidecar": 5.0 * index},
        loadgen_cpu=None if index == 6 else 20.0 + index,
        nhbench_cpu=None if index == 6 else 10.0 + index,
        slo=slo,
        passed=passed,
        target_capture=_capture(index, with_files=index != 3),
        started_at=start,
        ended_at=start + timedelta(seconds=10),
    )


def _manifest() -> CampaignManifest:
    target = MachineFacts(
        role="target",
        host="root@sut:22",
        hostname="icx-sut01",
        os="Ubuntu 22.04.3 LTS",
        kernel="5.15.0-91-generic",
        architecture="x86_64",
        cpu_model="Intel(R) Xeon(R) Platinum 8380 CPU @ 2.30GHz",
        cpus=160,
        sockets=2,
        cores_per_socket=40,
        threads_per_core=2,
        numa_nodes=2,
        stepping="6",
        smt=True,
        turbo=False,
        governors="160x performance",
        min_frequency="160x 800 MHz",
        max_frequency="160x 3400 MHz",
        uncore_frequency=None,
        irqbalance="inactive",
        nic=NicFacts(interface="ens801f0", address="10.0.0.5", driver="ice",
                     driver_version="1.9.11", firmware=None),
        unknown={"uncore_frequency": "rdmsr not installed (msr-tools)",
                 "nic.firmware": "ethtool -i printed no firmware-version"},
    )
    loadgen = MachineFacts(
        role="loadgen",
        host="local",
        hostname="loadgen01",
        kernel="6.1.0-17-amd64",
        cpus=2,
        unknown={"os": "no /etc/os-release", "governors": "no cpufreq in sysfs (virtual "
                 "machine?)", "nic": "no route to 10.0.0.5"},
    )
    return CampaignManifest(
        nhbench_version="0.1.0",
        created_at=T0,
        updated_at=T0 + timedelta(minutes=3),
        url=URL,
        label=["icx", "istio-ingress"],
        note=NOTE,
        command=["nhbench", "sweep", URL, "--rps", "100", "--max-rps", "600"],
        options={"uri": URL, "protocol": "http1", "cpus": [0, 1], "connections": 100},
        plan=SweepPlan(steps=[100, 200, 300, 400, 500, 600], duration=10, cooldown=2,
                       stop_on_blocked=True, stop_on_slo=["p99<5ms"]),
        ssh="root@sut:22",
        target_capture={"mpstat": True, "watch_cpus": GROUPS, "perf": True},
        facts={"target": target, "loadgen": loadgen},
        steps=[_step(i) for i in range(1, len(STEPS) + 1)],
        status="stopped",
        stop_reason="step 5: p99<5ms failed (p99 48.0 ms)",
        highest_passing_step=4,
    )


@pytest.fixture
def manifest() -> CampaignManifest:
    return _manifest()


@pytest.fixture
def campaign_dir(tmp_path: Path, manifest: CampaignManifest) -> Path:
    """A campaign directory with the files the links point to, except step 3's captures
    (skipped) and step 6's result.json (as if lost), to check that only existing files are
    linked."""
    for step in manifest.steps:
        directory = tmp_path / step.directory
        (directory / "target").mkdir(parents=True)
        if step.index != 6:
            (directory / "result.json").write_text("{}")
        capture = step.target_capture
        if capture is not None and capture.flamegraph_file:
            (directory / capture.flamegraph_file).write_text("<svg/>")
            (directory / "target" / "mpstat.json").write_text("{}")
    (tmp_path / "manifest.json").write_text(manifest.model_dump_json())
    return tmp_path


# -- units -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (850e-6, "850 µs"),
        (85.31e-6, "85.3 µs"),
        (0.9996e-3, "1.00 ms"),
        (1.2e-3, "1.20 ms"),
        (48e-3, "48.0 ms"),
        (0.9999, "1.00 s"),
        (1.25, "1.25 s"),
        (0.0, "0 s"),
        (None, "-"),
    ],
)
def test_format_latency(seconds: float | None, text: str) -> None:
    assert format_latency(seconds) == text


# -- report.txt --------------------------------------------------------------------------


def _table(text: str) -> tuple[list[str], list[list[str]]]:
    """Header cells and row cells of the Steps table, split on the column gaps of the
    dashed rule (cells may contain single spaces, e.g. "yes (12)")."""
    lines = text.splitlines()
    start = lines.index("Steps") + 2
    header, rule = lines[start], lines[start + 1]
    spans = [(m.start(), m.end()) for m in re.finditer(r"-+", rule)]

    def cells(line: str) -> list[str]:
        return [line[a:b].strip() for a, b in spans]

    rows = []
    for line in lines[start + 2:]:
        if not line.strip() or not line.lstrip()[0].isdigit():
            break
        rows.append(cells(line.ljust(len(rule))))
    return cells(header.ljust(len(rule))), rows


def test_text_table_columns_and_rows(manifest: CampaignManifest) -> None:
    text = render_text(manifest)
    headers, rows = _table(text)
    assert headers == [
        "No.", "Workers", "Protocol", "RPS per worker", "Requested RPS", "Achieved RPS",
        "P50", "P90", "P99", "P99.9", "Blocked", "Errors", "ingress CPU %", "sidecar CPU %",
        "Loadgen CPU %", "nhbench CPU %", "Result", "Validity",
    ]
    assert len(rows) == 6
    first, fifth, sixth = rows[0], rows[4], rows[5]
    assert first == ["1", "2 @0-1", "http1", "100", "200", "200", "850 µs", "1.20 ms",
                     "2.50 ms", "4.00 ms", "no", "0", "11.0", "5.0", "21.0", "11.0", "pass",
                     "-"]
    assert fifth[6:12] == ["4.00 ms", "9.00 ms", "48.0 ms", "1.25 s", "yes (12)", "40 (0.4%)"]
    assert fifth[-2] == "FAIL"
    # No latency and no load generator CPU: shown as "-", not as 0.
    assert sixth[6:10] == ["-", "-", "-", "-"] and sixth[14] == "-"


def test_text_header_outcome_and_facts(manifest: CampaignManifest) -> None:
    text = render_text(manifest)
    assert text.startswith("nhbench sweep: icx, istio-ingress\n")
    assert f"Note:     {NOTE}" in text  # plain text: shown as written
    assert f"URL:      {URL}" in text
    assert "Plan:     100 to 600 rps per worker in steps of 100 (6 steps); 10 s each" in text
    assert "stop rules: blocked, p99<5ms" in text
    assert "Stop reason: step 5: p99<5ms failed (p99 48.0 ms)" in text
    assert "Highest passing step: No. 4: 400 rps per worker, 800 requested, 790 achieved, " \
           "p99 4.70 ms" in text
    assert "No. 5 failed: p99<5ms (was 48.0 ms); not blocked (was 12)" in text
    assert "skipped, steps 3: target perf: perf is not installed" in text
    assert "steps/001-rps100/target/flamegraph.svg" in text
    facts = text[text.index("Machines"):]
    assert "target (root@sut:22)" in facts and "loadgen (local)" in facts
    lines = {line.split("  ")[1].strip(): line for line in facts.splitlines()
             if line.startswith("  ")}
    assert "160x performance" in lines["Governors"]
    assert "unknown (no cpufreq in sysfs (virtual machine?))" in lines["Governors"]
    assert "unknown (rdmsr not installed (msr-tools))" in lines["Uncore frequency"]
    assert "unknown (ethtool -i printed no firmware-version)" in lines["Firmware"]
    assert "unknown (no route to 10.0.0.5)" in lines["Driver"]
    assert "on" in lines["SMT"].split() and "off" in lines["Turbo"].split()
    # Long reasons wrap inside their column, so the two machines fit in 120 columns.
    assert max(len(line) for line in facts.splitlines()) <= 120


def test_text_without_steps_or_facts() -> None:
    manifest = _manifest().model_copy(update={"steps": [], "facts": {},
                                              "highest_passing_step": None})
    text = render_text(manifest)
    assert "No step finished yet." in text
    assert "Highest passing step: none" in text
    assert "Machines" not in text


# -- results.csv -------------------------------------------------------------------------


def test_csv_round_trip(manifest: CampaignManifest) -> None:
    rows = list(csv.DictReader(io.StringIO(render_csv(manifest))))
    assert len(rows) == 6
    header = list(rows[0])
    assert header[: len(CSV_COLUMNS)] == list(CSV_COLUMNS)
    assert header[len(CSV_COLUMNS):] == ["target_cpu_ingress", "target_cpu_sidecar"]
    for row, step in zip(rows, manifest.steps, strict=True):
        assert int(row["index"]) == step.index
        assert row["directory"] == step.directory
        assert float(row["requested_rps"]) == step.requested_rps
        assert float(row["achieved_rps"]) == step.achieved_rps
        for key in ("p50", "p90", "p99", "p99.9"):
            column = "latency_" + key.replace(".", "_") + "_s"
            value = step.latency[key]
            assert (float(row[column]) if row[column] else None) == value
        assert row["blocked"] == ("true" if step.blocked else "false")
        assert int(row["blocked_count"]) == step.blocked_count
        assert float(row["error_rate"]) == step.error_rate
        assert float(row["target_cpu_ingress"]) == step.target_cpu["ingress"]
        assert row["passed"] == ("true" if step.passed else "false")
        assert datetime.fromisoformat(row["started_at"]) == step.started_at
    assert rows[4]["failed_checks"] == "p99<5ms; not blocked"
    assert rows[4]["errors"] == "40"
    assert rows[5]["loadgen_cpu"] == ""


def test_csv_extra_latency_columns_from_rules(manifest: CampaignManifest) -> None:
    for step in manifest.steps:
        step.latency["p95"] = 0.002
    header = next(csv.reader(io.StringIO(render_csv(manifest))))
    assert header[-1] == "latency_p95_s"


# -- report.html -------------------------------------------------------------------------


class _Collector(HTMLParser):
    """Collects tags, attributes and text, and checks that every element is closed."""

    VOID = frozenset({"meta", "link", "br", "img", "input", "hr", "rect", "line", "circle",
            "polyline", "path"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.errors: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        if tag in self.VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:]}")
        else:
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _parse(html: str) -> _Collector:
    parser = _Collector()
    parser.feed(html)
    parser.close()
    assert parser.errors == [] and parser.stack == [], (parser.errors, parser.stack)
    return parser


def test_html_is_well_formed_and_self_contained(
    manifest: CampaignManifest, campaign_dir: Path
) -> None:
    html = render_html(manifest, campaign_dir)
    parsed = _parse(html)
    tags = [tag for tag, _ in parsed.tags]
    assert "script" not in tags
    assert "link" not in tags and "img" not in tags and "iframe" not in tags
    # No URL anywhere but the target's, which appears as text (never as a link).
    assert re.findall(r"https?://", html.replace(URL, "")) == []
    for tag, attrs in parsed.tags:
        for name in ("href", "src"):
            value = attrs.get(name)
            assert value is None or not re.match(r"^[a-z]+:|^//", value), (tag, attrs)
    # Three inline charts: latency, achieved vs offered (with the y = x line), CPU.
    svgs = re.findall(r"<svg\b.*?</svg>", html, flags=re.DOTALL)
    assert len(svgs) == 3
    for svg in svgs:
        ET.fromstring(svg)  # each chart is well-formed XML on its own
    assert "Latency vs offered load" in svgs[0]
    assert 'class="diagonal"' in svgs[1]
    assert "target ingress" in svgs[2] and "load generator" in svgs[2]


def test_html_links_point_to_existing_step_files(
    manifest: CampaignManifest, campaign_dir: Path
) -> None:
    parsed = _parse(render_html(manifest, campaign_dir))
    hrefs = [attrs["href"] for tag, attrs in parsed.tags if tag == "a" and attrs.get("href")]
    assert "steps/001-rps100/result.json" in hrefs
    assert "steps/001-rps100/target/flamegraph.svg" in hrefs
    assert "steps/001-rps100/target/mpstat.json" in hrefs
    # Step 3 had no captured files and step 6 lost its result.json: no dead links.
    assert not any(href.startswith("steps/003-rps300/target/") for href in hrefs)
    assert "steps/006-rps600/result.json" not in hrefs
    for href in hrefs:
        assert (campaign_dir / href).is_file(), href


def test_html_escapes_the_note(manifest: CampaignManifest, campaign_dir: Path) -> None:
    html = render_html(manifest, campaign_dir)
    assert "<script>" not in html
    assert "&lt;script&gt;alert(" in html
    parsed = _parse(html)
    assert NOTE in "".join(parsed.text)


def test_html_facts_and_table(manifest: CampaignManifest, campaign_dir: Path) -> None:
    html = render_html(manifest, campaign_dir)
    text = " ".join("".join(_parse(html).text).split())
    assert "Intel(R) Xeon(R) Platinum 8380 CPU @ 2.30GHz" in text
    assert "unknown (rdmsr not installed (msr-tools))" in text
    assert "No. 4: 400 rps per worker, 800 requested, 790 achieved, p99 4.70 ms" in text
    assert html.count('<tr class="fail">') == 2
    assert "failed: p99&lt;5ms (was 48.0 ms); not blocked (was 12)" in html


# -- write_reports -----------------------------------------------------------------------


def test_write_reports_writes_three_files_atomically(
    manifest: CampaignManifest, campaign_dir: Path
) -> None:
    written = write_reports(campaign_dir, manifest)
    assert [path.name for path in written] == ["report.txt", "results.csv", "report.html"]
    assert (campaign_dir / "report.txt").read_text() == render_text(manifest)
    assert (campaign_dir / "results.csv").read_text() == render_csv(manifest)
    assert (campaign_dir / "report.html").read_text() == render_html(manifest, campaign_dir)
    # No temporary file is left behind.
    assert not [p for p in os.listdir(campaign_dir) if p.startswith(".")]
    # Re-rendering from the saved manifest gives the same reports (what `nhbench report`
    # does).
    saved = CampaignManifest.model_validate_json((campaign_dir / "manifest.json").read_text())
    assert render_text(saved) == render_text(manifest)
