"""Protobuf's relaxed JSON, the syntax Nighthawk's JSON loader accepts (bare-word keys,
single quotes, one trailing comma), rewritten as strict JSON for Python's json module.

One rewrite serves the test server's config files (`options._config_files`) and the request
sources (`sources`: Nighthawk's --request-source-plugin-config and its options-list files);
the test server's C header parser does the same (csrc/server/server_options.c, relax_json).
The two readers also share how a text file is read (`read_text`) and how YAML is parsed
(`load_yaml`), so that their errors read the same: one line naming the file and the reason.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

__all__ = ["load_yaml", "loads_relaxed", "read_text", "relax_json"]


def read_text(path: str | os.PathLike[str], where: str, limit: int | None = None) -> str:
    """The file's text (UTF-8), or a ValueError ``"<where>: <reason>"``; `limit` bounds its
    size in bytes (checked before reading)."""
    name = os.path.expanduser(os.fspath(path))
    try:
        if limit is not None:
            size = os.stat(name).st_size
            if size > limit:
                raise ValueError(f"{where}: {size} bytes is over the limit of {limit}")
        return Path(name).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(f"{where}: no such file") from None
    except IsADirectoryError:
        raise ValueError(f"{where}: is a directory") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{where}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} "
                         f"at offset {exc.start})") from None
    except OSError as exc:
        raise ValueError(f"{where}: cannot read: {exc.strerror or exc}") from None


def load_yaml(text: str, where: str) -> Any:
    """YAML (which JSON is a subset of) parsed safely, or a ValueError ``"<where>: not valid
    JSON or YAML: <problem> at line L column C"``."""
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ValueError(f"{where}: not valid JSON or YAML: {problem}{at}") from None
    except RecursionError:
        raise ValueError(f"{where}: nested too deeply") from None

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
