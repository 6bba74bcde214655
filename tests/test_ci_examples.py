"""The CI gate recipes of docs/ci.md run: docs/examples/github-actions.yml and
docs/examples/.gitlab-ci.yml, executed here as their runners would, without a runner.

GitHub Actions: every ``run:`` step of the job, in order, each in its own
``bash --noprofile --norc -eo pipefail`` (the runner's shell), in one working directory;
``$GITHUB_ENV`` is a file whose ``KEY=VALUE`` lines become the environment of the later
steps, as on a runner; a process a step leaves in the background runs on until the job
ends. GitLab CI: the job's ``script`` lines in one shell, stopping at the first that fails.

What cannot run here, and is named in the assertions:

* the ``uses:`` steps (checkout, setup-python, artifacts, cache) are GitHub's own actions;
  the test plays the cache's part by handing one pass's ``baseline/`` to the next, which is
  what restoring it does on a runner;
* the install line (``pip install wheels/nhbench-*.whl``) needs the wheel of ``nox -s
  wheel``, and tests/test_wheel.py installs and runs that wheel in a fresh venv. Here
  ``nhbench`` and ``python`` are this interpreter and the package under test (a two-line
  script on PATH; the same program, not a stand-in).

The workflows' ``DURATION`` is 2 s a run; the test sets 1 s to halve its time (the runs and
their number, 5, are the workflow's). Their ``P99_BUDGET`` (50 ms) is a latency threshold,
which a test on a shared machine must not assert (timing belongs in benchmarks): the test sets
30 s, so the SLO step checks that the gate runs and passes; the step with a rule no run can
meet (``p99<1ns``) checks that it fails with 99.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_cli_errors import PACKAGE_PARENT

EXAMPLES = Path(__file__).resolve().parents[1] / "docs" / "examples"
GITHUB = EXAMPLES / "github-actions.yml"
GITLAB = EXAMPLES / ".gitlab-ci.yml"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def _bin(tmp: Path) -> Path:
    """`nhbench` and `python` as the workflows call them: this interpreter, with the
    package under test importable."""
    folder = tmp / "bin"
    folder.mkdir(parents=True)
    for name, tail in (("nhbench", "-m nhbench "), ("python", "")):
        script = folder / name
        script.write_text(f'#!/bin/sh\nexec {sys.executable} {tail}"$@"\n')
        script.chmod(0o755)
    return folder


def _environment(tmp: Path, extra: dict[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{_bin(tmp)}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_PARENT, env.get("PYTHONPATH")]))
    env.update(extra)
    env["DURATION"] = "1s"
    env["P99_BUDGET"] = "30s"
    return env


class _Shells:
    """The shells a pass starts, each its own process group, so that what a step left in
    the background (the server) is ended with the job, as a runner does."""

    def __init__(self) -> None:
        self.groups: list[int] = []

    def run(self, script: str, cwd: Path, env: dict[str, str], log: Path,
            shell: list[str]) -> int:
        path = log.with_suffix(".sh")
        path.write_text(script)
        with open(log, "wb") as out:
            proc = subprocess.Popen([*shell, str(path)], cwd=cwd, env=env, stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
            self.groups.append(proc.pid)
            return proc.wait(timeout=240)

    def end(self) -> None:
        for group in self.groups:
            try:
                os.killpg(group, signal.SIGTERM)
            except ProcessLookupError:
                pass


def _installs(script: str) -> bool:
    return "pip install" in script


def _github_pass(work: Path, baseline: Path | None) -> dict[str, Any]:
    """One run of the workflow's job in `work`; what each step did."""
    document = yaml.safe_load(GITHUB.read_text())
    job = document["jobs"]["latency"]
    work.mkdir()
    if baseline is not None:
        shutil.copytree(baseline, work / "baseline")
    github_env = work.parent / f"{work.name}.env"
    github_env.write_text("")
    env = _environment(work.parent / f"{work.name}-tools", {
        **{key: str(value) for key, value in job.get("env", {}).items()},
        "GITHUB_ENV": str(github_env), "CI": "true"})
    shells = _Shells()
    done: dict[str, Any] = {"skipped_uses": [], "skipped_install": [], "steps": []}
    try:
        for number, step in enumerate(job["steps"]):
            if "uses" in step:
                done["skipped_uses"].append(step["uses"])
                continue
            if _installs(step["run"]):
                done["skipped_install"].append(step["name"])
                continue
            log = work.parent / f"{work.name}-step{number}.log"
            status = shells.run(step["run"], work, env, log,
                                ["bash", "--noprofile", "--norc", "-eo", "pipefail"])
            done["steps"].append((step["name"], status, log.read_text(errors="replace")))
            if status != 0:
                break
            for line in github_env.read_text().splitlines():
                key, _, value = line.partition("=")
                env[key] = value
    finally:
        shells.end()
    return done


