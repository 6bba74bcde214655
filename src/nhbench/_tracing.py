"""Export the spans of a traced run (``--trace``; docs/telemetry.md, "Traces").

The C core samples requests, writes their traceparent (and B3) headers and keeps each
sampled request's span (ids, start, end, status) in a per-worker ring. `SpanExporter`
drains the rings from a background thread every 0.1 s and POSTs the spans to the
collector: Zipkin JSON v2 (``zipkin://``, Nighthawk's flag, the fields Envoy's Zipkin tracer
writes) or OTLP/HTTP protobuf (``otlp://``, with opentelemetry-proto, imported only then).
A collector that is slow, down or refusing never holds the workers back: spans wait in
the rings, a full ring drops spans and counts them (``tracing.spans_dropped``).

Counters added to the result (the ``tracing.zipkin.*`` ones are Envoy's, which Nighthawk
reports): ``tracing.spans_sampled``, ``tracing.spans_dropped``, and per format
``tracing.<zipkin|otlp>.spans_sent`` (spans POSTed), ``reports_sent`` (POSTs the collector
accepted: 202 for Zipkin, as Envoy counts, any 2xx for OTLP), ``reports_dropped`` (POSTs
answered with another status) and ``reports_failed`` (POSTs that got no answer).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from ._exceptions import NHBenchError
from ._version import __version__
from .options import Options, TraceTarget, trace_target

__all__ = ["SpanExporter", "SpanName"]

_log = logging.getLogger(__name__)

# The rings are drained this often; a POST carries at most _BATCH spans and goes out at
# least every _FLUSH seconds (Envoy's Zipkin reporter flushes every 5 s or 5 spans; a load
# test makes spans faster, so batches are larger and more frequent).
_DRAIN = 0.1
_BATCH = 1000
_FLUSH = 1.0
# Envoy's Zipkin request_timeout. The run's end waits at most this long for the spans left
# to go out; what is still unsent then is dropped (counted).
_POST_TIMEOUT = 5.0
# Spans taken from the rings and waiting for a POST: a collector slower than the spans come
# cannot make this side grow without bound; the excess is dropped (counted).
_PENDING_MAX = 65536
_SERVICE = "nhbench"
# Envoy's short response flags for what ended a request without a response.
_RESPONSE_FLAGS = {
    "benchmark.pool_connection_failure": "UF",
    "benchmark.stream_resets": "UR",
    "benchmark.request_timeout": "UT",
    "upstream_rq_retry_limit_exceeded": "URX",
    "benchmark.pool_overflow": "UO",
}


class SpanName(NamedTuple):
    """What a span says of its request, per entry of the request set."""

    method: str
    url: str
    authority: str


def spec_names(options: Options, config: Mapping[str, Any]) -> list[SpanName]:
    """One `SpanName` per entry of the core config's ``specs``, read from what is sent."""
    scheme = "https" if options.target.scheme in ("https", "grpcs") else "http"
    names = []
    for spec in config.get("specs") or ():
        if "h2_method" in spec:
            method, path = str(spec["h2_method"]), str(spec["h2_path"])
            authority = bytes(spec["h2_authority"]).decode("latin-1")
        else:
            head = bytes(spec["request"]).split(b"\r\n\r\n", 1)[0].decode("latin-1")
            lines = head.split("\r\n")
            method, path = (lines[0].split(" ") + ["", ""])[:2]
            authority = next((line.split(":", 1)[1].strip() for line in lines[1:]
                              if line.lower().startswith("host:")), options.target.authority)
        names.append(SpanName(method, f"{scheme}://{authority}{path}", authority))
    return names


