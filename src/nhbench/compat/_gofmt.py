"""Go's text for numbers, durations and JSON, for output that must read as Fortio's.

Fortio prints with Go's ``fmt`` verbs (``%g``, ``%.8g``, ``%.2f``, ``%v`` of a
``time.Duration``) and writes its JSON with ``encoding/json``'s ``MarshalIndent``. Python's
``%g`` is not Go's: Python's shortest form is ``repr`` and its ``%g`` pads to 6 significant
digits, where Go's ``%g`` without a precision is the shortest round-trip form with an
exponent from 1e+06 up (and below 1e-04); ``encoding/json`` writes ``82`` for the float
82.0, ``1e-7`` for 1e-07 and escapes ``<``, ``>`` and ``&``. Each function here follows Go's
strconv/fmt/encoding/json rules (read in Go's sources), not its code.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

__all__ = ["go_duration", "go_f", "go_g", "go_json", "go_json_float"]


def _digits(value: float, precision: int | None) -> tuple[str, int]:
    """The decimal digits of abs(value) without trailing zeros and the decimal point's
    position (value = 0.DIGITS x 10^point), rounded to `precision` significant digits (round
    half to even on the exact binary value, as Go's strconv) or the shortest that reads back
    (None)."""
    value = abs(value)
    if value == 0:
        return "", 0
    text = repr(value) if precision is None else f"{value:.{max(precision, 1) - 1}e}"
    sign, digits, exponent = Decimal(text).as_tuple()
    assert isinstance(exponent, int)
    string = "".join(map(str, digits))
    point = len(string) + exponent
    string = string.rstrip("0")
    return string, point


def _exponent(digits: str, point: int, decimals: int, negative: bool) -> str:
    mantissa = digits[0] + ("." + digits[1:].ljust(decimals, "0")[:decimals] if decimals > 0
                            else "")
    exp = point - 1
    return ("-" if negative else "") + f"{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):02d}"


def _fixed(digits: str, point: int, decimals: int, negative: bool) -> str:
    if point <= 0:
        whole, frac = "0", "0" * -point + digits
    else:
        whole, frac = digits[:point].ljust(point, "0"), digits[point:]
    text = whole + ("." + frac.ljust(decimals, "0")[:decimals] if decimals > 0 else "")
    return ("-" if negative else "") + text


def go_g(value: float, precision: int | None = None) -> str:
    """Go's ``%g`` (precision None) or ``%.<precision>g`` of a float64."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    negative = math.copysign(1.0, value) < 0
    digits, point = _digits(value, precision)
    if not digits:
        return "-0" if negative else "0"
    count = len(digits)
    prec = count if precision is None else max(precision, 1)
    eprec = prec
    if eprec > count and count >= point:
        eprec = count
    if precision is None:
        eprec = 6
    exp = point - 1
    if exp < -4 or exp >= eprec:
        return _exponent(digits, point, min(prec, count) - 1, negative)
    if prec > point:
        prec = count
    return _fixed(digits, point, max(prec - point, 0), negative)


def go_f(value: float, decimals: int) -> str:
    """Go's ``%.<decimals>f`` (the same correctly rounded digits as Python's)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return f"{value:.{decimals}f}"


def go_duration(nanoseconds: int) -> str:
    """Go's ``time.Duration.String()``: ``1.000916623s``, ``501.179205ms``, ``1m30s``,
    ``1h0m0s``, ``0s``."""
    if nanoseconds == 0:
        return "0s"
    sign = "-" if nanoseconds < 0 else ""
    u = abs(nanoseconds)
    if u < 1_000_000_000:
        for unit, scale, places in (("ns", 1, 0), ("µs", 1_000, 3), ("ms", 1_000_000, 6)):
            if u < scale * 1000:
                whole, frac = divmod(u, scale)
                text = str(whole)
                if places:
                    fraction = str(frac).rjust(places, "0").rstrip("0")
                    if fraction:
                        text += "." + fraction
                return sign + text + unit
    seconds, frac = divmod(u, 1_000_000_000)
    fraction = str(frac).rjust(9, "0").rstrip("0")
    text = str(seconds % 60) + ("." + fraction if fraction else "") + "s"
    minutes = seconds // 60
    if minutes:
        text = f"{minutes % 60}m" + text
        hours = minutes // 60
        if hours:
            text = f"{hours}h" + text
    return sign + text


def go_json_float(value: float) -> str:
    """A float64 as ``encoding/json`` writes it: shortest digits, ``%f`` form from 1e-6 to
    below 1e21, otherwise ``%e`` with the exponent's leading zero dropped (``1e-7``)."""
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"JSON has no {value}")
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    digits, point = _digits(value, None)
    negative = value < 0
    if 1e-6 <= abs(value) < 1e21:
        return _fixed(digits, point, max(len(digits) - point, 0), negative)
    text = _exponent(digits, point, len(digits) - 1, negative)
    mantissa, exp = text.split("e")
    sign, number = exp[0], exp[1:].lstrip("0") or "0"
    return f"{mantissa}e{sign}{number}"


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t",
            "<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028",
            "\u2029": "\\u2029"}


def _string(text: str) -> str:
    out = []
    for char in text:
        escaped = _ESCAPES.get(char)
        if escaped is not None:
            out.append(escaped)
        elif ord(char) < 0x20:
            out.append(f"\\u{ord(char):04x}")
        elif 0xD800 <= ord(char) <= 0xDFFF:
            out.append("\ufffd")  # a lone surrogate is invalid UTF-8: Go writes U+FFFD
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def _write(value: Any, indent: str, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, float):
        out.append(go_json_float(value))
    elif isinstance(value, str):
        out.append(_string(value))
    elif isinstance(value, Mapping):
        if not value:
            out.append("{}")
            return
        inner = indent + "  "
        out.append("{")
        for position, (key, item) in enumerate(value.items()):
            out.append(("," if position else "") + "\n" + inner + _string(str(key)) + ": ")
            _write(item, inner, out)
        out.append("\n" + indent + "}")
    elif isinstance(value, Sequence):
        if not value:
            out.append("[]")
            return
        inner = indent + "  "
        out.append("[")
        for position, item in enumerate(value):
            out.append(("," if position else "") + "\n" + inner)
            _write(item, inner, out)
        out.append("\n" + indent + "]")
    else:
        raise TypeError(f"no JSON form for {type(value).__name__}")


def go_json(value: Any) -> str:
    """``json.MarshalIndent(value, "", "  ")`` plus the newline Fortio adds: keys in the
    mapping's own order (a Go struct's field order; Go sorts map keys, so callers give maps
    sorted)."""
    out: list[str] = []
    _write(value, "", out)
    return "".join(out) + "\n"
