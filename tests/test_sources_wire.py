"""Request sources on the wire: the requests a real server receives, in the source's order.

A scripted origin (tests/support/scripted_origin.py) records the raw requests of one
connection, so their order is the order the worker released them in; the test server checks
Nighthawk's integration test (test/integration/test_request_source_plugin.py): each entry
asks the server for a different response body size, and the result's response-size
statistic shows both.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.scripted_origin import Reply, ScriptedOrigin

import nhbench

# The C core reads these on the wire: the asan session runs them too.
pytestmark = pytest.mark.core

DATA = Path(__file__).parent / "data"
REQUEST_SOURCE = DATA / "nighthawk" / "request_source"
REPLAY = DATA / "replay"
IN_LINE = "nighthawk.in-line-options-list-request-source-plugin"
FILE_BASED = "nighthawk.file-based-request-source-plugin"
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"


def _option(method: str, path: str, index: int, body_size: int) -> dict[str, object]:
    return {"request_method": method, "request_body_size": body_size, "request_headers": [
        {"header": {"key": ":path", "value": path}},
        {"header": {"key": "x-entry", "value": str(index)}}]}


def _line(request: bytes) -> bytes:
    return request.split(b"\r\n", 1)[0]


def _header(request: bytes, name: bytes) -> bytes | None:
    head = request.split(b"\r\n\r\n", 1)[0]
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == name:
            return value.strip()
    return None


def _body(request: bytes) -> bytes:
    return request.split(b"\r\n\r\n", 1)[1]


def test_in_line_list_cycles_in_order() -> None:
    options = [_option("GET", "/a", 0, 0), _option("POST", "/b", 1, 3),
               _option("PUT", "/c?q=1", 2, 5)]
    config = {"name": IN_LINE, "typed_config": {"options_list": {"options": options}}}
    with ScriptedOrigin(lambda r: Reply(OK)) as origin:
        result = nhbench.run(origin.url, rps=40, duration=0.5, connections=1,
                             request_source_plugin_config=config)
        requests = list(origin.requests)
    assert result.success, result.error
    assert len(requests) >= 6
    expected = [b"GET /a HTTP/1.1", b"POST /b HTTP/1.1", b"PUT /c?q=1 HTTP/1.1"]
    assert [_line(r) for r in requests] == [expected[i % 3] for i in range(len(requests))]
    assert [_header(r, b"x-entry") for r in requests[:3]] == [b"0", b"1", b"2"]
    assert [_body(r) for r in requests[:3]] == [b"", b"aaa", b"aaaaa"]


def test_nighthawk_integration_in_line(server: nhbench.TestServer) -> None:
    # test_request_source_plugin_happy_flow_parametrized[in-line]: the two entries ask for
    # 13- and 17-byte responses; both sizes are seen.
    from test_sources import IN_LINE_CONFIG

    result = nhbench.run(server.url, rps=20, duration=0.5,
                         request_source_plugin_config=IN_LINE_CONFIG,
                         request_header=("host: sni.com",))
    assert result.success, result.error
    assert result.counters["benchmark.http_2xx"] >= 5
    sizes = result.stat("benchmark_http_client.response_body_size")
    assert (sizes.min, sizes.max) == (13, 17)


@pytest.mark.parametrize("name", ["test-config-ab.yaml", "test-jsonconfig-ab.yaml"])
def test_nighthawk_integration_file_based(server: nhbench.TestServer, name: str) -> None:
    config = json.dumps({"name": FILE_BASED, "typed_config": {
        "@type": "type.googleapis.com/nighthawk.request_source."
                 "FileBasedOptionsListRequestSourceConfig",
        "file_path": str(REQUEST_SOURCE / name)}})
    result = nhbench.run(server.url, rps=20, duration=0.5, request_source_plugin_config=config)
    assert result.success, result.error
    sizes = result.stat("benchmark_http_client.response_body_size")
    assert (sizes.min, sizes.max) == (13, 17)


def test_num_requests_per_worker(server: nhbench.TestServer) -> None:
    config = json.dumps({"name": FILE_BASED, "typed_config": {
        "file_path": str(REQUEST_SOURCE / "test-config-ab.yaml"), "num_requests": 7}})
    result = nhbench.run(server.url, rps=100, duration=5, concurrency=2,
                         request_source_plugin_config=config)
    assert result.success, result.error
    assert server.stats()["requests"] == 14
    assert result.counters["benchmark.http_2xx"] == 14


def test_har_replay_order_and_target() -> None:
    with ScriptedOrigin(lambda r: Reply(OK)) as origin:
        result = nhbench.run(origin.url, rps=30, duration=0.4, connections=1,
                             replay=str(REPLAY / "browse.har"))
        requests = list(origin.requests)
    assert result.success, result.error
    assert len(requests) >= 3
    get, post, put = requests[:3]
    assert _line(get) == b"GET /catalog?page=2 HTTP/1.1"
    assert _line(post) == b"POST /cart HTTP/1.1"
    assert _line(put) == b"PUT /upload/1 HTTP/1.1"
    # The run's URI is the target: the HAR's host names are not sent.
    authority = f"127.0.0.1:{origin.port}".encode()
    assert {_header(r, b"host") for r in requests[:3]} == {authority}
    assert _header(get, b"x-trace") == b"one"
    assert _header(get, b"connection") is None
    assert _body(post) == b'{"item": "socks"}\n'
    assert _header(post, b"content-length") == b"18"
    assert _body(put) == b"aaaaa"


def test_envoy_log_replay_order() -> None:
    with ScriptedOrigin(lambda r: Reply(OK)) as origin:
        result = nhbench.run(origin.url, rps=30, duration=0.4, connections=1,
                             replay=str(REPLAY / "envoy-default.log"))
        requests = list(origin.requests)
    assert result.success, result.error
    assert [_line(r) for r in requests[:3]] == [
        b"GET /healthz HTTP/1.1", b"POST /v1/orders HTTP/1.1", b"DELETE /v1/orders/7 HTTP/1.1"]
    assert _header(requests[0], b"user-agent") == b"kube-probe/1.29"
    assert len(_body(requests[1])) == 137


def test_original_timing_replays_each_entry_once() -> None:
    with ScriptedOrigin(lambda r: Reply(OK)) as origin:
        result = nhbench.run(origin.url, connections=1, replay=str(REPLAY / "envoy-default.log"),
                             replay_timing="original")
        requests = list(origin.requests)
    assert result.success, result.error
    assert [_line(r) for r in requests] == [
        b"GET /healthz HTTP/1.1", b"POST /v1/orders HTTP/1.1", b"DELETE /v1/orders/7 HTTP/1.1"]


def test_an_entry_header_replaces_the_same_request_header() -> None:
    # Nighthawk's setCopy: the entry's value replaces the command line's of the same name
    # (names compared without case); the command line's other headers go with every entry.
    options = [{"request_headers": [{"header": {"key": "X-A", "value": "entry"}}]},
               {"request_headers": [{"header": {"key": "x-b", "value": "other"}}]}]
    config = {"name": IN_LINE, "typed_config": {"options_list": {"options": options}}}
    with ScriptedOrigin(lambda r: Reply(OK)) as origin:
        result = nhbench.run(origin.url, rps=20, duration=0.3, connections=1,
                             request_header=["x-a: option", "x-c: always"],
                             request_source_plugin_config=config)
        requests = list(origin.requests)
    assert result.success, result.error
    assert len(requests) >= 2
    first, second = requests[0], requests[1]
    assert first.lower().count(b"\r\nx-a:") == 1
    assert _header(first, b"x-a") == b"entry"
    assert _header(second, b"x-a") == b"option"
    assert _header(first, b"x-c") == _header(second, b"x-c") == b"always"
