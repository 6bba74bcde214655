"""HTTP/3 in the test server (``--http3``): QUIC on the TLS listen ports.

Two peers: nhbench's own HTTP/3 client (ngtcp2 + nghttp3, the same libraries as the
server) and an independent one, aioquic's (tests/support/h3_client.py, a small client on
aioquic's documented API). Both get the configured responses (status, headers, body size,
delays, echo); the counters add up; Alt-Svc is advertised on the HTTP/1.1 and HTTP/2 TLS
responses only; and Nighthawk's own HTTPS and QUIC origin configs (tests/data/nighthawk/
server/, copied from envoyproxy/nighthawk test/integration/configurations/) start and serve,
their inline certificates in private temporary files removed at exit.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.peers import peer_env
from support.polling import wait_until

import nhbench
from nhbench import TestServer

HERE = Path(__file__).resolve().parent
CLIENT = HERE / "support" / "h3_client.py"
DATA = HERE / "data" / "nighthawk" / "server"
SRC = str(Path(nhbench.__file__).resolve().parent.parent)
OPENSSL = shutil.which("openssl")
CURL = shutil.which("curl")

pytestmark = pytest.mark.timeout(120)


def aioquic(url: str, cacert: str, *args: str, count: int = 1) -> list[dict[str, Any]]:
    """Responses from aioquic's HTTP/3 client, one dict per request."""
    proc = subprocess.run(
        [sys.executable, str(CLIENT), "--cacert", cacert, "--count", str(count), *args, url],
        capture_output=True, text=True, timeout=60, env=peer_env(),
    )
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert proc.returncode == 0 and len(lines) == count, (proc.stdout, proc.stderr[-2000:])
    return lines


def header(response: dict[str, Any], name: str) -> list[str]:
    return [v for n, v in response["headers"] if n == name]


def settled(server: TestServer, key: str, value: int) -> dict[str, Any]:
    """The server's stats once `key` reached `value` (the last response of a run counts when
    its packet is written, which may be a moment after the client has it)."""
    wait_until(lambda: server.stats()[key] >= value, timeout=10)
    return server.stats()


@pytest.fixture(scope="module")
def key_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    if OPENSSL is None:
        pytest.skip("the openssl command is not installed")
    root = tmp_path_factory.mktemp("h3-tls")
    subprocess.run(
        [OPENSSL, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "2", "-subj", "/CN=localhost", "-addext",
         "subjectAltName=IP:127.0.0.1,DNS:localhost", "-keyout", str(root / "key.pem"),
         "-out", str(root / "cert.pem")],
        check=True, capture_output=True, timeout=60, env=peer_env(),
    )
    return root / "cert.pem", root / "key.pem"


# ---- our client --------------------------------------------------------------------------


def test_our_http3_client_gets_every_response_and_the_counts_add_up() -> None:
    with TestServer("127.0.0.1:0", tls_self_signed=True, http3=True, workers=2,
                    response_body_size=100, response_headers={"x-nh": "1"}) as server:
        result = nhbench.run(server.url, protocol="http3", cacert=server.ca_cert,
                             duration=1, rps=300, connections=4)
        ok = result.counters.get("benchmark.http_2xx", 0)
        assert ok >= 250 and result.error_count == 0, result.counters
        stats = settled(server, "requests", ok)
    assert stats["requests"] == ok == stats["status"]["200"]
    assert stats["connections_http3"] >= 1
    assert stats["connections_http3"] == stats["connections_total"] == stats["tls_handshakes"]
    assert stats["connections_http1"] == stats["connections_http2"] == 0
    assert stats["tls_handshake_errors"] == stats["h3_protocol_errors"] == 0
    assert stats["connections_active"] == 0  # the client's CONNECTION_CLOSE ended them
    # 100-byte bodies (plus headers and QUIC's own bytes) went out for every response.
    assert stats["tx_bytes"] > 100 * ok


def test_our_http3_client_closes_each_connection_it_is_done_with() -> None:
    # One request per connection: each of the ten ends with the client's CONNECTION_CLOSE
    # when its response is in, not only those still open when the run ends; without it the
    # server would hold nine until its idle time-out (a minute).
    with TestServer("127.0.0.1:0", tls_self_signed=True, http3=True) as server:
        result = nhbench.run(server.url, protocol="http3", cacert=server.ca_cert, rps=50,
                             requests=10, connections=1, max_requests_per_connection=1)
        assert result.counters.get("benchmark.http_2xx") == 10, result.counters
        assert wait_until(lambda: server.stats()["connections_active"] == 0, timeout=10)
        stats = server.stats()
    assert stats["connections_http3"] == 10
    assert stats["tls_handshake_errors"] == stats["h3_protocol_errors"] == 0


