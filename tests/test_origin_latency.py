"""``--latency-response-header-name`` (Nighthawk's origin latency statistic).

The client reads the named response header and records its value (nanoseconds) in
``benchmark_http_client.origin_latency_statistic``; a malformed value, or the header more
than once, counts in ``benchmark.origin_latency_header_errors`` instead (Nighthawk logs
"Bad origin delta" then). Observed against our real test server with
``emit_previous_request_delta_in_response_header`` over HTTP/1.1 and h2c, as Nighthawk's
own integration test does, and against a scripted origin for exact values, odd spellings
and responses read one byte at a time.
"""

from __future__ import annotations

import json
import time

import pytest
from support.scripted_origin import Reply, ScriptedOrigin
from test_cli_errors import nhbench_cli
from test_cli_run import cli

import nhbench
from nhbench import OptionsError
from nhbench.options import make_options

# The C core reads these on the wire: the asan session runs them too.
pytestmark = pytest.mark.core

ORIGIN = "benchmark_http_client.origin_latency_statistic"
ERRORS = "benchmark.origin_latency_header_errors"
NS = 1e9


def _ids(result: nhbench.Result) -> set[str]:
    return {s.id for s in result.global_result.statistics}


@pytest.mark.parametrize("protocol", ["http1", "http2"])
def test_test_server_deltas_are_recorded(protocol: str) -> None:
    rps = 100
    with nhbench.TestServer(emit_previous_request_delta_in_response_header="x-delta") as server:
        started = time.monotonic()
        result = nhbench.run(
            server.url, rps=rps, duration=0.6, connections=1,
            protocol=protocol, h2c=protocol == "http2",
            latency_response_header_name="X-Delta",  # matched case-insensitively
        )
        elapsed = time.monotonic() - started
        served = server.stats()["requests"]
    ok = result.counters["benchmark.http_2xx"]
    assert ok == served > 10
    origin = result.stat(ORIGIN)
    # The server emits the header from its second request on (there is no delta before the
    # first), exactly as Nighthawk's test server does: n - 1 values.
    assert origin.count == ok - 1
    assert result.counters[ERRORS] == 0
    # The deltas are the times between consecutive arrivals at the server: each is positive
    # and their sum is the time from the first arrival to the last, which lies within the
    # run and covers most of the schedule (wide bounds: no timing threshold).
    assert origin.min > 0
    total = origin.mean * origin.count
    assert total < elapsed
    assert total > 0.5 * (ok - 2) / rps
    # Recorded in nanoseconds like every histogram, so the percentiles are in seconds.
    assert origin.max < elapsed


def test_absent_when_the_option_is_not_given(server: nhbench.TestServer) -> None:
    result = nhbench.run(server.url, rps=50, duration=0.3)
    assert ORIGIN not in _ids(result)
    assert result.counters[ERRORS] == 0
    # No statistic in any format (the zero counter may be listed among the zero counters,
    # like every counter nhbench knows).
    for fmt in ("json", "yaml", "dotted", "csv", "fortio", "prometheus"):
        assert "origin_latency_statistic" not in result.render(fmt), fmt
    assert "Origin latency" not in result.render("human")


def test_present_but_empty_when_no_response_has_the_header(server: nhbench.TestServer) -> None:
    # As in Nighthawk's test with an origin that does not emit it: the statistic exists
    # (count 0) because it was asked for.
    result = nhbench.run(server.url, rps=50, duration=0.3, latency_response_header_name="x-n")
    assert result.stat(ORIGIN).count == 0
    assert result.counters[ERRORS] == 0
    data = json.loads(result.render("json"))
    [stat] = [s for s in data["results"][-1]["statistics"] if s["id"] == ORIGIN]
    assert int(stat["count"]) == 0


def _scripted(header_lines: list[bytes], *, dribble: bool = False) -> ScriptedOrigin:
    head = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n" + b"".join(
        line + b"\r\n" for line in header_lines) + b"\r\n"
    return ScriptedOrigin(lambda request: Reply(head + b"ok", dribble=dribble))


def _run_against(origin: ScriptedOrigin, name: str = "x-origin-delta") -> nhbench.Result:
    return nhbench.run(origin.url, rps=40, duration=0.3, connections=1,
                       latency_response_header_name=name)


@pytest.mark.parametrize(
    ("value", "recorded"),
    [
        (b"1234567", 1234567),
        (b"0", 0),
        (b"+42", 42),  # absl::SimpleAtoi takes a sign
        (b"-0", 0),  # ... and -0 is not negative
        (b"42 \t", 42),  # trailing white space (llhttp keeps what follows the value)
        (b"9223372036854775807", 60 * 10**9),  # int64 max: the histograms stop at 60 s
    ],
)
def test_exact_values(value: bytes, recorded: int) -> None:
    with _scripted([b"X-Origin-Delta: " + value]) as origin:
        result = _run_against(origin)
    ok = result.counters["benchmark.http_2xx"]
    stat = result.stat(ORIGIN)
    assert ok > 0 and stat.count == ok
    assert result.counters[ERRORS] == 0
    assert stat.min == stat.max == pytest.approx(recorded / NS, abs=1e-12)


