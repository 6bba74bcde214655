"""benchmarks/scale.py in a modest version, so the scale figures' tooling cannot rot and what
it shows stays true: 2,000 connections from a client process to a test-server process, each
connection used, counts exact, every descriptor returned; a lowered soft descriptor limit is
raised to the hard one, and more connections than the hard limit allows are refused by name
before the run; the merge of many workers' results is exact. Real processes throughout (the
client and the server each their own); no timing is judged (the figures are in
docs/benchmarks.md, "Scale").
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import nhbench

BENCH_DIR = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH_DIR))
try:
    import scale  # benchmarks/scale.py
finally:
    sys.path.remove(str(BENCH_DIR))


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    with nhbench.TestServer(subprocess=True, header_timeout=600) as server:
        yield server.url


@pytest.mark.timeout(240)
def test_every_connection_carries_requests_and_every_descriptor_returns() -> None:
    n = 2000
    m = scale.measure(n, bursts=2, gap=2.0)
    counters = m["counters"]
    assert m["client_exit"] == 0
    assert m["error"] is None and m["terminated_by"] == "duration"
    # The server held all n at once (its descriptors), and the client opened exactly n: a
    # burst of n HTTP/1.1 requests over n connections puts one request on each.
    assert m["connected_s"] is not None
    assert counters["upstream_cx_total"] == n
    assert "upstream_cx_connect_fail" not in counters
    assert m["first_burst_answered"] == n
    assert counters["benchmark.http_2xx"] == 2 * n
    assert counters["upstream_rq_total"] == 2 * n
    # Descriptors: the client's count after the run is that before it, give or take the few
    # the core opens once per process (not one per connection); the server closed its side.
    assert m["fds_after"] - m["fds_before"] < 16
    assert m["server_fds_left"] < 16
    # Both processes' RSS were read while the connections were held.
    assert m["client_rss_kib"] > 0 and m["server_rss_kib"] > 0


@pytest.mark.timeout(180)
def test_more_connections_than_descriptors_fail_by_name(server_url: str) -> None:
    limit, n = 300, 600
    # Only the soft limit lowered: the run raises it to the hard one (as Go does for
    # Fortio), and every connection opens.
    run = scale.emfile_run(limit, n, server_url)
    assert run["exit"] == 0, run
    counters = run["counters"]
    assert counters["upstream_cx_total"] == n
    assert "upstream_cx_connect_fail" not in counters
    assert counters["benchmark.http_2xx"] == counters["sequencer.released"]

    # The hard limit lowered too: refused by name before the run, nothing measured.
    run = scale.emfile_run(limit, n, server_url, hard=True)
    assert run["exit"] == 2, run
    assert run["stderr"].startswith(f"nhbench: error: --connections: {n} connections need ")
    assert f"hard limit of {limit}" in run["stderr"], run
    assert run["counters"] == {}



@pytest.mark.timeout(120)
def test_merge_of_many_workers_is_exact(server_url: str) -> None:
    core, options = scale.one_worker_core(server_url)
    # merge_seconds raises SystemExit when the merged counters are not the workers' sum.
    wall, cpu = scale.merge_seconds(core, options, workers=8, per_node=4, reps=1)
    assert wall > 0 and cpu > 0
