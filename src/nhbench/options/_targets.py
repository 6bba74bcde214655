"""Targets and transport: the value syntaxes of the options that say where the
connections go and how.

* ``--multi-target-endpoint HOST:PORT`` (Nighthawk's: IPv4:port, [IPv6]:port or DNS:port),
  `parse_endpoint`;
* ``--upstream-bind-config JSON`` (Envoy's BindConfig, as Nighthawk takes it) and
  ``--source-address ADDR``, `parse_bind_config` and `parse_source_address`;
* Unix sockets: ``--unix-socket PATH`` (Fortio's ``-unix-socket``, curl's ``--unix-socket``)
  and the ``http://unix:/path/to.sock:/request/path`` URL spelling, `parse_unix_url` and
  `check_unix_socket`.

``--tls-context`` and ``--transport-socket`` are in `_tls_context`. Every parser raises
ValueError with a message that follows "<option>: " directly.
"""

from __future__ import annotations

import errno
import ipaddress
import json
import os
import re
import socket
import stat
from collections.abc import Sequence
from typing import Any

__all__ = [
    "MAX_SOURCES",
    "MAX_TARGETS",
    "UNIX_HOST",
    "check_unix_socket",
    "endpoint_authority",
    "parse_bind_config",
    "parse_endpoint",
    "parse_resolve_entry",
    "parse_source_address",
    "parse_unix_url",
    "source_family_refusal",
]

# The C core's NHB_MAX_TARGETS: every target has at least one connection (and its 64 KiB
# read buffer) in every worker, so the list is bounded; far above any real endpoint list.
MAX_TARGETS = 1024
# The C core's NHB_MAX_SOURCES: --source-address entries a run spreads its connections over.
MAX_SOURCES = 1024
# The Host a Unix socket URL sends when it names none (curl sends "localhost" too).
UNIX_HOST = "localhost"
# sun_path is 108 bytes with its terminating NUL.
_SUN_PATH_MAX = 107

_HOST_RE = re.compile(
    r"^(?=.{1,253}\.?$)[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?"
    r"(?:\.[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?)*\.?$"
)
_ENDPOINT_HELP = "must be IPv4:port, [IPv6]:port or DNS:port, as Nighthawk's"


def parse_endpoint(value: object) -> tuple[str, int]:
    """``"127.0.0.1:8080"``, ``"[::1]:8080"`` or ``"backend.local:80"`` → (host, port).

    The host is kept as written (lower-cased, without brackets); names are resolved when
    the run starts, as the URI's host is. The port must be given: Nighthawk requires it.
    """
    if not isinstance(value, str):
        raise ValueError(f"{_ENDPOINT_HELP} (got {value!r})")
    text = value.strip()
    if text.startswith("["):
        host, sep, port = text[1:].partition("]:")
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f"{_ENDPOINT_HELP}: bad IPv6 address (got {value!r})") from None
    else:
        host, sep, port = text.rpartition(":")
        if ":" in host:
            raise ValueError(f"{_ENDPOINT_HELP}: an IPv6 address needs brackets (got {value!r})")
        if sep and not _HOST_RE.match(host.lower()):
            raise ValueError(f"{_ENDPOINT_HELP}: bad host name (got {value!r})")
    if not sep or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"{_ENDPOINT_HELP}, with a port in 1..65535 (got {value!r})")
    return host.lower(), int(port)


def parse_resolve_entry(text: str, given: str) -> str:
    """One entry of ``--resolve``: an IPv4 or IPv6 address (brackets optional), returned
    normalised, or a host name, returned lower-cased (resolved when the run starts). A port
    is refused: the URI's is used, as Fortio's ``-resolve`` does."""
    entry = text.strip()
    if entry.startswith("[") and entry.endswith("]"):
        entry = entry[1:-1]
    try:
        return str(ipaddress.ip_address(entry))
    except ValueError:
        pass
    lowered = entry.lower()
    if ":" in lowered:
        raise ValueError(f"{entry!r} is not an address: give the address alone, the URI's port "
                         f"is used (got {given!r})")
    if not _HOST_RE.match(lowered):
        raise ValueError(f"{entry!r} is neither an IP address nor a host name (got {given!r})")
    return lowered


def endpoint_authority(host: str, port: int, scheme: str) -> str:
    """The Host header for an endpoint: host, plus :port unless it is the scheme's default."""
    bracketed = f"[{host}]" if ":" in host else host
    default = 443 if scheme == "https" else 80
    return bracketed if port == default else f"{bracketed}:{port}"


def parse_source_address(value: object) -> str:
    """An IPv4 or IPv6 literal (the kernel picks each connection's port), normalized."""
    if not isinstance(value, str):
        raise ValueError(f"must be an IPv4 or IPv6 address such as 127.0.0.2 (got {value!r})")
    text = value.strip()
    try:
        return str(ipaddress.ip_address(text.strip("[]")))
    except ValueError:
        raise ValueError(
            f"must be an IPv4 or IPv6 address such as 127.0.0.2 or ::1, without a port "
            f"(got {value!r})"
        ) from None


def check_source_address(address: str) -> None:
    """Raise ValueError when `address` is not one this host can bind (EADDRNOTAVAIL).

    Checked once here so that a typo is invalid input rather than every connection of the
    run failing.
    """
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((address, 0))
        except OSError as exc:
            name = errno.errorcode.get(exc.errno or 0, "")
            raise ValueError(
                f"cannot bind {address}: {exc.strerror or exc} ({name + ': ' if name else ''}"
                "not an address of this host?)"
            ) from None


