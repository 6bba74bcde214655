"""The list's reading of many new files in more than one process (`nhbench.browse._pool`).

A walk with reading processes gives the rows, the refusals and the on-disk index the walk
in one process gives; a reading process killed while it reads leaves the walk to read its
files itself, with a note, never fewer rows; and ``nhbench browse`` stopped by SIGINT while
its processes read leaves none of them behind. The processes are real (``spawn``), as are
the files (real runs, broken ones). The thresholds are lowered so that few files take the
path, and the count of readers (`_pool.readers`: by the idle CPUs of the load average) is
set to one, since the load of the machine running the tests is not the test's to choose.
"""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

import nhbench
from nhbench.browse import Catalogue, _pool, _scan

pytestmark = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2,
                                reason="reading processes are used only with 2 CPUs or more")
CPU = min(os.sched_getaffinity(0))


@pytest.fixture(scope="module")
def texts() -> dict[str, str]:
    """Real results (one worker; two with intervals) and files the list refuses."""
    with nhbench.TestServer(cpus=[max(os.sched_getaffinity(0))]) as server:
        one = nhbench.run(server.url, rps=200, duration="0.3s", connections=1, cpus=[CPU],
                          label=["one"]).render("json")
        two = nhbench.run(server.url, rps=100, duration="0.5s", connections=2, concurrency=2,
                          stats_interval="250ms", label=["two"]).render("json")
    broken = json.loads(two)
    next(e for e in broken["results"] if e["name"] == "global")["statistics"].insert(1, 5)
    bad_uri = json.loads(one)
    bad_uri["options"]["uri"] = "ftp://example.test/"
    return {"one": one, "two": two, "not-json": "{", "statistic": json.dumps(broken),
            "bad-uri": json.dumps(bad_uri), "fortio": (Path(__file__).parent / "data" / "fortio"
                                                       / "fortio-1.66.5-load.json").read_text()}


def _write(root: Path, texts: dict[str, str], count: int) -> None:
    names = sorted(texts)
    for i in range(count):
        name = names[i % len(names)]
        (root / f"d{i % 3}").mkdir(parents=True, exist_ok=True)
        (root / f"d{i % 3}" / f"{i:05d}-{name}.json").write_text(texts[name])


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _serial_walk(tmp_path: Path, texts: dict[str, str], monkeypatch: pytest.MonkeyPatch, *,
                 files: int, chunk: int) -> tuple[Path, Any]:
    """`files` results written under tmp_path/results and their one-process walk (its index
    under tmp_path/serial), with the pool's thresholds lowered to few files, `chunk` files a
    chunk and one reader."""
    monkeypatch.setattr(_scan, "POOL_MIN_FILES", 10)
    monkeypatch.setattr(_pool, "readers", lambda since=None: 1)
    monkeypatch.setattr(_pool, "CHUNK", chunk)
    root = tmp_path / "results"
    _write(root, texts, files)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "serial"))
    return root, Catalogue(root).scan()


def test_the_rows_refusals_and_index_are_the_one_process_walk_s(
        tmp_path: Path, texts: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    root, serial = _serial_walk(tmp_path, texts, monkeypatch, files=60, chunk=4)
    index = _scan.index_path(os.path.realpath(root))
    assert index is not None
    serial_index = json.loads(index.read_text())
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "pool"))
    before = _children_cpu()
    pooled = Catalogue(root, reading_processes=True).scan()
    assert _children_cpu() > before  # reading processes ran (and were waited for)
    assert pooled == serial
    assert json.loads(_scan.index_path(os.path.realpath(root)).read_text()) == serial_index
    kinds = [e.kind for e in pooled.entries]
    assert len(kinds) == 60 and kinds.count("error") == 30  # 3 of the 6 texts are refused
    errors = {e.path.split("-", 1)[1]: e.error for e in pooled.entries if e.kind == "error"}
    assert "statistics.1: Input should be a valid dictionary" in errors["statistic.json"]
    # A walk below the threshold, or without reading processes, stays in this process.
    monkeypatch.setattr(_scan, "POOL_MIN_FILES", 61)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "few"))
    before = _children_cpu()
    assert Catalogue(root, reading_processes=True).scan() == serial
    assert _children_cpu() == before


