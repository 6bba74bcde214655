"""`TestServer`: the C engine's test server, in this process or in a child process.

In-process (the default) is what tests and the demo use: no start-up cost, and `stats()`
reads the server's own counters directly, exact at the moment of the call, so a test can
compare them with the client's. ``subprocess=True`` runs ``python -m nhbench server``
instead, which keeps the server's threads out of this process (useful when measuring the
client's CPU use); `stats()` then goes through the admin endpoint when one is configured,
and is otherwise available after `stop()`, when the child prints its final counters.

With TLS (``tls_self_signed=True``, or ``tls_cert``/``tls_key``) `url` is ``https://...``
and `ca_cert` names a PEM file a client can trust (``nhbench.run(server.url,
cacert=server.ca_cert)``): ``tls_ca_out`` if given, else a temporary file written at start
and removed at stop.

Options: see `ServerOptions` (``nhbench/options/_server.py``) and docs/server.md.
"""

from __future__ import annotations

import http.client
import json
import os
import selectors
import signal
import socket
import stat
import subprocess as _subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from ._exceptions import ServerError
from ._io import Written, remove_written, write_text
from .options import (
    MAX_RESPONSE_BODY_SIZE,
    ResponseOptions,
    ServerOptions,
    format_address,
    make_server_options,
    parse_listen,
)

__all__ = [
    "MAX_RESPONSE_BODY_SIZE",
    "ResponseOptions",
    "ServerOptions",
    "TestServer",
    "address_report",
    "parse_listen",
    "write_address_file",
    "write_file_atomically",
]

STATS_PREFIX = "stats "
LISTENING_PREFIX = "listening on "
ADMIN_PREFIX = "admin on "
TCP_ECHO_PREFIX = "tcp-echo on "
UDP_ECHO_PREFIX = "udp-echo on "

# Unset marker for keyword arguments: None is a meaningful value for some options.
_UNSET: Any = object()


def _url(host: str, port: int, path: str = "/", scheme: str = "http") -> str:
    return f"{scheme}://{format_address(host, port)}{path}"


def _split_host_port(text: str) -> tuple[str, int]:
    parts = urlsplit("//" + text.strip())
    return str(parts.hostname), int(parts.port or 0)


def address_report(
    listen: Sequence[tuple[str, str, int]],
    admin: tuple[str, int] | None,
    tcp_echo: Sequence[tuple[str, int]],
    udp_echo: Sequence[tuple[str, int]],
    scheme: str = "http",
    ca_cert: str | None = None,
) -> dict[str, Any]:
    """The bound addresses as the JSON object ``--address-file`` holds (docs/server.md)."""
    entries: list[dict[str, Any]] = []
    for kind, where, port in listen:
        if kind == "unix":
            entries.append({"kind": "unix", "path": where, "url": f"unix:{where}"})
        else:
            entries.append({"kind": "tcp", "host": where, "port": port,
                            "url": _url(where, port, scheme=scheme)})
    report: dict[str, Any] = {
        "pid": os.getpid(),
        "listen": entries,
        "admin": (
            {"host": admin[0], "port": admin[1], "url": _url(admin[0], admin[1], "/stats")}
            if admin else None
        ),
        "tcp_echo": [{"host": h, "port": p} for h, p in tcp_echo],
        "udp_echo": [{"host": h, "port": p} for h, p in udp_echo],
    }
    if scheme == "https":
        report["tls"] = {"ca_cert": ca_cert}
    return report


def write_file_atomically(path: str | os.PathLike[str], text: str) -> Written:
    """Write `text` to `path` by the package's file rules (`nhbench._io`): a regular file or
    a new path atomically (temporary file in the same directory, fsync, rename), so that a
    reader polling for the file never sees it half written; a FIFO, a character device or
    ``-`` (stdout) streamed into. Returns what was written, for `remove_written`."""
    return write_text(path, text)


def write_address_file(path: str | os.PathLike[str], report: Mapping[str, Any]) -> Written:
    """Write `report` as JSON to `path` atomically (see `write_file_atomically`)."""
    return write_file_atomically(path, json.dumps(report, indent=2, sort_keys=True) + "\n")


