"""``nhbench calibrate``: the host measured for real (timer wake-ups in the C core, clock and
system call loops, the floor client against the test server) and the figures checked for
being sane and consistent with each other, never against a timing; the resolution formula on
fixed inputs; the calibration kept in a sweep's machine facts.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pytest

from nhbench import _calibrate, _core
from nhbench._calibrate import (
    STRATEGIES,
    CalibrationError,
    cpufreq,
    load_calibration,
    resolution_rows,
    steal_percent,
)
from nhbench.sweep import run_sweep
from tests.support.cli import nhbench_cli


@pytest.fixture(scope="module")
def calibration() -> dict[str, Any]:
    proc = nhbench_cli("calibrate", "--duration", "2", "--output", "json", timeout=120)
    assert proc.returncode == 0, proc.stderr
    data: dict[str, Any] = json.loads(proc.stdout)
    return data


def test_every_strategy_measured_and_ordered(calibration: dict[str, Any]) -> None:
    assert set(calibration["wakeups"]) == set(STRATEGIES)
    for name, w in calibration["wakeups"].items():
        # 2 s: a quarter each for the three strategies, 1.137 ms apart (at least 50).
        assert w["count"] >= 50, name
        assert 0 <= w["p50_us"] <= w["p99_us"] <= w["max_us"], (name, w)
        q = w["quantiles_us"]
        assert q["49"] <= q["51"] and q["98.5"] <= q["99.5"], (name, q)
        assert w["stddev_us"] >= 0 and w["mean_us"] <= w["max_us"] * 1.001, (name, w)
    # The millisecond timer rounds every wait up to a whole millisecond, and the wake-ups are
    # not a whole number of milliseconds apart, so half of its wake-ups are hundreds of
    # microseconds late; the timerfd's are late only by the wake-up itself. Medians, not
    # means: a loaded machine's occasional late wake-up of the timerfd moves its mean past
    # the timer's (seen once under load), not its median.
    assert calibration["wakeups"]["sleep"]["p50_us"] > calibration["wakeups"]["poll"]["p50_us"]


def test_clock_syscall_and_host_facts(calibration: dict[str, Any]) -> None:
    assert 0 < calibration["clock_read_ns"] < 10_000
    assert 0 < calibration["syscall_ns"] < 1_000_000
    host = calibration["host"]
    assert host["cpus"] == os.cpu_count()
    assert len(host["load_average"]) == 3
    assert host["clock_source"]["current"] == Path(
        "/sys/devices/system/clocksource/clocksource0/current_clocksource").read_text().strip()
    assert host["steal_percent"] is None or 0 <= host["steal_percent"] <= 100
    freq = host["cpufreq"]
    assert freq["exposed"] == bool(freq["governors"])
    assert freq["exposed"] or freq["reason"].startswith("not exposed")


def test_floor_and_resolution_consistent(calibration: dict[str, Any]) -> None:
    floor = calibration["floor"]
    if not floor["available"]:
        pytest.skip(f"no floor: {floor['reason']}")
    assert floor["requests"] > 0 and floor["connections"] == 1
    assert floor["rtt_us"] == pytest.approx(floor["duration_s"] / floor["requests"] * 1e6)
    assert floor["rps"] == pytest.approx(1e6 / floor["rtt_us"])
    res = calibration["resolution"]
    assert res["rate"] == pytest.approx(floor["rps"]) and res["strategy"] == "poll"
    rows = res["rows"]
    assert [r["seconds"] for r in rows] == list(_calibrate.RUN_LENGTHS)
    for a, b in zip(rows, rows[1:], strict=False):
        assert b["samples"] > a["samples"]
        # Longer runs never resolve less.
        for key in ("mean_us", "p50_us", "p99_us"):
            assert b[key] <= a[key], key
    bound = calibration["clock_read_ns"] / 1e3
    assert all(r[k] >= bound for r in rows for k in ("mean_us", "p50_us", "p99_us"))


def test_human_report_lists_every_part() -> None:
    proc = nhbench_cli("calibrate", "--duration", "0.6", "--no-floor", "--rate", "1000")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for strategy in STRATEGIES:
        assert f"\n  {strategy} " in out
    assert "clock source" in out and "system call" in out
    assert "Loopback request floor: not measured: skipped (--no-floor)" in out
    assert "at 1000 samples/s, --rate" in out
    assert "\n     300s     300000 " in out


@pytest.mark.parametrize(("args", "message"), [
    (("--duration", "0"), "--duration: must be above 0"),
    (("--duration", "ten"), "--duration: must be a number"),
    (("--duration", "nan"), "--duration: must be above 0"),
    (("--rate", "-5"), "--rate: must be above 0"),
    (("--output", "xml"), "--output: must be human or json"),
    (("--floor-client", "/nonexistent/request_floor"), "--floor-client: no such file"),
])
def test_bad_input_refused_by_name(args: tuple[str, ...], message: str) -> None:
    proc = nhbench_cli("calibrate", *args)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and message in proc.stderr, proc.stderr


def test_core_entry_refuses_bad_arguments() -> None:
    with pytest.raises(ValueError, match="strategy must be poll, spin or sleep"):
        _core.calibrate_wakeups("busy", 10, 1_000_000)
    with pytest.raises(RuntimeError, match="EINVAL"):
        _core.calibrate_wakeups("poll", 0, 1_000_000)
    # Ten poll wake-ups 1 ms apart: exactly ten recorded.
    assert _core.calibrate_wakeups("poll", 10, 1_000_000)["count"] == 10


def _wakeup(stddev: float, q: dict[str, float]) -> dict[str, Any]:
    return {"stddev_us": stddev, "quantiles_us": q}


def test_resolution_formula() -> None:
    """δ scales as 1/√n; the p99 term is driven by the tail's spread; the bounds apply."""
    w = _wakeup(10.0, {"49": 50.0, "51": 52.0, "98.5": 100.0, "99.5": 140.0})
    rows = resolution_rows(w, 1000.0, 0.0, None, lengths=(1.0, 4.0))
    assert rows[0]["samples"] == 1000 and rows[1]["samples"] == 4000
    for key in ("mean_us", "p50_us", "p99_us"):
        assert rows[1][key] == pytest.approx(rows[0][key] / 2)
    z = _calibrate.Z_TOTAL
    assert rows[0]["mean_us"] == pytest.approx(z * 10.0 * math.sqrt(2 / 1000))
    # p99: √(0.99·0.01/n) · (140-100)/0.01, times z·√2.
    assert rows[0]["p99_us"] == pytest.approx(
        z * math.sqrt(2) * math.sqrt(0.99 * 0.01 / 1000) * 40.0 / 0.01)
    # The clock read's cost and the histogram's precision at the floor round trip bound it.
    bounded = resolution_rows(_wakeup(0.0, dict.fromkeys(("49", "51", "98.5", "99.5"), 5.0)),
                              1000.0, 0.02, 50.0, lengths=(10.0,))
    assert bounded[0]["mean_us"] == bounded[0]["p99_us"] == pytest.approx(0.05)
    # Below two samples a run resolves nothing: no row.
    assert resolution_rows(w, 1.0, 0.0, None, lengths=(1.0,)) == []


