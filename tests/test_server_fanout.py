"""The test server's HTTP fan-outs (``--http-fanout LOCAL=URL[,URL...]``, Fortio's ``-M``),
against real Fortio: ``fortio load`` through our fan-out to two of our servers (each target
sees every request), and our fan-out side by side with ``fortio server -M`` on the same
targets (``fortio server`` echoes, whose /debug page shows what each target received), in
parallel, serial and non-mirroring modes, with a target down."""

from __future__ import annotations

import json
import re
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from support.peers import fortio_echo_server, require_fortio
from support.polling import wait_until
from support.sockets import free_port, listening

import nhbench

pytestmark = pytest.mark.core



@pytest.fixture(scope="module")
def fortio_targets() -> Iterator[tuple[int, int]]:
    with fortio_echo_server() as a, fortio_echo_server() as b:
        yield a, b


@contextmanager
def _fortio_multi(urls: list[str], *flags: str) -> Iterator[int]:
    """``fortio server -M "port url..."``: the -M port."""
    multi = free_port()
    with fortio_echo_server("-M", f"127.0.0.1:{multi} {' '.join(urls)}", *flags):
        assert wait_until(lambda: listening(multi), timeout=20)
        yield multi


def _request(port: int, path: str, *, method: str = "GET", body: bytes = b"",
             headers: tuple[tuple[str, str], ...] = ()) -> tuple[int, bytes]:
    """One HTTP/1.1 request on its own connection: (status, body)."""
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers)
    if body or method == "POST":
        head += f"Content-Length: {len(body)}\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        s.sendall(head.encode() + b"\r\n" + body)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head_bytes, _, rest = data.partition(b"\r\n\r\n")
    status = int(head_bytes.split(b" ", 2)[1])
    if b"transfer-encoding: chunked" in head_bytes.lower():
        out = b""
        while rest:
            size_text, _, rest = rest.partition(b"\r\n")
            size = int(size_text, 16)
            if size == 0:
                break
            out, rest = out + rest[:size], rest[size + 2:]
        rest = out
    return status, rest


