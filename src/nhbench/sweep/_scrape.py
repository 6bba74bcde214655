"""The sweep's side of the target's metrics (``--scrape``): when the scrapes are taken and
what a failed one does.

The step loop scrapes every source once before the first step (a preflight: an endpoint
that does not answer is said at once, not after the first step), then right before each
step's load starts and right after it ends, so that a counter's delta covers the step's
requests and nothing else the sweep does (captures, cooldown). The pages are kept in the
step directory, and the step's record gets the selected series. A failed scrape is an
unknown cell with its reason; with ``--scrape-required`` it ends the campaign ``failed``
(the step itself is recorded first: its own numbers are sound).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .._exceptions import RunError
from ..scrape import Scraper, ScrapeSpec, Snapshot, StepScrape, failures

__all__ = ["StepScrapes"]


class StepScrapes:
    """The scrapes of one campaign, step by step."""

    def __init__(self, spec: ScrapeSpec, note: Callable[[str], None]) -> None:
        self.spec = spec
        self._scraper = Scraper(spec)
        self._note = note
        self._before: dict[str, Snapshot] = {}
        self._after: dict[str, Snapshot] = {}

    def preflight(self) -> None:
        """Scrape each source once; say which cannot be read (RunError under required)."""
        snapshots = self._scraper.take()
        for name, snapshot in snapshots.items():
            if snapshot.error is None:
                self._note(f"scrape {name}: {len(snapshot.samples)} series "
                           f"({snapshot.format}) at {snapshot.url}")
                continue
            message = f"scrape {name} ({snapshot.url}): {snapshot.error}"
            if self.spec.required:
                raise RunError(f"--scrape-required: {message}")
            self._note(f"{message}; its metrics will read unknown until it answers")

    def before(self) -> None:
        self._before = self._scraper.take()
        self._after = {}

    def after(self) -> None:
        self._after = self._scraper.take()

    def records(self, step_dir: Path) -> list[StepScrape]:
        """Save the step's pages into its directory and return its records."""
        files = {
            "before": self._scraper.save(self._before, step_dir, "before"),
            "after": self._scraper.save(self._after, step_dir, "after"),
        }
        return self._scraper.compare(self._before, self._after, files)

    def require(self, index: int, records: list[StepScrape]) -> None:
        """Under ``--scrape-required``, RunError for a step whose scrape failed."""
        failed = failures(records)
        if failed and self.spec.required:
            raise RunError(f"--scrape-required: step {index}: scrape " + "; ".join(failed))
