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

import hmac
import json
import logging
import queue
import socket
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Iterator, Mapping
from concurrent import futures
from typing import Any

import grpc
from google.protobuf.message import DecodeError
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from .._exceptions import NHBenchError, OptionsError, ResolveError
from ..distributed import BenchmarkProtocol, RaySession, Session, make_benchmark, make_session
from ..options import parse_stats_sink
from ..outputs import nighthawk_output
from ._mapping import MAX_STATS_SINKS, LocalAccess, refuse_unsupported, start_options
from ._protos import SERVICE_NAME, Protos

__all__ = ["BUSY_MESSAGE", "IDLE_TIMEOUT", "MAX_REFLECTION_STREAMS", "MAX_STREAMS",
           "RAY_IDLE_TIMEOUT", "SPARE_CALLS", "UNSUPPORTED_MESSAGE", "Service"]

_log = logging.getLogger("nhbench.service")

# The one stats sink type a request's stats_sinks may hold (Envoy's statsd sink).
_STATSD_SINK = "envoy.config.metrics.v3.StatsdSink"
_STATSD_SINK_URL = f"type.googleapis.com/{_STATSD_SINK}"

#: Nighthawk's words, kept so that tools matching on them keep working.
BUSY_MESSAGE = "Only a single benchmark session is allowed at a time."
UNSUPPORTED_MESSAGE = "Request is not supported yet."

# gRPC's (and google.rpc.Code's) numbers.
_INVALID_ARGUMENT = grpc.StatusCode.INVALID_ARGUMENT.value[0]
_INTERNAL = grpc.StatusCode.INTERNAL.value[0]
_UNAVAILABLE = grpc.StatusCode.UNAVAILABLE.value[0]

#: How many ExecutionStreams may be open at once. gRPC's Python server gives every call a
#: thread of its pool for as long as it lasts, and an open stream lasts until its client
#: closes it (or IDLE_TIMEOUT ends it). The budget is counted by the handler, apart from the
#: server's own call limit, so that streams never take the threads health checks need: a
#: stream beyond it fails at once with RESOURCE_EXHAUSTED. One benchmark runs at a time, so
#: 32 streams is far beyond what the service's clients need.
MAX_STREAMS = 32
#: Reflection streams (ServerReflectionInfo) hold a thread while open too; a client needs one.
MAX_REFLECTION_STREAMS = 4
#: Threads (and calls) kept beyond the stream budgets for short calls: health checks,
#: reflection answers, and the refusals of calls beyond a budget.
SPARE_CALLS = 16
#: Seconds a stream may stay open without a request to answer: before its first StartRequest
#: and after each answer. Nighthawk's clients send their StartRequest as soon as the stream
#: opens and the next one as soon as they read an answer; a stream that sends nothing for
#: this long only holds a place of the budget. It ends with DEADLINE_EXCEEDED.
IDLE_TIMEOUT = 30.0
#: Seconds the Ray cluster connection and load actors of ``--ray`` executions (`RaySession`),
#: or the load generators' agents of ``loadgen`` executions (`LoadgenSession`), are kept
#: after the last execution: the next execution within that time starts at once, without
#: connecting and starting actors or agents again; after it, the cluster or the load
#: generators get their resources back and the next execution connects anew.
RAY_IDLE_TIMEOUT = 300.0
# How often an idle stream looks at its clock.
_IDLE_POLL = 0.25
_HEALTH_PREFIX = "/grpc.health.v1.Health/"
_REFLECTION_PREFIX = "/grpc.reflection."


class _End:
    """The last event of a stream: its status (None: OK)."""

    def __init__(self, code: grpc.StatusCode | None = None, message: str = "") -> None:
        self.code = code
        self.message = message


