"""A hostile gRPC client against the real ``nhbench service`` (a subprocess, so that an abort
is seen as one): option values that size the core's allocations, targets and files on the
service's own machine, idle streams that would hold every thread, and a flood of requests on
one stream. The client is grpcio with the service's own message classes (built from the
descriptor set it ships); the targets are the real test server and real Unix sockets.

After each attack the service must still be up, answer health checks with SERVING and run an
ordinary benchmark. The limits are in docs/reliability.md ("Service limits").
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

grpc = pytest.importorskip("grpc", reason="needs grpcio (the service extra)")
pytest.importorskip("grpc_health", reason="needs grpcio-health-checking (the service extra)")
pytest.importorskip("grpc_reflection", reason="needs grpcio-reflection (the service extra)")

from google.protobuf import json_format  # noqa: E402
from grpc_health.v1 import health_pb2  # noqa: E402
from support.polling import wait_until  # noqa: E402

import nhbench  # noqa: E402
from nhbench.service._protos import Protos  # noqa: E402

pytestmark = [pytest.mark.hostile, pytest.mark.core]

PACKAGE_PARENT = str(Path(nhbench.__file__).resolve().parent.parent)
METHOD = "/nighthawk.client.NighthawkService/ExecutionStream"
REFLECTION = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
HEALTH = "/grpc.health.v1.Health/Check"
SERVING = health_pb2.HealthCheckResponse.SERVING
INVALID_ARGUMENT = grpc.StatusCode.INVALID_ARGUMENT.value[0]
CALL_TIMEOUT = 60
PROTOS = Protos()


class Service:
    """``nhbench service --listen 127.0.0.1:0 ARGS`` and a channel to it."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "nhbench", "service", "--listen", "127.0.0.1:0", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
            env={**os.environ, "PYTHONPATH": PACKAGE_PARENT})
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith("listening on "):
            self.process.kill()
            raise AssertionError(f"no startup line: {line!r} {self.process.communicate()}")
        self.address = line.split()[-1]
        self.channel = grpc.insecure_channel(self.address)
        self.stream = self.channel.stream_stream(
            METHOD, request_serializer=PROTOS.ExecutionRequest.SerializeToString,
            response_deserializer=PROTOS.ExecutionResponse.FromString)
        self._health = self.channel.unary_unary(
            HEALTH, request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb2.HealthCheckResponse.FromString)

    def health(self) -> Any:
        """SERVING's number, or the status code of a refused check."""
        try:
            return self._health(health_pb2.HealthCheckRequest(), timeout=10).status
        except grpc.RpcError as exc:
            return exc.code()

    def alive(self) -> bool:
        return self.process.poll() is None

    def hwm_mb(self) -> int:
        with open(f"/proc/{self.process.pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) // 1024
        raise AssertionError("no VmHWM")

    def stop(self) -> tuple[int, str]:
        self.channel.close()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            _, err = self.process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            _, err = self.process.communicate()
        return self.process.returncode, err


def start_request(**options: Any) -> Any:
    request = PROTOS.ExecutionRequest()
    json_format.ParseDict({"start_request": {"options": options}}, request,
                          descriptor_pool=PROTOS.pool)
    return request


def execute(service: Service, *requests: Any) -> tuple[Any, list[Any]]:
    """Send `requests` on one stream, half-close; (status code, responses)."""
    answers: list[Any] = []
    try:
        for answer in service.stream(iter(requests), timeout=CALL_TIMEOUT):
            answers.append(answer)
    except grpc.RpcError as exc:
        return exc.code(), answers
    return grpc.StatusCode.OK, answers


def assert_still_serving(service: Service, target: nhbench.TestServer) -> None:
    assert service.alive()
    assert service.health() == SERVING
    code, answers = execute(service, start_request(uri=target.url, duration="1s",
                                                   requests_per_second=20))
    assert code == grpc.StatusCode.OK
    assert len(answers) == 1 and not answers[0].HasField("error_detail"), answers


@pytest.fixture(scope="module")
def target() -> Iterator[nhbench.TestServer]:
    with nhbench.TestServer() as server:
        yield server


@pytest.fixture(scope="module")
def service() -> Iterator[Service]:
    process = Service()
    try:
        yield process
    finally:
        status, err = process.stop()
        assert status == 0, err[-2000:]


@pytest.fixture
def sock_dir() -> Iterator[str]:
    # sun_path holds 108 bytes; pytest's tmp_path can be longer.
    path = tempfile.mkdtemp(prefix="nhb-svc-", dir="/tmp")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


# ---- option values that size the core's allocations ------------------------------------------


@pytest.mark.parametrize("options", [
    {"max_pending_requests": 4294967295, "open_loop": True},
    {"max_pending_requests": 1000000000},
    {"connections": 1000000, "concurrency": "2"},
    {"max_active_requests": 4294967295, "h2": True},
    {"max_active_requests": 1000000, "concurrency": "11", "h2": True},
    {"request_options": {"request_body_size": 4000000000}},
])
def test_allocation_sizing_values_are_invalid_argument_and_the_service_lives(
        service: Service, target: nhbench.TestServer, options: dict[str, Any]) -> None:
    # max_pending_requests 2^32-1 made the core's calloc fail, and its failure path aborted
    # the whole service (every later client got "connection refused").
    code, answers = execute(service, start_request(uri=target.url, duration="1s", **options))
    assert code == grpc.StatusCode.OK
    assert len(answers) == 1
    assert answers[0].error_detail.code == INVALID_ARGUMENT, answers[0]
    assert not answers[0].HasField("output")
    assert service.hwm_mb() < 1000
    assert_still_serving(service, target)


def test_huge_max_pending_on_the_command_line_is_exit_2() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "nhbench", "run", "http://127.0.0.1:9/", "--open-loop",
         "--max-pending-requests", "4294967295", "--duration", "1s"],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": PACKAGE_PARENT})
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines() == [
        "nhbench: error: --max-pending-requests: must be >= 0 and <= 10000000 (got 4294967295)"]


