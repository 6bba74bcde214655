"""Hostile trace collectors: what `--trace` does when the collector misbehaves.

The collector is the one new peer tracing adds (the exporter is an HTTP client POSTing
spans). Each case is a real socket server on loopback that accepts the POST and then does
one bad thing: never answers, answers bytes that are not HTTP, resets, redirects, answers
slowly a byte at a time. Every case must leave the run intact (its requests all answered,
success), end in bounded time (at most the export's 5 s grace after the run), and account
for every sampled span: sent (POSTed) or dropped, never lost silently.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from support.recording_origin import RecordingOrigin

import nhbench

pytest.importorskip("nhbench._core")

Handler = Callable[[socket.socket], None]


def _read_request(conn: socket.socket) -> None:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return
        body += chunk


def _hang(conn: socket.socket) -> None:
    _read_request(conn)
    time.sleep(30)


def _garbage(conn: socket.socket) -> None:
    _read_request(conn)
    conn.sendall(b"\x00\xffNOT HTTP AT ALL\r\n\r\n")


def _reset(conn: socket.socket) -> None:
    _read_request(conn)
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def _redirect(conn: socket.socket) -> None:
    _read_request(conn)
    conn.sendall(b"HTTP/1.1 307 Temporary Redirect\r\nLocation: http://192.0.2.1/x\r\n"
                 b"Content-Length: 0\r\n\r\n")


def _trickle(conn: socket.socket) -> None:
    _read_request(conn)
    for byte in b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n":
        conn.sendall(bytes([byte]))
        time.sleep(0.5)


def _endless_body(conn: socket.socket) -> None:
    _read_request(conn)
    conn.sendall(b"HTTP/1.1 202 Accepted\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk = b"1000\r\n" + b"x" * 4096 + b"\r\n"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        conn.sendall(chunk)


@contextmanager
def _collector(handler: Handler) -> Iterator[int]:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    srv.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue

            def one(c: socket.socket = conn) -> None:
                try:
                    handler(c)
                except OSError:
                    pass
                finally:
                    c.close()
            threading.Thread(target=one, daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield srv.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        srv.close()


@pytest.mark.parametrize(("handler", "outcome"), [
    (_hang, "reports_failed"),
    (_garbage, "reports_failed"),
    (_reset, "reports_failed"),
    (_redirect, "reports_dropped"),
    (_trickle, None),
    (_endless_body, None),
], ids=["hang", "garbage", "reset", "redirect", "trickle", "endless-body"])
def test_hostile_collector(handler: Handler, outcome: str | None) -> None:
    with _collector(handler) as port, RecordingOrigin() as origin:
        started = time.monotonic()
        result = nhbench.run(origin.url, rps=200, duration="1s",
                             trace=f"zipkin://127.0.0.1:{port}/api/v2/spans")
        took = time.monotonic() - started
        requests = len(origin.requests)
    assert result.success, result.error
    c = result.counters
    assert c["benchmark.http_2xx"] == requests > 100
    # The run's end waits for the collector a bounded time: one POST in flight (5 s) and
    # the 5 s grace for the rest.
    assert took < 1 + 12, took
    # Every sampled span was POSTed or dropped, never lost.
    assert c["tracing.spans_sampled"] == requests
    assert c["tracing.zipkin.spans_sent"] + c["tracing.spans_dropped"] == requests
    if outcome is not None:
        assert c[f"tracing.zipkin.{outcome}"] >= 1
    assert c["tracing.zipkin.reports_sent"] == 0 or handler in (_trickle, _endless_body)
