"""benchmarks/peer_compare.py's echo and gRPC rows, against real peers.

The benchmark itself is a measurement, never a test; what is tested here is what makes its
echo and gRPC rows mean something: the one-call gRPC check that must pass before h2load (which
sees only :status) is trusted, Fortio's tcp-echo row counted exactly (the test server's own
byte count agrees), and the nhbench rows' flags read by nhbench's own command line.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from support.peers import fortio_binary

from benchmarks.nginx_origin import NginxError, NginxOrigin

pytestmark = pytest.mark.peer

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
# The benchmarks pin their processes; any CPU this process may use will do here.
CPU = min(os.sched_getaffinity(0))


@pytest.fixture(scope="module")
def pc() -> ModuleType:
    """benchmarks/peer_compare.py as a module (it is a script: `common` is a sibling)."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        return importlib.import_module("peer_compare")
    finally:
        sys.path.remove(str(BENCHMARKS))


@pytest.fixture(scope="module")
def fortio_grpc(pc: ModuleType) -> Iterator[str]:
    """`fortio server` started by the benchmark's own target code: its grpc:// URL."""
    if fortio_binary() is None:
        pytest.skip("fortio is not installed (go install fortio.org/fortio@v1.66.5)")
    if shutil.which("nghttp") is None:
        pytest.skip("nghttp is not installed (nghttp2-client)")
    with pc.fortio_target(CPU) as target:
        yield target.urls["grpc"]


def test_grpc_probe_passes_a_grpc_server_for_both_calls(pc: ModuleType, fortio_grpc: str) -> None:
    assert pc.grpc_probe(fortio_grpc, "health") is None
    assert pc.grpc_probe(fortio_grpc, "ping") is None


def test_grpc_probe_names_the_status_of_a_method_the_server_lacks(
    pc: ModuleType, fortio_grpc: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The ping service's name in the issue text; Fortio's proto package is fgrpc, so its
    # server does not know it (12 = UNIMPLEMENTED).
    monkeypatch.setitem(pc.GRPC_PATHS, "wrong", "/fortio.PingServer/Ping")
    assert pc.grpc_probe(fortio_grpc, "wrong") == (
        "the target answered /fortio.PingServer/Ping with grpc-status 12")


def test_grpc_probe_refuses_an_http2_server_that_is_not_grpc(pc: ModuleType) -> None:
    # nginx answers the POST over h2c with an HTTP status, as any HTTP/2 server would, and
    # h2load would count it as a success: the probe must not.
    if shutil.which("nghttp") is None:
        pytest.skip("nghttp is not installed (nghttp2-client)")
    try:
        origin = NginxOrigin(access_log=False, listeners=("h2c",))
        origin.__enter__()
    except NginxError as e:
        pytest.skip(str(e))
    try:
        url = "grpc://" + origin.url("h2c").split("://", 1)[1].rstrip("/")
        assert pc.grpc_probe(url, "health") == (
            "the target does not answer gRPC: no grpc-status in the response to "
            "/grpc.health.v1.Health/Check")
    finally:
        origin.__exit__(None, None, None)


def test_fortio_tcp_echo_row_counts_what_the_server_echoed(pc: ModuleType) -> None:
    import nhbench

    if fortio_binary() is None:
        pytest.skip("fortio is not installed (go install fortio.org/fortio@v1.66.5)")
    sc = pc.Scenario("tcp-echo", "tcp echo", 0, 2, 0.3, "tcp-echo", payload_size=100)
    cfg = argparse.Namespace(client_cpu=CPU)
    with nhbench.TestServer(tcp_echo="127.0.0.1:0") as server:
        host, port = server.tcp_echo_address
        sample = pc.Fortio().measure(sc, f"tcp://{host}:{port}", cfg)
        echoed = server.stats()["tcp_echo_bytes"]
    assert sample.failed is None, sample.failed
    assert sample.requests > 0 and sample.errors == {}
    # Fortio's byte counts include its warm-up calls (one per connection), as the server's do.
    assert sample.extra["bytes_sent"] == sample.extra["bytes_received"] == echoed
    assert echoed == 100 * (sample.requests + 2)


def test_nhbench_rows_are_written_in_the_documented_flags(pc: ModuleType) -> None:
    import nhbench

    # The values stay the command line's text: Options turns them into its types, as for
    # `nhbench run`.
    given = pc._cli_options(["--payload-size", "64"])
    assert given == {"payload_size": "64"}
    assert nhbench.Options(uri="http://127.0.0.1/", **given).payload_size == 64
    with pytest.raises(ValueError, match="unrecognized arguments: --no-such-flag"):
        pc._cli_options(["--no-such-flag"])
    # The gRPC rows' flags are nhbench's: each call's flags make
    # a gRPC run against the scenario's URL, and the ping row calls Fortio's ping.
    for call, args in pc.NHBENCH_GRPC_ARGS.items():
        options = nhbench.Options(uri="grpc://127.0.0.1:8079", **pc._cli_options(list(args)))
        assert options.is_grpc
        assert options.ping == (call == "ping")
