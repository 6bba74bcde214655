"""The protocol a run speaks beyond HTTP/1.1: HTTP/2 and HTTP/3 (`Http2`, and the checks
HTTP/3's QUIC needs), gRPC (`Grpc`) and the tcp:// and udp:// echo targets (no fields of
their own: the URI's scheme says it; docs/protocols.md).
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from .._input import InputError, check_input, limit_of
from ._flags import Flag
from ._run_model import Data, RunPart, lower, uri_scheme_of
from ._values import echo_scheme, parse_duration, uri_scheme

if TYPE_CHECKING:
    from ._run import Options

__all__ = [
    "ECHO_REFUSED_OPTIONS",
    "GRPC_DEFAULT_FAILURE_PREDICATES",
    "Grpc",
    "Http2",
    "check_echo",
    "check_grpc",
    "check_http3",
    "echo_options",
    "grpc_uri",
    "h2c_means_http2",
]


# Nighthawk's default for --max-concurrent-streams, its way of saying "no limit".
MAX_CONCURRENT_STREAMS_UNLIMITED = 2**31 - 1
# Every in-flight HTTP/2 request has a slot allocated before the run; this bounds the memory.
MAX_ACTIVE_REQUESTS = 1_000_000


# gRPC: a method path as gRPC clients send it (/package.Service/Method).
_GRPC_METHOD_RE = re.compile(r"/[A-Za-z0-9_.]+/[A-Za-z0-9_]+")
#: The largest --grpc-payload: gRPC's default maximum message size (4 MiB).
GRPC_MAX_PAYLOAD = limit_of("grpc-payload")
#: What a gRPC run adds to the default failure predicates: a call that ended with a non-OK
#: grpc-status or broke the gRPC protocol fails the run, as a 5xx or a reset does.
GRPC_DEFAULT_FAILURE_PREDICATES = {"benchmark.grpc_error": 0, "benchmark.grpc_protocol_error": 0}
#: the options an echo run refuses (an echo request is the payload alone).
ECHO_REFUSED_OPTIONS = (
    "request_method", "request_header", "request_body_size", "content_type", "template",
    "http1_0", "protocol", "h2c", "max_concurrent_streams", "max_active_requests", "sni",
    "alpn", "cacert", "insecure", "tls_ciphers", "tls_ciphersuites", "tls_groups",
    "tls_min_version", "tls_max_version", "tls_session_reuse", "tls_context",
    "transport_socket", "request_source_plugin_config", "replay", "unix_socket",
    "latency_response_header_name", "stream_stats",
)
#: a udp:// request's time-out when --request-timeout is not given (seconds).
ECHO_UDP_DEFAULT_TIMEOUT = 1.0
#: the largest udp:// payload: 65507 bytes (the largest UDP payload over IPv4)
#: minus the 8-byte sequence number (C: NHB_ECHO_UDP_MAX_PAYLOAD).
ECHO_UDP_MAX_PAYLOAD = 65499


class Http2(RunPart):
    """The HTTP version (http1, http2, http3) and HTTP/2's stream limits."""

    # Nighthawk's -p is no alias: Fortio's -p is its percentiles, and users of both type it.
    protocol: Annotated[
        Literal["http1", "http2", "http3"],
        Flag(metavar="http1|http2|http3",
             consts=(("--h2", "http2"), ("-h2", "http2"), ("--h3", "http3")),
             group="HTTP/2"),
    ] = Field(
        default="http1",
        description="http1, http2 or http3. HTTP/2 is negotiated with ALPN (h2) on https:// "
        "and spoken with prior knowledge (h2c) on http://. HTTP/3 runs over QUIC on "
        "https:// URIs (docs/protocols.md).",
    )
    h2c: Annotated[bool, Flag(group="HTTP/2")] = Field(
        default=False,
        description="HTTP/2 over cleartext TCP with prior knowledge: protocol http2 on an "
        "http:// URI.",
    )
    max_concurrent_streams: Annotated[int, Flag(metavar="N", default="", group="HTTP/2")] = Field(
        default=MAX_CONCURRENT_STREAMS_UNLIMITED, ge=1, le=MAX_CONCURRENT_STREAMS_UNLIMITED,
        description="HTTP/2: streams one connection carries at once (the server's own limit "
        "applies too). Nighthawk's default 2147483647 means no limit of ours: requests share "
        "one connection until max_active_requests; 1 gives every concurrent request its own "
        "connection.",
    )
    max_active_requests: Annotated[int, Flag(metavar="N", default="", group="HTTP/2")] = Field(
        default=100, ge=1, le=MAX_ACTIVE_REQUESTS,
        description="HTTP/2: requests in flight per worker (closed loop: a release waits when "
        "this many plus max_pending_requests are outstanding). Nighthawk's default, 100.",
    )

    @field_validator("protocol", mode="before")
    @classmethod
    def _parse_protocol(cls, value: object) -> object:
        value = lower(value)
        if value in ("h2", "2", "http/2"):
            return "http2"
        if value in ("h1", "1", "http/1.1", "http1.1"):
            return "http1"
        if value in ("h3", "3", "http/3"):
            return "http3"
        return value

    @field_validator("protocol")
    @classmethod
    def _check_protocol(cls, value: str, info: ValidationInfo) -> str:
        if value == "http2" and info.data.get("request_method") == "CONNECT":
            raise ValueError("CONNECT is not supported over HTTP/2; use http1")
        if value == "http3" and uri_scheme_of(info) not in (None, "https"):
            raise ValueError("http3 runs over QUIC, whose handshake is TLS 1.3: the URI must "
                             "be https://")
        return value

    @field_validator("h2c")
    @classmethod
    def _check_h2c(cls, value: bool, info: ValidationInfo) -> bool:
        if value and uri_scheme_of(info) == "https":
            raise ValueError(
                "is HTTP/2 without TLS, but the URI is https:// (use protocol http2 for "
                "HTTP/2 over TLS)"
            )
        return value


