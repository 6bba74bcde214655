"""``nhbench ui DIR``: runs started from the form and from Fortio's REST API, against our
test server, with ``nhbench ui`` as a subprocess and real HTTP.

* The form: a POST (session cookie and CSRF value from the form) starts a run, its live
  stream delivers one event per interval then ``end``, the nhbench JSON lands in DIR and
  the list and result pages show it; the stop button drains a long run early.
* Fortio's REST API: one script runs against real ``fortio server`` (skipped where fortio
  is not installed) and against ours, and every reply has the same field names and JSON
  types: async run, status, stop with wait, sync run (Fortio's result JSON), dns, and
  the errors (no URL, a bad duration).
* The command line's refusals (exit 2, one line).

The safety of all this is tests/hostile/test_ui_attacks.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from support.ui import UI, env, form_session, request, rest

import nhbench
from nhbench.browse import Catalogue

pytestmark = pytest.mark.timeout(240)

FORTIO = shutil.which("fortio") or "/root/go/bin/fortio"


@pytest.fixture(scope="module")
def origin() -> Iterator[str]:
    with nhbench.TestServer() as server:
        yield server.url


@pytest.fixture
def ui(tmp_path: Path) -> Iterator[UI]:
    served = UI(tmp_path)
    yield served
    served.stop()


def start_from_form(ui: UI, fields: dict[str, str]) -> int:
    cookie, csrf = form_session(ui.port)
    body = urlencode({"csrf": csrf, **fields}).encode()
    status, headers, page = request(ui.port, "/run", method="POST", body=body, headers={
        "Cookie": cookie, "Content-Type": "application/x-www-form-urlencoded",
        "Origin": f"http://127.0.0.1:{ui.port}"})
    assert status == 303, page.decode()[:500]
    return int(headers["location"].rsplit("/", 1)[1])


def events(port: int, run_id: int) -> list[tuple[str, Any]]:
    """The live stream of a run, read to its end: (event name, data) pairs."""
    status, headers, body = request(port, f"/runs/{run_id}/events")
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    out = []
    for block in body.decode().split("\n\n"):
        name, data = "message", None
        for line in block.splitlines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data = json.loads(line[6:])
        if data is not None:
            out.append((name, data))
    return out


def test_a_run_from_the_form_streams_its_intervals_and_is_saved(
        ui: UI, origin: str, tmp_path: Path) -> None:
    run_id = start_from_form(ui, {"uri": origin, "rps": "100", "connections": "2",
                                  "duration": "2s", "stats_interval": "0.25s",
                                  "label": "from the form", "protocol": "http1",
                                  "request_header": "x-one: 1\r\nx-two: 2"})
    stream = events(ui.port, run_id)
    name, end = stream[-1]
    assert name == "end" and end["state"] == "done" and end["error"] is None, end
    intervals = [data for kind, data in stream if kind == "message"]
    # 2 s in quarter seconds: about 8 intervals (the last one partial).
    assert 6 <= len(intervals) <= 10, intervals
    assert sum(i["requests"] for i in intervals) == pytest.approx(200, abs=5)
    assert all(i["p99"] is not None and i["errors"] == 0 for i in intervals[:-1])
    saved = tmp_path / end["result"].removeprefix("/result/")
    result = nhbench.load_result(saved)
    assert result.options.label == ("from the form",)
    assert result.options.request_header == ("x-one: 1", "x-two: 2")
    assert result.counters["benchmark.http_2xx"] == sum(i["requests"] for i in intervals)
    status, _, page = request(ui.port, "/")
    assert status == 200 and b"from the form" in page and b'id="new-run"' in page
    status, _, page = request(ui.port, end["result"])
    assert status == 200 and b"from the form" in page
    # The same pages under Fortio's UI path.
    assert request(ui.port, "/fortio/")[0] == 200
    assert request(ui.port, "/fortio" + end["result"])[0] == 200


def test_the_form_refuses_invalid_options_by_name_and_starts_nothing(ui: UI) -> None:
    cookie, csrf = form_session(ui.port)
    body = urlencode({"csrf": csrf, "uri": "ftp://nowhere/", "rps": "10"}).encode()
    status, _, page = request(ui.port, "/run", method="POST", body=body,
                              headers={"Cookie": cookie})
    assert status == 400 and b'id="form-error"' in page and b"uri" in page
    # The form keeps what was typed.
    assert b'value="ftp://nowhere/"' in page
    assert rest(ui.port, "/fortio/rest/status")[1] == {"Statuses": {}}


def test_stop_drains_a_run_early_and_saves_the_partial_result(
        ui: UI, origin: str, tmp_path: Path) -> None:
    run_id = start_from_form(ui, {"uri": origin, "rps": "50", "connections": "1",
                                  "duration": "60s", "stats_interval": "0.2s"})
    time.sleep(1.0)
    cookie, csrf = form_session(ui.port, f"/runs/{run_id}")
    started = time.monotonic()
    status, _, _ = request(ui.port, f"/runs/{run_id}/stop", method="POST",
                           body=urlencode({"csrf": csrf}).encode(),
                           headers={"Cookie": cookie})
    assert status == 303
    name, end = events(ui.port, run_id)[-1]
    assert name == "end" and end["state"] == "done"
    assert time.monotonic() - started < 30
    result = nhbench.load_result(tmp_path / end["result"].removeprefix("/result/"))
    assert result.interrupted and 0.5 < result.duration < 30


# ---- Fortio's REST API: the same script against fortio server and against us -------------


def shape(value: Any) -> Any:
    """The JSON type of every field: names and types, not values (a number is a number)."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return type(value).__name__


