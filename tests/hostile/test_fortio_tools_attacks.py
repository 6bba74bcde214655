"""Fortio's ``grpcping`` and ``nc`` (compat/_fortio_grpcping.py, compat/_fortio_nc.py) against
hostile peers: answers that are not protobuf, absurd time stamps and statuses, an answer
over gRPC's size limit, a peer that floods nc.

Every case: the command ends (no hang), with the exit status Fortio's would have (1 for a
failed call), one line on stderr that names the problem, and no Python traceback.
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import pytest
from support.fortio_tools import fortio_tool_argv

grpc = pytest.importorskip("grpc")

pytestmark = [pytest.mark.hostile]

REPO = Path(__file__).resolve().parent.parent.parent
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def _run(command: str, target: str, stdin: bytes = b"", **values: Any
         ) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    return subprocess.run(fortio_tool_argv(command, target, **values), input=stdin,
                          capture_output=True,
                          timeout=60, cwd=REPO, env=env)


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


@pytest.fixture
def grpc_peer() -> Iterator[Callable[[Callable[[bytes, int], bytes]], str]]:
    """A grpcio server whose Ping and Check answer what the test's function returns (given
    the request and the call's number)."""
    servers: list[Any] = []

    def make(answer: Callable[[bytes, int], bytes]) -> str:
        calls = [0]

        def handle(request: bytes, context: Any) -> bytes:
            calls[0] += 1
            return answer(request, calls[0])

        method = grpc.unary_unary_rpc_method_handler(handle)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), handlers=[
            grpc.method_handlers_generic_handler("fgrpc.PingServer", {"Ping": method}),
            grpc.method_handlers_generic_handler("grpc.health.v1.Health", {"Check": method}),
        ])
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        servers.append(server)
        return f"127.0.0.1:{port}"

    yield make
    for server in servers:
        server.stop(None)


def _clean_failure(proc: subprocess.CompletedProcess[bytes], words: str) -> None:
    err = proc.stderr.decode()
    assert proc.returncode == 1, err
    assert "Traceback" not in err
    assert err.count("\n") == 1 and words in err, err


@pytest.mark.parametrize("answer", [
    b"\x08",                 # a varint cut short
    b"\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",  # a varint over 64 bits
    b"\x0f",                 # wire type 7
    b"\x1a\x10ab",           # a length past the end
    b"\x00\x01",             # field number 0
])
@pytest.mark.parametrize("health", [False, True])
def test_answers_that_are_not_protobuf(grpc_peer: Callable[..., str], answer: bytes,
                                       health: bool) -> None:
    # The warm-up Ping's answer is not read (Fortio's neither): break every answer.
    target = grpc_peer(lambda request, n: answer)
    _clean_failure(_run("grpcping", target, health=health), "not valid protobuf")


def test_absurd_time_stamps_do_not_break_the_histograms(grpc_peer: Callable[..., str]) -> None:
    # The server's ts swings from the smallest int64 to the largest: the round trip and
    # skew are huge, and still printed.
    def answer(request: bytes, n: int) -> bytes:
        return b"\x08\x01\x10" + _varint(INT64_MIN if n % 2 else INT64_MAX)

    proc = _run("grpcping", grpc_peer(answer), count=3)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.decode()
    assert "Clock skew histogram usec : count 3 " in out
    assert "RTT histogram usec : count 9 " in out


def test_a_health_status_that_is_no_name(grpc_peer: Callable[..., str]) -> None:
    proc = _run("grpcping", grpc_peer(lambda request, n: b"\x08\x63"), health=True, count=2)
    assert proc.returncode == 1
    assert "Health 99 : 2" in proc.stdout.decode()
    assert "unexpected SERVING count 0 vs 2" in proc.stderr.decode()


def test_an_answer_over_grpcs_limit(grpc_peer: Callable[..., str]) -> None:
    big = b"\x1a" + _varint(5 << 20) + b"x" * (5 << 20)
    _clean_failure(_run("grpcping", grpc_peer(lambda request, n: big)), "RESOURCE_EXHAUSTED")


def test_nc_under_a_flood_copies_every_byte() -> None:
    """A peer that sends 64 MiB at once and closes: nc writes it all out, in bounded
    memory (it copies 32 KiB at a time, as Fortio)."""
    size = 64 << 20
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)

    def flood() -> None:
        conn, _ = listener.accept()
        with conn:
            block = b"z" * (1 << 20)
            for _ in range(size >> 20):
                conn.sendall(block)

    thread = threading.Thread(target=flood, daemon=True)
    thread.start()
    try:
        proc = _run("nc", f"127.0.0.1:{listener.getsockname()[1]}")
    finally:
        listener.close()
    assert proc.returncode == 0
    assert len(proc.stderr) == size and proc.stderr.count(b"z") == size


def test_an_error_message_over_several_lines_stays_one_line() -> None:
    def aborting(request: bytes, context: Any) -> bytes:
        context.abort(grpc.StatusCode.INTERNAL, "first line\nsecond line\r\nthird")
        return b""

    method = grpc.unary_unary_rpc_method_handler(aborting)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), handlers=[
        grpc.method_handlers_generic_handler("fgrpc.PingServer", {"Ping": method})])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        proc = _run("grpcping", f"127.0.0.1:{port}")
    finally:
        server.stop(None)
    _clean_failure(proc, "INTERNAL: first line second line third")
