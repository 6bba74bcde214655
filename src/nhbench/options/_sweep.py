"""`SweepOptions`: the settings of ``nhbench sweep`` besides the run options.

Each field is one sweep option: its `Flag` makes it a flag of ``nhbench sweep`` (with the
field's description as its help), and its name, with ``-`` or ``_``, is its key in a
campaign file. A sweep also passes every `nhbench run` option to each of its steps
(`RUN_OPTION_KEYS`: the `Options` fields the sweep does not define its own way), so::

    flags of nhbench sweep  = SweepOptions' flags + the run flags of RUN_OPTION_KEYS
    campaign-file keys      = SCENARIO_KEYS = SweepOptions' fields but CLI_ONLY + RUN_OPTION_KEYS

Adding a sweep option is adding a field here; `nhbench.sweep` reads it from the validated
model. `validate_sweep` validates a whole settings mapping (the command line over a campaign
file, or `run_sweep`'s keywords): the sweep's own options here, the run options by `Options`
at the first step's rate. Every error is one line naming the flag, as for ``nhbench run``.

Values are checked where their grammar lives: stop rules in ``_rules.py``, rates and step
lists in ``_steps.py``, CPU lists and durations with the run options. What needs more than
this package (the SSH target's syntax, which the SSH code owns; whether ``--out`` is already
a campaign) is checked by `nhbench.sweep.prepare_sweep`, still before anything runs.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from .._exceptions import OptionsError
from ._errors import format_validation_error
from ._flags import Flag, flag_of, flagged_fields, help_text
from ._k8s import parse_pod_ref, parse_service_ref
from ._response_checks import unknown_check_rule
from ._rules import StopRule, latency_points, parse_rules
from ._run import Options, make_options
from ._run_load import DEFAULT_DURATION
from ._scrape import (
    DEFAULT_SCRAPE_TIMEOUT,
    MetricSelector,
    parse_metric_selector,
    parse_scrape_sources,
)
from ._steps import (
    check_cooldown,
    check_extension,
    parse_rate,
    parse_step_list,
    plan_steps,
    step_size,
)
from ._values import CpuCheck, parse_cpu_list, parse_duration

__all__ = [
    "CLI_ONLY",
    "EMBEDDED_URL",
    "NOT_IN_A_SWEEP",
    "RUN_OPTION_KEYS",
    "SCENARIO_KEYS",
    "TABLE_LAYOUTS",
    "SweepOptions",
    "parse_watch_cpus",
    "sweep_options_table",
    "validate_sweep",
]

#: ``url: embedded`` (or the URL argument ``embedded``): start nhbench's test server.
EMBEDDED_URL = "embedded"

#: `nhbench run` options a sweep has no use for: a step's result always goes to the campaign
#: directory as JSON, every step needs a duration, the URL is the sweep's, and a sweep's
#: objectives are its stop rules (--stop-on-slo, same grammar), not a run's --slo. (The run
#: options a sweep defines its own way, rps, duration and label, are `SweepOptions` fields.)
#: (--validity is passed on: each step's result carries its verdict, and the campaign's
#: exit status reads the steps' verdicts under --validity strict.) --until decides a run's
#: length, which a sweep's steps have from the plan.
NOT_IN_A_SWEEP = ("uri", "output", "output_format", "no_duration", "slo", "until",
                  "max_duration")

#: Sweep options that are not campaign-file keys: resuming is something done to an existing
#: campaign directory, not part of the description of a campaign.
CLI_ONLY = ("resume",)

_PLACEHOLDER_URI = "http://127.0.0.1:1/"
_GROUP_NAME = re.compile(r"^[A-Za-z0-9_.:-]+$")

_PLAN = "plan"
_CAMPAIGN = "campaign"
_SSH = "target host over SSH"
_CAPTURES = "captures (on the target host; local without --ssh)"
_SCRAPE = "target metrics (scraped before and after each step)"
_K8S = "Kubernetes (kubectl on the target host; local without --ssh)"


# --------------------------------------------------------------------------------------------
# Value syntaxes. Each ValueError message follows "--<flag>: " (the formatter adds the flag).
# --------------------------------------------------------------------------------------------


def _switch(value: object) -> object:
    # Flags give True; campaign files and Python give bools, 0/1 or the usual words.
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("1", "true", "yes", "on"):
        return True
    if isinstance(value, str) and value.strip().lower() in ("0", "false", "no", "off", ""):
        return False
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise ValueError(f"must be true or false (got {value!r})")


def _strings(value: object) -> tuple[str, ...]:
    # A repeatable flag gives a list; a campaign file may give one value or a list.
    if value is None:
        return ()
    if isinstance(value, (list, tuple)):
        return tuple(str(item) for item in value)
    return (str(value),)


def _text(value: object) -> object:
    return None if value is None else str(value)


def _path(value: object) -> object:
    return None if value is None else Path(str(value)).expanduser()


def _rate(value: object) -> object:
    return None if value is None else parse_rate(value)


def _step_list(value: object) -> object:
    return None if value is None else tuple(parse_step_list(value))


def _duration(value: object) -> object:
    seconds = parse_duration(value)
    if seconds <= 0:
        raise ValueError(f"must be > 0 (got {value!r})")
    return seconds


def _cooldown(value: object) -> object:
    return check_cooldown(parse_duration(value))


#: The reports' step-table layouts (nhbench.campaign reads the setting back: TABLE_LAYOUTS).
TABLE_LAYOUTS = ("nhbench", "intel")


def _table_layout(value: object) -> object:
    text = str(value).strip().lower()
    if text not in TABLE_LAYOUTS:
        raise ValueError(f"must be nhbench or intel (got {value!r})")
    return text


def _integer(value: object) -> object:
    try:
        return int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        raise ValueError(f"must be an integer (got {value!r})") from None


# Commas inside a PMU's terms (cpu/event=0x3c,umask=0/) are the event's own; one outside
# them would make perf count several events under a name no column is for.
_PMU_TERMS = re.compile(r"/[^/]*/")
_EVENT_TEXT = re.compile(r"^[\x21-\x7e]+$")


def _perf_events(value: object) -> tuple[str, ...]:
    events = _strings(value)
    for event in events:
        if not _EVENT_TEXT.match(event):
            raise ValueError(f"{event!r} is not a perf event name (printable ASCII, no "
                             "spaces)")
        if "," in _PMU_TERMS.sub("", event) or event.startswith("{"):
            raise ValueError(f"{event!r}: one event per --perf-event (give the flag again "
                             "for each event)")
    return tuple(dict.fromkeys(events))


Switch = Annotated[bool, BeforeValidator(_switch)]
Rate = Annotated[float | None, BeforeValidator(_rate)]
Text = Annotated[str | None, BeforeValidator(_text)]
Strings = Annotated[tuple[str, ...], BeforeValidator(_strings)]
DirPath = Annotated[Path | None, BeforeValidator(_path)]
PerfEvents = Annotated[tuple[str, ...], BeforeValidator(_perf_events)]


def parse_watch_cpus(value: object, within: CpuCheck | None = None) -> dict[str, list[int]]:
    """``["ingress=5,22,77,94", "sidecar=10-12"]`` or a mapping -> {name: [cpus]}.

    `within` is "machine" when the target is this machine (its CPUs are known), None when it
    is a remote host: its lists are then only bounded, and a CPU it lacks shows as missing
    in the capture. OptionsError names the flag and the group.
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


