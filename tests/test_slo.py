"""SLO rules on a run's Result (`Result.check_slo`, `nhbench.assert_slo`), the extended rule
grammar shared with the sweep, and `nhbench run --slo` (exit 99). Real runs against the test
server; failing rules are impossible ones (p99<1ns) or a server that answers 503."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import nhbench
from nhbench import OptionsError, SloError
from nhbench._names import error_total
from nhbench.cli import SLO_FAILED
from nhbench.options import HEADLINE_STATISTIC, StopRule
from nhbench.sweep import run_sweep

REQUEST_TO_RESPONSE = "benchmark_http_client.request_to_response"


# ---- grammar ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "metric", "op", "threshold", "statistic", "field", "counter"),
    [
        ("p99.99<=20ms", "latency", "<=", 0.020, HEADLINE_STATISTIC, "p99.99", None),
        ("max<1s", "latency", "<", 1.0, HEADLINE_STATISTIC, "max", None),
        ("min>=1us", "latency", ">=", 1e-6, HEADLINE_STATISTIC, "min", None),
        ("mean == 2ms", "latency", "==", 0.002, HEADLINE_STATISTIC, "mean", None),
        (f"{REQUEST_TO_RESPONSE}:p99<2ms", "latency", "<", 0.002, REQUEST_TO_RESPONSE, "p99",
         None),
        (f"{REQUEST_TO_RESPONSE}:p(90)<2ms", "latency", "<", 0.002, REQUEST_TO_RESPONSE,
         "p90", None),
        ("benchmark_http_client.response_body_size:max<=1024B", "size", "<=", 1024.0,
         "benchmark_http_client.response_body_size", "max", None),
        ("rps>=1990", "rps", ">=", 1990.0, None, None, None),
        ("errors==0", "errors", "==", 0.0, None, None, None),
        ("blocked==0", "blocked", "==", 0.0, None, None, None),
        ("benchmark.http_5xx==0", "counter", "==", 0.0, None, None, "benchmark.http_5xx"),
        ("upstream_cx_total <= 10", "counter", "<=", 10.0, None, None, "upstream_cx_total"),
    ],
)
def test_extended_grammar(text: str, metric: str, op: str, threshold: float,
                          statistic: str | None, field: str | None, counter: str | None) -> None:
    rule = StopRule.parse(text)
    assert (rule.metric, rule.op, rule.statistic, rule.field, rule.counter) == (
        metric, op, statistic, field, counter)
    assert rule.threshold == pytest.approx(threshold)
    assert str(rule) == text.strip()


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("benchmark.pool_overflw==0",
         "unknown metric 'benchmark.pool_overflw' (did you mean benchmark.pool_overflow?)"),
        (f"{REQUEST_TO_RESPONSE}<2ms", f"a statistic needs a field: '{REQUEST_TO_RESPONSE}:p99'"),
        ("nosuch.stat:p99<2ms", "unknown statistic 'nosuch.stat'"),
        (f"{REQUEST_TO_RESPONSE}:p99x<2ms", "'p99x' is not a statistic field"),
        ("benchmark_http_client.response_body_size:p99<10", "has no percentiles"),
        ("benchmark_http_client.response_body_size:max<10ms", "is a size in bytes"),
        ("rps>=10ms", "rps is a rate in responses per second, a plain number"),
        ("benchmark.http_5xx==1%", "benchmark.http_5xx is a count"),
        ("p99=5ms", "expected METRIC OP VALUE"),
        ("p99!=5ms", "expected METRIC OP VALUE"),
    ],
)
def test_bad_rules_name_the_rule_and_the_problem(text: str, needle: str) -> None:
    with pytest.raises(OptionsError) as info:
        nhbench.assert_slo(None, text)  # type: ignore[arg-type]  # parsed before any use
    message = str(info.value)
    assert message.startswith(f"SLO rule {text!r}: ") and needle in message, message
    assert "\n" not in message


def test_no_rule_is_an_error() -> None:
    with pytest.raises(OptionsError, match="no rule given"):
        nhbench.assert_slo(None)  # type: ignore[arg-type]


# ---- evaluation on a real result ---------------------------------------------------------------


@pytest.fixture(scope="module")
def result() -> nhbench.Result:
    with nhbench.TestServer(response_body_size=100) as server:
        return nhbench.run(server.url, rps=100, duration="0.5s", connections=4)


def test_check_slo_is_structured(result: nhbench.Result) -> None:
    outcome = result.check_slo("p99<1ns", "error_rate<0.1%", "rps>=1", "achieved/requested>0.5",
                               "blocked==0", f"{REQUEST_TO_RESPONSE}:p99<10s",
                               "benchmark.http_2xx==50",
                               "benchmark_http_client.response_body_size:max==100",
                               "errors==0")
    assert not outcome and not outcome.passed
    verdicts = {v.expression: v for v in outcome}
    assert [v.expression for v in outcome.failed] == ["p99<1ns"]
    p99 = verdicts["p99<1ns"]
    assert p99.value == result.latency.p(99) and p99.threshold == 1e-9 and p99.unit == "s"
    assert p99.limit == "< 1ns" and "coordinated-omission corrected" in p99.description
    assert verdicts["rps>=1"].value == result.achieved_rps
    count = verdicts["benchmark.http_2xx==50"]
    assert count.value == result.counters["benchmark.http_2xx"] and count.unit == "count"
    assert verdicts[f"{REQUEST_TO_RESPONSE}:p99<10s"].value == result.stat(
        REQUEST_TO_RESPONSE).p(99)
    assert verdicts["benchmark_http_client.response_body_size:max==100"].passed
    data = outcome.to_dict()
    assert data["passed"] is False and len(data["rules"]) == 9
    assert data["rules"][0] == {"rule": "p99<1ns", "value": p99.value, "threshold": 1e-9,
                                "unit": "s", "passed": False, "metric": p99.description}
    text = str(outcome)
    assert text.startswith("SLO failed: 1 of 9 rules: p99<1ns (measured ")
    assert "(CO-corrected)" in text and f"\n  {REQUEST_TO_RESPONSE}  " in text
    assert "load: 100 rps requested, " in text and ", 0 errors, 0.5 s" in text
    passing = result.check_slo("p99<10s")
    assert passing and passing.summary() == "SLO passed (1 rule)"


def test_assert_slo_raises_an_assertion_error_with_the_tables(result: nhbench.Result) -> None:
    assert nhbench.assert_slo(result, "max<10s")
    with pytest.raises(SloError) as info:
        nhbench.assert_slo(result, "p99<1ns", "errors==0")
    assert isinstance(info.value, AssertionError) and isinstance(info.value, nhbench.NHBenchError)
    assert info.value.outcome is not None and not info.value.outcome
    lines = str(info.value).splitlines()
    assert lines[0].startswith("SLO failed: 1 of 2 rules: p99<1ns (measured ")
    assert any(line.split()[:2] == ["FAIL", "p99<1ns"] for line in lines)
    assert any(line.split()[:3] == ["pass", "errors==0", "0"] for line in lines)


def test_error_rate_is_the_run_reports_definition() -> None:
    # Every response a 503: the error count is nhbench run's, the rate errors / finished.
    with nhbench.TestServer(echo_default_params="status=503") as server:
        result = nhbench.run(server.url, rps=50, duration="0.5s",
                             no_default_failure_predicates=True, allow_no_success=True)
    errors = error_total(result.counters)
    assert errors == result.counters["benchmark.http_5xx"] == result.error_count > 0
    outcome = result.check_slo("error_rate<0.1%", "errors==0", "benchmark.http_5xx==0",
                               "rps>=1")
    values = [verdict.value for verdict in outcome]
    assert values == [1.0, errors, errors, 0.0] == [result.error_rate, errors, errors, 0.0]
    assert not any(verdict.passed for verdict in outcome)
    assert "error_rate<0.1% (measured 100%)" in outcome.summary()


def test_a_sweep_reads_rules_through_the_same_evaluator(tmp_path: Path) -> None:
    # A counter rule, which a step record alone could not answer, works in a sweep.
    with nhbench.TestServer() as server:
        campaign = run_sweep(server.url, out=tmp_path / "c", rps=20, duration="0.5s",
                             connections=2, captures=False, facts=False, reports=False,
                             stop_on_slo=["benchmark.http_2xx>=1000000", "p99<10s"])
    [step] = campaign.steps
    checks = {check.expression: check for check in step.slo}
    assert checks["benchmark.http_2xx>=1000000"].value == step.http_2xx
    assert not checks["benchmark.http_2xx>=1000000"].passed and checks["p99<10s"].passed
    assert checks["p99<10s"].value == step.latency["p99"]
    assert campaign.manifest.status == "stopped"


# ---- nhbench run --slo ---------------------------------------------------------------------------


def _nhbench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nhbench", *args], capture_output=True,
                          text=True, timeout=60)


def test_cli_slo_exit_status() -> None:
    with nhbench.TestServer() as server:
        base = ["run", server.url, "--rps", "50", "--duration", "0.5s", "--output-format", "json"]
        failed = _nhbench(*base, "--slo", "p99<1ns", "--slo", "error_rate<0.1%")
        passed = _nhbench(*base, "--slo", "p99<10s")
    assert failed.returncode == SLO_FAILED == 99, failed.stderr
    # stdout is still the report; the verdict is on stderr.
    # slo is an nhbench-only option: Result reads it from the nhbench entry.
    assert nhbench.Result.model_validate_json(failed.stdout).options.slo == (
        "p99<1ns", "error_rate<0.1%")
    assert failed.stderr.startswith("SLO failed: 1 of 2 rules: p99<1ns (measured ")
    assert "coordinated-omission corrected" in failed.stderr and "p99.9" in failed.stderr
    assert passed.returncode == 0, passed.stderr
    assert passed.stderr.startswith("SLO passed (1 rule)")


def test_cli_slo_bad_rule_is_exit_2_and_a_broken_run_exit_1(closed_port: int) -> None:
    bad = _nhbench("run", "http://127.0.0.1:1/", "--slo", "p99<5")
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr == ("nhbench: error: --slo: 'p99<5': a latency needs a unit: ns, us, µs, "
                          "ms or s\n")
    # Nothing listens on the port: the run fails (1), whatever the rules say; the verdict is
    # still shown.
    broken = _nhbench("run", f"http://127.0.0.1:{closed_port}/", "--rps", "20", "--duration", "0.5s",
                      "--slo", "errors<1000000")
    assert broken.returncode == 1, broken.stderr
    assert "SLO passed (1 rule)" in broken.stderr and "failure predicate fired" in broken.stderr
    refused = _nhbench("sweep", "http://127.0.0.1:1/", "--rps", "1", "--slo", "p99<1ms")
    assert refused.returncode == 2 and "use --stop-on-slo RULE" in refused.stderr
