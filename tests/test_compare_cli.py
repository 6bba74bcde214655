"""``nhbench compare`` and ``nhbench run --repeat N`` as a user runs them (docs/trust.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import nhbench_cli

import nhbench
from nhbench.cli._compare import REGRESSED

DATA = Path(__file__).resolve().parent / "data"
NIGHTHAWK = str(DATA / "nighthawk" / "output_formatter.medium.proto.gold")


def _repeat(url: str, directory: Path, count: int) -> list[Path]:
    proc = nhbench_cli("run", url, "--rps", "500", "--duration", "2s", "--repeat", str(count),
                       "--output-dir", str(directory), "--output-format", "json",
                       timeout=120)
    assert proc.returncode == 0, proc.stderr
    # One path a run on stdout (--output-dir's way), no interval lines on a piped stderr.
    paths = [Path(line) for line in proc.stdout.splitlines()]
    assert len(paths) == count and all(path.parent == directory for path in paths)
    assert "requests" not in proc.stderr
    return paths


def test_repeat_and_compare_directories(tmp_path: Path) -> None:
    fast_dir, slow_dir = tmp_path / "fast", tmp_path / "slow"
    fast_dir.mkdir()
    slow_dir.mkdir()
    with nhbench.TestServer() as server:
        fast = _repeat(server.url, fast_dir, 4)
    with nhbench.TestServer(response={"static_delay": "5ms"}) as server:
        _repeat(server.url, slow_dir, 4)
    # --repeat turned live statistics on (a twentieth of 2 s): each file carries its
    # interval histograms.
    run = nhbench.load_result(fast[0])
    assert run.options.stats_interval == pytest.approx(0.1)
    assert len(run.timeline) >= 15 and all(r.hdr_histogram for r in run.timeline)

    proc = nhbench_cli("compare", str(fast_dir), str(slow_dir), "--fail-on-regression")
    assert proc.returncode == REGRESSED, proc.stdout + proc.stderr
    assert "4 baseline runs against 4 candidate runs" in proc.stdout
    p50 = next(line for line in proc.stdout.splitlines() if line.startswith("p50"))
    assert p50.endswith("regressed")

    proc = nhbench_cli("compare", str(fast_dir), str(slow_dir), "--output", "json")
    assert proc.returncode == 0, proc.stderr  # a regression fails only when asked
    document = json.loads(proc.stdout)
    verdicts = {s["name"]: s for s in document["statistics"]}
    assert verdicts["p50"]["verdict"] == "regressed"
    assert verdicts["p50"]["p_value"] < 0.05
    assert verdicts["p50"]["low"] > 0.003
    assert "p50" in document["regressed"]

    # The other way round: improved, and nothing regressed, so 0 with the flag.
    proc = nhbench_cli("compare", str(slow_dir), str(fast_dir), "--fail-on-regression")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert next(line for line in proc.stdout.splitlines()
                if line.startswith("p50")).endswith("improved")

    # One file a side: the block bootstrap, reproducible with the same seed.
    one = [nhbench_cli("compare", str(fast[0]), str(fast[1]), "--output", "json",
                       "--seed", "3") for _ in range(2)]
    assert one[0].returncode == 0 and one[0].stdout == one[1].stdout
    assert json.loads(one[0].stdout)["method"].startswith("circular block bootstrap")


def test_nighthawk_files_compare() -> None:
    proc = nhbench_cli("compare", NIGHTHAWK, NIGHTHAWK)
    assert proc.returncode == 0, proc.stderr
    assert "note: not every run has interval histograms" in proc.stdout


@pytest.mark.parametrize(("args", "message"), [
    (["/nonexistent.json", NIGHTHAWK], "baseline: cannot load result '/nonexistent.json'"),
    ([NIGHTHAWK, str(DATA / "help")], "the directory holds no .json result file"),
    ([NIGHTHAWK, str(DATA / "nighthawk" / "percentile-column-overflow.json")],
     "candidate: cannot load result"),
    ([NIGHTHAWK, NIGHTHAWK, "--output", "yaml"], "--output: must be human or json"),
    ([NIGHTHAWK, NIGHTHAWK, "--confidence", "100%"], "--confidence: must be in"),
    ([NIGHTHAWK, NIGHTHAWK, "--confidence", "nan"], "--confidence: must be in"),
    ([NIGHTHAWK, NIGHTHAWK, "--resamples", "10"], "--resamples: must be in"),
    ([NIGHTHAWK, NIGHTHAWK, "--resamples", "1500.5"], "--resamples: not a whole number"),
    ([NIGHTHAWK, NIGHTHAWK, "--seed", "-1"], "--seed: must not be negative"),
    ([NIGHTHAWK, NIGHTHAWK, "--block-length", "0"], "--block-length: must be at least 1"),
])
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    proc = nhbench_cli("compare", *args)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert len(proc.stderr.splitlines()) == 1 and message in proc.stderr, proc.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["--repeat", "3"], "--repeat: needs --output-dir DIR"),
    (["--repeat", "0", "--output-dir", "."], "--repeat: must be in 1..10000"),
    (["--repeat", "x", "--output-dir", "."], "--repeat: not a whole number"),
    (["--repeat", "2", "--output-dir", ".", "--output", "x.json"], "mutually exclusive"),
])
def test_repeat_refusals_send_nothing(args: list[str], message: str) -> None:
    with nhbench.TestServer() as server:
        proc = nhbench_cli("run", server.url, "--duration", "1s", *args)
        served = server.stats()
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert len(proc.stderr.splitlines()) == 1
    assert served["connections_total"] == 0
