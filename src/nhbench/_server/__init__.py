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

This module is the face: `TestServer` holds the options, the addresses and the final
counters, and hands each run to one of two implementations with the same small surface,
the `ServerBackend` protocol (`start` returning the `Bound` addresses, `stats`, `stop`
returning the final counters, `running`, `pid`): ``_inprocess.py`` and ``_subprocess.py``. What both share (the address
report and file, the lines ``nhbench server`` prints, the files removed at stop) is in
``_common.py``.

Options: see `ServerOptions` (``nhbench/options/_server.py``) and docs/server.md.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from .._exceptions import ServerError
from ..options import (
    MAX_RESPONSE_BODY_SIZE,
    ResponseOptions,
    ServerOptions,
    make_server_options,
    parse_listen,
)
from ._common import (
    Bound,
    ServerBackend,
    address_lines,
    address_report,
    stats_line,
    write_address_file,
)
from ._common import (
    url as _url,
)
from ._inprocess import InProcessServer
from ._subprocess import SubprocessServer

__all__ = [
    "address_lines",
    "stats_line",
    "MAX_RESPONSE_BODY_SIZE",
    "ResponseOptions",
    "ServerOptions",
    "TestServer",
    "address_report",
    "parse_listen",
    "write_address_file",
]

# Unset marker for keyword arguments: None is a meaningful value for some options.
_UNSET: Any = object()


