"""Hostile result files through the comparison of runs: ``nhbench compare``, `Result.compare`
and the browser's comparison page (docs/trust.md "Comparing runs", docs/reliability.md).

The comparison decodes every interval histogram of every run, which the loader leaves
encoded: a file may carry garbage there, a zlib bomb, a header asking for gigabytes, another
layout, or tens of thousands of intervals. Each is refused in one line (exit 1 from the
command: the files loaded, the comparison could not be carried out), within bounded memory,
and the browser's page still shows, with the reason in the verdict's cell.
"""

from __future__ import annotations

import base64
import copy
import json
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest
from support.cli import nhbench_cli
from support.hdrh_blobs import COMPRESSION, ENCODING, blob, zigzag_leb

import nhbench
from nhbench._histogram import HistogramDecodeError

pytestmark = pytest.mark.hostile


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    """A real run's JSON, about 20 intervals of 0.1 s (at least the comparison's 6)."""
    with nhbench.TestServer() as server:
        result = nhbench.run(server.url, rps=200, duration="2s", stats_interval="0.1s")
    data: dict[str, Any] = json.loads(result.render("json"))
    assert len(timeline(data)) >= 6
    return data


def timeline(data: dict[str, Any]) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = \
        data["results"][0]["user_defined_outputs"][0]["typed_output"]["value"]["run"][
            "timeline"]
    return records


def _bomb(mib: int) -> str:
    head = struct.pack(">IIIIQQd", ENCODING, 40_000, 0, 3, 1, 60_000_000_000, 1.0)
    deflater = zlib.compressobj(9)
    parts = [deflater.compress(head)]
    parts += [deflater.compress(bytes(1 << 20)) for _ in range(mib)]
    parts.append(deflater.flush())
    compressed = b"".join(parts)
    return base64.b64encode(struct.pack(">II", COMPRESSION, len(compressed))
                            + compressed).decode()


CASES = {
    "garbage": ("not base64 at all!", "not base64"),
    "zlib bomb": (_bomb(64), "payload"),
    "gigabytes asked": (blob(zigzag_leb(1), sigfig=5, highest=1 << 62), "counters, more than"),
    "another layout": (blob(zigzag_leb(1), sigfig=2), "another layout"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_interval_histogram_is_one_line_exit_1(case: str, document: dict[str, Any],
                                                      tmp_path: Path) -> None:
    encoded, message = CASES[case]
    hostile = copy.deepcopy(document)
    timeline(hostile)[3]["hdr_histogram"] = encoded
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(document))
    bad.write_text(json.dumps(hostile))
    # The file loads (the loader leaves interval histograms encoded)...
    loaded = nhbench.load_result(bad)
    # ...and the comparison refuses it by name.
    with pytest.raises(HistogramDecodeError):
        loaded.compare(nhbench.load_result(good))
    proc = nhbench_cli("compare", str(good), str(bad))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout == "" and len(proc.stderr.splitlines()) == 1
    assert "an interval histogram does not decode: candidate run 1 of 1, interval 4: " \
        in proc.stderr, proc.stderr
    assert message in proc.stderr, proc.stderr
    # The browser's comparison page shows, with the reason where the verdict would be.
    from nhbench.browse import compare_page

    page = compare_page([("good.json", nhbench.load_result(good)),
                         ("bad.json", loaded)])
    assert "not compared:" in page


def test_tens_of_thousands_of_intervals_are_grouped(document: dict[str, Any],
                                                    tmp_path: Path) -> None:
    # 20,000 intervals (a long run at 0.1 s, or a file made to be slow): resampled over at
    # most 600 groups of consecutive intervals, so the comparison stays a few seconds.
    long = copy.deepcopy(document)
    records = timeline(long)
    timeline(long)[:] = [dict(records[i % len(records)], start=i * 0.1)
                         for i in range(20_000)]
    path = tmp_path / "long.json"
    path.write_text(json.dumps(long))
    other = tmp_path / "short.json"
    other.write_text(json.dumps(document))
    proc = nhbench_cli("compare", str(other), str(path), "--output", "json", timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["method"].startswith("circular block bootstrap")
