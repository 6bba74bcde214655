"""The service's shipped descriptor set, its packaging, and the CommandLineOptions mapping.

- src/nhbench/service/nighthawk_service.binpb must be exactly what protoc makes from proto/
  today (regenerated here with grpcio-tools), so the protos and the file the service loads
  cannot drift apart. docs/service.md gives the command that writes it.
- The installed package (the editable install the tests run, or a wheel) has the file.
- `import nhbench` (and building the CLI's parser) imports neither grpc nor protobuf.
- StartRequest options → nhbench Options: what maps, and what is refused by name.
"""

from __future__ import annotations

import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

import nhbench
from nhbench import OptionsError

ROOT = Path(__file__).resolve().parents[1]
PROTO = ROOT / "proto"
SHIPPED = ROOT / "src" / "nhbench" / "service" / "nighthawk_service.binpb"


def regenerate(out: Path) -> bytes:
    """The descriptor set as the repository's procedure makes it (docs/service.md)."""
    import grpc_tools
    from google.protobuf import descriptor_pb2

    well_known = Path(grpc_tools.__file__).parent / "_proto"
    full = out / "full.binpb"
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTO}", f"-I{well_known}",
         "--include_imports", f"--descriptor_set_out={full}",
         "nighthawk/client/service.proto"],
        check=True, capture_output=True, text=True)
    files = descriptor_pb2.FileDescriptorSet.FromString(full.read_bytes())
    shipped = descriptor_pb2.FileDescriptorSet()
    for file in files.file:
        if not file.name.startswith("google/protobuf/"):
            shipped.file.add().CopyFrom(file)
    return bytes(shipped.SerializeToString(deterministic=True))


def test_the_shipped_descriptor_set_is_made_from_proto(tmp_path: Path) -> None:
    pytest.importorskip("grpc_tools", reason="needs grpcio-tools (the test extra)")
    from google.protobuf import descriptor_pb2

    fresh = regenerate(tmp_path)
    shipped = SHIPPED.read_bytes()
    names = [f.name for f in descriptor_pb2.FileDescriptorSet.FromString(shipped).file]
    assert "nighthawk/client/service.proto" in names and "google/rpc/status.proto" in names
    assert fresh == shipped, (
        "src/nhbench/service/nighthawk_service.binpb is stale: regenerate it from proto/ "
        "(docs/service.md, 'The protos')")


def test_the_installed_package_has_the_descriptor_set() -> None:
    import nhbench.service as service

    data = resources.files(service).joinpath("nighthawk_service.binpb").read_bytes()
    assert data == SHIPPED.read_bytes()
    # The wheel takes every file under src/nhbench (pyproject wheel.packages); the file must
    # be tracked and not ignored for the sdist and the wheel to have it.
    tracked = subprocess.run(["git", "ls-files", "--error-unmatch", str(SHIPPED)], cwd=ROOT,
                             capture_output=True, text=True)
    if tracked.returncode != 0 and "not a git repository" in tracked.stderr:
        pytest.skip("not a git checkout")
    ignored = subprocess.run(["git", "check-ignore", "-q", str(SHIPPED)], cwd=ROOT)
    assert ignored.returncode == 1


