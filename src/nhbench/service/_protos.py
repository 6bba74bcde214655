"""The service's message classes, made at start from a shipped FileDescriptorSet.

``nighthawk_service.binpb`` (package data beside this module) is proto/nighthawk/client/
service.proto and everything it imports, compiled by protoc (``--include_imports``) with
protobuf's own well-known files (google/protobuf/*.proto) left out: those come from the
installed protobuf, so the set never disagrees with the runtime about them. Shipping the
compiled set instead of generated ``_pb2`` modules means no generated code in the repository
and no protoc at run time, and one file that a test regenerates from proto/ and compares
(tests/test_service_protos.py), so the two cannot drift.

The files go into a pool of their own rather than protobuf's default pool, so that a process
that also loads other copies of Nighthawk's protos (a client compiled from proto/, as the
tests do) has no conflicting definitions. gRPC's health and reflection protos are added to
the same pool, so that server reflection describes every service the server has.
"""

from __future__ import annotations

import importlib
from importlib import resources
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory

__all__ = ["DESCRIPTOR_SET", "SERVICE_NAME", "Protos"]

#: The package data file: the compiled FileDescriptorSet.
DESCRIPTOR_SET = "nighthawk_service.binpb"
#: The fully qualified name of the service, as reflection and health name it.
SERVICE_NAME = "nighthawk.client.NighthawkService"


def _well_known(name: str) -> bytes:
    # google/protobuf/duration.proto -> google.protobuf.duration_pb2, which the protobuf
    # runtime always ships.
    module = importlib.import_module(name[: -len(".proto")].replace("/", ".") + "_pb2")
    return bytes(module.DESCRIPTOR.serialized_pb)


def _repeated(field: Any) -> bool:
    # FieldDescriptor.is_repeated is protobuf 6's spelling; `label` (gone from protobuf 7's
    # upb descriptors) is protobuf 5's, which the `service` extra still allows.
    is_repeated = getattr(field, "is_repeated", None)
    if is_repeated is not None:
        return bool(is_repeated)
    return bool(field.label == field.LABEL_REPEATED)


class Protos:
    """The descriptor pool and the message classes the service uses."""

    def __init__(self) -> None:
        from grpc_health.v1 import health_pb2
        from grpc_reflection.v1alpha import reflection_pb2

        data = resources.files(__package__).joinpath(DESCRIPTOR_SET).read_bytes()
        files = descriptor_pb2.FileDescriptorSet.FromString(data).file
        self.pool = descriptor_pool.DescriptorPool()
        added: set[str] = set()

        def add(name: str, serialized: bytes) -> None:
            if name not in added:
                self.pool.AddSerializedFile(serialized)
                added.add(name)

        # protoc writes a set with every file after its imports; the well-known ones are
        # added the first time a file imports them.
        for file in files:
            for dependency in file.dependency:
                if dependency.startswith("google/protobuf/"):
                    add(dependency, _well_known(dependency))
            add(file.name, file.SerializeToString())
        for module in (health_pb2, reflection_pb2):
            add(module.DESCRIPTOR.name, bytes(module.DESCRIPTOR.serialized_pb))
        self.ExecutionRequest = self.message("nighthawk.client.ExecutionRequest")
        self.ExecutionResponse = self.message("nighthawk.client.ExecutionResponse")
        self.Output = self.message("nighthawk.client.Output")
        self.Status = self.message("google.rpc.Status")

    def message(self, full_name: str) -> Any:
        """The message class of `full_name` in the service's pool."""
        return message_factory.GetMessageClass(self.pool.FindMessageTypeByName(full_name))

    @staticmethod
    def set_fields(message: Any) -> list[str]:
        """The names of `message`'s fields that hold something: a field set to an empty
        message (a wrapper holding its zero value, say) asks for nothing and is left out."""
        return [field.name for field, value in message.ListFields()
                if _repeated(field) or field.message_type is None or value.ByteSize() > 0]

    @classmethod
    def unknown_fields(cls, message: Any, path: str = "") -> list[str]:
        """Where `message` (recursively) holds fields its schema does not know, as
        ``path.<number>``: what a newer Nighthawk client sends, or members of the Envoy
        types that proto/ declares without them."""
        from google.protobuf.unknown_fields import UnknownFieldSet

        found = [f"{path}<{field.field_number}>".lstrip(".")
                 for field in UnknownFieldSet(message)]
        for field, value in message.ListFields():
            if field.message_type is None:
                continue
            if field.message_type.GetOptions().map_entry:
                has_messages = field.message_type.fields_by_name["value"].message_type
                items = list(value.values()) if has_messages is not None else []
            else:
                items = list(value) if _repeated(field) else [value]
            for item in items:
                found += cls.unknown_fields(item, f"{path}{field.name}.")
        return found

    def to_dict(self, message: Any) -> dict[str, Any]:
        """A message in proto3 JSON form with the proto field names (Nighthawk's spelling)."""
        document: dict[str, Any] = json_format.MessageToDict(
            message, preserving_proto_field_name=True, descriptor_pool=self.pool)
        return document

    def output(self, document: dict[str, Any]) -> Any:
        """Nighthawk's Output message from nhbench's Output JSON document, parsed strictly:
        a key the schema lacks is an error, not dropped."""
        return json_format.ParseDict(document, self.Output(), ignore_unknown_fields=False,
                                     descriptor_pool=self.pool)
