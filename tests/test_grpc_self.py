"""nhbench's gRPC client against nhbench's gRPC test server.

Each side is tested against an independent peer in its own file (tests/test_grpc_client.py:
grpcio and Fortio servers; tests/test_grpc_server.py: grpcio and Fortio clients). This file
checks that the two halves agree with each other, so that `nhbench server` is a gRPC target
for `nhbench run grpc://` as the issue asks ("nhbench can test itself"): every call the
client counts is a call the server counts, by status, over h2c and TLS.
"""

from __future__ import annotations

import time

import pytest

import nhbench

pytestmark = pytest.mark.core


def grpc_counts(server: nhbench.TestServer, expected: int) -> tuple[int, int]:
    """The server's (grpc_calls, grpc_errors) once `expected` calls are counted (a call is
    counted when its last frame is written, which may follow the client's response)."""
    deadline = time.monotonic() + 5
    while True:
        st = server.stats()
        if st["grpc_calls"] >= expected or time.monotonic() > deadline:
            return st["grpc_calls"], st["grpc_errors"]
        time.sleep(0.02)


@pytest.mark.parametrize("tls", [False, True], ids=["h2c", "tls"])
def test_health_check_counts_agree(tls: bool) -> None:
    with nhbench.TestServer(tls_self_signed=tls) as s:
        host, port = s.address
        uri = f"grpcs://localhost:{port}" if tls else f"grpc://{host}:{port}"
        extra = {"cacert": s.ca_cert} if tls else {}
        result = nhbench.run(uri, requests=300, rps=0, connections=3, **extra)
        assert result.counters["benchmark.grpc_status_0"] == 300
        assert result.counters["benchmark.http_2xx"] == 300
        assert result.error_count == 0
        assert grpc_counts(s, 300) == (300, 0)


def test_ping_payload_and_delay_round_trip() -> None:
    with nhbench.TestServer() as s:
        host, port = s.address
        # Fortio's spelling: -grpc -ping with a payload and a server-side delay.
        result = nhbench.run(f"http://{host}:{port}", grpc=True, ping=True, payload="x" * 1000,
                             grpc_ping_delay="5ms", requests=40, rps=0, connections=2)
        assert result.counters["benchmark.grpc_status_0"] == 40
        assert grpc_counts(s, 40) == (40, 0)
        # The reply echoes the payload: each response message is a framed PingMessage of
        # more than the 1000 payload bytes.
        body = result.stat("benchmark_http_client.response_body_size")
        assert body.min > 1000 + 5
        # Every call waited for its 5 ms delay on the server.
        latency = result.stat("benchmark_http_client.request_to_response")
        assert latency.min >= 0.005


def test_unknown_method_is_counted_by_status_on_both_sides() -> None:
    with nhbench.TestServer() as s:
        host, port = s.address
        result = nhbench.run(f"grpc://{host}:{port}", grpc_method="/no.Such/Method",
                             requests=25, rps=0, connections=1,
                             no_default_failure_predicates=True, allow_no_success=True)
        assert result.counters["benchmark.grpc_status_12"] == 25
        assert result.counters["benchmark.grpc_error"] == 25
        assert result.counters.get("benchmark.http_2xx", 0) == 0
        assert grpc_counts(s, 25) == (25, 25)
