"""Sweeps: step the offered load, record every step, stop on rules (``nhbench sweep``).

``_config``: settings -> `SweepConfig` (`prepare_sweep`, validated by
`nhbench.options.SweepOptions`); ``_plan``: the `SweepPlan` and the step after the last;
``_records``: a step's `Result` -> `StepRecord`; ``_loop``: `Sweep` and `run_sweep`;
``_scenario``: campaign files; ``_slo``: stop rules evaluated on a step; ``_strategy``: what
the loop asks between steps (`StepStrategy`: the sweep's `PlanWalk`, or adapt's search).
"""

from ..options import EMBEDDED_URL, RUN_OPTION_KEYS, SweepOptions, parse_watch_cpus
from ._config import (
    SSHSettings,
    SweepConfig,
    default_out,
    overlay,
    prepare_sweep,
    settings_for_resume,
)
from ._loop import Sweep, run_sweep
from ._plan import DEFAULT_STEP_RPS, build_plan, next_step, plan_steps
from ._records import ERROR_COUNTERS, record_from_result, step_line
from ._scenario import SWEEP_KEYS, load_scenario
from ._slo import StopRule, evaluate_rules, parse_rule, parse_rules
from ._strategy import PlanWalk, StepStrategy, failed_reason

__all__ = [
    "DEFAULT_STEP_RPS",
    "EMBEDDED_URL",
    "PlanWalk",
    "StepStrategy",
    "ERROR_COUNTERS",
    "RUN_OPTION_KEYS",
    "SWEEP_KEYS",
    "SSHSettings",
    "StopRule",
    "Sweep",
    "SweepConfig",
    "SweepOptions",
    "build_plan",
    "default_out",
    "evaluate_rules",
    "failed_reason",
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
