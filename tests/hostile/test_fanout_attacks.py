"""A hostile client and hostile targets against the test server's HTTP fan-out (``nhbench
server --http-fanout`` as a subprocess, so its memory and descriptors are its own): targets
that answer garbage, too much, extra bytes or nothing; a client that leaves mid-fan-out,
smuggles header lines through the mirrored headers, or sends huge or pipelined requests.

After every attack the fan-out must still answer a plain request.
"""

from __future__ import annotations

import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from support.polling import wait_until

import nhbench

pytestmark = [pytest.mark.hostile, pytest.mark.core]

Handler = Callable[[socket.socket, "FakeTarget"], None]


class FakeTarget:
    """A TCP listener whose every connection runs `handler` on a thread; what the
    connections received is kept in `received`."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.received = bytearray()
        self.connections = 0
        self.eofs = 0
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                self.connections += 1
            threading.Thread(target=self._run, args=(conn,), daemon=True).start()

    def _run(self, conn: socket.socket) -> None:
        with conn:
            try:
                self.handler(conn, self)
            except OSError:
                pass

    def read_head(self, conn: socket.socket) -> bytes:
        """One request head (and whatever came with it); b"" at EOF."""
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                with self.lock:
                    self.eofs += 1
                return b""
            data += chunk
        with self.lock:
            self.received += data
        return data

    def close(self) -> None:
        self.listener.close()


@contextmanager
def target(handler: Handler) -> Iterator[FakeTarget]:
    t = FakeTarget(handler)
    try:
        yield t
    finally:
        t.close()


def answer_ok(conn: socket.socket, t: FakeTarget) -> None:
    while t.read_head(conn):
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")


@contextmanager
def fanout(*urls: str, **kw: object) -> Iterator[nhbench.TestServer]:
    server = nhbench.TestServer(subprocess=True, admin="127.0.0.1:0",
                                http_fanout=f"127.0.0.1:0={','.join(urls)}", **kw)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def exchange(server: nhbench.TestServer, request: bytes, timeout: float = 20) -> bytes:
    """Sends `request` on a new connection and reads until the server closes it."""
    with socket.create_connection(server.http_fanout_address, timeout=timeout) as c:
        c.sendall(request)
        data = b""
        try:
            while chunk := c.recv(65536):
                data += chunk
        except ConnectionResetError:
            pass
    return data


GET = b"GET /x HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"


def still_answers(server: nhbench.TestServer) -> bool:
    return exchange(server, GET).startswith(b"HTTP/1.1 ")


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


# ---- hostile targets --------------------------------------------------------------------------


def test_a_garbage_response_fails_that_target_only() -> None:
    def garbage(conn: socket.socket, t: FakeTarget) -> None:
        if t.read_head(conn):
            conn.sendall(b"SMTP ready\r\n\x00\x01\x02\r\n\r\n")
            time.sleep(0.5)

    with target(garbage) as bad, target(answer_ok) as good, fanout(good.url, bad.url) as s:
        data = exchange(s, GET)
        assert data.startswith(b"HTTP/1.1 503 ")
        body = data.partition(b"\r\n\r\n")[2]
        assert body.startswith(b"ok\nError for http://127.0.0.1:")
        assert b"malformed HTTP response" in body
        assert s.stats()["fanout_upstream_errors"] == 1


def test_a_status_outside_100_to_999_is_a_malformed_response() -> None:
    # llhttp reads "HTTP/1.1 2 OK" as status 2: passed on, it would be the client's status
    # line (the fuzz target found it).
    def short_status(conn: socket.socket, t: FakeTarget) -> None:
        if t.read_head(conn):
            conn.sendall(b"HTTP/1.1 2 OK\r\nContent-Length: 2\r\n\r\nok")
            time.sleep(0.5)

    with target(short_status) as bad, fanout(bad.url) as s:
        data = exchange(s, GET)
        assert data.startswith(b"HTTP/1.1 503 "), data
        assert b"malformed HTTP response" in data


def test_an_endless_response_is_cut_at_the_cap_and_memory_stays_bounded() -> None:
    def endless(conn: socket.socket, t: FakeTarget) -> None:
        if t.read_head(conn):
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000000\r\n\r\n")
            block = b"x" * 65536
            for _ in range(1000000000 // len(block)):
                conn.sendall(block)

    with target(endless) as bad, fanout(bad.url) as s:
        before = rss_kib(s.pid)
        data = exchange(s, GET, timeout=60)
        assert data.startswith(b"HTTP/1.1 503 ")
        assert b"response body too large" in data
        # The body is kept up to the 16 MiB cap, no further.
        assert rss_kib(s.pid) - before < 64 * 1024
        assert still_answers(s)


def test_a_silent_target_times_out_with_fortios_error_line() -> None:
    def silent(conn: socket.socket, t: FakeTarget) -> None:
        t.read_head(conn)
        time.sleep(30)

    with target(silent) as bad, target(answer_ok) as good, fanout(good.url, bad.url) as s:
        start = time.monotonic()
        data = exchange(s, GET, timeout=60)
        elapsed = time.monotonic() - start
        assert data.startswith(b"HTTP/1.1 503 ")
        assert b"ok\nError for" in data and b"timeout" in data
        assert 1.5 < elapsed < 25


def test_bytes_after_a_response_do_not_answer_the_next_request() -> None:
    # A target that appends a second response to its first: the fan-out must not keep that
    # connection (the extra bytes would answer the client's next request).
    def smuggler(conn: socket.socket, t: FakeTarget) -> None:
        while t.read_head(conn):
            if t.connections == 1:
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nA\n"
                             b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nEVIL\n")
            else:
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")

    with target(smuggler) as bad, fanout(bad.url) as s:
        with socket.create_connection(s.http_fanout_address, timeout=20) as c:
            c.sendall(b"GET /1 HTTP/1.1\r\nHost: h\r\n\r\n")
            time.sleep(0.5)
            c.sendall(GET)
            data = b""
            while chunk := c.recv(65536):
                data += chunk
        assert b"EVIL" not in data
        assert data.count(b"HTTP/1.1 200 ") == 2 and data.endswith(b"ok\n")
        assert bad.connections == 2


def test_a_kept_alive_connection_closed_under_a_request_is_retried_once() -> None:
    # The race of every keep-alive client: the target closes an idle connection as the next
    # request goes out on it. That request is sent again on a new connection (once: a target
    # that always closes fails the request).
    def one_per_connection(conn: socket.socket, t: FakeTarget) -> None:
        if t.read_head(conn):
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
        t.read_head(conn)  # the next request: closed unanswered

    with target(one_per_connection) as t, fanout(t.url) as s:
        with socket.create_connection(s.http_fanout_address, timeout=20) as c:
            for _ in range(3):
                c.sendall(b"GET /x HTTP/1.1\r\nHost: h\r\n\r\n")
                data = b""
                while not data.endswith(b"ok\n"):
                    chunk = c.recv(4096)
                    assert chunk, data
                    data += chunk
                assert data.startswith(b"HTTP/1.1 200 ")
        assert t.connections == 3
        stats = s.stats()
        assert stats["fanout_upstream_errors"] == 0
        assert stats["fanout_upstream_requests"] == 5  # two of them sent again


# ---- hostile clients --------------------------------------------------------------------------


def test_a_client_that_leaves_mid_fanout_aborts_the_target_requests() -> None:
    def slow(conn: socket.socket, t: FakeTarget) -> None:
        if t.read_head(conn):
            # Waits for the fan-out to give up on this request (EOF), well before its 3 s
            # time-out.
            conn.settimeout(2.5)
            try:
                if not conn.recv(1):
                    with t.lock:
                        t.eofs += 1
            except TimeoutError:
                pass

    with target(slow) as t, fanout(t.url) as s:
        for _ in range(20):
            with socket.create_connection(s.http_fanout_address, timeout=5) as c:
                c.sendall(b"GET /x HTTP/1.1\r\nHost: h\r\n\r\n")
                assert wait_until(lambda: t.connections > 0, timeout=10)
                time.sleep(0.05)
        assert wait_until(lambda: t.eofs >= 20, timeout=10), t.eofs
        stats = s.stats()
        assert stats["fanout_requests"] == 0 and stats["fanout_upstream_requests"] == 20


def test_a_client_that_does_not_read_its_response_is_dropped_after_idle_timeout() -> None:
    # More than the kernel's socket buffers on both ends hold (a few MiB each).
    size = 15 << 20

    def big(conn: socket.socket, t: FakeTarget) -> None:
        while t.read_head(conn):
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size + b"z" * size)

    with target(big) as t, fanout(t.url, idle_timeout="1s") as s:
        with socket.create_connection(s.http_fanout_address, timeout=20) as c:
            c.sendall(GET)
            time.sleep(4)  # not reading: the fan-out's write waits, then gives up
            got = 0
            try:
                while chunk := c.recv(1 << 20):
                    got += len(chunk)
            except ConnectionResetError:
                pass
        assert got < size
        assert still_answers(s)


@pytest.mark.parametrize("head", [
    # obsolete line folding: forwarded as is it would start a line of the client's choosing
    b"X-A: a\r\n X-Injected: 1\r\n",
    b"X-A: a\rX-Injected: 1\r\n",
    b"X-A: a\nX-Injected: 1\r\n",
    b"X-A: a\x00X-Injected: 1\r\n",
])
def test_no_header_line_can_be_smuggled_to_the_targets(head: bytes) -> None:
    with target(answer_ok) as t, fanout(t.url) as s:
        data = exchange(s, b"GET /x HTTP/1.1\r\nHost: h\r\n" + head + b"Connection: close\r\n\r\n")
        # Refused (400), or forwarded without a line of its own.
        assert data.startswith(b"HTTP/1.1 400 ") or data.startswith(b"HTTP/1.1 200 ")
        assert b"\r\nX-Injected" not in bytes(t.received)
        assert b"\nX-Injected" not in bytes(t.received)
        assert still_answers(s)


def test_a_huge_body_is_refused_before_any_target_sees_it() -> None:
    with target(answer_ok) as t, fanout(t.url, max_body_bytes="1MiB") as s:
        data = exchange(s, b"POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 5000000000\r\n\r\n"
                        + b"x" * 65536)
        assert data.startswith(b"HTTP/1.1 413 ")
        # chunked, no length announced: refused once past the cap
        chunk = b"%x\r\n" % 65536 + b"y" * 65536 + b"\r\n"
        with socket.create_connection(s.http_fanout_address, timeout=20) as c:
            c.sendall(b"POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n")
            answer = b""
            try:
                for _ in range(40):
                    c.sendall(chunk)
            except OSError:
                pass
            try:
                while part := c.recv(65536):
                    answer += part
            except ConnectionResetError:
                pass
        assert answer.startswith(b"HTTP/1.1 413 ")
        assert t.connections == 0
        assert still_answers(s)


def test_pipelined_requests_are_answered_in_order() -> None:
    def numbered(conn: socket.socket, t: FakeTarget) -> None:
        buffer = b""
        while True:
            while b"\r\n\r\n" not in buffer:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                buffer += chunk
            head, _, buffer = buffer.partition(b"\r\n\r\n")
            path = head.split(b" ")[1]
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(path), path))

    n = 200
    with target(numbered) as t, fanout(t.url) as s:
        requests = b"".join(b"GET /%d HTTP/1.1\r\nHost: h\r\n\r\n" % i for i in range(n - 1))
        data = exchange(s, requests + b"GET /last HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
        bodies = [part.partition(b"\r\n\r\n")[2] for part in data.split(b"HTTP/1.1 200 OK")[1:]]
        assert [b.split(b"HTTP")[0] for b in bodies] == \
            [b"/%d" % i for i in range(n - 1)] + [b"/last"]
        assert t.connections == 1


# ---- without mirroring: the query form (payload, X) -------------------------------------------



def answer_ok_with_body(conn: socket.socket, t: FakeTarget) -> None:
    """answer_ok, reading each request's body (by its Content-Length) into `received`."""
    while data := t.read_head(conn):
        head, _, body = data.partition(b"\r\n\r\n")
        match = re.search(rb"\r\nContent-Length: (\d+)\r\n", head + b"\r\n")
        length = int(match.group(1)) if match else 0
        while len(body) < length:
            chunk = conn.recv(65536)
            if not chunk:
                return
            body += chunk
            with t.lock:
                t.received += chunk
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")


