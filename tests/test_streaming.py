"""Streaming responses (docs/engine.md "Streaming responses"): with --stream-stats the client
times each response's events, and the figures match the gaps a server was set to send them
at, over HTTP/1.1, HTTP/2 (h2c) and HTTP/3.

- Our test server's --stream-events N --stream-gap G sends event k at k * G after the request
  (HTTP/1.1 chunks, HTTP/2 and HTTP/3 DATA frames): time_to_first_event ~ G, inter_event_gap
  ~ G (N - 1 per response), stream_duration ~ (N - 1) G, events_per_response exactly N, and
  the server's stream_events count equals the events the client counted. The gap is 20 ms,
  far above the host's timer resolution (`nhbench calibrate`: microseconds for the server's
  timerfd and the client's clock), so the assertions are wide ratios: within [0.5x, 2x].
- Independent peers: nghttpx (a reverse proxy passing our server's chunks on as HTTP/2 DATA
  frames, for h2c), aioquic's HTTP/3 server (tests/support/h3_server.py, its own SSE stream)
  and scripted HTTP/1.1 origins (tests/support/scripted_origin.py): an SSE event split
  across chunks is one event, two events in one chunk are two, and a body that is not an
  event stream counts its chunks.
  Against our server's HTTP/2 and HTTP/3 streams: curl (h2 by ALPN, h2c by prior knowledge
  and by Upgrade), nghttp (its frame log times each DATA frame) and aioquic's HTTP/3 client
  (tests/support/h3_client.py) receive exactly the N events.
"""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.cli import nhbench_cli
from support.http_proxies import nghttpx_reverse
from support.peers import peer_env
from support.polling import wait_until
from support.scripted_origin import Reply, ScriptedOrigin
from test_cli_errors import assert_one_line_error

import nhbench
from nhbench.browse._pages import result_page

EVENTS = 10
GAP = 0.020
TTFE = "benchmark_http_client.time_to_first_event"
IEG = "benchmark_http_client.inter_event_gap"
DURATION = "benchmark_http_client.stream_duration"
EPR = "benchmark_http_client.events_per_response"
STREAMING = (TTFE, IEG, DURATION, EPR)


def _ids(result: nhbench.Result) -> set[str]:
    return {s.id for s in result.global_result.statistics}


def _assert_stream(result: nhbench.Result, events: int, gap: float) -> int:
    """The streaming statistics of `result` against a server sending `events` events per
    response, `gap` apart and the first one `gap` after the request; returns the responses."""
    assert result.success, result.error
    n = result.counters["benchmark.http_2xx"]
    assert n >= 3, result.counters
    epr = result.stat(EPR)
    assert epr.count == n
    assert epr.min == epr.max == events, (epr.min, epr.max)
    first = result.stat(TTFE)
    assert first.count == n
    assert gap * 0.5 <= first.p(50) <= gap * 2, first.p(50)
    gaps = result.stat(IEG)
    assert gaps.count == n * (events - 1)
    assert gap * 0.5 <= gaps.p(50) <= gap * 2, gaps.p(50)
    duration = result.stat(DURATION)
    assert duration.count == n
    span = (events - 1) * gap
    assert span * 0.5 <= duration.p(50) <= span * 2, duration.p(50)
    # A response ends with its last event: the latency covers the whole stream.
    assert result.stat("benchmark_http_client.request_to_response").p(50) >= span
    return n


def _run(url: str, **kw: object) -> nhbench.Result:
    kw.setdefault("stream_stats", True)
    kw.setdefault("rps", 5)
    kw.setdefault("duration", 1.0)
    kw.setdefault("connections", 2)
    kw.setdefault("cpus", 1)
    return nhbench.run(url, **kw)  # type: ignore[arg-type]


def test_our_server_over_http1_matches_its_gap() -> None:
    with nhbench.TestServer(stream_events=EVENTS, stream_gap=f"{GAP * 1000:g}ms") as server:
        result = _run(server.url)
        stats = server.stats()
    n = _assert_stream(result, EVENTS, GAP)
    assert stats["requests"] == n
    assert stats["stream_events"] == n * EVENTS
    assert stats["event_streams_active"] == 0


