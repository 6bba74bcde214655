"""Nighthawk's options-list request-source plugins (--request-source-plugin-config).

The config is Nighthawk's ``TypedExtensionConfig`` as its CLI takes it: JSON, protobuf's
relaxed JSON (bare-word keys, as in Nighthawk's own integration test) or YAML, naming one of

* ``nighthawk.in-line-options-list-request-source-plugin``: ``options_list`` inline, and
* ``nighthawk.file-based-request-source-plugin``: ``file_path`` to a JSON or YAML
  ``RequestOptionsList`` file (at most ``max_file_size`` bytes, default and upper bound
  1000000, as Nighthawk),

each with ``num_requests`` (per worker; 0 = no limit). The field names are the proto's
(api/request_source/request_source_plugin.proto, api/client/options.proto) in snake_case or
protobuf JSON's lowerCamelCase, and unknown fields are refused, as Nighthawk's strict
validation does. Each option becomes a `RequestSpec` the way Nighthawk's
OptionsListRequestSource turns it into a request (source/request_source/
request_options_list_plugin_impl.cc): the method, then a body of ``json_body`` (with
``content-type: application/json``) or of ``request_body_size`` filler bytes, then the
headers, which replace same-named ones (``:path`` the path, ``host``/``:authority`` the
Host header, ``content-length`` the body size).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from .._relaxed_json import load_yaml, loads_relaxed
from .._request import RequestSpec
from ._common import (
    RequestSource,
    body_total,
    check_header,
    check_method,
    check_path,
    entry_checks,
    read_text,
)

__all__ = ["IN_LINE_PLUGIN", "FILE_BASED_PLUGIN", "load_plugin_config", "load_options_list"]

IN_LINE_PLUGIN = "nighthawk.in-line-options-list-request-source-plugin"
FILE_BASED_PLUGIN = "nighthawk.file-based-request-source-plugin"
_TYPES = {
    IN_LINE_PLUGIN: "nighthawk.request_source.InLineOptionsListRequestSourceConfig",
    FILE_BASED_PLUGIN: "nighthawk.request_source.FileBasedOptionsListRequestSourceConfig",
}
# Nighthawk's stub plugin exists only for its own tests; it is refused by name with the rest.

# envoy.config.core.v3.RequestMethod, by number (protobuf JSON accepts the number, also as a
# string, or the name). 0, METHOD_UNSPECIFIED, leaves the run's --request-method.
_METHODS = ("METHOD_UNSPECIFIED", "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS",
            "TRACE", "PATCH")
# Nighthawk's own bound on request_body_size (options.proto: lte 4194304).
MAX_OPTION_BODY_SIZE = 4194304
# FileBasedOptionsListRequestSourceConfig.max_file_size: default and upper bound.
MAX_FILE_SIZE = 1_000_000
# Hop-by-hop framing the renderer owns: a source may not set it (Content-Length is computed
# from the body; a Transfer-Encoding would contradict it).
_REFUSED_HEADERS = frozenset({"transfer-encoding"})


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def _fields(data: object, allowed: tuple[str, ...], where: str) -> dict[str, Any]:
    """The message's fields by their snake_case names; unknown fields refused by name."""
    if not isinstance(data, Mapping):
        raise ValueError(f"{where}: must be an object (got {type(data).__name__})")
    names = {name: name for name in allowed} | {_camel(name): name for name in allowed}
    out: dict[str, Any] = {}
    for key, value in data.items():
        field = names.get(str(key))
        if field is None:
            raise ValueError(f"{where}: unknown field {key!r} (expected "
                              f"{', '.join(allowed)})")
        out[field] = value
    return out


def _uint(value: object, where: str, limit: int) -> int:
    """A protobuf uint32 in JSON: a number or a decimal string; a wrapper may be {value: N}."""
    if isinstance(value, Mapping) and set(value) <= {"value"}:
        value = value.get("value", 0)
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f"{where}: must be a whole number (got {value!r})")
    try:
        number = int(str(value).strip())
    except ValueError:
        raise ValueError(f"{where}: must be a whole number (got {value!r})") from None
    if not 0 <= number <= limit:
        raise ValueError(f"{where}: must be >= 0 and <= {limit} (got {number})")
    return number


