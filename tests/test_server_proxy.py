"""The test server's TCP proxies (``--tcp-proxy LOCAL=DEST``, Fortio's ``-P``) and https
redirectors (``--redirect-listen``, Fortio's ``-redirect-port``), with real Fortio as the
peer where it can be: ``fortio load`` through the proxy (to our echo server, whose counts must
equal Fortio's, and to ``fortio server``), ``fortio curl`` against our redirector and against
``fortio redirect`` side by side; raw sockets for the half-close and the unreachable
destination."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.peers import fortio_echo_server, require_fortio
from support.polling import wait_until
from support.sockets import free_port, listening, read_until_close, reserved_port

import nhbench
from nhbench.options import make_server_options

pytestmark = pytest.mark.core



@pytest.fixture(scope="module")
def fortio_origin() -> Iterator[int]:
    """``fortio server``'s HTTP echo, on a port of its own."""
    with fortio_echo_server() as port:
        yield port


def _fortio_load(url: str, tmp_path: Path, *args: str) -> dict[str, object]:
    out = tmp_path / "fortio.json"
    subprocess.run([require_fortio(), "load", "-json", str(out), *args, url], check=True,
                   capture_output=True, timeout=120)
    result: dict[str, object] = json.loads(out.read_text())
    return result


# ---- options ----------------------------------------------------------------------------------


def test_proxy_and_redirect_options() -> None:
    o = make_server_options({"tcp_proxy": ["127.0.0.1:0=localhost:8080",
                                           ("[::1]:0", ("127.0.0.1", 9))],
                             "redirect_listen": ":0"})
    assert o.tcp_proxy == ((("127.0.0.1", 0), ("127.0.0.1", 8080)),
                           (("::1", 0), ("127.0.0.1", 9)))
    assert o.redirect_listen == (("0.0.0.0", 0),)
    args = o.cli_args()
    assert args[args.index("--tcp-proxy") + 1] == "127.0.0.1:0=127.0.0.1:8080"
    assert args[args.index("--redirect-listen") + 1] == "0.0.0.0:0"
    for bad, why in [("127.0.0.1:0", "LOCAL=DEST"), ("127.0.0.1:0=127.0.0.1:0", "port other than 0"),
                     ("127.0.0.1:0=nope", "HOST:PORT")]:
        with pytest.raises(nhbench.OptionsError, match=why) as info:
            make_server_options({"tcp_proxy": bad})
        assert str(info.value).startswith("tcp_proxy") or "tcp_proxy" in str(info.value)
    with pytest.raises(nhbench.OptionsError, match="two TCP listeners"):
        make_server_options({"listen": "127.0.0.1:8089", "redirect_listen": "127.0.0.1:8089"})


# ---- the TCP proxy ----------------------------------------------------------------------------


def test_fortio_load_through_the_proxy_counts_agree_with_the_origin(tmp_path: Path) -> None:
    # The origin is this server's own HTTP echo: what Fortio counted, the origin saw, and the
    # proxy carried every byte of it both ways.
    with nhbench.TestServer() as origin, nhbench.TestServer(
            tcp_proxy=f"127.0.0.1:0={origin.address[0]}:{origin.address[1]}") as proxy:
        host, port = proxy.tcp_proxy_address
        result = _fortio_load(f"http://{host}:{port}/echo?size=300", tmp_path,
                              "-qps", "0", "-c", "4", "-n", "400")
        assert result["RetCodes"] == {"200": 400}
        o, p = origin.stats(), proxy.stats()
        assert o["requests"] == 400
        assert p["proxy_connections"] == o["connections_total"] == 4
        assert p["proxy_bytes_up"] == o["rx_bytes"]
        assert p["proxy_bytes_down"] == o["tx_bytes"]
        sizes = result["Sizes"]
        assert isinstance(sizes, dict)
        assert p["proxy_bytes_down"] == sizes["Sum"]
        assert p["proxy_connect_errors"] == 0
        # The proxy's own HTTP counters are untouched: it is not an HTTP listener.
        assert p["requests"] == p["connections_total"] == 0
        assert wait_until(lambda: proxy.stats()["proxy_connections_active"] == 0, timeout=5)


def test_fortio_load_through_the_proxy_to_fortio_server(fortio_origin: int,
                                                        tmp_path: Path) -> None:
    with nhbench.TestServer(tcp_proxy=f"127.0.0.1:0=127.0.0.1:{fortio_origin}") as proxy:
        host, port = proxy.tcp_proxy_address
        result = _fortio_load(f"http://{host}:{port}/echo?size=1000", tmp_path,
                              "-qps", "0", "-c", "2", "-n", "200", "-payload-size", "500")
        assert result["RetCodes"] == {"200": 200}
        p = proxy.stats()
        sizes = result["Sizes"]
        assert isinstance(sizes, dict)
        # Every response byte Fortio counted came through the proxy; every request carried
        # its 500-byte body up.
        assert p["proxy_bytes_down"] == sizes["Sum"]
        assert p["proxy_bytes_up"] > 200 * 500
        assert p["proxy_connections"] == 2


