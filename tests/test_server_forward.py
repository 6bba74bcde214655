"""The test server's ``forward_prefix`` (docs/server.md, "Forwarding a path"): an HTTP/1.x
request under the prefix hands its connection to a destination, which gets a PROXY v1 line
naming the client, the request head as parsed, then the client's bytes both ways. Real
sockets: the destination is a scripted origin in this test that records what it receives.
"""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.scripted_origin import ScriptedOrigin
from support.sockets import reserved_port

import nhbench
from nhbench import OptionsError, TestServer

pytestmark = pytest.mark.timeout(120)


class Destination:
    """A scripted origin (tests/support/scripted_origin.py) that records each connection's
    bytes until a request (head and its Content-Length body, or a chunked body's end) is in,
    then answers ``UI`` and closes; with ``answer=False`` it reads and never answers."""

    def __init__(self, answer: bool = True) -> None:
        self.answer = answer
        self.received: list[bytes] = []
        self.done = threading.Event()
        self._origin = ScriptedOrigin(handler=self._one)
        self.port = self._origin.port

    def _one(self, conn: socket.socket) -> None:
        data = b""
        conn.settimeout(20)
        while not complete(data):
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
        self.received.append(data)
        self.done.set()
        if self.answer:
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
                         b"Connection: close\r\n\r\nUI")
        else:
            while conn.recv(65536):
                pass

    def close(self) -> None:
        self._origin.close()


def complete(data: bytes) -> bool:
    _, _, request = data.partition(b"\r\n")  # after the PROXY line
    head, sep, body = request.partition(b"\r\n\r\n")
    if not sep:
        return False
    lower = head.lower()
    if b"transfer-encoding: chunked" in lower:
        return body.endswith(b"0\r\n\r\n")
    for line in lower.split(b"\r\n"):
        if line.startswith(b"content-length:"):
            return len(body) >= int(line.split(b":")[1])
    return True


@pytest.fixture
def destination() -> Iterator[Destination]:
    dest = Destination()
    yield dest
    dest.close()


