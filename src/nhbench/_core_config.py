"""Run preparation, the seam to C: validated options -> the config dict the compiled core takes.

This is not option declaration (the `nhbench.options` models, a layer below): it reads the
payload and gRPC message files, draws the random payload bytes and renders the requests and
gRPC frames a run starts with. The client's config (`client_core_config`, for
``_core.ClientRun``) and the server's (`server_core_config`, for ``_core.Server``) cross the
same way: a plain dict of plain values, built here and only here from options that are
already valid, in the units the C core uses. The keys, their types and units are the
contract written down in docs/architecture.md ("Binding contract"); the binding reads
exactly these keys. Defaults and ranges belong to the models: nothing here decides a value,
it only converts.

Units: times are float seconds (the core converts to nanoseconds), sizes are int bytes
(``max_payload_kb`` is KiB, as Fortio names it), addresses are numeric (resolved by the
options), CPU lists have one entry per worker.
"""

from __future__ import annotations

import ipaddress
import os
import random
import re
import string
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from . import _grpc as grpc
from ._groups import group_plan
from ._input import read_input
from ._request import (
    CONTENT_LENGTH_PLACEHOLDER,
    RequestSpec,
    has_placeholder,
    render_h2_request,
    render_request,
)
from .options import (
    client_cert_pem,
    fanout_target,
    parse_bind_config,
    proxy_tls,
    request_specs,
    resolve,
    run_checks,
)

if TYPE_CHECKING:
    from .options import Options, ResponseOptions, ServerOptions

__all__ = ["client_core_config", "response_core_config", "server_core_config"]


def client_core_config(options: Options, address: str, *,
                       addresses: Sequence[str] = ()) -> dict[str, Any]:
    """The ``ClientRun`` config: `options` to `address` (the numeric IP the host resolved to;
    with `addresses`, several, the first of which is `address`: ``endpoints``).

    Keys (docs/architecture.md, "Binding contract"): ``address`` str, ``port`` int,
    ``cpus`` list[int] (one per worker), ``rps`` float per worker, ``connections`` /
    ``max_pending_requests`` / ``max_requests_per_connection`` int, ``prefetch_connections``
    and ``open_loop`` bool, ``connect_timeout`` / ``request_timeout`` / ``drain_timeout`` /
    ``start_delay`` float s, ``duration`` float s (< 0: none), ``stats_interval`` float s
    (0: off), ``idle_strategy`` str,
    ``burst_size`` int >= 1, ``termination_predicates`` / ``failure_predicates``
    list[(str, int)], ``scheme`` and ``protocol`` str, the request set (``specs``,
    `_requests_config`); for HTTP/2 and HTTP/3 also ``max_concurrent_streams`` /
    ``max_active_requests`` int; for https:// a ``tls`` dict (str fields, "" for unset;
    ``insecure`` and ``session_reuse`` bool; ``alpn`` list[str]; ``cert_pem``, ``key_pem``
    and ``key_passphrase``, the client certificate's PEM text, only when one is given).
    """
    duration = options.effective_duration
    config: dict[str, Any] = {
        "address": address,
        "port": options.target.port,
        "cpus": list(options.worker_cpus),
        "rps": float(options.rps),
        "connections": options.connections,
        "max_pending_requests": options.max_pending_requests,
        "max_requests_per_connection": options.max_requests_per_connection,
        "prefetch_connections": options.prefetch_connections,
        "connect_timeout": float(options.timeout),
        "request_timeout": float(options.request_timeout),
        "duration": -1.0 if duration is None else float(duration),
        "drain_timeout": float(options.drain_timeout),
        "open_loop": options.open_loop,
        "idle_strategy": options.sequencer_idle_strategy,
        # Nighthawk's 0 ("no bursting") and 1 mean the same; the core takes >= 1.
        "burst_size": max(1, options.burst_size),
        "termination_predicates": sorted(options.termination_predicate.items()),
        "failure_predicates": sorted(options.failure_predicates.items()),
        "start_delay": float(options.start_delay),
        # Live statistics (docs/live.md): seconds per interval, 0 = off.
        "stats_interval": float(options.effective_stats_interval),
        "scheme": options.core_scheme,
        "protocol": options.core_protocol,
    }
    if options.core_protocol in ("http2", "http3"):
        config.update({
            "max_concurrent_streams": options.max_concurrent_streams,
            "max_active_requests": options.max_active_requests,
        })
    if options.core_scheme == "https":
        config["tls"] = _tls_config(options)
    if options.trace is not None:
        # Traces (docs/telemetry.md): the core samples and writes the headers; B3 for Zipkin.
        config["trace_sample_rate"] = options.trace_rate
        config["trace_b3"] = options.trace.lower().startswith("zipkin:")
    # Each area adds its keys in its own helper below (requests, schedule,
    # targets, observation), so that the parts stay apart.
    specs = request_specs(options)
    config.update(_requests_config(options, specs))
    config.update(_schedule_config(options))
    config.update(_targets_config(options))
    config.update(_endpoints_config(options, addresses))
    config.update(_observation_config(options))
    # The run's checks and its request-set entries' own (docs/checks.md).
    checks = run_checks(options.check, specs)
    if checks:
        config["checks"] = [check.core() for check in checks]
    config.update(_proxy_config(options))
    # Likewise (docs/protocols.md), one helper per protocol.
    config.update(_echo_config(options))
    config.update(_grpc_config(options))
    config.update(_h3_config(options))
    return config


