"""``--output-format yaml``: Nighthawk's YamlOutputFormatterImpl, byte for byte.

Nighthawk's yaml is its JSON re-emitted by yaml-cpp (Envoy's
``MessageUtil::getYamlStringFromMessage``: the proto3 JSON text is loaded into a yaml-cpp
node, every collection is set to block style, and ``YAML::Emitter`` writes it). So the keys,
their order and the values are the JSON's, and the layout is yaml-cpp's:

* two-space indentation; a sequence under a key is indented by two more than the key, and
  a mapping inside a sequence starts on the dash's line (``- name: global``);
* an empty list or object is written in flow style on the next line (``labels:`` then
  ``[]``), except an empty object directly inside a sequence (``- {}``);
* a scalar is written plain whenever yaml-cpp considers that safe, else double-quoted. The
  JSON quotes are lost on the way: the 64-bit integers that proto3 JSON writes as strings
  come out as plain numbers (``count: 3``), and a duration as ``mean: 0.002s``;
* numbers keep their JSON text, which for doubles is protobuf's (``%.15g``, or ``%.17g``
  when that does not read back: ``raw_pstdev: 1.1180339887498949``);
* no newline after the last line.

PyYAML cannot produce this layout (it indents sequences differently and quotes by YAML 1.1
type resolution), hence the small emitter below, written from yaml-cpp's emitter rules and
checked against yaml-cpp itself in tests/test_output_nighthawk_formats.py.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ._nhfields import protobuf_double
from ._nighthawk import nighthawk_output

if TYPE_CHECKING:
    from .._result import Result

__all__ = ["format_yaml", "render_yaml"]

_INDENT = 2

# Characters a plain scalar may not start with in block context (yaml-cpp's
# Exp::PlainScalar): blanks, line breaks and the YAML indicators.
_BAD_FIRST = set(" \t\n\r,[]{}#&*!|>'\"%@`")
# "-", "?" and ":" may start a plain scalar only when a non-blank character follows.
_BAD_FIRST_IF_ALONE = set("-?:")
# What may appear nowhere in a plain scalar (yaml-cpp 0.8's disallowed_block): ":" before a
# blank, a line break or the end; "#" after a blank; tabs and line breaks; the characters of
# Exp::NotPrintable (every C0 control, DEL, the C1 controls except U+0085);
# the byte order mark; and "&", which 0.8 added.
_DISALLOWED = re.compile(
    r":(?:[ \t\n\r]|\Z)|[ \t\n\r]#|[\x00-\x1f\x7f\x80-\x84\x86-\x9f\ufeff&]"
)
_NULLS = {"", "~", "null", "Null", "NULL"}


def _plain_ok(text: str) -> bool:
    """yaml-cpp 0.8's IsValidPlainScalar in block context (Envoy builds yaml-cpp 0.8.0)."""
    if text in _NULLS:
        return False
    first = text[0]
    if first in _BAD_FIRST:
        return False
    if first in _BAD_FIRST_IF_ALONE and (len(text) == 1 or text[1] in " \t\n\r"):
        return False
    if text.endswith(" "):
        return False
    return _DISALLOWED.search(text) is None


def _quoted(text: str) -> str:
    """yaml-cpp's WriteDoubleQuotedString (non-ASCII written as is)."""
    out = ['"']
    escapes = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r", "\b": "\\b"}
    escapes["\f"] = "\\f"
    for char in text:
        code = ord(char)
        if char in escapes:
            out.append(escapes[char])
        elif code < 0x20 or 0x80 <= code <= 0xA0:
            out.append(f"\\x{code:02x}")
        elif code == 0xFEFF:
            out.append("\\ufeff")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def _string(text: str) -> str:
    return text if _plain_ok(text) else _quoted(text)


def _scalar(value: Any) -> str:
    """The text of a JSON scalar as yaml-cpp writes the node loaded from it."""
    if value is None:
        return "~"  # yaml-cpp loads JSON null as a null node and writes it as "~".
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return protobuf_double(value)
    return _string(str(value))


def _is_mapping(value: Any) -> bool:
    return isinstance(value, Mapping)


def _is_sequence(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def _emit_map(node: Mapping[str, Any], indent: int, out: list[str], inline: bool) -> None:
    """A non-empty mapping whose keys start at column `indent`; with `inline` the first key
    continues the current line (after a sequence's dash)."""
    for number, (key, value) in enumerate(node.items()):
        if number or not inline:
            out.append("\n" + " " * indent)
        out.append(_string(str(key)) + ":")
        _emit_child(value, indent + _INDENT, out)


def _emit_seq(node: Sequence[Any], indent: int, out: list[str]) -> None:
    """A non-empty sequence with its dashes at column `indent`, each on a new line."""
    for item in node:
        out.append("\n" + " " * indent + "-")
        if _is_mapping(item):
            if item:
                out.append(" ")
                _emit_map(item, indent + _INDENT, out, inline=True)
            else:
                out.append(" {}")
        elif _is_sequence(item):
            _emit_child(item, indent + _INDENT, out)
        else:
            out.append(" " + _scalar(item))


def _emit_child(value: Any, indent: int, out: list[str]) -> None:
    """A value after a key's colon (or a sequence inside a sequence), its block content at
    column `indent`."""
    if _is_mapping(value):
        if value:
            _emit_map(value, indent, out, inline=False)
        else:
            out.append("\n" + " " * indent + "{}")
    elif _is_sequence(value):
        if value:
            _emit_seq(value, indent, out)
        else:
            out.append("\n" + " " * indent + "[]")
    else:
        out.append(" " + _scalar(value))


def format_yaml(document: Mapping[str, Any]) -> str:
    """The yaml text of a Nighthawk ``Output`` JSON document."""
    if not isinstance(document, Mapping):
        raise ValueError("document: must be an object")
    if not document:
        return "{}"
    out: list[str] = []
    _emit_map(document, 0, out, inline=True)
    return "".join(out)


def render_yaml(result: Result) -> str:
    """`format_yaml` of `result`'s Nighthawk document."""
    return format_yaml(nighthawk_output(result))