def _one_shot_origin(behaviour: str) -> tuple[socket.socket, threading.Thread, dict[str, bytes]]:
    """A raw TCP destination for one connection. ``after_eof``: reads until the client's FIN,
    then answers and closes (the answer must still reach the client: half-close).
    ``fin_first``: sends its greeting and its FIN at once, then keeps reading what the client
    still sends, and echoes it back with a prefix once the client ends."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    seen: dict[str, bytes] = {}

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.settimeout(10)
            if behaviour == "fin_first":
                conn.sendall(b"hello, then FIN")
                conn.shutdown(socket.SHUT_WR)
            data = b""
            while chunk := conn.recv(65536):
                data += chunk
            seen["got"] = data
            if behaviour == "after_eof":
                conn.sendall(b"got:" + data)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listener, thread, seen


def test_half_close_client_fin_keeps_the_answer_coming() -> None:
    listener, thread, seen = _one_shot_origin("after_eof")
    dest = listener.getsockname()
    with listener, nhbench.TestServer(tcp_proxy=f"127.0.0.1:0=127.0.0.1:{dest[1]}") as proxy:
        with socket.create_connection(proxy.tcp_proxy_address) as c:
            c.sendall(b"x" * 100_000)
            c.shutdown(socket.SHUT_WR)
            data, closed = read_until_close(c)
        thread.join(10)
        assert seen["got"] == b"x" * 100_000
        assert data == b"got:" + b"x" * 100_000 and closed
        st = proxy.stats()
        assert st["proxy_bytes_up"] == 100_000 and st["proxy_bytes_down"] == 100_004


def test_half_close_destination_fin_keeps_the_client_sending() -> None:
    listener, thread, seen = _one_shot_origin("fin_first")
    dest = listener.getsockname()
    with listener, nhbench.TestServer(tcp_proxy=f"127.0.0.1:0=127.0.0.1:{dest[1]}") as proxy:
        with socket.create_connection(proxy.tcp_proxy_address) as c:
            c.settimeout(10)
            greeting = b""
            while len(greeting) < 15:
                greeting += c.recv(100)
            assert greeting == b"hello, then FIN"
            assert c.recv(100) == b""  # the destination's FIN, passed on
            # The other direction is still open: what the client sends now arrives.
            c.sendall(b"still here")
            c.shutdown(socket.SHUT_WR)
            thread.join(10)
        assert seen["got"] == b"still here"
        assert wait_until(lambda: proxy.stats()["proxy_connections_active"] == 0, timeout=5)


def test_unreachable_destination_closes_the_client_and_is_counted() -> None:
    with reserved_port() as closed_port, nhbench.TestServer(
            tcp_proxy=f"127.0.0.1:0=127.0.0.1:{closed_port}") as proxy:
        for _ in range(3):
            with socket.create_connection(proxy.tcp_proxy_address) as c:
                data, closed = read_until_close(c, timeout=5)
                assert data == b"" and closed
        st = proxy.stats()
        assert st["proxy_connections"] == 3 and st["proxy_connect_errors"] == 3
        assert wait_until(lambda: proxy.stats()["proxy_connections_active"] == 0, timeout=5)


def test_proxy_to_ipv6_destination_with_several_workers() -> None:
    with nhbench.TestServer(listen="[::1]:0") as origin, nhbench.TestServer(
            workers=2, tcp_proxy=[("127.0.0.1:0", origin.address),
                                  ("127.0.0.1:0", origin.address)]) as proxy:
        assert len(proxy.tcp_proxy_addresses) == 2
        for local, dest in proxy.tcp_proxy_addresses:
            assert dest == ("::1", origin.address[1])
            result = nhbench.run(f"http://{local[0]}:{local[1]}/", requests=50, rps=1000,
                                 connections=2, duration=None)
            assert result.counters["benchmark.http_2xx"] == 50
        assert origin.stats()["requests"] == 100


# ---- the https redirector -------------------------------------------------------------------


def _curl(url: str) -> tuple[str, dict[str, str], str]:
    """``fortio curl``: (status line, headers by lowercase name, body)."""
    out = subprocess.run([require_fortio(), "curl", url], capture_output=True, timeout=30).stdout
    head, _, body = out.decode("latin-1").partition("\r\n\r\n")
    status, *lines = head.split("\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers, body


@pytest.fixture(scope="module")
def fortio_redirector() -> Iterator[int]:
    binary = require_fortio()
    port = free_port()
    proc = subprocess.Popen([binary, "redirect", "-redirect-port", f"127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_until(lambda: listening(port), timeout=20), "fortio redirect did not start"
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.parametrize("path", ["/", "/a/b?x=1&y=%20z", "/debug?env=dump#frag",
                                  "/%41%2f?q=%zz", "/with'quote&amp"])
def test_redirect_matches_fortio_redirect(fortio_redirector: int, path: str) -> None:
    with nhbench.TestServer(redirect_listen="127.0.0.1:0") as server:
        ours_host, ours_port = server.redirect_address
        ours = _curl(f"http://{ours_host}:{ours_port}{path}")
        theirs = _curl(f"http://127.0.0.1:{fortio_redirector}{path}")
        assert ours[0] == theirs[0] == "HTTP/1.1 303 See Other"
        # The same URL but for the port each was reached on.
        assert ours[1]["location"] == theirs[1]["location"].replace(
            f":{fortio_redirector}", f":{ours_port}")
        assert ours[1]["location"].startswith(f"https://{ours_host}:{ours_port}/")
        assert ours[1]["content-type"] == theirs[1]["content-type"]
        assert ours[2] == theirs[2].replace(f":{fortio_redirector}", f":{ours_port}")
        assert server.stats()["redirects"] == 1
        assert server.stats()["requests"] == 0


RAW_CASES = [
    # (request, what Go's net/http answers: status and Location or None)
    (b"GET /x HTTP/1.1\r\nHost: example.com:8443\r\n\r\n", 303, b"https://example.com:8443/x"),
    (b"HEAD /h HTTP/1.1\r\nHost: h\r\n\r\n", 303, b"https://h/h"),
    (b"POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc", 303, b"https://h/p"),
    (b"GET /x HTTP/1.0\r\n\r\n", 303, b"https:///x"),
    (b'GET /a"<b> HTTP/1.1\r\nHost: h\r\n\r\n', 303, b"https://h/a%22%3Cb%3E"),
    (b"GET http://o/p HTTP/1.1\r\nHost: h\r\n\r\n", 303, b"https://ohttp://o/p"),
    (b"GET /x HTTP/1.1\r\n\r\n", 400, None),
    (b"GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, None),
    (b'GET /x HTTP/1.1\r\nHost: h"\r\n\r\n', 400, None),
    (b"GET /%zz HTTP/1.1\r\nHost: h\r\n\r\n", 400, None),
]


def _raw(address: tuple[str, int], request: bytes) -> tuple[int, bytes | None, bytes]:
    with socket.create_connection(address) as c:
        c.sendall(request)
        c.shutdown(socket.SHUT_WR)
        data, _ = read_until_close(c, timeout=5)
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    location = next((line.split(b":", 1)[1].strip() for line in lines[1:]
                     if line.lower().startswith(b"location:")), None)
    return int(lines[0].split()[1]), location, body


@pytest.mark.parametrize(("request_bytes", "status", "location"), RAW_CASES)
def test_redirect_raw_requests(request_bytes: bytes, status: int,
                               location: bytes | None) -> None:
    with nhbench.TestServer(redirect_listen="127.0.0.1:0") as server:
        got_status, got_location, body = _raw(server.redirect_address, request_bytes)
        assert (got_status, got_location) == (status, location)
        if request_bytes.startswith((b"HEAD", b"POST")):
            assert body == b""


@pytest.mark.parametrize(("request_bytes", "status", "location"), RAW_CASES)
def test_fortio_redirect_agrees_on_the_raw_cases(fortio_redirector: int, request_bytes: bytes,
                                                 status: int, location: bytes | None) -> None:
    # The table above is Fortio's (Go's) behaviour, checked here against the real thing.
    got_status, got_location, _ = _raw(("127.0.0.1", fortio_redirector), request_bytes)
    assert (got_status, got_location) == (status, location)


def test_redirect_is_plain_http_on_a_tls_server() -> None:
    with nhbench.TestServer(tls_self_signed=True, redirect_listen="127.0.0.1:0") as server:
        status, location, _ = _raw(server.redirect_address,
                                   b"GET /p HTTP/1.1\r\nHost: s.example\r\n\r\n")
        assert (status, location) == (303, b"https://s.example/p")


def test_subprocess_server_reports_proxy_and_redirect_addresses() -> None:
    with nhbench.TestServer(listen="127.0.0.1:0") as origin, nhbench.TestServer(
            subprocess=True, admin="127.0.0.1:0", redirect_listen="127.0.0.1:0",
            tcp_proxy=f"127.0.0.1:0=127.0.0.1:{origin.address[1]}") as server:
        (local, dest), = server.tcp_proxy_addresses
        assert dest == origin.address and local[1] != 0
        assert server.redirect_address[1] != 0
        report = server.report()
        assert report["tcp_proxy"][0]["dest"] == {"host": "127.0.0.1", "port": origin.address[1]}
        result = nhbench.run(f"http://{local[0]}:{local[1]}/", requests=10, rps=1000,
                             duration=None)
        assert result.counters["benchmark.http_2xx"] == 10
        assert _raw(server.redirect_address, b"GET / HTTP/1.1\r\nHost: h\r\n\r\n")[0] == 303
        stats = server.stats()  # through the admin endpoint
        assert stats["proxy_connections"] >= 1 and stats["redirects"] == 1
