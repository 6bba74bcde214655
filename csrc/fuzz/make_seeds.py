#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (csrc/fuzz/corpus/<target>/).

    .venv/bin/python csrc/fuzz/make_seeds.py        # needs the built extension

Seeds come from real traffic where there is any: the requests below are sent to
the real test server (nhbench.TestServer, on 127.0.0.1) over raw sockets, and
each request becomes a seed of fuzz_server while the server's answer becomes a
seed of fuzz_client_h1 / fuzz_client_h2. A few responses our server never sends
(chunked bodies, close-delimited bodies, interim responses, GOAWAY and stream
resets) are added from templates below, because other servers do send them.
The option parsers' seeds are the values the docs and tests use.

Every seed is wrapped in the target's input format (see the targets' header
comments): a first byte choosing the configuration, then operations; 0x80 is
"deliver everything that is left in one read". Old seeds are removed first, so
the corpus is exactly what this script writes. File names are content hashes.
"""

from __future__ import annotations

import hashlib
import shutil
import socket
import struct
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"

OP_REST = b"\x80"  # deliver the rest of the input at once
OP_EOF = bytes([5 << 5])  # the peer closed (client targets) / half-close (server)
OP_WAIT = bytes([7 << 5])  # fuzz_server: wait for delayed responses

# ---- HTTP/2 framing (just enough to speak to the server) -------------------------

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE = 0, 1, 3, 4, 6, 7, 8
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1


def frame(ftype: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", stream) + payload


def hpack_int(value: int, prefix_bits: int, first: int = 0) -> bytes:
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out = bytearray([first | limit])
    value -= limit
    while value >= 128:
        out.append((value & 127) | 128)
        value >>= 7
    out.append(value)
    return bytes(out)


def hpack(headers: list[tuple[str, str]]) -> bytes:
    """Literal header fields without indexing, new names, no Huffman."""
    out = bytearray()
    for name, value in headers:
        n, v = name.encode(), value.encode()
        out += b"\x00" + hpack_int(len(n), 7) + n + hpack_int(len(v), 7) + v
    return bytes(out)


def h2_request(streams: list[tuple[int, list[tuple[str, str]], bytes]]) -> bytes:
    """A client's first bytes: preface, SETTINGS, then HEADERS (+DATA) per stream."""
    out = PREFACE + frame(SETTINGS, 0, 0, struct.pack(">HI", 2, 0))
    for sid, headers, body in streams:
        out += frame(HEADERS, END_HEADERS | (0 if body else END_STREAM), sid, hpack(headers))
        if body:
            out += frame(DATA, END_STREAM, sid, body)
    return out


GRPC = [("content-type", "application/grpc")]


def grpc_framed(message: bytes) -> bytes:
    """A gRPC message behind its 5-byte prefix (not compressed, big-endian length)."""
    return b"\x00" + struct.pack(">I", len(message)) + message


def h2_get(path: str, extra: list[tuple[str, str]] | None = None, method: str = "GET") -> list[tuple[str, str]]:
    return [(":method", method), (":scheme", "http"), (":authority", "127.0.0.1"), (":path", path)] + (extra or [])


# ---- talking to the real server ----------------------------------------------------


def exchange(addr: tuple[str, int], data: bytes, quiet: float = 0.3, h2_last: int = 0) -> bytes:
    """Sends data and returns what the server answers until it goes quiet, closes,
    or (HTTP/2) ends stream h2_last."""
    with socket.create_connection(addr, timeout=5) as s:
        s.sendall(data)
        s.settimeout(quiet)
        got = b""
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            if not chunk:
                break
            got += chunk
            if h2_last and h2_stream_ended(got, h2_last):
                break
        return got


def h2_stream_ended(data: bytes, sid: int) -> bool:
    pos = 0
    while pos + 9 <= len(data):
        length = int.from_bytes(data[pos : pos + 3], "big")
        ftype, flags = data[pos + 3], data[pos + 4]
        stream = int.from_bytes(data[pos + 5 : pos + 9], "big") & 0x7FFFFFFF
        if pos + 9 + length > len(data):
            return False
        if stream == sid and ftype in (DATA, HEADERS) and flags & END_STREAM:
            return True
        pos += 9 + length
    return False


# ---- the traffic -----------------------------------------------------------------------

NH = "x-nighthawk-test-server-config"


def h1(method: str, target: str, headers: list[str] | None = None, body: bytes = b"", version: str = "1.1") -> bytes:
    lines = [f"{method} {target} HTTP/{version}", "Host: 127.0.0.1"] + (headers or [])
    if body and not any(h.lower().startswith(("content-length", "transfer-encoding")) for h in headers or []):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


