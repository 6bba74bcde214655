"""TLS on https:// (and grpcs://) targets: server name, ALPN, trusted CAs, verification,
ciphers, groups, versions and session reuse (`Tls`), and Nighthawk's Envoy TLS configs
that map onto them (`TlsContext`).
"""

from __future__ import annotations

import os
import re
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationInfo, field_validator

from ._flags import Flag
from ._run_model import RunPart, json_text, uri_scheme_of
from ._tls_context import parse_tls_context, parse_transport_socket
from ._values import HOSTNAME_RE

__all__ = ["TLS_FIELDS", "Tls", "TlsContext", "check_ca_file"]


# The TLS options (Tls._tls_needs_https refuses them on an http:// URI; check_targets on
# http:// endpoints).
TLS_FIELDS = (
    "sni", "alpn", "cacert", "insecure", "tls_ciphers", "tls_ciphersuites", "tls_groups",
    "tls_min_version", "tls_max_version", "tls_session_reuse", "tls_context",
    "transport_socket",
)


def check_ca_file(path: str) -> None:
    """Raise ValueError with OpenSSL's reason when `path` holds no CA certificate it can load.

    Python's ssl module runs on the system OpenSSL, the one the core links, so a file it
    cannot load the core's SSL_CTX_load_verify_locations cannot load either. Checking here
    makes a bad --cacert invalid input (exit 2, nothing started) rather than a failed run.
    """
    import ssl

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        context.load_verify_locations(cafile=path)
    except ssl.SSLError as exc:
        text = str(exc.args[1] if len(exc.args) > 1 else exc)
        reason = re.sub(r"\s*\(_ssl\.c:\d+\)$", "", text).strip() or "unknown reason"
        raise ValueError(f"OpenSSL cannot load CA certificates from {path!r}: {reason}") \
            from None
    except OSError as exc:
        raise ValueError(f"cannot read {path!r}: {exc.strerror or exc}") from None


