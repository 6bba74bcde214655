"""DNS per connection (--dns-refresh connection, docs/engine.md "DNS per connection"): every
new connection resolves the host again, through the system's resolver, against a real DNS
server whose answers the tests script (support/dns_server.py), and two real origins.
"""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support.cli import nhbench_cli
from support.dns_server import NAME, Answer, Dns, origin_url, served

pytestmark = pytest.mark.core


def _result(done: subprocess.CompletedProcess[str]) -> tuple[dict[str, int], dict[str, Any]]:
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)["results"][-1]
    counters = {c["name"]: int(c["value"]) for c in result["counters"]}
    statistics = {s["id"]: s for s in result["statistics"]}
    return counters, statistics


# Every request on a new connection, a fixed count: the connections are the requests.
ONE_PER_CONNECTION = ("--max-requests-per-connection", "1", "--connections", "2", "--rps", "200",
                      "-n", "40", "--output-format", "json")


def test_each_new_connection_resolves_and_the_phase_counts_it(dns: Dns, origins: Any) -> None:
    dns.script(["127.0.0.1"])
    before = served(origins)
    counters, statistics = _result(dns.run(origin_url(origins), "--dns-refresh", "connection",
                                           *ONE_PER_CONNECTION))
    connections = counters["upstream_cx_total"]
    assert connections == counters["benchmark.http_2xx"] == 40
    assert counters["dns.resolved"] == connections
    phase = statistics["benchmark_http_client.dns"]
    assert int(phase["count"]) == connections
    assert int(statistics["benchmark_http_client.connect"]["count"]) == connections
    # The server saw one A query per connection, and one from the run's start (which
    # refuses a name that does not resolve before anything is sent).
    assert len(dns.given) == connections + 1
    assert [a - b for a, b in zip(served(origins), before, strict=True)] == [40, 0]
    # Each request waited for its connection: its name's resolution and then its connect,
    # both inside its queue_to_connect (nanoseconds of rounding per mean allowed).
    total = {name: float(statistics[f"benchmark_http_client.{name}"]["mean"].rstrip("s"))
             * connections for name in ("queue_to_connect", "dns", "connect")}
    assert total["queue_to_connect"] >= total["dns"] + total["connect"] - 1e-9 * connections


@pytest.mark.parametrize("protocol", ["--h2", "--h3"])
def test_multiplexed_protocols_resolve_per_connection(dns: Dns, protocol: str) -> None:
    # HTTP/2 (h2c) and HTTP/3 (QUIC: the address goes to the UDP socket's connect) alike.
    import nhbench

    dns.script(["127.0.0.1"])
    h3 = protocol == "--h3"
    with nhbench.TestServer(listen="127.0.0.1:0", http3=h3, tls_self_signed=h3) as origin:
        url = f"{'https' if h3 else 'http'}://{NAME}:{origin.address[1]}/"
        extra = ("--insecure",) if h3 else ()
        counters, statistics = _result(dns.run(url, "--dns-refresh", "connection", protocol,
                                               *extra, *ONE_PER_CONNECTION))
    assert counters["benchmark.http_2xx"] == 40
    assert counters["dns.resolved"] == counters["upstream_cx_total"] >= 1
    assert int(statistics["benchmark_http_client.dns"]["count"]) == counters["dns.resolved"]


def test_resolved_once_without_the_option(dns: Dns, origins: Any) -> None:
    dns.script(["127.0.0.1"])
    counters, statistics = _result(dns.run(origin_url(origins), *ONE_PER_CONNECTION))
    assert counters["upstream_cx_total"] == 40
    assert "dns.resolved" not in counters
    assert "benchmark_http_client.dns" not in statistics
    assert len(dns.given) == 1


def test_answers_that_change_between_connections_are_followed(dns: Dns, origins: Any) -> None:
    # The run's start gets 127.0.0.1; after it the answers alternate.
    dns.script(*([["127.0.0.1"]] + [["127.0.0.2"], ["127.0.0.1"]] * 30))
    before = served(origins)
    counters, _ = _result(dns.run(origin_url(origins), "--dns-refresh", "connection",
                                  *ONE_PER_CONNECTION))
    assert counters["benchmark.http_2xx"] == 40
    given = dns.given[1:]
    assert len(given) == 40
    got = [a - b for a, b in zip(served(origins), before, strict=True)]
    # Each origin served exactly the connections whose answer named it.
    assert got == [given.count(["127.0.0.1"]), given.count(["127.0.0.2"])] == [20, 20]


