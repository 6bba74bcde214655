#!/usr/bin/env python3
"""Soak: nhbench's client against nhbench's server for a long time, watching for leaks.

`nhbench server` runs pinned to --server-cpu (1) with one worker and an admin endpoint;
`nhbench run` loads it from --client-cpu (0) at a fixed --rps (2000) over --connections (20)
for --duration (10m), with connection churn: the URL asks the server (Fortio's ``close=``
parameter) to close the connection after --close-percent (1) % of the responses, so the
client keeps opening new connections all along. Every --interval (5 s) the script samples,
for both processes, the resident set (VmRSS in /proc/PID/status) and the open file
descriptors (entries of /proc/PID/fd), plus the server's own request and connection counts
from its admin endpoint, and prints one table row.

    PYTHONPATH=src python3 benchmarks/soak.py [--duration 10m] [--rps 2000] [--interval 5]
    nox -s soak [-- ARGS]       ./dev soak [-- ARGS]

At the end it prints first/last/max RSS and fd counts per process and a verdict on flatness:
after a warm-up (the first --warmup, default 10 %, of the samples: allocator pools and
connection slots fill up there), the samples are split into two halves, and a process is
flat when the maximum RSS of the second half exceeds that of the first by no more than
--rss-slack (2 %, and at least 1 MiB: glibc's arenas move by that much) and its maximum fd
count by no more than --fd-slack (2: a connection being replaced while the old one closes).

Output: the table on stdout; benchmarks/out/soak.json (configuration, machine, samples,
summary, the client's counters) and benchmarks/out/soak.csv (the samples). Exit status 0
when both processes are flat and the client's run succeeded, 1 otherwise.
"""

from __future__ import annotations

import argparse
import csv
import datetime as _dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

# Run as `python benchmarks/soak.py`: benchmarks/ is first on sys.path.
from common import (
    OUT_DIR,
    check_cpu_args,
    child_env,
    free_port,
    machine_info,
    nhbench_server,
    tool_seconds,
)

PROCESSES = ("client", "server")


@dataclass
class Sample:
    t: float  # seconds since the client started
    client_rss_kib: int | None
    client_fds: int | None
    server_rss_kib: int | None
    server_fds: int | None
    server_requests: int | None
    server_connections_total: int | None
    server_connections_active: int | None


