"""`ServerOptions`: every setting of the test server (``nhbench server``), validated.

The options are spelled in snake_case in Python and in config files, and as flags on the
command line (``response_body_size`` / ``--response-body-size``). Everything is checked here,
once, so the C server only ever sees sane values; every error is one line naming the option.

Shapes accepted (the same from Python, a config file and the command line):

* addresses: ``"127.0.0.1:8080"``, ``"[::1]:0"``, ``":8080"`` (all IPv4 interfaces),
  ``"localhost:8080"`` (resolved once, to a numeric address), ``("127.0.0.1", 0)``; for
  ``listen`` also a unix socket path, ``"/tmp/x.sock"`` or ``"unix:/tmp/x.sock"``;
* durations: ``5``, ``0.5`` (seconds), ``"5ms"``, ``"0.5s"``, ``"250us"``, and in config files
  also protobuf's ``{"seconds": 1, "nanos": 500000000}``;
* the Nighthawk response options, as Nighthawk's ``ResponseOptions`` JSON (nested under
  ``response``, or flat at the top level, which is what the CLI flags and TestServer keywords
  use), where ``response_headers`` also takes ``"name: value"`` strings;
* Fortio's echo parameters as a query string (``echo_default_params``).

A config file (`load_config_file`) holds either the whole ServerOptions or Nighthawk's shape:
a bare ``ResponseOptions`` object (with or without ``"@type"``), or an Envoy bootstrap of a
Nighthawk test server, from which the test-server, dynamic-delay and time-tracking filter
configs and the listener addresses are taken.
"""

from __future__ import annotations

import difflib
import ipaddress
import json
import math
import os
import re
import socket
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qsl

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from ._exceptions import OptionsError
from ._options import (
    affinity_cpus,
    check_affinity,
    error_message,
    parse_cpu_list,
    parse_duration,
    parse_worker_count,
)

__all__ = [
    "DEFAULT_LISTEN",
    "MAX_RESPONSE_BODY_SIZE",
    "RESPONSE_FIELDS",
    "LinearDelay",
    "ResponseHeader",
    "ResponseOptions",
    "ServerOptions",
    "format_address",
    "format_server_error",
    "load_config_file",
    "make_server_options",
    "parse_address",
    "parse_echo_params",
    "parse_listen",
]

# Nighthawk's test server caps the response body at 4 MiB; so does this one.
MAX_RESPONSE_BODY_SIZE = 4 * 1024 * 1024
# sockaddr_un.sun_path is 108 bytes on Linux, one of which is the terminating NUL.
MAX_UNIX_PATH = 107
DEFAULT_LISTEN: tuple[tuple[str, str, int], ...] = (("tcp", "127.0.0.1", 0),)

Listen = tuple[Literal["tcp", "unix"], str, int]
Address = tuple[str, int]

_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
# Response headers that decide the framing of the response: the server owns them.
_FRAMING_HEADERS = frozenset({"content-length", "transfer-encoding", "connection"})
# Go's duration syntax, which Fortio's delay= takes: "1m30s", "1.5h", "300ms".
_GO_DURATION = re.compile(r"^(?:(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h))+$")
_GO_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_GO_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0,
             "h": 3600.0}


# --------------------------------------------------------------------------------------------
# Addresses
# --------------------------------------------------------------------------------------------


def _resolve(host: str, port: int) -> str:
    """A numeric IP for `host` (a literal is returned normalised); IPv4 preferred."""
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, port, socket.AF_UNSPEC, socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ValueError(f"cannot resolve host {host!r}: {exc.strerror}") from None
    except UnicodeError:
        raise ValueError(f"cannot resolve host {host!r}: not a valid host name") from None
    if not infos:
        raise ValueError(f"cannot resolve host {host!r}: no addresses")
    infos.sort(key=lambda info: 0 if info[0] == socket.AF_INET else 1)
    return str(infos[0][4][0])


_ADDRESS_HELP = "must be HOST:PORT such as 127.0.0.1:8080, [::1]:0 or :8080"


def parse_address(value: object) -> Address:
    """``"127.0.0.1:8080"``, ``"[::1]:0"``, ``":8080"`` (0.0.0.0) or ``("host", port)``.

    Host names are resolved here, once (IPv4 preferred): the C server binds numeric
    addresses only. Returns ``(numeric_host, port)``.
    """
    if isinstance(value, (tuple, list)) and len(value) == 2:
        host, port = value
        if not isinstance(host, str):
            raise ValueError(f"{_ADDRESS_HELP} (got {value!r})")
        host = host.strip().strip("[]")
    elif isinstance(value, Mapping) and {"host", "port"} <= set(value):
        return parse_address((value["host"], value["port"]))
    elif isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            host, sep, port = text[1:].partition("]:")
        else:
            host, sep, port = text.rpartition(":")
            if ":" in host:
                raise ValueError(
                    f"an IPv6 address needs brackets, as in [::1]:8080 (got {value!r})"
                )
        if not sep:
            hint = f"; did you mean :{text}?" if text.isdigit() else ""
            raise ValueError(f"{_ADDRESS_HELP}{hint} (got {value!r})")
        host = host or "0.0.0.0"
    else:
        raise ValueError(f"{_ADDRESS_HELP} (got {value!r})")
    if isinstance(port, bool):
        raise ValueError(f"port must be an integer in 0..65535 (got {value!r})")
    try:
        port_number = int(str(port).strip()) if isinstance(port, str) else int(port)
        if isinstance(port, float) and not port.is_integer():
            raise ValueError
    except (TypeError, ValueError):
        raise ValueError(f"port must be an integer in 0..65535 (got {value!r})") from None
    if not 0 <= port_number <= 65535:
        raise ValueError(f"port must be in 0..65535 (got {value!r})")
    if not host:
        raise ValueError(f"{_ADDRESS_HELP} (got {value!r})")
    try:
        return _resolve(host, port_number), port_number
    except ValueError as exc:
        raise ValueError(f"{exc} (got {value!r})") from None


