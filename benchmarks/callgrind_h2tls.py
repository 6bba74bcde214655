"""Instructions per request for HTTP/2 and TLS, under callgrind.

The companion of callgrind_per_request.py for the scenarios of peer_compare.py that it does
not run: h2c with 10 connections x 100 streams, HTTP/1.1 over TLS with 50 connections and
HTTP/2 over TLS with 10 x 100, all closed loop against ``nhbench server`` (the TLS ones
against a second server with a generated self-signed certificate, the client --insecure).
As there, each measurement is a pair of runs, ended after SMALL and after LARGE requests by
a termination predicate on ``upstream_rq_total``, and the per-request cost is the difference
in instructions over the difference in responses, so start-up and result building cancel
out. nhbench counts only its worker threads (``--toggle-collect=worker_main``); h2load, the
reference (``--tools nhbench,h2load``), is counted whole (its start-up cancels out the same
way; with -t1 its one thread does all the work).

    python benchmarks/callgrind_h2tls.py                       # all three, nhbench only
    python benchmarks/callgrind_h2tls.py --scenarios tls-h1 --tools nhbench,h2load

It measures whatever nhbench the running interpreter imports (build the tree first).
Instruction counts do not move with machine load, so they are the before/after figure for
changes to session_h2.c and transport_tls.c; CPU-time ratios to h2load are peer_compare.py's.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from common import check_cpu_args, child_env, nhbench_server

# name: (connections, streams per connection or 0 for HTTP/1.1, TLS)
SCENARIOS = {"h2c": (10, 100, False), "tls-h1": (50, 0, True), "tls-h2": (10, 100, True)}

# The client as a child process, so that valgrind sees only it. It prints the responses
# received (2xx: the server answers every request with 200) and the requests sent.
_CLIENT = """
import json, sys
import nhbench
url, conns, streams, n, cpu = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
extra = {"insecure": True} if url.startswith("https") else {}
if streams:
    extra.update(protocol="http2", max_concurrent_streams=streams,
                 max_active_requests=conns * streams)
    if url.startswith("http:"):
        extra["h2c"] = True
r = nhbench.run(url, rps=0, connections=conns, concurrency=1, cpus=[cpu], duration="120s",
                termination_predicate={"upstream_rq_total": n}, **extra)
print(json.dumps({"completed": r.counters["benchmark.http_2xx"],
                  "sent": r.counters["upstream_rq_total"]}))
"""

_TOTALS = re.compile(r"^(?:summary|totals):\s+(\d+)", re.MULTILINE)
_H2LOAD_DONE = re.compile(r"(\d+) succeeded")


def _totals(out: Path) -> int:
    match = _TOTALS.search(out.read_text())
    if match is None:
        raise SystemExit(f"callgrind_h2tls: no totals in {out}")
    return int(match.group(1))


def measure(tool: str, scenario: str, url: str, requests: int, cpu: int,
            tmp: Path) -> tuple[int, int]:
    """(instructions, responses) of one run of `tool` under callgrind."""
    conns, streams, _ = SCENARIOS[scenario]
    out = tmp / f"callgrind.{tool}.{scenario}.{requests}.out"
    valgrind = ["taskset", "-c", str(cpu), "valgrind", "--tool=callgrind",
                f"--callgrind-out-file={out}"]
    if tool == "nhbench":
        argv = [*valgrind, "--toggle-collect=worker_main", sys.executable, "-c", _CLIENT, url,
                str(conns), str(streams), str(requests), str(cpu)]
    else:
        argv = [*valgrind, "h2load", "-t1", f"-c{conns}", f"-n{requests}"]
        argv += [f"-m{streams}"] if streams else ["--h1"]
        argv.append(url)
    proc = subprocess.run(argv, capture_output=True, text=True, env=child_env(), check=False)
    if proc.returncode != 0:
        raise SystemExit(f"callgrind_h2tls: {tool} failed ({proc.returncode}): "
                         + proc.stderr.strip()[-800:])
    if tool == "nhbench":
        done = int(json.loads(proc.stdout.strip().splitlines()[-1])["completed"])
    else:
        match = _H2LOAD_DONE.search(proc.stdout)
        if match is None:
            raise SystemExit("callgrind_h2tls: h2load printed no result: " + proc.stdout[-400:])
        done = int(match.group(1))
    return _totals(out), done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", default="h2c,tls-h1,tls-h2",
                        help="comma-separated: " + ", ".join(SCENARIOS))
    parser.add_argument("--tools", default="nhbench", help="comma-separated: nhbench, h2load")
    parser.add_argument("--small", type=int, default=4000, help="requests of the short run")
    parser.add_argument("--large", type=int, default=24000, help="requests of the long run")
    parser.add_argument("--pairs", type=int, default=1, help="pairs of runs per scenario")
    parser.add_argument("--client-cpu", type=int, default=0)
    parser.add_argument("--server-cpu", type=int, default=1)
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep the callgrind output files here (for callgrind_annotate)")
    args = parser.parse_args(argv)
    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    if not scenarios or any(s not in SCENARIOS for s in scenarios):
        parser.error(f"--scenarios: each must be one of {', '.join(SCENARIOS)} "
                     f"(got {args.scenarios!r})")
    if not tools or any(t not in ("nhbench", "h2load") for t in tools):
        parser.error(f"--tools: each must be nhbench or h2load (got {args.tools!r})")
    if "h2load" in tools and shutil.which("h2load") is None:
        parser.error("--tools: h2load is not installed (apt-get install nghttp2-client)")
    if args.small <= 0 or args.large <= args.small:
        parser.error("--small and --large: need 0 < small < large")
    check_cpu_args(parser, args, "callgrind_h2tls")
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
    # Under valgrind the client's 50 handshakes take longer than the server's default
    # 10 s header time-out (which counts from the connection's start), so the servers
    # wait as long as it takes.
    patient = ["--header-timeout", "0", "--idle-timeout", "0"]
    with tempfile.TemporaryDirectory(prefix="nhb-callgrind-") as tmpdir, \
            nhbench_server(args.server_cpu, patient, tool="callgrind_h2tls") as plain, \
            nhbench_server(args.server_cpu, [*patient, "--tls-self-signed"],
                           tool="callgrind_h2tls") as tls:
        tmp = args.keep if args.keep is not None else Path(tmpdir)
        for scenario in scenarios:
            secure = SCENARIOS[scenario][2]
            url = f"{'https' if secure else 'http'}://127.0.0.1:{(tls if secure else plain).port}/"
            for tool in tools:
                for pair in range(1, args.pairs + 1):
                    ir_s, done_s = measure(tool, scenario, url, args.small, args.client_cpu, tmp)
                    ir_l, done_l = measure(tool, scenario, url, args.large, args.client_cpu, tmp)
                    per = (ir_l - ir_s) / max(1, done_l - done_s)
                    print(f"{scenario} {tool} pair {pair}: {per:,.0f} instructions/request "
                          f"({ir_s:,} for {done_s} responses, {ir_l:,} for {done_l})",
                          flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
