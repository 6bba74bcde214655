"""``nhbench ui`` as a subprocess, raw HTTP requests to it, and a listening origin that
records whether anything connected (tests/test_ui*.py, tests/hostile/test_ui_attacks.py)."""

from __future__ import annotations

import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import nhbench

PACKAGE_PARENT = str(Path(nhbench.__file__).resolve().parent.parent)


def env(extra: dict[str, str] | None = None) -> dict[str, str]:
    result = dict(os.environ)
    result["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_PARENT,
                                                         result.get("PYTHONPATH")]))
    result.pop("NHBENCH_UI_TOKEN", None)
    result.update(extra or {})
    return result


class UI:
    """``nhbench ui DIR ARGS`` on a free port: its port, stderr lines so far, `stop()`."""

    def __init__(self, root: Path, *args: str, listen: str = "127.0.0.1:0",
                 environment: dict[str, str] | None = None) -> None:
        command = [sys.executable, "-m", "nhbench", "ui", str(root), *args]
        if listen:
            command += ["--listen", listen]
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, stdin=subprocess.DEVNULL,
                                     env=env(environment))
        assert self.proc.stdout is not None and self.proc.stderr is not None
        line = self.proc.stdout.readline().strip()
        match = re.fullmatch(r"http://(.+):(\d+)/", line)
        assert match, (line, self.proc.stderr.read() if self.proc.poll() is not None else "")
        self.host = match.group(1).strip("[]")
        self.port = int(match.group(2))
        # The lines before the URL: the warning or the generated token.
        self.early = ""

    def token(self) -> str:
        """The token printed on stderr (read up to that line)."""
        assert self.proc.stderr is not None
        while True:
            line = self.proc.stderr.readline()
            assert line, "no token line on stderr"
            self.early += line
            if "token" in line:
                return line.rsplit(" ", 1)[1].strip()

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGINT)
        try:
            _, stderr = self.proc.communicate(timeout=60)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.communicate()
        assert self.proc.returncode == 0, stderr
        assert "Traceback" not in stderr, stderr
        return self.early + stderr


def request(port: int, path: str, *, method: str = "GET", body: bytes = b"",
            host: str | None = None, address: str = "127.0.0.1",
            headers: dict[str, str] | None = None, timeout: float = 60
            ) -> tuple[int, dict[str, str], bytes]:
    """One request on its own connection: status, headers (lower-case names), body."""
    head = (f"{method} {path} HTTP/1.1\r\nHost: {host or f'127.0.0.1:{port}'}\r\n"
            f"Connection: close\r\n")
    if method == "POST":
        head += f"Content-Length: {len(body)}\r\n"
    head += "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
    with socket.create_connection((address, port), timeout=timeout) as sock:
        sock.sendall(head.encode() + b"\r\n" + body)
        data = b""
        while chunk := sock.recv(1 << 20):
            data += chunk
    top, _, rest = data.partition(b"\r\n\r\n")
    lines = top.decode("latin-1").split("\r\n")
    fields: dict[str, str] = {}
    for line in lines[1:]:
        if ": " in line:
            name, value = line.split(": ", 1)
            fields[name.lower()] = value
    if fields.get("transfer-encoding") == "chunked":
        rest = _dechunk(rest)
    return int(lines[0].split()[1]), fields, rest


def _dechunk(data: bytes) -> bytes:
    out = b""
    while data:
        size, _, data = data.partition(b"\r\n")
        length = int(size.split(b";")[0], 16)
        if length == 0:
            break
        out += data[:length]
        data = data[length + 2:]
    return out


def rest(port: int, path: str, **kwargs: Any) -> tuple[int, Any]:
    status, _, body = request(port, path, **kwargs)
    return status, json.loads(body)


def form_session(port: int, path: str = "/run", **kwargs: Any) -> tuple[str, str]:
    """GET the form: the session cookie and the form's CSRF value."""
    status, headers, body = request(port, path, **kwargs)
    assert status == 200, body[:300]
    cookie = headers["set-cookie"].split(";", 1)[0]
    match = re.search(rb'name="csrf" value="([0-9a-f]+)"', body)
    assert match, body[:300]
    return cookie, match.group(1).decode()


class Origin:
    """A listening socket nobody accepts on: the kernel completes any handshake, so
    `connected` tells whether a run sent anything its way."""

    def __init__(self, address: str = "127.0.0.1") -> None:
        self.sock = socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET)
        self.sock.bind((address, 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://{address}:{self.port}/"

    def connected(self, wait: float = 1.5) -> bool:
        readable, _, _ = select.select([self.sock], [], [], wait)
        return bool(readable)

    def close(self) -> None:
        self.sock.close()


def local_address() -> str | None:
    """A non-loopback IPv4 address of this machine (the one a default route uses), or
    None when it has none."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            sock.connect(("192.0.2.1", 9))
        except OSError:
            return None
        address = sock.getsockname()[0]
    return None if address.startswith("127.") or address == "0.0.0.0" else address


class FortioServer:
    """``nhbench fortio server`` with only its HTTP port (``host``, a free port) and its UI
    over `root`, which the C server forwards to at ``/fortio/``: the port, the stderr lines
    up to "All fortio servers started", the generated token (None if none), `stop()`."""

    def __init__(self, root: Path, host: str = "127.0.0.1", *args: str,
                 environment: dict[str, str] | None = None) -> None:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            probe.bind((host, 0))
            self.port = int(probe.getsockname()[1])
        shown = f"[{host}]" if ":" in host else host
        command = [sys.executable, "-m", "nhbench", "fortio", "server", "-http-port",
                   f"{shown}:{self.port}", "-grpc-port", "disabled", "-tcp-port", "disabled",
                   "-udp-port", "disabled", "-redirect-port", "disabled", "-data-dir",
                   str(root), *args]
        self.proc = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True,
                                     stdin=subprocess.DEVNULL, env=env(environment))
        assert self.proc.stderr is not None
        self.lines: list[str] = []
        while True:
            line = self.proc.stderr.readline()
            assert line, "\n".join(self.lines)
            self.lines.append(line.rstrip("\n"))
            if "All fortio servers started" in line:
                break
        self.token = next((line.rsplit(" ", 1)[1] for line in self.lines
                           if "token (required" in line), None)
        self.ui_url = self.lines[self.lines.index("UI started - visit:") + 1]

    def internal_ports(self) -> list[int]:
        """The loopback ports the process listens on other than its HTTP port: the UI's
        own, which only the forwarder should reach."""
        import psutil

        return sorted({conn.laddr.port
                       for conn in psutil.Process(self.proc.pid).net_connections("tcp")
                       if conn.status == "LISTEN" and conn.laddr.port != self.port})

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGTERM)
        try:
            _, stderr = self.proc.communicate(timeout=60)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.communicate()
        stderr = "\n".join(self.lines) + "\n" + stderr
        assert self.proc.returncode == 0, stderr
        assert "Traceback" not in stderr, stderr
        return stderr
