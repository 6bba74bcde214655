"""The measured trials of docs/trust.md: does the validity verdict flag a starved generator
and leave a clean run alone, and does `nhbench.compare` keep quiet on A/A pairs and see a
10 % shift of p99?

    python benchmarks/trust_trials.py starved --trials 20 --mode hog     # CPU hogs on its CPU
    python benchmarks/trust_trials.py starved --trials 20 --mode quota   # a cgroup CPU quota
    python benchmarks/trust_trials.py clean --trials 20                  # the same run alone
    python benchmarks/trust_trials.py degrade --trials 5                 # a server slowing down
    python benchmarks/trust_trials.py aa --pairs 100                     # A/A pairs, compared
    python benchmarks/trust_trials.py shift --pairs 10 --runs 5 --seconds 10 --shift 0.10
    python benchmarks/trust_trials.py report benchmarks/out/trust_*.json  # Markdown rows

Each subcommand prints one line per trial as it goes, then a summary table, and writes a
JSON summary (`--json`, default benchmarks/out/trust_<trial>[_<mode>].json) after every
trial, so that an interrupted campaign keeps what it measured. Every summary records the
host: CPU count, load average before and after, and over the trials the share of the
machine's CPU that was busy and the share busy with processes other than the trial's own
(this process and its children): a quiet machine is the premise of `clean` and `aa`, and
the record says whether it was one.

- **starved / clean**: the validity tests' run (tests/test_validity.py): a fresh Python
  process runs 200 requests per second for 2 s against nhbench's test server, its worker
  pinned to `--cpu` (default 1; the test server's worker is on the other CPU). `hog`: three
  CPU hogs pinned to that CPU at nice -10; `quota`: the run's threads in a cgroup limited
  to 3 % of a CPU, at 1,000 requests per second. `clean` is the same run with neither.
  Counted: flagged (suspect or invalid), invalid, and which checks flagged each trial.
- **degrade**: an HTTP/1.1 origin (slowing_origin.py, in this process) whose response delay grows by
  `--per-second` (4 ms) every second of the run, 100 requests per second for 4 s with
  0.25 s intervals; counted: flagged by `trend_p99` or `trend_rate` (non-stationary).
- **aa**: `--pairs` pairs of `--runs` runs a side (default 1) of `--seconds` (default 2)
  at `--rps` (1,000) against one test server, with `--stats-interval` 0.1 s (20 intervals
  in 2 s: the block bootstrap needs 6 and draws blocks of at most a third of them), the
  two sides' runs interleaved (A B A B ..., the order flipped every other pair) so that a
  slow drift of the host falls on both; each pair compared with `nhbench.compare` (the
  CLI's verdict object), seeded `--seed` + pair. Counted: "no significant change" per
  statistic and for all statistics at once.
- **shift**: the same with two test servers, the candidate's with a static response delay
  chosen to move p99 by `--shift` (measured first: `--calibration-runs` runs of the
  baseline give its p99, and the delay is that p99 times `--shift`, since a static delay
  adds to every latency; `--delay` sets it instead). Counted: pairs whose p99 verdict is
  "regressed", and the p99 of both configurations over all runs (the shift achieved).
  `--base-delay` gives both servers a static delay first, so that p99 is the server's
  rather than the host's stalls (on a loaded loopback p99 without it ranged 0.1 ms-1.5 s).

The JSON holds every trial (verdicts, checks, values, the comparison's statistics), the
options and the host. docs/trust.md, "Measured here", has this machine's figures.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from common import OUT_DIR, machine_busy_s
from slowing_origin import SlowingOrigin

import nhbench

FLAGGED = ("suspect", "invalid")
NON_STATIONARY = ("trend_p99", "trend_rate")

# The starved and clean trials' run, in a fresh process: the worker pinned to `cpu`, and in
# quota mode the process moved into the cgroup before the run's threads start (Python's
# start-up is no part of the run) and out of it before the result is built.
_PINNED_RUN = """
import os, sys
import nhbench
url, cpu, cgroup, rps, duration = (sys.argv[1], int(sys.argv[2]), sys.argv[3],
                                   float(sys.argv[4]), sys.argv[5])
