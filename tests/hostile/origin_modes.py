"""One misbehaviour per mode, for the scripted origin (tests/support/scripted_origin.py) that the real
client is run against in test_client_modes.py.

A mode is a connection handler (it gets each accepted socket, TLS-wrapped for TLS modes),
the client options that provoke it (protocol, method, body), and ``expect``: what the client's
counters must say beyond the checks every mode gets (no crash, bounded time and memory, the
accounting identity). Handlers never bound themselves: endless bodies and floods last until
the client closes the connection or the origin is closed at the end of the test.
"""

from __future__ import annotations

import os
import socket
import struct
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from support import h2frames as h2
from support.accounting import get, responses
from support.scripted_origin import read_request

Handler = Callable[[socket.socket], None]
Counters = Mapping[str, int]

# Every client run lasts this long, with this drain_timeout (seconds).
DURATION = 0.3
DRAIN = 0.3


@dataclass(frozen=True)
class Mode:
    name: str
    handler: Handler
    expect: Callable[[Counters], bool]
    protocol: str = "http1"  # http1 | http2 (h2c with prior knowledge)
    tls: bool = False  # the client speaks TLS (https://)
    origin_tls: bool = True  # with tls: the origin completes the handshake before the handler
    client: dict[str, object] = field(default_factory=dict)
    xfail: str | None = None  # "defect N: what" (docs/reliability.md), while the defect is not fixed


# ---- expectations --------------------------------------------------------------------------

def all_ok(c: Counters) -> bool:
    """The control modes: the scaffolding works, every release got a 2xx."""
    return get(c, "sequencer.released") > 0 and \
        get(c, "benchmark.http_2xx") == get(c, "sequencer.released") - get(c, "upstream_rq_cancelled")


def no_success(c: Counters) -> bool:
    """Nothing the origin sent may count as a successful response."""
    return get(c, "sequencer.released") > 0 and get(c, "benchmark.http_2xx") == 0


def rejected(c: Counters) -> bool:
    """A malformed response: no success, and it failed its request (reset/protocol error)."""
    return no_success(c) and get(c, "benchmark.stream_resets") > 0


def unfinished(c: Counters) -> bool:
    """A response that never completes: no success, the requests end cancelled or timed out."""
    return no_success(c) and \
        get(c, "upstream_rq_cancelled") + get(c, "benchmark.request_timeout") > 0


def refused_at_once(c: Counters) -> bool:
    """A response over one of the client's limits (an endless or too large header block, an
    HPACK bomb, endless 1xx, a chunk size no body can have): a protocol error as soon as the
    limit is crossed, never a success, and the request does not wait for a timeout or the
    end of the run (at most one request per connection may be cut by the run's end)."""
    return no_success(c) and get(c, "upstream_cx_protocol_error") > 0 and \
        get(c, "benchmark.stream_resets") > 0 and \
        get(c, "upstream_rq_cancelled") + get(c, "benchmark.request_timeout") <= 2


def response_then_protocol_error(c: Counters) -> bool:
    """A complete response followed by bytes that belong to no request: the response counts
    (it was complete), the extra bytes are a protocol error, never a reset of the request."""
    return responses(c) > 0 and get(c, "benchmark.stream_resets") == 0 and \
        get(c, "upstream_cx_protocol_error") > 0


def bounded_retries(c: Counters) -> bool:
    """A server that refuses every request: retries and connections stay within a few per
    release (generous: the client's retry limit is single digits), none succeeds."""
    released = max(get(c, "sequencer.released"), 1)
    return no_success(c) and get(c, "upstream_rq_retry") <= 10 * released and \
        get(c, "upstream_cx_total") <= 10 * released + 10


def scheduled_exactly(rps: int) -> Callable[[Counters], bool]:
    """Open loop: every release the schedule asked for was sent or counted as dropped
    (docs/engine.md), however high the rate; the run lasts ``DURATION`` seconds."""
    def check(c: Counters) -> bool:
        return no_success(c) and \
            get(c, "sequencer.released") + get(c, "benchmark.pool_overflow") == round(rps * DURATION)
    return check


def anything(c: Counters) -> bool:
    """Either outcome is legitimate (e.g. obs-fold in an ordinary header, which RFC 9112
    lets a user agent unfold); only the common checks apply."""
    return True


# ---- HTTP/1.1 handlers ---------------------------------------------------------------------

def replies(data: bytes, close_after: bool = False) -> Handler:
    """The same bytes for every request on the connection."""
    def handle(conn: socket.socket) -> None:
        buf = b""
        while True:
            got = read_request(conn, buf)
            if got is None:
                return
            _, buf = got
            conn.sendall(data)
            if close_after:
                conn.shutdown(socket.SHUT_WR)
                return
    return handle


