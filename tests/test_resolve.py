"""Resolution controls and per-endpoint counters: `--resolve` (connect to these addresses,
the URL's host stays in Host and the TLS name), `--dns-method first|rr|random` (how new
connections spread over a name's addresses) and the result's per-endpoint connections,
requests, errors and latency, for addresses and for several targets.

Every count is checked against real servers: one nhbench test server per loopback address
(127.0.0.1, .2, .3 on one port; all of 127.0.0.0/8 is local on Linux), whose own request
counts must equal ours per endpoint. Fortio 1.66.5 runs side by side on `-resolve`.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack

import pytest
from support.cli import nhbench_cli as cli
from support.peers import peer_env, require_fortio
from support.scripted_origin import Reply, ScriptedOrigin
from support.sockets import free_port

import nhbench

pytestmark = pytest.mark.core

CPUS = sorted(os.sched_getaffinity(0))
CLIENT_CPU = str(CPUS[0])
SERVER_CPUS = [CPUS[1] if len(CPUS) > 1 else CPUS[0]]
ADDRESSES = ("127.0.0.1", "127.0.0.2", "127.0.0.3")
# A name that no resolver knows: only --resolve can make it reachable.
NAME = "backend.invalid"



def run(url: str | None, **kw: object) -> nhbench.Result:
    kw.setdefault("cpus", CLIENT_CPU)
    kw.setdefault("start_delay", 0.1)
    kw.setdefault("max_pending_requests", 1000)
    return nhbench.run(url, **kw)


@pytest.fixture
def servers() -> Iterator[tuple[int, dict[str, nhbench.TestServer]]]:
    """One test server on each of ADDRESSES, all on the same port."""
    for _ in range(5):
        port = free_port()
        with ExitStack() as stack:
            try:
                started = {a: stack.enter_context(nhbench.TestServer(
                    listen=f"{a}:{port}", cpus=SERVER_CPUS)) for a in ADDRESSES}
            except nhbench.NHBenchError:
                continue  # the port was taken on one of the addresses meanwhile
            yield port, started
            return
    pytest.fail("no port free on every loopback address")


def by_endpoint(result: nhbench.Result) -> dict[str, nhbench.EndpointResult]:
    return {e.name: e for e in result.endpoints}


def test_rr_spreads_connections_evenly_and_counts_match_each_server(servers):
    port, started = servers
    # About 60 connections of 5 requests each (the last ones may carry fewer when the
    # 300th request ends the run): round robin gives each address the next one in turn.
    result = run(f"http://{NAME}:{port}/", resolve=[",".join(ADDRESSES)], dns_method="rr",
                 connections=6, max_requests_per_connection=5, requests=300, rps=600)
    assert result.counters["benchmark.http_2xx"] == 300
    endpoints = by_endpoint(result)
    assert list(endpoints) == [f"{a}:{port}" for a in ADDRESSES]
    for address, server in started.items():
        endpoint = endpoints[f"{address}:{port}"]
        assert server.stats()["requests"] == endpoint.requests
        assert server.stats()["connections_total"] == endpoint.connections
        assert 90 <= endpoint.requests <= 110
        assert endpoint.errors == 0 and endpoint.latency.count == endpoint.requests
    connections = [e.connections for e in endpoints.values()]
    assert max(connections) - min(connections) <= 1 and min(connections) >= 19
    assert sum(e.connections for e in endpoints.values()) == result.counters["upstream_cx_total"]


def test_first_uses_one_address(servers):
    port, started = servers
    result = run(f"http://{NAME}:{port}/", resolve=list(ADDRESSES), dns_method="first",
                 connections=4, max_requests_per_connection=2, requests=40, rps=400)
    assert result.counters["benchmark.http_2xx"] == 40
    # One address: nothing per endpoint, as a run without the option.
    assert result.endpoints == []
    assert [s.stats()["requests"] for s in started.values()] == [40, 0, 0]


def test_random_uses_every_address(servers):
    port, started = servers
    # 240 one-request connections drawn at random over 3 addresses: each gets about 80;
    # below 30 has a probability far under 1e-9.
    result = run(f"http://{NAME}:{port}/", resolve=list(ADDRESSES), dns_method="random",
                 connections=4, max_requests_per_connection=1, requests=240, rps=1000)
    assert result.counters["benchmark.http_2xx"] == 240
    endpoints = by_endpoint(result)
    for address, server in started.items():
        endpoint = endpoints[f"{address}:{port}"]
        assert server.stats()["requests"] == endpoint.requests == endpoint.connections
        assert 30 <= endpoint.requests <= 150


@pytest.mark.parametrize("protocol", ["http1", "http2"])
def test_rr_over_ipv4_and_ipv6(protocol):
    # A name with an IPv4 and an IPv6 address (localhost often has both): --resolve gives
    # both, and with auto each family gets every other connection.
    for _ in range(5):
        port = free_port()
        try:
            with nhbench.TestServer(listen=f"127.0.0.1:{port}", cpus=SERVER_CPUS) as v4, \
                    nhbench.TestServer(listen=f"[::1]:{port}", cpus=SERVER_CPUS) as v6:
                result = run(f"http://{NAME}:{port}/", resolve=["127.0.0.1,[::1]"],
                             dns_method="rr", protocol=protocol, connections=2,
                             max_requests_per_connection=3, requests=60, rps=300)
                got = by_endpoint(result)
                assert list(got) == [f"127.0.0.1:{port}", f"[::1]:{port}"]
                assert got[f"127.0.0.1:{port}"].requests == v4.stats()["requests"]
                assert got[f"[::1]:{port}"].requests == v6.stats()["requests"]
                assert 20 <= v4.stats()["requests"] <= 40
                assert result.counters["benchmark.http_2xx"] == 60
                return
        except nhbench.NHBenchError:
            continue
    pytest.fail("no port free on both loopback addresses")


def test_a_warmup_counts_apart(servers):
    port, started = servers
    # The warm-up's requests are not the measured ones; its connections are counted, as
    # Fortio counts sockets.
    result = run(f"http://{NAME}:{port}/", resolve=list(ADDRESSES), dns_method="rr",
                 connections=3, max_requests_per_connection=2, warmup=0.3, duration=0.5,
                 rps=200)
    measured = sum(e.requests for e in result.endpoints)
    assert measured == result.counters["benchmark.http_2xx"] > 0
    served = sum(s.stats()["requests"] for s in started.values())
    assert served == measured + result.warmup.counter_values["benchmark.http_2xx"]
    assert sum(e.connections for e in result.endpoints) == (
        result.counters["upstream_cx_total"]
        + result.warmup.counter_values["upstream_cx_total"])


def test_errors_are_counted_on_the_endpoint_that_failed(servers):
    port, started = servers
    # 127.0.0.9 has no server: its connections are refused, each request an error there.
    result = run(f"http://{NAME}:{port}/", resolve=["127.0.0.1", "127.0.0.9"],
                 dns_method="rr", connections=2, max_requests_per_connection=1,
                 requests=40, rps=400, failure_predicate={}, allow_no_success=True)
    endpoints = by_endpoint(result)
    good, bad = endpoints[f"127.0.0.1:{port}"], endpoints[f"127.0.0.9:{port}"]
    assert good.errors == 0 and good.requests == started["127.0.0.1"].stats()["requests"]
    assert bad.requests > 0 and bad.errors == bad.requests and bad.latency.count == 0
    assert good.requests + bad.requests == (result.counters["benchmark.http_2xx"]
                                            + result.error_count)


def test_multi_target_endpoints_have_their_own_counters():
    with nhbench.TestServer(listen="127.0.0.1:0", cpus=SERVER_CPUS) as a, \
            nhbench.TestServer(listen="127.0.0.1:0", cpus=SERVER_CPUS) as b:
        endpoints = [f"127.0.0.1:{a.address[1]}", f"127.0.0.1:{b.address[1]}"]
        result = run(None, multi_target_endpoint=endpoints, multi_target_path="/",
                     connections=2, requests=60, rps=300)
        got = by_endpoint(result)
        assert list(got) == endpoints
        assert got[endpoints[0]].requests == a.stats()["requests"] == 30
        assert got[endpoints[1]].requests == b.stats()["requests"] == 30


def test_resolve_keeps_the_host_header():
    origin = ScriptedOrigin(respond=lambda _: Reply(
        b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
    try:
        result = run(f"http://{NAME}:{origin.port}/x", resolve=["127.0.0.1"], requests=3,
                     rps=100, connections=1)
        assert result.counters["benchmark.http_2xx"] == 3
        assert all(f"\r\nHost: {NAME}:{origin.port}\r\n".encode() in request
                   for request in origin.requests)
        assert len(origin.requests) == 3
    finally:
        origin.close()


def test_resolve_keeps_the_tls_name(tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-subj", f"/CN={NAME}", "-addext", f"subjectAltName=DNS:{NAME}",
         "-keyout", str(key), "-out", str(cert), "-days", "2"],
        check=True, capture_output=True, env=peer_env())
    with nhbench.TestServer(listen="127.0.0.2:0", tls_cert=str(cert), tls_key=str(key),
                            cpus=SERVER_CPUS) as server:
        port = server.address[1]
        # Verified against the URL's name, which only the certificate and --resolve know.
        result = run(f"https://{NAME}:{port}/", resolve=["127.0.0.2"], cacert=str(cert),
                     requests=5, rps=100, connections=1)
        assert result.counters["benchmark.http_2xx"] == 5
        assert result.counters["ssl.handshake"] == 1
        # The same address under another name fails verification: the name is what counts.
        other = run(f"https://other.invalid:{port}/", resolve=["127.0.0.2"],
                    cacert=str(cert), requests=1, rps=100, connections=1,
                    allow_no_success=True)
        assert other.counters["ssl.connection_error"] >= 1
        assert server.stats()["requests"] == 5


def test_human_report_shows_the_spread(servers):
    port, _ = servers
    proc = cli("run", f"http://{NAME}:{port}/", "--resolve", ",".join(ADDRESSES),
               "--dns-method", "rr", "--connections", "3", "--max-requests-per-connection",
               "2", "--requests", "30", "--rps", "300", "--cpus", CLIENT_CPU)
    assert proc.returncode == 0, proc.stderr
    table = proc.stdout.split("\nEndpoint", 1)[1].split("\n\n", 1)[0].splitlines()
    assert len(table) == 4  # the header and one line per address
    # 15 connections of 2 requests, one address after the other: about 5 each.
    for line, address in zip(table[1:], ADDRESSES, strict=True):
        name, connections, requests = line.split()[:3]
        assert name == f"{address}:{port}"
        assert 4 <= int(connections) <= 6 and 8 <= int(requests) <= 12


def test_live_progress_shows_each_endpoint(servers):
    # The live snapshots carry every endpoint's counts as they grow (the core publishes
    # them with its counters every 10 ms); the last one before the end is at most what the
    # result counts, and the display prints one line per endpoint.
    from nhbench._live import format_endpoints

    port, started = servers
    seen: list[nhbench.Progress] = []
    result = run(f"http://{NAME}:{port}/", resolve=[",".join(ADDRESSES)], dns_method="rr",
                 connections=3, max_requests_per_connection=2, rps=300, duration="1.5s",
                 on_progress=seen.append)
    names = [f"{a}:{port}" for a in ADDRESSES]
    assert [e.name for e in result.endpoints] == names
    live = [p for p in seen if p.endpoints]
    assert len(live) >= 5, len(seen)
    assert all([e.name for e in p.endpoints] == names for p in live)
    # They grow, and while the run goes each endpoint takes its share.
    totals = [sum(e.requests for e in p.endpoints) for p in live]
    assert totals == sorted(totals) and totals[-1] > totals[0]
    last = live[-1]
    for mid, final in zip(last.endpoints, result.endpoints, strict=True):
        assert 0 < mid.requests <= final.requests
        assert 0 < mid.connections <= final.connections
    assert sum(e.requests for e in last.endpoints) <= result.counters["benchmark.http_2xx"]
    lines = format_endpoints(last)
    assert [line.split()[0] for line in lines] == names
    assert all("connections" in line and "requests" in line for line in lines)
    # One endpoint: no per-endpoint entries, live or final.
    single: list[nhbench.Progress] = []
    one = run(f"http://127.0.0.1:{port}/", rps=100, duration="0.5s", on_progress=single.append)
    assert one.endpoints == [] and single and all(not p.endpoints for p in single)
    assert format_endpoints(single[-1]) == []


def test_prometheus_endpoint_serves_each_endpoint(servers):
    # --prometheus-listen's metrics: one series per endpoint, labelled with its name, at
    # the last progress snapshot's counts.
    import urllib.request

    pytest.importorskip("prometheus_client")
    from nhbench._prometheus import PrometheusEndpoint

    port, _ = servers
    endpoint = PrometheusEndpoint("127.0.0.1", 0)
    host, metrics_port = endpoint.start()
    seen: list[nhbench.Progress] = []

    def on_progress(progress: nhbench.Progress) -> None:
        seen.append(progress)
        endpoint.on_progress(progress)

    try:
        run(f"http://{NAME}:{port}/", resolve=[",".join(ADDRESSES)], dns_method="rr",
            connections=3, max_requests_per_connection=2, rps=300, duration="1s",
            on_progress=on_progress)
        with urllib.request.urlopen(f"http://{host}:{metrics_port}/metrics", timeout=5) as r:
            text = r.read().decode()
    finally:
        endpoint.stop()
    last = seen[-1]
    assert len(last.endpoints) == 3
    for e in last.endpoints:
        for metric, value in (("requests", e.requests), ("connections", e.connections),
                              ("errors", e.errors)):
            line = f'nhbench_endpoint_{metric}_total{{endpoint="{e.name}"}} {float(value)}'
            assert line in text, (line, text[:2000])
        assert e.requests > 0


def test_ui_live_records_carry_each_endpoint(servers, tmp_path):
    # nhbench ui's live page: every interval event carries the endpoints' counts so far
    # (RunManager keeps the latest progress snapshot with each record).
    from nhbench.browse import RunManager
    from nhbench.options import UILimits

    port, _ = servers
    manager = RunManager(str(tmp_path), UILimits(max_rate=0))
    options = nhbench.Options(uri=f"http://{NAME}:{port}/", resolve=[",".join(ADDRESSES)],
                              dns_method="rr", rps=200, duration=1.5, connections=3,
                              max_requests_per_connection=2, stats_interval=0.25,
                              cpus=CLIENT_CPU)
    live = manager.start(options, save=False)
    assert live.wait(60) and live.state == "done", live.error
    names = [f"{a}:{port}" for a in ADDRESSES]
    rows = [record["endpoints"] for record in live.records if record["endpoints"]]
    assert len(rows) >= 3, live.records
    assert all([row[0] for row in endpoints] == names for endpoints in rows)
    totals = [sum(row[2] for row in endpoints) for endpoints in rows]
    assert totals == sorted(totals) and totals[-1] > 0
    final = {e.name: e.requests for e in live.result.endpoints}
    assert all(row[2] <= final[row[0]] for row in rows[-1])


@pytest.mark.parametrize(("args", "named"), [
    (["--resolve", "127.0.0.1:80"], "resolve"),
    (["--resolve", "not a host"], "resolve"),
    (["--dns-method", "cached-rr"], "dns_method"),
    (["--resolve", "127.0.0.1", "--address-family", "v6"], "resolve"),
])
def test_bad_resolution_options_are_refused_by_name(args, named):
    proc = cli("run", "http://127.0.0.1:9/", *args)
    assert proc.returncode == 2
    assert named.replace("_", "-") in proc.stderr or named in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_resolve_with_a_unix_socket_is_refused(tmp_path):
    path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(path))
        listener.listen()
        proc = cli("run", "http://127.0.0.1:9/", "--resolve", "127.0.0.1", "--unix-socket",
                   str(path))
    assert proc.returncode == 2
    assert "resolve" in proc.stderr and "unix" in proc.stderr


def test_dns_method_with_several_targets_is_refused():
    proc = cli("run", "--multi-target-endpoint", "127.0.0.1:9", "--multi-target-path", "/",
               "--dns-method", "rr")
    assert proc.returncode == 2
    assert "dns" in proc.stderr and "multi" in proc.stderr


def _fortio_ip_lines(text: str) -> dict[str, int]:
    section = text.split("IP addresses distribution:\n", 1)[1]
    found = {}
    for line in section.splitlines():
        match = re.fullmatch(r"(\S+): (\d+)", line)
        if not match:
            break
        found[match.group(1)] = int(match.group(2))
    return found


@pytest.mark.parametrize("method", ["cached-rr", "rnd"])
def test_fortio_resolve_side_by_side(servers, tmp_path, method):
    fortio = require_fortio()
    port, started = servers
    url = f"http://{NAME}:{port}/"
    args = ["load", "-qps", "200", "-c", "2", "-n", "20", "-dns-method", method,
            "-resolve", "127.0.0.2"]
    theirs = subprocess.run([fortio, *args, "-json", str(tmp_path / "f.json"), url],
                            capture_output=True, text=True, timeout=60, env=peer_env())
    assert theirs.returncode == 0, theirs.stderr
    after_fortio = started["127.0.0.2"].stats()["requests"]
    ours = cli("fortio", *args, "-json", str(tmp_path / "n.json"), url)
    assert ours.returncode == 0, ours.stderr
    # Both sent every request to 127.0.0.2, under the URL's name, and said so alike.
    assert after_fortio == 20
    assert started["127.0.0.2"].stats()["requests"] == 40
    assert started["127.0.0.1"].stats()["requests"] == 0
    assert _fortio_ip_lines(theirs.stdout + theirs.stderr) == _fortio_ip_lines(
        ours.stdout + ours.stderr) == {
        f"127.0.0.2:{port}": 2}
    f_json = json.loads((tmp_path / "f.json").read_text())
    n_json = json.loads((tmp_path / "n.json").read_text())
    assert f_json["IPCountMap"] == n_json["IPCountMap"] == {f"127.0.0.2:{port}": 2}


def test_fortio_resolve_ipv6_literal_side_by_side():
    # Fortio's default -resolve-ip-type ip4 filters looked-up names, not a -resolve literal.
    fortio = require_fortio()
    with nhbench.TestServer(listen="[::1]:0", cpus=SERVER_CPUS) as server:
        port = server.address[1]
        args = ["load", "-n", "4", "-c", "1", "-qps", "0", "-resolve", "::1",
                f"http://{NAME}:{port}/"]
        theirs = subprocess.run([fortio, *args], capture_output=True, text=True, timeout=60,
                                env=peer_env())
        ours = cli("fortio", *args)
        assert theirs.returncode == ours.returncode == 0, ours.stderr
        assert _fortio_ip_lines(theirs.stdout + theirs.stderr) == _fortio_ip_lines(
            ours.stdout + ours.stderr) == {f"[::1]:{port}": 1}
        assert server.stats()["requests"] == 8


def test_fortio_dns_method_names():
    for name in ("cached-random", "random", "round-robin"):
        proc = cli("fortio", "load", "-dns-method", name, "http://127.0.0.1:9/")
        assert proc.returncode == 2
        assert "-dns-method" in proc.stderr and "cached-rr, first, rnd or rr" in proc.stderr
