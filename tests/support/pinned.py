"""Runs pinned apart from the test server they load: the client on the first usable CPU,
the server on the last (one CPU shared when there is only one), so that a run's counts do
not depend on the two fighting for a core.
"""

from __future__ import annotations

import os
from typing import Any

import nhbench

CPUS = sorted(os.sched_getaffinity(0))
CLIENT_CPU = str(CPUS[0])
SERVER_CPUS = [CPUS[1] if len(CPUS) > 1 else CPUS[0]]


def served(server: nhbench.TestServer) -> int:
    """The requests the test server has answered so far (its own count)."""
    return int(server.stats()["requests"])


def run(url: str, **kw: Any) -> nhbench.Result:
    """`nhbench.run` on the client's CPU unless the test gives `cpus`."""
    kw.setdefault("cpus", CLIENT_CPU)
    return nhbench.run(url, **kw)
