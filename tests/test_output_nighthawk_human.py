"""``--output-format nighthawk_human``: Nighthawk's human output (nhbench.outputs).

Evidence: Nighthawk's own goldens for that formatter (its test inputs rendered equal its
``.txt.gold`` files byte for byte); a hand-built document whose text is written out by hand
below; Nighthawk's real 3-worker output (medium.proto.gold) and a real nhbench run, each
rendered and read back by a strict parser of the layout, their numbers compared with the
document's; and ``nhbench run --output-format nighthawk_human`` as a user runs it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from nhbench._load import parse_json
from nhbench.outputs import FORMATS, OUTPUT_FORMATS
from nhbench.outputs._nhfields import FRIENDLY_NAMES, duration_micros, duration_nanos
from nhbench.outputs._nighthawk_human import format_nighthawk_human

DATA = Path(__file__).parent / "data" / "nighthawk"


# (a) Nighthawk's goldens ---------------------------------------------------------------------


@pytest.mark.parametrize(("source", "golden"), [
    # Its CliFormatter test: the json.gold Output (2 workers + global; latency, size and
    # empty statistics; two counters over 1 s).
    ("output_formatter.json.gold", "output_formatter.txt.gold"),
    # Its ConsoleOutputFormatter test: a percentile longer than its column (%.8g of
    # 0.99931640625), a statistic with no min/max/mean/pstdev set, no counters at all.
    ("percentile-column-overflow.json", "percentile-column-overflow.txt.gold"),
])
def test_nighthawk_golden(source: str, golden: str) -> None:
    document = json.loads((DATA / source).read_text())
    assert format_nighthawk_human(document) == (DATA / golden).read_text()


def test_registered_as_a_document_format() -> None:
    fmt = OUTPUT_FORMATS["nighthawk_human"]
    assert fmt.format is format_nighthawk_human
    assert fmt.extension == ".txt"


# (b) A hand-built document -------------------------------------------------------------------

# worker_0 must not show (only the global result does). In global: the latency statistic's
# percentile list picks 0 (hidden), 0.5, 0.9 (for .75) and 1 (hidden); its sub-microsecond
# digits are truncated and 1001.0015 s shows the seconds-modulo-1000 quirk. The empty
# blocking statistic is left out. my.sizes picks only 0 and 1: no table, and so no blank
# line before one. The header sizes' first percentile, 1/3, is printed %.8g, its raw value
# 10.9 cast to 10. The rates are the counts over 3 s; the long counter name and value
# overflow their columns instead of being cut.
HAND: dict[str, Any] = {
    "results": [
        {
            "name": "worker_0",
            "statistics": [{"id": "worker.only", "count": "1", "min": "1s"}],
            "counters": [{"name": "worker.counter", "value": "1"}],
            "execution_duration": "1s",
        },
        {
            "name": "global",
            "statistics": [
                {
                    "id": "benchmark_http_client.request_to_response", "count": "4",
                    "percentiles": [
                        {"percentile": 0, "count": "1", "duration": "0.000100999s"},
                        {"percentile": 0.5, "count": "2", "duration": "0.0002s"},
                        {"percentile": 0.9, "count": "3", "duration": "1001.0015s"},
                        {"percentile": 1, "count": "4", "duration": "1001.0015s"},
                    ],
                    "min": "0.000100999s", "mean": "250.5s", "max": "1001.0015s",
                    "pstdev": "433.5s",
                },
                {"id": "sequencer.blocking", "count": "0"},
                {
                    "id": "my.sizes", "count": 2, "raw_min": "3", "raw_max": "5",
                    "raw_mean": 4, "raw_pstdev": 1,
                    "percentiles": [
                        {"percentile": 0, "count": "1", "raw_value": 3},
                        {"percentile": 1, "count": "2", "raw_value": 5},
                    ],
                },
                {
                    "id": "benchmark_http_client.response_header_size", "count": "3",
                    "raw_min": "10", "raw_max": "20", "raw_mean": 15.25, "raw_pstdev": 0.1,
                    "percentiles": [
                        {"percentile": 1 / 3, "count": "1", "raw_value": 10.9},
                        {"percentile": 1, "count": "3", "raw_value": 20},
                    ],
                },
            ],
            "counters": [
                {"name": "upstream_rq_total", "value": "4"},
                {"name": "a.counter.name.longer.than.forty.characters", "value": "12345678901234"},
            ],
            "execution_duration": "3s",
        },
    ],
}

HAND_TEXT = (
    "Nighthawk - A layer 7 protocol benchmarking tool.\n"
    "\n"
    "Request start to response end (4 samples)\n"
    "  min: 0s 000ms 100us | mean: 250s 500ms 000us | max: 1s 001ms 500us"
    " | pstdev: 433s 500ms 000us\n"
    "\n"
    "  Percentile  Count       Value          \n"
    "  0.5         2           0s 000ms 200us \n"
    "  0.9         3           1s 001ms 500us \n"
    "\n"
    "my.sizes (2 samples)\n"
    "  min: 3 | mean: 4 | max: 5 | pstdev: 1\n"
    "\n"
    "Response header size in bytes (3 samples)\n"
    "  min: 10 | mean: 15.25 | max: 20 | pstdev: 0.1\n"
    "\n"
    "  Percentile  Count       Value          \n"
    "  0.33333333  1           10             \n"
    "\n"
    "Counter                                 Value       Per second\n"
    "upstream_rq_total                       4           1.33\n"
    "a.counter.name.longer.than.forty.characters12345678901234" "4115226300411.33\n"
    "\n"
)


def test_hand_built() -> None:
    assert format_nighthawk_human(HAND) == HAND_TEXT


def test_zero_execution_duration_divides_as_cpp() -> None:
    # value / (0 ns / 1e9): inf, and 0 / 0 the NaN x86-64 makes, which fmt prints "-nan".
    document = {"results": [{"name": "global", "counters": [
        {"name": "a", "value": "2"}, {"name": "b", "value": "0"}]}]}
    lines = format_nighthawk_human(document).splitlines()
    assert lines[-3:] == [f"{'a':<40}{'2':<12}inf", f"{'b':<40}{'0':<12}-nan", ""]


def test_control_characters_from_the_file_are_escaped() -> None:
    # A hostile file's names cannot drive the terminal or forge a line of the layout; the
    # escape is padded like any name.
    document = {"results": [{"name": "global", "execution_duration": "1s",
                             "statistics": [{"id": "x\x1b[2J", "count": "1"}],
                             "counters": [{"name": "a\nb\x1b]0;t\x07", "value": "1"}]}]}
    text = format_nighthawk_human(document)
    assert "\x1b" not in text and "\x07" not in text
    assert "x\\x1b[2J (1 samples)\n" in text
    escaped = "a\\nb\\x1b]0;t\\x07"
    assert f"{escaped:<40}{'1':<12}1.00\n" in text


def test_malformed_document_is_a_value_error_naming_the_field() -> None:
    document = {"results": [{"name": "global", "statistics": [
        {"id": "x", "count": "1", "min": "soon"}]}]}
    with pytest.raises(ValueError, match="^min: "):
        format_nighthawk_human(document)


# (c) A strict reader of the layout -----------------------------------------------------------

_DURATION = r"\d+s \d{3}ms \d{3}us"
_NUMBER = r"-?[0-9.e+-]+|-?nan|-?inf"
_HEADING = re.compile(r"(?P<title>.+) \((?P<count>\d+) samples\)")
_MMMP = re.compile(
    rf"  min: (?P<min>{_DURATION}|{_NUMBER}) \| mean: (?P<mean>{_DURATION}|{_NUMBER}) \| "
    rf"max: (?P<max>{_DURATION}|{_NUMBER}) \| pstdev: (?P<pstdev>{_DURATION}|{_NUMBER})")
_TABLE_HEADER = "  Percentile  Count       Value          "
_COUNTER_HEADER = "Counter                                 Value       Per second"


@dataclass
class Block:
    title: str
    count: int
    mmmp: dict[str, str]
    percentiles: list[tuple[float, int, str]] = field(default_factory=list)


def parse(text: str) -> tuple[list[Block], list[tuple[str, int, float]]]:
    """The statistic blocks and counters of Nighthawk's human text; AssertionError at the
    first line out of its layout."""
    assert text.endswith("\n\n")
    lines = text.split("\n")[:-1]
    assert lines[:2] == ["Nighthawk - A layer 7 protocol benchmarking tool.", ""]
    i, blocks = 2, []
    while lines[i] != _COUNTER_HEADER:
        heading = _HEADING.fullmatch(lines[i])
        mmmp = _MMMP.fullmatch(lines[i + 1])
        assert heading and mmmp, lines[i:i + 2]
        block = Block(heading["title"], int(heading["count"]), mmmp.groupdict())
        i += 2
        if lines[i] == "" and lines[i + 1] == _TABLE_HEADER:
            i += 2
            while lines[i]:
                # Three left-aligned columns of 12, 12 and 15 characters (wider values
                # overflow; Nighthawk's values fit).
                row = lines[i]
                assert row[:2] == "  " and len(row) >= 41, row
                p, count, value = row[2:14], row[14:26], row[26:]
                assert p.rstrip() and " " not in p.rstrip() and count.rstrip().isdigit(), row
                assert len(value) == 15 or not value.endswith(" "), row
                block.percentiles.append((float(p), int(count), value.rstrip()))
                i += 1
            assert block.percentiles
        assert lines[i] == "", lines[i]
        blocks.append(block)
        i += 1
    counters = []
    for line in lines[i + 1:-1]:
        name, value, rate = line[:40].rstrip(), line[40:52].rstrip(), line[52:]
        assert name and value.isdigit() and re.fullmatch(r"\d+\.\d\d", rate), line
        counters.append((name, int(value), float(rate)))
    assert lines[-1] == ""
    return blocks, counters


def _value_text(statistic: Mapping[str, Any], name: str) -> str:
    """What the block shows for `name`, derived here independently: a Duration as
    "{s}s {ms:03}ms {us:03}us" of its truncated microseconds, else the raw number."""
    if name in statistic:
        micros = duration_micros(statistic[name])
        return f"{micros // 1_000_000}s {micros // 1000 % 1000:03}ms {micros % 1000:03}us"
    raw = float(statistic.get(f"raw_{name}", 0))
    return str(int(raw)) if raw.is_integer() else repr(raw)


def check_against(document: Mapping[str, Any], text: str) -> list[Block]:
    """`text` read back carries the global result's numbers of `document`."""
    blocks, counters = parse(text)
    (result,) = [r for r in document["results"] if r["name"] == "global"]
    shown = [s for s in result["statistics"] if int(s["count"]) > 0]
    assert [b.title for b in blocks] == [FRIENDLY_NAMES.get(s["id"], s["id"]) for s in shown]
    seconds = duration_nanos(result["execution_duration"]) / 1e9
    for block, statistic in zip(blocks, shown, strict=True):
        assert block.count == int(statistic["count"])
        assert block.mmmp == {name: _value_text(statistic, name)
                              for name in ("min", "mean", "max", "pstdev")}
        listed = {float(p["percentile"]): p for p in statistic.get("percentiles", [])}
        previous = 0.0
        for p, count, value in block.percentiles:
            # Each row is a listed percentile, strictly inside (0, 1), increasing.
            assert previous < p < 1 and p in listed
            previous = p
            point = listed[p]
            assert count == int(point["count"])
            if "duration" in point:
                assert value == _value_text({"v": point["duration"]}, "v")
            else:
                assert value == str(int(float(point["raw_value"])))
    assert [(n, v) for n, v, _ in counters] == [
        (c["name"], int(c["value"])) for c in result["counters"]]
    for _, value, rate in counters:
        assert rate == pytest.approx(value / seconds, abs=0.006)
    return blocks


