"""The step loop: `Sweep` and `run_sweep`.

A step strategy (``_strategy``) chooses each step's rate and says when the campaign ends:
the sweep's plan walk by default, adapt's search for ``nhbench adapt``. For each step the
sweep starts the captures (mpstat and perf on the target host, mpstat over
the load generator's worker CPUs), runs ``nhbench.run`` at the step's rate with the shared
options, stops the captures, turns the result into a `StepRecord`, writes both to the
campaign directory at once, re-renders the reports, evaluates the stop rules and cools down.

Everything the user can get wrong is checked by `prepare_sweep` before anything happens
(no directory, no connection, no server): a bad option is one `OptionsError`. Ctrl-C (or
`Sweep.stop`) abandons the step in progress, unless it had already finished, in which case
it is recorded; finished steps are on disk already, and the manifest ends ``interrupted``.
"""

from __future__ import annotations

import resource
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO

from .._calibrate import CalibrationError, calibrate
from .._exceptions import HostError, K8sError, OptionsError
from .._result import Result
from .._run import resolve
from .._server import TestServer
from .._version import __version__
from ..campaign import (
    Campaign,
    CampaignManifest,
    CampaignStore,
    StepRecord,
    check_resume,
    load_manifest,
    step_directory,
)
from ..capture import (
    CaptureResult,
    CaptureSpec,
    StepCapture,
    check_tools,
    install_tools,
    refused_perf_events,
)
from ..distributed import (
    BenchmarkProtocol,
    LoadgenSession,
    RaySession,
    Session,
    make_benchmark,
    make_session,
)
from ..hosts import (
    ClusterFacts,
    Host,
    LocalHost,
    MachineFacts,
    SSHHost,
    SSHTarget,
    WatchedPod,
    collect_cluster,
    collect_facts,
    password_from_environment,
    resolve_watched_pods,
)
from ..options import Options, affinity_cpus, format_cpu_list, make_options, target_addresses
from ..report import write_reports
from ._config import SweepConfig, default_out, prepare_sweep, settings_for_resume
from ._records import record_from_result
from ._scrape import StepScrapes
from ._strategy import PlanWalk, StepStrategy

__all__ = ["Sweep", "run_sweep"]

# How often an idle wait (cooldown) looks at the stop flag.
_TICK = 0.1


