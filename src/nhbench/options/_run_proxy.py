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

__all__ = ["Proxy", "ProxyEndpoint", "ProxyTls", "check_proxy", "parse_proxy",
           "parse_proxy_url", "parse_tunnel_tls_context", "proxy_tls"]

#: A proxy URL without a port means curl's default proxy port (443 for https://, as curl).
DEFAULT_PROXY_PORT = 1080
DEFAULT_HTTPS_PROXY_PORT = 443


@dataclass(frozen=True)
class ProxyTls:
    """TLS to the proxy itself (the origin's own TLS, if any, runs inside the tunnel)."""

    #: the name sent as SNI (None: none, as for an IP address).
    sni: str | None
    #: the name or address the proxy's certificate must match (None: the chain only).
    verify_name: str | None
    #: a CA file or hashed directory; None: the system store (or cacert_pem).
    cacert: str | None
    #: the CAs' PEM text (Nighthawk's trusted_ca.inline_string), or None.
    cacert_pem: str | None
    insecure: bool


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
    #: TLS to the proxy, or None (plain TCP).
    tls: ProxyTls | None = None
    #: the CONNECT's protocol: an HTTP/1.1 request, or a stream of an HTTP/2 connection or of
    #: an HTTP/3 one (QUIC, so always with tls).
    protocol: Literal["http1", "http2", "http3"] = "http1"


def parse_proxy_url(value: str, what: str, *, default_port: int) -> tuple[str, int, str | None]:
    """(host, port, Proxy-Authorization or None) of an http:// proxy URL (``host:port``
    too); anything the client would not honour is refused by name."""
    scheme, host, port, auth = parse_proxy(value, what, default_port=default_port)
    if scheme != "http":
        raise ValueError(f"only http:// proxies are supported here (got {scheme}://)")
    return host, port, auth


def parse_proxy(value: str, what: str, *,
                default_port: int) -> tuple[Literal["http", "https"], str, int, str | None]:
    """(scheme, host, port, Proxy-Authorization or None) of an http:// or https:// proxy
    URL (``host:port`` too: http://; https:// defaults to port 443); anything the client
    would not honour is refused by name."""
    text = value.strip()
    if "://" not in text:
        text = "http://" + text
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"not a proxy URL ({exc}): {value!r}") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise ValueError(
            f"only http:// and https:// proxies are supported (got {parts.scheme}://)")
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
    if port is None:
        port = DEFAULT_HTTPS_PROXY_PORT if scheme == "https" else default_port
    return ("https" if scheme == "https" else "http"), parts.hostname, port, authorization


#: What of Envoy's UpstreamTlsContext the tunnel's TLS honours (everything else is refused
#: by name): the SNI, and the CA to trust. Without a validation context Envoy does not
#: verify the proxy's certificate, and with trusted_ca alone it checks the chain, not the
#: name (no match_typed_subject_alt_names): the same here.
_TLS_CONTEXT_KEYS = "sni, common_tls_context.validation_context.trusted_ca.{filename,inline_string}"


def _camel(key: str) -> str:
    # Protobuf's JSON takes lowerCamelCase field names as well as the proto names.
    head, *rest = key.split("_")
    return head + "".join(p.title() for p in rest)


def _take(obj: dict[str, object], key: str, where: str) -> object:
    for name in (key, _camel(key)):
        if name in obj:
            return obj.pop(name)
    return None


def parse_tunnel_tls_context(text: str) -> tuple[str | None, str | None, str | None]:
    """(sni, CA file, CA PEM text) of Nighthawk's --tunnel-tls-context JSON (an Envoy
    UpstreamTlsContext); verification is on only with a trusted_ca, as Envoy's. Any other
    field is refused by name."""
    import json

    try:
        ctx = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"not JSON ({exc})") from None
    if not isinstance(ctx, dict):
        raise ValueError("must be a JSON object (an UpstreamTlsContext)")
    sni = _take(ctx, "sni", "")
    common = _take(ctx, "common_tls_context", "")
    cafile = capem = None
    if common is not None:
        if not isinstance(common, dict):
            raise ValueError("common_tls_context: must be an object")
        validation = _take(common, "validation_context", "common_tls_context")
        if validation is not None:
            if not isinstance(validation, dict):
                raise ValueError("common_tls_context.validation_context: must be an object")
            trusted = _take(validation, "trusted_ca", "validation_context")
            if not isinstance(trusted, dict) or not trusted:
                raise ValueError("common_tls_context.validation_context: needs trusted_ca "
                                 "(filename or inline_string)")
            cafile = _take(trusted, "filename", "trusted_ca")
            capem = _take(trusted, "inline_string", "trusted_ca")
            if trusted:
                raise ValueError(f"common_tls_context.validation_context.trusted_ca."
                                 f"{next(iter(trusted))}: not supported (filename or "
                                 "inline_string)")
            if (cafile is None) == (capem is None) or not isinstance(cafile or capem, str):
                raise ValueError("common_tls_context.validation_context.trusted_ca: one "
                                 "filename or inline_string (a string)")
            if validation:
                raise ValueError(f"common_tls_context.validation_context."
                                 f"{next(iter(validation))}: not supported (only trusted_ca)")
        if common:
            raise ValueError(f"common_tls_context.{next(iter(common))}: not supported "
                             f"(supported: {_TLS_CONTEXT_KEYS})")
    if ctx:
        raise ValueError(f"{next(iter(ctx))}: not supported (supported: {_TLS_CONTEXT_KEYS})")
    if sni is not None and (not isinstance(sni, str) or not sni):
        raise ValueError("sni: must be a non-empty string")
    return (sni if isinstance(sni, str) else None,
            cafile if isinstance(cafile, str) else None,
            capem if isinstance(capem, str) else None)


