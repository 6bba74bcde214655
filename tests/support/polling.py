"""Waiting for a condition without a fixed sleep: poll until it holds or a generous deadline
passes, so that a slow, shared machine only makes a test slower, never wrong."""

from __future__ import annotations

import time
from collections.abc import Callable

import nhbench


def wait_until(predicate: Callable[[], object], timeout: float = 10.0,
               step: float = 0.02) -> bool:
    """Whether `predicate()` became true within `timeout` seconds (checked once more at the
    end, so a condition that holds just as the deadline passes still counts)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return bool(predicate())


def settle(server: nhbench.TestServer, done: Callable[[dict], object], timeout: float = 10.0) -> dict:
    """The test server's stats once `done(stats)` holds (the last bytes of a run may still
    be on their way when the client returns), or the last ones seen."""
    deadline = time.monotonic() + timeout
    while True:
        stats = server.stats()
        if done(stats) or time.monotonic() > deadline:
            return stats
        time.sleep(0.02)