def one_request(t: FakeTarget) -> tuple[bytes, bytes]:
    """The only request `t` received: (head, body)."""
    data = bytes(t.received)
    assert data.count(b" HTTP/1.1\r\n") == 1, data[:300]
    head, _, body = data.partition(b"\r\n\r\n")
    return head, body


@pytest.mark.parametrize("method", [
    "GET%20/x%20HTTP/1.1%0D%0AX-Injected:%201%0D%0A%0D%0A",  # a request line of its own
    "PUT%0AX-Injected:%201",
    "PUT%0DX-Injected:%201",
    "PUT%00",
    "%20PUT",
    "PU:T",
    "P%C3%9AT",  # not ASCII
])
def test_a_method_that_is_not_a_token_is_refused_and_nothing_is_sent(method: str) -> None:
    # Go's net/http refuses such a method (http.NewRequest): Fortio sends nothing and answers
    # 503 with an empty body. Nothing may reach a target's request line.
    with target(answer_ok_with_body) as t, fanout(t.url, http_fanout_no_mirror=True) as s:
        data = exchange(s, f"GET /?payload=p&X={method} HTTP/1.1\r\nHost: h\r\n"
                           f"Connection: close\r\n\r\n".encode())
        assert data.startswith(b"HTTP/1.1 503 ") and data.endswith(b"\r\n\r\n"), data
        assert t.connections == 0 and not t.received
        assert s.stats()["fanout_upstream_requests"] == 0
        assert still_answers(s)


