"""gRPC unary load (docs/protocols.md "gRPC: the client") against independent peers.

The servers are real: grpcio (in a subprocess, so that its Python handlers never wait for
the test process's GIL) with the standard health service and a generic handler that returns
the status it is told to, Fortio's ping server where Fortio is installed, and a scripted
HTTP/2 peer for responses no correct server sends. Counts are exact: every call the server
saw is one our result counted.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import nhbench
from nhbench import _grpc
from nhbench._core_config import client_core_config
from tests.support import h2frames as h2
from tests.support.peers import fortio_binary
from tests.support.scripted_origin import ScriptedOrigin
from tests.test_cli_errors import assert_one_line_error, nhbench_cli

pytest.importorskip("grpc")
pytest.importorskip("grpc_health")

# The peer: a grpcio server on 127.0.0.1 (h2c, or TLS with --cert/--key), the health service
# ("" SERVING, "down" NOT_SERVING) and /test.Peer/Status, which answers with the status
# code and message given on the command line after sleeping --sleep seconds. Every call is
# logged as one JSON line: the method, the request bytes (hex), the deadline left when it
# arrived (None without grpc-timeout) and the metadata.
PEER = textwrap.dedent('''
    import argparse, json, sys, threading, time
    from concurrent import futures
    import grpc
    from grpc_health.v1 import health, health_pb2, health_pb2_grpc

    p = argparse.ArgumentParser()
    p.add_argument("--log")
    p.add_argument("--code", type=int, default=0)
    p.add_argument("--message", default="")
    p.add_argument("--sleep", type=float, default=0.0)
    p.add_argument("--cert")
    p.add_argument("--key")
    a = p.parse_args()
    lock = threading.Lock()
    log = open(a.log, "a")

    def record(method, request, context):
        with lock:
            log.write(json.dumps({
                "method": method, "request": request.hex(),
                "remaining": context.time_remaining(),
                "metadata": {k: v for k, v in context.invocation_metadata()
                             if isinstance(v, str)},
            }) + "\\n")
            log.flush()

    class Health(health.HealthServicer):
        def Check(self, request, context):
            record("/grpc.health.v1.Health/Check", request.SerializeToString(), context)
            return super().Check(request, context)

    def status(request, context):
        record("/test.Peer/Status", request, context)
        if a.sleep:
            time.sleep(a.sleep)
        if a.code:
            context.abort(grpc.StatusCode(next(c for c in grpc.StatusCode
                                               if c.value[0] == a.code).value), a.message)
        return request

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    h = Health()
    h.set("", health_pb2.HealthCheckResponse.SERVING)
    h.set("down", health_pb2.HealthCheckResponse.NOT_SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(h, server)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "test.Peer", {"Status": grpc.unary_unary_rpc_method_handler(status)}),))
    if a.cert:
        creds = grpc.ssl_server_credentials(
            [(open(a.key, "rb").read(), open(a.cert, "rb").read())])
        port = server.add_secure_port("127.0.0.1:0", creds)
    else:
        port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(port, flush=True)
    sys.stdin.read()
    server.stop(0)
''')


class Peer:
    def __init__(self, tmp: Path, *args: str) -> None:
        self.log = tmp / f"calls-{time.monotonic_ns()}.jsonl"
        self.proc = subprocess.Popen(
            [sys.executable, "-c", PEER, "--log", str(self.log), *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline())

    def calls(self) -> list[dict]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.fixture
def peer(tmp_path: Path) -> Iterator[Peer]:
    p = Peer(tmp_path)
    yield p
    p.close()


def run(uri: str, **options: object) -> nhbench.Result:
    options.setdefault("rps", 200)
    options.setdefault("connections", 2)
    return nhbench.run(uri, **options)


# ---- the bytes nhbench sends --------------------------------------------------------------

def test_health_check_request_is_what_protobuf_encodes() -> None:
    from grpc_health.v1 import health_pb2

    for service in ("", "a", "grpc.health.v1.Health", "ü" * 200):
        expected = health_pb2.HealthCheckRequest(service=service).SerializeToString()
        assert _grpc.health_check_request(service) == expected


def test_ping_message_is_what_protobuf_encodes() -> None:
    # Fortio's ping.proto, built at run time (no generated code in the repository).
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fdp = descriptor_pb2.FileDescriptorProto(name="ping_test.proto", package="fgrpc",
                                             syntax="proto3")
    msg = fdp.message_type.add(name="PingMessage")
    for number, name, kind in ((1, "seq", 3), (2, "ts", 3), (3, "payload", 9),
                               (4, "delayNanos", 3)):
        msg.field.add(name=name, number=number, type=kind, label=1)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("fgrpc.PingMessage"))
    for seq, ts, payload, delay in ((0, 0, "", 0), (1, 2, "hello", 3),
                                    (2**62, -5, "ü" * 300, 10**12)):
        expected = cls(seq=seq, ts=ts, payload=payload, delayNanos=delay).SerializeToString()
        assert _grpc.ping_message(seq=seq, ts=ts, payload=payload, delay_nanos=delay) == expected


def test_frame_and_timeout() -> None:
    assert _grpc.frame(b"") == b"\0\0\0\0\0"
    assert _grpc.frame(b"ab") == b"\0\0\0\0\x02ab"
    assert _grpc.frame(b"x" * 300)[:5] == b"\0\0\0\x01\x2c"
    assert _grpc.grpc_timeout(1.0) == "1000m"
    assert _grpc.grpc_timeout(30) == "30000m"
    assert _grpc.grpc_timeout(0.0000015) == "1500n"
    assert _grpc.grpc_timeout(3600) == "3600000m"
    assert _grpc.grpc_timeout(200000) == "200000S"
    with pytest.raises(ValueError):
        _grpc.grpc_timeout(0)


def test_core_config_renders_one_grpc_call(tmp_path: Path) -> None:
    payload = tmp_path / "msg.bin"
    payload.write_bytes(b"\x0a\x03abc")
    options = nhbench.Options(uri="grpcs://127.0.0.1:7443", grpc_method="/pkg.Svc/Do",
                              grpc_payload=str(payload), grpc_deadline="250ms",
                              request_header=("x-user: 1",))
    config = client_core_config(options, "127.0.0.1")
    assert config["grpc"] is True
    assert config["protocol"] == "http2" and config["scheme"] == "https"
    (spec,) = config["specs"]
    assert spec["h2_method"] == "POST" and spec["h2_path"] == "/pkg.Svc/Do"
    headers = dict(spec["h2_headers"])
    assert headers[b"content-type"] == b"application/grpc"
    assert headers[b"te"] == b"trailers"
    assert headers[b"grpc-timeout"] == b"250m"
    assert headers[b"x-user"] == b"1"
    assert headers[b"user-agent"].startswith(b"nhbench")
    body = b"\0\0\0\0\x05\x0a\x03abc"
    assert spec["body_size"] == len(body) and spec["request"].endswith(body)
    # An HTTP/2 run without gRPC has no such key, and the defaults are Nighthawk's.
    plain = client_core_config(nhbench.Options(uri="http://127.0.0.1:1/", protocol="http2"),
                               "127.0.0.1")
    assert "grpc" not in plain
    assert "benchmark.grpc_error" not in dict(plain["failure_predicates"])
    assert dict(config["failure_predicates"])["benchmark.grpc_error"] == 0


def test_fortio_grpc_flag_maps_the_url() -> None:
    def uri(u: str) -> str:
        return nhbench.Options(uri=u, grpc=True).uri

    assert uri("http://127.0.0.1:9000") == "grpc://127.0.0.1:9000"
    assert uri("https://localhost/") == "grpcs://localhost/"
    assert uri("127.0.0.1:9000") == "grpc://127.0.0.1:9000"
    assert uri("localhost") == "grpc://localhost:8079"
    assert nhbench.Options(uri="grpc://h:1").protocol == "http2"


# ---- against grpcio -----------------------------------------------------------------------

@pytest.mark.timeout(60)
def test_health_check_exact_counts(peer: Peer) -> None:
    result = run(f"grpc://127.0.0.1:{peer.port}", requests=40)
    calls = peer.calls()
    assert len(calls) == 40
    assert {c["method"] for c in calls} == {"/grpc.health.v1.Health/Check"}
    assert {c["request"] for c in calls} == {""}  # the empty HealthCheckRequest
    assert result.counters["benchmark.grpc_status_0"] == 40
    assert result.counters["benchmark.http_2xx"] == 40
    assert result.counters["benchmark.grpc_error"] == 0
    assert result.counters["benchmark.grpc_protocol_error"] == 0
    assert result.success
    # The default deadline is --request-timeout (30 s), as grpc-timeout.
    assert all(25 < c["remaining"] <= 30 for c in calls)
    assert all(c["metadata"]["user-agent"].startswith("nhbench") for c in calls)


@pytest.mark.timeout(60)
def test_warmup_calls_are_kept_apart(peer: Peer) -> None:
    # The gRPC counters follow the warm-up split as the HTTP ones do (sequencer.c, client.c).
    result = run(f"grpc://127.0.0.1:{peer.port}", requests=12, simple_warmup=True)
    assert result.warmup is not None
    warm = result.warmup.counter_values["benchmark.grpc_status_0"]
    assert warm == result.warmup.counter_values["benchmark.http_2xx"] >= 1
    assert result.counters["benchmark.grpc_status_0"] == result.counters["benchmark.http_2xx"]
    assert len(peer.calls()) == warm + result.counters["benchmark.grpc_status_0"]


@pytest.mark.timeout(60)
def test_health_service_not_serving_and_unknown(peer: Peer) -> None:
    # NOT_SERVING is an answer (grpc-status 0); an unknown service is NOT_FOUND (5).
    down = run(f"grpc://127.0.0.1:{peer.port}", requests=10, grpc_service="down")
    assert down.counters["benchmark.grpc_status_0"] == 10 and down.success
    assert {c["request"] for c in peer.calls()} == {b"\x0a\x04down".hex()}
    missing = run(f"grpc://127.0.0.1:{peer.port}", requests=10, grpc_service="nosuch",
                  no_default_failure_predicates=True, allow_no_success=True)
    assert missing.counters["benchmark.grpc_status_5"] == 10
    assert missing.counters["benchmark.grpc_error"] == 10
    assert missing.counters["benchmark.http_2xx"] == 0
    assert "NOT_FOUND" in missing.error


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("code", "name"), [(14, "UNAVAILABLE"), (3, "INVALID_ARGUMENT"),
                                             (16, "UNAUTHENTICATED")])
def test_custom_method_status_codes(tmp_path: Path, code: int, name: str) -> None:
    peer = Peer(tmp_path, "--code", str(code), "--message", "down for 5 min")
    try:
        payload = tmp_path / "req.bin"
        payload.write_bytes(bytes(range(256)) * 3)
        result = run(f"grpc://127.0.0.1:{peer.port}", requests=30, grpc_method="/test.Peer/Status",
                     grpc_payload=str(payload), grpc_deadline="7s",
                     no_default_failure_predicates=True, allow_no_success=True)
        calls = peer.calls()
    finally:
        peer.close()
    assert len(calls) == 30
    assert {c["request"] for c in calls} == {payload.read_bytes().hex()}
    assert all(6 < c["remaining"] <= 7 for c in calls)
    assert result.counters[f"benchmark.grpc_status_{code}"] == 30
    assert result.counters["benchmark.grpc_error"] == 30
    assert result.counters["benchmark.http_2xx"] == 0
    assert result.error_count == 30
    # grpc-message, percent-decoded, in the run's first error.
    assert result.error == f"gRPC: status {code} ({name}): down for 5 min"


@pytest.mark.timeout(60)
def test_non_ok_status_fails_the_default_predicates(tmp_path: Path) -> None:
    peer = Peer(tmp_path, "--code", "14")
    try:
        result = run(f"grpc://127.0.0.1:{peer.port}", requests=30,
                     grpc_method="/test.Peer/Status")
        named = run(f"grpc://127.0.0.1:{peer.port}", requests=30,
                    grpc_method="/test.Peer/Status", no_default_failure_predicates=True,
                    failure_predicate={"benchmark.grpc_status_14": 0})
        ok = run(f"grpc://127.0.0.1:{peer.port}", requests=5,
                 failure_predicate={"benchmark.grpc_status_14": 0})
    finally:
        peer.close()
    assert [p.name for p in result.fired] == ["benchmark.grpc_error"]
    assert not result.success
    assert [p.name for p in named.fired] == ["benchmark.grpc_status_14"]
    assert ok.success and not ok.fired


@pytest.mark.timeout(60)
def test_deadline_exceeded(tmp_path: Path) -> None:
    # The server's handler outlives the deadline we sent: grpcio ends the call with
    # DEADLINE_EXCEEDED, well before our own request time-out.
    peer = Peer(tmp_path, "--sleep", "2")
    try:
        result = run(f"grpc://127.0.0.1:{peer.port}", requests=4, rps=20,
                     grpc_method="/test.Peer/Status", grpc_deadline="100ms",
                     request_timeout="20s", no_default_failure_predicates=True,
                     allow_no_success=True)
    finally:
        peer.close()
    assert result.counters["benchmark.grpc_status_4"] == 4
    assert result.counters["benchmark.request_timeout"] == 0


def _make_cert(tmp: Path) -> tuple[Path, Path]:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed")
    cert, key = tmp / "cert.pem", tmp / "key.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   check=True, capture_output=True)
    return cert, key


@pytest.mark.timeout(60)
def test_grpcs_over_tls(tmp_path: Path) -> None:
    cert, key = _make_cert(tmp_path)
    peer = Peer(tmp_path, "--cert", str(cert), "--key", str(key))
    try:
        result = run(f"grpcs://127.0.0.1:{peer.port}", requests=20, cacert=str(cert))
        fortio_style = run(f"https://127.0.0.1:{peer.port}", grpc=True, requests=10,
                           cacert=str(cert))
        calls = peer.calls()
    finally:
        peer.close()
    assert result.counters["benchmark.grpc_status_0"] == 20 and result.success
    assert result.counters["ssl.handshake"] == result.counters["upstream_cx_total"] >= 1
    assert fortio_style.counters["benchmark.grpc_status_0"] == 10
    assert len(calls) == 30


# ---- against Fortio -----------------------------------------------------------------------

def _free_ports(count: int) -> list[int]:
    # Every socket stays bound until all are chosen, so the ports differ (one released at
    # once could be handed out again by the next bind).
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for s in sockets:
            s.close()


@pytest.fixture
def fortio_grpc() -> Iterator[int]:
    binary = fortio_binary()
    if binary is None:
        pytest.skip("fortio is not installed (go install fortio.org/fortio@v1.66.5)")
    port, http_port = _free_ports(2)
    proc = subprocess.Popen(
        [binary, "server", "-grpc-port", f"127.0.0.1:{port}", "-http-port",
         f"127.0.0.1:{http_port}", "-redirect-port", "disabled", "-tcp-port", "disabled",
         "-udp-port", "disabled"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=os.getcwd(),
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.fail("fortio server did not start")
                time.sleep(0.05)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.timeout(60)
def test_fortio_ping_with_payload_and_delay(fortio_grpc: int) -> None:
    # Fortio's own spelling: -grpc -ping on an http:// URL, the ping's payload and delay.
    result = run(f"http://127.0.0.1:{fortio_grpc}", grpc=True, ping=True, payload="hello",
                 grpc_ping_delay="20ms", requests=20)
    assert result.counters["benchmark.grpc_status_0"] == 20 and result.success
    body = result.stat("benchmark_http_client.response_body_size")
    # The server echoes the message (payload included) with its own ts: frame + more than
    # the payload's 7 bytes.
    assert body.min > 5 + 7
    # Each answer waited the delay we asked for (a lower bound the server guarantees).
    latency = result.stat("benchmark_http_client.request_to_response")
    assert latency.min >= 0.020


@pytest.mark.timeout(60)
def test_fortio_health_and_sized_payload(fortio_grpc: int) -> None:
    health = run(f"127.0.0.1:{fortio_grpc}", grpc=True, requests=10)
    assert health.counters["benchmark.grpc_status_0"] == 10
    sized = run(f"grpc://127.0.0.1:{fortio_grpc}", ping=True, payload_size=1000, requests=10)
    assert sized.counters["benchmark.grpc_status_0"] == 10
    body = sized.stat("benchmark_http_client.response_body_size")
    assert body.min > 1000


# ---- a scripted peer: what no correct server sends ----------------------------------------

def _grpc_responder(reply: bytes | None, *, trailers: bytes | None, initial: bytes = b"",
                    served: list[int] | None = None):
    """A connection handler that answers every request stream with a 200 HEADERS block
    (plus `initial` fields), then DATA `reply` (when not None), then a trailers block of
    `trailers` (or END_STREAM on the DATA when None)."""

    def handle(conn: socket.socket) -> None:
        def on_frame(kind: int, flags: int, stream: int, _payload: bytes) -> None:
            if kind == h2.DATA and flags & h2.END_STREAM:
                out = h2.frame(h2.HEADERS, h2.END_HEADERS
                               | (h2.END_STREAM if reply is None and trailers is None else 0),
                               stream, h2.STATUS_200 + initial)
                if reply is not None:
                    out += h2.frame(h2.DATA, h2.END_STREAM if trailers is None else 0, stream,
                                    reply)
                if trailers is not None:
                    out += h2.frame(h2.HEADERS, h2.END_HEADERS | h2.END_STREAM, stream,
                                    trailers)
                conn.sendall(out)
                if served is not None:
                    served.append(stream)

        h2.serve(conn, on_frame)

    return handle


def _status(code: bytes, message: bytes = b"") -> bytes:
    out = h2.hpack_literal(b"grpc-status", code)
    return out + (h2.hpack_literal(b"grpc-message", message) if message else b"")


@pytest.mark.core
@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("reply", "trailers", "initial", "counter"),
    [
        # A well-formed OK call: the control case.
        (_grpc.frame(b"\x08\x01"), _status(b"0"), b"", "benchmark.grpc_status_0"),
        # Trailers-only: the status in the one header block, no DATA.
        (None, None, _status(b"14", b"a%20b"), "benchmark.grpc_status_14"),
        # No grpc-status at all.
        (_grpc.frame(b"\x08\x01"), None, b"", "benchmark.grpc_protocol_error"),
        # Trailers without grpc-status.
        (_grpc.frame(b""), h2.hpack_literal(b"x-other", b"1"), b"",
         "benchmark.grpc_protocol_error"),
        # A length prefix that announces more than the DATA carries.
        (b"\0\0\0\0\x10abc", _status(b"0"), b"", "benchmark.grpc_protocol_error"),
        # A cut prefix.
        (b"\0\0\0", _status(b"0"), b"", "benchmark.grpc_protocol_error"),
        # A compressed flag that is neither 0 nor 1.
        (b"\x07\0\0\0\x01a", _status(b"0"), b"", "benchmark.grpc_protocol_error"),
        # Garbage and out-of-range statuses, a leading zero.
        (_grpc.frame(b""), _status(b"abc"), b"", "benchmark.grpc_protocol_error"),
        (_grpc.frame(b""), _status(b"17"), b"", "benchmark.grpc_protocol_error"),
        (_grpc.frame(b""), _status(b"014"), b"", "benchmark.grpc_protocol_error"),
        (_grpc.frame(b""), _status(b""), b"", "benchmark.grpc_protocol_error"),
        # Two statuses: which one is meant is a guess, so neither counts.
        (_grpc.frame(b""), _status(b"0") + _status(b"0"), b"", "benchmark.grpc_protocol_error"),
    ],
    ids=["ok", "trailers-only", "no-status", "trailers-without-status", "short-message",
         "cut-prefix", "bad-flag", "status-garbage", "status-17", "status-leading-zero",
         "status-empty", "two-statuses"],
)
def test_scripted_peer_responses_are_counted(reply: bytes | None, trailers: bytes | None,
                                             initial: bytes, counter: str) -> None:
    served: list[int] = []
    with ScriptedOrigin(handler=_grpc_responder(reply, trailers=trailers, initial=initial,
                                                served=served)) as origin:
        result = run(f"grpc://127.0.0.1:{origin.port}", requests=12, connections=1,
                     no_default_failure_predicates=True, allow_no_success=True)
    assert len(served) == 12
    assert result.counters[counter] == 12
    finished = (result.counters["benchmark.http_2xx"] + result.error_count)
    assert finished == 12
    if counter == "benchmark.grpc_protocol_error":
        assert result.error.startswith("gRPC: a response")
        # A valid status is counted by its code even when the framing broke.
        valid = trailers == _status(b"0")
        assert result.counters["benchmark.grpc_status_0"] == (12 if valid else 0)
    if counter == "benchmark.grpc_status_14":
        assert result.error == "gRPC: status 14 (UNAVAILABLE): a b"


@pytest.mark.core
@pytest.mark.timeout(60)
def test_scripted_peer_message_split_over_data_frames() -> None:
    # Two messages, split at every byte boundary over DATA frames: the framing follows them.
    message = _grpc.frame(b"x" * 10) + _grpc.frame(b"")
    served: list[int] = []

    def handle(conn: socket.socket) -> None:
        def on_frame(kind: int, flags: int, stream: int, _payload: bytes) -> None:
            if kind == h2.DATA and flags & h2.END_STREAM:
                out = h2.frame(h2.HEADERS, h2.END_HEADERS, stream, h2.STATUS_200)
                out += b"".join(h2.frame(h2.DATA, 0, stream, message[i:i + 1])
                                for i in range(len(message)))
                out += h2.frame(h2.HEADERS, h2.END_HEADERS | h2.END_STREAM, stream,
                                _status(b"0"))
                conn.sendall(out)
                served.append(stream)

        h2.serve(conn, on_frame)

    with ScriptedOrigin(handler=handle) as origin:
        result = run(f"grpc://127.0.0.1:{origin.port}", requests=5, connections=1)
    assert len(served) == 5
    assert result.counters["benchmark.grpc_status_0"] == 5 and result.success


# ---- bad input ----------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("grpc://127.0.0.1:1", "--grpc-method", "Health/Check"),
         "--grpc-method: must be a gRPC method path"),
        (("grpc://127.0.0.1:1", "--grpc-method", "/a.B/C", "--grpc-payload", "/nonexistent/x"),
         "--grpc-payload: no such file"),
        (("http://127.0.0.1:1/", "--grpc-method", "/a.B/C"),
         "--grpc-method: only applies to grpc:// and grpcs:// URIs"),
        (("http://127.0.0.1:1/", "-ping"), "--ping: only applies to grpc://"),
        (("grpc://127.0.0.1:1", "--grpc-ping-delay", "1s"), "--grpc-ping-delay: needs --ping"),
        (("grpc://127.0.0.1:1", "-ping", "--grpc-method", "/a.B/C"),
         "mutually exclusive with"),
        (("grpc://127.0.0.1:1", "--payload", "x"), "--payload: does not apply to gRPC runs"),
        (("grpc://127.0.0.1:1", "--protocol", "http1"), "gRPC runs over HTTP/2"),
        (("grpc://127.0.0.1:1", "-X", "PUT"), "a gRPC call is always a POST"),
        (("grpc://127.0.0.1:1", "--template"), "--template: does not apply to gRPC runs"),
        (("grpc://127.0.0.1:1", "--grpc-deadline", "soon"), "--grpc-deadline"),
        (("grpc://127.0.0.1:1", "--failure-predicate", "benchmark.grpc_status_17:0"),
         "benchmark.grpc_status_17"),
    ],
)
def test_bad_grpc_input(args: tuple[str, ...], expected: str) -> None:
    assert_one_line_error(nhbench_cli("run", *args), expected)


def test_empty_grpc_payload_file_is_an_empty_message(tmp_path: Path) -> None:
    empty = tmp_path / "empty.bin"
    empty.write_bytes(b"")
    options = nhbench.Options(uri="grpc://127.0.0.1:1", grpc_method="/a.B/C",
                              grpc_payload=str(empty))
    (spec,) = client_core_config(options, "127.0.0.1")["specs"]
    assert spec["request"].endswith(b"\0\0\0\0\0") and spec["body_size"] == 5


def test_human_output_has_a_grpc_status_line(peer: Peer) -> None:
    proc = nhbench_cli("run", f"grpc://127.0.0.1:{peer.port}", "-n", "6", "--rps", "100")
    assert proc.returncode == 0, proc.stderr
    assert "gRPC status:    6 OK" in proc.stdout
    assert "gRPC over HTTP/2 over cleartext" in proc.stdout

