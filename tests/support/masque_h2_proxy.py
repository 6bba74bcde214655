"""A CONNECT-UDP proxy (RFC 9298) over HTTP/2 (extended CONNECT, RFC 8441) on the ``h2``
library: our stand-in, because no packaged CONNECT-UDP-over-HTTP/2 proxy exists here
(Debian's squid, tinyproxy, nginx and nghttpx tunnel TCP only; Envoy is not packaged).

Run as a script (`masque_h2_proxy()` below starts it as a subprocess for
tests/test_proxy_udp_h2.py and tests/hostile/test_proxy_udp_h2_attacks.py)::

    python masque_h2_proxy.py --log FILE [--cert CERT --key KEY] [--mode MODE]

It prints ``port N`` once it listens on 127.0.0.1 (TCP, an ephemeral port), then serves
until killed: TLS with ALPN h2 when given a certificate, h2c with prior knowledge without.
Its SETTINGS offer SETTINGS_ENABLE_CONNECT_PROTOCOL = 1. Each extended CONNECT
(``:protocol connect-udp``) is logged as one JSON line in ``--log`` (its method, protocol,
scheme, authority, path, capsule-protocol, proxy-authorization and the status answered). A
CONNECT whose path is ``/.well-known/masque/udp/{host}/{port}/`` gets 200 and a UDP socket
to that target: the payload of every DATAGRAM capsule (type 0, context id 0) in the
stream's DATA goes to the target, every datagram from the target comes back as one.

``--mode`` makes it misbehave (tests/hostile/test_proxy_udp_h2_attacks.py):

- ``ok``: as above. ``split``: as ``ok``, every capsule sent in three DATA frames (its
  first byte, the next two, the rest), so that capsules straddle frames.
- ``refuse``: 403 to every CONNECT (stream ended).
- ``no-extended-connect``: no SETTINGS_ENABLE_CONNECT_PROTOCOL.
- ``capsules``: after its 200, unknown capsule types, a DATAGRAM capsule with context id
  1, one with no payload, and one with a payload of 5000 bytes (over any QUIC packet).
- ``truncated-capsule``: after its 200, half a capsule, then the stream's end.
- ``reset``: RST_STREAM (CANCEL) on the CONNECT stream after 0.5 s.
- ``goaway``: GOAWAY (PROTOCOL_ERROR) instead of an answer.
- ``data-first``: DATA on the CONNECT stream before any answer (h2 refuses to send that,
  so the frame is written by hand).
- ``http1-alpn``: its TLS selects ALPN http/1.1, not h2.
- ``silent``: accepts the TCP connection (and TLS) and never says a word.

Written from the ``h2`` library's documented API (``H2Connection``, ``RequestReceived``,
``DataReceived``, ``send_headers``, ``send_data``, ``reset_stream``, ``close_connection``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import select
import shutil
import ssl
import struct
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

PREFIX = "/.well-known/masque/udp/"


# ---- the launcher (for the tests) ---------------------------------------------------------


@dataclass
class MasqueH2Proxy:
    port: int
    log_path: str
    #: the CA (its own self-signed certificate, for 127.0.0.1 and localhost), or None (h2c)
    ca_cert: str | None

    @property
    def url(self) -> str:
        scheme = "https" if self.ca_cert is not None else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    def connects(self) -> list[dict[str, Any]]:
        """Every CONNECT it received, in order (the JSON lines of its log)."""
        if not os.path.exists(self.log_path):
            return []
        with open(self.log_path, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]


@contextmanager
def masque_h2_proxy(*, mode: str = "ok", tls: bool = True) -> Iterator[MasqueH2Proxy]:
    """This file as a script, in a subprocess; with TLS, a fresh self-signed certificate."""
    import pytest

    from .peers import peer_env

    try:
        import h2  # noqa: F401
    except ImportError:
        pytest.skip("the h2 library is not installed (the test extra)")
    with tempfile.TemporaryDirectory(prefix="nhb-masque-h2-") as tmp:
        cert, key, log = (os.path.join(tmp, n) for n in ("cert.pem", "key.pem", "log.jsonl"))
        args = [sys.executable, __file__, "--log", log, "--mode", mode]
        if tls:
            openssl = shutil.which("openssl")
            if openssl is None:
                pytest.skip("the openssl command is not installed")
            subprocess.run(
                [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt",
                 "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj",
                 "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                 "-keyout", key, "-out", cert], check=True, capture_output=True, timeout=60,
                env=peer_env())
            args += ["--cert", cert, "--key", key]
        errors = os.path.join(tmp, "stderr.txt")
        with open(errors, "w", encoding="utf-8") as err:
            proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=err, text=True,
                                    env=peer_env())
        assert proc.stdout is not None
        try:
            ready, _, _ = select.select([proc.stdout], [], [], 30)
            line = proc.stdout.readline() if ready else ""
            if not line.startswith("port "):
                with open(errors, encoding="utf-8") as f:
                    raise RuntimeError(f"the CONNECT-UDP proxy did not start: {line!r} "
                                       f"{f.read()[-2000:]}")
            yield MasqueH2Proxy(int(line.split()[1]), log, cert if tls else None)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
            proc.stdout.close()


# ---- capsules -------------------------------------------------------------------------------


def varint(x: int) -> bytes:
    """A QUIC variable-length integer (RFC 9000 section 16)."""
    if x < 0x40:
        return bytes([x])
    if x < 0x4000:
        return struct.pack(">H", 0x4000 | x)
    if x < 0x40000000:
        return struct.pack(">I", 0x80000000 | x)
    return struct.pack(">Q", 0xC000000000000000 | x)


def capsule(kind: int, value: bytes) -> bytes:
    return varint(kind) + varint(len(value)) + value


class CapsuleReader:
    """Capsules from a byte stream in pieces: (type, value) pairs as they complete."""

    def __init__(self) -> None:
        self.buf = b""

    @staticmethod
    def _varint(buf: bytes, at: int) -> tuple[int, int] | None:
        if at >= len(buf):
            return None
        n = 1 << (buf[at] >> 6)
        if at + n > len(buf):
            return None
        x = buf[at] & 0x3F
        for b in buf[at + 1:at + n]:
            x = (x << 8) | b
        return x, at + n

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        self.buf += data
        out = []
        while True:
            t = self._varint(self.buf, 0)
            if t is None:
                break
            ln = self._varint(self.buf, t[1])
            if ln is None or ln[1] + ln[0] > len(self.buf):
                break
            out.append((t[0], self.buf[ln[1]:ln[1] + ln[0]]))
            self.buf = self.buf[ln[1] + ln[0]:]
        return out


# ---- the proxy -------------------------------------------------------------------------------


class Relay(asyncio.DatagramProtocol):
    """The UDP socket to one tunnel's target."""

    def __init__(self, conn: ProxyConnection, stream_id: int) -> None:
        self.conn, self.stream_id = conn, stream_id
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: Any) -> None:
        self.conn.to_client(self.stream_id, data)