def read_all(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def test_the_connection_goes_over_with_a_proxy_line_and_the_request(
        destination: Destination) -> None:
    with TestServer(forward_prefix=f"/fortio/=127.0.0.1:{destination.port}") as server:
        port = server.address[1]
        with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
            # An echo request first, answered by the server on the same connection ...
            sock.sendall(b"GET /?status=202 HTTP/1.1\r\nHost: h\r\n\r\n")
            assert sock.recv(1000).startswith(b"HTTP/1.1 202")
            # ... then one under the prefix, its head split over reads, with a body.
            sock.sendall(b"POST /fort")
            time.sleep(0.2)
            sock.sendall(b"io/rest/run?x=1 HTTP/1.1\r\nHost: h\r\nX-A:  spaced \r\n"
                         b"Content-Length: 5\r\n\r\nhel")
            time.sleep(0.2)
            sock.sendall(b"lo")
            assert read_all(sock) == (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
                                      b"Connection: close\r\n\r\nUI")
            client_port = sock.getsockname()[1]
        assert destination.received == [
            f"PROXY TCP4 127.0.0.1 127.0.0.1 {client_port} {port}\r\n".encode()
            + b"POST /fortio/rest/run?x=1 HTTP/1.1\r\nHost: h\r\nX-A: spaced \r\n"
            b"Content-Length: 5\r\n\r\nhello"]
        # A chunked body goes as it came; the prefix without its slash goes too; a longer
        # name does not.
        chunked = (b"POST /fortio/x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
                   b"3\r\nabc\r\n0\r\n\r\n")
        with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
            sock.sendall(chunked)
            assert read_all(sock).endswith(b"UI")
        assert destination.received[-1].split(b"\r\n", 1)[1] == chunked
        for path, forwarded in (("/fortio", True), ("/fortio?a=1", True), ("/fortiox", False),
                                ("/x/fortio/", False)):
            with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
                sock.sendall(f"GET {path} HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"
                             .encode())
                assert read_all(sock).endswith(b"UI") == forwarded, path
        stats = server.stats()
    # The forwarded requests are the destination's: the server counted only its own (the
    # 202 and the two paths it answered), and the -P proxy counters saw nothing.
    assert stats["requests"] == 3, stats
    assert stats["proxy_connections"] == stats["proxy_bytes_up"] == 0, stats


@pytest.mark.parametrize("subprocess", [False, True])
def test_http2_tls_and_unix_sockets_get_421(destination: Destination, tmp_path: Path,
                                            subprocess: bool) -> None:
    unix = str(tmp_path / "s.sock")
    with TestServer(listen=["127.0.0.1:0", f"unix:{unix}"], subprocess=subprocess,
                    forward_prefix=f"/ui/=127.0.0.1:{destination.port}") as server:
        counts = nhbench.run(server.url + "ui/x", protocol="h2", requests=3,
                             connections=1).counters
        assert counts["benchmark.http_421"] == counts["benchmark.http_4xx"] >= 1, counts
        assert counts["benchmark.http_2xx"] == 0, counts
        counts = nhbench.run(server.url + "x", protocol="h2", requests=2,
                             connections=1).counters
        assert counts["benchmark.http_2xx"] >= 1 and counts["benchmark.http_4xx"] == 0
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(unix)
            sock.sendall(b"GET /ui/ HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
            reply = read_all(sock)
        assert reply.startswith(b"HTTP/1.1 421") and b"HTTP/1.x connections only" in reply
    with TestServer(tls_self_signed=True, subprocess=subprocess,
                    forward_prefix=f"/ui/=127.0.0.1:{destination.port}") as server:
        context = ssl.create_default_context(cafile=server.ca_cert)
        context.set_alpn_protocols(["http/1.1"])
        with context.wrap_socket(socket.create_connection(server.address, timeout=20),
                                 server_hostname="localhost") as sock:
            sock.sendall(b"GET /ui/ HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
            reply = read_all(sock)
        assert reply.startswith(b"HTTP/1.1 421"), reply
    assert destination.received == []


def test_an_idle_forwarded_connection_is_closed() -> None:
    silent = Destination(answer=False)
    try:
        with TestServer(idle_timeout=0.5,
                        forward_prefix=f"/ui/=127.0.0.1:{silent.port}") as server, \
                socket.create_connection(server.address, timeout=20) as sock:
            sock.sendall(b"GET /ui/ HTTP/1.1\r\nHost: h\r\n\r\n")
            assert silent.done.wait(10)
            started = time.monotonic()
            assert read_all(sock) == b""
            assert time.monotonic() - started < 10
    finally:
        silent.close()


@pytest.mark.parametrize("subprocess", [False, True])
def test_an_unreachable_destination_answers_502(subprocess: bool) -> None:
    with reserved_port() as closed, TestServer(
            subprocess=subprocess, forward_prefix=f"/ui/=127.0.0.1:{closed}") as server:
        with socket.create_connection(server.address, timeout=20) as sock:
            sock.sendall(b"GET /ui/x HTTP/1.1\r\nHost: h\r\n\r\n")
            reply = read_all(sock)
        head, _, body = reply.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 502 Bad Gateway"), reply
        assert b"Content-Length: %d" % len(body) in head and b"not reachable" in body
        # The server's own paths are untouched by it.
        counts = nhbench.run(server.url + "x", requests=3, connections=1).counters
        assert counts["benchmark.http_2xx"] >= 1, counts


@pytest.mark.parametrize(("value", "needle"), [
    ("/=127.0.0.1:9", "not / alone"),
    ("fortio/=127.0.0.1:9", "begins and ends with /"),
    ("/fortio=127.0.0.1:9", "begins and ends with /"),
    ("/fortio/", "PREFIX=HOST:PORT"),
    ("/fortio/=127.0.0.1:0", "needs a port"),
    ("/a?b/=127.0.0.1:9", "begins and ends with /"),
])
def test_a_bad_forward_is_refused_by_name(value: str, needle: str) -> None:
    with pytest.raises(OptionsError, match="forward_prefix") as raised:
        TestServer(forward_prefix=value)
    assert needle in str(raised.value)
