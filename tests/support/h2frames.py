"""HTTP/2 frames and HPACK blocks written by hand with ``struct``, for both sides of the
hostile suites (the scripted origin's misbehaving replies, the attack client's requests) and
the server hardening tests.

Only what the suites need is here (RFC 9113 framing, RFC 7541 integer and literal encoding,
no Huffman). The ``h2`` package is deliberately not used: the point is to send what a
correct library would refuse to produce.
"""

from __future__ import annotations

import socket
import struct

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, \
    CONTINUATION = range(10)

END_STREAM = 0x1
ACK = 0x1
END_HEADERS = 0x4

NO_ERROR, PROTOCOL_ERROR, INTERNAL_ERROR, FLOW_CONTROL_ERROR = 0, 1, 2, 3
REFUSED_STREAM, CANCEL, ENHANCE_YOUR_CALM = 7, 8, 11

SETTINGS_HEADER_TABLE_SIZE = 1
SETTINGS_MAX_CONCURRENT_STREAMS = 3
SETTINGS_INITIAL_WINDOW_SIZE = 4
SETTINGS_MAX_FRAME_SIZE = 5


def frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    """One frame: 24-bit length, type, flags, 31-bit stream id, payload."""
    n = len(payload)
    return struct.pack(">BHBBI", n >> 16, n & 0xFFFF, kind, flags, stream & 0x7FFFFFFF) + payload


def settings(**values: int) -> bytes:
    """SETTINGS with ``name=value`` pairs, e.g. ``settings(initial_window_size=0)``."""
    ids = {"header_table_size": 1, "enable_push": 2, "max_concurrent_streams": 3,
           "initial_window_size": 4, "max_frame_size": 5, "max_header_list_size": 6}
    payload = b"".join(struct.pack(">HI", ids[k], v) for k, v in values.items())
    return frame(SETTINGS, 0, 0, payload)


SETTINGS_ACK = frame(SETTINGS, ACK, 0)


def goaway(last_stream: int, code: int = NO_ERROR, debug: bytes = b"") -> bytes:
    return frame(GOAWAY, 0, 0, struct.pack(">II", last_stream & 0x7FFFFFFF, code) + debug)


def rst_stream(stream: int, code: int) -> bytes:
    return frame(RST_STREAM, 0, stream, struct.pack(">I", code))


def window_update(stream: int, increment: int) -> bytes:
    return frame(WINDOW_UPDATE, 0, stream, struct.pack(">I", increment & 0x7FFFFFFF))


def ping(opaque: bytes = b"12345678", ack: bool = False) -> bytes:
    return frame(PING, ACK if ack else 0, 0, opaque)


# ---- HPACK (RFC 7541), literal forms only -------------------------------------------------

def hpack_int(value: int, prefix_bits: int, first_byte_flags: int = 0) -> bytes:
    """The prefixed integer encoding of section 5.1."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first_byte_flags | value])
    out = bytearray([first_byte_flags | limit])
    value -= limit
    while value >= 128:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def hpack_string(data: bytes) -> bytes:
    return hpack_int(len(data), 7) + data  # H bit 0: no Huffman


def hpack_indexed(index: int) -> bytes:
    """An indexed field (static table 1-61, dynamic table from 62)."""
    return hpack_int(index, 7, 0x80)


def hpack_literal(name: bytes, value: bytes, index: bool = False) -> bytes:
    """A literal field with a literal name, added to the dynamic table when ``index``."""
    return (b"\x40" if index else b"\x00") + hpack_string(name) + hpack_string(value)


def hpack_literal_name_index(name_index: int, value: bytes) -> bytes:
    """A literal field without indexing whose name is a static-table entry."""
    return hpack_int(name_index, 4, 0x00) + hpack_string(value)


# Static table entries used below (RFC 7541 appendix A).
STATUS_200 = hpack_indexed(8)
METHOD_GET = hpack_indexed(2)
METHOD_POST = hpack_indexed(3)
PATH_ROOT = hpack_indexed(4)
SCHEME_HTTP = hpack_indexed(6)


def request_block(authority: bytes = b"127.0.0.1", method: bytes = METHOD_GET) -> bytes:
    """A minimal request header block: GET (or POST) http://authority/."""
    return method + SCHEME_HTTP + PATH_ROOT + hpack_literal_name_index(1, authority)


def response_headers(stream: int, end_stream: bool = True, extra: bytes = b"") -> bytes:
    """A 200 HEADERS frame (END_HEADERS), ending the stream unless told otherwise."""
    flags = END_HEADERS | (END_STREAM if end_stream else 0)
    return frame(HEADERS, flags, stream, STATUS_200 + extra)


# ---- reading frames -----------------------------------------------------------------------

class FrameReader:
    """Reads whole frames from a blocking socket; ``None`` at EOF or on a socket error."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""

    def _fill(self, n: int) -> bool:
        while len(self.buf) < n:
            try:
                chunk = self.sock.recv(65536)
            except OSError:
                return False
            if not chunk:
                return False
            self.buf += chunk
        return True

    def read_exact(self, n: int) -> bytes | None:
        if not self._fill(n):
            return None
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def read_frame(self) -> tuple[int, int, int, bytes] | None:
        """(type, flags, stream id, payload) of the next frame."""
        head = self.read_exact(9)
        if head is None:
            return None
        hi, lo, kind, flags, stream = struct.unpack(">BHBBI", head)
        payload = self.read_exact((hi << 16) | lo)
        if payload is None:
            return None
        return kind, flags, stream & 0x7FFFFFFF, payload
