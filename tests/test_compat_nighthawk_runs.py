"""``nhbench nighthawk client|transform|service|test-server`` as processes against real
origins (nhbench's test server): every nighthawk_client flag either has its effect on the
wire or in the JSON result, or is refused (exit 2, one line, no connection made); the
command lines of Nighthawk's README and of the Intel lab script run as they are.
"""

from __future__ import annotations

import json
import math
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nhbench.compat._nighthawk_flags import NIGHTHAWK_CLIENT_FLAGS, NIGHTHAWK_OUTPUT_FORMATS

pytest.importorskip("nhbench._core")

from support.nhbench_runs import Invocation, run_many  # noqa: E402

import nhbench  # noqa: E402

DATA = Path(__file__).parent / "data" / "nighthawk"
JSON_GOLD = DATA / "output_formatter.json.gold"


def nighthawk(*args: str, stdin: str | None = None,
              timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nhbench", "nighthawk", *args],
                          capture_output=True, text=True, input=stdin, timeout=timeout,
                          check=False)


def client(*args: str, status: int = 0) -> dict[str, Any]:
    """Run ``nhbench nighthawk client --output-format json ARGS``, check its exit status and
    return its JSON output (Nighthawk's Output document)."""
    proc = nighthawk("client", "--output-format", "json", *args)
    assert proc.returncode == status, proc.stderr
    document: dict[str, Any] = json.loads(proc.stdout)
    return document


def counters(document: dict[str, Any], name: str = "global") -> dict[str, int]:
    result = next(r for r in document["results"] if r["name"] == name)
    return {c["name"]: int(c["value"]) for c in result["counters"]}


def statistic(document: dict[str, Any], stat_id: str) -> dict[str, Any]:
    result = next(r for r in document["results"] if r["name"] == "global")
    found: dict[str, Any] = next(s for s in result["statistics"] if s["id"] == stat_id)
    return found


def size_mean(document: dict[str, Any], stat_id: str) -> float:
    # A size statistic is written with raw_ fields (Nighthawk's JSON); proto3 JSON leaves a
    # zero out.
    found = statistic(document, stat_id)
    return float(found.get("raw_mean", found.get("mean", 0)))


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("nhbench: error: ")
    return lines[0]


def _self_signed_ca(directory: Path) -> Path:
    key, ca = directory / "other-key.pem", directory / "other-ca.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                    str(key), "-out", str(ca), "-days", "1", "-subj", "/CN=other"],
                   check=True, capture_output=True)
    return ca


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A listening socket nobody accepts on: a connection attempt would be queued."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield sock


def assert_no_connection(sock: socket.socket) -> None:
    readable, _, _ = select.select([sock], [], [], 0.2)
    assert not readable, "a connection reached the origin"


# ---- refused: exit 2, one line, nothing sent ---------------------------------------------------


