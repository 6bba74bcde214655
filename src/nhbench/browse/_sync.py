"""Pulling results from a peer: ``nhbench browse --sync URL`` (Fortio's ``-sync URL`` and
``-sync-interval``). `sync_results` reads a listing and stores the result files it names in
a directory; `SyncLoop` repeats it on a thread.

The listing is either an ``index.tsv`` in Google's transfer list format (what Fortio and
`nhbench.browse`'s ``/data/index.tsv`` serve: ``TsvHttpData-1.0`` then
``URL<TAB>size<TAB>base64 MD5`` lines) or an S3/GCS bucket's XML listing
(``ListBucketResult``: ``Contents/Key``, ``Contents/Size``; ``IsTruncated`` and
``NextMarker`` page it), as Fortio reads them (ui/uihandler.go). A file is named by the last
component of its URL (of its key), as in Fortio.

What differs from Fortio, each for safety (docs/outputs.md, "Sharing results"):

* Only ``http`` and ``https``; by default only the listing's own origin (scheme, host and
  port): a listing cannot make this machine fetch from other hosts (an index is data from
  the peer, and following it anywhere makes the syncing machine a proxy into its own
  network: server-side request forgery). ``any_host=True`` follows Fortio (any http/https
  URL), for an index whose URLs name another host (a ``-base-url`` behind an ingress).
  Redirects are followed under the same rule, at most `MAX_REDIRECTS`.
* Names must be safe result names (`nhbench.browse._data.safe_result_name`): ``../x``,
  ``.hidden.json``, a name with a control character or not ending in ``.json`` is skipped.
* The size and MD5 an index gives are checked (Fortio ignores them); a file whose body
  is longer than announced is cut off at once, not read to the end.
* Bounded: the listing (`MAX_LISTING_BYTES`, `MAX_ENTRIES`, `MAX_PAGES` of a bucket),
  each file (the result limit of `nhbench._input.LIMITS`), the bytes stored in one sync
  (`MAX_SYNC_BYTES`), each request (`TIMEOUT` per connect or read, `FILE_DEADLINE` in all:
  a server trickling a byte at a time is cut off), the whole sync (`SYNC_DEADLINE`).
* A file is stored atomically (written to a hidden temporary file, then linked to its name,
  which fails if the name exists): a reader never sees half a file, and an existing file is
  never replaced. A file of the same name that differs from the listing's MD5 is a conflict,
  counted and kept as it is (Fortio skips any existing name without looking).
* It must start like a JSON object (``{``): an error page served with status 200 is not
  stored as a result.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import http.client
import os
import secrets
import socket
import ssl
import sys
import threading
import time
import xml.parsers.expat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import SplitResult, quote, unquote, urljoin, urlsplit

from .._exceptions import SyncError
from .._format import printable
from .._input import limit_of
from ._data import TSV_HEADER, safe_result_name

__all__ = [
    "FILE_DEADLINE",
    "MAX_ENTRIES",
    "MAX_LISTING_BYTES",
    "MAX_PAGES",
    "MAX_REDIRECTS",
    "MAX_SYNC_BYTES",
    "SYNC_DEADLINE",
    "TIMEOUT",
    "SyncError",
    "SyncLoop",
    "SyncReport",
    "sync_results",
]

#: Bytes of one listing (one page of a bucket). Fortio's index is about 100 bytes a file,
#: so 8 MiB is far more than `MAX_ENTRIES` lines; a bucket page is at most 1000 keys.
MAX_LISTING_BYTES = 8 * 1024 * 1024
#: Files named in one sync, over every page of a bucket listing (the browser's walk limit).
MAX_ENTRIES = 5000
#: Pages of a bucket listing followed (Fortio stops after about 100 too).
MAX_PAGES = 100
#: Redirects followed for one URL: a loop ends here.
MAX_REDIRECTS = 5
#: Bytes stored in one sync: a peer cannot fill the disk (MAX_ENTRIES files of the result
#: limit would be 320 GB). The next sync fetches what this one left.
MAX_SYNC_BYTES = 1024 * 1024 * 1024
#: Seconds a connection or one read may wait.
TIMEOUT = 10.0
#: Seconds one request (listing page or file) may take in all.
FILE_DEADLINE = 60.0
#: Seconds one whole sync may take; what is left is fetched by the next one.
SYNC_DEADLINE = 600.0

_ACCEPTED_STATUS = 200
_TEMPORARY = ".nhbench-sync-"
_REDIRECTS = (301, 302, 303, 307, 308)


@dataclass
class SyncReport:
    """What one sync did, by file."""

    #: Files fetched, checked and stored.
    fetched: int = 0
    #: Files already here with the same content (or no MD5 to compare: Fortio's rule).
    present: int = 0
    #: Files already here whose content differs from the listing's MD5: kept as they are.
    conflicts: int = 0
    #: Entries not fetched by rule: not a safe result name, another host, not http(s).
    skipped: int = 0
    #: Entries whose fetch or check failed (one line each in `problems`).
    failed: int = 0
    #: Bytes stored.
    bytes: int = 0
    #: One line per skipped, conflicting or failed entry (at most the first 100).
    problems: list[str] = field(default_factory=list)

    def note(self, line: str) -> None:
        if len(self.problems) < 100:
            # Names, URLs and reasons come from the peer: nothing may drive a terminal.
            self.problems.append(printable(line))

    def summary(self) -> str:
        return (f"{self.fetched} fetched, {self.present} already present, "
                f"{self.conflicts} conflicting, {self.skipped} skipped, {self.failed} failed")


@dataclass(frozen=True)
class _Entry:
    url: str
    name: str
    size: int | None = None
    md5: bytes | None = None


class _Fetcher:
    """GET over http.client with the limits above, redirects under the origin rule."""

    def __init__(self, origin: tuple[str, str, int], any_host: bool, timeout: float,
                 file_deadline: float, deadline: float,
                 context: ssl.SSLContext | None) -> None:
        self.origin = origin
        self.any_host = any_host
        self.timeout = timeout
        self.file_deadline = file_deadline
        self.deadline = deadline
        self.context = context

    def allowed(self, parts: SplitResult) -> str | None:
        """Why `parts` may not be fetched, or None."""
        if parts.scheme not in ("http", "https"):
            return f"scheme {parts.scheme!r} is not http or https"
        if not parts.hostname:
            return "no host"
        if not self.any_host and _origin(parts) != self.origin:
            return (f"{parts.scheme}://{parts.netloc} is not the listing's host (only it is "
                    "followed)")
        return None

    def get(self, url: str, limit: int) -> bytes:
        """The body of `url` (status 200) of at most `limit` bytes; OSError or ValueError
        with one line otherwise."""
        stop = min(time.monotonic() + self.file_deadline, self.deadline)
        for _ in range(MAX_REDIRECTS + 1):
            parts = urlsplit(url)
            reason = self.allowed(parts)
            if reason is not None:
                raise ValueError(reason)
            location, body = self._once(parts, limit, stop)
            if location is None:
                return body
            url = urljoin(url, location)
        raise ValueError(f"more than {MAX_REDIRECTS} redirects")

    def _once(self, parts: SplitResult, limit: int, stop: float) -> tuple[str | None, bytes]:
        remaining = stop - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("took too long")
        port = parts.port
        timeout = min(self.timeout, remaining)
        connection: http.client.HTTPConnection
        if parts.scheme == "https":
            connection = http.client.HTTPSConnection(
                parts.hostname or "", port, timeout=timeout,
                context=self.context or ssl.create_default_context())
        else:
            connection = http.client.HTTPConnection(parts.hostname or "", port, timeout=timeout)
        # Each read waits at most `timeout`, but a server sending a byte now and then would
        # never time out: at the deadline the socket is shut down under the reads.
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            if connection.sock is not None:
                with contextlib.suppress(OSError):
                    connection.sock.shutdown(socket.SHUT_RDWR)

        timer = threading.Timer(remaining, expire)
        timer.daemon = True
        timer.start()
        try:
            target = parts.path or "/"
            if parts.query:
                target += "?" + parts.query
            connection.request("GET", target, headers={
                "User-Agent": "nhbench-sync", "Accept-Encoding": "identity"})
            response = connection.getresponse()
            if response.status in _REDIRECTS:
                location = response.getheader("Location")
                if not location:
                    raise ValueError(f"status {response.status} without a Location")
                return location, b""
            if response.status != _ACCEPTED_STATUS:
                raise ValueError(f"status {response.status} {response.reason}".rstrip())
            length = response.getheader("Content-Length")
            if length is not None and length.isdigit() and int(length) > limit:
                raise ValueError(f"{int(length)} bytes: more than {limit} bytes")
            chunks: list[bytes] = []
            total = 0
            while chunk := response.read1(min(1 << 16, limit + 1 - total)):
                chunks.append(chunk)
                total += len(chunk)
                if total > limit:
                    raise ValueError(f"more than {limit} bytes")
            if expired.is_set():
                raise TimeoutError("took too long")
            return None, b"".join(chunks)
        except (OSError, http.client.HTTPException, ValueError):
            if expired.is_set():
                raise TimeoutError("took too long") from None
            raise
        finally:
            timer.cancel()
            connection.close()


def _origin(parts: SplitResult) -> tuple[str, str, int]:
    default = 443 if parts.scheme == "https" else 80
    try:
        port = parts.port or default
    except ValueError:
        port = -1
    return parts.scheme, (parts.hostname or "").lower(), port


def _parse_tsv(text: str, report: SyncReport) -> list[_Entry]:
    entries: list[_Entry] = []
    for number, line in enumerate(text.split("\n")[1:], start=2):
        line = line.rstrip("\r")
        if not line.strip():
            continue
        if len(entries) >= MAX_ENTRIES:
            raise SyncError(f"the index lists more than {MAX_ENTRIES} files")
        fields = line.split("\t")
        url = fields[0].strip()
        size: int | None = None
        md5: bytes | None = None
        try:
            if len(fields) > 1 and fields[1].strip():
                if not fields[1].strip().isdigit():
                    raise ValueError(f"size {fields[1]!r} is not a number of bytes")
                size = int(fields[1])
            if len(fields) > 2 and fields[2].strip():
                md5 = base64.b64decode(fields[2].strip(), validate=True)
                if len(md5) != 16:
                    raise ValueError("the MD5 is not 16 bytes")
        except ValueError as exc:
            report.failed += 1
            report.note(f"line {number}: {str(exc).splitlines()[0]}")
            continue
        name = unquote(urlsplit(url).path.rsplit("/", 1)[-1])
        entries.append(_Entry(url, name, size, md5))
    return entries


@dataclass
class _Bucket:
    keys: list[tuple[str, int | None]] = field(default_factory=list)
    truncated: bool = False
    next_marker: str = ""


def _parse_bucket(data: bytes) -> _Bucket:
    """A ListBucketResult page. Element names are matched without their namespace (S3's
    and GCS's differ); a document type declaration (entities) is refused."""
    bucket = _Bucket()
    path: list[str] = []
    text: list[str] = []
    current: dict[str, str] = {}

    def start(name: str, attributes: object) -> None:
        path.append(name.rsplit(" ", 1)[-1])
        text.clear()

    def end(name: str) -> None:
        local = path.pop()
        value = "".join(text)
        text.clear()
        if path == ["ListBucketResult", "Contents"] and local in ("Key", "Size"):
            current[local] = value
        elif path == ["ListBucketResult"] and local == "Contents":
            if len(bucket.keys) >= MAX_ENTRIES:
                raise SyncError(f"the bucket listing names more than {MAX_ENTRIES} objects")
            size = current.get("Size", "").strip()
            bucket.keys.append((current.get("Key", ""),
                                int(size) if size.isdigit() else None))
            current.clear()
        elif path == ["ListBucketResult"] and local == "IsTruncated":
            bucket.truncated = value.strip().lower() == "true"
        elif path == ["ListBucketResult"] and local == "NextMarker":
            bucket.next_marker = value

    def characters(data: str) -> None:
        if sum(map(len, text)) < 4096:
            text.append(data)

    def doctype(*_: object) -> None:
        raise SyncError("the listing declares a document type (entities are not read)")

    parser = xml.parsers.expat.ParserCreate(namespace_separator=" ")
    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = characters
    parser.StartDoctypeDeclHandler = doctype
    parser.EntityDeclHandler = doctype
    try:
        parser.Parse(data, True)
    except xml.parsers.expat.ExpatError as exc:
        raise SyncError(f"neither a TsvHttpData-1.0 index nor a bucket listing: XML error "
                        f"{exc}") from None
    return bucket


def _listing(fetcher: _Fetcher, url: str, report: SyncReport) -> list[_Entry]:
    try:
        data = fetcher.get(url, MAX_LISTING_BYTES)
    except (OSError, ValueError, http.client.HTTPException) as exc:
        raise SyncError(f"cannot fetch the listing {url}: {_reason(exc)}") from None
    text = data.decode("utf-8", errors="replace").strip()
    if text.startswith(TSV_HEADER):
        return _parse_tsv(text, report)
    entries: list[_Entry] = []
    base = urlsplit(url)
    page_url = url
    markers: set[str] = set()
    for _ in range(MAX_PAGES):
        bucket = _parse_bucket(data)
        for key, size in bucket.keys:
            if len(entries) >= MAX_ENTRIES:
                raise SyncError(f"the bucket listing names more than {MAX_ENTRIES} objects")
            # The object's URL is the bucket's (the listing's path) and its key.
            object_url = base._replace(path=base.path.rstrip("/") + "/" + quote(key),
                                       query="", fragment="").geturl()
            entries.append(_Entry(object_url, key.rsplit("/", 1)[-1], size, None))
        if not bucket.truncated and not bucket.next_marker:
            return entries
        marker = bucket.next_marker or (bucket.keys[-1][0] if bucket.keys else "")
        if not marker:
            raise SyncError("the bucket listing is truncated but names no marker to go on from")
        if marker in markers:
            raise SyncError(f"the bucket listing repeats its marker {marker!r}")
        markers.add(marker)
        query = "&".join(p for p in base.query.split("&") if p and not p.startswith("marker="))
        query = (query + "&" if query else "") + "marker=" + quote(marker, safe="")
        page_url = base._replace(query=query, fragment="").geturl()
        try:
            data = fetcher.get(page_url, MAX_LISTING_BYTES)
        except (OSError, ValueError, http.client.HTTPException) as exc:
            raise SyncError(f"cannot fetch the listing {page_url}: {_reason(exc)}") from None
    raise SyncError(f"the bucket listing has more than {MAX_PAGES} pages")


def _reason(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError) or isinstance(exc, OSError) and "timed out" in str(exc):
        return "timed out"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text


def _md5_of(directory: int, name: str, limit: int) -> bytes | None:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     dir_fd=directory)
    except OSError:
        return None
    try:
        digest = hashlib.md5(usedforsecurity=False)
        total = 0
        while chunk := os.read(fd, 1 << 20):
            digest.update(chunk)
            total += len(chunk)
            if total > limit:
                return None
        return digest.digest()
    except OSError:
        return None
    finally:
        os.close(fd)


