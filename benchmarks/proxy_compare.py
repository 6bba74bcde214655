#!/usr/bin/env python3
"""Proxy cost: `nhbench server --tcp-proxy` against Fortio's own `-P` proxy (or, with
--fanout, `nhbench server --http-fanout` against Fortio's `-M`).

One origin (`fortio server`'s HTTP echo) and one load generator (`fortio load -qps 0 -c 8
-t 3s URL/echo?size=1024`) serve both; only the proxy in between changes. Each proxy runs
alone in its own process, pinned to --proxy-cpu (1), the origin and the load generator on
--client-cpu (0). For every run: Fortio's requests/s and response bytes/s, and the proxy
process's CPU time (utime+stime of all its threads, from /proc/<pid>/stat, read right before
and right after the load) per request. A "direct" row (no proxy) is the reference. Runs go
round-robin (direct, nhbench, fortio, ...) --repeat (3) times; the median is reported, with
the min-max.

With --fanout each proxy is an HTTP fan-out to two targets, both the same origin, in
Fortio's default mode (parallel, the request mirrored): every request the load generator
makes is two at the origin, and its response the two bodies back to back.

    PYTHONPATH=src python3 benchmarks/proxy_compare.py [--repeat 3] [--duration 3s] [--fanout]

Output: a markdown table on stdout and benchmarks/out/proxy_compare.json
(proxy_compare_fanout.json with --fanout).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OUT = Path(__file__).resolve().parent / "out"
TICK = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_listening(port: int, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing listens on port {port} after {timeout} s")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def pinned(cmd: list[str], cpu: int) -> list[str]:
    """`cmd` under taskset, or as is with --unpinned (cpu -1)."""
    return cmd if cpu < 0 else ["taskset", "-c", str(cpu), *cmd]


def start(cmd: list[str], cpu: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(pinned(cmd, cpu), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def one_run(kind: str, fortio: str, origin: int, args: argparse.Namespace) -> dict[str, float]:
    port = origin
    proc = None
    target = f"http://127.0.0.1:{origin}"
    if kind == "nhbench":
        port = free_port()
        proxy = (["--http-fanout", f"127.0.0.1:{port}={target},{target}"] if args.fanout else
                 ["--tcp-proxy", f"127.0.0.1:{port}=127.0.0.1:{origin}"])
        proc = start([sys.executable, "-m", "nhbench", "server", "--workers", "1",
                      "--listen", "127.0.0.1:0", *proxy], args.proxy_cpu)
    elif kind == "fortio":
        port = free_port()
        proxy = (["-M", f"127.0.0.1:{port} {target} {target}"] if args.fanout else
                 ["-P", f"127.0.0.1:{port} 127.0.0.1:{origin}"])
        proc = start([fortio, "proxies", *proxy], args.proxy_cpu)
    try:
        wait_listening(port)
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "r.json"
            before = cpu_seconds(proc.pid) if proc else 0.0
            subprocess.run(pinned([fortio, "load", "-qps", "0", "-c", "8", "-t", args.duration,
                                   "-json", str(out), f"http://127.0.0.1:{port}/echo?size=1024"],
                                  args.client_cpu),
                           check=True, capture_output=True)
            after = cpu_seconds(proc.pid) if proc else 0.0
            r = json.loads(out.read_text())
    finally:
        if proc:
            stop(proc)
    count = sum(r["RetCodes"].values())
    ok = r["RetCodes"].get("200", 0)
    seconds = r["ActualDuration"] / 1e9
    return {"requests_per_s": r["ActualQPS"], "bytes_per_s": r["Sizes"]["Sum"] / seconds,
            "cpu_us_per_request": (after - before) * 1e6 / count if proc else 0.0,
            "proxy_cpu": (after - before) / seconds if proc else 0.0,
            "errors": count - ok}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--duration", default="3s")
    ap.add_argument("--proxy-cpu", type=int, default=1)
    ap.add_argument("--client-cpu", type=int, default=0)
    ap.add_argument("--fanout", action="store_true",
                    help="HTTP fan-outs to two targets (-M) instead of TCP proxies (-P)")
    ap.add_argument("--unpinned", action="store_true",
                    help="no taskset: every process may use every CPU")
    args = ap.parse_args()
    if args.unpinned:
        args.proxy_cpu = args.client_cpu = -1
    fortio = shutil.which("fortio")
    if not fortio:
        raise SystemExit("fortio is not installed (go install fortio.org/fortio@v1.66.5)")
    origin = free_port()
    origin_proc = start([fortio, "server", "-http-port", f"127.0.0.1:{origin}",
                         "-grpc-port", "disabled", "-redirect-port", "disabled",
                         "-tcp-port", "disabled", "-udp-port", "disabled"], args.client_cpu)
    kinds = ["direct", "nhbench", "fortio"]
    runs: dict[str, list[dict[str, float]]] = {k: [] for k in kinds}
    try:
        wait_listening(origin)
        for _ in range(args.repeat):
            for kind in kinds:
                runs[kind].append(one_run(kind, fortio, origin, args))
    finally:
        stop(origin_proc)

    def cell(kind: str, key: str, fmt: str) -> str:
        values = [r[key] for r in runs[kind]]
        med = statistics.median(values)
        return f"{med:{fmt}} ({min(values):{fmt}}–{max(values):{fmt}})"

    when = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S%z")
    where = ("every process on every CPU (no pinning)" if args.unpinned else
             f"on CPU {args.client_cpu} with the origin (`fortio server`), the proxy alone on "
             f"CPU {args.proxy_cpu}")
    lines = [f"Measured {when}: `fortio load -qps 0 -c 8 -t {args.duration} "
             f"URL/echo?size=1024`, {where}; median of {args.repeat} runs (min–max).", "",
             "| path | requests/s | response bytes/s | proxy CPU µs/request | proxy CPU | errors |",
             "|---|---|---|---|---|---|"]
    for kind in kinds:
        errors = sum(int(r["errors"]) for r in runs[kind])
        label = {"direct": "direct (no proxy)",
                 "nhbench": "nhbench --http-fanout (2 targets)" if args.fanout else
                 "nhbench --tcp-proxy",
                 "fortio": "fortio -M (2 targets)" if args.fanout else "fortio -P"}[kind]
        lines.append(f"| {label} | {cell(kind, 'requests_per_s', ',.0f')} | "
                     f"{cell(kind, 'bytes_per_s', ',.0f')} | "
                     f"{cell(kind, 'cpu_us_per_request', '.2f')} | "
                     f"{statistics.median(r['proxy_cpu'] for r in runs[kind]):.0%} | {errors} |")
    print("\n".join(lines))
    OUT.mkdir(exist_ok=True)
    name = ("proxy_compare" + ("_fanout" if args.fanout else "")
            + ("_unpinned" if args.unpinned else "") + ".json")
    (OUT / name).write_text(json.dumps({"measured": when, "runs": runs}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
