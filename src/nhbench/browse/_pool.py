"""Reading a walk's many new result files in more than one process.

The first list of a directory never browsed reads and checks every file (about 0.25 ms of
CPU for a one-worker result, 1.3 ms for a large one: docs/benchmarks.md, "Big results"),
one CPU's work for thousands of files. When a walk finds at least
`nhbench.browse._scan.POOL_MIN_FILES` files it has no row for and more than one CPU is
usable (`os.sched_getaffinity`) and idle (`readers`), `summarise_in_pool` reads them in chunks of `CHUNK` files:
the walk's own process reads chunks as before, and up to `MAX_READERS` reading processes
read the others with the same `Catalogue.row` (so the same rows and the same refusals; each
opens its files under the same root checks). They are started with the ``spawn`` method,
not forked: the walk runs in a request thread of the browser's server, and a fork there
would copy the other threads' locks in whatever state they are.

A reading process that fails (killed, out of memory, a result that cannot be sent back)
breaks the pool: its chunks, and every chunk not read yet, are then read in the walk's
process, and the list says so in a note; the rows are never fewer. The reading processes
ignore SIGINT (Ctrl-C at a terminal reaches the whole process group: the browser stops
them, rather than each printing a traceback) and are stopped when the walk ends, however
it ends: the pool is shut down with the chunks not started cancelled, after at most the
chunks being read (tens of milliseconds).

Only `nhbench.browse._scan` imports this module, and only for such a walk.
"""

from __future__ import annotations

import os
import signal
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from concurrent.futures import Future

    from ._scan import Catalogue, Entry

__all__ = ["CHUNK", "MAX_READERS", "readers", "summarise_in_pool"]

#: Files a reading process is given at a time: about 10-40 ms of reading, so that the
#: processes finish together, while the names sent and the rows sent back stay small.
CHUNK = 32
#: Reading processes at most, besides the walk's own (each costs about a third of a
#: second of CPU to start: the interpreter, pydantic and the loader).
MAX_READERS = 3

# The catalogue of each root a reading process was given (one per process in practice).
_catalogues: dict[str, Catalogue] = {}


def cpu_times() -> dict[int, tuple[int, int]] | None:
    """Per CPU this process may run on, its (idle, total) time in clock ticks from
    ``/proc/stat`` (idle counts I/O wait); None where it cannot be read."""
    try:
        usable = os.sched_getaffinity(0)
        with open("/proc/stat", "rb") as f:
            text = f.read().decode("ascii", "replace")
    except (AttributeError, OSError):
        return None
    times = {}
    for line in text.splitlines():
        if line.startswith("cpu") and line[3:4].isdigit():
            name, *values = line.split()
            try:
                cpu, numbers = int(name[3:]), [int(v) for v in values[:8]]
            except ValueError:
                return None
            if cpu in usable and len(numbers) >= 5:
                times[cpu] = (numbers[3] + numbers[4], sum(numbers))
    return times or None


# Clock ticks of all usable CPUs below which the idle time of a walk says too little (at
# 100 a second, 25 ms of two CPUs; the walk of 5,000 new files takes about 35 ms): the load
# average decides instead.
_MIN_TICKS = 5
# A CPU idle for 70 % of the walk counts as idle: the tick counts of a short walk are
# coarse (3 idle ticks of 7 on two CPUs, one of them the walk's own, is one idle CPU).
_IDLE_SHARE = 0.7