def _store(directory: int, name: str, body: bytes) -> bool:
    """Write `body` as `name` in the directory open as `directory`, atomically and never over
    an existing file: False when the name exists."""
    temporary = f"{_TEMPORARY}{secrets.token_hex(8)}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o666, dir_fd=directory)  # the umask applies, as to every file nhbench writes
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(body)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(temporary, name, src_dir_fd=directory, dst_dir_fd=directory,
                    follow_symlinks=False)
        except FileExistsError:
            return False
        return True
    finally:
        try:
            os.unlink(temporary, dir_fd=directory)
        except FileNotFoundError:
            pass


def _remove_stale(directory: int) -> None:
    """Remove the temporary files of a sync that was killed while storing (a store takes
    seconds; one older than `SYNC_DEADLINE` belongs to no running sync)."""
    too_old = time.time() - SYNC_DEADLINE
    with contextlib.suppress(OSError), os.scandir(directory) as entries:
        for entry in entries:
            if entry.name.startswith(_TEMPORARY) and entry.name.endswith(".tmp"):
                with contextlib.suppress(OSError):
                    if entry.stat(follow_symlinks=False).st_mtime < too_old:
                        os.unlink(entry.name, dir_fd=directory)


def sync_results(url: str, directory: str | os.PathLike[str], *, any_host: bool = False,
                 timeout: float = TIMEOUT, file_deadline: float = FILE_DEADLINE,
                 deadline: float = SYNC_DEADLINE, max_bytes: int = MAX_SYNC_BYTES,
                 context: ssl.SSLContext | None = None) -> SyncReport:
    """Fetch the result files the listing at `url` names into `directory`.

    `url` is an ``index.tsv`` (``TsvHttpData-1.0``) or an S3/GCS bucket's XML listing, over
    http or https. Returns the counts (`SyncReport`); raises ValueError for a `url` that is
    not http(s) or a `directory` that is not one, and `SyncError` (one line) when the
    listing cannot be fetched or read. A file that fails is counted, never raised.
    """
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url!r} is not an http:// or https:// URL")
    try:
        parts.port  # noqa: B018 - a malformed port raises here
    except ValueError as exc:
        raise ValueError(f"{url!r}: {exc}") from None
    try:
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise ValueError(f"{str(directory)!r} is not a directory: "
                         f"{exc.strerror or exc}") from None
    _remove_stale(dir_fd)
    limit = limit_of("result")
    stop = time.monotonic() + deadline
    fetcher = _Fetcher(_origin(parts), any_host, timeout, file_deadline, stop, context)
    report = SyncReport()
    try:
        for entry in _listing(fetcher, parts.geturl(), report):
            _one(fetcher, dir_fd, entry, limit, max_bytes, stop, report)
        if report.fetched:
            os.fsync(dir_fd)  # the new names, once for all of them
    finally:
        os.close(dir_fd)
    return report