def script(port: int, target: str) -> dict[str, Any]:
    """What a script written against Fortio's REST API sees: each call's status and reply
    (the run IDs and times differ; their shapes must not)."""
    seen: dict[str, Any] = {}
    query = urlencode({"url": target, "qps": "20", "t": "20s", "async": "on", "c": "2"})
    seen["async"] = rest(port, f"/fortio/rest/run?{query}")
    run_id = seen["async"][1]["RunID"]
    time.sleep(0.5)
    seen["status"] = rest(port, f"/fortio/rest/status?runid={run_id}")
    seen["stop"] = rest(port, f"/fortio/rest/stop?runid={run_id}&wait=on")
    seen["status after"] = rest(port, "/fortio/rest/status")
    seen["stop none"] = rest(port, "/fortio/rest/stop")
    body = json.dumps({"metadata": {"url": target, "qps": "50", "n": "20", "c": "1",
                                    "headers": ["x-from: json"]}}).encode()
    seen["sync"] = rest(port, "/fortio/rest/run?jsonPath=.metadata", method="POST", body=body)
    seen["dns"] = rest(port, "/fortio/rest/dns?name=localhost")
    seen["no url"] = rest(port, "/fortio/rest/run")
    seen["bad duration"] = rest(port, f"/fortio/rest/run?url={target}&t=bad")
    return seen


def fortio_ui_port(fortio: subprocess.Popen[str]) -> int:
    """The port of a starting Fortio server's UI, once its REST handlers are in place.

    Fortio logs "http-echo server listening" as soon as it serves, and only then adds
    the UI and REST handlers to the mux: a request in between gets 404. Its log's "All
    fortio ... servers started!" comes after the last handler.
    """
    assert fortio.stderr is not None
    port = 0
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        line = fortio.stderr.readline()
        match = re.search(r"http-echo server listening on tcp 127\.0\.0\.1:(\d+)", line)
        if match:
            port = int(match.group(1))
        if port and "servers started!" in line:
            return port
        if not line:
            break
    raise AssertionError("fortio server did not say its port and start its UI")


