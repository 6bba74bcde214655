"""tcp:// and udp:// echo load (docs/protocols.md, "tcp:// and udp:// echo").

Against real peers only: our test server's --tcp-echo/--udp-echo (whose counters must agree
with the client's), scripted peers on real sockets that misbehave on purpose (wrong bytes,
half an echo then a close, silence, two answers, unsolicited bytes; for UDP loss, late and
duplicate datagrams) and Fortio's own tcp-echo and udp-echo servers. Counts and bytes only;
no timing thresholds.
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.peers import fortio_binary
from support.polling import settle, wait_until
from test_cli_errors import assert_one_line_error, nhbench_cli

import nhbench
from nhbench._core_config import client_core_config
from nhbench.options import make_options

CPUS = sorted(os.sched_getaffinity(0))
CLIENT_CPU = str(CPUS[0])
SERVER_CPUS = [CPUS[1] if len(CPUS) > 1 else CPUS[0]]


@pytest.fixture(scope="module")
def echo_server() -> Iterator[nhbench.TestServer]:
    with nhbench.TestServer(cpus=SERVER_CPUS, tcp_echo=["127.0.0.1:0"],
                            udp_echo=["127.0.0.1:0"]) as server:
        yield server


def tcp_uri(server: nhbench.TestServer) -> str:
    host, port = server.tcp_echo_addresses[0]
    return f"tcp://{host}:{port}"


def udp_uri(server: nhbench.TestServer) -> str:
    host, port = server.udp_echo_addresses[0]
    return f"udp://{host}:{port}"


def run(uri: str, **kw: object) -> nhbench.Result:
    kw.setdefault("cpus", CLIENT_CPU)
    kw.setdefault("duration", 0.5)
    kw.setdefault("connections", 2)
    return nhbench.run(uri, **kw)


def finished(result: nhbench.Result) -> int:
    """Requests that ended as a response or an error: each exactly once."""
    c = result.counters
    return c["benchmark.http_2xx"] + sum(
        c[name] for name in ("benchmark.echo_mismatch", "benchmark.stream_resets",
                             "benchmark.request_timeout", "benchmark.pool_connection_failure"))


# ---- against our test server ------------------------------------------------------------


@pytest.mark.core
def test_tcp_echo_counts_agree_with_the_server(echo_server: nhbench.TestServer) -> None:
    before = echo_server.stats()["tcp_echo_bytes"]
    result = run(tcp_uri(echo_server), rps=200, payload_size=100)
    c = result.counters
    ok = c["benchmark.http_2xx"]
    assert ok == c["upstream_rq_total"] == c["sequencer.released"] > 0
    assert c["benchmark.http_200"] == ok
    assert c["benchmark.echo_mismatch"] == 0
    assert c["upstream_cx_tx_bytes_total"] == c["upstream_cx_rx_bytes_total"] == ok * 100
    stats = settle(echo_server, lambda s: s["tcp_echo_bytes"] - before >= ok * 100)
    assert stats["tcp_echo_bytes"] - before == ok * 100
    # Connections are kept across requests, and an echo is no HTTP/1 connection.
    assert c["upstream_cx_total"] <= 2
    assert c["upstream_cx_http1_total"] == 0
    # The same statistics as HTTP: the CO-correct headline, and the echo as the "body".
    assert result.latency.id == "benchmark_http_client.scheduled_to_response"
    assert result.latency.count == ok
    assert result.stat("benchmark_http_client.request_to_response").count == ok
    body = result.stat("benchmark_http_client.response_body_size")
    assert body.min == body.max == 100
    assert result.success


@pytest.mark.core
@pytest.mark.parametrize("size", [1, 1000, 65536, 1 << 20])
def test_tcp_echo_payload_sizes(echo_server: nhbench.TestServer, size: int) -> None:
    before = echo_server.stats()["tcp_echo_bytes"]
    result = run(tcp_uri(echo_server), rps=100, requests=10, payload_size=size, duration=None)
    c = result.counters
    assert c["benchmark.http_2xx"] == 10
    assert c["benchmark.echo_mismatch"] == 0
    assert c["upstream_cx_rx_bytes_total"] == 10 * size
    stats = settle(echo_server, lambda s: s["tcp_echo_bytes"] - before >= 10 * size)
    assert stats["tcp_echo_bytes"] - before == 10 * size


@pytest.mark.core
def test_tcp_echo_payload_text_file_and_default(echo_server: nhbench.TestServer,
                                                tmp_path: Path) -> None:
    text = run(tcp_uri(echo_server), rps=100, requests=5, payload="hello echo", duration=None)
    assert text.counters["benchmark.http_2xx"] == 5
    assert text.counters["upstream_cx_tx_bytes_total"] == 5 * len(b"hello echo")
    payload = tmp_path / "payload.bin"
    payload.write_bytes(bytes(range(256)) * 3)
    file = run(tcp_uri(echo_server), rps=100, requests=5, payload_file=str(payload),
               duration=None)
    assert file.counters["benchmark.http_2xx"] == 5
    assert file.counters["upstream_cx_tx_bytes_total"] == 5 * 768
    # No payload option: 24 random bytes, as Fortio's default payload is 24 bytes long.
    plain = run(tcp_uri(echo_server), rps=100, requests=5, duration=None)
    assert plain.counters["upstream_cx_tx_bytes_total"] == 5 * 24
    assert plain.options.request_method == "GET"  # no payload-means-POST for echo


@pytest.mark.core
def test_udp_echo_counts_agree_with_the_server(echo_server: nhbench.TestServer) -> None:
    before = echo_server.stats()["udp_echo_packets"]
    result = run(udp_uri(echo_server), rps=200, payload_size=100)
    c = result.counters
    ok = c["benchmark.http_2xx"]
    assert ok == c["upstream_rq_total"] == c["sequencer.released"] > 0
    for name in ("benchmark.echo_mismatch", "benchmark.udp_lost", "benchmark.udp_late",
                 "benchmark.udp_unexpected", "benchmark.request_timeout"):
        assert c[name] == 0, name
    # Each datagram is the 8-byte sequence number and the payload.
    assert c["upstream_cx_tx_bytes_total"] == c["upstream_cx_rx_bytes_total"] == ok * 108
    stats = settle(echo_server, lambda s: s["udp_echo_packets"] - before >= ok)
    assert stats["udp_echo_packets"] - before == ok
    assert c["upstream_cx_total"] <= 2
    body = result.stat("benchmark_http_client.response_body_size")
    assert body.min == body.max == 100
    assert result.latency.count == ok
    # Without --request-timeout, a udp:// request waits 1 s for its echo.
    assert result.options.request_timeout == 1.0


@pytest.mark.core
@pytest.mark.parametrize("size", [1, 1400, 65499])
def test_udp_echo_payload_sizes(echo_server: nhbench.TestServer, size: int) -> None:
    result = run(udp_uri(echo_server), rps=100, requests=10, payload_size=size, duration=None,
                 connections=1)
    c = result.counters
    assert c["benchmark.http_2xx"] == 10
    assert c["upstream_cx_tx_bytes_total"] == c["upstream_cx_rx_bytes_total"] == 10 * (size + 8)
    assert c["benchmark.udp_lost"] == 0


@pytest.mark.core
@pytest.mark.parametrize("scheme", ["tcp", "udp"])
def test_closed_loop_echo(echo_server: nhbench.TestServer, scheme: str) -> None:
    uri = tcp_uri(echo_server) if scheme == "tcp" else udp_uri(echo_server)
    key = "tcp_echo_bytes" if scheme == "tcp" else "udp_echo_packets"
    before = echo_server.stats()[key]
    result = run(uri, rps=0, duration=0.3, connections=2)
    c = result.counters
    ok = c["benchmark.http_2xx"]
    assert ok > 10
    assert ok == c["upstream_rq_total"]
    per_request = 24 if scheme == "tcp" else 1
    stats = settle(echo_server, lambda s: s[key] - before >= ok * per_request)
    assert stats[key] - before == ok * per_request


def test_rate_is_kept(echo_server: nhbench.TestServer) -> None:
    # The same schedule as HTTP: 300 rps for 1 s is 300 releases (a wide bound).
    result = run(tcp_uri(echo_server), rps=300, duration=1.0, connections=4)
    assert abs(result.counters["benchmark.http_2xx"] - 300) <= 6
    assert abs(result.achieved_rps - 300) <= 15


def test_human_output_says_what_the_counters_mean(echo_server: nhbench.TestServer) -> None:
    for uri, words in ((tcp_uri(echo_server), "ECHO (tcp://): 20 ok"),
                       (udp_uri(echo_server), "ECHO (udp://): 20 ok")):
        proc = nhbench_cli("run", uri, "--rps", "100", "--requests", "20", "--cpus", CLIENT_CPU)
        assert proc.returncode == 0, proc.stderr
        assert words in proc.stdout
        assert f": echo {uri}" in proc.stdout.splitlines()[0]
    assert "0 lost" in proc.stdout and "0 unexpected datagrams" in proc.stdout


# ---- scripted TCP peers --------------------------------------------------------------------


class TcpPeer:
    """A TCP server on a real socket; `handle(conn)` runs for each accepted connection in a
    thread of its own, and the connection is closed when it returns."""

    def __init__(self, handle: Callable[[socket.socket], None]) -> None:
        self.handle = handle
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.uri = f"tcp://127.0.0.1:{self.sock.getsockname()[1]}"
        self.accepted = 0
        self.stopped = threading.Event()
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            self.conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            self.handle(conn)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self.stopped.set()
        self.sock.close()
        for conn in self.conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def __enter__(self) -> TcpPeer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _recv_exactly(conn: socket.socket, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


PAYLOAD = "0123456789abcdef" * 4  # 64 bytes


@pytest.mark.core
def test_tcp_peer_echoing_wrong_bytes_fails_each_request_as_a_mismatch() -> None:
    def wrong(conn: socket.socket) -> None:
        while (data := conn.recv(65536)):
            conn.sendall(bytes(b ^ 0x20 for b in data))

    with TcpPeer(wrong) as peer:
        result = run(peer.uri, rps=50, requests=5, payload=PAYLOAD, duration=None,
                     no_default_failure_predicates=True)
        c = result.counters
        assert c["benchmark.echo_mismatch"] == 5
        assert c["benchmark.http_2xx"] == 0
        # The connection is closed at a mismatch: each request had its own.
        assert c["upstream_cx_total"] == peer.accepted == 5
        assert "differ from those sent (byte 0 of 64)" in (result.error or "")
        # An echo run fails on a mismatch by default, as an HTTP run on a 5xx: the failure
        # predicate benchmark.echo_mismatch:0 ends it at the first.
        failed = run(peer.uri, rps=50, requests=5, payload=PAYLOAD, duration=None)
    assert not failed.success
    assert failed.counters["benchmark.echo_mismatch"] >= 1
    assert "benchmark.echo_mismatch" in failed.terminated_by


@pytest.mark.core
def test_tcp_peer_sending_half_then_closing_resets_each_request() -> None:
    def half(conn: socket.socket) -> None:
        data = _recv_exactly(conn, len(PAYLOAD))
        if data is not None:
            conn.sendall(data[: len(data) // 2])

    with TcpPeer(half) as peer:
        result = run(peer.uri, rps=50, requests=4, payload=PAYLOAD, duration=None,
                     no_default_failure_predicates=True)
    c = result.counters
    assert c["benchmark.stream_resets"] == 4
    assert c["benchmark.http_2xx"] == 0
    assert finished(result) == c["upstream_rq_total"] == 4
    assert "after 32 of the 64 bytes" in (result.error or "")


@pytest.mark.core
def test_tcp_peer_that_never_answers_times_each_request_out() -> None:
    def silent(conn: socket.socket) -> None:
        while conn.recv(65536):
            pass

    with TcpPeer(silent) as peer:
        result = run(peer.uri, rps=50, requests=3, payload=PAYLOAD, duration=None,
                     request_timeout=0.2, connections=3)
    c = result.counters
    assert c["benchmark.request_timeout"] == 3
    assert c["benchmark.http_2xx"] == 0
    assert finished(result) == 3


@pytest.mark.core
def test_tcp_peer_answering_twice_is_a_protocol_error() -> None:
    def twice(conn: socket.socket) -> None:
        while (data := _recv_exactly(conn, len(PAYLOAD))) is not None:
            conn.sendall(data + data)

    with TcpPeer(twice) as peer:
        result = run(peer.uri, rps=20, requests=4, payload=PAYLOAD, duration=None,
                     connections=1)
    c = result.counters
    # The echo itself came back and counts; what followed closes the connection.
    assert c["benchmark.http_2xx"] == 4
    assert c["upstream_cx_protocol_error"] == 4
    assert c["upstream_cx_total"] == 4


@pytest.mark.core
def test_tcp_peer_sending_unsolicited_bytes_is_a_protocol_error() -> None:
    # The first connection is opened before the first release (prefetch, start delay) and
    # gets bytes nobody asked for at once; the later ones echo properly.
    def chatty(conn: socket.socket) -> None:
        if peer.accepted == 1:
            conn.sendall(b"unsolicited")
        while (data := conn.recv(65536)):
            conn.sendall(data)

    with TcpPeer(chatty) as peer:
        result = run(peer.uri, rps=50, requests=3, payload=PAYLOAD, duration=None,
                     connections=1, prefetch_connections=True, start_delay=0.5)
    c = result.counters
    assert c["benchmark.http_2xx"] == 3
    assert c["upstream_cx_protocol_error"] == 1
    assert c["upstream_cx_total"] == peer.accepted == 2
    assert "sent 11 bytes with no request in flight" in (result.error or "")


# ---- scripted UDP peer -----------------------------------------------------------------------


class LossyUdpPeer:
    """A UDP echo peer that, counting datagrams k = 1, 2, ...: drops every 5th; holds the 7th
    and 14th and sends each back just before it handles the next datagram (so after its
    request has timed out); sends a 2-byte and an empty datagram after the 2nd, the 3rd
    twice, and the 4th back with its last byte changed."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.uri = f"udp://127.0.0.1:{self.sock.getsockname()[1]}"
        self.received = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        held: tuple[bytes, tuple[str, int]] | None = None
        while True:
            try:
                data, peer = self.sock.recvfrom(65536)
            except OSError:
                return
            self.received += 1
            k = self.received
            if held is not None:
                self.sock.sendto(*held)
                held = None
            if k % 5 == 0:
                continue
            if k % 7 == 0:
                held = (data, peer)
                continue
            if k == 4:
                data = data[:-1] + bytes([data[-1] ^ 1])
            self.sock.sendto(data, peer)
            if k == 2:
                self.sock.sendto(b"xy", peer)
                self.sock.sendto(b"", peer)
            if k == 3:
                self.sock.sendto(data, peer)

    def close(self) -> None:
        self.sock.close()


