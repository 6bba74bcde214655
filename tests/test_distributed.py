"""Load from a real two-node Ray cluster on this machine (docs/distributed.md).

One cluster for the module (benchmarks/ray_cluster.py: two `ray start` nodes, torn down
by their process groups, node 1 under a low descriptor limit of its own) and one subprocess
test server. Every run checks the merge against
the server's own request count and the hosts' own histograms; nothing here measures time.

Serial: starting Ray's daemons and its worker processes loads both CPUs for seconds, which
would disturb the rate and CPU measurements of tests running alongside. Slow (left out of
the sanitizer run): about a minute in all, and Ray's own daemons would inherit the
sanitizer preload without any of nhbench's C code being new here.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli import refused_before_sending
from support.killed_run import failure_when_killed
from support.polling import wait_until
from support.service_calls import two_node_executions

import nhbench
from benchmarks.ray_cluster import LocalRayCluster
from nhbench.campaign import load_campaign
from nhbench.distributed import merge_groups, merge_stats

pytestmark = [pytest.mark.serial, pytest.mark.slow, pytest.mark.timeout(180)]

PACKAGE_PARENT = str(Path(nhbench.__file__).resolve().parent.parent)
# Node 1 of the module's cluster runs under a hard RLIMIT_NOFILE of its own, low enough
# that a share of 1,500 connections does not fit there and fits on node 0 (this process's
# limit); the other tests' runs hold a few connections, which it does not touch.
LOW_NOFILE = 1024
_HARD = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
ROOM = _HARD == resource.RLIM_INFINITY or _HARD >= 4096
LATENCY = "benchmark_http_client.scheduled_to_response"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_PARENT, env.get("PYTHONPATH")]))
    return env


def cli(*args: str, cwd: Path | None = None, timeout: float = 120,
        prelude: str = "") -> subprocess.CompletedProcess[str]:
    code = f"{prelude}import sys; from nhbench.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], check=False,
                          capture_output=True, text=True, timeout=timeout, env=_env(),
                          stdin=subprocess.DEVNULL, cwd=cwd)


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalRayCluster]:
    # A short directory of its own rather than pytest's tmp_path: Ray puts Unix sockets under
    # its temp dir, and a socket path over 107 bytes (pytest-xdist's basetemp makes them
    # long) stops it from starting.
    root = Path(tempfile.mkdtemp(prefix="nhbray-", dir="/tmp"))
    try:
        with LocalRayCluster(root, nodes=2, nofile={1: LOW_NOFILE} if ROOM else {}) \
                as ray_cluster:
            yield ray_cluster
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def server() -> Iterator[nhbench.TestServer]:
    # A subprocess with an admin port: its counts are live, and Ray's processes cannot
    # disturb it.
    with nhbench.TestServer(subprocess=True, admin="127.0.0.1:0") as test_server:
        yield test_server


def _served(server: nhbench.TestServer) -> int:
    return int(server.stats()["requests"])


def _add(histograms: list[nhbench.Statistic]) -> object:
    total = histograms[0].histogram().__class__(1, 60_000_000_000, 3)
    for statistic in histograms:
        total.add(statistic.histogram())
    return total


def test_two_hosts_merge_exactly(cluster: LocalRayCluster, server: nhbench.TestServer) -> None:
    before = _served(server)
    intervals: list[nhbench.IntervalRecord] = []
    result = nhbench.run(server.url, cluster=nhbench.Cluster(cluster.address), rps=100,
                         duration="1s", concurrency=2, stats_interval="0.25s",
                         on_interval=intervals.append)
    served = _served(server) - before
    assert result.success, result.error
    # Every request any node sent reached the server and is in the merge, exactly.
    assert result.counters["upstream_rq_total"] == served > 0
    assert result.counters["benchmark.http_2xx"] == served
    assert [h.name for h in result.hosts] == ["host_0", "host_1"]
    assert len({h.node_id for h in result.hosts}) == 2
    assert [w.name for w in result.workers] == [
        "host_0.worker_0", "host_0.worker_1", "host_1.worker_0", "host_1.worker_1"]
    assert [e.name for e in result.results][-3:] == ["host_0", "host_1", "global"]
    assert result.worker_count == 4
    assert result.requested_rps == 400
    hosts = [result.host_result(h.name) for h in result.hosts]
    for host, entry in zip(result.hosts, hosts, strict=True):
        own = sum(result.results[[e.name for e in result.results].index(w)]
                  .counter_values["upstream_rq_total"] for w in host.workers)
        assert entry.counter_values["upstream_rq_total"] == own > 0
        # One machine, one clock: the node read it between the controller's two readings,
        # so the estimate lies within its own uncertainty of the true offset, 0.
        assert abs(host.clock_offset) <= host.clock_uncertainty
        # On time, the node began exactly at the scheduled instant (up to the clock
        # estimate's rounding); late, it began at once, after it.
        if host.ready_margin > 0:
            assert abs(host.start_skew) < 1e-6
        else:
            assert host.start_skew > 0
    # The merged histogram is the sum of the hosts' HDR counts: its percentiles are those
    # of every request, not an average of the hosts' percentiles.
    merged = result.stat(LATENCY)
    added = _add([entry.stat(LATENCY) for entry in hosts])
    assert merged.histogram().get_total_count() == added.get_total_count() == served
    for percent in (50, 90, 99, 99.9):
        expected = added.get_value_at_percentile(percent)
        assert merged.p(percent) * 1e9 == pytest.approx(
            min(max(expected, merged.min * 1e9), merged.max * 1e9), abs=1)
    parts = [entry.stat(LATENCY) for entry in hosts]
    assert merged.min == min(p.min for p in parts)
    assert merged.max == max(p.max for p in parts)
    assert merged.count == sum(p.count for p in parts)
    assert merged.mean == pytest.approx(sum(p.mean * p.count for p in parts) / merged.count,
                                        rel=1e-9)
    # The nodes' intervals k add up into one timeline, which covers every response once.
    assert intervals == list(result.timeline) and len(intervals) >= 4
    assert sum(record.requests for record in intervals) == merged.count
    assert sum(record.counters.get("upstream_rq_total", 0) for record in intervals) == served
    # And the human report shows the per-host table; every format renders the extra entries.
    text = result.render("human")
    assert "clock offset" in text and "host_1.worker_1" in text
    for output_format in ("json", "yaml", "dotted", "csv", "fortio", "prometheus"):
        assert result.render(output_format)


def test_one_host_of_two(cluster: LocalRayCluster, server: nhbench.TestServer) -> None:
    before = _served(server)
    result = nhbench.run(server.url, ray=cluster.address, hosts=1, rps=50, duration="1s")
    served = _served(server) - before
    assert result.counters["upstream_rq_total"] == served > 0
    assert [h.name for h in result.hosts] == ["host_0"]
    assert [w.name for w in result.workers] == ["host_0.worker_0"]
    assert result.host_result("host_0").counter_values["upstream_rq_total"] == served


def test_cli_json_round_trip(cluster: LocalRayCluster, server: nhbench.TestServer,
                             tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    before = _served(server)
    proc = cli("run", "--ray", cluster.address, server.url, "--hosts", "2", "--rps", "50",
               "--duration", "1s", "--output-format", "json", "--output", str(out))
    served = _served(server) - before
    assert proc.returncode == 0, proc.stderr
    document = json.loads(out.read_text())
    # Nighthawk's Output shape: the hosts are extra results entries, named by host.
    assert [r["name"] for r in document["results"]] == [
        "host_0.worker_0", "host_1.worker_0", "host_0", "host_1", "global"]
    result = nhbench.load_result(out)
    assert result.counters["upstream_rq_total"] == served > 0
    assert result.options.ray == cluster.address and result.options.hosts == 2
    assert [h.name for h in result.hosts] == ["host_0", "host_1"]
    assert all(h.node_id and h.workers for h in result.hosts)
    assert result.scheduled_start is not None
    again = nhbench.Result.model_validate_json(result.model_dump_json())
    assert again.hosts == result.hosts
    assert again.host_result("host_1").counter_values == result.host_result("host_1").counter_values
    assert again.stat(LATENCY) == result.stat(LATENCY)


def test_sweep_steps_run_on_the_cluster(cluster: LocalRayCluster, server: nhbench.TestServer,
                                        tmp_path: Path) -> None:
    out = tmp_path / "c"
    before = _served(server)
    proc = cli("sweep", server.url, "--ray", cluster.address, "--rps", "20", "--max-rps", "40",
               "--step-rps", "20", "--duration", "0.5s", "--no-mpstat", "--out", str(out))
    served = _served(server) - before
    assert proc.returncode == 0, proc.stderr
    campaign = load_campaign(out)
    assert [s.rps_per_worker for s in campaign.steps] == [20, 40]
    total = 0
    for step in campaign.steps:
        result = campaign.result(step.index)
        assert [h.name for h in result.hosts] == ["host_0", "host_1"]
        total += result.counters["upstream_rq_total"]
    assert total == served > 0



def test_adapt_steps_run_on_the_cluster(cluster: LocalRayCluster, server: nhbench.TestServer,
                                        tmp_path: Path) -> None:
    # adapt's steps go through the sweep loop and so through make_benchmark: with --ray
    # every search step is a cluster run, merged as any other.
    before = _served(server)
    outcome = nhbench.adapt(server.url, slo=["error_rate<1%"], min_rps=20, max_rps=40,
                            duration="0.5s", ray=cluster.address, out=tmp_path / "a",
                            captures=False, facts=False)
    served = _served(server) - before
    assert [s.rps_per_worker for s in outcome.steps] == [20, 40]
    assert outcome.reason == "max-rps passed" and outcome.highest_passing_rps == 40
    campaign = load_campaign(tmp_path / "a")
    total = 0
    for step in campaign.steps:
        result = campaign.result(step.index)
        assert [h.name for h in result.hosts] == ["host_0", "host_1"]
        total += result.counters["upstream_rq_total"]
    assert total == served > 0


def test_service_executions_run_on_the_cluster(cluster: LocalRayCluster,
                                               server: nhbench.TestServer) -> None:
    # `nhbench service --ray ADDRESS` runs every execution on the cluster; the client is a
    # generic one (server reflection, dynamic messages), as in tests/test_service.py.
    pytest.importorskip("grpc", reason="needs grpcio (the test extra)")
    pytest.importorskip("grpc_reflection", reason="needs grpcio-reflection (the test extra)")
    process = subprocess.Popen(
        [sys.executable, "-m", "nhbench", "service", "--listen", "127.0.0.1:0",
         "--ray", cluster.address],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
        stdin=subprocess.DEVNULL)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("listening on "), (line, process.stderr)
        two_node_executions(line.split()[-1], server, 1)
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=60)


def test_ctrl_c_stops_every_node(cluster: LocalRayCluster, server: nhbench.TestServer,
                                 tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    before = _served(server)
    code = "import sys; from nhbench.cli import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "run", server.url, "--ray", cluster.address,
         "--rps", "50", "--duration", "60s", "--output-format", "json", "--output", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
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
    result = nhbench.load_result(out)
    assert result.interrupted
    assert result.counters["upstream_rq_total"] == _served(server) - before
    # Both nodes stopped well before the 60 s (each sends 50 per second).
    assert result.counters["upstream_rq_total"] < 2 * 50 * 30


def test_a_lost_node_fails_the_run_by_name(cluster: LocalRayCluster,
                                           server: nhbench.TestServer) -> None:
    before = _served(server)
    code = "import sys; from nhbench.cli import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "run", server.url, "--ray", cluster.address,
         "--rps", "50", "--duration", "60s", "--output-format", "json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
        stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 90
        while _served(server) - before < 20:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no load within 90 s"
            time.sleep(0.1)
        actors = cluster.processes("ray::_LoadActor")
        assert len(actors) == 2
        # One node's load actor dies as if its machine had gone: SIGKILL, nothing said.
        os.kill(actors[0], signal.SIGKILL)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 1, stderr
    # Ray's own report of the dead worker goes to stderr too, never into the output.
    assert stdout == ""
    assert "Traceback" not in stderr
    last = stderr.strip().splitlines()[-1]
    assert "was lost during the run" in last and "no merged result" in last
    assert "host_0 (node " in last or "host_1 (node " in last


def test_more_hosts_than_nodes_is_one_line(cluster: LocalRayCluster) -> None:
    proc = cli("run", "http://127.0.0.1:9/", "--ray", cluster.address, "--hosts", "3",
               "--duration", "1s")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "hosts: 3 nodes asked for" in proc.stderr and "2 alive nodes" in proc.stderr


def test_unreachable_cluster_is_one_line() -> None:

    from support.sockets import reserved_port

    # Bound and never listened on: the connection is refused.
    with reserved_port() as port:
        proc = cli("run", "http://127.0.0.1:9/", "--ray", f"127.0.0.1:{port}", "--duration",
                   "1s")
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert f"cannot reach the Ray cluster at 127.0.0.1:{port}" in proc.stderr


def test_without_ray_installed_is_one_line() -> None:
    # sys.modules[name] = None makes `import ray` fail as it does where Ray is absent.
    proc = cli("run", "http://127.0.0.1:9/", "--ray", "--duration", "1s",
               prelude="import sys; sys.modules['ray'] = None; ")
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "pip install 'nhbench[ray]'" in proc.stderr


def test_import_nhbench_does_not_import_ray() -> None:
    code = ("import sys, nhbench, nhbench.distributed; nhbench.Options(uri='http://x/', "
            "ray='auto'); print(sorted(m for m in sys.modules if m == 'ray' "
            "or m.startswith('ray.')))")
    proc = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                          text=True, env=_env(), timeout=60)
    assert proc.stdout.strip() == "[]"


def test_merge_stats_is_exact_on_core_dicts() -> None:
    a = {"execution_start_ns": 200, "execution_duration_ns": 10,
         "counters": {"upstream_rq_total": 3},
         "histograms": {"h": {"count": 3, "min": 5, "max": 9, "sum": 21.0, "sumsq": 155.0,
                              "counts": [(5, 1), (7, 2)]}},
         "streams": {"s": {"count": 0, "min": 0, "max": 0, "sum": 0.0, "sumsq": 0.0}}}
    b = {"execution_start_ns": 100, "execution_duration_ns": 30,
         "counters": {"upstream_rq_total": 2, "benchmark.http_500": 1},
         "histograms": {"h": {"count": 2, "min": 2, "max": 7, "sum": 9.0, "sumsq": 53.0,
                              "counts": [(2, 1), (7, 1)]}},
         "streams": {"s": {"count": 1, "min": 4, "max": 4, "sum": 4.0, "sumsq": 16.0}}}
    merged = merge_stats([a, b], workers=2)
    assert merged["counters"] == {"upstream_rq_total": 5, "benchmark.http_500": 1}
    assert merged["histograms"]["h"] == {"count": 5, "min": 2, "max": 9, "sum": 30.0,
                                         "sumsq": 208.0, "counts": [(2, 1), (5, 1), (7, 3)]}
    # An empty part has no min: the stream's min is the non-empty part's.
    assert merged["streams"]["s"] == {"count": 1, "min": 4, "max": 4, "sum": 4.0,
                                      "sumsq": 16.0}
    assert merged["execution_start_ns"] == 100
    assert merged["execution_duration_ns"] == 20


def _group(kind: str, value: bytes, requests: int, twos: int,
           counts: list[tuple[int, int]]) -> dict[str, object]:
    latency = {"count": sum(c for _, c in counts), "min": min((i for i, _ in counts), default=0),
               "max": max((i for i, _ in counts), default=0), "sum": 0.0, "sumsq": 0.0,
               "counts": counts}
    return {"kind": kind, "value": value, "requests": requests,
            "classes": [0, 0, twos, 0, 0, requests - twos], "failures": 0, "check_failed": 0,
            "latency": latency}


def test_merge_groups_by_value_with_the_bound() -> None:
    # Node a saw 60 values, node b 10 of a's and 10 of its own: the merge joins a's values by
    # value, takes 4 of b's own up to the bound of 64, and the last 6 go to "other" with each
    # node's own "other"; "none" adds up; a value only the warm-up saw (0 requests) is dropped.
    a = [_group("none", b"", 3, 0, [(5, 3)]),
         *(_group("value", b"v%d" % i, 2, 2, [(7, 2)]) for i in range(60)),
         _group("value", b"warm", 0, 0, []),
         _group("other", b"", 1, 1, [(9, 1)])]
    b = [_group("none", b"", 1, 0, [(4, 1)]),
         *(_group("value", b"v%d" % i, 5, 4, [(7, 3), (8, 2)]) for i in range(50, 60)),
         *(_group("value", b"w%d" % i, 1, 1, [(6, 1)]) for i in range(10)),
         _group("other", b"", 2, 2, [(9, 2)])]
    merged = merge_groups([a, b])
    assert [g["kind"] for g in merged] == ["none"] + ["value"] * 64 + ["other"]
    values = {bytes(g["value"]): g for g in merged if g["kind"] == "value"}
    assert list(values)[:60] == [b"v%d" % i for i in range(60)]
    assert list(values)[60:] == [b"w0", b"w1", b"w2", b"w3"]
    assert values[b"v55"]["requests"] == 7 and values[b"v55"]["classes"][2] == 6
    assert values[b"v55"]["latency"]["counts"] == [(7, 5), (8, 2)]
    assert values[b"v1"]["requests"] == 2 and values[b"w0"]["requests"] == 1
    assert merged[0]["requests"] == 4 and merged[0]["latency"]["counts"] == [(4, 1), (5, 3)]
    # b's last six values (one request each) and both nodes' own "other".
    assert merged[-1]["requests"] == 6 + 1 + 2
    assert merged[-1]["latency"]["counts"] == [(6, 6), (9, 3)]
    assert sum(g["requests"] for g in merged) == (3 + 120 + 1) + (1 + 50 + 10 + 2)
    # By request kind every node has the same planned groups: they add index by index.
    by_kind = merge_groups([[_group("index", b"", 2, 2, [(1, 2)]), _group("index", b"", 1, 0, [])],
                            [_group("index", b"", 3, 3, [(1, 3)]), _group("index", b"", 0, 0, [])]])
    assert [(g["kind"], g["requests"]) for g in by_kind] == [("index", 5), ("index", 1)]
    assert by_kind[0]["latency"]["counts"] == [(1, 5)]
    assert merge_groups([[], []]) == []


def test_groups_merge_across_hosts(cluster: LocalRayCluster) -> None:
    # Two servers answering x-served-by alpha and beta behind a round-robin multi-target:
    # both nodes send to both; each value's merged count is exactly that server's count, and
    # its latency histogram holds each of its responses.
    with nhbench.TestServer(subprocess=True, admin="127.0.0.1:0",
                            response_headers={"x-served-by": "alpha"}) as a, \
            nhbench.TestServer(subprocess=True, admin="127.0.0.1:0",
                               response_headers={"x-served-by": "beta"}) as b:
        endpoints = [f"127.0.0.1:{a.address[1]}", f"127.0.0.1:{b.address[1]}"]
        seen: list[nhbench.Progress] = []
        result = nhbench.run(None, multi_target_endpoint=endpoints, multi_target_path="/",
                             cluster=nhbench.Cluster(cluster.address), rps=50, duration="1.5s",
                             connections=2, group_by="header:x-served-by",
                             on_progress=seen.append)
        served = {"alpha": _served(a), "beta": _served(b)}
    assert result.success, result.error
    assert result.groups is not None and result.groups.by == "header:x-served-by"
    groups = {g.name: g for g in result.groups.groups}
    assert set(groups) == {"alpha", "beta"}, groups
    assert {name: g.requests for name, g in groups.items()} == served
    assert sum(served.values()) == result.counters["upstream_rq_total"] > 0
    for group in groups.values():
        assert group.status_2xx == group.requests == group.latency.count
    assert result.groups.spread is not None and result.groups.spread < 1.5
    # The live snapshots sum the nodes' groups by name.
    live = [p for p in seen if p.groups]
    assert live, len(seen)
    last = {g.name: g.requests for g in live[-1].groups}
    assert set(last) <= {"alpha", "beta"} and last
    assert all(0 < n <= served[name] for name, n in last.items())


def test_pushed_metrics_come_from_the_controller(cluster: LocalRayCluster,
                                                 server: nhbench.TestServer) -> None:
    # docs/telemetry.md: the controller pushes the merged intervals (every node's interval
    # k added up, HDR counts included), so the pushes add up to the merged result.
    from support.metric_sinks import StatsdServer

    before = _served(server)
    with StatsdServer("udp") as statsd:
        result = nhbench.run(server.url, cluster=nhbench.Cluster(cluster.address), rps=100,
                             duration="1s", statsd=[statsd.address],
                             stats_flush_interval="0.5s")
        served = _served(server) - before
        lines = statsd.lines()
    pushed = sum(int(line.value) for line in lines
                 if line.name == "envoy.cluster.nhbench.upstream_rq_total")
    assert pushed == result.counters["upstream_rq_total"] == served > 0
    timers = sum(round(1 / line.rate) if line.rate else 1 for line in lines
                 if line.kind == "ms")
    assert timers == result.stat(LATENCY).count


def test_endpoints_merge_across_hosts(cluster: LocalRayCluster) -> None:
    # --resolve with two addresses, round robin: every node spreads its connections over
    # both; the controller adds the nodes' endpoints by name (counts add, HDR counts add)
    # and its live snapshots carry them too. Each address is its own server, whose count
    # must equal the merged endpoint's.
    from support.sockets import free_port

    addresses = ("127.0.0.1", "127.0.0.2")
    for _ in range(5):
        port = free_port()
        with contextlib.ExitStack() as stack:
            try:
                servers = [stack.enter_context(nhbench.TestServer(
                    listen=f"{a}:{port}", subprocess=True, admin="127.0.0.1:0"))
                    for a in addresses]
            except nhbench.NHBenchError:
                continue  # the port was taken on one of the addresses meanwhile
            seen: list[nhbench.Progress] = []
            result = nhbench.run(f"http://backend.invalid:{port}/", resolve=[",".join(addresses)],
                                 dns_method="rr", cluster=nhbench.Cluster(cluster.address),
                                 rps=100, duration="1.5s", concurrency=2,
                                 max_requests_per_connection=5, on_progress=seen.append)
            served = [_served(server) for server in servers]
            break
    else:
        pytest.fail("no port free on both loopback addresses")
    assert result.success, result.error
    names = [f"{a}:{port}" for a in addresses]
    assert [e.name for e in result.endpoints] == names
    total = result.counters["upstream_rq_total"]
    assert sum(e.requests for e in result.endpoints) == total == sum(served) > 0
    for endpoint, count in zip(result.endpoints, served, strict=True):
        # Both nodes sent to both addresses; each server saw exactly its endpoint's share.
        assert endpoint.requests == count > total // 4
        assert endpoint.errors == 0 and endpoint.latency.count == endpoint.requests
    assert sum(e.connections for e in result.endpoints) == result.counters["upstream_cx_total"]
    # The merged latency histograms add up to the run's.
    assert sum(e.latency.histogram().get_total_count() for e in result.endpoints) == (
        result.stat("benchmark_http_client.request_to_response").count)
    live = [p for p in seen if p.endpoints]
    assert live, len(seen)
    assert all([e.name for e in p.endpoints] == names for p in live)
    last = live[-1]
    assert 0 < sum(e.requests for e in last.endpoints) <= total
    for mid, final in zip(last.endpoints, result.endpoints, strict=True):
        assert mid.requests <= final.requests and mid.connections <= final.connections


def test_every_node_has_a_validity_and_the_merge_names_them(
        cluster: LocalRayCluster, server: nhbench.TestServer) -> None:
    # docs/trust.md "Validity": each node's verdict from its own workers, the merged one
    # over every node's workers' loads.
    result = nhbench.run(server.url, cluster=nhbench.Cluster(cluster.address), rps=50,
                         duration="1s", concurrency=2, stats_interval="0.1s")
    assert result.success, result.error
    validity = result.validity
    assert validity is not None
    # Every worker of every node: their thread CPU and wall time in the measured phase.
    assert len(validity.workers) == 4
    for load in validity.workers:
        assert 0.5 < load.wall_time < 3.0 and 0 < load.cpu_time < load.wall_time
    assert validity.hiccup is not None and validity.hiccup.count > 4 * 50
    for host in result.hosts:
        assert host.validity is not None
        assert [c.name for c in host.validity.checks][:3] == [
            "cpu_share", "run_queue_wait", "hiccup"]
        # A node's share of the rate is its workers' (2 x 50), not the run's.
        schedule = next(c for c in host.validity.checks if c.name == "schedule")
        assert schedule.verdict == "not tested" or "sent of 100 planned" in schedule.reason
    # The merged verdict is the worst of its own checks and of every node's.
    order = ["valid", "suspect", "invalid"]
    own = [c.verdict for c in validity.checks if c.node is None and c.verdict in order]
    nodes = [h.validity.verdict for h in result.hosts if h.validity is not None]
    assert validity.verdict == max(["valid", *own, *nodes], key=order.index)
    for check in validity.checks:
        assert check.node in (None, "host_0", "host_1")


def test_a_starved_schedule_is_invalid_on_every_node_by_name(
        cluster: LocalRayCluster, tmp_path: Path) -> None:
    # One connection per node to a server that delays each response by 5 ms cannot carry
    # 2,000 requests per second: every node blocks, so every node is invalid, and the
    # merged verdict's reasons name both; --validity strict exits 98 for it.
    out = tmp_path / "starved.json"
    with nhbench.TestServer(subprocess=True, static_delay="5ms") as slow:
        proc = cli("run", "--ray", cluster.address, slow.url, "--hosts", "2", "--rps", "2000",
                   "--connections", "1", "--duration", "1s", "--validity", "strict",
                   "--output-format", "json", "--output", str(out))
    assert proc.returncode == 98, proc.stderr
    assert "the run is invalid (--validity strict)" in proc.stderr
    result = nhbench.load_result(out)
    assert result.validity is not None and result.validity.verdict == "invalid"
    for host in result.hosts:
        assert host.validity is not None and host.validity.verdict == "invalid"
    reasons = result.validity.reasons
    assert any(r.startswith("invalid: blocked: ") for r in reasons), reasons  # the whole run
    for name in ("host_0", "host_1"):
        assert any(r.startswith(f"invalid: blocked on {name}: ") for r in reasons), reasons
    assert len(result.validity.workers) == 2


# ---- campaigns keep one connection and one set of actors (RaySession) ----------------------


def _actor_pids(cluster: LocalRayCluster) -> list[int]:
    return cluster.processes("ray::_LoadActor")


def _until_no_actors(cluster: LocalRayCluster, seconds: float = 30.0) -> list[int]:
    # ray.kill ends an actor's worker process asynchronously.
    deadline = time.monotonic() + seconds
    while _actor_pids(cluster) and time.monotonic() < deadline:
        time.sleep(0.2)
    return _actor_pids(cluster)


def test_a_sweep_keeps_one_connection_and_one_set_of_actors(
        cluster: LocalRayCluster, server: nhbench.TestServer, tmp_path: Path) -> None:
    # Every step runs on the same two actor processes (listed by the cluster itself while
    # the sweep runs), from one ray.init; each step's result is the cluster run's as before.
    from nhbench.sweep import Sweep, prepare_sweep

    seen: list[tuple[list[int], int, int]] = []
    sweep: Sweep | None = None

    def on_step(record: object) -> None:
        assert sweep is not None and sweep.ray_session is not None
        session = sweep.ray_session
        seen.append((_actor_pids(cluster), session.connections, session.actors_started))

    before = _served(server)
    config = prepare_sweep({"url": server.url, "ray": cluster.address, "rps": 20,
                            "max_rps": 80, "step_rps": 20, "duration": "0.5s",
                            "out": str(tmp_path / "c")})
    sweep = Sweep(config, captures=False, facts=False, reports=False, stream=None,
                  on_step=on_step)
    campaign = sweep.run()
    served = _served(server) - before
    assert [s.rps_per_worker for s in campaign.steps] == [20, 40, 60, 80]
    assert len(seen) == 4
    pids = seen[0][0]
    assert len(pids) == 2, seen
    assert all(step == (pids, 1, 2) for step in seen), seen
    total = 0
    for step in campaign.steps:
        result = campaign.result(step.index)
        assert [h.name for h in result.hosts] == ["host_0", "host_1"]
        assert len({h.node_id for h in result.hosts}) == 2
        assert [w.name for w in result.workers] == ["host_0.worker_0", "host_1.worker_0"]
        total += result.counters["upstream_rq_total"]
    assert total == served > 0
    # The campaign's end closed the session: its actors are gone.
    assert sweep.ray_session is None
    assert _until_no_actors(cluster) == []


def test_adapt_keeps_one_set_of_actors(cluster: LocalRayCluster, server: nhbench.TestServer,
                                       tmp_path: Path) -> None:
    # adapt's search steps go through the same loop: one actor process per node for all.
    seen: list[list[int]] = []
    outcome = nhbench.adapt(server.url, slo=["error_rate<1%"], min_rps=20, max_rps=80,
                            duration="0.5s", ray=cluster.address, out=tmp_path / "a",
                            captures=False, facts=False,
                            on_step=lambda record: seen.append(_actor_pids(cluster)))
    assert outcome.highest_passing_rps == 80 and len(outcome.steps) >= 2
    assert len(seen) == len(outcome.steps)
    assert len(seen[0]) == 2 and all(pids == seen[0] for pids in seen), seen
    assert _until_no_actors(cluster) == []


def test_a_session_outlives_refusals_placement_changes_and_a_lost_node(
        cluster: LocalRayCluster, server: nhbench.TestServer) -> None:
    from nhbench.distributed import RaySession, make_benchmark
    from nhbench.options import make_options

    def run(session: RaySession, **options: object) -> nhbench.Result:
        values = {"ray": cluster.address, "rps": 50, "duration": "0.5s", **options}
        return make_benchmark(make_options(server.url, **values), session=session).run()

    with RaySession() as session:
        before = _served(server)
        first = run(session)
        assert first.counters["upstream_rq_total"] == _served(server) - before > 0
        assert (session.connections, session.actors_started, session.actors) == (1, 2, 2)
        pids = _actor_pids(cluster)
        # Refused before any actor had work: the actors stay as they were.
        with pytest.raises(nhbench.OptionsError, match="3 nodes asked for"):
            run(session, hosts=3)
        before = _served(server)
        second = run(session)
        assert second.counters["upstream_rq_total"] == _served(server) - before > 0
        assert [h.name for h in second.hosts] == ["host_0", "host_1"]
        assert [h.node_id for h in second.hosts] == [h.node_id for h in first.hosts]
        assert (session.connections, session.actors_started) == (1, 2)
        assert _actor_pids(cluster) == pids
        # One node of two: its actor is kept, the other ends; two again: one new actor.
        one = run(session, hosts=1)
        assert [h.node_id for h in one.hosts] == [first.hosts[0].node_id]
        assert (session.actors_started, session.actors) == (2, 1)
        run(session)
        assert (session.actors_started, session.actors) == (3, 2)
        # A node lost mid-run fails that run by name; the next run places fresh actors.
        failure = failure_when_killed(lambda: run(session, duration="60s"), server,
                                      lambda: os.kill(_actor_pids(cluster)[0], signal.SIGKILL))
        assert isinstance(failure, nhbench.RunError), failure
        assert "was lost during the run" in str(failure)
        assert session.actors == 0
        before = _served(server)
        after = run(session)
        assert after.success, after.error
        assert after.counters["upstream_rq_total"] == _served(server) - before > 0
        assert (session.connections, session.actors_started, session.actors) == (1, 5, 2)
    assert session.actors == 0
    assert _until_no_actors(cluster) == []


def test_service_executions_share_one_session(cluster: LocalRayCluster,
                                              server: nhbench.TestServer) -> None:
    # Two executions of `service --ray` on the same actors; the session closes when idle.
    pytest.importorskip("grpc", reason="needs grpcio (the test extra)")
    pytest.importorskip("grpc_reflection", reason="needs grpcio-reflection (the test extra)")

    from nhbench.service._server import Service

    service = Service(("127.0.0.1", 0), overrides={"ray": cluster.address},
                      ray_idle_timeout=3.0)
    service.start()
    pids: list[list[int]] = []
    try:
        two_node_executions(service.address, server, 2,
                            lambda: pids.append(_actor_pids(cluster)))
        session = service.ray_session
        assert session is not None
        assert (session.connections, session.actors_started, session.actors) == (1, 2, 2)
        assert len(pids[0]) == 2 and pids[1] == pids[0]
        # Idle past the time-out: the actors end (and the connection with them).
        assert wait_until(lambda: service.ray_session is None, timeout=30, step=0.2)
        assert session.actors == 0
        assert _until_no_actors(cluster) == []
    finally:
        service.stop(drain=30)


@pytest.mark.skipif(not ROOM, reason="the hard RLIMIT_NOFILE is below 4096 here")
def test_a_node_whose_limit_cannot_hold_its_share_refuses_the_whole_run_first(
        cluster: LocalRayCluster, server: nhbench.TestServer) -> None:
    # 1,500 connections fit on node 0 and not under node 1's limit: every node is asked
    # before any has its run, so the run is refused naming node 1, and node 0 never opened
    # a connection (--prefetch-connections opens all of them as soon as its run arms).
    from nhbench.distributed import RaySession, make_benchmark
    from nhbench.options import make_options

    args = ["--connections", "1500", "--prefetch-connections", "--rps", "20",
            "--duration", "1s"]
    seen = server.stats()
    proc = cli("run", server.url, "--ray", cluster.address, *args)
    line = refused_before_sending(proc, server, seen)
    match = re.fullmatch(
        r"nhbench: error: --connections: host_[01] \(node ([0-9a-f]{12}), [^)]+\): 1,500 "
        r"connections need [\d,]+ descriptors \(.*\), more than RLIMIT_NOFILE's hard limit "
        r"of 1,024; at most \d+ connections per worker fit \(1 of 2 nodes refused; no node "
        r"started\)", line)
    assert match is not None, line
    assert match.group(1) == cluster.node_ids()[1][:12]

    # In a session (a campaign's steps): the refusal leaves the actors as they were, and the
    # next run, which fits everywhere, runs on them.
    def options(**values: object) -> object:
        return make_options(server.url, ray=cluster.address, **values)

    with RaySession() as session:
        make_benchmark(options(rps=20, duration="0.5s"), session=session).run()
        pids = _actor_pids(cluster)
        seen = server.stats()
        with pytest.raises(nhbench.OptionsError, match=r"^connections: host_[01] \(node "):
            make_benchmark(options(connections=1500, prefetch_connections=True, rps=20,
                                   duration="1s"), session=session).run()
        now = server.stats()
        assert (now["requests"], now["connections_total"]) == (
            seen["requests"], seen["connections_total"])
        assert (session.connections, session.actors_started, session.actors) == (1, 2, 2)
        assert _actor_pids(cluster) == pids
        result = make_benchmark(options(rps=20, duration="0.5s"), session=session).run()
        assert result.counters["upstream_rq_total"] == _served(server) - now["requests"] > 0
        assert session.actors_started == 2