@pytest.mark.parametrize(("method", "expect"), [("rr", [20, 20]), ("first", [40, 0])])
def test_dns_method_applies_to_each_answer(dns: Dns, origins: Any, method: str,
                                           expect: list[int]) -> None:
    dns.script(["127.0.0.1", "127.0.0.2"])
    before = served(origins)
    counters, _ = _result(dns.run(origin_url(origins), "--dns-refresh", "connection",
                                  "--dns-method", method, *ONE_PER_CONNECTION))
    assert counters["dns.resolved"] == counters["upstream_cx_total"] == 40
    got = [a - b for a, b in zip(served(origins), before, strict=True)]
    if method == "first":
        # The resolver's order decides which is first (RFC 6724 sorting); one takes all.
        assert sorted(got) == [0, 40]
    else:
        assert got == expect


@pytest.mark.parametrize(("answer", "cause"), [("NXDOMAIN", "dns.not_found"),
                                               ([], "dns.not_found"),
                                               ("SERVFAIL", "dns.try_again")])
def test_failures_count_by_cause(dns: Dns, origins: Any, answer: Answer, cause: str) -> None:
    # The start resolves; every connection's resolution then fails.
    dns.script(["127.0.0.1"], answer)
    done = dns.run(origin_url(origins), "--dns-refresh", "connection", "--max-requests-per-connection",
                   "1", "--connections", "1", "--rps", "20", "-n", "5", "--output-format", "json")
    assert done.returncode == 1, done.stderr  # no request succeeded
    result = json.loads(done.stdout)["results"][-1]
    counters = {c["name"]: int(c["value"]) for c in result["counters"]}
    failed = counters[cause]
    assert failed >= 1
    assert counters["upstream_cx_connect_fail"] == failed == counters["upstream_cx_total"]
    assert counters.get("dns.resolved", 0) == 0
    assert counters["benchmark.pool_connection_failure"] >= 1
    assert "benchmark.http_2xx" not in counters
    assert f"DNS: {NAME}" in done.stdout + done.stderr


def test_a_resolver_that_does_not_answer_is_a_dns_timeout(dns: Dns, origins: Any) -> None:
    dns.script(["127.0.0.1"], "DROP")
    done = dns.run(origin_url(origins), "--dns-refresh", "connection", "--connections", "1",
                   "--rps", "10", "-n", "2", "--timeout", "0.2", "--output-format", "json")
    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)["results"][-1]
    counters = {c["name"]: int(c["value"]) for c in result["counters"]}
    assert counters["dns.timeout"] >= 1
    assert counters["dns.timeout"] == counters["upstream_cx_connect_timeout"]
    assert counters.get("dns.resolved", 0) == 0


@pytest.mark.parametrize(("args", "message"), [
    (("http://127.0.0.1:1/",), "--dns-refresh: the host 127.0.0.1 is an IP address"),
    (("http://[::1]:1/",), "--dns-refresh: the host ::1 is an IP address"),
    (("http://localhost:1/", "--resolve", "127.0.0.1"),
     "--dns-refresh: mutually exclusive with --resolve"),
    (("http://localhost:1/", "--unix-socket", "{sock}"),
     "--dns-refresh: mutually exclusive with --unix-socket"),
    (("http://localhost:1/", "--proxy", "http://127.0.0.1:1"),
     "--proxy: mutually exclusive with --dns-refresh"),
    (("--multi-target-endpoint", "localhost:1", "--multi-target-path", "/"),
     "--dns-refresh: mutually exclusive with --multi-target-endpoint"),
])
def test_refused_by_name_where_there_is_nothing_to_resolve(args: tuple[str, ...], message: str,
                                                           tmp_path: Path) -> None:
    with socket.socket(socket.AF_UNIX) as unix:
        unix.bind(str(tmp_path / "s"))
        unix.listen()
        args = tuple(a.replace("{sock}", str(tmp_path / "s")) for a in args)
        done = nhbench_cli("run", "--dns-refresh", "connection", "-n", "1", *args)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert done.stdout == ""
