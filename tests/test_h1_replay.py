"""HTTP/1.1 response-head replay (docs/benchmarks.md, "Hot path").

A read that holds exactly one response whose head is byte-identical to one llhttp already
parsed on the connection is answered from that parse without running llhttp again. These
tests make a scripted origin answer with responses of the same length as the one the client
has seen before but different in one byte, so that a replay keyed on anything less than the
bytes (the length, the status line) would count them wrongly; and they check that replayed
responses still record every statistic exactly.
"""

from __future__ import annotations

import itertools
import os
import threading

import pytest
from support.accounting import assert_accounting
from support.scripted_origin import Reply, ScriptedOrigin

import nhbench

pytestmark = pytest.mark.core

CLIENT_CPU = str(sorted(os.sched_getaffinity(0))[0])

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: abc\r\n\r\nhello"


class Cycle:
    """Answers request i with replies[i % len(replies)] and counts what it sent."""

    def __init__(self, *replies: bytes) -> None:
        self.replies = replies
        self.sent: dict[bytes, int] = {r: 0 for r in replies}
        self._it = itertools.cycle(replies)
        self._lock = threading.Lock()

    def __call__(self, request: bytes) -> Reply:
        with self._lock:
            data = next(self._it)
            self.sent[data] += 1
        return Reply(data)


def run(origin: ScriptedOrigin) -> nhbench.Result:
    # A count, not a duration, ends the run: the counts below do not depend on how busy the
    # machine is. Closed loop on one connection, so each response arrives in a read of its own.
    return nhbench.run(origin.url, rps=0, duration=60, connections=1, cpus=CLIENT_CPU,
                       termination_predicate={"upstream_rq_total": 30},
                       no_default_failure_predicates=True)


def test_replayed_responses_record_every_statistic() -> None:
    # The same head with different bodies of the same length: every response after the first
    # is a replay, and each still records its sizes, its latency and its status.
    other = OK[:-5] + b"world"
    cycle = Cycle(OK, other)
    with ScriptedOrigin(cycle) as origin:
        result = run(origin)
    c = result.counters
    ok = c["benchmark.http_2xx"]
    assert ok >= 29
    assert ok == c["sequencer.released"] - c["upstream_rq_cancelled"]
    assert c["upstream_cx_total"] == 1
    assert c["upstream_cx_protocol_error"] == 0
    header = result.stat("benchmark_http_client.response_header_size")
    # Names plus values, as Envoy counts them: "Content-Length" "5" "X-A" "abc".
    assert header.count == ok and header.min == header.max == 14 + 1 + 3 + 3
    body = result.stat("benchmark_http_client.response_body_size")
    assert body.count == ok and body.min == body.max == 5
    assert result.stat("benchmark_http_client.latency_2xx").count == ok
    assert result.latency.count == ok
    assert c["upstream_cx_rx_bytes_total"] == sum(len(r) * n for r, n in cycle.sent.items())
    assert_accounting(c)


def test_a_different_status_of_the_same_length_is_not_replayed() -> None:
    failed = OK.replace(b"200 OK", b"503 OK")
    assert len(failed) == len(OK)
    cycle = Cycle(OK, OK, failed)
    with ScriptedOrigin(cycle) as origin:
        result = run(origin)
    c = result.counters
    sent_503 = cycle.sent[failed]
    assert sent_503 >= 9
    # The last request may have been cancelled at the end of the run, whatever it was.
    assert sent_503 - c["upstream_rq_cancelled"] <= c["benchmark.http_5xx"] <= sent_503
    assert c["benchmark.http_2xx"] + c["benchmark.http_5xx"] == (
        c["sequencer.released"] - c["upstream_rq_cancelled"])
    assert c["upstream_cx_total"] == 1
    assert_accounting(c)


@pytest.mark.parametrize(
    "bad",
    [
        OK.replace(b"X-A: abc", b"X A: abc"),  # a space in a header name
        OK.replace(b"X-A: abc\r\n", b"X-A:\r\n abc"),  # obs-fold
    ],
    ids=["space-in-name", "obs-fold"],
)
def test_an_invalid_head_of_the_same_length_is_not_replayed(bad: bytes) -> None:
    # Two valid responses (the second one a replay), then one that llhttp must reject or
    # frame differently: it reaches llhttp and fails its connection; the next connection
    # replays again.
    assert len(bad) == len(OK)
    cycle = Cycle(OK, OK, bad)
    with ScriptedOrigin(cycle) as origin:
        result = run(origin)
    c = result.counters
    sent_bad = cycle.sent[bad]
    assert sent_bad >= 9
    failures = c["upstream_cx_protocol_error"]
    assert sent_bad - c["upstream_rq_cancelled"] <= failures <= sent_bad
    assert c["benchmark.stream_resets"] == failures
    assert c["benchmark.http_2xx"] == c["sequencer.released"] - c["upstream_rq_cancelled"] - failures
    assert_accounting(c)


def test_a_shorter_content_length_of_the_same_total_is_not_replayed() -> None:
    # The same bytes but one: the body ends a byte early, and the byte left over is a
    # protocol error after a counted response (test_client_hardening's "extra bytes").
    short = OK.replace(b"Content-Length: 5", b"Content-Length: 4")
    cycle = Cycle(OK, OK, short)
    with ScriptedOrigin(cycle) as origin:
        result = run(origin)
    c = result.counters
    sent_short = cycle.sent[short]
    assert sent_short >= 9
    answered = c["sequencer.released"] - c["upstream_rq_cancelled"]
    assert c["benchmark.http_2xx"] == answered
    assert sent_short - c["upstream_rq_cancelled"] <= c["upstream_cx_protocol_error"] <= sent_short
    assert c["benchmark.stream_resets"] == 0
    body = result.stat("benchmark_http_client.response_body_size")
    assert body.min == 4 and body.max == 5
    assert_accounting(c)
