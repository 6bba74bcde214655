"""What one run started from the web UI (``nhbench ui``, Fortio's REST API) may do: the caps
and the target allow-list, checked on the run's validated `Options` before anything is sent
(docs/outputs.md, "Running tests from the browser"). Here, with the other option models, so
that the CLI's help and the UI read the same defaults without importing the UI."""

from __future__ import annotations

import ipaddress
import os
import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from .._exceptions import RunRefusedError

if TYPE_CHECKING:
    from ._run import Options

__all__ = ["DEFAULT_UI_LIMITS", "UILimits", "allowed_target"]


@dataclass(frozen=True)
class UILimits:
    """What one web-started run may do, and how many may run at once. A cap of 0 is no cap
    (only by an explicit flag)."""

    #: Requests per second, over all workers; a run "as fast as possible" is refused while
    #: this is not 0.
    max_rate: float = 1000.0
    #: Connections, over all workers.
    max_connections: int = 64
    #: Seconds; a run without a duration (until stopped) is refused while this is not 0.
    max_duration: float = 300.0
    #: Runs at once.
    max_runs: int = 2
    #: Targets a run may address: networks (CIDR or one address) and host names. Empty:
    #: any target.
    allow_targets: tuple[str, ...] = ()

    def check(self, options: Options) -> None:
        """Raise `RunRefusedError` when `options` go beyond a cap or address a target outside
        the allow-list. Nothing is sent before this passes."""
        workers = options.concurrency if isinstance(options.concurrency, int) else \
            len(os.sched_getaffinity(0))
        rate = options.rps * workers
        if self.max_rate > 0:
            if rate <= 0:
                raise RunRefusedError(f"rate: a run as fast as possible is refused (the cap is "
                                 f"{self.max_rate:g} requests/s, --max-rate)")
            if rate > self.max_rate:
                raise RunRefusedError(f"rate: {rate:g} requests/s is more than the cap of "
                                 f"{self.max_rate:g} (--max-rate)")
        connections = options.connections * workers
        if 0 < self.max_connections < connections:
            raise RunRefusedError(f"connections: {connections} is more than the cap of "
                             f"{self.max_connections} (--max-connections)")
        if self.max_duration > 0:
            if options.no_duration and options.requests is None:
                raise RunRefusedError(f"duration: a run until stopped is refused (the cap is "
                                 f"{self.max_duration:g}s, --max-duration)")
            duration = options.effective_duration
            if options.requests is not None and rate > 0:
                # A count at a fixed rate lasts count / rate (it ends sooner if the count
                # is reached first); a count as fast as possible is refused above.
                by_count = options.requests / rate
                duration = by_count if duration is None else min(duration, by_count)
            if duration is not None and duration > self.max_duration:
                raise RunRefusedError(f"duration: {duration:g}s is more than the cap of "
                                 f"{self.max_duration:g}s (--max-duration)")
        if self.allow_targets:
            host = urlsplit(options.uri).hostname or ""
            if not allowed_target(host, self.allow_targets):
                raise RunRefusedError(f"target: {host!r} is not in the allow-list "
                                 f"({', '.join(self.allow_targets)}; --allow-target)")
            # With resolve the connections go to those addresses, not to the URI's host: a
            # host name that passes would otherwise carry the run to any address. Each
            # entry must pass the same check (a name: every address it has).
            for entry in options.resolve:
                if not allowed_target(entry, self.allow_targets):
                    raise RunRefusedError(
                        f"resolve: {entry!r} is not in the allow-list "
                        f"({', '.join(self.allow_targets)}; --allow-target); the connections "
                        f"would go there, not to {host!r}")


DEFAULT_UI_LIMITS = UILimits()


def allowed_target(host: str, allowed: tuple[str, ...]) -> bool:
    """True when `host` is one of the `allowed` host names, or an address in one of the
    allowed networks, or a name every address of which is in one of them (a name that does
    not resolve is refused)."""
    networks = []
    names = set()
    for entry in allowed:
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            names.add(entry.lower().rstrip("."))
    if host.lower().rstrip(".") in names:
        return True
    try:
        addresses = [ipaddress.ip_address(host.split("%", 1)[0])]
    except ValueError:
        try:
            infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
        except (OSError, UnicodeError):
            return False
        addresses = [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]
    return bool(addresses) and all(
        any(address.version == network.version and address in network
            for network in networks)
        for address in addresses)
