"""The test server through real clients: nhbench's own (`nhbench.run`), and independent ones
(curl, Python's http.client and plain sockets). Nothing is mocked.

Covers every Nighthawk response option (static and per request), every Fortio echo
parameter (probability lists over enough requests, with wide bounds), the caps, /debug, gzip,
stall injection checked against the client's coordinated-omission-corrected latency, TCP and
UDP echo, unix sockets, IPv6, the admin endpoint, the address file, 400/431/413, timeouts,
random and truncated input, and thousands of idle connections.

Timing assertions are one-sided or generous: a delay must be at least the delay asked and
less than the delay plus a wide margin. Counts from probability lists are checked between
25 % and 75 % when 50 % is asked, over hundreds of requests.
"""

from __future__ import annotations

import contextlib
import gzip
import http.client
import json
import os
import random
import resource
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.peers import peer_env
from support.polling import wait_until
from support.sockets import read_until_close

import nhbench

pytestmark = pytest.mark.core

CPUS = sorted(os.sched_getaffinity(0))
CLIENT_CPU = str(CPUS[0])
# Client and server on different CPUs where there are two.
SERVER_CPUS = [CPUS[-1]] if len(CPUS) > 1 else None
PACKAGE_PARENT = str(Path(nhbench.__file__).resolve().parent.parent)
CURL = shutil.which("curl")
NH_HEADER = "x-nighthawk-test-server-config"
NH_ERROR = b"test-server didn't understand the request: "
STATS_KEYS = {"requests", "connections_total", "connections_active", "rx_bytes", "tx_bytes",
              "bad_requests", "status", "stalls", "tcp_echo_bytes", "udp_echo_packets"}
# Generous margin for "delay + margin" upper bounds (sanitizer builds, busy CI machines).
MARGIN = 1.0

needs_curl = pytest.mark.skipif(CURL is None, reason="curl is not installed")


def _has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


HAS_IPV6 = _has_ipv6_loopback()


# --------------------------------------------------------------------------------------------
# clients
# --------------------------------------------------------------------------------------------


@dataclass
class Response:
    status: int
    headers: http.client.HTTPMessage
    body: bytes
    elapsed: float

    def header_values(self, name: str) -> list[str]:
        return self.headers.get_all(name) or []


def request(
    server: nhbench.TestServer | tuple[str, int],
    path: str = "/",
    method: str = "GET",
    headers: dict[str, str] | None = None,
    body: bytes | None = None,
    timeout: float = 30,
    connection: http.client.HTTPConnection | None = None,
) -> Response:
    """One request with Python's http.client; `elapsed` from before the send to the end."""
    host, port = server.address if isinstance(server, nhbench.TestServer) else server
    conn = connection or http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        start = time.monotonic()
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        data = response.read()
        elapsed = time.monotonic() - start
        return Response(response.status, response.msg, data, elapsed)
    finally:
        if connection is None:
            conn.close()