def _remove_stale_socket(path: str) -> None:
    """Unlink `path` if it is a unix socket nobody listens on (left by a server that died).

    Anything else (a live socket, a regular file) is left alone for bind() to refuse.
    """
    try:
        if not stat.S_ISSOCK(os.stat(path).st_mode):
            return
    except OSError:
        return
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(1.0)
        probe.connect(path)
    except ConnectionRefusedError:
        try:
            os.unlink(path)
        except OSError:
            pass
    except OSError:
        pass
    finally:
        probe.close()


def _created_file(path: str) -> Written | None:
    """The record of a regular file another process (our child) created at `path`."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return Written(os.path.realpath(path), created=True, identity=(st.st_dev, st.st_ino),
                   stamp=(st.st_size, st.st_mtime_ns))


class TestServer:
    """The embedded test server, as a context manager.

    ``with TestServer(static_delay="2ms", response_body_size=64) as server:
    nhbench.run(server.url, rps=100)``

    Every `ServerOptions` option is a keyword (``listen``, ``workers``, ``cpus``,
    ``response_body_size``, ``response_headers``, ``echo_request_headers``, ``static_delay``,
    ``concurrency_based_linear_delay``, ``emit_previous_request_delta_in_response_header``,
    ``echo_default_params``, ``max_echo_delay``, ``max_delay``, ``max_payload_kb``,
    ``stall_every``, ``stall_for``, ``tcp_echo``, ``udp_echo``, ``admin``, ``address_file``,
    ``idle_timeout``, ``header_timeout``, ``max_header_bytes``, ``max_body_bytes``,
    ``max_connections``, ``tls_cert``,
    ``tls_key``, ``tls_self_signed``, ``tls_san``, ``tls_ca_out``, ``alpn``,
    ``max_concurrent_streams``, and ``response`` for Nighthawk's ResponseOptions as one
    object); ``config`` is a JSON/YAML file path or a mapping that the keywords override.
    Invalid options raise `OptionsError` (one line).

    `url` and `address` are those of the first TCP listen address (the bound port when 0 was
    asked for; ``https://`` with TLS); `urls` lists every TCP one; `unix_paths` the unix
    sockets; `ca_cert` the PEM file to trust with TLS.
    """

    # Its name starts with "Test"; this tells pytest it is not a test class to collect.
    __test__ = False

    def __init__(
        self,
        listen: object = _UNSET,
        *,
        config: str | os.PathLike[str] | Mapping[str, Any] | None = None,
        workers: int | str = _UNSET,
        cpus: object = _UNSET,
        response: Mapping[str, Any] | ResponseOptions = _UNSET,
        response_body_size: int | None = _UNSET,
        response_headers: Iterable[object] | Mapping[str, str] = _UNSET,
        echo_request_headers: bool = _UNSET,
        static_delay: float | str | None = _UNSET,
        concurrency_based_linear_delay: object = _UNSET,
        emit_previous_request_delta_in_response_header: str | None = _UNSET,
        echo_default_params: str = _UNSET,
        max_echo_delay: float | str = _UNSET,
        max_delay: float | str = _UNSET,
        max_payload_kb: int = _UNSET,
        stall_every: float | str = _UNSET,
        stall_for: float | str = _UNSET,
        tcp_echo: object = _UNSET,
        udp_echo: object = _UNSET,
        admin: object = _UNSET,
        address_file: str | os.PathLike[str] | None = _UNSET,
        idle_timeout: float | str = _UNSET,
        header_timeout: float | str = _UNSET,
        max_header_bytes: int | str = _UNSET,
        max_body_bytes: int | str = _UNSET,
        max_connections: int = _UNSET,
        tls_cert: str | os.PathLike[str] | None = _UNSET,
        tls_key: str | os.PathLike[str] | None = _UNSET,
        tls_self_signed: bool = _UNSET,
        tls_san: Iterable[str] | str = _UNSET,
        tls_ca_out: str | os.PathLike[str] | None = _UNSET,
        alpn: Iterable[str] | str = _UNSET,
        max_concurrent_streams: int = _UNSET,
        subprocess: bool = False,
        startup_timeout: float = 10.0,
    ) -> None:
        given = {
            name: value
            for name, value in locals().items()
            if value is not _UNSET
            and name not in ("self", "config", "subprocess", "startup_timeout")
        }
        if isinstance(given.get("response"), ResponseOptions):
            given["response"] = given["response"].model_dump(exclude_defaults=True)
        options = make_server_options(given, config=config)
        self._init(options, subprocess, startup_timeout)

    @classmethod
    def from_options(
        cls, options: ServerOptions, *, subprocess: bool = False, startup_timeout: float = 10.0
    ) -> TestServer:
        """A server from already validated `ServerOptions` (what ``nhbench server`` uses)."""
        server = cls.__new__(cls)
        server._init(options, subprocess, startup_timeout)
        return server

    def _init(self, options: ServerOptions, subprocess: bool, startup_timeout: float) -> None:
        self.options = options
        self.subprocess = subprocess
        self.startup_timeout = startup_timeout
        self.listen_addresses: list[tuple[str, str, int]] = []
        self.admin_address: tuple[str, int] | None = None
        self.tcp_echo_addresses: list[tuple[str, int]] = []
        self.udp_echo_addresses: list[tuple[str, int]] = []
        self._server: Any = None
        self._process: _subprocess.Popen[bytes] | None = None
        self._stderr: Any = None
        self._pending_output = b""
        self._final_stats: dict[str, Any] | None = None
        # The address and CA files this process wrote (nhbench._io.Written): removed at
        # stop only if they were created by the write and are still that file.
        self._written_files: list[Written] = []
        # TLS: the certificate served (PEM), and the file clients can trust.
        self._cert_pem: str | None = None
        self._ca_cert: str | None = None
        self._ca_tempdir: tempfile.TemporaryDirectory[str] | None = None

    # ---- lifecycle ------------------------------------------------------------------------

    def start(self) -> TestServer:
        """Bind and start serving; returns self."""
        if self._server is not None or self._process is not None:
            raise RuntimeError("this TestServer is already running")
        self._final_stats = None
        if self.subprocess:
            self._start_subprocess()
        else:
            self._start_in_process()
        return self

    def stop(self) -> None:
        """Stop serving (idempotent). The final counters stay available from `stats()`."""
        if self._server is not None:
            server, self._server = self._server, None
            try:
                self._final_stats = dict(server.stats())
            finally:
                server.stop()
                self._remove_address_file()
        if self._process is not None:
            self._stop_subprocess()

    def __enter__(self) -> TestServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # ---- accessors ------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._server is not None or (
            self._process is not None and self._process.poll() is None
        )

    @property
    def pid(self) -> int:
        """The process serving: this one, or the child's in subprocess mode."""
        return self._process.pid if self._process is not None else os.getpid()

    @property
    def addresses(self) -> list[tuple[str, int]]:
        """(host, port) of every bound TCP listen address."""
        return [(where, port) for kind, where, port in self.listen_addresses if kind == "tcp"]

    @property
    def unix_paths(self) -> list[str]:
        return [where for kind, where, _ in self.listen_addresses if kind == "unix"]

    def _need_started(self) -> None:
        if not self.listen_addresses:
            raise ServerError("the test server has not been started")

    @property
    def address(self) -> tuple[str, int]:
        """(host, port) of the first TCP listen address."""
        self._need_started()
        if not self.addresses:
            raise ServerError(
                f"the test server listens on unix sockets only ({', '.join(self.unix_paths)})"
            )
        return self.addresses[0]

    @property
    def scheme(self) -> str:
        """``https`` with TLS, else ``http``."""
        return self.options.scheme

    @property
    def url(self) -> str:
        """``http://host:port/`` (``https://`` with TLS) of the first TCP listen address."""
        return _url(*self.address, scheme=self.scheme)

    @property
    def urls(self) -> list[str]:
        """``http(s)://host:port/`` of every TCP listen address."""
        return [_url(host, port, scheme=self.scheme) for host, port in self.addresses]

    @property
    def ca_cert(self) -> str:
        """A PEM file that makes clients trust the server's certificate (``--cacert``).

        Self-signed: ``tls_ca_out`` if given, else a temporary file that lives until `stop()`.
        With ``tls_cert``: that file (which a client trusts as is only when it is
        self-signed; otherwise give clients the CA that issued it).
        """
        self._need_started()
        if not self.options.tls:
            raise ServerError("the test server does not use TLS (tls_self_signed=True or "
                              "tls_cert=/tls_key=)")
        assert self._ca_cert is not None
        return self._ca_cert

    @property
    def tls_cert_pem(self) -> str:
        """The certificate the server presents, PEM."""
        self._need_started()
        if self._cert_pem is None:
            if not self.options.tls:
                raise ServerError("the test server does not use TLS")
            self._cert_pem = Path(self.ca_cert).read_text(encoding="ascii")
        return self._cert_pem

    @property
    def unix_path(self) -> str:
        """The first unix socket path."""
        self._need_started()
        if not self.unix_paths:
            raise ServerError("the test server has no unix socket listener")
        return self.unix_paths[0]

    @property
    def admin_url(self) -> str:
        """``http://host:port/stats``, the admin endpoint."""
        self._need_started()
        if self.admin_address is None:
            raise ServerError("the test server has no admin listener (admin=HOST:PORT)")
        return _url(*self.admin_address, "/stats")

    @property
    def tcp_echo_address(self) -> tuple[str, int]:
        """(host, port) of the first TCP echo listener."""
        self._need_started()
        if not self.tcp_echo_addresses:
            raise ServerError("the test server has no TCP echo listener (tcp_echo=HOST:PORT)")
        return self.tcp_echo_addresses[0]

    @property
    def udp_echo_address(self) -> tuple[str, int]:
        """(host, port) of the first UDP echo listener."""
        self._need_started()
        if not self.udp_echo_addresses:
            raise ServerError("the test server has no UDP echo listener (udp_echo=HOST:PORT)")
        return self.udp_echo_addresses[0]

    def report(self) -> dict[str, Any]:
        """The bound addresses, as written to ``address_file``."""
        self._need_started()
        report = address_report(self.listen_addresses, self.admin_address,
                                self.tcp_echo_addresses, self.udp_echo_addresses,
                                scheme=self.scheme, ca_cert=self._ca_cert)
        report["pid"] = self.pid
        return report

    def stats(self) -> dict[str, Any]:
        """The server's own counters (docs/server.md): requests, connections_total,
        connections_active, rx_bytes, tx_bytes, bad_requests, status, stalls,
        tcp_echo_bytes, udp_echo_packets, connections_http1, connections_http2,
        tls_handshakes, tls_handshake_errors, tls_session_reused, h2_streams_reset,
        h2_protocol_errors, connections_refused.

        Live for an in-process server; for a subprocess server, live through the admin
        endpoint when there is one, else available after `stop()`.
        """
        if self._server is not None:
            return dict(self._server.stats())
        if self._process is not None:
            if self.admin_address is not None:
                return self._fetch_admin_stats()
            raise ServerError(
                "a subprocess test server without admin= reports its statistics after stop()"
            )
        if self._final_stats is not None:
            return dict(self._final_stats)
        raise ServerError("the test server has not been started")

    def _fetch_admin_stats(self) -> dict[str, Any]:
        assert self.admin_address is not None
        host, port = self.admin_address
        connection = http.client.HTTPConnection(host, port, timeout=10)
        try:
            connection.request("GET", "/stats")
            response = connection.getresponse()
            body = response.read()
        except OSError as exc:
            raise ServerError(f"the admin endpoint {self.admin_url} did not answer: {exc}") \
                from exc
        finally:
            connection.close()
        if response.status != 200:
            raise ServerError(f"the admin endpoint {self.admin_url} answered {response.status}")
        try:
            data = json.loads(body)
        except ValueError as exc:
            raise ServerError(f"the admin endpoint {self.admin_url} sent no JSON") from exc
        return dict(data)

    # ---- in-process -----------------------------------------------------------------------

    def _start_in_process(self) -> None:
        from ._run import load_core

        core = load_core()
        for kind, path, _ in self.options.listen:
            if kind == "unix":
                _remove_stale_socket(path)
        try:
            server = core.Server(self.options.core_config())
            server.start()
        except (OSError, RuntimeError, ValueError) as exc:
            raise ServerError(f"the test server could not start: {exc}") from exc
        self._server = server
        try:
            self.listen_addresses = [
                (str(kind), str(where), int(port)) for kind, where, port in server.addresses
            ]
            admin = getattr(server, "admin_address", None)
            self.admin_address = (str(admin[0]), int(admin[1])) if admin else None
            self.tcp_echo_addresses = [
                (str(h), int(p)) for h, p in getattr(server, "tcp_echo_addresses", [])
            ]
            self.udp_echo_addresses = [
                (str(h), int(p)) for h, p in getattr(server, "udp_echo_addresses", [])
            ]
            if self.options.tls:
                self._cert_pem = str(server.tls_cert_pem)
                self._write_ca_cert()
            if self.options.address_file:
                self._written_files.append(
                    write_address_file(self.options.address_file, self.report()))
        except BaseException:
            self._server = None
            server.stop()
            self._remove_address_file()
            raise

    def _write_ca_cert(self) -> None:
        """Where clients find the certificate to trust: tls_ca_out, the given certificate,
        or a temporary file."""
        options = self.options
        if options.tls_cert:
            self._ca_cert = options.tls_cert
            return
        assert self._cert_pem is not None
        if options.tls_ca_out:
            path = options.tls_ca_out
        else:
            self._ca_tempdir = tempfile.TemporaryDirectory(prefix="nhbench-ca-")
            path = os.path.join(self._ca_tempdir.name, "ca.pem")
        written = write_file_atomically(path, self._cert_pem)
        if options.tls_ca_out:
            self._written_files.append(written)
        self._ca_cert = path

    def _remove_ca_cert(self) -> None:
        if self._ca_tempdir is not None:
            self._ca_tempdir.cleanup()
            self._ca_tempdir = None

    def _remove_address_file(self) -> None:
        # The address and certificate files go with the server: the next start binds other
        # ports and generates another certificate, and a script waiting for the file must
        # not find a stale one. But only a file this server created is removed, and only
        # while it is still the file written: one that existed before the start (replaced
        # by the start), a FIFO or a device streamed into, or a file someone put there
        # since, is left alone.
        self._remove_ca_cert()
        written, self._written_files = self._written_files, []
        for record in written:
            remove_written(record)
        # Our own unix sockets go too, so that the next start can bind the same path.
        for kind, where, _ in self.listen_addresses:
            if kind == "unix":
                _remove_stale_socket(where)

    # ---- subprocess -----------------------------------------------------------------------

    def _start_subprocess(self) -> None:
        env = dict(os.environ)
        # The child must import this very copy of nhbench, also when it is used from a source
        # checkout through PYTHONPATH rather than installed.
        package_root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(
            [package_root, *filter(None, [env.get("PYTHONPATH")])]
        )
        args = self.options.cli_args()
        if self.options.tls_self_signed and not self.options.tls_ca_out:
            # The child generates the certificate; it writes it where this process reads it.
            self._ca_tempdir = tempfile.TemporaryDirectory(prefix="nhbench-ca-")
            args += ["--tls-ca-out", os.path.join(self._ca_tempdir.name, "ca.pem")]
        command = [
            sys.executable, "-m", "nhbench", "server", *args, "--print-stats-json",
        ]
        # The child writes the address and certificate files and removes them when it stops.
        # Should it have to be killed, this process removes the ones the child created (absent
        # before the start, still the same file), by the same rule as in-process.
        absent = [path for path in (self.options.address_file, self.options.tls_ca_out)
                  if path and path != "-" and not os.path.lexists(path)]
        # stderr goes to a file, not a pipe: nobody reads it while the server runs, and a
        # full pipe would block the server.
        self._stderr = tempfile.TemporaryFile()
        self._process = _subprocess.Popen(
            command, stdout=_subprocess.PIPE, stderr=self._stderr, stdin=_subprocess.DEVNULL,
            env=env,
        )
        options = self.options
        expected = (
            len(options.listen) + (1 if options.admin else 0) + len(options.tcp_echo)
            + len(options.udp_echo)
        )
        prefixes = (LISTENING_PREFIX, ADMIN_PREFIX, TCP_ECHO_PREFIX, UDP_ECHO_PREFIX)
        try:
            lines = self._read_lines(expected, self.startup_timeout, prefixes)
        except ServerError:
            self._kill_subprocess()
            self._remove_ca_cert()
            raise
        self._written_files = [record for record in map(_created_file, absent) if record]
        if options.tls_cert:
            self._ca_cert = options.tls_cert
        elif options.tls_self_signed:
            self._ca_cert = options.tls_ca_out or os.path.join(
                self._ca_tempdir.name if self._ca_tempdir else "", "ca.pem")
        self.listen_addresses, self.tcp_echo_addresses, self.udp_echo_addresses = [], [], []
        self.admin_address = None
        for line in lines:
            if line.startswith(LISTENING_PREFIX):
                where = line[len(LISTENING_PREFIX):].strip()
                if where.startswith("unix:"):
                    self.listen_addresses.append(("unix", where[len("unix:"):], 0))
                else:
                    parts = urlsplit(where)
                    self.listen_addresses.append(
                        ("tcp", str(parts.hostname),
                         int(parts.port or (443 if parts.scheme == "https" else 80)))
                    )
            elif line.startswith(ADMIN_PREFIX):
                parts = urlsplit(line[len(ADMIN_PREFIX):].strip())
                self.admin_address = (str(parts.hostname), int(parts.port or 80))
            elif line.startswith(TCP_ECHO_PREFIX):
                self.tcp_echo_addresses.append(
                    _split_host_port(line[len(TCP_ECHO_PREFIX):])
                )
            elif line.startswith(UDP_ECHO_PREFIX):
                self.udp_echo_addresses.append(
                    _split_host_port(line[len(UDP_ECHO_PREFIX):])
                )

    def _read_lines(self, count: int, timeout: float, prefixes: tuple[str, ...]) -> list[str]:
        assert self._process is not None and self._process.stdout is not None
        found: list[str] = []
        deadline = time.monotonic() + timeout
        fd = self._process.stdout.fileno()
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while len(found) < count:
                while b"\n" in self._pending_output and len(found) < count:
                    raw, self._pending_output = self._pending_output.split(b"\n", 1)
                    line = raw.decode("utf-8", "replace").strip()
                    if line.startswith(prefixes):
                        found.append(line)
                if len(found) >= count:
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ServerError(
                        f"the test server subprocess did not report "
                        f"{' / '.join(p.strip() for p in prefixes)!r} within "
                        f"{timeout:g} s{self._stderr_tail()}"
                    )
                if selector.select(remaining):
                    chunk = os.read(fd, 65536)
                    if not chunk:
                        self._process.wait(timeout=5)
                        raise ServerError(
                            f"the test server subprocess exited with status "
                            f"{self._process.returncode}{self._stderr_tail()}"
                        )
                    self._pending_output += chunk
        return found

    def _stderr_tail(self) -> str:
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        text = self._stderr.read().decode("utf-8", "replace").strip()
        lines = [line for line in text.splitlines() if line.strip()]
        return f": {lines[-1]}" if lines else ""

    def _stop_subprocess(self) -> None:
        process = self._process
        assert process is not None
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            lines = self._read_lines(1, 15.0, (STATS_PREFIX,))
            self._final_stats = json.loads(lines[0][len(STATS_PREFIX):])
        except (ServerError, ValueError):
            self._final_stats = None
        self._kill_subprocess()
        self._remove_address_file()

    def _kill_subprocess(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        try:
            process.wait(timeout=10)
        except _subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None