# (server variant, request, client_h1 variant or None). Server variants: 0
# defaults, 1 static options + Fortio defaults, 2 HTTP/1.1 only with small
# limits, 3 HTTP/2 only. Client variants: 0 GET, 1 HEAD, 2 GET with a request
# limit, 3 POST.
H1_TRAFFIC: list[tuple[int, bytes, int | None]] = [
    (0, h1("GET", "/"), 0),
    (0, h1("GET", "/echo?size=100&status=201"), 0),
    (0, h1("GET", "/?status=503:50,200:50&delay=1ms&size=10:50,20:50"), 0),
    (0, h1("GET", "/?gzip=true&size=2000", ["Accept-Encoding: gzip"]), 0),
    (0, h1("GET", "/?header=x-a:b&header=x-c:%20d&close=true"), 0),
    (0, h1("GET", "/?status=404"), 2),
    (0, h1("GET", "/?stall=1ms&size=0"), 0),
    (1, h1("GET", "/"), 0),
    (1, h1("GET", "/?size=5000"), 0),
    (0, h1("GET", "/", [NH + ': {"response_body_size": 20, "response_headers": '
                        '[{"header": {"key": "x-nh", "value": "1"}}]}']), 0),
    (0, h1("GET", "/", [NH + ': {"static_delay": "0.001s", "echo_request_headers": true}']), 0),
    (0, h1("GET", "/", [NH + ': {"emit_previous_request_delta_in_response_header": "x-delta"}']), 0),
    (0, h1("GET", "/", [NH + ': {"concurrency_based_linear_delay": {"minimal_delay": "0.001s", '
                        '"concurrency_delay_factor": "0.0001s"}}']), 0),
    (0, h1("GET", "/", [NH + ': {"response_body_size": "x"}']), 0),  # a 500 with the reason
    (0, h1("GET", "/", [NH + ': {response_body_size:20, static_delay: "0s"}']), 0),  # relaxed JSON
    (0, h1("GET", "/", [NH + ": {'response_body_size':3,}"]), 0),
    (0, h1("GET", "/", [NH + ': {"response_body_size": 4194304}']) + h1("GET", "/"), None),  # partial writes
    (0, h1("GET", "/?delay=1ms:50,2ms:50&size=200000") + h1("GET", "/?delay=1ms"), None),
    (0, h1("HEAD", "/"), 1),
    (0, h1("HEAD", "/?size=100"), 1),
    (0, h1("POST", "/", body=b"0123456789"), 3),
    (0, h1("POST", "/echo", ["Transfer-Encoding: chunked"], b"5\r\nhello\r\n0\r\n\r\n"), 3),
    (0, h1("POST", "/", ["Expect: 100-continue", "Content-Length: 4"], b"abcd"), 3),
    (0, h1("GET", "/a") + h1("GET", "/b?size=3") + h1("HEAD", "/c"), 0),
    (0, h1("GET", "/", ["Connection: Upgrade, HTTP2-Settings", "Upgrade: h2c", "HTTP2-Settings: AAMAAABkAAQAAP__"]), None),
    (0, h1("GET", "/debug?x=1"), 0),
    (0, h1("GET", "/", version="1.0"), 0),
    (0, h1("GET", "/", ["Connection: close"]), 0),
    (0, b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Header\r\n\r\n", 0),  # 400
    (2, h1("GET", "/", ["X-Big: " + "b" * 1100]), 0),  # 431
    (2, h1("POST", "/", body=b"z" * 5000), 3),  # 413
    (2, h1("GET", "/", version="2.0"), 0),  # 505
    (3, h1("GET", "/"), 0),  # HTTP/1.1 on an h2-only server
]

H2_TRAFFIC: list[tuple[int, bytes, int, int | None]] = [
    # (server variant, bytes, last stream, client_h2 variant or None). Client
    # variants: 0 four streams, 1 POST on 2 streams/conn, 2 request limit, 3 one stream.
    (0, h2_request([(1, h2_get("/"), b"")]), 1, 3),
    (0, h2_request([(1, h2_get("/?size=50&status=201"), b"")]), 1, 3),
    (0, h2_request([(1, h2_get("/", [(NH, '{"response_body_size": 7}')]), b"")]), 1, 3),
    (0, h2_request([(sid, h2_get(f"/?size={sid}"), b"") for sid in (1, 3, 5, 7)]), 7, 0),
    (0, h2_request([(sid, h2_get("/"), b"") for sid in (1, 3, 5)]), 5, 2),
    (0, h2_request([(1, h2_get("/", method="POST"), b"a" * 100), (3, h2_get("/", method="POST"), b"a" * 100)]), 3, 1),
    (1, h2_request([(1, h2_get("/?gzip=true", [("accept-encoding", "gzip")]), b"")]), 1, 3),
    (3, h2_request([(1, h2_get("/"), b""), (3, h2_get("/"), b""), (5, h2_get("/"), b"")]), 5, None),
    (0, h2_request([(1, h2_get("/?delay=1ms"), b"")]) + frame(PING, 0, 0, b"12345678"), 1, 3),
    # gRPC calls (server_grpc.c): a ping with a payload and a deadline, a health check, an
    # unknown method with two messages, a compressed flag, and a call with no message.
    (0, h2_request([(1, h2_get("/fgrpc.PingServer/Ping", GRPC + [("grpc-timeout", "1S")], "POST"),
                     grpc_framed(b"\x08\x07\x1a\x05hello\x20\x01"))]), 1, None),
    (0, h2_request([(1, h2_get("/grpc.health.v1.Health/Check", GRPC, "POST"), grpc_framed(b"\x0a\x04ping")),
                    (3, h2_get("/a.B/C", GRPC, "POST"), grpc_framed(b"") * 2)]), 3, None),
    (0, h2_request([(1, h2_get("/fgrpc.PingServer/Ping", GRPC + [("grpc-encoding", "gzip")], "POST"),
                     b"\x01" + grpc_framed(b"\x08\x01")[1:]),
                    (3, h2_get("/fgrpc.PingServer/Ping", GRPC, "POST"), b"")]), 3, None),
]


def h2_server_extras() -> list[tuple[int, bytes]]:
    """Client behaviour the server must survive: resets, window updates, GOAWAY."""
    base = h2_request([(1, h2_get("/?delay=10ms"), b"")])
    return [
        (0, base + frame(RST_STREAM, 0, 1, struct.pack(">I", 8))),
        (0, base + frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 65535))),
        (0, base + frame(GOAWAY, 0, 0, struct.pack(">II", 1, 0))),
        (0, PREFACE + frame(SETTINGS, 0, 0) + frame(HEADERS, END_HEADERS, 1, hpack(h2_get("/", method="POST")))
         + frame(DATA, 0, 1, b"abc") + frame(DATA, END_STREAM, 1, b"def")),
    ]


