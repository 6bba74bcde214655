"""Test server options: validation, config files, the core config dict and the CLI's errors.

Pure Python: nothing here starts a server, so these run without the compiled extension.
Behaviour through the real server is in test_server.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import nhbench
from nhbench._core_config import response_core_config, server_core_config
from nhbench._server import address_report, write_address_file
from nhbench.cli import build_parser, server_options_from_args
from nhbench.options import (
    ServerOptions,
    load_config_file,
    make_server_options,
    parse_address,
    parse_echo_params,
    parse_listen,
)

SRC = str(Path(nhbench.__file__).resolve().parent.parent)
CPUS = sorted(os.sched_getaffinity(0))


def nhbench_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([SRC, *filter(None, [env.get("PYTHONPATH")])])
    return subprocess.run([sys.executable, "-m", "nhbench", *args], capture_output=True,
                          text=True, env=env, timeout=60, check=False)


def from_cli(*args: str) -> ServerOptions:
    parser = build_parser()
    namespace = parser.parse_args(["server", *args])
    return server_options_from_args(namespace, namespace.subparser)


# ---- addresses --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1:8080", ("tcp", "127.0.0.1", 8080)),
        ("[::1]:0", ("tcp", "::1", 0)),
        ("0.0.0.0:80", ("tcp", "0.0.0.0", 80)),
        (":8080", ("tcp", "0.0.0.0", 8080)),
        ("localhost:9000", ("tcp", "127.0.0.1", 9000)),
        ("[0:0:0:0:0:0:0:1]:5", ("tcp", "::1", 5)),
        (("127.0.0.1", 0), ("tcp", "127.0.0.1", 0)),
        (("tcp", "::1", 7), ("tcp", "::1", 7)),
        ("/tmp/nhb-x.sock", ("unix", "/tmp/nhb-x.sock", 0)),
        ("unix:/tmp/nhb-y.sock", ("unix", "/tmp/nhb-y.sock", 0)),
        (("unix", "/tmp/nhb-z.sock", 0), ("unix", "/tmp/nhb-z.sock", 0)),
        ("unix:@nhb-abstract", ("unix", "@nhb-abstract", 0)),
        ("@nhb-abstract", ("unix", "@nhb-abstract", 0)),
    ],
)
def test_listen_forms(text: object, expected: tuple[str, str, int]) -> None:
    assert parse_listen(text) == expected


def test_relative_unix_path_is_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                             ) -> None:
    monkeypatch.chdir(tmp_path)
    assert parse_listen("unix:s.sock") == ("unix", str(tmp_path / "s.sock"), 0)
    assert parse_listen("./t.sock") == ("unix", str(tmp_path / "t.sock"), 0)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("127.0.0.1", "must be HOST:PORT"),
        ("8080", "did you mean :8080?"),
        ("127.0.0.1:70000", "port must be in 0..65535"),
        ("127.0.0.1:http", "port must be an integer"),
        ("::1:80", "needs brackets"),
        ("no-such-host.invalid:80", "cannot resolve host"),
        ("/nonexistent-dir/x.sock", "does not exist"),
        ("unix:", "needs a path"),
        ("unix:/tmp/" + "x" * 120, "at most 107 bytes"),
        ("a/b:80", "unix socket path"),
    ],
)
def test_listen_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("?", r"\?").replace(".", r"\.")):
        parse_listen(text)


def test_echo_and_admin_addresses_are_tcp_only() -> None:
    assert parse_address("[::1]:0") == ("::1", 0)
    with pytest.raises(ValueError):
        parse_address("/tmp/x.sock")
    options = ServerOptions(tcp_echo=["127.0.0.1:0", "[::1]:0"], udp_echo="127.0.0.1:0",
                            admin=("localhost", 0))
    assert options.tcp_echo == (("127.0.0.1", 0), ("::1", 0))
    assert options.udp_echo == (("127.0.0.1", 0),)
    assert options.admin == ("127.0.0.1", 0)


def test_two_tcp_listeners_on_one_port_are_refused() -> None:
    # SO_REUSEPORT would let both bind and silently split the connections.
    with pytest.raises(nhbench.OptionsError, match="port 9000 is used by two TCP listeners"):
        nhbench.TestServer(listen="127.0.0.1:9000", admin="0.0.0.0:9000")
    # different hosts, or port 0, or one UDP: fine
    ServerOptions(listen=["127.0.0.1:9000", "127.0.0.2:9000"], tcp_echo="127.0.0.1:0",
                  udp_echo="127.0.0.1:9000", admin="127.0.0.1:0")


# ---- response options -------------------------------------------------------------------------


def test_defaults_and_core_config_is_exactly_the_contract() -> None:
    options = ServerOptions()
    assert server_core_config(options) == {
        "listen": [("tcp", "127.0.0.1", 0)],
        "workers": 1,
        "cpus": [],
        "response": {},
        "echo_default_params": "",
        "echo_defaults_no_query": False,
        "debug_path": "/debug",
        "debug_env_dump": False,
        "max_echo_delay": 1.5,
        "max_payload_kb": 256,
        "stall_every": 0.0,
        "stall_for": 0.0,
        "error_body_every": 0,
        "stream_events": 0,
        "stream_gap": 0.01,
        "stream_jitter": 0.0,
        "tcp_echo": [],
        "udp_echo": [],
        "tcp_proxy": [],
        "redirect": [],
        "forward": None,
        "http_fanout": [],
        "http_fanout_serial": False,
        "http_fanout_mirror": True,
        "admin": None,
        "idle_timeout": 60.0,
        "header_timeout": 10.0,
        "max_header_bytes": 65536,
        "max_body_bytes": 67108864,
        "tls": None,
        "alpn": ["h2", "http/1.1"],
        "max_concurrent_streams": 100,
        "max_delay": 60.0,
        "max_connections": 0,
        "http3": False,
    }


def test_full_core_config() -> None:
    cpu = CPUS[-1]
    options = ServerOptions(
        listen=["127.0.0.1:0", "unix:/tmp/nhb-full.sock"],
        workers=3,
        cpus=[cpu],
        response_body_size=10,
        response_headers=["X-A: 1", {"header": {"key": "X-B", "value": "2"}, "append": True}],
        echo_request_headers=True,
        concurrency_based_linear_delay={"minimal_delay": "1ms", "concurrency_delay_factor": "100us"},
        emit_previous_request_delta_in_response_header="x-delta",
        echo_default_params="?delay=10ms:50&status=503:5",
        echo_default_params_when="no-query", debug_path="/dbg/", debug_env_dump=True,
        max_echo_delay="2s",
        max_payload_kb=4,
        stall_every="2s",
        error_body_every=7,
        stall_for="200ms",
        tcp_echo="127.0.0.1:0",
        udp_echo="[::1]:0",
        tcp_proxy="127.0.0.1:0=[::1]:8080",
        redirect_listen="127.0.0.1:0",
        http_fanout="127.0.0.1:0=localhost:8080/a/,http://[::1]/b?c=1",
        http_fanout_serial=True,
        admin="127.0.0.1:0",
        idle_timeout="5s",
        header_timeout=0.5,
        max_header_bytes="8KiB",
        max_body_bytes="1MiB",
        tls_self_signed=True,
        tls_san=["example.test", "[fd00::1]"],
        alpn="http/1.1, h2",
        max_concurrent_streams=10,
        forward_prefix="/fortio/=127.0.0.1:9000",
        http3=True,
    )
    config = server_core_config(options)
    assert config == {
        "listen": [("tcp", "127.0.0.1", 0), ("unix", "/tmp/nhb-full.sock", 0)],
        "workers": 3,
        "cpus": [cpu, cpu, cpu],
        "response": {
            "response_body_size": 10,
            "response_headers": [
                {"header": {"key": "X-A", "value": "1"}, "append": False},
                {"header": {"key": "X-B", "value": "2"}, "append": True},
            ],
            "echo_request_headers": True,
            "concurrency_based_linear_delay": {"minimal_delay": 0.001,
                                               "concurrency_delay_factor": 0.0001},
            "emit_previous_request_delta_in_response_header": "x-delta",
        },
        "echo_default_params": "delay=10ms:50&status=503:5",
        "echo_defaults_no_query": True,
        "debug_path": "/dbg/",
        "debug_env_dump": True,
        "max_echo_delay": 2.0,
        "max_payload_kb": 4,
        "stall_every": 2.0,
        "stall_for": 0.2,
        "error_body_every": 7,
        "stream_events": 0,
        "stream_gap": 0.01,
        "stream_jitter": 0.0,
        "tcp_echo": [("127.0.0.1", 0)],
        "udp_echo": [("::1", 0)],
        "tcp_proxy": [(("127.0.0.1", 0), ("::1", 8080))],
        "redirect": [("127.0.0.1", 0)],
        "forward": ("/fortio/", ("127.0.0.1", 9000)),
        # Mirroring: the path is a prefix (one trailing / trimmed, as Fortio does).
        "http_fanout": [(("127.0.0.1", 0), [
            ("127.0.0.1", 8080, "http://localhost:8080/a/", "localhost:8080", "/a"),
            ("::1", 80, "http://[::1]/b?c=1", "[::1]", "/b?c=1"),
        ])],
        "http_fanout_serial": True,
        "http_fanout_mirror": True,
        "admin": ("127.0.0.1", 0),
        "idle_timeout": 5.0,
        "header_timeout": 0.5,
        "max_header_bytes": 8192,
        "max_body_bytes": 1048576,
        "tls": {"self_signed": True, "san": ["example.test", "fd00::1"]},
        "alpn": ["http/1.1", "h2"],
        "max_concurrent_streams": 10,
        "max_delay": 60.0,
        "max_connections": 0,
        "http3": True,
    }
    # JSON-able as it is (the C side reads plain Python containers)
    json.dumps(config)


def test_http_fanout_without_mirroring_requests_each_url_as_given() -> None:
    options = ServerOptions(http_fanout=[("127.0.0.1:0", ["127.0.0.1:9/", "127.0.0.1:9"])],
                            http_fanout_no_mirror=True)
    config = server_core_config(options)
    assert config["http_fanout_mirror"] is False
    assert [t[4] for t in config["http_fanout"][0][1]] == ["/", "/"]
    args = options.cli_args()
    assert "--http-fanout-no-mirror" in args
    assert args[args.index("--http-fanout") + 1] == "127.0.0.1:0=http://127.0.0.1:9/,http://127.0.0.1:9"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("127.0.0.1:0", "LOCAL=URL"),
        ("127.0.0.1:0=https://127.0.0.1:8443/", "https:// fan-out targets are not supported"),
        ("127.0.0.1:0=ftp://127.0.0.1/", "is an http:// URL"),
        ("127.0.0.1:0=http://127.0.0.1:0/", "port other than 0"),
        ("127.0.0.1:0=http://u:p@127.0.0.1:1/", "no user"),
        ("127.0.0.1:0=" + ",".join(["127.0.0.1:1"] * 9), "1 to 8 target URLs"),
        (["127.0.0.1:0=127.0.0.1:1"] * 5, "at most 4 HTTP fan-outs"),
    ],
)
def test_http_fanout_errors_are_named(value: object, message: str) -> None:
    with pytest.raises(nhbench.OptionsError, match=re.escape(message)):
        make_server_options({"http_fanout": value})


def test_nested_and_flat_response_options_merge_flat_wins() -> None:
    options = ServerOptions(response={"response_body_size": 5, "static_delay": "1s"},
                            response_body_size=7)
    assert options.response.response_body_size == 7
    assert options.response.static_delay == 1.0


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("5ms", 0.005), ("0.5s", 0.5), (2, 2.0), (0.25, 0.25), ("250us", 0.00025),
     ({"seconds": 1, "nanos": 500000000}, 1.5), ({"nanos": 1000}, 1e-6)],
)
def test_durations(value: object, seconds: float) -> None:
    assert ServerOptions(static_delay=value).response.static_delay == pytest.approx(seconds)
    assert ServerOptions(max_echo_delay=value).max_echo_delay == pytest.approx(seconds)


def test_response_header_shapes() -> None:
    options = ServerOptions(response_headers=[
        "X-A: 1",
        ("X-B", "2"),
        {"header": {"key": "X-C", "value": "3"}},
        {"header": {"key": "X-D", "value": "4"}, "append": True},
        {"header": {"key": "X-E", "value": "5"}, "append": {"value": True}},
        '{"header": {"key": "X-F", "value": "6"}, "append": true}',
    ])
    got = [(h.header.key, h.header.value, h.append) for h in options.response.response_headers]
    assert got == [("X-A", "1", False), ("X-B", "2", False), ("X-C", "3", False),
                   ("X-D", "4", True), ("X-E", "5", True), ("X-F", "6", True)]
    # a mapping is a shortcut for replace-headers
    mapping = ServerOptions(response_headers={"X-M": "m"})
    assert response_core_config(mapping.response)["response_headers"] == [
        {"header": {"key": "X-M", "value": "m"}, "append": False}
    ]
    # Nighthawk's newer name
    v3 = ServerOptions.model_validate(
        {"response": {"v3_response_headers": [{"header": {"key": "X-V", "value": "3"}}]}}
    )
    assert v3.response.response_headers[0].header.key == "X-V"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"response_body_size": 4 * 1024 * 1024 + 1}, "response_body_size: must be >= 0 and <= 4194304"),
        ({"response_body_size": -1}, "response_body_size: must be >= 0"),
        ({"response_headers": ["bad"]}, "response_headers: must be 'name: value'"),
        ({"response_headers": ["X: a\r\nY: b"]}, "must not contain CR, LF or NUL"),
        ({"response_headers": ["Content-Length: 5"]}, "set by the server"),
        ({"response_headers": ["Transfer-Encoding: chunked"]}, "set by the server"),
        ({"response_headers": ["Connection: close"]}, "set by the server"),
        ({"response_headers": ["Bad Name: x"]}, "not allowed in a header name"),
        ({"response_headers": [{"header": {"key": "X"}, "appnd": True}]}, "unknown option"),
        ({"static_delay": "soon"}, "static_delay: must be a duration"),
        ({"static_delay": -1}, "static_delay: must be >= 0"),
        ({"static_delay": "1s", "concurrency_based_linear_delay": "1ms,1ms"},
         "static_delay: mutually exclusive with concurrency_based_linear_delay"),
        ({"concurrency_based_linear_delay": "1ms"}, "must be MINIMAL,FACTOR"),
        ({"concurrency_based_linear_delay": {"minimal_delay": "-1ms"}},
         "concurrency_based_linear_delay.minimal_delay: must be >= 0"),
        ({"concurrency_based_linear_delay": {"minimal": "1ms"}},
         "concurrency_based_linear_delay.minimal: unknown option"),
        ({"emit_previous_request_delta_in_response_header": "a b"}, "not allowed in a header"),
        ({"workers": 0}, "workers: must be >= 1 and <= 1024"),
        ({"workers": "many"}, "workers: must be 'auto' or an integer"),
        ({"cpus": [9999]}, "cpus: CPU 9999 does not exist (this machine has CPU"),
        ({"stall_for": "1s"}, "stall_for: needs stall_every"),
        ({"stall_every": "1s"}, "stall_every: needs stall_for"),
        ({"stall_every": "1s", "stall_for": "1s"}, "stall_for: must be shorter than stall_every"),
        ({"max_payload_kb": -1}, "max_payload_kb: must be >= 0"),
        ({"max_echo_delay": "-1s"}, "max_echo_delay: must be >= 0"),
        ({"idle_timeout": -1}, "idle_timeout: must be >= 0"),
        ({"header_timeout": "never"}, "header_timeout: must be a duration"),
        ({"max_header_bytes": 10}, "max_header_bytes: must be >= 128"),
        ({"max_body_bytes": -5}, "max_body_bytes: must be >= 0"),
        ({"address_file": "/nonexistent-dir/a.json"}, "address_file: directory '/nonexistent-dir'"),
        ({"listen": []}, "listen: must name at least one address"),
        ({"echo_default_params": "dealy=1s"}, "unknown echo parameter 'dealy'"),
        ({"respnse_body_size": 1}, "respnse_body_size: unknown option (did you mean response_body_size?)"),
    ],
)
def test_invalid_options_raise_one_line_naming_the_option(kwargs: dict[str, object],
                                                           message: str) -> None:
    with pytest.raises(nhbench.OptionsError) as info:
        make_server_options(kwargs)
    text = str(info.value)
    assert "\n" not in text
    assert message in text, text


def test_testserver_validates_without_starting() -> None:
    with pytest.raises(nhbench.OptionsError, match="response_body_size: must be >= 0"):
        nhbench.TestServer(response_body_size=-1)
    with pytest.raises(nhbench.OptionsError, match="static_delay"):
        nhbench.TestServer(static_delay="later")
    server = nhbench.TestServer(listen=("127.0.0.1", 0), workers=1, cpus=None,
                                response_body_size=64, static_delay="1ms",
                                response_headers={"X-A": "1"})
    assert server.options.response.response_body_size == 64
    with pytest.raises(nhbench.ServerError, match="not been started"):
        _ = server.url


def test_testserver_config_and_keywords(tmp_path: Path) -> None:
    from nhbench.options import ResponseOptions

    path = tmp_path / "c.json"
    path.write_text('{"response_body_size": 3, "static_delay": "5ms", "workers": 2}')
    server = nhbench.TestServer(config=path, response_body_size=4)
    r = server.options.response
    assert (r.response_body_size, r.static_delay, server.options.workers) == (4, 0.005, 2)
    server = nhbench.TestServer(config={"response": {"response_body_size": 6}},
                                response=ResponseOptions(echo_request_headers=True))
    assert server.options.response.echo_request_headers is True
    # keywords replace the config's response object as a whole only where given
    assert nhbench.TestServer(
        config={"response_body_size": 6}, echo_request_headers=True
    ).options.response.response_body_size == 6
    with pytest.raises(nhbench.OptionsError, match="no such file"):
        nhbench.TestServer(config=tmp_path / "missing.yaml")


def test_workers_auto() -> None:
    assert ServerOptions(workers="auto").worker_count == len(CPUS)
    assert server_core_config(ServerOptions(workers="auto", cpus=[CPUS[0]]))["workers"] == 1
    assert ServerOptions(workers=3, cpus=CPUS).worker_cpus == [CPUS[i % len(CPUS)]
                                                               for i in range(3)]


# ---- Fortio echo parameters -------------------------------------------------------------------


@pytest.mark.parametrize(
    "query",
    [
        "delay=10ms", "delay=150us:10,2ms:5,0.5s:1", "delay=1m30s", "close=TRUE", "status=418", "status=503:5%,429:1",
        "size=1024", "size=1024:10,512:5", "close=true", "close=5", "close=true:10",
        "gzip=true", "gzip=42.5", "header=X-A:1&header=X-B:two", "status=418&delay=0.5s:50,1s:40",
        "status=503:50,404:50",
    ],
)
def test_valid_echo_params(query: str) -> None:
    assert parse_echo_params(query) == query
    assert parse_echo_params("?" + query) == query


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("delay=abc", "delay 'abc' is not a duration"),
        ("delay=-1s", "negative"),
        ("status=99", "not an HTTP status"),
        ("status=101", "not an HTTP status in 200..599"),
        ("status=2000", "not an HTTP status"),
        ("status=503:60,404:50", "percentages add up to 110 > 100"),
        ("status=503:x", "is not a percentage"),
        ("status=503:101", "not in 0..100"),
        ("status=503,404", "items must be VALUE:PERCENT"),
        ("size=-1", "not a byte count"),
        ("close=maybe", "close 'maybe' must be true, false or a percentage"),
        ("header=NoColon", "header must be NAME:VALUE"),
        ("header=Bad Name:1", "must not contain spaces"),
        ("dealy=1s", "did you mean delay?"),
        ("stall=1s", "use --stall-every and --stall-for"),
        ("status=200&status=201", "status is given more than once"),
    ],
)
def test_invalid_echo_params(query: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_echo_params(query)
    assert message in str(info.value)


# ---- config files -----------------------------------------------------------------------------


def test_config_whole_options_json_and_yaml(tmp_path: Path) -> None:
    data = {"listen": ["127.0.0.1:0", "[::1]:0"], "workers": 2,
            "response": {"response_body_size": 12, "static_delay": "3ms"},
            "echo_default_params": "status=418", "max_echo_delay": "1s"}
    json_file = tmp_path / "server.json"
    json_file.write_text(json.dumps(data))
    yaml_file = tmp_path / "server.yaml"
    yaml_file.write_text(
        "listen: ['127.0.0.1:0', '[::1]:0']\nworkers: 2\n"
        "response:\n  response_body_size: 12\n  static_delay: 3ms\n"
        "echo_default_params: status=418\nmax_echo_delay: 1s\n"
    )
    a = make_server_options(config=json_file)
    b = make_server_options(config=str(yaml_file))
    c = make_server_options(config=data)
    assert a == b == c
    assert a.response.static_delay == pytest.approx(0.003)
    assert a.listen == (("tcp", "127.0.0.1", 0), ("tcp", "::1", 0))


def test_config_nighthawk_response_options(tmp_path: Path) -> None:
    # Nighthawk's shape: a bare ResponseOptions object, @type and all
    path = tmp_path / "nighthawk.json"
    path.write_text(json.dumps({
        "@type": "type.googleapis.com/nighthawk.server.ResponseOptions",
        "response_body_size": 10,
        "response_headers": [{"header": {"key": "x-nh", "value": "1"}, "append": True}],
        "static_delay": "0.5s",
        "emit_previous_request_delta_in_response_header": "x-prev",
    }))
    options = make_server_options(config=path)
    assert options.response.response_body_size == 10
    assert options.response.static_delay == 0.5
    assert options.response.response_headers[0].append is True
    assert options.response.emit_previous_request_delta_in_response_header == "x-prev"
    assert options.listen == (("tcp", "127.0.0.1", 0),)


def test_config_envoy_bootstrap_of_nighthawk_test_server(tmp_path: Path) -> None:
    path = tmp_path / "nighthawk-test-server.yaml"
    path.write_text("""\
