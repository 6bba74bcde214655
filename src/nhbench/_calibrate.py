"""``nhbench calibrate``: how far a measurement on this host can be trusted (docs/trust.md,
"Calibrating the host").

What is measured, and where:

* timer wake-up lateness for each of the sequencer's idle strategies (poll, spin, sleep), in
  the C core with the sequencer's own mechanisms (``_core.calibrate_wakeups``, the GIL
  released), into an HDR histogram: p50, p99, max;
* the cost of one clock read (the core's CLOCK_MONOTONIC) and of one trivial system call, in
  C loops;
* the loopback request floor: the project's floor client (``benchmarks/floor/``, built with
  the system cc by its own ``build.py``) against nhbench's test server on one keep-alive
  connection: the round trip no client can beat here;
* the clock source, CPU frequency scaling (cpufreq governor, min, max), steal time over the
  calibration (``/proc/stat``), CPU count and load average, read from /proc and /sys.

From these, `resolution` says the smallest latency difference a run of a given length can
resolve (`resolution_rows`, the formula in its doc and in docs/trust.md).
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from . import _core
from ._exceptions import CalibrationError
from ._histogram import from_sparse, summary_from_core
from ._server import TestServer

__all__ = [
    "CALIBRATION_VERSION",
    "RUN_LENGTHS",
    "STRATEGIES",
    "CalibrationError",
    "calibrate",
    "load_calibration",
    "resolution_rows",
]

#: The shape of the calibrate JSON; a reader refuses another.
CALIBRATION_VERSION = 1
#: The sequencer's idle strategies, in the order they are measured and printed.
STRATEGIES = ("poll", "spin", "sleep")
#: Run lengths (s) the resolution table is given for.
RUN_LENGTHS = (1.0, 10.0, 60.0, 300.0)
#: z(0.975) + z(0.80): a two-sided test at 95 % confidence with 80 % power.
Z_TOTAL = 1.959964 + 0.841621
#: Wake-ups are this far apart: not a whole number of milliseconds, so that the 'sleep'
#: strategy's millisecond rounding shows its real cost instead of landing on its own grid.
WAKEUP_INTERVAL_NS = 1_137_000
#: The histogram's relative precision (3 significant digits): no difference below this
#: share of the latency itself can be resolved, whatever the sample count.
HIST_RELATIVE_PRECISION = 1e-3
_CLOCK_ITERATIONS = 2_000_000
_SYSCALL_ITERATIONS = 200_000
_SYS = Path("/sys/devices/system")


# --------------------------------------------------------------------------------------------
# Host facts from /proc and /sys
# --------------------------------------------------------------------------------------------


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _grouped(values: Sequence[str]) -> str:
    """'2x performance' / '1x 800 MHz, 1x 1000 MHz': every CPU's value, grouped."""
    counts: dict[str, int] = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    return ", ".join(f"{n}x {v}" for v, n in sorted(counts.items()))


def cpufreq(sys_root: Path = _SYS) -> dict[str, Any]:
    """Governor, min and max scaling frequency of every CPU that exposes cpufreq, grouped;
    ``{"exposed": False, ...}`` where none does (virtual machines, mostly)."""
    governors: list[str] = []
    mins: list[str] = []
    maxs: list[str] = []
    for cpu in sorted((sys_root / "cpu").glob("cpu[0-9]*")):
        gov = _read(cpu / "cpufreq" / "scaling_governor")
        if gov is None:
            continue
        governors.append(gov)
        for name, out in (("scaling_min_freq", mins), ("scaling_max_freq", maxs)):
            khz = _read(cpu / "cpufreq" / name)
            if khz and khz.isdigit():
                out.append(f"{int(khz) // 1000} MHz")
    if not governors:
        return {"exposed": False, "governors": None, "min_frequency": None,
                "max_frequency": None, "reason": "not exposed (no cpufreq in sysfs)"}
    return {"exposed": True, "governors": _grouped(governors),
            "min_frequency": _grouped(mins) or None, "max_frequency": _grouped(maxs) or None,
            "reason": None}


def clock_source(sys_root: Path = _SYS) -> dict[str, Any]:
    base = sys_root / "clocksource" / "clocksource0"
    available = _read(base / "available_clocksource")
    return {"current": _read(base / "current_clocksource") or "not exposed",
            "available": available.split() if available else []}


def _cpu_times() -> list[int] | None:
    """The aggregate 'cpu' line of /proc/stat (user nice system idle iowait irq softirq
    steal ...), in clock ticks."""
    text = _read(Path("/proc/stat"))
    if not text:
        return None
    for line in text.splitlines():
        if line.startswith("cpu "):
            return [int(x) for x in line.split()[1:]]
    return None


