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

__all__ = [
    "TLS_FIELDS", "Tls", "TlsContext", "check_ca_file", "check_client_cert", "check_key_pair",
    "client_cert_pem",
]


# The TLS options (Tls._tls_needs_https refuses them on an http:// URI; check_targets on
# http:// endpoints).
TLS_FIELDS = (
    "sni", "alpn", "cacert", "insecure", "tls_ciphers", "tls_ciphersuites", "tls_groups",
    "tls_min_version", "tls_max_version", "tls_session_reuse", "tls_context",
    "transport_socket", "cert", "key", "key_passphrase_env",
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

    cert: Annotated[str | None, Flag(metavar="FILE", group="TLS (https:// URIs)")] = Field(
        default=None,
        description="Client certificate (PEM; the chain after it, if any) to present when the "
        "server asks for one (mutual TLS); needs --key. Over h1, h2, gRPC and HTTP/3.",
    )
    key: Annotated[str | None, Flag(metavar="FILE", group="TLS (https:// URIs)")] = Field(
        default=None,
        description="The private key of --cert (PEM: PKCS#8 or traditional). An encrypted "
        "key's passphrase comes from --key-passphrase-env, else is asked for on a terminal; "
        "never from a flag.",
    )
    key_passphrase_env: Annotated[
        str | None, Flag(metavar="NAME", group="TLS (https:// URIs)")
    ] = Field(
        default=None,
        description="Name of the environment variable that holds the passphrase of an "
        "encrypted --key.",
    )

    @field_validator(
        "sni", "alpn", "cacert", "insecure", "tls_ciphers", "tls_ciphersuites", "tls_groups",
        "tls_min_version", "tls_max_version", "tls_session_reuse", "cert", "key",
        "key_passphrase_env",
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

    @field_validator("cert", "key")
    @classmethod
    def _check_pem_file(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return None
        path = os.path.expanduser(value)
        if (info.context or {}).get("echo"):
            return path
        if not os.path.isfile(path):
            raise ValueError(f"no such file: {value!r}")
        if not os.access(path, os.R_OK):
            raise ValueError(f"not readable: {value!r}")
        return path

    @field_validator("key_passphrase_env")
    @classmethod
    def _check_env_name(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return None
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
            raise ValueError(f"must be an environment variable's name (got {value!r})")
        if not (info.context or {}).get("echo") and value not in os.environ:
            raise ValueError(f"the environment variable {value} is not set")
        return value

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
        "ACCEPT_UNTRUSTED, max_session_keys, the client certificate of tls_certificates; "
        "docs/engine.md); allow_renegotiation may "
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


# Passphrases typed at the prompt, by key file: options are validated more than once (the
# echo, the mapped Envoy configs), and the user is asked once.
_typed_passphrases: dict[str, str] = {}


def _pem_text(source: str) -> str:
    """A PEM file's text, or `source` itself when it is PEM (an Envoy inline_string)."""
    if source.lstrip().startswith("-----BEGIN"):
        return source
    with open(source, encoding="ascii", errors="replace") as f:
        return f.read(1 << 20)


def _passphrase(key: str, env: str | None) -> str | None:
    """The passphrase of an encrypted `key`: the environment variable named, a cached
    answer, or (on a terminal) a prompt; None when none is to be had."""
    if env is not None:
        return os.environ.get(env)
    if key in _typed_passphrases:
        return _typed_passphrases[key]
    import sys

    if sys.stdin is not None and sys.stdin.isatty():
        import getpass

        label = "the inline key" if key.lstrip().startswith("-----BEGIN") else repr(key)
        _typed_passphrases[key] = getpass.getpass(f"Passphrase for {label}: ")
        return _typed_passphrases[key]
    return None


def _is_encrypted(text: str) -> bool:
    return "ENCRYPTED" in text.split("-----END", 1)[0]


def check_key_pair(cert: str, key: str, env: str | None) -> tuple[str, str] | None:
    """(option, why) when the client certificate `cert` and `key` (file paths or PEM text)
    cannot be used together, else None. Python's ssl module loads them with the system
    OpenSSL, the one the core links, so what it refuses the core would refuse."""
    import ssl
    import tempfile

    texts = {}
    for option, source in (("cert", cert), ("key", key)):
        try:
            texts[option] = _pem_text(source)
        except OSError as exc:
            return option, f"cannot read {source!r}: {exc.strerror or exc}"
    name = {o: ("the inline PEM" if s.lstrip().startswith("-----BEGIN") else repr(s))
            for o, s in (("cert", cert), ("key", key))}
    if "-----BEGIN CERTIFICATE-----" not in texts["cert"]:
        return "cert", f"no PEM certificate in {name['cert']}"
    if not re.search(r"-----BEGIN [A-Z ]*PRIVATE KEY-----", texts["key"]):
        return "key", f"no PEM private key in {name['key']}"
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cadata=texts["cert"])
    except (ssl.SSLError, ValueError):
        return "cert", f"OpenSSL cannot read the PEM certificate in {name['cert']}"
    passphrase = _passphrase(key, env) if _is_encrypted(texts["key"]) else None
    if _is_encrypted(texts["key"]) and not passphrase:
        return "key", (f"the key in {name['key']} is encrypted and no passphrase was given "
                       "(--key-passphrase-env NAME, or run on a terminal to be asked)")

    def password() -> bytes:
        if passphrase is None:
            raise ValueError("encrypted")
        return passphrase.encode()

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    with tempfile.TemporaryDirectory(prefix="nhb-cert-") as tmp:
        paths = []
        for option in ("cert", "key"):
            path = os.path.join(tmp, option)
            with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
                f.write(texts[option])
            paths.append(path)
        try:
            context.load_cert_chain(paths[0], paths[1], password=password)
        except ValueError:
            return "key", f"the key in {name['key']} is encrypted and no passphrase was given"
        except ssl.SSLError as exc:
            reason = str(exc.reason or exc).replace("_", " ").lower()
            if "mismatch" in reason:
                return "key", f"the key in {name['key']} does not match the certificate in " \
                    f"{name['cert']}"
            if "bad decrypt" in reason or "decrypt" in reason:
                return "key", f"the passphrase does not decrypt the key in {name['key']}"
            if "pem lib" in reason and passphrase is not None:
                return "key", f"the passphrase does not decrypt the key in {name['key']}"
            which = "cert" if "certificate" in reason or "x509" in reason else "key"
            return which, f"OpenSSL cannot use the certificate {name['cert']} with the key " \
                f"{name['key']} ({reason})"
    return None


def client_cert_pem(cert: str, key: str, env: str | None) -> tuple[str, str, str]:
    """(certificate PEM, key PEM, passphrase or "") for the core, from files or PEM text."""
    key_text = _pem_text(key)
    passphrase = (_passphrase(key, env) or "") if _is_encrypted(key_text) else ""
    return _pem_text(cert), key_text, passphrase


def check_client_cert(options: Any, info: ValidationInfo) -> None:
    """--cert needs --key and the other way round, and the two must load together (a
    mismatch, garbage PEM or an encrypted key without its passphrase is bad input: exit 2,
    nothing sent)."""
    from pydantic_core import PydanticCustomError

    mapped = options.tls_context_options or {}
    cert = options.cert or mapped.get("cert")
    key = options.key or mapped.get("key")
    env = options.key_passphrase_env or mapped.get("key_passphrase_env")
    if env is not None and key is None:
        raise PydanticCustomError("options_needs", "{a}: needs {b}",
                                  {"a": "key_passphrase_env", "b": "key"})
    if cert is None and key is None:
        return
    if cert is None or key is None:
        a, b = ("cert", "key") if key is None else ("key", "cert")
        raise PydanticCustomError("options_needs", "{a}: needs {b}", {"a": a, "b": b})
    if (info.context or {}).get("echo"):
        return
    if env is not None and env not in os.environ:
        raise PydanticCustomError(
            "options_file", "{a}: {msg}",
            {"a": "key_passphrase_env", "msg": f"the environment variable {env} is not set"})
    problem = check_key_pair(cert, key, env)
    if problem:
        option, why = problem
        if options.cert is None:  # from Envoy's TlsCertificate
            field = "certificate_chain" if option == "cert" else "private_key"
            option = "tls_context" if options.tls_context is not None else "transport_socket"
            why = f"common_tls_context.tls_certificates[0].{field}: {why}"
        raise PydanticCustomError("options_file", "{a}: {msg}", {"a": option, "msg": why})
