"""Load generators reached over SSH or in containers (``--loadgen``).

Each load generator runs the agent (``python -m nhbench.distributed._agent``), which serves
the Ray load actor's operations (`_LoadActor`: info, clock, check, run, progress, stop) in
JSON lines on its stdin and stdout. `LoadgenBenchmark` is `ClusterBenchmark` with those
agents in place of Ray actors: the same version check, pre-flight check, clock rounds,
scheduled start, watchdog, interval merge and result (`merge_core`, `merge_stats`,
`merge_endpoints`), so a run merges the same way wherever its load generators are. Only how
an agent is reached differs:

- ``ssh://USER@HOST[:PORT]``: a channel of the SSH host layer (nhbench.hosts: host-key
  policy, key, password from the environment, jump host);
- ``docker://CONTAINER``: ``docker exec -i CONTAINER ...``;
- ``kubectl://NS/POD[/CONTAINER]``: ``kubectl exec -i -n NS POD [-c CONTAINER] -- ...``.

What an agent sends back is checked before it is merged (`check_answer`): a remote that
answers something else than the core's result shape fails the run naming it, instead of
crashing the merge or adding numbers that do not add up.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any

from .._exceptions import NHBenchError, OptionsError, RunError
from .._progress import EndpointProgress, Progress
from .._push import MetricsPush, run_pushing
from .._result import Result
from .._timeline import IntervalRecord
from .._version import __version__
from ..hosts import SSHHost, SSHTarget, password_from_environment
from ..options import Options
from ._cluster import (
    _CHECK_TIMEOUT,
    _CLOCK_ROUNDS,
    _PING_TIMEOUT,
    _POLL_INTERVAL,
    _READY_TIMEOUT,
    ClusterBenchmark,
    _Host,
)
from ._loadgen_session import LoadgenSession

__all__ = ["LoadgenBenchmark", "Placement", "agent_argv", "check_answer", "parse_placement"]

_AGENT_MODULE = "nhbench.distributed._agent"
# One answer line may hold a whole core result (every worker's HDR buckets): a few MiB at
# most for hundreds of workers. A longer line is not an answer.
_MAX_LINE = 64 * 1024 * 1024
# How long a quick operation (clock, progress, stop) may take before it counts as lost.
_CALL_TIMEOUT = 10.0


@dataclass(frozen=True)
class Placement:
    """Where one load generator runs: `kind` (ssh, docker, kubectl) and its parts."""

    kind: str
    text: str
    target: SSHTarget | None = None
    container: str = ""
    namespace: str = ""
    pod: str = ""


def parse_placement(text: str) -> Placement:
    """``ssh://USER@HOST[:PORT]``, ``docker://CONTAINER``, ``kubectl://NS/POD[/CONTAINER]``
    -> `Placement` (OptionsError naming --loadgen otherwise)."""
    scheme, _, rest = text.partition("://")
    if scheme == "ssh":
        return Placement("ssh", text, target=SSHTarget.parse(rest, option="loadgen"))
    if scheme == "docker" and rest and "/" not in rest:
        return Placement("docker", text, container=rest)
    parts = rest.split("/")
    if scheme == "kubectl" and len(parts) in (2, 3) and all(parts):
        return Placement("kubectl", text, namespace=parts[0], pod=parts[1],
                         container=parts[2] if len(parts) == 3 else "")
    raise OptionsError(f"--loadgen {text!r}: expected ssh://USER@HOST[:PORT], "
                       f"docker://CONTAINER or kubectl://NS/POD[/CONTAINER]", option="loadgen")


def agent_argv(placement: Placement, python: str = "python3") -> list[str]:
    """The command that starts the agent there, as an argument list run on this machine
    (for ssh: the remote command line, one element, run by the remote shell)."""
    inner = [*shlex.split(python), "-m", _AGENT_MODULE]
    if placement.kind == "ssh":
        return [shlex.join(inner)]
    if placement.kind == "docker":
        return ["docker", "exec", "-i", placement.container, *inner]
    container = ["-c", placement.container] if placement.container else []
    return ["kubectl", "exec", "-i", "-n", placement.namespace, placement.pod,
            *container, "--", *inner]


# ---- what comes back: checked before it is merged ---------------------------------------


class _Bad(ValueError):
    pass


def _int(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _Bad(f"{what} is not a count")
    return value


def _num(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise _Bad(f"{what} is not a number")
    return float(value)


def _check_moments(entry: object, what: str, with_counts: bool) -> None:
    if not isinstance(entry, dict):
        raise _Bad(f"{what} is not an object")
    count = _int(entry.get("count", 0), f"{what}.count")
    for key in ("min", "max"):
        _int(entry.get(key, 0), f"{what}.{key}")
    for key in ("sum", "sumsq"):
        _num(entry.get(key, 0.0), f"{what}.{key}")
    if with_counts:
        buckets = entry.get("counts") or []
        if not isinstance(buckets, list):
            raise _Bad(f"{what}.counts is not a list")
        total = 0
        for pair in buckets:
            if not isinstance(pair, list) or len(pair) != 2:
                raise _Bad(f"{what}.counts holds something else than (index, count) pairs")
            _int(pair[0], f"{what}.counts index")
            total += _int(pair[1], f"{what}.counts count")
        # The HDR buckets hold every recorded value once: their sum is the count.
        if buckets and total != count:
            raise _Bad(f"{what}: its histogram holds {total} values, its count says {count}")


def _check_stats(stats: object, what: str) -> None:
    if not isinstance(stats, dict):
        raise _Bad(f"{what} is not an object")
    counters = stats.get("counters") or {}
    if not isinstance(counters, dict):
        raise _Bad(f"{what}.counters is not an object")
    for name, value in counters.items():
        _int(value, f"{what}.counters[{name!r}]")
    for key, with_counts in (("histograms", True), ("streams", False)):
        group = stats.get(key) or {}
        if not isinstance(group, dict):
            raise _Bad(f"{what}.{key} is not an object")
        for stat_id, entry in group.items():
            _check_moments(entry, f"{what}.{key}[{stat_id!r}]", with_counts)
    _int(stats.get("execution_start_ns") or 0, f"{what}.execution_start_ns")
    _int(stats.get("execution_duration_ns") or 0, f"{what}.execution_duration_ns")


def check_answer(answer: object) -> dict[str, Any]:
    """A run's answer as `merge_core` reads it, or ValueError saying what is wrong: every
    counter a count, every histogram's buckets adding up to its count, the workers' counters
    adding up to the node's own (a node's global entry is the sum of its workers)."""
    if not isinstance(answer, dict) or not isinstance(answer.get("core"), dict):
        raise _Bad("the answer has no core result")
    core = answer["core"]
    _check_stats(core.get("global"), "global")
    workers = core.get("workers")
    if not isinstance(workers, list) or not workers:
        raise _Bad("the core result has no workers")
    for i, worker in enumerate(workers):
        _check_stats(worker, f"workers[{i}]")
    for name, value in core["global"].get("counters", {}).items():
        added = sum(int(w.get("counters", {}).get(name, 0)) for w in workers)
        if added != value:
            raise _Bad(f"counter {name!r}: the workers add up to {added}, the node says {value}")
    if core.get("warmup") is not None:
        _check_stats(core["warmup"], "warmup")
    for key in ("endpoints", "load", "failed_predicates"):
        if not isinstance(core.get(key) or [], list):
            raise _Bad(f"{key} is not a list")
    for i, endpoint in enumerate(core.get("endpoints") or []):
        if not isinstance(endpoint, dict):
            raise _Bad(f"endpoints[{i}] is not an object")
        for key in ("connections", "requests", "errors"):
            _int(endpoint.get(key, 0), f"endpoints[{i}].{key}")
        _check_moments(endpoint.get("latency") or {}, f"endpoints[{i}].latency", True)
    _int(answer.get("armed_ns"), "armed_ns")
    if not isinstance(answer.get("intervals") or [], list):
        raise _Bad("intervals is not a list")
    for i, raw in enumerate(answer.get("intervals") or []):
        _check_interval(raw, i)
    if not isinstance(answer.get("endpoints") or [], list):
        raise _Bad("endpoints is not a list")
    return answer


def _check_interval(raw: object, i: int) -> None:
    if not isinstance(raw, dict):
        raise _Bad(f"intervals[{i}] is not an object")
    _int(raw.get("index", 0), f"intervals[{i}].index")
    _num(raw.get("start", 0.0), f"intervals[{i}].start")
    _num(raw.get("duration", 0.0), f"intervals[{i}].duration")
    counters = raw.get("counters") or {}
    if not isinstance(counters, dict):
        raise _Bad(f"intervals[{i}].counters is not an object")
    for name, value in counters.items():
        _int(value, f"intervals[{i}].counters[{name!r}]")
    _check_moments(raw.get("latency") or {}, f"intervals[{i}].latency", True)


def _check_progress(snapshot: object) -> dict[str, Any] | None:
    if snapshot is None:
        return None
    if not isinstance(snapshot, dict):
        raise _Bad("progress is not an object")
    _num(snapshot.get("elapsed", 0.0), "progress.elapsed")
    counters = snapshot.get("counters")
    if not isinstance(counters, dict):
        raise _Bad("progress.counters is not an object")
    for name, value in counters.items():
        _int(value, f"progress.counters[{name!r}]")
    for entry in snapshot.get("endpoints") or []:
        if not isinstance(entry, list) or len(entry) != 4:
            raise _Bad("progress.endpoints holds something else than (name, 3 counts)")
        for value in entry[1:]:
            _int(value, "progress.endpoints count")
    for i, raw in enumerate(snapshot.get("intervals") or []):
        _check_interval(raw, i)
    return snapshot


# ---- one agent: a process reached through a byte stream ------------------------------------


class _Lost(Exception):
    """The agent's stream ended or broke (the process, its host or its container died)."""


