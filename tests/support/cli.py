"""The nhbench command the tests import, run as a user runs it (``python -m nhbench``), with
the package's own directory first on PYTHONPATH so that a source checkout and an installed
package both run the code under test."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import nhbench

PACKAGE_PARENT = str(Path(nhbench.__file__).resolve().parent.parent)


def cli_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment with the tested package first on PYTHONPATH, then `extra`."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_PARENT, env.get("PYTHONPATH")]))
    env.update(extra or {})
    return env


def nhbench_cli(*args: str, timeout: float = 120, env: Mapping[str, str] | None = None,
                cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``nhbench ARGS`` with no stdin; its exit status, stdout and stderr (text)."""
    return subprocess.run([sys.executable, "-m", "nhbench", *args], capture_output=True,
                          text=True, timeout=timeout, env=cli_env(env), cwd=cwd,
                          stdin=subprocess.DEVNULL, check=False)


def refused_before_sending(proc: subprocess.CompletedProcess[str], server: nhbench.TestServer,
                           seen: Mapping[str, object]) -> str:
    """The one line of a run refused as an options error (exit 2) with nothing sent: the test
    server's request and connection counts as they were in `seen` (its stats before the
    run), nothing on stdout. Returns the line."""
    now = server.stats()
    assert proc.returncode == 2, proc.stderr
    assert (now["requests"], now["connections_total"]) == (
        seen["requests"], seen["connections_total"]), proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


#: ``python -c PEAK_RSS_MAIN ARGS`` runs ``nhbench ARGS`` and, at exit, writes the process's
#: own peak RSS (VmHWM, in KiB) to the file named by NHB_PEAK_FILE. wait4's ru_maxrss would
#: not do: the kernel folds the pre-exec memory into it, so the size of the test process the
#: child is forked from (a pytest worker holding numpy, scipy, aioquic...) counts as the
#: child's.
PEAK_RSS_MAIN = """
import atexit, os, runpy, sys

def _peak():
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmHWM:"))
    with open(os.environ["NHB_PEAK_FILE"], "w") as out:
        out.write(line.split()[1])

atexit.register(_peak)
sys.argv[0] = "nhbench"
runpy.run_module("nhbench", run_name="__main__", alter_sys=True)
"""
