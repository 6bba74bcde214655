"""Nighthawk's options-list request-source plugins (--request-source-plugin-config).

Parsing tests need no compiled extension: they read Nighthawk's own test data
(tests/data/nighthawk/request_source/, copied unchanged) and the configs of its integration
test (test/integration/test_request_source_plugin.py), in its relaxed JSON, strict JSON and
YAML. The CLI tests run ``python -m nhbench`` as users do: bad input is one line, exit 2.
What reaches the wire is in tests/test_sources_wire.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_cli_errors import nhbench_cli

from nhbench import OptionsError
from nhbench._request import RequestSpec
from nhbench.options import Options, make_options
from nhbench.sources import (
    FILE_BASED_PLUGIN,
    IN_LINE_PLUGIN,
    load_plugin_config,
)

DATA = Path(__file__).parent / "data" / "nighthawk" / "request_source"
URI = "http://127.0.0.1:1/"

# Nighthawk's integration test, "in-line": its relaxed JSON (bare-word keys, a trailing
# comma after the list and after options_list, the method and sizes as strings).
IN_LINE_CONFIG = """
  {
  name:"nighthawk.in-line-options-list-request-source-plugin",
  typed_config:{
  "@type":"type.googleapis.com/nighthawk.request_source.InLineOptionsListRequestSourceConfig",
  options_list:{
  options:[
    {request_method:"1",request_body_size:"1",request_headers:[{header:{"key":"x-nighthawk-test-server-config","value":"{response_body_size:13}"}}]},
    {request_method:"1",request_body_size:"2",request_headers:[{header:{"key":"x-nighthawk-test-server-config","value":"{response_body_size:17}"}}]},
    ]
  },
  }
  }"""


def file_config(name: str, **extra: object) -> str:
    """Nighthawk's integration test, "file-based": strict JSON naming a test-data file."""
    typed = {
        "@type": "type.googleapis.com/nighthawk.request_source."
                 "FileBasedOptionsListRequestSourceConfig",
        "file_path": str(DATA / name),
        **extra,
    }
    return json.dumps({"name": FILE_BASED_PLUGIN, "typed_config": typed})


def test_in_line_relaxed_json_from_nighthawks_integration_test() -> None:
    source = load_plugin_config(IN_LINE_CONFIG)
    assert source.num_requests is None
    assert source.specs == (
        RequestSpec(method="GET", body_size=1,
                    headers=(("x-nighthawk-test-server-config", "{response_body_size:13}"),)),
        RequestSpec(method="GET", body_size=2,
                    headers=(("x-nighthawk-test-server-config", "{response_body_size:17}"),)),
    )


def test_file_based_yaml_test_config_ab() -> None:
    source = load_plugin_config(file_config("test-config-ab.yaml"))
    assert [(s.method, s.path, s.body_size, s.body) for s in source.specs] == [
        ("GET", "/a", 10, None), ("GET", "/b", 10, None)]
    # :path is the path, not a header; the other header is kept as Envoy lower-cases it.
    assert source.specs[0].headers == (
        ("x-nighthawk-test-server-config", "{response_body_size:13}"),)


def test_file_based_yaml_test_config_c() -> None:
    source = load_plugin_config(file_config("test-config-c.yaml"))
    assert [s.path for s in source.specs] == ["/c"]


def test_file_based_json_body_sets_content_type() -> None:
    source = load_plugin_config(file_config("test-jsonconfig-ab.yaml"))
    first, second = source.specs
    assert first.body == b'{"message": "hello1"}'
    assert second.body == b'{"message": "hellohello2"}'
    assert first.body_size is None
    assert ("content-type", "application/json") in first.headers
    # The pseudo-header ":content-type" of Nighthawk's file is dropped, as Envoy's HTTP/1
    # codec drops it; the json_body's content-type stays, once.
    assert [name for name, _ in second.headers].count("content-type") == 1
    assert not any(name.startswith(":") for name, _ in second.headers)


def test_num_requests_and_yaml_config_text(tmp_path: Path) -> None:
    # The same config as YAML text, with protobuf JSON's lowerCamelCase names.
    text = (f"name: {FILE_BASED_PLUGIN}\n"
            "typed_config:\n"
            f"  filePath: {DATA / 'test-config-ab.yaml'}\n"
            "  numRequests: 5\n")
    source = load_plugin_config(text)
    assert source.num_requests == 5
    assert len(source.specs) == 2


