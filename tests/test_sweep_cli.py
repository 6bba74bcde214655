"""``nhbench sweep`` and ``nhbench report`` as subprocesses: bad input, SIGKILL and resume,
Ctrl-C, incompatible resumes and campaign files.

The sweep under test runs in a child process (``python -m nhbench``) against a test server
in this process, pinned to another CPU.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import nhbench
from nhbench.campaign import load_campaign

PACKAGE_PARENT = str(Path(nhbench.__file__).resolve().parent.parent)
REPO = Path(__file__).resolve().parent.parent
SERVER_CPU = max(os.sched_getaffinity(0))
CLIENT_CPU = str(min(os.sched_getaffinity(0)))


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_PARENT, env.get("PYTHONPATH")]))
    return env


def cli(*args: str, cwd: Path | None = None,
        timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nhbench", *args], check=False, capture_output=True, text=True,
        timeout=timeout, env=_env(), stdin=subprocess.DEVNULL, cwd=cwd,
    )


def start_cli(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "nhbench", *args], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env=_env(), stdin=subprocess.DEVNULL,
    )


def wait_for_steps(directory: Path, count: int, proc: subprocess.Popen[str],
                   timeout: float = 30) -> int:
    """Poll the manifest (written atomically, so always whole) until it lists `count`
    steps; return how many it lists then."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            steps = len(json.loads((directory / "manifest.json").read_text())["steps"])
        except FileNotFoundError:
            steps = 0
        if steps >= count:
            return steps
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    raise AssertionError(f"no {count} steps in {directory} within {timeout} s")


@pytest.fixture
def server() -> Iterator[nhbench.TestServer]:
    with nhbench.TestServer(cpus=[SERVER_CPU]) as test_server:
        yield test_server


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--rps", "10", "--stop-on-slo", "p99<5"], "a latency needs a unit"),
        (["--rps", "10", "--stop-on-slo", "p99~5ms"], "expected METRIC OP VALUE"),
        (["--rps", "200", "--max-rps", "100"], "--max-rps: must be >= --rps"),
        (["--rps", "10", "--connections", "0"], "--connections"),
        (["--rps", "10", "--output", "x.json"], "use --out DIR"),
        (["--rps", "10", "--no-duration"], "needs a --duration"),
        (["--rps", "10", "--ssh-key", "k"], "only meaningful with --ssh"),
        (["--rps", "10", "--extend", "--step-rps", "5"], "needs a stop rule"),
        (["--rps", "10", "--watch-cpus", "ingress"], "NAME=LIST"),
        (["--rps", "10", "--bogus"], "unrecognized arguments"),
        (["--max-rps", "10"], "missing the load"),
        (["--rps", "10", "--ssh", "u@h:99999"], "--ssh"),
        (["--rps", "10", "--ssh", "u@h", "--ssh-password-env", "NHB_TEST_UNSET"],
         "NHB_TEST_UNSET"),
    ],
)
def test_bad_input_exits_2_with_one_line_and_creates_nothing(
    tmp_path: Path, args: list[str], needle: str
) -> None:
    proc = cli("sweep", "http://127.0.0.1:9/", *args, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("nhbench: error: "), proc.stderr
    assert needle in lines[0]
    assert proc.stdout == ""
    # Not even the default campaigns/ directory.
    assert list(tmp_path.iterdir()) == []


def test_bad_input_without_url_or_with_used_out(tmp_path: Path) -> None:
    proc = cli("sweep", "--rps", "5", cwd=tmp_path)
    assert proc.returncode == 2 and "missing URL" in proc.stderr
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "notes.txt").write_text("mine")
    proc = cli("sweep", "http://127.0.0.1:9/", "--rps", "5", "--out", "used", cwd=tmp_path)
    assert proc.returncode == 2 and "not empty and is not a campaign" in proc.stderr
    assert [p.name for p in (tmp_path / "used").iterdir()] == ["notes.txt"]
    proc = cli("report", str(tmp_path / "used"))
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1
    assert "not a campaign directory" in proc.stderr
    proc = cli("sweep", "--resume", str(tmp_path / "used"))
    assert proc.returncode == 2 and "not a campaign directory" in proc.stderr


