"""Watching a run: live statistics and the Prometheus endpoint (`LiveStats`), the origin
latency header and what nhbench prints (`Observation`).
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, ValidationInfo, field_validator

from ._flags import Flag
from ._run_model import RunPart, uri_scheme_of
from ._values import format_address, parse_address, parse_duration

__all__ = [
    "DEFAULT_STATS_INTERVAL",
    "MIN_STATS_INTERVAL",
    "VERBOSITY_LEVELS",
    "LiveStats",
    "Observation",
]


# Live statistics: an interval shorter than the CLI's 0.1 s wake-up would print lines faster
# than anyone reads them, with too few samples each for a p99; the core's own floor is 1 ms.
MIN_STATS_INTERVAL = 0.1
MAX_STATS_INTERVAL = 3600.0
# The interval --prometheus-listen uses when --stats-interval is not given.
DEFAULT_STATS_INTERVAL = 1.0

# observation and verbosity. A response header name longer than this is not a
# header anyone sends; the bound turns a pasted value into a clear error.
MAX_LATENCY_HEADER_NAME = 256
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# Nighthawk's --verbosity levels, most verbose first.
VERBOSITY_LEVELS: tuple[str, ...] = ("trace", "debug", "info", "warn", "error", "critical")
# Fortio's -loglevel names (and "warning") onto Nighthawk's levels. Fortio's Debug and
# Verbose are both below Info: they map onto debug, the level whose word they share.
_VERBOSITY_ALIASES = {"verbose": "debug", "warning": "warn", "fatal": "critical"}


class LiveStats(RunPart):
    """Live statistics: the interval lines and the Prometheus endpoint."""

    stats_interval: Annotated[
        float | None, Flag(metavar="TIME|off", default="", group="Live statistics")
    ] = Field(
        default=None, ge=0, le=MAX_STATS_INTERVAL,
        description="Close an interval this often: one line per interval on stderr (CLI) "
        "and one record in result.timeline (latency over time). 0 or off disables. "
        f"At least {MIN_STATS_INTERVAL:g} s. Default: 1s when stderr is a terminal (CLI), "
        "else off; with prometheus_listen, 1s; with statsd or otlp_endpoint, "
        "stats_flush_interval.",
    )
    prometheus_listen: Annotated[
        str | None, Flag(metavar="HOST:PORT", default="", group="Live statistics")
    ] = Field(
        default=None,
        description="Serve live counters and interval latencies for Prometheus on "
        "http://HOST:PORT/metrics while the run goes (needs prometheus-client: pip install "
        "'nhbench[prometheus]'). Port 0 picks a free port; the address is printed on stderr.",
    )

    @field_validator("stats_interval", mode="before")
    @classmethod
    def _parse_stats_interval(cls, value: object) -> object:
        if value is None:
            return None
        if isinstance(value, str) and value.strip().lower() in ("off", "no", "none", "false"):
            return 0.0
        seconds = parse_duration(value)
        if 0 < seconds < MIN_STATS_INTERVAL:
            raise ValueError(
                f"must be 0 (off) or at least {MIN_STATS_INTERVAL:g} s (got {value!r})"
            )
        return seconds

    @field_validator("prometheus_listen", mode="before")
    @classmethod
    def _parse_prometheus_listen(cls, value: object) -> object:
        if value is None:
            return None
        return format_address(*parse_address(value))


class Observation(RunPart):
    """The origin latency header and the verbosity of what nhbench prints."""

    latency_response_header_name: Annotated[
        str | None, Flag(metavar="NAME", default="")
    ] = Field(
        default=None,
        description="Response header whose value, a non-negative integer of nanoseconds, "
        "is recorded in the benchmark_http_client.origin_latency_statistic histogram "
        "(Nighthawk's option; the test server's "
        "--emit-previous-request-delta-in-response-header emits one). Malformed values are "
        "counted in benchmark.origin_latency_header_errors.",
    )
    stream_stats: Annotated[bool, Flag()] = Field(
        default=False,
        description="Time each response's events as they arrive (docs/engine.md \"Streaming "
        "responses\"): time_to_first_event, inter_event_gap, stream_duration and "
        "events_per_response. An event is an SSE event of a text/event-stream response, else a "
        "body piece (an HTTP/1.1 chunk or read, an HTTP/2 DATA frame, an HTTP/3 DATA piece). "
        "HTTP/1.1, HTTP/2 and HTTP/3; not gRPC.",
    )
    verbosity: Annotated[
        Literal["trace", "debug", "info", "warn", "error", "critical"],
        Flag(metavar="LEVEL", aliases=("-v", "-loglevel")),
    ] = Field(
        default="info",
        description="What nhbench prints on stderr: trace, debug (also the resolved "
        "address, the core config and per-worker counters), info (notes and live lines), "
        "warn or error (only problems), critical. Nighthawk's levels; Fortio's -loglevel "
        "names (Debug, Verbose, Info, Warning, Error, Critical, Fatal) are accepted too.",
    )

    @field_validator("latency_response_header_name", mode="before")
    @classmethod
    def _check_latency_header(cls, value: object) -> object:
        # Nighthawk lower-cases the name and treats "" as unset; the core compares names
        # case-insensitively against this lower-case form (HTTP/2 names are lower-case).
        if not isinstance(value, str):
            return value
        if value == "":
            return None
        if len(value) > MAX_LATENCY_HEADER_NAME:
            raise ValueError(f"must be a header name of at most {MAX_LATENCY_HEADER_NAME} "
                             f"characters (got {len(value)})")
        if not _TOKEN.fullmatch(value):
            raise ValueError(f"must be a header name (letters, digits and !#$%&'*+-.^_`|~; "
                             f"got {value!r})")
        return value.lower()

    @field_validator("stream_stats")
    @classmethod
    def _check_stream_stats(cls, value: bool, info: ValidationInfo) -> bool:
        # A gRPC call's messages are not events the core times yet: refused rather than
        # measured as something else.
        if value and uri_scheme_of(info) in ("grpc", "grpcs"):
            raise ValueError("not supported with grpc:// yet (HTTP/1.1, HTTP/2 and HTTP/3 "
                             "bodies only)")
        return value

    @field_validator("verbosity", mode="before")
    @classmethod
    def _parse_verbosity(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        level = value.strip().lower()
        level = _VERBOSITY_ALIASES.get(level, level)
        if level not in VERBOSITY_LEVELS:
            raise ValueError(f"must be one of {', '.join(VERBOSITY_LEVELS)} (or Fortio's Debug, "
                             f"Verbose, Info, Warning, Error, Critical, Fatal; got {value!r})")
        return level
