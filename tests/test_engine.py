"""The load engine against real servers: our own test server in-process, and a scripted
socket origin for response shapes our server never produces.

Counts and ratios only; no timing thresholds (those live in benchmarks/). Every test here
also runs in the ASan+UBSan build (`nox -s asan`).
"""

from __future__ import annotations

import os

import pytest
from support.scripted_origin import Reply, ScriptedOrigin

import nhbench

pytestmark = pytest.mark.core

CPUS = sorted(os.sched_getaffinity(0))
# Client and server on different CPUs where there are two; everything on one otherwise.
CLIENT_CPU = str(CPUS[0])
SERVER_CPUS = [CPUS[1] if len(CPUS) > 1 else CPUS[0]]


@pytest.fixture(scope="module")
def server():
    with nhbench.TestServer(cpus=SERVER_CPUS, response_body_size=64) as srv:
        yield srv


def run(url, **kw):
    kw.setdefault("cpus", CLIENT_CPU)
    kw.setdefault("duration", 1.0)
    return nhbench.run(url, **kw)


def test_fixed_rate_delivers_rps_times_duration_and_matches_server_count(server):
    before = server.stats()["requests"]
    result = run(server.url, rps=400, duration=2.0, connections=10)
    expected = 400 * 2
    c = result.counters
    assert abs(c["benchmark.http_2xx"] - expected) <= expected * 0.01
    assert c["upstream_rq_total"] == c["benchmark.http_2xx"] == c["sequencer.released"]
    assert server.stats()["requests"] - before == c["upstream_rq_total"]
    assert abs(result.achieved_rps - 400) <= 4
    assert result.success and result.terminated_by == "duration"
    # Every result carries the release lateness and the CO-correct headline latency.
    assert result.stat("sequencer.release_lateness").count == c["sequencer.released"]
    assert result.latency.id == "benchmark_http_client.scheduled_to_response"
    assert result.latency.count == c["benchmark.http_2xx"]
    body = result.stat("benchmark_http_client.response_body_size")
    assert body.min == body.max == 64


def test_rps_and_connections_are_per_worker(server):
    result = run(server.url, rps=200, duration=1.0, concurrency=2, cpus=None, connections=3)
    assert len(result.workers) == 2
    assert abs(result.counters["benchmark.http_2xx"] - 2 * 200) <= 4
    for worker in result.workers:
        assert abs(worker.counter_values["benchmark.http_2xx"] - 200) <= 2
        assert worker.counter_values["upstream_cx_total"] <= 3
    assert result.requested_rps == 400


@pytest.mark.parametrize("strategy", ["spin", "poll", "sleep"])
def test_idle_strategies_release_on_schedule(server, strategy):
    result = run(server.url, rps=300, duration=1.0, sequencer_idle_strategy=strategy)
    assert abs(result.counters["benchmark.http_2xx"] - 300) <= 3
    lateness = result.stat("sequencer.release_lateness")
    assert lateness.count == result.counters["sequencer.released"]


def test_max_rate_is_closed_loop_and_counts_match(server):
    before = server.stats()["requests"]
    result = run(server.url, rps=0, duration=1.0, connections=4)
    c = result.counters
    assert c["benchmark.http_2xx"] > 1000
    assert server.stats()["requests"] - before == c["upstream_rq_total"] == c["benchmark.http_2xx"]
    assert c["upstream_cx_total"] == 4
    assert c["benchmark.pool_overflow"] == 0


def test_closed_loop_blocks_and_latency_includes_the_wait():
    # 2 connections, 50 ms per response: at most 40 rps can be served, 100 are asked.
    with nhbench.TestServer(cpus=SERVER_CPUS, static_delay="50ms") as slow:
        result = run(slow.url, rps=100, duration=1.0, connections=2)
    c = result.counters
    assert c["sequencer.blocked"] >= 1
    assert result.stat("sequencer.blocking").count >= 1
    assert c["benchmark.pool_overflow"] == 0
    # Coordinated-omission correction: the wait for a connection is part of the headline.
    assert result.latency.p(50) > 2 * result.stat("benchmark_http_client.request_to_response").p(50)
    assert c["benchmark.http_2xx"] < 100


