"""Live progress: the snapshot the core hands out during a run.

The core refreshes its summed counters about every 10 ms without stopping the workers
(``ClientRun.progress()``); `Benchmark.run` reads them between its 0.1 s waits and hands a
`Progress` to the ``on_progress`` callback. The CLI's terminal display and interval lines are
`nhbench._live` (docs/live.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._groups import core_group_name
from ._names import error_total

__all__ = ["EndpointProgress", "GroupProgress", "Progress"]


@dataclass(frozen=True)
class EndpointProgress:
    """One endpoint's live share (several endpoints: ``--resolve`` with several addresses,
    ``--dns-method rr|random``, several targets), counted as `nhbench.EndpointResult`
    counts them: connections (the warm-up's included), measured requests, errors."""

    name: str
    connections: int = 0
    requests: int = 0
    errors: int = 0


@dataclass(frozen=True)
class GroupProgress:
    """One group's live counts (``--group-by``, docs/engine.md "Groups"), named as the
    result names it: requests that ended in it (responses and failures) and, of those,
    errors (all but the 2xx responses)."""

    name: str
    requests: int = 0
    errors: int = 0


def group_progress(raw: Sequence[Mapping[str, Any]], names: Sequence[str]) -> tuple[
        GroupProgress, ...]:
    """The core's live group entries (``progress()["groups"]``) named: by request kind or
    target by `names` (the plan's, in the core's order), by a header by value; the
    reserved buckets only when they took requests."""
    out: list[GroupProgress] = []
    for i, entry in enumerate(raw):
        name = core_group_name(entry, i, names)
        if name is not None:
            out.append(GroupProgress(name, int(entry.get("requests", 0)),
                                     int(entry.get("errors", 0))))
    return tuple(out)


@dataclass(frozen=True)
class Progress:
    """A live snapshot: seconds since the start, the counters summed over workers and,
    with several endpoints, each one's counts (in the result's endpoint order); with
    ``--group-by``, each group's (in the result's group order)."""

    elapsed: float
    counters: Mapping[str, int] = field(default_factory=dict)
    endpoints: Sequence[EndpointProgress] = ()
    groups: Sequence[GroupProgress] = ()

    @classmethod
    def from_core(cls, snapshot: Mapping[str, Any], endpoints: Sequence[str] = (),
                  groups: Sequence[str] = ()) -> Progress:
        """`endpoints` names the core's per-endpoint entries in order (``endpoint_i`` when
        the numbers differ, as in the result); `groups` the planned groups by request kind
        or target (`group_progress`)."""
        raw = list(snapshot.get("endpoints") or ())
        names = list(endpoints) if len(endpoints) == len(raw) else [
            f"endpoint_{i}" for i in range(len(raw))]
        return cls(
            elapsed=float(snapshot.get("elapsed", 0.0)),
            counters={k: int(v) for k, v in (snapshot.get("counters") or {}).items()},
            endpoints=tuple(
                EndpointProgress(name, int(e.get("connections", 0)), int(e.get("requests", 0)),
                                 int(e.get("errors", 0)))
                for name, e in zip(names, raw, strict=True)),
            groups=group_progress(snapshot.get("groups") or (), groups),
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
