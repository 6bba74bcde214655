"""The help of nhbench's commands is byte-identical to the recorded one in tests/data/help/.

The options are declared in one model per concern and composed (options/_run.py); their
order and text make the flags, --help and docs/options.md. A change to any of them shows
here as a diff to review; a deliberate one is recorded again (tests/data/help/README.md).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import nhbench

HELP = Path(__file__).resolve().parent / "data" / "help"
# Run the same nhbench the tests import (a source checkout via PYTHONPATH, or installed).
PACKAGE_PARENT = str(Path(nhbench.__file__).resolve().parent.parent)


def help_text(*command: str) -> str:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_PARENT, env.get("PYTHONPATH")]))
    # argparse wraps at the terminal's width: fixed, so the text does not depend on where
    # the tests run.
    env["COLUMNS"] = "100"
    proc = subprocess.run(
        [sys.executable, "-m", "nhbench", *command, "--help"],
        capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    return proc.stdout


@pytest.mark.parametrize("command", ["run", "server", "sweep", "adapt"])
def test_help_is_the_recorded_one(command: str) -> None:
    recorded = (HELP / f"{command}.txt").read_text(encoding="utf-8")
    assert help_text(command) == recorded, (
        f"nhbench {command} --help changed; if on purpose, record it again "
        "(tests/data/help/README.md)"
    )


@pytest.mark.parametrize("command", ["demo", "report", "browse", "ui", "transform", "service",
                                     "nighthawk", "compare", "calibrate", "version"])
def test_the_other_commands_help_is_the_recorded_one(command: str) -> None:
    # The commands are declared in one list (cli/_commands.py) and each in its own module;
    # moving them must not change a line of their help.
    recorded = (HELP / f"{command}.txt").read_text(encoding="utf-8")
    assert help_text(command) == recorded, f"nhbench {command} --help changed"


def test_the_command_list_is_the_recorded_one() -> None:
    # `nhbench --help`: the commands, their order and their help lines.
    assert help_text() == (HELP / "nhbench.txt").read_text(encoding="utf-8")


def test_run_option_fields_keep_their_order() -> None:
    # The order of Options' fields is the order of the flags in --help and docs/options.md,
    # of the keys of every echo of the options, and what a field validator sees before it.
    # Composing the model from its parts must keep it (options/_run.py lists them).
    from nhbench.options import Options

    recorded = (HELP / "run_fields.txt").read_text(encoding="utf-8").split()
    assert list(Options.model_fields) == recorded


@pytest.mark.parametrize("command", [("compat",), ("compat", "install"), ("compat", "uninstall")],
                         ids=" ".join)
def test_compat_help_is_the_recorded_one(command: tuple[str, ...]) -> None:
    recorded = (HELP / f"{'_'.join(command)}.txt").read_text(encoding="utf-8")
    assert help_text(*command) == recorded, f"nhbench {' '.join(command)} --help changed"
