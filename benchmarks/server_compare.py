#!/usr/bin/env python3
"""Test server comparison: `nhbench server` against nginx (`return 200`) under wrk.

Each server runs alone, pinned to --server-cpu (1) with one worker; wrk loads it from
--client-cpu (0): `taskset -c 0 wrk -t1 -c50 -d5s URL`. For every run we record the requests
wrk completed, the rate, and the server's CPU time per request (utime+stime of the server's
process tree from /proc/<pid>/stat, read right before and right after the wrk run). Runs go
round-robin (nginx, nhbench, nginx, …) --repeat (3) times and the median is reported.

    PYTHONPATH=src python3 benchmarks/server_compare.py [--repeat 3] [--update-docs]
    nox -s bench                                   # runs it after peer_compare.py

Both servers answer `GET /` with 200 and a 13-byte body over keep-alive HTTP/1.1:
  nginx    benchmarks/nginx_origin.py (tuned, h1 only): worker_processes 1, access_log off,
           `location = / { return 200 "hello, world\\n"; }`
  nhbench  `nhbench server --workers 1 --cpus S --response-body-size 13`
The goal: nhbench's requests/s at least nginx's on one core.

Output: a markdown table, benchmarks/out/server_compare.json (and .md), and with
--update-docs the section between `<!-- server-results:begin -->` and
`<!-- server-results:end -->` in docs/benchmarks.md. Unknown arguments (those meant for
peer_compare.py when both run from `nox -s bench -- ARGS`) are ignored with a note.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# Run as `python benchmarks/server_compare.py`: benchmarks/ is first on sys.path.
from common import (
    DOCS,
    OUT_DIR,
    ServerTarget,
    check_cpu_args,
    machine_busy_s,
    machine_info,
    nhbench_server,
    proc_tree_cpu,
    response_head,
    tool_seconds,
    update_docs,
)
from nginx_origin import NginxError, NginxOrigin

BEGIN_MARK = "<!-- server-results:begin -->"
END_MARK = "<!-- server-results:end -->"
SERVERS = ("nginx", "nhbench")

@contextlib.contextmanager
def nginx_target(server_cpu: int) -> Iterator[ServerTarget]:
    try:
        with NginxOrigin(access_log=False, listeners=("h1",), cpu=server_cpu,
                         tuned=True) as nginx:
            port = nginx.ports["h1"]
            yield ServerTarget("nginx", port, nginx.pid, response_head(port))
    except NginxError as e:
        raise SystemExit(f"server_compare: {e}") from None


@contextlib.contextmanager
def nhbench_target(server_cpu: int) -> Iterator[ServerTarget]:
    with nhbench_server(server_cpu, tool="server_compare") as target:
        yield target


TARGETS = {"nginx": nginx_target, "nhbench": nhbench_target}


# --------------------------------------------------------------------------------------------
# one measurement
# --------------------------------------------------------------------------------------------


@dataclass
class Sample:
    server: str
    requests: int = 0
    duration: float = 0.0
    server_cpu_s: float = 0.0
    wrk_cpu_s: float = 0.0
    other_cpu_s: float = 0.0  # busy CPU of everything else on the machine during the run
    wall_s: float = 0.0
    errors: dict[str, int] = field(default_factory=dict)
    failed: str | None = None

    @property
    def rps(self) -> float:
        return self.requests / self.duration if self.duration > 0 else 0.0

    @property
    def server_us_per_req(self) -> float:
        return self.server_cpu_s / self.requests * 1e6 if self.requests else float("nan")


def run_wrk(target: ServerTarget, cfg: argparse.Namespace) -> Sample:
    sample = Sample(target.name)
    url = f"http://127.0.0.1:{target.port}/"
    argv = ["taskset", "-c", str(cfg.client_cpu), "wrk", "-t1", f"-c{cfg.connections}",
            f"-d{cfg.duration:g}s", url]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        cpu0 = proc_tree_cpu(target.pid)
        busy0 = machine_busy_s()
        t0 = time.monotonic()
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        _, status, rusage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        sample.wall_s = time.monotonic() - t0
        sample.server_cpu_s = proc_tree_cpu(target.pid) - cpu0
        sample.wrk_cpu_s = rusage.ru_utime + rusage.ru_stime
        sample.other_cpu_s = max(0.0, machine_busy_s() - busy0 - sample.server_cpu_s
                                 - sample.wrk_cpu_s)
        out.seek(0)
        text = out.read().decode(errors="replace")
        err.seek(0)
        error_text = err.read().decode(errors="replace")
    if proc.returncode != 0:
        sample.failed = f"wrk exited with {proc.returncode}: {error_text.strip()[-300:]}"
        return sample
    m = re.search(r"(\d+) requests in ([\d.]+\w+),", text)
    if not m:
        sample.failed = f"no 'N requests in' line in wrk's output: {text[-300:]!r}"
        return sample
    sample.requests = int(m.group(1))
    sample.duration = tool_seconds(m.group(2))
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    if m:
        sample.errors["non_2xx_3xx"] = int(m.group(1))
        sample.requests -= int(m.group(1))
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    if m:
        for name, value in zip(("connect", "read", "write", "timeout"), m.groups(), strict=True):
            if int(value):
                sample.errors[name] = int(value)
    return sample


# --------------------------------------------------------------------------------------------
# orchestration and reporting
# --------------------------------------------------------------------------------------------


def summarize(samples: list[Sample]) -> dict[str, Any]:
    ok = [s for s in samples if not s.failed and s.requests]
    if not ok:
        return {"runs": len(samples), "failed": [s.failed for s in samples]}
    rps = [s.rps for s in ok]
    us = [s.server_us_per_req for s in ok]
    share = [s.server_cpu_s / s.wall_s for s in ok if s.wall_s > 0]
    wrk_share = [s.wrk_cpu_s / s.wall_s for s in ok if s.wall_s > 0]
    other = [s.other_cpu_s / s.wall_s for s in ok if s.wall_s > 0]
    return {
        "runs": len(samples),
        "ok_runs": len(ok),
        "rps": statistics.median(rps),
        "rps_min": min(rps),
        "rps_max": max(rps),
        "server_us_per_req": statistics.median(us),
        "server_us_min": min(us),
        "server_us_max": max(us),
        "server_cpu_share": statistics.median(share) if share else None,
        "wrk_cpu_share": statistics.median(wrk_share) if wrk_share else None,
        "other_cpus": statistics.median(other) if other else None,
        "errors": {k: sum(s.errors.get(k, 0) for s in ok)
                   for k in sorted({k for s in ok for k in s.errors})},
    }


def run_all(cfg: argparse.Namespace) -> dict[str, Any]:
    samples: dict[str, list[Sample]] = {name: [] for name in cfg.servers}
    heads: dict[str, str] = {}
    started = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S%z")
    machine = machine_info(("wrk", "nginx"))
    for round_no in range(cfg.repeat):
        for name in cfg.servers:
            # A fresh server per run: no state carried from one run to the next.
            with TARGETS[name](cfg.server_cpu) as target:
                heads[name] = target.head.decode("latin-1")
                time.sleep(cfg.pause)
                sample = run_wrk(target, cfg)
            samples[name].append(sample)
            if sample.failed:
                print(f"server_compare: {name} run {round_no + 1}: {sample.failed}",
                      file=sys.stderr)
            else:
                print(f"server_compare: {name} run {round_no + 1}/{cfg.repeat}: "
                      f"{sample.rps:,.0f} req/s, server {sample.server_us_per_req:.2f} "
                      f"µs/req", file=sys.stderr)
            time.sleep(cfg.pause)
    summary = {name: summarize(runs) for name, runs in samples.items()}
    return {
        "started": started,
        "settings": {"duration": cfg.duration, "repeat": cfg.repeat,
                     "connections": cfg.connections, "client_cpu": cfg.client_cpu,
                     "server_cpu": cfg.server_cpu,
                     "wrk": f"taskset -c {cfg.client_cpu} wrk -t1 -c{cfg.connections} "
                            f"-d{cfg.duration:g}s URL"},
        "machine": machine,
        "response_heads": heads,
        "summary": summary,
        "runs": {name: [asdict(s) | {"rps": s.rps, "server_us_per_req": s.server_us_per_req}
                        for s in runs] for name, runs in samples.items()},
    }


def _ratio(report: dict[str, Any], key: str) -> float | None:
    summary = report["summary"]
    a, b = summary.get("nhbench", {}).get(key), summary.get("nginx", {}).get(key)
    return a / b if a and b else None


def render_markdown(report: dict[str, Any]) -> str:
    s = report["settings"]
    summary = report["summary"]
    out = [
        f"Measured {report['started']} on {report['machine'].get('cpu_model') or 'unknown CPU'}"
        f" ({report['machine'].get('cpus')} CPUs, kernel {report['machine'].get('kernel')}): "
        f"`{s['wrk']}` on CPU {s['client_cpu']}, each server alone on CPU {s['server_cpu']}, "
        f"median of {s['repeat']} runs (min–max in brackets).",
        "",
        "| server | requests/s | server CPU µs/request | server CPU | wrk CPU | errors |",
        "|---|---|---|---|---|---|",
    ]
    for name in SERVERS:
        row = summary.get(name)
        if row is None:
            continue
        if "rps" not in row:
            out.append(f"| {name} | failed | | | | {'; '.join(map(str, row['failed']))} |")
            continue
        errors = ", ".join(f"{k} {v}" for k, v in row["errors"].items()) or "0"
        share = row.get("server_cpu_share")
        wrk = row.get("wrk_cpu_share")
        out.append(
            f"| {name} | {row['rps']:,.0f} ({row['rps_min']:,.0f}–{row['rps_max']:,.0f}) | "
            f"{row['server_us_per_req']:.2f} ({row['server_us_min']:.2f}–"
            f"{row['server_us_max']:.2f}) | "
            f"{share * 100:.0f}% | {wrk * 100:.0f}% | {errors} |"
            if share is not None and wrk is not None else
            f"| {name} | {row['rps']:,.0f} | {row['server_us_per_req']:.2f} | | | {errors} |"
        )
    rps_ratio, cpu_ratio = _ratio(report, "rps"), _ratio(report, "server_us_per_req")
    out.append("")
    if rps_ratio is not None and cpu_ratio is not None:
        out.append(f"- nhbench / nginx: requests/s **{rps_ratio:.2f}×**, server CPU per "
                   f"request **{cpu_ratio:.2f}×** (lower is cheaper).")
        saturated = max(summary["nginx"].get("server_cpu_share") or 0,
                        summary["nhbench"].get("server_cpu_share") or 0) >= 0.9
        if rps_ratio >= 1.0:
            verdict = "met"
        elif saturated:
            verdict = "missed"
        else:
            verdict = ("not decided by the rate (no server saturated its core); by CPU per "
                       "request: " + ("met" if cpu_ratio <= 1.0 else "missed"))
        out.append(f"- Goal (at least nginx's rate on one core): "
                   f"{rps_ratio:.2f}× → **{verdict}**.")
        if not saturated:
            out.append("- Neither server used its whole core: something else (wrk, or other "
                       "load on the machine) is the limit here, so requests/s says little; "
                       "compare the CPU per request.")
    others = [row.get("other_cpus") for row in summary.values() if row.get("other_cpus")
              is not None]
    if others:
        out.append(f"- Other processes used {statistics.median(others):.2f} CPUs during the "
                   f"runs (0 = a quiet machine; above a few tenths the numbers are noisy).")
    return "\n".join(out).rstrip() + "\n"


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--servers", default="nginx,nhbench",
                   help="comma list of nginx,nhbench (default both)")
    p.add_argument("--duration", type=float, default=5.0, help="seconds per run (default 5)")
    p.add_argument("--repeat", type=int, default=3, help="runs per server, median reported")
    p.add_argument("--connections", type=int, default=50, help="wrk -c (default 50)")
    p.add_argument("--client-cpu", type=int, default=0, help="CPU of wrk (default 0)")
    p.add_argument("--server-cpu", type=int, default=1, help="CPU of the server (default 1)")
    p.add_argument("--pause", type=float, default=0.5, help="seconds between runs")
    p.add_argument("--out-dir", type=Path, default=OUT_DIR)
    p.add_argument("--update-docs", action="store_true",
                   help="rewrite the server-results section of docs/benchmarks.md")
    p.add_argument("--from-json", type=Path, metavar="FILE",
                   help="do not measure: re-render a saved JSON report")
    cfg, unknown = p.parse_known_args(argv)
    if unknown:
        print(f"server_compare: ignoring arguments meant for peer_compare.py: "
              f"{' '.join(unknown)}", file=sys.stderr)
    cfg.servers = [x.strip() for x in cfg.servers.split(",") if x.strip()]
    bad = [x for x in cfg.servers if x not in SERVERS]
    if bad:
        p.error(f"unknown server: {', '.join(bad)}")
    if cfg.repeat < 1 or cfg.duration <= 0 or cfg.connections < 1:
        p.error("--repeat, --duration and --connections must be positive")
    check_cpu_args(p, cfg, "server_compare")
    return cfg


def main(argv: list[str] | None = None) -> int:
    cfg = parse_args(sys.argv[1:] if argv is None else argv)
    if cfg.from_json:
        report = json.loads(cfg.from_json.read_text())
        if not isinstance(report, dict) or "response_heads" not in report:
            # e.g. peer_compare.py's report, when both run from `nox -s bench -- --from-json`
            print(f"server_compare: {cfg.from_json} is not a server_compare report; skipped",
                  file=sys.stderr)
            return 0
        markdown = render_markdown(report)
        print(markdown)
        if cfg.update_docs:
            update_docs(markdown, BEGIN_MARK, END_MARK, "Test server: nhbench server vs nginx")
            print(f"updated {DOCS}", file=sys.stderr)
        return 0
    for tool in ("taskset", "wrk"):
        if not shutil.which(tool):
            raise SystemExit(f"server_compare: {tool} not found")
    report = run_all(cfg)
    markdown = render_markdown(report)
    print()
    print(markdown)
    cfg.out_dir.mkdir(parents=True, exist_ok=True)
    (cfg.out_dir / "server_compare.md").write_text(markdown)
    (cfg.out_dir / "server_compare.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {cfg.out_dir / 'server_compare.json'} and server_compare.md", file=sys.stderr)
    if cfg.update_docs:
        update_docs(markdown, BEGIN_MARK, END_MARK, "Test server: nhbench server vs nginx")
        print(f"updated {DOCS}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
