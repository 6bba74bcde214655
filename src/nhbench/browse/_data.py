"""The data directory as Fortio shares it: the result files directly in DIR, listed in an
``index.tsv`` in Google's transfer list format (``TsvHttpData-1.0``), which is what
``fortio report|server -sync URL`` (and `nhbench.browse.sync_results`) read.

Fortio writes (rapi/data.go): the line ``TsvHttpData-1.0``, then one line per ``*.json``
file of its data directory, newest name first (its names start with the run's date):
``URL<TAB>size<TAB>base64(MD5)``, each line ending in a newline. The URL is the data
directory's URL and the file name: ``-base-url`` (trailing ``/`` removed) followed by the
UI path and ``data/`` when a base URL is given, else the scheme (``X-Forwarded-Proto`` or
http) and the request's Host.

Only files named like a result are shared (`safe_result_name`: letters, digits and
``._+=@,-``, ending in ``.json``, not hidden, at most `MAX_NAME_CHARS`), only regular files
of at most the result limit (`nhbench._input.LIMITS`), only directly in DIR (Fortio's data
directory is flat, and its sync names a file by the last component of its URL), at most
`MAX_INDEX_FILES` of them. The MD5 of each is computed once per version of the file
(cached by inode, size and modification time).
"""

from __future__ import annotations

import base64
import hashlib
import html
import os
import re
import stat
import threading
from pathlib import Path
from urllib.parse import quote

from .._input import limit_of

__all__ = ["MAX_INDEX_FILES", "MAX_NAME_CHARS", "TSV_HEADER", "DataDirectory",
           "safe_result_name"]

#: The first line of Google's transfer list format.
TSV_HEADER = "TsvHttpData-1.0"
#: Files listed in one index (the browser's walk limit): a larger directory is listed in
#: part, newest names first, as Fortio would order them.
MAX_INDEX_FILES = 5000
#: Characters of a shared file name: well under a file system's 255 bytes, so that a temporary
#: name built on it fits too.
MAX_NAME_CHARS = 200

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+=@,-]*\.json")
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC | os.O_NOFOLLOW


def safe_result_name(name: str) -> bool:
    """Whether `name` may be a shared result file: one plain file name (no ``/``, not hidden,
    no control or shell-special character) ending in ``.json``. Fortio's own names (date,
    run id and labels reduced to letters, digits and ``_``) all are."""
    return len(name) <= MAX_NAME_CHARS and _NAME.fullmatch(name) is not None


class DataDirectory:
    """The shared result files of `root`, with the MD5 cache. Thread-safe."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.limit = limit_of("result")
        self._lock = threading.Lock()
        self._md5: dict[str, tuple[tuple[int, int, int], str]] = {}

    def names(self) -> list[str]:
        """The shared file names, newest name first (Fortio's order), at most
        `MAX_INDEX_FILES`: safe names of regular files (not links) within the size limit."""
        names = []
        try:
            with os.scandir(self.root) as entries:
                for entry in entries:
                    if not safe_result_name(entry.name):
                        continue
                    try:
                        if entry.is_file(follow_symlinks=False) and \
                                entry.stat(follow_symlinks=False).st_size <= self.limit:
                            names.append(entry.name)
                    except OSError:
                        continue
        except OSError:
            return []
        return sorted(names, reverse=True)[:MAX_INDEX_FILES]

    def open(self, name: str) -> tuple[int, os.stat_result] | None:
        """A descriptor on the shared file `name` and its status, or None: not a safe name,
        not a regular file directly in DIR (a symbolic link is not followed: a link's target
        could be anywhere), or over the size limit. The caller closes it."""
        if not safe_result_name(name):
            return None
        try:
            fd = os.open(self.root / name, _OPEN_FLAGS)
        except OSError:
            return None
        try:
            status = os.fstat(fd)
            if not stat.S_ISREG(status.st_mode) or status.st_size > self.limit:
                raise OSError("not shared")
            os.set_blocking(fd, True)
        except OSError:
            os.close(fd)
            return None
        return fd, status

    def _digest(self, name: str) -> tuple[int, str] | None:
        """The size and base64 MD5 of `name`, or None when it is not shared."""
        opened = self.open(name)
        if opened is None:
            return None
        fd, status = opened
        key = (status.st_ino, status.st_size, status.st_mtime_ns)
        try:
            with self._lock:
                cached = self._md5.get(name)
            if cached is not None and cached[0] == key:
                return status.st_size, cached[1]
            digest = hashlib.md5(usedforsecurity=False)  # the format's checksum
            size = 0
            while chunk := os.read(fd, min(1 << 20, self.limit + 1 - size)):
                digest.update(chunk)
                size += len(chunk)
                if size > self.limit:
                    return None
        except OSError:
            return None
        finally:
            os.close(fd)
        if size != status.st_size:
            return None  # changing while read: left out until it settles
        encoded = base64.b64encode(digest.digest()).decode("ascii")
        with self._lock:
            self._md5[name] = (key, encoded)
        return size, encoded

    def index(self, data_url: str) -> bytes:
        """The ``index.tsv`` whose URLs are `data_url` (the data directory's URL, ending in
        ``/``) followed by each file's name."""
        lines = [TSV_HEADER]
        names = self.names()
        for name in names:
            digest = self._digest(name)
            if digest is not None:
                lines.append(f"{data_url}{quote(name)}\t{digest[0]}\t{digest[1]}")
        with self._lock:
            for stale in [n for n in self._md5 if n not in names]:
                del self._md5[stale]
        return ("\n".join(lines) + "\n").encode("utf-8")

    def html_list(self) -> bytes:
        """The directory page Fortio serves at ``data/``: one link per shared file."""
        items = "".join(f'<li><a href="{html.escape(quote(n))}">{html.escape(n[:-5])}</a>\n'
                        for n in self.names())
        return ("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><meta "
                "http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'\">"
                f"<title>data</title></head><body><ul>\n{items}</ul></body></html>\n"
                ).encode()
