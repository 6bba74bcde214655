"""A hostile origin against the client's streaming statistics (--stream-stats, docs/engine.md
"Streaming responses"): a scripted origin on loopback (tests/support/scripted_origin.py)
answering each request with a body that never ends, built to hurt the event splitter and the
per-event recording (csrc/client/stream.c) while staying valid HTTP/1.1:

* one-byte chunks forever (an event per chunk: the most events per byte a body can carry);
* an SSE stream whose lines never meet a blank line (no event is ever dispatched);
* one huge SSE event: a data line that never ends.

What must hold: the run ends at its duration plus the drain time-out, the client's memory
stays bounded whatever the origin sent (the splitter keeps four bytes of state, nothing of the
event), and the figures are the right ones: a chunk per event for the first, no event at all
for the other two.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.cli import PEAK_RSS_MAIN, cli_env
from support.scripted_origin import Reply, ScriptedOrigin

import nhbench

pytestmark = [pytest.mark.hostile, pytest.mark.timeout(120)]

DURATION = 1.5
DRAIN = 0.5
MIB = 1 << 20


ONE_BYTE_CHUNKS = b"1\r\nx\r\n" * 20000
NO_BLANK_LINE = b"data: x\n" * 20000
HUGE_LINE = b"x" * MIB

CASES = {
    # (the head, then the piece sent over and over)
    "one-byte chunks forever": (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n",
        ONE_BYTE_CHUNKS),
    "an event stream with no blank line ever": (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n",
        b"%x\r\n%s\r\n" % (len(NO_BLANK_LINE), NO_BLANK_LINE)),
    "one huge event": (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
        b"data: ", HUGE_LINE),
}


def _run(port: int, tmp_path: Path) -> tuple[nhbench.Result, float, int]:
    """The CLI's run against the origin on `port`: its result, wall time and peak RSS."""
    peak_file, out = tmp_path / "peak", tmp_path / "result.json"
    args = ["run", f"http://127.0.0.1:{port}/", "--stream-stats", "--rps", "2",
            "--connections", "1", "--duration", str(DURATION), "--drain-timeout", str(DRAIN),
            "--output", str(out), "--output-format", "json"]
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", PEAK_RSS_MAIN, *args], capture_output=True,
                          text=True, timeout=60, env=cli_env({"NHB_PEAK_FILE": str(peak_file)}),
                          stdin=subprocess.DEVNULL, check=False)
    wall = time.monotonic() - start
    assert proc.returncode >= 0, proc.stderr  # no signal
    assert "Traceback" not in proc.stderr
    return nhbench.load_result(out), wall, int(peak_file.read_text()) * 1024


@pytest.fixture(scope="module")
def baseline_peak(tmp_path_factory: pytest.TempPathFactory) -> int:
    """The same run's peak RSS against our test server's short event streams: what the
    client needs whatever the origin sends."""
    with nhbench.TestServer(stream_events=5, stream_gap="1ms") as server:
        result, _, peak = _run(server.address[1], tmp_path_factory.mktemp("baseline"))
    assert result.counters["benchmark.http_2xx"] >= 2
    return peak


@pytest.mark.parametrize("case", sorted(CASES))
def test_endless_bodies_end_with_the_run_in_bounded_memory(case: str, tmp_path: Path,
                                                          baseline_peak: int) -> None:
    head, piece = CASES[case]
    with ScriptedOrigin(lambda request: Reply(head, forever=piece)) as origin:
        result, wall, peak = _run(origin.port, tmp_path)
    sent = origin.sent
    # The run ends at its duration plus the drain, with room for a loaded host.
    assert wall < DURATION + DRAIN + 15, wall
    # The client's memory is the run's own, whatever the body: it grew by less than half of
    # what the origin sent (a client keeping the body would grow by all of it). How much is
    # sent depends on how fast the client reads, so the bound is relative to it, and the
    # origin must have sent enough for it to stand well above the RSS's noise.
    assert sent >= 24 * MIB, sent
    assert peak < baseline_peak + min(sent // 2, 24 * MIB), (peak, baseline_peak, sent)
    ids = {s.id: s for s in result.global_result.statistics}
    first = ids.get("benchmark_http_client.time_to_first_event")
    gaps = ids.get("benchmark_http_client.inter_event_gap")
    assert first is not None and gaps is not None
    if case == "one-byte chunks forever":
        # Every chunk is an event: millions of them, each a gap, from the request or two.
        assert 1 <= first.count <= 4
        assert gaps.count > 1_000_000, gaps.count
    else:
        assert first.count == 0
        assert gaps.count == 0
    # No stream ever ended: no response, nothing per response.
    assert result.counters["benchmark.http_2xx"] == 0

