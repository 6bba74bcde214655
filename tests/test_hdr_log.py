"""``nhbench run --hdr-log FILE``: HdrHistogram logs, read back by three readers.

* ``hdrh.log.HistogramLogReader`` (the Python port, a dependency);
* HdrHistogram's own Java ``HistogramLogReader`` (tests/support/HdrLogRead.java) with the
  HdrHistogram jar of the local Maven repository, skipped when java or the jar is missing;
* a parser of the text lines written here from the format's description (Java's
  ``HistogramLogWriter``/``HistogramLogReader`` documentation), independent of both.

Real runs against the real test server (subprocesses of the CLI). Needs the extension.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader
from support.cli import nhbench_cli as cli

import nhbench
from nhbench.outputs._hdrlog import LEGEND

HEADLINE = "benchmark_http_client.scheduled_to_response"
JAVA_READER = Path(__file__).parent / "support" / "HdrLogRead.java"



def read_hdrh(path: Path) -> list[HdrHistogram]:
    reader = HistogramLogReader(str(path), HdrHistogram(1, 60_000_000_000, 3))
    out = []
    try:
        while (histogram := reader.get_next_interval_histogram()) is not None:
            out.append(histogram)
    finally:
        reader.close()
    return out


_LINE = re.compile(
    r"(?:Tag=(?P<tag>[^,\s]+),)?(?P<start>\d+\.\d{3}),(?P<length>\d+\.\d{3}),"
    r"(?P<max>\d+\.\d{3}),(?P<payload>HISTF[A-Za-z0-9+/=]+)"
)


def parse_lines(text: str) -> tuple[list[str], list[dict[str, str]]]:
    """Comment lines and histogram lines per the format: '#' comments, one legend line,
    then "[Tag=<tag>,]<start>,<length>,<max>,<base64>" with three decimals."""
    comments, lines = [], []
    body = text.splitlines()
    assert text.endswith("\n")
    for line in body:
        if line.startswith("#"):
            assert not lines, "comments come before the histograms"
            comments.append(line)
        elif line == LEGEND:
            assert not lines
        else:
            match = _LINE.fullmatch(line)
            assert match, f"not a histogram line: {line[:80]!r}"
            lines.append(match.groupdict())
    assert LEGEND in body
    return comments, lines


def run_result(server: nhbench.TestServer, tmp_path: Path, *extra: str) -> tuple[
        nhbench.Result, Path]:
    log = tmp_path / "run.hlog"
    out = tmp_path / "result.json"
    proc = cli("run", server.url, "--rps", "400", "--duration", "2", "--output-format", "json",
               "--output", str(out), "--hdr-log", str(log), *extra)
    assert proc.returncode == 0, proc.stderr
    return nhbench.Result.model_validate_json(out.read_text()), log


def test_interval_log_counts_add_up_to_the_run(server: nhbench.TestServer,
                                              tmp_path: Path) -> None:
    result, log = run_result(server, tmp_path, "--stats-interval", "0.5")
    total = result.latency.count
    assert total > 0
    histograms = read_hdrh(log)
    # One histogram per interval record of the result, with the same counts, adding up to
    # the run's count exactly.
    assert len(histograms) == len(result.timeline) >= 4
    assert [h.get_total_count() for h in histograms] == [r.requests for r in result.timeline]
    assert sum(h.get_total_count() for h in histograms) == total
    assert all(h.get_tag() is None for h in histograms)  # the headline is untagged
    # Merged, the intervals are the run's histogram, bucket for bucket.
    merged = HdrHistogram(1, 60_000_000_000, 3)
    for histogram in histograms:
        merged.add(histogram)
    run = result.histogram(HEADLINE)
    assert merged.get_total_count() == run.get_total_count()
    for point in (50, 90, 99, 100):
        assert merged.get_value_at_percentile(point) == run.get_value_at_percentile(point)

    comments, lines = parse_lines(log.read_text())
    start = result.global_result.execution_start
    assert start is not None
    assert comments[1] == "#[Histogram log format version 1.3]"
    assert comments[2].startswith(f"#[StartTime: {start.timestamp():.3f} (seconds since epoch), ")
    assert comments[3] == f"#[BaseTime: {start.timestamp():.3f} (seconds since epoch)]"
    # The intervals tile the run: each starts where the previous one ended (to the ms).
    starts = [float(line["start"]) for line in lines]
    lengths = [float(line["length"]) for line in lines]
    assert starts[0] == 0.0
    for i in range(1, len(lines)):
        assert abs(starts[i] - (starts[i - 1] + lengths[i - 1])) <= 0.002
    for line, record, histogram in zip(lines, result.timeline, histograms, strict=True):
        assert line["tag"] is None
        assert float(line["start"]) == pytest.approx(record.start, abs=0.0006)
        # Interval_Max is the histogram's max in ms, as Java's writer reports it.
        assert float(line["max"]) == pytest.approx(histogram.get_max_value() / 1e6, abs=0.0006)


def test_whole_run_log_has_one_tagged_line_per_statistic(server: nhbench.TestServer,
                                                        tmp_path: Path) -> None:
    result, log = run_result(server, tmp_path)
    assert not result.timeline
    histograms = read_hdrh(log)
    encoded = result.encoded_histograms()
    assert len(histograms) == len(encoded)
    by_tag = {h.get_tag(): h for h in histograms}
    assert by_tag[None].get_total_count() == result.latency.count > 0
    for stat_id in encoded:
        if stat_id == HEADLINE:
            continue
        assert by_tag[stat_id].get_total_count() == result.stat(stat_id).count, stat_id
    assert by_tag["benchmark_http_client.latency_2xx"].get_total_count() == \
        result.counters["benchmark.http_2xx"]
    comments, lines = parse_lines(log.read_text())
    duration = f"{result.global_result.execution_duration:.3f}"
    assert {(line["start"], line["length"]) for line in lines} == {("0.000", duration)}
    assert [line["tag"] for line in lines][0] is None


def _jar() -> str | None:
    home = Path.home() / ".m2" / "repository" / "org" / "hdrhistogram" / "HdrHistogram"
    jars = sorted(glob.glob(str(home / "*" / "HdrHistogram-*.jar")))
    return jars[-1] if jars else None


@pytest.mark.skipif(shutil.which("java") is None, reason="java is not installed")
@pytest.mark.skipif(_jar() is None, reason="no HdrHistogram jar in ~/.m2 (mvn dependency:get "
                    "-Dartifact=org.hdrhistogram:HdrHistogram:2.2.2)")
def test_java_hdrhistogram_reads_the_log(server: nhbench.TestServer, tmp_path: Path) -> None:
    result, log = run_result(server, tmp_path, "--stats-interval", "0.5")
    proc = subprocess.run(["java", "-cp", str(_jar()), str(JAVA_READER), str(log)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    *rows, last = proc.stdout.splitlines()
    start = result.global_result.execution_start
    assert start is not None
    assert last == f"start {start.timestamp():.3f}"
    counts = [int(row.split()[3]) for row in rows]
    assert [row.split()[0] for row in rows] == ["-"] * len(result.timeline)
    assert counts == [record.requests for record in result.timeline]
    assert sum(counts) == result.latency.count


def test_bad_path_is_refused_before_the_run(server: nhbench.TestServer,
                                            tmp_path: Path) -> None:
    proc = cli("run", server.url, "--rps", "100", "--duration", "1",
               "--hdr-log", str(tmp_path / "missing" / "x.hlog"))
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1
    assert proc.stderr.startswith("nhbench: error: --hdr-log: directory ")
    assert "Traceback" not in proc.stderr
    assert server.stats()["requests"] == 0
    proc = cli("run", server.url, "--hdr-log", str(tmp_path))
    assert proc.returncode == 2 and "is a directory" in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_existing_file_is_replaced_whole(server: nhbench.TestServer, tmp_path: Path) -> None:
    log = tmp_path / "run.hlog"
    log.write_text("old\n")
    log.chmod(0o640)
    proc = cli("run", server.url, "--rps", "100", "--duration", "1", "--hdr-log", str(log),
               "--output", os.devnull)
    assert proc.returncode == 0, proc.stderr
    assert log.read_text().startswith("#[Logged with nhbench ")
    assert log.stat().st_mode & 0o777 == 0o640
    # No temporary file left beside it.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.hlog"]


def test_fifo_is_streamed_into(server: nhbench.TestServer, tmp_path: Path) -> None:
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE, text=True)
    proc = cli("run", server.url, "--rps", "100", "--duration", "1", "--hdr-log", str(fifo),
               "--output", os.devnull)
    text, _ = reader.communicate(timeout=60)
    assert proc.returncode == 0, proc.stderr
    _, lines = parse_lines(text)
    assert lines and lines[0]["tag"] is None
