"""A malicious CONNECT-UDP proxy against the client's HTTP/3 tunnels (csrc/client/tunnel_udp.c).

The proxy is our aioquic-based stand-in (tests/support/masque_proxy.py: no packaged
CONNECT-UDP peer exists here) in one of its misbehaving modes; the origin is nhbench's test
server over HTTP/3. Datagrams that carry nothing for the tunnelled connection (another
stream's, another context id's, too short, a DATAGRAM capsule) are dropped and counted in
tunnel.datagrams_dropped while the run goes on; a proxy that breaks HTTP/3 on the CONNECT
stream fails the tunnel as tunnel.protocol_error. No crash, no hang, nothing uncounted.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from support.masque_proxy import masque_proxy

import nhbench

pytestmark = [pytest.mark.hostile, pytest.mark.core, pytest.mark.timeout(180)]

RUN: dict[str, Any] = {"protocol": "http3", "rps": 50, "requests": 20, "connections": 1,
                       "concurrency": 1, "timeout": 4, "no_default_failure_predicates": True,
                       "allow_no_success": True}


@pytest.fixture(scope="module")
def origin() -> Iterator[nhbench.TestServer]:
    with nhbench.TestServer("127.0.0.1:0", tls_self_signed=True, http3=True) as server:
        yield server


def _run(origin: nhbench.TestServer, mode: str) -> nhbench.Result:
    with masque_proxy(mode=mode) as proxy:
        return nhbench.run(origin.url, cacert=origin.ca_cert, proxy=proxy.url,
                           proxy_protocol="http3", proxy_cacert=proxy.ca_cert, **RUN)


@pytest.mark.parametrize("mode", ["unknown-stream", "context", "garbage", "capsules"])
def test_stray_datagrams_are_dropped_and_counted(origin: nhbench.TestServer,
                                                 mode: str) -> None:
    result = _run(origin, mode)
    c = result.counters
    # The real datagrams still carried every request.
    assert c["benchmark.http_2xx"] == RUN["requests"], (c, result.error)
    assert c["tunnel.established"] == c["upstream_cx_total"], c
    if mode == "garbage":
        # The random-payload datagrams reach the inner QUIC connection, which discards
        # what does not decrypt; the short ones are ours to drop.
        assert c["tunnel.datagrams_dropped"] >= 2, c
    elif mode == "capsules":
        assert c["tunnel.datagrams_dropped"] == 1, c  # the one DATAGRAM capsule
    else:
        # One stray per datagram the origin sent back through the proxy: its handshake
        # flights and the responses' packets (several responses may share one under load).
        assert c["tunnel.datagrams_dropped"] >= 3, c


def test_an_oversized_datagram_frame_ends_the_tunnel(origin: nhbench.TestServer) -> None:
    result = _run(origin, "oversize")
    c = result.counters
    # A DATAGRAM frame over the size we announced (max_datagram_frame_size) is a QUIC
    # protocol violation: each tunnel fails as a protocol error after its 2xx, and every
    # request is accounted for (a response, a connection failure or a reset).
    assert c["tunnel.protocol_error"] == c["tunnel.established"] >= 1, c
    assert "QUIC with the proxy failed" in (result.error or "")
    assert (c.get("benchmark.http_2xx", 0) + c["benchmark.pool_connection_failure"]
            + c["benchmark.stream_resets"]) == RUN["requests"]


@pytest.mark.parametrize(("mode", "why"), [
    ("frame-unexpected", "a frame a request stream must not carry"),
    ("bad-headers", "does not decode (QPACK)"),
    ("no-datagrams", "does not offer HTTP Datagrams (SETTINGS_H3_DATAGRAM)"),
])
def test_a_broken_answer_is_a_protocol_error(origin: nhbench.TestServer, mode: str,
                                             why: str) -> None:
    before = origin.stats()["requests"]
    result = _run(origin, mode)
    c = result.counters
    assert c["tunnel.protocol_error"] >= 1
    assert c["tunnel.protocol_error"] == c["upstream_cx_total"]
    assert c.get("tunnel.established", 0) == 0
    assert c.get("benchmark.http_2xx", 0) == 0
    assert c["benchmark.pool_connection_failure"] == RUN["requests"]
    assert why in (result.error or "")
    assert origin.stats()["requests"] == before


def test_a_truncated_capsule_ends_the_tunnel(origin: nhbench.TestServer) -> None:
    result = _run(origin, "truncated-capsule")
    c = result.counters
    # The stream ends inside a capsule right after the 2xx: counted once per tunnel, and
    # the requests riding along fail with it.
    assert c["tunnel.protocol_error"] >= 1
    assert c["tunnel.established"] == c["tunnel.protocol_error"] == c["upstream_cx_total"]
    assert "ended inside a frame or capsule" in (result.error or "")
    assert c.get("benchmark.http_2xx", 0) == 0
