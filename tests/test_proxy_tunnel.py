"""The client through a real HTTP proxy (docs/engine.md, "Proxies and tunnels").

Peers: tinyproxy (Debian) is the proxy for every test here, both as the CONNECT endpoint
(https:// origins, HTTP/2 over TLS, Nighthawk's --tunnel-protocol http1) and as the
absolute-form proxy (HTTP/1.1 to http:// origins); its own log is read to count what it saw.
The origin is nhbench's test server (in-process), whose request counter is compared with the
client's 2xx. Tunnels over TLS to the proxy and on HTTP/2 streams are in
tests/test_proxy_tunnel_h2.py; CONNECT-UDP over HTTP/3 is tests/test_proxy_udp.py's.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys

import pytest
from support.http_proxies import squid, tinyproxy
from support.peers import peer_env, require_fortio
from support.sockets import reserved_port

import nhbench

pytestmark = [pytest.mark.core, pytest.mark.peer]

RUN = {"rps": 100, "requests": 60, "connections": 3, "concurrency": 1, "timeout": 5}


def _origin_requests(server: nhbench.TestServer) -> int:
    return int(server.stats()["requests"])


def _authority(server: nhbench.TestServer) -> str:
    host, port = server.address[:2]
    return f"{host}:{port}"


def test_https_goes_through_one_connect_per_connection(tls_origin: nhbench.TestServer) -> None:
    before = _origin_requests(tls_origin)
    with tinyproxy() as proxy:
        result = nhbench.run(tls_origin.url, proxy=proxy.url, cacert=tls_origin.ca_cert, **RUN)
        lines = proxy.requests()
    c = result.counters
    assert c["benchmark.http_2xx"] == RUN["requests"]
    # The origin answered exactly what the client counted, through the proxy.
    assert _origin_requests(tls_origin) - before == c["benchmark.http_2xx"]
    # One CONNECT per connection, to the origin's authority, and nothing else.
    connects = [line for line in lines if line.startswith("CONNECT ")]
    assert connects == [f"CONNECT {_authority(tls_origin)} HTTP/1.1"] * c["upstream_cx_total"]
    assert len(lines) == len(connects)
    assert c["tunnel.established"] == c["upstream_cx_total"] == c["ssl.handshake"]
    assert result.stat("benchmark_http_client.tunnel_setup").count == c["upstream_cx_total"]


def test_http2_over_tls_inside_the_tunnel(tls_origin: nhbench.TestServer) -> None:
    before = tls_origin.stats()
    with tinyproxy() as proxy:
        result = nhbench.run(tls_origin.url, proxy=proxy.url, cacert=tls_origin.ca_cert,
                             protocol="http2", **RUN)
        connects = [line for line in proxy.requests() if line.startswith("CONNECT ")]
    c = result.counters
    after = tls_origin.stats()
    assert c["benchmark.http_2xx"] == RUN["requests"]
    assert after["requests"] - before["requests"] == RUN["requests"]
    # The origin saw HTTP/2 connections: h2 was negotiated inside the tunnel.
    assert after["connections_http2"] - before["connections_http2"] == c["upstream_cx_total"]
    assert len(connects) == c["upstream_cx_total"] == c["tunnel.established"]


def test_http_goes_in_absolute_form(plain_origin: nhbench.TestServer) -> None:
    before = _origin_requests(plain_origin)
    with tinyproxy() as proxy:
        # tinyproxy closes each client connection after its response without saying so
        # (no Connection: close), so a request may meet a connection it is closing: that
        # request is a reset, not a failed run, and reached neither the proxy nor the origin.
        result = nhbench.run(plain_origin.url + "abs?x=1", proxy=proxy.url,
                             no_default_failure_predicates=True, **RUN)
        lines = proxy.requests()
    c = result.counters
    ok = c["benchmark.http_2xx"]
    assert ok + c.get("benchmark.stream_resets", 0) == RUN["requests"]
    assert ok >= RUN["requests"] // 2
    assert _origin_requests(plain_origin) - before == ok
    want = f"GET http://{_authority(plain_origin)}/abs?x=1 HTTP/1.1"
    assert lines == [want] * ok
    # No tunnel: no CONNECT, no tunnel statistic.
    assert c.get("tunnel.established", 0) == 0
    assert "benchmark_http_client.tunnel_setup" not in {s.id for s in result.global_result.statistics}


def test_nighthawk_tunnel_http1_tunnels_plain_http(plain_origin: nhbench.TestServer) -> None:
    # Nighthawk's tunnel CONNECTs whatever the target's scheme.
    before = _origin_requests(plain_origin)
    with tinyproxy() as proxy:
        proc = subprocess.run(
            [sys.executable, "-m", "nhbench", "nighthawk", "client", "--output-format", "json",
             "--tunnel-protocol", "http1", "--tunnel-uri", f"127.0.0.1:{proxy.port}",
             "--rps", "50", "--duration", "1", "--connections", "2", plain_origin.url],
            capture_output=True, text=True, timeout=60, check=False)
        connects = [line for line in proxy.requests() if line.startswith("CONNECT ")]
    assert proc.returncode == 0, proc.stderr
    result = next(r for r in json.loads(proc.stdout)["results"] if r["name"] == "global")
    c = {x["name"]: int(x["value"]) for x in result["counters"]}
    assert c["benchmark.http_2xx"] > 0
    assert _origin_requests(plain_origin) - before == c["benchmark.http_2xx"]
    assert len(connects) == c["upstream_cx_total"] == c["tunnel.established"]
    assert "benchmark_http_client.tunnel_setup" in {s["id"] for s in result["statistics"]}


def test_proxy_credentials_are_basic_proxy_authorization(tls_origin: nhbench.TestServer) -> None:
    with tinyproxy(basic_auth=("load", "s3cret")) as proxy:
        good = nhbench.run(tls_origin.url, proxy=f"http://load:s3cret@127.0.0.1:{proxy.port}",
                           cacert=tls_origin.ca_cert, **RUN)
        bad = nhbench.run(tls_origin.url, proxy=f"http://load:wrong@127.0.0.1:{proxy.port}",
                          cacert=tls_origin.ca_cert, no_default_failure_predicates=True,
                          allow_no_success=True, **{**RUN, "requests": 5})
    assert good.counters["benchmark.http_2xx"] == RUN["requests"]
    assert good.counters["tunnel.established"] == good.counters["upstream_cx_total"]
    assert bad.counters.get("benchmark.http_2xx", 0) == 0
    assert bad.counters["tunnel.non_2xx"] >= 1
    assert bad.counters.get("tunnel.established", 0) == 0
    # tinyproxy answers 401 where RFC 9110 says 407; either is the proxy's refusal.
    assert re.match(r"the proxy answered 40[17] to CONNECT 127\.0\.0\.1:", bad.error or "")


def test_proxy_credentials_on_absolute_form_requests(plain_origin: nhbench.TestServer) -> None:
    with tinyproxy(basic_auth=("load", "s3cret")) as proxy:
        good = nhbench.run(plain_origin.url, proxy=f"http://load:s3cret@127.0.0.1:{proxy.port}",
                           no_default_failure_predicates=True, **RUN)
        bad = nhbench.run(plain_origin.url, proxy=f"http://load:wrong@127.0.0.1:{proxy.port}",
                          no_default_failure_predicates=True, allow_no_success=True,
                          **{**RUN, "requests": 5})
    assert good.counters["benchmark.http_2xx"] >= RUN["requests"] // 2
    # Refused by the proxy itself (tinyproxy's 401), on every request.
    assert bad.counters.get("benchmark.http_2xx", 0) == 0
    c = bad.counters
    assert c["benchmark.http_4xx"] >= 1
    assert c["benchmark.http_4xx"] + c.get("benchmark.stream_resets", 0) == 5


def test_proxy_refusing_the_connection_is_counted(tls_origin: nhbench.TestServer) -> None:
    with reserved_port() as port:  # bound, never listened on: refused
        result = nhbench.run(tls_origin.url, proxy=f"http://127.0.0.1:{port}",
                             cacert=tls_origin.ca_cert, no_default_failure_predicates=True,
                             allow_no_success=True, **{**RUN, "requests": 5})
    c = result.counters
    assert c["tunnel.connect_fail"] >= 1
    assert c["tunnel.connect_fail"] == c["upstream_cx_connect_fail"]
    assert c.get("benchmark.http_2xx", 0) == 0
    assert "could not connect to the proxy for CONNECT" in (result.error or "")


def test_proxy_forbidding_the_port_is_a_non_2xx(tls_origin: nhbench.TestServer) -> None:
    with tinyproxy(connect_ports=(1,)) as proxy:
        result = nhbench.run(tls_origin.url, proxy=proxy.url, cacert=tls_origin.ca_cert,
                             no_default_failure_predicates=True, allow_no_success=True,
                             **{**RUN, "requests": 5})
    assert result.counters["tunnel.non_2xx"] >= 1
    assert result.counters.get("benchmark.http_2xx", 0) == 0


def _non_loopback_address() -> str | None:
    # Go never proxies loopback addresses: the origin must listen on another of this host's.
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # no packet is sent: this only picks a route
        except OSError:
            return None
        address: str = s.getsockname()[0]
    return None if address.startswith("127.") else address


def test_fortio_std_client_takes_the_environment_proxy_as_fortio_does() -> None:
    """Real Fortio 1.66.5 and ``nhbench fortio`` with HTTPS_PROXY set: both go through
    tinyproxy with -stdclient (one CONNECT per connection to the origin, `load` and `curl`),
    neither with Fortio's default fast client."""
    fortio = require_fortio()
    address = _non_loopback_address()
    if address is None:
        pytest.skip("this host has no non-loopback IPv4 address")
    with nhbench.TestServer(listen=f"{address}:0", tls_self_signed=True,
                            tls_san=address) as origin, tinyproxy() as proxy:
        authority = f"{address}:{origin.address[1]}"
        env = {**peer_env(), "HTTPS_PROXY": f"127.0.0.1:{proxy.port}", "NO_PROXY": ""}
        for command in ([fortio], [sys.executable, "-m", "nhbench", "fortio"]):
            seen = len(proxy.requests())
            for client in (["-stdclient"], []):
                proc = subprocess.run(
                    [*command, "load", *client, "-k", "-c", "2", "-n", "10", "-qps", "0",
                     f"https://{authority}/"],
                    capture_output=True, text=True, timeout=60, env=env, check=False)
                assert proc.returncode == 0, proc.stderr
                out = proc.stdout + proc.stderr
                assert "Code 200 : 10 (100.0 %)" in out, (command, out)
            lines = proxy.requests()[seen:]
            # -stdclient's two connections went through the proxy; the fast client's did not.
            assert lines == [f"CONNECT {authority} HTTP/1.1"] * 2, (command, lines)
            # `curl -stdclient` too: one request, one tunnel.
            proc = subprocess.run([*command, "curl", "-stdclient", "-k", f"https://{authority}/"],
                                  capture_output=True, text=True, timeout=60, env=env,
                                  check=False)
            assert proc.returncode == 0, proc.stderr
            # (nhbench fortio curl is Python's http.client, whose CONNECT says HTTP/1.0.)
            after = proxy.requests()[seen + 2:]
            assert len(after) == 1 and after[0].startswith(f"CONNECT {authority} HTTP/1."), (
                command, after)


