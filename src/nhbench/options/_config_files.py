"""Server config files: JSON or YAML holding the whole ServerOptions, Nighthawk's
``ResponseOptions`` (with or without ``"@type"``), or an Envoy bootstrap of Nighthawk's test
server, from which the test-server, dynamic-delay and time-tracking filter configs and the
listener addresses are taken."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._relaxed_json import load_yaml, loads_relaxed, read_text
from ._values import (
    format_address,
)

__all__ = ["config_mapping", "load_config_file"]

_NIGHTHAWK_TYPES = (
    "nighthawk.server.ResponseOptions",
    "nighthawk.server.DynamicDelayConfiguration",
    "nighthawk.server.TimeTrackingConfiguration",
)


def _from_envoy_bootstrap(data: Mapping[str, Any]) -> dict[str, Any]:
    """Response options, listen addresses and TLS files out of a Nighthawk test server's
    Envoy config.

    Only what the test server can do is taken, and anything that would make it serve
    something else than Envoy would is refused by name: the listeners' addresses become
    ``listen`` (a cluster's endpoints are where Envoy sends traffic, never where it listens),
    a TLS transport socket with certificate files becomes ``tls_cert``/``tls_key``, and a
    QUIC listener, another transport socket, inline certificates or TLS settings the server
    does not have are errors rather than a plain-HTTP listener in their place.
    """
    static = data.get("static_resources")
    if not isinstance(static, Mapping):
        raise ValueError("static_resources: must be a mapping")
    listeners = static.get("listeners") or []
    if not isinstance(listeners, list):
        raise ValueError("static_resources.listeners: must be a list")
    response: dict[str, Any] = {}
    listen: list[str] = []
    # Per listener: the (certificate, key, alpn) of its TLS transport socket, or None.
    tls: list[tuple[str, tuple[str, str, tuple[str, ...] | None] | None]] = []
    for index, listener in enumerate(listeners):
        where = f"static_resources.listeners[{index}]"
        if not isinstance(listener, Mapping):
            raise ValueError(f"{where}: must be a mapping")
        listen.append(_listener_address(listener, where))
        chains = listener.get("filter_chains") or []
        if not isinstance(chains, list):
            raise ValueError(f"{where}.filter_chains: must be a list")
        if listener.get("default_filter_chain") is not None:
            chains = [*chains, listener["default_filter_chain"]]
        found: set[tuple[str, str, tuple[str, ...] | None] | None] = set()
        for number, chain in enumerate(chains):
            chain_where = f"{where}.filter_chains[{number}]"
            if not isinstance(chain, Mapping):
                raise ValueError(f"{chain_where}: must be a mapping")
            if chain.get("filter_chain_match"):
                raise ValueError(f"{chain_where}.filter_chain_match: not supported (the test "
                                 f"server serves every connection of a listener alike)")
            found.add(_transport_socket(chain.get("transport_socket"),
                                        f"{chain_where}.transport_socket"))
            _response_options(chain.get("filters"), response, f"{chain_where}.filters")
        if len(found) > 1:
            raise ValueError(f"{where}: filter chains with different transport sockets are "
                             f"not supported (the test server has one per listener)")
        tls.append((where, next(iter(found)) if found else None))
    out: dict[str, Any] = {"response": response}
    if listen:
        out["listen"] = listen
    settings = {entry for _, entry in tls}
    if len(settings) > 1:
        plain = [where for where, entry in tls if entry is None]
        what = (f"{plain[0]}: has no TLS transport socket while another listener has one"
                if plain else f"{tls[1][0]}: a TLS setting other than {tls[0][0]}'s")
        raise ValueError(f"{what}; the test server serves one TLS setting on every listener")
    chosen = next(iter(settings), None)
    if chosen is not None:
        cert, key, alpn = chosen
        out["tls_cert"], out["tls_key"] = cert, key
        if alpn is not None:
            out["alpn"] = list(alpn)
    return out


def _listener_address(listener: Mapping[str, Any], where: str) -> str:
    address = (listener.get("address") or {})
    socket_address = address.get("socket_address") if isinstance(address, Mapping) else None
    if not isinstance(socket_address, Mapping) or "address" not in socket_address:
        raise ValueError(f"{where}.address: must be a socket_address (the test server "
                         f"listens on TCP addresses)")
    protocol = str(socket_address.get("protocol", "TCP")).upper()
    if protocol == "UDP" or "udp_listener_config" in listener:
        raise ValueError(f"{where}: a UDP (QUIC) listener: the test server does not serve "
                         f"HTTP/3; remove the listener or make it TCP")
    if protocol != "TCP":
        raise ValueError(f"{where}.address.socket_address.protocol: must be TCP "
                         f"(got {protocol!r})")
    try:
        port = int(socket_address.get("port_value", 0))
    except (TypeError, ValueError):
        raise ValueError(f"{where}.address.socket_address.port_value: must be a port "
                         f"number (got {socket_address.get('port_value')!r})") from None
    return format_address(str(socket_address["address"]), port)


_TLS_SOCKET_NAMES = ("envoy.transport_sockets.tls", "tls")
_RAW_SOCKET_NAMES = ("envoy.transport_sockets.raw_buffer", "raw_buffer")


def _transport_socket(
    socket: Any, where: str
) -> tuple[str, str, tuple[str, ...] | None] | None:
    """(certificate file, key file, ALPN ids or None) of a DownstreamTlsContext transport
    socket, None for none (or a raw_buffer one); anything else is refused by name."""
    if socket is None:
        return None
    if not isinstance(socket, Mapping):
        raise ValueError(f"{where}: must be a mapping")
    name = str(socket.get("name", ""))
    config = socket.get("typed_config") or {}
    kind = str(config.get("@type", "")) if isinstance(config, Mapping) else ""
    if "quic" in name.lower() or "Quic" in kind:
        raise ValueError(f"{where}: a QUIC transport socket: the test server does not serve "
                         f"HTTP/3")
    if name in _RAW_SOCKET_NAMES and not kind.endswith("TlsContext"):
        return None
    if name not in _TLS_SOCKET_NAMES and not kind.endswith(".DownstreamTlsContext"):
        raise ValueError(f"{where}: transport socket {name!r} is not supported (the test "
                         f"server serves plain TCP or TLS with DownstreamTlsContext)")
    if not kind.endswith(".DownstreamTlsContext"):
        raise ValueError(f"{where}.typed_config: must be a DownstreamTlsContext "
                         f"(got @type {kind!r})")
    where = f"{where}.typed_config"
    _only(config, ("@type", "common_tls_context"), where)
    common = config.get("common_tls_context") or {}
    if not isinstance(common, Mapping):
        raise ValueError(f"{where}.common_tls_context: must be a mapping")
    where = f"{where}.common_tls_context"
    _only(common, ("tls_certificates", "alpn_protocols"), where)
    certificates = common.get("tls_certificates") or []
    if not isinstance(certificates, list) or len(certificates) != 1:
        raise ValueError(f"{where}.tls_certificates: must hold exactly one certificate "
                         f"(the test server presents one)")
    certificate = certificates[0]
    if not isinstance(certificate, Mapping):
        raise ValueError(f"{where}.tls_certificates[0]: must be a mapping")
    where = f"{where}.tls_certificates[0]"
    _only(certificate, ("certificate_chain", "private_key"), where)
    files = [_data_source_file(certificate.get(field), f"{where}.{field}")
             for field in ("certificate_chain", "private_key")]
    alpn = common.get("alpn_protocols")
    if alpn is not None:
        if isinstance(alpn, str):
            alpn = [alpn]
        if not isinstance(alpn, list) or not all(isinstance(a, str) for a in alpn):
            raise ValueError(f"{where}.alpn_protocols: must be a list of protocol ids")
    return files[0], files[1], None if alpn is None else tuple(alpn)


def _data_source_file(source: Any, where: str) -> str:
    # Envoy's DataSource: only a file name is taken; the file must exist now, so that a
    # config naming missing files is refused before anything listens.
    if not isinstance(source, Mapping) or not source:
        raise ValueError(f"{where}: is required (a filename)")
    _only(source, ("filename",), where,
          why=" (put the PEM in a file and name it with filename)")
    path = source["filename"]
    if not isinstance(path, str) or not path:
        raise ValueError(f"{where}.filename: must be a file name")
    if not os.path.isfile(path):
        raise ValueError(f"{where}.filename: no such file {path!r}")
    return path


def _only(node: Mapping[str, Any], known: tuple[str, ...], where: str, why: str = "") -> None:
    for key in node:
        if key not in known:
            raise ValueError(f"{where}.{key}: not supported by the test server{why}")


def _response_options(filters: Any, response: dict[str, Any], where: str) -> None:
    """Merge the test-server, dynamic-delay and time-tracking filter configs found under a
    filter chain's `filters` into `response`; a codec other than HTTP/1 or HTTP/2 is
    refused by name."""

    def walk(node: Any, path: str) -> None:
        if isinstance(node, Mapping):
            kind = str(node.get("@type", ""))
            if any(kind.endswith(t) for t in _NIGHTHAWK_TYPES):
                body = {k: v for k, v in node.items() if k != "@type"}
                # the filters other than test-server nest theirs
                body = dict(body.get("experimental_response_options", body))
                headers = body.pop("response_headers", None)
                v3 = body.pop("v3_response_headers", None)
                response.update(body)
                for extra in (headers, v3):
                    if extra:
                        response["response_headers"] = [
                            *response.get("response_headers", []), *extra
                        ]
                return
            codec = node.get("codec_type")
            if isinstance(codec, str) and codec.upper() == "HTTP3":
                raise ValueError(f"{path}.codec_type: HTTP3: the test server does not "
                                 f"serve HTTP/3")
            for key, value in node.items():
                walk(value, f"{path}.{key}")
        elif isinstance(node, list):
            for number, value in enumerate(node):
                walk(value, f"{path}[{number}]")

    walk(filters, where)


def load_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a JSON or YAML config file into a ServerOptions input dict.

    ``.json`` is JSON, ``.yaml``/``.yml`` YAML; any other name is tried as JSON, then YAML.
    The content is the whole ServerOptions, or Nighthawk's shape (a ResponseOptions object,
    or an Envoy bootstrap of its test server). Raises ValueError with a one-line message.
    """
    name = os.fspath(path)
    text = read_text(name, name)
    suffix = Path(name).suffix.lower()
    data: Any
    # Both parsers recurse once per level of nesting; a file nested deeper than the
    # interpreter's stack allows is refused with one line instead of a RecursionError.
    try:
        if suffix == ".json":
            data = _load_json(text, name)
        elif suffix in (".yaml", ".yml"):
            data = load_yaml(text, name)
        else:
            try:
                data = json.loads(text)
            except ValueError:
                data = load_yaml(text, name)
    except RecursionError:
        raise ValueError(f"{name}: nested too deeply to be a config file") from None
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ValueError(f"{name}: must hold a mapping of options (got {type(data).__name__})")
    try:
        return config_mapping(data)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None


def config_mapping(data: Mapping[str, Any]) -> dict[str, Any]:
    """A config mapping in any accepted shape as ServerOptions input."""
    if "static_resources" in data:
        return _from_envoy_bootstrap(data)
    kind = str(data.get("@type", ""))
    if kind:
        if not any(kind.endswith(t) for t in _NIGHTHAWK_TYPES):
            raise ValueError(f"unsupported @type {kind!r} (expected one of "
                             f"{', '.join(_NIGHTHAWK_TYPES)})")
        body = {k: v for k, v in data.items() if k != "@type"}
        return {"response": dict(body.get("experimental_response_options", body))}
    return dict(data)


def _load_json(text: str, name: str) -> Any:
    # Nighthawk reads a .json config with protobuf's relaxed JSON; so does this, after strict
    # JSON failed. The error shown stays the strict parser's.
    try:
        return loads_relaxed(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{name}: not valid JSON: {exc.msg} at line {exc.lineno} "
                         f"column {exc.colno}") from None


