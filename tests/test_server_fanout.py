"""The test server's HTTP fan-outs (``--http-fanout LOCAL=URL[,URL...]``, Fortio's ``-M``),
against real Fortio: ``fortio load`` through our fan-out to two of our servers (each target
sees every request), and our fan-out side by side with ``fortio server -M`` on the same
targets (``fortio server`` echoes, whose /debug page shows what each target received), in
parallel, serial and non-mirroring modes (with the ``payload``/``X``/``H`` query form that
Fortio reads there), with a target down."""

from __future__ import annotations

import json
import re
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from support.peers import fortio_echo_server, fortio_servers, require_fortio
from support.sockets import reserved_port

import nhbench

pytestmark = pytest.mark.core



@pytest.fixture(scope="module")
def fortio_targets() -> Iterator[tuple[int, int]]:
    with fortio_echo_server() as a, fortio_echo_server() as b:
        yield a, b


@contextmanager
def _fortio_multi(urls: list[str], *flags: str) -> Iterator[int]:
    """``fortio server -M "127.0.0.1:0 url..."``: the -M port."""
    with fortio_servers("-M", f"127.0.0.1:0 {' '.join(urls)}", *flags) as ports:
        yield ports["Multi on 127.0.0.1:0"]


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


def _normal(body: bytes, *, keep_length: bool = False) -> str:
    text = body.decode()
    for pattern, replacement in _VARIABLE:
        if keep_length and replacement == "":
            continue  # without mirroring both send the payload with a Content-Length
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
    with reserved_port() as down:
        urls = [f"http://127.0.0.1:{a}", f"http://127.0.0.1:{down}"]
        # The live target's (empty) echo, then Fortio's error line for the one down; Go's
        # dial error is longer ("dial tcp ...: connect: connection refused") than libuv's.
        url = f"http://127.0.0.1:{down}/echo?x=7"
        line = f'Error for {url}: Get "{url}": '
        for serial in (False, True):
            (s1, t1), (s2, t2) = _side_by_side(urls, "/echo?x=7", serial=serial)
            # Serial mode takes the first target's status (200 here), parallel the first
            # failure's (503).
            assert s1 == s2 == (200 if serial else 503)
            for text in (t1, t2):
                assert text.startswith(line), text
                assert text.endswith("connection refused\n"), text
                assert text.count("\n") == 1


def test_serial_first_target_down_is_503_with_the_rest(fortio_targets: tuple[int, int]) -> None:
    _, b = fortio_targets
    with reserved_port() as down:
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


# ---- without mirroring: the query read as Fortio's form -----------------------------------------


@pytest.fixture(scope="module")
def no_mirror_pair(fortio_targets: tuple[int, int]) -> Iterator[tuple[int, int]]:
    """``fortio server -M ... -multi-mirror-origin=false`` and ours, in parallel mode, on the
    same two echo targets: (their port, our port)."""
    a, b = fortio_targets
    urls = [f"http://127.0.0.1:{a}/debug?a=b", f"http://127.0.0.1:{b}/debug"]
    with _fortio_multi(urls, "-multi-mirror-origin=false") as theirs, nhbench.TestServer(
            http_fanout=f"127.0.0.1:0={','.join(urls)}", http_fanout_no_mirror=True) as fan:
        yield theirs, fan.http_fanout_address[1]


_FORM = "application/x-www-form-urlencoded"

# (query or path, client method, client body, client headers, what each target must get:
# its request line, its body as /debug shows it and its length; None for no request at
# all). Each case holds something the plain GET sent before does not do, so that each fails
# on it.
_FORM_CASES = [
    ("/?payload=abc", "GET", b"", (), ("POST /debug", "abc", 3)),
    ("/?payload=a%20b+c", "GET", b"", (), ("POST /debug", "a b c", 5)),
    ("/?X=PUT", "GET", b"", (), ("PUT /debug", "", 0)),
    ("/?X=DELETE&payload=x", "GET", b"", (), ("DELETE /debug", "x", 1)),
    # H is not applied without mirroring, by Fortio itself; only the payload is sent
    ("/?H=X-Foo:bar&payload=p", "GET", b"", (), ("POST /debug", "p", 1)),
    # repeated keys: the first value wins
    ("/?payload=one&payload=two&X=PATCH&X=PUT", "GET", b"", (), ("PATCH /debug", "one", 3)),
    # a pair with an invalid escape is dropped whole (the next one counts), as is one with ';'
    ("/?payload=%zz&payload=second", "GET", b"", (), ("POST /debug", "second", 6)),
    ("/?payload=a%2&X=PUT", "GET", b"", (), ("PUT /debug", "", 0)),
    ("/?payload=a;b&X=PUT", "GET", b"", (), ("PUT /debug", "", 0)),
    # an empty payload is none; the first (empty) one still wins over a later one
    ("/?payload=&payload=late&X=PUT", "GET", b"", (), ("PUT /debug", "", 0)),
    # keys are unescaped too
    ("/?pay%6coad=enc&%58=PUT", "GET", b"", (), ("PUT /debug", "enc", 3)),
    # a Content-Type in H makes it a POST (with Content-Length: 0); an empty one does not;
    # Go trims Unicode white space (U+00A0, U+3000) around its name and value
    ("/?H=Content-Type:%20text/plain", "GET", b"", (), ("POST /debug", "", 0)),
    ("/?H=%C2%A0content-TYPE%E3%80%80:%C2%A0x", "GET", b"", (), ("POST /debug", "", 0)),
    ("/?H=Content-Type:%20%C2%A0&payload=z&X=PUT", "GET", b"", (), ("PUT /debug", "z", 1)),
    # the method is sent as given (Go adds Content-Length: 0 only for POST, PUT, PATCH)
    ("/?X=put", "GET", b"", (), ("put /debug", "", 0)),
    ("/?X=OPTIONS&payload=%00%0D%0A", "GET", b"", (), ("OPTIONS /debug", r"\x00\r\n", 3)),
    # a form body gives nothing: Fortio has read the body before it reads the form
    ("/?X=PUT", "POST", b"payload=frombody&X=DELETE", (("Content-Type", _FORM),),
     ("PUT /debug", "", 0)),
    # a method Go's net/http refuses: nothing is sent, 503 with an empty body
    ("/?X=BAD%20METHOD", "GET", b"", (), None),
    ("/?X=GET%20/x%20HTTP/1.1%0D%0AX-Injected:%201%0D%0A", "GET", b"", (), None),
]