class Service:
    """One ``nhbench service``: ``start()`` binds and serves, ``stop()`` shuts down.

    `overrides` are option values applied to every execution (the service's ``--ray`` and
    ``--hosts``); `local` says which local resources a request may name (Unix sockets, files);
    `token`, when given, is required on every call but health checks (docs/service.md)."""

    def __init__(self, listen: tuple[str, int], *,
                 overrides: Mapping[str, Any] | None = None,
                 max_streams: int = MAX_STREAMS,
                 idle_timeout: float = IDLE_TIMEOUT,
                 local: LocalAccess | None = None,
                 token: str | None = None,
                 ray_idle_timeout: float = RAY_IDLE_TIMEOUT) -> None:
        self.listen = listen
        self.max_streams = max_streams
        self.idle_timeout = idle_timeout
        self.local = local or LocalAccess()
        self._token = token
        self._reflection_streams = threading.BoundedSemaphore(MAX_REFLECTION_STREAMS)
        self.port = 0
        self.protos = Protos()
        self._overrides = dict(overrides or {})
        self._busy = threading.Lock()
        self._lock = threading.Lock()
        self._running: set[BenchmarkProtocol] = set()  # the benchmarks in progress (at most one)
        self._executions: set[threading.Thread] = set()
        self._closing = False
        self._streams: set[_Stream] = set()  # the open ExecutionStreams
        self._server: grpc.Server | None = None
        self._health: health.HealthServicer | None = None
        # The executions' session (--ray: a RaySession; loadgen: a LoadgenSession): made
        # by the first execution, closed after ray_idle_timeout seconds without one, and
        # with the service.
        self.ray_idle_timeout = ray_idle_timeout
        self.session: Session | None = None
        self._ray_timer: threading.Timer | None = None

    # ---- life cycle --------------------------------------------------------------------

    def start(self) -> int:
        """Bind, start serving and return the port (the chosen one when it was 0).

        Raises OSError when the address cannot be bound."""
        # Every long-lived call has a budget of its own (counted in the handler or the
        # interceptor) and the pool has SPARE_CALLS threads beyond them all, so that health
        # checks always find one. The server-wide limit only bounds what waits for a thread.
        calls = self.max_streams + MAX_REFLECTION_STREAMS + SPARE_CALLS
        server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=calls,
                                       thread_name_prefix="nhbench-service"),
            interceptors=(_Guard(self),),
            maximum_concurrent_rpcs=calls,
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
            return len(self._streams)

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
        self._close_ray_session(idle=False)
        if self._server is not None:
            self._server.stop(grace).wait()

    @property
    def ray_session(self) -> RaySession | None:
        """The executions' `RaySession` while one is kept (--ray), else None."""
        session = self.session
        return session if isinstance(session, RaySession) else None

    def _session_for(self, benchmark_options: Any) -> Session | None:
        """The session of an execution on a cluster or from load generators (None for a
        local one): the one kept, when it is of the execution's kind."""
        made = make_session(benchmark_options)
        if made is None:
            return None
        stale = None
        with self._lock:
            if self._ray_timer is not None:
                self._ray_timer.cancel()
                self._ray_timer = None
            if self.session is not None and type(self.session) is not type(made):
                stale, self.session = self.session, None
            if self.session is None:
                self.session = made
            session = self.session
        if stale is not None:
            stale.close()
        return session

    def _ray_session_idle(self) -> None:
        # After an execution on the cluster: the session is closed unless another one
        # comes within the idle time-out.
        with self._lock:
            if self.session is None or self._closing:
                return
            if self._ray_timer is not None:
                self._ray_timer.cancel()
            timer = threading.Timer(self.ray_idle_timeout, self._close_ray_session)
            timer.daemon = True
            self._ray_timer = timer
            timer.start()

    def _close_ray_session(self, idle: bool = True) -> None:
        with self._lock:
            if idle and (self._running or threading.current_thread() is not self._ray_timer):
                return  # an execution took the session since the timer fired
            session, self.session = self.session, None
            if self._ray_timer is not None:
                self._ray_timer.cancel()
                self._ray_timer = None
        if session is not None:
            session.close()
            _log.info("%s closed (%s)", "Ray session" if isinstance(session, RaySession)
                      else "load generators' session", "idle" if idle else "service stopping")

    # ---- the stream ----------------------------------------------------------------------

    def _admit(self, stream: _Stream) -> bool:
        """Count `stream` among the open ones. At the budget, the stream idle the longest
        makes room (it has nothing to answer: its client loses nothing but the place); when
        none is idle (every stream has a request in progress), False."""
        with self._lock:
            while len(self._streams) >= self.max_streams:
                idle = sorted((s for s in self._streams if s.idle_for() > 0),
                              key=lambda s: -s.idle_for())
                if not any(s.end_if_idle(_End(
                        grpc.StatusCode.RESOURCE_EXHAUSTED,
                        f"ended after {s.idle_for():.0f} s without a request, to make room "
                        f"for a new stream (the service keeps {self.max_streams} open)"))
                        for s in idle):
                    return False
                self._streams -= {s for s in self._streams if s.ended}
            self._streams.add(stream)
            return True

    def _execution_stream(self, requests: Iterator[Any], context: Any) -> Iterator[Any]:
        # Requests are read on a thread of their own, so that a StartRequest that arrives
        # while one runs is seen at once (Nighthawk reads on while it runs, and refuses it),
        # and responses are written here as they come.
        events: queue.Queue[Any] = queue.Queue()
        stream = _Stream(events)
        if not self._admit(stream):
            context.set_code(grpc.StatusCode.RESOURCE_EXHAUSTED)
            context.set_details(f"the service has {self.max_streams} ExecutionStreams open, "
                                f"each with a request in progress (its limit); try again later")
            return
        context.add_callback(stream.cancel)
        reader = threading.Thread(target=self._read, args=(requests, events, stream),
                                  name="nhbench-service-reader", daemon=True)
        try:
            reader.start()
            while True:
                try:
                    event = events.get(timeout=_IDLE_POLL)
                except queue.Empty:
                    if stream.idle_for() > self.idle_timeout:
                        stream.end_if_idle(_End(
                            grpc.StatusCode.DEADLINE_EXCEEDED,
                            f"no request for {self.idle_timeout:g} s: an ExecutionStream "
                            f"that waits for nothing is ended (docs/service.md)"))
                    continue
                if isinstance(event, _End):
                    if event.code is not None:
                        context.set_code(event.code)
                        context.set_details(event.message)
                    return
                yield event
        finally:
            with self._lock:
                self._streams.discard(stream)

    def _read(self, requests: Iterator[Any], events: queue.Queue[Any], stream: _Stream) -> None:
        end = _End()
        execution: threading.Thread | None = None
        try:
            for request in requests:
                if not stream.busy():
                    break  # the stream was ended (idle) as this request arrived
                kind = request.WhichOneof("command_specific_options")
                if kind == "start_request":
                    with self._lock:
                        closing = self._closing
                    if closing:
                        events.put(self._error(_UNAVAILABLE, "the service is shutting down"))
                        stream.idle()
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
        stream.idle()

    def _error(self, code: int, message: str, execution_id: str = "") -> Any:
        return self.protos.ExecutionResponse(
            execution_id=execution_id,
            error_detail=self.protos.Status(code=code, message=message))

    def _check_sinks(self, given: Any) -> None:
        # A stats sink's typed_config is an Any: of a type other than StatsdSink it cannot
        # become JSON (refused by name, as the command line refuses it), and a StatsdSink
        # holding fields the schema lacks would lose them on the way.
        where = "CommandLineOptions.stats_sinks"
        if len(given.stats_sinks) > MAX_STATS_SINKS:
            raise OptionsError(f"{where}: {len(given.stats_sinks)} sinks; at most "
                               f"{MAX_STATS_SINKS} here; nothing was sent")
        for index, sink in enumerate(given.stats_sinks, 1):
            if not sink.HasField("typed_config"):
                continue
            url = sink.typed_config.type_url
            if url != _STATSD_SINK_URL:
                parse_stats_sink(where, index, json.dumps(
                    {"name": sink.name, "typed_config": {"@type": url}}))
                raise OptionsError(f"{where} #{index}: typed_config {url}: not a stats sink "
                                   f"nhbench has")
            config = self.protos.message(_STATSD_SINK)()
            try:
                unpacked = sink.typed_config.Unpack(config)
            except DecodeError as exc:
                # The Any's bytes are the client's: a StatsdSink that does not decode.
                raise OptionsError(f"{where} #{index}: typed_config: not a StatsdSink "
                                   f"({exc})") from None
            if not unpacked:
                raise OptionsError(f"{where} #{index}: typed_config: not a StatsdSink")
            unknown = self.protos.unknown_fields(config)
            if unknown:
                raise OptionsError(f"{where} #{index}: typed_config has fields nhbench's "
                                   f"schema does not know: {', '.join(unknown)}")

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
            self._check_sinks(given)
            clo = self.protos.to_dict(given)
            options = start_options({**clo, "execution_id": execution_id}, self._overrides,
                                    local=self.local)
            session = self._session_for(options)
            benchmark = make_benchmark(options, session=session)
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
            if session is not None:
                self._ray_session_idle()
        response = self.protos.ExecutionResponse(execution_id=execution_id)
        response.output.CopyFrom(self.protos.output(nighthawk_output(result)))
        if not result.success:
            response.error_detail.CopyFrom(self.protos.Status(
                code=_INTERNAL, message=_failure_message(result)))
        _log.info("execution %s %s: %d responses", execution_id,
                  "succeeded" if result.success else "failed", result.latency.count)
        return response


