"""The test server as a gRPC server (docs/server.md "gRPC", docs/protocols.md "gRPC: the test
server"), against independent clients: grpcio (gRPC's C core, the health-checking stub and a
Ping stub built at test time from tests/data/grpc/ping.proto), Fortio's own `fortio load -grpc
-ping` and `fortio grpcping`, nghttp (nghttp2's client, for requests grpcio would never send:
bad compressed flags, truncated frames, malformed protobuf, a bad grpc-timeout) and raw HTTP/2
frames over a socket (garbage, half frames, messages split byte by byte, abrupt closes).

Nothing is mocked. Counts are exact: every call is answered once and counts in grpc_calls
(grpc_errors when its grpc-status is not OK). Delays are asserted as lower bounds or as order
(a delayed call does not hold back the others), with generous upper bounds only where the
point is that a capped delay did not run its full length.
"""

from __future__ import annotations

import random
import re
import shutil
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support import h2frames as h2
from support.h2frames import DATA, END_HEADERS, END_STREAM, HEADERS, PREFACE, RST_STREAM, frame
from support.peers import fortio_binary, peer_env

import nhbench

grpc = pytest.importorskip("grpc", reason="needs grpcio (the test extra)")
health_pb2 = pytest.importorskip("grpc_health.v1.health_pb2",
                                 reason="needs grpcio-health-checking (the test extra)")
from grpc_health.v1 import health_pb2_grpc  # noqa: E402

pytest.importorskip("grpc_tools", reason="needs grpcio-tools (the test extra)")

PROTO = Path(__file__).parent / "data" / "grpc" / "ping.proto"
PING = "/fgrpc.PingServer/Ping"
NGHTTP = shutil.which("nghttp")
needs_nghttp = pytest.mark.skipif(NGHTTP is None, reason="nghttp (nghttp2-client) is not installed")
MAX_MSG = 4 << 20
# grpcio's own 4 MiB limits would refuse the largest messages before our server sees them.
UNLIMITED = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
OK, DEADLINE_EXCEEDED, NOT_FOUND, RESOURCE_EXHAUSTED, UNIMPLEMENTED, INTERNAL = 0, 4, 5, 8, 12, 13


@pytest.fixture(scope="module")
def ping_message(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The PingMessage class, compiled from ping.proto by grpcio-tools' protoc into a
    descriptor set and built in a private descriptor pool (so that another test compiling
    Fortio's proto into the default pool cannot collide with it)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    out = tmp_path_factory.mktemp("ping") / "ping.desc"
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTO.parent}",
                    f"--descriptor_set_out={out}", PROTO.name],
                   check=True, capture_output=True, text=True)
    files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    pool = descriptor_pool.DescriptorPool()
    for f in files.file:
        pool.Add(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("fgrpc.PingMessage"))


def ping_stub(channel: Any, message: Any) -> Any:
    """A unary-unary callable for Fortio's Ping, as generated stubs build it."""
    return channel.unary_unary(PING, request_serializer=message.SerializeToString,
                               response_deserializer=message.FromString)


def raw_call(channel: Any, path: str) -> Any:
    """A call that sends the given bytes as the message and returns the reply's bytes."""
    return channel.unary_unary(path)


@pytest.fixture
def server() -> Iterator[nhbench.TestServer]:
    with nhbench.TestServer() as s:
        yield s


def target(s: nhbench.TestServer) -> str:
    host, port = s.address
    return f"{host}:{port}"


def grpc_counts(s: nhbench.TestServer) -> tuple[int, int]:
    st = s.stats()
    return st["grpc_calls"], st["grpc_errors"]


def settled_counts(s: nhbench.TestServer, calls: int) -> tuple[int, int]:
    """The counts once `calls` answers are counted: the client can see a response before the
    server's bookkeeping of it is visible to this thread only by a hair; poll briefly."""
    deadline = time.monotonic() + 5
    while grpc_counts(s)[0] < calls and time.monotonic() < deadline:
        time.sleep(0.01)
    return grpc_counts(s)


def settle(read: Callable[[], int]) -> int:
    deadline = time.monotonic() + 5
    value = read()
    while value == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
        value = read()
    return value


# ---- grpcio: health ---------------------------------------------------------------------------

