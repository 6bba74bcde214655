"""A hostile origin against grouping by a response header (--group-by header:NAME,
docs/engine.md "Groups"; csrc/client/group.c): a scripted origin on loopback
(tests/support/scripted_origin.py) whose every response is built to blow up the per-worker
table of header values while staying valid HTTP/1.1.

* a new value with every response (10,000 distinct values);
* values over the 128 bytes kept, one of 90 KB (just under the client's head limit);
* 899 fields of the grouped name in one head (the client takes 1000) (the first one counts);
* the name and the value split one byte per read.

What must hold: the run ends normally, every response is counted in exactly one group (the
groups' requests add up to the responses), at most 64 values are kept plus "(none)" and
"(other)", the rest lands in "(other)", and the client's memory does not grow with the
number of values.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest
from support.scripted_origin import Reply, ScriptedOrigin

import nhbench

pytestmark = [pytest.mark.hostile, pytest.mark.timeout(180)]


def _response(headers: list[bytes]) -> bytes:
    return (b"HTTP/1.1 200 OK\r\n" + b"".join(h + b"\r\n" for h in headers)
            + b"Content-Length: 2\r\n\r\nok")


def _grouped(respond: Callable[[int], bytes], piece: int | None = None, gap: float = 0.0,
             **kw: object) -> nhbench.Result:
    """A run grouped by X-Served-By against an origin answering the n-th request (over all
    connections) with respond(n), written `piece` bytes at a time `gap` seconds apart when
    given."""
    # count's next() runs whole under the GIL: each request gets its own n.
    counter = itertools.count()
    kw.setdefault("rps", 200)
    if "requests" not in kw:
        kw.setdefault("duration", "0.6s")
    with ScriptedOrigin(lambda request: Reply(respond(next(counter)), piece=piece, gap=gap)) as origin:
        result = nhbench.run(origin.url, connections=4, group_by="header:x-served-by", **kw)
    assert result.groups is not None
    answered = result.counters["benchmark.http_2xx"]
    assert answered >= 20, dict(result.counters)
    assert sum(g.requests for g in result.groups.groups) == answered
    assert len(result.groups.groups) <= 66
    return result


def test_ten_thousand_distinct_values_stay_bounded() -> None:
    seen: list[nhbench.Progress] = []
    result = _grouped(lambda n: _response([b"X-Served-By: backend-%d" % n]),
                      requests=10_000, rps=5000, on_progress=seen.append)
    assert result.groups is not None
    # The live view has the result's bound: 64 values, then "(other)".
    live = [p for p in seen if p.groups]
    assert live and all(len(p.groups) <= 65 for p in live)
    assert sum(g.requests for g in live[-1].groups) <= 10_000
    names = [g.name for g in result.groups.groups]
    assert result.counters["benchmark.http_2xx"] == 10_000
    assert names[-1] == "(other)" and "(none)" not in names
    values = [g for g in result.groups.groups if g.name not in ("(none)", "(other)")]
    assert len(values) == 64
    assert all(g.requests == 1 for g in values)
    assert result.groups["(other)"].requests == 10_000 - 64


@pytest.mark.parametrize(("case", "value", "group"), [
    ("128 bytes, kept", b"v" * 128, "v" * 128),
    ("129 bytes, too long", b"v" * 129, "(other)"),
    ("90 KB", b"w" * 90_000, "(other)"),
])
def test_long_values(case: str, value: bytes, group: str) -> None:
    result = _grouped(lambda n: _response([b"X-Served-By: " + value]))
    assert result.groups is not None
    names = [g.name for g in result.groups.groups if g.requests]
    assert names == [group], (case, names)


def test_nine_hundred_fields_of_the_name_the_first_counts() -> None:
    headers = [b"X-Served-By: first"] + [b"x-served-by: n%d" % i for i in range(898)]
    result = _grouped(lambda n: _response(headers))
    assert result.groups is not None
    assert [g.name for g in result.groups.groups if g.requests] == ["first"]


def test_split_one_byte_per_read() -> None:
    # Names that share a prefix with the grouped one come first, in pieces.
    headers = [b"X-Served: no", b"X-Served-By-Other: no", b"X-Served-By:  mid  "]
    # The gap makes every byte a read of its own: back to back, the client's reads would take
    # several bytes at once and the value would mostly come whole.
    result = _grouped(lambda n: _response(headers), piece=1, gap=0.0005, rps=50,
                      duration="0.8s")
    assert result.groups is not None
    assert [g.name for g in result.groups.groups if g.requests] == ["mid"]


def test_interim_and_trailer_fields_do_not_choose() -> None:
    chunked = (b"HTTP/1.1 103 Early Hints\r\nX-Served-By: early\r\n\r\n"
               b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"2\r\nok\r\n0\r\nX-Served-By: trailer\r\n\r\n")
    result = _grouped(lambda n: chunked)
    assert result.groups is not None
    assert [g.name for g in result.groups.groups if g.requests] == ["(none)"]


def test_a_value_a_terminal_would_act_on_is_shown_escaped() -> None:
    # 0x9b is obs-text to HTTP and a one-byte CSI to some terminals: the group keeps the
    # value, the human report and the groups line show it escaped.
    from nhbench._live import format_groups

    result = _grouped(lambda n: _response([b"X-Served-By: a\x9b2Jb"]))
    assert result.groups is not None
    [group] = [g for g in result.groups.groups if g.requests]
    assert group.name == "a\x9b2Jb"
    report = result.render("human")
    line = format_groups([(group.name, group.requests, group.errors, None)])
    for text in (report, line):
        assert "\x9b" not in text and "a\\x9b2Jb" in text