static_resources:
  listeners:
  - address:
      socket_address: { address: 127.0.0.1, port_value: 0 }
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          http_filters:
          - name: time-tracking
            typed_config:
              "@type": type.googleapis.com/nighthawk.server.TimeTrackingConfiguration
              experimental_response_options:
                emit_previous_request_delta_in_response_header: x-origin-delta
          - name: dynamic-delay
            typed_config:
              "@type": type.googleapis.com/nighthawk.server.DynamicDelayConfiguration
              experimental_response_options:
                static_delay: 0.002s
          - name: test-server
            typed_config:
              "@type": type.googleapis.com/nighthawk.server.ResponseOptions
              response_body_size: 10
              v3_response_headers:
              - { header: { key: "x-nh", value: "1" } }
          - name: envoy.filters.http.router
""")
    options = make_server_options(config=path)
    r = options.response
    assert (r.response_body_size, r.static_delay) == (10, 0.002)
    assert r.emit_previous_request_delta_in_response_header == "x-origin-delta"
    assert [h.text() for h in r.response_headers] == ["x-nh: 1"]
    assert options.listen == (("tcp", "127.0.0.1", 0),)


def test_config_unknown_extension_tries_json_then_yaml(tmp_path: Path) -> None:
    as_json = tmp_path / "a.conf"
    as_json.write_text('{"response_body_size": 3}')
    as_yaml = tmp_path / "b.conf"
    as_yaml.write_text("response_body_size: 4\n")
    assert load_config_file(as_json) == {"response_body_size": 3}
    assert load_config_file(as_yaml) == {"response_body_size": 4}


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("bad.json", "{nope", "not valid JSON: Expecting property name"),
        ("bad.yaml", "a: [1, 2", "not valid JSON or YAML"),
        ("list.json", "[1, 2]", "must hold a mapping of options (got list)"),
    ],
)
def test_config_file_errors(tmp_path: Path, name: str, content: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(nhbench.OptionsError) as info:
        make_server_options(config=path)
    assert message in str(info.value)
    assert str(path) in str(info.value)


def test_config_errors_name_the_file_and_the_key(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("response_body_size: -3\n")
    with pytest.raises(nhbench.OptionsError) as info:
        make_server_options(config=path)
    assert f"config {path}: response_body_size: must be >= 0" in str(info.value)
    path.write_text("respnse_body_size: 3\n")
    with pytest.raises(nhbench.OptionsError, match="unknown option"):
        make_server_options(config=path)


def test_keywords_and_flags_override_the_config(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"listen": ["127.0.0.1:0", "127.0.0.1:0"],
                                "response": {"response_body_size": 5, "static_delay": "1s"},
                                "response_headers": ["X-File: 1"]}))
    options = make_server_options({"response_body_size": 9, "listen": "[::1]:0"}, config=path)
    assert options.listen == (("tcp", "::1", 0),)
    assert options.response.response_body_size == 9
    assert options.response.static_delay == 1.0
    assert [h.text() for h in options.response.response_headers] == ["X-File: 1"]
    cli = from_cli("--config", str(path), "--response-body-size", "11",
                   "--response-header", "X-Cli: 2")
    assert cli.response.response_body_size == 11
    assert [h.text() for h in cli.response.response_headers] == ["X-Cli: 2"]
    assert len(cli.listen) == 2


# ---- the CLI ----------------------------------------------------------------------------------


def test_cli_args_round_trip() -> None:
    options = ServerOptions(
        listen=["127.0.0.1:0", "[::1]:0", "unix:/tmp/nhb-rt.sock"], workers=2,
        cpus=list(reversed(CPUS)),
        response_body_size=10,
        response_headers=["X-A: 1", {"header": {"key": "X-B", "value": "2"}, "append": True}],
        echo_request_headers=True,
        concurrency_based_linear_delay="1ms,100us",
        emit_previous_request_delta_in_response_header="x-delta",
        echo_default_params="delay=10ms:50,1s:1&header=A:b%20c",
        echo_default_params_when="no-query", debug_path="", debug_env_dump=True,
        max_echo_delay="2s", max_payload_kb=4, stall_every="2s", stall_for="0.2s",
        tcp_echo="127.0.0.1:0", udp_echo="[::1]:0", admin="127.0.0.1:0",
        idle_timeout="5s", header_timeout="1s", max_header_bytes=8192, max_body_bytes=1000,
    )
    assert from_cli(*options.cli_args()) == options
    plain = ServerOptions(static_delay="5ms")
    assert from_cli(*plain.cli_args()) == plain


def test_cli_fortio_spellings() -> None:
    options = from_cli("--echo-server-default-params", "status=418", "--maxpayloadsizekb", "8")
    assert (options.echo_default_params, options.max_payload_kb) == ("status=418", 8)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--listen", "127.0.0.1"), "--listen: must be HOST:PORT"),
        (("--listen", "127.0.0.1:70000"), "--listen: port must be in 0..65535"),
        (("--listen", "/nonexistent-dir/s.sock"), "--listen: directory '/nonexistent-dir'"),
        (("--workers", "0"), "--workers: must be >= 1 and <= 1024"),
        (("--static-delay", "soon"), "--static-delay: must be a duration"),
        (("--response-body-size", "-1"), "--response-body-size: must be >= 0"),
        (("--response-body-size", "5000000"), "--response-body-size: must be >= 0 and <= 4194304"),
        (("--response-header", "bad"), "--response-header: must be 'name: value'"),
        (("--response-header", "{bad"), "--response-header: must be 'name: value' or Nighthawk"),
        (("--static-delay", "1s", "--concurrency-based-linear-delay", "1ms,1ms"),
         "--static-delay: mutually exclusive with --concurrency-based-linear-delay"),
        (("--concurrency-based-linear-delay", "1ms,x"),
         "--concurrency-based-linear-delay concurrency_delay_factor: must be a duration"),
        (("--emit-previous-request-delta-in-response-header", "a:b"),
         "--emit-previous-request-delta-in-response-header: header name 'a:b'"),
        (("--echo-default-params", "status=503:60,404:50"),
         "--echo-default-params: status percentages add up to 110 > 100"),
        (("--max-echo-delay", "x"), "--max-echo-delay: must be a duration"),
        (("--max-payload-kb", "-1"), "--max-payload-kb: must be >= 0"),
        (("--stall-for", "1s"), "--stall-for: needs --stall-every"),
        (("--stall-every", "1s", "--stall-for", "2s"), "--stall-for: must be shorter than --stall-every"),
        (("--tcp-echo", "nowhere"), "--tcp-echo: must be HOST:PORT"),
        (("--udp-echo", "127.0.0.1:-1"), "--udp-echo: port must be in 0..65535"),
        (("--admin", "[::1]"), "--admin: must be HOST:PORT"),
        (("--address-file", "/nonexistent-dir/a.json"), "--address-file: directory"),
        (("--idle-timeout=-1s",), "--idle-timeout: must be >= 0"),
        (("--header-timeout=-2",), "--header-timeout: must be >= 0"),
        (("--max-header-bytes", "1"), "--max-header-bytes: must be >= 128"),
        (("--max-body-bytes", "lots"), "--max-body-bytes: must be an integer"),
        (("--cpus", "9999"), "--cpus: CPU 9999 does not exist (this machine has CPU"),
        (("--config", "/nonexistent-dir/c.yaml"), "--config: /nonexistent-dir/c.yaml: no such file"),
        (("--respons-body-size", "1"), "unrecognized arguments"),
    ],
)
def test_cli_errors_are_one_line_exit_2(args: tuple[str, ...], expected: str) -> None:
    proc = nhbench_cli("server", *args)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("nhbench: error: ")
    assert expected in lines[0], lines[0]


def test_cli_config_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("response_body_size: -3\nstatic_delay: 1ms\n")
    proc = nhbench_cli("server", "--config", str(path))
    assert proc.returncode == 2
    assert f"--config {path}: response_body_size: must be >= 0" in proc.stderr
    path.write_text("{ not: yaml: at all")
    proc = nhbench_cli("server", "--config", str(path))
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1
    assert "--config: " in proc.stderr and "not valid JSON or YAML" in proc.stderr


def test_server_help_lists_every_flag() -> None:
    text = nhbench_cli("server", "--help").stdout
    for flag in ("--listen", "--workers", "--cpus", "--config", "--admin", "--address-file",
                 "--response-body-size", "--response-header", "--static-delay",
                 "--echo-request-headers", "--concurrency-based-linear-delay",
                 "--emit-previous-request-delta-in-response-header", "--echo-default-params",
                 "--max-echo-delay", "--max-payload-kb", "--stall-every", "--stall-for",
                 "--tcp-echo", "--udp-echo", "--idle-timeout", "--header-timeout",
                 "--max-header-bytes", "--max-body-bytes"):
        assert flag in text, flag


# ---- the address file -------------------------------------------------------------------------


def test_address_file_is_written_atomically(tmp_path: Path) -> None:
    report = address_report(
        [("tcp", "127.0.0.1", 8080), ("tcp", "::1", 8081), ("unix", "/tmp/x.sock", 0)],
        ("127.0.0.1", 9901), [("127.0.0.1", 8078)], [("::1", 8079)],
    )
    target = tmp_path / "addresses.json"
    write_address_file(target, report)
    assert [p.name for p in tmp_path.iterdir()] == ["addresses.json"]
    data = json.loads(target.read_text())
    assert data == {
        "pid": os.getpid(),
        "listen": [
            {"kind": "tcp", "host": "127.0.0.1", "port": 8080, "url": "http://127.0.0.1:8080/"},
            {"kind": "tcp", "host": "::1", "port": 8081, "url": "http://[::1]:8081/"},
            {"kind": "unix", "path": "/tmp/x.sock", "url": "unix:/tmp/x.sock"},
        ],
        "admin": {"host": "127.0.0.1", "port": 9901, "url": "http://127.0.0.1:9901/stats"},
        "tcp_echo": [{"host": "127.0.0.1", "port": 8078}],
        "udp_echo": [{"host": "::1", "port": 8079}],
    }
    # rewriting replaces it whole
    write_address_file(target, {"pid": 1, "listen": [], "admin": None, "tcp_echo": [],
                                "udp_echo": []})
    assert json.loads(target.read_text())["pid"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["addresses.json"]


def test_cli_args_round_trip_keeps_the_client_ca(tmp_path: Path) -> None:
    # The subprocess server is started from cli_args(): a client CA left out would serve
    # without asking for client certificates.
    from support.pki import make_pki

    pki = make_pki(tmp_path)
    options = ServerOptions(tls_self_signed=True, tls_client_ca=pki.ca)
    assert "--tls-client-ca" in options.cli_args()
    assert from_cli(*options.cli_args()) == options