def curl(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[bytes]:
    assert CURL is not None
    return subprocess.run([CURL, "-sS", "--max-time", str(timeout), *args],
                          capture_output=True, timeout=timeout + 10, check=False, env=peer_env())


def curl_full(url: str, *args: str) -> tuple[int, dict[str, list[str]], bytes]:
    """(status, headers lower-cased -> values, body) from curl, headers via -D."""
    proc = curl("-D", "/dev/stderr", "-o", "-", *args, url)
    assert proc.returncode == 0, proc.stderr
    head = proc.stderr.decode("latin-1")
    blocks = [b for b in head.split("\r\n\r\n") if b.strip()]
    lines = blocks[-1].split("\r\n")
    status = int(lines[0].split()[1])
    headers: dict[str, list[str]] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers.setdefault(name.strip().lower(), []).append(value.strip())
    return status, headers, proc.stdout


def connect(address: tuple[str, int], timeout: float = 10) -> socket.socket:
    return socket.create_connection(address, timeout=timeout)


def exchange(address: tuple[str, int], data: bytes, timeout: float = 10) -> tuple[bytes, bool]:
    with connect(address, timeout) as sock:
        with contextlib.suppress(OSError):
            sock.sendall(data)
        return read_until_close(sock, timeout)


def read_responses(sock: socket.socket, count: int, timeout: float = 10) -> list[bytes]:
    """`count` Content-Length framed responses from a keep-alive connection."""
    sock.settimeout(timeout)
    data = b""
    responses: list[bytes] = []

    def more() -> None:
        nonlocal data
        chunk = sock.recv(65536)
        if not chunk:
            raise AssertionError(f"connection closed mid-response: {data[:200]!r}")
        data += chunk

    while len(responses) < count:
        while b"\r\n\r\n" not in data:
            more()
        head, _, rest = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(rest) < length:
            more()
            head, _, rest = data.partition(b"\r\n\r\n")
        responses.append(head + b"\r\n\r\n" + rest[:length])
        data = rest[length:]
    assert data == b"", f"more than {count} responses: {data[:200]!r}"
    return responses


def read_response(sock: socket.socket, timeout: float = 10) -> bytes:
    return read_responses(sock, 1, timeout)[0]


def run(url: str, **kw: Any) -> nhbench.Result:
    kw.setdefault("cpus", CLIENT_CPU)
    kw.setdefault("duration", 1.0)
    return nhbench.run(url, **kw)


def delta(before: dict[str, Any], after: dict[str, Any], key: str) -> int:
    return int(after[key]) - int(before[key])


def status_delta(before: dict[str, Any], after: dict[str, Any], code: int) -> int:
    return int(after["status"].get(str(code), 0)) - int(before["status"].get(str(code), 0))


@pytest.fixture(scope="module")
def srv() -> Iterator[nhbench.TestServer]:
    """A plain server shared by the tests that only use per-request options."""
    with nhbench.TestServer(cpus=SERVER_CPUS) as server:
        yield server


# --------------------------------------------------------------------------------------------
# basics and the client cross-check
# --------------------------------------------------------------------------------------------


def test_get_keep_alive_and_stats(srv: nhbench.TestServer) -> None:
    before = srv.stats()
    assert STATS_KEYS <= set(before)
    conn = http.client.HTTPConnection(*srv.address, timeout=10)
    try:
        for _ in range(3):
            r = request(srv, connection=conn)
            assert r.status == 200 and r.body == b""
    finally:
        conn.close()
    after = srv.stats()
    assert delta(before, after, "requests") == 3
    assert delta(before, after, "connections_total") == 1
    assert status_delta(before, after, 200) == 3


def test_head_has_no_body(srv: nhbench.TestServer) -> None:
    r = request(srv, "/?size=100", method="HEAD")
    assert r.status == 200 and r.body == b""


def test_server_counters_match_nhbench_client(srv: nhbench.TestServer) -> None:
    before = srv.stats()
    result = run(srv.url + "?size=64", rps=500, duration=1.0, connections=5)
    after = srv.stats()
    c = result.counters
    assert c["benchmark.http_2xx"] == 500
    assert delta(before, after, "requests") == c["upstream_rq_total"]
    assert status_delta(before, after, 200) == c["benchmark.http_2xx"]
    assert delta(before, after, "connections_total") == c["upstream_cx_total"]
    # what one side sent, the other received
    assert delta(before, after, "rx_bytes") == c["upstream_cx_tx_bytes_total"]
    assert delta(before, after, "tx_bytes") == c["upstream_cx_rx_bytes_total"]
    body = result.stat("benchmark_http_client.response_body_size")
    assert body.min == body.max == 64


@needs_curl
@pytest.mark.peer
def test_curl_get(srv: nhbench.TestServer) -> None:
    status, headers, body = curl_full(srv.url + "?size=10")
    assert status == 200 and len(body) == 10
    assert headers["content-length"] == ["10"]


def test_pipelined_requests_answer_in_order(srv: nhbench.TestServer) -> None:
    with connect(srv.address) as sock:
        sock.sendall(b"".join(
            f"GET /?size={n} HTTP/1.1\r\nHost: x\r\n\r\n".encode() for n in (1, 2, 3)
        ))
        responses = read_responses(sock, 3)
    assert all(r.startswith(b"HTTP/1.1 200") for r in responses)
    assert [len(r.partition(b"\r\n\r\n")[2]) for r in responses] == [1, 2, 3]


def test_http10_closes_after_the_response(srv: nhbench.TestServer) -> None:
    data, closed = exchange(srv.address, b"GET / HTTP/1.0\r\n\r\n")
    assert data.startswith(b"HTTP/1.") and b" 200 " in data.split(b"\r\n")[0]
    assert closed


def test_multiple_workers_share_the_port() -> None:
    with nhbench.TestServer(workers=2) as server:
        result = run(server.url, rps=0, duration=1.0, connections=20)
        stats = server.stats()
    assert result.counters["benchmark.http_2xx"] > 100
    assert stats["requests"] == result.counters["upstream_rq_total"]
    assert stats["connections_total"] == 20


def test_workers_auto() -> None:
    with nhbench.TestServer(workers="auto") as server:
        result = run(server.url, rps=200, duration=0.5, connections=8)
        assert server.stats()["requests"] == result.counters["upstream_rq_total"] == 100


# --------------------------------------------------------------------------------------------
# Nighthawk response options, static
# --------------------------------------------------------------------------------------------


def test_static_body_size_and_headers() -> None:
    headers = [
        "X-A: 1",
        {"header": {"key": "X-B", "value": "2"}, "append": True},
        {"header": {"key": "X-B", "value": "3"}, "append": True},
        # append=false replaces the server's own content-type
        "Content-Type: application/x-nhbench",
    ]
    with nhbench.TestServer(response_body_size=100, response_headers=headers) as server:
        r = request(server)
        assert r.status == 200 and len(r.body) == 100
        assert r.header_values("X-A") == ["1"]
        assert r.header_values("X-B") == ["2", "3"]
        assert r.header_values("Content-Type") == ["application/x-nhbench"]
        result = run(server.url, rps=100, duration=0.5)
    body = result.stat("benchmark_http_client.response_body_size")
    assert body.min == body.max == 100
    assert result.counters["benchmark.http_2xx"] == 50


def test_static_body_size_wins_over_echo() -> None:
    with nhbench.TestServer(response_body_size=7) as server:
        r = request(server, method="POST", body=b"x" * 100)
        assert len(r.body) == 7


def test_echo_request_headers() -> None:
    with nhbench.TestServer(echo_request_headers=True) as server:
        r = request(server, headers={"X-Echo-Me": "hello-42"})
    assert r.status == 200
    text = r.body.decode("latin-1").lower()
    assert "x-echo-me" in text and "hello-42" in text


def test_static_delay_is_at_least_the_delay_and_does_not_block_the_loop() -> None:
    with nhbench.TestServer(static_delay="100ms", cpus=SERVER_CPUS) as server:
        r = request(server)
        assert r.status == 200
        assert 0.1 <= r.elapsed < 0.1 + MARGIN
        # 50 connections, 100 ms each: up to 500 rps if the delay is a timer, 10 if it
        # blocked the (single) worker
        result = run(server.url, rps=200, duration=1.0, connections=50, drain_timeout=5)
    c = result.counters
    assert c["benchmark.http_2xx"] >= 190
    assert result.stat("benchmark_http_client.request_to_response").min >= 0.1 * 0.999
    assert result.stat("benchmark_http_client.request_to_response").p(50) < 0.1 + MARGIN


def test_concurrency_based_linear_delay() -> None:
    minimal, factor = 0.05, 0.03
    with nhbench.TestServer(
        concurrency_based_linear_delay={"minimal_delay": "50ms", "concurrency_delay_factor": "30ms"}
    ) as server:
        single = request(server)
        assert minimal <= single.elapsed < minimal + 2 * factor + MARGIN
        # 8 at once: the later ones see more requests active and wait longer
        barrier = threading.Barrier(8)

        def one(_: int) -> float:
            conn = http.client.HTTPConnection(*server.address, timeout=30)
            conn.connect()
            barrier.wait()
            try:
                return request(server, connection=conn).elapsed
            finally:
                conn.close()

        with ThreadPoolExecutor(8) as pool:
            elapsed = list(pool.map(one, range(8)))
    assert min(elapsed) >= minimal
    assert max(elapsed) >= minimal + 3 * factor
    assert max(elapsed) < minimal + 8 * factor + MARGIN


def test_emit_previous_request_delta() -> None:
    with nhbench.TestServer(emit_previous_request_delta_in_response_header="x-prev-delta") as s:
        conn = http.client.HTTPConnection(*s.address, timeout=10)
        try:
            request(s, connection=conn)
            time.sleep(0.2)
            second = request(s, connection=conn)
        finally:
            conn.close()
    values = second.header_values("x-prev-delta")
    assert len(values) == 1
    assert 0.15e9 <= int(values[0]) < 10e9


# --------------------------------------------------------------------------------------------
# Nighthawk response options, per request (x-nighthawk-test-server-config)
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def nh() -> Iterator[nhbench.TestServer]:
    with nhbench.TestServer(response_body_size=10, response_headers=["X-Static: s"]) as server:
        yield server


def nh_request(server: nhbench.TestServer, config: object, **kw: Any) -> Response:
    text = config if isinstance(config, str) else json.dumps(config)
    headers = {NH_HEADER: text, **kw.pop("headers", {})}
    return request(server, headers=headers, **kw)


def test_per_request_body_size_overrides_static(nh: nhbench.TestServer) -> None:
    assert len(request(nh).body) == 10
    r = nh_request(nh, {"response_body_size": 33})
    assert r.status == 200 and len(r.body) == 33
    # and the next request is back to the static options
    assert len(request(nh).body) == 10


def test_per_request_headers_append_to_static(nh: nhbench.TestServer) -> None:
    r = nh_request(nh, {"response_headers": [{"header": {"key": "x-dyn", "value": "1"}}]})
    assert r.header_values("X-Static") == ["s"]
    assert r.header_values("x-dyn") == ["1"]


def test_per_request_header_replace_or_append(nh: nhbench.TestServer) -> None:
    replace = nh_request(nh, {"response_headers": [
        {"header": {"key": "X-Static", "value": "d"}, "append": False}]})
    assert replace.header_values("X-Static") == ["d"]
    append = nh_request(nh, {"response_headers": [
        {"header": {"key": "X-Static", "value": "d"}, "append": True}]})
    assert append.header_values("X-Static") == ["s", "d"]


def test_per_request_delays(nh: nhbench.TestServer) -> None:
    r = nh_request(nh, {"static_delay": "0.1s"})
    assert 0.1 <= r.elapsed < 0.1 + MARGIN
    r = nh_request(nh, {"concurrency_based_linear_delay": {"minimal_delay": "0.08s",
                                                           "concurrency_delay_factor": "0.01s"}})
    assert 0.08 <= r.elapsed < 0.1 + MARGIN


def test_per_request_echo_and_delta_header(nh: nhbench.TestServer) -> None:
    r = nh_request(nh, {"echo_request_headers": True}, headers={"X-Echo-Me": "per-request"})
    assert b"per-request" in r.body
    conn = http.client.HTTPConnection(*nh.address, timeout=10)
    try:
        config = {"emit_previous_request_delta_in_response_header": "x-d"}
        nh_request(nh, config, connection=conn)
        time.sleep(0.05)
        r = nh_request(nh, config, connection=conn)
    finally:
        conn.close()
    assert int(r.header_values("x-d")[0]) >= 0.04e9


@pytest.mark.parametrize(
    "config",
    ['{"response_body_size": ', "not json at all", '{"no_such_option": 1}',
     '{"response_body_size": "big"}', '[1, 2]'],
)
def test_per_request_config_that_does_not_parse_gets_500(nh: nhbench.TestServer,
                                                         config: str) -> None:
    r = nh_request(nh, config)
    assert r.status == 500
    assert r.body.startswith(NH_ERROR), r.body
    assert len(r.body) > len(NH_ERROR)  # says what was not understood


def test_per_request_body_size_over_the_limit_is_refused_or_capped(
    nh: nhbench.TestServer,
) -> None:
    r = nh_request(nh, {"response_body_size": 4 * 1024 * 1024 + 1})
    assert (r.status == 500 and r.body.startswith(NH_ERROR)) or (
        r.status == 200 and len(r.body) <= 4 * 1024 * 1024
    )


def test_per_request_config_with_nhbench_client(nh: nhbench.TestServer) -> None:
    result = run(nh.url, rps=100, duration=0.5,
                 request_header=[f'{NH_HEADER}: {{"response_body_size": 33}}'])
    body = result.stat("benchmark_http_client.response_body_size")
    assert body.min == body.max == 33
    assert result.counters["benchmark.http_2xx"] == 50
    bad = run(nh.url, rps=100, duration=0.5, no_default_failure_predicates=True,
              request_header=[f"{NH_HEADER}: nope"])
    assert bad.counters["benchmark.http_5xx"] == 50


@needs_curl
@pytest.mark.peer
def test_per_request_config_with_curl(nh: nhbench.TestServer) -> None:
    status, headers, body = curl_full(
        nh.url, "-H", NH_HEADER + ': {"response_body_size": 5, "response_headers": '
        '[{"header": {"key": "x-curl", "value": "yes"}}]}'
    )
    assert status == 200 and len(body) == 5 and headers["x-curl"] == ["yes"]
    status, _, body = curl_full(nh.url, "-H", NH_HEADER + ": {broken")
    assert status == 500 and body.startswith(NH_ERROR)


# --------------------------------------------------------------------------------------------
# Fortio echo parameters
# --------------------------------------------------------------------------------------------


def test_status(srv: nhbench.TestServer) -> None:
    assert request(srv, "/?status=418").status == 418
    assert request(srv, "/any/path?status=503").status == 503


def test_status_probability_list(srv: nhbench.TestServer) -> None:
    before = srv.stats()
    result = run(srv.url + "?status=503:50", rps=400, duration=1.0, connections=10,
                 no_default_failure_predicates=True)
    after = srv.stats()
    c = result.counters
    assert c["benchmark.http_2xx"] + c["benchmark.http_5xx"] == 400
    assert 100 <= c["benchmark.http_5xx"] <= 300
    assert status_delta(before, after, 503) == c["benchmark.http_5xx"]
    assert status_delta(before, after, 200) == c["benchmark.http_2xx"]


def test_status_list_with_two_codes(srv: nhbench.TestServer) -> None:
    before = srv.stats()
    result = run(srv.url + "?status=503:25,404:25", rps=400, duration=1.0, connections=10,
                 no_default_failure_predicates=True)
    after = srv.stats()
    assert 40 <= status_delta(before, after, 503) <= 160
    assert 40 <= status_delta(before, after, 404) <= 160
    assert result.counters["benchmark.http_4xx"] == status_delta(before, after, 404)


def test_delay(srv: nhbench.TestServer) -> None:
    r = request(srv, "/?delay=100ms")
    assert r.status == 200 and 0.1 <= r.elapsed < 0.1 + MARGIN


def test_delay_probability_list(srv: nhbench.TestServer) -> None:
    result = run(srv.url + "?delay=100ms:50", rps=100, duration=2.0, connections=50,
                 drain_timeout=5)
    assert result.counters["benchmark.http_2xx"] == 200
    sent = result.stat("benchmark_http_client.request_to_response")
    assert sent.p(25) < 0.09  # at least a quarter were not delayed
    assert sent.p(75) >= 0.1  # at least a quarter were


def test_size_and_size_list(srv: nhbench.TestServer) -> None:
    assert len(request(srv, "/?size=1000").body) == 1000
    assert len(request(srv, "/?size=0", method="POST", body=b"abc").body) == 0
    result = run(srv.url + "?size=100:50", rps=400, duration=1.0, connections=10)
    body = result.stat("benchmark_http_client.response_body_size")
    assert body.count == 400 and body.min == 0 and body.max == 100
    assert 25 <= body.mean <= 75


def test_caps() -> None:
    with nhbench.TestServer(max_echo_delay="200ms", max_payload_kb=4) as server:
        r = request(server, "/?delay=5s")
        assert r.status == 200 and 0.2 <= r.elapsed < 0.2 + MARGIN
        r = request(server, "/?size=1000000")
        assert r.status == 200 and len(r.body) == 4096
        r = request(server, "/?delay=10s:100")
        assert 0.2 <= r.elapsed < 0.2 + MARGIN
        assert server.running


def test_header_param(srv: nhbench.TestServer) -> None:
    r = request(srv, "/?header=X-A:1&header=X-B:two")
    assert r.header_values("X-A") == ["1"] and r.header_values("X-B") == ["two"]


def test_close(srv: nhbench.TestServer) -> None:
    with connect(srv.address) as sock:
        sock.sendall(b"GET /?close=true HTTP/1.1\r\nHost: x\r\n\r\n")
        data, closed = read_until_close(sock)
    assert data.startswith(b"HTTP/1.1 200")
    assert b"connection: close" in data.lower()
    assert closed
    before = srv.stats()
    result = run(srv.url + "?close=true", rps=100, duration=1.0, connections=2)
    after = srv.stats()
    c = result.counters
    assert c["benchmark.http_2xx"] == 100
    assert delta(before, after, "connections_total") == c["upstream_cx_total"] >= 95


def test_close_probability(srv: nhbench.TestServer) -> None:
    before = srv.stats()
    result = run(srv.url + "?close=50", rps=400, duration=1.0, connections=2)
    after = srv.stats()
    assert result.counters["benchmark.http_2xx"] == 400
    assert 100 <= delta(before, after, "connections_total") <= 300


def test_echo_of_the_request_body(srv: nhbench.TestServer) -> None:
    assert request(srv, method="POST", body=b"hello").body == b"hello"
    payload = bytes(random.Random(1).randrange(256) for _ in range(100_000))
    r = request(srv, "/echo", method="PUT", body=payload)
    assert r.status == 200 and r.body == payload
    # chunked request body
    # an iterable body without a length: http.client sends it chunked
    r = request(srv, method="POST", body=iter([b"ab", b"cd", b"ef"]))  # type: ignore[arg-type]
    assert r.body == b"abcdef"


def test_echo_is_capped() -> None:
    with nhbench.TestServer(max_payload_kb=1) as server:
        payload = os.urandom(4000)
        r = request(server, method="POST", body=payload)
        assert r.status == 200
        assert r.body == payload[:1024]
        assert server.running


@needs_curl
@pytest.mark.peer
def test_echo_with_curl(srv: nhbench.TestServer, tmp_path: Path) -> None:
    data = tmp_path / "body.bin"
    data.write_bytes(os.urandom(50_000))
    status, _, body = curl_full(srv.url, "--data-binary", f"@{data}")
    assert status == 200 and body == data.read_bytes()


def test_gzip(srv: nhbench.TestServer) -> None:
    payload = b"nhbench gzip test " * 500
    r = request(srv, "/?gzip=true", method="POST", body=payload,
                headers={"Accept-Encoding": "gzip"})
    assert r.status == 200
    assert r.header_values("Content-Encoding") == ["gzip"]
    assert len(r.body) < len(payload)
    assert gzip.decompress(r.body) == payload
    r = request(srv, "/?gzip=true&size=2000", headers={"Accept-Encoding": "gzip"})
    assert len(gzip.decompress(r.body)) == 2000


def test_gzip_probability(srv: nhbench.TestServer) -> None:
    # a compressible 2000-byte echo: ~30 bytes when gzipped, 2000 when not
    result = run(srv.url + "?gzip=50", rps=400, duration=1.0, connections=10,
                 request_method="POST", request_body_size=2000,
                 request_header=["Accept-Encoding: gzip"])
    body = result.stat("benchmark_http_client.response_body_size")
    assert body.count == 400
    assert body.min < 100 and body.max == 2000
    assert 0.25 * 2000 <= body.mean <= 0.75 * 2000 + 100


@needs_curl
@pytest.mark.peer
def test_gzip_with_curl(srv: nhbench.TestServer) -> None:
    payload = "curl gzip " * 300
    status, headers, body = curl_full(srv.url + "?gzip=true", "--compressed",
                                      "--data-binary", payload)
    assert status == 200 and headers["content-encoding"] == ["gzip"]
    assert body == payload.encode()


def test_echo_default_params() -> None:
    with nhbench.TestServer(echo_default_params="status=418&header=X-Default:yes") as server:
        r = request(server)
        assert r.status == 418 and r.header_values("X-Default") == ["yes"]
        # a request that gives status itself keeps the default header
        r = request(server, "/?status=201")
        assert r.status == 201 and r.header_values("X-Default") == ["yes"]


def test_debug(srv: nhbench.TestServer) -> None:
    r = request(srv, "/debug", headers={"X-Debug-Me": "dbg-value"})
    assert r.status == 200
    assert r.headers.get_content_type() == "text/plain"
    text = r.body.decode("utf-8", "replace")
    assert "GET" in text and "/debug" in text and "HTTP/1.1" in text
    assert "x-debug-me" in text.lower() and "dbg-value" in text
    r = request(srv, "/debug", method="POST", body=b"1234567")
    assert "POST" in r.body.decode("utf-8", "replace")


def test_echo_default_params_when_no_query() -> None:
    """Fortio's rule: the defaults only for a URI with no '?' at all; a query, even an
    empty one, keeps the request to its own parameters."""
    with nhbench.TestServer(echo_default_params="status=418&header=X-Default:yes",
                            echo_default_params_when="no-query") as server:
        r = request(server, "/x")
        assert r.status == 418 and r.header_values("X-Default") == ["yes"]
        for path in ("/?status=201", "/?", "/?other=1"):
            r = request(server, path)
            assert r.status == (201 if "201" in path else 200), path
            assert r.header_values("X-Default") == [], path


def is_debug(r: Response) -> bool:
    return r.status == 200 and b"echo debug server up for" in r.body


def test_debug_path_is_configurable() -> None:
    with nhbench.TestServer(debug_path="/dbg") as server:
        assert is_debug(request(server, "/dbg?x=1"))
        for path in ("/debug", "/dbg/", "/dbgx", "/db"):
            assert not is_debug(request(server, path)), path
    # A subtree, as Go's mux reads a pattern ending in '/', but for Fortio's PATH/echo/.
    with nhbench.TestServer(debug_path="/d/") as server:
        for path in ("/d/", "/d/x/y?z=1", "/d/echo"):
            assert is_debug(request(server, path)), path
        for path in ("/d", "/d/echo/", "/d/echo/x", "/debug"):
            assert not is_debug(request(server, path)), path
    with nhbench.TestServer(debug_path="") as server:
        r = request(server, "/debug", method="POST", body=b"echoed")
        assert r.status == 200 and r.body == b"echoed"


@pytest.mark.parametrize("path", ["/", "dbg", "/a b", "/a?b", "/a#b", "/\x01"])
def test_debug_path_refused(path: str) -> None:
    with pytest.raises(nhbench.OptionsError, match="debug_path"):
        nhbench.TestServer(debug_path=path)


@needs_curl
@pytest.mark.peer
def test_debug_path_and_env_dump_over_h2c(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NHB_TEST_ENV_MARKER", "marker-h2")
    with nhbench.TestServer(debug_path="/d/", debug_env_dump=True) as server:
        for path, debug, dump in (("d/x?env=dump", True, True), ("d/x", True, False),
                                  ("debug?env=dump", False, False),
                                  ("d/echo/x?env=dump", False, False)):
            status, _, body = curl_full(server.url + path, "--http2-prior-knowledge")
            assert status == 200 and (b"echo debug server up for" in body) == debug, path
            assert (b"NHB_TEST_ENV_MARKER=marker-h2\n" in body) == dump, path


def environment_section(body: bytes) -> list[str] | None:
    head, sep, env = body.decode("utf-8", "replace").partition("\n\nenvironment:\n\n")
    return env.splitlines() if sep else None


def test_debug_env_dump(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NHB_TEST_ENV_MARKER", "marker-value-41")
    with nhbench.TestServer(debug_env_dump=True) as server:
        env = environment_section(request(server, "/debug?env=dump").body)
        # The process's environment as it was at start-up, one NAME=value a line, as Fortio
        # prints it (C's environ may hold a few more than os.environ: LINES, COLUMNS).
        assert env is not None and "NHB_TEST_ENV_MARKER=marker-value-41" in env
        assert {f"{k}={v}" for k, v in os.environ.items()} <= set(env)
        # Go's url.Query().Get: the first "env", percent-decoded; a pair that does not decode
        # (a bad escape, a ';') is skipped.
        for query, dumps in (("env=dum%70", True), ("a=%zz&env=dump", True),
                             ("env=%zz&env=dump", True), ("e%6Ev=dump", True),
                             ("x;y&env=dump", True), ("env=x&env=dump", False),
                             ("env=dump%00", False), ("env=dumpx", False), ("env", False),
                             ("env=dump;", False), ("", False)):
            r = request(server, f"/debug?{query}")
            assert is_debug(r) and (environment_section(r.body) is not None) == dumps, query
        # Only the debug echo dumps.
        assert request(server, "/?env=dump").body == b""


@needs_curl
@pytest.mark.peer
def test_debug_with_curl(srv: nhbench.TestServer) -> None:
    status, _, body = curl_full(srv.url + "debug", "-H", "X-Curl-Debug: 7")
    assert status == 200 and b"x-curl-debug" in body.lower()


def test_per_request_stall_freezes_other_requests(srv: nhbench.TestServer) -> None:
    before = srv.stats()
    with ThreadPoolExecutor(1) as pool:
        staller = pool.submit(request, srv, "/?stall=400ms")
        time.sleep(0.05)
        other = request(srv)
        staller.result()
    assert other.status == 200
    assert 0.25 <= other.elapsed < 0.4 + MARGIN
    assert delta(before, srv.stats(), "stalls") >= 1


# --------------------------------------------------------------------------------------------
# stall injection against the client's coordinated-omission correction
# --------------------------------------------------------------------------------------------


def test_stall_injection_shows_in_the_corrected_latency() -> None:
    """The self-test the feature exists for: a known 200 ms stall every second must show in
    the client's coordinated-omission-corrected latency and its blocking statistics, while
    the latency measured from the actual send hides it."""
    stall = 0.2
    with nhbench.TestServer(stall_every="1s", stall_for="200ms", cpus=SERVER_CPUS) as server:
        before = server.stats()
        result = run(server.url, rps=500, duration=3.5, connections=4)
        stalls = delta(before, server.stats(), "stalls")
    c = result.counters
    assert 2 <= stalls <= 5
    assert c["benchmark.http_2xx"] >= 1700
    # the headline latency contains the whole stall...
    assert result.latency.max >= stall * 0.75
    assert result.latency.p(95) >= 0.05
    # ...the client knows it was held up...
    assert c["sequencer.blocked"] >= 1
    assert result.stat("sequencer.blocking").count >= 1
    assert result.stat("sequencer.blocking").max >= stall / 4
    # ...while the send-based latency hides most of it (coordinated omission)
    sent = result.stat("benchmark_http_client.request_to_response")
    assert sent.p(95) < 0.05
    assert result.latency.p(95) > 3 * sent.p(95)


# --------------------------------------------------------------------------------------------
# TCP and UDP echo
# --------------------------------------------------------------------------------------------


def test_tcp_echo() -> None:
    with nhbench.TestServer(tcp_echo="127.0.0.1:0") as server:
        payload = os.urandom(100_000)
        with connect(server.tcp_echo_address) as sock:
            received = b""

            def reader() -> None:
                nonlocal received
                while len(received) < len(payload):
                    chunk = sock.recv(65536)
                    if not chunk:
                        return
                    received += chunk

            thread = threading.Thread(target=reader)
            thread.start()
            sock.sendall(payload)
            thread.join(30)
        assert received == payload
        assert server.stats()["tcp_echo_bytes"] >= len(payload)
        # and again on a second connection
        with connect(server.tcp_echo_address) as sock:
            sock.sendall(b"ping")
            assert sock.recv(4) == b"ping"


def test_udp_echo() -> None:
    with nhbench.TestServer(udp_echo="127.0.0.1:0") as server:
        address = server.udp_echo_address
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.settimeout(1.0)
            for payload in (b"x", b"hello udp", os.urandom(1400)):
                for _attempt in range(5):  # UDP: a lost datagram is resent
                    sock.sendto(payload, address)
                    try:
                        data, peer = sock.recvfrom(65536)
                    except TimeoutError:
                        continue
                    break
                else:
                    pytest.fail("no UDP echo")
                assert data == payload and peer[1] == address[1]
        assert server.stats()["udp_echo_packets"] >= 3


# --------------------------------------------------------------------------------------------
# unix sockets and IPv6
# --------------------------------------------------------------------------------------------


@pytest.fixture
def sock_dir() -> Iterator[str]:
    # pytest's tmp_path can exceed the 107 bytes a unix socket path may have
    import tempfile

    with tempfile.TemporaryDirectory(prefix="nhb-") as directory:
        yield directory


def test_unix_socket_with_python(sock_dir: str) -> None:
    path = os.path.join(sock_dir, "s.sock")
    with nhbench.TestServer(listen=["127.0.0.1:0", f"unix:{path}"],
                            response_body_size=5) as server:
        assert server.unix_path == path and server.url.startswith("http://127.0.0.1:")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(10)
            sock.connect(path)
            sock.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
            response = read_response(sock)
        assert response.startswith(b"HTTP/1.1 200")
        assert len(response.partition(b"\r\n\r\n")[2]) == 5
        assert server.stats()["requests"] == 1
    # a second server can take the same path
    with nhbench.TestServer(listen=f"unix:{path}") as again:
        with pytest.raises(nhbench.ServerError, match="unix sockets only"):
            _ = again.url


def test_abstract_unix_socket() -> None:
    name = f"@nhbench-test-{os.getpid()}"
    with nhbench.TestServer(listen=f"unix:{name}") as server:
        assert server.unix_path == name
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(10)
            sock.connect("\0" + name[1:])
            sock.sendall(b"GET /?size=2 HTTP/1.1\r\nHost: localhost\r\n\r\n")
            response = read_response(sock)
        assert response.startswith(b"HTTP/1.1 200")
        assert len(response.partition(b"\r\n\r\n")[2]) == 2


@needs_curl
@pytest.mark.peer
def test_unix_socket_with_curl(sock_dir: str) -> None:
    path = os.path.join(sock_dir, "c.sock")
    with nhbench.TestServer(listen=path) as server:
        status, _, body = curl_full("http://localhost/?size=7", "--unix-socket", path)
        assert status == 200 and len(body) == 7
        status, _, body = curl_full("http://localhost/", "--unix-socket", path,
                                    "--data-binary", "over unix")
        assert body == b"over unix"
        assert server.stats()["requests"] == 2


@pytest.mark.skipif(not HAS_IPV6, reason="this machine has no IPv6 loopback (::1)")
def test_ipv6() -> None:
    with nhbench.TestServer(listen=["[::1]:0", "127.0.0.1:0"]) as server:
        host, port = server.address
        assert host == "::1" and server.url == f"http://[::1]:{port}/"
        assert server.urls[1].startswith("http://127.0.0.1:")
        result = run(server.url, rps=100, duration=0.5)
        assert result.counters["benchmark.http_2xx"] == 50
        assert len(request(server, "/?size=3").body) == 3


@needs_curl
@pytest.mark.peer
@pytest.mark.skipif(not HAS_IPV6, reason="this machine has no IPv6 loopback (::1)")
def test_ipv6_with_curl() -> None:
    with nhbench.TestServer(listen="[::1]:0") as server:
        status, _, body = curl_full(server.url + "?size=4", "-g")
        assert status == 200 and len(body) == 4


# --------------------------------------------------------------------------------------------
# admin endpoint, address file, subprocess mode, the CLI
# --------------------------------------------------------------------------------------------


def test_admin_endpoint_equals_stats() -> None:
    with nhbench.TestServer(admin="127.0.0.1:0") as server:
        assert server.admin_url.endswith("/stats")
        run(server.url + "?status=503:50", rps=200, duration=0.5,
            no_default_failure_predicates=True)
        host, port = server.admin_address  # type: ignore[misc]
        r = request((host, port), "/stats")
        assert r.status == 200
        assert r.headers.get_content_type() == "application/json"
        admin = json.loads(r.body)
        assert admin == server.stats()
        assert STATS_KEYS <= set(admin)
        assert admin["requests"] == 100
        assert sum(admin["status"].values()) == 100


def test_address_file_in_process(tmp_path: Path) -> None:
    target = tmp_path / "addresses.json"
    with nhbench.TestServer(admin="127.0.0.1:0", tcp_echo="127.0.0.1:0",
                            address_file=target) as server:
        data = json.loads(target.read_text())
        assert data == server.report()
        assert data["listen"][0]["url"] == server.url
        assert data["admin"]["url"] == server.admin_url
        assert (data["tcp_echo"][0]["host"], data["tcp_echo"][0]["port"]) == \
            server.tcp_echo_address
    assert not target.exists()


def test_subprocess_server_with_admin_and_echo(sock_dir: str) -> None:
    path = os.path.join(sock_dir, "p.sock")
    with nhbench.TestServer(
        subprocess=True, listen=["127.0.0.1:0", f"unix:{path}"], admin="127.0.0.1:0",
        tcp_echo="127.0.0.1:0", udp_echo="127.0.0.1:0", response_body_size=9,
    ) as server:
        assert server.pid != os.getpid()
        assert server.unix_path == path
        result = run(server.url, rps=100, duration=0.5)
        stats = server.stats()  # live, through the admin endpoint
        assert stats["requests"] == result.counters["upstream_rq_total"] == 50
        with connect(server.tcp_echo_address) as sock:
            sock.sendall(b"echo")
            assert sock.recv(4) == b"echo"
    assert server.stats()["requests"] == 50


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_PARENT, env.get("PYTHONPATH")]))
    return env


