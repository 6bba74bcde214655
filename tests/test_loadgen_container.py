"""``--loadgen docker://CONTAINER`` with a real container runtime: Debian's podman.

The placement runs ``docker exec -i CONTAINER PYTHON -m nhbench.distributed._agent``. No Docker
daemon runs here, so ``docker`` on the run's PATH is a two-line shim that runs podman, whose
``exec`` has docker's grammar, with the same arguments. Two things of this host need working
around, and the shim and the fixture do it for podman only, in mount namespaces of their
own: the host mounts cgroup v1 controllers beside a cgroup v2 tree (crun refuses such
"hybrid" hosts, so the v2 mount is hidden from podman), and its sandbox refuses to raise
RLIMIT_NPROC (so the container's limits are set low). The container's root is this host's
root bind-mounted (no image registry is reachable), its network the host's (the test server
listens on loopback), its processes its own: the agent runs inside the container's PID and
mount namespaces, as in a lab's container. Skipped with the reason when podman is missing or
cannot start a container here.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli import PACKAGE_PARENT, nhbench_cli
from support.podman import PODMAN
from support.podman import podman as _podman

import nhbench

pytestmark = pytest.mark.serial

CPU = str(min(os.sched_getaffinity(0)))
SHIM = f'#!/bin/sh\nexec {PODMAN} "$@"\n'


@pytest.fixture(scope="module")
def container(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """(the container's name, a directory holding the ``docker`` shim)."""
    if shutil.which("podman") is None or shutil.which("unshare") is None:
        pytest.skip("podman is not installed (./dev installs it)")
    name = f"nhbench-lg-{uuid.uuid4().hex[:8]}"
    root = tmp_path_factory.mktemp("rootfs")
    start = (f"umount /sys/fs/cgroup/unified 2>/dev/null; mount --rbind / {shlex.quote(str(root))}"
             f" && exec podman --cgroup-manager=cgroupfs run -d --name {name} --network host"
             " --cgroups=disabled --mount type=bind,src=/sys,dst=/sys"
             " --ulimit nofile=1024:1024 --ulimit nproc=1024:1024"
             f" --rootfs {shlex.quote(str(root))} sleep 600")
    proc = subprocess.run(["unshare", "-m", "sh", "-c", start], capture_output=True, text=True,
                          timeout=120, check=False)
    if proc.returncode != 0:
        pytest.skip(f"podman cannot start a container here: {proc.stderr.strip()[-300:]}")
    shim = tmp_path_factory.mktemp("shim")
    (shim / "docker").write_text(SHIM)
    (shim / "docker").chmod(0o755)
    try:
        yield name, shim
    finally:
        _podman("rm", "-f", "-t", "0", name)


@pytest.fixture(scope="module")
def server() -> Iterator[nhbench.TestServer]:
    with nhbench.TestServer(subprocess=True, admin="127.0.0.1:0") as test_server:
        yield test_server


def _args(name: str, wrapper: Path | None = None) -> list[str]:
    command = ["env", f"PYTHONPATH={PACKAGE_PARENT}", sys.executable]
    if wrapper is not None:
        command = ["sh", str(wrapper), *command]
    return ["--loadgen", f"docker://{name}", "--loadgen-python", shlex.join(command),
            "--cpus", CPU]


def _env(shim: Path) -> dict[str, str]:
    return {"PATH": f"{shim}:{os.environ['PATH']}"}


def test_the_agent_runs_in_the_container_and_merges_exactly(
        container: tuple[str, Path], server: nhbench.TestServer, tmp_path: Path) -> None:
    name, shim = container
    # The agent writes down its PID namespace (the container's root is this host's, so the
    # file is seen here too), then becomes the agent.
    seen = tmp_path / "pidns"
    wrapper = tmp_path / "wrap.sh"
    wrapper.write_text(f'readlink /proc/self/ns/pid > {shlex.quote(str(seen))}\nexec "$@"\n')
    before = int(server.stats()["requests"])
    proc = nhbench_cli("run", server.url, *_args(name, wrapper), "--rps", "50",
                       "--duration", "1s", "--output-format", "json", env=_env(shim))
    served = int(server.stats()["requests"]) - before
    assert proc.returncode == 0, proc.stderr
    (tmp_path / "out.json").write_text(proc.stdout)
    result = nhbench.load_result(str(tmp_path / "out.json"))
    assert result.counters["benchmark.http_2xx"] == result.counters["upstream_rq_total"]
    assert result.counters["upstream_rq_total"] == served > 0
    assert [h.address for h in result.hosts] == [f"docker://{name}"]
    # The agent was a process of the container: its PID namespace is not this one's.
    assert seen.read_text().strip() != os.readlink("/proc/self/ns/pid")
    assert seen.read_text().startswith("pid:[")


def test_a_container_removed_mid_run_fails_the_run_naming_it(
        container: tuple[str, Path], server: nhbench.TestServer) -> None:
    name, shim = container
    # A second container of its own, removed while the run goes on.
    doomed = f"{name}-doomed"
    root = Path(shim).parent / f"{doomed}-root"
    root.mkdir()
    start = (f"umount /sys/fs/cgroup/unified 2>/dev/null; mount --rbind / {shlex.quote(str(root))}"
             f" && exec podman --cgroup-manager=cgroupfs run -d --name {doomed} --network host"
             " --cgroups=disabled --mount type=bind,src=/sys,dst=/sys"
             " --ulimit nofile=1024:1024 --ulimit nproc=1024:1024"
             f" --rootfs {shlex.quote(str(root))} sleep 600")
    made = subprocess.run(["unshare", "-m", "sh", "-c", start], capture_output=True, text=True,
                          timeout=120, check=False)
    assert made.returncode == 0, made.stderr
    removed: list[bool] = []

    def remove() -> None:
        time.sleep(4.0)  # the agent started and its load runs by now
        removed.append(_podman("rm", "-f", "-t", "0", doomed).returncode == 0)

    remover = threading.Thread(target=remove)
    remover.start()
    try:
        proc = nhbench_cli("run", server.url, *_args(doomed), "--rps", "20", "--duration", "10s",
                           env=_env(shim))
    finally:
        remover.join()
        _podman("rm", "-f", "-t", "0", doomed)
    assert removed == [True]
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "was lost during the run" in lines[0] and f"docker://{doomed}" in lines[0]
