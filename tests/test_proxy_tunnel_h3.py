"""TCP tunnels on HTTP/3 streams: ``--proxy https://host:port --proxy-protocol http3`` for an
HTTP/1.1 or HTTP/2 run, and Nighthawk's ``--tunnel-protocol http3`` (a classic CONNECT on a
request stream, RFC 9114 section 4.4; csrc/client/carrier.c's HTTP/3 leg on
csrc/client/tunnel_udp.c's QUIC; docs/engine.md, "Proxies and tunnels").

The proxy is our aioquic-based stand-in (tests/support/masque_proxy.py), because no packaged
HTTP/3 proxy exists here (Debian's squid, tinyproxy, nginx and nghttpx take CONNECT over TCP
only); it logs every CONNECT it receives and relays the stream's DATA to a TCP connection to
the origin, nhbench's test server, whose request counter is compared with the client's 2xx.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from typing import Any

import pytest
from support.cli import nhbench_cli
from support.masque_proxy import masque_proxy
from support.polling import wait_until
from support.sockets import reserved_port

import nhbench

pytestmark = [pytest.mark.core, pytest.mark.peer, pytest.mark.timeout(180)]

RUN: dict[str, Any] = {"rps": 100, "requests": 60, "connections": 3, "concurrency": 1,
                       "timeout": 5}


def _authority(server: nhbench.TestServer) -> str:
    host, port = server.address[:2]
    return f"{host}:{port}"


@pytest.mark.parametrize(("origin_tls", "protocol"), [
    (False, "http1"),
    (True, "http1"),
    (False, "http2"),   # h2c with prior knowledge inside the stream
    (True, "http2"),    # TLS (ALPN h2) inside the stream inside QUIC
], ids=lambda v: str(v))
def test_one_connect_per_connection(request: pytest.FixtureRequest, origin_tls: bool,
                                    protocol: str) -> None:
    origin: nhbench.TestServer = request.getfixturevalue(
        "tls_origin" if origin_tls else "plain_origin")
    before = origin.stats()["requests"]
    kw = {"cacert": origin.ca_cert} if origin_tls else {}
    with masque_proxy() as proxy:
        result = nhbench.run(origin.url, proxy=proxy.url, proxy_protocol="http3",
                             proxy_cacert=proxy.ca_cert, protocol=protocol, **kw, **RUN)
        connects = proxy.connects()
    c = result.counters
    assert c["benchmark.http_2xx"] == RUN["requests"], result.error
    assert origin.stats()["requests"] - before == RUN["requests"]
    assert c["tunnel.established"] == c["upstream_cx_total"] >= 1
    if origin_tls:
        assert c["ssl.handshake"] == c["upstream_cx_total"]
    # One classic CONNECT per connection: :method and :authority, no :scheme, :path or
    # :protocol (RFC 9114 section 4.4).
    assert connects == [{":method": "CONNECT", ":protocol": None, ":scheme": None,
                         ":authority": _authority(origin), ":path": None,
                         "capsule-protocol": None, "proxy-authorization": None,
                         "status": 200}] * c["upstream_cx_total"]


def test_large_bodies_cross_the_stream_both_ways() -> None:
    # 256 kB answers and 100 kB uploads: more than the ring of unacknowledged bytes (128 kB)
    # and many QUIC packets each way.
    with nhbench.TestServer(response_body_size=262144) as origin, masque_proxy() as proxy:
        result = nhbench.run(origin.url, proxy=proxy.url, proxy_protocol="http3",
                             proxy_cacert=proxy.ca_cert, request_method="POST",
                             request_body_size=100_000, **{**RUN, "requests": 20})
        served = origin.stats()["requests"]
    c = result.counters
    assert c["benchmark.http_2xx"] == 20, result.error
    assert served == 20
    assert result.stat("benchmark_http_client.response_body_size").max == 262144
    assert c["upstream_cx_rx_bytes_total"] > 20 * 262144
    assert c["upstream_cx_tx_bytes_total"] > 20 * 100_000


def test_proxy_credentials_ride_on_the_stream(plain_origin: nhbench.TestServer) -> None:
    with masque_proxy() as proxy:
        url = proxy.url.replace("://", "://u:p@")
        result = nhbench.run(plain_origin.url, proxy=url, proxy_protocol="http3",
                             proxy_cacert=proxy.ca_cert, **RUN)
        connects = proxy.connects()
    assert result.counters["benchmark.http_2xx"] == RUN["requests"]
    assert {e["proxy-authorization"] for e in connects} == {"Basic dTpw"}


def test_nighthawk_tunnel_protocol_http3(plain_origin: nhbench.TestServer) -> None:
    # Nighthawk's spelling: --tunnel-protocol http3 needs --tunnel-tls-context (its trusted_ca
    # checks the proxy's chain, not its name, as Envoy's).
    before = plain_origin.stats()["requests"]
    with masque_proxy() as proxy:
        ctx = json.dumps({"sni": "localhost", "common_tls_context": {"validation_context": {
            "trusted_ca": {"filename": proxy.ca_cert}}}})
        out = subprocess.run(
            [sys.executable, "-m", "nhbench", "nighthawk", "client", "--output-format", "json",
             "--tunnel-protocol", "http3", "--tunnel-uri", f"127.0.0.1:{proxy.port}",
             "--tunnel-tls-context", ctx, "--rps", "50", "--duration", "1",
             "--connections", "2", plain_origin.url],
            capture_output=True, text=True, timeout=120, check=False)
        connects = proxy.connects()
    assert out.returncode == 0, out.stderr
    result = next(r for r in json.loads(out.stdout)["results"] if r["name"] == "global")
    c = {x["name"]: int(x["value"]) for x in result["counters"]}
    assert len(connects) == c["tunnel.established"] == c["upstream_cx_total"] >= 1
    assert {e[":authority"] for e in connects} == {_authority(plain_origin)}
    assert plain_origin.stats()["requests"] - before == c["benchmark.http_2xx"] > 0


def _fails(origin: nhbench.TestServer, mode: str, **kw: Any) -> nhbench.Result:
    with masque_proxy(mode=mode) as proxy:
        kw.setdefault("proxy_cacert", proxy.ca_cert)
        return nhbench.run(origin.url, proxy=proxy.url, proxy_protocol="http3",
                           allow_no_success=True, **{**RUN, **kw})


@pytest.mark.parametrize(("mode", "counter", "text"), [
    ("refuse", "tunnel.non_2xx", "the proxy answered 403 to CONNECT"),
    ("reset", "tunnel.reset", "the proxy reset the CONNECT stream before its answer"),
    ("end-with-answer", None, None),
    ("silent", "tunnel.timeout", "the proxy did not answer CONNECT"),
], ids=str)
def test_failures_are_counted_by_cause(plain_origin: nhbench.TestServer, mode: str,
                                       counter: str | None, text: str | None) -> None:
    before = plain_origin.stats()["requests"]
    result = _fails(plain_origin, mode, **({"timeout": 1, "requests": 6}
                                            if mode == "silent" else {}))
    c = result.counters
    assert c.get("benchmark.http_2xx", 0) == 0
    assert plain_origin.stats()["requests"] == before
    if counter is None:
        # 200 that ends the stream: the tunnel is up, and the origin's side is closed at
        # once: every request fails as on a connection the origin closed.
        assert c["tunnel.established"] == c["upstream_cx_total"] >= 1
        return
    assert c[counter] == c["upstream_cx_total"] >= 1, (c, result.error)
    assert c.get("tunnel.established", 0) == 0
    assert text in result.error, result.error


def test_proxy_going_away_mid_run_is_counted(plain_origin: nhbench.TestServer) -> None:
    with masque_proxy(close_after=0.3) as proxy:
        result = nhbench.run(plain_origin.url, proxy=proxy.url, proxy_protocol="http3",
                             proxy_cacert=proxy.ca_cert, allow_no_success=True,
                             **{**RUN, "requests": 200, "connections": 1})
    c = result.counters
    assert c["tunnel.established"] >= 1
    assert c["tunnel.proxy_closed"] >= 1, (c, result.error)
    assert "the proxy closed its QUIC connection" in result.error


def test_an_untrusted_proxy_certificate_is_a_counted_tls_failure(
        plain_origin: nhbench.TestServer, tls_origin: nhbench.TestServer) -> None:
    # The origin's CA did not issue the proxy's certificate.
    with masque_proxy() as proxy:
        result = nhbench.run(plain_origin.url, proxy=proxy.url, proxy_protocol="http3",
                             proxy_cacert=tls_origin.ca_cert, allow_no_success=True, **RUN)
        connects = proxy.connects()
        insecure = nhbench.run(plain_origin.url, proxy=proxy.url, proxy_protocol="http3",
                               proxy_insecure=True, **RUN)
    c = result.counters
    assert c.get("benchmark.http_2xx", 0) == 0
    assert c["tunnel.tls_fail"] == c["upstream_cx_total"] >= 1
    assert "certificate verify failed" in result.error, result.error
    assert connects == []
    assert insecure.counters["benchmark.http_2xx"] == RUN["requests"]


def test_a_closed_proxy_port_is_a_connect_failure(plain_origin: nhbench.TestServer) -> None:
    with reserved_port(kind=socket.SOCK_DGRAM) as port:  # ICMP port unreachable
        result = nhbench.run(plain_origin.url, proxy=f"https://127.0.0.1:{port}",
                             proxy_protocol="http3", proxy_insecure=True,
                             no_default_failure_predicates=True, allow_no_success=True,
                             **{**RUN, "requests": 3, "connections": 1})
    c = result.counters
    assert c["tunnel.connect_fail"] == c["upstream_cx_total"] >= 1, (c, result.error)
    assert c.get("benchmark.http_2xx", 0) == 0
    assert "could not connect to the proxy" in (result.error or "") or \
        "the proxy's UDP port" in (result.error or "")


def test_the_command_line_spelling(tls_origin: nhbench.TestServer) -> None:
    before = tls_origin.stats()["requests"]
    with masque_proxy() as proxy:
        proc = nhbench_cli("run", "--cacert", tls_origin.ca_cert, "--proxy", proxy.url,
                           "--proxy-protocol", "http3", "--proxy-cacert", proxy.ca_cert,
                           "--rps", "50", "--duration", "1", "--connections", "2",
                           "--output-format", "json", tls_origin.url)
        connects = proxy.connects()
    assert proc.returncode == 0, proc.stderr
    result = next(r for r in json.loads(proc.stdout)["results"] if r["name"] == "global")
    c = {x["name"]: int(x["value"]) for x in result["counters"]}
    assert len(connects) == c["tunnel.established"] == c["upstream_cx_total"] >= 1
    assert tls_origin.stats()["requests"] - before == c["benchmark.http_2xx"] > 0
    assert "benchmark_http_client.tunnel_setup" in {s["id"] for s in result["statistics"]}


def test_connections_closed_mid_run_tell_the_proxy(plain_origin: nhbench.TestServer) -> None:
    # Five requests per connection: 30 requests make six connections one after the other,
    # each ending its QUIC connection to the proxy with CONNECTION_CLOSE (H3_NO_ERROR, 0x100)
    # rather than leaving it to the proxy's idle time-out; at the run's end the last one
    # too, unless the run ended inside ngtcp2's callback.
    with masque_proxy() as proxy:
        result = nhbench.run(plain_origin.url, proxy=proxy.url, proxy_protocol="http3",
                             proxy_cacert=proxy.ca_cert, max_requests_per_connection=5,
                             **{**RUN, "requests": 30, "connections": 1})
        c = result.counters
        assert c["benchmark.http_2xx"] == 30, result.error
        assert c["tunnel.established"] == c["upstream_cx_total"] == 6
        assert wait_until(lambda: len(proxy.closes()) >= 5, timeout=10), proxy.closes()
        assert set(proxy.closes()) == {0x100}
