"""How often the run's threads wake up at a low rate.

(docs/live.md, "How the core does it (cost)".)

A run at 5 requests a second has next to nothing to do: its controller should sleep until
there is something to judge and its worker between releases far apart. Counted as the
kernel counts them, the voluntary context switches of each thread (named by the core) in
/proc; the bounds are above the expected rates (controller 1; worker 10, one wake-up for
each release and one for its response) and several times below what a 5 ms controller tick
and a 10 ms housekeeping tick made (about 180 and 100). The worker's bound, 20, is also below
what waking one tick before each release and one after made (about 25).
"""

from __future__ import annotations

import os
import re
import threading
import time

import pytest

pytestmark = pytest.mark.core

_SWITCHES = re.compile(r"^voluntary_ctxt_switches:\s+(\d+)$", re.M)


def _switches() -> dict[str, int]:
    """Voluntary context switches per thread of this process, by thread name (nhb-*)."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/self/task/{tid}/status") as f:
                status = f.read()
        except FileNotFoundError:  # the thread ended between the listing and the read
            continue
        match = _SWITCHES.search(status)
        if name.startswith("nhb-") and match:
            out[name] = int(match.group(1))
    return out


def test_controller_and_worker_sleep_at_a_low_rate(server) -> None:
    import nhbench

    results: list[nhbench.Result] = []
    runner = threading.Thread(
        target=lambda: results.append(nhbench.run(server.url, rps=5, duration="5s", connections=4)))
    runner.start()
    deadline = time.monotonic() + 30
    while not {"nhb-controller", "nhb-worker-0"} <= _switches().keys():
        assert time.monotonic() < deadline, "the run's threads did not start"
        time.sleep(0.05)
    time.sleep(0.5)  # past the connections' set-up
    before, t0 = _switches(), time.monotonic()
    time.sleep(3.0)
    after, elapsed = _switches(), time.monotonic() - t0
    runner.join(60)
    assert results and results[0].counters["benchmark.http_2xx"] >= 10
    rates = {name: (after[name] - before[name]) / elapsed
             for name in ("nhb-controller", "nhb-worker-0") if name in after and name in before}
    assert set(rates) == {"nhb-controller", "nhb-worker-0"}, rates
    assert rates["nhb-controller"] < 20, rates
    assert rates["nhb-worker-0"] < 20, rates
