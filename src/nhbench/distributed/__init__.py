"""Load from several machines: one load actor per node of a Ray cluster (docs/distributed.md).

`make_benchmark` is the one place that decides where a run happens: a plain `Benchmark` on
this machine, a `ClusterBenchmark` when the options name a Ray cluster (``--ray``), or a
`LoadgenBenchmark` when they name load generators (``--loadgen``: SSH, containers). The
CLI's ``run``, the sweep's steps and adapt's steps all go through it, so every layer above
accepts the Ray options without knowing Ray, and so does ``nhbench.run`` (`nhbench._api`).
A campaign (the sweep's and adapt's steps) and the service keep one session for all their
runs (`make_session`): on Ray a `RaySession` (one cluster connection and one set of load
actors instead of one per run), with ``--loadgen`` a `LoadgenSession` (one SSH connection or
exec process and one agent per load generator, the same rules).

Ray is an optional extra (``pip install 'nhbench[ray]'``): nothing here imports it until a
cluster run starts (``_cluster``), and the SSH layer (paramiko) only when a ``--loadgen`` run
starts (``_loadgen``; `LoadgenSession` is apart from it), so ``import nhbench`` stays light.
"""

from __future__ import annotations

from .._run import Benchmark, BenchmarkProtocol
from ..options import Options
from ._cluster import (
    Cluster,
    ClusterBenchmark,
    RaySession,
    merge_core,
    merge_groups,
    merge_intervals,
    merge_stats,
)
from ._loadgen_session import LoadgenSession

__all__ = ["BenchmarkProtocol", "Cluster", "ClusterBenchmark", "LoadgenSession", "RaySession",
           "Session", "make_benchmark", "make_session", "merge_core", "merge_groups",
           "merge_intervals", "merge_stats"]

#: What a campaign or the service keeps across runs (`make_session`).
Session = RaySession | LoadgenSession


def make_session(options: Options) -> Session | None:
    """A new session for runs placed as `options` place them: a `RaySession` with ``ray``,
    a `LoadgenSession` with ``loadgen``, None for a run on this machine (nothing to keep).
    Nothing connects before the first run."""
    if options.ray is not None:
        return RaySession()
    if options.loadgen:
        return LoadgenSession()
    return None


def make_benchmark(options: Options, session: Session | None = None) -> BenchmarkProtocol:
    """The run `options` describe: on a Ray cluster with ``ray`` set, from load generators
    with ``loadgen``, else on this machine.

    All have ``run(on_progress, on_interval) -> Result`` and ``stop()`` (safe from a signal
    handler or another thread): `BenchmarkProtocol`. A Ray run uses `session`'s connection
    and actors when it is a `RaySession`, a ``--loadgen`` run its agents when it is a
    `LoadgenSession` (a campaign's steps, the service's executions: `make_session`); a
    session of the other kind is refused (TypeError), and a local run uses none."""
    if session is not None and not isinstance(session, (RaySession, LoadgenSession)):
        raise TypeError(f"session: a RaySession or LoadgenSession, not {type(session).__name__}")
    if options.ray is not None:
        if isinstance(session, LoadgenSession):
            raise TypeError("session: a --ray run needs a RaySession, not a LoadgenSession")
        return ClusterBenchmark(options, session=session)
    if options.loadgen:
        if isinstance(session, RaySession):
            raise TypeError("session: a --loadgen run needs a LoadgenSession, not a RaySession")
        # The same steps and merge as on Ray, with agents reached over SSH, in
        # containers or as local processes instead of Ray actors (_loadgen). Imported
        # here: it loads the SSH layer (paramiko), which `import nhbench` must not.
        from ._loadgen import LoadgenBenchmark

        return LoadgenBenchmark(options, session=session)
    return Benchmark(options)