def move(group):
    with open(os.path.join(group, "cgroup.procs"), "w") as f:
        f.write(str(os.getpid()))
if cgroup:
    move(cgroup)
run = nhbench.Benchmark(url, rps=rps, duration=duration, cpus=[cpu])
run.start()
while not run.wait(1.0):
    pass
if cgroup:
    move(os.path.dirname(cgroup))
sys.stdout.write(run.result().model_dump_json())
"""


# --------------------------------------------------------------------------------------------
# the host
# --------------------------------------------------------------------------------------------


def own_cpu_s() -> float:
    """CPU seconds of this process (all threads: the in-process test servers) and of its
    children that ended (the trials' subprocesses, the hogs once killed)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class HostMeter:
    """The machine's CPU over the trials: busy share of all CPUs, and the share busy with
    others' processes (the machine's busy time minus this process tree's)."""

    def __init__(self) -> None:
        self.cpus = os.cpu_count() or 1
        self.load_before = os.getloadavg()
        self._wall = time.monotonic()
        self._busy = machine_busy_s()
        self._own = own_cpu_s()

    def window(self) -> dict[str, float]:
        wall = time.monotonic() - self._wall
        busy = machine_busy_s() - self._busy
        own = own_cpu_s() - self._own
        capacity = max(wall * self.cpus, 1e-9)
        return {"seconds": round(wall, 1), "busy_share": round(busy / capacity, 3),
                "others_share": round(max(busy - own, 0.0) / capacity, 3)}

    def record(self) -> dict[str, Any]:
        return {"cpus": self.cpus, "load_before": list(self.load_before),
                "load_after": list(os.getloadavg()), **self.window()}


def host_line(host: dict[str, Any]) -> str:
    return (f"host: {host['cpus']} CPUs, load average {host['load_before'][0]:.2f} before, "
            f"{host['load_after'][0]:.2f} after (1 min); over {host['seconds']:.0f} s the "
            f"CPUs were {host['busy_share']:.0%} busy, {host['others_share']:.0%} with "
            f"processes other than the trials'")


class Summary:
    """The JSON summary, written again after every trial."""

    def __init__(self, path: Path, trial: str, options: dict[str, Any]) -> None:
        self.path = path
        self.meter = HostMeter()
        self.data: dict[str, Any] = {
            "trial": trial, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "nhbench": nhbench.__version__, "options": options, "trials": []}

    def add(self, trial: dict[str, Any], totals: dict[str, Any]) -> None:
        self.data["trials"].append(trial)
        self.data["totals"] = totals
        self.data["host"] = self.meter.record()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1) + "\n")
        tmp.replace(self.path)


def table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths,
                                                                         strict=True)).rstrip()
                     for row in rows)


# --------------------------------------------------------------------------------------------
# validity trials: starved, clean, degrade
# --------------------------------------------------------------------------------------------


def flagged_checks(validity: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"name": c["name"], "verdict": c["verdict"], "value": c["value"],
             "reason": c["reason"]}
            for c in validity["checks"] if c["verdict"] in FLAGGED]


def check_text(check: dict[str, Any]) -> str:
    value = check["value"]
    shown = f"{value:.3g}" if isinstance(value, float) else str(value)
    return f"{check['name']}={shown}({check['verdict'][0]})"


def pinned_run(url: str, cpu: int, cgroup: str, rps: float, duration: str
               ) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-c", _PINNED_RUN, url, str(cpu), cgroup, str(rps), duration],
        capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"the trial's run failed (status {proc.returncode}): "
                         f"{proc.stderr.strip()[-500:]}")
    validity = nhbench.Result.model_validate_json(proc.stdout).validity
    assert validity is not None
    return validity.model_dump()


