"""A malicious CONNECT-UDP-over-HTTP/2 proxy against the client's tunnels
(csrc/client/tunnel_udp_h2.c).

The proxy is our stand-in on the ``h2`` library (tests/support/masque_h2_proxy.py: no
packaged CONNECT-UDP-over-HTTP/2 peer exists here) in one of its misbehaving modes; the
origin is nhbench's test server over HTTP/3. Capsules that carry nothing for the tunnelled
connection (unknown types, another context id, no payload, a payload larger than any QUIC
packet) are skipped or dropped and counted while the run goes on; a proxy without extended
CONNECT or h2 by ALPN, one that refuses, resets, sends GOAWAY, DATA before its answer, ends
its stream inside a capsule or never answers fails the tunnel by cause. No crash, no hang,
nothing uncounted.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from support.masque_h2_proxy import masque_h2_proxy
from support.polling import wait_until

import nhbench

pytestmark = [pytest.mark.hostile, pytest.mark.core, pytest.mark.timeout(180)]

RUN: dict[str, Any] = {"protocol": "http3", "rps": 50, "requests": 20, "connections": 1,
                       "concurrency": 1, "timeout": 4, "no_default_failure_predicates": True,
                       "allow_no_success": True}


@pytest.fixture(scope="module")
def origin() -> Iterator[nhbench.TestServer]:
    with nhbench.TestServer("127.0.0.1:0", tls_self_signed=True, http3=True) as server:
        yield server


def _run(origin: nhbench.TestServer, mode: str, **extra: Any) -> nhbench.Result:
    with masque_h2_proxy(mode=mode) as proxy:
        return nhbench.run(origin.url, cacert=origin.ca_cert, proxy=proxy.url,
                           proxy_protocol="http2", proxy_cacert=proxy.ca_cert,
                           **{**RUN, **extra})


def test_stray_and_oversized_capsules_are_skipped_and_counted(
        origin: nhbench.TestServer) -> None:
    result = _run(origin, "capsules")
    c = result.counters
    # The real capsules still carried every request.
    assert c["benchmark.http_2xx"] == RUN["requests"], (c, result.error)
    assert c["tunnel.established"] == c["upstream_cx_total"] == 1, c
    # Context id 1, an empty payload and the 5000-byte one; the unknown types are skipped
    # (RFC 9297 section 3.2), uncounted.
    assert c["tunnel.datagrams_dropped"] == 3, c
    assert result.error_count == 0


@pytest.mark.parametrize(("mode", "counter", "why"), [
    ("no-extended-connect", "tunnel.protocol_error",
     "does not offer extended CONNECT (SETTINGS_ENABLE_CONNECT_PROTOCOL)"),
    ("refuse", "tunnel.non_2xx", "the proxy answered 403 to CONNECT-UDP"),
    ("goaway", "tunnel.reset", "GOAWAY PROTOCOL_ERROR"),
    ("data-first", "tunnel.protocol_error", "the proxy broke HTTP/2"),
    ("http1-alpn", "tunnel.tls_fail", "ALPN: the proxy did not select h2"),
])
def test_a_tunnel_that_never_comes_up_fails_by_cause(origin: nhbench.TestServer, mode: str,
                                                     counter: str, why: str) -> None:
    before = origin.stats()["requests"]
    result = _run(origin, mode)
    c = result.counters
    assert c[counter] >= 1
    assert c[counter] == c["upstream_cx_total"], c
    assert c.get("tunnel.established", 0) == 0
    assert c.get("benchmark.http_2xx", 0) == 0
    assert c["benchmark.pool_connection_failure"] == RUN["requests"]
    assert why in (result.error or "")
    assert origin.stats()["requests"] == before


def test_a_silent_proxy_is_a_counted_timeout(origin: nhbench.TestServer) -> None:
    result = _run(origin, "silent", timeout=1, requests=3)
    c = result.counters
    # No SETTINGS, no answer: each connection's tunnel fails at --timeout, once.
    assert c["tunnel.timeout"] == c["upstream_cx_total"] >= 1, c
    assert c.get("tunnel.established", 0) == 0
    assert c.get("benchmark.http_2xx", 0) == 0
    assert "within --timeout" in (result.error or "")


def test_a_truncated_capsule_ends_the_tunnel(origin: nhbench.TestServer) -> None:
    result = _run(origin, "truncated-capsule")
    c = result.counters
    # The stream ends inside a capsule right after the 2xx (RFC 9297 section 3.3): counted
    # once per tunnel, and the requests riding along fail with it.
    assert c["tunnel.protocol_error"] >= 1
    assert c["tunnel.established"] == c["tunnel.protocol_error"] == c["upstream_cx_total"]
    assert "its stream ended inside a capsule" in (result.error or "")
    assert c.get("benchmark.http_2xx", 0) == 0


def test_a_reset_stream_is_counted_and_the_next_tunnel_carries_on(
        origin: nhbench.TestServer) -> None:
    before = origin.stats()["requests"]
    result = _run(origin, "reset", requests=None, duration=2)
    c = result.counters
    # Each tunnel is reset 0.5 s after its 2xx; the next connection opens a new one.
    assert c["tunnel.reset"] >= 2, c
    assert c["tunnel.established"] >= c["tunnel.reset"], c
    ok = c["benchmark.http_2xx"]
    assert ok >= 40, c
    assert "the proxy reset the CONNECT-UDP stream (CANCEL)" in (result.error or "")
    # The origin answered every request the client counted, and at most one more per reset
    # (a request in flight at the reset can reach the origin while its response is lost).
    wait_until(lambda: origin.stats()["requests"] - before >= ok, timeout=10)
    served = origin.stats()["requests"] - before
    assert ok <= served <= ok + c["tunnel.reset"], (served, c)
