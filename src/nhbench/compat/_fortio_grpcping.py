"""``fortio grpcping``: Fortio's gRPC ping and health-check client (docs/compat.md, "Fortio's
nc and grpcping").

What Fortio 1.66.5 does (its cli/fortio_main.go grpcClient, fgrpc PingClientCall and
GrpcHealthCheck, fgrpc.Dial), with the calls made by grpcio (an optional extra of nhbench;
without it the command is refused by name):

* Ping (the default): one warm-up call, then ``-n`` rounds (1 when ``-n`` is 0 or less) of
  two calls to ``/fgrpc.PingServer/Ping`` with ``seq``, the client's clock in ``ts``, the
  ``-payload`` and ``-grpc-ping-delay``; the second call sends the first's answer back.
  Each round records three round trips (the two calls as the client measured them, and the
  gap between the server's two time stamps) and one clock skew (the server's middle time
  minus the client's). Printed to stdout as Fortio prints them: the ``Clock skew histogram
  usec`` (Fortio's buckets, offset -10 us, 2 us per unit) then the ``RTT histogram usec``
  (offset 0, 10 us per unit), each with its ``# target 50%`` line computed as Fortio does
  (linear inside the bucket). The per-round ``Ping RTT ...`` line goes to stderr, where
  Fortio logs it.
* ``-health``: ``-n`` calls to ``/grpc.health.v1.Health/Check`` for ``-healthservice``; the
  RTT histogram, then ``Health STATUS : count`` per status seen. Exit 1 unless every answer
  was ``SERVING``.
* TLS when ``-cacert`` is given or the target starts with ``https://`` (the system's roots
  then); ``-cert``/``-key`` add a client certificate. ``http://`` and ``https://`` drop the
  scheme and default the port to 80 and 443, else the port is 8079 (Fortio's gRPC port).
  ``-H`` headers become call metadata (lower-cased, without content-length and
  content-type), ``user-agent`` and ``host`` set the channel's user agent and authority.
  ``-unix-socket`` connects through a Unix socket.
* A failed call ends the command: one line on stderr, exit 1.

``-k`` (do not verify the server's certificate) is refused by name: grpcio's Python client
has no way to skip verification, and pretending would send over a channel the user did not
ask for.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._grpc import HEALTH_CHECK_METHOD, PING_METHOD, ping_message
from .._grpc import health_check_request as _health_request
from ._fortio_output import (
    _LAST_BUCKET,
    _bucket_data,
    _fortio_bucket,
    _Histogram,
    _histogram_lines,
    _Moments,
)

if TYPE_CHECKING:
    import grpc

__all__ = ["GrpcPingValues", "grpcping_main"]

#: grpc.health.v1.HealthCheckResponse.ServingStatus, by number.
_SERVING_STATUS = ("UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN")
_FORTIO_GRPC_PORT = "8079"
# fgrpc.PingClientCall's histograms: NewHistogram(offset, divider), values in microseconds.
_SKEW_SHAPE = (-10.0, 2.0)
_RTT_SHAPE = (0.0, 10.0)
_PERCENTILES = (50.0,)


@dataclass(frozen=True)
class GrpcPingValues:
    """The Fortio flags ``fortio grpcping`` reads, already parsed.

    ``count``: ``-n`` (0 or less means 1). ``health``/``health_service``: ``-health``,
    ``-healthservice``. ``payload``: the payload bytes as Fortio's -payload, -payload-file or
    -payload-size made them (made valid UTF-8 here, as Fortio's PayloadUTF8). ``ping_delay_ns``:
    ``-grpc-ping-delay`` in nanoseconds. ``cacert``, ``cert``, ``key``: the files of the same
    flags. ``insecure``: ``-k``/``-https-insecure`` (refused). ``unix_socket``:
    ``-unix-socket``. ``headers``: the ``-H`` pairs, in order.
    """

    count: int = 0
    health: bool = False
    health_service: str = ""
    payload: bytes = b""
    ping_delay_ns: int = 0
    cacert: str = ""
    cert: str = ""
    key: str = ""
    insecure: bool = False
    unix_socket: str = ""
    headers: Sequence[tuple[str, str]] = ()


class _Refused(ValueError):
    """Bad input: one line, exit 2, nothing sent."""


class _CallFailed(RuntimeError):
    """A gRPC call failed: one line, exit 1 (Fortio logs it and exits 1)."""


# ---- the target and the channel ---------------------------------------------------------------


def grpc_destination(target: str) -> tuple[str, bool]:
    """Fortio's grpcDestination: (host:port, whether the scheme was https://)."""
    https = target.startswith("https://")
    if target.startswith("http://"):
        dest, port = target[len("http://"):].removesuffix("/"), "80"
    elif https:
        dest, port = target[len("https://"):].removesuffix("/"), "443"
    else:
        dest, port = target, _FORTIO_GRPC_PORT
    if not dest:
        raise _Refused(f"grpcping: {target!r} names no host")
    if _has_port(dest):
        return dest, https
    if ":" in dest and not dest.startswith("["):  # a bare IPv6 address
        return f"[{dest}]:{port}", https
    return f"{dest}:{port}", https


def _has_port(dest: str) -> bool:
    # net.SplitHostPort: host:port, or [v6]:port; a bare IPv6 address has no port.
    if dest.startswith("["):
        return "]:" in dest
    return dest.count(":") == 1


def _payload_utf8(payload: bytes) -> str:
    # Fortio's PayloadUTF8: invalid sequences dropped, then padded with X to the same length.
    text = payload.decode("utf-8", errors="ignore")
    return text + "X" * (len(payload) - len(text.encode("utf-8")))


def _read(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as error:
        raise _Refused(f"grpcping: cannot read the {what} {path!r}: {error.strerror}") from None


def _metadata(headers: Sequence[tuple[str, str]]
              ) -> tuple[list[tuple[str, str]], list[tuple[str, Any]]]:
    """(call metadata, channel options) from -H, as Fortio's httpHeader2grpcMetadata and
    extractDialOptionsAndFilter."""
    metadata: list[tuple[str, str]] = []
    options: list[tuple[str, Any]] = []
    for name, value in headers:
        key = name.lower()
        if key in ("content-length", "content-type"):
            continue
        if key == "user-agent":
            options.append(("grpc.primary_user_agent", value))
        elif key == "host":
            options.append(("grpc.default_authority", value))
        else:
            metadata.append((key, value))
    return metadata, options


def _channel(values: GrpcPingValues, target: str) -> grpc.Channel:
    try:
        import grpc
    except ImportError:
        raise _Refused("grpcping: needs grpcio (pip install 'nhbench[grpc]')") from None
    if values.insecure:
        raise _Refused("grpcping: -k (do not verify the server certificate) is not supported: "
                       "grpcio's client always verifies; give the server's CA with -cacert")
    if bool(values.cert) != bool(values.key):
        raise _Refused("grpcping: -cert and -key go together")
    dest, https = grpc_destination(target)
    _, options = _metadata(values.headers)
    address = dest
    if values.unix_socket:
        address = f"unix:{values.unix_socket}"
        if not any(name == "grpc.default_authority" for name, _ in options):
            options.append(("grpc.default_authority", dest))
    if values.cacert or https:
        roots = _read(values.cacert, "CA certificate") if values.cacert else None
        chain = _read(values.cert, "certificate") if values.cert else None
        key = _read(values.key, "key") if values.key else None
        credentials = grpc.ssl_channel_credentials(root_certificates=roots, private_key=key,
                                                   certificate_chain=chain)
        return grpc.secure_channel(address, credentials, options=options)
    return grpc.insecure_channel(address, options=options)


# ---- protobuf answers ----------------------------------------------------------------------


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise _CallFailed("grpcping: the answer is not valid protobuf")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def _fields(data: bytes) -> dict[int, int | bytes]:
    """The varint and length-delimited fields of a protobuf message (last one wins)."""
    out: dict[int, int | bytes] = {}
    at = 0
    while at < len(data):
        tag, at = _varint(data, at)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            out[number], at = _varint(data, at)
        elif wire == 2:
            size, at = _varint(data, at)
            out[number], at = data[at:at + size], at + size
        elif wire in (1, 5):
            at += 8 if wire == 1 else 4
        else:
            raise _CallFailed("grpcping: the answer is not valid protobuf")
        if at > len(data) or number == 0:
            raise _CallFailed("grpcping: the answer is not valid protobuf")
    return out


def _int64(value: int | bytes | None) -> int:
    number = value if isinstance(value, int) else 0
    return number - (1 << 64) if number >= 1 << 63 else number


@dataclass
class _Ping:
    seq: int = 0
    ts: int = 0
    payload: str = ""
    delay_nanos: int = 0

    def encode(self) -> bytes:
        return ping_message(seq=self.seq, ts=self.ts, payload=self.payload,
                            delay_nanos=self.delay_nanos)

    @classmethod
    def decode(cls, data: bytes) -> _Ping:
        fields = _fields(data)
        payload = fields.get(3, b"")
        return cls(_int64(fields.get(1)), _int64(fields.get(2)),
                   payload.decode("utf-8", "replace") if isinstance(payload, bytes) else "",
                   _int64(fields.get(4)))


# ---- Fortio's histograms --------------------------------------------------------------------


class _Recorder:
    """stats.Histogram fed value by value (microseconds), exported as Fortio does."""

    def __init__(self, offset: float, divider: float) -> None:
        self.offset, self.divider = offset, divider
        self.counts = [0] * (_LAST_BUCKET + 1)
        self.moments = _Moments()

    def record(self, value: float) -> None:
        m = self.moments
        if m.count == 0:
            m.min = m.max = value
        m.min, m.max = min(m.min, value), max(m.max, value)
        m.count += 1
        m.sum += value
        m.sumsq += value * value
        self.counts[_fortio_bucket(value, self.offset, self.divider)] += 1

    def lines(self, message: str) -> list[str]:
        data = _bucket_data(self.counts, self.moments, self.offset, self.divider)
        if not data:
            return [f"{message} : no data"]
        percentiles = [(p, _calc_percentile(data, self.moments, p)) for p in _PERCENTILES]
        return _histogram_lines(message, _Histogram(self.moments, data, percentiles))


def _calc_percentile(data: Sequence[Mapping[str, Any]], moments: _Moments,
                     percentile: float) -> float:
    """Fortio's HistogramData.CalcPercentile: linear inside the bucket that holds it."""
    if percentile >= 100:
        return moments.max
    previous = 100.0 / moments.count
    if percentile <= previous:
        return moments.min
    for bucket in data:
        if percentile <= bucket["Percent"]:
            return float(bucket["Start"] + (percentile - previous) / (bucket["Percent"] - previous)
                         * (bucket["End"] - bucket["Start"]))
        previous = bucket["Percent"]
    return moments.max


# ---- the two modes ------------------------------------------------------------------------


def _caller(channel: grpc.Channel, method: str,
            metadata: list[tuple[str, str]]) -> Callable[[bytes, str], bytes]:
    import grpc

    stub = channel.unary_unary(method)

    def call(request: bytes, what: str) -> bytes:
        try:
            answer: bytes = stub(request, metadata=metadata or None)
        except grpc.RpcError as error:
            code = error.code() if isinstance(error, grpc.Call) else None
            details = error.details() if isinstance(error, grpc.Call) else str(error)
            name = code.name if code is not None else "UNKNOWN"
            # One line, whatever the server put in its message.
            details = " ".join(str(details).split())
            raise _CallFailed(f"grpcping: grpc error from {what}: {name}: {details}") from None
        return answer

    return call


def _ping(channel: grpc.Channel, values: GrpcPingValues, count: int,
          metadata: list[tuple[str, str]]) -> list[str]:
    call = _caller(channel, PING_METHOD, metadata)
    message = _Ping(payload=_payload_utf8(values.payload), delay_nanos=values.ping_delay_ns)
    call(message.encode(), "Ping0")  # the warm-up: connects, not measured
    skew, rtt = _Recorder(*_SKEW_SHAPE), _Recorder(*_RTT_SHAPE)
    for seq in range(1, count + 1):
        message.seq = seq
        t1a = time.time_ns()
        message.ts = t1a
        first = _Ping.decode(call(message.encode(), f"Ping1 iter {seq}"))
        t2a = time.time_ns()
        second = _Ping.decode(call(message.encode(), f"Ping2 iter {seq}"))
        t3a = time.time_ns()
        rt1, rt2, rt_remote = t2a - t1a, t3a - t2a, second.ts - first.ts
        for value in (rt1, rt2, rt_remote):
            rtt.record(value / 1000.0)
        middle = first.ts + _go_div(rt_remote, 2)
        clock_skew = middle - t2a
        print(f"Ping RTT {_go_div(rt1 + rt2 + rt_remote, 3)} (avg of {rt1}, {rt_remote}, "
              f"{rt2} ns) clock skew {clock_skew}", file=sys.stderr)
        skew.record(clock_skew / 1000.0)
        message = second
    return skew.lines("Clock skew histogram usec") + rtt.lines("RTT histogram usec")


def _go_div(a: int, b: int) -> int:
    # Go's integer division truncates toward zero.
    quotient = abs(a) // b
    return quotient if a >= 0 else -quotient


def _health(channel: grpc.Channel, values: GrpcPingValues, count: int,
            metadata: list[tuple[str, str]]) -> tuple[list[str], int]:
    call = _caller(channel, HEALTH_CHECK_METHOD, metadata)
    request = _health_request(values.health_service)
    rtt = _Recorder(*_RTT_SHAPE)
    statuses: dict[str, int] = {}
    for _ in range(count):
        start = time.perf_counter_ns()
        answer = call(request, "Check")
        rtt.record((time.perf_counter_ns() - start) / 1000.0)
        number = _int64(_fields(answer).get(1))
        name = _SERVING_STATUS[number] if 0 <= number < len(_SERVING_STATUS) else str(number)
        statuses[name] = statuses.get(name, 0) + 1
    lines = rtt.lines("RTT histogram usec")
    lines += [f"Health {name} : {seen}" for name, seen in statuses.items()]
    return lines, statuses.get("SERVING", 0)


def grpcping_main(values: GrpcPingValues, target: str) -> int:
    """Run ``fortio grpcping TARGET``: 0 when every call answered (and, with ``-health``, each
    said SERVING), 1 when a call failed or a health answer was not SERVING, 2 when a value is
    refused (nothing sent)."""
    count = values.count if values.count > 0 else 1
    try:
        if values.ping_delay_ns < 0:
            raise _Refused("grpcping: -grpc-ping-delay must not be negative")
        channel = _channel(values, target)
    except _Refused as refused:
        print(refused, file=sys.stderr)
        return 2
    metadata, _ = _metadata(values.headers)
    try:
        with channel:
            if values.health:
                lines, serving = _health(channel, values, count, metadata)
            else:
                lines, serving = _ping(channel, values, count, metadata), count
    except _CallFailed as failed:
        print(failed, file=sys.stderr)
        return 1
    sys.stdout.write("".join(line + "\n" for line in lines))
    sys.stdout.flush()
    if serving != count:
        print(f"grpcping: unexpected SERVING count {serving} vs {count}", file=sys.stderr)
        return 1
    return 0
