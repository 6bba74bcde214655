"""Pushed metrics end to end (docs/telemetry.md): runs against the real test server pushing
to real receivers (tests/support/metric_sinks.py: a statsd server on UDP and TCP sockets, an
OTLP/HTTP endpoint decoding with opentelemetry-proto), checking that what arrives adds up to
the run's result; and sinks that are down, refuse or stall, which must neither hold the run
up nor cost its result."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from support.metric_sinks import OtlpReceiver, StatsdLine, StatsdServer
from support.sockets import free_port

import nhbench
from nhbench._names import COUNTERS

PACKAGE_PARENT = str(Path(nhbench.__file__).resolve().parent.parent)
SCHEDULED = "benchmark_http_client.scheduled_to_response"
TIMER = f"envoy.{SCHEDULED}"


def cli(*args: str, timeout: float = 90,
        env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **(env_extra or {})}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_PARENT, env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "nhbench", *args], capture_output=True,
                          text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL)


def _global(result: dict) -> dict:  # type: ignore[type-arg]
    return next(r for r in result["results"] if r["name"] == "global")


def _counters(result: dict) -> dict[str, int]:  # type: ignore[type-arg]
    return {c["name"]: int(c["value"]) for c in _global(result)["counters"]}


def _scheduled_count(result: dict) -> int:  # type: ignore[type-arg]
    stat = next(s for s in _global(result)["statistics"] if s["id"] == SCHEDULED)
    return int(stat["count"])


def _counter_sums(lines: list[StatsdLine], prefix: str = "envoy") -> Counter[str]:
    head = f"{prefix}.cluster.nhbench."
    sums: Counter[str] = Counter()
    for line in lines:
        if line.kind == "c":
            assert line.name.startswith(head), line
            sums[line.name[len(head):]] += int(line.value)
    return sums


def _timer_count(lines: list[StatsdLine], name: str = TIMER) -> int:
    # Each line stands for 1/rate responses (statsd's sample rate).
    return sum(round(1 / line.rate) if line.rate else 1
               for line in lines if line.kind == "ms" and line.name == name)


def _wait_for(predicate, timeout: float = 5.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.05)


# ---- statsd ---------------------------------------------------------------------------------


def test_statsd_udp_and_tcp_add_up_to_the_result(server: nhbench.TestServer) -> None:
    with StatsdServer("udp") as udp, StatsdServer("tcp") as tcp:
        # 2.2 s: the last 0.2 s is pushed by the run's end, not by a flush interval.
        proc = cli("run", server.url, "--rps", "400", "--duration", "2.2s",
                   "--statsd", f"127.0.0.1:{udp.port}", "--statsd", tcp.address,
                   "--stats-flush-interval", "500ms", "--output-format", "json")
        assert proc.returncode == 0, proc.stderr
        # Pushing closes intervals, but a piped stderr gets no interval lines unless
        # --stats-interval asks for them.
        assert proc.stderr == ""
        result = json.loads(proc.stdout)
        counters = _counters(result)
        requests = _scheduled_count(result)
        assert requests == counters["benchmark.http_2xx"] == 880
        _wait_for(lambda: all(_timer_count(sink.lines()) >= requests for sink in (udp, tcp)))
        for sink in (udp, tcp):
            lines = sink.lines()
            sums = _counter_sums(lines)
            # Every counter of the result, exactly, as the sum of the pushed deltas (the
            # per-status-code ones, benchmark.http_200, included).
            for name, value in counters.items():
                assert sums[name] == value, (sink.transport, name)
            assert set(sums) <= set(COUNTERS) | {"benchmark.http_200"}
            assert _timer_count(lines) == requests, sink.transport
            gauges = {line.name for line in lines if line.kind == "g"}
            assert {"envoy.nhbench.rps", "envoy.nhbench.latency_p99_us"} <= gauges
            # Four flushes of 0.5 s and the rest at the end.
            rps = [line for line in lines if line.name == "envoy.nhbench.rps"]
            assert len(rps) == 5, sink.transport
        # UDP: several lines per datagram, each datagram within a 1500-byte path.
        assert udp.datagrams < len(udp.raw)


def test_status_codes_pushed_add_up_to_the_result() -> None:
    # The per-status-code counters (benchmark.http_<code>, as the result names them) travel
    # in the live intervals, so both sinks get them under the counters' names: statsd
    # envoy.cluster.nhbench.benchmark.http_503, OTLP nhbench.counter{counter=...}. Over the
    # run every code's pushed growth is the result's count, and the codes add up to their
    # classes. The server answers a random share with 503, 404 and 201 (Fortio's status=).
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    from nhbench._names import status_counter_code

    with nhbench.TestServer() as origin, StatsdServer("udp") as statsd, \
            OtlpReceiver() as receiver:
        result = nhbench.run(origin.url + "?status=503:20,404:10,201:5", rps=400,
                             duration="1.6s", connections=4, statsd=[statsd.address],
                             otlp_endpoint=receiver.url, otlp_temporality="delta",
                             stats_flush_interval="500ms", no_default_failure_predicates=True)
        served = {f"benchmark.http_{code}": n for code, n in origin.stats()["status"].items()}
        lines = statsd.lines()
    codes = {name: value for name, value in result.counters.items()
             if status_counter_code(name) is not None and value}
    # What the server wrote is what the result counts, with all four codes present.
    assert codes == served and set(codes) == {
        "benchmark.http_200", "benchmark.http_201", "benchmark.http_404", "benchmark.http_503"}
    sums = _counter_sums(lines)
    points = _counter_points(receiver)
    for name, value in codes.items():
        assert sums[name] == value, name
        assert sum(points[name]) == value, name
    for klass in ("2xx", "4xx", "5xx"):
        inside = sum(v for n, v in codes.items() if n[len("benchmark.http_")] == klass[0])
        assert sums[f"benchmark.http_{klass}"] == inside == result.counters[
            f"benchmark.http_{klass}"]
    # A code once seen is pushed at every later flush (0 included), as Envoy's counters.
    flushes = [line for line in lines if line.name == "envoy.nhbench.rps"]
    per_code = [line for line in lines if line.name.endswith(".benchmark.http_503")]
    assert len(flushes) >= 3 and len(per_code) == len(flushes)
    # The OTLP errors sum counts the 4xx and 5xx responses as the result does.
    assert sum(p.as_int for p in _points(receiver, "nhbench.errors")) == result.error_count > 0


def test_statsd_prefix_and_an_ipv6_sink(server: nhbench.TestServer) -> None:
    import socket as socket_module

    probe = socket_module.socket(socket_module.AF_INET6, socket_module.SOCK_DGRAM)
    try:
        probe.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback")
    port = probe.getsockname()[1]
    probe.settimeout(0.2)
    try:
        result = nhbench.run(server.url, rps=200, duration="1s", statsd=[f"[::1]:{port}"],
                             statsd_prefix="nh", stats_flush_interval="250ms")
        raw = []
        while True:
            try:
                raw += probe.recv(65536).decode().split("\n")
            except TimeoutError:
                break
    finally:
        probe.close()
    assert raw and all(line.startswith("nh.") for line in raw)
    http_2xx = sum(int(line.split(":")[1].split("|")[0]) for line in raw
                   if line.startswith("nh.cluster.nhbench.benchmark.http_2xx:"))
    assert http_2xx == result.counters["benchmark.http_2xx"] == 200


def test_statsd_sink_down_is_counted_and_reported_once(server: nhbench.TestServer,
                                                       closed_port: int) -> None:
    # TCP: every connection refused; UDP: nothing bound, so the kernel's port-unreachable
    # comes back on the connected socket.
    udp_port = free_port(__import__("socket").SOCK_DGRAM)
    proc = cli("run", server.url, "--rps", "400", "--duration", "1.5s",
               "--statsd", f"tcp://127.0.0.1:{closed_port}", "--statsd", f"127.0.0.1:{udp_port}",
               "--stats-flush-interval", "250ms", "--output-format", "json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert _counters(result)["benchmark.http_2xx"] == 600
    tcp_lines = [line for line in proc.stderr.splitlines()
                 if f"statsd tcp://127.0.0.1:{closed_port}" in line]
    assert len(tcp_lines) == 1, proc.stderr
    assert "6 of 6 pushes not delivered (first: Connection refused)" in tcp_lines[0]
    udp_lines = [line for line in proc.stderr.splitlines() if f":{udp_port}:" in line]
    assert len(udp_lines) == 1 and "Connection refused" in udp_lines[0], proc.stderr


# ---- OTLP -----------------------------------------------------------------------------------


def _points(receiver: OtlpReceiver, name: str) -> list:  # type: ignore[type-arg]
    out = []
    for metric in receiver.metrics():
        if metric.name == name:
            data = metric.histogram if metric.HasField("histogram") else metric.sum
            out += list(data.data_points)
    return out


def _counter_points(receiver: OtlpReceiver) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for point in _points(receiver, "nhbench.counter"):
        (attribute,) = point.attributes
        out.setdefault(attribute.value.string_value, []).append(point.as_int)
    return out


def test_otlp_delta_adds_up_to_the_result(server: nhbench.TestServer) -> None:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    from opentelemetry.proto.metrics.v1.metrics_pb2 import AggregationTemporality

    with OtlpReceiver() as receiver:
        result = nhbench.run(server.url, rps=400, duration="2s", otlp_endpoint=receiver.url,
                             otlp_temporality="delta", stats_flush_interval="500ms")
    assert 4 <= len(receiver.requests) <= 5
    assert set(receiver.content_types) == {"application/x-protobuf"}
    latency = result.stat(SCHEDULED)
    histograms = _points(receiver, "nhbench.latency")
    for metric in receiver.metrics():
        data = metric.histogram if metric.HasField("histogram") else metric.sum
        assert data.aggregation_temporality == AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA
    # count and sum over the pushes are the run's, exactly (the sum up to float rounding).
    assert sum(p.count for p in histograms) == latency.count == 800
    assert sum(sum(p.bucket_counts) for p in histograms) == latency.count
    assert sum(p.sum for p in histograms) == pytest.approx(latency.mean * latency.count,
                                                           rel=1e-9)
    assert min(p.min for p in histograms if p.count) == pytest.approx(latency.min)
    bounds = list(histograms[0].explicit_bounds)
    assert bounds[0] == pytest.approx(1e-6) and bounds[-1] == pytest.approx(60.0)
    points = _counter_points(receiver)
    for name in ("benchmark.http_2xx", "upstream_rq_total", "upstream_cx_total"):
        assert sum(points[name]) == result.counters[name], name
    assert sum(p.as_int for p in _points(receiver, "nhbench.errors")) == result.error_count == 0
    # The windows tile the run: each push starts where the previous one ended.
    windows = [(p.start_time_unix_nano, p.time_unix_nano) for p in histograms]
    assert all(start < end for start, end in windows)
    assert all(windows[i][0] == windows[i - 1][1] for i in range(1, len(windows)))


def test_otlp_cumulative_ends_at_the_result(server: nhbench.TestServer) -> None:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    with OtlpReceiver() as receiver:
        proc = cli("run", server.url, "--rps", "400", "--duration", "1.7s",
                   "--otlp-endpoint", receiver.url, "--stats-flush-interval", "500ms",
                   "--output-format", "json",
                   env_extra={"OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20t0k",
                              "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=lab"})
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    # The exporter's own environment variables are honoured (docs/telemetry.md).
    assert {h.get("authorization") for h in receiver.headers} == {"Bearer t0k"}
    histograms = _points(receiver, "nhbench.latency")
    counts = [p.count for p in histograms]
    assert counts == sorted(counts) and len(set(p.start_time_unix_nano for p in histograms)) == 1
    assert len(counts) == 4  # three flush intervals and the run's end
    assert counts[-1] == _scheduled_count(result) == 680
    points = _counter_points(receiver)
    assert points["benchmark.http_2xx"][-1] == _counters(result)["benchmark.http_2xx"]
    resource = receiver.requests[0].resource_metrics[0].resource
    attributes = {a.key: a.value.string_value for a in resource.attributes}
    assert attributes["service.name"] == "nhbench"
    assert attributes["deployment.environment"] == "lab"


@pytest.mark.parametrize("mode", ["refuse", "stall", "down"])
def test_otlp_sink_failing_neither_stalls_nor_costs_the_result(
        server: nhbench.TestServer, closed_port: int, mode: str) -> None:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    receiver = None if mode == "down" else OtlpReceiver(mode, stall=120)
    url = receiver.url if receiver else f"http://127.0.0.1:{closed_port}/v1/metrics"
    started = time.monotonic()
    try:
        proc = cli("run", server.url, "--rps", "400", "--duration", "1s",
                   "--otlp-endpoint", url, "--stats-flush-interval", "200ms",
                   "--output-format", "json", timeout=120)
    finally:
        if receiver is not None:
            receiver.close()
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr
    assert _counters(json.loads(proc.stdout))["benchmark.http_2xx"] == 400
    # A stalled endpoint holds each export for 120 s: the run gives up on it after its
    # bounded wait (about 6 s) instead of waiting for five of them.
    assert elapsed < 60, elapsed
    reports = [line for line in proc.stderr.splitlines() if f"otlp {url}" in line]
    assert len(reports) == 1, proc.stderr
    assert "pushes not delivered (first: " in reports[0]


def test_otlp_without_the_extra_refuses_before_sending(server: nhbench.TestServer) -> None:
    # The SDK hidden from the import system: the run stops with one line, exit 1, before
    # the first request.
    code = ("import sys; sys.modules['opentelemetry'] = None; "
            "from nhbench.cli import main; sys.exit(main())")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_PARENT, env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, "-c", code, "run", server.url, "--duration", "1s",
         "--otlp-endpoint", "http://127.0.0.1:4318/v1/metrics"],
        capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL)
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and "pip install 'nhbench[otlp]'" in proc.stderr
    assert server.stats()["requests"] == 0


def test_import_stays_light() -> None:
    # The statsd sink needs nothing outside the standard library; the OpenTelemetry SDK is
    # imported by an OTLP endpoint only.
    code = ("import sys, nhbench; from nhbench import _push; from nhbench.options import "
            "make_options; make_options('http://127.0.0.1:1/', statsd='127.0.0.1:8125'); "
            "print([m for m in sys.modules if m.startswith('opentelemetry')])")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_PARENT, env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


# ---- options --------------------------------------------------------------------------------


@pytest.mark.parametrize(("args", "message"), [
    (["--stats-flush-interval", "1s"], "--stats-flush-interval: needs --statsd or "
     "--otlp-endpoint"),
    (["--statsd", "127.0.0.1:8125", "--stats-interval", "off"],
     "--statsd: pushes the live intervals, which --stats-interval off disables"),
    (["--statsd", "ftp://127.0.0.1:8125"], "--statsd: must be [udp://|tcp://]HOST:PORT"),
    (["--statsd", "127.0.0.1:0"], "port 0 is not a destination"),
    (["--statsd", "127.0.0.1:8125", "--statsd-prefix", "a|b"], "--statsd-prefix: must be"),
    (["--otlp-endpoint", "127.0.0.1:4318"], "--otlp-endpoint: must be an http:// or https://"),
    (["--otlp-endpoint", "http://h/", "--otlp-temporality", "sometimes"],
     "--otlp-temporality"),
    (["--statsd", "127.0.0.1:8125", "--stats-flush-interval", "10ms"],
     "--stats-flush-interval: "),
])
def test_bad_push_options_are_one_line(args: list[str], message: str) -> None:
    proc = cli("run", "http://127.0.0.1:1/", *args)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and message in proc.stderr, proc.stderr


def test_flush_interval_sets_the_interval() -> None:
    from nhbench.options import make_options

    options = make_options("http://127.0.0.1:1/", statsd="127.0.0.1:8125")
    assert options.effective_stats_interval == 5.0  # Nighthawk's default flush interval
    options = make_options("http://127.0.0.1:1/", statsd="127.0.0.1:8125",
                           stats_flush_interval="2s")
    assert options.effective_stats_interval == 2.0
    options = make_options("http://127.0.0.1:1/", statsd="127.0.0.1:8125",
                           stats_flush_interval="2s", stats_interval="500ms")
    assert options.effective_stats_interval == 0.5


def test_a_flush_interval_longer_than_the_interval(server: nhbench.TestServer) -> None:
    # Intervals of 200 ms, pushes every 600 ms: three intervals per push, exact sums.
    with StatsdServer("udp") as udp:
        result = nhbench.run(server.url, rps=300, duration="1.8s", statsd=[udp.address],
                             stats_interval="200ms", stats_flush_interval="600ms")
        # The timers' datagrams follow the counters' in a push: wait for both.
        _wait_for(lambda: _counter_sums(udp.lines())["benchmark.http_2xx"] >= 540
                  and _timer_count(udp.lines()) >= 540)
        lines = udp.lines()
    assert len(result.timeline) >= 9
    assert 3 <= len([line for line in lines if line.name == "envoy.nhbench.rps"]) <= 4
    assert _counter_sums(lines)["benchmark.http_2xx"] == result.counters["benchmark.http_2xx"]
    assert _timer_count(lines) == result.stat(SCHEDULED).count == 540