def _note_to(stream: TextIO | None) -> Callable[[str], None]:
    def note(message: str) -> None:
        if stream is not None:
            stream.write(f"nhbench: {message}\n")
            stream.flush()

    return note


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Sweep:
    """A sweep being run: ``Sweep(prepare_sweep(settings)).run()`` -> `Campaign`.

    `stop()` may be called from a signal handler or another thread: the step in progress is
    abandoned (or recorded, if it had ended) and the campaign ends ``interrupted``.

    `target_host` replaces the host the settings name (tests pass one; otherwise it is
    `LocalHost`, or an `SSHHost` connected with `password`). `captures`, `facts` and
    `reports` turn those parts off. `on_step` is called with each recorded StepRecord;
    `stream` gets the progress lines and notes (None: silent). `strategy` chooses the steps
    and says when the campaign ends (default: the sweep's `PlanWalk`; ``nhbench adapt``
    passes its search).
    """

    def __init__(
        self,
        config: SweepConfig,
        *,
        command: Sequence[str] = (),
        password: str | None = None,
        target_host: Host | None = None,
        captures: bool = True,
        facts: bool = True,
        reports: bool = True,
        on_step: Callable[[StepRecord], object] | None = None,
        stream: TextIO | None = sys.stderr,
        strategy: StepStrategy | None = None,
    ) -> None:
        self.config = config
        self.strategy: StepStrategy = strategy if strategy is not None else PlanWalk()
        self.command = list(command)
        self._password = password
        self._target_host = target_host
        self._captures = captures
        self._facts = facts
        self._reports = reports
        self._on_step = on_step
        self._note = _note_to(stream)
        self._stop_requested = False
        self._benchmark: BenchmarkProtocol | None = None
        # With --ray: one cluster connection and one set of load actors for every step;
        # with --loadgen: one connection and one agent per load generator (`make_session`).
        self._session: Session | None = None
        self.store: CampaignStore | None = None
        self.signal: int | None = None
        self._saved: CampaignManifest | None = None
        self._scrapes = (None if config.scrape is None
                         else StepScrapes(config.scrape, self._note))
        # The --watch-pod groups as last resolved, and the host they are resolved on: they
        # are resolved again before each step (`_resolve_pods`).
        self._pods: dict[str, WatchedPod] = {}
        self._pods_host: Host | None = None
        if config.resume is not None:
            # Checked here, before any connection or server, so that an incompatible resume
            # fails as fast and as cleanly as a bad option.
            saved = load_manifest(config.resume)
            self._saved = check_resume(
                saved, options=config.options_json, plan=config.plan,
                # The embedded server's URL and a --k8s-service's are found anew at each start.
                ignore=("uri",) if config.embedded or (
                    config.k8s is not None and config.k8s.service is not None) else (),
            )

    def use_password(self, password: str | None) -> None:
        """Set the SSH password (kept in memory only, never written anywhere)."""
        self._password = password

    @property
    def directory(self) -> Path | None:
        return None if self.store is None else self.store.directory

    def stop(self, signum: int | None = None) -> None:
        """Stop after (or abandon) the current step. Safe from a signal handler."""
        if signum is not None and self.signal is None:
            self.signal = signum
        self._stop_requested = True
        benchmark = self._benchmark
        if benchmark is not None:
            benchmark.stop()

    @property
    def stop_requested(self) -> bool:
        return self._stop_requested

    @property
    def ray_session(self) -> RaySession | None:
        """With --ray, while the campaign runs: the one cluster connection and set of load
        actors every step uses (docs/distributed.md, "Campaigns on Ray"); else None."""
        return self._session if isinstance(self._session, RaySession) else None

    @property
    def loadgen_session(self) -> LoadgenSession | None:
        """With --loadgen, while the campaign runs: the one set of agents (and their
        connections) every step uses (docs/distributed.md, "Campaigns with --loadgen");
        else None."""
        return self._session if isinstance(self._session, LoadgenSession) else None

    # ---- setup ------------------------------------------------------------------------------

    def _connect(self) -> Host:
        if self._target_host is not None:
            return self._target_host
        ssh = self.config.ssh
        if ssh is None:
            return LocalHost()
        target = SSHTarget.parse(ssh.target)
        jump = SSHTarget.parse(ssh.jump, option="ssh_jump") if ssh.jump else None
        password = self._password
        if password is None and ssh.password_env:
            password = password_from_environment(ssh.password_env)
        return SSHHost.connect(
            target,
            key_filename=ssh.key_filename,
            password=password,
            use_agent=True,
            known_hosts=ssh.known_hosts,
            accept_new=ssh.accept_new,
            jump=jump,
        )

    def _collect_facts(self, target: Host, loadgen: Host, address: str) -> dict[str, Any]:
        facts: dict[str, Any] = {}
        if not self._facts:
            return self._add_calibration(facts)
        for role, host in (("target", target), ("loadgen", loadgen)):
            try:
                facts[role] = collect_facts(host, role=role, target_address=address)
            except HostError as exc:
                self._note(f"{role} machine facts skipped: {exc}")
        return self._add_calibration(facts)

    def _cluster(self, host: Host, url: str) -> ClusterFacts | None:
        """The target node's cluster facts, with --watch-pod groups resolved into the target
        capture's watched CPU groups and --k8s-service into the target URL. An unresolvable
        pod or service is an OptionsError before anything is written or sent."""
        k8s = self.config.k8s
        if k8s is None and not (self._facts and self._saved is None):
            return None
        try:
            if k8s is None:
                return collect_cluster(host)
            cluster = collect_cluster(host, kubectl=k8s.kubectl, kubelet_dir=k8s.kubelet_dir,
                                      pods=k8s.pods, service=k8s.service, url=url or None)
        except HostError as exc:
            if k8s is None:
                self._note(f"cluster facts skipped: {exc}")
                return None
            raise
        spec = self.config.target_spec
        if cluster is not None and cluster.pods and spec is not None:
            groups = dict(spec.watch_cpus)
            for pod in cluster.pods:
                groups[pod.group] = pod.cpus
                sources = sorted({c.source for c in pod.containers})
                self._note(f"--watch-pod {pod.group}={pod.given}: CPUs "
                           f"{','.join(map(str, pod.cpus))} ({', '.join(sources)}; "
                           f"{len(pod.containers)} container(s), matched by {pod.matched})")
            self.config.target_spec = spec.model_copy(update={"watch_cpus": groups})
            last = self._saved.steps[-1] if self._saved and self._saved.steps else None
            for pod in cluster.pods:
                # Resumed: the pod may have moved since the last recorded step.
                before = None if last is None else last.watch_cpus.get(pod.group)
                if last is not None and before is not None and before != pod.cpus:
                    self._note(f"--watch-pod {pod.group}={pod.given}: CPUs changed since step "
                               f"{last.index}: {format_cpu_list(before)} -> "
                               f"{format_cpu_list(pod.cpus)}")
            self._pods = {pod.group: pod for pod in cluster.pods}
            self._pods_host = host
        return cluster

    def _resolve_pods(self, index: int) -> str | None:
        """Before step `index`, the --watch-pod groups resolved again (the pods' JSON and
        cpu_manager_state, one round trip), so that the step's target capture watches the
        CPUs the pods have now: a pod restarted or rescheduled may have others. A change is
        used for the step and said in one line; a pod that cannot be resolved any more
        (gone, not running, no CPUs) is returned as the reason the campaign stops, since
        its old CPUs would be measured silently otherwise. None: go on."""
        k8s, spec, host = self.config.k8s, self.config.target_spec, self._pods_host
        if k8s is None or not self._pods or spec is None or host is None:
            return None
        try:
            pods = resolve_watched_pods(host, k8s.pods, kubectl=k8s.kubectl,
                                        kubelet_dir=k8s.kubelet_dir)
        except K8sError as exc:
            return f"before step {index}: {exc}"
        except HostError as exc:
            return f"before step {index}: --watch-pod not resolved again: {exc}"
        groups = dict(spec.watch_cpus)
        for pod in pods:
            old = self._pods.get(pod.group)
            if old is None:
                continue
            which, replaced = _pod_change(old, pod)
            if old.cpus != pod.cpus:
                self._note(f"--watch-pod {pod.group}={pod.given}: CPUs changed before step "
                           f"{index}: {format_cpu_list(old.cpus)} -> "
                           f"{format_cpu_list(pod.cpus)} ({which}); step {index} watches "
                           "the new ones")
            elif replaced:
                self._note(f"--watch-pod {pod.group}={pod.given}: {which} before step "
                           f"{index}; same CPUs {format_cpu_list(pod.cpus)}")
            groups[pod.group] = pod.cpus
            self._pods[pod.group] = pod
        if groups != spec.watch_cpus:
            self.config.target_spec = spec.model_copy(update={"watch_cpus": groups})
        return None

    def _add_calibration(self, facts: dict[str, Any]) -> dict[str, Any]:
        """The load generator's facts with this machine's calibration, when asked for: it is
        this machine that `nhbench calibrate` measures, and the one whose timers and noise
        bound what a step can resolve."""
        calibration = self.config.calibration
        if self.config.calibrate:
            self._note("calibrating this machine (nhbench calibrate)")
            try:
                calibration = calibrate(progress=lambda text: self._note(f"calibrate: {text}"))
            except (CalibrationError, RuntimeError, OSError) as exc:
                self._note(f"calibration skipped: {exc}")
        if calibration is None:
            return facts
        loadgen = facts.get("loadgen")
        if loadgen is None:
            loadgen = MachineFacts(role="loadgen", host="local")
        facts["loadgen"] = loadgen.model_copy(update={"calibration": calibration})
        return facts

    def _check_tools(self, host: Host, spec: CaptureSpec | None, role: str) -> bool:
        """Install (if asked) and check the capture tools; False turns this host's captures
        off (nothing to capture, or the host cannot be used)."""
        if spec is None or not (spec.mpstat or spec.perf or spec.perf_stat):
            return False
        try:
            if spec.install_tools:
                install_tools(host, spec)
            missing = check_tools(host, spec)
        except HostError as exc:
            self._note(f"{role} captures skipped: {exc}")
            return False
        for tool, reason in (missing or {}).items():
            self._note(f"{role}: {tool} capture skipped: {reason}")
        return True

    def _check_perf_events(self, host: Host) -> None:
        """Refuse a --perf-event the target's perf rejects, before the campaign directory
        exists and before any load: which events there are is the target's perf's to say."""
        spec = self.config.target_spec
        if not self._captures or spec is None:
            return
        try:
            refused = refused_perf_events(host, spec)
        except HostError as exc:
            self._note(f"--perf-event not checked: {exc}")
            return
        for event, message in refused.items():
            raise OptionsError(f"--perf-event {event!r}: perf on {host.name} rejects it: "
                               f"{message} (perf list shows the events it knows)",
                               "perf_event")

    def _new_manifest(self, url: str, options: Options, ssh_name: str | None,
                      facts: dict[str, Any]) -> CampaignManifest:
        now = datetime.now(timezone.utc)
        config = self.config
        return CampaignManifest(
            nhbench_version=__version__,
            created_at=now,
            updated_at=now,
            url=url,
            label=list(config.label),
            note=config.note,
            command=self.command,
            options=options.model_dump(mode="json", exclude={"rps"}),
            plan=config.plan,
            ssh=ssh_name,
            target_capture=None if config.target_spec is None
            else config.target_spec.model_dump(mode="json"),
            loadgen_capture=None if config.loadgen_spec is None
            else config.loadgen_spec.model_dump(mode="json"),
            facts=facts,
            settings=config.settings,
        )

    # ---- the loop ----------------------------------------------------------------------------

    def run(self) -> Campaign:
        """Run the remaining steps; return the campaign as written."""
        config = self.config
        host = self._connect()
        loadgen: Host = LocalHost()
        server = None
        self._session = make_session(config.options)
        try:
            if self._saved is None:
                self._check_perf_events(host)
            options = config.options
            url = config.url
            if config.embedded:
                server = self._start_embedded(options)
                url = server.url
                options = make_options(options, uri=url)
            cluster = self._cluster(host, url)
            if cluster is not None and cluster.service is not None:
                url = cluster.service.url
                options = make_options(options, uri=url)
                self._note(f"--k8s-service {cluster.service.given}: {url} (node "
                           f"{cluster.service.node})")
            target = options.target
            # Where the load goes: --resolve's first address when given (its host name
            # may resolve nowhere else), else the host's.
            address = (target_addresses(options)[0] if options.resolve
                       else resolve(target.host, target.port, options.address_family))
            ssh_name = None if config.ssh is None else host.name
            if self._saved is not None:
                manifest = self._saved
                manifest.url = url
                store = CampaignStore.resume(config.out or Path("."), manifest)
                self._note(f"resuming {store.directory}: {len(manifest.steps)} step(s) done")
            else:
                facts = self._collect_facts(host, loadgen, address)
                if cluster is not None:
                    target_facts = facts.get("target") or MachineFacts(role="target",
                                                                       host=host.name)
                    facts["target"] = target_facts.model_copy(update={"cluster": cluster})
                manifest = self._new_manifest(url, options, ssh_name, facts)
                out = config.out or default_out(config.label)
                store = CampaignStore.create(out, manifest)
                self._note(f"campaign directory {store.directory}")
            self.store = store
            if self._scrapes is not None:
                self._scrapes.preflight()
            target_captures = self._captures and self._check_tools(host, config.target_spec,
                                                                   "target")
            loadgen_captures = self._captures and self._check_tools(
                loadgen, config.loadgen_spec, "loadgen")
            self._loop(store, options, host if target_captures else None,
                       loadgen if loadgen_captures else None)
            self._render_reports()
            return Campaign(store.directory, store.manifest)
        finally:
            if self._session is not None:
                self._session.close()
                self._session = None
            if server is not None:
                server.stop()
            if host is not self._target_host:
                host.close()

    def _start_embedded(self, options: Options) -> TestServer:
        # The server gets a CPU the load generator's workers do not use, when there is one,
        # so that the two do not compete for a core; otherwise it is left unpinned. It runs
        # as a separate process so that the step's "nhbench CPU %" (this process's CPU
        # time) is the load generator's alone.
        spare = [cpu for cpu in affinity_cpus() if cpu not in set(options.worker_cpus)]
        server = (TestServer(cpus=[spare[-1]], subprocess=True) if spare
                  else TestServer(subprocess=True))
        server.start()
        self._note(f"embedded test server on {server.url}")
        return server

    def _loop(self, store: CampaignStore, options: Options, target_host: Host | None,
              loadgen_host: Host | None) -> None:
        # The strategy chooses the rates and says when the campaign ends (the sweep's plan
        # walk, or adapt's search); the loop runs, records and reports the steps.
        strategy = self.strategy
        manifest = store.manifest
        cooldown = manifest.plan.cooldown
        strategy.begin(manifest)
        store.save()
        end = strategy.ended(manifest)
        if end is not None and end[0] == "stopped":
            store.finish(*end)
            return
        current: tuple[int, float] | None = None
        try:
            while True:
                if self._stop_requested:
                    store.finish("interrupted", "interrupted before the next step")
                    return
                end = strategy.ended(manifest)
                if end is not None:
                    store.finish(*end)
                    return
                rate = strategy.next_rate(manifest)
                index = len(manifest.steps) + 1
                gone = self._resolve_pods(index)
                if gone is not None:
                    self._note(f"stopping: {gone}")
                    store.finish("stopped", gone)
                    return
                current = (index, rate)
                record, result = self._run_step(store, options, index, rate, target_host,
                                                loadgen_host)
                if record is None or result is None:
                    store.discard_step(index, rate)
                    current = None
                    store.finish("interrupted", f"interrupted during step {index}; "
                                 f"the step was abandoned")
                    return
                store.record_step(record, result)
                current = None
                self._update_highest(manifest, strict=options.validity == "strict")
                strategy.recorded(manifest, record)
                store.save()
                self._note(strategy.line(manifest, record))
                if self._on_step is not None:
                    self._on_step(record)
                self._render_reports()
                if self._scrapes is not None:
                    self._scrapes.require(index, record.scrape)
                end = strategy.ended(manifest)
                if end is not None and end[0] == "stopped":
                    store.finish(*end)
                    return
                if cooldown > 0 and end is None:
                    self._sleep(cooldown)
        except BaseException as exc:
            # Whatever ends the loop (a second Ctrl-C, a host that went away, a bug), the
            # steps already recorded stay, the half-done one goes, and the manifest says why.
            if current is not None:
                store.discard_step(*current)
            if isinstance(exc, KeyboardInterrupt):
                store.finish("interrupted", "abandoned with a second interrupt")
            else:
                store.finish("failed", str(exc).splitlines()[0] if str(exc) else repr(exc))
            raise

    @staticmethod
    def _update_highest(manifest: CampaignManifest, *, strict: bool) -> None:
        # Under --validity strict an invalid step's numbers are not trusted, so its rate is
        # not one the target was shown to carry.
        passing = [step for step in manifest.steps
                   if step.passed and not (strict and step.validity == "invalid")]
        manifest.highest_passing_step = (
            max(passing, key=lambda step: (step.requested_rps, step.index)).index
            if passing else None
        )

    def _sleep(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not self._stop_requested:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(_TICK, left))

    def _start_capture(self, host: Host | None, spec: CaptureSpec | None, path: Path,
                       role: str) -> StepCapture | None:
        if host is None or spec is None:
            return None
        try:
            step_capture = StepCapture(host, spec, path)
            step_capture.start()
            return step_capture
        except HostError as exc:
            self._note(f"{role} capture not started: {exc}")
            return None

    def _stop_capture(self, capture: StepCapture | None, role: str) -> CaptureResult | None:
        if capture is None:
            return None
        try:
            return capture.stop()
        except HostError as exc:
            self._note(f"{role} capture lost: {exc}")
            return None

    def _run_step(
        self, store: CampaignStore, options: Options, index: int, rate: float,
        target_host: Host | None, loadgen_host: Host | None,
    ) -> tuple[StepRecord | None, Result | None]:
        path = store.prepare_step(index, rate)
        step_options = make_options(options, rps=rate)
        target_spec = self.config.target_spec
        started_at = datetime.now(timezone.utc)
        captures: list[tuple[StepCapture | None, str]] = []
        result: Result | None = None
        try:
            captures.append((self._start_capture(target_host, target_spec,
                                                 path / "target", "target"), "target"))
            captures.append((self._start_capture(loadgen_host, self.config.loadgen_spec,
                                                 path / "loadgen", "loadgen"), "loadgen"))
            if self._stop_requested:
                return None, None
            benchmark = make_benchmark(step_options, session=self._session)
            if self._scrapes is not None:
                # Right before the load and right after it: the deltas are the step's.
                self._scrapes.before()
            cpu0, wall0 = _cpu_seconds(), time.monotonic()
            self._benchmark = benchmark
            try:
                # The check after the assignment closes the window in which a stop() could
                # have seen no benchmark to stop.
                if self._stop_requested:
                    return None, None
                result = benchmark.run()
            finally:
                self._benchmark = None
            cpu, wall = _cpu_seconds() - cpu0, time.monotonic() - wall0
            if self._scrapes is not None and not result.interrupted:
                self._scrapes.after()
        finally:
            results = [self._stop_capture(capture, role) for capture, role in captures]
        ended_at = datetime.now(timezone.utc)
        if result.interrupted:
            # Stopped part-way (Ctrl-C): not a measurement of this step.
            self._stop_requested = True
            return None, None
        target_capture = results[0] if results else None
        loadgen_capture = results[1] if len(results) > 1 else None
        workers = max(1, result.worker_count)
        fallback = 100.0 * cpu / (wall * workers) if wall > 0 else None
        record = record_from_result(
            result,
            index=index,
            rate=rate,
            directory=step_directory(index, rate),
            rules=self.config.rules,
            stop_on_blocked=store.manifest.plan.stop_on_blocked,
            started_at=started_at,
            ended_at=ended_at,
            target_capture=target_capture,
            loadgen_capture=loadgen_capture,
            loadgen_cpu_fallback=fallback,
            nhbench_cpu=fallback,
        )
        if target_spec is not None:
            # What each group was during this step: a --watch-pod group may differ per step.
            record.watch_cpus = {name: list(cpus) for name, cpus in target_spec.watch_cpus.items()}
        if self._scrapes is not None:
            record.scrape = self._scrapes.records(path)
        return record, result

    def _render_reports(self) -> None:
        if not self._reports or self.store is None:
            return
        try:
            write_reports(self.store.directory, self.store.manifest)
        except Exception as exc:  # noqa: BLE001 - a report must never cost the measurements
            self._note(f"report not written: {type(exc).__name__}: {exc}".splitlines()[0])


