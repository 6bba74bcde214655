"""Tunnels whose proxy leg is TLS or HTTP/2 (csrc/client/carrier.c; docs/engine.md,
"Proxies and tunnels").

Peers: nghttpx (Debian's nghttp2-proxy) as an HTTP/2 forward proxy, over TLS with its own CA
or in the clear (h2c with prior knowledge, and HTTP/1.1), taking each CONNECT (an HTTP/1.1
request or an HTTP/2 stream) and passing it on to tinyproxy, which opens the TCP connection
to the origin: nhbench -> nghttpx -> tinyproxy -> nhbench's test server. Both proxies' logs
are read to count the tunnels, and the origin's request counter is compared with the
client's 2xx.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.http_proxies import Nghttpx, Tinyproxy, nghttpx, tinyproxy

import nhbench

pytestmark = [pytest.mark.core, pytest.mark.peer]

RUN = {"rps": 100, "requests": 60, "connections": 3, "concurrency": 1, "timeout": 5}


@pytest.fixture(scope="module")
def chain_tls() -> Iterator[tuple[Tinyproxy, Nghttpx]]:
    with tinyproxy() as backend, nghttpx(backend, tls=True) as proxy:
        yield backend, proxy


@pytest.fixture(scope="module")
def chain_clear() -> Iterator[tuple[Tinyproxy, Nghttpx]]:
    with tinyproxy() as backend, nghttpx(backend, tls=False) as proxy:
        yield backend, proxy


def _authority(server: nhbench.TestServer) -> str:
    host, port = server.address[:2]
    return f"{host}:{port}"


@pytest.mark.parametrize(("proxy_tls", "proxy_protocol", "origin_tls", "protocol"), [
    (True, "http1", True, "http1"),     # TLS inside TLS
    (True, "http1", False, "http1"),    # an http:// origin tunnels too over TLS
    (True, "http1", True, "http2"),
    (False, "http2", False, "http1"),   # h2c with prior knowledge
    (False, "http2", True, "http2"),
    (True, "http2", True, "http2"),     # TLS inside an HTTP/2 stream inside TLS
    (True, "http2", False, "http1"),
], ids=lambda v: str(v))
def test_one_connect_per_connection(request: pytest.FixtureRequest, proxy_tls: bool,
                                    proxy_protocol: str, origin_tls: bool,
                                    protocol: str) -> None:
    origin: nhbench.TestServer = request.getfixturevalue(
        "tls_origin" if origin_tls else "plain_origin")
    backend, proxy = request.getfixturevalue("chain_tls" if proxy_tls else "chain_clear")
    seen_proxy, seen_backend = len(proxy.requests()), len(backend.requests())
    before = origin.stats()["requests"]
    kw = {"cacert": origin.ca_cert} if origin_tls else {}
    if proxy_tls:
        kw["proxy_cacert"] = proxy.ca
    result = nhbench.run(origin.url, proxy=proxy.url, proxy_protocol=proxy_protocol,
                         protocol=protocol, **kw, **RUN)
    c = result.counters
    assert c["benchmark.http_2xx"] == RUN["requests"]
    assert origin.stats()["requests"] - before == RUN["requests"]
    assert c["tunnel.established"] == c["upstream_cx_total"] >= 1
    if origin_tls:
        assert c["ssl.handshake"] == c["upstream_cx_total"]
    # nghttpx logs a CONNECT stream when it ends: after the run, every connection's.
    from support.polling import wait_until

    assert wait_until(lambda: len(proxy.requests()) - seen_proxy == c["upstream_cx_total"],
                      timeout=10), proxy.requests()[seen_proxy:]
    streams = proxy.requests()[seen_proxy:]
    assert streams == [("CONNECT", _authority(origin), 200)] * c["upstream_cx_total"]
    assert backend.requests()[seen_backend:] == (
        [f"CONNECT {_authority(origin)} HTTP/1.1"] * c["upstream_cx_total"])


def test_proxy_credentials_ride_on_the_http2_stream(tls_origin: nhbench.TestServer) -> None:
    # tinyproxy asks for credentials: nghttpx passes the HTTP/2 CONNECT's
    # proxy-authorization field on, so without it the stream is answered 407.
    with tinyproxy(basic_auth=("u", "p")) as backend, nghttpx(backend, tls=True) as proxy:
        refused = nhbench.run(tls_origin.url, proxy=proxy.url, proxy_protocol="http2",
                              proxy_cacert=proxy.ca, cacert=tls_origin.ca_cert,
                              allow_no_success=True, **RUN)
        authed = nhbench.run(tls_origin.url, proxy=proxy.url.replace("://", "://u:p@"),
                             proxy_protocol="http2", proxy_cacert=proxy.ca,
                             cacert=tls_origin.ca_cert, **RUN)
    c = refused.counters
    assert c.get("benchmark.http_2xx", 0) == 0
    assert c["tunnel.non_2xx"] == c["upstream_cx_total"] >= 1
    assert c.get("tunnel.established", 0) == 0
    assert "the proxy answered 407 to CONNECT" in refused.error
    assert authed.counters["benchmark.http_2xx"] == RUN["requests"]


def test_forbidden_port_is_a_counted_403(plain_origin: nhbench.TestServer) -> None:
    with tinyproxy(connect_ports=(1,)) as backend, nghttpx(backend, tls=False) as proxy:
        result = nhbench.run(plain_origin.url, proxy=proxy.url, proxy_protocol="http2",
                             allow_no_success=True, **RUN)
    c = result.counters
    assert c["tunnel.non_2xx"] == c["upstream_cx_total"] >= 1
    assert "the proxy answered 403 to CONNECT" in result.error


@pytest.mark.parametrize("proxy_protocol", ["http1", "http2"])
def test_an_untrusted_proxy_certificate_is_a_counted_tls_failure(
        tls_origin: nhbench.TestServer, chain_tls: tuple[Tinyproxy, Nghttpx],
        proxy_protocol: str) -> None:
    backend, proxy = chain_tls
    seen = len(backend.requests())
    # The origin's CA did not issue the proxy's certificate.
    result = nhbench.run(tls_origin.url, proxy=proxy.url, proxy_protocol=proxy_protocol,
                         proxy_cacert=tls_origin.ca_cert, cacert=tls_origin.ca_cert,
                         allow_no_success=True, **RUN)
    c = result.counters
    assert c.get("benchmark.http_2xx", 0) == 0
    assert c["tunnel.tls_fail"] == c["upstream_cx_total"] >= 1
    assert c.get("ssl.connection_error", 0) == 0  # the origin's TLS never started
    assert result.error.startswith("TLS handshake with the proxy for CONNECT ")
    assert "certificate verify failed" in result.error
    assert backend.requests()[seen:] == []  # no CONNECT went on
    # --proxy-insecure skips the check (curl's spelling).
    insecure = nhbench.run(tls_origin.url, proxy=proxy.url, proxy_protocol=proxy_protocol,
                           proxy_insecure=True, cacert=tls_origin.ca_cert, **RUN)
    assert insecure.counters["benchmark.http_2xx"] == RUN["requests"]


def test_http2_to_a_proxy_without_h2_is_a_counted_tls_failure(
        tls_origin: nhbench.TestServer) -> None:
    # A TLS server that offers only http/1.1 by ALPN (nhbench's own, no proxy): a proxy leg
    # that needs h2 and does not get it fails by name before any CONNECT.
    with nhbench.TestServer(tls_self_signed=True, alpn="http/1.1") as not_h2:
        result = nhbench.run(tls_origin.url, proxy=not_h2.url, proxy_protocol="http2",
                             proxy_cacert=not_h2.ca_cert, cacert=tls_origin.ca_cert,
                             allow_no_success=True, **RUN)
    c = result.counters
    assert c["tunnel.tls_fail"] == c["upstream_cx_total"] >= 1
    assert "ALPN: the proxy did not select h2" in result.error
