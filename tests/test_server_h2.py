"""The test server over HTTP/2: h2c with prior knowledge and by Upgrade on the HTTP/1.1 port,
h2 over TLS, against nhbench's client, curl and h2load; every server option the same over
HTTP/1.1 and HTTP/2; flow control with large bodies both ways; RST_STREAM, GOAWAY and
garbage from the client.

Nothing is mocked. Counts are exact (an accounting identity where the end of a run could
race); delays are asserted only as order (a delayed stream does not hold back another) or
as a lower bound.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import shutil
import socket
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import h2frames as h2
from support.h2frames import (
    ACK,
    DATA,
    END_HEADERS,
    END_STREAM,
    GOAWAY,
    HEADERS,
    PING,
    PREFACE,
    RST_STREAM,
    SETTINGS,
    WINDOW_UPDATE,
    frame,
)
from support.peers import peer_env
from support.polling import settle

import nhbench

pytestmark = pytest.mark.core

CPUS = sorted(os.sched_getaffinity(0))
CLIENT_CPU = str(CPUS[0])
SERVER_CPUS = [CPUS[-1]] if len(CPUS) > 1 else None
CURL = shutil.which("curl")
H2LOAD = shutil.which("h2load")
NH_HEADER = "x-nighthawk-test-server-config"

needs_curl = pytest.mark.skipif(CURL is None, reason="curl is not installed")
needs_h2load = pytest.mark.skipif(H2LOAD is None, reason="h2load (nghttp2-client) is not installed")


# --------------------------------------------------------------------------------------------
# nhbench's client against the server: h1/h2 x plain/TLS, exact counts
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
@pytest.mark.parametrize("protocol", ["http1", "http2"])
def test_client_and_server_counts_agree(protocol: str, tls: bool) -> None:
    kw = {"tls_self_signed": True} if tls else {}
    with nhbench.TestServer(response_body_size=100, cpus=SERVER_CPUS, **kw) as server:
        tls_kw = {"cacert": server.ca_cert} if tls else {}
        result = nhbench.run(server.url, protocol=protocol, rps=400, duration=1.0,
                             connections=4, cpus=CLIENT_CPU, **tls_kw)
        c = result.counters
        assert result.success, result.error
        # A slow (sanitizer) build may release fewer than 400; every release must be answered.
        assert c["benchmark.http_2xx"] == c["upstream_rq_total"] == c["sequencer.released"] > 100

        def agreed(s: dict) -> bool:
            return (s["rx_bytes"] == c["upstream_cx_tx_bytes_total"]
                    and s["tx_bytes"] == c["upstream_cx_rx_bytes_total"])

        s = settle(server, agreed)
    assert s["requests"] == s["status"]["200"] == c["upstream_rq_total"]
    assert s["connections_total"] == c["upstream_cx_total"]
    assert s["rx_bytes"] == c["upstream_cx_tx_bytes_total"]
    assert s["tx_bytes"] == c["upstream_cx_rx_bytes_total"]
    assert s["connections_http2"] == c["upstream_cx_http2_total"]
    assert s["connections_http1"] == c["upstream_cx_http1_total"]
    assert s["tls_handshakes"] == c["ssl.handshake"] == (c["upstream_cx_total"] if tls else 0)
    assert s["tls_session_reused"] == c["ssl.session_reused"]
    assert s["tls_handshake_errors"] == s["h2_streams_reset"] == s["h2_protocol_errors"] == 0
    assert s["bad_requests"] == 0


def test_closed_loop_over_h2_counts_agree() -> None:
    with nhbench.TestServer(cpus=SERVER_CPUS) as server:
        result = nhbench.run(server.url, protocol="http2", rps=0, duration=0.5, cpus=CLIENT_CPU)
        c = result.counters
        s = settle(server, lambda s: s["rx_bytes"] == c["upstream_cx_tx_bytes_total"])
    assert result.success, result.error
    assert c["upstream_rq_cancelled"] == 0
    assert s["requests"] == c["upstream_rq_total"] == c["benchmark.http_2xx"] > 0
    assert s["connections_http2"] == s["connections_total"] == c["upstream_cx_total"] == 1


def test_server_stream_limit_caps_the_client() -> None:
    # The server's SETTINGS_MAX_CONCURRENT_STREAMS: the client spreads its 10 active
    # requests over connections of at most 2 streams (or re-sends refused ones).
    with nhbench.TestServer(max_concurrent_streams=2, static_delay="2ms") as server:
        result = nhbench.run(server.url, protocol="http2", rps=0, duration=0.5,
                             max_active_requests=10, connections=8, cpus=CLIENT_CPU)
        c = result.counters
        s = settle(server, lambda s: s["rx_bytes"] == c["upstream_cx_tx_bytes_total"])
    assert result.success, result.error
    assert s["requests"] == c["upstream_rq_total"] - c["upstream_rq_retry"] == c["benchmark.http_2xx"]
    assert c["upstream_cx_total"] >= 5


# --------------------------------------------------------------------------------------------
# curl and h2load
# --------------------------------------------------------------------------------------------


def curl(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[bytes]:
    assert CURL is not None
    return subprocess.run([CURL, "-sS", "--max-time", str(timeout), *args], capture_output=True,
                          timeout=timeout + 10, check=False, env=peer_env())


def fetch(url: str, mode: str, *args: str, ca: str | None = None
          ) -> tuple[int, dict[str, list[str]], bytes, str]:
    """(status, headers lower-cased -> values, body, HTTP version) through curl, where mode
    is h1, h2c (prior knowledge), upgrade (curl --http2 on http://) or h2 (TLS + ALPN)."""
    flags = {"h1": ["--http1.1"], "h2c": ["--http2-prior-knowledge"], "upgrade": ["--http2"],
             "h2": ["--http2"]}[mode]
    if ca:
        flags += ["--cacert", ca]
    # Headers to stdout, the body to a file: binary bodies stay intact.
    body_file = Path(os.environ.get("TMPDIR", "/tmp")) / f"nhb-h2-body-{os.getpid()}"
    proc = curl(*flags, "-D", "-", "-o", str(body_file), "-w", "\n%{http_version}", *args, url)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    body = body_file.read_bytes()
    body_file.unlink()
    text = proc.stdout.decode("latin-1")
    blocks, _, version = text.rpartition("\n")
    # The last header block is the final response (after 101 / 100).
    final = [b for b in blocks.replace("\r\n", "\n").split("\n\n") if b.strip()][-1]
    lines = final.split("\n")
    status = int(lines[0].split()[1])
    headers: dict[str, list[str]] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers.setdefault(name.strip().lower(), []).append(value.strip())
    return status, headers, body, version.strip()


@needs_curl
@pytest.mark.parametrize("mode", ["h1", "h2c", "upgrade"])
def test_curl_on_the_plain_port(mode: str) -> None:
    with nhbench.TestServer(response_body_size=5) as server:
        status, headers, body, version = fetch(server.url, mode)
        stats = server.stats()
    assert status == 200 and body == b"aaaaa" and headers["server"] == ["nhbench"]
    assert version == ("1.1" if mode == "h1" else "2")
    assert stats["requests"] == 1
    assert stats["connections_http2" if mode != "h1" else "connections_http1"] == 1
    assert stats["connections_http1" if mode != "h1" else "connections_http2"] == 0


@needs_curl
def test_curl_over_tls_with_the_ca_out_file(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    with nhbench.TestServer(tls_self_signed=True, tls_ca_out=ca) as server:
        assert server.url.startswith("https://") and server.ca_cert == str(ca)
        assert ca.read_text().startswith("-----BEGIN CERTIFICATE-----")
        for mode, version in (("h2", "2"), ("h1", "1.1")):
            status, _, _, got = fetch(server.url + "?status=202", mode, ca=str(ca))
            assert (status, got) == (202, version)
        by_name = server.url.replace("127.0.0.1", "localhost")
        assert fetch(by_name, "h2", ca=str(ca))[0] == 200
        # Not trusted without the CA: curl refuses (60: peer certificate cannot be
        # authenticated), and the server counts a failed handshake.
        refused = curl("--http2", server.url)
        assert refused.returncode == 60, refused.stderr
        stats = settle(server, lambda s: s["tls_handshake_errors"] == 1)
    assert stats["tls_handshakes"] == 3 and stats["tls_handshake_errors"] == 1
    assert stats["connections_http2"] == 2 and stats["connections_http1"] == 1
    assert not ca.exists()  # removed with the server, like the address file


@pytest.mark.peer
@needs_h2load
@pytest.mark.parametrize("tls", [False, True], ids=["h2c", "tls"])
def test_h2load_counts_agree(tls: bool) -> None:
    n, c, m = 2000, 4, 10
    kw = {"tls_self_signed": True} if tls else {}
    with nhbench.TestServer(response_body_size=64, cpus=SERVER_CPUS, **kw) as server:
        assert H2LOAD is not None
        proc = subprocess.run([H2LOAD, "-n", str(n), "-c", str(c), "-m", str(m), server.url],
                              capture_output=True, text=True, timeout=120, env=peer_env(),
                              check=False)
        stats = server.stats()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"requests: {n} total, {n} started, {n} done, {n} succeeded, 0 failed" in proc.stdout
    assert f"status codes: {n} 2xx" in proc.stdout
    assert stats["requests"] == stats["status"]["200"] == n
    assert stats["connections_http2"] == stats["connections_total"] == c


# --------------------------------------------------------------------------------------------
# every option the same over HTTP/1.1 and HTTP/2
# --------------------------------------------------------------------------------------------

PARITY = [
    # (path, request headers, check(status, headers, body))
    ("/?status=418", {}, lambda st, h, b: st == 418),
    ("/?status=204", {}, lambda st, h, b: st == 204 and b == b"" and "content-length" not in h),
    ("/?header=X-A:1&header=X-B:two", {},
     lambda st, h, b: h["x-a"] == ["1"] and h["x-b"] == ["two"]),
    ("/?size=1234", {}, lambda st, h, b: len(b) == 1234 and h["content-length"] == ["1234"]),
    ("/?size=3000&gzip=true", {"Accept-Encoding": "gzip"},
     lambda st, h, b: h["content-encoding"] == ["gzip"] and len(gzip.decompress(b)) == 3000),
    ("/?size=3000&gzip=true", {}, lambda st, h, b: "content-encoding" not in h and len(b) == 3000),
    ("/?status=503:100", {}, lambda st, h, b: st == 503),
    ("/?status=999", {}, lambda st, h, b: st == 400 and b"status" in b),
    ("/x", {NH_HEADER: json.dumps({"response_body_size": 7, "response_headers": [
        {"header": {"key": "x-dyn", "value": "d"}}]})},
     lambda st, h, b: b == b"aaaaaaa" and h["x-dyn"] == ["d"] and h["x-static"] == ["s"]),
    ("/x", {NH_HEADER: '{"response_body_size": }'},
     lambda st, h, b: st == 500 and b.startswith(b"test-server didn't understand the request: ")),
    ("/p", {NH_HEADER: '{"echo_request_headers": true}', "X-Foo": "bar"},
     lambda st, h, b: b"\nRequest Headers:\n':method', 'GET'\n':path', '/p'\n" in b
     and b"'x-foo', 'bar'" in b),
    ("/y", {NH_HEADER: '{"emit_previous_request_delta_in_response_header": "x-delta"}'},
     lambda st, h, b: st == 200),
    ("/debug?q=1", {"X-Trace": "7"},
     lambda st, h, b: b"GET /debug?q=1 HTTP/" in b and b"x-trace: 7" in b.lower()),
]


@needs_curl
@pytest.mark.parametrize("mode", ["h1", "h2c", "upgrade", "h2"])
def test_every_option_behaves_the_same_over_h1_and_h2(mode: str) -> None:
    kw = {"tls_self_signed": True} if mode == "h2" else {}
    with nhbench.TestServer(response_headers=["X-Static: s"], **kw) as server:
        ca = server.ca_cert if mode == "h2" else None
        for path, headers, check in PARITY:
            args = [a for name, value in headers.items() for a in ("-H", f"{name}: {value}")]
            status, got, body, version = fetch(server.url.rstrip("/") + path, mode, *args, ca=ca)
            assert version == ("1.1" if mode == "h1" else "2")
            assert check(status, got, body), (path, status, got, body[:200])
            assert got["server"] == ["nhbench"]
        # The echo of a request body, and a POST with a delay (at least the delay).
        start = time.monotonic()
        status, got, body, _ = fetch(server.url + "?delay=150ms", mode, "--data-binary", "hello",
                                     ca=ca)
        assert time.monotonic() - start >= 0.15
        assert (status, body) == (200, b"hello")
        # HEAD: the length of the body, no body (curl -I writes only the head to its output).
        status, got, body, _ = fetch(server.url + "?size=99", mode, "-I", ca=ca)
        assert (status, got["content-length"]) == (200, ["99"]) and body.endswith(b"\r\n\r\n")
        stats = server.stats()
    assert stats["requests"] == len(PARITY) + 2
    assert stats["connections_http2" if mode != "h1" else "connections_http1"] == len(PARITY) + 2


def test_static_options_and_per_request_config_with_nhbench_over_h2() -> None:
    config = json.dumps({"response_body_size": 333, "response_headers": [
        {"header": {"key": "x-a", "value": "1"}}]})
    with nhbench.TestServer(response_body_size=10, static_delay="1ms",
                            echo_default_params="status=201") as server:
        for protocol in ("http1", "http2"):
            result = nhbench.run(server.url, protocol=protocol, rps=200, duration=0.5,
                                 cpus=CLIENT_CPU, request_header=[f"{NH_HEADER}: {config}"],
                                 no_default_failure_predicates=True)
            body = result.stat("benchmark_http_client.response_body_size")
            assert result.counters["benchmark.http_2xx"] == 100, protocol
            assert body.min == body.max == 333
        stats = server.stats()
    assert stats["status"] == {"201": 200}


@needs_curl
def test_head_and_body_limits_over_h2(tmp_path: Path) -> None:
    upload = tmp_path / "up.bin"
    upload.write_bytes(b"u" * 100_000)
    with nhbench.TestServer(max_header_bytes=1024, max_body_bytes=1000) as server:
        # Refused on their stream, each with its status; the connection is not closed.
        assert fetch(server.url, "h2c", "-H", "X-Big: " + "x" * 2000)[0] == 431
        assert fetch(server.url, "h2c", "--data-binary", f"@{upload}")[0] == 413
        assert fetch(server.url, "h2c", "--data-binary", "small")[2] == b"small"
        stats = server.stats()
    # Every response written counts in requests, the refusals too (and in bad_requests).
    assert stats["bad_requests"] == 2 and stats["requests"] == 3
    assert stats["status"] == {"431": 1, "413": 1, "200": 1}


# --------------------------------------------------------------------------------------------
# large bodies, both ways (flow control)
# --------------------------------------------------------------------------------------------

FOUR_MIB = 4 * 1024 * 1024


@pytest.mark.parametrize("tls", [False, True], ids=["h2c", "tls"])
def test_large_bodies_both_ways_over_h2(tls: bool) -> None:
    kw = {"tls_self_signed": True} if tls else {}
    big = json.dumps({"response_body_size": FOUR_MIB})
    with nhbench.TestServer(max_payload_kb=FOUR_MIB // 1024, **kw) as server:
        tls_kw = {"cacert": server.ca_cert} if tls else {}
        down = nhbench.run(server.url, protocol="http2", rps=10, duration=1.0, cpus=CLIENT_CPU,
                           request_header=[f"{NH_HEADER}: {big}"], **tls_kw)
        up = nhbench.run(server.url, protocol="http2", rps=10, duration=1.0, cpus=CLIENT_CPU,
                         request_method="PUT", request_body_size=FOUR_MIB, **tls_kw)
        stats = server.stats()
    for result in (down, up):
        assert result.success, result.error
        assert result.counters["benchmark.http_2xx"] == 10
        body = result.stat("benchmark_http_client.response_body_size")
        assert body.min == body.max == FOUR_MIB  # the upload is echoed back whole
    assert stats["requests"] == 20
    assert stats["rx_bytes"] > 10 * FOUR_MIB and stats["tx_bytes"] > 20 * FOUR_MIB


@needs_curl
@pytest.mark.parametrize("mode", ["h2c", "h2"])
def test_large_echo_is_byte_exact_with_curl(mode: str, tmp_path: Path) -> None:
    data = random.Random(7).randbytes(FOUR_MIB)
    upload = tmp_path / "up.bin"
    upload.write_bytes(data)
    kw = {"tls_self_signed": True} if mode == "h2" else {}
    with nhbench.TestServer(max_payload_kb=FOUR_MIB // 1024, **kw) as server:
        status, _, body, _ = fetch(server.url, mode, "--data-binary", f"@{upload}",
                                   ca=server.ca_cert if mode == "h2" else None)
    assert status == 200 and body == data


# --------------------------------------------------------------------------------------------
# raw frames: streams that do not block each other, resets, GOAWAY, garbage
# --------------------------------------------------------------------------------------------

def hpack_literal(headers: list[tuple[str, str]]) -> bytes:
    """HPACK literal header fields without indexing, new names, no Huffman: enough to
    send a request (and never needing a decoder)."""
    return b"".join(h2.hpack_literal(n.encode(), v.encode()) for n, v in headers)


def request_frame(stream: int, path: str, extra: list[tuple[str, str]] | None = None,
                  end_stream: bool = True) -> bytes:
    block = hpack_literal([(":method", "GET"), (":scheme", "http"), (":authority", "t"),
                           (":path", path), *(extra or [])])
    return frame(HEADERS, END_HEADERS | (END_STREAM if end_stream else 0), stream, block)


class RawH2:
    """A socket speaking just enough HTTP/2 to send requests, resets and garbage, and to
    read frame headers back."""

    def __init__(self, server: nhbench.TestServer) -> None:
        self.sock = socket.create_connection(server.address, timeout=10)
        self.buf = b""
        # A large connection window, so that one big response cannot starve the others.
        self.sock.sendall(PREFACE + frame(SETTINGS, 0, 0)
                          + frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 1 << 30)))

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def frames(self, until: object, timeout: float = 10.0) -> list[tuple[int, int, int, bytes]]:
        """(type, flags, stream, payload) as they come, until `until(frame)` is true."""
        out = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            while len(self.buf) >= 9:
                length = int.from_bytes(self.buf[:3], "big")
                if len(self.buf) < 9 + length:
                    break
                kind, flags = self.buf[3], self.buf[4]
                stream = int.from_bytes(self.buf[5:9], "big") & 0x7FFFFFFF
                item = (kind, flags, stream, self.buf[9:9 + length])
                self.buf = self.buf[9 + length:]
                out.append(item)
                if kind == SETTINGS and not flags & ACK:
                    self.send(frame(SETTINGS, ACK, 0))
                if until(item):  # type: ignore[operator]
                    return out
            chunk = self.sock.recv(65536)
            if not chunk:
                return out
            self.buf += chunk
        raise AssertionError(f"no such frame within {timeout} s; got {out}")

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def raw_server() -> Iterator[nhbench.TestServer]:
    with nhbench.TestServer(response_body_size=10, max_echo_delay="5s") as server:
        yield server


def ends(stream: int) -> object:
    return lambda f: f[2] == stream and f[0] in (DATA, HEADERS) and f[1] & END_STREAM


def test_a_delayed_stream_does_not_hold_back_the_others(raw_server: nhbench.TestServer) -> None:
    conn = RawH2(raw_server)
    conn.send(request_frame(1, "/?delay=2s") + request_frame(3, "/?status=202")
              + request_frame(5, "/", [(NH_HEADER, '{"static_delay": "1s"}')])
              + request_frame(7, "/"))
    first = conn.frames(lambda f: f[0] in (DATA, HEADERS) and f[1] & END_STREAM)
    done = [f[2] for f in first if f[0] in (DATA, HEADERS) and f[1] & END_STREAM]
    assert done[0] in (3, 7)
    rest = conn.frames(ends(1))
    order = done + [f[2] for f in rest if f[0] in (DATA, HEADERS) and f[1] & END_STREAM]
    # The undelayed ones first, then the 1 s delay, then the 2 s one.
    assert sorted(order[:2]) == [3, 7] and order[2:] == [5, 1]
    conn.close()
    assert raw_server.stats()["requests"] == 4


def test_rst_stream_mid_response_and_while_waiting(raw_server: nhbench.TestServer) -> None:
    conn = RawH2(raw_server)
    big = json.dumps({"response_body_size": 4 * 1024 * 1024})
    # Stream 1: a 4 MiB response; read a little, then cancel it (CANCEL = 8).
    conn.send(request_frame(1, "/", [(NH_HEADER, big)]))
    conn.frames(lambda f: f[0] == DATA and f[2] == 1)
    conn.send(frame(RST_STREAM, 0, 1, struct.pack(">I", 8)))
    # Stream 3 waits for a delay; reset it before the response.
    conn.send(request_frame(3, "/?delay=300ms"))
    conn.send(frame(RST_STREAM, 0, 3, struct.pack(">I", 8)))
    # The connection goes on: stream 5 is answered.
    conn.send(request_frame(5, "/?status=201"))
    conn.frames(ends(5))
    conn.close()
    stats = settle(raw_server, lambda s: s["connections_active"] == 0)
    assert stats["h2_streams_reset"] == 2
    # Only stream 5 was answered: the reset ones never had their response out.
    assert stats["requests"] == 1 and stats["h2_protocol_errors"] == 0
    assert stats["status"] == {"201": 1}
    # The worker's count of waiting responses is back to zero: a concurrency-based delay
    # (which counts them) sees none.
    with nhbench.TestServer(concurrency_based_linear_delay="0s,1s") as server:
        conn = RawH2(server)
        conn.send(request_frame(1, "/"))
        conn.send(frame(RST_STREAM, 0, 1, struct.pack(">I", 8)))
        conn.send(request_frame(3, "/?status=203"))
        start = time.monotonic()
        conn.frames(ends(3))
        assert time.monotonic() - start >= 1.0  # only stream 3 itself counts: 0 + 1 x 1 s
        conn.close()


def test_client_goaway_lets_streams_finish(raw_server: nhbench.TestServer) -> None:
    conn = RawH2(raw_server)
    conn.send(request_frame(1, "/?delay=100ms"))
    # The client's GOAWAY names the last stream the server opened (none: 0).
    conn.send(frame(GOAWAY, 0, 0, struct.pack(">II", 0, 0)))
    got = conn.frames(ends(1))
    assert any(f[0] == HEADERS and f[2] == 1 for f in got)
    conn.close()
    assert settle(raw_server, lambda s: s["connections_active"] == 0)["requests"] == 1


def test_fortio_close_sends_goaway_after_the_response(raw_server: nhbench.TestServer) -> None:
    conn = RawH2(raw_server)
    conn.send(request_frame(1, "/?close=true") + request_frame(3, "/"))
    got = conn.frames(lambda f: f[0] == GOAWAY)
    goaway = [f for f in got if f[0] == GOAWAY][0]
    last, code = struct.unpack(">II", goaway[3][:8])
    assert (last, code) == (3, 0)  # both streams begun are answered; NO_ERROR
    if not any(f[2] == 3 and f[0] in (DATA, HEADERS) and f[1] & END_STREAM for f in got):
        conn.frames(ends(3))
    # A stream above the GOAWAY's last stream is ignored, never processed (the client knows
    # from the GOAWAY to send it elsewhere); the PING after it shows it was read.
    conn.send(request_frame(5, "/") + frame(PING, 0, 0, b"87654321"))
    conn.frames(lambda f: f[0] == PING and f[1] & ACK)
    conn.close()
    stats = settle(raw_server, lambda s: s["connections_active"] == 0)
    assert stats["requests"] == 2 and stats["h2_streams_reset"] == 0


def test_one_request_at_a_time_with_close_over_h2() -> None:
    # Every response says GOAWAY: the client opens a new connection for the next request.
    with nhbench.TestServer() as server:
        result = nhbench.run(server.url + "?close=true", protocol="http2", rps=50, duration=1.0,
                             max_active_requests=1, cpus=CLIENT_CPU)
        c = result.counters
        stats = settle(server, lambda s: s["connections_active"] == 0)
    assert result.success, result.error
    assert c["benchmark.http_2xx"] == stats["requests"] == 50
    assert stats["connections_http2"] == c["upstream_cx_total"] >= 50
    # The GOAWAY follows the response: the run may end before the last one is read.
    assert c["upstream_cx_close_notify"] >= 49


def test_goaway_with_requests_in_flight_retries_the_unprocessed_ones() -> None:
    # Every response carries a GOAWAY while up to 8 requests share the connection: those the
    # server never started are refused (RFC 9113 section 6.8) and go out again on a new
    # connection. None may end as a reset; a write to the closed connection once did.
    with nhbench.TestServer() as server:
        result = nhbench.run(server.url + "?close=true", protocol="http2", rps=0, duration=0.3,
                             connections=1, max_active_requests=8, cpus=CLIENT_CPU,
                             no_default_failure_predicates=True)
        c = result.counters
        stats = settle(server, lambda s: s["connections_active"] == 0)
    assert result.error is None, result.error
    assert c.get("benchmark.stream_resets", 0) == 0
    assert c["benchmark.http_2xx"] == stats["requests"] > 0
    assert c["upstream_rq_retry"] > 0
    # Every attempt ends as a response or a retry: nothing is lost or counted twice.
    assert c["upstream_rq_total"] == c["benchmark.http_2xx"] + c["upstream_rq_retry"]


@pytest.mark.parametrize("seed", range(4))
def test_garbage_after_the_preface_never_breaks_the_server(raw_server: nhbench.TestServer,
                                                           seed: int) -> None:
    rng = random.Random(seed)
    valid = request_frame(1, "/?size=100") + frame(PING, 0, 0, b"12345678") \
        + frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 1000))
    for _ in range(25):
        data = bytearray(valid)
        kind = rng.randrange(4)
        if kind == 0:
            data = bytearray(rng.randbytes(rng.randrange(1, 300)))
        elif kind == 1:
            data = data[:rng.randrange(1, len(data))]
        else:
            for _ in range(rng.randrange(1, 6)):
                data[rng.randrange(len(data))] = rng.randrange(256)
        with socket.create_connection(raw_server.address, timeout=5) as sock:
            sock.sendall(PREFACE + frame(SETTINGS, 0, 0) + bytes(data))
            sock.shutdown(socket.SHUT_WR)
            try:
                while sock.recv(65536):
                    pass
            except OSError:
                pass
    # Still serving, and it says what it saw.
    conn = RawH2(raw_server)
    conn.send(request_frame(1, "/"))
    conn.frames(ends(1))
    conn.close()
    stats = raw_server.stats()
    assert stats["h2_protocol_errors"] > 0
    assert stats["connections_http2"] == stats["connections_total"] == 26


