"""``nhbench server --config`` with an Envoy bootstrap of Nighthawk's test server.

The configs Nighthawk ships (tests/data/nighthawk/server/, copied unchanged from
envoyproxy/nighthawk test/integration/configurations/, see tests/data/nighthawk/README.md)
load; the HTTPS and QUIC ones (inline certificates, a QUIC listener) are started and served
in tests/test_server_h3.py. A TLS transport socket with certificate files is served as TLS;
a listener's TLS, QUIC or any TLS setting the server does not have is never turned into
plain HTTP, and a cluster's endpoints (where Envoy sends traffic) are never listened on.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
from pathlib import Path

import pytest

import nhbench
from nhbench.options import load_config_file, make_server_options

DATA = Path(__file__).resolve().parent / "data" / "nighthawk" / "server"
SRC = str(Path(nhbench.__file__).resolve().parent.parent)
OPENSSL = shutil.which("openssl")

HCM = """\
      filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          http_filters:
          - name: test-server
            typed_config:
              "@type": type.googleapis.com/nighthawk.server.ResponseOptions
              response_body_size: 10
"""


def _nighthawk_config(name: str, tmp_path: Path) -> Path:
    # Nighthawk's integration tests substitute these placeholders before starting Envoy.
    text = (DATA / name).read_text().replace("$server_ip", "127.0.0.1").replace(
        "$tmpdir", str(tmp_path))
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(("name", "listeners"), [
    ("nighthawk_http_origin.yaml", 1),
    ("nighthawk_track_timings.yaml", 1),
    ("nighthawk_5_listeners_http_origin.yaml", 5),
])
def test_nighthawk_configs_the_server_can_serve_load(
    name: str, listeners: int, tmp_path: Path,
) -> None:
    options = make_server_options(config=_nighthawk_config(name, tmp_path))
    assert options.listen == (("tcp", "127.0.0.1", 0),) * listeners
    assert options.response.response_body_size == 10
    assert not options.tls


@pytest.mark.parametrize("name", ["nighthawk_https_origin.yaml",
                                  "nighthawk_https_origin_quic.yaml"])
def test_nighthawk_configs_with_runfile_placeholders_are_refused_by_name(
    name: str, tmp_path: Path,
) -> None:
    # Unsubstituted, their inline certificates are Nighthawk's "@inject-runfile:" lines, not
    # PEM: refused by name (tests/test_server_h3.py substitutes them and serves the configs).
    expected = "tls_certificates[0].certificate_chain.inline_string: must be PEM text"
    with pytest.raises(ValueError, match=re.escape(expected)):
        load_config_file(_nighthawk_config(name, tmp_path))


def _bootstrap(tmp_path: Path, listeners: str, clusters: str = "") -> Path:
    path = tmp_path / "bootstrap.yaml"
    path.write_text("static_resources:\n  listeners:\n" + listeners + clusters)
    return path


def _listener(port: int, transport: str = "", extra: str = "", protocol: str = "") -> str:
    return (f"  - address: {{socket_address: {{{protocol}address: 127.0.0.1, "
            f"port_value: {port}}}}}\n{extra}    filter_chains:\n    - {transport}"
            + HCM.replace("      filters:", "filters:", 1))


def _tls_socket(cert: str, key: str, more: str = "") -> str:
    return f"""transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          common_tls_context:
            tls_certificates:
            - certificate_chain: {{filename: {cert}}}
              private_key: {{filename: {key}}}
{more}      """


def test_cluster_endpoints_are_not_listen_addresses(tmp_path: Path) -> None:
    clusters = """  clusters:
  - name: upstream
    load_assignment:
      cluster_name: upstream
      endpoints:
      - lb_endpoints:
        - endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: 4567}}}
