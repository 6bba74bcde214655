"""`TestServer`: the C engine's HTTP/1.1 test server, in this process or in a child process.

In-process (the default) is what tests and the demo use: no start-up cost, and `stats()`
reads the server's own counters directly, so a test can compare them with the client's.
``subprocess=True`` runs ``python -m nhbench server`` instead, which keeps the server's
threads out of this process (useful when measuring the client's CPU use); its statistics
are then available after `stop()`, when the child prints them.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess as _subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ._exceptions import OptionsError, ServerError
from ._options import (
    affinity_cpus,
    format_cpu_list,
    format_validation_error,
    parse_cpu_list,
    parse_duration,
)
from ._request import parse_header

__all__ = ["ServerOptions", "TestServer", "parse_listen"]

# Nighthawk's test server caps the response body at 4 MiB; so does this one.
MAX_RESPONSE_BODY_SIZE = 4 * 1024 * 1024
STATS_PREFIX = "stats "
LISTENING_PREFIX = "listening on "


def parse_listen(value: object) -> tuple[str, int]:
    """``"127.0.0.1:8080"``, ``"[::1]:0"``, ``":8080"`` (all IPv4) or ``("127.0.0.1", 0)``."""
    if isinstance(value, (tuple, list)) and len(value) == 2:
        host, port = value
    elif isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            host, sep, port = text[1:].partition("]:")
        else:
            host, sep, port = text.rpartition(":")
        if not sep:
            raise ValueError(f"must be HOST:PORT such as 127.0.0.1:8080 (got {value!r})")
        host = host or "0.0.0.0"
    else:
        raise ValueError(f"must be HOST:PORT such as 127.0.0.1:8080 (got {value!r})")
    try:
        port_number = int(port)
    except (TypeError, ValueError):
        raise ValueError(f"port must be an integer in 0..65535 (got {value!r})") from None
    if not 0 <= port_number <= 65535:
        raise ValueError(f"port must be in 0..65535 (got {value!r})")
    # The core binds numeric addresses; a name is resolved here, once.
    from ._exceptions import ResolveError
    from ._run import resolve

    try:
        address = resolve(str(host), port_number)
    except ResolveError as exc:
        raise ValueError(f"{exc} (got {value!r})") from None
    return address, port_number


class ServerOptions(BaseModel):
    """Validated settings of the test server (the flags of ``nhbench server``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    listen: tuple[tuple[str, int], ...] = Field(
        default=(("127.0.0.1", 0),), description="Addresses to listen on; port 0 picks a free port."
    )
    workers: int = Field(default=1, ge=1, le=1024, description="Server threads.")
    cpus: tuple[int, ...] | None = Field(default=None, description="CPUs to pin the workers to.")
    response_body_size: int = Field(
        default=0, ge=0, le=MAX_RESPONSE_BODY_SIZE, description="Response body size in bytes."
    )
    static_delay: float = Field(
        default=0.0, ge=0, le=3600, description="Fixed delay before each response, in seconds."
    )
    response_header: tuple[str, ...] = Field(default=(), description="Extra 'name: value' headers.")

    @field_validator("listen", mode="before")
    @classmethod
    def _parse_listen(cls, value: Any) -> object:
        if isinstance(value, str) or (
            isinstance(value, (tuple, list)) and len(value) == 2 and isinstance(value[1], int)
        ):
            value = [value]
        items = [parse_listen(item) for item in value]
        if not items:
            raise ValueError("must name at least one address")
        return tuple(items)

    @field_validator("cpus", mode="before")
    @classmethod
    def _parse_cpus(cls, value: object) -> object:
        if value is None:
            return None
        cpus = parse_cpu_list(value)
        allowed = set(affinity_cpus())
        outside = [cpu for cpu in cpus if cpu not in allowed]
        if outside:
            raise ValueError(
                f"CPU {format_cpu_list(outside)} not in this process's CPU affinity "
                f"({format_cpu_list(allowed)})"
            )
        return tuple(cpus)

    @field_validator("static_delay", mode="before")
    @classmethod
    def _parse_delay(cls, value: object) -> object:
        return parse_duration(value)

    @field_validator("response_header", mode="before")
    @classmethod
    def _check_headers(cls, value: Any) -> object:
        if isinstance(value, str):
            value = (value,)
        if isinstance(value, Mapping):
            value = [f"{k}: {v}" for k, v in value.items()]
        items = []
        for item in value:
            if isinstance(item, (tuple, list)) and len(item) == 2:
                item = f"{item[0]}: {item[1]}"
            name, header_value = parse_header(item)
            items.append(f"{name}: {header_value}")
        return tuple(items)

    def core_config(self) -> dict[str, Any]:
        """The ``_core.Server`` config dict (docs/architecture.md)."""
        cpus = list(self.cpus or ())
        return {
            "listen": [tuple(address) for address in self.listen],
            "workers": self.workers,
            # One CPU per worker, round-robin over the given ones, or none (no pinning).
            "cpus": [cpus[i % len(cpus)] for i in range(self.workers)] if cpus else [],
            "response_body_size": self.response_body_size,
            "static_delay": float(self.static_delay),
            "response_headers": [parse_header(item) for item in self.response_header],
        }

    def cli_args(self) -> list[str]:
        """The ``nhbench server`` flags that reproduce these options."""
        args: list[str] = []
        for host, port in self.listen:
            args += ["--listen", f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
        args += ["--workers", str(self.workers)]
        if self.cpus:
            # Listed one by one rather than as ranges: the order decides which worker gets
            # which CPU, and ranges would sort them.
            args += ["--cpus", ",".join(map(str, self.cpus))]
        args += ["--response-body-size", str(self.response_body_size)]
        args += ["--static-delay", repr(float(self.static_delay))]
        for header in self.response_header:
            args += ["--response-header", header]
        return args


def _url(address: Sequence[Any]) -> str:
    host, port = str(address[0]), int(address[1])
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


class TestServer:
    """The embedded HTTP/1.1 test server, as a context manager.

    ``with TestServer() as server: nhbench.run(server.url, rps=100)``

    `url` and `address` are those of the first listen address (the port is the bound one
    when 0 was asked for).
    """

    # Its name starts with "Test"; this tells pytest it is not a test class to collect.
    __test__ = False

    def __init__(
        self,
        listen: object = ("127.0.0.1", 0),
        workers: int = 1,
        response_body_size: int = 0,
        static_delay: float | str = 0.0,
        response_headers: Iterable[object] | Mapping[str, str] = (),
        cpus: object = None,
        subprocess: bool = False,
        startup_timeout: float = 10.0,
    ) -> None:
        try:
            options = ServerOptions.model_validate(
                {
                    "listen": listen,
                    "workers": workers,
                    "cpus": cpus,
                    "response_body_size": response_body_size,
                    "static_delay": static_delay,
                    "response_header": response_headers,
                }
            )
        except ValidationError as exc:
            raise OptionsError(format_validation_error(exc, model=ServerOptions)) from exc
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
        self.addresses: list[tuple[str, int]] = []
        self._server: Any = None
        self._process: _subprocess.Popen[bytes] | None = None
        self._stderr: Any = None
        self._pending_output = b""
        self._final_stats: dict[str, Any] | None = None

    # ---- lifecycle ------------------------------------------------------------------------

    def start(self) -> TestServer:
        """Bind and start serving; returns self."""
        if self._server is not None or self._process is not None:
            raise RuntimeError("this TestServer is already running")
        if self.subprocess:
            self._start_subprocess()
        else:
            self._start_in_process()
        return self

    def stop(self) -> None:
        """Stop serving (idempotent)."""
        if self._server is not None:
            server, self._server = self._server, None
            self._final_stats = dict(server.stats())
            server.stop()
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
    def address(self) -> tuple[str, int]:
        """(host, port) of the first listen address."""
        if not self.addresses:
            raise ServerError("the test server has not been started")
        return self.addresses[0]

    @property
    def url(self) -> str:
        """``http://host:port/`` of the first listen address."""
        return _url(self.address)

    @property
    def urls(self) -> list[str]:
        return [_url(address) for address in self.addresses]

    def stats(self) -> dict[str, Any]:
        """The server's own counters: requests, connections_total, rx_bytes, tx_bytes…

        Live for an in-process server; for a subprocess server, available after `stop()`.
        """
        if self._server is not None:
            return dict(self._server.stats())
        if self._final_stats is not None:
            return dict(self._final_stats)
        if self._process is not None:
            raise ServerError("a subprocess test server reports its statistics after stop()")
        raise ServerError("the test server has not been started")

    # ---- in-process -----------------------------------------------------------------------

    def _start_in_process(self) -> None:
        from ._run import load_core

        core = load_core()
        try:
            server = core.Server(self.options.core_config())
            server.start()
        except (OSError, RuntimeError, ValueError) as exc:
            raise ServerError(f"the test server could not start: {exc}") from exc
        self._server = server
        self.addresses = [(str(host), int(port)) for host, port in server.addresses]

    # ---- subprocess -----------------------------------------------------------------------

    def _start_subprocess(self) -> None:
        env = dict(os.environ)
        # The child must import this very copy of nhbench, also when it is used from a source
        # checkout through PYTHONPATH rather than installed.
        package_root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(
            [package_root, *filter(None, [env.get("PYTHONPATH")])]
        )
        command = [
            sys.executable, "-m", "nhbench", "server", *self.options.cli_args(),
            "--print-stats-json",
        ]
        # stderr goes to a file, not a pipe: nobody reads it while the server runs, and a
        # full pipe would block the server.
        self._stderr = tempfile.TemporaryFile()
        self._process = _subprocess.Popen(
            command, stdout=_subprocess.PIPE, stderr=self._stderr, stdin=_subprocess.DEVNULL,
            env=env,
        )
        try:
            lines = self._read_lines(len(self.options.listen), self.startup_timeout,
                                     LISTENING_PREFIX)
        except ServerError:
            self._kill_subprocess()
            raise
        self.addresses = []
        for line in lines:
            parts = urlsplit(line[len(LISTENING_PREFIX):].strip())
            self.addresses.append((str(parts.hostname), int(parts.port or 80)))

    def _read_lines(self, count: int, timeout: float, prefix: str) -> list[str]:
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
                    if line.startswith(prefix):
                        found.append(line)
                if len(found) >= count:
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ServerError(
                        f"the test server subprocess did not report {prefix.strip()!r} within "
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
            lines = self._read_lines(1, 15.0, STATS_PREFIX)
            self._final_stats = json.loads(lines[0][len(STATS_PREFIX):])
        except (ServerError, ValueError):
            self._final_stats = None
        self._kill_subprocess()

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
