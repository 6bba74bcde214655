"""Options validation, value syntaxes, request rendering and the core config (no C core)."""

from __future__ import annotations

import os

import pytest
from pydantic import ValidationError

import nhbench
from nhbench import Options, OptionsError, ResolveError
from nhbench._core_config import client_core_config
from nhbench._predicates import DEFAULT_FAILURE_PREDICATES, parse_predicates
from nhbench._request import USER_AGENT, render_h2_request, render_request
from nhbench._run import resolve
from nhbench.options import (
    format_cpu_list,
    machine_cpus,
    make_options,
    parse_cpu_list,
    parse_duration,
    parse_header,
    parse_uri,
)

URI = "http://127.0.0.1:8080/"
AFFINITY = sorted(os.sched_getaffinity(0))


def opts(**kwargs: object) -> Options:
    return make_options(URI, **kwargs)


def error_of(**kwargs: object) -> str:
    with pytest.raises(OptionsError) as info:
        opts(**kwargs)
    message = str(info.value)
    assert "\n" not in message
    return message


# ---- defaults ---------------------------------------------------------------------------------


def test_defaults_follow_nighthawk() -> None:
    o = Options(uri=URI)
    assert o.rps == 5
    assert o.connections == 100
    assert o.concurrency == 1
    assert o.duration == 5.0
    assert o.effective_duration == 5.0
    assert o.timeout == 30
    assert o.request_method == "GET"
    assert o.sequencer_idle_strategy == "poll"
    assert o.max_requests_per_connection == 0
    assert o.percentiles == (50, 75, 90, 99, 99.9, 99.99)
    assert o.failure_predicates == DEFAULT_FAILURE_PREDICATES
    assert o.workers == 1


def test_options_are_frozen() -> None:
    o = Options(uri=URI)
    with pytest.raises(ValidationError):
        o.rps = 10  # type: ignore[misc]


