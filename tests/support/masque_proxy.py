"""A CONNECT-UDP proxy (RFC 9298) over HTTP/3 on aioquic, which also takes a classic CONNECT
(RFC 9114 section 4.4: a TCP tunnel on a request stream): our stand-in, because no packaged
HTTP/3 proxy of either kind exists here (Debian's squid, tinyproxy, nginx and nghttpx speak
CONNECT over TCP only).

A classic CONNECT (``:method CONNECT`` without ``:protocol``) gets 200 and a TCP connection
to its ``:authority``; the stream's DATA goes to it, its bytes come back as DATA, and its
end (FIN) ends the stream (tests/test_proxy_tunnel_h3.py).

Run as a script (`masque_proxy()` below starts it as a subprocess for tests/test_proxy_udp.py
and tests/hostile/test_proxy_udp_attacks.py)::

    python masque_proxy.py --cert CERT --key KEY --log FILE [--mode MODE] [--close-after S]

It prints ``port N`` once it listens on 127.0.0.1 (UDP, an ephemeral port), then serves
until killed. Each extended CONNECT (``:protocol connect-udp``) is logged as one JSON line
in ``--log`` (its method, protocol, scheme, authority, path, capsule-protocol and the
status answered). A CONNECT whose path is ``/.well-known/masque/udp/{host}/{port}/`` gets
200 and a UDP socket to that target: every HTTP Datagram with context id 0 on the stream
goes to the target, every datagram from the target comes back as one (quarter stream id,
context id 0, payload). SETTINGS: aioquic's ``enable_webtransport`` sends H3_DATAGRAM = 1
next to its ENABLE_CONNECT_PROTOCOL = 1.

``--mode`` makes it misbehave (tests/hostile/test_proxy_udp_attacks.py):

- ``ok``: as above. ``refuse``: 403 to every CONNECT (stream ended).
- ``no-datagrams``: no SETTINGS_H3_DATAGRAM (plain H3Connection).
- ``unknown-stream``, ``context``: each relayed datagram is sent a second time, once with
  the quarter stream id of a stream that does not exist (1) or with context id 1.
- ``garbage``: each relayed datagram is followed by random bytes with the right prefix,
  a 1-byte datagram (a quarter stream id and nothing more) and a 2-byte one (no payload).
- ``oversize``: each relayed datagram is followed by one of 1700 payload bytes, over the
  DATAGRAM frame size the client announced.
- ``capsules``: after its 200, DATA frames on the CONNECT stream with unknown capsules and
  a DATAGRAM capsule.
- ``frame-unexpected``: a SETTINGS frame on the CONNECT stream instead of an answer.
- ``bad-headers``: a HEADERS frame whose field section is not QPACK.
- ``truncated-capsule``: after its 200, half a capsule, then the stream's end.

For a classic CONNECT, besides ``refuse``, ``frame-unexpected`` and ``bad-headers``:

- ``reset``: the stream reset (H3_CONNECT_ERROR) instead of an answer.
- ``silent``: no answer at all (the client's --timeout).
- ``end-with-answer``: 200 that ends the stream.
- ``data-first``: a DATA frame before the answer.
- ``garbage-data``: after its 200, a DATA frame of random bytes before the origin's.

``--close-after S`` closes each QUIC connection S seconds after its CONNECT (a proxy that
goes away mid-run).

Written from aioquic's documented API (``aioquic.asyncio.serve``, ``H3Connection``,
``send_datagram``, ``DatagramReceived``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from aioquic.asyncio import QuicConnectionProtocol, serve
from aioquic.buffer import encode_uint_var
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DatagramReceived, DataReceived, H3Event, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import ConnectionTerminated, QuicEvent

PREFIX = "/.well-known/masque/udp/"


# ---- the launcher (for the tests) ---------------------------------------------------------


@dataclass
class MasqueProxy:
    port: int
    log_path: str
    #: the CA (its own self-signed certificate, for 127.0.0.1 and localhost) to trust it with
    ca_cert: str

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def closes(self) -> list[int]:
        """The error code of every QUIC connection the client closed (CONNECTION_CLOSE), in
        order (``--log`` + ``.closed``, one a line)."""
        path = self.log_path + ".closed"
        if not os.path.exists(path):
            return []
        with open(path, encoding="utf-8") as f:
            return [int(line) for line in f if line.strip()]

    def connects(self) -> list[dict[str, Any]]:
        """Every CONNECT it received, in order (the JSON lines of its log)."""
        if not os.path.exists(self.log_path):
            return []
        with open(self.log_path, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]


@contextmanager
def masque_proxy(*, mode: str = "ok", close_after: float = 0.0) -> Iterator[MasqueProxy]:
    """This file as a script, in a subprocess, with a fresh self-signed certificate."""
    import pytest

    from .peers import peer_env

    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("the openssl command is not installed")
    with tempfile.TemporaryDirectory(prefix="nhb-masque-") as tmp:
        cert, key, log = (os.path.join(tmp, n) for n in ("cert.pem", "key.pem", "log.jsonl"))
        subprocess.run(
            [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt",
             "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj", "/CN=localhost",
             "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost", "-keyout", key,
             "-out", cert], check=True, capture_output=True, timeout=60, env=peer_env())
        errors = os.path.join(tmp, "stderr.txt")
        with open(errors, "w", encoding="utf-8") as err:
            proc = subprocess.Popen(
                [sys.executable, __file__, "--cert", cert, "--key", key, "--log", log,
                 "--mode", mode, "--close-after", str(close_after)],
                stdout=subprocess.PIPE, stderr=err, text=True, env=peer_env())
        assert proc.stdout is not None
        try:
            ready, _, _ = select.select([proc.stdout], [], [], 30)
            line = proc.stdout.readline() if ready else ""
            if not line.startswith("port "):
                with open(errors, encoding="utf-8") as f:
                    raise RuntimeError(f"the CONNECT-UDP proxy did not start: {line!r} "
                                       f"{f.read()[-2000:]}")
            yield MasqueProxy(int(line.split()[1]), log, cert)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
            proc.stdout.close()


# ---- the proxy -----------------------------------------------------------------------------


def frame(kind: int, payload: bytes) -> bytes:
    return encode_uint_var(kind) + encode_uint_var(len(payload)) + payload


class Relay(asyncio.DatagramProtocol):
    """The UDP socket to one tunnel's target."""

    def __init__(self, proxy: Proxy, stream_id: int) -> None:
        self.proxy, self.stream_id = proxy, stream_id
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: Any) -> None:
        self.proxy.to_client(self.stream_id, data)


