"""How often the run's threads wake up at a low rate.

(docs/live.md, "How the core does it (cost)".)

A run at 5 requests a second has next to nothing to do: its controller should sleep until
there is something to judge and its worker between releases far apart. Counted as the
kernel counts them, the voluntary context switches of each thread (named by the core) in
/proc; the bounds are above the expected rates (controller 1; worker 10, one wake-up for
each release and one for its response) and several times below what a 5 ms controller tick
and a 10 ms housekeeping tick made (about 180 and 100). The worker's bound, 20, is also below
what waking one tick before each release and one after made (about 25).

The Python thread that waits for a run (`Benchmark.run` without a progress callback,
intervals or --until) sleeps until the run ends, a signal arrives (Python's signal wake-up
fd, which the core's wait polls) or the watchdog's deadline comes: it woke 10 times a second
before. Ctrl-C must still stop such a run at once.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
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


_WAITER = """
import json, sys
import nhbench
r = nhbench.run(sys.argv[1], rps=5, duration="120s", connections=2)
print(json.dumps({"interrupted": r.interrupted, "terminated_by": r.terminated_by,
                  "ok": r.counters["benchmark.http_2xx"]}))
"""


def _main_thread_switches(pid: int) -> int:
    with open(f"/proc/{pid}/task/{pid}/status") as f:
        match = _SWITCHES.search(f.read())
    assert match
    return int(match.group(1))


def test_waiting_python_thread_sleeps_and_ctrl_c_still_stops_the_run(server) -> None:
    # A run of 120 s in the main thread of another process: counted from outside over 3 s,
    # then stopped with SIGINT. Without the wake-up fd the wait would last until the
    # watchdog's deadline (past the 120 s), with the 0.1 s tick it was 10 a second.
    proc = subprocess.Popen([sys.executable, "-c", _WAITER, server.url], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while int(server.stats()["requests"]) < 3:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the run did not start"
            time.sleep(0.05)
        before, t0 = _main_thread_switches(proc.pid), time.monotonic()
        time.sleep(3.0)
        rate = (_main_thread_switches(proc.pid) - before) / (time.monotonic() - t0)
        assert rate < 3, rate
        proc.send_signal(signal.SIGINT)
        stopped = time.monotonic()
        out, err = proc.communicate(timeout=60)
        took = time.monotonic() - stopped
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    assert result["interrupted"] and result["terminated_by"] == "stop", result
    assert result["ok"] >= 3, result
    # Far below the 120 s the run (and the wait, woken only by the watchdog) had left.
    assert took < 20, took


def test_the_idle_wait_ends_by_the_watchdogs_deadline() -> None:
    # The long wait must not make the watchdog late: it lasts until just past the deadline,
    # and the watchdog acts as before (stops a run past its end, gives up on a stopped one).
    from nhbench._exceptions import CoreError
    from nhbench._run import Benchmark

    bench = Benchmark("http://127.0.0.1:1/", rps=5, duration="2s", drain_timeout="1s")
    now = time.monotonic()
    bench._started_at = now
    due = bench._watchdog_due()
    # The start delay, 2 s, 1 s of drain and the 10 s of slack.
    assert due is not None
    assert due - now == pytest.approx(bench.options.start_delay + 13.0)
    assert 0 < bench._idle_timeout() <= due - now + 0.2
    bench._started_at = now - 14 - bench.options.start_delay
    assert bench._idle_timeout() == pytest.approx(0.1)
    bench._watchdog()  # past the deadline: it asks for the stop (no run yet to stop)
    assert bench.stop_requested
    bench._stopped_at = time.monotonic() - 10.5  # stopped; the give-up comes 11 s after
    assert bench._watchdog_due() == pytest.approx(bench._stopped_at + 11)
    bench._watchdog()
    bench._stopped_at -= 1
    with pytest.raises(CoreError, match="did not finish within 11 s of being stopped"):
        bench._watchdog()
    # No planned end: nothing for the watchdog to look at until a stop; a minute at most.
    assert Benchmark("http://127.0.0.1:1/", rps=5, no_duration=True)._idle_timeout() == 60.0


class _StopIgnored:
    """The core's run with its stop() ignored: a core that does not finish when stopped.
    (A real core cannot be made to hang on demand; the wait and everything else are real.)"""

    def __init__(self, run: object) -> None:
        self.real = run
        self.stops = 0

    def stop(self) -> None:
        self.stops += 1

    def __getattr__(self, name: str) -> object:
        return getattr(self.real, name)


def test_a_stop_from_another_thread_wakes_the_idle_wait(server, monkeypatch) -> None:
    # The idle wait sleeps until the watchdog's deadline as it stood when the wait began (up
    # to a minute). A stop from another thread moves that deadline (the give-up, counted
    # from the stop), so it must wake the wait: the give-up then comes on time.
    import nhbench._run as run_module
    from nhbench._exceptions import CoreError

    monkeypatch.setattr(run_module, "_WATCHDOG_SLACK", 1.0)
    previous = signal.set_wakeup_fd(-1)
    assert previous == -1, "another wake-up fd is set: the idle wait would not be used"
    bench = run_module.Benchmark(server.url, rps=5, duration="120s", connections=2,
                                 drain_timeout="1s")
    bench.start()
    hung = _StopIgnored(bench._run)
    bench._run = hung
    stopper = threading.Timer(1.0, bench.stop)
    stopper.start()
    t0 = time.monotonic()
    try:
        with pytest.raises(CoreError, match="did not finish within 2 s of being stopped"):
            bench.run()
        took = time.monotonic() - t0
    finally:
        stopper.cancel()
        hung.real.stop()
        assert hung.real.wait(30)
    assert hung.stops >= 1
    # The stop at 1 s, the give-up 2 s later; without the wake-up the wait lasted the whole
    # minute it had planned before the stop.
    assert 2.5 < took < 20, took