def hogs(cpu: int, count: int) -> list[subprocess.Popen[bytes]]:
    # At a higher priority than the run (nice -10): on a host busy with other work the
    # scheduler would otherwise hand a mostly sleeping worker its CPU back at once.
    return [subprocess.Popen(["taskset", "-c", str(cpu), "nice", "-n", "-10", sys.executable,
                              "-c", "while 1: pass"]) for _ in range(count)]


@contextlib.contextmanager
def cpu_quota(name: str, percent: int) -> Iterator[str]:
    """A cgroup (v1 cpu controller, else v2) limited to `percent` of one CPU."""
    for root, v2 in (("/sys/fs/cgroup/cpu", False), ("/sys/fs/cgroup", True)):
        path = os.path.join(root, name)
        try:
            os.makedirs(path, exist_ok=True)
            if v2:
                Path(path, "cpu.max").write_text(f"{percent * 1000} 100000")
            else:
                Path(path, "cpu.cfs_period_us").write_text("100000")
                Path(path, "cpu.cfs_quota_us").write_text(str(percent * 1000))
        except OSError:
            with contextlib.suppress(OSError):
                os.rmdir(path)
            continue
        try:
            yield path
        finally:
            with contextlib.suppress(OSError):
                os.rmdir(path)
        return
    raise SystemExit("quota: no writable cgroup cpu controller (needs root)")


def validity_totals(trials: list[dict[str, Any]]) -> dict[str, Any]:
    by_check: dict[str, int] = {}
    for trial in trials:
        for check in trial["flagged"]:
            by_check[check["name"]] = by_check.get(check["name"], 0) + 1
    return {"trials": len(trials),
            "flagged": sum(t["verdict"] in FLAGGED for t in trials),
            "invalid": sum(t["verdict"] == "invalid" for t in trials),
            "non_stationary": sum(any(c["name"] in NON_STATIONARY for c in t["flagged"])
                                  for t in trials),
            "flagged_by": dict(sorted(by_check.items(), key=lambda kv: -kv[1]))}


def print_validity(summary: Summary, title: str) -> None:
    totals = summary.data["totals"]
    print()
    print(title)
    print(f"trials {totals['trials']}: flagged (suspect or invalid) {totals['flagged']}, "
          f"invalid {totals['invalid']}, non-stationary {totals['non_stationary']}")
    rows = [["check", "trials it flagged"]]
    rows += [[name, str(count)] for name, count in totals["flagged_by"].items()]
    if len(rows) > 1:
        print(table(rows))
    print(host_line(summary.data["host"]))
    print(f"summary: {summary.path}")


def trial_line(i: int, trial: dict[str, Any], host: dict[str, Any]) -> str:
    checks = " ".join(check_text(c) for c in trial["flagged"]) or "-"
    return (f"{i + 1:3d}  {trial['verdict']:8s} {trial['seconds']:6.1f} s  load "
            f"{host['load_after'][0]:5.2f}  {checks}")


def run_pinned_trials(args: argparse.Namespace, name: str, cgroup: str, rps: float,
                      setup: Any) -> None:
    summary = Summary(args.json or OUT_DIR / f"trust_{name}.json", name, {
        "trials": args.trials, "cpu": args.cpu, "rps": rps, "duration": args.duration,
        "mode": getattr(args, "mode", None), "hogs": args.hogs, "quota_percent": args.quota})
    with nhbench.TestServer(cpus=[1 - args.cpu if args.cpu in (0, 1) else 0]) as server:
        print(f"{name}: {args.trials} trials of {rps:g} requests/s for {args.duration}, "
              f"worker on CPU {args.cpu}; test server {server.url}", flush=True)
        for i in range(args.trials):
            with setup():
                start = time.monotonic()
                validity = pinned_run(server.url, args.cpu, cgroup, rps, args.duration)
            trial = {"verdict": validity["verdict"], "seconds": round(time.monotonic() - start,
                                                                      1),
                     "flagged": flagged_checks(validity),
                     "checks": {c["name"]: [c["verdict"], c["value"]]
                                for c in validity["checks"]},
                     "load": os.getloadavg()[0]}
            summary.add(trial, validity_totals(summary.data["trials"] + [trial]))
            print(trial_line(i, trial, summary.data["host"]), flush=True)
    print_validity(summary, f"{name}: the validity verdict of each trial")