def test_health_check_over_h2c(server: nhbench.TestServer) -> None:
    with grpc.insecure_channel(target(server)) as ch:
        stub = health_pb2_grpc.HealthStub(ch)
        req = health_pb2.HealthCheckRequest
        assert stub.Check(req(service=""), timeout=10).status == health_pb2.HealthCheckResponse.SERVING
        # Fortio's names: its server marks "ping" serving and "ping_down" not serving.
        assert stub.Check(req(service="ping"), timeout=10).status == health_pb2.HealthCheckResponse.SERVING
        assert stub.Check(req(service="ping_down"), timeout=10).status == \
            health_pb2.HealthCheckResponse.NOT_SERVING
        with pytest.raises(grpc.RpcError) as err:
            stub.Check(req(service="no.such.Service"), timeout=10)
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
        assert err.value.details() == "unknown service no.such.Service"
        # Watch (a server stream) is not served.
        with pytest.raises(grpc.RpcError) as err:
            next(iter(stub.Watch(req(service=""), timeout=10)))
        assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert settled_counts(server, 5) == (5, 2)
    st = server.stats()
    assert st["requests"] == 5 and st["status"] == {"200": 5}
    assert st["connections_http2"] == 1 and st["bad_requests"] == 0


def test_health_check_over_tls_with_the_test_ca() -> None:
    with nhbench.TestServer(tls_self_signed=True) as s:
        ca = Path(s.ca_cert).read_bytes()
        creds = grpc.ssl_channel_credentials(root_certificates=ca)
        _, port = s.address
        # By name and by address: the generated certificate names both.
        for host in ("localhost", "127.0.0.1"):
            with grpc.secure_channel(f"{host}:{port}", creds) as ch:
                stub = health_pb2_grpc.HealthStub(ch)
                reply = stub.Check(health_pb2.HealthCheckRequest(), timeout=10)
                assert reply.status == health_pb2.HealthCheckResponse.SERVING
        assert settled_counts(s, 2) == (2, 0)
        st = s.stats()
        # One connection per channel (a client may open another if it retries; each is h2).
        assert st["tls_handshakes"] == st["connections_http2"] >= 2


# ---- grpcio: Fortio's ping ------------------------------------------------------------------

def test_ping_echoes_seq_and_payload_and_sets_ts(server: nhbench.TestServer,
                                                 ping_message: Any) -> None:
    with grpc.insecure_channel(target(server)) as ch:
        ping = ping_stub(ch, ping_message)
        before = time.time_ns()
        reply = ping(ping_message(seq=7, ts=1, payload="héllo"), timeout=10)
        after = time.time_ns()
        assert (reply.seq, reply.payload, reply.delayNanos) == (7, "héllo", 0)
        assert before <= reply.ts <= after  # the server's wall clock, as Fortio's sets it
        # The alias under the name the issue used.
        alias = ch.unary_unary("/fortio.PingServer/Ping", request_serializer=ping_message.SerializeToString,
                               response_deserializer=ping_message.FromString)
        assert alias(ping_message(seq=-3), timeout=10).seq == -3
        # An empty message: every field at its default.
        assert ping(ping_message(), timeout=10).seq == 0
    assert settled_counts(server, 3) == (3, 0)


@pytest.mark.parametrize("size", [1, 1000, 65536, MAX_MSG - 5])
def test_ping_payload_sizes_up_to_the_limit(server: nhbench.TestServer, ping_message: Any,
                                            size: int) -> None:
    # MAX_MSG - 5: one byte of key and four of length make a message of exactly 4 MiB.
    msg = ping_message(payload="p" * size)
    assert msg.ByteSize() <= MAX_MSG
    with grpc.insecure_channel(target(server), options=UNLIMITED) as ch:
        reply = ping_stub(ch, ping_message)(msg, timeout=60)
    assert reply.payload == msg.payload
    assert settled_counts(server, 1) == (1, 0)


def test_a_message_over_4_mib_is_resource_exhausted(server: nhbench.TestServer,
                                                     ping_message: Any) -> None:
    msg = ping_message(payload="p" * (MAX_MSG - 4))
    assert msg.ByteSize() == MAX_MSG + 1
    with grpc.insecure_channel(target(server), options=UNLIMITED) as ch:
        with pytest.raises(grpc.RpcError) as err:
            ping_stub(ch, ping_message)(msg, timeout=60)
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        # The connection serves on.
        assert ping_stub(ch, ping_message)(ping_message(seq=1), timeout=10).seq == 1
    assert settled_counts(server, 2) == (2, 1)