def _unix_path(path: str, original: object) -> str:
    if not path:
        raise ValueError(f"a unix socket needs a path, as in unix:/tmp/nhbench.sock "
                         f"(got {original!r})")
    if "\0" in path:
        raise ValueError(f"a unix socket path must not contain NUL (got {original!r})")
    if len(os.fsencode(path)) > MAX_UNIX_PATH:
        raise ValueError(
            f"a unix socket path is at most {MAX_UNIX_PATH} bytes long (got {original!r})"
        )
    if path.startswith("@"):
        # Linux's abstract namespace: no file, no directory
        if len(path) < 2:
            raise ValueError(f"an abstract unix socket needs a name after @ (got {original!r})")
        return path
    # Absolute, so that what is printed and written to the address file can be used from
    # any directory.
    path = os.path.abspath(path)
    if len(os.fsencode(path)) > MAX_UNIX_PATH:
        raise ValueError(
            f"a unix socket path is at most {MAX_UNIX_PATH} bytes long once made absolute "
            f"(got {original!r})"
        )
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        raise ValueError(f"directory {directory!r} of the unix socket does not exist "
                         f"(got {original!r})")
    return path


def parse_listen(value: object) -> Listen:
    """One listen address: ``("tcp", numeric_host, port)`` or ``("unix", path, 0)``.

    Accepts what `parse_address` accepts, a unix socket path (``/tmp/x.sock``,
    ``./x.sock``, ``unix:/tmp/x.sock``, ``unix:x.sock``), and the tuples themselves.
    """
    if isinstance(value, (tuple, list)) and len(value) == 3:
        kind, where, port = value
        if kind == "unix":
            return ("unix", _unix_path(str(where), value), 0)
        if kind == "tcp":
            host, number = parse_address((where, port))
            return ("tcp", host, number)
        raise ValueError(f"kind must be 'tcp' or 'unix' (got {value!r})")
    if isinstance(value, Mapping) and "path" in value:
        return ("unix", _unix_path(str(value["path"]), value), 0)
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("unix:"):
            return ("unix", _unix_path(text[len("unix:"):], value), 0)
        if text.startswith(("/", "./", "../", "~", "@")):
            return ("unix", _unix_path(os.path.expanduser(text), value), 0)
        if "/" in text:
            raise ValueError(
                f"{_ADDRESS_HELP}, or a unix socket path such as /tmp/x.sock or "
                f"unix:x.sock (got {value!r})"
            )
    try:
        host, port = parse_address(value)
    except ValueError as exc:
        message = str(exc)
        if message.startswith(_ADDRESS_HELP):
            message = message.replace(
                _ADDRESS_HELP, _ADDRESS_HELP + ", or a unix socket path such as /tmp/x.sock", 1
            )
        raise ValueError(message) from None
    return ("tcp", host, port)


def format_address(host: str, port: int) -> str:
    """``127.0.0.1:8080`` or ``[::1]:8080``."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _format_listen(item: Listen) -> str:
    kind, where, port = item
    return f"unix:{where}" if kind == "unix" else format_address(where, port)


def _as_list(value: object) -> list[Any]:
    """A single address (string, 2-tuple host/port) is one item, not a list of them."""
    if value is None:
        return []
    if isinstance(value, (str, Mapping)):
        return [value]
    if (
        isinstance(value, (tuple, list))
        and len(value) in (2, 3)
        and isinstance(value[0], str)
        and isinstance(value[-1], int)
        and not isinstance(value[-1], bool)
    ):
        return [value]
    try:
        return list(value)  # type: ignore[call-overload]
    except TypeError:
        return [value]


# --------------------------------------------------------------------------------------------
# Durations and headers
# --------------------------------------------------------------------------------------------


def _duration(value: object) -> float:
    """parse_duration plus protobuf's JSON Duration object ``{"seconds": 1, "nanos": 5}``."""
    if isinstance(value, Mapping) and set(value) <= {"seconds", "nanos"} and value:
        try:
            return round(float(value.get("seconds", 0)) + float(value.get("nanos", 0)) / 1e9, 9)
        except (TypeError, ValueError):
            pass
        raise ValueError(f"must be a duration such as 5, 5s, 500ms or 2m (got {value!r})")
    # Rounded to the nanosecond, the server's resolution: "100us" is 0.0001, not
    # 9.999999999999999e-05.
    try:
        return round(parse_duration(value), 9)
    except ValueError:
        seconds = _go_duration(value)
        if seconds is None:
            raise
        return round(seconds, 9)