@pytest.mark.core
def test_udp_loss_late_duplicates_and_mismatch_are_counted_exactly() -> None:
    peer = LossyUdpPeer()
    try:
        result = run(peer.uri, rps=50, requests=20, duration=None, connections=1,
                     request_timeout=0.1, no_default_failure_predicates=True)
    finally:
        peer.close()
    c = result.counters
    assert peer.received == 20
    # Dropped: 5, 10, 15, 20; held until too late: 7, 14; changed: 4.
    assert c["benchmark.udp_lost"] == c["benchmark.request_timeout"] == 6
    assert c["benchmark.udp_late"] == 2
    assert c["benchmark.echo_mismatch"] == 1
    # The 2-byte and the empty datagram, and the repeated 3rd.
    assert c["benchmark.udp_unexpected"] == 3
    assert c["benchmark.http_2xx"] == 13
    assert finished(result) == c["upstream_rq_total"] == 20
    # A late echo never completed another request: the socket was kept throughout.
    assert c["upstream_cx_total"] == 1


@pytest.mark.core
def test_udp_to_a_closed_port_fails_without_spinning() -> None:
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    started = time.monotonic()
    result = run(f"udp://127.0.0.1:{port}", rps=100, duration=0.5,
                 no_default_failure_predicates=True)
    # The run ends on its duration plus the drain, not later (a generous bound).
    assert time.monotonic() - started < 0.5 + 5 + 10
    c = result.counters
    assert c["benchmark.http_2xx"] == 0
    assert c["benchmark.stream_resets"] >= 1  # ICMP port unreachable: ECONNREFUSED
    # Back-off keeps the sockets from being reopened in a tight loop.
    assert c["upstream_cx_total"] < 100


