"""``nhbench transform`` as users run it: real ``python -m nhbench`` processes, files and
stdin, Nighthawk's own files (tests/data/nighthawk/) and nhbench's, good input and bad."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from nhbench import load_result
from nhbench._exceptions import ResultFileError
from nhbench._load import parse_json
from nhbench.outputs import (
    DOCUMENT_FORMATS,
    FORMAT_NAMES,
    FORMATS,
    OUTPUT_FORMATS,
    format_json,
    render_json,
)
from nhbench.outputs._nighthawk_human import format_nighthawk_human, render_nighthawk_human
from nhbench.outputs._output_dir import EXTENSIONS

DATA = Path(__file__).resolve().parent / "data"
JSON_GOLD = DATA / "nighthawk" / "output_formatter.json.gold"
MEDIUM_GOLD = DATA / "nighthawk" / "output_formatter.medium.proto.gold"
BEFORE = DATA / "nhbench-json-earlier-format.json"
FORTIO = DATA / "fortio" / "fortio-1.66.5-load.json"


def transform(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(__file__).resolve().parents[1] / "src"), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-m", "nhbench", "transform", *args], capture_output=True, text=True,
        input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL, timeout=120,
        env=env, check=False,
    )


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("nhbench: error: ")
    return lines[0]


def test_nighthawk_file_to_json_is_the_same_document() -> None:
    proc = transform("--output-format", "json", str(JSON_GOLD))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    # Nighthawk's document, as Nighthawk lays it out (one-space indentation), unchanged.
    assert json.loads(proc.stdout) == json.loads(JSON_GOLD.read_text())
    # Byte for byte what Nighthawk wrote: layout, key order, uint64 strings, and doubles as
    # protobuf prints them ("raw_pstdev": 1.1180339887498949, 17 digits where 15 would
    # not read back the same).
    assert proc.stdout == JSON_GOLD.read_text()


def test_stdin_and_dash_read_nighthawks_quirks() -> None:
    text = MEDIUM_GOLD.read_text()
    expected = format_json(parse_json(text))
    for args in (("--output-format", "json"), ("--output-format", "json", "-")):
        proc = transform(*args, stdin=text)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == expected
    # The repeated "labels" of the file were merged, the trailing comma dropped.
    assert json.loads(expected)["options"]["labels"] == ["label-a", "label-b", "Nighthawk"]


def test_nhbench_file_to_json_loads_back_equal(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    proc = transform("--output-format", "json", "--output", str(out), str(BEFORE))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    assert load_result(out) == load_result(BEFORE)
    assert out.read_text() == render_json(load_result(BEFORE))


def test_human_of_a_nighthawk_file_is_nighthawks_human_layout() -> None:
    # What nighthawk_output_transform --output-format human writes: Nighthawk's layout,
    # from the document as written (Nighthawk's own golden of that formatter).
    proc = transform("--output-format", "human", str(MEDIUM_GOLD))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == format_nighthawk_human(parse_json(MEDIUM_GOLD.read_text()))
    assert proc.stdout.startswith("Nighthawk - A layer 7 protocol benchmarking tool.\n\n")
    assert "Request start to response end (53 samples)\n" in proc.stdout


def test_human_of_nhbench_and_fortio_files_is_nhbenchs_report() -> None:
    for path, heading in ((BEFORE, "nhbench 0.1.0: GET "), (FORTIO, "fortio 1.66.5: GET ")):
        proc = transform("--output-format", "human", str(path))
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == load_result(path).render("human")
        assert proc.stdout.startswith(heading)


@pytest.mark.parametrize("path", [JSON_GOLD, MEDIUM_GOLD, FORTIO, BEFORE],
                         ids=["nighthawk", "nighthawk-medium", "fortio", "nhbench"])
def test_nighthawk_human_of_any_file(path: Path) -> None:
    proc = transform("--output-format", "nighthawk_human", str(path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Nighthawk - A layer 7 protocol benchmarking tool.\n\n")
    if path in (JSON_GOLD, MEDIUM_GOLD):
        # Nighthawk's file straight from its document, as Nighthawk would write it.
        assert proc.stdout == format_nighthawk_human(parse_json(path.read_text()))
    else:
        # Fortio's and nhbench's through their Result.
        assert proc.stdout == render_nighthawk_human(load_result(path))
        assert "Request start to response end (" in proc.stdout


@pytest.mark.parametrize("name", sorted(set(FORMATS) - {"human"}))
def test_every_nighthawk_format_from_a_nighthawk_file(name: str) -> None:
    # Each writes a Nighthawk file without a Result.
    proc = transform("--output-format", name, str(MEDIUM_GOLD))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip()


@pytest.mark.parametrize(("name", "golden"), [
    ("fortio", "output_formatter.medium.fortio.gold"),
    ("experimental_fortio_pedantic", "output_formatter.medium.fortio-noquirks.gold"),
])
def test_nighthawk_file_to_fortio_is_what_nighthawk_wrote(name: str, golden: str) -> None:
    # nighthawk_output_transform's job done by the command: Nighthawk's own fortio outputs
    # of its medium file, byte for byte (through a Result, the nanoseconds of StartTime
    # and the Jitter option would be lost).
    proc = transform("--output-format", name, str(MEDIUM_GOLD))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (DATA / "nighthawk" / golden).read_text()


def test_bad_json_is_one_line_with_line_and_column(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{\n "options": {},\n "results": [}\n')
    out = tmp_path / "out.json"
    proc = transform("--output-format", "json", "--output", str(out), str(bad))
    line = one_error_line(proc)
    assert str(bad) in line and "line 3 column 14" in line
    assert not out.exists()  # no partial output file
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.json"]
    # From stdin, the source is named too.
    line = one_error_line(transform("--output-format", "json", stdin="{"))
    assert "<stdin>" in line and "line 1 column 2" in line


def test_an_existing_output_file_survives_bad_input(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    out.write_text("previous\n")
    one_error_line(transform("--output-format", "json", "--output", str(out),
                             str(tmp_path / "missing.json")))
    assert out.read_text() == "previous\n"


def test_unknown_format_and_not_a_result(tmp_path: Path) -> None:
    line = one_error_line(transform("--output-format", "xml", str(JSON_GOLD)))
    assert "--output-format" in line and "'xml'" in line and "json" in line
    not_result = tmp_path / "list.json"
    not_result.write_text("[1, 2]")
    line = one_error_line(transform("--output-format", "json", str(not_result)))
    assert "not a result" in line
    line = one_error_line(transform("--output-format", "json", str(tmp_path / "nope.json")))
    assert "no such file" in line
    line = one_error_line(transform(str(JSON_GOLD)))  # --output-format is required
    assert "--output-format" in line


def test_human_of_a_nighthawk_file_nhbench_cannot_describe() -> None:
    # json.gold has no uri, so it has no Result (loading it said "options.uri: Field
    # required"); human of it is Nighthawk's layout, a function of the document: Nighthawk's
    # own golden of json.gold, byte for byte.
    proc = transform("--output-format", "human", str(JSON_GOLD))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert proc.stdout == (DATA / "nighthawk" / "output_formatter.txt.gold").read_text()
    with pytest.raises(ResultFileError, match="uri"):
        load_result(JSON_GOLD)


def test_format_names_are_the_options_names() -> None:
    from typing import get_args

    from nhbench import Options

    # The option's Literal and description are the one copy of the names outside the table.
    field = Options.model_fields["output_format"]
    assert get_args(field.annotation) == tuple(OUTPUT_FORMATS)
    assert field.description is not None
    listed = re.findall(r"[a-z_]+", field.description)
    assert [word for word in listed if word in OUTPUT_FORMATS] == list(OUTPUT_FORMATS)
    # Every format but human is a function of Nighthawk's document, so transform writes a
    # Nighthawk file in it without going through a Result.
    assert [name for name, fmt in OUTPUT_FORMATS.items() if fmt.format is None] == ["human"]


def test_the_format_lists_are_views_of_the_table() -> None:
    assert FORMAT_NAMES == tuple(OUTPUT_FORMATS)
    assert FORMATS == {name: fmt.render for name, fmt in OUTPUT_FORMATS.items()}
    assert DOCUMENT_FORMATS == {name: fmt.format for name, fmt in OUTPUT_FORMATS.items()
                                if fmt.format is not None}
    assert EXTENSIONS == {name: fmt.extension for name, fmt in OUTPUT_FORMATS.items()}
    for name, fmt in OUTPUT_FORMATS.items():
        assert fmt.name == name
        assert fmt.extension.startswith(".") and len(fmt.extension) > 1
        # The naming rule the table's entries rely on: render_<x> and format_<x>, one <x>.
        stem = fmt.render.__name__.removeprefix("render_")
        assert fmt.render.__name__ == f"render_{stem}"
        assert fmt.format is None or fmt.format.__name__ == f"format_{stem}"
