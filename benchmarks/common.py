"""What the benchmark scripts share: ports, /proc CPU accounting, the machine description,
the CPU arguments, the environment of an nhbench child, the `nhbench server` target and the
docs/benchmarks.md updater.

The scripts run as ``python benchmarks/X.py``, so this directory is first on sys.path and
they import this module as ``common`` and the nginx launcher as ``nginx_origin``
(docs/development.md, "Test helpers and the benchmarks' shared code").
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nginx_origin import BODY, nginx_binary

ROOT = Path(__file__).resolve().parent.parent
OUT_DIR = ROOT / "benchmarks" / "out"
DOCS = ROOT / "docs" / "benchmarks.md"
CLK_TCK = os.sysconf("SC_CLK_TCK")

__all__ = [
    "BODY", "CLK_TCK", "DOCS", "OUT_DIR", "ROOT", "ServerTarget",
    "check_cpu_args", "child_env", "free_port", "machine_busy_s", "machine_info",
    "nhbench_server", "proc_tree_cpu", "response_head", "stop_process", "tool_seconds",
    "update_docs", "wait_port",
]


# --------------------------------------------------------------------------------------------
# ports, processes and CPU time
# --------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def proc_tree_cpu(pid: int) -> float:
    """user+sys seconds of `pid` and its descendants (all threads)."""
    total = 0.0
    stack = [pid]
    while stack:
        p = stack.pop()
        try:
            with open(f"/proc/{p}/stat") as f:
                data = f.read()
            fields = data[data.rindex(")") + 2 :].split()
            total += (int(fields[11]) + int(fields[12])) / CLK_TCK
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    stack += [int(c) for c in f.read().split()]
        except (OSError, ValueError):
            continue
    return total


def machine_busy_s() -> float:
    """CPU-seconds all CPUs have spent busy since boot (/proc/stat, everything but idle
    and iowait)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    busy = sum(fields[:8]) - fields[3] - fields[4]  # user..steal minus idle, iowait
    return busy / CLK_TCK


@dataclass
class ServerTarget:
    """A server process under load: its port, the root of its process tree, the response head
    it sends to wrk's request (for the record)."""

    name: str
    port: int
    pid: int
    head: bytes = b""


@contextlib.contextmanager
def nhbench_server(server_cpu: int, extra_args: Sequence[str] = (),
                   tool: str = "server_compare") -> Iterator[ServerTarget]:
    """`nhbench server` (a subprocess) alone on `server_cpu`, answering BODY; `extra_args` are
    more server flags (soak.py adds --admin). `tool` names the script in its errors."""
    port = free_port()
    argv = ["taskset", "-c", str(server_cpu), sys.executable, "-m", "nhbench", "server",
            "--listen", f"127.0.0.1:{port}", "--workers", "1", "--cpus", str(server_cpu),
            "--response-body-size", str(len(BODY)), *extra_args]
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=err, env=child_env())
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline().decode(errors="replace").strip()
            if not line.startswith("listening on "):
                proc.wait(10)
                err.seek(0)
                raise SystemExit(f"{tool}: nhbench server did not start: "
                                 + err.read().decode(errors="replace").strip()[-500:])
            wait_port(port)
            yield ServerTarget("nhbench", port, proc.pid, response_head(port))
        finally:
            stop_process(proc)


def stop_process(proc: subprocess.Popen[Any]) -> None:
    """SIGTERM, then SIGKILL after 15 s."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


def response_head(port: int) -> bytes:
    """The response head the server sends to wrk's request, for the record."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    return data.partition(b"\r\n\r\n")[0] + b"\r\n\r\n"


# --------------------------------------------------------------------------------------------
# arguments, environment, reports
# --------------------------------------------------------------------------------------------


_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def tool_seconds(text: str) -> float:
    """'1.5ms' -> 0.0015, as wrk and h2load print durations."""
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m|h)", text.strip())
    if not m:
        raise ValueError(f"bad duration {text!r}")
    return float(m.group(1)) * _UNITS[m.group(2)]


def child_env() -> dict[str, str]:
    """The environment for an nhbench child process: it must import the nhbench we import."""
    env = dict(os.environ)
    try:
        import nhbench

        pkg_root = str(Path(nhbench.__file__).resolve().parent.parent)
    except ImportError:
        pkg_root = str(ROOT / "src")
    env["PYTHONPATH"] = os.pathsep.join([pkg_root, *filter(None, [env.get("PYTHONPATH")])])
    return env


def update_docs(markdown: str, begin: str, end: str, heading: str) -> None:
    """Replace the block between `begin` and `end` in docs/benchmarks.md (or append it under
    a new `heading`); each script has its own markers."""
    text = DOCS.read_text() if DOCS.exists() else ""
    block = f"{begin}\n{markdown}{end}"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        text = head + block + tail
    else:
        text = text.rstrip() + f"\n\n## {heading}\n\n" + block + "\n"
    DOCS.write_text(text)



