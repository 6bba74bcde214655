"""Live progress: the snapshot the core hands out during a run, and a one-line TTY display.

The core refreshes its summed counters about every 10 ms without stopping the workers
(``ClientRun.progress()``); `Benchmark.run` reads them between its 0.1 s waits and hands a
`Progress` to the ``on_progress`` callback. `ProgressLine` is the callback the CLI uses on a
terminal: a single line on stderr, rewritten in place with ``\\r``, erased before the report
is printed. It is plain text on purpose: it must cost nothing next to the run it watches.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

from ._names import error_total

__all__ = ["Progress", "ProgressLine"]


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


class ProgressLine:
    """``on_progress`` callback drawing one self-overwriting status line on a terminal.

    The rate shown is over the last second or so, not since the start, so that a stall shows
    up at once instead of being averaged away.
    """

    def __init__(
        self, duration: float | None = None, stream: TextIO | None = None, interval: float = 0.25
    ) -> None:
        self._duration = duration
        self._stream = stream if stream is not None else sys.stderr
        self._interval = interval
        self._last_draw = 0.0
        self._history: list[tuple[float, int]] = []
        self._drawn = False

    def __call__(self, progress: Progress) -> None:
        now = time.monotonic()
        self._history.append((progress.elapsed, progress.requests))
        # Keep about one second of history for the rate.
        while len(self._history) > 2 and progress.elapsed - self._history[1][0] >= 1.0:
            self._history.pop(0)
        if now - self._last_draw < self._interval:
            return
        self._last_draw = now
        first_t, first_n = self._history[0]
        span = progress.elapsed - first_t
        rate = (progress.requests - first_n) / span if span > 0 else 0.0
        total = f" / {self._duration:g}s" if self._duration else ""
        line = (
            f"  {progress.elapsed:6.1f}s{total}  requests {progress.requests:,}  "
            f"rps {rate:,.0f}  2xx {progress.responses_2xx:,}  errors {progress.errors:,}"
        )
        # \r returns to the line start, \x1b[K erases what a longer previous line left behind.
        self._stream.write("\r" + line + "\x1b[K")
        self._stream.flush()
        self._drawn = True

    def clear(self) -> None:
        """Erase the line so the report starts on a clean line."""
        if self._drawn:
            self._stream.write("\r\x1b[K")
            self._stream.flush()
            self._drawn = False
