"""`RecordingOrigin`: a real HTTP/1.x server on loopback that records every connection and
every request as it came on the wire (method, path, version, headers, body), for tests that
compare what two clients sent.

``/status/CODE`` answers with that status, ``/sleep/SECONDS`` waits before answering, any
other path answers 200 with a short body. HTTP/1.1 keep-alive, Connection: close honoured.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType


@dataclass
class Request:
    connection: int
    method: str
    path: str
    version: str
    headers: dict[str, str]
    body: bytes
    #: When the request's head had been read (time.monotonic()).
    at: float = 0.0


@dataclass
class _Log:
    lock: threading.Lock = field(default_factory=threading.Lock)
    connections: int = 0
    requests: list[Request] = field(default_factory=list)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        log = self.server.log
        with log.lock:
            log.connections += 1
            self.connection_id = log.connections

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass

    def _answer(self) -> None:
        at = time.monotonic()
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        log = self.server.log
        with log.lock:
            log.requests.append(Request(self.connection_id, self.command, self.path,
                                        self.request_version,
                                        {k.lower(): v for k, v in self.headers.items()}, body, at))
        status = 200
        parts = self.path.split("?")[0].strip("/").split("/")
        if parts[0] == "status" and len(parts) > 1:
            status = int(parts[1])
        elif parts[0] == "sleep" and len(parts) > 1:
            time.sleep(float(parts[1]))
        payload = b"hello from the recording origin\n"
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _answer  # noqa: N815


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    log: _Log

    def handle_error(self, request: object, client_address: object) -> None:
        # A client that resets its connection (Fortio's after an error status) is not
        # the origin's failure: nothing to print.
        pass


class RecordingOrigin:
    """``with RecordingOrigin() as origin: ... origin.url, origin.connections,
    origin.requests``."""

    def __init__(self) -> None:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.log = _Log()
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    @property
    def connections(self) -> int:
        with self._server.log.lock:
            return self._server.log.connections

    @property
    def requests(self) -> list[Request]:
        with self._server.log.lock:
            return list(self._server.log.requests)

    def reset(self) -> None:
        with self._server.log.lock:
            self._server.log.connections = 0
            self._server.log.requests.clear()

    def __enter__(self) -> RecordingOrigin:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._server.shutdown()
        self._server.server_close()