def test_bad_preface_and_garbage_on_the_h1_port() -> None:
    with nhbench.TestServer() as server:
        for data in (b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n", b"PRI * HTTP/1.1\r\n\r\n", b"P", b"PR"):
            with socket.create_connection(server.address, timeout=5) as sock:
                sock.sendall(data)
                sock.shutdown(socket.SHUT_WR)
                while sock.recv(65536):
                    pass
        with socket.create_connection(server.address, timeout=5) as sock:
            # A preface split into single bytes is still HTTP/2.
            for byte in PREFACE:
                sock.sendall(bytes([byte]))
            sock.sendall(frame(SETTINGS, 0, 0) + request_frame(1, "/"))
            buf = b""
            while b"\x00\x00\x00\x01" not in buf:  # a frame on stream 1
                chunk = sock.recv(65536)
                assert chunk
                buf += chunk
        stats = settle(server, lambda s: s["connections_active"] == 0)
    assert stats["connections_http2"] == 1  # only the byte-wise preface is one
    # The byte-wise one's 200, and the 400 that "PRI * HTTP/1.1" got over HTTP/1.1.
    assert stats["status"] == {"200": 1, "400": 1} and stats["requests"] == 2


def test_alpn_http1_only_refuses_h2c() -> None:
    # Without h2 in --alpn the preface is not HTTP/2 here: answered as a bad HTTP/1.1
    # request, and nhbench's h2c client fails clearly.
    with nhbench.TestServer(alpn="http/1.1") as server:
        result = nhbench.run(server.url, protocol="http2", rps=10, duration=0.5, cpus=CLIENT_CPU)
        stats = server.stats()
    assert not result.success
    assert stats["connections_http2"] == 0 and stats["bad_requests"] >= 1


def test_h2_only_answers_http1_with_505() -> None:
    with nhbench.TestServer(alpn="h2") as server:
        result = nhbench.run(server.url, rps=10, duration=0.5, cpus=CLIENT_CPU,
                             no_default_failure_predicates=True)
        h2 = nhbench.run(server.url, protocol="http2", rps=10, duration=0.5, cpus=CLIENT_CPU)
        stats = server.stats()
    assert result.counters["benchmark.http_5xx"] >= 1 and stats["status"]["505"] >= 1
    assert h2.success and h2.counters["benchmark.http_2xx"] == 5


def test_idle_h2_connection_gets_goaway() -> None:
    with nhbench.TestServer(idle_timeout="200ms") as server:
        conn = RawH2(server)
        conn.send(request_frame(1, "/"))
        got = conn.frames(lambda f: f[0] == GOAWAY)
        assert any(f[0] == HEADERS and f[2] == 1 for f in got)
        assert struct.unpack(">II", [f for f in got if f[0] == GOAWAY][0][3][:8]) == (1, 0)
        conn.close()
