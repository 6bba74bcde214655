"""Sweep building blocks without a run: stop-rule grammar, plans, campaign files, and the
up-front validation of sweep settings. Pure Python; no compiled extension needed."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from nhbench._exceptions import CampaignError, OptionsError
from nhbench.campaign import SweepPlan
from nhbench.campaign._models import StepRecord
from nhbench.sweep import (
    build_plan,
    load_scenario,
    next_step,
    parse_rule,
    plan_steps,
    prepare_sweep,
)

REPO = Path(__file__).resolve().parent.parent


def record(**fields: object) -> StepRecord:
    now = datetime.now(timezone.utc)
    base: dict[str, object] = {
        "index": 1, "directory": "steps/001-rps100", "rps_per_worker": 100.0, "workers": 2,
        "requested_rps": 200.0, "achieved_rps": 190.0, "duration": 1.0, "requests": 190,
        "http_2xx": 190,
        "latency": {"p50": 0.001, "p90": 0.002, "p99": 0.004, "p99.9": 0.010},
        "blocked": False, "passed": True, "started_at": now, "ended_at": now,
    }
    base.update(fields)
    return StepRecord.model_validate(base)


# ---- stop rules ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "metric", "op", "threshold", "percentile"),
    [
        ("p99<5ms", "latency", "<", 0.005, 99.0),
        ("p99.9 <= 20ms", "latency", "<=", 0.020, 99.9),
        ("p50>100us", "latency", ">", 100e-6, 50.0),
        ("p90<250µs", "latency", "<", 250e-6, 90.0),
        ("p(95)<1s", "latency", "<", 1.0, 95.0),
        ("P99<500ns", "latency", "<", 500e-9, 99.0),
        ("error_rate<0.1%", "error_rate", "<", 0.001, None),
        ("error_rate<=0.01", "error_rate", "<=", 0.01, None),
        ("achieved/requested>0.95", "achieved_ratio", ">", 0.95, None),
        ("achieved / requested >= 95%", "achieved_ratio", ">=", 0.95, None),
    ],
)
def test_rule_grammar(text: str, metric: str, op: str, threshold: float,
                      percentile: float | None) -> None:
    rule = parse_rule(text)
    assert (rule.metric, rule.op, rule.percentile) == (metric, op, percentile)
    assert rule.threshold == pytest.approx(threshold)
    assert rule.expression == text.strip()


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("p99<5", "needs a unit"),
        ("p99<5min", "needs a unit"),
        ("p99=5ms", "expected METRIC OP VALUE"),
        ("p999<5ms", "percentile must be in (0, 100]"),
        ("p0<5ms", "percentile must be in (0, 100]"),
        ("latency<5ms", "expected METRIC OP VALUE"),
        ("error_rate<5ms", "fraction"),
        ("", "expected METRIC OP VALUE"),
        ("p99<", "expected METRIC OP VALUE"),
    ],
)
def test_bad_rules_are_one_line_options_errors(text: str, needle: str) -> None:
    with pytest.raises(OptionsError) as info:
        parse_rule(text)
    message = str(info.value)
    assert needle in message and "\n" not in message
    assert message.startswith("--stop-on-slo")
    assert info.value.option == "stop_on_slo"


def test_rules_evaluate_on_a_step() -> None:
    step = record()
    assert parse_rule("p99<5ms").check(step).passed
    assert not parse_rule("p99<4ms").check(step).passed  # 4 ms is not below 4 ms
    assert parse_rule("p99<=4ms").check(step).passed
    check = parse_rule("achieved/requested>0.96").check(step)
    assert check.value == pytest.approx(0.95) and not check.passed
    assert parse_rule("error_rate<0.1%").check(record(error_rate=0.0)).passed
    assert not parse_rule("error_rate<0.1%").check(record(error_rate=0.002)).passed
    # No latency samples at all: a latency objective is not met.
    empty = record(latency={"p50": None, "p90": None, "p99": None, "p99.9": None})
    check = parse_rule("p99<1s").check(empty)
    assert check.value is None and not check.passed


# ---- plans -----------------------------------------------------------------------------------


def test_inclusive_range_like_the_intel_script() -> None:
    assert plan_steps(100, 200, 10) == [100 + 10 * i for i in range(11)]
    # The range ends at max-rps even when the step does not divide it.
    assert plan_steps(100, 250, 100) == [100, 200, 250]
    # Decimal steps do not drift (0.1 + 0.2 != 0.3 in binary floating point).
    assert plan_steps(0.1, 0.5, 0.1) == [0.1, 0.2, 0.3, 0.4, 0.5]
    assert plan_steps(100, 130) == [100, 110, 120, 130]  # --step-rps defaults to 10
    assert plan_steps(100) == [100]
    assert plan_steps(steps="500,100, 200") == [500, 100, 200]


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"rps": 200, "max_rps": 100}, "--max-rps: must be >= --rps"),
        ({"rps": 0}, "--rps: must be a finite number > 0"),
        ({"rps": "fast"}, "--rps: must be a number"),
        ({"rps": 1, "max_rps": 2, "step_rps": 0}, "--step-rps: must be a finite number > 0"),
        ({"rps": 1, "max_rps": 1e9, "step_rps": 1}, "more than 10000 steps"),
        ({"steps": "100,,200"}, "--steps: must be a list"),
        ({"steps": "100", "rps": 5}, "--steps: mutually exclusive with --rps"),
        ({}, "missing the load"),
    ],
)
def test_bad_plans(kwargs: dict[str, object], needle: str) -> None:
    with pytest.raises(OptionsError, match=needle.replace("+", r"\+")):
        plan_steps(**kwargs)  # type: ignore[arg-type]


def test_extend_mode_adds_steps_until_the_limit() -> None:
    plan = build_plan(rps=10, max_rps=20, step_rps=5, duration=1, extend=True,
                      extend_limit=32, stop_on_blocked=True)
    assert plan.steps == [10, 15, 20]
    rates = []
    done, last = 0, None
    while (rate := next_step(plan, done, last)) is not None:
        rates.append(rate)
        done, last = done + 1, rate
    assert rates == [10, 15, 20, 25, 30]
    with pytest.raises(OptionsError, match="needs a stop rule"):
        build_plan(rps=10, step_rps=5, duration=1, extend=True)
    with pytest.raises(OptionsError, match="--extend: needs --step-rps"):
        build_plan(steps="1,2", duration=1, extend=True, stop_on_blocked=True)
    with pytest.raises(OptionsError, match="only meaningful with --extend"):
        build_plan(rps=10, duration=1, extend_limit=20)
    # Without --extend the plan simply ends.
    plain = build_plan(rps=10, max_rps=20, step_rps=10, duration=1)
    assert next_step(plain, 2, 20.0) is None


# ---- settings and campaign files -----------------------------------------------------------


def test_prepare_sweep_validates_everything_up_front(tmp_path: Path) -> None:
    config = prepare_sweep({
        "url": "http://127.0.0.1:8080/", "rps": "100", "max_rps": "300", "step_rps": "100",
        "duration": "2s", "connections": "7", "cpus": "0", "stop_on_slo": ["p95<3ms"],
        "watch_cpus": ["ingress=0", "other=0-0"], "label": ["a b/c"],
    })
    assert config.plan.steps == [100, 200, 300] and config.plan.duration == 2
    assert config.options.connections == 7 and config.options.rps == 100
    # Every headline percentile and the ones the rules use are recorded.
    assert {50, 90, 95, 99, 99.9} <= set(config.options.percentiles)
    assert config.target_spec is not None and config.target_spec.watch_cpus == {
        "ingress": [0], "other": [0]}
    assert config.options.label == ("a b/c",)
    bad = [
        ({"rps": 1}, "missing URL"),
        ({"url": "ftp://x/", "rps": 1}, "unsupported scheme"),
        ({"url": "http://x/", "rps": 1, "connections": 0}, "--connections"),
        ({"url": "http://x/", "rps": 1, "watch_cpus": ["ingress"]}, "NAME=LIST"),
        ({"url": "http://x/", "rps": 1, "ssh_key": "k"}, "only meaningful with --ssh"),
        ({"url": "http://x/", "rps": 1, "perf_cpus": "1"}, "only meaningful with --perf"),
        ({"url": "http://x/", "rps": 1, "duration": "soon"}, "--duration"),
        ({"url": "http://x/", "rps": 1, "ssh": "u@h", "ssh_password_env": "NHB_UNSET_VAR_X"},
         "NHB_UNSET_VAR_X"),
    ]
    for settings, needle in bad:
        with pytest.raises(OptionsError, match=needle):
            prepare_sweep(settings)
    (tmp_path / "junk").write_text("x")
    with pytest.raises(CampaignError, match="not empty and is not a campaign"):
        prepare_sweep({"url": "http://x/", "rps": 1, "out": str(tmp_path)})


def test_scenario_keys_are_option_names(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("url: http://127.0.0.1:9/\nmax-rps: 30\nrps: 10\nstep_rps: 10\n"
                    "stop-on-slo: p99<5ms\nrequest-header: ['x-a: 1']\n")
    assert load_scenario(path) == {
        "url": "http://127.0.0.1:9/", "max_rps": 30, "rps": 10, "step_rps": 10,
        "stop_on_slo": "p99<5ms", "request_header": ["x-a: 1"],
    }
    with pytest.raises(OptionsError, match="missing.yaml: no such file"):
        load_scenario(tmp_path / "missing.yaml")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("max-rsp: 30\n", r"unknown key 'max-rsp' \(did you mean max-rps\?\)"),
        ("resume: somewhere\n", "unknown key 'resume'"),
        ("output: x.json\n", "'output' is not a sweep option"),
        ("uri: http://x/\n", "'uri' is not a sweep option"),
        ("- a\n- b\n", "must be a mapping"),
        ("rps: [1\n", "line"),
    ],
)
def test_bad_scenario_file_names_the_problem(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(OptionsError, match=expected):
        load_scenario(path)


def test_intel_use_case_3_maps_to_the_script_flags() -> None:
    settings = load_scenario(REPO / "scenarios" / "intel-usecase3-http1-step.yaml")
    # The URL argument replaces the file's placeholder (flags override the file).
    settings["url"] = "http://192.0.2.10:10000/"
    settings["cpus"] = "0"  # the test machine may not have CPUs 5-9
    config = prepare_sweep(settings)
    assert config.plan.steps == [100 + 10 * i for i in range(11)]  # --rps 100..200 step 10
    assert config.plan.duration == 50  # -d 50
    assert config.options.connections == 100  # --con 100
    assert config.options.protocol == "http1"  # --protocol http1
    assert config.options.request_body_size == 400  # --rbs 400
    assert config.options.uri == "http://192.0.2.10:10000/"
    assert load_scenario(REPO / "scenarios" / "intel-usecase3-http1-step.yaml")["cpus"] == "5-9"


def test_local_demo_scenario_is_valid() -> None:
    config = prepare_sweep(load_scenario(REPO / "scenarios" / "local-demo.yaml"))
    assert config.embedded and config.plan.steps == [200, 400, 600, 800, 1000]
    assert [rule.expression for rule in config.rules] == ["p99<50ms", "error_rate<0.1%"]


def test_plan_model_round_trips() -> None:
    plan = build_plan(rps=1, max_rps=3, step_rps=1, duration=0.5, stop_on_slo=["p99<1ms"])
    assert SweepPlan.model_validate_json(plan.model_dump_json()) == plan
