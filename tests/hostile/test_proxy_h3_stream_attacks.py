"""A malicious HTTP/3 proxy against the client's TCP tunnels on HTTP/3 streams
(``--proxy-protocol http3`` for an HTTP/1.1 run: csrc/client/carrier.c's HTTP/3 leg,
csrc/client/tunnel_udp.c).

The proxy is our aioquic-based stand-in (tests/support/masque_proxy.py: no packaged HTTP/3
proxy exists here) in one of its misbehaving modes; the origin is nhbench's plain test
server. A proxy that breaks HTTP/3 on the CONNECT stream (a frame a request stream must not
carry, a header block that is not QPACK, DATA before the answer) fails each tunnel as
tunnel.protocol_error before any byte reaches the origin; garbage DATA after a 2xx reaches
the inner HTTP/1.1 parser, which refuses it as the origin's. No crash, no hang, nothing
uncounted.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.masque_proxy import masque_proxy

import nhbench

pytestmark = [pytest.mark.hostile, pytest.mark.core, pytest.mark.timeout(180)]

RUN: dict[str, Any] = {"rps": 50, "requests": 20, "connections": 1, "concurrency": 1,
                       "timeout": 4, "no_default_failure_predicates": True,
                       "allow_no_success": True}


def _run(origin: nhbench.TestServer, mode: str, **kw: Any) -> nhbench.Result:
    with masque_proxy(mode=mode) as proxy:
        return nhbench.run(origin.url, proxy=proxy.url, proxy_protocol="http3",
                           proxy_cacert=proxy.ca_cert, **{**RUN, **kw})


@pytest.mark.parametrize(("mode", "why"), [
    ("frame-unexpected", "a frame a request stream must not carry"),
    ("bad-headers", "does not decode (QPACK)"),
    ("data-first", "DATA before its answer's HEADERS"),
])
def test_a_broken_answer_is_a_protocol_error(plain_origin: nhbench.TestServer, mode: str,
                                             why: str) -> None:
    before = plain_origin.stats()["requests"]
    # Each failed tunnel doubles the pool's back-off: a few requests keep the test short.
    result = _run(plain_origin, mode, requests=6)
    c = result.counters
    assert c["tunnel.protocol_error"] == c["upstream_cx_total"] >= 1, (c, result.error)
    assert c.get("tunnel.established", 0) == 0
    assert why in (result.error or ""), result.error
    assert c["benchmark.pool_connection_failure"] == 6
    assert plain_origin.stats()["requests"] == before


def test_garbage_in_the_tunnel_is_the_origins_protocol_error(
        plain_origin: nhbench.TestServer) -> None:
    result = _run(plain_origin, "garbage-data")
    c = result.counters
    # Random bytes ahead of the origin's answer: the HTTP/1.1 parser refuses them, the
    # connection goes, and every request is accounted for.
    assert c["tunnel.established"] == c["upstream_cx_total"] >= 1, c
    assert c["upstream_cx_protocol_error"] >= 1, (c, result.error)
    assert (c.get("benchmark.http_2xx", 0) + c.get("benchmark.pool_connection_failure", 0)
            + c.get("benchmark.stream_resets", 0)) == RUN["requests"], c