def _method(value: object, where: str) -> str | None:
    if isinstance(value, bool):
        raise ValueError(f"{where}: must be a method name or number (got {value!r})")
    if isinstance(value, int) or (isinstance(value, str) and value.strip().isdigit()):
        number = int(value)
        if not 0 <= number < len(_METHODS):
            raise ValueError(f"{where}: {number} is not an envoy RequestMethod (0..9)")
        name = _METHODS[number]
    elif isinstance(value, str):
        name = value.strip().upper()
        if name not in _METHODS:
            raise ValueError(f"{where}: {value!r} is not one of {', '.join(_METHODS[1:])}")
    else:
        raise ValueError(f"{where}: must be a method name or number (got {value!r})")
    return None if name == "METHOD_UNSPECIFIED" else name


# The names --group-by keeps for its own buckets (nhbench._groups NONE_GROUP, OTHER_GROUP):
# an entry named so would be counted under a name that means something else.
_RESERVED_NAMES = ("(none)", "(other)")


def _option(data: object, where: str) -> RequestSpec:
    """One RequestOptions as Nighthawk's OptionsListRequestSource turns it into a request."""
    # `checks` is nhbench's own field (the entry's response checks, docs/checks.md), which
    # Nighthawk's strict validation would refuse: a file that uses it is nhbench's.
    fields = _fields(data, ("request_method", "request_headers", "request_body_size",
                            "json_body", "checks", "name"), where)
    checks: tuple[str, ...] = ()
    if "checks" in fields:
        try:
            checks = entry_checks(fields["checks"])
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
    # nhbench's own field (docs/sources.md): the request kind the entry is counted under.
    name = fields.get("name")
    if name is not None and (not isinstance(name, str) or not name.strip()
                             or len(name) > 128 or not name.isprintable()):
        raise ValueError(f"{where}: name must be a printable string of 1 to 128 characters "
                         f"(got {name!r})")
    if name is not None and name.strip() in _RESERVED_NAMES:
        raise ValueError(f"{where}: name {name.strip()!r} is reserved (the group of responses "
                         "without the header, or past the bound of 64 groups)")
    method = _method(fields["request_method"], f"{where}: request_method") \
        if "request_method" in fields else None
    json_body = fields.get("json_body", "")
    if not isinstance(json_body, str):
        raise ValueError(f"{where}: json_body must be a string (got {json_body!r})")
    body: bytes | None = None
    body_size: int | None = None
    # Nighthawk sets content-type before the headers, which may replace it.
    headers: dict[str, tuple[str, str]] = {}
    if json_body:
        body = json_body.encode("utf-8")
        headers["content-type"] = ("content-type", "application/json")
    elif "request_body_size" in fields:
        # 0 adds no content-length in Nighthawk, so the run's --request-body-size stays.
        body_size = _uint(fields["request_body_size"], f"{where}: request_body_size",
                          MAX_OPTION_BODY_SIZE) or None
    path: str | None = None
    authority: str | None = None
    raw_headers = fields.get("request_headers", [])
    if not isinstance(raw_headers, list):
        raise ValueError(f"{where}: request_headers must be a list")
    for j, item in enumerate(raw_headers):
        here = f"{where}: request_headers[{j}]"
        option = _fields(item, ("header", "append", "append_action", "keep_empty_value"), here)
        header = _fields(option.get("header", {}), ("key", "value", "raw_value"), here)
        key = str(header.get("key", ""))
        value = header.get("value", "")
        if "raw_value" in header:
            raise ValueError(f"{here}: raw_value is not supported (use value)")
        if not isinstance(value, str):
            raise ValueError(f"{here}: value must be a string (got {value!r})")
        # Envoy lower-cases header names (LowerCaseString); setCopy replaces a same-named
        # header, so the last one of a name wins.
        lower = key.lower()
        try:
            if lower == ":path":
                path = check_path(value)
            elif lower == ":method":
                method = check_method(value)
            elif lower in (":authority", "host"):
                authority = check_header("host", value)[1]
            elif lower.startswith(":"):
                # Envoy's HTTP/1 codec writes no pseudo-header other than the ones above
                # (Nighthawk's own test data has ":content-type"); they are dropped as there.
                continue
            elif lower in _REFUSED_HEADERS:
                raise ValueError(f"header {key!r} is not supported (the body is sent with a "
                                 "Content-Length)")
            elif lower == "content-length":
                # Nighthawk reads the body length back from this header after the options
                # are applied, so the header sets the body size.
                if not value.strip().isdigit():
                    raise ValueError(f"content-length {value!r} is not a number")
                body, body_size = None, int(value)
                if body_size > MAX_OPTION_BODY_SIZE:
                    raise ValueError(f"content-length {body_size} is over "
                                     f"{MAX_OPTION_BODY_SIZE}")
            else:
                headers[lower] = check_header(lower, value)
        except ValueError as exc:
            raise ValueError(f"{here}: {exc}") from None
    return RequestSpec(method=method, path=path, authority=authority,
                       headers=tuple(headers.values()), body=body, body_size=body_size,
                       checks=checks,
                       name=name.strip() if name is not None else None)