def _tls_config(options: Options) -> dict[str, Any]:
    """The ``tls`` dict of an https:// run, from the TLS options."""
    return {
        "sni": options.tls_server_name or "",
        "verify_name": options.tls_verify_name,
        "alpn": list(options.alpn or ()),
        "cacert": options.cacert or "",
        "insecure": options.insecure,
        "ciphers": options.tls_ciphers or "",
        "ciphersuites": options.tls_ciphersuites or "",
        "groups": options.tls_groups or "",
        "min_version": options.tls_min_version or "",
        "max_version": options.tls_max_version or "",
        "session_reuse": options.tls_session_reuse,
        **_client_cert_config(options.cert, options.key, options.key_passphrase_env),
    }


def _client_cert_config(cert: str | None, key: str | None, env: str | None) -> dict[str, str]:
    """``cert_pem``, ``key_pem`` and ``key_passphrase`` (PEM text: the files are read here,
    on the run's machine) when a client certificate is given, else nothing."""
    if cert is None or key is None:
        return {}
    cert_pem, key_pem, passphrase = client_cert_pem(cert, key, env)
    return {"cert_pem": cert_pem, "key_pem": key_pem, "key_passphrase": passphrase}


# tls_context's options (_tls_context.TLS_FIELDS) → the keys of the binding's ``tls`` dict.
_TLS_KEYS = {
    "alpn": "alpn", "tls_min_version": "min_version", "tls_max_version": "max_version",
    "tls_ciphers": "ciphers", "tls_groups": "groups", "insecure": "insecure",
    "tls_session_reuse": "session_reuse",
}


def _requests_config(options: Options, specs: Sequence[RequestSpec]) -> dict[str, Any]:
    """What is sent: the request set, templating and HTTP/1.0.

    ``specs`` is the one representation of the requests, whatever their number: one dict
    per entry of `request_specs` (a run of the options' single request is a set of one):
    ``request`` bytes (head and body, rendered once), ``body_size`` int (the body is the
    tail of ``request``; HTTP/2 and HTTP/3 send it from there), ``head_request`` bool,
    ``target`` int, and for HTTP/2 and HTTP/3 ``h2_method`` / ``h2_path`` str,
    ``h2_authority`` bytes, ``h2_headers`` list[(bytes, bytes)]. ``templated`` and
    ``http10`` bool.
    """
    payload = _payload(options)
    specs = request_specs(options)
    # --group-by (nhbench._groups): each entry's group, or the header whose values group.
    plan = group_plan(options, specs)
    return {
        "specs": [_render_spec(options, spec, payload) for spec in specs],
        "templated": options.template,
        "http10": options.http1_0,
        **(plan.core_config() if plan is not None else {}),
    }


def _payload(options: Options) -> bytes | None:
    """The options' body, read or drawn once for the whole run; None for none (an empty
    --payload is none, as in Fortio)."""
    if options.payload:
        return options.payload.encode("utf-8")
    if options.payload_file is not None:
        return read_input(options.payload_file, "payload", f"--payload-file {options.payload_file}")
    if options.payload_size:
        # Random bytes (as Fortio's -payload-size), the same for every request of the run:
        # compression cannot shrink them, and the hot path stays a plain write.
        return os.urandom(options.payload_size)
    return None