def test_squid_absolute_form_keeps_connections_and_tunnels_count(
        plain_origin: nhbench.TestServer, tls_origin: nhbench.TestServer) -> None:
    """squid (Debian) keeps its client connections open: absolute-form requests reuse them,
    and every request is one line of its access.log; each tunnel is one CONNECT line."""
    plain_before = _origin_requests(plain_origin)
    tls_before = _origin_requests(tls_origin)
    with squid() as proxy:
        plain = nhbench.run(plain_origin.url + "sq", proxy=proxy.url, **RUN)
        tls = nhbench.run(tls_origin.url, proxy=proxy.url, cacert=tls_origin.ca_cert, **RUN)
        # Stopped, squid has written every line, tunnels included (logged when they end).
        proxy.stop()
        lines = proxy.requests()
    p, t = plain.counters, tls.counters
    assert p["benchmark.http_2xx"] == t["benchmark.http_2xx"] == RUN["requests"]
    assert _origin_requests(plain_origin) - plain_before == RUN["requests"]
    assert _origin_requests(tls_origin) - tls_before == RUN["requests"]
    gets = [line for line in lines if line[0] == "GET"]
    assert gets == [("GET", f"http://{_authority(plain_origin)}/sq")] * RUN["requests"]
    # Kept alive: at most one connection per --connections (and no reset).
    assert p["upstream_cx_total"] <= RUN["connections"]
    connects = [line for line in lines if line[0] == "CONNECT"]
    assert connects == [("CONNECT", _authority(tls_origin))] * t["upstream_cx_total"]
    assert t["tunnel.established"] == t["upstream_cx_total"]


