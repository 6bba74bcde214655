"""Hostile input against the regular-expression checks (``=~ /RE/``, csrc/client/check_regex.c):

* patterns that make a backtracking engine exponential (``(a|aa)*b``, ``(a+)+c``) or large
  (an alternation of 40 words), over bodies of 256 KiB of the one letter they loop on, in a
  closed loop: each response is judged, and as many are answered per second as with a plain
  substring check, within a wide ratio (Vectorscan matches in linear time; a backtracking
  engine would not answer one);
* a hostile origin (tests/hostile/test_check_attacks.py) writing one byte per read, a thousand
  headers of the checked name, a value over the 256 bytes a header check keeps, trailing blanks
  (ignored up to 64, as they come), and a match that only the body's end completes.

What must hold: the run ends normally, pass + fail of each check = responses, the verdicts are
the right ones.

And patterns whose compile is the attack: within every cheap bound (256 bytes, repeat counts at
most 1000, 32 checks), 32 alternations repeated through bounded gaps take Vectorscan most of a
minute of CPU. The compile runs in a child process with a CPU and a memory limit
(csrc/client/check_regex.c): the run is refused by name, exit 2, well before that, and nothing
is sent.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from support.cli import nhbench_cli as cli

import nhbench
from tests.hostile.test_check_attacks import _judge, _response

pytestmark = [pytest.mark.hostile, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def big_a() -> Iterator[nhbench.TestServer]:
    """Our test server answering 256 KiB bodies of 'a'."""
    with nhbench.TestServer(response_body_size=262144) as server:
        yield server


def _answered(server: nhbench.TestServer, check: str) -> int:
    result = nhbench.run(server.url, rps=0, duration="1s", connections=2, check=[f"c={check}"])
    c = result.counters
    answered = c["check.c.pass"] + c["check.c.fail"]
    # Every one fails (there is no b, c or word in a body of a's), and is judged once.
    assert c["check.c.fail"] == answered == c["benchmark.check_failed"], c
    return answered


WORDS = "|".join(f"w{i:02d}" for i in range(40))


@pytest.mark.parametrize("pattern", ["(a|aa)*b", "(a+)+c", "^(a|a?)+z", f"({WORDS})+x"])
def test_pathological_patterns_cost_linear_time(big_a: nhbench.TestServer, pattern: str) -> None:
    baseline = _answered(big_a, "body ~ bbbb")
    regex = _answered(big_a, f"body =~ /{pattern}/")
    assert baseline >= 50
    assert regex * 5 >= baseline, (pattern, regex, baseline)


@pytest.mark.parametrize(("case", "response", "checks", "passing", "piece"), [
    ("one byte per read", _response([b"X-State: ready-to-go"], b"....the-needle...."),
     ["n=body =~ /the-ne+dle\\.+$/", "h=header:x-state =~ /^ready-to-go$/",
      "no=body =~ /needle$/"], {"n": True, "h": True, "no": False}, 1),
    ("a thousand headers of the checked name", _response(
        [b"X-Many: v%d" % i for i in range(900)], b"ok"),
     ["last=header:x-many =~ /^v899$/", "none=header:x-many =~ /^v900$/"],
     {"last": True, "none": False}, None),
    ("trailing blanks, one byte per read", _response([b"X-State: ready \t  "], b"ok"),
     ["h=header:x-state =~ /^ready$/", "b=header:x-state =~ /y\\s/"],
     {"h": True, "b": False}, 1),
    ("more than 64 trailing blanks", _response([b"X-State: ready" + b" " * 70], b"ok"),
     ["six=header:x-state =~ /^ready {6}$/", "seven=header:x-state =~ /y {7}/"],
     {"six": True, "seven": False}, None),
    ("a value over 256 bytes", _response([b"X-Long: " + b"x" * 300 + b"END"], b"ok"),
     ["tail=header:x-long =~ /x{300}END$/", "whole=header:x-long =~ /^x+END$/"],
     {"tail": True, "whole": True}, None),
    ("a match across chunk boundaries that the end completes",
     _response([], b"", chunks=[b"aaaa-ne", b"ed", b"le-bb", b"bb"]),
     ["n=body =~ /-needle-b{4}$/", "cut=body =~ /-needle-b{5}/"], {"n": True, "cut": False},
     None),
])
def test_hostile_responses(case: str, response: bytes, checks: list[str],
                           passing: dict[str, bool], piece: int | None) -> None:
    c = _judge(response, checks, piece)
    for name, ok in passing.items():
        assert c[f"check.{name}.{'pass' if ok else 'fail'}"] == c["answered"], (case, name, c)


# Alternations of prefixes repeated through bounded gaps: 30 * 32 = 960 repeats, under the
# bound of 1000, 50 bytes; compiled 32 at a time they took 46 s of one CPU before the limit.
SLOW = "(?:a|ab|abc|abcd)(?:.{0,30}(?:a|ab|abc|abcd)){30}"


def test_a_compile_past_the_cpu_limit_is_refused_by_name() -> None:
    with nhbench.TestServer("127.0.0.1:0") as server:
        checks = [f"--check=c{i}=body =~ /{SLOW}{i}/" for i in range(32)]
        started = time.monotonic()
        p = cli("run", server.url, "--requests", "1", *checks, timeout=100)
        took = time.monotonic() - started
        served = server.stats()["requests"]
    assert p.returncode == 2, (p.returncode, p.stderr[-400:])
    assert "compiling the regular expressions took over 5 s of CPU" in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert served == 0
    # The limit is CPU seconds: a loaded machine stretches them, but not to the 46 s of CPU
    # the compile needs.
    assert took < 90, took


def test_patterns_within_the_limits_still_compile_and_judge(big_a: nhbench.TestServer) -> None:
    # The same shape, once: about a second of compile, under the limit; every body of a's
    # has the a's the pattern wants and passes.
    result = nhbench.run(big_a.url, requests=3, check=[f"c=body =~ /{SLOW}/"])
    assert result.counters["check.c.pass"] == 3, result.counters
