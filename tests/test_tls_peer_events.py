"""The TLS client against what a server may send after the handshake.

The peer is a real ``openssl s_server`` driven through its interactive commands on its
standard input: ``K``/``k`` sends a TLS 1.3 KeyUpdate (requesting an answer or not), ``r``
starts a TLS 1.2 renegotiation (a HelloRequest); anything else is sent as data, which is how
these tests write the HTTP responses. With ``-msg`` s_server prints every TLS message it
sends (``>>>``) and receives (``<<<``), the independent record of what the client answered.

The renegotiation test also exercises the client's spill path (transport_tls.c): the
no_renegotiation alert is written by OpenSSL from inside SSL_read while the connection's
output buffer is still on its way to a full socket, so it waits in the spill BIO and must
reach the server after the body bytes before it, in order.

Counts and messages only, no timing thresholds. Skipped when the openssl, stdbuf (coreutils)
or ss (iproute2) command is missing.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import nhbench

pytestmark = [
    pytest.mark.core,
    pytest.mark.skipif(any(shutil.which(tool) is None for tool in ("openssl", "stdbuf", "ss")),
                       reason="needs the openssl, stdbuf and ss commands"),
]

CLIENT_CPU = str(sorted(os.sched_getaffinity(0))[0])
RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
REQUEST_LINE = re.compile(rb"(GET|POST) / HTTP/1\.1\r\n")


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("s_server")
    key, crt = d / "key.pem", d / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                    "-nodes", "-keyout", str(key), "-out", str(crt), "-days", "2",
                    "-subj", "/CN=localhost"], check=True, capture_output=True, timeout=60)
    return crt, key


class SServer:
    """One ``openssl s_server -msg`` for one connection, its standard output collected by a
    thread (unless `stall`: then nobody reads it, so s_server blocks on its first large
    write to the pipe and stops reading the socket until `drain` starts the thread)."""

    def __init__(self, cert: tuple[Path, Path], version: str, *, stall: bool = False,
                 connections: int = 1) -> None:
        # stdbuf: s_server's messages go through stdio, which a pipe would buffer.
        self.proc = subprocess.Popen(
            ["stdbuf", "-o0", "openssl", "s_server", "-accept", "127.0.0.1:0", "-naccept",
             str(connections),
             "-cert", str(cert[0]), "-key", str(cert[1]), version, "-msg", "-no_ticket"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert self.proc.stdout is not None and self.proc.stdin is not None
        self.stdin = self.proc.stdin
        self.out = bytearray()
        self.body_bytes = 0  # the request bodies are all "a"
        self.lock = threading.Lock()
        line = self.proc.stdout.readline()
        while line and not line.startswith(b"ACCEPT"):
            line = self.proc.stdout.readline()
        assert line.startswith(b"ACCEPT"), "s_server did not start"
        self.port = int(line.rsplit(b":", 1)[1])
        self.reader: threading.Thread | None = None
        self.closed = False
        if not stall:
            self.drain()

    def drain(self) -> None:
        def read() -> None:
            assert self.proc.stdout is not None
            while chunk := self.proc.stdout.read1(1 << 16):
                with self.lock:
                    self.out.extend(chunk)
                    self.body_bytes += chunk.count(b"a")
        self.reader = threading.Thread(target=read, daemon=True)
        self.reader.start()

    def text(self) -> bytes:
        with self.lock:
            return bytes(self.out)

    def wait_for(self, pattern: bytes, count: int = 1, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while self.text().count(pattern) < count:
            assert time.monotonic() < deadline, f"s_server never printed {pattern!r} x{count}"
            assert self.proc.poll() is None or self.text().count(pattern) >= count
            time.sleep(0.01)

    def send(self, data: bytes) -> None:
        self.stdin.write(data)
        self.stdin.flush()

    def close(self) -> bytes:
        if self.closed:
            return self.text()
        self.closed = True
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        if self.reader is not None:
            self.reader.join(10)
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()
        return self.text()


@pytest.fixture
def servers() -> Iterator[list[SServer]]:
    started: list[SServer] = []
    yield started
    for s in started:
        s.close()


def client_thread(port: int, **kw: object) -> tuple[threading.Thread, dict[str, nhbench.Result]]:
    out: dict[str, nhbench.Result] = {}

    def go() -> None:
        out["result"] = nhbench.run(f"https://127.0.0.1:{port}/", insecure=True, connections=1,
                                    rps=0, cpus=CLIENT_CPU, duration=60, **kw)

    t = threading.Thread(target=go, daemon=True)
    t.start()
    return t, out


@pytest.mark.parametrize("command", [b"K", b"k"], ids=["requested", "not-requested"])
def test_tls13_key_update_mid_run_requests_continue(cert: tuple[Path, Path], servers: list[SServer],
                                                     command: bytes) -> None:
    """A KeyUpdate between requests: the client reads with the server's new keys from then
    on, answers with its own KeyUpdate when asked to (and only then), and every request gets
    its response on the same connection."""
    n, update_after = 20, 8
    srv = SServer(cert, "-tls1_3")
    servers.append(srv)
    th, out = client_thread(srv.port, requests=n)
    for i in range(1, n + 1):
        srv.wait_for(b"GET / HTTP/1.1\r\n", i)
        if i == update_after:
            # s_server's standard input is empty (the client has read the last response
            # and sent this request), so the command is a read of its own, not data.
            srv.send(command + b"\n")
            srv.wait_for(b"SSL_do_handshake -> 1")
        srv.send(RESPONSE)
    th.join(60)
    assert not th.is_alive()
    result = out["result"]
    text = srv.close()
    c = result.counters
    assert c["benchmark.http_2xx"] == n and c["upstream_rq_total"] == n
    assert c["upstream_cx_total"] == c["ssl.handshake"] == 1
    assert c.get("benchmark.stream_resets", 0) == 0 and c.get("upstream_cx_protocol_error", 0) == 0
    assert text.count(b"GET / HTTP/1.1\r\n") == n
    sent = len(re.findall(rb">>> TLS 1\.3, Handshake \[length 0005\], KeyUpdate", text))
    answered = len(re.findall(rb"<<< TLS 1\.3, Handshake \[length 0005\], KeyUpdate", text))
    assert sent == 1
    assert answered == (1 if command == b"K" else 0)


def wait_for_full_socket(srv: SServer, th: threading.Thread) -> None:
    """Waits until s_server (its stdout pipe unread) has stopped reading and the client's
    socket holds megabytes it could not send (Send-Q), so the client's output is on its way."""
    deadline = time.monotonic() + 30
    queued = 0
    while queued < (1 << 20):
        assert time.monotonic() < deadline, "the client's socket never filled"
        assert th.is_alive()
        ss = subprocess.run(["ss", "-tnH", "state", "established", f"( dport = :{srv.port} )"],
                            capture_output=True, text=True, check=False).stdout.split()
        queued = int(ss[1]) if len(ss) > 1 else 0
        time.sleep(0.05)


