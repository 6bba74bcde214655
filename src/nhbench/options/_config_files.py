"""Server config files: JSON or YAML holding the whole ServerOptions, Nighthawk's
``ResponseOptions`` (with or without ``"@type"``), or an Envoy bootstrap of Nighthawk's test
server, from which the test-server, dynamic-delay and time-tracking filter configs and the
listener addresses are taken."""

from __future__ import annotations

import atexit
import json
import os
import tempfile
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
    a TLS transport socket with certificate files (or inline PEM, written to private
    temporary files removed at exit) becomes ``tls_cert``/``tls_key``, a QUIC listener (UDP,
    ``udp_listener_config``, a QUIC transport socket, codec HTTP3) turns on ``http3`` on its
    address, and another transport socket or TLS settings the server does not have are
    errors rather than a plain-HTTP listener in their place.
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
    quic_any = False
    for index, listener in enumerate(listeners):
        where = f"static_resources.listeners[{index}]"
        if not isinstance(listener, Mapping):
            raise ValueError(f"{where}: must be a mapping")
        address, quic = _listener_address(listener, where)
        quic_any = quic_any or quic
        listen.append(address)
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
                                        f"{chain_where}.transport_socket", quic))
            _response_options(chain.get("filters"), response, f"{chain_where}.filters", quic)
        if len(found) > 1:
            raise ValueError(f"{where}: filter chains with different transport sockets are "
                             f"not supported (the test server has one per listener)")
        tls.append((where, next(iter(found)) if found else None))
    out: dict[str, Any] = {"response": response}
    if listen:
        # A QUIC listener's address is listened on over TCP too (HTTP/1.1 and HTTP/2 with
        # the same TLS): the server's HTTP/3 rides on its TCP listen ports.
        out["listen"] = listen
    if quic_any:
        out["http3"] = True
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


def _listener_address(listener: Mapping[str, Any], where: str) -> tuple[str, bool]:
    """The listener's address, and whether it is a QUIC listener."""
    address = (listener.get("address") or {})
    socket_address = address.get("socket_address") if isinstance(address, Mapping) else None
    if not isinstance(socket_address, Mapping) or "address" not in socket_address:
        raise ValueError(f"{where}.address: must be a socket_address (the test server "
                         f"listens on TCP addresses)")
    protocol = str(socket_address.get("protocol", "TCP")).upper()
    quic = protocol == "UDP" or "udp_listener_config" in listener
    if quic:
        if protocol != "UDP":
            raise ValueError(f"{where}.address.socket_address.protocol: must be UDP with "
                             f"udp_listener_config (got {protocol!r})")
        udp = listener.get("udp_listener_config")
        if not isinstance(udp, Mapping) or "quic_options" not in udp:
            raise ValueError(f"{where}.udp_listener_config.quic_options: is required (the test "
                             f"server serves a UDP listener as QUIC only)")
        _only(udp, ("quic_options",), f"{where}.udp_listener_config")
        options = udp.get("quic_options") or {}
        if not isinstance(options, Mapping):
            raise ValueError(f"{where}.udp_listener_config.quic_options: must be a mapping")
        _only(options, (), f"{where}.udp_listener_config.quic_options")
    elif protocol != "TCP":
        raise ValueError(f"{where}.address.socket_address.protocol: must be TCP or UDP "
                         f"(got {protocol!r})")
    try:
        port = int(socket_address.get("port_value", 0))
    except (TypeError, ValueError):
        raise ValueError(f"{where}.address.socket_address.port_value: must be a port "
                         f"number (got {socket_address.get('port_value')!r})") from None
    return format_address(str(socket_address["address"]), port), quic


_TLS_SOCKET_NAMES = ("envoy.transport_sockets.tls", "tls")
_RAW_SOCKET_NAMES = ("envoy.transport_sockets.raw_buffer", "raw_buffer")


