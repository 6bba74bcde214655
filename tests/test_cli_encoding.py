"""Standard streams whose encoding cannot hold the report's text (PYTHONIOENCODING=ascii).

A non-ASCII label used to end the run with a UnicodeEncodeError traceback when the report
was written; the CLI escapes such characters as \\uXXXX instead (JSON's own escape, so a
JSON report stays valid and decodes to the same label).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import nhbench

SRC = str(Path(nhbench.__file__).resolve().parent.parent)
LABEL = "caf\u00e9-\u2603-\U0001f600"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONIOENCODING": "ascii",
           "PYTHONPATH": os.pathsep.join(filter(None, [SRC, os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "nhbench", *args], capture_output=True,
                          timeout=120, env=env, stdin=subprocess.DEVNULL, check=False,
                          text=True, encoding="ascii")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("output_format", ["json", "human", "yaml"])
def test_non_ascii_label_on_an_ascii_stdout(server: nhbench.TestServer,
                                            output_format: str) -> None:
    proc = _cli("run", server.url, "--rps", "20", "--duration", "0.3s", "--label", LABEL,
                "--output-format", output_format)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 0, proc.stderr
    assert "\\u00e9" in proc.stdout
    if output_format == "json":
        # Valid JSON whose label is the one given.
        assert json.loads(proc.stdout)["options"]["labels"] == [LABEL]


def test_non_ascii_in_an_error_line_on_an_ascii_stderr() -> None:
    proc = _cli("run", "http://127.0.0.1/\u00e9 x")
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.splitlines()) == 1
