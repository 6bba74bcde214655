"""``--loadgen``: load generators reached over SSH (and the container placements' commands).

The two SSH "hosts" are this machine reached twice through the real OpenSSH server of the
`sshd` fixture (tests/support/sshd_fixture.py); each runs the agent with this interpreter
and this checkout's package (``--loadgen-python "env PYTHONPATH=... python"``), not a venv of
its own. The target is the test server in a subprocess with an admin port, so its own
request count is what the merge is checked against. Nothing here measures time.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.cli import PACKAGE_PARENT, cli_env, nhbench_cli, refused_before_sending
from support.killed_run import failure_when_killed
from support.polling import wait_until
from support.service_calls import two_node_executions

import nhbench
from nhbench.distributed._loadgen import (
    LoadgenBenchmark,
    agent_argv,
    check_answer,
    parse_placement,
)
from nhbench.options import Options

pytestmark = pytest.mark.serial

CPU = str(min(os.sched_getaffinity(0)))
LATENCY = "benchmark_http_client.request_to_response"


@pytest.fixture(scope="module")
def server() -> Iterator[nhbench.TestServer]:
    with nhbench.TestServer(subprocess=True, admin="127.0.0.1:0") as test_server:
        yield test_server


def _served(server: nhbench.TestServer) -> int:
    return int(server.stats()["requests"])


def _python(package_parent: str = PACKAGE_PARENT, wrapper: Path | None = None) -> str:
    command = ["env", f"PYTHONPATH={package_parent}", sys.executable]
    if wrapper is not None:
        command = ["sh", str(wrapper), *command]
    return shlex.join(command)


def _ssh_args(sshd: Any, python: str) -> list[str]:
    return ["--loadgen", f"ssh://{sshd.address}", "--loadgen", f"ssh://{sshd.address}",
            "--loadgen-ssh-key", str(sshd.user_key),
            "--loadgen-known-hosts", str(sshd.known_hosts), "--loadgen-python", python]


def test_two_ssh_hosts_merge_exactly(sshd: Any, server: nhbench.TestServer,
                                    tmp_path: Path) -> None:
    before = _served(server)
    proc = nhbench_cli("run", server.url, *_ssh_args(sshd, _python()), "--rps", "50",
                       "--duration", "1s", "--concurrency", "2", "--cpus", CPU,
                       "--stats-interval", "0.25s", "--output-format", "json",
                       env={"SSH_AUTH_SOCK": ""})
    served = _served(server) - before
    assert proc.returncode == 0, proc.stderr
    (tmp_path / "out.json").write_text(proc.stdout)
    result = nhbench.load_result(str(tmp_path / "out.json"))
    # Every request either host sent reached the server and is in the merge, exactly.
    assert result.counters["upstream_rq_total"] == served > 0
    assert result.counters["benchmark.http_2xx"] == served
    assert [h.name for h in result.hosts] == ["host_0", "host_1"]
    assert [w.name for w in result.workers] == [
        "host_0.worker_0", "host_0.worker_1", "host_1.worker_0", "host_1.worker_1"]
    own = [result.host_result(h.name).counter_values["upstream_rq_total"] for h in result.hosts]
    assert sum(own) == served and all(n > 0 for n in own)
    for host in result.hosts:
        assert host.version == nhbench.__version__
        assert host.address == f"ssh://{sshd.address}"
        # One machine, one clock: the true offset is 0, so it lies within the uncertainty.
        assert abs(host.clock_offset) <= host.clock_uncertainty + 1e-6
        assert host.ready_margin > 0
    # Each host's statistics are its own (two hosts never time their requests alike) and the
    # merged histogram is exactly theirs added: count, min, max and mean.
    parts = [result.host_result(h.name).stat(LATENCY) for h in result.hosts]
    assert parts[0].mean != parts[1].mean
    merged = result.stat(LATENCY)
    assert merged.count == sum(p.count for p in parts) == served
    assert merged.min == min(p.min for p in parts) and merged.max == max(p.max for p in parts)
    assert merged.mean == pytest.approx(sum(p.mean * p.count for p in parts) / served, rel=1e-9)
    # The hosts' intervals k add up into one timeline that holds every response once.
    assert sum(record.requests for record in result.timeline) == served


def test_pushed_metrics_come_from_the_controller(sshd: Any,
                                                 server: nhbench.TestServer) -> None:
    # docs/telemetry.md: as on Ray, the controller pushes the merged intervals, so what the
    # statsd sink received adds up to the merged result and to the server's count.
    from support.metric_sinks import StatsdServer

    before = _served(server)
    with StatsdServer("udp") as statsd:
        proc = nhbench_cli("run", server.url, *_ssh_args(sshd, _python()), "--rps", "50",
                           "--duration", "1s", "--cpus", CPU, "--statsd",
                           statsd.address, "--stats-flush-interval", "0.5s",
                           "--output-format", "json", env={"SSH_AUTH_SOCK": ""})
        served = _served(server) - before
        lines = statsd.lines()
    assert proc.returncode == 0, proc.stderr
    pushed = sum(int(line.value) for line in lines
                 if line.name == "envoy.cluster.nhbench.upstream_rq_total")
    assert pushed == served > 0


def test_a_host_killed_mid_run_fails_the_run_naming_it(sshd: Any, server: nhbench.TestServer,
                                                        tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    wrapper = tmp_path / "wrap.sh"
    # The agent's process id, as the remote shell starts it (exec keeps the id).
    wrapper.write_text(f'echo $$ >> {shlex.quote(str(pids))}\nexec "$@"\n')
    killed: list[int] = []

    def kill_one() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            lines = pids.read_text().split() if pids.exists() else []
            if len(lines) == 2:
                time.sleep(3.0)  # both agents run their load by now (1 s lead)
                killed.append(int(lines[1]))
                os.kill(int(lines[1]), signal.SIGKILL)
                return
            time.sleep(0.1)

    killer = threading.Thread(target=kill_one)
    killer.start()
    proc = nhbench_cli("run", server.url, *_ssh_args(sshd, _python(wrapper=wrapper)),
                       "--rps", "20", "--duration", "8s", "--cpus", CPU,
                       env={"SSH_AUTH_SOCK": ""})
    killer.join()
    assert killed, "the agents never started"
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "was lost during the run" in lines[0] and "no merged result" in lines[0]
    assert f"(ssh://{sshd.address}" in lines[0]
    assert "host_0" in lines[0] or "host_1" in lines[0]


def test_a_different_version_is_refused_by_name(sshd: Any, server: nhbench.TestServer,
                                                tmp_path: Path) -> None:
    # A copy of the package built as another version: it reads the version from the
    # _version.txt its build wrote beside it (nhbench._version).
    other = tmp_path / "other"
    shutil.copytree(Path(PACKAGE_PARENT) / "nhbench", other / "src" / "nhbench", symlinks=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    (other / "src" / "nhbench" / "_version.txt").write_text("0.0.0.dev7\n")
    before = _served(server)
    proc = nhbench_cli("run", server.url, "--loadgen", f"ssh://{sshd.address}",
                       "--loadgen-ssh-key", str(sshd.user_key),
                       "--loadgen-known-hosts", str(sshd.known_hosts),
                       "--loadgen-python", _python(str(other / "src")), "--rps", "20",
                       "--duration", "1s", env={"SSH_AUTH_SOCK": ""})
    assert proc.returncode == 1, proc.stderr
    line = proc.stderr.strip()
    assert "\n" not in line
    assert f"host_0 (ssh://{sshd.address}" in line
    assert "0.0.0.dev7" in line and nhbench.__version__ in line
    assert _served(server) == before  # nothing was sent


def test_unknown_host_key_is_refused(sshd: Any, server: nhbench.TestServer,
                                     tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    proc = nhbench_cli("run", server.url, "--loadgen", f"ssh://{sshd.address}",
                       "--loadgen-ssh-key", str(sshd.user_key),
                       "--loadgen-known-hosts", str(empty), "--loadgen-python", _python(),
                       "--duration", "1s", env={"SSH_AUTH_SOCK": ""})
    assert proc.returncode == 1, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert empty.read_text() == ""


@pytest.mark.parametrize(("value", "message"), [
    ("foo://x", "expected ssh://USER@HOST[:PORT]"),
    ("kubectl://ns", "expected kubectl://NAMESPACE/POD[/CONTAINER]"),
    ("docker://a/b", "one container name"),
    ("ssh://", "needs a name"),
])
def test_bad_loadgen_is_refused_by_name(value: str, message: str) -> None:
    proc = nhbench_cli("run", "http://127.0.0.1:9/", "--loadgen", value)
    assert proc.returncode == 2, proc.stderr
    assert "loadgen" in proc.stderr and message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_loadgen_with_ray_and_orphan_options_are_refused() -> None:
    both = nhbench_cli("run", "http://127.0.0.1:9/", "--loadgen", "docker://c", "--ray", "auto")
    assert both.returncode == 2 and "one placement" in both.stderr, both.stderr
    # --until ends a run on this machine's own intervals; the distributed runs do not.
    until = nhbench_cli("run", "http://127.0.0.1:9/", "--loadgen", "docker://c", "--until",
                        "p99<=5%", "--max-duration", "10s")
    assert until.returncode == 2 and "until" in until.stderr and "loadgen" in until.stderr
    orphan = nhbench_cli("run", "http://127.0.0.1:9/", "--loadgen-python", "python3")
    assert orphan.returncode == 2 and "loadgen_python" in orphan.stderr.replace("-", "_")


def test_container_commands() -> None:
    # docker and kubectl run the same agent inside the container, over exec -i: its stdin
    # and stdout are the protocol, exactly as over SSH.
    assert agent_argv(parse_placement("docker://lab-client"), "python3") == [
        "docker", "exec", "-i", "lab-client", "python3", "-m", "nhbench.distributed._agent"]
    assert agent_argv(parse_placement("kubectl://bench/nighthawk-0/client"),
                      "/opt/nhb/bin/python") == [
        "kubectl", "exec", "-i", "-n", "bench", "nighthawk-0", "-c", "client", "--",
        "/opt/nhb/bin/python", "-m", "nhbench.distributed._agent"]
    assert agent_argv(parse_placement("kubectl://bench/nighthawk-0")) == [
        "kubectl", "exec", "-i", "-n", "bench", "nighthawk-0", "--",
        "python3", "-m", "nhbench.distributed._agent"]
    ssh = parse_placement("ssh://lab@10.0.0.7:2222")
    assert ssh.target is not None and str(ssh.target) == "lab@10.0.0.7:2222"
    assert agent_argv(ssh, "env A='b c' python3") == [
        "env 'A=b c' python3 -m nhbench.distributed._agent"]


def test_container_without_its_client_fails_in_one_line(tmp_path: Path) -> None:
    # No docker client on PATH: the run fails naming the load generator and the command.
    proc = nhbench_cli("run", "http://127.0.0.1:9/", "--loadgen", "docker://c",
                       "--duration", "1s", env={"PATH": str(tmp_path)})
    assert proc.returncode == 1, proc.stderr
    assert "host_0" in proc.stderr and "docker" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_a_real_answer_passes_the_check(server: nhbench.TestServer) -> None:
    # The check accepts what a node really returns (the Ray actor's answer shape).
    from nhbench.distributed._cluster import _LoadActor

    options = Options(uri=server.url, rps=20, duration="0.5s", stats_interval="0.25s")
    answer = _LoadActor().run(options.model_dump(mode="json"))
    import json

    assert check_answer(json.loads(json.dumps(answer)))


def test_sweep_steps_run_from_the_load_generators(sshd: Any, server: nhbench.TestServer,
                                                 tmp_path: Path) -> None:
    # The sweep's steps go through the same make_benchmark: each step is a --loadgen run.
    from nhbench.campaign import load_campaign

    before = _served(server)
    out = tmp_path / "c"
    proc = nhbench_cli("sweep", server.url, "--steps", "20,40", "--duration", "0.5s",
                       "--cpus", CPU, "--out", str(out), *_ssh_args(sshd, _python()),
                       env={"SSH_AUTH_SOCK": ""}, timeout=300)
    assert proc.returncode == 0, proc.stderr
    campaign = load_campaign(out)
    assert len(campaign.steps) == 2
    assert sum(step.http_2xx for step in campaign.steps) == _served(server) - before > 0


def test_adapt_steps_run_from_the_load_generators(sshd: Any, server: nhbench.TestServer,
                                                 tmp_path: Path) -> None:
    # adapt's search steps go through the same make_benchmark: every step, confirmations
    # included, is a --loadgen run whose requests all reached the server.
    from nhbench.campaign import load_campaign

    before = _served(server)
    out = tmp_path / "c"
    proc = nhbench_cli("adapt", server.url, "--slo", "mean<10s", "--min-rps", "20",
                       "--max-rps", "40", "--duration", "0.5s", "--confirm", "1",
                       "--cpus", CPU, "--no-mpstat", "--out", str(out),
                       *_ssh_args(sshd, _python()), env={"SSH_AUTH_SOCK": ""}, timeout=300)
    assert proc.returncode == 0, proc.stderr
    campaign = load_campaign(out)
    assert campaign.manifest.kind == "adapt"
    assert len(campaign.steps) >= 2
    assert sum(step.http_2xx for step in campaign.steps) == _served(server) - before > 0
    for step in campaign.steps:
        # Each step's result was merged from the two load generators.
        result = nhbench.load_result(str(out / step.directory / "result.json"))
        assert [h.address for h in result.hosts] == [f"ssh://{sshd.address}"] * 2


def test_an_agent_that_does_not_start_fails_naming_the_host(sshd: Any,
                                                            server: nhbench.TestServer) -> None:
    before = _served(server)
    proc = nhbench_cli("run", server.url, "--loadgen", f"ssh://{sshd.address}",
                       "--loadgen-ssh-key", str(sshd.user_key),
                       "--loadgen-known-hosts", str(sshd.known_hosts),
                       "--loadgen-python", "/nonexistent/python", "--duration", "1s",
                       env={"SSH_AUTH_SOCK": ""})
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    # The remote shell's own words come back with the host's name.
    assert f"host_0 (ssh://{sshd.address})" in lines[0] and "/nonexistent/python" in lines[0]
    assert _served(server) == before


def test_ctrl_c_stops_every_load_generator(sshd: Any, server: nhbench.TestServer,
                                           tmp_path: Path) -> None:
    import subprocess

    from support.cli import cli_env

    out = tmp_path / "r.json"
    before = _served(server)
    env = cli_env({"SSH_AUTH_SOCK": ""})
    proc = subprocess.Popen(
        [sys.executable, "-m", "nhbench", "run", server.url, *_ssh_args(sshd, _python()),
         "--rps", "50", "--duration", "60s", "--output-format", "json", "--output", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 90
        while _served(server) - before < 20:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no load within 90 s"
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, stderr
    result = nhbench.load_result(str(out))
    assert result.interrupted
    # Every request of both hosts, stopped and drained, is in the merge.
    assert result.counters["upstream_rq_total"] == _served(server) - before
    assert result.counters["upstream_rq_total"] < 2 * 50 * 30


def test_a_controller_that_dies_leaves_nothing_running(sshd: Any, server: nhbench.TestServer,
                                                       tmp_path: Path) -> None:
    import subprocess

    from support.cli import cli_env

    pids = tmp_path / "pids"
    wrapper = tmp_path / "wrap.sh"
    wrapper.write_text(f'echo $$ >> {shlex.quote(str(pids))}\nexec "$@"\n')
    before = _served(server)
    proc = subprocess.Popen(
        [sys.executable, "-m", "nhbench", "run", server.url,
         *_ssh_args(sshd, _python(wrapper=wrapper)), "--rps", "50", "--duration", "60s"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=cli_env({"SSH_AUTH_SOCK": ""}),
        stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 90
        while _served(server) - before < 20:
            assert proc.poll() is None
            assert time.monotonic() < deadline, "no load within 90 s"
            time.sleep(0.1)
    finally:
        proc.kill()
        proc.wait()
    agents = [int(pid) for pid in pids.read_text().split()]
    assert len(agents) == 2

    def alive(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"

    # The SSH connections drop with the controller; each agent's input ends, it stops its
    # run (drained) and exits, and the server sees no more requests.
    deadline = time.monotonic() + 60
    while any(alive(pid) for pid in agents):
        assert time.monotonic() < deadline, "an agent outlived its controller by 60 s"
        time.sleep(0.2)
    settled = _served(server)
    time.sleep(1.0)
    assert _served(server) == settled


def test_an_agent_refuses_options_as_an_options_error() -> None:
    # Options the node cannot take (its version, its files) come back as an options error
    # naming the option, so that the controller exits 2 as it would for its own.
    import json
    import subprocess

    request = {"id": 1, "op": "run",
               "args": {"options": {"uri": "http://127.0.0.1:9/", "rps": -1}}}
    proc = subprocess.run([sys.executable, "-m", "nhbench.distributed._agent"],
                          input=json.dumps(request) + "\n", capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": PACKAGE_PARENT}, timeout=60,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout.strip().splitlines()[-1])
    assert answer["id"] == 1 and answer["error"]["kind"] == "options", answer
    assert answer["error"]["option"] == "rps" and "rps" in answer["error"]["message"], answer


def test_a_node_whose_limit_cannot_hold_its_share_refuses_the_whole_run_first(
        sshd: Any, server: nhbench.TestServer, tmp_path: Path) -> None:
    # Two load generators over SSH; the wrapper gives the agent that starts second a hard
    # RLIMIT_NOFILE of 256 (the first to create the marker directory keeps sshd's limit,
    # ample). 300 connections fit on one node and not on the other: every node is asked
    # before any starts, so the run is refused naming that node, and the other never opened
    # a connection (--prefetch-connections opens all 300 as soon as its run arms, which is
    # what it did before the pre-flight, while the refusal was on its way).
    marker = tmp_path / "first"
    wrapper = tmp_path / "wrap.sh"
    wrapper.write_text(f"mkdir {shlex.quote(str(marker))} 2>/dev/null || ulimit -n 256\n"
                       'exec "$@"\n')
    seen = server.stats()
    proc = nhbench_cli("run", server.url, *_ssh_args(sshd, _python(wrapper=wrapper)),
                       "--connections", "300", "--prefetch-connections", "--rps", "20",
                       "--duration", "1s", "--cpus", CPU, env={"SSH_AUTH_SOCK": ""})
    line = refused_before_sending(proc, server, seen)
    named = re.findall(rf"host_([01]) \(ssh://{re.escape(sshd.address)}, ", line)
    assert len(named) == 1, line
    assert line.startswith(f"nhbench: error: --connections: host_{named[0]} "), line
    assert ": 300 connections need " in line
    assert "more than RLIMIT_NOFILE's hard limit of 256; at most " in line
    assert line.endswith(" connections per worker fit (1 of 2 nodes refused; no node "
                         "started)"), line


def test_the_agent_checks_a_share_without_sending(server: nhbench.TestServer) -> None:
    # The check operation alone, on an agent under a hard limit of 128: a share of 200
    # connections is refused with the run's own words, one of 20 fits, a source address of
    # the other family than the target's is refused as the run refuses it; none is sent.
    import json
    import resource
    import subprocess

    def low_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128))

    seen = server.stats()
    requests = [{"id": i, "op": "check",
                 "args": {"options": {"uri": server.url, "connections": n,
                                      "prefetch_connections": True, "duration": 1, **more}}}
                for i, n, more in ((1, 200, {}), (2, 20, {}),
                                   (3, 2, {"source_address": ["::1"]}))]
    proc = subprocess.run([sys.executable, "-m", "nhbench.distributed._agent"],
                          input="".join(json.dumps(r) + "\n" for r in requests),
                          capture_output=True, text=True, preexec_fn=low_limit,
                          env={**os.environ, "PYTHONPATH": PACKAGE_PARENT}, timeout=60,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    answers = [json.loads(line) for line in proc.stdout.strip().splitlines()]
    assert [a["id"] for a in answers] == [1, 2, 3], answers
    refused = answers[0]["ok"]
    assert refused["kind"] == "options" and refused["option"] == "connections", refused
    assert refused["message"].startswith("connections: 200 connections need "), refused
    assert "hard limit of 128" in refused["message"], refused
    assert answers[1] == {"id": 2, "ok": None}
    assert answers[2]["ok"] == {
        "kind": "options", "option": "source_address",
        "message": "source_address: ::1 cannot reach the run's IPv4 destination (127.0.0.1); "
                   "give source addresses of the same family"}, answers[2]
    now = server.stats()
    assert (now["requests"], now["connections_total"]) == (
        seen["requests"], seen["connections_total"])


# ---- campaigns keep one agent per load generator (LoadgenSession) ----------------------------
#
# The agents are counted independently of the session's own counters: the wrapper given as
# --loadgen-python appends the agent's process id to a file each time one starts, and sshd
# logs each accepted login.


def _agent_pids(path: Path) -> list[int]:
    return [int(pid) for pid in path.read_text().split()] if path.exists() else []


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def _until_ended(pids: list[int], seconds: float = 60.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [pid for pid in pids if _alive(pid)]


def _logins(sshd: Any) -> int:
    return sshd.log().count("Accepted publickey")


def _pid_wrapper(tmp_path: Path) -> tuple[Path, str]:
    pids = tmp_path / "pids"
    wrapper = tmp_path / "wrap.sh"
    wrapper.write_text(f'echo $$ >> {shlex.quote(str(pids))}\nexec "$@"\n')
    return pids, _python(wrapper=wrapper)


def test_a_sweep_starts_each_agent_once(sshd: Any, server: nhbench.TestServer, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # Three steps over two SSH load generators: two logins and two agents for the whole
    # campaign (not one per step), every step's merge exactly the server's count of it, and
    # the campaign's end ends both agents.
    from nhbench.sweep import Sweep, prepare_sweep

    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    pids, python = _pid_wrapper(tmp_path)
    served_at: list[int] = []
    seen: list[tuple[int, int, int]] = []
    sweep: Sweep | None = None

    def on_step(record: object) -> None:
        served_at.append(_served(server))
        # getattr: the counters are read besides the independent counts, which come first.
        session = getattr(sweep, "loadgen_session", None)
        seen.append((-1, -1, -1) if session is None else (
            session.connections, session.agents_started, session.agents))

    logins = _logins(sshd)
    before = _served(server)
    config = prepare_sweep({
        "url": server.url, "loadgen": [f"ssh://{sshd.address}"] * 2,
        "loadgen_ssh_key": str(sshd.user_key), "loadgen_known_hosts": str(sshd.known_hosts),
        "loadgen_python": python, "cpus": CPU, "rps": 20, "max_rps": 60, "step_rps": 20,
        "duration": "0.5s", "out": str(tmp_path / "c")})
    sweep = Sweep(config, captures=False, facts=False, reports=False, stream=None,
                  on_step=on_step)
    campaign = sweep.run()
    assert [s.rps_per_worker for s in campaign.steps] == [20, 40, 60]
    agents = _agent_pids(pids)
    assert len(agents) == 2, agents
    assert _logins(sshd) - logins == 2, sshd.log()[-2000:]
    assert seen == [(2, 2, 2)] * 3
    for step, (start, end) in zip(campaign.steps, zip([before, *served_at], served_at,
                                                      strict=False), strict=True):
        result = campaign.result(step.index)
        assert result.counters["upstream_rq_total"] == end - start > 0, step.index
        assert [h.name for h in result.hosts] == ["host_0", "host_1"]
        assert [h.address for h in result.hosts] == [f"ssh://{sshd.address}"] * 2
    # The campaign's end closed the session: both agents ended.
    assert sweep.loadgen_session is None
    assert _until_ended(agents) == []


@dataclasses.dataclass
class _SessionRuns:
    """Runs from `sshd`'s load generators against `server` on a `LoadgenSession` (the
    session tests): 40 rps for 0.5 s unless told otherwise."""

    sshd: Any
    server: nhbench.TestServer
    python: str

    def benchmark(self, session: Any, placements: list[str], **values: object) -> Any:
        from nhbench.distributed import make_benchmark
        from nhbench.options import make_options

        values = {"rps": 40, "duration": "0.5s", "cpus": CPU, **values}
        return make_benchmark(make_options(
            self.server.url, loadgen=placements, loadgen_ssh_key=str(self.sshd.user_key),
            loadgen_known_hosts=str(self.sshd.known_hosts), loadgen_python=self.python,
            **values), session=session)

    def run(self, session: Any, placements: list[str], **values: object) -> Any:
        """A run that succeeds, its requests counted exactly at the server."""
        before = _served(self.server)
        result = self.benchmark(session, placements, **values).run()
        assert result.success, result.error
        assert result.counters["upstream_rq_total"] == _served(self.server) - before > 0
        return result


def test_a_loadgen_session_outlives_refusals_and_placement_changes(
        sshd: Any, server: nhbench.TestServer, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from nhbench.distributed import LoadgenSession

    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    pids, python = _pid_wrapper(tmp_path)
    # Two texts for the same sshd (with and without the user): two load generators.
    first, second = f"ssh://{sshd.address}", f"ssh://{sshd.host}:{sshd.port}"
    runs = _SessionRuns(sshd, server, python)
    benchmark, run = runs.benchmark, runs.run
    with LoadgenSession() as session:
        logins = _logins(sshd)
        run(session, [first, first])
        started = _agent_pids(pids)
        assert len(started) == 2
        assert (session.connections, session.agents_started, session.agents) == (2, 2, 2)
        # Refused by the agents' pre-flight before any had its run: they stay as they were.
        seen = server.stats()
        with pytest.raises(nhbench.OptionsError, match=r"^source_address: host_0 "):
            benchmark(session, [first, first], source_address=["::1"]).run()
        assert server.stats()["requests"] == seen["requests"]
        # A run stopped by its caller ends normally, and the stop does not reach the next
        # run on the same agents: that one runs its whole duration.
        stopped = benchmark(session, [first, first], duration="60s")
        threading.Timer(2.5, stopped.stop).start()
        assert stopped.run().interrupted
        result = run(session, [first, first], duration="1s")
        assert not result.interrupted
        # 80 planned over its second: a wide ratio (a run stopped at once has none).
        assert result.counters["upstream_rq_total"] > 40
        assert _agent_pids(pids) == started
        assert (session.connections, session.agents_started, session.agents) == (2, 2, 2)
        # Another placement set: the kept one goes on, only the new one starts, and the one
        # no longer used ends.
        result = run(session, [first, second])
        assert [h.address for h in result.hosts] == [first, second]
        now = _agent_pids(pids)
        assert now[:2] == started and len(now) == 3
        assert _until_ended([started[1]]) == [] and _alive(started[0]) and _alive(now[2])
        assert (session.connections, session.agents_started, session.agents) == (3, 3, 2)
        # The same placements in another order: both kept, named by their new positions.
        result = run(session, [second, first])
        assert [h.address for h in result.hosts] == [second, first]
        assert _agent_pids(pids) == now
        assert _logins(sshd) - logins == 3
    # The end of the session ends every agent (and close() again does nothing).
    assert session.agents == 0
    session.close()
    assert _until_ended(now) == []


def test_a_host_lost_during_or_between_runs_gives_fresh_agents(
        sshd: Any, server: nhbench.TestServer, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from nhbench.distributed import LoadgenSession

    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    pids, python = _pid_wrapper(tmp_path)
    placements = [f"ssh://{sshd.address}"] * 2
    runs = _SessionRuns(sshd, server, python)
    with LoadgenSession() as session:
        runs.run(session, placements)
        agents = _agent_pids(pids)
        assert len(agents) == 2 and session.agents_started == 2
        # An agent killed mid-run fails that run naming it, and ends every agent.
        failure = failure_when_killed(lambda: runs.benchmark(session, placements, duration="60s").run(), server,
                                      lambda: os.kill(agents[1], signal.SIGKILL))
        assert isinstance(failure, nhbench.RunError), failure
        message = str(failure)
        assert "host_1 (ssh://" in message and "was lost during the run" in message, message
        assert session.agents == 0
        assert _until_ended(agents) == []
        # The next run starts fresh agents and runs as the first did.
        runs.run(session, placements)
        fresh = _agent_pids(pids)[2:]
        assert len(fresh) == 2 and session.agents_started == 4
        # An agent killed between runs: the next run finds it gone and starts every agent
        # anew (RaySession's rule for an actor that does not answer), then runs.
        os.kill(fresh[0], signal.SIGKILL)
        assert _until_ended([fresh[0]]) == []
        runs.run(session, placements)
        assert len(_agent_pids(pids)) == 6 and session.agents_started == 6
        assert _until_ended([fresh[1]]) == []
    assert _until_ended(_agent_pids(pids)) == []


def test_service_executions_share_one_set_of_agents(sshd: Any, server: nhbench.TestServer,
                                                    tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # A service whose executions run from two SSH load generators (its overrides): two
    # executions on the same two agents; the agents end when the service has been idle.
    pytest.importorskip("grpc", reason="needs grpcio (the test extra)")
    pytest.importorskip("grpc_reflection", reason="needs grpcio-reflection (the test extra)")

    from nhbench.service._server import Service

    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    pids, python = _pid_wrapper(tmp_path)
    service = Service(("127.0.0.1", 0), overrides={
        "loadgen": [f"ssh://{sshd.address}"] * 2, "loadgen_ssh_key": str(sshd.user_key),
        "loadgen_known_hosts": str(sshd.known_hosts), "loadgen_python": python},
        ray_idle_timeout=3.0)
    service.start()
    try:
        two_node_executions(service.address, server, 2)
        agents = _agent_pids(pids)
        assert len(agents) == 2, agents
        session = service.session
        assert session is not None and service.ray_session is None
        assert (session.connections, session.agents_started, session.agents) == (2, 2, 2)
        # Idle past the time-out: the agents end.
        assert wait_until(lambda: service.session is None, timeout=30, step=0.2)
        assert session.agents == 0
        assert _until_ended(agents) == []
    finally:
        service.stop(drain=30)


def test_a_start_too_soon_for_the_agents_is_refused_naming_loadgen(
        sshd: Any, server: nhbench.TestServer) -> None:
    # --scheduled-start one second ahead: valid for a local run, but the load generators
    # need their lead once they are ready, so the run is refused by its own flag, nothing
    # sent.
    seen = server.stats()
    proc = nhbench_cli("run", server.url, *_ssh_args(sshd, _python()), "--rps", "10",
                       "--duration", "1s", "--cpus", CPU,
                       "--scheduled-start", f"{time.time() + 1:.3f}")
    line = refused_before_sending(proc, server, seen)
    assert line.startswith("nhbench: error: --scheduled-start: with --loadgen it must lie at "
                           "least 1 s ahead when the nodes are ready (it is "), line
    # The offset is the time's distance from now: positive for a time still ahead (it read
    # as the opposite sign). Judged on the check itself, which has no connection's delay.
    ahead = time.time() + 0.5
    benchmark = LoadgenBenchmark(Options(uri=server.url, loadgen=("ssh://u@127.0.0.1:1",),
                                         scheduled_start=ahead))
    with pytest.raises(nhbench.OptionsError, match=r"with --loadgen it must lie") as refused:
        benchmark._scheduled_start()
    offset = float(re.search(r"\(it is ([-+][0-9.]+) s from now\)",  # type: ignore[union-attr]
                             str(refused.value)).group(1))
    assert 0 < offset <= 0.5, str(refused.value)


def test_the_service_runs_its_executions_from_the_loadgen_hosts(
        sshd: Any, server: nhbench.TestServer, tmp_path: Path) -> None:
    # `nhbench service --loadgen ... --loadgen ...`: every execution runs from the two SSH
    # load generators, on one set of agents (two executions, two agents started).
    pytest.importorskip("grpc", reason="needs grpcio (the test extra)")
    pytest.importorskip("grpc_reflection", reason="needs grpcio-reflection (the test extra)")
    pids, python = _pid_wrapper(tmp_path)
    process = subprocess.Popen(
        [sys.executable, "-m", "nhbench", "service", "--listen", "127.0.0.1:0",
         *_ssh_args(sshd, python)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=cli_env({"SSH_AUTH_SOCK": ""}), stdin=subprocess.DEVNULL)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("listening on "), (line, process.stderr)
        two_node_executions(line.split()[-1], server, 2)
        assert len(_agent_pids(pids)) == 2
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr
