"""``nhbench service``: Nighthawk's gRPC service, driven over a real socket.

One ``nhbench service`` subprocess and one test server serve the whole module. Two kinds of
client talk to it: (a) grpcio stubs compiled here, at test time, by grpcio-tools from the
repository's proto/ (the way a tool written against Nighthawk's protos is built), and (b) a
generic client that knows nothing but what server reflection tells it (grpcio-reflection's
ProtoReflectionDescriptorDatabase → a DescriptorPool → dynamic messages). The request
shapes follow Nighthawk's own service tests (test/service_test.cc of envoyproxy/nighthawk:
uri, duration and requests_per_second set; a closed port for a run that fails).

Counts, not times: every execution's 2xx count must equal what the test server counted.
"""

from __future__ import annotations

import importlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

grpc = pytest.importorskip("grpc", reason="needs grpcio (the test extra)")
pytest.importorskip("grpc_tools", reason="needs grpcio-tools (the test extra)")
pytest.importorskip("grpc_reflection", reason="needs grpcio-reflection (the test extra)")
pytest.importorskip("grpc_health", reason="needs grpcio-health-checking (the test extra)")

from support.polling import settle, wait_until  # noqa: E402

import nhbench  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PROTO = ROOT / "proto"
SERVICE = "nighthawk.client.NighthawkService"
BUSY = "Only a single benchmark session is allowed at a time."
UNSUPPORTED = "Request is not supported yet."
# Generous: the machine is shared; a stuck call fails the test instead of hanging it.
CALL_TIMEOUT = 60


# ---- fixtures ---------------------------------------------------------------------------------


class ServiceProcess:
    """``nhbench service --listen 127.0.0.1:0`` as a subprocess; `address` from its stdout."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "nhbench", "service", "--listen", "127.0.0.1:0", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith("listening on "):
            self.process.kill()
            _, err = self.process.communicate()
            raise AssertionError(f"no startup line: {line!r} {err!r}")
        self.address = line.split()[-1]

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> tuple[int, str]:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        _, err = self.process.communicate(timeout=timeout)
        return self.process.returncode, err


@pytest.fixture(scope="module")
def stubs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ModuleType, ModuleType]]:
    """nighthawk.client.service_pb2 and service_pb2_grpc compiled from proto/."""
    import grpc_tools

    out = tmp_path_factory.mktemp("stubs")
    well_known = Path(grpc_tools.__file__).parent / "_proto"
    files = sorted(str(p.relative_to(PROTO)) for p in PROTO.rglob("*.proto"))
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTO}", f"-I{well_known}",
         f"--python_out={out}", f"--grpc_python_out={out}", *files],
        check=True, capture_output=True, text=True)
    # Another module (test_nighthawk_proto.py) may have imported its own compiled copy of
    # the nighthawk package; the files are the same, so this copy takes over its names.
    for name in [n for n in sys.modules if n == "nighthawk" or n.startswith("nighthawk.")]:
        del sys.modules[name]
    sys.path.insert(0, str(out))
    try:
        yield (importlib.import_module("nighthawk.client.service_pb2"),
               importlib.import_module("nighthawk.client.service_pb2_grpc"))
    finally:
        sys.path.remove(str(out))


@pytest.fixture(scope="module")
def target() -> Iterator[nhbench.TestServer]:
    with nhbench.TestServer() as server:
        yield server


@pytest.fixture(scope="module")
def service() -> Iterator[ServiceProcess]:
    process = ServiceProcess()
    try:
        yield process
    finally:
        status, err = process.stop()
        assert status == 0, err


@pytest.fixture
def channel(service: ServiceProcess) -> Iterator[Any]:
    with grpc.insecure_channel(service.address) as chan:
        yield chan


def requests_seen(server: nhbench.TestServer) -> int:
    return int(server.stats().get("requests", 0))


def start_request(pb2: ModuleType, uri: str, *, rps: int = 50, seconds: int = 1,
                  **fields: Any) -> Any:
    request = pb2.ExecutionRequest()
    options = request.start_request.options
    options.uri.value = uri
    options.duration.seconds = seconds
    options.requests_per_second.value = rps
    for name, value in fields.items():
        getattr(options, name).value = value
    return request


def counters(output: Any) -> dict[str, int]:
    global_ = output.results[-1]
    assert global_.name == "global"
    return {c.name: c.value for c in global_.counters}


class Stream:
    """One ExecutionStream call driven request by request from the test."""

    def __init__(self, stub: Any) -> None:
        self._requests: list[Any] = []
        self._cond = threading.Condition()
        self._done = False
        self.call = stub.ExecutionStream(self._iterate(), timeout=CALL_TIMEOUT)

    def _iterate(self) -> Iterator[Any]:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._requests or self._done)
                if self._requests:
                    request = self._requests.pop(0)
                else:
                    return
            yield request

    def send(self, request: Any) -> None:
        with self._cond:
            self._requests.append(request)
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._done = True
            self._cond.notify_all()

    def read(self) -> Any:
        return next(self.call)

    def finish(self) -> tuple[Any, list[Any]]:
        """The call's status code after the rest of its responses (which are returned)."""
        rest = []
        try:
            for response in self.call:
                rest.append(response)
        except grpc.RpcError:
            pass
        return self.call.code(), rest


# ---- the compiled client --------------------------------------------------------------------


def test_one_execution_counts_what_the_server_counted(stubs: tuple[ModuleType, ModuleType],
                                                      channel: Any,
                                                      target: nhbench.TestServer) -> None:
    pb2, pb2_grpc = stubs
    stub = pb2_grpc.NighthawkServiceStub(channel)
    before = requests_seen(target)
    request = start_request(pb2, target.url, rps=50, seconds=1, execution_id="exec-1")
    request.start_request.options.labels.append("from-a-grpc-client")
    responses = list(stub.ExecutionStream(iter([request]), timeout=CALL_TIMEOUT))
    assert len(responses) == 1
    response = responses[0]
    assert not response.HasField("error_detail"), response.error_detail
    assert response.execution_id == "exec-1"
    output = response.output
    ok = counters(output)["benchmark.http_2xx"]
    assert ok > 0
    stats = settle(target, lambda s: int(s.get("requests", 0)) - before >= ok)
    assert int(stats["requests"]) - before == ok
    # The Output is Nighthawk's message, filled in: the options echoed, the results, the
    # latency statistic with as many samples as responses.
    assert output.options.uri.value == target.url
    assert output.options.requests_per_second.value == 50
    assert output.options.execution_id.value == "exec-1"
    assert list(output.options.labels) == ["from-a-grpc-client"]
    assert [r.name for r in output.results] == ["global"]
    latency = {s.id: s for s in output.results[-1].statistics}[
        "benchmark_http_client.request_to_response"]
    assert latency.count == ok
    assert output.timestamp.seconds > 0 and output.version.version.major_number >= 0
    # The client's own compiled schema knew every field the service sent.
    assert unknown_fields(output) == []


def unknown_fields(message: Any, path: str = "output") -> list[str]:
    """Where `message` (recursively) holds fields its schema does not know."""
    from google.protobuf.unknown_fields import UnknownFieldSet

    found = [path] if len(UnknownFieldSet(message)) else []
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        if field.message_type.GetOptions().map_entry:
            items = list(value.values()) if field.message_type.fields_by_name[
                "value"].message_type is not None else []
        elif field.is_repeated:
            items = list(value)
        else:
            items = [value]
        for i, item in enumerate(items):
            found += unknown_fields(item, f"{path}.{field.name}[{i}]")
    return found


def test_several_executions_on_one_stream(stubs: tuple[ModuleType, ModuleType], channel: Any,
                                          target: nhbench.TestServer) -> None:
    # Nighthawk's BackToBackExecution: each request sent once the previous one is answered.
    pb2, pb2_grpc = stubs
    stream = Stream(pb2_grpc.NighthawkServiceStub(channel))
    before = requests_seen(target)
    ids, ok = [], 0
    for rps in (20, 40):
        stream.send(start_request(pb2, target.url, rps=rps, seconds=1))
        response = stream.read()
        assert not response.HasField("error_detail"), response.error_detail
        assert response.output.options.requests_per_second.value == rps
        ids.append(response.execution_id)
        ok += counters(response.output)["benchmark.http_2xx"]
    stream.close()
    code, rest = stream.finish()
    assert code == grpc.StatusCode.OK and rest == []
    # Made-up ids, one per execution, echoed in the Output's options.
    assert len(set(ids)) == 2 and all(ids)
    stats = settle(target, lambda s: int(s.get("requests", 0)) - before >= ok)
    assert int(stats["requests"]) - before == ok


