"""``nhbench compat install|uninstall --bin-dir DIR``: the wrappers named like Fortio's and
Nighthawk's binaries (`nhbench.compat._shims`, docs/compat.md).

Exit status: 0 done; 2 a file in DIR that nhbench did not write, or DIR unusable (one line,
nothing written or removed); 1 a wrapper could not be written (a full disk...).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from ._common import Parser, die, note

if TYPE_CHECKING:
    from ._commands import Command, Subparsers

__all__ = ["add_parser", "run"]


def add_parser(commands: Subparsers, command: Command) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        command.name,
        help=command.help,
        description="Write (or remove) executable wrappers named fortio, nighthawk_client, "
        "nighthawk_output_transform, nighthawk_service and nighthawk_test_server that run "
        "this nhbench's Fortio and Nighthawk front-ends, so that scripts run unchanged with "
        "DIR first on PATH. See docs/compat.md.",
        allow_abbrev=False,
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", parser_class=Parser,
                                    required=True)
    install = actions.add_parser(
        "install", help="write the wrappers into DIR", allow_abbrev=False,
        description="Write the wrappers into DIR (created if missing). A wrapper written "
        "before is replaced; any other file of those names is refused (nothing written) "
        "unless --force.")
    install.add_argument("--bin-dir", required=True, metavar="DIR",
                         help="The directory to write the wrappers into.")
    install.add_argument("--force", action="store_true",
                         help="Replace files of those names that nhbench did not write.")
    uninstall = actions.add_parser(
        "uninstall", help="remove the wrappers from DIR", allow_abbrev=False,
        description="Remove from DIR the wrappers nhbench compat install wrote; files of "
        "those names that it did not write are left as they are.")
    uninstall.add_argument("--bin-dir", required=True, metavar="DIR",
                           help="The directory the wrappers were written into.")
    return parser


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from .._exceptions import OptionsError
    from ..compat._shims import SHIMS, install, uninstall

    try:
        if args.action == "install":
            written = install(args.bin_dir, force=args.force)
            for path in written:
                sys.stdout.write(f"{path} -> nhbench {' '.join(SHIMS[path.name])}\n")
            note(f"put {args.bin_dir} first on PATH to run them by their names")
            return 0
        removed, left = uninstall(args.bin_dir)
    except OptionsError as exc:
        die(str(exc), status=2)
    except OSError as exc:
        die(f"--bin-dir: {exc.strerror or exc}: {exc.filename or args.bin_dir}", status=1)
    for path in removed:
        sys.stdout.write(f"removed {path}\n")
    for path in left:
        note(f"left {path}: not written by nhbench compat install")
    return 0
