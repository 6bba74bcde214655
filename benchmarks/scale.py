"""Scale: how many used connections one process pair holds here, what fails first, and what
merging many workers' results costs (docs/benchmarks.md, "Scale").

Three measurements, each printed as one JSON line and then as a table:

* ``--counts 1000,4000,9000``: for each N, a fresh nhbench test server (one worker, its own
  process) and an nhbench client (one worker, a child process) with N connections, every
  connect started before the first request (``prefetch_connections``; the first burst
  rides on connections still connecting), then ``--bursts`` bursts of N requests ``--gap``
  seconds apart. A burst of N HTTP/1.1 requests over N connections puts
  one request on each (a connection carries one request at a time), so when every burst is
  answered and the client opened exactly N connections, every connection carried
  ``--bursts`` requests. Per N: the client's and the server's RSS after the first burst, per
  connection against a baseline of ``--baseline`` connections measured the same way; the
  time from the client's start until the server held all N (its open descriptors, polled
  every 50 ms); the client's counters; the client's open descriptors before and after the
  run (every connection's descriptor returned) and the server's after the client left; the
  machine's ListenOverflows and TCPSynRetrans while the connections opened (what makes the
  last of many simultaneous connects wait for a SYN retransmission).
* ``--emfile-limit L --emfile-connections N``: the client run with its soft RLIMIT_NOFILE
  lowered to L and N > L connections asked (the run raises it to the hard limit and opens
  all N), then with the hard limit lowered to L too (refused before the run, exit 2): the
  CLI in a child process with the lowered limits.
* ``--merge 256,1024``: the controller's end of a Ray run (``ClusterBenchmark._result``:
  `merge_core`, `merge_endpoints`, the merged Result, each node's own verdict, one entry
  per worker and per node, called without Ray) over W workers in W/64 nodes, from the core
  result of a real one-worker run copied W times (real histograms, each worker's the
  same): its wall time and this process's CPU time, the best of ``--merge-reps``.

Also printed: RLIMIT_NOFILE, net.ipv4.ip_local_port_range (the ports one source address has
towards one destination address and port) and the load average (the machine is shared: the
connect times move with it; counts and bytes do not).

    python benchmarks/scale.py                                  # all three, defaults
    python benchmarks/scale.py --counts 2000 --emfile-limit 0 --merge ''
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from common import child_env

RESERVE = 256  # descriptors a process keeps beside its connections (libuv, Python, logs)


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def nofile() -> tuple[int, int]:
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def port_range() -> tuple[int, int]:
    lo, hi = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    return lo, hi


def tcp_ext(*names: str) -> dict[str, int]:
    """Machine-wide TCP counters from /proc/net/netstat (TcpExt): ListenOverflows (a SYN or
    an accept dropped because a listener's accept queue was full) and TCPSynRetrans (SYNs
    sent again, 1 s, then 3 s... after the first)."""
    lines = [line.split() for line in Path("/proc/net/netstat").read_text().splitlines()
             if line.startswith("TcpExt:")]
    table = dict(zip(lines[0][1:], map(int, lines[1][1:]), strict=True))
    return {name: table.get(name, 0) for name in names}


_TCP = ("ListenOverflows", "TCPSynRetrans")


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


# ---- the client, in its own process --------------------------------------------------------


def client_child(url: str, n: int, bursts: int, gap: float) -> None:
    """Hold `n` connections to `url`, send `bursts` bursts of `n` requests `gap` s apart;
    print {"pid", "t0"} at the start, {"rss_kib"} once the first burst is answered, and the
    run's counts at the end."""
    soft, hard = nofile()
    want = min(hard, n + RESERVE) if hard != resource.RLIM_INFINITY else n + RESERVE
    if want > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    import nhbench

    fds_before = open_fds(os.getpid())
    # Every connect starts before the first release (prefetch); a burst is released at 0, gap,
    # 2 gap...; the duration ends half a gap after the last one.
    bench = nhbench.Benchmark(url, rps=n / gap, burst_size=n, connections=n, concurrency=1,
                              duration=f"{(bursts - 0.5) * gap:g}s",
                              prefetch_connections=True, timeout="60s",
                              no_default_failure_predicates=True)
    print(json.dumps({"pid": os.getpid(), "t0": time.monotonic()}), flush=True)
    bench.start()
    deadline = time.monotonic() + 120
    answered = 0
    while answered < n and time.monotonic() < deadline and not bench.wait(0.05):
        answered = bench.progress().responses_2xx
    print(json.dumps({"rss_kib": rss_kib(os.getpid()), "answered": answered}), flush=True)
    bench.wait()
    result = bench.result()
    counters = {k: int(v) for k, v in result.counters.items() if int(v)}
    del bench
    print(json.dumps({"counters": counters, "error": result.error,
                      "terminated_by": result.terminated_by,
                      "fds_before": fds_before, "fds_after": open_fds(os.getpid())}),
          flush=True)


