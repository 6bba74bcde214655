"""A run on a Ray cluster: `Cluster` (where) and `ClusterBenchmark` (the run).

How it works (docs/distributed.md): the controller (this process) connects to the cluster,
places one load actor (`_LoadActor`) on each chosen node with a hard node-affinity, checks
that every node runs this nhbench version, measures each node's clock against its own
(NTP-style rounds), and gives every node one scheduled start, written in that node's own
clock. Each node runs the same Options locally (its own --concurrency, --cpus and --rps per
worker) and returns the core's raw statistics: per-worker and per-node HDR counts, counts,
sums, sums of squares, min and max. The controller adds them up (`merge_core`), so the
merged percentiles are those of every request and min/max/mean/pstdev are exact.

Ray is imported only here and only when a run starts (`_import_ray`): ``import nhbench``
never loads it.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, TypeVar

from .. import _histogram
from .._exceptions import NHBenchError, OptionsError, RunError
from .._groups import MAX_GROUPS, NONE_GROUP, OTHER_GROUP, refuse_unknown_group_rules
from .._progress import EndpointProgress, GroupProgress, Progress
from .._push import MetricsPush, run_pushing
from .._result import HostEntry, Result, WorkerResult
from .._run import Benchmark
from .._timeline import IntervalRecord
from .._version import __version__
from ..options import Options, make_options

if TYPE_CHECKING:
    from ._loadgen_session import LoadgenSession

__all__ = ["Cluster", "ClusterBenchmark", "RaySession", "merge_core", "merge_endpoints",
           "merge_groups", "merge_intervals", "merge_stats"]

_NS = 1_000_000_000
# Clock rounds per node: the round with the shortest round trip bounds the offset best,
# and five rounds cost a few milliseconds on a LAN.
_CLOCK_ROUNDS = 5
# The scheduled start lies this far ahead of the moment the run calls go out, at least.
# Every actor already answered (version and clock), so what remains is one Ray call and
# the node's own start (resolve the target, start its workers): tens of milliseconds even
# on a loaded node. One second leaves room for a slow node without a noticeable wait.
_START_LEAD = 1.0
# With actors kept from an earlier run (`RaySession`) the lead is what the nodes took to arm
# last time (from the run call to armed workers), twice over, within [_WARM_LEAD,
# _START_LEAD]: a warm actor arms in 5-70 ms on a loaded machine, and a whole second per step
# is most of a short step's overhead. The start delay (the prefetch window) still follows,
# as on one machine. A node later than the lead starts at once, and says so (ready_margin).
_WARM_LEAD = 0.1
# The controller wakes this often to forward a stop, ask for progress and check deadlines.
_POLL_INTERVAL = 0.1
# Progress is asked of every node at most this often (one Ray call per node).
_PROGRESS_INTERVAL = 0.5
# Slack past the planned end before the controller stops the nodes itself, and again
# before it gives up on them (the same rule as the local run's watchdog).
_WATCHDOG_SLACK = 10.0
# How long connecting to the head's port may take before the address counts as unreachable.
_CONNECT_TIMEOUT = 5.0
# Time for every node's version and first clock answer: creating an actor starts a Python
# worker process on the node, which takes a few seconds on a busy machine.
_READY_TIMEOUT = 120.0
# Time for a kept actor to answer before it counts as gone (and a new one is placed).
_PING_TIMEOUT = 10.0
# Time for every node's check of its share (`_LoadActor.check`): it may resolve the target,
# which a slow resolver can stretch to its own timeout (5 s by default, twice).
_CHECK_TIMEOUT = 30.0
# The actor's calls may overlap: run() blocks for the whole run while stop() and
# progress() must still reach it.
_ACTOR_CONCURRENCY = 4


@dataclass(frozen=True)
class Cluster:
    """A Ray cluster to generate load from: its `address` (Ray's: ``"auto"``,
    ``"HOST:PORT"``, ``"ray://HOST:PORT"``) and how many nodes to use (`hosts`, None: every
    alive node)."""

    address: str = "auto"
    hosts: int | None = None

    def options(self) -> dict[str, Any]:
        """The run options that say the same thing (``ray=``, ``hosts=``)."""
        return {"ray": self.address, "hosts": self.hosts}


# ---- the load actor (runs on each node) --------------------------------------------------


class _NodeBenchmark(Benchmark):
    """A `Benchmark` that keeps the core's raw interval dicts (with their HDR counts)
    instead of turning them into records: the controller merges every node's interval k
    into one, which needs the counts, not the percentiles."""

    def __init__(self, options: Options) -> None:
        super().__init__(options)
        self._raw: list[dict[str, Any]] = []
        self._raw_lock = threading.Lock()

    def intervals(self) -> list[IntervalRecord]:
        if self.options.effective_stats_interval and self._run is not None:
            taken = self._core_run().take_intervals()
            with self._raw_lock:
                self._raw += taken
        return []

    def _metrics_push(self) -> None:
        # The controller pushes the merged intervals; a node pushes nothing of its own.
        return None

    def take_raw(self) -> list[dict[str, Any]]:
        with self._raw_lock:
            taken, self._raw = self._raw, []
        return taken



class _LoadActor:
    """One node's share of each run. Ray makes it an actor (`_actor_class`); it is a plain
    class here so that importing this module does not import Ray.

    One actor may serve many runs, one after another (a campaign's steps, the service's
    executions: `RaySession`): each run builds its own `_NodeBenchmark` (the core's objects
    are per run), and every call names its run (`run_id`), so that a stop sent for one run
    (possibly before it began here) never stops a later one, and progress never reports a
    finished run as the current one."""

    def __init__(self) -> None:
        self._benchmark: _NodeBenchmark | None = None
        self._run_id = ""
        self._stopped_id: str | None = None
        self._lock = threading.Lock()

    def info(self) -> dict[str, Any]:
        """Who and where: nhbench's version, the host name, the node id and address."""
        import ray

        return {
            "version": __version__,
            "hostname": socket.gethostname(),
            "node_id": ray.get_runtime_context().get_node_id(),
            "address": ray.util.get_node_ip_address(),
            "pid": os.getpid(),
        }

    def clock(self) -> int:
        """This node's wall clock (epoch ns), for the controller's offset rounds."""
        return time.time_ns()

    def check(self, data: Mapping[str, Any]) -> dict[str, Any] | None:
        """What this node would refuse of the run in `data` before sending anything (its
        options, its descriptor limit after raising it, its source addresses: the checks
        of `Benchmark.start`, by `Benchmark.preflight`), None when its share fits. The
        controller asks every node this before any node starts
        (`ClusterBenchmark._preflight`), so that one node's refusal refuses the whole run
        and nothing is sent."""
        try:
            _NodeBenchmark(make_options(**dict(data))).preflight()
        except NHBenchError as exc:
            return {"kind": "options" if isinstance(exc, OptionsError) else "nhbench",
                    "option": getattr(exc, "option", None),
                    "message": (str(exc).strip() or type(exc).__name__).splitlines()[0][:500]}
        return None

    def run(self, data: Mapping[str, Any], run_id: str = "") -> dict[str, Any]:
        """Run the options in `data` (already carrying this node's scheduled start) and
        return the core's raw result dict (``core``: the exact statistics the controller
        merges) and when the node's workers were armed (``armed_ns``, its clock)."""
        # A node that refuses the options (a file missing there, a value its version does not
        # take) says so as an options error naming the option, as the controller would.
        options = make_options(**dict(data))
        benchmark = _NodeBenchmark(options)
        with self._lock:
            self._benchmark = benchmark
            self._run_id = run_id
            if self._stopped_id == run_id:
                benchmark.stop()
        try:
            benchmark.start()
            armed_ns = time.time_ns()
            benchmark.run()
            # The raw dict, not the Result: it has every worker's HDR counts and the exact
            # count, sum and sum of squares, which the Result keeps only as derived values.
            core = benchmark._core_run().result()
            benchmark.intervals()  # the last, partial interval is ready once the run has ended
            # The endpoints' names as this node resolved them: the controller merges the
            # nodes' endpoints by name (each node resolves the target itself).
            return {"core": core, "armed_ns": armed_ns, "intervals": benchmark.take_raw(),
                    "endpoints": benchmark.endpoint_names()}
        finally:
            # The actor outlives the run: it must not keep the run's core objects until the
            # next one, nor answer progress for it.
            with self._lock:
                if self._benchmark is benchmark:
                    self._benchmark = None

    def progress(self, run_id: str = "") -> dict[str, Any] | None:
        """The node's live counters and the intervals closed since the last call (raw
        core dicts), None before run `run_id` started here (or after it ended)."""
        with self._lock:
            benchmark = self._benchmark if self._run_id == run_id else None
        if benchmark is None or benchmark._run is None:
            return None
        snapshot = benchmark.progress()
        return {"elapsed": snapshot.elapsed, "counters": dict(snapshot.counters),
                "endpoints": [(e.name, e.connections, e.requests, e.errors)
                              for e in snapshot.endpoints],
                "groups": [(g.name, g.requests, g.errors) for g in snapshot.groups],
                "intervals": benchmark.take_raw()}

    def stop(self, run_id: str = "") -> None:
        """Stop run `run_id` gracefully (before it started here: as soon as it starts)."""
        with self._lock:
            self._stopped_id = run_id
            if self._benchmark is not None and self._run_id == run_id:
                self._benchmark.stop()