def start_cli(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "nhbench", "server", *args], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env=_env(), stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_cli_prints_addresses_writes_the_address_file_and_stops_on_signal(
    sock_dir: str, sig: signal.Signals
) -> None:
    path = os.path.join(sock_dir, "cli.sock")
    address_file = os.path.join(sock_dir, "addresses.json")
    proc = start_cli("--listen", "127.0.0.1:0", "--listen", f"unix:{path}",
                     "--admin", "127.0.0.1:0", "--tcp-echo", "127.0.0.1:0",
                     "--udp-echo", "127.0.0.1:0", "--address-file", address_file,
                     "--response-body-size", "3")
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline().strip() for _ in range(5)]
        assert lines[0].startswith("listening on http://127.0.0.1:"), lines
        assert lines[1] == f"listening on unix:{path}"
        assert lines[2].startswith("admin on http://127.0.0.1:") and lines[2].endswith("/stats")
        assert lines[3].startswith("tcp-echo on 127.0.0.1:")
        assert lines[4].startswith("udp-echo on 127.0.0.1:")
        data = json.loads(Path(address_file).read_text())
        assert data["pid"] == proc.pid
        assert "listening on " + data["listen"][0]["url"] == lines[0]
        assert data["listen"][1] == {"kind": "unix", "path": path, "url": f"unix:{path}"}
        assert "admin on " + data["admin"]["url"] == lines[2]
        url = lines[0].removeprefix("listening on ")
        result = nhbench.run(url, rps=50, duration=0.5)
        assert result.stat("benchmark_http_client.response_body_size").max == 3
        admin = json.loads(request(
            (data["admin"]["host"], data["admin"]["port"]), "/stats").body)
        assert admin["requests"] == 25
    finally:
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "server stopped: 25 requests" in err
    assert not os.path.exists(address_file)


