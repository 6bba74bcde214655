"""HTTP/3 through a CONNECT-UDP proxy (RFC 9298; docs/engine.md, "Proxies and tunnels"):
``--proxy https://host:port --proxy-protocol http3``.

The proxy is our aioquic-based stand-in (tests/support/masque_proxy.py), because no packaged
CONNECT-UDP peer exists here (Debian's squid, tinyproxy, nginx and nghttpx tunnel TCP only);
it logs every CONNECT it receives and relays HTTP Datagrams to the target. The origin is
nhbench's test server with its ``--http3`` listener (in-process), whose request counter is
compared with the client's 2xx: every response counted went through the proxy, since the
client only ever sends to the proxy's port.
"""

from __future__ import annotations

import base64
import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from support.cli import nhbench_cli
from support.connect_udp import assert_tunnelled_run, requests_served, settled
from support.masque_proxy import masque_proxy
from support.sockets import reserved_port

import nhbench

pytestmark = [pytest.mark.core, pytest.mark.peer, pytest.mark.timeout(180)]

RUN: dict[str, Any] = {"protocol": "http3", "rps": 100, "requests": 60, "connections": 3,
                       "concurrency": 1, "timeout": 5}


@pytest.fixture(scope="module")
def origin() -> Iterator[nhbench.TestServer]:
    with nhbench.TestServer("127.0.0.1:0", tls_self_signed=True, http3=True) as server:
        yield server




def test_every_connection_opens_one_connect_udp(origin: nhbench.TestServer) -> None:
    before = requests_served(origin)
    with masque_proxy() as proxy:
        result = nhbench.run(origin.url, cacert=origin.ca_cert, proxy=proxy.url,
                             proxy_protocol="http3", proxy_cacert=proxy.ca_cert, **RUN)
        connects = proxy.connects()
    assert_tunnelled_run(result, connects, origin, before, proxy.port, RUN["requests"])


def test_proxy_credentials_go_in_the_connect(origin: nhbench.TestServer) -> None:
    with masque_proxy() as proxy:
        url = proxy.url.replace("https://", "https://user:s%40cret@")
        result = nhbench.run(origin.url, cacert=origin.ca_cert, proxy=url,
                             proxy_protocol="http3", proxy_cacert=proxy.ca_cert,
                             **{**RUN, "requests": 5, "connections": 1})
        connects = proxy.connects()
    assert result.counters["benchmark.http_2xx"] == 5
    token = base64.b64encode(b"user:s@cret").decode()
    assert [x["proxy-authorization"] for x in connects] == [f"Basic {token}"]


def test_proxy_refusing_is_counted(origin: nhbench.TestServer) -> None:
    before = requests_served(origin)
    with masque_proxy(mode="refuse") as proxy:
        result = nhbench.run(origin.url, cacert=origin.ca_cert, proxy=proxy.url,
                             proxy_protocol="http3", proxy_cacert=proxy.ca_cert,
                             no_default_failure_predicates=True, allow_no_success=True,
                             **{**RUN, "requests": 5, "connections": 1})
        connects = proxy.connects()
    c = result.counters
    assert c["tunnel.non_2xx"] >= 1 and c["tunnel.non_2xx"] == len(connects)
    assert c.get("tunnel.established", 0) == 0
    assert c.get("benchmark.http_2xx", 0) == 0
    assert c["benchmark.pool_connection_failure"] == 5
    assert "the proxy answered 403 to CONNECT-UDP" in (result.error or "")
    assert requests_served(origin) == before


