"""nhbench: an L7 HTTP load tester with a C core.

It does what Envoy's Nighthawk client does, with the same option names, statistics and
output shape, and reports an exact, coordinated-omission-correct latency::

    import nhbench

    with nhbench.TestServer() as server:
        result = nhbench.run(server.url, rps=1000, duration="5s")
    print(result.latency.p(99), result.counters["benchmark.http_2xx"], result.achieved_rps)

Everything public is importable from here; the modules with a leading underscore are
implementation. Importing nhbench loads none of them, nor pydantic or the compiled extension:
each public name is imported on first use, the extension when a run or a test server starts.
"""

# Every public name is imported when first used (PEP 562), not at ``import nhbench``: the
# option and result models are pydantic classes, and loading pydantic, hdrh and the modules
# behind them cost about 200 ms, which every ``nhbench --version``, pytest session (the
# plugin imports nhbench) and scripted run paid whether or not it used them
# (docs/benchmarks.md, "Start-up"). ``nhbench.X`` and ``from nhbench import X`` give the
# same object as before; the import happens on that first access instead. The block below
# is what type checkers read: the same imports, as if done eagerly.
# TYPE_CHECKING is defined here rather than imported, since importing typing alone would be
# a third of what ``import nhbench`` costs; mypy treats any TYPE_CHECKING as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._api import run
    from ._compare import Comparison, StatisticComparison, compare
    from ._exceptions import (
        AuthenticationError,
        CalibrationError,
        CampaignError,
        CommandError,
        ConfigRejectedError,
        CoreError,
        CoreUnavailableError,
        HostError,
        HostKeyError,
        K8sError,
        NHBenchError,
        OptionsError,
        ResolveError,
        ResultFileError,
        RunError,
        RunRefusedError,
        ServerError,
        SloError,
        SyncError,
        UnreachableError,
    )
    from ._histogram import HistogramDecodeError
    from ._input import InputError
    from ._io import OutputError
    from ._load import load_result
    from ._notebook import plot_percentiles
    from ._predicates import DEFAULT_FAILURE_PREDICATES
    from ._progress import Progress
    from ._result import (
        Counter,
        Counters,
        EndpointResult,
        GroupResult,
        Groups,
        HostEntry,
        Percentile,
        Result,
        Statistic,
        WorkerResult,
    )
    from ._run import Benchmark
    from ._server import ServerOptions, TestServer
    from ._slo import SloOutcome, SloVerdict, assert_slo
    from ._timeline import IntervalRecord, Timeline
    from ._version import __version__
    from .adaptive import AdaptOutcome, adapt
    from .campaign import Campaign, load_campaign
    from .distributed import Cluster
    from .options import DEFAULT_PERCENTILES, Options, format_validation_error, parse_duration
    from .outputs import render, render_human, render_json
    from .sweep import run_sweep
del TYPE_CHECKING

# Public name -> (module, attribute). The sweep side (campaigns, hosts, SSH with paramiko)
# and the adaptive search (docs/adapt.md) were already loaded this way.
_LAZY = {
    **{name: ("nhbench._exceptions", name) for name in (
        "AuthenticationError", "CalibrationError", "CampaignError", "CommandError", "ConfigRejectedError",
        "CoreError", "CoreUnavailableError", "HostError", "HostKeyError", "K8sError", "NHBenchError",
        "OptionsError", "ResolveError", "ResultFileError", "RunError", "RunRefusedError",
        "ServerError",
        "SloError", "SyncError", "UnreachableError")},
    "OutputError": ("nhbench._io", "OutputError"),
    "InputError": ("nhbench._input", "InputError"),
    "HistogramDecodeError": ("nhbench._histogram", "HistogramDecodeError"),
    "load_result": ("nhbench._load", "load_result"),
    **{name: ("nhbench._compare", name) for name in (
        "Comparison", "StatisticComparison", "compare")},
    "plot_percentiles": ("nhbench._notebook", "plot_percentiles"),
    "DEFAULT_FAILURE_PREDICATES": ("nhbench._predicates", "DEFAULT_FAILURE_PREDICATES"),
    "Progress": ("nhbench._progress", "Progress"),
    **{name: ("nhbench._result", name) for name in (
        "Counter", "Counters", "EndpointResult", "GroupResult", "Groups", "HostEntry",
        "Percentile", "Result", "Statistic", "WorkerResult")},
    "Benchmark": ("nhbench._run", "Benchmark"),
    "ServerOptions": ("nhbench._server", "ServerOptions"),
    "TestServer": ("nhbench._server", "TestServer"),
    "SloOutcome": ("nhbench._slo", "SloOutcome"),
    "SloVerdict": ("nhbench._slo", "SloVerdict"),
    "assert_slo": ("nhbench._slo", "assert_slo"),
    "IntervalRecord": ("nhbench._timeline", "IntervalRecord"),
    "Timeline": ("nhbench._timeline", "Timeline"),
    "__version__": ("nhbench._version", "__version__"),
    "Cluster": ("nhbench.distributed", "Cluster"),
    "run": ("nhbench._api", "run"),
    "DEFAULT_PERCENTILES": ("nhbench.options", "DEFAULT_PERCENTILES"),
    "Options": ("nhbench.options", "Options"),
    "format_validation_error": ("nhbench.options", "format_validation_error"),
    "parse_duration": ("nhbench.options", "parse_duration"),
    "render": ("nhbench.outputs", "render"),
    "render_human": ("nhbench.outputs", "render_human"),
    "render_json": ("nhbench.outputs", "render_json"),
    "Campaign": ("nhbench.campaign", "Campaign"),
    "load_campaign": ("nhbench.campaign", "load_campaign"),
    "run_sweep": ("nhbench.sweep", "run_sweep"),
    "adapt": ("nhbench.adaptive", "adapt"),
    "AdaptOutcome": ("nhbench.adaptive", "AdaptOutcome"),
}


# Submodules never imported by attribute access: running the CLI, and the compiled extension
# (loaded when a run or a test server starts, as before).
_NOT_ON_ACCESS = frozenset({"__main__", "_core"})


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        module, attribute = _LAZY[name]
        value = getattr(importlib.import_module(module), attribute)
        # Cached as a plain module attribute, so only the first access pays for the lookup.
        globals()[name] = value
        return value
    # ``import nhbench`` used to import the options, outputs, run and result modules (and
    # their subpackages), so ``nhbench.options.parse_size`` worked after it alone; a
    # submodule is imported on first access to keep that working.
    if name.isidentifier() and not name.startswith("__") and name not in _NOT_ON_ACCESS:
        import importlib
        import importlib.util

        if importlib.util.find_spec(f"{__name__}.{name}") is not None:
            return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'nhbench' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


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
    "EndpointResult",
    "GroupResult",
    "Groups",
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
    # comparing runs (docs/trust.md)
    "compare",
    "Comparison",
    "StatisticComparison",
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
    # adaptive search
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
    "CalibrationError",
    "CampaignError",
    "ResultFileError",
    "RunRefusedError",
    "K8sError",
    "SyncError",
    "OutputError",
    "InputError",
    "HistogramDecodeError",
]
