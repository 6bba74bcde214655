#!/usr/bin/env python3
"""Peer comparison: nhbench against wrk, h2load (and fortio/oha when installed).

Client and server are pinned to different CPUs; every tool loads the same target, and for
each run we record the requests completed, the rate, and the client's CPU time per request.
The ratios inside one invocation are the result (absolute numbers depend on the machine).

    nox -s bench [-- ARGS]                          # or ./dev bench [-- ARGS]
    PYTHONPATH=src python3 benchmarks/peer_compare.py [ARGS]

Scenarios
  max     HTTP/1.1, as fast as possible, --connections (50) connections, --duration (5 s):
          nhbench rps=0, wrk -t1, h2load --h1 -t1, fortio -qps 0, oha.  Reference: wrk.
  fixed   HTTP/1.1 at a fixed --fixed-rps (20 000) over the same connections:
          nhbench rps=N, h2load --h1 --rps N/connections, fortio -qps N, oha -q N.
          Reference: h2load.
  h2c     HTTP/2 with prior knowledge, as fast as possible, --h2-connections (10)
          connections x --h2-streams (100) streams: h2load -t1 -c10 -m100; nhbench --h2c
          --connections 10 --max-concurrent-streams 100 --max-active-requests 1000.
          Reference: h2load.
  tls-h1  HTTP/1.1 over TLS (ALPN http/1.1), as fast as possible, --connections
          connections: h2load --h1, wrk; nhbench -k.  Reference: h2load.
  tls-h2  HTTP/2 over TLS (ALPN h2), as fast as possible, like h2c.  Reference: h2load.
  The TLS scenarios use persistent connections, so they measure TLS record encryption and
  decryption per request, not handshakes (which happen once per connection at start-up).
  tcp-echo  TCP echo, as fast as possible, --connections connections, each
          request --payload-size (64) bytes out and the same bytes back: fortio load
          -qps 0 -c N -payload-size P tcp://…; nhbench tcp://… --payload-size P.
          Target: --echo-target (nhbench: the test server's --tcp-echo; fortio: fortio
          server's tcp-echo port).  Reference: fortio.
  grpc    gRPC unary calls over h2c, as fast as possible, --h2-connections x
          --h2-streams: h2load -d FRAME with content-type application/grpc and te: trailers
          (a framed empty request: 5 bytes 00 00000000), fortio load -grpc [-ping] -c C -s M,
          nhbench grpc://… .  --grpc-call health (grpc.health.v1.Health/Check, default) or
          ping (fgrpc.PingServer/Ping).  Target: --grpc-target (fortio: fortio server's
          grpc port, default; nhbench: the test server's h2c listener).  Reference: h2load.
  floor   The floors (benchmarks/floor/request_floor.c, built with the system cc): in
          max, the request floor (epoll, one write and one read per request, byte counting
          only); in fixed, the timer floor (the same client releasing on a periodic timerfd,
          one wake-up per release). Every row gets its ratio to the floor ("vs floor") next
          to its ratio to the reference tool.
  A tool that refuses a scenario (e.g. an nhbench without tcp:// or gRPC) gets the row
  "n/a (reason)" and the rest of the benchmark goes on.

How CPU is measured
  wrk, h2load, fortio, oha, floor: user+sys of the child process from os.wait4's rusage (the tool
  runs under `taskset -c CLIENT_CPU`, which execs it, so it is the same process).
  nhbench: a child Python pins itself to CLIENT_CPU, imports nhbench and loads the core
  (interpreter start-up excluded), then takes getrusage(RUSAGE_SELF) right before start()
  and right after the run finished, before the Python Result is built. That covers every
  thread of the process: the C worker, which records all its histograms during the run, and
  the Python main thread polling for the end. Building the Result (histograms -> hdrh) is
  reported separately as `result_cpu_s` in the JSON.
  The server's CPU (nginx master+worker, or the nhbench server process) is read from
  /proc around each run, to show which side saturates first.

Output: one table per scenario (median of --repeat runs, the spread in brackets), the
goals of the first engine, a markdown and a JSON file in benchmarks/out/, and with --update-docs
the "Latest results" section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import datetime as _dt
import json
import math
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# Run as `python benchmarks/peer_compare.py`: benchmarks/ is first on sys.path.
from common import (
    BODY,
    CLK_TCK,
    DOCS,
    OUT_DIR,
    check_cpu_args,
    child_env,
    fortio_binary,
    free_port,
    machine_busy_s,
    machine_info,
    proc_tree_cpu,
    stop_process,
    tool_seconds,
    update_docs,
    wait_port,
)
from nginx_origin import NginxError, NginxOrigin

sys.path.insert(0, str(Path(__file__).resolve().parent / "floor"))
from build import BuildError as FloorBuildError  # noqa: E402 - benchmarks/floor/build.py
from build import build as floor_build  # noqa: E402

BEGIN_MARK = "<!-- results:begin -->"
END_MARK = "<!-- results:end -->"

# The performance goals in force (docs/benchmarks.md, "Performance goals: where they
# stand"): nhbench's client CPU per request over that of the tool named, the floor client
# for HTTP/1.1 (the request floor at max rate, the timer floor at a fixed rate), h2load for
# HTTP/2 and TLS.
GOALS = {"max": ("floor", 1.05), "fixed": ("floor", 1.05), "h2c": ("h2load", 0.85),
         "tls-h1": ("h2load", 0.90), "tls-h2": ("h2load", 0.88)}
# The tool of each scenario's "vs" column; the echo and gRPC rows have one but no goal: the
# ratio is printed, nothing is judged.
REFERENCES = {"max": "wrk", "fixed": "h2load", "h2c": "h2load", "tls-h1": "h2load",
              "tls-h2": "h2load", "tcp-echo": "fortio", "grpc": "h2load"}
SCENARIO_KEYS = tuple(REFERENCES)
# Scenarios whose target is chosen by their own option instead of --target.
ECHO_KEYS = ("tcp-echo",)
GRPC_KEYS = ("grpc",)
# The gRPC methods of --grpc-call. Both take a message whose every field is optional, so
# the empty message (a 5-byte frame: not compressed, length 0) is a valid request to each.
# Fortio's ping service is `PingServer` in proto package `fgrpc` (fgrpc/ping.proto): its
# server answers /fortio.PingServer/Ping with grpc-status 12 (unknown service).
GRPC_PATHS = {"health": "/grpc.health.v1.Health/Check", "ping": "/fgrpc.PingServer/Ping"}
GRPC_EMPTY_FRAME = b"\x00\x00\x00\x00\x00"
# nhbench's flags for each call (docs/protocols.md): grpc:// calls the health check by
# default; the ping service takes Fortio's own spelling.
NHBENCH_GRPC_ARGS = {"health": [], "ping": ["-grpc", "-ping"]}
# How each scenario reaches the server: the Target.urls key, and nhbench's options.
PROTOCOL_OPTIONS: dict[str, dict[str, Any]] = {
    "h1": {},
    "h2c": {"protocol": "http2", "h2c": True},
    "tls-h1": {"protocol": "http1", "insecure": True},
    "tls-h2": {"protocol": "http2", "insecure": True},
    "tcp-echo": {},
    "grpc": {},
}


# --------------------------------------------------------------------------------------------
# nhbench child: `peer_compare.py --nhbench-child JSON` (runs in its own pinned process)
# --------------------------------------------------------------------------------------------


def _thread_cpu() -> dict[str, float]:
    """CPU seconds per thread of this process, keyed 'name/tid'."""
    out: dict[str, float] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                data = f.read()
        except OSError:
            continue
        name = data[data.index("(") + 1 : data.rindex(")")]
        fields = data[data.rindex(")") + 2 :].split()
        out[f"{name}/{tid}"] = (int(fields[11]) + int(fields[12])) / CLK_TCK
    return out


def _cli_options(args: list[str]) -> dict[str, Any]:
    """The Options fields that `nhbench run URI ARGS` sets, by parsing ARGS with nhbench's own
    command line: the echo and gRPC rows are written in the documented flags (docs/protocols.md),
    so they do not depend on the names of the Options fields behind them. A flag this nhbench
    does not know raises ValueError with argparse's message."""
    import io

    from nhbench.cli import build_parser

    parser = build_parser()
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            base = vars(parser.parse_args(["run", "http://127.0.0.1/"]))
            given = vars(parser.parse_args(["run", "http://127.0.0.1/", *args]))
        except SystemExit:
            lines = err.getvalue().strip().splitlines()
            raise ValueError(lines[-1] if lines else f"nhbench run refused {args}") from None
    return {k: v for k, v in given.items() if k != "uri" and base.get(k) != v}


