"""perf stat per sweep step: the ``-x,`` parser on captured and documented outputs, the
counts per CPU group with IPC, real perf on this machine, and a sweep end to end.

Outputs in tests/data/perfstat (origins in its README.md). Hardware events are counted
only where this machine's perf can (its development VM has no PMU); that part skips with
the reason otherwise, and the rest (software events, unknown columns) runs everywhere
perf may count CPU-wide.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support.cli import nhbench_cli

from nhbench.campaign import load_campaign
from nhbench.capture import (
    ALL_CPUS_GROUP,
    CaptureSpec,
    PerfCount,
    StepCapture,
    format_count,
    group_counts,
    parse_perf_stat,
    refused_perf_events,
)
from nhbench.capture._perf import probe_perf
from nhbench.hosts import LocalHost

DATA = Path(__file__).parent / "data" / "perfstat"
DEFAULT = ["cycles", "instructions", "cache-misses", "branch-misses", "context-switches"]


def _read(name: str) -> str:
    return (DATA / name).read_text()


# -- the parser ------------------------------------------------------------------------------


def test_per_cpu_capture_from_this_vm() -> None:
    lines = parse_perf_stat(_read("vm-2cpu-per-cpu.csv"))
    # 7 events x 2 CPUs; the "# started on" header and blank line are not counter lines.
    assert len(lines) == 14
    by = {(line.event, line.cpu): line for line in lines}
    assert by[("context-switches", 0)].value == 1421
    assert by[("context-switches", 1)].value == 948
    assert by[("task-clock", 1)].value == pytest.approx(1171.32)
    assert by[("task-clock", 1)].unit == "msec"
    assert by[("sched:sched_switch", 0)].value == 1417
    cycles = by[("cycles", 0)]
    assert cycles.value is None and cycles.unknown == "not supported"
    assert by[("context-switches", 0)].running_percent == 100.0


def test_aggregated_interval_and_per_socket_captures() -> None:
    aggregated = parse_perf_stat(_read("vm-2cpu-all.csv"))
    assert [(line.event, line.cpu) for line in aggregated][-2:] == [
        ("context-switches", None), ("task-clock", None)]
    assert aggregated[-2].value == 3458
    interval = parse_perf_stat(_read("vm-2cpu-interval.csv"))
    switches = [line for line in interval if line.event == "context-switches"]
    assert [line.cpu for line in switches] == [0, 1] * 3
    assert switches[0].interval == pytest.approx(0.500233555)
    assert sum(line.value or 0 for line in switches if line.cpu == 0) == 948 + 1039 + 281
    socket = parse_perf_stat(_read("vm-2cpu-per-socket.csv"))
    # "S0,2,416.73,msec,cpu-clock": the 2 is the CPU count, not the value.
    assert [(line.event, line.value, line.unit) for line in socket] == [
        ("cpu-clock", 416.73, "msec"), ("page-faults", 4244, ""),
        ("cycles", None, "")]


def test_documented_hybrid_events_add_up_per_event() -> None:
    # perf-stat(1): "cycles" on a hybrid CPU is counted by both PMUs.
    lines = parse_perf_stat(_read("perf-man-hybrid-system-wide.csv"))
    (group,) = group_counts(lines, ["cycles"], {})
    assert group.name == ALL_CPUS_GROUP and group.cpus is None
    assert group.counts["cycles"].value == 6_744_979 + 1_965_552
    assert group.counts["cycles"].running_percent is None
    thread = parse_perf_stat(_read("perf-man-hybrid-thread.csv"))
    (group,) = group_counts(thread, ["cycles"], {})
    count = group.counts["cycles"]
    assert count.value == 233_066_666 + 604_097_080
    # The least-counted part rules: the count is an estimate scaled from 0.43% of the time.
    assert count.running_percent == pytest.approx(0.43)
    assert format_count(count) == "~837 M (0.43%)"


def test_metric_only_lines_are_skipped_and_garbage_is_named() -> None:
    text = "# started on x\n\n1000,,cycles,5,100.00,,\n,,,,,0.50,insn per cycle\n"
    assert [line.event for line in parse_perf_stat(text)] == ["cycles"]
    with pytest.raises(ValueError, match="line 2 is not a counter line"):
        parse_perf_stat("1000,,cycles,5,100.00,,\nPerformance counter stats for 'x'\n")


# -- groups, IPC, texts ------------------------------------------------------------------------


def test_groups_sum_their_own_cpus_and_unknown_is_never_zero() -> None:
    lines = parse_perf_stat(_read("vm-2cpu-per-cpu.csv"))
    groups = {group.name: group for group in group_counts(
        lines, [*DEFAULT, "task-clock"], {"a": [0], "both": [0, 1], "far": [1, 5]})}
    assert groups["a"].counts["context-switches"].value == 1421
    assert groups["both"].counts["context-switches"].value == 1421 + 948
    for name in ("cycles", "instructions", "cache-misses", "branch-misses"):
        count = groups["both"].counts[name]
        assert count.value is None and count.unknown == "not supported"
    assert groups["both"].ipc is None
    assert groups["both"].ipc_unknown == "cycles and instructions not supported"
    # A CPU perf did not report (beyond the host's two) makes the group's count unknown,
    # naming the CPU, rather than the sum of the CPUs that were there.
    far = groups["far"].counts["context-switches"]
    assert far.value is None and far.unknown == "not in perf's output on CPU 5"


def test_ipc_from_counted_hardware_events() -> None:
    text = ("CPU2,3000000,,cycles,1000,100.00,,\nCPU3,1000000,,cycles,1000,100.00,,\n"
            "CPU2,6000000,,instructions,1000,100.00,,\nCPU3,500000,,instructions,1000,50.00,,\n"
            "CPU2,<not counted>,,cache-misses,0,0.00,,\nCPU3,12,,cache-misses,1000,100.00,,\n")
    groups = {group.name: group for group in group_counts(
        parse_perf_stat(text), DEFAULT, {"two": [2], "pair": [2, 3]})}
    assert groups["two"].ipc == pytest.approx(2.0)
    assert groups["pair"].ipc == pytest.approx(6_500_000 / 4_000_000)
    assert groups["pair"].counts["instructions"].running_percent == 50.0
    assert groups["pair"].counts["cache-misses"].unknown == "not counted on CPU 2"
    assert groups["two"].counts["context-switches"].unknown == "not in perf's output"


def test_format_count() -> None:
    assert format_count(PerfCount(value=1234567.0, running_percent=100.0)) == "1.23 M"
    assert format_count(PerfCount(value=950.0)) == "950"
    assert format_count(PerfCount(value=2350.38, unit="msec")) == "2.35 CPU-s"
    assert format_count(PerfCount(unknown="not supported")) == "unknown (not supported)"
    assert format_count(None) == "-"


# -- real perf on this machine ---------------------------------------------------------------


def _perf_or_skip(host: LocalHost) -> None:
    reason = probe_perf(host).skip_reason
    if reason:
        pytest.skip(f"perf cannot count CPU-wide here: {reason}")


def _hardware_counts(host: LocalHost) -> str | None:
    """None when perf counts hardware cycles here, else why not."""
    result = host.run("perf stat -x, -e cycles -- true", sudo=True)
    value = next((line.split(",")[0] for line in result.stderr.splitlines()
                  if ",cycles" in line), "")
    return None if value.isdigit() else f"perf stat -e cycles prints {value or result.stderr!r}"


SWITCHER = """
import sys, time
n = int(sys.argv[1])
for _ in range(n):
    time.sleep(0.0002)
