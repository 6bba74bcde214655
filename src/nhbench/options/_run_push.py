"""Pushed metrics (docs/telemetry.md): statsd sinks, an OTLP/HTTP endpoint and how often
they are flushed (`PushedMetrics`), and the check that ties them to the live intervals.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, ValidationInfo, field_validator

from ._flags import Flag
from ._run_model import RunPart, lower
from ._values import as_tuple, format_address, parse_address, parse_duration

__all__ = ["DEFAULT_FLUSH_INTERVAL", "MIN_FLUSH_INTERVAL", "PushedMetrics",
           "check_pushed_metrics"]

#: Nighthawk's default --stats-flush-interval (options_impl.h), also nhbench's.
DEFAULT_FLUSH_INTERVAL = 5.0
# The same bounds as --stats-interval: a flush happens when an interval closes.
MIN_FLUSH_INTERVAL = 0.1
MAX_FLUSH_INTERVAL = 3600.0
_STATSD_HELP = "must be [udp://|tcp://]HOST:PORT, such as 127.0.0.1:8125 or tcp://[::1]:8125"
# Envoy's StatsdSink prefix when none is configured (statsd.h getDefaultPrefix).
DEFAULT_STATSD_PREFIX = "envoy"


def _statsd_address(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{_STATSD_HELP} (got {value!r})")
    text = value.strip()
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "udp", text
    scheme = scheme.lower()
    if scheme not in ("udp", "tcp"):
        raise ValueError(f"{_STATSD_HELP}: the scheme is udp or tcp (got {value!r})")
    try:
        host, port = parse_address(rest)
    except ValueError:
        raise ValueError(f"{_STATSD_HELP} (got {value!r})") from None
    if port == 0:
        raise ValueError(f"{_STATSD_HELP}: port 0 is not a destination (got {value!r})")
    return f"{scheme}://{format_address(host, port)}"


class PushedMetrics(RunPart):
    """Metrics pushed while the run goes: statsd and OTLP/HTTP."""

    statsd: Annotated[
        tuple[str, ...],
        Flag(metavar="[udp://|tcp://]HOST:PORT", append=True, group="Pushed metrics"),
    ] = Field(
        default=(),
        description="Push counters, latency timers and gauges to this statsd server at every "
        "flush, in Envoy's StatsdSink line format and Nighthawk's counter names "
        "(docs/telemetry.md). UDP unless tcp:// is given; repeatable.",
    )
    statsd_prefix: Annotated[
        str, Flag(metavar="PREFIX", group="Pushed metrics")
    ] = Field(
        default=DEFAULT_STATSD_PREFIX,
        description="The first component of every statsd name (Envoy's StatsdSink prefix).",
    )
    otlp_endpoint: Annotated[
        str | None, Flag(metavar="URL", default="", group="Pushed metrics")
    ] = Field(
        default=None,
        description="Push OpenTelemetry metrics over OTLP/HTTP (protobuf) to this URL at "
        "every flush, such as http://127.0.0.1:4318/v1/metrics: counters and the latency as "
        "an explicit-bucket histogram (needs the otlp extra: pip install 'nhbench[otlp]'). "
        "OTEL_EXPORTER_OTLP_HEADERS and OTEL_RESOURCE_ATTRIBUTES are honoured.",
    )
    otlp_temporality: Annotated[
        Literal["cumulative", "delta"],
        Flag(metavar="cumulative|delta", group="Pushed metrics"),
    ] = Field(
        default="cumulative",
        description="cumulative (totals since the run started, what Prometheus takes) or "
        "delta (each push carries its own stretch of time).",
    )
    stats_flush_interval: Annotated[
        float | None, Flag(metavar="TIME", default="5s", group="Pushed metrics")
    ] = Field(
        default=None, ge=MIN_FLUSH_INTERVAL, le=MAX_FLUSH_INTERVAL,
        description="Push to the statsd and OTLP sinks this often (Nighthawk's "
        f"--stats-flush-interval), at least {MIN_FLUSH_INTERVAL:g} s; rounded up to a whole "
        "number of stats_interval intervals, which default to it. The run's end always "
        "flushes what is left.",
    )

    @field_validator("statsd", mode="before")
    @classmethod
    def _parse_statsd(cls, value: object) -> object:
        items = as_tuple(value)
        if not isinstance(items, (list, tuple)):
            return items
        return tuple(_statsd_address(item) for item in items)

    @field_validator("statsd_prefix", mode="before")
    @classmethod
    def _check_prefix(cls, value: object) -> object:
        if isinstance(value, str) and (not value or any(c in value for c in ":|@\n\r ")):
            # These characters end a statsd name: a name with one would be read as another
            # metric, or dropped, by the server.
            raise ValueError(f"must be a non-empty name without ':', '|', '@', spaces or line "
                             f"breaks (got {value!r})")
        return value

    @field_validator("otlp_endpoint", mode="before")
    @classmethod
    def _check_otlp_endpoint(cls, value: object) -> object:
        if value is None or not isinstance(value, str):
            return value
        parts = urlsplit(value.strip())
        if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
            raise ValueError(f"must be an http:// or https:// URL, such as "
                             f"http://127.0.0.1:4318/v1/metrics (got {value!r})")
        try:
            parts.port  # noqa: B018 - raises on a port out of range
        except ValueError:
            raise ValueError(f"has a bad port (got {value!r})") from None
        return value.strip()

    @field_validator("otlp_temporality", mode="before")
    @classmethod
    def _lower_temporality(cls, value: object) -> object:
        return lower(value)

    @field_validator("stats_flush_interval", mode="before")
    @classmethod
    def _parse_flush_interval(cls, value: object) -> object:
        return None if value is None else parse_duration(value)

    @property
    def pushes_metrics(self) -> bool:
        """Whether any sink is configured (statsd or OTLP)."""
        return bool(self.statsd) or self.otlp_endpoint is not None

    @property
    def effective_flush_interval(self) -> float:
        """Seconds between pushes: `stats_flush_interval`, else Nighthawk's 5 s."""
        if self.stats_flush_interval is not None:
            return self.stats_flush_interval
        return DEFAULT_FLUSH_INTERVAL


def check_pushed_metrics(options: Any, info: ValidationInfo) -> None:
    """A flush interval needs a sink (Nighthawk's rule), and sinks need the intervals that
    carry what they push."""
    from pydantic_core import PydanticCustomError

    if options.stats_flush_interval is not None and not options.pushes_metrics:
        raise PydanticCustomError("options_needs", "{a}: needs {b}",
                                  {"a": "stats_flush_interval", "b": ["statsd", "otlp_endpoint"]})
    if options.pushes_metrics and options.stats_interval == 0:
        a = "statsd" if options.statsd else "otlp_endpoint"
        # options_over_cap names {b} in the message as the user spelled it.
        raise PydanticCustomError(
            "options_over_cap", "{a}: {msg}",
            {"a": a, "b": "stats_interval",
             "msg": "pushes the live intervals, which stats_interval off disables"})
