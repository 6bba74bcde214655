"""Names shared by the C core and the Python side: statistic ids and counter names.

They follow Nighthawk's names so that dashboards, scripts and habits carry over. The C core
is the authority on what it emits; these tuples exist so Python can validate predicate
names before a run, order the human report, and answer `result.counters[name]` with 0 for a
counter that Nighthawk-style JSON left out because it was zero.
"""

from __future__ import annotations

__all__ = [
    "SCHEDULED_TO_RESPONSE",
    "REQUEST_TO_RESPONSE",
    "QUEUE_TO_CONNECT",
    "TLS_HANDSHAKE",
    "SEQUENCER_CALLBACK",
    "SEQUENCER_BLOCKING",
    "RELEASE_LATENESS",
    "RESPONSE_HEADER_SIZE",
    "RESPONSE_BODY_SIZE",
    "LATENCY_BY_CLASS",
    "HISTOGRAM_IDS",
    "STREAM_IDS",
    "STATISTIC_DESCRIPTIONS",
    "COUNTERS",
    "COUNTER_DESCRIPTIONS",
    "ERROR_COUNTERS",
    "SERVER_STATS",
    "SERVER_STAT_DESCRIPTIONS",
]

SCHEDULED_TO_RESPONSE = "benchmark_http_client.scheduled_to_response"
REQUEST_TO_RESPONSE = "benchmark_http_client.request_to_response"
QUEUE_TO_CONNECT = "benchmark_http_client.queue_to_connect"
TLS_HANDSHAKE = "benchmark_http_client.tls_handshake"
SEQUENCER_CALLBACK = "sequencer.callback"
SEQUENCER_BLOCKING = "sequencer.blocking"
RELEASE_LATENESS = "sequencer.release_lateness"
RESPONSE_HEADER_SIZE = "benchmark_http_client.response_header_size"
RESPONSE_BODY_SIZE = "benchmark_http_client.response_body_size"

LATENCY_BY_CLASS = tuple(
    f"benchmark_http_client.latency_{c}" for c in ("1xx", "2xx", "3xx", "4xx", "5xx", "xxx")
)

# Histogram statistics (nanoseconds, with percentiles), in the order the human report and the
# JSON output list them: the coordinated-omission-correct latency first because it is the
# headline, then the rest roughly from "what the user measures" to "how the tool behaved".
HISTOGRAM_IDS: tuple[str, ...] = (
    SCHEDULED_TO_RESPONSE,
    REQUEST_TO_RESPONSE,
    *LATENCY_BY_CLASS,
    QUEUE_TO_CONNECT,
    TLS_HANDSHAKE,
    SEQUENCER_CALLBACK,
    SEQUENCER_BLOCKING,
    RELEASE_LATENESS,
)

# Streaming statistics: raw values (bytes), no percentiles, as in Nighthawk.
STREAM_IDS: tuple[str, ...] = (RESPONSE_HEADER_SIZE, RESPONSE_BODY_SIZE)

# Nighthawk's own descriptions where it has one, so its users recognise the sections.
STATISTIC_DESCRIPTIONS: dict[str, str] = {
    SCHEDULED_TO_RESPONSE: "Scheduled send to response end (coordinated-omission corrected)",
    REQUEST_TO_RESPONSE: "Request start to response end",
    QUEUE_TO_CONNECT: "Queueing and connection setup latency",
    TLS_HANDSHAKE: "TLS handshake (TCP connected to handshake done)",
    SEQUENCER_CALLBACK: "Initiation to completion",
    SEQUENCER_BLOCKING: "Blocking. Results are skewed when significant numbers are reported here.",
    RELEASE_LATENESS: "Release lateness (actual release minus scheduled release)",
    RESPONSE_HEADER_SIZE: "Response header size in bytes",
    RESPONSE_BODY_SIZE: "Response body size in bytes",
    **{sid: f"Latency of {sid.rsplit('_', 1)[1]} responses" for sid in LATENCY_BY_CLASS},
}

