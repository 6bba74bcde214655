"""HTTP/3: nhbench's QUIC client (ngtcp2 + nghttp3 + GnuTLS) against aioquic's
HTTP/3 server, an independent implementation (tests/support/h3_server.py, run as a process).

The server counts what it answered; the tests compare exact counts with nhbench's. Certificates
come from the openssl command: a test CA and a server certificate it signed for 127.0.0.1 and
localhost. Counts and wide ratios only, no timing thresholds; the one wall-clock bound is the
issue's "a server that goes away ends the run within duration + drain + 1 s". Skipped, with the
reason, when aioquic or openssl is missing. The tests that drive the C core's error paths are
marked `core` (a second run under ASan+UBSan in CI); each starts one aioquic server (~0.5 s).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.accounting import assert_accounting
from test_cli_errors import assert_one_line_error, nhbench_cli

import nhbench

OPENSSL = shutil.which("openssl")
pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("aioquic") is None,
                       reason="aioquic is not installed (pip install aioquic)"),
    pytest.mark.skipif(OPENSSL is None, reason="the openssl command is not installed"),
]

SERVER = Path(__file__).parent / "support" / "h3_server.py"
CPU = str(sorted(os.sched_getaffinity(0))[0])
SIZE = 123


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return make_certs(tmp_path_factory.mktemp("h3certs"))


def make_certs(d: Path) -> dict[str, str]:
    """A test CA and a server certificate it signed (127.0.0.1 and localhost), in `d`."""
    assert OPENSSL is not None

    def ssl(*args: str) -> None:
        subprocess.run([OPENSSL, *args], check=True, capture_output=True, cwd=d)

    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    ssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
        "-subj", "/CN=nhbench h3 test CA", "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=keyCertSign")
    ssl("req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost")
    (d / "ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    ssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "ext")
    return {"ca": str(d / "ca.pem"), "cert": str(d / "server.pem"), "key": str(d / "server.key")}


class H3Server:
    """aioquic's HTTP/3 server as a subprocess; stop() returns what it counted."""

    def __init__(self, certs: dict[str, str], size: int = SIZE, *extra: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(SERVER), "--cert", certs["cert"], "--key", certs["key"],
             "--size", str(size), *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("port "):
            self.proc.kill()
            raise RuntimeError(f"the aioquic server did not start: {line!r} "
                               f"{self.proc.stderr.read() if self.proc.stderr else ''}")
        self.port = int(line.split()[1])

    def url(self, path: str = "/", host: str = "127.0.0.1") -> str:
        return f"https://{host}:{self.port}{path}"

    def stop(self) -> dict[str, Any]:
        self.proc.send_signal(signal.SIGTERM)
        out, err = self.proc.communicate(timeout=30)
        return json.loads(out.strip().splitlines()[-1]) if out.strip() else {}

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate(timeout=30)


@pytest.fixture
def h3(certs: dict[str, str]) -> Iterator[H3Server]:
    server = H3Server(certs)
    yield server
    server.kill()


def run(url: str, **kw: Any) -> nhbench.Result:
    kw.setdefault("cpus", CPU)
    kw.setdefault("duration", 1.0)
    kw.setdefault("protocol", "http3")
    return nhbench.run(url, **kw)


@pytest.mark.core  # C error paths, run again under ASan in CI
def test_counts_agree_with_aioquic(h3: H3Server, certs: dict[str, str]) -> None:
    result = run(h3.url(), rps=200, cacert=certs["ca"])
    stats = h3.stop()
    c = result.counters
    assert result.success, result.error
    assert c["benchmark.http_2xx"] == stats["requests"] == 200
    assert stats["methods"] == {"GET": 200}
    # One QUIC handshake per connection, each timed like a TLS handshake.
    assert c["upstream_cx_http3_total"] == c["upstream_cx_total"] == c["ssl.handshake"]
    assert c["ssl.handshake"] == stats["connections"] >= 1
    assert result.stat("benchmark_http_client.tls_handshake").count == c["ssl.handshake"]
    assert c["upstream_cx_http1_total"] == c["upstream_cx_http2_total"] == 0
    body = result.stat("benchmark_http_client.response_body_size")
    assert body.count == 200 and body.min == body.max == SIZE
    # The server sends server and content-length: names plus values.
    header = result.stat("benchmark_http_client.response_header_size")
    assert header.min == header.max == len("server") + len("aioquic-test") + len(
        "content-length") + len(str(SIZE))
    assert c["upstream_cx_tx_bytes_total"] > 0 and c["upstream_cx_rx_bytes_total"] > 200 * SIZE
    assert_accounting(c)


def test_several_connections_several_streams_each(h3: H3Server, certs: dict[str, str]) -> None:
    # 16 requests in flight, at most 4 streams per connection: 4 connections, and the server
    # sees several requests of one connection waiting at once (multiplexed streams).
    result = run(h3.url("/delay/30"), rps=0, duration=0.6, connections=4,
                 max_concurrent_streams=4, max_active_requests=16, cacert=certs["ca"])
    stats = h3.stop()
    c = result.counters
    assert result.success, result.error
    assert c["upstream_cx_total"] == stats["connections"] == 4
    assert c["benchmark.http_2xx"] == stats["requests"] > 16
    assert 2 <= stats["max_pending"] <= 4
    assert_accounting(c)


def test_post_bodies_arrive_whole(h3: H3Server, certs: dict[str, str]) -> None:
    result = run(h3.url(), rps=100, request_method="POST", request_body_size=3000,
                 cacert=certs["ca"])
    stats = h3.stop()
    assert result.success, result.error
    assert result.counters["benchmark.http_2xx"] == stats["methods"]["POST"] == 100
    assert stats["body_bytes"] == 100 * 3000


def test_status_codes_are_counted(h3: H3Server, certs: dict[str, str]) -> None:
    # Without the default failure predicates (benchmark.http_5xx:0 would stop the run).
    result = run(h3.url("/status/503"), rps=50, cacert=certs["ca"],
                 no_default_failure_predicates=True)
    stats = h3.stop()
    c = result.counters
    assert c["benchmark.http_5xx"] == c["benchmark.http_503"] == stats["requests"] == 50
    assert c["benchmark.http_2xx"] == 0


@pytest.mark.core  # C error paths, run again under ASan in CI
@pytest.mark.parametrize("status", ["050", "000", "101"])
def test_a_status_under_100_or_101_is_malformed(h3: H3Server, certs: dict[str, str], status: str) -> None:
    # RFC 9110 section 15: a status under 100 has no class, and HTTP/3 has no 101 (RFC 9114
    # section 4.5): the response is malformed (section 4.1.2), as for HTTP/2. nghttp3's HTTP
    # messaging checks reset the stream (H3_MESSAGE_ERROR, 0x10e): each request ends as a
    # stream reset, never a response counted under some class, and the connection carries on.
    # A guard: were those checks turned off (as session_h2.c turns nghttp2's off for speed),
    # the client would count these responses instead (session_h3.c's h3_field relies on them).
    result = run(h3.url(f"/status/{status}"), rps=20, duration=0.5, cacert=certs["ca"],
                 no_default_failure_predicates=True)
    c = result.counters
    assert_accounting(c)
    # Every request was answered (aioquic's own count has no 101: it sends no DATA after one).
    released = c["sequencer.released"]
    assert released == 10
    assert c["upstream_cx_rx_bytes_total"] > 0
    assert sum(c.get(f"benchmark.http_{k}xx", 0) for k in "12345") + c.get("benchmark.http_xxx", 0) == 0
    assert c["benchmark.stream_resets"] == released
    assert c["upstream_cx_total"] == 1
    assert result.error == "HTTP/3: stream reset before the response ended (error 0x10e)"


def test_verification_needs_the_ca_and_says_why(h3: H3Server, certs: dict[str, str]) -> None:
    # Without --cacert the system store does not know the test CA: no request goes out.
    failed = run(h3.url(), rps=20, duration=0.5)
    assert not failed.success
    assert failed.error is not None and "certificate verify failed" in failed.error
    assert "TLS handshake failed (HTTP/3)" in failed.error
    assert failed.counters["ssl.connection_error"] >= 1 and failed.counters["ssl.handshake"] == 0
    assert failed.counters["benchmark.http_2xx"] == 0
    # A name the certificate is not for fails too (--sni is also the name checked).
    wrong = run(h3.url(), rps=20, duration=0.5, cacert=certs["ca"], sni="wrong.example")
    assert not wrong.success and "certificate verify failed" in (wrong.error or "")
    # The DNS name in the certificate passes, and --insecure skips the check.
    by_name = run(h3.url(host="localhost"), rps=20, duration=0.5, cacert=certs["ca"])
    assert by_name.success and by_name.counters["benchmark.http_2xx"] == 10
    insecure = run(h3.url(), rps=20, duration=0.5, insecure=True)
    assert insecure.success and insecure.counters["benchmark.http_2xx"] == 10
    assert insecure.insecure is True
    # The CLI says so in one line and exits 1.
    proc = nhbench_cli("run", h3.url(), "--h3", "--rps", "10", "--duration", "0.3")
    assert proc.returncode == 1
    assert "certificate verify failed" in proc.stderr
    # Only the two verified-or-insecure runs reached the server.
    assert h3.stop()["requests"] == 20


def test_rate_limited_latency_is_measured_from_the_schedule(
    h3: H3Server, certs: dict[str, str]
) -> None:
    result = run(h3.url(), rps=100, cacert=certs["ca"])
    assert h3.stop()["requests"] == result.counters["benchmark.http_2xx"] == 100
    scheduled = result.stat("benchmark_http_client.scheduled_to_response")
    sent = result.stat("benchmark_http_client.request_to_response")
    assert scheduled.count == sent.count == 100
    # Every request's latency from its scheduled time includes the one from its sending.
    assert scheduled.min >= sent.min and scheduled.max >= sent.max
    assert scheduled.mean >= sent.mean


@pytest.mark.core  # C error paths, run again under ASan in CI
def test_request_timeout_resets_the_stream_and_keeps_the_connection(
    h3: H3Server, certs: dict[str, str]
) -> None:
    result = run(h3.url("/delay/400"), rps=50, duration=0.5, request_timeout=0.1,
                 cacert=certs["ca"], no_default_failure_predicates=True)
    stats = h3.stop()
    c = result.counters
    assert c["benchmark.request_timeout"] == c["sequencer.released"] == 25
    assert c["benchmark.http_2xx"] == 0
    # Each time-out reset its stream only: one connection carried them all.
    assert c["upstream_cx_total"] == stats["connections"] == 1
    assert_accounting(c)


def test_max_requests_per_connection_opens_new_connections(
    h3: H3Server, certs: dict[str, str]
) -> None:
    result = run(h3.url(), rps=100, max_requests_per_connection=10, cacert=certs["ca"])
    stats = h3.stop()
    c = result.counters
    assert result.success, result.error
    assert c["benchmark.http_2xx"] == stats["requests"] == 100
    assert c["upstream_cx_total"] == c["ssl.handshake"] == stats["connections"] == 10


@pytest.mark.core  # C error paths, run again under ASan in CI
def test_goaway_sends_the_unprocessed_requests_again_elsewhere(certs: dict[str, str]) -> None:
    # Every connection gets GOAWAY after 10 answers while 20 requests are in flight: the
    # ones above the GOAWAY's stream id go out again on the next connection, first.
    server = H3Server(certs, SIZE, "--goaway-after", "10")
    try:
        result = run(server.url(), rps=0, duration=0.5, max_active_requests=20,
                     cacert=certs["ca"])
        stats = server.stop()
    finally:
        server.kill()
    c = result.counters
    assert result.success, result.error
    # Every request was answered exactly once, none given up.
    assert c["benchmark.http_2xx"] == stats["requests"] == c["sequencer.released"]
    assert c["upstream_rq_retry_limit_exceeded"] == 0
    assert stats["ignored"] > 0 and c["upstream_rq_retry"] >= stats["ignored"]
    assert c["upstream_cx_total"] == stats["connections"] > 1
    assert c["upstream_cx_close_notify"] in (stats["connections"] - 1, stats["connections"])
    assert_accounting(c)


@pytest.mark.core  # C error paths, run again under ASan in CI
def test_connection_close_fails_what_is_in_flight_and_reconnects(certs: dict[str, str]) -> None:
    # Every connection is closed after 5 answers, with requests still on it (each waits
    # 50 ms at the server): those fail as resets, the run goes on on new connections.
    server = H3Server(certs, SIZE, "--close-after", "5")
    try:
        result = run(server.url("/delay/50"), rps=100, duration=1.0, cacert=certs["ca"],
                     no_default_failure_predicates=True)
        stats = server.stop()
    finally:
        server.kill()
    c = result.counters
    assert c["benchmark.http_2xx"] == stats["requests"] > 0
    assert c["upstream_cx_total"] == stats["connections"] > 1
    assert c["upstream_cx_destroy_remote"] >= 1
    assert c["benchmark.stream_resets"] > 0
    assert_accounting(c)


@pytest.mark.core  # C error paths, run again under ASan in CI
def test_server_that_goes_away_mid_run_is_counted_without_a_hang(
    h3: H3Server, certs: dict[str, str]
) -> None:
    duration, drain = 2.0, 1.0
    box: dict[str, nhbench.Result] = {}

    def go() -> None:
        box["r"] = run(h3.url(), rps=100, duration=duration, drain_timeout=drain,
                       cacert=certs["ca"])

    t0 = time.monotonic()
    thread = threading.Thread(target=go)
    thread.start()
    time.sleep(0.8)
    h3.kill()
    thread.join(timeout=duration + drain + 30)
    elapsed = time.monotonic() - t0
    assert not thread.is_alive()
    assert elapsed < duration + drain + 1 + 2  # the start of the interpreter's run, at most
    c = box["r"].counters
    assert c["benchmark.http_2xx"] > 0
    assert not box["r"].success
    # The requests after the kill fail (refused datagrams end the connection) and are counted.
    assert c["benchmark.pool_connection_failure"] + c["benchmark.stream_resets"] > 0
    assert_accounting(c)


@pytest.mark.core  # C error paths, run again under ASan in CI
@pytest.mark.parametrize(("path", "refused"), [
    # 96 KiB as SETTINGS_MAX_FIELD_SECTION_SIZE counts (name + value + 32 per field): many
    # small fields (2300 or 2600 of about 40 bytes), or a few large ones (about 89,000 bytes,
    # then about 101,000; aioquic sends no value over 64 KiB).
    ("/fields/2300/1", False),
    ("/fields/2600/1", True),
    ("/fields/22/4000", False),
    ("/fields/25/4000", True),
    ("/trailers/25/4000", True),
])
def test_response_header_limits(h3: H3Server, certs: dict[str, str], path: str, refused: bool) -> None:
    # The client's limits on a header block (docs/reliability.md, "Client limits"): a block
    # over them is a protocol error at once, never a 2xx; one at them is an ordinary answer.
    result = run(h3.url(path), rps=20, duration=0.5, cacert=certs["ca"],
                 no_default_failure_predicates=True)
    c = result.counters
    assert_accounting(c)
    released = c["sequencer.released"]
    assert released == 10
    if refused:
        assert c.get("benchmark.http_2xx", 0) == 0
        assert c["upstream_cx_protocol_error"] == c["benchmark.stream_resets"] == released
        assert result.error is not None and "the client's limit" in result.error
    else:
        assert c["benchmark.http_2xx"] == released
        assert c.get("upstream_cx_protocol_error", 0) == 0


@pytest.mark.core  # C error paths, run again under ASan in CI
def test_garbage_from_the_peer_neither_crashes_nor_spins() -> None:
    # A UDP peer that answers every datagram with junk: a short one, a long one, and one
    # that looks like a QUIC long header. No handshake completes; the run ends on time.
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(0.2)
    port = sock.getsockname()[1]
    stop = threading.Event()
    received = [0]

    def peer() -> None:
        while not stop.is_set():
            try:
                data, addr = sock.recvfrom(65535)
            except TimeoutError:
                continue
            received[0] += 1
            for junk in (b"\x00", os.urandom(1200), b"\xc0\x00\x00\x00\x01" + os.urandom(60),
                         data[:20]):
                sock.sendto(junk, addr)

    thread = threading.Thread(target=peer, daemon=True)
    thread.start()
    try:
        t0 = time.monotonic()
        result = run(f"https://127.0.0.1:{port}/", rps=20, duration=0.5, drain_timeout=0.5,
                     timeout=1, insecure=True)
        elapsed = time.monotonic() - t0
    finally:
        stop.set()
        thread.join(timeout=5)
        sock.close()
    assert received[0] > 0
    assert elapsed < 0.5 + 0.5 + 1 + 2
    c = result.counters
    assert c["benchmark.http_2xx"] == 0 and not result.success
    assert_accounting(c)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--tls-ciphers", "ECDHE-RSA-AES128-GCM-SHA256"), "--tls-ciphers: TLS 1.2 cipher"),
        (("--tls-ciphersuites", "TLS_AES_128_GCM_SHA256"), "--tls-ciphersuites: not supported"),
        (("--tls-groups", "X25519"), "--tls-groups: not supported over HTTP/3"),
        (("--tls-min-version", "1.2"), "QUIC, which is TLS 1.3 only"),
        (("--alpn", "h2"), "--alpn: HTTP/3 offers h3 only"),
        (("--http1.0",), "--http1.0: does not apply to HTTP/3"),
        (("--tls-session-reuse", "on"), "no resumption"),
        (("--template",), "--template: not supported over HTTP/3"),
    ],
)
def test_options_http3_cannot_honour_are_refused(args: tuple[str, ...], expected: str) -> None:
    proc = nhbench_cli("run", "https://127.0.0.1:1/", "--h3", "--duration", "0.1", *args)
    assert_one_line_error(proc, expected)