def test_several_targets_each_through_the_proxy() -> None:
    """Nighthawk's several endpoints through one proxy: each request names its own endpoint
    (absolute-form), each tunnel CONNECTs to its own endpoint (HTTP/2 over h2c inside)."""
    with nhbench.TestServer() as a, nhbench.TestServer() as b, tinyproxy() as proxy:
        endpoints = [_authority(a), _authority(b)]
        common = {"multi_target_endpoint": endpoints, "multi_target_path": "/m", "rps": 40,
                  "requests": 20, "connections": 2, "proxy": proxy.url,
                  "no_default_failure_predicates": True}
        absolute = nhbench.run(**common)
        lines = proxy.requests()
        assert absolute.counters["benchmark.http_2xx"] + absolute.counters.get(
            "benchmark.stream_resets", 0) == 20
        for endpoint, server in zip(endpoints, (a, b), strict=True):
            gets = lines.count(f"GET http://{endpoint}/m HTTP/1.1")
            assert gets == server.stats()["requests"] >= 5
        tunnelled = nhbench.run(**common, protocol="http2")
        connects = sorted(line for line in proxy.requests()[len(lines):])
        assert tunnelled.counters["benchmark.http_2xx"] == 20
        # One connection per target (connections are split over the targets).
        assert connects == sorted(f"CONNECT {e} HTTP/1.1" for e in endpoints)
