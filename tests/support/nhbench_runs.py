"""Many ``python -m nhbench ARGS`` invocations for the price of one interpreter start-up.

A real ``python -m nhbench`` spends about half a second of CPU starting the interpreter and
importing nhbench (pydantic, the option models) before it looks at its arguments; the CLI
table (test_cli_table.py) runs hundreds of invocations and paid that for each one.

`run_many` starts one helper interpreter (the "zygote") that imports what
``python -m nhbench`` imports before it reads its arguments (``nhbench.cli``, the import in
``nhbench/__main__.py``; a caller may add the modules its commands import later, such as
``nhbench.sweep``) and then forks one child per invocation. Each child is still a
process of its own: its own working directory, stdin from /dev/null, stdout and stderr
into files at the file-descriptor level (so whatever the C core writes is caught too), its
exit status read by ``waitpid``. The child runs ``nhbench`` as ``__main__`` with runpy, as
``python -m`` does, and ends the way a Python program ends: ``SystemExit`` or an uncaught
exception (traceback on stderr, status 1) unwinds to the top of the zygote's script, and
the interpreter then finalizes normally (atexit handlers, flushing, and any "Exception
ignored" noise on stderr a real run would show). The objects made by the imports are frozen
(``gc.freeze``) in the zygote, so the children's collector leaves them alone.

What the children skip is only the interpreter start-up and the imports, which happen before
any argument is read. test_cli_table.py checks on a sample of rows that the outcome (status,
stdout, stderr) is the same as a real ``python -m nhbench``; test_cli_errors.py runs the real
command throughout.
"""

from __future__ import annotations

import json
import locale
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

# The zygote, run with `python -c`: no function wraps the fork, so a child's SystemExit (or
# uncaught exception) travels straight to the top level and ends the child like a program.
_ZYGOTE = r"""
import gc, json, os, runpy, signal, sys, threading, time

spec = json.load(sys.stdin)
import importlib
for name in spec["preload"]:
    importlib.import_module(name)

# Forking a process with threads is unsafe; importing nhbench must not start any.
assert threading.active_count() == 1, threading.enumerate()
# What is imported now is never garbage for a child: frozen, the collector does not walk it,
# so a child's collections (at exit above all) do not write to, and copy, every page it shares
# with the zygote. That takes a child's exit from about 0.2 s to a few ms.
gc.freeze()
pending = list(enumerate(spec["runs"]))
running = {}
results = [None] * len(pending)
while pending or running:
    while pending and len(running) < spec["jobs"]:
        index, run = pending.pop(0)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            if spec["rlimit_as"]:
                import resource
                resource.setrlimit(resource.RLIMIT_AS, (spec["rlimit_as"], spec["rlimit_as"]))
            os.chdir(run["cwd"])
            for fd, path, flags in ((0, os.devnull, os.O_RDONLY),
                                    (1, run["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                                    (2, run["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
                opened = os.open(path, flags, 0o600)
                os.dup2(opened, fd)
                os.close(opened)
            # `python -m` puts the working directory first on sys.path.
            sys.path[0] = os.getcwd()
            sys.argv = ["-m", *run["args"]]
            runpy.run_module("nhbench", run_name="__main__", alter_sys=True)
            sys.exit(0)
        running[pid] = (index, time.monotonic() + spec["timeout"])
    pid, status = os.waitpid(-1, os.WNOHANG)
    if pid == 0:
        now = time.monotonic()
        for child, (index, deadline) in running.items():
            if now > deadline:
                os.kill(child, signal.SIGKILL)
                results[index] = "timeout"
        time.sleep(0.005)
        continue
    index, _ = running.pop(pid)
    if results[index] is None:
        results[index] = os.waitstatus_to_exitcode(status)
json.dump(results, sys.stdout)
"""


@dataclass(frozen=True)
class Invocation:
    """``python -m nhbench *args`` in `cwd` (which must exist)."""

    args: Sequence[str]
    cwd: Path


# What nhbench/__main__.py imports before main() reads the arguments.
MAIN_IMPORTS = ("nhbench.cli",)


def run_many(invocations: Sequence[Invocation], env: Mapping[str, str], *, jobs: int = 4,
             timeout: float = 120.0, preload: Sequence[str] = MAIN_IMPORTS,
             rlimit_as: int | None = None,
             ) -> list[subprocess.CompletedProcess[str]]:
    """Run every invocation (at most `jobs` at a time), each as its own forked process of one
    zygote interpreter started with `env` that has imported the modules in `preload`; the
    results in the same order. An invocation that runs longer than `timeout` seconds is
    killed and raises TimeoutExpired here. `rlimit_as` caps each child's address space (bytes),
    so that a run that would read without bound fails with a MemoryError instead."""
    with tempfile.TemporaryDirectory(prefix="nhb-runs-") as tmp:
        runs = [{"args": list(inv.args), "cwd": str(inv.cwd),
                 "stdout": f"{tmp}/{i}.out", "stderr": f"{tmp}/{i}.err"}
                for i, inv in enumerate(invocations)]
        zygote = subprocess.run(
            [sys.executable, "-c", _ZYGOTE],
            input=json.dumps({"runs": runs, "jobs": jobs, "timeout": timeout,
                              "preload": list(preload), "rlimit_as": rlimit_as}),
            capture_output=True, text=True, env=dict(env), check=False,
            timeout=timeout * max(1, len(runs)),
        )
        if zygote.returncode != 0:
            raise RuntimeError(f"the nhbench zygote failed ({zygote.returncode}): "
                               f"{zygote.stderr[-2000:]}")
        statuses = json.loads(zygote.stdout)
        results = []
        for inv, run, status in zip(invocations, runs, statuses, strict=True):
            argv = [sys.executable, "-m", "nhbench", *inv.args]
            if status == "timeout":
                raise subprocess.TimeoutExpired(argv, timeout)
            results.append(subprocess.CompletedProcess(
                argv, status, _text(Path(run["stdout"])), _text(Path(run["stderr"]))))
        return results


def _text(path: Path) -> str:
    """A file's bytes as `subprocess.run(text=True)` would give them: the locale's encoding,
    strict, universal newlines."""
    data = path.read_bytes().decode(locale.getpreferredencoding(False))
    return data.replace("\r\n", "\n").replace("\r", "\n")
