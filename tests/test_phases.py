"""Latency phases (docs/engine.md "Latency phases"): against our test server with a known
static delay and TLS, over HTTP/1.1, HTTP/2 and HTTP/3, each phase lands where it must.

- The server's think time is the static delay, so time_to_first_byte's median is about the
  delay (a wide ratio: loopback RTT is microseconds, the delay 20 ms).
- connect and tls_handshake count once per new connection, never per request.
- request_write + time_to_first_byte + transfer = request_to_response for every request (the
  pool records them from the same timestamps), and with queue_to_connect they make up
  sequencer.callback: summed over the run, equal within 1 us per request.
"""

from __future__ import annotations

import pytest
from support.cli import nhbench_cli

import nhbench
from nhbench.browse._pages import result_page

DELAY = 0.020
CONNECT = "benchmark_http_client.connect"
TLS = "benchmark_http_client.tls_handshake"
WRITE = "benchmark_http_client.request_write"
TTFB = "benchmark_http_client.time_to_first_byte"
TRANSFER = "benchmark_http_client.transfer"


def _sum(result: nhbench.Result, stat_id: str) -> float:
    s = result.stat(stat_id)
    return s.mean * s.count


@pytest.mark.parametrize("protocol", ["http1", "http2", "http3"])
def test_phases_against_a_known_delay_over_tls(protocol: str) -> None:
    kw = {"http3": True} if protocol == "http3" else {}
    with nhbench.TestServer(static_delay=f"{DELAY * 1000:g}ms", tls_self_signed=True,
                            response_body_size=1024, **kw) as server:
        result = nhbench.run(server.url, protocol=protocol, rps=100, duration=1.0,
                             connections=4, cacert=server.ca_cert, cpus=1,
                             max_requests_per_connection=10)
    assert result.success, result.error
    c = result.counters
    n = c["benchmark.http_2xx"]
    assert n == 100
    # Think time: the server's delay, plus a loopback round trip.
    ttfb = result.stat(TTFB)
    assert ttfb.count == n
    assert DELAY * 0.9 <= ttfb.p(50) <= DELAY * 2.5, ttfb.p(50)
    # The rest of the request is small beside it on loopback.
    for stat_id in (WRITE, TRANSFER):
        assert result.stat(stat_id).count == n
        assert result.stat(stat_id).p(50) < DELAY / 2, (stat_id, result.stat(stat_id).p(50))
    if protocol == "http1":
        # The socket takes a small request at once: it is written by the hand-over's call.
        assert result.stat(WRITE).max == 0
    # Connection phases: once per connection opened (10 requests per connection force new
    # ones), never per request.
    opened = c["upstream_cx_total"]
    assert 10 <= opened < n
    assert result.stat(TLS).count == c["ssl.handshake"] == opened
    if protocol == "http3":
        assert result.stat(CONNECT).count == 0  # no TCP connect: the QUIC handshake is all
    else:
        assert result.stat(CONNECT).count == opened
    # The phases add up: per request exactly, summed over the run within 1 us per request.
    total = result.stat("benchmark_http_client.request_to_response")
    parts = _sum(result, WRITE) + _sum(result, TTFB) + _sum(result, TRANSFER)
    assert abs(parts - total.mean * total.count) <= 1e-6 * n
    callback = result.stat("sequencer.callback")
    assert callback.count == n
    whole = parts + _sum(result, "benchmark_http_client.queue_to_connect")
    assert abs(whole - callback.mean * callback.count) <= 1e-6 * n
    # The headline is still measured from the schedule, and is the largest.
    assert result.latency.count == n
    assert result.latency.mean >= total.mean


@pytest.mark.parametrize("protocol", ["http1", "http2"])
def test_a_body_over_several_reads_is_transfer_time(protocol: str) -> None:
    # 4 MiB cannot arrive in one read: the first byte is timed at the first read and the
    # rest of the body is transfer, not think time.
    with nhbench.TestServer(static_delay="10ms", response_body_size=4 << 20) as server:
        result = nhbench.run(server.url, protocol=protocol, rps=20, duration=0.5,
                             connections=1, cpus=1)
    assert result.success, result.error
    n = result.counters["benchmark.http_2xx"]
    assert n >= 5
    transfer, ttfb = result.stat(TRANSFER), result.stat(TTFB)
    assert transfer.count == ttfb.count == n
    assert transfer.min > 0
    # At least the delay; the upper bound is wide for a host busy with other runs.
    assert 0.009 <= ttfb.p(50) <= 0.1, ttfb.p(50)
    total = result.stat("benchmark_http_client.request_to_response")
    parts = _sum(result, WRITE) + _sum(result, TTFB) + _sum(result, TRANSFER)
    assert abs(parts - total.mean * total.count) <= 1e-6 * n


def test_the_human_report_has_a_phases_block() -> None:
    with nhbench.TestServer(static_delay="2ms", tls_self_signed=True) as server:
        result = nhbench.run(server.url, rps=20, duration=0.5, cacert=server.ca_cert, cpus=1)
    text = result.render("human")
    start = text.index("LATENCY PHASES")
    block = text[start:text.index("\n\n", start)].splitlines()[2:]
    assert [line.split()[0] for line in block] == [
        "benchmark_http_client.queue_to_connect", CONNECT, TLS, WRITE, TTFB, TRANSFER]
    # connect and tls_handshake: one connection, one sample each; the others one per request.
    assert [int(line.split()[1]) for line in block] == [10, 1, 1, 10, 10, 10]
    assert text.index("LATENCY (headline)") < start


def test_the_browser_page_has_a_phases_chart() -> None:
    with nhbench.TestServer(static_delay="2ms") as server:
        result = nhbench.run(server.url, rps=20, duration=0.5, cpus=1)
    page = result_page(result, "run.json")
    chart = page[page.index('id="phases"'):]
    chart = chart[:chart.index("</div>")]
    # One curve per phase with samples: plain HTTP has no handshake to draw.
    for name in ("queue_to_connect", "connect", "request_write", "time_to_first_byte",
                 "transfer"):
        assert name in chart
    assert "tls_handshake" not in chart


def test_an_slo_on_a_phase_names_it_and_fails_the_run() -> None:
    with nhbench.TestServer(static_delay="10ms") as server:
        ok = nhbench_cli("run", server.url, "--rps", "20", "--duration", "0.5",
                         "--slo", "benchmark_http_client.time_to_first_byte:p50<1s")
        bad = nhbench_cli("run", server.url, "--rps", "20", "--duration", "0.5",
                          "--slo", "benchmark_http_client.time_to_first_byte:p50<5ms")
    assert ok.returncode == 0, ok.stderr
    # The think time is the 10 ms delay: a 5 ms bound on it fails the run (exit 99).
    assert bad.returncode == 99, bad.stderr
    assert "time_to_first_byte" in bad.stdout + bad.stderr
