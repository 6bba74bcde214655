"""``nhbench run --output-dir DIR``: auto-named results, Fortio's ``-a`` naming, never an
overwrite. Real runs against the real test server; needs the compiled extension."""

from __future__ import annotations

import json
import os
import re
import socket
from datetime import datetime, timezone
from pathlib import Path

import pytest
from support.cli import nhbench_cli as cli

import nhbench
from nhbench.outputs._output_dir import result_id


# Values worked out by hand from Fortio's GenID (periodic/periodic.go): runs of characters
# other than [A-Za-z0-9] become one "_", none at the end, cut to 96 characters.
@pytest.mark.parametrize(("labels", "expected"), [
    ("", "2024-05-01-120304"),
    ("ci", "2024-05-01-120304_ci"),
    ("my run/1", "2024-05-01-120304_my_run_1"),
    ("  a -- b  ", "2024-05-01-120304_a_b"),
    ("127.0.0.1:8080/ , host", "2024-05-01-120304_127_0_0_1_8080_host"),
    ("été", "2024-05-01-120304_t"),
    ("///", "2024-05-01-120304"),
    ("x" * 200, "2024-05-01-120304_" + "x" * 78),
])
def test_result_id_follows_fortio(labels: str, expected: str) -> None:
    start = datetime(2024, 5, 1, 12, 3, 4, 900000, tzinfo=timezone.utc).timestamp()
    assert result_id(start, labels) == expected
    assert len(result_id(start, labels)) <= 96


def test_runs_build_up_a_directory(server: nhbench.TestServer, tmp_path: Path) -> None:
    directory = tmp_path / "new" / "runs"  # created, parents too
    paths = []
    for _ in range(2):
        proc = cli("run", server.url, "--rps", "100", "--duration", "1", "--output-format",
                   "json", "--output-dir", str(directory), "--label", "smoke test")
        assert proc.returncode == 0, proc.stderr
        # stdout is the path written and nothing else.
        assert proc.stdout.endswith("\n") and proc.stdout.count("\n") == 1
        paths.append(Path(proc.stdout.strip()))
    assert all(p.parent == directory for p in paths)
    assert re.fullmatch(r"\d{4}-\d\d-\d\d-\d{6}_smoke_test\.json", paths[0].name)
    assert paths[0] != paths[1]
    assert sorted(p.name for p in directory.iterdir()) == sorted(p.name for p in paths)
    for path in paths:
        result = nhbench.Result.model_validate_json(path.read_text())
        assert result.counters["benchmark.http_2xx"] > 0
        start = result.global_result.execution_start
        assert start is not None
        assert path.name.startswith(start.astimezone(timezone.utc).strftime("%Y-%m-%d-%H%M%S"))


def test_a_taken_name_gets_a_suffix(server: nhbench.TestServer, tmp_path: Path) -> None:
    # Every name the run could get (any second around now) is taken beforehand.
    now = datetime.now(timezone.utc).timestamp()
    taken = {}
    for second in range(-5, 30):
        name = result_id(now + second, "same") + ".txt"
        (tmp_path / name).write_text("keep me\n")
        taken[name] = "keep me\n"
    proc = cli("run", server.url, "--rps", "100", "--duration", "1", "--output-dir",
               str(tmp_path), "--label", "same")
    assert proc.returncode == 0, proc.stderr
    written = Path(proc.stdout.strip())
    assert written.name.endswith("_same-1.txt")  # human: .txt
    assert written.read_text().strip() and written.read_text() != "keep me\n"
    for name, text in taken.items():
        assert (tmp_path / name).read_text() == text
    # No temporary file is left.
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_default_labels_are_fortio_s(server: nhbench.TestServer, tmp_path: Path) -> None:
    proc = cli("run", server.url, "--rps", "100", "--duration", "1", "--output-format",
               "json", "--output-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    host = socket.gethostname().split(".", 1)[0]
    short = server.url.removeprefix("http://")
    expected_tail = result_id(0, f"{short} , {host}")[len("1970-01-01-000000"):]
    assert Path(proc.stdout.strip()).name.endswith(expected_tail + ".json")
    json.loads(Path(proc.stdout.strip()).read_text())


@pytest.mark.parametrize("args, message", [
    (("--output", "x.json"), "nhbench: error: --output-dir: mutually exclusive with --output"),
    ((), "exists and is not a directory"),
])
def test_bad_input_is_one_line_exit_2(server: nhbench.TestServer, tmp_path: Path,
                                      args: tuple[str, ...], message: str) -> None:
    target = tmp_path / "file"
    target.write_text("")
    proc = cli("run", server.url, "--output-dir", str(target), *args)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and message in proc.stderr, proc.stderr
    assert server.stats()["requests"] == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_unwritable_directory(server: nhbench.TestServer, tmp_path: Path) -> None:
    if os.geteuid() == 0:
        # root writes anywhere; a path under a regular file cannot be created by anyone.
        bad = tmp_path / "file" / "sub"
        (tmp_path / "file").write_text("")
    else:
        bad = tmp_path / "ro" / "sub"
        (tmp_path / "ro").mkdir(mode=0o555)
    proc = cli("run", server.url, "--output-dir", str(bad))
    assert proc.returncode == 2
    assert proc.stderr.startswith("nhbench: error: --output-dir: cannot create directory")
    assert proc.stderr.count("\n") == 1
    assert server.stats()["requests"] == 0