def test_our_http3_client_sees_the_nighthawk_delay_per_request() -> None:
    delay = '{"static_delay": "0.08s"}'
    with TestServer("127.0.0.1:0", tls_self_signed=True, http3=True) as server:
        result = nhbench.run(server.url, protocol="http3", cacert=server.ca_cert, duration=1,
                             rps=50, connections=2,
                             request_header=[f"x-nighthawk-test-server-config: {delay}"])
        ok = result.counters.get("benchmark.http_2xx", 0)
        stats = settled(server, "requests", ok)
    assert ok >= 40 and stats["requests"] == ok
    # Wide bounds: the delay is 80 ms; no response came back faster than most of it.
    assert result.latency.min >= 0.06, result.latency


# ---- an independent client ------------------------------------------------------------------


def test_aioquic_gets_the_configured_responses() -> None:
    with TestServer("127.0.0.1:0", tls_self_signed=True, http3=True,
                    response_headers={"x-static": "yes"}) as server:
        url, ca = server.url, server.ca_cert
        nh = ('x-nighthawk-test-server-config: {"response_body_size": 7, '
              '"response_headers": [{"header": {"key": "x-per-request", "value": "1"}}]}')
        first, second = aioquic(url + "nh", ca, "--header", nh, count=2)
        (fortio,) = aioquic(url + "echo?status=418&size=33", ca)
        (echo,) = aioquic(url + "echo", ca, "--method", "POST", "--data", "hello over quic")
        (delayed,) = aioquic(url, ca, "--header",
                             'x-nighthawk-test-server-config: {"static_delay": "0.3s"}')
        (debug,) = aioquic(url + "debug", ca)
        stats = settled(server, "requests", 6)
    for response in (first, second):
        assert response["status"] == 200 and response["body_bytes"] == 7
        assert response["body"] == "aaaaaaa"
        assert header(response, "x-static") == ["yes"]
        assert header(response, "x-per-request") == ["1"]
        assert header(response, "content-length") == ["7"]
        assert header(response, "server") == ["nhbench"]
        # HTTP/3 itself is not advertised over HTTP/3.
        assert header(response, "alt-svc") == []
    assert fortio["status"] == 418 and fortio["body_bytes"] == 33
    assert echo["status"] == 200 and echo["body"] == "hello over quic"
    assert delayed["status"] == 200 and delayed["seconds"] >= 0.25
    assert debug["status"] == 200
    assert "GET /debug HTTP/3.0" in debug["body"] and "(QUIC)" in debug["body"]
    assert stats["requests"] == 6 and stats["status"]["418"] == 1
    assert stats["connections_http3"] == 5  # one QUIC connection per client run


def test_a_new_connection_from_the_port_of_one_never_closed_is_served() -> None:
    # The server finds QUIC connections by the client's address. A client that went away
    # without CONNECTION_CLOSE leaves its connection behind; the kernel may give the port to
    # the next socket, whose handshake (an Initial naming a new connection ID) must start a
    # connection of its own beside the stale one, not go to it.
    with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as probe:
        probe.bind(("::", 0))
        port = str(probe.getsockname()[1])
    with TestServer("127.0.0.1:0", tls_self_signed=True, http3=True) as server:
        url, ca = server.url, server.ca_cert
        (first,) = aioquic(url, ca, "--local-port", port, "--abandon")
        assert server.stats()["connections_active"] == 1  # left behind
        (second,) = aioquic(url, ca, "--local-port", port)
        stats = settled(server, "requests", 2)
        # The second closed; the stale one stays until its idle time-out.
        assert wait_until(lambda: server.stats()["connections_active"] == 1, timeout=10)
    assert first["status"] == second["status"] == 200
    assert stats["connections_http3"] == 2 and stats["quic_connections_beside"] == 1
    assert stats["h3_protocol_errors"] == 0


