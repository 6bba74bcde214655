"""Where the load goes: the URI (`TargetUri`, the first field: every field validator after
it sees it) or Nighthawk's several endpoints, and the transport to them: connection reuse,
the source address, Unix sockets (`Targets`).
"""

from __future__ import annotations

import ipaddress
import os
from typing import TYPE_CHECKING, Annotated, Literal
from urllib.parse import quote

from pydantic import BaseModel, Field, ValidationError, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from ._errors import format_validation_error
from ._flags import Flag
from ._run_model import Data, RunPart, json_text, lower
from ._run_tls import TLS_FIELDS
from ._targets import (
    MAX_SOURCES,
    MAX_TARGETS,
    check_source_address,
    check_unix_path,
    check_unix_socket,
    parse_bind_config,
    parse_endpoint,
    parse_resolve_entry,
    parse_source_address,
)
from ._values import as_tuple, parse_uri, resolve, resolve_all

if TYPE_CHECKING:
    from ._run import Options

__all__ = ["NoUri", "TargetUri", "Targets", "check_targets", "multi_target_uri",
           "target_addresses"]


class NoUri(str):
    """The URI's value when the options give several targets instead (Nighthawk's rule: one
    or the other): "" that `TargetUri._check_uri` knows from a URI typed as ""."""

    __slots__ = ()


class TargetUri(RunPart):
    """The target URL."""

    uri: Annotated[str, Flag(positional=True, optional=True, metavar="URI")] = Field(
        description="Target URL: http:// or https:// (TLS; certificates are verified unless "
        "insecure), or http://unix:/path/to.sock:/request-path for a Unix socket. Not with "
        "multi_target_endpoint."
    )

    @field_validator("uri", mode="before")
    @classmethod
    def _check_uri(cls, value: object) -> object:
        if isinstance(value, NoUri):
            # No URI: several targets stand for it (multi_target_uri).
            return ""
        parse_uri(value)
        return value.strip() if isinstance(value, str) else value