def test_cli_config_file_and_flag_override(tmp_path: Path) -> None:
    config = tmp_path / "nighthawk.yaml"
    config.write_text("response_body_size: 21\nresponse_headers:\n"
                      "- { header: { key: x-from-file, value: '1' } }\n")
    proc = start_cli("--config", str(config), "--response-body-size", "4")
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip().removeprefix("listening on ")
        r = request(urlsplit_host_port(url))
        assert len(r.body) == 4 and r.header_values("x-from-file") == ["1"]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert proc.returncode == 0


def urlsplit_host_port(url: str) -> tuple[str, int]:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return str(parts.hostname), int(parts.port or 80)


def test_cli_start_failure_is_one_line_exit_1() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        # SO_REUSEPORT lets the server share a port only with sockets that set it too
        proc = start_cli("--listen", f"127.0.0.1:{port}")
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 1, err
    assert len(err.splitlines()) == 1 and err.startswith("nhbench: error: ")


# --------------------------------------------------------------------------------------------
# robustness: 400 / 431 / 413, timeouts, fuzzing, many idle connections
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        b"THIS IS NOT HTTP\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
        b"GET / HTTP/9.9\r\n\r\n",
        b"GET / HTTP/1.1\r\nBad Header Line\r\n\r\n",
        b"\x00\x01\x02\x03\r\n\r\n",
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    ],
)
def test_malformed_request_gets_400_and_close(srv: nhbench.TestServer, data: bytes) -> None:
    before = srv.stats()
    response, closed = exchange(srv.address, data)
    assert response.startswith(b"HTTP/1.1 400"), response
    assert closed
    assert delta(before, srv.stats(), "bad_requests") >= 1
    assert request(srv).status == 200