def _rst(conn: socket.socket) -> None:
    # SO_LINGER with a zero timeout turns the close that follows into a TCP RST.
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def reset_after(prefix: bytes, read_first: bool = True) -> Handler:
    """Send ``prefix`` (maybe nothing) of a response, then reset the connection."""
    def handle(conn: socket.socket) -> None:
        if read_first and read_request(conn, b"") is None:
            return
        if prefix:
            conn.sendall(prefix)
        _rst(conn)
    return handle


def endless(head: bytes, unit: bytes) -> Handler:
    """``head`` then ``unit`` again and again, until the client gives up or the test ends."""
    def handle(conn: socket.socket) -> None:
        if read_request(conn, b"") is None:
            return
        conn.sendall(head)
        block = unit * max(1, 16384 // len(unit))
        while True:
            conn.sendall(block)
    return handle


def silence(read: bool) -> Callable[[object], Handler]:
    def make(origin_stopped: threading.Event) -> Handler:
        def handle(conn: socket.socket) -> None:
            if read:
                read_request(conn, b"")
            origin_stopped.wait()
        return handle
    return make


def slowloris(data: bytes, interval: float = 0.1) -> Callable[[threading.Event], Handler]:
    """The response one byte every ``interval`` seconds."""
    def make(origin_stopped: threading.Event) -> Handler:
        def handle(conn: socket.socket) -> None:
            if read_request(conn, b"") is None:
                return
            for i in range(len(data)):
                conn.sendall(data[i:i + 1])
                if origin_stopped.wait(interval):
                    return
        return handle
    return make


OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


def _chunked(body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + body


def _fields(n: int, size: int = 0) -> bytes:
    """``n`` header lines, each of ``size`` bytes as the client counts them (name, value and
    4 bytes of ": " and CRLF; at least 8)."""
    value = b"v" * max(size - 8, 0)
    return b"".join(b"X%03d: " % (i % 1000) + value + b"\r\n" for i in range(n))


# A response head at the client's limit (96 KiB: the status line counts 15 bytes plus its
# reason phrase, "OK"; Content-Length: 2 counts 4 + 14 + 1), then one byte over it.
HEAD_AT_LIMIT = b"HTTP/1.1 200 OK\r\n" + _fields(24, 4000) + _fields(1, 96 * 1024 - 17 - 24 * 4000 - 19) + \
    b"Content-Length: 2\r\n\r\nok"
HEAD_OVER_LIMIT = HEAD_AT_LIMIT.replace(b"X000: ", b"X000: v", 1)


# ---- HTTP/2 handlers -----------------------------------------------------------------------

def h2_session(on_headers: Callable[[socket.socket, int], bool],
               on_connect: Callable[[socket.socket], None] | None = None,
               own_settings: bytes | None = None) -> Handler:
    """A minimal h2c server: preface, SETTINGS (ours, then ACK theirs), and for each request
    HEADERS ``on_headers(conn, stream id)``; returning False ends the connection."""
    def handle(conn: socket.socket) -> None:
        h2.serve(conn, lambda kind, _flags, stream, _payload: kind != h2.HEADERS or on_headers(conn, stream),
                 own_settings=own_settings, on_connect=on_connect)
    return handle


def answer(conn: socket.socket, stream: int) -> bool:
    conn.sendall(h2.response_headers(stream, end_stream=False)
                 + h2.frame(h2.DATA, h2.END_STREAM, stream, b"ok"))
    return True


def endless_interim(conn: socket.socket, stream: int) -> bool:
    # 100 Continue again and again on the request's stream (here 1000 times, so that the
    # session goes on to the next request), never the response.
    conn.sendall(h2.frame(h2.HEADERS, h2.END_HEADERS, stream, h2.hpack_literal_name_index(8, b"100")) * 1000)
    return True


def many_small_fields(conn: socket.socket, stream: int) -> bool:
    # 1700 small fields (accept-encoding: gzip, deflate from the static table, 1 byte each on
    # the wire, 60 as the client counts: name + value + 32): 102,000 bytes, over the limit.
    block = h2.STATUS_200 + h2.hpack_indexed(16) * 1700
    conn.sendall(h2.frame(h2.HEADERS, h2.END_HEADERS | h2.END_STREAM, stream, block))
    return True


def h2_flood(unit: bytes) -> Handler:
    """Answer every request, and between requests send ``unit`` frames without pause (a
    second thread reads the client's frames meanwhile, so the flood is never held up by the
    client's ACKs filling our receive buffer)."""
    def handle(conn: socket.socket) -> None:
        reader = h2.FrameReader(conn)
        if reader.read_exact(len(h2.PREFACE)) != h2.PREFACE:
            return
        lock = threading.Lock()
        streams: list[int] = []
        done = threading.Event()

        def read() -> None:
            while (got := reader.read_frame()) is not None:
                if got[0] == h2.HEADERS:
                    with lock:
                        streams.append(got[2])
            done.set()

        threading.Thread(target=read, daemon=True).start()
        conn.sendall(h2.settings())
        block = unit * 64
        while not done.is_set():
            with lock:
                pending, streams[:] = list(streams), []
            for stream in pending:
                answer(conn, stream)
            conn.sendall(block)
    return handle


def _hpack_bomb_block() -> bytes:
    # One 4000-byte header added to the dynamic table, then referenced 16000 times: a
    # 16 KB block that decodes to about 64 MB of header list.
    big = h2.hpack_literal(b"x-bomb", b"b" * 4000, index=True)
    return h2.STATUS_200 + big + h2.hpack_indexed(62) * 12000


def hpack_bomb(conn: socket.socket, stream: int) -> bool:
    block = _hpack_bomb_block()
    conn.sendall(h2.frame(h2.HEADERS, h2.END_HEADERS | h2.END_STREAM, stream, block))
    return True


def huge_header_block(conn: socket.socket, stream: int) -> bool:
    # 1 MiB of literal headers: HEADERS and 63 CONTINUATIONs of 16 KiB each.
    fields = b"".join(h2.hpack_literal(b"x-h%d" % i, b"v" * 16000) for i in range(64))
    parts = [fields[i:i + 16384] for i in range(0, len(fields), 16384)]
    frames = [h2.frame(h2.HEADERS, h2.END_STREAM if len(parts) > 1 else h2.END_STREAM | h2.END_HEADERS,
                       stream, h2.STATUS_200 + parts[0])]
    for i, part in enumerate(parts[1:], 1):
        frames.append(h2.frame(h2.CONTINUATION, h2.END_HEADERS if i == len(parts) - 1 else 0,
                               stream, part))
    conn.sendall(b"".join(frames))
    return True


def continuation_flood(conn: socket.socket, stream: int) -> bool:
    # HEADERS without END_HEADERS, then CONTINUATION frames that never end the block.
    conn.sendall(h2.frame(h2.HEADERS, 0, stream, h2.STATUS_200))
    unit = h2.frame(h2.CONTINUATION, 0, stream, h2.hpack_literal(b"x-c", b"c" * 1000)) * 16
    while True:
        conn.sendall(unit)


def rst_every_stream(code: int) -> Callable[[socket.socket, int], bool]:
    def on_headers(conn: socket.socket, stream: int) -> bool:
        conn.sendall(h2.rst_stream(stream, code))
        return True
    return on_headers


def goaway_zero(conn: socket.socket) -> None:
    conn.sendall(h2.goaway(0))


def goaway_beyond(conn: socket.socket, stream: int) -> bool:
    # "Everything up to 2^31-1 may have been processed", then the connection ends without
    # an answer: the client may not assume the request is safe to send again.
    conn.sendall(h2.goaway(0x7FFFFFFF))
    return False


def data_after_end_stream(conn: socket.socket, stream: int) -> bool:
    conn.sendall(h2.response_headers(stream, end_stream=True)
                 + h2.frame(h2.DATA, 0, stream, b"late"))
    return True


def window_update_zero(conn: socket.socket) -> None:
    conn.sendall(h2.window_update(0, 0))


def never_answer(conn: socket.socket, stream: int) -> bool:
    return True


# ---- TLS handlers --------------------------------------------------------------------------

def tls_garbage_after_handshake(conn: socket.socket) -> None:
    if read_request(conn, b"") is None:
        return
    # Bytes that are not a TLS record, written under the TLS layer on the same socket.
    raw = socket.socket(fileno=os.dup(conn.fileno()))
    with raw:
        raw.sendall(b"\x17\x03\x03\x00\x10" + os.urandom(16) + b"not tls at all\r\n" * 8)
    threading.Event().wait(0.2)


def tls_close_notify_mid_response(conn: socket.socket) -> None:
    if read_request(conn, b"") is None:
        return
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nhalf")
    conn.unwrap()  # close_notify, then the socket closes: the body is 96 bytes short


def plain_answer_to_client_hello(conn: socket.socket) -> None:
    # What an HTTP/1.1 server says to a ClientHello: not TLS.
    conn.recv(4096)
    conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")


# ---- the table -----------------------------------------------------------------------------

def modes(origin_stopped: threading.Event) -> list[Mode]:
    """Every mode, with handlers bound to the origin's stop event."""
    silent_read = silence(read=True)(origin_stopped)
    silent = silence(read=False)(origin_stopped)
    return [
        # Controls: the scaffolding works (a broken origin would make every other mode pass).
        Mode("h1_ok", replies(OK), all_ok),
        Mode("h2_ok", h2_session(answer), all_ok, protocol="http2"),
        Mode("tls_ok", replies(OK), all_ok, tls=True),

        # Malformed HTTP/1.1 framing.
        Mode("bad_status_line", replies(b"HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n"), rejected),
        Mode("bad_chunk_size", replies(_chunked(b"zz\r\nhello\r\n0\r\n\r\n")), rejected),
        Mode("huge_chunk_size", replies(_chunked(b"fffffffffffffffffffff\r\nhello\r\n0\r\n\r\n")),
             rejected),
        Mode("garbage_after_chunk_data", replies(_chunked(b"5\r\nhelloXX0\r\n\r\n")), rejected),
        Mode("negative_content_length",
             replies(b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n"), rejected),
        Mode("huge_content_length",
             replies(b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\nok"),
             rejected),
        Mode("duplicate_content_length",
             replies(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok"),
             anything),
        Mode("conflicting_content_length",
             replies(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 5\r\n\r\nok"),
             rejected),
        Mode("te_and_cl", replies(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
                                  b"Content-Length: 7\r\n\r\n2\r\nok\r\n0\r\n\r\n"), rejected),
        Mode("obs_fold_transfer_encoding",
             replies(b"HTTP/1.1 200 OK\r\nTransfer-Encoding:\r\n chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"),
             rejected),
        Mode("obs_fold_other_header",
             replies(b"HTTP/1.1 200 OK\r\nX-Folded: a\r\n b\r\nContent-Length: 2\r\n\r\nok"),
             anything),
        Mode("space_in_header_name",
             replies(b"HTTP/1.1 200 OK\r\nContent Length: 2\r\nContent-Length: 2\r\n\r\nok"),
             rejected),
        Mode("space_before_colon",
             replies(b"HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\nok"), rejected),
        Mode("nul_in_header", replies(b"HTTP/1.1 200 OK\r\nX-A: a\x00b\r\nContent-Length: 2\r\n\r\nok"),
             rejected),
        Mode("http09_reply", replies(b"hello, this is not HTTP/1.x\n", close_after=True), rejected),
        Mode("body_on_head", replies(OK), response_then_protocol_error,
             client={"request_method": "HEAD"}),
        Mode("body_on_204", replies(b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\nhello"),
             response_then_protocol_error),
        Mode("body_on_304", replies(b"HTTP/1.1 304 Not Modified\r\n\r\nhello"),
             response_then_protocol_error),
        Mode("two_responses_per_request", replies(OK + OK), response_then_protocol_error),
        Mode("content_length_shorter_than_body",
             replies(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA"),
             response_then_protocol_error),

        # Endless responses, bounded only by the run.
        Mode("endless_body_content_length",
             endless(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000000000000\r\n\r\n", b"x"), unfinished),
        Mode("endless_body_chunked", endless(_chunked(b""), b"400\r\n" + b"x" * 1024 + b"\r\n"),
             unfinished),
        Mode("endless_body_close_delimited", endless(b"HTTP/1.1 200 OK\r\n\r\n", b"x"), unfinished),
        Mode("endless_headers", endless(b"HTTP/1.1 200 OK\r\n", b"X-Endless: " + b"e" * 100 + b"\r\n"),
             refused_at_once),

        # The client's limits on a response (docs/reliability.md, "Client limits").
        Mode("endless_header_value", endless(b"HTTP/1.1 200 OK\r\nX-Endless: ", b"e"), refused_at_once),
        Mode("endless_status_reason", endless(b"HTTP/1.1 200 ", b"K"), refused_at_once),
        Mode("endless_blanks_before_value", endless(b"HTTP/1.1 200 OK\r\nX-Pad:", b" "),
             refused_at_once),
        Mode("endless_interim_100", endless(b"", b"HTTP/1.1 100 Continue\r\n\r\n"), refused_at_once),
        Mode("endless_interim_103",
             endless(b"", b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n"),
             refused_at_once),
        Mode("endless_trailers", endless(_chunked(b"2\r\nok\r\n0\r\n"), b"X-T: " + b"t" * 100 + b"\r\n"),
             refused_at_once),
        Mode("head_at_limit", replies(HEAD_AT_LIMIT), all_ok),
        Mode("head_over_limit", replies(HEAD_OVER_LIMIT), refused_at_once),
        Mode("fields_at_limit",
             replies(b"HTTP/1.1 200 OK\r\n" + _fields(999) + b"Content-Length: 2\r\n\r\nok"), all_ok),
        Mode("fields_over_limit",
             replies(b"HTTP/1.1 200 OK\r\n" + _fields(1000) + b"Content-Length: 2\r\n\r\nok"),
             refused_at_once),
        Mode("chunk_size_2_64_minus_1", replies(_chunked(b"ffffffffffffffff\r\nhello")), refused_at_once),
        Mode("chunk_size_2_63",
             replies(_chunked(b"8000000000000000\r\nhello")), refused_at_once),
        Mode("content_length_2_64_minus_1",
             replies(b"HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551615\r\n\r\nok"),
             refused_at_once),

        # Resets at every point (TCP RST through SO_LINGER 0).
        Mode("reset_on_accept", reset_after(b"", read_first=False), no_success),
        Mode("reset_before_any_byte", reset_after(b""), rejected),
        Mode("reset_mid_status_line", reset_after(b"HTTP/1.1 20"), rejected),
        Mode("reset_mid_headers", reset_after(b"HTTP/1.1 200 OK\r\nContent-Len"), rejected),
        Mode("reset_mid_body", reset_after(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc"),
             rejected),
        Mode("reset_after_response", reset_after(OK),
             lambda c: get(c, "benchmark.http_2xx") > 0),

        # Silence and slowness.
        Mode("silence_never_read", silent, unfinished),
        Mode("silence_after_request", silent_read, unfinished),
        Mode("slowloris_response", slowloris(OK)(origin_stopped), unfinished),
        # The open loop at a million releases per second against an origin that never
        # answers: every release but the first two is dropped, and each drop is counted.
        Mode("open_loop_1e6_against_silence", silent_read, scheduled_exactly(10**6),
             client={"open_loop": True, "rps": 10**6}),

        # HTTP/2 (h2c, frames by hand).
        Mode("h2_goaway_zero_every_connection", h2_session(never_answer, on_connect=goaway_zero),
             bounded_retries, protocol="http2"),
        Mode("h2_goaway_last_stream_beyond_sent", h2_session(goaway_beyond), no_success,
             protocol="http2"),
        Mode("h2_rst_every_stream", h2_session(rst_every_stream(h2.INTERNAL_ERROR)), rejected,
             protocol="http2"),
        Mode("h2_refuse_every_stream", h2_session(rst_every_stream(h2.REFUSED_STREAM)),
             bounded_retries, protocol="http2"),
        Mode("h2_hpack_bomb", h2_session(hpack_bomb), refused_at_once, protocol="http2"),
        Mode("h2_huge_header_block", h2_session(huge_header_block), refused_at_once, protocol="http2"),
        Mode("h2_many_small_fields", h2_session(many_small_fields), refused_at_once, protocol="http2"),
        Mode("h2_endless_interim", h2_session(endless_interim), refused_at_once, protocol="http2"),
        Mode("h2_continuation_flood", h2_session(continuation_flood), no_success, protocol="http2"),
        Mode("h2_settings_flood", h2_flood(h2.settings(header_table_size=4096)), anything,
             protocol="http2"),
        Mode("h2_ping_flood", h2_flood(h2.ping()), anything, protocol="http2"),
        Mode("h2_window_update_zero", h2_session(answer, on_connect=window_update_zero), no_success,
             protocol="http2"),
        Mode("h2_flow_control_stall",
             h2_session(never_answer, own_settings=h2.settings(initial_window_size=0)), unfinished,
             protocol="http2", client={"request_method": "POST", "request_body_size": 1000}),
        Mode("h2_silence", silent, unfinished, protocol="http2"),
        Mode("h2_data_after_end_stream", h2_session(data_after_end_stream), anything,
             protocol="http2"),

        # TLS.
        Mode("tls_garbage_after_handshake", tls_garbage_after_handshake, rejected, tls=True),
        Mode("tls_close_notify_mid_response", tls_close_notify_mid_response, rejected, tls=True),
        Mode("tls_silence_in_handshake", silent, no_success, tls=True, origin_tls=False),
        Mode("tls_plain_http_answer", plain_answer_to_client_hello, no_success, tls=True,
             origin_tls=False),
    ]
