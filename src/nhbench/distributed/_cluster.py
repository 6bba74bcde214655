"""A run on a Ray cluster: `Cluster` (where) and `ClusterBenchmark` (the run).

Issue 15 seam: the interface the CLI, the sweep and adapt use. The implementation (actors,
the scheduled start, the exact merge) replaces the bodies below.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._exceptions import RunError
from .._progress import Progress
from .._result import Result
from .._timeline import IntervalRecord
from ..options import Options

__all__ = ["Cluster", "ClusterBenchmark"]


@dataclass(frozen=True)
class Cluster:
    """A Ray cluster to generate load from: its `address` (Ray's: ``"auto"``,
    ``"HOST:PORT"``, ``"ray://HOST:PORT"``) and how many nodes to use (`hosts`, None: every
    alive node)."""

    address: str = "auto"
    hosts: int | None = None

    def options(self) -> dict[str, Any]:
        """The run options that say the same thing (``ray=``, ``hosts=``)."""
        return {"ray": self.address, "hosts": self.hosts}


class ClusterBenchmark:
    """One run on a Ray cluster, with `Benchmark`'s face: ``run()`` and ``stop()``."""

    def __init__(self, options: Options) -> None:
        self.options = options
        self._stop_requested = False

    def stop(self) -> None:
        """Ask every node's run to stop gracefully (idempotent, safe from signal handlers)."""
        self._stop_requested = True

    def run(
        self,
        on_progress: Callable[[Progress], object] | None = None,
        on_interval: Callable[[IntervalRecord], object] | None = None,
    ) -> Result:
        raise RunError("--ray: distributed runs are not implemented yet")
