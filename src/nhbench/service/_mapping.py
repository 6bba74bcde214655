"""A StartRequest's ``CommandLineOptions`` → nhbench `Options` (docs/service.md "Mapping").

The input is the proto3 JSON form of the message (protobuf's ``MessageToDict`` with the
proto field names), the same spelling Nighthawk writes in its Output's ``options``, so the
mapping that reads Nighthawk's output files back (`options_from_command_line`) does most of
the work. This module adds what a service request can carry and that reader leaves out
(every multi-target endpoint, HTTP/3, the whole tls_context, execution_id, jitter, warm-up,
scheduled start, the stats sinks, ...) and refuses by name every field nhbench cannot
honour: a tool that asks for a trace or a sink type nhbench lacks gets an error, not a run
that silently lacks them.

Nothing here imports grpc or protobuf, so the mapping is testable without them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .._exceptions import OptionsError
from ..options import (
    MIN_FLUSH_INTERVAL,
    Options,
    apply_stats_sinks,
    make_options,
    parse_json_duration,
    parse_tls_context,
    parse_unix_url,
)
from ..outputs._nighthawk import options_from_command_line

__all__ = ["IGNORED_FIELDS", "LOCAL_FILE_OPTIONS", "MAX_STATS_SINKS", "SUPPORTED_FIELDS",
           "LocalAccess",
           "refuse_local", "refuse_unsupported", "start_options"]


@dataclass(frozen=True)
class LocalAccess:
    """Which local resources the operator lets a request name (``nhbench service
    --allow-unix-sockets``, ``--allow-local-files``). A remote client chooses the request; by
    default it may not make the service, which often runs with more rights than the client,
    connect to a Unix socket of this machine (a container runtime's, say) or read a file."""

    unix_sockets: bool = False
    files: bool = False


#: nhbench options that name a local file: read (a CA bundle, a payload, a replay, a plugin's
#: file) or written (outputs). The mapping gives none of them today but ``cacert`` (from
#: tls_context); they are checked all the same, so that a field mapped later cannot open a
#: way to the local files unnoticed.
LOCAL_FILE_OPTIONS = ("cacert", "payload_file", "replay", "grpc_payload",
                      "request_source_plugin_config", "transport_socket", "output",
                      "output_dir", "hdr_log")

#: CommandLineOptions fields that become nhbench options.
SUPPORTED_FIELDS = frozenset({
    "requests_per_second", "connections", "duration", "no_duration", "timeout", "h2",
    "protocol", "concurrency", "prefetch_connections", "burst_size", "address_family",
    "request_options", "tls_context", "max_pending_requests", "max_active_requests",
    "max_requests_per_connection", "sequencer_idle_strategy", "uri", "multi_target",
    "experimental_h1_connection_reuse_strategy", "termination_predicates",
    "failure_predicates", "no_default_failure_predicates", "open_loop", "jitter_uniform",
    "max_concurrent_streams", "labels", "upstream_bind_config", "simple_warmup",
    "latency_response_header_name", "scheduled_start", "execution_id",
    "stats_sinks", "stats_flush_interval", "stats_flush_interval_duration",
})

#: Fields accepted without effect: they choose how Nighthawk's command-line client prints
#: (the service always answers with the Output message, as Nighthawk's service does).
IGNORED_FIELDS = frozenset({"verbosity", "output_format"})

# Members of RequestOptions nhbench sends; json_body is Nighthawk's request-source plugin
# business and has no counterpart.
_REQUEST_FIELDS = frozenset({"request_method", "request_headers", "request_body_size"})


def _wrapped(value: Any) -> Any:
    return value.get("value") if isinstance(value, Mapping) else value


def _is_unset(value: Any) -> bool:
    # A field a client set to its zero value (an empty wrapper, "0s", false, "") asks for
    # nothing, so it is no reason to refuse the request.
    value = _wrapped(value)
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value == 0
    return value in (None, "", "0s") or (isinstance(value, (dict, list)) and not value)


def _endpoint(endpoint: Any) -> str:
    if not isinstance(endpoint, Mapping):
        raise OptionsError("multi_target.endpoints: each endpoint needs an address "
                                     "and a port")
    address = str(_wrapped(endpoint.get("address")) or "")
    port = _wrapped(endpoint.get("port"))
    if not address or port is None:
        raise OptionsError("multi_target.endpoints: each endpoint needs an address "
                                     "and a port")
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


def refuse_unsupported(names: Iterable[str]) -> None:
    """Raise `OptionsError` naming the fields among `names` (the CommandLineOptions fields a
    request sets) that nhbench cannot honour."""
    unsupported = sorted(set(names) - SUPPORTED_FIELDS - IGNORED_FIELDS)
    if unsupported:
        raise OptionsError(
            f"nhbench does not support CommandLineOptions field"
            f"{'s' if len(unsupported) > 1 else ''} {', '.join(unsupported)} (docs/service.md "
            f"lists the supported ones)")


#: Stats sinks one request may name: each is a socket and a sending thread of the service,
#: which a remote client must not be able to multiply without bound.
MAX_STATS_SINKS = 16


def _stats_sinks(clo: Mapping[str, Any], values: dict[str, Any]) -> None:
    # The sinks as the Nighthawk command line's --stats-sinks takes them (each StatsSink in
    # proto3 JSON, its Any expanded): the same reading and the same refusals by name.
    sinks = clo.get("stats_sinks") or []
    if len(sinks) > MAX_STATS_SINKS:
        raise OptionsError(f"CommandLineOptions.stats_sinks: {len(sinks)} sinks; at most "
                           f"{MAX_STATS_SINKS} here; nothing was sent")
    interval = _wrapped(clo.get("stats_flush_interval"))
    duration = clo.get("stats_flush_interval_duration")
    if sinks:
        apply_stats_sinks(values, [json.dumps(sink) for sink in sinks],
                          "CommandLineOptions.stats_sinks")
    elif not _is_unset(interval) or not _is_unset(duration):
        # nighthawk_client's rule: a flush interval without a sink says nothing.
        raise OptionsError("CommandLineOptions.stats_flush_interval(_duration): needs "
                           "stats_sinks; nothing was sent")
    if not _is_unset(interval):
        if not 1 <= int(interval) <= 300:
            # Nighthawk's validation range for the field.
            raise OptionsError(f"CommandLineOptions.stats_flush_interval: value must be inside "
                               f"range [1, 300] (got {interval})")
        values["stats_flush_interval"] = float(interval)
    if not _is_unset(duration):
        seconds = parse_json_duration(duration)
        if not isinstance(seconds, float):
            raise OptionsError(f"CommandLineOptions.stats_flush_interval_duration: not a "
                               f"duration (got {duration!r})")
        # As the command line's --stats-flush-interval-duration: 0s keeps the default, and a
        # push happens when a live interval closes, so not more often than those.
        if seconds < MIN_FLUSH_INTERVAL:
            raise OptionsError(f"CommandLineOptions.stats_flush_interval_duration: must be at "
                               f"least {MIN_FLUSH_INTERVAL:g}s here (got {duration})")
        values["stats_flush_interval"] = seconds


def refuse_local(values: Mapping[str, Any], local: LocalAccess) -> None:
    """Raise `OptionsError` when the option `values` of a request name a Unix socket or a
    local file that `local` does not allow. Checked before the options are validated, since
    validating them already touches the paths (a CA file is loaded, a socket looked at)."""
    uri = values.get("uri")
    unix = parse_unix_url(uri) if isinstance(uri, str) else None
    if not local.unix_sockets and (unix is not None or values.get("unix_socket")):
        raise OptionsError(
            "CommandLineOptions.uri: a Unix socket target (http://unix:PATH:/...) is refused: "
            "it would let a client of the service reach the local sockets of this machine; "
            "the operator allows it with nhbench service --allow-unix-sockets")
    if local.files:
        return
    named = [name for name in LOCAL_FILE_OPTIONS if values.get(name) not in (None, "", ())]
    tls = values.get("tls_context")
    if isinstance(tls, str):
        try:
            if "cacert" in parse_tls_context(tls):
                named.append("tls_context trusted_ca.filename")
        except ValueError:
            pass  # refused by name when the options are validated
    if values.get("prometheus_listen"):
        named.append("prometheus_listen")
    if named:
        raise OptionsError(
            f"CommandLineOptions: {', '.join(dict.fromkeys(named))} names a local file (or "
            f"listener) of the service's machine, which a client of the service may not choose; the operator "
            f"allows it with nhbench service --allow-local-files")


def start_options(clo: Mapping[str, Any], overrides: Mapping[str, Any] | None = None, *,
                  local: LocalAccess | None = None) -> Options:
    """The `Options` of one execution.

    `clo` is CommandLineOptions in proto3 JSON with proto field names; `overrides` are the
    service's own settings applied to every execution (``ray``, ``hosts``). Raises
    `OptionsError` (one line, naming the field) for a field nhbench cannot honour, for a
    Unix socket or local file `local` does not allow (none by default), and for values
    nhbench's options refuse.
    """
    refuse_unsupported(key for key, value in clo.items() if not _is_unset(value))
    request = clo.get("request_options")
    if isinstance(request, Mapping):
        extra = sorted(k for k, v in request.items() if k not in _REQUEST_FIELDS
                       and not _is_unset(v))
        if extra:
            raise OptionsError(
                f"nhbench does not support CommandLineOptions.request_options."
                f"{', '.join(extra)}")
    rps = _wrapped(clo.get("requests_per_second"))
    if rps is not None and not 1 <= int(rps) <= 1_000_000:
        # Nighthawk's own range for this field; nhbench's rps 0 ("as fast as possible")
        # is not what a Nighthawk client can mean by it.
        raise OptionsError(
            f"CommandLineOptions.requests_per_second: value must be inside range "
            f"[1, 1000000] (got {rps})")
    values = options_from_command_line(clo)
    # The output reader keeps only the first multi-target endpoint; a request means all.
    target = clo.get("multi_target")
    if isinstance(target, Mapping):
        endpoints = target.get("endpoints") or []
        values.pop("uri", None)
        values["multi_target_endpoint"] = [_endpoint(e) for e in endpoints]
        values["multi_target_path"] = _wrapped(target.get("path")) or "/"
        values["multi_target_use_https"] = bool(_wrapped(target.get("use_https")))
    protocol = clo.get("protocol")
    if isinstance(protocol, Mapping) and protocol.get("value") in ("HTTP3", 2):
        values["protocol"] = "http3"
    # The whole UpstreamTlsContext goes to nhbench's tls_context option, which maps what it
    # can (sni, alpn, versions, ciphers, trusted CA, ...) and refuses the rest by name.
    tls = clo.get("tls_context")
    if isinstance(tls, Mapping) and tls:
        values.pop("sni", None)
        values["tls_context"] = json.dumps(tls)
    bind = clo.get("upstream_bind_config")
    if isinstance(bind, Mapping) and bind:
        values["upstream_bind_config"] = json.dumps(bind)
    strategy = _wrapped(clo.get("experimental_h1_connection_reuse_strategy"))
    if strategy in ("MRU", "LRU", 1, 2):
        values["experimental_h1_connection_reuse_strategy"] = (
            "mru" if strategy in ("MRU", 1) else "lru")
    if isinstance(clo.get("jitter_uniform"), str) and not _is_unset(clo["jitter_uniform"]):
        values["jitter_uniform"] = parse_json_duration(clo["jitter_uniform"])
    for key in ("simple_warmup", "latency_response_header_name", "execution_id"):
        if key in clo and not _is_unset(clo[key]):
            values[key] = _wrapped(clo[key])
    _stats_sinks(clo, values)
    if isinstance(clo.get("scheduled_start"), str):
        values["scheduled_start"] = clo["scheduled_start"]
    if values.get("uri") is None and "multi_target_endpoint" not in values:
        raise OptionsError("CommandLineOptions needs a uri (or a multi_target)")
    # What the service prints is its own business: an execution writes no report.
    values.pop("output_format", None)
    refuse_local(values, local or LocalAccess())
    values.update(overrides or {})
    return make_options(**values)