class _AgentLink:
    """Requests to one agent and their answers: `call` sends a request and returns a
    future for its answer; a reader thread resolves them. When the stream ends, every
    waiting future fails with `_Lost`, with the last lines the agent wrote to stderr."""

    def __init__(self, name: str, reader: Any, writer: Any,
                 close: Callable[[], None], stderr_tail: Callable[[], str]) -> None:
        self.name = name
        self._reader = reader
        self._writer = writer
        self._close = close
        self._stderr_tail = stderr_tail
        self._lock = threading.Lock()
        self._next = 0
        self._waiting: dict[int, Future[Any]] = {}
        self._lost: str | None = None
        self._thread = threading.Thread(target=self._read, daemon=True,
                                        name=f"nhbench-loadgen-{name}")
        self._thread.start()

    def call(self, op: str, **args: Any) -> Future[Any]:
        future: Future[Any] = Future()
        with self._lock:
            if self._lost is not None:
                future.set_exception(_Lost(self._lost))
                return future
            self._next += 1
            request_id = self._next
            self._waiting[request_id] = future
            try:
                line = json.dumps({"id": request_id, "op": op, "args": args}) + "\n"
                self._writer.write(line.encode())
                self._writer.flush()
            except (OSError, ValueError) as exc:
                del self._waiting[request_id]
                future.set_exception(_Lost(f"cannot write to it: {exc}"))
        return future

    def _read(self) -> None:
        reason = "its connection closed"
        try:
            while True:
                line = self._reader.readline(_MAX_LINE + 1)
                if not line:
                    break
                if len(line) > _MAX_LINE:
                    reason = f"it sent a line longer than {_MAX_LINE} bytes"
                    break
                try:
                    message = json.loads(line)
                    request_id = message["id"]
                except (ValueError, KeyError, TypeError):
                    reason = f"it sent something else than an answer: {line[:80]!r}"
                    break
                with self._lock:
                    future = self._waiting.pop(request_id, None) if isinstance(
                        request_id, int) else None
                if future is None:
                    reason = f"it answered a request never made: {line[:80]!r}"
                    break
                if "error" in message:
                    future.set_exception(_Remote(message["error"]))
                else:
                    future.set_result(message.get("ok"))
        except (OSError, ValueError) as exc:
            reason = f"reading from it failed: {exc}"
        tail = self._stderr_tail()
        if tail:
            reason += f" ({tail})"
        with self._lock:
            self._lost = reason
            waiting, self._waiting = self._waiting, {}
        for future in waiting.values():
            future.set_exception(_Lost(reason))

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._writer.close()
        with contextlib.suppress(Exception):
            self._close()


