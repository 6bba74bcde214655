"""The migration tables of docs/options.md ("Nighthawk and Fortio flags"): generated from the
front-ends' `ForeignFlag` tables, and the file is never stale."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from nhbench.compat import ForeignFlag
from nhbench.compat._migration import (
    BEGIN,
    COMMANDS_BEGIN,
    COMMANDS_END,
    END,
    FORTIO_COMMANDS,
    TOOLS,
    Tool,
    command_flags_table,
    migration_tables,
    render_command_flags,
    render_migration,
)

ROOT = Path(__file__).resolve().parent.parent
OPTIONS_MD = ROOT / "docs" / "options.md"
FORTIO_MD = ROOT / "docs" / "fortio.md"
REFRESH = "python -m nhbench.compat.migration docs/options.md docs/fortio.md"


def test_docs_options_md_is_up_to_date() -> None:
    text = OPTIONS_MD.read_text(encoding="utf-8")
    assert render_migration(text) == text, (
        f"docs/options.md is stale: the migration tables differ from the front-ends' "
        f"tables; run {REFRESH}")


SAMPLE = (
    ForeignFlag(("-qps",), "float", "Queries Per Seconds", default="8",
                nhbench="--rps × connections"),
    ForeignFlag(("-httpbufferkb",), "kbytes", "Size of the buffer",
                refused="a Fortio buffer size with no counterpart here"),
    ForeignFlag(("-H",), "key:value", "Additional header", repeatable=True,
                nhbench="--request-header | as given", commands=("load", "curl")),
    ForeignFlag(("-p", "--protocol"), None, "HTTP version", nhbench="--protocol"),
)
TOOL = Tool("Sample (`sample`)", "nhbench.compat._no_such_table", "FLAGS", "nhbench sample")


def test_every_flag_is_one_row_with_its_fate() -> None:
    text = migration_tables({TOOL: SAMPLE})
    assert text.startswith("### Sample (`sample`)\n")
    assert "4 flags: 3 mapped (with the tool's meaning, through `nhbench sample`), 1 refused" \
        in text
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert rows == [
        "| `-qps` | `float` (default `8`) | Queries Per Seconds | --rps × connections |",
        "| `-httpbufferkb` | `kbytes` | Size of the buffer | refused: a Fortio buffer size "
        "with no counterpart here |",
        "| `-H` | `key:value`, repeatable | Additional header (load, curl) | "
        "--request-header \\| as given |",
        "| `-p`, `--protocol` | switch | HTTP version | --protocol |",
    ]


def test_every_front_end_has_its_table() -> None:
    # Each tool's records, as its front-end reads them: a flag the front-end gains appears
    # in the docs without a second list to keep.
    from nhbench.compat._fortio_flags import FORTIO_FLAGS
    from nhbench.compat._migration import _load
    from nhbench.compat._nighthawk import TEST_SERVER_FLAGS
    from nhbench.compat._nighthawk_flags import NIGHTHAWK_CLIENT_FLAGS

    assert [_load(tool) for tool in TOOLS] == [FORTIO_FLAGS, NIGHTHAWK_CLIENT_FLAGS,
                                               TEST_SERVER_FLAGS]


def test_render_replaces_only_between_the_markers() -> None:
    text = f"# Title\n\nbefore\n\n{BEGIN}\nold\n{END}\n\nafter\n"
    assert render_migration(text, "new\n") == f"# Title\n\nbefore\n\n{BEGIN}\nnew\n{END}\n\nafter\n"
    with pytest.raises(ValueError, match="BEGIN migration tables"):
        render_migration("# no markers\n")


def test_the_command_refreshes_a_stale_file(tmp_path: Path) -> None:
    stale = tmp_path / "options.md"
    stale.write_text(f"# Options\n\n{BEGIN}\nstale\n{END}\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "nhbench.compat.migration", str(stale)],
                          capture_output=True, text=True, timeout=60, check=True)
    assert proc.stdout == f"updated {stale}\n"
    assert stale.read_text(encoding="utf-8") == \
        f"# Options\n\n{BEGIN}\n{migration_tables()}{END}\n"


# ---- docs/fortio.md: the flags of each Fortio command ---------------------------------------


def test_docs_fortio_md_is_up_to_date() -> None:
    text = FORTIO_MD.read_text(encoding="utf-8")
    assert render_command_flags(text) == text, (
        f"docs/fortio.md is stale: its command flags differ from FORTIO_FLAGS; run {REFRESH}")


def test_every_command_a_flag_names_has_a_row() -> None:
    from nhbench.compat._fortio_flags import FORTIO_FLAGS

    named = {command for flag in FORTIO_FLAGS for command in flag.commands}
    assert named - set(FORTIO_COMMANDS) == set()


def test_each_command_lists_the_flags_that_name_it() -> None:
    text = command_flags_table(SAMPLE, ("load", "curl", "nc"))
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert rows == ["| `load` | `-H` |", "| `curl` | `-H` |", "| `nc` | none |"]
    assert "Every command: `-qps` `-p`." in text
    assert "Refused by every command (1): `-httpbufferkb`." in text


def test_the_command_refreshes_both_tables(tmp_path: Path) -> None:
    stale = tmp_path / "fortio.md"
    stale.write_text(f"# Fortio\n\n{COMMANDS_BEGIN}\nstale\n{COMMANDS_END}\n", encoding="utf-8")
    subprocess.run([sys.executable, "-m", "nhbench.compat.migration", str(stale)],
                   capture_output=True, text=True, timeout=60, check=True)
    assert stale.read_text(encoding="utf-8") == render_command_flags(
        f"# Fortio\n\n{COMMANDS_BEGIN}\n\n{COMMANDS_END}\n")
    assert "| `server` | `-M` `-P` " in stale.read_text(encoding="utf-8")
    with pytest.raises(ValueError, match="BEGIN fortio command flags"):
        render_command_flags("# no markers\n")
