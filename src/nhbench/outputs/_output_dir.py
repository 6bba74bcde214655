"""``--output-dir DIR``: each result under a new name in a directory, as Fortio's ``-a`` does.

The name is Fortio's result ID (``RunnerOptions.GenID`` in Fortio's periodic/periodic.go):
the run's start as ``YYYY-MM-DD-HHMMSS``, then ``_`` and the labels with every run of
characters other than ASCII letters and digits turned into one ``_`` (none at the end), cut
to 96 characters; then the format's extension. The time is UTC (Fortio uses the local time,
which is UTC where it runs in containers). Without ``--label`` the labels are Fortio's
default, the URL without its scheme and the short host name: ``127.0.0.1:8080/ , myhost``
becomes ``2024-05-01-120000_127_0_0_1_8080_myhost.json``. ``fortio report -data-dir DIR``
lists the ``.json`` files of a directory, so runs written with ``--output-format fortio``
show up in its browser.

A name that is taken gets ``-1``, ``-2``... before the extension: an existing file is never
overwritten, also not by a run that takes the name between the check and the write (the
file is linked into place, which fails where a name exists). Readers see the whole file or
none (it is written to a temporary file in the directory first).
"""

from __future__ import annotations

import errno
import os
import secrets
import socket
import time
from collections.abc import Iterable

from .._io import OutputError, check_output_path, fsync_directory
from . import OUTPUT_FORMATS

__all__ = ["EXTENSIONS", "check_output_dir", "fortio_id_text", "result_id", "write_in_dir"]

#: The file name extension of each --output-format (a view of `OUTPUT_FORMATS`; the
#: writer falls back to ".txt" for a name not in it).
EXTENSIONS: dict[str, str] = {name: fmt.extension for name, fmt in OUTPUT_FORMATS.items()}
# Fortio cuts its IDs to this many bytes.
_MAX_ID = 96
# How many "-N" suffixes are tried before giving up on a directory.
_MAX_SUFFIX = 10_000


def default_labels(uri: str) -> str:
    """Fortio's labels when none are given: the URL without http(s):// and the short host
    name, joined by " , "."""
    short = uri
    for prefix in ("https://", "http://"):
        if uri.startswith(prefix):
            short = uri[len(prefix):]
            break
    return f"{short} , {socket.gethostname().split('.', 1)[0]}"


def result_id(start: float, labels: str) -> str:
    """Fortio's result ID for a run started at `start` (epoch seconds, shown in UTC)."""
    return fortio_id_text(time.strftime("%Y-%m-%d-%H%M%S", time.gmtime(start)), labels)


def fortio_id_text(stamp: str, labels: str, run_id: int = 0) -> str:
    """Fortio's result ID (its periodic.GenID) from the start as ``YYYY-MM-DD-HHMMSS``:
    ``_RunID`` when set, then the labels with each run of other than ASCII letters and
    digits as one ``_``; at most 96 characters."""
    base = f"{stamp}_{run_id}" if run_id else stamp
    if not labels:
        return base
    out = [base, "_"]
    last = "_"
    for char in labels:
        if char.isascii() and char.isalnum():
            last = char
        elif last == "_":
            continue  # one "_" for a whole run of other characters
        else:
            last = "_"
        out.append(last)
    text = "".join(out)
    if last == "_":
        text = text[:-1]
    return text[:_MAX_ID]


def check_output_dir(directory: str) -> str:
    """Create `directory` if missing and check that files can be written in it; returns it
    (``~`` expanded). Raises ValueError with a one-line reason."""
    path = os.path.expanduser(directory)
    if os.path.lexists(path) and not os.path.isdir(path):
        raise ValueError(f"{directory!r} exists and is not a directory")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"cannot create directory {directory!r}: "
                         f"{exc.strerror or exc}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise ValueError(f"directory {directory!r} is not writable")
    # The same checks as every other file the package writes, on a name in it.
    check_output_path(os.path.join(path, "nhbench-probe"))
    return path


def _candidates(directory: str, stem: str, extension: str) -> Iterable[str]:
    yield os.path.join(directory, stem + extension)
    for n in range(1, _MAX_SUFFIX):
        yield os.path.join(directory, f"{stem}-{n}{extension}")


def write_in_dir(directory: str, stem: str, extension: str, text: str) -> str:
    """Write `text` to a new file ``<stem>[-N]<extension>`` in `directory` and return its
    path; never replaces a file. Raises `nhbench.OutputError` (one line)."""
    directory = os.path.expanduser(directory)
    temporary = os.path.join(directory, f".{stem}.{secrets.token_hex(4)}.tmp")
    try:
        # Mode 0666 and O_EXCL: the umask applies, as for any new file (see nhbench._io).
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                     | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        raise OutputError(directory, exc.strerror or str(exc), exc.errno) from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
        for candidate in _candidates(directory, stem, extension):
            try:
                # link() fails with EEXIST where any file exists: no check-then-write race.
                os.link(temporary, candidate)
            except FileExistsError:
                continue
            fsync_directory(directory)
            return candidate
        raise OSError(errno.EEXIST, f"no free name for {stem}{extension}")
    except OSError as exc:
        raise OutputError(directory, exc.strerror or str(exc), exc.errno) from None
    finally:
        try:
            os.unlink(temporary)
        except OSError:
            pass

