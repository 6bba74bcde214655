"""Nighthawk's ``--stats-sinks`` (Envoy's ``envoy.config.metrics.v3.StatsSink`` in JSON),
carried into nhbench's pushed-metrics options (docs/telemetry.md, docs/compat.md), for the
Nighthawk command line (nhbench.compat) and the gRPC service's ``stats_sinks``
(nhbench.service, which hands each sink over in the same JSON form): one reading for both.

What is honoured is Envoy's StatsdSink (``envoy.stat_sinks.statsd``) with an ``address``:
UDP statsd to that IP address and port, with its ``prefix``. Everything else is refused by
name, never dropped: ``tcp_cluster_name`` names a cluster of Envoy's bootstrap, which a
command line cannot define (TCP statsd is ``nhbench run --statsd tcp://HOST:PORT``); an
address whose protocol is TCP would be sent UDP by Envoy's sink; the other sink types
(DogStatsD, metrics service, OpenTelemetry, Hystrix, Graphite, Wasm) have no counterpart
here, except OpenTelemetry, which ``--otlp-endpoint`` pushes over HTTP.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any

from .._exceptions import OptionsError

__all__ = ["apply_stats_sinks", "parse_stats_sink"]

_STATSD_TYPE = "type.googleapis.com/envoy.config.metrics.v3.StatsdSink"
# Envoy's names of its statsd sink factory (the second is the deprecated one).
_STATSD_NAMES = ("envoy.stat_sinks.statsd", "envoy.statsd")
# The other sinks Envoy has, by the type of their typed_config or their name, and why not.
_OTHERS = {
    "envoy.config.metrics.v3.DogStatsdSink": "the DogStatsD sink has no counterpart here "
    "(plain statsd: envoy.stat_sinks.statsd)",
    "envoy.stat_sinks.dog_statsd": "the DogStatsD sink has no counterpart here (plain "
    "statsd: envoy.stat_sinks.statsd)",
    "envoy.config.metrics.v3.MetricsServiceConfig": "Envoy's gRPC metrics service has no "
    "counterpart here (OTLP/HTTP: nhbench run --otlp-endpoint)",
    "envoy.stat_sinks.metrics_service": "Envoy's gRPC metrics service has no counterpart "
    "here (OTLP/HTTP: nhbench run --otlp-endpoint)",
    "envoy.extensions.stat_sinks.open_telemetry.v3.SinkConfig": "Envoy's OpenTelemetry sink "
    "exports over gRPC; nhbench pushes OTLP over HTTP: nhbench run --otlp-endpoint",
    "envoy.stat_sinks.open_telemetry": "Envoy's OpenTelemetry sink exports over gRPC; nhbench "
    "pushes OTLP over HTTP: nhbench run --otlp-endpoint",
}


def _fail(given: str, index: int, message: str) -> OptionsError:
    return OptionsError(f"{given} #{index}: {message}; nothing was sent")


def _only(given: str, index: int, where: str, value: Mapping[str, Any],
          allowed: tuple[str, ...]) -> None:
    # Envoy loads the sink with the strict validation visitor: an unknown field is an error.
    for key in value:
        if key not in allowed:
            raise _fail(given, index, f"{where}: unknown field {key!r}")


def _object(given: str, index: int, where: str, value: object) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _fail(given, index, f"{where}: must be an object")
    return value


def _statsd(given: str, index: int, config: Mapping[str, Any]) -> tuple[str, str | None]:
    """(udp://IP:PORT, prefix or None) of one StatsdSink config."""
    _only(given, index, "typed_config", config,
          ("@type", "address", "tcp_cluster_name", "tcpClusterName", "prefix"))
    prefix = config.get("prefix")
    if prefix is not None and not isinstance(prefix, str):
        raise _fail(given, index, "typed_config.prefix: must be a string")
    cluster = config.get("tcp_cluster_name", config.get("tcpClusterName"))
    if cluster is not None and "address" in config:
        raise _fail(given, index, "typed_config: address and tcp_cluster_name are one of")
    if cluster is not None:
        raise _fail(given, index, f"typed_config.tcp_cluster_name: {cluster!r} names a cluster "
                    "of Envoy's bootstrap, which nighthawk_client's flags cannot define (TCP "
                    "statsd: nhbench run --statsd tcp://HOST:PORT)")
    if "address" not in config:
        raise _fail(given, index, "typed_config: needs address (or tcp_cluster_name)")
    address = _object(given, index, "typed_config.address", config["address"])
    _only(given, index, "typed_config.address", address, ("socket_address", "socketAddress"))
    if not address:
        raise _fail(given, index, "typed_config.address: needs socket_address (a pipe or "
                    "an internal address has no counterpart here)")
    where = "typed_config.address.socket_address"
    socket = _object(given, index, where,
                     address.get("socket_address", address.get("socketAddress")))
    _only(given, index, where, socket,
          ("address", "port_value", "portValue", "protocol", "ipv4_compat", "ipv4Compat"))
    # SocketAddress.protocol defaults to TCP (enum value 0), yet Envoy's statsd sink sends
    # UDP to any address: only a protocol written down as TCP is a contradiction.
    protocol = socket.get("protocol", "UDP")
    protocol = {0: "TCP", 1: "UDP"}.get(protocol, protocol) if isinstance(protocol, int) \
        else protocol
    if str(protocol).upper() == "TCP":
        raise _fail(given, index, f"{where}.protocol: TCP: Envoy's statsd sink sends UDP to an "
                    "address whatever its protocol (TCP statsd: nhbench run --statsd "
                    "tcp://HOST:PORT)")
    if str(protocol).upper() != "UDP":
        raise _fail(given, index, f"{where}.protocol: must be UDP (got {protocol!r})")
    host = socket.get("address")
    if not isinstance(host, str) or not host:
        raise _fail(given, index, f"{where}.address: needs an IP address")
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        # Envoy resolves the sink's address without DNS: an IP literal only.
        raise _fail(given, index, f"{where}.address: must be an IP address (got {host!r})") \
            from None
    port = socket.get("port_value", socket.get("portValue"))
    if isinstance(port, str) and port.isdigit():
        port = int(port)  # protobuf's JSON takes a uint32 as a string too
    if not isinstance(port, int) or isinstance(port, bool) or not 0 < port <= 65535:
        raise _fail(given, index, f"{where}.port_value: must be 1 to 65535 (got {port!r})")
    text = f"[{ip}]:{port}" if ip.version == 6 else f"{ip}:{port}"
    return f"udp://{text}", prefix


def parse_stats_sink(given: str, index: int, text: str) -> tuple[str, str | None]:
    """One ``--stats-sinks`` value: (udp://IP:PORT, prefix or None), or OptionsError."""
    from .._relaxed_json import loads_relaxed

    try:
        sink = loads_relaxed(text)
    except ValueError as exc:
        raise _fail(given, index, f"not JSON ({exc})") from None
    sink = _object(given, index, "the sink", sink)
    _only(given, index, "the sink", sink, ("name", "typed_config", "typedConfig"))
    name = sink.get("name", "")
    config = sink.get("typed_config", sink.get("typedConfig"))
    if config is None:
        if name in _STATSD_NAMES:
            raise _fail(given, index, f"{name}: needs typed_config with an address")
        why = _OTHERS.get(str(name))
        raise _fail(given, index, f"name {name!r}: {why or 'not a stats sink nhbench has'}")
    config = _object(given, index, "typed_config", config)
    kind = str(config.get("@type", ""))
    if kind != _STATSD_TYPE:
        short = kind.rpartition("/")[2]
        why = _OTHERS.get(short) or _OTHERS.get(str(name))
        if not kind:
            why = "needs an @type"
        raise _fail(given, index, f"typed_config {kind or ''}: "
                    f"{why or 'not a stats sink nhbench has (envoy.stat_sinks.statsd is)'}")
    return _statsd(given, index, config)


def apply_stats_sinks(values: dict[str, Any], value: Any, given: str) -> None:
    """``--stats-sinks`` (repeatable) into ``statsd`` and ``statsd_prefix``."""
    addresses: list[str] = []
    prefixes: set[str] = set()
    for index, text in enumerate(value, 1):
        address, prefix = parse_stats_sink(given, index, text)
        addresses.append(address)
        prefixes.add(prefix or "envoy")
    if len(prefixes) > 1:
        raise OptionsError(f"{given}: the sinks have different prefixes "
                           f"({', '.join(sorted(prefixes))}); nhbench has one for all of them; "
                           "nothing was sent")
    values["statsd"] = addresses
    values["statsd_prefix"] = prefixes.pop()