def test_a_second_start_while_one_runs_ends_the_stream(stubs: tuple[ModuleType, ModuleType],
                                                       channel: Any,
                                                       target: nhbench.TestServer) -> None:
    # Nighthawk's NoConcurrentStart: both sent at once; the first is answered, then the
    # stream ends with INTERNAL.
    pb2, pb2_grpc = stubs
    stub = pb2_grpc.NighthawkServiceStub(channel)
    request = start_request(pb2, target.url, rps=20, seconds=2)
    call = stub.ExecutionStream(iter([request, request]), timeout=CALL_TIMEOUT)
    first = next(call)
    assert not first.HasField("error_detail") and counters(first.output)["benchmark.http_2xx"] > 0
    with pytest.raises(grpc.RpcError):
        next(call)
    assert call.code() == grpc.StatusCode.INTERNAL
    assert call.details() == BUSY


def test_another_stream_is_refused_while_one_runs(stubs: tuple[ModuleType, ModuleType],
                                                  channel: Any,
                                                  target: nhbench.TestServer) -> None:
    # One benchmark at a time per service, as Nighthawk's busy lock is per service.
    pb2, pb2_grpc = stubs
    stub = pb2_grpc.NighthawkServiceStub(channel)
    before = requests_seen(target)
    first = Stream(stub)
    # 6 s: long enough that the second stream surely arrives while it runs, even on a
    # loaded machine.
    first.send(start_request(pb2, target.url, rps=20, seconds=6))
    assert wait_until(lambda: requests_seen(target) > before, timeout=30)
    refused = stub.ExecutionStream(iter([start_request(pb2, target.url)]), timeout=CALL_TIMEOUT)
    with pytest.raises(grpc.RpcError):
        next(refused)
    assert refused.code() == grpc.StatusCode.INTERNAL and refused.details() == BUSY
    response = first.read()
    assert not response.HasField("error_detail")
    first.close()
    assert first.finish() == (grpc.StatusCode.OK, [])


def test_a_cancelled_stream_stops_its_benchmark(stubs: tuple[ModuleType, ModuleType],
                                                channel: Any,
                                                target: nhbench.TestServer) -> None:
    # nhbench's addition: nobody can receive the answer of a cancelled stream, so its
    # 60 s benchmark stops and the service takes the next one long before the 60 s pass.
    pb2, pb2_grpc = stubs
    stub = pb2_grpc.NighthawkServiceStub(channel)
    before = requests_seen(target)
    doomed = Stream(stub)
    doomed.send(start_request(pb2, target.url, rps=20, seconds=60))
    assert wait_until(lambda: requests_seen(target) > before, timeout=30)
    doomed.call.cancel()
    doomed.close()
    answers: list[Any] = []

    def next_one_runs() -> bool:
        call = stub.ExecutionStream(iter([start_request(pb2, target.url, rps=10, seconds=1)]),
                                    timeout=CALL_TIMEOUT)
        answers[:] = list_until_error(call)
        return call.code() == grpc.StatusCode.OK

    assert wait_until(next_one_runs, timeout=30, step=0.2)
    assert len(answers) == 1 and not answers[0].HasField("error_detail")


@pytest.mark.parametrize("kind", ["update_request", "cancellation_request"])
def test_update_and_cancellation_are_not_supported(stubs: tuple[ModuleType, ModuleType],
                                                   channel: Any, kind: str) -> None:
    pb2, pb2_grpc = stubs
    request = pb2.ExecutionRequest()
    getattr(request, kind).SetInParent()
    call = pb2_grpc.NighthawkServiceStub(channel).ExecutionStream(iter([request]),
                                                                   timeout=CALL_TIMEOUT)
    assert list_until_error(call) == []
    assert call.code() == grpc.StatusCode.INTERNAL and call.details() == UNSUPPORTED


def list_until_error(call: Any) -> list[Any]:
    out = []
    try:
        for response in call:
            out.append(response)
    except grpc.RpcError:
        pass
    return out


def _closed_port() -> int:
    # Bound and never listened on, for the rest of the module: refused, and no other test
    # can take the port meanwhile (one bound and closed may be reused at once).
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    _RESERVED.append(sock)
    return int(sock.getsockname()[1])


_RESERVED: list[socket.socket] = []


@pytest.mark.parametrize(
    ("change", "words"),
    [
        # Nighthawk's InvalidRps.
        (lambda o: setattr(o.requests_per_second, "value", 0), "requests_per_second"),
        # Fields nhbench cannot honour are refused by name, not ignored.
        (lambda o: setattr(o.trace, "value", "zipkin://127.0.0.1:9411/api/v2/spans"), "trace"),
        (lambda o: o.stats_sinks.add(name="envoy.stat_sinks.statsd"), "stats_sinks"),
        (lambda o: setattr(o.request_options, "json_body", "{}"), "request_options.json_body"),
        # A plugin's config: an Any of a type the schema lacks (no JSON form at all).
        (lambda o: (setattr(o.request_source_plugin_config, "name",
                            "nighthawk.in-line-options-list-request-source-plugin"),
                    setattr(o.request_source_plugin_config.typed_config, "type_url",
                            "type.googleapis.com/nighthawk.request_source."
                            "InLineOptionsListRequestSourceConfig"),
                    setattr(o.request_source_plugin_config.typed_config, "value", b"\n\x00")),
         "request_source_plugin_config"),
        # Values nhbench's own options refuse.
        (lambda o: setattr(o.uri, "value", "ftp://127.0.0.1/"), "uri"),
        (lambda o: setattr(o.concurrency, "value", "many"), "concurrency"),
        (lambda o: o.ClearField("uri"), "needs a uri"),
    ],
    ids=["rps-0", "trace", "stats-sinks", "json-body", "plugin-config", "bad-scheme",
         "bad-concurrency", "no-uri"],
)
def test_bad_options_are_invalid_argument(stubs: tuple[ModuleType, ModuleType], channel: Any,
                                          target: nhbench.TestServer, change: Any,
                                          words: str) -> None:
    pb2, pb2_grpc = stubs
    request = start_request(pb2, target.url)
    change(request.start_request.options)
    call = pb2_grpc.NighthawkServiceStub(channel).ExecutionStream(iter([request]),
                                                                   timeout=CALL_TIMEOUT)
    responses = list(call)
    assert call.code() == grpc.StatusCode.OK
    assert len(responses) == 1
    response = responses[0]
    assert response.error_detail.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert words in response.error_detail.message
    assert "\n" not in response.error_detail.message
    assert not response.HasField("output")  # nothing ran


def _statsd_sink(port: int, *, host: str = "127.0.0.1", prefix: str = "nighthawk",
                 **socket_fields: Any) -> Any:
    """A StatsSink holding Envoy's StatsdSink (as nighthawk_client's --stats-sinks JSON)."""
    stats_pb2 = importlib.import_module("envoy.config.metrics.v3.stats_pb2")
    config = stats_pb2.StatsdSink(prefix=prefix)
    config.address.socket_address.address = host
    config.address.socket_address.port_value = port
    for name, value in socket_fields.items():
        setattr(config.address.socket_address, name, value)
    sink = stats_pb2.StatsSink(name="envoy.stat_sinks.statsd")
    sink.typed_config.Pack(config)
    return sink


def test_stats_sinks_push_to_a_statsd_listener(stubs: tuple[ModuleType, ModuleType],
                                               channel: Any,
                                               target: nhbench.TestServer) -> None:
    # stats_sinks and stats_flush_interval_duration map onto the push options the Nighthawk
    # command line's --stats-sinks gives: UDP statsd with the sink's prefix; the pushed
    # deltas add up to the execution's Output.
    from support.metric_sinks import StatsdServer

    pb2, pb2_grpc = stubs
    with StatsdServer("udp") as statsd:
        request = start_request(pb2, target.url, rps=100, seconds=2)
        options = request.start_request.options
        options.stats_sinks.append(_statsd_sink(int(statsd.port)))
        options.stats_flush_interval_duration.nanos = 500_000_000
        responses = list(pb2_grpc.NighthawkServiceStub(channel).ExecutionStream(
            iter([request]), timeout=CALL_TIMEOUT))
        assert len(responses) == 1 and not responses[0].HasField("error_detail"), responses
        got = counters(responses[0].output)
        wait_until(lambda: sum(int(line.value) for line in statsd.lines() if line.name ==
                               "nighthawk.cluster.nhbench.upstream_rq_total")
                   >= got["upstream_rq_total"], timeout=10)
        lines = statsd.lines()
    pushed = {}
    for line in lines:
        if line.kind == "c":
            assert line.name.startswith("nighthawk.cluster.nhbench."), line
            name = line.name.removeprefix("nighthawk.cluster.nhbench.")
            pushed[name] = pushed.get(name, 0) + int(line.value)
    for name in ("upstream_rq_total", "benchmark.http_2xx", "benchmark.http_200"):
        assert pushed[name] == got[name] > 0, name
    # About four pushes of 0.5 s and the rest at the end (the default would be 5 s: one).
    flushes = [line for line in lines if line.name == "nighthawk.nhbench.rps"]
    assert 4 <= len(flushes) <= 6, len(flushes)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        # Another sink type: refused by name with the reason, not dropped.
        (lambda o: (o.stats_sinks.add(name="envoy.stat_sinks.dog_statsd"),
                    setattr(o.stats_sinks[0].typed_config, "type_url",
                            "type.googleapis.com/envoy.config.metrics.v3.DogStatsdSink")),
         "DogStatsD"),
        (lambda o: o.stats_sinks.append(_statsd_sink(8125, host="statsd.example")),
         "must be an IP address"),
        (lambda o: o.stats_sinks.append(_statsd_sink(8125, named_port="statsd")),
         "named_port"),
        (lambda o: (o.stats_sinks.append(_statsd_sink(8125)),
                    o.stats_sinks.append(_statsd_sink(8126, prefix="other"))),
         "different prefixes"),
        (lambda o: setattr(o.stats_flush_interval, "value", 2), "needs stats_sinks"),
        (lambda o: (o.stats_sinks.append(_statsd_sink(8125)),
                    setattr(o.stats_flush_interval, "value", 301)), "[1, 300]"),
        (lambda o: (o.stats_sinks.append(_statsd_sink(8125)),
                    setattr(o.stats_flush_interval_duration, "nanos", 1000)),
         "stats_flush_interval_duration"),
    ],
    ids=["dogstatsd", "host-name", "named-port", "two-prefixes", "interval-without-sink",
         "interval-range", "duration-too-short"],
)
def test_bad_stats_sinks_are_invalid_argument(stubs: tuple[ModuleType, ModuleType],
                                              channel: Any, target: nhbench.TestServer,
                                              change: Any, words: str) -> None:
    pb2, pb2_grpc = stubs
    before = requests_seen(target)
    request = start_request(pb2, target.url)
    change(request.start_request.options)
    responses = list(pb2_grpc.NighthawkServiceStub(channel).ExecutionStream(
        iter([request]), timeout=CALL_TIMEOUT))
    assert len(responses) == 1
    response = responses[0]
    assert response.error_detail.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert words in response.error_detail.message and "stats_" in response.error_detail.message
    assert "\n" not in response.error_detail.message
    assert not response.HasField("output") and requests_seen(target) == before


