"""What a results directory holds: one `Entry` per result file, campaign directory or file
that could not be read, found by `Catalogue.scan`.

A directory with a ``manifest.json`` is a sweep campaign (`nhbench.campaign`): it is one
entry, its steps are listed on its own page, and the walk does not descend into it. Every
other ``*.json`` file is read with `nhbench.load_result`, which recognises nhbench's,
Nighthawk's and Fortio's JSON (whichever loaders `nhbench._load.LOADERS` has); a file it
refuses is an entry too, with the loader's one-line reason, so that one bad file never hides
the others. Hidden files and directories (a name starting with ``.``: ``.git``, a virtual
environment) are skipped.

Results are summarised once per version of a file: the summary is cached by path,
modification time and size, so that reloading the list after a new run reads only the new
file. The walk has limits (`MAX_DEPTH`, `MAX_FILES`, `MAX_FILE_BYTES`) so that pointing the
browser at a home directory lists what it can quickly and says where it stopped.
"""

from __future__ import annotations

import math
import os
import threading
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from .._exceptions import CampaignError, ResultFileError
from .._input import limit_of
from .._load import load_result
from .._names import REQUEST_TO_RESPONSE, SCHEDULED_TO_RESPONSE
from .._notebook import result_verdict
from ..campaign import CampaignManifest, is_campaign, load_manifest

if TYPE_CHECKING:
    from .._result import Result, Statistic

__all__ = [
    "MAX_DEPTH",
    "MAX_FILES",
    "MAX_FILE_BYTES",
    "Catalogue",
    "Entry",
    "Listing",
    "headline_statistic",
    "percentile",
    "safe_relative",
]

#: Directory levels below the root that are walked. Campaigns and `--output-dir`
#: directories are one or two levels deep; deeper trees are usually something else.
MAX_DEPTH = 6
#: JSON files read in one listing. Each is parsed whole; a few thousand take seconds.
MAX_FILES = 5000
#: A larger file is listed as an error rather than read: results with histograms are tens
#: of kilobytes, a long run's timeline a few megabytes; hundreds of megabytes is not one.
MAX_FILE_BYTES = limit_of("result")


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
    #: Why the file could not be read (kind "error").
    error: str = ""
    #: Campaigns: the finished steps and the status.
    steps: int = 0

    @classmethod
    def from_result(cls, path: str, result: Result) -> Entry:
        latency, _ = headline_statistic(result)
        ok, verdict = result_verdict(result)
        return cls(
            path=path, kind="result", label=", ".join(result.options.label),
            time=result.timestamp, url=result.options.uri,
            requested_rps=result.requested_rps, achieved_rps=result.achieved_rps,
            p50=percentile(latency, 50), p99=percentile(latency, 99), errors=result.error_count,
            ok=ok, verdict=verdict,
        )

    @classmethod
    def from_campaign(cls, path: str, manifest: CampaignManifest) -> Entry:
        steps = manifest.steps
        best = next((s for s in steps if s.index == manifest.highest_passing_step), None)
        shown = best if best is not None else (steps[-1] if steps else None)
        return cls(
            path=path, kind="campaign", label=", ".join(manifest.label),
            time=manifest.created_at, url=manifest.url,
            requested_rps=shown.requested_rps if shown else None,
            achieved_rps=shown.achieved_rps if shown else None,
            p50=shown.latency.get("p50") if shown else None,
            p99=shown.latency.get("p99") if shown else None,
            errors=sum(s.error_count for s in steps),
            ok=manifest.status in ("completed", "stopped", "running"),
            verdict=f"sweep {manifest.status}, {len(steps)} step{'s' if len(steps) != 1 else ''}",
            steps=len(steps),
        )

    @classmethod
    def failed(cls, path: str, reason: str) -> Entry:
        return cls(path=path, kind="error", ok=False, verdict="unreadable", error=reason)


@dataclass(frozen=True)
class Listing:
    entries: list[Entry]
    #: Where the walk stopped early, one sentence each (limits reached).
    notes: list[str]


