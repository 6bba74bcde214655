"""A real Ray cluster of several nodes on this machine, for tests/test_distributed*.py and
benchmarks/ray_step_overhead.py (standard library only, like nginx_origin.py: the benchmark
scripts import it as ``ray_cluster``, the tests as ``benchmarks.ray_cluster``).

Each node is its own ``ray start`` (a GCS and raylet for the head, a raylet for the others),
started in its own session and process group, with its own temp dir, a small --num-cpus and
a resource naming it (``nhb_node_0``...), so the tests can tell the nodes apart, and, when
asked (`nofile`), a hard RLIMIT_NOFILE of its own, which its daemons and its actors inherit
(a node that cannot hold a run's connections, on one machine). Teardown
ends exactly those process groups (SIGTERM, then SIGKILL for what is left): never ``ray
stop``, which would end every Ray process on the machine, other people's included.
"""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["LocalRayCluster"]

_RAY = str(Path(sys.executable).with_name("ray"))
_START_TIMEOUT = 90.0
_ADDRESS = re.compile(r"ray start --address='([^']+)'")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stat(pid: str) -> list[str] | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The fields after the command name (which may hold spaces) start after ")":
    # state, ppid, pgid, ...
    return stat.rsplit(")", 1)[1].split()


def _group_members(pgid: int) -> list[int]:
    members = []
    for entry in os.listdir("/proc"):
        fields = _stat(entry) if entry.isdigit() else None
        if fields is not None and fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(entry))
    return members


def _children(parents: set[int]) -> list[int]:
    # Ray's worker processes (actors among them) are the raylet's children but each leads
    # its own process group.
    found = []
    for entry in os.listdir("/proc"):
        fields = _stat(entry) if entry.isdigit() else None
        if fields is not None and fields[0] != "Z" and int(fields[1]) in parents:
            found.append(int(entry))
    return found


def _nofile(limit: int) -> Callable[[], None]:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
    return apply


@dataclass
class LocalRayCluster:
    """``nodes`` Ray nodes on this machine; `address` is the head's GCS ``HOST:PORT``."""

    root: Path
    nodes: int = 2
    address: str = ""
    #: Node index -> the RLIMIT_NOFILE (soft and hard) its `ray start` is given.
    nofile: dict[int, int] = field(default_factory=dict)
    _groups: list[int] = field(default_factory=list)

    def start(self) -> LocalRayCluster:
        for i in range(self.nodes):
            temp = self.root / f"n{i}"
            temp.mkdir(parents=True, exist_ok=True)
            args = [_RAY, "start", "--num-cpus=1", f"--resources={json.dumps({f'nhb_node_{i}': 1})}",
                    f"--temp-dir={temp}", "--disable-usage-stats",
                    f"--dashboard-agent-listen-port={_free_port()}"]
            if i == 0:
                args += ["--head", "--port=0", "--include-dashboard=false",
                         f"--ray-client-server-port={_free_port()}"]
            else:
                args += [f"--address={self.address}"]
            limit = self.nofile.get(i)
            proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, start_new_session=True,
                                    stdin=subprocess.DEVNULL,
                                    preexec_fn=None if limit is None else _nofile(limit))
            # `ray start` leaves its daemons in its process group and exits.
            self._groups.append(proc.pid)
            try:
                out, _ = proc.communicate(timeout=_START_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, _ = proc.communicate()
            if proc.returncode != 0:
                self.stop()
                raise RuntimeError(f"ray start (node {i}) failed:\n{out[-3000:]}")
            if i == 0:
                match = _ADDRESS.search(out)
                if match is None:
                    self.stop()
                    raise RuntimeError(f"no address in ray start's output:\n{out[-3000:]}")
                self.address = match.group(1)
        self._wait_for_nodes()
        return self

    def _wait_for_nodes(self) -> None:
        # The second raylet registers with the GCS a moment after its `ray start` returns.
        code = ("import ray, sys; ray.init(address=sys.argv[1], logging_level='ERROR', "
                "log_to_driver=False); print(sum(1 for n in ray.nodes() if n['Alive']))")
        deadline = time.monotonic() + _START_TIMEOUT
        while True:
            proc = subprocess.run([sys.executable, "-c", code, self.address], check=False,
                                  capture_output=True, text=True, timeout=_START_TIMEOUT)
            if proc.returncode == 0 and proc.stdout.strip() == str(self.nodes):
                return
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the Ray cluster did not reach {self.nodes} nodes: "
                                   f"{proc.stdout[-500:]} {proc.stderr[-2000:]}")
            time.sleep(0.5)

    def node_ids(self) -> dict[int, str]:
        """Node index -> Ray's node id (by the resource naming each node)."""
        code = ("import json, ray, sys; ray.init(address=sys.argv[1], logging_level='ERROR', "
                "log_to_driver=False); print(json.dumps({n['NodeID']: sorted(n['Resources']) "
                "for n in ray.nodes() if n['Alive']}))")
        proc = subprocess.run([sys.executable, "-c", code, self.address], check=True,
                              capture_output=True, text=True, timeout=_START_TIMEOUT)
        found = {}
        for node_id, names in json.loads(proc.stdout.strip().splitlines()[-1]).items():
            for name in names:
                if name.startswith("nhb_node_"):
                    found[int(name.removeprefix("nhb_node_"))] = node_id
        return found

    def processes(self, title: str) -> list[int]:
        """This cluster's processes whose command line starts with `title` (an actor's
        worker process calls itself ``ray::ClassName.method``)."""
        members = {pid for pgid in self._groups for pid in _group_members(pgid)}
        found = []
        for pid in sorted(members | set(_children(members))):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if cmdline.startswith(title.encode()):
                found.append(pid)
        return found

    def stop(self) -> None:
        members = {pid for pgid in self._groups for pid in _group_members(pgid)}
        workers = _children(members) if members else []
        for sig, grace in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 5.0)):
            for pgid in self._groups:
                try:
                    os.killpg(pgid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + grace
            while any(_group_members(g) for g in self._groups) and time.monotonic() < deadline:
                time.sleep(0.1)
        # The raylets' worker processes end with their raylet; any that did not, now.
        for pid in workers:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self._groups.clear()

    def __enter__(self) -> LocalRayCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