# Every counter the C core reports (architecture.md, "Binding contract").
COUNTERS: tuple[str, ...] = (
    "benchmark.http_1xx",
    "benchmark.http_2xx",
    "benchmark.http_3xx",
    "benchmark.http_4xx",
    "benchmark.http_5xx",
    "benchmark.http_xxx",
    "benchmark.pool_overflow",
    "benchmark.pool_connection_failure",
    "benchmark.stream_resets",
    "benchmark.request_timeout",
    "sequencer.blocked",
    "sequencer.released",
    "graceful_stop_requested",
    "upstream_rq_total",
    "upstream_rq_pending_total",
    "upstream_rq_pending_overflow",
    "upstream_rq_cancelled",
    "upstream_cx_total",
    "upstream_cx_http1_total",
    "upstream_cx_http2_total",
    "upstream_cx_rx_bytes_total",
    "upstream_cx_tx_bytes_total",
    "upstream_cx_connect_fail",
    "upstream_cx_connect_timeout",
    "upstream_cx_destroy_remote",
    "upstream_cx_protocol_error",
    "upstream_cx_close_notify",
    "upstream_rq_retry",
    "upstream_rq_retry_limit_exceeded",
    "ssl.handshake",
    "ssl.connection_error",
    "ssl.session_reused",
)

# What the counters added with TLS and HTTP/2 mean (the others are in docs/engine.md).
COUNTER_DESCRIPTIONS: dict[str, str] = {
    "upstream_cx_http2_total": "HTTP/2 connections opened",
    "upstream_cx_close_notify": "connections the server announced it would close "
    "(HTTP/1.1 'Connection: close', HTTP/2 GOAWAY)",
    "upstream_rq_retry": "HTTP/2 requests sent again because the server refused their stream "
    "without processing it (GOAWAY above its last stream id, REFUSED_STREAM)",
    "upstream_rq_retry_limit_exceeded": "HTTP/2 requests given up because the server refused "
    "them unprocessed once more after 3 retries",
    "ssl.handshake": "TLS handshakes completed",
    "ssl.connection_error": "TLS handshakes that failed (certificate verification included)",
    "ssl.session_reused": "TLS handshakes that resumed an earlier session",
}

# Counters that mean "a request did not get a 1xx-3xx answer"; the live progress line sums them.
ERROR_COUNTERS: tuple[str, ...] = (
    "benchmark.http_4xx",
    "benchmark.http_5xx",
    "benchmark.http_xxx",
    "benchmark.pool_overflow",
    "benchmark.pool_connection_failure",
    "benchmark.stream_resets",
    "benchmark.request_timeout",
)

# The test server's statistics: the keys of TestServer.stats() and of the admin endpoint's
# /stats JSON, in the order docs/server.md lists them ("status" maps codes to counts).
SERVER_STATS: tuple[str, ...] = (
    "requests",
    "connections_total",
    "connections_active",
    "rx_bytes",
    "tx_bytes",
    "bad_requests",
    "status",
    "stalls",
    "tcp_echo_bytes",
    "udp_echo_packets",
    "connections_http1",
    "connections_http2",
    "tls_handshakes",
    "tls_handshake_errors",
    "tls_session_reused",
    "h2_streams_reset",
    "h2_protocol_errors",
)

# What the statistics added with TLS and HTTP/2 mean (the others are in docs/server.md).
SERVER_STAT_DESCRIPTIONS: dict[str, str] = {
    "connections_http1": "connections that spoke HTTP/1.x only",
    "connections_http2": "connections that spoke HTTP/2 (h2 by ALPN, h2c by preface or "
    "Upgrade: h2c)",
    "tls_handshakes": "TLS handshakes completed",
    "tls_handshake_errors": "TLS connections that ended before their handshake completed",
    "tls_session_reused": "TLS handshakes that resumed an earlier session",
    "h2_streams_reset": "HTTP/2 streams reset before their response was sent",
    "h2_protocol_errors": "HTTP/2 connections ended because the client broke the protocol",
}
