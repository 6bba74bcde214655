"""The captures of one sweep step on one host: start them, stop them, collect the files.

::

    capture = StepCapture(host, spec, step_dir / "target")
    capture.start()
    ...                      # the step's load runs here
    result = capture.stop()  # CaptureResult; files are in step_dir / "target"

Only the `Host` protocol is used (run, start, fetch), so the same code captures on this
machine (`LocalHost`) and over SSH. On the host, everything goes into a ``mktemp -d``
directory that `stop` removes. Into `out_dir` `stop` writes:

* ``mpstat.json`` — mpstat's raw output as it printed it (JSON with sysstat 11 or later;
  with an older sysstat the raw text goes to ``mpstat.txt`` instead);
* ``perf.folded`` — the folded stacks (see `nhbench.capture._perf`);
* ``flamegraph.svg`` — the flame graph of those stacks.

The perf.data file and the ``perf script`` text stay on the host and are removed with the
temporary directory: the folded stacks carry what the report uses, at a fraction of the size.

File names in the `CaptureResult` are relative to `relative_to`, which defaults to
``out_dir.parent``: the campaign layout puts captures in ``steps/NNN-rpsR/target/``, so the
names read ``target/mpstat.json`` and are relative to the step directory, which is what
`CaptureResult` promises (a moved campaign directory keeps working).

A tool that is missing, or that fails during the step, never fails the step: its capture is
left out and `CaptureResult.skipped` says why ("mpstat", "perf", "flamegraph", and
"group NAME" when some of a watched group's CPUs were not reported).
"""

from __future__ import annotations

import gzip
import logging
import shlex
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from .._io import write_text
from ..options import format_cpu_list
from ._flamegraph import render_flamegraph
from ._models import CaptureResult, CaptureSpec, PerfStat
from ._mpstat import group_loads, mpstat_command, parse_mpstat
from ._perf import (
    PerfProbe,
    fold_perf_script,
    format_folded,
    parse_evlist,
    perf_record_command,
    perf_script_command,
    probe_event,
    probe_perf,
)
from ._perfstat import check_perf_events, group_counts, parse_perf_stat, perf_stat_command, perf_stat_events

if TYPE_CHECKING:
    # Only for annotations: any object with the Host methods works (LocalHost, SSHHost).
    from ..hosts import BackgroundCommand, CommandResult, Host

__all__ = ["StepCapture", "check_tools", "install_tools", "refused_perf_events"]

log = logging.getLogger("nhbench.capture")

MPSTAT_JSON = "mpstat.json"
MPSTAT_TEXT = "mpstat.txt"
FOLDED = "perf.folded"
FLAMEGRAPH = "flamegraph.svg"
PERF_STAT = "perf-stat.csv"

# Package names per package manager. Debian ships perf as linux-perf; Ubuntu as
# linux-tools-<kernel release> (plus linux-tools-common for the wrapper), resolved on the
# host because the release is the host's.
_INSTALLERS: tuple[tuple[str, str, str], ...] = (
    (
        "apt-get",
        "sysstat",
        (
            "$(if apt-cache show linux-perf >/dev/null 2>&1; then echo linux-perf; "
            "else echo linux-tools-common linux-tools-$(uname -r); fi)"
        ),
    ),
    ("dnf", "sysstat", "perf"),
    ("yum", "sysstat", "perf"),
    ("zypper", "sysstat", "perf"),
    ("apk", "sysstat", "perf"),
)


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else "no output"


def _mpstat_reason(host: Host) -> str | None:
    found = host.run("command -v mpstat", timeout=30)
    if not found.ok or not found.stdout.strip():
        return "mpstat is not installed (package sysstat; or use --install-tools)"
    return None


