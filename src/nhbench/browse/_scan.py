"""What a results directory holds: one `Entry` per result file, campaign directory or file
that could not be read, found by `Catalogue.scan`.

A directory with a ``manifest.json`` is a sweep campaign (`nhbench.campaign`): it is one
entry, its steps are listed on its own page, and the walk does not descend into it. Every
other ``*.json`` file is read with the loader of `nhbench.load_result`, which recognises
nhbench's, Nighthawk's and Fortio's JSON (whichever loaders `nhbench._load.LOADERS` has);
for the list only the part of the file its row shows is loaded and checked
(`Catalogue.summarise`), the rest when the result is opened (`Catalogue.load`). A file the
loader refuses is an entry too, with the loader's one-line reason, so that one bad file
never hides the others. Hidden files and directories (a name starting with ``.``: ``.git``, a virtual
environment) are skipped.

Nothing outside the root is read or listed: every path is resolved (`os.path.realpath`) and
must stay under the root's real path, hidden components included, so a symbolic link to
``/etc``, to ``/proc/self/environ`` or to ``../other`` is neither listed nor served (the
list says how many were skipped). A link that stays inside the root is followed. A file is
opened without following a last-moment link (``O_NOFOLLOW``) and what was opened is checked
again through ``/proc/self/fd``, so a link swapped in between the check and the open is
refused too.

Results are summarised once per version of a file: the summary is cached by path,
modification time, size, status-change time and inode, so that reloading the list after a
new run reads only the new file. The summaries are also kept on disk between browser
processes (`index_path`: under ``$XDG_CACHE_HOME/nhbench/browse/``, ``~/.cache`` by
default, one file per browsed directory, never inside it), so that the first list of a
directory browsed before reads only the files that changed since: any write to a file
changes its status-change time, which no one can set back, so an edited file is read again
even when its size and modification time were kept. An index that cannot be read, from
another nhbench version or for another directory is ignored (and rewritten); one that cannot
be written only costs the next browser the reading. The walk has limits (`MAX_DEPTH`,
`MAX_FILES`, `MAX_FILE_BYTES`) so that pointing the browser at a home directory lists what
it can quickly and says where it stopped.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import os
import stat
import tempfile
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from .._exceptions import CampaignError, ResultFileError
from .._input import limit_of
from .._load import (
    check_result_document,
    parse_result_text,
    read_result_text,
    result_from_document,
)
from .._names import REQUEST_TO_RESPONSE, SCHEDULED_TO_RESPONSE
from .._notebook import result_verdict
from .._version import __version__
from ._quick import quick_fields

if TYPE_CHECKING:
    from .._result import Result, Statistic
    from ..campaign import CampaignManifest

__all__ = [
    "MAX_DEPTH",
    "MAX_FILES",
    "MAX_FILE_BYTES",
    "Catalogue",
    "Entry",
    "Listing",
    "headline_statistic",
    "index_path",
    "percentile",
    "safe_relative",
]

#: Directory levels below the root that are walked. Campaigns and `--output-dir`
#: directories are one or two levels deep; deeper trees are usually something else.
MAX_DEPTH = 6
#: New or changed result files from which one walk reads them in more than one process
#: (`nhbench.browse._pool`), when more than one CPU is usable and idle: below it, starting
#: a reading process (about a third of a second of CPU) would cost more than it saves.
POOL_MIN_FILES = 1000
#: JSON files read in one listing. Each is parsed whole; a few thousand take seconds.
MAX_FILES = 5000
#: A larger file is listed as an error rather than read: results with histograms are tens
#: of kilobytes, a long run's timeline a few megabytes; hundreds of megabytes is not one.
MAX_FILE_BYTES = limit_of("result")
#: Characters of one text field of a list entry (label, URL, reason) that are shown: a
#: result file can carry a label of megabytes, and the list shows thousands of entries.
MAX_FIELD_CHARS = 500

_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC | os.O_NOFOLLOW
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def clip(text: str, limit: int = MAX_FIELD_CHARS) -> str:
    """`text` cut to `limit` characters, saying how many were left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit:,} more characters)"