def _render_spec(options: Options, spec: RequestSpec, payload: bytes | None) -> dict[str, Any]:
    """One entry of the core's ``specs``: `spec`, with the options' value where it has None."""
    target = options.target
    method = (spec.method or options.request_method).upper()
    if spec.path is not None:
        path = spec.path
    elif method == "CONNECT":
        # CONNECT's request-target is the authority (RFC 9110 section 9.3.6), not a path.
        path = target.authority
        if ":" not in target.authority.rsplit("]", 1)[-1]:
            path = f"{target.authority}:{target.port}"
    else:
        path = target.path
    authority = spec.authority or target.authority
    # An entry's own header replaces the options' header of the same name, as in Nighthawk,
    # where a request source's headers override the command line's.
    own = {name.lower() for name, _ in spec.headers}
    headers = [(n, v) for n, v in options.headers if n.lower() not in own] + list(spec.headers)
    names = {name.lower() for name, _ in headers}
    body: bytes | None
    if spec.body is not None:
        body = spec.body
    elif spec.body_size is not None:
        body = b"a" * spec.body_size
    elif payload is not None:
        body = payload
        if options.content_type is None and "content-type" not in names:
            # Fortio's default for a payload without a type: binary content.
            headers.append(("Content-Type", "application/octet-stream"))
            names.add("content-type")
    else:
        body = b"a" * options.request_body_size
    if options.content_type is not None and "content-type" not in names:
        headers.append(("Content-Type", options.content_type))
    if options.is_grpc:
        # Every entry is the run's one gRPC call (_grpc_request).
        method, path, headers, body = _grpc_request(options, headers)
    if options.template:
        # Placeholders in the path are percent-encoded by the URI's parser; the core needs
        # them as they were typed.
        path = _unquote_placeholders(path)
    proxy = options.proxy_endpoint
    if proxy is not None and proxy.mode == "absolute" and method != "CONNECT":
        # Through a proxy, HTTP/1.1 names the origin in the request line (RFC 9112
        # section 3.2.2, absolute-form) and carries the proxy's credentials.
        path = f"http://{options.targets[spec.target].authority}{path}"
        if proxy.authorization is not None and "proxy-authorization" not in names:
            headers.append(("Proxy-Authorization", proxy.authorization))
    content_length = None
    if options.template and has_placeholder(body):
        content_length = CONTENT_LENGTH_PLACEHOLDER
    request = render_request(method, path, authority, headers, body=body,
                             http10=options.http1_0, content_length=content_length)
    entry: dict[str, Any] = {
        "request": request,
        "body_size": len(body),
        "head_request": method == "HEAD",
        "target": spec.target,
    }
    if options.core_protocol in ("http2", "http3"):
        h2 = render_h2_request(method, path, authority, headers, len(body),
                               content_length=content_length)
        entry.update({
            "h2_method": h2.method,
            "h2_path": h2.path,
            "h2_authority": h2.authority,
            "h2_headers": list(h2.headers),
        })
    return entry


def _unquote_placeholders(path: str) -> str:
    return re.sub(r"%7B(seq|uuid|worker|rand:[0-9]+)%7D", r"{\1}", path, flags=re.IGNORECASE)


