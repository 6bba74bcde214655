"""``nhbench version``: what this installation is, for a bug report or a CI log.

The package version (from git tags, docs/development.md "Versions"), the commit the C core
was built from, Python and the platform, whether HTTP/3, regex response checks, sanitizers
and -Werror are built in, and every C library the core runs on: the version loaded now and,
where it differs, the one its headers had at build time. ``--json`` gives the same as one
JSON object, ``-s``/``--short`` the version alone (what ``nhbench --version`` prints after
the name, and what ``fortio version`` prints for Fortio). Exit 0; 1 when the compiled
extension is missing (everything else is still printed, with the reason).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from .._version import build_info

if TYPE_CHECKING:
    from ._commands import Command, Subparsers

__all__ = ["add_parser", "format_human", "run"]


def add_parser(commands: Subparsers, command: Command) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        command.name,
        help=command.help,
        description="Print nhbench's version, the commit its C core was built from, Python "
        "and the platform, whether HTTP/3, regex checks, sanitizers and -Werror are built in, "
        "and the versions of the C libraries it runs on (loaded now, and built against "
        "where that differs). Exit 1 when the compiled extension is missing.",
        allow_abbrev=False,
    )
    form = parser.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true",
                      help="One JSON object (version, commit, python, platform, core: its "
                      "build options and libraries, or null and core_error).")
    form.add_argument("-s", "--short", action="store_true",
                      help="The version alone, one line.")
    return parser


def _yes(value: object) -> str:
    return "yes" if value else "no"


def format_human(info: dict[str, Any]) -> str:
    """The report `run` prints for `info` (`nhbench._version.build_info`)."""
    lines = [f"nhbench {info['version']}"]
    core = info["core"]
    unknown = ("unknown (the C core records it)" if core is None
               else "unknown (built without git; the version names the tag)")
    rows: list[tuple[str, str]] = [
        ("commit", info["commit"] or unknown),
        ("python", f"{info['python']} ({info['python_implementation']}, {info['platform']})"),
    ]
    if core is None:
        rows.append(("C core", f"not available: {info.get('core_error', '')}"))
    else:
        if core["version"] != info["version"]:
            rows.append(("C core", f"{core['version']} (differs from the package: rebuild it)"))
        rows += [
            ("HTTP/3", _yes(core["http3"])),
            ("regex checks", _yes(core["regex_checks"])),
            ("sanitizers", "ASan+UBSan" if core["sanitizers"] else "no"),
            ("-Werror", _yes(core["werror"])),
        ]
    width = max(len(name) for name, _ in rows) + 2
    lines += [f"{name.ljust(width)}{value}" for name, value in rows]
    if core is not None:
        lines.append("libraries (loaded; built against, where different)")
        libs = core["libraries"]
        name_width = max(len(name) for name in libs) + 2
        for name, versions in libs.items():
            linked, built = versions["linked"], versions["built"]
            if linked is None:
                text = f"{built} (its headers: it has no run-time version call)"
            elif linked != built:
                text = f"{linked} (built against {built})"
            else:
                text = str(linked)
            lines.append(f"  {name.ljust(name_width)}{text}")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if args.short:
        from .._version import __version__

        sys.stdout.write(f"{__version__}\n")
        return 0
    info = build_info()
    if args.json:
        sys.stdout.write(json.dumps(info, indent=2) + "\n")
    else:
        sys.stdout.write(format_human(info))
    return 0 if info["core"] is not None else 1
