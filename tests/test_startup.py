"""What starting nhbench loads (docs/benchmarks.md, "Start-up").

``import nhbench``, ``nhbench --version`` and the pytest plugin are run hundreds of times by
fixtures and scripted campaigns, so they must not load pydantic, the option models or any of
the heavy optional libraries. Each case runs a fresh interpreter and asserts on which modules
it imported, never on how long it took (wall times on a shared machine are noise; the
benchmark, benchmarks/startup.py, measures those). The deferred parts must still give the
same objects and the same behaviour when they are used.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import pytest
from test_cli_errors import PACKAGE_PARENT, URI, assert_one_line_error, nhbench_cli

import nhbench
from nhbench import __version__
from nhbench.cli import _COMMANDS, build_parser

#: Modules that cost tens of milliseconds or more to import and that only some commands need
#: (the same list as benchmarks/startup.py).
HEAVY = ("pydantic", "pydantic_core", "hdrh", "rich", "jinja2", "pandas", "matplotlib",
         "numpy", "paramiko", "grpc", "google.protobuf", "ray", "yaml", "selenium",
         "prometheus_client", "aioquic", "nhbench._core")


def _modules_after(code: str) -> list[str]:
    """The sorted module names a fresh interpreter holds after running `code` (which must
    not print), as the last line of its stdout."""
    script = f"{code}\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))\n"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_PARENT, env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    modules: list[str] = json.loads(proc.stdout.splitlines()[-1])
    assert "sys" in modules  # guards the check below against an empty list
    return modules


def _heavy(modules: list[str]) -> list[str]:
    return [name for name in HEAVY
            if any(m == name or m.startswith(name + ".") for m in modules)]


def test_import_nhbench_loads_nothing_heavy() -> None:
    modules = _modules_after("import nhbench")
    assert "nhbench" in modules
    assert _heavy(modules) == []
    # Not even nhbench's own modules: every public name is imported on first use.
    assert [m for m in modules if m.startswith("nhbench.")] == []


def test_the_version_loads_no_option_model() -> None:
    modules = _modules_after("import nhbench; assert nhbench.__version__")
    assert _heavy(modules) == []
    assert "nhbench.options" not in modules


@pytest.mark.parametrize("argv", [["--version"], ["run", "--version"], ["sweep", "--version"]])
def test_version_flag_is_answered_without_the_parser(argv: list[str]) -> None:
    code = ("import contextlib, io\n"
            "from nhbench.cli import main\n"
            "out = io.StringIO()\n"
            "with contextlib.redirect_stdout(out):\n"
            f"    assert main({argv!r}) == 0\n"
            f"assert out.getvalue() == 'nhbench {__version__}\\n', out.getvalue()\n")
    modules = _modules_after(code)
    assert _heavy(modules) == []
    assert "nhbench.options" not in modules
    assert "argparse" in modules  # the CLI module itself was loaded


def test_the_fast_version_commands_are_the_parsers_subcommands() -> None:
    # main() answers ``nhbench COMMAND --version`` for the names in _COMMANDS without building
    # the parser; they must be exactly its subcommands, or a real one would be slower than it
    # need be and an unknown one would print a version instead of an error.
    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            assert set(action.choices) == _COMMANDS
            break
    else:
        raise AssertionError("nhbench's parser has no subcommands")


def test_version_and_argument_errors_are_unchanged() -> None:
    # The fast path and the parser give the same line; anything but the exact fast forms goes
    # through the parser as before (an unknown command is an error even with --version).
    assert nhbench_cli("--version").stdout == f"nhbench {__version__}\n"
    assert nhbench_cli("run", "--version").stdout == f"nhbench {__version__}\n"
    proc = nhbench_cli("bogus", "--version")
    assert_one_line_error(proc, "invalid choice: 'bogus'")
    proc = nhbench_cli("run", URI, "--rps", "x")
    assert_one_line_error(proc, "--rps")


def test_the_pytest_plugin_loads_no_option_model() -> None:
    modules = _modules_after("import nhbench.testing._plugin")
    assert _heavy(modules) == []


def test_importing_the_options_builds_no_validator() -> None:
    # defer_build: the classes exist (fields, flags and help are read from them) but their
    # validators are built on first use.
    code = ("from nhbench.options import AdaptOptions, Options, ServerOptions, SweepOptions\n"
            "built = [m.__name__ for m in (Options, ServerOptions, SweepOptions, AdaptOptions)\n"
            "         if m.__pydantic_complete__]\n"
            "assert built == [], built\n"
            "assert 'rps' in Options.model_fields\n"
            f"assert Options(uri={URI!r}).rps == 5.0\n"
            "assert Options.__pydantic_complete__\n")
    _modules_after(code)


def test_every_public_name_resolves_to_its_modules_object() -> None:
    import importlib

    for name in nhbench.__all__:
        module, attribute = nhbench._LAZY[name]
        assert getattr(nhbench, name) is getattr(importlib.import_module(module), attribute)
    assert set(nhbench.__all__) == set(nhbench._LAZY)
    assert set(nhbench.__all__) <= set(dir(nhbench))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        nhbench.nope  # noqa: B018


def test_submodules_are_still_reachable_as_attributes_after_a_plain_import() -> None:
    # The old eager import made nhbench.options, nhbench._run and the rest attributes of the
    # package; code that relied on that still works, each submodule imported on access.
    code = ("import nhbench\n"
            "assert nhbench.options.parse_size('1k') == 1024\n"
            "assert nhbench._names.ERROR_COUNTERS\n"
            "assert callable(nhbench._run.load_core)\n"
            "assert not hasattr(nhbench, 'no_such_module')\n"
            "assert not hasattr(nhbench, '_core')\n")
    modules = _modules_after(code)
    assert "nhbench._core" not in modules and "nhbench.__main__" not in modules


def test_from_nhbench_import_star_gives_every_public_name() -> None:
    namespace: dict[str, object] = {}
    exec("from nhbench import *", namespace)
    assert set(nhbench.__all__) <= set(namespace)