"""
    config = load_config_file(_bootstrap(tmp_path, _listener(0), clusters))
    assert config["listen"] == ["127.0.0.1:0"]


@pytest.mark.parametrize(("listeners", "expected"), [
    (_listener(0, _tls_socket("/nonexistent/cert.pem", "/nonexistent/key.pem")),
     "certificate_chain.filename: no such file '/nonexistent/cert.pem'"),
    (_listener(0, extra="    udp_listener_config: {quic_options: {}}\n",
               protocol="protocol: UDP, "),
     "static_resources.listeners[0].filter_chains[0].transport_socket: a QUIC listener needs "
     "a QUIC transport socket"),
    (_listener(0, extra="    udp_listener_config: {quic_options: {}}\n"),
     "static_resources.listeners[0].address.socket_address.protocol: must be UDP with "
     "udp_listener_config"),
    (_listener(0, extra="    udp_listener_config: {quic_options: {idle_timeout: 5s}}\n",
               protocol="protocol: UDP, "),
     "udp_listener_config.quic_options.idle_timeout: not supported"),
    (_listener(0, extra="    udp_listener_config: {downstream_socket_config: {}, "
               "quic_options: {}}\n", protocol="protocol: UDP, "),
     "udp_listener_config.downstream_socket_config: not supported"),
    (_listener(0, "transport_socket: {name: envoy.transport_sockets.quic}\n      "),
     "transport_socket: a QUIC transport socket on a TCP listener"),
    (_listener(0, "transport_socket: {name: envoy.transport_sockets.alts}\n      "),
     "transport socket 'envoy.transport_sockets.alts' is not supported"),
    (_listener(0, "filter_chain_match: {server_names: [a.example]}\n      "),
     "filter_chains[0].filter_chain_match: not supported"),
])
def test_what_the_server_cannot_serve_is_refused_in_one_line(
    listeners: str, expected: str, tmp_path: Path,
) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "nhbench", "server", "--config",
         str(_bootstrap(tmp_path, listeners))],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(
            filter(None, [SRC, os.environ.get("PYTHONPATH")]))},
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("nhbench: error: --config")
    assert expected in proc.stderr, proc.stderr


@pytest.fixture(scope="module")
def key_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    if OPENSSL is None:
        pytest.skip("the openssl command is not installed")
    root = tmp_path_factory.mktemp("bootstrap-tls")
    subprocess.run(
        [OPENSSL, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "2", "-subj", "/CN=localhost", "-addext",
         "subjectAltName=IP:127.0.0.1", "-keyout", str(root / "key.pem"),
         "-out", str(root / "cert.pem")],
        check=True, capture_output=True, timeout=60,
    )
    return root / "cert.pem", root / "key.pem"


def test_tls_settings_the_server_lacks_are_refused(
    key_pair: tuple[Path, Path], tmp_path: Path,
) -> None:
    cert, key = key_pair
    more = "            tls_params: {tls_minimum_protocol_version: TLSv1_3}\n"
    with pytest.raises(ValueError, match=r"common_tls_context\.tls_params: not supported"):
        load_config_file(_bootstrap(tmp_path, _listener(0, _tls_socket(str(cert), str(key),
                                                                         more))))
    plain_and_tls = _listener(0, _tls_socket(str(cert), str(key))) + _listener(0)
    with pytest.raises(ValueError, match=r"listeners\[1\]: has no TLS transport socket"):
        load_config_file(_bootstrap(tmp_path, plain_and_tls))


@pytest.mark.timeout(60)
def test_a_tls_transport_socket_is_served_as_tls(
    key_pair: tuple[Path, Path], tmp_path: Path,
) -> None:
    cert, key = key_pair
    path = _bootstrap(tmp_path, _listener(0, _tls_socket(str(cert), str(key))))
    options = make_server_options(config=path)
    assert (options.tls_cert, options.tls_key) == (str(cert), str(key))
    with nhbench.TestServer(config=path) as server:
        host, port = server.address
        assert server.url.startswith("https://")
        context = ssl.create_default_context(cafile=str(cert))
        with socket.create_connection((host, port), timeout=10) as raw, \
                context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            tls.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            answer = tls.recv(100)
        # Plain HTTP on the same port is not answered as HTTP.
        with socket.create_connection((host, port), timeout=10) as plain:
            plain.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            try:
                reply = plain.recv(100)
            except ConnectionResetError:
                reply = b""
    assert answer.startswith(b"HTTP/1.1 200")
    assert not reply.startswith(b"HTTP/1.1 200")
