"""Reading results back: nhbench's json (Nighthawk's Output plus the nhbench
user_defined_outputs entry) gives back an equal Result; nhbench's JSON of the earlier format
still loads; Nighthawk's own JSON loads (its quirks included) and is told apart from ours.

The results are built from core dicts by hand (tests/support/fakecore.py), so the values
are known; tests/test_nighthawk_proto.py covers real runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from packaging.version import Version
from support.fakecore import core_result, core_worker, spread

import nhbench
from nhbench import Options, Result, ResultFileError, load_result
from nhbench._load import detect_format, parse_json
from nhbench._timeline import IntervalRecord, Timeline
from nhbench.outputs import render_json

DATA = Path(__file__).resolve().parent / "data"
NIGHTHAWK = DATA / "nighthawk"
BEFORE = DATA / "nhbench-json-earlier-format.json"


def rich_result() -> Result:
    """Two workers, a timeline, every run-level field away from its default, options
    Nighthawk has no place for, an explicitly given default failure predicate, a fractional
    rate and a failed predicate."""
    options = Options(
        uri="https://127.0.0.1:8443/a?b=c", rps=12.5, concurrency=2, duration="1.5s",
        request_timeout="2s", request_header=["x-a: b", "x-c: d:e"], label=["one", "two"],
        percentiles="50,90,99.9", stats_interval="0.5s", insecure=True, sni="example.test",
        failure_predicate={"benchmark.http_4xx": 0, "benchmark.http_5xx": 3},
        termination_predicate={"benchmark.http_2xx": 100}, protocol="http2",
        max_concurrent_streams=10, drain_timeout="1s", tls_session_reuse=False,
        request_method="post", request_body_size=10,
    )
    workers = [core_worker(spread(300, seed=i), counters={"benchmark.http_5xx": 2 + i})
               for i in range(2)]
    timeline = Timeline([
        IntervalRecord(start=0.0, duration=0.5, requests=200, rps=400.0, p50=0.0012,
                       p90=0.0031, p99=0.0049, max=0.0051, errors=1, blocked=2,
                       counters={"benchmark.http_2xx": 199, "benchmark.http_5xx": 1}),
        IntervalRecord(start=0.5, duration=0.5, requests=0, rps=0.0),
    ])
    return Result.from_core(
        core_result(workers, terminated_by="failure_predicate:benchmark.http_5xx",
                    failed_predicates=["benchmark.http_5xx"], error="connection reset"),
        options, timeline=timeline,
    ).model_copy(update={"insecure": True})


def test_json_round_trip_gives_an_equal_result(tmp_path: Path) -> None:
    result = rich_result()
    text = render_json(result)
    again = Result.model_validate_json(text)
    assert again == result
    # Field by field too, so that a failure says where.
    for name in Result.model_fields:
        assert getattr(again, name) == getattr(result, name), name
    assert again.latency.hdr_histogram == result.latency.encoded()
    assert again.latency.p(95) == result.latency.p(95)  # a point computed from the histogram
    assert again.latency.mean == result.latency.mean  # exact, not rounded to 1 ns
    assert len(again.timeline) == 2 and again.timeline[0].counters["benchmark.http_5xx"] == 1
    assert again.options.rps == 12.5 and again.options.request_timeout == 2.0
    assert again.options.failure_predicate == {"benchmark.http_4xx": 0, "benchmark.http_5xx": 3}
    assert again.counters["benchmark.http_1xx"] == 0  # zero counters come back
    # load_result and model_dump_json (what the sweep and the pytest plugin write) agree.
    path = tmp_path / "result.json"
    path.write_text(result.model_dump_json(indent=2))
    assert load_result(path) == result
    assert json.loads(result.model_dump_json()) == json.loads(text)
    # A second round is byte-identical.
    assert render_json(again) == text


def test_round_trip_of_a_result_without_entries() -> None:
    result = Result(options=Options(uri="http://127.0.0.1:1/"), terminated_by="error",
                    error="connection refused")
    again = Result.model_validate_json(render_json(result))
    assert again == result and again.results == []


def test_json_is_nighthawks_layout() -> None:
    text = render_json(rich_result())
    assert text.startswith('{\n "options": {\n  "output_format": {\n   "value": "HUMAN"\n  },')
    document = json.loads(text)
    assert list(document) == ["options", "results", "version", "timestamp"]
    # The release numbers of the version (a development build's 0.1.devN+g<hash> is 0.1.0).
    major, minor, patch = (*Version(nhbench.__version__).release, 0, 0)[:3]
    assert document["version"] == {"version": {"major_number": major, "minor_number": minor,
                                               "patch": patch}}
    options = document["options"]
    assert options["requests_per_second"] == 12  # a uint32: the exact 12.5 is in the extension
    assert options["concurrency"] == "2" and options["duration"] == "1.500s"
    assert options["protocol"] == {"value": "HTTP2"}
    assert options["request_options"] == {
        "request_method": "POST",
        "request_headers": [{"header": {"key": "x-a", "value": "b"}, "append": False},
                            {"header": {"key": "x-c", "value": "d:e"}, "append": False}],
        "request_body_size": 10,
    }
    assert options["failure_predicates"]["benchmark.http_5xx"] == "3"  # uint64: a string
    assert options["termination_predicates"] == {"benchmark.http_2xx": "100"}
    assert options["tls_context"] == {"sni": "example.test"}
    assert [r["name"] for r in document["results"]] == ["worker_0", "worker_1", "global"]
    for entry in document["results"]:
        assert list(entry)[:4] == ["name", "statistics", "counters", "user_defined_outputs"]
        (extension,) = entry["user_defined_outputs"]
        assert extension["typed_output"]["@type"] == \
            "type.googleapis.com/google.protobuf.Struct"
    run = document["results"][-1]["user_defined_outputs"][0]["typed_output"]["value"]["run"]
    assert run["terminated_by"] == "failure_predicate:benchmark.http_5xx"
    assert run["options"]["rps"] == 12.5 and "uri" not in run["options"]
    # Options at nhbench's default that Nighthawk's options do not carry are not repeated.
    assert "tls_ciphers" not in run["options"]


def test_json_written_in_the_earlier_format_still_loads() -> None:
    # Written by nhbench at main 5bfab80 (Result.model_dump_json in the earlier format).
    old = load_result(BEFORE)
    assert detect_format(json.loads(BEFORE.read_text())) == "nhbench"
    assert old.options.rps == 250.5 and old.options.label == ("before", "issue-12")
    assert [r.name for r in old.results] == ["worker_0", "worker_1", "global"]
    assert old.latency.count == 240 and old.latency.p(95) > 0
    assert len(old.timeline) == 2
    # Written again in today's json, it is still the same result.
    assert Result.model_validate_json(render_json(old)) == old


def test_nighthawk_output_loads() -> None:
    path = NIGHTHAWK / "output_formatter.medium.proto.gold"
    assert detect_format(parse_json(path.read_text())) == "nighthawk"
    result = load_result(path)
    assert result.version == "Nighthawk"  # this file has no version object
    options = result.options
    assert options.uri == "https://www.google.com/"
    assert (options.rps, options.connections, options.concurrency) == (10, 100, 3)
    assert options.duration == 2 and options.timeout == 30
    assert options.label == ("label-a", "label-b", "Nighthawk")
    assert options.max_requests_per_connection == 4294937295
    assert options.sequencer_idle_strategy == "spin"
    # The predicates in force are the file's (Nighthawk's defaults are fewer than nhbench's).
    assert options.failure_predicates == {"benchmark.http_4xx": 0, "benchmark.http_5xx": 0,
                                          "benchmark.pool_connection_failure": 0}
    assert [r.name for r in result.results] == ["worker_0", "worker_1", "worker_2", "global"]
    worker = result.results[0].stat("benchmark_http_client.queue_to_connect")
    # Percentiles as Nighthawk wrote them (there is no histogram to recompute them from).
    assert worker.count == 17 and worker.p(50) == 0.000020383 and worker.p(75) == 0.00002382
    with pytest.raises(ValueError, match="no histogram"):
        result.stat("benchmark_http_client.request_to_response").p(12.345)
    assert result.stat("benchmark_http_client.response_body_size").raw
    assert result.global_result.execution_duration == pytest.approx(2.000000429)
    assert result.counters["upstream_cx_total"] > 0
    # Our json of it is ours (it carries the nhbench entry) and loads back equal.
    again_text = render_json(result)
    assert detect_format(json.loads(again_text)) == "nhbench"
    assert Result.model_validate_json(again_text) == result


def test_nighthawk_output_without_a_uri_is_one_clear_error() -> None:
    # Nighthawk's formatter test data has no uri (and 0 connections): not a run nhbench
    # can describe with its options.
    path = NIGHTHAWK / "output_formatter.json.gold"
    with pytest.raises(ResultFileError) as info:
        load_result(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message
    assert "Nighthawk's JSON output" in message and "uri" in message


def test_nighthawk_quirks_are_read() -> None:
    # Repeated keys merge (lists) or the last wins (scalars); a trailing comma is ignored;
    # a single string stands for a one-item list; enum wrappers may be numbers or empty.
    text = """{"options": {"uri": "http://127.0.0.1:1/", "labels": ["a"], "labels": "b",
      "connections": 3, "connections": 7, "sequencer_idle_strategy": {"value": 3},
      "address_family": {}, "request_options": {"request_method": 3},
      "requests_per_second": "20", "h2": true,},
      "results": [{"name": "global", "counters": [{"name": "benchmark.http_2xx",
      "value": "4"}], "statistics": [{"id": "x", "count": "2", "raw_min": "1",
      "raw_max": "3", "raw_mean": 2, "percentiles": [{"percentile": 0.5, "count": "1",
      "raw_value": 1}]}], "execution_duration": "1s"},],
      "version": {"version": {"major_number": 1}}}"""
    document = parse_json(text)
    result = Result.model_validate(document)
    assert result.options.label == ("a", "b")
    assert result.options.connections == 7
    assert result.options.rps == 20 and result.options.protocol == "http2"
    assert result.options.sequencer_idle_strategy == "sleep"  # enum number 3
    assert result.options.address_family == "auto"  # a wrapper at its default: {}
    assert result.options.request_method == "POST"  # RequestMethod number 3
    assert result.counters["benchmark.http_2xx"] == 4
    size = result.stat("x")
    assert size.raw and size.min == 1 and size.p(50) == 1
    assert result.version == "Nighthawk 1.0.0"


def test_bad_json_names_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{\n "options": {},\n "results": [}\n')
    with pytest.raises(ResultFileError, match=r"not JSON \(Expecting value at line 3 column 14\)"):
        load_result(path)


def test_detect_format_tells_the_formats_apart() -> None:
    ours = json.loads(render_json(rich_result()))
    assert detect_format(ours) == "nhbench"
    gold = parse_json((NIGHTHAWK / "output_formatter.json.gold").read_text())
    assert detect_format(gold) == "nighthawk"
    assert detect_format({"DurationHistogram": {}, "RunType": "HTTP"}) == "fortio"
    assert detect_format({"results": []}) is None
    assert nhbench.load_result is load_result


def _paths(node: object, prefix: tuple = ()) -> list[tuple]:
    found = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _paths(value, (*prefix, index))
    return found


@pytest.mark.parametrize("source", ["nhbench", "nighthawk"])
def test_a_damaged_file_is_one_error_line_never_a_crash(source: str, tmp_path: Path) -> None:
    # Any value of the document replaced by a value of another type (a few at a time):
    # loading either works or raises ResultFileError with one line; Result.model_validate
    # raises only ValueError (pydantic's ValidationError). Seeded, so it is the same every run.
    import random

    if source == "nhbench":
        base = json.loads(render_json(rich_result()))
    else:
        base = parse_json((NIGHTHAWK / "output_formatter.medium.proto.gold").read_text())
    places = _paths(base)
    replacements = [None, 5, -1, "x", [], {}, [1], {"a": 1}, 1e308, "1e999", True, "0.5s"]
    rng = random.Random(12)
    path = tmp_path / "damaged.json"
    for _ in range(150):
        document = json.loads(json.dumps(base))
        for _ in range(rng.randint(1, 3)):
            *parents, last = rng.choice(places)
            node = document
            try:
                for step in parents:
                    node = node[step]
                node[last] = rng.choice(replacements)
            except (KeyError, IndexError, TypeError):
                pass  # an earlier replacement removed this place
        text = json.dumps(document)
        path.write_text(text)
        try:
            load_result(path)
        except ResultFileError as exc:
            assert "\n" not in str(exc) and str(path) in str(exc)
        try:
            Result.model_validate_json(text)
        except ValueError:
            pass
