"""HTTP/3 through CONNECT-UDP on an HTTP/2 stream (RFC 9298 over RFC 8441 extended CONNECT;
docs/engine.md, "Proxies and tunnels"): ``--proxy http[s]://host:port --proxy-protocol
http2`` and Nighthawk's ``-p http3 --tunnel-protocol http2 --tunnel-uri ...``.

The proxy is our stand-in on the ``h2`` library (tests/support/masque_h2_proxy.py), because
no packaged CONNECT-UDP-over-HTTP/2 proxy exists here; it logs every CONNECT it receives and
relays DATAGRAM capsules to the target. The origin is nhbench's test server with its
``--http3`` listener (in-process), whose request counter is compared with the client's 2xx:
every response counted went through the proxy, since the client only ever connects to the
proxy's TCP port.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
from support.cli import nhbench_cli
from support.connect_udp import assert_tunnelled_run, requests_served
from support.masque_h2_proxy import masque_h2_proxy
from support.sockets import reserved_port

import nhbench

pytestmark = [pytest.mark.core, pytest.mark.peer, pytest.mark.timeout(180)]

RUN: dict[str, Any] = {"protocol": "http3", "rps": 100, "requests": 60, "connections": 3,
                       "concurrency": 3, "timeout": 5}
FAILING: dict[str, Any] = {"no_default_failure_predicates": True, "allow_no_success": True}


@pytest.fixture(scope="module")
def origin() -> Iterator[nhbench.TestServer]:
    with nhbench.TestServer("127.0.0.1:0", tls_self_signed=True, http3=True) as server:
        yield server




@pytest.mark.parametrize("tls", [True, False], ids=["https", "h2c"])
@pytest.mark.parametrize("mode", ["ok", "split"])
def test_every_connection_opens_one_connect_udp(origin: nhbench.TestServer, tls: bool,
                                                mode: str) -> None:
    before = requests_served(origin)
    with masque_h2_proxy(tls=tls, mode=mode) as proxy:
        extra = {"proxy_cacert": proxy.ca_cert} if tls else {}
        result = nhbench.run(origin.url, cacert=origin.ca_cert, proxy=proxy.url,
                             proxy_protocol="http2", **extra, **RUN)
        connects = proxy.connects()
    assert_tunnelled_run(result, connects, origin, before, proxy.port, RUN["requests"])


def test_proxy_credentials_go_in_the_connect(origin: nhbench.TestServer) -> None:
    with masque_h2_proxy(tls=False) as proxy:
        url = proxy.url.replace("http://", "http://user:s%40cret@")
        result = nhbench.run(origin.url, cacert=origin.ca_cert, proxy=url,
                             proxy_protocol="http2",
                             **{**RUN, "requests": 5, "connections": 1, "concurrency": 1})
        connects = proxy.connects()
    assert result.counters["benchmark.http_2xx"] == 5
    token = base64.b64encode(b"user:s@cret").decode()
    assert [x["proxy-authorization"] for x in connects] == [f"Basic {token}"]


def test_proxy_refusing_is_counted(origin: nhbench.TestServer) -> None:
    before = requests_served(origin)
    with masque_h2_proxy(mode="refuse") as proxy:
        result = nhbench.run(origin.url, cacert=origin.ca_cert, proxy=proxy.url,
                             proxy_protocol="http2", proxy_cacert=proxy.ca_cert, **FAILING,
                             **{**RUN, "requests": 5, "connections": 1, "concurrency": 1})
        connects = proxy.connects()
    c = result.counters
    assert c["tunnel.non_2xx"] >= 1 and c["tunnel.non_2xx"] == len(connects)
    assert c["tunnel.non_2xx"] == c["upstream_cx_total"]
    assert c.get("tunnel.established", 0) == 0
    assert c.get("benchmark.http_2xx", 0) == 0
    assert c["benchmark.pool_connection_failure"] == 5
    assert "the proxy answered 403 to CONNECT-UDP" in (result.error or "")
    assert requests_served(origin) == before


def test_a_closed_proxy_port_is_a_connect_failure(origin: nhbench.TestServer) -> None:
    with reserved_port() as port:  # bound, never listened on: the TCP connect is refused
        result = nhbench.run(origin.url, cacert=origin.ca_cert, proxy=f"http://127.0.0.1:{port}",
                             proxy_protocol="http2", **FAILING,
                             **{**RUN, "requests": 3, "connections": 1, "concurrency": 1})
    c = result.counters
    assert c["tunnel.connect_fail"] >= 1
    assert c["tunnel.connect_fail"] == c["upstream_cx_total"]
    assert c.get("tunnel.timeout", 0) == 0
    assert c.get("benchmark.http_2xx", 0) == 0
    assert "could not connect to the proxy" in (result.error or "")


def test_the_proxy_certificate_is_checked(origin: nhbench.TestServer) -> None:
    with masque_h2_proxy() as proxy:
        refused = nhbench.run(origin.url, cacert=origin.ca_cert, proxy=proxy.url,
                              proxy_protocol="http2", **FAILING,
                              **{**RUN, "requests": 3, "connections": 1, "concurrency": 1})
        trusted = nhbench.run(origin.url, cacert=origin.ca_cert, proxy=proxy.url,
                              proxy_protocol="http2", proxy_insecure=True,
                              **{**RUN, "requests": 3, "connections": 1, "concurrency": 1})
        connects = proxy.connects()
    # The system store does not trust the proxy's self-signed certificate: no CONNECT sent.
    assert refused.counters["tunnel.tls_fail"] == refused.counters["upstream_cx_total"] >= 1
    assert refused.counters.get("benchmark.http_2xx", 0) == 0
    assert "TLS handshake with the proxy failed: certificate verify failed" in (
        refused.error or "")
    assert trusted.counters["benchmark.http_2xx"] == 3
    assert len(connects) == trusted.counters["tunnel.established"]


def test_the_command_line_spellings(origin: nhbench.TestServer) -> None:
    """nhbench's --proxy/--proxy-protocol and Nighthawk's --tunnel-protocol/--tunnel-uri
    (with --tunnel-tls-context's trusted_ca: TLS to the proxy, its chain verified)."""
    with masque_h2_proxy() as proxy:
        runs = {
            "run": nhbench_cli(
                "run", "--protocol", "http3", "--cacert", origin.ca_cert, "--proxy",
                proxy.url, "--proxy-protocol", "http2", "--proxy-cacert", proxy.ca_cert,
                "--rps", "50", "--duration", "1", "--connections", "2", "--output-format",
                "json", origin.url),
            "nighthawk": nhbench_cli(
                "nighthawk", "client", "-p", "http3", "--tunnel-protocol", "http2",
                "--tunnel-uri", f"127.0.0.1:{proxy.port}", "--tunnel-tls-context",
                json.dumps({"common_tls_context": {"validation_context": {
                    "trusted_ca": {"filename": proxy.ca_cert}}}}),
                "--rps", "50", "--duration", "1", "--connections", "2",
                "--output-format", "json", origin.url),
        }
        connects = proxy.connects()
    total = 0
    for name, proc in runs.items():
        assert proc.returncode == 0, (name, proc.stderr)
        result = next(r for r in json.loads(proc.stdout)["results"] if r["name"] == "global")
        c = {x["name"]: int(x["value"]) for x in result["counters"]}
        assert c["benchmark.http_2xx"] > 0, name
        assert c["tunnel.established"] == c["upstream_cx_total"], name
        assert "benchmark_http_client.tunnel_setup" in {s["id"] for s in result["statistics"]}
        total += c["upstream_cx_total"]
    assert len(connects) == total
