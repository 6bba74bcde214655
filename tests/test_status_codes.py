"""Per-status-code counters (``benchmark.http_<code>``) against our real test server.

The server's Fortio-style ``status=`` parameter answers a random share of the requests with
the codes asked for, and its own statistics count what it wrote by code: the client's
per-code counters must equal those exactly. Counts only; no timing thresholds. Runs in the
ASan+UBSan build too (the `core` marker).
"""

from __future__ import annotations

import os

import pytest
from support.scripted_origin import Reply, ScriptedOrigin

import nhbench
from nhbench._core_config import client_core_config
from nhbench._names import is_counter, status_counter_code
from nhbench._run import load_core

pytestmark = pytest.mark.core

CPUS = sorted(os.sched_getaffinity(0))
CLIENT_CPU = str(CPUS[0])
SERVER_CPUS = [CPUS[1] if len(CPUS) > 1 else CPUS[0]]


@pytest.fixture
def server():
    with nhbench.TestServer(cpus=SERVER_CPUS) as srv:
        yield srv


def run(url, **kw):
    kw.setdefault("cpus", CLIENT_CPU)
    kw.setdefault("duration", 1.0)
    return nhbench.run(url, **kw)


def per_code(counters):
    return {
        status_counter_code(name): value
        for name, value in counters.nonzero().items()
        if status_counter_code(name) is not None
    }


def test_every_response_is_counted_by_its_exact_code(server):
    result = run(server.url + "?status=503:20,404:10,201:5", rps=400, connections=4,
                 no_default_failure_predicates=True)
    written = {int(code): n for code, n in server.stats()["status"].items()}
    assert set(written) == {200, 201, 404, 503}  # 400 requests: each code all but surely drawn
    assert per_code(result.counters) == written
    # The classes are the sums of their codes.
    c = result.counters
    assert c["benchmark.http_2xx"] == c["benchmark.http_200"] + c["benchmark.http_201"]
    assert c["benchmark.http_4xx"] == c["benchmark.http_404"]
    assert c["benchmark.http_5xx"] == c["benchmark.http_503"]
    # A code that never came answers 0 (a known counter), not KeyError.
    assert c["benchmark.http_418"] == 0


def test_workers_count_their_own_and_global_is_the_sum(server):
    result = run(server.url + "?status=429:30", rps=200, concurrency=2, cpus=None,
                 no_default_failure_predicates=True)
    workers = [w for w in result.results if w.name != "global"]
    assert len(workers) == 2
    for code in (200, 429):
        name = f"benchmark.http_{code}"
        assert sum(w.counter_values[name] for w in workers) == result.counters[name]
    assert per_code(result.counters) == {int(k): v for k, v in server.stats()["status"].items()}


def test_json_lists_only_the_codes_that_occurred_and_loads_back(server):
    result = run(server.url + "?status=418", rps=50, duration=0.2,
                 no_default_failure_predicates=True, allow_no_success=True)
    names = [c.name for c in result.global_result.counters]
    assert "benchmark.http_418" in names
    assert not any(status_counter_code(n) not in (None, 418) for n in names)
    again = nhbench.Result.model_validate_json(result.model_dump_json())
    assert again.counters["benchmark.http_418"] == 10


def test_failure_predicate_on_a_code_fires_on_it(server):
    result = run(server.url + "?status=503:20", rps=500, duration=20.0,
                 failure_predicate={"benchmark.http_503": 0}, no_default_failure_predicates=True)
    assert result.terminated_by == "failure_predicate:benchmark.http_503"
    assert result.failed_predicates == ["benchmark.http_503"]
    assert result.counters["benchmark.http_503"] >= 1
    assert not result.success


def test_failure_predicate_on_a_code_does_not_fire_without_it(server):
    result = run(server.url + "?status=404:20", rps=200, duration=0.5,
                 failure_predicate={"benchmark.http_503": 0}, no_default_failure_predicates=True)
    assert result.terminated_by == "duration"
    assert result.failed_predicates == []
    assert result.counters["benchmark.http_404"] >= 1  # other error codes did occur
    assert result.counters["benchmark.http_503"] == 0


def test_termination_predicate_on_a_code_stops_the_run(server):
    result = run(server.url, rps=1000, duration=30.0,
                 termination_predicate={"benchmark.http_200": 99})
    assert result.terminated_by == "termination_predicate:benchmark.http_200"
    assert 100 <= result.counters["benchmark.http_200"] < 30000
    assert result.success


def test_a_status_outside_100_599_is_http_xxx_only():
    reply = Reply(b"HTTP/1.1 600 Beyond\r\nContent-Length: 0\r\n\r\n")
    with ScriptedOrigin(lambda r: reply) as origin:
        result = run(origin.url, rps=100, duration=0.2, connections=1,
                     no_default_failure_predicates=True, allow_no_success=True)
    assert result.counters["benchmark.http_xxx"] == 20
    assert per_code(result.counters) == {}


@pytest.mark.parametrize(
    ("name", "known"),
    [
        ("benchmark.http_100", True),
        ("benchmark.http_503", True),
        ("benchmark.http_599", True),
        ("benchmark.http_099", False),
        ("benchmark.http_600", False),
        ("benchmark.http_0200", False),
        ("benchmark.http_20", False),
        ("benchmark.http_２００", False),  # non-ASCII digits
        ("benchmark.http_2xx", True),
    ],
)
def test_counter_names_python_and_core_agree(name, known):
    """Python validates predicate names before a run; the core's own lookup (the binding
    refuses a name it does not know) must accept and refuse the same ones."""
    uri = "http://127.0.0.1:9/"
    assert is_counter(name) is known
    config = client_core_config(nhbench.Options(uri=uri), "127.0.0.1")
    config["failure_predicates"] = [(name, 0)]
    if known:
        assert nhbench.Options(uri=uri, failure_predicate={name: 0}).failure_predicates[name] == 0
        load_core().ClientRun(config)
    else:
        with pytest.raises(ValueError, match="unknown counter"):
            nhbench.Options(uri=uri, failure_predicate={name: 0})
        with pytest.raises(ValueError, match="unknown counter"):
            load_core().ClientRun(config)


def test_abort_on_is_fortios_abort_on_a_failure_predicate(server):
    options = nhbench.Options(uri=server.url, abort_on=503)
    assert options.failure_predicates["benchmark.http_503"] == 0
    result = run(server.url + "?status=503:20", rps=500, duration=20.0, abort_on=503,
                 no_default_failure_predicates=True)
    assert result.terminated_by == "failure_predicate:benchmark.http_503"
    assert result.failed_predicates == ["benchmark.http_503"]


def test_abort_on_from_the_command_line(server):
    import subprocess
    import sys

    cli = [sys.executable, "-m", "nhbench", "run", "--cpus", CLIENT_CPU, "--rps", "500",
           "--duration", "20s", "--no-default-failure-predicates", "--abort-on", "429"]
    done = subprocess.run([*cli, server.url + "?status=429:20"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert "benchmark.http_429" in done.stdout + done.stderr
    bad = subprocess.run([*cli[:-1], "600", server.url], capture_output=True, text=True,
                         timeout=60)
    assert bad.returncode == 2
    assert bad.stderr.count("\n") == 1 and "--abort-on" in bad.stderr, bad.stderr


def test_an_slo_on_a_status_code(server):
    result = run(server.url + "?status=404:50", rps=100, duration=0.5,
                 no_default_failure_predicates=True)
    assert result.counters["benchmark.http_404"] >= 1
    outcome = result.check_slo("benchmark.http_404==0", "benchmark.http_503==0")
    assert [verdict.passed for verdict in outcome.verdicts] == [False, True]
