"""`TestServer` in this process: the C server object (`nhbench._core.Server`) runs its own
threads here, and `stats()` reads its counters directly, exact at the moment of the call."""

from __future__ import annotations

import os
from typing import Any

from .._core_config import server_core_config
from .._exceptions import ServerError
from .._io import write_text
from ..options import ServerOptions
from ._common import Bound, ServerFiles, address_report, remove_stale_socket, write_address_file

__all__ = ["InProcessServer"]


class InProcessServer:
    """One run of the C server in this process: `start`, then `stats` any time, `stop` once."""

    def __init__(self, options: ServerOptions) -> None:
        self.options = options
        self.bound: Bound | None = None
        self._server: Any = None
        self._files = ServerFiles()

    @property
    def pid(self) -> int:
        return os.getpid()

    @property
    def running(self) -> bool:
        return self._server is not None

    def start(self) -> Bound:
        from .._run import load_core

        core = load_core()
        for kind, path, _ in self.options.listen:
            if kind == "unix":
                remove_stale_socket(path)
        try:
            server = core.Server(server_core_config(self.options))
            server.start()
        except (OSError, RuntimeError, ValueError) as exc:
            raise ServerError(f"the test server could not start: {exc}") from exc
        self._server = server
        try:
            bound = self.bound = Bound()
            bound.listen = [
                (str(kind), str(where), int(port)) for kind, where, port in server.addresses
            ]
            admin = getattr(server, "admin_address", None)
            bound.admin = (str(admin[0]), int(admin[1])) if admin else None
            bound.tcp_echo = [
                (str(h), int(p)) for h, p in getattr(server, "tcp_echo_addresses", [])
            ]
            bound.udp_echo = [
                (str(h), int(p)) for h, p in getattr(server, "udp_echo_addresses", [])
            ]
            # The core reports the bound local addresses in the options' order.
            proxies = getattr(server, "tcp_proxy_addresses", [])
            bound.tcp_proxy = [
                ((str(h), int(p)), dest)
                for (h, p), (_, dest) in zip(proxies, self.options.tcp_proxy, strict=False)
            ]
            bound.redirect = [
                (str(h), int(p)) for h, p in getattr(server, "redirect_addresses", [])
            ]
            fanouts = getattr(server, "http_fanout_addresses", [])
            bound.http_fanout = [
                ((str(h), int(p)), urls)
                for (h, p), (_, urls) in zip(fanouts, self.options.http_fanout, strict=False)
            ]
            if self.options.tls:
                bound.cert_pem = str(server.tls_cert_pem)
                bound.ca_cert = self._write_ca_cert(bound.cert_pem)
            if self.options.address_file:
                report = address_report(bound.listen, bound.admin, bound.tcp_echo,
                                        bound.udp_echo, scheme=self.options.scheme,
                                        ca_cert=bound.ca_cert, tcp_proxy=bound.tcp_proxy,
                                        redirect=bound.redirect,
                                        http_fanout=bound.http_fanout)
                self._files.written.append(write_address_file(self.options.address_file, report))
        except BaseException:
            self._server = None
            server.stop()
            self._files.remove(self.bound.listen if self.bound else [])
            raise
        return bound

    def _write_ca_cert(self, cert_pem: str) -> str:
        """Where clients find the certificate to trust: tls_ca_out, the given certificate,
        or a temporary file."""
        options = self.options
        if options.tls_cert:
            return options.tls_cert
        path = options.tls_ca_out or self._files.temporary_ca_path()
        written = write_text(path, cert_pem)
        if options.tls_ca_out:
            self._files.written.append(written)
        return path

    def stats(self) -> dict[str, Any]:
        """The server's counters now; only while it runs."""
        assert self._server is not None
        return dict(self._server.stats())

    def stop(self) -> dict[str, Any] | None:
        """Stop serving and remove the files of this run; returns the final counters."""
        server, self._server = self._server, None
        if server is None:
            return None
        try:
            return dict(server.stats())
        finally:
            server.stop()
            self._files.remove(self.bound.listen if self.bound else [])