def test_ping_delay_is_a_timer_and_other_calls_go_on(server: nhbench.TestServer,
                                                     ping_message: Any) -> None:
    with grpc.insecure_channel(target(server)) as ch:
        ping = ping_stub(ch, ping_message)
        t0 = time.monotonic()
        assert ping(ping_message(seq=1, delayNanos=200_000_000), timeout=10).delayNanos == 200_000_000
        assert time.monotonic() - t0 >= 0.2
        # A call delayed by 30 s, then 200 calls in parallel on the same channel: all of them
        # are answered while it waits (the delay holds its stream only), each with its own seq.
        slow = ping.future(ping_message(seq=-1, delayNanos=30_000_000_000), timeout=60)
        fast = [ping.future(ping_message(seq=i, payload=str(i)), timeout=30) for i in range(200)]
        assert [f.result().seq for f in fast] == list(range(200))
        assert [f.result().payload for f in fast] == [str(i) for i in range(200)]
        assert not slow.done()
        slow.cancel()  # RST_STREAM: the waiting answer is dropped, never counted
    assert settled_counts(server, 201) == (201, 0)
    assert settle(lambda: server.stats()["h2_streams_reset"]) == 1


def test_ping_delay_is_capped_at_max_delay(ping_message: Any) -> None:
    with nhbench.TestServer(max_delay="0.3s") as s, grpc.insecure_channel(target(s)) as ch:
        t0 = time.monotonic()
        reply = ping_stub(ch, ping_message)(ping_message(seq=2, delayNanos=3_600_000_000_000), timeout=60)
        elapsed = time.monotonic() - t0
    # An hour asked, --max-delay served; the reply still says what was asked, as Fortio's does.
    assert reply.seq == 2 and reply.delayNanos == 3_600_000_000_000
    assert 0.3 <= elapsed < 30


def test_static_delay_applies_to_grpc_calls(ping_message: Any) -> None:
    with nhbench.TestServer(static_delay="0.2s") as s, grpc.insecure_channel(target(s)) as ch:
        t0 = time.monotonic()
        health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=10)
        assert time.monotonic() - t0 >= 0.2


def test_a_stall_holds_grpc_answers_too() -> None:
    """A stall freezes every response of the server, gRPC answers included, so the
    coordinated-omission ground truth holds for gRPC load as well."""
    with nhbench.TestServer(max_echo_delay="3s") as s:
        host, port = s.address
        with socket.create_connection((host, port), timeout=10) as sock:
            sock.sendall(b"GET /?stall=2s HTTP/1.1\r\nHost: x\r\n\r\n")
            assert settle(lambda: s.stats()["stalls"]) == 1
            t0 = time.monotonic()
            with grpc.insecure_channel(target(s)) as ch:
                health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=10)
            # Most of the 2 s were left when the call was made.
            assert time.monotonic() - t0 >= 0.5


def test_unknown_methods_are_unimplemented(server: nhbench.TestServer) -> None:
    with grpc.insecure_channel(target(server)) as ch:
        for path, details in [("/foo.Bar/Baz", "unknown service foo.Bar"),
                              ("/fgrpc.PingServer/Pong", "unknown method fgrpc.PingServer/Pong"),
                              ("/grpc.health.v1.Health/List", "unknown method grpc.health.v1.Health/List")]:
            with pytest.raises(grpc.RpcError) as err:
                raw_call(ch, path)(b"", timeout=10)
            assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED, path
            assert err.value.details() == details
    assert settled_counts(server, 3) == (3, 3)


def test_unknown_fields_of_every_wire_type_are_skipped(server: nhbench.TestServer,
                                                       ping_message: Any) -> None:
    unknown = (b"\x48\x96\x01"                      # field 9, varint
               b"\x51" + b"\x01" * 8 +              # field 10, fixed64
               b"\x5a\x03abc"                       # field 11, length-delimited
               b"\x63\x08\x01\x6a\x01z\x64"         # field 12, a group holding fields 1 and 13
               b"\x75" + b"\x02" * 4 +              # field 14, fixed32
               b"\x12\x05hello")                    # field 2 (ts) with the wrong wire type
    known = ping_message(seq=42, payload="x").SerializeToString()
    with grpc.insecure_channel(target(server)) as ch:
        call = ch.unary_unary(PING, response_deserializer=ping_message.FromString)
        reply = call(unknown + known + unknown, timeout=10)
        assert (reply.seq, reply.payload) == (42, "x")
        # The last occurrence of a field wins, as in protobuf.
        again = call(known + ping_message(seq=43).SerializeToString(), timeout=10)
        assert again.seq == 43 and again.payload == "x"
    assert settled_counts(server, 2) == (2, 0)