class Grpc(RunPart):
    """A gRPC run: the method, its message, the health check or Fortio's ping, deadlines."""

    grpc: Annotated[bool, Flag(aliases=("-grpc",), group="gRPC (grpc:// and grpcs:// URIs)")] = Field(
        default=False,
        description="Fortio's -grpc: the URI names a gRPC server: http:// is taken as grpc:// "
        "(h2c), https:// as grpcs:// (TLS), and a bare host:port as grpc://host:port (port "
        "8079, Fortio's, when none is given). With --cacert the run is TLS (grpcs://) "
        "whatever the form, as Fortio's.",
    )
    grpc_method: Annotated[
        str | None, Flag(metavar="/PKG.SERVICE/METHOD", group="gRPC (grpc:// and grpcs:// URIs)")
    ] = Field(
        default=None,
        description="The unary method every request calls, e.g. /helloworld.Greeter/SayHello; "
        "its request message is --grpc-payload (empty without). Default: the health check "
        "/grpc.health.v1.Health/Check.",
    )
    grpc_payload: Annotated[
        str | None, Flag(metavar="FILE", group="gRPC (grpc:// and grpcs:// URIs)")
    ] = Field(
        default=None,
        description="The request message of --grpc-method: the serialized protobuf bytes of "
        "this file (at most 4 MiB, gRPC's default message limit), read once before the run; "
        "nhbench adds the 5-byte gRPC frame prefix.",
    )
    grpc_service: Annotated[
        str | None,
        Flag(metavar="NAME", aliases=("-healthservice",), group="gRPC (grpc:// and grpcs:// URIs)"),
    ] = Field(
        default=None,
        description="The service the health check asks about (HealthCheckRequest.service, "
        "Fortio's -healthservice); default: the server as a whole.",
    )
    ping: Annotated[bool, Flag(aliases=("-ping",), group="gRPC (grpc:// and grpcs:// URIs)")] = Field(
        default=False,
        description="Call Fortio's ping service (/fgrpc.PingServer/Ping) instead of the health "
        "check, as Fortio's -grpc -ping; --payload or --payload-size is the ping's payload "
        "text.",
    )
    grpc_ping_delay: Annotated[
        float | None,
        Flag(metavar="TIME", aliases=("-grpc-ping-delay",), group="gRPC (grpc:// and grpcs:// URIs)"),
    ] = Field(
        default=None, ge=0, le=3600,
        description="With --ping: the ping server waits this long before it answers "
        "(PingMessage.delayNanos, Fortio's -grpc-ping-delay).",
    )
    grpc_deadline: Annotated[
        float | None, Flag(metavar="TIME", group="gRPC (grpc:// and grpcs:// URIs)")
    ] = Field(
        default=None, ge=0, le=3600,
        description="The deadline sent with every call as grpc-timeout (0 = none). Default: "
        "--request-timeout when it is above 0.",
    )

    @field_validator("grpc_method")
    @classmethod
    def _check_grpc_method(cls, value: str | None) -> str | None:
        if value is not None and not _GRPC_METHOD_RE.fullmatch(value):
            raise ValueError("must be a gRPC method path /package.Service/Method, e.g. "
                             f"/grpc.health.v1.Health/Check (got {value!r})")
        return value

    @field_validator("grpc_payload")
    @classmethod
    def _check_grpc_payload(cls, value: str | None) -> str | None:
        if value is None:
            return value
        try:
            check_input(value, "grpc-payload")
        except InputError as exc:
            raise ValueError(f"{exc.reason} (got {value!r})") from None
        return value

    @field_validator("grpc_ping_delay", "grpc_deadline", mode="before")
    @classmethod
    def _parse_grpc_time(cls, value: object) -> object:
        return None if value is None else parse_duration(value)