def test_a_statsd_sink_field_the_schema_does_not_know_is_refused(
        stubs: tuple[ModuleType, ModuleType], channel: Any,
        target: nhbench.TestServer) -> None:
    # Inside the Any: an Address member proto/ leaves out (envoy_internal_address, 3) would
    # be lost on the way to JSON; it is refused instead.
    pb2, pb2_grpc = stubs
    request = start_request(pb2, target.url)
    sink = _statsd_sink(8125)
    stats_pb2 = importlib.import_module("envoy.config.metrics.v3.stats_pb2")
    config = stats_pb2.StatsdSink.FromString(
        _field(1, _field(3, _field(1, b"internal"))) + _field(3, b"p"))
    sink.typed_config.Pack(config)
    request.start_request.options.stats_sinks.append(sink)
    responses = list(pb2_grpc.NighthawkServiceStub(channel).ExecutionStream(
        iter([request]), timeout=CALL_TIMEOUT))
    assert responses[0].error_detail.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert "schema does not know" in responses[0].error_detail.message
    assert "address.<3>" in responses[0].error_detail.message


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (wire type 2), encoded by hand."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        # transport_socket (27) with a name (1): proto/ declares Envoy's TransportSocket
        # without members, so the name is a field the schema does not know.
        (_field(27, _field(1, b"envoy.transport_sockets.tls")), "transport_socket.<1>"),
        # A field number CommandLineOptions does not have (a newer Nighthawk's option).
        (_field(999, b"x"), "<999>"),
    ],
    ids=["transport-socket-members", "newer-option"],
)
def test_fields_the_schema_does_not_know_are_refused(stubs: tuple[ModuleType, ModuleType],
                                                     channel: Any,
                                                     target: nhbench.TestServer,
                                                     extra: bytes, words: str) -> None:
    pb2, pb2_grpc = stubs
    request = start_request(pb2, target.url)
    options = type(request.start_request.options).FromString(
        request.start_request.options.SerializeToString() + extra)
    request.start_request.options.CopyFrom(options)
    responses = list(pb2_grpc.NighthawkServiceStub(channel).ExecutionStream(
        iter([request]), timeout=CALL_TIMEOUT))
    assert len(responses) == 1
    assert responses[0].error_detail.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert words in responses[0].error_detail.message
    assert not responses[0].HasField("output")


def test_a_failed_run_has_output_and_internal_error(stubs: tuple[ModuleType, ModuleType],
                                                    channel: Any) -> None:
    # Nighthawk's Basic test: nothing listens on the port; the answer carries the output
    # (its counters show why) and an INTERNAL error_detail.
    pb2, pb2_grpc = stubs
    request = start_request(pb2, f"http://127.0.0.1:{_closed_port()}/", rps=10, seconds=1)
    responses = list(pb2_grpc.NighthawkServiceStub(channel).ExecutionStream(
        iter([request]), timeout=CALL_TIMEOUT))
    assert len(responses) == 1
    response = responses[0]
    assert response.error_detail.code == grpc.StatusCode.INTERNAL.value[0]
    assert "benchmark.pool_connection_failure" in response.error_detail.message
    assert counters(response.output)["benchmark.pool_connection_failure"] > 0
    assert counters(response.output).get("benchmark.http_2xx", 0) == 0


# ---- a generic client: reflection only ------------------------------------------------------


def test_a_reflection_client_finds_and_runs_the_service(service: ServiceProcess,
                                                        target: nhbench.TestServer) -> None:
    from google.protobuf import descriptor_pool, message_factory
    from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
        ProtoReflectionDescriptorDatabase,
    )

    with grpc.insecure_channel(service.address) as chan:
        database = ProtoReflectionDescriptorDatabase(chan)
        services = set(database.get_services())
        assert {SERVICE, "grpc.health.v1.Health",
                "grpc.reflection.v1alpha.ServerReflection"} <= services
        pool = descriptor_pool.DescriptorPool(database)
        method = pool.FindServiceByName(SERVICE).methods_by_name["ExecutionStream"]
        assert method.client_streaming and method.server_streaming
        request_class = message_factory.GetMessageClass(method.input_type)
        response_class = message_factory.GetMessageClass(method.output_type)
        request = request_class()
        options = request.start_request.options
        options.uri.value = target.url
        options.duration.seconds = 1
        options.requests_per_second.value = 30
        call = chan.stream_stream(
            f"/{SERVICE}/ExecutionStream",
            request_serializer=request_class.SerializeToString,
            response_deserializer=response_class.FromString)
        before = requests_seen(target)
        responses = list(call(iter([request]), timeout=CALL_TIMEOUT))
    assert len(responses) == 1 and not responses[0].HasField("error_detail")
    ok = counters(responses[0].output)["benchmark.http_2xx"]
    assert ok > 0
    stats = settle(target, lambda s: int(s.get("requests", 0)) - before >= ok)
    assert int(stats["requests"]) - before == ok


