"""The ``json`` output is Nighthawk's Output, proved with protobuf itself.

proto/ holds nhbench's own .proto files for Nighthawk's output schema (api/client/output.proto
and options.proto with the Envoy types they reference). They are compiled here with
grpcio-tools' protoc into a temporary directory, and protobuf's ``json_format.Parse`` with
unknown fields rejected then reads (a) the json output of real runs (one worker and several,
HTTP/1.1 and HTTP/2, with failures and a timeline) and (b) Nighthawk's own JSON test data
(tests/data/nighthawk/). A document with a key the schema does not have is refused, so the
strict parse can fail.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

pytest.importorskip("grpc_tools", reason="needs grpcio-tools (the test extra)")
json_format = pytest.importorskip("google.protobuf.json_format",
                                  reason="needs protobuf (the test extra)")

import nhbench  # noqa: E402
from nhbench._load import parse_json  # noqa: E402
from nhbench.outputs import format_json, render_json  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PROTO = ROOT / "proto"
DATA = Path(__file__).resolve().parent / "data" / "nighthawk"


@pytest.fixture(scope="module")
def output_pb2(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    """nighthawk.client.output_pb2 compiled from proto/ (and its imports)."""
    import grpc_tools

    out = tmp_path_factory.mktemp("pb2")
    well_known = Path(grpc_tools.__file__).parent / "_proto"
    files = sorted(str(p.relative_to(PROTO)) for p in PROTO.rglob("*.proto"))
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTO}", f"-I{well_known}",
         f"--python_out={out}", *files],
        check=True, capture_output=True, text=True,
    )
    sys.path.insert(0, str(out))
    try:
        yield importlib.import_module("nighthawk.client.output_pb2")
    finally:
        sys.path.remove(str(out))


def strict_parse(output_pb2: ModuleType, text: str) -> object:
    return json_format.Parse(text, output_pb2.Output(), ignore_unknown_fields=False)


def run_json(**kwargs: object) -> tuple[nhbench.Result, str]:
    server_kwargs = kwargs.pop("server", {})
    assert isinstance(server_kwargs, dict)
    with nhbench.TestServer(**server_kwargs) as server:
        result = nhbench.run(server.url, **kwargs)
    return result, render_json(result)


@pytest.mark.parametrize(
    "run_kwargs",
    [
        # One worker, HTTP/1.1, 30 % of the responses 503: the default failure predicate
        # benchmark.http_5xx:0 fires; a timeline is recorded.
        {"rps": 200, "duration": "1s", "stats_interval": "200ms", "request_header": ["x-a: b"],
         "label": ["one", "two"], "server": {"echo_default_params": "status=503:30"}},
        # Two workers (per-worker entries and global), HTTP/2 with prior knowledge,
        # nhbench-only options and a timeline.
        {"rps": 100, "duration": "1s", "concurrency": 2, "h2c": True,
         "stats_interval": "250ms", "request_timeout": "2s", "percentiles": "50,99"},
        # TLS with an SNI (CommandLineOptions.tls_context), certificates not verified.
        {"rps": 100, "duration": "0.5s", "insecure": True, "sni": "example.test",
         "stats_interval": "200ms", "server": {"tls_self_signed": True}},
    ],
    ids=["h1-one-worker-failures", "h2-two-workers", "tls-sni"],
)
def test_json_of_a_real_run_parses_strictly(output_pb2: ModuleType,
                                             run_kwargs: dict[str, object]) -> None:
    result, text = run_json(**run_kwargs)
    message = strict_parse(output_pb2, text)
    # The parse did read the values, not just accept the keys.
    names = [entry.name for entry in message.results]  # type: ignore[attr-defined]
    assert names == [entry.name for entry in result.results]
    assert names[-1] == "global"
    global_ = message.results[-1]  # type: ignore[attr-defined]
    assert {c.name: c.value for c in global_.counters} == result.counters.nonzero()
    options = message.options  # type: ignore[attr-defined]
    assert options.requests_per_second.value == int(result.options.rps)
    assert options.uri.value == result.options.uri
    assert list(options.labels) == list(result.options.label)
    assert global_.user_defined_outputs[0].plugin_name == "nhbench"
    latency = {s.id: s for s in global_.statistics}[
        "benchmark_http_client.scheduled_to_response"]
    assert latency.count == result.latency.count > 0
    assert [p.percentile for p in latency.percentiles] == \
        [p.percentile for p in result.latency.percentiles]
    assert len(result.timeline) > 0
    if run_kwargs.get("sni"):
        assert options.tls_context.sni == "example.test"
        assert result.insecure and result.counters["benchmark.http_2xx"] > 0
    elif run_kwargs.get("concurrency") == 2:
        assert options.protocol.value == 1  # HTTP2
        assert names == ["worker_0", "worker_1", "global"]
    else:
        assert result.failed_predicates == ["benchmark.http_5xx"]
        assert {c.name: c.value for c in global_.counters}["benchmark.http_5xx"] > 0
        headers = options.request_options.request_headers
        assert [(h.header.key, h.header.value) for h in headers] == [("x-a", "b")]


def test_json_with_per_endpoint_statistics_parses_strictly(output_pb2: ModuleType) -> None:
    # Several targets: the per-endpoint statistics ride in the nhbench extension, which
    # Nighthawk's schema takes as a Struct.
    with nhbench.TestServer() as a, nhbench.TestServer() as b:
        endpoints = [f"127.0.0.1:{a.address[1]}", f"127.0.0.1:{b.address[1]}"]
        result = nhbench.run(None, multi_target_endpoint=endpoints, multi_target_path="/",
                             rps=100, requests=20, connections=2)
    assert [e.name for e in result.endpoints] == endpoints
    text = render_json(result)
    message = strict_parse(output_pb2, text)
    assert message.results[-1].user_defined_outputs[0].plugin_name == "nhbench"  # type: ignore[attr-defined]
    back = nhbench.Result.model_validate_json(text)
    assert [(e.name, e.requests, e.latency.count) for e in back.endpoints] == \
        [(e.name, e.requests, e.latency.count) for e in result.endpoints]


def test_nighthawk_json_gold_parses_strictly(output_pb2: ModuleType) -> None:
    message = strict_parse(output_pb2, (DATA / "output_formatter.json.gold").read_text())
    assert [r.name for r in message.results] == ["worker_0", "worker_1", "global"]  # type: ignore[attr-defined]
    # Written again by nhbench's json formatter, the document still parses strictly.
    document = parse_json((DATA / "output_formatter.json.gold").read_text())
    again = strict_parse(output_pb2, format_json(document))
    assert again == message


def test_nighthawk_medium_gold_parses_after_the_readers_leniency(output_pb2: ModuleType) -> None:
    text = (DATA / "output_formatter.medium.proto.gold").read_text()
    # As Nighthawk ships it, a strict JSON parser refuses it (a trailing comma, "labels"
    # three times); Nighthawk's reader does not.
    with pytest.raises(json_format.ParseError):
        strict_parse(output_pb2, text)
    document = parse_json(text)
    message = strict_parse(output_pb2, format_json(document))
    # Nighthawk's own fortio golden of this file says "Labels": "label-a label-b Nighthawk":
    # the repeated keys merged in order, the single string taken as one label.
    assert list(message.options.labels) == ["label-a", "label-b", "Nighthawk"]  # type: ignore[attr-defined]
    assert message.options.concurrency.value == "3"  # type: ignore[attr-defined]
    assert [r.name for r in message.results][-1] == "global"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "path",
    [(), ("results", -1), ("results", -1, "statistics", 0), ("options",),
     ("options", "request_options")],
    ids=["top", "result", "statistic", "options", "request_options"],
)
def test_a_key_the_schema_lacks_is_refused(output_pb2: ModuleType, path: tuple) -> None:
    from support.fakecore import core_result, core_worker, spread

    result = nhbench.Result.from_core(core_result([core_worker(spread(100))]),
                                      nhbench.Options(uri="http://127.0.0.1:8080/"))
    document = json.loads(render_json(result))
    strict_parse(output_pb2, json.dumps(document))  # the untouched document parses
    place = document
    for step in path:
        place = place[step]
    place["nhbench_extra"] = 1
    with pytest.raises(json_format.ParseError, match="nhbench_extra"):
        strict_parse(output_pb2, json.dumps(document))
