"""How long nhbench takes to start: wall time of the commands that scripts and pytest fixtures
run hundreds of times, and what ``import nhbench`` imports.

    python benchmarks/startup.py                      # this checkout's environment
    python benchmarks/startup.py --python /work/main/.venv/bin/python --runs 20

Each command is run `--runs` times (default 20) as a fresh process and the median, minimum
and maximum wall times are printed, with the load average before and after, since on a shared
machine the wall times move with what else runs. Two measures that do not move with the
machine are printed as well: how many modules ``import nhbench`` loads (and which heavy ones),
and the ``-X importtime`` attribution of one import, self and cumulative microseconds per
module (the largest first), which shows where the time goes even when the total is noisy.

The commands: the bare interpreter (the floor every figure includes), ``import nhbench``,
``nhbench --version`` (the console script next to the interpreter), ``python -m nhbench
--version``, ``import nhbench; nhbench.Options(uri=...)`` (the first option model built,
which is where deferred work lands) and an argument error from ``nhbench run`` (exit 2,
the cost of a script's typo). docs/benchmarks.md, "Start-up", has the figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

#: Modules a plain ``import nhbench`` must not load: each costs tens of milliseconds or more
#: and only some commands need them (tests/test_startup.py asserts the same list).
HEAVY = ("pydantic", "hdrh", "rich", "jinja2", "pandas", "matplotlib", "numpy", "paramiko",
         "grpc", "google.protobuf", "ray", "yaml", "selenium", "prometheus_client", "aioquic")

URI = "http://127.0.0.1:1/"


def commands(python: str) -> list[tuple[str, list[str]]]:
    script = str(Path(python).with_name("nhbench"))
    return [
        ("python -c pass", [python, "-c", "pass"]),
        ("import nhbench", [python, "-c", "import nhbench"]),
        ("nhbench --version", [script, "--version"]),
        ("python -m nhbench --version", [python, "-m", "nhbench", "--version"]),
        ("import nhbench; Options(uri=...)",
         [python, "-c", f"import nhbench; nhbench.Options(uri={URI!r})"]),
        ("nhbench run --rps x (exit 2)", [script, "run", URI, "--rps", "x"]),
    ]


def child_env() -> dict[str, str]:
    # Bytecode caching as users have it: an installed package has its .pyc files, and with
    # PYTHONDONTWRITEBYTECODE (set in some shells and CI) every start would compile nhbench's
    # sources again, which costs more than the imports themselves and is not what we measure.
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def wall_times(argv: list[str], runs: int) -> list[float]:
    env = child_env()
    # One untimed run first, which writes the .pyc files a fresh checkout lacks.
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
                   env=env)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
                       env=env)
        times.append(time.perf_counter() - start)
    return times


def loaded_modules(python: str) -> list[str]:
    code = "import sys, nhbench; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True,
                         env=child_env())
    return out.stdout.split()


def importtime(python: str, code: str, top: int) -> list[tuple[int, int, str]]:
    """The `top` modules of one ``-X importtime`` run of `code` by cumulative time: (self
    µs, cumulative µs, name with the tree's indentation)."""
    out = subprocess.run([python, "-X", "importtime", "-c", code],
                         capture_output=True, text=True, check=True, env=child_env())
    rows = []
    for line in out.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, cumulative_us, name = line[len("import time:"):].split("|", 2)
        rows.append((int(self_us), int(cumulative_us), name.rstrip()))
    rows.sort(key=lambda row: row[1], reverse=True)
    return rows[:top]


#: Where the first Options(...) of a process spends its time, timed inside the process:
#: pydantic itself, the rest of the options package (module code and class definitions),
#: the first validation (which builds Options' validator when it is deferred) and a second
#: one (the steady cost).
SPLIT = f"""
import time
t0 = time.perf_counter()
import pydantic.main
t1 = time.perf_counter()
import nhbench.options
t2 = time.perf_counter()
nhbench.options.Options(uri={URI!r})
t3 = time.perf_counter()
nhbench.options.Options(uri={URI!r})
t4 = time.perf_counter()
print(t1 - t0, t2 - t1, t3 - t2, t4 - t3)
"""
SPLIT_LABELS = ("import pydantic", "import nhbench.options (rest)", "first Options(...)",
                "second Options(...)")


def split_times(python: str, runs: int) -> list[float]:
    """Median over `runs` fresh processes of each step of `SPLIT`, in seconds."""
    samples = []
    for _ in range(runs):
        out = subprocess.run([python, "-c", SPLIT], capture_output=True, text=True,
                             check=True, env=child_env())
        samples.append([float(x) for x in out.stdout.split()])
    return [statistics.median(column) for column in zip(*samples, strict=True)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default=sys.executable,
                        help="the interpreter of the environment to measure (its bin/ must "
                        "hold the nhbench script); default: this one")
    parser.add_argument("--runs", type=int, default=20, help="runs per command (default 20)")
    parser.add_argument("--top", type=int, default=15,
                        help="modules shown from -X importtime (default 15)")
    args = parser.parse_args()
    script = Path(args.python).with_name("nhbench")
    if not script.exists():
        parser.error(f"{script} does not exist: --python must be the interpreter of an "
                     "environment where nhbench is installed")

    print(f"python: {args.python}")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'command':<36} {'median ms':>10} {'min ms':>8} {'max ms':>8}   ({args.runs} runs)")
    for label, argv in commands(args.python):
        times = wall_times(argv, args.runs)
        print(f"{label:<36} {statistics.median(times) * 1e3:>10.1f} "
              f"{min(times) * 1e3:>8.1f} {max(times) * 1e3:>8.1f}")
    print(f"load average after:  {' '.join(f'{x:.2f}' for x in os.getloadavg())}")

    modules = loaded_modules(args.python)
    heavy = [name for name in HEAVY if name in modules]
    print(f"\nimport nhbench loads {len(modules)} modules "
          f"({sum(1 for m in modules if m.split('.')[0] == 'nhbench')} of nhbench); "
          f"heavy ones: {', '.join(heavy) or 'none'}")
    print(f"\nfirst Options(...) of a process, timed inside it (median of {args.runs}):")
    for label, seconds in zip(SPLIT_LABELS, split_times(args.python, args.runs), strict=True):
        print(f"  {label:<34} {seconds * 1e3:>8.1f} ms")
    for code in ("import nhbench", f"import nhbench; nhbench.Options(uri={URI!r})"):
        print(f"\n-X importtime of `{code}`, top {args.top} by cumulative time (one run):")
        print(f"{'self µs':>9} {'cumul. µs':>10}  module")
        for self_us, cumulative_us, name in importtime(args.python, code, args.top):
            print(f"{self_us:>9} {cumulative_us:>10}  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
