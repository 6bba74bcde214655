"""The one file writer of nhbench: every file written at a path a user gave goes through here.

That covers ``nhbench run --output``, ``nhbench server --address-file`` and ``--tls-ca-out``,
the campaign files of a sweep, its reports, and the captures fetched from a host. One set of
rules, so that no option can do what another refuses (docs/reliability.md, "Files nhbench
writes"):

* ``-`` is standard output.
* A FIFO or a character device (``/dev/null``, a terminal, ``mkfifo`` pipes) is opened for
  writing and the data is streamed into it. It is never replaced and never removed: replacing
  ``/dev/null`` by a regular file, as root, would break every program on the machine.
  The descriptor paths ``/dev/stdout``, ``/dev/stderr``, ``/dev/fd/N`` and
  ``/proc/self/fd/N`` are streamed into too (opened for appending), whatever they refer to,
  so that ``--output /dev/stdout > file`` behaves like the shell redirection it stands for.
* A symbolic link is followed: the file it finally points to is written by these rules, in
  that file's own directory, and the link stays a link. A dangling link creates its target.
* A regular file, or a path where nothing exists, is written atomically: a temporary file in
  the same directory, the data, fsync, rename over the path, fsync of the directory. A reader
  sees the old file or the complete new one, never half of one, and on any failure the
  temporary file is removed and the path is left as it was.
* Permissions: a new file gets exactly what ``open()`` would give it (the temporary file is
  created with mode 0666 and the kernel applies the umask and any default ACL). An existing
  file keeps its permission bits, and its owner and group where the process may set them.
  An existing file the process may not write is refused, as a shell redirection would.
  (Before this module the package had three rules: 0644 for the server's files, 0666 minus
  the umask read at import for campaigns, and the umask read at each write for ``--output``.)
* A directory, a block device and a socket are refused.

Errors are `OutputError` (an OSError) whose message is one line naming the path and the
reason; `check_output_path` finds the ones that can be found before the data exists (a
missing or read-only directory, a directory at the path, a directory where no file can be
created, which it tries) so that a command can refuse its input before it starts any work.

A file is never deleted unless this process created it: `write_output` returns a `Written`
record, and `remove_written` unlinks the path only if nothing existed there before the write
and the path still holds the file that was written (same ``st_dev`` and ``st_ino``, and
same size and modification time, since a freed inode number is reused at once).

API: `write_output` (text or bytes), `write_text`, `write_bytes`, `atomic_writer` (a context
manager for writers that produce their data piecewise), `check_output_path`,
`remove_written`, `same_output`.
"""

from __future__ import annotations

import errno
import io
import os
import re
import secrets
import stat
import sys
from dataclasses import dataclass
from types import TracebackType
from typing import IO, Any

__all__ = [
    "OutputError",
    "Written",
    "atomic_writer",
    "check_output_path",
    "fsync_directory",
    "remove_written",
    "same_output",
    "write_bytes",
    "write_output",
    "write_text",
]

STDOUT = "-"

# Paths that name one of this process's open descriptors rather than a file of their own.
_DESCRIPTOR_PATH = re.compile(r"/dev/(stdout|stderr|fd/\d+)|/proc/(self|thread-self|\d+)/fd/\d+")


class OutputError(OSError):
    """A file could not be written. ``str()`` is one line naming the path and the reason."""

    def __init__(self, path: str, reason: str, errno_: int | None = None, *,
                 message: str | None = None) -> None:
        super().__init__(errno_ or 0, reason, path)
        self.path = path
        self.reason = reason
        self.message = message or f"cannot write {path!r}: {reason}"

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class Written:
    """What a write did: `path` is the file written (a symbolic link resolved), `created`
    whether nothing existed at the path before, `identity` the (st_dev, st_ino) of the file
    written, or None when the data was streamed (stdout, a FIFO, a device). `stamp` is its
    (st_size, st_mtime_ns): file systems hand a freed inode number to the next new file at
    once, so a file deleted and written again by someone else can have the same identity."""

    path: str
    created: bool
    identity: tuple[int, int] | None
    stamp: tuple[int, int] | None = None


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _expand(path: str | os.PathLike[str]) -> str:
    text = os.fspath(path)
    if not isinstance(text, str):
        text = os.fsdecode(text)
    if text == STDOUT:
        return text
    return os.path.expanduser(text)


def _is_descriptor_path(path: str) -> bool:
    match = _DESCRIPTOR_PATH.fullmatch(path)
    if match is None:
        return False
    pid = match.group(2)
    return pid is None or not pid.isdigit() or int(pid) == os.getpid()


