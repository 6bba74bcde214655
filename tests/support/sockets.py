"""Raw-socket helpers shared by the server tests and the hostile suites."""

from __future__ import annotations

import socket
import time


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