def _target_cpus(ssh: object) -> CpuCheck | None:
    # The target's CPUs are this machine's unless the target is reached over SSH.
    return None if ssh else "machine"


# --------------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------------


class SweepOptions(BaseModel):
    """The sweep's own settings, validated (see the module doc)."""

    # defer_build: the validator is built on the first validation, not when the class is
    # defined, so that importing the options package costs little (docs/benchmarks.md,
    # "Start-up"); validation and its messages are the same either way.
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=False,
                              defer_build=True)

    url: Annotated[Text, Flag(positional=True, metavar="URL")] = Field(
        default=None,
        description="Target URL, or 'embedded' for the built-in test server. Optional with "
        "--scenario, --resume or --k8s-service.",
    )
    # ---- plan ----
    rps: Annotated[Rate, Flag(metavar="N", group=_PLAN)] = Field(
        default=None, description="First (or only) step: requests per second per worker.")
    max_rps: Annotated[Rate, Flag(metavar="N", group=_PLAN)] = Field(
        default=None, description="Last step of the range, included.")
    step_rps: Annotated[Rate, Flag(metavar="N", group=_PLAN, default="10")] = Field(
        default=None, description="Step of the range (and of --extend).")
    steps: Annotated[
        tuple[float, ...] | None, BeforeValidator(_step_list),
        Flag(metavar="N,N,...", group=_PLAN),
    ] = Field(default=None, description="Explicit per-worker rates instead of a range.")
    duration: Annotated[
        float, BeforeValidator(_duration), Flag(metavar="TIME", group=_PLAN, default="5 s")
    ] = Field(default=DEFAULT_DURATION, description="Length of each step (5s, 500ms, 2m).")
    cooldown: Annotated[
        float, BeforeValidator(_cooldown), Flag(metavar="TIME", group=_PLAN, default="0")
    ] = Field(default=0.0, description="Idle time between steps.")
    extend: Annotated[Switch, Flag(group=_PLAN)] = Field(
        default=False,
        description="RPS-SLA mode: after the planned steps, keep adding --step-rps until a "
        "stop rule fires (or --extend-limit); the report names the highest passing step.",
    )
    extend_limit: Annotated[Rate, Flag(metavar="N", group=_PLAN)] = Field(
        default=None, description="Never extend beyond this per-worker rate.")
    stop_on_blocked: Annotated[Switch, Flag(group=_PLAN)] = Field(
        default=False,
        description="Stop after a step in which the sequencer blocked (closed loop) or "
        "dropped requests (open loop): the load generator could not offer the rate.",
    )
    stop_on_slo: Annotated[Strings, Flag(metavar="EXPR", append=True, group=_PLAN)] = Field(
        default=(),
        description="Stop after a step that breaks EXPR, e.g. 'p99<5ms', 'p99.9<=20ms', "
        "'error_rate<0.1%', 'achieved/requested>0.95'. Repeatable.",
    )
    # ---- campaign ----
    out: Annotated[
        DirPath, Flag(metavar="DIR", group=_CAMPAIGN, default="campaigns/<timestamp>-<label>")
    ] = Field(default=None, description="Campaign directory (created; must be new or empty).")
    resume: Annotated[DirPath, Flag(metavar="DIR", group=_CAMPAIGN)] = Field(
        default=None,
        description="Continue an interrupted campaign with its own settings; flags given with "
        "it must match, except that the plan may be extended.",
    )
    note: Annotated[Text, Flag(metavar="TEXT", group=_CAMPAIGN)] = Field(
        default=None, description="Free text shown in the reports.")
    label: Annotated[Strings, Flag(metavar="TEXT", append=True, group=_CAMPAIGN)] = Field(
        default=(),
        description="Label of the campaign (names the default directory; kept in every "
        "result). Repeatable.",
    )
    table: Annotated[
        str, BeforeValidator(_table_layout),
        Flag(metavar="LAYOUT", group=_CAMPAIGN, default="nhbench"),
    ] = Field(
        default="nhbench",
        description="Layout of the reports' step table: nhbench, or intel: the columns of "
        "Intel's benchmark.sh summary in its order (Core/Thread and CPU % of the watched "
        "ingress, nighthawk and sidecar groups), then nhbench's others.",
    )
    calibrate: Annotated[Switch, Flag(group=_CAMPAIGN)] = Field(
        default=False,
        description="Calibrate this machine first (nhbench calibrate, about 8 s) and keep "
        "the figures in the load generator's machine facts ('calibration').",
    )
    calibration: Annotated[DirPath, Flag(metavar="FILE", group=_CAMPAIGN)] = Field(
        default=None,
        description="Keep this saved 'nhbench calibrate --output json' in the load "
        "generator's machine facts instead of calibrating again.",
    )
    # ---- target host over SSH ----
    ssh: Annotated[Text, Flag(metavar="USER@HOST[:PORT]", group=_SSH)] = Field(
        default=None,
        description="Run captures and collect facts on this host (the target's machine).",
    )
    ssh_key: Annotated[Text, Flag(metavar="FILE", group=_SSH)] = Field(
        default=None, description="Private key file (the SSH agent is tried too).")
    ssh_password_env: Annotated[Text, Flag(metavar="VAR", group=_SSH)] = Field(
        default=None,
        description="Read the SSH password from environment variable VAR (never from a flag).",
    )
    ssh_password_prompt: Annotated[Switch, Flag(group=_SSH)] = Field(
        default=False, description="Ask for the SSH password.")
    ssh_jump: Annotated[Text, Flag(metavar="USER@HOST[:PORT]", group=_SSH)] = Field(
        default=None, description="Connect through this jump host.")
    ssh_known_hosts: Annotated[
        Text, Flag(metavar="FILE", group=_SSH, default="~/.ssh/known_hosts")
    ] = Field(default=None, description="known_hosts file to check host keys against.")
    ssh_accept_new: Annotated[Switch, Flag(group=_SSH)] = Field(
        default=False,
        description="Trust and record a host key seen for the first time (a changed key is "
        "always refused).",
    )
    # ---- captures ----
    watch_cpus: Annotated[
        dict[str, list[int]], Flag(metavar="NAME=LIST", append=True, group=_CAPTURES)
    ] = Field(
        default_factory=dict,
        description="Report the load of this CPU group, e.g. ingress=5,22,77,94. Repeatable.",
    )
    perf: Annotated[Switch, Flag(group=_CAPTURES)] = Field(
        default=False, description="perf record each step; write a flame graph.")
    perf_cpus: Annotated[
        tuple[int, ...] | None, Flag(metavar="LIST", group=_CAPTURES, default="all")
    ] = Field(default=None, description="CPUs perf records on.")
    perf_frequency: Annotated[
        int, BeforeValidator(_integer), Flag(metavar="HZ", group=_CAPTURES)
    ] = Field(default=99, ge=1, description="perf sampling frequency.")
    perf_stat: Annotated[Switch, Flag(group=_CAPTURES)] = Field(
        default=False,
        description="perf stat each step on every --watch-cpus group (all CPUs without one): "
        "cycles, instructions, IPC, cache-misses, branch-misses, context-switches.",
    )
    perf_event: Annotated[
        PerfEvents, Flag(metavar="NAME", append=True, group=_CAPTURES)
    ] = Field(
        default=(),
        description="Also count this perf event with --perf-stat, e.g. LLC-load-misses or "
        "sched:sched_switch; checked with the target's perf. Repeatable.",
    )
    no_mpstat: Annotated[Switch, Flag(group=_CAPTURES)] = Field(
        default=False,
        description="Do not run mpstat (no CPU load in the report; the load generator's CPU "
        "then comes from its own CPU time).",
    )
    install_tools: Annotated[Switch, Flag(group=_CAPTURES)] = Field(
        default=False, description="Install missing sysstat/perf with the host's package manager.")
    # ---- Kubernetes ----
    watch_pod: Annotated[
        Strings, Flag(metavar="NAME=NS/POD[/CONTAINER]", append=True, group=_K8S)
    ] = Field(
        default=(),
        description="Watch the CPUs kubelet's CPU manager gave this pod (a pod name, or the "
        "prefix of a deployment's pods) as group NAME, like --watch-cpus; read from "
        "kubectl and cpu_manager_state on the target host. Repeatable.",
    )
    k8s_service: Annotated[Text, Flag(metavar="NS/NAME[:PORT]", group=_K8S)] = Field(
        default=None,
        description="Target the NodePort of this service on a node's InternalIP (the URL, "
        "when given, keeps its scheme and path).",
    )
    kubectl: Annotated[Text, Flag(metavar="CMD", group=_K8S, default="kubectl")] = Field(
        default=None,
        description="kubectl command on the target host, e.g. 'k3s kubectl' or 'kubectl "
        "--kubeconfig /etc/kubernetes/admin.conf'.",
    )
    kubelet_dir: Annotated[Text, Flag(metavar="DIR", group=_K8S, default="/var/lib/kubelet")
                           ] = Field(
        default=None, description="kubelet's root directory (holds cpu_manager_state).")
    # ---- target metrics ----
    scrape: Annotated[
        dict[str, str], Flag(metavar="[NAME=]URL", append=True, group=_SCRAPE)
    ] = Field(
        default_factory=dict,
        description="Scrape this Prometheus text endpoint (an exporter's /metrics, Envoy's "
        "/stats?format=prometheus) or Envoy's plain /stats before and after each step; the "
        "scrapes are kept in the step directory. Repeatable.",
    )
    scrape_metric: Annotated[
        Strings, Flag(metavar='NAME[{LABEL="V",...}]', append=True, group=_SCRAPE)
    ] = Field(
        default=(),
        description="Show the series of this metric as step-table columns: the step's "
        "increase for counters and histogram buckets, sums and counts, the value after the "
        "step otherwise. Globs in NAME. Repeatable.",
    )
    scrape_timeout: Annotated[
        float, BeforeValidator(_duration), Flag(metavar="TIME", group=_SCRAPE, default="5 s")
    ] = Field(default=DEFAULT_SCRAPE_TIMEOUT, description="Time a scrape may take.")
    scrape_required: Annotated[Switch, Flag(group=_SCRAPE)] = Field(
        default=False,
        description="Fail the campaign when a scrape fails (otherwise the step shows the "
        "metric as unknown, with the reason).",
    )

    # ---- validation ---------------------------------------------------------------------------

    @model_validator(mode="before")
    @classmethod
    def _parse_grammars(cls, data: Any) -> Any:
        # Stop rules and CPU groups have messages that show the value next to the flag
        # ("--stop-on-slo 'p99<5': ..."); raised here, outside any field, they reach the
        # user as written. Watched CPUs are checked against this machine unless the target
        # is another one (--ssh).
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if "stop_on_slo" in data:
            # Kept as written: the campaign's plan records the expressions as given.
            data["stop_on_slo"] = _strings(data["stop_on_slo"])
            parse_rules(data["stop_on_slo"])
        if "watch_cpus" in data:
            data["watch_cpus"] = parse_watch_cpus(data["watch_cpus"],
                                                  _target_cpus(data.get("ssh")))
        if "scrape" in data:
            try:
                data["scrape"] = parse_scrape_sources(data["scrape"])
            except ValueError as exc:
                raise OptionsError(f"--scrape {exc}", "scrape") from None
        if "scrape_metric" in data:
            data["scrape_metric"] = _strings(data["scrape_metric"])
            for text in data["scrape_metric"]:
                try:
                    parse_metric_selector(text)
                except ValueError as exc:
                    raise OptionsError(f"--scrape-metric {exc}", "scrape_metric") from None
        return data

    @field_validator("ssh", mode="after")
    @classmethod
    def _no_empty_ssh(cls, value: str | None) -> str | None:
        return value or None

    @field_validator("perf_cpus", mode="before")
    @classmethod
    def _parse_perf_cpus(cls, value: object, info: ValidationInfo) -> object:
        if not value:
            return None
        if isinstance(value, (list, tuple)):
            value = ",".join(str(cpu) for cpu in value)
        return tuple(parse_cpu_list(value, _target_cpus(info.data.get("ssh"))))

    @model_validator(mode="after")
    def _check_together(self) -> SweepOptions:
        # Errors that concern several options name each of them themselves.
        if not self.url and not self.k8s_service:
            raise OptionsError("missing URL: give the target URL (or 'embedded' for the "
                               "built-in test server)", "url")
        self._check_k8s()
        rates = self.planned_rates
        check_extension(rates, self.step, extend=self.extend, extend_limit=self.extend_limit,
                        stop_on_blocked=self.stop_on_blocked, stop_on_slo=self.stop_on_slo)
        if self.ssh is not None:
            self._check_ssh()
        else:
            for name in ("ssh_key", "ssh_password_env", "ssh_password_prompt", "ssh_jump",
                         "ssh_known_hosts", "ssh_accept_new"):
                value = getattr(self, name)
                if value is not None and value is not False:
                    flag = "--" + name.replace("_", "-")
                    raise OptionsError(f"{flag}: only meaningful with --ssh", name)
        if self.perf_cpus is not None and not self.perf:
            raise OptionsError("--perf-cpus: only meaningful with --perf", "perf_cpus")
        if self.perf_event and not self.perf_stat:
            raise OptionsError("--perf-event: only meaningful with --perf-stat", "perf_event")
        self._check_scrape()
        if (self.resume is not None and self.out is not None
                and self.out.resolve() != self.resume.resolve()):
            raise OptionsError("--out: mutually exclusive with --resume (the campaign "
                               "directory is the one resumed)", "out")
        return self

    def _check_k8s(self) -> None:
        # Syntax only: what the names resolve to is the cluster's to say, at the start.
        groups = set(self.watch_cpus)
        for text in self.watch_pod:
            try:
                ref = parse_pod_ref(text)
            except ValueError as exc:
                raise OptionsError(f"--watch-pod {exc}", "watch_pod") from None
            if not _GROUP_NAME.match(ref.group):
                raise OptionsError(f"--watch-pod: group name {ref.group!r} must be letters, "
                                   "digits, '_', '.', ':' or '-'", "watch_pod")
            if ref.group in groups:
                raise OptionsError(f"--watch-pod {ref.group}: group {ref.group} is given "
                                   "twice (--watch-cpus or --watch-pod)", "watch_pod")
            groups.add(ref.group)
        if self.k8s_service is not None:
            if self.embedded:
                raise OptionsError("--k8s-service: mutually exclusive with the embedded "
                                   "test server", "k8s_service")
            try:
                parse_service_ref(self.k8s_service)
            except ValueError as exc:
                raise OptionsError(f"--k8s-service {exc}", "k8s_service") from None
        if not self.watch_pod and self.k8s_service is None:
            for name in ("kubectl", "kubelet_dir"):
                if getattr(self, name) is not None:
                    flag = "--" + name.replace("_", "-")
                    raise OptionsError(f"{flag}: only meaningful with --watch-pod or "
                                       "--k8s-service", name)

    def _check_scrape(self) -> None:
        if not self.scrape:
            for name in ("scrape_metric", "scrape_required"):
                if getattr(self, name):
                    flag = "--" + name.replace("_", "-")
                    raise OptionsError(f"{flag}: only meaningful with --scrape URL", name)
            return
        # The Prometheus text parser is prometheus-client's (an extra): refused now, by
        # name, rather than after the first step.
        try:
            import prometheus_client  # noqa: F401
        except ImportError:
            raise OptionsError("--scrape needs prometheus-client: pip install "
                               "'nhbench[prometheus]'", "scrape") from None

    def _check_ssh(self) -> None:
        if self.ssh_password_env and self.ssh_password_prompt:
            raise OptionsError("--ssh-password-env: mutually exclusive with "
                               "--ssh-password-prompt", "ssh_password_env")
        if self.ssh_key and not Path(self.ssh_key).expanduser().is_file():
            raise OptionsError(f"--ssh-key: no such file {self.ssh_key!r}", "ssh_key")
        if self.ssh_password_env and self.ssh_password_env not in os.environ:
            raise OptionsError(
                f"--ssh-password-env: the environment variable {self.ssh_password_env} is "
                f"not set", "ssh_password_env",
            )

    # ---- derived values -------------------------------------------------------------------

    @property
    def embedded(self) -> bool:
        return self.url == EMBEDDED_URL

    @property
    def planned_rates(self) -> list[float]:
        """The planned per-worker rates, before any extension."""
        return plan_steps(self.rps, self.max_rps, self.step_rps, self.steps)

    @property
    def step(self) -> float | None:
        """The step of the range and of --extend (None for a single rate or a list)."""
        return step_size(self.max_rps, self.step_rps)

    @property
    def rules(self) -> list[StopRule]:
        return parse_rules(self.stop_on_slo)

    @property
    def mpstat(self) -> bool:
        return not self.no_mpstat

    @property
    def metric_selectors(self) -> list[MetricSelector]:
        return [parse_metric_selector(text) for text in self.scrape_metric]

    def run_options(self, run: Mapping[str, Any]) -> Options:
        """The `Options` every step shares, at the first step's rate: `run` (run options by
        field name) with this sweep's URL, duration and labels. Every percentile the reports
        and the stop rules read is recorded."""
        # The embedded server's address is not known before it starts; validate against a
        # placeholder of the same shape.
        uri = _PLACEHOLDER_URI if self.embedded or not self.url else self.url
        try:
            options = Options.model_validate({
                **run, "uri": uri, "rps": self.planned_rates[0], "duration": self.duration,
                "label": list(self.label),
            })
        except ValidationError as exc:
            raise OptionsError(format_validation_error(exc, cli=True)) from None
        points = sorted({*options.percentiles, 50.0, 90.0, 99.0, 99.9,
                         *latency_points(self.rules)})
        if list(options.percentiles) != points:
            options = make_options(options, percentiles=points)
        return options


