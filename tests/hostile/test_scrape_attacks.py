"""A hostile metrics endpoint against ``--scrape`` (`nhbench.scrape`): the page a sweep reads
from the target before and after each step comes from whoever answers on that port.

Each endpoint is a real socket (tests/support/scripted_origin.py) that tries to: hang us
(silence, a body trickled a byte at a time, a body that never ends), exhaust memory (a body
over the size cap, a header flood), send us elsewhere (a redirect to another scheme, a
redirect loop), or confuse the parsers (a bad status line, bytes that are not UTF-8, a
page that is neither format). Every one must end within its time bound as a failed scrape
with a one-line reason: never an exception, never a hang, never a partial page read as
numbers.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator

import pytest
from support.scripted_origin import ScriptedOrigin, read_request

from nhbench.options import parse_metric_selector
from nhbench.scrape import MAX_SCRAPE_BYTES, Scraper, ScrapeSpec, fetch

pytestmark = [pytest.mark.hostile, pytest.mark.timeout(120)]

TIMEOUT = 1.0


def _origin(handler: Callable[[socket.socket], None]) -> Iterator[str]:
    origin = ScriptedOrigin(handler=handler)
    try:
        yield origin.url + "metrics"
    finally:
        origin.close()


def _send(conn: socket.socket, data: bytes) -> bool:
    try:
        conn.sendall(data)
        return True
    except OSError:
        return False


def _head(conn: socket.socket) -> bool:
    return read_request(conn, b"") is not None


def silent(conn: socket.socket) -> None:
    _head(conn)
    time.sleep(TIMEOUT * 4)


def trickle(conn: socket.socket) -> None:
    if _head(conn) and _send(conn, b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n"):
        for _ in range(400):
            if not _send(conn, b"a"):
                return
            time.sleep(0.05)


def endless(conn: socket.socket) -> None:
    if _head(conn) and _send(conn, b"HTTP/1.1 200 OK\r\n\r\n"):
        line = b"m_total 1\n" * 10000
        while _send(conn, line):
            pass


def over_cap(conn: socket.socket) -> None:
    size = MAX_SCRAPE_BYTES + 1
    if _head(conn) and _send(conn, b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size):
        chunk = b"# " + b"x" * (1024 * 1024 - 3) + b"\n"
        while size > 0 and _send(conn, chunk[:size]):
            size -= len(chunk)


def header_flood(conn: socket.socket) -> None:
    if _head(conn):
        _send(conn, b"HTTP/1.1 200 OK\r\n" + b"X-A: b\r\n" * 5000 + b"\r\nm 1\n")


def bad_status(conn: socket.socket) -> None:
    if _head(conn):
        _send(conn, b"HTTP/9 lol\r\n\r\nm 1\n")


def to_ftp(conn: socket.socket) -> None:
    if _head(conn):
        _send(conn, b"HTTP/1.1 302 Found\r\nLocation: ftp://127.0.0.1/metrics\r\n"
                    b"Content-Length: 0\r\n\r\n")


def to_file(conn: socket.socket) -> None:
    if _head(conn):
        _send(conn, b"HTTP/1.1 301 Moved\r\nLocation: file:///etc/passwd\r\n"
                    b"Content-Length: 0\r\n\r\n")


def loop(conn: socket.socket) -> None:
    while _head(conn):
        if not _send(conn, b"HTTP/1.1 302 Found\r\nLocation: /metrics\r\n"
                           b"Content-Length: 0\r\n\r\n"):
            return


def not_utf8(conn: socket.socket) -> None:
    if _head(conn):
        body = b"m_a\xff\xfe 1\n\xc3\x28: 2\n"
        _send(conn, b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)


def truncated(conn: socket.socket) -> None:
    # Announces more than it sends, then closes: a partial page must not read as numbers.
    if _head(conn):
        _send(conn, b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nm_total 5\n")


def truncated_chunked(conn: socket.socket) -> None:
    if _head(conn):
        _send(conn, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                    b"a\r\nm_total 5\n\r\n40\r\nm_total")


CASES = {
    "silent": (silent, "timed out"),
    "trickle": (trickle, "timed out"),
    "endless": (endless, "MiB"),
    "over_cap": (over_cap, "MiB"),
    "header_flood": (header_flood, "headers"),
    "bad_status": (bad_status, "BadStatusLine"),
    "to_ftp": (to_ftp, "redirected to a ftp: URL"),
    "to_file": (to_file, "is not allowed"),
    "loop": (loop, "redirect"),
    "truncated": (truncated, "IncompleteRead"),
    "truncated_chunked": (truncated_chunked, "IncompleteRead"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_hostile_endpoint_is_a_failed_scrape(name: str) -> None:
    handler, reason = CASES[name]
    for url in _origin(handler):
        started = time.monotonic()
        text, error = fetch(url, TIMEOUT)
        took = time.monotonic() - started
        assert text is None, (name, text[:100] if text else text)
        assert error is not None and reason in error and "\n" not in error, (name, error)
        # Bounded: the timeout, or the time to read the cap over loopback.
        assert took < (30 if name in ("endless", "over_cap") else TIMEOUT + 3), (name, took)
        # Through the scraper the same page is a recorded reason, never an exception.
        scraper = Scraper(ScrapeSpec({"t": url}, (parse_metric_selector("m*"),), TIMEOUT))
        [record] = scraper.compare({}, scraper.take())
        assert "after" in record.errors and not [s for s in record.series if s.value]


def test_bytes_that_are_not_utf8_do_not_crash_the_parsers() -> None:
    for url in _origin(not_utf8):
        scraper = Scraper(ScrapeSpec({"t": url}, (parse_metric_selector("*"),), TIMEOUT))
        snapshot = scraper.take()["t"]
    # Replaced characters make the page neither format: a failed scrape, by name.
    assert snapshot.error is not None and snapshot.error.startswith("not Prometheus text")
