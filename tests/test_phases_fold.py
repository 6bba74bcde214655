"""The latency phases recorded once per response and folded into their statistics
(csrc/client/phases.c, docs/engine.md "Latency phases"): against real servers, every
statistic that takes a response's latency or a phase counts every response exactly once, in
the phase (warm-up or measured) and the worker it belongs to, whichever status it had.

- A run with a warm-up: the warm-up's responses in the warm-up's statistics only, the
  measured phase's in its own (the fold at the warm-up's end).
- Two workers: each worker's statistics hold its own responses, the global their sum.
- 2xx and 404 answers mixed: latency_2xx and latency_4xx count their own, request_to_response
  and every phase count all, and the phases still add up to request_to_response.
"""

from __future__ import annotations

import threading

import pytest
from support.scripted_origin import Reply, ScriptedOrigin

import nhbench

R2R = "benchmark_http_client.request_to_response"
WRITE = "benchmark_http_client.request_write"
TTFB = "benchmark_http_client.time_to_first_byte"
TRANSFER = "benchmark_http_client.transfer"
LAT2XX = "benchmark_http_client.latency_2xx"
LAT4XX = "benchmark_http_client.latency_4xx"
SCHED = "benchmark_http_client.scheduled_to_response"
CALLBACK = "sequencer.callback"
QUEUE = "benchmark_http_client.queue_to_connect"
PER_RESPONSE = (R2R, WRITE, TTFB, TRANSFER, SCHED, CALLBACK)


def _counts(part: nhbench.WorkerResult | nhbench.Result, ids: tuple[str, ...]) -> dict[str, int]:
    return {i: part.stat(i).count for i in ids}


def _sum(part: nhbench.WorkerResult | nhbench.Result, stat_id: str) -> float:
    s = part.stat(stat_id)
    return s.mean * s.count


@pytest.mark.parametrize("rps", [200, 0])
def test_a_warmups_responses_stay_in_the_warmup(server: nhbench.TestServer, rps: int) -> None:
    # rps 0 is a closed loop: each release is its schedule, so scheduled_to_response and
    # sequencer.callback are one value, recorded once; at a rate they are recorded apart.
    result = nhbench.run(server.url, rps=rps, duration=0.5, sequential_warmup=True,
                         connections=5)
    assert result.success, result.error
    warm = result.warmup
    assert warm is not None
    assert warm.counter_values["benchmark.http_2xx"] == 5
    assert _counts(warm, (*PER_RESPONSE, LAT2XX)) == dict.fromkeys((*PER_RESPONSE, LAT2XX), 5)
    n = result.counters["benchmark.http_2xx"]
    assert n >= 20
    assert _counts(result, (*PER_RESPONSE, LAT2XX)) == dict.fromkeys((*PER_RESPONSE, LAT2XX), n)
    # Our server's small answers come in one read after a request the socket took at once:
    # the common case, recorded once per response.
    assert result.stat(WRITE).max == 0 and result.stat(TRANSFER).p(50) == 0
    assert result.stat(TTFB).min > 0
    # The phases add up, and with queue_to_connect make up sequencer.callback.
    parts = _sum(result, WRITE) + _sum(result, TTFB) + _sum(result, TRANSFER)
    assert abs(parts - _sum(result, R2R)) <= 1e-6 * n
    assert abs(_sum(result, QUEUE) + _sum(result, R2R) - _sum(result, CALLBACK)) <= 1e-6 * n
    if rps == 0:
        assert result.stat(SCHED).mean == result.stat(CALLBACK).mean


def test_each_worker_keeps_its_own(server: nhbench.TestServer) -> None:
    result = nhbench.run(server.url, rps=400, duration=0.5, concurrency=2, connections=2,
                         cpus=None)
    assert result.success, result.error
    assert [r.name for r in result.results] == ["worker_0", "worker_1", "global"]
    total = 0
    for part in result.results[:2]:
        n = part.counter_values["benchmark.http_2xx"]
        assert n >= 20, part.name
        assert _counts(part, (*PER_RESPONSE, LAT2XX)) == dict.fromkeys((*PER_RESPONSE, LAT2XX), n)
        total += n
    assert total == result.counters["benchmark.http_2xx"]
    assert _counts(result, (*PER_RESPONSE, LAT2XX)) == dict.fromkeys((*PER_RESPONSE, LAT2XX), total)


OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
MISSING = b"HTTP/1.1 404 Not Found\r\nContent-Length: 4\r\n\r\nnone"


def test_2xx_and_404_mixed_count_once_each() -> None:
    lock = threading.Lock()
    served = [0]

    def respond(_request: bytes) -> Reply:
        with lock:
            served[0] += 1
            return Reply(MISSING if served[0] % 3 == 0 else OK)

    with ScriptedOrigin(respond) as origin:
        # A count, not a duration: a loaded host answers few requests in a second; and
        # no default failure predicate, which would stop the run at the first 404.
        result = nhbench.run(origin.url, rps=300, requests=30, duration=30.0, connections=1,
                             no_default_failure_predicates=True)
    c = result.counters
    ok, missing = c["benchmark.http_2xx"], c["benchmark.http_4xx"]
    assert ok >= 4 and missing >= 2
    assert result.stat(LAT2XX).count == ok
    assert result.stat(LAT4XX).count == missing
    assert _counts(result, PER_RESPONSE) == dict.fromkeys(PER_RESPONSE, ok + missing)
    parts = _sum(result, WRITE) + _sum(result, TTFB) + _sum(result, TRANSFER)
    assert abs(parts - _sum(result, R2R)) <= 1e-6 * (ok + missing)
    assert abs(_sum(result, LAT2XX) + _sum(result, LAT4XX) - _sum(result, R2R)) <= 1e-6 * (ok + missing)
