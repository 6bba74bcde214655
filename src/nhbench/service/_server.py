"""The gRPC server: NighthawkService/ExecutionStream, health and reflection (docs/service.md).

Behaviour follows Nighthawk's source/client/service_impl.cc and its test/service_test.cc:

- One ExecutionResponse per StartRequest, in order, on the stream that asked.
- One benchmark at a time per service, whichever stream asks: a StartRequest while one runs
  (on this stream or another) ends that stream with status INTERNAL "Only a single benchmark
  session is allowed at a time.", after the running execution of that stream (if any) has
  been answered. A client runs several executions on one stream by waiting for each answer
  before sending the next request.
- UpdateRequest and CancellationRequest are not implemented by Nighthawk: the stream ends
  with status INTERNAL "Request is not supported yet.", again after a running execution of
  that stream has been answered.
- The client closing its side of the stream ends the stream with OK once every execution
  it started has been answered.

nhbench's own additions: a stream the client cancels (or loses) stops its running
benchmark, since nobody can receive the answer; and a graceful shutdown (SIGINT/SIGTERM)
sets health to NOT_SERVING, stops the running benchmark, answers it with what it measured,
and answers any later StartRequest with error_detail UNAVAILABLE.
"""

from __future__ import annotations

import logging
import queue
import socket
import sys
import threading
import traceback
import uuid
from collections.abc import Iterator, Mapping
from concurrent import futures
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from .._exceptions import NHBenchError, OptionsError, ResolveError
from ..distributed import make_benchmark
from ..outputs import nighthawk_output
from ._mapping import refuse_unsupported, start_options
from ._protos import SERVICE_NAME, Protos

__all__ = ["BUSY_MESSAGE", "MAX_CALLS", "UNSUPPORTED_MESSAGE", "Service"]

_log = logging.getLogger("nhbench.service")

#: Nighthawk's words, kept so that tools matching on them keep working.
BUSY_MESSAGE = "Only a single benchmark session is allowed at a time."
UNSUPPORTED_MESSAGE = "Request is not supported yet."

# gRPC's (and google.rpc.Code's) numbers.
_INVALID_ARGUMENT = grpc.StatusCode.INVALID_ARGUMENT.value[0]
_INTERNAL = grpc.StatusCode.INTERNAL.value[0]
_UNAVAILABLE = grpc.StatusCode.UNAVAILABLE.value[0]

#: How many calls the server handles at once. gRPC's Python server gives every call a thread
#: of its pool for as long as it lasts, and an open ExecutionStream lasts until the client
#: closes it: with more calls than threads, the extra calls (a health check too) would wait
#: in a queue for a stream to end. Limiting the calls to the threads makes the extra one fail
#: at once with RESOURCE_EXHAUSTED instead. 32 open streams is far beyond what one
#: benchmark-at-a-time service needs, and 32 idle threads cost little.
MAX_CALLS = 32


class _End:
    """The last event of a stream: its status (None: OK)."""

    def __init__(self, code: grpc.StatusCode | None = None, message: str = "") -> None:
        self.code = code
        self.message = message


