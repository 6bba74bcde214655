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

The file is parsed with PyYAML into the `Scenario` model, which rejects unknown keys (with a
suggestion) so that a misspelt option is an error rather than silently ignored.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from .._exceptions import OptionsError
from ..options import Options

__all__ = [
    "EMBEDDED_URL",
    "PLAN_KEYS",
    "RUN_OPTION_KEYS",
    "SWEEP_KEYS",
    "Scenario",
    "load_scenario",
]

#: ``url: embedded`` (or the URL argument ``embedded``): start nhbench's test server.
EMBEDDED_URL = "embedded"

#: Keys that choose the steps; a resumed campaign given any of them replaces all of them.
PLAN_KEYS = ("rps", "max_rps", "step_rps", "steps")

#: The sweep's own settings (Python spelling), besides the run options.
SWEEP_KEYS = (
    "url",
    *PLAN_KEYS,
    "duration",
    "cooldown",
    "extend",
    "extend_limit",
    "stop_on_blocked",
    "stop_on_slo",
    "out",
    "note",
    "label",
    "ssh",
    "ssh_key",
    "ssh_password_env",
    "ssh_password_prompt",
    "ssh_jump",
    "ssh_known_hosts",
    "ssh_accept_new",
    "watch_cpus",
    "perf",
    "perf_cpus",
    "perf_frequency",
    "no_mpstat",
    "install_tools",
)

# Run options a sweep sets itself (uri, rps, duration, label) or has no use for: a step's
# result always goes to the campaign directory as JSON, and a step needs a duration.
_NOT_RUN_KEYS = frozenset({"uri", "rps", "duration", "label", "output", "output_format",
                           "no_duration"})

#: Every `nhbench run` option a sweep passes on to each step unchanged.
RUN_OPTION_KEYS = tuple(name for name in Options.model_fields if name not in _NOT_RUN_KEYS)


def _scenario_model() -> type[BaseModel]:
    # One optional, untyped field per key: the values are checked where the command-line
    # values are (Options, the plan, the stop rules), so a file and a flag accept exactly the
    # same syntax and fail with the same message. This model's job is the set of keys.
    fields: dict[str, Any] = {name: (Any, None) for name in (*SWEEP_KEYS, *RUN_OPTION_KEYS)}
    return create_model(
        "Scenario",
        __config__=ConfigDict(extra="forbid"),
        __doc__="The keys of a campaign file (see the module doc).",
        **fields,
    )


Scenario = _scenario_model()


def _key(name: object) -> str:
    return str(name).strip().lstrip("-").replace("-", "_")


def load_scenario(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a campaign file into a settings dict (Python spelling, only the keys present).

    OptionsError (one line, naming the file) when it cannot be read, is not a YAML mapping,
    or has a key that is not a sweep option.
    """
    name = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise OptionsError(f"--scenario {name}: not UTF-8 text (byte "
                           f"0x{exc.object[exc.start]:02x} at offset {exc.start})",
                           "scenario") from None
    except OSError as exc:
        raise OptionsError(f"--scenario: cannot read {name!r}: {exc.strerror or exc}",
                           "scenario") from None
    try:
        data = yaml.safe_load(text)
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
    try:
        Scenario.model_validate(settings)
    except ValidationError as exc:
        error = exc.errors()[0]
        key = str(error["loc"][0]) if error.get("loc") else "?"
        known = [*SWEEP_KEYS, *RUN_OPTION_KEYS]
        close = difflib.get_close_matches(key, known, n=1)
        hint = f" (did you mean {close[0].replace('_', '-')}?)" if close else ""
        spelled = key.replace("_", "-")
        if key in _NOT_RUN_KEYS:
            raise OptionsError(f"--scenario {name}: {spelled!r} is not a sweep option",
                               "scenario") from None
        raise OptionsError(f"--scenario {name}: unknown key {spelled!r}{hint}",
                           "scenario") from None
    return {key: value for key, value in settings.items() if value is not None}
