"""Runs started from the web UI (``nhbench ui DIR``) or its Fortio REST API, in this process.

`RunManager.start` checks a run against the `UILimits` (rate, connections, duration, runs at
once, the target allow-list) before anything is sent, then runs it on a thread of its own
(`nhbench.distributed.make_benchmark`, as ``nhbench run`` does); each interval record is kept
and handed to whoever watches the run (`LiveRun.records_after`, the Server-Sent Events
stream of the live page). When the run ends its nhbench JSON is written into the browsed
directory (then listed like any other result), plus whatever the starter's `on_done` writes
(Fortio's JSON for a run started through Fortio's API). `stop` drains a run as SIGINT does
for ``nhbench run``: the partial result is saved, marked interrupted.

docs/outputs.md, "Running tests from the browser", describes the safety model.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._exceptions import NHBenchError, RunRefusedError
from ..options import DEFAULT_UI_LIMITS, UILimits

if TYPE_CHECKING:
    from .._progress import Progress
    from .._result import Result
    from .._timeline import IntervalRecord
    from ..options import Options

__all__ = ["LiveRun", "RunManager"]



@dataclass
class LiveRun:
    """One run: its options, its interval records so far, its state and what it saved."""

    id: int
    options: Options
    started: float
    #: "running", "stopping", "done" or "failed".
    state: str = "running"
    records: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    #: The nhbench JSON's path relative to the browsed directory, once written.
    saved: str | None = None
    result: Result | None = None
    #: What the starter keeps with the run (the Fortio API's run settings).
    extra: Any = None
    benchmark: Any = None
    changed: threading.Condition = field(default_factory=threading.Condition)

    @property
    def finished(self) -> bool:
        return self.state in ("done", "failed")

    def records_after(self, seen: int, timeout: float) -> tuple[list[dict[str, Any]], bool]:
        """The records after the first `seen` (waiting up to `timeout` for one), and whether
        the run has finished."""
        with self.changed:
            if len(self.records) <= seen and not self.finished:
                self.changed.wait(timeout)
            return self.records[seen:], self.finished

    def wait(self, timeout: float | None = None) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: self.finished, timeout)


def _record(record: IntervalRecord, progress: Progress | None) -> dict[str, Any]:
    # With several endpoints the live page also lists each one's counts so far (the
    # latest progress snapshot's, which the interval's end is at most 0.1 s ahead of).
    endpoints = [[e.name, e.connections, e.requests, e.errors]
                 for e in (progress.endpoints if progress is not None else ())]
    return {"t": record.start + record.duration, "requests": record.requests,
            "rps": record.rps, "p50": record.p50, "p99": record.p99, "max": record.max,
            "errors": record.errors, "endpoints": endpoints}


class RunManager:
    """The runs started in this process over the directory `root`."""

    def __init__(self, root: str, limits: UILimits = DEFAULT_UI_LIMITS) -> None:
        self.root = root
        self.limits = limits
        self._lock = threading.Lock()
        self._runs: dict[int, LiveRun] = {}
        self._ids = itertools.count(1)
        #: Finished runs kept for their live page; the oldest go first.
        self._keep = 100

    def get(self, run_id: int) -> LiveRun | None:
        with self._lock:
            return self._runs.get(run_id)

    def runs(self) -> list[LiveRun]:
        with self._lock:
            return list(self._runs.values())

    def active(self) -> list[LiveRun]:
        return [run for run in self.runs() if not run.finished]

    def start(self, options: Options, *, extra: Any = None,
              on_done: Callable[[LiveRun], None] | None = None, save: bool = True) -> LiveRun:
        """Check `options` and start the run on a thread; `RunRefusedError` when the limits
        refuse it (nothing is sent then). `on_done` runs on the run's thread once the result
        is saved. With `save` false the nhbench JSON is not written: the starter saves the
        result its own way (and sets `LiveRun.saved`), so the browser lists the run once."""
        from ..distributed import make_benchmark

        self.limits.check(options)
        if options.stats_interval is None:
            options = options.model_copy(update={"stats_interval": 1.0})
        with self._lock:
            running = sum(1 for run in self._runs.values() if not run.finished)
            if self.limits.max_runs > 0 and running >= self.limits.max_runs:
                raise RunRefusedError(f"runs: {running} already running, the cap is "
                                 f"{self.limits.max_runs} at once (--max-runs)")
            run = LiveRun(id=next(self._ids), options=options, started=time.time(),
                          extra=extra)
            try:
                run.benchmark = make_benchmark(options)
            except NHBenchError as exc:
                # The core refused the configuration (or is missing): the starter's 400.
                raise ValueError(str(exc)) from None
            self._runs[run.id] = run
            finished = [key for key, value in self._runs.items() if value.finished]
            for key in finished[:max(0, len(self._runs) - self._keep)]:
                del self._runs[key]
        thread = threading.Thread(target=self._run, args=(run, on_done, save),
                                  name=f"nhbench-ui-run-{run.id}", daemon=True)
        thread.start()
        return run

    def stop(self, run_id: int) -> LiveRun | None:
        """Ask a running run to drain and stop; the run, or None when no such run runs."""
        run = self.get(run_id)
        if run is None or run.finished:
            return None
        with run.changed:
            if run.state == "running":
                run.state = "stopping"
            run.changed.notify_all()
        run.benchmark.stop()
        return run

    def stop_all(self) -> list[LiveRun]:
        return [run for run in (self.stop(r.id) for r in self.active()) if run is not None]

    def _run(self, run: LiveRun, on_done: Callable[[LiveRun], None] | None,
             save: bool) -> None:
        latest: list[Progress] = []

        def on_progress(progress: Progress) -> None:
            latest[:] = [progress]

        def on_interval(record: IntervalRecord) -> None:
            with run.changed:
                run.records.append(_record(record, latest[0] if latest else None))
                run.changed.notify_all()

        state = "done"
        try:
            result = run.benchmark.run(on_progress, on_interval)
            run.result = result
            if save:
                run.saved = self._save(run, result)
        except Exception as exc:  # noqa: BLE001 - a run's failure is its page's message
            run.error = f"{type(exc).__name__}: {exc}".splitlines()[0]
            state = "failed"
        if on_done is not None and state == "done":
            try:
                on_done(run)
            except Exception as exc:  # noqa: BLE001 - the nhbench result is saved already
                run.error = f"{type(exc).__name__}: {exc}".splitlines()[0]
        with run.changed:
            run.state = state
            run.changed.notify_all()

    def _save(self, run: LiveRun, result: Result) -> str:
        from ..outputs._output_dir import default_labels, result_id, write_in_dir

        start = result.global_result.execution_start or result.timestamp
        labels = " ".join(run.options.label) or default_labels(run.options.uri)
        path = write_in_dir(self.root, result_id(start.timestamp(), labels), ".nhbench.json",
                            result.render("json"))
        return os.path.relpath(path, self.root)
