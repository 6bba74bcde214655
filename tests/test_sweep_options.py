"""`SweepOptions` is the single source of the sweep's options: its flags, its campaign-file
keys and its documentation table derive from the model, and validation gives the same one-line
messages from Python, a campaign file and the command line. Pure Python; no compiled core."""

from __future__ import annotations

import argparse
import re
from datetime import datetime, timezone
from pathlib import Path

import pytest

from nhbench._exceptions import OptionsError
from nhbench.campaign import SloCheck, StepRecord
from nhbench.cli import build_parser
from nhbench.options import (
    CLI_ONLY,
    NOT_IN_A_SWEEP,
    RUN_OPTION_KEYS,
    SCENARIO_KEYS,
    Options,
    SweepOptions,
    flag_of,
    format_check,
    model_flags,
    sweep_options_table,
    validate_sweep,
)
from nhbench.sweep import load_scenario, step_line

REPO = Path(__file__).resolve().parent.parent
URL = "http://127.0.0.1:9/"

# Flags of `nhbench sweep` that are not options: help, where the options come from, and the
# run flags a sweep refuses with a message saying what to use instead.
NOT_OPTIONS = {"-h", "--help", "--version", "--scenario", "--output", "--output-format",
               "--no-duration", "--slo", "--until", "--max-duration"}


def sweep_parser() -> argparse.ArgumentParser:
    commands = next(action for action in build_parser()._actions
                    if isinstance(action, argparse._SubParsersAction))
    parser = commands.choices["sweep"]
    assert isinstance(parser, argparse.ArgumentParser)
    return parser


def test_every_flag_is_a_field_and_every_field_a_flag() -> None:
    parser = sweep_parser()
    flags = {flag: action.dest for action in parser._actions for flag in action.option_strings}
    expected = dict(model_flags(SweepOptions))
    run_flags = model_flags(Options)
    expected.update({flag: name for flag, name in run_flags.items() if name in RUN_OPTION_KEYS})
    assert {f: d for f, d in flags.items() if f not in NOT_OPTIONS} == expected
    # The run options a sweep defines its own way or refuses are not offered as run flags.
    for name in ("rps", "duration", "label"):
        assert flags[flag_of(SweepOptions, name)] == name
    for name in NOT_IN_A_SWEEP:
        if name != "uri":
            assert flags[flag_of(Options, name)] == "redefined_" + name
    # The URL is the one positional, and optional (a campaign file or --resume may give it).
    positionals = [action for action in parser._actions if not action.option_strings]
    assert [(a.dest, a.nargs) for a in positionals] == [("url", "?")]
    # Each flag's help is its field's description.
    for action in parser._actions:
        if action.dest in SweepOptions.model_fields:
            description = SweepOptions.model_fields[action.dest].description or ""
            assert action.help is not None and action.help.startswith(
                description.replace("%", "%%")), action.dest


def test_every_scenario_key_is_a_field() -> None:
    sweep_fields = set(SweepOptions.model_fields)
    assert not sweep_fields & set(RUN_OPTION_KEYS)
    assert set(RUN_OPTION_KEYS) <= set(Options.model_fields)
    assert set(SCENARIO_KEYS) == (sweep_fields - set(CLI_ONLY)) | set(RUN_OPTION_KEYS)
    assert set(Options.model_fields) - set(RUN_OPTION_KEYS) == (
        set(NOT_IN_A_SWEEP) | (set(Options.model_fields) & sweep_fields))


def test_a_campaign_file_accepts_every_key_and_nothing_else(tmp_path: Path) -> None:
    path = tmp_path / "all.yaml"
    path.write_text("".join(f"{key.replace('_', '-')}: null\n" for key in SCENARIO_KEYS))
    assert load_scenario(path) == {}  # every key known; null values are "not given"
    # Everything else is refused: test_sweep_rules.py, test_bad_scenario_file_names_the_problem.


def test_docs_table_is_generated_from_the_model() -> None:
    text = (REPO / "docs" / "sweep.md").read_text(encoding="utf-8")
    match = re.search(r"<!-- BEGIN sweep options.*?-->\n(.*?)<!-- END sweep options -->",
                      text, re.DOTALL)
    assert match, "docs/sweep.md lost its BEGIN/END sweep options markers"
    assert match[1] == sweep_options_table(), (
        "docs/sweep.md's sweep options table is stale: replace it with the output of "
        "python -c \"from nhbench.options import sweep_options_table as t; print(t(), end='')\"")


def test_python_values_and_strings_validate_alike() -> None:
    typed = SweepOptions(url=URL, rps=10, max_rps=30, extend=True, stop_on_slo=["p99<5ms"],
                         cooldown=1.5, perf_frequency=199, label="one")
    given = SweepOptions.model_validate({
        "url": URL, "rps": "10", "max_rps": "30", "extend": "yes", "stop_on_slo": "p99<5ms",
        "cooldown": "1500ms", "perf_frequency": "199", "label": ["one"]})
    assert typed == given
    assert typed.planned_rates == [10, 20, 30] and typed.step == 10
    assert [str(rule) for rule in typed.rules] == ["p99<5ms"]
    assert typed.label == ("one",) and typed.duration == 5.0


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"rps": "fast"}, "--rps: must be a number (got 'fast')"),
        ({"rps": 1, "extend": "maybe"}, "--extend: must be true or false (got 'maybe')"),
        ({"rps": 1, "stop_on_slo": ["p99<5ms", "p99<5"]},
         "--stop-on-slo 'p99<5': a latency needs a unit: ns, us, µs, ms or s"),
        ({"rps": 1, "watch_cpus": ["ingress"]},
         "--watch-cpus 'ingress': expected NAME=LIST such as ingress=5,22,77,94"),
        ({"rps": 1, "perf_frequency": 0}, "--perf-frequency: must be >= 1 (got 0)"),
        ({"rps": 1, "extend_limit": 5}, "--extend-limit: only meaningful with --extend"),
        ({"rps": 1, "cooldown": "-1s"}, "--cooldown: must be >= 0 (got -1)"),
        ({"rps": 1, "bogus": 1}, "bogus: not a sweep option"),
        ({"rps": 1, "output": "x.json"}, "output: not a sweep option"),
        ({"rps": 1, "connections": 0}, "--connections: must be >= 1"),
    ],
)
def test_one_line_messages_name_the_flag(settings: dict[str, object], message: str) -> None:
    with pytest.raises(OptionsError) as info:
        validate_sweep({"url": URL, **settings})
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


def test_progress_line_and_reports_write_checks_the_same_way() -> None:
    now = datetime.now(timezone.utc)
    checks = [SloCheck(expression="p99<5ms", value=0.048, passed=False),
              SloCheck(expression="error_rate<0.1%", value=0.0025, passed=False),
              SloCheck(expression="not blocked", value=12.0, passed=False)]
    record = StepRecord(index=2, directory="steps/002-rps20", rps_per_worker=20, workers=1,
                        requested_rps=20, achieved_rps=19, duration=1, requests=19,
                        http_2xx=19, latency={"p99": 0.048}, blocked=True, blocked_count=12,
                        passed=False, slo=checks, started_at=now, ended_at=now)
    written = [format_check(check) for check in checks]
    assert written == ["p99<5ms (was 48.0 ms)", "error_rate<0.1% (was 0.25%)",
                       "not blocked (was 12)"]
    assert step_line(record, 3, False).endswith("FAIL: " + "; ".join(written))
