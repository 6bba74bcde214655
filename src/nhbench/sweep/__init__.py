"""Sweeps: step the offered load, record every step, stop on rules (``nhbench sweep``)."""

from ._plan import DEFAULT_STEP_RPS, build_plan, next_step, plan_steps
from ._runner import (
    ERROR_COUNTERS,
    SSHSettings,
    Sweep,
    SweepConfig,
    default_out,
    overlay,
    parse_watch_cpus,
    prepare_sweep,
    record_from_result,
    run_sweep,
    settings_for_resume,
    step_line,
)
from ._scenario import (
    EMBEDDED_URL,
    RUN_OPTION_KEYS,
    SWEEP_KEYS,
    Scenario,
    load_scenario,
)
from ._slo import StopRule, evaluate_rules, parse_rule, parse_rules

__all__ = [
    "DEFAULT_STEP_RPS",
    "EMBEDDED_URL",
    "ERROR_COUNTERS",
    "RUN_OPTION_KEYS",
    "SWEEP_KEYS",
    "SSHSettings",
    "Scenario",
    "StopRule",
    "Sweep",
    "SweepConfig",
    "build_plan",
    "default_out",
    "evaluate_rules",
    "load_scenario",
    "next_step",
    "overlay",
    "parse_rule",
    "parse_rules",
    "parse_watch_cpus",
    "plan_steps",
    "prepare_sweep",
    "record_from_result",
    "run_sweep",
    "settings_for_resume",
    "step_line",
]
