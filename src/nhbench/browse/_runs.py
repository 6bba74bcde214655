"""Runs started from the web UI (``nhbench ui DIR``) or its Fortio REST API, in this process.

`RunManager.start` checks a run against the `Limits` (rate, connections, duration, runs at
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

import ipaddress
import itertools
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from .._exceptions import NHBenchError, RunRefusedError

if TYPE_CHECKING:
    from .._result import Result
    from .._timeline import IntervalRecord
    from ..options import Options

__all__ = ["DEFAULT_LIMITS", "Limits", "LiveRun", "RunManager", "allowed_target"]



@dataclass(frozen=True)
class Limits:
    """What one web-started run may do, and how many may run at once. A cap of 0 is no cap
    (only by an explicit flag)."""

    #: Requests per second, over all workers; a run "as fast as possible" is refused while
    #: this is not 0.
    max_rate: float = 1000.0
    #: Connections, over all workers.
    max_connections: int = 64
    #: Seconds; a run without a duration (until stopped) is refused while this is not 0.
    max_duration: float = 300.0
    #: Runs at once.
    max_runs: int = 2
    #: Targets a run may address: networks (CIDR or one address) and host names. Empty:
    #: any target.
    allow_targets: tuple[str, ...] = ()

    def check(self, options: Options) -> None:
        """Raise `RunRefusedError` when `options` go beyond a cap or address a target outside
        the allow-list. Nothing is sent before this passes."""
        workers = options.concurrency if isinstance(options.concurrency, int) else \
            len(os.sched_getaffinity(0))
        rate = options.rps * workers
        if self.max_rate > 0:
            if rate <= 0:
                raise RunRefusedError(f"rate: a run as fast as possible is refused (the cap is "
                                 f"{self.max_rate:g} requests/s, --max-rate)")
            if rate > self.max_rate:
                raise RunRefusedError(f"rate: {rate:g} requests/s is more than the cap of "
                                 f"{self.max_rate:g} (--max-rate)")
        connections = options.connections * workers
        if 0 < self.max_connections < connections:
            raise RunRefusedError(f"connections: {connections} is more than the cap of "
                             f"{self.max_connections} (--max-connections)")
        if self.max_duration > 0:
            if options.no_duration and options.requests is None:
                raise RunRefusedError(f"duration: a run until stopped is refused (the cap is "
                                 f"{self.max_duration:g}s, --max-duration)")
            duration = options.effective_duration
            if options.requests is not None and rate > 0:
                # A count at a fixed rate lasts count / rate (it ends sooner if the count
                # is reached first); a count as fast as possible is refused above.
                by_count = options.requests / rate
                duration = by_count if duration is None else min(duration, by_count)
            if duration is not None and duration > self.max_duration:
                raise RunRefusedError(f"duration: {duration:g}s is more than the cap of "
                                 f"{self.max_duration:g}s (--max-duration)")
        if self.allow_targets:
            host = urlsplit(options.uri).hostname or ""
            if not allowed_target(host, self.allow_targets):
                raise RunRefusedError(f"target: {host!r} is not in the allow-list "
                                 f"({', '.join(self.allow_targets)}; --allow-target)")


DEFAULT_LIMITS = Limits()


def allowed_target(host: str, allowed: tuple[str, ...]) -> bool:
    """True when `host` is one of the `allowed` host names, or an address in one of the
    allowed networks, or a name every address of which is in one of them (a name that does
    not resolve is refused)."""
    networks = []
    names = set()
    for entry in allowed:
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            names.add(entry.lower().rstrip("."))
    if host.lower().rstrip(".") in names:
        return True
    try:
        addresses = [ipaddress.ip_address(host.split("%", 1)[0])]
    except ValueError:
        try:
            infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
        except (OSError, UnicodeError):
            return False
        addresses = [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]
    return bool(addresses) and all(
        any(address.version == network.version and address in network
            for network in networks)
        for address in addresses)


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


def _record(record: IntervalRecord) -> dict[str, Any]:
    return {"t": record.start + record.duration, "requests": record.requests,
            "rps": record.rps, "p50": record.p50, "p99": record.p99, "max": record.max,
            "errors": record.errors}


class RunManager:
    """The runs started in this process over the directory `root`."""

    def __init__(self, root: str, limits: Limits = DEFAULT_LIMITS) -> None:
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
              on_done: Callable[[LiveRun], None] | None = None) -> LiveRun:
        """Check `options` and start the run on a thread; `RunRefusedError` when the limits
        refuse it (nothing is sent then). `on_done` runs on the run's thread once the result
        is saved."""
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
        thread = threading.Thread(target=self._run, args=(run, on_done),
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

    def _run(self, run: LiveRun, on_done: Callable[[LiveRun], None] | None) -> None:
        def on_interval(record: IntervalRecord) -> None:
            with run.changed:
                run.records.append(_record(record))
                run.changed.notify_all()

        state = "done"
        try:
            result = run.benchmark.run(None, on_interval)
            run.result = result
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
