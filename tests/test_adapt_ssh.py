"""``nhbench adapt --ssh``: the search's steps get the sweep's captures and facts over SSH,
against the real OpenSSH server of the `sshd` fixture (tests/support/sshd_fixture.py) on
127.0.0.1, as tests/test_sweep_ssh.py checks for a sweep.
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


@pytest.fixture
def server() -> Iterator[nhbench.TestServer]:
    with nhbench.TestServer(cpus=[SERVER_CPU]) as test_server:
        yield test_server


def test_adapt_over_ssh_captures_every_step(sshd: Any, server: nhbench.TestServer,
                                            tmp_path: Path) -> None:
    out = tmp_path / "c"
    child = dict(os.environ)
    child["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_PARENT,
                                                        child.get("PYTHONPATH")]))
    child.pop("SSH_AUTH_SOCK", None)
    # One search step (min = max) and one confirmation: two captured steps.
    proc = subprocess.run(
        [sys.executable, "-m", "nhbench", "adapt", server.url, "--slo", "error_rate<1%",
         "--min-rps", "50", "--max-rps", "50", "--confirm", "1", "--duration", "1.2s",
         "--connections", "2", "--cpus", CLIENT_CPU, "--out", str(out),
         "--ssh", sshd.address, "--ssh-key", str(sshd.user_key),
         "--ssh-known-hosts", str(sshd.known_hosts), "--watch-cpus", f"server={SERVER_CPU}"],
        check=False, capture_output=True, text=True, timeout=120, env=child,
        stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    campaign = load_campaign(out)
    manifest = campaign.manifest
    assert manifest.kind == "adapt" and manifest.status == "completed"
    assert manifest.ssh == f"{sshd.user}@127.0.0.1:{sshd.port}"
    assert manifest.facts["target"].host == manifest.ssh
    assert manifest.adapt is not None and manifest.adapt.answer_rps == 50
    assert len(campaign.steps) == 2
    for step in campaign.steps:
        capture = step.target_capture
        assert capture is not None and capture.host == manifest.ssh
        if "mpstat" not in capture.skipped:
            assert capture.mpstat_file and (out / step.directory / capture.mpstat_file).is_file()
