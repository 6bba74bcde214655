"""User-space instructions per request, measured with callgrind: the regression guard.

Wall-clock CPU ratios on a shared VM swing far more than a few instructions per request can
cost, so changes to the client's hot path are checked in instructions instead (docs/
benchmarks.md, "Instructions per request", and the output-format and load-shape checks). Each
client runs under ``valgrind --tool=callgrind`` twice against the same target: a short run
and a long one. The difference in instructions divided by the difference in requests
completed is the per-request cost; the fixed costs (start-up, threads, connections, result
building, the last partial batch) cancel out. Callgrind counts user-space instructions only:
the kernel's share of each system call is not in the figure, which is what makes it the part
of the cost that is ours, and independent of the machine's load.

Clients (--clients, comma list):
  nhbench      the installed nhbench client, HTTP/1.1, closed loop (rps=0), one worker, with
               every statistic recorded; ``--toggle-collect=worker_main`` so only the worker
               threads count (Python start-up and result building are left out); runs end
               after SMALL and LARGE requests by a termination predicate on
               ``upstream_rq_total``.
  nhbench-h2c  the same over h2c (the same connections; one request in flight on each).
  nhbench-all  nhbench's run, every thread of the process counted (no toggle): the worker,
               the controller and the Python thread that waits; start-up and result building
               cancel out in the difference, work that recurs per unit of time does not. The
               whole process's figure against the worker's (nhbench's row).
  nhbench-2w   HTTP/1.1 with two workers, each with the same number of connections: the
               multi-core check, whose instructions per request should equal nhbench's.
  nhbench-fixed  HTTP/1.1 at a fixed rate (--fixed-rps, default 2,000: what the client keeps
               up with under callgrind), uniform schedule: the sequencer's timer path, one
               timer wake-up per release, the peer benchmark's fixed-rate scenario.
  floor        benchmarks/floor/request_floor.c (--requests SMALL / LARGE), whole process.
  floor-uring  benchmarks/floor/request_floor_uring.c, the same with io_uring (skipped when
               liburing is not installed).
  floor-timer  the timer floor (request_floor.c --rate --fixed-rps, periodic timerfd), as
               nhbench-fixed.
  wrk          wrk -t1 (its binary is stripped, so no function to toggle on: whole process,
               --short-s and --long-s seconds, as wrk has no request count).
  h2load       h2load --h1 -t1 -n SMALL / LARGE, whole process.
  h2load-h2c   h2load -t1 -m1 (h2c, prior knowledge, one stream per connection), as
               nhbench-h2c.

Targets (--targets): nginx (the main scenario, --nginx-connections, default 50) and the
nhbench test server (the old scenario of those hot-path checks, --server-connections, default
10), each alone on --server-cpu; and the "varying head" scenario of each: nginx-varying asks
a location that adds ``X-Request-Id: $request_id`` (32 random hex digits) to every response,
as Envoy and Istio add request ids, and nhbench-varying runs the test server with
``--emit-previous-request-delta-in-response-header`` (a per-request number of varying
length), so no two response heads are byte-identical.

    python benchmarks/callgrind_per_request.py                        # everything, one pair
    python benchmarks/callgrind_per_request.py --targets nhbench --clients nhbench --pairs 3

It measures whatever nhbench the running interpreter imports (build the tree to measure
first). ``nox -s callgrind`` runs it and prints one table.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from common import check_cpu_args, child_env, nhbench_server
from nginx_origin import NginxError, NginxOrigin

sys.path.insert(0, str(Path(__file__).resolve().parent / "floor"))
from build import BuildError, build  # noqa: E402 - benchmarks/floor/build.py

# The nhbench client as a child process, so that valgrind sees only it. It prints the
# requests completed (2xx responses: both targets answer every request with 200).
_CLIENT = """
import json, sys
import nhbench
proto, port, n, cpu, conns, workers, rps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \
    int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
path = sys.argv[11] if len(sys.argv) > 11 else "/"
extra = {"protocol": "http2", "h2c": True} if proto == "h2" else {}
if float(sys.argv[8]) > 0:
    # Traces on (docs/telemetry.md): the spans go to a port nothing listens on; the worker's
    # cost is what is counted (the exporter is another thread).
    extra.update(trace="zipkin://127.0.0.1:1/api/v2/spans", trace_sample_rate=float(sys.argv[8]))
if len(sys.argv) > 9 and sys.argv[9] != "[]":
    extra["check"] = json.loads(sys.argv[9])  # response checks (docs/checks.md)
