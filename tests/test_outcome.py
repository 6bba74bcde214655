"""What a run's outcome is: errors, request time-outs named as such, and no-success runs.

Real client against the real test server (in-process `TestServer` or ``nhbench run`` as a
subprocess). One definition of an error (`nhbench._names.ERROR_COUNTERS`) serves every
report, so the run's human output, the live progress line, the sweep's step record, step
line, text/CSV reports and the campaign table must all give the same total for one Result.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

import nhbench
from nhbench._names import (
    CONNECTION_ERROR_COUNTERS,
    ERROR_COUNTERS,
    RETRY_LIMIT_EXCEEDED,
    describe_errors,
    error_total,
    no_success_reason,
)
from nhbench._progress import Progress
from nhbench.campaign._models import CampaignManifest
from nhbench.sweep import record_from_result, step_line
from nhbench.sweep._plan import build_plan

PACKAGE_PARENT = str(Path(nhbench.__file__).resolve().parent.parent)


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_PARENT, env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "nhbench", *args], capture_output=True,
                          text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL)


def record(result: nhbench.Result):  # type: ignore[no-untyped-def]
    now = datetime.now(timezone.utc)
    return record_from_result(result, index=1, rate=result.options.rps, directory="001",
                              rules=[], stop_on_blocked=False, started_at=now, ended_at=now)


# ---- the definition ---------------------------------------------------------------------------


def test_one_definition_of_errors() -> None:
    import nhbench.sweep as sweep

    # The sweep re-exports the one definition; it has none of its own.
    assert sweep.ERROR_COUNTERS is ERROR_COUNTERS
    assert "benchmark.http_2xx" not in ERROR_COUNTERS
    assert "benchmark.pool_overflow" not in ERROR_COUNTERS  # never sent: reported as dropped
    assert RETRY_LIMIT_EXCEEDED == "upstream_rq_retry_limit_exceeded"
    assert RETRY_LIMIT_EXCEEDED in ERROR_COUNTERS
    assert not set(CONNECTION_ERROR_COUNTERS) & set(ERROR_COUNTERS)


def test_error_sums_tolerate_absent_and_new_counters() -> None:
    # A core without the retry-limit counter, and one with it.
    assert error_total({"benchmark.http_5xx": 2}) == 2
    counters = {"benchmark.http_5xx": 2, RETRY_LIMIT_EXCEEDED: 3, "benchmark.http_2xx": 7,
                "upstream_cx_connect_fail": 9, "benchmark.pool_overflow": 4}
    assert error_total(counters) == 5
    assert describe_errors(counters) == (
        "3 requests given up after the retry limit, 2 5xx responses")
    assert no_success_reason(counters) is None
    assert no_success_reason({"benchmark.http_404": 0}) == (
        "no request succeeded: no request was sent (0 responses)")
    assert no_success_reason({"benchmark.http_4xx": 1, "upstream_rq_total": 1}) == (
        "no request succeeded: 1 4xx response (1 response)")
    assert no_success_reason({"benchmark.pool_overflow": 5, "upstream_rq_total": 0}) == (
        "no request succeeded: no request was sent, 5 dropped before sending "
        "(benchmark.pool_overflow) (0 responses)")


# ---- request time-outs and runs without success --------------------------------------------


@pytest.fixture(scope="module")
def slow_server():  # type: ignore[no-untyped-def]
    with nhbench.TestServer(static_delay="1s") as server:
        yield server


@pytest.mark.parametrize("protocol", [(), ("--h2c",)], ids=["http1", "h2c"])
def test_request_timeouts_are_named_and_no_success_exits_1(
    slow_server: nhbench.TestServer, protocol: tuple[str, ...], tmp_path: Path
) -> None:
    out = tmp_path / "result.json"
    proc = cli("run", slow_server.url, "--rps", "20", "--duration", "1", "--connections", "4",
               "--request-timeout", "0.2s", *protocol, "--output-format", "json",
               "--output", str(out))
    assert proc.returncode == 1, proc.stderr
    result = nhbench.Result.model_validate_json(out.read_text())
    timeouts = result.counters["benchmark.request_timeout"]
    assert timeouts > 0 and result.counters["benchmark.http_2xx"] == 0
    # One line, naming request time-outs as such.
    assert proc.stderr == (
        f"nhbench: no request succeeded: {timeouts} request time-out"
        f"{'s' if timeouts != 1 else ''} (0 responses)\n")
    # The first error is a request time-out, not "connection timed out" (a connect failure).
    assert result.error == "request timed out: no response within --request-timeout 0.2 s " \
                           "(ETIMEDOUT)"
    assert result.counters["upstream_cx_connect_timeout"] == 0
    assert not result.success
    # The human report of the same result says so too.
    text = result.render("human")
    assert f"Errors:         {timeouts} ({timeouts} request time-out" in text
    assert "connection timed out" not in text
    assert text.rstrip().endswith(f"FAILED: {result.no_success_reason}.")


def test_allow_no_success_exits_0(slow_server: nhbench.TestServer) -> None:
    proc = cli("run", slow_server.url, "--rps", "20", "--duration", "0.5",
               "--request-timeout", "0.2s", "--allow-no-success")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert re.search(r"^Errors: +\d+ \(\d+ request time-outs?\)$", proc.stdout, re.M)
    assert "OK: no failure predicate fired (no request succeeded, allowed by " \
           "allow_no_success)." in proc.stdout


def test_python_api_reports_no_success_without_raising(slow_server: nhbench.TestServer) -> None:
    result = nhbench.run(slow_server.url, rps=20, duration=0.5, request_timeout=0.2)
    assert not result.success and not result.failed_predicates
    assert result.succeeded == 0 and result.error_count > 0
    assert result.no_success_reason is not None
    assert result.no_success_reason.startswith("no request succeeded: ")
    # A sweep step in which nothing succeeded fails, whatever its rules.
    step = record(result)
    assert not step.passed
    assert [c.expression for c in step.slo if not c.passed] == ["a request succeeded"]

    allowed = nhbench.run(slow_server.url, rps=20, duration=0.5, request_timeout=0.2,
                          allow_no_success=True)
    assert allowed.success and allowed.no_success_reason is None
    assert record(allowed).passed


def test_error_responses_only_are_no_success(server: nhbench.TestServer) -> None:
    # Any response is not success: a run that got only 404s measured the error path.
    proc = cli("run", server.url + "?status=404", "--rps", "20", "--duration", "0.5",
               "--no-default-failure-predicates")
    assert proc.returncode == 1, proc.stderr
    n = server.stats()["requests"]
    assert n > 0
    assert proc.stderr == f"nhbench: no request succeeded: {n} 4xx response" \
                          f"{'s' if n != 1 else ''} ({n} response{'s' if n != 1 else ''})\n"


def test_refused_connections_without_predicates_are_no_success(closed_port: int) -> None:
    proc = cli("run", f"http://127.0.0.1:{closed_port}/", "--rps", "20", "--duration", "0.5",
               "--no-default-failure-predicates")
    assert proc.returncode == 1, proc.stderr
    assert re.fullmatch(r"nhbench: no request succeeded: \d+ connection failures? "
                        r"\(0 responses\)\n", proc.stderr), proc.stderr


# ---- run and sweep count the same errors ---------------------------------------------------


def test_run_outputs_and_sweep_step_count_one_given_counter_set() -> None:
    # Every error counter, and every counter that is not an error (connection counters,
    # dropped and cancelled requests) set high enough to show if anything added it.
    from support.fakecore import core_result, core_worker

    given = {
        "benchmark.http_1xx": 1, "benchmark.http_3xx": 2, "benchmark.http_4xx": 3,
        "benchmark.http_5xx": 4, "benchmark.http_xxx": 5,
        "benchmark.pool_connection_failure": 6, "benchmark.stream_resets": 7,
        "benchmark.request_timeout": 8, RETRY_LIMIT_EXCEEDED: 9,
        "upstream_cx_connect_fail": 100, "upstream_cx_connect_timeout": 200,
        "upstream_cx_protocol_error": 300, "ssl.connection_error": 400,
        "benchmark.pool_overflow": 1000, "upstream_rq_cancelled": 2000,
    }
    options = nhbench.Options(uri="http://127.0.0.1:8080/", rps=100,
                              no_default_failure_predicates=True)
    result = nhbench.Result.from_core(
        core_result([core_worker([1_000_000] * 55, counters=given)]), options)
    expected = 45  # 1 + 2 + ... + 9
    assert result.counters["benchmark.http_2xx"] == 55

    # nhbench run: the human report, and the JSON output read back.
    assert re.search(rf"^Errors: +{expected} \(", result.render("human"), re.M)
    from_json = nhbench.Result.model_validate_json(result.render("json"))
    assert from_json.error_count == expected
    assert {name: from_json.counters[name] for name in given} == given

    # nhbench sweep: the step record (connection counters kept, not added) and its line.
    step = record(result)
    assert step.error_count == expected
    assert step.errors == {name: value for name, value in given.items()
                           if name not in ("benchmark.pool_overflow", "upstream_rq_cancelled")}
    assert step.error_rate == pytest.approx(expected / (55 + expected))
    # Every request took 1 ms (1.001 ms from its scheduled time); the step line writes the
    # p99 as the reports do (nhbench._format.format_latency).
    # (The 1000 dropped requests make the step blocked, not erroneous.)
    assert f"p99 1.00 ms, blocked yes (1000), errors {expected}:" in step_line(step, None, False)


def test_run_and_sweep_error_totals_agree(tmp_path: Path) -> None:
    # A mix of 2xx, 3xx, 503s and request time-outs from one real run (the two definitions
    # there were disagreed on 3xx and on dropped requests).
    with nhbench.TestServer() as server:
        result = nhbench.run(server.url + "?status=503:30,302:10&delay=1s:20", rps=100,
                             duration=1,
                             connections=40, request_timeout=0.3,
                             no_default_failure_predicates=True)
    counters = result.counters
    expected = (counters["benchmark.http_5xx"] + counters["benchmark.http_3xx"]
                + counters["benchmark.request_timeout"]
                + counters["benchmark.stream_resets"]
                + counters["benchmark.pool_connection_failure"])
    assert counters["benchmark.http_5xx"] > 0 and counters["benchmark.request_timeout"] > 0
    assert counters["benchmark.http_3xx"] > 0
    assert counters["benchmark.http_2xx"] > 0
    assert result.error_count == expected

    # The run's human report and live progress line.
    human = result.render("human")
    assert re.search(rf"^Errors: +{expected} \(", human, re.M), human
    assert Progress(elapsed=1.0, counters=dict(counters.nonzero())).errors == expected

    # The sweep: step record, step line, stop rule input, CSV, text report, campaign table.
    step = record(result)
    assert step.error_count == expected
    assert f"errors {expected}:" in step_line(step, None, False)
    assert step.error_rate == pytest.approx(
        expected / (counters["benchmark.http_2xx"] + expected))

    from nhbench.report import render_csv, render_html, render_text

    now = datetime.now(timezone.utc)
    manifest = CampaignManifest(
        nhbench_version=nhbench.__version__, created_at=now, updated_at=now,
        url=result.options.uri, options={},
        plan=build_plan(rps=100, duration=1), steps=[step],
    )
    rows = list(csv.DictReader(io.StringIO(render_csv(manifest))))
    assert rows[0]["errors"] == str(expected)
    assert f"{expected} (" in render_text(manifest)
    assert f"{expected} (" in render_html(manifest, tmp_path)
    # The JSON round trip gives the same totals (zero counters are left out of it).
    loaded = nhbench.Result.model_validate_json(result.model_dump_json())
    assert loaded.error_count == expected
    assert json.loads(step.model_dump_json())["errors"] == step.errors
