"""Client certificates (mutual TLS): nhbench's client against nginx with
``ssl_verify_client on`` and against its own test server with ``--tls-client-ca``, curl and
``openssl s_client`` against that server, session resumption with client auth, and the bad
certificate files refused before anything is sent.

nginx's access log is the independent count. nginx does not fail the handshake of a client
without a certificate: it completes it and answers every request 400 ("No required SSL
certificate was sent"); nhbench's test server fails the handshake instead, which the client
counts as a TLS failure (ssl.connection_error) with the server's alert as the first error.
Counts only, no timing thresholds.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli import nhbench_cli as cli
from support.nginx import needs_nginx_and_openssl
from support.peers import peer_env
from support.pki import PASSPHRASE, Pki, make_pki

import nhbench
from benchmarks.nginx_origin import NginxOrigin

pytestmark = [pytest.mark.core, needs_nginx_and_openssl]

CPUS = sorted(os.sched_getaffinity(0))
CLIENT_CPU = str(CPUS[0])


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def origin(pki: Pki) -> Iterator[NginxOrigin]:
    with NginxOrigin(listeners=("tls",), client_ca=pki.ca) as nginx:
        yield nginx


@pytest.fixture(scope="module")
def server(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[nhbench.TestServer]:
    ca_out = tmp_path_factory.mktemp("srv") / "ca.pem"
    with nhbench.TestServer(tls_self_signed=True, tls_ca_out=str(ca_out),
                            tls_client_ca=pki.ca, workers=1) as srv:
        yield srv


def run(url: str, **kw: object) -> nhbench.Result:
    kw.setdefault("cpus", CLIENT_CPU)
    kw.setdefault("duration", 1.0)
    kw.setdefault("rps", 200)
    return nhbench.run(url, **kw)



# ---- against nginx (ssl_verify_client on) ------------------------------------------------


@pytest.mark.parametrize("protocol", ["http1", "http2"])
def test_nginx_with_a_certificate_counts_agree(origin: NginxOrigin, pki: Pki,
                                               protocol: str) -> None:
    mark = origin.mark()
    result = run(origin.url("tls"), cacert=origin.cacert, cert=pki.cert, key=pki.key,
                 protocol=protocol)
    lines = origin.since(mark)
    c = result.counters
    assert result.success, result.error
    assert c["benchmark.http_2xx"] > 100
    assert len(lines) == c["benchmark.http_2xx"] == c["upstream_rq_total"]
    assert {line[3] for line in lines} == {"200"}


def test_nginx_without_a_certificate_answers_400_to_every_request(origin: NginxOrigin) -> None:
    mark = origin.mark()
    result = run(origin.url("tls"), cacert=origin.cacert, no_default_failure_predicates=True)
    lines = origin.since(mark)
    c = result.counters
    assert c["benchmark.http_2xx"] == 0
    assert c["benchmark.http_4xx"] == len(lines) > 0
    assert {line[3] for line in lines} == {"400"}


def test_nginx_with_a_certificate_from_another_ca_is_refused(origin: NginxOrigin,
                                                             pki: Pki) -> None:
    mark = origin.mark()
    result = run(origin.url("tls"), cacert=origin.cacert, cert=pki.other_ca_cert,
                 key=pki.other_ca_key, no_default_failure_predicates=True)
    lines = origin.since(mark)
    assert result.counters["benchmark.http_2xx"] == 0
    assert result.counters["benchmark.http_4xx"] == len(lines) > 0
    assert {line[3] for line in lines} == {"400"}


def test_nginx_encrypted_key_with_its_passphrase(origin: NginxOrigin, pki: Pki,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NHB_TEST_KEY_PASS", PASSPHRASE)
    mark = origin.mark()
    result = run(origin.url("tls"), cacert=origin.cacert, cert=pki.cert,
                 key=pki.key_encrypted, key_passphrase_env="NHB_TEST_KEY_PASS")
    assert result.success, result.error
    assert result.counters["benchmark.http_2xx"] == len(origin.since(mark)) > 100


def test_nginx_session_resumption_with_client_auth(origin: NginxOrigin, pki: Pki) -> None:
    # Five requests per connection: about 40 connections one after the other, each after
    # the first resuming the worker's session, which carries the client's identity.
    mark = origin.mark()
    result = run(origin.url("tls"), cacert=origin.cacert, cert=pki.cert, key=pki.key,
                 connections=2, max_requests_per_connection=5, tls_max_version="1.3")
    c = result.counters
    assert result.success, result.error
    assert c["benchmark.http_2xx"] == len(origin.since(mark)) >= 150
    assert c["ssl.handshake"] >= c["benchmark.http_2xx"] // 5
    assert c["ssl.session_reused"] > c["ssl.handshake"] // 2


def test_nginx_cli_spelling(origin: NginxOrigin, pki: Pki) -> None:
    mark = origin.mark()
    done = cli("run", origin.url("tls"), "--cacert", origin.cacert, "--cert", pki.cert,
               "--key", pki.key, "--duration", "1", "--rps", "100", "--output-format", "json")
    assert done.returncode == 0, done.stderr
    assert len(origin.since(mark)) >= 90


# ---- against nhbench's test server (--tls-client-ca) ---------------------------------


def test_server_verifies_our_client(server: nhbench.TestServer, pki: Pki) -> None:
    before = server.stats()
    result = run(server.url, cacert=server.ca_cert, cert=pki.cert, key=pki.key,
                 connections=2, max_requests_per_connection=5)
    after = server.stats()
    c = result.counters
    assert result.success, result.error
    handshakes = after["tls_handshakes"] - before["tls_handshakes"]
    assert handshakes == c["ssl.handshake"] >= c["benchmark.http_2xx"] // 5
    assert after["tls_clients_verified"] - before["tls_clients_verified"] == handshakes
    assert after["tls_clients_refused"] == before["tls_clients_refused"]
    # Resumed sessions keep the client's identity: the server resumes them too.
    reused = after["tls_session_reused"] - before["tls_session_reused"]
    assert reused == c["ssl.session_reused"] > handshakes // 2


@pytest.mark.parametrize("which", ["none", "other_ca", "expired"])
def test_server_refuses_a_client_without_a_good_certificate(
        server: nhbench.TestServer, pki: Pki, which: str) -> None:
    certs = {"none": {}, "other_ca": {"cert": pki.other_ca_cert, "key": pki.other_ca_key},
             "expired": {"cert": pki.expired_cert, "key": pki.key}}[which]
    before = server.stats()
    result = run(server.url, cacert=server.ca_cert, connections=1, rps=20,
                 no_default_failure_predicates=True, **certs)  # type: ignore[arg-type]
    after = server.stats()
    c = result.counters
    assert c["benchmark.http_2xx"] == 0 and after["requests"] == before["requests"]
    refused = after["tls_clients_refused"] - before["tls_clients_refused"]
    assert refused == c["ssl.connection_error"] > 0
    assert after["tls_clients_verified"] == before["tls_clients_verified"]
    error = result.error or ""
    assert error.startswith("TLS handshake failed: the server "), error
    expected = {"none": "certificate required", "other_ca": "unknown ca",
                "expired": "certificate expired"}[which]
    assert expected in error, error


def test_server_with_curl(server: nhbench.TestServer, pki: Pki) -> None:
    curl = shutil.which("curl")
    if curl is None:
        pytest.skip("curl is not installed")
    before = server.stats()
    ok = subprocess.run([curl, "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--cacert",
                         server.ca_cert, "--cert", pki.cert, "--key", pki.key, server.url],
                        capture_output=True, text=True, timeout=30, check=False, env=peer_env())
    assert ok.stdout == "200", ok.stderr
    bad = subprocess.run([curl, "-sS", "-o", "/dev/null", "--cacert", server.ca_cert, server.url],
                         capture_output=True, text=True, timeout=30, check=False, env=peer_env())
    assert bad.returncode != 0
    after = server.stats()
    assert after["tls_clients_verified"] - before["tls_clients_verified"] == 1
    assert after["tls_clients_refused"] - before["tls_clients_refused"] == 1


def test_server_with_openssl_s_client(server: nhbench.TestServer, pki: Pki) -> None:
    port = server.url.rsplit(":", 1)[1].strip("/")
    request = "GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    base = ["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-CAfile", server.ca_cert,
            "-servername", "localhost", "-quiet"]
    before = server.stats()
    ok = subprocess.run([*base, "-cert", pki.cert, "-key", pki.key], input=request,
                        capture_output=True, text=True, timeout=30, check=False, env=peer_env())
    assert "HTTP/1.1 200" in ok.stdout, ok.stderr
    bad = subprocess.run(base, input=request, capture_output=True, text=True, timeout=30,
                         check=False, env=peer_env())
    assert "HTTP/1.1" not in bad.stdout
    assert "certificate required" in bad.stderr
    after = server.stats()
    assert after["tls_clients_verified"] - before["tls_clients_verified"] == 1
    assert after["tls_clients_refused"] - before["tls_clients_refused"] == 1


# ---- Nighthawk's spelling: --tls-context's tls_certificates --------------------------


@pytest.mark.parametrize("inline", [False, True])
def test_nginx_through_nighthawks_tls_context(origin: NginxOrigin, pki: Pki,
                                              inline: bool) -> None:
    def source(path: str) -> dict[str, str]:
        return {"inline_string": Path(path).read_text()} if inline else {"filename": path}

    context = {"common_tls_context": {
        "validation_context": {"trusted_ca": {"filename": origin.cacert}},
        "tls_certificates": [{"certificate_chain": source(pki.cert),
                              "private_key": source(pki.key_encrypted),
                              "password": {"environment_variable": "NHB_TEST_KEY_PASS"}}],
    }}
    mark = origin.mark()
    done = cli("nighthawk", "client", "--tls-context", json.dumps(context), "--duration", "1", "--rps",
               "100", origin.url("tls"), env={"NHB_TEST_KEY_PASS": PASSPHRASE})
    assert done.returncode == 0, done.stderr
    lines = origin.since(mark)
    assert len(lines) >= 90 and {line[3] for line in lines} == {"200"}


def test_nighthawk_tls_context_refuses_an_inline_password(pki: Pki) -> None:
    context = {"common_tls_context": {"tls_certificates": [{
        "certificate_chain": {"filename": pki.cert}, "private_key": {"filename": pki.key},
        "password": {"inline_string": "secret"}}]}}
    done = cli("nighthawk", "client", "--tls-context", json.dumps(context), "https://127.0.0.1:1/")
    assert done.returncode == 2
    assert "tls_certificates[0].password.inline_string is not supported" in done.stderr


# ---- Fortio's spelling: nhbench fortio load -cert -key -------------------------------


def test_nginx_through_fortio_load(origin: NginxOrigin, pki: Pki) -> None:
    mark = origin.mark()
    done = cli("fortio", "load", "-qps", "0", "-n", "50", "-c", "2", "-cacert", origin.cacert,
               "-cert", pki.cert, "-key", pki.key, origin.url("tls"))
    assert done.returncode == 0, done.stderr
    assert "Code 200 : 50 " in done.stdout + done.stderr
    lines = origin.since(mark)
    assert len(lines) == 50 and {line[3] for line in lines} == {"200"}


def test_server_verifies_our_grpc_client(server: nhbench.TestServer, pki: Pki) -> None:
    before = server.stats()
    result = run(f"grpcs://localhost:{server.address[1]}", cacert=server.ca_cert,
                 cert=pki.cert, key=pki.key, rps=50)
    after = server.stats()
    assert result.success, result.error
    assert after["grpc_calls"] - before["grpc_calls"] == result.counters["benchmark.http_2xx"]
    assert after["tls_clients_verified"] - before["tls_clients_verified"] >= 1
