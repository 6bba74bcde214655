"""Go's `flag` package grammar, for the front-ends of tools written in Go (Fortio).

Exactly what Go's ``flag.FlagSet.Parse`` accepts, read from a table of `ForeignFlag` records
(``value`` None is a Go bool flag):

* ``-flag`` and ``--flag`` are the same; ``-flag=value`` and, for a flag that is not a bool,
  ``-flag value``; a bool is ``-flag`` or ``-flag=<strconv.ParseBool word>`` (``-k false``
  is ``-k`` followed by the argument ``false``);
* parsing stops at the first argument that is not a flag (``-`` alone is one) and after
  ``--``; no clustering (``-ck`` is the flag ``ck``), no prefix matching;
* ``-h`` and ``-help``, unless the table defines them, ask for the usage (`ParsedFlags.help`);
* a flag the table does not hold is refused by name (`OptionsError`: Go's own message, exit
  status 2), as is a refused record (its one-line reason) and a value the flag's kind does
  not parse (Go's ``invalid value "x" for flag -t: parse error``).

The values are converted as Go's flag types do (`Kind`): ``int`` (strconv.ParseInt base 0),
``uint``, ``float`` (ParseFloat), ``duration`` (time.ParseDuration, in seconds here),
``string``; a repeatable flag collects every value in order, any other keeps the last.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .._exceptions import OptionsError
from ._table import ForeignFlag

__all__ = ["Kind", "ParsedFlags", "parse_bool",
           "parse_duration", "parse_go_flags", "refused_for"]

Kind = Literal["bool", "int", "uint", "float", "duration", "string"]



@dataclass
class ParsedFlags:
    """What `parse_go_flags` read: the values by the flag's first name, the spelling each
    was given as (for messages), and the arguments after the flags."""

    values: dict[str, Any] = field(default_factory=dict)
    given: dict[str, str] = field(default_factory=dict)
    args: list[str] = field(default_factory=list)
    #: ``-h`` or ``-help`` was met (Go's flag.ErrHelp): the caller prints the usage, exit 0.
    help: bool = False

    def __contains__(self, name: str) -> bool:
        return name in self.values


_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def parse_bool(text: str) -> bool:
    """Go's strconv.ParseBool: ValueError for anything but its twelve words."""
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(text)


_INT = re.compile(r"[+-]?(0[xX][0-9a-fA-F_]+|0[oO][0-7_]+|0[bB][01_]+|0[0-7_]*|[1-9][0-9]*)")
_INT64 = 2**63


def _parse_int(text: str, unsigned: bool = False) -> int:
    # strconv.ParseInt(text, 0, 64): a base prefix, underscores only after a prefix.
    if not _INT.fullmatch(text) or (unsigned and text[0] in "+-"):
        raise ValueError(text)
    body = text.lstrip("+-")
    if "_" in body and (len(body) < 2 or body[1] not in "xXoObB") and not body.startswith("0"):
        raise ValueError(text)
    if re.fullmatch(r"0[0-7_]+", body):
        body = "0o" + body[1:]
    value = int(body.replace("_", ""), 0) if body != "0" else 0
    value = -value if text.startswith("-") else value
    if unsigned:
        if value >= 2 * _INT64:
            raise ValueError(text)
    elif not -_INT64 <= value < _INT64:
        raise ValueError(text)
    return value


_FLOAT = re.compile(r"[+-]?((\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?|inf|infinity|nan)", re.IGNORECASE)


def _parse_float(text: str) -> float:
    # strconv.ParseFloat(text, 64) for the forms a command line holds (no hex floats).
    if not _FLOAT.fullmatch(text):
        raise ValueError(text)
    return float(text)


_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0,
          "m": 60.0, "h": 3600.0}