def test_health_serves_the_service_and_the_server(channel: Any) -> None:
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    stub = health_pb2_grpc.HealthStub(channel)
    for name in ("", SERVICE):
        answer = stub.Check(health_pb2.HealthCheckRequest(service=name), timeout=CALL_TIMEOUT)
        assert answer.status == health_pb2.HealthCheckResponse.SERVING
    with pytest.raises(grpc.RpcError) as info:
        stub.Check(health_pb2.HealthCheckRequest(service="no.such.Service"),
                   timeout=CALL_TIMEOUT)
    assert info.value.code() == grpc.StatusCode.NOT_FOUND


def test_a_stream_beyond_the_limit_takes_an_idle_ones_place_and_health_is_answered(
        stubs: tuple[ModuleType, ModuleType], target: nhbench.TestServer) -> None:
    # Open streams hold a server thread each, so they are limited (max_streams); at the limit
    # the stream idle the longest makes room, a stream is refused only when every open one
    # has a request in progress, and streams never take the threads health checks need.
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from nhbench.service import start_service

    pb2, pb2_grpc = stubs
    service = start_service("127.0.0.1:0", max_streams=3)
    try:
        with grpc.insecure_channel(service.address) as chan:
            health = health_pb2_grpc.HealthStub(chan)
            check = health_pb2.HealthCheckRequest()
            idle = []
            for _ in range(3):
                idle.append(Stream(pb2_grpc.NighthawkServiceStub(chan)))
                count = len(idle)
                assert wait_until(lambda count=count: service.open_streams == count, timeout=30)
            for _ in range(10):
                assert health.Check(check, timeout=CALL_TIMEOUT).status == \
                    health_pb2.HealthCheckResponse.SERVING
            running = Stream(pb2_grpc.NighthawkServiceStub(chan))
            running.send(start_request(pb2, target.url, rps=20, seconds=2))
            # The first stream, idle the longest, made room.
            code, rest = idle[0].finish()
            assert (code, rest) == (grpc.StatusCode.RESOURCE_EXHAUSTED, [])
            assert "to make room" in idle[0].call.details()
            assert service.open_streams == 3
            assert not running.read().HasField("error_detail")
            running.close()
            assert running.finish() == (grpc.StatusCode.OK, [])
            for stream in idle[1:]:
                stream.close()
                assert stream.finish() == (grpc.StatusCode.OK, [])
    finally:
        service.stop()

    # Every place taken by a stream with a request in progress: a new stream is refused.
    service = start_service("127.0.0.1:0", max_streams=1)
    try:
        with grpc.insecure_channel(service.address) as chan:
            before = target.stats()["requests"]
            running = Stream(pb2_grpc.NighthawkServiceStub(chan))
            running.send(start_request(pb2, target.url, rps=20, seconds=2))
            assert wait_until(lambda: service.open_streams == 1, timeout=30)
            # In progress once the target sees its requests (an open stream whose request
            # the service has not read yet is still idle, and would make room).
            assert wait_until(lambda: target.stats()["requests"] > before, timeout=30)
            extra = Stream(pb2_grpc.NighthawkServiceStub(chan))
            extra.close()
            assert extra.finish() == (grpc.StatusCode.RESOURCE_EXHAUSTED, [])
            assert "in progress" in extra.call.details()
            assert not running.read().HasField("error_detail")
            running.close()
            assert running.finish() == (grpc.StatusCode.OK, [])
    finally:
        service.stop()


def test_an_idle_stream_times_out(stubs: tuple[ModuleType, ModuleType],
                                  target: nhbench.TestServer) -> None:
    from nhbench.service import start_service

    pb2, pb2_grpc = stubs
    service = start_service("127.0.0.1:0", idle_timeout=1.0)
    try:
        with grpc.insecure_channel(service.address) as chan:
            # Before any request, and after an answer: the idle clock runs, not during a run
            # (2 s here, twice the time-out).
            never = Stream(pb2_grpc.NighthawkServiceStub(chan))
            once = Stream(pb2_grpc.NighthawkServiceStub(chan))
            once.send(start_request(pb2, target.url, rps=20, seconds=2))
            assert never.finish() == (grpc.StatusCode.DEADLINE_EXCEEDED, [])
            assert "no request for 1 s" in never.call.details()
            code, answers = once.finish()
            assert code == grpc.StatusCode.DEADLINE_EXCEEDED
            assert len(answers) == 1 and not answers[0].HasField("error_detail")
            assert wait_until(lambda: service.open_streams == 0, timeout=30)
    finally:
        service.stop()


