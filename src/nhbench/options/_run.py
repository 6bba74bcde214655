"""`Options`: every setting of a run, validated, with Nighthawk's names.

Python spells the options in snake_case (``max_pending_requests``); the CLI spells the same
options as Nighthawk's flags (``--max-pending-requests``). Everything is validated here, once,
so the C core only ever sees sane values, and every error names the option and the allowed
range (see `format_validation_error`).

Units and conventions:

* Times (``duration``, ``timeout``, ``request_timeout``, ``drain_timeout``, ``start_delay``)
  are seconds as floats; strings with a unit are accepted too: ``"5"``, ``"5s"``,
  ``"500ms"``, ``"250us"``, ``"2m"``, ``"1h"``.
* ``rps`` and ``connections`` are per worker, as in Nighthawk: ``concurrency=4, rps=1000``
  asks for 4000 requests per second in total.
* ``percentiles`` are percentages, the way people type them (``50, 90, 99, 99.9``): the same
  convention as `Statistic.p` (``result.latency.p(99)``). The output reports them as
  Nighthawk does, as fractions (``"percentile": 0.99``), exactly at the asked points.
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal
from urllib.parse import quote, urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from .._exceptions import OptionsError
from .._input import InputError, check_input, limit_of
from .._predicates import DEFAULT_FAILURE_PREDICATES, parse_predicates
from .._request import MAX_TEMPLATED_REQUEST, METHODS, template_problem
from ._errors import format_validation_error
from ._flags import Flag
from ._rules import StopRule
from ._targets import (
    MAX_TARGETS,
    UNIX_HOST,
    check_source_address,
    check_unix_path,
    check_unix_socket,
    endpoint_authority,
    parse_bind_config,
    parse_endpoint,
    parse_source_address,
    parse_unix_url,
)
from ._tls_context import parse_tls_context, parse_transport_socket
from ._values import (
    MAX_DURATION,
    affinity_cpus,
    format_address,
    format_cpu_list,
    machine_cpus,
    parse_address,
    parse_cpu_list,
    parse_duration,
    parse_header,
    parse_worker_count,
)

__all__ = [
    "Options",
    "Target",
    "VERBOSITY_LEVELS",
    "DEFAULT_PERCENTILES",
    "affinity_cpus",
    "format_cpu_list",
    "format_validation_error",
    "machine_cpus",
    "make_options",
    "parse_cpu_list",
    "parse_duration",
    "parse_uri",
]

UINT32_MAX = 2**32 - 1
# Nighthawk's default for --max-concurrent-streams, its way of saying "no limit".
MAX_CONCURRENT_STREAMS_UNLIMITED = 2**31 - 1
# Every in-flight HTTP/2 request has a slot allocated before the run; this bounds the memory.
MAX_ACTIVE_REQUESTS = 1_000_000
DEFAULT_DURATION = 5.0
# Live statistics: an interval shorter than the CLI's 0.1 s wake-up would print lines faster
# than anyone reads them, with too few samples each for a p99; the core's own floor is 1 ms.
MIN_STATS_INTERVAL = 0.1
MAX_STATS_INTERVAL = 3600.0
# The interval --prometheus-listen uses when --stats-interval is not given.
DEFAULT_STATS_INTERVAL = 1.0
DEFAULT_PERCENTILES: tuple[float, ...] = (50.0, 75.0, 90.0, 99.0, 99.9, 99.99)
#: The most percentiles one run reports (docs/reliability.md).
MAX_PERCENTILES = 1000
# Schedule shapes (issue 13). Jitter beyond an hour is a typo, not a schedule. A count of
# 10^12 releases outlasts any run yet stays exact in the core's arithmetic. 100 stages cover
# any test plan; an explicit schedule of 10 million entries is 80 MB per run in the core.
MAX_JITTER = 3600.0
MAX_REQUESTS = 10**12
MAX_STAGES = 100
MAX_SCHEDULE_OFFSETS = 10_000_000
# --scheduled-start: a start this far in the past is a moment of slack (the time the options
# take to validate and the run to set up); more than 24 h ahead is almost surely a typo.
SCHEDULED_START_SLACK = 1.0
MAX_SCHEDULED_START_AHEAD = 86400.0
# The request (head and body) is rendered once and kept in memory by every worker; 64 MiB is
# far beyond any sensible load-test body while keeping a typo from allocating gigabytes.
MAX_REQUEST_BODY_SIZE = 64 * 1024 * 1024

# Issue 13, observation and verbosity. A response header name longer than this is not a
# header anyone sends; the bound turns a pasted value into a clear error.
MAX_LATENCY_HEADER_NAME = 256
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# Nighthawk's --verbosity levels, most verbose first.
VERBOSITY_LEVELS: tuple[str, ...] = ("trace", "debug", "info", "warn", "error", "critical")
# Fortio's -loglevel names (and "warning") onto Nighthawk's levels. Fortio's Debug and
# Verbose are both below Info: they map onto debug, the level whose word they share.
_VERBOSITY_ALIASES = {"verbose": "debug", "warning": "warn", "fatal": "critical"}

Method = Literal["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE", "CONNECT"]
assert set(METHODS) == set(Method.__args__)  # type: ignore[attr-defined]


# --------------------------------------------------------------------------------------------
# Parsers for the value syntaxes only the run accepts (the shared ones are in _values). Their
# ValueError messages are written to follow "<option>: " directly.
# --------------------------------------------------------------------------------------------

def check_ca_file(path: str) -> None:
    """Raise ValueError with OpenSSL's reason when `path` holds no CA certificate it can load.

    Python's ssl module runs on the system OpenSSL, the one the core links, so a file it
    cannot load the core's SSL_CTX_load_verify_locations cannot load either. Checking here
    makes a bad --cacert invalid input (exit 2, nothing started) rather than a failed run.
    """
    import ssl

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        context.load_verify_locations(cafile=path)
    except ssl.SSLError as exc:
        text = str(exc.args[1] if len(exc.args) > 1 else exc)
        reason = re.sub(r"\s*\(_ssl\.c:\d+\)$", "", text).strip() or "unknown reason"
        raise ValueError(f"OpenSSL cannot load CA certificates from {path!r}: {reason}") \
            from None
    except OSError as exc:
        raise ValueError(f"cannot read {path!r}: {exc.strerror or exc}") from None


@dataclass(frozen=True)
class Target:
    """The parts of the URI the run needs."""

    scheme: str
    host: str  # host name or IP literal, without brackets
    port: int
    path: str  # request-target: path plus ?query, never empty
    authority: str  # the Host header value: host, plus :port when not the default
    # http://unix:/path.sock:/request-path: the Unix socket to connect to (issue 13).
    unix_socket: str | None = None

    @property
    def url(self) -> str:
        if self.unix_socket is not None:
            return f"{self.scheme}://unix:{self.unix_socket}:{self.path}"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}{self.path}"


_HOSTNAME_RE = re.compile(
    r"^(?=.{1,253}\.?$)[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?"
    r"(?:\.[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?)*\.?$"
)


_DEFAULT_PORTS = {"http": 80, "https": 443, "grpc": 80, "grpcs": 443}
# Issue 14, gRPC: a method path as gRPC clients send it (/package.Service/Method).
_GRPC_METHOD_RE = re.compile(r"/[A-Za-z0-9_.]+/[A-Za-z0-9_]+")
#: The largest --grpc-payload: gRPC's default maximum message size (4 MiB).
GRPC_MAX_PAYLOAD = limit_of("grpc-payload")
#: What a gRPC run adds to the default failure predicates: a call that ended with a non-OK
#: grpc-status or broke the gRPC protocol fails the run, as a 5xx or a reset does.
GRPC_DEFAULT_FAILURE_PREDICATES = {"benchmark.grpc_error": 0, "benchmark.grpc_protocol_error": 0}
# Issue 14 (docs/protocols.md): echo targets have no standard port, so the URI must name one.
_ECHO_SCHEMES = ("tcp", "udp")
#: Issue 14: the options an echo run refuses (an echo request is the payload alone).
ECHO_REFUSED_OPTIONS = (
    "request_method", "request_header", "request_body_size", "content_type", "template",
    "http1_0", "protocol", "h2c", "max_concurrent_streams", "max_active_requests", "sni",
    "alpn", "cacert", "insecure", "tls_ciphers", "tls_ciphersuites", "tls_groups",
    "tls_min_version", "tls_max_version", "tls_session_reuse", "tls_context",
    "transport_socket", "request_source_plugin_config", "replay", "unix_socket",
    "latency_response_header_name",
)
#: Issue 14: a udp:// request's time-out when --request-timeout is not given (seconds).
ECHO_UDP_DEFAULT_TIMEOUT = 1.0
#: Issue 14: the largest udp:// payload: 65507 bytes (the largest UDP payload over IPv4)
#: minus the 8-byte sequence number (C: NHB_ECHO_UDP_MAX_PAYLOAD).
ECHO_UDP_MAX_PAYLOAD = 65499


def echo_scheme(uri: object) -> str | None:
    """Issue 14: ``tcp`` or ``udp`` for an echo URI, else None (also for no URI)."""
    if not isinstance(uri, str):
        return None
    scheme = uri.strip().split("://", 1)[0].lower() if "://" in uri else ""
    return scheme if scheme in _ECHO_SCHEMES else None


_SCHEMES_TEXT = "http://, https://, grpc://, grpcs://, tcp:// and udp://"


def parse_uri(uri: object) -> Target:
    """Check the URI and split it into what the run needs.

    ``http://`` and ``https://``; issue 14 added ``grpc://`` (gRPC over h2c), ``grpcs://``
    (gRPC over TLS), and the echo targets ``tcp://host:port`` and ``udp://host:port``.
    """
    if not isinstance(uri, str) or not uri.strip():
        raise ValueError("must be a URL such as http://127.0.0.1:8080/")
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in uri):
        raise ValueError(f"must not contain spaces or control characters (got {uri!r})")
    lowered = uri.lower()
    unix = parse_unix_url(uri)
    if unix is not None:
        scheme, socket_path, request_path = unix
        check_unix_path(socket_path)
        safe = "/%:@!$&'()*+,;=-._~?"
        return Target(
            scheme=scheme, host=UNIX_HOST, port=_DEFAULT_PORTS[scheme],
            path=quote(request_path, safe=safe), authority=UNIX_HOST, unix_socket=socket_path,
        )
    if lowered.startswith(("unix:", "http+unix:", "https+unix:", "/")) or re.match(
        r"^https?://unix:[^0-9]", lowered
    ):
        # The test server listens on unix:PATH, so people try the same spelling here.
        raise ValueError(
            "Unix domain sockets are written http://unix:/path/to.sock:/request-path, or "
            f"--unix-socket PATH with an http:// or https:// URL (got {uri!r})"
        )
    if "://" not in uri:
        # Suggest the fix only when the text looks like a host[:port][/path] that just lacks
        # the scheme; for anything else (such as "http//x") the suggestion would be nonsense.
        if "//" not in uri and re.match(
            r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)(:\d+)?(/|$)", uri
        ):
            raise ValueError(f"must start with http://, e.g. http://{uri} (got {uri!r})")
        raise ValueError(f"must start with http:// or https:// (got {uri!r})")
    try:
        parts = urlsplit(uri)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"malformed URL ({exc}) (got {uri!r})") from None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS and scheme not in _ECHO_SCHEMES:
        raise ValueError(
            f"unsupported scheme {scheme + '://'!r}, only {_SCHEMES_TEXT} are supported"
        )
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"user information in the URL is not supported (got {uri!r})")
    host = parts.hostname
    if not host:
        raise ValueError(f"malformed URL: no host (got {uri!r})")
    if ":" in host:
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f"malformed URL: bad IPv6 address {host!r} (got {uri!r})") from None
    elif not _HOSTNAME_RE.match(host):
        raise ValueError(f"malformed URL: bad host name {host!r} (got {uri!r})")
    if port == 0:
        raise ValueError(f"port must be in 1..65535 (got {uri!r})")
    if scheme in _ECHO_SCHEMES:
        # An echo target is an address: no path, no query, and a port it must name.
        if port is None:
            raise ValueError(f"{scheme}:// needs a port, e.g. {scheme}://127.0.0.1:8078 "
                             f"(got {uri!r})")
        if parts.path not in ("", "/") or parts.query or parts.fragment:
            raise ValueError(f"{scheme}:// takes no path or query (got {uri!r})")
        bracketed = f"[{host}]" if ":" in host else host
        return Target(scheme=scheme, host=host, port=port, path="/",
                      authority=f"{bracketed}:{port}")
    # Non-ASCII characters in the path are percent-encoded (as a browser would); everything
    # already valid in a request-target, including existing %XX escapes, is left alone.
    safe = "/%:@!$&'()*+,;=-._~"
    path = quote(parts.path, safe=safe) or "/"
    if parts.query:
        path += "?" + quote(parts.query, safe=safe + "?")
    bracketed = f"[{host}]" if ":" in host else host
    default_port = _DEFAULT_PORTS[scheme]
    authority = bracketed if port in (None, default_port) else f"{bracketed}:{port}"
    return Target(
        scheme=scheme, host=host, port=port or default_port, path=path, authority=authority
    )


def parse_stages(value: object) -> tuple[tuple[float, float], ...]:
    """``["30s:1000", "2m:0"]`` (or pairs) -> ((30.0, 1000.0), (120.0, 0.0))."""
    items = _as_tuple(value)
    if not isinstance(items, (list, tuple)):
        raise ValueError(f"must be TIME:RPS such as 30s:1000 (got {value!r})")
    out = []
    for item in items:
        if isinstance(item, str):
            time_text, sep, rate_text = item.strip().rpartition(":")
            if not sep or not time_text:
                raise ValueError(f"must be TIME:RPS such as 30s:1000 (got {item!r})")
        elif isinstance(item, (list, tuple)) and len(item) == 2:
            time_text, rate_text = item
        else:
            raise ValueError(f"must be TIME:RPS such as 30s:1000 (got {item!r})")
        seconds = parse_duration(time_text)
        if not 0 < seconds <= MAX_DURATION:
            raise ValueError(f"a stage lasts more than 0 s and at most {MAX_DURATION:g} s "
                             f"(got {item!r})")
        try:
            rate = float(rate_text)
        except (TypeError, ValueError):
            raise ValueError(f"RPS must be a number, e.g. 30s:1000 (got {item!r})") from None
        if not 0 <= rate <= 1_000_000 or math.isnan(rate):
            raise ValueError(f"RPS must be 0-1000000 per worker (got {item!r})")
        out.append((seconds, rate))
    if len(out) > MAX_STAGES:
        raise ValueError(f"at most {MAX_STAGES} stages (got {len(out)})")
    return tuple(out)


def parse_scheduled_start(value: object, *, check_now: bool = True) -> float:
    """RFC 3339 text or epoch seconds -> epoch seconds; with `check_now`, refused when in
    the past (beyond a moment) or more than 24 h ahead."""
    import time
    from datetime import datetime, timezone

    if isinstance(value, bool):
        raise ValueError(f"must be RFC 3339 or epoch seconds (got {value!r})")
    epoch: float
    if isinstance(value, (int, float)):
        epoch = float(value)
    elif isinstance(value, datetime):
        epoch = value.timestamp() if value.tzinfo else value.replace(
            tzinfo=timezone.utc).timestamp()
    elif isinstance(value, str):
        text = value.strip()
        if re.fullmatch(r"[0-9]+(\.[0-9]*)?", text):
            epoch = float(text)
        else:
            try:
                when = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
            except ValueError:
                raise ValueError(
                    f"must be RFC 3339 (2030-01-01T12:00:00Z) or epoch seconds (got {value!r})"
                ) from None
            if when.tzinfo is None:
                raise ValueError(f"must name its time zone, e.g. a trailing Z (got {value!r})")
            epoch = when.timestamp()
    else:
        raise ValueError(f"must be RFC 3339 or epoch seconds (got {value!r})")
    if not math.isfinite(epoch) or epoch <= 0:
        raise ValueError(f"must be RFC 3339 or epoch seconds (got {value!r})")
    if check_now:
        now = time.time()
        if epoch < now - SCHEDULED_START_SLACK:
            raise ValueError(f"is in the past by {now - epoch:.3g} s (got {value!r})")
        if epoch > now + MAX_SCHEDULED_START_AHEAD:
            raise ValueError(f"is more than 24 h ahead (got {value!r})")
    return epoch


def parse_schedule_offsets(value: object) -> tuple[float, ...] | None:
    """A non-decreasing list of seconds >= 0 (``schedule_offsets``)."""
    if value is None:
        return None
    if isinstance(value, str):
        value = [item for item in value.replace(" ", "").split(",") if item]
    if not isinstance(value, (list, tuple)):
        raise ValueError("must be a list of seconds")
    try:
        offsets = tuple(float(item) for item in value)
    except (TypeError, ValueError):
        raise ValueError("must be a list of seconds") from None
    if not offsets:
        raise ValueError("must list at least one offset")
    if len(offsets) > MAX_SCHEDULE_OFFSETS:
        raise ValueError(f"at most {MAX_SCHEDULE_OFFSETS} entries (got {len(offsets)})")
    for i, seconds in enumerate(offsets):
        if not 0 <= seconds <= MAX_DURATION or math.isnan(seconds):
            raise ValueError(f"entry {i} must be 0-{MAX_DURATION:g} s (got {seconds!r})")
        if i and seconds < offsets[i - 1]:
            raise ValueError(f"must not decrease (entry {i}: {seconds!r} after "
                             f"{offsets[i - 1]!r})")
    return offsets
# The TLS options (_tls_needs_https refuses them on an http:// URI).
_TLS_FIELDS = (
    "sni", "alpn", "cacert", "insecure", "tls_ciphers", "tls_ciphersuites", "tls_groups",
    "tls_min_version", "tls_max_version", "tls_session_reuse", "tls_context",
    "transport_socket",
)


class _NoUri(str):
    """The URI's value when the options give several targets instead (Nighthawk's rule: one
    or the other): "" that `Options._check_uri` knows from a URI typed as ""."""

    __slots__ = ()


def _scheme(info: ValidationInfo) -> str | None:
    # The URI is the first field, so other fields' validators see it (when it was valid).
    uri = info.data.get("uri")
    return urlsplit(uri).scheme.lower() if isinstance(uri, str) else None


def _uri_scheme(uri: str) -> str | None:
    # The scheme of a URI that may be malformed (the URI's own validator says how).
    try:
        return urlsplit(uri.strip()).scheme.lower()
    except ValueError:
        return None


def _lower(value: object) -> object:
    return value.strip().lower() if isinstance(value, str) else value


def _as_tuple(value: object) -> object:
    # A single string given where a list is expected is one item, not a list of characters.
    return (value,) if isinstance(value, str) else value


def _percent_from_text(item: object) -> float:
    if isinstance(item, bool):
        raise ValueError
    number = float(item)  # type: ignore[arg-type]
    if not (0 < number <= 100) or math.isnan(number):
        raise ValueError
    return number


# --------------------------------------------------------------------------------------------
# The model.
# --------------------------------------------------------------------------------------------


class Options(BaseModel):
    """All the options of a run. Construct with keywords; instances are immutable.

    ``Options(uri="http://127.0.0.1:8080/", rps=1000, duration="10s")``
    """

    # defer_build: the validator is built on the first validation, not when the class is
    # defined, so that importing the options package costs little (docs/benchmarks.md,
    # "Start-up"); validation and its messages are the same either way.
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=False,
                              defer_build=True)

    uri: Annotated[str, Flag(positional=True, optional=True, metavar="URI")] = Field(
        description="Target URL: http:// or https:// (TLS; certificates are verified unless "
        "insecure), or http://unix:/path/to.sock:/request-path for a Unix socket. Not with "
        "multi_target_endpoint."
    )
    # Fortio's spellings (issue 13) are aliases where they mean the same thing: -qps, -c,
    # -t, -H, -X, -timeout, -abort-on, -labels, -cacert, -https-insecure, -h2
    # (docs/options.md, "Fortio's single-dash flags").
    rps: Annotated[float, Flag(metavar="N", aliases=("-qps",))] = Field(
        # The upper bound is Nighthawk's (1 to 1000000 per worker) and the C core's
        # NHB_MAX_RPS: far above what one worker can send, so overload runs stay possible.
        default=5.0, ge=0, le=1_000_000, allow_inf_nan=False,
        description="Target requests per second, per worker (at most 1000000). 0 = as fast "
        "as the connections allow (closed loop).",
    )
    connections: Annotated[int, Flag(metavar="N", aliases=("-c",))] = Field(
        default=100, ge=1, le=1_000_000,
        description="Maximum concurrent connections, per worker.",
    )
    concurrency: Annotated[int | Literal["auto"], Flag(metavar="N|auto")] = Field(
        default=1,
        description="Number of workers (threads with their own event loop, each pinned to "
        "one CPU), or 'auto' for one per CPU in the process affinity mask.",
    )
    cpus: Annotated[tuple[int, ...] | None, Flag(metavar="LIST")] = Field(
        default=None,
        description="CPUs to pin workers to, as a cpu list such as 2,4-7. Without "
        "--concurrency, one worker per listed CPU.",
    )
    # The upper bound keeps the duration far inside the core's int64 nanoseconds (a larger
    # value overflowed there); no benchmark runs for a year, and --no-duration exists.
    duration: Annotated[float | None, Flag(metavar="TIME", aliases=("-t",))] = Field(
        default=None, gt=0, le=MAX_DURATION,
        description=f"How long to send requests, in seconds or with a unit (5s, 500ms, 2m). "
        f"Default {DEFAULT_DURATION:g} s. Mutually exclusive with no_duration.",
    )
    no_duration: Annotated[bool, Flag()] = Field(
        default=False,
        description="Run until a predicate fires or the run is stopped (SIGINT/SIGTERM). "
        "The default failure predicates still apply.",
    )
    timeout: Annotated[float, Flag(metavar="TIME")] = Field(
        default=30.0, gt=0, le=3600,
        description="Connection connect timeout in seconds.",
    )
    request_timeout: Annotated[float, Flag(metavar="TIME", aliases=("-timeout",))] = Field(
        default=30.0, ge=0, le=3600,
        description="Per-request timeout in seconds (0 = none); a timed-out request counts "
        "in benchmark.request_timeout and its connection is closed. udp:// echo: 1 s unless "
        "given, and the socket is kept (docs/protocols.md).",
    )
    request_method: Annotated[
        Method, Flag(metavar="METHOD", aliases=("-X",))
    ] = Field(
        default="GET", description="Request method."
    )
    request_header: Annotated[
        tuple[str, ...], Flag(metavar="'NAME: VALUE'", append=True, aliases=("-H",))
    ] = Field(
        default=(),
        description="Extra request headers as 'name: value'; repeatable. A Host or "
        "User-Agent header replaces nhbench's own.",
    )
    request_body_size: Annotated[int, Flag(metavar="BYTES")] = Field(
        default=0, ge=0, le=MAX_REQUEST_BODY_SIZE,
        description="Request body size in bytes; the body is that many 'a' characters.",
    )
    max_pending_requests: Annotated[int, Flag(metavar="N")] = Field(
        default=0, ge=0, le=UINT32_MAX,
        description="Per worker: requests that may wait for a free connection "
        "(0 = no client-side queueing).",
    )
    max_requests_per_connection: Annotated[int, Flag(metavar="N")] = Field(
        default=0, ge=0, le=UINT32_MAX,
        description="Requests after which a connection is closed and replaced (0 = "
        "unlimited; Nighthawk's default 4294967295 means the same).",
    )
    prefetch_connections: Annotated[bool, Flag()] = Field(
        default=False, description="Open all connections before the first request is released."
    )
    open_loop: Annotated[bool, Flag()] = Field(
        default=False,
        description="No back-pressure: a release that finds no free connection queues (up to "
        "max_pending_requests) or is dropped and counted in benchmark.pool_overflow, instead "
        "of blocking the schedule.",
    )
    sequencer_idle_strategy: Annotated[
        Literal["spin", "poll", "sleep"], Flag(metavar="spin|poll|sleep", default="")
    ] = Field(
        default="poll",
        description="How a worker waits for the next release: 'poll' (default) arms a timerfd "
        "watched by the event loop - sub-millisecond precise and cheap; 'spin' busy-polls - "
        "most precise, burns the CPU; 'sleep' uses the loop's millisecond timer - cheapest, "
        "coarsest.",
    )
    burst_size: Annotated[int, Flag(metavar="N")] = Field(
        default=0, ge=0, le=1_000_000,
        description="Release requests in bursts of this size (0 or 1 = no bursting).",
    )
    failure_predicate: Annotated[dict[str, int], Flag(metavar="COUNTER:N", append=True)] = Field(
        default_factory=dict,
        description="'counter:threshold'; repeatable. The run stops and fails when the "
        "counter exceeds the threshold. Added to (and overriding) the defaults "
        + ", ".join(f"{k}:{v}" for k, v in DEFAULT_FAILURE_PREDICATES.items()) + ".",
    )
    termination_predicate: Annotated[
        dict[str, int], Flag(metavar="COUNTER:N", append=True)
    ] = Field(
        default_factory=dict,
        description="'counter:threshold'; repeatable. The run stops (successfully) when the "
        "counter exceeds the threshold.",
    )
    abort_on: Annotated[int | None, Flag(metavar="CODE", aliases=("-abort-on",))] = Field(
        default=None, ge=100, le=599,
        description="Stop and fail the run on the first response with this status code, as "
        "Fortio's -abort-on: the failure predicate benchmark.http_CODE:0.",
    )
    no_default_failure_predicates: Annotated[bool, Flag()] = Field(
        default=False, description="Do not add the default failure predicates."
    )
    allow_no_success: Annotated[bool, Flag()] = Field(
        default=False,
        description="Accept a run (or sweep step) in which no request succeeded, i.e. got a "
        "2xx response. Without it such a run fails: exit status 1 and one line saying why.",
    )
    slo: Annotated[tuple[str, ...], Flag(metavar="RULE", append=True)] = Field(
        default=(),
        description="A service-level objective checked on the result, such as 'p99<5ms', "
        "'error_rate<0.1%', 'rps>=1990' or 'benchmark.http_5xx==0' (docs/pytest.md); "
        "repeatable. The verdict table goes to stderr; a breach exits 99.",
    )
    percentiles: Annotated[tuple[float, ...], Flag(metavar="P,P,...")] = Field(
        default=DEFAULT_PERCENTILES,
        description="Percentiles to report, in percent (50,90,99.9). Reported exactly at "
        "these points, plus min and max. At most 1000.",
    )
    output_format: Annotated[
        Literal["human", "json", "yaml", "dotted", "csv", "fortio",
                "experimental_fortio_pedantic", "prometheus"],
        Flag(metavar="FORMAT"),
    ] = Field(
        default="human",
        description="Output format: human (nhbench's report), or one of Nighthawk's: json, "
        "yaml, dotted, csv, fortio, experimental_fortio_pedantic, prometheus "
        "(docs/outputs.md).",
    )
    output: Annotated[str | None, Flag(metavar="FILE")] = Field(
        default=None, description="Write the output to this file instead of stdout: a regular "
        "file is replaced atomically (its permissions kept); -, a FIFO or a device such as "
        "/dev/null is streamed into; a symbolic link is followed (docs/reliability.md)."
    )
    output_dir: Annotated[str | None, Flag(metavar="DIR", default="")] = Field(
        default=None, description="Write the output into this directory (created if missing) "
        "under a new name, <UTC YYYY-MM-DD-HHMMSS>_<labels>.<ext>, as Fortio's -a does; an "
        "existing file is never overwritten. Prints the path written. Not with output."
    )
    hdr_log: Annotated[str | None, Flag(metavar="FILE", default="")] = Field(
        default=None, description="Also write the latency histograms as an HdrHistogram log "
        "(HistogramLogWriter's format, values in ns): one histogram per interval with "
        "stats_interval on, else one per statistic for the whole run (docs/outputs.md)."
    )
    label: Annotated[
        tuple[str, ...], Flag(metavar="TEXT", append=True, aliases=("-labels",))
    ] = Field(
        default=(), description="Labels kept in the output; repeatable."
    )
    address_family: Annotated[
        Literal["auto", "v4", "v6"], Flag(metavar="auto|v4|v6", default="")
    ] = Field(
        default="auto",
        description="Address family used when the host name resolves to several: 'auto' "
        "prefers IPv4, then IPv6.",
    )
    drain_timeout: Annotated[float, Flag(metavar="TIME")] = Field(
        default=5.0, ge=0, le=3600,
        description="After the duration ends, how long to wait for requests in flight.",
    )
    start_delay: Annotated[float, Flag(metavar="TIME")] = Field(
        default=0.2, ge=0, le=60,
        description="Time between starting the workers and the first release (connections "
        "are prefetched in it).",
    )
    # ---- live statistics (docs/live.md) --------------------------------------------------
    stats_interval: Annotated[
        float | None, Flag(metavar="TIME|off", default="", group="Live statistics")
    ] = Field(
        default=None, ge=0, le=MAX_STATS_INTERVAL,
        description="Close an interval this often: one line per interval on stderr (CLI) "
        "and one record in result.timeline (latency over time). 0 or off disables. "
        f"At least {MIN_STATS_INTERVAL:g} s. Default: 1s when stderr is a terminal (CLI), "
        "else off; with prometheus_listen, 1s.",
    )
    prometheus_listen: Annotated[
        str | None, Flag(metavar="HOST:PORT", default="", group="Live statistics")
    ] = Field(
        default=None,
        description="Serve live counters and interval latencies for Prometheus on "
        "http://HOST:PORT/metrics while the run goes (needs prometheus-client: pip install "
        "'nhbench[prometheus]'). Port 0 picks a free port; the address is printed on stderr.",
    )
    # ---- protocol ------------------------------------------------------------------------
    protocol: Annotated[
        Literal["http1", "http2", "http3"],
        Flag(metavar="http1|http2|http3", aliases=("-p",),
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
    # ---- TLS -----------------------------------------------------------------------------
    sni: Annotated[str | None, Flag(metavar="NAME", group="TLS (https:// URIs)")] = Field(
        default=None,
        description="TLS server name to send and to check the certificate against (default: "
        "the URI's host; no SNI is sent for an IP address).",
    )
    alpn: Annotated[
        tuple[str, ...] | None, Flag(metavar="ID,ID", group="TLS (https:// URIs)")
    ] = Field(
        default=None,
        description="TLS ALPN protocol ids to offer, comma-separated (default: h2 for "
        "protocol http2, http/1.1 otherwise). The server's choice must match the protocol.",
    )
    cacert: Annotated[
        str | None, Flag(metavar="FILE", aliases=("-cacert",), group="TLS (https:// URIs)")
    ] = Field(
        default=None,
        description="PEM file (or OpenSSL hashed directory) of CA certificates to trust "
        "instead of the system store.",
    )
    insecure: Annotated[
        bool, Flag(aliases=("-k", "-https-insecure"), group="TLS (https:// URIs)")
    ] = Field(
        default=False,
        description="Do not verify the server's certificate (the result records that it was "
        "not verified).",
    )
    tls_ciphers: Annotated[str | None, Flag(metavar="LIST", group="TLS (https:// URIs)")] = Field(
        default=None, description="TLS 1.2 cipher list, OpenSSL syntax (ECDHE-RSA-AES128-GCM-"
        "SHA256:...)."
    )
    tls_ciphersuites: Annotated[
        str | None, Flag(metavar="LIST", group="TLS (https:// URIs)")
    ] = Field(
        default=None, description="TLS 1.3 cipher suites, colon-separated "
        "(TLS_AES_128_GCM_SHA256:...)."
    )
    tls_groups: Annotated[str | None, Flag(metavar="LIST", group="TLS (https:// URIs)")] = Field(
        default=None, description="TLS key exchange groups, colon-separated (X25519:P-256)."
    )
    tls_min_version: Annotated[
        Literal["1.2", "1.3"] | None, Flag(metavar="1.2|1.3", group="TLS (https:// URIs)")
    ] = Field(
        default=None, description="Lowest TLS version to accept: 1.2 (default) or 1.3."
    )
    tls_max_version: Annotated[
        Literal["1.2", "1.3"] | None, Flag(metavar="1.2|1.3", group="TLS (https:// URIs)")
    ] = Field(
        default=None, description="Highest TLS version to offer: 1.2 or 1.3 (default)."
    )
    tls_session_reuse: Annotated[
        bool, Flag(metavar="on|off", default="", group="TLS (https:// URIs)")
    ] = Field(
        default=True,
        description="Resume TLS sessions on new connections (on, the default, as Envoy "
        "does); off makes a full handshake on every connection, the usual lab practice.",
    )

    # ---- issue 13: schedule shapes (jitter, no-catchup, stages, exact count, warm-up) -------
    jitter_uniform: Annotated[
        float | None, Flag(metavar="TIME", default="", group="Schedule shapes")
    ] = Field(
        default=None, ge=0, le=MAX_JITTER,
        description="Delay each release by a uniform random time in [0, TIME] (Nighthawk's "
        "--jitter-uniform); the jittered time is the release's scheduled time, so latency "
        "counts from it.",
    )
    jitter: Annotated[bool, Flag(aliases=("-jitter",), group="Schedule shapes")] = Field(
        default=False,
        description="Move each release by a uniform random +-10% of the interval (Fortio's "
        "-jitter). Needs a rate.",
    )
    uniform: Annotated[bool, Flag(aliases=("-uniform",), group="Schedule shapes")] = Field(
        default=False,
        description="Spread the workers' first releases over one interval (Fortio's "
        "-uniform). nhbench always does so; accepted for Fortio command lines.",
    )
    no_catchup: Annotated[bool, Flag(aliases=("-nocatchup",), group="Schedule shapes")] = Field(
        default=False,
        description="A release late by an interval or more moves the rest of the schedule "
        "instead of bursting to catch up (Fortio's -nocatchup). Hides the wait from latency "
        "(coordinated omission); reported in result.schedule. Needs a rate.",
    )
    requests: Annotated[int | None, Flag(metavar="N", aliases=("-n",), group="Schedule shapes")] = Field(
        default=None, ge=1, le=MAX_REQUESTS,
        description="Make exactly N releases in all (Fortio's -n), split across the workers, "
        "then drain and end. Without duration the run has no time limit; with one, whichever "
        "comes first ends it.",
    )
    stage: Annotated[
        tuple[tuple[float, float], ...],
        Flag(metavar="TIME:RPS", append=True, group="Schedule shapes"),
    ] = Field(
        default=(),
        description="A linear stage: ramp the per-worker rate from the previous stage's "
        "(0 before the first) to RPS over TIME; repeatable (--stage 30s:1000 --stage "
        "2m:1000 --stage 30s:0). The run lasts the stages' sum. Not with rps, duration.",
    )
    warmup: Annotated[float | None, Flag(metavar="TIME", default="", group="Schedule shapes")] = Field(
        default=None, gt=0, le=MAX_DURATION,
        description="A warm-up phase of TIME at the run's rate before the measured one; its "
        "results are kept apart (result.warmup).",
    )
    simple_warmup: Annotated[bool, Flag(group="Schedule shapes")] = Field(
        default=False,
        description="One warm-up request per worker before the measured phase (Nighthawk's "
        "--simple-warmup); kept apart in result.warmup.",
    )
    sequential_warmup: Annotated[
        bool, Flag(aliases=("-sequential-warmup",), group="Schedule shapes")
    ] = Field(
        default=False,
        description="Before the measured phase, open every connection and send one warm-up "
        "request per connection, one after another (Fortio's -sequential-warmup); kept "
        "apart in result.warmup.",
    )
    allow_initial_errors: Annotated[
        bool, Flag(aliases=("-allow-initial-errors",), group="Schedule shapes")
    ] = Field(
        default=False,
        description="Errors during the warm-up do not fail the run (Fortio's "
        "-allow-initial-errors): failure predicates are judged on the measured phase only.",
    )
    scheduled_start: Annotated[
        float | None, Flag(metavar="TIME", default="", group="Schedule shapes")
    ] = Field(
        default=None,
        description="Start the first release at this wall-clock time: RFC 3339 "
        "(2030-01-01T12:00:00Z) or epoch seconds (Nighthawk's --scheduled-start). At most "
        "24 h ahead; a time in the past is refused. Replaces start_delay.",
    )
    execution_id: Annotated[str | None, Flag(metavar="ID", default="", group="Schedule shapes")] = Field(
        default=None, max_length=256,
        description="An id recorded in the result and in Nighthawk's output options "
        "(Nighthawk's --execution-id).",
    )
    # An explicit schedule (request sources' replay sets it from a recording): each worker
    # releases request k at offset k (seconds after its start), exactly that many requests.
    schedule_offsets: Annotated[
        tuple[float, ...] | None, Flag(metavar="S,S,...", default="", group="Schedule shapes")
    ] = Field(
        default=None,
        description="Seconds after each worker's start at which it releases request k, "
        "non-decreasing (0,0.5,0.5,2); exactly that many requests per worker, then the run "
        "ends. rps is ignored. Set by replaying a recording's timing.",
    )

    # ---- issue 13: what is sent (payloads, content type, templating) ------------------------

    payload: Annotated[str | None, Flag(metavar="TEXT", aliases=("-payload",))] = Field(
        default=None,
        description="Request body: this text (UTF-8). A payload switches the method to POST "
        "unless --request-method is given, and sets Content-Type: application/octet-stream "
        "unless one is given (as Fortio does).",
    )
    payload_file: Annotated[str | None, Flag(metavar="FILE", aliases=("-payload-file",))] = Field(
        default=None,
        description="Request body: the bytes of this file (at most 64 MiB), read once before "
        "the run. Switches to POST like --payload.",
    )
    payload_size: Annotated[int | None, Flag(metavar="BYTES", aliases=("-payload-size",))] = Field(
        default=None, ge=0, le=MAX_REQUEST_BODY_SIZE,
        description="Request body: this many random bytes, drawn once per run and sent with "
        "every request (Fortio's -payload-size; --request-body-size sends 'a' bytes). "
        "Switches to POST like --payload when above 0. tcp:// and udp:// echo: the payload "
        "(24 random bytes without a payload option).",
    )
    content_type: Annotated[str | None, Flag(metavar="TYPE", aliases=("-content-type",))] = Field(
        default=None,
        description="Content-Type request header; switches the method to POST unless "
        "--request-method is given (as Fortio's -content-type does).",
    )
    template: Annotated[bool, Flag()] = Field(
        default=False,
        description="Expand {seq}, {uuid}, {rand:N} and {worker} in the path, header values "
        "and body of every request (docs/engine.md). Off: braces are sent as they are.",
    )
    http1_0: Annotated[bool, Flag(name="--http1.0", aliases=("-http1.0",))] = Field(
        default=False,
        description="Send HTTP/1.0 requests as Fortio's -http1.0 does: no Host header unless "
        "one is given, no keep-alive (a new connection for every request).",
    )

    # ---- issue 13: request sources (Nighthawk plugins, HAR and access-log replay) -----------

    request_source_plugin_config: Annotated[
        str | None, Flag(metavar="JSON|YAML", group="Request sources and replay")
    ] = Field(
        default=None,
        description="Nighthawk's request source plugin config (JSON, its relaxed JSON or "
        "YAML): nighthawk.in-line-options-list-request-source-plugin with an options_list, "
        "or nighthawk.file-based-request-source-plugin with a file_path; each worker cycles "
        "through the list; num_requests ends the run after that many requests per worker "
        "(docs/engine.md).",
    )
    replay: Annotated[
        str | None, Flag(metavar="FILE", group="Request sources and replay")
    ] = Field(
        default=None,
        description="Replay the requests of a HAR file or an nginx (combined/common) or "
        "Envoy (default format) access log: method, path, headers and body as each format "
        "records them; the run's URI stays the target. Each worker cycles through them in "
        "order.",
    )
    replay_format: Annotated[
        Literal["auto", "har", "nginx", "envoy"],
        Flag(metavar="auto|har|nginx|envoy", group="Request sources and replay"),
    ] = Field(
        default="auto",
        description="The format of the replay file: auto (a .har name or JSON is HAR; a "
        "line starting with '[' is Envoy's, others nginx's).",
    )
    replay_timing: Annotated[
        Literal["rate", "original"],
        Flag(metavar="rate|original", group="Request sources and replay"),
    ] = Field(
        default="rate",
        description="rate: the replayed requests go at --rps; original: at their recorded "
        "times (from the first), each worker once through the file, then the run ends.",
    )

    # ---- issue 13: targets and transport (multi-target, reuse, source address, unix) --------
    multi_target_endpoint: Annotated[
        tuple[str, ...], Flag(metavar="HOST:PORT", append=True, group="Targets and transport")
    ] = Field(
        default=(),
        description="A target endpoint, IPv4:port, [IPv6]:port or DNS:port; repeatable. "
        "Requests go round robin over the endpoints, each worker from the first. Instead of "
        "the URI (Nighthawk's rule), with multi_target_path. connections is the total over "
        "the endpoints, split evenly (at least one each).",
    )
    multi_target_path: Annotated[
        str | None, Flag(metavar="PATH", group="Targets and transport")
    ] = Field(
        default=None,
        description="The absolute path (plus ?query) requested from every endpoint; "
        "required with multi_target_endpoint.",
    )
    multi_target_use_https: Annotated[bool, Flag(group="Targets and transport")] = Field(
        default=False,
        description="Connect to the endpoints with TLS (https) instead of plain HTTP.",
    )
    experimental_h1_connection_reuse_strategy: Annotated[
        Literal["mru", "lru"], Flag(metavar="mru|lru", group="Targets and transport")
    ] = Field(
        default="mru",
        description="HTTP/1: which idle connection takes the next request: mru (the most "
        "recently used, so a light load stays on few connections) or lru (the least "
        "recently used: requests spread over all connections). HTTP/2 ignores it.",
    )
    source_address: Annotated[
        str | None, Flag(metavar="ADDR", group="Targets and transport")
    ] = Field(
        default=None,
        description="Bind outgoing connections to this local IPv4 or IPv6 address (the "
        "kernel picks the port), e.g. 127.0.0.2. Not with a Unix socket.",
    )
    upstream_bind_config: Annotated[
        str | None, Flag(metavar="JSON", group="Targets and transport")
    ] = Field(
        default=None,
        description="Nighthawk's spelling of source_address: Envoy's BindConfig as JSON, "
        '{"source_address": {"address": "127.0.0.2", "port_value": 0}}; other fields are '
        "refused by name.",
    )
    unix_socket: Annotated[
        str | None,
        Flag(metavar="PATH", aliases=("-unix-socket",), group="Targets and transport"),
    ] = Field(
        default=None,
        description="Connect to this Unix socket instead of the URI's host and port (as "
        "Fortio's -unix-socket and curl's --unix-socket); the URI still gives the Host "
        "header, the scheme and the path.",
    )
    tls_context: Annotated[
        str | None, Flag(metavar="JSON", group="Targets and transport")
    ] = Field(
        default=None,
        description="Nighthawk's --tls-context: Envoy's UpstreamTlsContext as JSON, mapped "
        "onto the TLS options (sni, alpn, versions, ciphers, curves, trusted CA, "
        "ACCEPT_UNTRUSTED, max_session_keys; docs/engine.md); allow_renegotiation may "
        "only be false (nhbench never renegotiates); other fields are refused by name.",
    )
    transport_socket: Annotated[
        str | None, Flag(metavar="JSON", group="Targets and transport")
    ] = Field(
        default=None,
        description="Nighthawk's --transport-socket: Envoy's TransportSocket as JSON, the "
        "TLS one (typed_config an UpstreamTlsContext), mapped as tls_context.",
    )

    # ---- issue 14: echo (tcp:// and udp://) -----------------------------------------------

    # ---- issue 14: gRPC ------------------------------------------------------------------
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

    # ---- issue 14: HTTP/3 ----------------------------------------------------------------

    # ---- issue 15: distributed load (Ray) -----------------------------------------------
    ray: Annotated[
        str | None,
        Flag(metavar="ADDRESS", const="auto", default="", group="Distributed load (Ray)"),
    ] = Field(
        default=None,
        description="Generate the load from the nodes of a Ray cluster (docs/distributed.md): "
        "one load actor per node, each running these options (its own --concurrency, "
        "--cpus and --rps per worker), all started at one scheduled time, their "
        "histograms and counters merged exactly. ADDRESS is Ray's: 'auto' (the default "
        "when --ray is given alone: the cluster this machine belongs to, or RAY_ADDRESS), "
        "HOST:PORT of the head's GCS, or ray://HOST:PORT (Ray Client). Needs "
        "pip install 'nhbench[ray]'.",
    )
    hosts: Annotated[int | None, Flag(metavar="N", group="Distributed load (Ray)")] = Field(
        default=None, ge=1, le=10_000,
        description="With --ray: how many nodes generate load (one load actor each). "
        "Default: every alive node of the cluster.",
    )

    # ---- issue 13: observation and verbosity ------------------------------------------------
    latency_response_header_name: Annotated[
        str | None, Flag(metavar="NAME", default="")
    ] = Field(
        default=None,
        description="Response header whose value, a non-negative integer of nanoseconds, "
        "is recorded in the benchmark_http_client.origin_latency_statistic histogram "
        "(Nighthawk's option; the test server's "
        "--emit-previous-request-delta-in-response-header emits one). Malformed values are "
        "counted in benchmark.origin_latency_header_errors.",
    )
    verbosity: Annotated[
        Literal["trace", "debug", "info", "warn", "error", "critical"],
        Flag(metavar="LEVEL", aliases=("-v", "-loglevel")),
    ] = Field(
        default="info",
        description="What nhbench prints on stderr: trace, debug (also the resolved "
        "address, the core config and per-worker counters), info (notes and live lines), "
        "warn or error (only problems), critical. Nighthawk's levels; Fortio's -loglevel "
        "names (Debug, Verbose, Info, Warning, Error, Critical, Fatal) are accepted too.",
    )


    # ---- value syntaxes -------------------------------------------------------------------

    @model_validator(mode="before")
    @classmethod
    def _duration_default(cls, data: Any) -> Any:
        # duration and no_duration are mutually exclusive, as in Nighthawk. The default of 5 s
        # is filled in here rather than as a field default so that an explicit duration can
        # be told apart from the default one, and so that a no_duration run echoes
        # duration=None (which validates again, unlike duration=5 with no_duration=True).
        if not isinstance(data, Mapping):
            return data
        if data.get("cpus") is not None and data.get("concurrency") is None:
            # Listing CPUs without a worker count means one worker per listed CPU. Writing
            # that down as concurrency="auto" keeps the echo of the options self-contained:
            # it means the same thing when the echo is loaded again.
            data = {**data, "concurrency": "auto"}
        no_duration = data.get("no_duration", False)
        if no_duration in (True, 1, "1") or (
            isinstance(no_duration, str) and no_duration.strip().lower() in ("true", "yes", "on")
        ):
            if data.get("duration") is not None:
                raise PydanticCustomError(
                    "options_conflict",
                    "{a}: mutually exclusive with {b}",
                    {"a": "no_duration", "b": "duration"},
                )
        elif data.get("duration") is None:
            data = {**data, "duration": DEFAULT_DURATION}
        return data

    @model_validator(mode="before")
    @classmethod
    def _h2c_means_http2(cls, data: Any) -> Any:
        # h2c is protocol http2 spelled for cleartext; writing the protocol down keeps the
        # echo of the options self-explanatory.
        if not isinstance(data, Mapping) or data.get("h2c") not in (True, 1, "1", "true", "on"):
            return data
        protocol = data.get("protocol")
        if protocol is not None and _lower(protocol) != "http2":
            raise PydanticCustomError(
                "options_conflict", "{a}: mutually exclusive with {b}",
                {"a": "h2c", "b": "protocol"},
            )
        return {**data, "protocol": "http2"}

    @field_validator("uri", mode="before")
    @classmethod
    def _check_uri(cls, value: object) -> object:
        if isinstance(value, _NoUri):
            # No URI: several targets stand for it (_multi_target_uri).
            return ""
        parse_uri(value)
        return value.strip() if isinstance(value, str) else value

    @field_validator(
        "duration", "timeout", "request_timeout", "drain_timeout", "start_delay", mode="before"
    )
    @classmethod
    def _parse_duration(cls, value: object) -> object:
        return None if value is None else parse_duration(value)

    @field_validator("stats_interval", mode="before")
    @classmethod
    def _parse_stats_interval(cls, value: object) -> object:
        if value is None:
            return None
        if isinstance(value, str) and value.strip().lower() in ("off", "no", "none", "false"):
            return 0.0
        seconds = parse_duration(value)
        if 0 < seconds < MIN_STATS_INTERVAL:
            raise ValueError(
                f"must be 0 (off) or at least {MIN_STATS_INTERVAL:g} s (got {value!r})"
            )
        return seconds

    @field_validator("prometheus_listen", mode="before")
    @classmethod
    def _parse_prometheus_listen(cls, value: object) -> object:
        if value is None:
            return None
        return format_address(*parse_address(value))

    @field_validator("concurrency", mode="before")
    @classmethod
    def _parse_concurrency(cls, value: object) -> object:
        return parse_worker_count(value, 4096)

    @field_validator("cpus", mode="before")
    @classmethod
    def _parse_cpus(cls, value: object, info: ValidationInfo) -> object:
        # The CPUs that exist and the affinity mask belong to this machine and this process.
        # A result written elsewhere still has to load, so the echo of options inside a Result
        # is validated with context {"echo": True}, which checks only the syntax and bound.
        if value is None:
            return None
        echo = bool((info.context or {}).get("echo"))
        return tuple(parse_cpu_list(value, None if echo else "affinity"))

    @field_validator("request_method", mode="before")
    @classmethod
    def _upper_method(cls, value: object) -> object:
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("sequencer_idle_strategy", "output_format", "address_family", mode="before")
    @classmethod
    def _lower_choice(cls, value: object) -> object:
        return _lower(value)

    @field_validator("request_header", mode="before")
    @classmethod
    def _check_headers(cls, value: object) -> object:
        value = _as_tuple(value)
        if isinstance(value, (list, tuple)):
            normalized = []
            for item in value:
                name, header_value = parse_header(item)
                normalized.append(f"{name}: {header_value}")
            return tuple(normalized)
        return value

    @field_validator("label", mode="before")
    @classmethod
    def _labels(cls, value: object) -> object:
        return _as_tuple(value)

    @field_validator("slo", mode="before")
    @classmethod
    def _parse_slo(cls, value: object) -> object:
        # Parsed here so that a malformed rule is refused before any load is sent; kept as
        # the expressions written, which is what the result's echo and every message show.
        rules = _as_tuple(value)
        if isinstance(rules, (list, tuple)):
            return tuple(str(StopRule.parse(rule)) for rule in rules)
        return rules

    @field_validator("max_requests_per_connection")
    @classmethod
    def _unlimited_requests(cls, value: int) -> int:
        # Nighthawk's default (2^32-1) is its way of saying "unlimited"; store the same
        # meaning in one spelling so the C core has a single special value, 0.
        return 0 if value == UINT32_MAX else value

    @field_validator("failure_predicate", "termination_predicate", mode="before")
    @classmethod
    def _parse_predicates(cls, value: object) -> object:
        return parse_predicates(value)

    @field_validator("percentiles", mode="before")
    @classmethod
    def _parse_percentiles(cls, value: object) -> object:
        items: Any = value.split(",") if isinstance(value, str) else value
        if isinstance(items, (int, float)):
            items = [items]
        try:
            items = list(items)
        except TypeError:
            raise ValueError(
                f"must be percentages in (0, 100], e.g. 50,90,99.9 (got {value!r})"
            ) from None
        if len(items) > MAX_PERCENTILES:
            # Each one is a row of every report and a lookup in every histogram: 99,999 of
            # them took 17.7 s and 676 MB to report a 0.5 s run.
            raise ValueError(f"at most {MAX_PERCENTILES} percentiles (got {len(items)})")
        try:
            numbers = [_percent_from_text(item) for item in items]
        except (TypeError, ValueError):
            raise ValueError(
                f"must be percentages in (0, 100], e.g. 50,90,99.9 (got {value!r})"
            ) from None
        if not numbers:
            raise ValueError("must name at least one percentile, e.g. 50,90,99.9")
        return tuple(sorted(set(numbers)))

    @field_validator("protocol", mode="before")
    @classmethod
    def _parse_protocol(cls, value: object) -> object:
        value = _lower(value)
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
        if value == "http3" and _scheme(info) not in (None, "https"):
            raise ValueError("http3 runs over QUIC, whose handshake is TLS 1.3: the URI must "
                             "be https://")
        return value

    @field_validator("h2c")
    @classmethod
    def _check_h2c(cls, value: bool, info: ValidationInfo) -> bool:
        if value and _scheme(info) == "https":
            raise ValueError(
                "is HTTP/2 without TLS, but the URI is https:// (use protocol http2 for "
                "HTTP/2 over TLS)"
            )
        return value

    @field_validator(
        "sni", "alpn", "cacert", "insecure", "tls_ciphers", "tls_ciphersuites", "tls_groups",
        "tls_min_version", "tls_max_version", "tls_session_reuse",
    )
    @classmethod
    def _tls_needs_https(cls, value: object, info: ValidationInfo) -> object:
        # A TLS setting on an http:// URI would silently do nothing; that is almost always a
        # mistake worth saying (a setting left at its default is fine).
        default = cls.model_fields[info.field_name or ""].default
        if value != default and _scheme(info) == "http":
            raise ValueError("only applies to https:// URIs")
        if value != default and _scheme(info) == "grpc":
            # grpc:// is cleartext h2c; a CA given with it must not be dropped silently
            # (with --grpc and a bare host:port or http://, a --cacert asks for grpcs://).
            raise ValueError("only applies to grpcs:// URIs (grpc:// is cleartext)")
        return value

    @field_validator("sni", mode="before")
    @classmethod
    def _check_sni(cls, value: object) -> object:
        if value is None:
            return None
        if not isinstance(value, str) or not _HOSTNAME_RE.match(value.strip().lower()):
            raise ValueError(f"must be a DNS host name (got {value!r})")
        return value.strip().lower().rstrip(".")

    @field_validator("alpn", mode="before")
    @classmethod
    def _parse_alpn(cls, value: Any) -> object:
        if value is None:
            return None
        items = value.split(",") if isinstance(value, str) else value
        try:
            ids = [str(item).strip() for item in items]
        except TypeError:
            raise ValueError(f"must be protocol ids such as h2,http/1.1 (got {value!r})") from None
        if not ids or any(not 0 < len(i) < 256 or not i.isascii() or not i.isprintable()
                          or "," in i or " " in i for i in ids):
            raise ValueError(f"must be protocol ids such as h2,http/1.1 (got {value!r})")
        return tuple(ids)

    @field_validator("cacert")
    @classmethod
    def _check_cacert(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return None
        path = os.path.expanduser(value)
        # The file belongs to the machine of the run: the echo of options in a Result
        # written elsewhere must load without it.
        if (info.context or {}).get("echo"):
            return path
        if not os.path.exists(path):
            raise ValueError(f"no such file or directory: {value!r}")
        if not os.access(path, os.R_OK):
            raise ValueError(f"not readable: {value!r}")
        if not os.path.isdir(path):  # a directory is a hashed CA directory (c_rehash)
            check_ca_file(path)
        return path

    @field_validator("tls_ciphers")
    @classmethod
    def _check_ciphers(cls, value: str | None) -> str | None:
        if value is None:
            return None
        import ssl

        # Python's ssl module runs on OpenSSL too: a list it rejects, the core would reject.
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).set_ciphers(value)
        except ssl.SSLError:
            raise ValueError(f"OpenSSL knows none of these ciphers (got {value!r})") from None
        return value

    @field_validator("tls_ciphersuites", "tls_groups")
    @classmethod
    def _check_colon_list(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[A-Za-z0-9_\-]+(:[A-Za-z0-9_\-]+)*", value):
            raise ValueError(f"must be names separated by colons (got {value!r})")
        return value

    @field_validator("tls_min_version", "tls_max_version", mode="before")
    @classmethod
    def _parse_tls_version(cls, value: object) -> object:
        if isinstance(value, str):
            text = value.strip().lower().replace("tlsv", "").replace("tls", "").strip()
            return text
        if isinstance(value, float):
            return f"{value:.1f}"
        return value

    @field_validator("tls_max_version")
    @classmethod
    def _check_tls_versions(cls, value: str | None, info: ValidationInfo) -> str | None:
        low = info.data.get("tls_min_version")
        if value is not None and low is not None and float(low) > float(value):
            raise ValueError(f"must not be below tls_min_version {low} (got {value})")
        return value

    @field_validator("output", "hdr_log")
    @classmethod
    def _check_output(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must be a file path (got an empty string)")
        return value

    @field_validator("output_dir")
    @classmethod
    def _check_output_dir(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return value
        if not value.strip():
            raise ValueError("must be a directory path (got an empty string)")
        if "\0" in value:
            raise ValueError(f"must not contain a NUL character (got {value!r})")
        if info.data.get("output") is not None:
            # Both name where the one output goes; which one wins would be a guess.
            raise PydanticCustomError(
                "options_conflict", "{a}: mutually exclusive with {b}",
                {"a": "output_dir", "b": "output"},
            )
        return value

    # ---- requests (issue 13): payloads, content type, templating, HTTP/1.0 ----------------

    @model_validator(mode="before")
    @classmethod
    def _payload_means_post(cls, data: Any) -> Any:
        # Fortio's rule: a payload or a content type makes the request a POST unless a method
        # is given. Writing POST down here keeps the echo of the options saying what was sent.
        if not isinstance(data, Mapping) or data.get("request_method") is not None:
            return data
        if echo_scheme(data.get("uri")) is not None:
            return data  # issue 14: an echo request has no method
        size = data.get("payload_size")
        try:
            sized = size is not None and int(size) > 0
        except (TypeError, ValueError):
            sized = False  # the field's own validator says what is wrong with it
        if data.get("payload") or data.get("payload_file") is not None or sized \
                or data.get("content_type"):
            return {**data, "request_method": "POST"}
        return data

    @field_validator("payload", "payload_file", "payload_size")
    @classmethod
    def _one_payload(cls, value: object, info: ValidationInfo) -> object:
        if value is None or (info.field_name == "payload_size" and value == 0):
            return value
        # One body: which of two would win is a guess (Fortio silently prefers the file).
        for other in ("payload", "payload_file", "payload_size"):
            if other == info.field_name:
                break
            if info.data.get(other) not in (None, 0):
                raise PydanticCustomError(
                    "options_conflict", "{a}: mutually exclusive with {b}",
                    {"a": info.field_name or "", "b": other},
                )
        if info.data.get("request_body_size"):
            raise PydanticCustomError(
                "options_conflict", "{a}: mutually exclusive with {b}",
                {"a": info.field_name or "", "b": "request_body_size"},
            )
        return value

    @field_validator("payload_file")
    @classmethod
    def _check_payload_file(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return None
        path = os.path.expanduser(value)
        # The file belongs to the machine of the run (see cacert).
        if (info.context or {}).get("echo"):
            return path
        try:
            return check_input(path, "payload")
        except InputError as exc:
            raise ValueError(f"{exc.reason} (got {value!r})") from None

    @field_validator("content_type")
    @classmethod
    def _check_content_type(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return None
        name, checked = parse_header(f"Content-Type: {value}")
        if not checked:
            raise ValueError("must not be empty")
        headers = info.data.get("request_header") or ()
        if any(str(item).split(":", 1)[0].strip().lower() == "content-type" for item in headers):
            raise ValueError("a Content-Type request header is given too; give one of them")
        return checked

    @field_validator("template")
    @classmethod
    def _check_template(cls, value: bool, info: ValidationInfo) -> bool:
        if not value:
            return value
        # Every placeholder-looking word is checked before the run: a typo such as {sequence}
        # would otherwise be sent as it is, and nobody would notice.
        places: list[tuple[str, str]] = [("the URI", str(info.data.get("uri") or ""))]
        places += [("a request header", str(h)) for h in info.data.get("request_header") or ()]
        if info.data.get("payload") is not None:
            places.append(("the payload", str(info.data["payload"])))
        body_size = int(info.data.get("payload_size") or info.data.get("request_body_size") or 0)
        file = info.data.get("payload_file")
        if file is not None and not (info.context or {}).get("echo"):
            with open(file, "rb") as handle:
                data = handle.read(MAX_TEMPLATED_REQUEST + 1)
            places.append(("the payload file", data.decode("latin-1")))
            body_size = len(data)
        for where, text in places:
            problem = template_problem(text)
            if problem is not None:
                raise PydanticCustomError(
                    "options_file", "{a}: {msg}",
                    {"a": "template", "msg": problem.replace(" (known", f" in {where} (known")
                     if " (known" in problem else f"{problem} (in {where})"},
                )
        body_size = max(body_size, len(str(info.data.get("payload") or "").encode()))
        if body_size > MAX_TEMPLATED_REQUEST // 2:
            # Each connection (HTTP/1) or in-flight request (HTTP/2) gets a buffer for the
            # longest expansion; half of the core's bound leaves the head room to grow.
            raise PydanticCustomError(
                "options_file", "{a}: {msg}",
                {"a": "template", "msg": f"a templated body may be at most "
                 f"{MAX_TEMPLATED_REQUEST // 2} bytes (got {body_size})"},
            )
        return value

    @field_validator("http1_0")
    @classmethod
    def _check_http1_0(cls, value: bool, info: ValidationInfo) -> bool:
        if value and info.data.get("protocol") == "http2":
            raise PydanticCustomError(
                "options_conflict", "{a}: mutually exclusive with {b}",
                {"a": "http1_0", "b": "protocol"},
            )
        return value
    # ---- schedule shapes (issue 13) -------------------------------------------------------

    @model_validator(mode="before")
    @classmethod
    def _schedule_shapes_first(cls, data: Any, info: ValidationInfo) -> Any:
        # Stages set the rate and the duration themselves; a --requests run without a
        # duration has no time limit. Both decide before _duration_default fills in 5 s.
        # (The echo of options in a Result holds every field, rps included: not checked.)
        if not isinstance(data, Mapping):
            return data
        if data.get("stage"):
            echo = bool((info.context or {}).get("echo"))
            for other in ("rps", "duration"):
                if not echo and data.get(other) is not None:
                    raise PydanticCustomError(
                        "options_conflict", "{a}: mutually exclusive with {b}",
                        {"a": "stage", "b": other},
                    )
            data = {**data, "no_duration": True}
        elif (data.get("requests") is not None or data.get("schedule_offsets") is not None) \
                and data.get("duration") is None:
            data = {**data, "no_duration": True}
        return data

    @field_validator("jitter_uniform", "warmup", mode="before")
    @classmethod
    def _parse_schedule_time(cls, value: object) -> object:
        return None if value is None else parse_duration(value)

    @field_validator("stage", mode="before")
    @classmethod
    def _parse_stages(cls, value: object) -> object:
        return parse_stages(value)

    @field_validator("scheduled_start", mode="before")
    @classmethod
    def _parse_scheduled_start(cls, value: object, info: ValidationInfo) -> object:
        if value is None:
            return None
        echo = bool((info.context or {}).get("echo"))
        return parse_scheduled_start(value, check_now=not echo)

    @field_validator("execution_id")
    @classmethod
    def _check_execution_id(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or not value.isprintable()):
            raise ValueError(f"must be printable text (got {value!r})")
        return value

    @field_validator("schedule_offsets", mode="before")
    @classmethod
    def _parse_offsets(cls, value: object) -> object:
        return parse_schedule_offsets(value)

    @model_validator(mode="after")
    def _check_schedule_shapes(self) -> Options:
        def conflict(a: str, b: str) -> PydanticCustomError:
            return PydanticCustomError(
                "options_conflict", "{a}: mutually exclusive with {b}", {"a": a, "b": b}
            )
        warmups = [name for name in ("warmup", "simple_warmup", "sequential_warmup")
                   if getattr(self, name)]
        if len(warmups) > 1:
            raise conflict(warmups[1], warmups[0])
        if self.stage and self.schedule_offsets is not None:
            raise conflict("stage", "schedule_offsets")
        shaped = "stage" if self.stage else "schedule_offsets" if self.schedule_offsets else None
        if shaped is not None:
            for name in ("requests", "no_catchup", "jitter", "warmup"):
                if getattr(self, name):
                    raise conflict(name, shaped)
        needs_rate = "jitter" if self.jitter else "no_catchup" if self.no_catchup else None
        if needs_rate is not None and self.rps == 0 and shaped is None:
            raise PydanticCustomError(
                "options_needs", "{a}: needs {b} above 0", {"a": needs_rate, "b": "rps"}
            )
        return self

    # ---- sources (issue 13): request sources and replay -----------------------------------

    @field_validator("request_source_plugin_config", mode="before")
    @classmethod
    def _plugin_config_text(cls, value: object) -> object:
        # From Python the config may be given as the mapping itself; it is kept as JSON text,
        # the form the CLI takes, so that the echo of the options is the same either way.
        if isinstance(value, Mapping):
            import json

            return json.dumps(value)
        return value

    @field_validator("replay_format", "replay_timing", mode="before")
    @classmethod
    def _lower_source_choice(cls, value: object) -> object:
        return _lower(value)

    @model_validator(mode="before")
    @classmethod
    def _replay_offsets_first(cls, data: Any, info: ValidationInfo) -> Any:
        # A replay at the original pace is an explicit schedule: its offsets go in as if
        # given, and without a duration the run has no time limit, so that a replay is not
        # cut at the default 5 s but ends after its last request (said here rather than left
        # to the schedule's validator, which may run before this one: pydantic runs "before"
        # model validators last-defined first, and this one runs before _duration_default
        # whatever the order of the sections). A value the user gave as well is compared
        # after validation.
        if (not isinstance(data, Mapping) or (info.context or {}).get("echo")
                or "schedule_offsets" not in cls.model_fields
                or data.get("schedule_offsets") is not None
                or not isinstance(data.get("replay"), str)
                or _lower(data.get("replay_timing")) != "original"
                or data.get("request_source_plugin_config") is not None):
            return data
        from ._request_set import request_source_offsets

        try:
            offsets = request_source_offsets(str(data["replay"]),
                                             str(_lower(data.get("replay_format", "auto"))))
        except ValueError as exc:
            raise PydanticCustomError(
                "options_file", "{a}: {msg}", {"a": "replay", "msg": str(exc)}) from None
        data = {**data, "schedule_offsets": offsets}
        if data.get("duration") is None:
            data["no_duration"] = True
        return data

    @model_validator(mode="after")
    def _check_request_source(self, info: ValidationInfo) -> Options:
        # The source is read here, before any load, so that a bad file is bad input (one
        # line naming the file, the entry and the problem; exit 2). The file belongs to the
        # machine of the run: the echo of options in a Result written elsewhere is only
        # checked for its shape.
        if self.replay is None:
            for name, default in (("replay_format", "auto"), ("replay_timing", "rate")):
                if getattr(self, name) != default:
                    raise PydanticCustomError(
                        "options_needs", "{a}: needs {b}", {"a": name, "b": "replay"})
        elif self.request_source_plugin_config is not None:
            raise PydanticCustomError(
                "options_conflict", "{a}: mutually exclusive with {b}",
                {"a": "replay", "b": "request_source_plugin_config"})
        if (info.context or {}).get("echo"):
            return self
        from ._request_set import apply_source_schedule, request_source

        option = "replay" if self.replay is not None else "request_source_plugin_config"
        try:
            source = request_source(self)
        except ValueError as exc:
            raise PydanticCustomError(
                "options_file", "{a}: {msg}", {"a": option, "msg": str(exc)}) from None
        if source is not None:
            try:
                apply_source_schedule(self, source)
            except ValueError as exc:
                raise PydanticCustomError(
                    "options_file", "{a}: {msg}", {"a": option, "msg": str(exc)}) from None
        return self

    # ---- issue 13: observation and verbosity ----------------------------------------------

    @field_validator("latency_response_header_name", mode="before")
    @classmethod
    def _check_latency_header(cls, value: object) -> object:
        # Nighthawk lower-cases the name and treats "" as unset; the core compares names
        # case-insensitively against this lower-case form (HTTP/2 names are lower-case).
        if not isinstance(value, str):
            return value
        if value == "":
            return None
        if len(value) > MAX_LATENCY_HEADER_NAME:
            raise ValueError(f"must be a header name of at most {MAX_LATENCY_HEADER_NAME} "
                             f"characters (got {len(value)})")
        if not _TOKEN.fullmatch(value):
            raise ValueError(f"must be a header name (letters, digits and !#$%&'*+-.^_`|~; "
                             f"got {value!r})")
        return value.lower()

    @field_validator("verbosity", mode="before")
    @classmethod
    def _parse_verbosity(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        level = value.strip().lower()
        level = _VERBOSITY_ALIASES.get(level, level)
        if level not in VERBOSITY_LEVELS:
            raise ValueError(f"must be one of {', '.join(VERBOSITY_LEVELS)} (or Fortio's Debug, "
                             f"Verbose, Info, Warning, Error, Critical, Fatal; got {value!r})")
        return level

    # ---- issue 13: targets and transport ----------------------------------------------

    @model_validator(mode="before")
    @classmethod
    def _multi_target_uri(cls, data: Any) -> Any:
        # Nighthawk's rule: a URI or the --multi-target-* options, never both. The URI stays
        # a required field (so that leaving out both says "uri: is required"); endpoints
        # without a URI stand for it with "", which _check_targets accepts only with them.
        if isinstance(data, Mapping) and data.get("multi_target_endpoint") and (
            data.get("uri") in (None, "")
        ):
            return {**data, "uri": _NoUri()}
        return data

    @field_validator("multi_target_endpoint", mode="before")
    @classmethod
    def _parse_endpoints(cls, value: object) -> object:
        value = _as_tuple(value)
        if not isinstance(value, (list, tuple)):
            return value
        if len(value) > MAX_TARGETS:
            raise ValueError(f"at most {MAX_TARGETS} endpoints (got {len(value)})")
        endpoints = []
        for item in value:
            host, port = parse_endpoint(item)
            endpoints.append(f"[{host}]:{port}" if ":" in host else f"{host}:{port}")
        return tuple(endpoints)

    @field_validator("multi_target_path", mode="before")
    @classmethod
    def _check_multi_target_path(cls, value: object) -> object:
        if value is None:
            return None
        if not isinstance(value, str) or not value.startswith("/"):
            raise ValueError(f"must be an absolute path such as /index.html (got {value!r})")
        if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
            raise ValueError(f"must not contain spaces or control characters (got {value!r})")
        return quote(value, safe="/%:@!$&'()*+,;=-._~?")

    @field_validator("experimental_h1_connection_reuse_strategy", mode="before")
    @classmethod
    def _lower_reuse(cls, value: object) -> object:
        return _lower(value)

    @field_validator("source_address", mode="before")
    @classmethod
    def _check_source_address(cls, value: object, info: ValidationInfo) -> object:
        if value is None:
            return None
        address = parse_source_address(value)
        # The addresses belong to the machine of the run, not to that of a result's reader.
        if not (info.context or {}).get("echo"):
            check_source_address(address)
        return address

    @field_validator("upstream_bind_config", "tls_context", "transport_socket", mode="before")
    @classmethod
    def _json_text(cls, value: object, info: ValidationInfo) -> object:
        # A config file may give the object itself; it is kept as JSON text, as typed.
        if isinstance(value, Mapping):
            import json

            value = json.dumps(value)
        if value is None:
            return None
        if info.field_name == "upstream_bind_config":
            address = parse_bind_config(value)
            if not (info.context or {}).get("echo"):
                check_source_address(address)
        elif info.field_name == "tls_context":
            parse_tls_context(value)
        else:
            parse_transport_socket(value)
        return value

    @field_validator("unix_socket", mode="before")
    @classmethod
    def _check_unix_socket(cls, value: object, info: ValidationInfo) -> object:
        if value is None:
            return None
        path = os.path.expanduser(check_unix_path(value))
        if not (info.context or {}).get("echo"):
            check_unix_socket(path)
        return path

    @model_validator(mode="after")
    def _check_targets(self, info: ValidationInfo) -> Options:
        endpoints = self.multi_target_endpoint
        if self.uri and (endpoints or self.multi_target_path is not None
                         or self.multi_target_use_https):
            given = ("multi_target_endpoint" if endpoints else "multi_target_path"
                     if self.multi_target_path is not None else "multi_target_use_https")
            raise PydanticCustomError(
                "options_conflict", "{a}: mutually exclusive with {b}", {"a": given, "b": "uri"}
            )
        if endpoints and self.multi_target_path is None:
            raise PydanticCustomError(
                "options_needs", "{a}: needs {b}",
                {"a": "multi_target_endpoint", "b": "multi_target_path"},
            )
        if endpoints and not self.multi_target_use_https:
            # _tls_needs_https sees no URI here: the endpoints' scheme is the switch.
            for name in _TLS_FIELDS:
                if name in self.model_fields_set and getattr(self, name) != (
                    type(self).model_fields[name].default
                ):
                    raise PydanticCustomError(
                        "options_file", "{a}: {msg}",
                        {"a": name, "msg": "only applies to https:// targets (the endpoints are http:// "
                                "without --multi-target-use-https)"},
                    )
        unix_url = self.uri and parse_uri(self.uri).unix_socket is not None
        pairs = [
            ("upstream_bind_config", "source_address",
             self.upstream_bind_config is not None and self.source_address is not None),
            ("unix_socket", "uri", self.unix_socket is not None and unix_url),
            ("unix_socket", "multi_target_endpoint",
             self.unix_socket is not None and bool(endpoints)),
            ("source_address", "unix_socket",
             self.source_address is not None and self.unix_socket_path is not None),
            ("upstream_bind_config", "unix_socket",
             self.upstream_bind_config is not None and self.unix_socket_path is not None),
            ("transport_socket", "tls_context",
             self.transport_socket is not None and self.tls_context is not None),
        ]
        for a, b, clash in pairs:
            if clash:
                raise PydanticCustomError(
                    "options_conflict", "{a}: mutually exclusive with {b}", {"a": a, "b": b}
                )
        context_field = "tls_context" if self.tls_context is not None else "transport_socket"
        mapped = self.tls_context_options
        if mapped is None:
            return self
        # "{a}: {msg}" names the option as the user gave it (flag, config key or keyword).
        if self.target.scheme != "https":
            raise PydanticCustomError(
                "options_file", "{a}: {msg}",
                {"a": context_field, "msg": "only applies to https:// URIs"},
            )
        for option in mapped:
            if option in self.model_fields_set:
                raise PydanticCustomError(
                    "options_conflict", "{a}: mutually exclusive with {b}",
                    {"a": context_field, "b": option},
                )
        # The mapped values go through the same checks as the options themselves (a CA file
        # OpenSSL cannot load, unknown ciphers, ...).
        try:
            type(self).model_validate(
                {"uri": "https://localhost/", **mapped}, context=info.context
            )
        except ValidationError as exc:
            raise PydanticCustomError(
                "options_file", "{a}: {msg}",
                {"a": context_field, "msg": format_validation_error(exc, type(self))},
            ) from None
        return self

    # ---- issue 14: echo -------------------------------------------------------------------

    @model_validator(mode="before")
    @classmethod
    def _echo_options(cls, data: Any, info: ValidationInfo) -> Any:
        # A tcp:// or udp:// request is the payload alone: the options that shape an HTTP
        # request or its connection (headers, method, HTTP/2 and /3, TLS, templating, request
        # sources) would silently do nothing, so setting one is an error. Checked on the
        # options as given (before the request-shaping validators fill anything in); the
        # echo of options in a Result holds every field and was checked when it was made.
        if not isinstance(data, Mapping) or (info.context or {}).get("echo"):
            return data
        scheme = echo_scheme(data.get("uri"))
        if scheme is None:
            return data
        for name in ECHO_REFUSED_OPTIONS:
            value = data.get(name)
            if value is None or value is False or value == () or value == []:
                continue
            if value == cls.model_fields[name].default:
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

    @model_validator(mode="after")
    def _check_echo(self, info: ValidationInfo) -> Options:
        scheme = echo_scheme(self.uri)
        if scheme != "udp" or (info.context or {}).get("echo"):
            return self
        if self.request_timeout == 0:
            raise PydanticCustomError(
                "options_file", "{a}: {msg}",
                {"a": "request_timeout", "msg": "a udp:// run needs a time-out above 0: "
                 "a lost datagram would never end its request (got 0)"},
            )
        sizes = [("payload", len((self.payload or "").encode())),
                 ("payload_size", self.payload_size or 0)]
        if self.payload_file is not None:
            sizes.append(("payload_file", os.path.getsize(self.payload_file)))
        for name, size in sizes:
            if size > ECHO_UDP_MAX_PAYLOAD:
                raise PydanticCustomError(
                    "options_file", "{a}: {msg}",
                    {"a": name, "msg": f"a udp:// payload is at most {ECHO_UDP_MAX_PAYLOAD} "
                     f"bytes: one datagram carries it after an 8-byte sequence number "
                     f"(got {size} bytes)"},
                )
        return self

    # ---- issue 14: gRPC -------------------------------------------------------------------

    @model_validator(mode="before")
    @classmethod
    def _grpc_uri(cls, data: Any) -> Any:
        # Fortio's -grpc names the server with an http(s):// URL or a bare host:port; the
        # run is then what grpc:// or grpcs:// says, and the echo of the options says so.
        # A gRPC run is HTTP/2: the protocol is written down as such (or refused).
        if not isinstance(data, Mapping):
            return data
        uri = data.get("uri")
        if data.get("grpc") in (True, 1, "1", "true", "on") and isinstance(uri, str):
            text = uri.strip()
            lower = text.lower()
            # As Fortio's fgrpc.Dial: a -cacert makes the channel TLS whatever the URL's
            # scheme (it is the only way to ask for TLS with a bare host:port); without
            # it, https:// does. The port defaults stay the scheme's (80, 443, 8079).
            secure = bool(data.get("cacert"))
            if lower.startswith("http://"):
                text = ("grpcs://" if secure else "grpc://") + text[len("http://"):]
            elif lower.startswith("https://"):
                text = "grpcs://" + text[len("https://"):]
            elif "://" not in text and text:
                host = text.rstrip("/")
                has_port = re.search(r"(^\[[^]]*\]|^[^:\[]*):[0-9]+$", host) is not None
                text = ("grpcs://" if secure else "grpc://") + host + (
                    "" if has_port else ":8079")
            data = {**data, "uri": text}
            uri = text
        if isinstance(uri, str) and _uri_scheme(uri) in ("grpc", "grpcs"):
            protocol = data.get("protocol")
            if protocol is not None and _lower(protocol) not in ("http2", "h2", "2", "http/2"):
                raise PydanticCustomError(
                    "options_file", "{a}: {msg}",
                    {"a": "protocol", "msg": "gRPC runs over HTTP/2: grpc:// and grpcs:// "
                     f"take no other protocol (got {protocol!r})"},
                )
            data = {**data, "protocol": "http2"}
        return data

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

    @model_validator(mode="after")
    def _check_grpc(self) -> Options:
        grpc_fields = ("grpc_method", "grpc_payload", "grpc_service", "ping", "grpc_ping_delay",
                       "grpc_deadline")
        given = [f for f in grpc_fields if getattr(self, f) not in (None, False)]
        if not self.is_grpc:
            if given:
                raise PydanticCustomError(
                    "options_file", "{a}: {msg}",
                    {"a": given[0], "msg": "only applies to grpc:// and grpcs:// URIs (or "
                     "http(s):// with --grpc)"},
                )
            return self
        pairs = [
            ("ping", "grpc_method", self.ping and self.grpc_method is not None),
            ("ping", "grpc_payload", self.ping and self.grpc_payload is not None),
            ("grpc_service", "grpc_method", self.grpc_service is not None
             and self.grpc_method is not None),
            ("grpc_service", "ping", self.grpc_service is not None and self.ping),
        ]
        # The message is the gRPC options'; HTTP's body options would contradict it.
        for other in ("payload", "payload_file", "payload_size"):
            if getattr(self, other) not in (None, 0) and not self.ping:
                pairs.append((other, "grpc_method" if self.grpc_method else "uri", True))
        for other in ("request_body_size", "template", "http1_0", "content_type",
                      "request_source_plugin_config", "replay"):
            pairs.append((other, "uri", bool(getattr(self, other))))
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
        if self.grpc_ping_delay is not None and not self.ping:
            raise PydanticCustomError(
                "options_file", "{a}: {msg}", {"a": "grpc_ping_delay", "msg": "needs --ping"}
            )
        if self.payload_file is not None and self.ping:
            raise PydanticCustomError(
                "options_file", "{a}: {msg}",
                {"a": "payload_file", "msg": "the ping's payload is --payload or --payload-size"},
            )
        if self.request_method not in ("GET", "POST"):
            raise PydanticCustomError(
                "options_file", "{a}: {msg}",
                {"a": "request_method", "msg": "a gRPC call is always a POST "
                 f"(got {self.request_method})"},
            )
        if self.multi_target_endpoint or self.unix_socket is not None:
            raise PydanticCustomError(
                "options_file", "{a}: {msg}",
                {"a": "multi_target_endpoint" if self.multi_target_endpoint else "unix_socket",
                 "msg": "is not supported for gRPC runs"},
            )
        return self

    # ---- issue 14: HTTP/3 -----------------------------------------------------------------

    @model_validator(mode="after")
    def _check_http3(self) -> Options:
        """Options HTTP/3 cannot honour are refused rather than ignored: its QUIC handshake
        is TLS 1.3 on GnuTLS (ngtcp2_crypto_gnutls), which takes no OpenSSL cipher strings
        from us, and it runs on a UDP socket (docs/protocols.md "HTTP/3")."""
        if self.protocol != "http3":
            return self
        mapped = self.tls_context_options or {}
        given = {**{name: getattr(self, name) for name in self.model_fields_set}, **mapped}
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
            "source_address": "not supported over HTTP/3 (its UDP socket is not bound)",
            "upstream_bind_config": "not supported over HTTP/3 (its UDP socket is not bound)",
        }
        for name, reason in reasons.items():
            value = given.get(name)
            if value is None or value is False:
                continue
            if name == "tls_session_reuse" and name not in self.model_fields_set:
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
        if self.unix_socket_path is not None:
            raise PydanticCustomError(
                "options_file", "{a}: {msg}",
                {"a": "unix_socket", "msg": "HTTP/3 runs over UDP, not a Unix socket"},
            )
        return self

    # ---- issue 15: distributed load (Ray) -------------------------------------------------

    @model_validator(mode="before")
    @classmethod
    def _ray_address_is_not_the_url(cls, data: Any) -> Any:
        # `--ray` takes an optional value, so `nhbench run --ray http://host/` gives argparse
        # the URL as Ray's address. No Ray address has an nhbench scheme, so such a value is
        # the URL, and --ray was given alone.
        if not isinstance(data, Mapping):
            return data
        ray = data.get("ray")
        if isinstance(ray, str) and data.get("uri") is None and _uri_scheme(ray) in (
            "http", "https", "grpc", "grpcs", "tcp", "udp",
        ):
            data = {**data, "uri": ray, "ray": "auto"}
        return data

    @model_validator(mode="after")
    def _check_ray(self) -> Options:
        if self.ray is not None and not self.ray.strip():
            raise PydanticCustomError("options_file", "{a}: {msg}",
                                      {"a": "ray", "msg": "empty Ray address"})
        if self.hosts is not None and self.ray is None:
            raise PydanticCustomError("options_needs", "{a}: needs {b}",
                                      {"a": "hosts", "b": "ray"})
        return self

    # ---- derived values -------------------------------------------------------------------

    @property
    def is_grpc(self) -> bool:
        """Issue 14: a gRPC run (grpc:// or grpcs://, also from --grpc)."""
        return bool(self.uri) and self.target.scheme in ("grpc", "grpcs")

    @property
    def core_protocol(self) -> str:
        """The core's ``protocol`` key (issue 14): ``tcp``/``udp`` for echo URIs, ``http2``
        for gRPC (with the ``grpc`` key), else ``protocol``."""
        scheme = self.target.scheme
        if scheme in ("tcp", "udp"):
            return scheme
        if scheme in ("grpc", "grpcs"):
            return "http2"
        return self.protocol

    @property
    def core_scheme(self) -> str:
        """The core's ``scheme`` key: ``https`` when the connection speaks TLS (https://,
        grpcs://, and HTTP/3, whose QUIC handshake is TLS 1.3), else ``http``."""
        scheme = self.target.scheme
        if scheme in ("https", "grpcs") or self.protocol == "http3":
            return "https"
        return "http"

    @property
    def target(self) -> Target:
        """The parsed URI; with several targets and no URI, the first endpoint's."""
        if self.uri:
            return parse_uri(self.uri)
        return self.targets[0]

    @property
    def targets(self) -> list[Target]:
        """Several targets (multi_target_endpoint), in order; else the URI's one."""
        if not self.multi_target_endpoint:
            return [parse_uri(self.uri)]
        scheme = "https" if self.multi_target_use_https else "http"
        out = []
        for endpoint in self.multi_target_endpoint:
            host, port = parse_endpoint(endpoint)
            out.append(Target(
                scheme=scheme, host=host, port=port, path=self.multi_target_path or "/",
                authority=endpoint_authority(host, port, scheme),
            ))
        return out

    @property
    def unix_socket_path(self) -> str | None:
        """The Unix socket the connections go to (unix_socket or a unix URL), or None."""
        if self.unix_socket is not None:
            return self.unix_socket
        return parse_uri(self.uri).unix_socket if self.uri else None

    @property
    def tls_context_options(self) -> dict[str, Any] | None:
        """tls_context or transport_socket as the TLS options they set, or None."""
        if self.tls_context is not None:
            return parse_tls_context(self.tls_context)
        if self.transport_socket is not None:
            return parse_transport_socket(self.transport_socket)
        return None

    @property
    def worker_cpus(self) -> list[int]:
        """One entry per worker: the CPU it is pinned to.

        * ``concurrency`` 'auto': one worker per CPU of ``cpus`` if given, else one per CPU
          of the process affinity mask. Giving ``cpus`` without ``concurrency`` means 'auto'.
        * ``concurrency`` N: N workers pinned round-robin over ``cpus`` if given, else over
          the affinity mask.
        """
        pool = list(self.cpus) if self.cpus is not None else affinity_cpus()
        if self.concurrency == "auto":
            return pool
        count = int(self.concurrency)
        return [pool[i % len(pool)] for i in range(count)]

    @property
    def workers(self) -> int:
        """Number of workers the run uses."""
        return len(self.worker_cpus)

    @property
    def effective_duration(self) -> float | None:
        """Seconds to run, or None for no_duration."""
        if self.no_duration:
            return None
        return self.duration if self.duration is not None else DEFAULT_DURATION

    @property
    def effective_stats_interval(self) -> float:
        """Seconds per live-statistics interval, 0 when off: `stats_interval` when given,
        else 1 s with `prometheus_listen` (its latencies are per interval), else off. The CLI
        turns an unset value into 1 s when stderr is a terminal before the run."""
        if self.stats_interval is not None:
            return self.stats_interval
        return DEFAULT_STATS_INTERVAL if self.prometheus_listen else 0.0

    @property
    def failure_predicates(self) -> dict[str, int]:
        """The failure predicates in force: the defaults (unless disabled) and the user's."""
        base = {} if self.no_default_failure_predicates else dict(DEFAULT_FAILURE_PREDICATES)
        if base and echo_scheme(self.uri) is not None:
            # Issue 14: an echo that came back wrong fails an echo run, as a 5xx does HTTP.
            base["benchmark.echo_mismatch"] = 0
        if self.is_grpc and not self.no_default_failure_predicates:
            # Issue 14: a failed gRPC call comes with HTTP 200 (docs/protocols.md).
            base.update(GRPC_DEFAULT_FAILURE_PREDICATES)
        if self.abort_on is not None:
            base[f"benchmark.http_{self.abort_on}"] = 0
        base.update(self.failure_predicate)
        return base

    @property
    def percentile_points(self) -> list[float]:
        """The points to report as fractions in [0, 1], min (0) and max (1) included.

        Rounding to 10 decimals turns 99.9 / 100 = 0.9990000000000001 back into 0.999, so
        the output says exactly what was asked.
        """
        points = {0.0, 1.0, *(round(p / 100.0, 10) for p in self.percentiles)}
        return sorted(points)

    @property
    def headers(self) -> list[tuple[str, str]]:
        """The user's request headers as (name, value) pairs."""
        return [parse_header(item) for item in self.request_header]

    @property
    def tls_server_name(self) -> str | None:
        """The SNI to send: `sni`, else the URI's host unless it is an IP address."""
        if self.sni is not None:
            return self.sni
        host = self.target.host
        try:
            ipaddress.ip_address(host)
        except ValueError:
            return host.lower().rstrip(".")
        return None

    @property
    def tls_verify_name(self) -> str:
        """The name (or IP address) the server's certificate must be valid for."""
        return self.sni if self.sni is not None else self.target.host.lower().rstrip(".")


def make_options(uri: str | Options | None = None, /, **kwargs: Any) -> Options:
    """Build Options from a URI (or Options) plus keywords, raising a one-line OptionsError.

    ``make_options(opts, rps=10)`` returns a copy of `opts` with rps changed, validated again.
    """
    if isinstance(uri, Options):
        if not kwargs:
            return uri
        data = uri.model_dump(exclude_unset=True)
        data.update(kwargs)
    else:
        data = dict(kwargs)
        if uri is not None:
            data["uri"] = uri
    try:
        return Options.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        option = str(errors[0]["loc"][0]) if errors and errors[0].get("loc") else None
        raise OptionsError(format_validation_error(exc), option=option) from exc
