"""Load from several machines: one load actor per node of a Ray cluster (docs/distributed.md).

`make_benchmark` is the one place that decides where a run happens: a plain `Benchmark` on
this machine, a `ClusterBenchmark` when the options name a Ray cluster (``--ray``), or a
`LoadgenBenchmark` when they name load generators (``--loadgen``: SSH, containers). The
CLI's ``run``, the sweep's steps and adapt's steps all go through it, so every layer above
accepts the Ray options without knowing Ray, and so does ``nhbench.run`` (`nhbench._api`).
A campaign (the sweep's and adapt's steps) and the service keep one `RaySession` for all
their runs: one cluster connection and one set of load actors instead of one per run.

Ray is an optional extra (``pip install 'nhbench[ray]'``): nothing here imports it until a
cluster run starts (``_cluster``), so ``import nhbench`` stays light.
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

__all__ = ["BenchmarkProtocol", "Cluster", "ClusterBenchmark", "RaySession", "make_benchmark",
           "merge_core", "merge_groups", "merge_intervals", "merge_stats"]


def make_benchmark(options: Options, session: RaySession | None = None) -> BenchmarkProtocol:
    """The run `options` describe: on a Ray cluster with ``ray`` set, else on this machine.

    Both have ``run(on_progress, on_interval) -> Result`` and ``stop()`` (safe from a signal
    handler or another thread): `BenchmarkProtocol`. A Ray run uses `session`'s connection
    and actors when given (a campaign's steps, the service's executions); other runs do not
    use it."""
    if options.ray is not None:
        return ClusterBenchmark(options, session=session)
    if options.loadgen:
        # The same steps and merge as on Ray, with agents reached over SSH, in
        # containers or as local processes instead of Ray actors (_loadgen). Imported
        # here: it loads the SSH layer (paramiko), which `import nhbench` must not.
        from ._loadgen import LoadgenBenchmark

        return LoadgenBenchmark(options)
    return Benchmark(options)