def test_tls13_key_update_during_upload_body_arrives_whole(cert: tuple[Path, Path],
                                                           servers: list[SServer]) -> None:
    """A requested KeyUpdate arrives while a 32 MiB body fills the client's socket: the
    client switches keys mid-body (its answer goes out before the next record it encrypts),
    s_server decrypts every byte of the body and the request gets its 200."""
    body = 32 << 20
    srv = SServer(cert, "-tls1_3", stall=True)
    servers.append(srv)
    th, out = client_thread(srv.port, requests=1, request_method="POST", request_body_size=body)
    wait_for_full_socket(srv, th)
    srv.send(b"K\n")
    srv.drain()
    srv.wait_for(b"SSL_do_handshake -> 1")
    deadline = time.monotonic() + 60
    while srv.body_bytes < body:
        assert time.monotonic() < deadline, f"s_server printed {srv.body_bytes} of {body} bytes"
        time.sleep(0.05)
    srv.send(RESPONSE)
    th.join(60)
    assert not th.is_alive()
    result = out["result"]
    text = srv.close()
    c = result.counters
    assert c["benchmark.http_2xx"] == 1 and c["upstream_cx_total"] == 1
    assert len(re.findall(rb"<<< TLS 1\.3, Handshake \[length 0005\], KeyUpdate", text)) == 1
    assert b"bad record mac" not in text