def _schedule_config(options: Options) -> dict[str, Any]:
    """Schedule shapes (docs/engine.md, "Shaping the schedule").

    ``jitter_uniform`` float s, ``jitter_fraction`` float (Fortio's -jitter: 0.1),
    ``no_catchup`` bool, ``total_requests`` int (0: none), ``stages`` list[(float s, float
    rps per worker)], ``schedule_offsets`` list[float s], ``warmup`` float s,
    ``warmup_requests`` int per worker, ``allow_initial_errors`` bool, ``scheduled_start``
    float epoch s (0: none), ``arrival`` "poisson" (absent: uniform), ``seed`` int.
    Only what is set is sent: a plain run's config is unchanged.
    """
    config: dict[str, Any] = {}
    if options.jitter_uniform:
        config["jitter_uniform"] = float(options.jitter_uniform)
    if options.jitter:
        config["jitter_fraction"] = 0.1
    if options.no_catchup:
        config["no_catchup"] = True
    if options.requests is not None:
        config["total_requests"] = options.requests
    if options.stage:
        config["stages"] = [(float(t), float(r)) for t, r in options.stage]
    if options.schedule_offsets is not None:
        config["schedule_offsets"] = [float(t) for t in options.schedule_offsets]
    if options.warmup is not None:
        config["warmup"] = float(options.warmup)
    elif options.simple_warmup:
        config["warmup_requests"] = 1
    elif options.sequential_warmup:
        # One per connection, with every connection opened before the first.
        config["warmup_requests"] = options.connections
        config["prefetch_connections"] = True
    if options.allow_initial_errors:
        config["allow_initial_errors"] = True
    if options.scheduled_start is not None:
        config["scheduled_start"] = float(options.scheduled_start)
    if options.arrival != "uniform":
        config["arrival"] = options.arrival
    if options.seed is not None:
        config["seed"] = options.seed
    return config


def _endpoints_config(options: Options, addresses: Sequence[str]) -> dict[str, Any]:
    """The single target's addresses that new connections spread over (--dns-method rr or
    random with a name or --resolve list that has several).

    Keys: ``endpoints`` list[("tcp", numeric host, port)], ``endpoint_pick`` "rr" |
    "random". Absent with one address: the run is what it was without them.

    With dns_refresh connection instead: ``dns_host`` (the name each new connection
    resolves again, docs/engine.md "DNS per connection"), ``dns_pick`` "first" | "rr" |
    "random" and ``dns_family`` "auto" | "v4" | "v6".
    """
    if options.dns_refresh == "connection":
        return {"dns_host": options.target.host, "dns_pick": options.dns_method,
                "dns_family": options.address_family}
    if len(addresses) < 2:
        return {}
    port = options.target.port
    return {"endpoints": [("tcp", address, port) for address in addresses],
            "endpoint_pick": options.dns_method}


def _targets_config(options: Options) -> dict[str, Any]:
    """Several targets, reuse strategy, source address, Unix sockets, and the TLS
    settings of tls_context / transport_socket.

    Keys: ``targets`` list[("tcp", numeric host, port) | ("unix", path, 0)] (replaces
    ``address``/``port``; each endpoint's name is resolved here, as the URI's host is by the
    run), ``reuse_strategy`` "mru" | "lru", ``source_addresses`` [(numeric host, 0), ...] (round
    robin over the connections), and
    ``tls`` again when a tls_context sets some of it.
    """
    config: dict[str, Any] = {}
    unix = options.unix_socket_path
    if unix is not None:
        config["targets"] = [("unix", unix, 0)]
    elif options.multi_target_endpoint and options.proxy_endpoint is None:
        # Through a proxy the proxy resolves the endpoints' names (_proxy_config).
        config["targets"] = [
            ("tcp", resolve(t.host, t.port, options.address_family), t.port)
            for t in options.targets
        ]
    if options.experimental_h1_connection_reuse_strategy != "mru":
        config["reuse_strategy"] = options.experimental_h1_connection_reuse_strategy
    sources = options.source_address
    if options.upstream_bind_config is not None:
        sources = (parse_bind_config(options.upstream_bind_config),)
    if sources:
        config["source_addresses"] = [(source, 0) for source in sources]
    mapped = options.tls_context_options
    if mapped and options.target.scheme == "https":
        tls = _tls_config(options)
        for option, value in mapped.items():
            if option == "sni":
                tls["sni"] = tls["verify_name"] = value
            elif option == "cacert":
                tls["cacert"] = os.path.expanduser(value)
            elif option in ("cert", "key", "key_passphrase_env"):
                continue  # all at once, below
            else:
                tls[_TLS_KEYS[option]] = list(value) if option == "alpn" else value
        if "cert" in mapped:
            tls.update(_client_cert_config(
                mapped["cert"], mapped["key"],
                mapped.get("key_passphrase_env", options.key_passphrase_env)))
        config["tls"] = tls
    return config