@pytest.mark.parametrize("path,message", [
    ("/grpc.health.v1.Health/Check", b"\x0a\xff"),          # a length past the end
    ("/grpc.health.v1.Health/Check", b"\x0a\x02\xff\xfe"),  # a service that is not UTF-8
    (PING, b"\x1a\x01\x80"),                                # a payload that is not UTF-8
    (PING, b"\x08"),                                        # a varint cut short
    (PING, b"\x08" + b"\xff" * 10 + b"\x01"),               # a varint of 11 bytes
    (PING, b"\x0e\x00"),                                    # wire type 6
    (PING, b"\x00\x01"),                                    # field number 0
    (PING, b"\x63\x08\x01"),                                # a group never closed
    (PING, b"\x64"),                                        # a group closed, never opened
    (PING, b"\x63\x6c"),                                    # a group closed by another field
    (PING, b"\x63" * 65 + b"\x64" * 65),                    # groups nested too deep
])
def test_malformed_protobuf_is_internal(server: nhbench.TestServer, path: str,
                                        message: bytes) -> None:
    with grpc.insecure_channel(target(server)) as ch:
        with pytest.raises(grpc.RpcError) as err:
            raw_call(ch, path)(message, timeout=10)
        assert err.value.code() == grpc.StatusCode.INTERNAL
        assert "unmarshalling" in err.value.details()
    assert settled_counts(server, 1) == (1, 1)


def test_grpc_content_type_without_http2_or_post_is_plain_http(server: nhbench.TestServer) -> None:
    """gRPC needs HTTP/2 and POST: an HTTP/1.1 POST with gRPC's content type gets the echo
    as before, and so does an HTTP/2 GET (no grpc-status)."""
    host, port = server.address
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(b"POST /fgrpc.PingServer/Ping HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Type: application/grpc\r\nContent-Length: 5\r\n\r\nhello")
        reply = b""
        while not reply.endswith(b"hello"):
            chunk = sock.recv(4096)
            assert chunk
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 200 ") and b"grpc-status" not in reply.lower()
    with H2Conn(host, port) as conn:
        conn.send(frame(HEADERS, END_HEADERS | END_STREAM, 1, grpc_block(PING.encode(), method=h2.METHOD_GET)))
        conn.until_end(1)
    st = server.stats()
    assert st["requests"] == 2 and st["grpc_calls"] == 0


# ---- nghttp: requests grpcio does not send ---------------------------------------------------

def nghttp_call(url: str, body: bytes, tmp_path: Path, *headers: str) -> dict[str, str]:
    """One POST with gRPC's content type through nghttp; the response's headers and trailers."""
    data = tmp_path / "body.bin"
    data.write_bytes(body)
    args = [str(NGHTTP), "-v", "-n", "-H", ":method: POST", "-H", "content-type: application/grpc"]
    for h in headers:
        args += ["-H", h]
    out = subprocess.run([*args, "-d", str(data), url], capture_output=True, timeout=30)
    got: dict[str, str] = {}
    for m in re.finditer(rb"recv \(stream_id=\d+\) ([^:\s][^:]*|:status): ([^\n]*)", out.stdout):
        got[m.group(1).decode("latin-1")] = m.group(2).decode("latin-1")
    return got


def varint(v: int) -> bytes:
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def framed(message: bytes, flag: int = 0, length: int | None = None) -> bytes:
    return struct.pack(">BI", flag, len(message) if length is None else length) + message