def load_options_list(data: object, where: str) -> list[RequestSpec]:
    """A RequestOptionsList ({options: [...]}) as specs; an empty list is the run's request."""
    fields = _fields({} if data is None else data, ("options",), where)
    options = fields.get("options", [])
    if not isinstance(options, list):
        raise ValueError(f"{where}: options must be a list")
    specs = [_option(item, f"{where}: options[{i}]") for i, item in enumerate(options)]
    # Nighthawk: "if the options_list is empty, we just return the default header".
    specs = specs or [RequestSpec()]
    body_total(specs, where)
    return specs


def _parse_text(text: str, where: str, suffix: str = "") -> Any:
    """JSON, protobuf's relaxed JSON, or YAML, as Envoy's loaders take them."""
    if suffix not in (".yaml", ".yml"):
        try:
            return loads_relaxed(text)
        except json.JSONDecodeError as exc:
            if suffix == ".json":
                raise ValueError(f"{where}: not valid JSON: {exc.msg} at line {exc.lineno} "
                                  f"column {exc.colno}") from None
        except RecursionError:
            raise ValueError(f"{where}: nested too deeply") from None
    return load_yaml(text, where)


def load_plugin_config(text: str) -> RequestSource:
    """Nighthawk's --request-source-plugin-config text as a request source."""
    where = "request source plugin config"
    config = _parse_text(text, where)
    fields = _fields(config, ("name", "typed_config"), where)
    name = str(fields.get("name", ""))
    if name not in _TYPES:
        raise ValueError(f"{where}: unsupported plugin {name!r} (nhbench has "
                          f"{IN_LINE_PLUGIN} and {FILE_BASED_PLUGIN})")
    typed = fields.get("typed_config")
    if not isinstance(typed, Mapping):
        raise ValueError(f"{where}: {name} needs a typed_config object")
    kind = str(typed.get("@type", ""))
    if kind and kind.rsplit("/", 1)[-1] != _TYPES[name]:
        raise ValueError(f"{where}: typed_config @type {kind!r} does not match {name} "
                          f"(expected type.googleapis.com/{_TYPES[name]})")
    body = {k: v for k, v in typed.items() if k != "@type"}
    if name == IN_LINE_PLUGIN:
        plugin = _fields(body, ("options_list", "num_requests"), f"{where}: typed_config")
        specs = load_options_list(plugin.get("options_list"), f"{where}: options_list")
    else:
        plugin = _fields(body, ("file_path", "num_requests", "max_file_size"),
                         f"{where}: typed_config")
        path = plugin.get("file_path")
        if not isinstance(path, str) or not path:
            raise ValueError(f"{where}: {name} needs file_path")
        limit = MAX_FILE_SIZE
        if "max_file_size" in plugin:
            limit = _uint(plugin["max_file_size"], f"{where}: max_file_size", MAX_FILE_SIZE)
        file_text = read_text(path, "options list", "options-list", limit)
        suffix = os.path.splitext(path)[1].lower()
        data = _parse_text(file_text, f"options list {path}", suffix)
        specs = load_options_list(data, f"options list {path}")
    num = _uint(plugin.get("num_requests", 0), f"{where}: num_requests", 2**32 - 1)
    return RequestSource(specs=tuple(specs), num_requests=num or None)