def test_nul_and_crlf_in_the_payload_stay_in_the_counted_body() -> None:
    payload = b"\x00\r\nX-Injected: 1\r\n\r\nGET /evil HTTP/1.1\r\nHost: h\r\n\r\n"
    query = "".join(f"%{b:02X}" for b in payload)
    with target(answer_ok_with_body) as t, fanout(t.url, http_fanout_no_mirror=True) as s:
        data = exchange(s, f"GET /?X=PUT&payload={query} HTTP/1.1\r\nHost: h\r\n"
                           f"Connection: close\r\n\r\n".encode())
        assert data.startswith(b"HTTP/1.1 200 ") and data.endswith(b"\r\n\r\nok\n"), data
        assert wait_until(lambda: len(t.received) > len(payload), timeout=10)
        head, body = bytes(t.received).split(b"\r\n\r\n", 1)
        assert head.startswith(b"PUT / HTTP/1.1\r\n")
        assert b"X-Injected" not in head
        assert f"\r\nContent-Length: {len(payload)}".encode() in head
        assert body == payload
        assert still_answers(s)


def test_a_huge_query_is_read_up_to_max_header_bytes_then_refused() -> None:
    # A 60 KB payload (with every escape form) and 20000 empty pairs, within the default
    # 64 KiB head: sent whole. Go's url.ParseQuery has no limit on the pairs as Fortio is
    # built (urlmaxqueryparams=0).
    payload = ("a+b%20c%2B" * 6000)[:60000]
    expected = payload.replace("+", " ").replace("%20", " ").replace("%2B", "+").encode()
    with target(answer_ok_with_body) as t, fanout(t.url, http_fanout_no_mirror=True) as s:
        data = exchange(s, f"GET /?payload={payload}&X=PATCH HTTP/1.1\r\nHost: h\r\n"
                           f"Connection: close\r\n\r\n".encode())
        assert data.startswith(b"HTTP/1.1 200 "), data[:100]
        assert wait_until(lambda: len(t.received) > len(expected), timeout=10)
        head, body = one_request(t)
        assert head.startswith(b"PATCH / HTTP/1.1\r\n")
        assert body == expected

        t.received.clear()
        data = exchange(s, b"GET /?" + b"&" * 20000 + b"payload=last HTTP/1.1\r\nHost: h\r\n"
                        b"Connection: close\r\n\r\n")
        assert data.startswith(b"HTTP/1.1 200 ")
        assert wait_until(lambda: t.received.endswith(b"last"), timeout=10)
        assert one_request(t)[0].startswith(b"POST / HTTP/1.1\r\n")

        # Past max_header_bytes: refused before any target sees it.
        t.received.clear()
        data = exchange(s, b"GET /?payload=" + b"x" * 70000 + b" HTTP/1.1\r\nHost: h\r\n"
                        b"Connection: close\r\n\r\n")
        assert data.startswith(b"HTTP/1.1 431 ")
        assert not t.received
        assert still_answers(s)


