"""The ``nhbench`` command: ``nhbench COMMAND [flags]``, one module a command.

The commands, their modules and their help lines are listed in `_commands.COMMANDS`; each
command module defines ``add_parser`` and ``run`` and imports what the commands share from
`_common`, never from here. ``nhbench run``'s exit statuses are in `_run`, the other
commands' in their modules. For every command, 2 is invalid input (an unknown flag, a
malformed value): one line on stderr, ``nhbench: error: <what>``, never a traceback.

Argument errors need no compiled extension: it is imported only when a run or server starts.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from .._exceptions import NHBenchError, OptionsError
from ._commands import COMMANDS
from ._common import PROG, Parser, die, version_line
from ._run import SLO_FAILED, run_and_report
from ._server import server_options_from_args as server_options_from_args

__all__ = ["SLO_FAILED", "main", "run_and_report"]


def build_parser() -> argparse.ArgumentParser:
    """The complete argument parser (exposed for documentation tools and tests)."""
    parser = Parser(
        prog=PROG,
        description="nhbench: an L7 HTTP load tester with Nighthawk's options and an "
        "exact, coordinated-omission-correct latency report.",
        allow_abbrev=False,
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for command in COMMANDS:
        sub = command.add_parser(commands, command)
        sub.set_defaults(func=command.run, subparser=sub)
    # Every subcommand answers --version with the same line as `nhbench --version` (as
    # nighthawk_client --version and fortio version do), so that a script that only knows
    # the subcommand it runs can record which nhbench ran it. Added here, after all of them,
    # so that a new subcommand gets it without having to remember.
    for sub in commands.choices.values():
        if "--version" not in sub._option_string_actions:
            sub.add_argument("--version", action="version", version=version_line(),
                             help="print the version and exit")
    return parser


#: The subcommands `build_parser` adds (tests/test_startup.py checks the two agree): `main`
#: answers ``nhbench COMMAND --version`` for these without building the parser.
_COMMANDS = frozenset(command.name for command in COMMANDS)
#: The commands that read their own arguments (another tool's grammar), by name.
_RAW_COMMANDS = {command.name: command for command in COMMANDS if command.raw}


# --------------------------------------------------------------------------------------------


def _escape_unencodable(exc: UnicodeError) -> tuple[str, int]:
    # \uXXXX (a surrogate pair above U+FFFF): JSON's and YAML's own escape, so a report
    # stays valid and decodes to the same text, and a person still sees which character.
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    escaped = []
    for char in exc.object[exc.start:exc.end]:
        code = ord(char)
        if code > 0xFFFF:
            code -= 0x10000
            escaped.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
        else:
            escaped.append(f"\\u{code:04x}")
    return "".join(escaped), exc.end


def _robust_standard_streams() -> None:
    """Make stdout and stderr escape what their encoding cannot hold instead of raising:
    with PYTHONIOENCODING=ascii (or a C locale on an old Python) a non-ASCII label or URL
    gave a UnicodeEncodeError traceback when the report was written, after the run."""
    import codecs

    try:
        codecs.lookup_error("nhbench-escape")
    except LookupError:
        codecs.register_error("nhbench-escape", _escape_unencodable)
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and getattr(stream, "errors", None) == "strict":
            try:
                reconfigure(errors="nhbench-escape")
            except (OSError, ValueError):
                pass


def _carry_out(command: Callable[[], int]) -> int:
    """Run a command (argparse's or a raw one) with the exit statuses every command shares:
    130 after Ctrl-C, one line and 2 for invalid input, 1 for a failure."""
    try:
        return int(command())
    except KeyboardInterrupt:
        sys.stderr.write(f"\n{PROG}: aborted\n")
        return 130
    except BrokenPipeError:
        # The reader went away (nhbench ... | head). Point stdout at /dev/null so the
        # interpreter's final flush does not raise again, and end quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except OptionsError as exc:
        die(str(exc), status=2)
    except NHBenchError as exc:
        die(str(exc), status=1)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``nhbench`` console script; returns the exit status."""
    _robust_standard_streams()
    given = list(sys.argv[1:] if argv is None else argv)
    # ``nhbench --version`` and ``nhbench COMMAND --version`` print the same line as the
    # parser would, without building it: building it imports every option model, which is
    # most of what a start costs. Anything else (--version among other arguments, an
    # unknown command) goes through the parser, which answers as it always has.
    if given == ["--version"] or (len(given) == 2 and given[0] in _COMMANDS
                                  and given[1] == "--version"):
        sys.stdout.write(version_line() + "\n")
        return 0
    if given and given[0] in _RAW_COMMANDS:
        return _carry_out(lambda: _RAW_COMMANDS[given[0]].main(given[1:]))
    parser = build_parser()
    args = parser.parse_args(argv)
    # The command line as given, for the sweep's manifest (no flag takes a secret).
    args.argv = given
    if args.version:
        sys.stdout.write(version_line() + "\n")
        return 0
    if args.command is None:
        # Not made from COMMANDS: the line is kept byte for byte as it has always been.
        parser.error("missing command: choose run, sweep, report, server or demo "
                     "(see nhbench --help)")
    return _carry_out(lambda: args.func(args, args.subparser))
