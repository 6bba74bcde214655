"""Raw-socket helpers shared by the server tests and the hostile suites."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator


def read_until_close(sock: socket.socket, timeout: float = 10) -> tuple[bytes, bool]:
    """Everything the peer sends until it closes; (data, closed). closed is False when the
    peer kept the connection open for `timeout` seconds; a reset counts as closed."""
    data = b""
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return data, False
        sock.settimeout(remaining)
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            return data, False
        except ConnectionResetError:
            return data, True
        if not chunk:
            return data, True
        data += chunk


@contextlib.contextmanager
def reserved_port(host: str = "127.0.0.1", kind: int = socket.SOCK_STREAM) -> Iterator[int]:
    """A port on `host` where a connection (TCP) or a datagram (UDP) is refused, for as long
    as the block runs.

    A TCP socket is bound and never listened on: the kernel answers a connect with RST. A UDP
    socket is bound and connected to the discard port, so it takes no datagram from anyone
    else and the kernel answers theirs with ICMP port unreachable. Either way no other process
    or test can take the port meanwhile. A port bound and closed (or a fixed one such as 1) is
    refused only until someone else binds it, which parallel test runs do."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, kind) as sock:
        sock.bind((host, 0))
        if kind == socket.SOCK_DGRAM:
            sock.connect((host, 9))
        yield int(sock.getsockname()[1])


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    """A port free on 127.0.0.1 for `kind` at the time of the call (another process may take
    it before the caller binds it: use `reserved_port` where a refused port is wanted)."""
    with socket.socket(socket.AF_INET, kind) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def listening(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something accepts TCP connections on host:port now."""
    try:
        socket.create_connection((host, port), timeout=1).close()
        return True
    except OSError:
        return False
