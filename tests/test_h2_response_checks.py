"""HTTP/2 response checks: what the client does with a malformed response.

nghttp2's HTTP messaging checks used to decide; the client now turns them off
(``nghttp2_option_set_no_http_messaging``, about 850 instructions per request) and makes its
own, cheaper checks in session_h2.c. Every malformed response must still end its request as
a stream reset with the same error text, and every well-formed one must still count by its
status: these tests pin both down against a raw h2c origin that writes each frame by hand
(tests/support/h2frames.py), so they pass on the build before the change as well as after.

Counts only. One connection; each request's stream is answered by a scripted sequence of
frames; the connection itself stays up (a malformed response is a stream error, not a
connection error).
"""

from __future__ import annotations

import socket
from collections.abc import Callable

import pytest
from support import h2frames as h2
from support.accounting import assert_accounting
from support.scripted_origin import ScriptedOrigin

import nhbench

pytestmark = pytest.mark.core

RESET_TEXT = "HTTP/2: stream reset before the response ended (PROTOCOL_ERROR)"

Reply = Callable[[int], bytes]


def lit(name: bytes, value: bytes) -> bytes:
    return h2.hpack_literal(name, value)


def status(code: bytes) -> bytes:
    # ":status" is the name of static-table entry 8.
    return h2.hpack_literal_name_index(8, code)


def headers(stream: int, block: bytes, end_stream: bool = False) -> bytes:
    return h2.frame(h2.HEADERS, h2.END_HEADERS | (h2.END_STREAM if end_stream else 0), stream, block)


def data(stream: int, payload: bytes, end_stream: bool = True) -> bytes:
    return h2.frame(h2.DATA, h2.END_STREAM if end_stream else 0, stream, payload)


def origin_for(reply: Reply) -> Callable[[socket.socket], None]:
    """A minimal h2c origin answering every request stream with ``reply(stream)``."""
    def handle(conn: socket.socket) -> None:
        def on_frame(kind: int, _flags: int, stream: int, _payload: bytes) -> None:
            if kind == h2.HEADERS:
                conn.sendall(reply(stream))

        h2.serve(conn, on_frame)
    return handle


def run_against(reply: Reply, grpc: bool = False, **kw: object) -> nhbench.Result:
    with ScriptedOrigin(handler=origin_for(reply)) as origin:
        if grpc:
            return nhbench.run(f"grpc://127.0.0.1:{origin.port}", rps=40, duration=0.25, connections=1,
                               no_default_failure_predicates=True, **kw)
        return nhbench.run(origin.url, protocol="http2", rps=40, duration=0.25, connections=1,
                           no_default_failure_predicates=True, **kw)


def assert_all_reset(result: nhbench.Result) -> None:
    c = result.counters
    assert c["sequencer.released"] >= 1
    assert c["benchmark.stream_resets"] == c["sequencer.released"] - c["upstream_rq_cancelled"] >= 1
    assert sum(c[f"benchmark.http_{k}xx"] for k in "12345") + c["benchmark.http_xxx"] == 0
    assert c["upstream_cx_total"] == 1  # a stream error: the connection carried on
    assert result.error == RESET_TEXT
    assert_accounting(c)


def assert_all_counted(result: nhbench.Result, counter: str = "benchmark.http_2xx") -> None:
    c = result.counters
    assert c["sequencer.released"] >= 1
    assert c[counter] == c["sequencer.released"] - c["upstream_rq_cancelled"] >= 1
    assert c["benchmark.stream_resets"] == 0
    assert result.error is None, result.error
    assert_accounting(c)