def _one(fetcher: _Fetcher, dir_fd: int, entry: _Entry, limit: int, max_bytes: int,
         stop: float, report: SyncReport) -> None:
    shown = entry.url if len(entry.url) <= 200 else entry.url[:200] + "..."
    if not safe_result_name(entry.name):
        report.skipped += 1
        report.note(f"{shown!r}: {entry.name!r} is not a result file name (letters, digits "
                    "and ._+=@,- ending in .json)")
        return
    parts = urlsplit(entry.url)
    reason = fetcher.allowed(parts)
    if reason is not None:
        report.skipped += 1
        report.note(f"{shown!r}: {reason}")
        return
    try:
        os.stat(entry.name, dir_fd=dir_fd, follow_symlinks=False)
        exists = True
    except FileNotFoundError:
        exists = False
    except OSError as exc:
        report.failed += 1
        report.note(f"{entry.name}: cannot check the local file: {exc.strerror or exc}")
        return
    if exists:
        if entry.md5 is not None and _md5_of(dir_fd, entry.name, limit) != entry.md5:
            report.conflicts += 1
            report.note(f"{entry.name}: a different file of this name is here; kept")
        else:
            report.present += 1
        return
    problem = None
    expected = limit if entry.size is None else entry.size
    if entry.size is not None and entry.size > limit:
        problem = f"{entry.size} bytes announced, over the result limit of {limit}"
    elif report.bytes + expected > max_bytes:
        problem = f"this sync already stored {report.bytes} bytes (limit {max_bytes})"
    elif time.monotonic() >= stop:
        problem = "the sync took too long; left for the next one"
    if problem is not None:
        report.failed += 1
        report.note(f"{entry.name}: {problem}")
        return
    try:
        body = fetcher.get(entry.url, min(expected, max_bytes - report.bytes))
    except (OSError, ValueError, http.client.HTTPException) as exc:
        report.failed += 1
        report.note(f"{entry.name}: {shown}: {_reason(exc)}")
        return
    if entry.size is not None and len(body) != entry.size:
        problem = f"{len(body)} bytes received, {entry.size} announced"
    elif entry.md5 is not None and hashlib.md5(body, usedforsecurity=False).digest() \
            != entry.md5:
        problem = "its MD5 is not the one announced"
    elif not body.lstrip()[:1] == b"{":
        problem = "not a JSON object"
    if problem is not None:
        report.failed += 1
        report.note(f"{entry.name}: {problem}; not stored")
        return
    try:
        stored = _store(dir_fd, entry.name, body)
    except OSError as exc:
        report.failed += 1
        report.note(f"{entry.name}: cannot store: {exc.strerror or exc}")
        return
    if stored:
        report.fetched += 1
        report.bytes += len(body)
    else:
        report.present += 1  # appeared meanwhile (another sync): kept as it is


