"""A sweep's configuration: `prepare_sweep` turns settings into a `SweepConfig`.

The settings are option names in Python spelling, as from the command line over a campaign
file, or `run_sweep`'s keywords. `nhbench.options.validate_sweep` checks them (the sweep's
own options with `SweepOptions`, the run options with `Options`); what is left here needs
more than the options package: the SSH target's syntax (the SSH code's), and whether
``--out`` is already a campaign. Nothing happens before all of it passed: no directory, no
connection, no server.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from .._calibrate import CalibrationError, load_calibration
from .._exceptions import CampaignError, NHBenchError, OptionsError
from .._groups import unknown_group_rule
from ..campaign import CampaignManifest, SweepPlan, is_campaign
from ..capture import CaptureSpec
from ..hosts import SSHTarget
from ..options import (
    EMBEDDED_URL,
    PLAN_KEYS,
    Options,
    PodRef,
    ServiceRef,
    StopRule,
    SweepOptions,
    parse_pod_ref,
    parse_service_ref,
    request_specs,
    validate_sweep,
)
from ..scrape import ScrapeSpec
from ._plan import build_plan

__all__ = [
    "LOADGEN_GROUP",
    "SSHSettings",
    "SweepConfig",
    "default_out",
    "overlay",
    "prepare_sweep",
    "settings_for_resume",
]

#: Name of the load generator's CPU group (its worker CPUs) in the loadgen capture.
LOADGEN_GROUP = "nhbench"

# Keys of the settings that are not kept in the manifest: where the campaign is, and where
# its settings came from.
_NOT_STORED = ("out", "resume", "scenario", "calibrate", "calibration")


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


@dataclass(frozen=True)
class K8sSettings:
    """What to resolve on the target's Kubernetes node before the campaign starts."""

    pods: tuple[PodRef, ...] = ()
    service: ServiceRef | None = None
    kubectl: str = "kubectl"
    kubelet_dir: str = "/var/lib/kubelet"


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
    #: Calibrate this machine before the first step (--calibrate).
    calibrate: bool = False
    #: A saved calibration to keep in the facts (--calibration FILE), already read.
    calibration: dict[str, Any] | None = None
    #: The target's metrics to scrape around each step (--scrape), or None.
    scrape: ScrapeSpec | None = None
    #: --watch-pod, --k8s-service, --kubectl and --kubelet-dir, or None without the first two.
    k8s: K8sSettings | None = None

    @property
    def embedded(self) -> bool:
        return self.url == EMBEDDED_URL

    @property
    def options_json(self) -> dict[str, Any]:
        """The run options every step shares, as the manifest records them (rps excluded)."""
        return self.options.model_dump(mode="json", exclude={"rps"})


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


def _ssh_settings(sweep: SweepOptions) -> SSHSettings | None:
    if sweep.ssh is None:
        return None
    ssh = SSHSettings(
        target=sweep.ssh,
        key_filename=sweep.ssh_key,
        password_env=sweep.ssh_password_env,
        password_prompt=sweep.ssh_password_prompt,
        jump=sweep.ssh_jump,
        known_hosts=sweep.ssh_known_hosts,
        accept_new=sweep.ssh_accept_new,
    )
    # The [user@]host[:port] syntax is the SSH code's (nhbench.hosts, above the options).
    for flag, text in (("ssh", ssh.target), ("ssh_jump", ssh.jump)):
        if text is None:
            continue
        try:
            SSHTarget.parse(text, option=flag)
        except (ValueError, NHBenchError) as exc:
            message = str(exc)
            prefix = f"--{flag.replace('_', '-')}"
            if not message.startswith(prefix):
                message = f"{prefix}: {message}"
            raise OptionsError(message, flag) from None
    return ssh


def _check_new_out(out: Path) -> None:
    # Refused now, before any connection or server, rather than after them.
    if is_campaign(out):
        raise CampaignError(f"{str(out)!r} is already a campaign; continue it with "
                            f"--resume {out} or choose another --out")
    if not out.is_dir() or any(out.iterdir()):
        raise CampaignError(f"{str(out)!r} is not empty and is not a campaign; choose "
                            f"another --out")