def readers(since: dict[int, tuple[int, int]] | None = None) -> int:
    """Reading processes worth starting for a big walk now: one per CPU this process may
    run on (`os.sched_getaffinity`) beyond its own, as many as were idle since `since`
    (`cpu_times` when the walk began; the walk's own CPU counts as busy) or, without it,
    by the one-minute load average, at most `MAX_READERS`; 0: read in this process.

    Idle CPUs, because a reader only gains when it has a CPU to itself: Linux's automatic
    process groups (``kernel.sched_autogroup_enabled``) give the walk's process and its
    readers one session's share of a busy machine between them, so on a loaded machine
    they read no faster and each reader adds its start and its share of the cache.
    Measured on 2 CPUs (docs/benchmarks.md, "The never-browsed scan in more than one
    process"): 5,000 files in 1.9-2.2 s with a reader against 2.6-2.9 s without when the
    CPUs were idle, but 6.0-6.9 s against 4.3-5.4 s at load 14. The one-minute load
    average lags: it still said 3 to 6 when the CPUs had been idle for a minute."""
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = os.cpu_count() or 1
    idle = None
    now = cpu_times() if since is not None else None
    if since is not None and now is not None:
        idle_ticks = sum(now[c][0] - since[c][0] for c in now if c in since)
        total_ticks = sum(now[c][1] - since[c][1] for c in now if c in since)
        if total_ticks >= _MIN_TICKS:
            idle = int(usable * max(0, idle_ticks) / total_ticks + 1 - _IDLE_SHARE)
    if idle is None:
        try:
            idle = int(usable - os.getloadavg()[0])
        except OSError:
            idle = usable - 1
    return max(0, min(usable - 1, idle, MAX_READERS))


def _start_reader() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _read_chunk(root: str, relatives: list[str]) -> list[Entry]:
    """In a reading process: the rows of `relatives` under `root`, as the walk's process
    makes them (`Catalogue.row`)."""
    catalogue = _catalogues.get(root)
    if catalogue is None:
        from ._scan import Catalogue

        catalogue = _catalogues[root] = Catalogue(root)
    return [catalogue.row(relative) for relative in relatives]


def summarise_in_pool(catalogue: Catalogue, relatives: list[str], count: int,
                      ) -> tuple[list[Entry], str]:
    """The rows of `relatives` (in their order), read here and in `count` reading
    processes, and a note for the list ("" when the reading processes did their part)."""
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    chunks = [relatives[i:i + CHUNK] for i in range(0, len(relatives), CHUNK)]
    rows: list[list[Entry] | None] = [None] * len(chunks)
    root = str(catalogue.root)
    failure = ""
    pool: ProcessPoolExecutor | None = None
    try:
        pool = ProcessPoolExecutor(count, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=_start_reader)
    except (OSError, ValueError, ImportError) as exc:
        failure = _reason(exc)
    in_flight: dict[Future[list[Entry]], int] = {}
    given = 0
    try:
        while given < len(chunks) or in_flight:
            # Two chunks queued per reading process, so that none waits for its next.
            while not failure and len(in_flight) < 2 * count and given < len(chunks):
                assert pool is not None
                try:
                    in_flight[pool.submit(_read_chunk, root, chunks[given])] = given
                except (RuntimeError, OSError) as exc:  # a broken pool refuses new work
                    failure = _reason(exc)
                    break
                given += 1
            for future in [f for f in in_flight if f.done()]:
                index = in_flight.pop(future)
                try:
                    rows[index] = future.result()
                except Exception as exc:  # noqa: BLE001 - read here instead, below
                    failure = failure or _reason(exc)
            if given < len(chunks):
                rows[given] = [catalogue.row(relative) for relative in chunks[given]]
                given += 1
            elif in_flight:
                wait(in_flight, return_when=FIRST_COMPLETED)
    finally:
        if pool is not None:
            # However the walk ends: the chunks not started are dropped, the reading
            # processes finish the ones they are reading and exit.
            pool.shutdown(wait=True, cancel_futures=True)
    # What a failed reading process did not give back is read here.
    made: list[Entry] = []
    for index, chunk in enumerate(chunks):
        got = rows[index]
        made.extend(got if got is not None else [catalogue.row(relative) for relative in chunk])
    note = "" if not failure else (
        f"reading files in other processes failed ({failure}): they were read in this one")
    return made, note


def _reason(exc: BaseException) -> str:
    # The failure in one line for the list's note (BrokenProcessPool says which process).
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
