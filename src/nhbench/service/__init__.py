"""Nighthawk's gRPC service API: ``nhbench service --listen HOST:PORT`` (docs/service.md).

A grpcio server implementing ``nighthawk.client.NighthawkService/ExecutionStream`` from
protos written from Nighthawk's API (proto/nighthawk/client/service.proto), with gRPC
server reflection and health, so that tools written against Nighthawk's service drive
nhbench. grpcio and protobuf are the optional extra ``service``; nothing here imports them
until the server starts.

Issue 15 seam: the implementation replaces `serve`'s body.
"""

from __future__ import annotations

from .._exceptions import RunError

__all__ = ["serve"]


def serve(listen: str) -> int:
    """Serve Nighthawk's service on `listen` until SIGINT/SIGTERM; the exit status."""
    raise RunError("nhbench service is not implemented yet")
