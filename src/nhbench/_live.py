"""What ``nhbench run`` shows while a run goes (docs/live.md).

* `format_interval` / `IntervalLines`: one plain-text line per ``--stats-interval`` on
  stderr (elapsed time, requests, achieved rate, the interval's coordinated-omission-corrected
  p50/p99/max, errors, blocked). No control characters at all, so the lines read the same in
  a CI log, through ``tee`` or in a file.
* `LiveDisplay`: on a terminal, a `rich` live display on stderr (time remaining, the live
  numbers and, when connections spread over several endpoints, each endpoint's
  `format_endpoints` line, and with ``--group-by`` the `format_groups` line) with the interval
  lines printed above it; it is transient, so it disappears when the run ends and the report
  starts on a clean line. `rich` is imported only when it is shown.
* `format_groups`: a grouped run's groups on one bounded line (the largest `SHOWN_GROUPS`,
  names cut to `GROUP_NAME_CHARS`, the rest counted), for the live display and the pytest
  plugin's summary.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from typing import Any, TextIO

from ._format import format_seconds, printable
from ._progress import Progress
from ._timeline import IntervalRecord

__all__ = ["GROUP_NAME_CHARS", "SHOWN_GROUPS", "IntervalLines", "LiveDisplay",
           "format_endpoints", "format_groups", "format_interval"]

#: A groups line names at most this many groups, the largest first, and counts the rest: a
#: header may have 64 values and a request source 64 kinds.
SHOWN_GROUPS = 8
#: ... and at most this many characters of each name (a header's value may have 128).
GROUP_NAME_CHARS = 32


def _latency(value: float | None) -> str:
    return "-" if value is None else format_seconds(value)


def format_interval(record: IntervalRecord) -> str:
    """The one line of an interval, e.g. ``[   2.0s] requests 4,000  rps 4,000  p50 …``."""
    end = record.start + record.duration
    return (
        f"[{end:7.1f}s] requests {record.requests:,}  rps {record.rps:,.0f}  "
        f"p50 {_latency(record.p50)}  p99 {_latency(record.p99)}  max {_latency(record.max)}  "
        f"errors {record.errors:,}  blocked {record.blocked:,}"
    )


def format_endpoints(progress: Progress) -> list[str]:
    """One line per endpoint of a run spreading over several (``--resolve`` with several
    addresses, ``--dns-method rr|random``, several targets): its connections, requests and
    errors so far, and its share of the requests; none with one endpoint."""
    total = sum(e.requests for e in progress.endpoints)
    width = max((len(e.name) for e in progress.endpoints), default=0)
    return [
        f"  {e.name:<{width}}  connections {e.connections:,}  requests {e.requests:,} "
        f"({100 * e.requests / total if total else 0:.0f}%)  errors {e.errors:,}"
        for e in progress.endpoints
    ]


def _shown_name(name: str) -> str:
    # A header's value is the server's: a control character (a C1 one decoded from latin-1
    # included) is written as an escape rather than sent to the terminal.
    text = printable(name)
    return text if len(text) <= GROUP_NAME_CHARS else text[:GROUP_NAME_CHARS - 1] + "…"


def format_groups(groups: Iterable[tuple[str, int, int, float | None]]) -> str:
    """A grouped run's groups, each given as (name, requests, errors, p99 in seconds or
    None), on one line: the largest `SHOWN_GROUPS` by requests with their share, errors
    and p99, then how many more, e.g. ``alpha 45 (50%), beta 45 (50%) 2 errors, +3 more``."""
    rows = sorted(groups, key=lambda g: -g[1])
    total = sum(g[1] for g in rows)
    cells = []
    for name, requests, errors, p99 in rows[:SHOWN_GROUPS]:
        cell = f"{_shown_name(name)} {requests:,} ({100 * requests / total if total else 0:.0f}%)"
        if errors:
            cell += f" {errors:,} error{'s' if errors != 1 else ''}"
        if p99 is not None:
            cell += f" p99 {format_seconds(p99)}"
        cells.append(cell)
    if len(rows) > SHOWN_GROUPS:
        cells.append(f"+{len(rows) - SHOWN_GROUPS} more")
    return ", ".join(cells)


class IntervalLines:
    """``on_interval`` callback writing `format_interval` lines to a stream (stderr)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream if stream is not None else sys.stderr

    def __call__(self, record: IntervalRecord) -> None:
        self._stream.write(format_interval(record) + "\n")
        self._stream.flush()


class LiveDisplay:
    """A rich live display for a terminal: ``on_progress`` and ``on_interval`` callbacks.

    The display is redrawn at most 4 times a second from the 0.1 s progress snapshots (no
    refresh thread of its own); interval lines go above it and stay in the scrollback.
    `close` removes it.
    """

    def __init__(self, duration: float | None, stream: TextIO | None = None) -> None:
        from rich.console import Console
        from rich.live import Live

        self._duration = duration
        self._console = Console(file=stream if stream is not None else sys.stderr)
        self._live = Live(
            console=self._console, transient=True, auto_refresh=False,
            redirect_stdout=False, redirect_stderr=False,
        )
        self._last: IntervalRecord | None = None
        self._progress: Progress | None = None
        self._history: list[tuple[float, int]] = []
        self._last_draw = 0.0
        self._started = False

    def on_progress(self, progress: Progress) -> None:
        self._progress = progress
        self._history.append((progress.elapsed, progress.requests))
        while len(self._history) > 2 and progress.elapsed - self._history[1][0] >= 1.0:
            self._history.pop(0)
        now = time.monotonic()
        if now - self._last_draw >= 0.25:
            self._last_draw = now
            self._draw()

    def on_interval(self, record: IntervalRecord) -> None:
        self._last = record
        self._ensure_started()
        self._live.console.print(format_interval(record), highlight=False, markup=False)

    def close(self) -> None:
        if self._started:
            self._live.stop()
            self._started = False

    def _ensure_started(self) -> None:
        if not self._started:
            self._live.start()
            self._started = True

    def _renderable(self) -> Any:
        from rich.progress_bar import ProgressBar
        from rich.table import Table

        progress = self._progress
        elapsed = progress.elapsed if progress is not None else 0.0
        grid = Table.grid(padding=(0, 2))
        row: list[Any] = []
        if self._duration:
            done = min(elapsed, self._duration)
            row.append(ProgressBar(total=self._duration, completed=done, width=30))
            row.append(f"{elapsed:6.1f}s / {self._duration:g}s, "
                       f"{max(self._duration - elapsed, 0.0):.1f}s remaining")
        else:
            row.append(f"{elapsed:6.1f}s (no duration)")
        if progress is not None:
            first_t, first_n = self._history[0]
            span = elapsed - first_t
            rate = (progress.requests - first_n) / span if span > 0 else 0.0
            row.append(f"requests {progress.requests:,}  rps {rate:,.0f}  "
                       f"errors {progress.errors:,}")
        if self._last is not None:
            row.append(f"last interval: p50 {_latency(self._last.p50)}  "
                       f"p99 {_latency(self._last.p99)}  max {_latency(self._last.max)}")
        for _ in row:
            grid.add_column()
        grid.add_row(*row)
        lines = format_endpoints(progress) if progress is not None else []
        if progress is not None and progress.groups:
            lines.append("  groups: " + format_groups(
                (g.name, g.requests, g.errors, None) for g in progress.groups))
        if not lines:
            return grid
        from rich.console import Group
        from rich.text import Text

        return Group(grid, *(Text(line) for line in lines))

    def _draw(self) -> None:
        self._ensure_started()
        self._live.update(self._renderable(), refresh=True)