def test_open_loop_drops_what_it_cannot_send_and_says_so():
    with nhbench.TestServer(cpus=SERVER_CPUS, static_delay="50ms") as slow:
        result = run(slow.url, rps=100, duration=1.0, connections=2, open_loop=True)
    c = result.counters
    assert c["benchmark.pool_overflow"] > 0
    assert c["sequencer.blocked"] == 0
    # Every scheduled release is either sent or counted as dropped.
    assert c["sequencer.released"] + c["benchmark.pool_overflow"] == 100
    assert "pool_overflow" in result.render("human")


def test_open_loop_with_a_queue_keeps_scheduled_times():
    with nhbench.TestServer(cpus=SERVER_CPUS, static_delay="20ms") as slow:
        result = run(slow.url, rps=100, duration=1.0, connections=1, open_loop=True,
                     max_pending_requests=1000, drain_timeout=10.0)
    c = result.counters
    assert c["benchmark.pool_overflow"] == 0
    assert c["upstream_rq_pending_total"] > 0
    assert c["benchmark.http_2xx"] == 100
    # Queued requests waited: measured from their scheduled time they are much slower.
    assert result.latency.max > 5 * result.stat("benchmark_http_client.request_to_response").p(50)


def test_termination_predicate_stops_the_run_successfully(server):
    result = run(server.url, rps=1000, duration=30.0, termination_predicate={"benchmark.http_2xx": 99})
    assert result.terminated_by == "termination_predicate:benchmark.http_2xx"
    assert 100 <= result.counters["benchmark.http_2xx"] < 30000
    assert result.success


def test_failure_predicate_fires_and_marks_the_run_failed(server):
    result = run(server.url, rps=1000, duration=30.0, failure_predicate={"benchmark.http_2xx": 10})
    assert result.terminated_by == "failure_predicate:benchmark.http_2xx"
    assert "benchmark.http_2xx" in result.failed_predicates
    assert not result.success


def test_refused_port_ends_quickly_through_the_connection_failure_predicate():
    with ScriptedOrigin(lambda r: None) as origin:
        url = origin.url
    result = run(url, rps=100, duration=30.0)
    assert result.counters["benchmark.pool_connection_failure"] >= 1
    assert "benchmark.pool_connection_failure" in result.failed_predicates
    assert not result.success
    assert result.error and "refused" in result.error


