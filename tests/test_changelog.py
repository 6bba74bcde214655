"""CHANGELOG.md keeps Keep a Changelog 1.1.0's form (docs/development.md, "Versions").

The title; ``## [Unreleased]`` first; then one ``## [X.Y.Z] - YYYY-MM-DD`` a release, newest
first (versions and dates both descending); under each, only the six kinds of change, each
once, each with at least one entry; every bracketed heading has its link reference at the
end and every reference is used; relative links and section references resolve.
"""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path

import pytest
from test_docs_links import anchors, broken_references, links

ROOT = Path(__file__).resolve().parents[1]
CHANGELOG = ROOT / "CHANGELOG.md"

KINDS = ("Added", "Changed", "Deprecated", "Removed", "Fixed", "Security")
_RELEASE = re.compile(r"^## \[(\d+)\.(\d+)\.(\d+)\] - (\d{4}-\d{2}-\d{2})$")
_REFERENCE = re.compile(r"^\[([^\]]+)\]: (\S+)$")


def problems(text: str) -> list[str]:
    """Everything in `text` that breaks the form, one line each."""
    found: list[str] = []
    lines = text.splitlines()
    if not lines or lines[0] != "# Changelog":
        found.append("the first line is not '# Changelog'")
    if sum(1 for line in lines if line.startswith("# ")) != 1:
        found.append("more than one title")
    versions: list[str] = []
    releases: list[tuple[tuple[int, int, int], date]] = []
    kinds: list[str] = []
    entries = 0
    references: dict[str, str] = {}

    def close_kind() -> None:
        if kinds and entries == 0:
            found.append(f"[{versions[-1]}] ### {kinds[-1]}: no entries")

    for line in lines:
        if line.startswith("## "):
            close_kind()
            kinds, entries = [], 0
            if line == "## [Unreleased]":
                if versions:
                    found.append("[Unreleased] is not the first section")
                versions.append("Unreleased")
                continue
            match = _RELEASE.match(line)
            if not match:
                found.append(f"not '## [X.Y.Z] - YYYY-MM-DD': {line!r}")
                continue
            number = (int(match[1]), int(match[2]), int(match[3]))
            try:
                day = date.fromisoformat(match[4])
            except ValueError:
                found.append(f"not a date: {line!r}")
                continue
            if releases and not (number < releases[-1][0] and day <= releases[-1][1]):
                found.append(f"not newest first: {line!r}")
            releases.append((number, day))
            versions.append(".".join(map(str, number)))
        elif line.startswith("### "):
            close_kind()
            kind, entries = line[4:], 0
            if not versions:
                found.append(f"{line!r} before any version")
            elif kind not in KINDS:
                found.append(f"[{versions[-1]}] {line!r}: not one of {', '.join(KINDS)}")
            elif kind in kinds:
                found.append(f"[{versions[-1]}] {line!r} twice")
            kinds.append(kind)
        elif line.startswith("- ") and kinds:
            entries += 1
        elif (match := _REFERENCE.match(line)) is not None:
            references[match[1]] = match[2]
    close_kind()
    if not versions or versions[0] != "Unreleased":
        found.append("no '## [Unreleased]' section first")
    for version in versions:
        if version not in references:
            found.append(f"[{version}] has no link reference")
    for name in references:
        if name not in versions and f"[{name}]" not in text.replace(f"[{name}]:", ""):
            found.append(f"[{name}]: a link reference nothing uses")
    return found


def test_the_changelog_keeps_the_form() -> None:
    assert problems(CHANGELOG.read_text(encoding="utf-8")) == []


def test_its_links_and_section_references_resolve() -> None:
    broken = []
    for number, target in links(CHANGELOG):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):
            continue
        file_part, _, anchor = target.partition("#")
        destination = ROOT / file_part
        if not destination.exists():
            broken.append(f"{number}: {target}: no such file")
        elif anchor and anchor not in anchors(destination):
            broken.append(f"{number}: {target}: no such heading")
    assert broken == []
    assert broken_references(CHANGELOG, ROOT) == []


GOOD = """# Changelog

## [Unreleased]

### Added

- a

## [0.2.0] - 2027-01-02

### Fixed

- b

## [0.1.0] - 2026-12-01

### Added

- c

[Unreleased]: x
[0.2.0]: y
[0.1.0]: z
"""


@pytest.mark.parametrize(("edit", "expected"), [
    (lambda t: t, None),
    (lambda t: t.replace("# Changelog", "# Changes"), "first line"),
    (lambda t: t.replace("## [0.2.0] - 2027-01-02", "## [0.2.0]"), "not '## [X.Y.Z]"),
    (lambda t: t.replace("0.2.0", "0.0.9"), "not newest first"),
    (lambda t: t.replace("2027-01-02", "2026-11-30"), "not newest first"),
    (lambda t: t.replace("### Fixed", "### Bugs"), "not one of"),
    (lambda t: t.replace("### Fixed\n\n- b", "### Fixed\n\n- b\n\n### Fixed\n\n- d"), "twice"),
    (lambda t: t.replace("- b\n", ""), "no entries"),
    (lambda t: t.replace("[0.1.0]: z\n", ""), "[0.1.0] has no link reference"),
    (lambda t: t + "[0.0.1]: w\n", "nothing uses"),
    (lambda t: t.replace("## [Unreleased]\n\n### Added\n\n- a\n\n", ""), "no '## [Unreleased]'"),
])
def test_a_broken_form_is_found(edit: object, expected: str | None) -> None:
    assert callable(edit)
    found = problems(edit(GOOD))
    if expected is None:
        assert found == []
    else:
        assert any(expected in line for line in found), found