class Proxy(QuicConnectionProtocol):
    mode = "ok"
    close_after = 0.0
    log_path = ""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._http = H3Connection(self._quic, enable_webtransport=self.mode != "no-datagrams")
        self._relays: dict[int, Relay] = {}
        #: classic CONNECT: each stream's TCP connection to its origin
        self._writers: dict[int, asyncio.StreamWriter] = {}
        self._early: dict[int, list[bytes]] = {}

    def quic_event_received(self, event: QuicEvent) -> None:
        if isinstance(event, ConnectionTerminated):
            if event.reason_phrase != "Idle timeout":
                with open(self.log_path + ".closed", "a", encoding="utf-8") as log:
                    log.write(f"{event.error_code}\n")
            for relay in self._relays.values():
                if relay.transport is not None:
                    relay.transport.close()
            self._relays.clear()
            for writer in self._writers.values():
                writer.close()
            self._writers.clear()
            return
        for h3_event in self._http.handle_event(event):
            self._h3_event(h3_event)

    def _h3_event(self, event: H3Event) -> None:
        if isinstance(event, HeadersReceived):
            asyncio.ensure_future(self._connect(event))
        elif isinstance(event, DataReceived):
            writer = self._writers.get(event.stream_id)
            if writer is None:
                # Bytes before the origin's connection is up wait for it.
                self._early.setdefault(event.stream_id, []).append(event.data)
            elif event.data:
                writer.write(event.data)
            if event.stream_ended and writer is not None and writer.can_write_eof():
                writer.write_eof()
        elif isinstance(event, DatagramReceived):
            relay = self._relays.get(event.stream_id)
            data = event.data
            if relay is None or relay.transport is None or not data or data[0] != 0:
                return
            relay.transport.sendto(data[1:])

    def _log(self, entry: dict[str, Any]) -> None:
        with open(self.log_path, "a", encoding="utf-8") as log:
            log.write(json.dumps(entry) + "\n")

    def _answer(self, stream_id: int, status: int, end: bool) -> None:
        self._http.send_headers(stream_id, [(b":status", str(status).encode()),
                                            (b"capsule-protocol", b"?1")], end_stream=end)
        self.transmit()

    async def _connect(self, event: HeadersReceived) -> None:
        fields = {name.decode(): value.decode() for name, value in event.headers}
        sid = event.stream_id
        entry = {k: fields.get(k) for k in (":method", ":protocol", ":scheme", ":authority",
                                            ":path", "capsule-protocol",
                                            "proxy-authorization")}
        path = fields.get(":path", "")
        if fields.get(":method") == "CONNECT" and ":protocol" not in fields:
            await self._connect_tcp(sid, fields, entry)
            return
        ok = (fields.get(":method") == "CONNECT" and fields.get(":protocol") == "connect-udp"
              and path.startswith(PREFIX) and path.endswith("/"))
        status = 200 if ok and self.mode != "refuse" else (403 if ok else 400)
        entry["status"] = status
        self._log(entry)
        if self.mode == "frame-unexpected":
            self._quic.send_stream_data(sid, frame(0x04, b""), end_stream=False)
            self.transmit()
            return
        if self.mode == "bad-headers":
            self._quic.send_stream_data(sid, frame(0x01, b"\xff\xff\xff\xff"), end_stream=False)
            self.transmit()
            return
        if status != 200:
            self._answer(sid, status, True)
            return
        host, port = path[len(PREFIX):-1].split("/")
        loop = asyncio.get_running_loop()
        _, relay = await loop.create_datagram_endpoint(
            lambda: Relay(self, sid), remote_addr=(unquote(host), int(port)))
        self._relays[sid] = relay
        self._answer(sid, 200, False)
        if self.mode == "capsules":
            capsules = (frame(0x2a, b"unknown capsule") + frame(0x00, b"\x00not-for-you")
                        + frame(0x17, os.urandom(40)))
            self._quic.send_stream_data(sid, frame(0x00, capsules), end_stream=False)
            self.transmit()
        if self.mode == "truncated-capsule":
            self._quic.send_stream_data(sid, frame(0x00, b"\x2a\x40"), end_stream=True)
            self.transmit()
        if self.close_after > 0:
            loop.call_later(self.close_after, self._close)

    async def _connect_tcp(self, sid: int, fields: dict[str, str],
                           entry: dict[str, Any]) -> None:
        """A classic CONNECT: a TCP tunnel to :authority on this stream."""
        authority = fields.get(":authority", "")
        host, _, port = authority.rpartition(":")
        ok = (":scheme" not in fields and ":path" not in fields and port.isdigit()
              and self.mode != "refuse")
        status = 200 if ok else (403 if self.mode == "refuse" else 400)
        entry["status"] = status
        self._log(entry)
        if self.mode in ("frame-unexpected", "bad-headers"):
            payload = frame(0x04, b"") if self.mode == "frame-unexpected" else frame(
                0x01, b"\xff\xff\xff\xff")
            self._quic.send_stream_data(sid, payload, end_stream=False)
            self.transmit()
            return
        if self.mode == "reset":
            self._quic.reset_stream(sid, 0x10F)  # H3_CONNECT_ERROR
            self.transmit()
            return
        if self.mode == "silent":
            return
        if self.mode == "data-first":
            self._quic.send_stream_data(sid, frame(0x00, b"too early"), end_stream=False)
            self.transmit()
            return
        if status != 200:
            self._http.send_headers(sid, [(b":status", str(status).encode())], end_stream=True)
            self.transmit()
            return
        try:
            reader, writer = await asyncio.open_connection(host.strip("[]"), int(port))
        except OSError:
            self._http.send_headers(sid, [(b":status", b"502")], end_stream=True)
            self.transmit()
            return
        self._writers[sid] = writer
        for data in self._early.pop(sid, []):
            writer.write(data)
        end = self.mode == "end-with-answer"
        self._http.send_headers(sid, [(b":status", b"200")], end_stream=end)
        if self.mode == "garbage-data":
            self._http.send_data(sid, os.urandom(64), end_stream=False)
        self.transmit()
        if end:
            writer.close()
            return
        if self.close_after > 0:
            asyncio.get_running_loop().call_later(self.close_after, self._close)
        try:
            while True:
                data = await reader.read(65536)
                if sid not in self._writers:
                    break
                self._http.send_data(sid, data, end_stream=not data)
                self.transmit()
                if not data:
                    break
        except (ConnectionError, OSError):
            pass
        finally:
            self._writers.pop(sid, None)
            writer.close()

    def _close(self) -> None:
        self._quic.close(error_code=0x100, reason_phrase="proxy going away")
        self.transmit()

    def to_client(self, stream_id: int, data: bytes) -> None:
        self._http.send_datagram(stream_id, b"\x00" + data)
        quarter = encode_uint_var(stream_id // 4)
        if self.mode == "unknown-stream":
            self._quic.send_datagram_frame(encode_uint_var(stream_id // 4 + 1) + b"\x00" + data)
        elif self.mode == "context":
            self._quic.send_datagram_frame(quarter + b"\x01" + data)
        elif self.mode == "garbage":
            self._quic.send_datagram_frame(quarter + b"\x00" + os.urandom(200))
            self._quic.send_datagram_frame(quarter)
            self._quic.send_datagram_frame(quarter + b"\x00")
        elif self.mode == "oversize":
            self._quic.send_datagram_frame(quarter + b"\x00" + os.urandom(1700))
        self.transmit()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--mode", default="ok")
    parser.add_argument("--close-after", type=float, default=0.0)
    args = parser.parse_args()
    config = QuicConfiguration(is_client=False, alpn_protocols=H3_ALPN,
                               max_datagram_frame_size=65536,
                               # Room for the client's QUIC packets (1200 bytes) inside
                               # DATAGRAM frames, and for the oversize mode's.
                               max_datagram_size=1500 if args.mode != "oversize" else 2000)
    config.load_cert_chain(args.cert, args.key)
    Proxy.mode, Proxy.close_after, Proxy.log_path = args.mode, args.close_after, args.log
    server = await serve("127.0.0.1", 0, configuration=config, create_protocol=Proxy)
    port = server._transport.get_extra_info("sockname")[1]
    print(f"port {port}", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
