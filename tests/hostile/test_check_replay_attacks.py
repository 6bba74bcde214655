"""A hostile origin against the response replay of runs with checks (csrc/client/
session_h1.c, docs/checks.md "How it is evaluated"): with --check, a response byte-identical
to the last one parsed on the connection is counted with that one's verdict without being
parsed again. An origin that wants a wrong verdict sends responses that look the same where
a cheaper comparison would look (same length, same head, same framing) and differ in one
byte that a check reads: the body's last byte, a header value, the status digit, a byte in
the middle of a chunk; runs of identical answers between them, so that both the good and the
bad answer are replayed; and one case past the 16 KiB the copy keeps.

What must hold: every response is judged once (pass + fail = answered) and each check fails
on exactly the responses the origin made to fail it, counted from the origin's own sequence
(one connection, so the client's answers are the origin's first ones in order).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from support.scripted_origin import Reply, ScriptedOrigin

import nhbench

pytestmark = [pytest.mark.hostile, pytest.mark.timeout(120)]


def _plain(body: bytes, ctype: bytes = b"application/json", status: bytes = b"200") -> bytes:
    return (b"HTTP/1.1 " + status + b" OK\r\nContent-Type: " + ctype
            + b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body)


def _chunked(chunks: list[bytes]) -> bytes:
    encoded = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\n\r\n"
    return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + encoded


PAD = b"x" * 1000
BIG = b"y" * 20000


def _bad(i: int) -> bool:
    """Which answers are the failing variant: runs of two and three of each, and singles."""
    return i % 7 in (2, 3, 5)


CASES: list[tuple[str, bytes, bytes, str]] = [
    ("the body's last byte", _plain(PAD + b"A"), _plain(PAD + b"B"), "c=body ~ xA"),
    ("a header value's byte", _plain(b"{}"), _plain(b"{}", ctype=b"application/jsoN"),
     "c=header:content-type ~ json"),
    ("the status digit", _plain(b"ok"), _plain(b"ok", status=b"201"), "c=status in 200"),
    ("a byte inside a chunk", _chunked([b"aa", b"b-ok-b", b"cc"]),
     _chunked([b"aa", b"b-oK-b", b"cc"]), "c=body ~ -ok-"),
    ("a body past the copy's 16 KiB", _plain(BIG + b"A"), _plain(BIG + b"B"), "c=body ~ yA"),
]


def _origin(good: bytes, bad: bytes) -> tuple[ScriptedOrigin, Callable[[int], int]]:
    lock = threading.Lock()
    served = [0]

    def respond(_request: bytes) -> Reply:
        with lock:
            i = served[0]
            served[0] += 1
        return Reply(bad if _bad(i) else good)

    def bad_among_first(n: int) -> int:
        return sum(1 for i in range(n) if _bad(i))

    return ScriptedOrigin(respond), bad_among_first


@pytest.mark.parametrize(("case", "good", "bad", "check"), CASES, ids=[c[0] for c in CASES])
def test_a_one_byte_difference_gets_its_own_verdict(case: str, good: bytes, bad: bytes,
                                                   check: str) -> None:
    assert len(good) == len(bad) and good != bad
    origin, bad_among_first = _origin(good, bad)
    with origin:
        result = nhbench.run(origin.url, rps=400, duration="0.6s", connections=1,
                             check=[check, "size=body.size in 0..100000"])
    c = result.counters
    answered = c["check.c.pass"] + c["check.c.fail"]
    assert answered >= 50, (case, c)
    assert c["check.size.pass"] == answered, (case, c)
    assert c["check.c.fail"] == bad_among_first(answered), (case, c)
    # The status case's failures are 201s: a 2xx that failed a check.
    assert c["benchmark.check_failed"] == c["check.c.fail"], (case, c)
    assert c["upstream_cx_total"] == 1, (case, c)