def _refuse(reason: str) -> None:
    """The child's answer when nhbench cannot run the scenario: the row becomes n/a."""
    print(json.dumps({"refused": " ".join(reason.split())[:300]}))


def nhbench_child(spec: dict[str, Any]) -> None:
    cpu = spec["client_cpu"]
    os.sched_setaffinity(0, {cpu})
    import nhbench

    with contextlib.suppress(Exception):  # load the compiled core now, not inside the run
        from nhbench._run import load_core

        load_core()
    protocol = spec.get("protocol", "h1")
    extra: dict[str, Any] = dict(PROTOCOL_OPTIONS[protocol])
    if protocol in ("h2c", "tls-h2", "grpc"):
        # h2load -cC -mM keeps C x M requests in flight; Nighthawk's equivalent is
        # max_active_requests, with the streams per connection capped at M.
        extra["max_concurrent_streams"] = spec["streams"]
        extra["max_active_requests"] = spec["connections"] * spec["streams"]
    # An nhbench built before tcp:// or gRPC existed refuses these options or
    # the run; the row then says why (n/a) instead of stopping the benchmark.
    try:
        extra.update(_cli_options(spec.get("cli_args", [])))
        bench = nhbench.Benchmark(
            spec["url"],
            rps=spec["rps"],
            duration=spec["duration"],
            connections=spec["connections"],
            concurrency=1,
            cpus=str(cpu),
            sequencer_idle_strategy=spec["idle_strategy"],
            burst_size=spec.get("burst_size", 0),
            no_default_failure_predicates=True,
            **extra,
        )
    except Exception as exc:  # noqa: BLE001 - any refusal is reported, not raised
        _refuse(f"nhbench refused the options: {exc}")
        return
    threads_before = _thread_cpu()
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.monotonic()
    try:
        bench.start()
    except Exception as exc:  # noqa: BLE001 - e.g. the core refuses a protocol it lacks
        _refuse(f"nhbench refused the run: {exc}")
        return
    # Sample the threads while they live (a worker's /proc entry goes when it exits), to
    # split the process's CPU between the C worker(s) and the Python main thread.
    threads_seen = dict(threads_before)
    while not bench.wait(0.25):
        threads_seen.update(_thread_cpu())
    wall = time.monotonic() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    threads_seen.update(_thread_cpu())
    threads_after = threads_seen
    result = bench.result()
    r2 = resource.getrusage(resource.RUSAGE_SELF)

    counters = result.counters
    ok = int(counters.get("benchmark.http_2xx", 0))
    names = [
        "benchmark.http_1xx", "benchmark.http_3xx", "benchmark.http_4xx",
        "benchmark.http_5xx", "benchmark.http_xxx", "benchmark.pool_overflow",
        "benchmark.pool_connection_failure", "benchmark.stream_resets",
        "benchmark.request_timeout", "upstream_cx_connect_fail",
        "upstream_cx_destroy_remote", "upstream_cx_protocol_error",
    ]
    # The echo and gRPC counters: a mismatched echo, a gRPC status other than OK, a malformed gRPC
    # response; whatever their exact names, they count failures.
    names += sorted(n for n in counters if n.startswith(("benchmark.echo_", "benchmark.grpc_"))
                    and n != "benchmark.grpc_status_0")
    errors = {name: int(counters[name]) for name in names
              if name in counters and int(counters[name])}
    if protocol == "grpc":
        # A gRPC call succeeds with grpc-status 0, which comes with HTTP 200 as every
        # failure does; HTTP 2xx alone would count failed calls as done.
        if not any(n.startswith("benchmark.grpc_status_") for n in counters):
            _refuse("no benchmark.grpc_status_* counters in the result: this nhbench has "
                    f"no gRPC client ({ok} HTTP 2xx responses)")
            return
        ok = int(counters.get("benchmark.grpc_status_0", 0))

    def pct(stat_id: str, p: float) -> float | None:
        try:
            return float(result.stat(stat_id).p(p))
        except Exception:  # noqa: BLE001 - informational only
            return None

    threads = {
        k: round(threads_after.get(k, 0.0) - threads_before.get(k, 0.0), 3)
        for k in threads_after
    }
    print(json.dumps({
        "requests": ok,
        "duration": float(result.duration),
        "wall_s": wall,
        "cpu_s": (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime),
        "user_s": r1.ru_utime - r0.ru_utime,
        "sys_s": r1.ru_stime - r0.ru_stime,
        "result_cpu_s": (r2.ru_utime - r1.ru_utime) + (r2.ru_stime - r1.ru_stime),
        "threads_cpu_s": {k: v for k, v in threads.items() if v > 0},
        "p50": pct("benchmark_http_client.scheduled_to_response", 50),
        "p99": pct("benchmark_http_client.scheduled_to_response", 99),
        "p99_from_send": pct("benchmark_http_client.request_to_response", 99),
        "lateness_p50": pct("sequencer.release_lateness", 50),
        "lateness_p99": pct("sequencer.release_lateness", 99),
        "upstream_rq_total": int(counters["upstream_rq_total"]),
        "sequencer_blocked": int(counters["sequencer.blocked"]),
        "errors": errors,
        "success": bool(getattr(result, "success", True)),
    }))


