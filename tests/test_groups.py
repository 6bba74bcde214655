"""Statistics per group (--group-by, docs/engine.md "Groups"): by a response header's value
against real test servers behind a round-robin multi-target (HTTP/1.1, h2c), by request kind
from a request source's named entries and from a replayed access log, by target; the route
template rule; bad values refused by name before any load is sent."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
from collections.abc import Callable
from pathlib import Path

import pytest
from support import h2frames as h2
from support.cli import nhbench_cli as cli
from support.scripted_origin import ScriptedOrigin

import nhbench
from nhbench._groups import route_template

pytestmark = pytest.mark.core

CPUS = sorted(os.sched_getaffinity(0))
CLIENT_CPU = str(CPUS[0])
SERVER_CPUS = [CPUS[1] if len(CPUS) > 1 else CPUS[0]]


def run(url: str | None, **kw: object) -> nhbench.Result:
    kw.setdefault("cpus", CLIENT_CPU)
    kw.setdefault("start_delay", 0.1)
    kw.setdefault("max_pending_requests", 1000)
    return nhbench.run(url, **kw)


def by_name(result: nhbench.Result) -> dict[str, nhbench.GroupResult]:
    assert result.groups is not None
    return {g.name: g for g in result.groups.groups}


@pytest.mark.parametrize("h2c", [False, True], ids=["http1", "h2c"])
def test_group_by_header_splits_as_the_servers_counted(h2c: bool) -> None:
    with nhbench.TestServer(listen="127.0.0.1:0", cpus=SERVER_CPUS,
                            response_headers={"x-served-by": "alpha"}) as a, \
            nhbench.TestServer(listen="127.0.0.1:0", cpus=SERVER_CPUS,
                               response_headers={"X-Served-By": "beta"}) as b:
        endpoints = [f"127.0.0.1:{a.address[1]}", f"127.0.0.1:{b.address[1]}"]
        result = run(None, multi_target_endpoint=endpoints, multi_target_path="/",
                     connections=2, requests=90, rps=300, h2c=h2c,
                     group_by="header:X-Served-By")
        served = {"alpha": a.stats()["requests"], "beta": b.stats()["requests"]}
    groups = by_name(result)
    assert result.groups is not None and result.groups.by == "header:x-served-by"
    assert set(groups) == {"alpha", "beta"}, groups
    assert groups["alpha"].requests == served["alpha"] == 45
    assert groups["beta"].requests == served["beta"] == 45
    assert groups["alpha"].status_2xx == 45 and groups["alpha"].errors == 0
    assert groups["alpha"].latency.count == 45
    assert result.groups.spread == 1.0
    assert abs(groups["alpha"].share - 0.5) < 1e-9


def test_two_workers_values_merge_by_value() -> None:
    # Each worker finds the values in its own order; the merge joins them by value.
    with nhbench.TestServer(listen="127.0.0.1:0", cpus=SERVER_CPUS,
                            response_headers={"x-served-by": "alpha"}) as a, \
            nhbench.TestServer(listen="127.0.0.1:0", cpus=SERVER_CPUS,
                               response_headers={"x-served-by": "beta"}) as b:
        endpoints = [f"127.0.0.1:{a.address[1]}", f"127.0.0.1:{b.address[1]}"]
        result = run(None, multi_target_endpoint=endpoints, multi_target_path="/",
                     connections=2, requests=120, rps=400, concurrency=2,
                     cpus=[CPUS[0], CPUS[0]], group_by="header:x-served-by")
        served = {"alpha": a.stats()["requests"], "beta": b.stats()["requests"]}
    groups = by_name(result)
    assert result.worker_count == 2
    assert set(groups) == {"alpha", "beta"}
    assert {k: groups[k].requests for k in served} == served
    assert sum(served.values()) == 120


def test_group_by_header_uneven_split_and_none() -> None:
    # Two connections to a server with the header, one to one without: the spread is the
    # ratio of the two values' counts, and the bare server's responses are "(none)".
    with nhbench.TestServer(listen="127.0.0.1:0", cpus=SERVER_CPUS,
                            response_headers={"x-served-by": "alpha"}) as a, \
            nhbench.TestServer(listen="127.0.0.1:0", cpus=SERVER_CPUS,
                               response_headers={"x-served-by": "beta"}) as b, \
            nhbench.TestServer(listen="127.0.0.1:0", cpus=SERVER_CPUS) as bare:
        ea, eb, en = (f"127.0.0.1:{s.address[1]}" for s in (a, b, bare))
        result = run(None, multi_target_endpoint=[ea, ea, eb, en], multi_target_path="/",
                     connections=4, requests=80, rps=400, group_by="header:x-served-by")
        counts = (a.stats()["requests"], b.stats()["requests"], bare.stats()["requests"])
    groups = by_name(result)
    assert counts == (40, 20, 20)
    assert (groups["alpha"].requests, groups["beta"].requests, groups["(none)"].requests) \
        == counts
    assert result.groups is not None and result.groups.spread == 2.0


def test_group_by_target_matches_each_server() -> None:
    with nhbench.TestServer(listen="127.0.0.1:0", cpus=SERVER_CPUS) as a, \
            nhbench.TestServer(listen="127.0.0.1:0", cpus=SERVER_CPUS) as b:
        endpoints = [f"127.0.0.1:{a.address[1]}", f"127.0.0.1:{b.address[1]}"]
        result = run(None, multi_target_endpoint=endpoints, multi_target_path="/",
                     connections=2, requests=60, rps=300, group_by="target")
        served = [a.stats()["requests"], b.stats()["requests"]]
    groups = by_name(result)
    assert list(groups) == endpoints
    assert [groups[e].requests for e in endpoints] == served == [30, 30]
    # A target's name holds a colon: a rule names it whole (NAME is up to the last colon).
    verdict = result.check_slo(f"group:{endpoints[0]}:errors==0",
                               f"group:{endpoints[1]}:p99<60s")
    assert verdict, verdict


def _plugin(tmp_path: Path, entries: list[dict[str, object]]) -> str:
    path = tmp_path / "source.json"
    path.write_text(json.dumps({"options": entries}))
    return json.dumps({"name": "nighthawk.file-based-request-source-plugin", "typed_config": {
        "@type": "type.googleapis.com/nighthawk.request_source.FileBasedOptionsListRequestSourceConfig",
        "file_path": str(path)}})


def test_named_entries_group_by_default(tmp_path: Path) -> None:
    entries = [
        {"name": "login", "request_headers": [{"header": {"key": ":path", "value": "/login"}}]},
        {"name": "search", "request_headers": [{"header": {"key": ":path",
                                                           "value": "/s?size=2000"}}]},
        {"name": "login", "request_headers": [{"header": {"key": ":path", "value": "/login2"}}]},
        {"name": "missing", "request_headers": [
            {"header": {"key": ":path", "value": "/?status=404"}}]},
    ]
    with nhbench.TestServer(listen="127.0.0.1:0", cpus=SERVER_CPUS) as server:
        result = run(server.url, request_source_plugin_config=_plugin(tmp_path, entries),
                     connections=1, requests=40, rps=200, no_default_failure_predicates=True)
    groups = by_name(result)
    assert result.groups is not None and result.groups.by == "request"
    assert list(groups) == ["login", "search", "missing"]
    assert groups["login"].requests == 20
    assert groups["search"].requests == 10
    assert groups["missing"].requests == groups["missing"].status_4xx == 10
    assert groups["missing"].errors == 10 and groups["login"].errors == 0
    assert sum(g.requests for g in groups.values()) == 40
    # Bodies of 2000 bytes take longer to write than empty ones only on paper: the
    # histograms are per group, each with its own count.
    assert groups["search"].latency.count == 10


def test_replayed_log_groups_by_method_and_route(tmp_path: Path) -> None:
    log = tmp_path / "access.log"
    lines = []
    for path in ("/users/123", "/users/456?x=1", "/items/3f2a9c1e77", "/users/123/orders",
                 "/items/5b1d6e0a-8c2f-4a7e-9d3b-0f1e2d3c4b5a", "/about"):
        lines.append(f'127.0.0.1 - - [10/Oct/2024:13:55:36 +0000] "GET {path} HTTP/1.1" 200 '
                     '12 "-" "curl/8"')
    log.write_text("\n".join(lines) + "\n")
    with nhbench.TestServer(listen="127.0.0.1:0", cpus=SERVER_CPUS) as server:
        result = run(server.url, replay=str(log), connections=1, requests=60, rps=300,
                     group_by="request")
    groups = by_name(result)
    assert list(groups) == ["GET /users/{id}", "GET /items/{id}", "GET /users/{id}/orders",
                            "GET /about"]
    assert [g.requests for g in groups.values()] == [20, 20, 10, 10]


def test_without_grouping_there_are_no_groups() -> None:
    with nhbench.TestServer(listen="127.0.0.1:0", cpus=SERVER_CPUS) as server:
        result = run(server.url, requests=10, rps=100)
    assert result.groups is None
    assert "groups" not in json.dumps(result.model_dump(mode="json")["results"][-1].get(
        "user_defined_outputs", []))


def test_groups_survive_json_and_show_in_the_report_and_page(tmp_path: Path) -> None:
    with nhbench.TestServer(listen="127.0.0.1:0", cpus=SERVER_CPUS,
                            response_headers={"x-served-by": "a<b>"}) as server:
        p = cli("run", server.url, "--requests", "20", "--rps", "100", "--cpus", CLIENT_CPU,
                "--group-by", "header:x-served-by", "--output-format", "json")
    assert p.returncode == 0, p.stderr
    back = nhbench.Result.model_validate_json(p.stdout)
    assert back.groups is not None and back.groups["a<b>"].requests == 20
    assert back.groups.by == "header:x-served-by" and back.groups.spread is None
    # The DataFrame needs pandas (the notebook extra), which the ASan session does not install.
    if importlib.util.find_spec("pandas") is not None:
        frame = back.groups_dataframe()
        assert int(frame.loc["a<b>", "requests"]) == 20
    text = back.render("human")
    assert "Group (header:x-served-by)" in text
    assert any(line.startswith("a<b>") and " 20 " in line for line in text.splitlines())
    # The result page (nhbench report): the value escaped, in its own table.
    saved = tmp_path / "r.json"
    saved.write_text(p.stdout)
    page = tmp_path / "r.html"
    r = cli("report", str(saved), "-o", str(page))
    assert r.returncode == 0, r.stderr
    html = page.read_text()
    assert '<table id="groups">' in html and "<td>a&lt;b&gt;</td>" in html
    assert "a<b>" not in html


@pytest.mark.parametrize(("args", "message"), [
    (["--group-by", "colour"], "group-by"),
    (["--group-by", "header:bad name"], "not a header name"),
    (["--group-by", "target"], "several targets"),
])
def test_bad_group_by_is_refused_by_name(args: list[str], message: str) -> None:
    p = cli("run", "http://127.0.0.1:9/", "--requests", "1", *args)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert message in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_a_bad_entry_name_is_refused(tmp_path: Path) -> None:
    plugin = _plugin(tmp_path, [{"name": "", "request_method": "GET"}])
    p = cli("run", "http://127.0.0.1:9/", "--requests", "1",
            "--request-source-plugin-config", plugin)
    assert p.returncode == 2 and "name must be" in p.stderr, p.stderr


@pytest.mark.parametrize(("path", "route"), [
    ("/users/123", "/users/{id}"),
    ("/users/123?sort=1", "/users/{id}"),
    ("/o/5b1d6e0a-8c2f-4a7e-9d3b-0f1e2d3c4b5a/x", "/o/{id}/x"),
    ("/blob/3f2a9c1e77", "/blob/{id}"),
    ("/deadbeefcafe", "/deadbeefcafe"),  # hex without a digit: a word, kept
    ("/v2/items", "/v2/items"),
    ("/", "/"),
])
def test_route_template(path: str, route: str) -> None:
    assert route_template(path) == route


def test_failed_checks_are_counted_in_their_group() -> None:
    # One response in 10 is a 200 with an error body: a failed check, counted in the group
    # of the server that sent it, and not in the group's latency.
    with nhbench.TestServer(listen="127.0.0.1:0", cpus=SERVER_CPUS, error_body_every=10,
                            response_body_size=64,
                            response_headers={"x-served-by": "faulty"}) as a, \
            nhbench.TestServer(listen="127.0.0.1:0", cpus=SERVER_CPUS, response_body_size=64,
                               response_headers={"x-served-by": "fine"}) as b:
        endpoints = [f"127.0.0.1:{a.address[1]}", f"127.0.0.1:{b.address[1]}"]
        result = run(None, multi_target_endpoint=endpoints, multi_target_path="/",
                     connections=2, requests=200, rps=500, check=["ok=header:x-nhbench-error absent"],
                     group_by="header:x-served-by")
        injected = a.stats()["error_bodies"]
    groups = by_name(result)
    assert injected == 10
    assert groups["faulty"].check_failed == groups["faulty"].failures == injected
    assert groups["faulty"].status_2xx == 100 - injected
    assert groups["faulty"].latency.count == 100 - injected
    assert groups["fine"].check_failed == 0 and groups["fine"].requests == 100
    assert result.counters["benchmark.check_failed"] == injected


def test_group_by_header_over_http3() -> None:
    with nhbench.TestServer("127.0.0.1:0", tls_self_signed=True, http3=True,
                            response_headers={"x-served-by": "quic"}) as server:
        result = run(server.url, protocol="http3", cacert=server.ca_cert, requests=30, rps=200,
                     group_by="header:x-served-by")
        served = server.stats()["requests"]
    groups = by_name(result)
    assert groups["quic"].requests == served == 30
    assert "(none)" not in groups


def test_slo_on_a_group() -> None:
    with nhbench.TestServer(listen="127.0.0.1:0", cpus=SERVER_CPUS,
                            response_headers={"x-served-by": "alpha"}) as server:
        base = ["run", server.url, "--requests", "20", "--rps", "100", "--cpus", CLIENT_CPU,
                "--group-by", "header:x-served-by"]
        good = cli(*base, "--slo", "group:alpha:p99<10s", "--slo", "group:alpha:errors==0",
                   "--slo", "group:alpha:error_rate<1%")
        missing = cli(*base, "--slo", "group:beta:p99<10s")
        tight = cli(*base, "--slo", "group:alpha:max<1ns")
    assert good.returncode == 0, good.stderr
    assert missing.returncode == 99 and "no data" in missing.stdout + missing.stderr
    assert tight.returncode == 99, tight.stdout


def test_a_group_rule_reads_only_group_figures() -> None:
    from nhbench.options import StopRule

    rule = StopRule.parse("group:login:p99<5ms")
    assert rule.group == "login" and rule.metric == "latency" and not rule.headline
    for bad in ("group:login:rps>10", "group:login:benchmark.http_2xx>1",
                "group:login:benchmark_http_client.request_to_response:p99<5ms"):
        with pytest.raises(ValueError, match="a group's rule"):
            StopRule.parse(bad)


def test_values_that_read_as_reserved_names_keep_their_own_groups() -> None:
    # A server answering the header's value "(none)", one answering "(other)" and one without
    # the header: the first two are values of their own (named with a backslash), never
    # counted into the buckets the names mean.
    with nhbench.TestServer(listen="127.0.0.1:0", cpus=SERVER_CPUS,
                            response_headers={"x-served-by": "(none)"}) as a, \
            nhbench.TestServer(listen="127.0.0.1:0", cpus=SERVER_CPUS,
                               response_headers={"x-served-by": "(other)"}) as b, \
            nhbench.TestServer(listen="127.0.0.1:0", cpus=SERVER_CPUS) as bare:
        endpoints = [f"127.0.0.1:{s.address[1]}" for s in (a, b, bare)]
        result = run(None, multi_target_endpoint=endpoints, multi_target_path="/",
                     connections=3, requests=60, rps=300, group_by="header:x-served-by",
                     slo=["group:\\(none):errors==0"])
        counts = [s.stats()["requests"] for s in (a, b, bare)]
    groups = by_name(result)
    assert counts == [20, 20, 20]
    assert {name: g.requests for name, g in groups.items()} == {
        "\\(none)": 20, "\\(other)": 20, "(none)": 20}
    assert result.groups is not None and result.groups.spread == 1.0
    assert result.check_slo("group:\\(none):errors==0")
    assert not result.check_slo("group:(other):errors==0")  # no such bucket: no data


@pytest.mark.parametrize("name", ["(none)", "(other)", " (other) "])
def test_an_entry_named_as_a_reserved_group_is_refused(tmp_path: Path, name: str) -> None:
    plugin = _plugin(tmp_path, [{"name": name, "request_method": "GET"}])
    p = cli("run", "http://127.0.0.1:9/", "--requests", "1",
            "--request-source-plugin-config", plugin)
    assert p.returncode == 2 and "is reserved" in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_a_rule_on_a_group_the_run_cannot_have_is_refused(tmp_path: Path) -> None:
    # Nothing listens on port 9: a refusal before the run is the only way to exit 2.
    plugin = _plugin(tmp_path, [{"name": "login", "request_method": "GET"},
                                {"name": "search", "request_method": "GET"}])
    base = ["run", "http://127.0.0.1:9/", "--requests", "1"]
    unknown = cli(*base, "--request-source-plugin-config", plugin,
                  "--slo", "group:logout:p99<1s")
    assert unknown.returncode == 2, (unknown.stdout, unknown.stderr)
    assert "'group:logout:p99<1s' names no group of the run (by request: 'login', " \
        "'search')" in unknown.stderr and len(unknown.stderr.strip().splitlines()) == 1
    ungrouped = cli(*base, "--slo", "group:login:p99<1s")
    assert ungrouped.returncode == 2 and "the run has no groups" in ungrouped.stderr
    with pytest.raises(nhbench.OptionsError, match="names no group"):
        nhbench.run("http://127.0.0.1:9/", requests=1, group_by="request",
                    slo=["group:GET /x:p99<1s"])


def test_live_progress_carries_the_groups() -> None:
    # The snapshots a run hands to on_progress (the live display's) count each value as it
    # goes; by the end they are the result's counts.
    seen: list[nhbench.Progress] = []
    with nhbench.TestServer(listen="127.0.0.1:0", cpus=SERVER_CPUS,
                            response_headers={"x-served-by": "alpha"}) as a, \
            nhbench.TestServer(listen="127.0.0.1:0", cpus=SERVER_CPUS,
                               response_headers={"x-served-by": "beta"}) as b:
        endpoints = [f"127.0.0.1:{a.address[1]}", f"127.0.0.1:{b.address[1]}"]
        result = run(None, multi_target_endpoint=endpoints, multi_target_path="/",
                     connections=2, duration="1.5s", rps=200, group_by="header:x-served-by",
                     on_progress=seen.append)
    final = by_name(result)
    live = [p for p in seen if p.groups]
    assert len(live) >= 3, len(seen)
    for earlier, later in zip(live, live[1:], strict=False):
        before = {g.name: g.requests for g in earlier.groups}
        after = {g.name: g.requests for g in later.groups}
        assert all(after.get(name, 0) >= n for name, n in before.items())
    last = {g.name: g for g in live[-1].groups}
    assert set(last) <= {"alpha", "beta"} and last, last
    for name, group in last.items():
        assert 0 < group.requests <= final[name].requests and group.errors == 0


def test_live_progress_names_planned_groups(tmp_path: Path) -> None:
    entries = [{"name": "login", "request_method": "GET"},
               {"name": "search", "request_method": "GET"}]
    seen: list[nhbench.Progress] = []
    with nhbench.TestServer(listen="127.0.0.1:0", cpus=SERVER_CPUS) as server:
        run(server.url, request_source_plugin_config=_plugin(tmp_path, entries),
            connections=1, duration="1s", rps=100, on_progress=seen.append)
    live = [p for p in seen if p.groups]
    assert live and [g.name for g in live[-1].groups] == ["login", "search"]


def test_a_groups_line_is_bounded_and_escapes_what_the_server_sent() -> None:
    from nhbench._live import GROUP_NAME_CHARS, SHOWN_GROUPS, format_groups

    hostile = [("\x9b31m\x1b[2J" + "v" * 120 + str(i), 100 - i, i % 3, None) for i in range(64)]
    line = format_groups([*hostile, ("(none)", 7, 7, 0.25)])
    assert "\x1b" not in line and "\x9b" not in line and "\\x9b31m\\x1b[2J" in line
    assert line.count(", ") == SHOWN_GROUPS and line.endswith("+57 more")
    assert len(line) < SHOWN_GROUPS * (GROUP_NAME_CHARS + 40)
    assert line.startswith("\\x9b31m") and " 100 (" in line


def test_the_live_display_shows_the_groups_line() -> None:
    import pty
    import subprocess
    import sys

    from test_live import _env, _read_pty

    with nhbench.TestServer(listen="127.0.0.1:0", cpus=SERVER_CPUS,
                            response_headers={"x-served-by": "alpha"}) as server:
        leader, follower = pty.openpty()
        env = _env()
        env.update(COLUMNS="160", LINES="40", TERM="xterm-256color")
        proc = subprocess.Popen(
            [sys.executable, "-m", "nhbench", "run", server.url, "--rps", "100",
             "--duration", "2s", "--group-by", "header:x-served-by"],
            stdin=subprocess.DEVNULL, stdout=follower, stderr=follower, env=env)
        os.close(follower)
        try:
            output = _read_pty(leader, proc, 60).decode("utf-8", "replace")
            assert proc.wait(timeout=30) == 0
        finally:
            os.close(leader)
            if proc.poll() is None:
                proc.kill()
    assert "remaining" in output and "groups: alpha " in output, output[-2000:]


@pytest.mark.parametrize("command", [
    ["sweep", "--rps", "10", "--max-rps", "20", "--step-rps", "10", "--stop-on-slo"],
    ["adapt", "--min-rps", "10", "--max-rps", "20", "--slo"],
])
def test_a_sweeps_rule_on_a_group_the_steps_cannot_have_is_refused(
        tmp_path: Path, command: list[str]) -> None:
    plugin = _plugin(tmp_path, [{"name": "login", "request_method": "GET"}])
    p = cli(command[0], "http://127.0.0.1:9/", *command[1:], "group:logout:p99<1s",
            "--request-source-plugin-config", plugin, "--out", str(tmp_path / "c"))
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "'group:logout:p99<1s' names no group of the run (by request: 'login')" \
        in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert not (tmp_path / "c").exists()


def _h2_groups(reply: Callable[[int], bytes]) -> dict[str, nhbench.GroupResult]:
    """Grouped by x-served-by against an h2c origin answering each stream with reply(stream)."""
    def handle(conn: socket.socket) -> None:
        def on_frame(kind: int, _flags: int, stream: int, _payload: bytes) -> None:
            if kind == h2.HEADERS:
                conn.sendall(reply(stream))

        h2.serve(conn, on_frame)

    with ScriptedOrigin(handler=handle) as origin:
        result = run(origin.url, protocol="http2", rps=40, duration=0.25, connections=1,
                     no_default_failure_predicates=True, group_by="header:x-served-by")
    c = result.counters
    assert c["benchmark.http_2xx"] == c["sequencer.released"] - c["upstream_rq_cancelled"] >= 1
    return by_name(result)


def _block(stream: int, status: bytes, served_by: bytes | None, end_stream: bool) -> bytes:
    block = h2.hpack_literal_name_index(8, status)  # ":status" is static-table entry 8
    if served_by is not None:
        block += h2.hpack_literal(b"x-served-by", served_by)
    return h2.frame(h2.HEADERS, h2.END_HEADERS | (h2.END_STREAM if end_stream else 0), stream, block)


@pytest.mark.parametrize(("reply", "expected"), [
    pytest.param(lambda s: _block(s, b"103", b"early", False) + _block(s, b"200", b"final", True),
                 "final", id="interim"),
    pytest.param(lambda s: _block(s, b"200", None, False) + h2.frame(h2.DATA, 0, s, b"ok")
                 + h2.frame(h2.HEADERS, h2.END_HEADERS | h2.END_STREAM, s,
                            h2.hpack_literal(b"x-served-by", b"trailer")),
                 "(none)", id="trailers"),
])
def test_h2_interim_response_and_trailers_do_not_choose_the_group(
        reply: Callable[[int], bytes], expected: str) -> None:
    # As on HTTP/1.1: the group is the final response's head's. A 103's field is not (the
    # final head begins the response afresh), nor is a field of the trailers.
    assert set(_h2_groups(reply)) == {expected}