def test_our_server_over_h2c_matches_its_gap() -> None:
    with nhbench.TestServer(stream_events=EVENTS, stream_gap=f"{GAP * 1000:g}ms") as server:
        result = _run(server.url, protocol="http2")
        stats = server.stats()
    n = _assert_stream(result, EVENTS, GAP)
    assert stats["requests"] == stats["status"]["200"] == n
    assert stats["stream_events"] == n * EVENTS
    assert stats["event_streams_active"] == 0
    assert stats["connections_http2"] >= 1 and stats["h2_streams_reset"] == 0


@pytest.mark.parametrize("protocol", ["http2", "http3"])
def test_our_server_over_tls_matches_its_gap(protocol: str) -> None:
    # h2 by ALPN over TLS, and HTTP/3 over QUIC: the same streams, the same schedule.
    with nhbench.TestServer("127.0.0.1:0", stream_events=EVENTS,
                            stream_gap=f"{GAP * 1000:g}ms", tls_self_signed=True,
                            http3=True) as server:
        result = _run(server.url, protocol=protocol, cacert=server.ca_cert)
        # A QUIC stream is released once the client acknowledged its end.
        wait_until(lambda: server.stats()["event_streams_active"] == 0, timeout=5)
        stats = server.stats()
    n = _assert_stream(result, EVENTS, GAP)
    assert stats["requests"] == stats["status"]["200"] == n
    assert stats["stream_events"] == n * EVENTS
    assert stats["event_streams_active"] == 0
    assert stats["h2_streams_reset"] == stats["h3_streams_reset"] == 0
    assert stats["connections_http3" if protocol == "http3" else "connections_http2"] >= 1


def test_jitter_over_http2_stays_around_the_gap() -> None:
    with nhbench.TestServer(stream_events=EVENTS, stream_gap="20ms",
                            stream_jitter="10ms") as server:
        result = _run(server.url, protocol="http2")
    assert result.success, result.error
    gaps = result.stat(IEG)
    assert gaps.count == result.counters["benchmark.http_2xx"] * (EVENTS - 1)
    assert GAP * 0.5 <= gaps.mean <= GAP * 2, gaps.mean
    assert gaps.max - gaps.min > 0.005, (gaps.min, gaps.max)


# ---- independent peers against our server's HTTP/2 and HTTP/3 streams ----------------------

EVENT = b"data: nhbench\n\n"


def _curl(*args: str) -> tuple[bytes, bytes, float]:
    """curl ARGS: the response head(s), the body and the seconds it took."""
    start = time.monotonic()
    proc = subprocess.run(["curl", "-sS", "-N", "--max-time", "20", "-D", "-", *args],
                          capture_output=True, timeout=60, env=peer_env(), check=False)
    took = time.monotonic() - start
    assert proc.returncode == 0, proc.stderr
    head, _, body = proc.stdout.rpartition(b"\r\n\r\n")
    return head, body, took


@pytest.mark.parametrize("how", ["h2-alpn", "h2c-prior-knowledge", "h2c-upgrade"])
def test_curl_over_http2_receives_the_events(how: str) -> None:
    tls = how == "h2-alpn"
    with nhbench.TestServer("127.0.0.1:0", stream_events=EVENTS,
                            stream_gap=f"{GAP * 1000:g}ms", tls_self_signed=tls) as server:
        args = {"h2-alpn": ["--http2", "--cacert", server.ca_cert] if tls else [],
                "h2c-prior-knowledge": ["--http2-prior-knowledge"],
                "h2c-upgrade": ["--http2"]}[how]
        head, body, took = _curl(*args, server.url)
        _, head_only, _ = _curl(*args, "-I", server.url)
        stats = server.stats()
    assert b"HTTP/2 200" in head, head
    assert b"content-type: text/event-stream" in head.lower(), head
    assert body == EVENT * EVENTS
    # The last event comes EVENTS gaps after the request.
    assert took >= EVENTS * GAP * 0.5, took
    assert head_only == b""  # HEAD: the head alone
    assert stats["stream_events"] == EVENTS
    assert stats["connections_http2"] == 2


def test_nghttp_times_each_event_in_its_own_data_frame() -> None:
    # nghttp (nghttp2's client) logs every frame with its arrival time: an independent clock
    # for the gaps over HTTP/2.
    with nhbench.TestServer(stream_events=EVENTS, stream_gap=f"{GAP * 1000:g}ms") as server:
        proc = subprocess.run(["nghttp", "-nv", server.url], capture_output=True, text=True,
                              timeout=60, env=peer_env(), check=False)
    assert proc.returncode == 0, proc.stderr
    times = [float(t) for t in re.findall(r"\[\s*([\d.]+)\] recv DATA frame <length=15",
                                          proc.stdout)]
    headers = float(re.findall(r"\[\s*([\d.]+)\] recv HEADERS frame", proc.stdout)[0])
    assert len(times) == EVENTS, proc.stdout[-2000:]
    assert "END_STREAM" in proc.stdout.split("recv DATA frame")[-1]
    gaps = [b - a for a, b in zip([headers, *times], times, strict=False)]
    assert GAP * 0.5 <= statistics.median(gaps) <= GAP * 2, gaps