def test_header_block_over_the_limit_gets_431_and_close() -> None:
    with nhbench.TestServer(max_header_bytes=1024) as server:
        head = b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 2000 + b"\r\n\r\n"
        response, closed = exchange(server.address, head)
        assert response.startswith(b"HTTP/1.1 431"), response
        assert closed
        # just under the limit is fine
        ok = request(server, headers={"X-Small": "a" * 500})
        assert ok.status == 200


def test_default_header_limit_is_64k(srv: nhbench.TestServer) -> None:
    head = b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n"
    response, closed = exchange(srv.address, head)
    assert response.startswith(b"HTTP/1.1 431") and closed


def test_body_over_the_limit_gets_413_and_close() -> None:
    with nhbench.TestServer(max_body_bytes=1000) as server:
        head = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n"
        response, closed = exchange(server.address, head + b"b" * 5000)
        assert response.startswith(b"HTTP/1.1 413"), response
        assert closed
        chunked = (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                   + (b"320\r\n" + b"c" * 800 + b"\r\n") * 2 + b"0\r\n\r\n")
        response, closed = exchange(server.address, chunked)
        assert response.startswith(b"HTTP/1.1 413"), response
        assert closed
        assert request(server, method="POST", body=b"d" * 1000).body == b"d" * 1000