# --------------------------------------------------------------------------------------------
# targets
# --------------------------------------------------------------------------------------------


@dataclass
class Target:
    name: str
    urls: dict[str, str]  # by protocol: h1, h2c, tls-h1, tls-h2
    pids: list[int]  # roots of the server's process trees, for its CPU


@contextlib.contextmanager
def nginx_target(server_cpu: int) -> Iterator[Target]:
    try:
        with NginxOrigin(access_log=False, listeners=("h1", "h2c", "tls"), cpu=server_cpu,
                         tuned=True) as nginx:
            yield Target("nginx", {
                "h1": nginx.url("h1"), "h2c": nginx.url("h2c"),
                "tls-h1": nginx.url("tls"), "tls-h2": nginx.url("tls"),
            }, [nginx.pid])
    except NginxError as e:
        raise SystemExit(f"peer_compare: {e}") from None


@contextlib.contextmanager
def nhbench_target(server_cpu: int) -> Iterator[Target]:
    import nhbench

    # One server for HTTP/1.1 and h2c (it tells them apart by the HTTP/2 preface; gRPC is
    # HTTP/2 too) with a TCP echo listener, one with a self-signed certificate for TLS (h2 or
    # HTTP/1.1 by ALPN), both on the server CPU.
    plain = nhbench.TestServer(
        cpus=[server_cpu], response_body_size=len(BODY), subprocess=True,
        tcp_echo="127.0.0.1:0",
    )
    tls = nhbench.TestServer(
        cpus=[server_cpu], response_body_size=len(BODY), subprocess=True, tls_self_signed=True
    )
    with contextlib.ExitStack() as stack:
        pids = []
        for server in (plain, tls):
            server.start()
            stack.callback(server.stop)
            # TestServer.pid is the child's (subprocess=True). The server's CPU was not
            # measured before the echo and gRPC rows: this looked for a `_process` attribute that
            # TestServer does not have.
            if server.pid != os.getpid():
                pids.append(server.pid)
                # The C worker is pinned by cpus=; pin the Python main thread too.
                with contextlib.suppress(OSError):
                    for tid in os.listdir(f"/proc/{server.pid}/task"):
                        os.sched_setaffinity(int(tid), {server_cpu})
        echo_host, echo_port = plain.tcp_echo_address
        yield Target("nhbench-server", {
            "h1": plain.url, "h2c": plain.url, "tls-h1": tls.url, "tls-h2": tls.url,
            "tcp-echo": f"tcp://{echo_host}:{echo_port}",
            "grpc": "grpc://" + plain.url.split("://", 1)[1].rstrip("/"),
        }, pids)


@contextlib.contextmanager
def fortio_target(server_cpu: int) -> Iterator[Target]:
    """`fortio server` alone on the server CPU: its TCP echo and gRPC (health and ping)
    ports, the independent peers of the echo and gRPC rows (Go; GOMAXPROCS follows the pinning, 1)."""
    binary = fortio_binary()
    if binary is None:
        raise TargetUnavailable("fortio is not installed "
                                "(go install fortio.org/fortio@v1.66.5)")
    grpc_port, echo_port, http_port = free_port(), free_port(), free_port()
    argv = ["taskset", "-c", str(server_cpu), binary, "server", "-loglevel", "Warning",
            "-http-port", f"127.0.0.1:{http_port}", "-grpc-port", f"127.0.0.1:{grpc_port}",
            "-tcp-port", f"127.0.0.1:{echo_port}", "-udp-port", "disabled",
            "-redirect-port", "disabled"]
    with tempfile.TemporaryDirectory(prefix="peer_compare-fortio-") as data:
        # Fortio's UI saves results in its data directory: a scratch one, not the cwd.
        argv[5:5] = ["-data-dir", data]
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, cwd=data)
        try:
            for port in (grpc_port, echo_port):
                wait_port(port)
            yield Target("fortio-server", {
                "tcp-echo": f"tcp://127.0.0.1:{echo_port}",
                "grpc": f"grpc://127.0.0.1:{grpc_port}",
            }, [proc.pid])
        finally:
            stop_process(proc)


class TargetUnavailable(Exception):
    """A target that cannot start here (its program is not installed)."""


TARGETS = {"nginx": nginx_target, "nhbench": nhbench_target, "fortio": fortio_target}


# --------------------------------------------------------------------------------------------
# clients
# --------------------------------------------------------------------------------------------


@dataclass
class Sample:
    tool: str
    requests: int = 0
    duration: float = 0.0
    cpu_s: float = 0.0
    server_cpu_s: float | None = None
    other_cpu_s: float | None = None  # busy CPU of everything else on the machine
    wall_s: float = 0.0
    errors: dict[str, int] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    failed: str | None = None
    # The tool cannot run this scenario at all (set together with `failed`): the row is
    # "n/a (reason)" and the tool is not asked again in this scenario.
    refused: str | None = None

    @property
    def rps(self) -> float:
        return self.requests / self.duration if self.duration > 0 else 0.0

    @property
    def us_per_req(self) -> float:
        return self.cpu_s / self.requests * 1e6 if self.requests else float("nan")


def run_child(argv: list[str], timeout: float, env: dict[str, str] | None = None
              ) -> tuple[int, str, str, Any, float]:
    """Run argv; return (rc, stdout, stderr, wait4's rusage, wall seconds)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.monotonic()
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                env=env)
        deadline = t0 + timeout
        status = None
        rusage = None
        while True:
            pid, status, rusage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                proc.kill()
                _, status, rusage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.02)
        proc.returncode = os.waitstatus_to_exitcode(status)  # keep Popen from re-waiting
        wall = time.monotonic() - t0
        out.seek(0)
        err.seek(0)
        return (proc.returncode, out.read().decode(errors="replace"),
                err.read().decode(errors="replace"), rusage, wall)


class Tool:
    name = ""
    ref_for: tuple[str, ...] = ()

    def argv(self, sc: Scenario, url: str) -> list[str]:
        raise NotImplementedError

    def parse(self, sample: Sample, out: str, err: str) -> None:
        raise NotImplementedError

    def supports(self, sc: Scenario) -> bool:
        return True

    def binary(self) -> str | None:
        """The tool's executable, or None when it is not installed."""
        return shutil.which(self.name)

    def measure(self, sc: Scenario, url: str, cfg: argparse.Namespace) -> Sample:
        sample = Sample(self.name)
        argv = self.argv(sc, url)
        argv = ["taskset", "-c", str(cfg.client_cpu), self.binary() or argv[0], *argv[1:]]
        rc, out, err, ru, wall = run_child(argv, timeout=sc.duration + 60)
        sample.cpu_s, sample.wall_s = ru.ru_utime + ru.ru_stime, wall
        sample.extra.update(user_s=ru.ru_utime, sys_s=ru.ru_stime, nvcsw=ru.ru_nvcsw,
                            nivcsw=ru.ru_nivcsw)
        sample.extra["argv"] = " ".join(argv)
        sample.extra["scenario"] = sc.protocol  # for parse()
        try:
            self.parse(sample, out, err)
        except (ValueError, KeyError, AttributeError, IndexError) as exc:
            sample.failed = f"could not parse output ({exc!r}); rc={rc}: {(out + err)[-300:]}"
        if rc != 0 and not sample.failed:
            sample.failed = f"exit status {rc}: {(out + err)[-300:]}"
        return sample