# ---- stats sinks: what a request makes the service push, and to where -------------------------


_STATSD_URL = "type.googleapis.com/envoy.config.metrics.v3.StatsdSink"


def _sink(port: int, **config: Any) -> dict[str, Any]:
    return {"name": "envoy.stat_sinks.statsd", "typed_config": {
        "@type": _STATSD_URL, "prefix": "p",
        "address": {"socket_address": {"address": "127.0.0.1", "port_value": port}},
        **config}}


def test_many_stats_sinks_are_refused_before_any_socket(service: Service,
                                                         target: nhbench.TestServer) -> None:
    # Each sink is a socket and a sending thread: ten thousand of them in one request must
    # not become ten thousand threads of the service.
    from support.metric_sinks import StatsdServer

    with StatsdServer("udp") as statsd:
        request = start_request(uri=target.url, duration="1s", requests_per_second=5,
                                stats_sinks=[_sink(statsd.port)] * 10_000)
        threads = len(os.listdir(f"/proc/{service.process.pid}/task"))
        code, answers = execute(service, request)
        assert code == grpc.StatusCode.OK and len(answers) == 1
        assert answers[0].error_detail.code == INVALID_ARGUMENT
        assert "at most 16" in answers[0].error_detail.message
        assert not answers[0].HasField("output")
        assert len(os.listdir(f"/proc/{service.process.pid}/task")) <= threads + 4
        time.sleep(0.5)
        assert statsd.lines() == []
    assert_still_serving(service, target)


@pytest.mark.parametrize("value", [b"\xff\xff\xff", b"\x0a\x05\x0a\x03\x0a\x01",
                                   b"\x1a\xff\xff\xff\xff\x0f"],
                         ids=["garbage", "truncated", "huge-length"])