@pytest.mark.skipif(CURL is None, reason="curl is not installed")
def test_alt_svc_names_the_port_on_h1_and_h2_tls_responses_only_with_http3() -> None:
    heads: dict[bool, list[str]] = {}
    for http3 in (True, False):
        with TestServer("127.0.0.1:0", tls_self_signed=True, http3=http3,
                        response_body_size=3) as server:
            port = server.address[1]
            heads[http3] = [
                subprocess.run([str(CURL), "-sS", "-D-", "-o/dev/null", "--cacert",
                                server.ca_cert, flag, server.url],
                               capture_output=True, text=True, timeout=30,
                               env=peer_env()).stdout.lower()
                for flag in ("--http1.1", "--http2")
            ]
        if http3:
            for head in heads[http3]:
                assert f'alt-svc: h3=":{port}"' in head, head
    assert all("alt-svc" not in head for head in heads[False])
    assert heads[True][1].startswith("http/2 200")


def test_http3_needs_tls() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [SRC, os.environ.get("PYTHONPATH")]))}
    for argv, expected in (
        (["--http3"], "--http3: needs"),
    ):
        proc = subprocess.run([sys.executable, "-m", "nhbench", "server", "--listen",
                               "127.0.0.1:0", *argv], capture_output=True, text=True,
                              timeout=60, stdin=subprocess.DEVNULL, env=env)
        assert proc.returncode == 2 and proc.stdout == "", proc.stderr
        assert proc.stderr.count("\n") == 1 and expected in proc.stderr, proc.stderr


# ---- client certificates over QUIC (--tls-client-ca) --------------------------------------


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Any:
    if OPENSSL is None:
        pytest.skip("the openssl command is not installed")
    from support.pki import make_pki

    return make_pki(tmp_path_factory.mktemp("h3-mtls"))


def test_client_certificates_are_required_and_verified_over_quic(pki: Any) -> None:
    # Our client (GnuTLS) with the certificate the CA issued, without one, with one another
    # CA issued and with an expired one: only the first completes its handshakes, and the
    # server counts each kind as its TCP listener does.
    with TestServer("127.0.0.1:0", tls_self_signed=True, http3=True, tls_client_ca=pki.ca,
                    workers=1) as server:
        def run(**kw: Any) -> nhbench.Result:
            return nhbench.run(server.url, protocol="http3", cacert=server.ca_cert,
                               duration=0.5, rps=40, connections=2, allow_no_success=True,
                               no_default_failure_predicates=True, **kw)

        good = run(cert=pki.cert, key=pki.key)
        ok = good.counters.get("benchmark.http_2xx", 0)
        stats = settled(server, "requests", ok)
        assert ok == 20 and stats["requests"] == ok, good.counters
        assert stats["tls_clients_verified"] == stats["tls_handshakes"] == \
            good.counters["upstream_cx_http3_total"] >= 1
        assert stats["tls_clients_refused"] == 0
        refused = 0
        for kw in ({}, {"cert": pki.other_ca_cert, "key": pki.other_ca_key},
                   {"cert": pki.expired_cert, "key": pki.key}):
            bad = run(**kw)
            assert bad.counters.get("benchmark.http_2xx", 0) == 0, (kw, bad.counters)
            attempts = bad.counters["upstream_cx_http3_total"]
            assert attempts >= 1
            refused += attempts
            # The server's alert: certificate_required (116) or bad_certificate (42).
            assert "0x174" in (bad.error or "") or "0x12a" in (bad.error or ""), bad.error
            wait_until(lambda r=refused: server.stats()["tls_clients_refused"] >= r, timeout=10)
        stats = server.stats()
    assert stats["tls_clients_refused"] == stats["tls_handshake_errors"] == refused
    assert stats["tls_clients_verified"] == stats["tls_handshakes"]
    assert stats["requests"] == ok


def test_aioquic_client_certificate_over_quic(pki: Any) -> None:
    with TestServer("127.0.0.1:0", tls_self_signed=True, http3=True,
                    tls_client_ca=pki.ca) as server:
        url, ca = server.url, server.ca_cert
        (response,) = aioquic(url, ca, "--cert", pki.cert, "--key", pki.key)
        proc = subprocess.run([sys.executable, str(CLIENT), "--cacert", ca, "--timeout", "5",
                               url], capture_output=True, text=True, timeout=60,
                              env=peer_env())
        stats = settled(server, "tls_clients_refused", 1)
    assert response["status"] == 200
    assert proc.returncode == 1 and '"error"' in proc.stdout, (proc.stdout, proc.stderr)
    assert stats["tls_clients_verified"] == stats["tls_handshakes"] == 1
    assert stats["tls_clients_refused"] == stats["tls_handshake_errors"] == 1
    assert stats["requests"] == 1