def test_idle_timeout_closes_keep_alive_connections() -> None:
    with nhbench.TestServer(idle_timeout="300ms") as server:
        with connect(server.address) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            assert read_response(sock).startswith(b"HTTP/1.1 200")
            start = time.monotonic()
            rest, closed = read_until_close(sock, timeout=5)
            waited = time.monotonic() - start
        assert closed and rest == b""
        assert 0.25 <= waited < 0.3 + 2 * MARGIN
        assert wait_until(lambda: server.stats()["connections_active"] == 0)


def test_header_timeout_closes_slow_clients_without_holding_the_worker() -> None:
    with nhbench.TestServer(header_timeout="400ms", idle_timeout="10s") as server:
        with connect(server.address) as slow:
            start = time.monotonic()
            slow.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
            closed = False
            # trickle one header byte every 50 ms: never idle, never complete
            while time.monotonic() - start < 5:
                try:
                    slow.sendall(b"X")
                except OSError:
                    closed = True
                    break
                # meanwhile others are served at once
                assert request(server).elapsed < MARGIN
                slow.settimeout(0.05)
                try:
                    data = slow.recv(65536)
                except TimeoutError:
                    continue
                except ConnectionResetError:
                    closed = True
                    break
                if not data or data.startswith(b"HTTP/1.1 408"):
                    closed = True
                    break
            waited = time.monotonic() - start
        assert closed
        assert 0.35 <= waited < 0.4 + 2 * MARGIN


