"""What both `TestServer` implementations share: the lines ``nhbench server`` prints (which
the subprocess implementation reads back), the address report and its file, and the files
a server leaves behind (address file, CA certificate, unix sockets), removed at stop."""

from __future__ import annotations

import json
import os
import socket
import stat
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlsplit

from .._io import Written, remove_written, write_text
from ..options import format_address

__all__ = [
    "ADMIN_PREFIX",
    "LISTENING_PREFIX",
    "STATS_PREFIX",
    "TCP_ECHO_PREFIX",
    "UDP_ECHO_PREFIX",
    "TCP_PROXY_PREFIX",
    "REDIRECT_PREFIX",
    "HTTP_FANOUT_PREFIX",
    "Bound",
    "ServerBackend",
    "ServerFiles",
    "address_report",
    "remove_stale_socket",
    "address_lines",
    "split_host_port",
    "stats_line",
    "url",
    "write_address_file",
]

# The lines ``nhbench server`` prints on stdout: the cli writes them, the subprocess
# implementation parses them.
STATS_PREFIX = "stats "
LISTENING_PREFIX = "listening on "
ADMIN_PREFIX = "admin on "
TCP_ECHO_PREFIX = "tcp-echo on "
UDP_ECHO_PREFIX = "udp-echo on "
TCP_PROXY_PREFIX = "tcp-proxy on "
REDIRECT_PREFIX = "redirect on "
HTTP_FANOUT_PREFIX = "http-fanout on "


def address_lines(
    listen_urls: Sequence[str],
    admin_url: str | None,
    tcp_echo: Iterable[tuple[str, int]],
    udp_echo: Iterable[tuple[str, int]],
    tcp_proxy: Iterable[tuple[tuple[str, int], tuple[str, int]]] = (),
    redirect: Iterable[tuple[str, int]] = (),
    http_fanout: Iterable[tuple[tuple[str, int], Sequence[str]]] = (),
) -> list[str]:
    """The lines ``nhbench server`` prints once it is bound, in the order the subprocess
    implementation reads them (`SubprocessServer`): one per address; a TCP proxy's line is
    ``tcp-proxy on LOCAL -> DEST``."""
    lines = [LISTENING_PREFIX + u for u in listen_urls]
    if admin_url is not None:
        lines.append(ADMIN_PREFIX + admin_url)
    lines += [TCP_ECHO_PREFIX + format_address(*a) for a in tcp_echo]
    lines += [UDP_ECHO_PREFIX + format_address(*a) for a in udp_echo]
    lines += [f"{TCP_PROXY_PREFIX}{format_address(*local)} -> {format_address(*dest)}"
              for local, dest in tcp_proxy]
    lines += [REDIRECT_PREFIX + format_address(*a) for a in redirect]
    lines += [f"{HTTP_FANOUT_PREFIX}{format_address(*local)} -> {' '.join(urls)}"
              for local, urls in http_fanout]
    return lines


def stats_line(stats: Mapping[str, Any]) -> str:
    """The line ``nhbench server --print-stats-json`` prints at exit, read back by
    `SubprocessServer.stop`."""
    return f"{STATS_PREFIX}{json.dumps(stats, sort_keys=True)}"


def url(host: str, port: int, path: str = "/", scheme: str = "http") -> str:
    return f"{scheme}://{format_address(host, port)}{path}"


def split_host_port(text: str) -> tuple[str, int]:
    parts = urlsplit("//" + text.strip())
    return str(parts.hostname), int(parts.port or 0)


def address_report(
    listen: Sequence[tuple[str, str, int]],
    admin: tuple[str, int] | None,
    tcp_echo: Sequence[tuple[str, int]],
    udp_echo: Sequence[tuple[str, int]],
    scheme: str = "http",
    ca_cert: str | None = None,
    tcp_proxy: Sequence[tuple[tuple[str, int], tuple[str, int]]] = (),
    redirect: Sequence[tuple[str, int]] = (),
    http_fanout: Sequence[tuple[tuple[str, int], Sequence[str]]] = (),
) -> dict[str, Any]:
    """The bound addresses as the JSON object ``--address-file`` holds (docs/server.md)."""
    entries: list[dict[str, Any]] = []
    for kind, where, port in listen:
        if kind == "unix":
            entries.append({"kind": "unix", "path": where, "url": f"unix:{where}"})
        else:
            entries.append({"kind": "tcp", "host": where, "port": port,
                            "url": url(where, port, scheme=scheme)})
    report: dict[str, Any] = {
        "pid": os.getpid(),
        "listen": entries,
        "admin": (
            {"host": admin[0], "port": admin[1], "url": url(admin[0], admin[1], "/stats")}
            if admin else None
        ),
        "tcp_echo": [{"host": h, "port": p} for h, p in tcp_echo],
        "udp_echo": [{"host": h, "port": p} for h, p in udp_echo],
    }
    if tcp_proxy:
        report["tcp_proxy"] = [
            {"host": local[0], "port": local[1], "dest": {"host": dest[0], "port": dest[1]}}
            for local, dest in tcp_proxy
        ]
    if redirect:
        report["redirect"] = [{"host": h, "port": p} for h, p in redirect]
    if http_fanout:
        report["http_fanout"] = [
            {"host": local[0], "port": local[1], "targets": list(urls)}
            for local, urls in http_fanout
        ]
    if scheme == "https":
        report["tls"] = {"ca_cert": ca_cert}
    return report


