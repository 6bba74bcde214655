"""Real HTTP proxies from Debian for the proxy and tunnel tests, each started on a free port
with its own log, which the tests read to count what the proxy saw: tinyproxy (one ``Request
... CONNECT host:port`` line per tunnel, one ``Request ... GET http://...`` line per
absolute-form request; it closes each client connection after a response) and squid (its
access.log, a line per request or tunnel when it ends; it keeps client connections open).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest

from .peers import peer_env
from .polling import wait_until
from .sockets import free_port, listening


@dataclass
class Tinyproxy:
    port: int
    log_path: str

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def requests(self) -> list[str]:
        """The request lines tinyproxy logged, in order ("CONNECT 127.0.0.1:8443 HTTP/1.1")."""
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return [line.split("): ", 1)[1].strip() for line in f
                    if "]: Request (file descriptor" in line]


@contextmanager
def tinyproxy(*, basic_auth: tuple[str, str] | None = None,
              connect_ports: tuple[int, ...] = ()) -> Iterator[Tinyproxy]:
    """tinyproxy in the foreground (-d) on a free port, logging every request (LogLevel
    Connect); `basic_auth` makes it ask for those credentials (407 otherwise),
    `connect_ports` restricts CONNECT to those ports (403 otherwise)."""
    exe = shutil.which("tinyproxy")
    if exe is None:
        pytest.skip("tinyproxy is not installed (Debian package tinyproxy)")
    with tempfile.TemporaryDirectory(prefix="nhb-tinyproxy-") as tmp:
        port = free_port()
        log = os.path.join(tmp, "tinyproxy.log")
        lines = [f"Port {port}", "Listen 127.0.0.1", "Timeout 30", f'LogFile "{log}"',
                 "LogLevel Connect", "MaxClients 256", f'PidFile "{tmp}/tinyproxy.pid"',
                 # Fewer ports than tinyproxy's default (443 and 563 only) would refuse the
                 # test origins' ports: allow any unless the test restricts them.
                 *(f"ConnectPort {p}" for p in connect_ports)]
        if basic_auth is not None:
            lines.append(f"BasicAuth {basic_auth[0]} {basic_auth[1]}")
        conf = os.path.join(tmp, "tinyproxy.conf")
        with open(conf, "w") as f:
            f.write("\n".join(lines) + "\n")
        proc = subprocess.Popen([exe, "-d", "-c", conf], env=peer_env(),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            if not wait_until(lambda: listening(port), timeout=10):
                raise RuntimeError("tinyproxy did not start listening")
            yield Tinyproxy(port, log)
        finally:
            proc.terminate()
            proc.wait(timeout=10)


@dataclass
class Squid:
    port: int
    log_path: str
    proc: subprocess.Popen[bytes]

    def stop(self) -> None:
        """Stop squid, which writes out every line (a tunnel's is written when it ends)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def requests(self) -> list[tuple[str, str]]:
        """(method, URL) of each request squid logged (its native access.log: a line per
        request or tunnel, written when it ends)."""
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return [(p[5], p[6]) for p in (line.split() for line in f) if len(p) > 6]
        except FileNotFoundError:
            return []


@contextmanager
def squid() -> Iterator[Squid]:
    """squid in the foreground (-N) on a free port, no cache, every request logged; CONNECT
    allowed to any port (its default allows 443 only)."""
    exe = shutil.which("squid")
    if exe is None:
        pytest.skip("squid is not installed (Debian package squid)")
    with tempfile.TemporaryDirectory(prefix="nhb-squid-") as tmp:
        # squid started as root runs as its own user, which must write here.
        os.chmod(tmp, 0o777)
        port = free_port()
        log = os.path.join(tmp, "access.log")
        conf = os.path.join(tmp, "squid.conf")
        with open(conf, "w") as f:
            f.write("\n".join([
                f"http_port 127.0.0.1:{port}", "http_access allow all", "cache deny all",
                f"access_log stdio:{log}", f"cache_log {tmp}/cache.log",
                f"pid_filename {tmp}/squid.pid", f"coredump_dir {tmp}",
                "shutdown_lifetime 0 seconds",
            ]) + "\n")
        proc = subprocess.Popen([exe, "-N", "-f", conf], env=peer_env(),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            if not wait_until(lambda: listening(port), timeout=30):
                raise RuntimeError("squid did not start listening")
            yield Squid(port, log, proc)
        finally:
            Squid(port, log, proc).stop()


@dataclass
class Nghttpx:
    port: int
    tls: bool
    #: the CA that issued the proxy's certificate (TLS frontends), else None.
    ca: str | None
    log_path: str

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def requests(self) -> list[tuple[str, str, int]]:
        """(method, target, status) of each request nghttpx logged (a line per request or
        CONNECT stream, written when it ends)."""
        out = []
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                for line in f:
                    parts = line.split("\t")
                    if len(parts) >= 3:
                        out.append((parts[0], parts[1], int(parts[2])))
        except FileNotFoundError:
            pass
        return out


def _proxy_pki(d: str) -> tuple[str, str, str]:
    """(CA, certificate, key): a CA and the proxy's certificate for 127.0.0.1 and localhost."""
    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, env=peer_env())
    ca, ca_key = os.path.join(d, "proxy-ca.pem"), os.path.join(d, "proxy-ca-key.pem")
    cert, key = os.path.join(d, "proxy.pem"), os.path.join(d, "proxy-key.pem")
    for k in (ca_key, key):
        openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", k)
    openssl("req", "-x509", "-new", "-key", ca_key, "-out", ca, "-days", "2",
            "-subj", "/CN=nhbench proxy CA")
    csr = os.path.join(d, "proxy.csr")
    openssl("req", "-new", "-key", key, "-out", csr, "-subj", "/CN=localhost")
    ext = os.path.join(d, "ext.cnf")
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
            "-out", cert, "-days", "2", "-extfile", ext)
    return ca, cert, key