def _proxy_config(options: Options) -> dict[str, Any]:
    """Through an HTTP proxy (docs/engine.md, "Proxies and tunnels"): ``targets`` is the
    proxy's address once per target (each target keeps its own connections), and with a
    tunnel ``tunnel_requests`` list[bytes] is the CONNECT request head each target's
    connections send first. Absolute-form needs no key of its own: its requests are rendered
    so (`_render_spec`). Nothing without a proxy."""
    proxy = options.proxy_endpoint
    if proxy is None:
        return {}
    address = resolve(proxy.host, proxy.port, options.address_family)
    targets = options.targets
    config: dict[str, Any] = {"targets": [("tcp", address, proxy.port)] * len(targets)}
    if proxy.mode == "connect":
        config["tunnel_requests"] = [
            render_connect(t.host, t.port, proxy.authorization) for t in targets]
        # The proxy leg (csrc/client/carrier.c): the CONNECT's protocol and TLS to the proxy.
        config["proxy_protocol"] = proxy.protocol
        if proxy.tls is not None:
            tls = proxy.tls
            config["proxy_tls"] = {
                key: value for key, value in (
                    ("sni", tls.sni), ("verify_name", tls.verify_name),
                    ("cacert", tls.cacert), ("cacert_pem", tls.cacert_pem),
                    ("insecure", tls.insecure)) if value is not None}
    elif proxy.mode == "connect-udp":
        udp = _udp_tunnel_config(options, proxy.host, proxy.port, proxy.authorization)
        if proxy.protocol == "http2":
            # On an HTTP/2 stream (csrc/client/tunnel_udp_h2.c): TCP to the proxy, TLS
            # as the CONNECT tunnels' (carrier.c's context) or h2c.
            udp["protocol"] = "http2"
            if proxy.tls is not None:
                tls = proxy.tls
                udp["tls"] = {
                    key: value for key, value in (
                        ("sni", tls.sni), ("verify_name", tls.verify_name),
                        ("cacert", tls.cacert), ("cacert_pem", tls.cacert_pem),
                        ("insecure", tls.insecure)) if value is not None}
        config["udp_tunnel"] = udp
    return config


def _udp_tunnel_config(options: Options, host: str, port: int,
                       authorization: str | None) -> dict[str, Any]:
    """CONNECT-UDP (RFC 9298): the proxy's :authority, each target's :path (the default
    URI template's, /.well-known/masque/udp/{target_host}/{target_port}/, an IPv6 literal's
    colons percent-encoded), and the TLS to the proxy."""
    cacert, insecure = proxy_tls(options)
    config: dict[str, Any] = {
        "authority": f"[{host}]:{port}" if ":" in host else f"{host}:{port}",
        "paths": [f"/.well-known/masque/udp/{quote(t.host, safe='')}/{t.port}/"
                  for t in options.targets],
        # SNI is a DNS name (RFC 6066 section 3): none for an address, whose certificate
        # GnuTLS matches against the addresses it names.
        "sni": "" if _is_ip_literal(host) else host,
        "verify_name": host,
        "insecure": insecure,
    }
    if cacert is not None:
        config["cacert"] = os.path.expanduser(cacert)
    if authorization is not None:
        config["authorization"] = authorization
    return config


def _is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def render_connect(host: str, port: int, authorization: str | None) -> bytes:
    """The CONNECT request head for the origin `host`:`port` (RFC 9110 section 9.3.6: the
    request-target and Host are the authority, with its port)."""
    authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    lines = [f"CONNECT {authority} HTTP/1.1", f"Host: {authority}"]
    if authorization is not None:
        lines.append(f"Proxy-Authorization: {authorization}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii")


def _observation_config(options: Options) -> dict[str, Any]:
    """The origin latency header: ``latency_response_header_name`` str
    (lower-case), only when set; ``stream_stats`` bool, only when on."""
    name = options.latency_response_header_name
    config: dict[str, Any] = {"latency_response_header_name": name} if name else {}
    if options.stream_stats:
        config["stream_stats"] = True
    return config


#: The payload of an echo run without --payload, --payload-file or --payload-size:
#: this many random bytes (Fortio's default echo payload is 24 bytes too).
ECHO_DEFAULT_PAYLOAD_SIZE = 24


