"""Real receivers for pushed metrics (docs/telemetry.md): a statsd server on a UDP or TCP
socket that parses every line that arrives, and an OTLP/HTTP metrics endpoint (a local HTTP
server decoding each request with opentelemetry-proto's own classes; PyPI has no
OpenTelemetry collector to run in-process). Each can also refuse or stall, to test a sink
that is down or slow."""

from __future__ import annotations

import re
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# name:value|type[|@rate]
STATSD_LINE = re.compile(r"^([A-Za-z0-9_.\-]+):(-?[0-9.e+\-]+)\|(c|g|ms)(?:\|@([0-9.e\-]+))?$")


@dataclass(frozen=True)
class StatsdLine:
    name: str
    value: float
    kind: str
    rate: float | None


class StatsdServer:
    """Collects statsd lines on 127.0.0.1 over `transport` ("udp" or "tcp")."""

    def __init__(self, transport: str = "udp") -> None:
        self.transport = transport
        self.raw: list[str] = []
        self.datagrams = 0
        self._lock = threading.Lock()
        kind = socket.SOCK_DGRAM if transport == "udp" else socket.SOCK_STREAM
        self._sock = socket.socket(socket.AF_INET, kind)
        self._sock.bind(("127.0.0.1", 0))
        if transport == "tcp":
            self._sock.listen()
        self.port = int(self._sock.getsockname()[1])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def address(self) -> str:
        return f"{self.transport}://127.0.0.1:{self.port}"

    def _serve(self) -> None:
        self._sock.settimeout(0.2)
        buffer = b""
        conn: socket.socket | None = None
        while not self._stop.is_set():
            try:
                if self.transport == "udp":
                    data = self._sock.recv(65536)
                    with self._lock:
                        self.datagrams += 1
                        self.raw += data.decode("ascii").split("\n")
                    continue
                if conn is None:
                    conn, _ = self._sock.accept()
                    conn.settimeout(0.2)
                data = conn.recv(65536)
                if not data:
                    conn.close()
                    conn = None
                    continue
                buffer += data
                *complete, buffer = buffer.split(b"\n")
                with self._lock:
                    self.raw += [line.decode("ascii") for line in complete]
            except TimeoutError:
                continue
            except OSError:
                return

    def lines(self) -> list[StatsdLine]:
        """Every line received so far, parsed; a line that does not parse fails the test."""
        with self._lock:
            raw = list(self.raw)
        out = []
        for text in raw:
            match = STATSD_LINE.match(text)
            assert match, f"not a statsd line: {text!r}"
            name, value, kind, rate = match.groups()
            out.append(StatsdLine(name, float(value), kind, float(rate) if rate else None))
        return out

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._sock.close()

    def __enter__(self) -> StatsdServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class OtlpReceiver:
    """An OTLP/HTTP metrics endpoint on 127.0.0.1: ``mode`` "ok" answers 200 with an
    ExportMetricsServiceResponse, "refuse" answers 400, "stall" holds each request for
    `stall` seconds before answering."""

    def __init__(self, mode: str = "ok", stall: float = 60.0) -> None:
        from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
            ExportMetricsServiceRequest,
            ExportMetricsServiceResponse,
        )

        self.requests: list[Any] = []
        self.content_types: list[str] = []
        self.headers: list[dict[str, str]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                receiver.content_types.append(self.headers.get("Content-Type", ""))
                receiver.headers.append({k.lower(): v for k, v in self.headers.items()})
                if mode == "stall":
                    time.sleep(stall)
                if mode == "refuse":
                    self.send_response(400)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                request = ExportMetricsServiceRequest()
                request.ParseFromString(body)
                receiver.requests.append(request)
                out = ExportMetricsServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args: object) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_port}/v1/metrics"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    def metrics(self) -> Iterator[Any]:
        """Every Metric received, in order."""
        for request in self.requests:
            for resource in request.resource_metrics:
                for scope in resource.scope_metrics:
                    yield from scope.metrics

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> OtlpReceiver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
