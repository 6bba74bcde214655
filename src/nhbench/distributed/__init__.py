"""Load from several machines: one load actor per node of a Ray cluster (docs/distributed.md).

`make_benchmark` is the one place that decides where a run happens: a plain `Benchmark` on
this machine, or a `ClusterBenchmark` when the options name a Ray cluster (``--ray``). The
CLI's ``run``, the sweep's steps and adapt's steps all go through it, so every layer above
accepts the Ray options without knowing Ray. `run` is ``nhbench.run``.

Ray is an optional extra (``pip install 'nhbench[ray]'``): nothing here imports it until a
cluster run starts (``_cluster``), so ``import nhbench`` stays light.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._progress import Progress
from .._result import Result
from .._run import Benchmark
from .._timeline import IntervalRecord
from ..options import Options, make_options
from ._cluster import Cluster, ClusterBenchmark, merge_core, merge_intervals, merge_stats

__all__ = ["Cluster", "ClusterBenchmark", "make_benchmark", "merge_core", "merge_intervals",
           "merge_stats", "run"]


def make_benchmark(options: Options) -> Benchmark | ClusterBenchmark:
    """The run `options` describe: on a Ray cluster with ``ray`` set, else on this machine.

    Both have ``run(on_progress, on_interval) -> Result`` and ``stop()`` (safe from a signal
    handler or another thread)."""
    if options.ray is not None:
        return ClusterBenchmark(options)
    return Benchmark(options)


def run(
    uri: str | Options | None = None,
    /,
    *,
    cluster: Cluster | str | None = None,
    on_progress: Callable[[Progress], object] | None = None,
    on_interval: Callable[[IntervalRecord], object] | None = None,
    **options: Any,
) -> Result:
    """Run a benchmark and return its `Result` (``nhbench.run``).

    ``nhbench.run("http://127.0.0.1:8080/", rps=1000, duration="10s")``, or
    ``nhbench.run(Options(...))``; keywords override the fields of a given Options. Invalid
    options raise `OptionsError`, an unresolvable host `ResolveError`. A run that happened but
    failed (connection refused, error responses, a fired failure predicate, or no request
    succeeded at all) returns a Result with ``success`` False and does not raise: the
    Result is the measurement, and a notebook keeps it. ``result.no_success_reason`` says
    why a run without any 2xx response failed (None with ``allow_no_success=True``).

    ``cluster`` generates the load from a Ray cluster (docs/distributed.md): a `Cluster`, or
    a Ray address (``"auto"``, ``"HOST:PORT"``, ``"ray://HOST:PORT"``), the same as the
    ``ray=``/``hosts=`` options.
    """
    if cluster is not None:
        if isinstance(cluster, Cluster):
            options = {**options, **cluster.options()}
        else:
            options = {**options, "ray": cluster}
    resolved = make_options(uri, **options)
    return make_benchmark(resolved).run(on_progress, on_interval)