#: Every `nhbench run` option a sweep passes on to each step unchanged.
RUN_OPTION_KEYS = tuple(
    name for name in Options.model_fields
    if name not in SweepOptions.model_fields and name not in NOT_IN_A_SWEEP
)

#: The keys of a campaign file (Python spelling; ``-`` works for ``_``).
SCENARIO_KEYS = (
    *(name for name in SweepOptions.model_fields if name not in CLI_ONLY),
    *RUN_OPTION_KEYS,
)


def _option_of(exc: ValidationError) -> str | None:
    error = exc.errors()[0]
    if error.get("loc"):
        return str(error["loc"][0])
    inner = (error.get("ctx") or {}).get("error")
    return inner.option if isinstance(inner, OptionsError) else None


def validate_sweep(settings: Mapping[str, Any]) -> tuple[SweepOptions, Options]:
    """Validate sweep settings (option names in Python spelling: the sweep's own and any run
    option) into the sweep's options and the run options its steps share.

    OptionsError (one line, naming the flag) for an unknown name or an invalid value.
    """
    unknown = sorted(set(settings) - set(SweepOptions.model_fields) - set(RUN_OPTION_KEYS))
    if unknown:
        raise OptionsError(f"{unknown[0]}: not a sweep option", unknown[0])
    own = {key: value for key, value in settings.items() if key in SweepOptions.model_fields}
    run = {key: value for key, value in settings.items() if key in RUN_OPTION_KEYS}
    try:
        sweep = SweepOptions.model_validate(own)
    except ValidationError as exc:
        raise OptionsError(format_validation_error(exc, cli=True, model=SweepOptions),
                           _option_of(exc)) from None
    options = sweep.run_options(run)
    # A check:NAME rule must name a check of the steps' runs: a typo would read "no data"
    # and fail every step.
    bad_rule = unknown_check_rule(sweep.stop_on_slo, options)
    if bad_rule is not None:
        raise OptionsError(bad_rule, "stop_on_slo")
    return sweep, options


def sweep_options_table() -> str:
    """The Markdown table of the sweep's own options, as docs/sweep.md shows it between its
    ``BEGIN``/``END sweep options`` markers (a test keeps the two equal)."""
    rows = ["| flag | campaign-file key | meaning |", "|---|---|---|"]
    for name, info, spec in flagged_fields(SweepOptions):
        if spec.positional:
            flag = f"`{spec.metavar or name.upper()}`"
        else:
            metavar = "" if spec.metavar is None and info.annotation is bool else (
                f" {spec.metavar or 'VALUE'}")
            flag = f"`{flag_of(SweepOptions, name)}{metavar}`"
        key = "-" if name in CLI_ONLY else f"`{name.replace('_', '-')}`"
        meaning = help_text(info, spec).replace("|", "\\|")
        rows.append(f"| {flag} | {key} | {meaning} |")
    return "\n".join(rows) + "\n"
