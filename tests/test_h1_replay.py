"""HTTP/1.1 response-head replay (docs/benchmarks.md, "Hot path").

A read that holds exactly one response whose head is byte-identical to one llhttp already
parsed on the connection is answered from that parse without running llhttp again. These
tests make a scripted origin answer with responses of the same length as the one the client
has seen before but different in one byte, so that a replay keyed on anything less than the
bytes (the length, the status line) would count them wrongly; and they check that replayed
responses still record every statistic exactly.

Heads that differ only in some header values (a request id, a date: session_h1.c, "varying
values") are replayed too: the tests below vary values in length, and change what must not be
replayed (a Content-Length, a field that appears, a name, the framing), and check every count
against the origin's own sequence; then our test server's delta header and nginx's
X-Request-Id as real origins.
"""

from __future__ import annotations

import itertools
import os
import threading

import pytest
from support.accounting import assert_accounting
from support.scripted_origin import Reply, ScriptedOrigin

import nhbench
from benchmarks.nginx_origin import NginxOrigin
from tests.support.nginx import needs_nginx_and_openssl

pytestmark = pytest.mark.core

CLIENT_CPU = str(sorted(os.sched_getaffinity(0))[0])

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: abc\r\n\r\nhello"


class Cycle:
    """Answers request i with replies[i % len(replies)] and counts what it sent."""

    def __init__(self, *replies: bytes) -> None:
        self.replies = replies
        self.sent: dict[bytes, int] = {r: 0 for r in replies}
        self.order: list[bytes] = []  # what was sent, in order
        self._it = itertools.cycle(replies)
        self._lock = threading.Lock()

    def __call__(self, request: bytes) -> Reply:
        with self._lock:
            data = next(self._it)
            self.sent[data] += 1
            self.order.append(data)
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


def resp(value: bytes, extra: bytes = b"", length: int | None = None, body: bytes = b"hello",
         framing: bytes | None = None) -> bytes:
    """A response whose X-Request-Id value is `value`, with `extra` header lines."""
    if framing is None:
        framing = b"Content-Length: %d\r\n" % (len(body) if length is None else length)
    return (b"HTTP/1.1 200 OK\r\nServer: scripted\r\nX-Request-Id: " + value + b"\r\n" + extra
            + framing + b"\r\n" + body)


def header_size(data: bytes) -> int:
    """Names plus values of a response's head, as Envoy (and the client) count them."""
    head = data.split(b"\r\n\r\n", 1)[0].split(b"\r\n")[1:]
    return sum(len(name) + len(value.strip()) for name, value in (f.split(b":", 1) for f in head))


def body_size(data: bytes) -> int:
    head, body = data.split(b"\r\n\r\n", 1)
    if b"chunked" in head:
        size = 0
        while True:
            line, body = body.split(b"\r\n", 1)
            n = int(line, 16)
            if n == 0:
                return size
            size += n
            body = body[n + 2:]
    return len(body)


def assert_sizes_of_answered(result: nhbench.Result, cycle: Cycle) -> int:
    """The header and body sizes the client recorded are those of the origin's answers, in
    the origin's order (one connection at a time, closed loop: the client's answered
    responses are the origin's first ones); returns how many were answered."""
    c = result.counters
    answered = c["sequencer.released"] - c["upstream_rq_cancelled"]
    assert answered >= 29
    got = cycle.order[:answered]
    header = result.stat("benchmark_http_client.response_header_size")
    body = result.stat("benchmark_http_client.response_body_size")
    want_h = [header_size(r) for r in got]
    want_b = [body_size(r) for r in got]
    assert header.count == body.count == answered
    assert (header.min, header.max) == (min(want_h), max(want_h))
    assert header.mean * answered == pytest.approx(sum(want_h), abs=0.5)
    assert (body.min, body.max) == (min(want_b), max(want_b))
    assert body.mean * answered == pytest.approx(sum(want_b), abs=0.5)
    assert c["benchmark.http_2xx"] == answered
    assert c["upstream_cx_protocol_error"] == 0
    # A cancelled last request's answer may or may not have been read.
    assert sum(map(len, got)) <= c["upstream_cx_rx_bytes_total"] <= sum(map(len, cycle.order))
    assert_accounting(c)
    return answered


def test_values_that_vary_in_length_are_counted_exactly() -> None:
    # Request ids of 1 to 32 bytes and a date with spaces: after the first two responses every
    # head differs from the kept one only in those values, and each is counted with its own
    # header size.
    date = b"Date: Sat, 28 Nov 2026 22:45:%02d GMT\r\n"
    cycle = Cycle(resp(b"a", date % 1), resp(b"0123456789abcdef0123456789abcdef", date % 2),
                  resp(b"bb", date % 3), resp(b"x-y_z.42", date % 4), resp(b"c", date % 5))
    with ScriptedOrigin(cycle) as origin:
        result = run(origin)
    assert_sizes_of_answered(result, cycle)
    assert result.counters["upstream_cx_total"] == 1