# ---- Fortio's echo servers as independent peers --------------------------------------------


def _free_port(kind: int) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def fortio_echo() -> Iterator[tuple[str, str]]:
    binary = fortio_binary()
    if binary is None:
        pytest.skip("fortio is not installed (go install fortio.org/fortio@v1.66.5)")
    tcp_port, udp_port = _free_port(socket.SOCK_STREAM), _free_port(socket.SOCK_DGRAM)
    procs = [
        subprocess.Popen([binary, "tcp-echo", "-tcp-port", f"127.0.0.1:{tcp_port}"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
        subprocess.Popen([binary, "udp-echo", "-udp-port", f"127.0.0.1:{udp_port}"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
    ]
    try:
        def tcp_up() -> bool:
            try:
                socket.create_connection(("127.0.0.1", tcp_port), timeout=1).close()
                return True
            except OSError:
                return False

        assert wait_until(tcp_up, timeout=20), "fortio tcp-echo did not start"
        yield f"tcp://127.0.0.1:{tcp_port}", f"udp://127.0.0.1:{udp_port}"
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=10)


@pytest.mark.parametrize("size", [24, 4096])
def test_against_fortio_tcp_echo(fortio_echo: tuple[str, str], size: int) -> None:
    result = run(fortio_echo[0], rps=200, requests=50, payload_size=size, duration=None)
    c = result.counters
    assert c["benchmark.http_2xx"] == 50
    assert c["benchmark.echo_mismatch"] == 0
    assert c["upstream_cx_rx_bytes_total"] == 50 * size


def test_against_fortio_udp_echo(fortio_echo: tuple[str, str]) -> None:
    # The UDP server may start after its TCP sibling: a few warm-up datagrams until it answers.
    uri = fortio_echo[1]
    assert wait_until(lambda: run(uri, rps=50, requests=1, duration=None, request_timeout=0.2,
                                  no_default_failure_predicates=True)
                      .counters["benchmark.http_2xx"] == 1, timeout=20)
    result = run(uri, rps=200, requests=50, payload_size=1000, duration=None)
    c = result.counters
    assert c["benchmark.http_2xx"] == 50
    assert c["benchmark.echo_mismatch"] == c["benchmark.udp_lost"] == 0
    assert c["upstream_cx_rx_bytes_total"] == 50 * 1008


# ---- options: defaults, and what an echo run refuses -------------------------------------------


def test_core_config_of_echo_runs() -> None:
    tcp = client_core_config(make_options("tcp://127.0.0.1:9/", payload="hi"), "127.0.0.1")
    assert tcp["protocol"] == "tcp" and tcp["echo_payload"] == b"hi"
    assert tcp["request_timeout"] == 30.0  # HTTP's default: a TCP echo is no datagram
    udp = client_core_config(make_options("udp://127.0.0.1:9"), "127.0.0.1")
    assert udp["protocol"] == "udp" and len(udp["echo_payload"]) == 24
    assert udp["request_timeout"] == 1.0
    given = make_options("udp://127.0.0.1:9", request_timeout="250ms")
    assert client_core_config(given, "127.0.0.1")["request_timeout"] == 0.25
    # Random bytes, drawn once per run: two runs differ.
    again = client_core_config(make_options("udp://127.0.0.1:9"), "127.0.0.1")
    assert again["echo_payload"] != udp["echo_payload"]
    # An HTTP run has no echo keys at all.
    assert "echo_payload" not in client_core_config(make_options("http://127.0.0.1:9/"),
                                                    "127.0.0.1")
    # An echo mismatch fails an echo run by default (and only an echo run).
    assert make_options("tcp://127.0.0.1:9").failure_predicates["benchmark.echo_mismatch"] == 0
    assert "benchmark.echo_mismatch" not in make_options("http://127.0.0.1:9/").failure_predicates


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("tcp://127.0.0.1:9", "-H", "a: b"),
         "--request-header: not for tcp:// echo targets"),
        (("tcp://127.0.0.1:9", "--request-method", "PUT"),
         "--request-method: not for tcp:// echo targets"),
        (("udp://127.0.0.1:9", "--h2"), "--protocol: not for udp:// echo targets"),
        (("tcp://127.0.0.1:9", "--insecure"), "--insecure: not for tcp:// echo targets"),
        (("tcp://127.0.0.1:9", "--template"), "--template: not for tcp:// echo targets"),
        (("udp://127.0.0.1:9", "--content-type", "text/plain"),
         "--content-type: not for udp:// echo targets"),
        (("tcp://127.0.0.1:9", "--request-body-size", "10"),
         "--request-body-size: not for tcp:// echo targets"),
        (("udp://127.0.0.1:9", "--request-timeout", "0"),
         "--request-timeout: a udp:// run needs a time-out above 0"),
        (("udp://127.0.0.1:9", "--payload-size", "65500"),
         "--payload-size: a udp:// payload is at most 65499 bytes"),
        (("tcp://127.0.0.1", "--rps", "1"), "tcp:// needs a port"),
        (("udp://127.0.0.1:9/path",), "udp:// takes no path or query"),
    ],
)
def test_bad_echo_input_is_one_line(args: tuple[str, ...], expected: str) -> None:
    assert_one_line_error(nhbench_cli("run", *args), expected)


def test_python_api_refuses_http_options_on_echo() -> None:
    with pytest.raises(nhbench.OptionsError, match="request_header: not for tcp:// echo"):
        nhbench.run("tcp://127.0.0.1:9", request_header=["a: b"])
