"""An HTTP/3 client on aioquic (PyPI), the independent peer of nhbench's HTTP/3 test server.

Run as a script (tests/test_server_h3.py starts it as a subprocess)::

    python h3_client.py --cacert CA [--method GET] [--header 'name: value' ...]
                        [--data TEXT] [--count N] [--cert PEM --key PEM]
                        [--local-port PORT] [--abandon] URL

It makes ``--count`` requests (one after the other, on one QUIC connection) and prints one
JSON line per response: ``status``, ``headers`` (a list of [name, value], in order, pseudo
headers left out), ``body_bytes``, ``body`` (the first 4096 bytes, as text) and ``seconds``
(from the request sent to the response's end). A failure (handshake, time-out, reset) prints
``{"error": "..."}`` and exits 1. ``--cert``/``--key``: the client certificate it presents
when the server asks for one. ``--local-port``: the UDP port to send from. ``--abandon``: exit
after the responses without closing the connection (no CONNECTION_CLOSE), as a client that
crashed or whose close was lost.

Written from aioquic's documented asyncio API (``aioquic.asyncio.connect``,
``QuicConnectionProtocol``, ``aioquic.h3.connection.H3Connection``); aioquic ships no HTTP/3
client that can be run from the installed package (its examples are not in the wheel).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from typing import Any
from urllib.parse import urlsplit

from aioquic.asyncio import QuicConnectionProtocol, connect
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, H3Event, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import QuicEvent, StreamReset


class Client(QuicConnectionProtocol):
    """One QUIC connection; `request()` sends one request and waits for its whole response."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._http = H3Connection(self._quic)
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._responses: dict[int, dict[str, Any]] = {}

    def quic_event_received(self, event: QuicEvent) -> None:
        if isinstance(event, StreamReset) and event.stream_id in self._waiting:
            self._waiting.pop(event.stream_id).set_exception(
                RuntimeError(f"stream reset (error {event.error_code:#x})"))
            return
        for h3_event in self._http.handle_event(event):
            self._h3_event(h3_event)

    def _h3_event(self, event: H3Event) -> None:
        if not isinstance(event, (HeadersReceived, DataReceived)):
            return
        response = self._responses.setdefault(
            event.stream_id, {"status": 0, "headers": [], "body": bytearray()})
        if isinstance(event, HeadersReceived):
            for name, value in event.headers:
                if name == b":status":
                    response["status"] = int(value)
                elif not name.startswith(b":"):
                    response["headers"].append([name.decode(), value.decode()])
        else:
            response["body"] += event.data
        if event.stream_ended and event.stream_id in self._waiting:
            self._waiting.pop(event.stream_id).set_result(self._responses.pop(event.stream_id))

    async def request(self, method: str, url: str, headers: list[tuple[str, str]],
                      data: bytes) -> dict[str, Any]:
        parts = urlsplit(url)
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        stream_id = self._quic.get_next_available_stream_id()
        fields = [(b":method", method.encode()), (b":scheme", b"https"),
                  (b":authority", parts.netloc.encode()), (b":path", path.encode())]
        fields += [(n.lower().encode(), v.encode()) for n, v in headers]
        done: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[stream_id] = done
        self._http.send_headers(stream_id, fields, end_stream=not data)
        if data:
            self._http.send_data(stream_id, data, end_stream=True)
        self.transmit()
        return await done


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--cacert", required=True)
    parser.add_argument("--method", default="GET")
    parser.add_argument("--header", action="append", default=[])
    parser.add_argument("--data", default="")
    parser.add_argument("--count", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=20.0)
    parser.add_argument("--cert")
    parser.add_argument("--key")
    parser.add_argument("--local-port", type=int, default=0)
    parser.add_argument("--abandon", action="store_true")
    args = parser.parse_args(argv)
    headers = [(h.split(":", 1)[0].strip(), h.split(":", 1)[1].strip()) for h in args.header]
    parts = urlsplit(args.url)
    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN)
    config.load_verify_locations(args.cacert)
    if args.cert:
        config.load_cert_chain(args.cert, args.key)
    config.server_name = parts.hostname
    try:
        async with connect(parts.hostname or "127.0.0.1", parts.port or 443,
                           configuration=config, create_protocol=Client,
                           wait_connected=True, local_port=args.local_port) as client:
            assert isinstance(client, Client)
            for _ in range(args.count):
                start = time.monotonic()
                response = await asyncio.wait_for(
                    client.request(args.method, args.url, headers, args.data.encode()),
                    args.timeout)
                body = bytes(response.pop("body"))
                response["body_bytes"] = len(body)
                response["body"] = body[:4096].decode(errors="replace")
                response["seconds"] = time.monotonic() - start
                print(json.dumps(response), flush=True)
            if args.abandon:
                os._exit(0)  # the socket closes with the process: the server is not told
    except Exception as e:  # noqa: BLE001 - one line for the test, whatever failed
        print(json.dumps({"error": f"{type(e).__name__}: {e}"}), flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