print(n)
"""


def _capture_switches(tmp_path: Path, spec: CaptureSpec, cpu: int, sleeps: int) -> tuple:
    host = LocalHost()
    capture = StepCapture(host, spec, tmp_path / "step" / "target")
    capture.start()
    time.sleep(0.3)  # perf stat has opened its counters
    done = subprocess.run(["taskset", "-c", str(cpu), sys.executable, "-c", SWITCHER,
                           str(sleeps)], check=True, capture_output=True, text=True)
    assert int(done.stdout) == sleeps
    return capture.stop(), tmp_path / "step"


@pytest.mark.serial
def test_perf_stat_counts_context_switches_on_the_watched_cpu(tmp_path: Path) -> None:
    host = LocalHost()
    _perf_or_skip(host)
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two CPUs")
    busy, other = cpus[-1], cpus[0]
    sleeps = 2000
    spec = CaptureSpec(mpstat=False, perf_stat=True, perf_events=["task-clock"],
                       watch_cpus={"switcher": [busy], "both": [other, busy]})
    result, step = _capture_switches(tmp_path, spec, busy, sleeps)
    assert "perf stat" not in result.skipped, result.skipped
    stat = result.perf_stat
    assert stat is not None and stat.file == "target/perf-stat.csv"
    raw = (step / stat.file).read_text()
    groups = {group.name: group for group in stat.groups}
    switches = groups["switcher"].counts["context-switches"].value
    # Each sleep leaves the CPU and comes back: at least one switch per sleep on that CPU.
    assert switches is not None and switches >= sleeps
    # The wider group is the sum of its CPUs' lines in the raw file, which is kept as is.
    per_cpu = {line.cpu: line.value for line in parse_perf_stat(raw)
               if line.event == "context-switches"}
    assert groups["both"].counts["context-switches"].value == per_cpu[busy] + per_cpu[other]
    assert groups["switcher"].counts["task-clock"].unit == "msec"
    hardware = _hardware_counts(host)
    cycles = groups["switcher"].counts["cycles"]
    if hardware is None:
        assert cycles.value and cycles.value > 0
        assert groups["switcher"].ipc is not None and 0 < groups["switcher"].ipc < 10
    else:
        # No PMU: unknown with perf's reason, never a count of 0.
        assert cycles.value is None and cycles.unknown, cycles
        assert groups["switcher"].ipc is None and groups["switcher"].ipc_unknown


@pytest.mark.serial
def test_perf_stat_counts_hardware_events_where_perf_can(tmp_path: Path) -> None:
    host = LocalHost()
    _perf_or_skip(host)
    reason = _hardware_counts(host)
    if reason:
        pytest.skip(f"this machine's perf counts no hardware events ({reason}): "
                    "a virtual machine without a PMU")
    cpu = max(os.sched_getaffinity(0))
    spec = CaptureSpec(mpstat=False, perf_stat=True, watch_cpus={"w": [cpu]})
    result, _ = _capture_switches(tmp_path, spec, cpu, 500)
    assert result.perf_stat is not None
    (group,) = result.perf_stat.groups
    for event in ("cycles", "instructions"):
        assert (group.counts[event].value or 0) > 0, group.counts[event]
    assert group.ipc is not None and 0 < group.ipc < 10


def test_perf_rejects_an_unknown_event_by_name() -> None:
    host = LocalHost()
    _perf_or_skip(host)
    spec = CaptureSpec(mpstat=False, perf_stat=True,
                       perf_events=["context-switches", "no-such-event-xyz"])
    refused = refused_perf_events(host, spec)
    assert list(refused) == ["no-such-event-xyz"]
    assert "event syntax error" in refused["no-such-event-xyz"]


# -- options and the sweep end to end ------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--perf-event", "cycles"], "--perf-event: only meaningful with --perf-stat"),
        (["--perf-stat", "--perf-event", "cycles,instructions"], "one event per --perf-event"),
        (["--perf-stat", "--perf-event", "cycles x"], "is not a perf event name"),
    ],
)
def test_bad_perf_event_options_are_refused(tmp_path: Path, args: list[str],
                                            needle: str) -> None:
    out = tmp_path / "campaign"
    done = nhbench_cli("sweep", "embedded", "--rps", "10", "--duration", "1s", "--out",
                       str(out), *args)
    assert done.returncode == 2, done.stderr
    assert needle in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not out.exists()


def test_an_event_perf_rejects_fails_the_sweep_before_any_step(tmp_path: Path) -> None:
    _perf_or_skip(LocalHost())
    out = tmp_path / "campaign"
    done = nhbench_cli("sweep", "embedded", "--rps", "10", "--duration", "1s", "--out",
                       str(out), "--perf-stat", "--perf-event", "no-such-event-xyz")
    assert done.returncode == 2, done.stderr
    assert "--perf-event 'no-such-event-xyz': perf on local rejects it" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not out.exists()


@pytest.mark.serial
def test_sweep_with_perf_stat_end_to_end(tmp_path: Path) -> None:
    _perf_or_skip(LocalHost())
    out = tmp_path / "campaign"
    cpus = sorted(os.sched_getaffinity(0))
    done = nhbench_cli(
        "sweep", "embedded", "--steps", "50,100", "--duration", "1s", "--out", str(out),
        "--perf-stat", "--perf-event", "task-clock", "--no-mpstat",
        "--watch-cpus", f"first={cpus[0]}", "--watch-cpus", f"all2={','.join(map(str, cpus))}",
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    campaign = load_campaign(out)
    assert [step.index for step in campaign.steps] == [1, 2]
    hardware = _hardware_counts(LocalHost())
    for step in campaign.steps:
        capture = step.target_capture
        assert capture is not None and capture.perf_stat is not None, step
        assert (out / step.directory / "target" / "perf-stat.csv").is_file()
        groups = {group.name: group for group in capture.perf_stat.groups}
        assert list(groups) == ["first", "all2"]
        assert capture.perf_stat.events == [*DEFAULT, "task-clock"]
        # The load ran for the step: the CPUs switched tasks.
        assert (groups["all2"].counts["context-switches"].value or 0) > 0
    with (out / "results.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 2
    for row, step in zip(rows, campaign.steps, strict=True):
        stat = step.target_capture.perf_stat  # type: ignore[union-attr]
        group = stat.groups[1]  # type: ignore[union-attr]
        assert float(row["perf_all2_context-switches"]) == \
            group.counts["context-switches"].value
        assert float(row["perf_all2_task-clock"]) == pytest.approx(
            group.counts["task-clock"].value)
        if hardware is not None:
            assert row["perf_first_cycles"].startswith("unknown (")
            assert row["perf_first_ipc"].startswith("unknown (")
        else:
            assert float(row["perf_first_ipc"]) > 0
    report = (out / "report.txt").read_text()
    assert "perf stat (target)" in report
    assert "first IPC" in report and "all2 IPC" in report
    html = (out / "report.html").read_text()
    assert "<h2>perf stat (target)</h2>" in html
    assert 'href="steps/001-rps50/target/perf-stat.csv"' in html
    frame_columns = set(campaign.to_dataframe().columns) if _has_pandas() else set()
    if frame_columns:
        assert "perf_all2_context-switches" in frame_columns
    # The manifest keeps everything: a report rendered again from it says the same.
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["target_capture"]["perf_stat"] is True
    (out / "report.txt").unlink()
    again = nhbench_cli("report", str(out))
    assert again.returncode == 0, again.stderr
    assert (out / "report.txt").read_text() == report


def _has_pandas() -> bool:
    try:
        import pandas  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.serial
def test_perf_stat_over_ssh(sshd: Any, tmp_path: Path) -> None:
    """The target reached through the `sshd` fixture (this machine, as the test's user):
    the event check, perf stat's start and stop by SIGINT and the file read back all go
    through the SSH host."""
    _perf_or_skip(LocalHost())
    ssh = ["--ssh", sshd.address, "--ssh-key", str(sshd.user_key),
           "--ssh-known-hosts", str(sshd.known_hosts)]
    env = {"SSH_AUTH_SOCK": ""}
    refused = nhbench_cli("sweep", "embedded", "--rps", "10", "--duration", "1s", "--out",
                          str(tmp_path / "refused"), *ssh, "--perf-stat", "--perf-event",
                          "no-such-event-xyz", env=env)
    assert refused.returncode == 2, refused.stderr
    assert f"perf on {sshd.address} rejects it" in refused.stderr
    assert not (tmp_path / "refused").exists()
    out = tmp_path / "campaign"
    cpu = max(os.sched_getaffinity(0))
    done = nhbench_cli("sweep", "embedded", "--steps", "20,40", "--duration", "1s", "--out",
                       str(out), *ssh, "--perf-stat", "--no-mpstat", "--watch-cpus",
                       f"server={cpu}", env=env, timeout=180)
    assert done.returncode == 0, done.stderr
    campaign = load_campaign(out)
    for step in campaign.steps:
        capture = step.target_capture
        assert capture is not None and capture.host == sshd.address
        if "perf stat" in capture.skipped:
            pytest.skip(f"perf stat over SSH: {capture.skipped['perf stat']}")
        assert capture.perf_stat is not None and capture.perf_stat.file
        raw = (out / step.directory / capture.perf_stat.file).read_text()
        expected = sum(line.value or 0 for line in parse_perf_stat(raw)
                       if line.event == "context-switches" and line.cpu == cpu)
        (group,) = capture.perf_stat.groups
        assert group.counts["context-switches"].value == expected > 0
