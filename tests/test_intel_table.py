"""The Intel table (``--table intel``) and the four benchmark.sh use cases in scenarios/.

The script's sample summary shows "2C4T" beside "Ingress cpu: 5,22,77,94 (4)" on a 144-CPU,
two-socket, 36-core, two-thread Xeon 8360Y: Core/Thread and the CPU columns describe the
target's watched groups (ingress, nighthawk server, sidecar), counted with the target's
thread siblings; the load generator's own figures keep nhbench's names. These tests fail if
a column shows the load generator's CPUs, ignores the thread siblings or mixes the groups up.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import nhbench
from nhbench.campaign import CampaignManifest, core_thread, load_manifest
from nhbench.hosts import LocalHost, collect_facts
from nhbench.hosts._facts import parse_cpu_cores
from nhbench.report import render_html, render_text
from nhbench.sweep import prepare_sweep
from nhbench.sweep._scenario import load_scenario
from tests.support.cli import nhbench_cli

REPO = Path(__file__).resolve().parent.parent
SCENARIOS = REPO / "scenarios"

INTEL_HEADERS = ["No.", "Core/Thread", "Protocol", "RPS per worker", "Requested RPS",
                 "Achieved RPS", "P90 latency", "P99 latency", "Blocked", "CPU Ingress [%]",
                 "Nighthawk Ingress [%]", "Sidecar Ingress [%]"]

# The script sample's CPU sets (its report header).
INGRESS = [5, 22, 77, 94]
NIGHTHAWK = [79, 2, 19, 81, 88, 1, 91, 89, 21, 3, 78, 25, 85, 4, 90]
SIDECAR = [10, 75, 92, 86, 93, 74, 20, 18, 96, 76, 7, 9, 14, 6, 23]


def _xeon_8360y_siblings() -> str:
    """``grep -H . cpu*/topology/thread_siblings_list`` as Linux lays out the sample's host
    (2 sockets x 36 cores x 2 threads, "Hyper Threading: Enabled"): CPU n and n + 72 share a
    core. Constructed from the sample's lscpu facts, not captured from that machine."""
    return "\n".join(
        f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list:"
        f"{cpu % 72},{cpu % 72 + 72}" for cpu in range(144))


XEON_CORES = parse_cpu_cores(_xeon_8360y_siblings(), "")[0]


# ---- topology --------------------------------------------------------------------------------


def test_thread_siblings_group_the_sample_host_into_72_cores() -> None:
    assert XEON_CORES is not None and len(XEON_CORES) == 72
    assert [5, 77] in XEON_CORES and [22, 94] in XEON_CORES
    assert core_thread(INGRESS, XEON_CORES) == ("2C4T", None)
    # The load generator's --nh-cpu 5-9: five cores, one thread each; not the ingress's.
    assert core_thread([5, 6, 7, 8, 9], XEON_CORES) == ("5C5T", None)
    text, reason = core_thread([5, 200], XEON_CORES)
    assert text is None and reason == "CPU 200 is not one of the target's CPUs"
    assert core_thread(INGRESS, None, "lscpu not installed")[1] == (
        "the target's CPU topology is unknown (lscpu not installed)")


def test_lscpu_parseable_output_is_the_fallback() -> None:
    # This machine's `lscpu -p=CPU,CORE,SOCKET` header, with a two-socket SMT body: core
    # numbers repeat across sockets, so they are told apart by socket.
    lscpu = ("# The following is the parsable format, which can be fed to other\n"
             "# programs. Each different item in every column has an unique ID\n"
             "# starting usually from zero.\n# CPU,Core,Socket\n"
             "0,0,0\n1,1,0\n2,0,1\n3,1,1\n4,0,0\n5,1,0\n6,0,1\n7,1,1\n")
    assert parse_cpu_cores("", lscpu) == ([[0, 4], [1, 5], [2, 6], [3, 7]], None)
    assert parse_cpu_cores("", "")[0] is None


def test_this_machines_facts_carry_its_cores() -> None:
    # Real sysfs: every logical CPU is in exactly one core.
    facts = collect_facts(LocalHost(), role="target")
    assert facts.cpu_cores is not None, facts.unknown.get("cpu_cores")
    cpus = sorted(cpu for core in facts.cpu_cores for cpu in core)
    assert cpus == sorted(set(cpus)) and len(cpus) == facts.cpus


# ---- the four use cases ----------------------------------------------------------------------


def _use_case(name: str, **override: Any) -> Any:
    settings = load_scenario(SCENARIOS / name)
    assert settings["table"] == "intel" and settings["cpus"] == "5-9"  # --nh-cpu 5-9
    settings.update({"cpus": "0", **override})  # the test machine may not have CPUs 5-9
    return prepare_sweep(settings)


def test_use_case_1_http1_one_step() -> None:
    config = _use_case("intel-usecase1-http1.yaml", url="http://192.0.2.10:10000/")
    assert config.plan.steps == [100] and config.plan.duration == 50
    assert config.options.protocol == "http1" and config.options.connections == 100
    assert config.options.request_body_size == 400