def sort_time(moment: datetime | None) -> float:
    """Seconds since 1970 for sorting, for any datetime a file can hold: a naive one is
    taken as UTC (``datetime.timestamp`` would ask the C library, which refuses year 1)."""
    if moment is None:
        return 0.0
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    try:
        return (moment - _EPOCH).total_seconds()
    except (OverflowError, ValueError):
        return 0.0


def safe_relative(path: str) -> PurePosixPath | None:
    """`path` (from a URL) as a relative path inside the root, or None when it could leave
    it or names a hidden file: empty, absolute, ``.``/``..`` or hidden components."""
    if not path or path.startswith("/") or "\\" in path or "\x00" in path:
        return None
    parts = path.split("/")
    if any(part in ("", ".", "..") or part.startswith(".") for part in parts):
        return None
    return PurePosixPath(*parts)


def percentile(statistic: Statistic | None, percent: float) -> float | None:
    """`statistic`'s value at `percent`, or None when it has no samples. A statistic without
    an HdrHistogram (Nighthawk's and Fortio's files) answers only at the points its file
    wrote; another point is answered by the next point written above it (Nighthawk writes
    p99.0625, not p99), which is an upper bound, and the result page says so."""
    if statistic is None or statistic.count == 0:
        return None
    try:
        value = statistic.p(percent)
    except ValueError:
        above = [p for p in statistic.percentiles if p.percentile >= percent / 100.0]
        if not above:
            return None
        value = min(above, key=lambda p: p.percentile).value
    return value if math.isfinite(value) else None


def headline_statistic(result: Result) -> tuple[Statistic | None, bool]:
    """The latency a page leads with, and whether it is coordinated-omission-correct:
    ``scheduled_to_response`` when the run recorded it (every nhbench run), else
    ``request_to_response`` (a Nighthawk or Fortio file: those tools measure from the
    actual send)."""
    for stat_id, corrected in ((SCHEDULED_TO_RESPONSE, True), (REQUEST_TO_RESPONSE, False)):
        try:
            statistic = result.stat(stat_id)
        except KeyError:
            continue
        if statistic.count:
            return statistic, corrected
    return None, True



# The statistics a row shows (`headline_statistic`): the only ones its summary keeps.
_HEADLINE_IDS = frozenset((SCHEDULED_TO_RESPONSE, REQUEST_TO_RESPONSE))


def _summary_entry(entry: object, headline: bool) -> object:
    """`entry` (a result entry of a document) with only what a row shows: for the global
    entry (`headline`) its headline statistics and its counters, for another (a worker, a
    host: the row counts workers) its name and durations only. Anything not shaped as
    expected is left as it is, for the loader to refuse."""
    if not isinstance(entry, dict):
        return entry
    kept = dict(entry)
    statistics = kept.get("statistics")
    if isinstance(statistics, list):
        # An id of another type (a list is not hashable) is no headline id either.
        kept["statistics"] = [s for s in statistics if headline and isinstance(s, dict)
                              and isinstance(s.get("id"), str) and s["id"] in _HEADLINE_IDS]
    if not headline and isinstance(kept.get("counters"), list):
        kept["counters"] = []
    outputs = kept.get("user_defined_outputs")
    if isinstance(outputs, list):
        kept["user_defined_outputs"] = [_summary_output(o, headline) for o in outputs]
    return kept


def _summary_output(output: object, headline: bool) -> object:
    # nhbench's extension of an entry: its per-statistic extras (the encoded histograms)
    # cut as the statistics are, and the run's timeline (the bulk of a run with
    # intervals) left out.
    if not isinstance(output, dict):
        return output
    typed = output.get("typed_output")
    value = typed.get("value") if isinstance(typed, dict) else None
    if not isinstance(value, dict):
        return output
    value = dict(value)
    if not headline:
        value.pop("zero_counters", None)
    extras = value.get("statistics")
    if isinstance(extras, dict):
        value["statistics"] = {k: v for k, v in extras.items() if headline and k in _HEADLINE_IDS}
    run = value.get("run")
    if isinstance(run, dict):
        run = dict(run)
        run.pop("timeline", None)
        if "warmup" in run:
            run["warmup"] = _summary_entry(run["warmup"], False)
        value["run"] = run
    return {**output, "typed_output": {**typed, "value": value}}  # type: ignore[dict-item]


