"""Targets and transport: several targets in round robin, the HTTP/1 connection
reuse strategy, the source address, Unix sockets, and Nighthawk's TLS context JSON.

Every effect is observed on the wire: our test server's counters, or a small origin on a
real socket that records which connection (and which peer address) carried each request.
Counts and wide ratios only; no timing thresholds.
"""

from __future__ import annotations

import itertools
import json
import os
import socket
import tempfile
import threading
from collections.abc import Iterator

import pytest
from support.cli import nhbench_cli as cli
from support.scripted_origin import ScriptedOrigin, read_request

import nhbench
from nhbench._core_config import client_core_config
from nhbench.options import Options, make_options
from nhbench.options._request_set import request_specs

pytestmark = pytest.mark.core

CPUS = sorted(os.sched_getaffinity(0))
CLIENT_CPU = str(CPUS[0])
SERVER_CPUS = [CPUS[1] if len(CPUS) > 1 else CPUS[0]]
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"



def run(url: str | None, **kw: object) -> nhbench.Result:
    kw.setdefault("cpus", CLIENT_CPU)
    kw.setdefault("duration", 0.5)
    kw.setdefault("start_delay", 0.1)
    return nhbench.run(url, **kw)


class ConnectionOrigin:
    """An HTTP/1.1 origin on a real socket that answers every request with 200 and records,
    per request, the index of the connection that carried it and that connection's peer."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.lock = threading.Lock()
        self.by_request: list[int] = []
        self.peers: list[tuple[str, int]] = []
        self.hosts: list[bytes] = []
        self.origin = ScriptedOrigin(handler=self._handle)
        self.url = self.origin.url
        self.port = self.origin.port

    def _handle(self, conn: socket.socket) -> None:
        with self.lock:
            index = len(self.peers)
            self.peers.append(conn.getpeername())
        buf = b""
        while True:
            got = read_request(conn, buf)
            if got is None:
                return
            request, buf = got
            host = [line for line in request.split(b"\r\n") if line.lower().startswith(b"host:")]
            with self.lock:
                self.by_request.append(index)
                self.hosts.append(host[0][5:].strip() if host else b"")
            conn.sendall(OK)

    def per_connection(self) -> list[int]:
        with self.lock:
            return [self.by_request.count(i) for i in range(len(self.peers))]

    def close(self) -> None:
        self.origin.close()


@pytest.fixture
def origin() -> Iterator[ConnectionOrigin]:
    o = ConnectionOrigin()
    yield o
    o.close()


@pytest.fixture
def sock_dir() -> Iterator[str]:
    # pytest's tmp_path can exceed the 107 bytes a Unix socket path may have.
    with tempfile.TemporaryDirectory(prefix="nhb-") as directory:
        yield directory


# ---- several targets -----------------------------------------------------------------------


def test_multi_target_options_give_one_spec_per_endpoint_with_its_host() -> None:
    options = make_options(
        multi_target_endpoint=["127.0.0.1:8080", "[::1]:80", "LocalHost:9"],
        multi_target_path="/caf\u00e9?x=1",
    )
    assert options.uri == ""
    specs = request_specs(options)
    assert [(s.target, s.authority, s.path) for s in specs] == [
        (0, "127.0.0.1:8080", "/caf%C3%A9?x=1"), (1, "[::1]", "/caf%C3%A9?x=1"),
        (2, "localhost:9", "/caf%C3%A9?x=1"),
    ]
    config = client_core_config(options, "127.0.0.1")
    assert config["targets"] == [("tcp", "127.0.0.1", 8080), ("tcp", "::1", 80),
                                 ("tcp", "127.0.0.1", 9)]
    https = make_options(multi_target_endpoint=["127.0.0.1:443"], multi_target_path="/",
                         multi_target_use_https=True)
    assert https.target.scheme == "https" and request_specs(https)[0].authority == "127.0.0.1"
    # The echo of the options (inside a result) validates again.
    assert Options.model_validate(options.model_dump(exclude_unset=True)) == options


def test_core_refuses_a_spec_naming_a_target_it_does_not_have() -> None:
    core = nhbench._run.load_core()
    base = {"address": "127.0.0.1", "port": 1, "specs": [{"request": b"GET / HTTP/1.1\r\n\r\n"}],
            "cpus": [-1], "targets": [("tcp", "127.0.0.1", 1), ("tcp", "127.0.0.1", 2)]}
    core.ClientRun(base)  # two targets, one request naming none: every request to the first
    with pytest.raises(ValueError, match="targets: entry 0 is not an IPv4, IPv6 or Unix"):
        core.ClientRun({**base, "targets": [("unix", "@abstract", 0)]})
    with pytest.raises(ValueError, match="targets: at most 1024"):
        core.ClientRun({**base, "targets": [("tcp", "127.0.0.1", 1)] * 1025})
    with pytest.raises(ValueError, match="reuse_strategy"):
        core.ClientRun({**base, "reuse_strategy": "fifo"})


def test_requests_alternate_over_the_targets_in_round_robin() -> None:
    a, b = ConnectionOrigin(), ConnectionOrigin()
    try:
        result = run(None, multi_target_endpoint=[f"127.0.0.1:{a.port}",
                                                  f"localhost:{b.port}"],
                     multi_target_path="/rr", rps=100, connections=4)
        c = result.counters
        assert c["benchmark.http_2xx"] == c["upstream_rq_total"] > 20
        # One worker cycles A, B, A, B...: the counts differ by at most one.
        assert abs(len(a.by_request) - len(b.by_request)) <= 1
        assert len(a.by_request) + len(b.by_request) == c["benchmark.http_2xx"]
        # Each target got its own Host, and 4 connections split 2 + 2 (at most).
        assert set(a.hosts) == {f"127.0.0.1:{a.port}".encode()}
        assert set(b.hosts) == {f"localhost:{b.port}".encode()}
        assert 1 <= len(a.peers) <= 2 and 1 <= len(b.peers) <= 2
    finally:
        a.close()
        b.close()


def test_closed_loop_waits_per_target_with_one_connection_each() -> None:
    # Fewer connections than targets: every target still gets one (Envoy lets a host with
    # no connection open one over the limit), and the closed loop runs on all three.
    origins = [ConnectionOrigin() for _ in range(3)]
    try:
        result = run(None, multi_target_endpoint=[f"127.0.0.1:{o.port}" for o in origins],
                     multi_target_path="/", rps=0, connections=1, duration=0.3)
        counts = [len(o.by_request) for o in origins]
        assert sum(counts) == result.counters["benchmark.http_2xx"] > 30
        assert max(counts) - min(counts) <= 1
        assert [len(o.peers) for o in origins] == [1, 1, 1]
    finally:
        for o in origins:
            o.close()


# ---- connection reuse strategy -------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["mru", "lru"])
def test_h1_connection_reuse_strategy_on_the_wire(origin: ConnectionOrigin,
                                                  strategy: str) -> None:
    # Four connections open before the first request, at 20/s: the strategy decides which
    # connection takes each request. lru takes them in turn, so every request changes
    # connection; mru takes the connection of the request before unless that one is still
    # busy (its response not yet read), then the next most recent.
    result = run(origin.url, rps=20, duration=2.0, connections=4, prefetch_connections=True,
                 experimental_h1_connection_reuse_strategy=strategy)
    total = result.counters["benchmark.http_2xx"]
    assert total >= 20
    counts = sorted(origin.per_connection(), reverse=True)
    assert len(counts) == 4 and sum(counts) == total
    sequence = list(origin.by_request)
    changes = sum(1 for before, after in itertools.pairwise(sequence) if before != after)
    if strategy == "mru":
        # Not "one connection carries everything": on a busy host (load 12, CPU hogs) this
        # origin's Python threads or the worker were late often enough that a release found
        # the last connection busy, and one late response moves the rest of the run to
        # another (at 60/s: 30 + 30 once on CI, 7 runs of 8 under the hogs, up to 32
        # changes in 59 where responses came later than the next release). At 20/s the
        # same host gave 0-11 changes in 39: mru sticks to its connection where lru changes
        # every time and a pick among 4 idle connections at random 3 times in 4.
        assert changes <= (total - 1) // 2, (changes, sequence)
    else:
        # A FIFO: every connection takes its turn, and a request never takes the connection
        # of the one before while another is free. Not an even split: a connection whose
        # response is late misses its turns (14 + 14 + 2 + 2 once under the hogs, every
        # request still changing connection).
        assert counts[-1] >= 1, counts
        assert changes >= (total - 1) * 3 // 4, (changes, sequence)


def test_reuse_strategy_bad_value_is_one_line_exit_2() -> None:
    proc = cli("run", "http://127.0.0.1:1/", "--experimental-h1-connection-reuse-strategy",
               "fifo")
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1
    assert "--experimental-h1-connection-reuse-strategy: must be one of 'mru'" in proc.stderr


# ---- source address ------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["source_address", "upstream_bind_config"])
def test_source_address_is_the_peer_the_origin_sees(origin: ConnectionOrigin, how: str) -> None:
    # Linux routes all of 127.0.0.0/8 to lo, so 127.0.0.2 is a local address to bind.
    value = "127.0.0.2" if how == "source_address" else json.dumps(
        {"source_address": {"address": "127.0.0.2", "port_value": 0}})
    result = run(origin.url, rps=50, connections=2, **{how: value})
    assert result.counters["benchmark.http_2xx"] >= 10
    assert origin.peers and {host for host, _ in origin.peers} == {"127.0.0.2"}


def test_without_source_address_the_kernel_picks_loopback(origin: ConnectionOrigin) -> None:
    run(origin.url, rps=50, connections=1)
    assert {host for host, _ in origin.peers} == {"127.0.0.1"}


# ---- Unix sockets --------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["http1", "http2"])
def test_unix_socket_url_h1_and_h2(sock_dir: str, protocol: str) -> None:
    path = os.path.join(sock_dir, "s.sock")
    with nhbench.TestServer(listen=f"unix:{path}", cpus=SERVER_CPUS) as server:
        result = run(f"http://unix:{path}:/x", rps=100, connections=2, protocol=protocol)
        c = result.counters
        assert c["benchmark.http_2xx"] >= 25 and c["benchmark.http_2xx"] == c["upstream_rq_total"]
        assert server.stats()["requests"] == c["benchmark.http_2xx"]


def test_unix_socket_flag_keeps_the_urls_host(sock_dir: str) -> None:
    # The URL's host is never resolved (it does not exist); it is only the Host header.
    path = os.path.join(sock_dir, "s.sock")
    with nhbench.TestServer(listen=f"unix:{path}", cpus=SERVER_CPUS) as server:
        proc = cli("run", "http://no-such-host.invalid:8080/", "-unix-socket", path,
                   "--rps", "50", "--duration", "0.5", "--output-format", "json")
        assert proc.returncode == 0, proc.stderr
        counters = {c["name"]: int(c["value"]) for c in
                    json.loads(proc.stdout)["results"][-1]["counters"]}
        assert counters["benchmark.http_2xx"] >= 10
        assert server.stats()["requests"] == counters["benchmark.http_2xx"]


def test_tls_over_a_unix_socket(sock_dir: str) -> None:
    path = os.path.join(sock_dir, "s.sock")
    with nhbench.TestServer(listen=f"unix:{path}", tls_self_signed=True,
                            cpus=SERVER_CPUS) as server:
        result = run(f"https://unix:{path}:/", rps=50, connections=2, cacert=server.ca_cert)
        c = result.counters
        assert c["benchmark.http_2xx"] >= 10 and c["ssl.handshake"] >= 1
        assert server.stats()["requests"] == c["benchmark.http_2xx"]


# ---- tls-context and transport-socket ------------------------------------------------------


# serial: ten full handshakes at 40/s within the run need a CPU free (18/s once, with the
# other test worker busy on a loaded machine).
@pytest.mark.serial
def test_tls_context_trusted_ca_and_max_session_keys_on_the_wire() -> None:
    with nhbench.TestServer(tls_self_signed=True, cpus=SERVER_CPUS) as server:
        context = {"common_tls_context": {
            "validation_context": {"trusted_ca": {"filename": server.ca_cert}},
            "tls_params": {"tls_maximum_protocol_version": "TLSv1_2"}}}
        # A new connection per request: with resumption every handshake after the first
        # resumes; max_session_keys 0 (Envoy's "no resumption") makes each a full one.
        resumed = run(server.url, rps=40, tls_context=json.dumps(context),
                      max_requests_per_connection=1, connections=1)
        full = run(server.url, rps=40, max_requests_per_connection=1, connections=1,
                   transport_socket=json.dumps({
                       "name": "envoy.transport_sockets.tls",
                       "typed_config": {
                           "@type": "type.googleapis.com/envoy.extensions.transport_sockets"
                                    ".tls.v3.UpstreamTlsContext",
                           "maxSessionKeys": 0, **context}}))
        for result in (resumed, full):
            assert result.success and result.counters["ssl.handshake"] >= 10
            assert not result.insecure
        assert resumed.counters["ssl.session_reused"] >= resumed.counters["ssl.handshake"] - 2
        assert full.counters.get("ssl.session_reused", 0) == 0
        # ACCEPT_UNTRUSTED is --insecure: no CA, and the result says it was not verified.
        untrusted = run(server.url, rps=20, tls_context=json.dumps({"common_tls_context": {
            "validation_context": {"trust_chain_verification": "ACCEPT_UNTRUSTED"}}}))
        assert untrusted.success and untrusted.insecure
        # Without any of it the self-signed certificate fails verification.
        failed = run(server.url, rps=20)
        assert failed.error is not None and "certificate verify failed" in failed.error


# ---- bad input: one line, exit 2 -----------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--multi-target-endpoint", "127.0.0.1:1"),
         "--multi-target-endpoint: needs --multi-target-path"),
        (("http://127.0.0.1:1/", "--multi-target-endpoint", "127.0.0.1:1",
          "--multi-target-path", "/"), "--multi-target-endpoint: mutually exclusive with URI"),
        (("http://127.0.0.1:1/", "--multi-target-path", "/"),
         "--multi-target-path: mutually exclusive with URI"),
        (("--multi-target-endpoint", "127.0.0.1", "--multi-target-path", "/"),
         "--multi-target-endpoint: must be IPv4:port, [IPv6]:port or DNS:port"),
        (("--multi-target-endpoint", "::1:80", "--multi-target-path", "/"),
         "an IPv6 address needs brackets"),
        (("--multi-target-endpoint", "127.0.0.1:1", "--multi-target-path", "x"),
         "--multi-target-path: must be an absolute path"),
        (("--multi-target-endpoint", "127.0.0.1:1", "--multi-target-path", "/", "-k"),
         "--insecure: only applies to https:// targets"),
        (("http://127.0.0.1:1/", "--source-address", "10.255.255.1"),
         "--source-address: cannot bind 10.255.255.1"),
        (("http://127.0.0.1:1/", "--source-address", "127.0.0.2:80"),
         "--source-address: must be an IPv4 or IPv6 address"),
        (("http://127.0.0.1:1/", "--upstream-bind-config",
          '{"source_address": {"address": "127.0.0.2"}, "freebind": true}'),
         "--upstream-bind-config: freebind is not supported (supported: source_address)"),
        (("http://127.0.0.1:1/", "--upstream-bind-config",
          '{"source_address": {"address": "127.0.0.2", "port_value": 9000}}'),
         "--upstream-bind-config: source_address.port_value: only 0 is supported"),
        (("http://127.0.0.1:1/", "--upstream-bind-config", "{nope"),
         "--upstream-bind-config: is not valid JSON"),
        (("http://127.0.0.1:1/", "--source-address", "127.0.0.2", "--upstream-bind-config",
          '{"source_address": {"address": "127.0.0.2"}}'),
         "--upstream-bind-config: mutually exclusive with --source-address"),
        (("http://127.0.0.1:1/", "--unix-socket", "/nonexistent/nhb.sock"),
         "--unix-socket: cannot use '/nonexistent/nhb.sock': No such file or directory"),
        (("http://127.0.0.1:1/", "--unix-socket", "@abstract"),
         "--unix-socket: Linux abstract socket names are not supported"),
        (("http://unix:relative.sock:/",), "URI: Unix domain sockets are written"),
        (("https://127.0.0.1:1/", "--tls-context",
          '{"common_tls_context": {"tls_certificates": []}}'),
         "--tls-context: common_tls_context.tls_certificates must be a list of one certificate"),
        (("https://127.0.0.1:1/", "--tls-context",
          '{"common_tls_context": {"tls_params": {"cipher_suites": ["NOPE-NOTHING"]}}}'),
         "--tls-context: tls_ciphers: OpenSSL knows none of these ciphers"),
        # nhbench never renegotiates; false (Envoy's default) is accepted.
        (("https://127.0.0.1:1/", "--tls-context", '{"allow_renegotiation": true}'),
         "--tls-context: allow_renegotiation: true is not supported"),
        (("https://127.0.0.1:1/", "--tls-context", '{"allowRenegotiation": "no"}'),
         "--tls-context: allow_renegotiation must be true or false"),
        (("https://127.0.0.1:1/", "--tls-context", '{"sni": "a.example"}', "--sni", "b.example"),
         "--tls-context: mutually exclusive with --sni"),
        (("http://127.0.0.1:1/", "--tls-context", '{"sni": "a.example"}'),
         "--tls-context: only applies to https:// URIs"),
        (("https://127.0.0.1:1/", "--transport-socket", '{"name": "envoy.transport_sockets.raw_buffer"}'),
         "--transport-socket: name: only the TLS transport socket"),
        (("https://127.0.0.1:1/", "--transport-socket",
          '{"typed_config": {"@type": "type.googleapis.com/x.Y"}}'),
         "--transport-socket: typed_config.@type: only"),
        (("https://127.0.0.1:1/", "--tls-context", "{}", "--transport-socket", "{}"),
         "--transport-socket: mutually exclusive with --tls-context"),
    ],
)
def test_bad_target_options_are_one_line_exit_2(args: tuple[str, ...], expected: str) -> None:
    proc = cli("run", *args)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert expected in lines[0]