def test_a_mangled_statsd_sink_is_invalid_argument(service: Service,
                                                   target: nhbench.TestServer,
                                                   value: bytes) -> None:
    # The Any's bytes are the client's: a StatsdSink that does not decode is refused by name,
    # never an INTERNAL error or a crash.
    request = start_request(uri=target.url, duration="1s", requests_per_second=5)
    sink = request.start_request.options.stats_sinks.add(name="envoy.stat_sinks.statsd")
    sink.typed_config.type_url = _STATSD_URL
    sink.typed_config.value = value
    code, answers = execute(service, request)
    assert code == grpc.StatusCode.OK and len(answers) == 1
    assert answers[0].error_detail.code == INVALID_ARGUMENT, answers[0]
    assert "stats_sinks" in answers[0].error_detail.message
    assert_still_serving(service, target)


# ---- the service's own machine: Unix sockets and files -----------------------------------------


def test_a_unix_socket_target_is_refused_and_nothing_connects(
        service: Service, target: nhbench.TestServer, sock_dir: str) -> None:
    path = os.path.join(sock_dir, "victim.sock")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen(16)
    listener.settimeout(0.2)
    try:
        code, answers = execute(service, start_request(uri=f"http://unix:{path}:/x",
                                                       duration="1s", requests_per_second=5))
        assert code == grpc.StatusCode.OK and len(answers) == 1
        assert answers[0].error_detail.code == INVALID_ARGUMENT
        assert "--allow-unix-sockets" in answers[0].error_detail.message
        with pytest.raises(TimeoutError):
            listener.accept()  # the run never started: nobody connected
    finally:
        listener.close()
    assert_still_serving(service, target)


def test_a_unix_socket_target_runs_when_the_operator_allows_it(sock_dir: str) -> None:
    path = os.path.join(sock_dir, "origin.sock")
    with nhbench.TestServer(listen=f"unix:{path}") as origin:
        allowed = Service("--allow-unix-sockets")
        try:
            code, answers = execute(allowed, start_request(uri=f"http://unix:{path}:/x",
                                                           duration="1s",
                                                           requests_per_second=20))
            assert code == grpc.StatusCode.OK and len(answers) == 1
            assert not answers[0].HasField("error_detail"), answers[0].error_detail
            counters = {c.name: c.value for c in answers[0].output.results[-1].counters}
            assert counters["benchmark.http_2xx"] == int(origin.stats()["requests"]) > 0
        finally:
            status, err = allowed.stop()
        assert status == 0, err[-2000:]


def test_a_local_ca_file_is_refused_unless_allowed() -> None:
    # service.proto's UpstreamTlsContext declares no common_tls_context today, so a request
    # cannot carry trusted_ca (it is refused as an unknown field); the mapping refuses the
    # file all the same, before the options load it as a CA bundle (whose error would tell a
    # client about the service's files).
    from nhbench._exceptions import OptionsError
    from nhbench.service._mapping import LocalAccess, start_options

    clo = {"uri": "https://127.0.0.1:9/", "tls_context": {"common_tls_context": {
        "validation_context": {"trusted_ca": {"filename": "/etc/passwd"}}}}}
    with pytest.raises(OptionsError, match="--allow-local-files") as info:
        start_options(clo)
    assert "passwd" not in str(info.value)
    with pytest.raises(OptionsError, match="cannot load CA certificates from '/etc/passwd'"):
        start_options(clo, local=LocalAccess(files=True))


# ---- streams that hold threads -----------------------------------------------------------------


def _hold(service: Service, method: str, outcomes: list[Any], stop: threading.Event) -> None:
    def nothing() -> Iterator[bytes]:
        while not stop.is_set():
            time.sleep(0.05)
        yield from ()

    call = service.channel.stream_stream(method, request_serializer=lambda b: b,
                                         response_deserializer=lambda b: b)
    try:
        for _ in call(nothing(), timeout=CALL_TIMEOUT):
            pass
        outcomes.append(grpc.StatusCode.OK)
    except grpc.RpcError as exc:
        outcomes.append(exc.code())