def test_connection_that_never_sends_is_closed() -> None:
    with nhbench.TestServer(header_timeout="300ms", idle_timeout="300ms") as server:
        with connect(server.address) as sock:
            data, closed = read_until_close(sock, timeout=5)
        assert closed and (data == b"" or data.startswith(b"HTTP/1.1 408"))


def _fuzz_cases(rng: random.Random, count: int) -> list[tuple[bytes, bool]]:
    valid = [
        b"GET /?size=10 HTTP/1.1\r\nHost: x\r\n\r\n",
        b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
        b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        b"GET /debug HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n\r\n",
        (b'GET / HTTP/1.1\r\nHost: x\r\nx-nighthawk-test-server-config: {"response_body_size": 3}'
         b"\r\n\r\n"),
        (b"GET /?status=503:50&delay=1ms:50&header=A:b&gzip=true HTTP/1.1\r\nHost: x\r\n"
         b"Accept-Encoding: gzip\r\n\r\n"),
    ]
    cases: list[tuple[bytes, bool]] = []
    for i in range(count):
        kind = i % 6
        base = rng.choice(valid)
        if kind == 0:  # random bytes
            data = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 3000)))
        elif kind == 1:  # truncated valid request
            data = base[: rng.randrange(1, len(base))]
        elif kind == 2:  # valid request with bytes flipped
            buf = bytearray(base)
            for _ in range(rng.randrange(1, 6)):
                buf[rng.randrange(len(buf))] = rng.randrange(256)
            data = bytes(buf)
        elif kind == 3:  # valid request followed by garbage (pipelined)
            data = base + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200)))
        elif kind == 4:  # bogus lengths and chunk sizes
            data = rng.choice([
                b"POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n",
                b"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
                b"POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello",
                b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFFFFFF\r\n",
                b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n",
                b"GET /?size=99999999999999999999999&delay=99999999h HTTP/1.1\r\n\r\n",
                b"GET /?status=0&status=999999&size=-5&close=maybe HTTP/1.1\r\n\r\n",
                b"GET /%%%%%?\xff\xfe=\x00 HTTP/1.1\r\n\r\n",
                b"GET / HTTP/1.1\r\n" + b"X: y\r\n" * 5000 + b"\r\n",
                b"\r\n" * 1000,
            ])
        else:  # line noise in header names/values
            noise = bytes(rng.choice(b"\x00\x7f\xff: \t\r\nabc") for _ in range(rng.randrange(1, 64)))
            data = b"GET / HTTP/1.1\r\nHost: x\r\nX-" + noise + b"\r\n\r\n"
        cases.append((data, rng.random() < 0.5))
    return cases


