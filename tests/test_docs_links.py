"""Every relative link and #anchor in README.md and docs/*.md resolves, and every reference
to a section in words (docs/X.md, "Section") in the docs, src/ and csrc/ names a heading.

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


# ---- references in prose and code: docs/X.md, "Section" and docs/X.md#anchor ----------------
#
# Comments and docs name a section in words more often than by link: `docs/engine.md,
# "Shaping the schedule"`, `(docs/benchmarks.md "Start-up")`, `docs/options.md#nhbench-run`,
# and a comment may wrap between the name and the section. A section named in words is the
# start of a heading's text (its code ticks dropped, any case) up to a space, parenthesis or
# colon: "Binding contract" names "## Binding contract (`nhbench._core`)".

# The code's comments and docstrings too: the package, the C and C++ core, the tests (this
# file's own examples aside), the benchmarks and the nox sessions.
SOURCES = [*DOCS, *sorted((ROOT / "src").rglob("*.py")),
           *sorted(p for p in (ROOT / "csrc").rglob("*") if p.suffix in {".c", ".h", ".cpp", ".hpp"}),
           *sorted(p for p in (ROOT / "tests").rglob("*.py") if p.name != "test_docs_links.py"),
           *sorted((ROOT / "benchmarks").rglob("*.py")), ROOT / "noxfile.py"]
#: What may stand between the parts of a wrapped reference: a comment's leader.
_LEADER = r"(?:\s*(?:\#|//|/?\*+)?\s*)"
_SECTION_REF = re.compile(
    r"(?<![\w/.-])(?:docs/)?(?P<file>[A-Za-z][\w-]*\.md)"
    r"(?:\#(?P<anchor>[\w-]+)"
    r"|(?P<sections>(?:(?:,|\s)" + _LEADER + r"(?:and" + _LEADER + r")?"
    r"\"[^\"\n]{1,120}(?:\n[^\"\n]{1,120})?\")+))")
_QUOTED = re.compile(r"\"([^\"]+)\"")


@cache
def heading_texts(path: Path) -> tuple[str, ...]:
    texts = []
    for _number, line in _prose_lines(path):
        heading = _HEADING.match(line)
        if heading is not None:
            text = _CODE_SPAN.sub(lambda m: m.group(2), heading.group(2))
            texts.append(" ".join(text.split()).lower())
    return tuple(texts)


def names_a_heading(path: Path, section: str) -> bool:
    wanted = " ".join(section.split()).lower()
    return any(text == wanted or (text.startswith(wanted) and text[len(wanted)] in " (:,;")
               for text in heading_texts(path))


def broken_references(path: Path, root: Path) -> list[str]:
    """Each reference in `path` to a section of root/docs/X.md (or root/README.md) that no
    heading there has."""
    problems = []
    text = path.read_text(encoding="utf-8", errors="replace")
    for match in _SECTION_REF.finditer(text):
        name = match.group("file")
        target = root / name if name == "README.md" else root / "docs" / name
        where = f"{path.relative_to(root)}:{text.count(chr(10), 0, match.start()) + 1}"
        if not target.exists():
            problems.append(f"{where}: {name}: no such file")
            continue
        if match.group("anchor"):
            if match.group("anchor") not in anchors(target):
                problems.append(f"{where}: {name}#{match.group('anchor')}: no such heading")
            continue
        for section in _QUOTED.findall(match.group("sections")):
            section = re.sub(r"\s*\n" + _LEADER, " ", section)
            if not names_a_heading(target, section):
                problems.append(f"{where}: {name}, {section!r}: no such heading")
    return problems


def test_a_broken_section_reference_is_found(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "b.md").write_text("# B\n\n## Binding contract (`_core`)\n\n## Start-up\n")
    source = tmp_path / "x.py"
    source.write_text('# see docs/b.md, "Binding contract" and (docs/b.md "Start-up")\n'
                      '# docs/b.md#start-up, docs/b.md, "Start", docs/b.md#gone\n'
                      '# (docs/b.md,\n#  "Old section") docs/c.md, "X"\n'
                      'paths = ["docs/b.md"]\n')
    assert broken_references(source, tmp_path) == [
        "x.py:2: b.md, 'Start': no such heading",
        "x.py:2: b.md#gone: no such heading",
        "x.py:3: b.md, 'Old section': no such heading",
        "x.py:4: c.md: no such file",
    ]


def test_every_section_reference_names_a_heading() -> None:
    problems = [problem for path in SOURCES for problem in broken_references(path, ROOT)]
    assert problems == [], "\n".join(problems)
    # The scan finds the references it is meant for (a pattern that matched nothing would
    # pass): the README's and the option modules' own.
    found = sum(1 for path in SOURCES for _ in _SECTION_REF.finditer(
        path.read_text(encoding="utf-8", errors="replace")))
    assert found > 50