def test_aioquic_over_http3_receives_the_events() -> None:
    pytest.importorskip("aioquic")
    client = Path(__file__).resolve().parent / "support" / "h3_client.py"
    with nhbench.TestServer("127.0.0.1:0", stream_events=EVENTS,
                            stream_gap=f"{GAP * 1000:g}ms", tls_self_signed=True,
                            http3=True) as server:
        proc = subprocess.run([sys.executable, str(client), "--cacert", server.ca_cert or "",
                               "--count", "3", server.url], capture_output=True, text=True,
                              timeout=60, env=peer_env(), check=False)
        head = subprocess.run([sys.executable, str(client), "--cacert", server.ca_cert or "",
                               "--method", "HEAD", server.url], capture_output=True,
                              text=True, timeout=60, env=peer_env(), check=False)
        stats = server.stats()
    assert proc.returncode == 0, proc.stderr[-2000:]
    responses = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(responses) == 3
    for r in responses:
        assert r["status"] == 200
        assert ["content-type", "text/event-stream"] in r["headers"]
        assert r["body"] == (EVENT * EVENTS).decode()
        assert r["body_bytes"] == len(EVENT) * EVENTS
        assert EVENTS * GAP * 0.5 <= r["seconds"] <= EVENTS * GAP * 5, r["seconds"]
    assert head.returncode == 0, head.stderr[-2000:]
    assert json.loads(head.stdout)["body_bytes"] == 0
    assert stats["stream_events"] == 3 * EVENTS
    assert stats["requests"] == 4 and stats["h3_streams_reset"] == 0


def test_jitter_spreads_the_gaps_around_the_gap() -> None:
    with nhbench.TestServer(stream_events=EVENTS, stream_gap="20ms",
                            stream_jitter="10ms") as server:
        result = _run(server.url)
    assert result.success, result.error
    gaps = result.stat(IEG)
    assert gaps.count == result.counters["benchmark.http_2xx"] * (EVENTS - 1)
    assert GAP * 0.5 <= gaps.mean <= GAP * 2, gaps.mean
    # Uniform within +-10 ms: dozens of draws spread over more than 5 ms (without jitter
    # they would sit within the timer's microseconds of each other on an idle host).
    assert gaps.max - gaps.min > 0.005, (gaps.min, gaps.max)


def test_h2c_through_nghttpx_matches_the_gap() -> None:
    # nghttpx reads our server's chunks and sends each on as a DATA frame as it arrives: the
    # HTTP/2 session parses the SSE events out of DATA frames.
    with nhbench.TestServer(stream_events=EVENTS, stream_gap=f"{GAP * 1000:g}ms") as server:
        with nghttpx_reverse(server.address[1]) as port:
            result = _run(f"http://127.0.0.1:{port}/", protocol="http2")
    _assert_stream(result, EVENTS, GAP)


def test_http3_against_aioquic_matches_the_gap(tmp_path_factory: pytest.TempPathFactory) -> None:
    pytest.importorskip("aioquic")
    from test_h3 import H3Server, make_certs

    certs = make_certs(tmp_path_factory.mktemp("streamcerts"))
    server = H3Server(certs)
    try:
        result = _run(server.url(f"/sse/{EVENTS}/{GAP * 1000:g}"), protocol="http3",
                      cacert=certs["ca"])
    finally:
        server.kill()
    _assert_stream(result, EVENTS, GAP)


# ---- scripted HTTP/1.1 origins ---------------------------------------------------------------


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _chunked_head(content_type: bytes) -> bytes:
    return (b"HTTP/1.1 200 OK\r\nContent-Type: " + content_type +
            b"\r\nTransfer-Encoding: chunked\r\n\r\n")