@contextmanager
def nghttpx(backend: Tinyproxy, *, tls: bool) -> Iterator[Nghttpx]:
    """nghttpx (Debian's nghttp2-proxy) as an HTTP/2 forward proxy (--http2-proxy) on a free
    port, TLS (its own CA and a certificate for 127.0.0.1) or not (``no-tls``: HTTP/1.1 and
    h2c with prior knowledge), taking HTTP/1.1 and HTTP/2 CONNECT and passing each on to
    `backend`, an HTTP proxy; each request and CONNECT stream is logged."""
    exe = shutil.which("nghttpx")
    if exe is None:
        pytest.skip("nghttpx is not installed (Debian package nghttp2-proxy)")
    with tempfile.TemporaryDirectory(prefix="nhb-nghttpx-") as tmp:
        port = free_port()
        log = os.path.join(tmp, "access.log")
        args = [exe, "--http2-proxy", "--workers=1", "--no-ocsp", "--conf=/dev/null",
                f"--frontend=127.0.0.1,{port}" + ("" if tls else ";no-tls"),
                f"--backend=127.0.0.1,{backend.port}",
                f"--accesslog-file={log}",
                "--accesslog-format=$method\t$path\t$status\t$alpn",
                f"--errorlog-file={tmp}/error.log", f"--pid-file={tmp}/nghttpx.pid"]
        ca = None
        if tls:
            ca, cert, key = _proxy_pki(tmp)
            args += [key, cert]
        proc = subprocess.Popen(args, env=peer_env(), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            if not wait_until(lambda: listening(port), timeout=10):
                raise RuntimeError("nghttpx did not start listening")
            yield Nghttpx(port, tls, ca, log)
        finally:
            proc.terminate()
            proc.wait(timeout=10)


@contextmanager
def nghttpx_reverse(backend_port: int) -> Iterator[int]:
    """nghttpx as a reverse proxy on a free port: h2c with prior knowledge (and HTTP/1.1) in
    front of the HTTP/1.1 origin on 127.0.0.1:`backend_port`, passing each response on as it
    arrives (a chunked body's chunks as DATA frames); yields the port."""
    exe = shutil.which("nghttpx")
    if exe is None:
        pytest.skip("nghttpx is not installed (Debian package nghttp2-proxy)")
    with tempfile.TemporaryDirectory(prefix="nhb-nghttpx-") as tmp:
        port = free_port()
        args = [exe, "--workers=1", "--no-ocsp", "--conf=/dev/null",
                f"--frontend=127.0.0.1,{port};no-tls", f"--backend=127.0.0.1,{backend_port}",
                f"--errorlog-file={tmp}/error.log", f"--pid-file={tmp}/nghttpx.pid"]
        proc = subprocess.Popen(args, env=peer_env(), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            if not wait_until(lambda: listening(port), timeout=10):
                raise RuntimeError("nghttpx did not start listening")
            yield port
        finally:
            proc.terminate()
            proc.wait(timeout=10)
