"""The test server's x-nighthawk-test-server-config in protobuf's relaxed JSON.

Nighthawk parses the header with protobuf's JsonStringToMessage, whose parser accepts more
than JSON (bare-word keys, single quotes, the escapes \\' and \\U, one trailing comma), so its
README's ``{response_body_size:20, static_delay: "0s"}`` works there; it must work here too.
What protobuf refuses stays refused, with Nighthawk's 500 "... didn't understand the
request: ...". Requests are sent with curl (when installed) and over raw sockets.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.peers import peer_env

import nhbench

# The relaxed-JSON rewrite is C in the test server: run these under the ASan+UBSan build too.
pytestmark = pytest.mark.core

NH = "x-nighthawk-test-server-config"
CURL = shutil.which("curl")


@pytest.fixture(scope="module")
def server() -> Iterator[nhbench.TestServer]:
    with nhbench.TestServer(response_body_size=2) as test_server:
        yield test_server


def raw(server: nhbench.TestServer, value: bytes) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 request with the header `value` as bytes, read to the close."""
    host, port = server.address
    request = (b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + NH.encode()
               + b": " + value + b"\r\n\r\n")
    with socket.create_connection((host, port), timeout=30) as sock:
        sock.sendall(request)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, text = line.partition(":")
        headers[name.strip().lower()] = text.strip()
    return int(lines[0].split()[1]), headers, body


ACCEPTED = [
    # Nighthawk's README, verbatim.
    ('{response_body_size:20, static_delay: "0s"}', 20, {}),
    ("{response_body_size:20}", 20, {}),
    ("{ response_body_size : 7 }", 7, {}),
    ("{'response_body_size': 5}", 5, {}),
    ("{response_body_size: '6'}", 6, {}),  # a string for an integer, as proto3 JSON allows
    ('{"response_body_size": 4,}', 4, {}),  # one trailing comma
    ("{responseBodySize:9}", 9, {}),
    ("{response_headers: [{header: {key: 'x-a', value: 'it\\'s \"q\"'}},]}", 2,
     {"x-a": "it's \"q\""}),
    ("{response_headers: [{header: {key: 'x-b', value: '\\U0041'}, append: true}]}", 2,
     {"x-b": "A"}),
    ("{static_delay: '0.001s', echo_request_headers: false,}", 2, {}),
]


@pytest.mark.parametrize(("value", "size", "headers"), ACCEPTED)
def test_relaxed_json_is_understood(server: nhbench.TestServer, value: str, size: int,
                                    headers: dict[str, str]) -> None:
    status, got, body = raw(server, value.encode())
    assert status == 200, body
    assert body == b"a" * size
    for name, text in headers.items():
        assert got[name] == text


REFUSED = [
    "{response_body_size: abc}",  # a bare word as a value
    "{response_body_size:20 x}",
    "{,}",
    "{response_body_size:4,,}",
    "{true: 1}",  # true, false and null are not bare-word keys
    "{1a: 2}",  # nor is a word starting with a digit
    "{response_body_size:3",
    "{'response_body_size: 3}",  # unterminated string
    "{response_body_size: 3}}",
    "{response_body_size: '\\q'}",  # an escape JSON does not have
    "{response_body_sise: 3}",  # an unknown field, as in Nighthawk
]


@pytest.mark.parametrize("value", REFUSED)
def test_malformed_gets_nighthawk_s_500(server: nhbench.TestServer, value: str) -> None:
    status, _, body = raw(server, value.encode())
    assert status == 500
    assert body.startswith(b"test-server didn't understand the request: ")
    assert b"\n" not in body.rstrip(b"\n")
    # The connection and the server carry on.
    status, _, body = raw(server, b"{response_body_size:1}")
    assert (status, body) == (200, b"a")


def test_control_characters_in_a_string(server: nhbench.TestServer) -> None:
    # protobuf's legacy syntax lets a raw tab through inside a string; a header value may
    # hold a tab, so this is the one control character a request can carry.
    status, got, _ = raw(server, b"{response_headers: [{header: {key: 'x-t', value: 'a\tb'}}]}")
    assert status == 200
    assert got["x-t"] == "a\tb"


@pytest.mark.peer
@pytest.mark.skipif(CURL is None, reason="curl is not installed")
def test_curl_with_the_readme_example(server: nhbench.TestServer) -> None:
    env = peer_env()
    assert CURL is not None
    # The README's command line, with this server's address.
    proc = subprocess.run(
        [CURL, "-sS", "--max-time", "30", "-H",
         f'{NH}: {{response_body_size:20, static_delay: "0s"}}', server.url],
        capture_output=True, timeout=40, check=False, env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b"a" * 20
    proc = subprocess.run(
        [CURL, "-sS", "--max-time", "30", "-o", "-", "-w", "%{http_code}", "-H",
         f"{NH}: {{response_body_size: twenty}}", server.url],
        capture_output=True, timeout=40, check=False, env=env,
    )
    assert proc.stdout.endswith(b"500")
    assert proc.stdout.startswith(b"test-server didn't understand the request: invalid JSON")


def test_config_file_in_relaxed_json(tmp_path: Path) -> None:
    # Nighthawk reads a .json config with the same loader; so does `nhbench server --config`.

    path = tmp_path / "nh.json"
    path.write_text("{response_body_size:20, static_delay: '0s',}\n")
    with nhbench.TestServer(config=str(path)) as configured:
        status, _, body = raw(configured, b"{}")
    assert (status, body) == (200, b"a" * 20)
    path.write_text("{response_body_size: twenty}\n")
    with pytest.raises(nhbench.OptionsError, match="not valid JSON: Expecting property name"):
        nhbench.TestServer(config=str(path)).start()
