"""A hostile DNS server against DNS per connection (--dns-refresh connection,
csrc/client/dns.c): the answers each new connection gets are the attack. Each case must end
in counts that add up (every connection either resolved or failed by its cause), within the
run's bounds: no hang, no crash, no request lost from the accounting.

The server and the run in a mount namespace pointed at it: support/dns_server.py.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from support.dns_server import NAME, Dns, origin_url, served

pytestmark = [pytest.mark.hostile, pytest.mark.core]


def _counters(dns: Dns, url: str, *args: str, timeout: float = 60) -> tuple[int, dict[str, int]]:
    done = dns.run(url, "--dns-refresh", "connection", "--output-format", "json", *args,
                   timeout=timeout)
    assert done.returncode in (0, 1), done.stderr
    result = json.loads(done.stdout)["results"][-1]
    return done.returncode, {c["name"]: int(c["value"]) for c in result["counters"]}


def _dns_failures(c: dict[str, int]) -> int:
    return sum(c.get(f"dns.{cause}", 0) for cause in ("not_found", "try_again", "fail",
                                                        "timeout"))


def test_an_answer_too_large_for_udp_is_followed_over_tcp(dns: Dns, origins: Any) -> None:
    # 200 A records (3.2 KB): the UDP answer is truncated, the resolver asks again over TCP.
    # Which address each connection takes is the resolver's order (it sorts the answer).
    dns.script(["127.0.0.1"], ["127.0.0.1", "127.0.0.2"] * 100)
    before = served(origins)
    code, c = _counters(dns, origin_url(origins), "--dns-method", "rr",
                        "--max-requests-per-connection", "1", "--connections", "2",
                        "--rps", "200", "-n", "40")
    assert code == 0
    assert c["dns.resolved"] == c["upstream_cx_total"] == c["benchmark.http_2xx"] == 40
    assert sum(served(origins)) - sum(before) == 40


def test_answers_that_flap_between_a_name_and_none(dns: Dns, origins: Any) -> None:
    # Every other query NXDOMAIN: the connections that resolved carry the requests, the
    # others fail by their cause, and the two add up to the connections made.
    dns.script(["127.0.0.1"], *([["127.0.0.1"], "NXDOMAIN"] * 40))
    code, c = _counters(dns, origin_url(origins), "--max-requests-per-connection", "1",
                        "--connections", "1", "--rps", "100", "-n", "20",
                        "--no-default-failure-predicates")
    assert code == 0
    assert c["dns.resolved"] + c["dns.not_found"] == c["upstream_cx_total"]
    assert c["benchmark.http_2xx"] >= 1
    assert c["dns.not_found"] == c["upstream_cx_connect_fail"] >= 1
    assert c["benchmark.http_2xx"] + c["benchmark.pool_connection_failure"] == 20


def test_an_answer_naming_an_address_nothing_listens_on(dns: Dns, origins: Any) -> None:
    # The name resolved (no DNS failure): the connect fails, counted as a connect failure.
    dns.script(["127.0.0.1"], ["127.0.0.3"])
    code, c = _counters(dns, origin_url(origins), "--max-requests-per-connection", "1",
                        "--connections", "1", "--rps", "50", "-n", "5")
    assert code == 1
    assert c["dns.resolved"] == c["upstream_cx_connect_fail"] == c["upstream_cx_total"] >= 1
    assert _dns_failures(c) == 0
    assert "benchmark.http_2xx" not in c


def test_a_slow_resolver_at_the_end_of_the_run(dns: Dns, origins: Any) -> None:
    # Each answer takes 0.4 s and the run lasts 1 s: connections are still resolving when it
    # ends. The run ends all the same (the resolutions in flight are cancelled or their
    # answers dropped), with every connection accounted for.
    dns.script(["127.0.0.1"], ("DELAY", 0.4, ["127.0.0.1"]))
    started = time.monotonic()
    code, c = _counters(dns, origin_url(origins), "--max-requests-per-connection", "1",
                        "--connections", "4", "--rps", "20", "--duration", "1")
    assert time.monotonic() - started < 20
    assert code == 0
    assert c["dns.resolved"] >= 1
    assert c["dns.resolved"] + _dns_failures(c) <= c["upstream_cx_total"]
    assert c["benchmark.http_2xx"] <= c["dns.resolved"]


def test_a_resolver_that_never_answers_while_the_run_ends(dns: Dns, origins: Any) -> None:
    # No answer at all, and a --timeout longer than the run: the run's end closes the
    # connections that wait for their names; it must not wait for them to time out.
    dns.script(["127.0.0.1"], "DROP")
    started = time.monotonic()
    code, c = _counters(dns, origin_url(origins), "--connections", "2", "--rps", "10",
                        "--duration", "0.5", "--timeout", "30")
    # The resolver gives up after its own 1 s (resolv.conf: timeout:1 attempts:1) at most.
    assert time.monotonic() - started < 20
    assert code == 1
    assert c.get("dns.resolved", 0) == 0
    assert c["upstream_cx_total"] >= 1
    assert f"{NAME}" not in json.dumps(c)
