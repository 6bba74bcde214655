"""How fast nhbench handles big results: loading one, merging many workers' histograms,
the result browser's scan and pages, and the start-up figures they sit beside.

    python benchmarks/results_speed.py                 # the goals below, median of 20
    python benchmarks/results_speed.py --runs 50 --results 5000 --keep DIR

The inputs are real: an ``nhbench server`` and two ``nhbench run``s against it make a
4-worker result with 60 live intervals (``--stats-interval 0.1s`` over 6 s, every
histogram encoded) and a 1-worker one without intervals. The 5,000 results of the browse
scenarios are copies of those two (one in ten the 4-worker one) with varied labels, URLs,
timestamps and rates, written into a temporary directory.

Each scenario is timed `--runs` times and the median printed with the minimum, as wall
time and as this process's CPU time (`time.process_time`), with the load average before and
after: on a shared machine the wall time moves with what else runs, the CPU time much
less. The goals (docs/benchmarks.md, "Big results"):

* ``load_result`` of the 4-worker, 60-interval JSON result: at most 5 ms;
* merging 256 workers' histograms (``distributed.merge_stats``, what the controller of a
  distributed run does with every worker's core statistics): at most 50 ms;
* ``nhbench browse``: the first scan of 5,000 results at most 2 s, each page at most 100 ms
  (the list of 5,000, one result's page, a comparison of two);
* ``import nhbench`` under 150 ms and ``nhbench --version`` under 100 ms (as
  benchmarks/startup.py measures them, fresh processes).

The first list page of a browser process is also timed in fresh processes (a child
``python`` per run, timing the first ``list_page(catalogue.scan())`` it makes, with the
index of an earlier browser present: the jinja2 environment, the templates and every row
made for the first time). And as a user meets it: the first list page of a new ``nhbench
browse`` (which walks the directory and makes the rows as it starts), asked for at once
when it prints its URL and half a second later, timed as the request's wall time. The
process runs with ``OPENBLAS_NUM_THREADS=1`` unless set, as
``nhbench browse`` does (`nhbench._compare.single_threaded_blas`): the compare page's
products are small and OpenBLAS's threads cost more CPU than they save.

The browse scan is timed four ways: with no index at all (every file read and validated:
the very first time a directory is browsed), as ``nhbench browse`` makes it (with its
reading processes, `nhbench.browse._pool`, when more than one CPU is usable: their CPU
time, taken from ``RUSAGE_CHILDREN`` once they have exited, is added to the process's and
named in the note) and in this process alone; the first scan of a new browser process when
the index an earlier one wrote is there (what "first scan" means for a directory browsed
before), and a rescan in the same process. It is a measurement, not a test: nothing fails
when a goal is missed; the figures are printed and ``--json FILE`` keeps them.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from common import child_env, free_port, wait_port
from startup import commands, wall_times

# As `nhbench browse` runs (nhbench._compare.single_threaded_blas), before numpy is imported.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

GOALS_MS = {
    "load_result, 4 workers x 60 intervals": 5.0,
    "merge 256 workers' histograms": 50.0,
    "browse: scan of 5,000 results, no index, as nhbench browse": 2000.0,
    "browse: scan of 5,000 results, index present (new process)": 2000.0,
    "browse: list page of 5,000, first of a process": 100.0,
    "browse: list page of 5,000, first of a new process (index present)": 100.0,
    "browse: list page of 5,000, first of `nhbench browse` (index present), asked 0 s after "
    "its URL": 100.0,
    "browse: list page of 5,000, first of `nhbench browse` (index present), asked 0.5 s "
    "after its URL": 100.0,
    "browse: list page of 5,000": 100.0,
    "browse: result page (4 workers x 60 intervals)": 100.0,
    "browse: compare page (2 results)": 100.0,
    "import nhbench": 150.0,
    "nhbench --version": 100.0,
}


def timed(function: Callable[[], Any], runs: int) -> tuple[float, float, float]:
    """Median wall ms, minimum wall ms, median CPU ms of `runs` calls (after one untimed)."""
    function()
    walls, cpus = [], []
    for _ in range(runs):
        wall, cpu = time.perf_counter(), time.process_time()
        function()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls) * 1e3, min(walls) * 1e3, statistics.median(cpus) * 1e3


def make_results(directory: Path) -> tuple[Path, Path]:
    """The two real results, from `nhbench server` and `nhbench run` subprocesses."""
    port = free_port()
    env = child_env()
    server = subprocess.Popen([sys.executable, "-m", "nhbench", "server", "--listen",
                               f"127.0.0.1:{port}", "--workers", "1"],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, env=env)
    try:
        wait_port(port)
        uri = f"http://127.0.0.1:{port}/"
        four = directory / "four-workers.json"
        one = directory / "one-worker.json"
        for argv, out in (
                (["--concurrency", "4", "--rps", "1000", "--duration", "6",
                  "--stats-interval", "0.1s"], four),
                (["--rps", "1000", "--duration", "1"], one)):
            subprocess.run([sys.executable, "-m", "nhbench", "run", uri, *argv,
                            "--output-format", "json", "--output", str(out)],
                           check=True, env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    finally:
        server.terminate()
        server.wait(10)
    return four, one


def write_copies(four: Path, one: Path, directory: Path, count: int) -> None:
    """`count` results under `directory` (100 per subdirectory): copies of `one` and, one
    in ten, `four`, each with its own label, URL, timestamp and requested rate."""
    bases = {name: json.loads(path.read_text()) for name, path in (("four", four),
                                                                     ("one", one))}
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    for i in range(count):
        document = json.loads(json.dumps(bases["four" if i % 10 == 0 else "one"]))
        options = document["options"]
        options["labels"] = [f"copy-{i}", f"team-{i % 7}"]
        options["uri"] = f"http://service-{i % 13}.example:8080/path/{i}"
        options["requests_per_second"] = 100 + i % 900
        document["timestamp"] = (start + timedelta(minutes=i)).isoformat().replace(
            "+00:00", "Z")
        sub = directory / f"batch-{i // 100:03d}"
        sub.mkdir(exist_ok=True)
        (sub / f"result-{i:05d}.json").write_text(json.dumps(document))


def first_page_of_browse(root: Path, env: dict[str, str], delay: float) -> float:
    """The wall time in ms of the first list page of a new ``nhbench browse`` on `root`,
    asked for `delay` seconds after it prints its URL (it walks the directory and makes the
    rows as it starts: `BrowseServer.warm`)."""
    proc = subprocess.Popen([sys.executable, "-m", "nhbench", "browse", str(root),
                             "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True,
                            env=env)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        time.sleep(delay)
        began = time.perf_counter()
        with urllib.request.urlopen(url, timeout=120) as response:
            response.read()
        return (time.perf_counter() - began) * 1e3
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20,
                        help="timed runs per scenario (default 20; the scans: --scans)")
    parser.add_argument("--results", type=int, default=5000,
                        help="results in the browse directory (default 5000)")
    parser.add_argument("--workers", type=int, default=256,
                        help="workers whose histograms are merged (default 256)")
    parser.add_argument("--keep", metavar="DIR", help="write the inputs into DIR and keep "
                        "them (default: a temporary directory, removed)")
    parser.add_argument("--scans", type=int, default=3, help="timed scans of the whole "
                        "directory, with and without the index (default 3)")
    parser.add_argument("--json", metavar="FILE", help="also write the figures to FILE")
    args = parser.parse_args()

    from nhbench import _histogram, load_result
    from nhbench.browse._pages import compare_page, list_page, result_page
    from nhbench.browse._scan import Catalogue
    from nhbench.distributed import merge_stats

    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="nhb-results-"))
    work.mkdir(parents=True, exist_ok=True)
    # The browser's index goes to the cache directory: a private one, so that "no index"
    # means none and the user's own cache is left alone.
    os.environ["XDG_CACHE_HOME"] = str(work / "cache")
    rows: list[dict[str, Any]] = []

    def record(name: str, wall: float, wall_min: float, cpu: float | None, note: str = "",
               ) -> None:
        goal = GOALS_MS.get(name)
        rows.append({"scenario": name, "wall_ms": wall, "wall_min_ms": wall_min,
                     "cpu_ms": cpu, "goal_ms": goal, "note": note})
        verdict = "" if goal is None else ("met" if wall <= goal else "missed")
        cpu_text = "-" if cpu is None else f"{cpu:.1f}"
        print(f"{name:<62} {wall:>9.1f} {wall_min:>9.1f} {cpu_text:>8} "
              f"{'' if goal is None else f'<= {goal:g}':>9} {verdict:<7} {note}", flush=True)

    try:
        print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        four, one = make_results(work)
        print(f"inputs: {four} ({four.stat().st_size:,} bytes), {one} "
              f"({one.stat().st_size:,} bytes)")
        print(f"{'scenario':<62} {'wall ms':>9} {'min ms':>9} {'CPU ms':>8} {'goal':>9}")

        record("load_result, 4 workers x 60 intervals",
               *timed(lambda: load_result(four), args.runs))
        record("load_result, 1 worker", *timed(lambda: load_result(one), args.runs))

        # Every worker's core statistics as the core gives them: its counters, and each
        # histogram's count, min, max, sums and sparse (index, count) buckets, from the four
        # real workers' histograms, reused in turn for `--workers` workers.
        result = load_result(four)
        parts = []
        for worker in result.results:
            if worker.name == "global":
                continue
            histograms = {}
            for stat in worker.statistics:
                if stat.hdr_histogram and not stat.raw:
                    decoded = _histogram.decode(stat.hdr_histogram)
                    histograms[stat.id] = {
                        "count": decoded.total_count, "min": round(stat.min * 1e9),
                        "max": round(stat.max * 1e9), "sum": stat.mean * 1e9 * stat.count,
                        "sumsq": 0.0, "counts": _histogram.sparse_counts(decoded)}
            parts.append({"counters": {c.name: c.value for c in worker.counters},
                          "histograms": histograms, "streams": {},
                          "execution_start_ns": 1, "execution_duration_ns": 1})
        workers = [parts[i % len(parts)] for i in range(args.workers)]
        buckets = sum(len(h["counts"]) for w in workers for h in w["histograms"].values())
        record(f"merge {args.workers} workers' histograms",
               *timed(lambda: merge_stats(workers, args.workers), args.runs),
               note=f"{buckets:,} buckets in all")

        browse = work / "browse"
        if browse.exists():
            shutil.rmtree(browse)
        browse.mkdir()
        written = time.perf_counter()
        write_copies(four, one, browse, args.results)
        print(f"({args.results:,} results written in {time.perf_counter() - written:.1f} s)")
        scans = args.scans

        def cold(reading_processes: bool) -> None:
            shutil.rmtree(work / "cache", ignore_errors=True)
            Catalogue(browse, reading_processes=reading_processes).scan()

        def children_cpu() -> float:
            usage = resource.getrusage(resource.RUSAGE_CHILDREN)
            return usage.ru_utime + usage.ru_stime

        def first() -> None:
            Catalogue(browse).scan()

        for reading_processes in (True, False):
            walls, cpus, theirs = [], [], []
            for _ in range(scans):
                wall, cpu, other = time.perf_counter(), time.process_time(), children_cpu()
                cold(reading_processes)
                walls.append((time.perf_counter() - wall) * 1e3)
                theirs.append((children_cpu() - other) * 1e3)
                cpus.append((time.process_time() - cpu) * 1e3 + theirs[-1])
            how = "as nhbench browse" if reading_processes else "one process"
            record(f"browse: scan of {args.results:,} results, no index, {how}",
                   statistics.median(walls), min(walls), statistics.median(cpus),
                   note=(f"of which reading processes {statistics.median(theirs):.0f} ms; "
                         if reading_processes else "")
                   + f"load {os.getloadavg()[0]:.1f} after")
        Catalogue(browse).scan()  # writes the index
        record(f"browse: scan of {args.results:,} results, index present (new process)",
               *timed(first, scans))
        catalogue = Catalogue(browse)
        listing = catalogue.scan()
        record(f"browse: rescan of {args.results:,} results (same process)",
               *timed(catalogue.scan, args.runs))
        from nhbench.browse import _pages

        def first_list() -> None:
            # A new browser process renders every row once; later loads reuse them.
            if hasattr(_pages._row, "cache_clear"):
                _pages._row.cache_clear()
            list_page(catalogue.scan(), str(browse))

        record(f"browse: list page of {args.results:,}, first of a process",
               *timed(first_list, args.runs))
        walls, cpus = [], []
        child = ("import json, sys, time\n"
                 "from nhbench.browse._pages import list_page\n"
                 "from nhbench.browse._scan import Catalogue\n"
                 "wall, cpu = time.perf_counter(), time.process_time()\n"
                 "list_page(Catalogue(sys.argv[1]).scan(), sys.argv[1])\n"
                 "print(json.dumps([time.perf_counter() - wall, time.process_time() - cpu]))\n")
        env = child_env()
        for _ in range(max(3, args.runs // 2)):
            out = subprocess.run([sys.executable, "-c", child, str(browse)], check=True,
                                 capture_output=True, text=True, env=env).stdout
            wall, cpu = json.loads(out)
            walls.append(wall * 1e3)
            cpus.append(cpu * 1e3)
        record(f"browse: list page of {args.results:,}, first of a new process (index present)",
               statistics.median(walls), min(walls), statistics.median(cpus),
               note=f"{len(walls)} fresh processes; scan with the index included")
        for delay in (0.0, 0.5):
            waits = [first_page_of_browse(browse, env, delay)
                     for _ in range(max(3, args.runs // 2))]
            record(f"browse: list page of {args.results:,}, first of `nhbench browse` "
                   f"(index present), asked {delay:g} s after its URL",
                   statistics.median(waits), min(waits), None,
                   note=f"{len(waits)} fresh browsers; the request's wall time (the walk "
                        "starts with the server)")
        record(f"browse: list page of {args.results:,}",
               *timed(lambda: list_page(catalogue.scan(), str(browse)), args.runs),
               note="(rescan included) every later load")
        record("browse: result page (4 workers x 60 intervals)",
               *timed(lambda: result_page(catalogue.load("batch-000/result-00000.json"),
                                          "batch-000/result-00000.json"), args.runs))
        pair = ["batch-000/result-00000.json", "batch-000/result-00010.json"]
        record("browse: compare page (2 results)",
               *timed(lambda: compare_page([(p, catalogue.load(p)) for p in pair]),
                      args.runs))
        if len(listing.entries) != args.results:
            print(f"warning: the list has {len(listing.entries)} entries, not {args.results}")

        for label, argv in commands(sys.executable):
            if label in ("import nhbench", "nhbench --version"):
                times = wall_times(argv, args.runs)
                record(label, statistics.median(times) * 1e3, min(times) * 1e3, None,
                       note="fresh processes")
        print(f"load average after:  {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "loadavg": os.getloadavg()},
                                              indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
