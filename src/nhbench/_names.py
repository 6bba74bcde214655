"""Names shared by the C core and the Python side: statistic ids and counter names.

They follow Nighthawk's names so that dashboards, scripts and habits carry over. The C core
is the authority on what it emits; these tuples exist so Python can validate predicate
names before a run, order the human report, and answer `result.counters[name]` with 0 for a
counter that Nighthawk-style JSON left out because it was zero.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = [
    "SCHEDULED_TO_RESPONSE",
    "REQUEST_TO_RESPONSE",
    "QUEUE_TO_CONNECT",
    "CONNECT",
    "REQUEST_WRITE",
    "TIME_TO_FIRST_BYTE",
    "TRANSFER",
    "PHASE_IDS",
    "TIME_TO_FIRST_EVENT",
    "INTER_EVENT_GAP",
    "STREAM_DURATION",
    "EVENTS_PER_RESPONSE",
    "STREAMING_IDS",
    "TLS_HANDSHAKE",
    "TUNNEL_SETUP",
    "ORIGIN_LATENCY",
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
    "STATUS_CODE_RANGE",
    "is_counter",
    "GRPC_STATUS_RANGE",
    "grpc_status_counter_code",
    "status_code_counter",
    "status_counter_code",
    "ERROR_COUNTERS",
    "CONNECTION_ERROR_COUNTERS",
    "ERROR_NAMES",
    "RETRY_LIMIT_EXCEEDED",
    "SUCCESS_COUNTER",
    "describe_errors",
    "error_counters",
    "blocked_total",
    "error_rate",
    "error_total",
    "blocked_total",
    "no_success_reason",
    "response_total",
    "SERVER_STATS",
    "SERVER_STAT_DESCRIPTIONS",
]

SCHEDULED_TO_RESPONSE = "benchmark_http_client.scheduled_to_response"
REQUEST_TO_RESPONSE = "benchmark_http_client.request_to_response"
QUEUE_TO_CONNECT = "benchmark_http_client.queue_to_connect"
TLS_HANDSHAKE = "benchmark_http_client.tls_handshake"
# The latency phases (docs/engine.md "Latency phases"): connect and tls_handshake once per new
# connection; request_write + time_to_first_byte + transfer = request_to_response per request.
CONNECT = "benchmark_http_client.connect"
REQUEST_WRITE = "benchmark_http_client.request_write"
TIME_TO_FIRST_BYTE = "benchmark_http_client.time_to_first_byte"
TRANSFER = "benchmark_http_client.transfer"
# DNS per connection (docs/engine.md "DNS per connection"): each new connection's resolution
# of the host, only present in a result when the run had dns_refresh connection.
DNS = "benchmark_http_client.dns"
# Streaming responses (docs/engine.md "Streaming responses"), only with --stream-stats: an
# event is an SSE event of a text/event-stream response, else a body piece as it arrives.
TIME_TO_FIRST_EVENT = "benchmark_http_client.time_to_first_event"
INTER_EVENT_GAP = "benchmark_http_client.inter_event_gap"
STREAM_DURATION = "benchmark_http_client.stream_duration"
EVENTS_PER_RESPONSE = "benchmark_http_client.events_per_response"
# The CONNECT tunnel through a proxy (TCP to the proxy connected to its 2xx answer; for
# CONNECT-UDP, the first packet to the proxy to its 2xx); only present in a result when the
# run went through a tunnel.
TUNNEL_SETUP = "benchmark_http_client.tunnel_setup"
# The latency the origin reported in --latency-response-header-name (Nighthawk's
# name); only present in a result when that option was given.
ORIGIN_LATENCY = "benchmark_http_client.origin_latency_statistic"
# The latency of 2xx responses that failed a --check (benchmark.check_failed); only present
# in a result when the run had checks.
LATENCY_CHECK_FAILED = "benchmark_http_client.latency_check_failed"
SEQUENCER_CALLBACK = "sequencer.callback"
SEQUENCER_BLOCKING = "sequencer.blocking"
RELEASE_LATENESS = "sequencer.release_lateness"
RESPONSE_HEADER_SIZE = "benchmark_http_client.response_header_size"
RESPONSE_BODY_SIZE = "benchmark_http_client.response_body_size"

# The phases in the order a request lives through them, as the human report's phases block
# and the browser's breakdown list them.
PHASE_IDS: tuple[str, ...] = (
    QUEUE_TO_CONNECT, DNS, CONNECT, "benchmark_http_client.tls_handshake", REQUEST_WRITE,
    TIME_TO_FIRST_BYTE, TRANSFER,
)

# The streaming statistics in the order the human report's STREAMING block lists them.
STREAMING_IDS: tuple[str, ...] = (
    TIME_TO_FIRST_EVENT, INTER_EVENT_GAP, STREAM_DURATION, EVENTS_PER_RESPONSE,
)

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
    LATENCY_CHECK_FAILED,
    QUEUE_TO_CONNECT,
    DNS,
    CONNECT,
    TLS_HANDSHAKE,
    REQUEST_WRITE,
    TIME_TO_FIRST_BYTE,
    TRANSFER,
    TIME_TO_FIRST_EVENT,
    INTER_EVENT_GAP,
    STREAM_DURATION,
    TUNNEL_SETUP,
    ORIGIN_LATENCY,
    SEQUENCER_CALLBACK,
    SEQUENCER_BLOCKING,
    RELEASE_LATENESS,
)

# Streaming statistics: raw values (bytes, events), no percentiles, as in Nighthawk.
STREAM_IDS: tuple[str, ...] = (RESPONSE_HEADER_SIZE, RESPONSE_BODY_SIZE, EVENTS_PER_RESPONSE)

# Nighthawk's own descriptions where it has one, so its users recognise the sections.
STATISTIC_DESCRIPTIONS: dict[str, str] = {
    SCHEDULED_TO_RESPONSE: "Scheduled send to response end (coordinated-omission corrected)",
    REQUEST_TO_RESPONSE: "Request start to response end",
    QUEUE_TO_CONNECT: "Queueing and connection setup latency",
    TLS_HANDSHAKE: "TLS handshake (TCP connected to handshake done)",
    CONNECT: "TCP connect (connect call to connected), once per new connection",
    DNS: "DNS resolution of the host (request to answer), once per new connection with "
    "dns_refresh connection",
    REQUEST_WRITE: "Request write (handed to a connection to its last byte written)",
    TIME_TO_FIRST_BYTE: "Time to first byte (request's last byte written to the response's "
    "first byte read: the server's think time plus one round trip)",
    TRANSFER: "Transfer (response's first byte to its last)",
    TIME_TO_FIRST_EVENT: "Time to first event (request's last byte written to the response's "
    "first event: SSE event, or body piece)",
    INTER_EVENT_GAP: "Gap between consecutive events of a response",
    STREAM_DURATION: "Stream duration (a response's first event to its last)",
    EVENTS_PER_RESPONSE: "Events per response (SSE events, or body pieces)",
    TUNNEL_SETUP: "CONNECT tunnel setup (TCP to the proxy connected, or over QUIC the first "
    "packet to it, to its 2xx answer)",
    ORIGIN_LATENCY: "Origin latency (the latency response header's values)",
    LATENCY_CHECK_FAILED: "Latency of 2xx responses that failed a check",
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
    # Responses whose --latency-response-header-name header was malformed.
    "benchmark.origin_latency_header_errors",
    # Echo (docs/protocols.md): tcp:// and udp:// echoes.
    "benchmark.echo_mismatch",
    "benchmark.udp_lost",
    "benchmark.udp_late",
    "benchmark.udp_unexpected",
    # HTTP/3: QUIC connections opened (docs/protocols.md).
    "upstream_cx_http3_total",
    # gRPC: calls that ended with a non-OK grpc-status, or broke the protocol.
    "benchmark.grpc_error",
    "benchmark.grpc_protocol_error",
    # Response checks (docs/checks.md): 2xx responses that failed one.
    "benchmark.check_failed",
    # Proxies: CONNECT tunnels up, and those that failed, by cause (docs/engine.md).
    "tunnel.established",
    "tunnel.connect_fail",
    "tunnel.non_2xx",
    "tunnel.proxy_closed",
    "tunnel.protocol_error",
    "tunnel.timeout",
    "tunnel.datagrams_dropped",
    "tunnel.tls_fail",
    "tunnel.reset",
    # DNS per connection (docs/engine.md): resolutions, and failures by cause.
    "dns.resolved",
    "dns.not_found",
    "dns.try_again",
    "dns.fail",
    "dns.timeout",
)

#: The status codes counted one by one (C: NHB_STATUS_MIN..NHB_STATUS_MAX), each as
#: ``benchmark.http_<code>``, listed only when non-zero (any other status is
#: ``benchmark.http_xxx``).
STATUS_CODE_RANGE = range(100, 600)


def status_code_counter(code: int) -> str:
    """The per-status-code counter of `code`: ``benchmark.http_503``."""
    return f"benchmark.http_{code}"


def status_counter_code(name: str) -> int | None:
    """The status code a per-status-code counter name counts, or None when `name` is not one.

    Exactly three digits within `STATUS_CODE_RANGE`, as the C core's name lookup, so that a
    typo (``benchmark.http_0200``, ``benchmark.http_2``) is refused rather than read as 0.
    """
    prefix = "benchmark.http_"
    digits = name[len(prefix):]
    if not name.startswith(prefix) or len(digits) != 3 or not digits.isascii():
        return None
    if not digits.isdigit():
        return None
    code = int(digits)
    return code if code in STATUS_CODE_RANGE else None


#: The grpc-status codes counted one by one in gRPC runs (C:
#: NHB_GRPC_STATUS_COUNT), each as ``benchmark.grpc_status_<code>``, listed only when non-zero.
GRPC_STATUS_RANGE = range(0, 17)
_GRPC_STATUS_PREFIX = "benchmark.grpc_status_"


def grpc_status_counter_code(name: str) -> int | None:
    """The grpc-status a ``benchmark.grpc_status_<code>`` counter counts, or None when `name`
    is not one (written as the core writes it: 0..16, no leading zero)."""
    digits = name[len(_GRPC_STATUS_PREFIX):]
    if not name.startswith(_GRPC_STATUS_PREFIX) or not digits.isascii() or not digits.isdigit():
        return None
    if len(digits) > 1 and digits[0] == "0":
        return None
    code = int(digits)
    return code if code in GRPC_STATUS_RANGE else None


def is_counter(name: str) -> bool:
    """Whether `name` is a counter the C core reports: one of `COUNTERS`, a per-status-code
    counter or a gRPC status counter."""
    return (name in COUNTERS or status_counter_code(name) is not None
            or grpc_status_counter_code(name) is not None
            or _CHECK_COUNTER.fullmatch(name) is not None)


#: The per-check counters of --check (docs/checks.md): ``check.NAME.pass``/``.fail``.
_CHECK_COUNTER = re.compile(r"check\.[A-Za-z0-9_-]{1,64}\.(?:pass|fail)")


# What the counters added with TLS and HTTP/2 mean (the others are in docs/engine.md).
COUNTER_DESCRIPTIONS: dict[str, str] = {
    "upstream_cx_http2_total": "HTTP/2 connections opened",
    "upstream_cx_http3_total": "HTTP/3 (QUIC) connections opened",
    "upstream_cx_close_notify": "connections the server announced it would close "
    "(HTTP/1.1 'Connection: close', HTTP/2 GOAWAY)",
    "upstream_rq_retry": "HTTP/2 requests sent again because the server refused their stream "
    "without processing it (GOAWAY above its last stream id, REFUSED_STREAM)",
    "upstream_rq_retry_limit_exceeded": "HTTP/2 requests given up because the server refused "
    "them unprocessed once more after 3 retries",
    "ssl.handshake": "TLS handshakes completed",
    "ssl.connection_error": "TLS handshakes that failed (certificate verification included)",
    "ssl.session_reused": "TLS handshakes that resumed an earlier session",
    "benchmark.origin_latency_header_errors": "responses whose latency response header was "
    "not one non-negative integer (not in origin_latency_statistic)",
    # Echo.
    "benchmark.echo_mismatch": "tcp:// and udp:// requests whose echo differed from the "
    "payload sent",
    "benchmark.udp_lost": "udp:// requests whose echo did not come back within the request "
    "time-out (each is also a benchmark.request_timeout)",
    "benchmark.udp_late": "echoes of lost udp:// requests that came back after all",
    "benchmark.udp_unexpected": "udp:// datagrams that matched no request (short, unknown or "
    "repeated sequence number)",
    "benchmark.check_failed": "2xx responses that failed a --check (each also in "
    "check.NAME.fail; latency in latency_check_failed)",
    "benchmark.grpc_error": "gRPC calls that ended with a non-OK grpc-status (HTTP 200; "
    "each also in benchmark.grpc_status_<code>)",
    "benchmark.grpc_protocol_error": "gRPC calls whose response broke the gRPC protocol: no "
    "grpc-status, one outside 0..16, or a message whose length prefix does not match its DATA",
    "tunnel.established": "CONNECT tunnels the proxy opened (2xx answer)",
    "tunnel.connect_fail": "tunnels whose TCP connection to the proxy failed (refused, "
    "unreachable)",
    "tunnel.non_2xx": "tunnels the proxy refused with a non-2xx answer (403, 407, 502...)",
    "tunnel.proxy_closed": "tunnels whose proxy closed the connection before its answer",
    "tunnel.protocol_error": "tunnels whose proxy answer was malformed or over the limits "
    "(96 KiB of head, 100 interim answers)",
    "tunnel.timeout": "tunnels not up within --timeout (TCP to the proxy or its answer)",
    "tunnel.datagrams_dropped": "CONNECT-UDP: datagrams from the proxy that carried nothing "
    "for the connection (another stream, a context id other than 0, a DATAGRAM capsule, "
    "a full receive ring)",
    "tunnel.tls_fail": "tunnels whose TLS handshake with the proxy failed (--proxy https://: "
    "certificate refused, handshake broken, no h2 by ALPN for --proxy-protocol http2)",
    "dns.resolved": "new connections whose host name resolved (dns_refresh connection)",
    "dns.not_found": "new connections whose host name did not resolve: no such name, or no "
    "address of address_family (each also an upstream_cx_connect_fail)",
    "dns.try_again": "new connections whose resolver could not answer now: server failure, "
    "no server reachable (each also an upstream_cx_connect_fail)",
    "dns.fail": "new connections whose resolution failed otherwise (each also an "
    "upstream_cx_connect_fail)",
    "dns.timeout": "new connections whose host name did not resolve within --timeout (each "
    "also an upstream_cx_connect_timeout)",
    "tunnel.reset": "HTTP/2 CONNECT streams the proxy reset (RST_STREAM) or ended with its "
    "connection (GOAWAY with an error or below the stream), before or after the tunnel was up",
}

#: The counter of requests that succeeded: a complete response with a 2xx status. It is what
#: the achieved rate counts, and a run in which it stays 0 is a failed run (exit 1) unless
#: --allow-no-success.
SUCCESS_COUNTER = "benchmark.http_2xx"

#: Counted by the client once it gives up re-sending a request the server keeps refusing.
RETRY_LIMIT_EXCEEDED = "upstream_rq_retry_limit_exceeded"

#: THE definition of an error, used by every report (human output, the live progress line,
#: the sweep's step line, stop rules and error rate, report.txt/csv/html): a request that was
#: sent (released) and ended in anything but a 2xx response. Each released request ends in
#: exactly one counter (docs/engine.md), so the sum of these is the error count and
#: ``2xx + errors`` is every request that finished. Not in it: requests dropped before they
#: were sent (``benchmark.pool_overflow``, reported as dropped/blocked), requests cancelled by
#: the end of the run (``upstream_rq_cancelled``) and connection-level counters (below), whose
#: requests are already counted here. `RETRY_LIMIT_EXCEEDED` may be absent from a core that
#: predates it; every sum reads counters with a default of 0.
ERROR_COUNTERS: tuple[str, ...] = (
    "benchmark.http_1xx",
    "benchmark.http_3xx",
    "benchmark.http_4xx",
    "benchmark.http_5xx",
    "benchmark.http_xxx",
    "benchmark.pool_connection_failure",
    "benchmark.stream_resets",
    "benchmark.request_timeout",
    RETRY_LIMIT_EXCEEDED,
    "benchmark.echo_mismatch",  # a tcp:// or udp:// echo that came back wrong
    # A failed gRPC call comes with HTTP 200 and ends here instead (never 0 but
    # in gRPC runs).
    "benchmark.grpc_error",
    "benchmark.grpc_protocol_error",
    # A 2xx response that failed a --check ends here instead (docs/checks.md).
    "benchmark.check_failed",
)

#: Connection-level counters shown next to the errors but never added to them: the requests
#: they affected are already counted in `ERROR_COUNTERS` (or, for a protocol error after a
#: complete response, in the response's status class).
CONNECTION_ERROR_COUNTERS: tuple[str, ...] = (
    "upstream_cx_connect_fail",
    "upstream_cx_connect_timeout",
    "upstream_cx_protocol_error",
    "ssl.connection_error",
    "tunnel.connect_fail",
    "tunnel.non_2xx",
    "tunnel.proxy_closed",
    "tunnel.protocol_error",
    "tunnel.timeout",
    "tunnel.tls_fail",
    "tunnel.reset",
    "dns.not_found",
    "dns.try_again",
    "dns.fail",
    "dns.timeout",
)

#: How the human report and the one-line verdict name each error: (singular, plural).
ERROR_NAMES: dict[str, tuple[str, str]] = {
    "benchmark.http_1xx": ("1xx response", "1xx responses"),
    "benchmark.http_3xx": ("3xx response", "3xx responses"),
    "benchmark.http_4xx": ("4xx response", "4xx responses"),
    "benchmark.http_5xx": ("5xx response", "5xx responses"),
    "benchmark.http_xxx": ("response with an invalid status", "responses with an invalid status"),
    "benchmark.pool_connection_failure": ("connection failure", "connection failures"),
    "benchmark.stream_resets": ("reset", "resets"),
    "benchmark.request_timeout": ("request time-out", "request time-outs"),
    RETRY_LIMIT_EXCEEDED: ("request given up after the retry limit",
                           "requests given up after the retry limit"),
    "benchmark.echo_mismatch": ("mismatched echo", "mismatched echoes"),
    "benchmark.grpc_error": ("gRPC error status", "gRPC error statuses"),
    "benchmark.grpc_protocol_error": ("gRPC protocol error", "gRPC protocol errors"),
    "benchmark.check_failed": ("failed check", "failed checks"),
}

_RESPONSE_COUNTERS = tuple(
    f"benchmark.http_{c}" for c in ("1xx", "2xx", "3xx", "4xx", "5xx", "xxx")
)


def _count(counters: Mapping[str, int], name: str) -> int:
    # Counters may be a plain dict from an older core or a JSON file: absent means 0.
    try:
        return int(counters.get(name, 0) or 0)
    except (KeyError, TypeError, ValueError):
        return 0


def error_total(counters: Mapping[str, int]) -> int:
    """The number of errors: the sum of `ERROR_COUNTERS` (absent ones count 0)."""
    return sum(_count(counters, name) for name in ERROR_COUNTERS)


def error_rate(counters: Mapping[str, int]) -> float:
    """Errors over finished requests (2xx responses + errors), 0..1; 0 when none finished.
    The error rate every report and SLO rule uses (``error_rate<0.1%``)."""
    errors = error_total(counters)
    finished = _count(counters, SUCCESS_COUNTER) + errors
    return errors / finished if finished else 0.0


def error_counters(counters: Mapping[str, int]) -> dict[str, int]:
    """The non-zero `ERROR_COUNTERS` and, for the record, the non-zero
    `CONNECTION_ERROR_COUNTERS` behind them: what a sweep step keeps as its ``errors``.
    `error_total` of it is the error count, since it leaves the connection counters out."""
    return {
        name: _count(counters, name)
        for name in (*ERROR_COUNTERS, *CONNECTION_ERROR_COUNTERS)
        if _count(counters, name)
    }


def blocked_total(counters: Mapping[str, int], blocking_samples: int) -> int:
    """Blocked releases (the samples of the ``sequencer.blocking`` statistic: a release that
    found no free connection and waited) plus requests dropped before they were sent
    (``benchmark.pool_overflow``): what a sweep's "blocked" and the ``blocked`` rule count."""
    return int(blocking_samples) + _count(counters, "benchmark.pool_overflow")