# Responses other servers send and ours does not (templates, not captures).
H1_TEMPLATES: list[tuple[int, list[bytes]]] = [
    (0, [OP_REST + b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nX-Trailer: 1\r\n\r\n"]),
    (0, [OP_REST[:0] + bytes([0, 20]) + b"HTTP/1.1 200 OK\r\n\r\n" + b"body", OP_EOF]),  # close-delimited
    (0, [OP_REST + b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"]),
    (0, [OP_REST + b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n"]),
    (0, [OP_REST + b"HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n"]),
    (0, [OP_REST + b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n"]),  # unasked-for bytes
    (0, [OP_REST + b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"]),
    (2, [OP_REST + b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx"]),
    # Variant 2 groups by x-served-by (group.c): values, a long one, one in an interim
    # response and one in the trailers; variant 3 groups by request kind.
    (2, [OP_REST + b"HTTP/1.1 200 OK\r\nX-Served-By: a\r\nx-served-by: b\r\nContent-Length: 0\r\n\r\n"
         b"HTTP/1.1 200 OK\r\nX-SERVED-BY:  " + b"v" * 200 + b"  \r\nContent-Length: 0\r\n\r\n"]),
    (2, [OP_REST + b"HTTP/1.1 103 Early Hints\r\nX-Served-By: early\r\n\r\nHTTP/1.1 200 OK\r\n"
         b"Transfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\nX-Served-By: late\r\n\r\n"]),
    (3, [OP_REST + b"HTTP/1.1 200 OK\r\nX-Served-By: a\r\nContent-Length: 0\r\n\r\n"]),
]


def varying(value: bytes, extra: bytes = b"", length: bytes = b"2", body: bytes = b"ok",
            then: bytes = b"") -> bytes:
    """A response whose X-Request-Id value varies (session_h1.c, "varying values"), in a read
    of its own (with `then`, more bytes in the same read)."""
    resp = (b"HTTP/1.1 200 OK\r\nServer: s\r\nX-Request-Id: " + value + b"\r\n" + extra
            + b"Content-Length: " + length + b"\r\n\r\n" + body + then)
    return bytes([0, len(resp)]) + resp


# Heads that differ only in a value, one response per read on one connection: the first is
# kept, the second teaches the replay which value varies, the rest are replayed from it or
# (a value with a control byte, a different Content-Length, a field more) go through llhttp.
H1_TEMPLATES += [
    (0, [varying(b"a1"), varying(b"b22"), varying(b"c"), varying(b"0123456789abcdef0123456789abcdef"),
         varying(b"d d"), varying(b"e\x01"), varying(b"f", length=b"3", body=b"ok!"), varying(b"g"),
         varying(b"h", extra=b"X-More: 1\r\n"), varying(b"i"), varying(b"j")]),
    (1, [varying(b"1", body=b""), varying(b"22", body=b""), varying(b"333", body=b""),
         varying(b"4", length=b"9", body=b"")]),
    (0, [varying(b"a"), varying(b"b", extra=b"Date: 1\r\n"), varying(b"c", extra=b"Date: 22\r\n"),
         varying(b"d", extra=b"Date: 22\r\n", then=b"HTTP/1.1 200 OK\r\n"), OP_EOF]),
]


def h2_client_templates() -> list[tuple[int, bytes]]:
    settings = frame(SETTINGS, 0, 0, struct.pack(">HI", 3, 1)) + frame(SETTINGS, ACK, 0)
    hdrs = frame(HEADERS, END_HEADERS, 1, hpack([(":status", "200"), ("content-length", "2")]))
    return [
        (0, settings + hdrs + frame(DATA, END_STREAM, 1, b"ok") + frame(RST_STREAM, 0, 3, struct.pack(">I", 7))),
        (0, settings + frame(GOAWAY, 0, 0, struct.pack(">II", 1, 0)) + hdrs + frame(DATA, END_STREAM, 1, b"ok")),
        (3, frame(SETTINGS, 0, 0) + frame(HEADERS, END_HEADERS, 1, hpack([(":status", "100")]))
         + frame(HEADERS, END_HEADERS | END_STREAM, 1, hpack([(":status", "204")]))),
        (3, frame(SETTINGS, 0, 0) + frame(RST_STREAM, 0, 1, struct.pack(">I", 2))),
        (3, frame(SETTINGS, 0, 0) + frame(GOAWAY, 0, 0, struct.pack(">II", 0, 2))),
    ]


OPTION_SEEDS: list[tuple[int, str]] = (
    [(0, d) for d in ["1.5s", "150us", "1m30s", "2", "0.5s", "10ms", "1h", "3ns", "1.25", "-1s", "1e3s"]]
    + [(1, j) for j in [
        '{"response_body_size": 10}',
        '{"response_headers": [{"header": {"key": "x-a", "value": "b"}, "append": true}]}',
        '{"v3_response_headers": [{"header": {"key": "x-b", "value": "c"}}]}',
        '{"echo_request_headers": true, "static_delay": "0.5s"}',
        '{"concurrency_based_linear_delay": {"minimal_delay": "0.01s", "concurrency_delay_factor": "0.001s"}}',
        '{"emit_previous_request_delta_in_response_header": "x-delta"}',
        '{"responseBodySize": 4194304, "staticDelay": "1s"}',
        '{"response_body_size": -1}',
        '{"response_headers": [{"header": {"key": "content-length", "value": "1"}}]}',
        '{} ',
        '[1,2]',
        # protobuf's relaxed syntax (server_options.c, relax_json), as Nighthawk's README writes it
        '{response_body_size:20, static_delay: "0s"}',
        "{'response_body_size':5, response_headers: [{header: {key: 'x-a', value: 'b\\'\"c'}},],}",
        '{static_delay: "0.5s\\U0041", echo_request_headers: true,}',
        '{response_body_size:4,,}',
        "{response_body_size: abc, 'x",
    ]]
    + [(2, q) for q in [
        "delay=10ms:50,0:50&status=200:90,503:10",
        "size=1000&gzip=true",
        "close=true&header=x-a:b&header=x-b:%20c",
        "status=404:25,503:25&size=10:10,20:10,30:10",
        "stall=1s&delay=2s",
        "close=5&gzip=50",
        "header=content-type:text%2Fplain",
        "size=99999999999999999999",
        "a=b&&=c&status=",
    ]]
    + [(3, t) for t in ["x-nighthawk", "a b", "x\tv", "\x7f"]]
)


def grpc_seeds() -> list[bytes]:
    """fuzz_server_grpc: a byte choosing the call (method, grpc-encoding, grpc-timeout, the
    server's delay; see the target's header comment), then the request body."""
    ping = b"\x08\x07\x10\x01\x1a\x05hello\x20\x80\x94\xeb\xdc\x03"
    unknown = b"\x48\x96\x01\x51" + b"\x01" * 8 + b"\x5a\x03abc\x63\x08\x01\x64\x75" + b"\x02" * 4
    return [
        b"\x00" + grpc_framed(b""),
        b"\x00" + grpc_framed(b"\x0a\x04ping"),
        b"\x00" + grpc_framed(b"\x0a\x09ping_down"),
        b"\x01" + grpc_framed(ping),
        b"\x02" + grpc_framed(unknown + ping),
        b"\x03" + grpc_framed(b"\x08\x01"),
        b"\x01" + grpc_framed(ping) + grpc_framed(b""),
        b"\x05" + b"\x01" + grpc_framed(ping)[1:],
        b"\x09\x0a" + grpc_framed(ping),
        b"\x11" + b"100m" + grpc_framed(ping),
        b"\x21" + grpc_framed(ping),
        b"\x41" + grpc_framed(b"\x20\x01"),
        b"\x01" + b"\x00\x00\x40\x00\x01",
    ]


FANOUT_FORMS = [
    "/?payload=abc", "/?payload=a%20b+c", "/?X=PUT", "/?X=DELETE&payload=x", "/?H=X-Foo:bar",
    "/?payload=one&payload=two", "/?payload=%zz&payload=second", "/?payload=a%2", "/?payload=",
    "/?payload=a;b&X=PUT", "/?pay%6coad=enc&%58=PATCH", "/?H=Content-Type:%20text/plain",
    "/?H=%C2%A0content-TYPE%E3%80%80:%C2%A0x&H=Content-Type:%E2%80%8A",
    "/?X=GET%20/x%20HTTP/1.1%0D%0AX-Injected:%201", "/?X=%00&payload=%00%0D%0A",
    "http://h/p?X=HEAD&payload=zz", "/no-query", "/?&&=&X", "/?X=CONNECT",
]


def fanout_seeds() -> list[bytes]:
    """fuzz_server_fanout: a byte saying the request was a HEAD (bit 0) or that the input is
    a request URI read as a form (bit 1), a byte placing the split between two reads, then a
    target's response or the URI (see the target's header comment)."""
    return [b"\x02\x00" + uri.encode() for uri in FANOUT_FORMS] + [
        b"\x00\x80HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n",
        b"\x00\x10HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
        b"\x00\xffHTTP/1.0 503 Service Unavailable\r\n\r\nuntil EOF",
        b"\x01\x40HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n",
        b"\x00\x30HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
        b"\x00\x80HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nA\nHTTP/1.1 200 OK\r\n\r\n",
        b"\x00\x00HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
    ]


def capsule_seeds() -> list[bytes]:
    """fuzz_client_capsules: the CONNECT stream's DATA of a CONNECT-UDP proxy on HTTP/2, in
    pieces (a header byte, bit 0: drain the queue after it; a length byte; the bytes):
    DATAGRAM capsules of context id 0 (one cut across pieces), unknown types, another
    context id, an empty payload, a 4-byte length, and a capsule left open at the end."""
    def piece(data: bytes, drain: bool = True) -> bytes:
        return bytes([1 if drain else 0, len(data)]) + data

    dgram = b"\x00\x41\x00\x00" + bytes(63)  # type 0, length 64 (2 bytes), context 0
    return [
        piece(dgram + b"\x00\x03\x00xy"),
        piece(dgram[:3], False) + piece(dgram[3:40], False) + piece(dgram[40:]),
        piece(b"\x2a\x03abc\x00\x03\x01xy\x00\x01\x00\x17\x00"),
        piece(b"\x00\x80\x00\x00\x05\x00abcd"),
        piece(b"\x00\x46\x00\x00" + bytes(40)),  # a 1536-byte value: dropped
        piece(b"\x00\x02\x00a" * 60, False) + piece(b"\x00\x02\x00b"),
        piece(b"\x00\x0a\x00abc"),  # open at the end
    ]


def udp_tunnel_seeds() -> list[bytes]:
    """fuzz_client_udp_tunnel: what a CONNECT-UDP proxy sends (pieces: a header byte, where
    the piece goes and FIN; a length byte; the bytes): its control stream's SETTINGS, its
    answer as a QPACK-encoded HEADERS frame (200 from the static table, 403 as a literal
    with a static name, an interim 100 first), capsules in DATA frames, and datagrams for
    the CONNECT stream (context 0), another stream, another context, and cut short."""
    def piece(where: int, data: bytes, fin: bool = False) -> bytes:
        return bytes([where | (4 if fin else 0), len(data)]) + data

    settings = piece(1, b"\x00\x04\x04\x08\x01\x33\x01")
    ok = piece(0, b"\x01\x03\x00\x00\xd9")
    refused = piece(0, b"\x01\x08\x00\x00\x5f\x09\x03403", fin=True)
    interim = piece(0, b"\x01\x04\x00\x00\xff\x00")  # :status 100, static index 63
    capsules = piece(0, b"\x00\x0a\x2a\x03abc\x00\x03\x00xy")
    datagrams = (piece(2, b"\x00\x00" + b"\xc0" + bytes(40)) + piece(2, b"\x01\x00zz")
                 + piece(2, b"\x00\x01zz") + piece(2, b"\x00"))
    return [
        settings + ok + datagrams,
        settings + ok + capsules + datagrams + piece(0, b"", fin=True),
        settings + refused,
        settings + interim + ok,
        ok + piece(0, b"\x04\x00"),  # SETTINGS on the request stream
        piece(1, b"\x00\x07\x00") + ok,  # control stream not starting with SETTINGS
        settings + piece(0, b"\x00\x02ab") + ok,  # DATA before the answer
        settings + piece(0, b"\x01\x04\xff\xff\xff\xff"),  # not QPACK
        settings + ok + piece(0, b"\x00\x02\x2a\x40", fin=True),  # a capsule cut off
        settings + piece(3, b"\x02") + piece(3, b"\x3f\xe1\x1f") + ok,  # QPACK encoder
    ]


def h3_tunnel_seeds() -> list[bytes]:
    """fuzz_client_h3_tunnel: what an HTTP/3 proxy sends for a classic CONNECT (pieces as
    udp_tunnel_seeds', but 2 is another unidirectional stream and 3 the CONNECT stream
    again): its SETTINGS, its answer (200, 403, an interim 100 first), then the origin's
    bytes in DATA frames, whole or split across pieces, and a few broken ones."""
    def piece(where: int, data: bytes, fin: bool = False) -> bytes:
        return bytes([where | (4 if fin else 0), len(data)]) + data

    settings = piece(1, b"\x00\x04\x00")
    ok = piece(0, b"\x01\x03\x00\x00\xd9")
    refused = piece(0, b"\x01\x08\x00\x00\x5f\x09\x03403", fin=True)
    interim = piece(0, b"\x01\x04\x00\x00\xff\x00")
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    data = piece(0, b"\x00" + bytes([len(answer)]) + answer)
    split = piece(0, b"\x00" + bytes([len(answer)]) + answer[:10]) + piece(3, answer[10:])
    return [
        settings + ok + data,
        settings + ok + split + piece(0, b"", fin=True),
        ok + data + piece(0, b"\x00\x00", fin=True),
        settings + refused,
        settings + interim + ok + data,
        settings + piece(0, b"\x00\x02ab") + ok,  # DATA before the answer
        settings + piece(0, b"\x01\x04\xff\xff\xff\xff"),  # not QPACK
        settings + ok + piece(0, b"\x04\x00"),  # SETTINGS on the request stream
        settings + ok + piece(0, b"\x21\x03abc") + data,  # a reserved frame type, skipped
        settings + ok + piece(0, b"\x00\x05ab", fin=True),  # DATA cut off by FIN
        settings + piece(2, b"\x02\x3f\xe1\x1f") + ok + data,
    ]


def tunnel_seeds() -> list[bytes]:
    """fuzz_client_tunnel: proxies' answers to CONNECT (the first byte is the read size).
    tinyproxy's and squid's own answers as they send them, a refusal with a body, interim
    answers first, one with the origin's first bytes behind it, and a few broken ones."""
    answers = [
        b"HTTP/1.0 200 Connection established\r\nProxy-agent: tinyproxy/1.11.1\r\n\r\n",
        b"HTTP/1.1 200 Connection established\r\n\r\n",
        b"HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic "
        b"realm=\"proxy\"\r\nContent-Length: 4\r\n\r\ndeny",
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
        b"HTTP/1.1 200 OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX-A: 1\r\n\r\n\x16\x03\x03\x00\x10",
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"HTTP/1.1 2000 OK\r\n\r\n",
        b"SMTP READY\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n X-Folded: yes\r\n\r\n",
    ]
    seeds = []
    for answer in answers:
        seeds += [b"\x00" + answer, b"\x01" + answer, b"\x07" + answer]
    return seeds


def quic_varint(value: int) -> bytes:
    """RFC 9000 section 16."""
    if value < 1 << 6:
        return bytes([value])
    if value < 1 << 14:
        return struct.pack(">H", value | 0x4000)
    if value < 1 << 30:
        return struct.pack(">I", value | 0x80000000)
    return struct.pack(">Q", value | 0xC000000000000000)


def qpack_int(value: int, prefix_bits: int, first: int = 0) -> bytes:
    """RFC 7541 section 5.1 integers, as QPACK uses them."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out = bytearray([first | limit])
    value -= limit
    while value >= 128:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def qpack(headers: list[tuple[str, str]]) -> bytes:
    """A field section of literal names and values (no dynamic table, no Huffman)."""
    out = bytearray(b"\x00\x00")  # Required Insert Count 0, Delta Base 0
    for name, value in headers:
        out += qpack_int(len(name), 3, 0x20) + name.encode()
        out += qpack_int(len(value), 7) + value.encode()
    return bytes(out)


def h3_frame(ftype: int, payload: bytes) -> bytes:
    return quic_varint(ftype) + quic_varint(len(payload)) + payload


def h3_seeds() -> list[bytes]:
    """fuzz_server_h3: a byte choosing the server (bit 0) and the split between two reads
    (the other bits), then the client's request stream: HEADERS (and DATA) frames."""

    def get(path: str, extra: list[tuple[str, str]] | None = None, method: str = "GET") -> bytes:
        return qpack([(":method", method), (":scheme", "https"), (":authority", "localhost"),
                      (":path", path), *(extra or [])])

    nh = ('{"response_body_size": 20, "static_delay": "0.001s", "response_headers": '
          '[{"header": {"key": "x-a", "value": "b"}}]}')
    streams = [
        h3_frame(1, get("/")),
        h3_frame(1, get("/echo?status=418&size=100&header=x-y:z")),
        h3_frame(1, get("/", [("x-nighthawk-test-server-config", nh)])),
        h3_frame(1, get("/", [("x-nighthawk-test-server-config", '{"echo_request_headers": true}')])),
        h3_frame(1, get("/debug?env=dump")),
        h3_frame(1, get("/echo", [("content-length", "5")], "POST")) + h3_frame(0, b"hello"),
        h3_frame(1, get("/echo?gzip=true", [("accept-encoding", "gzip")])),
        h3_frame(1, get("/", [("content-length", "99999999")], "POST")),
        h3_frame(1, get("/", [(f"x-{i}", "v" * 40) for i in range(40)])),
        h3_frame(1, get("/", method="HEAD")),
        h3_frame(1, get("/x")) + h3_frame(1, qpack([("x-trailer", "1")])),
    ]
    seeds = []
    for i, stream in enumerate(streams):
        seeds.append(bytes([(i * 37) & 0xFE]) + stream)
        seeds.append(bytes([((i * 53) & 0xFE) | 1]) + stream)
    return seeds


def h2_tunnel_seeds() -> list[bytes]:
    """fuzz_client_h2_tunnel: an HTTP/2 proxy's side of a CONNECT (stream 1), then the
    origin's bytes in DATA frames. The valid exchange first (the proxy's SETTINGS, its ack
    of ours, HEADERS :status 200, DATA carrying the origin's HTTP/1.1 response), whole and
    in small reads; then what proxies also do: interim answers, a refusal, the stream ended
    or reset, GOAWAY, DATA before the answer, and HTTP/2 to the origin inside the tunnel."""
    settings = frame(SETTINGS, 0, 0, struct.pack(">HI", 3, 100)) + frame(SETTINGS, ACK, 0)
    ok = frame(HEADERS, END_HEADERS, 1, hpack([(":status", "200")]))
    resp = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    valid = settings + ok + frame(DATA, 0, 1, resp)
    rst = struct.pack(">I", 8)  # CANCEL
    inner_h2 = (frame(SETTINGS, 0, 0) + frame(SETTINGS, ACK, 0)
                + frame(HEADERS, END_HEADERS | END_STREAM, 1, hpack([(":status", "200")])))
    seeds = [
        b"\x00" + OP_REST + valid,
        b"\x00" + chunked_ops(valid, 7),
        b"\x00" + chunked_ops(valid, 64) + OP_EOF,
        b"\x00" + OP_REST + valid + frame(DATA, 0, 1, resp) + frame(DATA, END_STREAM, 1),
        b"\x00" + OP_REST + settings + frame(HEADERS, END_HEADERS, 1, hpack([(":status", "100")])) + ok
        + frame(DATA, 0, 1, resp),
        b"\x00" + OP_REST + settings + frame(HEADERS, END_HEADERS | END_STREAM, 1, hpack([(":status", "407")])),
        b"\x00" + OP_REST + settings + frame(HEADERS, END_HEADERS | END_STREAM, 1, hpack([(":status", "200")])),
        b"\x00" + OP_REST + settings + frame(RST_STREAM, 0, 1, rst),
        b"\x00" + OP_REST + valid + frame(RST_STREAM, 0, 1, rst),
        b"\x00" + OP_REST + settings + frame(GOAWAY, 0, 0, struct.pack(">II", 0, 2)),
        b"\x00" + OP_REST + valid + frame(GOAWAY, 0, 0, struct.pack(">II", 1, 0)),
        b"\x00" + OP_REST + settings + frame(DATA, 0, 1, resp),
        b"\x00" + OP_REST + settings + frame(PING, 0, 0, bytes(8)) + ok
        + frame(WINDOW_UPDATE, 0, 1, b"\x00\x00\x10\x00") + frame(DATA, 0, 1, resp),
        b"\x01" + OP_REST + valid + frame(DATA, 0, 1, resp + resp),
        b"\x01" + chunked_ops(valid, 9) + OP_EOF + OP_REST + valid,
        b"\x02" + OP_REST + settings + ok + frame(DATA, 0, 1, inner_h2),
        b"\x02" + chunked_ops(settings + ok + frame(DATA, 0, 1, inner_h2), 11),
    ]
    return seeds


def write(target: str, seeds: list[bytes]) -> int:
    d = CORPUS / target
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    for seed in seeds:
        (d / hashlib.sha1(seed).hexdigest()).write_bytes(seed)
    return len(set(seeds))


def check_seeds() -> list[bytes]:
    """fuzz_check: POINTER 0xFF DOCUMENT 0xFF CUTS, from the documents docs/checks.md uses."""
    docs = [b'{"error":"injected"}', b'{"data":{"id":42,"tags":["a","b"]},"ok":true}',
            b'[1, {"a~b": {"c/d": null}}, "x\\"y"]', b'{"s":"needle in a \\"haystack\\""}']
    pointers = [b"/error", b"/data/id", b"/data/tags/1", b"/1/a~0b/c~1d", b"/s", b"", b"needle"]
    return [p + b"\xff" + d + b"\xff" + bytes([3, 1, 7, 2]) for d in docs for p in pointers]


def sse_seeds() -> list[bytes]:
    """fuzz_sse: STREAM 0xFF CUTS, event streams as servers write them (LF, CRLF, CR line
    ends, comments, a BOM, multi-line data, fields without a colon, an unterminated event)."""
    streams = [b"data: nhbench\n\n" * 3, b"data: a\r\ndata: b\r\n\r\n", b"data:x\r\rdata\r\r",
               b"\xef\xbb\xbfdata: first\n\n", b": comment\n\nevent: ping\n\nid: 7\n\n",
               b"data: {\"token\":\"hi\"}\n\ndata: [DONE]\n\n", b"retry: 10\ndata\n\ndata: tail",
               b"datax: no\n\nDATA: no\n\n"]
    cuts = [bytes([1] * 40), bytes([3, 1, 7, 2, 0, 5]), b""]
    return [st + b"\xff" + c for st in streams for c in cuts]


def check_regex_seeds() -> list[bytes]:
    """fuzz_check_regex: FLAGS PATTERN 0xFF DOCUMENT 0xFF CUTS; the fixed patterns (FLAGS bit
    0x80, PATTERN's first byte the index) and the ones docs/checks.md uses."""
    docs = [b'{"error":"injected"}', b'{"ok":true,"id":"x123y"}', b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaab",
            b"one word\nv1.2\nfoo bar bazqux", b""]
    cuts = bytes([3, 1, 7, 2, 0, 5])
    seeds = [bytes([0x80 | fl, i]) + b"\xff" + d + b"\xff" + cuts
             for i in range(12) for fl in (0, 1, 6) for d in docs]
    for pattern in (rb'"error"\s*:', rb"^v[0-9]+\.[0-9]+$", rb"x\d{3}y", rb"(a|aa)*b"):
        seeds += [bytes([fl]) + pattern + b"\xff" + d + b"\xff" + cuts for fl in (0, 4) for d in docs]
    return seeds


def chunked_ops(data: bytes, size: int) -> bytes:
    """The same bytes as reads of `size` bytes each (operation 0 with a length)."""
    out = bytearray()
    for i in range(0, len(data), size):
        piece = data[i : i + size]
        out += bytes([0, len(piece)]) + piece
    return bytes(out)


def main() -> None:
    import nhbench

    server_seeds: list[bytes] = []
    h1_seeds: list[bytes] = []
    h2_seeds: list[bytes] = []
    configs = {
        0: {},
        1: {"response_body_size": 10, "echo_default_params": "size=100:50,2000:50&status=200:90,503:10"},
        2: {"max_header_bytes": 1024, "max_body_bytes": 4096, "alpn": "http/1.1"},
        3: {"alpn": "h2", "max_concurrent_streams": 2},
    }
    for variant, kwargs in configs.items():
        with nhbench.TestServer(**kwargs) as server:
            addr = server.address
            for sv, req, cv in H1_TRAFFIC:
                if sv != variant:
                    continue
                server_seeds.append(bytes([sv]) + OP_REST + req)
                if b"delay" in req:
                    # The same in reads, then a wait for the delayed responses.
                    server_seeds.append(bytes([sv]) + chunked_ops(req, 255) + OP_WAIT)
                if cv is None:
                    continue
                resp = exchange(addr, req)
                if resp:
                    h1_seeds.append(bytes([cv]) + OP_REST + resp)
                    h1_seeds.append(bytes([cv]) + chunked_ops(resp, 7) + OP_EOF)
            for sv, req, last, cv in H2_TRAFFIC:
                if sv != variant:
                    continue
                server_seeds.append(bytes([sv]) + OP_REST + req)
                if cv is None:
                    continue
                resp = exchange(addr, req, h2_last=last)
                if resp:
                    h2_seeds.append(bytes([cv]) + OP_REST + resp)
                    h2_seeds.append(bytes([cv]) + chunked_ops(resp, 50))
    for sv, req in h2_server_extras():
        server_seeds.append(bytes([sv]) + OP_REST + req)
    # Two connections at once, and a half-close after a request.
    server_seeds.append(b"\x00" + bytes([0, 40]) + h1("GET", "/x")[:40] + bytes([1, 30]) + h1("GET", "/y")[:30]
                        + OP_REST + h1("GET", "/x")[40:])
    server_seeds.append(b"\x00" + bytes([0, len(h1("GET", "/"))]) + h1("GET", "/") + OP_EOF)
    for cv, parts in H1_TEMPLATES:
        h1_seeds.append(bytes([cv]) + b"".join(parts))
    for cv, resp in h2_client_templates():
        h2_seeds.append(bytes([cv]) + OP_REST + resp)
    option_seeds = [bytes([which]) + text.encode() for which, text in OPTION_SEEDS]

    counts = {
        "fuzz_server": write("fuzz_server", server_seeds),
        "fuzz_client_h1": write("fuzz_client_h1", h1_seeds),
        "fuzz_client_h2": write("fuzz_client_h2", h2_seeds),
        "fuzz_server_options": write("fuzz_server_options", option_seeds),
        "fuzz_server_grpc": write("fuzz_server_grpc", grpc_seeds()),
        "fuzz_server_fanout": write("fuzz_server_fanout", fanout_seeds()),
        "fuzz_client_tunnel": write("fuzz_client_tunnel", tunnel_seeds()),
        "fuzz_client_udp_tunnel": write("fuzz_client_udp_tunnel", udp_tunnel_seeds()),
        "fuzz_client_capsules": write("fuzz_client_capsules", capsule_seeds()),
        "fuzz_client_h3_tunnel": write("fuzz_client_h3_tunnel", h3_tunnel_seeds()),
        "fuzz_client_h2_tunnel": write("fuzz_client_h2_tunnel", h2_tunnel_seeds()),
        "fuzz_server_h3": write("fuzz_server_h3", h3_seeds()),
        "fuzz_check": write("fuzz_check", check_seeds()),
        "fuzz_sse": write("fuzz_sse", sse_seeds()),
        "fuzz_check_regex": write("fuzz_check_regex", check_regex_seeds()),
    }
    total = sum(p.stat().st_size for p in CORPUS.rglob("*") if p.is_file())
    for name, n in counts.items():
        print(f"{name}: {n} seeds")
    print(f"total {total} bytes in {CORPUS}")


if __name__ == "__main__":
    main()
