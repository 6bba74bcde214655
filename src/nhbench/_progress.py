"""Live progress: the snapshot the core hands out during a run.

The core refreshes its summed counters about every 10 ms without stopping the workers
(``ClientRun.progress()``); `Benchmark.run` reads them between its 0.1 s waits and hands a
`Progress` to the ``on_progress`` callback. The CLI's terminal display and interval lines are
`nhbench._live` (docs/live.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ._names import error_total

__all__ = ["Progress"]


@dataclass(frozen=True)
class Progress:
    """A live snapshot: seconds since the start and the counters summed over workers."""

    elapsed: float
    counters: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def from_core(cls, snapshot: Mapping[str, Any]) -> Progress:
        return cls(
            elapsed=float(snapshot.get("elapsed", 0.0)),
            counters={k: int(v) for k, v in (snapshot.get("counters") or {}).items()},
        )

    @property
    def requests(self) -> int:
        """Requests sent so far."""
        return int(self.counters.get("upstream_rq_total", 0))

    @property
    def responses_2xx(self) -> int:
        return int(self.counters.get("benchmark.http_2xx", 0))

    @property
    def errors(self) -> int:
        """Errors so far, as every report counts them (`nhbench._names.ERROR_COUNTERS`)."""
        return error_total(self.counters)