class TestServer:
    """The embedded test server, as a context manager.

    ``with TestServer(static_delay="2ms", response_body_size=64) as server:
    nhbench.run(server.url, rps=100)``

    Every `ServerOptions` option is a keyword (``listen``, ``workers``, ``cpus``,
    ``response_body_size``, ``response_headers``, ``echo_request_headers``, ``static_delay``,
    ``concurrency_based_linear_delay``, ``emit_previous_request_delta_in_response_header``,
    ``echo_default_params``, ``echo_default_params_when``, ``debug_path``,
    ``debug_env_dump``, ``max_echo_delay``, ``max_delay``, ``max_payload_kb``,
    ``stall_every``, ``stall_for``, ``error_body_every``, ``stream_events``, ``stream_gap``,
    ``stream_jitter``, ``tcp_echo``, ``udp_echo``, ``tcp_proxy``,
    ``redirect_listen``, ``forward_prefix``, ``http_fanout``, ``http_fanout_serial``,
    ``http_fanout_no_mirror``, ``admin``, ``address_file``,
    ``idle_timeout``, ``header_timeout``, ``max_header_bytes``, ``max_body_bytes``,
    ``max_connections``, ``tls_cert``,
    ``tls_key``, ``tls_self_signed``, ``tls_san``, ``tls_ca_out``, ``tls_client_ca``, ``alpn``,
    ``max_concurrent_streams``, ``http3``, and ``response`` for Nighthawk's ResponseOptions as one
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
        echo_default_params_when: str = _UNSET,
        debug_path: str = _UNSET,
        debug_env_dump: bool = _UNSET,
        max_echo_delay: float | str = _UNSET,
        max_delay: float | str = _UNSET,
        max_payload_kb: int = _UNSET,
        stall_every: float | str = _UNSET,
        stall_for: float | str = _UNSET,
        error_body_every: int = _UNSET,
        stream_events: int = _UNSET,
        stream_gap: float | str = _UNSET,
        stream_jitter: float | str = _UNSET,
        tcp_echo: object = _UNSET,
        udp_echo: object = _UNSET,
        tcp_proxy: object = _UNSET,
        redirect_listen: object = _UNSET,
        forward_prefix: object = _UNSET,
        http_fanout: object = _UNSET,
        http_fanout_serial: bool = _UNSET,
        http_fanout_no_mirror: bool = _UNSET,
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
        tls_client_ca: str | os.PathLike[str] | None = _UNSET,
        alpn: Iterable[str] | str = _UNSET,
        max_concurrent_streams: int = _UNSET,
        http3: bool = _UNSET,
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
        #: (bound local address, destination) of each TCP proxy.
        self.tcp_proxy_addresses: list[tuple[tuple[str, int], tuple[str, int]]] = []
        self.redirect_addresses: list[tuple[str, int]] = []
        #: (bound local address, target URLs) of each HTTP fan-out.
        self.http_fanout_addresses: list[tuple[tuple[str, int], tuple[str, ...]]] = []
        # The running implementation (None when stopped), and the counters of the last run.
        self._impl: ServerBackend | None = None
        self._final_stats: dict[str, Any] | None = None
        # TLS: the certificate served (PEM), and the file clients can trust.
        self._cert_pem: str | None = None
        self._ca_cert: str | None = None

    # ---- lifecycle ------------------------------------------------------------------------

    def start(self) -> TestServer:
        """Bind and start serving; returns self."""
        if self._impl is not None:
            raise RuntimeError("this TestServer is already running")
        self._final_stats = None
        impl: ServerBackend = (
            SubprocessServer(self.options, self.startup_timeout) if self.subprocess
            else InProcessServer(self.options)
        )
        try:
            impl.start()
            self._impl = impl
        finally:
            # Also after a start that failed once the server was bound, as before the split.
            if impl.bound is not None:
                self._take(impl.bound)
        return self

    def _take(self, bound: Bound) -> None:
        self.listen_addresses = list(bound.listen)
        self.admin_address = bound.admin
        self.tcp_echo_addresses = list(bound.tcp_echo)
        self.udp_echo_addresses = list(bound.udp_echo)
        self.tcp_proxy_addresses = list(bound.tcp_proxy)
        self.redirect_addresses = list(bound.redirect)
        self.http_fanout_addresses = list(bound.http_fanout)
        self._ca_cert = bound.ca_cert
        if bound.cert_pem is not None:
            self._cert_pem = bound.cert_pem

    def stop(self) -> None:
        """Stop serving (idempotent). The final counters stay available from `stats()`."""
        impl, self._impl = self._impl, None
        if impl is not None:
            self._final_stats = impl.stop()

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
        return self._impl is not None and self._impl.running

    @property
    def pid(self) -> int:
        """The process serving: this one, or the child's in subprocess mode."""
        return self._impl.pid if self._impl is not None else os.getpid()

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

    @property
    def tcp_proxy_address(self) -> tuple[str, int]:
        """(host, port) the first TCP proxy listens on."""
        self._need_started()
        if not self.tcp_proxy_addresses:
            raise ServerError("the test server has no TCP proxy (tcp_proxy=LOCAL=DEST)")
        return self.tcp_proxy_addresses[0][0]

    @property
    def redirect_address(self) -> tuple[str, int]:
        """(host, port) of the first https redirector."""
        self._need_started()
        if not self.redirect_addresses:
            raise ServerError("the test server has no https redirector "
                              "(redirect_listen=HOST:PORT)")
        return self.redirect_addresses[0]

    @property
    def http_fanout_address(self) -> tuple[str, int]:
        """(host, port) the first HTTP fan-out listens on."""
        self._need_started()
        if not self.http_fanout_addresses:
            raise ServerError("the test server has no HTTP fan-out "
                              "(http_fanout=LOCAL=URL[,URL...])")
        return self.http_fanout_addresses[0][0]

    def report(self) -> dict[str, Any]:
        """The bound addresses, as written to ``address_file``."""
        self._need_started()
        report = address_report(self.listen_addresses, self.admin_address,
                                self.tcp_echo_addresses, self.udp_echo_addresses,
                                scheme=self.scheme, ca_cert=self._ca_cert,
                                tcp_proxy=self.tcp_proxy_addresses,
                                redirect=self.redirect_addresses,
                                http_fanout=self.http_fanout_addresses)
        report["pid"] = self.pid
        return report

    def stats(self) -> dict[str, Any]:
        """The server's own counters (docs/server.md): requests, connections_total,
        connections_active, rx_bytes, tx_bytes, bad_requests, status, stalls,
        tcp_echo_bytes, udp_echo_packets, connections_http1, connections_http2,
        tls_handshakes, tls_handshake_errors, tls_session_reused, tls_clients_verified,
        tls_clients_refused, h2_streams_reset,
        h2_protocol_errors, connections_refused, grpc_calls, grpc_errors, error_bodies, proxy_connections,
        proxy_connections_active, proxy_connect_errors, proxy_bytes_up, proxy_bytes_down,
        redirects, fanout_connections, fanout_requests, fanout_upstream_requests,
        fanout_upstream_errors.

        Live for an in-process server; for a subprocess server, live through the admin
        endpoint when there is one, else available after `stop()`.
        """
        if self._impl is not None:
            return self._impl.stats()
        if self._final_stats is not None:
            return dict(self._final_stats)
        raise ServerError("the test server has not been started")
