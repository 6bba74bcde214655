"""A peer for result sync tests: a real HTTP server (the standard library's, on a loopback
port, in a thread) whose routes are set by the test: a path answers with bytes (status 200),
a `Reply`, or a function that writes whatever it likes to the connection (a trickle, a
redirect, silence). Every request is recorded, so a test can say what was (not) fetched.

It stands for a Fortio peer, an S3/GCS bucket or a hostile index server.
"""

from __future__ import annotations

import base64
import hashlib
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit


@dataclass
class Reply:
    body: bytes = b""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


Route = bytes | Reply | Callable[[BaseHTTPRequestHandler], None]


class Peer:
    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        #: Every request's path and query, in order.
        self.requests: list[str] = []
        peer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass

            def do_GET(self) -> None:  # noqa: N802
                peer.requests.append(self.path)
                route = peer.routes.get(urlsplit(self.path).path)
                if route is None:
                    route = Reply(b"no such thing", 404)
                if callable(route):
                    route(self)
                    self.close_connection = True
                    return
                reply = route if isinstance(route, Reply) else Reply(route)
                self.send_response(reply.status)
                headers = {"Content-Length": str(len(reply.body)), **reply.headers}
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(reply.body)

        class Server(ThreadingHTTPServer):
            def handle_error(self, request: object, client_address: object) -> None:
                pass  # a client that hangs up (a refused file) is what the tests do

        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def fetched(self, path: str) -> int:
        return sum(1 for r in self.requests if urlsplit(r).path == path)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def peer() -> Iterator[Peer]:
    running = Peer()
    try:
        yield running
    finally:
        running.close()


def md5_b64(data: bytes) -> str:
    """The transfer list format's checksum, computed here independently of nhbench."""
    return base64.b64encode(hashlib.md5(data).digest()).decode()


def tsv(*lines: str) -> bytes:
    return ("TsvHttpData-1.0\n" + "".join(line + "\n" for line in lines)).encode()


def tsv_line(url: str, body: bytes) -> str:
    return f"{url}\t{len(body)}\t{md5_b64(body)}"