def test_idle_streams_time_out_and_never_starve_health(target: nhbench.TestServer) -> None:
    # 32 idle ExecutionStreams used to take every thread of the server: health checks and
    # benchmarks were refused (RESOURCE_EXHAUSTED) for as long as the client kept them.
    service = Service("--stream-idle-timeout", "10")
    stop = threading.Event()
    executions: list[Any] = []
    reflections: list[Any] = []
    threads = [threading.Thread(target=_hold, args=(service, METHOD, executions, stop))
               for _ in range(40)]
    threads += [threading.Thread(target=_hold, args=(service, REFLECTION, reflections, stop))
                for _ in range(8)]
    try:
        for thread in threads:
            thread.start()
        # Beyond the budgets: the 8 ExecutionStreams idle the longest made room for the
        # newer ones, and 4 reflection streams were refused.
        assert wait_until(lambda: len(executions) >= 8 and len(reflections) >= 4, timeout=30)
        assert executions.count(grpc.StatusCode.RESOURCE_EXHAUSTED) == 8
        assert reflections.count(grpc.StatusCode.RESOURCE_EXHAUSTED) == 4
        for _ in range(20):
            assert service.health() == SERVING
        # A benchmark runs while 32 idle streams are held (one more of them makes room).
        assert_still_serving(service, target)
        # The rest end on their own, without a request.
        for thread in threads[:40]:
            thread.join(60)
        assert executions.count(grpc.StatusCode.RESOURCE_EXHAUSTED) == 9
        assert executions.count(grpc.StatusCode.DEADLINE_EXCEEDED) == 31
        assert_still_serving(service, target)
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
        status, err = service.stop()
    assert status == 0, err[-2000:]


def test_ten_thousand_start_requests_on_one_stream_are_bounded(
        service: Service, target: nhbench.TestServer) -> None:
    # The second StartRequest arrives while the first runs: the stream ends with Nighthawk's
    # INTERNAL "Only a single benchmark session...". The requests behind it are never read
    # (gRPC's flow control holds them at the client), so the service's memory stays flat.
    before = service.hwm_mb()
    request = start_request(uri=target.url, duration="0.5s", requests_per_second=10)
    code, answers = execute(service, *([request] * 10_000))
    assert code == grpc.StatusCode.INTERNAL
    assert len(answers) <= 1
    assert service.hwm_mb() - before < 100
    assert_still_serving(service, target)


# ---- who may use the service ---------------------------------------------------------------


def test_a_non_loopback_listen_needs_a_token() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "nhbench", "service", "--listen", "0.0.0.0:0"],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        env={**{k: v for k, v in os.environ.items() if k != "NHBENCH_SERVICE_TOKEN"},
             "PYTHONPATH": PACKAGE_PARENT})
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.splitlines()) == 1 and "--token" in proc.stderr


def test_a_token_is_required_on_every_call_but_health(target: nhbench.TestServer) -> None:
    token = "s3cret-token-for-the-test"
    service = Service("--token", token)
    try:
        request = start_request(uri=target.url, duration="0.5s", requests_per_second=10)
        code, answers = execute(service, request)
        assert code == grpc.StatusCode.UNAUTHENTICATED and answers == []
        wrong = service.stream(iter([request]), timeout=CALL_TIMEOUT,
                               metadata=[("authorization", "Bearer not-the-token")])
        with pytest.raises(grpc.RpcError) as info:
            list(wrong)
        assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert service.health() == SERVING
        answers = list(service.stream(iter([request]), timeout=CALL_TIMEOUT,
                                      metadata=[("authorization", f"Bearer {token}")]))
        assert len(answers) == 1 and not answers[0].HasField("error_detail")
    finally:
        status, err = service.stop()
    assert status == 0, err[-2000:]
