"""nhbench: an L7 HTTP load tester with a C core.

It does what Envoy's Nighthawk client does, with the same option names, statistics and
output shape, and reports an exact, coordinated-omission-correct latency::

    import nhbench

    with nhbench.TestServer() as server:
        result = nhbench.run(server.url, rps=1000, duration="5s")
    print(result.latency.p(99), result.counters["benchmark.http_2xx"], result.achieved_rps)

Everything public is importable from here; the modules with a leading underscore are
implementation. Importing nhbench does not load the compiled extension: that happens when a
run or a test server starts.
"""

from ._exceptions import (
    AuthenticationError,
    CampaignError,
    CommandError,
    ConfigRejectedError,
    CoreError,
    CoreUnavailableError,
    HostError,
    HostKeyError,
    NHBenchError,
    OptionsError,
    ResolveError,
    ResultFileError,
    RunError,
    ServerError,
    SloError,
    UnreachableError,
)
from ._io import OutputError
from ._load import load_result
from ._notebook import plot_percentiles
from ._predicates import DEFAULT_FAILURE_PREDICATES
from ._progress import Progress
from ._result import Counter, Counters, HostEntry, Percentile, Result, Statistic, WorkerResult
from ._run import Benchmark
from ._server import ServerOptions, TestServer
from ._slo import SloOutcome, SloVerdict, assert_slo
from ._timeline import IntervalRecord, Timeline
from ._version import __version__
from .distributed import Cluster, run
from .options import DEFAULT_PERCENTILES, Options, format_validation_error, parse_duration
from .outputs import render, render_human, render_json

# The sweep side (campaigns, hosts, SSH with paramiko) is imported when first used, so that
# ``import nhbench`` for a plain run stays as light as it was.
_LAZY = {
    "Campaign": ("nhbench.campaign", "Campaign"),
    "load_campaign": ("nhbench.campaign", "load_campaign"),
    "run_sweep": ("nhbench.sweep", "run_sweep"),
    # Issue 15: the adaptive search (docs/adapt.md).
    "adapt": ("nhbench.adaptive", "adapt"),
    "AdaptOutcome": ("nhbench.adaptive", "AdaptOutcome"),
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        module, attribute = _LAZY[name]
        value = getattr(importlib.import_module(module), attribute)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'nhbench' has no attribute {name!r}")


__all__ = [
    "__version__",
    # running
    "run",
    "Benchmark",
    "Cluster",
    "Options",
    "Progress",
    "DEFAULT_FAILURE_PREDICATES",
    "DEFAULT_PERCENTILES",
    "parse_duration",
    "format_validation_error",
    # results
    "IntervalRecord",
    "Timeline",
    "Result",
    "WorkerResult",
    "HostEntry",
    "Statistic",
    "Percentile",
    "Counter",
    "Counters",
    "render",
    "render_human",
    "render_json",
    "load_result",
    "plot_percentiles",
    # service-level objectives
    "assert_slo",
    "SloOutcome",
    "SloVerdict",
    "SloError",
    # test server
    "TestServer",
    "ServerOptions",
    # sweeps
    "run_sweep",
    "load_campaign",
    "Campaign",
    # adaptive search (issue 15)
    "adapt",
    "AdaptOutcome",
    # exceptions
    "NHBenchError",
    "OptionsError",
    "CoreUnavailableError",
    "RunError",
    "ResolveError",
    "CoreError",
    "ConfigRejectedError",
    "ServerError",
    "HostError",
    "UnreachableError",
    "HostKeyError",
    "AuthenticationError",
    "CommandError",
    "CampaignError",
    "ResultFileError",
    "OutputError",
]