class Wrk(Tool):
    name = "wrk"

    def supports(self, sc: Scenario) -> bool:
        # wrk has no fixed rate (that is wrk2) and speaks only HTTP/1.1.
        return sc.rps == 0 and sc.protocol in ("h1", "tls-h1")

    def argv(self, sc: Scenario, url: str) -> list[str]:
        return ["wrk", "-t1", f"-c{sc.connections}", f"-d{sc.duration:g}s", url]

    def parse(self, sample: Sample, out: str, err: str) -> None:
        m = re.search(r"(\d+) requests in ([\d.]+\w+),", out)
        if not m:
            raise ValueError("no 'N requests in' line")
        sample.requests = int(m.group(1))
        sample.duration = tool_seconds(m.group(2))
        m = re.search(r"Requests/sec:\s+([\d.]+)", out)
        sample.extra["reported_rps"] = float(m.group(1)) if m else None
        m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
        if m:
            sample.errors["non_2xx_3xx"] = int(m.group(1))
            sample.requests -= int(m.group(1))
        m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)",
                      out)
        if m:
            for k, v in zip(("connect", "read", "write", "timeout"), m.groups(), strict=True):
                if int(v):
                    sample.errors[k] = int(v)


_FRAME_DIR: list[str] = []


def grpc_frame_file() -> str:
    """A file holding GRPC_EMPTY_FRAME, for h2load -d (made once per benchmark)."""
    if not _FRAME_DIR:
        _FRAME_DIR.append(tempfile.mkdtemp(prefix="peer_compare-"))
        atexit.register(shutil.rmtree, _FRAME_DIR[0], True)
    path = os.path.join(_FRAME_DIR[0], "empty-request.grpc")
    if not os.path.exists(path):
        with open(path, "wb") as f:
            f.write(GRPC_EMPTY_FRAME)
    return path


def grpc_probe(url: str, call: str) -> str | None:
    """None if the target answers one unary call of `call` with grpc-status 0, else what
    went wrong. h2load sees only the HTTP status, and any HTTP/2 server answers a POST with
    200, so a gRPC row means something only once one call is known to succeed; nghttp
    (nghttp2-client, the package of h2load) prints the trailers."""
    if not shutil.which("nghttp"):
        return "nghttp (nghttp2-client) is not installed, so the target's gRPC is unchecked"
    argv = ["nghttp", "-v", "-d", grpc_frame_file(), "-H", "content-type: application/grpc",
            "-H", "te: trailers", "http://" + grpc_host_port(url) + GRPC_PATHS[call]]
    try:
        p = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=10,
                           check=False)
    except subprocess.TimeoutExpired:
        return f"the target did not answer a gRPC call in 10 s ({url})"
    status = re.findall(r"\) grpc-status: (\S+)", p.stdout)
    if status == ["0"]:
        return None
    if not status:
        return (f"the target does not answer gRPC: no grpc-status in the response to "
                f"{GRPC_PATHS[call]}")
    return f"the target answered {GRPC_PATHS[call]} with grpc-status {status[-1]}"


def grpc_host_port(url: str) -> str:
    """'grpc://127.0.0.1:8079' -> '127.0.0.1:8079' (the destination Fortio's -grpc takes)."""
    return url.split("://", 1)[1].rstrip("/")


class H2load(Tool):
    name = "h2load"

    def supports(self, sc: Scenario) -> bool:
        return sc.protocol != "tcp-echo"

    def argv(self, sc: Scenario, url: str) -> list[str]:
        argv = ["h2load", "-t1", f"-c{sc.connections}", "-D", f"{sc.duration:g}"]
        if sc.protocol in ("h1", "tls-h1"):
            argv.insert(1, "--h1")
        else:
            # http:// means h2c with prior knowledge to h2load; https:// negotiates h2.
            argv += [f"-m{sc.streams}"]
        if sc.rps:
            # --rps is per client connection.
            argv += ["--rps", f"{sc.rps / sc.connections:g}"]
        if sc.protocol == "grpc":
            # A gRPC unary call is an HTTP/2 POST of one length-prefixed message with these
            # two headers; h2load sends the same framed (empty) request on every stream. It
            # reads only :status, so the check that calls succeed is in parse().
            argv += ["-d", grpc_frame_file(), "-H", "content-type: application/grpc",
                     "-H", "te: trailers"]
            url = "http://" + grpc_host_port(url) + GRPC_PATHS[sc.grpc_call]
        return [*argv, url]

    def parse(self, sample: Sample, out: str, err: str) -> None:
        m = re.search(r"finished in ([\d.]+\w+), ([\d.]+) req/s", out)
        if not m:
            raise ValueError("no 'finished in' line")
        sample.duration = tool_seconds(m.group(1))
        sample.extra["reported_rps"] = float(m.group(2))
        m = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, "
                      r"(\d+) failed, (\d+) errored, (\d+) timeout", out)
        if not m:
            raise ValueError("no 'requests:' line")
        _total, _started, _done, ok, failed, errored, tmo = map(int, m.groups())
        sample.requests = ok
        for k, v in (("failed", failed), ("errored", errored), ("timeout", tmo)):
            if v:
                sample.errors[k] = v
        m = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", out)
        # A request can have a 2xx status and still not count as succeeded (the run ended
        # while its body was arriving), so only fewer 2xx than successes means errors.
        if m and int(m.group(1)) < ok:
            sample.errors["non_2xx"] = ok - int(m.group(1))
        m = re.search(r"traffic: .*? \((\d+)\) data", out)
        if m and ok:
            sample.extra["data_bytes_per_req"] = int(m.group(1)) / ok
        if sample.extra.get("scenario") == "grpc" and m:
            # h2load cannot see grpc-status (a trailer), and a failed call is HTTP 200 too.
            # What it does count is the response DATA: every successful unary call returns
            # one framed message (5-byte prefix + message), while a failure is
            # trailers-only, without DATA. So at most DATA/5 calls can have succeeded; the
            # rest are counted as errors, not as requests (a lower bound on failures:
            # messages longer than empty hide some).
            framed = int(m.group(1)) // 5
            if framed < ok:
                sample.errors["grpc_no_message"] = ok - framed
                sample.requests = framed


