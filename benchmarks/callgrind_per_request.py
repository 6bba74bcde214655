"""Instructions per request on the client's worker threads, measured with callgrind.

Wall-clock CPU ratios on a shared VM swing far more than a few instructions per request can
cost, so changes to the client's hot path are checked in instructions instead (docs/
benchmarks.md, "Issue 12" and "Issue 13" hot-path checks). For each protocol this runs the
installed nhbench client under ``valgrind --tool=callgrind --toggle-collect=worker_main``
(only the worker threads count, so Python start-up and result building are left out)
against ``nhbench server`` on its own CPU, twice: ended after SMALL and after LARGE requests
by a termination predicate on ``upstream_rq_total``. The difference in instructions divided
by the difference in requests completed is the per-request cost; the fixed costs (threads,
connections, the last partial batch) cancel out.

    python benchmarks/callgrind_per_request.py                      # h1 and h2, one pair
    python benchmarks/callgrind_per_request.py --protocols h1 --pairs 3

It measures whatever nhbench the running interpreter imports (build the tree to measure
first). The client runs closed loop (rps=0) on 10 connections of one worker, as the issue 12
check did; HTTP/2 is h2c with the same 10 connections.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from common import check_cpu_args, child_env, nhbench_server

# The client as a child process, so that valgrind sees only it. It prints the requests
# completed (2xx responses: the server answers every request with 200).
_CLIENT = """
import json, sys
import nhbench
proto, port, n, cpu = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
extra = {"protocol": "http2", "h2c": True} if proto == "h2" else {}
r = nhbench.run(f"http://127.0.0.1:{port}/", rps=0, connections=10, concurrency=1, cpus=[cpu],
                duration="60s", termination_predicate={"upstream_rq_total": n}, **extra)
print(json.dumps({"completed": r.counters["benchmark.http_2xx"],
                  "sent": r.counters["upstream_rq_total"]}))
"""

_TOTALS = re.compile(r"^(?:summary|totals):\s+(\d+)", re.MULTILINE)


def measure(proto: str, port: int, requests: int, cpu: int, tmp: Path) -> tuple[int, int]:
    """(worker instructions, requests completed) of one client run under callgrind."""
    out = tmp / f"callgrind.{proto}.{requests}.out"
    argv = ["taskset", "-c", str(cpu), "valgrind", "--tool=callgrind",
            "--toggle-collect=worker_main", f"--callgrind-out-file={out}", sys.executable,
            "-c", _CLIENT, proto, str(port), str(requests), str(cpu)]
    proc = subprocess.run(argv, capture_output=True, text=True, env=child_env(), check=False)
    if proc.returncode != 0:
        raise SystemExit(f"callgrind_per_request: the client failed ({proc.returncode}): "
                         + proc.stderr.strip()[-800:])
    completed = int(json.loads(proc.stdout.strip().splitlines()[-1])["completed"])
    match = _TOTALS.search(out.read_text())
    if match is None:
        raise SystemExit(f"callgrind_per_request: no totals in {out}")
    return int(match.group(1)), completed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--protocols", default="h1,h2", help="comma-separated: h1, h2")
    parser.add_argument("--small", type=int, default=4000, help="requests of the short run")
    parser.add_argument("--large", type=int, default=24000, help="requests of the long run")
    parser.add_argument("--pairs", type=int, default=1, help="pairs of runs per protocol")
    parser.add_argument("--client-cpu", type=int, default=0)
    parser.add_argument("--server-cpu", type=int, default=1)
    args = parser.parse_args(argv)
    protocols = [p.strip() for p in args.protocols.split(",") if p.strip()]
    if not protocols or any(p not in ("h1", "h2") for p in protocols):
        parser.error(f"--protocols: must be h1, h2 or h1,h2 (got {args.protocols!r})")
    if args.small <= 0 or args.large <= args.small:
        parser.error("--small and --large: need 0 < small < large")
    check_cpu_args(parser, args, "callgrind_per_request")
    with tempfile.TemporaryDirectory(prefix="nhb-callgrind-") as tmpdir:
        tmp = Path(tmpdir)
        with nhbench_server(args.server_cpu, tool="callgrind_per_request") as target:
            for proto in protocols:
                for pair in range(1, args.pairs + 1):
                    ir_s, done_s = measure(proto, target.port, args.small, args.client_cpu, tmp)
                    ir_l, done_l = measure(proto, target.port, args.large, args.client_cpu, tmp)
                    per = (ir_l - ir_s) / max(1, done_l - done_s)
                    print(f"{proto} pair {pair}: {per:,.0f} instructions/request "
                          f"({ir_s:,} for {done_s} requests, {ir_l:,} for {done_l})",
                          flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
