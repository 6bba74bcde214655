"""`Scraper`: the scrapes of one campaign, taken before and after each step.

`take()` scrapes every source at once (one thread each, so that a source that times out
does not delay the others) and parses what came back; `save()` keeps each page as it was
received in the step directory; `compare()` turns a before and an after into the step's
`StepScrape` records, one per source, with the selected series and their deltas or values.

A scrape that fails (no connection, a timeout, not a 2xx, a page neither format reads) is
recorded with its reason and never raises: the step's columns for that source then read
unknown. `failures()` lists them for ``--scrape-required``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from .._io import OutputError, atomic_writer
from ..options import MetricSelector
from ._envoy import looks_like_envoy, parse_envoy_stats
from ._fetch import fetch
from ._models import ScrapedSeries, StepScrape
from ._prometheus import parse_prometheus
from ._samples import Sample

__all__ = ["SCRAPE_DIR", "ScrapeSpec", "Scraper", "Snapshot", "failures", "parse_page"]

#: The step's subdirectory for the scrapes (steps/001-rps100/scrape/target.before.txt).
SCRAPE_DIR = "scrape"


@dataclass(frozen=True)
class ScrapeSpec:
    """What to scrape: sources by name, the series to show, the time a scrape may take."""

    sources: Mapping[str, str]
    selectors: Sequence[MetricSelector] = ()
    timeout: float = 5.0
    required: bool = False


@dataclass
class Snapshot:
    """One scrape of one source: its page and samples, or why there are none."""

    name: str
    url: str
    text: str | None = None
    error: str | None = None
    format: str | None = None
    samples: dict[str, Sample] = field(default_factory=dict)


def _buckets(url: str) -> str:
    query = parse_qs(urlsplit(url).query)
    return "disjoint" if "disjoint" in query.get("histogram_buckets", []) else "cumulative"


def parse_page(text: str, url: str) -> tuple[str, list[Sample]]:
    """(format, samples) of a scraped page: Envoy's plain /stats when it reads as one, else
    Prometheus text. ValueError when the page is neither."""
    if looks_like_envoy(text):
        buckets = "disjoint" if _buckets(url) == "disjoint" else "cumulative"
        return "envoy", parse_envoy_stats(text, buckets=buckets)  # type: ignore[arg-type]
    return "prometheus", parse_prometheus(text)


def _number(value: float) -> str:
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else f"{value:g}"


class Scraper:
    """The scrapes of a campaign (see the module doc)."""

    def __init__(self, spec: ScrapeSpec) -> None:
        self.spec = spec

    def _one(self, name: str, url: str) -> Snapshot:
        snapshot = Snapshot(name, url)
        snapshot.text, snapshot.error = fetch(url, self.spec.timeout)
        if snapshot.text is None:
            return snapshot
        try:
            snapshot.format, samples = parse_page(snapshot.text, url)
        except ValueError as exc:
            snapshot.error = str(exc).splitlines()[0][:300]
            return snapshot
        for sample in samples:
            # A series written twice (a malformed page) counts once: its first value.
            snapshot.samples.setdefault(sample.key, sample)
        return snapshot

    def take(self) -> dict[str, Snapshot]:
        """Scrape every source now; {name: Snapshot}, in the sources' order."""
        sources = list(self.spec.sources.items())
        if len(sources) == 1:
            return {sources[0][0]: self._one(*sources[0])}
        with ThreadPoolExecutor(max_workers=min(8, len(sources)),
                                thread_name_prefix="nhbench-scrape") as pool:
            futures = [(name, pool.submit(self._one, name, url)) for name, url in sources]
            return {name: future.result() for name, future in futures}

    @staticmethod
    def save(snapshots: Mapping[str, Snapshot], step_dir: Path, phase: str) -> dict[str, str]:
        """Write each page received into ``step_dir/scrape/NAME.PHASE.txt``; {name: path
        relative to step_dir}. A page that cannot be written is noted as the scrape's
        error (the measurements matter more than the copy)."""
        files: dict[str, str] = {}
        for name, snapshot in snapshots.items():
            if snapshot.text is None:
                continue
            relative = f"{SCRAPE_DIR}/{name}.{phase}.txt"
            try:
                (step_dir / SCRAPE_DIR).mkdir(exist_ok=True)
                with atomic_writer(step_dir / relative) as handle:
                    handle.write(snapshot.text)
            except (OSError, OutputError) as exc:
                snapshot.error = snapshot.error or f"not saved: {exc}".splitlines()[0]
                continue
            files[name] = relative
        return files

    def compare(self, before: Mapping[str, Snapshot], after: Mapping[str, Snapshot],
                files: Mapping[str, Mapping[str, str]] | None = None) -> list[StepScrape]:
        """The step's records: per source, the selected series with their deltas or
        values. `files` is {phase: {name: file}} from `save`."""
        files = files or {}
        records = []
        for name, url in self.spec.sources.items():
            first, last = before.get(name), after.get(name)
            record = StepScrape(
                name=name, url=url,
                format=_format_of(first, last),
                before_file=files.get("before", {}).get(name),
                after_file=files.get("after", {}).get(name),
            )
            for phase, snapshot in (("before", first), ("after", last)):
                if snapshot is None:
                    record.errors[phase] = "not taken"
                elif snapshot.error is not None:
                    record.errors[phase] = snapshot.error
            record.series = self._series(first, last, record.errors)
            record.unmatched = self._unmatched(first, last)
            records.append(record)
        return records

    def _selected(self, snapshot: Snapshot | None) -> dict[str, Sample]:
        if snapshot is None or snapshot.error is not None:
            return {}
        return {
            key: sample for key, sample in snapshot.samples.items()
            if any(selector.matches(sample.name, sample.family, sample.labels)
                   for selector in self.spec.selectors)
        }

    def _unmatched(self, *snapshots: Snapshot | None) -> list[str]:
        read = [s for s in snapshots if s is not None and s.error is None]
        if not read:
            return []
        return [
            selector.text for selector in self.spec.selectors
            if not any(selector.matches(sample.name, sample.family, sample.labels)
                       for snapshot in read for sample in snapshot.samples.values())
        ]

    def _series(self, before: Snapshot | None, after: Snapshot | None,
                errors: Mapping[str, str]) -> list[ScrapedSeries]:
        old, new = self._selected(before), self._selected(after)
        keys = list(new) + [key for key in old if key not in new]
        out = []
        for key in keys:
            sample = new.get(key) or old[key]
            first = old.get(key)
            last = new.get(key)
            series = ScrapedSeries(
                series=key, kind=sample.kind, mode=sample.mode,
                before=None if first is None else first.value,
                after=None if last is None else last.value,
            )
            if "after" in errors:
                series.unknown = f"the scrape after the step failed: {errors['after']}"
            elif last is None:
                series.unknown = "absent from the scrape after the step"
            elif sample.mode == "value":
                series.value = last.value
            elif "before" in errors:
                series.unknown = f"the scrape before the step failed: {errors['before']}"
            elif first is None:
                # A counter that appeared during the step started from zero (Envoy and the
                # Prometheus clients create series on first use).
                series.value = last.value
            elif last.value < first.value:
                series.unknown = (f"went down from {_number(first.value)} to "
                                  f"{_number(last.value)} (the target restarted, or its "
                                  f"counters were reset?)")
            else:
                series.value = last.value - first.value
            out.append(series)
        return out


def _format_of(*snapshots: Snapshot | None) -> str | None:
    for snapshot in snapshots:
        if snapshot is not None and snapshot.format is not None:
            return snapshot.format
    return None


def failures(records: Sequence[StepScrape]) -> list[str]:
    """One line per failed scrape of a step (``target after: timed out after 5 s``)."""
    return [f"{record.name} {phase}: {reason}"
            for record in records for phase, reason in record.errors.items()]

