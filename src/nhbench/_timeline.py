"""The timeline of a run: one record per ``--stats-interval`` (docs/live.md).

The core closes an interval every ``stats_interval`` seconds (per-worker interval histograms,
swapped without locks: csrc/client/interval.c) and hands it out as a dict of
``ClientRun.take_intervals()``: its start and measured duration, the growth of every counter
over it, and the coordinated-omission-corrected latency (``scheduled_to_response``) of the
responses that arrived in it as sparse HdrHistogram counts. `IntervalRecord.from_core` turns
one into a record with the percentiles a live line, a Prometheus scrape or a plot need; the
counts themselves are not kept (a long run would carry megabytes of them), unless the caller
asks for the interval histogram (``keep_histogram``: a run always does, since ``--hdr-log``
writes them and the comparison of runs resamples them, docs/trust.md): it is then kept as
its compressed HdrHistogram encoding (a few hundred bytes to a few kilobytes), in
`IntervalRecord.hdr_histogram`, which the record's JSON carries (about half a kilobyte an
interval: 2 MB for an hour of 1 s intervals).

Over a whole run the records' ``requests`` add up exactly to the count of the run's
``scheduled_to_response`` statistic, and their ``counters`` to the run's counters.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, PrivateAttr, RootModel

from . import _histogram
from ._names import error_total

if TYPE_CHECKING:
    import pandas

__all__ = ["IntervalLatency", "IntervalRecord", "Timeline"]

_NS = 1e9
# The percentiles every record carries (fractions), besides max.
_POINTS = (0.5, 0.9, 0.99)


@dataclass(frozen=True)
class IntervalLatency:
    """The interval's latency as the core measured it (ns): exact count, sum, min and max,
    and the non-zero HdrHistogram buckets as ``(index, count)`` pairs. What pushed metrics
    need to add up to the run's totals (docs/telemetry.md)."""

    count: int
    sum: float
    min: int
    max: int
    counts: tuple[tuple[int, int], ...]


class IntervalRecord(BaseModel):
    """One interval of a run. Times are seconds; latencies are the CO-corrected latency
    (``benchmark_http_client.scheduled_to_response``) of the responses in the interval."""

    start: float = Field(description="Seconds from the first scheduled release.")
    duration: float = Field(description="Measured length of the interval, seconds.")
    requests: int = Field(description="Responses that arrived in the interval (any status).")
    rps: float = Field(description="requests / duration.")
    p50: float | None = Field(default=None, description="None when no response arrived.")
    p90: float | None = None
    p99: float | None = None
    max: float | None = None
    errors: int = Field(
        default=0, description="Errors in the interval (nhbench._names.ERROR_COUNTERS)."
    )
    blocked: int = Field(
        default=0, description="Releases that found no free connection (sequencer.blocked)."
    )
    counters: dict[str, int] = Field(
        default_factory=dict, description="Growth of each counter over the interval (non-zero)."
    )
    warmup: bool = Field(
        default=False, description="A worker may have been in its warm-up during the "
        "interval (its requests may be in it): the validity checks and the comparison of "
        "runs leave such intervals out. Written only when true.")
    hdr_histogram: str | None = Field(
        default=None,
        description="The interval's latency histogram (ns), standard compressed encoding "
        "(from_core's keep_histogram, which a run always asks for); what the comparison of "
        "runs resamples (docs/trust.md).",
    )

    # Only when asked for (from_core's keep_latency): never in JSON nor in a copy's dump.
    _latency: IntervalLatency | None = PrivateAttr(default=None)

    @property
    def latency(self) -> IntervalLatency | None:
        """The interval's exact latency data, when the record was made with keep_latency."""
        return self._latency

    @classmethod
    def from_core(cls, d: Mapping[str, Any], *, keep_histogram: bool = False,
                  keep_latency: bool = False) -> IntervalRecord:
        """A record from one dict of ``ClientRun.take_intervals()``; with `keep_histogram`
        the interval's histogram is kept, encoded, in `hdr_histogram`; with `keep_latency`
        its exact count, sum, min, max and buckets in `latency`."""
        latency = d.get("latency") or {}
        count = int(latency.get("count", 0))
        duration = float(d.get("duration", 0.0))
        counters = {str(k): int(v) for k, v in (d.get("counters") or {}).items() if v}
        values: dict[str, float | None] = {"p50": None, "p90": None, "p99": None, "max": None}
        if count:
            lowest, highest = int(latency.get("min", 0)), int(latency.get("max", 0))
            pairs = [(int(i), int(c)) for i, c in latency.get("counts") or ()]
            points = _histogram.percentile_points(
                pairs, _POINTS, exact_min=lowest, exact_max=highest
            )
            for name, point in zip(("p50", "p90", "p99"), points, strict=True):
                values[name] = point.value / _NS
            values["max"] = highest / _NS
        encoded = None
        if keep_histogram:
            # Encoded even when empty, so that a log has one line per interval, quiet ones
            # included, and its intervals tile the run.
            encoded = _histogram.encode_sparse(latency.get("counts") or ())
        record = cls(
            start=float(d.get("start", 0.0)),
            duration=duration,
            requests=count,
            rps=count / duration if duration > 0 else 0.0,
            errors=error_total(counters),
            blocked=counters.get("sequencer.blocked", 0),
            counters=counters,
            warmup=bool(d.get("warmup", False)),
            hdr_histogram=encoded,
            **values,
        )
        if keep_latency:
            record._latency = IntervalLatency(
                count, float(latency.get("sum", 0.0)),
                int(latency.get("min", 0)) if count else 0,
                int(latency.get("max", 0)) if count else 0,
                tuple((int(i), int(c)) for i, c in latency.get("counts") or () if int(c) > 0),
            )
        return record


class Timeline(RootModel[list[IntervalRecord]]):
    """The interval records of a run, oldest first (``result.timeline``); a list in JSON."""

    root: list[IntervalRecord] = Field(default_factory=list)

    def __iter__(self) -> Iterator[IntervalRecord]:  # type: ignore[override]
        return iter(self.root)

    def __len__(self) -> int:
        return len(self.root)

    def __getitem__(self, index: int) -> IntervalRecord:
        return self.root[index]

    def __bool__(self) -> bool:
        return bool(self.root)

    def append(self, record: IntervalRecord) -> None:
        self.root.append(record)

    @property
    def requests(self) -> int:
        """Responses over every interval: the run's ``scheduled_to_response`` count."""
        return sum(record.requests for record in self.root)

    def to_dataframe(self) -> pandas.DataFrame:
        """One row per interval: start, duration, requests, rps, p50, p90, p99, max (seconds),
        errors, blocked. Needs pandas (the ``notebook`` extra), imported only here."""
        try:
            import pandas
        except ImportError as exc:
            raise ImportError(
                "Timeline.to_dataframe() needs pandas: pip install 'nhbench[notebook]'"
            ) from exc
        columns = ["start", "duration", "requests", "rps", "p50", "p90", "p99", "max",
                   "errors", "blocked"]
        rows = [record.model_dump(include=set(columns)) for record in self.root]
        frame: pandas.DataFrame = pandas.DataFrame(rows, columns=columns)
        return frame
