"""Nighthawk's gRPC service API: ``nhbench service --listen HOST:PORT`` (docs/service.md).

A grpcio server implementing ``nighthawk.client.NighthawkService/ExecutionStream`` from
protos written from Nighthawk's API (proto/nighthawk/client/service.proto), with gRPC
server reflection and health, so that tools written against Nighthawk's service drive
nhbench. Each StartRequest's CommandLineOptions become nhbench `Options`, run through
`nhbench.distributed.make_benchmark` (so the service's ``--ray`` applies a Ray cluster to
every execution), and the Result goes back as Nighthawk's ``Output`` message.

grpcio and protobuf are the optional extra ``service``; nothing here imports them until a
service starts (`start_service`), so ``import nhbench`` stays light.
"""

from __future__ import annotations

import importlib.util
import ipaddress
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..options import parse_address

if TYPE_CHECKING:
    from ._server import Service

__all__ = ["DEFAULT_LISTEN", "DEFAULT_PORT", "NEEDS_TOKEN", "is_loopback",
           "missing_dependencies", "parse_listen", "start_service"]

#: Nighthawk's service listens on port 8443 by default; nhbench keeps the port but binds the
#: loopback address, not 0.0.0.0: the service has no TLS and no authentication, and whoever
#: reaches it can make this machine send load anywhere.
DEFAULT_PORT = 8443
DEFAULT_LISTEN = f"127.0.0.1:{DEFAULT_PORT}"

#: Why a non-loopback listen address without a token is refused.
NEEDS_TOKEN = ("a listen address other than loopback needs --token (or NHBENCH_SERVICE_TOKEN): "
               "whoever reaches the service can make this machine send load anywhere")

# The import names of the ``service`` extra, and the distributions that provide them.
_REQUIRED = (("grpc", "grpcio"), ("grpc_health", "grpcio-health-checking"),
             ("grpc_reflection", "grpcio-reflection"), ("google.protobuf", "protobuf"))


def missing_dependencies() -> list[str]:
    """The distributions of the ``service`` extra that are not installed."""
    missing = []
    for module, distribution in _REQUIRED:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # a missing parent package (google)
            found = False
        if not found:
            missing.append(distribution)
    return missing


def is_loopback(host: str) -> bool:
    """Whether the numeric `host` (as `parse_listen` gives it) is a loopback address."""
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def parse_listen(value: str) -> tuple[str, int]:
    """``HOST:PORT``, ``[IPv6]:PORT`` or a bare host (Nighthawk's rule: port 8443 is then
    added) → ``(numeric_host, port)``; ValueError names what is wrong."""
    text = value.strip()
    bare_ipv6 = text.startswith("[") and text.endswith("]")
    if text and (bare_ipv6 or ":" not in text):
        text = f"{text}:{DEFAULT_PORT}"
    return parse_address(text)


def start_service(listen: str = DEFAULT_LISTEN, *,
                  overrides: Mapping[str, Any] | None = None,
                  max_streams: int | None = None,
                  idle_timeout: float | None = None,
                  allow_unix_sockets: bool = False,
                  allow_local_files: bool = False,
                  token: str | None = None,
                  ray_idle_timeout: float | None = None) -> Service:
    """Start serving on `listen` and return the running `Service` (``.address``, ``.port``,
    ``.stop()``). `overrides` are option values applied to every execution (``ray``,
    ``hosts``); `max_streams` bounds the ExecutionStreams open at once (default 32) and
    `idle_timeout` ends a stream that sends no request for that many seconds (default 30);
    `allow_unix_sockets` and `allow_local_files` let a request name a Unix socket or a local
    file (refused by default); `token`, when given, is required in every call's
    ``authorization: Bearer TOKEN`` metadata but health checks; `ray_idle_timeout` is how
    long the Ray connection and load actors of ``ray`` executions are kept after the last one
    (default 300 s). docs/service.md has the rules. Raises ValueError for a bad address (or
    a non-loopback one without a token), OSError when it cannot be bound."""
    from ._mapping import LocalAccess
    from ._server import IDLE_TIMEOUT, MAX_STREAMS, RAY_IDLE_TIMEOUT, Service

    address = parse_listen(listen)
    if token is None and not is_loopback(address[0]):
        raise ValueError(NEEDS_TOKEN)
    service = Service(address, overrides=overrides,
                      max_streams=max_streams or MAX_STREAMS,
                      idle_timeout=idle_timeout or IDLE_TIMEOUT,
                      local=LocalAccess(unix_sockets=allow_unix_sockets,
                                        files=allow_local_files),
                      token=token,
                      ray_idle_timeout=ray_idle_timeout or RAY_IDLE_TIMEOUT)
    service.start()
    return service