def test_proxy_closing_mid_run_is_counted(origin: nhbench.TestServer) -> None:
    before = requests_served(origin)
    with masque_proxy(close_after=0.5) as proxy:
        result = nhbench.run(origin.url, cacert=origin.ca_cert, proxy=proxy.url,
                             proxy_protocol="http3", proxy_cacert=proxy.ca_cert, rps=50,
                             duration=2, connections=1, timeout=5, protocol="http3",
                             no_default_failure_predicates=True)
        connects = proxy.connects()
    c = result.counters
    # Each tunnel ended under its connection; the next one opened a new tunnel.
    assert c["tunnel.proxy_closed"] >= 2, c
    assert c["tunnel.established"] == len(connects) >= 3
    ok = c["benchmark.http_2xx"]
    # 100 releases; a new tunnel through the Python proxy takes longer on a loaded machine
    # (CI saw 26 answered), so the count only has to show that requests went through.
    assert ok >= 15, c
    # The origin answered every request the client counted, and at most one more per tunnel
    # the proxy closed: a request in flight at the close can reach the origin while its
    # response is lost with the tunnel (one connection: one request in flight).
    served = settled(origin, before, ok)
    assert ok <= served <= ok + c["tunnel.proxy_closed"], (served, c)


def test_a_closed_proxy_port_is_a_connect_failure(origin: nhbench.TestServer) -> None:
    with reserved_port(kind=socket.SOCK_DGRAM) as port:  # ICMP port unreachable
        result = nhbench.run(origin.url, cacert=origin.ca_cert, proxy=f"https://127.0.0.1:{port}",
                             proxy_protocol="http3", proxy_insecure=True,
                             no_default_failure_predicates=True, allow_no_success=True,
                             **{**RUN, "requests": 3, "connections": 1})
    c = result.counters
    assert c["tunnel.connect_fail"] >= 1
    assert c["tunnel.connect_fail"] == c["upstream_cx_total"]
    assert c.get("tunnel.timeout", 0) == 0
    assert c.get("benchmark.http_2xx", 0) == 0
    assert "could not connect to the proxy" in (result.error or "") or \
        "the proxy's UDP port" in (result.error or "")


def test_the_proxy_certificate_is_checked(origin: nhbench.TestServer) -> None:
    with masque_proxy() as proxy:
        refused = nhbench.run(origin.url, cacert=origin.ca_cert, proxy=proxy.url,
                              proxy_protocol="http3", no_default_failure_predicates=True,
                              allow_no_success=True, **{**RUN, "requests": 3, "connections": 1})
        trusted = nhbench.run(origin.url, cacert=origin.ca_cert, proxy=proxy.url,
                              proxy_protocol="http3", proxy_insecure=True,
                              **{**RUN, "requests": 3, "connections": 1})
        connects = proxy.connects()
    # The system store does not trust the proxy's self-signed certificate: no CONNECT sent.
    assert refused.counters["tunnel.connect_fail"] >= 1
    assert refused.counters.get("benchmark.http_2xx", 0) == 0
    assert "TLS handshake with the proxy failed" in (refused.error or "")
    assert trusted.counters["benchmark.http_2xx"] == 3
    assert len(connects) == trusted.counters["tunnel.established"]


def test_the_command_line_spelling(origin: nhbench.TestServer) -> None:
    before = requests_served(origin)
    with masque_proxy() as proxy:
        proc = nhbench_cli("run", "--protocol", "http3", "--cacert", origin.ca_cert,
                           "--proxy", proxy.url, "--proxy-protocol", "http3",
                           "--proxy-cacert", proxy.ca_cert, "--rps", "50", "--duration", "1",
                           "--connections", "2", "--output-format", "json", origin.url)
        connects = proxy.connects()
    assert proc.returncode == 0, proc.stderr
    result = next(r for r in json.loads(proc.stdout)["results"] if r["name"] == "global")
    c = {x["name"]: int(x["value"]) for x in result["counters"]}
    assert c["benchmark.http_2xx"] > 0
    assert settled(origin, before, c["benchmark.http_2xx"]) == c["benchmark.http_2xx"]
    assert len(connects) == c["upstream_cx_total"] == c["tunnel.established"]
    assert "benchmark_http_client.tunnel_setup" in {s["id"] for s in result["statistics"]}