class Catalogue:
    """The results under `root`, with the per-file summary cache. Thread-safe: the
    browser's request threads share one."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[tuple[int, int], Entry]] = {}

    # ---- paths ------------------------------------------------------------------------

    def file(self, relative: str) -> Path | None:
        """The regular file at `relative` under the root, or None (absent, not a file, or a
        path that could leave the root)."""
        safe = safe_relative(relative)
        if safe is None:
            return None
        path = self.root.joinpath(*safe.parts)
        return path if path.is_file() else None

    def campaign_dir(self, relative: str) -> Path | None:
        """The campaign directory at `relative` (``.``: the root itself), or None."""
        if relative == ".":
            return self.root if is_campaign(self.root) else None
        safe = safe_relative(relative)
        if safe is None:
            return None
        path = self.root.joinpath(*safe.parts)
        return path if path.is_dir() and is_campaign(path) else None

    # ---- loading ----------------------------------------------------------------------

    def load(self, relative: str) -> Result:
        """The `Result` in the file at `relative`; ResultFileError (one line) otherwise."""
        path = self.file(relative)
        if path is None:
            raise ResultFileError(f"no result file {relative!r} in {str(self.root)!r}", relative)
        return load_result(path)

    def manifest(self, relative: str) -> CampaignManifest:
        path = self.campaign_dir(relative)
        if path is None:
            raise CampaignError(f"no campaign directory {relative!r} in {str(self.root)!r}")
        return load_manifest(path)

    def _entry(self, relative: str, path: Path, campaign: bool) -> Entry:
        stat_path = path / "manifest.json" if campaign else path
        try:
            stat = stat_path.stat()
        except OSError as exc:
            return Entry.failed(relative, f"cannot read: {exc.strerror or exc}")
        key = (stat.st_mtime_ns, stat.st_size)
        with self._lock:
            cached = self._cache.get(relative)
        if cached is not None and cached[0] == key:
            return cached[1]
        try:
            if campaign:
                entry = Entry.from_campaign(relative, load_manifest(path))
            else:
                entry = Entry.from_result(relative, self.load(relative))
        except (ResultFileError, CampaignError) as exc:
            entry = Entry.failed(relative, str(exc))
        except Exception as exc:  # noqa: BLE001 - one odd file must not take the list down
            # A file a loader accepted but that lacks what the summary reads (no "global"
            # entry, say): listed as unreadable, with what was missing.
            reason = f"{type(exc).__name__}: {exc}".splitlines()[0]
            entry = Entry.failed(relative, f"cannot summarise {relative!r}: {reason}")
        with self._lock:
            self._cache[relative] = (key, entry)
        return entry

    def scan(self) -> Listing:
        """Walk the root: every campaign and ``*.json`` file as an `Entry`, newest first
        (unreadable files last)."""
        if is_campaign(self.root):
            return self._scan_campaign_root()
        entries: list[Entry] = []
        notes: list[str] = []
        files = 0
        deep = False
        for directory, subdirs, names in os.walk(self.root, onerror=None):
            here = Path(directory)
            relative_dir = here.relative_to(self.root).as_posix()
            prefix = "" if relative_dir == "." else relative_dir + "/"
            subdirs[:] = sorted(d for d in subdirs if not d.startswith("."))
            if prefix and is_campaign(here):
                entries.append(self._entry(prefix[:-1], here, campaign=True))
                subdirs[:] = []
                continue
            if prefix.count("/") >= MAX_DEPTH and subdirs:
                deep = True
                subdirs[:] = []
            for name in sorted(names):
                if name.startswith(".") or not name.endswith(".json"):
                    continue
                if files >= MAX_FILES:
                    break
                files += 1
                entries.append(self._entry(prefix + name, here / name, campaign=False))
        if files >= MAX_FILES:
            notes.append(f"stopped after {MAX_FILES} JSON files: point nhbench browse at a "
                         "smaller directory to see the rest")
        if deep:
            notes.append(f"directories more than {MAX_DEPTH} levels deep were not searched")
        return self._listing(entries, notes)

    def _scan_campaign_root(self) -> Listing:
        """DIR is itself a campaign: the campaign and the results of its finished steps
        (its other JSON files, the manifest and each step.json, are not results)."""
        entries = [self._entry(".", self.root, campaign=True)]
        if entries[0].kind == "campaign":
            for step in load_manifest(self.root).steps:
                relative = f"{step.directory}/result.json"
                entries.append(self._entry(relative, self.root / relative, campaign=False))
        return self._listing(entries, ["this directory is itself a sweep campaign"])

    def _listing(self, entries: list[Entry], notes: list[str]) -> Listing:
        live = {entry.path for entry in entries}
        with self._lock:
            for stale in [path for path in self._cache if path not in live]:
                del self._cache[stale]
        readable = [e for e in entries if e.kind != "error"]
        readable.sort(key=lambda e: (e.time.timestamp() if e.time else 0.0, e.path),
                      reverse=True)
        return Listing(readable + [e for e in entries if e.kind == "error"], notes)
