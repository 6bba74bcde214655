"""The proxy and tunnel options: what is taken, and what is refused by name, exit 2, nothing
sent (docs/engine.md "Proxies and tunnels", docs/compat.md "nighthawk_client", its Tunnels
paragraph). The runs through a real proxy are in test_proxy_tunnel.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from nhbench._core_config import _proxy_config, render_connect
from nhbench.compat._fortio_proxy import environment_proxy
from nhbench.options import Options


def _error(*argv: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "nhbench", *argv], capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def test_proxy_modes_and_credentials() -> None:
    plain = Options(uri="http://example.test:8080/p", proxy="http://127.0.0.1:3128")
    assert plain.proxy_endpoint is not None
    assert plain.proxy_endpoint.mode == "absolute" and plain.proxy_endpoint.port == 3128
    h2c = Options(uri="http://example.test/", proxy="127.0.0.1:3128", protocol="http2")
    assert h2c.proxy_endpoint is not None and h2c.proxy_endpoint.mode == "connect"
    tls = Options(uri="https://example.test/", proxy="http://a%40b:p%3Aw@127.0.0.1")
    assert tls.proxy_endpoint is not None
    # curl's default proxy port; the credentials percent-decoded, then Basic.
    assert tls.proxy_endpoint.port == 1080
    assert tls.proxy_endpoint.authorization == "Basic YUBiOnA6dw=="
    nighthawk = Options(uri="http://example.test/", tunnel_protocol="http1",
                        tunnel_uri="127.0.0.1")
    assert nighthawk.proxy_endpoint is not None
    assert (nighthawk.proxy_endpoint.mode, nighthawk.proxy_endpoint.port) == ("connect", 80)


def test_connect_request_head() -> None:
    assert render_connect("example.test", 443, None) == (
        b"CONNECT example.test:443 HTTP/1.1\r\nHost: example.test:443\r\n\r\n")
    assert render_connect("::1", 8443, "Basic eDp5") == (
        b"CONNECT [::1]:8443 HTTP/1.1\r\nHost: [::1]:8443\r\n"
        b"Proxy-Authorization: Basic eDp5\r\n\r\n")


def test_connect_udp_config(tmp_path: Path) -> None:
    # The default URI template (RFC 9298 section 2): an IPv6 literal's colons
    # percent-encoded; SNI only for a proxy named by a DNS name; port 443 by default.
    named = Options(uri="https://[2001:db8::1]:8443/", protocol="http3",
                    proxy="https://u:p@localhost", proxy_protocol="http3",
                    proxy_cacert=str(tmp_path))
    assert named.proxy_endpoint is not None and named.proxy_endpoint.mode == "connect-udp"
    config = _proxy_config(named)
    tunnel = config["udp_tunnel"]
    assert config["targets"][0][2] == 443
    assert tunnel["authority"] == "localhost:443"
    assert tunnel["paths"] == ["/.well-known/masque/udp/2001%3Adb8%3A%3A1/8443/"]
    assert tunnel["sni"] == tunnel["verify_name"] == "localhost"
    # A directory of hashed CA files is taken as it is (a file is checked for PEM).
    assert tunnel["cacert"] == str(tmp_path) and tunnel["insecure"] is False
    assert tunnel["authorization"] == "Basic dTpw"
    literal = Options(uri="https://127.0.0.1:4433/", protocol="http3",
                      proxy="https://[::1]:4443", proxy_protocol="http3", proxy_insecure=True)
    tunnel = _proxy_config(literal)["udp_tunnel"]
    assert tunnel["authority"] == "[::1]:4443" and tunnel["sni"] == ""
    assert tunnel["insecure"] is True and "cacert" not in tunnel
    assert "authorization" not in tunnel


def test_connect_udp_over_http2_config() -> None:
    # CONNECT-UDP on an HTTP/2 stream: the same :authority and :path, the TLS of the
    # CONNECT tunnels' proxy leg (or none: h2c).
    tls = Options(uri="https://127.0.0.1:4433/", protocol="http3",
                  proxy="https://localhost:8443", proxy_protocol="http2", proxy_insecure=True)
    assert tls.proxy_endpoint is not None and tls.proxy_endpoint.mode == "connect-udp"
    tunnel = _proxy_config(tls)["udp_tunnel"]
    assert tunnel["protocol"] == "http2" and tunnel["authority"] == "localhost:8443"
    assert tunnel["paths"] == ["/.well-known/masque/udp/127.0.0.1/4433/"]
    assert tunnel["tls"] == {"sni": "localhost", "verify_name": "localhost", "insecure": True}
    h2c = _proxy_config(Options(uri="https://127.0.0.1:4433/", protocol="http3",
                                proxy="http://127.0.0.1:3128", proxy_protocol="http2"))
    assert h2c["udp_tunnel"]["protocol"] == "http2" and "tls" not in h2c["udp_tunnel"]
    assert "tunnel_requests" not in h2c
    # Nighthawk's spelling: -p http3 --tunnel-protocol http2 (trusted_ca: the chain checked).
    nighthawk = Options(uri="https://127.0.0.1:4433/", protocol="http3",
                        tunnel_protocol="http2", tunnel_uri="127.0.0.1:3128",
                        tunnel_tls_context='{"sni": "proxy.test"}')
    tunnel = _proxy_config(nighthawk)["udp_tunnel"]
    assert tunnel["protocol"] == "http2" and tunnel["authority"] == "127.0.0.1:3128"
    assert tunnel["tls"] == {"sni": "proxy.test", "insecure": True}


def test_connect_on_an_http3_stream_config() -> None:
    # --proxy-protocol http3 for an HTTP/1.1 or HTTP/2 run: a classic CONNECT on an HTTP/3
    # stream (the carrier's QUIC leg), with the proxy's TLS; CONNECT-UDP only for HTTP/3.
    options = Options(uri="http://origin.test:8080/", proxy="https://u:p@localhost:4443",
                      proxy_protocol="http3", proxy_insecure=True)
    endpoint = options.proxy_endpoint
    assert endpoint is not None
    assert (endpoint.mode, endpoint.protocol) == ("connect", "http3")
    config = _proxy_config(options)
    assert config["proxy_protocol"] == "http3"
    assert config["proxy_tls"] == {"sni": "localhost", "verify_name": "localhost",
                                   "insecure": True}
    assert config["tunnel_requests"] == [render_connect("origin.test", 8080, "Basic dTpw")]
    # Nighthawk's --tunnel-protocol http3: the TLS context's sni, no name check.
    nighthawk = Options(uri="https://origin.test/", tunnel_protocol="http3",
                        tunnel_uri="127.0.0.1:4443", tunnel_tls_context='{"sni": "p.test"}')
    endpoint = nighthawk.proxy_endpoint
    assert endpoint is not None and endpoint.protocol == "http3" and endpoint.tls is not None
    assert _proxy_config(nighthawk)["proxy_tls"] == {"sni": "p.test", "insecure": True}


@pytest.mark.parametrize(("argv", "expected"), [
    (["run", "--proxy", "ftp://127.0.0.1:3128", "https://127.0.0.1/"],
     "--proxy: only http:// and https:// proxies are supported (got ftp://)"),
    # CONNECT-UDP (RFC 9298) over HTTP/3: what it needs, and what it cannot take.
    (["run", "--proxy-protocol", "http3", "--protocol", "http3", "https://127.0.0.1/"],
     "--proxy-protocol: needs --proxy"),
    (["run", "--proxy", "http://127.0.0.1:3128", "--proxy-protocol", "http3",
      "--protocol", "http3", "https://127.0.0.1/"],
     "--proxy-protocol: http3 reaches the proxy over QUIC, which is TLS"),
    (["run", "--proxy", "http://127.0.0.1:3128", "--proxy-protocol", "http3",
      "https://127.0.0.1/"], "--proxy-protocol: http3 reaches the proxy over QUIC, which is TLS"),
    (["run", "--proxy", "https://127.0.0.1:3128", "--proxy-protocol", "http3",
      "udp://127.0.0.1:9/"], "--proxy: udp:// runs over UDP"),
    (["run", "--proxy", "https://127.0.0.1:3128", "--proxy-protocol", "http3", "--protocol",
      "http3", "--resolve", "127.0.0.2", "https://example.test/"],
     "--proxy-protocol: mutually exclusive with --resolve"),
    (["run", "--proxy", "socks5://127.0.0.1:1080", "https://127.0.0.1/"],
     "--proxy: only http:// and https:// proxies are supported (got socks5://)"),
    (["run", "--proxy", "http://user@127.0.0.1:3128", "https://127.0.0.1/"],
     "--proxy: proxy credentials need user:password"),
    (["run", "--proxy", "http://127.0.0.1:3128/x", "https://127.0.0.1/"],
     "--proxy: a proxy URL is scheme://[user:password@]host:port only"),
    (["run", "--proxy", "http://127.0.0.1:3128", "--protocol", "http3", "https://127.0.0.1/"],
     "--proxy: HTTP/3 runs over UDP"),
    (["run", "--proxy", "http://127.0.0.1:3128", "--protocol", "http3", "https://127.0.0.1/"],
     "CONNECT-UDP needs proxy_protocol http2 or http3"),
    (["run", "--proxy", "http://127.0.0.1:3128", "--proxy-protocol", "http2",
      "--proxy-insecure", "--protocol", "http3", "https://127.0.0.1/"],
     "--proxy-insecure: only applies to an https:// proxy"),
    (["run", "--proxy", "http://127.0.0.1:3128", "--proxy-protocol", "http2", "--protocol",
      "http3", "--resolve", "127.0.0.2", "https://example.test/"],
     "--proxy: mutually exclusive with --resolve"),
    (["run", "--proxy", "http://127.0.0.1:3128", "udp://127.0.0.1:9/"],
     "--proxy: udp:// runs over UDP"),
    (["run", "--proxy", "http://127.0.0.1:3128", "--tunnel-protocol", "http1",
      "--tunnel-uri", "127.0.0.1:3128", "https://127.0.0.1/"],
     "--proxy: mutually exclusive with --tunnel-uri"),
    # The proxy resolves the origin's name.
    (["run", "--proxy", "http://127.0.0.1:3128", "--resolve", "127.0.0.2",
      "http://127.0.0.1/"], "--proxy: mutually exclusive with --resolve"),
    (["run", "--proxy", "http://127.0.0.1:3128", "--dns-method", "rr", "http://127.0.0.1/"],
     "--proxy: mutually exclusive with --dns-method"),
    (["run", "--proxy-protocol", "http2", "https://127.0.0.1/"],
     "--proxy-protocol: needs --proxy"),
    (["run", "--proxy", "http://127.0.0.1:3128", "--proxy-insecure", "https://127.0.0.1/"],
     "--proxy-insecure: only applies to an https:// proxy"),
    (["run", "--proxy", "https://127.0.0.1:3128", "--proxy-insecure", "--proxy-cacert",
      __file__, "https://127.0.0.1/"], "--proxy-cacert: OpenSSL cannot load CA certificates"),
    (["run", "--tunnel-protocol", "http2", "--tunnel-uri", "127.0.0.1:3128",
      "--proxy-protocol", "http2", "https://127.0.0.1/"],
     "--proxy-protocol: needs --proxy"),
    (["run", "--tunnel-protocol", "http1", "--tunnel-uri", "127.0.0.1:3128",
      "--tunnel-tls-context", '{"common_tls_context": {"tls_params": {}}}',
      "https://127.0.0.1/"],
     "--tunnel-tls-context: common_tls_context.tls_params: not supported"),
    (["run", "--tunnel-protocol", "http1", "--tunnel-uri", "127.0.0.1:3128",
      "--tunnel-tls-context", '{"sni": "a", "alpn": []}', "https://127.0.0.1/"],
     "--tunnel-tls-context: alpn: not supported"),
    (["run", "--tunnel-protocol", "http1", "--tunnel-uri", "127.0.0.1:3128",
      "--tunnel-tls-context",
      '{"common_tls_context": {"validation_context": {"trusted_ca": {"inline_string": "x"}}}}',
      "https://127.0.0.1/"],
     "inline_string: OpenSSL cannot load it"),
    (["run", "--tunnel-protocol", "http3", "--tunnel-uri", "127.0.0.1:3128",
      "--tunnel-tls-context", "{}", "--protocol", "http3", "https://127.0.0.1/"],
     "--tunnel-protocol: protocol http3 over tunnel_protocol http3 is not supported"),
    # Nighthawk's own rules, in its order.
    (["nighthawk", "client", "--tunnel-protocol", "http1", "http://127.0.0.1/"],
     "--tunnel-protocol: needs tunnel_uri"),
    (["nighthawk", "client", "--tunnel-uri", "127.0.0.1:3128", "http://127.0.0.1/"],
     "--tunnel-uri: needs tunnel_protocol"),
    (["nighthawk", "client", "--tunnel-protocol", "http3", "--tunnel-uri", "127.0.0.1:1",
      "http://127.0.0.1/"], "--tunnel-protocol: needs tunnel_tls_context"),
    (["nighthawk", "client", "--tunnel-protocol", "http1", "--tunnel-uri", "127.0.0.1:1",
      "-p", "http3", "https://127.0.0.1/"],
     "--tunnel-protocol: protocol http3 over tunnel_protocol http1 is not supported"),
    (["nighthawk", "client", "--tunnel-protocol", "http3", "--tunnel-uri", "127.0.0.1:1",
      "--tunnel-tls-context", "{}", "-p", "http3", "https://127.0.0.1/"],
     "--tunnel-protocol: protocol http3 over tunnel_protocol http3 is not supported"),
    (["nighthawk", "client", "--tunnel-protocol", "http4", "--tunnel-uri", "127.0.0.1:1",
      "http://127.0.0.1/"], "--tunnel-protocol"),
])
def test_refused_by_name(argv: list[str], expected: str) -> None:
    assert expected in _error(*argv)


def test_fortio_environment_proxy_follows_go() -> None:
    env = {"HTTPS_PROXY": "proxy.test:3128", "http_proxy": "http://p2.test:8080",
           "NO_PROXY": "skip.test,.internal,10.0.0.0/8"}
    def proxy(url: str, **kw: bool) -> tuple[str, str] | None:
        flags = {"stdclient": True, "h2": False, "grpc": False, **kw}
        return environment_proxy(url, environ=env, **flags)
    assert proxy("https://a.test/") == ("HTTPS_PROXY", "http://proxy.test:3128")
    assert proxy("http://a.test/") == ("HTTP_PROXY", "http://p2.test:8080")
    # The fast client and the h2c transport have no proxy; gRPC always takes HTTPS_PROXY.
    assert proxy("https://a.test/", stdclient=False) is None
    assert proxy("http://a.test/", stdclient=False, h2=True) is None
    assert proxy("https://a.test/", stdclient=False, h2=True) is not None
    assert proxy("http://a.test:9000", stdclient=False, grpc=True) == (
        "HTTPS_PROXY", "http://proxy.test:3128")
    # Never loopback nor localhost; NO_PROXY's names, subdomains and CIDR blocks.
    for url in ("https://127.0.0.1/", "https://localhost:8443/", "https://[::1]/",
                "https://skip.test/", "https://a.skip.test/", "https://x.internal/",
                "https://10.1.2.3/"):
        assert proxy(url) is None, url
    assert proxy("https://notskip.test/") is not None
