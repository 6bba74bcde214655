"""The proxy Fortio's Go clients take from the environment, so that ``nhbench fortio`` goes
through the same one (docs/engine.md, "Proxies and tunnels").

Fortio's standard HTTP client (``-stdclient``, ``-h2`` on https://) sets Go's
``http.ProxyFromEnvironment``; its h2c transport (``-h2`` on http://) and its fast client
have no proxy at all; grpc-go (``-grpc``) maps every target through ``HTTPS_PROXY``. Go's
rules (golang.org/x/net/http/httpproxy): ``HTTPS_PROXY`` for https, ``HTTP_PROXY`` for http
(upper case first), never for ``localhost`` or a loopback address, not for what ``NO_PROXY``
lists (``*``, IP addresses, CIDR blocks, domains with their subdomains, an optional port);
a proxy without a scheme is http://.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from urllib.parse import urlsplit

__all__ = ["environment_proxy"]


def _env(environ: Mapping[str, str], name: str) -> str:
    return environ.get(name) or environ.get(name.lower()) or ""


def _bypassed(host: str, port: int, no_proxy: str) -> bool:
    host = host.lower().strip("[]")
    if host == "localhost":
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        ip = None
    if ip is not None and ip.is_loopback:
        return True
    for raw in no_proxy.split(","):
        entry = raw.strip().lower()
        if not entry:
            continue
        if entry == "*":
            return True
        if "/" in entry:
            try:
                if ip is not None and ip in ipaddress.ip_network(entry, strict=False):
                    return True
            except ValueError:
                pass
            continue
        try:
            entry_ip = ipaddress.ip_address(entry.strip("[]"))
        except ValueError:
            entry_ip = None
        if entry_ip is not None:
            if ip == entry_ip:
                return True
            continue
        name, _, entry_port = entry.rpartition(":") if entry.count(":") == 1 else (entry, "", "")
        if entry_port and entry_port != str(port):
            continue
        name = name or entry
        if name.startswith("*."):
            name = name[1:]
        if name.startswith("."):
            if host.endswith(name) or host == name[1:]:
                return True
        elif host == name or host.endswith("." + name):
            return True
    return False


def environment_proxy(url: str, *, stdclient: bool, h2: bool, grpc: bool,
                      environ: Mapping[str, str] | None = None) -> tuple[str, str] | None:
    """(the variable's name, the proxy URL) Fortio would use for `url`, or None."""
    env = os.environ if environ is None else environ
    parts = urlsplit(url if "://" in url else "http://" + url)
    scheme = parts.scheme.lower()
    if grpc:
        scheme = "https"
    elif not (stdclient or h2) or (h2 and scheme == "http"):
        # The fast client, and the h2c transport, have no proxy.
        return None
    if scheme not in ("http", "https"):
        return None
    name = "HTTPS_PROXY" if scheme == "https" else "HTTP_PROXY"
    proxy = _env(env, name)
    if not proxy:
        return None
    host = parts.hostname or ""
    port = parts.port or (443 if scheme == "https" else 80)
    if _bypassed(host, port, _env(env, "NO_PROXY")):
        return None
    if "://" not in proxy:
        proxy = "http://" + proxy
    try:
        proxy_parts = urlsplit(proxy)
        if proxy_parts.port is None and proxy_parts.hostname:
            # Go's default port for a proxy URL is its scheme's (80 for http://).
            proxy = proxy_parts._replace(netloc=proxy_parts.netloc + ":80").geturl()
    except ValueError:
        pass  # the proxy option refuses it, naming the variable
    return name, proxy
