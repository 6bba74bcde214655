"""Traces: where spans go (`--trace`) and which requests are traced (`--trace-sample-rate`).

docs/telemetry.md, "Traces". ``--trace zipkin://HOST:PORT/api/v2/spans`` is Nighthawk's
flag and value (Zipkin JSON v2 over HTTP POST, B3 and W3C headers on the wire);
``--trace otlp://HOST:PORT[/v1/traces]`` sends OTLP/HTTP protobuf spans instead (W3C
headers). The metrics pushed over OTLP have their own flag (``--otlp-endpoint``): a traces
collector and a metrics collector are often not the same service.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, NamedTuple
from urllib.parse import urlsplit

from pydantic import Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from ._flags import Flag
from ._run_model import RunPart

if TYPE_CHECKING:
    from ._run import Options

__all__ = ["TraceTarget", "Traces", "check_trace", "trace_target"]

# Nighthawk traces every request it measures (Envoy's ClientForced decision): the default.
DEFAULT_TRACE_SAMPLE_RATE = 1.0
_DEFAULT_PATHS = {"zipkin": "/api/v2/spans", "otlp": "/v1/traces"}


class TraceTarget(NamedTuple):
    """Where a run's spans go: the format and the HTTP URL they are POSTed to."""

    kind: str  # "zipkin" or "otlp"
    url: str


def trace_target(uri: str) -> TraceTarget:
    """``zipkin://host:port/path`` or ``otlp://host:port/path`` as the collector's URL;
    ValueError naming what is wrong."""
    parts = urlsplit(uri)
    kind = parts.scheme.lower()
    if kind not in _DEFAULT_PATHS:
        raise ValueError(f"must be zipkin://HOST:PORT/api/v2/spans or otlp://HOST:PORT/v1/traces "
                         f"(got {uri!r})")
    try:
        port = parts.port
    except ValueError:
        port = None
    if not parts.hostname or port is None:
        raise ValueError(f"needs a host and a port (got {uri!r})")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise ValueError(f"takes no query, fragment or user (got {uri!r})")
    path = parts.path or _DEFAULT_PATHS[kind]
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return TraceTarget(kind, f"http://{host}:{port}{path}")


class Traces(RunPart):
    """Traces: a span per sampled request, to Zipkin or an OTLP collector."""

    trace: Annotated[str | None, Flag(metavar="URI", default="", group="Traces")] = Field(
        default=None,
        description="Send a span per traced request to this collector: "
        "zipkin://HOST:PORT/api/v2/spans (Nighthawk's flag: Zipkin JSON v2; requests carry "
        "B3 and W3C traceparent headers) or otlp://HOST:PORT/v1/traces (OTLP/HTTP protobuf, "
        "needs pip install 'nhbench[traces]'; W3C traceparent). HTTP/1.1, HTTP/2, HTTP/3 "
        "and gRPC.",
    )
    trace_sample_rate: Annotated[
        float | None, Flag(metavar="FRACTION", default="1", group="Traces")
    ] = Field(
        default=None, gt=0, le=1,
        description="The fraction of requests traced, drawn at random per request (0.01: "
        "one in a hundred). Default 1: every request, as Nighthawk.",
    )

    @field_validator("trace", mode="before")
    @classmethod
    def _parse_trace(cls, value: object, info: ValidationInfo) -> object:
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            return value
        trace_target(value)
        return value

    @property
    def trace_rate(self) -> float:
        """The fraction the core samples: 0 without --trace."""
        if self.trace is None:
            return 0.0
        return (self.trace_sample_rate if self.trace_sample_rate is not None
                else DEFAULT_TRACE_SAMPLE_RATE)


def check_trace(options: Options, info: ValidationInfo) -> None:
    """A sample rate without a collector, and protocols the core cannot trace, are refused
    by name rather than ignored."""
    del info
    if options.trace is None:
        if options.trace_sample_rate is not None:
            raise PydanticCustomError("options_file", "{a}: {msg}", {
                "a": "trace_sample_rate", "msg": "needs --trace (where the spans go)"})
        return
    scheme = options.target.scheme if options.uri else "http"
    if scheme not in ("tcp", "udp"):
        return
    what = f"{scheme}:// echo (no HTTP request carries the trace headers)"
    raise PydanticCustomError("options_file", "{a}: {msg}", {
        "a": "trace", "msg": f"not supported with {what}; HTTP/1.1, HTTP/2, HTTP/3 and gRPC "
        "only"})