class Fortio(Tool):
    name = "fortio"
    # The RetCodes key of a success in Fortio's JSON: an HTTP status, "OK" for an echo
    # whose bytes came back, "SERVING" for a gRPC health check or ping that returned.
    SUCCESS = {"h1": "200", "tcp-echo": "OK", "grpc": "SERVING"}

    def supports(self, sc: Scenario) -> bool:
        return sc.protocol in self.SUCCESS

    def binary(self) -> str | None:
        return fortio_binary()

    def argv(self, sc: Scenario, url: str) -> list[str]:
        # -qps is the total rate; -c connections; -json - writes the result to stdout.
        argv = ["fortio", "load", "-quiet", "-qps", f"{sc.rps:g}", "-c", str(sc.connections),
                "-t", f"{sc.duration:g}s", "-json", "-"]
        if sc.protocol == "tcp-echo":
            # -payload-size: that many random bytes per request (drawn once per run).
            return [*argv, "-payload-size", str(sc.payload_size), url]
        if sc.protocol == "grpc":
            # -grpc: health check by default, -ping for the ping service; -s streams per
            # connection (Fortio runs c x s goroutines, s of them on each of c connections).
            call = ["-ping"] if sc.grpc_call == "ping" else []
            return [*argv, "-grpc", *call, "-s", str(sc.streams), grpc_host_port(url)]
        return [*argv, url]

    def parse(self, sample: Sample, out: str, err: str) -> None:
        data = json.loads(out[out.index("{"):])
        codes = data.get("RetCodes") or {}
        scenario = sample.extra.get("scenario", "h1")
        sample.requests = int(codes.get(self.SUCCESS[scenario], 0))
        total = int(data["DurationHistogram"]["Count"])
        if total != sample.requests:
            what = "non_200" if scenario == "h1" else f"not_{self.SUCCESS[scenario]}"
            sample.errors[what] = total - sample.requests
        if scenario == "tcp-echo":
            sample.extra["bytes_sent"] = data.get("BytesSent")
            sample.extra["bytes_received"] = data.get("BytesReceived")
        sample.duration = float(data["ActualDuration"]) / 1e9
        sample.extra["reported_rps"] = float(data.get("ActualQPS", 0))


class Oha(Tool):
    name = "oha"

    def supports(self, sc: Scenario) -> bool:
        return sc.protocol == "h1"

    def argv(self, sc: Scenario, url: str) -> list[str]:
        argv = ["oha", "--no-tui", "-j", "-z", f"{sc.duration:g}s", "-c", str(sc.connections)]
        if sc.rps:
            argv += ["-q", f"{sc.rps:g}"]
        return [*argv, url]

    def parse(self, sample: Sample, out: str, err: str) -> None:
        data = json.loads(out[out.index("{"):])
        codes = data.get("statusCodeDistribution") or {}
        sample.requests = int(codes.get("200", 0))
        other = sum(int(v) for k, v in codes.items() if k != "200")
        if other:
            sample.errors["non_200"] = other
        sample.duration = float(data["summary"]["total"])
        sample.extra["reported_rps"] = float(data["summary"].get("requestsPerSec", 0))


class Floor(Tool):
    """The floor of the scenario: the request floor at the maximum rate, the timer floor
    (--rate) at a fixed rate. HTTP/1.1 in the clear only."""

    name = "floor"

    def supports(self, sc: Scenario) -> bool:
        return sc.protocol == "h1"

    def binary(self) -> str | None:
        try:
            return str(floor_build("request_floor"))
        except FloorBuildError as e:
            print(f"peer_compare: floor: {e}", file=sys.stderr)
            return None

    def argv(self, sc: Scenario, url: str) -> list[str]:
        host, _, port = url.split("://", 1)[1].split("/", 1)[0].rpartition(":")
        argv = ["request_floor", "--host", host, "--port", port, "--connections",
                str(sc.connections), "--duration", f"{sc.duration:g}"]
        if sc.rps:
            argv += ["--rate", f"{sc.rps:g}"]
        return argv

    def parse(self, sample: Sample, out: str, err: str) -> None:
        data = json.loads(out.strip().splitlines()[-1])
        sample.requests = int(data["requests"])
        sample.duration = float(data["duration"])
        # Its own getrusage over the measured part (connections open); the row uses the
        # whole process's, from wait4, as for every other external tool.
        sample.extra["own_cpu_s"] = float(data["cpu_s"])
        sample.extra["late_ticks"] = int(data.get("late_ticks", 0))


class Nhbench(Tool):
    name = "nhbench"

    def __init__(self, burst: int = 0) -> None:
        self.burst = burst
        if burst:
            self.name = f"nhbench burst={burst}"

    def supports(self, sc: Scenario) -> bool:
        return not self.burst or sc.rps > 0

    def measure(self, sc: Scenario, url: str, cfg: argparse.Namespace) -> Sample:
        sample = Sample(self.name)
        cli_args: list[str] = []
        if sc.protocol == "tcp-echo":
            cli_args = ["--payload-size", str(sc.payload_size)]
        elif sc.protocol == "grpc":
            cli_args = list(NHBENCH_GRPC_ARGS[sc.grpc_call])
        spec = {"url": url, "rps": sc.rps, "duration": sc.duration,
                "connections": sc.connections, "client_cpu": cfg.client_cpu,
                "idle_strategy": cfg.idle_strategy, "burst_size": self.burst,
                "protocol": sc.protocol, "streams": sc.streams, "cli_args": cli_args}
        argv = [sys.executable, str(Path(__file__).resolve()), "--nhbench-child",
                json.dumps(spec)]
        rc, out, err, ru, wall = run_child(argv, timeout=sc.duration + 60, env=child_env())
        sample.wall_s = wall
        # The whole child, interpreter start-up included (not what the table shows).
        sample.extra["process_cpu_s"] = ru.ru_utime + ru.ru_stime
        lines = [ln for ln in out.splitlines() if ln.startswith("{")]
        if rc != 0 or not lines:
            sample.failed = f"exit status {rc}: {(out + err).strip()[-500:]}"
            return sample
        data = json.loads(lines[-1])
        if "refused" in data:
            sample.failed = sample.refused = data["refused"]
            return sample
        sample.requests = data["requests"]
        sample.duration = data["duration"]
        sample.cpu_s = data["cpu_s"]
        sample.errors = data["errors"]
        for k in ("p50", "p99", "p99_from_send", "lateness_p50", "lateness_p99", "user_s",
                  "sys_s", "result_cpu_s", "threads_cpu_s", "upstream_rq_total",
                  "sequencer_blocked", "success"):
            sample.extra[k] = data.get(k)
        return sample


ALL_TOOLS: dict[str, Tool] = {t.name: t for t in (Nhbench(), Wrk(), H2load(), Fortio(), Oha(),
                                                   Floor())}


# --------------------------------------------------------------------------------------------
# orchestration
# --------------------------------------------------------------------------------------------


