"""An HTTP/3 server on aioquic (PyPI), the independent peer of nhbench's HTTP/3 client.

Run as a script (tests/test_h3.py starts it as a subprocess)::

    python h3_server.py --cert CERT --key KEY [--port 0] [--size N]

It prints ``port N`` on stdout once it listens on 127.0.0.1, answers every request with
``--size`` bytes of body and status 200, with status NNN for a path ``/status/NNN`` (its digits as given), after MS
milliseconds for a path ``/delay/MS``, with a Server-Sent Events stream of N events
(``content-type: text/event-stream``, each event in its own DATA frame, every MS milliseconds
starting MS after the request) for a path ``/sse/N/MS``, with N extra fields of SIZE-byte values in its header
block for a path ``/fields/N/SIZE`` (or in trailers for ``/trailers/N/SIZE``); on SIGTERM or
SIGINT it prints one JSON line of what it counted and exits: ``requests`` (complete requests
answered), ``methods`` (per method), ``body_bytes`` (request body bytes received),
``connections`` (QUIC connections that completed
the handshake), ``client_certificates`` (connections by the subject of the client
certificate presented; ``--request-client-cert`` asks for one), ``max_pending`` (the
most requests one connection had waiting for their answer at once: the streams a client
multiplexed on it), ``ignored`` (requests above a GOAWAY, left unanswered), and with
``--record-traces`` ``traces``: per request, its trace fields (traceparent, x-b3-*) as received.

Going away: ``--goaway-after N`` sends GOAWAY on each connection once it has answered N
requests (later requests are left unprocessed, as RFC 9114 allows); ``--close-after N`` closes
each connection (CONNECTION_CLOSE, H3_NO_ERROR) once it has answered N requests, whatever is
still in flight on it.

Written from aioquic's documented asyncio API (``aioquic.asyncio.serve``,
``QuicConnectionProtocol``, ``aioquic.h3.connection.H3Connection``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from collections import Counter
from typing import Any

from aioquic.asyncio import QuicConnectionProtocol, serve
from aioquic.buffer import encode_uint_var
from aioquic.h3.connection import H3_ALPN, FrameType, H3Connection, encode_frame
from aioquic.h3.events import DataReceived, H3Event, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import HandshakeCompleted, QuicEvent

STATS: dict[str, Any] = {"requests": 0, "methods": Counter(), "body_bytes": 0, "connections": 0,
                         "max_pending": 0, "ignored": 0, "client_certificates": Counter(),
                         "traces": []}
TRACE_FIELDS = (b"traceparent", b"x-b3-traceid", b"x-b3-spanid", b"x-b3-sampled")


class Handler(QuicConnectionProtocol):
    """One QUIC connection: HTTP/3 requests in, fixed responses out."""

    body = b""
    record_traces = False
    goaway_after = 0
    close_after = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._http: H3Connection | None = None
        self._requests: dict[int, dict[str, Any]] = {}
        self._pending = 0
        self._answered = 0
        self._goaway_id: int | None = None
        self._closing = False

    def quic_event_received(self, event: QuicEvent) -> None:
        if isinstance(event, HandshakeCompleted):
            STATS["connections"] += 1
            peer = getattr(self._quic.tls, "_peer_certificate", None)
            if peer is not None:
                STATS["client_certificates"][peer.subject.rfc4514_string()] += 1
            self._http = H3Connection(self._quic)
        if self._http is None:
            return
        for http_event in self._http.handle_event(event):
            self._http_event(http_event)

    def _http_event(self, event: H3Event) -> None:
        assert self._http is not None
        if isinstance(event, HeadersReceived):
            headers = dict(event.headers)
            self._requests[event.stream_id] = {
                "method": headers.get(b":method", b"").decode(),
                "path": headers.get(b":path", b"/").decode(),
            }
            if self.record_traces:
                STATS["traces"].append({n.decode(): v.decode() for n, v in event.headers
                                        if n in TRACE_FIELDS})
            if event.stream_ended:
                self._answer(event.stream_id)
        elif isinstance(event, DataReceived):
            STATS["body_bytes"] += len(event.data)
            if event.stream_ended and event.stream_id in self._requests:
                self._answer(event.stream_id)

    def _answer(self, stream_id: int) -> None:
        request = self._requests.pop(stream_id)
        if self._goaway_id is not None and stream_id >= self._goaway_id:
            STATS["ignored"] += 1
            return
        path = request["path"]
        if path.startswith("/sse/"):
            self._stream_events(stream_id, request)
            return
        if path.startswith("/delay/"):
            self._pending += 1
            STATS["max_pending"] = max(STATS["max_pending"], self._pending)
            asyncio.get_running_loop().call_later(
                int(path.split("/")[2]) / 1000, self._respond, stream_id, request, True)
            return
        self._respond(stream_id, request, False)

    def _respond(self, stream_id: int, request: dict[str, Any], delayed: bool) -> None:
        assert self._http is not None
        if delayed:
            self._pending -= 1
        if self._closing:
            return
        status = b"200"
        path = request["path"]
        if path.startswith("/status/"):
            # The digits as given: /status/050 sends "050", a status under 100.
            status = path.split("/")[2].encode()
        extra: list[tuple[bytes, bytes]] = []
        if path.startswith(("/fields/", "/trailers/")):
            _, kind, count, size = path.split("/")
            extra = [(b"x-f%d" % i, b"v" * int(size)) for i in range(int(count))]
        try:
            self._http.send_headers(stream_id, [
                (b":status", status),
                (b"server", b"aioquic-test"),
                (b"content-length", str(len(self.body)).encode()),
                *(extra if path.startswith("/fields/") else []),
            ])
            trailers = path.startswith("/trailers/")
            self._http.send_data(stream_id, self.body, end_stream=not trailers)
            if trailers:
                self._http.send_headers(stream_id, extra, end_stream=True)
        except Exception:  # noqa: BLE001 - the client reset the stream or closed meanwhile
            return
        # Counted once the answer is handed to QUIC: what the client can have received.
        STATS["requests"] += 1
        STATS["methods"][request["method"]] += 1
        self._answered += 1
        if self.goaway_after and self._answered == self.goaway_after:
            # aioquic's H3Connection has no GOAWAY of its own: the frame goes on its control
            # stream. Streams from the next client stream on will not be processed.
            self._goaway_id = stream_id + 4
            control = self._http._local_control_stream_id  # noqa: SLF001
            assert control is not None
            self._quic.send_stream_data(
                control, encode_frame(FrameType.GOAWAY, encode_uint_var(self._goaway_id)))
        self.transmit()
        if self.close_after and self._answered == self.close_after:
            # The answers sent go out first; nothing more is answered; the close follows
            # shortly, while later requests are still waiting.
            self._closing = True
            asyncio.get_running_loop().call_later(0.02, self._close)

    def _stream_events(self, stream_id: int, request: dict[str, Any]) -> None:
        assert self._http is not None
        _, _, count, gap_ms = request["path"].split("/")
        n, gap = int(count), int(gap_ms) / 1000
        self._http.send_headers(stream_id, [(b":status", b"200"),
                                            (b"content-type", b"text/event-stream")])
        self.transmit()
        loop = asyncio.get_running_loop()
        start = loop.time()

        def event(k: int) -> None:
            assert self._http is not None
            if self._closing:
                return
            try:
                self._http.send_data(stream_id, b"data: token %d\n\n" % k, end_stream=k == n)
            except Exception:  # noqa: BLE001 - the client reset the stream or closed meanwhile
                return
            self.transmit()
            if k == n:
                STATS["requests"] += 1
                STATS["methods"][request["method"]] += 1

        # Each event at its own time from the start, so that late wake-ups do not add up.
        for k in range(1, n + 1):
            loop.call_at(start + k * gap, event, k)

    def _close(self) -> None:
        self._quic.close(error_code=0x100, reason_phrase="close-after")
        self.transmit()


def _request_client_certificates() -> None:
    """Make every server handshake send a CertificateRequest. aioquic has this only as a
    test switch of its TLS context (``_request_client_certificate``); its server then
    checks the client's CertificateVerify signature (possession of the key) but not the
    chain. The certificate's subject is counted per connection."""
    import aioquic.tls

    init = aioquic.tls.Context.__init__

    def requesting(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        if not self._is_client:
            self._request_client_certificate = True

    aioquic.tls.Context.__init__ = requesting  # type: ignore[method-assign]


async def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--size", type=int, default=10)
    parser.add_argument("--goaway-after", type=int, default=0)
    parser.add_argument("--close-after", type=int, default=0)
    parser.add_argument("--request-client-cert", action="store_true")
    parser.add_argument("--record-traces", action="store_true")
    args = parser.parse_args(argv)
    if args.request_client_cert:
        _request_client_certificates()
    Handler.body = b"x" * args.size
    Handler.goaway_after = args.goaway_after
    Handler.close_after = args.close_after
    Handler.record_traces = args.record_traces
    config = QuicConfiguration(is_client=False, alpn_protocols=H3_ALPN,
                               max_datagram_frame_size=None)
    config.load_cert_chain(args.cert, args.key)
    config.max_stream_data = 1 << 20
    server = await serve("127.0.0.1", args.port, configuration=config,
                         create_protocol=Handler)
    port = server._transport.get_extra_info("sockname")[1]  # noqa: SLF001 - aioquic has no getter
    print(f"port {port}", flush=True)
    done = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, done.set)
    await done.wait()
    server.close()
    print(json.dumps({**STATS, "methods": dict(STATS["methods"]),
                      "client_certificates": dict(STATS["client_certificates"])}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