class SyncLoop:
    """`sync_results` every `interval` seconds on a daemon thread until `stop`; each
    sync's outcome goes to `on_report` (the report or the SyncError/ValueError), by default
    one line on stderr."""

    def __init__(self, url: str, directory: str | os.PathLike[str], interval: float, *,
                 any_host: bool = False,
                 on_report: Callable[[SyncReport | Exception], None] | None = None) -> None:
        if not interval > 0:
            raise ValueError(f"the sync interval must be more than 0 seconds, not {interval}")
        self.url = url
        self.directory = Path(directory)
        self.interval = interval
        self.on_report = on_report or _print_report
        self.any_host = any_host
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="nhbench-sync", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                outcome: SyncReport | Exception = sync_results(
                    self.url, self.directory, any_host=self.any_host)
            except Exception as exc:  # noqa: BLE001 - the loop must outlive one bad sync
                outcome = exc
            self.on_report(outcome)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None


def _print_report(outcome: SyncReport | Exception) -> None:
    if isinstance(outcome, Exception):
        sys.stderr.write(f"nhbench browse: sync: {printable(str(outcome))}\n")
        return
    sys.stderr.write(f"nhbench browse: sync: {outcome.summary()}\n")
    for line in outcome.problems:
        sys.stderr.write(f"nhbench browse: sync: {line}\n")
