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
from typing import Any

from ._input import read_input_text

__all__ = ["load_yaml", "loads_relaxed", "read_text", "relax_json", "safe_load_bounded"]


def read_text(path: str | os.PathLike[str], where: str, kind: str = "config",
              limit: int | None = None) -> str:
    """The file's text (UTF-8) through the one reader (`nhbench._input`: a regular file within
    `kind`'s size limit, or `limit` if lower), or a ValueError ``"<where>: <reason>"``."""
    return read_input_text(path, kind, where, limit=limit)


# YAML's aliases let a few hundred bytes stand for billions of nodes ("billion laughs": nine
# anchors each referring nine times to the one before), which a consumer walking the data
# then expands. PyYAML shares the aliased objects, so the load itself is cheap, but every
# walk of the result is not. A document may use at most MAX_YAML_ALIASES aliases, and those
# may stand for at most MAX_YAML_ALIASED_NODES nodes in all once expanded; an alias to a
# node that contains it (a cycle) is refused too.
MAX_YAML_ALIASES = 1000
MAX_YAML_ALIASED_NODES = 100_000


def _bounded_loader() -> type:
    import yaml

    class BoundedLoader(yaml.SafeLoader):
        aliases = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                self.aliases += 1
                if self.aliases > MAX_YAML_ALIASES:
                    raise ValueError(f"more than {MAX_YAML_ALIASES} YAML aliases")
            return super().compose_node(parent, index)

    return BoundedLoader


def _expanded_nodes(root: Any) -> int:
    """The node count of `root` with every alias expanded, stopping past the budget."""
    import yaml

    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(node: Any) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in open_nodes:
            raise ValueError("a YAML alias refers to a node that contains it")
        open_nodes.add(key)
        total = 1
        if isinstance(node, yaml.SequenceNode):
            for child in node.value:
                total += size(child)
        elif isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                total += size(key_node) + size(value_node)
        open_nodes.discard(key)
        sizes[key] = total
        return total

    return size(root) if root is not None else 0


def _distinct_nodes(root: Any) -> int:
    import yaml

    seen: set[int] = set()
    stack = [root] if root is not None else []
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
        elif isinstance(node, yaml.MappingNode):
            for pair in node.value:
                stack.extend(pair)
    return len(seen)


def safe_load_bounded(text: str) -> Any:
    """yaml.safe_load with the alias budget above: a ValueError past it, yaml.YAMLError for
    bad YAML."""
    loader = _bounded_loader()(text)
    try:
        root = loader.get_single_node()
        if loader.aliases:
            extra = _expanded_nodes(root) - _distinct_nodes(root)
            if extra > MAX_YAML_ALIASED_NODES:
                raise ValueError(f"YAML aliases expand to more than "
                                   f"{MAX_YAML_ALIASED_NODES} nodes")
        return None if root is None else loader.construct_document(root)
    finally:
        loader.dispose()


def load_yaml(text: str, where: str) -> Any:
    """YAML (which JSON is a subset of) parsed safely, with aliases bounded, or a ValueError
    ``"<where>: not valid JSON or YAML: <problem> at line L column C"``."""
    import yaml

    try:
        return safe_load_bounded(text)
    except ValueError as exc:
        raise ValueError(f"{where}: refused: {exc}") from None
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