def rss_kib(pid: int) -> int | None:
    """VmRSS of `pid` in KiB (None once the process is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def fd_count(pid: int) -> int | None:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def server_stats(admin_port: int) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{admin_port}/stats", timeout=2) as r:
            return dict(json.load(r))
    except (OSError, ValueError):
        return {}


def duration_arg(text: str) -> float:
    """``600``, ``600s``, ``10m``, ``1h``: seconds."""
    try:
        seconds = float(text)
    except ValueError:
        try:
            seconds = tool_seconds(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a duration: {text!r}") from None
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {text!r}")
    return seconds


def soak(cfg: argparse.Namespace) -> dict[str, Any]:
    admin_port = free_port()
    started = _dt.datetime.now(_dt.timezone.utc)
    machine = machine_info()
    samples: list[Sample] = []
    with nhbench_server(cfg.server_cpu, ["--admin", f"127.0.0.1:{admin_port}"],
                        tool="soak") as server, \
            tempfile.TemporaryDirectory() as tmp:
        url = f"http://127.0.0.1:{server.port}/?close={cfg.close_percent:g}"
        result_file = Path(tmp) / "client.json"
        argv = ["taskset", "-c", str(cfg.client_cpu), sys.executable, "-m", "nhbench", "run",
                url, "--rps", f"{cfg.rps:g}", "--connections", str(cfg.connections),
                "--duration", f"{cfg.duration:g}s", "--cpus", str(cfg.client_cpu),
                "--output-format", "json", "--output", str(result_file)]
        print(f"soak: {' '.join(argv[3:])}  (client on CPU {cfg.client_cpu}, server pid "
              f"{server.pid} on CPU {cfg.server_cpu})", flush=True)
        header = (f"{'t (s)':>7} {'client RSS MiB':>15} {'fds':>5} {'server RSS MiB':>15} "
                  f"{'fds':>5} {'server requests':>16} {'connections':>12} {'active':>7}")
        print(header, flush=True)
        with tempfile.TemporaryFile() as err:
            client = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                      stdout=subprocess.DEVNULL, stderr=err, env=child_env())
            t0 = time.monotonic()
            next_at = t0
            while client.poll() is None:
                now = time.monotonic()
                if now >= next_at:
                    stats = server_stats(admin_port)
                    sample = Sample(
                        t=round(now - t0, 3),
                        client_rss_kib=rss_kib(client.pid), client_fds=fd_count(client.pid),
                        server_rss_kib=rss_kib(server.pid), server_fds=fd_count(server.pid),
                        server_requests=stats.get("requests"),
                        server_connections_total=stats.get("connections_total"),
                        server_connections_active=stats.get("connections_active"),
                    )
                    # The client may have exited between poll() and the reads.
                    if sample.client_rss_kib is not None:
                        samples.append(sample)
                        print(_row(sample), flush=True)
                    next_at += cfg.interval
                time.sleep(min(0.2, max(0.0, next_at - time.monotonic())))
            err.seek(0)
            client_stderr = err.read().decode(errors="replace").strip()
        client_status = client.returncode
        final_stats = server_stats(admin_port)
        client_result = json.loads(result_file.read_text()) if result_file.exists() else None
    summary = {name: summarize(samples, name, cfg) for name in PROCESSES}
    return {
        "started": started.isoformat(),
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(cfg).items()},
        "machine": machine,
        "client_exit_status": client_status,
        "client_stderr": client_stderr,
        "client": client_summary(client_result),
        "server_final_stats": final_stats,
        "summary": summary,
        "samples": [asdict(s) for s in samples],
    }


def _mib(kib: int | None) -> str:
    return "-" if kib is None else f"{kib / 1024:.1f}"


def _row(s: Sample) -> str:
    def n(v: int | None) -> str:
        return "-" if v is None else str(v)

    return (f"{s.t:>7.1f} {_mib(s.client_rss_kib):>15} {n(s.client_fds):>5} "
            f"{_mib(s.server_rss_kib):>15} {n(s.server_fds):>5} {n(s.server_requests):>16} "
            f"{n(s.server_connections_total):>12} {n(s.server_connections_active):>7}")


def summarize(samples: list[Sample], name: str, cfg: argparse.Namespace) -> dict[str, Any]:
    rss = [v for s in samples if (v := getattr(s, f"{name}_rss_kib")) is not None]
    fds = [v for s in samples if (v := getattr(s, f"{name}_fds")) is not None]
    out: dict[str, Any] = {"samples": len(rss)}
    if len(rss) < 4 or len(fds) < 4:
        out["verdict"] = "too few samples (run longer or sample more often)"
        out["flat"] = None
        return out
    out.update(rss_first_kib=rss[0], rss_last_kib=rss[-1], rss_max_kib=max(rss),
               fds_first=fds[0], fds_last=fds[-1], fds_max=max(fds))
    warm = max(1, int(len(rss) * cfg.warmup))
    rest_rss, rest_fds = rss[warm:], fds[warm:]
    half = len(rest_rss) // 2
    first_rss, second_rss = max(rest_rss[:half]), max(rest_rss[half:])
    first_fds, second_fds = max(rest_fds[:half]), max(rest_fds[half:])
    rss_growth = second_rss - first_rss
    rss_allowed = max(1024.0, first_rss * cfg.rss_slack / 100)
    fd_growth = second_fds - first_fds
    flat = rss_growth <= rss_allowed and fd_growth <= cfg.fd_slack
    out.update(
        rss_first_half_max_kib=first_rss, rss_second_half_max_kib=second_rss,
        rss_growth_kib=rss_growth, rss_growth_percent=100 * rss_growth / first_rss,
        rss_median_kib=statistics.median(rest_rss),
        fds_first_half_max=first_fds, fds_second_half_max=second_fds, fd_growth=fd_growth,
        flat=flat,
        verdict=("flat" if flat else "GROWING")
        + f": RSS {rss_growth / 1024:+.2f} MiB ({100 * rss_growth / first_rss:+.2f} %, "
        f"allowed {rss_allowed / 1024:.2f} MiB), fds {fd_growth:+d} (allowed "
        f"{cfg.fd_slack}) from the first half to the second after "
        f"{warm} warm-up sample{'s' if warm != 1 else ''}",
    )
    return out


def client_summary(result: dict[str, Any] | None) -> dict[str, Any] | None:
    """The client's counters that say whether the soak did what it was asked."""
    if result is None:
        return None
    from nhbench import Result

    r = Result.model_validate(result)
    c = r.counters
    return {
        "duration_s": r.duration,
        "achieved_rps": r.achieved_rps,
        "http_2xx": r.succeeded,
        "errors": r.error_count,
        "upstream_cx_total": c["upstream_cx_total"],
        "upstream_cx_close_notify": c["upstream_cx_close_notify"],
        "upstream_rq_total": c["upstream_rq_total"],
        "benchmark.pool_overflow": c["benchmark.pool_overflow"],
        "sequencer.blocked": c["sequencer.blocked"],
        "success": r.success,
        "latency_p99_s": r.latency.p(99) if r.latency.count else None,
    }