@pytest.mark.parametrize(("path", "method", "body", "headers", "expected"), _FORM_CASES,
                         ids=[c[0] + (" " + c[1] if c[1] != "GET" else "") for c in _FORM_CASES])
def test_without_mirroring_the_query_form_is_read_as_fortio_reads_it(
        no_mirror_pair: tuple[int, int], path: str, method: str, body: bytes,
        headers: tuple[tuple[str, str], ...], expected: tuple[str, str, int] | None) -> None:
    theirs, ours = no_mirror_pair
    s1, b1 = _request(theirs, path, method=method, body=body, headers=headers)
    s2, b2 = _request(ours, path, method=method, body=body, headers=headers)
    # Same status, and each target got the same request line, headers (Content-Length
    # included) and body.
    assert (s1, _normal(b1, keep_length=True)) == (s2, _normal(b2, keep_length=True))
    text = _normal(b2, keep_length=True)
    if expected is None:
        assert (s2, text) == (503, "")
        return
    assert s2 == 200
    line, payload, length = expected
    first, second = text.split("<banner>")[1:]
    for part in (first, second):
        assert f"\n{line}" in part
        assert "X-Foo" not in part and "X-Injected" not in part
        if payload:
            assert f"Content-Length: {length}\n" in part
            assert part.endswith(f"body:\n\n{payload}\n")
        elif line.split()[0] in ("POST", "PUT", "PATCH"):
            assert "Content-Length: 0\n" in part
        else:
            assert "Content-Length" not in part
    assert first.count("?a=b") == 1 and "?a=b" not in second


def test_without_mirroring_head_reads_no_body_and_a_bad_method_differs_in_serial_mode(
        fortio_targets: tuple[int, int]) -> None:
    a, b = fortio_targets
    urls = [f"http://127.0.0.1:{a}/debug", f"http://127.0.0.1:{b}/debug"]
    # X=HEAD: sent with the payload, the targets' answers read without a body.
    theirs, ours = _side_by_side(urls, "/?X=HEAD&payload=zz", mirror=False)
    assert theirs == ours == (200, "")
    # A refused method in serial mode: Fortio answers 200 with an empty body (nothing was
    # sent); nhbench 503, as in parallel mode (a difference by design, in docs/fortio.md).
    theirs, ours = _side_by_side(urls, "/?X=BAD%20M", serial=True, mirror=False)
    assert theirs == (200, "")
    assert ours == (503, "")


def test_without_mirroring_connect_to_a_url_without_a_path_goes_in_authority_form(
        fortio_targets: tuple[int, int]) -> None:
    a, b = fortio_targets
    # Go writes "CONNECT host:port HTTP/1.1" for the URL without a path (which Go's mux
    # answers 404) and "CONNECT /debug HTTP/1.1" for the other (echoed).
    theirs, ours = _side_by_side([f"http://127.0.0.1:{a}", f"http://127.0.0.1:{b}/debug"],
                                 "/?X=CONNECT", mirror=False)
    assert theirs == ours
    status, text = ours
    assert status == 404
    assert text.startswith("404 page not found\n") and "\nCONNECT /debug HTTP/1.1\n" in text


def test_without_mirroring_the_error_line_names_the_form_method(
        fortio_targets: tuple[int, int]) -> None:
    a, _ = fortio_targets
    with reserved_port() as down:
        url = f"http://127.0.0.1:{down}/x"
        (s1, t1), (s2, t2) = _side_by_side([f"http://127.0.0.1:{a}/debug", url],
                                           "/?X=PUT&payload=a", mirror=False)
    assert s1 == s2 == 503
    # Go's url.Error: "Put" for PUT.
    for text in (t1, t2):
        assert f'\nError for {url}: Put "{url}": ' in text, text
        assert text.endswith("connection refused\n")