def steal_percent(before: list[int] | None, after: list[int] | None) -> float | None:
    """Share of all CPU time (all CPUs) stolen by the hypervisor between two /proc/stat
    readings; None where the kernel does not report steal."""
    if not before or not after or len(before) < 8 or len(after) < 8:
        return None
    # guest and guest_nice (fields 9-10) are already counted in user and nice.
    total = sum(after[:8]) - sum(before[:8])
    return 100.0 * (after[7] - before[7]) / total if total > 0 else 0.0


# --------------------------------------------------------------------------------------------
# Measurements
# --------------------------------------------------------------------------------------------


def _wakeups(strategy: str, seconds: float) -> dict[str, Any]:
    count = max(50, int(seconds * 1e9 / WAKEUP_INTERVAL_NS))
    d = _core.calibrate_wakeups(strategy, count, WAKEUP_INTERVAL_NS)
    hist = from_sparse(d["counts"])
    s = summary_from_core(d)

    def q(p: float) -> float:
        return int(hist.get_value_at_percentile(p)) / 1e3

    return {
        "interval_us": WAKEUP_INTERVAL_NS / 1e3,
        "count": s.count,
        "p50_us": q(50.0), "p99_us": q(99.0), "max_us": s.max / 1e3,
        "mean_us": s.mean / 1e3, "stddev_us": s.pstdev / 1e3,
        # Quantiles around p50 and p99 for the density the resolution formula needs.
        "quantiles_us": {f"{p:g}": q(p) for p in (49.0, 51.0, 98.5, 99.5)},
    }


def _floor_build_module() -> Any:
    """benchmarks/floor/build.py of the source checkout this package runs from, or None."""
    build_py = Path(__file__).resolve().parents[2] / "benchmarks" / "floor" / "build.py"
    if not build_py.is_file():
        return None
    spec = importlib.util.spec_from_file_location("_nhbench_floor_build", build_py)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def find_floor_client() -> tuple[Path | None, str | None]:
    """(the request_floor binary, None) or (None, why not): built on demand from the
    checkout's benchmarks/floor/ (it is a benchmark tool, not part of the package)."""
    build = _floor_build_module()
    if build is None:
        return None, ("the floor client is a benchmark tool of the source checkout "
                      "(benchmarks/floor/); pass --floor-client PATH")
    try:
        return Path(build.build("request_floor")), None
    except (build.BuildError, OSError, subprocess.CalledProcessError) as exc:
        return None, f"the floor client could not be built: {exc}"


def request_floor(seconds: float, client: Path) -> dict[str, Any]:
    """The floor client on one keep-alive connection against the test server (64-byte
    bodies, one worker): its round trip is the least latency a request can have here."""
    with TestServer(response_body_size=64, workers=1) as server:
        port = str(server.address[1])
        proc = subprocess.run(
            [str(client), "--host", "127.0.0.1", "--port", port, "--connections", "1",
             "--duration", f"{seconds:g}"],
            capture_output=True, text=True, timeout=seconds + 30, check=False)
    if proc.returncode != 0:
        raise CalibrationError(f"the floor client failed: {proc.stderr.strip()[:200]}")
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    requests, duration = int(data["requests"]), float(data["duration"])
    if requests <= 0 or duration <= 0:
        raise CalibrationError("the floor client completed no request")
    return {
        "available": True, "client": str(client), "connections": 1,
        "requests": requests, "duration_s": duration,
        "rtt_us": duration / requests * 1e6, "rps": requests / duration,
        "cpu_us_per_request": float(data["cpu_s"]) / requests * 1e6, "reason": None,
    }


# --------------------------------------------------------------------------------------------
# Resolution
# --------------------------------------------------------------------------------------------


def _quantile_se(p: float, n: float, lo: float, hi: float, h: float) -> float:
    """Standard error of the sample p-quantile of n independent samples, with the density at
    the quantile estimated as 2h / (q(p+h) - q(p-h)) from the wake-up distribution."""
    spread = max(hi - lo, 0.0)
    return math.sqrt(p * (1 - p) / n) * spread / (2 * h)