class Tls(RunPart):
    """The TLS options of the connection to an https:// target."""

    sni: Annotated[str | None, Flag(metavar="NAME", group="TLS (https:// URIs)")] = Field(
        default=None,
        description="TLS server name to send and to check the certificate against (default: "
        "the URI's host; no SNI is sent for an IP address).",
    )
    alpn: Annotated[
        tuple[str, ...] | None, Flag(metavar="ID,ID", group="TLS (https:// URIs)")
    ] = Field(
        default=None,
        description="TLS ALPN protocol ids to offer, comma-separated (default: h2 for "
        "protocol http2, http/1.1 otherwise). The server's choice must match the protocol.",
    )
    cacert: Annotated[
        str | None, Flag(metavar="FILE", aliases=("-cacert",), group="TLS (https:// URIs)")
    ] = Field(
        default=None,
        description="PEM file (or OpenSSL hashed directory) of CA certificates to trust "
        "instead of the system store.",
    )
    insecure: Annotated[
        bool, Flag(aliases=("-k", "-https-insecure"), group="TLS (https:// URIs)")
    ] = Field(
        default=False,
        description="Do not verify the server's certificate (the result records that it was "
        "not verified).",
    )
    tls_ciphers: Annotated[str | None, Flag(metavar="LIST", group="TLS (https:// URIs)")] = Field(
        default=None, description="TLS 1.2 cipher list, OpenSSL syntax (ECDHE-RSA-AES128-GCM-"
        "SHA256:...)."
    )
    tls_ciphersuites: Annotated[
        str | None, Flag(metavar="LIST", group="TLS (https:// URIs)")
    ] = Field(
        default=None, description="TLS 1.3 cipher suites, colon-separated "
        "(TLS_AES_128_GCM_SHA256:...)."
    )
    tls_groups: Annotated[str | None, Flag(metavar="LIST", group="TLS (https:// URIs)")] = Field(
        default=None, description="TLS key exchange groups, colon-separated (X25519:P-256)."
    )
    tls_min_version: Annotated[
        Literal["1.2", "1.3"] | None, Flag(metavar="1.2|1.3", group="TLS (https:// URIs)")
    ] = Field(
        default=None, description="Lowest TLS version to accept: 1.2 (default) or 1.3."
    )
    tls_max_version: Annotated[
        Literal["1.2", "1.3"] | None, Flag(metavar="1.2|1.3", group="TLS (https:// URIs)")
    ] = Field(
        default=None, description="Highest TLS version to offer: 1.2 or 1.3 (default)."
    )
    tls_session_reuse: Annotated[
        bool, Flag(metavar="on|off", default="", group="TLS (https:// URIs)")
    ] = Field(
        default=True,
        description="Resume TLS sessions on new connections (on, the default, as Envoy "
        "does); off makes a full handshake on every connection, the usual lab practice.",
    )

    @field_validator(
        "sni", "alpn", "cacert", "insecure", "tls_ciphers", "tls_ciphersuites", "tls_groups",
        "tls_min_version", "tls_max_version", "tls_session_reuse",
    )
    @classmethod
    def _tls_needs_https(cls, value: object, info: ValidationInfo) -> object:
        # A TLS setting on an http:// URI would silently do nothing; that is almost always a
        # mistake worth saying (a setting left at its default is fine).
        default = cls.model_fields[info.field_name or ""].default
        if value != default and uri_scheme_of(info) == "http":
            raise ValueError("only applies to https:// URIs")
        if value != default and uri_scheme_of(info) == "grpc":
            # grpc:// is cleartext h2c; a CA given with it must not be dropped silently
            # (with --grpc and a bare host:port or http://, a --cacert asks for grpcs://).
            raise ValueError("only applies to grpcs:// URIs (grpc:// is cleartext)")
        return value

    @field_validator("sni", mode="before")
    @classmethod
    def _check_sni(cls, value: object) -> object:
        if value is None:
            return None
        if not isinstance(value, str) or not HOSTNAME_RE.match(value.strip().lower()):
            raise ValueError(f"must be a DNS host name (got {value!r})")
        return value.strip().lower().rstrip(".")

    @field_validator("alpn", mode="before")
    @classmethod
    def _parse_alpn(cls, value: Any) -> object:
        if value is None:
            return None
        items = value.split(",") if isinstance(value, str) else value
        try:
            ids = [str(item).strip() for item in items]
        except TypeError:
            raise ValueError(f"must be protocol ids such as h2,http/1.1 (got {value!r})") from None
        if not ids or any(not 0 < len(i) < 256 or not i.isascii() or not i.isprintable()
                          or "," in i or " " in i for i in ids):
            raise ValueError(f"must be protocol ids such as h2,http/1.1 (got {value!r})")
        return tuple(ids)

    @field_validator("cacert")
    @classmethod
    def _check_cacert(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return None
        path = os.path.expanduser(value)
        # The file belongs to the machine of the run: the echo of options in a Result
        # written elsewhere must load without it.
        if (info.context or {}).get("echo"):
            return path
        if not os.path.exists(path):
            raise ValueError(f"no such file or directory: {value!r}")
        if not os.access(path, os.R_OK):
            raise ValueError(f"not readable: {value!r}")
        if not os.path.isdir(path):  # a directory is a hashed CA directory (c_rehash)
            check_ca_file(path)
        return path

    @field_validator("tls_ciphers")
    @classmethod
    def _check_ciphers(cls, value: str | None) -> str | None:
        if value is None:
            return None
        import ssl

        # Python's ssl module runs on OpenSSL too: a list it rejects, the core would reject.
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).set_ciphers(value)
        except ssl.SSLError:
            raise ValueError(f"OpenSSL knows none of these ciphers (got {value!r})") from None
        return value

    @field_validator("tls_ciphersuites", "tls_groups")
    @classmethod
    def _check_colon_list(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[A-Za-z0-9_\-]+(:[A-Za-z0-9_\-]+)*", value):
            raise ValueError(f"must be names separated by colons (got {value!r})")
        return value

    @field_validator("tls_min_version", "tls_max_version", mode="before")
    @classmethod
    def _parse_tls_version(cls, value: object) -> object:
        if isinstance(value, str):
            text = value.strip().lower().replace("tlsv", "").replace("tls", "").strip()
            return text
        if isinstance(value, float):
            return f"{value:.1f}"
        return value

    @field_validator("tls_max_version")
    @classmethod
    def _check_tls_versions(cls, value: str | None, info: ValidationInfo) -> str | None:
        low = info.data.get("tls_min_version")
        if value is not None and low is not None and float(low) > float(value):
            raise ValueError(f"must not be below tls_min_version {low} (got {value})")
        return value


class TlsContext(RunPart):
    """Nighthawk's Envoy TLS configs, mapped onto the TLS options."""

    tls_context: Annotated[
        str | None, Flag(metavar="JSON", group="Targets and transport")
    ] = Field(
        default=None,
        description="Nighthawk's --tls-context: Envoy's UpstreamTlsContext as JSON, mapped "
        "onto the TLS options (sni, alpn, versions, ciphers, curves, trusted CA, "
        "ACCEPT_UNTRUSTED, max_session_keys; docs/engine.md); allow_renegotiation may "
        "only be false (nhbench never renegotiates); other fields are refused by name.",
    )
    transport_socket: Annotated[
        str | None, Flag(metavar="JSON", group="Targets and transport")
    ] = Field(
        default=None,
        description="Nighthawk's --transport-socket: Envoy's TransportSocket as JSON, the "
        "TLS one (typed_config an UpstreamTlsContext), mapped as tls_context.",
    )

    @field_validator("tls_context", "transport_socket", mode="before")
    @classmethod
    def _tls_context_text(cls, value: object, info: ValidationInfo) -> object:
        value = json_text(value)
        if value is None:
            return None
        if info.field_name == "tls_context":
            parse_tls_context(value)
        else:
            parse_transport_socket(value)
        return value

    @property
    def tls_context_options(self) -> dict[str, Any] | None:
        """tls_context or transport_socket as the TLS options they set, or None."""
        if self.tls_context is not None:
            return parse_tls_context(self.tls_context)
        if self.transport_socket is not None:
            return parse_transport_socket(self.transport_socket)
        return None
