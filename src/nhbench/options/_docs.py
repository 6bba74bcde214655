"""The option tables of docs/options.md, generated from the models.

Each table lists a command's flags as the parser has them (the same `Flag` annotations
`add_model_flags` reads): flag and aliases, value, default and description. The tables sit in
the document between markers::

    <!-- BEGIN nhbench run options -->
    ...
    <!-- END nhbench run options -->

and are refreshed with ``python -m nhbench.options.docs docs/options.md``; a test fails when
the file is stale (tests/test_option_docs.py).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from ._flags import Flag, flag_of, flagged_fields, nested_model, value_text

__all__ = ["OPTION_TABLES", "main", "markdown_table", "render_option_docs"]


def _tables() -> dict[str, type[BaseModel]]:
    from ._run import Options
    from ._server import ServerOptions

    return {"run": Options, "server": ServerOptions}


#: The commands whose tables docs/options.md holds (name in the markers -> model).
OPTION_TABLES: tuple[str, ...] = ("run", "server")


def _rows(model: type[BaseModel]) -> Iterator[tuple[str, FieldInfo, Flag]]:
    for name, info, spec in flagged_fields(model):
        if spec.flatten:
            sub = nested_model(info)
            if sub is not None:
                yield from _rows(sub)
            continue
        if not spec.hidden:
            yield name, info, spec


def _default(info: FieldInfo, spec: Flag) -> str:
    if spec.default:
        return spec.default
    if info.default_factory is not None:
        value = info.default_factory()  # type: ignore[call-arg]
    else:
        value = info.default
    if value is PydanticUndefined:
        return "required"
    if isinstance(value, BaseModel) or value is None or value in ((), {}, ""):
        return "—"
    return value_text(value)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(model: type[BaseModel]) -> str:
    """The Markdown table of `model`'s flags: flag (aliases), value, default, description."""
    lines = ["| flag | value | default | description |", "|---|---|---|---|"]
    for name, info, spec in _rows(model):
        if spec.positional:
            flags = f"`{spec.metavar or name.upper()}` (argument)"
        else:
            spelled = [flag_of(model, name), *spec.aliases]
            spelled += [f"{const} (= {value})" for const, value in spec.consts]
            flags = ", ".join(f"`{flag}`" for flag in spelled)
        if spec.metavar is None and info.annotation is bool:
            value_text = "switch"
        else:
            value_text = f"`{spec.metavar or 'VALUE'}`"
            if spec.append:
                value_text += ", repeatable"
        description = info.description or ""
        if spec.group:
            description = f"*{spec.group}.* {description}"
        lines.append(
            f"| {_cell(flags)} | {_cell(value_text)} | {_cell(_default(info, spec))} | "
            f"{_cell(description)} |"
        )
    return "\n".join(lines) + "\n"


def _marker(kind: str, command: str) -> str:
    return f"<!-- {kind} nhbench {command} options -->"


def render_option_docs(text: str) -> str:
    """`text` with every marked option table replaced by the one generated now."""
    models = _tables()
    for command in OPTION_TABLES:
        begin, end = _marker("BEGIN", command), _marker("END", command)
        match = re.search(re.escape(begin) + r"\n.*?" + re.escape(end), text, re.S)
        if match is None:
            raise ValueError(f"no {begin} ... {end} markers")
        table = markdown_table(models[command])
        text = f"{text[:match.start()]}{begin}\n{table}{end}{text[match.end():]}"
    return text


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m nhbench.options.docs FILE...``: refresh the tables in each file."""
    paths = list(sys.argv[1:] if argv is None else argv) or ["docs/options.md"]
    for name in paths:
        path = Path(name)
        old = path.read_text(encoding="utf-8")
        new = render_option_docs(old)
        if new != old:
            path.write_text(new, encoding="utf-8")
            sys.stdout.write(f"updated {name}\n")
    return 0