class _Remote(Exception):
    """An error the agent reported for one request."""

    def __init__(self, error: object) -> None:
        error = error if isinstance(error, dict) else {}
        self.kind = str(error.get("kind") or "other")
        self.option = error.get("option") if isinstance(error.get("option"), str) else None
        super().__init__(str(error.get("message") or "unknown error")[:500])


def _open_process(name: str, argv: list[str]) -> _AgentLink:
    try:
        process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, start_new_session=True)
    except OSError as exc:
        raise RunError(f"--loadgen: {name}: cannot start {argv[0]}: "
                       f"{exc.strerror or exc}") from None
    assert process.stdin is not None and process.stdout is not None
    tail = _Tail(process.stderr)

    def close() -> None:
        try:
            process.wait(timeout=10.0)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    return _AgentLink(name, process.stdout, process.stdin, close, tail.text)


class _ChannelWriter:
    """An SSH channel's input as the link writes it. Not paramiko's buffered stdin file:
    that one flushes again when garbage-collected, and raises then if the channel is gone."""

    def __init__(self, channel: Any) -> None:
        self._channel = channel

    def write(self, data: bytes) -> None:
        try:
            self._channel.sendall(data)
        except Exception as exc:  # noqa: BLE001 - paramiko raises several kinds here
            raise OSError(str(exc) or type(exc).__name__) from None

    def flush(self) -> None:
        return None

    def close(self) -> None:
        # End of input: the agent stops a run still going and exits.
        with contextlib.suppress(Exception):
            self._channel.shutdown_write()


