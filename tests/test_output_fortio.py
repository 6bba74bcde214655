"""The ``fortio`` and ``experimental_fortio_pedantic`` output formats.

Three kinds of reference: Nighthawk's own goldens (byte for byte, from Nighthawk's real JSON
output as input), a hand-built document whose expected Fortio values are derived here by hand
from Nighthawk's formatter rules, and a real run against our test server whose Fortio output
must agree with the run's own counters and the server's status counts.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import nhbench
from nhbench.outputs import FORMATS, render
from nhbench.outputs._fortio import format_fortio, format_fortio_pedantic

DATA = Path(__file__).parent / "data" / "nighthawk"


def _merge_repeated(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # Nighthawk's file names a repeated field ("labels") several times, once with a single
    # value; protobuf's parser appends them all, where json.loads would keep the last one.
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out and (isinstance(out[key], list) or isinstance(value, list)):
            before = out[key] if isinstance(out[key], list) else [out[key]]
            out[key] = before + (value if isinstance(value, list) else [value])
        else:
            out[key] = value
    return out


def load_nighthawk(path: Path) -> dict[str, Any]:
    """Read a Nighthawk JSON file as Nighthawk's (protobuf) parser reads it: trailing commas
    accepted, repeated keys of a repeated field appended."""
    text = re.sub(r",(\s*[}\]])", r"\1", path.read_text())
    document: dict[str, Any] = json.loads(text, object_pairs_hook=_merge_repeated)
    return document


@pytest.fixture(scope="module")
def medium() -> dict[str, Any]:
    return load_nighthawk(DATA / "output_formatter.medium.proto.gold")


def test_fortio_matches_nighthawks_golden_byte_for_byte(medium):
    expected = (DATA / "output_formatter.medium.fortio.gold").read_text()
    assert format_fortio(medium) == expected


def test_pedantic_matches_nighthawks_golden_byte_for_byte(medium):
    expected = (DATA / "output_formatter.medium.fortio-noquirks.gold").read_text()
    assert format_fortio_pedantic(medium) == expected


def test_both_formats_are_registered():
    assert FORMATS["fortio"].__name__ == "render_fortio"
    assert FORMATS["experimental_fortio_pedantic"].__name__ == "render_fortio_pedantic"


def _statistic(stat_id, points, **summary):
    return {"id": stat_id, "count": "500",
            "percentiles": [{"percentile": p, "count": str(c), "duration": d} for p, c, d in points],
            **summary}


def hand_built(**extra_counters: int) -> dict[str, Any]:
    counters = {"upstream_rq_total": 500, "benchmark.http_2xx": 490, "benchmark.http_5xx": 10,
                "upstream_cx_tx_bytes_total": 1000, "upstream_cx_rx_bytes_total": 2000,
                **extra_counters}
    latency = _statistic(
        "benchmark_http_client.request_to_response",
        # 127/128 is exact in binary, so 100 * it is exactly 99.21875.
        [(0, 1, "0.001s"), (0.5, 250, "0.002s"), (0.9, 450, "0.004s"),
         (0.9921875, 496, "0.008s"), (1, 500, "0.010s")],
        min="0.001s", max="0.010s", mean="0.002500s", pstdev="0.001s",
    )
    worker = {"name": "worker_0", "statistics": [], "counters": [], "execution_duration": "9s"}
    return {
        "options": {"labels": ["a", "b"], "requests_per_second": 100, "connections": 4,
                    "uri": "http://127.0.0.1:8080/x", "duration": "3s", "jitter_uniform": "0s"},
        "results": [
            worker, {**worker, "name": "worker_1"},
            {"name": "global", "statistics": [latency],
             "counters": [{"name": k, "value": str(v)} for k, v in counters.items()],
             "execution_duration": "2.500s"},
        ],
        "version": {"version": {"major_number": 1, "minor_number": 2, "patch": 3}},
        "timestamp": "2024-05-06T09:08:09.120+02:00",
    }


# Derived by hand from Nighthawk's formatter rules: 2 workers (3 results), so the requested
# rate and connections double; 500 requests over 2.5 s; one Data bucket per percentile from
# the previous value with the samples in between (the first starts at its own end); Fortio's
# percentiles are the first reported point at or above 50, 75, 80, 90, 95, 99, 99.9 %, each
# taken once, rounded down to 0.1 (0.9921875 -> 99.2), without 0 and 100 %.
EXPECTED = {
    "Labels": "a b",
    "RequestedQPS": 200,
    "ActualQPS": 200,
    "ActualDuration": 2500000000,
    "NumThreads": 8,
    "DurationHistogram": {
        "Count": "500",
        "Data": [
            {"Start": 0.001, "End": 0.001, "Percent": 0, "Count": "1"},
            {"Start": 0.001, "End": 0.002, "Percent": 50, "Count": "249"},
            {"Start": 0.002, "End": 0.004, "Percent": 90, "Count": "200"},
            {"Start": 0.004, "End": 0.008, "Percent": 99.21875, "Count": "46"},
            {"Start": 0.008, "End": 0.01, "Percent": 100, "Count": "4"},
        ],
        "Min": 0.001, "Max": 0.01, "Sum": 1.25, "Avg": 0.0025, "StdDev": 0.001,
        "Percentiles": [{"Percentile": 50, "Value": 0.002}, {"Percentile": 90, "Value": 0.004},
                        {"Percentile": 99.2, "Value": 0.008}],
    },
    "RetCodes": {"200": "490"},
    "URL": "http://127.0.0.1:8080/x",
    "Version": "1.2.3",
    "Jitter": False,
    "RunType": "HTTP",
    "BytesSent": "1000",
    "BytesReceived": "2000",
    "StartTime": "2024-05-06T07:08:09.120Z",
    "RequestedDuration": "3s",
}


def test_hand_built_document_gives_the_values_derived_by_hand():
    text = format_fortio(hand_built())
    assert json.loads(text) == EXPECTED
    assert list(json.loads(text)) == list(EXPECTED)  # Nighthawk's field order
    assert text.startswith('{\n "Labels": "a b",\n "RequestedQPS": 200,\n')
    assert text.endswith('\n "RequestedDuration": "3s"\n}\n')


def test_pedantic_has_fortios_types():
    data = json.loads(format_fortio_pedantic(hand_built()))
    assert data["RequestedQPS"] == "200"
    assert data["DurationHistogram"]["Count"] == 500
    assert [d["Count"] for d in data["DurationHistogram"]["Data"]] == [1, 249, 200, 46, 4]
    assert data["RetCodes"] == {"200": 490}
    assert (data["BytesSent"], data["BytesReceived"]) == (1000, 2000)
    # Everything else as in `fortio`.
    plain = json.loads(format_fortio(hand_built()))
    assert data["ActualQPS"] == plain["ActualQPS"] and data["Labels"] == plain["Labels"]


def test_ret_codes_come_from_the_per_status_code_counters_when_the_document_has_them():
    document = hand_built(**{"benchmark.http_200": 480, "benchmark.http_204": 10,
                             "benchmark.http_503": 10})
    assert json.loads(format_fortio(document))["RetCodes"] == {
        "200": "480", "204": "10", "503": "10"}
    assert json.loads(format_fortio_pedantic(document))["RetCodes"] == {
        "200": 480, "204": 10, "503": 10}


def test_max_rate_is_fortios_max_in_pedantic_and_zero_in_plain():
    document = hand_built()
    document["options"]["requests_per_second"] = 0
    assert json.loads(format_fortio(document))["RequestedQPS"] == 0
    assert json.loads(format_fortio_pedantic(document))["RequestedQPS"] == "max"


def test_jitter_and_missing_pieces_follow_nighthawk():
    document = hand_built()
    document["options"]["jitter_uniform"] = "0.000000494s"
    del document["timestamp"]
    del document["options"]["duration"]
    document["results"][-1]["statistics"] = []
    data = json.loads(format_fortio(document))
    assert data["Jitter"] is True
    assert data["StartTime"] == "1970-01-01T00:00:00Z"  # an unset Timestamp
    assert data["RequestedDuration"] == "0s"
    assert "DurationHistogram" not in data and "Sizes" not in data


@pytest.mark.parametrize(
    ("options", "run_type", "jitter"),
    [
        ({"uri": "http://127.0.0.1:1/", "rps": 10, "jitter": True}, "HTTP", True),
        ({"uri": "http://127.0.0.1:1/", "rps": 10}, "HTTP", False),
        ({"uri": "tcp://127.0.0.1:1", "rps": 10, "jitter": True}, "TCP", True),
        ({"uri": "udp://127.0.0.1:1"}, "UDP", False),
        ({"uri": "grpc://127.0.0.1:1", "ping": True}, "GRPC Ping", False),
        ({"uri": "grpc://127.0.0.1:1", "ping": True, "grpc_ping_delay": "10ms"},
         "GRPC Ping Delay=10ms", False),
        ({"uri": "grpc://127.0.0.1:1", "grpc_service": "svc"}, "GRPC Health for 'svc'", False),
        ({"uri": "grpcs://127.0.0.1:1"}, "GRPC Health for ''", False),
    ],
)
def test_run_type_and_jitter_are_fortios(options: dict[str, Any], run_type: str,
                                         jitter: bool) -> None:
    # Fortio's runners set RunType "HTTP", "TCP", "UDP", "GRPC Ping[ Delay=D]" or "GRPC
    # Health for 'SERVICE'" (fortio 1.66.5), and Jitter is its -jitter; these were "HTTP"
    # and false for every run.
    result = nhbench.Result(options=nhbench.Options(**options),
                            results=[nhbench.WorkerResult(name="global")])
    for text in (render(result, "fortio"), render(result, "experimental_fortio_pedantic")):
        data = json.loads(text)
        assert data["RunType"] == run_type
        assert data["Jitter"] is jitter


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(results=[]), "fortio: the result has no results"),
        (lambda d: d["results"][-1].update(name="worker_2"), "fortio: the result has no 'global'"),
        (lambda d: d["results"][-1].update(execution_duration="soon"), "execution_duration"),
    ],
)
def test_a_document_without_what_the_formatter_needs_is_one_clear_error(change, message):
    document = hand_built()
    change(document)
    with pytest.raises(ValueError, match=message) as info:
        format_fortio(document)
    assert "\n" not in str(info.value)


def test_strings_are_escaped_as_protobuf_does():
    document = hand_built()
    label = 'say "hi" <b>\n\x7f\u00e9\u2028\U000e0041'
    document["options"]["labels"] = [label]
    text = format_fortio(document)
    assert ('"Labels": "say \\"hi\\" \\u003cb\\u003e\\n\\u007f\u00e9\\u2028'
            '\\udb40\\udc41",') in text
    assert json.loads(text)["Labels"] == label


@pytest.mark.core
def test_a_real_run_in_fortio_agrees_with_its_counters_and_the_server():
    with nhbench.TestServer() as server:
        result = nhbench.run(server.url + "?status=503:20", rps=300, duration=1.0, connections=3,
                             label=("fortio", "check"), no_default_failure_predicates=True)
        written = server.stats()["status"]
    plain = json.loads(render(result, "fortio"))
    pedantic = json.loads(render(result, "experimental_fortio_pedantic"))
    latency = result.stat("benchmark_http_client.request_to_response")
    for data, as_count in ((plain, str), (pedantic, int)):
        histogram = data["DurationHistogram"]
        assert histogram["Count"] == as_count(latency.count) == as_count(300)
        # The buckets hold every sample once.
        assert sum(int(bucket["Count"]) for bucket in histogram["Data"]) == latency.count
        assert data["RetCodes"] == {code: as_count(n) for code, n in written.items()}
        assert data["Labels"] == "fortio check"
        assert data["NumThreads"] == 3
        assert data["URL"] == result.options.uri
        assert data["ActualQPS"] == pytest.approx(
            result.counters["upstream_rq_total"] / result.duration, rel=1e-6)
    assert plain["RequestedQPS"] == 300 and pedantic["RequestedQPS"] == "300"


# ---- Fortio's own JSON read back (nhbench.load_result) -----------------------------------

FORTIO_DATA = Path(__file__).parent / "data" / "fortio"
FORTIO_BIN = "/root/go/bin/fortio"


def test_a_fortio_file_loads_with_its_counts_percentiles_and_options():
    # Written by fortio 1.66.5 itself (tests/data/fortio/README.md): 100 calls at 100 qps on
    # 2 connections for 1 s, 70 answered 200 and 30 answered 503.
    result = nhbench.load_result(FORTIO_DATA / "fortio-1.66.5-load.json")
    raw = json.loads((FORTIO_DATA / "fortio-1.66.5-load.json").read_text())
    c = result.counters
    assert (c["benchmark.http_200"], c["benchmark.http_503"]) == (70, 30)
    assert (c["benchmark.http_2xx"], c["benchmark.http_5xx"]) == (70, 30)
    assert c["upstream_rq_total"] == 100 and c["upstream_cx_total"] == raw["SocketCount"]
    latency = result.stat("benchmark_http_client.request_to_response")
    assert latency.count == 100
    assert (latency.min, latency.max, latency.mean) == (
        raw["DurationHistogram"]["Min"], raw["DurationHistogram"]["Max"],
        raw["DurationHistogram"]["Avg"])
    # Fortio's own percentiles, exactly as it reported them.
    for point in raw["DurationHistogram"]["Percentiles"]:
        assert latency.p(point["Percentile"]) == point["Value"]
    # Every Data bucket's end is a point, at its cumulative count.
    counts = {p.percentile: p.count for p in latency.percentiles}
    assert counts[0.94] == 94 and counts[1.0] == 100
    body = result.stat("benchmark_http_client.response_body_size")
    assert (body.count, body.min, body.max) == (100, 55, 72)
    o = result.options
    assert (o.uri, o.rps, o.connections, o.duration, o.label) == (
        raw["URL"], 100.0, 2, 1.0, ("hello fortio",))
    assert result.duration == raw["ActualDuration"] / 1e9
    assert result.timestamp.isoformat() == "2026-11-23T12:24:35.078987+00:00"
    assert result.version == "fortio 1.66.5"


def test_a_fortio_file_goes_back_out_as_fortio(tmp_path):
    result = nhbench.load_result(FORTIO_DATA / "fortio-1.66.5-load.json")
    data = json.loads(render(result, "experimental_fortio_pedantic"))
    assert data["RetCodes"] == {"200": 70, "503": 30}
    assert data["DurationHistogram"]["Count"] == 100
    assert data["Labels"] == "hello fortio" and data["RequestedQPS"] == "100"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(RunType="GRPC"), "a Fortio GRPC result: nhbench reads Fortio's HTTP"),
        (lambda d: d.update(RetCodes={"ok": 1}), "RetCodes: 'ok' is not an HTTP status code"),
        (lambda d: d["DurationHistogram"].update(Count="many"), "Count: expected a number"),
        (lambda d: d.update(RequestedQPS="fast"), "RequestedQPS: expected a rate or 'max'"),
        (lambda d: d.update(StartTime="yesterday"), "StartTime: expected an RFC 3339 time"),
    ],
)
def test_a_broken_fortio_file_is_one_line_naming_it(tmp_path, change, message):
    data = json.loads((FORTIO_DATA / "fortio-1.66.5-load.json").read_text())
    change(data)
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(data))
    with pytest.raises(nhbench.ResultFileError) as info:
        nhbench.load_result(path)
    text = str(info.value)
    assert "\n" not in text and str(path) in text and message in text, text


def test_fortio_special_codes_and_an_exact_count_run(tmp_path):
    data = json.loads((FORTIO_DATA / "fortio-1.66.5-load.json").read_text())
    data.update(RetCodes={"200": 90, "-1": 7, "999": 3}, Exactly=100,
                RequestedDuration="exactly 100 calls", RequestedQPS="max")
    path = tmp_path / "exact.json"
    path.write_text(json.dumps(data))
    result = nhbench.load_result(path)
    c = result.counters
    assert (c["benchmark.http_200"], c["benchmark.stream_resets"], c["benchmark.http_xxx"]) == (
        90, 7, 3)
    assert result.options.rps == 0 and result.options.no_duration
    assert result.options.termination_predicate == {"upstream_rq_total": 99}


@pytest.mark.core
@pytest.mark.skipif(not Path(FORTIO_BIN).exists(), reason=f"{FORTIO_BIN} is not installed")
def test_a_fresh_fortio_run_loads_with_the_servers_counts(tmp_path):
    import subprocess

    out = tmp_path / "run.json"
    with nhbench.TestServer() as server:
        subprocess.run(
            [FORTIO_BIN, "load", "-allow-initial-errors", "-qps", "200", "-c", "2", "-n", "100",
             "-labels", "fresh run", "-json", str(out), server.url + "?status=429:25"],
            check=True, capture_output=True, timeout=60)
        written = server.stats()["status"]
    result = nhbench.load_result(out)
    # Fortio's warm-up calls (one per connection) reach the server but not its counts.
    loaded = {str(code): result.counters[f"benchmark.http_{code}"] for code in (200, 429)}
    assert sum(loaded.values()) == 100 == result.counters["upstream_rq_total"]
    assert all(0 <= int(written.get(k, 0)) - v <= 2 for k, v in loaded.items())
    assert result.options.termination_predicate == {"upstream_rq_total": 99}
    assert result.options.label == ("fresh run",)
