"""Resident memory per idle keep-alive connection, client and server.

For each N in --counts (default 10000 and 50000) and a small baseline B (--baseline, 100),
this opens N (then B) idle HTTP/1.1 keep-alive connections from an nhbench client with one
worker to an nhbench test server with one worker, waits until both processes hold them (their
open file descriptors say so), and reads each process's VmRSS from /proc. The cost of one
connection is (RSS at N − RSS at B) / (N − B), for the client and for the server.

What RSS counts and what it does not: VmRSS is the process's resident user-space memory (its
heap, stacks, mapped pages it touched). A socket's buffers, its struct sock and its file are
kernel memory and never appear in it. The kernel's side is reported separately, for
information only, as the change of /proc/meminfo's Slab (where an idle socket's struct sock,
file and inode live; an idle socket holds no buffer pages): it is machine-wide, covers both
ends of each connection, and moves with whatever else runs on the machine. The goal of issue
16, ≤ 2 KB per connection, is about user space, so the RSS difference is the figure.

The client is a child Python process (``--client-child``) that raises its RLIMIT_NOFILE,
starts nhbench.Benchmark with ``prefetch_connections`` (every connection opened before the
first request) at 1 request per second (so the connections stay idle), and reports its RSS
when the parent asks. Both processes raise RLIMIT_NOFILE as far as the hard limit (raised
first when this process may: root) allows. A loopback client can open at most one connection
per local port to one server address and port, so N is also capped by
net.ipv4.ip_local_port_range (and the client's closed connections keep their ports in
TIME_WAIT for 60 s, which the script waits out when the next count would not fit); a count
above either limit is measured at the largest possible and the output says which limit
applied.

    python benchmarks/memory_per_connection.py                       # 10000 and 50000
    python benchmarks/memory_per_connection.py --counts 2000 --baseline 100
    python benchmarks/memory_per_connection.py --used     # each connection answered once

With ``--used`` every connection carries one request and its response before it idles (the
client releases one burst of N requests at the start, one per connection, at a rate whose
next burst comes only after the measurement): a kept-alive connection of a real run, with
what a first response leaves behind (the client's copy of the response head for the h1
replay, the server's state for a connection that has seen a request). Without it the
connections never send a request.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from common import child_env


def rss_kib(pid: int) -> int:
    """VmRSS of `pid` in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def slab_kib() -> int:
    """The kernel's slab memory, all of the machine (/proc/meminfo Slab): an idle socket's
    struct sock, file and inode live there (an idle socket holds no buffer pages)."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("Slab:"):
            return int(line.split()[1])
    return 0


def raise_nofile(want: int) -> int:
    """Raise RLIMIT_NOFILE towards `want` (the hard limit too when allowed); the soft limit
    obtained."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < want:
        try:
            cap = int(Path("/proc/sys/fs/nr_open").read_text())
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, cap), min(want, cap)))
        except (OSError, ValueError):
            pass
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    new = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if new > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def local_ports() -> int:
    """How many local ports one client may use towards one server address and port."""
    lo, hi = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    return hi - lo + 1