# ---- the normalisation steps and the checks (their order: _run_checks) ---------------------


def grpc_uri(data: Data, info: ValidationInfo, model: type[BaseModel]) -> Data:
    # Fortio's -grpc names the server with an http(s):// URL or a bare host:port; the
    # run is then what grpc:// or grpcs:// says, and the echo of the options says so.
    # A gRPC run is HTTP/2: the protocol is written down as such (or refused).
    uri = data.get("uri")
    if data.get("grpc") in (True, 1, "1", "true", "on") and isinstance(uri, str):
        text = uri.strip()
        lowered = text.lower()
        # As Fortio's fgrpc.Dial: a -cacert makes the channel TLS whatever the URL's
        # scheme (it is the only way to ask for TLS with a bare host:port); without
        # it, https:// does. The port defaults stay the scheme's (80, 443, 8079).
        secure = bool(data.get("cacert"))
        if lowered.startswith("http://"):
            text = ("grpcs://" if secure else "grpc://") + text[len("http://"):]
        elif lowered.startswith("https://"):
            text = "grpcs://" + text[len("https://"):]
        elif "://" not in text and text:
            host = text.rstrip("/")
            has_port = re.search(r"(^\[[^]]*\]|^[^:\[]*):[0-9]+$", host) is not None
            text = ("grpcs://" if secure else "grpc://") + host + (
                "" if has_port else ":8079")
        data = {**data, "uri": text}
        uri = text
    if isinstance(uri, str) and uri_scheme(uri) in ("grpc", "grpcs"):
        protocol = data.get("protocol")
        if protocol is not None and lower(protocol) not in ("http2", "h2", "2", "http/2"):
            raise PydanticCustomError(
                "options_file", "{a}: {msg}",
                {"a": "protocol", "msg": "gRPC runs over HTTP/2: grpc:// and grpcs:// "
                 f"take no other protocol (got {protocol!r})"},
            )
        data = {**data, "protocol": "http2"}
    return data


