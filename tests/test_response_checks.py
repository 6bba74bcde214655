"""Response checks (--check, docs/checks.md): evaluated by the C core's HTTP/1.1, HTTP/2 and
HTTP/3 sessions against real servers (ours, nginx, aioquic), counted per check, a failed 2xx
counted as an error in the one error definition with its latency apart, a request source's
per-entry checks, the checks' counters in the timeline, the live counters, Prometheus and the
predicates, --slo on a check, and refusals by name."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.scripted_origin import ScriptedOrigin, read_request

import nhbench
from benchmarks.nginx_origin import BIG_SIZE, NginxOrigin
from nhbench._names import LATENCY_CHECK_FAILED, error_total
from nhbench.options import parse_checks
from tests.support.cli import cli_env, nhbench_cli
from tests.support.nginx import needs_nginx_and_openssl

pytest_plugins = ["pytester"]

ERROR_BODY = b'{"error":"injected"}'


@pytest.fixture(scope="module")
def faulty() -> Iterator[nhbench.TestServer]:
    """Our test server with 1 KiB bodies, one response in 100 (per worker) a 200 error body."""
    with nhbench.TestServer(error_body_every=100, response_body_size=1024) as server:
        yield server


def _run(server: nhbench.TestServer, *checks: str) -> tuple[nhbench.Result, int]:
    """The result and how many error bodies the server sent during it."""
    before = server.stats()["error_bodies"]
    result = nhbench.run(server.url, rps=1500, duration="1s", connections=3, check=list(checks))
    return result, server.stats()["error_bodies"] - before


def test_body_and_header_checks_fail_exactly_on_the_servers_error_bodies(
        faulty: nhbench.TestServer) -> None:
    result, injected = _run(faulty, "body_ok=body ~ aaaaaaaa", "hdr_ok=header:x-nhbench-error absent",
                  "status in 200..299", "body.size in 1024")
    c = result.counters
    answered = c["check.status.pass"] + c["check.status.fail"]
    assert injected > 0 and answered > 1000
    assert c["check.body_ok.fail"] == injected
    assert c["check.hdr_ok.fail"] == injected
    assert c["check.body_size.fail"] == injected
    assert c["check.status.fail"] == 0
    assert c["check.body_ok.pass"] == answered - injected
    # One error per failed 2xx, however many checks it failed; its latency kept apart.
    assert c["benchmark.check_failed"] == injected
    assert c["benchmark.http_2xx"] == answered - injected
    assert error_total(c) == injected
    assert result.stat(LATENCY_CHECK_FAILED).count == injected


def test_json_pointer_and_sha256_pass_exactly_on_the_error_bodies(
        faulty: nhbench.TestServer) -> None:
    digest = hashlib.sha256(ERROR_BODY).hexdigest()
    result, injected = _run(faulty, 'j=json:/error == "injected"', "e=json:/error exists",
                  f"d=body.sha256 == {digest}", "n=json:/nothing exists")
    c = result.counters
    assert injected > 0
    assert c["check.j.pass"] == c["check.e.pass"] == c["check.d.pass"] == injected
    assert c["check.n.pass"] == 0
    # Every response failed a check: none is a success.
    assert c["benchmark.http_2xx"] == 0


def test_no_checks_no_failed_check_statistic(faulty: nhbench.TestServer) -> None:
    result = nhbench.run(faulty.url, rps=200, duration="0.3s", connections=1)
    assert not any(name.startswith("check.") for name in result.counters)
    with pytest.raises(KeyError):
        result.stat(LATENCY_CHECK_FAILED)


# Each response in pieces, with a pause between, so that the client reads a header value and
# the body's needle split across reads.
_PIECES = (b"HTTP/1.1 200 OK\r\nX-Sta", b"te: rea", b"dy-to-go\r\nContent-Length: 26\r\n\r\n",
           b"....the-ne", b"edle-is-here....")


def _split_responses(conn: socket.socket) -> None:
    buf = b""
    while (got := read_request(conn, buf)) is not None:
        buf = got[1]
        for piece in _PIECES:
            conn.sendall(piece)
            time.sleep(0.003)


def test_substrings_and_header_values_split_across_reads() -> None:
    with ScriptedOrigin(handler=_split_responses) as origin:
        result = nhbench.run(origin.url, rps=50, duration="0.5s",
                             connections=1, check=["n=body ~ the-needle-is-here",
                                                   "h=header:x-state == ready-to-go",
                                                   "p=header:X-State ~ y-to-g",
                                                   "miss=body ~ needle-is-there"])
    c = result.counters
    answered = c["check.n.pass"] + c["check.n.fail"]
    assert answered >= 10
    assert c["check.n.pass"] == c["check.h.pass"] == c["check.p.pass"] == answered
    assert c["check.miss.fail"] == answered


def test_slo_on_a_check_exits_99(faulty: nhbench.TestServer) -> None:
    done = nhbench_cli("run", faulty.url, "--rps", "500", "--duration", "1s",
                       "--check", "clean=header:x-nhbench-error absent",
                       "--slo", "check:clean>=99.9%")
    assert done.returncode == 99, done.stderr
    assert "check:clean>=99.9%" in done.stderr
    passed = nhbench_cli("run", faulty.url, "--rps", "500", "--duration", "1s",
                         "--check", "clean=header:x-nhbench-error absent",
                         "--slo", "check:clean>=98%", "--slo", "error_rate<2%")
    assert passed.returncode == 0, passed.stderr


@pytest.mark.parametrize(("args", "words"), [
    (["--check", "body =~ /err/q"], "is not a flag"),
    (["--check", "status in 700"], "outside 100..599"),
    (["--check", "body ~ two words"], "quote it"),
    (["--check", "json:/a == {}"], "not an object or array"),
    (["--check", "a=status in 200", "--check", "a=body ~ x"], "taken by another check"),
    (["--grpc", "--check", "status in 200"], "not supported with grpc://"),
    (["--check", "a=status in 200", "--failure-predicate", "check.b.fail:0"],
     "no check's counter"),
    (["--failure-predicate", "check.b.fail:0"], "no check's counter"),
    (["--slo", "check:bad name>=1%"], "check:NAME"),
    (["--check", "ok=status in 200", "--slo", "check:other>=1%"], "names no --check"),
])
def test_refused_by_name_before_anything_is_sent(args: list[str], words: str) -> None:
    done = nhbench_cli("run", "http://127.0.0.1:9/", "--duration", "1s", *args)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], done.stderr
    assert "check" in lines[0] or "slo" in lines[0]


def test_unnamed_checks_get_unique_names() -> None:
    names = [c.name for c in parse_checks(["status in 200", "status == 201",
                                           "header:Content-Type ~ json"])]
    assert names == ["status", "status_2", "header_content-type"]


def test_marker_checks_keyword(pytester: pytest.Pytester, faulty: nhbench.TestServer) -> None:
    pytester.makepyfile(f"""
        import pytest

        @pytest.mark.nhbench_slo(checks={{"clean": "99.9%"}})
        def test_load(nhbench_run):
            nhbench_run("{faulty.url}", rps=300, duration="1s",
                        check=["clean=header:x-nhbench-error absent"])
    """)
    outcome = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    outcome.assert_outcomes(failed=1)
    assert "check:clean>=99.9%" in outcome.stdout.str()


# ---- HTTP/2 and HTTP/3: each stream judged with its own state ------------------------------

@pytest.mark.parametrize("protocol", ["h2c", "h2", "http3"])
def test_h2_and_h3_checks_fail_exactly_on_the_servers_error_bodies(protocol: str) -> None:
    # Many streams in flight on few connections: a state shared between streams would mix
    # one response's bytes into another's verdict, and the counts would not match.
    tls = protocol != "h2c"
    with nhbench.TestServer(error_body_every=37, response_body_size=1024, tls_self_signed=tls,
                            http3=protocol == "http3") as server:
        kw: dict[str, object] = {"cacert": server.ca_cert} if tls else {"h2c": True}
        if protocol != "h2c":
            kw["protocol"] = "http2" if protocol == "h2" else "http3"
        before = server.stats()["error_bodies"]
        result = nhbench.run(server.url, rps=2000, duration="1s", connections=2,
                             max_active_requests=64, check=[
                                 "body_ok=body ~ aaaaaaaa", "hdr_ok=header:x-nhbench-error absent",
                                 "size=body.size == 1024", "status in 200"], **kw)
        injected = server.stats()["error_bodies"] - before
    assert result.success, result.error
    c = result.counters
    answered = c["check.status.pass"] + c["check.status.fail"]
    assert injected > 10 and answered > 1500
    assert c["check.body_ok.fail"] == c["check.hdr_ok.fail"] == c["check.size.fail"] == injected
    assert c["check.status.fail"] == 0
    assert c["benchmark.check_failed"] == injected == result.stat(LATENCY_CHECK_FAILED).count
    assert c["benchmark.http_2xx"] == answered - injected
    assert error_total(c) == injected


def test_no_checks_over_h2_no_check_counters() -> None:
    with nhbench.TestServer(error_body_every=10) as server:
        result = nhbench.run(server.url, h2c=True, rps=300, duration="0.3s")
    assert result.counters["benchmark.http_2xx"] == 90
    assert not any(name.startswith("check.") for name in result.counters)


def _options_list(*entries: dict[str, object]) -> str:
    return json.dumps({
        "name": "nighthawk.in-line-options-list-request-source-plugin",
        "typed_config": {"options_list": {"options": list(entries)}}})


def _path(path: str, **more: object) -> dict[str, object]:
    return {"request_headers": [{"header": {"key": ":path", "value": path}}], **more}


@needs_nginx_and_openssl
def test_h2_per_entry_checks_against_nginx() -> None:
    # nginx answers / with 13 bytes and /big with 1 MiB: its access log counts each entry's
    # responses independently of the client.
    source = _options_list(
        _path("/", checks=["hello=body ~ \"hello, world\"", "bye=body ~ goodbye"]),
        _path("/big", checks=["body.size == 1048576"]))
    with NginxOrigin() as origin:
        mark = origin.mark()
        result = nhbench.run(origin.url("h2c"), h2c=True, rps=200, duration="1s",
                             request_source_plugin_config=source, check=["ok=status in 200"])
        lines = origin.since(mark)
    assert result.success, result.error
    c = result.counters
    small = sum(1 for line in lines if line[6] == "13")
    big = sum(1 for line in lines if line[6] == str(BIG_SIZE))
    assert small == big == 100 and len(lines) == 200
    # The run's check judges every response; an entry's, only that entry's.
    assert c["check.ok.pass"] == 200
    assert c["check.hello.pass"] == c["check.bye.fail"] == small
    assert c["check.e1_body_size.pass"] == big
    # Each / failed "bye": an error; /big passed all of its checks.
    assert c["benchmark.check_failed"] == small
    assert c["benchmark.http_2xx"] == big


@pytest.mark.skipif(importlib.util.find_spec("aioquic") is None or shutil.which("openssl") is None,
                    reason="aioquic and the openssl command are needed")
def test_h3_checks_against_aioquic(tmp_path: Path) -> None:
    from tests.test_h3 import SIZE, H3Server, make_certs

    certs = make_certs(tmp_path)
    source = _options_list(
        _path("/fields/2/5", checks=["f=header:x-f1 == vvvvv"]),
        # Trailers are not headers a check looks at.
        _path("/trailers/2/5", checks=["t=header:x-f1 absent"]),
        _path("/status/503", checks=["s=status == 503"]))
    server = H3Server(certs)
    try:
        result = nhbench.run(server.url(), protocol="http3", cacert=certs["ca"], rps=150,
                             duration="1s", no_default_failure_predicates=True,
                             request_source_plugin_config=source,
                             check=["ok=status in 200..299", f"size=body.size == {SIZE}",
                                    "x=body ~ xxxx", "srv=header:server == aioquic-test"])
        stats = server.stop()
    finally:
        server.kill()
    c = result.counters
    assert stats["requests"] == 150
    assert c["check.f.pass"] == c["check.t.pass"] == c["check.s.pass"] == 50
    assert c["check.f.fail"] == c["check.t.fail"] == c["check.s.fail"] == 0
    assert c["check.size.pass"] == c["check.x.pass"] == c["check.srv.pass"] == 150
    # The 503s fail the status check but stay in their class: no failed-check error.
    assert c["check.ok.fail"] == c["benchmark.http_5xx"] == 50
    assert c["benchmark.check_failed"] == 0 and c["benchmark.http_2xx"] == 100


# ---- a request source's per-entry checks ----------------------------------------------------

def test_per_entry_checks_over_http1() -> None:
    # One connection, so one server worker answers /a and /b in turn; every 7th of its
    # responses is an error body, so they fall on /a and /b alternately.
    source = _options_list(_path("/a", checks=["clean=header:x-nhbench-error absent"]),
                           _path("/b"))
    with nhbench.TestServer(error_body_every=7) as server:
        result = nhbench.run(server.url, rps=1000, duration="1s", connections=1,
                             request_source_plugin_config=source)
        injected = server.stats()["error_bodies"]
    c = result.counters
    # Entry /a is judged (half the requests), /b is not: only /a's error bodies are caught.
    assert c["check.clean.pass"] + c["check.clean.fail"] == 500
    assert injected == 1000 // 7
    assert abs(2 * c["check.clean.fail"] - injected) <= 1
    # /b's error bodies are 200s no check judged: successes.
    assert c["benchmark.check_failed"] == c["check.clean.fail"]
    assert c["benchmark.http_2xx"] == 1000 - c["check.clean.fail"]


@pytest.mark.parametrize(("entries", "args", "words"), [
    ([_path("/", checks=["status in 700"])], [], "entry 0: check 'status in 700'"),
    ([_path("/", checks=["a=status in 200"])], ["--check", "a=body ~ x"], "taken by --check"),
    ([_path("/", checks=["a=status in 200"]), _path("/", checks=["a=status in 201"])], [],
     "taken by entry 0"),
    ([_path("/", checks="status in 200")], [], "must be a list"),
    ([_path("/", checks=[f"c{i}=status in 200" for i in range(33)])], [], "at most 32"),
    ([_path("/", checks=["status in 200"])], ["--grpc"], "not supported with grpc://"),
])
def test_entry_checks_refused_by_name(entries: list[dict[str, object]], args: list[str],
                                      words: str) -> None:
    done = nhbench_cli("run", "http://127.0.0.1:9/", "--duration", "1s",
                       "--request-source-plugin-config", _options_list(*entries), *args)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], done.stderr


def test_har_entries_carry_checks(faulty: nhbench.TestServer, tmp_path: Path) -> None:
    har = tmp_path / "rec.har"
    har.write_text(json.dumps({"log": {"entries": [
        {"request": {"method": "GET", "url": "http://x/one", "headers": []},
         "_checks": ["one=body ~ aaaa"]},
        {"request": {"method": "GET", "url": "http://x/two", "headers": []}},
    ]}}))
    result = nhbench.run(faulty.url, rps=400, duration="0.5s", replay=str(har))
    c = result.counters
    assert c["check.one.pass"] + c["check.one.fail"] == 100


# ---- the checks' counters everywhere counters go ----------------------------------------------

def test_check_counters_in_the_timeline_and_the_live_counters(faulty: nhbench.TestServer) -> None:
    seen: list[int] = []

    def on_progress(progress: nhbench.Progress) -> None:
        seen.append(progress.counters.get("check.clean.fail", -1))

    result = nhbench.run(faulty.url, rps=1000, duration="1s", stats_interval="200ms",
                         check=["clean=header:x-nhbench-error absent"], on_progress=on_progress)
    c = result.counters
    assert c["check.clean.fail"] > 0
    # The intervals' growth adds up to the run's counts, check by check.
    for name in ("check.clean.pass", "check.clean.fail"):
        assert sum(r.counters.get(name, 0) for r in result.timeline) == c[name]
    assert any(r.counters.get("check.clean.fail", 0) > 0 for r in result.timeline)
    # The live snapshots carry them too, growing.
    assert seen and min(seen) >= 0 and seen == sorted(seen) and seen[-1] > 0


def test_failure_predicate_on_a_check_counter(faulty: nhbench.TestServer) -> None:
    done = nhbench_cli("run", faulty.url, "--rps", "500", "--duration", "3s",
                       "--check", "clean=header:x-nhbench-error absent",
                       "--failure-predicate", "check.clean.fail:0", "--output-format", "json")
    result = nhbench.Result.model_validate_json(done.stdout)
    # The first error body fails the run: long before the 1500 requests of 3 s.
    assert result.terminated_by == "failure_predicate:check.clean.fail", done.stderr
    assert result.counters["check.clean.fail"] >= 1
    assert result.counters["benchmark.http_2xx"] < 1400
    # A predicate that never fires is no failure.
    done = nhbench_cli("run", faulty.url, "--rps", "200", "--duration", "0.5s",
                       "--check", "clean=header:x-nhbench-error absent",
                       "--failure-predicate", "check.clean.pass:1000000")
    assert done.returncode == 0, done.stderr


def test_prometheus_has_the_checks_counters(faulty: nhbench.TestServer) -> None:
    pytest.importorskip("prometheus_client")
    proc = subprocess.Popen(
        [sys.executable, "-m", "nhbench", "run", faulty.url, "--rps", "500", "--duration",
         "2s", "--prometheus-listen", "127.0.0.1:0", "--check",
         "clean=header:x-nhbench-error absent", "--output-format", "json"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=cli_env())
    fails: list[float] = []
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        found = re.search(r"prometheus metrics on (http://127\.0\.0\.1:\d+/metrics)", first)
        assert found, first
        while proc.poll() is None and len(fails) < 30:
            try:
                with urllib.request.urlopen(found.group(1), timeout=5) as response:
                    text = response.read().decode()
            except OSError:
                break
            m = re.search(r'^nhbench_check_total\{check="clean",result="fail"\} (\S+)$', text, re.M)
            if m is not None:
                fails.append(float(m.group(1)))
                assert re.search(r'^nhbench_check_total\{check="clean",result="pass"\} ', text,
                                 re.M)
            time.sleep(0.1)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert len(fails) >= 3 and fails == sorted(fails) and fails[-1] > 0, fails
    assert nhbench.Result.model_validate_json(out).counters["check.clean.fail"] >= fails[-1]


def test_adapt_rule_on_a_checks_pass_share(tmp_path: Path) -> None:
    # A quarter of the responses are error bodies: a 70 % pass share holds at every rate, a
    # 90 % one fails even at --min-rps.
    check = ["clean=header:x-nhbench-error absent"]
    with nhbench.TestServer(error_body_every=4) as server:
        held = nhbench.adapt(server.url, slo=["check:clean>=70%"], min_rps=50, max_rps=100,
                             duration="0.3s", check=check, out=tmp_path / "held",
                             captures=False, facts=False)
        broken = nhbench.adapt(server.url, slo=["check:clean>=90%"], min_rps=50,
                               max_rps=100, duration="0.3s", check=check,
                               out=tmp_path / "broken", captures=False, facts=False)
    assert held.reason == "max-rps passed" and held.highest_passing_rps == 100
    assert broken.reason == "min-rps failed" and broken.exit_status == 99
    failing = broken.lowest_failing
    assert failing is not None and failing.checks[0].value is not None
    assert 0.7 <= failing.checks[0].value <= 0.8
    # A rule on a check the run does not have is refused before any step.
    with pytest.raises(nhbench.OptionsError, match="names no check of the run"):
        nhbench.adapt("http://127.0.0.1:9/", slo=["check:other>=90%"], check=check,
                      out=tmp_path / "none", captures=False, facts=False)
    assert not (tmp_path / "none").exists()


@pytest.mark.parametrize("protocol", ["http1", "h2c", "http3"])
def test_checks_groups_and_streaming_statistics_together(protocol: str) -> None:
    # Each of checks, grouping by a header and streaming statistics replaces the sessions'
    # field and body callbacks when it is on alone; on together, each must still see every
    # response: the checks' failures equal the server's error bodies, the one header value
    # groups every response, and every response has its events counted.
    from nhbench._names import EVENTS_PER_RESPONSE
    with nhbench.TestServer(error_body_every=13, response_body_size=1024,
                            response_headers={"x-served-by": "alpha"},
                            tls_self_signed=protocol == "http3",
                            http3=protocol == "http3") as server:
        kw: dict[str, object] = {"h2c": True} if protocol == "h2c" else {}
        if protocol == "http3":
            kw.update(protocol="http3", cacert=server.ca_cert)
        before = server.stats()["error_bodies"]
        result = nhbench.run(server.url, rps=1000, duration="1s", connections=2,
                             group_by="header:x-served-by", stream_stats=True, check=[
                                 "body_ok=body ~ aaaaaaaa", "re_ok=body =~ /a{8}/",
                                 "hdr_ok=header:x-nhbench-error absent"], **kw)
        injected = server.stats()["error_bodies"] - before
    assert result.success, result.error
    c = result.counters
    answered = c["check.body_ok.pass"] + c["check.body_ok.fail"]
    assert injected > 10 and answered > 500
    assert c["check.body_ok.fail"] == c["check.re_ok.fail"] == c["check.hdr_ok.fail"] == injected
    assert result.groups is not None
    groups = {g.name: g.requests for g in result.groups.groups}
    assert groups == {"alpha": answered}, groups
    assert result.stat(EVENTS_PER_RESPONSE).count == answered