def response_total(counters: Mapping[str, int]) -> int:
    """Complete responses of any status."""
    return sum(_count(counters, name) for name in _RESPONSE_COUNTERS)


def describe_errors(counters: Mapping[str, int]) -> str:
    """``"19 request time-outs, 2 5xx responses"``: the non-zero errors by kind, largest
    first ("" when there are none)."""
    parts = [(_count(counters, name), name) for name in ERROR_COUNTERS]
    parts = sorted((p for p in parts if p[0]), key=lambda p: -p[0])
    return ", ".join(
        f"{value} {ERROR_NAMES[name][0 if value == 1 else 1]}" for value, name in parts
    )


def no_success_reason(counters: Mapping[str, int]) -> str | None:
    """None when a request succeeded (a 2xx), else one line saying why none did, e.g.
    ``"no request succeeded: 100 request time-outs (0 responses)"``."""
    if _count(counters, SUCCESS_COUNTER):
        return None
    responses = response_total(counters)
    what = describe_errors(counters)
    dropped = _count(counters, "benchmark.pool_overflow")
    if not what:
        what = "no request was sent" if not _count(counters, "upstream_rq_total") else (
            "no request finished")
    if dropped:
        what += f", {dropped} dropped before sending (benchmark.pool_overflow)"
    return f"no request succeeded: {what} ({responses} response{'s' if responses != 1 else ''})"