# ---- every bad value names the option and the allowed range ---------------------------------


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"rps": -1}, "rps: must be >= 0 and <= 1000000 (got -1)"),
        ({"rps": 1e12}, "rps: must be >= 0 and <= 1000000 (got 1000000000000"),
        ({"rps": "fast"}, "rps: must be a number (got fast)"),
        ({"rps": float("inf")}, "rps: "),
        ({"connections": 0}, "connections: must be >= 1 and <= 1000000 (got 0)"),
        ({"connections": 1.5}, "connections: must be an integer"),
        ({"concurrency": 0}, "concurrency: must be >= 1 and <= 4096, or 'auto'"),
        ({"concurrency": "many"}, "concurrency: must be 'auto' or an integer >= 1"),
        ({"duration": 0}, "duration: must be > 0 and <= 31536000 (got 0"),
        ({"duration": "-1s"}, "duration: must be > 0"),
        ({"duration": "5 parsecs"}, "duration: must be a duration such as 5, 5s, 500ms or 2m"),
        ({"timeout": 0}, "timeout: must be > 0 and <= 3600"),
        ({"request_timeout": -1}, "request_timeout: must be >= 0 and <= 3600"),
        ({"drain_timeout": "-2"}, "drain_timeout: must be >= 0"),
        ({"start_delay": 61}, "start_delay: must be >= 0 and <= 60"),
        ({"request_method": "FETCH"}, "request_method: must be one of 'GET', 'HEAD'"),
        ({"request_header": "no colon"}, "request_header: must be 'name: value'"),
        ({"request_header": ["X-A: 1\r\nEvil: 1"]}, "request_header: must not contain CR, LF"),
        ({"request_header": "Content-Length: 5"}, "request_header: Content-Length is set by"),
        ({"request_header": "Bad Name: 1"}, "request_header: header name 'Bad Name'"),
        ({"request_body_size": -1}, "request_body_size: must be >= 0 and <= 67108864"),
        ({"max_pending_requests": -1}, "max_pending_requests: must be >= 0"),
        ({"max_requests_per_connection": -5}, "max_requests_per_connection: must be >= 0"),
        ({"burst_size": -1}, "burst_size: must be >= 0"),
        ({"sequencer_idle_strategy": "nap"}, "sequencer_idle_strategy: must be one of 'spin'"),
        ({"output_format": "xml"}, "output_format: must be one of 'human', 'json', 'yaml'"),
        ({"address_family": "v5"}, "address_family: must be one of 'auto', 'v4' or 'v6'"),
        ({"percentiles": "0"}, "percentiles: must be percentages in (0, 100]"),
        ({"percentiles": "50,101"}, "percentiles: must be percentages in (0, 100]"),
        ({"percentiles": [50, "x"]}, "percentiles: must be percentages in (0, 100]"),
        ({"failure_predicate": "benchmark.http_5xx"}, "failure_predicate: must be 'counter:"),
        ({"failure_predicate": "benchmark.http_5xx:-1"}, "failure_predicate: threshold must be"),
        ({"failure_predicate": "benchmark.http_5xx:x"}, "failure_predicate: threshold must be"),
        ({"failure_predicate": ["http_5xx:0"]}, "failure_predicate: unknown counter 'http_5xx'"),
        ({"termination_predicate": {"nope": 1}}, "termination_predicate: unknown counter"),
        ({"cpus": "3-1"}, "cpus: range '3-1' goes backwards"),
        ({"cpus": "a,b"}, "cpus: must be a CPU list such as 0,2-3"),
        ({"cpus": str(max(AFFINITY) + 1000)}, "cpus: CPU "),
        ({"output": " "}, "output: must be a file path"),
        ({"rsp": 5}, "rsp: unknown option (did you mean rps?)"),
    ],
)
def test_bad_value_names_option(kwargs: dict, expected: str) -> None:
    assert error_of(**kwargs).startswith(expected)


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("ftp://example.com/", "unsupported scheme 'ftp://'"),
        ("gopher://example.com/", "only http://, https://, grpc://, grpcs://, tcp:// and udp:// are supported"),
        ("http://", "malformed URL: no host"),
        ("http://[::1/", "malformed URL"),
        ("http://host:99999/", "malformed URL"),
        ("http://host:0/", "port must be in 1..65535"),
        ("http://user:pw@host/", "user information"),
        ("http://bad host/", "must not contain spaces"),
        ("http://bad!host/", "bad host name"),
        ("localhost:8080", "must start with http://, e.g. http://localhost:8080"),
        ("", "must be a URL"),
    ],
)
def test_bad_uri(uri: str, expected: str) -> None:
    with pytest.raises(OptionsError) as info:
        make_options(uri)
    assert str(info.value).startswith("uri: ")
    assert expected in str(info.value)
    assert info.value.option == "uri"


def test_several_errors_make_one_line() -> None:
    message = error_of(rps=-1, connections=0)
    assert "rps: must be >= 0" in message and "connections: must be >= 1" in message
    assert "\n" not in message


def test_cli_spelling_of_errors() -> None:
    with pytest.raises(ValidationError) as info:
        Options.model_validate({"uri": URI, "max_pending_requests": -1})
    line = nhbench.format_validation_error(info.value, cli=True)
    assert line == "--max-pending-requests: must be >= 0 and <= 10000000 (got -1)"


@pytest.mark.parametrize("value", [10_000_001, 2**31, 2**32 - 1])
def test_a_pending_queue_the_core_cannot_allocate_is_refused(value: int) -> None:
    # 32 bytes an entry, allocated per worker before the run: 2^32-1 entries (128 GB) made
    # the allocation fail, and the failure aborted the process.
    assert "max_pending_requests: must be >= 0 and <= 10000000" in error_of(
        max_pending_requests=value)
    assert opts(max_pending_requests=10_000_000).max_pending_requests == 10_000_000


def test_connections_over_all_workers_are_bounded() -> None:
    # Per worker 1,000,000 is allowed; over 2 workers it is more than a process can open.
    assert "2000000 connections, more than one process can open (1,048,576)" in error_of(
        connections=1_000_000, concurrency=2)
    assert opts(connections=1_000_000, concurrency=1).connections == 1_000_000
    assert opts(connections=256, concurrency=4096).workers == 4096
    # HTTP/2's request slots likewise (HTTP/1.1 has none: max_active_requests is unused).
    assert "11000000 requests in flight, more than 10,000,000" in error_of(
        max_active_requests=1_000_000, concurrency=11, protocol="http2")
    assert opts(max_active_requests=1_000_000, concurrency=11).workers == 11


