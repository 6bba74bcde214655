"""Through an HTTP proxy: nhbench's ``proxy`` (curl's habit: absolute-form for http://,
CONNECT for the rest) and Nighthawk's ``tunnel_protocol`` / ``tunnel_uri`` /
``tunnel_tls_context`` (always CONNECT). The C core opens the tunnels (csrc/client/tunnel.c);
here the options are checked and the proxy's address and credentials taken apart.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Literal
from urllib.parse import unquote, urlsplit

from pydantic import Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from ._flags import Flag
from ._run_model import RunPart, lower

if TYPE_CHECKING:
    from ._run import Options

__all__ = ["Proxy", "ProxyEndpoint", "check_proxy", "parse_proxy_url", "proxy_tls"]

#: A proxy URL without a port means curl's default proxy port.
DEFAULT_PROXY_PORT = 1080
#: ... and an https:// one curl's default for it.
DEFAULT_HTTPS_PROXY_PORT = 443


@dataclass(frozen=True)
class ProxyEndpoint:
    """Where the connections go instead of the origin, and how they ask for it."""

    host: str
    port: int
    #: "connect" (a tunnel per connection), "absolute" (HTTP/1.1 requests in absolute-form)
    #: or "connect-udp" (HTTP/3 through an HTTP/3 proxy's CONNECT-UDP, RFC 9298).
    mode: Literal["connect", "absolute", "connect-udp"]
    #: the Proxy-Authorization value ("Basic ..."), or None.
    authorization: str | None


def parse_proxy_url(value: str, what: str, *, default_port: int,
                    tls_ok: bool = False) -> tuple[str, int, str | None]:
    """(host, port, Proxy-Authorization or None) of an http:// proxy URL (``host:port``
    too; https:// with `tls_ok`, whose default port is 443); anything the client would not
    honour is refused by name."""
    text = value.strip()
    if "://" not in text:
        text = "http://" + text
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"not a proxy URL ({exc}): {value!r}") from None
    if tls_ok and parts.scheme.lower() == "https":
        default_port = DEFAULT_HTTPS_PROXY_PORT
    elif parts.scheme.lower() != "http":
        raise ValueError(
            f"only http:// proxies are supported (got {parts.scheme}://): TLS to the proxy "
            f"itself is not offered{' here' if what == 'proxy' else ''}")
    if not parts.hostname:
        raise ValueError(f"no host in {value!r}")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError(f"a proxy URL is scheme://[user:password@]host:port only (got {value!r})")
    authorization = None
    if parts.username is not None:
        if parts.password is None:
            raise ValueError("proxy credentials need user:password (Basic authentication)")
        token = f"{unquote(parts.username)}:{unquote(parts.password)}".encode()
        authorization = "Basic " + base64.b64encode(token).decode("ascii")
    return parts.hostname, port if port is not None else default_port, authorization


class Proxy(RunPart):
    """An HTTP proxy between the client and the origin."""

    proxy: Annotated[str | None, Flag(metavar="URL", group="Targets and transport")] = Field(
        default=None,
        description="Send the load through this HTTP proxy, http://[user:password@]host:port "
        "(port default 1080, as curl): HTTP/1.1 requests to an http:// URI go to it in "
        "absolute-form; https://, HTTP/2 and gRPC open one CONNECT tunnel per connection. "
        "Credentials are sent as Basic Proxy-Authorization. https://host:port (port default "
        "443) is an HTTP/3 proxy, with proxy_protocol http3.",
    )
    tunnel_protocol: Annotated[
        Literal["http1", "http2", "http3"] | None,
        Flag(metavar="http1|http2|http3", group="Targets and transport"),
    ] = Field(
        default=None,
        description="Nighthawk's tunnel: every connection opens a CONNECT tunnel through "
        "tunnel_uri, over HTTP/1.1 (http1). http2 and http3 (CONNECT on an HTTP/2 or HTTP/3 "
        "stream; Nighthawk's CONNECT-UDP for an HTTP/3 run rides http2) are refused: not "
        "built. CONNECT-UDP over HTTP/3 is --proxy https://host:port --proxy-protocol http3.",
    )
    tunnel_uri: Annotated[str | None, Flag(metavar="URI", group="Targets and transport")] = Field(
        default=None,
        description="The tunnel's proxy, host:port or http://[user:password@]host:port "
        "(port default 80, as Nighthawk's URIs); needs tunnel_protocol.",
    )
    tunnel_tls_context: Annotated[
        str | None, Flag(metavar="JSON", group="Targets and transport")
    ] = Field(
        default=None,
        description="Nighthawk's TLS to the tunnel's proxy: refused (TLS to a proxy is not "
        "built; the origin's own TLS runs inside the tunnel).",
    )

    proxy_protocol: Annotated[
        Literal["http1", "http2", "http3"],
        Flag(metavar="http1|http2|http3", group="Targets and transport"),
    ] = Field(
        default="http1",
        description="What the proxy speaks: http1 (CONNECT over HTTP/1.1), or http3: an "
        "https:// proxy reached over QUIC that opens one CONNECT-UDP tunnel (RFC 9298) per "
        "connection of an HTTP/3 run. http2 is refused: not built.",
    )
    proxy_cacert: Annotated[str | None, Flag(metavar="FILE", group="Targets and transport")] = Field(
        default=None,
        description="Trust these CA certificates (PEM file or directory) for the https:// "
        "proxy's certificate (curl's --proxy-cacert); default: the system's.",
    )
    proxy_insecure: Annotated[bool, Flag(group="Targets and transport")] = Field(
        default=False,
        description="Do not check the https:// proxy's certificate (curl's --proxy-insecure).",
    )

    @field_validator("proxy_protocol", mode="before")
    @classmethod
    def _lower_proxy_protocol(cls, value: object) -> object:
        return lower(value)

    @field_validator("tunnel_protocol", mode="before")
    @classmethod
    def _lower_tunnel_protocol(cls, value: object) -> object:
        return lower(value)

    @field_validator("proxy", mode="before")
    @classmethod
    def _check_proxy(cls, value: object) -> object:
        if value is None:
            return None
        if not isinstance(value, str):
            raise ValueError("must be a URL such as http://127.0.0.1:3128")
        parse_proxy_url(value, "proxy", default_port=DEFAULT_PROXY_PORT, tls_ok=True)
        return value.strip()

    @field_validator("tunnel_uri", mode="before")
    @classmethod
    def _check_tunnel_uri(cls, value: object) -> object:
        if value is None:
            return None
        if not isinstance(value, str):
            raise ValueError("must be host:port or http://host:port")
        parse_proxy_url(value, "tunnel_uri", default_port=80)
        return value.strip()


def _conflict(a: str, b: str) -> PydanticCustomError:
    return PydanticCustomError("options_conflict", "{a}: mutually exclusive with {b}",
                               {"a": a, "b": b})


def _refuse(a: str, msg: str) -> PydanticCustomError:
    return PydanticCustomError("options_file", "{a}: {msg}", {"a": a, "msg": msg})


def check_proxy(options: Options, info: ValidationInfo) -> None:
    """Nighthawk's rules for the tunnel flags, then what nhbench's tunnels carry."""
    del info
    given = options.tunnel_protocol is not None
    if given and options.tunnel_uri is None:
        raise PydanticCustomError("options_needs", "{a}: needs {b}",
                                  {"a": "tunnel_protocol", "b": "tunnel_uri"})
    if not given and (options.tunnel_uri is not None or options.tunnel_tls_context is not None):
        raise PydanticCustomError(
            "options_needs", "{a}: needs {b}",
            {"a": "tunnel_uri" if options.tunnel_uri is not None else "tunnel_tls_context",
             "b": "tunnel_protocol"})
    if options.tunnel_protocol == "http3" and options.tunnel_tls_context is None:
        # Nighthawk's own check comes first: a QUIC tunnel needs its TLS settings.
        raise PydanticCustomError("options_needs", "{a}: needs {b}",
                                  {"a": "tunnel_protocol", "b": "tunnel_tls_context"})
    if check_udp_tunnel(options):
        return
    if given and options.protocol == "http3":
        raise _refuse("tunnel_protocol", f"protocol http3 over tunnel_protocol "
                      f"{options.tunnel_protocol} is not supported (Nighthawk refuses http1 "
                      "and http3; its CONNECT-UDP over http2 is not built here: nhbench's "
                      "--proxy https://host:port --proxy-protocol http3 is CONNECT-UDP over "
                      "HTTP/3)")
    if options.tunnel_protocol == "http2":
        raise _refuse("tunnel_protocol", "http2 (CONNECT on an HTTP/2 stream to the proxy) is "
                      "not built: use http1")
    if options.tunnel_protocol == "http3":
        raise _refuse("tunnel_protocol", "http3 (CONNECT on an HTTP/3 stream to the proxy) is "
                      "not built: use http1")
    if options.tunnel_tls_context is not None:
        raise _refuse("tunnel_tls_context", "TLS to the proxy is not built (the origin's TLS "
                      "runs inside the tunnel): leave it out and use a plain-HTTP proxy")
    if options.proxy is not None and given:
        raise _conflict("proxy", "tunnel_uri")
    if options.proxy is None and not given:
        return
    name = "proxy" if options.proxy is not None else "tunnel_uri"
    if options.protocol == "http3":
        raise _refuse(name, "HTTP/3 runs over UDP, which an HTTP proxy's CONNECT does not carry")
    if options.uri and options.target.scheme == "udp":
        raise _refuse(name, "udp:// runs over UDP, which an HTTP proxy's CONNECT does not carry")
    if options.unix_socket_path is not None:
        raise _conflict(name, "unix_socket")
    # The proxy resolves the origin's name; nothing here picks among its addresses.
    if options.resolve:
        raise _conflict(name, "resolve")
    if options.dns_method != "first":
        raise _conflict(name, "dns_method")



def _proxy_scheme(options: Options) -> str:
    text = (options.proxy or "").strip()
    return text.split("://", 1)[0].lower() if "://" in text else "http"


def proxy_tls(options: Options) -> tuple[str | None, bool]:
    """(CA file or directory or None, insecure) for the TLS to an https:// proxy."""
    return options.proxy_cacert, options.proxy_insecure