def client_child(url: str, n: int, cpu: int, used: bool = False) -> None:
    """Hold `n` idle connections to `url` until stdin closes; print RSS lines on request.
    `used`: each connection first answers one request (one burst of n at the start; the next
    burst comes about 300 s later, after the measurement and before the run's end: a next
    release past the end would end the run, and close the connections, at once)."""
    raise_nofile(n + 256)
    os.sched_setaffinity(0, {cpu})
    import nhbench

    shape = {"burst_size": n} if used else {}
    bench = nhbench.Benchmark(url, rps=max(1, n // 300) if used else 1, connections=n, concurrency=1, cpus=str(cpu),
                              duration="600s", prefetch_connections=True,
                              no_default_failure_predicates=True, **shape)
    bench.start()
    answered = 0
    if used:
        # Every connection's response must be in before the parent reads the RSS.
        deadline = time.monotonic() + 60
        while answered < n and time.monotonic() < deadline:
            time.sleep(0.1)
            answered = bench.progress().responses_2xx
        if answered < n:
            raise SystemExit(f"memory_per_connection: --used, but only {answered} of {n} "
                             "connections had their response in 60 s")
    print(json.dumps({"pid": os.getpid(), "answered": answered}), flush=True)
    sys.stdin.readline()  # the parent has read our RSS; end the run
    bench.stop()
    bench.wait(30)


# (when, how many) of the client's earlier closes: the client closes first, so each of its
# closed connections keeps its local port in TIME_WAIT for 60 s (fixed in Linux).
_closed: list[tuple[float, int]] = []
TIME_WAIT_S = 61.0


def wait_for_ports(n: int, ports: int) -> None:
    """Sleep until `n` new connections fit in the port range beside the TIME_WAIT ones."""
    while True:
        now = time.monotonic()
        held = sum(k for t, k in _closed if now - t < TIME_WAIT_S)
        if held + n <= ports - 100:
            return
        oldest = min(t for t, k in _closed if now - t < TIME_WAIT_S)
        print(f"waiting {TIME_WAIT_S - (now - oldest):.0f} s for {held} local ports in "
              "TIME_WAIT", file=sys.stderr, flush=True)
        time.sleep(TIME_WAIT_S - (now - oldest))


def measure(url: str, server_pid: int, n: int, cfg: argparse.Namespace) -> dict[str, int]:
    """RSS of client and server with `n` idle client connections held."""
    wait_for_ports(n, local_ports())
    server_fds0 = open_fds(server_pid)
    proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--client-child",
                             url, str(n), str(cfg.client_cpu), "used" if cfg.used else "idle"],
                            stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=child_env())
    try:
        assert proc.stdout is not None and proc.stdin is not None
        line = proc.stdout.readline()
        if not line:
            raise SystemExit(f"memory_per_connection: the client with {n} connections "
                             "failed to start")
        started = json.loads(line)
        pid = int(started["pid"])
        deadline = time.monotonic() + cfg.timeout
        # Wait until the server holds all n connections, and its fd count is steady.
        while open_fds(server_pid) - server_fds0 < n:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit(f"memory_per_connection: only "
                                 f"{open_fds(server_pid) - server_fds0} of {n} connections "
                                 f"opened in {cfg.timeout:g} s")
            time.sleep(0.2)
        time.sleep(cfg.settle)
        out = {"connections": n, "client_rss_kib": rss_kib(pid),
               "server_rss_kib": rss_kib(server_pid), "slab_kib": slab_kib(),
               "server_fds": open_fds(server_pid) - server_fds0,
               "answered": int(started["answered"])}
        proc.stdin.write("\n")
        proc.stdin.flush()
        proc.wait(60)
        # The server closes the connections once the client is gone; wait for that (a few
        # descriptors it opens lazily on its first connection stay: not a connection).
        while (open_fds(server_pid) > server_fds0 + 8
               and time.monotonic() < deadline + 60):
            time.sleep(0.2)
        _closed.append((time.monotonic(), n))
        return out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def main(argv: list[str] | None = None) -> int:
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--client-child":
        client_child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "used")
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--counts", default="10000,50000", help="connection counts to measure")
    p.add_argument("--baseline", type=int, default=100, help="the small count subtracted")
    p.add_argument("--client-cpu", type=int, default=0)
    p.add_argument("--server-cpu", type=int, default=1)
    p.add_argument("--timeout", type=float, default=120.0,
                   help="seconds to wait for the connections to open")
    p.add_argument("--used", action="store_true",
                   help="each connection answers one request before it idles")
    p.add_argument("--settle", type=float, default=1.0,
                   help="seconds to wait after they opened, before reading RSS")
    cfg = p.parse_args(argv)
    try:
        counts = [int(c) for c in cfg.counts.split(",") if c.strip()]
    except ValueError:
        p.error(f"--counts: whole numbers separated by commas (got {cfg.counts!r})")
    if not counts or cfg.baseline < 1 or any(c <= cfg.baseline for c in counts):
        p.error("--counts must each be larger than --baseline, which must be positive")
    limit_fd = raise_nofile(max(counts) + 256) - 256  # children inherit this limit
    limit_ports = local_ports()
    import nhbench

    # The connections stay idle without a request for as long as the measurement takes, so
    # the server's header timeout (10 s by default: it closes a connection that has sent no
    # complete request head) and idle timeout must not close them while they open.
    server = nhbench.TestServer(cpus=[cfg.server_cpu], subprocess=True,
                                response_body_size=13, header_timeout=600, idle_timeout=600)
    server.start()
    try:
        url = server.url
        base = measure(url, server.pid, cfg.baseline, cfg)
        print(f"baseline {cfg.baseline} connections: client {base['client_rss_kib']} KiB, "
              f"server {base['server_rss_kib']} KiB", flush=True)
        rows = []
        for asked in counts:
            n = min(asked, limit_fd, limit_ports - 100 - cfg.baseline)
            why = ""
            if n < asked:
                why = (f" (asked {asked}: RLIMIT_NOFILE allows {limit_fd}, "
                       f"ip_local_port_range {limit_ports} ports per destination)")
            m = measure(url, server.pid, n, cfg)
            dn = n - cfg.baseline
            c_b = (m["client_rss_kib"] - base["client_rss_kib"]) * 1024 / dn
            s_b = (m["server_rss_kib"] - base["server_rss_kib"]) * 1024 / dn
            k_b = (m["slab_kib"] - base["slab_kib"]) * 1024 / dn
            rows.append((n, c_b, s_b, k_b, why, m))
            print(f"{n} connections{why}: client {m['client_rss_kib']} KiB "
                  f"→ {c_b:,.0f} B/connection; server {m['server_rss_kib']} KiB "
                  f"→ {s_b:,.0f} B/connection; kernel slab (both ends, all of the "
                  f"machine) {k_b:,.0f} B/connection; {m['answered']} responses",
                  flush=True)
    finally:
        server.stop()
    print()
    print("| connections | client RSS B/connection | server RSS B/connection "
          "| kernel slab B/connection (both ends, machine-wide, indicative) |")
    print("|--:|--:|--:|--:|")
    for n, c_b, s_b, k_b, why, _ in rows:
        print(f"| {n:,}{why} | {c_b:,.0f} | {s_b:,.0f} | {k_b:,.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