# ---- the exact merge -----------------------------------------------------------------------


def _merge_moments(parts: Sequence[Mapping[str, Any]], with_counts: bool) -> dict[str, Any]:
    # Counts, sums and sums of squares add; min and max of the non-empty parts. HDR bucket
    # counts add index by index, which is what merging HdrHistograms of one layout is.
    present = [p for p in parts if int(p.get("count", 0)) > 0]
    out: dict[str, Any] = {
        "count": sum(int(p.get("count", 0)) for p in parts),
        "min": min((int(p.get("min", 0)) for p in present), default=0),
        "max": max((int(p.get("max", 0)) for p in present), default=0),
        "sum": sum(float(p.get("sum", 0.0)) for p in parts),
        "sumsq": sum(float(p.get("sumsq", 0.0)) for p in parts),
    }
    if with_counts:
        out["counts"] = _histogram.merge_sparse([part.get("counts") or () for part in present])
    return out


def merge_stats(parts: Sequence[Mapping[str, Any]], workers: int) -> dict[str, Any]:
    """Merge statistics dicts of the core's shape (``stats_to_dict``): counters add,
    histograms and streams merge exactly (`_merge_moments`), the start is the earliest and
    the duration the mean over `workers`, as the core computes its own global entry from
    its workers. Starts must already be in one clock."""
    counters: dict[str, int] = {}
    for part in parts:
        for name, value in (part.get("counters") or {}).items():
            counters[name] = counters.get(name, 0) + int(value)
    histograms: dict[str, Any] = {}
    for stat_id in dict.fromkeys(k for p in parts for k in (p.get("histograms") or {})):
        histograms[stat_id] = _merge_moments(
            [p["histograms"][stat_id] for p in parts if stat_id in (p.get("histograms") or {})],
            with_counts=True)
    streams: dict[str, Any] = {}
    for stat_id in dict.fromkeys(k for p in parts for k in (p.get("streams") or {})):
        streams[stat_id] = _merge_moments(
            [p["streams"][stat_id] for p in parts if stat_id in (p.get("streams") or {})],
            with_counts=False)
    starts = [int(p.get("execution_start_ns") or 0) for p in parts]
    starts = [s for s in starts if s > 0]
    total_duration = sum(int(p.get("execution_duration_ns") or 0) for p in parts)
    return {
        "execution_start_ns": min(starts, default=0),
        "execution_duration_ns": total_duration // max(1, workers),
        "counters": counters,
        "histograms": histograms,
        "streams": streams,
    }


