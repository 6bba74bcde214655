"""The package's function face: what ``nhbench.run(...)`` is.

The public functions live here, above the layers that do the work, the way httpx keeps
``httpx.get`` in ``httpx/_api.py``: `run` turns keywords into `Options` and hands them to
`make_benchmark`, which decides whether the run happens on this machine or on a Ray cluster.
``nhbench/__init__.py`` imports this module on the first access to ``nhbench.run``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._progress import Progress
from ._result import Result
from ._timeline import IntervalRecord
from .distributed import Cluster, make_benchmark
from .options import Options, make_options

__all__ = ["run"]


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
