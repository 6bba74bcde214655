"""Latency SLOs as pytest tests: the example of docs/pytest.md.

Run it with ``pytest docs/examples/test_slo_example.py``; nhbench's plugin is active as soon
as nhbench is installed. Each test starts nhbench's test server on a loopback port, sends a
short, low-rate load and lets the plugin check the objectives. The last test is meant to
fail, to show the message a breach gives (the suite runs this file and checks it does).
"""

import pytest

import nhbench


# The three-line test: every load the test runs must meet both objectives. Percentiles are
# the coordinated-omission-corrected latency (scheduled send to response end).
@pytest.mark.nhbench_slo("p99<500ms", "error_rate<0.1%")
def test_latency_objective(nhbench_server, nhbench_run):
    nhbench_run(nhbench_server().url, rps=100, duration="1s")


# Any statistic by name, the achieved rate, a counter, blocked releases.
@pytest.mark.nhbench_slo(
    "benchmark_http_client.request_to_response:p99<500ms",
    "achieved/requested>0.9",
    "benchmark.http_5xx==0",
    "blocked==0",
)
def test_several_loads(nhbench_server, nhbench_run):
    server = nhbench_server(response_body_size=128)
    for rps in (50, 100):
        result = nhbench_run(server.url, rps=rps, duration="0.5s", connections=4)
        assert result.counters["benchmark.http_2xx"] > 0


# Without the marker: check the result yourself. check_slo gives the structured verdict,
# assert_slo raises nhbench.SloError (an AssertionError) with the tables.
def test_structured_verdict(nhbench_server, nhbench_run):
    result = nhbench_run(nhbench_server().url, rps=100, duration="0.5s")
    outcome = result.check_slo("p99<1s", "rps>=1")
    assert outcome, str(outcome)
    assert [verdict.passed for verdict in outcome] == [True, True]
    assert outcome.verdicts[0].unit == "s" and outcome.verdicts[0].value is not None
    nhbench.assert_slo(result, "max<2s", "errors==0")


# Deliberately impossible: no response takes less than a nanosecond. The test fails with a
# message that lists each rule with the measured value against the threshold, then a compact
# percentile table.
@pytest.mark.nhbench_slo("p99<1ns", "error_rate<0.1%")
def test_deliberately_failing_slo(nhbench_server, nhbench_run):
    nhbench_run(nhbench_server().url, rps=50, duration="0.5s")