def test_fuzz_random_and_truncated_input_never_breaks_the_server() -> None:
    rng = random.Random(20261121)
    cases = _fuzz_cases(rng, 600)
    with nhbench.TestServer(header_timeout="1s", idle_timeout="1s", max_header_bytes=8192,
                            max_payload_kb=16, max_echo_delay="10ms") as server:
        deadline = time.monotonic() + 60

        def one(case: tuple[bytes, bool]) -> bytes:
            data, half_close = case
            if time.monotonic() > deadline:
                return b""
            try:
                with connect(server.address, timeout=5) as sock:
                    with contextlib.suppress(OSError):
                        sock.sendall(data)
                        if half_close:
                            sock.shutdown(socket.SHUT_WR)
                    reply, _ = read_until_close(sock, timeout=3)
                    return reply
            except OSError:
                return b""

        with ThreadPoolExecutor(16) as pool:
            replies = list(pool.map(one, cases))
        for reply in replies:
            assert reply == b"" or reply.startswith(b"HTTP/1.1 "), reply[:200]
        assert server.running
        stats = server.stats()
        assert stats["bad_requests"] > 0
        assert request(server, "/?size=5").body.__len__() == 5
        result = run(server.url, rps=100, duration=0.5)
        assert result.counters["benchmark.http_2xx"] == 50
        assert wait_until(lambda: server.stats()["connections_active"] == 0, timeout=10)


def _raise_fd_limit(needed: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= needed:
        return
    if hard != resource.RLIM_INFINITY and hard < needed:
        pytest.skip(f"RLIMIT_NOFILE hard limit {hard} < {needed}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


@pytest.mark.slow
def test_thousands_of_idle_connections() -> None:
    count = 2000
    _raise_fd_limit(2 * count + 256)
    with nhbench.TestServer(idle_timeout="60s", header_timeout="60s") as server:
        sockets: list[socket.socket] = []
        try:
            for _ in range(count):
                sockets.append(connect(server.address))
            assert wait_until(lambda: server.stats()["connections_active"] >= count, timeout=20), \
                server.stats()
            r = request(server, "/?size=10")
            assert r.status == 200 and len(r.body) == 10 and r.elapsed < MARGIN
            # a few of the idle ones still work too
            for sock in sockets[:: count // 10]:
                sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                assert read_response(sock).startswith(b"HTTP/1.1 200")
        finally:
            for sock in sockets:
                sock.close()
        assert wait_until(lambda: server.stats()["connections_active"] == 0, timeout=20)


def test_stop_with_open_connections_is_prompt() -> None:
    server = nhbench.TestServer(static_delay="5s").start()
    with connect(server.address) as _idle, connect(server.address) as busy:
        busy.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        time.sleep(0.1)
        start = time.monotonic()
        server.stop()
        assert time.monotonic() - start < 5
    server.stop()  # idempotent
    # The delayed request was received but never answered, so it is not counted (counters
    # count responses written); the idle connection sent nothing.
    assert server.stats()["requests"] == 0 and server.stats()["status"] == {}
    assert server.stats()["rx_bytes"] == len(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert server.stats()["connections_total"] == 2


def test_cli_debug_env_dump_warns_and_dumps() -> None:
    """`nhbench server --debug-env-dump` says once on stderr what it exposes; without it,
    nothing is said (and nothing dumped)."""
    for flags, warned in ((["--debug-env-dump", "--debug-path", "/dbg"], True), ([], False)):
        proc = start_cli("--listen", "127.0.0.1:0", *flags)
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline().strip()
            assert line.startswith("listening on http://127.0.0.1:"), line
            host, port = line.removeprefix("listening on http://").rstrip("/").rsplit(":", 1)
            path = "/dbg?env=dump" if warned else "/debug?env=dump"
            body = request((host, int(port)), path).body
            assert (b"PATH=" in body.partition(b"\n\nenvironment:\n\n")[2]) == warned
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        assert [line for line in err.splitlines() if "env=dump exposes" in line] == (
            ["nhbench: warning: /dbg?env=dump exposes this process's environment (secrets "
             "included) to anyone who can reach the server"] if warned else []), err
