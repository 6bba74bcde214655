"""Sweeps whose target host is reached over SSH, against the real OpenSSH server of the
`sshd` fixture (tests/support/sshd_fixture.py) on 127.0.0.1: captures, facts and reports end to end,
a password that never reaches a file, and refusals before anything is written.

The "target host" is this machine seen through sshd, and the target service is the embedded
test server, pinned to another CPU than the load generator's worker.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import nhbench
from nhbench.campaign import load_campaign

PACKAGE_PARENT = str(Path(nhbench.__file__).resolve().parent.parent)
SERVER_CPU = max(os.sched_getaffinity(0))
CLIENT_CPU = str(min(os.sched_getaffinity(0)))


def cli(*args: str, env: dict[str, str] | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess[str]:
    child = dict(os.environ)
    child["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_PARENT,
                                                        child.get("PYTHONPATH")]))
    # No agent: the test decides which credentials are offered.
    child.pop("SSH_AUTH_SOCK", None)
    child.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "nhbench", *args], check=False, capture_output=True, text=True,
        timeout=timeout, env=child, stdin=subprocess.DEVNULL,
    )


def reports_available() -> bool:
    try:
        from nhbench.report import write_reports  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture
def server() -> Iterator[nhbench.TestServer]:
    with nhbench.TestServer(cpus=[SERVER_CPU]) as test_server:
        yield test_server


def test_sweep_over_ssh_end_to_end(sshd: Any, server: nhbench.TestServer,
                                   tmp_path: Path) -> None:
    out = tmp_path / "c"
    proc = cli("sweep", server.url, "--steps", "50,100", "--duration", "1.2s",
               "--connections", "2", "--cpus", CLIENT_CPU, "--out", str(out),
               "--ssh", sshd.address, "--ssh-key", str(sshd.user_key),
               "--ssh-known-hosts", str(sshd.known_hosts),
               "--watch-cpus", f"server={SERVER_CPU}", "--perf", "--perf-cpus",
               str(SERVER_CPU), "--note", "over ssh")
    assert proc.returncode == 0, proc.stderr
    campaign = load_campaign(out)
    manifest = campaign.manifest
    assert manifest.status == "completed" and len(campaign.steps) == 2
    assert manifest.ssh == f"{sshd.user}@127.0.0.1:{sshd.port}"
    assert manifest.facts["target"].host == manifest.ssh
    assert manifest.facts["loadgen"].host == "local"
    assert manifest.facts["target"].kernel  # read over SSH
    for step in campaign.steps:
        capture = step.target_capture
        assert capture is not None and capture.host == manifest.ssh
        if "mpstat" not in capture.skipped:
            assert capture.mpstat_file and (out / step.directory / capture.mpstat_file).is_file()
            assert step.target_cpu.get("server") is not None
        if "perf" not in capture.skipped and capture.flamegraph_file:
            svg = (out / step.directory / capture.flamegraph_file).read_text()
            assert svg.lstrip().startswith(("<?xml", "<svg"))
        assert step.passed and step.http_2xx > 0
    if reports_available():
        assert (out / "report.html").is_file() and (out / "report.txt").is_file()


def test_password_never_reaches_a_file(sshd: Any, server: nhbench.TestServer,
                                       tmp_path: Path) -> None:
    if sshd.password_login is None:
        pytest.skip(sshd.password_skip_reason)
    user, password = sshd.password_login
    out = tmp_path / "c"
    proc = cli("sweep", server.url, "--steps", "40", "--duration", "0.5s",
               "--connections", "2", "--cpus", CLIENT_CPU, "--out", str(out),
               "--ssh", f"{user}@127.0.0.1:{sshd.port}",
               "--ssh-known-hosts", str(sshd.known_hosts),
               "--ssh-password-env", "NHB_TEST_SSH_PASSWORD",
               env={"NHB_TEST_SSH_PASSWORD": password})
    assert proc.returncode == 0, proc.stderr
    campaign = load_campaign(out)
    assert campaign.manifest.ssh == f"{user}@127.0.0.1:{sshd.port}"
    assert campaign.manifest.settings["ssh_password_env"] == "NHB_TEST_SSH_PASSWORD"
    files = [path for path in out.rglob("*") if path.is_file()]
    assert any(path.name == "manifest.json" for path in files)
    for path in files:
        assert password.encode() not in path.read_bytes(), path
    assert password not in proc.stdout and password not in proc.stderr


def test_unknown_host_key_is_refused_before_anything_is_written(
    sshd: Any, server: nhbench.TestServer, tmp_path: Path
) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    out = tmp_path / "c"
    proc = cli("sweep", server.url, "--steps", "40", "--duration", "0.5s",
               "--out", str(out), "--ssh", sshd.address, "--ssh-key", str(sshd.user_key),
               "--ssh-known-hosts", str(empty))
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("nhbench: error: "), proc.stderr
    assert not out.exists()
    assert empty.read_text() == ""
