"""``nhbench transform --output-format FMT [FILE]``: a result file in any output format.

Nighthawk's ``nighthawk_output_transform`` for nhbench: FILE (stdin when it is missing or
``-``) is nhbench's JSON, Nighthawk's JSON (quirks included) or any format `load_result`
reads; the output is any format of `nhbench.outputs.OUTPUT_FORMATS`. A Nighthawk-derived format is
written from the Nighthawk Output document: a file Nighthawk wrote goes straight to
``format_<fmt>(document)`` as it is, and nhbench's own goes through its `Result` (which
gives the same document back). ``human`` is the reader's own tool's report: of a Nighthawk
file, Nighthawk's human layout (``nighthawk_human``, from the document as written); of
nhbench's or Fortio's, nhbench's report, which needs the file loaded into a `Result`.

Exit status: 0 written; 2 bad input (unreadable file, not JSON with its line and column,
not a result, a format nhbench cannot write or read, an invalid field): one line on stderr,
nothing written to --output; 1 the output could not be written, or a renderer failed on a
result that passed the load's checks (one line, never a traceback).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from .._exceptions import ResultFileError
from ._common import die, note

if TYPE_CHECKING:
    from ._commands import Command, Subparsers

__all__ = ["add_parser", "run"]


def add_parser(commands: Subparsers,
               command: Command) -> argparse.ArgumentParser:
    from ..outputs import FORMAT_NAMES

    parser = commands.add_parser(
        command.name,
        help=command.help,
        description="Read a result written by nhbench or Nighthawk (JSON) from FILE, or stdin "
        "when FILE is missing or -, and write it in --output-format, as Nighthawk's "
        "nighthawk_output_transform does. See docs/outputs.md.",
        allow_abbrev=False,
    )
    parser.add_argument("file", metavar="FILE", nargs="?", default="-",
                        help="The result file (default: stdin).")
    parser.add_argument("--output-format", required=True, metavar="FORMAT",
                        help=f"One of: {', '.join(FORMAT_NAMES)}. human is Nighthawk's "
                        "own layout (nighthawk_human) for a Nighthawk file, nhbench's report "
                        "for the others.")
    parser.add_argument("--output", metavar="FILE", default=None,
                        help="Write here instead of stdout (a regular file is replaced "
                        "atomically; -, a FIFO or a device is streamed into).")
    return parser


def _read_input(path: str) -> tuple[bytes, str]:
    from .._load import read_result_bytes

    name = "<stdin>" if path == "-" else path
    try:
        return read_result_bytes(path, stdin=True), name
    except ResultFileError as exc:
        die(str(exc).replace("'-'", "<stdin>"), status=2)


def transform_text(raw: bytes, name: str, output_format: str) -> str:
    """The text of result `raw` (read from `name`) in `output_format`; ResultFileError or
    ValueError (one line) when it cannot be done."""
    from .._load import read_result_text, result_from_document
    from ..outputs import document_formatter, nighthawk_output

    formatter = document_formatter(output_format)  # ValueError for an unknown format
    # The document's checks (finite numbers, valid Unicode, bounded lists) apply to every
    # format, Nighthawk's own included.
    kind, data = read_result_text(raw, name)
    if output_format == "human" and kind == "nighthawk":
        # A Nighthawk user's "human" is Nighthawk's layout, which their scripts parse; it is
        # a function of the document, so it also covers files whose options nhbench's own
        # report could not describe (Nighthawk's test data has no uri).
        formatter = document_formatter("nighthawk_human")
    if formatter is not None and kind == "nighthawk":
        # Nighthawk's own document, exactly as written (after the reader's leniency): also
        # one whose options nhbench cannot describe, as in Nighthawk's own test data.
        try:
            return formatter(data)
        except (TypeError, AttributeError, KeyError, IndexError, ArithmeticError) as exc:
            # A field of another type than Nighthawk writes (options a number, say): bad
            # input, said in one line like any other.
            raise ResultFileError(
                f"cannot load result {name!r}: not Nighthawk's output as its formatters "
                f"read it ({type(exc).__name__}: {exc})", name) from None
    result = result_from_document(kind, data, name)
    if formatter is not None:
        return formatter(nighthawk_output(result))
    return result.render(output_format)


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from ..outputs import write_atomic

    output_format = args.output_format.strip().lower()
    if args.output is not None and args.output != "-":
        from .._io import check_output_path

        try:
            check_output_path(args.output)
        except ValueError as exc:
            die(f"--output: {exc}", status=2)
    raw, name = _read_input(args.file)
    try:
        text = transform_text(raw, name, output_format)
    except (ResultFileError, ValueError) as exc:
        die(str(exc).replace("output_format:", "--output-format:", 1), status=2)
    except Exception as exc:  # noqa: BLE001 - the last resort: one line, not a traceback
        # Loading checks what a renderer needs (docs/reliability.md, "Result files"); a
        # renderer failing anyway is nhbench's fault, said in one line.
        die(f"cannot write {name} as {output_format}: internal error "
            f"({type(exc).__name__}: {exc})", status=1)
    if args.output is not None:
        try:
            write_atomic(args.output, text)
        except OSError as exc:
            die(f"--output: {exc}", status=1)
        if sys.stderr.isatty() and args.output != "-":
            note(f"wrote {output_format} output to {args.output}")
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    return 0