@dataclass
class Scenario:
    key: str
    title: str
    rps: float
    connections: int
    duration: float
    protocol: str = "h1"  # a Target.urls key and a PROTOCOL_OPTIONS key
    streams: int = 1  # HTTP/2: concurrent streams per connection
    payload_size: int = 0  # tcp-echo: bytes sent (and echoed) per request
    grpc_call: str = "health"  # grpc: a GRPC_PATHS key

    @property
    def reference(self) -> str:
        return REFERENCES[self.key]


def median(values: list[float]) -> float:
    values = [v for v in values if not math.isnan(v)]
    return statistics.median(values) if values else float("nan")


def summarize(samples: list[Sample]) -> dict[str, Any]:
    good = [s for s in samples if not s.failed and s.requests > 0]
    out: dict[str, Any] = {
        "tool": samples[0].tool,
        "runs": len(samples),
        "ok_runs": len(good),
        "failures": [s.failed for s in samples if s.failed],
    }
    refused = [s.refused for s in samples if s.refused]
    if refused:
        out["refused"] = refused[0]
    if not good:
        return out
    us = [s.us_per_req for s in good]
    rps = [s.rps for s in good]
    out.update(
        requests=int(median([s.requests for s in good])),
        rps=median(rps), rps_min=min(rps), rps_max=max(rps),
        us_per_req=median(us), us_min=min(us), us_max=max(us),
        client_util=median([s.cpu_s / s.duration for s in good if s.duration]),
        errors=sum(sum(s.errors.values()) for s in good),
    )
    server = [s.server_cpu_s / s.duration for s in good if s.server_cpu_s is not None
              and s.duration]
    out["server_util"] = median(server) if server else None
    other = [s.extra["other_load"] for s in samples if s.extra.get("other_load") is not None]
    out["other_load"] = median(other) if other else None
    split = [s for s in good if s.extra.get("user_s") is not None]
    if split:
        out["user_us"] = median([s.extra["user_s"] / s.requests * 1e6 for s in split])
        out["sys_us"] = median([s.extra["sys_s"] / s.requests * 1e6 for s in split])
    for k in ("p50", "p99", "p99_from_send", "lateness_p99", "result_cpu_s"):
        vals = [float(s.extra[k]) for s in good if s.extra.get(k) is not None]
        if vals:
            out[k] = median(vals)
    return out


def fmt_us(v: float | None) -> str:
    if v is None:
        return "-"
    if v < 1e-3:
        return f"{v * 1e6:.0f} µs"
    return f"{v * 1e3:.2f} ms"


