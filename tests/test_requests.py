"""What is sent (request options): payloads, content type, templating, HTTP/1.0 and the
request set, observed on the wire.

HTTP/1.1 requests are read byte for byte by the scripted origin (a real socket that records
every request it reads); HTTP/2 requests by our test server, whose Fortio echo answers with
the status the path asks for (``?status=201``) and echoes the request body (so the client's
response body size is the request's). Bad values are refused by the CLI in one line, exit 2.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from support.nginx import needs_nginx_and_openssl
from support.scripted_origin import Reply, ScriptedOrigin
from test_cli_errors import assert_one_line_error, nhbench_cli

import nhbench
from benchmarks.nginx_origin import NginxOrigin
from nhbench import _core_config
from nhbench._request import USER_AGENT, RequestSpec
from nhbench.options import make_options

pytestmark = pytest.mark.core

CPUS = sorted(os.sched_getaffinity(0))
CLIENT_CPU = str(CPUS[0])
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
UUID_RE = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


def run(url: str, **kw: object) -> nhbench.Result:
    kw.setdefault("cpus", CLIENT_CPU)
    kw.setdefault("duration", 0.4)
    kw.setdefault("rps", 25)
    kw.setdefault("connections", 1)
    return nhbench.run(url, **kw)


def recorded(**kw: object) -> tuple[nhbench.Result, list[bytes], ScriptedOrigin]:
    """A run at a scripted origin that answers 200 to everything; its requests as read."""
    with ScriptedOrigin(lambda r: Reply(OK)) as origin:
        result = run(origin.url + str(kw.pop("path", "")), **kw)
        assert result.success, result.error
        assert result.counters["benchmark.http_2xx"] == len(origin.requests) > 3
        return result, list(origin.requests), origin


def head_and_body(request: bytes) -> tuple[list[bytes], bytes]:
    head, _, body = request.partition(b"\r\n\r\n")
    return head.split(b"\r\n"), body


# ---- bodies ---------------------------------------------------------------------------------


def test_payload_is_sent_byte_for_byte_as_a_post() -> None:
    _, requests, origin = recorded(payload="héllo {seq}")
    expected = (
        b"POST / HTTP/1.1\r\n"
        + f"Host: 127.0.0.1:{origin.port}\r\nUser-Agent: {USER_AGENT}\r\n".encode()
        + b"Content-Type: application/octet-stream\r\nContent-Length: 12\r\n\r\n"
        + "héllo {seq}".encode()
    )
    # Without --template, braces are sent as they are.
    assert set(requests) == {expected}


def test_payload_file_is_sent_byte_for_byte(tmp_path: Path) -> None:
    data = bytes(range(256)) + b"\r\n\r\nend"
    path = tmp_path / "body.bin"
    path.write_bytes(data)
    _, requests, _ = recorded(payload_file=str(path), content_type="application/x-test")
    for request in requests:
        lines, body = head_and_body(request)
        assert lines[0] == b"POST / HTTP/1.1"
        assert b"Content-Type: application/x-test" in lines
        assert f"Content-Length: {len(data)}".encode() in lines
        assert body == data


def test_payload_size_is_random_bytes_of_the_right_length() -> None:
    _, requests, _ = recorded(payload_size=4096)
    bodies = {head_and_body(r)[1] for r in requests}
    # Drawn once per run and sent with every request, like Fortio's.
    assert len(bodies) == 1
    body = bodies.pop()
    assert len(body) == 4096
    # Random, not Nighthawk's 'a' filler: 4096 random bytes use well over 200 distinct
    # values (all equal, or a few, would be a filler).
    assert len(set(body)) > 200
    assert head_and_body(requests[0])[0][0] == b"POST / HTTP/1.1"


def test_content_type_alone_switches_to_post() -> None:
    _, requests, _ = recorded(content_type="application/json")
    lines, body = head_and_body(requests[0])
    assert lines[0] == b"POST / HTTP/1.1"
    assert b"Content-Type: application/json" in lines
    assert b"Content-Length: 0" in lines
    assert body == b""


def test_a_given_method_is_kept_with_a_payload() -> None:
    _, requests, _ = recorded(payload="x=1", request_method="PUT",
                              request_header=["Content-Type: text/plain"])
    lines, body = head_and_body(requests[0])
    assert lines[0] == b"PUT / HTTP/1.1"
    assert lines.count(b"Content-Type: text/plain") == 1
    assert not any(line.startswith(b"Content-Type: application") for line in lines)
    assert body == b"x=1"


def test_a_plain_run_sends_what_it_always_sent() -> None:
    # None of the request options: a request set of one, not templated, the old bytes.
    options = make_options("http://127.0.0.1:1/p?q=%7Bseq%7D", request_body_size=3)
    config = _core_config.client_core_config(options, "127.0.0.1")
    assert len(config["specs"]) == 1 and config["templated"] is False
    _, requests, origin = recorded(path="p?q={seq}", request_body_size=3)
    assert set(requests) == {
        f"GET /p?q=%7Bseq%7D HTTP/1.1\r\nHost: 127.0.0.1:{origin.port}\r\n"
        f"User-Agent: {USER_AGENT}\r\nContent-Length: 3\r\n\r\naaa".encode()
    }


# ---- templating -----------------------------------------------------------------------------


def test_template_expands_path_header_and_body_per_request() -> None:
    _, requests, _ = recorded(
        path="item/{seq}?r={rand:1000}", template=True, concurrency=2, rps=20,
        request_header=["X-Request-Id: {uuid}", "X-Worker: w{worker}"],
        payload='{"seq": {seq}, "id": "{uuid}", "worker": {worker}}',
    )
    seqs, uuids, workers = [], set(), set()
    for request in requests:
        lines, body = head_and_body(request)
        match = re.fullmatch(rb"POST /item/(\d+)\?r=(\d+) HTTP/1.1", lines[0])
        assert match, lines[0]
        seq = int(match.group(1))
        assert 0 <= int(match.group(2)) < 1000
        seqs.append(seq)
        header = dict(line.split(b": ", 1) for line in lines[1:])
        assert UUID_RE.fullmatch(header[b"X-Request-Id"])
        worker = int(header[b"X-Worker"][1:])
        workers.add(worker)
        # Content-Length follows the body, whose length changes with {seq}.
        assert int(header[b"Content-Length"]) == len(body)
        fields = re.fullmatch(rb'\{"seq": (\d+), "id": "([^"]+)", "worker": (\d)\}', body)
        assert fields, body
        # One {seq} per request, the same wherever it appears; each {uuid} drawn anew.
        assert int(fields.group(1)) == seq
        assert int(fields.group(3)) == worker
        # Worker i of n sends i, i + n, ...: the number says which worker sent it.
        assert seq % 2 == worker
        assert UUID_RE.fullmatch(fields.group(2))
        uuids.update({header[b"X-Request-Id"], fields.group(2)})
    assert len(set(seqs)) == len(seqs)
    assert len(uuids) == 2 * len(requests)
    assert workers == {0, 1}


def test_template_over_http2_expands_path_headers_and_body() -> None:
    with nhbench.TestServer(cpus=[CPUS[-1]]) as server:
        result = run(
            server.url + "?status=20{rand:3}", protocol="http2", template=True, rps=50,
            payload="{uuid}", request_header=["X-Id: {seq}"],
        )
        assert result.success, result.error
        c = result.counters
        statuses = {code: c.get(f"benchmark.http_{code}", 0) for code in (200, 201, 202)}
        assert sum(statuses.values()) == c["benchmark.http_2xx"] == c["upstream_rq_total"] > 10
        assert sum(1 for n in statuses.values() if n) >= 2  # all one of three: p = 3^-19
        # The echo returns the request body: every body was a 36-character UUID.
        sizes = result.stat("benchmark_http_client.response_body_size")
        assert sizes.min == sizes.max == 36
        # A templated body of changing length: Content-Length (a templated header value)
        # follows it, or the server would refuse or truncate.
        result = run(server.url, protocol="http2", template=True, rps=100,
                     payload="{seq}")
        assert result.success, result.error
        sizes = result.stat("benchmark_http_client.response_body_size")
        assert (sizes.min, sizes.max) == (1, 2)


def test_without_template_braces_in_headers_are_sent_as_they_are() -> None:
    _, requests, _ = recorded(request_header=["X-T: {seq}"])
    assert b"X-T: {seq}" in head_and_body(requests[0])[0]


# ---- the request set ------------------------------------------------------------------------


THREE = [
    RequestSpec(path="/a"),
    RequestSpec(method="POST", path="/b", body=b"bee", headers=(("X-B", "1"),)),
    RequestSpec(path="/c?x=1", authority="example.test"),
]


def test_a_request_set_of_three_is_cycled_in_order_over_http1(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_core_config, "request_specs", lambda options: THREE)
    _, requests, origin = recorded(rps=30)
    expected = [
        f"GET /a HTTP/1.1\r\nHost: 127.0.0.1:{origin.port}\r\nUser-Agent: {USER_AGENT}"
        "\r\n\r\n".encode(),
        f"POST /b HTTP/1.1\r\nHost: 127.0.0.1:{origin.port}\r\nUser-Agent: {USER_AGENT}"
        "\r\nX-B: 1\r\nContent-Length: 3\r\n\r\nbee".encode(),
        f"GET /c?x=1 HTTP/1.1\r\nHost: example.test\r\nUser-Agent: {USER_AGENT}"
        "\r\n\r\n".encode(),
    ]
    assert requests == [expected[i % 3] for i in range(len(requests))]


def test_a_request_set_of_three_is_cycled_over_http2(monkeypatch: pytest.MonkeyPatch) -> None:
    specs = [RequestSpec(path=f"/?status={code}") for code in (200, 201, 202)]
    monkeypatch.setattr(_core_config, "request_specs", lambda options: specs)
    with nhbench.TestServer(cpus=[CPUS[-1]]) as server:
        result = run(server.url, protocol="http2", rps=60)
    assert result.success, result.error
    c = result.counters
    counts = [c.get(f"benchmark.http_{code}", 0) for code in (200, 201, 202)]
    assert sum(counts) == c["upstream_rq_total"] > 10
    # One worker cycles 200, 201, 202, 200, ...: the counts differ by at most one, in order.
    assert counts[0] >= counts[1] >= counts[2] >= counts[0] - 1


# ---- HTTP/1.0 -------------------------------------------------------------------------------


def test_http1_0_sends_no_host_and_closes_every_connection() -> None:
    result, requests, origin = recorded(http1_0=True, payload="p")
    assert set(requests) == {
        f"POST / HTTP/1.0\r\nUser-Agent: {USER_AGENT}\r\nContent-Type: "
        "application/octet-stream\r\nContent-Length: 1\r\n\r\np".encode()
    }
    # The origin answers HTTP/1.1 with keep-alive; the client still closes, as a 1.0 client
    # that asked for no keep-alive must: one connection per request.
    assert origin.connections == len(requests)
    assert result.counters["upstream_cx_total"] == len(requests)


def test_http1_0_with_a_host_header_sends_it() -> None:
    _, requests, _ = recorded(http1_0=True, request_header=["Host: vhost.test"])
    lines = head_and_body(requests[0])[0]
    assert lines[0] == b"GET / HTTP/1.0"
    assert [line for line in lines if line.lower().startswith(b"host:")] == [b"Host: vhost.test"]


def test_http1_0_against_the_test_server() -> None:
    with nhbench.TestServer(cpus=[CPUS[-1]]) as server:
        result = run(server.url, http1_0=True, rps=50)
    assert result.success, result.error
    c = result.counters
    assert c["benchmark.http_2xx"] == c["upstream_rq_total"] == c["upstream_cx_total"] > 10


@needs_nginx_and_openssl
def test_http1_0_against_nginx() -> None:
    with NginxOrigin(listeners=("h1",)) as origin:
        mark = origin.mark()
        result = run(origin.url("h1"), http1_0=True, rps=50)
        lines = origin.since(mark)
    assert result.success, result.error
    c = result.counters
    assert c["benchmark.http_2xx"] == c["upstream_cx_total"] == len(lines) > 10
    # nginx logs the request's protocol, and every request had its own connection.
    assert {line[2] for line in lines} == {"HTTP/1.0"}
    assert {line[1] for line in lines} == {"1"}


# ---- bad input ------------------------------------------------------------------------------


URI = "http://127.0.0.1:1/"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--payload", "a", "--payload-size", "3"),
         "--payload-size: mutually exclusive with --payload"),
        (("-payload", "a", "-payload-file", "/etc/hostname"),
         "--payload-file: mutually exclusive with --payload"),
        (("--payload", "a", "--request-body-size", "3"),
         "--payload: mutually exclusive with --request-body-size"),
        (("--payload-file", "/nonexistent/body"), "--payload-file: no such file"),
        (("--payload-file", "/"), "--payload-file: is a directory"),
        (("--payload-size", "99999999999"), "--payload-size: must be"),
        (("--payload-size", "-1"), "--payload-size: must be"),
        (("--content-type", "a\r\nb"), "--content-type:"),
        (("--content-type", "x/y", "--request-header", "content-type: a/b"),
         "--content-type: a Content-Type request header is given too"),
        (("--http1.0", "--h2c"), "--http1.0: mutually exclusive with --protocol"),
        (("--template", "--request-header", "X-A: {sequence}"),
         "--template: unknown placeholder {sequence}"),
        (("--template", "--payload", "{rand:0}"), "--template: {rand:0}: N must be"),
        (("--template", "--payload", "{content-length}"),
         "--template: unknown placeholder {content-length}"),
        (("--template", "--payload-size", "40000"),
         "--template: a templated body may be at most 32768 bytes"),
    ],
)
def test_bad_values_are_one_line_and_exit_2(args: tuple[str, ...], expected: str) -> None:
    assert_one_line_error(nhbench_cli("run", URI, *args), expected)


def test_template_in_the_uri_is_checked() -> None:
    proc = nhbench_cli("run", URI + "x/{sequence}", "--template")
    assert proc.returncode == 2
    assert "--template: unknown placeholder {sequence} in the URI" in proc.stderr
