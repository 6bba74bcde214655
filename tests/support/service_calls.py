"""Nighthawk executions through a running `nhbench service`, as the distributed tests make
them (its ExecutionStream, found by reflection, the way a Nighthawk client not built against
our protos would)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

SERVICE = "nighthawk.client.NighthawkService"


def two_node_executions(address: str, server: Any, times: int,
                        after_each: Callable[[], object] = lambda: None) -> None:
    """`times` executions of 1 s at 30 rps against `server` (a TestServer) through the
    service at `address`, each checked: one response without an error, whose results end
    with the two nodes' entries and the global one, and whose upstream_rq_total equals the
    requests the server counted during it. `after_each` runs after each check."""
    import grpc
    from google.protobuf import descriptor_pool, message_factory
    from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
        ProtoReflectionDescriptorDatabase,
    )

    with grpc.insecure_channel(address) as channel:
        pool = descriptor_pool.DescriptorPool(ProtoReflectionDescriptorDatabase(channel))
        method = pool.FindServiceByName(SERVICE).methods_by_name["ExecutionStream"]
        request_class = message_factory.GetMessageClass(method.input_type)
        response_class = message_factory.GetMessageClass(method.output_type)
        call = channel.stream_stream(
            f"/{SERVICE}/ExecutionStream",
            request_serializer=request_class.SerializeToString,
            response_deserializer=response_class.FromString)
        for _ in range(times):
            request = request_class()
            request.start_request.options.uri.value = server.url
            request.start_request.options.duration.seconds = 1
            request.start_request.options.requests_per_second.value = 30
            before = int(server.stats()["requests"])
            responses = list(call(iter([request]), timeout=120))
            served = int(server.stats()["requests"]) - before
            assert len(responses) == 1 and not responses[0].HasField("error_detail")
            results = responses[0].output.results
            assert [e.name for e in results][-3:] == ["host_0", "host_1", "global"]
            global_ = {c.name: c.value for c in results[-1].counters}
            assert global_["upstream_rq_total"] == served > 0
            after_each()