def render_table(sc: Scenario, rows: list[dict[str, Any]]) -> str:
    ref = next((r for r in rows if r["tool"] == sc.reference and "us_per_req" in r), None)
    floor = next((r for r in rows if r["tool"] == "floor" and "us_per_req" in r), None)
    header = (
        f"| tool | requests | req/s | client CPU µs/req (min–max) | vs {sc.reference} "
        f"| vs floor | user + sys µs/req | client CPU | server CPU | p50 / p99 (CO-corrected) "
        f"| errors |"
    )
    lines = [header, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for r in rows:
        name = r["tool"]
        if name == "floor":
            name = "floor (timer)" if sc.rps else "floor (request)"
        if "us_per_req" not in r:
            if r.get("refused"):
                lines.append(f"| {name} | n/a ({r['refused'][:200]}) | | | | | | | | | |")
                continue
            failures = "; ".join(r["failures"])[:120]
            lines.append(f"| {name} | failed: {failures} | | | | | | | | | |")
            continue
        ratio = f"{r['us_per_req'] / ref['us_per_req']:.2f}×" if ref else "-"
        to_floor = f"{r['us_per_req'] / floor['us_per_req']:.2f}×" if floor else "-"
        lat = (f"{fmt_us(r.get('p50'))} / {fmt_us(r.get('p99'))}" if "p50" in r else "n/a")
        srv = f"{r['server_util'] * 100:.0f}%" if r.get("server_util") is not None else "-"
        fails = f" ({len(r['failures'])} failed)" if r["failures"] else ""
        split = (f"{r['user_us']:.2f} + {r['sys_us']:.2f}" if "user_us" in r else "-")
        lines.append(
            f"| {name}{fails} | {r['requests']:,} | {r['rps']:,.0f} "
            f"| {r['us_per_req']:.2f} ({r['us_min']:.2f}–{r['us_max']:.2f}) | {ratio} "
            f"| {to_floor} | {split} | {r['client_util'] * 100:.0f}% | {srv} | {lat} | {r['errors']} |"
        )
    return "\n".join(lines)


def goal_line(sc: Scenario, rows: list[dict[str, Any]]) -> str:
    if sc.key not in GOALS:
        return (f"- No goal for this scenario: the ratios to "
                f"{sc.reference} are information.")
    ref_name, limit = GOALS[sc.key]
    nhb = next((r for r in rows if r["tool"] == "nhbench" and "us_per_req" in r), None)
    ref = next((r for r in rows if r["tool"] == ref_name and "us_per_req" in r), None)
    if ref_name == "floor":
        floor = "the timer floor" if sc.rps else "the request floor"
        what = (f"fixed {sc.rps:,.0f} rps: nhbench CPU/request ≤ {limit:.2f}× {floor}'s"
                if sc.rps else f"max rate: nhbench CPU/request ≤ {limit:.2f}× {floor}'s")
    else:
        what = f"max rate: nhbench CPU/request ≤ {limit:.2f}× {ref_name}'s"
    if not nhb or not ref:
        return f"- Goal ({what}): not measured"
    ratio = nhb["us_per_req"] / ref["us_per_req"]
    verdict = "**met**" if ratio <= limit else "**missed**"
    note = ""
    if sc.key == "fixed":
        short = [r["tool"] for r in rows if "rps" in r and r["rps"] < 0.99 * sc.rps]
        if short:
            note = f" (below the asked rate by >1%: {', '.join(short)})"
    return (f"- Goal ({what}): {ratio:.2f}× ({nhb['us_per_req']:.2f} vs "
            f"{ref['us_per_req']:.2f} µs/req) → {verdict}{note}")


def run_all(cfg: argparse.Namespace) -> dict[str, Any]:
    scenarios = []
    if "max" in cfg.scenarios:
        scenarios.append(Scenario("max", f"HTTP/1.1 max rate, {cfg.connections} connections",
                                  0, cfg.connections, cfg.duration))
    if "fixed" in cfg.scenarios:
        scenarios.append(Scenario("fixed", f"HTTP/1.1 fixed {cfg.fixed_rps:,.0f} rps, "
                                  f"{cfg.connections} connections",
                                  cfg.fixed_rps, cfg.connections, cfg.duration))
    h2 = f"{cfg.h2_connections} connections × {cfg.h2_streams} streams"
    if "h2c" in cfg.scenarios:
        scenarios.append(Scenario("h2c", f"HTTP/2 (h2c) max rate, {h2}", 0,
                                  cfg.h2_connections, cfg.duration, "h2c", cfg.h2_streams))
    if "tls-h1" in cfg.scenarios:
        scenarios.append(Scenario("tls-h1", f"HTTP/1.1 over TLS max rate, {cfg.connections} "
                                  "connections", 0, cfg.connections, cfg.duration, "tls-h1"))
    if "tls-h2" in cfg.scenarios:
        scenarios.append(Scenario("tls-h2", f"HTTP/2 over TLS max rate, {h2}", 0,
                                  cfg.h2_connections, cfg.duration, "tls-h2", cfg.h2_streams))
    if "tcp-echo" in cfg.scenarios:
        scenarios.append(Scenario("tcp-echo", f"TCP echo max rate, {cfg.connections} "
                                  f"connections, {cfg.payload_size}-byte payload", 0,
                                  cfg.connections, cfg.duration, "tcp-echo",
                                  payload_size=cfg.payload_size))
    if "grpc" in cfg.scenarios:
        scenarios.append(Scenario("grpc", f"gRPC unary {GRPC_PATHS[cfg.grpc_call]} over h2c "
                                  f"max rate, {h2}", 0, cfg.h2_connections, cfg.duration,
                                  "grpc", cfg.h2_streams, grpc_call=cfg.grpc_call))
    tools: list[Tool] = []
    for name in cfg.tools:
        if name != "nhbench" and not ALL_TOOLS[name].binary():
            print(f"peer_compare: {name} not installed, skipped", file=sys.stderr)
            continue
        tools.append(ALL_TOOLS[name])
        if name == "nhbench" and cfg.burst_row:
            # Informational: h2load --rps paces each connection with its own timer, so its
            # releases come in clumps of about one per connection; nhbench's default
            # schedule is uniform. This row gives nhbench the clumped pattern.
            tools.append(Nhbench(burst=cfg.connections))
    # Each scenario's target: --echo-target for the echo scenario, --grpc-target for gRPC,
    # --target for the HTTP ones ("both": the option's two choices). Each target is started
    # once, for all of its scenarios.
    def chosen(sc: Scenario) -> tuple[str, ...]:
        option, choices = ((cfg.echo_target, ("nhbench", "fortio")) if sc.key in ECHO_KEYS
                           else (cfg.grpc_target, ("fortio", "nhbench")) if sc.key in GRPC_KEYS
                           else (cfg.target, ("nginx", "nhbench")))
        return choices if option == "both" else (option,)

    plan: dict[str, list[Scenario]] = {}
    for name in TARGETS:
        picked = [sc for sc in scenarios if name in chosen(sc)]
        if picked:
            plan[name] = picked

    report: dict[str, Any] = {
        "started": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "settings": {
            "duration": cfg.duration, "repeat": cfg.repeat, "connections": cfg.connections,
            "fixed_rps": cfg.fixed_rps, "client_cpu": cfg.client_cpu,
            "h2_connections": cfg.h2_connections, "h2_streams": cfg.h2_streams,
            "server_cpu": cfg.server_cpu, "idle_strategy": cfg.idle_strategy,
            "body_bytes": len(BODY), "payload_size": cfg.payload_size,
            "grpc_call": cfg.grpc_call,
        },
        "results": [],
    }
    for target_name, target_scenarios in plan.items():
        with contextlib.ExitStack() as stack:
            try:
                target = stack.enter_context(TARGETS[target_name](cfg.server_cpu))
            except TargetUnavailable as e:
                print(f"peer_compare: target {target_name} unavailable ({e}); "
                      f"{', '.join(sc.key for sc in target_scenarios)} skipped",
                      file=sys.stderr)
                continue
            for sc in target_scenarios:
                url = target.urls.get(sc.protocol)
                if url is None:
                    print(f"peer_compare: {target.name} does not serve {sc.protocol}; "
                          f"{sc.key} skipped", file=sys.stderr)
                    continue
                if sc.protocol == "grpc":
                    problem = grpc_probe(url, sc.grpc_call)
                    if problem:
                        print(f"peer_compare: {target.name}: {problem}; {sc.key} skipped",
                              file=sys.stderr)
                        report["results"].append({
                            "target": target.name,
                            "scenario": asdict(sc) | {"title": sc.title,
                                                      "reference": sc.reference},
                            "rows": [], "skipped": problem, "samples": {},
                        })
                        continue
                active = [t for t in tools if t.supports(sc)]
                samples: dict[str, list[Sample]] = {t.name: [] for t in active}
                # Round-robin over the tools so slow drift (other load on the machine)
                # spreads over all of them instead of favouring one.
                for i in range(cfg.repeat):
                    for tool in active:
                        if any(x.refused for x in samples[tool.name]):
                            continue  # it cannot run this scenario: once is enough
                        before = (sum(proc_tree_cpu(pid) for pid in target.pids)
                                  if target.pids else None)
                        busy0 = machine_busy_s()
                        s = tool.measure(sc, url, cfg)
                        busy = machine_busy_s() - busy0
                        if before is not None:
                            s.server_cpu_s = (sum(proc_tree_cpu(pid) for pid in target.pids)
                                              - before)
                            # Whole client process (nhbench: start-up included), as the
                            # machine counter covers the whole wall time too.
                            client = s.extra.get("process_cpu_s", s.cpu_s)
                            s.other_cpu_s = max(0.0, busy - client - s.server_cpu_s)
                            s.extra["other_load"] = s.other_cpu_s / s.wall_s if s.wall_s else None
                        samples[tool.name].append(s)
                        status = (f"n/a ({s.refused[:200]})" if s.refused else
                                  f"FAILED {s.failed[:200]}" if s.failed else
                                  f"{s.requests:>9,} req {s.rps:>9,.0f} req/s "
                                  f"{s.us_per_req:6.2f} µs/req")
                        print(f"  [{target.name} {sc.key} {i + 1}/{cfg.repeat}] "
                              f"{tool.name:<8} {status}", file=sys.stderr, flush=True)
                        time.sleep(cfg.pause)
                rows = [summarize(samples[t.name]) for t in active]
                report["results"].append({
                    "target": target.name,
                    "scenario": asdict(sc) | {"title": sc.title, "reference": sc.reference},
                    "rows": rows,
                    "samples": {k: [asdict(s) | {"rps": s.rps, "us_per_req": s.us_per_req}
                                    for s in v] for k, v in samples.items()},
                })
    report["finished"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    report["machine"]["loadavg_after"] = os.getloadavg()
    return report


def short_version(text: str) -> str:
    """'wrk debian/4.1.0-3+b2 [epoll] Copyright…' -> 'debian/4.1.0-3+b2'."""
    m = re.search(r"[\w.+-]+/\d[\w.+-]*|\b\d+\.[\w.+-]*", text)
    return m.group(0) if m else text


def render_markdown(report: dict[str, Any]) -> str:
    m, st = report["machine"], report["settings"]
    vers = ", ".join(f"{k} {short_version(v)}" for k, v in m["versions"].items())
    head = (
        f"Run {report['started']} on {m['cpus']} CPUs ({m['cpu_model']}), Linux "
        f"{m['kernel']}; client on CPU {st['client_cpu']}, server on CPU {st['server_cpu']}; "
        f"{st['duration']:g} s per run, median of {st['repeat']} runs (min–max in brackets); "
        f"{st['body_bytes']}-byte body. Load average before/after: "
        f"{m['loadavg_before'][0]:.2f} / {m['loadavg_after'][0]:.2f}."
    )
    out = [
        head,
        "",
        f"Versions: {vers}.",
        "",
    ]
    for res in report["results"]:
        sc = Scenario(**{k: res["scenario"][k] for k in
                         ("key", "title", "rps", "connections", "duration", "protocol",
                          "streams", "payload_size", "grpc_call") if k in res["scenario"]})
        if res.get("skipped"):
            out += [f"### {sc.title} → {res['target']}", "",
                    f"Not measured: {res['skipped']}.", ""]
            continue
        other = [r["other_load"] for r in res["rows"] if r.get("other_load") is not None]
        noise = (f"Other processes used {median(other):.2f} CPUs (median over the runs; "
                 f"0 = a quiet machine, 2 = both cores busy besides the benchmark)."
                 if other else "")
        out += [f"### {sc.title} → {res['target']}", "",
                render_table(sc, res["rows"]), "", goal_line(sc, res["rows"])]
        burst = next((r["tool"] for r in res["rows"] if r["tool"].startswith("nhbench burst=")),
                     None)
        if burst:
            out.append(f"- `{burst}` is for information, not the goal: it releases in clumps "
                       f"of {burst.split('=')[1]} (one per connection), the pattern of "
                       f"h2load's per-connection --rps timers; `nhbench` releases uniformly.")
        out += [f"- {noise}", ""] if noise else [""]
    return "\n".join(out).rstrip() + "\n"


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", choices=("nginx", "nhbench", "both"), default="nginx",
                   help="server of the HTTP scenarios (default nginx)")
    p.add_argument("--echo-target", choices=("nhbench", "fortio", "both"), default="nhbench",
                   help="server of the tcp-echo scenario: nhbench's --tcp-echo listener "
                   "(default) or fortio server's tcp-echo port")
    p.add_argument("--grpc-target", choices=("fortio", "nhbench", "both"), default="fortio",
                   help="server of the grpc scenario: fortio server's grpc port (default) or "
                   "nhbench's test server")
    p.add_argument("--grpc-call", choices=tuple(GRPC_PATHS), default="health",
                   help="grpc scenario: the health check (default) or Fortio's ping")
    p.add_argument("--payload-size", type=int, default=64,
                   help="tcp-echo scenario: bytes per request, echoed back (default 64)")
    p.add_argument("--scenarios", default=",".join(SCENARIO_KEYS),
                   help=f"comma list of {','.join(SCENARIO_KEYS)} (default all)")
    p.add_argument("--tools", default="nhbench,wrk,h2load,fortio,oha,floor",
                   help="comma list; tools not installed are skipped")
    p.add_argument("--duration", type=float, default=5.0, help="seconds per run (default 5)")
    p.add_argument("--repeat", type=int, default=3, help="runs per tool, median reported")
    p.add_argument("--connections", type=int, default=50)
    p.add_argument("--fixed-rps", type=float, default=20000.0)
    p.add_argument("--h2-connections", type=int, default=10,
                   help="HTTP/2 scenarios: connections (h2load -c; default 10)")
    p.add_argument("--h2-streams", type=int, default=100,
                   help="HTTP/2 scenarios: streams per connection (h2load -m; default 100)")
    p.add_argument("--client-cpu", type=int, default=0)
    p.add_argument("--server-cpu", type=int, default=1)
    p.add_argument("--idle-strategy", choices=("poll", "spin", "sleep"), default="poll",
                   help="nhbench --sequencer-idle-strategy (default poll)")
    p.add_argument("--no-burst-row", dest="burst_row", action="store_false",
                   help="fixed rate: skip the extra nhbench row with burst_size=connections "
                   "(h2load-like clumped releases)")
    p.add_argument("--pause", type=float, default=0.5, help="seconds between runs")
    p.add_argument("--out-dir", type=Path, default=OUT_DIR)
    p.add_argument("--update-docs", action="store_true",
                   help="rewrite the Latest results section of docs/benchmarks.md")
    p.add_argument("--from-json", type=Path, metavar="FILE",
                   help="do not measure: re-render the tables of a saved JSON report "
                   "(with --update-docs, into docs/benchmarks.md)")
    p.add_argument("--nhbench-child", metavar="JSON", help=argparse.SUPPRESS)
    cfg = p.parse_args(argv)
    if cfg.nhbench_child:
        return cfg
    cfg.scenarios = [s.strip() for s in cfg.scenarios.split(",") if s.strip()]
    cfg.tools = [t.strip() for t in cfg.tools.split(",") if t.strip()]
    bad = [s for s in cfg.scenarios if s not in SCENARIO_KEYS]
    bad += [t for t in cfg.tools if t not in ALL_TOOLS]
    if bad:
        p.error(f"unknown scenario/tool: {', '.join(bad)}")
    if (cfg.repeat < 1 or cfg.duration <= 0 or cfg.connections < 1 or cfg.fixed_rps <= 0
            or cfg.h2_connections < 1 or cfg.h2_streams < 1 or cfg.payload_size < 1):
        p.error("--repeat, --duration, --connections, --fixed-rps, --h2-connections, "
                "--h2-streams and --payload-size must be positive")
    check_cpu_args(p, cfg, "peer_compare")
    return cfg


def main(argv: list[str] | None = None) -> int:
    cfg = parse_args(sys.argv[1:] if argv is None else argv)
    if cfg.nhbench_child:
        nhbench_child(json.loads(cfg.nhbench_child))
        return 0
    if cfg.from_json:
        markdown = render_markdown(json.loads(cfg.from_json.read_text()))
        print(markdown)
        if cfg.update_docs:
            update_docs(markdown, BEGIN_MARK, END_MARK, "Latest results")
            print(f"updated {DOCS}", file=sys.stderr)
        return 0
    if not shutil.which("taskset"):
        raise SystemExit("peer_compare: taskset not found (util-linux)")
    report = run_all(cfg)
    markdown = render_markdown(report)
    print()
    print(markdown)
    cfg.out_dir.mkdir(parents=True, exist_ok=True)
    stamp = report["started"].replace(":", "").replace("+0000", "Z")
    for name in (f"peer_compare-{stamp}", "latest"):
        (cfg.out_dir / f"{name}.md").write_text(markdown)
        (cfg.out_dir / f"{name}.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {cfg.out_dir / 'latest.md'} and latest.json", file=sys.stderr)
    if cfg.update_docs:
        update_docs(markdown, BEGIN_MARK, END_MARK, "Latest results")
        print(f"updated {DOCS}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