def resolution_rows(wakeup: dict[str, Any], rate: float, clock_read_us: float,
                    floor_rtt_us: float | None,
                    lengths: Sequence[float] = RUN_LENGTHS) -> list[dict[str, Any]]:
    """The smallest difference (µs) between two runs of each length that a two-sided test at
    95 % confidence detects with 80 % power, for the mean, p50 and p99.

    Model: each latency sample carries the host's timer noise, distributed as the wake-up
    lateness of the run's idle strategy (`wakeup`), and the n = rate x length samples of a run
    are independent. Then for the mean, δ = (z₀.₉₇₅ + z₀.₈₀)·σ·√(2/n); for a quantile p,
    δ = (z₀.₉₇₅ + z₀.₈₀)·√2·SE(p), SE(p) = √(p(1-p)/n) / f(q_p), with the density f estimated
    from the wake-up quantiles around p. No δ is below the clock read's cost nor below the
    histogram's precision (0.1 %) at the floor round trip.
    """
    quant = wakeup["quantiles_us"]
    bound = max(clock_read_us, HIST_RELATIVE_PRECISION * (floor_rtt_us or 0.0))
    rows = []
    for seconds in lengths:
        n = rate * seconds
        if n < 2:
            continue
        mean = Z_TOTAL * wakeup["stddev_us"] * math.sqrt(2.0 / n)
        p50 = Z_TOTAL * math.sqrt(2.0) * _quantile_se(0.5, n, quant["49"], quant["51"], 0.01)
        p99 = Z_TOTAL * math.sqrt(2.0) * _quantile_se(0.99, n, quant["98.5"], quant["99.5"],
                                                      0.005)
        rows.append({"seconds": seconds, "samples": int(n),
                     "mean_us": max(mean, bound), "p50_us": max(p50, bound),
                     "p99_us": max(p99, bound)})
    return rows


# --------------------------------------------------------------------------------------------
# The whole calibration
# --------------------------------------------------------------------------------------------


def calibrate(duration: float = 8.0, *, rate: float | None = None, floor: bool = True,
              floor_client: Path | None = None,
              progress: Callable[[str], object] | None = None) -> dict[str, Any]:
    """Measure this host for about `duration` seconds (a quarter for the floor, the rest
    shared by the three idle strategies) and return the calibrate JSON (docs/trust.md).

    `rate` is the sample rate (requests per second) of the runs the resolution table is for;
    None takes the floor's rate on one connection. `floor=False` skips the floor client."""
    if not (math.isfinite(duration) and 0 < duration <= 3600):
        raise CalibrationError(f"duration must be above 0 and at most 3600 s, not {duration}")
    say = progress or (lambda _text: None)
    started = datetime.now(timezone.utc)
    before = _cpu_times()
    share = duration / (4 if floor else 3)
    say("clock read and system call cost")
    clock_ns = float(_core.calibrate_clock_read_ns(_CLOCK_ITERATIONS))
    syscall_ns = float(_core.calibrate_syscall_ns(_SYSCALL_ITERATIONS))
    wakeups = {}
    for strategy in STRATEGIES:
        say(f"{strategy} wake-ups ({share:.1f} s)")
        wakeups[strategy] = _wakeups(strategy, share)
    floor_facts: dict[str, Any] = {"available": False, "reason": "skipped (--no-floor)"}
    if floor:
        client, why = (floor_client, None) if floor_client else find_floor_client()
        if client is None:
            floor_facts = {"available": False, "reason": why}
        else:
            say(f"loopback request floor ({share:.1f} s)")
            floor_facts = request_floor(share, client)
    after = _cpu_times()
    rtt = floor_facts.get("rtt_us") if floor_facts["available"] else None
    if rate is not None:
        sample_rate, rate_source = rate, "--rate"
    elif floor_facts["available"]:
        sample_rate, rate_source = floor_facts["rps"], "floor (one connection)"
    else:
        sample_rate, rate_source = None, None
    resolution: dict[str, Any] = {
        "strategy": "poll", "rate": sample_rate, "rate_source": rate_source,
        "assumptions": "latency noise distributed as the poll strategy's wake-up lateness; "
                       "independent samples at `rate` per second; two-sided, 95 % "
                       "confidence, 80 % power",
        "rows": [] if sample_rate is None else resolution_rows(
            wakeups["poll"], sample_rate, clock_ns / 1e3, rtt),
    }
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {
        "version": CALIBRATION_VERSION,
        "measured_at": started.isoformat(timespec="seconds"),
        "duration_s": duration,
        "host": {
            "hostname": os.uname().nodename,
            "cpus": os.cpu_count(),
            "load_average": list(load) if load else None,
            "clock_source": clock_source(),
            "cpufreq": cpufreq(),
            "steal_percent": steal_percent(before, after),
        },
        "clock_read_ns": clock_ns,
        "syscall_ns": syscall_ns,
        "wakeups": wakeups,
        "floor": floor_facts,
        "resolution": resolution,
    }


def load_calibration(path: str | Path) -> dict[str, Any]:
    """A saved ``nhbench calibrate --output json``: checked for its version and parts."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise CalibrationError(f"cannot read calibration {str(path)!r}: {exc}") from None
    if not isinstance(data, dict) or data.get("version") != CALIBRATION_VERSION:
        raise CalibrationError(f"{str(path)!r} is not an nhbench calibrate JSON (version "
                               f"{CALIBRATION_VERSION})")
    missing = [k for k in ("host", "wakeups", "clock_read_ns", "resolution") if k not in data]
    if missing:
        raise CalibrationError(f"{str(path)!r} lacks {', '.join(missing)}")
    return data