class Targets(RunPart):
    """Several targets instead of the URI, connection reuse, the source address and Unix
    sockets."""

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
        tuple[str, ...],
        Flag(metavar="ADDR[,ADDR...]", append=True, group="Targets and transport"),
    ] = Field(
        default=(),
        description="Bind outgoing connections to these local IPv4 or IPv6 addresses, e.g. "
        "127.0.0.2; comma-separated or repeated. Connections take them in turn (round "
        "robin); each address is tried at start and one this host cannot bind is refused. "
        "The kernel picks the port at connect time (IP_BIND_ADDRESS_NO_PORT), so each "
        "address has its own ephemeral range per destination. Not with a Unix socket.",
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

    resolve: Annotated[
        tuple[str, ...],
        Flag(metavar="ADDR[,ADDR...]", append=True, group="Targets and transport"),
    ] = Field(
        default=(),
        description="Connect to these addresses instead of the URI host's (Fortio's "
        "-resolve, curl's --resolve): the URI's host stays in the Host header and the TLS "
        "name. IPv4 or IPv6 addresses, or names resolved at start; comma-separated or "
        "repeated. Several are spread over by dns_method.",
    )
    dns_method: Annotated[
        Literal["first", "rr", "random"], Flag(metavar="first|rr|random",
                                              group="Targets and transport")
    ] = Field(
        default="first",
        description="When the host (or resolve) has several addresses of address_family: "
        "first (every connection to the first), rr (each new connection to the next, "
        "round robin over the run) or random. With several, the result counts requests, "
        "errors and latency per address.",
    )
    dns_refresh: Annotated[
        Literal["start", "connection"], Flag(metavar="start|connection",
                                             group="Targets and transport")
    ] = Field(
        default="start",
        description="When the host's name is resolved: start (once, before the run) or "
        "connection (again for each new connection, as a client of DNS-based balancing "
        "or a Kubernetes headless service sees it; dns_method picks among each answer's "
        "addresses, the resolution is timed in benchmark_http_client.dns and failures "
        "count by cause in dns.*). Envoy's dns_refresh_rate refreshes on a timer instead.",
    )

    @field_validator("resolve", mode="before")
    @classmethod
    def _parse_resolve(cls, value: object) -> object:
        value = as_tuple(value)
        if not isinstance(value, (list, tuple)):
            return value
        entries: list[str] = []
        for item in value:
            if not isinstance(item, str):
                raise ValueError(f"must be addresses or names (got {item!r})")
            for part in item.split(","):
                entries.append(parse_resolve_entry(part, item))
        if len(entries) > MAX_TARGETS:
            raise ValueError(f"at most {MAX_TARGETS} addresses (got {len(entries)})")
        return tuple(entries)

    @field_validator("dns_method", mode="before")
    @classmethod
    def _lower_dns_method(cls, value: object) -> object:
        return lower(value)

    @field_validator("dns_refresh", mode="before")
    @classmethod
    def _lower_dns_refresh(cls, value: object) -> object:
        return lower(value)

    @field_validator("multi_target_endpoint", mode="before")
    @classmethod
    def _parse_endpoints(cls, value: object) -> object:
        value = as_tuple(value)
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
        return lower(value)

    @field_validator("source_address", mode="before")
    @classmethod
    def _check_source_address(cls, value: object, info: ValidationInfo) -> object:
        if value is None:
            return ()
        value = as_tuple(value)
        if not isinstance(value, (list, tuple)):
            return value
        addresses: list[str] = []
        for item in value:
            parts = item.split(",") if isinstance(item, str) else [item]
            addresses.extend(parse_source_address(part) for part in parts)
        if len(addresses) > MAX_SOURCES:
            raise ValueError(f"at most {MAX_SOURCES} addresses (got {len(addresses)})")
        # The addresses belong to the machine of the run, not to that of a result's reader.
        if not (info.context or {}).get("echo"):
            for address in addresses:
                check_source_address(address)
        return tuple(addresses)

    @field_validator("upstream_bind_config", mode="before")
    @classmethod
    def _bind_config_text(cls, value: object, info: ValidationInfo) -> object:
        value = json_text(value)
        if value is None:
            return None
        address = parse_bind_config(value)
        if not (info.context or {}).get("echo"):
            check_source_address(address)
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


# ---- the normalisation steps and the checks (their order: _run_checks) ---------------------


def multi_target_uri(data: Data, info: ValidationInfo, model: type[BaseModel]) -> Data:
    # Nighthawk's rule: a URI or the --multi-target-* options, never both. The URI stays
    # a required field (so that leaving out both says "uri: is required"); endpoints
    # without a URI stand for it with "", which check_targets accepts only with them.
    if data.get("multi_target_endpoint") and (
        data.get("uri") in (None, "")
    ):
        return {**data, "uri": NoUri()}
    return data


def check_targets(options: Options, info: ValidationInfo) -> None:
    endpoints = options.multi_target_endpoint
    if options.uri and (endpoints or options.multi_target_path is not None
                     or options.multi_target_use_https):
        given = ("multi_target_endpoint" if endpoints else "multi_target_path"
                 if options.multi_target_path is not None else "multi_target_use_https")
        raise PydanticCustomError(
            "options_conflict", "{a}: mutually exclusive with {b}", {"a": given, "b": "uri"}
        )
    if endpoints and options.multi_target_path is None:
        raise PydanticCustomError(
            "options_needs", "{a}: needs {b}",
            {"a": "multi_target_endpoint", "b": "multi_target_path"},
        )
    if endpoints and not options.multi_target_use_https:
        # Tls._tls_needs_https sees no URI here: the endpoints' scheme is the switch.
        for name in TLS_FIELDS:
            if name in options.model_fields_set and getattr(options, name) != (
                type(options).model_fields[name].default
            ):
                raise PydanticCustomError(
                    "options_file", "{a}: {msg}",
                    {"a": name, "msg": "only applies to https:// targets (the endpoints are http:// "
                            "without --multi-target-use-https)"},
                )
    unix_url = options.uri and parse_uri(options.uri).unix_socket is not None
    pairs = [
        ("upstream_bind_config", "source_address",
         options.upstream_bind_config is not None and bool(options.source_address)),
        ("unix_socket", "uri", options.unix_socket is not None and unix_url),
        ("unix_socket", "multi_target_endpoint",
         options.unix_socket is not None and bool(endpoints)),
        ("source_address", "unix_socket",
         bool(options.source_address) and options.unix_socket_path is not None),
        ("upstream_bind_config", "unix_socket",
         options.upstream_bind_config is not None and options.unix_socket_path is not None),
        ("transport_socket", "tls_context",
         options.transport_socket is not None and options.tls_context is not None),
        # The endpoints are addresses already; a Unix socket has none.
        ("resolve", "multi_target_endpoint", bool(options.resolve) and bool(endpoints)),
        ("resolve", "unix_socket", bool(options.resolve) and options.unix_socket_path is not None),
        ("dns_method", "multi_target_endpoint", options.dns_method != "first" and bool(endpoints)),
        ("dns_method", "unix_socket",
         options.dns_method != "first" and options.unix_socket_path is not None),
        # Per connection there is a name to resolve: not pinned addresses, not a socket path.
        ("dns_refresh", "resolve", options.dns_refresh != "start" and bool(options.resolve)),
        ("dns_refresh", "multi_target_endpoint",
         options.dns_refresh != "start" and bool(endpoints)),
        ("dns_refresh", "unix_socket",
         options.dns_refresh != "start" and options.unix_socket_path is not None),
    ]
    for a, b, clash in pairs:
        if clash:
            raise PydanticCustomError(
                "options_conflict", "{a}: mutually exclusive with {b}", {"a": a, "b": b}
            )
    if options.dns_refresh != "start" and not endpoints and ip_version(options.target.host):
        raise PydanticCustomError(
            "options_file", "{a}: {msg}",
            {"a": "dns_refresh", "msg": f"the host {options.target.host} is an IP address: "
             "there is no name to resolve"},
        )
    wanted = {"v4": 4, "v6": 6}.get(options.address_family)
    for entry in options.resolve:
        # A literal of the other family could never be connected to: refused before the run.
        version = ip_version(entry)
        if wanted is not None and version is not None and version != wanted:
            raise PydanticCustomError(
                "options_file", "{a}: {msg}",
                {"a": "resolve", "msg": f"{entry} is IPv{version} but address_family is "
                 f"{options.address_family}"},
            )
    context_field = "tls_context" if options.tls_context is not None else "transport_socket"
    mapped = options.tls_context_options
    if mapped is None:
        return
    # "{a}: {msg}" names the option as the user gave it (flag, config key or keyword).
    if options.target.scheme != "https":
        raise PydanticCustomError(
            "options_file", "{a}: {msg}",
            {"a": context_field, "msg": "only applies to https:// URIs"},
        )
    for option in mapped:
        if option in options.model_fields_set:
            raise PydanticCustomError(
                "options_conflict", "{a}: mutually exclusive with {b}",
                {"a": context_field, "b": option},
            )
    # The mapped values go through the same checks as the options themselves (a CA file
    # OpenSSL cannot load, unknown ciphers, ...).
    try:
        # The client certificate may be inline PEM, not a file: check_client_cert loads
        # it with its key.
        type(options).model_validate(
            {"uri": "https://localhost/",
             **{k: v for k, v in mapped.items() if k not in ("cert", "key", "key_passphrase_env")}},
            context=info.context,
        )
    except ValidationError as exc:
        raise PydanticCustomError(
            "options_file", "{a}: {msg}",
            {"a": context_field, "msg": format_validation_error(exc, type(options))},
        ) from None


def ip_version(text: str) -> int | None:
    """4 or 6 for an IP address literal, None for a name."""
    try:
        return ipaddress.ip_address(text).version
    except ValueError:
        return None


def target_addresses(options: Options) -> list[str]:
    """The numeric addresses the connections of a one-target run go to, resolved now (the
    run's start): the resolve entries' (a name gives all its addresses) or the URI host's.
    dns_method first keeps the first alone, so that such a run is what it always was;
    raises ResolveError."""
    target = options.target
    family = options.address_family
    names = options.resolve or (target.host,)
    # Resolved again per connection (dns_refresh connection), the name only has to resolve
    # now: the connections spread over each answer's addresses, not over these.
    every = options.dns_method != "first" and options.dns_refresh == "start"
    addresses: list[str] = []
    for name in names:
        found = (resolve_all(name, target.port, family) if every
                 else [resolve(name, target.port, family)])
        addresses += [a for a in found if a not in addresses]
        if not every:
            break
    return addresses
