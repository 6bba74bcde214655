"""Sweep settings and campaign files (``nhbench sweep --scenario FILE``).

A campaign file is YAML whose keys are the sweep's command-line option names, spelled as on
the command line without the dashes (``max-rps``, ``step-rps``, ``stop-on-slo``,
``watch-cpus``, ``connections``…; underscores work too). Flags given on the command line
override the file. ``url: embedded`` starts nhbench's own test server for the campaign,
which makes a campaign file runnable on any machine (see scenarios/local-demo.yaml)::

    url: http://10.0.0.5:10000/
    rps: 100
    max-rps: 200
    step-rps: 10
    duration: 50
    connections: 100
    cpus: 5-9
    stop-on-slo: [p99<50ms]

The file is parsed with PyYAML; its keys must be `nhbench.options.SCENARIO_KEYS` (the
`SweepOptions` fields and the run options a sweep passes on), so that a misspelt option is an
error, with a suggestion, rather than silently ignored.
"""

from __future__ import annotations

import difflib
import os
from typing import Any

import yaml

from .._exceptions import OptionsError
from .._input import InputError, read_input_text
from .._relaxed_json import safe_load_bounded
from ..options import CLI_ONLY, NOT_IN_A_SWEEP, SCENARIO_KEYS, SweepOptions

__all__ = ["SWEEP_KEYS", "load_scenario"]

#: The sweep's own campaign-file keys (Python spelling); the run options are the others.
SWEEP_KEYS = tuple(name for name in SweepOptions.model_fields if name not in CLI_ONLY)


def _key(name: object) -> str:
    return str(name).strip().lstrip("-").replace("-", "_")


def load_scenario(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a campaign file into a settings dict (Python spelling, only the keys present).

    OptionsError (one line, naming the file) when it cannot be read, is not a YAML mapping,
    or has a key that is not a sweep option.
    """
    name = str(path)
    try:
        text = read_input_text(path, "scenario", f"--scenario {name}")
    except InputError as exc:
        raise OptionsError(str(exc), "scenario") from None
    try:
        data = safe_load_bounded(text)
    except ValueError as exc:
        raise OptionsError(f"--scenario {name}: refused: {exc}", "scenario") from None
    except RecursionError:
        # PyYAML's composer recurses once per level of nesting.
        raise OptionsError(f"--scenario {name}: nested too deeply to be a campaign file",
                           "scenario") from None
    except yaml.YAMLError as exc:
        where = ""
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            where = f" at line {mark.line + 1}"
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise OptionsError(f"--scenario {name}: {problem}{where}", "scenario") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise OptionsError(f"--scenario {name}: must be a mapping of option names to values",
                           "scenario")
    settings = {_key(key): value for key, value in data.items()}
    unknown = [key for key in settings if key not in SCENARIO_KEYS]
    if unknown:
        key = unknown[0]
        spelled = key.replace("_", "-")
        if key in NOT_IN_A_SWEEP:
            raise OptionsError(f"--scenario {name}: {spelled!r} is not a sweep option",
                               "scenario")
        close = difflib.get_close_matches(key, SCENARIO_KEYS, n=1)
        hint = f" (did you mean {close[0].replace('_', '-')}?)" if close else ""
        raise OptionsError(f"--scenario {name}: unknown key {spelled!r}{hint}", "scenario")
    return {key: value for key, value in settings.items() if value is not None}