class _Stream:
    """What a stream's cancellation needs to reach (its running benchmark), and since when
    it has been waiting for a request (the idle time-out, and the choice of the stream that
    makes room for a new one)."""

    def __init__(self, events: queue.Queue[Any]) -> None:
        self.benchmark: BenchmarkProtocol | None = None
        self.cancelled = False
        self.ended = False
        self._events = events
        self._lock = threading.Lock()
        self._idle_since: float | None = time.monotonic()

    def busy(self) -> bool:
        """A request arrived: the stream is not idle until it is answered. False when the
        stream was ended already (the request is not served)."""
        with self._lock:
            if self.ended:
                return False
            self._idle_since = None
            return True

    def idle(self) -> None:
        """Every request so far is answered: the idle clock starts."""
        with self._lock:
            self._idle_since = time.monotonic()

    def idle_for(self) -> float:
        """Seconds since the stream had nothing to answer; 0 while a request is in progress."""
        since = self._idle_since
        return 0.0 if since is None or self.ended else time.monotonic() - since

    def end_if_idle(self, end: _End) -> bool:
        """End the stream with `end` unless a request is in progress (then False)."""
        with self._lock:
            if self.ended or self._idle_since is None:
                return False
            self.ended = True
        self._events.put(end)
        return True

    def cancel(self) -> None:
        # gRPC calls this when the RPC ends for any reason; only a running benchmark (the
        # client went away while it ran) has anything to stop.
        self.cancelled = True
        benchmark = self.benchmark
        if benchmark is not None:
            benchmark.stop()