def _transport_socket(
    socket: Any, where: str, quic: bool = False
) -> tuple[str, str, tuple[str, ...] | None] | None:
    """(certificate file, key file, ALPN ids or None) of a DownstreamTlsContext transport
    socket (or, on a QUIC listener, of a QuicDownstreamTransport's), None for none (or a
    raw_buffer one); anything else is refused by name."""
    if socket is None:
        if quic:
            raise ValueError(f"{where}: a QUIC listener needs a QUIC transport socket "
                             f"(QuicDownstreamTransport) with its certificate")
        return None
    if not isinstance(socket, Mapping):
        raise ValueError(f"{where}: must be a mapping")
    name = str(socket.get("name", ""))
    config = socket.get("typed_config") or {}
    kind = str(config.get("@type", "")) if isinstance(config, Mapping) else ""
    if "quic" in name.lower() or "Quic" in kind:
        if not quic:
            raise ValueError(f"{where}: a QUIC transport socket on a TCP listener (QUIC needs "
                             f"a UDP listener with udp_listener_config)")
        if not kind.endswith(".QuicDownstreamTransport"):
            raise ValueError(f"{where}.typed_config: must be a QuicDownstreamTransport "
                             f"(got @type {kind!r})")
        _only(config, ("@type", "downstream_tls_context"), f"{where}.typed_config")
        context = config.get("downstream_tls_context")
        if not isinstance(context, Mapping):
            raise ValueError(f"{where}.typed_config.downstream_tls_context: is required (the "
                             f"certificate QUIC's handshake presents)")
        cert, key, alpn = _tls_context(context, f"{where}.typed_config.downstream_tls_context")
        if alpn is not None:
            raise ValueError(f"{where}.typed_config.downstream_tls_context.common_tls_context."
                             f"alpn_protocols: not supported on a QUIC listener (HTTP/3 is h3)")
        return cert, key, None
    if quic:
        raise ValueError(f"{where}: transport socket {name!r} on a QUIC listener (it needs "
                         f"envoy.transport_sockets.quic)")
    if name in _RAW_SOCKET_NAMES and not kind.endswith("TlsContext"):
        return None
    if name not in _TLS_SOCKET_NAMES and not kind.endswith(".DownstreamTlsContext"):
        raise ValueError(f"{where}: transport socket {name!r} is not supported (the test "
                         f"server serves plain TCP or TLS with DownstreamTlsContext)")
    if not kind.endswith(".DownstreamTlsContext"):
        raise ValueError(f"{where}.typed_config: must be a DownstreamTlsContext "
                         f"(got @type {kind!r})")
    return _tls_context(config, f"{where}.typed_config")


def _tls_context(
    config: Mapping[str, Any], where: str
) -> tuple[str, str, tuple[str, ...] | None]:
    """(certificate file, key file, ALPN ids or None) of a DownstreamTlsContext."""
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


# Inline PEM written to private files: one file per distinct text (so that listeners with
# the same inline certificate have the same TLS setting), removed when the process exits.
_INLINE_FILES: dict[str, str] = {}


def _remove_inline_files() -> None:
    for path in _INLINE_FILES.values():
        try:
            os.unlink(path)
        except OSError:
            pass
    _INLINE_FILES.clear()


def _inline_file(text: str) -> str:
    path = _INLINE_FILES.get(text)
    if path is None:
        if not _INLINE_FILES:
            atexit.register(_remove_inline_files)
        # mkstemp creates the file 0600 in the temporary directory: the private key is
        # readable by this user only.
        fd, path = tempfile.mkstemp(prefix="nhbench-inline-", suffix=".pem")
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        _INLINE_FILES[text] = path
    return path


def _data_source_file(source: Any, where: str) -> str:
    # Envoy's DataSource: a file name (the file must exist now, so that a config naming
    # missing files is refused before anything listens) or inline PEM text.
    if not isinstance(source, Mapping) or not source:
        raise ValueError(f"{where}: is required (a filename or an inline_string)")
    _only(source, ("filename", "inline_string"), where,
          why=" (put the PEM in a file and name it with filename, or in inline_string)")
    if len(source) != 1:
        raise ValueError(f"{where}: one of filename and inline_string, not both")
    if "inline_string" in source:
        text = source["inline_string"]
        if not isinstance(text, str) or "-----BEGIN " not in text:
            raise ValueError(f"{where}.inline_string: must be PEM text")
        return _inline_file(text)
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


def _response_options(filters: Any, response: dict[str, Any], where: str,
                      quic: bool = False) -> None:
    """Merge the test-server, dynamic-delay and time-tracking filter configs found under a
    filter chain's `filters` into `response`; codec HTTP3 is taken on a QUIC listener only
    (and only it there)."""

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
            if isinstance(codec, str) and (codec.upper() == "HTTP3") != quic:
                raise ValueError(
                    f"{path}.codec_type: HTTP3 on a TCP listener (HTTP/3 needs a QUIC "
                    f"listener)" if not quic else
                    f"{path}.codec_type: {codec} on a QUIC listener (it serves HTTP3 only)")
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