@needs_nghttp
@pytest.mark.parametrize("case,body,headers,code", [
    ("ok", framed(b"\x08\x07"), (), OK),
    ("compressed flag, no grpc-encoding", framed(b"\x08\x07", flag=1), (), INTERNAL),
    ("compressed flag, gzip", framed(b"\x08\x07", flag=1), ("grpc-encoding: gzip",), UNIMPLEMENTED),
    ("identity is no compression", framed(b"\x08\x07", flag=1), ("grpc-encoding: identity",), INTERNAL),
    ("flag 2", framed(b"\x08\x07", flag=2), (), INTERNAL),
    ("over 4 MiB, by the prefix", framed(b"", length=MAX_MSG + 1), (), RESOURCE_EXHAUSTED),
    ("no message", b"", (), UNIMPLEMENTED),
    ("two messages", framed(b"\x08\x01") + framed(b"\x08\x02"), (), UNIMPLEMENTED),
    ("a message and a half", framed(b"\x08\x01") + b"\x00\x00", (), UNIMPLEMENTED),
    ("half a prefix", b"\x00\x00\x00", (), INTERNAL),
    ("a message cut short", framed(b"\x08", length=10), (), INTERNAL),
    ("bad grpc-timeout", framed(b"\x08\x07"), ("grpc-timeout: 1x",), INTERNAL),
    ("grpc-timeout of 9 digits", framed(b"\x08\x07"), ("grpc-timeout: 123456789S",), INTERNAL),
    ("grpc-timeout after the delay", framed(b"\x20\x01"), ("grpc-timeout: 10S",), OK),
])
def test_framing_and_headers_answer_as_grpc_go_does(server: nhbench.TestServer, tmp_path: Path,
                                                    case: str, body: bytes, headers: tuple[str, ...],
                                                    code: int) -> None:
    got = nghttp_call(f"http://{target(server)}{PING}", body, tmp_path, *headers)
    assert got.get(":status") == "200" and got.get("content-type") == "application/grpc", case
    assert got.get("grpc-status") == str(code), (case, got)
    assert ("grpc-message" in got) == (code != OK), case
    assert settled_counts(server, 1) == (1, int(code != OK))


@needs_nghttp
def test_a_delay_past_the_grpc_timeout_is_deadline_exceeded(server: nhbench.TestServer,
                                                            tmp_path: Path) -> None:
    t0 = time.monotonic()
    five_s = framed(b"\x20" + varint(5_000_000_000))  # delayNanos
    got = nghttp_call(f"http://{target(server)}{PING}", five_s, tmp_path, "grpc-timeout: 200m")
    # Answered at the deadline, not after the 5 s the ping asked for.
    assert got.get("grpc-status") == str(DEADLINE_EXCEEDED)
    assert time.monotonic() - t0 < 4.5
    assert settled_counts(server, 1) == (1, 1)


# ---- raw frames ---------------------------------------------------------------------------------

def grpc_block(path: bytes, method: bytes = h2.METHOD_POST, extra: bytes = b"") -> bytes:
    return (method + h2.SCHEME_HTTP + h2.hpack_literal(b":path", path)
            + h2.hpack_literal_name_index(1, b"127.0.0.1")
            + h2.hpack_literal(b"content-type", b"application/grpc") + extra)


class H2Conn:
    """A hand-driven HTTP/2 connection: preface, SETTINGS, then whatever the test sends."""

    def __init__(self, host: str, port: int) -> None:
        self.sock = socket.create_connection((host, port), timeout=10)
        self.sock.sendall(PREFACE + h2.settings() + h2.SETTINGS_ACK)
        self.reader = h2.FrameReader(self.sock)

    def __enter__(self) -> H2Conn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def until_end(self, *streams: int) -> list[tuple[int, int, int, bytes]]:
        """Frames until each stream named has ended (END_STREAM or RST_STREAM from the server)."""
        left = set(streams)
        frames = []
        while left:
            f = self.reader.read_frame()
            assert f is not None, f"the connection ended with streams {sorted(left)} open"
            frames.append(f)
            kind, flags, sid, _ = f
            if sid in left and (kind == RST_STREAM or (kind in (HEADERS, DATA) and flags & END_STREAM)):
                left.discard(sid)
        return frames


def test_a_message_split_byte_by_byte_over_data_frames(server: nhbench.TestServer) -> None:
    host, port = server.address
    body = framed(b"\x08\x2a\x1a\x0bsplit apart")
    with H2Conn(host, port) as conn:
        conn.send(frame(HEADERS, END_HEADERS, 1, grpc_block(PING.encode())))
        for i, byte in enumerate(body):
            conn.send(frame(DATA, END_STREAM if i == len(body) - 1 else 0, 1, bytes([byte])))
        frames = conn.until_end(1)
    data = b"".join(p for kind, _, sid, p in frames if kind == DATA and sid == 1)
    assert data[0] == 0 and struct.unpack(">I", data[1:5])[0] == len(data) - 5
    assert data[5:7] == b"\x08\x2a" and b"\x1a\x0bsplit apart" in data
    # The last frame: trailers (HEADERS with END_STREAM), after the DATA.
    assert frames[-1][0] == HEADERS and frames[-1][1] & END_STREAM
    assert settled_counts(server, 1) == (1, 0)