def measure(n: int, bursts: int, gap: float) -> dict[str, Any]:
    """One fresh server and one client with `n` connections (module docstring)."""
    import nhbench

    # A prefetched connection sends nothing until the first burst: the server's header
    # time-out (10 s by default) must not close it while thousands open on a loaded machine.
    server = nhbench.TestServer(subprocess=True, response_body_size=13, header_timeout=600,
                                idle_timeout=600)
    server.start()
    proc = None
    try:
        spid = server.pid
        server_fds0 = open_fds(spid)
        tcp0 = tcp_ext(*_TCP)
        proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--client-child", server.url,
             str(n), str(bursts), str(gap)],
            stdout=subprocess.PIPE, text=True, env=child_env())
        assert proc.stdout is not None
        start = json.loads(proc.stdout.readline() or "null")
        if start is None:
            raise SystemExit(f"scale: the client with {n} connections did not start")
        connected_s = None
        while connected_s is None and proc.poll() is None:
            if open_fds(spid) - server_fds0 >= n:
                connected_s = time.monotonic() - float(start["t0"])
            else:
                time.sleep(0.05)
        tcp1 = tcp_ext(*_TCP)
        line = proc.stdout.readline()
        server_rss = rss_kib(spid)
        first = json.loads(line) if line else {}
        end = json.loads(proc.stdout.readline() or "{}")
        proc.wait(120)
        # The server closes its side once the client is gone.
        deadline = time.monotonic() + 30
        while open_fds(spid) > server_fds0 + 8 and time.monotonic() < deadline:
            time.sleep(0.1)
        return {"connections": n, "bursts": bursts, "connected_s": connected_s,
                "client_rss_kib": first.get("rss_kib"), "server_rss_kib": server_rss,
                "first_burst_answered": first.get("answered"),
                "server_fds_left": open_fds(spid) - server_fds0,
                "tcp_while_connecting": {k: tcp1[k] - tcp0[k] for k in _TCP}, **end,
                "client_exit": proc.returncode}
    finally:
        if proc is not None:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        server.stop()


# ---- too many connections for the descriptor limit ----------------------------------------


def emfile_run(limit: int, n: int, url: str, extra: tuple[str, ...] = (),
               hard: bool = False) -> dict[str, Any]:
    """``nhbench run`` with its soft RLIMIT_NOFILE lowered to `limit` (and the hard limit
    too when `hard`) and `n` connections asked: its exit code, its last stderr line and its
    counters. The run raises its soft limit to the hard one, so with the hard limit left
    high every connection opens; with both lowered, more connections than fit are refused
    before the run (exit 2)."""
    def lower() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit if hard else nofile()[1]))

    proc = subprocess.run(
        [sys.executable, "-m", "nhbench", "run", url, "--connections", str(n), "--rps",
         str(n), "--burst-size", str(n), "--duration", "1.5s", "--prefetch-connections",
         "--output-format", "json", *extra],
        capture_output=True, text=True, env=child_env(), preexec_fn=lower, timeout=120)
    counters: dict[str, int] = {}
    if proc.stdout.strip():
        entry = json.loads(proc.stdout)["results"][-1]
        counters = {c["name"]: int(c["value"]) for c in entry["counters"]}
    lines = proc.stderr.strip().splitlines()
    return {"limit": limit, "hard": hard, "connections": n, "exit": proc.returncode,
            "stderr": lines[-1] if lines else "", "counters": counters}


# ---- the merge of a Ray run --------------------------------------------------------------


def one_worker_core(url: str) -> tuple[dict[str, Any], Any]:
    """The raw core result of a real one-worker run (what a Ray node returns per worker)."""
    import nhbench
    from nhbench.distributed._cluster import _NodeBenchmark
    from nhbench.options import make_options

    options = make_options(uri=url, rps=2000, duration="2s", connections=10, concurrency=1,
                           no_default_failure_predicates=True)
    bench = _NodeBenchmark(options)
    bench.start()
    bench.wait()
    core = bench._core_run().result()
    del nhbench
    return core, options


