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


# ---- a malicious HTTP/2 proxy (--proxy-protocol http2, csrc/client/carrier.c) --------------
#
# The proxy speaks h2c with prior knowledge (raw frames from support.h2frames, so that it can
# send what no library would) and answers the CONNECT stream with one misbehaviour.

H2Script = Callable[[socket.socket, int], None]


def _h2_proxy(script: H2Script) -> Handler:
    from support import h2frames as f

    def handler(conn: socket.socket, stop: threading.Event) -> None:
        def on_frame(kind: int, flags: int, stream: int, payload: bytes) -> bool | None:
            if kind == f.HEADERS:
                try:
                    script(conn, stream)
                except OSError:
                    return False
                stop.wait(5)
                return False
            return None
        try:
            f.serve(conn, on_frame)
        except OSError:
            pass
    return handler


def _status(code: bytes) -> bytes:
    from support import h2frames as f
    return f.hpack_literal_name_index(8, code)  # :status, not indexed


def h2_oversized_headers(conn: socket.socket, stream: int) -> None:
    from support import h2frames as f
    # 120 KiB of fields in CONTINUATION frames under the default 16 KiB frame size.
    block = _status(b"200") + b"".join(
        f.hpack_literal(b"x-big-%d" % i, b"a" * 12000) for i in range(10))
    pieces = [block[i:i + 16000] for i in range(0, len(block), 16000)]
    conn.sendall(f.frame(f.HEADERS, 0, stream, pieces[0]))
    for i, piece in enumerate(pieces[1:], 1):
        conn.sendall(f.frame(f.CONTINUATION, f.END_HEADERS if i == len(pieces) - 1 else 0,
                             stream, piece))


def h2_data_before_headers(conn: socket.socket, stream: int) -> None:
    from support import h2frames as f
    conn.sendall(f.frame(f.DATA, 0, stream, b"\x16\x03\x01 not the answer"))


def h2_window_overflow(conn: socket.socket, stream: int) -> None:
    from support import h2frames as f
    conn.sendall(f.window_update(0, 0x7FFFFFFF) + f.window_update(0, 0x7FFFFFFF))


def h2_goaway_mid_run(conn: socket.socket, stream: int) -> None:
    from support import h2frames as f
    conn.sendall(f.response_headers(stream, end_stream=False))
    time.sleep(0.2)
    conn.sendall(f.goaway(0, f.PROTOCOL_ERROR, b"bye"))


def h2_rst_connect(conn: socket.socket, stream: int) -> None:
    from support import h2frames as f
    conn.sendall(f.rst_stream(stream, f.REFUSED_STREAM))


def h2_rst_after_up(conn: socket.socket, stream: int) -> None:
    from support import h2frames as f
    conn.sendall(f.response_headers(stream, end_stream=False))
    time.sleep(0.2)
    conn.sendall(f.rst_stream(stream, f.CANCEL))


def h2_refuses(conn: socket.socket, stream: int) -> None:
    from support import h2frames as f
    conn.sendall(f.frame(f.HEADERS, f.END_HEADERS | f.END_STREAM, stream, _status(b"407")))


def h2_no_status(conn: socket.socket, stream: int) -> None:
    from support import h2frames as f
    conn.sendall(f.frame(f.HEADERS, f.END_HEADERS, stream, f.hpack_literal(b"x-a", b"b")))


def h2_interim_flood(conn: socket.socket, stream: int) -> None:
    from support import h2frames as f
    conn.sendall(f.frame(f.HEADERS, f.END_HEADERS, stream, _status(b"100")) * 150)


def h2_answer_ends_stream(conn: socket.socket, stream: int) -> None:
    from support import h2frames as f
    conn.sendall(f.response_headers(stream, end_stream=True))


#: attack, the counter that must count it, and whether the tunnel came up first.
H2_CASES: dict[str, tuple[H2Script, str, bool]] = {
    "oversized_headers": (h2_oversized_headers, "tunnel.protocol_error", False),
    "data_before_headers": (h2_data_before_headers, "tunnel.protocol_error", False),
    "window_overflow": (h2_window_overflow, "tunnel.protocol_error", False),
    "goaway_mid_run": (h2_goaway_mid_run, "tunnel.reset", True),
    "rst_on_connect": (h2_rst_connect, "tunnel.reset", False),
    "rst_after_up": (h2_rst_after_up, "tunnel.reset", True),
    "refuses": (h2_refuses, "tunnel.non_2xx", False),
    "no_status": (h2_no_status, "tunnel.protocol_error", False),
    "interim_flood": (h2_interim_flood, "tunnel.protocol_error", False),
    "answer_ends_stream": (h2_answer_ends_stream, "tunnel.proxy_closed", False),
}


@pytest.fixture
def h2_proxy(request: pytest.FixtureRequest) -> Iterator[ScriptedOrigin]:
    handler = _h2_proxy(H2_CASES[request.node.callspec.params["h2_name"]][0])
    holder: list[ScriptedOrigin] = []
    origin = ScriptedOrigin(handler=lambda conn: handler(conn, holder[0].stopped))
    holder.append(origin)
    with origin:
        yield origin


@pytest.mark.parametrize("h2_name", sorted(H2_CASES))
def test_malicious_http2_proxy_ends_in_a_counted_failure(h2_name: str,
                                                         h2_proxy: ScriptedOrigin) -> None:
    _, counter, established = H2_CASES[h2_name]
    started = time.monotonic()
    result = nhbench.run(
        "https://127.0.0.1:9/", proxy=f"http://127.0.0.1:{h2_proxy.port}",
        proxy_protocol="http2", insecure=True, rps=20, duration=1, connections=2, timeout=1,
        drain_timeout=1, no_default_failure_predicates=True, allow_no_success=True)
    elapsed = time.monotonic() - started
    c = result.counters
    assert c.get("benchmark.http_2xx", 0) == 0
    assert c.get(counter, 0) >= 1, {k: v for k, v in c.items() if v}
    assert result.error, "a failed tunnel says why"
    if established:
        assert c["tunnel.established"] >= 1
    else:
        assert c.get("tunnel.established", 0) == 0
        assert c["benchmark.pool_connection_failure"] >= 1
    assert elapsed < 15