def test_json_options_list_file_with_relaxed_syntax(tmp_path: Path) -> None:
    path = tmp_path / "list.json"
    path.write_text("{options: [{request_method: 'POST', request_headers: ["
                    "{header: {key: ':path', value: '/x'}}, {header: {key: 'Host', "
                    "value: 'vhost.test'}}, {header: {key: 'X-A', value: '1'}}, "
                    "{header: {key: 'x-a', value: '2'}}]},]}")
    source = load_plugin_config(json.dumps({"name": FILE_BASED_PLUGIN,
                                            "typed_config": {"file_path": str(path)}}))
    (spec,) = source.specs
    assert (spec.method, spec.path, spec.authority) == ("POST", "/x", "vhost.test")
    # setCopy: the later header of a name replaces the earlier one.
    assert spec.headers == (("x-a", "2"),)


def test_method_by_name_number_and_unspecified() -> None:
    options = [{"request_method": m} for m in ("PUT", 9, "5", 0, "METHOD_UNSPECIFIED")]
    config = {"name": IN_LINE_PLUGIN,
              "typed_config": {"options_list": {"options": options}}}
    source = load_plugin_config(json.dumps(config))
    # 0 (unspecified) leaves the run's --request-method.
    assert [s.method for s in source.specs] == ["PUT", "PATCH", "DELETE", None, None]


def test_empty_list_is_the_runs_own_request() -> None:
    config = {"name": IN_LINE_PLUGIN, "typed_config": {"options_list": {}}}
    assert load_plugin_config(json.dumps(config)).specs == (RequestSpec(),)


