"""Nighthawk's ``--tls-context`` and ``--transport-socket`` mapped onto nhbench's TLS
options.

Nighthawk takes Envoy's ``UpstreamTlsContext`` (``--tls-context``) or a ``TransportSocket``
whose ``typed_config`` is one (``--transport-socket``, name ``envoy.transport_sockets.tls``)
as JSON. nhbench has its own TLS flags; the fields that mean the same are mapped onto them
(`TLS_FIELDS` lists each with the option it sets) and every other field is refused by its
name, so that nothing a test plan asks for is silently ignored. Proto3 JSON's lowerCamelCase
names (``alpnProtocols``) are accepted too.
"""

from __future__ import annotations

from typing import Any

from ._targets import _snake, load_json_object, refuse_unknown

__all__ = ["TLS_FIELDS", "parse_tls_context", "parse_transport_socket"]

# Envoy's field → the nhbench option it sets (for the docs and the conflict messages).
TLS_FIELDS: dict[str, str] = {
    "sni": "sni",
    "common_tls_context.alpn_protocols": "alpn",
    "common_tls_context.tls_params.tls_minimum_protocol_version": "tls_min_version",
    "common_tls_context.tls_params.tls_maximum_protocol_version": "tls_max_version",
    "common_tls_context.tls_params.cipher_suites": "tls_ciphers",
    "common_tls_context.tls_params.ecdh_curves": "tls_groups",
    "common_tls_context.validation_context.trusted_ca.filename": "cacert",
    "common_tls_context.validation_context.trust_chain_verification": "insecure",
    "max_session_keys": "tls_session_reuse",
    "common_tls_context.tls_certificates[0].certificate_chain": "cert",
    "common_tls_context.tls_certificates[0].private_key": "key",
    "common_tls_context.tls_certificates[0].password.environment_variable":
        "key_passphrase_env",
}

_TLS_TYPE = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext"
_TLS_SOCKET_NAMES = ("envoy.transport_sockets.tls", "tls")
# Envoy's TlsParameters versions; TLS_AUTO leaves the choice to nhbench's defaults.
_VERSIONS = {"TLS_AUTO": None, "TLSv1_2": "1.2", "TLSv1_3": "1.3"}


def _object(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"{where} must be a JSON object (got {value!r})")
    return {_snake(str(k)): v for k, v in value.items()}


def _strings(value: object, where: str) -> list[str]:
    if not isinstance(value, list) or not value or not all(
        isinstance(item, str) and item for item in value
    ):
        raise ValueError(f"{where} must be a non-empty list of strings (got {value!r})")
    return list(value)


def _version(value: object, where: str) -> str | None:
    if value not in _VERSIONS:
        supported = ", ".join(_VERSIONS)
        raise ValueError(f"{where}: only {supported} are supported (got {value!r})")
    return _VERSIONS[str(value)]


def _data_source(value: object, where: str) -> str:
    """Envoy's DataSource of a PEM file: its ``filename``, or the PEM of ``inline_string``."""
    source = _object(value, where)
    refuse_unknown(source, ("filename", "inline_string"), where)
    if len(source) != 1:
        raise ValueError(f"{where} must have one of filename or inline_string")
    text = next(iter(source.values()))
    if not isinstance(text, str) or not text:
        raise ValueError(f"{where}.{next(iter(source))} must be a non-empty string")
    if "inline_string" in source and not text.lstrip().startswith("-----BEGIN"):
        raise ValueError(f"{where}.inline_string must be PEM text (-----BEGIN ...)")
    return text


def _tls_certificates(value: object) -> dict[str, Any]:
    """The client certificate: Envoy's list of TlsCertificate, of which a client sends one."""
    where = "common_tls_context.tls_certificates"
    if not isinstance(value, list) or len(value) != 1:
        raise ValueError(f"{where} must be a list of one certificate (got {value!r})")
    where += "[0]"
    cert = _object(value[0], where)
    refuse_unknown(cert, ("certificate_chain", "private_key", "password"), where)
    for field in ("certificate_chain", "private_key"):
        if field not in cert:
            raise ValueError(f"{where}.{field} is missing")
    out: dict[str, Any] = {
        "cert": _data_source(cert["certificate_chain"], f"{where}.certificate_chain"),
        "key": _data_source(cert["private_key"], f"{where}.private_key"),
    }
    if "password" in cert:
        # The passphrase is never a value on a command line (it would show in ps and in
        # the shell's history): only from the environment.
        password = _object(cert["password"], f"{where}.password")
        refuse_unknown(password, ("environment_variable",), f"{where}.password")
        out["key_passphrase_env"] = password.get("environment_variable")
    return out