# The plan for one path: ("stdout", path), ("stream", path) or ("atomic", real path).
def _plan(path: str) -> tuple[str, str]:
    if path == STDOUT:
        return "stdout", path
    if not path.strip():
        raise ValueError("must be a file path (got an empty string)")
    if "\0" in path:
        raise ValueError(f"must not contain a NUL character (got {path!r})")
    if path.endswith("/") and not os.path.isdir(path):
        # A trailing slash names a directory; writing a file without it would surprise.
        raise ValueError(f"{path!r} ends with '/' but is not a directory; name a file")
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except NotADirectoryError:
        raise ValueError(f"{path!r}: a component of the path is not a directory") from None
    except OSError as exc:
        raise ValueError(f"cannot use {path!r}: {_reason(exc)}") from None
    if st is not None:
        mode = st.st_mode
        if stat.S_ISDIR(mode):
            raise ValueError(f"{path!r} is a directory")
        if stat.S_ISBLK(mode):
            raise ValueError(f"{path!r} is a block device; nhbench does not write to it")
        if stat.S_ISSOCK(mode):
            raise ValueError(f"{path!r} is a socket")
        if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or _is_descriptor_path(path):
            if not os.access(path, os.W_OK):
                raise ValueError(f"{path!r} is not writable")
            return "stream", path
        if not stat.S_ISREG(mode):
            raise ValueError(f"{path!r} is not a regular file")
        if not os.access(path, os.W_OK):
            raise ValueError(f"{path!r} is not writable")
    elif _is_descriptor_path(path):
        raise ValueError(f"{path!r} is not an open descriptor")
    # A regular file or nothing: written atomically where the symbolic links (if any) lead.
    real = os.path.realpath(path)
    directory = os.path.dirname(real) or "."
    if not os.path.isdir(directory):
        given = os.path.dirname(path) or "."
        if os.path.isdir(given):
            # The directory named exists: symbolic links led somewhere that does not.
            raise ValueError(f"{path!r} is a symbolic link to {real!r}, whose directory "
                             f"does not exist")
        if os.path.lexists(given):
            raise ValueError(f"{given!r} is not a directory")
        raise ValueError(f"directory {given!r} does not exist")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise ValueError(f"directory {directory!r} is not writable")
    return "atomic", real


def check_output_path(path: str | os.PathLike[str]) -> str:
    """Check that `path` can be written by the rules of this module without writing it.

    Returns the path (``~`` expanded). Raises ValueError with a one-line reason that does
    not repeat the option name (callers put it in front): a missing or unwritable
    directory, a directory, a block device or a socket at the path, a file that may not be
    written, a directory where no file can be created (a temporary file is created there
    and removed, as the write will: this catches sysfs and the like even as root). What
    only the write itself can find out (a full disk) is left to it.
    """
    expanded = _expand(path)
    kind, target = _plan(expanded)
    if kind == "atomic":
        _probe_directory(os.path.dirname(target) or ".")
    return expanded


def same_output(first: str | os.PathLike[str], second: str | os.PathLike[str]) -> bool:
    """Whether writing `first` and `second` would write one file (one output replacing
    the other): the same path once symbolic links are resolved, the same existing file by
    another name (a hard link: same st_dev and st_ino), or ``-`` twice. A character device
    (``/dev/null``, a terminal) takes any number of writers and is never the same output."""
    a, b = _expand(first), _expand(second)
    if STDOUT in (a, b):
        return a == b
    try:
        sa, sb = os.stat(a), os.stat(b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)
    if stat.S_ISCHR(sa.st_mode):
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def _probe_directory(directory: str) -> None:
    # The write creates a temporary file in the directory; creating (and removing) one now
    # is the only check that holds for root, for whom access() says yes wherever the mode
    # bits would: sysfs, cgroupfs and other pseudo file systems, an immutable directory or a
    # full inode table refuse the creation itself, after the run otherwise.
    temporary = os.path.join(directory, f".nhbench-check.{secrets.token_hex(4)}.tmp")
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                     | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise ValueError(f"cannot create a file in directory {directory!r}: "
                         f"{_reason(exc)}") from None
    os.close(fd)
    try:
        os.unlink(temporary)
    except OSError:
        pass