def test_every_refused_flag_sends_nothing(listener: socket.socket, tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/"
    refused = [flag for flag in NIGHTHAWK_CLIENT_FLAGS if flag.refused]
    runs = []
    for flag in refused:
        value = (flag.value or "").split("|")[0] if "|" in (flag.value or "") else "x"
        argv = [flag.name] if flag.value is None else [flag.name, value]
        runs.append(Invocation(("nighthawk", "client", "--output-format", "json", *argv, url),
                               tmp_path))
    procs = run_many(runs, os.environ, jobs=2, timeout=60)
    for flag, proc in zip(refused, procs, strict=True):
        line = one_error_line(proc)
        assert line == f"nhbench: error: {flag.name}: {flag.refused}; nothing was sent"
    assert_no_connection(listener)


@pytest.mark.parametrize("argv", [
    ["--rps=5"], ["-phttp2"], ["--nope"], ["--rps", "1", "--rps", "2"], ["--rps", "0"],
    ["-p", "HTTP2"], ["--h2", "-p", "http2"], ["--duration", "1", "--no-duration"],
    ["--failure-predicate", "benchmark.http_4xx"], ["--", "--rps", "5"],
])
def test_bad_command_lines_send_nothing(listener: socket.socket, argv: list[str]) -> None:
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/"
    line = one_error_line(nighthawk("client", "--output-format", "json", *argv, url))
    assert argv[0].split("=")[0][:2] in line or argv[-1] in line
    assert_no_connection(listener)


def test_help_and_version_exit_0() -> None:
    proc = nighthawk("client", "--help")
    assert proc.returncode == 0 and "USAGE:" in proc.stdout and "--rps <uint32_t>" in proc.stdout
    proc = nighthawk("client", "--version")
    assert proc.returncode == 0 and "nighthawk_client" in proc.stdout and "nhbench" in proc.stdout
    proc = nighthawk("--help")
    assert proc.returncode == 0 and "nighthawk_test_server" in proc.stdout


# ---- mapped: the effect on the wire or in the result ------------------------------------------


def test_rate_duration_connections_and_prefetch(server: nhbench.TestServer) -> None:
    document = client("--rps", "20", "--duration", "1", "--connections", "3",
                      "--prefetch-connections", server.url)
    stats = server.stats()
    # 20 requests in the second (a wide margin: rate rounding and the schedule's edges).
    assert 15 <= stats["requests"] <= 25
    assert counters(document)["benchmark.http_2xx"] == stats["requests"]
    # Prefetched: every connection is opened, though one would carry this rate.
    assert stats["connections_total"] == 3
    assert document["options"]["connections"] == 3
    assert document["options"]["prefetch_connections"] is True


def test_concurrency_multiplies_the_load(server: nhbench.TestServer) -> None:
    document = client("--rps", "10", "--duration", "1", "--concurrency", "2", server.url)
    assert [r["name"] for r in document["results"]] == ["worker_0", "worker_1", "global"]
    assert 15 <= server.stats()["requests"] <= 25


def test_concurrency_auto_is_one_worker_per_cpu_of_the_affinity(
        server: nhbench.TestServer) -> None:
    document = client("--rps", "5", "--duration", "1", "--concurrency", "auto", server.url)
    workers = len(os.sched_getaffinity(0))
    assert len(document["results"]) == (1 if workers == 1 else workers + 1)


@pytest.mark.parametrize("argv", [["-p", "http2"], ["--protocol", "http2"], ["--h2"]])
def test_http2(server: nhbench.TestServer, argv: list[str]) -> None:
    document = client("--rps", "10", "--duration", "1", *argv, server.url)
    stats = server.stats()
    assert stats["connections_http2"] >= 1 and stats["connections_http1"] == 0
    assert document["options"]["protocol"] == {"value": "HTTP2"}


def test_http1_by_default_and_by_name(server: nhbench.TestServer) -> None:
    client("--rps", "10", "--duration", "1", "-p", "http1", server.url)
    stats = server.stats()
    assert stats["connections_http1"] >= 1 and stats["connections_http2"] == 0


def test_max_requests_per_connection(server: nhbench.TestServer) -> None:
    client("--rps", "20", "--duration", "1", "--max-requests-per-connection", "3", server.url)
    stats = server.stats()
    expected = math.ceil(stats["requests"] / 3)
    assert expected - 1 <= stats["connections_total"] <= expected + 1


def test_simple_warmup_adds_one_request(server: nhbench.TestServer) -> None:
    document = client("--rps", "10", "--duration", "1", "--simple-warmup", server.url)
    assert server.stats()["requests"] == counters(document)["upstream_rq_total"] + 1


def test_no_duration_ends_at_the_termination_predicate(server: nhbench.TestServer) -> None:
    document = client("--rps", "20", "--no-duration", "--termination-predicate",
                      "benchmark.http_2xx:4", server.url)
    assert counters(document)["benchmark.http_2xx"] == 5
    assert document["options"]["termination_predicates"] == {"benchmark.http_2xx": "4"}


def test_sigint_ends_a_no_duration_run_with_its_output(server: nhbench.TestServer) -> None:
    # Nighthawk's signal handler cancels the execution and prints what was measured.
    proc = subprocess.Popen([sys.executable, "-m", "nhbench", "nighthawk", "client",
                             "--output-format", "json", "--rps", "20", "--no-duration",
                             server.url], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 30
    while server.stats()["requests"] < 5 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert counters(json.loads(out))["benchmark.http_2xx"] == server.stats()["requests"] >= 5


def test_failure_predicates_as_nighthawk(server: nhbench.TestServer) -> None:
    url = server.url + "?status=404"
    # The default predicates stop the run at the first 4xx: exit 1, the output printed.
    document = client("--rps", "20", "--duration", "2", url, status=1)
    assert counters(document)["benchmark.http_4xx"] == 1
    # --failure-predicate replaces the defaults (Nighthawk's meaning): 4xx no longer count.
    document = client("--rps", "10", "--duration", "1", "--failure-predicate",
                      "benchmark.http_5xx:0", url)
    assert counters(document)["benchmark.http_4xx"] >= 5
    assert document["options"]["failure_predicates"] == {"benchmark.http_5xx": "0"}
    document = client("--rps", "10", "--duration", "1", "--no-default-failure-predicates", url)
    assert counters(document)["benchmark.http_4xx"] >= 5


def test_request_header_method_and_body_on_the_wire(server: nhbench.TestServer) -> None:
    # The header asks the test server for a 1000-byte body: it reached the server.
    header = "x-nighthawk-test-server-config: {response_body_size: 1000}"
    document = client("--rps", "10", "--duration", "1", "--request-header", header,
                      "--request-body-size", "400", "--request-method", "POST", server.url)
    assert size_mean(document, "benchmark_http_client.response_body_size") == 1000
    stats = server.stats()
    # Each request carried its 400 'a' characters (plus the request line and headers).
    assert stats["rx_bytes"] >= 400 * stats["requests"]
    options = document["options"]["request_options"]
    assert options["request_method"] == "POST" and options["request_body_size"] == 400
    # HEAD: the server sends no body.
    document = client("--rps", "10", "--duration", "1", "--request-header", header,
                      "--request-method", "HEAD", server.url)
    assert size_mean(document, "benchmark_http_client.response_body_size") == 0


def test_options_echoed_in_the_result(server: nhbench.TestServer) -> None:
    document = client(
        "--rps", "10", "--duration", "1", "--timeout", "7", "--label", "a", "--label", "b",
        "--burst-size", "2", "--open-loop", "--sequencer-idle-strategy", "sleep",
        "--address-family", "v4", "--max-active-requests", "50", "--max-pending-requests", "5",
        "--max-concurrent-streams", "8", "--jitter-uniform", ".0001s",
        "--experimental-h1-connection-reuse-strategy", "lru", server.url)
    options = document["options"]
    assert options["timeout"] == "7s" and options["labels"] == ["a", "b"]
    assert options["burst_size"] == 2 and options["open_loop"] is True
    assert options["sequencer_idle_strategy"] == {"value": "SLEEP"}
    assert options["address_family"] == {"value": "V4"}
    assert (options["max_active_requests"], options["max_pending_requests"],
            options["max_concurrent_streams"]) == (50, 5, 8)
    assert 5 <= counters(document)["benchmark.http_2xx"] <= 15


def test_jitter_uniform_moves_the_releases() -> None:
    # The test server stamps each response with the time since the previous request: at 20
    # rps that is 50 ms, give or take the timer's precision without jitter, and spread over
    # tens of milliseconds with 40 ms of uniform jitter.
    spread = {}
    for jitter in ([], ["--jitter-uniform", ".04s"]):
        with nhbench.TestServer(emit_previous_request_delta_in_response_header="x-delta") as o:
            document = client("--rps", "20", "--duration", "2", "--latency-response-header-name",
                              "x-delta", *jitter, o.url)
        found = statistic(document, "benchmark_http_client.origin_latency_statistic")
        spread[bool(jitter)] = float(found["pstdev"].rstrip("s"))
    assert spread[True] > 0.008 and spread[False] < spread[True] / 2, spread


@pytest.mark.parametrize("strategy", ["mru", "lru"])
def test_h1_connection_reuse_strategy(strategy: str) -> None:
    from support.scripted_origin import ScriptedOrigin, read_request

    per_connection: list[int] = []

    def serve(conn: socket.socket) -> None:
        index = len(per_connection)
        per_connection.append(0)
        buf = b""
        while (got := read_request(conn, buf)) is not None:
            buf = got[1]
            per_connection[index] += 1
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")

    with ScriptedOrigin(handler=serve) as origin:
        client("--rps", "20", "--duration", "1", "--connections", "4", "--prefetch-connections",
               "--experimental-h1-connection-reuse-strategy", strategy, origin.url)
    total = sum(per_connection)
    assert len(per_connection) == 4 and total >= 15
    if strategy == "mru":
        # The most recently used connection takes every request (each ends before the next).
        assert max(per_connection) >= total - 1
    else:
        # The least recently used: the requests go round the four connections.
        assert max(per_connection) <= total / 4 + 1


def test_verbosity(server: nhbench.TestServer) -> None:
    quiet = nighthawk("client", "--output-format", "json", "--rps", "5", "--duration", "1",
                      "-v", "error", server.url)
    loud = nighthawk("client", "--output-format", "json", "--rps", "5", "--duration", "1",
                     "--verbosity", "debug", server.url)
    assert quiet.returncode == loud.returncode == 0
    assert quiet.stderr == "" and loud.stderr.count("\n") >= 2


def test_latency_response_header_name() -> None:
    with nhbench.TestServer(emit_previous_request_delta_in_response_header="x-delta") as origin:
        document = client("--rps", "20", "--duration", "1", "--latency-response-header-name",
                          "x-delta", origin.url)
    # Every response but the first carries the delta since the previous request.
    assert int(statistic(document, "benchmark_http_client.origin_latency_statistic")
               ["count"]) >= 10


def test_multi_target() -> None:
    with nhbench.TestServer() as one, nhbench.TestServer() as two:
        endpoints = [f"127.0.0.1:{origin.address[1]}" for origin in (one, two)]
        client("--rps", "10", "--duration", "1", "--multi-target-endpoint", endpoints[0],
               "--multi-target-endpoint", endpoints[1], "--multi-target-path", "/")
        assert one.stats()["requests"] >= 3 and two.stats()["requests"] >= 3
    with nhbench.TestServer(tls_self_signed=True) as one, \
            nhbench.TestServer(tls_self_signed=True) as two:
        endpoints = [f"127.0.0.1:{origin.address[1]}" for origin in (one, two)]
        # https endpoints with self-signed certificates: not verified, as Nighthawk.
        client("--rps", "10", "--duration", "1", "--multi-target-endpoint", endpoints[0],
               "--multi-target-endpoint", endpoints[1], "--multi-target-path", "/",
               "--multi-target-use-https")
        assert one.stats()["tls_handshakes"] >= 1 and two.stats()["tls_handshakes"] >= 1


def test_certificates_as_nighthawk(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    with nhbench.TestServer(tls_self_signed=True, tls_ca_out=ca) as origin:
        # No verification by default: a self-signed origin is benchmarked.
        document = client("--rps", "10", "--duration", "1", origin.url)
        assert counters(document)["benchmark.http_2xx"] >= 5
        # A validation context verifies: the right CA passes, another fails the handshake.
        trusted = ("{common_tls_context:{validation_context:{trusted_ca:{filename:'%s'}}}}")
        document = client("--rps", "10", "--duration", "1", "--tls-context", trusted % ca,
                          origin.url)
        assert counters(document)["benchmark.http_2xx"] >= 5
        other = _self_signed_ca(tmp_path)
        document = client("--rps", "10", "--duration", "1", "--tls-context", trusted % other,
                          origin.url, status=1)
        assert counters(document)["benchmark.pool_connection_failure"] >= 1
        socket_config = (
            '{name:"envoy.transport_sockets.tls",typed_config:{"@type":"type.googleapis.com/'
            'envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",'
            "common_tls_context:{validation_context:{trusted_ca:{filename:'%s'}}}}}")
        document = client("--rps", "10", "--duration", "1", "--transport-socket",
                          socket_config % other, origin.url, status=1)
        assert counters(document)["benchmark.pool_connection_failure"] >= 1
        document = client("--rps", "10", "--duration", "1", "--transport-socket",
                          socket_config % ca, origin.url)
        assert counters(document)["benchmark.http_2xx"] >= 5


def test_upstream_bind_config(server: nhbench.TestServer) -> None:
    client("--rps", "10", "--duration", "1", "--upstream-bind-config",
           '{source_address:{address:"127.0.0.1",port_value:0}}', server.url)
    assert server.stats()["requests"] >= 5
    # An address this machine does not have: the bind is tried before the run (nhbench
    # refuses it by name, where Nighthawk's connections fail), nothing reaches the origin.
    before = server.stats()["connections_total"]
    line = one_error_line(nighthawk("client", "--output-format", "json", "--rps", "10",
                                    "--upstream-bind-config",
                                    '{source_address:{address:"192.0.2.1",port_value:0}}',
                                    server.url))
    assert "error: --upstream-bind-config: cannot bind 192.0.2.1" in line
    assert server.stats()["connections_total"] == before


def test_request_source_plugin_config(server: nhbench.TestServer) -> None:
    config = (
        '{name:"nighthawk.in-line-options-list-request-source-plugin",typed_config:{'
        '"@type":"type.googleapis.com/nighthawk.request_source.'
        'InLineOptionsListRequestSourceConfig",options_list:{options:[{request_headers:['
        '{header:{key:"x-nighthawk-test-server-config",value:"{response_body_size:13}"}}]}]}}}')
    document = client("--rps", "10", "--duration", "1", "--request-source-plugin-config",
                      config, server.url)
    assert size_mean(document, "benchmark_http_client.response_body_size") == 13


@pytest.mark.parametrize("interval", [["--stats-flush-interval", "1"],
                                      ["--stats-flush-interval-duration", "0.5s"]])
def test_stats_sinks(server: nhbench.TestServer, interval: list[str]) -> None:
    # Envoy's statsd sink with an address: UDP statsd, every flush interval
    # (tests/test_compat_nighthawk_sinks.py has the refusals).
    from support.metric_sinks import StatsdServer

    with StatsdServer("udp") as statsd:
        sink = ('{name:"envoy.stat_sinks.statsd",typed_config:{"@type":"type.googleapis.com/'
                'envoy.config.metrics.v3.StatsdSink",address:{socket_address:{address:'
                f'"127.0.0.1",port_value:{statsd.port}}}}}}}}}')
        document = client("--rps", "100", "--duration", "2", "--stats-sinks", sink, *interval,
                          server.url)
        lines = statsd.lines()
    pushed = sum(int(line.value) for line in lines
                 if line.name == "envoy.cluster.nhbench.upstream_rq_total")
    assert pushed == counters(document)["upstream_rq_total"] == 200
    flushes = len([line for line in lines if line.name == "envoy.nhbench.rps"])
    assert flushes == (2 if interval[0] == "--stats-flush-interval" else 4)


@pytest.mark.peer
def test_tunnel_through_a_real_proxy(server: nhbench.TestServer) -> None:
    # Nighthawk's http1 tunnel through tinyproxy: one CONNECT per connection
    # (tests/test_proxy_tunnel.py compares the origin's own counts).
    from support.http_proxies import tinyproxy

    with tinyproxy() as proxy:
        document = client("--tunnel-protocol", "http1", "--tunnel-uri", f"127.0.0.1:{proxy.port}",
                          "--rps", "20", "--duration", "1", server.url)
        connects = [line for line in proxy.requests() if line.startswith("CONNECT ")]
    c = counters(document)
    assert c["benchmark.http_2xx"] > 0
    assert len(connects) == c["tunnel.established"] == c["upstream_cx_total"]
    # What of Envoy's UpstreamTlsContext is not honoured is refused by name, nothing sent.
    proc = nighthawk("client", "--tunnel-protocol", "http1", "--tunnel-uri", "127.0.0.1:1",
                     "--tunnel-tls-context", "{common_tls_context:{tls_params:{}}}", server.url)
    assert proc.returncode == 2 and "common_tls_context.tls_params: not supported" in \
        proc.stderr, proc.stderr


@pytest.mark.peer
@pytest.mark.parametrize("verify", [True, False])
def test_http2_tunnel_over_tls_to_a_real_proxy(server: nhbench.TestServer, verify: bool) -> None:
    # Nighthawk's --tunnel-protocol http2 with a --tunnel-tls-context: nghttpx (HTTP/2 over
    # TLS, its own CA) takes one CONNECT stream per connection and passes it on to
    # tinyproxy. Without a validation context Envoy does not verify the proxy, nor here.
    from support.http_proxies import nghttpx, tinyproxy

    with tinyproxy() as backend, nghttpx(backend, tls=True) as proxy:
        context = ("{common_tls_context:{validation_context:{trusted_ca:{filename:"
                   f'"{proxy.ca}"}}}}}}}}' if verify else "{}")
        document = client("--tunnel-protocol", "http2", "--tunnel-uri",
                          f"127.0.0.1:{proxy.port}", "--tunnel-tls-context", context,
                          "--rps", "20", "--duration", "1", server.url)
        streams = [r for r in proxy.requests() if r[0] == "CONNECT"]
        connects = [line for line in backend.requests() if line.startswith("CONNECT ")]
    c = counters(document)
    assert c["benchmark.http_2xx"] > 0
    assert len(streams) == len(connects) == c["tunnel.established"] == c["upstream_cx_total"]


def test_trace_to_a_zipkin_collector(server: nhbench.TestServer) -> None:
    # Every request traced, as Nighthawk's --trace does (tests/test_traces.py checks the ids
    # on the wire against the spans).
    from support.collectors import Collector

    with Collector("zipkin") as collector:
        document = client("--rps", "20", "--duration", "1", "--trace", collector.uri,
                          server.url)
        spans = collector.spans
    c = counters(document)
    assert c["tracing.zipkin.spans_sent"] == len(spans) >= c["benchmark.http_2xx"] > 0


@pytest.mark.parametrize("name", sorted(set(NIGHTHAWK_OUTPUT_FORMATS) - {"json", "human"}))
def test_output_formats(server: nhbench.TestServer, name: str) -> None:
    proc = nighthawk("client", "--output-format", name, "--rps", "5", "--duration", "1",
                     server.url)
    assert proc.returncode == 0, proc.stderr
    expected = {"yaml": "benchmark.http_2xx", "dotted": "global.benchmark.http_2xx:",
                "csv": "benchmark.http_2xx", "fortio": '"DurationHistogram"',
                "experimental_fortio_pedantic": '"DurationHistogram"',
                "prometheus": "# TYPE"}
    assert expected[name] in proc.stdout


def test_human_output_is_nighthawks_layout(server: nhbench.TestServer) -> None:
    proc = nighthawk("client", "--rps", "5", "--duration", "1", server.url)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Nighthawk - A layer 7 protocol benchmarking tool.")
    assert "benchmark.http_2xx" in proc.stdout


# ---- the command lines users have -------------------------------------------------------------


def test_readme_command_line(server: nhbench.TestServer) -> None:
    # Nighthawk's README: --rps 1000 --connections 4 --concurrency auto
    # --prefetch-connections -v info URL (scaled down; json rather than human output).
    document = client("--rps", "20", "--connections", "4", "--concurrency", "auto",
                      "--prefetch-connections", "-v", "info", "--duration", "1", server.url)
    workers = len(os.sched_getaffinity(0))
    stats = server.stats()
    assert stats["connections_total"] == 4 * workers
    assert 15 * workers <= stats["requests"] <= 25 * workers
    assert counters(document)["benchmark.http_2xx"] == stats["requests"]


def test_intel_lab_script_command_lines(tmp_path: Path) -> None:
    # benchmark.sh runs nighthawk_client pinned with taskset, one command line a protocol.
    cpu = sorted(os.sched_getaffinity(0))[0]
    pinned = ["taskset", "-c", str(cpu), sys.executable, "-m", "nhbench", "nighthawk",
              "client"]
    common = ["--rps", "20", "--concurrency", "auto", "--duration", "1",
              "--request-body-size", "400", "--output-format", "json"]
    with nhbench.TestServer() as plain, nhbench.TestServer(tls_self_signed=True) as tls:
        lines = {
            "http1": [*common, "-p", "http1", "--connections", "10", plain.url],
            "http2": [*common, "-p", "http2", "--max-active-requests", "50",
                      "--max-concurrent-streams", "20", plain.url],
            "https": [*common, "-p", "http2", "--max-active-requests", "50",
                      "--max-concurrent-streams", "20", "--max-pending-requests", "100",
                      "--max-requests-per-connection", "7", tls.url],
        }
        for protocol, argv in lines.items():
            proc = subprocess.run([*pinned, *argv], capture_output=True, text=True,
                                  timeout=60, check=False)
            assert proc.returncode == 0, (protocol, proc.stderr)
            document = json.loads(proc.stdout)
            # taskset leaves one CPU: concurrency auto is one worker.
            assert [r["name"] for r in document["results"]] == ["global"]
            assert 15 <= counters(document)["benchmark.http_2xx"] <= 25, protocol
        assert plain.stats()["connections_http1"] >= 1
        assert plain.stats()["connections_http2"] >= 1
        stats = tls.stats()
        # 7 requests a connection, over TLS that was not verified (self-signed).
        assert stats["tls_handshakes"] >= math.ceil(stats["requests"] / 7) - 1
        assert stats["rx_bytes"] >= 400 * stats["requests"]


# ---- transform, service, test-server ----------------------------------------------------------


def _golden(name: str) -> str:
    # Nighthawk's test puts its version where its goldens have placeholders; json.gold
    # says 0.3.0.
    text = (DATA / f"output_formatter.{name}.gold").read_text()
    for key, value in (("major", "0"), ("minor", "3"), ("patch", "0")):
        text = text.replace(f"@version_{key}@", value)
    return text


@pytest.mark.parametrize("name", sorted(set(NIGHTHAWK_OUTPUT_FORMATS) - {"human"}))
def test_transform_is_nhbench_transform(name: str) -> None:
    proc = nighthawk("transform", "--output-format", name, stdin=JSON_GOLD.read_text())
    assert proc.returncode == 0, proc.stderr
    native = subprocess.run([sys.executable, "-m", "nhbench", "transform", "--output-format",
                             name, str(JSON_GOLD)], capture_output=True, text=True, check=True)
    assert proc.stdout == native.stdout
    if name in ("yaml", "dotted", "csv", "prometheus"):
        assert proc.stdout == _golden(name)


@pytest.mark.parametrize(("name", "golden"), [
    ("fortio", "output_formatter.medium.fortio.gold"),
    ("experimental_fortio_pedantic", "output_formatter.medium.fortio-noquirks.gold"),
])
def test_transform_to_fortio_is_what_nighthawk_wrote(name: str, golden: str) -> None:
    medium = (DATA / "output_formatter.medium.proto.gold").read_text()
    proc = nighthawk("transform", "--output-format", name, stdin=medium)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (DATA / golden).read_text()


def test_transform_human() -> None:
    proc = nighthawk("transform", "--output-format", "human", stdin=JSON_GOLD.read_text())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Nighthawk - A layer 7 protocol benchmarking tool.")


def test_transform_bad_input() -> None:
    line = one_error_line(nighthawk("transform", "--output-format", "json", stdin="{"))
    assert "<stdin>" in line
    line = one_error_line(nighthawk("transform"))
    assert "--output-format: required" in line


def _wait_for(path: Path, proc: subprocess.Popen[str], timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError(f"{path} never written")


def test_service_listens_and_writes_its_address(tmp_path: Path) -> None:
    address_file = tmp_path / "address"
    proc = subprocess.Popen([sys.executable, "-m", "nhbench", "nighthawk", "service",
                             "--listen", "127.0.0.1:0", "--listener-address-file",
                             str(address_file)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        host, port = _wait_for(address_file, proc).rsplit(":", 1)
        socket.create_connection((host, int(port)), timeout=5).close()
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    line = one_error_line(nighthawk("service", "--service", "dummy-request-source"))
    assert "--service dummy-request-source" in line


@pytest.mark.parametrize("how", ["-c", "--config-path", "--config-yaml"])
def test_test_server_serves_nighthawks_bootstrap(tmp_path: Path, how: str) -> None:
    text = (DATA / "server" / "nighthawk_http_origin.yaml").read_text().replace(
        "$server_ip", "127.0.0.1").replace("$tmpdir", str(tmp_path))
    config = tmp_path / "origin.yaml"
    config.write_text(text)
    source = text if how == "--config-yaml" else str(config)
    temporary = set(Path(tempfile.gettempdir()).glob("nhbench-envoy-*"))
    # The flags Nighthawk's integration tests give it (test/integration/
    # nighthawk_test_server.py): -l debug, --base-id N, and a concurrency.
    proc = subprocess.Popen([sys.executable, "-m", "nhbench", "nighthawk", "test-server", how,
                             source, "-l", "debug", "--base-id", "7", "--concurrency", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("listening on http://"), (line, proc.stderr)
        url = line.split()[-1]
        document = client("--rps", "10", "--duration", "1", url)
        assert counters(document)["benchmark.http_2xx"] >= 5
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    # The temporary file of --config-yaml is gone once the server stopped.
    assert set(Path(tempfile.gettempdir()).glob("nhbench-envoy-*")) == temporary


def test_test_server_refusals_are_one_line(tmp_path: Path) -> None:
    config = tmp_path / "origin.yaml"
    config.write_text((DATA / "server" / "nighthawk_http_origin.yaml").read_text().replace(
        "$server_ip", "127.0.0.1").replace("$tmpdir", str(tmp_path)))
    line = one_error_line(nighthawk("test-server", "-c", str(config), "--log-path",
                                    str(tmp_path / "envoy.log")))
    assert "--log-path: nhbench server keeps no log file" in line
    assert not (tmp_path / "envoy.log").exists()
    line = one_error_line(nighthawk("test-server", "--config-path", str(config),
                                    "--mode", "validate"))
    assert "--mode validate" in line
    proc = nighthawk("test-server", "--help")
    assert proc.returncode == 0 and "--config-path" in proc.stdout


def test_every_mapped_flag_is_run_here() -> None:
    # Each mapped flag appears, as typed, in a run of this file (the refused ones all run in
    # test_every_refused_flag_sends_nothing): a flag added to the table without a run of its
    # own fails here.
    text = Path(__file__).read_text()
    missing = [flag.name for flag in NIGHTHAWK_CLIENT_FLAGS
               if flag.nhbench and not any(f'"{name}"' in text for name in flag.names)]
    assert not missing, f"mapped flags no test runs: {missing}"