def _upstream_tls_context(data: dict[str, Any]) -> dict[str, Any]:
    """An UpstreamTlsContext (keys already snake_case) → {option: value}."""
    out: dict[str, Any] = {}
    refuse_unknown(
        data, ("sni", "common_tls_context", "max_session_keys", "allow_renegotiation"), ""
    )
    if "allow_renegotiation" in data:
        allow = data["allow_renegotiation"]
        if not isinstance(allow, bool):
            raise ValueError(f"allow_renegotiation must be true or false (got {allow!r})")
        # false is Envoy's default and nhbench's only behaviour (docs/engine.md, TLS).
        if allow:
            raise ValueError(
                "allow_renegotiation: true is not supported: nhbench's TLS client refuses "
                "every renegotiation, as Envoy's does by default"
            )
    if "sni" in data:
        if not isinstance(data["sni"], str) or not data["sni"]:
            raise ValueError(f"sni must be a host name (got {data['sni']!r})")
        out["sni"] = data["sni"]
    if "max_session_keys" in data:
        keys = data["max_session_keys"]
        if isinstance(keys, bool) or not isinstance(keys, int) or keys < 0:
            raise ValueError(f"max_session_keys must be an integer >= 0 (got {keys!r})")
        # Envoy keeps this many sessions to resume; 0 turns resumption off. nhbench keeps
        # one per worker or none.
        out["tls_session_reuse"] = keys > 0
    common = _object(data.get("common_tls_context", {}), "common_tls_context")
    refuse_unknown(
        common, ("alpn_protocols", "tls_params", "validation_context", "tls_certificates"),
        "common_tls_context",
    )
    if "tls_certificates" in common:
        out.update(_tls_certificates(common["tls_certificates"]))
    if "alpn_protocols" in common:
        out["alpn"] = _strings(common["alpn_protocols"], "common_tls_context.alpn_protocols")
    params = _object(common.get("tls_params", {}), "common_tls_context.tls_params")
    where = "common_tls_context.tls_params"
    refuse_unknown(
        params,
        ("tls_minimum_protocol_version", "tls_maximum_protocol_version", "cipher_suites",
         "ecdh_curves"),
        where,
    )
    for key, option in (("tls_minimum_protocol_version", "tls_min_version"),
                        ("tls_maximum_protocol_version", "tls_max_version")):
        if key in params:
            version = _version(params[key], f"{where}.{key}")
            if version is not None:
                out[option] = version
    if "cipher_suites" in params:
        out["tls_ciphers"] = ":".join(_strings(params["cipher_suites"], f"{where}.cipher_suites"))
    if "ecdh_curves" in params:
        out["tls_groups"] = ":".join(_strings(params["ecdh_curves"], f"{where}.ecdh_curves"))
    validation = _object(
        common.get("validation_context", {}), "common_tls_context.validation_context"
    )
    where = "common_tls_context.validation_context"
    refuse_unknown(validation, ("trusted_ca", "trust_chain_verification"), where)
    if "trusted_ca" in validation:
        ca = _object(validation["trusted_ca"], f"{where}.trusted_ca")
        refuse_unknown(ca, ("filename",), f"{where}.trusted_ca")
        if not isinstance(ca.get("filename"), str) or not ca["filename"]:
            raise ValueError(f"{where}.trusted_ca.filename must be a file path")
        out["cacert"] = ca["filename"]
    if "trust_chain_verification" in validation:
        mode = validation["trust_chain_verification"]
        if mode not in ("VERIFY_TRUST_CHAIN", "ACCEPT_UNTRUSTED"):
            raise ValueError(
                f"{where}.trust_chain_verification must be VERIFY_TRUST_CHAIN or "
                f"ACCEPT_UNTRUSTED (got {mode!r})"
            )
        out["insecure"] = mode == "ACCEPT_UNTRUSTED"
    return out


def parse_tls_context(value: object) -> dict[str, Any]:
    """``--tls-context`` (an UpstreamTlsContext as JSON) → {nhbench TLS option: value}."""
    return _upstream_tls_context(load_json_object(value, "Envoy's UpstreamTlsContext"))


def parse_transport_socket(value: object) -> dict[str, Any]:
    """``--transport-socket`` (a TransportSocket as JSON, the TLS one only) → the same."""
    data = load_json_object(value, "Envoy's TransportSocket")
    refuse_unknown(data, ("name", "typed_config"), "")
    name = data.get("name", "envoy.transport_sockets.tls")
    if name not in _TLS_SOCKET_NAMES:
        raise ValueError(
            f"name: only the TLS transport socket (envoy.transport_sockets.tls) is supported "
            f"(got {name!r})"
        )
    typed = _object(data.get("typed_config", {}), "typed_config")
    kind = typed.pop("@type", _TLS_TYPE)
    if kind != _TLS_TYPE:
        raise ValueError(f"typed_config.@type: only {_TLS_TYPE} is supported (got {kind!r})")
    try:
        return _upstream_tls_context(typed)
    except ValueError as exc:
        raise ValueError(f"typed_config: {exc}") from None
