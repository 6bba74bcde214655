"""The floor clients (benchmarks/floor/), built and run so the tooling cannot rot.

The floors are benchmark tools, never pass/fail measurements: what is tested is that the
system cc builds them with -Wall -Wextra -Werror, and that they count requests exactly (the
test server's own request count agrees) in every mode: the request floor (closed loop) and the
timer floor (releases on a uniform schedule, with a periodic timerfd, with epoll_pwait2's
timeout, or with a timerfd set per release as nhbench's sequencer does).
No timing is judged.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import nhbench

FLOOR_DIR = Path(__file__).resolve().parent.parent / "benchmarks" / "floor"
sys.path.insert(0, str(FLOOR_DIR))
try:
    import build as floor_build  # benchmarks/floor/build.py
finally:
    sys.path.remove(str(FLOOR_DIR))


@pytest.fixture(scope="module")
def floor_binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if floor_build.compiler() is None:
        pytest.skip("no C compiler (cc) on PATH: the floor clients cannot be built")
    return floor_build.build("request_floor", tmp_path_factory.mktemp("floor"))


def _run(binary: Path, port: int, *args: str) -> dict[str, float]:
    proc = subprocess.run([str(binary), "--port", str(port), *args], capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    out: dict[str, float] = json.loads(proc.stdout)
    return out


@pytest.mark.parametrize("mode",
                         [[], ["--rate", "2000"], ["--rate", "2000", "--timer", "pwait2"],
                          ["--rate", "2000", "--timer", "pwait2", "--timer-slack", "1"],
                          ["--rate", "2000", "--timer", "oneshot"]],
                         ids=["request", "timer-timerfd", "timer-pwait2", "timer-pwait2-slack1",
                              "timer-oneshot"])
def test_floor_counts_equal_the_servers(floor_binary: Path, mode: list[str]) -> None:
    with nhbench.TestServer(response_body_size=64) as server:
        port = int(server.url.rstrip("/").rsplit(":", 1)[1])
        before = server.stats()["requests"]
        out = _run(floor_binary, port, "--connections", "8", "--requests", "300", *mode)
        after = server.stats()["requests"]
    assert out["requests"] == 300
    # One more request than the floor counts: the one it learns the response size from.
    assert after - before == 301
    assert out["connections"] == 8
    assert out["reopened"] == 0  # no connection was closed by the server in so short a run
    assert out["response_bytes"] > 64  # the head and the 64-byte body
    assert out["cpu_s"] >= 0
    if "--timer" in mode:
        assert out["timer"] == mode[mode.index("--timer") + 1]


def test_floor_with_given_response_size_sends_no_extra_request(floor_binary: Path) -> None:
    with nhbench.TestServer(response_body_size=64) as server:
        port = int(server.url.rstrip("/").rsplit(":", 1)[1])
        learned = _run(floor_binary, port, "--connections", "1", "--requests", "1")
        size = int(learned["response_bytes"])
        before = server.stats()["requests"]
        out = _run(floor_binary, port, "--connections", "4", "--requests", "200",
                   "--response-size", str(size))
        after = server.stats()["requests"]
    assert out["requests"] == 200
    assert after - before == 200


def test_floor_refuses_bad_arguments_with_one_line(floor_binary: Path) -> None:
    proc = subprocess.run([str(floor_binary), "--port", "0", "--requests", "1"],
                          capture_output=True, text=True, timeout=10, check=False)
    assert proc.returncode == 2
    assert proc.stderr.startswith("request_floor: --port must be 1..65535")
    assert proc.stderr.count("\n") == 1
    assert proc.stdout == ""


def test_io_uring_floor_counts_equal_the_servers(tmp_path: Path) -> None:
    if floor_build.compiler() is None:
        pytest.skip("no C compiler (cc) on PATH: the floor clients cannot be built")
    try:
        binary = floor_build.build("request_floor_uring", tmp_path)
    except floor_build.BuildError as e:
        pytest.skip(f"the io_uring floor cannot be built here: {e}")
    with nhbench.TestServer(response_body_size=64) as server:
        port = int(server.url.rstrip("/").rsplit(":", 1)[1])
        before = server.stats()["requests"]
        out = _run(binary, port, "--connections", "8", "--requests", "300")
        after = server.stats()["requests"]
    assert out["requests"] == 300
    assert after - before == 301  # the size-learning request, as for the epoll floor
