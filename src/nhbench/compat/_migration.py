"""The migration tables of docs/options.md, generated from the front-ends' flag tables.

One table a tool: each of its flags (every spelling), its value and default, what it does
in that tool, and what it becomes in nhbench (the record's `nhbench`) or why it is refused
(its `refused`). The front-ends' tables are the single source (`ForeignFlag` records); this
module only lays them out. They sit in the document between markers::

    <!-- BEGIN migration tables -->
    ...
    <!-- END migration tables -->

and are refreshed with ``python -m nhbench.compat.migration docs/options.md``; a test fails
when the file is stale (tests/test_compat_migration.py).

docs/fortio.md has a second view of Fortio's table, the flags each command takes, between
``<!-- BEGIN fortio command flags -->`` and ``<!-- END fortio command flags -->``; the same
command refreshes whichever of the two marker pairs a file has.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from importlib import import_module
from pathlib import Path
from typing import NamedTuple

from ._table import ForeignFlag

__all__ = ["BEGIN", "COMMANDS_BEGIN", "COMMANDS_END", "END", "FORTIO_COMMANDS", "TOOLS", "Tool",
           "command_flags_table", "main", "migration_tables", "render_command_flags",
           "render_migration", "tool_table"]

BEGIN = "<!-- BEGIN migration tables -->"
END = "<!-- END migration tables -->"
COMMANDS_BEGIN = "<!-- BEGIN fortio command flags -->"
COMMANDS_END = "<!-- END fortio command flags -->"

#: The Fortio commands that take flags, in the order of docs/fortio.md's table (the
#: `commands` of each record name some of these; a test checks each is one).
FORTIO_COMMANDS = ("load", "curl", "report", "nc", "grpcping", "server", "tcp-echo",
                   "udp-echo", "redirect", "proxies")


class Tool(NamedTuple):
    """A tool whose flags the migration tables list, and where its front-end's table is."""

    #: The heading: ``Fortio (`fortio`)``.
    title: str
    #: The module and the name in it of the tuple of `ForeignFlag` records.
    module: str
    table: str
    #: The front-end's command, for the sentence under the heading.
    front_end: str


TOOLS: tuple[Tool, ...] = (
    Tool("Fortio (`fortio`)", "nhbench.compat._fortio_flags", "FORTIO_FLAGS",
         "nhbench fortio"),
    Tool("Nighthawk (`nighthawk_client`)", "nhbench.compat._nighthawk_flags",
         "NIGHTHAWK_CLIENT_FLAGS", "nhbench nighthawk client"),
    Tool("Nighthawk's test server (`nighthawk_test_server`, Envoy's command line)",
         "nhbench.compat._nighthawk", "TEST_SERVER_FLAGS", "nhbench nighthawk test-server"),
)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ").strip()


def tool_table(flags: Sequence[ForeignFlag]) -> str:
    """The Markdown table of one tool's flags, in the table's order."""
    lines = ["| flag | value | what it does there | in nhbench |", "|---|---|---|---|"]
    for flag in flags:
        spelled = ", ".join(f"`{name}`" for name in flag.names)
        value = "switch" if flag.value is None else f"`{flag.value}`"
        if flag.repeatable:
            value += ", repeatable"
        if flag.default:
            value += f" (default `{flag.default}`)"
        meaning = flag.meaning
        if flag.commands:
            meaning += f" ({', '.join(flag.commands)})"
        fate = flag.nhbench if flag.nhbench else f"refused: {flag.refused}"
        lines.append(f"| {_cell(spelled)} | {_cell(value)} | {_cell(meaning)} | "
                     f"{_cell(fate)} |")
    return "\n".join(lines) + "\n"


def _load(tool: Tool) -> Sequence[ForeignFlag]:
    # By module name: the front-ends import pydantic's option models, which this generator
    # (and the docs test) needs only for the tables.
    flags: Sequence[ForeignFlag] = getattr(import_module(tool.module), tool.table)
    return flags


def migration_tables(tables: Mapping[Tool, Sequence[ForeignFlag]] | None = None) -> str:
    """The generated part: a heading and a table for each tool of `tables` (each of `TOOLS`
    with its front-end's table by default)."""
    if tables is None:
        tables = {tool: _load(tool) for tool in TOOLS}
    parts = []
    for tool, flags in tables.items():
        parts.append(f"### {tool.title}\n")
        mapped = sum(1 for flag in flags if flag.nhbench)
        parts.append(f"{len(flags)} flags: {mapped} mapped (with the tool's meaning, through "
                     f"`{tool.front_end}`), {len(flags) - mapped} refused by name.\n")
        parts.append(tool_table(flags))
    return "\n".join(parts)


def command_flags_table(flags: Sequence[ForeignFlag],
                        commands: Sequence[str] = FORTIO_COMMANDS) -> str:
    """For each command, the flags it takes (each mapped record that names it, then those
    that name no command: every command takes them), and a line on the refused ones."""
    common = [flag.name for flag in flags if flag.nhbench and not flag.commands]
    lines = ["| command | the flags it takes (besides those of every command) |", "|---|---|"]
    for command in commands:
        taken = [f"`{flag.name}`" for flag in flags if flag.nhbench and command in flag.commands]
        lines.append(f"| `{command}` | {_cell(' '.join(taken)) or 'none'} |")
    refused = [f"`{flag.name}`" for flag in flags if flag.refused]
    return ("\n".join(lines) + "\n\n"
            f"Every command: {' '.join(f'`{name}`' for name in common)}. "
            f"Refused by every command ({len(refused)}): {' '.join(refused)}. "
            "A flag given to a command that does not take it is refused by name.\n")


def _replace(text: str, begin: str, end: str, body: str) -> str | None:
    match = re.search(re.escape(begin) + r"\n.*?" + re.escape(end), text, re.S)
    if match is None:
        return None
    return f"{text[:match.start()]}{begin}\n{body}{end}{text[match.end():]}"


def render_migration(text: str, generated: str | None = None) -> str:
    """`text` with the part between the markers replaced by `generated` (the tables made
    now by default)."""
    body = migration_tables() if generated is None else generated
    new = _replace(text, BEGIN, END, body)
    if new is None:
        raise ValueError(f"no {BEGIN} ... {END} markers")
    return new


def render_command_flags(text: str, generated: str | None = None) -> str:
    """`text` with the part between the command-flags markers replaced by `generated` (the
    table of `FORTIO_FLAGS` made now by default)."""
    if generated is None:
        generated = command_flags_table(_load(TOOLS[0]))
    new = _replace(text, COMMANDS_BEGIN, COMMANDS_END, generated)
    if new is None:
        raise ValueError(f"no {COMMANDS_BEGIN} ... {COMMANDS_END} markers")
    return new


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m nhbench.compat.migration FILE...``: refresh the tables in each file (the
    migration tables, the Fortio command flags, or both: whichever markers it has)."""
    paths = list(sys.argv[1:] if argv is None else argv) or ["docs/options.md"]
    generated = migration_tables()
    by_command = command_flags_table(_load(TOOLS[0]))
    for name in paths:
        path = Path(name)
        old = path.read_text(encoding="utf-8")
        new = old
        if BEGIN in old or COMMANDS_BEGIN not in old:
            new = render_migration(new, generated)
        if COMMANDS_BEGIN in old:
            new = render_command_flags(new, by_command)
        if new != old:
            path.write_text(new, encoding="utf-8")
            sys.stdout.write(f"updated {name}\n")
    return 0