def write_address_file(path: str | os.PathLike[str], report: Mapping[str, Any]) -> Written:
    """Write `report` as JSON to `path` by the package's file rules (`nhbench._io`): a
    regular file or a new path atomically, so that a reader polling for the file never sees
    it half written; a FIFO, a character device or ``-`` (stdout) streamed into. Returns
    what was written, for `remove_written`."""
    return write_text(path, json.dumps(report, indent=2, sort_keys=True) + "\n")


def remove_stale_socket(path: str) -> None:
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


@dataclass
class Bound:
    """What a started server is reachable at; `TestServer` copies it into its attributes.
    An implementation fills it in as it learns each part, so that a start that fails after
    binding still shows what was bound (as `TestServer` always did)."""

    listen: list[tuple[str, str, int]] = field(default_factory=list)
    admin: tuple[str, int] | None = None
    tcp_echo: list[tuple[str, int]] = field(default_factory=list)
    udp_echo: list[tuple[str, int]] = field(default_factory=list)
    #: (bound local, destination) of each TCP proxy.
    tcp_proxy: list[tuple[tuple[str, int], tuple[str, int]]] = field(default_factory=list)
    redirect: list[tuple[str, int]] = field(default_factory=list)
    #: (bound local, target URLs) of each HTTP fan-out.
    http_fanout: list[tuple[tuple[str, int], tuple[str, ...]]] = field(default_factory=list)
    #: The PEM file clients trust (TLS only).
    ca_cert: str | None = None
    #: The certificate served, PEM, when the implementation has it at hand (in-process).
    cert_pem: str | None = None


class ServerBackend(Protocol):
    """What `TestServer` asks of an implementation (``_inprocess.InProcessServer``,
    ``_subprocess.SubprocessServer``): one run each, `start` once, `stats` any time while it
    runs, `stop` once. The face holds its implementation as this type, so mypy checks that
    both provide every member with these types."""

    @property
    def bound(self) -> Bound | None:
        """What is bound so far (filled in during `start`, kept after a failed one)."""

    @property
    def pid(self) -> int:
        """The process serving."""

    @property
    def running(self) -> bool: ...

    def start(self) -> Bound:
        """Bind and serve; raise `ServerError` (with `bound` showing what was bound)."""

    def stats(self) -> dict[str, Any]:
        """The counters now (`_core.SERVER_STATS` keys)."""

    def stop(self) -> dict[str, Any] | None:
        """Stop and remove the files left behind; the final counters, if known."""


class ServerFiles:
    """The files a server run leaves: the address and CA files written at start (records
    from `nhbench._io`), a temporary directory for a generated CA certificate, and the
    server's unix sockets. `remove` deletes them at stop."""

    def __init__(self) -> None:
        self.written: list[Written] = []
        self.ca_tempdir: tempfile.TemporaryDirectory[str] | None = None

    def temporary_ca_path(self) -> str:
        """A path for the generated CA certificate in a directory removed at stop."""
        self.ca_tempdir = tempfile.TemporaryDirectory(prefix="nhbench-ca-")
        return os.path.join(self.ca_tempdir.name, "ca.pem")

    def remove_ca_tempdir(self) -> None:
        if self.ca_tempdir is not None:
            self.ca_tempdir.cleanup()
            self.ca_tempdir = None

    def remove(self, listen: Sequence[tuple[str, str, int]]) -> None:
        # The address and certificate files go with the server: the next start binds other
        # ports and generates another certificate, and a script waiting for the file must
        # not find a stale one. But only a file this server created is removed, and only
        # while it is still the file written: one that existed before the start (replaced
        # by the start), a FIFO or a device streamed into, or a file someone put there
        # since, is left alone.
        self.remove_ca_tempdir()
        written, self.written = self.written, []
        for record in written:
            remove_written(record)
        # Our own unix sockets go too, so that the next start can bind the same path.
        for kind, where, _ in listen:
            if kind == "unix":
                remove_stale_socket(where)
