"""A hostile client against the test server's TCP proxies and https redirectors (``nhbench
server`` as a subprocess, so its descriptors, memory and CPU are its own): more connections
than the cap, a destination that never reads (back-pressure, not memory), slow request heads
and garbage on the redirector.

After every attack the server must still answer: the proxy forwards a request to its origin
and the redirector redirects one.
"""

from __future__ import annotations

import os
import select
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from support.polling import wait_until
from support.sockets import read_until_close

import nhbench

pytestmark = [pytest.mark.hostile, pytest.mark.core]


def start_server(**kw: object) -> nhbench.TestServer:
    server = nhbench.TestServer(subprocess=True, admin="127.0.0.1:0", **kw)
    server.start()
    return server


@pytest.fixture(scope="module")
def origin() -> Iterator[nhbench.TestServer]:
    with nhbench.TestServer() as server:
        yield server


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def proxy_answers(server: nhbench.TestServer) -> bool:
    host, port = server.tcp_proxy_address
    result = nhbench.run(f"http://{host}:{port}/", requests=5, rps=1000, duration=None)
    return bool(result.counters["benchmark.http_2xx"] == 5)


def redirect_status(address: tuple[str, int], request: bytes) -> tuple[int, bool]:
    """The status the redirector answers `request` with (0: none), and whether it closed."""
    with socket.create_connection(address, timeout=5) as c:
        c.sendall(request)
        data, closed = read_until_close(c, timeout=5)
    return (int(data[9:12]) if data.startswith(b"HTTP/1.1 ") else 0), closed


def assert_redirects(server: nhbench.TestServer) -> None:
    status, _ = redirect_status(server.redirect_address,
                                b"GET /ok HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
    assert status == 303


# ---- the connection cap ---------------------------------------------------------------------


def test_proxy_connections_are_bounded_by_the_cap(origin: nhbench.TestServer) -> None:
    # Each proxied connection holds two descriptors and takes two slots: with a cap of 20,
    # ten at once, however many arrive.
    server = start_server(max_connections=20, tcp_proxy=[("127.0.0.1:0", origin.address)])
    clients: list[socket.socket] = []
    try:
        for _ in range(30):
            clients.append(socket.create_connection(server.tcp_proxy_address))
        assert wait_until(lambda: server.stats()["proxy_connections"]
                          + server.stats()["connections_refused"] == 30, timeout=10)
        st = server.stats()
        assert st["proxy_connections"] == 10 and st["proxy_connections_active"] == 10
        assert st["connections_refused"] == 20
        for c in clients:
            c.close()
        clients.clear()
        assert wait_until(lambda: server.stats()["proxy_connections_active"] == 0, timeout=10)
        assert proxy_answers(server)
    finally:
        for c in clients:
            c.close()
        server.stop()


def test_redirect_connections_are_bounded_by_the_cap() -> None:
    server = start_server(max_connections=5, redirect_listen="127.0.0.1:0")
    clients: list[socket.socket] = []
    try:
        for _ in range(12):
            clients.append(socket.create_connection(server.redirect_address))
        assert wait_until(lambda: server.stats()["connections_refused"] == 7, timeout=10)
        for c in clients:
            c.close()
        clients.clear()
        assert wait_until(lambda: _redirect_ok(server), timeout=10)
    finally:
        for c in clients:
            c.close()
        server.stop()


def _redirect_ok(server: nhbench.TestServer) -> bool:
    try:
        assert_redirects(server)
        return True
    except (AssertionError, OSError):
        return False


# ---- a destination that never reads ----------------------------------------------------------


def test_destination_that_never_reads_gets_back_pressure_not_memory() -> None:
    sink = socket.socket()
    sink.bind(("127.0.0.1", 0))
    sink.listen(8)
    held: list[socket.socket] = []
    threading.Thread(target=lambda: held.append(sink.accept()[0]), daemon=True).start()
    server = start_server(idle_timeout="1s", tcp_proxy=[("127.0.0.1:0", sink.getsockname())])
    try:
        before = rss_kib(server.pid)
        sent = 0
        chunk = b"z" * (1 << 20)
        with socket.create_connection(server.tcp_proxy_address) as c:
            c.setblocking(False)
            # Send until the socket has not been writable for a second: the proxy stopped
            # reading because its destination does not.
            while sent < 1 << 30:
                _, writable, _ = select.select([], [c], [], 1.0)
                if not writable:
                    break
                try:
                    sent += c.send(chunk)
                except BlockingIOError:
                    continue
                except (ConnectionResetError, BrokenPipeError):
                    # On a loaded machine the stalled pair can reach its --idle-timeout
                    # (1 s without progress) before this loop sees a writable-free second.
                    break
            forwarded = server.stats()["proxy_bytes_up"]
            grown = rss_kib(server.pid) - before
        # What is in flight fits in socket buffers and one read buffer, not in the heap:
        # tens of MiB at most (kernel autotuning), not the GiB the client would send.
        assert sent < 128 << 20, sent
        assert forwarded <= sent
        assert grown < 16 * 1024, f"RSS grew by {grown} KiB"
        assert wait_until(lambda: server.stats()["proxy_connections_active"] == 0, timeout=10)
    finally:
        server.stop()
        for s in held:
            s.close()
        sink.close()


# ---- the redirector: slow heads, garbage -------------------------------------------------------


def test_slowloris_on_the_redirector_is_closed_by_the_header_timeout() -> None:
    server = start_server(header_timeout="500ms", redirect_listen="127.0.0.1:0")
    socks: list[socket.socket] = []
    try:
        for _ in range(20):
            s = socket.create_connection(server.redirect_address)
            s.sendall(b"GET / HTTP/1.1\r\nHost: h\r\n")
            socks.append(s)
        started = time.monotonic()
        open_ = set(range(len(socks)))
        while open_ and time.monotonic() - started < 10:
            for i in list(open_):
                try:
                    socks[i].sendall(b"X")  # a byte of a header name, every 100 ms
                    socks[i].settimeout(0.005)
                    if socks[i].recv(1) == b"":
                        open_.discard(i)
                except (TimeoutError, BlockingIOError):
                    pass
                except OSError:
                    open_.discard(i)
            time.sleep(0.1)
        assert not open_, f"{len(open_)} slow heads still open after 10 s"
        # Ended by the header time-out, well before the 10 s.
        assert time.monotonic() - started < 6
        assert server.stats()["redirects"] == 0
        assert_redirects(server)
    finally:
        for s in socks:
            s.close()
        server.stop()


GARBAGE = [
    os.urandom(4096),
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + os.urandom(200),  # a TLS ClientHello
    b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + os.urandom(64),  # HTTP/2 prior knowledge
    b"GET / HTTP/1.1\r\nHost: h\r\nX: " + b"a" * 200_000 + b"\r\n\r\n",  # over the head cap
    b"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
    b"GET /\x00 HTTP/1.1\r\nHost: h\r\n\r\n",
    b"\r\n" * 10_000,
]


@pytest.mark.parametrize("garbage", GARBAGE, ids=["random", "tls", "h2", "huge-head",
                                                  "smuggling", "nul", "blank-lines"])
def test_garbage_to_the_redirector_is_refused_and_closed(garbage: bytes) -> None:
    server = start_server(header_timeout="2s", redirect_listen="127.0.0.1:0")
    try:
        status, closed = redirect_status(server.redirect_address, garbage)
        assert closed
        assert status in (0, 400, 431), status
        assert server.stats()["requests"] == 0
        assert_redirects(server)
        # Every answer counted as a redirector response, the 4xx included.
        assert server.stats()["redirects"] == (2 if status else 1)
    finally:
        server.stop()