def merge_intervals(parts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One interval from every node's interval of the same index (raw dicts of
    ``ClientRun.take_intervals()``). Every node started at the same instant with the same
    stats_interval, so interval k covers the same stretch of time on each (within the clock
    offset): counters add, the latency's HDR counts add, the start is the earliest and the
    duration the longest measured."""
    counters: dict[str, int] = {}
    for part in parts:
        for name, value in (part.get("counters") or {}).items():
            counters[name] = counters.get(name, 0) + int(value)
    return {
        "index": parts[0].get("index", 0),
        "start": min(float(p.get("start", 0.0)) for p in parts),
        "duration": max(float(p.get("duration", 0.0)) for p in parts),
        "counters": counters,
        "latency": _merge_moments([p.get("latency") or {} for p in parts], with_counts=True),
    }


def merge_endpoints(parts: Sequence[tuple[Sequence[str], Sequence[Mapping[str, Any]]]],
                    ) -> tuple[list[str], list[dict[str, Any]]]:
    """The per-endpoint entries of several nodes, each given as (names, core endpoint
    dicts), merged by name in the order names first appear: connections, requests and
    errors add, the latency's HDR counts add (`_merge_moments`). A node with one endpoint
    reports none, so an endpoint's numbers are those of the nodes that spread over it."""
    names: list[str] = []
    merged: dict[str, list[Mapping[str, Any]]] = {}
    for part_names, entries in parts:
        if len(part_names) != len(entries):
            part_names = [f"endpoint_{i}" for i in range(len(entries))]
        for name, entry in zip(part_names, entries, strict=True):
            if name not in merged:
                names.append(name)
                merged[name] = []
            merged[name].append(entry)
    out = []
    for name in names:
        entries = merged[name]
        out.append({
            "connections": sum(int(e.get("connections", 0)) for e in entries),
            "requests": sum(int(e.get("requests", 0)) for e in entries),
            "errors": sum(int(e.get("errors", 0)) for e in entries),
            "latency": _merge_moments([e.get("latency") or {} for e in entries],
                                      with_counts=True),
        })
    return names, out


def _merge_group(entries: Sequence[Mapping[str, Any]], kind: str, value: bytes) -> dict[str, Any]:
    classes = [0] * 6
    for entry in entries:
        for k, count in enumerate(entry.get("classes") or ()):
            classes[k] += int(count)
    return {
        "kind": kind, "value": value,
        "requests": sum(int(e.get("requests", 0)) for e in entries),
        "classes": classes,
        "failures": sum(int(e.get("failures", 0)) for e in entries),
        "check_failed": sum(int(e.get("check_failed", 0)) for e in entries),
        "latency": _merge_moments([e.get("latency") or {} for e in entries], with_counts=True),
    }