def _pod_change(old: WatchedPod, new: WatchedPod) -> tuple[str, bool]:
    """("pod A -> B", True) when the group matched other pods than before; ("pod A
    recreated (new UID)", True) for a pod recreated under its name (a stateful set's);
    ("pod A", False) for the same pod."""
    names = [", ".join(dict.fromkeys(c.pod for c in pod.containers)) for pod in (old, new)]
    if names[0] != names[1]:
        return f"pod {names[0]} -> {names[1]}", True
    uids = [{c.pod_uid for c in pod.containers} for pod in (old, new)]
    if uids[0] != uids[1]:
        return f"pod {names[1]} recreated (new UID)", True
    return f"pod {names[1]}", False


def run_sweep(
    url: str | None = None,
    /,
    *,
    out: str | Path | None = None,
    resume: str | Path | None = None,
    password: str | None = None,
    target_host: Host | None = None,
    captures: bool = True,
    facts: bool = True,
    reports: bool = True,
    on_step: Callable[[StepRecord], object] | None = None,
    stream: TextIO | None = None,
    **settings: Any,
) -> Campaign:
    """Run a sweep and return the `Campaign` it wrote.

    ``run_sweep("http://10.0.0.5/", rps=100, max_rps=500, step_rps=100, duration="10s",
    out="campaigns/gw", stop_on_slo=["p99<5ms"], connections=50, cpus="2-3")``. Keywords are
    the sweep's option names in Python spelling (see ``nhbench sweep --help``) and every
    `nhbench.run` option. ``resume=DIR`` continues a campaign (with its own settings, any
    given here overriding them). Invalid settings raise OptionsError before anything runs.
    """
    given = dict(settings)
    if url is not None:
        given["url"] = url
    if out is not None:
        given["out"] = str(out)
    if resume is not None:
        given = settings_for_resume(load_manifest(resume), given)
        given["resume"] = str(resume)
    config = prepare_sweep(given)
    sweep = Sweep(config, password=password, target_host=target_host, captures=captures,
                  facts=facts, reports=reports, on_step=on_step, stream=stream)
    return sweep.run()