def test_killed_sweep_resumes_with_every_step_once(server: nhbench.TestServer,
                                                   tmp_path: Path) -> None:
    out = tmp_path / "c"
    args = ["sweep", server.url, "--rps", "20", "--max-rps", "80", "--step-rps", "20",
            "--duration", "0.5s", "--connections", "2", "--cpus", CLIENT_CPU,
            "--no-mpstat", "--out", str(out)]
    proc = start_cli(*args)
    try:
        done = wait_for_steps(out, 1, proc)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.communicate()
    assert done < 4
    killed = json.loads((out / "manifest.json").read_text())
    assert killed["status"] == "running"  # nobody got to write anything else
    finished_before = len(killed["steps"])

    # Resuming with different run options is refused, and changes nothing.
    refused = cli("sweep", "--resume", str(out), "--connections", "3")
    assert refused.returncode == 2, refused.stderr
    assert "different run options" in refused.stderr and "connections" in refused.stderr
    refused = cli("sweep", "--resume", str(out), "--duration", "1s")
    assert refused.returncode == 2 and "different plan" in refused.stderr
    assert json.loads((out / "manifest.json").read_text()) == killed

    resumed = cli("sweep", "--resume", str(out))
    assert resumed.returncode == 0, resumed.stderr
    assert f"{finished_before} step(s) done" in resumed.stderr
    campaign = load_campaign(out)
    assert campaign.manifest.status == "completed"
    assert [s.index for s in campaign.steps] == [1, 2, 3, 4]
    assert [s.rps_per_worker for s in campaign.steps] == [20, 40, 60, 80]
    assert sorted(p.name for p in (out / "steps").iterdir()) == [
        "001-rps20", "002-rps40", "003-rps60", "004-rps80"]
    for step in campaign.steps:
        result = campaign.result(step.index)  # whole and valid JSON
        assert result.counters["benchmark.http_2xx"] == step.http_2xx > 0
        assert result.options.rps == step.rps_per_worker
    assert not list(out.rglob("*.tmp"))

    # A finished campaign resumed with a longer range runs only the new steps.
    extended = cli("sweep", "--resume", str(out), "--rps", "20", "--max-rps", "100",
                   "--step-rps", "20")
    assert extended.returncode == 0, extended.stderr
    assert [s.rps_per_worker for s in load_campaign(out).steps] == [20, 40, 60, 80, 100]


def test_ctrl_c_keeps_finished_steps(server: nhbench.TestServer, tmp_path: Path) -> None:
    out = tmp_path / "c"
    proc = start_cli("sweep", server.url, "--steps", "20,30,40,50,60", "--duration", "1s",
                     "--connections", "2", "--cpus", CLIENT_CPU, "--no-mpstat",
                     "--out", str(out))
    try:
        wait_for_steps(out, 1, proc)
        time.sleep(0.3)  # into the next step
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    campaign = load_campaign(out)
    assert campaign.manifest.status == "interrupted"
    steps = campaign.steps
    assert 1 <= len(steps) < 5
    # Only finished steps have a directory; each has its complete result.
    assert sorted(p.name for p in (out / "steps").iterdir()) == [
        Path(s.directory).name for s in steps]
    for step in steps:
        assert not campaign.result(step.index).interrupted
    # And the campaign goes on from there.
    resumed = cli("sweep", "--resume", str(out), "--duration", "1s")
    assert resumed.returncode == 0, resumed.stderr
    assert [s.index for s in load_campaign(out).steps] == [1, 2, 3, 4, 5]


def test_scenario_file_with_overrides_and_report(tmp_path: Path) -> None:
    # The local demo campaign file, shortened from the command line (flags override it).
    out = tmp_path / "demo"
    proc = cli("sweep", "--scenario", str(REPO / "scenarios" / "local-demo.yaml"),
               "--steps", "50,100", "--duration", "0.5s", "--cooldown", "0", "--cpus",
               CLIENT_CPU, "--out", str(out), "--no-mpstat", "--label", "cli-label")
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("nhbench: step ")]
    campaign = load_campaign(out)
    manifest = campaign.manifest
    # The file's p99<50ms rule is a timing threshold: on a loaded machine it may fire, and
    # then the sweep stops after that step. Either way each step printed exactly one line.
    assert len(lines) == len(campaign.steps), proc.stderr
    assert manifest.status in ("completed", "stopped")
    assert [s.rps_per_worker for s in campaign.steps] == [50, 100][: len(campaign.steps)]
    assert manifest.plan.stop_on_slo == ["p99<50ms", "error_rate<0.1%"]  # from the file
    assert manifest.label == ["cli-label"]  # the flag wins over the file
    assert manifest.note == "local demo against the embedded test server"
    assert manifest.command[:3] == ["nhbench", "sweep", "--scenario"]
    report = cli("report", str(out))
    try:
        from nhbench.report import write_reports  # noqa: F401
    except ImportError:
        assert report.returncode == 1 and "not available" in report.stderr
    else:
        assert report.returncode == 0, report.stderr
        assert (out / "report.txt").is_file()
