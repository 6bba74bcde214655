"""Replay (--replay FILE): HAR 1.2 files, nginx combined/common and Envoy default access logs.

The test data (tests/data/replay/) is hand-written; these tests need no compiled extension.
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
from nhbench.sources import MAX_ENTRIES, load_replay

DATA = Path(__file__).parent / "data" / "replay"
HAR = str(DATA / "browse.har")
NGINX = str(DATA / "nginx-combined.log")
ENVOY = str(DATA / "envoy-default.log")
URI = "http://127.0.0.1:1/"


def test_har_entries() -> None:
    source = load_replay(HAR)
    assert source.offsets is None and source.num_requests is None
    first, second, third = source.specs
    # The entry's host is not replayed: the run's URI is the target. Pseudo-headers,
    # connection and host are left out; the rest keep their order and spelling.
    assert first == RequestSpec(method="GET", path="/catalog?page=2",
                                headers=(("accept", "text/html"), ("x-trace", "one")))
    # postData.text is the body; Content-Length is the renderer's, not the HAR's.
    assert second == RequestSpec(method="POST", path="/cart",
                                 headers=(("Content-Type", "application/json"),
                                          ("X-Trace", "two")),
                                 body=b'{"item": "socks"}\n')
    # Only a bodySize: that many filler bytes.
    assert third == RequestSpec(method="PUT", path="/upload/1", headers=(("X-Trace", "three"),),
                                body_size=5)


def test_har_original_timing_offsets() -> None:
    source = load_replay(HAR, original_timing=True)
    assert source.offsets == (0.0, 0.25, 1.0)


def test_har_original_timing_sorts_by_time(tmp_path: Path) -> None:
    data = json.loads(Path(HAR).read_text())
    data["log"]["entries"].reverse()
    path = tmp_path / "reversed.har"
    path.write_text(json.dumps(data))
    # Rate timing keeps the file's order; the original timing releases in time order.
    assert [s.method for s in load_replay(str(path)).specs] == ["PUT", "POST", "GET"]
    timed = load_replay(str(path), original_timing=True)
    assert [s.method for s in timed.specs] == ["GET", "POST", "PUT"]
    assert timed.offsets == (0.0, 0.25, 1.0)


def test_har_post_params_and_base64(tmp_path: Path) -> None:
    entries = [
        {"startedDateTime": "2026-03-01T10:00:00+01:00", "request": {
            "method": "post", "url": "http://x/form", "headers": [],
            "postData": {"mimeType": "application/x-www-form-urlencoded",
                         "params": [{"name": "a", "value": "1 2"}, {"name": "b", "value": "&"}]}}},
        {"startedDateTime": "2026-03-01T10:00:00+01:00", "request": {
            "method": "PUT", "url": "http://x/bin", "headers": [],
            "postData": {"mimeType": "application/octet-stream", "text": "AAEC/w==",
                         "encoding": "base64"}}},
    ]
    path = tmp_path / "form.har"
    path.write_text(json.dumps({"log": {"entries": entries}}))
    form, binary = load_replay(str(path)).specs
    assert form.method == "POST"
    assert form.body == b"a=1+2&b=%26"
    assert form.headers == (("Content-Type", "application/x-www-form-urlencoded"),)
    assert binary.body == b"\x00\x01\x02\xff"


def test_nginx_combined() -> None:
    source = load_replay(NGINX)
    # The "-" 400 line nginx writes for a connection that never sent a request is skipped.
    assert source.specs == (
        RequestSpec(method="GET", path="/index.html", headers=(("User-Agent", "curl/8.5.0"),)),
        RequestSpec(method="POST", path="/api/login",
                    headers=(("Referer", "https://shop.example.com/"),
                             ("User-Agent", "Mozilla/5.0 (X11; Linux x86_64)"))),
        # nginx's \x22 is a '"', which the path carries percent-encoded.
        RequestSpec(method="GET", path="/search?q=%22socks%22&x=%22y%22"),
    )
    # To the second, as nginx logs it.
    assert load_replay(NGINX, original_timing=True).offsets == (0.0, 0.0, 3.0)


def test_nginx_common_and_absolute_form(tmp_path: Path) -> None:
    path = tmp_path / "common.log"
    path.write_text('10.0.0.1 - - [01/Mar/2026:10:00:00 +0000] "GET http://proxy.test/a?b=1 '
                    'HTTP/1.1" 200 5\n'
                    '10.0.0.1 - - [01/Mar/2026:10:00:02 +0000] "HEAD /h HTTP/1.0" 200 0\n')
    source = load_replay(str(path), "nginx", original_timing=True)
    assert [(s.method, s.path) for s in source.specs] == [("GET", "/a?b=1"), ("HEAD", "/h")]
    assert source.offsets == (0.0, 2.0)


def test_envoy_default_format() -> None:
    source = load_replay(ENVOY)
    assert source.specs == (
        RequestSpec(method="GET", path="/healthz", headers=(("User-Agent", "kube-probe/1.29"),)),
        # %BYTES_RECEIVED% is the request body size.
        RequestSpec(method="POST", path="/v1/orders", headers=(("User-Agent", "grpc-go/1.60"),),
                    body_size=137),
        RequestSpec(method="DELETE", path="/v1/orders/7"),
    )
    assert load_replay(ENVOY, original_timing=True).offsets == (0.0, 0.125, 0.5)


def test_format_detection_by_content(tmp_path: Path) -> None:
    har = tmp_path / "capture.json"
    har.write_text(Path(HAR).read_text())
    assert len(load_replay(str(har)).specs) == 3
    assert len(load_replay(ENVOY, "envoy").specs) == 3


@pytest.mark.parametrize(
    ("name", "content", "kind", "message"),
    [
        ("x.har", "{", "auto", "HAR file {path}: not valid JSON"),
        ("x.har", '{"log": {}}', "auto", "HAR file {path}: no log.entries list"),
        ("x.har", '{"log": {"entries": [{"request": {"method": "GET", "url": "http://a/"}}, '
                  '{"request": {"method": "BREW", "url": "http://a/"}}]}}', "auto",
         "HAR file {path}: entry 1: method 'BREW' is not one of"),
        ("x.har", '{"log": {"entries": [{"request": {"method": "GET"}}]}}', "auto",
         "entry 0: request has no url"),
        ("x.har", '{"log": {"entries": [{"request": {"method": "GET", "url": "http://a/", '
                  '"headers": [{"name": "x", "value": "1\\r\\nevil: 1"}]}}]}}', "auto",
         "entry 0: header 'x': value must not contain CR, LF or NUL"),
        ("x.har", '{"log": {"entries": [{"startedDateTime": "yesterday", "request": '
                  '{"method": "GET", "url": "http://a/"}}]}}', "auto",
         "entry 0: startedDateTime 'yesterday' is not an ISO 8601 time"),
        ("x.log", "10.0.0.1 - - [01/Mar/2026:10:00:00 +0000] \"GET / HTTP/1.1\" 200 1\n"
                  "this is not a log line\n", "auto",
         "access log {path}: line 2: not in nginx's combined or common format"),
        ("x.log", '[2026-03-01T10:00:00.000Z] "GET / HTTP/1.1" 200\n', "auto",
         "access log {path}: line 1: not in Envoy's default access log format"),
        ("x.log", '10.0.0.1 - - [01/Mar/2026:10:00:00 +0000] "PROPFIND / HTTP/1.1" 207 1\n',
         "nginx", "line 1: method 'PROPFIND' is not one of"),
        ("x.log", '10.0.0.1 - - [01/Mar/2026:10:00:00 +0000] "-" 400 0 "-" "-"\n', "nginx",
         "access log {path}: no requests in it"),
        ("x.log", "", "auto", "access log {path}: no requests in it"),
    ],
)
def test_bad_replay_files(tmp_path: Path, name: str, content: str, kind: str,
                          message: str) -> None:
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(ValueError) as caught:
        load_replay(str(path), kind)
    assert message.format(path=path) in str(caught.value)
    assert "\n" not in str(caught.value)


def test_missing_file_and_binary_log(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="replay file /nonexistent.log: no such file"):
        load_replay("/nonexistent.log")
    path = tmp_path / "bin.log"
    path.write_bytes(b'10.0.0.1 - - [01/Mar/2026:10:00:00 +0000] "GET /\xff HTTP/1.1" 200 1\n')
    with pytest.raises(ValueError, match="line 1: not UTF-8 text"):
        load_replay(str(path))


def test_entry_limit(tmp_path: Path) -> None:
    path = tmp_path / "big.log"
    line = '10.0.0.1 - - [01/Mar/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 1\n'
    path.write_text(line * (MAX_ENTRIES + 1))
    with pytest.raises(ValueError, match=f"more than the {MAX_ENTRIES} requests"):
        load_replay(str(path))


def test_body_total_limit(tmp_path: Path) -> None:
    path = tmp_path / "big.log"
    line = '[2026-03-01T10:00:00.000Z] "POST / HTTP/1.1" 200 - 40000000 0 1 1 "-" "-"\n'
    path.write_text(line * 2)
    with pytest.raises(ValueError, match="the request bodies add up to 80000000 bytes, over "
                                          "the limit of 67108864"):
        load_replay(str(path))


# ---- the options -----------------------------------------------------------------------------


def test_options_replay_specs() -> None:
    from nhbench.options._request_set import request_specs

    options = Options(uri=URI, replay=ENVOY)
    assert [s.path for s in request_specs(options)] == ["/healthz", "/v1/orders",
                                                         "/v1/orders/7"]


def test_replay_format_and_timing_need_replay() -> None:
    with pytest.raises(OptionsError, match="replay_timing: needs replay"):
        make_options(URI, replay_timing="original")
    with pytest.raises(OptionsError, match="replay_format: needs replay"):
        make_options(URI, replay_format="har")


def test_original_timing_sets_the_schedule_offsets() -> None:
    options = make_options(URI, replay=HAR, replay_timing="original")
    assert options.schedule_offsets == (0.0, 0.25, 1.0)
    # Not cut at the default 5 s: the replay ends after its last request.
    assert options.no_duration and options.duration is None
    assert make_options(options, concurrency=1).no_duration
    # A duration given still bounds it.
    timed = make_options(URI, replay=HAR, replay_timing="original", duration=2)
    assert (timed.duration, timed.no_duration) == (2.0, False)
    with pytest.raises(OptionsError, match="replay: replay_timing original conflicts with "
                                           "schedule_offsets = 3 offsets"):
        make_options(URI, replay=HAR, replay_timing="original", schedule_offsets=[0, 1, 2])


def test_cli_bad_replay_is_one_line_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "bad.har"
    path.write_text('{"log": {"entries": [{"request": {"method": "GET", "url": "http://a/"}},'
                    ' {"request": {"method": "GET", "url": "ftp"}}]}}')
    out = nhbench_cli("run", URI, "--replay", str(path))
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip() == (f"nhbench: error: --replay: HAR file {path}: entry 1: "
                                  "path 'ftp' must start with /")


def test_cli_replay_choices() -> None:
    out = nhbench_cli("run", URI, "--replay", NGINX, "--replay-timing", "later")
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1
    assert "--replay-timing" in out.stderr
