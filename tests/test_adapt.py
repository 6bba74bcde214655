"""``nhbench adapt`` without timing: the search on synthetic outcomes (the sequence of rates
for a given boundary), replay and its refusals, bad input (one line, exit 2, nothing
created), and a real short campaign against our test server: its report, its confirmation
spread, SIGINT then --resume continuing the search where it stopped.

The rate-measuring test (the boundary found versus the computed one) is in
tests/test_adapt_boundary.py, marked serial.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import nhbench
from nhbench import TestServer
from nhbench._exceptions import CampaignError, OptionsError
from nhbench.adaptive import (
    Outcome,
    SearchSettings,
    adapt,
    outcome_of,
    prepare_adapt,
    replay,
)
from nhbench.campaign import load_campaign, load_manifest
from nhbench.report import render_text

PACKAGE_PARENT = str(Path(nhbench.__file__).resolve().parent.parent)
CLIENT_CPU = str(min(os.sched_getaffinity(0)))
SERVER_CPU = max(os.sched_getaffinity(0))


def _search(boundary: float, **settings: object) -> tuple[list[float], str | None, float | None]:
    """Run the search against a step that passes exactly when rate <= boundary."""
    config = SearchSettings(**settings)  # type: ignore[arg-type]
    outcomes: list[Outcome] = []
    while True:
        state = replay(config, outcomes)
        if state.next_rate is None:
            return [o.rate for o in outcomes], state.reason, state.answer
        outcomes.append(Outcome(len(outcomes) + 1, state.next_rate,
                                state.next_rate <= boundary))


# ---- the search, pure ------------------------------------------------------------------------


def test_search_doubles_then_bisects_to_the_precision() -> None:
    rates, reason, answer = _search(1234, min_rps=100, max_rps=10000, precision=0.02)
    assert rates == [100, 200, 400, 800, 1600, 1200, 1400, 1300, 1250, 1225, 1237.5]
    assert reason == "converged"
    assert answer == 1225
    # The bracket that ended it is within 2 % of the answer, and straddles the boundary.
    assert 1237.5 - 1225 <= 0.02 * 1225 and 1225 <= 1234 < 1237.5


def test_search_absolute_precision_and_growth() -> None:
    rates, reason, answer = _search(1234, min_rps=100, max_rps=10000, growth=3,
                                    precision=10, precision_relative=False)
    assert rates[:4] == [100, 300, 900, 2700]
    assert reason == "converged" and answer is not None
    failing = min(rate for rate in rates if rate > 1234)
    assert failing - answer <= 10 and answer <= 1234


def test_search_ends_at_max_rps_and_at_min_rps() -> None:
    rates, reason, answer = _search(1e9, min_rps=100, max_rps=1000)
    assert rates == [100, 200, 400, 800, 1000]
    assert (reason, answer) == ("max-rps passed", 1000)
    rates, reason, answer = _search(50, min_rps=100, max_rps=1000)
    assert (rates, reason, answer) == ([100], "min-rps failed", None)
    # A boundary between the last doubling and max_rps is bisected below max_rps.
    rates, reason, _ = _search(950, min_rps=100, max_rps=1000, precision=0.1)
    assert rates[:6] == [100, 200, 400, 800, 1000, 900] and reason == "converged"


def test_search_step_limit_and_confirmations() -> None:
    rates, reason, answer = _search(1234, min_rps=100, max_rps=10000, max_steps=6)
    assert (rates, reason, answer) == ([100, 200, 400, 800, 1600, 1200], "step limit", 1200)
    rates, reason, answer = _search(1234, min_rps=100, max_rps=10000, confirm=3)
    assert rates[-4:] == [1237.5, 1225, 1225, 1225] and answer == 1225
    # No confirmation when there is no answer.
    assert _search(50, min_rps=100, max_rps=1000, confirm=3)[0] == [100]


def test_replay_refuses_steps_the_search_did_not_ask_for() -> None:
    settings = SearchSettings(min_rps=100, max_rps=1000)
    with pytest.raises(CampaignError, match="ran at 300 rps where the search asks for 200"):
        replay(settings, [Outcome(1, 100, True), Outcome(2, 300, True)])
    with pytest.raises(CampaignError, match="follows the end of the search"):
        replay(settings, [Outcome(1, 100, False), Outcome(2, 100, False)])
    # Replaying a prefix gives the step after it, whatever came later.
    state = replay(settings, [Outcome(1, 100, True), Outcome(2, 200, False)])
    assert (state.phase, state.next_rate) == ("binary", 150)


# ---- bad input -------------------------------------------------------------------------------


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_PARENT, env.get("PYTHONPATH")]))
    return env


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nhbench", *args], check=False,
                          capture_output=True, text=True, timeout=timeout, env=_env(),
                          stdin=subprocess.DEVNULL)


@pytest.mark.parametrize(("args", "message"), [
    ((), "--slo: at least one rule is required"),
    (("--slo", "p99<5"), "--slo 'p99<5'"),
    (("--slo", "p99<5ms", "--min-rps", "500", "--max-rps", "100"),
     "--min-rps 500 is above --max-rps 100"),
    (("--slo", "p99<5ms", "--precision", "2x"), "--precision"),
    (("--slo", "p99<5ms", "--precision", "100%"), "below 100%"),
    (("--slo", "p99<5ms", "--growth", "1"), "--growth"),
    (("--slo", "p99<5ms", "--confirm", "-1"), "--confirm"),
    (("--slo", "p99<5ms", "--rps", "10"), "--rps: the search chooses the rates"),
    (("--slo", "p99<5ms", "--connections", "0"), "--connections"),
])
def test_bad_input_is_one_line_exit_2_and_creates_nothing(
        tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    out = tmp_path / "campaign"
    proc = cli("adapt", "http://127.0.0.1:1/", *args, "--out", str(out))
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("nhbench: error: "), proc.stderr
    assert message in lines[0]
    assert not out.exists()


def test_python_bad_input_raises_options_error(tmp_path: Path) -> None:
    with pytest.raises(OptionsError, match="at least one rule"):
        adapt("http://127.0.0.1:1/", out=tmp_path / "x")
    with pytest.raises(OptionsError, match="steps: not an adapt option"):
        prepare_adapt({"url": "http://127.0.0.1:1/", "slo": ["p99<5ms"], "steps": "1,2"})
    assert not (tmp_path / "x").exists()


# ---- a real campaign -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> TestServer:
    # 1 ms fixed delay: 'mean<1ms' always fails, and 'mean<10s' or 'error_rate<1%' pass
    # whatever the machine's load (a starved 2-core machine running three test suites has
    # shown a 500 ms mean here), so the verdicts below do not depend on timing.
    with TestServer(workers=1, cpus=[SERVER_CPU], static_delay="1ms", subprocess=True) as srv:
        yield srv


def test_search_with_confirmations_and_report(server: TestServer, tmp_path: Path) -> None:
    out = tmp_path / "c"
    outcome = adapt(server.url, slo=["mean<10s", "error_rate<1%"], min_rps=50, max_rps=150,
                    duration="0.3s", confirm=2, connections=32, cpus=CLIENT_CPU, out=out,
                    captures=False, facts=False)
    # 50, 100, 150 (the cap), then two confirmations at 150.
    assert [s.rps_per_worker for s in outcome.steps] == [50, 100, 150, 150, 150]
    assert outcome.reason == "max-rps passed" and outcome.highest_passing_rps == 150
    assert outcome.highest_passing_total_rps == 150 * outcome.workers
    assert outcome.confirmation is not None and outcome.confirmation.steps == [4, 5]
    assert outcome.confirmation.passed == 2 and outcome.confirmed is True
    low, median, high = outcome.confirmation.spread["mean<10s"]
    assert low is not None and median is not None and high is not None
    assert 0.001 <= low <= median <= high  # the server's 1 ms delay at least
    assert outcome.exit_status == 0
    manifest = load_manifest(out)
    assert manifest.kind == "adapt" and manifest.status == "completed"
    assert outcome_of(out, manifest).highest_passing_rps == 150
    text = render_text(manifest)
    assert text.startswith("nhbench adapt")
    assert "Answer: 150 rps per worker" in text
    assert "Confirmation: 2/2 passed (held); steps 4, 5" in text
    assert "max-rps passed" in text
    assert "Search" in (out / "report.html").read_text()
    assert "nhbench adapt" in outcome._repr_html_()
    # nhbench report renders it again from the directory.
    proc = cli("report", str(out))
    assert proc.returncode == 0 and "Answer: 150 rps per worker" in proc.stdout


def test_min_rps_failing_exits_99_with_the_evidence(server: TestServer, tmp_path: Path) -> None:
    out = tmp_path / "c"
    proc = cli("adapt", server.url, "--slo", "mean<1ms", "--min-rps", "50", "--duration",
               "0.3s", "--connections", "4", "--cpus", CLIENT_CPU, "--no-mpstat", "--out",
               str(out))
    assert proc.returncode == 99, proc.stderr
    assert "Traceback" not in proc.stderr
    campaign = load_campaign(out)
    assert [s.rps_per_worker for s in campaign.steps] == [50]
    assert campaign.manifest.adapt is not None
    assert campaign.manifest.adapt.reason == "min-rps failed"
    failing = campaign.manifest.adapt.lowest_failing
    assert failing is not None and not failing.checks[0].passed
    assert "no answer: min-rps failed" in proc.stderr


def test_failed_runs_fail_the_step(tmp_path: Path, closed_port: int) -> None:
    # Nothing listens: no request succeeds, so the step fails (it measured nothing) and the
    # search has no answer; the check says why.
    outcome = adapt(f"http://127.0.0.1:{closed_port}/", slo=["p99<1s"], min_rps=10, duration="0.3s",
                    out=tmp_path / "c", captures=False, facts=False, connections=1)
    assert outcome.reason == "min-rps failed" and outcome.exit_status == 99
    failing = outcome.lowest_failing
    assert failing is not None
    assert any(not c.passed and c.expression in ("a request succeeded",
                                                 "run ended without error")
               or c.expression.startswith("failure predicate") for c in failing.checks)


def test_sigint_mid_search_then_resume_continues(server: TestServer, tmp_path: Path) -> None:
    out = tmp_path / "c"
    # Low rates and many connections: no step may block, even on a loaded machine.
    args = ("--slo", "error_rate<1%", "--min-rps", "10", "--max-rps", "80", "--duration", "0.5s",
            "--connections", "32", "--cpus", CLIENT_CPU, "--no-mpstat")
    proc = subprocess.Popen([sys.executable, "-m", "nhbench", "adapt", server.url, *args,
                             "--out", str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env(),
                            stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if len(json.loads((out / "manifest.json").read_text())["steps"]) >= 2:
                    break
            except (FileNotFoundError, json.JSONDecodeError):
                pass
            time.sleep(0.05)
        time.sleep(0.2)  # into step 3
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    manifest = load_manifest(out)
    assert manifest.status == "interrupted"
    done = [s.rps_per_worker for s in manifest.steps]
    assert 2 <= len(done) < 4 and done == [10, 20, 40][: len(done)]
    # The search goes on exactly where it stopped: the next rate is the replayed one.
    resumed = cli("adapt", "--resume", str(out))
    assert resumed.returncode == 0, resumed.stderr
    manifest = load_manifest(out)
    assert [s.rps_per_worker for s in manifest.steps] == [10, 20, 40, 80]
    assert manifest.adapt is not None and manifest.adapt.reason == "max-rps passed"
    # A resume with another search is refused before anything runs.
    for changed in (("--min-rps", "30"), ("--slo", "error_rate<2%"), ("--precision", "1%"),
                    ("--duration", "2s")):
        other = cli("adapt", "--resume", str(out), *changed)
        assert other.returncode == 2 and "different" in other.stderr, (changed, other.stderr)
        assert len(load_manifest(out).steps) == 4
    # A finished search can be confirmed later: --confirm may change on a resume, and the
    # campaign keeps it, so that a later plain --resume replays the confirmation too.
    confirmed = cli("adapt", "--resume", str(out), "--confirm", "1")
    assert confirmed.returncode == 0, confirmed.stderr
    manifest = load_manifest(out)
    assert [s.rps_per_worker for s in manifest.steps] == [10, 20, 40, 80, 80]
    assert manifest.adapt is not None and manifest.adapt.confirmation is not None
    assert manifest.adapt.confirmation.held is True
    again = cli("adapt", "--resume", str(out))
    assert again.returncode == 0, again.stderr
    assert len(load_manifest(out).steps) == 5
    fewer = cli("adapt", "--resume", str(out), "--confirm", "0")
    assert fewer.returncode == 2 and "already ran 1 confirmation run(s)" in fewer.stderr


def test_docs_option_table_is_current() -> None:
    from nhbench.options import AdaptOptions, markdown_table

    text = (Path(__file__).resolve().parent.parent / "docs" / "adapt.md").read_text()
    begin, end = "<!-- BEGIN nhbench adapt options -->\n", "<!-- END nhbench adapt options -->"
    table = text[text.index(begin) + len(begin):text.index(end)]
    assert table == markdown_table(AdaptOptions)


def test_help_lists_the_search_and_the_shared_options() -> None:
    proc = cli("adapt", "--help")
    assert proc.returncode == 0
    for flag in ("--slo", "--min-rps", "--max-rps", "--precision", "--confirm", "--max-steps",
                 "--growth", "--duration", "--out", "--resume", "--ssh", "--connections"):
        assert flag in proc.stdout, flag
    assert "--step-rps" not in proc.stdout and "--stop-on-slo" not in proc.stdout


def test_default_directory_is_named_adapt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    config = prepare_adapt({"url": "http://127.0.0.1:1/", "slo": "p99<5ms"})
    assert config.sweep.out is not None and config.sweep.out.name.endswith("-adapt")
    labelled = prepare_adapt({"url": "http://127.0.0.1:1/", "slo": "p99<5ms", "label": ["gw"]})
    assert labelled.sweep.out is not None and labelled.sweep.out.name.endswith("-gw")
    # Preparing creates nothing.
    assert list(tmp_path.iterdir()) == []


def test_a_blocked_step_fails_and_marks_the_boundary_as_the_clients(tmp_path: Path) -> None:
    # One connection to a server that answers after 100 ms carries at most 10 requests a
    # second: at 40 rps the load generator cannot offer the rate, whatever the machine.
    with TestServer(workers=1, static_delay="100ms", subprocess=True) as slow:
        outcome = adapt(slow.url, slo=["error_rate<1%"], min_rps=40, max_rps=40,
                        duration="0.5s", connections=1, cpus=CLIENT_CPU, out=tmp_path / "c",
                        captures=False, facts=False)
    assert outcome.reason == "min-rps failed" and outcome.exit_status == 99
    assert outcome.steps[0].blocked
    failing = outcome.lowest_failing
    assert failing is not None
    assert [c.expression for c in failing.checks if not c.passed] == ["not blocked"]
    assert outcome.client_limited
    assert "the boundary may be the client's" in render_text(load_manifest(tmp_path / "c"))


def test_unresolvable_target_exits_1_and_creates_nothing(tmp_path: Path) -> None:
    out = tmp_path / "c"
    proc = cli("adapt", "http://no-such-host.invalid/", "--slo", "p99<5ms", "--duration",
               "0.3s", "--no-mpstat", "--out", str(out))
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("nhbench: error: cannot resolve host 'no-such-host.invalid'")
    assert not out.exists()


def test_a_campaign_resumes_only_with_its_own_command(server: TestServer,
                                                      tmp_path: Path) -> None:
    out = tmp_path / "c"
    adapt(server.url, slo=["error_rate<1%"], min_rps=20, max_rps=20, duration="0.3s",
          connections=8, cpus=CLIENT_CPU, out=out, captures=False, facts=False)
    swept = cli("sweep", "--resume", str(out))
    assert swept.returncode == 2
    assert "an adapt campaign; continue it with nhbench adapt --resume" in swept.stderr
    sweep_out = tmp_path / "s"
    nhbench.run_sweep(server.url, steps="20", duration="0.3s", connections=8, cpus=CLIENT_CPU,
                      out=sweep_out, captures=False, facts=False)
    adapted = cli("adapt", "--resume", str(sweep_out))
    assert adapted.returncode == 2 and "a sweep campaign" in adapted.stderr, adapted.stderr


def test_nhbench_adapt_is_the_function_after_the_package_was_imported() -> None:
    # A fresh interpreter: the package first, then the function by the package's name.
    code = ("import nhbench.adaptive, nhbench\n"
            "try:\n"
            "    nhbench.adapt('http://127.0.0.1:1/', out='/nonexistent/x')\n"
            "except nhbench.OptionsError as exc:\n"
            "    print('OptionsError:', exc)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=_env(), timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "OptionsError: --slo: at least one rule is required" in proc.stdout
