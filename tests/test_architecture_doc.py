"""docs/architecture.md stays true to the tree, both ways.

1. Every module and package under src/nhbench, and every file and folder under csrc/*/
   (plus csrc/nhb.h), is mentioned in docs/architecture.md: as an entry of the tree at its
   top (a name on a line indented under its folder's line), by its path anywhere
   (``sweep/_loop.py``, ``client/pool.c``), or by its file name (``_loop.py``) or module
   name (``_loop``) as a word; outside the tree, a name that more than one package uses
   (``_common``, ``_models``...) counts only with its package (``report/_common.py``). A glob
   in the doc (``fuzz_*.c``) mentions every file it matches.
2. Every path the doc mentions (a word ending in a source extension or in ``/``) exists in
   the repository, found by its tail (``client/client.h`` is csrc/client/client.h). Words
   with a placeholder (``<name>``) or a glob are recipes, not paths. Files of other
   projects and the names of output files are listed in NOT_OURS.

To fix a failure after moving code: add the new file's name to the tree at the top of the
doc (a line, or the list on its package's line), or remove the name that no longer exists.
"""

from __future__ import annotations

import fnmatch
import re
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "architecture.md"
PACKAGE = REPO / "src" / "nhbench"
CSRC = REPO / "csrc"
SKIP_DIRS = {"__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".git", "build"}
# Extensions of the files the doc names as paths.
EXTENSIONS = ("py", "pyi", "c", "h", "cpp", "hpp", "cmake", "j2", "md", "toml", "binpb",
              "proto", "dict", "so")
# Paths the doc names that are not files of this repository: Nighthawk's own sources, the
# files a run or a sweep writes, and the compiled module (built, not checked in).
NOT_OURS = {
    "nighthawk/client/output.proto",
    "options.proto",
    "_core.*.so",
}

# A path: a word ending in one of EXTENSIONS, or a folder, a word ending in "/" before a
# space or punctuation (``cli/``), not a slash between words (``TCP/UDP``).
_PATH_WORD = re.compile(
    r"(?<![\w/.-])[A-Za-z0-9_.*<>-][A-Za-z0-9_.*<>/-]*"
    r"(?:\.(?:" + "|".join(EXTENSIONS) + r")\b|/(?=[\s`),:;]|$))", re.MULTILINE)


def _doc() -> str:
    return DOC.read_text(encoding="utf-8")


def _walk(root: Path) -> list[Path]:
    out = []
    for path in sorted(root.rglob("*")):
        if SKIP_DIRS.intersection(path.relative_to(REPO).parts):
            continue
        out.append(path)
    return out


def _python_entries() -> list[tuple[str, str]]:
    """(path relative to src/nhbench, name) of every module and package; ``__init__.py``
    is its package's entry."""
    entries = []
    for path in _walk(PACKAGE):
        rel = path.relative_to(PACKAGE).as_posix()
        if path.is_dir() and (path / "__init__.py").exists():
            entries.append((rel + "/", path.name))
        elif path.suffix in (".py", ".pyi") and path.name != "__init__.py":
            entries.append((rel, path.stem))
    return entries


def _csrc_entries() -> list[tuple[str, str]]:
    """(path relative to csrc, name): csrc/nhb.h, and every file and folder directly under a
    folder of csrc (the folders of seeds and regressions count as one entry each)."""
    entries = [("nhb.h", "nhb.h")]
    for folder in sorted(p for p in CSRC.iterdir() if p.is_dir()):
        entries.append((folder.name + "/", folder.name))
        for path in sorted(folder.iterdir()):
            if path.name in SKIP_DIRS:
                continue
            rel = path.relative_to(CSRC).as_posix()
            entries.append((rel + "/" if path.is_dir() else rel, path.name))
    return entries


def _tree_paths(doc: str) -> set[str]:
    """The paths the tree at the top of the doc lists, resolved through its indentation:
    a name ending in "/" opens a folder for the lines indented two more under it; the
    names are the comma-separated words before the description (two spaces or more)."""
    block = doc.split("```", 2)[1]
    paths: set[str] = set()
    folders: dict[int, str] = {-2: ""}
    for line in block.splitlines()[1:]:
        indent = len(line) - len(line.lstrip(" "))
        if not line.strip() or indent % 2 or indent - 2 not in folders or indent > 8:
            continue  # a description's continuation, deeper than any name
        names_part = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]
        for name in (n.strip() for n in re.split(r"[,+]| / ", names_part)):
            if not name or " " in name:
                continue
            path = folders[indent - 2] + name
            paths.add(path)
            if name.endswith("/"):
                folders = {k: v for k, v in folders.items() if k < indent}
                folders[indent] = path
    return paths