class _Guard(grpc.ServerInterceptor):
    """The service's token (on every call but health checks) and the reflection streams'
    budget, checked before a call reaches its handler."""

    def __init__(self, service: Service) -> None:
        self._service = service

    def intercept_service(self, continuation: Any, details: Any) -> Any:
        method = str(details.method or "")
        handler = continuation(details)
        if handler is None or method.startswith(_HEALTH_PREFIX):
            return handler
        token = self._service._token
        if token is not None and not _token_matches(details.invocation_metadata, token):
            return _refusal(handler, grpc.StatusCode.UNAUTHENTICATED,
                            "this service needs its token: metadata 'authorization: Bearer "
                            "TOKEN' (docs/service.md)")
        if method.startswith(_REFLECTION_PREFIX) and handler.stream_stream is not None:
            return _budgeted(handler, self._service._reflection_streams,
                             f"the service has {MAX_REFLECTION_STREAMS} reflection streams "
                             f"open already (its limit)")
        return handler


def _token_matches(metadata: Any, token: str) -> bool:
    expected = f"Bearer {token}".encode()
    for key, value in metadata or ():
        if key == "authorization":
            given = value.encode() if isinstance(value, str) else bytes(value)
            # Compared in constant time: the answer's timing says nothing about the token.
            return hmac.compare_digest(given, expected)
    return False


def _refusal(handler: Any, code: grpc.StatusCode, message: str) -> Any:
    """A handler of the same kind as `handler` that only ends the call with `code`."""
    def refuse(request: Any, context: Any) -> Any:
        context.abort(code, message)

    kinds = (("unary_unary", grpc.unary_unary_rpc_method_handler),
             ("unary_stream", grpc.unary_stream_rpc_method_handler),
             ("stream_unary", grpc.stream_unary_rpc_method_handler),
             ("stream_stream", grpc.stream_stream_rpc_method_handler))
    for kind, make in kinds:
        if getattr(handler, kind) is not None:
            return make(refuse, request_deserializer=handler.request_deserializer,
                        response_serializer=handler.response_serializer)
    return handler


def _budgeted(handler: Any, places: threading.BoundedSemaphore, message: str) -> Any:
    """`handler` (a stream-stream one) held to the places of `places`: a call beyond them
    fails at once with RESOURCE_EXHAUSTED instead of holding a thread."""
    behaviour = handler.stream_stream

    def run(requests: Iterator[Any], context: Any) -> Iterator[Any]:
        if not places.acquire(blocking=False):
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, message)
        try:
            yield from behaviour(requests, context)
        finally:
            places.release()

    return grpc.stream_stream_rpc_method_handler(
        run, request_deserializer=handler.request_deserializer,
        response_serializer=handler.response_serializer)


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