def _cuttable(entry: object) -> bool:
    """Whether cutting `entry` to its summary leaves out nothing the loader refuses for its
    shape: every statistic is an object with a text id and every counter an object (the
    cut would drop the others, and the loader refuses a statistic or a counter of another
    shape, naming where it is)."""
    if not isinstance(entry, dict):
        return True
    statistics = entry.get("statistics")
    if isinstance(statistics, list) and not all(
            isinstance(s, dict) and isinstance(s.get("id"), str) for s in statistics):
        return False
    counters = entry.get("counters")
    return not isinstance(counters, list) or all(isinstance(c, dict) for c in counters)


def _run_of(results: object) -> dict[str, Any] | None:
    # nhbench's run facts (their warm-up entry is cut as a worker's is), if an entry has them.
    if not isinstance(results, list):
        return None
    for entry in results:
        outputs = entry.get("user_defined_outputs") if isinstance(entry, dict) else None
        for output in outputs if isinstance(outputs, list) else ():
            typed = output.get("typed_output") if isinstance(output, dict) else None
            value = typed.get("value") if isinstance(typed, dict) else None
            run = value.get("run") if isinstance(value, dict) else None
            if isinstance(run, dict):
                return run
    return None


def summary_document(data: dict[str, object]) -> dict[str, object]:
    """A result document (nhbench's or Nighthawk's, parsed) cut to what a list row shows:
    every entry with its name, counters and durations, the global entry's headline
    statistics, the options and the run's facts; no other statistic, histogram or
    timeline. Loading it gives the row the whole file gives, for a fraction of the work
    (tests/test_browse_scan.py compares the two); what it leaves out is checked when the
    result is opened. A document with a statistic or a counter that is no object (or a
    statistic without a text id) is returned whole, so that the list refuses it with the
    full load's message rather than cutting the fault away."""
    results = data.get("results")
    if isinstance(results, list) and not all(_cuttable(e) for e in results):
        return data  # the whole document, for the loader's own refusal
    run = _run_of(results)
    if run is not None and not _cuttable(run.get("warmup")):
        return data
    summary = dict(data)
    if isinstance(results, list):
        summary["results"] = [_summary_entry(e, isinstance(e, dict) and e.get("name") == "global")
                              for e in results]
    summary.pop("timeline", None)  # nhbench's older shape keeps it at the top
    return summary


@dataclass(frozen=True)
class Entry:
    """One line of the list: a result, a campaign, or a file that could not be read."""

    #: The path relative to the root, with ``/`` separators: the entry's id in URLs.
    path: str
    kind: str  # "result", "campaign" or "error"
    label: str = ""
    time: datetime | None = None
    url: str = ""
    #: Requested rate over all workers; 0 means as fast as possible; None: unknown.
    requested_rps: float | None = None
    achieved_rps: float | None = None
    p50: float | None = None
    p99: float | None = None
    errors: int | None = None
    ok: bool = True
    verdict: str = ""
    #: The validity verdict (docs/trust.md "Validity") of the numbers the row shows (a
    #: campaign: of the step it shows); "" when the file carries none.
    validity: str = ""
    #: Why the file could not be read (kind "error").
    error: str = ""
    #: Campaigns: the finished steps and the status.
    steps: int = 0

    @classmethod
    def from_result(cls, path: str, result: Result) -> Entry:
        latency, _ = headline_statistic(result)
        ok, verdict = result_verdict(result)
        return cls(
            path=path, kind="result", label=clip(", ".join(result.options.label)),
            time=result.timestamp, url=clip(result.options.uri),
            requested_rps=result.requested_rps, achieved_rps=result.achieved_rps,
            p50=percentile(latency, 50), p99=percentile(latency, 99), errors=result.error_count,
            ok=ok, verdict=clip(verdict),
            validity="" if result.validity is None else result.validity.verdict,
        )

    @classmethod
    def from_fields(cls, path: str, fields: dict[str, Any]) -> Entry:
        """The row of `quick_fields`' reading, as `from_result` makes it from a `Result`."""
        latency = fields["latency"]
        return cls(
            path=path, kind="result", label=clip(fields["label"]), time=fields["time"],
            url=clip(fields["url"]), requested_rps=fields["requested_rps"],
            achieved_rps=fields["achieved_rps"], p50=percentile(latency, 50),
            p99=percentile(latency, 99), errors=fields["errors"], ok=fields["ok"],
            verdict=clip(fields["verdict"]), validity=fields["validity"],
        )

    @classmethod
    def from_campaign(cls, path: str, manifest: CampaignManifest) -> Entry:
        steps = manifest.steps
        best = next((s for s in steps if s.index == manifest.highest_passing_step), None)
        shown = best if best is not None else (steps[-1] if steps else None)
        return cls(
            path=path, kind="campaign", label=clip(", ".join(manifest.label)),
            time=manifest.created_at, url=clip(manifest.url),
            requested_rps=shown.requested_rps if shown else None,
            achieved_rps=shown.achieved_rps if shown else None,
            p50=shown.latency.get("p50") if shown else None,
            p99=shown.latency.get("p99") if shown else None,
            errors=sum(s.error_count for s in steps),
            ok=manifest.status in ("completed", "stopped", "running"),
            verdict=f"sweep {manifest.status}, {len(steps)} step{'s' if len(steps) != 1 else ''}",
            steps=len(steps),
            validity=(shown.validity or "") if shown else "",
        )

    @classmethod
    def failed(cls, path: str, reason: str) -> Entry:
        return cls(path=path, kind="error", ok=False, verdict="unreadable", error=clip(reason))


