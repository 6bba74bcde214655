"""A tiny scripted HTTP origin on a real socket, for response shapes our own server never
sends: chunked and close-delimited bodies, interim 1xx responses, 204/304, garbage.

It is a real TCP server (nothing is mocked): each accepted connection reads one request head
(and its Content-Length body) at a time and answers with the ``Reply`` that
``respond(request)`` returns; returning ``None`` closes the connection. A ``Reply`` says how
its bytes go out as well as what they are: in several writes (a list, or ``piece`` bytes at a
time) with ``gap`` seconds between them, followed by a body that never ends (``forever``), or
with a close (``close_after``). ``sent`` counts the bytes written, over all connections.

For misbehaviour that is not "one reply per request" (resets at a chosen byte, endless
bodies, silence, hand-written HTTP/2 frames; see tests/hostile/) pass ``handler`` instead:
it gets each accepted connection and does with it whatever it likes until it returns (the
connection is then closed). ``ssl_context`` wraps every accepted connection in TLS first.
``close()`` shuts every live connection down, so handlers blocked in a read or waiting on
``stopped`` end with the origin.
"""

from __future__ import annotations

import itertools
import socket
import ssl
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field


@dataclass
class Reply:
    # The response, or the writes it is sent in (one write an item, in order).
    data: bytes | Sequence[bytes]
    # Shut the connection down for writing once the response is sent (a close-delimited body,
    # or a close in the middle of one).
    close_after: bool = False
    # Cut every write into writes of this many bytes, so that the client reads the response in
    # that many pieces (parsers must not depend on where reads split).
    piece: int | None = None
    # Seconds to pause between two writes (a stream's events, a slow origin).
    gap: float = 0.0
    # After ``data``, write these bytes over and over until the client goes or the origin
    # closes: a body that never ends.
    forever: bytes | None = None
    # One byte a write, a millisecond apart: ``piece=1, gap=0.001``.
    dribble: bool = False

    def __post_init__(self) -> None:
        if self.dribble:
            self.piece, self.gap = 1, 0.001

    def writes(self) -> Iterator[bytes]:
        """The writes of ``data``, in order, then ``forever``'s over and over."""
        parts = [self.data] if isinstance(self.data, bytes) else self.data
        for part in parts:
            if self.piece is None:
                yield part
            else:
                yield from (part[i:i + self.piece] for i in range(0, len(part), self.piece))
        if self.forever is not None:
            yield from itertools.repeat(self.forever)

    @property
    def several(self) -> bool:
        """Whether the reply goes out in more than one write."""
        return (self.piece is not None or self.forever is not None
                or not isinstance(self.data, bytes) and len(self.data) > 1)


def _recv(conn: socket.socket) -> bytes | None:
    """The next bytes from ``conn``; ``None`` when the peer closed or the socket failed (both
    end the request being read the same way)."""
    try:
        chunk = conn.recv(65536)
    except OSError:
        return None
    return chunk or None


def read_request(conn: socket.socket, buf: bytes) -> tuple[bytes, bytes] | None:
    """One request (head and Content-Length body) from ``buf`` plus what ``conn`` sends:
    ``(request, rest of buf)``, or ``None`` when the peer closed or the socket failed."""
    while b"\r\n\r\n" not in buf:
        chunk = _recv(conn)
        if chunk is None:
            return None
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(rest) < length:
        chunk = _recv(conn)
        if chunk is None:
            return None
        rest += chunk
    return head + b"\r\n\r\n" + rest[:length], rest[length:]


@dataclass
class ScriptedOrigin:
    respond: Callable[[bytes], Reply | None] | None = None
    requests: list[bytes] = field(default_factory=list)
    handler: Callable[[socket.socket], None] | None = None
    ssl_context: ssl.SSLContext | None = None

    def __post_init__(self) -> None:
        assert (self.respond is None) != (self.handler is None), "respond or handler"
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(128)
        self.port = self._sock.getsockname()[1]
        scheme = "https" if self.ssl_context is not None else "http"
        self.url = f"{scheme}://127.0.0.1:{self.port}/"
        self._lock = threading.Lock()
        self._stop = False
        self.stopped = threading.Event()
        self.connections = 0
        self.sent = 0
        self._live: set[socket.socket] = set()
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
            with self._lock:
                self.connections += 1
                self._live.add(conn)
            t = threading.Thread(target=self._connection, args=(conn,), daemon=True)
            t.start()

    def _connection(self, conn: socket.socket) -> None:
        try:
            with conn:
                if self.ssl_context is None:
                    self._dispatch(conn)
                    return
                try:
                    tls = self.ssl_context.wrap_socket(conn, server_side=True)
                except (OSError, ValueError):
                    return
                with tls:
                    self._dispatch(tls)
        finally:
            with self._lock:
                self._live.discard(conn)

    def _dispatch(self, conn: socket.socket) -> None:
        if self.handler is not None:
            try:
                self.handler(conn)
            except (OSError, ValueError):
                pass  # the client went away; that is its right
        else:
            self._serve(conn)

    def _serve(self, conn: socket.socket) -> None:
        assert self.respond is not None
        buf = b""
        while not self._stop:
            got = read_request(conn, buf)
            if got is None:
                return
            request, buf = got
            with self._lock:
                self.requests.append(request)
            reply = self.respond(request)
            if reply is None:
                return
            try:
                if not self._send(conn, reply):
                    return
            except OSError:
                return
            if reply.close_after:
                try:
                    conn.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                return

    def _send(self, conn: socket.socket, reply: Reply) -> bool:
        """Writes ``reply`` as it says; False when the origin closed meanwhile."""
        if reply.several:
            # Every write leaves as its own segment, not merged with the next by Nagle.
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for i, data in enumerate(reply.writes()):
            if (i and reply.gap and self.stopped.wait(reply.gap)) or self._stop:
                return False
            conn.sendall(data)
            with self._lock:
                self.sent += len(data)
        return True

    def close(self) -> None:
        self._stop = True
        self.stopped.set()
        # close() alone does not wake a thread blocked in accept(), and the socket would
        # keep listening; shutdown() does.
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        with self._lock:
            live = list(self._live)
        for conn in live:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def __enter__(self) -> ScriptedOrigin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