def test_an_event_split_across_chunks_is_one_event() -> None:
    # Three SSE events in two chunks 30 ms apart: the first event ends only in the second
    # chunk (so it comes at 30 ms, not at once), which also carries two whole events.
    reply = Reply([_chunked_head(b"text/event-stream; charset=utf-8") + _chunk(b"data: hel"),
                   _chunk(b"lo\r\n\r\n: a comment\n\ndata: a\n\nevent: x\ndata\n\n")
                   + b"0\r\n\r\n"], gap=0.030)
    with ScriptedOrigin(lambda request: reply) as origin:
        result = _run(origin.url, rps=10)
    assert result.success, result.error
    n = result.counters["benchmark.http_2xx"]
    epr = result.stat(EPR)
    assert epr.count == n >= 5
    assert epr.min == epr.max == 3
    assert result.stat(TTFE).p(50) >= 0.025
    # The three came in one read: 0 apart.
    assert result.stat(IEG).count == 2 * n
    assert result.stat(IEG).max < 0.010


def test_a_body_that_is_not_an_event_stream_counts_its_chunks() -> None:
    # Four chunks GAP apart, the first GAP after the head; the last one ends the body.
    chunk = _chunk(b"data: not an event\n\n" * 3)
    reply = Reply([_chunked_head(b"text/plain"), chunk, chunk, chunk, chunk + b"0\r\n\r\n"],
                  gap=GAP)
    with ScriptedOrigin(lambda request: reply) as origin:
        result = _run(origin.url, rps=4)
    _assert_stream(result, 4, GAP)


def test_without_the_option_nothing_is_measured() -> None:
    with nhbench.TestServer(stream_events=3, stream_gap="1ms") as server:
        result = _run(server.url, stream_stats=False, rps=20, duration=0.3)
    assert result.success, result.error
    assert not _ids(result) & set(STREAMING)
    assert "time_to_first_event" not in result.render("json")
    assert "STREAMING" not in result.render("human")
    assert 'id="streaming"' not in result_page(result, "run.json")


def test_report_block_and_an_slo_on_the_first_event() -> None:
    with nhbench.TestServer(stream_events=5, stream_gap="20ms") as server:
        result = _run(server.url)
        ok = nhbench_cli("run", server.url, "--rps", "5", "--duration", "0.5", "--stream-stats",
                         "--slo", f"{TTFE}:p50<1s")
        bad = nhbench_cli("run", server.url, "--rps", "5", "--duration", "0.5",
                          "--stream-stats", "--slo", f"{TTFE}:p50<5ms")
    text = result.render("human")
    start = text.index("STREAMING")
    block = text[start:text.index("\n\n", start)].splitlines()[2:]
    assert [line.split()[0] for line in block] == list(STREAMING)
    assert text.index("LATENCY PHASES") < start
    # The JSON keeps Nighthawk's shape: the new statistics are statistics.
    assert f'"id": "{TTFE}"' in result.render("json")
    # The DataFrame: a row each, events per response a raw one.
    frame = result.to_dataframe(wide=True)
    n = result.counters["benchmark.http_2xx"]
    assert frame.loc[TTFE, "count"] == frame.loc[EPR, "count"] == n
    assert frame.loc[EPR, "mean"] == 5
    assert bool(frame.loc[EPR, "raw"]) and not bool(frame.loc[IEG, "raw"])
    # The browser's result page: a chart of the three with percentiles.
    page = result_page(result, "run.json")
    chart = page[page.index('id="streaming"'):]
    chart = chart[:chart.index("</div>")]
    for name in ("time_to_first_event", "inter_event_gap", "stream_duration"):
        assert name in chart
    assert ok.returncode == 0, ok.stderr
    # The first event comes 20 ms after the request: a 5 ms bound fails the run (exit 99).
    assert bad.returncode == 99, bad.stderr
    assert "time_to_first_event" in bad.stdout + bad.stderr


@pytest.mark.parametrize(("args", "expected"), [
    (("run", "grpc://127.0.0.1:1/", "--stream-stats"), "--stream-stats: not supported with grpc"),
    (("run", "tcp://127.0.0.1:1", "--stream-stats"), "--stream-stats: not for tcp://"),
    (("server", "--stream-events", "5", "--stream-gap", "5ms", "--stream-jitter", "10ms"),
     "--stream-jitter: 0.01 s is over --stream-gap"),
    (("server", "--stream-events", "10001"), "--stream-events: must be >= 0 and <= 10000"),
])
def test_what_cannot_be_streamed_is_refused_by_name(args: tuple[str, ...], expected: str) -> None:
    assert_one_line_error(nhbench_cli(*args), expected)
