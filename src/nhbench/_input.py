"""The one file reader of nhbench: every file a user names as input is read through here.

That covers the run's ``--payload-file``, ``--grpc-payload``, ``--replay``, request-source
``file_path`` (options lists), the test server's ``--config``, ``--tls-cert`` and
``--tls-key``, ``nhbench sweep --scenario``, the result files of ``transform``, ``report``,
``browse`` and `nhbench.load_result`, and the pytest plugin's baseline files. One set of rules
(docs/reliability.md, "Files nhbench reads"), so that no option reads what another refuses:

* Only a regular file is read (a symbolic link is followed to one). A character device
  (``/dev/zero`` reports size 0 and never ends), a FIFO (opening one with no writer blocks
  for ever), a directory, a socket or a block device is refused by name. The file is opened
  with ``O_NONBLOCK`` so that even a FIFO swapped in after a check cannot hang the open, and
  the kind is decided on the open descriptor (``fstat``), not on the path.
* Each kind of file has a size limit (`LIMITS`), checked on the open descriptor before
  reading and again while reading (at most limit + 1 bytes are ever read), so a file that
  grows, or a ``/proc`` file that reports size 0, is still bounded.
* ``-`` is standard input where a command reads it (``transform``), read under the same limit.

Errors are `InputError` (a ValueError) whose message is one line: ``"<where>: <reason>"``,
where the caller's `where` names the option or the kind of file and the path.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from typing import BinaryIO

__all__ = ["LIMITS", "InputError", "check_input", "limit_of", "read_input", "read_input_text"]

STDIN = "-"

_MiB = 1024 * 1024

# The size limit of each kind of file nhbench reads, in bytes, and why (docs/reliability.md
# renders this table; tests/test_input_files.py checks every option that names a file).
LIMITS: dict[str, tuple[int, str]] = {
    "result": (64 * _MiB, "A result of a long run with per-worker statistics and "
               "an HdrHistogram per statistic is a few MB; loading one costs 10-30 times its "
               "size in memory, so 64 MiB keeps a load under about 2 GB (the same bound as "
               "the result browser's)."),
    "payload": (64 * _MiB, "A request body is held in memory once per run; the test server's "
                "default --max-body-bytes is 64 MiB, so a larger body is refused there anyway."),
    "grpc-payload": (4 * _MiB, "gRPC's default receive limit (grpc-go, grpc-java, grpcio "
                     "and the test server): a larger message is RESOURCE_EXHAUSTED at any "
                     "default server."),
    "replay": (256 * _MiB, "A HAR file or an access log is parsed into a request list "
               "(a few hundred bytes per request in memory); 256 MiB is about a million "
               "recorded requests."),
    "options-list": (1 * _MiB, "Nighthawk's own limit for an options-list file (its "
                     "file-based request source reads at most 1 MB)."),
    "config": (4 * _MiB, "A test-server config or an Envoy bootstrap is a few KB; 4 MiB "
               "leaves room for large static response bodies."),
    "scenario": (1 * _MiB, "A sweep scenario is a page of YAML."),
    "pem": (1 * _MiB, "A certificate chain or a key is a few KB; 1 MiB holds hundreds of "
            "certificates."),
    "known-hosts": (16 * _MiB, "An OpenSSH known_hosts file is about 100 bytes a host; "
                    "16 MiB is over 100,000 hosts."),
    "baseline": (64 * _MiB, "A pytest baseline holds the results of one test (the result "
                 "limit)."),
}

_KINDS = (
    (stat.S_ISDIR, "is a directory"),
    (stat.S_ISFIFO, "is a FIFO (named pipe), not a regular file"),
    (stat.S_ISCHR, "is a character device, not a regular file"),
    (stat.S_ISBLK, "is a block device, not a regular file"),
    (stat.S_ISSOCK, "is a socket, not a regular file"),
)


class InputError(ValueError):
    """A file could not be read. ``str()`` is one line: ``"<where>: <reason>"``."""

    def __init__(self, where: str, reason: str, path: str | None = None) -> None:
        super().__init__(f"{where}: {reason}")
        self.where = where
        self.reason = reason
        self.path = path


def limit_of(kind: str) -> int:
    return LIMITS[kind][0]


def _reason(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "too many levels of symbolic links"
    if exc.errno == errno.ENOENT:
        return "no such file"
    return exc.strerror or str(exc)


def _size(n: int) -> str:
    return f"{n // _MiB} MiB" if n % _MiB == 0 else f"{n} bytes"


def _open(name: str, where: str) -> int:
    if not name:
        raise InputError(where, "must be a file path (got an empty string)")
    if "\0" in name:
        raise InputError(where, "must not contain a NUL character")
    try:
        return os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise InputError(where, _reason(exc), name) from None


def _check_kind(fd: int, where: str, name: str, limit: int) -> os.stat_result:
    st = os.fstat(fd)
    for test, reason in _KINDS:
        if test(st.st_mode):
            raise InputError(where, reason, name)
    if not stat.S_ISREG(st.st_mode):
        raise InputError(where, "is not a regular file", name)
    if st.st_size > limit:
        raise InputError(where, f"{st.st_size} bytes is over the limit of {_size(limit)}", name)
    return st


def _read_bounded(handle: BinaryIO | int, where: str, name: str | None, limit: int) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while True:
        want = min(1 * _MiB, limit + 1 - total)
        chunk = os.read(handle, want) if isinstance(handle, int) else handle.read(want)
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            raise InputError(where, f"over the limit of {_size(limit)}", name)
    return b"".join(chunks)


def _expand(path: str | os.PathLike[str]) -> str:
    text = os.fspath(path)
    if not isinstance(text, str):
        text = os.fsdecode(text)
    return text if text == STDIN else os.path.expanduser(text)


def read_input(path: str | os.PathLike[str], kind: str, where: str | None = None, *,
               stdin: bool = False, limit: int | None = None) -> bytes:
    """The bytes of the regular file at `path`, at most `LIMITS[kind]` of them (or `limit`,
    which may only lower it: an options list's own ``max_file_size``).

    `where` starts the one-line message of an `InputError` (default: the path). With `stdin`,
    ``-`` reads standard input under the same limit.
    """
    limit = limit_of(kind) if limit is None else min(limit, limit_of(kind))
    name = _expand(path)
    where = where or repr(name)
    if stdin and name == STDIN:
        return _read_bounded(sys.stdin.buffer, where, None, limit)
    fd = _open(name, where)
    try:
        _check_kind(fd, where, name, limit)
        os.set_blocking(fd, True)
        try:
            return _read_bounded(fd, where, name, limit)
        except OSError as exc:
            raise InputError(where, f"cannot read: {_reason(exc)}", name) from None
    finally:
        os.close(fd)


def read_input_text(path: str | os.PathLike[str], kind: str, where: str | None = None, *,
                    stdin: bool = False, limit: int | None = None,
                    encoding: str = "utf-8") -> str:
    """`read_input` decoded as `encoding` (UTF-8 by default); undecodable bytes are an
    `InputError` naming the first bad byte and its offset."""
    data = read_input(path, kind, where, stdin=stdin, limit=limit)
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        label = "UTF-8" if encoding.lower().replace("-", "") == "utf8" else encoding
        raise InputError(where or repr(_expand(path)),
                         f"not {label} text (byte 0x{exc.object[exc.start]:02x} at offset "
                         f"{exc.start})", _expand(path)) from None


def check_input(path: str | os.PathLike[str], kind: str, where: str | None = None) -> str:
    """Check without reading that `path` is a regular file within its kind's limit and can be
    opened; returns the path (``~`` expanded). For options checked when they are validated
    and read later (a run's payload files)."""
    limit = limit_of(kind)
    name = _expand(path)
    where = where or repr(name)
    fd = _open(name, where)
    try:
        _check_kind(fd, where, name, limit)
    finally:
        os.close(fd)
    return name