def test_a_payload_or_form_body_over_max_body_bytes_is_refused() -> None:
    with target(answer_ok_with_body) as t, fanout(t.url, http_fanout_no_mirror=True,
                                                  max_body_bytes="1KiB") as s:
        # The payload is a body: bounded as one (413), nothing sent.
        data = exchange(s, b"GET /?payload=" + b"p" * 2000 + b" HTTP/1.1\r\nHost: h\r\n"
                        b"Connection: close\r\n\r\n")
        assert data.startswith(b"HTTP/1.1 413 "), data[:100]
        # Escapes count decoded: 3000 bytes of query, 1000 of payload, sent.
        data = exchange(s, b"GET /?payload=" + b"%41" * 1000 + b" HTTP/1.1\r\nHost: h\r\n"
                        b"Connection: close\r\n\r\n")
        assert data.startswith(b"HTTP/1.1 200 "), data[:100]
        assert wait_until(lambda: len(t.received) > 1000, timeout=10)
        assert one_request(t)[1] == b"A" * 1000
        # A form body (which the non-mirroring fan-out does not read, as Fortio) over the
        # limit: refused as any body.
        t.received.clear()
        body = b"payload=" + b"f" * 2000
        data = exchange(s, b"POST /?X=PUT HTTP/1.1\r\nHost: h\r\nConnection: close\r\n"
                        b"Content-Type: application/x-www-form-urlencoded\r\n"
                        b"Content-Length: %d\r\n\r\n" % len(body) + body)
        assert data.startswith(b"HTTP/1.1 413 ")
        assert t.connections == 1 and not t.received
        assert still_answers(s)


def test_connect_to_a_url_without_a_path_is_sent_in_authority_form() -> None:
    # Go's request line for CONNECT when the URL has no path; with a path, the path.
    with target(answer_ok_with_body) as t, fanout(f"http://127.0.0.1:{t.port}",
                                                  http_fanout_no_mirror=True) as s:
        data = exchange(s, b"GET /?X=CONNECT HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
        assert data.startswith(b"HTTP/1.1 200 ")
        assert wait_until(lambda: bool(t.received), timeout=10)
        head, body = one_request(t)
        assert head.startswith(b"CONNECT 127.0.0.1:%d HTTP/1.1\r\n" % t.port), head
        assert b"Content-Length" not in head and body == b""