def prepare_sweep(settings: Mapping[str, Any]) -> SweepConfig:
    """Validate `settings` (sweep option names in Python spelling, as from the command line
    or a campaign file) into a `SweepConfig`, without side effects.

    Raises OptionsError naming the option for anything wrong, and CampaignError when ``out``
    is a directory a new campaign cannot use.
    """
    sweep, options = validate_sweep(settings)
    assert sweep.url is not None or sweep.k8s_service is not None  # SweepOptions requires it
    if any(str(rule).lstrip().startswith("group:") for rule in sweep.stop_on_slo):
        # A rule on a group the steps cannot have would read "no data" and stop the sweep
        # at its first step (adapt's --slo comes here as the stop rules too).
        unknown = unknown_group_rule(options, request_specs(options), sweep.stop_on_slo)
        if unknown is not None:
            raise OptionsError(unknown, "stop_on_slo")
    ssh = _ssh_settings(sweep)
    plan = build_plan(
        rps=sweep.rps,
        max_rps=sweep.max_rps,
        step_rps=sweep.step_rps,
        steps=sweep.steps,
        duration=sweep.duration,
        cooldown=sweep.cooldown,
        extend=sweep.extend,
        extend_limit=sweep.extend_limit,
        stop_on_blocked=sweep.stop_on_blocked,
        stop_on_slo=sweep.stop_on_slo,
    )
    target_spec = CaptureSpec(
        mpstat=sweep.mpstat,
        watch_cpus=sweep.watch_cpus,
        perf=sweep.perf,
        perf_cpus=None if sweep.perf_cpus is None else list(sweep.perf_cpus),
        perf_frequency=sweep.perf_frequency,
        perf_stat=sweep.perf_stat,
        perf_events=list(sweep.perf_event),
        install_tools=sweep.install_tools,
    )
    loadgen_spec = CaptureSpec(
        mpstat=sweep.mpstat,
        watch_cpus={LOADGEN_GROUP: sorted(set(options.worker_cpus))},
        install_tools=sweep.install_tools,
    )
    if sweep.calibrate and sweep.calibration is not None:
        raise OptionsError("--calibrate and --calibration FILE: give one (measure now, or "
                           "keep a saved calibration)", "calibration")
    calibration = None
    if sweep.calibration is not None:
        try:
            calibration = load_calibration(sweep.calibration)
        except CalibrationError as exc:
            raise OptionsError(f"--calibration: {exc}", "calibration") from None
    out = sweep.out
    if sweep.resume is not None:
        out = sweep.resume
    elif out is not None and out.exists():
        _check_new_out(out)
    return SweepConfig(
        # As given (not as validated): a resume validates them again, with what it overrides.
        settings={k: v for k, v in settings.items() if k not in _NOT_STORED},
        # With --k8s-service the URL is found on the node when the sweep starts.
        url=sweep.url or "",
        options=options,
        plan=plan,
        rules=sweep.rules,
        out=out,
        resume=sweep.resume,
        note=sweep.note,
        label=list(sweep.label),
        ssh=ssh,
        target_spec=target_spec,
        loadgen_spec=loadgen_spec,
        calibrate=sweep.calibrate,
        calibration=calibration,
        k8s=K8sSettings(
            pods=tuple(parse_pod_ref(text) for text in sweep.watch_pod),
            service=None if sweep.k8s_service is None else parse_service_ref(sweep.k8s_service),
            kubectl=sweep.kubectl or "kubectl",
            kubelet_dir=sweep.kubelet_dir or "/var/lib/kubelet",
        ) if sweep.watch_pod or sweep.k8s_service else None,
        scrape=ScrapeSpec(dict(sweep.scrape), tuple(sweep.metric_selectors),
                          sweep.scrape_timeout, sweep.scrape_required)
        if sweep.scrape else None,
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
    (see `overlay`). CampaignError for an adapt campaign, whose settings are not a sweep's."""
    if manifest.kind != "sweep":
        raise CampaignError(f"that campaign is an {manifest.kind} campaign; continue it with "
                            f"nhbench {manifest.kind} --resume")
    return overlay(manifest.settings, given)
