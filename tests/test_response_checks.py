"""Response checks (--check, docs/checks.md): evaluated by the C core's HTTP/1.1 session
against real servers, counted per check, a failed 2xx counted as an error in the one error
definition with its latency apart, --slo on a check, and refusals by name."""

from __future__ import annotations

import hashlib
import socket
import threading
from collections.abc import Iterator

import pytest

import nhbench
from nhbench._names import LATENCY_CHECK_FAILED, error_total
from nhbench.options import parse_checks
from tests.support.cli import nhbench_cli

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


class _SplitServer:
    """A raw HTTP/1.1 origin that writes each response in pieces, with a pause between, so
    that the client reads a header value and the body's needle split across reads."""

    PIECES = (b"HTTP/1.1 200 OK\r\nX-Sta", b"te: rea", b"dy-to-go\r\nContent-Length: 26\r\n\r\n",
              b"....the-ne", b"edle-is-here....")

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.responses = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._conn, args=(conn,), daemon=True).start()

    def _conn(self, conn: socket.socket) -> None:
        buf = b""
        with conn:
            while True:
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(4096)
                    if not data:
                        return
                    buf += data
                buf = buf.split(b"\r\n\r\n", 1)[1]
                for piece in self.PIECES:
                    conn.sendall(piece)
                    threading.Event().wait(0.003)
                self.responses += 1


def test_substrings_and_header_values_split_across_reads() -> None:
    origin = _SplitServer()
    try:
        result = nhbench.run(f"http://127.0.0.1:{origin.port}/", rps=50, duration="0.5s",
                             connections=1, check=["n=body ~ the-needle-is-here",
                                                   "h=header:x-state == ready-to-go",
                                                   "p=header:X-State ~ y-to-g",
                                                   "miss=body ~ needle-is-there"])
    finally:
        origin.sock.close()
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
    (["--h2", "--check", "status in 200"], "HTTP/1.1 only"),
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
