"""`LoadgenSession`: the ``--loadgen`` agents of a campaign, kept from one run to the next.

Its own module, apart from `_loadgen`: `nhbench.distributed` exports it, and `import nhbench`
must not load the SSH layer (paramiko) that `_loadgen` imports. The session only holds what
`LoadgenBenchmark` opened (`_loadgen._Generator`: the SSH connection or exec process and the
agent link on it) and ends it; opening, checking and reusing are `LoadgenBenchmark`'s.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Collection
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._loadgen import _Generator

__all__ = ["LoadgenSession"]


class LoadgenSession:
    """The agents of ``--loadgen`` load generators, kept open for many runs: `RaySession`'s
    rules with SSH connections, ``docker exec``/``kubectl exec`` processes and agents in
    place of a Ray connection and actors.

    ``with LoadgenSession() as session: make_benchmark(options, session=session).run()`` for
    each run: the first connects to every load generator and starts its agent; later runs
    with the same load generators (the same ``--loadgen`` texts and the same
    ``--loadgen-python``, key, known_hosts, password variable and jump host) reuse both, each
    with its own options (the agent builds the core's objects per run). A run whose load
    generators differ starts agents only on those new to the session and ends those no
    longer used. A run that fails once its agents had work (a lost host, a watchdog,
    Ctrl-C) ends every agent, so the next run starts fresh ones; a run refused before that
    (a bad option, a pre-flight refusal) leaves them as they were. ``close()`` (the end of
    the ``with``) ends every agent and connection the session holds.

    One run at a time: a second one waits for the first. `connections` counts the SSH
    connections opened, `agents_started` the agents started (over SSH or as exec
    processes) (docs/distributed.md, "Campaigns with --loadgen")."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._generators: list[_Generator] = []
        # The last run's arming time on these agents (None: no run on them yet).
        self._armed_in: float | None = None
        self.connections = 0
        self.agents_started = 0
        self.last_used = time.monotonic()

    def __enter__(self) -> LoadgenSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def agents(self) -> int:
        """How many agents the session holds now."""
        return len(self._generators)

    def close(self) -> None:
        """End every agent and its connection (idempotent)."""
        with self._lock:
            self._discard()

    def _discard(self, keep: Collection[tuple[str, ...]] = ()) -> None:
        """End the agents, but those whose key (`_Generator.key`) is in `keep`."""
        kept = []
        for generator in self._generators:
            if generator.key in keep:
                kept.append(generator)
            else:
                generator.end()
        self._generators = kept
        if not kept:
            self._armed_in = None
