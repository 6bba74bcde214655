"""Streaming responses (docs/engine.md "Streaming responses"): with --stream-stats the client
times each response's events, and the figures match the gaps a server was set to send them
at, over HTTP/1.1, HTTP/2 (h2c) and HTTP/3.

- Our test server's --stream-events N --stream-gap G sends event k at k * G after the request
  (HTTP/1.1, chunked): time_to_first_event ~ G, inter_event_gap ~ G (N - 1 per response),
  stream_duration ~ (N - 1) G, events_per_response exactly N. The gap is 20 ms, far above
  the host's timer resolution (`nhbench calibrate`: microseconds for the server's timerfd and
  the client's clock), so the assertions are wide ratios: within [0.5x, 2x].
- Independent peers: nghttpx (a reverse proxy passing our server's chunks on as HTTP/2 DATA
  frames, for h2c), aioquic's HTTP/3 server (tests/support/h3_server.py, its own SSE stream)
  and scripted HTTP/1.1 origins (tests/support/scripted_origin.py): an SSE event split
  across chunks is one event, two events in one chunk are two, and a body that is not an
  event stream counts its chunks.
"""

from __future__ import annotations

import pytest
from support.cli import nhbench_cli
from support.http_proxies import nghttpx_reverse
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
        served = server.stats()["requests"]
    n = _assert_stream(result, EVENTS, GAP)
    assert served == n


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


def test_an_http2_request_to_a_streaming_server_gets_501() -> None:
    # The server streams over HTTP/1.1 only: an HTTP/2 request is refused by status, never
    # answered with something that is not the stream asked for.
    with nhbench.TestServer(stream_events=3, stream_gap="1ms") as server:
        result = nhbench.run(server.url, protocol="http2", rps=20, duration=0.3, cpus=1)
    c = result.counters
    # A 5xx fails the run at once (the default failure predicates): the first one says it.
    assert c["benchmark.http_501"] == c["benchmark.http_5xx"] >= 1, c
    assert c["benchmark.http_2xx"] == 0, c


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