# Each of these breaks exactly one rule of RFC 9113 section 8 that the client checks; removing
# the check it names makes its case count a response instead of a reset.
MALFORMED: dict[str, Reply] = {
    # :status present exactly once, three digits, and not 101.
    "no-status": lambda s: headers(s, lit(b"x-a", b"b"), end_stream=True),
    "no-status-then-data": lambda s: headers(s, lit(b"x-a", b"b")) + data(s, b"ok"),
    "two-status": lambda s: headers(s, h2.STATUS_200 + h2.STATUS_200, end_stream=True),
    "status-two-digits": lambda s: headers(s, status(b"20"), end_stream=True),
    "status-four-digits": lambda s: headers(s, status(b"2000"), end_stream=True),
    "status-not-digits": lambda s: headers(s, status(b"2x0"), end_stream=True),
    "status-empty": lambda s: headers(s, status(b""), end_stream=True),
    # RFC 9110 section 15: a status under 100 is invalid.
    "status-under-100": lambda s: headers(s, status(b"050")) + data(s, b"ok"),
    # (101 is not an interim response in HTTP/2: a final response may follow and it is
    # still malformed.)
    "status-101": lambda s: headers(s, status(b"101")) + headers(s, h2.STATUS_200, end_stream=True),
    # Only :status: request pseudo-headers and unknown ones are malformed.
    "request-pseudo-header": lambda s: headers(s, h2.STATUS_200 + h2.PATH_ROOT, end_stream=True),
    "unknown-pseudo-header": lambda s: headers(s, h2.STATUS_200 + lit(b":x", b"y"), end_stream=True),
    "unknown-pseudo-header-alone": lambda s: headers(s, lit(b":x", b"200"), end_stream=True),
    # Pseudo-headers before regular fields.
    "pseudo-after-regular": lambda s: headers(s, lit(b"x-a", b"b") + h2.STATUS_200, end_stream=True),
    # content-length against the DATA received.
    "content-length-above-data": lambda s: headers(s, h2.STATUS_200 + lit(b"content-length", b"5"))
    + data(s, b"ok"),
    "content-length-below-data": lambda s: headers(s, h2.STATUS_200 + lit(b"content-length", b"1"))
    + data(s, b"ok"),
    "content-length-below-data-open": lambda s: headers(
        s, h2.STATUS_200 + lit(b"content-length", b"1")) + data(s, b"ok", end_stream=False),
    "content-length-without-data": lambda s: headers(
        s, h2.STATUS_200 + lit(b"content-length", b"5"), end_stream=True),
    "content-length-not-a-number": lambda s: headers(
        s, h2.STATUS_200 + lit(b"content-length", b"5x")) + data(s, b"ok"),
    "content-length-twice": lambda s: headers(
        s, h2.STATUS_200 + lit(b"content-length", b"2") + lit(b"content-length", b"2")) + data(s, b"ok"),
    "content-length-in-trailers-too": lambda s: headers(s, h2.STATUS_200 + lit(b"content-length", b"2"))
    + data(s, b"ok", end_stream=False) + headers(s, lit(b"content-length", b"2"), end_stream=True),
    "content-length-on-1xx": lambda s: headers(s, status(b"103") + lit(b"content-length", b"0"))
    + headers(s, h2.STATUS_200, end_stream=True),
    "204-content-length-not-zero": lambda s: headers(
        s, status(b"204") + lit(b"content-length", b"5"), end_stream=True),
    "204-with-data": lambda s: headers(s, status(b"204")) + data(s, b"x"),
    "304-with-data": lambda s: headers(s, status(b"304") + lit(b"content-length", b"1")) + data(s, b"x"),
    # Informational responses: no DATA, no END_STREAM.
    "data-on-1xx": lambda s: headers(s, status(b"103")) + data(s, b"x", end_stream=False)
    + headers(s, h2.STATUS_200, end_stream=True),
    "end-stream-on-1xx": lambda s: headers(s, status(b"100"), end_stream=True),
    "empty-data-end-stream-on-1xx": lambda s: headers(s, status(b"100")) + data(s, b""),
    # Trailers: they end the stream and carry no pseudo-headers.
    "trailers-without-end-stream": lambda s: headers(s, h2.STATUS_200) + data(s, b"ok", end_stream=False)
    + headers(s, lit(b"x-t", b"1")) + data(s, b""),
    "pseudo-header-in-trailers": lambda s: headers(s, h2.STATUS_200) + data(s, b"ok", end_stream=False)
    + headers(s, h2.STATUS_200, end_stream=True),
    # Field names are lower case.
    "upper-case-name": lambda s: headers(s, h2.STATUS_200 + lit(b"X-Upper", b"1"), end_stream=True),
    "upper-case-name-long": lambda s: headers(
        s, h2.STATUS_200 + lit(b"x-a-rather-long-field-naMe", b"1"), end_stream=True),
    # Field names are lower-case token characters; values have no control byte but HT, no
    # DEL, no white space at either end (RFC 9113 section 8.2.1). nghttp2 1.52 resets these
    # too: with no on_invalid_header callback, a field it would "ignore" is an error.
    "empty-name": lambda s: headers(s, h2.STATUS_200 + lit(b"", b"v"), end_stream=True),
    "space-in-name": lambda s: headers(s, h2.STATUS_200 + lit(b"x y", b"z"), end_stream=True),
    "at-sign-in-long-name": lambda s: headers(s, h2.STATUS_200 + lit(b"x-long-name@x", b"z"), end_stream=True),
    "non-ascii-in-name": lambda s: headers(s, h2.STATUS_200 + lit(b"x-\xe9", b"z"), end_stream=True),
    "control-byte-in-value": lambda s: headers(s, h2.STATUS_200 + lit(b"x-ab", b"c\x01"), end_stream=True),
    "control-byte-in-long-value": lambda s: headers(
        s, h2.STATUS_200 + lit(b"x-ab", b"a rather long value\nwith a newline"), end_stream=True),
    "del-in-value": lambda s: headers(s, h2.STATUS_200 + lit(b"x-ab", b"abcd\x7fefgh"), end_stream=True),
    "leading-space-in-value": lambda s: headers(s, h2.STATUS_200 + lit(b"x-ab", b" c"), end_stream=True),
    "trailing-tab-in-value": lambda s: headers(s, h2.STATUS_200 + lit(b"x-ab", b"c\t"), end_stream=True),
    "bad-content-length-value": lambda s: headers(
        s, h2.STATUS_200 + lit(b"content-length", b"2 ")) + data(s, b"ok"),
    # Connection-specific fields (RFC 9113 section 8.2.2).
    "connection": lambda s: headers(s, h2.STATUS_200 + lit(b"connection", b"close"), end_stream=True),
    "keep-alive": lambda s: headers(s, h2.STATUS_200 + lit(b"keep-alive", b"5"), end_stream=True),
    "proxy-connection": lambda s: headers(
        s, h2.STATUS_200 + lit(b"proxy-connection", b"close"), end_stream=True),
    "transfer-encoding": lambda s: headers(
        s, h2.STATUS_200 + lit(b"transfer-encoding", b"chunked")) + data(s, b"ok"),
    "upgrade": lambda s: headers(s, h2.STATUS_200 + lit(b"upgrade", b"h2c"), end_stream=True),
    "te-not-trailers": lambda s: headers(s, h2.STATUS_200 + lit(b"te", b"gzip"), end_stream=True),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_malformed_response_is_a_stream_reset(case: str) -> None:
    assert_all_reset(run_against(MALFORMED[case]))


@pytest.mark.parametrize("case", ["upper-case-name", "pseudo-after-regular", "connection",
                                  "content-length-above-data", "content-length-without-data",
                                  "data-on-1xx", "trailers-without-end-stream"])
@pytest.mark.parametrize("callbacks", ["latency-header", "grpc"])
def test_the_checks_hold_with_every_set_of_callbacks(case: str, callbacks: str) -> None:
    # Runs reading the origin's latency header, and gRPC runs, install their own nghttp2
    # callbacks (session_h2.c): the checks must be made there too.
    if callbacks == "grpc":
        result = run_against(MALFORMED[case], grpc=True)
    else:
        result = run_against(MALFORMED[case], latency_response_header_name="x-lat")
    assert_all_reset(result)


def test_head_response_with_data_is_a_stream_reset() -> None:
    def reply(s: int) -> bytes:
        return headers(s, h2.STATUS_200 + lit(b"content-length", b"2")) + data(s, b"ok")
    assert_all_reset(run_against(reply, request_method="HEAD"))


# Well-formed responses, some of them unusual: each is counted by its status.
WELL_FORMED: dict[str, tuple[Reply, str]] = {
    "interim-then-final": (lambda s: headers(s, status(b"103") + lit(b"link", b"</a>"))
                           + headers(s, status(b"100"))
                           + headers(s, h2.STATUS_200 + lit(b"content-length", b"2")) + data(s, b"ok"),
                           "benchmark.http_2xx"),
    "trailers": (lambda s: headers(s, h2.STATUS_200) + data(s, b"ok", end_stream=False)
                 + headers(s, lit(b"x-t", b"1"), end_stream=True), "benchmark.http_2xx"),
    "content-length-in-trailers": (lambda s: headers(s, h2.STATUS_200) + data(s, b"ok", end_stream=False)
                                   + headers(s, lit(b"content-length", b"2"), end_stream=True),
                                   "benchmark.http_2xx"),
    "content-length-matches-split-data": (lambda s: headers(s, h2.STATUS_200 + lit(b"content-length", b"4"))
                                          + data(s, b"ok", end_stream=False) + data(s, b"ok"),
                                          "benchmark.http_2xx"),
    "content-length-zero-no-data": (lambda s: headers(s, h2.STATUS_200 + lit(b"content-length", b"0"),
                                                      end_stream=True), "benchmark.http_2xx"),
    "te-trailers": (lambda s: headers(s, h2.STATUS_200 + lit(b"te", b"Trailers"), end_stream=True),
                    "benchmark.http_2xx"),
    "204-content-length-zero": (lambda s: headers(s, status(b"204") + lit(b"content-length", b"0"),
                                                  end_stream=True), "benchmark.http_2xx"),
    "304-content-length-without-data": (lambda s: headers(s, status(b"304") + lit(b"content-length", b"9"),
                                                          end_stream=True), "benchmark.http_3xx"),
    "404-with-body": (lambda s: headers(s, status(b"404")) + data(s, b"nope"), "benchmark.http_4xx"),
    "status-599": (lambda s: headers(s, status(b"599"), end_stream=True), "benchmark.http_5xx"),
    "unusual-but-valid-bytes": (lambda s: headers(
        s, h2.STATUS_200 + lit(b"x_a!b#c$d%e&f'g*h+i^j`k|l~m.n", b"a\tb \x80\xff\xc3\xa9")
        + lit(b"x", b"") + lit(b"x-tab", b"a\tb"), end_stream=True), "benchmark.http_2xx"),
    "empty-data-on-1xx": (lambda s: headers(s, status(b"100")) + data(s, b"", end_stream=False)
                          + headers(s, h2.STATUS_200, end_stream=True), "benchmark.http_2xx"),
}


@pytest.mark.parametrize("case", list(WELL_FORMED))
def test_a_well_formed_response_counts_by_its_status(case: str) -> None:
    reply, counter = WELL_FORMED[case]
    assert_all_counted(run_against(reply), counter)


def test_head_response_with_content_length_and_no_data_counts() -> None:
    def reply(s: int) -> bytes:
        return headers(s, h2.STATUS_200 + lit(b"content-length", b"9"), end_stream=True)
    assert_all_counted(run_against(reply, request_method="HEAD"))


def test_sizes_count_the_final_response_only() -> None:
    # The interim response's fields are not the response's; a 204's "content-length: 0" is
    # dropped as nghttp2 drops it (some servers send it, RFC 9110 forbids it).
    def reply(s: int) -> bytes:
        return (headers(s, status(b"103") + lit(b"link", b"</a>"))
                + headers(s, h2.STATUS_200 + lit(b"x-ab", b"cd")) + data(s, b"hello"))
    result = run_against(reply)
    assert_all_counted(result)
    assert result.stat("benchmark_http_client.response_header_size").max == 6
    assert result.stat("benchmark_http_client.response_body_size").max == 5
    def no_content(s: int) -> bytes:
        return headers(s, status(b"204") + lit(b"content-length", b"0") + lit(b"x-ab", b"cd"),
                       end_stream=True)
    result = run_against(no_content)
    assert_all_counted(result)
    assert result.stat("benchmark_http_client.response_header_size").max == 6