class atomic_writer:  # named like a function: ``with atomic_writer(path) as handle``
    """Context manager: ``with atomic_writer(path) as handle: handle.write(...)``.

    The handle is a text file (UTF-8) or, with ``binary=True``, a binary one. The data
    becomes visible at `path` when the block ends without an exception (by the module's
    rules: renamed into place atomically, or streamed); an exception discards it. Afterwards
    `written` says what was written (see `Written`). Errors raise `OutputError`.
    """

    def __init__(self, path: str | os.PathLike[str], *, binary: bool = False) -> None:
        self.path = _expand(path)
        self.binary = binary
        self.written: Written | None = None
        self._handle: IO[Any] | None = None
        self._kind = ""
        self._target = ""
        self._temporary: str | None = None
        self._existing: os.stat_result | None = None

    # ---- opening --------------------------------------------------------------------------

    def __enter__(self) -> IO[Any]:
        try:
            self._kind, self._target = _plan(self.path)
        except ValueError as exc:
            reason = str(exc)
            named = repr(self.path) in reason
            raise OutputError(self.path, reason, message=reason if named else None) from None
        try:
            if self._kind == "stdout":
                sys.stdout.flush()
                raw: Any = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
            elif self._kind == "stream":
                raw = os.fdopen(self._open_stream(), "wb")
            else:
                raw = os.fdopen(self._open_temporary(), "wb")
        except OSError as exc:
            self._discard()
            raise OutputError(self.path, _reason(exc), exc.errno) from None
        self._handle = raw if self.binary else io.TextIOWrapper(raw, encoding="utf-8",
                                                                 newline="")
        return self._handle

    def _open_stream(self) -> int:
        # O_APPEND: a descriptor path that refers to a regular file (stdout redirected with
        # >> or >) continues it rather than overwriting it from the start; on a FIFO or a
        # device it changes nothing. Opening a FIFO blocks until a reader opens it, exactly as
        # a shell redirection does.
        flags = os.O_WRONLY | os.O_APPEND | os.O_NOCTTY | os.O_CLOEXEC
        fd = os.open(self._target, flags)
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode) or stat.S_ISBLK(mode):
            os.close(fd)
            raise OSError(errno.EINVAL, "changed into a directory or block device while opening")
        return fd

    def _open_temporary(self) -> int:
        target = self._target
        try:
            self._existing = os.stat(target)
        except FileNotFoundError:
            self._existing = None
        directory, name = os.path.split(target)
        # Mode 0666 and O_EXCL: the kernel applies the umask (and a default ACL) exactly as
        # it would to a new file, without reading the process-wide umask, which cannot be
        # read without setting it and so is not safe with threads.
        for _ in range(100):
            temporary = os.path.join(directory, f".{name}.{secrets.token_hex(4)}.tmp")
            try:
                fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                             | os.O_CLOEXEC, 0o666)
            except FileExistsError:
                continue
            self._temporary = temporary
            break
        else:
            raise OSError(errno.EEXIST, "no free temporary file name in its directory")
        existing = self._existing
        if existing is not None:
            if (existing.st_uid, existing.st_gid) != (os.geteuid(), os.getegid()):
                try:
                    os.fchown(fd, existing.st_uid, existing.st_gid)
                except PermissionError:
                    pass
            # After the chown, which clears set-id bits.
            os.fchmod(fd, stat.S_IMODE(existing.st_mode))
        return fd

    # ---- closing --------------------------------------------------------------------------

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        handle, self._handle = self._handle, None
        if exc_type is not None:
            self._close_quietly(handle)
            self._discard()
            return
        try:
            self._commit(handle)
        except OSError as error:
            self._close_quietly(handle)
            self._discard()
            if isinstance(error, OutputError):
                raise
            raise OutputError(self.path, _reason(error), error.errno) from None
        except BaseException:
            self._close_quietly(handle)
            self._discard()
            raise

    def _commit(self, handle: IO[Any] | None) -> None:
        assert handle is not None
        handle.flush()
        if self._kind != "atomic":
            handle.close()
            self.written = Written(self._target, created=False, identity=None)
            return
        fileno = handle.fileno()
        os.fsync(fileno)
        st = os.fstat(fileno)
        handle.close()
        assert self._temporary is not None
        created = not os.path.lexists(self._target)
        os.replace(self._temporary, self._target)
        self._temporary = None
        fsync_directory(os.path.dirname(self._target) or ".")
        self.written = Written(self._target, created=created, identity=(st.st_dev, st.st_ino),
                               stamp=(st.st_size, st.st_mtime_ns))

    @staticmethod
    def _close_quietly(handle: IO[Any] | None) -> None:
        if handle is None:
            return
        try:
            handle.close()
        except (OSError, ValueError):
            pass

    def _discard(self) -> None:
        temporary, self._temporary = self._temporary, None
        if temporary is not None:
            try:
                os.unlink(temporary)
            except OSError:
                pass


def fsync_directory(directory: str) -> None:
    """Make a new directory entry (a rename or link into `directory`) durable."""
    # The rename is durable only once the directory entry is on disk too. Some file systems
    # refuse to fsync a directory; the file is in place by then, so that is not an error.
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_output(path: str | os.PathLike[str], data: str | bytes) -> Written:
    """Write `data` (text is UTF-8) to `path` by the module's rules; see `Written`."""
    binary = isinstance(data, (bytes, bytearray, memoryview))
    writer = atomic_writer(path, binary=binary)
    with writer as handle:
        try:
            handle.write(data)
        except OSError as exc:
            # A full disk or a device refusing data shows here, before the commit.
            raise OutputError(writer.path, _reason(exc), exc.errno) from None
    assert writer.written is not None
    return writer.written


def write_text(path: str | os.PathLike[str], text: str) -> Written:
    """`write_output` for text (UTF-8)."""
    return write_output(path, str(text))


def write_bytes(path: str | os.PathLike[str], data: bytes) -> Written:
    """`write_output` for bytes."""
    return write_output(path, bytes(data))


def remove_written(written: Written | None) -> bool:
    """Unlink the file `written` describes if this process created it and it is still the
    same file (st_dev and st_ino); anything else is left alone. True if it was removed."""
    if written is None or not written.created or written.identity is None:
        return False
    try:
        st = os.lstat(written.path)
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != written.identity:
        return False
    if written.stamp is not None and (st.st_size, st.st_mtime_ns) != written.stamp:
        return False
    try:
        os.unlink(written.path)
    except OSError:
        return False
    return True