# ---- Nighthawk's own origin configs -----------------------------------------------------------


def nighthawk_config(name: str, tmp_path: Path, cert: Path, key: Path) -> Path:
    """Nighthawk's integration tests substitute $server_ip, $tmpdir and each
    ``@inject-runfile:PATH`` line (its test certificate and key) before starting Envoy; here
    the key pair of this test takes the place of Envoy's test certificates."""
    files = {"servercert.pem": cert.read_text(), "serverkey.pem": key.read_text()}
    out = []
    for line in (DATA / name).read_text().replace("$server_ip", "127.0.0.1").replace(
            "$tmpdir", str(tmp_path)).splitlines():
        stripped = line.lstrip()
        if stripped.startswith("@inject-runfile:"):
            indent = line[: len(line) - len(stripped)]
            pem = files[stripped.rsplit("/", 1)[1]]
            out += [indent + pem_line for pem_line in pem.splitlines()]
        else:
            out.append(line)
    path = tmp_path / name
    path.write_text("\n".join(out) + "\n")
    return path


def test_nighthawks_quic_origin_config_serves_http3(
    key_pair: tuple[Path, Path], tmp_path: Path,
) -> None:
    cert, key = key_pair
    path = nighthawk_config("nighthawk_https_origin_quic.yaml", tmp_path, cert, key)
    with TestServer(config=path) as server:
        assert server.options.http3 and server.options.tls
        (response,) = aioquic(server.url, str(cert))
        result = nhbench.run(server.url, protocol="http3", cacert=str(cert), duration=0.5,
                             rps=40)
        ok = result.counters.get("benchmark.http_2xx", 0)
        stats = settled(server, "requests", ok + 1)
    # The config's ResponseOptions: a 10-byte body and x-nh: 1.
    assert response["status"] == 200 and response["body_bytes"] == 10
    assert header(response, "x-nh") == ["1"]
    assert ok >= 15 and stats["requests"] == ok + 1
    assert stats["connections_http3"] == 2


def test_nighthawks_https_origin_config_serves_tls_from_inline_certificates(
    key_pair: tuple[Path, Path], tmp_path: Path,
) -> None:
    cert, key = key_pair
    path = nighthawk_config("nighthawk_https_origin.yaml", tmp_path, cert, key)
    with TestServer(config=path) as server:
        assert server.options.tls and not server.options.http3
        result = nhbench.run(server.url, cacert=str(cert), duration=0.5, rps=40,
                             protocol="http2")
        ok = result.counters.get("benchmark.http_2xx", 0)
        stats = settled(server, "requests", ok)
    assert ok >= 15 and stats["requests"] == ok and stats["connections_http2"] >= 1


def test_inline_certificates_live_in_private_files_removed_at_exit(
    key_pair: tuple[Path, Path], tmp_path: Path,
) -> None:
    cert, key = key_pair
    path = nighthawk_config("nighthawk_https_origin_quic.yaml", tmp_path, cert, key)
    private = tmp_path / "tmp"
    private.mkdir()
    address_file = tmp_path / "address"
    env = {**os.environ, "TMPDIR": str(private), "PYTHONPATH": os.pathsep.join(
        filter(None, [SRC, os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen(
        [sys.executable, "-m", "nhbench", "server", "--config", str(path), "--address-file",
         str(address_file)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=env, stdin=subprocess.DEVNULL)
    try:
        assert wait_until(lambda: address_file.exists() and address_file.read_text().strip(),
                          timeout=30), proc.stderr
        files = sorted(private.glob("nhbench-inline-*.pem"))
        assert len(files) == 2  # the certificate and the key
        assert all(f.stat().st_mode & 0o077 == 0 for f in files)
        assert {f.read_text() for f in files} == {cert.read_text(), key.read_text()}
        port = json.loads(address_file.read_text())["listen"][0]["port"]
        (response,) = aioquic(f"https://127.0.0.1:{port}/", str(cert))
        assert response["status"] == 200 and response["body_bytes"] == 10
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert list(private.glob("nhbench-inline-*")) == []
