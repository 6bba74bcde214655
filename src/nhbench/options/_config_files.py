"""Server config files: JSON or YAML holding the whole ServerOptions, Nighthawk's
``ResponseOptions`` (with or without ``"@type"``), or an Envoy bootstrap of Nighthawk's test
server, from which the test-server, dynamic-delay and time-tracking filter configs and the
listener addresses are taken."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._relaxed_json import load_yaml, loads_relaxed, read_text
from ._values import (
    format_address,
)

__all__ = ["config_mapping", "load_config_file"]

_NIGHTHAWK_TYPES = (
    "nighthawk.server.ResponseOptions",
    "nighthawk.server.DynamicDelayConfiguration",
    "nighthawk.server.TimeTrackingConfiguration",
)


def _from_envoy_bootstrap(data: Mapping[str, Any]) -> dict[str, Any]:
    """Response options and listen addresses out of a Nighthawk test server's Envoy config."""
    response: dict[str, Any] = {}
    listen: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, Mapping):
            kind = str(node.get("@type", ""))
            if any(kind.endswith(t) for t in _NIGHTHAWK_TYPES):
                body = {k: v for k, v in node.items() if k != "@type"}
                # the filters other than test-server nest theirs
                body = dict(body.get("experimental_response_options", body))
                headers = body.pop("response_headers", None)
                v3 = body.pop("v3_response_headers", None)
                response.update(body)
                for extra in (headers, v3):
                    if extra:
                        response["response_headers"] = [
                            *response.get("response_headers", []), *extra
                        ]
                return
            address = node.get("socket_address")
            if isinstance(address, Mapping) and "address" in address:
                listen.append(
                    format_address(str(address["address"]), int(address.get("port_value", 0)))
                )
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(data.get("static_resources", {}))
    out: dict[str, Any] = {"response": response}
    if listen:
        out["listen"] = listen
    return out


def load_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a JSON or YAML config file into a ServerOptions input dict.

    ``.json`` is JSON, ``.yaml``/``.yml`` YAML; any other name is tried as JSON, then YAML.
    The content is the whole ServerOptions, or Nighthawk's shape (a ResponseOptions object,
    or an Envoy bootstrap of its test server). Raises ValueError with a one-line message.
    """
    name = os.fspath(path)
    text = read_text(name, name)
    suffix = Path(name).suffix.lower()
    data: Any
    # Both parsers recurse once per level of nesting; a file nested deeper than the
    # interpreter's stack allows is refused with one line instead of a RecursionError.
    try:
        if suffix == ".json":
            data = _load_json(text, name)
        elif suffix in (".yaml", ".yml"):
            data = load_yaml(text, name)
        else:
            try:
                data = json.loads(text)
            except ValueError:
                data = load_yaml(text, name)
    except RecursionError:
        raise ValueError(f"{name}: nested too deeply to be a config file") from None
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ValueError(f"{name}: must hold a mapping of options (got {type(data).__name__})")
    try:
        return config_mapping(data)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None


def config_mapping(data: Mapping[str, Any]) -> dict[str, Any]:
    """A config mapping in any accepted shape as ServerOptions input."""
    if "static_resources" in data:
        return _from_envoy_bootstrap(data)
    kind = str(data.get("@type", ""))
    if kind:
        if not any(kind.endswith(t) for t in _NIGHTHAWK_TYPES):
            raise ValueError(f"unsupported @type {kind!r} (expected one of "
                             f"{', '.join(_NIGHTHAWK_TYPES)})")
        body = {k: v for k, v in data.items() if k != "@type"}
        return {"response": dict(body.get("experimental_response_options", body))}
    return dict(data)


def _load_json(text: str, name: str) -> Any:
    # Nighthawk reads a .json config with protobuf's relaxed JSON; so does this, after strict
    # JSON failed. The error shown stays the strict parser's.
    try:
        return loads_relaxed(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{name}: not valid JSON: {exc.msg} at line {exc.lineno} "
                         f"column {exc.colno}") from None


