"""Regular-expression response checks (``body =~ /RE/``, ``header:NAME =~ /RE/``,
docs/checks.md), evaluated by the C core on Vectorscan's streaming mode against real servers:
the failure counts equal the test server's count of error bodies exactly, a match split across
reads and chunk boundaries (and one anchored at the body's end) is found, and what Vectorscan
refuses, or a malformed /RE/, is refused by name with exit 2 before anything is sent."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
from support.scripted_origin import ScriptedOrigin, read_request

import nhbench
from nhbench.options import parse_checks
from tests.support.cli import nhbench_cli


@pytest.fixture(scope="module")
def faulty() -> Iterator[nhbench.TestServer]:
    """Our test server with 1 KiB bodies of 'a', one response in 50 (per worker) a 200 error
    body ``{"error":"injected"}`` with ``x-nhbench-error: 1``."""
    with nhbench.TestServer(error_body_every=50, response_body_size=1024) as server:
        yield server


def test_regex_verdicts_equal_the_servers_error_bodies(faulty: nhbench.TestServer) -> None:
    before = faulty.stats()["error_bodies"]
    result = nhbench.run(faulty.url, rps=1500, duration="1s", connections=3, check=[
        'err=body =~ /"error"\\s*:\\s*"inj/',   # passes on the error bodies only
        "clean=body =~ /^a+$/",                # the normal body, whole: fails on them
        "ci=body =~ /\"ERROR\"/i",             # caseless
        "hdr=header:X-Nhbench-Error =~ /^1$/",  # a header value, anchored both ends
    ])
    injected = faulty.stats()["error_bodies"] - before
    c = result.counters
    answered = c["check.err.pass"] + c["check.err.fail"]
    assert injected > 0 and answered > 1000
    assert c["check.err.pass"] == c["check.ci.pass"] == c["check.hdr.pass"] == injected
    assert c["check.clean.fail"] == injected
    assert c["check.clean.pass"] == answered - injected
    # Every response failed some check (err/ci/hdr on normal ones, clean on error ones).
    assert c["benchmark.check_failed"] == answered


# A chunked response written in pieces with a pause between, so that the header value and
# the body's matches are split by reads, by chunk boundaries and by both.
_CHUNKED_PIECES = (b"HTTP/1.1 200 OK\r\nX-Ver", b"sion: v12",
                   b".7\r\nTransfer-Encoding: chunked\r\n\r\n",
                   b"9\r\n....the-n\r\n", b"5\r\neeedl\r\n", b"3\r\ne-i\r\n",
                   b"c\r\ns-here.done.\r\n", b"0\r\n\r\n")


def _chunked_split(conn: socket.socket) -> None:
    buf = b""
    while (got := read_request(conn, buf)) is not None:
        buf = got[1]
        for piece in _CHUNKED_PIECES:
            conn.sendall(piece)
            time.sleep(0.003)


def test_matches_split_across_reads_and_chunks_are_found() -> None:
    with ScriptedOrigin(handler=_chunked_split) as origin:
        result = nhbench.run(origin.url, rps=50, duration="0.5s",
                             connections=1, check=[
                                 "n=body =~ /the-ne+dle-is-h.re/",
                                 "end=body =~ /done\\.$/",        # needs the body's end
                                 "v=header:x-version =~ /^v[0-9]+\\.[0-9]+$/",
                                 "miss=body =~ /needle-is-there/",
                                 "notlast=body =~ /here$/",
                             ])
    c = result.counters
    answered = c["check.n.pass"] + c["check.n.fail"]
    assert answered >= 10
    assert c["check.n.pass"] == c["check.end.pass"] == c["check.v.pass"] == answered
    assert c["check.miss.fail"] == c["check.notlast.fail"] == answered


def test_regex_checks_parse_to_the_cores_table() -> None:
    body, header = parse_checks(["b=body =~ /a.b/is", "header:X-A =~ /^v\\d+$/m"])
    assert (body.kind, body.text, body.value) == ("body_re", b"a.b", b"is")
    assert (header.name, header.kind, header.header, header.text, header.value) == \
        ("header_x-a", "header_re", b"x-a", b"^v\\d+$", b"m")
    # The last '/' ends the pattern: a '/' inside needs no escape.
    assert parse_checks(["body =~ /a/b/"])[0].text == b"a/b"


@pytest.fixture
def silent_origin() -> Iterator[tuple[int, list[int]]]:
    """A listening socket that counts the connections made to it: a refused run makes none."""
    sock = socket.create_server(("127.0.0.1", 0))
    accepted: list[int] = []

    def accept_main() -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            accepted.append(1)
            conn.close()

    threading.Thread(target=accept_main, daemon=True).start()
    try:
        yield sock.getsockname()[1], accepted
    finally:
        sock.close()


@pytest.mark.parametrize(("check", "words"), [
    # Malformed, refused by the option parser.
    ("body =~ /err/x", "'x' is not a flag"),
    ("body =~ err", "written /RE/"),
    ("body =~ //", "is empty"),
    ("status =~ /200/", "applies to body or header:NAME"),
    ("body =~ /" + "a" * 257 + "/", "over 256 bytes"),
    # Well formed, refused by Vectorscan when the core compiles it at run creation.
    ("r=body =~ /(a+)\\1/", "Vectorscan refused the regular expression"),
    ("e=body =~ /a*/", "Vectorscan refused the regular expression"),
    ("l=header:x-a =~ /(?<=ab)c/", "Vectorscan refused the regular expression"),
    # Would take Vectorscan minutes to compile (repeat counts past the documented bound).
    ("big=body =~ /a.{30000}b.{30000}c.{30000}d.{30000}e/s", "repeat counts add up to 120000"),
    ("nest=body =~ /((ab|cd){40}){40}x/", "add up to 1600"),
])
def test_refused_by_name_before_anything_is_sent(
        check: str, words: str, silent_origin: tuple[int, list[int]]) -> None:
    port, accepted = silent_origin
    done = nhbench_cli("run", f"http://127.0.0.1:{port}/", "--duration", "1s", "--check", check)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], done.stderr
    # Named as the user wrote it, not by the core's index.
    assert "check" in lines[0] and "checks[" not in lines[0], lines[0]
    assert accepted == []