def check_tools(host: Host, spec: CaptureSpec) -> dict[str, str]:
    """The captures `spec` asks for that cannot run on `host`, each with the reason.

    Keys are "mpstat" and "perf"; an empty dict means every wanted capture can run. It
    checks presence, and for perf also the rights to record CPU-wide (root through
    ``sudo -n``, or ``kernel.perf_event_paranoid`` <= 0) and that the kernel lets perf open
    an event at all.
    """
    reasons: dict[str, str] = {}
    if spec.mpstat:
        reason = _mpstat_reason(host)
        if reason:
            reasons["mpstat"] = reason
    if spec.perf or spec.perf_stat:
        probe = probe_perf(host)
        if probe.skip_reason:
            for capture in ("perf", "perf stat"):
                if getattr(spec, capture.replace(" ", "_")):
                    reasons[capture] = probe.skip_reason
    return reasons


def refused_perf_events(host: Host, spec: CaptureSpec) -> dict[str, str]:
    """The ``perf_events`` of `spec` that perf on `host` rejects, each with perf's message.

    Asked of the host's own perf (`check_perf_events`): which events exist depends on its
    perf version, kernel and PMU. Empty when perf cannot run there at all; the capture is
    then skipped with that reason, as `check_tools` reports.
    """
    if not (spec.perf_stat and spec.perf_events):
        return {}
    probe = probe_perf(host)
    if probe.skip_reason:
        return {}
    return check_perf_events(host, spec.perf_events, sudo=probe.sudo)


def install_tools(host: Host, spec: CaptureSpec | None = None) -> None:
    """Install what `spec` needs and the host lacks (sysstat for mpstat, perf) with the
    host's package manager, as root (``sudo -n``), non-interactively.

    Without `spec`, both are considered. Never raises because an install failed: the failure
    is logged, and `check_tools` afterwards reports the tool as missing, so the capture is
    skipped as it would have been without the install.
    """
    wanted: list[str] = []
    if (spec is None or spec.mpstat) and _mpstat_reason(host):
        wanted.append("sysstat")
    if (spec is None or spec.perf or spec.perf_stat) and not host.run("perf --version", timeout=30).ok:
        wanted.append("perf")
    if not wanted:
        return
    installer = next(
        (row for row in _INSTALLERS if host.run(f"command -v {row[0]}", timeout=30).ok), None
    )
    if installer is None:
        log.warning("%s: cannot install %s: no known package manager (apt-get, dnf, yum, "
                    "zypper, apk)", host.name, " and ".join(wanted))
        return
    manager, sysstat_pkg, perf_pkg = installer
    packages = " ".join(sysstat_pkg if tool == "sysstat" else perf_pkg for tool in wanted)
    commands = {
        "apt-get": f"export DEBIAN_FRONTEND=noninteractive; apt-get install -y -q {packages} "
        f"|| {{ apt-get update -q && apt-get install -y -q {packages}; }}",
        "dnf": f"dnf install -y -q {packages}",
        "yum": f"yum install -y -q {packages}",
        "zypper": f"zypper --non-interactive install {packages}",
        "apk": f"apk add --no-interactive {packages} || apk add {packages}",
    }
    result = host.run(commands[manager], sudo=True, timeout=900)
    if not result.ok:
        log.warning("%s: installing %s with %s failed (exit status %d): %s", host.name,
                    packages, manager, result.exit_status, _first_line(result.stderr))