@pytest.mark.peer
@pytest.mark.skipif(not os.access(FORTIO, os.X_OK), reason="fortio is not installed")
def test_a_script_against_fortios_rest_api_sees_the_same_shapes(
        ui: UI, origin: str, tmp_path: Path) -> None:
    data = tmp_path / "fortio-data"
    data.mkdir()
    fortio = subprocess.Popen([FORTIO, "server", "-http-port", "127.0.0.1:0",
                               "-grpc-port", "disabled", "-redirect-port", "disabled",
                               "-tcp-port", "disabled", "-udp-port", "disabled",
                               "-data-dir", str(data)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        theirs = script(fortio_ui_port(fortio), origin)
    finally:
        fortio.terminate()
        fortio.communicate(timeout=10)
    ours = script(ui.port, origin)
    for call in theirs:
        assert ours[call][0] == theirs[call][0], (call, ours[call], theirs[call])
        if call == "sync":
            # Fortio's result JSON: every field Fortio writes, with its type (nhbench's
            # fields that Fortio leaves null, Sockets and ConnectionStats, aside).
            missing = set(theirs[call][1]) - set(ours[call][1])
            assert not missing, missing
            for key in ("RunType", "RequestedQPS", "ActualQPS", "NumThreads", "Exactly",
                        "RetCodes", "DurationHistogram", "URL", "ID", "RunID"):
                assert shape(ours[call][1][key]) == shape(theirs[call][1][key]), key
            assert ours[call][1]["DurationHistogram"]["Count"] == 20
            continue
        assert shape(ours[call][1]) == shape(theirs[call][1]), (call, ours[call],
                                                                theirs[call])
    assert ours["async"][1]["message"] == "started" and ours["stop"][1]["message"] == "stopped"
    assert ours["stop"][1]["Count"] == 1 and ours["stop none"][1]["Count"] == 0
    assert ours["status after"][1] == {"Statuses": {}}
    assert ours["no url"][1] == {"error": True, "message": "URL is required"}


def resolve_script(port: int, server_port: int) -> dict[str, Any]:
    """REST runs with ``resolve``: the URL's host is a name no resolver knows; resolve
    points at the test server on 127.0.0.2."""
    seen: dict[str, Any] = {}
    url = f"http://backend.invalid:{server_port}/"
    for name, resolve in (("address", "127.0.0.2"), ("list", "127.0.0.1,127.0.0.2"),
                          ("unknown name", "nothere.invalid")):
        query = urlencode({"url": url, "resolve": resolve, "qps": "50", "n": "10", "c": "1"})
        seen[name] = rest(port, f"/fortio/rest/run?{query}")
    return seen


@pytest.mark.peer
@pytest.mark.skipif(not os.access(FORTIO, os.X_OK), reason="fortio is not installed")
def test_rest_resolve_side_by_side_with_fortio(ui: UI, tmp_path: Path) -> None:
    # Without an allow-list (the default) resolve is taken as Fortio takes it: the
    # connections go to that address, the URL's host (which nothing resolves) only names
    # it. Both reply 200 with the same codes and IPCountMap, the server counting every
    # request; both refuse a list and a name that does not resolve with 400.
    data = tmp_path / "fortio-data"
    data.mkdir()
    fortio = subprocess.Popen([FORTIO, "server", "-http-port", "127.0.0.1:0",
                               "-grpc-port", "disabled", "-redirect-port", "disabled",
                               "-tcp-port", "disabled", "-udp-port", "disabled",
                               "-data-dir", str(data)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    with nhbench.TestServer(listen="127.0.0.2:0") as server:
        port = server.address[1]
        try:
            theirs = resolve_script(fortio_ui_port(fortio), port)
        finally:
            fortio.terminate()
            fortio.communicate(timeout=10)
        assert server.stats()["requests"] == 10
        ours = resolve_script(ui.port, port)
        assert server.stats()["requests"] == 20
    for call in theirs:
        assert ours[call][0] == theirs[call][0], (call, ours[call], theirs[call])
    assert ours["address"][0] == 200
    for key in ("RetCodes", "IPCountMap", "Resolve"):
        assert ours["address"][1][key] == theirs["address"][1][key], key
    assert ours["address"][1]["IPCountMap"] == {f"127.0.0.2:{port}": 1}
    assert ours["address"][1]["RetCodes"] == {"200": 10}
    for call in ("list", "unknown name"):
        assert ours[call][1]["error"] is True and theirs[call][1]["error"] is True


def test_save_on_writes_fortios_json_served_under_data(ui: UI, origin: str,
                                                       tmp_path: Path) -> None:
    status, reply = rest(ui.port, f"/fortio/rest/run?url={origin}&qps=40&n=8&c=1&save=on"
                         "&async=on&labels=saved+run")
    assert status == 200 and reply["ResultID"].endswith("_saved_run"), reply
    deadline = time.monotonic() + 30
    path = tmp_path / (reply["ResultID"] + ".json")
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    document = json.loads(path.read_text())
    assert document["ID"] == reply["ResultID"] and document["Labels"] == "saved run"
    assert document["DurationHistogram"]["Count"] == 8 and document["RunID"] == reply["RunID"]
    status, _, body = request(ui.port, reply["ResultURL"].split(str(ui.port), 1)[1])
    assert status == 200 and json.loads(body)["ID"] == reply["ResultID"]
    # Fortio's JSON is the run's one saved file, so the browser lists the run once; the
    # finished run's page links to it.
    link = f"/result/{path.name}"
    while time.monotonic() < deadline:
        status, _, page = request(ui.port, f"/runs/{reply['RunID']}")
        if link.encode() in page:
            break
        time.sleep(0.1)
    assert status == 200 and link.encode() in page
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".json") == [path.name]
    entries = Catalogue(tmp_path).scan().entries
    assert [entry.path for entry in entries] == [path.name]


@pytest.mark.parametrize(("args", "message"), [
    (["--listen", "nonsense"], "--listen"),
    (["--max-rate", "-1"], "--max-rate: must be 0"),
    (["--allow-target", "not a host"], "--allow-target"),
    (["--token", " "], "--token: must not be empty"),
    (["--prefix", "fortio"], "prefix"),
])
def test_the_command_line_refuses_bad_input(tmp_path: Path, args: list[str],
                                            message: str) -> None:
    done = subprocess.run([sys.executable, "-m", "nhbench", "ui", str(tmp_path), *args],
                          capture_output=True, text=True, timeout=60, env=env(),
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