def _readers_of(pid: int) -> list[int]:
    """The reading processes (``spawn_main``) whose parent is `pid`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        parent = int(status.rsplit(")", 1)[1].split()[1])
        if parent == pid and b"spawn_main" in cmdline:
            found.append(int(entry))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_killed_reading_process_leaves_its_files_to_the_walk(
        tmp_path: Path, texts: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    root, serial = _serial_walk(tmp_path, texts, monkeypatch, files=300, chunk=2)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "pool"))
    got: dict[str, Any] = {}
    walk = threading.Thread(target=lambda: got.update(
        listing=Catalogue(root, reading_processes=True).scan()))
    walk.start()
    killed = []
    deadline = time.monotonic() + 60
    # The walk waits for the chunks it gave the reading process, so one appears before
    # the walk ends.
    while not killed and time.monotonic() < deadline and walk.is_alive():
        for pid in _readers_of(os.getpid()):
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        time.sleep(0.001)
    walk.join(120)
    assert killed, "no reading process was seen"
    listing = got["listing"]
    assert listing.entries == serial.entries
    assert any(re.match(r"reading files in other processes failed \(BrokenProcessPool", note)
               for note in listing.notes), listing.notes
    assert not any(_alive(pid) for pid in _readers_of(os.getpid()))


def test_sigint_to_browse_while_its_processes_read_leaves_none_behind(
        tmp_path: Path, texts: dict[str, str]) -> None:
    root = tmp_path / "results"
    # Above the threshold of `nhbench browse` (`POOL_MIN_FILES`): small files, read fast.
    _write(root, {"one": texts["one"], "not-json": "{"}, _scan.POOL_MIN_FILES + 200)
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    # nhbench's CLI with one reader whatever the load (``-c``: a spawned reader imports no
    # main module).
    main = ("import sys\nfrom nhbench.browse import _pool\n_pool.readers = lambda since=None: 1\n"
            "from nhbench.cli import main\nsys.exit(main())\n")
    proc = subprocess.Popen(
        [sys.executable, "-c", main, "browse", str(root), "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        stdin=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        threading.Thread(target=lambda: _get(url), daemon=True).start()  # starts the walk
        readers: list[int] = []
        deadline = time.monotonic() + 60
        while not readers and time.monotonic() < deadline:
            readers = _readers_of(proc.pid)
            time.sleep(0.005)
        assert readers, "no reading process was started"
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0 and "Traceback" not in stderr, stderr
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in readers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(pid) for pid in readers)


def _get(url: str) -> None:
    try:
        urllib.request.urlopen(url, timeout=120).read()
    except OSError:
        pass  # the server stops while the list is being made


def test_readers_are_the_idle_cpus_beyond_the_walk_s_own(monkeypatch: pytest.MonkeyPatch,
                                                        ) -> None:
    usable = len(os.sched_getaffinity(0))
    monkeypatch.setattr(os, "getloadavg", lambda: (0.2, 0.0, 0.0))
    assert _pool.readers() == min(usable - 1, _pool.MAX_READERS)
    monkeypatch.setattr(os, "getloadavg", lambda: (usable - 0.5, 0.0, 0.0))
    assert _pool.readers() == 0  # a busy machine: the walk reads alone
    # By the CPUs' idle time since the walk began (/proc/stat), when there is enough of it:
    # half of every CPU idle is half of them.
    now = _pool.cpu_times()
    assert now is not None and set(now) == os.sched_getaffinity(0)
    monkeypatch.setattr(os, "getloadavg", lambda: (usable + 5.0, 0.0, 0.0))
    half = {cpu: (idle - 500, total - 1000) for cpu, (idle, total) in now.items()}
    assert _pool.readers(half) == min(usable - 1, int(usable / 2 + 0.3), _pool.MAX_READERS)
    busy = {cpu: (idle, total - 1000) for cpu, (idle, total) in now.items()}
    assert _pool.readers(busy) == 0
    assert _pool.readers(now) == 0  # too little time to say: the load average (busy)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    assert _pool.readers() == 0