def check_udp_tunnel(options: Options) -> bool:
    """CONNECT-UDP (RFC 9298) over HTTP/3: ``proxy https://... proxy_protocol http3`` for an
    HTTP/3 run. True when the options ask for it and it fits (nothing else of check_proxy
    applies then); the proxy flags only it uses are refused by name otherwise. Nighthawk's
    own CONNECT-UDP is another thing (over an HTTP/2 proxy: protocol http3 with
    tunnel_protocol http2; it refuses http3 over http3), refused in check_proxy."""
    https = options.proxy is not None and _proxy_scheme(options) == "https"
    if options.proxy_protocol == "http2":
        raise _refuse("proxy_protocol", "http2 (CONNECT on an HTTP/2 stream to the proxy) is "
                      "not built: use http1, or http3 for an HTTP/3 run")
    if options.proxy_protocol == "http3" and options.proxy is None:
        raise PydanticCustomError("options_needs", "{a}: needs {b}",
                                  {"a": "proxy_protocol", "b": "proxy"})
    wanted = options.proxy_protocol == "http3"
    if https and not wanted:
        raise _refuse("proxy", "TLS to an HTTP/1.1 proxy is not built: an https:// proxy is "
                      "reached over QUIC with proxy_protocol http3 (CONNECT-UDP)")
    for name in ("proxy_cacert", "proxy_insecure"):
        if getattr(options, name) and not https:
            raise _refuse(name, "trust for an https:// proxy's certificate: give --proxy "
                          "https://host:port")
    if not wanted:
        return False
    name = "proxy_protocol"
    if not https:
        raise _refuse(name, "http3 reaches the proxy over QUIC, which is TLS: give the proxy "
                      "as https://host:port")
    if options.protocol != "http3":
        raise _refuse(name, "http3 (CONNECT-UDP, RFC 9298) carries UDP: it needs protocol "
                      "http3 (a TCP CONNECT on an HTTP/3 stream is not built)")
    if options.tunnel_protocol is not None:
        raise _conflict("proxy", "tunnel_uri")
    if options.unix_socket_path is not None:
        raise _conflict(name, "unix_socket")
    if options.resolve:
        raise _conflict(name, "resolve")
    if options.dns_method != "first":
        raise _conflict(name, "dns_method")
    return True