def test_http3_needs_https() -> None:
    assert_one_line_error(nhbench_cli("run", "http://127.0.0.1:1/", "--protocol", "http3"),
                          "the URI must be https://")


GTLSSERVER = shutil.which("gtlsserver") or (
    "/usr/sbin/gtlsserver" if os.access("/usr/sbin/gtlsserver", os.X_OK) else None)


def _udp_port_bound(port: int) -> bool:
    for table in ("/proc/net/udp", "/proc/net/udp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        if any(int(line.split()[1].rsplit(":", 1)[1], 16) == port for line in lines):
            return True
    return False


@pytest.mark.skipif(GTLSSERVER is None,
                    reason="Debian's ngtcp2 example server is not installed "
                    "(apt-get install ngtcp2-server)")
def test_against_debians_ngtcp2_example_server(
    certs: dict[str, str], tmp_path: Path
) -> None:
    assert GTLSSERVER is not None
    (tmp_path / "file.bin").write_bytes(b"y" * 4321)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen(
        [GTLSSERVER, "-q", "--no-quic-dump", "--no-http-dump", "-d", str(tmp_path),
         "127.0.0.1", str(port), certs["key"], certs["cert"]],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if _udp_port_bound(port):
                break
            time.sleep(0.05)
        base = f"https://127.0.0.1:{port}"
        # Bound is not yet serving: a first Initial lost would cost QUIC's first
        # retransmission time-out (about a second) inside the measured run.
        for _ in range(20):
            probe_run = run(f"{base}/file.bin", rps=10, duration=0.1, cacert=certs["ca"])
            if probe_run.counters["benchmark.http_2xx"] > 0:
                break
        result = run(f"{base}/file.bin", rps=200, connections=2, max_concurrent_streams=4,
                     cacert=certs["ca"])
        c = result.counters
        assert result.success, result.error
        assert c["benchmark.http_2xx"] == c["sequencer.released"] == 200, dict(c)
        body = result.stat("benchmark_http_client.response_body_size")
        assert body.min == body.max == 4321
        assert c["ssl.handshake"] == c["upstream_cx_http3_total"] >= 1
        missing = run(f"{base}/absent", rps=50, duration=0.5, cacert=certs["ca"],
                      no_default_failure_predicates=True)
        assert missing.counters["benchmark.http_4xx"] == missing.counters["benchmark.http_404"] == 25
        assert_accounting(missing.counters)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_client_certificate_over_http3(certs: dict[str, str],
                                       tmp_path_factory: pytest.TempPathFactory) -> None:
    # aioquic's server asks for a client certificate in every handshake and checks the
    # CertificateVerify signature (it does not check the chain): each connection of a run
    # with --cert/--key presents the certificate, a run without them presents none.
    from support.pki import PASSPHRASE, make_pki

    pki = make_pki(tmp_path_factory.mktemp("h3pki"))
    server = H3Server(certs, SIZE, "--request-client-cert")
    try:
        with_cert = run(server.url(), cacert=certs["ca"], rps=50, cert=pki.cert, key=pki.key)
        os.environ["NHB_TEST_H3_KEY_PASS"] = PASSPHRASE
        try:
            encrypted = run(server.url(), cacert=certs["ca"], rps=50, cert=pki.cert,
                            key=pki.key_encrypted, key_passphrase_env="NHB_TEST_H3_KEY_PASS")
        finally:
            del os.environ["NHB_TEST_H3_KEY_PASS"]
        without = run(server.url(), cacert=certs["ca"], rps=50)
    finally:
        stats = server.stop()
    assert with_cert.success, with_cert.error
    assert without.success, without.error
    assert encrypted.success, encrypted.error
    connections = (with_cert.counters["upstream_cx_total"]
                   + encrypted.counters["upstream_cx_total"])
    assert stats["client_certificates"] == {"CN=nhbench client": connections}
    assert stats["connections"] == connections + without.counters["upstream_cx_total"]