def _read_response(s: socket.socket) -> bytes:
    """One response with a Content-Length from a kept-alive connection."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += s.recv(4096)
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(re.search(rb"Content-Length: (\d+)", head).group(1))  # type: ignore[union-attr]
    while len(body) < length:
        body += s.recv(4096)
    return head + b"\r\n\r\n" + body


# What differs between the two fan-outs by design: the peer's port, the proxy's name, the
# target's uptime line, and the body's framing (Fortio sends bodies chunked, nhbench with a
# Content-Length, which Go's server then lists among the headers), and the client's
# hop-by-hop Connection header, which Fortio forwards (so a client's "close" closes the
# target's connection too) and nhbench does not.
_VARIABLE = (
    (re.compile(r"^Φορτίο version .*$", re.M), "<banner>"),
    (re.compile(r"^(X-On-Behalf-Of): 127\.0\.0\.1:\d+$", re.M), r"\1: <peer>"),
    (re.compile(r"^(X-Proxy-Agent): (fortio\.org/fortio-[\d.]+|nhbench)$", re.M), r"\1: <agent>"),
    (re.compile(r"^(User-Agent): (fortio\.org/fortio-[\d.]+|nhbench)$", re.M), r"\1: <agent>"),
    (re.compile(r"^Content-Length: \d+\n", re.M), ""),
    (re.compile(r"^Connection: close\n", re.M), ""),
)


def _normal(body: bytes) -> str:
    text = body.decode()
    for pattern, replacement in _VARIABLE:
        text = pattern.sub(replacement, text)
    return text


# ---- load through the fan-out -----------------------------------------------------------------


def test_fortio_load_through_the_fanout_reaches_every_target(tmp_path: Path) -> None:
    n = 300
    with nhbench.TestServer() as a, nhbench.TestServer() as b, nhbench.TestServer(
            http_fanout=f"127.0.0.1:0={a.url},{b.url}") as fan:
        host, port = fan.http_fanout_address
        out = tmp_path / "fortio.json"
        subprocess.run([require_fortio(), "load", "-json", str(out), "-qps", "0", "-c", "4",
                        "-n", str(n), f"http://{host}:{port}/echo?size=50"],
                       check=True, capture_output=True, timeout=120)
        result = json.loads(out.read_text())
        assert result["DurationHistogram"]["Count"] == n
        assert result["RetCodes"] == {"200": n}
        # Each response is both targets' bodies back to back.
        assert result["Sizes"]["Min"] == result["Sizes"]["Max"] > 100
        # Fortio's keep-alive connections stay open: four clients, four connections.
        assert result["SocketCount"] == 4
        stats = fan.stats()
        assert stats["fanout_requests"] == n
        assert stats["fanout_upstream_requests"] == 2 * n
        assert stats["fanout_upstream_errors"] == 0
        assert stats["fanout_connections"] == 4
        assert stats["requests"] == 0  # the fan-out is not the HTTP echo
        assert a.stats()["requests"] == n
        assert b.stats()["requests"] == n
        # One kept-alive connection per target per client connection.
        assert a.stats()["connections_total"] == 4
        assert b.stats()["connections_total"] == 4


# ---- side by side with fortio server -M -------------------------------------------------------


def _side_by_side(urls: list[str], path: str, *, serial: bool = False, mirror: bool = True,
                  method: str = "GET", body: bytes = b"",
                  headers: tuple[tuple[str, str], ...] = ()) -> tuple[tuple[int, str],
                                                                      tuple[int, str]]:
    flags = (["-multi-serial-mode"] if serial else []) + \
        ([] if mirror else ["-multi-mirror-origin=false"])
    with _fortio_multi(urls, *flags) as theirs, nhbench.TestServer(
            http_fanout=f"127.0.0.1:0={','.join(urls)}", http_fanout_serial=serial,
            http_fanout_no_mirror=not mirror) as fan:
        s1, b1 = _request(theirs, path, method=method, body=body, headers=headers)
        s2, b2 = _request(fan.http_fanout_address[1], path, method=method, body=body,
                          headers=headers)
    return (s1, _normal(b1)), (s2, _normal(b2))


def test_mirroring_sends_what_fortio_sends(fortio_targets: tuple[int, int]) -> None:
    a, b = fortio_targets
    urls = [f"http://127.0.0.1:{a}", f"http://127.0.0.1:{b}/"]
    theirs, ours = _side_by_side(urls, "/debug?x=1", method="POST", body=b"hello fan-out",
                                 headers=(("X-Foo", "bar"), ("User-Agent", "probe/1")))
    assert theirs == ours
    status, text = ours
    assert status == 200
    # Both targets, in order, each with its id, the client's method, URI, headers and body.
    first, second = text.split("<banner>")[1:]
    for part, (port, n) in zip((first, second), ((a, 1), (b, 2)), strict=True):
        assert "POST /debug?x=1 HTTP/1.1" in part
        assert f"Host: 127.0.0.1:{port}" in part
        assert f"X-Fortio-Multi-Id: {n}" in part
        assert "X-Foo: bar" in part and "User-Agent: probe/1" in part
        assert "X-On-Behalf-Of: <peer>" in part and "X-Proxy-Agent: <agent>" in part
        assert part.rstrip().endswith("hello fan-out")


def test_parallel_status_is_the_first_not_ok(fortio_targets: tuple[int, int]) -> None:
    a, b = fortio_targets
    theirs, ours = _side_by_side([f"http://127.0.0.1:{a}", f"http://127.0.0.1:{b}"],
                                 "/echo?status=418")
    assert theirs == ours == (418, "")


def test_a_target_down(fortio_targets: tuple[int, int]) -> None:
    a, _ = fortio_targets
    down = free_port()
    urls = [f"http://127.0.0.1:{a}", f"http://127.0.0.1:{down}"]
    for serial in (False, True):
        (s1, t1), (s2, t2) = _side_by_side(urls, "/echo?x=7", serial=serial)
        # Serial mode takes the first target's status (200 here), parallel the first
        # failure's (503).
        assert s1 == s2 == (200 if serial else 503)
        # The live target's (empty) echo, then Fortio's error line for the one down; Go's
        # dial error is longer ("dial tcp ...: connect: connection refused") than libuv's.
        line = f'Error for http://127.0.0.1:{down}/echo?x=7: Get "http://127.0.0.1:{down}/echo?x=7": '
        for text in (t1, t2):
            assert text.startswith(line), text
            assert text.endswith("connection refused\n"), text
            assert text.count("\n") == 1


def test_serial_first_target_down_is_503_with_the_rest(fortio_targets: tuple[int, int]) -> None:
    _, b = fortio_targets
    down = free_port()
    (s1, t1), (s2, t2) = _side_by_side([f"http://127.0.0.1:{down}", f"http://127.0.0.1:{b}"],
                                       "/echo?status=201", serial=True)
    assert s1 == s2 == 503
    assert t1.startswith(f"Error for http://127.0.0.1:{down}/echo?status=201: ")
    assert t2.startswith(f"Error for http://127.0.0.1:{down}/echo?status=201: ")


def test_without_mirroring_each_url_is_fetched_with_trace_headers_only(
        fortio_targets: tuple[int, int]) -> None:
    a, b = fortio_targets
    urls = [f"http://127.0.0.1:{a}/debug?a=b", f"http://127.0.0.1:{b}/debug"]
    theirs, ours = _side_by_side(urls, "/ignored?x=1", mirror=False, method="POST",
                                 body=b"not sent",
                                 headers=(("X-Foo", "dropped"), ("x-b3-traceid", "77"),
                                          ("x-request-id", "r1")))
    assert theirs == ours
    text = ours[1]
    assert "GET /debug?a=b HTTP/1.1" in text and "GET /debug HTTP/1.1" in text
    assert "X-B3-Traceid: 77" in text and "X-Request-Id: r1" in text
    assert "X-Foo" not in text and "not sent" not in text


def test_keep_alive_to_the_targets_survives_a_target_closing(tmp_path: Path) -> None:
    # The target closes each connection after one response (Connection: close): the fan-out
    # opens a new one for the next request instead of failing it.
    with nhbench.TestServer(echo_default_params="close=100") as a, nhbench.TestServer(
            http_fanout=f"127.0.0.1:0={a.url}") as fan:
        port = fan.http_fanout_address[1]
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            for _ in range(5):
                s.sendall(b"GET /echo?size=3 HTTP/1.1\r\nHost: x\r\n\r\n")
                assert _read_response(s).startswith(b"HTTP/1.1 200 ")
        assert fan.stats()["fanout_upstream_errors"] == 0
        assert a.stats()["requests"] == 5