def test_parser_refuses_a_broken_layout() -> None:
    # The reader the structural checks rely on fails on a column shifted by one space.
    good = (DATA / "output_formatter.txt.gold").read_text()
    parse(good)
    with pytest.raises(AssertionError):
        parse(good.replace("  0.5         2 ", "  0.5          2"))
    with pytest.raises(AssertionError):
        parse(good.replace("bar                                     2",
                           "bar                                    2 "))


def test_nighthawks_real_three_worker_output() -> None:
    document = parse_json((DATA / "output_formatter.medium.proto.gold").read_text())
    blocks = check_against(document, format_nighthawk_human(document))
    # Five statistics with samples (the blocking one has none), in the document's order,
    # under Nighthawk's names; all sizes of the body were 847 bytes, so its percentiles are
    # 0 and 1 only and it has no table.
    assert [(b.title, b.count) for b in blocks] == [
        ("Queueing and connection setup latency", 53),
        ("Request start to response end", 53),
        ("Response body size in bytes", 56),
        ("Response header size in bytes", 56),
        ("Initiation to completion", 57),
    ]
    assert blocks[1].mmmp["max"] == "0s 310ms 886us"
    assert [p for p, _, _ in blocks[1].percentiles] == [0.5, 0.75, 0.8, 0.9, 0.95]
    assert blocks[2].percentiles == []