def source_family_refusal(sources: Sequence[str], destinations: Sequence[str]) -> str | None:
    """Why the connections cannot go from `sources` to `destinations` (numeric addresses),
    or None. Connections take the source addresses in turn, whatever the destination, so
    an IPv4 source paired with an IPv6 destination (or the other way) would make every
    connection given it fail its connect; refused before anything is sent instead."""
    def family(address: str) -> int:
        return ipaddress.ip_address(address.strip("[]")).version

    wanted = {family(d) for d in destinations}
    wrong = [s for s in sources if family(s) not in wanted]
    if not wrong or not wanted:
        return None
    kinds = " and ".join(f"IPv{v}" for v in sorted(wanted))
    return (f"{', '.join(wrong)} cannot reach the run's {kinds} "
            f"destination{'s' if len(destinations) > 1 else ''} "
            f"({', '.join(destinations)}); give source addresses of the same family")


# Envoy's BindConfig fields nhbench does not apply, refused by name rather than ignored.
_BIND_FIELDS = ("source_address",)
_SOCKET_ADDRESS_FIELDS = ("address", "port_value", "protocol")


def _snake(name: str) -> str:
    # Proto3 JSON accepts lowerCamelCase names (portValue) as well as the proto's own.
    return re.sub(r"(?<=[a-z0-9])([A-Z])", lambda m: "_" + m.group(1).lower(), name)


def load_json_object(value: object, what: str) -> dict[str, Any]:
    """A JSON object given as text (or already a mapping, from a config file or Python)."""
    if isinstance(value, dict):
        data: object = value
    elif isinstance(value, str):
        try:
            data = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"is not valid JSON ({exc.msg} at column {exc.colno})") from None
    else:
        raise ValueError(f"must be {what} as a JSON object (got {value!r})")
    if not isinstance(data, dict):
        raise ValueError(f"must be {what} as a JSON object (got {value!r})")
    return {_snake(str(k)): v for k, v in data.items()}


def refuse_unknown(data: dict[str, Any], known: tuple[str, ...], where: str) -> None:
    """Raise naming the first field of `data` nhbench does not support."""
    for key in data:
        if key not in known:
            name = f"{where}.{key}" if where else key
            raise ValueError(
                f"{name} is not supported (supported: "
                f"{', '.join((where + '.' if where else '') + k for k in known)})"
            )


def parse_bind_config(value: object) -> str:
    """Envoy's BindConfig JSON, ``{"source_address": {"address": "127.0.0.2",
    "port_value": 0}}``, as Nighthawk's ``--upstream-bind-config`` takes it → the address.

    Only the source address is supported; its port must be 0 (with a fixed port every
    connection after the first would fail to bind).
    """
    data = load_json_object(value, "Envoy's BindConfig")
    refuse_unknown(data, _BIND_FIELDS, "")
    source = data.get("source_address")
    if not isinstance(source, dict):
        raise ValueError("needs source_address: {\"address\": \"ADDR\", \"port_value\": 0}")
    source = {_snake(str(k)): v for k, v in source.items()}
    refuse_unknown(source, _SOCKET_ADDRESS_FIELDS, "source_address")
    protocol = source.get("protocol", "TCP")
    if protocol not in ("TCP", 0):
        raise ValueError(f"source_address.protocol: only TCP is supported (got {protocol!r})")
    port = source.get("port_value", 0)
    if port not in (0, "0"):
        raise ValueError(
            "source_address.port_value: only 0 is supported (the kernel picks each "
            f"connection's port; a fixed port fits one connection only) (got {port!r})"
        )
    address = source.get("address")
    try:
        return parse_source_address(address)
    except ValueError as exc:
        raise ValueError(f"source_address.address: {exc}") from None


_UNIX_URL_RE = re.compile(r"^(https?)://unix:(/[^:]*)(?::(/.*)?)?$", re.IGNORECASE)


def parse_unix_url(uri: str) -> tuple[str, str, str] | None:
    """``http://unix:/run/app.sock:/status?x=1`` → ("http", "/run/app.sock", "/status?x=1").

    The spelling of Node's http client and the ``request``/``got`` libraries (the socket
    path, then a colon and the request path). None when `uri` is not of this form. The
    socket path must be absolute and cannot contain a colon.
    """
    match = _UNIX_URL_RE.match(uri)
    if match is None:
        return None
    return match.group(1).lower(), match.group(2), match.group(3) or "/"


def check_unix_path(path: object) -> str:
    """The syntax of a Unix socket path the client can connect to."""
    if not isinstance(path, str) or not path.strip():
        raise ValueError(f"must be the path of a Unix socket (got {path!r})")
    if path.startswith("@"):
        raise ValueError(
            f"Linux abstract socket names are not supported by the client, only paths "
            f"(got {path!r})"
        )
    if "\0" in path:
        raise ValueError(f"must not contain a NUL character (got {path!r})")
    if len(os.fsencode(path)) > _SUN_PATH_MAX:
        raise ValueError(f"a Unix socket path is at most {_SUN_PATH_MAX} bytes (got {path!r})")
    return path


def check_unix_socket(path: str) -> None:
    """Raise ValueError unless `path` is an existing Unix socket (checked before the run)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise ValueError(f"cannot use {path!r}: {exc.strerror or exc}") from None
    if not stat.S_ISSOCK(mode):
        raise ValueError(f"{path!r} is not a Unix socket")
