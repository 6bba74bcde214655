"""Hostile requests against the web UI that ``nhbench fortio server`` serves on its HTTP
echo port (the C server forwards ``/fortio/`` connections to the UI with a PROXY line naming
the client; docs/compat.md, "Fortio"). Real processes and sockets throughout.

Every refusal is checked twice, as in test_ui_attacks.py: the reply AND that nothing was
sent (the run's target is a listening socket nobody accepts on). A client off loopback is
this machine's own non-loopback address connecting to it (its source address is then that
address, not loopback), so no second machine or network namespace is needed.

* The real client is judged, not the forwarder's loopback connection: off loopback, no
  token (or a wrong one, or a forged X-Forwarded-For / Forwarded) is refused and starts
  nothing; the printed token is served; on loopback, no token is needed (unless one was
  given in NHBENCH_UI_TOKEN, which then guards loopback too).
* A forged PROXY line: sent first to the echo port it is not HTTP (400); sent after a
  forwarded request it is never read; the UI's own loopback port closes, unanswered, any
  connection that does not begin with a well-formed PROXY line.
* Without a token, a client named off loopback may change nothing.
* HTTP/2 to the prefix is 421, a forwarded request pipelined behind another 503: nothing
  started either way.
* Slowloris on the forwarded path (slow heads, slow bodies, many of them) holds the UI for
  at most its time-out and never the echo server, which keeps answering on the same port.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from support.ui import FortioServer, Origin, form_session, local_address, request, rest

from nhbench.compat._fortio_rest import start_fortio_ui

pytestmark = [pytest.mark.hostile, pytest.mark.timeout(240)]


@pytest.fixture
def origin() -> Iterator[Origin]:
    listening = Origin()
    yield listening
    listening.close()


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[Any]:
    started: list[FortioServer] = []

    def start(host: str = "127.0.0.1", **kwargs: Any) -> FortioServer:
        started.append(FortioServer(tmp_path, host, **kwargs))
        return started[-1]

    yield start
    for server in started:
        server.stop()


def off_loopback() -> str:
    address = local_address()
    if address is None:
        pytest.skip("this machine has no non-loopback address")
    return address


def run_query(target: str, **extra: str) -> str:
    return "/fortio/rest/run?" + urlencode({"url": target, "qps": "5", "t": "2s",
                                           "async": "on", **extra})


def refused(reply: tuple[int, Any], origin: Origin, needle: str) -> None:
    status, document = reply
    assert status == 403, document
    assert document["error"] is True and needle in document.get("exception", ""), document
    assert not origin.connected(), "the refused run reached its target"


def served(reply: tuple[int, Any], origin: Origin) -> None:
    status, document = reply
    assert status == 200 and document["message"] == "started", document
    assert origin.connected(10), "the accepted run never reached its target"


def exchange(address: str, port: int, data: bytes, timeout: float = 30) -> bytes:
    """Sends `data` on a new connection and reads until the server closes it."""
    with socket.create_connection((address, port), timeout=timeout) as sock:
        sock.sendall(data)
        received = b""
        while chunk := sock.recv(1 << 16):
            received += chunk
    return received


def test_a_client_off_loopback_needs_the_printed_token(servers: Any, origin: Origin) -> None:
    address = off_loopback()
    server = servers("0.0.0.0")
    assert server.token is not None and len(server.token) >= 24
    assert server.ui_url == f"http://localhost:{server.port}/fortio/"
    host = f"{address}:{server.port}"
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"X-Forwarded-For": "127.0.0.1"},
                    {"Forwarded": "for=127.0.0.1", "X-Real-IP": "127.0.0.1"}):
        refused(rest(server.port, run_query(origin.url), address=address, host=host,
                     headers=headers), origin, "token is required")
    status, document = rest(server.port, "/fortio/rest/stop", address=address, host=host)
    assert status == 403, document
    # The form from off loopback: its session and CSRF value are right, the token is not
    # given, so it is refused too.
    cookie, csrf = form_session(server.port, "/fortio/run", address=address, host=host)
    status, _, body = request(server.port, "/fortio/run", method="POST", address=address,
                              host=host, headers={"Cookie": cookie},
                              body=urlencode({"csrf": csrf, "uri": origin.url,
                                              "duration": "2s", "rps": "5"}).encode())
    assert status == 403 and b"token is required" in body, body[:300]
    assert not origin.connected()
    # Reading is served; the token is served, and the run reaches its target.
    assert rest(server.port, "/fortio/rest/status", address=address, host=host)[0] == 200
    served(rest(server.port, run_query(origin.url), address=address, host=host,
                headers={"Authorization": f"Bearer {server.token}"}), origin)
    rest(server.port, f"/fortio/rest/stop?wait=on&token={server.token}")


def test_a_loopback_client_needs_no_token_unless_one_was_given(servers: Any,
                                                               origin: Origin) -> None:
    server = servers("0.0.0.0")
    served(rest(server.port, run_query(origin.url)), origin)
    rest(server.port, "/fortio/rest/stop?wait=on")
    guarded = servers("0.0.0.0", environment={"NHBENCH_UI_TOKEN": "s3cret-token"})
    assert guarded.token is None  # given, so not printed
    second = Origin()
    try:
        refused(rest(guarded.port, run_query(second.url)), second, "token is required")
        served(rest(guarded.port, run_query(second.url),
                    headers={"X-Nhbench-Token": "s3cret-token"}), second)
    finally:
        rest(guarded.port, "/fortio/rest/stop?wait=on&token=s3cret-token")
        second.close()


def test_a_forged_proxy_line_is_not_trusted(servers: Any, origin: Origin) -> None:
    address = off_loopback()
    server = servers("0.0.0.0")
    host = f"{address}:{server.port}"
    run = f"GET {run_query(origin.url)} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
    forged = b"PROXY TCP4 127.0.0.1 127.0.0.1 40000 8080\r\n"
    # First on the echo port: not HTTP, refused by the C server.
    assert exchange(address, server.port, forged + run).startswith(b"HTTP/1.1 400")
    # After a forwarded request: the UI answers it (refused: no token), closes, and never
    # reads what follows.
    reply = exchange(address, server.port, run + forged + run)
    assert reply.startswith(b"HTTP/1.1 403") and reply.count(b"HTTP/1.1") == 1, reply
    assert not origin.connected()
    # The UI's own port, reached directly from this machine: no PROXY line, a malformed
    # one, an overlong one: closed unanswered.
    ports = server.internal_ports()
    assert len(ports) == 1, ports
    for first in (b"", b"PROXY TCP4 999.0.0.1 127.0.0.1 1 2\r\n",
                  b"PROXY TCP4 127.0.0.1 127.0.0.1 1 2\n", b"PROXY " + b"1" * 200 + b"\r\n",
                  b"PROXY TCP6 127.0.0.1 127.0.0.1 1 2\r\n"):
        assert exchange("127.0.0.1", ports[0], first + run) == b"", first
    assert not origin.connected()


def test_without_a_token_a_client_named_off_loopback_changes_nothing(
        tmp_path: Path, origin: Origin) -> None:
    """The forwarder's listener on loopback: no token guards the UI, so only loopback
    clients may act; a client the PROXY line names off loopback (or cannot name) may not."""
    ui = start_fortio_ui(str(tmp_path), "127.0.0.1", 0, forwarded_from="127.0.0.1")
    try:
        assert ui.token is None
        for line in (b"PROXY TCP4 192.0.2.77 127.0.0.1 5000 8080\r\n",
                     b"PROXY TCP6 2001:db8::1 ::1 5000 8080\r\n", b"PROXY UNKNOWN\r\n"):
            reply = exchange("127.0.0.1", ui.port, line + f"GET {run_query(origin.url)} "
                             "HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n".encode())
            head, _, body = reply.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 403"), reply
            assert b"only clients on this machine" in body, body
            assert not origin.connected()
        reply = exchange("127.0.0.1", ui.port, b"PROXY TCP4 127.0.0.1 127.0.0.1 5000 8080\r\n"
                         + f"GET {run_query(origin.url)} HTTP/1.1\r\n"
                         "Host: 127.0.0.1:8080\r\n\r\n".encode())
        assert reply.startswith(b"HTTP/1.1 200") and b"Connection: close" in reply, reply
        assert json.loads(reply.partition(b"\r\n\r\n")[2])["message"] == "started"
        assert origin.connected(10)
    finally:
        ui.stop()


def test_http2_and_pipelined_requests_to_the_prefix_start_nothing(servers: Any,
                                                                  origin: Origin) -> None:
    server = servers()
    curl = shutil.which("curl")
    if curl is not None:
        done = subprocess.run([curl, "-s", "--http2-prior-knowledge", "-o", "-", "-w",
                               "\n%{http_code}",
                               f"http://127.0.0.1:{server.port}{run_query(origin.url)}"],
                              capture_output=True, text=True, timeout=30, check=False)
        assert done.stdout.endswith("\n421") and "plain-text HTTP/1.x connections only" in done.stdout, done
    host = f"127.0.0.1:{server.port}"
    reply = exchange("127.0.0.1", server.port,
                     f"GET /?status=202 HTTP/1.1\r\nHost: {host}\r\n\r\n"
                     f"GET {run_query(origin.url)} HTTP/1.1\r\nHost: {host}\r\n"
                     "Connection: close\r\n\r\n".encode())
    assert reply.startswith(b"HTTP/1.1 202") and b"HTTP/1.1 503" in reply, reply
    assert b"a response was still on its way" in reply
    assert not origin.connected()


def test_slowloris_on_the_forwarded_path_never_holds_the_echo(servers: Any) -> None:
    server = servers()
    host = f"127.0.0.1:{server.port}"
    held: list[socket.socket] = []
    try:
        # More than the UI's 32 connection slots: bodies that never finish, and heads that
        # never finish (those the C server holds, under its header time-out).
        for index in range(48):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
            if index % 4:
                sock.sendall(f"POST /fortio/rest/run HTTP/1.1\r\nHost: {host}\r\n"
                             "Content-Length: 1000\r\n\r\n{".encode())
            else:
                sock.sendall(b"GET /fortio/rest/ru")
            held.append(sock)
        # The echo on the same port answers at once, every time.
        for _ in range(20):
            started = time.monotonic()
            status, _, _ = request(server.port, "/?status=202", timeout=10)
            assert status == 202
            assert time.monotonic() - started < 5
        # The UI cuts the slow clients off (its time-out: 10 s for a body) and answers again.
        deadline = time.monotonic() + 60
        status = 0
        while time.monotonic() < deadline:
            try:
                status = rest(server.port, "/fortio/rest/status", timeout=15)[0]
            except (OSError, ValueError):
                status = 0
            if status == 200:
                break
        assert status == 200
        # Every slow connection was ended (an answer or none, then the close).
        for sock in held:
            sock.settimeout(40)
            try:
                while sock.recv(1000):
                    pass
            except TimeoutError:
                raise AssertionError("a slow connection is still held") from None
            except OSError:
                pass  # reset: ended too
    finally:
        for sock in held:
            sock.close()