def test_content_length_header_sets_the_body_size() -> None:
    headers = [{"header": {"key": "content-length", "value": "7"}}]
    config = {"name": IN_LINE_PLUGIN, "typed_config": {"options_list": {"options": [
        {"request_body_size": 3, "request_headers": headers}]}}}
    (spec,) = load_plugin_config(json.dumps(config)).specs
    assert spec.body_size == 7
    assert spec.headers == ()


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("{name: ", "request source plugin config: not valid JSON or YAML"),
        ('{"name": "nighthawk.stub-request-source-plugin", "typed_config": {}}',
         "unsupported plugin 'nighthawk.stub-request-source-plugin'"),
        (json.dumps({"name": IN_LINE_PLUGIN, "typed_config": {
            "@type": "type.googleapis.com/nighthawk.request_source."
                     "FileBasedOptionsListRequestSourceConfig"}}),
         "does not match nighthawk.in-line-options-list-request-source-plugin"),
        (json.dumps({"name": IN_LINE_PLUGIN, "typed_config": {"options_lst": {}}}),
         "unknown field 'options_lst'"),
        (json.dumps({"name": IN_LINE_PLUGIN, "typed_config": {"options_list": {
            "options": [{}, {"request_method": 12}]}}}),
         "options_list: options[1]: request_method: 12 is not an envoy RequestMethod"),
        (json.dumps({"name": IN_LINE_PLUGIN, "typed_config": {"options_list": {
            "options": [{"request_body_size": 4194305}]}}}),
         "request_body_size: must be >= 0 and <= 4194304 (got 4194305)"),
        (json.dumps({"name": IN_LINE_PLUGIN, "typed_config": {"options_list": {
            "options": [{"request_headers": [{"header": {"key": ":path", "value": "x y"}}]}]}}}),
         "options[0]: request_headers[0]: path 'x y' must start with /"),
        (json.dumps({"name": IN_LINE_PLUGIN, "typed_config": {"options_list": {
            "options": [{"request_headers": [{"header": {"key": "x", "value": "a\r\nb: c"}}]}]}}}),
         "header 'x': value must not contain CR, LF or NUL"),
        (json.dumps({"name": IN_LINE_PLUGIN, "typed_config": {"options_list": {
            "options": [{"request_headers": [{"header": {"key": "bad name", "value": "1"}}]}]}}}),
         "header name 'bad name' is not a valid HTTP token"),
        (json.dumps({"name": IN_LINE_PLUGIN, "typed_config": {"options_list": {
            "options": [{"request_headers": [
                {"header": {"key": "transfer-encoding", "value": "chunked"}}]}]}}}),
         "header 'transfer-encoding' is not supported"),
        (json.dumps({"name": FILE_BASED_PLUGIN, "typed_config": {"num_requests": 3}}),
         "needs file_path"),
        (json.dumps({"name": FILE_BASED_PLUGIN, "typed_config": {
            "file_path": "/nonexistent/list.yaml"}}),
         "options list /nonexistent/list.yaml: no such file"),
        (json.dumps({"name": IN_LINE_PLUGIN, "typed_config": {"num_requests": -1}}),
         "num_requests: must be >= 0"),
    ],
)
def test_bad_configs_name_the_entry_and_the_problem(config: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        load_plugin_config(config)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_max_file_size_as_nighthawk(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("options:\n  - request_method: 1\n")
    over = file_config("x", file_path=str(path), max_file_size=10)
    with pytest.raises(ValueError, match=r"list.yaml: 31 bytes is over the limit of 10"):
        load_plugin_config(over)
    with pytest.raises(ValueError, match=r"max_file_size: must be >= 0 and <= 1000000"):
        load_plugin_config(file_config("x", file_path=str(path), max_file_size=1000001))


def test_bad_entry_in_a_file_names_the_file_and_the_entry(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("options:\n  - request_method: 1\n  - request_method: BREW\n")
    with pytest.raises(ValueError) as caught:
        load_plugin_config(file_config("x", file_path=str(path)))
    assert str(caught.value) == (
        f"options list {path}: options[1]: request_method: 'BREW' is not one of GET, HEAD, "
        "POST, PUT, DELETE, CONNECT, OPTIONS, TRACE, PATCH")


# ---- the options -----------------------------------------------------------------------------


def test_options_read_the_source_at_validation() -> None:
    options = Options(uri=URI, request_source_plugin_config=IN_LINE_CONFIG)
    from nhbench.options._request_set import request_specs

    assert [s.body_size for s in request_specs(options)] == [1, 2]


def test_options_accept_the_config_as_a_mapping() -> None:
    config = {"name": IN_LINE_PLUGIN, "typed_config": {"options_list": {"options": [
        {"request_headers": [{"header": {"key": ":path", "value": "/m"}}]}]}}}
    options = Options(uri=URI, request_source_plugin_config=config)
    assert json.loads(options.request_source_plugin_config or "") == config


def test_options_error_names_the_option() -> None:
    with pytest.raises(OptionsError) as caught:
        make_options(URI, request_source_plugin_config=file_config("missing.yaml"))
    assert str(caught.value).startswith("request_source_plugin_config: options list ")
    assert str(caught.value).endswith("missing.yaml: no such file")


def test_echo_of_options_does_not_need_the_file() -> None:
    # A result written on another machine names a file this one lacks; it still loads.
    Options.model_validate({"uri": URI, "request_source_plugin_config": file_config("gone")},
                           context={"echo": True})


def test_plugin_config_and_replay_are_exclusive() -> None:
    with pytest.raises(OptionsError, match="replay: mutually exclusive with "
                                           "request_source_plugin_config"):
        make_options(URI, request_source_plugin_config=IN_LINE_CONFIG,
                     replay=str(DATA / "test-config-c.yaml"))


def test_num_requests_is_the_exact_count_per_worker() -> None:
    config = file_config("test-config-ab.yaml", num_requests=3)
    options = make_options(URI, request_source_plugin_config=config, concurrency=2)
    assert options.requests == 6
    # Changing the worker count works it out again.
    assert make_options(options, concurrency=1).requests == 3
    with pytest.raises(OptionsError, match="num_requests 3 per worker .* conflicts with "
                                           "requests = 5"):
        make_options(URI, request_source_plugin_config=config, concurrency=1, requests=5)


# ---- the command line --------------------------------------------------------------------------


def test_cli_bad_source_is_one_line_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("options:\n  - request_body_size: lots\n")
    out = nhbench_cli("run", URI, "--request-source-plugin-config",
                      file_config("x", file_path=str(path)))
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert "--request-source-plugin-config: options list" in lines[0]
    assert "options[0]: request_body_size: must be a whole number (got 'lots')" in lines[0]
    assert "Traceback" not in out.stderr


def test_cli_unknown_plugin_is_one_line_exit_2() -> None:
    out = nhbench_cli("run", URI, "--request-source-plugin-config",
                      '{name: "nighthawk.stub-request-source-plugin", typed_config: {}}')
    assert out.returncode == 2, out.stderr
    assert out.stderr.count("\n") == 1
    assert "unsupported plugin 'nighthawk.stub-request-source-plugin'" in out.stderr
