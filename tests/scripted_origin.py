"""A tiny scripted HTTP origin on a real socket, for response shapes our own server never
sends: chunked and close-delimited bodies, interim 1xx responses, 204/304, garbage.

It is a real TCP server (nothing is mocked): each accepted connection reads one request head
(and its Content-Length body) at a time and answers with the bytes that ``respond(request)``
returns; returning ``None`` closes the connection, and a response may end with a close by
setting ``close_after``.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Callable


@dataclass
class Reply:
    data: bytes
    close_after: bool = False
    # Send one byte at a time with a short pause, so that the client reads the response in
    # many pieces (parsers must not depend on where reads split).
    dribble: bool = False


@dataclass
class ScriptedOrigin:
    respond: Callable[[bytes], Reply | None]
    requests: list[bytes] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(128)
        self.port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/"
        self._lock = threading.Lock()
        self._stop = False
        self._threads: list[threading.Thread] = []
        t = threading.Thread(target=self._accept_loop, daemon=True)
        t.start()
        self._threads.append(t)

    def _accept_loop(self) -> None:
        while not self._stop:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            t.start()

    def _serve(self, conn: socket.socket) -> None:
        buf = b""
        with conn:
            while not self._stop:
                while b"\r\n\r\n" not in buf:
                    try:
                        chunk = conn.recv(65536)
                    except OSError:
                        return
                    if not chunk:
                        return
                    buf += chunk
                head, _, rest = buf.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value.strip())
                while len(rest) < length:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    rest += chunk
                request = head + b"\r\n\r\n" + rest[:length]
                buf = rest[length:]
                with self._lock:
                    self.requests.append(request)
                reply = self.respond(request)
                if reply is None:
                    return
                try:
                    if reply.dribble:
                        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                        for i in range(len(reply.data)):
                            conn.sendall(reply.data[i:i + 1])
                            time.sleep(0.001)
                    else:
                        conn.sendall(reply.data)
                except OSError:
                    return
                if reply.close_after:
                    try:
                        conn.shutdown(socket.SHUT_WR)
                    except OSError:
                        pass
                    return

    def close(self) -> None:
        self._stop = True
        # close() alone does not wake a thread blocked in accept(), and the socket would
        # keep listening; shutdown() does.
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()

    def __enter__(self) -> ScriptedOrigin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class RawOrigin:
    """A TCP server that hands every accepted connection to ``serve(conn)`` in its own thread:
    for peers that speak something other than HTTP/1.1 request-response (hand-written HTTP/2
    frames, say). ``connections`` counts the connections accepted."""

    serve: Callable[[socket.socket], None]
    connections: int = 0

    def __post_init__(self) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(128)
        self.port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/"
        self._lock = threading.Lock()
        threading.Thread(target=self._accept_loop, daemon=True).start()

    def _accept_loop(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
            threading.Thread(target=self._run, args=(conn,), daemon=True).start()

    def _run(self, conn: socket.socket) -> None:
        with conn:
            try:
                self.serve(conn)
            except OSError:
                pass

    def close(self) -> None:
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()

    def __enter__(self) -> RawOrigin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
