"""``nhbench report DIR`` and ``nhbench report RESULT.json [-o PAGE.html]``.

With a campaign directory it re-renders report.txt, results.csv and report.html from the
saved results; 2 when DIR is not a campaign. With a result file it writes the result
browser's page of that result (`nhbench.browse`) as a self-contained file (to stdout without
-o); 2 when the file is not a result nhbench reads, 1 when the page cannot be written.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .._exceptions import CampaignError
from ..options import TABLE_LAYOUTS
from ._common import die, note

if TYPE_CHECKING:
    from ._commands import Command, Subparsers

__all__ = ["add_parser", "run"]


def add_parser(commands: Subparsers,
               command: Command) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        command.name,
        help=command.help,
        description="With a campaign directory: write DIR/report.txt, DIR/results.csv and "
        "DIR/report.html again from the campaign's manifest and step results, and print the "
        "text report. With a result file (nhbench, Nighthawk or Fortio JSON): write its "
        "page, the one 'nhbench browse' shows, as one self-contained HTML file.",
        argument_default=argparse.SUPPRESS,
        allow_abbrev=False,
    )
    parser.add_argument("directory", metavar="DIR|RESULT",
                        help="A campaign directory, or a result file.")
    parser.add_argument("--table", choices=TABLE_LAYOUTS,
                        help="With a campaign directory: the step table's layout (default: "
                        "the campaign's own, as its sweep's --table gave it).")
    parser.add_argument("-o", "--output", metavar="PAGE",
                        help="With a result file: write the page here (default: stdout).")
    return parser



def _report_result(path: Path, output: str | None) -> int:
    """``nhbench report RESULT.json [-o PAGE]``: the result's page, self-contained."""
    from .._exceptions import ResultFileError
    from .._io import check_output_path, write_text
    from .._load import load_result
    from ..browse import result_page

    if output is not None:
        try:
            check_output_path(output)
        except ValueError as exc:
            die(f"--output: {exc}", status=2)
    try:
        result = load_result(path)
    except ResultFileError as exc:
        die(str(exc), status=2)
    try:
        page = result_page(result, str(path), standalone=True)
    except Exception as exc:  # noqa: BLE001 - the last resort: one line, not a traceback
        # Loading checks what the page needs (docs/reliability.md, "Result files"); the
        # page failing anyway is nhbench's fault, said in one line.
        die(f"cannot render {path}: internal error ({type(exc).__name__}: {exc})", status=1)
    if output is None:
        sys.stdout.write(page)
        sys.stdout.flush()
        return 0
    try:
        write_text(output, page)
    except OSError as exc:
        die(f"--output: {exc}", status=1)
    if sys.stderr.isatty():
        note(f"wrote {output}")
    return 0


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from ..campaign import load_manifest

    directory = Path(args.directory)
    output = getattr(args, "output", None)
    if directory.is_file() or (os.path.lexists(directory) and not directory.is_dir()):
        # Anything at the path but a directory is a result file, refused by the reader if
        # it is not a regular one (a FIFO, a device, a symbolic-link loop).
        if getattr(args, "table", None) is not None:
            die("--table: only for a campaign directory (a result has no step table)",
                status=2)
        return _report_result(directory, output)
    if output is not None:
        die("--output: only for a result file; a campaign's reports are written into "
            "its directory", status=2)
    table = getattr(args, "table", None)
    try:
        manifest = load_manifest(directory)
    except CampaignError as exc:
        die(str(exc), status=2)
    if table is not None:
        # Rendered with this layout; the manifest on disk keeps the campaign's own setting.
        manifest = manifest.model_copy(update={"settings": {**manifest.settings,
                                                             "table": table}})
    from .._io import check_output_path
    from ..report import REPORT_FILES, render_text, write_reports

    # A read-only campaign (or a directory squatting on a report's name) is refused before
    # anything is rendered; what only the write can find out (a full disk) exits 1.
    for name in REPORT_FILES:
        try:
            check_output_path(directory / name)
        except ValueError as exc:
            die(f"cannot write the reports: {exc}", status=2)
    try:
        written = write_reports(directory, manifest)
    except OSError as exc:
        die(str(exc), status=1)
    text = render_text(manifest)
    if text:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()
    if written:
        note("wrote " + ", ".join(str(path) for path in written))
    return 0