class Proxy(RunPart):
    """An HTTP proxy between the client and the origin."""

    proxy: Annotated[str | None, Flag(metavar="URL", group="Targets and transport")] = Field(
        default=None,
        description="Send the load through this HTTP proxy, http[s]://[user:password@]host:port "
        "(port default 1080, 443 for https://, as curl): HTTP/1.1 requests to an http:// URI "
        "go to a plain-HTTP proxy in absolute-form; https://, HTTP/2 and gRPC, and any URI "
        "through an https:// proxy or --proxy-protocol http2, open one CONNECT tunnel per "
        "connection. https:// speaks TLS to the proxy (its certificate checked against its "
        "name, --proxy-cacert, --proxy-insecure). Credentials are sent as Basic "
        "Proxy-Authorization. An HTTP/3 run opens one CONNECT-UDP tunnel (RFC 9298) per "
        "connection: with proxy_protocol http3 to an https:// proxy over QUIC, with http2 on "
        "an HTTP/2 stream; with proxy_protocol http3 any other run's CONNECT rides an HTTP/3 "
        "stream over QUIC.",
    )
    proxy_protocol: Annotated[
        Literal["http1", "http2", "http3"],
        Flag(metavar="http1|http2|http3", group="Targets and transport"),
    ] = Field(
        default="http1",
        description="How the tunnel is asked for: http1, a CONNECT request per connection; "
        "http2, one HTTP/2 connection to the proxy per connection carrying one CONNECT "
        "stream (h2c with prior knowledge to an http:// proxy, ALPN h2 to an https:// one; for "
        "an HTTP/3 run an extended CONNECT for CONNECT-UDP, RFC 9298, whose datagrams ride "
        "as capsules); http3, one QUIC connection to an https:// proxy per connection, "
        "carrying one CONNECT stream (RFC 9114 section 4.4) that carries the HTTP/1.1 or "
        "HTTP/2 connection to the origin, or for an HTTP/3 run one CONNECT-UDP tunnel.",
    )
    proxy_cacert: Annotated[str | None, Flag(metavar="FILE", group="Targets and transport")] = (
        Field(default=None, description="PEM file (or OpenSSL hashed directory) of CA "
              "certificates to trust for an https:// proxy's certificate instead of the "
              "system store (curl's --proxy-cacert)."))
    proxy_insecure: Annotated[bool, Flag(group="Targets and transport")] = Field(
        default=False, description="Do not verify an https:// proxy's certificate (curl's "
        "--proxy-insecure).")
    tunnel_protocol: Annotated[
        Literal["http1", "http2", "http3"] | None,
        Flag(metavar="http1|http2|http3", group="Targets and transport"),
    ] = Field(
        default=None,
        description="Nighthawk's tunnel: every connection opens a CONNECT tunnel through "
        "tunnel_uri, over HTTP/1.1 (http1), on an HTTP/2 stream (http2) or on an HTTP/3 "
        "stream over QUIC (http3, which needs tunnel_tls_context); proxy_protocol. An HTTP/3 "
        "run's is CONNECT-UDP (RFC 9298) on the HTTP/2 stream, as Nighthawk's (http1 and "
        "http3 refused for it, as Nighthawk does). CONNECT-UDP over HTTP/3 is --proxy "
        "https://host:port --proxy-protocol http3.",
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
        description="Nighthawk's TLS to the tunnel's proxy, an Envoy UpstreamTlsContext in JSON: "
        "sni and common_tls_context.validation_context.trusted_ca (filename or inline_string) "
        "are honoured, anything else is refused by name; without trusted_ca the proxy's "
        "certificate is not verified (as Envoy), with it the chain is (not the name).",
    )

    @field_validator("tunnel_protocol", mode="before")
    @classmethod
    def _lower_tunnel_protocol(cls, value: object) -> object:
        return lower(value)

    @field_validator("proxy_protocol", mode="before")
    @classmethod
    def _lower_proxy_protocol(cls, value: object) -> object:
        return lower(value)

    @field_validator("proxy", mode="before")
    @classmethod
    def _check_proxy(cls, value: object) -> object:
        if value is None:
            return None
        if not isinstance(value, str):
            raise ValueError("must be a URL such as http://127.0.0.1:3128")
        parse_proxy(value, "proxy", default_port=DEFAULT_PROXY_PORT)
        return value.strip()

    @field_validator("proxy_cacert")
    @classmethod
    def _check_proxy_cacert(cls, value: str | None) -> str | None:
        if value is None:
            return None
        import os

        from ._run_tls import check_ca_file

        path = os.path.expanduser(value)
        if not os.path.isdir(path):
            check_ca_file(path)
        return path

    @field_validator("tunnel_tls_context")
    @classmethod
    def _check_tunnel_tls_context(cls, value: str | None) -> str | None:
        if value is not None:
            _sni, cafile, capem = parse_tunnel_tls_context(value)
            import ssl

            from ._run_tls import check_ca_file

            if cafile is not None:
                check_ca_file(cafile)
            if capem is not None:
                try:
                    ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cadata=capem)
                except (ssl.SSLError, ValueError) as exc:
                    raise ValueError("common_tls_context.validation_context.trusted_ca."
                                     f"inline_string: OpenSSL cannot load it ({exc})") from None
        return value

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