def test_options_error_is_value_error() -> None:
    with pytest.raises(ValueError):
        opts(rps=-1)


# ---- durations --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        (5, 5.0),
        (2.5, 2.5),
        ("5", 5.0),
        ("5s", 5.0),
        (" 1.5s ", 1.5),
        ("500ms", 0.5),
        ("250us", 250e-6),
        ("250µs", 250e-6),
        ("100ns", 100e-9),
        ("2m", 120.0),
        ("1h", 3600.0),
        (".5", 0.5),
        ("-1", -1.0),
    ],
)
def test_parse_duration(text: object, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "s", "5 sec", "1e3", "5x", True, None, float("nan"), "1,5"])
def test_parse_duration_rejects(text: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_duration_units_in_options() -> None:
    assert opts(duration="500ms").duration == 0.5
    assert opts(timeout="2m").timeout == 120
    assert opts(request_timeout=0).request_timeout == 0


def test_no_duration() -> None:
    o = opts(no_duration=True)
    assert o.duration is None and o.effective_duration is None
    assert "no_duration: mutually exclusive with duration" in error_of(no_duration=True, duration=3)
    # The echo of a no_duration run validates again.
    assert Options.model_validate(o.model_dump()) == o


# ---- CPUs and workers -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "cpus"),
    [("0", [0]), ("2,4-7", [2, 4, 5, 6, 7]), ("3,1,3", [3, 1]), (" 0 - 2 ", [0, 1, 2]),
     ([1, 0], [1, 0]), (4, [4])],
)
def test_parse_cpu_list(text: object, cpus: list[int]) -> None:
    assert parse_cpu_list(text) == cpus


@pytest.mark.parametrize("text", ["", "a", "1-", "-1", "2-1", "1;2", [-1], [True], ","])
def test_parse_cpu_list_rejects(text: object) -> None:
    with pytest.raises(ValueError):
        parse_cpu_list(text)


def test_parse_cpu_list_checks_ranges_before_expanding_them() -> None:
    machine = machine_cpus()
    top = max(machine)
    # Checked against this machine: a huge range is refused at once, naming what is missing.
    with pytest.raises(ValueError, match=rf"CPUs {top + 1}-999999999 do not exist "
                       rf"\(this machine has CPUs? {format_cpu_list(machine)}\)"):
        parse_cpu_list("0-999999999", "machine")
    with pytest.raises(ValueError, match=rf"^CPU {top + 1} does not exist"):
        parse_cpu_list([0, top + 1], "affinity")
    assert parse_cpu_list(format_cpu_list(machine), "machine") == machine
    assert parse_cpu_list(format_cpu_list(AFFINITY), "affinity") == AFFINITY
    # Unchecked (another machine's CPUs): bounded, so still never gigabytes.
    assert parse_cpu_list("0-3,999999999") == [0, 1, 2, 3, 999999999]
    with pytest.raises(ValueError, match="names 1000000000 CPUs, more than any machine has"):
        parse_cpu_list("0-999999999")
    with pytest.raises(ValueError, match="must be a CPU list"):
        parse_cpu_list("1" * 30)


