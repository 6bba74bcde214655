"""The step loop: `Sweep` and `run_sweep`.

For each step the sweep starts the captures (mpstat and perf on the target host, mpstat over
the load generator's worker CPUs), runs ``nhbench.run`` at the step's rate with the shared
options, stops the captures, turns the result into a `StepRecord`, writes both to the
campaign directory at once, re-renders the reports, evaluates the stop rules and cools down.

Everything the user can get wrong is checked by `prepare_sweep` before anything happens
(no directory, no connection, no server): a bad option is one `OptionsError`. Ctrl-C (or
`Sweep.stop`) abandons the step in progress, unless it had already finished, in which case
it is recorded; finished steps are on disk already, and the manifest ends ``interrupted``.
"""

from __future__ import annotations

import re
import resource
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO

from pydantic import ValidationError

from .._exceptions import CampaignError, HostError, NHBenchError, OptionsError
from .._names import CONNECTION_ERROR_COUNTERS, ERROR_COUNTERS, error_total
from .._result import Result
from .._run import Benchmark, resolve
from .._version import __version__
from ..campaign import (
    LATENCY_KEYS,
    Campaign,
    CampaignManifest,
    CampaignStore,
    SloCheck,
    StepRecord,
    SweepPlan,
    check_resume,
    is_campaign,
    load_manifest,
    step_directory,
)
from ..capture import CaptureResult, CaptureSpec
from ..hosts import Host, LocalHost
from ..options import (
    DEFAULT_DURATION,
    CpuCheck,
    Options,
    affinity_cpus,
    format_check,
    format_validation_error,
    make_options,
    parse_cpu_list,
    parse_duration,
)
from ._plan import build_plan, next_step
from ._scenario import EMBEDDED_URL, PLAN_KEYS, RUN_OPTION_KEYS, SWEEP_KEYS
from ._slo import StopRule, latency_points, parse_rules

__all__ = [
    "ERROR_COUNTERS",
    "LOADGEN_GROUP",
    "SSHSettings",
    "Sweep",
    "SweepConfig",
    "default_out",
    "overlay",
    "parse_watch_cpus",
    "prepare_sweep",
    "record_from_result",
    "run_sweep",
    "settings_for_resume",
    "step_line",
]

#: Name of the load generator's CPU group (its worker CPUs) in the loadgen capture.
LOADGEN_GROUP = "nhbench"

# How often an idle wait (cooldown) looks at the stop flag.
_TICK = 0.1


# --------------------------------------------------------------------------------------------
# Optional pieces: captures, facts, reports and SSH live in packages that may be absent from
# a partial install (or, during development, not written yet). A sweep without them still
# measures; what is missing is reported once and skipped.
# --------------------------------------------------------------------------------------------


def _capture_api() -> Any:
    try:
        from .. import capture

        capture.StepCapture  # noqa: B018 - probe for the attribute
        return capture
    except (ImportError, AttributeError):
        return None


def _facts_api() -> Callable[..., Any] | None:
    try:
        from ..hosts import collect_facts
    except ImportError:
        return None
    return collect_facts


def _report_api() -> Any:
    try:
        from .. import report

        report.write_reports  # noqa: B018
        return report
    except (ImportError, AttributeError):
        return None


def _ssh_api() -> Any:
    try:
        from .. import hosts as _ssh
    except ImportError:
        return None
    return _ssh


# --------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SSHSettings:
    """How to reach the target host. Holds no secret: a password is passed separately."""

    target: str
    key_filename: str | None = None
    password_env: str | None = None
    password_prompt: bool = False
    jump: str | None = None
    known_hosts: str | None = None
    accept_new: bool = False


@dataclass
class SweepConfig:
    """A validated sweep: what `prepare_sweep` returns and `Sweep` runs."""

    settings: dict[str, Any]
    url: str
    options: Options
    plan: SweepPlan
    rules: list[StopRule]
    out: Path | None = None
    resume: Path | None = None
    note: str | None = None
    label: list[str] = field(default_factory=list)
    ssh: SSHSettings | None = None
    target_spec: CaptureSpec | None = None
    loadgen_spec: CaptureSpec | None = None

    @property
    def embedded(self) -> bool:
        return self.url == EMBEDDED_URL

    @property
    def options_json(self) -> dict[str, Any]:
        """The run options every step shares, as the manifest records them (rps excluded)."""
        return self.options.model_dump(mode="json", exclude={"rps"})