def test_steal_and_cpufreq_readers(tmp_path: Path) -> None:
    before = [100, 0, 50, 800, 0, 0, 0, 50, 0, 0]
    after = [200, 0, 100, 1600, 0, 0, 0, 100, 0, 0]
    assert steal_percent(before, after) == pytest.approx(100 * 50 / 1000)
    assert steal_percent(None, after) is None
    assert steal_percent([1, 2, 3, 4], [1, 2, 3, 4]) is None  # an old kernel: no steal column
    assert cpufreq(tmp_path)["reason"] == "not exposed (no cpufreq in sysfs)"
    for n, (gov, lo, hi) in enumerate([("performance", 800000, 3500000),
                                        ("performance", 800000, 3500000),
                                        ("powersave", 800000, 2000000)]):
        d = tmp_path / "cpu" / f"cpu{n}" / "cpufreq"
        d.mkdir(parents=True)
        (d / "scaling_governor").write_text(gov + "\n")
        (d / "scaling_min_freq").write_text(f"{lo}\n")
        (d / "scaling_max_freq").write_text(f"{hi}\n")
    facts = cpufreq(tmp_path)
    assert facts["governors"] == "2x performance, 1x powersave"
    assert facts["min_frequency"] == "3x 800 MHz"
    assert facts["max_frequency"] == "1x 2000 MHz, 2x 3500 MHz"


def test_load_calibration_refuses_other_files(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"version": 99}')
    with pytest.raises(CalibrationError, match="is not an nhbench calibrate JSON"):
        load_calibration(bad)
    bad.write_text("not json")
    with pytest.raises(CalibrationError, match="cannot read calibration"):
        load_calibration(bad)


def test_sweep_keeps_a_saved_calibration_in_the_facts(
        tmp_path: Path, calibration: dict[str, Any]) -> None:
    saved = tmp_path / "calibration.json"
    saved.write_text(json.dumps(calibration))
    out = tmp_path / "campaign"
    run_sweep("embedded", out=out, steps="50", duration="0.5s", captures=False, facts=False,
              reports=True, calibration=str(saved))
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["facts"]["loadgen"]["calibration"] == calibration
    # The reports show its headline figures with the machine's other facts.
    poll = calibration["wakeups"]["poll"]
    line = f"{poll['p50_us']:.3g} / {poll['p99_us']:.3g} / {poll['max_us']:.3g} µs"
    for report in ("report.txt", "report.html"):
        text = (out / report).read_text()
        assert "Wake-up poll p50/p99/max" in text and line in text, report
    # Kept out of the settings a resume compares: a resumed campaign keeps its facts.
    assert "calibration" not in manifest["settings"]


def test_sweep_without_calibration_has_none(tmp_path: Path) -> None:
    out = tmp_path / "campaign"
    run_sweep("embedded", out=out, steps="50", duration="0.5s", captures=False, facts=False,
              reports=False)
    manifest = json.loads((out / "manifest.json").read_text())
    assert "loadgen" not in manifest["facts"]


def test_adapt_calibrate_measures_and_stores(tmp_path: Path) -> None:
    out = tmp_path / "campaign"
    proc = nhbench_cli("adapt", "embedded", "--slo", "p99<1s", "--min-rps", "50",
                       "--max-rps", "50", "--duration", "0.5s", "--max-steps", "1",
                       "--calibrate", "--out", str(out), timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert "calibrating this machine" in proc.stderr
    facts = json.loads((out / "manifest.json").read_text())["facts"]["loadgen"]
    cal = facts["calibration"]
    assert set(cal["wakeups"]) == set(STRATEGIES) and cal["clock_read_ns"] > 0
    assert facts["cpus"] == os.cpu_count()  # the ordinary facts are still there


@pytest.mark.parametrize(("args", "message"), [
    (("--calibrate", "--calibration", "x.json"), "--calibrate and --calibration FILE"),
    (("--calibration", "/nonexistent/cal.json"), "--calibration: cannot read calibration"),
])
def test_sweep_calibration_flags_refused(tmp_path: Path, args: tuple[str, ...],
                                         message: str) -> None:
    out = tmp_path / "campaign"
    proc = nhbench_cli("sweep", "embedded", "--steps", "50", "--duration", "0.5s",
                       "--out", str(out), *args)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert not out.exists()