def cmd_starved(args: argparse.Namespace) -> None:
    name = f"starved_{args.mode}"
    if args.mode == "hog":
        @contextlib.contextmanager
        def with_hogs() -> Iterator[None]:
            procs = hogs(args.cpu, args.hogs)
            try:
                time.sleep(0.3)
                yield
            finally:
                for proc in procs:
                    proc.kill()
                    proc.wait()
        run_pinned_trials(args, name, "", args.rps, with_hogs)
        return
    with cpu_quota(f"nhb_trials_{os.getpid()}", args.quota) as path:
        run_pinned_trials(args, name, path, args.quota_rps, contextlib.nullcontext)


def cmd_clean(args: argparse.Namespace) -> None:
    run_pinned_trials(args, "clean", "", args.rps, contextlib.nullcontext)


def cmd_degrade(args: argparse.Namespace) -> None:
    summary = Summary(args.json or OUT_DIR / "trust_degrade.json", "degrade", {
        "trials": args.trials, "rps": 100, "duration": "4s", "stats_interval": "0.25s",
        "per_second": args.per_second})
    print(f"degrade: {args.trials} trials, an origin whose delay grows "
          f"{args.per_second * 1e3:g} ms every second, 100 requests/s for 4 s", flush=True)
    for i in range(args.trials):
        start = time.monotonic()
        with SlowingOrigin(args.per_second) as origin:
            result = nhbench.run(f"http://127.0.0.1:{origin.port}/", rps=100, duration="4s",
                                 stats_interval="0.25s", connections=100, open_loop=True)
        assert result.validity is not None
        validity = result.validity.model_dump()
        trial = {"verdict": validity["verdict"],
                 "seconds": round(time.monotonic() - start, 1),
                 "flagged": flagged_checks(validity),
                 "checks": {c["name"]: [c["verdict"], c["value"]] for c in validity["checks"]},
                 "load": os.getloadavg()[0]}
        summary.add(trial, validity_totals(summary.data["trials"] + [trial]))
        print(trial_line(i, trial, summary.data["host"]), flush=True)
    print_validity(summary, "degrade: the validity verdict of each trial "
                            "(non-stationary: flagged by trend_p99 or trend_rate)")


# --------------------------------------------------------------------------------------------
# comparison trials: aa, shift
# --------------------------------------------------------------------------------------------


def one_run(url: str, args: argparse.Namespace) -> nhbench.Result:
    return nhbench.run(url, rps=args.rps, duration=f"{args.seconds}s",
                       stats_interval=f"{args.stats_interval}s")


def interleaved(urls: tuple[str, str], args: argparse.Namespace, flip: bool
                ) -> tuple[list[nhbench.Result], list[nhbench.Result]]:
    sides: tuple[list[nhbench.Result], list[nhbench.Result]] = ([], [])
    order = (1, 0) if flip else (0, 1)
    for _ in range(args.runs):
        for side in order:
            sides[side].append(one_run(urls[side], args))
    return sides


def comparison_totals(trials: list[dict[str, Any]], wanted: str) -> dict[str, Any]:
    names = list(trials[0]["verdicts"]) if trials else []
    return {
        "pairs": len(trials),
        "per_statistic": {name: sum(t["verdicts"][name] == wanted for t in trials)
                          for name in names},
        "all_no_change": sum(all(v == "no significant change" for v in t["verdicts"].values())
                             for t in trials),
        "any_regressed": sum("regressed" in t["verdicts"].values() for t in trials),
        "any_improved": sum("improved" in t["verdicts"].values() for t in trials),
    }


