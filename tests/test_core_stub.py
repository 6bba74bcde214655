"""The type stub src/nhbench/_core.pyi declares exactly what the compiled module exports.

mypy reads only the stub, so a name the binding adds without a stub entry is invisible to
type checking, and a stub entry the binding dropped type-checks code that fails at run time.
The stub is parsed with ast and compared with dir() of the real module, both ways: module
constants, functions with their argument names, classes with their public methods and
attributes. TypedDict classes exist only in the stub (they describe the dicts the binding
returns) and are checked against the keys the binding really produces where that is cheap.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Any

import pytest

from nhbench._run import load_core

STUB = Path(__file__).resolve().parents[1] / "src" / "nhbench" / "_core.pyi"
# Module attributes every extension has; they are not part of the binding.
MODULE_DUNDERS = {"__doc__", "__file__", "__loader__", "__name__", "__package__", "__spec__"}


def _is_typeddict(node: ast.ClassDef) -> bool:
    return any(isinstance(b, ast.Name) and b.id == "TypedDict" for b in node.bases)


def _parse_stub() -> dict[str, Any]:
    tree = ast.parse(STUB.read_text(encoding="utf-8"))
    stub: dict[str, Any] = {"constants": set(), "functions": {}, "classes": {}, "typeddicts": {}}
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            stub["constants"].add(node.target.id)
        elif isinstance(node, ast.FunctionDef):
            stub["functions"][node.name] = [a.arg for a in node.args.args]
        elif isinstance(node, ast.ClassDef):
            members: dict[str, list[str] | None] = {}
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    members[item.name] = [a.arg for a in item.args.args if a.arg != "self"]
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    members[item.target.id] = None
            kind = "typeddicts" if _is_typeddict(node) else "classes"
            stub[kind][node.name] = members
    return stub


def _split_top_level(text: str) -> list[str]:
    """Split pybind11's argument list at the commas outside brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if text[start:].strip():
        parts.append(text[start:])
    return [p.strip() for p in parts]


def _runtime_args(obj: Any) -> list[str]:
    """Argument names from pybind11's signature line, `name(a: T, b: U = x) -> R`."""
    first = (obj.__doc__ or "").strip().splitlines()[0]
    inner = first[first.index("(") + 1:first.rindex(")")]
    names = [p.split(":")[0].split("=")[0].strip() for p in _split_top_level(inner)]
    return [n for n in names if n != "self"]


@pytest.fixture(scope="module")
def core() -> Any:
    return load_core()


@pytest.fixture(scope="module")
def stub() -> dict[str, Any]:
    return _parse_stub()


def test_module_level_names_match_both_ways(core: Any, stub: dict[str, Any]) -> None:
    exported = set(dir(core)) - MODULE_DUNDERS
    declared = stub["constants"] | set(stub["functions"]) | set(stub["classes"])
    assert exported - declared == set(), "exported by the binding, missing from _core.pyi"
    assert declared - exported == set(), "declared in _core.pyi, not exported by the binding"


def test_kinds_match(core: Any, stub: dict[str, Any]) -> None:
    for name in stub["constants"]:
        value = getattr(core, name)
        assert not callable(value), f"{name} is declared a constant but is callable"
    for name in stub["functions"]:
        assert callable(getattr(core, name)) and not inspect.isclass(getattr(core, name)), name
    for name in stub["classes"]:
        assert inspect.isclass(getattr(core, name)), name


def test_function_arguments_match(core: Any, stub: dict[str, Any]) -> None:
    for name, args in stub["functions"].items():
        assert _runtime_args(getattr(core, name)) == args, name


def test_class_members_match_both_ways(core: Any, stub: dict[str, Any]) -> None:
    for cls_name, members in stub["classes"].items():
        cls = getattr(core, cls_name)
        public = {m for m in dir(cls) if not m.startswith("_")}
        declared = {m for m in members if not m.startswith("_")}
        assert public - declared == set(), f"{cls_name}: exported, missing from _core.pyi"
        assert declared - public == set(), f"{cls_name}: declared in _core.pyi, not exported"
        for member, args in members.items():
            if args is None:  # an attribute: a property on the pybind11 class
                assert isinstance(inspect.getattr_static(cls, member), property), member
            else:
                assert _runtime_args(getattr(cls, member)) == args, f"{cls_name}.{member}"


def test_server_stats_dict_keys_are_the_server_statistics(
        core: Any, stub: dict[str, Any]) -> None:
    keys = list(stub["typeddicts"]["ServerStatsDict"])
    assert keys == list(core.SERVER_STATS)
    assert list(core.Server({}).stats()) == keys


def test_histogram_dict_keys_are_what_the_recorder_returns(
        core: Any, stub: dict[str, Any]) -> None:
    assert list(core.histogram_counts([1, 2, 3])) == list(stub["typeddicts"]["HistogramDict"])


def test_the_comparison_can_fail(core: Any) -> None:
    # A stub without one of the binding's names, or with a name the binding lacks, is caught:
    # the same comparison on an edited copy of the parsed stub.
    stub = _parse_stub()
    stub["functions"].pop(next(iter(stub["functions"])))
    with pytest.raises(AssertionError, match="missing from _core.pyi"):
        test_module_level_names_match_both_ways(core, stub)
    stub = _parse_stub()
    stub["classes"]["Server"]["restart"] = []
    with pytest.raises(AssertionError, match="not exported"):
        test_class_members_match_both_ways(core, stub)
