"""An HTTP/3 server on aioquic (PyPI), the independent peer of nhbench's HTTP/3 client.

Run as a script (tests/test_h3.py starts it as a subprocess)::

    python h3_server.py --cert CERT --key KEY [--port 0] [--size N]

It prints ``port N`` on stdout once it listens on 127.0.0.1, answers every request with
``--size`` bytes of body and status 200, with status NNN for a path ``/status/NNN``, after MS
milliseconds for a path ``/delay/MS``; on SIGTERM or SIGINT it prints one JSON line of what it
counted and exits: ``requests`` (complete requests answered), ``methods`` (per method),
``body_bytes`` (request body bytes received), ``connections`` (QUIC connections that completed
the handshake), ``max_pending`` (the most requests one connection had waiting for their
answer at once: the streams a client multiplexed on it).

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
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, H3Event, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import HandshakeCompleted, QuicEvent

STATS: dict[str, Any] = {"requests": 0, "methods": Counter(), "body_bytes": 0, "connections": 0,
                         "max_pending": 0}


class Handler(QuicConnectionProtocol):
    """One QUIC connection: HTTP/3 requests in, fixed responses out."""

    body = b""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._http: H3Connection | None = None
        self._requests: dict[int, dict[str, Any]] = {}
        self._pending = 0

    def quic_event_received(self, event: QuicEvent) -> None:
        if isinstance(event, HandshakeCompleted):
            STATS["connections"] += 1
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
            if event.stream_ended:
                self._answer(event.stream_id)
        elif isinstance(event, DataReceived):
            STATS["body_bytes"] += len(event.data)
            if event.stream_ended and event.stream_id in self._requests:
                self._answer(event.stream_id)

    def _answer(self, stream_id: int) -> None:
        request = self._requests.pop(stream_id)
        path = request["path"]
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
        status = 200
        if request["path"].startswith("/status/"):
            status = int(request["path"].split("/")[2])
        try:
            self._http.send_headers(stream_id, [
                (b":status", str(status).encode()),
                (b"server", b"aioquic-test"),
                (b"content-length", str(len(self.body)).encode()),
            ])
            self._http.send_data(stream_id, self.body, end_stream=True)
        except Exception:  # noqa: BLE001 - the client reset the stream or closed meanwhile
            return
        # Counted once the answer is handed to QUIC: what the client can have received.
        STATS["requests"] += 1
        STATS["methods"][request["method"]] += 1
        self.transmit()


async def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--size", type=int, default=10)
    parser.add_argument("--max-streams", type=int, default=128)
    args = parser.parse_args(argv)
    Handler.body = b"x" * args.size
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
    print(json.dumps({**STATS, "methods": dict(STATS["methods"])}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