def _echo_config(options: Options) -> dict[str, Any]:
    """``echo_payload`` bytes for a tcp:// or udp:// run: the payload options'
    bytes, else `ECHO_DEFAULT_PAYLOAD_SIZE` random bytes, drawn once per run. Nothing for
    other runs (a udp:// run's default time-out is the options': 1 s)."""
    if options.target.scheme not in ("tcp", "udp"):
        return {}
    payload = _payload(options)
    return {"echo_payload": payload if payload else os.urandom(ECHO_DEFAULT_PAYLOAD_SIZE)}


def _grpc_config(options: Options) -> dict[str, Any]:
    """``grpc`` bool for a gRPC run (grpc:// or grpcs://); the calls themselves are
    the request set's entries (`_grpc_request`)."""
    return {"grpc": True} if options.is_grpc else {}


def _grpc_message(options: Options) -> bytes:
    """The request message of a gRPC run, unframed: --grpc-payload's bytes for
    --grpc-method, Fortio's PingMessage for --ping, else a HealthCheckRequest."""
    if options.grpc_method is not None:
        if options.grpc_payload is None:
            return b""
        return read_input(options.grpc_payload, "grpc-payload",
                          f"--grpc-payload {options.grpc_payload}")
    if options.ping:
        if options.payload_size:
            # Random text (a proto3 string must be UTF-8), drawn once, as the HTTP payload is.
            text = "".join(random.choices(string.ascii_letters + string.digits,
                                          k=options.payload_size))
        else:
            text = options.payload or ""
        delay = round((options.grpc_ping_delay or 0.0) * 1e9)
        return grpc.ping_message(payload=text, delay_nanos=delay)
    return grpc.health_check_request(options.grpc_service or "")


def _grpc_request(
    options: Options, headers: list[tuple[str, str]]
) -> tuple[str, str, list[tuple[str, str]], bytes]:
    """(method, path, headers, body) of a gRPC call (PROTOCOL-HTTP2.md): a POST to the method's
    path with content-type application/grpc, te: trailers, the deadline as grpc-timeout, and
    the framed message as the body."""
    path = options.grpc_method or (grpc.PING_METHOD if options.ping else grpc.HEALTH_CHECK_METHOD)
    own = {"content-type", "te", "grpc-timeout"}
    out = [(n, v) for n, v in headers if n.lower() not in own]
    out += [("Content-Type", "application/grpc"), ("TE", "trailers")]
    deadline = options.grpc_deadline
    if deadline is None:
        deadline = options.request_timeout
    if deadline:
        out.append(("grpc-timeout", grpc.grpc_timeout(deadline)))
    return "POST", path, out, grpc.frame(_grpc_message(options))


def _h3_config(options: Options) -> dict[str, Any]:
    """The keys of an HTTP/3 run: none of its own. HTTP/3 sends the request set's HTTP/2
    keys (h2_method, h2_path, h2_authority, h2_headers) and takes the TLS keys it can honour
    (sni, verify_name, cacert, insecure, and the client certificate's cert_pem, key_pem and
    key_passphrase); Options refuses the rest for http3."""
    return {}


def response_core_config(response: ResponseOptions) -> dict[str, Any]:
    """The server config's ``response`` dict: only what is set, in Nighthawk's JSON names.

    ``response_body_size`` int bytes, ``response_headers`` list of ``{"header": {"key": str,
    "value": str}, "append": bool}``, ``echo_request_headers`` bool, ``static_delay`` float
    s, ``concurrency_based_linear_delay`` ``{"minimal_delay": float s,
    "concurrency_delay_factor": float s}``, ``emit_previous_request_delta_in_response_header``
    str.
    """
    out: dict[str, Any] = {}
    if response.response_body_size is not None:
        out["response_body_size"] = response.response_body_size
    if response.response_headers:
        out["response_headers"] = [
            {"header": {"key": h.header.key, "value": h.header.value}, "append": h.append}
            for h in response.response_headers
        ]
    if response.echo_request_headers:
        out["echo_request_headers"] = True
    if response.static_delay is not None:
        out["static_delay"] = float(response.static_delay)
    if response.concurrency_based_linear_delay is not None:
        linear = response.concurrency_based_linear_delay
        out["concurrency_based_linear_delay"] = {
            "minimal_delay": float(linear.minimal_delay),
            "concurrency_delay_factor": float(linear.concurrency_delay_factor),
        }
    if response.emit_previous_request_delta_in_response_header:
        out["emit_previous_request_delta_in_response_header"] = (
            response.emit_previous_request_delta_in_response_header
        )
    return out