class Service:
    """One ``nhbench service``: ``start()`` binds and serves, ``stop()`` shuts down.

    `overrides` are option values applied to every execution (the service's ``--ray`` and
    ``--hosts``)."""

    def __init__(self, listen: tuple[str, int], *,
                 overrides: Mapping[str, Any] | None = None,
                 max_calls: int = MAX_CALLS) -> None:
        self.listen = listen
        self.max_calls = max_calls
        self.port = 0
        self.protos = Protos()
        self._overrides = dict(overrides or {})
        self._busy = threading.Lock()
        self._lock = threading.Lock()
        self._running: set[Any] = set()  # the benchmarks in progress (at most one)
        self._executions: set[threading.Thread] = set()
        self._closing = False
        self._streams = 0
        self._server: grpc.Server | None = None
        self._health: health.HealthServicer | None = None

    # ---- life cycle --------------------------------------------------------------------

    def start(self) -> int:
        """Bind, start serving and return the port (the chosen one when it was 0).

        Raises OSError when the address cannot be bound."""
        server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=self.max_calls,
                                       thread_name_prefix="nhbench-service"),
            maximum_concurrent_rpcs=self.max_calls,
            # gRPC sets SO_REUSEPORT by default, which would let a second service bind a
            # port the first one is using and share its connections: refuse instead.
            options=[("grpc.so_reuseport", 0)],
        )
        handler = grpc.method_handlers_generic_handler(SERVICE_NAME, {
            "ExecutionStream": grpc.stream_stream_rpc_method_handler(
                self._execution_stream,
                request_deserializer=self.protos.ExecutionRequest.FromString,
                response_serializer=self.protos.ExecutionResponse.SerializeToString,
            ),
        })
        server.add_generic_rpc_handlers((handler,))
        self._health = health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self._health, server)
        health_name = health_pb2.DESCRIPTOR.services_by_name["Health"].full_name
        reflection.enable_server_reflection(
            (SERVICE_NAME, health_name, reflection.SERVICE_NAME), server,
            pool=self.protos.pool)
        host, port = self.listen
        address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        try:
            bound = server.add_insecure_port(address)
        except RuntimeError:  # grpcio >= 1.50 raises; older ones return 0
            bound = 0
        if not bound:
            server.stop(None)
            raise OSError(f"cannot listen on {address}: {_bind_failure(host, port)}")
        # SERVING from the first call on: a client that checks health as soon as it can
        # connect must not see NOT_FOUND.
        for name in ("", SERVICE_NAME):
            self._health.set(name, health_pb2.HealthCheckResponse.SERVING)
        server.start()
        self._server = server
        self.port = int(bound)
        return self.port

    @property
    def open_streams(self) -> int:
        """How many ExecutionStream calls are open now."""
        with self._lock:
            return self._streams

    @property
    def address(self) -> str:
        """HOST:PORT the service listens on (brackets around an IPv6 host)."""
        host = self.listen[0]
        return f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"

    def stop(self, *, drain: float = 60.0, grace: float = 2.0) -> None:
        """Shut down gracefully: NOT_SERVING, the running benchmark stopped and answered
        (waiting up to `drain` seconds for its requests in flight), then the server stopped
        with `grace` seconds for the answers to reach their clients."""
        with self._lock:
            self._closing = True
            running = list(self._running)
            executions = list(self._executions)
        if self._health is not None:
            self._health.enter_graceful_shutdown()
        for benchmark in running:
            benchmark.stop()
        for thread in executions:
            thread.join(drain)
        if self._server is not None:
            self._server.stop(grace).wait()

    # ---- the stream ----------------------------------------------------------------------

    def _execution_stream(self, requests: Iterator[Any], context: Any) -> Iterator[Any]:
        # Requests are read on a thread of their own, so that a StartRequest that arrives
        # while one runs is seen at once (Nighthawk reads on while it runs, and refuses it),
        # and responses are written here as they come.
        events: queue.Queue[Any] = queue.Queue()
        stream = _Stream()
        context.add_callback(stream.cancel)
        reader = threading.Thread(target=self._read, args=(requests, events, stream),
                                  name="nhbench-service-reader", daemon=True)
        reader.start()
        with self._lock:
            self._streams += 1
        try:
            while True:
                event = events.get()
                if isinstance(event, _End):
                    if event.code is not None:
                        context.set_code(event.code)
                        context.set_details(event.message)
                    return
                yield event
        finally:
            with self._lock:
                self._streams -= 1

    def _read(self, requests: Iterator[Any], events: queue.Queue[Any], stream: _Stream) -> None:
        end = _End()
        execution: threading.Thread | None = None
        try:
            for request in requests:
                kind = request.WhichOneof("command_specific_options")
                if kind == "start_request":
                    with self._lock:
                        closing = self._closing
                    if closing:
                        events.put(self._error(_UNAVAILABLE, "the service is shutting down"))
                        continue
                    if not self._busy.acquire(blocking=False):
                        end = _End(grpc.StatusCode.INTERNAL, BUSY_MESSAGE)
                        break
                    if execution is not None:
                        execution.join()  # answered already: it released the busy lock
                    execution = threading.Thread(
                        target=self._execute, args=(request.start_request, events, stream),
                        name="nhbench-service-execution", daemon=True)
                    with self._lock:
                        self._executions.add(execution)
                    execution.start()
                elif kind in ("update_request", "cancellation_request"):
                    end = _End(grpc.StatusCode.INTERNAL, UNSUPPORTED_MESSAGE)
                    break
                else:
                    # Nighthawk's validation requires one member; an empty request is the
                    # client's mistake.
                    end = _End(grpc.StatusCode.INVALID_ARGUMENT,
                               "an ExecutionRequest needs start_request, update_request or "
                               "cancellation_request")
                    break
        except grpc.RpcError:
            end = _End(grpc.StatusCode.CANCELLED, "the client cancelled the stream")
        except Exception as exc:  # noqa: BLE001 - never leave the stream without an end
            _log.error("reading the stream failed: %s", exc)
            end = _End(grpc.StatusCode.INTERNAL, f"reading the stream failed: {exc}")
        finally:
            if execution is not None:
                execution.join()
            events.put(end)

    def _execute(self, start: Any, events: queue.Queue[Any], stream: _Stream) -> None:
        try:
            response = self._run(start, stream)
        except Exception as exc:  # noqa: BLE001 - an answer is owed whatever happens
            traceback.print_exc(file=sys.stderr)
            response = self._error(_INTERNAL, f"internal error: {exc}")
        finally:
            with self._lock:
                self._executions.discard(threading.current_thread())
            # Released before the answer is written, as Nighthawk does: a client that sends
            # its next StartRequest as soon as it reads this answer must not be refused.
            self._busy.release()
        events.put(response)

    def _error(self, code: int, message: str, execution_id: str = "") -> Any:
        return self.protos.ExecutionResponse(
            execution_id=execution_id,
            error_detail=self.protos.Status(code=code, message=message))

    def _run(self, start: Any, stream: _Stream) -> Any:
        given = start.options
        execution_id = given.execution_id.value or str(uuid.uuid4())
        try:
            # Checked on the message before it becomes JSON: an unknown field would be
            # dropped on the way (silently ignored), and an Any of a type the schema lacks
            # (a plugin's config) cannot be written as JSON at all.
            unknown = self.protos.unknown_fields(given)
            if unknown:
                raise OptionsError(
                    f"CommandLineOptions has fields nhbench's schema does not know: "
                    f"{', '.join(unknown)} (a newer Nighthawk's option, or an Envoy type "
                    f"nhbench does not support)")
            refuse_unsupported(self.protos.set_fields(given))
            clo = self.protos.to_dict(given)
            options = start_options({**clo, "execution_id": execution_id}, self._overrides)
            benchmark = make_benchmark(options)
        except OptionsError as exc:
            return self._error(_INVALID_ARGUMENT, str(exc), execution_id)
        with self._lock:
            closing = self._closing
            if not closing:
                self._running.add(benchmark)
        if closing:
            return self._error(_UNAVAILABLE, "the service is shutting down", execution_id)
        stream.benchmark = benchmark
        if stream.cancelled:
            benchmark.stop()
        _log.info("execution %s started: %s", execution_id,
                  options.uri or ", ".join(options.multi_target_endpoint))
        try:
            result = benchmark.run()
        except ResolveError as exc:
            _log.info("execution %s did not start: %s", execution_id, exc)
            return self._error(_INTERNAL, str(exc), execution_id)
        except NHBenchError as exc:
            _log.info("execution %s did not run: %s", execution_id, exc)
            return self._error(_INTERNAL, f"the benchmark could not run: {exc}", execution_id)
        finally:
            stream.benchmark = None
            with self._lock:
                self._running.discard(benchmark)
        response = self.protos.ExecutionResponse(execution_id=execution_id)
        response.output.CopyFrom(self.protos.output(nighthawk_output(result)))
        if not result.success:
            response.error_detail.CopyFrom(self.protos.Status(
                code=_INTERNAL, message=_failure_message(result)))
        _log.info("execution %s %s: %d responses", execution_id,
                  "succeeded" if result.success else "failed", result.latency.count)
        return response


