"""A hostile origin against the client's response checks (--check, docs/checks.md): a raw
socket server on loopback answering every request with a response built to hurt the check
evaluator (csrc/client/check.c) while staying valid HTTP/1.1.

* header names longer than the 256-byte buffer (matching a check's name in their first 256
  bytes), values longer than the 256 bytes kept for ``==``, a thousand headers of the
  checked name, the needle split one byte per read;
* a body whose JSON nests deeper than the evaluator's 64 levels, one cut at the 16 KiB
  prefix, a chunked body with a needle across chunk boundaries.

What must hold: the run ends normally, every response is judged exactly once (pass + fail of
each check = responses), and the verdicts are the right ones: a too-long name or value never
matches, deep or cut JSON is "not there", a split needle is found.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

import nhbench

pytestmark = [pytest.mark.hostile, pytest.mark.timeout(120)]


def _origin(response: bytes, piece: int | None = None) -> Iterator[int]:
    """A loopback origin answering each request head with `response` (written `piece` bytes
    at a time when given)."""
    sock = socket.create_server(("127.0.0.1", 0))

    def conn_main(conn: socket.socket) -> None:
        buf = b""
        with conn:
            while True:
                while b"\r\n\r\n" not in buf:
                    try:
                        data = conn.recv(65536)
                    except OSError:
                        return
                    if not data:
                        return
                    buf += data
                buf = buf.split(b"\r\n\r\n", 1)[1]
                try:
                    if piece is None:
                        conn.sendall(response)
                    else:
                        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                        for i in range(0, len(response), piece):
                            conn.sendall(response[i:i + piece])
                except OSError:
                    return

    def accept_main() -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            threading.Thread(target=conn_main, args=(conn,), daemon=True).start()

    threading.Thread(target=accept_main, daemon=True).start()
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()


def _response(headers: list[bytes], body: bytes, chunks: list[bytes] | None = None) -> bytes:
    head = b"HTTP/1.1 200 OK\r\n" + b"".join(h + b"\r\n" for h in headers)
    if chunks is not None:
        encoded = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\n\r\n"
        return head + b"Transfer-Encoding: chunked\r\n\r\n" + encoded
    return head + b"Content-Length: %d\r\n\r\n" % len(body) + body


def _judge(response: bytes, checks: list[str], piece: int | None = None) -> dict[str, int]:
    gen = _origin(response, piece)
    port = next(gen)
    try:
        result = nhbench.run(f"http://127.0.0.1:{port}/", rps=100, duration="0.6s",
                             connections=2, check=checks)
    finally:
        gen.close()
    c = dict(result.counters)
    answered = c["benchmark.http_2xx"] + c["benchmark.check_failed"]
    assert answered >= 20, c
    for check in checks:
        name = check.split("=", 1)[0]
        assert c[f"check.{name}.pass"] + c[f"check.{name}.fail"] == answered, (name, c)
    c["answered"] = answered
    return c


LONG = b"x" * 300


@pytest.mark.parametrize(("case", "headers", "checks", "passing"), [
    ("name over 256 bytes", [b"X-" + LONG + b": v"],
     ["a=header:X-" + "x" * 254 + " exists"], {"a": False}),
    ("value over 256 bytes", [b"X-Long: " + LONG],
     ["eq=header:x-long == " + "x" * 256, "has=header:x-long ~ xxxxxxxx"],
     {"eq": False, "has": True}),
    ("a thousand headers of the checked name", [b"X-Many: %d" % i for i in range(900)],
     ["last=header:x-many == 899", "none=header:x-many == 900"],
     {"last": True, "none": False}),
])
def test_hostile_heads(case: str, headers: list[bytes], checks: list[str],
                       passing: dict[str, bool]) -> None:
    c = _judge(_response(headers, b"ok"), checks)
    for name, ok in passing.items():
        assert c[f"check.{name}.{'pass' if ok else 'fail'}"] == c["answered"], (case, name, c)


def _deep(depth: int) -> bytes:
    return b'{"a":' * depth + b"1" + b"}" * depth


@pytest.mark.parametrize(("case", "response", "checks", "passing", "piece"), [
    ("JSON deeper than 64 levels", _response([], _deep(2000)),
     ["deep=json:/a/a/a exists"], {"deep": False}, None),
    ("JSON cut by the 16 KiB prefix", _response([], b'{"pad":"' + b"p" * 17000 + b'","k":1}'),
     ["cut=json:/k exists", "early=json:/pad exists"], {"cut": False, "early": False}, None),
    ("needle across chunk boundaries",
     _response([], b"", chunks=[b"aaaa-ne", b"ed", b"le-bbbb"]),
     ["n=body ~ -needle-", "s=body.size == 16"], {"n": True, "s": True}, None),
    ("one byte per read", _response([b"X-State: ready-to-go"], b"....the-needle...."),
     ["n=body ~ the-needle", "h=header:x-state == ready-to-go"], {"n": True, "h": True}, 1),
])
def test_hostile_bodies(case: str, response: bytes, checks: list[str],
                        passing: dict[str, bool], piece: int | None) -> None:
    c = _judge(response, checks, piece)
    for name, ok in passing.items():
        assert c[f"check.{name}.{'pass' if ok else 'fail'}"] == c["answered"], (case, name, c)

