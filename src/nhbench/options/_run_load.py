"""The load of a run: rate, connections, workers and CPUs, duration and time-outs (`Rate`);
how releases meet connections (`Pool`); the address family, start delay and drain
(`Timing`). Also the default duration and the bounds over all workers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from ._flags import Flag
from ._run_model import Data, RunPart, lower
from ._values import MAX_DURATION, parse_cpu_list, parse_duration, parse_worker_count

if TYPE_CHECKING:
    from ._run import Options

__all__ = ["DEFAULT_DURATION", "Pool", "Rate", "Timing", "check_totals", "duration_default"]


UINT32_MAX = 2**32 - 1
# The core allocates each worker's pending queue (32 bytes an entry) before the run: 10 million
# entries is 320 MB of address space per worker (pages are touched only as the queue fills).
# Nighthawk's field is a uint32, but a queue of 4 billion (128 GB) failed to allocate.
MAX_PENDING_REQUESTS = 10_000_000
# Connections over all workers: each is a descriptor, and a process holds at most 1,048,576
# (Linux's default nr_open); the core also writes ~1 KB per connection before the run.
MAX_TOTAL_CONNECTIONS = 1_048_576
# HTTP/2 and HTTP/3 requests in flight over all workers: the core writes a 160-byte slot for
# each before the run, so 10 million is 1.6 GB (per worker, MAX_ACTIVE_REQUESTS).
MAX_TOTAL_ACTIVE_REQUESTS = 10_000_000
DEFAULT_DURATION = 5.0


class Rate(RunPart):
    """How much load: the rate, connections and workers, and how long the run lasts."""

    # Fortio's -qps, -c, -t and -timeout are no aliases: each means something else there
    # (a total over all connections, an exact connection count, 0 = until interrupted,
    # 0 = 3 s); `nhbench fortio load` reads them (docs/options.md, "Single-dash flags").
    rps: Annotated[float, Flag(metavar="N")] = Field(
        # The upper bound is Nighthawk's (1 to 1000000 per worker) and the C core's
        # NHB_MAX_RPS: far above what one worker can send, so overload runs stay possible.
        default=5.0, ge=0, le=1_000_000, allow_inf_nan=False,
        description="Target requests per second, per worker (at most 1000000). 0 = as fast "
        "as the connections allow (closed loop).",
    )
    connections: Annotated[int, Flag(metavar="N")] = Field(
        default=100, ge=1, le=1_000_000,
        description="Maximum concurrent connections, per worker (at most 1,048,576 over "
        "all workers).",
    )
    concurrency: Annotated[int | Literal["auto"], Flag(metavar="N|auto")] = Field(
        default=1,
        description="Number of workers (threads with their own event loop, each pinned to "
        "one CPU), or 'auto' for one per CPU in the process affinity mask.",
    )
    cpus: Annotated[tuple[int, ...] | None, Flag(metavar="LIST")] = Field(
        default=None,
        description="CPUs to pin workers to, as a cpu list such as 2,4-7. Without "
        "--concurrency, one worker per listed CPU.",
    )
    # The upper bound keeps the duration far inside the core's int64 nanoseconds (a larger
    # value overflowed there); no benchmark runs for a year, and --no-duration exists.
    duration: Annotated[float | None, Flag(metavar="TIME")] = Field(
        default=None, gt=0, le=MAX_DURATION,
        description=f"How long to send requests, in seconds or with a unit (5s, 500ms, 2m). "
        f"Default {DEFAULT_DURATION:g} s. Mutually exclusive with no_duration.",
    )
    no_duration: Annotated[bool, Flag()] = Field(
        default=False,
        description="Run until a predicate fires or the run is stopped (SIGINT/SIGTERM). "
        "The default failure predicates still apply.",
    )
    timeout: Annotated[float, Flag(metavar="TIME")] = Field(
        default=30.0, gt=0, le=3600,
        description="Connection connect timeout in seconds.",
    )
    request_timeout: Annotated[float, Flag(metavar="TIME")] = Field(
        default=30.0, ge=0, le=3600,
        description="Per-request timeout in seconds (0 = none); a timed-out request counts "
        "in benchmark.request_timeout and its connection is closed. udp:// echo: 1 s unless "
        "given, and the socket is kept (docs/protocols.md).",
    )

    @field_validator("duration", "timeout", "request_timeout", mode="before")
    @classmethod
    def _parse_duration(cls, value: object) -> object:
        return None if value is None else parse_duration(value)

    @field_validator("concurrency", mode="before")
    @classmethod
    def _parse_concurrency(cls, value: object) -> object:
        return parse_worker_count(value, 4096)

    @field_validator("cpus", mode="before")
    @classmethod
    def _parse_cpus(cls, value: object, info: ValidationInfo) -> object:
        # The CPUs that exist and the affinity mask belong to this machine and this process.
        # A result written elsewhere still has to load, so the echo of options inside a Result
        # is validated with context {"echo": True}, which checks only the syntax and bound.
        if value is None:
            return None
        echo = bool((info.context or {}).get("echo"))
        return tuple(parse_cpu_list(value, None if echo else "affinity"))


class Pool(RunPart):
    """How requests are released onto connections: queueing, reuse, pacing."""

    max_pending_requests: Annotated[int, Flag(metavar="N")] = Field(
        default=0, ge=0, le=MAX_PENDING_REQUESTS,
        description="Per worker: requests that may wait for a free connection "
        "(0 = no client-side queueing; at most 10,000,000).",
    )
    max_requests_per_connection: Annotated[int, Flag(metavar="N")] = Field(
        default=0, ge=0, le=UINT32_MAX,
        description="Requests after which a connection is closed and replaced (0 = "
        "unlimited; Nighthawk's default 4294967295 means the same).",
    )
    prefetch_connections: Annotated[bool, Flag()] = Field(
        default=False, description="Open all connections before the first request is released."
    )
    open_loop: Annotated[bool, Flag()] = Field(
        default=False,
        description="No back-pressure: a release that finds no free connection queues (up to "
        "max_pending_requests) or is dropped and counted in benchmark.pool_overflow, instead "
        "of blocking the schedule.",
    )
    sequencer_idle_strategy: Annotated[
        Literal["spin", "poll", "sleep"], Flag(metavar="spin|poll|sleep", default="")
    ] = Field(
        default="poll",
        description="How a worker waits for the next release: 'poll' (default) arms a timerfd "
        "watched by the event loop - sub-millisecond precise and cheap; 'spin' busy-polls - "
        "most precise, burns the CPU; 'sleep' uses the loop's millisecond timer - cheapest, "
        "coarsest.",
    )
    burst_size: Annotated[int, Flag(metavar="N")] = Field(
        default=0, ge=0, le=1_000_000,
        description="Release requests in bursts of this size (0 or 1 = no bursting).",
    )

    @field_validator("max_requests_per_connection")
    @classmethod
    def _unlimited_requests(cls, value: int) -> int:
        # Nighthawk's default (2^32-1) is its way of saying "unlimited"; store the same
        # meaning in one spelling so the C core has a single special value, 0.
        return 0 if value == UINT32_MAX else value

    @field_validator("sequencer_idle_strategy", mode="before")
    @classmethod
    def _lower_idle_strategy(cls, value: object) -> object:
        return lower(value)


class Timing(RunPart):
    """Around the load: the address family a name resolves to, the start delay and the drain."""

    address_family: Annotated[
        Literal["auto", "v4", "v6"], Flag(metavar="auto|v4|v6", default="")
    ] = Field(
        default="auto",
        description="Address family used when the host name resolves to several: 'auto' "
        "prefers IPv4, then IPv6.",
    )
    drain_timeout: Annotated[float, Flag(metavar="TIME")] = Field(
        default=5.0, ge=0, le=3600,
        description="After the duration ends, how long to wait for requests in flight.",
    )
    start_delay: Annotated[float, Flag(metavar="TIME")] = Field(
        default=0.2, ge=0, le=60,
        description="Time between starting the workers and the first release (connections "
        "are prefetched in it).",
    )

    @field_validator("address_family", mode="before")
    @classmethod
    def _lower_address_family(cls, value: object) -> object:
        return lower(value)

    @field_validator("drain_timeout", "start_delay", mode="before")
    @classmethod
    def _parse_phase_time(cls, value: object) -> object:
        return None if value is None else parse_duration(value)


# ---- the normalisation step and the check (their order: _run_checks) -----------------------


def duration_default(data: Data, info: ValidationInfo, model: type[BaseModel]) -> Data:
    # duration and no_duration are mutually exclusive, as in Nighthawk. The default of 5 s
    # is filled in here rather than as a field default so that an explicit duration can
    # be told apart from the default one, and so that a no_duration run echoes
    # duration=None (which validates again, unlike duration=5 with no_duration=True).
    if data.get("cpus") is not None and data.get("concurrency") is None:
        # Listing CPUs without a worker count means one worker per listed CPU. Writing
        # that down as concurrency="auto" keeps the echo of the options self-contained:
        # it means the same thing when the echo is loaded again.
        data = {**data, "concurrency": "auto"}
    no_duration = data.get("no_duration", False)
    if no_duration in (True, 1, "1") or (
        isinstance(no_duration, str) and no_duration.strip().lower() in ("true", "yes", "on")
    ):
        if data.get("duration") is not None:
            raise PydanticCustomError(
                "options_conflict",
                "{a}: mutually exclusive with {b}",
                {"a": "no_duration", "b": "duration"},
            )
    elif data.get("duration") is None:
        data = {**data, "duration": DEFAULT_DURATION}
    return data


def check_totals(options: Options, info: ValidationInfo) -> None:
    # Per worker, connections and max_active_requests are bounded by their fields; over
    # all workers (at most 4096) they are bounded too, before the core allocates them.
    if (info.context or {}).get("echo"):
        return
    streams = options.max_active_requests if options.multiplexed else 0
    if max(options.connections * 4096 - MAX_TOTAL_CONNECTIONS,
           streams * 4096 - MAX_TOTAL_ACTIVE_REQUESTS) <= 0:
        return  # no count of workers can pass the bounds
    workers = options.workers
    if options.connections * workers > MAX_TOTAL_CONNECTIONS:
        raise PydanticCustomError(
            "options_file", "{a}: {msg}",
            {"a": "connections", "msg": f"{options.connections} per worker x {workers} "
             f"workers is {options.connections * workers} connections, more than one "
             f"process can open ({MAX_TOTAL_CONNECTIONS:,})"},
        )
    if streams * workers > MAX_TOTAL_ACTIVE_REQUESTS:
        raise PydanticCustomError(
            "options_file", "{a}: {msg}",
            {"a": "max_active_requests", "msg": f"{streams} per worker x {workers} "
             f"workers is {streams * workers} requests in flight, more than "
             f"{MAX_TOTAL_ACTIVE_REQUESTS:,} (the core allocates each before the run)"},
        )
