"""gRPC unary calls as request bytes (docs/protocols.md "gRPC: the client").

A gRPC run is an HTTP/2 run whose request body is one length-prefixed message and whose
responses end with ``grpc-status`` trailers (the C core's session_h2.c reads those). This
module renders what the request set needs: the framing, the few messages nhbench builds
itself, and the ``grpc-timeout`` header.

The messages are encoded by hand, field by field, with the protobuf wire format
(varints and length-delimited fields): ``grpc.health.v1.HealthCheckRequest`` and Fortio's
``fgrpc.PingMessage``. The ``protobuf`` and ``grpcio`` packages are not runtime
dependencies, so ``import nhbench`` stays light; the tests check these bytes against
grpcio's own decoding.
"""

from __future__ import annotations

import math

__all__ = [
    "HEALTH_CHECK_METHOD",
    "PING_METHOD",
    "STATUS_NAMES",
    "frame",
    "grpc_timeout",
    "health_check_request",
    "ping_message",
    "status_counter",
]

#: The standard health service's unary method, the default call of ``grpc://`` runs.
HEALTH_CHECK_METHOD = "/grpc.health.v1.Health/Check"
#: Fortio's ping service (fgrpc/ping.proto: package fgrpc, service PingServer).
PING_METHOD = "/fgrpc.PingServer/Ping"

#: The gRPC status codes (grpc/doc/statuscodes.md), index = code; the C core counts each
#: as ``benchmark.grpc_status_<code>``.
STATUS_NAMES: tuple[str, ...] = (
    "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
    "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
    "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
    "UNAUTHENTICATED",
)

# The largest message the 4-byte length prefix can announce.
_MAX_MESSAGE = 0xFFFFFFFF


def status_counter(code: int) -> str:
    """The counter of calls that ended with grpc-status `code`: ``benchmark.grpc_status_14``."""
    return f"benchmark.grpc_status_{code}"


def frame(message: bytes) -> bytes:
    """One length-prefixed message: a compressed flag of 0, the length as 4 bytes big-endian,
    the message."""
    if len(message) > _MAX_MESSAGE:
        raise ValueError(f"a gRPC message is at most {_MAX_MESSAGE} bytes (got {len(message)})")
    return b"\x00" + len(message).to_bytes(4, "big") + message


def _varint(value: int) -> bytes:
    # int64 fields: a negative value is its two's complement on 64 bits (10 bytes).
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _int_field(number: int, value: int) -> bytes:
    # proto3 leaves a field at its default (0) out of the encoding.
    return _varint(number << 3) + _varint(value) if value else b""


def _bytes_field(number: int, value: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(value)) + value if value else b""


def health_check_request(service: str = "") -> bytes:
    """``HealthCheckRequest { string service = 1; }``: empty asks for the server's overall
    health."""
    return _bytes_field(1, service.encode("utf-8"))


def ping_message(*, seq: int = 0, ts: int = 0, payload: str = "", delay_nanos: int = 0) -> bytes:
    """Fortio's ``PingMessage { int64 seq = 1; int64 ts = 2; string payload = 3;
    int64 delayNanos = 4; }``; its server echoes it after sleeping ``delayNanos``."""
    return (_int_field(1, seq) + _int_field(2, ts) + _bytes_field(3, payload.encode("utf-8"))
            + _int_field(4, delay_nanos))


# grpc-timeout (PROTOCOL-HTTP2.md): at most 8 ASCII digits and a unit.
_UNITS = (("n", 1e-9), ("u", 1e-6), ("m", 1e-3), ("S", 1.0), ("M", 60.0), ("H", 3600.0))
_MAX_DIGITS = 99_999_999


def grpc_timeout(seconds: float) -> str:
    """The ``grpc-timeout`` value of a deadline: whole milliseconds when it is one (``1500m``),
    else the finest unit whose count fits in 8 digits, rounded up so that the deadline sent is
    never shorter than the one asked for."""
    if not seconds > 0 or math.isinf(seconds):
        raise ValueError(f"a gRPC deadline must be above 0 (got {seconds})")
    millis = seconds * 1000
    if abs(millis - round(millis)) < 1e-6 and 0 < round(millis) <= _MAX_DIGITS:
        return f"{round(millis)}m"
    for unit, size in _UNITS:
        count = math.ceil(seconds / size - 1e-9)
        if count <= _MAX_DIGITS:
            return f"{max(count, 1)}{unit}"
    raise ValueError(f"a gRPC deadline is at most {_MAX_DIGITS} hours (got {seconds} s)")