class SpanExporter:
    """Drains a core run's spans and sends them to one collector, in a background thread."""

    def __init__(self, target: TraceTarget, names: Sequence[SpanName], protocol: str) -> None:
        self.target = target
        self._names = list(names)
        self._protocol = protocol
        self._encode = self._zipkin_body if target.kind == "zipkin" else self._otlp_body
        if target.kind == "otlp":
            try:
                from opentelemetry.proto.collector.trace.v1 import (  # noqa: F401
                    trace_service_pb2,
                )
            except ImportError:
                raise NHBenchError(
                    "--trace otlp:// needs opentelemetry-proto: pip install 'nhbench[traces]'"
                ) from None
        prefix = f"tracing.{target.kind}."
        self._counts = {prefix + name: 0 for name in
                        ("spans_sent", "reports_sent", "reports_dropped", "reports_failed")}
        self._prefix = prefix
        self._run: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._final: dict[str, int] | None = None
        self._dropped = 0  # spans this side gave up on (bounds above)
        self._deadline: float | None = None  # set by finish(): the end of the grace

    @classmethod
    def for_run(cls, options: Options, config: Mapping[str, Any]) -> SpanExporter | None:
        """The exporter of a run with ``--trace``, else None."""
        if options.trace is None:
            return None
        protocol = {"http2": "HTTP/2", "http3": "HTTP/3"}.get(config.get("protocol", ""),
                                                             "HTTP/1.1")
        return cls(trace_target(options.trace), spec_names(options, config), protocol)

    def start(self, run: Any) -> None:
        self._run = run
        self._thread = threading.Thread(target=self._loop, name="nhbench-traces", daemon=True)
        self._thread.start()

    def finish(self) -> dict[str, int]:
        """Stop the thread after sending every span left; the run's tracing counters."""
        if self._final is not None:
            return self._final
        self._deadline = time.monotonic() + _POST_TIMEOUT
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        sampled, dropped = self._run.trace_counts() if self._run is not None else (0, 0)
        dropped += self._dropped
        self._final = {"tracing.spans_sampled": int(sampled),
                       "tracing.spans_dropped": int(dropped), **self._counts}
        if dropped:
            _log.warning("%d span%s dropped: the exporter could not keep up (lower "
                         "--trace-sample-rate)", dropped, "s" if dropped != 1 else "")
        return self._final

    # ---- the thread -------------------------------------------------------------------------

    def _loop(self) -> None:
        pending: list[tuple[Any, ...]] = []
        last = time.monotonic()
        while True:
            stopping = self._stop.wait(_DRAIN)
            pending += self._run.take_spans()
            if len(pending) > _PENDING_MAX:
                self._dropped += len(pending) - _PENDING_MAX
                del pending[:len(pending) - _PENDING_MAX]
            now = time.monotonic()
            deadline = self._deadline if stopping else None
            while len(pending) >= _BATCH or (pending and (stopping or now - last >= _FLUSH)):
                if deadline is not None and time.monotonic() >= deadline:
                    self._dropped += len(pending)
                    return
                timeout = _POST_TIMEOUT if deadline is None else deadline - time.monotonic()
                self._post(pending[:_BATCH], max(0.1, timeout))
                del pending[:_BATCH]
                last = now
            if stopping:
                return

    def _post(self, spans: Sequence[tuple[Any, ...]], timeout: float) -> None:
        """POST one batch; the answer is awaited `timeout` seconds in all, whatever the
        collector does (a socket time-out alone restarts with every byte a trickling
        collector sends)."""
        body, ctype = self._encode(spans)
        self._counts[self._prefix + "spans_sent"] += len(spans)
        url = urlsplit(self.target.url)
        conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=timeout)
        answer: list[int] = []

        def exchange() -> None:
            try:
                conn.request("POST", url.path, body=body, headers={"Content-Type": ctype})
                answer.append(conn.getresponse().status)
            except Exception as exc:  # noqa: BLE001 - no answer, a reset, bytes not HTTP
                _log.debug("trace collector %s: %s", self.target.url, exc)

        thread = threading.Thread(target=exchange, name="nhbench-traces-post", daemon=True)
        thread.start()
        give_up = time.monotonic() + timeout
        while thread.is_alive():
            thread.join(0.05)
            now = time.monotonic()
            if now >= give_up or (self._deadline is not None and now >= self._deadline):
                break
        if thread.is_alive() and conn.sock is not None:
            # Too slow: the socket is shut down, which ends the exchange's blocked read.
            with contextlib.suppress(OSError):
                conn.sock.shutdown(socket.SHUT_RDWR)
        thread.join(1.0)
        conn.close()
        if not answer:
            self._counts[self._prefix + "reports_failed"] += 1
            return
        status = answer[0]
        # Envoy counts only 202 Accepted as a sent Zipkin report; OTLP/HTTP answers 200.
        accepted = status == 202 if self.target.kind == "zipkin" else 200 <= status < 300
        self._counts[self._prefix + ("reports_sent" if accepted else "reports_dropped")] += 1

    # ---- the formats ------------------------------------------------------------------------

    def _name(self, spec: int) -> SpanName:
        return self._names[spec] if 0 <= spec < len(self._names) else SpanName("", "", "")

    def _zipkin_body(self, spans: Sequence[tuple[Any, ...]]) -> tuple[bytes, str]:
        out = []
        for hi, lo, span_id, start, end, status, reason, spec, worker in spans:
            name = self._name(spec)
            tags = {
                "component": "proxy",
                "http.method": name.method,
                "http.url": name.url,
                "http.protocol": self._protocol,
                "http.status_code": str(status),
                "response_flags": _RESPONSE_FLAGS.get(reason, "-") if reason else "-",
                "nhbench.worker": str(worker),
            }
            if reason or status >= 500:
                tags["error"] = "true"
            out.append({
                "traceId": f"{hi:016x}{lo:016x}",
                "id": f"{span_id:016x}",
                "kind": "CLIENT",
                # Envoy's Zipkin driver names a span after the request's host.
                "name": name.authority,
                "timestamp": start // 1000,
                "duration": max(1, (end - start) // 1000),
                "localEndpoint": {"serviceName": _SERVICE},
                "tags": tags,
            })
        return json.dumps(out).encode(), "application/json"

    def _otlp_body(self, spans: Sequence[tuple[Any, ...]]) -> tuple[bytes, str]:
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
        from opentelemetry.proto.common.v1 import common_pb2
        from opentelemetry.proto.resource.v1 import resource_pb2
        from opentelemetry.proto.trace.v1 import trace_pb2

        def attr(key: str, value: str | int) -> Any:
            v = (common_pb2.AnyValue(int_value=value) if isinstance(value, int)
                 else common_pb2.AnyValue(string_value=value))
            return common_pb2.KeyValue(key=key, value=v)

        version = self._protocol.removeprefix("HTTP/")  # OTel's "1.1", "2", "3"
        out = []
        for hi, lo, span_id, start, end, status, reason, spec, worker in spans:
            name = self._name(spec)
            attrs = [attr("http.request.method", name.method), attr("url.full", name.url),
                     attr("network.protocol.version", version), attr("nhbench.worker", worker)]
            if status:
                attrs.append(attr("http.response.status_code", status))
            if reason:
                attrs.append(attr("error.type", reason))
            error = bool(reason) or status >= 500
            out.append(trace_pb2.Span(
                trace_id=hi.to_bytes(8, "big") + lo.to_bytes(8, "big"),
                span_id=span_id.to_bytes(8, "big"),
                # OpenTelemetry's HTTP client spans are named after the method.
                name=name.method,
                kind=trace_pb2.Span.SPAN_KIND_CLIENT,
                start_time_unix_nano=start, end_time_unix_nano=end, attributes=attrs,
                status=trace_pb2.Status(code=trace_pb2.Status.STATUS_CODE_ERROR if error
                                        else trace_pb2.Status.STATUS_CODE_UNSET),
            ))
        request = trace_service_pb2.ExportTraceServiceRequest(resource_spans=[
            trace_pb2.ResourceSpans(
                resource=resource_pb2.Resource(attributes=[attr("service.name", _SERVICE)]),
                scope_spans=[trace_pb2.ScopeSpans(
                    scope=common_pb2.InstrumentationScope(name="nhbench", version=__version__),
                    spans=out)],
            )])
        return request.SerializeToString(), "application/x-protobuf"