if len(sys.argv) > 10 and sys.argv[10]:
    extra["group_by"] = sys.argv[10]  # statistics per group (docs/engine.md "Groups")
r = nhbench.run(f"http://127.0.0.1:{port}{path}", rps=rps, connections=conns, concurrency=workers,
                cpus=[cpu] * workers, duration="120s",
                termination_predicate={"upstream_rq_total": n}, **extra)
print(json.dumps({"completed": r.counters["benchmark.http_2xx"]
                  + r.counters.get("benchmark.check_failed", 0),
                  "sent": r.counters["upstream_rq_total"]}))
"""

_TOTALS = re.compile(r"^(?:summary|totals):\s+(\d+)", re.MULTILINE)
CLIENTS = ("nhbench", "nhbench-all", "nhbench-h2c", "nhbench-2w", "nhbench-fixed", "floor",
           "floor-uring", "floor-timer", "wrk", "h2load", "h2load-h2c")
TARGETS = ("nginx", "nhbench", "nginx-varying", "nhbench-varying")
# The path each target is asked for: nginx-varying's location adds a request id.
_PATHS = {"nginx-varying": "/request-id"}
# The header the nhbench-varying server adds to every response.
DELTA_HEADER = "x-nhb-previous-request-delta"


class Skip(Exception):
    """This client cannot run here (not installed, refused the scenario): its row says why."""


def callgrind(argv: list[str], out: Path, cpu: int, toggle: str | None,
              parse: Callable[[str], int]) -> tuple[int, int]:
    """(instructions, requests completed) of one run of argv under callgrind."""
    vg = ["taskset", "-c", str(cpu), "valgrind", "--tool=callgrind",
          f"--callgrind-out-file={out}"]
    if toggle:
        vg.append(f"--toggle-collect={toggle}")
    # One hash seed for every run: with a random one the interpreter's dict lookups (tens of
    # millions of instructions of import work) move by tens of instructions per request
    # between the short and the long run of nhbench-all (docs/benchmarks.md, "The threads
    # besides the workers").
    proc = subprocess.run([*vg, *argv], capture_output=True, text=True,
                          env={**child_env(), "PYTHONHASHSEED": "0"},
                          check=False, timeout=900)
    if proc.returncode != 0:
        raise Skip(f"exit status {proc.returncode}: " + proc.stderr.strip()[-300:])
    try:
        done = parse(proc.stdout)
    except (ValueError, KeyError, IndexError) as exc:
        raise Skip(f"could not read its output ({exc}): {proc.stdout[-300:]}") from None
    match = _TOTALS.search(out.read_text())
    if match is None:
        raise Skip(f"no totals in {out}")
    return int(match.group(1)), done


def _last_json(key: str) -> Callable[[str], int]:
    return lambda out: int(json.loads(out.strip().splitlines()[-1])[key])


def _wrk_done(out: str) -> int:
    m = re.search(r"(\d+) requests in ", out)
    if not m:
        raise ValueError("no 'N requests in' line")
    if re.search(r"Non-2xx or 3xx responses: (\d+)", out):
        raise ValueError("wrk saw non-2xx responses")
    return int(m.group(1))


def _h2load_done(out: str) -> int:
    m = re.search(r"requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded", out)
    if not m:
        raise ValueError("no 'requests:' line")
    return int(m.group(1))


def run_pair(client: str, port: int, conns: int, cfg: argparse.Namespace,
             tmp: Path, path: str = "/") -> tuple[float, str]:
    """(instructions per request, details) of one short and one long run of `client`."""
    results = []
    if path != "/" and client.startswith(("floor", "h2load")):
        raise Skip(f"asks only for / (the target's varying head is at {path})")
    for size, seconds in ((cfg.small, cfg.short_s), (cfg.large, cfg.long_s)):
        out = tmp / f"callgrind.{client}.{port}.{size}.out"
        if client.startswith("nhbench"):
            proto = "h2" if client == "nhbench-h2c" else "h1"
            workers = 2 if client == "nhbench-2w" else 1
            rps = cfg.fixed_rps if client == "nhbench-fixed" else 0
            argv = [sys.executable, "-c", _CLIENT, proto, str(port), str(size),
                    str(cfg.client_cpu), str(conns), str(workers), str(rps),
                    str(cfg.trace_sample_rate), json.dumps(cfg.check), cfg.group_by or "", path]
            toggle = None if client == "nhbench-all" else "worker_main"
            results.append(callgrind(argv, out, cfg.client_cpu, toggle, _last_json("completed")))
        elif client in ("floor", "floor-uring", "floor-timer"):
            try:
                binary = build("request_floor_uring" if client == "floor-uring" else "request_floor")
            except BuildError as e:
                raise Skip(str(e)) from None
            argv = [str(binary), "--port", str(port), "--connections", str(conns),
                    "--requests", str(size)]
            if client == "floor-timer":
                argv += ["--rate", str(cfg.fixed_rps)]
            results.append(callgrind(argv, out, cfg.client_cpu, None, _last_json("requests")))
        elif client == "wrk":
            if not shutil.which("wrk"):
                raise Skip("wrk is not installed")
            argv = ["wrk", "-t1", f"-c{conns}", f"-d{seconds:g}s", f"http://127.0.0.1:{port}{path}"]
            results.append(callgrind(argv, out, cfg.client_cpu, None, _wrk_done))
        elif client in ("h2load", "h2load-h2c"):
            if not shutil.which("h2load"):
                raise Skip("h2load is not installed")
            mode = ["--h1"] if client == "h2load" else ["-m1"]
            argv = ["h2load", *mode, "-t1", f"-c{conns}", f"-n{size}",
                    f"http://127.0.0.1:{port}/"]
            results.append(callgrind(argv, out, cfg.client_cpu, None, _h2load_done))
    (ir_s, done_s), (ir_l, done_l) = results
    if done_l <= done_s:
        raise Skip(f"the long run completed {done_l} requests, the short one {done_s}")
    per = (ir_l - ir_s) / (done_l - done_s)
    return per, f"{ir_s:,} for {done_s:,} requests, {ir_l:,} for {done_l:,}"


@contextlib.contextmanager
def target(name: str, cfg: argparse.Namespace) -> Iterator[dict[str, int]]:
    """The ports (h1, h2c) of target `name` running alone on the server CPU."""
    if name.startswith("nginx"):
        try:
            with NginxOrigin(access_log=False, listeners=("h1", "h2c"), cpu=cfg.server_cpu,
                             tuned=True) as nginx:
                yield {k: int(nginx.url(k).rstrip("/").rsplit(":", 1)[1])
                       for k in ("h1", "h2c")}
        except NginxError as e:
            raise Skip(str(e)) from None
    else:
        body = [] if cfg.server_body_size is None else \
            ["--response-body-size", str(cfg.server_body_size)]
        if cfg.server_error_body_every:
            # Every Nth response a 200 error body (docs/server.md): responses that differ.
            body += ["--error-body-every", str(cfg.server_error_body_every)]
        if name == "nhbench-varying":
            body += ["--emit-previous-request-delta-in-response-header", DELTA_HEADER]
        with nhbench_server(cfg.server_cpu, body, tool="callgrind_per_request") as srv:
            # One listener: it tells HTTP/1.1 and h2c apart by the HTTP/2 preface.
            yield {"h1": srv.port, "h2c": srv.port}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", default=",".join(CLIENTS),
                        help=f"comma list of {', '.join(CLIENTS)} (default all)")
    parser.add_argument("--protocols", default=None,
                        help="the older spelling: h1 = nhbench, h2 = nhbench-h2c; with it "
                        "the target is the nhbench server only (unless --targets)")
    parser.add_argument("--targets", default=None, help="comma list of nginx, nhbench")
    parser.add_argument("--nginx-connections", type=int, default=50)
    parser.add_argument("--server-connections", type=int, default=10)
    parser.add_argument("--small", type=int, default=4000, help="requests of the short run")
    parser.add_argument("--large", type=int, default=24000, help="requests of the long run")
    parser.add_argument("--short-s", type=float, default=1.0,
                        help="wrk: seconds of the short run (wrk has no request count)")
    parser.add_argument("--long-s", type=float, default=6.0,
                        help="wrk: seconds of the long run")
    parser.add_argument("--pairs", type=int, default=1, help="pairs of runs per row")
    parser.add_argument("--fixed-rps", type=int, default=2000,
                        help="nhbench-fixed and floor-timer: the release rate (default 2000)")
    parser.add_argument("--trace-sample-rate", type=float, default=0.0,
                        help="nhbench clients: trace this fraction of the requests (0: off)")
    parser.add_argument("--check", action="append", default=[],
                        help="a response check for the nhbench clients (docs/checks.md); "
                        "repeatable")
    parser.add_argument("--group-by", default=None,
                        help="--group-by for the nhbench clients (docs/engine.md \"Groups\"), "
                        "e.g. header:server")
    parser.add_argument("--server-body-size", type=int, default=None,
                        help="the nhbench target's response body size (default: 13 bytes)")
    parser.add_argument("--server-error-body-every", type=int, default=0, metavar="N",
                        help="the nhbench target sends every Nth response as a 200 error body "
                        "(default 0: never)")
    parser.add_argument("--client-cpu", type=int, default=0)
    parser.add_argument("--server-cpu", type=int, default=1)
    parser.add_argument("--json", type=Path, help="also write the rows to this JSON file")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="keep the callgrind outputs in DIR (for callgrind_annotate's "
                        "per-function figures), named callgrind.CLIENT.PORT.REQUESTS.out")
    args = parser.parse_args(argv)
    if args.protocols is not None:
        names = {"h1": "nhbench", "h2": "nhbench-h2c"}
        protos = [p.strip() for p in args.protocols.split(",") if p.strip()]
        if not protos or any(p not in names for p in protos):
            parser.error(f"--protocols: must be h1, h2 or h1,h2 (got {args.protocols!r})")
        clients = [names[p] for p in protos]
        targets = ["nhbench"]
    else:
        clients = [c.strip() for c in args.clients.split(",") if c.strip()]
        targets = list(TARGETS)
    if args.targets is not None:
        targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    bad = [c for c in clients if c not in CLIENTS] + [t for t in targets if t not in TARGETS]
    if not clients or not targets or bad:
        parser.error(f"--clients/--targets: unknown or empty ({', '.join(bad)})")
    if args.small <= 0 or args.large <= args.small:
        parser.error("--small and --large: need 0 < small < large")
    if args.short_s <= 0 or args.long_s <= args.short_s:
        parser.error("--short-s and --long-s: need 0 < short < long")
    if args.server_error_body_every < 0:
        parser.error("--server-error-body-every: must be 0 or more")
    if args.pairs < 1 or args.nginx_connections < 1 or args.server_connections < 1 or args.fixed_rps < 1:
        parser.error("--pairs, --nginx-connections, --server-connections and --fixed-rps "
                     "must be positive")
    if not shutil.which("valgrind"):
        raise SystemExit("callgrind_per_request: valgrind is not installed "
                         "(apt-get install valgrind)")
    check_cpu_args(parser, args, "callgrind_per_request")
    rows: list[dict[str, object]] = []
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
    with (contextlib.nullcontext(str(args.keep)) if args.keep is not None
          else tempfile.TemporaryDirectory(prefix="nhb-callgrind-")) as tmpdir:
        for tname in targets:
            conns = args.nginx_connections if tname.startswith("nginx") \
                else args.server_connections
            try:
                ctx = target(tname, args)
                ports = ctx.__enter__()
            except Skip as e:
                print(f"callgrind_per_request: target {tname} unavailable: {e}",
                      file=sys.stderr)
                continue
            try:
                for client in clients:
                    for pair in range(1, args.pairs + 1):
                        try:
                            port = ports["h2c" if client.endswith("-h2c") else "h1"]
                            per, detail = run_pair(client, port, conns, args, Path(tmpdir),
                                                   _PATHS.get(tname, "/"))
                        except Skip as e:
                            print(f"{tname:<15} {conns:>3} conns {client:<12} n/a ({e})",
                                  flush=True)
                            rows.append({"target": tname, "connections": conns,
                                         "client": client, "skipped": str(e)})
                            break
                        print(f"{tname:<15} {conns:>3} conns {client:<12} pair {pair}: "
                              f"{per:>8,.0f} instructions/request ({detail})", flush=True)
                        rows.append({"target": tname, "connections": conns, "client": client,
                                     "pair": pair, "instructions_per_request": round(per, 1),
                                     "detail": detail})
            finally:
                ctx.__exit__(None, None, None)
    print()
    print("| target | connections | client | instructions/request (median of pairs) |")
    print("|---|---:|---|---:|")
    seen: dict[tuple[object, object, object], list[float]] = {}
    for r in rows:
        key = (r["target"], r["connections"], r["client"])
        if "instructions_per_request" in r:
            seen.setdefault(key, []).append(float(r["instructions_per_request"]))  # type: ignore[arg-type]
        else:
            seen.setdefault(key, [])
    for (t, c, cl), vals in seen.items():
        vals.sort()
        cell = f"{vals[len(vals) // 2]:,.0f}" if vals else "n/a"
        print(f"| {t} | {c} | {cl} | {cell} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
