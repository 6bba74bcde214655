"""docs/options.md's option tables are the ones the models generate now."""

from __future__ import annotations

from pathlib import Path

import pytest

from nhbench.options import Options, markdown_table, render_option_docs

DOC = Path(__file__).resolve().parent.parent / "docs" / "options.md"
REFRESH = "python -m nhbench.options.docs docs/options.md"


def test_option_tables_are_up_to_date() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert render_option_docs(text) == text, (
        f"docs/options.md is stale: the option tables differ from the models; run {REFRESH}"
    )


def test_table_has_one_row_per_flag() -> None:
    table = markdown_table(Options)
    # Fortio's spellings that mean the same follow nhbench's own; -qps and -p are no
    # aliases (Fortio's total rate and percentiles).
    assert "| `--rps` | `N` | 5 |" in table
    assert "| `--request-header`, `-H` |" in table
    assert "`--protocol`, `--h2 (= http2)`, `-h2 (= http2)`" in table
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    assert len(rows) == len(Options.model_fields)


def test_missing_markers_are_an_error() -> None:
    with pytest.raises(ValueError, match="BEGIN nhbench run options"):
        render_option_docs("# no markers\n")
