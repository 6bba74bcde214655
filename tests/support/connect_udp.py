"""What the CONNECT-UDP tests of both proxy legs check the same way (tests/test_proxy_udp.py
over HTTP/3, tests/test_proxy_udp_h2.py over HTTP/2): the origin's own request count, and a
run whose every connection opened one extended CONNECT naming the origin."""

from __future__ import annotations

from typing import Any

import nhbench
from support.polling import wait_until

__all__ = ["assert_tunnelled_run", "requests_served", "settled"]


def requests_served(server: nhbench.TestServer) -> int:
    return int(server.stats()["requests"])


def settled(server: nhbench.TestServer, before: int, count: int) -> int:
    """The origin's requests since `before`, once it counted `count` of them (the last
    response counts when its packet is written, a moment after the client has it)."""
    wait_until(lambda: requests_served(server) - before >= count, timeout=10)
    return requests_served(server) - before


def assert_tunnelled_run(result: nhbench.Result, connects: list[dict[str, Any]],
                         origin: nhbench.TestServer, before: int, proxy_port: int,
                         requests: int) -> None:
    """Every request answered through the tunnels, the origin counting exactly those, and
    one extended CONNECT per connection in the default URI template, without credentials."""
    c = result.counters
    assert c["benchmark.http_2xx"] == requests, (c, result.error)
    assert settled(origin, before, requests) == requests
    host, port = origin.address[:2]
    assert len(connects) == c["upstream_cx_total"] == c["tunnel.established"] >= 1
    for connect in connects:
        assert connect[":method"] == "CONNECT" and connect[":protocol"] == "connect-udp"
        assert connect[":scheme"] == "https"
        assert connect[":authority"] == f"127.0.0.1:{proxy_port}"
        assert connect[":path"] == f"/.well-known/masque/udp/{host}/{port}/"
        assert connect["capsule-protocol"] == "?1"
        assert connect["proxy-authorization"] is None
    # The QUIC handshake with the origin ran inside the tunnel, once per connection.
    assert c["ssl.handshake"] == c["upstream_cx_total"]
    assert result.stat("benchmark_http_client.tunnel_setup").count == c["upstream_cx_total"]
    assert c.get("tunnel.datagrams_dropped", 0) == 0
    assert result.error_count == 0