def pair_record(comparison: Any, a: list[nhbench.Result], b: list[nhbench.Result],
                seconds: float) -> dict[str, Any]:
    return {
        "verdicts": {s.name: s.verdict for s in comparison},
        "relative": {s.name: s.relative for s in comparison},
        "interval": {s.name: [s.relative_low, s.relative_high] for s in comparison},
        "p_value": {s.name: s.p_value for s in comparison},
        "block_length": comparison.block_length,
        "p99_baseline_us": [round(r.latency.p(99) * 1e6, 1) for r in a],
        "p99_candidate_us": [round(r.latency.p(99) * 1e6, 1) for r in b],
        "validity": [r.validity.verdict if r.validity else None for r in a + b],
        "flagged": [[c.name for c in r.validity.checks if c.verdict in FLAGGED]
                    if r.validity else [] for r in a + b],
        "seconds": round(seconds, 1), "load": os.getloadavg()[0],
    }


def pair_line(i: int, trial: dict[str, Any]) -> str:
    changed = [f"{name}:{verdict[0]}" for name, verdict in trial["verdicts"].items()
               if verdict in ("regressed", "improved")]
    p99 = trial["relative"].get("p99")
    return (f"{i + 1:3d}  p99 {p99 * 100 if p99 is not None else float('nan'):+6.1f}%  "
            f"{trial['verdicts']['p99']:22s} load {trial['load']:5.2f}  "
            f"changed: {' '.join(changed) or '-'}")


def print_comparison(summary: Summary, title: str, wanted: str) -> None:
    totals = summary.data["totals"]
    pairs = totals["pairs"]
    print()
    print(title)
    rows = [["statistic", f'"{wanted}"', "share"]]
    for name, count in totals["per_statistic"].items():
        rows.append([name, f"{count} of {pairs}", f"{count / max(pairs, 1):.0%}"])
    rows.append(["all at once (no change)", f"{totals['all_no_change']} of {pairs}",
                 f"{totals['all_no_change'] / max(pairs, 1):.0%}"])
    print(table(rows))
    print(f"pairs with a statistic regressed: {totals['any_regressed']}, improved: "
          f"{totals['any_improved']}")
    if "p99_us" in totals:
        p99 = totals["p99_us"]
        print(f"p99 over all runs (median of runs): baseline {p99['baseline']:.0f} µs, "
              f"candidate {p99['candidate']:.0f} µs: {p99['shift']:+.1%} with the "
              f"{summary.data['options']['delay_us']:.0f} µs delay")
    print(host_line(summary.data["host"]))
    print(f"summary: {summary.path}")


def comparison_options(args: argparse.Namespace, **extra: Any) -> dict[str, Any]:
    return {"pairs": args.pairs, "runs": args.runs, "seconds": args.seconds, "rps": args.rps,
            "stats_interval": args.stats_interval, "seed": args.seed,
            "resamples": args.resamples, **extra}


def cmd_aa(args: argparse.Namespace) -> None:
    summary = Summary(args.json or OUT_DIR / "trust_aa.json", "aa", comparison_options(args))
    with nhbench.TestServer() as server:
        print(f"aa: {args.pairs} pairs of {args.runs} run(s) a side, {args.seconds:g} s at "
              f"{args.rps:g} requests/s, interleaved; test server {server.url}", flush=True)
        for i in range(args.pairs):
            start = time.monotonic()
            a, b = interleaved((server.url, server.url), args, flip=i % 2 == 1)
            comparison = nhbench.compare(a, b, seed=args.seed + i, resamples=args.resamples)
            trial = pair_record(comparison, a, b, time.monotonic() - start)
            summary.add(trial, comparison_totals(summary.data["trials"] + [trial],
                                                 "no significant change"))
            print(pair_line(i, trial), flush=True)
    print_comparison(summary, "aa: A/A pairs, \"no significant change\" per statistic",
                     "no significant change")