def _go_duration(value: object) -> float | None:
    """Seconds from a Go duration with several parts ("1m30s"), else None."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    negative = text.startswith("-")
    if negative:
        text = text[1:]
    if not _GO_DURATION.match(text):
        return None
    seconds = sum(float(n) * _GO_UNITS[u] for n, u in _GO_PART.findall(text))
    return -seconds if negative else seconds


def _check_header_name(name: str, original: object) -> str:
    if not name or not _TOKEN.match(name):
        raise ValueError(f"header name {name!r} has characters not allowed in a header name "
                         f"(got {original!r})")
    if name.lower() in _FRAMING_HEADERS:
        raise ValueError(
            f"{name} is set by the server from the body it sends and cannot be given "
            f"(got {original!r})"
        )
    return name


def _check_header_value(value: str, original: object) -> str:
    if any(ch in value for ch in "\r\n\0"):
        raise ValueError(f"must not contain CR, LF or NUL characters (got {original!r})")
    if any(ord(ch) < 0x20 and ch != "\t" or ord(ch) == 0x7F for ch in value):
        raise ValueError(f"header value has control characters (got {original!r})")
    try:
        value.encode("latin-1")
    except UnicodeEncodeError:
        raise ValueError(f"header value must be Latin-1 text (got {original!r})") from None
    return value


def _header_from_text(text: str) -> dict[str, Any]:
    if any(ch in text for ch in "\r\n\0"):
        raise ValueError(f"must not contain CR, LF or NUL characters (got {text!r})")
    name, sep, value = text.partition(":")
    name, value = name.strip(), value.strip()
    if not sep or not name:
        raise ValueError(f"must be 'name: value' (got {text!r})")
    return {"header": {"key": name, "value": value}, "append": False}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class HeaderKeyValue(_Strict):
    key: str
    value: str = ""

    @model_validator(mode="after")
    def _check(self) -> HeaderKeyValue:
        _check_header_name(self.key, f"{self.key}: {self.value}")
        _check_header_value(self.value, f"{self.key}: {self.value}")
        return self


class ResponseHeader(_Strict):
    """Envoy's ``HeaderValueOption``: ``{"header": {"key": k, "value": v}, "append": b}``.

    ``append`` false (Nighthawk's default) replaces any header of that name the response
    already has (the server's own ``content-type``, or one set earlier); true adds another.
    """

    header: HeaderKeyValue
    append: bool = False

    @model_validator(mode="before")
    @classmethod
    def _from_shortcuts(cls, data: Any) -> Any:
        if isinstance(data, str) and data.lstrip().startswith("{"):
            # the JSON shape given as text (a --response-header flag)
            try:
                data = json.loads(data)
            except ValueError:
                raise ValueError(
                    f"must be 'name: value' or Nighthawk's JSON "
                    f"{{\"header\": {{\"key\": ..., \"value\": ...}}, \"append\": ...}} "
                    f"(got {data!r})"
                ) from None
        if isinstance(data, str):
            return _header_from_text(data)
        if isinstance(data, (tuple, list)) and len(data) == 2:
            name, value = data
            return {"header": {"key": str(name).strip(), "value": str(value).strip()},
                    "append": False}
        if isinstance(data, Mapping) and isinstance(data.get("append"), Mapping):
            # protobuf's BoolValue wrapper written out: {"value": true}
            data = {**data, "append": data["append"].get("value", False)}
        return data

    def text(self) -> str:
        return f"{self.header.key}: {self.header.value}"


# --------------------------------------------------------------------------------------------
# Nighthawk ResponseOptions
# --------------------------------------------------------------------------------------------


class LinearDelay(_Strict):
    """Nighthawk's ``ConcurrencyBasedLinearDelay``: delay = minimal + factor × active requests."""

    minimal_delay: float = Field(default=0.0, ge=0, le=3600)
    concurrency_delay_factor: float = Field(default=0.0, ge=0, le=3600)

    @field_validator("minimal_delay", "concurrency_delay_factor", mode="before")
    @classmethod
    def _durations(cls, value: object) -> object:
        return _duration(value)


def _parse_linear_delay(value: object) -> object:
    """``"1ms,100us"`` (minimal, factor) on the command line; a mapping in files."""
    if isinstance(value, str):
        parts = [p.strip() for p in value.split(",")]
        if len(parts) != 2:
            raise ValueError(
                f"must be MINIMAL,FACTOR such as 1ms,100us (got {value!r})"
            )
        return {"minimal_delay": parts[0], "concurrency_delay_factor": parts[1]}
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return {"minimal_delay": value[0], "concurrency_delay_factor": value[1]}
    return value


class ResponseOptions(_Strict):
    """Nighthawk's ``ResponseOptions`` (its JSON names), static or per request.

    Per request, the same JSON goes in the ``x-nighthawk-test-server-config`` request header
    and is merged over these (scalars replace, ``response_headers`` append).
    """

    response_body_size: int | None = Field(
        default=None, ge=0, le=MAX_RESPONSE_BODY_SIZE,
        description="Response body size in bytes (at most 4 MiB). Unset: Fortio's rules "
        "(the request body is echoed unless size= asks otherwise).",
    )
    response_headers: tuple[ResponseHeader, ...] = Field(
        default=(),
        description="Extra response headers, 'name: value' or Nighthawk's "
        "{\"header\": {\"key\": ..., \"value\": ...}, \"append\": bool}; repeatable.",
    )
    echo_request_headers: bool = Field(
        default=False, description="Echo the request headers in the response body."
    )
    static_delay: float | None = Field(
        default=None, ge=0, le=3600,
        description="Fixed delay before each response (5ms, 0.1s); a timer, not a sleep.",
    )
    concurrency_based_linear_delay: LinearDelay | None = Field(
        default=None,
        description="Delay of minimal_delay + concurrency_delay_factor x requests active on "
        "the worker, given as MINIMAL,FACTOR (1ms,100us).",
    )
    emit_previous_request_delta_in_response_header: str | None = Field(
        default=None,
        description="Response header that carries the nanoseconds since the previous "
        "request on that worker.",
    )

    @model_validator(mode="before")
    @classmethod
    def _nighthawk_names(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        data = dict(data)
        data.pop("@type", None)
        # Newer Nighthawk spells the list v3_response_headers; both mean the same here.
        if "v3_response_headers" in data:
            v3 = _as_header_list(data.pop("v3_response_headers"))
            data["response_headers"] = [*_as_header_list(data.get("response_headers")), *v3]
        return data

    @field_validator("response_headers", mode="before")
    @classmethod
    def _headers(cls, value: object) -> object:
        return _as_header_list(value)

    @field_validator("static_delay", mode="before")
    @classmethod
    def _delay(cls, value: object) -> object:
        return None if value is None else _duration(value)

    @field_validator("concurrency_based_linear_delay", mode="before")
    @classmethod
    def _linear(cls, value: object) -> object:
        return _parse_linear_delay(value)

    @field_validator("emit_previous_request_delta_in_response_header", mode="before")
    @classmethod
    def _delta_header(cls, value: object) -> object:
        if value is None:
            return None
        if not isinstance(value, str):
            raise ValueError(f"must be a header name (got {value!r})")
        name = value.strip()
        if not name:
            return None  # proto3's empty string: off
        return _check_header_name(name, value)

    @model_validator(mode="after")
    def _one_delay(self) -> ResponseOptions:
        if self.static_delay is not None and self.concurrency_based_linear_delay is not None:
            raise PydanticCustomError(
                "options_conflict", "{a}: mutually exclusive with {b}",
                {"a": "static_delay", "b": "concurrency_based_linear_delay"},
            )
        return self

    def core_dict(self) -> dict[str, Any]:
        """The ``response`` entry of the core config: only what is set."""
        out: dict[str, Any] = {}
        if self.response_body_size is not None:
            out["response_body_size"] = self.response_body_size
        if self.response_headers:
            out["response_headers"] = [
                {"header": {"key": h.header.key, "value": h.header.value}, "append": h.append}
                for h in self.response_headers
            ]
        if self.echo_request_headers:
            out["echo_request_headers"] = True
        if self.static_delay is not None:
            out["static_delay"] = float(self.static_delay)
        if self.concurrency_based_linear_delay is not None:
            out["concurrency_based_linear_delay"] = {
                "minimal_delay": float(self.concurrency_based_linear_delay.minimal_delay),
                "concurrency_delay_factor": float(
                    self.concurrency_based_linear_delay.concurrency_delay_factor
                ),
            }
        if self.emit_previous_request_delta_in_response_header:
            out["emit_previous_request_delta_in_response_header"] = (
                self.emit_previous_request_delta_in_response_header
            )
        return out


def _as_header_list(value: object) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        if "header" in value:
            return [value]
        # {"X-A": "1", "X-B": "2"}: the dictionary shortcut
        return [{"header": {"key": str(k), "value": str(v)}, "append": False}
                for k, v in value.items()]
    if isinstance(value, (tuple, list)) and len(value) == 2 and all(
        isinstance(x, str) for x in value
    ) and ":" not in value[0]:
        # ("X-A", "1") given where a list is expected is one header
        return [value]
    try:
        return list(value)  # type: ignore[call-overload]
    except TypeError:
        return [value]


RESPONSE_FIELDS: tuple[str, ...] = tuple(ResponseOptions.model_fields)


# --------------------------------------------------------------------------------------------
# Fortio echo parameters
# --------------------------------------------------------------------------------------------

ECHO_PARAMS = ("delay", "status", "size", "close", "header", "gzip")


def _percent(text: str, original: str) -> float:
    try:
        # Fortio accepts (and drops) a trailing %: status=503:5%
        number = float(text.removesuffix("%"))
    except ValueError:
        raise ValueError(f"{text!r} is not a percentage") from None
    if math.isnan(number) or not 0 <= number <= 100:
        raise ValueError(f"percentage {text} is not in 0..100")
    return number


def _echo_value(name: str, text: str, original: str) -> None:
    if name == "delay":
        try:
            seconds = _duration(text)
        except ValueError:
            raise ValueError(f"delay {text!r} is not a duration such as 10ms or 0.5s") \
                from None
        if seconds < 0:
            raise ValueError(f"delay {text!r} is negative")
    elif name == "status":
        if not re.fullmatch(r"\d{3}", text) or not 200 <= int(text) <= 599:
            raise ValueError(f"status {text!r} is not an HTTP status in 200..599")
    elif name == "size":
        if not re.fullmatch(r"\d+", text):
            raise ValueError(f"size {text!r} is not a byte count")
    elif name in ("close", "gzip"):
        if text.lower() not in ("true", "false", ""):
            raise ValueError(f"{name} {text!r} must be true, false or a percentage")


def _echo_param(name: str, value: str, original: str) -> None:
    if name == "header":
        key, sep, header_value = value.partition(":")
        if not sep or not key.strip():
            raise ValueError(f"header must be NAME:VALUE (got {value!r})")
        _check_header_name(key.strip(), original)
        _check_header_value(header_value.strip(), original)
        return
    if name in ("close", "gzip") and "," not in value and ":" not in value:
        # true/false, or a percentage (Fortio's close=5 closes 5 % of the connections)
        if value.lower() in ("true", "false", ""):
            return
        try:
            _percent(value, original)
        except ValueError:
            raise ValueError(f"{name} {value!r} must be true, false or a percentage") from None
        return
    items = value.split(",")
    if len(items) == 1 and ":" not in value:
        _echo_value(name, value, original)
        return
    total = 0.0
    for item in items:
        item_value, sep, percent = item.rpartition(":")
        if not sep:
            raise ValueError(
                f"{name} list items must be VALUE:PERCENT, e.g. {name}="
                + {"delay": "10ms:50,1s:1", "status": "503:10,429:1", "size": "1024:10",
                   "close": "true:5", "gzip": "true:50"}[name]
                + f", not {item!r}"
            )
        _echo_value(name, item_value, original)
        total += _percent(percent, original)
    if total > 100 + 1e-9:
        raise ValueError(f"{name} percentages add up to {total:g} > 100")


def parse_echo_params(value: object) -> str:
    """Check a Fortio echo query string (``delay=10ms:50,1s:1&status=503:5``), return it.

    The leading ``?`` is dropped. Unknown parameters are refused (a typo would silently do
    nothing); ``stall`` belongs to --stall-every/--stall-for, not to the defaults.
    """
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValueError(f"must be a query string such as delay=10ms&status=503:5 "
                         f"(got {value!r})")
    text = value.strip().lstrip("?")
    if not text:
        return ""
    if any(ch.isspace() for ch in text):
        raise ValueError(f"must not contain spaces; encode them as %20 (got {value!r})")
    try:
        pairs = parse_qsl(text, keep_blank_values=True, strict_parsing=True)
    except ValueError:
        raise ValueError(f"must be a query string such as delay=10ms&status=503:5 "
                         f"(got {value!r})") from None
    for name, item in pairs:
        if name == "stall":
            raise ValueError("stall cannot be a default parameter; use --stall-every and "
                             f"--stall-for (got {value!r})")
        if name not in ECHO_PARAMS:
            close = difflib.get_close_matches(name, ECHO_PARAMS, n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise ValueError(f"unknown echo parameter {name!r} (known: "
                             f"{', '.join(ECHO_PARAMS)}){hint}")
        if name != "header" and sum(1 for n, _ in pairs if n == name) > 1:
            raise ValueError(f"{name} is given more than once (got {value!r})")
        _echo_param(name, item, text)
    return text


# --------------------------------------------------------------------------------------------
# The model.
# --------------------------------------------------------------------------------------------


class ServerOptions(_Strict):
    """Validated settings of the test server (the flags of ``nhbench server``).

    Response options may be given nested (``response={...}``, Nighthawk's ResponseOptions)
    or flat (``response_body_size=64``); flat ones win over nested ones of the same name.
    """

    listen: tuple[Listen, ...] = Field(
        default=DEFAULT_LISTEN,
        description="Address to listen on: HOST:PORT, [IPv6]:PORT, :PORT (all IPv4 "
        "interfaces) or a unix socket path (/tmp/x.sock, unix:x.sock); repeatable. Port 0 "
        "picks a free one.",
    )
    workers: int | Literal["auto"] = Field(
        default=1,
        description="Server threads, each with its own event loop and SO_REUSEPORT "
        "listeners, or 'auto' for one per CPU (of --cpus, else of the affinity mask).",
    )
    cpus: tuple[int, ...] | None = Field(
        default=None,
        description="CPUs to pin the workers to, as a cpu list such as 1,3-4 (round-robin).",
    )
    response: ResponseOptions = Field(
        default_factory=ResponseOptions,
        description="Nighthawk's ResponseOptions applied to every response.",
    )
    echo_default_params: str = Field(
        default="",
        description="Fortio echo parameters used when a request does not give them, as a "
        "query string: 'delay=10ms:50,1s:1&status=503:5'.",
    )
    max_echo_delay: float = Field(
        default=1.5, ge=0, le=3600,
        description="Cap for the delay= echo parameter (a larger one gets the cap).",
    )
    max_payload_kb: int = Field(
        default=256, ge=0, le=65536,
        description="Cap, in KiB, for the size= echo parameter and for echoed bodies.",
    )
    stall_every: float = Field(
        default=0.0, ge=0, le=86400,
        description="Every this long, all workers hold their responses for --stall-for "
        "(a known stall to check a client's coordinated-omission correction).",
    )
    stall_for: float = Field(
        default=0.0, ge=0, le=3600, description="Length of each stall (see --stall-every)."
    )
    tcp_echo: tuple[Address, ...] = Field(
        default=(), description="TCP echo listener HOST:PORT; repeatable."
    )
    udp_echo: tuple[Address, ...] = Field(
        default=(), description="UDP echo listener HOST:PORT; repeatable."
    )
    admin: Address | None = Field(
        default=None,
        description="Admin listener HOST:PORT: GET /stats returns the server's counters "
        "as JSON.",
    )
    address_file: str | None = Field(
        default=None,
        description="Write the bound addresses to this file as JSON (atomically) once "
        "listening; removed at exit.",
    )
    idle_timeout: float = Field(
        default=60.0, ge=0, le=86400,
        description="Close a keep-alive connection idle (no request in progress) this long; "
        "0 = never.",
    )
    header_timeout: float = Field(
        default=10.0, ge=0, le=3600,
        description="Close a connection whose request head is not complete this long "
        "after it began; 0 = never.",
    )
    max_header_bytes: int = Field(
        default=65536, ge=128, le=16 * 1024 * 1024,
        description="Largest request head accepted; a larger one gets 431 and a close.",
    )
    max_body_bytes: int = Field(
        default=64 * 1024 * 1024, ge=0, le=2**40,
        description="Largest request body accepted; a larger one gets 413 and a close.",
    )

    # ---- value syntaxes -------------------------------------------------------------------

    @model_validator(mode="before")
    @classmethod
    def _flat_response(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        flat = {k: data[k] for k in RESPONSE_FIELDS if k in data}
        extra_v3 = "v3_response_headers" in data
        if not flat and not extra_v3:
            return data
        data = dict(data)
        nested = data.get("response") or {}
        if isinstance(nested, ResponseOptions):
            nested = nested.model_dump(exclude_defaults=True)
        if not isinstance(nested, Mapping):
            return data
        response = dict(nested)
        for key in flat:
            data.pop(key)
        if extra_v3:
            response["v3_response_headers"] = data.pop("v3_response_headers")
        response.update(flat)
        data["response"] = response
        return data

    @field_validator("listen", mode="before")
    @classmethod
    def _parse_listen(cls, value: object) -> object:
        items = [parse_listen(item) for item in _as_list(value)]
        if not items:
            raise ValueError("must name at least one address")
        if len(items) > 16:
            raise ValueError(f"at most 16 addresses (got {len(items)})")
        return tuple(items)

    @field_validator("tcp_echo", "udp_echo", mode="before")
    @classmethod
    def _parse_echo_listeners(cls, value: object) -> object:
        return tuple(parse_address(item) for item in _as_list(value))

    @field_validator("admin", mode="before")
    @classmethod
    def _parse_admin(cls, value: object) -> object:
        return None if value is None else parse_address(value)

    @field_validator("workers", mode="before")
    @classmethod
    def _parse_workers(cls, value: object) -> object:
        return parse_worker_count(value, 1024)

    @field_validator("cpus", mode="before")
    @classmethod
    def _parse_cpus(cls, value: object) -> object:
        if value is None:
            return None
        cpus = parse_cpu_list(value)
        check_affinity(cpus)
        return tuple(cpus)

    @field_validator("max_echo_delay", "stall_every", "stall_for", "idle_timeout",
                     "header_timeout", mode="before")
    @classmethod
    def _durations(cls, value: object) -> object:
        return _duration(value)

    @field_validator("echo_default_params", mode="before")
    @classmethod
    def _echo_params(cls, value: object) -> object:
        return parse_echo_params(value)

    @field_validator("address_file", mode="before")
    @classmethod
    def _check_address_file(cls, value: object) -> object:
        if value is None:
            return None
        if not isinstance(value, (str, os.PathLike)):
            raise ValueError(f"must be a file path (got {value!r})")
        if not str(os.fspath(value)).strip():
            raise ValueError("must be a file path (got an empty string)")
        path = Path(os.path.expanduser(os.fspath(value)))
        if path.is_dir():
            raise ValueError(f"{str(path)!r} is a directory")
        directory = path.parent
        if not directory.is_dir():
            raise ValueError(f"directory {str(directory)!r} does not exist")
        if not os.access(directory, os.W_OK):
            raise ValueError(f"directory {str(directory)!r} is not writable")
        return str(path)

    @field_validator("max_header_bytes", "max_body_bytes", mode="before")
    @classmethod
    def _sizes(cls, value: object) -> object:
        # "64KiB" / "1MiB" / "4k" for the byte limits, as people write them
        if isinstance(value, str):
            match = re.fullmatch(r"\s*(\d+)\s*([kKmMgG]i?[bB]?)?\s*", value)
            if match and match.group(2):
                scale = {"k": 1024, "m": 1024**2, "g": 1024**3}[match.group(2)[0].lower()]
                return int(match.group(1)) * scale
        return value

    @model_validator(mode="after")
    def _check_combinations(self) -> ServerOptions:
        if self.stall_for > 0 and self.stall_every <= 0:
            raise PydanticCustomError(
                "options_needs", "{a}: needs {b}", {"a": "stall_for", "b": "stall_every"}
            )
        if self.stall_every > 0 and self.stall_for <= 0:
            raise PydanticCustomError(
                "options_needs", "{a}: needs {b}", {"a": "stall_every", "b": "stall_for"}
            )
        if self.stall_every > 0 and self.stall_for >= self.stall_every:
            raise PydanticCustomError(
                "options_order",
                "{a}: must be shorter than {b}, or the server never answers",
                {"a": "stall_for", "b": "stall_every"},
            )
        # Two TCP listeners on one port would not fail: SO_REUSEPORT lets both bind, and
        # the kernel would then split the connections between them.
        tcp = [(h, p) for kind, h, p in self.listen if kind == "tcp" and p != 0]
        tcp += [(h, p) for h, p in (*self.tcp_echo, *([self.admin] if self.admin else []))
                if p != 0]
        for i, (host_a, port_a) in enumerate(tcp):
            for host_b, port_b in tcp[i + 1:]:
                if port_a == port_b and (
                    host_a == host_b or {host_a, host_b} & {"0.0.0.0", "::"}
                ):
                    raise PydanticCustomError(
                        "options_conflict_port",
                        "port {port} is used by two TCP listeners (of listen, tcp_echo, "
                        "admin)",
                        {"port": port_a},
                    )
        unix = [w for kind, w, _ in self.listen if kind == "unix"]
        if len(set(unix)) != len(unix):
            raise PydanticCustomError(
                "options_conflict_port", "listen: the same unix socket path twice", {}
            )
        return self

    # ---- derived values -------------------------------------------------------------------

    @property
    def worker_count(self) -> int:
        if self.workers == "auto":
            return len(self.cpus) if self.cpus else len(affinity_cpus())
        return int(self.workers)

    @property
    def worker_cpus(self) -> list[int]:
        """One CPU per worker, round-robin over `cpus`; empty when not pinned."""
        cpus = list(self.cpus or ())
        return [cpus[i % len(cpus)] for i in range(self.worker_count)] if cpus else []

    def core_config(self) -> dict[str, Any]:
        """The ``_core.Server`` config dict, exactly as docs/architecture.md specifies."""
        return {
            "listen": [tuple(item) for item in self.listen],
            "workers": self.worker_count,
            "cpus": self.worker_cpus,
            "response": self.response.core_dict(),
            "echo_default_params": self.echo_default_params,
            "max_echo_delay": float(self.max_echo_delay),
            "max_payload_kb": int(self.max_payload_kb),
            "stall_every": float(self.stall_every),
            "stall_for": float(self.stall_for),
            "tcp_echo": [tuple(a) for a in self.tcp_echo],
            "udp_echo": [tuple(a) for a in self.udp_echo],
            "admin": tuple(self.admin) if self.admin else None,
            "idle_timeout": float(self.idle_timeout),
            "header_timeout": float(self.header_timeout),
            "max_header_bytes": int(self.max_header_bytes),
            "max_body_bytes": int(self.max_body_bytes),
        }

    def cli_args(self) -> list[str]:
        """The ``nhbench server`` flags that reproduce these options exactly."""
        args: list[str] = []
        for item in self.listen:
            args += ["--listen", _format_listen(item)]
        args += ["--workers", str(self.workers)]
        if self.cpus:
            # One by one rather than as ranges: the order decides which worker gets which CPU.
            args += ["--cpus", ",".join(map(str, self.cpus))]
        r = self.response
        if r.response_body_size is not None:
            args += ["--response-body-size", str(r.response_body_size)]
        if r.response_headers:
            # Headers go as JSON to keep the append flag.
            for header in r.response_headers:
                args += ["--response-header", json.dumps(header.model_dump())]
        if r.echo_request_headers:
            args.append("--echo-request-headers")
        if r.static_delay is not None:
            args += ["--static-delay", repr(float(r.static_delay))]
        if r.concurrency_based_linear_delay is not None:
            d = r.concurrency_based_linear_delay
            args += ["--concurrency-based-linear-delay",
                     f"{float(d.minimal_delay)!r},{float(d.concurrency_delay_factor)!r}"]
        if r.emit_previous_request_delta_in_response_header:
            args += ["--emit-previous-request-delta-in-response-header",
                     r.emit_previous_request_delta_in_response_header]
        if self.echo_default_params:
            args += ["--echo-default-params", self.echo_default_params]
        args += ["--max-echo-delay", repr(float(self.max_echo_delay))]
        args += ["--max-payload-kb", str(self.max_payload_kb)]
        if self.stall_every > 0:
            args += ["--stall-every", repr(float(self.stall_every)),
                     "--stall-for", repr(float(self.stall_for))]
        for host, port in self.tcp_echo:
            args += ["--tcp-echo", format_address(host, port)]
        for host, port in self.udp_echo:
            args += ["--udp-echo", format_address(host, port)]
        if self.admin:
            args += ["--admin", format_address(*self.admin)]
        if self.address_file:
            args += ["--address-file", self.address_file]
        args += ["--idle-timeout", repr(float(self.idle_timeout))]
        args += ["--header-timeout", repr(float(self.header_timeout))]
        args += ["--max-header-bytes", str(self.max_header_bytes)]
        args += ["--max-body-bytes", str(self.max_body_bytes)]
        return args


# --------------------------------------------------------------------------------------------
# Config files
# --------------------------------------------------------------------------------------------

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
    try:
        text = Path(name).expanduser().read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(f"{name}: no such file") from None
    except IsADirectoryError:
        raise ValueError(f"{name}: is a directory") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read {name}: {getattr(exc, 'strerror', None) or exc}") from None
    suffix = Path(name).suffix.lower()
    data: Any
    if suffix == ".json":
        data = _load_json(text, name)
    elif suffix in (".yaml", ".yml"):
        data = _load_yaml(text, name)
    else:
        try:
            data = json.loads(text)
        except ValueError:
            data = _load_yaml(text, name)
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ValueError(f"{name}: must hold a mapping of options (got {type(data).__name__})")
    try:
        return _config_mapping(data)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None


def _config_mapping(data: Mapping[str, Any]) -> dict[str, Any]:
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
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{name}: not valid JSON: {exc.msg} at line {exc.lineno} "
                         f"column {exc.colno}") from None


def _load_yaml(text: str, name: str) -> Any:
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ValueError(f"{name}: not valid JSON or YAML: {problem}{where}") from None


# --------------------------------------------------------------------------------------------
# Errors: one line naming the option
# --------------------------------------------------------------------------------------------

# Flags whose name is not the field name with dashes.
_FLAG_NAMES = {"response_headers": "--response-header"}
_NESTED_MODELS: dict[str, type[BaseModel]] = {
    "response": ResponseOptions,
    "concurrency_based_linear_delay": LinearDelay,
}


def server_flag(name: str) -> str:
    """``static_delay`` -> ``--static-delay``; a nested name keeps its inner part:
    ``concurrency_based_linear_delay.minimal_delay`` -> ``--concurrency-based-linear-delay
    minimal_delay``."""
    root, _, rest = name.partition(".")
    flag = _FLAG_NAMES.get(root, "--" + root.replace("_", "-"))
    return f"{flag} {rest}" if rest else flag


def _option_name(loc: Sequence[Any]) -> tuple[str, type[BaseModel], str | None]:
    """(display name, model holding the field, field name) for an error location."""
    model: type[BaseModel] = ServerOptions
    parts = [p for p in loc if isinstance(p, str)]
    if parts and parts[0] == "response":
        parts = parts[1:]
        model = ResponseOptions
    names: list[str] = []
    field = None
    for part in parts:
        if part in model.model_fields:
            names.append(part)
            field = part
            nested = _NESTED_MODELS.get(part)
            if nested is not None:
                model, field = nested, None
        else:
            break
    if not names:
        return ("response" if loc and loc[0] == "response" else "", model, None)
    if names[0] == "response_headers":
        return ("response_headers", ResponseOptions, None)
    holder = model if field is not None and field in model.model_fields else (
        ResponseOptions if names[0] in RESPONSE_FIELDS else ServerOptions
    )
    return (".".join(names), holder, field)


def format_server_error(
    exc: ValidationError,
    *,
    cli: bool = False,
    cli_keys: Iterable[str] | None = None,
    config_name: str | None = None,
) -> str:
    """One line naming the option: ``--static-delay: must be a duration … (got soon)``.

    With ``cli=True`` options are named by their flags, except those that came from the
    config file (not in `cli_keys`), which are named ``--config FILE: key``.
    """
    given = set(cli_keys) if cli_keys is not None else None
    parts: list[str] = []

    def name_of(option: str) -> str:
        if not option:
            return ""
        root = option.split(".", 1)[0]
        if config_name is not None and (given is None or root not in given):
            return f"--config {config_name}: {option}" if cli else f"config {config_name}: {option}"
        return server_flag(option) if cli else option

    for error in exc.errors(include_url=False):
        loc = error.get("loc") or ()
        kind = error["type"]
        ctx = error.get("ctx") or {}
        option, model, field = _option_name(loc)
        if kind == "options_conflict":
            parts.append(f"{name_of(ctx['a'])}: mutually exclusive with {name_of(ctx['b'])}")
            continue
        if kind == "options_needs":
            parts.append(f"{name_of(ctx['a'])}: needs {name_of(ctx['b'])}")
            continue
        if kind == "options_order":
            parts.append(f"{name_of(ctx['a'])}: must be shorter than {name_of(ctx['b'])}, "
                         f"or the server never answers")
            continue
        if kind == "options_conflict_port":
            parts.append(str(error["msg"]))
            continue
        if kind == "extra_forbidden":
            bad = str(loc[-1]) if loc else "?"
            known = list(model.model_fields)
            if model is ServerOptions or model is ResponseOptions and option == "":
                known += list(RESPONSE_FIELDS)
            close = difflib.get_close_matches(bad, known, n=1)
            full = f"{option}.{bad}" if option else bad
            hint = f" (did you mean {name_of(close[0]) if not option else close[0]}?)" \
                if close else ""
            parts.append(f"{name_of(full)}: unknown option{hint}")
            continue
        message = error_message(model, field, error)
        prefix = f"{name_of(option)}: " if option else ""
        parts.append(prefix + message)
    return "; ".join(parts).replace("\n", " ")


def make_server_options(
    data: Mapping[str, Any] | None = None,
    *,
    config: str | os.PathLike[str] | Mapping[str, Any] | None = None,
) -> ServerOptions:
    """ServerOptions from keywords over an optional config (file path or mapping).

    Keys given in `data` override the config's. Raises a one-line OptionsError.
    """
    base: dict[str, Any] = {}
    config_name = None
    if isinstance(config, Mapping):
        try:
            base = _config_mapping(config)
        except ValueError as exc:
            raise OptionsError(f"config: {exc}", option="config") from None
    elif config is not None:
        config_name = os.fspath(config)
        try:
            base = load_config_file(config)
        except ValueError as exc:
            raise OptionsError(f"config: {exc}", option="config") from None
    given = {k: v for k, v in (data or {}).items()}
    merged = {**base, **given}
    try:
        return ServerOptions.model_validate(merged)
    except ValidationError as exc:
        errors = exc.errors()
        option = None
        if errors and errors[0].get("loc"):
            option = _option_name(errors[0]["loc"])[0].split(".", 1)[0] or None
        raise OptionsError(
            format_server_error(exc, cli_keys=given.keys(), config_name=config_name),
            option=option,
        ) from exc