class StepCapture:
    """mpstat and perf on `host` for the duration of one step (see the module docstring).

    `start` and `stop` are each called once; `stop` always returns a `CaptureResult`, and
    also stops and cleans up whatever `start` managed to begin when used as a context
    manager that is left by an exception.
    """

    def __init__(
        self,
        host: Host,
        spec: CaptureSpec,
        out_dir: Path,
        *,
        relative_to: Path | None = None,
        title: str | None = None,
    ) -> None:
        self.host = host
        self.spec = spec
        self.out_dir = Path(out_dir)
        self.relative_to = Path(relative_to) if relative_to is not None else self.out_dir.parent
        self.title = title
        self._remote_dir: str | None = None
        self._mpstat: BackgroundCommand | None = None
        self._mpstat_name = MPSTAT_JSON
        self._perf: BackgroundCommand | None = None
        self._perf_probe: PerfProbe | None = None
        self._perf_event: str | None = None
        self._perf_stat: BackgroundCommand | None = None
        self._skipped: dict[str, str] = {}
        self._started = False
        self._result: CaptureResult | None = None

    def __enter__(self) -> StepCapture:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- start -------------------------------------------------------------------------

    def start(self) -> None:
        """Check the tools and start the wanted captures in the background."""
        if self._started:
            raise RuntimeError("StepCapture.start() called twice")
        self._started = True
        if not (self.spec.mpstat or self.spec.perf or self.spec.perf_stat):
            return
        made = self.host.run("mktemp -d \"${TMPDIR:-/tmp}/nhbench-capture.XXXXXX\"",
                             timeout=30)
        if not made.ok or not made.stdout.strip():
            reason = f"mktemp -d failed on {self.host.name}: {_first_line(made.stderr)}"
            for capture in ("mpstat", "perf", "perf_stat"):
                if getattr(self.spec, capture):
                    self._skipped[capture.replace("_", " ")] = reason
            return
        self._remote_dir = made.stdout.strip()
        if self.spec.mpstat:
            self._guard("mpstat", self._start_mpstat)
        if self.spec.perf:
            self._guard("perf", self._start_perf)
        if self.spec.perf_stat:
            self._guard("perf stat", self._start_perf_stat)

    def _guard(self, capture: str, action: Callable[[], None]) -> None:
        """Run one capture's `action`; an exception (the host went away, a file could not
        be written) costs that capture only, with the error as its skip reason."""
        try:
            action()
        except Exception as exc:  # noqa: BLE001 - a capture must never cost the step
            log.warning("%s: %s capture failed: %s", self.host.name, capture, exc)
            self._skipped.setdefault(capture, f"{capture} failed: {type(exc).__name__}: {exc}")

    def _remote(self, name: str) -> str:
        assert self._remote_dir is not None
        return shlex.quote(f"{self._remote_dir}/{name}")

    def _start_mpstat(self) -> None:
        reason = _mpstat_reason(self.host)
        if reason:
            self._skipped["mpstat"] = reason
            return
        # `mpstat -o JSON` with no interval prints a since-boot report at once; sysstat
        # before 11 rejects the option, and then the text format is read instead.
        probe = self.host.run("LC_ALL=C mpstat -o JSON", timeout=30)
        json_format = probe.ok and probe.stdout.lstrip().startswith("{")
        self._mpstat_name = MPSTAT_JSON if json_format else MPSTAT_TEXT
        command = mpstat_command(self._remote(self._mpstat_name), json_format=json_format)
        self._mpstat = self.host.start(command)

    def _start_perf(self) -> None:
        probe = self._probe()
        if probe.skip_reason:
            self._skipped["perf"] = probe.skip_reason
            return
        self._perf_event = probe_event(self.host, sudo=probe.sudo)
        command = perf_record_command(
            self._remote("perf.data"),
            event=self._perf_event,
            frequency=self.spec.perf_frequency,
            cpus=self.spec.perf_cpus,
        )
        self._perf = self.host.start(command, sudo=probe.sudo)

    def _probe(self) -> PerfProbe:
        # perf record and perf stat need the same rights: probed once per step.
        if self._perf_probe is None:
            self._perf_probe = probe_perf(self.host)
        return self._perf_probe

    def _start_perf_stat(self) -> None:
        probe = self._probe()
        if probe.skip_reason:
            self._skipped["perf stat"] = probe.skip_reason
            return
        command = perf_stat_command(
            self._remote(PERF_STAT),
            events=perf_stat_events(self.spec.perf_events),
            cpus=sorted({cpu for cpus in self.spec.watch_cpus.values() for cpu in cpus}),
        )
        self._perf_stat = self.host.start(command, sudo=probe.sudo)

    def _collect_perf_stat(self, result: CaptureResult, done: CommandResult) -> None:
        assert self._perf_probe is not None
        sudo = self._perf_probe.sudo
        # perf ran as root: read its file as root too (it is a few kB).
        read = self.host.run(f"cat {self._remote(PERF_STAT)}", sudo=sudo, timeout=60)
        if not read.ok or not read.stdout.strip():
            errors = self.host.run(f"cat {self._remote(PERF_STAT)}.err", sudo=sudo, timeout=30)
            self._skipped["perf stat"] = (
                f"perf stat left no counts: {_first_line(errors.stdout or done.stderr)}")
            return
        self.out_dir.mkdir(parents=True, exist_ok=True)
        local = self.out_dir / PERF_STAT
        write_text(local, read.stdout)
        events = perf_stat_events(self.spec.perf_events)
        result.perf_stat = PerfStat(events=events, file=self._relative(local))
        try:
            lines = parse_perf_stat(read.stdout)
        except ValueError as exc:
            self._skipped["perf stat"] = f"perf stat output not understood: {exc}"
            return
        result.perf_stat.groups = group_counts(lines, events, self.spec.watch_cpus)

    # -- stop --------------------------------------------------------------------------

    def stop(self) -> CaptureResult:
        """Stop the captures, copy and parse their output, remove the host's temporary
        directory, and return what was captured. Idempotent."""
        if self._result is not None:
            return self._result
        result = CaptureResult(host=self.host.name)
        done: dict[str, CommandResult] = {}

        def stopper(name: str, command: BackgroundCommand, timeout: float) -> Callable[[], None]:
            def stop() -> None:
                done[name] = command.stop(timeout=timeout)

            return stop

        try:
            # Stop both before any post-processing, so perf does not record the
            # `perf script` run and mpstat does not time the folding.
            if self._mpstat is not None:
                self._guard("mpstat", stopper("mpstat", self._mpstat, 10))
            if self._perf is not None:
                self._guard("perf", stopper("perf", self._perf, 60))
            if self._perf_stat is not None:
                self._guard("perf stat", stopper("perf stat", self._perf_stat, 30))
            if "mpstat" in done:
                self._guard("mpstat", lambda: self._collect_mpstat(result, done["mpstat"]))
            if "perf" in done:
                self._guard("perf", lambda: self._collect_perf(result, done["perf"]))
            if "perf stat" in done:
                self._guard("perf stat",
                            lambda: self._collect_perf_stat(result, done["perf stat"]))
        finally:
            self._cleanup()
        result.skipped.update(self._skipped)
        self._result = result
        return result

    def _relative(self, path: Path) -> str:
        try:
            return path.relative_to(self.relative_to).as_posix()
        except ValueError:
            return path.as_posix()

    def _fetch_text(self, remote_name: str, local: Path) -> str:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        assert self._remote_dir is not None
        self.host.fetch(f"{self._remote_dir}/{remote_name}", local)
        return local.read_text(encoding="utf-8", errors="replace")

    def _collect_mpstat(self, result: CaptureResult, done: CommandResult) -> None:
        local = self.out_dir / self._mpstat_name
        try:
            text = self._fetch_text(self._mpstat_name, local)
        except Exception as exc:  # noqa: BLE001 - a HostError, or worse: still a skip
            self._skipped["mpstat"] = (
                f"mpstat output could not be copied: {exc} "
                f"(mpstat: {_first_line(done.stderr)})"
            )
            return
        result.mpstat_file = self._relative(local)
        try:
            samples = parse_mpstat(text)
        except ValueError as exc:
            # A step shorter than mpstat's 1 s interval ends before the first sample.
            self._skipped["mpstat"] = f"no mpstat samples ({exc}); was the step under 1 s?"
            return
        result.cpu_busy = samples.mean_busy()
        result.samples = samples.samples
        loads, missing = group_loads(result.cpu_busy, self.spec.watch_cpus)
        result.groups = loads
        for name, cpus in missing.items():
            self._skipped[f"group {name}"] = (
                f"CPUs {format_cpu_list(cpus)} not reported by mpstat on {self.host.name} "
                f"(it reported {len(result.cpu_busy)} CPUs)"
            )

    def _collect_perf(self, result: CaptureResult, done: CommandResult) -> None:
        assert self._perf_probe is not None
        sudo = self._perf_probe.sudo
        data = self._remote("perf.data")
        # perf re-raises SIGINT after writing its file, so its exit status says little;
        # `perf evlist` reading the file back is the test that the recording is usable.
        evlist = self.host.run(f"perf evlist -i {data}", sudo=sudo, timeout=60)
        if not evlist.ok:
            errors = self.host.run(f"cat {data}.err", timeout=30).stdout
            self._skipped["perf"] = (
                f"perf record left no usable data: {_first_line(errors or evlist.stderr)}"
            )
            return
        result.perf_event = parse_evlist(evlist.stdout) or self._perf_event
        script = self.host.run(
            perf_script_command(data, self._remote("perf.script")), sudo=sudo, timeout=600
        )
        if not script.ok:
            script_errors = self.host.run(f"cat {self._remote('perf.script.err')}", timeout=30)
            self._skipped["perf"] = f"perf script failed: {_first_line(script_errors.stdout)}"
            return
        # perf script text is about 1 kB per sample (a 144-CPU host at 99 Hz for 30 s makes
        # hundreds of MB); gzip -1 shrinks it about tenfold before it crosses the network.
        name = "perf.script"
        if self.host.run("command -v gzip", timeout=30).ok and self.host.run(
            f"gzip -1 {self._remote(name)}", sudo=sudo, timeout=600
        ).ok:
            name += ".gz"
        self.out_dir.mkdir(parents=True, exist_ok=True)
        raw_local = self.out_dir / f".{name}"
        try:
            assert self._remote_dir is not None
            self.host.fetch(f"{self._remote_dir}/{name}", raw_local)
            opener = gzip.open if name.endswith(".gz") else open
            with opener(raw_local, "rt", encoding="utf-8", errors="replace") as handle:
                folded = fold_perf_script(handle)
        finally:
            raw_local.unlink(missing_ok=True)
        folded_path = self.out_dir / FOLDED
        write_text(folded_path, format_folded(folded))
        result.folded_file = self._relative(folded_path)
        if not folded:
            self._skipped["flamegraph"] = "perf recorded no samples"
            return
        cpus = self.spec.perf_cpus or []
        where = ("CPU " if len(cpus) == 1 else "CPUs ") + format_cpu_list(cpus)
        if not cpus:
            where = "all CPUs"
        svg = render_flamegraph(
            folded,
            title=self.title or f"{self.host.name}: perf {result.perf_event}",
            subtitle=f"{result.perf_event} at {self.spec.perf_frequency} Hz on {where}",
        )
        svg_path = self.out_dir / FLAMEGRAPH
        write_text(svg_path, svg)
        result.flamegraph_file = self._relative(svg_path)

    def _cleanup(self) -> None:
        if self._remote_dir is None:
            return
        remote = shlex.quote(self._remote_dir)
        self._remote_dir = None
        # perf ran as root, so its files in the directory are root's; removing them needs
        # root too when we are not.
        sudo = bool(self._perf_probe and self._perf_probe.sudo)
        try:
            removed = self.host.run(f"rm -rf {remote}", sudo=sudo, timeout=60)
            if not removed.ok and sudo:
                self.host.run(f"rm -rf {remote}", timeout=60)
        except Exception as exc:  # noqa: BLE001 - cleanup must not hide the step's result
            log.warning("%s: could not remove %s: %s", self.host.name, remote, exc)