def p99_us(url: str, args: argparse.Namespace, runs: int) -> list[float]:
    return [one_run(url, args).latency.p(99) * 1e6 for _ in range(runs)]


def _server(delay_us: float) -> nhbench.TestServer:
    return (nhbench.TestServer(response={"static_delay": f"{delay_us:.0f}us"}) if delay_us
            else nhbench.TestServer())


def cmd_shift(args: argparse.Namespace) -> None:
    base_us = args.base_delay
    with _server(base_us) as baseline:
        delay_us = args.delay
        calibration: list[float] = []
        if delay_us is None:
            calibration = p99_us(baseline.url, args, args.calibration_runs)
            delay_us = statistics.median(calibration) * args.shift
            print(f"shift: baseline p99 of {args.calibration_runs} runs "
                  f"{', '.join(f'{v:.0f}' for v in calibration)} µs (median "
                  f"{statistics.median(calibration):.0f}); a {args.shift:.0%} shift: a static "
                  f"delay of {delay_us:.0f} µs", flush=True)
        summary = Summary(args.json or OUT_DIR / "trust_shift.json", "shift",
                          comparison_options(args, shift=args.shift, delay_us=delay_us,
                                             base_delay_us=base_us,
                                             calibration_p99_us=calibration))
        with _server(base_us + delay_us) as candidate:
            print(f"shift: {args.pairs} pairs of {args.runs} runs a side, {args.seconds:g} s "
                  f"at {args.rps:g} requests/s, interleaved; candidate delayed "
                  f"{delay_us:.0f} µs", flush=True)
            for i in range(args.pairs):
                start = time.monotonic()
                a, b = interleaved((baseline.url, candidate.url), args, flip=i % 2 == 1)
                comparison = nhbench.compare(a, b, seed=args.seed + i,
                                             resamples=args.resamples)
                trial = pair_record(comparison, a, b, time.monotonic() - start)
                trials = summary.data["trials"] + [trial]
                totals = comparison_totals(trials, "regressed")
                base = statistics.median(v for t in trials for v in t["p99_baseline_us"])
                cand = statistics.median(v for t in trials for v in t["p99_candidate_us"])
                totals["p99_us"] = {"baseline": base, "candidate": cand,
                                    "shift": cand / base - 1}
                summary.add(trial, totals)
                print(pair_line(i, trial), flush=True)
    print_comparison(summary, f"shift: a {args.shift:.0%} p99 shift, \"regressed\" per "
                              "statistic", "regressed")


# --------------------------------------------------------------------------------------------
# report: the summaries as Markdown rows for docs/trust.md
# --------------------------------------------------------------------------------------------


def host_cell(data: dict[str, Any]) -> str:
    host = data["host"]
    return (f"{data['started'][:10]}, {host['cpus']} CPUs, load {host['load_before'][0]:.1f}"
            f" → {host['load_after'][0]:.1f}, CPUs {host['busy_share']:.0%} busy "
            f"({host['others_share']:.0%} others), {host['seconds'] / 60:.0f} min")


def value_range(trials: list[dict[str, Any]], name: str) -> str:
    """The range of a check's measure over the trials it flagged."""
    values = [c["value"] for t in trials for c in t["flagged"]
              if c["name"] == name and isinstance(c["value"], (int, float))]
    if not values:
        return "-"
    return f"{min(values):.3g}-{max(values):.3g}" if min(values) != max(values) \
        else f"{values[0]:.3g}"


