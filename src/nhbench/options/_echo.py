"""Fortio's echo parameters (``delay=``, ``status=``, ``size=``, ``close=``, ``header=``,
``gzip=``): the grammar of the server's ``echo_default_params`` query string, checked once so
that a typo is an error at start-up rather than a parameter silently ignored per request."""

from __future__ import annotations

import difflib
import math
import re
from urllib.parse import parse_qsl

from ._values import (
    check_header_name,
    check_header_value,
    parse_server_duration,
)

__all__ = ["ECHO_PARAMS", "parse_echo_params"]

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
            seconds = parse_server_duration(text)
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
        check_header_name(key.strip(), original)
        check_header_value(header_value.strip(), original)
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