# ---- shutdown, startup and the command line -------------------------------------------------


def test_sigterm_answers_the_running_execution_and_exits(
        stubs: tuple[ModuleType, ModuleType]) -> None:
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    pb2, pb2_grpc = stubs
    # Every response waits 2 s at the server, so requests are in flight when the stop
    # comes, and the drain (NOT_SERVING already) lasts about that long: the watcher has
    # 2 s to see NOT_SERVING.
    with nhbench.TestServer(static_delay="2s") as slow:
        service = ServiceProcess()
        try:
            with grpc.insecure_channel(service.address) as chan:
                stream = Stream(pb2_grpc.NighthawkServiceStub(chan))
                stream.send(start_request(pb2, slow.url, rps=20, seconds=60))
                assert wait_until(lambda: requests_seen(slow) >= 5, timeout=30)
                health = health_pb2_grpc.HealthStub(chan)
                seen: list[int] = []

                def watch() -> None:
                    # Until the server goes away: the statuses health reports.
                    while True:
                        try:
                            seen.append(health.Check(health_pb2.HealthCheckRequest(),
                                                     timeout=5).status)
                        except (grpc.RpcError, ValueError):  # the server or channel closed
                            return
                        time.sleep(0.01)

                watcher = threading.Thread(target=watch, daemon=True)
                watcher.start()
                assert wait_until(lambda: bool(seen), timeout=30)
                sent_at = time.monotonic()
                service.process.send_signal(signal.SIGTERM)
                response = stream.read()
                stream.close()
                stream.finish()
                watcher.join(30)
            _, err = service.process.communicate(timeout=30)
            status = service.process.returncode
            elapsed = time.monotonic() - sent_at
        finally:
            if service.process.poll() is None:
                service.process.kill()
    assert status == 0, err
    # The 60 s run was stopped, not waited for (a generous bound: drain plus grace).
    assert elapsed < 30
    assert response.HasField("output")
    # The stop ends the run while requests wait out the server's 2 s: the server counts a
    # request when it answers it, and an answer written as the client stopped reading is
    # counted there but not here. So 2xx ≤ answered by the server ≤ sent.
    answered = counters(response.output)
    served = int(slow.stats()["requests"])
    assert 5 <= answered["benchmark.http_2xx"] <= served <= answered["upstream_rq_total"]
    assert seen[0] == health_pb2.HealthCheckResponse.SERVING
    assert health_pb2.HealthCheckResponse.NOT_SERVING in seen


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--listen", "nowhere:x"], "--listen"),
        (["--listen", "::1:0"], "brackets"),
        # The run options the service applies to every execution are checked at startup.
        (["--hosts", "2"], "--hosts: needs --ray"),
    ],
    ids=["bad-port", "ipv6-without-brackets", "hosts-without-ray"],
)
def test_bad_arguments_are_one_line_and_status_2(args: list[str], words: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "nhbench", "service", *args],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and words in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_port_in_use_is_one_line_and_status_1() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        proc = subprocess.run(
            [sys.executable, "-m", "nhbench", "service", "--listen", f"127.0.0.1:{port}"],
            capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.count("\n") == 1 and f"127.0.0.1:{port}" in proc.stderr


def test_listener_address_file(tmp_path: Path) -> None:
    path = tmp_path / "address"
    service = ServiceProcess("--listener-address-file", str(path))
    try:
        assert path.read_text().strip() == service.address
    finally:
        assert service.stop()[0] == 0


def test_without_the_service_extra_one_line_names_it() -> None:
    # grpc made unimportable, as when the `service` extra is not installed.
    code = ("import sys; sys.modules['grpc'] = None\n"
            "from nhbench.cli import main\n"
            "sys.exit(main(['service', '--listen', '127.0.0.1:0']))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env={**os.environ})
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1
    assert "grpcio" in proc.stderr and "nhbench[service]" in proc.stderr