def cmd_report(args: argparse.Namespace) -> None:
    for path in args.summaries:
        data = json.loads(Path(path).read_text())
        totals, options = data["totals"], data["options"]
        if data["trial"] in ("aa", "shift"):
            wanted = "no significant change" if data["trial"] == "aa" else "regressed"
            print(f"{data['trial']}: {totals['pairs']} pairs of {options['runs']} run(s) a "
                  f"side, {options['seconds']:g} s at {options['rps']:g} requests/s; "
                  f"{host_cell(data)}")
            print(f'| statistic | "{wanted}" |')
            print("|---|---:|")
            for name, count in totals["per_statistic"].items():
                print(f"| {name} | {count} of {totals['pairs']} |")
            print(f"| all at once, no significant change | {totals['all_no_change']} of "
                  f"{totals['pairs']} |")
            if "p99_us" in totals:
                p99 = totals["p99_us"]
                print(f"p99 (median of runs): {p99['baseline']:.0f} µs → "
                      f"{p99['candidate']:.0f} µs ({p99['shift']:+.1%}), delay "
                      f"{options['delay_us']:.0f} µs")
        else:
            seconds = statistics.median(t["seconds"] for t in data["trials"])
            by = ", ".join(f"`{name}` {count} ({value_range(data['trials'], name)})"
                           for name, count in totals["flagged_by"].items())
            print(f"| {data['trial']} | {totals['trials']} | {totals['flagged']} flagged, "
                  f"{totals['invalid']} invalid, {totals['non_stationary']} non-stationary | "
                  f"{by or '-'} | {seconds:.0f} s | {host_cell(data)} |")
        print()


# --------------------------------------------------------------------------------------------
# the command line
# --------------------------------------------------------------------------------------------


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="trial", required=True)

    def common(q: argparse.ArgumentParser) -> None:
        q.add_argument("--json", type=Path, help="the JSON summary's path")

    for name, helptext in (("starved", "the generator starved of CPU"),
                           ("clean", "the same run alone")):
        q = sub.add_parser(name, help=helptext)
        q.add_argument("--trials", type=positive_int, default=20)
        q.add_argument("--cpu", type=int, default=1, help="the run's CPU (default 1)")
        q.add_argument("--rps", type=float, default=200)
        q.add_argument("--duration", default="2s")
        q.add_argument("--hogs", type=positive_int, default=3)
        q.add_argument("--quota", type=positive_int, default=3,
                       help="quota mode: percent of one CPU (default 3)")
        q.add_argument("--quota-rps", type=float, default=1000)
        if name == "starved":
            q.add_argument("--mode", choices=("hog", "quota"), required=True)
        common(q)
    q = sub.add_parser("degrade", help="a server slowing down during the run")
    q.add_argument("--trials", type=positive_int, default=5)
    q.add_argument("--per-second", type=float, default=0.004,
                   help="delay added every second, in seconds (default 0.004)")
    common(q)
    for name, pairs, runs, seconds in (("aa", 100, 1, 2.0), ("shift", 10, 5, 10.0)):
        q = sub.add_parser(name, help="A/A pairs" if name == "aa" else "a p99 shift")
        q.add_argument("--pairs", type=positive_int, default=pairs)
        q.add_argument("--runs", type=positive_int, default=runs, help="runs a side")
        q.add_argument("--seconds", type=float, default=seconds, help="each run's length")
        q.add_argument("--rps", type=float, default=1000)
        q.add_argument("--stats-interval", type=float, default=0.1)
        q.add_argument("--seed", type=int, default=0, help="the bootstrap's seed (+ pair)")
        q.add_argument("--resamples", type=positive_int, default=2000)
        if name == "shift":
            q.add_argument("--shift", type=float, default=0.10)
            q.add_argument("--delay", type=float, help="the candidate's delay in µs "
                                                       "(default: measured, see above)")
            q.add_argument("--calibration-runs", type=positive_int, default=5)
            q.add_argument("--base-delay", type=float, default=0.0,
                           help="a static delay of both servers in µs (default 0): with one "
                           "well above the host's stalls, p99 is the server's, not the host's")
        common(q)
    q = sub.add_parser("report", help="the JSON summaries as Markdown rows")
    q.add_argument("summaries", nargs="+", type=Path)
    return p


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    {"starved": cmd_starved, "clean": cmd_clean, "degrade": cmd_degrade, "aa": cmd_aa,
     "shift": cmd_shift, "report": cmd_report}[args.trial](args)


if __name__ == "__main__":
    main()
