"""The repository's text speaks for itself: no comment, docstring, doc or help text refers to
one of the project's own issues by its number (the word and a number, in any spelling:
singular or plural, with a space, "#", "-" or "_"), since a reader of the repository cannot
look those up; the text gives the reason or names the capability instead. References to
OTHER projects' trackers stay: a URL (".../issues/N") or an issue named with its project
right before it (nghttp2's, Nighthawk's, "upstream").
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# The trees and top-level files of the project's own text; generated and vendored output
# (build trees, benchmarks/out, caches) is not the project's text.
TREES = ("src", "csrc", "tests", "docs", "benchmarks", "cmake", "proto", "scenarios")
TOP_FILES = ("README.md", "noxfile.py", "dev", "CMakeLists.txt", "pyproject.toml")
SUFFIXES = frozenset({".py", ".pyi", ".md", ".c", ".h", ".cc", ".cpp", ".hpp", ".txt", ".toml",
                      ".cmake", ".sh", ".proto", ".yaml", ".yml", ".cfg", ".ini"})
SKIP_DIRS = frozenset({"__pycache__", "out", "build", "_skbuild", ".nox", ".mypy_cache",
                       ".ruff_cache", ".pytest_cache"})

# The word and a number; "_" and "-" also catch test and file names.
_ISSUE = re.compile(r"(?<![A-Za-z0-9])issues?[ _-]?#?\d+", re.IGNORECASE)
# What stands right before an upstream reference: another project's name (optionally
# possessive, optionally "GitHub"), or "upstream".
_UPSTREAM_BEFORE = re.compile(
    r"(?:\b(?:upstream|nghttp2|nghttp3|ngtcp2|llhttp|libuv|openssl|gnutls|boringssl|"
    r"nighthawk|envoy|fortio|cpython|python|pybind11|aioquic|grpc|grpcio|ray|curl|nginx|"
    r"h2load|wrk|oha|valgrind|glibc|linux|pytest|pydantic|cmake|hdrhistogram|chromium|"
    r"selenium|squid|tinyproxy)(?:'s)?(?:\s+github)?\s+)$", re.IGNORECASE)
# Data that happens to contain the words: a result file's label, kept as written when that
# file was recorded (tests/data/nhbench-json-earlier-format.json).
_ALLOWED_LINES = {
    ("tests/test_load_result_nighthawk.py", 'old.options.label == ("before", "issue-12")'),
}


def bare_issue_references(line: str) -> list[str]:
    """The references to the project's own issues by number in ``line``."""
    found = []
    for match in _ISSUE.finditer(line):
        start = match.start()
        if re.search(r"https?://\S*$", line[:start]) or line[start - 1:start] == "/":
            continue  # part of a URL (".../issues/123")
        if _UPSTREAM_BEFORE.search(line[:start]):
            continue
        found.append(match.group(0))
    return found


def project_text_files() -> list[Path]:
    files = [ROOT / name for name in TOP_FILES if (ROOT / name).is_file()]
    for tree in TREES:
        for path in sorted((ROOT / tree).rglob("*")):
            relative = path.relative_to(ROOT).parts
            if (path.is_file() and path.suffix in SUFFIXES
                    and not SKIP_DIRS.intersection(relative[:-1])):
                files.append(path)
    return files


@pytest.mark.parametrize(("line", "expected"), [
    ("# Since issue 12 the histograms are in the nhbench entry.", ["issue 12"]),
    ('"""Issue 13: ``--version`` on every subcommand."""', ["Issue 13"]),
    ("(the scenario of the issues 12 and 13 checks)", ["issues 12"]),
    ("see issue #9's fixes", ["issue #9"]),
    ("an issue-16 change", ["issue-16"]),
    ("def test_json_written_before_issue_12_still_loads():", ["issue_12"]),
    ("the same as nghttp2 issue #123 describes", []),
    ("Nighthawk's issue 1042 (its GitHub issue)", []),
    ("upstream issue 7 is open", []),
    ("https://github.com/nghttp2/nghttp2/issues/123", []),
    ("an issue with the peer, and the issue's scenario", []),
    ("the tissue 12 samples", []),
])
def test_the_matcher(line: str, expected: list[str]) -> None:
    assert bare_issue_references(line) == expected


def test_the_trees_are_read() -> None:
    files = {path.relative_to(ROOT).as_posix() for path in project_text_files()}
    # One file of each kind the rule is about, so that a rename of the trees cannot leave the
    # test reading nothing.
    for expected in ("README.md", "noxfile.py", "docs/architecture.md", "csrc/nhb.h",
                     "src/nhbench/__init__.py", "tests/test_repo_hygiene.py",
                     "benchmarks/peer_compare.py"):
        assert expected in files


def test_no_bare_issue_numbers() -> None:
    problems = []
    for path in project_text_files():
        if path == Path(__file__).resolve():
            continue  # the matcher's own examples
        relative = path.relative_to(ROOT).as_posix()
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # binary data under a text suffix is not prose
        for number, line in enumerate(text.splitlines(), 1):
            if any(relative == p and allowed in line for p, allowed in _ALLOWED_LINES):
                continue
            for found in bare_issue_references(line):
                problems.append(f"{relative}:{number}: {found!r}: {line.strip()[:100]}")
    assert not problems, (
        "the project's issues are not readable from the repository: give the reason or the "
        "capability instead of the number\n" + "\n".join(problems))