# The test server's statistics: the keys of TestServer.stats() and of the admin endpoint's
# /stats JSON, in the order docs/server.md lists them ("status" maps codes to counts). The C
# core generates both from NHB_SERVER_STAT_MAP (csrc/nhb.h) and exports the list as
# _core.SERVER_STATS; this copy works without the extension, and a test checks it equal.
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
    "tls_clients_verified",
    "tls_clients_refused",
    "h2_streams_reset",
    "h2_protocol_errors",
    "connections_refused",
    "grpc_calls",
    "grpc_errors",
    "error_bodies",
    "proxy_connections",
    "proxy_connections_active",
    "proxy_connect_errors",
    "proxy_bytes_up",
    "proxy_bytes_down",
    "redirects",
    "fanout_connections",
    "fanout_requests",
    "fanout_upstream_requests",
    "fanout_upstream_errors",
    "connections_http3",
    "h3_streams_reset",
    "h3_protocol_errors",
    "quic_packets_dropped",
    "quic_connections_beside",
    "stream_events",
    "event_streams_active",
)

# What each statistic means; docs/server.md has the same table. A response counts when its
# last byte is handed to the socket (or to TLS), never when it is merely decided.
SERVER_STAT_DESCRIPTIONS: dict[str, str] = {
    "requests": "responses written (every status, refusals included); a response still "
    "waiting for a delay, or dropped because the client left or reset the stream, is not "
    "counted; the admin endpoint's own are never counted",
    "connections_total": "HTTP connections accepted (not those refused at accept)",
    "connections_active": "HTTP connections open now",
    "rx_bytes": "bytes read from HTTP connections",
    "tx_bytes": "bytes written to HTTP connections (handed to the socket, TLS records "
    "included)",
    "bad_requests": "responses written that refused a request as malformed (400), too "
    "large (431, 413) or in a protocol not spoken (505); a subset of requests",
    "status": "responses written, by status code; they add up to requests",
    "stalls": "stall windows begun (periodic and per request)",
    "tcp_echo_bytes": "bytes echoed by the TCP echo listeners",
    "udp_echo_packets": "datagrams echoed by the UDP echo listeners",
    "connections_http1": "connections that spoke HTTP/1.x only",
    "connections_http2": "connections that spoke HTTP/2 (h2 by ALPN, h2c by preface or "
    "Upgrade: h2c)",
    "tls_handshakes": "TLS handshakes completed",
    "tls_handshake_errors": "TLS connections that ended before their handshake completed",
    "tls_session_reused": "TLS handshakes that resumed an earlier session",
    "tls_clients_verified": "TLS handshakes completed with a client certificate verified "
    "against --tls-client-ca (a resumed session counts: it was verified when made)",
    "tls_clients_refused": "TLS handshakes that failed because the client sent no "
    "certificate or one --tls-client-ca does not vouch for (wrong CA, expired); a subset of "
    "tls_handshake_errors",
    "h2_streams_reset": "HTTP/2 streams reset before their response was sent",
    "h2_protocol_errors": "HTTP/2 connections ended because the client broke the protocol "
    "(GOAWAY with an error: a bad frame, a flood, a header block over the limit)",
    "connections_refused": "connections closed as soon as accepted: over max_connections, "
    "or the process out of file descriptors",
    "grpc_calls": "gRPC calls answered (HTTP/2 POSTs with content-type application/grpc), "
    "every grpc-status; a subset of requests (status 200)",
    "error_bodies": "200 error bodies sent for --error-body-every (a subset of requests)",
    "grpc_errors": "gRPC calls answered with a grpc-status other than OK (0); a subset of "
    "grpc_calls",
    "proxy_connections": "connections accepted by the TCP proxies (not those refused at "
    "accept)",
    "proxy_connections_active": "TCP proxy connections open now",
    "proxy_connect_errors": "TCP proxy connections closed because their destination refused "
    "or did not answer the connect within 10 s",
    "proxy_bytes_up": "bytes the TCP proxies forwarded from their clients to the destinations",
    "proxy_bytes_down": "bytes the TCP proxies forwarded from the destinations to their "
    "clients",
    "redirects": "responses written by the https redirectors (their 400s to malformed "
    "requests included); not in requests or status",
    "fanout_connections": "connections accepted by the HTTP fan-outs",
    "fanout_requests": "requests the HTTP fan-outs answered with their targets' combined "
    "response; not in requests or status",
    "fanout_upstream_requests": "requests the HTTP fan-outs sent to their targets (a resend "
    "on a new connection after a kept-alive one closed counts again)",
    "fanout_upstream_errors": "fan-out requests to a target that failed: refused, reset, "
    "closed early, a malformed or oversized response, or no answer within 3 s",
    "connections_http3": "QUIC connections begun (HTTP/3, --http3), counted from the "
    "client's first Initial packet; also in connections_total",
    "h3_streams_reset": "HTTP/3 request streams that ended before the client had the "
    "whole response (reset by the client, or by the server after a failure)",
    "h3_protocol_errors": "QUIC connections ended for a protocol or handshake error (the "
    "server sent CONNECTION_CLOSE with an error)",
    "quic_packets_dropped": "datagrams on the HTTP/3 ports that were dropped: not a QUIC "
    "packet, for no connection and not a client Initial, undecryptable, or refused over "
    "max_connections",
    "quic_connections_beside": "QUIC connections begun beside another from the same client "
    "address: an Initial naming a new connection ID, from a port whose earlier socket went "
    "away without CONNECTION_CLOSE or with a forged address; also in connections_http3",
    "stream_events": "events of --stream-events written, every protocol (HTTP/1.1: handed "
    "to the socket; HTTP/2 and HTTP/3: taken whole into a DATA frame); not in requests",
    "event_streams_active": "--stream-events streams in progress now: begun and not yet "
    "ended, reset or dropped with their connection (each holds its schedule until then)",
}
