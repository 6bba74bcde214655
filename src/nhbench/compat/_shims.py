"""Wrappers named like Fortio's and Nighthawk's binaries, so that scripts run unchanged.

``nhbench compat install --bin-dir DIR`` writes ``fortio``, ``nighthawk_client``,
``nighthawk_output_transform``, ``nighthawk_service`` and ``nighthawk_test_server`` into DIR:
each a two-line shell script that runs this interpreter's nhbench with the front-end's
command (``exec PYTHON -m nhbench nighthawk client "$@"``). With DIR first on PATH, a lab
script that calls ``nighthawk_client --rps 100 ...`` runs nhbench's front-end.

Each wrapper carries `MARKER` on its second line: a reinstall replaces its own files, an
uninstall removes only them, and a file of those names that nhbench did not write (the real
``fortio`` binary) is never replaced unless asked (``force``) and never removed.
"""

from __future__ import annotations

import os
import shlex
import stat
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from .._exceptions import OptionsError

__all__ = ["MARKER", "SHIMS", "install", "is_ours", "shim_text", "uninstall"]

#: Each wrapper's name and the nhbench command it runs.
SHIMS: Mapping[str, tuple[str, ...]] = {
    "fortio": ("fortio",),
    "nighthawk_client": ("nighthawk", "client"),
    "nighthawk_output_transform": ("nighthawk", "transform"),
    "nighthawk_service": ("nighthawk", "service"),
    "nighthawk_test_server": ("nighthawk", "test-server"),
}

#: The second line of every wrapper: how install and uninstall know their own files.
MARKER = "# nhbench compat shim: written by `nhbench compat install`, removed by `nhbench " \
    "compat uninstall`"
#: A wrapper is a few hundred bytes; a file is only read this far to look for the marker.
_HEAD = 4096



def shim_text(command: Sequence[str], python: str | None = None) -> str:
    """The wrapper that runs ``python -m nhbench COMMAND "$@"`` (this interpreter by
    default: the one whose nhbench installed it)."""
    interpreter = python or sys.executable
    if not interpreter:
        raise OptionsError("cannot tell which Python runs nhbench (sys.executable is empty)")
    words = " ".join(shlex.quote(word) for word in (interpreter, "-m", "nhbench", *command))
    return f"#!/bin/sh\n{MARKER}\nexec {words} \"$@\"\n"


def is_ours(path: Path) -> bool:
    """Whether `path` is a regular file (not a link) that `install` wrote."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(info.st_mode):
        return False
    try:
        with path.open("rb") as file:
            lines = file.read(_HEAD).split(b"\n")
    except OSError:
        return False  # unreadable: not a file install wrote (it writes them readable)
    return len(lines) > 1 and lines[1] == MARKER.encode()


def _bin_dir(directory: str | os.PathLike[str], *, create: bool) -> Path:
    path = Path(directory)
    if path.exists() and not path.is_dir():
        raise OptionsError(f"--bin-dir: {str(path)!r} is not a directory")
    if not path.exists():
        if not create:
            raise OptionsError(f"--bin-dir: {str(path)!r} does not exist")
        try:
            path.mkdir(parents=True)
        except OSError as exc:
            raise OptionsError(f"--bin-dir: cannot create {str(path)!r}: "
                            f"{exc.strerror or exc}") from exc
    return path


def install(directory: str | os.PathLike[str], *, force: bool = False,
            shims: Mapping[str, tuple[str, ...]] = SHIMS,
            python: str | None = None) -> list[Path]:
    """Write every wrapper of `shims` into `directory` (created if missing) and return their
    paths. A file there that `install` did not write is refused (`OptionsError`, nothing
    written) unless `force`; a wrapper of its own is replaced."""
    path = _bin_dir(directory, create=True)
    # Every name is checked before anything is written: a refusal leaves DIR as it was.
    for name in shims:
        target = path / name
        if (target.exists() or target.is_symlink()) and not is_ours(target):
            if not force:
                raise OptionsError(f"--bin-dir: {str(target)!r} exists and was not written by "
                                f"nhbench compat install; nothing was written (--force "
                                f"replaces it)")
            if target.is_dir() and not target.is_symlink():
                raise OptionsError(f"--bin-dir: {str(target)!r} is a directory; nothing was "
                                f"written")
    texts = {name: shim_text(command, python) for name, command in shims.items()}
    written = []
    for name, text in texts.items():
        target = path / name
        # Written beside the target and renamed over it: a script running the old wrapper,
        # or a reader of a half-written one, never sees a partial file.
        fd, temporary = tempfile.mkstemp(prefix=f".{name}.", dir=path)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as file:
                file.write(text)
            os.chmod(temporary, 0o755)
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        written.append(target)
    return written


def uninstall(directory: str | os.PathLike[str],
              shims: Mapping[str, tuple[str, ...]] = SHIMS) -> tuple[list[Path], list[Path]]:
    """Remove the wrappers `install` wrote in `directory`: (removed, left), where `left` are
    files of those names that `install` did not write (kept as they are)."""
    path = _bin_dir(directory, create=False)
    removed, left = [], []
    for name in shims:
        target = path / name
        if is_ours(target):
            target.unlink()
            removed.append(target)
        elif target.exists() or target.is_symlink():
            left.append(target)
    return removed, left