def _proxy_scheme(options: Options) -> str:
    text = (options.proxy or "").strip()
    return text.split("://", 1)[0].lower() if "://" in text else "http"


def proxy_tls(options: Options) -> tuple[str | None, bool]:
    """(CA file or directory or None, insecure) for the TLS to an https:// proxy."""
    return options.proxy_cacert, options.proxy_insecure


def _check_origin_reached_by_proxy(options: Options, name: str) -> None:
    """The proxy reaches the origin: no Unix socket, and no choice of the origin's address
    here (the proxy resolves its name; nothing here picks among its addresses)."""
    if options.unix_socket_path is not None:
        raise _conflict(name, "unix_socket")
    if options.resolve:
        raise _conflict(name, "resolve")
    if options.dns_method != "first":
        raise _conflict(name, "dns_method")
    if options.dns_refresh != "start":
        raise _conflict(name, "dns_refresh")


def check_proxy_http3(options: Options) -> bool:
    """``proxy https://... proxy_protocol http3``: CONNECT-UDP (RFC 9298) over HTTP/3 for an
    HTTP/3 run, True when it fits (nothing else of check_proxy applies then); for any other
    run a TCP CONNECT on an HTTP/3 stream (as Nighthawk's ``tunnel_protocol http3``), False:
    check_proxy's rules follow."""
    if options.proxy_protocol != "http3":
        return False
    name = "proxy_protocol"
    if options.proxy is None:
        raise PydanticCustomError("options_needs", "{a}: needs {b}", {"a": name, "b": "proxy"})
    if _proxy_scheme(options) != "https":
        raise _refuse(name, "http3 reaches the proxy over QUIC, which is TLS: give the proxy "
                      "as https://host:port")
    if options.protocol != "http3":
        return False
    if options.tunnel_protocol is not None:
        raise _conflict("proxy", "tunnel_uri")
    if options.proxy_cacert is not None and options.proxy_insecure:
        raise _conflict("proxy_cacert", "proxy_insecure")
    _check_origin_reached_by_proxy(options, name)
    return True


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
    if given and options.protocol == "http3" and options.tunnel_protocol != "http2":
        # Nighthawk's own refusals (options_impl.cc); its CONNECT-UDP rides http2.
        raise _refuse("tunnel_protocol", f"protocol http3 over tunnel_protocol "
                      f"{options.tunnel_protocol} is not supported (as Nighthawk: an HTTP/3 "
                      "run's CONNECT-UDP rides tunnel_protocol http2; nhbench's --proxy "
                      "https://host:port --proxy-protocol http3 is CONNECT-UDP over HTTP/3)")
    if check_proxy_http3(options):
        return
    if options.proxy is None and (options.proxy_protocol != "http1"
                                  or options.proxy_cacert is not None or options.proxy_insecure):
        which = ("proxy_protocol" if options.proxy_protocol != "http1" else
                 "proxy_cacert" if options.proxy_cacert is not None else "proxy_insecure")
        raise PydanticCustomError("options_needs", "{a}: needs {b}", {"a": which, "b": "proxy"})
    if options.proxy is not None and (options.proxy_cacert is not None or options.proxy_insecure):
        if not options.proxy.lower().startswith("https://"):
            raise _refuse("proxy_cacert" if options.proxy_cacert is not None
                          else "proxy_insecure", "only applies to an https:// proxy")
    if options.proxy_cacert is not None and options.proxy_insecure:
        raise _conflict("proxy_cacert", "proxy_insecure")
    if options.proxy is not None and given:
        raise _conflict("proxy", "tunnel_uri")
    if given and options.proxy_protocol != "http1":
        raise _conflict("proxy_protocol", "tunnel_protocol")
    if options.proxy is None and not given:
        return
    name = "proxy" if options.proxy is not None else "tunnel_uri"
    if options.protocol == "http3" and "http2" not in (options.proxy_protocol,
                                                      options.tunnel_protocol):
        raise _refuse(name, "HTTP/3 runs over UDP, which an HTTP/1.1 proxy's CONNECT does not "
                      "carry: CONNECT-UDP needs proxy_protocol http2 or http3 (tunnel_protocol "
                      "http2)")
    if options.uri and options.target.scheme == "udp":
        raise _refuse(name, "udp:// runs over UDP, which an HTTP proxy's CONNECT does not carry")
    _check_origin_reached_by_proxy(options, name)