def render_summary(report: dict[str, Any]) -> str:
    lines = ["", "process  samples  RSS MiB first/last/max  fds first/last/max  verdict"]
    for name in PROCESSES:
        s = report["summary"][name]
        if s.get("flat") is None:
            lines.append(f"{name:<8} {s['samples']:>7}  {s['verdict']}")
            continue
        lines.append(
            f"{name:<8} {s['samples']:>7}  "
            f"{_mib(s['rss_first_kib'])}/{_mib(s['rss_last_kib'])}/{_mib(s['rss_max_kib'])}"
            f"{'':>4}{s['fds_first']}/{s['fds_last']}/{s['fds_max']}{'':>8}{s['verdict']}")
    client = report.get("client")
    if client:
        lines.append(
            f"client: {client['http_2xx']} 2xx, {client['errors']} errors, "
            f"{client['upstream_cx_total']} connections opened "
            f"({client['upstream_cx_close_notify']} closed by the server), achieved "
            f"{client['achieved_rps']:.1f} rps, dropped {client['benchmark.pool_overflow']}")
    if report["client_exit_status"] != 0:
        lines.append(f"client exited with status {report['client_exit_status']}: "
                     f"{report['client_stderr'][-500:]}")
    return "\n".join(lines)


def write_outputs(report: dict[str, Any], out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "soak.json").write_text(json.dumps(report, indent=2) + "\n")
    with open(out_dir / "soak.csv", "w", newline="") as f:
        fields = [field for field in Sample.__dataclass_fields__]
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(report["samples"])


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--duration", type=duration_arg, default=600.0,
                   help="how long the client runs: 600, 600s, 10m (default 10m)")
    p.add_argument("--rps", type=float, default=2000.0, help="requests per second (2000)")
    p.add_argument("--connections", type=int, default=20, help="client connections (20)")
    p.add_argument("--close-percent", type=float, default=1.0,
                   help="%% of responses after which the server closes the connection (1)")
    p.add_argument("--interval", type=duration_arg, default=5.0,
                   help="seconds between samples (5)")
    p.add_argument("--warmup", type=float, default=0.1,
                   help="fraction of the samples left out of the verdict (0.1)")
    p.add_argument("--rss-slack", type=float, default=2.0,
                   help="RSS growth allowed, %% of the first half's maximum (2; at least 1 MiB)")
    p.add_argument("--fd-slack", type=int, default=2, help="fd growth allowed (2)")
    p.add_argument("--client-cpu", type=int, default=0, help="CPU of the client (0)")
    p.add_argument("--server-cpu", type=int, default=1, help="CPU of the server (1)")
    p.add_argument("--out-dir", type=Path, default=OUT_DIR)
    cfg = p.parse_args(argv)
    if cfg.rps <= 0 or cfg.connections < 1 or not 0 <= cfg.close_percent <= 100:
        p.error("--rps must be > 0, --connections >= 1, --close-percent within 0..100")
    if not 0 <= cfg.warmup < 0.5:
        p.error("--warmup must be within 0..0.5")
    check_cpu_args(p, cfg, "soak")
    return cfg


def main(argv: list[str] | None = None) -> int:
    cfg = parse_args(sys.argv[1:] if argv is None else argv)
    if not shutil.which("taskset"):
        raise SystemExit("soak: taskset not found (util-linux)")
    report = soak(cfg)
    print(render_summary(report))
    write_outputs(report, cfg.out_dir)
    print(f"\nwrote {cfg.out_dir / 'soak.json'} and {cfg.out_dir / 'soak.csv'}", file=sys.stderr)
    flat = all(report["summary"][name].get("flat") for name in PROCESSES)
    ok = report["client_exit_status"] == 0 and bool(report["client"]) and \
        report["client"]["success"]
    return 0 if flat and ok else 1


if __name__ == "__main__":
    sys.exit(main())
