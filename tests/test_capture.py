"""Captures during a sweep step: mpstat, perf, folding and the SVG flame graph.

The capture tests run the real tools (mpstat, perf) on this machine through `LocalHost`
while a busy loop burns a known CPU. The parse tests read recorded output in
tests/data/mpstat/ and tests/data/perf/ (see the READMEs there for what is recorded and what
is hand-written). Nothing is mocked: the "missing tool" and "no rights" cases run real
commands on hosts whose environment really lacks the tool or the rights (a restricted PATH,
the unprivileged user ``nobody``).
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from nhbench.capture import (
    CaptureResult,
    CaptureSpec,
    StepCapture,
    check_tools,
    fold_perf_script,
    format_folded,
    group_loads,
    install_tools,
    parse_folded,
    parse_mpstat,
    parse_mpstat_json,
    parse_mpstat_text,
    render_flamegraph,
)
from nhbench.capture._perf import parse_evlist, probe_perf
from nhbench.hosts import CommandResult, LocalHost

DATA = Path(__file__).parent / "data"
MPSTAT = DATA / "mpstat"
PERF = DATA / "perf"
SVG_NS = "{http://www.w3.org/2000/svg}"

BURN_CPU = 1
IDLE_CPU = 0
BURNER_NAME = "nhb-burner"
# A Python busy loop that renames itself (through /proc/self/comm, which is what perf reports
# as the process name) so its samples are recognisable in the folded stacks.
BURNER_CODE = (
    f"open('/proc/self/comm', 'w').write({BURNER_NAME!r})\n"
    "def burn():\n"
    "    n = 0\n"
    "    while True:\n"
    "        n += 1\n"
    "burn()\n"
)


# -- parsing recorded mpstat output ------------------------------------------------------


def test_mpstat_json_recorded_on_this_vm() -> None:
    samples = parse_mpstat_json((MPSTAT / "vm-2cpu-sysstat12-json.json").read_text())
    assert samples.samples == 3
    assert sorted(samples.per_cpu) == [0, 1]
    # Values from the file: CPU 0 idle 96.08, 96.08, 98.02; CPU 1 idle 99.00, 100.00, 99.01.
    assert samples.per_cpu[0] == [3.92, 3.92, 1.98]
    assert samples.per_cpu[1] == [1.0, 0.0, 0.99]
    assert samples.mean_busy() == {0: 3.27, 1: 0.66}
    assert samples.overall == [2.48, 1.98, 1.49]


def test_mpstat_text_recorded_on_this_vm_ignores_average_lines() -> None:
    samples = parse_mpstat_text((MPSTAT / "vm-2cpu-sysstat12-text.txt").read_text())
    # Three intervals; the Average block would have made it four if it were read.
    assert samples.samples == 3
    assert samples.per_cpu[1] == [0.99, 0.0, 14.71]
    assert samples.mean_busy() == {0: 3.35, 1: 5.23}


def test_mpstat_truncated_json_keeps_complete_records() -> None:
    text = (MPSTAT / "vm-2cpu-sysstat12-json-truncated.json").read_text()
    with pytest.raises(ValueError):
        import json

        json.loads(text)
    samples = parse_mpstat(text)
    # The third sample lost its CPU 1 record; CPU 0 kept all three.
    assert len(samples.per_cpu[0]) == 3
    assert len(samples.per_cpu[1]) == 2
    assert samples.mean_busy()[0] == 3.27


def test_mpstat_many_cpus_with_12_hour_clock() -> None:
    samples = parse_mpstat((MPSTAT / "icx-144cpu-sysstat12-text-12h.txt").read_text())
    busy = samples.mean_busy()
    assert len(busy) == 144
    assert samples.samples == 2
    # CPU 5: idle 7.50 then 6.50.
    assert busy[5] == 93.0
    assert busy[0] == 1.0 and busy[1] == 0.0
    loads, missing = group_loads(busy, {"ingress": [5, 22, 77, 94], "nighthawk": [10, 11]})
    assert missing == {}
    assert [(g.name, g.busy_percent) for g in loads] == [
        ("ingress", round((93.0 + 91.5 + 93.5 + 90.5) / 4, 2)),
        ("nighthawk", 0.0),
    ]


def test_mpstat_decimal_commas_and_translated_summary() -> None:
    samples = parse_mpstat((MPSTAT / "de-4cpu-sysstat12-text-comma.txt").read_text())
    assert samples.samples == 2
    assert samples.mean_busy() == {0: 99.5, 1: 24.5, 2: 7.5, 3: 0.25}
    # The "Durchschn.:" summary line (all: idle 27,62) must not count as a third sample.
    assert samples.overall == [75.0, 69.75]


def test_mpstat_old_sysstat_column_after_idle() -> None:
    samples = parse_mpstat((MPSTAT / "rhel5-2cpu-sysstat7-text.txt").read_text())
    # %idle is read, not intr/s (the last column).
    assert samples.mean_busy() == {0: 97.0, 1: 3.0}


def test_mpstat_without_samples_is_an_error() -> None:
    banner_only = "Linux 6.1.0 (vm) \t11/21/26 \t_x86_64_\t(2 CPU)\n\n"
    with pytest.raises(ValueError):
        parse_mpstat(banner_only)
    with pytest.raises(ValueError):
        parse_mpstat('{"sysstat": {"hosts": [{"statistics": []}]}}')


def test_group_loads_reports_cpus_mpstat_did_not_see() -> None:
    loads, missing = group_loads({0: 10.0, 1: 30.0}, {"a": [0, 1], "b": [1, 9], "c": [8]})
    assert [g.busy_percent for g in loads] == [20.0, 30.0, None]
    assert missing == {"b": [9], "c": [8]}


# -- folding perf script output ----------------------------------------------------------


def test_fold_recorded_perf_script() -> None:
    with (PERF / "vm-cpu-clock.perf-script").open() as handle:
        folded = fold_perf_script(handle)
    text = (PERF / "vm-cpu-clock.perf-script").read_text()
    headers = [line for line in text.splitlines() if line and not line[0].isspace()]
    # Every sample is counted exactly once.
    assert sum(folded.values()) == len(headers) == 44
    idle = (
        "swapper;common_startup_64_[k];x86_64_start_kernel_[k];__pfx_clear_bss_[k];"
        "start_kernel_[k];rest_init_[k];cpu_startup_entry_[k];do_idle_[k];cpuidle_enter_[k];"
        "cpuidle_enter_state_[k];default_enter_idle_[k];default_idle_[k];"
        "pv_native_safe_halt_[k]"
    )
    assert folded[idle] == 19
    assert folded[f"{BURNER_NAME};[unknown];[unknown];_PyEval_EvalFrameDefault"] == 7
    assert sum(v for k, v in folded.items() if k.startswith(BURNER_NAME + ";")) == 20


def test_fold_handwritten_edge_cases() -> None:
    with (PERF / "handwritten-cpp.perf-script").open() as handle:
        folded = fold_perf_script(handle)
    assert folded == {
        "Web Content;__libc_start_call_main;main;"
        "std::vector<int, std::allocator<int> >::push_back(int const&)": 2,
        "Web Content;__libc_start_call_main;main;[libc.so.6]": 1,
        "envoy;Envoy::Network::ConnectionImpl::write(Envoy::Buffer::Instance&: bool);"
        "[unknown];tcp_sendmsg_[k]": 1,
        "envoy": 2,
    }


def test_folded_text_round_trip_and_order() -> None:
    counts = {"b;x y(int)": 2, "a;b": 5, "a": 1}
    text = format_folded(counts)
    assert text == "a 1\na;b 5\nb;x y(int) 2\n"
    assert parse_folded(text) == counts
    with pytest.raises(ValueError):
        parse_folded("no-count-here\n")


def test_parse_evlist() -> None:
    assert parse_evlist("cpu-clock:ppp\ndummy:HG\n") == "cpu-clock"
    assert parse_evlist("dummy:HG\ncycles:P\n") == "cycles"
    assert parse_evlist("") is None


# -- flame graph rendering ---------------------------------------------------------------


@dataclass
class Frame:
    name: str
    samples: int
    x: float
    y: float
    width: float
    fill: str
    label: str


def _frames(svg: str) -> list[Frame]:
    root = ET.fromstring(svg)
    frames = []
    for group in root.iter(f"{SVG_NS}g"):
        if group.get("class") != "f":
            continue
        title = group.find(f"{SVG_NS}title")
        rect = group.find(f"{SVG_NS}rect")
        text = group.find(f"{SVG_NS}text")
        assert title is not None and rect is not None
        frames.append(
            Frame(
                name=(title.text or "").rsplit(" (", 1)[0],
                samples=int(rect.get("data-samples", "0")),
                x=float(rect.get("x", "0")),
                y=float(rect.get("y", "0")),
                width=float(rect.get("width", "0")),
                fill=rect.get("fill", ""),
                label=(text.text or "") if text is not None else "",
            )
        )
    return frames


def test_flamegraph_widths_are_proportional_to_samples() -> None:
    folded = {"main;work;hot": 6, "main;work;cold": 2, "main;idle": 4, "other": 4}
    svg = render_flamegraph(folded, title="Known input", width=1220)
    frames = {f.name: f for f in _frames(svg)}
    assert set(frames) == {"all", "main", "work", "hot", "cold", "idle", "other"}
    per_sample = frames["all"].width / 16
    assert per_sample == pytest.approx(1200 / 16)
    for name, samples in [("main", 12), ("work", 8), ("hot", 6), ("cold", 2), ("other", 4)]:
        assert frames[name].samples == samples
        assert frames[name].width == pytest.approx(samples * per_sample, abs=0.01)
    # Children sit above their parent (smaller y), siblings side by side in name order.
    assert frames["work"].y < frames["main"].y < frames["all"].y
    assert frames["cold"].x < frames["hot"].x
    assert frames["main"].x < frames["other"].x
    assert frames["hot"].x == pytest.approx(frames["cold"].x + frames["cold"].width, abs=0.01)
    # Tooltips carry the count and the share.
    assert "hot (6 samples, 37.50%)" in svg


def test_flamegraph_is_deterministic_and_self_contained() -> None:
    folded = {"a;b;c": 3, "a;d": 1}
    first = render_flamegraph(folded, title="t")
    assert render_flamegraph(dict(reversed(list(folded.items()))), title="t") == first
    assert "<script" not in first
    assert "href" not in first
    # The colour of a frame depends on its name only, not on the graph it is in.
    other = render_flamegraph({"x;c": 5, "y": 1}, title="u")
    colour = {f.name: f.fill for f in _frames(first)}["c"]
    assert {f.name: f.fill for f in _frames(other)}["c"] == colour


def test_flamegraph_prunes_narrow_frames_and_truncates_labels() -> None:
    long_name = "a_function_name_that_is_much_too_long_to_fit_in_a_narrow_frame"
    folded = {f"root;{long_name}": 5_000, "root;tiny;above_tiny": 1, "root;rest": 95_000}
    frames = {f.name: f for f in _frames(render_flamegraph(folded, min_width=1.0))}
    # 1 of 100031 samples is 0.01 px wide: pruned together with what is above it.
    assert "tiny" not in frames and "above_tiny" not in frames
    label = frames[long_name].label
    assert label.endswith("..") and long_name.startswith(label[:-2])


def test_flamegraph_escapes_names_and_handles_no_samples() -> None:
    frames = _frames(render_flamegraph({"<main>;a&b": 2}))
    assert {f.name for f in frames} == {"all", "<main>", "a&b"}
    empty = render_flamegraph({})
    ET.fromstring(empty)
    assert "no samples" in empty


# -- real captures on this machine -------------------------------------------------------


def _burner(cpu: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(["taskset", "-c", str(cpu), sys.executable, "-c", BURNER_CODE])


def _proc_stat() -> dict[int, tuple[int, int]]:
    """(idle, total) jiffies per CPU from /proc/stat: the kernel's own counters, which mpstat
    reads too, so the test has an independent view of how busy each CPU was."""
    counters: dict[int, tuple[int, int]] = {}
    for line in Path("/proc/stat").read_text().splitlines():
        name, *fields = line.split()
        if name.startswith("cpu") and name[3:].isdigit():
            values = [int(v) for v in fields[:8]]  # guest time is already inside user time
            counters[int(name[3:])] = (values[3], sum(values))
    return counters


def _busy_between(before: tuple[int, int], after: tuple[int, int]) -> float:
    idle, total = after[0] - before[0], after[1] - before[1]
    return 100.0 * (1 - idle / total) if total else 0.0


def _process_cpu_seconds(pid: int) -> float:
    # utime and stime are fields 14 and 15 of /proc/PID/stat, after the "(comm)" field.
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Captured:
    result: CaptureResult
    step_dir: Path
    remote_tmp: Path
    perf_skip: str | None
    kernel_busy: dict[int, float]
    burner_share: float


@pytest.fixture(scope="module")
def burned_capture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Captured]:
    """One 3-second step with mpstat on every CPU and perf on the burned CPU while a busy
    loop runs pinned to it. Shared by the tests below to keep the module quick."""
    if (os.cpu_count() or 1) < 2 or shutil.which("taskset") is None:
        pytest.skip("needs 2 CPUs and taskset to burn one CPU and leave another idle")
    host = LocalHost()
    reasons = check_tools(host, CaptureSpec(mpstat=True, perf=False))
    if reasons:
        pytest.skip(f"mpstat unavailable: {reasons['mpstat']}")
    perf_skip = probe_perf(host).skip_reason
    spec = CaptureSpec(
        mpstat=True,
        watch_cpus={"burned": [BURN_CPU], "idle": [IDLE_CPU]},
        perf=perf_skip is None,
        perf_cpus=[BURN_CPU],
        perf_frequency=199,
    )
    base = tmp_path_factory.mktemp("capture")
    step_dir = base / "steps" / "001-rps100"
    remote_tmp = base / "host-tmp"
    remote_tmp.mkdir()
    burner = _burner(BURN_CPU)
    # The host's temporary directory goes under TMPDIR, which mktemp honours; pointing it
    # at a directory of our own lets the test check that nothing is left behind.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TMPDIR", str(remote_tmp))
        try:
            capture = StepCapture(host, spec, step_dir / "target")
            capture.start()
            before_stat, before_burner = _proc_stat(), _process_cpu_seconds(burner.pid)
            started = time.monotonic()
            time.sleep(3.5)
            elapsed = time.monotonic() - started
            after_stat, after_burner = _proc_stat(), _process_cpu_seconds(burner.pid)
            result = capture.stop()
        finally:
            burner.kill()
            burner.wait()
    kernel_busy = {
        cpu: _busy_between(before_stat[cpu], after_stat[cpu]) for cpu in (BURN_CPU, IDLE_CPU)
    }
    burner_share = 100.0 * (after_burner - before_burner) / elapsed
    yield Captured(result, step_dir, remote_tmp, perf_skip, kernel_busy, burner_share)


@pytest.mark.serial
def test_mpstat_capture_sees_the_burned_cpu(burned_capture: Captured) -> None:
    result = burned_capture.result
    assert "mpstat" not in result.skipped, result.skipped
    assert result.samples >= 2
    groups = {g.name: g.busy_percent for g in result.groups}
    burned, idle = groups["burned"], groups["idle"]
    assert burned is not None and idle is not None
    assert result.cpu_busy[BURN_CPU] == burned
    # The burned CPU was at least as busy as the busy loop kept it: the loop's own CPU time
    # (from /proc/PID/stat) is a lower bound of its CPU's load, whatever else ran. 0.8 leaves
    # room for the capture window and mpstat's 1 s intervals not being the same span.
    assert burned >= 0.8 * burned_capture.burner_share, (groups, burned_capture.burner_share)
    # Burned vs idle group: a ratio, not a threshold. It means something only when the other
    # CPU had room to be less busy; on a shared development machine other test runs can
    # saturate both CPUs, which the kernel's own counters over the same seconds show.
    other = burned_capture.kernel_busy[IDLE_CPU]
    if other > 60.0:
        pytest.skip(
            f"CPU {IDLE_CPU} was {other:.0f}% busy with other work during the capture "
            f"(per /proc/stat), so it cannot serve as the idle reference; mpstat said "
            f"{groups}"
        )
    assert burned >= 1.3 * idle, (groups, burned_capture.kernel_busy)


def test_capture_files_are_relative_to_the_step_directory(burned_capture: Captured) -> None:
    result = burned_capture.result
    assert result.mpstat_file == "target/mpstat.json"
    raw = (burned_capture.step_dir / result.mpstat_file).read_text()
    # The raw file is mpstat's own JSON, complete (mpstat closed it on SIGINT).
    import json

    assert json.loads(raw)["sysstat"]["hosts"][0]["statistics"]
    # The host's temporary directory was removed.
    assert list(burned_capture.remote_tmp.iterdir()) == []


def test_perf_capture_has_the_burner_and_a_valid_svg(burned_capture: Captured) -> None:
    if burned_capture.perf_skip:
        pytest.skip(f"perf unavailable here: {burned_capture.perf_skip}")
    result = burned_capture.result
    assert "perf" not in result.skipped and "flamegraph" not in result.skipped, result.skipped
    # This VM has no hardware PMU, so cpu-clock is expected here; on bare metal, cycles.
    assert result.perf_event in ("cycles", "cpu-clock")
    assert result.folded_file == "target/perf.folded"
    assert result.flamegraph_file == "target/flamegraph.svg"
    folded = parse_folded((burned_capture.step_dir / result.folded_file).read_text())
    burner = sum(count for stack, count in folded.items() if stack.split(";")[0] == BURNER_NAME)
    total = sum(folded.values())
    # perf recorded only the burned CPU, so the burner's share of the samples estimates its
    # share of that CPU's time, which /proc/PID/stat measured independently over the same
    # seconds (about 100 % on a quiet machine, less when other work shares the CPU). Half of
    # it is a wide margin for the two windows not being identical.
    expected = burned_capture.burner_share / 100 * total
    assert burner >= 0.5 * expected > 0, (burner, total, burned_capture.burner_share)
    svg = (burned_capture.step_dir / result.flamegraph_file).read_text()
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG_NS}svg"
    assert BURNER_NAME in {f.name for f in _frames(svg)}


# -- missing tools and missing rights, on hosts that really lack them ---------------------


class RestrictedPathHost(LocalHost):
    """This machine with a PATH that holds only a few basic tools.

    Uninstalling mpstat and perf to test their absence is not an option on a shared
    machine, so the commands run with PATH set to a directory of symlinks to the tools the
    capture code needs besides them (sh, mktemp, rm, cat, ...). `command -v mpstat` then
    really fails, exactly as on a host without sysstat.
    """

    name = "restricted-path"
    TOOLS = ("sh", "mktemp", "rm", "cat", "true", "uname")

    def __init__(self, bin_dir: Path) -> None:
        bin_dir.mkdir(parents=True, exist_ok=True)
        for tool in self.TOOLS:
            found = shutil.which(tool)
            assert found, tool
            link = bin_dir / tool
            if not link.exists():
                link.symlink_to(found)
        self.path = str(bin_dir)

    def _wrap(self, command: str) -> str:
        return f"PATH={self.path}; export PATH; {command}"

    def run(self, command: str, *, timeout: float = 60.0, sudo: bool = False) -> CommandResult:
        result = super().run(self._wrap(command), timeout=timeout, sudo=sudo)
        return CommandResult(command, result.exit_status, result.stdout, result.stderr)

    def start(self, command: str, *, sudo: bool = False):  # type: ignore[no-untyped-def]
        return super().start(self._wrap(command), sudo=sudo)


def test_missing_tools_are_skip_reasons(tmp_path: Path) -> None:
    host = RestrictedPathHost(tmp_path / "bin")
    spec = CaptureSpec(mpstat=True, perf=True, watch_cpus={"g": [0]})
    reasons = check_tools(host, spec)
    assert set(reasons) == {"mpstat", "perf"}
    assert "mpstat is not installed" in reasons["mpstat"]
    assert "perf is not installed" in reasons["perf"]
    # check_tools only looks at what the spec asks for.
    assert check_tools(host, CaptureSpec(mpstat=False, perf=False)) == {}

    capture = StepCapture(host, spec, tmp_path / "step" / "target")
    capture.start()
    result = capture.stop()
    assert result.skipped["mpstat"] == reasons["mpstat"]
    assert result.skipped["perf"] == reasons["perf"]
    assert result.mpstat_file is None and result.folded_file is None
    assert result.groups == [] and result.cpu_busy == {}
    assert capture.stop() is result


def test_install_tools_without_package_manager_does_not_raise(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The restricted PATH has no apt-get/dnf/yum/zypper/apk, so nothing can be installed:
    # that is logged, and the capture would then be skipped, never failed.
    host = RestrictedPathHost(tmp_path / "bin")
    with caplog.at_level(logging.WARNING, logger="nhbench.capture"):
        install_tools(host, CaptureSpec(mpstat=True, perf=True))
    assert "no known package manager" in caplog.text


class NobodyHost(LocalHost):
    """This machine as the unprivileged user ``nobody`` (through runuser, which needs root).

    `sudo=True` does what `LocalHost` does for a non-root user: ``sudo -n``, which fails
    without prompting (here sudo is either missing or nobody may not use it). So perf's
    rights check meets a real refusal.
    """

    name = "nobody@local"

    def _as_nobody(self, command: str, sudo: bool) -> str:
        inner = f"sudo -n sh -c {_quote(command)}" if sudo else command
        return f"runuser -u nobody -- sh -c {_quote(inner)}"

    def run(self, command: str, *, timeout: float = 60.0, sudo: bool = False) -> CommandResult:
        result = super().run(self._as_nobody(command, sudo), timeout=timeout)
        return CommandResult(command, result.exit_status, result.stdout, result.stderr)


def _quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


def test_perf_without_rights_is_a_clear_skip_reason() -> None:
    if os.geteuid() != 0 or shutil.which("runuser") is None:
        pytest.skip("needs root and runuser to act as the unprivileged user nobody")
    if shutil.which("perf") is None:
        pytest.skip("perf is not installed on this machine")
    paranoid = int(Path("/proc/sys/kernel/perf_event_paranoid").read_text())
    if paranoid <= 0:
        pytest.skip(f"perf_event_paranoid is {paranoid}: an unprivileged user may record")
    host = NobodyHost()
    as_nobody = host.run("true", sudo=True)
    if as_nobody.ok:
        pytest.skip("nobody can use sudo -n here")
    reasons = check_tools(host, CaptureSpec(mpstat=False, perf=True))
    assert reasons["perf"].startswith("perf needs root for CPU-wide recording")
    assert f"perf_event_paranoid is {paranoid}" in reasons["perf"]


class FetchFailsHost(LocalHost):
    """This machine, except that copying a file back fails, as it does when an SSH
    connection drops at the end of a step (which cannot be staged reliably here)."""

    name = "fetch-fails"

    def fetch(self, remote_path: str, local_path: Path) -> None:
        from nhbench._exceptions import HostError

        raise HostError(f"connection to {self.name} lost while copying {remote_path}")


def test_a_failing_host_costs_the_capture_not_the_step(tmp_path: Path) -> None:
    host = FetchFailsHost()
    if check_tools(host, CaptureSpec(mpstat=True, perf=False)):
        pytest.skip("mpstat is not installed here")
    remote_tmp = tmp_path / "host-tmp"
    remote_tmp.mkdir()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TMPDIR", str(remote_tmp))
        capture = StepCapture(host, CaptureSpec(mpstat=True, perf=False), tmp_path / "t")
        capture.start()
        time.sleep(1.2)
        result = capture.stop()
    assert "connection to fetch-fails lost" in result.skipped["mpstat"]
    assert result.mpstat_file is None
    # mpstat was stopped and the host's temporary directory removed all the same.
    assert list(remote_tmp.iterdir()) == []