def merge_groups(parts: Sequence[Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """The groups (``--group-by``, docs/engine.md "Groups") of several nodes' core results,
    merged as the core merges its workers' (csrc/client/group.c): by request kind or target
    every node has the same planned groups in the same order, so they add index by index; by
    a header the values join by value, in the order they first appear, at most `MAX_GROUPS`
    of them, the rest (and each node's own "other") into "other", each node's "none" into
    "none". Counts add and the latency's HDR counts add (`_merge_moments`): exact. The shape
    is the core's: "none", the values, then "other"."""
    parts = [list(p) for p in parts if p]
    if not parts:
        return []
    if all(e.get("kind") == "index" for p in parts for e in p):
        width = max(len(p) for p in parts)
        return [_merge_group([p[i] for p in parts if i < len(p)], "index", b"")
                for i in range(width)]
    none: list[Mapping[str, Any]] = []
    other: list[Mapping[str, Any]] = []
    values: dict[bytes, list[Mapping[str, Any]]] = {}
    for part in parts:
        for entry in part:
            kind = entry.get("kind")
            if kind == "none":
                none.append(entry)
            elif kind == "other":
                other.append(entry)
            elif not int(entry.get("requests", 0)):
                continue  # a value only the warm-up saw, as the core's own merge drops it
            else:
                value = bytes(entry.get("value", b""))
                if value in values:
                    values[value].append(entry)
                elif len(values) < MAX_GROUPS:
                    values[value] = [entry]
                else:
                    other.append(entry)
    return [_merge_group(none, "none", b""),
            *(_merge_group(entries, "value", value) for value, entries in values.items()),
            _merge_group(other, "other", b"")]


def _shift(stats: Mapping[str, Any], offset_ns: int) -> dict[str, Any]:
    # A node's start, moved from its clock to the controller's.
    out = dict(stats)
    start = int(out.get("execution_start_ns") or 0)
    if start:
        out["execution_start_ns"] = start - offset_ns
    return out


# Which end reason wins when the nodes ended differently: the worst first.
_END_ORDER = ("error", "failure_predicate", "termination_predicate", "stop", "duration")


def _end_rank(reason: str) -> int:
    kind = reason.split(":", 1)[0]
    return _END_ORDER.index(kind) if kind in _END_ORDER else 0


def merge_core(cores: Sequence[Mapping[str, Any]], offsets_ns: Sequence[int]) -> dict[str, Any]:
    """One core result dict for several nodes' core results: every node's workers in node
    order (their starts in the controller's clock, `offsets_ns` being each node's clock
    minus the controller's), the global entry merged exactly from theirs, the end reason
    the worst of theirs, schedule facts summed."""
    workers: list[dict[str, Any]] = []
    globals_: list[dict[str, Any]] = []
    for core, offset in zip(cores, offsets_ns, strict=True):
        workers += [_shift(w, offset) for w in core.get("workers") or ()]
        globals_.append(_shift(core["global"], offset))
    # The global duration is the mean over all workers, like the core's (their sum over
    # their number); a node's global entry carries its own mean, so it is weighted back.
    weighted = [
        {**g, "execution_duration_ns": int(g.get("execution_duration_ns") or 0)
         * max(1, len(core.get("workers") or ()))}
        for g, core in zip(globals_, cores, strict=True)
    ]
    merged = merge_stats(weighted, max(1, len(workers)))
    reasons = [str(core.get("terminated_by") or "duration") for core in cores]
    failed: list[str] = []
    for core in cores:
        failed += [name for name in core.get("failed_predicates") or () if name not in failed]
    warmups = [_shift(core["warmup"], offset)
               for core, offset in zip(cores, offsets_ns, strict=True) if core.get("warmup")]
    schedules = [core.get("schedule") or {} for core in cores]
    stage_count = max((len(s.get("stages") or ()) for s in schedules), default=0)
    stages = []
    for i in range(stage_count):
        pairs = [s["stages"][i] for s in schedules if i < len(s.get("stages") or ())]
        stages.append((sum(int(p[0]) for p in pairs), sum(int(p[1]) for p in pairs)))
    # Each worker's load in the measured phase (thread CPU, run-queue wait, hiccups), in the
    # workers' order: the validity checks read every node's workers, as a run's.
    load: list[Mapping[str, Any]] = []
    for core in cores:
        load += list(core.get("load") or ())
    return {
        "workers": workers,
        "load": load,
        "global": merged,
        "terminated_by": min(reasons, key=_end_rank),
        "failed_predicates": failed,
        "error": next((core.get("error") for core in cores if core.get("error")), None),
        "insecure": any(bool(core.get("insecure")) for core in cores),
        "warmup": merge_stats(warmups, max(1, len(workers))) if warmups else None,
        "groups": merge_groups([core.get("groups") or () for core in cores]),
        "schedule": {
            "released": sum(int(s.get("released", 0)) for s in schedules),
            "no_catchup_moves": sum(int(s.get("no_catchup_moves", 0)) for s in schedules),
            "no_catchup_shift": sum(float(s.get("no_catchup_shift", 0.0)) for s in schedules),
            "no_catchup_lost": sum(int(s.get("no_catchup_lost", 0)) for s in schedules),
            "warmup_released": sum(int(s.get("warmup_released", 0)) for s in schedules),
            "stages": stages,
        },
    }


# ---- the controller ------------------------------------------------------------------------


@dataclass
class _Host:
    name: str
    node_id: str
    address: str
    actor: Any = None
    hostname: str = ""
    version: str = ""
    offset_ns: int = 0
    uncertainty_ns: int = 0


#: A node of a run: a Ray actor's host, or a load generator (`_loadgen._Generator`).
_H = TypeVar("_H", bound=_Host)


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise RunError(
            f"--ray needs Ray, which is not installed ({exc}): pip install 'nhbench[ray]'"
        ) from exc
    return ray


def _probe(address: str) -> None:
    # Ray's own connect retries an unreachable head for a minute and more, logging as it
    # goes; one TCP connection says the same at once, in one line.
    target = address.removeprefix("ray://")
    if target == "auto" or ":" not in target:
        return
    host, _, port = target.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=_CONNECT_TIMEOUT):
            pass
    except ValueError:
        raise OptionsError(f"ray: not a Ray address: {address!r} (HOST:PORT, ray://HOST:PORT "
                           f"or auto)", option="ray") from None
    except OSError as exc:
        reason = exc.strerror or str(exc) or type(exc).__name__
        raise RunError(f"--ray: cannot reach the Ray cluster at {address}: {reason}") from None


def _actor_class(ray: Any) -> Any:
    # num_cpus=0: the actor only waits while nhbench's own C workers (pinned with --cpus, as
    # on one machine) make the load; reserving Ray CPUs would not keep other Ray work off
    # those cores, and would make the actor unplaceable on a node whose Ray CPUs are taken
    # or that advertises none (a head started with --num-cpus=0).
    return ray.remote(num_cpus=0, max_concurrency=_ACTOR_CONCURRENCY, max_restarts=0)(_LoadActor)


class RaySession:
    """One Ray cluster connection and one set of load actors, kept for many runs.

    ``with RaySession() as session: make_benchmark(options, session=session).run()`` for
    each run: the first connects (``ray.init``) and places one actor per chosen node; later
    runs reuse both, each with its own options (the actor builds the core's objects per
    run). A run whose nodes differ (another ``hosts``, a node gone or added) places actors
    only on the nodes that are new to the session and ends those no longer used; another
    address reconnects. A run that fails once its actors had work (a lost node, a watchdog,
    Ctrl-C) ends every actor, so the next run starts from fresh ones on the nodes alive
    then; a run refused before that (a bad option) leaves them as they were. ``close()``
    (the end of the ``with``) ends the actors and the connection this session opened.

    One run at a time: a second one waits for the first. `connections` counts the
    ``ray.init`` calls made, `actors_started` the actors placed (docs/distributed.md,
    "Campaigns on Ray")."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ray: Any = None
        self._address: str | None = None
        self._connected_here = False
        self._hosts: list[_Host] = []
        # The last run's arming time on these actors (None: no run on them yet).
        self._armed_in: float | None = None
        self.connections = 0
        self.actors_started = 0
        self.last_used = time.monotonic()

    def __enter__(self) -> RaySession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def actors(self) -> int:
        """How many load actors the session holds now."""
        return len(self._hosts)

    def close(self) -> None:
        """End the actors and, if this session connected, the connection (idempotent)."""
        with self._lock:
            self._close()

    def _close(self) -> None:
        self._discard()
        if self._ray is not None and self._connected_here:
            self._ray.shutdown()
        self._ray = None
        self._address = None
        self._connected_here = False

    def _connect(self, address: str) -> Any:
        ray = _import_ray()
        if self._ray is not None and (self._address != address or not ray.is_initialized()):
            self._close()
        if self._ray is None:
            connected_here = False
            if not ray.is_initialized():
                _probe(address)
                try:
                    ray.init(address=address, logging_level="ERROR", log_to_driver=False,
                             configure_logging=False)
                except (ConnectionError, RuntimeError, ValueError) as exc:
                    raise RunError(f"--ray: cannot connect to the Ray cluster at {address}: "
                                   f"{_first_line(exc)}") from None
                connected_here = True
                self.connections += 1
            self._ray, self._address, self._connected_here = ray, address, connected_here
        return ray

    def _discard(self, keep: Sequence[str] = ()) -> None:
        """End the actors, but those on the nodes in `keep`."""
        kept = []
        for host in self._hosts:
            if host.node_id in keep:
                kept.append(host)
                continue
            if host.actor is not None and self._ray is not None:
                try:
                    self._ray.kill(host.actor)
                except Exception:  # noqa: BLE001 - a dead node's actor is gone already
                    pass
        self._hosts = kept
        if not kept:
            self._armed_in = None


class ClusterBenchmark:
    """One run on a Ray cluster, with `Benchmark`'s face: ``run()`` and ``stop()``.

    With a `session` the run uses the session's connection and actors (and leaves them to
    it); without one it connects, places its actors and ends both itself."""

    #: The option that placed the run, as refusals name it.
    _FLAG = "--ray"

    def __init__(self, options: Options, session: RaySession | None = None) -> None:
        refuse_unknown_group_rules(options)
        self.options = options
        self._session = session
        self._run_id = uuid.uuid4().hex
        # Whether the actors got work of this run (a run call, or their placement): a
        # failure after that leaves them in a state no later run should inherit.
        self._dispatched = False
        self._lead = _START_LEAD
        self._stop_requested = False
        self._stop_sent = False
        self._hosts: list[_Host] = []
        # Live intervals: every node's raw interval k, by k, until all nodes have sent it.
        self._intervals: dict[int, dict[str, dict[str, Any]]] = {}
        self._timeline: list[IntervalRecord] = []

    def stop(self) -> None:
        """Ask every node's run to stop gracefully (idempotent, safe from signal handlers):
        the controller's loop forwards it to the nodes within 0.1 s."""
        self._stop_requested = True

    @property
    def stop_requested(self) -> bool:
        return self._stop_requested

    def run(
        self,
        on_progress: Callable[[Progress], object] | None = None,
        on_interval: Callable[[IntervalRecord], object] | None = None,
    ) -> Result:
        """Place the actors, start every node at one time, wait, merge. `on_progress` gets
        the nodes' counters summed about every 0.5 s; `on_interval` each merged interval
        (every node's interval k added up) once every node has closed it."""
        session = self._session if self._session is not None else RaySession()
        with self._using(session, own=self._session is None):
            ray = session._connect(self.options.ray or "auto")
            # Ray's driver prints what the cluster reports (a worker that died, with its
            # exit detail) on stdout from a thread of its own; stdout is the report's (the
            # json output may go there), so during the run such lines go to stderr.
            with contextlib.redirect_stdout(sys.stderr):
                push = MetricsPush(self.options) if self.options.pushes_metrics else None
                return run_pushing(
                    push, lambda interval: self._run(ray, session, on_progress, interval),
                    on_interval)

    @contextlib.contextmanager
    def _using(self, session: RaySession | LoadgenSession, own: bool) -> Iterator[None]:
        """One run on `session` (its lock held: one run at a time). A run that fails once
        its nodes had work (`_dispatched`) ends them all, so that no later run inherits
        their state; a session made for this run alone (`own`) is closed after it."""
        try:
            with session._lock:
                session.last_used = time.monotonic()
                try:
                    yield
                except BaseException:
                    if self._dispatched:
                        session._discard()
                    raise
                finally:
                    session.last_used = time.monotonic()
        finally:
            if own:
                session.close()

    # ---- steps ------------------------------------------------------------------------

    def _run(self, ray: Any, session: RaySession,
             on_progress: Callable[[Progress], object] | None,
             on_interval: Callable[[IntervalRecord], object] | None) -> Result:
        self._acquire(ray, session)
        base = self.options.model_dump(exclude={"ray", "hosts", "scheduled_start"})
        self._preflight(ray, base)
        self._measure_clocks(ray)
        scheduled = self._scheduled_start()
        refs = {}
        sent = time.time()
        for host in self._hosts:
            # The scheduled start in the node's own clock: the node compares it with its
            # clock, so the same instant is the controller's plus the node's offset.
            data = {**base, "scheduled_start": scheduled + host.offset_ns / _NS}
            refs[host.actor.run.remote(data, self._run_id)] = host
        answers = self._wait(ray, refs, scheduled, on_progress, on_interval)
        for host, answer in zip(self._hosts, answers, strict=True):
            self._collect(host, answer.get("intervals") or ())
        self._deliver(on_interval, final=True)
        # How long the nodes took from the run call to armed workers: the next run on these
        # actors leads by twice that (within the bounds), instead of the cold start's second.
        session._armed_in = max((int(a["armed_ns"]) - h.offset_ns) / _NS - sent
                                for h, a in zip(self._hosts, answers, strict=True))
        return self._result(answers, scheduled)

    def _acquire(self, ray: Any, session: RaySession) -> None:
        """This run's hosts: the session's actors on the chosen nodes, and new ones on the
        chosen nodes it has none on. A kept actor that does not answer is replaced."""
        nodes = self._choose(ray)
        chosen = [str(node["NodeID"]) for node in nodes]
        kept = {host.node_id: host for host in session._hosts if host.node_id in chosen}
        if kept:
            self._hosts = list(kept.values())
            try:
                self._check_ready(ray, _PING_TIMEOUT)
            except RunError:
                kept = {}  # an actor gone since the last run: every one is placed anew
        self._dispatched = True
        session._discard(keep=list(kept))
        fresh = self._place(ray, [node for node in nodes if str(node["NodeID"]) not in kept])
        session._hosts += fresh
        session.actors_started += len(fresh)
        if fresh:
            self._hosts = fresh
            self._check_ready(ray)
        self._hosts = self._for_this_run(session._hosts, chosen, lambda host: host.node_id,
                                         None if fresh else session._armed_in)

    def _for_this_run(self, held: Sequence[_H], chosen: Sequence[Hashable],
                      key: Callable[[_H], Hashable], armed_in: float | None) -> list[_H]:
        """This run's copies of the session's nodes (a Ray actor's or a load generator's),
        `chosen` by `key` in the run's order: its clock offsets are its own, and the nodes
        are named by position as always. `armed_in`: how long the kept nodes took to arm
        last time (None when some are new), which sets a warm session's shorter lead."""
        if armed_in is not None:
            self._lead = min(_START_LEAD, max(_WARM_LEAD, 2 * armed_in))
        by_key = {key(host): host for host in held}
        return [replace(by_key[k], name=f"host_{i}", offset_ns=0, uncertainty_ns=0)
                for i, k in enumerate(chosen)]

    def _choose(self, ray: Any) -> list[dict[str, Any]]:
        """The alive nodes this run uses: the first `hosts` by address, then node id."""
        alive = sorted((n for n in ray.nodes() if n.get("Alive")),
                       key=lambda n: (str(n.get("NodeManagerAddress")), str(n.get("NodeID"))))
        wanted = self.options.hosts or len(alive)
        if wanted > len(alive):
            raise OptionsError(
                f"hosts: {wanted} nodes asked for, but the Ray cluster at "
                f"{self.options.ray} has {len(alive)} alive node{'s' if len(alive) != 1 else ''}",
                option="hosts")
        if not alive:
            raise RunError(f"--ray: the Ray cluster at {self.options.ray} has no alive node")
        return alive[:wanted]

    def _place(self, ray: Any, nodes: Sequence[Mapping[str, Any]]) -> list[_Host]:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        actor_class = _actor_class(ray)
        hosts = []
        for i, node in enumerate(nodes):
            host = _Host(name=f"host_{i}", node_id=str(node["NodeID"]),
                         address=str(node.get("NodeManagerAddress") or ""))
            host.actor = actor_class.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(host.node_id, soft=False),
                name=None,
            ).remote()
            hosts.append(host)
        return hosts

    def _check_ready(self, ray: Any, timeout: float = _READY_TIMEOUT) -> None:
        refs = {host.actor.info.remote(): host for host in self._hosts}
        ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=timeout)
        for ref, host in refs.items():
            if ref not in ready:
                raise RunError(f"--ray: {self._describe(host)} did not start its load actor "
                               f"within {timeout:g} s")
            try:
                info = ray.get(ref)
            except ray.exceptions.RayError as exc:
                raise RunError(f"--ray: {self._describe(host)} could not start its load actor "
                               f"(is nhbench installed there?): {_first_line(exc)}") from None
            host.hostname = str(info.get("hostname") or "")
            host.version = str(info.get("version") or "")
            if host.version != __version__:
                raise RunError(f"--ray: {self._describe(host)} runs nhbench {host.version}, "
                               f"this controller {__version__}: install the same version on "
                               f"every node")

    def _preflight(self, ray: Any, base: Mapping[str, Any]) -> None:
        # Every node's check of its share (`_LoadActor.check`), all at once: one Ray round
        # trip, a few milliseconds, before any node has a run call.
        refs = {host.actor.check.remote(base): host for host in self._hosts}
        ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=_CHECK_TIMEOUT)
        answers = []
        for ref, host in refs.items():
            if ref not in ready:
                raise RunError(f"--ray: {self._describe(host)} did not check the run within "
                               f"{_CHECK_TIMEOUT:g} s")
            try:
                answers.append((host, ray.get(ref)))
            except ray.exceptions.RayError as exc:
                raise RunError(f"--ray: {self._describe(host)} could not check the run: "
                               f"{_first_line(exc)}") from None
        self._refuse(answers, self._FLAG)

    def _refuse(self, answers: Sequence[tuple[_Host, Any]], flag: str) -> None:
        """The whole run refused when any node's check (`_LoadActor.check`) refused its
        share, naming every such node: an options error (exit 2) spelled as the option's
        own when the nodes refused the same one, a run error for any other failure."""
        refused = [(host, answer) for host, answer in answers if answer]
        if not refused:
            return
        # Refused before any node had its run: the actors are as good as before the run.
        self._dispatched = False
        failed = [(h, a) for h, a in refused if a.get("kind") != "options"]
        if failed:
            host, answer = failed[0]
            raise RunError(f"{flag}: {self._describe(host)}: "
                           f"{str(answer.get('message') or 'failed')[:500]}; no node started")
        options = {a.get("option") if isinstance(a.get("option"), str) else None
                   for _, a in refused}
        option = options.pop() if len(options) == 1 else None
        parts = []
        for host, answer in refused:
            message = str(answer.get("message") or "refused")[:500]
            if option and message.startswith(f"{option}: "):
                message = message[len(option) + 2:]
            parts.append(f"{self._describe(host)}: {message}")
        text = "; ".join(parts) + f" ({len(refused)} of {len(answers)} "\
            f"node{'s' if len(answers) != 1 else ''} refused; no node started)"
        raise OptionsError(f"{option}: {text}" if option else text, option=option)

    def _measure_clocks(self, ray: Any) -> None:
        # NTP's estimate: the node read its clock somewhere between t0 and t1, so the offset
        # is its reading minus the middle, within half the round trip. The round with the
        # shortest trip bounds it best.
        for host in self._hosts:
            best: tuple[int, int] | None = None
            for _ in range(_CLOCK_ROUNDS):
                t0 = time.time_ns()
                remote = int(ray.get(host.actor.clock.remote()))
                t1 = time.time_ns()
                trip = t1 - t0
                if best is None or trip < best[1]:
                    best = (remote - (t0 + t1) // 2, trip)
            assert best is not None
            host.offset_ns, host.uncertainty_ns = best[0], best[1] // 2

    def _scheduled_start(self) -> float:
        given = self.options.scheduled_start
        now = time.time()
        earliest = now + self._lead
        if given is not None:
            # The documented rule, whatever the lead: a warm session's shorter lead is a
            # measured guess, the user's start must not depend on it.
            if given < now + _START_LEAD:
                raise OptionsError(
                    f"scheduled_start: with {self._FLAG} it must lie at least "
                    f"{_START_LEAD:g} s ahead when the nodes are ready (it is "
                    f"{given - now:+.3f} s from now)",
                    option="scheduled_start")
            return float(given)
        return earliest + max(self.options.start_delay, 0.0)

    def _wait(self, ray: Any, refs: dict[Any, _Host], scheduled: float,
              on_progress: Callable[[Progress], object] | None,
              on_interval: Callable[[IntervalRecord], object] | None,
              ) -> list[dict[str, Any]]:
        # Each node's answer: {"core": its core result dict, "armed_ns": ...}.
        pending = list(refs)
        answers: dict[Any, dict[str, Any]] = {}
        deadline = self._deadline(scheduled)
        stopped_at: float | None = None
        next_progress = time.monotonic()
        while pending:
            try:
                ready, pending = ray.wait(pending, num_returns=len(pending),
                                          timeout=_POLL_INTERVAL)
            except KeyboardInterrupt:
                if self._stop_requested:
                    self._send_stop()
                    raise
                self.stop()
                ready = []
            # A node that answers early has either finished or failed; a failure must stop
            # the others now, not after they ran their whole duration.
            for ref in ready:
                answers[ref] = self._answer(ray, ref, refs[ref])
            stopped_at = self._watchdog(self._FLAG, deadline, stopped_at,
                                        [refs[r] for r in pending])
            if pending:
                next_progress = self._live(next_progress, lambda: self._progress(ray),
                                           on_progress, on_interval)
        return [answers[ref] for ref in refs]

    def _watchdog(self, flag: str, deadline: float, stopped_at: float | None,
                  running: Sequence[_Host]) -> float | None:
        """One pass of the controller's watch while the hosts' answers are awaited: stop
        them at the deadline (or on a stop request), and give up on those still `running`
        once the drain time and its slack have passed since. Returns when the stop was sent
        (None before). Every placement (Ray, --loadgen) waits so."""
        now = time.time()
        if now > deadline and not self._stop_requested:
            self.stop()
        if self._stop_requested and not self._stop_sent:
            self._send_stop()
            stopped_at = now
        if stopped_at is not None and now - stopped_at > (
                self.options.drain_timeout + _WATCHDOG_SLACK):
            late = ", ".join(self._describe(host) for host in running)
            raise RunError(f"{flag}: {late} did not finish within "
                           f"{self.options.drain_timeout + _WATCHDOG_SLACK:g} s of being "
                           f"stopped")
        return stopped_at

    def _live(self, next_progress: float, progress: Callable[[], Progress | None],
              on_progress: Callable[[Progress], object] | None,
              on_interval: Callable[[IntervalRecord], object] | None) -> float:
        """The live snapshot and the intervals closed so far, every _PROGRESS_INTERVAL while
        hosts still run (`progress()` asks them); returns when the next one is due."""
        if (on_progress is None and on_interval is None) or time.monotonic() < next_progress:
            return next_progress
        next_progress = time.monotonic() + _PROGRESS_INTERVAL
        snapshot = progress()
        if snapshot is not None and on_progress is not None:
            on_progress(snapshot)
        self._deliver(on_interval, final=False)
        return next_progress

    def _answer(self, ray: Any, ref: Any, host: _Host) -> dict[str, Any]:
        try:
            answer: dict[str, Any] = ray.get(ref)
            return answer
        except ray.exceptions.RayTaskError as exc:
            self._send_stop()
            cause = getattr(exc, "cause", None)
            if isinstance(cause, OptionsError):
                raise OptionsError(f"{self._describe(host)}: {cause}",
                                   option=cause.option) from None
            if isinstance(cause, NHBenchError):
                raise RunError(f"--ray: {self._describe(host)}: {cause}") from None
            raise RunError(f"--ray: {self._describe(host)} failed: "
                           f"{_first_line(exc)}") from None
        except ray.exceptions.RayError as exc:
            # The actor or its node died: its share of the load is unknown, so the merge
            # would be a wrong total. The run fails, naming the node, and the others stop.
            self._send_stop()
            raise RunError(f"--ray: {self._describe(host)} was lost during the run "
                           f"({_first_line(exc)}); no merged result") from None

    def _deadline(self, scheduled: float) -> float:
        options = self.options
        duration = options.effective_duration
        if duration is None:
            return float("inf")
        deadline = scheduled + duration + options.drain_timeout + _WATCHDOG_SLACK
        if options.warmup is not None:
            deadline += options.warmup + options.drain_timeout
        elif options.simple_warmup or options.sequential_warmup:
            count = 1 if options.simple_warmup else options.connections
            deadline += count * (options.request_timeout or options.timeout) + options.timeout
        return deadline

    def _send_stop(self) -> None:
        self._stop_sent = True
        for host in self._hosts:
            if host.actor is not None:
                host.actor.stop.remote(self._run_id)

    def _progress(self, ray: Any) -> Progress | None:
        refs = {host.actor.progress.remote(self._run_id): host for host in self._hosts}
        ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=1.0)
        elapsed = 0.0
        counters: dict[str, int] = {}
        endpoints: dict[str, list[int]] = {}
        groups: dict[str, list[int]] = {}
        seen = False
        for ref in ready:
            try:
                snapshot = ray.get(ref)
            except ray.exceptions.RayError:
                continue
            if not snapshot:
                continue
            seen = True
            self._collect(refs[ref], snapshot.get("intervals") or ())
            elapsed = max(elapsed, float(snapshot["elapsed"]))
            for name, value in snapshot["counters"].items():
                counters[name] = counters.get(name, 0) + int(value)
            for name, *values in snapshot.get("endpoints") or ():
                sums = endpoints.setdefault(str(name), [0, 0, 0])
                for i, value in enumerate(values):
                    sums[i] += int(value)
            for name, requests, errors in snapshot.get("groups") or ():
                # By name, with the bound of the result's merge (`merge_groups`).
                key = str(name)
                if key not in groups and key not in (NONE_GROUP, OTHER_GROUP) and sum(
                        k not in (NONE_GROUP, OTHER_GROUP) for k in groups) >= MAX_GROUPS:
                    key = OTHER_GROUP
                sums = groups.setdefault(key, [0, 0])
                sums[0] += int(requests)
                sums[1] += int(errors)
        if not seen:
            return None
        return Progress(elapsed=elapsed, counters=counters,
                        endpoints=tuple(EndpointProgress(name, *sums)
                                        for name, sums in endpoints.items()),
                        groups=tuple(GroupProgress(name, *sums) for name, sums in groups.items()))

    def _collect(self, host: _Host, raws: Sequence[Mapping[str, Any]]) -> None:
        for raw in raws:
            self._intervals.setdefault(int(raw.get("index", 0)), {})[host.name] = dict(raw)

    def _deliver(self, on_interval: Callable[[IntervalRecord], object] | None,
                 final: bool) -> None:
        # Interval k is merged once every node has closed it; at the end, whatever is
        # left (a node that stopped early has fewer intervals), in order.
        # Every interval keeps its histogram: the comparison of runs resamples them.
        keep = True
        while self._intervals:
            index = min(self._intervals)
            parts = self._intervals[index]
            if not final and len(parts) < len(self._hosts):
                return
            del self._intervals[index]
            record = IntervalRecord.from_core(merge_intervals(list(parts.values())),
                                              keep_histogram=keep,
                                              keep_latency=self.options.pushes_metrics)
            self._timeline.append(record)
            if on_interval is not None:
                on_interval(record)

    def _result(self, answers: list[dict[str, Any]], scheduled: float) -> Result:
        options = self.options
        points = options.percentile_points
        cores = [answer["core"] for answer in answers]
        merged = merge_core(cores, [h.offset_ns for h in self._hosts])
        names, merged["endpoints"] = merge_endpoints(
            [(answer.get("endpoints") or (), answer["core"].get("endpoints") or ())
             for answer in answers])
        result = Result.from_core(merged, options, interrupted=self._stop_requested or None,
                                  timeline=self._timeline, endpoints=names)
        # The workers are named after their host (Result.from_core would call them
        # worker_0..), and each host's own merge goes between them and the global entry.
        named: list[WorkerResult] = []
        host_entries: list[WorkerResult] = []
        entries: list[HostEntry] = []
        shifted = iter(merged["workers"])
        # Result.from_core made an entry of each merged worker (worker_0.., when more than
        # one): renamed here rather than made again, as percentiles of a thousand workers cost
        # seconds (docs/benchmarks.md, "Scale").
        made = iter(result.results[:-1] if len(result.results) > 1 else ())
        node_validity = []
        for host, core, answer in zip(self._hosts, cores, answers, strict=True):
            # The node's own verdict, from its own core result: its workers' loads, its
            # releases against its share of the rate (its worker count times rps). No
            # timeline of its own (the controller merges the intervals), so the trend
            # checks are the merged result's only.
            validity = Result.from_core(core, options).validity
            node_validity.append((host.name, validity))
            names = []
            for j in range(len(core.get("workers") or ())):
                name = f"{host.name}.worker_{j}"
                entry = next(shifted)
                earlier = next(made, None)
                worker = (earlier.model_copy(update={"name": name}) if earlier is not None
                          else WorkerResult.from_core(name, entry, points))
                names.append(worker.name)
                named.append(worker)
            own = _shift(core["global"], host.offset_ns)
            host_entries.append(WorkerResult.from_core(host.name, own, points))
            start = int(own.get("execution_start_ns") or 0)
            entries.append(HostEntry(
                name=host.name, node_id=host.node_id, address=host.address,
                hostname=host.hostname, version=host.version, workers=names,
                clock_offset=host.offset_ns / _NS,
                clock_uncertainty=host.uncertainty_ns / _NS,
                start_skew=(start / _NS - scheduled) if start else 0.0,
                ready_margin=scheduled - (int(answer["armed_ns"]) - host.offset_ns) / _NS,
                validity=validity,
            ))
        result.results = [*named, *host_entries, result.global_result]
        result.hosts = entries
        if result.validity is not None:
            result.validity = result.validity.with_nodes(node_validity)
        result.scheduled_start = datetime.fromtimestamp(scheduled, tz=timezone.utc)
        return result

    def _describe(self, host: _Host) -> str:
        where = host.hostname or host.address
        return f"{host.name} (node {host.node_id[:12]}, {where})"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]