@pytest.mark.parametrize(
    "lines",
    [
        [b"x-origin-delta: abc"],
        [b"x-origin-delta: 12a"],
        [b"x-origin-delta: -5"],
        [b"x-origin-delta: 1.5"],
        [b"x-origin-delta:"],
        [b"x-origin-delta: 9223372036854775808"],  # beyond int64
        [b"x-origin-delta: 99999999999999999999999"],
        [b"x-origin-delta: 5", b"X-Origin-Delta: 6"],  # more than once
    ],
    ids=["letters", "trailing-garbage", "negative", "fraction", "empty", "int64-overflow",
         "huge", "twice"],
)
def test_malformed_values_are_counted_not_recorded(lines: list[bytes]) -> None:
    with _scripted(lines) as origin:
        result = _run_against(origin)
    ok = result.counters["benchmark.http_2xx"]
    assert ok > 0
    assert result.stat(ORIGIN).count == 0
    assert result.counters[ERRORS] == ok


def test_similar_names_do_not_match() -> None:
    lines = [b"x-origin-delt: 1", b"x-origin-delta-2: 2", b"xx-origin-delta: 3",
             b"x-origin-delta: 777", b"x-origin-deltb: 4"]
    with _scripted(lines) as origin:
        result = _run_against(origin)
    stat = result.stat(ORIGIN)
    assert stat.count == result.counters["benchmark.http_2xx"] > 0
    assert stat.min == stat.max == pytest.approx(777 / NS, abs=1e-12)


def test_names_and_values_split_across_reads() -> None:
    # One byte per read: the name and the value reach the parser in many pieces.
    with _scripted([b"Date: x", b"X-ORIGIN-Delta:  31415 ", b"Server: y"], dribble=True) as origin:
        result = nhbench.run(origin.url, rps=20, duration=0.3, connections=1,
                             latency_response_header_name="x-origin-delta")
    stat = result.stat(ORIGIN)
    assert stat.count == result.counters["benchmark.http_2xx"] > 0
    assert stat.min == stat.max == pytest.approx(31415 / NS, abs=1e-12)


def test_interim_responses_are_not_read() -> None:
    # A 103 carrying the header precedes the real response, which carries another value:
    # only the final response's counts (and the 103's does not make it "twice").
    response = (b"HTTP/1.1 103 Early Hints\r\nx-origin-delta: 1\r\n\r\n"
                b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nx-origin-delta: 2000\r\n\r\n")
    with ScriptedOrigin(lambda request: Reply(response)) as origin:
        result = _run_against(origin)
    stat = result.stat(ORIGIN)
    assert stat.count == result.counters["benchmark.http_2xx"] > 0
    assert stat.min == stat.max == pytest.approx(2000 / NS, abs=1e-12)
    assert result.counters[ERRORS] == 0


def test_json_output_carries_the_statistic() -> None:
    with nhbench.TestServer(emit_previous_request_delta_in_response_header="x-delta") as server:
        result = nhbench.run(server.url, rps=50, duration=0.4, connections=1,
                             latency_response_header_name="x-delta")
    data = json.loads(result.render("json"))
    [glob] = [r for r in data["results"] if r["name"] == "global"]
    [stat] = [s for s in glob["statistics"] if s["id"] == ORIGIN]
    assert int(stat["count"]) == result.stat(ORIGIN).count > 0
    assert "Origin latency" in result.render("human")


def test_cli_flag_and_malformed_warning() -> None:
    with _scripted([b"x-origin-delta: nope"]) as origin:
        proc = cli("run", origin.url, "--rps", "20", "--duration", "0.3",
                   "--latency-response-header-name", "x-origin-delta",
                   "--output-format", "json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    counters = {c["name"]: int(c["value"]) for c in data["results"][-1]["counters"]}
    assert counters[ERRORS] == counters["benchmark.http_2xx"] > 0
    # One warning line at the end (the default verbosity shows warnings).
    assert "carried a malformed or repeated x-origin-delta header" in proc.stderr
    assert proc.stderr.count("\n") == 1


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("x delta", "latency_response_header_name: must be a header name"),
        ("x:delta", "latency_response_header_name: must be a header name"),
        ("x" * 257, "latency_response_header_name: must be a header name of at most 256"),
    ],
)
def test_bad_names_are_refused(value: str, message: str) -> None:
    with pytest.raises(OptionsError, match=message):
        make_options("http://127.0.0.1/", latency_response_header_name=value)


def test_bad_name_on_the_command_line() -> None:
    proc = nhbench_cli("run", "http://127.0.0.1:1/", "--latency-response-header-name", "a b")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "--latency-response-header-name: must be a header name" in proc.stderr


def test_empty_name_means_off_and_names_are_lower_cased() -> None:
    assert make_options("http://127.0.0.1/", latency_response_header_name="").\
        latency_response_header_name is None
    assert make_options("http://127.0.0.1/", latency_response_header_name="X-Envoy-Upstream-"
                        "Service-Time").latency_response_header_name == (
        "x-envoy-upstream-service-time")