def merge_seconds(core: dict[str, Any], options: Any, workers: int, per_node: int = 64,
                  reps: int = 3) -> tuple[float, float]:
    """Wall time and CPU time (this process's) of the controller's merge of `workers`
    workers in nodes of `per_node`, the best of `reps`."""
    from nhbench.distributed._cluster import ClusterBenchmark, _Host, merge_stats

    nodes = max(1, workers // per_node)
    node_core = copy.deepcopy(core)
    worker = core["workers"][0]
    node_core["workers"] = [copy.deepcopy(worker) for _ in range(workers // nodes)]
    node_core["load"] = list(core.get("load") or ()) * (workers // nodes)
    # The node's own global entry, as its core makes it from its workers.
    node_core["global"] = merge_stats(node_core["workers"], len(node_core["workers"]))
    cores = [copy.deepcopy(node_core) for _ in range(nodes)]
    # The controller's own end of a run (ClusterBenchmark._result), without Ray: the nodes'
    # answers as their actors return them.
    answers = [{"core": c, "armed_ns": 0, "endpoints": ()} for c in cores]
    best = best_cpu = float("inf")
    for _ in range(reps):
        run = ClusterBenchmark(options)
        run._hosts = [_Host(name=f"host_{i}", node_id=f"node{i}", address=f"10.0.0.{i + 1}")
                      for i in range(nodes)]
        t = time.perf_counter()
        cpu = time.process_time()
        result = run._result(answers, time.time())
        best = min(best, time.perf_counter() - t)
        best_cpu = min(best_cpu, time.process_time() - cpu)
    want = {k: v * workers for k, v in worker["counters"].items() if v}
    if {k: v for k, v in result.counters.items() if v} != want:
        raise SystemExit("scale: the merged counters are not the sum of the workers'")
    if len(result.workers) != workers or len(result.hosts) != nodes:
        raise SystemExit("scale: the merged result does not list every worker and node")
    return best, best_cpu


# ---- main ----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--client-child":
        client_child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]))
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--counts", default="1000,4000,9000",
                   help="connection counts to measure ('' for none)")
    p.add_argument("--baseline", type=int, default=100)
    p.add_argument("--bursts", type=int, default=3, help="bursts of N requests per run")
    p.add_argument("--gap", type=float, default=3.0, help="seconds between bursts")
    p.add_argument("--emfile-limit", type=int, default=500,
                   help="RLIMIT_NOFILE for the descriptor-limit runs (0: skip them)")
    p.add_argument("--emfile-connections", type=int, default=1000)
    p.add_argument("--merge", default="256,1024", help="worker counts to merge ('' for none)")
    p.add_argument("--merge-reps", type=int, default=3, help="merges timed per count (best)")
    cfg = p.parse_args(argv)
    counts = [int(c) for c in cfg.counts.split(",") if c.strip()]
    merges = [int(c) for c in cfg.merge.split(",") if c.strip()]
    soft, hard = nofile()
    lo, hi = port_range()
    print(json.dumps({"rlimit_nofile": [soft, hard], "ip_local_port_range": [lo, hi],
                      "ports_per_destination": hi - lo + 1, "cpus": os.cpu_count(),
                      "loadavg": loadavg()}), flush=True)
    limit = min(soft if hard == resource.RLIM_INFINITY else hard, hi - lo + 1) - RESERVE
    for n in counts:
        if n > limit:
            p.error(f"--counts: {n} is over what this machine allows one process pair "
                    f"({limit}: RLIMIT_NOFILE and ip_local_port_range, less {RESERVE})")
    rows = []
    if counts:
        base = measure(cfg.baseline, cfg.bursts, cfg.gap)
        print(json.dumps({"baseline": base}), flush=True)
        for n in counts:
            m = measure(n, cfg.bursts, cfg.gap)
            dn = n - cfg.baseline
            m["client_b_per_conn"] = round((m["client_rss_kib"] - base["client_rss_kib"])
                                           * 1024 / dn)
            m["server_b_per_conn"] = round((m["server_rss_kib"] - base["server_rss_kib"])
                                           * 1024 / dn)
            m["loadavg"] = loadavg()
            print(json.dumps(m), flush=True)
            rows.append(m)
    emf = None
    core = options = None
    if cfg.emfile_limit or merges:
        import nhbench

        with nhbench.TestServer(subprocess=True, header_timeout=600) as server:
            if cfg.emfile_limit:
                emf = [emfile_run(cfg.emfile_limit, cfg.emfile_connections, server.url),
                       emfile_run(cfg.emfile_limit, cfg.emfile_connections, server.url,
                                  hard=True)]
                for e in emf:
                    print(json.dumps(e), flush=True)
            if merges:
                core, options = one_worker_core(server.url)
    merged_rows = []
    for w in merges:
        s, cpu = merge_seconds(core, options, w, reps=cfg.merge_reps)  # type: ignore[arg-type]
        merged_rows.append((w, s, cpu))
        print(json.dumps({"merge_workers": w, "nodes": max(1, w // 64), "seconds": s,
                          "cpu_seconds": cpu, "loadavg": loadavg()}), flush=True)
    print()
    if rows:
        print("| connections | connected in | client B/conn | server B/conn | requests 2xx "
              "| connections opened | connect failures | client fds after−before "
              "| server fds left | listen overflows / SYN retransmits | load |")
        print("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--|")
        for m in rows:
            c = m.get("counters", {})
            print(f"| {m['connections']:,} | {m['connected_s']:.2f} s "
                  f"| {m['client_b_per_conn']:,} | {m['server_b_per_conn']:,} "
                  f"| {c.get('benchmark.http_2xx', 0):,} | {c.get('upstream_cx_total', 0):,} "
                  f"| {c.get('upstream_cx_connect_fail', 0):,} "
                  f"| {m['fds_after'] - m['fds_before']} | {m['server_fds_left']} "
                  f"| {m['tcp_while_connecting']['ListenOverflows']:,} / "
                  f"{m['tcp_while_connecting']['TCPSynRetrans']:,} | {m['loadavg']} |")
    for w, s, cpu in merged_rows:
        print(f"merge of {w} workers ({max(1, w // 64)} nodes of 64): {s * 1000:.0f} ms, "
              f"{cpu * 1000:.0f} ms CPU")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
