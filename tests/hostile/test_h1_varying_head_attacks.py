"""A hostile origin against the replay of heads with varying values (csrc/client/session_h1.c,
"varying values"; docs/benchmarks.md "Hot path"): once two heads in a row differed only in a
header value, a head with the kept one's bytes everywhere else and another value in that place
is counted without llhttp. An origin that wants a wrong count puts, in that place, what llhttp
reads differently from a plain value: control bytes, DEL, obs-text, a tab, a bare CR or LF, a
fold, an empty value, white space at its end, a line break with a framing field after it, or a
value long enough to take the head past what the replay keeps.

What must hold: each run counts as llhttp alone counts. The same origin is run twice, once
plainly and once grouping by a header (an observer reads every response, so nothing is
replayed: the reference); in both, a hostile answer either fails its connection every time
(llhttp rejects it) or is counted as a 2xx every time with the header size llhttp gives it,
and both runs agree on which. Counts come from the origin's own sequence (one connection at a
time, closed loop).
"""

from __future__ import annotations

import threading

import pytest
from support.scripted_origin import Reply, ScriptedOrigin

import nhbench

pytestmark = [pytest.mark.hostile, pytest.mark.timeout(120)]


def _resp(value: bytes) -> bytes:
    return (b"HTTP/1.1 200 OK\r\nServer: s\r\nX-Request-Id: " + value
            + b"\r\nContent-Length: 2\r\n\r\nok")


GOOD = [_resp(b"a1"), _resp(b"b22")]
# Envoy-style count of the good heads: names plus values.
GOOD_SIZE = {GOOD[0]: 6 + 1 + 12 + 2 + 14 + 1, GOOD[1]: 6 + 1 + 12 + 3 + 14 + 1}

CASES: list[tuple[str, bytes]] = [
    ("control-byte", _resp(b"c\x01c")),
    ("nul", _resp(b"c\x00c")),
    ("del", _resp(b"c\x7fc")),
    ("obs-text", _resp(b"c\xffc")),
    ("tab-inside", _resp(b"c\tc")),
    ("tab-at-end", _resp(b"cc\t")),
    ("space-at-end", _resp(b"cc ")),
    ("bare-cr", _resp(b"c\rc")),
    ("bare-lf", _resp(b"c\nc")),
    ("fold", _resp(b"c\r\n c")),
    ("empty", _resp(b"")),
    ("framing-after-a-line-break", _resp(b"c\r\nContent-Length: 0")),
    ("chunked-after-a-line-break", _resp(b"c\r\nTransfer-Encoding: chunked")),
    ("long", _resp(b"v" * 3000)),
    # The same bytes further in, where the client compares several bytes at a time.
    ("control-byte-far", _resp(b"0123456789abcdefghij\x01kl")),
    ("del-far", _resp(b"0123456789abcdef\x7f")),
    ("obs-text-far", _resp(b"0123456789abcdef01234567\x80")),
    ("space-at-end-far", _resp(b"0123456789abcdef0123456 ")),
]


def _run(hostile: bytes, group_by: str | None) -> tuple[dict[str, int], int, float, list[bytes]]:
    """(counters, answered, sum of header sizes, the origin's answers in order)."""
    order: list[bytes] = []
    lock = threading.Lock()
    cycle = [GOOD[0], GOOD[1], GOOD[0], hostile, GOOD[1]]

    def respond(_request: bytes) -> Reply:
        with lock:
            data = cycle[len(order) % len(cycle)]
            order.append(data)
        return Reply(data)

    extra = {"group_by": group_by} if group_by else {}
    with ScriptedOrigin(respond) as origin:
        result = nhbench.run(origin.url, rps=0, duration=60, connections=1,
                             termination_predicate={"upstream_rq_total": 60},
                             no_default_failure_predicates=True, **extra)
    c = result.counters
    answered = c["sequencer.released"] - c["upstream_rq_cancelled"]
    header = result.stat("benchmark_http_client.response_header_size")
    return c, answered, header.mean * header.count, order


@pytest.mark.parametrize(("case", "hostile"), CASES, ids=[c[0] for c in CASES])
def test_a_hostile_value_is_counted_as_llhttp_counts_it(case: str, hostile: bytes) -> None:
    verdicts = []
    for group_by in ("header:x-none", None):  # the reference first
        c, answered, header_sum, order = _run(hostile, group_by)
        got = order[:answered]
        n_hostile = got.count(hostile)
        assert answered >= 55 and n_hostile >= 10, (case, c)
        goods = sum(GOOD_SIZE[r] for r in got if r != hostile)
        errors = c["upstream_cx_protocol_error"]
        if errors:
            # llhttp rejected it: every one of them, and nothing else.
            assert errors == n_hostile == c["benchmark.stream_resets"], (case, c)
            assert c["benchmark.http_2xx"] == answered - n_hostile, (case, c)
            assert header_sum == pytest.approx(goods, abs=0.5), (case, c)
            verdicts.append(("rejected", None))
        else:
            assert c["benchmark.http_2xx"] == answered, (case, c)
            # Every hostile answer counted with one header size, the reference's.
            size = (header_sum - goods) / n_hostile
            assert size == pytest.approx(round(size), abs=0.01), (case, c)
            verdicts.append(("accepted", round(size)))
    assert verdicts[0] == verdicts[1], case