def test_a_service_loads_its_messages_without_protoc() -> None:
    pytest.importorskip("grpc_reflection", reason="needs grpcio-reflection")
    pytest.importorskip("grpc_health", reason="needs grpcio-health-checking")
    # In a fresh interpreter with grpc_tools unimportable: the descriptor set suffices.
    code = (
        "import sys; sys.modules['grpc_tools'] = None\n"
        "from nhbench.service._protos import Protos\n"
        "p = Protos()\n"
        "r = p.ExecutionRequest()\n"
        "r.start_request.options.uri.value = 'http://127.0.0.1/'\n"
        "r.start_request.options.duration.seconds = 2\n"
        "print(p.to_dict(r))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert "'duration': '2s'" in out and "'uri': 'http://127.0.0.1/'" in out


def test_importing_nhbench_imports_neither_grpc_nor_protobuf() -> None:
    code = (
        "import sys, nhbench, nhbench.service\n"
        "from nhbench.cli import build_parser\n"
        "build_parser()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('grpc', 'grpc_health', "
        "'grpc_reflection') or m.startswith('google.protobuf')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert out.strip() == "[]"


# ---- CommandLineOptions (proto3 JSON, proto field names) → Options -----------------------------


def start_options(clo: dict, overrides: dict | None = None) -> nhbench.Options:
    from nhbench.service._mapping import start_options as mapping

    return mapping(clo, overrides)


def test_the_fields_nighthawk_clients_send_map_to_options() -> None:
    options = start_options({
        "requests_per_second": 200, "connections": 7, "duration": "3s", "timeout": "2.5s",
        "concurrency": "2", "protocol": {"value": "HTTP2"},
        "request_options": {"request_method": "POST", "request_body_size": 10,
                            "request_headers": [{"header": {"key": "x-a", "value": "b"}}]},
        "termination_predicates": {"benchmark.http_2xx": "100"},
        "failure_predicates": {"benchmark.http_5xx": "3"}, "no_default_failure_predicates": True,
        "labels": ["a", "b"], "uri": "http://127.0.0.1:8080/x", "execution_id": "id-1",
        "jitter_uniform": "0.001s", "simple_warmup": True,
        "experimental_h1_connection_reuse_strategy": {"value": "LRU"},
        "latency_response_header_name": "x-origin", "verbosity": {"value": "TRACE"},
        "output_format": {"value": "YAML"},
    })
    assert (options.rps, options.connections, options.duration, options.timeout) == \
        (200, 7, 3, 2.5)
    assert options.concurrency == 2 and options.protocol == "http2"
    assert options.request_method == "POST" and options.request_body_size == 10
    assert options.headers == [("x-a", "b")]
    assert options.termination_predicate == {"benchmark.http_2xx": 100}
    assert options.failure_predicates == {"benchmark.http_5xx": 3}
    assert options.label == ("a", "b") and options.execution_id == "id-1"
    assert options.jitter_uniform == 0.001 and options.simple_warmup
    assert options.experimental_h1_connection_reuse_strategy == "lru"
    assert options.latency_response_header_name == "x-origin"
    # How Nighthawk's CLI would print is not the service's business: defaults stay.
    assert options.output_format == nhbench.Options(uri="http://127.0.0.1/").output_format
    assert options.verbosity == "info"


def test_every_multi_target_endpoint_and_http3_and_tls_context() -> None:
    options = start_options({
        "multi_target": {"use_https": True, "path": "/p",
                         "endpoints": [{"address": "127.0.0.1", "port": 8443},
                                       {"address": "::1", "port": 8444}]},
        "tls_context": {"sni": "example.test"},
    })
    assert options.multi_target_endpoint == ("127.0.0.1:8443", "[::1]:8444")
    assert options.multi_target_path == "/p" and options.multi_target_use_https
    assert options.tls_context_options == {"sni": "example.test"}
    # The output reader takes HTTP3 as "not HTTP/2"; a request for it gets it.
    h3 = start_options({"uri": "https://127.0.0.1:8443/", "protocol": {"value": "HTTP3"}})
    assert h3.protocol == "http3"


def test_the_service_overrides_apply_to_every_execution() -> None:
    options = start_options({"uri": "http://127.0.0.1/"}, {"ray": "auto", "hosts": 2})
    assert (options.ray, options.hosts) == ("auto", 2)


@pytest.mark.parametrize(
    ("clo", "words"),
    [
        ({"uri": "http://127.0.0.1/", "trace": "zipkin://127.0.0.1:9411/api/v2/spans"},
         "field trace"),
        ({"uri": "http://127.0.0.1/", "nighthawk_service": "127.0.0.1:8443",
          "experimental_h2_use_multiple_connections": True},
         "fields experimental_h2_use_multiple_connections, nighthawk_service"),
        ({"uri": "http://127.0.0.1/", "request_options": {"json_body": "{}"}},
         "request_options.json_body"),
        ({"uri": "http://127.0.0.1/", "requests_per_second": 0}, "requests_per_second"),
        ({"duration": "1s"}, "needs a uri"),
    ],
    ids=["trace", "two-fields", "json-body", "rps-0", "no-uri"],
)
def test_what_nhbench_cannot_honour_is_refused_by_name(clo: dict, words: str) -> None:
    with pytest.raises(OptionsError, match=words):
        start_options(clo)


def test_a_field_set_to_its_zero_value_asks_for_nothing() -> None:
    options = start_options({"uri": "http://127.0.0.1/", "trace": "", "jitter_uniform": "0s",
                             "experimental_h2_use_multiple_connections": False})
    assert options.jitter_uniform is None


def test_values_nhbench_refuses_are_options_errors() -> None:
    with pytest.raises(OptionsError, match="concurrency"):
        start_options({"uri": "http://127.0.0.1/", "concurrency": "many"})
