"""HTTP/2 flow-control windows and the client's writes, against hand-written h2c origins.

The client announces 1 GiB windows (stream: SETTINGS_INITIAL_WINDOW_SIZE; connection: one
WINDOW_UPDATE at the start), as h2load does by default, and leaves the acknowledgement of
consumed DATA to nghttp2, which sends a WINDOW_UPDATE only when half a window has been
consumed: a load test sends next to no WINDOW_UPDATE frames, however large its responses.
These tests pin that down by counting the frames the client sends, and check that the
writes, which wait for one non-blocking poll after a read (session_h2.c), still carry
request bodies through a server that opens its windows a few bytes at a time.

Counts only: frames seen by the origin, bytes counted by the client.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable

import pytest
from support import h2frames as h2
from support.accounting import assert_accounting
from support.scripted_origin import ScriptedOrigin

import nhbench

pytestmark = pytest.mark.core

BIG = 8 * 1024 * 1024 + 123  # several MB, not a multiple of the frame size
FRAME = 16384  # the default SETTINGS_MAX_FRAME_SIZE


class Seen:
    """Frames the origin received from the client, by type, and the WINDOW_UPDATEs."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.window_updates: list[tuple[int, int]] = []  # (stream, increment)
        self.data_bytes: dict[int, int] = {}  # request body bytes per stream
        self.strict_frames: dict[int, int] = {}  # DATA frames per stream opened under the window
        self.overruns = 0  # DATA frames larger than the stream window in force


def big_body_origin(seen: Seen) -> Callable[[socket.socket], None]:
    """Answers every request with a 200 and a BIG-byte body in full-size DATA frames."""
    def handle(conn: socket.socket) -> None:
        def on_frame(kind: int, _flags: int, stream: int, payload: bytes) -> None:
            if kind == h2.WINDOW_UPDATE:
                with seen.lock:
                    seen.window_updates.append((stream, struct.unpack(">I", payload)[0] & 0x7FFFFFFF))
            elif kind == h2.HEADERS:
                head = h2.frame(h2.HEADERS, h2.END_HEADERS, stream,
                                h2.STATUS_200 + h2.hpack_literal(b"content-length", str(BIG).encode()))
                chunks = [head]
                for off in range(0, BIG, FRAME):
                    n = min(FRAME, BIG - off)
                    last = off + n == BIG
                    chunks.append(h2.frame(h2.DATA, h2.END_STREAM if last else 0, stream, b"x" * n))
                conn.sendall(b"".join(chunks))

        h2.serve(conn, on_frame)
    return handle


def test_a_large_body_completes_with_next_to_no_window_updates() -> None:
    """Several MB per response over one connection: every byte counted, and the only
    WINDOW_UPDATE the client sends is the connection's opening one (1 GiB windows; nghttp2
    would send another only after 512 MiB consumed). The origin ignores the client's windows
    being 1 GiB only in that it never needs to wait: 8 MiB per stream fits them."""
    seen = Seen()
    with ScriptedOrigin(handler=big_body_origin(seen)) as origin:
        result = nhbench.run(origin.url, protocol="http2", rps=8, duration=0.5, connections=1,
                             no_default_failure_predicates=True)
    c = result.counters
    assert result.success, result.error
    assert c["benchmark.http_2xx"] >= 2
    body = result.stat("benchmark_http_client.response_body_size")
    assert body.count == c["benchmark.http_2xx"]
    assert body.min == body.max == BIG
    assert_accounting(c)
    # One connection-level WINDOW_UPDATE raising 65,535 to 2^30 - 1, no stream-level one:
    # 16+ MiB received would have cost 256+ WINDOW_UPDATEs with the default 64 KiB windows.
    assert seen.window_updates == [(0, (1 << 30) - 1 - 65535)]


def tiny_window_origin(seen: Seen, window: int) -> Callable[[socket.socket], None]:
    """Announces a `window`-byte stream window and a connection window that it leaves at
    the default 65,535; it reopens both by what each DATA frame carried (so the client can
    never have more than `window` bytes of a stream in flight) and answers a request once
    its body has ended. The window binds streams opened after the client acknowledged the
    SETTINGS: the first requests go out with the preface, under the default window."""
    def handle(conn: socket.socket) -> None:
        acked = False
        strict: set[int] = set()

        def on_frame(kind: int, flags: int, stream: int, payload: bytes) -> None:
            nonlocal acked
            if kind == h2.SETTINGS and flags & h2.ACK:
                acked = True
            elif kind == h2.HEADERS and acked:
                strict.add(stream)
            elif kind == h2.DATA:
                with seen.lock:
                    if stream in strict and len(payload) > window:
                        seen.overruns += 1
                    seen.data_bytes[stream] = seen.data_bytes.get(stream, 0) + len(payload)
                    if stream in strict:
                        seen.strict_frames[stream] = seen.strict_frames.get(stream, 0) + 1
                out = b""
                if payload:
                    out += h2.window_update(0, len(payload))
                    if not flags & h2.END_STREAM:
                        out += h2.window_update(stream, len(payload))
                if flags & h2.END_STREAM:
                    out += h2.response_headers(stream)
                if out:
                    conn.sendall(out)

        h2.serve(conn, on_frame, own_settings=h2.settings(initial_window_size=window))
    return handle


@pytest.mark.parametrize("streams", [1, 8])
def test_a_tiny_server_window_still_carries_request_bodies(streams: int) -> None:
    """A 16-byte stream window: each 1,000-byte request body goes out in 63 DATA frames,
    each sent only after the server's WINDOW_UPDATE for the one before arrived. Every
    request completes with its whole body, with one stream or several in flight."""
    window, size = 16, 1000
    seen = Seen()
    with ScriptedOrigin(handler=tiny_window_origin(seen, window)) as origin:
        result = nhbench.run(origin.url, protocol="http2", rps=0, duration=0.5, connections=1,
                             max_concurrent_streams=streams, max_active_requests=streams,
                             request_method="POST", request_body_size=size,
                             no_default_failure_predicates=True)
    c = result.counters
    assert result.success, result.error
    done = c["benchmark.http_2xx"]
    assert done >= streams
    assert_accounting(c)
    with seen.lock:
        complete = [n for n in seen.data_bytes.values() if n == size]
        assert all(n <= size for n in seen.data_bytes.values())
        # Requests answered are those whose whole body arrived (at most `streams` more
        # were cut off by the end of the run).
        assert len(complete) == done
        assert seen.overruns == 0
        # Streams opened under the tiny window: each body took exactly ceil(size / window)
        # frames, i.e. every frame filled the window the server had reopened.
        strict_done = [k for k, n in seen.strict_frames.items() if seen.data_bytes[k] == size]
        assert len(strict_done) >= done - 2 * streams > 0
        assert {seen.strict_frames[k] for k in strict_done} == {-(-size // window)}
