"""Hostile result files through `nhbench.load_result`, ``nhbench transform`` and ``nhbench
report`` (docs/reliability.md, "Result files").

Every file here is built by the test from the project's own test data (nothing large is kept
in the repository). Each must be refused in one line: `ResultFileError` from `load_result`,
exit status 2 and one ``nhbench: error:`` line (no traceback) from the two commands, within
bounded memory where memory was the defect (hdrh headers that ask for gigabytes, zlib
bombs). Before the fixes these files gave tracebacks (ValueError, OverflowError,
IndexError, KeyError, UnicodeEncodeError), 1.9 GB of memory for a 43 KB file, or printed
terminal escapes from a label verbatim.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import struct
import subprocess
import sys
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.cli import PEAK_RSS_MAIN
from support.hdrh_blobs import COMPRESSION, ENCODING, blob, global_entry, with_blobs, zigzag_leb

from nhbench import ResultFileError, load_result
from nhbench._histogram import (
    MAX_DECODED_COUNTS,
    HistogramDecodeError,
    decode,
    encode,
    new_histogram,
)

pytestmark = pytest.mark.hostile

DATA = Path(__file__).resolve().parents[1] / "data"
BASE: dict[str, Any] = json.loads((DATA / "nhbench-json-earlier-format.json").read_text())
FORTIO: dict[str, Any] = json.loads((DATA / "fortio" / "fortio-1.66.5-load.json").read_text())
NIGHTHAWK: dict[str, Any] = json.loads(
    (DATA / "nighthawk" / "output_formatter.json.gold").read_text())
SRC = str(Path(__file__).resolve().parents[2] / "src")

# ---- hdrh blobs: the V2 encoding written by hand, so the header can lie ----------------------

def _bomb(mib: int, payload_len: int) -> str:
    """A blob whose zlib stream inflates to `mib` MiB of zero bytes after the header."""
    head = struct.pack(">IIIIQQd", ENCODING, payload_len, 0, 3, 1, 60_000_000_000, 1.0)
    deflater = zlib.compressobj(9)
    parts = [deflater.compress(head)]
    zeros = bytes(1 << 20)
    parts += [deflater.compress(zeros) for _ in range(mib)]
    parts.append(deflater.flush())
    compressed = b"".join(parts)
    return base64.b64encode(struct.pack(">II", COMPRESSION, len(compressed))
                            + compressed).decode()


# ---- the hostile documents -------------------------------------------------------------------


def _text(doc: dict[str, Any]) -> str:
    return json.dumps(doc, allow_nan=True)


def f01() -> str:  # an integer of 5000 digits (Python's int-string limit)
    return _text(BASE).replace('"count": "120"', '"count": ' + "9" * 5000, 1)


def f02() -> str:  # 1e400 parses as infinity
    return _text(BASE).replace('"count": "120"', '"count": 1e400', 1)


def f03() -> str:  # NaN and infinite latencies (the report's formatter overflowed)
    doc = copy.deepcopy(BASE)
    for statistic in global_entry(doc)["statistics"]:
        statistic.update(min=float("nan"), max=float("inf"), mean=float("-inf"))
        statistic.pop("hdr_histogram", None)
    return _text(doc)


def f04() -> str:  # negative counts and counters (shown as "-5 samples")
    doc = copy.deepcopy(BASE)
    for statistic in global_entry(doc)["statistics"]:
        statistic["count"] = -5
        statistic.pop("hdr_histogram", None)
    for counter in global_entry(doc)["counters"]:
        counter["value"] = "-100"
    return _text(doc)


def f07() -> str:  # a lone surrogate in a label (UnicodeEncodeError on output)
    return _text(BASE).replace('"before"', '"\\ud800bad"', 1)


def f09() -> str:  # a duration of 1e300 s (format_json_duration overflowed)
    doc = copy.deepcopy(BASE)
    for entry in doc["results"]:
        entry["execution_duration"] = 1e300
    return _text(doc)


def f11() -> str:  # 40 hdrh headers of 5 digits up to 2^62: 47 MB each once decoded
    return _text(with_blobs(BASE, [blob(b"", sigfig=5, highest=2**62)] * 40))


def f12() -> str:  # a zlib bomb: 256 MiB of zeros, the header saying so
    return _text(with_blobs(BASE, [_bomb(256, 256 << 20)]))


def f12c() -> str:  # the same bomb behind an honest-looking header of 10 payload bytes
    return _text(with_blobs(BASE, [_bomb(256, 10)]))


def f13() -> str:  # more counts than the header's layout has (IndexError)
    counts = zigzag_leb(1) * 200_000
    return _text(with_blobs(BASE, [blob(counts, sigfig=1, highest=2)]))


def f13b() -> str:  # the same within the payload bound: 33 counts for 32 counters
    counts = zigzag_leb(1) * 33
    return _text(with_blobs(BASE, [blob(counts, sigfig=1, highest=2)]))


def f14() -> str:  # a run of 2^40 zeros past the array (OverflowError)
    counts = zigzag_leb(-(2**40)) + zigzag_leb(5)
    return _text(with_blobs(BASE, [blob(counts, sigfig=1, highest=2)]))


def f15() -> str:  # lowest 0 (hdrh: math domain error)
    return _text(with_blobs(BASE, [blob(zigzag_leb(1), lowest=0)]))


def f15b() -> str:  # highest below lowest (decoded as garbage before)
    return _text(with_blobs(BASE, [blob(zigzag_leb(1), lowest=2**40, highest=2)]))


def f15c() -> str:  # a NaN conversion ratio
    return _text(with_blobs(BASE, [blob(zigzag_leb(3), ratio=float("nan"))]))


def f17() -> str:  # Fortio: percentile 1e308 (OverflowError inside load_result)
    doc = copy.deepcopy(FORTIO)
    doc["DurationHistogram"]["Percentiles"] = [{"Percentile": 1e308, "Value": 0.001}]
    return _text(doc)


def f17b() -> str:  # Fortio: infinite values, 200k buckets
    doc = copy.deepcopy(FORTIO)
    histogram = doc["DurationHistogram"]
    histogram.update(Count=10**18, Min=float("nan"), Max=float("inf"))
    histogram["Data"] = [{"Start": i * 1e-3, "End": (i + 1) * 1e-3, "Percent": i / 2000,
                          "Count": 10**12} for i in range(200_000)]
    return _text(doc)


def f18() -> str:  # Fortio: negative status-code counts (fortio rejected them, json did not)
    doc = copy.deepcopy(FORTIO)
    doc["RetCodes"] = {"200": -5}
    return _text(doc)


def f19() -> str:  # Fortio: Data a string
    doc = copy.deepcopy(FORTIO)
    doc["DurationHistogram"]["Data"] = "not a list"
    return _text(doc)


def f28() -> str:  # more result entries than a file may have (20,000 took > 4 GB)
    doc = copy.deepcopy(BASE)
    worker = {"name": "w", "statistics": [], "counters": []}
    doc["results"] = [dict(worker, name=f"worker_{i}") for i in range(5000)]
    doc["results"].append(global_entry(BASE))
    return _text(doc)


def f29() -> str:  # a million percentile points (1.4 GB)
    doc = copy.deepcopy(BASE)
    statistic = global_entry(doc)["statistics"][0]
    statistic.pop("hdr_histogram", None)
    statistic["percentiles"] = [{"percentile": i / 20_001, "count": i, "value": 1e-3}
                                for i in range(20_001)]
    return _text(doc)


def f31() -> str:  # Nighthawk's document with an infinite rate
    doc = copy.deepcopy(NIGHTHAWK)
    doc["options"]["requests_per_second"] = {"value": 1e400}
    return _text(doc)


def f32() -> str:  # no global entry (KeyError)
    doc = copy.deepcopy(BASE)
    doc["results"] = [entry for entry in doc["results"] if entry["name"] != "global"]
    return _text(doc)


def f32b() -> str:  # no results at all
    return _text(dict(copy.deepcopy(BASE), results=[]))


def f33() -> str:  # percentiles outside [0, 1] and 1e308 s (fortio output overflowed)
    doc = copy.deepcopy(BASE)
    statistic = global_entry(doc)["statistics"][0]
    statistic.pop("hdr_histogram", None)
    statistic["percentiles"] = [{"percentile": 0.5, "count": 2, "value": 1e308}]
    return _text(doc)


def f33b() -> str:
    doc = copy.deepcopy(BASE)
    statistic = global_entry(doc)["statistics"][0]
    statistic["percentiles"] = [{"percentile": 5.0, "count": 1, "value": 0.001}]
    return _text(doc)


def f34() -> str:  # a NaN / negative timeline (the report raised ValueError)
    doc = copy.deepcopy(BASE)
    doc["timeline"] = [{"start": float("nan"), "duration": -1, "requests": -5, "rps": 1.0}]
    return _text(doc)


def f34b() -> str:
    doc = copy.deepcopy(BASE)
    doc["timeline"] = [{"start": 0, "duration": 1, "requests": -5, "rps": 1.0}]
    return _text(doc)


#: id -> (the file's text, a fragment the one-line reason must contain)
CASES: dict[str, tuple[Callable[[], str], str]] = {
    "F01": (f01, "4300 digits"),
    "F02": (f02, "not a finite number"),
    "F03": (f03, "not a finite number"),
    "F04": (f04, "is not a count"),
    "F07": (f07, "lone surrogate"),
    "F09": (f09, "execution_duration"),
    "F11": (f11, "counters, more than"),
    "F12": (f12, "payload of 268,435,456 bytes"),
    "F12c": (f12c, "the stream holds more"),
    "F13": (f13, "payload of 200,000 bytes for 32 counters"),
    "F13b": (f13b, "do not fit its layout"),
    "F14": (f14, "do not fit its layout"),
    "F15": (f15, "not a range"),
    "F15b": (f15b, "not a range"),
    "F15c": (f15c, "conversion ratio"),
    "F17": (f17, "Percentile 1e+308 is outside 0..100"),
    "F17b": (f17b, "not a finite number"),
    "F18": (f18, "is not a count"),
    "F19": (f19, "DurationHistogram.Data: expected a list"),
    "F28": (f28, "more than the 4,096"),
    "F29": (f29, "more than the 10,000"),
    "F31": (f31, "not a finite number"),
    "F32": (f32, "no 'global' entry"),
    "F32b": (f32b, "no 'global' entry"),
    "F33": (f33, "outside 0.."),
    "F33b": (f33b, "outside [0, 1]"),
    "F34": (f34, "not a finite number"),
    "F34b": (f34b, "requests: -5 is not a count"),
}

# The cases whose defect was memory: their commands run with a bound on peak RSS.
MEMORY_CASES = ("F11", "F12", "F12c")
# Far above a normal load (40-80 MB), far below the 550 MB-1.9 GB the defects reached.
RSS_BOUND_MB = 300


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("hostile-results")
    paths = {}
    for case, (build, _) in CASES.items():
        path = directory / f"{case}.json"
        path.write_text(build(), encoding="utf-8", errors="surrogatepass")
        paths[case] = path
    return paths


def nhbench(*args: str, cwd: Path) -> tuple[int, str, str, float]:
    """Run ``nhbench ARGS``: exit status, stdout, stderr and the process's own peak RSS in
    MB (VmHWM at its exit: support.cli.PEAK_RSS_MAIN)."""
    peak_file = cwd / "peak"
    peak_file.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]),
           "NHB_PEAK_FILE": str(peak_file)}
    out, err = cwd / "stdout", cwd / "stderr"
    with open(out, "wb") as stdout, open(err, "wb") as stderr:
        status = subprocess.run([sys.executable, "-c", PEAK_RSS_MAIN, *args], stdout=stdout,
                                stderr=stderr, stdin=subprocess.DEVNULL, env=env, cwd=cwd,
                                check=False).returncode
    return (status, out.read_text(errors="replace"), err.read_text(errors="replace"),
            int(peak_file.read_text()) / 1024)


def assert_one_line(status: int, stderr: str, fragment: str) -> None:
    assert "Traceback" not in stderr, stderr
    assert status == 2, stderr
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("nhbench: error: cannot load result"), stderr
    assert fragment in lines[0], lines[0]


@pytest.mark.parametrize("case", sorted(CASES))
def test_load_result_refuses_in_one_line(case: str, files: dict[str, Path]) -> None:
    with pytest.raises(ResultFileError) as caught:
        load_result(files[case])
    message = str(caught.value)
    assert "\n" not in message and str(files[case]) in message
    assert CASES[case][1] in message, message


@pytest.mark.parametrize("output_format", ["human", "fortio"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_transform_refuses_in_one_line(case: str, output_format: str, files: dict[str, Path],
                                       tmp_path: Path) -> None:
    status, stdout, stderr, rss = nhbench("transform", "--output-format", output_format,
                                          str(files[case]), cwd=tmp_path)
    assert_one_line(status, stderr, CASES[case][1])
    assert stdout == ""
    if case in MEMORY_CASES:
        assert rss < RSS_BOUND_MB, f"peak RSS {rss:.0f} MB"


@pytest.mark.parametrize("case", sorted(CASES))
def test_report_refuses_in_one_line(case: str, files: dict[str, Path], tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    status, _, stderr, rss = nhbench("report", str(files[case]), "-o", str(page), cwd=tmp_path)
    assert_one_line(status, stderr, CASES[case][1])
    assert not page.exists()
    if case in MEMORY_CASES:
        assert rss < RSS_BOUND_MB, f"peak RSS {rss:.0f} MB"


def test_terminal_escapes_in_labels_and_error_are_printed_escaped(tmp_path: Path) -> None:
    doc = copy.deepcopy(BASE)
    doc["options"]["label"] = ["\x1b]0;pwned\x07\x1b[2J\x1b[31mRED", "line1\nline2\rover\u202e"]
    doc["error"] = "\x1b[1Aerase\x1b[K\x9b2J"
    path = tmp_path / "escapes.json"
    path.write_text(json.dumps(doc))
    status, stdout, stderr, _ = nhbench("transform", "--output-format", "human", str(path),
                                        cwd=tmp_path)
    assert status == 0, stderr
    for control in ("\x1b", "\x07", "\r", "\x9b", "\u202e"):
        assert control not in stdout
    assert "  labels: \\x1b]0;pwned\\x07\\x1b[2J\\x1b[31mRED, line1\\nline2\\rover\\u202e\n" \
        in stdout
    assert "First error: \\x1b[1Aerase\\x1b[K\\x9b2J\n" in stdout


# ---- the decoder on its own ------------------------------------------------------------------


def test_decode_gives_back_what_encode_wrote() -> None:
    histogram = new_histogram()
    for value in (1, 999, 1_000_000, 59_000_000_000):
        histogram.record_value(value)
    again = decode(encode(histogram))
    assert again.total_count == 4 and again.get_max_value() == histogram.get_max_value()
    assert encode(again) == encode(histogram)
    assert decode(encode(new_histogram())).total_count == 0


def test_decode_checks_the_header_before_allocating() -> None:
    # 4 digits up to 60 s (376,832 counters) is within the bound, 5 digits is not.
    assert decode(blob(zigzag_leb(7), sigfig=4)).total_count == 7
    with pytest.raises(HistogramDecodeError, match=f"more than the {MAX_DECODED_COUNTS:,}"):
        decode(blob(zigzag_leb(7), sigfig=5))
    with pytest.raises(HistogramDecodeError, match="outside 1..5"):
        decode(blob(b"", sigfig=6))
    with pytest.raises(HistogramDecodeError, match="truncated"):
        raw = base64.b64decode(blob(zigzag_leb(1) * 100))
        cut = raw[8:-6]
        decode(base64.b64encode(struct.pack(">II", COMPRESSION, len(cut)) + cut))
    with pytest.raises(HistogramDecodeError, match="not an HdrHistogram V2 encoding"):
        decode(base64.b64encode(b"\0" * 40))


def test_a_nighthawk_document_of_other_types_is_refused_in_one_line(tmp_path: Path) -> None:
    # Found by the fuzz target: transform formats Nighthawk's own document straight, and a
    # field of another type than Nighthawk writes was a TypeError traceback.
    doc = copy.deepcopy(NIGHTHAWK)
    doc["options"] = 5
    path = tmp_path / "nighthawk.json"
    path.write_text(json.dumps(doc))
    status, stdout, stderr, _ = nhbench("transform", "--output-format", "fortio", str(path),
                                        cwd=tmp_path)
    assert "Traceback" not in stderr and status == 2 and stdout == "", stderr
    assert len(stderr.splitlines()) == 1 and "nhbench: error: cannot load result" in stderr


def test_a_long_timeline_is_drawn_with_at_most_1000_points_per_curve(tmp_path: Path) -> None:
    # One SVG circle per interval and curve made a 290 MB page of a 65 MB result (338,000
    # intervals) and doubled the report's memory; the worst latency must still show.
    doc = copy.deepcopy(BASE)
    record = BASE["timeline"][0]
    doc["timeline"] = [dict(record, start=float(i)) for i in range(5000)]
    doc["timeline"][2345]["max"] = 0.75  # one spike
    path = tmp_path / "timeline.json"
    path.write_text(json.dumps(doc))
    page = tmp_path / "page.html"
    status, _, stderr, _ = nhbench("report", str(path), "-o", str(page), cwd=tmp_path)
    assert status == 0, stderr
    text = page.read_text()
    timeline = text[text.index('id="timeline"'):]
    assert 6 * 1000 <= timeline.count("<circle") <= 6 * 1000 + 20
    assert "5000 intervals of --stats-interval, drawn as at most 1000 points" in text
    assert "max: 750 ms" in timeline


@pytest.mark.parametrize("command", ["transform", "report"])
def test_a_renderer_failing_anyway_is_one_line_exit_1(command: str, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    # The last resort behind the load's checks: whatever a renderer still raises is one
    # line and exit status 1 (nhbench's fault), not a traceback.
    import dataclasses

    from nhbench import cli
    from nhbench.browse import _pages
    from nhbench.outputs import OUTPUT_FORMATS

    def broken(*_: object, **__: object) -> str:
        raise RuntimeError("renderer bug")

    # The format table is what every consumer reads (render, renderer, FORMATS is a view).
    monkeypatch.setitem(OUTPUT_FORMATS, "human",  # type: ignore[arg-type]
                        dataclasses.replace(OUTPUT_FORMATS["human"], render=broken))
    monkeypatch.setattr(_pages, "_headline", broken)
    path = DATA / "nhbench-json-earlier-format.json"
    args = (["transform", "--output-format", "human", str(path)] if command == "transform"
            else ["report", str(path), "-o", str(tmp_path / "page.html")])
    with pytest.raises(SystemExit) as caught:
        cli.main(args)
    assert caught.value.code == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "internal error (RuntimeError: renderer bug)" in err