#: The shape of the on-disk index (`index_path`); an index of another shape is ignored.
#: 2: each entry a list of its fields' values (1: an object of them).
INDEX_FORMAT = 2

# What identifies one version of a file: modification time, size, status-change time, inode.
_Key = tuple[int, int, int, int]


def _key(status: os.stat_result) -> _Key:
    return (status.st_mtime_ns, status.st_size, status.st_ctime_ns, status.st_ino)


def index_path(real_root: str) -> Path | None:
    """Where the summaries of the directory `real_root` (a resolved path) are kept between
    browser processes: ``$XDG_CACHE_HOME/nhbench/browse/<hash of the path>.json`` (the
    XDG base directory rule: ``~/.cache`` when the variable is unset, empty or not an
    absolute path); None without a home directory."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        home = os.path.expanduser("~")
        if not os.path.isabs(home):
            return None
        base = os.path.join(home, ".cache")
    digest = hashlib.sha256(os.fsencode(real_root)).hexdigest()[:32]
    return Path(base) / "nhbench" / "browse" / f"{digest}.json"


def _entry_document(entry: Entry) -> list[object]:
    """`entry` as the index keeps it: its fields' values in their order (a list rather than
    an object per entry: the names repeated 5,000 times were most of the index to parse)."""
    values = [getattr(entry, name) for name in _ENTRY_NAMES]
    values[_TIME] = None if entry.time is None else entry.time.isoformat()
    return values


_ENTRY_NAMES = tuple(f.name for f in dataclasses.fields(Entry))
_TIME = _ENTRY_NAMES.index("time")
_TEXTS = tuple(_ENTRY_NAMES.index(name) for name in
               ("path", "kind", "label", "url", "verdict", "validity", "error"))
_NUMBERS = tuple(_ENTRY_NAMES.index(name) for name in
                 ("requested_rps", "achieved_rps", "p50", "p99"))
_INTEGERS = tuple(_ENTRY_NAMES.index(name) for name in ("errors", "steps"))
_OK = _ENTRY_NAMES.index("ok")


def _entry_from_document(values: object) -> Entry:
    """An `Entry` from its index document; ValueError/TypeError for anything else."""
    if type(values) is not list or len(values) != len(_ENTRY_NAMES):
        raise ValueError("not an entry")
    values = list(values)
    when = values[_TIME]
    values[_TIME] = None if when is None else datetime.fromisoformat(str(when))
    for i in _TEXTS:
        if type(values[i]) is not str:
            raise TypeError(_ENTRY_NAMES[i])
    for i in _NUMBERS:
        if values[i] is not None and type(values[i]) not in (int, float):
            raise TypeError(_ENTRY_NAMES[i])
    for i in _INTEGERS:
        if values[i] is not None and type(values[i]) is not int:
            raise TypeError(_ENTRY_NAMES[i])
    if type(values[_OK]) is not bool:
        raise TypeError("ok")
    return Entry(*values)


# The place `Catalogue._entry` holds in a walk's entries for a file read at the walk's end.
_PENDING = Entry(path="", kind="pending")


def _odd(relative: str, exc: Exception) -> Entry:
    # A file a loader accepted but that lacks what the summary reads (no "global" entry,
    # say): listed as unreadable, with what was missing.
    reason = f"{type(exc).__name__}: {exc}".splitlines()[0]
    return Entry.failed(relative, f"cannot summarise {relative!r}: {reason}")


@dataclass(frozen=True)
class Listing:
    entries: list[Entry]
    #: Where the walk stopped early, one sentence each (limits reached).
    notes: list[str]


class Catalogue:
    """The results under `root`, with the per-file summary cache. Thread-safe: the
    browser's request threads share one.

    With `reading_processes` a walk that finds at least `POOL_MIN_FILES` files to read
    reads them in more than one process when more than one CPU is usable and idle
    (`nhbench.browse._pool.readers`). It is the caller's choice, made by ``nhbench browse``:
    starting a process with ``spawn`` imports the program's main module again, which a
    script without an ``if __name__ == "__main__"`` guard would run again."""

    def __init__(self, root: str | os.PathLike[str], *, reading_processes: bool = False,
                 ) -> None:
        self.root = Path(root)
        self.reading_processes = reading_processes
        self._real_root = os.path.realpath(self.root)
        self._lock = threading.Lock()
        # One walk at a time: concurrent loads of the list wait for it and then find every
        # summary cached, instead of each reading the same files.
        self._scan_lock = threading.Lock()
        self._cache: dict[str, tuple[_Key, Entry]] = {}
        # The on-disk index: read before the first walk, written after a walk that changed
        # a summary.
        self._index = index_path(self._real_root)
        self._index_read = False
        self._dirty = False
        # The files a walk found new or changed, with their keys, read together at its end.
        self._pending: list[tuple[str, _Key]] | None = None
        self._walk_began: dict[int, tuple[int, int]] | None = None

    # ---- paths ------------------------------------------------------------------------

    def _inside(self, real: str) -> bool:
        """Whether the resolved path `real` is the root or under it, with no hidden
        component below the root (a link must not reach ``.git`` either)."""
        if real == self._real_root:
            return True
        base = self._real_root.rstrip(os.sep) + os.sep
        if not real.startswith(base):
            return False
        return not any(part.startswith(".") for part in real[len(base):].split(os.sep))

    def resolve(self, relative: str) -> str | None:
        """The real path of `relative` (``.``: the root), or None when the URL path could
        leave the root or resolves (through links) to somewhere outside it."""
        if relative == ".":
            return self._real_root
        safe = safe_relative(relative)
        if safe is None:
            return None
        real = os.path.realpath(os.path.join(self._real_root, *safe.parts))
        return real if self._inside(real) else None

    def open(self, relative: str) -> tuple[int, os.stat_result] | None:
        """A descriptor (blocking, close-on-exec) on the regular file at `relative` and its
        status, or None: absent, not a regular file, or outside the root. The caller
        closes it."""
        real = self.resolve(relative)
        if real is None:
            return None
        try:
            fd = os.open(real, _OPEN_FLAGS)
        except OSError:
            return None
        try:
            status = os.fstat(fd)
            if not stat.S_ISREG(status.st_mode):
                raise OSError("not a regular file")
            # A directory on the way may have been swapped for a link since realpath.
            try:
                opened = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                opened = real
            if not self._inside(opened):
                raise OSError("outside the root")
            os.set_blocking(fd, True)
        except OSError:
            os.close(fd)
            return None
        return fd, status

    def file(self, relative: str) -> Path | None:
        """The regular file at `relative` under the root, or None (absent, not a file, or a
        path that leaves the root, through links too)."""
        real = self.resolve(relative)
        if real is None or real == self._real_root:
            return None
        return Path(real) if os.path.isfile(real) else None

    def campaign_dir(self, relative: str) -> Path | None:
        """The campaign directory at `relative` (``.``: the root itself), or None."""
        real = self.resolve(relative)
        if real is None or not os.path.isdir(real):
            return None
        path = Path(real)
        manifest = self.resolve(relative + "/manifest.json") if relative != "." else \
            self.resolve("manifest.json")
        from ..campaign import is_campaign

        return path if manifest is not None and is_campaign(path) else None

    # ---- loading ----------------------------------------------------------------------

    def read(self, relative: str) -> bytes:
        """The bytes of the result file at `relative`, at most `MAX_FILE_BYTES`;
        ResultFileError (one line) otherwise."""
        name = str(self.root / relative)
        opened = self.open(relative)
        if opened is None:
            raise ResultFileError(f"no result file {relative!r} in {str(self.root)!r}", relative)
        fd, status = opened
        try:
            if status.st_size > MAX_FILE_BYTES:
                raise ResultFileError(f"cannot load result {name!r}: {status.st_size} bytes is "
                                      f"over the limit of {MAX_FILE_BYTES // 2**20} MiB", name)
            chunks = []
            total = 0
            while chunk := os.read(fd, min(1 << 20, MAX_FILE_BYTES + 1 - total)):
                chunks.append(chunk)
                total += len(chunk)
                if total > MAX_FILE_BYTES:
                    raise ResultFileError(f"cannot load result {name!r}: over the limit of "
                                          f"{MAX_FILE_BYTES // 2**20} MiB", name)
            return b"".join(chunks)
        except OSError as exc:
            raise ResultFileError(f"cannot load result {name!r}: {exc.strerror or exc}",
                                  name) from None
        finally:
            os.close(fd)

    def load(self, relative: str) -> Result:
        """The `Result` in the file at `relative`; ResultFileError (one line) otherwise.
        The file is read through `open`, so never from outside the root. A file the list
        showed from its summary (`summarise`) that turns out not to load is listed as
        unreadable from then on, with the reason."""
        name = str(self.root / relative)
        try:
            kind, data = read_result_text(self.read(relative), name)
            return result_from_document(kind, data, name)
        except ResultFileError as exc:
            self._refused(relative, str(exc))
            raise

    def summarise(self, relative: str) -> Entry:
        """The list's row of the result file at `relative`, from a quick read: the file is
        parsed whole and refused as `load` would refuse it for anything the row shows
        (not JSON, no format nhbench reads, a list over its limit, an invalid option, a
        bad value or histogram of the headline statistic, no global entry...), but the
        other statistics, their histograms and the timeline are checked when the result
        is opened (`load`). A file nhbench wrote whose row fields all pass `quick_fields`'
        checks is listed without the models: its options the row does not show are then
        checked when it is opened too. ResultFileError (one line) for a file refused."""
        name = str(self.root / relative)
        kind, data = parse_result_text(self.read(relative), name)
        if kind in ("nhbench", "nighthawk") and isinstance(data, dict):
            summary = summary_document(data)
            check_result_document(kind, summary, name, sizes_of=data)
            if summary is data:
                # Not cut (`summary_document`): the full load decides, and refuses.
                return Entry.from_result(relative, result_from_document(kind, data, name))
            if kind == "nhbench":
                # A file nhbench wrote: its row read straight from the document when the
                # quick reader is sure of every field it shows (`quick_fields`).
                fields = quick_fields(data)
                if fields is not None:
                    return Entry.from_fields(relative, fields)
            return Entry.from_result(relative, result_from_document(kind, summary, name))
        check_result_document(kind, data, name)
        return Entry.from_result(relative, result_from_document(kind, data, name))

    def _refused(self, relative: str, reason: str) -> None:
        """Remember that the file at `relative` (as it is now) does not load: its row
        becomes unreadable, here and in the on-disk index."""
        real = self.resolve(relative)
        if real is None:
            return
        try:
            key = _key(os.stat(real))
        except OSError:
            return
        with self._lock:
            cached = self._cache.get(relative)
            if cached is None or cached[0] != key or cached[1].kind != "result":
                return
            self._cache[relative] = (key, Entry.failed(relative, reason))
            self._dirty = True

    def manifest(self, relative: str) -> CampaignManifest:
        path = self.campaign_dir(relative)
        if path is None:
            raise CampaignError(f"no campaign directory {relative!r} in {str(self.root)!r}")
        from ..campaign import load_manifest

        return load_manifest(path)

    def _entry(self, relative: str, path: str | Path, campaign: bool) -> Entry:
        stat_path = os.path.join(path, "manifest.json") if campaign else path
        try:
            stat = os.stat(stat_path)
        except OSError as exc:
            return Entry.failed(relative, f"cannot read: {exc.strerror or exc}")
        key = _key(stat)
        with self._lock:
            cached = self._cache.get(relative)
        if cached is not None and cached[0] == key:
            return cached[1]
        if campaign:
            from ..campaign import load_manifest

            try:
                entry = Entry.from_campaign(relative, load_manifest(path))
            except (ResultFileError, CampaignError) as exc:
                entry = Entry.failed(relative, str(exc))
            except Exception as exc:  # noqa: BLE001 - one odd file must not take the list down
                entry = _odd(relative, exc)
            self._remember(relative, key, entry)
            return entry
        if self._pending is not None:
            # A walk that reads its new files together (`_summarise_pending`): a place
            # held for this one.
            self._pending.append((relative, key))
            return _PENDING
        entry = self.row(relative)
        self._remember(relative, key, entry)
        return entry

    def _remember(self, relative: str, key: _Key, entry: Entry) -> None:
        with self._lock:
            self._cache[relative] = (key, entry)
            self._dirty = True

    def row(self, relative: str) -> Entry:
        """The list's row of the result file at `relative` (`summarise`), or an unreadable
        row with the reason: what the walk lists, here or in a reading process
        (`nhbench.browse._pool`)."""
        try:
            return self.summarise(relative)
        except ResultFileError as exc:
            return Entry.failed(relative, str(exc))
        except Exception as exc:  # noqa: BLE001 - one odd file must not take the list down
            return _odd(relative, exc)

    def _summarise_pending(self, entries: list[Entry], notes: list[str]) -> None:
        """Read the files the walk held places for in `entries`: in reading processes
        when there are many (`nhbench.browse._pool`), else here, one after the other."""
        pending, self._pending = self._pending or [], None
        relatives = [relative for relative, _ in pending]
        rows = None
        if self.reading_processes and len(pending) >= POOL_MIN_FILES:
            from ._pool import readers, summarise_in_pool

            count = readers(self._walk_began)
            if count:
                rows, note = summarise_in_pool(self, relatives, count)
                if note:
                    notes.append(note)
        if rows is None:
            rows = [self.row(relative) for relative in relatives]
        made = iter(rows)
        for i, entry in enumerate(entries):
            if entry is _PENDING:
                entries[i] = next(made)
        for (relative, key), entry in zip(pending, rows, strict=True):
            self._remember(relative, key, entry)

    def scan(self) -> Listing:
        """Walk the root: every campaign and ``*.json`` file as an `Entry`, newest first
        (unreadable files last)."""
        with self._scan_lock:
            if not self._index_read:
                self._index_read = True
                self._read_index()
            if self.campaign_dir(".") is not None:
                listing = self._scan_campaign_root()
            else:
                listing = self._scan()
            if self._dirty:
                self._write_index()
            return listing

    # ---- the on-disk index --------------------------------------------------------------

    def _read_index(self) -> None:
        if self._index is None:
            return
        try:
            with open(self._index, "rb") as f:
                document = json.loads(f.read(MAX_FILE_BYTES + 1))
            if (document.get("format") != INDEX_FORMAT or document.get("version") != __version__
                    or document.get("root") != self._real_root):
                return
            cache = {}
            for relative, (key, fields) in document["entries"].items():
                if not (isinstance(key, list) and len(key) == 4
                        and all(type(k) is int for k in key)):
                    raise TypeError("key")
                entry = _entry_from_document(fields)
                if entry.path != relative:
                    raise ValueError("path")
                cache[relative] = (tuple(key), entry)
        except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError):
            return  # no index, or not one this version wrote: every file is read
        with self._lock:
            self._cache.update(cache)

    def _write_index(self) -> None:
        if self._index is None:
            return
        with self._lock:
            entries = {relative: [list(key), _entry_document(entry)]
                       for relative, (key, entry) in self._cache.items()}
            self._dirty = False
        document = {"format": INDEX_FORMAT, "version": __version__, "root": self._real_root,
                    "entries": entries}
        temporary = None
        try:
            self._index.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd, temporary = tempfile.mkstemp(dir=self._index.parent, prefix=".index-",
                                             suffix=".json")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                # One string from the C encoder: `json.dump` to a file encodes in Python.
                f.write(json.dumps(document, separators=(",", ":")))
            os.replace(temporary, self._index)
            temporary = None
        except (OSError, ValueError):
            pass  # a read-only cache directory: the next browser reads the files again
        finally:
            if temporary is not None:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)

    def _scan(self) -> Listing:
        self._pending = []
        self._walk_began = None
        if self.reading_processes:
            from ._pool import cpu_times  # how idle the CPUs are while the walk runs

            self._walk_began = cpu_times()
        try:
            return self._walk()
        finally:
            self._pending = None

    def _walk(self) -> Listing:
        from ..campaign import is_campaign  # here: a reading process (`._pool`) walks nothing

        entries: list[Entry] = []
        notes: list[str] = []
        files = 0
        outside = 0
        deep = False
        for directory, subdirs, names in os.walk(self.root, onerror=None):
            here = Path(directory)
            relative_dir = here.relative_to(self.root).as_posix()
            prefix = "" if relative_dir == "." else relative_dir + "/"
            subdirs[:] = sorted(d for d in subdirs if not d.startswith("."))
            if prefix and is_campaign(here):
                if self.campaign_dir(prefix[:-1]) is None:
                    outside += 1
                    subdirs[:] = []
                    continue
                entries.append(self._entry(prefix[:-1], here, campaign=True))
                subdirs[:] = []
                continue
            if prefix.count("/") >= MAX_DEPTH and subdirs:
                deep = True
                subdirs[:] = []
            # The directory resolved once: a file in it that is no symbolic link is then
            # inside the root as its directory is (resolving each file walked every
            # component of its path again, half of a rescan of 5,000 files).
            real_dir = self.resolve(prefix[:-1]) if prefix else self._real_root
            for name in sorted(names):
                if name.startswith(".") or not name.endswith(".json"):
                    continue
                if files >= MAX_FILES:
                    break
                full = os.path.join(directory, name)
                if (real_dir is None or os.path.islink(full)) and \
                        self.resolve(prefix + name) is None:
                    outside += 1
                    continue
                files += 1
                entries.append(self._entry(prefix + name, full, campaign=False))
        self._summarise_pending(entries, notes)
        if files >= MAX_FILES:
            notes.append(f"stopped after {MAX_FILES} JSON files: point nhbench browse at a "
                         "smaller directory to see the rest")
        if deep:
            notes.append(f"directories more than {MAX_DEPTH} levels deep were not searched")
        if outside:
            notes.append(f"{outside} symbolic link{'s' if outside != 1 else ''} leading outside "
                         f"{str(self.root)!r} (or to a hidden file) {'are' if outside != 1 else 'is'} "
                         "not listed and not served")
        return self._listing(entries, notes)

    def _scan_campaign_root(self) -> Listing:
        """DIR is itself a campaign: the campaign and the results of its finished steps
        (its other JSON files, the manifest and each step.json, are not results)."""
        entries = [self._entry(".", self.root, campaign=True)]
        if entries[0].kind == "campaign":
            for step in self.manifest(".").steps:
                relative = f"{step.directory}/result.json"
                entries.append(self._entry(relative, self.root / relative, campaign=False))
        return self._listing(entries, ["this directory is itself a sweep campaign"])

    def _listing(self, entries: list[Entry], notes: list[str]) -> Listing:
        live = {entry.path for entry in entries}
        with self._lock:
            for stale in [path for path in self._cache if path not in live]:
                del self._cache[stale]
                self._dirty = True
        readable = [e for e in entries if e.kind != "error"]
        readable.sort(key=lambda e: (sort_time(e.time), e.path), reverse=True)
        return Listing(readable + [e for e in entries if e.kind == "error"], notes)