def test_head_body_and_max_requests_per_connection(server):
    before = server.stats()
    result = run(server.url, rps=200, duration=1.0, connections=1, request_method="HEAD",
                 max_requests_per_connection=10)
    c = result.counters
    # One connection re-opened every 10 requests: in a slow (sanitizer) build the closed loop
    # may still be blocked on a reconnect when the duration ends, so a release or two may not
    # happen. Every release that did happen must have ended in a 2xx.
    assert c["benchmark.http_2xx"] == c["sequencer.released"] >= 190
    assert result.stat("benchmark_http_client.response_body_size").max == 0
    assert c["upstream_cx_total"] == -(-c["benchmark.http_2xx"] // 10)
    assert server.stats()["connections_total"] - before["connections_total"] == c["upstream_cx_total"]


def test_request_body_and_headers_go_out_as_asked():
    with ScriptedOrigin(lambda r: Reply(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")) as origin:
        result = run(origin.url + "p?q=1", rps=50, duration=0.2, connections=1, request_method="POST",
                     request_body_size=1000, request_header=["x-test: yes", "x-other: 2"])
    assert result.counters["benchmark.http_2xx"] == 10
    request = origin.requests[0]
    head, _, body = request.partition(b"\r\n\r\n")
    assert head.startswith(b"POST /p?q=1 HTTP/1.1\r\n")
    assert b"\r\nx-test: yes" in head and b"\r\nx-other: 2" in head
    assert body == b"a" * 1000


def test_prefetch_opens_every_connection(server):
    result = run(server.url, rps=10, duration=0.5, connections=7, prefetch_connections=True)
    assert result.counters["upstream_cx_total"] == 7


@pytest.mark.parametrize(
    ("response", "status_counter", "body_size"),
    [
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
         "benchmark.http_2xx", 11),
        (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 3\r\n\r\nabc",
         "benchmark.http_2xx", 3),
        (b"HTTP/1.1 204 No Content\r\n\r\n", "benchmark.http_2xx", 0),
        (b"HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n", "benchmark.http_3xx", 0),
        (b"HTTP/1.1 404 Not Found\r\nContent-Length: 1\r\n\r\nx", "benchmark.http_4xx", 1),
        (b"HTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n", "benchmark.http_5xx", 0),
        (b"HTTP/1.1 299 Odd\r\nContent-Length: 0\r\n\r\n", "benchmark.http_2xx", 0),
        (b"HTTP/1.1 600 Beyond\r\nContent-Length: 0\r\n\r\n", "benchmark.http_xxx", 0),
    ],
)
def test_response_framings(response, status_counter, body_size):
    with ScriptedOrigin(lambda r: Reply(response)) as origin:
        result = run(origin.url, rps=100, duration=0.2, connections=1, no_default_failure_predicates=True)
    assert result.counters[status_counter] == 20
    assert result.counters["upstream_cx_total"] == 1
    assert result.stat("benchmark_http_client.response_body_size").max == body_size


# serial: with the other test worker busy on a loaded machine, released + blocked came to 14
# for the 10 releases of this schedule once (not explained yet: worth a look of its own).
@pytest.mark.serial
def test_close_delimited_body_ends_with_the_connection():
    reply = Reply(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + b"z" * 5000, close_after=True)
    with ScriptedOrigin(lambda r: reply) as origin:
        result = run(origin.url, rps=50, duration=0.2, connections=2)
    c = result.counters
    # How many of the 10 releases find a connection depends on how fast the origin (a
    # Python thread) accepts the next one; under the sanitizer build, few do. So the test
    # checks what must hold whatever the timing: every release was answered in full, and
    # every response ended its connection.
    assert c["benchmark.http_2xx"] >= 1
    assert c["sequencer.released"] == c["benchmark.http_2xx"]
    assert c["sequencer.released"] + c["sequencer.blocked"] == 10
    assert c["benchmark.http_2xx"] <= c["upstream_cx_total"] <= c["benchmark.http_2xx"] + 2
    assert c["upstream_cx_destroy_remote"] >= c["benchmark.http_2xx"] - 2
    stat = result.stat("benchmark_http_client.response_body_size")
    assert stat.min == stat.max == 5000


@pytest.mark.parametrize(
    "response",
    [
        b"garbage\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab",  # truncated, then closed
        b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"\x00\xff" * 100,
    ],
)
def test_broken_responses_are_counted_never_crash(response):
    with ScriptedOrigin(lambda r: Reply(response, close_after=True)) as origin:
        result = run(origin.url, rps=100, duration=0.2, connections=2, no_default_failure_predicates=True)
    c = result.counters
    # Each release ends as a response, a reset, or is still accounted for.
    ended = sum(c[f"benchmark.http_{k}xx"] for k in "12345") + c["benchmark.http_xxx"]
    assert ended + c["benchmark.stream_resets"] + c["upstream_rq_cancelled"] == c["upstream_rq_total"]
    assert c["benchmark.stream_resets"] >= 1


def test_request_timeout_closes_the_connection():
    with nhbench.TestServer(cpus=SERVER_CPUS, static_delay="2s") as slow:
        result = run(slow.url, rps=10, duration=0.5, connections=10, request_timeout=0.2,
                     no_default_failure_predicates=True)
    assert result.counters["benchmark.request_timeout"] == 5
    assert result.counters["benchmark.http_2xx"] == 0


def test_percentiles_are_reported_at_the_exact_points(server):
    result = run(server.url, rps=500, duration=0.5, percentiles=[50, 99, 99.9])
    points = [p.percentile for p in result.latency.percentiles]
    assert 0.99 in points and 0.999 in points and 0.990625 not in points
    assert result.latency.p(50) <= result.latency.p(99) <= result.latency.max


def test_asking_for_more_than_the_target_can_do_does_not_degrade(server):
    # Nighthawk's rate falls far below the target's capacity when asked for too much
    # (nighthawk#576); here a closed loop asked for 1M rps runs at about the max rate, and
    # the scheduled-time latency says how far behind the schedule it fell.
    max_rate = run(server.url, rps=0, duration=1.0, connections=10)
    overload = run(server.url, rps=1_000_000, duration=1.0, connections=10)
    # Wide enough for a loaded 2-core machine; Nighthawk#576 fell to about 1%.
    assert overload.achieved_rps > 0.3 * max_rate.achieved_rps
    assert overload.counters["sequencer.blocked"] > 0
    assert overload.latency.p(50) > 10 * overload.stat("benchmark_http_client.request_to_response").p(50)
