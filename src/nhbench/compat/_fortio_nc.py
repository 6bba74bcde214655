"""``fortio nc``: one TCP, UDP or Unix-socket connection between stdin and the output stream
(docs/compat.md, "Fortio's nc and grpcping").

Fortio 1.66.5's netcat (its fnet.NetCat and UDPNetCat), behaviour for behaviour:

* ``host:port`` (or ``tcp://host:port``, a trailing ``/`` dropped) is TCP; ``udp://host:port``
  is UDP. The host resolves as Fortio's ``-resolve-ip-type`` says (``ip4`` by default, the
  first address). nhbench adds an absolute path (``/run/echo.sock``) for a Unix stream
  socket, which Fortio refuses as "not host:port".
* What arrives is written to **stderr**, as Fortio does (``NetCat(..., os.Stdin, os.Stderr,
  ...)``), so ``fortio nc host:port 2>out`` keeps working; `nc_main` takes another stream
  for callers that want stdout.
* TCP: stdin is copied to the socket, and its end half-closes the connection (shutdown of
  the write side) so the peer sees EOF and can still answer; the socket is copied to the
  output until the peer closes. Then nc returns at once, even if stdin is still open, unless
  ``-nc-dont-stop-on-eof``: then it waits for stdin's end too. Exit 1 when the connection
  fails or a copy ends on an error (a reset, a write to a closed peer), else 0.
* UDP: every read of stdin is one datagram; datagrams that come back are written out until
  0.4 s after stdin's end. Exit 0 once the socket is connected, whatever the datagrams met
  (Fortio returns only the dial's error).

A target that is not one of the forms above is refused by name (exit 2, nothing sent),
where Fortio exits 1 after logging it: nhbench's rule for bad input.
"""

from __future__ import annotations

import os
import select
import socket
import sys
import threading
import time
from dataclasses import dataclass
from typing import BinaryIO

__all__ = ["NcValues", "nc_main"]

#: Fortio's copy buffer (fnet.Copy): 32 KiB per read.
_CHUNK = 32 * 1024
#: How long UDP nc keeps reading answers after stdin's end (UDPNetCat's read deadline).
_UDP_LINGER = 0.4
_FAMILIES = {"ip4": socket.AF_INET, "ip6": socket.AF_INET6, "ip": socket.AF_UNSPEC}


@dataclass(frozen=True)
class NcValues:
    """The Fortio flags ``fortio nc`` reads, already parsed.

    ``dont_stop_on_eof``: ``-nc-dont-stop-on-eof``. ``resolve_ip_type``: ``-resolve-ip-type``
    (``ip4``, ``ip6`` or ``ip``).
    """

    dont_stop_on_eof: bool = False
    resolve_ip_type: str = "ip4"


class _Refused(ValueError):
    """Bad input: one line, exit 2, nothing sent."""


@dataclass(frozen=True)
class _Target:
    kind: str           # "tcp", "udp" or "unix"
    host: str = ""
    port: str = ""
    path: str = ""


def _parse(target: str) -> _Target:
    if target.startswith("/"):
        return _Target("unix", path=target)
    kind, rest = "tcp", target
    if target.startswith("udp://"):
        kind, rest = "udp", target[len("udp://"):]
    elif target.startswith("tcp://"):
        rest = target[len("tcp://"):]
    rest = rest.removesuffix("/")
    host, sep, port = rest.rpartition(":")  # the last colon, so [::1]:port works
    if not sep or not port:
        raise _Refused(f"nc: destination {target!r} is not host:port (or udp://host:port, "
                       "or an absolute Unix socket path)")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return _Target(kind, host=host, port=port)


def _address(target: _Target, ip_type: str) -> tuple[int, tuple[object, ...]]:
    kind = socket.SOCK_DGRAM if target.kind == "udp" else socket.SOCK_STREAM
    infos = socket.getaddrinfo(target.host or None, target.port, _FAMILIES[ip_type], kind)
    family, _, _, _, address = infos[0]
    return family, address


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _err(message: str) -> None:
    print(f"nc: {message}", file=sys.stderr, flush=True)


