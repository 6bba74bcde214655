"""nginx as an independent peer: the one nginx launcher of the tests and the benchmarks.

`NginxOrigin` writes a configuration into a temporary directory, generates self-signed
certificates with the ``openssl`` command (only when a TLS listener is asked for), starts
nginx in the foreground and stops it again. It imports only the standard library, so the
benchmark scripts import it as ``nginx_origin`` (their own directory is on sys.path) and the
tests as ``benchmarks.nginx_origin`` (pytest's ``pythonpath`` puts the repository root on
sys.path; docs/development.md).

Listeners (all on 127.0.0.1; `listeners` picks which):

* ``h1``: plain HTTP/1.1;
* ``h2c``: HTTP/2 over cleartext with prior knowledge (``listen ... http2``);
* ``tls``: TLS with ALPN h2 and http/1.1, certificate for ``localhost`` and ``127.0.0.1``;
* ``tls_other``: TLS with a certificate for ``other.example`` only (host name mismatch).

Paths: ``/`` answers 13 bytes (``/request-id`` the same with an ``X-Request-Id`` header
of 32 random hex digits, a head that differs in every response), ``/big`` a 1 MiB file,
``/upload`` stores a PUT body of up to 16 MiB (201/204), ``/reset`` answers nothing (HTTP/1.1:
the connection closes; HTTP/2: RST_STREAM). Every request nginx answers is one line in its
access log (unless ``access_log=False``), so tests can compare the client's counters with an
independent count.

The tests use the defaults. The benchmarks pass ``tuned=True`` (more descriptors and
connections per worker, ``multi_accept``, a listen backlog of 4096, so nginx is not the
limit), ``access_log=False`` and ``cpu`` (nginx runs under ``taskset -c CPU``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

BODY = "hello, world\n"
BIG_SIZE = 1024 * 1024

LISTENERS = ("h1", "h2c", "tls", "tls_other")

_CONF = """\
worker_processes 1;
daemon off;
master_process on;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
{rlimit}events {{ worker_connections {worker_connections};{multi_accept} }}
http {{
    log_format nhb '$connection $connection_requests $server_protocol $status $request_method $request_length $body_bytes_sent $http_traceparent $http_x_b3_traceid $http_x_b3_spanid $http_x_b3_sampled';
    access_log {access_log};
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    keepalive_requests {keepalive_requests};
    keepalive_timeout 600s;
    http2_max_concurrent_streams {max_streams};
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_session_tickets on;
    ssl_session_cache shared:nhb:1m;
    default_type text/plain;
    server {{
{listen}
{certificate}        root {tmp}/www;
        location = / {{ return 200 "{body}"; }}
        # A head that differs in every response, as behind Envoy or Istio: 32 random hex digits.
        location = /request-id {{ add_header X-Request-Id $request_id always; return 200 "{body}"; }}
        location = /big {{ try_files /big =404; }}
        # WebDAV PUT stores the body, so nginx reads all of it ($request_length shows it).
        location = /upload {{ client_max_body_size 16m; dav_methods PUT; }}
        # 444: close without a response; over HTTP/2 nginx resets the stream instead.
        location = /reset {{ return 444; }}
    }}
{other_server}}}
"""  # noqa: E501 - a config literal; the log_format line lists the fields the tests parse

# The second TLS server, whose certificate names only other.example.
_OTHER_SERVER = """\
    server {{
        listen 127.0.0.1:{port} ssl http2{backlog};
        ssl_certificate {tmp}/other-cert.pem;
        ssl_certificate_key {tmp}/other-key.pem;
        location / {{ return 200 "{body}"; }}
    }}
"""

_LISTEN_FLAGS = {"h1": "", "h2c": " http2", "tls": " ssl http2"}


class NginxError(RuntimeError):
    """nginx is missing, exited, or did not listen; the message has the end of its logs."""


def nginx_binary() -> str | None:
    found = shutil.which("nginx")
    if found:
        return found
    return "/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None


def _free_ports(count: int) -> list[int]:
    """`count` distinct free ports. Every socket stays bound until all are chosen: a port
    taken and released at once can be handed out again by the next bind, and nginx then
    refuses the configuration ("a duplicate listen")."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in sockets]


def _self_signed(tmp: Path, prefix: str, cn: str, san: str) -> None:
    # EC keys: a handshake costs a fraction of an RSA one, which keeps tests that make a
    # full handshake per connection quick.
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", str(tmp / f"{prefix}key.pem"), "-out", str(tmp / f"{prefix}cert.pem"),
         "-days", "2", "-subj", f"/CN={cn}", "-addext", f"subjectAltName={san}"],
        check=True, capture_output=True,
    )