@pytest.mark.core
def test_garbage_calls_are_each_answered_and_the_server_serves_on(server: nhbench.TestServer,
                                                                  ping_message: Any) -> None:
    """200 calls of random bytes (random flags, lengths that lie, random protobuf) in one
    connection: each gets exactly one answer, counted; then half-sent calls closed abruptly,
    and a grpcio call still works."""
    rng = random.Random(14)
    host, port = server.address
    streams = []
    with H2Conn(host, port) as conn:
        for n in range(200):
            sid = 2 * n + 1
            streams.append(sid)
            path = rng.choice([PING.encode(), b"/grpc.health.v1.Health/Check", b"/x", b"/a/b"])
            kind = rng.randrange(4)
            if kind == 0:    # random bytes
                body = rng.randbytes(rng.randrange(0, 40))
            elif kind == 1:  # a true prefix, a random message
                msg = rng.randbytes(rng.randrange(0, 40))
                body = framed(msg)
            elif kind == 2:  # a prefix that lies about the length
                body = framed(rng.randbytes(8), flag=rng.choice([0, 0, 1, 7]),
                              length=rng.choice([0, 3, 100, MAX_MSG, 0xFFFFFFFF]))
            else:            # two messages
                body = framed(rng.randbytes(3)) + framed(b"")
            conn.send(frame(HEADERS, END_HEADERS, sid, grpc_block(path)))
            conn.send(frame(DATA, END_STREAM, sid, body))
            if n % 50 == 49:
                conn.until_end(*streams[-50:])
    assert settled_counts(server, 200)[0] == 200
    st = server.stats()
    assert st["requests"] == 200 and st["h2_protocol_errors"] == 0
    # Half a prefix, half a message, then the connection is gone.
    for body in (b"\x00\x00", framed(b"\x08\x01\x1a\x10abc", length=30), b""):
        with H2Conn(host, port) as conn:
            conn.send(frame(HEADERS, END_HEADERS, 1, grpc_block(PING.encode())))
            if body:
                conn.send(frame(DATA, 0, 1, body))
    with grpc.insecure_channel(target(server)) as ch:
        assert ping_stub(ch, ping_message)(ping_message(seq=9), timeout=10).seq == 9
    assert settled_counts(server, 201)[0] == 201


# ---- Fortio ---------------------------------------------------------------------------------------

FORTIO = fortio_binary()
needs_fortio = pytest.mark.skipif(FORTIO is None, reason="fortio is not installed "
                                  "(go install fortio.org/fortio@v1.66.5)")


def fortio(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(FORTIO), *args], capture_output=True, text=True, timeout=120,
                          env=peer_env())


@needs_fortio
def test_fortio_load_grpc_ping(server: nhbench.TestServer) -> None:
    r = fortio("load", "-grpc", "-ping", "-n", "60", "-c", "3", "-qps", "0", "-payload", "nhbench",
               target(server))
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "Ping SERVING : 60" in out and "All done 60 calls" in out
    assert "Error cases : no data" in out
    assert settled_counts(server, 60) == (60, 0)


@needs_fortio
def test_fortio_load_grpc_health_and_ping_delay(server: nhbench.TestServer) -> None:
    r = fortio("load", "-grpc", "-n", "10", "-c", "1", "-qps", "0", target(server))
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "Health SERVING : 10" in out, out
    r = fortio("load", "-grpc", "-ping", "-grpc-ping-delay", "50ms", "-n", "4", "-c", "2", "-qps", "0",
               target(server))
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "Ping SERVING : 4" in out, out
    # Each call waited its 50 ms: Fortio's own minimum says so.
    m = re.search(r"Aggregated Function Time : count 4 avg \S+ \+/- \S+ min (\S+)", out)
    assert m and float(m.group(1)) >= 0.05, out
    assert settled_counts(server, 14) == (14, 0)


@needs_fortio
def test_fortio_grpcping_over_tls() -> None:
    with nhbench.TestServer(tls_self_signed=True) as s:
        _, port = s.address
        r = fortio("grpcping", "-n", "5", "-payload", "abc", "-cacert", str(s.ca_cert),
                   f"https://localhost:{port}")
        out = r.stdout + r.stderr
        assert r.returncode == 0, out
        assert "RTT histogram usec : count 15" in out
        # grpcping: one warm-up call, then two per round.
        assert settled_counts(s, 11) == (11, 0)
        assert s.stats()["tls_handshakes"] >= 1