def test_use_case_2_http2_streams_and_active_requests() -> None:
    config = _use_case("intel-usecase2-http2.yaml", url="http://192.0.2.10:10000/")
    assert config.plan.steps == [100] and config.plan.duration == 50
    assert config.options.protocol == "http2"
    assert config.options.max_concurrent_streams == 50  # --mcs 50
    assert config.options.max_active_requests == 100  # --mar 100


def test_use_case_3_http1_step_loop() -> None:
    config = _use_case("intel-usecase3-http1-step.yaml", url="http://192.0.2.10:10000/")
    assert config.plan.steps == [100 + 10 * i for i in range(11)]
    assert config.options.connections == 100 and config.options.protocol == "http1"


def test_use_case_4_https_is_http2_over_tls() -> None:
    config = _use_case("intel-usecase4-https.yaml", url="https://192.0.2.10:10000/")
    options = config.options
    assert config.plan.steps == [100] and options.protocol == "http2"
    assert options.uri.startswith("https://")
    assert (options.max_concurrent_streams, options.max_active_requests) == (50, 100)
    assert options.max_pending_requests == 100  # --mpr default
    assert options.max_requests_per_connection == 7  # --mrpc default
    assert options.request_body_size == 400


# ---- end to end ------------------------------------------------------------------------------


