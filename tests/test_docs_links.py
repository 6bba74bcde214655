"""Every relative link and #anchor in README.md and docs/*.md resolves.

Anchors follow GitHub's rule for heading ids: the heading's text (Markdown emphasis, code
ticks and link targets removed), lowercased, every character that is not a letter, digit,
space, hyphen or underscore dropped, spaces turned into hyphens, and "-1", "-2"... added to
repeats. Links inside code blocks and spans are not links, and are skipped.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^\s*(```|~~~)")
_INLINE_LINK = re.compile(r"(?<!!)\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_IMAGE_LINK = re.compile(r"!\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_HTML_ID = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"", re.IGNORECASE)
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def _prose_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, text) of the lines outside fenced code blocks."""
    lines: list[tuple[int, str]] = []
    fence: str | None = None
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        match = _FENCE.match(line)
        if match:
            if fence is None:
                fence = match.group(1)
            elif match.group(1) == fence:
                fence = None
            continue
        if fence is None:
            lines.append((number, line))
    return lines


def github_slug(heading: str) -> str:
    text = _CODE_SPAN.sub(lambda m: m.group(2), heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link's text stays
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


@cache
def anchors(path: Path) -> frozenset[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _number, line in _prose_lines(path):
        found.update(m.group(1) for m in _HTML_ID.finditer(line))
        heading = _HEADING.match(line)
        if heading is None:
            continue
        slug = github_slug(heading.group(2))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return frozenset(found)


def links(path: Path) -> list[tuple[int, str]]:
    found = []
    for number, line in _prose_lines(path):
        prose = _CODE_SPAN.sub("", line)
        for pattern in (_INLINE_LINK, _IMAGE_LINK):
            found.extend((number, m.group(1)) for m in pattern.finditer(prose))
        reference = _REFERENCE.match(prose)
        if reference:
            found.append((number, reference.group(1)))
    return found


def _broken(path: Path) -> list[str]:
    problems = []
    for number, target in links(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):
            continue  # http:, https:, mailto: ...
        file_part, _, anchor = target.partition("#")
        destination = (path.parent / file_part).resolve() if file_part else path
        where = f"{path.relative_to(ROOT)}:{number}: {target}"
        if not destination.exists():
            problems.append(f"{where}: no such file")
            continue
        if anchor and destination.suffix == ".md" and anchor not in anchors(destination):
            problems.append(f"{where}: no heading with the anchor #{anchor}")
    return problems


def test_the_slug_rule() -> None:
    assert github_slug("Files nhbench writes") == "files-nhbench-writes"
    assert github_slug("`--output-dir` (Fortio's `-a`)") == "--output-dir-fortios--a"
    assert github_slug("gRPC: the client") == "grpc-the-client"
    assert github_slug("Start-up") == "start-up"


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    page = tmp_path / "a.md"
    (tmp_path / "b.md").write_text("# Title\n\n## A section\n")
    page.write_text("[ok](b.md#a-section) [gone](b.md#old-section) [none](c.md)\n"
                    "```\n[in code](nowhere.md)\n```\n`[span](nowhere.md)`\n")
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        assert _broken(page) == ["a.md:1: b.md#old-section: no heading with the anchor "
                                 "#old-section", "a.md:1: c.md: no such file"]
    finally:
        ROOT = saved


@pytest.mark.parametrize("path", DOCS, ids=[str(p.relative_to(ROOT)) for p in DOCS])
def test_every_relative_link_resolves(path: Path) -> None:
    assert _broken(path) == []