def server_core_config(options: ServerOptions) -> dict[str, Any]:
    """The ``_core.Server`` config.

    Keys (docs/architecture.md, "The test server"): ``listen`` list of ("tcp", host, port)
    or ("unix", path, 0), ``workers`` int, ``cpus`` list[int] (one per worker, empty =
    unpinned), ``response`` dict (`response_core_config`), ``echo_default_params`` str,
    ``echo_defaults_no_query`` / ``debug_env_dump`` bool, ``debug_path`` str,
    ``max_echo_delay`` / ``max_delay`` / ``stall_every`` / ``stall_for`` / ``idle_timeout``
    / ``header_timeout`` float s, ``max_connections`` / ``max_header_bytes`` /
    ``max_body_bytes`` int (bytes), ``max_payload_kb`` int KiB, ``tcp_echo`` / ``udp_echo``
    list of (host, port), ``tcp_proxy`` list of ((host, port), (host, port)) (listen,
    destination), ``redirect`` list of (host, port),
    ``http_fanout`` list of ((host, port), [(ip, port, url, host header, path)]) with
    ``http_fanout_serial`` / ``http_fanout_mirror`` bool, ``forward`` (prefix, (host, port))
    or None, ``admin`` (host, port) or None, ``tls`` None, ``{"cert": file,
    "key": file}`` or ``{"self_signed": True, "san": list[str]}`` (either with ``"client_ca":
    file`` when clients must present a certificate), ``alpn`` list[str],
    ``max_concurrent_streams`` int.
    """
    tls: dict[str, Any] | None = None
    if options.tls_self_signed:
        tls = {"self_signed": True, "san": list(options.tls_san)}
    elif options.tls_cert:
        tls = {"cert": options.tls_cert, "key": options.tls_key}
    if tls is not None and options.tls_client_ca:
        tls["client_ca"] = options.tls_client_ca
    return {
        "listen": [tuple(item) for item in options.listen],
        "workers": options.worker_count,
        "cpus": options.worker_cpus,
        "response": response_core_config(options.response),
        "echo_default_params": options.echo_default_params,
        "echo_defaults_no_query": options.echo_default_params_when == "no-query",
        "debug_path": options.debug_path,
        "debug_env_dump": bool(options.debug_env_dump),
        "max_echo_delay": float(options.max_echo_delay),
        "max_delay": float(options.max_delay),
        "max_connections": int(options.max_connections),
        "max_payload_kb": int(options.max_payload_kb),
        "stall_every": float(options.stall_every),
        "error_body_every": int(options.error_body_every),
        "stream_events": int(options.stream_events),
        "stream_gap": float(options.stream_gap),
        "stream_jitter": float(options.stream_jitter),
        "stall_for": float(options.stall_for),
        "tcp_echo": [tuple(a) for a in options.tcp_echo],
        "udp_echo": [tuple(a) for a in options.udp_echo],
        "tcp_proxy": [(tuple(local), tuple(dest)) for local, dest in options.tcp_proxy],
        "redirect": [tuple(a) for a in options.redirect_listen],
        "forward": ((options.forward_prefix[0], tuple(options.forward_prefix[1]))
                    if options.forward_prefix is not None else None),
        "http_fanout": [
            (tuple(local), [fanout_target(u, not options.http_fanout_no_mirror) for u in urls])
            for local, urls in options.http_fanout
        ],
        "http_fanout_serial": bool(options.http_fanout_serial),
        "http_fanout_mirror": not options.http_fanout_no_mirror,
        "admin": tuple(options.admin) if options.admin else None,
        "idle_timeout": float(options.idle_timeout),
        "header_timeout": float(options.header_timeout),
        "max_header_bytes": int(options.max_header_bytes),
        "max_body_bytes": int(options.max_body_bytes),
        "tls": tls,
        "alpn": list(options.alpn),
        "max_concurrent_streams": int(options.max_concurrent_streams),
        "http3": bool(options.http3),
    }
