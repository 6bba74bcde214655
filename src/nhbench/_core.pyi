"""Type stub of the compiled extension nhbench._core (see docs/architecture.md)."""

from typing import Any, TypedDict

__version__: str
HIST_LOWEST: int
HIST_HIGHEST: int
HIST_SIGFIG: int

class HistogramDict(TypedDict):
    count: int
    min: int
    max: int
    sum: float
    sumsq: float
    counts: list[tuple[int, int]]

class StreamDict(TypedDict):
    count: int
    min: int
    max: int
    sum: float
    sumsq: float

class WorkerResultDict(TypedDict):
    execution_start_ns: int
    execution_duration_ns: int
    counters: dict[str, int]
    histograms: dict[str, HistogramDict]
    streams: dict[str, StreamDict]

class ResultDict(TypedDict):
    execution_start_ns: int
    terminated_by: str
    failed_predicates: list[str]
    error: str | None
    workers: list[WorkerResultDict]
    # "global" is a keyword, so this entry is only reachable as result["global"].

class ProgressDict(TypedDict):
    elapsed: float
    counters: dict[str, int]

class ClientRun:
    def __init__(self, config: dict[str, Any]) -> None: ...
    def start(self) -> None: ...
    def wait(self, timeout: float | None = None) -> bool: ...
    def stop(self) -> None: ...
    def progress(self) -> ProgressDict: ...
    def result(self) -> dict[str, Any]: ...

class Server:
    addresses: list[tuple[str, int]]
    def __init__(self, config: dict[str, Any]) -> None: ...
    def start(self) -> None: ...
    def stats(self) -> dict[str, int]: ...
    def stop(self) -> None: ...

def histogram_counts(values: list[int]) -> HistogramDict: ...
