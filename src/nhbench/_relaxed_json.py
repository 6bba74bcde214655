"""Protobuf's relaxed JSON, the syntax Nighthawk's JSON loader accepts (bare-word keys,
single quotes, one trailing comma), rewritten as strict JSON for Python's json module.

One rewrite serves the test server's config files (`options._config_files`) and the request
sources (`sources`: Nighthawk's --request-source-plugin-config and its options-list files);
the test server's C header parser does the same (csrc/server/server_options.c, relax_json).
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["loads_relaxed", "relax_json"]

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SPACE = " \t\n\r"


def relax_json(text: str) -> str | None:
    """Protobuf's relaxed JSON (what Nighthawk's JSON loader accepts: bare-word keys, single
    quotes, the escapes \\' and \\U, raw control characters in strings, one trailing comma)
    rewritten as strict JSON; None for an unterminated string. The same rewrite as the test
    server's header parser (csrc/server/server_options.c, relax_json; docs/server.md)."""
    out: list[str] = []
    i, n, last = 0, len(text), ""
    while i < n:
        c = text[i]
        if c in "\"'":
            i += 1
            out.append('"')
            while True:
                if i >= n:
                    return None
                d = text[i]
                i += 1
                if d == c:
                    break
                if d == "\\":
                    if i >= n:
                        return None
                    e = text[i]
                    i += 1
                    out.append("'" if e == "'" else "\\" + ("u" if e == "U" else e))
                elif d == '"':
                    out.append('\\"')
                elif ord(d) < 0x20:
                    out.append(f"\\u{ord(d):04x}")
                else:
                    out.append(d)
            out.append('"')
            last = '"'
        elif (match := _WORD.match(text, i)) is not None:
            word, i = match.group(), match.end()
            j = i
            while j < n and text[j] in _SPACE:
                j += 1
            key = word not in ("true", "false", "null") and j < n and text[j] == ":"
            out.append(f'"{word}"' if key else word)
            last = "w"
        elif c == ",":
            j = i + 1
            while j < n and text[j] in _SPACE:
                j += 1
            trailing = j < n and text[j] in "}]" and last not in ("", "{", "[", ",")
            if not trailing:
                out.append(c)
            last = ","
            i += 1
        else:
            out.append(c)
            if c not in _SPACE:
                last = c
            i += 1
    return "".join(out)


def loads_relaxed(text: str) -> Any:
    """Strict JSON, else protobuf's relaxed JSON; raises the strict parser's
    json.JSONDecodeError when neither reads it, because that message points at the first
    thing a JSON reader objects to."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        relaxed = relax_json(text)
        if relaxed is not None:
            try:
                return json.loads(relaxed)
            except json.JSONDecodeError:
                pass
        raise
