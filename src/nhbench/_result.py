"""The result of a run: pydantic models shaped like Nighthawk's ``Output`` proto.

Shape (the Python fields)::

    Result (Nighthawk: Output)
      timestamp, version, options (the echo of Options), terminated_by, failed_predicates,
      interrupted, error, insecure (TLS certificates were not verified), timeline
      results: [WorkerResult]      "worker_0".."worker_{n-1}" when there are several workers,
                                   then "global" (the merge); only "global" with one worker.
                                   A distributed run (docs/distributed.md): "host_0.worker_0"..,
                                   then one entry per host ("host_0"..), then "global"
      hosts: [HostEntry]           a distributed run's nodes: node id, address, clock offset,
                                   start skew (empty on one machine)
        name, execution_start, execution_duration
        statistics: [Statistic]    id, count, min, max, mean, pstdev, percentiles[], raw, and
                                   the encoded HdrHistogram ("hdr_histogram": "HISTFAAA...")
          percentiles: [Percentile{percentile (fraction), count (cumulative), value}]
        counters: [Counter{name, value}]

In Python, durations are float seconds, counts are ints and every counter is kept, zeros
included. The JSON form (``model_dump_json``, the ``json`` output format) is Nighthawk's own:
the proto3 JSON mapping of ``nighthawk.client.Output`` (`nhbench.outputs._nighthawk`):
durations are strings like ``"0.000195004s"``, 64-bit counts are strings, size statistics
use ``raw_min``/``raw_max``/``raw_mean``/``raw_pstdev``/``raw_value``, only non-zero counters
are written, the options are Nighthawk's CommandLineOptions, and whatever Nighthawk has no
field for (histograms, timeline, terminated_by, nhbench-only options...) travels in a
``user_defined_outputs`` entry named ``nhbench``. Loading accepts that, a file Nighthawk
wrote, and nhbench's older JSON (nhbench option names, ``version`` a string,
``hdr_histogram`` inside each statistic), so
``Result.model_validate_json(result.model_dump_json())`` gives the result back.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timezone
from typing import Annotated, Any

from hdrh.histogram import HdrHistogram
from pydantic import (
    BaseModel,
    BeforeValidator,
    Field,
    PlainSerializer,
    PrivateAttr,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    field_serializer,
    model_serializer,
    model_validator,
)

from . import _histogram, _notebook
from ._compare import Comparison
from ._compare import compare as _compare
from ._groups import NONE_GROUP, OTHER_GROUP, core_group_name, group_plan, spread
from ._names import (
    COUNTERS,
    HISTOGRAM_IDS,
    RELEASE_LATENESS,
    REQUEST_TO_RESPONSE,
    SCHEDULED_TO_RESPONSE,
    SEQUENCER_BLOCKING,
    STATISTIC_DESCRIPTIONS,
    STREAM_IDS,
    SUCCESS_COUNTER,
    blocked_total,
    error_total,
    is_counter,
    no_success_reason,
)
from ._names import error_rate as _error_rate
from ._predicates import FiredPredicate, fired_predicates
from ._slo import SloOutcome, check_slo
from ._timeline import IntervalRecord, Timeline
from ._until import Until
from ._validity import (
    IntervalCounts,
    Planned,
    ValidityCheck,
    ValidityInputs,
    WorkerLoad,
    assess,
    merge_core_histograms,
    planned_offsets,
    planned_rate,
    planned_stages,
    worst,
)
from ._validity import Verdict as _Verdict
from ._version import __version__
from .options import Options, format_json_duration, parse_json_duration, request_specs
from .outputs import (
    is_nighthawk_document,
    nighthawk_output,
    result_fields,
    statistic_document,
)
from .outputs import render as _render

__all__ = [
    "Counter",
    "Counters",
    "EndpointResult",
    "GroupResult",
    "Groups",
    "HostEntry",
    "Percentile",
    "Result",
    "ScheduleFacts",
    "StageResult",
    "Statistic",
    "Validity",
    "WorkerResult",
    "format_json_duration",
    "parse_json_duration",
]

_NS = 1_000_000_000


Seconds = Annotated[
    float,
    BeforeValidator(parse_json_duration),
    PlainSerializer(format_json_duration, return_type=str, when_used="json"),
]
# Nighthawk writes 64-bit integers as JSON strings (the proto3 JSON mapping for uint64),
# because JavaScript consumers would silently round numbers above 2^53.
Uint64 = Annotated[int, PlainSerializer(str, return_type=str, when_used="json")]


class Percentile(BaseModel):
    """One point of a distribution."""

    percentile: float = Field(description="Fraction in [0, 1]: 0.99 is p99.")
    count: int = Field(description="Cumulative number of samples up to this point.")
    value: float = Field(
        description="Seconds for latency statistics; the raw value for size statistics."
    )


class Statistic(BaseModel):
    """A distribution: latencies in seconds, or raw values (bytes) when `raw` is true."""

    id: str
    count: int = 0
    min: float = 0.0
    max: float = 0.0
    mean: float = 0.0
    pstdev: float = 0.0
    percentiles: list[Percentile] = Field(default_factory=list)
    raw: bool = Field(default=False, description="Values are raw numbers (bytes), not seconds.")
    hdr_histogram: str | None = Field(
        default=None, description="The full HdrHistogram (ns), standard compressed base64 encoding."
    )

    # The core's sparse (index, count) pairs; kept so the histogram can be rebuilt or encoded
    # only when somebody asks, because most callers only need the percentiles.
    _sparse: list[tuple[int, int]] | None = PrivateAttr(None)
    _hist: HdrHistogram | None = PrivateAttr(None)
    # Or the core's compact form of them (bytes of uint64 index, count), which the pairs are
    # made from on first use.
    _packed: bytes | None = PrivateAttr(None)

    # ---- construction from the core -------------------------------------------------------

    @classmethod
    def from_core_histogram(
        cls, stat_id: str, d: Mapping[str, Any], points: Sequence[float]
    ) -> Statistic:
        """A latency statistic (ns in the core, seconds here) with exact percentile points."""
        summary = _histogram.summary_from_core(d)
        packed: bytes | None = d.get("buckets")
        pairs: list[tuple[int, int]] | None = None
        if not summary.count:
            found: list[_histogram.PercentilePoint] = []
        elif packed is not None:
            # The core's compact form: the percentiles walked in C, the pairs made only
            # when a consumer asks (docs/benchmarks.md "The threads besides the workers").
            found = _histogram.packed_percentile_points(
                packed, points, exact_min=summary.min, exact_max=summary.max)
        else:
            pairs = [(int(i), int(c)) for i, c in d.get("counts") or ()]
            found = _histogram.percentile_points(
                pairs, points, exact_min=summary.min, exact_max=summary.max)
        if packed is None and pairs is None:
            pairs = [(int(i), int(c)) for i, c in d.get("counts") or ()]
        percentiles = [
            Percentile(percentile=p.percentile, count=p.count, value=p.value / _NS)
            for p in found
        ]
        stat = cls(
            id=stat_id,
            count=summary.count,
            min=summary.min / _NS,
            max=summary.max / _NS,
            mean=summary.mean / _NS,
            pstdev=summary.pstdev / _NS,
            percentiles=percentiles,
        )
        stat._sparse = pairs
        stat._packed = packed
        return stat

    @classmethod
    def from_core_stream(cls, stat_id: str, d: Mapping[str, Any]) -> Statistic:
        """A streaming statistic: raw values, no percentiles (as in Nighthawk)."""
        summary = _histogram.summary_from_core(d)
        return cls(
            id=stat_id, count=summary.count, min=summary.min, max=summary.max,
            mean=summary.mean, pstdev=summary.pstdev, raw=True,
        )

    # ---- accessors ------------------------------------------------------------------------

    @property
    def description(self) -> str:
        """Nighthawk's human description of the statistic (or the id)."""
        return STATISTIC_DESCRIPTIONS.get(self.id, self.id)

    @property
    def has_histogram(self) -> bool:
        return (bool(self._sparse) or bool(self._packed) or self._hist is not None
                or bool(self.hdr_histogram))

    def p(self, percent: float) -> float:
        """The value at `percent` (0-100): ``p(99)`` is p99, in seconds for latencies.

        Points listed in the options are looked up exactly; any other point is computed from
        the histogram with the same rule.
        """
        return self.values_at([percent])[0]

    def values_at(self, percents: Sequence[float]) -> list[float]:
        """`p` of each of `percents`, the points the histogram answers computed in one pass
        over it (a distribution curve asks for about 60: one pass each took 250 ms for a
        histogram of 2,300 buckets)."""
        values: list[float] = [0.0] * len(percents)
        wanted: dict[float, list[int]] = {}
        for k, percent in enumerate(percents):
            if not 0 <= percent <= 100 or math.isnan(percent):
                raise ValueError(f"percent must be in [0, 100] (got {percent!r})")
            fraction = round(percent / 100.0, 10)
            listed = next((entry.value for entry in self.percentiles if math.isclose(
                entry.percentile, fraction, rel_tol=0, abs_tol=1e-12)), None)
            if listed is not None:
                values[k] = listed
                continue
            if self.count == 0:
                raise ValueError(f"statistic {self.id} has no samples")
            if fraction == 0:
                values[k] = self.min
            elif fraction == 1:
                values[k] = self.max
            elif self.raw or not self.has_histogram:
                raise ValueError(f"statistic {self.id} has no histogram to compute "
                                 f"p{percent:g} from")
            else:
                wanted.setdefault(fraction, []).append(k)
        if wanted:
            scale = 1 if self.raw else _NS
            exact_min, exact_max = round(self.min * scale), round(self.max * scale)
            found = (_histogram.packed_percentile_points(self._packed, list(wanted), exact_min,
                                                         exact_max)
                     if self._packed is not None and self._sparse is None
                     else _histogram.percentile_points(self._pairs(), list(wanted), exact_min,
                                                       exact_max))
            for point in found:
                for k in wanted[point.percentile]:
                    values[k] = point.value / scale
        return values

    def histogram(self) -> HdrHistogram:
        """The full histogram as an `hdrh.HdrHistogram` (values in ns)."""
        if self._hist is None:
            if self._sparse is not None or self._packed is not None:
                self._hist = _histogram.from_sparse(self._pairs())
            elif self.hdr_histogram:
                self._hist = _histogram.decode(self.hdr_histogram)
            else:
                raise ValueError(f"statistic {self.id} has no histogram")
        return self._hist

    def encoded(self) -> str | None:
        """The compressed "HISTFAAA…" encoding of the histogram (None for size statistics)."""
        if self.hdr_histogram is None and (self._sparse is not None or self._packed is not None):
            self.hdr_histogram = _histogram.encode(self.histogram())
        return self.hdr_histogram

    def __eq__(self, other: object) -> bool:
        """Equal fields, the histogram compared through its encoding: pydantic's ``==``
        would also compare the caches (the core's sparse counts, the decoded histogram),
        which a statistic loaded from JSON builds only when asked."""
        if not isinstance(other, Statistic):
            return NotImplemented
        self.encoded()
        other.encoded()
        return self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        """One line with the count and, for latencies, p50, p99 and max (pydantic's repr
        would list every percentile and the encoded histogram)."""
        return _notebook.statistic_line(self)

    __str__ = __repr__

    def _pairs(self) -> list[tuple[int, int]]:
        if self._sparse is None:
            self._sparse = (_histogram.unpack_buckets(self._packed) if self._packed is not None
                            else _histogram.sparse_counts(self.histogram()))
        return self._sparse

    # ---- Nighthawk-shaped JSON ------------------------------------------------------------

    @model_validator(mode="before")
    @classmethod
    def _from_nighthawk_json(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        data = dict(data)
        raw = bool(data.get("raw")) or any(key.startswith("raw_") for key in data)
        data["raw"] = raw
        for key in ("min", "max", "mean", "pstdev"):
            if f"raw_{key}" in data:
                data[key] = data.pop(f"raw_{key}")
            if not raw and key in data:
                data[key] = parse_json_duration(data[key])
        percentiles = []
        given = data.get("percentiles")
        if not isinstance(given, list):
            # Not a list: pydantic's check of the field reports it.
            return data
        for entry in given:
            if isinstance(entry, Mapping) and "value" not in entry:
                entry = dict(entry)
                if "duration" in entry:
                    entry["value"] = parse_json_duration(entry.pop("duration"))
                elif "raw_value" in entry:
                    entry["value"] = entry.pop("raw_value")
            percentiles.append(entry)
        data["percentiles"] = percentiles
        return data

    @model_serializer(mode="wrap")
    def _to_nighthawk_json(
        self, handler: SerializerFunctionWrapHandler, info: SerializationInfo
    ) -> dict[str, Any]:
        self.encoded()
        if not info.mode_is_json():
            plain: dict[str, Any] = handler(self)
            return plain
        # A statistic on its own: Nighthawk's Statistic plus the encoded histogram (a
        # whole result keeps the histogram in its nhbench extension instead).
        out = statistic_document(self)
        if self.hdr_histogram:
            out["hdr_histogram"] = self.hdr_histogram
        return out


class Counter(BaseModel):
    """A counter, summed over workers for ``global``."""

    name: str
    value: Uint64


class Counters(Mapping[str, int]):
    """Read-only mapping of counter name to value.

    Every counter nhbench knows answers, zero when it did not happen, also after the result
    was loaded from JSON (which, like Nighthawk's, leaves zero counters out). An unknown name
    raises KeyError, so that a typo is noticed rather than read as zero.
    """

    def __init__(self, values: Mapping[str, int]) -> None:
        self._values = {name: int(value) for name, value in values.items()}

    def __getitem__(self, name: str) -> int:
        if name in self._values:
            return self._values[name]
        if is_counter(name):
            return 0
        raise KeyError(f"unknown counter {name!r}")

    def __iter__(self) -> Iterator[str]:
        yield from COUNTERS
        yield from (name for name in sorted(self._values) if name not in COUNTERS)

    def __len__(self) -> int:
        return len(COUNTERS) + sum(1 for name in self._values if name not in COUNTERS)

    def nonzero(self) -> dict[str, int]:
        """The counters that are not zero, sorted by name (what the JSON output lists)."""
        return {name: value for name, value in sorted(self._values.items()) if value}

    def __repr__(self) -> str:
        return f"Counters({self.nonzero()!r})"


class WorkerResult(BaseModel):
    """The result of one worker, or the merge of all of them (``name == "global"``)."""

    name: str
    statistics: list[Statistic] = Field(default_factory=list)
    counters: list[Counter] = Field(default_factory=list)
    execution_start: datetime | None = None
    execution_duration: Seconds = 0.0

    @classmethod
    def from_core(cls, name: str, d: Mapping[str, Any], points: Sequence[float]) -> WorkerResult:
        histograms: Mapping[str, Any] = d.get("histograms") or {}
        streams: Mapping[str, Any] = d.get("streams") or {}
        # Known statistics in report order first, then anything newer the core adds.
        hist_ids = [s for s in HISTOGRAM_IDS if s in histograms]
        hist_ids += sorted(s for s in histograms if s not in HISTOGRAM_IDS)
        stream_ids = [s for s in STREAM_IDS if s in streams]
        stream_ids += sorted(s for s in streams if s not in STREAM_IDS)
        statistics = [Statistic.from_core_histogram(s, histograms[s], points) for s in hist_ids]
        statistics += [Statistic.from_core_stream(s, streams[s]) for s in stream_ids]
        counters = [
            Counter(name=key, value=int(value))
            for key, value in sorted((d.get("counters") or {}).items())
        ]
        start_ns = int(d.get("execution_start_ns") or 0)
        return cls(
            name=name,
            statistics=statistics,
            counters=counters,
            execution_start=(
                datetime.fromtimestamp(start_ns / _NS, tz=timezone.utc) if start_ns else None
            ),
            execution_duration=int(d.get("execution_duration_ns") or 0) / _NS,
        )

    def stat(self, stat_id: str) -> Statistic:
        """The statistic with this id; KeyError naming the ids present when absent."""
        for statistic in self.statistics:
            if statistic.id == stat_id:
                return statistic
        known = ", ".join(s.id for s in self.statistics)
        raise KeyError(f"no statistic {stat_id!r} in {self.name} (present: {known})")

    @property
    def counter_values(self) -> Counters:
        """All counters of this result as a mapping (zeros included)."""
        return Counters({c.name: c.value for c in self.counters})

    @field_serializer("counters", mode="wrap")
    def _nonzero_counters(
        self, value: list[Counter], handler: SerializerFunctionWrapHandler,
        info: SerializationInfo,
    ) -> Any:
        # Nighthawk writes only non-zero counters; Python keeps them all.
        if info.mode_is_json():
            value = [counter for counter in value if counter.value]
        return handler(value)


def _echo_options(value: object) -> object:
    # The echoed options were valid where the run happened; the machine-dependent check
    # (cpus within this process's affinity) must not reject them on another machine.
    if isinstance(value, Mapping):
        return Options.model_validate(value, context={"echo": True})
    return value


class StageResult(BaseModel):
    """One --stage of the run: what was planned and what happened."""

    index: int
    duration: Seconds
    rps_from: float = Field(description="Planned rate at the stage's start, all workers.")
    rps_to: float = Field(description="Planned rate at the stage's end, all workers.")
    planned: float = Field(description="Releases the schedule plans in the stage (the "
                           "integral of the rate), all workers.")
    releases: int = Field(description="Releases made in the stage.")
    responses: int = Field(description="Responses to the stage's releases.")

    @property
    def achieved_rps(self) -> float:
        """Responses per second of the stage."""
        return self.responses / self.duration if self.duration > 0 else 0.0


class ScheduleFacts(BaseModel):
    """What the schedule did (docs/engine.md "Shaping the schedule"). Neutral
    values for a run that shaped nothing."""

    released: int = Field(default=0, description="Releases made in the measured phase.")
    no_catchup: bool = Field(default=False, description="The run used no_catchup.")
    no_catchup_moves: int = Field(
        default=0, description="Times a late release moved the schedule (no_catchup).")
    no_catchup_shift: Seconds = Field(
        default=0.0, description="Total time the schedule moved, summed over workers.")
    lost_releases: int = Field(
        default=0, description="Releases the unmoved schedule had made that the moved "
        "one did not (no_catchup).")
    warmup_released: int = Field(default=0, description="Releases made in the warm-up.")
    stages: list[StageResult] = Field(default_factory=list)

    @classmethod
    def from_core(cls, d: Mapping[str, Any] | None, options: Options, workers: int
                  ) -> ScheduleFacts:
        d = d or {}
        stages = []
        previous = 0.0
        for i, ((seconds, rate), counts) in enumerate(
                zip(options.stage, d.get("stages") or (), strict=False)):
            stages.append(StageResult(
                index=i, duration=seconds, rps_from=previous * workers, rps_to=rate * workers,
                planned=(previous + rate) / 2 * seconds * workers,
                releases=int(counts[0]), responses=int(counts[1]),
            ))
            previous = rate
        return cls(
            released=int(d.get("released", 0)),
            no_catchup=options.no_catchup,
            no_catchup_moves=int(d.get("no_catchup_moves", 0)),
            no_catchup_shift=float(d.get("no_catchup_shift", 0.0)),
            lost_releases=int(d.get("no_catchup_lost", 0)),
            warmup_released=int(d.get("warmup_released", 0)),
            stages=stages,
        )


class HostEntry(BaseModel):
    """One node of a distributed run (``--ray``, docs/distributed.md): where it ran, its
    clock against the controller's, and when it really started. Its merged statistics are
    the `Result.results` entry of the same `name`; its workers are the entries `workers`
    names."""

    name: str = Field(description="The host's name in the result: host_0, host_1, ...")
    node_id: str = Field(description="Ray's node id.")
    address: str = Field(description="The node's IP address as Ray knows it.")
    hostname: str = Field(default="", description="The node's host name.")
    version: str = Field(default="", description="nhbench's version on the node.")
    workers: list[str] = Field(default_factory=list,
                               description="Names of the node's per-worker result entries.")
    clock_offset: Seconds = Field(
        default=0.0, description="The node's clock minus the controller's (NTP-style "
        "estimate, the best of several rounds).")
    clock_uncertainty: Seconds = Field(
        default=0.0, description="Half the round trip of the best clock round: the true "
        "offset lies within clock_offset ± this.")
    start_skew: Seconds = Field(
        default=0.0, description="The node's start (when its schedule began, in the "
        "controller's clock) minus the scheduled start: positive when the node was late "
        "and began at once; otherwise zero within clock_uncertainty.")
    ready_margin: Seconds = Field(
        default=0.0, description="How long before the scheduled start the node had its "
        "workers armed (controller's clock); negative: it was late by that much.")
    validity: Validity | None = Field(
        default=None, description="The node's own validity verdict (docs/trust.md "
        "\"Validity\"): its workers' loads, its schedule; the merged result's names the "
        "node in each of its reasons.")


class EndpointResult(BaseModel):
    """One endpoint's share of a run whose connections went to several: the several targets
    (``multi_target_endpoint``) or the addresses ``dns_method rr|random`` spread them over.
    An nhbench key: Nighthawk's output has none."""

    name: str = Field(description="The target as given, or the address as ip:port.")
    connections: int = Field(default=0, description="Connections started to it, the "
                             "warm-up's included (Fortio's IPCountMap counts these).")
    requests: int = Field(default=0, description="Measured requests that ended on its "
                          "connections: 2xx responses plus errors.")
    errors: int = Field(default=0, description="Those that ended in anything but a 2xx "
                        "response (nhbench._names.ERROR_COUNTERS' definition).")
    latency: Statistic = Field(description="Request sent to response end "
                               "(benchmark_http_client.request_to_response) of its responses.")

    @classmethod
    def from_core(cls, name: str, d: Mapping[str, Any], points: Sequence[float]) -> EndpointResult:
        return cls(
            name=name,
            connections=int(d.get("connections", 0)),
            requests=int(d.get("requests", 0)),
            errors=int(d.get("errors", 0)),
            latency=Statistic.from_core_histogram(REQUEST_TO_RESPONSE, d["latency"], points),
        )


def _endpoint_results(core: Sequence[Mapping[str, Any]], names: Sequence[str],
                      points: Sequence[float]) -> list[EndpointResult]:
    # The core reports endpoints only when there are several, in their order.
    if len(names) != len(core):
        names = [f"endpoint_{i}" for i in range(len(core))]
    return [EndpointResult.from_core(name, d, points)
            for name, d in zip(names, core, strict=True)]


class GroupResult(BaseModel):
    """One group of a grouped run (``--group-by``, docs/engine.md "Groups"): a request kind,
    a target or a response-header value. An nhbench key: Nighthawk's output has none."""

    name: str = Field(description="The request kind, the target, or the header's value; "
                      "(none) for responses without the header and requests without a "
                      "response, (other) past the bound of 64 groups. A header value that "
                      "reads (none) or (other), with any backslashes before it, is named "
                      "with one backslash more.")
    requests: int = Field(default=0, description="Measured requests that ended in it: "
                          "responses and failures.")
    share: float = Field(default=0.0, description="Its requests over the run's grouped "
                         "requests.")
    status_2xx: int = 0
    status_3xx: int = 0
    status_4xx: int = 0
    status_5xx: int = 0
    status_other: int = Field(default=0, description="1xx and statuses outside 100-599.")
    failures: int = Field(default=0, description="Requests that ended without a counted "
                          "response: connection and stream errors, time-outs, failed checks.")
    check_failed: int = Field(default=0, description="Of the failures, 2xx responses that "
                              "failed a --check.")
    latency: Statistic = Field(description="Request sent to response end "
                               "(benchmark_http_client.request_to_response) of its responses, "
                               "without coordinated-omission correction.")

    @property
    def errors(self) -> int:
        """Requests that did not end in a 2xx response (the one error definition)."""
        return self.requests - self.status_2xx

    @property
    def error_rate(self) -> float:
        return self.errors / self.requests if self.requests else 0.0


class Groups(BaseModel):
    """A grouped run's groups. An nhbench key: Nighthawk's output has none."""

    by: str = Field(description="request, target or header:NAME (--group-by).")
    groups: list[GroupResult] = Field(default_factory=list)
    spread: float | None = Field(
        default=None, description="By a header: the largest value's share over the smallest "
        "(1.0 is an even split), over the values seen; None with fewer than two.")

    def __getitem__(self, name: str) -> GroupResult:
        for group in self.groups:
            if group.name == name:
                return group
        raise KeyError(name)

    @classmethod
    def from_core(cls, core: Sequence[Mapping[str, Any]], options: Options,
                  points: Sequence[float]) -> Groups | None:
        if not core:
            return None
        plan = group_plan(options, request_specs(options))
        if plan is None:
            return None
        total = sum(int(d.get("requests", 0)) for d in core)
        out: list[GroupResult] = []
        for i, d in enumerate(core):
            name = core_group_name(d, i, plan.names)
            if name is None:
                continue
            classes = [int(c) for c in d.get("classes", [0] * 6)]
            requests = int(d.get("requests", 0))
            out.append(GroupResult(
                name=name, requests=requests, share=requests / total if total else 0.0,
                status_2xx=classes[2], status_3xx=classes[3], status_4xx=classes[4],
                status_5xx=classes[5], status_other=classes[0] + classes[1],
                failures=int(d.get("failures", 0)), check_failed=int(d.get("check_failed", 0)),
                latency=Statistic.from_core_histogram(REQUEST_TO_RESPONSE, d["latency"], points),
            ))
        values = [g.requests for g in out if g.name not in (NONE_GROUP, OTHER_GROUP)]
        return cls(by=plan.by, groups=out,
                   spread=spread(values) if plan.header is not None else None)


def _planned(result: Result) -> tuple[Planned | None, str]:
    """The arrival process the run asked for (nothing for a closed loop), and why its
    timeline cannot be set against it, if it cannot."""
    options = result.options
    workers = result.worker_count
    poisson = options.arrival == "poisson"
    # A run cut short (a predicate, a stop) planned only up to where it stopped.
    cut = result.interrupted or result.terminated_by != "duration"
    end = result.duration if cut else None
    planned: Planned | None
    if options.stage:
        planned = planned_stages(options.stage, workers, end, poisson=poisson)
    elif options.schedule_offsets:
        planned = planned_offsets(options.schedule_offsets, workers, end)
    elif result.requested_rps > 0:
        rps = result.requested_rps
        # Jitter moves a release by up to jitter_uniform, or by 10 % of a worker's interval.
        slack = (options.jitter_uniform or 0.0) + (0.1 * workers / rps if options.jitter else 0.0)
        planned = planned_rate(rps, result.duration, count=options.requests, poisson=poisson,
                               grain=float(workers * max(1, options.burst_size)), slack=slack)
    else:
        return None, "closed loop: no schedule"
    note = ""
    if options.warmup or options.simple_warmup or options.sequential_warmup:
        note = "a warm-up precedes the measured phase in the timeline"
    elif options.no_catchup:
        note = "no_catchup moves the schedule by design"
    return planned, note


class Validity(BaseModel):
    """Whether the run's numbers can be trusted (docs/trust.md "Validity"): the verdict,
    the worst of its checks, with every check's measure and reason. An nhbench key:
    Nighthawk's output has none."""

    verdict: _Verdict = "valid"
    checks: list[ValidityCheck] = Field(default_factory=list)
    workers: list[WorkerLoad] = Field(
        default_factory=list, description="Each worker thread's CPU time, wall time and "
        "run-queue wait in the measured phase.")
    hiccup: Statistic | None = Field(
        default=None, description="event_loop.hiccup: how late the workers' event loops ran "
        "their 10 ms housekeeping timer (jHiccup's measure), all workers merged.")

    @property
    def reasons(self) -> list[str]:
        """One line per check that is not valid, the invalid ones first."""
        order = {"invalid": 0, "suspect": 1}
        bad = sorted((c for c in self.checks if c.verdict in order),
                     key=lambda c: order[c.verdict])
        return [f"{c.verdict}: {c.name}{f' on {c.node}' if c.node else ''}: {c.reason}"
                for c in bad]

    def __str__(self) -> str:
        lines = [f"validity: {self.verdict}"]
        lines += [f"  {reason}" for reason in self.reasons]
        return "\n".join(lines)

    def with_nodes(self, nodes: Sequence[tuple[str, Validity | None]]) -> Validity:
        """A distributed run's verdict: this one (the merged result's, over every node's
        workers) with each node's checks that are not valid added under the node's name,
        and the worst of them all. A node starved of CPU is flagged by name even where the
        merged figures (its share of the load) would hide it."""
        checks = list(self.checks)
        for name, validity in nodes:
            if validity is None:
                continue
            checks += [check.model_copy(update={"node": name}) for check in validity.checks
                       if check.verdict in ("suspect", "invalid")]
        return self.model_copy(update={"checks": checks, "verdict": worst(checks)})

    @classmethod
    def of(cls, result: Result, load: Sequence[Mapping[str, Any]] | None) -> Validity:
        """The checks of a run just made, from the core's per-worker load."""
        load = list(load or ())
        workers = [WorkerLoad(cpu_time=int(d.get("cpu_ns", 0)) / _NS,
                              wall_time=int(d.get("wall_ns", 0)) / _NS,
                              wait_time=None if d.get("wait_ns") is None
                              else int(d["wait_ns"]) / _NS) for d in load]
        hists = [d["hiccup"] for d in load if d.get("hiccup")]
        hiccup = (Statistic.from_core_histogram("event_loop.hiccup", merge_core_histograms(
            hists), result.options.percentile_points) if hists else None)
        options = result.options
        glob = result.global_result
        stats = {s.id: s for s in glob.statistics}

        def p99(stat_id: str) -> float | None:
            stat = stats.get(stat_id)
            return stat.p(99) if stat is not None and stat.count else None

        duration = result.duration
        sent = max(0, result.schedule.released
                   - result.counters["benchmark.pool_overflow"])
        # The warm-up's intervals are not the measured phase's: its trend, rate and
        # arrivals are judged without them.
        measured = [r for r in result.timeline if not r.warmup]
        records = [r for r in measured if r.requests and r.p99 is not None]
        planned, note = _planned(result)
        inputs = ValidityInputs(
            workers=workers,
            hiccup_p99=hiccup.p(99) if hiccup is not None and hiccup.count else None,
            spin=options.sequencer_idle_strategy == "spin",
            requested_rps=result.requested_rps,
            shaped=bool(options.stage or options.schedule_offsets),
            worker_count=result.worker_count,
            latency_p99=p99(SCHEDULED_TO_RESPONSE),
            lateness_p99=p99(RELEASE_LATENESS),
            blocked=result.blocked_count,
            released=result.schedule.released,
            sent_rate=sent / duration if duration > 0 else 0.0,
            interval_p99=[float(r.p99 or 0.0) for r in records],
            interval_rate=[r.rps for r in measured],
            planned=planned,
            sent=sent,
            intervals=[IntervalCounts(r.start, r.duration,
                                      r.counters.get("sequencer.released", 0), r.requests)
                       for r in measured],
            intervals_note=note,
        )
        checks = assess(inputs)
        return cls(verdict=worst(checks), checks=checks, workers=workers, hiccup=hiccup)


class Result(BaseModel):
    """Everything a run produced. Shaped like Nighthawk's ``Output``; see the module doc."""

    timestamp: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))
    version: str = __version__
    options: Annotated[Options, BeforeValidator(_echo_options)]
    results: list[WorkerResult] = Field(default_factory=list)
    terminated_by: str = Field(
        default="duration",
        description="'duration', 'stop', 'termination_predicate:<counter>', "
        "'failure_predicate:<counter>' or 'error'.",
    )
    failed_predicates: list[str] = Field(
        default_factory=list, description="Counters whose failure predicate fired."
    )
    interrupted: bool = Field(
        default=False,
        description="The run was stopped early (SIGINT/SIGTERM/stop()): partial result.",
    )
    error: str | None = Field(default=None, description="The first connection or I/O error seen.")
    insecure: bool = Field(
        default=False,
        description="TLS certificates were not verified (the run used insecure).",
    )
    timeline: Timeline = Field(
        default_factory=Timeline,
        description="One record per stats_interval (docs/live.md); empty when live "
        "statistics were off. An nhbench key: Nighthawk's output has none.",
    )
    schedule: ScheduleFacts = Field(
        default_factory=ScheduleFacts,
        description="What the schedule did: releases, no_catchup's moves, stages.",
    )
    warmup: WorkerResult | None = Field(
        default=None,
        description="The warm-up phase's merged result, kept apart from the measured one "
        "(warmup, simple_warmup, sequential_warmup); None without a warm-up.",
    )
    scheduled_start: datetime | None = Field(
        default=None, description="A distributed run's one scheduled start, in the "
        "controller's clock (docs/distributed.md); None for a run on one machine.")
    endpoints: list[EndpointResult] = Field(
        default_factory=list,
        description="Per endpoint, when the connections went to several (several targets, "
        "or a name's addresses with dns_method rr or random): connections, requests, errors "
        "and latency. Empty otherwise. An nhbench key: Nighthawk's output has none.",
    )
    groups: Groups | None = Field(
        default=None,
        description="--group-by: per request kind, target or response-header value, "
        "requests, status classes, failures and latency (docs/engine.md \"Groups\"); None "
        "for a run without groups. An nhbench key: Nighthawk's output has none.",
    )
    hosts: list[HostEntry] = Field(
        default_factory=list,
        description="A distributed run's nodes (docs/distributed.md); empty for a run on "
        "one machine. Each has a merged entry of its name in `results`.",
    )
    until: Until | None = Field(
        default=None,
        description="--until: the statistics asked for, whether their confidence intervals "
        "got that tight, and when (docs/trust.md \"Running until the numbers are tight\"); "
        "None for a run without it. An nhbench key.",
    )
    validity: Validity | None = Field(
        default=None,
        description="Whether the numbers can be trusted: valid, suspect or invalid with the "
        "reasons (docs/trust.md \"Validity\"); None for a result that was not assessed "
        "(a file written before, or by Nighthawk).",
    )

    @model_validator(mode="before")
    @classmethod
    def _from_output_document(cls, data: Any) -> Any:
        # Nighthawk's Output JSON (ours or Nighthawk's own) becomes the model's fields; the
        # model's own shape (model_dump(), or nhbench's older JSON) passes.
        if is_nighthawk_document(data):
            return result_fields(data)
        return data

    @model_serializer(mode="wrap")
    def _to_output_document(
        self, handler: SerializerFunctionWrapHandler, info: SerializationInfo
    ) -> dict[str, Any]:
        if info.mode_is_json():
            return nighthawk_output(self)
        plain: dict[str, Any] = handler(self)
        return plain

    @classmethod
    def from_core(
        cls,
        core: Mapping[str, Any],
        options: Options,
        *,
        interrupted: bool | None = None,
        timeline: Sequence[IntervalRecord] = (),
        endpoints: Sequence[str] = (),
    ) -> Result:
        """Convert the dict of ``_core.ClientRun.result()`` (see docs/architecture.md);
        `endpoints` names its per-endpoint entries, in order."""
        points = options.percentile_points
        workers = list(core.get("workers") or ())
        results = []
        if len(workers) > 1:
            results = [
                WorkerResult.from_core(f"worker_{i}", w, points) for i, w in enumerate(workers)
            ]
        results.append(WorkerResult.from_core("global", core["global"], points))
        terminated_by = str(core.get("terminated_by") or "duration")
        result = cls(
            options=options,
            results=results,
            terminated_by=terminated_by,
            failed_predicates=list(core.get("failed_predicates") or ()),
            interrupted=(terminated_by == "stop") if interrupted is None else interrupted,
            error=core.get("error") or None,
            insecure=bool(core.get("insecure", False)),
            timeline=Timeline(list(timeline)),
            schedule=ScheduleFacts.from_core(core.get("schedule"), options, len(workers) or 1),
            warmup=(WorkerResult.from_core("warmup", core["warmup"], points)
                    if core.get("warmup") else None),
            endpoints=_endpoint_results(core.get("endpoints") or (), endpoints, points),
            groups=Groups.from_core(core.get("groups") or (), options, points),
        )
        result.validity = Validity.of(result, core.get("load"))
        return result

    # ---- accessors ------------------------------------------------------------------------

    @property
    def global_result(self) -> WorkerResult:
        """The merged result of all workers."""
        for result in self.results:
            if result.name == "global":
                return result
        raise KeyError("the result has no 'global' entry")

    @property
    def workers(self) -> list[WorkerResult]:
        """The per-worker results (empty when the run had one worker: see `global_result`).
        A distributed run's workers are named after their host (``host_0.worker_1``)."""
        hosts = {host.name for host in self.hosts}
        return [result for result in self.results
                if result.name != "global" and result.name not in hosts]

    def host_result(self, name: str) -> WorkerResult:
        """The merged result of one host of a distributed run (``"host_0"``)."""
        if name in {host.name for host in self.hosts}:
            for result in self.results:
                if result.name == name:
                    return result
        raise KeyError(f"no host {name!r} in the result "
                       f"(hosts: {', '.join(h.name for h in self.hosts) or 'none'})")

    @property
    def worker_count(self) -> int:
        return max(1, len(self.workers))

    def stat(self, stat_id: str) -> Statistic:
        """A statistic of the global result: ``result.stat("sequencer.blocking")``."""
        return self.global_result.stat(stat_id)

    @property
    def latency(self) -> Statistic:
        """The headline latency: scheduled send to response end (coordinated-omission
        corrected), ``benchmark_http_client.scheduled_to_response`` of the global result."""
        return self.stat(SCHEDULED_TO_RESPONSE)

    @property
    def counters(self) -> Counters:
        """Global counters by name, all of them: ``result.counters["benchmark.http_2xx"]``."""
        return self.global_result.counter_values

    @property
    def duration(self) -> float:
        """Seconds the global result ran (Nighthawk: the mean over workers)."""
        return self.global_result.execution_duration

    @property
    def achieved_rps(self) -> float:
        """2xx responses per second of execution."""
        duration = self.duration
        return self.counters["benchmark.http_2xx"] / duration if duration > 0 else 0.0

    @property
    def requested_rps(self) -> float:
        """rps times the number of workers (0 means "as fast as possible"). With stages
        (``--stage``) the planned mean: the releases the stages plan over their duration;
        with an explicit schedule (``schedule_offsets``), its intervals over its span."""
        options = self.options
        if options.stage:
            planned, previous = 0.0, 0.0
            for seconds, rate in options.stage:
                planned += (previous + rate) / 2 * seconds
                previous = rate
            total = sum(seconds for seconds, _ in options.stage)
            return planned / total * self.worker_count if total > 0 else 0.0
        offsets = options.schedule_offsets
        if offsets:
            span = offsets[-1] - offsets[0]
            return (len(offsets) - 1) / span * self.worker_count if span > 0 else 0.0
        return options.rps * self.worker_count

    @property
    def succeeded(self) -> int:
        """Requests that succeeded: complete responses with a 2xx status."""
        return self.counters[SUCCESS_COUNTER]

    @property
    def error_count(self) -> int:
        """Requests that ended in an error (the sum of `nhbench._names.ERROR_COUNTERS`: non-2xx
        responses, connection failures, resets, request time-outs, retry give-ups)."""
        return error_total(self.counters)

    @property
    def error_rate(self) -> float:
        """Errors over finished requests (2xx + errors), 0..1: `nhbench._names.error_rate`,
        what the ``error_rate`` SLO rule and the sweep's steps read."""
        return _error_rate(self.counters)

    @property
    def blocked_count(self) -> int:
        """Releases that waited for a connection (``sequencer.blocking`` samples) plus
        requests dropped before sending (``benchmark.pool_overflow``): the ``blocked`` rule
        and the sweep's "blocked" column."""
        try:
            samples = self.stat(SEQUENCER_BLOCKING).count
        except KeyError:
            samples = 0
        return blocked_total(self.counters, samples)

    def check_slo(self, *rules: object) -> SloOutcome:
        """Evaluate SLO rules (``"p99<5ms"``, ``"error_rate<0.1%"``, ``"rps>=1990"``...;
        the grammar of docs/pytest.md) on this result. The outcome is true when every rule
        passed; ``str(outcome)`` is the verdict table and a compact percentile table.
        Percentiles without a statistic name are the coordinated-omission-corrected
        latency. A malformed rule raises OptionsError."""
        return check_slo(self, *rules)

    @property
    def no_success_reason(self) -> str | None:
        """Why this run failed for lack of any success, e.g. ``"no request succeeded: 100
        request time-outs (0 responses)"``; None when a request succeeded or the options
        have ``allow_no_success``."""
        if self.options.allow_no_success:
            return None
        return no_success_reason(self.counters)

    @property
    def success(self) -> bool:
        """True when no failure predicate fired, the run did not end in an error and at least
        one request succeeded (unless ``allow_no_success``); see `no_success_reason`."""
        return (not self.failed_predicates and self.terminated_by != "error"
                and self.no_success_reason is None)

    @property
    def fired(self) -> list[FiredPredicate]:
        """The failure predicates that fired, with the counter values and thresholds."""
        return fired_predicates(
            self.failed_predicates, self.counters, self.options.failure_predicates
        )

    def histogram(self, stat_id: str) -> HdrHistogram:
        """The global histogram of a statistic as an `hdrh.HdrHistogram` (ns)."""
        return self.stat(stat_id).histogram()

    def encoded_histograms(self, name: str = "global") -> dict[str, str]:
        """``{stat_id: "HISTFAAA..."}`` for every latency statistic of a result entry."""
        entry = next((r for r in self.results if r.name == name), None)
        if entry is None:
            raise KeyError(f"no result named {name!r}")
        encoded = {}
        for statistic in entry.statistics:
            text = statistic.encoded()
            if text:
                encoded[statistic.id] = text
        return encoded

    def compare(self, baseline: Result | Sequence[Result], *, confidence: float = 0.95,
                resamples: int = 2000, seed: int = 0,
                block_length: int | None = None) -> Comparison:
        """This run against `baseline` (a `Result`, or a list of runs): for p50, p90, p99,
        p99.9, mean, rate and error rate, the difference with a `confidence` interval from
        a block bootstrap over the interval histograms, and a verdict per statistic
        ("regressed", "improved", "no significant change"); seeded, so reproducible.
        ``run.compare(old).regressed`` names what got worse. docs/trust.md, "Comparing
        runs"; `nhbench.compare` takes lists of runs on both sides."""
        return _compare(baseline, self, confidence=confidence, resamples=resamples,
                        seed=seed, block_length=block_length)

    def render(self, output_format: str | None = None) -> str:
        """The report as text, in `output_format` (default: the one in the options)."""
        return _render(self, output_format or self.options.output_format)

    # ---- notebooks (docs/notebooks.md) -----------------------------------------------------

    def __repr__(self) -> str:
        """One line: ``<Result 2000 rps asked, 1999.8 achieved, p99 1.23 ms, 0 errors>``."""
        return _notebook.result_line(self)

    # pydantic's __str__ lists every field (kilobytes of histograms); print() gets the line
    # too. The full report is `render()`.
    __str__ = __repr__

    def _repr_html_(self) -> str:
        """What a notebook shows: headline, non-zero counters, percentile chart (inline SVG,
        no JavaScript)."""
        return _notebook.result_html(self)

    def to_dataframe(self, wide: bool = False) -> Any:
        """The global statistics as a pandas DataFrame (needs ``nhbench[notebook]``).

        Long form (default): one row per reported percentile of each statistic, columns
        ``statistic``, ``percentile`` (0-100), ``value`` (seconds), ``count`` (cumulative).
        ``wide=True``: one row per statistic (the index), columns ``raw``, ``count``,
        ``min``, ``mean``, ``pstdev``, one ``p<N>`` per reported percentile, ``max``.
        """
        return _notebook.result_frame(self, wide=wide)

    def groups_dataframe(self) -> Any:
        """The groups of a run with ``--group-by`` as a pandas DataFrame (needs
        ``nhbench[notebook]``): one row per group (the index), columns ``requests``,
        ``share``, ``errors``, ``error_rate``, the status classes, ``failures``,
        ``check_failed``, ``p50``, ``p90``, ``p99``, ``max`` (seconds). Empty without groups.
        """
        return _notebook.groups_frame(self)

    def plot(self, statistic: str = SCHEDULED_TO_RESPONSE, label: str | None = None) -> Any:
        """A matplotlib Figure of the latency distribution on a percentile axis (see
        `nhbench.plot_percentiles`, which overlays several results)."""
        return _notebook.plot_percentiles(
            [self], None if label is None else [label], statistic=statistic
        )
