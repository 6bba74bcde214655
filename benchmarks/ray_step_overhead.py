"""What a Ray campaign step costs beyond its own duration: a sweep of short steps on a
two-node Ray cluster started on this machine.

    python benchmarks/ray_step_overhead.py                 # 10 steps of 1 s
    python benchmarks/ray_step_overhead.py --steps 5 --duration 2

The cluster is the tests' (ray_cluster.py here: two ``ray start`` nodes, each in its
own process group, torn down by those groups, never ``ray stop``); the target is the test
server in a subprocess. The sweep runs in this process (``nhbench.run_sweep`` with ``ray=``,
no captures, facts or reports, so that what is measured is the step itself). Per step it
prints the step's wall time (the record's ``ended_at - started_at``: placing the load,
the scheduled start's lead, the run, the merge) minus its duration, then the first step
apart (it pays the cluster connection and the actors' start) and the median and maximum of
the others, and the campaign's wall time per step minus the duration. The load average is
printed before and after: the figures move with what else runs on the machine.
docs/distributed.md ("Campaigns on Ray") and docs/benchmarks.md have the figures.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from common import print_step_overheads, step_overhead_args, timed_sweep
from ray_cluster import LocalRayCluster

import nhbench


def main(argv: list[str] | None = None) -> int:
    args = step_overhead_args(argv, __doc__.splitlines()[0])
    root = Path(tempfile.mkdtemp(prefix="nhbray-", dir="/tmp"))
    try:
        print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        started = time.monotonic()
        with LocalRayCluster(root, nodes=2) as cluster, \
                nhbench.TestServer(subprocess=True) as server:
            print(f"two-node cluster at {cluster.address} in {time.monotonic() - started:.1f} s")
            steps, wall = timed_sweep(server.url, root / "campaign", args, ray=cluster.address)
        if not print_step_overheads(steps, args.steps, args.duration, wall,
                                    "connects, starts the actors"):
            return 1
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        return 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