@pytest.mark.parametrize(
    "other",
    [
        # The Content-Length changes (the id with it, so the total length is the same): the
        # body ends elsewhere, which a replay of the kept head would miss.
        resp(b"c", length=6, body=b"hello!"),
        resp(b"ccc", length=4, body=b"hell"),
        # A field appears, or one is gone.
        resp(b"c", b"X-Extra: 1\r\n"),
        b"HTTP/1.1 200 OK\r\nServer: scripted\r\nContent-Length: 5\r\n\r\nhello",
        # A name changes (same length), and the fields change order.
        resp(b"c").replace(b"Server:", b"Sarver:"),
        b"HTTP/1.1 200 OK\r\nX-Request-Id: c\r\nServer: scripted\r\nContent-Length: 5\r\n\r\nhello",
        # Chunked instead of counted, with the same body.
        resp(b"c", framing=b"Transfer-Encoding: chunked\r\n", body=b"5\r\nhello\r\n0\r\n\r\n"),
        # Another status, with a value of another length.
        resp(b"cccc").replace(b"200 OK", b"201 OK"),
    ],
    ids=["longer-length", "shorter-length", "field-added", "field-gone", "name", "order",
         "chunked", "status"],
)
def test_heads_that_differ_in_more_than_values_are_counted_as_they_are(other: bytes) -> None:
    # Two heads that differ in the id teach the client that it varies; then one that differs
    # in something else, between runs of the two, so that each is seen after replays.
    cycle = Cycle(resp(b"a"), resp(b"bb"), resp(b"d"), other, resp(b"eeeee"))
    with ScriptedOrigin(cycle) as origin:
        result = run(origin)
    assert_sizes_of_answered(result, cycle)
    assert result.counters["upstream_cx_total"] == 1
    if b"201" in other:
        assert result.stat("benchmark_http_client.latency_2xx").count == result.counters[
            "benchmark.http_2xx"]


@pytest.mark.parametrize(
    "closing",
    [
        # The framing field's value varies: keep-alive, then close.
        (resp(b"a", b"Connection: keep-alive\r\n"), resp(b"bb", b"Connection: keep-alive\r\n"),
         resp(b"c", b"Connection: close\r\n")),
        # A field whose name differs from Connection in one byte varies, then is Connection.
        (resp(b"a", b"Xonnection: close\r\n"), resp(b"bb", b"Xonnection: kept\r\n"),
         resp(b"c", b"Connection: close\r\n")),
    ],
    ids=["connection-value", "connection-name"],
)
def test_a_close_among_varying_heads_closes(closing: tuple[bytes, bytes, bytes]) -> None:
    cycle = Cycle(*closing)
    with ScriptedOrigin(cycle) as origin:
        result = run(origin)
    answered = assert_sizes_of_answered(result, cycle)
    closes = sum(b"Connection: close" in r for r in cycle.order[:answered])
    assert closes >= 9
    # Each answered close ends its connection; the next request opens one (but after the
    # last answer, maybe none).
    assert closes <= result.counters["upstream_cx_total"] <= closes + 1


def test_the_test_server_delta_header_is_counted_like_the_server() -> None:
    # Our test server adds the time since the previous request to every response (a number of
    # varying length): every response counted, each with its own header size.
    with nhbench.TestServer(emit_previous_request_delta_in_response_header="x-delta") as server:
        result = nhbench.run(server.url, rps=0, duration=60, connections=2, cpus=CLIENT_CPU,
                             termination_predicate={"upstream_rq_total": 2000},
                             no_default_failure_predicates=True)
        served = server.stats()["requests"]
    c = result.counters
    assert c["benchmark.http_2xx"] == served - c["upstream_rq_cancelled"] >= 1990
    assert c["upstream_cx_protocol_error"] == 0 and c["upstream_cx_total"] == 2
    header = result.stat("benchmark_http_client.response_header_size")
    # The first response on the server has no delta; the others have one of a few digits.
    assert header.count == c["benchmark.http_2xx"]
    assert header.max - header.min >= len("x-delta") + 1
    assert_accounting(c)


@needs_nginx_and_openssl
def test_nginx_request_ids_are_counted_like_nginx() -> None:
    # nginx adds X-Request-Id (32 random hex digits) to every response, and a Date.
    with NginxOrigin(listeners=("h1",)) as origin:
        mark = origin.mark()
        result = nhbench.run(origin.url("h1", "/request-id"), rps=0, duration=60,
                             connections=2, cpus=CLIENT_CPU,
                             termination_predicate={"upstream_rq_total": 2000},
                             no_default_failure_predicates=True)
        lines = origin.since(mark)
    c = result.counters
    assert c["benchmark.http_2xx"] == len(lines) - c["upstream_rq_cancelled"] >= 1990
    assert {line[3] for line in lines} == {"200"}
    assert c["upstream_cx_protocol_error"] == 0 and c["upstream_cx_total"] == 2
    header = result.stat("benchmark_http_client.response_header_size")
    # Every head has the same size: the id, the date and the rest are of fixed length.
    assert header.count == c["benchmark.http_2xx"] and header.min == header.max
    body = result.stat("benchmark_http_client.response_body_size")
    assert body.min == body.max == 13
    assert_accounting(c)