def test_format_cpu_list() -> None:
    assert format_cpu_list([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"


def test_worker_cpus() -> None:
    assert opts().worker_cpus == AFFINITY[:1]
    assert opts(concurrency="auto").worker_cpus == AFFINITY
    assert opts(concurrency=len(AFFINITY) + 1).worker_cpus == [*AFFINITY, AFFINITY[0]]
    first = AFFINITY[0]
    # cpus without concurrency: one worker per listed CPU.
    assert opts(cpus=[first]).worker_cpus == [first]
    assert opts(cpus=[first]).concurrency == "auto"
    # cpus with an explicit count: round-robin over them.
    assert opts(cpus=[first], concurrency=3).worker_cpus == [first] * 3
    assert opts(concurrency="AUTO").concurrency == "auto"
    assert opts(concurrency="4").concurrency == 4


def test_cpus_outside_affinity_load_as_echo() -> None:
    # A result written on a bigger machine must load here: the echo skips the affinity check.
    data = opts().model_dump()
    data["cpus"] = [max(AFFINITY) + 1000]
    echoed = Options.model_validate(data, context={"echo": True})
    assert echoed.cpus == (max(AFFINITY) + 1000,)
    with pytest.raises(ValidationError):
        Options.model_validate(data)


# ---- predicates -------------------------------------------------------------------------------


def test_predicates() -> None:
    assert parse_predicates(["benchmark.http_5xx:10", "upstream_rq_total:100"]) == {
        "benchmark.http_5xx": 10, "upstream_rq_total": 100}
    assert parse_predicates("benchmark.http_4xx:1,benchmark.http_5xx:2") == {
        "benchmark.http_4xx": 1, "benchmark.http_5xx": 2}
    assert parse_predicates({"benchmark.http_5xx": 3}) == {"benchmark.http_5xx": 3}
    assert parse_predicates([("benchmark.http_5xx", 3)]) == {"benchmark.http_5xx": 3}
    assert parse_predicates("benchmark.http_5xx:18446744073709551615") == {
        "benchmark.http_5xx": 2**64 - 1}


def test_failure_predicates_merge_with_defaults() -> None:
    o = opts(failure_predicate=["benchmark.http_5xx:4294967295", "benchmark.request_timeout:0"])
    assert o.failure_predicates == {**DEFAULT_FAILURE_PREDICATES,
                                    "benchmark.http_5xx": 4294967295,
                                    "benchmark.request_timeout": 0}
    o = opts(no_default_failure_predicates=True, failure_predicate="benchmark.http_4xx:5")
    assert o.failure_predicates == {"benchmark.http_4xx": 5}
    assert opts(no_default_failure_predicates=True).failure_predicates == {}


# ---- other values -----------------------------------------------------------------------------


def test_percentile_points_are_exact() -> None:
    o = opts(percentiles="99.9,50,99,99.99")
    assert o.percentiles == (50, 99, 99.9, 99.99)
    assert o.percentile_points == [0.0, 0.5, 0.99, 0.999, 0.9999, 1.0]
    assert opts(percentiles=100).percentile_points == [0.0, 1.0]


def test_max_requests_per_connection_nighthawk_default_means_unlimited() -> None:
    assert opts(max_requests_per_connection=4294967295).max_requests_per_connection == 0
    assert opts(max_requests_per_connection=7).max_requests_per_connection == 7


def test_choices_are_case_insensitive() -> None:
    o = opts(request_method="post", sequencer_idle_strategy="SPIN", output_format="JSON")
    assert (o.request_method, o.sequencer_idle_strategy, o.output_format) == (
        "POST", "spin", "json")


def test_copy_with_overrides() -> None:
    base = opts(rps=10, no_duration=True)
    changed = make_options(base, rps=20)
    assert changed.rps == 20 and changed.no_duration
    assert make_options(base) is base


# ---- URI --------------------------------------------------------------------------------------


def test_parse_uri() -> None:
    t = parse_uri("http://Example.COM:8080/a/b?x=1&y=2#frag")
    assert (t.host, t.port, t.path, t.authority) == ("example.com", 8080, "/a/b?x=1&y=2",
                                                     "example.com:8080")
    t = parse_uri("http://[::1]/")
    assert (t.host, t.port, t.path, t.authority) == ("::1", 80, "/", "[::1]")
    assert parse_uri("http://h").path == "/"
    assert parse_uri("http://h/caf\u00e9").path == "/caf%C3%A9"
    assert parse_uri("http://h/%41").path == "/%41"
    t = parse_uri("https://Example.com/x")
    assert (t.scheme, t.port, t.authority) == ("https", 443, "example.com")
    assert parse_uri("https://example.com:8443/").authority == "example.com:8443"
    assert parse_uri("https://example.com:80/").authority == "example.com:80"


# ---- request rendering ------------------------------------------------------------------------


def test_render_get() -> None:
    assert render_request("GET", "/x?y=1", "h:8080") == (
        b"GET /x?y=1 HTTP/1.1\r\nHost: h:8080\r\nUser-Agent: " + USER_AGENT.encode()
        + b"\r\n\r\n"
    )


def test_render_body_and_headers() -> None:
    request = render_request("POST", "/", "h", [("X-A", "1"), ("host", "vhost")], body_size=3)
    head, body = request.split(b"\r\n\r\n")
    assert body == b"aaa"
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST / HTTP/1.1"
    assert b"Host: h" not in lines  # the user's Host replaces nhbench's
    assert b"host: vhost" in lines and b"X-A: 1" in lines and b"Content-Length: 3" in lines


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH"])
def test_body_methods_always_have_content_length(method: str) -> None:
    assert b"Content-Length: 0\r\n" in render_request(method, "/", "h")


def test_get_without_body_has_no_content_length() -> None:
    assert b"Content-Length" not in render_request("GET", "/", "h")
    assert b"Content-Length: 2\r\n" in render_request("GET", "/", "h", body_size=2)


@pytest.mark.parametrize("text", ["X: a\rb", "X: a\nb", "X\n: a", "X: \0", "X: caf\u20ac",
                                  "Transfer-Encoding: chunked", ": v", "X:\x01"])
def test_parse_header_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_header(text)


def test_parse_header() -> None:
    assert parse_header("  X-Name :  some value ") == ("X-Name", "some value")
    assert parse_header("X-Empty:") == ("X-Empty", "")


# ---- core config ------------------------------------------------------------------------------

CONFIG_KEYS = {
    "address", "port", "specs", "templated", "http10", "cpus", "rps", "connections",
    "max_pending_requests", "max_requests_per_connection", "prefetch_connections",
    "connect_timeout", "request_timeout", "duration", "drain_timeout", "open_loop",
    "idle_strategy", "burst_size", "termination_predicates", "failure_predicates",
    "start_delay", "scheme", "protocol", "stats_interval",
}
H2_KEYS = {"max_concurrent_streams", "max_active_requests"}
SPEC_KEYS = {"request", "body_size", "head_request", "target"}
H2_SPEC_KEYS = {"h2_method", "h2_path", "h2_authority", "h2_headers"}


def test_core_config_matches_contract() -> None:
    o = make_options(
        "http://127.0.0.1:9000/p", rps=100, connections=3, request_method="HEAD",
        no_duration=True, termination_predicate="upstream_rq_total:10", open_loop=True,
        sequencer_idle_strategy="spin", request_header="X-A: b", timeout="5s",
    )
    config = client_core_config(o, "127.0.0.1")
    assert set(config) == CONFIG_KEYS
    assert config["address"] == "127.0.0.1" and config["port"] == 9000
    # A single request is a request set of one.
    (spec,) = config["specs"]
    assert set(spec) == SPEC_KEYS
    assert spec["request"].startswith(b"HEAD /p HTTP/1.1\r\nHost: 127.0.0.1:9000\r\n")
    assert b"X-A: b\r\n" in spec["request"]
    assert spec["head_request"] is True and spec["target"] == 0
    assert config["templated"] is False and config["http10"] is False
    assert config["duration"] == -1.0
    assert config["burst_size"] == 1
    assert config["connect_timeout"] == 5.0
    assert config["idle_strategy"] == "spin"
    assert config["cpus"] == AFFINITY[:1]
    assert config["termination_predicates"] == [("upstream_rq_total", 10)]
    assert ("benchmark.http_5xx", 0) in config["failure_predicates"]
    assert isinstance(config["rps"], float)


def test_core_config_connect_method_uses_authority_form() -> None:
    config = client_core_config(make_options("http://h/", request_method="CONNECT"), "1.2.3.4")
    assert config["specs"][0]["request"].startswith(b"CONNECT h:80 HTTP/1.1\r\n")


# ---- resolution -------------------------------------------------------------------------------


def test_resolve() -> None:
    assert resolve("127.0.0.1", 80) == "127.0.0.1"
    assert resolve("::1", 80, "v6") == "::1"
    assert resolve("localhost", 80) == "127.0.0.1"  # auto prefers IPv4
    with pytest.raises(ResolveError, match="is IPv4 but address_family is v6"):
        resolve("127.0.0.1", 80, "v6")


def test_unresolvable_host() -> None:
    with pytest.raises(ResolveError, match="cannot resolve host 'no-such-host.invalid'"):
        resolve("no-such-host.invalid", 80)


# ---- TLS and HTTP/2 ---------------------------------------------------------------------------


def test_protocol_options() -> None:
    assert opts().protocol == "http1"
    assert opts(protocol="HTTP2").protocol == "http2"
    assert opts(protocol="h2").protocol == "http2"
    o = opts(h2c=True)
    assert (o.protocol, o.h2c) == ("http2", True)
    assert make_options("https://h/", protocol="http2").protocol == "http2"
    assert opts().max_concurrent_streams == 2**31 - 1  # Nighthawk's "unlimited"
    assert opts().max_active_requests == 100  # Nighthawk's default
    assert error_of(protocol="http2", request_method="CONNECT").startswith(
        "protocol: CONNECT is not supported over HTTP/2")


def test_tls_options() -> None:
    o = make_options("https://Example.com/", insecure=True, tls_min_version="TLSv1.3",
                     tls_session_reuse="off", alpn="h2,http/1.1")
    assert (o.insecure, o.tls_min_version, o.tls_session_reuse) == (True, "1.3", False)
    assert o.alpn == ("h2", "http/1.1")
    assert (o.tls_server_name, o.tls_verify_name) == ("example.com", "example.com")
    o = make_options("https://127.0.0.1:8443/")
    assert (o.tls_server_name, o.tls_verify_name) == (None, "127.0.0.1")  # no SNI for an IP
    o = make_options("https://127.0.0.1:8443/", sni="Svc.Example")
    assert (o.tls_server_name, o.tls_verify_name) == ("svc.example", "svc.example")
    for key, value in (("sni", "x.example"), ("insecure", True), ("cacert", __file__),
                       ("tls_session_reuse", False), ("tls_min_version", "1.3")):
        assert error_of(**{key: value}).startswith(f"{key}: only applies to https:// URIs")
    with pytest.raises(OptionsError, match="tls_max_version: must not be below"):
        make_options("https://h/", tls_min_version="1.3", tls_max_version="1.2")
    with pytest.raises(OptionsError, match="sni: must be a DNS host name"):
        make_options("https://h/", sni="1.2.3.4:5")
    with pytest.raises(OptionsError, match="h2c: is HTTP/2 without TLS"):
        make_options("https://h/", h2c=True)


def test_render_h2_request() -> None:
    h2 = render_h2_request("post", "/p?q=1", "h:8080",
                           [("X-A", "1"), ("Host", "vhost"), ("Connection", "close"),
                            ("TE", "gzip"), ("User-Agent", "me")], body_size=5)
    assert (h2.method, h2.path, h2.authority, h2.body_size) == ("POST", "/p?q=1", b"vhost", 5)
    assert h2.headers == ((b"x-a", b"1"), (b"user-agent", b"me"), (b"content-length", b"5"))
    default = render_h2_request("GET", "/", "h")
    assert default.headers == ((b"user-agent", USER_AGENT.encode()),)


def test_core_config_http2_and_tls() -> None:
    o = make_options("https://localhost:8443/x", protocol="http2", request_body_size=3,
                     request_method="PUT", max_concurrent_streams=10, insecure=True,
                     tls_session_reuse=False)
    config = client_core_config(o, "127.0.0.1")
    assert set(config) == CONFIG_KEYS | H2_KEYS | {"tls"}
    assert (config["scheme"], config["protocol"]) == ("https", "http2")
    (spec,) = config["specs"]
    assert set(spec) == SPEC_KEYS | H2_SPEC_KEYS
    assert (spec["h2_method"], spec["h2_path"], spec["h2_authority"]) == (
        "PUT", "/x", b"localhost:8443")
    assert (b"content-length", b"3") in spec["h2_headers"]
    assert spec["request"].endswith(b"\r\n\r\naaa") and spec["body_size"] == 3
    assert config["max_concurrent_streams"] == 10 and config["max_active_requests"] == 100
    tls = config["tls"]
    assert (tls["sni"], tls["verify_name"], tls["insecure"], tls["session_reuse"]) == (
        "localhost", "localhost", True, False)
