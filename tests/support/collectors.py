"""Trace collectors on loopback for the tracing tests: real HTTP servers that take POSTed
spans the way Zipkin (``POST /api/v2/spans``, JSON v2, answers 202) and an OpenTelemetry
collector (``POST /v1/traces``, OTLP/HTTP protobuf decoded with opentelemetry-proto,
answers 200) do, and keep what they decoded.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        srv = self.server
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        ok = self.path == srv.path
        if ok:
            spans = srv.decode(body, self.headers.get("Content-Type") or "")
            with srv.lock:
                srv.spans.extend(spans)
                srv.posts += 1
        self.send_response(srv.status if ok else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, path: str, status: int, decode: Any) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.path = path
        self.status = status
        self.decode = decode
        self.lock = threading.Lock()
        self.spans: list[dict[str, Any]] = []
        self.posts = 0


def _zipkin(body: bytes, ctype: str) -> list[dict[str, Any]]:
    assert ctype == "application/json", ctype
    spans = json.loads(body)
    assert isinstance(spans, list)
    return spans


def _otlp(body: bytes, ctype: str) -> list[dict[str, Any]]:
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

    assert ctype == "application/x-protobuf", ctype
    request = trace_service_pb2.ExportTraceServiceRequest.FromString(body)
    out = []
    for rs in request.resource_spans:
        resource = {kv.key: kv.value.string_value for kv in rs.resource.attributes}
        for ss in rs.scope_spans:
            for span in ss.spans:
                attrs = {}
                for kv in span.attributes:
                    which = kv.value.WhichOneof("value")
                    attrs[kv.key] = getattr(kv.value, which)
                out.append({
                    "trace_id": span.trace_id.hex(), "span_id": span.span_id.hex(),
                    "name": span.name, "kind": span.kind, "start": span.start_time_unix_nano,
                    "end": span.end_time_unix_nano, "attributes": attrs,
                    "status": span.status.code, "resource": resource, "scope": ss.scope.name,
                })
    return out


class Collector:
    """``Collector("zipkin")`` or ``Collector("otlp")``; `status` is what every POST gets."""

    def __init__(self, kind: str, status: int | None = None) -> None:
        path, default, decode = {"zipkin": ("/api/v2/spans", 202, _zipkin),
                                 "otlp": ("/v1/traces", 200, _otlp)}[kind]
        self.kind = kind
        self._server = _Server(path, status or default, decode)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> Collector:
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def uri(self) -> str:
        """The --trace value that points here."""
        return f"{self.kind}://127.0.0.1:{self._server.server_address[1]}{self._server.path}"

    @property
    def spans(self) -> list[dict[str, Any]]:
        with self._server.lock:
            return list(self._server.spans)

    @property
    def posts(self) -> int:
        with self._server.lock:
            return self._server.posts