def _bool(name: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("1", "true", "yes", "on"):
        return True
    if isinstance(value, str) and value.strip().lower() in ("0", "false", "no", "off", ""):
        return False
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise OptionsError(f"--{name.replace('_', '-')}: must be true or false (got {value!r})", name)


def _strings(value: object) -> list[str]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [str(item) for item in value]
    return [str(value)]


_GROUP_NAME = re.compile(r"^[A-Za-z0-9_.:-]+$")


def parse_watch_cpus(value: object, within: CpuCheck | None = None) -> dict[str, list[int]]:
    """``["ingress=5,22,77,94", "sidecar=10-12"]`` or a mapping -> {name: [cpus]}.

    `within` is "machine" when the target is this machine (its CPUs are known), None when it
    is a remote host: its lists are then only bounded, and a CPU it lacks shows as missing
    in the capture.
    """
    items: list[tuple[str, object]] = []
    if isinstance(value, Mapping):
        items = [(str(k), v) for k, v in value.items()]
    else:
        for text in _strings(value):
            name, sep, cpus = text.partition("=")
            if not sep:
                raise OptionsError(
                    f"--watch-cpus {text!r}: expected NAME=LIST such as ingress=5,22,77,94",
                    "watch_cpus",
                )
            items.append((name.strip(), cpus))
    groups: dict[str, list[int]] = {}
    for name, given in items:
        if not _GROUP_NAME.match(name):
            raise OptionsError(
                f"--watch-cpus: group name {name!r} must be letters, digits, '_', '.', ':' or '-'",
                "watch_cpus",
            )
        spec = ",".join(str(cpu) for cpu in given) if isinstance(given, (list, tuple)) else given
        try:
            groups[name] = parse_cpu_list(spec, within)
        except ValueError as exc:
            raise OptionsError(f"--watch-cpus {name}: {exc}", "watch_cpus") from None
    return groups


def _cpu_list(name: str, value: object, within: CpuCheck | None) -> list[int]:
    if isinstance(value, (list, tuple)):
        value = ",".join(str(cpu) for cpu in value)
    try:
        return parse_cpu_list(value, within)
    except ValueError as exc:
        raise OptionsError(f"--{name.replace('_', '-')}: {exc}", name) from None


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-.")[:40] or "sweep"


def default_out(label: Sequence[str] = (), *, now: datetime | None = None,
                base: Path = Path("campaigns")) -> Path:
    """``campaigns/20250101-120000-LABEL``: sortable by time, named by the first label."""
    stamp = (now or datetime.now()).strftime("%Y%m%d-%H%M%S")
    path = base / f"{stamp}-{_slug(label[0]) if label else 'sweep'}"
    candidate, n = path, 2
    while candidate.exists():
        candidate, n = path.with_name(f"{path.name}-{n}"), n + 1
    return candidate


def prepare_sweep(settings: Mapping[str, Any]) -> SweepConfig:
    """Validate `settings` (sweep option names in Python spelling, as from the command line
    or a campaign file) into a `SweepConfig`, without side effects.

    Raises OptionsError naming the option for anything wrong, and CampaignError when ``out``
    is a directory a new campaign cannot use.
    """
    known = set(SWEEP_KEYS) | set(RUN_OPTION_KEYS) | {"resume"}
    unknown = sorted(set(settings) - known)
    if unknown:
        raise OptionsError(f"{unknown[0]}: not a sweep option", unknown[0])
    data = dict(settings)
    url = data.get("url")
    if not url:
        raise OptionsError("missing URL: give the target URL (or 'embedded' for the built-in "
                           "test server)", "url")
    url = str(url)
    label = _strings(data.get("label"))
    note = None if data.get("note") is None else str(data["note"])

    # The plan first: the run options are validated at the first step's rate.
    try:
        duration = parse_duration(data.get("duration", DEFAULT_DURATION))
    except ValueError as exc:
        raise OptionsError(f"--duration: {exc}", "duration") from None
    if duration <= 0:
        raise OptionsError(f"--duration: must be > 0 (got {data.get('duration')!r})", "duration")
    try:
        cooldown = parse_duration(data.get("cooldown", 0))
    except ValueError as exc:
        raise OptionsError(f"--cooldown: {exc}", "cooldown") from None
    slo = _strings(data.get("stop_on_slo"))
    rules = parse_rules(slo)
    plan = build_plan(
        rps=data.get("rps"),
        max_rps=data.get("max_rps"),
        step_rps=data.get("step_rps"),
        steps=data.get("steps"),
        duration=duration,
        cooldown=cooldown,
        extend=_bool("extend", data.get("extend", False)),
        extend_limit=data.get("extend_limit"),
        stop_on_blocked=_bool("stop_on_blocked", data.get("stop_on_blocked", False)),
        stop_on_slo=slo,
    )

    run = {key: data[key] for key in RUN_OPTION_KEYS if key in data}
    # The embedded server's address is not known before it starts; validate against a
    # placeholder of the same shape.
    uri = "http://127.0.0.1:1/" if url == EMBEDDED_URL else url
    try:
        options = Options.model_validate(
            {**run, "uri": uri, "rps": plan.steps[0], "duration": duration, "label": label}
        )
    except ValidationError as exc:
        raise OptionsError(format_validation_error(exc, cli=True)) from None
    # Every requested percentile is recorded: the headline ones and those the rules use.
    points = sorted({*options.percentiles, 50.0, 90.0, 99.0, 99.9,
                     *latency_points(rules)})
    if list(options.percentiles) != points:
        options = make_options(options, percentiles=points)

    ssh: SSHSettings | None = None
    if data.get("ssh"):
        ssh = SSHSettings(
            target=str(data["ssh"]),
            key_filename=None if data.get("ssh_key") is None else str(data["ssh_key"]),
            password_env=None if data.get("ssh_password_env") is None
            else str(data["ssh_password_env"]),
            password_prompt=_bool("ssh_password_prompt", data.get("ssh_password_prompt", False)),
            jump=None if data.get("ssh_jump") is None else str(data["ssh_jump"]),
            known_hosts=None if data.get("ssh_known_hosts") is None
            else str(data["ssh_known_hosts"]),
            accept_new=_bool("ssh_accept_new", data.get("ssh_accept_new", False)),
        )
        if ssh.password_env and ssh.password_prompt:
            raise OptionsError("--ssh-password-env: mutually exclusive with "
                               "--ssh-password-prompt", "ssh_password_env")
        ssh_api = _ssh_api()
        if ssh_api is not None and hasattr(ssh_api, "SSHTarget"):
            for flag, text in (("ssh", ssh.target), ("ssh_jump", ssh.jump)):
                if text is None:
                    continue
                try:
                    ssh_api.SSHTarget.parse(text, option=flag)
                except (ValueError, NHBenchError) as exc:
                    message = str(exc)
                    prefix = f"--{flag.replace('_', '-')}"
                    if not message.startswith(prefix):
                        message = f"{prefix}: {message}"
                    raise OptionsError(message, flag) from None
        if ssh.key_filename and not Path(ssh.key_filename).expanduser().is_file():
            raise OptionsError(f"--ssh-key: no such file {ssh.key_filename!r}", "ssh_key")
        if ssh.password_env:
            import os

            if ssh.password_env not in os.environ:
                raise OptionsError(
                    f"--ssh-password-env: the environment variable {ssh.password_env} is not set",
                    "ssh_password_env",
                )
    else:
        for key in ("ssh_key", "ssh_password_env", "ssh_password_prompt", "ssh_jump",
                    "ssh_known_hosts", "ssh_accept_new"):
            if data.get(key) not in (None, False):
                flag = "--" + key.replace("_", "-")
                raise OptionsError(f"{flag}: only meaningful with --ssh", key)

    mpstat = not _bool("no_mpstat", data.get("no_mpstat", False))
    perf = _bool("perf", data.get("perf", False))
    # The target's CPUs are this machine's unless the target is reached over SSH.
    target_cpus: CpuCheck | None = None if ssh is not None else "machine"
    perf_cpus = (_cpu_list("perf_cpus", data["perf_cpus"], target_cpus)
                 if data.get("perf_cpus") else None)
    if perf_cpus is not None and not perf:
        raise OptionsError("--perf-cpus: only meaningful with --perf", "perf_cpus")
    try:
        frequency = int(data.get("perf_frequency", 99))
    except (TypeError, ValueError):
        raise OptionsError(
            f"--perf-frequency: must be an integer (got {data.get('perf_frequency')!r})",
            "perf_frequency",
        ) from None
    try:
        target_spec = CaptureSpec(
            mpstat=mpstat,
            watch_cpus=parse_watch_cpus(data.get("watch_cpus"), target_cpus),
            perf=perf,
            perf_cpus=perf_cpus,
            perf_frequency=frequency,
            install_tools=_bool("install_tools", data.get("install_tools", False)),
        )
    except ValidationError as exc:
        error = exc.errors()[0]
        name = str(error["loc"][0]) if error.get("loc") else "capture"
        raise OptionsError(f"--{name.replace('_', '-')}: {error['msg']}", name) from None
    loadgen_spec = CaptureSpec(
        mpstat=mpstat,
        watch_cpus={LOADGEN_GROUP: sorted(set(options.worker_cpus))},
        install_tools=target_spec.install_tools,
    )

    resume = None if data.get("resume") is None else Path(str(data["resume"])).expanduser()
    out = None if data.get("out") is None else Path(str(data["out"])).expanduser()
    if resume is not None:
        if out is not None and out.resolve() != resume.resolve():
            raise OptionsError("--out: mutually exclusive with --resume (the campaign "
                               "directory is the one resumed)", "out")
        out = resume
    elif out is not None and out.exists():
        # Refused now, before any connection or server, rather than after them.
        if is_campaign(out):
            raise CampaignError(f"{str(out)!r} is already a campaign; continue it with "
                                f"--resume {out} or choose another --out")
        if not out.is_dir() or any(out.iterdir()):
            raise CampaignError(f"{str(out)!r} is not empty and is not a campaign; choose "
                                f"another --out")

    stored = {k: v for k, v in data.items() if k not in ("out", "resume", "scenario")}
    return SweepConfig(
        settings=stored,
        url=url,
        options=options,
        plan=plan,
        rules=rules,
        out=out,
        resume=resume,
        note=note,
        label=label,
        ssh=ssh,
        target_spec=target_spec,
        loadgen_spec=loadgen_spec,
    )


def overlay(base: Mapping[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
    """`given` over `base` (flags over a campaign file, or over a resumed campaign's own
    settings). Giving any of the plan keys (rps, max-rps, step-rps, steps) replaces all of
    them, so that ``--steps 50,100`` over a file with ``rps``/``max-rps`` is not a conflict
    and ``--max-rps 400`` alone keeps no stale ``--steps``."""
    merged = dict(base)
    if any(key in given for key in PLAN_KEYS):
        for key in PLAN_KEYS:
            merged.pop(key, None)
    merged.update(given)
    return merged


def settings_for_resume(manifest: CampaignManifest, given: Mapping[str, Any]) -> dict[str, Any]:
    """The settings to resume with: the campaign's own, overridden by what was `given`
    (see `overlay`)."""
    return overlay(manifest.settings, given)


# --------------------------------------------------------------------------------------------
# A step's record
# --------------------------------------------------------------------------------------------


def _percentile(result: Result, percent: float) -> float | None:
    try:
        return result.latency.p(percent)
    except (KeyError, ValueError):
        return None


def record_from_result(
    result: Result,
    *,
    index: int,
    rate: float,
    directory: str,
    rules: Sequence[StopRule],
    stop_on_blocked: bool,
    started_at: datetime,
    ended_at: datetime,
    target_capture: CaptureResult | None = None,
    loadgen_capture: CaptureResult | None = None,
    loadgen_cpu_fallback: float | None = None,
    nhbench_cpu: float | None = None,
) -> StepRecord:
    """Turn a step's `Result` (and captures) into its `StepRecord`, stop rules evaluated."""
    counters = result.counters
    points = sorted({float(key[1:]) for key in LATENCY_KEYS} | set(latency_points(rules)))
    latency = {f"p{point:g}": _percentile(result, point) for point in points}
    try:
        blocked_stretches = result.stat("sequencer.blocking").count
    except KeyError:
        blocked_stretches = 0
    blocked_count = int(blocked_stretches) + int(counters.get("benchmark.pool_overflow", 0))
    # Error counters and, for the record, the connection counters behind them; only the
    # former are summed (error_total), so a refused connection is not counted twice.
    errors = {
        name: int(counters.get(name, 0))
        for name in (*ERROR_COUNTERS, *CONNECTION_ERROR_COUNTERS)
        if counters.get(name, 0)
    }
    failed = error_total(errors)
    http_2xx = int(counters.get("benchmark.http_2xx", 0))
    finished = http_2xx + failed
    error_rate = failed / finished if finished else 0.0

    target_cpu: dict[str, float | None] = {}
    if target_capture is not None:
        target_cpu = {group.name: group.busy_percent for group in target_capture.groups}
    loadgen_cpu = None
    if loadgen_capture is not None:
        for group in loadgen_capture.groups:
            if group.name == LOADGEN_GROUP:
                loadgen_cpu = group.busy_percent
    if loadgen_cpu is None:
        loadgen_cpu = loadgen_cpu_fallback

    record = StepRecord(
        index=index,
        directory=directory,
        rps_per_worker=rate,
        workers=result.worker_count,
        requested_rps=result.requested_rps,
        achieved_rps=result.achieved_rps,
        duration=result.duration,
        requests=int(counters.get("upstream_rq_total", 0)),
        http_2xx=http_2xx,
        latency=latency,
        blocked=blocked_count > 0,
        blocked_count=blocked_count,
        errors=errors,
        error_rate=error_rate,
        target_cpu=target_cpu,
        loadgen_cpu=loadgen_cpu,
        nhbench_cpu=nhbench_cpu,
        passed=True,
        target_capture=target_capture,
        loadgen_capture=loadgen_capture,
        started_at=started_at,
        ended_at=ended_at,
    )
    checks = [rule.check(record) for rule in rules]
    if stop_on_blocked:
        checks.append(SloCheck(expression="not blocked", value=float(blocked_count),
                               passed=blocked_count == 0))
    # A run cut short by a failure predicate (Nighthawk's defaults fire on the first 4xx/5xx,
    # reset or failed connection) did not measure the step: it fails, and the sweep stops.
    for name in result.failed_predicates:
        checks.append(SloCheck(expression=f"failure predicate {name}",
                               value=float(counters.get(name, 0)), passed=False))
    if result.terminated_by == "error":
        checks.append(SloCheck(expression="run ended without error", value=None, passed=False))
    # A step in which nothing succeeded measured nothing, whatever the rules say (as `nhbench
    # run` exits 1 for it); allow_no_success lets it pass, as it does for a run.
    if result.no_success_reason is not None:
        checks.append(SloCheck(expression="a request succeeded", value=0.0, passed=False))
    record.slo = checks
    record.passed = all(check.passed for check in checks)
    return record


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 1:
        return f"{value:.3f} s"
    return f"{value * 1e3:.3f} ms"


def step_line(record: StepRecord, planned: int | None, extend: bool) -> str:
    """The one-line progress report of a finished step."""
    total = "" if planned is None else f"/{planned}{'+' if extend else ''}"
    verdict = "pass" if record.passed else "FAIL: " + "; ".join(
        format_check(check) for check in record.slo if not check.passed
    )
    errors = record.error_count
    blocked = f"yes ({record.blocked_count})" if record.blocked else "no"
    return (
        f"step {record.index}{total}: {record.rps_per_worker:g} rps x {record.workers} = "
        f"{record.requested_rps:g} requested, achieved {record.achieved_rps:.1f}, "
        f"p99 {_ms(record.latency.get('p99'))}, blocked {blocked}, errors {errors}: {verdict}"
    )


# --------------------------------------------------------------------------------------------
# The sweep
# --------------------------------------------------------------------------------------------


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
    `stream` gets the progress lines and notes (None: silent).
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
    ) -> None:
        self.config = config
        self.command = list(command)
        self._password = password
        self._target_host = target_host
        self._captures = captures
        self._facts = facts
        self._reports = reports
        self._on_step = on_step
        self._note = _note_to(stream)
        self._stop_requested = False
        self._benchmark: Benchmark | None = None
        self.store: CampaignStore | None = None
        self.signal: int | None = None
        self._saved: CampaignManifest | None = None
        if config.resume is not None:
            # Checked here, before any connection or server, so that an incompatible resume
            # fails as fast and as cleanly as a bad option.
            saved = load_manifest(config.resume)
            self._saved = check_resume(
                saved, options=config.options_json, plan=config.plan,
                ignore=("uri",) if config.embedded else (),
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

    # ---- setup ------------------------------------------------------------------------------

    def _connect(self) -> Host:
        if self._target_host is not None:
            return self._target_host
        ssh = self.config.ssh
        if ssh is None:
            return LocalHost()
        api = _ssh_api()
        if api is None:
            raise HostError("--ssh: SSH support (nhbench.hosts._ssh) is not available in this "
                            "installation")
        target = api.SSHTarget.parse(ssh.target)
        jump = api.SSHTarget.parse(ssh.jump, option="ssh_jump") if ssh.jump else None
        password = self._password
        if password is None and ssh.password_env:
            password = api.password_from_environment(ssh.password_env)
        return api.SSHHost.connect(  # type: ignore[no-any-return]
            target,
            key_filename=ssh.key_filename,
            password=password,
            use_agent=True,
            known_hosts=ssh.known_hosts,
            accept_new=ssh.accept_new,
            jump=jump,
        )

    def _collect_facts(self, target: Host, loadgen: Host, address: str) -> dict[str, Any]:
        collect = _facts_api() if self._facts else None
        if collect is None:
            if self._facts:
                self._note("machine facts skipped: fact collection is not available")
            return {}
        facts = {}
        for role, host in (("target", target), ("loadgen", loadgen)):
            try:
                facts[role] = collect(host, role=role, target_address=address)
            except HostError as exc:
                self._note(f"{role} machine facts skipped: {exc}")
        return facts

    def _check_tools(self, host: Host, spec: CaptureSpec | None, role: str) -> bool:
        """Install (if asked) and check the capture tools; False turns this host's captures
        off (nothing to capture, or the capture code is unavailable)."""
        if spec is None or not (spec.mpstat or spec.perf):
            return False
        api = _capture_api()
        if api is None:
            self._note(f"{role} captures skipped: nhbench.capture is not available")
            return False
        try:
            if spec.install_tools:
                api.install_tools(host, spec)
            missing = api.check_tools(host, spec)
        except HostError as exc:
            self._note(f"{role} captures skipped: {exc}")
            return False
        for tool, reason in (missing or {}).items():
            self._note(f"{role}: {tool} capture skipped: {reason}")
        return True

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
        try:
            options = config.options
            url = config.url
            if config.embedded:
                server = self._start_embedded(options)
                url = server.url
                options = make_options(options, uri=url)
            target = options.target
            address = resolve(target.host, target.port, options.address_family)
            ssh_name = None if config.ssh is None else host.name
            if self._saved is not None:
                manifest = self._saved
                manifest.url = url
                store = CampaignStore.resume(config.out or Path("."), manifest)
                self._note(f"resuming {store.directory}: {len(manifest.steps)} step(s) done")
            else:
                facts = self._collect_facts(host, loadgen, address)
                manifest = self._new_manifest(url, options, ssh_name, facts)
                out = config.out or default_out(config.label)
                store = CampaignStore.create(out, manifest)
                self._note(f"campaign directory {store.directory}")
            self.store = store
            target_captures = self._captures and self._check_tools(host, config.target_spec,
                                                                   "target")
            loadgen_captures = self._captures and self._check_tools(
                loadgen, config.loadgen_spec, "loadgen")
            self._loop(store, options, host if target_captures else None,
                       loadgen if loadgen_captures else None)
            self._render_reports(final=True)
            return Campaign(store.directory, store.manifest)
        finally:
            if server is not None:
                server.stop()
            if host is not self._target_host:
                host.close()

    def _start_embedded(self, options: Options) -> Any:
        from .._server import TestServer

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
        manifest = store.manifest
        plan = manifest.plan
        done = len(manifest.steps)
        last = manifest.steps[-1].rps_per_worker if done else None
        planned = len(plan.steps)
        failed = next((step for step in manifest.steps if not step.passed), None)
        if failed is not None:
            store.finish("stopped", self._reason(failed))
            return
        current: tuple[int, float] | None = None
        try:
            while True:
                if self._stop_requested:
                    store.finish("interrupted", "interrupted before the next step")
                    return
                rate = next_step(plan, done, last)
                if rate is None:
                    reason = ("extend limit reached" if plan.extend else "all steps done")
                    store.finish("completed", reason)
                    return
                index = done + 1
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
                self._update_highest(manifest)
                store.save()
                self._note(step_line(record, planned, plan.extend))
                if self._on_step is not None:
                    self._on_step(record)
                self._render_reports(final=False)
                if not record.passed:
                    store.finish("stopped", self._reason(record))
                    return
                done, last = index, rate
                if plan.cooldown > 0 and next_step(plan, done, last) is not None:
                    self._sleep(plan.cooldown)
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
    def _reason(record: StepRecord) -> str:
        fired = "; ".join(format_check(check) for check in record.slo if not check.passed)
        return f"step {record.index} ({record.rps_per_worker:g} rps) failed: {fired}"

    @staticmethod
    def _update_highest(manifest: CampaignManifest) -> None:
        passing = [step for step in manifest.steps if step.passed]
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
                       role: str) -> Any:
        if host is None or spec is None:
            return None
        api = _capture_api()
        if api is None:
            return None
        try:
            capture = api.StepCapture(host, spec, path)
            capture.start()
            return capture
        except HostError as exc:
            self._note(f"{role} capture not started: {exc}")
            return None

    def _stop_capture(self, capture: Any, role: str) -> CaptureResult | None:
        if capture is None:
            return None
        try:
            return capture.stop()  # type: ignore[no-any-return]
        except HostError as exc:
            self._note(f"{role} capture lost: {exc}")
            return None

    def _run_step(
        self, store: CampaignStore, options: Options, index: int, rate: float,
        target_host: Host | None, loadgen_host: Host | None,
    ) -> tuple[StepRecord | None, Result | None]:
        path = store.prepare_step(index, rate)
        step_options = make_options(options, rps=rate)
        started_at = datetime.now(timezone.utc)
        captures: list[tuple[Any, str]] = []
        result: Result | None = None
        try:
            captures.append((self._start_capture(target_host, self.config.target_spec,
                                                 path / "target", "target"), "target"))
            captures.append((self._start_capture(loadgen_host, self.config.loadgen_spec,
                                                 path / "loadgen", "loadgen"), "loadgen"))
            if self._stop_requested:
                return None, None
            cpu0, wall0 = _cpu_seconds(), time.monotonic()
            benchmark = Benchmark(step_options)
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
        return record, result

    def _render_reports(self, *, final: bool) -> None:
        if not self._reports or self.store is None:
            return
        api = _report_api()
        if api is None:
            if final:
                self._note("reports skipped: nhbench.report is not available")
            return
        try:
            api.write_reports(self.store.directory, self.store.manifest)
        except Exception as exc:  # noqa: BLE001 - a report must never cost the measurements
            self._note(f"report not written: {type(exc).__name__}: {exc}".splitlines()[0])


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
