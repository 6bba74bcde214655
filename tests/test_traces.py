"""Traces (docs/telemetry.md, "Traces"): `--trace zipkin://` and `--trace otlp://`.

Real processes and sockets on every side: the origin is a recording HTTP/1.1 server (it
keeps the headers as they came on the wire) or nginx over h2c (its access log records the
trace headers); the collectors are real HTTP servers (tests/support/collectors.py) that
parse Zipkin's JSON v2 and decode OTLP with opentelemetry-proto. The tests check that what
went on the wire and what the collector received are the same traces, id for id.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from support.collectors import Collector
from support.nginx import needs_nginx_and_openssl
from support.recording_origin import RecordingOrigin
from test_cli_errors import assert_one_line_error, nhbench_cli

import nhbench
from benchmarks.nginx_origin import NginxOrigin

pytest.importorskip("nhbench._core")

_TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-01")


def _wire_ids(headers: dict[str, str]) -> tuple[str, str] | None:
    value = headers.get("traceparent")
    if value is None:
        return None
    m = _TRACEPARENT.fullmatch(value)
    assert m, value
    return m.group(1), m.group(2)


def test_zipkin_http1_every_request_traced_and_exported() -> None:
    with RecordingOrigin() as origin, Collector("zipkin") as zipkin:
        result = nhbench.run(origin.url + "path?q=1", rps=200, duration="1s",
                             trace=zipkin.uri)
        requests = origin.requests
    assert result.success, result.error
    c = result.counters
    n = c["benchmark.http_2xx"]
    assert n == len(requests) > 100
    # Nighthawk's default: every request traced.
    wire = {}
    for rq in requests:
        ids = _wire_ids(rq.headers)
        assert ids is not None, rq.headers
        # B3, as Envoy's Zipkin tracer propagates, with the same ids.
        assert rq.headers["x-b3-traceid"] == ids[0]
        assert rq.headers["x-b3-spanid"] == ids[1]
        assert rq.headers["x-b3-sampled"] == "1"
        wire[ids] = rq
    assert len(wire) == n  # a new trace and span id per request
    spans = zipkin.spans
    assert {(s["traceId"], s["id"]) for s in spans} == set(wire)
    host = origin.url.split("/")[2]
    for s in spans:
        assert s["kind"] == "CLIENT"
        assert s["name"] == host  # Envoy's Zipkin driver names the span after the host
        assert s["tags"]["http.method"] == "GET"
        assert s["tags"]["http.url"] == f"http://{host}/path?q=1"
        assert s["tags"]["http.status_code"] == "200"
        assert s["tags"]["http.protocol"] == "HTTP/1.1"
        assert "error" not in s["tags"]
        assert s["duration"] >= 1 and s["timestamp"] > 1.6e15  # microseconds since 1970
    assert c["tracing.spans_sampled"] == c["tracing.zipkin.spans_sent"] == n
    assert c["tracing.zipkin.reports_sent"] == zipkin.posts >= 1
    assert c["tracing.spans_dropped"] == c["tracing.zipkin.reports_failed"] == 0


def test_sample_rate_traces_a_fraction_and_only_those_carry_headers() -> None:
    with RecordingOrigin() as origin, Collector("zipkin") as zipkin:
        result = nhbench.run(origin.url, rps=1000, duration="2s", trace=zipkin.uri,
                             trace_sample_rate=0.1)
        requests = origin.requests
    assert result.success, result.error
    traced = [ids for ids in map(_wire_ids, (rq.headers for rq in requests)) if ids]
    untraced = [rq for rq in requests if "traceparent" not in rq.headers]
    assert all("x-b3-traceid" not in rq.headers for rq in untraced)
    assert len(requests) > 1000
    assert 0.04 < len(traced) / len(requests) < 0.2
    assert {(s["traceId"], s["id"]) for s in zipkin.spans} == set(traced)
    assert result.counters["tracing.spans_sampled"] == len(traced)


def test_errors_are_spans_with_the_error_tag() -> None:
    with RecordingOrigin() as origin, Collector("zipkin") as zipkin:
        result = nhbench.run(origin.url + "status/503", rps=50, duration="0.5s",
                             trace=zipkin.uri, no_default_failure_predicates=True,
                             allow_no_success=True)
    assert result.counters["benchmark.http_5xx"] > 10
    spans = zipkin.spans
    assert len(spans) == result.counters["benchmark.http_5xx"]
    assert all(s["tags"]["http.status_code"] == "503" and s["tags"]["error"] == "true"
               for s in spans)


@needs_nginx_and_openssl
def test_otlp_http2_ids_match_nginx_log() -> None:
    pytest.importorskip("opentelemetry.proto.collector.trace.v1.trace_service_pb2")
    with NginxOrigin(listeners=("h2c",)) as origin, Collector("otlp") as otlp:
        mark = origin.mark()
        result = nhbench.run(origin.url("h2c", "/?o=1"), protocol="http2", rps=200,
                             duration="1s", trace=otlp.uri, trace_sample_rate=0.5)
        lines = origin.since(mark)
    assert result.success, result.error
    assert len(lines) == result.counters["benchmark.http_2xx"] > 100
    assert {line[2] for line in lines} == {"HTTP/2.0"}
    # Fields 7..10 of the log: traceparent, x-b3-traceid, x-b3-spanid, x-b3-sampled.
    traced = []
    for line in lines:
        assert line[8:11] == ["-", "-", "-"]  # OTLP: W3C only, no B3
        if line[7] != "-":
            m = _TRACEPARENT.fullmatch(line[7])
            assert m, line
            traced.append((m.group(1), m.group(2)))
    assert 0.3 < len(traced) / len(lines) < 0.7
    spans = otlp.spans
    assert {(s["trace_id"], s["span_id"]) for s in spans} == set(traced)
    for s in spans:
        assert s["name"] == "GET" and s["kind"] == 3  # SPAN_KIND_CLIENT
        assert s["attributes"]["http.response.status_code"] == 200
        assert s["attributes"]["url.full"].endswith("/?o=1")
        assert s["attributes"]["network.protocol.version"] == "2"
        assert s["resource"]["service.name"] == "nhbench"
        assert 0 < s["end"] - s["start"] < 10**9
    c = result.counters
    assert c["tracing.otlp.spans_sent"] == c["tracing.spans_sampled"] == len(traced)
    assert c["tracing.otlp.reports_sent"] == otlp.posts >= 1


def test_collector_down_counts_failed_reports_and_the_run_goes_on() -> None:
    from support.sockets import reserved_port

    with reserved_port() as port, RecordingOrigin() as origin:
        result = nhbench.run(origin.url, rps=100, duration="0.5s",
                             trace=f"zipkin://127.0.0.1:{port}/api/v2/spans")
    assert result.success, result.error
    c = result.counters
    assert c["tracing.zipkin.reports_failed"] >= 1
    assert c["tracing.zipkin.reports_sent"] == 0
    assert c["tracing.zipkin.spans_sent"] == c["tracing.spans_sampled"] > 0


def test_collector_refusing_counts_dropped_reports() -> None:
    with RecordingOrigin() as origin, Collector("zipkin", status=500) as zipkin:
        result = nhbench.run(origin.url, rps=100, duration="0.5s", trace=zipkin.uri)
    c = result.counters
    assert c["tracing.zipkin.reports_dropped"] == zipkin.posts >= 1
    assert c["tracing.zipkin.reports_sent"] == 0


def test_untraced_run_sends_no_trace_headers() -> None:
    with RecordingOrigin() as origin:
        result = nhbench.run(origin.url, rps=100, duration="0.3s")
        requests = origin.requests
    assert result.success and requests
    assert all("traceparent" not in rq.headers and "x-b3-traceid" not in rq.headers
               for rq in requests)
    assert "tracing.spans_sampled" not in result.counters.nonzero()


def test_nighthawk_front_end_maps_trace() -> None:
    with RecordingOrigin() as origin, Collector("zipkin") as zipkin:
        proc = subprocess.run(
            [sys.executable, "-m", "nhbench", "nighthawk", "client", "--output-format", "json",
             "--rps", "50", "--duration", "1", "--trace", zipkin.uri, origin.url],
            capture_output=True, text=True, timeout=60, check=False)
        requests = origin.requests
    assert proc.returncode == 0, proc.stderr
    document = json.loads(proc.stdout)
    result = next(r for r in document["results"] if r["name"] == "global")
    counters = {c["name"]: int(c["value"]) for c in result["counters"]}
    assert counters["tracing.zipkin.spans_sent"] == len(requests) == len(zipkin.spans) > 10
    assert all("x-b3-traceid" in rq.headers for rq in requests)


@pytest.mark.parametrize(("args", "message"), [
    (["--trace", "jaeger://127.0.0.1:1/x"], "must be zipkin://"),
    (["--trace", "zipkin://127.0.0.1/api/v2/spans"], "needs a host and a port"),
    (["--trace-sample-rate", "0.5"], "needs --trace"),
    (["--trace", "zipkin://127.0.0.1:9411/api/v2/spans", "--trace-sample-rate", "0"],
     "--trace-sample-rate: must be > 0 and <= 1"),
    (["--trace", "zipkin://127.0.0.1:9411/api/v2/spans", "--trace-sample-rate", "1.5"],
     "--trace-sample-rate: must be > 0 and <= 1"),
])
def test_refused_by_name(args: list[str], message: str) -> None:
    proc = nhbench_cli("run", "http://127.0.0.1:1/", *args)
    assert_one_line_error(proc, message)


def test_refused_on_udp_echo() -> None:
    proc = nhbench_cli("run", "udp://127.0.0.1:1", "--trace",
                       "zipkin://127.0.0.1:9411/api/v2/spans")
    assert_one_line_error(proc, "udp:// echo")


def test_nighthawk_trace_takes_zipkin_only() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "nhbench", "nighthawk", "client", "--trace",
         "otlp://127.0.0.1:1/v1/traces", "http://127.0.0.1:1/"],
        capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "zipkin:// only" in proc.stderr


def test_grpc_calls_carry_the_trace_and_are_spans(tmp_path: object) -> None:
    pytest.importorskip("grpc_health")
    from test_grpc_client import Peer

    peer = Peer(tmp_path)  # type: ignore[arg-type]
    try:
        with Collector("zipkin") as zipkin:
            result = nhbench.run(f"grpc://127.0.0.1:{peer.port}", rps=100, duration="0.5s",
                                 connections=2, trace=zipkin.uri)
        calls = peer.calls()
    finally:
        peer.close()
    assert result.success, result.error
    assert len(calls) == result.counters["benchmark.http_2xx"] > 20
    wire = set()
    for call in calls:
        md = call["metadata"]
        ids = _wire_ids(md)
        assert ids is not None and md["x-b3-traceid"] == ids[0], md
        wire.add(ids)
    spans = zipkin.spans
    assert {(s["traceId"], s["id"]) for s in spans} == wire
    assert all(s["tags"]["http.url"].endswith("/grpc.health.v1.Health/Check")
               and s["tags"]["http.protocol"] == "HTTP/2" for s in spans)


def test_a_vanishing_rate_traces_nothing() -> None:
    # rate * 2^64 below 1: the threshold must not wrap round to "every request".
    with RecordingOrigin() as origin, Collector("zipkin") as zipkin:
        result = nhbench.run(origin.url, rps=200, duration="0.5s", trace=zipkin.uri,
                             trace_sample_rate=1e-30)
        requests = origin.requests
    assert result.success and len(requests) > 50
    assert not any("traceparent" in rq.headers for rq in requests)
    assert result.counters["tracing.spans_sampled"] == 0 and zipkin.spans == []


def test_templated_requests_are_traced_after_expansion() -> None:
    with RecordingOrigin() as origin, Collector("zipkin") as zipkin:
        result = nhbench.run(origin.url + "?n={seq}", rps=100, duration="0.5s",
                             trace=zipkin.uri, template=True, request_header=["x-id: {uuid}"],
                             payload="body {seq}")
        requests = origin.requests
    assert result.success, result.error
    assert len(requests) > 20
    for rq in requests:
        assert _wire_ids(rq.headers) is not None
        assert re.fullmatch(r"/\?n=[0-9]+", rq.path) and len(rq.headers["x-id"]) == 36
        assert rq.body == f"body {rq.path.split('=')[1]}".encode()
    assert len(zipkin.spans) == len(requests)


# ---- HTTP/3: aioquic's server (tests/support/h3_server.py) records the fields it received ----


@pytest.fixture(scope="module")
def h3_certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    pytest.importorskip("aioquic")
    from test_h3 import make_certs

    return make_certs(tmp_path_factory.mktemp("h3-trace-certs"))


def _h3_traced_run(certs: dict[str, str], **kw: object) -> tuple[nhbench.Result, list[dict[str, str]]]:
    from test_h3 import H3Server

    server = H3Server(certs, 10, "--record-traces")
    try:
        result = nhbench.run(server.url("/h3?x=1"), protocol="http3", cacert=certs["ca"],
                             rps=200, duration="1s", connections=2, **kw)
    finally:
        stats = server.stop()
    assert result.success, result.error
    # A request still in flight when the run ends may be answered after the client stopped
    # counting: the server's count and the fields it recorded can be a few more.
    assert stats["requests"] >= result.counters["benchmark.http_2xx"] > 100
    assert len(stats["traces"]) >= stats["requests"]
    return result, stats["traces"]


def test_zipkin_http3_every_request_carries_b3_and_traceparent_and_is_a_span(
    h3_certs: dict[str, str],
) -> None:
    with Collector("zipkin") as zipkin:
        result, fields = _h3_traced_run(h3_certs, trace=zipkin.uri)
        spans = zipkin.spans
    n = result.counters["benchmark.http_2xx"]
    wire = set()
    for f in fields:
        ids = _wire_ids(f)
        assert ids is not None, f
        assert (f["x-b3-traceid"], f["x-b3-spanid"], f["x-b3-sampled"]) == (*ids, "1")
        wire.add(ids)
    assert len(wire) == len(fields)  # a new trace and span id per request
    answered = {(s["traceId"], s["id"]) for s in spans if s["tags"]["http.status_code"] == "200"}
    assert len(answered) == n and answered <= wire
    assert {s["tags"]["http.protocol"] for s in spans} == {"HTTP/3"}
    assert all(s["tags"]["http.url"].endswith("/h3?x=1") for s in spans)
    c = result.counters
    assert c["tracing.spans_sampled"] == c["upstream_rq_total"]  # rate 1: every request
    assert c["tracing.zipkin.spans_sent"] == len(spans) >= n
    assert c["tracing.spans_dropped"] == 0


def test_otlp_http3_only_sampled_requests_carry_traceparent(h3_certs: dict[str, str]) -> None:
    pytest.importorskip("opentelemetry.proto.collector.trace.v1.trace_service_pb2")
    with Collector("otlp") as otlp:
        result, fields = _h3_traced_run(h3_certs, trace=otlp.uri, trace_sample_rate=0.5)
        spans = otlp.spans
    traced = [ids for ids in map(_wire_ids, fields) if ids]
    assert all(set(f) <= {"traceparent"} for f in fields)  # OTLP: W3C only, no B3
    assert 0.3 < len(traced) / len(fields) < 0.7
    answered = {(s["trace_id"], s["span_id"]) for s in spans
                if s["attributes"].get("http.response.status_code") == 200}
    assert answered <= set(traced) and len(traced) - len(answered) <= 5
    assert {s["attributes"]["network.protocol.version"] for s in spans} == {"3"}
    assert result.counters["tracing.otlp.spans_sent"] == len(spans) >= len(answered)


def test_untraced_http3_run_sends_no_trace_fields(h3_certs: dict[str, str]) -> None:
    result, fields = _h3_traced_run(h3_certs)
    assert all(f == {} for f in fields)
    assert "tracing.spans_sampled" not in result.counters
