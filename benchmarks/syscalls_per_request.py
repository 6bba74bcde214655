#!/usr/bin/env python3
"""System calls, context switches and CPU per request, per client, from `perf stat`.

The kernel's share of a request is most of its cost over loopback (see docs/benchmarks.md,
"Method"), and callgrind does not see it. This script counts what each client asks of the
kernel per request: every system call by name (the `syscalls:sys_enter_*` tracepoints, exact
counts, not samples), context switches, and the CPU time perf saw. It loads nginx (tuned, on
the server CPU) with each client on the client CPU, one run each, in the peer benchmark's
scenarios and shapes.

    python benchmarks/syscalls_per_request.py --scenario h2c
    python benchmarks/syscalls_per_request.py --scenario fixed --clients nhbench,floor --duration 3

Counts are per response; the clients' start-up (nhbench's interpreter, connection set-up) is
included and amortised over the run, so use runs of a few seconds. Needs `perf` with
tracepoint access (perf_event_paranoid ≤ 2 for one's own processes, as here).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "src"))

from benchmarks.floor.build import build as build_floor  # noqa: E402
from benchmarks.nginx_origin import NginxOrigin  # noqa: E402

SYSCALLS = ("read", "write", "readv", "writev", "sendto", "recvfrom", "sendmsg", "recvmsg",
            "epoll_wait", "epoll_pwait", "epoll_pwait2", "epoll_ctl", "timerfd_settime",
            "clock_gettime", "futex", "io_uring_enter", "nanosleep", "clock_nanosleep",
            "sched_yield", "getrusage")
SCENARIOS = {
    # name: (listener, rps, connections, streams)
    "max": ("h1", 0, 50, 1),
    "fixed": ("h1", 20000, 50, 1),
    "h2c": ("h2c", 0, 10, 100),
    "tls-h1": ("tls", 0, 50, 1),
    "tls-h2": ("tls", 0, 10, 100),
}


def client_argv(client: str, scenario: str, url: str, duration: float) -> list[str]:
    _, rps, conns, streams = SCENARIOS[scenario]
    if client.startswith("nhbench"):
        argv = [sys.executable, "-m", "nhbench", "run", url, "--rps", str(rps),
                "--connections", str(conns), "--duration", f"{duration:g}", "--concurrency", "1",
                "--no-default-failure-predicates", "--output-format", "json", "--output", os.devnull]
        if scenario == "h2c":
            argv += ["--h2c", "--max-concurrent-streams", str(streams),
                     "--max-active-requests", str(conns * streams)]
        if scenario == "tls-h2":
            argv += ["--h2", "--max-concurrent-streams", str(streams),
                     "--max-active-requests", str(conns * streams)]
        if scenario.startswith("tls"):
            argv += ["--insecure"]
        if client == "nhbench-burst":
            argv += ["--burst-size", str(conns)]
        return argv
    if client == "h2load":
        argv = ["h2load", "-t1", f"-c{conns}", "-D", f"{duration:g}"]
        if scenario in ("max", "fixed", "tls-h1"):
            argv.insert(1, "--h1")
        else:
            argv.append(f"-m{streams}")
        if rps:
            argv += ["--rps", f"{rps / conns:g}"]
        return [*argv, url]
    if client == "wrk":
        return ["wrk", "-t1", f"-c{conns}", f"-d{duration:g}s", url]
    if client == "floor":
        binary = build_floor()
        host_port = url.split("//", 1)[1].split("/", 1)[0]
        host, port = host_port.rsplit(":", 1)
        argv = [str(binary), "--host", host, "--port", port, "--connections", str(conns),
                "--duration", f"{duration:g}"]
        if rps:
            argv += ["--rate", str(rps)]
        return argv
    raise SystemExit(f"unknown client {client!r}")


def responses_of(client: str, out: str, json_path: Path | None) -> int:
    if client.startswith("nhbench"):
        assert json_path is not None
        data = json.loads(json_path.read_text())
        counters = {c["name"]: int(c["value"]) for r in data["results"] if r["name"] == "global"
                    for c in r["counters"]}
        return sum(v for k, v in counters.items() if re.fullmatch(r"benchmark\.http_[1-5]xx", k))
    if client == "h2load":
        m = re.search(r"requests: \d+ total, \d+ started, (\d+) done", out)
        return int(m.group(1)) if m else 0
    if client == "wrk":
        m = re.search(r"(\d+) requests in", out)
        return int(m.group(1)) if m else 0
    if client == "floor":
        return int(json.loads(out.strip().splitlines()[-1])["requests"])
    return 0


def measure(client: str, scenario: str, url: str, duration: float, cpu: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        perf_out = Path(tmp) / "perf.txt"
        json_path = Path(tmp) / "result.json" if client.startswith("nhbench") else None
        argv = client_argv(client, scenario, url, duration)
        if json_path is not None:
            argv[argv.index("--output") + 1] = str(json_path)
        events = ",".join(["raw_syscalls:sys_enter", "context-switches", "task-clock"] +
                          [f"syscalls:sys_enter_{s}" for s in SYSCALLS])
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE.parent / "src"),
                                                            os.environ.get("PYTHONPATH", "")]))
        proc = subprocess.run(["perf", "stat", "-x", ";", "-o", str(perf_out), "-e", events,
                               "--", "taskset", "-c", str(cpu), *argv],
                              capture_output=True, text=True, env=env, check=False)
        if proc.returncode != 0:
            raise SystemExit(f"{client} failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
        n = responses_of(client, proc.stdout, json_path)
        counts: dict[str, float] = {"responses": n}
        for line in perf_out.read_text().splitlines():
            parts = line.split(";")
            if len(parts) < 3 or line.startswith("#"):
                continue
            try:
                value = float(parts[0])
            except ValueError:
                continue
            name = parts[2].replace("syscalls:sys_enter_", "")
            counts[name] = value
        return counts


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scenario", choices=sorted(SCENARIOS), default="max")
    p.add_argument("--clients", default="nhbench,h2load,floor")
    p.add_argument("--duration", type=float, default=3.0)
    p.add_argument("--client-cpu", type=int, default=0)
    p.add_argument("--server-cpu", type=int, default=1)
    args = p.parse_args(argv)
    listener = SCENARIOS[args.scenario][0]
    rows = []
    with NginxOrigin(tuned=True, access_log=False, cpu=args.server_cpu) as nginx:
        url = nginx.url(listener)
        for client in args.clients.split(","):
            if client == "floor" and args.scenario not in ("max", "fixed"):
                continue
            rows.append((client, measure(client, args.scenario, url, args.duration, args.client_cpu)))
    names = [s for s in ("raw_syscalls:sys_enter", *SYSCALLS, "context-switches")
             if any(c.get(s, 0) for _, c in rows)]
    print(f"per response, scenario {args.scenario}, {args.duration:g} s runs")
    print(f"{'':24}" + "".join(f"{c:>14}" for c, _ in rows))
    print(f"{'responses':24}" + "".join(f"{int(c['responses']):>14,}" for _, c in rows))
    print(f"{'task-clock µs':24}" + "".join(
        f"{c.get('task-clock', 0) * 1e3 / max(c['responses'], 1):>14.2f}" for _, c in rows))
    for s in names:
        label = "all system calls" if s == "raw_syscalls:sys_enter" else s
        print(f"{label:24}" + "".join(f"{c.get(s, 0) / max(c['responses'], 1):>14.3f}" for _, c in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