def _table(text: str) -> tuple[list[str], list[list[str]]]:
    lines = text.splitlines()
    start = lines.index("Steps") + 2
    rule = lines[start + 1]
    spans = [(m.start(), m.end()) for m in re.finditer(r"-+", rule)]
    rows = []
    for line in lines[start + 2:]:
        if not line[:3].strip().isdigit():
            break
        rows.append([line[a:b + 2].strip() if i < len(spans) - 1 else line[a:].strip()
                     for i, (a, b) in enumerate(spans)])
    headers = [lines[start][a:b].strip() for a, b in spans]
    return headers, rows


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Use case 1 against nhbench's own test server, at a small rate, every group watched
    (this machine's CPUs: ingress is both, 2C2T; the one worker is pinned to CPU 0)."""
    out = tmp_path_factory.mktemp("intel") / "campaign"
    done = nhbench_cli(
        "sweep", "--scenario", str(SCENARIOS / "intel-usecase1-http1.yaml"), "embedded",
        "--rps", "20", "--duration", "1s", "--connections", "2", "--cpus", "0",
        "--watch-cpus", "ingress=0,1", "--watch-cpus", "nighthawk=1",
        "--watch-cpus", "sidecar=0", "--out", str(out), timeout=180)
    assert done.returncode == 0, done.stderr
    return out


def test_use_case_1_runs_and_its_table_is_the_scripts(campaign: Path) -> None:
    manifest = load_manifest(campaign)
    assert manifest.settings["table"] == "intel" and len(manifest.steps) == 1
    step = manifest.steps[0]
    assert step.http_2xx > 0 and step.workers == 1
    headers, rows = _table((campaign / "report.txt").read_text())
    assert headers[:12] == INTEL_HEADERS
    assert "Workers" in headers[12:] and "Loadgen CPU %" in headers[12:]
    cell = dict(zip(headers, rows[0], strict=True))
    # The ingress group (CPUs 0 and 1, two cores here), not the one worker on CPU 0.
    assert cell["Core/Thread"] == "2C2T"
    assert cell["Workers"] == "1 @0"
    assert cell["Protocol"] == "http1" and cell["Blocked"] in ("false", "true")
    for group, header in (("ingress", "CPU Ingress [%]"), ("nighthawk", "Nighthawk Ingress [%]"),
                          ("sidecar", "Sidecar Ingress [%]")):
        value = step.target_cpu[group]
        assert value is not None and cell[header] == f"{value:.1f}"
    assert "CPUs:     ingress: 0-1 (2 CPUs, 2C2T)" in (campaign / "report.txt").read_text()
    html = (campaign / "report.html").read_text()
    assert "<th>Core/Thread</th><th>Protocol</th>" in html


def test_use_case_4_runs_https_against_the_tls_server(tls_origin: nhbench.TestServer,
                                                     tmp_path: Path) -> None:
    out = tmp_path / "uc4"
    done = nhbench_cli(
        "sweep", "--scenario", str(SCENARIOS / "intel-usecase4-https.yaml"), tls_origin.url,
        "--rps", "30", "--duration", "1s", "--cpus", "0", "--no-mpstat", "--out", str(out),
        timeout=180)
    assert done.returncode == 0, done.stderr
    campaign = nhbench.load_campaign(out)
    step = campaign.steps[0]
    assert step.http_2xx > 0 and step.error_count == 0
    cell = dict(zip(*(lambda h, r: (h, r[0]))(*_table((out / "report.txt").read_text())),
                    strict=True))
    assert cell["Protocol"] == "https"  # HTTP/2 over TLS, the script's word
    # --mrpc 7: a connection carries 7 requests at most, so at least requests / 7 of them.
    assert campaign.result(1).counters["upstream_cx_total"] >= step.requests / 7
    assert "Core/Thread: no watched group named ingress" in (out / "report.txt").read_text()


def _sample_lab(campaign: Path, *, watch: dict[str, list[int]]) -> CampaignManifest:
    """The campaign's manifest as if it had run in the script's lab: the sample host's
    topology and CPU sets, distinct loads per group and on the load generator."""
    data = json.loads((campaign / "manifest.json").read_text())
    data["facts"]["target"]["cpu_cores"] = XEON_CORES
    data["target_capture"]["watch_cpus"] = watch
    data["options"]["cpus"] = [5, 6, 7, 8, 9]
    loads = {"ingress": 11.0, "nighthawk": 22.0, "sidecar": 33.0}
    for step in data["steps"]:
        step["target_capture"] = None
        step["watch_cpus"] = watch  # what each step watched, as a run there records it
        step["target_cpu"] = {name: loads[name] for name in watch}
        step["loadgen_cpu"], step["nhbench_cpu"] = 44.0, 55.0
    return CampaignManifest.model_validate(data)


def test_each_intel_column_describes_its_own_group(campaign: Path) -> None:
    manifest = _sample_lab(campaign, watch={"ingress": INGRESS, "nighthawk": NIGHTHAWK,
                                            "sidecar": SIDECAR})
    text = render_text(manifest)
    headers, rows = _table(text)
    cell = dict(zip(headers, rows[0], strict=True))
    assert cell["Core/Thread"] == "2C4T"  # the script's sample: Ingress cpu 5,22,77,94 (4)
    assert (cell["CPU Ingress [%]"], cell["Nighthawk Ingress [%]"],
            cell["Sidecar Ingress [%]"]) == ("11.0", "22.0", "33.0")
    assert (cell["Loadgen CPU %"], cell["nhbench CPU %"]) == ("44.0", "55.0")
    assert cell["Workers"] == "1 @5-9"
    assert "ingress: 5,22,77,94 (4 CPUs, 2C4T)" in text
    assert "<td>2C4T</td>" in render_html(manifest, campaign)


def test_the_default_layout_keeps_nhbench_names(campaign: Path) -> None:
    manifest = _sample_lab(campaign, watch={"ingress": INGRESS})
    manifest.settings.pop("table")
    headers, rows = _table(render_text(manifest))
    assert "Core/Thread" not in headers and "CPU Ingress [%]" not in headers
    cell = dict(zip(headers, rows[0], strict=True))
    assert (cell["Workers"], cell["ingress CPU %"], cell["Loadgen CPU %"]) == (
        "1 @5-9", "11.0", "44.0")


def test_a_group_not_watched_is_said_under_the_table(campaign: Path) -> None:
    manifest = _sample_lab(campaign, watch={"ingress": INGRESS})
    text = render_text(manifest)
    headers, rows = _table(text)
    cell = dict(zip(headers, rows[0], strict=True))
    assert cell["Sidecar Ingress [%]"] == "-" and cell["CPU Ingress [%]"] == "11.0"
    assert ("Sidecar Ingress [%]: no watched group named sidecar (--watch-cpus sidecar=LIST)"
            in text)
    manifest.facts["target"].cpu_cores = None
    manifest.facts["target"].unknown["cpu_cores"] = "lscpu not installed"
    text = render_text(manifest)
    assert _table(text)[1][0][1] == "-"
    assert "Core/Thread: the target's CPU topology is unknown (lscpu not installed)" in text


def test_report_table_option(campaign: Path, tmp_path: Path) -> None:
    done = nhbench_cli("report", str(campaign), "--table", "nhbench")
    assert done.returncode == 0, done.stderr
    headers, _ = _table(done.stdout)
    assert headers[1] == "Workers" and "CPU Ingress [%]" not in headers
    # The manifest keeps the campaign's own layout.
    assert load_manifest(campaign).settings["table"] == "intel"
    bad = nhbench_cli("report", str(campaign), "--table", "fortio")
    assert bad.returncode == 2 and "invalid choice: 'fortio'" in bad.stderr
    result = tmp_path / "r.json"
    result.write_text((campaign / manifest_step_dir(campaign) / "result.json").read_text())
    on_result = nhbench_cli("report", str(result), "--table", "intel")
    assert on_result.returncode == 2
    assert on_result.stderr.strip().endswith("--table: only for a campaign directory (a result "
                                             "has no step table)")
    sweep = nhbench_cli("sweep", "embedded", "--rps", "1", "--table", "wide")
    assert sweep.returncode == 2 and "--table" in sweep.stderr and "nhbench or intel" in sweep.stderr


def manifest_step_dir(campaign: Path) -> str:
    return load_manifest(campaign).steps[0].directory
