"""The process's descriptor limit (RLIMIT_NOFILE): raised at a run's or server's start, and
the check that a run's connections fit under it before anything is sent.

Go raises its soft limit to the hard one at start (since Go 1.19), so Fortio can open as many
connections as the hard limit allows; a C or Python process keeps the soft limit it was
given, often 1,024. `raise_nofile` does what Go does, never above the hard limit.

What a client run holds (measured with /proc/self/fd during runs of 1 to 3 workers, HTTP/1.1
and HTTP/3, docs/benchmarks.md "Scale"): one descriptor per connection (a TCP socket, or the
UDP socket each HTTP/3 connection has of its own), `PER_WORKER` per worker (its loop's epoll,
eventfds and wake-up pipes, libuv's spare /dev/null), and what the process had open already.
`RESERVE` covers what comes after the check: the 3 descriptors the first run of a process
keeps, the resolver's sockets with DNS per connection, output and key-log files.
"""

from __future__ import annotations

import logging
import os
import resource
from pathlib import Path

__all__ = ["PER_WORKER", "RESERVE", "descriptors_needed", "limit_text", "nofile_refusal",
           "open_descriptors", "raise_nofile"]

_log = logging.getLogger("nhbench")

PER_WORKER = 6
RESERVE = 16


def _hard_cap(hard: int) -> int:
    # An unlimited hard limit still stops at nr_open, the most setrlimit() accepts.
    if hard != resource.RLIM_INFINITY:
        return hard
    try:
        return int(Path("/proc/sys/fs/nr_open").read_text())
    except (OSError, ValueError):
        return 1_048_576


def raise_nofile(what: str = "run") -> tuple[int, int, int]:
    """Raise the soft RLIMIT_NOFILE to the hard limit (never above it) and return (soft
    before, soft now, hard), logged at DEBUG (``--verbosity debug``); a limit that could not
be raised at INFO."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = _hard_cap(hard)
    if soft == resource.RLIM_INFINITY or soft >= target:
        _log.debug("%s: RLIMIT_NOFILE soft %s, hard %s (already at the hard limit)",
                   what, limit_text(soft), limit_text(hard))
        return soft, soft, hard
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (OSError, ValueError) as exc:
        _log.info("%s: RLIMIT_NOFILE soft %d, hard %s: could not raise it (%s)",
                  what, soft, limit_text(hard), exc)
        return soft, soft, hard
    _log.debug("%s: RLIMIT_NOFILE soft limit raised from %d to %d (the hard limit%s)",
              what, soft, target, "" if target == hard else ", capped by fs.nr_open")
    return soft, target, hard


def limit_text(limit: int) -> str:
    """A limit for people: the number, or "unlimited"."""
    return "unlimited" if limit == resource.RLIM_INFINITY else str(limit)


def open_descriptors() -> int:
    """The descriptors this process has open now (0 where /proc is not there)."""
    try:
        return len(os.listdir("/proc/self/fd")) - 1  # the listing's own
    except OSError:
        return 0


def descriptors_needed(connections: int, workers: int) -> int:
    """What a run of `connections` per worker over `workers` workers needs in all."""
    return open_descriptors() + workers * (connections + PER_WORKER) + RESERVE


def nofile_refusal(connections: int, workers: int) -> str | None:
    """None when a run of `connections` per worker over `workers` workers fits under the
    soft limit now (after `raise_nofile`); otherwise the refusal's text, which follows the
    option's name."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return None
    needed = descriptors_needed(connections, workers)
    if needed <= soft:
        return None
    per = (f"{connections:,} connections per worker x {workers} workers" if workers > 1
           else f"{connections:,} connections")
    most = max((soft - needed) // workers + connections, 0)
    limit = (f"RLIMIT_NOFILE's hard limit of {soft:,}" if soft == hard
             else f"RLIMIT_NOFILE's soft limit of {soft:,} (hard {limit_text(hard)})")
    return (f"{per} need {needed:,} descriptors (1 per connection, {PER_WORKER} per worker, "
            f"{needed - workers * (connections + PER_WORKER):,} for the rest of the process), "
            f"more than {limit}; at most {most:,} connections per worker fit")