class ProxyConnection(asyncio.Protocol):
    mode = "ok"
    log_path = ""

    def __init__(self) -> None:
        import h2.config
        import h2.connection
        import h2.settings

        self.h2 = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
        self.settings = h2.settings.SettingCodes
        self.transport: asyncio.Transport | None = None
        self.relays: dict[int, Relay] = {}
        self.readers: dict[int, CapsuleReader] = {}

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        if self.mode == "silent":
            return
        import h2.settings

        if self.mode != "no-extended-connect":
            # In the connection preface's SETTINGS, where the client looks for it.
            self.h2.local_settings = h2.settings.Settings(
                client=False, initial_values={self.settings.ENABLE_CONNECT_PROTOCOL: 1})
        self.h2.initiate_connection()
        self.flush()

    def flush(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(self.h2.data_to_send())

    def connection_lost(self, exc: Exception | None) -> None:
        for relay in self.relays.values():
            if relay.transport is not None:
                relay.transport.close()
        self.relays.clear()

    def data_received(self, data: bytes) -> None:
        if self.mode == "silent":
            return
        import h2.events
        import h2.exceptions

        try:
            events = self.h2.receive_data(data)
        except h2.exceptions.ProtocolError:
            self.flush()
            if self.transport is not None:
                self.transport.close()
            return
        for event in events:
            if isinstance(event, h2.events.RequestReceived):
                asyncio.ensure_future(self.connect(event.stream_id, dict(event.headers)))
            elif isinstance(event, h2.events.DataReceived):
                self.h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                self.from_client(event.stream_id, event.data)
        self.flush()

    def _log(self, entry: dict[str, Any]) -> None:
        with open(self.log_path, "a", encoding="utf-8") as log:
            log.write(json.dumps(entry) + "\n")

    async def connect(self, sid: int, fields: dict[str, str]) -> None:
        entry = {k: fields.get(k) for k in (":method", ":protocol", ":scheme", ":authority",
                                            ":path", "capsule-protocol",
                                            "proxy-authorization")}
        path = fields.get(":path", "")
        ok = (fields.get(":method") == "CONNECT" and fields.get(":protocol") == "connect-udp"
              and path.startswith(PREFIX) and path.endswith("/"))
        status = 200 if ok and self.mode != "refuse" else (403 if ok else 400)
        entry["status"] = status
        self._log(entry)
        if self.mode == "goaway":
            from h2.errors import ErrorCodes

            self.h2.close_connection(error_code=ErrorCodes.PROTOCOL_ERROR)
            self.flush()
            return
        if self.mode == "data-first" and self.transport is not None:
            # A DATA frame (type 0, no flags) on the stream before its HEADERS.
            payload = capsule(0, b"\x00early")
            self.transport.write(struct.pack(">I", len(payload))[1:] + b"\x00\x00"
                                 + struct.pack(">I", sid) + payload)
            return
        if status != 200:
            self.h2.send_headers(sid, [(":status", str(status))], end_stream=True)
            self.flush()
            return
        host, port = path[len(PREFIX):-1].split("/")
        loop = asyncio.get_running_loop()
        _, relay = await loop.create_datagram_endpoint(
            lambda: Relay(self, sid), remote_addr=(unquote(host), int(port)))
        self.relays[sid] = relay
        self.readers[sid] = CapsuleReader()
        self.h2.send_headers(sid, [(":status", "200"), ("capsule-protocol", "?1")])
        if self.mode == "capsules":
            self.h2.send_data(sid, capsule(0x2A, b"unknown capsule") + capsule(0, b"\x01ctx-1")
                              + capsule(0, b"\x00") + capsule(0, b"\x00" + os.urandom(5000))
                              + capsule(0x17, os.urandom(40)))
        if self.mode == "truncated-capsule":
            self.h2.send_data(sid, b"\x00\x40", end_stream=True)
        if self.mode == "reset":
            loop.call_later(0.5, self._reset, sid)
        self.flush()

    def _reset(self, sid: int) -> None:
        from h2.errors import ErrorCodes

        try:
            self.h2.reset_stream(sid, error_code=ErrorCodes.CANCEL)
        except Exception:  # noqa: BLE001 - the stream may be gone already
            return
        self.flush()

    def from_client(self, sid: int, data: bytes) -> None:
        relay, reader = self.relays.get(sid), self.readers.get(sid)
        if relay is None or reader is None or relay.transport is None:
            return
        for kind, value in reader.feed(data):
            if kind == 0 and value[:1] == b"\x00" and len(value) > 1:
                relay.transport.sendto(value[1:])

    def to_client(self, sid: int, data: bytes) -> None:
        import h2.exceptions

        c = capsule(0, b"\x00" + data)
        pieces = [c[:1], c[1:3], c[3:]] if self.mode == "split" else [c]
        try:
            for piece in pieces:
                self.h2.send_data(sid, piece)
        except h2.exceptions.ProtocolError:
            return  # the stream is gone
        self.flush()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cert")
    parser.add_argument("--key")
    parser.add_argument("--log", required=True)
    parser.add_argument("--mode", default="ok")
    args = parser.parse_args()
    ProxyConnection.mode, ProxyConnection.log_path = args.mode, args.log
    context = None
    if args.cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.cert, args.key)
        context.set_alpn_protocols(["http/1.1"] if args.mode == "http1-alpn" else ["h2"])
    loop = asyncio.get_running_loop()
    server = await loop.create_server(ProxyConnection, "127.0.0.1", 0, ssl=context)
    port = server.sockets[0].getsockname()[1]
    print(f"port {port}", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