class NginxOrigin:
    """nginx in a temporary directory; use as a context manager.

    `listeners` are the ports to open (see the module's docstring); `cpu` runs nginx under
    ``taskset -c CPU``; `tuned` raises nginx's limits for load generation (the benchmarks).
    """

    def __init__(
        self, keepalive_requests: int = 1_000_000_000, max_streams: int = 128,
        access_log: bool = True, *, listeners: tuple[str, ...] = LISTENERS,
        cpu: int | None = None, tuned: bool = False, client_ca: str | None = None,
    ) -> None:
        unknown = set(listeners) - set(LISTENERS)
        if unknown or not listeners:
            raise ValueError(f"listeners must be some of {LISTENERS}, not {listeners!r}")
        self.keepalive_requests = keepalive_requests
        self.access_log = access_log
        self.max_streams = max_streams
        self.listeners = listeners
        self.cpu = cpu
        self.tuned = tuned
        # A PEM CA file: the "tls" listener then asks every client for a certificate it
        # issued (ssl_verify_client on).
        self.client_ca = client_ca
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self.dir = Path()
        self.ports: dict[str, int] = {}

    # ---- life cycle -------------------------------------------------------------------

    def __enter__(self) -> NginxOrigin:
        nginx = nginx_binary()
        if nginx is None:
            raise NginxError("nginx not found (apt-get install -y nginx-light)")
        self._tmp = tempfile.TemporaryDirectory(prefix="nhb-nginx-")
        self.dir = Path(self._tmp.name)
        try:
            self._start(nginx)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _start(self, nginx: str) -> None:
        os.chmod(self.dir, 0o755)  # the worker runs as an unprivileged user
        (self.dir / "www").mkdir()
        (self.dir / "www" / "big").write_bytes(b"b" * BIG_SIZE)
        os.chmod(self.dir / "www", 0o777)  # the worker stores uploads there
        os.chmod(self.dir / "www" / "big", 0o644)
        if "tls" in self.listeners:
            _self_signed(self.dir, "", "localhost", "DNS:localhost,IP:127.0.0.1")
        if "tls_other" in self.listeners:
            _self_signed(self.dir, "other-", "other.example", "DNS:other.example")
        self.ports = dict(zip(self.listeners, _free_ports(len(self.listeners)), strict=True))
        backlog = " backlog=4096" if self.tuned else ""
        body = BODY.replace("\n", "\\n")
        conf = self.dir / "nginx.conf"
        conf.write_text(_CONF.format(
            tmp=self.dir, body=body,
            rlimit="worker_rlimit_nofile 65536;\n" if self.tuned else "",
            worker_connections=16384 if self.tuned else 4096,
            multi_accept=" multi_accept on;" if self.tuned else "",
            access_log=f"{self.dir}/access.log nhb" if self.access_log else "off",
            keepalive_requests=self.keepalive_requests, max_streams=self.max_streams,
            listen="\n".join(
                f"        listen 127.0.0.1:{port}{_LISTEN_FLAGS[name]}{backlog};"
                for name, port in self.ports.items() if name != "tls_other"
            ),
            certificate=(f"        ssl_certificate {self.dir}/cert.pem;\n"
                         f"        ssl_certificate_key {self.dir}/key.pem;\n"
                         + (f"        ssl_client_certificate {self.client_ca};\n"
                            "        ssl_verify_client on;\n" if self.client_ca else ""))
            if "tls" in self.ports else "",
            other_server=_OTHER_SERVER.format(
                tmp=self.dir, body=body, port=self.ports["tls_other"], backlog=backlog,
            ) if "tls_other" in self.ports else "",
        ))
        argv = [nginx, "-p", str(self.dir), "-e", str(self.dir / "error.log"), "-c", str(conf)]
        if self.cpu is not None:
            argv = ["taskset", "-c", str(self.cpu), *argv]  # taskset execs nginx: same pid
        with open(self.dir / "stderr.log", "wb") as log:
            self._proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            )
        for port in self.ports.values():
            self._wait_port(port)

    def __exit__(self, *exc: object) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)  # fast shutdown of master and worker
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def _wait_port(self, port: int, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self._proc is not None and self._proc.poll() is not None:
                raise NginxError(f"nginx exited: {self.logs()}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise NginxError(f"nginx did not listen on {port}: {self.logs()}") from None
                time.sleep(0.05)

    @property
    def pid(self) -> int:
        """nginx's master process, the root of its process tree (for its CPU time)."""
        if self._proc is None:
            raise NginxError("nginx is not running")
        return self._proc.pid

    def logs(self) -> str:
        text = ""
        for name in ("stderr.log", "error.log"):
            with contextlib.suppress(OSError):
                text += (self.dir / name).read_text(errors="replace")[-2000:]
        return text.strip()

    # ---- what tests use ---------------------------------------------------------------

    @property
    def cacert(self) -> str:
        return str(self.dir / "cert.pem")

    @property
    def other_cacert(self) -> str:
        return str(self.dir / "other-cert.pem")

    def url(self, kind: str, path: str = "/", host: str = "127.0.0.1") -> str:
        scheme = "https" if kind.startswith("tls") else "http"
        return f"{scheme}://{host}:{self.ports[kind]}{path}"

    def access_lines(self) -> list[list[str]]:
        """The access log so far, one list of fields per request (see log_format)."""
        path = self.dir / "access.log"
        if not path.exists():
            return []
        return [line.split() for line in path.read_text().splitlines() if line.strip()]

    def mark(self) -> int:
        """The number of access log lines now; `since(mark)` gives the lines after it."""
        return len(self.access_lines())

    def since(self, mark: int) -> list[list[str]]:
        # nginx writes a request's line when it has finished it, which can be a moment after
        # the client saw the last byte; wait until the count is stable.
        previous = -1
        lines: list[list[str]] = []
        for _ in range(50):
            lines = self.access_lines()[mark:]
            if len(lines) == previous:
                break
            previous = len(lines)
            time.sleep(0.05)
        return lines
