"""A hostile origin against the client's response checks (--check, docs/checks.md): a scripted
origin on loopback (tests/support/scripted_origin.py) answering every request with a response
built to hurt the check evaluator (csrc/client/check.c) while staying valid HTTP/1.1.

* header names longer than the 256-byte buffer (matching a check's name in their first 256
  bytes), values longer than the 256 bytes kept for ``==``, a thousand headers of the
  checked name, the needle split one byte per read;
* a body whose JSON nests deeper than the evaluator's 64 levels, one cut at the 16 KiB
  prefix, a chunked body with a needle across chunk boundaries.

What must hold: the run ends normally, every response is judged exactly once (pass + fail of
each check = responses), and the verdicts are the right ones: a too-long name or value never
matches, deep or cut JSON is "not there", a split needle is found.

Over HTTP/2 (raw frames, support.h2frames): two streams answered at once with their frames
interleaved, an interim response and trailers carrying the checked header: each stream is
judged with its own state, and only its final response's fields count.
"""

from __future__ import annotations

import socket
import threading

import pytest
from support import h2frames as h2
from support.scripted_origin import Reply, ScriptedOrigin

import nhbench

pytestmark = [pytest.mark.hostile, pytest.mark.timeout(120)]


def _response(headers: list[bytes], body: bytes, chunks: list[bytes] | None = None) -> bytes:
    head = b"HTTP/1.1 200 OK\r\n" + b"".join(h + b"\r\n" for h in headers)
    if chunks is not None:
        encoded = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\n\r\n"
        return head + b"Transfer-Encoding: chunked\r\n\r\n" + encoded
    return head + b"Content-Length: %d\r\n\r\n" % len(body) + body


def _judge(response: bytes, checks: list[str], piece: int | None = None,
           gap: float = 0.0) -> dict[str, int]:
    # A response in pieces with gaps takes tens of milliseconds from a loaded host's Python
    # origin: a longer run for those keeps the count of answered responses well above 20.
    duration = "2s" if gap else "0.6s"
    with ScriptedOrigin(lambda request: Reply(response, piece=piece, gap=gap)) as origin:
        result = nhbench.run(origin.url, rps=100, duration=duration, connections=2, check=checks)
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
    # A gap between the pieces makes each a read of its own: back to back, the client's reads
    # would take several at once and the needle would mostly come whole.
    c = _judge(response, checks, piece, gap=0.0002 if piece is not None else 0.0)
    for name, ok in passing.items():
        assert c[f"check.{name}.{'pass' if ok else 'fail'}"] == c["answered"], (case, name, c)



# ---- HTTP/2: streams interleaved on one connection ------------------------------------------

class _InterleavingOrigin:
    """An h2c origin (raw frames) that answers requests two at a time, their frames
    interleaved: stream A's head carries ``x-state: ready-to-go`` and its body the needle split
    over two DATA frames; stream B's head has no x-state, an interim 103 before it carries
    one, its trailers carry one too, and its body holds the needle's two halves the other way
    round. A state shared between streams, or fields of an interim response or of trailers
    taken for the response's, would judge B as A."""

    def __init__(self) -> None:
        self.sent_a = self.sent_b = 0
        self.lock = threading.Lock()

    def handle(self, conn: socket.socket) -> None:
        pending: list[int] = []

        def on_frame(kind: int, flags: int, stream: int, payload: bytes) -> bool | None:
            if kind != h2.HEADERS or not flags & h2.END_STREAM:
                return None
            pending.append(stream)
            if len(pending) < 2:
                return None
            a, b = pending.pop(0), pending.pop(0)
            state = h2.hpack_literal(b"x-state", b"ready-to-go")
            length = h2.hpack_literal(b"content-length", b"16")
            early = h2.hpack_literal_name_index(8, b"103") + state
            out = [
                h2.frame(h2.HEADERS, h2.END_HEADERS, b, early),
                h2.frame(h2.HEADERS, h2.END_HEADERS, a, h2.STATUS_200 + state + length),
                h2.frame(h2.HEADERS, h2.END_HEADERS, b, h2.STATUS_200),
                h2.frame(h2.DATA, 0, a, b"....the-ne"),
                h2.frame(h2.DATA, 0, b, b"edle-"),
                h2.frame(h2.DATA, h2.END_STREAM, a, b"edle-."),
                h2.frame(h2.DATA, 0, b, b"is-the-ne"),
                h2.frame(h2.HEADERS, h2.END_HEADERS | h2.END_STREAM, b, state),
            ]
            try:
                conn.sendall(b"".join(out))
            except OSError:
                return False
            with self.lock:
                self.sent_a += 1
                self.sent_b += 1
            return None

        h2.serve(conn, on_frame)


def test_interleaved_h2_streams_are_judged_apart() -> None:
    origin = _InterleavingOrigin()
    with ScriptedOrigin(handler=origin.handle) as server:
        result = nhbench.run(server.url, h2c=True, rps=400, duration="0.5s", connections=1,
                             max_active_requests=8,
                             check=["n=body ~ the-needle", "h=header:x-state == ready-to-go",
                                    "size=body.size == 16"])
    c = result.counters
    with origin.lock:
        sent_a, sent_b = origin.sent_a, origin.sent_b
    answered = c["benchmark.http_2xx"] + c["benchmark.check_failed"]
    assert sent_a >= 50 and answered == sent_a + sent_b, c
    for name in ("n", "h"):
        assert c[f"check.{name}.pass"] == sent_a and c[f"check.{name}.fail"] == sent_b, (name, c)
    # B's body is 14 bytes: it fails every check, A passes every one.
    assert c["check.size.pass"] == sent_a
    assert c["benchmark.http_2xx"] == sent_a and c["benchmark.check_failed"] == sent_b