_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_duration(text: str) -> float:
    """Go's time.ParseDuration, in seconds: ``1m30s``, ``1.5h``, ``300ms``, ``0``;
    ValueError for anything else (a number needs its unit)."""
    body = text
    sign = 1.0
    if body[:1] in "+-" and body:
        sign = -1.0 if body[0] == "-" else 1.0
        body = body[1:]
    if body == "0":
        return 0.0
    if not body:
        raise ValueError(text)
    total = 0.0
    position = 0
    while position < len(body):
        match = _DURATION_PART.match(body, position)
        if match is None:
            raise ValueError(text)
        total += float(match.group(1)) * _UNITS[match.group(2)]
        position = match.end()
    if total > (2**63 - 1) / 1e9:
        raise ValueError(text)
    return sign * total


def _convert(kind: Kind, text: str) -> Any:
    if kind == "int":
        return _parse_int(text)
    if kind == "uint":
        return _parse_int(text, unsigned=True)
    if kind == "float":
        value = _parse_float(text)
        if math.isinf(value) and "inf" not in text.lower():
            raise ValueError(text)  # out of range: Go says "value out of range"
        return value
    if kind == "duration":
        return parse_duration(text)
    return text


def parse_go_flags(argv: Sequence[str], table: Sequence[ForeignFlag],
                   kinds: Mapping[str, Kind], *, command: str = "",
                   elsewhere: Callable[[ForeignFlag, str], str] | None = None) -> ParsedFlags:
    """Read `argv` as Go's flag package would with the flags of `table`.

    `kinds` gives each non-bool flag's Go type by its first name (``string`` when absent).
    A refused record raises its refusal as soon as it is met, as does a mapped flag whose
    ``commands`` do not include `command` (`elsewhere(record, command)` says why, by default
    `refused_for`). Raises `OptionsError`
    (exit 2); ``-h``/``-help`` stops the reading with `ParsedFlags.help` set.
    """
    by_name: dict[str, ForeignFlag] = {}
    for entry in table:
        for spelling in entry.names:
            by_name[spelling.lstrip("-")] = entry
    parsed = ParsedFlags()
    index = 0
    while index < len(argv):
        arg = argv[index]
        if len(arg) < 2 or arg[0] != "-":
            break
        dashes = 1
        if arg[1] == "-":
            dashes = 2
            if len(arg) == 2:  # "--" ends the flags and is consumed
                index += 1
                break
        name = arg[dashes:]
        if not name or name[0] in "-=":
            raise OptionsError(f"bad flag syntax: {arg}")
        index += 1
        value: str | None = None
        if "=" in name:
            name, value = name.split("=", 1)
        record = by_name.get(name)
        if record is None:
            if name in ("h", "help"):
                parsed.help = True
                return parsed
            raise OptionsError(f"flag provided but not defined: -{name}")
        given = "-" + name
        if record.refused:
            raise record.refusal(given)
        if record.commands and command not in record.commands:
            reason = (elsewhere or refused_for)(record, command)
            raise OptionsError(f"{given}: {reason}; nothing was sent")
        key = record.name
        if record.value is None:
            try:
                converted: Any = True if value is None else parse_bool(value)
            except ValueError:
                raise OptionsError(
                    f'invalid boolean value "{value}" for {given}: parse error'
                ) from None
        else:
            if value is None:
                if index >= len(argv):
                    raise OptionsError(f"flag needs an argument: {given}")
                value = argv[index]
                index += 1
            try:
                converted = _convert(kinds.get(key, "string"), value)
            except ValueError:
                raise OptionsError(
                    f'invalid value "{value}" for flag {given}: parse error'
                ) from None
        if record.repeatable:
            parsed.values.setdefault(key, []).append(converted)
        else:
            parsed.values[key] = converted
        parsed.given[key] = given
    parsed.args = list(argv[index:])
    return parsed


def refused_for(record: ForeignFlag, command: str) -> str:
    """Why a flag mapped for some commands is refused with `command`."""
    return (f"only with `{'`, `'.join(record.commands)}` here (given to `{command}`), "
            f"where it means: {record.meaning}")
