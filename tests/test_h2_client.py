"""The HTTP/2 client against nginx: h2c with prior knowledge, stream limits, GOAWAY and
RST_STREAM accounting, flow control with large bodies.

Counts and ratios only, no timing thresholds. nginx's access log is the independent count.
Every request the client releases must end as exactly one of: a response, a reset, an
error, or (when the run ends first) a cancellation. Skipped when nginx or openssl is missing.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator

import pytest
from support.nginx import needs_nginx_and_openssl, run_counted_by_nginx

import nhbench
from benchmarks.nginx_origin import BIG_SIZE, BODY, NginxOrigin

pytestmark = [pytest.mark.core, needs_nginx_and_openssl]

CPUS = sorted(os.sched_getaffinity(0))
CLIENT_CPU = str(CPUS[0])

# Every way a released request can end (docs/engine.md).
ENDINGS = (
    "benchmark.http_1xx", "benchmark.http_2xx", "benchmark.http_3xx", "benchmark.http_4xx",
    "benchmark.http_5xx", "benchmark.http_xxx", "benchmark.stream_resets",
    "benchmark.pool_connection_failure", "benchmark.request_timeout", "upstream_rq_cancelled",
    "upstream_rq_retry_limit_exceeded",
)


@pytest.fixture(scope="module")
def origin() -> Iterator[NginxOrigin]:
    with NginxOrigin() as nginx:
        yield nginx


@pytest.fixture(scope="module")
def goaway_origin() -> Iterator[NginxOrigin]:
    # 20 requests per connection, then GOAWAY; at most 10 streams at once.
    with NginxOrigin(keepalive_requests=20, max_streams=10) as nginx:
        yield nginx


def run(url: str, **kw: object) -> nhbench.Result:
    kw.setdefault("cpus", CLIENT_CPU)
    kw.setdefault("duration", 1.0)
    kw.setdefault("protocol", "http2")
    return nhbench.run(url, **kw)


def assert_every_request_ended_once(result: nhbench.Result) -> None:
    c = result.counters
    assert c["sequencer.released"] == sum(c[name] for name in ENDINGS), {
        name: c[name] for name in ("sequencer.released", *ENDINGS) if c[name]
    }


def test_h2c_prior_knowledge_counts_agree_with_nginx(origin: NginxOrigin) -> None:
    result = run_counted_by_nginx(origin, run, origin.url("h2c"), "HTTP/2.0", rps=0)
    c = result.counters
    # Nighthawk's defaults: no stream limit of ours, 100 active requests: one connection.
    assert c["upstream_cx_total"] == c["upstream_cx_http2_total"] == 1
    assert c["upstream_cx_http1_total"] == 0
    body = result.stat("benchmark_http_client.response_body_size")
    assert body.min == body.max == len(BODY)
    assert result.stat("benchmark_http_client.response_header_size").min > 0


def test_h2c_fixed_rate_and_the_h2c_flag(origin: NginxOrigin) -> None:
    mark = origin.mark()
    result = nhbench.run(origin.url("h2c"), h2c=True, rps=300, duration=1.0, cpus=CLIENT_CPU)
    assert result.options.protocol == "http2"
    assert result.success and result.counters["benchmark.http_2xx"] == 300
    assert len(origin.since(mark)) == 300
    assert_every_request_ended_once(result)


@pytest.mark.parametrize(("streams", "active", "expected"), [(1, 4, 4), (2, 6, 3), (4, 6, 2)])
def test_max_concurrent_streams_is_per_connection(
    origin: NginxOrigin, streams: int, active: int, expected: int
) -> None:
    # Closed loop at max rate keeps `active` requests in flight; with at most `streams` per
    # connection that takes ceil(active / streams) connections, and no more.
    mark = origin.mark()
    result = run(origin.url("h2c"), rps=0, connections=10, max_concurrent_streams=streams,
                 max_active_requests=active)
    c = result.counters
    assert result.success, result.error
    assert c["upstream_cx_total"] == expected == math.ceil(active / streams)
    lines = origin.since(mark)
    assert len(lines) == c["benchmark.http_2xx"]
    assert len({line[0] for line in lines}) == expected  # nginx's connection serial numbers


def test_max_concurrent_streams_one_is_one_connection_per_concurrent_request(
    origin: NginxOrigin,
) -> None:
    result = run(origin.url("h2c"), rps=0, connections=3, max_concurrent_streams=1)
    assert result.success, result.error
    assert result.counters["upstream_cx_total"] == 3


def test_max_requests_per_connection_counts_streams(origin: NginxOrigin) -> None:
    # Requests that ride along with a connection still connecting count too: no connection
    # carries more than 5, however many streams it could hold.
    mark = origin.mark()
    result = run(origin.url("h2c"), rps=0, duration=0.5, max_requests_per_connection=5,
                 max_active_requests=20)
    c = result.counters
    assert result.success, result.error
    lines = origin.since(mark)
    assert len(lines) == c["benchmark.http_2xx"] > 0
    per_connection: dict[str, int] = {}
    for line in lines:
        per_connection[line[0]] = per_connection.get(line[0], 0) + 1
    assert max(per_connection.values()) == 5
    assert c["upstream_cx_total"] >= c["benchmark.http_2xx"] // 5
    assert_every_request_ended_once(result)


def test_max_active_requests_bounds_the_closed_loop(origin: NginxOrigin) -> None:
    # Open loop, 1 active request, no queue: releases beyond the one in flight are dropped.
    narrow = run(origin.url("h2c", "/big"), rps=2000, duration=0.5, open_loop=True,
                 max_active_requests=1)
    wide = run(origin.url("h2c", "/big"), rps=2000, duration=0.5, open_loop=True,
               max_active_requests=1000, connections=10)
    for result in (narrow, wide):
        c = result.counters
        assert c["sequencer.released"] + c["benchmark.pool_overflow"] == 1000
        assert_every_request_ended_once(result)
    assert narrow.counters["benchmark.pool_overflow"] > wide.counters["benchmark.pool_overflow"]
    assert narrow.counters["upstream_cx_total"] == 1


def test_goaway_every_request_ends_once_and_refused_ones_are_retried(
    goaway_origin: NginxOrigin,
) -> None:
    mark = goaway_origin.mark()
    result = run(goaway_origin.url("h2c"), rps=0, connections=4, max_active_requests=10)
    c = result.counters
    lines = goaway_origin.since(mark)
    assert_every_request_ended_once(result)
    assert c["upstream_cx_close_notify"] >= 1  # GOAWAYs received
    assert c["upstream_cx_total"] >= c["benchmark.http_2xx"] // 20
    # nginx answered exactly what the client counted; refused streams it never processed
    # were sent again (upstream_rq_retry), so the requests written add up too.
    assert len(lines) == c["benchmark.http_2xx"] > 0
    first_sends = c["upstream_rq_total"] - c["upstream_rq_retry"]
    assert c["benchmark.http_2xx"] <= first_sends <= c["sequencer.released"]
    assert c["benchmark.stream_resets"] == 0 and result.success, result.error


def test_goaway_over_tls_with_large_responses(goaway_origin: NginxOrigin) -> None:
    mark = goaway_origin.mark()
    result = run(goaway_origin.url("tls", "/big"), rps=0, max_active_requests=10,
                 cacert=goaway_origin.cacert)
    c = result.counters
    assert_every_request_ended_once(result)
    assert len(goaway_origin.since(mark)) == c["benchmark.http_2xx"] > 0
    assert c["ssl.handshake"] == c["upstream_cx_total"] >= 2
    assert result.success, result.error


def test_rst_stream_ends_requests_as_resets(origin: NginxOrigin) -> None:
    # nginx answers /reset with RST_STREAM over HTTP/2; the connection lives on.
    mark = origin.mark()
    result = run(origin.url("h2c", "/reset"), rps=0, no_default_failure_predicates=True)
    c = result.counters
    assert_every_request_ended_once(result)
    assert c["benchmark.stream_resets"] == c["sequencer.released"] == len(origin.since(mark)) > 0
    assert c["benchmark.http_2xx"] == 0
    assert c["upstream_cx_total"] == 1
    assert result.error is not None and "stream reset" in result.error
    # With the default failure predicates the first reset fails the run.
    failing = run(origin.url("h2c", "/reset"), rps=100)
    assert failing.failed_predicates == ["benchmark.stream_resets"]
    assert_every_request_ended_once(failing)


def test_large_response_body_flow_control(origin: NginxOrigin) -> None:
    for kind in ("h2c", "tls"):
        mark = origin.mark()
        result = run(origin.url(kind, "/big"), rps=0, max_active_requests=8, duration=0.5,
                     cacert=origin.cacert if kind == "tls" else None)
        assert result.success, result.error
        body = result.stat("benchmark_http_client.response_body_size")
        assert body.count == result.counters["benchmark.http_2xx"] > 0
        assert body.min == body.max == BIG_SIZE
        lines = origin.since(mark)
        assert len(lines) == body.count
        assert all(int(line[6]) == BIG_SIZE for line in lines)


def test_large_request_body_flow_control(origin: NginxOrigin) -> None:
    mark = origin.mark()
    result = run(origin.url("h2c", "/upload"), rps=0, max_active_requests=4, duration=0.5,
                 request_method="PUT", request_body_size=BIG_SIZE)
    assert result.success, result.error
    lines = origin.since(mark)
    assert len(lines) == result.counters["benchmark.http_2xx"] > 0
    assert all(line[4] == "PUT" and int(line[5]) > BIG_SIZE for line in lines)


def test_request_timeout_resets_the_stream_and_keeps_the_connection(
    origin: NginxOrigin,
) -> None:
    # 1 MiB responses at 1 ms time-out: most time out; each one ends once, the connection
    # survives (HTTP/2 resets the stream instead of closing the connection).
    result = run(origin.url("h2c", "/big"), rps=0, max_active_requests=50, duration=0.5,
                 request_timeout="1ms", no_default_failure_predicates=True, drain_timeout=2)
    c = result.counters
    assert_every_request_ended_once(result)
    assert c["benchmark.request_timeout"] > 0
    assert c["upstream_cx_total"] == 1


def test_h1_over_the_same_nginx_is_unchanged(origin: NginxOrigin) -> None:
    mark = origin.mark()
    result = nhbench.run(origin.url("h1"), rps=0, connections=4, duration=1.0, cpus=CLIENT_CPU)
    c = result.counters
    assert result.success, result.error
    assert len(origin.since(mark)) == c["benchmark.http_2xx"] == c["upstream_rq_total"]
    assert c["upstream_cx_http1_total"] == c["upstream_cx_total"] == 4
    assert c["upstream_cx_http2_total"] == 0