class _Stream:
    """What a stream's cancellation needs to reach: its running benchmark."""

    def __init__(self) -> None:
        self.benchmark: Any = None
        self.cancelled = False

    def cancel(self) -> None:
        # gRPC calls this when the RPC ends for any reason; only a running benchmark (the
        # client went away while it ran) has anything to stop.
        self.cancelled = True
        benchmark = self.benchmark
        if benchmark is not None:
            benchmark.stop()


def _bind_failure(host: str, port: int) -> str:
    # gRPC says only "Failed to bind"; binding a plain socket the same way names the reason
    # (address in use, not an address of this machine, permission denied).
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as exc:
        return exc.strerror or str(exc)
    return "gRPC could not bind it"


def _failure_message(result: Any) -> str:
    # Nighthawk answers a failed run with the output and an INTERNAL error_detail whose
    # message explains the usual causes; nhbench can name the cause.
    reasons = []
    if result.failed_predicates:
        reasons.append("failure predicates fired: " + ", ".join(result.failed_predicates))
    if getattr(result, "no_success_reason", None):
        reasons.append(str(result.no_success_reason))
    if result.error:
        reasons.append(str(result.error))
    detail = "; ".join(reasons) or "the run did not succeed"
    return (f"the benchmark failed ({detail}); the output has the counters. Set "
            f"failure_predicates (and no_default_failure_predicates) to relax expectations.")
