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
    python benchmarks/syscalls_per_request.py --scenario tls-h2 --clients nhbench,h2load \
        --requests 200000 --repeat 3

Counts are per response; the clients' start-up (nhbench's interpreter, connection set-up) is
included and amortised over the run, so use runs of a few seconds. Needs `perf` with
tracepoint access (perf_event_paranoid ≤ 2 for one's own processes, as here).

`--requests N` gives nhbench and h2load the same request count (`-n`) instead of the same
duration (wrk and the floor keep `--duration`); with `--short M` each client also runs M requests and the row is the
difference of the two runs over N − M responses, so start-up (nhbench's interpreter and
imports, about half a CPU second on a loaded machine) cancels out as in the callgrind
benchmarks; `--repeat` runs the clients in turn that many times (interleaved, one column per
run). The TCP rows are `nstat` deltas around each run over the client's
responses: the network namespace's counters, so they hold both ends of the loopback
connections (the client's and nginx's segments) and anything else using TCP meanwhile.
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


TCP_COUNTERS = ("TcpOutSegs", "TcpExtTCPOrigDataSent", "TcpExtTCPPureAcks", "TcpExtTCPHPAcks",
                "TcpExtDelayedACKs", "TcpExtTCPAutoCorking", "TcpExtTCPRcvCoalesce")


def client_argv(client: str, scenario: str, url: str, duration: float,
                requests: int = 0) -> list[str]:
    _, rps, conns, streams = SCENARIOS[scenario]
    if client.startswith("nhbench"):
        argv = [sys.executable, "-m", "nhbench", "run", url, "--rps", str(rps),
                "--connections", str(conns), "--duration", f"{duration:g}", "--concurrency", "1",
                "--no-default-failure-predicates", "--output-format", "json", "--output", os.devnull]
        if requests:  # the count ends the run, the duration only bounds it
            argv[argv.index("--duration") + 1] = "600"
            argv += ["-n", str(requests)]
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
        argv = ["h2load", "-t1", f"-c{conns}",
                *(["-n", str(requests)] if requests else ["-D", f"{duration:g}"])]
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


def tcp_counters() -> dict[str, int]:
    """The namespace's TCP counters (`nstat -az`); empty when nstat is missing."""
    try:
        out = subprocess.run(["nstat", "-az", "--json"], capture_output=True, text=True,
                             check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return {}
    data = json.loads(out)
    return {k: int(v) for k, v in data.get("kernel", data).items() if k in TCP_COUNTERS}


def measure(client: str, scenario: str, url: str, duration: float, cpu: int,
            requests: int = 0) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        perf_out = Path(tmp) / "perf.txt"
        json_path = Path(tmp) / "result.json" if client.startswith("nhbench") else None
        argv = client_argv(client, scenario, url, duration, requests)
        if json_path is not None:
            argv[argv.index("--output") + 1] = str(json_path)
        events = ",".join(["raw_syscalls:sys_enter", "context-switches", "task-clock"] +
                          [f"syscalls:sys_enter_{s}" for s in SYSCALLS])
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE.parent / "src"),
                                                            os.environ.get("PYTHONPATH", "")]))
        tcp_before = tcp_counters()
        proc = subprocess.run(["perf", "stat", "-x", ";", "-o", str(perf_out), "-e", events,
                               "--", "taskset", "-c", str(cpu), *argv],
                              capture_output=True, text=True, env=env, check=False)
        tcp_after = tcp_counters()
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
        for name in tcp_after:
            counts[name] = tcp_after[name] - tcp_before.get(name, 0)
        return counts


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scenario", choices=sorted(SCENARIOS), default="max")
    p.add_argument("--clients", default="nhbench,h2load,floor")
    p.add_argument("--duration", type=float, default=3.0)
    p.add_argument("--client-cpu", type=int, default=0)
    p.add_argument("--server-cpu", type=int, default=1)
    p.add_argument("--requests", type=int, default=0,
                   help="the same request count for nhbench and h2load (-n) instead of "
                        "--duration (wrk and the floor keep --duration)")
    p.add_argument("--repeat", type=int, default=1, help="runs of each client, interleaved")
    p.add_argument("--short", type=int, default=0,
                   help="with --requests: also run each client with this many requests and "
                        "count the difference of the two runs (start-up cancels out)")
    args = p.parse_args(argv)
    listener = SCENARIOS[args.scenario][0]
    rows = []
    with NginxOrigin(tuned=True, access_log=False, cpu=args.server_cpu) as nginx:
        url = nginx.url(listener)
        for _ in range(args.repeat):
            for client in args.clients.split(","):
                if client == "floor" and args.scenario not in ("max", "fixed"):
                    continue
                counts = measure(client, args.scenario, url, args.duration, args.client_cpu,
                                 args.requests)
                if args.requests and args.short:
                    short = measure(client, args.scenario, url, args.duration, args.client_cpu,
                                    args.short)
                    counts = {k: v - short.get(k, 0) for k, v in counts.items()}
                rows.append((client, counts))
    names = [s for s in ("raw_syscalls:sys_enter", *SYSCALLS, "context-switches", *TCP_COUNTERS)
             if any(c.get(s, 0) for _, c in rows)]
    shape = f"{args.requests:,} requests" if args.requests else f"{args.duration:g} s"
    print(f"per response, scenario {args.scenario}, {shape} runs, "
          f"load average {os.getloadavg()[0]:.2f} at the end")
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