def echo_options(data: Data, info: ValidationInfo, model: type[BaseModel]) -> Data:
    # A tcp:// or udp:// request is the payload alone: the options that shape an HTTP
    # request or its connection (headers, method, HTTP/2 and /3, TLS, templating, request
    # sources) would silently do nothing, so setting one is an error. Checked on the
    # options as given (before the request-shaping validators fill anything in); the
    # echo of options in a Result holds every field and was checked when it was made.
    if (info.context or {}).get("echo"):
        return data
    scheme = echo_scheme(data.get("uri"))
    if scheme is None:
        return data
    for name in ECHO_REFUSED_OPTIONS:
        value = data.get(name)
        if value is None or value is False or value == () or value == []:
            continue
        if value == model.model_fields[name].default:
            continue
        raise PydanticCustomError(
            "options_file", "{a}: {msg}",
            {"a": name, "msg": f"not for {scheme}:// echo targets (an echo request "
             "sends the payload alone; docs/protocols.md)"},
        )
    if scheme == "udp" and data.get("request_timeout") is None:
        # A lost datagram ends its request at the time-out: HTTP's 30 s would hold the
        # socket (one request at a time) for that long. Fortio's UDP runner waits 0.75 s.
        data = {**data, "request_timeout": ECHO_UDP_DEFAULT_TIMEOUT}
    return data


def h2c_means_http2(data: Data, info: ValidationInfo, model: type[BaseModel]) -> Data:
    # h2c is protocol http2 spelled for cleartext; writing the protocol down keeps the
    # echo of the options self-explanatory.
    if data.get("h2c") not in (True, 1, "1", "true", "on"):
        return data
    protocol = data.get("protocol")
    if protocol is not None and lower(protocol) != "http2":
        raise PydanticCustomError(
            "options_conflict", "{a}: mutually exclusive with {b}",
            {"a": "h2c", "b": "protocol"},
        )
    return {**data, "protocol": "http2"}


def check_echo(options: Options, info: ValidationInfo) -> None:
    scheme = echo_scheme(options.uri)
    if scheme != "udp" or (info.context or {}).get("echo"):
        return
    if options.request_timeout == 0:
        raise PydanticCustomError(
            "options_file", "{a}: {msg}",
            {"a": "request_timeout", "msg": "a udp:// run needs a time-out above 0: "
             "a lost datagram would never end its request (got 0)"},
        )
    sizes = [("payload", len((options.payload or "").encode())),
             ("payload_size", options.payload_size or 0)]
    if options.payload_file is not None:
        sizes.append(("payload_file", os.path.getsize(options.payload_file)))
    for name, size in sizes:
        if size > ECHO_UDP_MAX_PAYLOAD:
            raise PydanticCustomError(
                "options_file", "{a}: {msg}",
                {"a": name, "msg": f"a udp:// payload is at most {ECHO_UDP_MAX_PAYLOAD} "
                 f"bytes: one datagram carries it after an 8-byte sequence number "
                 f"(got {size} bytes)"},
            )