def test_tls12_renegotiation_refused_during_upload_reaches_server_in_order(
        cert: tuple[Path, Path], servers: list[SServer]) -> None:
    """A HelloRequest arrives while a 32 MiB body fills the client's socket: the client
    refuses it with a no_renegotiation warning alert written from inside SSL_read into the
    spill BIO, which goes out after the body records already encrypted. s_server receives
    the alert intact (a lost or reordered record would fail its MAC check first) and, as
    OpenSSL's server does, ends the connection; the client's error names the refusal."""
    body = 32 << 20
    srv = SServer(cert, "-tls1_2", stall=True)
    servers.append(srv)
    # Envoy's allow_renegotiation: false (its default) is accepted: it is what nhbench does.
    th, out = client_thread(srv.port, requests=1, request_method="POST", request_body_size=body,
                            no_default_failure_predicates=True, allow_no_success=True,
                            tls_context='{"allow_renegotiation": false}')
    wait_for_full_socket(srv, th)
    srv.send(b"r\n")
    srv.drain()
    th.join(60)
    assert not th.is_alive()
    result = out["result"]
    text = srv.close()
    log = b"\n".join(line for line in text.splitlines()[-60:] if not line.startswith(b"aaaa"))
    assert re.search(rb"<<< TLS 1\.2, Alert \[length 0002\], warning no_renegotiation", text), \
        log.decode("latin1")
    # Everything before the alert decrypted (s_server printed no bad_record_mac).
    assert b"bad record mac" not in text
    c = result.counters
    assert c.get("benchmark.http_2xx", 0) == 0
    assert c["benchmark.stream_resets"] == 1
    assert c["ssl.handshake"] == 1
    assert result.error is not None
    assert "the server asked to renegotiate (refused: nhbench never renegotiates)" in result.error


def test_tls12_renegotiation_refused_between_requests_run_goes_on(
        cert: tuple[Path, Path], servers: list[SServer]) -> None:
    """The server asks to renegotiate while a request waits for its response: the client
    refuses, s_server ends that connection, the waiting request counts as a reset, and the
    rest of the run's requests are answered on a new connection."""
    n, renegotiate_at = 12, 5
    srv = SServer(cert, "-tls1_2", connections=2)
    servers.append(srv)
    th, out = client_thread(srv.port, requests=n, no_default_failure_predicates=True)
    for i in range(1, n + 1):
        srv.wait_for(b"GET / HTTP/1.1\r\n", i)
        if i == renegotiate_at:
            # Instead of this request's response: s_server's stdin is empty, as the client
            # waits for it.
            srv.send(b"r\n")
            continue
        srv.send(RESPONSE)
    th.join(60)
    assert not th.is_alive()
    result = out["result"]
    text = srv.close()
    c = result.counters
    assert c["benchmark.http_2xx"] == n - 1
    assert c["benchmark.stream_resets"] == 1
    assert c["upstream_cx_total"] == c["ssl.handshake"] == 2
    assert c["upstream_cx_protocol_error"] == 1
    assert text.count(b"GET / HTTP/1.1\r\n") == n
    assert len(re.findall(rb">>> TLS 1\.2, Handshake \[length 0004\], HelloRequest", text)) == 1
    assert len(re.findall(rb"<<< TLS 1\.2, Alert \[length 0002\], warning no_renegotiation",
                          text)) == 1
    # No ClientHello after the first one of each connection: nothing was renegotiated.
    assert len(re.findall(rb"<<< TLS 1\.\d, Handshake \[length [0-9a-f]{4}\], ClientHello",
                          text)) == 2
    assert result.error is not None
    assert "the server asked to renegotiate (refused: nhbench never renegotiates)" in result.error