def _statuses(done: dict[str, Any]) -> dict[str, int]:
    return {name: status for name, status, _ in done["steps"]}


def _output(done: dict[str, Any], name: str) -> str:
    return next(text for step, _, text in done["steps"] if step == name)


def _assert_gate_ran(done: dict[str, Any]) -> None:
    statuses = _statuses(done)
    assert done["skipped_install"] == ["Install nhbench"]
    # Every other step ran, and passed (the compare step: below). A comparison that reports a
    # regression fails its step, and then the job stops there, as a runner stops it: the run
    # does not become the next baseline.
    expected = {"Record what runs the gate", "Start the service under test", "Latency SLO",
                "The gate can fail", "Compare with the baseline"}
    if statuses.get("Compare with the baseline") == 0:
        expected.add("Keep this run as the next baseline")
    assert set(statuses) == expected, done["steps"]
    for name, status, text in done["steps"]:
        if name != "Compare with the baseline":
            assert status == 0, f"{name}: {status}\n{text}"
    assert "an impossible SLO exited 99" in _output(done, "The gate can fail")
    assert "nhbench " in _output(done, "Record what runs the gate")


def test_github_actions_workflow_runs_its_steps(tmp_path: Path) -> None:
    first = _github_pass(tmp_path / "first", baseline=None)
    assert first["skipped_uses"] == ["actions/checkout@v4", "actions/setup-python@v5",
                                     "actions/download-artifact@v4",
                                     "actions/cache/restore@v4", "actions/cache/save@v4"]
    _assert_gate_ran(first)
    assert _statuses(first)["Compare with the baseline"] == 0
    assert "no baseline yet" in _output(first, "Compare with the baseline")
    candidates = sorted((tmp_path / "first" / "candidate").glob("*.json"))
    assert len(candidates) == 5
    assert len(list((tmp_path / "first" / "baseline").glob("*.json"))) == 5

    # The next run of the job: the cache step restores the baseline the first one kept.
    second = _github_pass(tmp_path / "second", baseline=tmp_path / "first" / "baseline")
    _assert_gate_ran(second)
    compared = _output(second, "Compare with the baseline")
    # Two passes of the same load a few seconds apart on a shared machine: "no significant
    # change" is expected, but a real shift of the machine between them is a regression the
    # gate is right to report (exit 3). Either way the comparison was carried out.
    assert _statuses(second)["Compare with the baseline"] in (0, 3), compared
    assert "5 baseline runs against 5 candidate runs" in compared
    for statistic in ("p50", "p99", "rate", "error_rate"):
        assert f"\n{statistic} " in compared


def test_gitlab_job_runs_its_script(tmp_path: Path) -> None:
    document = yaml.safe_load(GITLAB.read_text())
    job = document["latency-gate"]
    lines = job["script"]
    skipped = [line for line in lines if _installs(line)]
    assert skipped == ["python -m pip install wheels/nhbench-*.whl"]
    work = tmp_path / "work"
    work.mkdir()
    env = _environment(tmp_path / "tools", {**{k: str(v) for k, v in job["variables"].items()},
                              "CI": "true", "CI_COMMIT_BRANCH": "main",
                              "CI_DEFAULT_BRANCH": "main"})
    # GitLab's runner stops the job at the first line that fails.
    script = "set -eo pipefail\n" + "\n".join(line for line in lines if not _installs(line))
    shells = _Shells()
    log = tmp_path / "job.log"
    try:
        status = shells.run(script + "\n", work, env, log, ["bash", "--noprofile", "--norc"])
    finally:
        shells.end()
    text = log.read_text(errors="replace")
    assert status == 0, text
    assert "no baseline yet" in text
    # On the default branch the job keeps its runs as the next baseline.
    assert len(list((work / "candidate").glob("*.json"))) == 5
    assert len(list((work / "baseline").glob("*.json"))) == 5
