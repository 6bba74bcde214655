"""`TestServer` in a child process: ``python -m nhbench server``, which keeps the server's
threads out of this process (useful when measuring the client's CPU use). The child prints
its bound addresses on stdout (read here at start) and its final counters when it stops;
`stats()` while it runs goes through the admin endpoint when one is configured."""

from __future__ import annotations

import http.client
import json
import os
import selectors
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .._exceptions import ServerError
from .._io import Written
from ..options import ServerOptions
from ._common import (
    ADMIN_PREFIX,
    HTTP_FANOUT_PREFIX,
    LISTENING_PREFIX,
    REDIRECT_PREFIX,
    STATS_PREFIX,
    TCP_ECHO_PREFIX,
    TCP_PROXY_PREFIX,
    UDP_ECHO_PREFIX,
    Bound,
    ServerFiles,
    split_host_port,
    url,
)

__all__ = ["SubprocessServer"]


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


class SubprocessServer:
    """One run of ``nhbench server`` as a child: `start`, `stats` (admin endpoint), `stop`."""

    def __init__(self, options: ServerOptions, startup_timeout: float) -> None:
        self.options = options
        self.startup_timeout = startup_timeout
        self.bound: Bound | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._stderr: Any = None
        self._pending_output = b""
        self._files = ServerFiles()

    @property
    def pid(self) -> int:
        return self._process.pid if self._process is not None else os.getpid()

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> Bound:
        env = dict(os.environ)
        # The child must import this very copy of nhbench, also when it is used from a source
        # checkout through PYTHONPATH rather than installed.
        package_root = str(Path(__file__).resolve().parent.parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(
            [package_root, *filter(None, [env.get("PYTHONPATH")])]
        )
        options = self.options
        args = options.cli_args()
        if options.tls_self_signed and not options.tls_ca_out:
            # The child generates the certificate; it writes it where this process reads it.
            args += ["--tls-ca-out", self._files.temporary_ca_path()]
        command = [
            sys.executable, "-m", "nhbench", "server", *args, "--print-stats-json",
        ]
        # The child writes the address and certificate files and removes them when it stops.
        # Should it have to be killed, this process removes the ones the child created (absent
        # before the start, still the same file), by the same rule as in-process.
        absent = [path for path in (options.address_file, options.tls_ca_out)
                  if path and path != "-" and not os.path.lexists(path)]
        # stderr goes to a file, not a pipe: nobody reads it while the server runs, and a
        # full pipe would block the server.
        self._stderr = tempfile.TemporaryFile()
        self._process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=self._stderr, stdin=subprocess.DEVNULL,
            env=env,
        )
        expected = (
            len(options.listen) + (1 if options.admin else 0) + len(options.tcp_echo)
            + len(options.udp_echo) + len(options.tcp_proxy) + len(options.redirect_listen)
            + len(options.http_fanout)
        )
        prefixes = (LISTENING_PREFIX, ADMIN_PREFIX, TCP_ECHO_PREFIX, UDP_ECHO_PREFIX,
                    TCP_PROXY_PREFIX, REDIRECT_PREFIX, HTTP_FANOUT_PREFIX)
        try:
            lines = self._read_lines(expected, self.startup_timeout, prefixes)
        except ServerError:
            self._kill()
            self._files.remove_ca_tempdir()
            raise
        self._files.written = [record for record in map(_created_file, absent) if record]
        bound = self.bound = Bound()
        if options.tls_cert:
            bound.ca_cert = options.tls_cert
        elif options.tls_self_signed:
            bound.ca_cert = options.tls_ca_out or os.path.join(
                self._files.ca_tempdir.name if self._files.ca_tempdir else "", "ca.pem")
        for line in lines:
            if line.startswith(LISTENING_PREFIX):
                where = line[len(LISTENING_PREFIX):].strip()
                if where.startswith("unix:"):
                    bound.listen.append(("unix", where[len("unix:"):], 0))
                else:
                    parts = urlsplit(where)
                    bound.listen.append(
                        ("tcp", str(parts.hostname),
                         int(parts.port or (443 if parts.scheme == "https" else 80)))
                    )
            elif line.startswith(ADMIN_PREFIX):
                parts = urlsplit(line[len(ADMIN_PREFIX):].strip())
                bound.admin = (str(parts.hostname), int(parts.port or 80))
            elif line.startswith(TCP_ECHO_PREFIX):
                bound.tcp_echo.append(split_host_port(line[len(TCP_ECHO_PREFIX):]))
            elif line.startswith(UDP_ECHO_PREFIX):
                bound.udp_echo.append(split_host_port(line[len(UDP_ECHO_PREFIX):]))
            elif line.startswith(TCP_PROXY_PREFIX):
                local, _, dest = line[len(TCP_PROXY_PREFIX):].partition(" -> ")
                bound.tcp_proxy.append((split_host_port(local), split_host_port(dest)))
            elif line.startswith(REDIRECT_PREFIX):
                bound.redirect.append(split_host_port(line[len(REDIRECT_PREFIX):]))
            elif line.startswith(HTTP_FANOUT_PREFIX):
                local, _, urls = line[len(HTTP_FANOUT_PREFIX):].partition(" -> ")
                bound.http_fanout.append((split_host_port(local), tuple(urls.split(" "))))
        return bound

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

    def stats(self) -> dict[str, Any]:
        """The child's counters now, through the admin endpoint (the only live source)."""
        admin = self.bound.admin if self.bound is not None else None
        if admin is None:
            raise ServerError(
                "a subprocess test server without admin= reports its statistics after stop()"
            )
        host, port = admin
        admin_url = url(host, port, "/stats")
        connection = http.client.HTTPConnection(host, port, timeout=10)
        try:
            connection.request("GET", "/stats")
            response = connection.getresponse()
            body = response.read()
        except OSError as exc:
            raise ServerError(f"the admin endpoint {admin_url} did not answer: {exc}") \
                from exc
        finally:
            connection.close()
        if response.status != 200:
            raise ServerError(f"the admin endpoint {admin_url} answered {response.status}")
        try:
            data = json.loads(body)
        except ValueError as exc:
            raise ServerError(f"the admin endpoint {admin_url} sent no JSON") from exc
        return dict(data)

    def stop(self) -> dict[str, Any] | None:
        """SIGTERM the child and read the final counters it prints (None if it printed
        none); kill it if it does not exit, and remove the files of this run."""
        process = self._process
        if process is None:
            return None
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        final: dict[str, Any] | None
        try:
            lines = self._read_lines(1, 15.0, (STATS_PREFIX,))
            final = json.loads(lines[0][len(STATS_PREFIX):])
        except (ServerError, ValueError):
            final = None
        self._kill()
        self._files.remove(self.bound.listen if self.bound else [])
        return final

    def _kill(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None