def _mentioned(doc: str, rel: str, name: str, ambiguous: set[str],
               tree: set[str] | None = None) -> bool:
    bare = rel.rstrip("/")
    if tree is not None and any(t == rel or t.endswith("/" + rel) for t in tree):
        return True
    stem = bare.rsplit("/", 1)[-1]
    # By path: the whole relative path, with or without the extension or the slash.
    without_ext = bare.rsplit(".", 1)[0] if "." in stem else bare
    for form in {bare, without_ext}:
        if "/" in form and re.search(r"(?<![\w/])" + re.escape(form) + r"(?![\w])", doc):
            return True
    if name in ambiguous:
        return False
    forms = {stem, name}
    if any(re.search(r"(?<![\w.])" + re.escape(f) + r"(?![\w])", doc) for f in forms):
        return True
    globs = {w for w in re.findall(r"[A-Za-z0-9_.]*\*[A-Za-z0-9_.*]*", doc) if w != "*"}
    return any(fnmatch.fnmatchcase(stem, g) for g in globs)


def test_every_module_and_csrc_file_is_mentioned() -> None:
    doc = _doc()
    tree = _tree_paths(doc)
    missing = []
    for root, entries in (("src/nhbench/", _python_entries()), ("csrc/", _csrc_entries())):
        counts = Counter(name for _, name in entries)
        ambiguous = {name for name, n in counts.items() if n > 1}
        missing += [root + rel for rel, name in entries
                    if not _mentioned(doc, rel, name, ambiguous, tree)]
    assert missing == [], (
        "not mentioned in docs/architecture.md (add each to its tree, by name or by path "
        f"when the name is not unique): {missing}")


def _repo_paths() -> list[str]:
    paths = []
    for path in _walk(REPO):
        rel = path.relative_to(REPO).as_posix()
        paths.append(rel + "/" if path.is_dir() else rel)
    return paths


def test_every_path_the_doc_mentions_exists() -> None:
    paths = _repo_paths()
    words = set(_PATH_WORD.findall(_doc()))
    dangling = []
    for word in sorted(words):
        if word in NOT_OURS or "<" in word or "*" in word:
            continue
        if not any(p == word or p.endswith("/" + word) for p in paths):
            dangling.append(word)
    assert dangling == [], f"docs/architecture.md names paths that do not exist: {dangling}"


def test_the_rules_can_fail() -> None:
    # A module the doc does not name, an ambiguous name given without its package, and a
    # path that does not exist are each caught.
    doc = "sweep/ _loop.py report/_common csrc/client/pool.c"
    assert _mentioned(doc, "sweep/_loop.py", "_loop", set())
    assert not _mentioned(doc, "sweep/_plan.py", "_plan", set())
    assert _mentioned(doc, "report/_common.py", "_common", {"_common"})
    assert not _mentioned(doc, "sources/_common.py", "_common", {"_common"})
    assert _mentioned(doc, "client/pool.c", "pool.c", set())
    assert _mentioned("fuzz_*.c", "fuzz/fuzz_server.c", "fuzz_server.c", set())
    assert _PATH_WORD.findall("see `client/nosuch.c` and sweep/") == ["client/nosuch.c", "sweep/"]
    tree = _tree_paths("```\nsrc/x/\n  a.py, b/   text\n    _common.py  text\n          c.py\n```")
    assert tree == {"src/x/", "src/x/a.py", "src/x/b/", "src/x/b/_common.py"}
    assert _mentioned("", "b/_common.py", "_common", {"_common"}, tree)
    assert not _mentioned("", "a/_common.py", "_common", {"_common"}, tree)