class _Tail:
    """The last lines a stream carried (an agent's stderr), read on a thread of its own so
    that a chatty agent never blocks on a full pipe."""

    def __init__(self, stream: Any) -> None:
        self._lines: list[str] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: Any) -> None:
        with contextlib.suppress(Exception):
            for line in iter(stream.readline, b""):
                with self._lock:
                    self._lines = [*self._lines[-2:], line.decode(errors="replace").strip()]

    def text(self) -> str:
        time.sleep(0.05)  # the stderr of a process that just died is usually a moment behind
        with self._lock:
            return " | ".join(line for line in self._lines if line)[:300]


# ---- the controller ----------------------------------------------------------------------------


@dataclass
class _Generator(_Host):
    placement: Placement | None = None
    link: _AgentLink | None = None
    ssh: SSHHost | None = None
    # What makes an agent reusable by a later run of a session: the placement's text, its
    # occurrence among the run's (a text given twice is two agents) and how it was reached.
    key: tuple[str, ...] = ()

    def end(self) -> None:
        """End the agent (end of its input: it stops a run still going and exits) and its
        connection."""
        if self.link is not None:
            self.link.close()
        if self.ssh is not None:
            self.ssh.close()


class LoadgenBenchmark(ClusterBenchmark):
    """One run from the ``--loadgen`` load generators, with `Benchmark`'s face: ``run()``
    and ``stop()``. The steps and the merge are `ClusterBenchmark`'s; each Ray call is an
    agent call here.

    With a `session` (`LoadgenSession`) the run uses the session's agents (and leaves them
    to it), as a Ray run uses its `RaySession`'s actors; without one it connects, starts the
    agents and ends them itself."""

    _FLAG = "--loadgen"

    def __init__(self, options: Options, session: LoadgenSession | None = None) -> None:
        super().__init__(options)
        self._agents = session
        self._generators: list[_Generator] = []

    def run(
        self,
        on_progress: Callable[[Progress], object] | None = None,
        on_interval: Callable[[IntervalRecord], object] | None = None,
    ) -> Result:
        session = self._agents if self._agents is not None else LoadgenSession()
        with self._using(session, own=self._agents is None):
            push = MetricsPush(self.options) if self.options.pushes_metrics else None
            return run_pushing(
                push, lambda interval: self._run_agents(session, on_progress, interval),
                on_interval)

    def _run_agents(self, session: LoadgenSession,
                    on_progress: Callable[[Progress], object] | None,
                    on_interval: Callable[[IntervalRecord], object] | None) -> Result:
        self._acquire_agents(session)
        self._hosts = list(self._generators)
        base = self.options.model_dump(mode="json", exclude={
            "loadgen", "loadgen_python", "loadgen_ssh_key", "loadgen_known_hosts",
            "loadgen_password_env", "loadgen_jump", "scheduled_start"})
        self._preflight_agents(base)
        self._measure_agent_clocks()
        scheduled = self._scheduled_start()
        runs: list[Future[Any]] = []
        sent = time.time()
        for generator in self._generators:
            assert generator.link is not None
            data = {**base, "scheduled_start": scheduled + generator.offset_ns / 1e9}
            # Every call names its run: a stop sent for one run never stops a later one
            # on the same agent.
            runs.append(generator.link.call("run", options=data, run_id=self._run_id))
        answers = self._wait_agents(runs, scheduled, on_progress, on_interval)
        for generator, answer in zip(self._generators, answers, strict=True):
            self._collect(generator, answer.get("intervals") or ())
        self._deliver(on_interval, final=True)
        # How long the agents took from the run call to armed workers: the next run on them
        # leads by twice that (within the bounds), as on kept Ray actors.
        session._armed_in = max((int(a["armed_ns"]) - g.offset_ns) / 1e9 - sent
                                for g, a in zip(self._generators, answers, strict=True))
        return self._result(answers, scheduled)

    # ---- steps ------------------------------------------------------------------------

    def _acquire_agents(self, session: LoadgenSession) -> None:
        """This run's agents: the session's for the load generators it already reaches, and
        new ones for the others (`ClusterBenchmark._acquire`'s rules). A kept agent that
        does not answer is replaced, with every other."""
        options = self.options
        python = options.loadgen_python or "python3"
        password = (password_from_environment(options.loadgen_password_env)
                    if options.loadgen_password_env else None)
        jump = SSHTarget.parse(options.loadgen_jump, option="loadgen_jump") \
            if options.loadgen_jump else None
        placements = {text: parse_placement(text) for text in options.loadgen}
        reached = (python, options.loadgen_ssh_key or "", options.loadgen_known_hosts or "",
                   options.loadgen_password_env or "", options.loadgen_jump or "")
        wanted: list[tuple[str, ...]] = []
        for text in options.loadgen:
            wanted.append((text, str(sum(key[0] == text for key in wanted)), *reached))
        kept = {g.key: g for g in session._generators if g.key in wanted}
        if kept:
            self._generators = list(kept.values())
            try:
                self._check_agents(_PING_TIMEOUT)
            except RunError:
                kept = {}  # an agent gone since the last run: every one is started anew
        self._dispatched = True
        session._discard(keep=set(kept))
        fresh: list[_Generator] = []
        try:
            for i, key in enumerate(wanted):
                if key in kept:
                    continue
                generator = _Generator(name=f"host_{i}", node_id=key[0], address=key[0],
                                       placement=placements[key[0]], key=key)
                # The session holds it from here: a failure below ends it with the others.
                session._generators.append(generator)
                fresh.append(generator)
                self._start_agent(generator, session, python, password, jump)
        except NHBenchError as exc:
            if isinstance(exc, OptionsError):
                raise
            raise RunError(f"--loadgen: {exc}") from None
        if fresh:
            self._generators = fresh
            self._check_agents(_READY_TIMEOUT)
        self._generators = self._for_this_run(session._generators, wanted,
                                              lambda generator: generator.key,
                                              None if fresh else session._armed_in)

    def _start_agent(self, generator: _Generator, session: LoadgenSession, python: str,
                     password: str | None, jump: SSHTarget | None) -> None:
        options = self.options
        placement = generator.placement
        assert placement is not None
        argv = agent_argv(placement, python)
        if placement.target is not None:
            generator.ssh = SSHHost.connect(
                placement.target, key_filename=options.loadgen_ssh_key,
                password=password, known_hosts=options.loadgen_known_hosts, jump=jump)
            session.connections += 1
            channel = generator.ssh.open_stream(argv[0])
            generator.link = _AgentLink(
                generator.name, channel.makefile("rb"), _ChannelWriter(channel),
                channel.close, _Tail(channel.makefile_stderr("rb")).text)
        else:
            generator.link = _open_process(generator.name, argv)
        session.agents_started += 1

    def _check_agents(self, timeout: float) -> None:
        calls = [(g, g.link.call("info")) for g in self._generators if g.link is not None]
        for generator, future in calls:
            info = self._get(generator, future, timeout, "start its agent")
            if not isinstance(info, dict):
                raise RunError(f"--loadgen: {self._describe(generator)} answered something "
                               f"else than its identity")
            generator.hostname = str(info.get("hostname") or "")[:200]
            generator.version = str(info.get("version") or "")[:100]
            if generator.version != __version__:
                raise RunError(f"--loadgen: {self._describe(generator)} runs nhbench "
                               f"{generator.version or '(unknown)'}, this controller "
                               f"{__version__}: install the same version on every load "
                               f"generator")

    def _preflight_agents(self, base: dict[str, Any]) -> None:
        # Every agent's check of its share, all at once, before any has a run call: one
        # round trip over the links (`ClusterBenchmark._preflight`).
        calls = [(g, g.link.call("check", options=base)) for g in self._generators
                 if g.link is not None]
        answers = []
        for generator, future in calls:
            answer = self._get(generator, future, _CHECK_TIMEOUT, "check the run")
            if answer is not None and not isinstance(answer, dict):
                raise RunError(f"--loadgen: {self._describe(generator)} answered its check "
                               f"with something else than a refusal or nothing")
            answers.append((generator, answer))
        self._refuse(answers, "--loadgen")

    def _measure_agent_clocks(self) -> None:
        # NTP's estimate, as for Ray nodes (ClusterBenchmark._measure_clocks).
        for generator in self._generators:
            assert generator.link is not None
            best: tuple[int, int] | None = None
            for _ in range(_CLOCK_ROUNDS):
                t0 = time.time_ns()
                remote = self._get(generator, generator.link.call("clock"), _CALL_TIMEOUT,
                                   "read its clock")
                t1 = time.time_ns()
                if isinstance(remote, bool) or not isinstance(remote, int):
                    raise RunError(f"--loadgen: {self._describe(generator)} answered a clock "
                                   f"reading that is not a number")
                if best is None or t1 - t0 < best[1]:
                    best = (remote - (t0 + t1) // 2, t1 - t0)
            assert best is not None
            generator.offset_ns, generator.uncertainty_ns = best[0], best[1] // 2

    def _get(self, generator: _Generator, future: Future[Any], timeout: float,
             doing: str) -> Any:
        try:
            return future.result(timeout=timeout)
        except FutureTimeout:
            raise RunError(f"--loadgen: {self._describe(generator)} did not {doing} within "
                           f"{timeout:g} s") from None
        except _Lost as exc:
            raise RunError(f"--loadgen: {self._describe(generator)} could not {doing} (is "
                           f"nhbench installed there, and is --loadgen-python right?): "
                           f"{exc}") from None
        except _Remote as exc:
            raise RunError(f"--loadgen: {self._describe(generator)}: {exc}") from None

    def _wait_agents(self, runs: list[Future[Any]], scheduled: float,
                     on_progress: Callable[[Progress], object] | None,
                     on_interval: Callable[[IntervalRecord], object] | None,
                     ) -> list[dict[str, Any]]:
        answers: dict[int, dict[str, Any]] = {}
        deadline = self._deadline(scheduled)
        stopped_at: float | None = None
        next_progress = time.monotonic()
        while len(answers) < len(runs):
            try:
                time.sleep(_POLL_INTERVAL)
            except KeyboardInterrupt:
                if self._stop_requested:
                    self._send_stop()
                    raise
                self.stop()
            for i, future in enumerate(runs):
                if i not in answers and future.done():
                    answers[i] = self._run_answer(self._generators[i], future)
            stopped_at = self._watchdog(
                "--loadgen", deadline, stopped_at,
                [self._generators[i] for i in range(len(runs)) if i not in answers])
            if len(answers) < len(runs):
                next_progress = self._live(next_progress, self._agent_progress,
                                           on_progress, on_interval)
        return [answers[i] for i in range(len(runs))]

    def _run_answer(self, generator: _Generator, future: Future[Any]) -> dict[str, Any]:
        try:
            return check_answer(future.result())
        except _Remote as exc:
            self._send_stop()
            if exc.kind == "options":
                raise OptionsError(f"{self._describe(generator)}: {exc}",
                                   option=exc.option) from None
            raise RunError(f"--loadgen: {self._describe(generator)}: {exc}") from None
        except _Lost as exc:
            # Its share of the load is unknown: a merge without it would be a wrong total.
            self._send_stop()
            raise RunError(f"--loadgen: {self._describe(generator)} was lost during the run "
                           f"({exc}); no merged result") from None
        except ValueError as exc:
            self._send_stop()
            raise RunError(f"--loadgen: {self._describe(generator)} sent a result that "
                           f"cannot be merged: {exc}") from None

    def _send_stop(self) -> None:
        self._stop_sent = True
        for generator in self._generators:
            if generator.link is not None:
                generator.link.call("stop", run_id=self._run_id)

    def _agent_progress(self) -> Progress | None:
        calls = [(g, g.link.call("progress", run_id=self._run_id)) for g in self._generators
                 if g.link is not None]
        elapsed = 0.0
        counters: dict[str, int] = {}
        endpoints: dict[str, list[int]] = {}
        seen = False
        for generator, future in calls:
            try:
                snapshot = _check_progress(future.result(timeout=1.0))
            except (FutureTimeout, _Lost, _Remote, ValueError):
                continue
            if not snapshot:
                continue
            seen = True
            self._collect(generator, snapshot.get("intervals") or ())
            elapsed = max(elapsed, float(snapshot["elapsed"]))
            for name, value in snapshot["counters"].items():
                counters[name] = counters.get(name, 0) + int(value)
            for name, *values in snapshot.get("endpoints") or ():
                sums = endpoints.setdefault(str(name), [0, 0, 0])
                for i, value in enumerate(values):
                    sums[i] += int(value)
        if not seen:
            return None
        return Progress(elapsed=elapsed, counters=counters,
                        endpoints=tuple(EndpointProgress(name, *sums)
                                        for name, sums in endpoints.items()))

    def _describe(self, host: _Host) -> str:
        where = f", {host.hostname}" if host.hostname else ""
        return f"{host.name} ({host.address}{where})"