def nc_main(values: NcValues, target: str, *, stdin: BinaryIO | None = None,
            output: BinaryIO | None = None) -> int:
    """Run ``fortio nc TARGET``: 0 on a clean end, 1 on a connection or copy error, 2 when
    the target or a value is refused. `stdin` and `output` default to the process's stdin
    and stderr (Fortio's choice); they must have a file descriptor."""
    in_fd = (stdin if stdin is not None else sys.stdin.buffer).fileno()
    out_fd = (output if output is not None else sys.stderr.buffer).fileno()
    try:
        if values.resolve_ip_type not in _FAMILIES:
            raise _Refused(f"nc: -resolve-ip-type {values.resolve_ip_type!r} is not one of "
                           "ip4, ip6, ip")
        parsed = _parse(target)
    except _Refused as refused:
        print(refused, file=sys.stderr)
        return 2
    try:
        if parsed.kind == "unix":
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            where: object = parsed.path
        else:
            family, where = _address(parsed, values.resolve_ip_type)
            kind = socket.SOCK_DGRAM if parsed.kind == "udp" else socket.SOCK_STREAM
            sock = socket.socket(family, kind)
    except (OSError, UnicodeError) as error:
        _err(f"unable to resolve {target!r}: {error}")
        return 1
    try:
        sock.connect(where)  # type: ignore[arg-type]
    except OSError as error:
        sock.close()
        _err(f"connection error to {target!r}: {error}")
        return 1
    with sock:
        if parsed.kind == "udp":
            return _udp(sock, in_fd, out_fd)
        return _stream(sock, in_fd, out_fd, stop_on_eof=not values.dont_stop_on_eof,
                       target=target)


class _Copy:
    """One direction's outcome: the error it ended on, if any (fnet.Copy's err)."""

    def __init__(self) -> None:
        self.error: OSError | None = None
        self.done = threading.Event()


def _stdin_to_socket(sock: socket.socket, in_fd: int, state: _Copy) -> None:
    try:
        while True:
            try:
                chunk = os.read(in_fd, _CHUNK)
            except OSError as error:
                state.error = error
                break
            if not chunk:
                break
            try:
                sock.sendall(chunk)
            except OSError as error:
                state.error = error
                break
        try:
            # The half-close: the peer reads EOF and may still answer.
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # Fortio ignores CloseWrite's error too
    finally:
        state.done.set()


def _stream(sock: socket.socket, in_fd: int, out_fd: int, *, stop_on_eof: bool,
            target: str) -> int:
    sent = _Copy()
    # A daemon thread, as Fortio's goroutine: when the peer closes first (and nc does not
    # wait for stdin), the process ends while the thread still waits on stdin.
    threading.Thread(target=_stdin_to_socket, args=(sock, in_fd, sent), daemon=True,
                     name="nc-stdin").start()
    received: OSError | None = None
    while True:
        try:
            chunk = sock.recv(_CHUNK)
        except OSError as error:
            received = error
            _err(f"read error from {target}: {error}")
            break
        if not chunk:
            break
        try:
            _write_all(out_fd, chunk)
        except OSError as error:
            received = error
            _err(f"write error to the output: {error}")
            break
    if not stop_on_eof:
        sent.done.wait()
    if received is not None:
        return 1
    if sent.done.is_set() and sent.error is not None:
        _err(f"write error to {target}: {sent.error}")
        return 1
    return 0


def _socket_to_output(sock: socket.socket, out_fd: int, deadline: list[float],
                      state: _Copy) -> None:
    try:
        while True:
            wait = 0.05
            if deadline:
                left = deadline[0] - time.monotonic()
                if left <= 0:
                    break  # the read deadline: Fortio's timeout, not an error
                wait = min(wait, left)
            ready, _, _ = select.select([sock], [], [], wait)
            if not ready:
                continue
            try:
                _write_all(out_fd, sock.recv(65536))
            except OSError as error:
                state.error = error
                break
    finally:
        state.done.set()


def _udp(sock: socket.socket, in_fd: int, out_fd: int) -> int:
    received = _Copy()
    deadline: list[float] = []  # set once, after stdin's end
    reader = threading.Thread(target=_socket_to_output, args=(sock, out_fd, deadline, received),
                              daemon=True, name="nc-udp")
    reader.start()
    while True:
        try:
            chunk = os.read(in_fd, _CHUNK)
        except OSError as error:
            _err(f"read error from stdin: {error}")
            break
        if not chunk:
            break
        try:
            sock.send(chunk)
        except OSError as error:
            _err(f"UDP send error: {error}")
            break
    deadline.append(time.monotonic() + _UDP_LINGER)
    reader.join()
    # Fortio's UDPNetCat returns the dial's error only: a connected UDP nc ends with 0.
    return 0
