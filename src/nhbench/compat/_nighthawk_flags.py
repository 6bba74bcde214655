"""Every flag of ``nighthawk_client`` (its --help, Nighthawk's source/client/options_impl.cc)
and what ``nhbench nighthawk client`` makes of it: one `ForeignFlag` a flag, mapped onto
nhbench's `Options` with Nighthawk's meaning, or refused by name in one line.

Most flags have nhbench's own name already (``nhbench run`` took Nighthawk's names): the
value goes to the `Options` field of that name, which validates it as ``nhbench run`` does.
On top of that each flag applies Nighthawk's own checks (TCLAP's uint32_t parsing, the
ranges of its CommandLineOptions proto: ``--rps`` 1 to 1000000, ``--connections`` at least 1,
...), so a value Nighthawk refuses is refused here too, never run with nhbench's meaning for
it (``--rps 0`` is "as fast as possible" in nhbench, an error in Nighthawk).

Differences of meaning that the table carries (docs/compat.md, "Nighthawk"):

* ``--failure-predicate`` replaces Nighthawk's default predicates (options_impl.cc clears
  them when the flag is given); in nhbench run it adds to them.
* ``--timeout`` is the connect timeout and also bounds the drain at the end (nhbench's
  ``drain_timeout``).
* The relaxed JSON Nighthawk's flags accept (bare-word keys: its own --help examples) is
  read for ``--tls-context``, ``--transport-socket`` and ``--upstream-bind-config``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from .._exceptions import OptionsError
from ..options import MIN_FLUSH_INTERVAL, apply_stats_sinks
from ._table import ForeignFlag

__all__ = ["NIGHTHAWK_CLIENT_FLAGS", "NIGHTHAWK_OUTPUT_FORMATS", "apply_flag"]

#: Nighthawk's output formats (``--output-format``) and the nhbench format that writes each:
#: ``human`` is Nighthawk's human layout, nhbench's ``nighthawk_human``; the others have
#: the same name in both.
NIGHTHAWK_OUTPUT_FORMATS = {
    "json": "json", "human": "nighthawk_human", "yaml": "yaml", "dotted": "dotted",
    "fortio": "fortio", "experimental_fortio_pedantic": "experimental_fortio_pedantic",
    "csv": "csv", "prometheus": "prometheus",
}

# options_impl.h: the largest value a uint32_t flag accepts (above it TCLAP's value would be
# a wrapped negative number), and the default of --max-requests-per-connection.
_LARGEST_UINT32 = 4294937295

#: What an `apply` function gets: the Options keyword arguments being built, the flag's
#: value as given (a str, a list for a repeatable flag, True for a switch) and its spelling.
Apply = Callable[[dict[str, Any], Any, str], None]


def _uint32(given: str, value: str, low: int = 0, high: int = _LARGEST_UINT32) -> int:
    # TCLAP reads a uint32_t with an istream: digits only (a sign, a fraction or a suffix is
    # "Couldn't read argument value"); Nighthawk then checks its proto's range.
    if not re.fullmatch(r"[0-9]+", value):
        raise OptionsError(f"{given}: must be a whole number (got {value!r})")
    number = int(value)
    if not low <= number <= high:
        raise OptionsError(f"{given}: must be >= {low} and <= {high} (got {number})")
    return number


def _zipkin_uri(given: str, value: str) -> str:
    # Nighthawk's only tracer is Zipkin (a RELEASE_ASSERT on the scheme); an empty value is
    # its default, no tracing.
    if value and not value.lower().startswith("zipkin://"):
        raise OptionsError(f"{given}: Nighthawk traces to zipkin:// only (got {value!r}; "
                           f"nhbench run --trace takes otlp:// too)")
    return value


def _set(field: str, convert: Callable[[str, str], Any] | None = None) -> Apply:
    def apply(values: dict[str, Any], value: Any, given: str) -> None:
        values[field] = convert(given, value) if convert else value
    return apply


def _number(field: str, low: int = 0, high: int = _LARGEST_UINT32) -> Apply:
    return _set(field, lambda given, value: _uint32(given, value, low, high))


def _switch(field: str) -> Apply:
    def apply(values: dict[str, Any], value: Any, given: str) -> None:
        values[field] = True
    return apply


def _relaxed_json(field: str) -> Apply:
    # Nighthawk loads these with Envoy's JSON reader, which takes protobuf's relaxed JSON
    # (its --help examples have bare-word keys); nhbench's options take strict JSON.
    def apply(values: dict[str, Any], value: Any, given: str) -> None:
        from .._relaxed_json import loads_relaxed

        try:
            values[field] = json.dumps(loads_relaxed(value))
        except ValueError as exc:
            raise OptionsError(f"{given}: not JSON ({exc})") from None
    return apply


def _duration(given: str, value: str) -> float:
    # Protobuf's Duration text (TimeUtil::FromString): seconds with up to 9 decimals and an
    # "s", such as ".00001s" or "1.5s".
    if not re.fullmatch(r"(?:[0-9]+(?:\.[0-9]{0,9})?|\.[0-9]{1,9})s", value):
        raise OptionsError(f"{given}: must be a duration such as 1s or .00001s (got {value!r})")
    return float(value[:-1])


def _flush_duration(values: dict[str, Any], value: Any, given: str) -> None:
    # A negative Duration is "out of range"; 0s leaves --stats-flush-interval's value in
    # force (process_bootstrap.cc uses the duration only when it is above zero).
    if value.strip().startswith("-"):
        raise OptionsError(f"{given}: is out of range (got {value!r})")
    seconds = _duration(given, value)
    if 0 < seconds < MIN_FLUSH_INTERVAL:
        # A push happens when a live interval closes, and intervals are 0.1 s at least.
        raise OptionsError(f"{given}: must be 0s or at least {MIN_FLUSH_INTERVAL:g}s here "
                           f"(got {value!r})")
    if seconds > 0:
        values["stats_flush_interval"] = seconds


def _requests_per_connection(values: dict[str, Any], value: Any, given: str) -> None:
    number = _uint32(given, value, 1)
    # Nighthawk's default (the largest accepted value) is its "no limit": nhbench's is 0.
    values["max_requests_per_connection"] = 0 if number >= _LARGEST_UINT32 else number


def _timeout(values: dict[str, Any], value: Any, given: str) -> None:
    seconds = _uint32(given, value)
    values["timeout"] = seconds
    # "Also used as the upper bound on the time spent draining in-flight requests".
    values["drain_timeout"] = seconds


def _predicates(field: str) -> Apply:
    def apply(values: dict[str, Any], value: Any, given: str) -> None:
        parsed = {}
        for text in value:
            # absl::StrSplit(predicate, ':', SkipWhitespace()): exactly two parts.
            parts = [part for part in text.split(":") if part.strip()]
            if len(parts) != 2:
                raise OptionsError(f"{given}: predicate {text!r} is badly formatted (expected "
                                   f"COUNTER:THRESHOLD)")
            if not re.fullmatch(r"\s*[0-9]+\s*", parts[1]) or int(parts[1]) >= 2**64:
                raise OptionsError(f"{given}: predicate {text!r} has an out of range "
                                   f"threshold")
            parsed[parts[0]] = int(parts[1])
        values[field] = parsed
        if field == "failure_predicate":
            # Nighthawk clears its default predicates when --failure-predicate is given.
            values["no_default_failure_predicates"] = True
    return apply


def _output_format(values: dict[str, Any], value: Any, given: str) -> None:
    values["output_format"] = NIGHTHAWK_OUTPUT_FORMATS[value]


def _h2(values: dict[str, Any], value: Any, given: str) -> None:
    values["protocol"] = "http2"


def _tunnel_protocol(values: dict[str, Any], value: Any, given: str) -> None:
    # TCLAP's ValuesConstraint: exactly one of its three words.
    if value not in ("http1", "http2", "http3"):
        raise OptionsError(f"{given}: must be one of http1, http2, http3 (got {value!r})")
    values["tunnel_protocol"] = value


def _refused(names: tuple[str, ...], value: str | None, meaning: str, why: str, *,
             repeatable: bool = False, default: str = "") -> ForeignFlag:
    return ForeignFlag(names, value, meaning, refused=why, repeatable=repeatable,
                       default=default)


def _mapped(names: tuple[str, ...], value: str | None, meaning: str, nhbench: str,
            apply: Apply, *, default: str = "", repeatable: bool = False) -> ForeignFlag:
    return ForeignFlag(names, value, meaning, nhbench=nhbench, apply=apply, default=default,
                       repeatable=repeatable)


#: Every flag of nighthawk_client, in the order of its --help. TCLAP's own (``--``,
#: ``--ignore_rest``, ``--version``, ``-h``/``--help``) and the URI are the grammar's
#: (`nhbench.compat._tclap`).
NIGHTHAWK_CLIENT_FLAGS: tuple[ForeignFlag, ...] = (
    _refused(("--user-defined-plugin-config",), "string",
             "plugins that attach a UserDefinedOutput to the result (WIP in Nighthawk)",
             "Nighthawk's user-defined output plugins have no counterpart here (and are "
             "unimplemented in Nighthawk)", repeatable=True),
    _mapped(("--latency-response-header-name",), "string",
            "record the value of this response header in a latency histogram",
            "--latency-response-header-name", _set("latency_response_header_name")),
    _mapped(("--stats-flush-interval-duration",), "duration",
            "interval between flushes to the stats sinks",
            "--stats-flush-interval (at least 0.1 s; 0s: --stats-flush-interval's value)",
            _flush_duration),
    _mapped(("--stats-flush-interval",), "uint32_t",
            "interval in seconds between flushes to the stats sinks",
            "--stats-flush-interval (1 to 300 s, Nighthawk's range)",
            _number("stats_flush_interval", 1, 300), default="5"),
    _mapped(("--stats-sinks",), "string", "Envoy stats sinks (JSON) to flush metrics to",
            "--statsd and --statsd-prefix (Envoy's StatsdSink with an address: UDP statsd; "
            "docs/telemetry.md)", apply_stats_sinks, repeatable=True),
    _mapped(("--no-duration",), None, "run until a predicate fires or the run is stopped",
            "--no-duration", _switch("no_duration")),
    _mapped(("--simple-warmup",), None, "one warm-up request per worker before the run",
            "--simple-warmup", _switch("simple_warmup"), default="false"),
    _refused(("--rate-limiter-plugin-config",), "string",
             "a rate limiter plugin (linear ramp, ...) in JSON",
             "Nighthawk's rate limiter plugins have no counterpart here (a linear ramp is "
             "nhbench run --stage)"),
    _mapped(("--request-source-plugin-config",), "string",
            "a request source plugin (in-line or file-based options list) in JSON",
            "--request-source-plugin-config (the in-line and file-based options-list plugins)",
            _set("request_source_plugin_config")),
    _refused(("--request-source",), "uri format",
             "a remote gRPC service that delivers the requests to replay",
             "a remote gRPC request source has no counterpart here (replay a file: nhbench "
             "run --replay, or --request-source-plugin-config)"),
    _mapped(("--label",), "string", "a label kept in the structured outputs", "--label",
            _set("label"), repeatable=True),
    _mapped(("--multi-target-use-https",), None, "connect to the endpoints with TLS",
            "--multi-target-use-https", _switch("multi_target_use_https")),
    _mapped(("--multi-target-path",), "string", "the path requested from every endpoint",
            "--multi-target-path", _set("multi_target_path")),
    _mapped(("--multi-target-endpoint",), "string",
            "an endpoint IPv4:port, [IPv6]:port or DNS:port (round robin)",
            "--multi-target-endpoint", _set("multi_target_endpoint"), repeatable=True),
    _refused(("--experimental-h2-use-multiple-connections",), None,
             "deprecated: use --max-concurrent-streams 1",
             "deprecated, and refused by Nighthawk too: set --max-concurrent-streams to one "
             "instead"),
    _refused(("--nighthawk-service",), "uri format",
             "run the benchmark on a remote Nighthawk service",
             "driving a remote Nighthawk service has no counterpart here (load from several "
             "machines: nhbench run --ray)"),
    _mapped(("--jitter-uniform",), "duration",
            "uniformly distributed release jitter, e.g. .00001s",
            "--jitter-uniform (seconds)", _set("jitter_uniform", _duration)),
    _mapped(("--open-loop",), None, "no back-pressure when resource limits are hit",
            "--open-loop", _switch("open_loop")),
    _mapped(("--experimental-h1-connection-reuse-strategy",), "mru|lru",
            "which idle HTTP/1 connection takes the next request",
            "--experimental-h1-connection-reuse-strategy",
            _set("experimental_h1_connection_reuse_strategy"), default="mru"),
    _mapped(("--no-default-failure-predicates",), None,
            "do not stop at error status codes and connection errors",
            "--no-default-failure-predicates", _switch("no_default_failure_predicates")),
    _mapped(("--failure-predicate",), "string:uint64_t",
            "counter:threshold that fails the run; replaces the default predicates",
            "--failure-predicate, with --no-default-failure-predicates (Nighthawk's flag "
            "replaces the defaults, nhbench run's adds to them)",
            _predicates("failure_predicate"), repeatable=True),
    _mapped(("--termination-predicate",), "string:uint64_t",
            "counter:threshold that ends the run", "--termination-predicate",
            _predicates("termination_predicate"), repeatable=True),
    _mapped(("--trace",), "uri format", "send traces to this Zipkin URI",
            "--trace (zipkin://HOST:PORT/PATH: Zipkin JSON v2 with B3 and W3C headers, every "
            "request traced as in Nighthawk unless --trace-sample-rate; docs/telemetry.md)",
            _set("trace", _zipkin_uri)),
    _mapped(("--sequencer-idle-strategy",), "spin|poll|sleep",
            "how a worker waits for the next release",
            "--sequencer-idle-strategy (nhbench's default is poll: a timerfd as precise "
            "without a core spinning per worker)", _set("sequencer_idle_strategy"),
            default="spin"),
    _mapped(("--max-concurrent-streams",), "uint32_t",
            "streams one HTTP/2 connection carries at once", "--max-concurrent-streams",
            _number("max_concurrent_streams", 1, 2147483647), default="2147483647"),
    _mapped(("--max-requests-per-connection",), "uint32_t",
            "requests after which a connection is replaced",
            "--max-requests-per-connection (Nighthawk's 4294937295 is nhbench's 0, no limit)",
            _requests_per_connection, default="4294937295"),
    _mapped(("--max-active-requests",), "uint32_t", "HTTP/2: requests in flight at once",
            "--max-active-requests", _number("max_active_requests", 1), default="100"),
    _mapped(("--max-pending-requests",), "uint32_t",
            "requests that may queue for a connection", "--max-pending-requests",
            _number("max_pending_requests"), default="0"),
    _mapped(("--transport-socket",), "string", "Envoy TransportSocket (TLS) in JSON",
            "--transport-socket", _relaxed_json("transport_socket")),
    _mapped(("--upstream-bind-config",), "string",
            "Envoy BindConfig in JSON: the source address of the connections",
            "--upstream-bind-config", _relaxed_json("upstream_bind_config")),
    _mapped(("--tls-context",), "string", "Envoy UpstreamTlsContext in JSON (deprecated)",
            "--tls-context", _relaxed_json("tls_context")),
    _mapped(("--request-body-size",), "uint32_t",
            "request body of this many 'a' characters", "--request-body-size",
            _number("request_body_size", 0, 4194304), default="0"),
    _mapped(("--request-header",), "string", "a request header 'name: value'",
            "--request-header", _set("request_header"), repeatable=True),
    _mapped(("--request-method",), "GET|HEAD|POST|PUT|DELETE|CONNECT|OPTIONS|TRACE",
            "the request method", "--request-method", _set("request_method"),
            default="GET"),
    _mapped(("--address-family",), "auto|v4|v6", "address family preference",
            "--address-family", _set("address_family"), default="auto"),
    _mapped(("--burst-size",), "uint32_t", "release requests in bursts of this size",
            "--burst-size", _number("burst_size", 0, 1000000), default="0"),
    _mapped(("--prefetch-connections",), None, "open the connections before the first "
            "request", "--prefetch-connections", _switch("prefetch_connections")),
    _mapped(("--output-format",),
            "json|human|yaml|dotted|fortio|experimental_fortio_pedantic|csv|prometheus",
            "the output format", "--output-format (human: nhbench's nighthawk_human, "
            "Nighthawk's layout)", _output_format, default="human"),
    _mapped(("-v", "--verbosity"), "trace|debug|info|warn|error|critical",
            "the verbosity of the log on stderr", "--verbosity", _set("verbosity"),
            default="info"),
    _mapped(("--concurrency",), "string", "event loops (workers), or auto for one per CPU",
            "--concurrency", _set("concurrency"), default="1"),
    _mapped(("--tunnel-tls-context",), "string", "TLS context of the tunnel to the proxy",
            "--tunnel-tls-context (TLS to the proxy: sni and trusted_ca; the rest refused by "
            "name)",
            _relaxed_json("tunnel_tls_context")),
    _mapped(("--tunnel-uri",), "string", "the proxy to tunnel through",
            "--tunnel-uri (CONNECT per connection, csrc/client/tunnel.c)",
            _set("tunnel_uri")),
    _mapped(("--tunnel-protocol",), "http1|http2|http3", "the tunnel's protocol",
            "--tunnel-protocol (http1; http2: CONNECT on an HTTP/2 stream, CONNECT-UDP with -p "
            "http3; http3: CONNECT on an HTTP/3 stream over QUIC, csrc/client/carrier.c)",
            _tunnel_protocol, default="http1"),
    _refused(("--http3-protocol-options",), "string",
             "Envoy Http3ProtocolOptions in JSON",
             "Envoy's Http3ProtocolOptions have no counterpart here (HTTP/3 streams: "
             "--max-concurrent-streams)"),
    _mapped(("-p", "--protocol"), "http1|http2|http3", "the protocol", "--protocol",
            _set("protocol"), default="http1"),
    _mapped(("--h2",), None, "HTTP/2 (deprecated: --protocol http2)", "--protocol http2",
            _h2),
    _mapped(("--timeout",), "uint32_t",
            "connect timeout in seconds, also the bound of the final drain",
            "--timeout and --drain-timeout", _timeout, default="30"),
    _mapped(("--duration",), "uint32_t", "seconds to run", "--duration (seconds)",
            _number("duration"), default="5"),
    _mapped(("--connections",), "uint32_t", "connections per event loop (HTTP/1)",
            "--connections", _number("connections", 1, 1000000), default="100"),
    _mapped(("--rps",), "uint32_t", "requests per second, per event loop", "--rps",
            _number("rps", 1, 1000000), default="5"),
)


def apply_flag(flag: ForeignFlag, values: dict[str, Any], value: Any, given: str) -> None:
    """Carry `flag`, given as `given` with `value`, into the Options keywords `values`."""
    if flag.refused:
        raise flag.refusal(given)
    assert flag.apply is not None
    flag.apply(values, value, given)
