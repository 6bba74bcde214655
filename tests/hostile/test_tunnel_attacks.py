"""A malicious HTTP proxy against the client's CONNECT tunnels (csrc/client/tunnel.c): the
proxy is a scripted TCP server (support.scripted_origin, a real socket) that answers every
CONNECT with one misbehaviour. Each must end in a counted failure, by its cause, within the
run's bounds: no hang, no crash, no 2xx.

(tests/hostile/test_proxy_attacks.py is the test server's own TCP proxy under attack; this
file is the client's side of a proxy.)
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from support.scripted_origin import ScriptedOrigin

import nhbench

pytestmark = [pytest.mark.hostile, pytest.mark.core]

Handler = Callable[[socket.socket, threading.Event], None]


def _read_head(conn: socket.socket) -> bytes:
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = conn.recv(4096)
        if not chunk:
            break
        buf += chunk
    return buf


def _send_forever(conn: socket.socket, stop: threading.Event, first: bytes, each: bytes) -> None:
    try:
        conn.sendall(first)
        while not stop.is_set():
            conn.sendall(each * 64)
    except OSError:
        pass  # the client gave up on us: what the test wants


def oversized_header(conn: socket.socket, stop: threading.Event) -> None:
    _read_head(conn)
    try:
        conn.sendall(b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 200_000 + b"\r\n\r\n")
    except OSError:
        pass


def endless_headers(conn: socket.socket, stop: threading.Event) -> None:
    _read_head(conn)
    _send_forever(conn, stop, b"HTTP/1.1 200 OK\r\n", b"X-More: yes\r\n")


def interim_flood(conn: socket.socket, stop: threading.Event) -> None:
    _read_head(conn)
    _send_forever(conn, stop, b"", b"HTTP/1.1 100 Continue\r\n\r\n")


def ok_then_garbage(conn: socket.socket, stop: threading.Event) -> None:
    _read_head(conn)
    try:
        conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n" + b"\x00garbage\xff" * 100)
        stop.wait(5)
    except OSError:
        pass


def close_mid_answer(conn: socket.socket, stop: threading.Event) -> None:
    _read_head(conn)
    conn.sendall(b"HTTP/1.1 200 Conn")


def never_answers(conn: socket.socket, stop: threading.Event) -> None:
    _read_head(conn)
    stop.wait(30)


def malformed(conn: socket.socket, stop: threading.Event) -> None:
    _read_head(conn)
    conn.sendall(b"SMTP READY\r\n\r\n")


def status_below_100(conn: socket.socket, stop: threading.Event) -> None:
    # llhttp takes any three digits; found by fuzz_client_tunnel.
    _read_head(conn)
    conn.sendall(b"HTTP/1.1 000 OK\r\n\r\n")
    stop.wait(5)


def refuses(conn: socket.socket, stop: threading.Event) -> None:
    _read_head(conn)
    conn.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 5\r\n\r\nnope!")
    stop.wait(5)


#: attack, the counter that must count it, and (for https) whether the tunnel came up.
CASES: dict[str, tuple[Handler, str]] = {
    "oversized_header": (oversized_header, "tunnel.protocol_error"),
    "endless_headers": (endless_headers, "tunnel.protocol_error"),
    "interim_flood": (interim_flood, "tunnel.protocol_error"),
    "ok_then_garbage": (ok_then_garbage, "ssl.connection_error"),
    "close_mid_answer": (close_mid_answer, "tunnel.proxy_closed"),
    "never_answers": (never_answers, "tunnel.timeout"),
    "malformed": (malformed, "tunnel.protocol_error"),
    "refuses": (refuses, "tunnel.non_2xx"),
    "status_below_100": (status_below_100, "tunnel.protocol_error"),
}


@pytest.fixture
def proxy(request: pytest.FixtureRequest) -> Iterator[ScriptedOrigin]:
    handler = CASES[request.node.callspec.params["name"]][0]
    holder: list[ScriptedOrigin] = []
    origin = ScriptedOrigin(handler=lambda conn: handler(conn, holder[0].stopped))
    holder.append(origin)
    with origin:
        yield origin


@pytest.mark.parametrize("name", sorted(CASES))
def test_malicious_proxy_ends_in_a_counted_failure(name: str, proxy: ScriptedOrigin) -> None:
    counter = CASES[name][1]
    started = time.monotonic()
    # The origin is never reached (the proxy answers for it): any https:// authority will do.
    result = nhbench.run(
        "https://127.0.0.1:9/", proxy=f"http://127.0.0.1:{proxy.port}", insecure=True,
        rps=20, duration=1, connections=2, timeout=1, drain_timeout=1,
        no_default_failure_predicates=True, allow_no_success=True)
    elapsed = time.monotonic() - started
    c = result.counters
    assert c.get("benchmark.http_2xx", 0) == 0
    assert c.get(counter, 0) >= 1, {k: v for k, v in c.items() if v}
    # Every request ended as a failure of its connection, none was left hanging.
    assert c["benchmark.pool_connection_failure"] >= 1
    assert result.error, "a failed tunnel says why"
    if counter.startswith("tunnel."):
        assert c.get("tunnel.established", 0) == 0
    else:
        # The tunnel was up; what came through it is the TLS handshake's to refuse.
        assert c["tunnel.established"] >= 1
    # Bounded: the run's second, the 1 s connect time-out and drain, and start-up.
    assert elapsed < 15