def check_cpu_args(p: argparse.ArgumentParser, cfg: argparse.Namespace, tool: str) -> None:
    """--client-cpu and --server-cpu must be CPUs this process may use; warns when they are
    the same CPU."""
    allowed = os.sched_getaffinity(0)
    for name in ("client_cpu", "server_cpu"):
        if getattr(cfg, name) not in allowed:
            p.error(f"--{name.replace('_', '-')} {getattr(cfg, name)} is not in this "
                    f"process's CPU affinity {sorted(allowed)}")
    if cfg.client_cpu == cfg.server_cpu:
        print(f"{tool}: warning: client and server share a CPU", file=sys.stderr)


def fortio_binary() -> str | None:
    """`fortio` on PATH, else where `go install` puts it ($GOBIN, $GOPATH/bin, ~/go/bin):
    the echo and gRPC peers are installed with `go install fortio.org/fortio@v1.66.5`, which does not
    touch PATH. Same search as tests/support/peers.py, without running `go`."""
    found = shutil.which("fortio")
    if found:
        return found
    dirs = [os.environ.get("GOBIN", "")]
    dirs += [os.path.join(d, "bin") for d in os.environ.get("GOPATH", "").split(os.pathsep) if d]
    dirs.append(os.path.expanduser("~/go/bin"))
    for d in dirs:
        candidate = os.path.join(d, "fortio") if d else ""
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


# Peer tools whose version goes into a report, and how each prints it.
VERSION_COMMANDS = {
    "wrk": ["wrk", "-v"], "h2load": ["h2load", "--version"], "nginx": ["nginx", "-v"],
    "fortio": ["fortio", "version"], "oha": ["oha", "--version"],
}


def machine_info(tools: Sequence[str] = tuple(VERSION_COMMANDS)) -> dict[str, Any]:
    """The machine and the versions of `tools` (those installed) and nhbench, for a report."""
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    versions: dict[str, str] = {}
    for tool in tools:
        cmd = VERSION_COMMANDS[tool]
        # nginx is often in /usr/sbin, outside a user's PATH; nginx_origin.py finds it there.
        if tool == "nginx":
            cmd = [nginx_binary() or "nginx", *cmd[1:]]
        if tool == "fortio":
            cmd = [fortio_binary() or "fortio", *cmd[1:]]
        if shutil.which(cmd[0]):
            with contextlib.suppress(Exception):
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=5, check=False)
                versions[tool] = ((p.stdout + p.stderr).strip().splitlines() or [""])[0][:80]
    try:
        import nhbench

        versions["nhbench"] = nhbench.__version__
    except ImportError:
        versions["nhbench"] = "not importable"
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "loadavg_before": os.getloadavg(),
        "versions": versions,
    }


def timed_sweep(url: str, out: Path, args: argparse.Namespace,
                **placement: Any) -> tuple[list[Any], float]:
    """A sweep of `args.steps` steps of `args.duration` s (`step_overhead_args`) against
    `url`, placed by `placement` (``ray=``, or ``loadgen=`` and its SSH options), with no
    captures, facts or reports: its steps and its wall time."""
    import nhbench
    from nhbench.campaign import load_campaign

    started = time.monotonic()
    nhbench.run_sweep(url, rps=args.rps, max_rps=args.rps * args.steps, step_rps=args.rps,
                      duration=f"{args.duration}s", out=out, captures=False, facts=False,
                      reports=False, **placement)
    wall = time.monotonic() - started
    return load_campaign(out).steps, wall


def print_step_overheads(steps: Sequence[Any], wanted: int, duration: float, wall: float,
                         first: str = "") -> bool:
    """A campaign's per-step overhead (each step's wall time minus its duration), step by
    step, then the first step's, the median, max and mean of the others and the campaign's
    wall per step; False (said on stderr) when the campaign recorded another number of steps.
    `first` says what the first step does besides (connecting, starting actors)."""
    if len(steps) != wanted:
        print(f"the sweep recorded {len(steps)} steps of {wanted}", file=sys.stderr)
        return False
    overheads = [(s.ended_at - s.started_at).total_seconds() - duration for s in steps]
    for step, overhead in zip(steps, overheads, strict=True):
        print(f"step {step.index:2d} rps/worker {step.rps_per_worker:g}: "
              f"overhead {overhead:.3f} s")
    rest = overheads[1:]
    print(f"first step overhead: {overheads[0]:.3f} s{f' ({first})' if first else ''}")
    print(f"steps 2..{len(steps)}: median {statistics.median(rest):.3f} s, "
          f"max {max(rest):.3f} s, mean {statistics.mean(rest):.3f} s")
    print(f"campaign wall per step minus duration: {wall / len(steps) - duration:.3f} s")
    return True


def step_overhead_args(argv: list[str] | None, description: str) -> argparse.Namespace:
    """The per-step overhead benchmarks' arguments: --steps, --duration (seconds per step)
    and --rps (the first step's rate per worker and the step between rates)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--steps", type=int, default=10, help="steps of the sweep (10)")
    parser.add_argument("--duration", type=float, default=1.0, help="seconds per step (1)")
    parser.add_argument("--rps", type=int, default=20, help="the first step's rate per worker, "
                        "and the step between rates (20)")
    args = parser.parse_args(argv)
    if args.steps < 2 or args.duration <= 0 or args.rps <= 0:
        parser.error("--steps needs at least 2, --duration and --rps positive values")
    return args