def check_grpc(options: Options, info: ValidationInfo) -> None:
    grpc_fields = ("grpc_method", "grpc_payload", "grpc_service", "ping", "grpc_ping_delay",
                   "grpc_deadline")
    given = [f for f in grpc_fields if getattr(options, f) not in (None, False)]
    if not options.is_grpc:
        if given:
            raise PydanticCustomError(
                "options_file", "{a}: {msg}",
                {"a": given[0], "msg": "only applies to grpc:// and grpcs:// URIs (or "
                 "http(s):// with --grpc)"},
            )
        return
    pairs = [
        ("ping", "grpc_method", options.ping and options.grpc_method is not None),
        ("ping", "grpc_payload", options.ping and options.grpc_payload is not None),
        ("grpc_service", "grpc_method", options.grpc_service is not None
         and options.grpc_method is not None),
        ("grpc_service", "ping", options.grpc_service is not None and options.ping),
    ]
    # The message is the gRPC options'; HTTP's body options would contradict it.
    for other in ("payload", "payload_file", "payload_size"):
        if getattr(options, other) not in (None, 0) and not options.ping:
            pairs.append((other, "grpc_method" if options.grpc_method else "uri", True))
    for other in ("request_body_size", "template", "http1_0", "content_type",
                  "request_source_plugin_config", "replay"):
        pairs.append((other, "uri", bool(getattr(options, other))))
    for a, b, clash in pairs:
        if clash:
            if b == "uri":
                raise PydanticCustomError(
                    "options_file", "{a}: {msg}",
                    {"a": a, "msg": "does not apply to gRPC runs (grpc://, grpcs://); "
                     + ("the ping's payload goes with --ping, a method's message in "
                        "--grpc-payload" if a.startswith("payload") else
                        "the request is the gRPC message")},
                )
            raise PydanticCustomError(
                "options_conflict", "{a}: mutually exclusive with {b}", {"a": a, "b": b}
            )
    if options.grpc_ping_delay is not None and not options.ping:
        raise PydanticCustomError(
            "options_file", "{a}: {msg}", {"a": "grpc_ping_delay", "msg": "needs --ping"}
        )
    if options.payload_file is not None and options.ping:
        raise PydanticCustomError(
            "options_file", "{a}: {msg}",
            {"a": "payload_file", "msg": "the ping's payload is --payload or --payload-size"},
        )
    if options.request_method not in ("GET", "POST"):
        raise PydanticCustomError(
            "options_file", "{a}: {msg}",
            {"a": "request_method", "msg": "a gRPC call is always a POST "
             f"(got {options.request_method})"},
        )
    if options.multi_target_endpoint or options.unix_socket is not None:
        raise PydanticCustomError(
            "options_file", "{a}: {msg}",
            {"a": "multi_target_endpoint" if options.multi_target_endpoint else "unix_socket",
             "msg": "is not supported for gRPC runs"},
        )


def check_http3(options: Options, info: ValidationInfo) -> None:
    """Options HTTP/3 cannot honour are refused rather than ignored: its QUIC handshake
    is TLS 1.3 on GnuTLS (ngtcp2_crypto_gnutls), which takes no OpenSSL cipher strings
    from us, and it runs on a UDP socket (docs/protocols.md "HTTP/3")."""
    if options.protocol != "http3":
        return
    mapped = options.tls_context_options or {}
    given = {**{name: getattr(options, name) for name in options.model_fields_set}, **mapped}
    reasons = {
        "tls_ciphers": "TLS 1.2 cipher lists do not apply to HTTP/3 (QUIC is TLS 1.3 only)",
        "tls_ciphersuites": "not supported over HTTP/3 (its TLS 1.3 runs on GnuTLS, which "
                            "takes no OpenSSL cipher names)",
        "tls_groups": "not supported over HTTP/3 (its TLS 1.3 runs on GnuTLS, which takes "
                      "no OpenSSL group names)",
        "tls_session_reuse": "not supported over HTTP/3 (every QUIC connection makes a full "
                             "handshake; no resumption, no 0-RTT)",
        "http1_0": "does not apply to HTTP/3",
        "template": "not supported over HTTP/3",
    }
    for name, reason in reasons.items():
        value = given.get(name)
        if value is None or value is False or value == ():
            continue
        if name == "tls_session_reuse" and name not in options.model_fields_set:
            continue
        raise PydanticCustomError("options_file", "{a}: {msg}", {"a": name, "msg": reason})
    for name in ("tls_min_version", "tls_max_version"):
        if given.get(name) == "1.2":
            raise PydanticCustomError(
                "options_file", "{a}: {msg}",
                {"a": name, "msg": "HTTP/3 runs over QUIC, which is TLS 1.3 only"},
            )
    alpn = given.get("alpn")
    if alpn is not None and tuple(alpn) != ("h3",):
        raise PydanticCustomError(
            "options_file", "{a}: {msg}",
            {"a": "alpn", "msg": "HTTP/3 offers h3 only (got " + ",".join(alpn) + ")"},
        )
    if options.unix_socket_path is not None:
        raise PydanticCustomError(
            "options_file", "{a}: {msg}",
            {"a": "unix_socket", "msg": "HTTP/3 runs over UDP, not a Unix socket"},
        )
