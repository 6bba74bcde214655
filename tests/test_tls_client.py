"""The client over TLS against nginx (an independent peer) with self-signed certificates.

Counts and ratios only, no timing thresholds. nginx's access log is the independent count:
every request it answered is one line. Skipped when nginx or the openssl command is missing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.nginx import needs_nginx_and_openssl, run_counted_by_nginx

import nhbench
from benchmarks.nginx_origin import BODY, NginxOrigin

pytestmark = [pytest.mark.core, needs_nginx_and_openssl]

CPUS = sorted(os.sched_getaffinity(0))
CLIENT_CPU = str(CPUS[0])
PACKAGE_PARENT = str(Path(nhbench.__file__).resolve().parent.parent)


@pytest.fixture(scope="module")
def origin() -> Iterator[NginxOrigin]:
    with NginxOrigin() as nginx:
        yield nginx


def run(url: str, **kw: object) -> nhbench.Result:
    kw.setdefault("cpus", CLIENT_CPU)
    kw.setdefault("duration", 1.0)
    return nhbench.run(url, **kw)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_PARENT, env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "nhbench", *args], capture_output=True,
                          text=True, timeout=60, env=env, stdin=subprocess.DEVNULL, check=False)


def test_h1_over_tls_counts_agree_with_nginx(origin: NginxOrigin) -> None:
    result = run_counted_by_nginx(origin, run, origin.url("tls"), "HTTP/1.1", rps=0,
                                  connections=4, cacert=origin.cacert)
    c = result.counters
    # One handshake per connection, each timed.
    assert c["ssl.handshake"] == c["upstream_cx_total"] == 4
    assert result.stat("benchmark_http_client.tls_handshake").count == c["ssl.handshake"]
    assert c["ssl.connection_error"] == 0
    body = result.stat("benchmark_http_client.response_body_size")
    assert body.min == body.max == len(BODY)
    assert result.insecure is False


def test_verification_fails_by_default_with_openssls_reason(origin: NginxOrigin) -> None:
    mark = origin.mark()
    result = run(origin.url("tls"), rps=50)
    c = result.counters
    assert not result.success
    assert result.failed_predicates == ["benchmark.pool_connection_failure"]
    assert result.error is not None
    assert "certificate verify failed: self-signed certificate" in result.error
    assert c["ssl.connection_error"] >= 1 and c["ssl.handshake"] == 0
    assert c["benchmark.http_2xx"] == 0 and origin.since(mark) == []
    # The CLI says the same in one line and exits 1.
    proc = cli("run", origin.url("tls"), "--rps", "10", "--duration", "1")
    assert proc.returncode == 1
    assert "certificate verify failed: self-signed certificate" in proc.stderr


def test_cacert_and_insecure_pass_and_insecure_is_recorded(origin: NginxOrigin) -> None:
    verified = run(origin.url("tls"), rps=100, cacert=origin.cacert)
    assert verified.success and verified.counters["benchmark.http_2xx"] == 100
    assert verified.insecure is False
    # A DNS name in the certificate matches too.
    by_name = run(origin.url("tls", host="localhost"), rps=50, cacert=origin.cacert)
    assert by_name.success and by_name.counters["benchmark.http_2xx"] == 50
    insecure = run(origin.url("tls"), rps=100, insecure=True)
    assert insecure.success and insecure.counters["benchmark.http_2xx"] == 100
    assert insecure.insecure is True
    assert "NOT verified" in insecure.render("human")
    # The run-level fields are in the nhbench entry of Nighthawk's JSON.
    assert nhbench.Result.model_validate_json(insecure.render("json")).insecure is True
    proc = cli("run", origin.url("tls"), "-k", "--rps", "20", "--duration", "1",
               "--output-format", "json")
    assert proc.returncode == 0, proc.stderr
    assert nhbench.Result.model_validate_json(proc.stdout).insecure is True


def test_hostname_mismatch_fails(origin: NginxOrigin) -> None:
    # A trusted certificate that is for another name: 127.0.0.1 is not in it.
    result = run(origin.url("tls_other"), rps=50, cacert=origin.other_cacert)
    assert not result.success
    assert result.error is not None and "certificate verify failed" in result.error
    assert "mismatch" in result.error and "127.0.0.1" in result.error
    assert result.counters["ssl.connection_error"] >= 1
    # With --sni the name sent and checked is the certificate's: it passes.
    named = run(origin.url("tls_other"), rps=50, cacert=origin.other_cacert, sni="other.example")
    assert named.success and named.counters["benchmark.http_2xx"] == 50
    # A DNS name that is not in the certificate fails as well.
    wrong = run(origin.url("tls", host="localhost"), rps=20, cacert=origin.cacert,
                sni="wrong.example")
    assert not wrong.success and "mismatch" in (wrong.error or "")


@pytest.mark.parametrize("version", ["1.2", "1.3"])
def test_session_reuse_on_and_off(origin: NginxOrigin, version: str) -> None:
    # Five requests per connection: 200 requests make 40 connections one after the other.
    common = {"rps": 200, "connections": 2, "max_requests_per_connection": 5,
              "cacert": origin.cacert, "tls_max_version": version}
    on = run(origin.url("tls"), **common)
    off = run(origin.url("tls"), tls_session_reuse=False, **common)
    for result in (on, off):
        c = result.counters
        assert result.success, result.error
        # A handshake every five requests: in a slow (sanitizer) build the closed loop may
        # still wait for one when the 1 s run ends, so a release or two may not happen.
        # Every release that did happen must have ended in a 2xx.
        assert c["benchmark.http_2xx"] == c["sequencer.released"] >= 190
        assert c["ssl.handshake"] == c["upstream_cx_total"] >= c["benchmark.http_2xx"] // 5
    assert on.counters["ssl.session_reused"] > on.counters["ssl.handshake"] // 2
    assert off.counters["ssl.session_reused"] == 0


def test_versions_and_cipher_selection(origin: NginxOrigin) -> None:
    tls13 = run(origin.url("tls"), rps=50, cacert=origin.cacert, tls_min_version="1.3",
                tls_ciphersuites="TLS_CHACHA20_POLY1305_SHA256", tls_groups="X25519")
    assert tls13.success and tls13.counters["benchmark.http_2xx"] == 50
    tls12 = run(origin.url("tls"), rps=50, cacert=origin.cacert, tls_max_version="1.2",
                tls_ciphers="ECDHE-ECDSA-AES128-GCM-SHA256")
    assert tls12.success and tls12.counters["benchmark.http_2xx"] == 50
    # The server's key is ECDSA: an RSA-only cipher list cannot agree, and the error says why.
    none = run(origin.url("tls"), rps=20, cacert=origin.cacert, tls_max_version="1.2",
               tls_ciphers="ECDHE-RSA-AES128-GCM-SHA256")
    assert not none.success
    assert none.error is not None and none.error.startswith("TLS handshake failed: ")
    assert "handshake failure" in none.error
    assert none.counters["ssl.connection_error"] >= 1


def test_unknown_group_is_rejected_before_the_run(origin: NginxOrigin) -> None:
    with pytest.raises(nhbench.NHBenchError, match="groups"):
        run(origin.url("tls"), rps=10, cacert=origin.cacert, tls_groups="NoSuchGroup")


def test_large_bodies_both_ways_over_tls(origin: NginxOrigin) -> None:
    mark = origin.mark()
    down = run(origin.url("tls", "/big"), rps=0, connections=2, duration=0.5,
               cacert=origin.cacert)
    assert down.success, down.error
    body = down.stat("benchmark_http_client.response_body_size")
    assert body.count == down.counters["benchmark.http_2xx"] > 0
    assert body.min == body.max == 1024 * 1024
    up = run(origin.url("tls", "/upload"), rps=0, connections=2, duration=0.5,
             request_method="PUT", request_body_size=1024 * 1024, cacert=origin.cacert)
    assert up.success, up.error
    lines = origin.since(mark)
    uploads = [line for line in lines if line[4] == "PUT"]
    assert len(uploads) == up.counters["benchmark.http_2xx"] > 0
    assert all(int(line[5]) > 1024 * 1024 for line in uploads)  # $request_length


def test_http2_over_tls_via_alpn(origin: NginxOrigin) -> None:
    result = run_counted_by_nginx(origin, run, origin.url("tls"), "HTTP/2.0", protocol="http2",
                                  rps=0, cacert=origin.cacert)
    c = result.counters
    assert c["upstream_cx_http2_total"] == c["upstream_cx_total"] == c["ssl.handshake"] == 1


def test_alpn_mismatch_is_a_clear_error(origin: NginxOrigin) -> None:
    result = run(origin.url("tls"), protocol="http2", alpn="http/1.1", rps=20,
                 cacert=origin.cacert)
    assert not result.success
    assert result.error is not None and "ALPN" in result.error and "http/1.1" in result.error
    assert result.counters["upstream_cx_protocol_error"] >= 1
