"""Fixed-rate releases through the loop's harder paths (docs/benchmarks.md "Fixed rate: the
release path", "The worker's own wait: measured, not kept").

A leaner wait for the release timerfd than libuv's loop iteration (epoll_wait() on libuv's
backend fd, releasing directly when only the timerfd is ready) was measured and not kept. It
would have to keep these paths exact: libuv applies watcher changes (a connect's or a
partial write's POLLOUT) and runs pending write callbacks and closing handles only in its own
iteration, HTTP/2's prepare and check handles run around each poll, and a stop from another
thread is libuv's async handle. Each path is driven here against a real origin and must
release and serve exactly what its schedule says. Counts, no timings.
"""

from __future__ import annotations

import threading

import pytest
from support.pinned import CLIENT_CPU, SERVER_CPUS, run, served

import nhbench
from nhbench._run import Benchmark

pytestmark = pytest.mark.core



@pytest.fixture(scope="module")
def server():
    with nhbench.TestServer(cpus=SERVER_CPUS) as srv:
        yield srv



def send_buffer_max() -> int:
    """The most a TCP socket's send buffer grows to (the third of tcp_wmem)."""
    try:
        with open("/proc/sys/net/ipv4/tcp_wmem") as f:
            return int(f.read().split()[2])
    except (OSError, IndexError, ValueError):
        return 4 * 1024 * 1024


def test_connects_under_load_release_the_schedule_exactly(server):
    # 50 connections opened as the first releases fall due: each connect's POLLOUT is a
    # watcher change libuv applies at its next poll; a wait that blocked in front of it
    # would stall the run.
    before = served(server)
    result = run(server.url, rps=2000, requests=600, connections=50)
    assert result.schedule.released == 600
    assert result.counters["benchmark.http_2xx"] == 600
    assert served(server) - before == 600
    assert result.duration >= 599 / 2000 - 1e-6


def test_a_reconnect_per_request_releases_the_schedule_exactly(server):
    # One request a connection: every release closes a connection and opens another
    # (closing handles, a connect's POLLOUT, then a new read).
    before = served(server)
    result = run(server.url, rps=300, requests=60, connections=4,
                 max_requests_per_connection=1)
    assert result.schedule.released == 60
    assert result.counters["benchmark.http_2xx"] == 60
    assert served(server) - before == 60
    assert result.counters["upstream_cx_total"] >= 60


def test_a_body_bigger_than_the_send_buffer_releases_the_schedule_exactly(server):
    # A body twice the largest send buffer cannot go out in one send(): the rest is a
    # uv_write() (a POLLOUT watcher change, then a pending write callback) made from a
    # release (checked with strace: sendto() took about 4 MB of 8 MB).
    size = min(2 * send_buffer_max(), 64 * 1024 * 1024)
    before = served(server)
    result = run(server.url, rps=40, requests=12, connections=2, request_method="POST",
                 request_body_size=size)
    assert result.schedule.released == 12
    assert result.counters["benchmark.http_2xx"] == 12
    assert served(server) - before == 12
    assert result.counters["upstream_cx_tx_bytes_total"] >= 12 * size


def test_http2_at_a_fixed_rate_releases_the_schedule_exactly(server):
    # HTTP/2 keeps a prepare handle started for the whole run and its writes wait for the
    # check phase: a release made outside libuv's iteration would skip both.
    before = served(server)
    result = run(server.url, protocol="http2", rps=300, requests=90, connections=2)
    assert result.schedule.released == 90
    assert result.counters["benchmark.http_2xx"] == 90
    assert served(server) - before == 90


def test_a_stop_from_another_thread_wakes_the_wait(server):
    # The stop request is libuv's async handle (an eventfd in the backend fd's set); the
    # release wake-ups end and the run returns with what it made.
    before = served(server)
    bench = Benchmark(server.url, rps=500, no_duration=True, connections=4, cpus=CLIENT_CPU)
    timer = threading.Timer(0.5, bench.stop)
    timer.start()
    try:
        result = bench.run()
    finally:
        timer.cancel()
    assert result.interrupted
    released = result.counters["sequencer.released"]
    assert released > 0
    assert result.counters["benchmark.http_2xx"] == released
    assert served(server) - before == released
    assert result.duration < 30
