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

`--server-side` also counts nginx's worker while each client runs: its system calls and CPU
per response, attached by `perf stat -p`. Both tools make nginx write and read alike; what
differs is what the client's waits cost it (waking a sleeping client is nginx's work).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
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


EVENTS = ",".join(["raw_syscalls:sys_enter", "context-switches", "task-clock"] +
                  [f"syscalls:sys_enter_{s}" for s in SYSCALLS])


def perf_counts(path: Path) -> dict[str, float]:
    """`perf stat -x ;` output as {event: count}, the syscall tracepoints by their call's name."""
    counts: dict[str, float] = {}
    for line in path.read_text().splitlines():
        parts = line.split(";")
        if len(parts) < 3 or line.startswith("#"):
            continue
        try:
            value = float(parts[0])
        except ValueError:
            continue
        counts[parts[2].replace("syscalls:sys_enter_", "")] = value
    return counts


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of one process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(client: str, scenario: str, url: str, duration: float, cpu: int,
            requests: int = 0, server_pid: int | None = None) -> dict[str, float]:
    """The client's counts per run; with `server_pid`, also that server process's system
    calls and CPU during the run, under keys prefixed "server:"."""
    with tempfile.TemporaryDirectory() as tmp:
        perf_out = Path(tmp) / "perf.txt"
        server_out = Path(tmp) / "server.txt"
        json_path = Path(tmp) / "result.json" if client.startswith("nhbench") else None
        argv = client_argv(client, scenario, url, duration, requests)
        if json_path is not None:
            argv[argv.index("--output") + 1] = str(json_path)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE.parent / "src"),
                                                            os.environ.get("PYTHONPATH", "")]))
        server_perf = None
        if server_pid is not None:
            server_perf = subprocess.Popen(["perf", "stat", "-x", ";", "-o", str(server_out),
                                            "-e", EVENTS, "-p", str(server_pid)])
            time.sleep(0.3)  # perf attaches before the client starts
            server_cpu = process_cpu_s(server_pid)
        tcp_before = tcp_counters()
        proc = subprocess.run(["perf", "stat", "-x", ";", "-o", str(perf_out), "-e", EVENTS,
                               "--", "taskset", "-c", str(cpu), *argv],
                              capture_output=True, text=True, env=env, check=False)
        tcp_after = tcp_counters()
        if server_perf is not None and server_pid is not None:
            server_cpu = process_cpu_s(server_pid) - server_cpu
            server_perf.send_signal(signal.SIGINT)
            server_perf.wait()
        if proc.returncode != 0:
            raise SystemExit(f"{client} failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
        n = responses_of(client, proc.stdout, json_path)
        counts: dict[str, float] = {"responses": n, **perf_counts(perf_out)}
        for name in tcp_after:
            counts[name] = tcp_after[name] - tcp_before.get(name, 0)
        if server_perf is not None:
            counts.update({f"server:{k}": v for k, v in perf_counts(server_out).items()
                           if k != "task-clock"})
            counts["server:cpu_s"] = server_cpu
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
    p.add_argument("--server-side", action="store_true",
                   help="also count nginx's worker: its system calls and CPU per response "
                        "while each client runs (what the client's pattern costs the server)")
    args = p.parse_args(argv)
    listener = SCENARIOS[args.scenario][0]
    rows = []
    with NginxOrigin(tuned=True, access_log=False, cpu=args.server_cpu) as nginx:
        url = nginx.url(listener)
        worker = nginx_worker(nginx.pid) if args.server_side else None
        for _ in range(args.repeat):
            for client in args.clients.split(","):
                if client == "floor" and args.scenario not in ("max", "fixed"):
                    continue
                counts = measure(client, args.scenario, url, args.duration, args.client_cpu,
                                 args.requests, worker)
                if args.requests and args.short:
                    short = measure(client, args.scenario, url, args.duration, args.client_cpu,
                                    args.short, worker)
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
    if args.server_side:
        print("nginx's worker, per response of each client's run:")
        print(f"{'CPU µs':24}" + "".join(
            f"{c.get('server:cpu_s', 0) * 1e6 / max(c['responses'], 1):>14.2f}" for _, c in rows))
        server = [s for s in ("raw_syscalls:sys_enter", *SYSCALLS, "context-switches")
                  if any(c.get(f"server:{s}", 0) for _, c in rows)]
        for s in server:
            label = "all system calls" if s == "raw_syscalls:sys_enter" else s
            print(f"{label:24}" + "".join(
                f"{c.get(f'server:{s}', 0) / max(c['responses'], 1):>14.3f}" for _, c in rows))
    return 0


def nginx_worker(master: int) -> int:
    """nginx's one worker process (the benchmarks run `worker_processes 1`)."""
    children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    if len(children) != 1:
        raise SystemExit(f"expected one nginx worker under {master}, found {children}")
    return int(children[0])


if __name__ == "__main__":
    sys.exit(main())