# (d) nhbench's own results -------------------------------------------------------------------


def test_real_run_rendered() -> None:
    import nhbench
    from nhbench.outputs._nighthawk import nighthawk_output

    with nhbench.TestServer() as server:
        result = nhbench.run(server.url, rps=200, duration="1s", concurrency=2)
        requests = server.stats()["requests"]
    text = FORMATS["nighthawk_human"](result)
    blocks = check_against(nighthawk_output(result), text)
    by_title = {b.title: b for b in blocks}
    assert by_title["Request start to response end"].count == requests > 0
    assert by_title["Request start to response end"].percentiles
    # nhbench's own statistics are headed by their id, as Nighthawk heads unknown ones.
    assert "benchmark_http_client.scheduled_to_response" in by_title
    assert f"{'upstream_rq_total':<40}{requests:<12}" in text


def test_nhbench_run_writes_it(tmp_path: Path) -> None:
    import nhbench

    out = tmp_path / "run.txt"
    with nhbench.TestServer() as server:
        proc = subprocess.run(
            [sys.executable, "-m", "nhbench", "run", server.url, "--rps", "50",
             "--duration", "0.5s", "--output-format", "nighthawk_human", "--output", str(out)],
            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
            check=False)
        requests = server.stats()["requests"]
    assert proc.returncode == 0, proc.stderr
    blocks, counters = parse(out.read_text())
    assert requests > 0
    assert ("upstream_rq_total", requests) in [(n, v) for n, v, _ in counters]
    assert any(b.title == "Request start to response end" and b.count == requests
               for b in blocks)
