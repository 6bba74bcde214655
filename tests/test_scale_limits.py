"""The two limits a big connection count meets first (docs/benchmarks.md "Scale"):

* the descriptor limit: a run (and ``nhbench server``) raises its soft RLIMIT_NOFILE to the
  hard one, and a run whose connections cannot all be open under it is refused by name
  before anything is sent (exit 2; `OptionsError` from Python);
* the ports of one source address: ``--source-address`` takes several addresses, spreads
  the connections over them in turn, and binds with IP_BIND_ADDRESS_NO_PORT, so that the
  kernel picks each port per destination at connect time.

Real processes throughout: the CLI in child processes whose limits are set by preexec_fn,
our test server in its own process (its admin counters say what reached it), ``ss`` for the
source addresses the connections had, and a network namespace (``unshare -rn``) where the
ephemeral port range can be narrowed to a few ports.
"""

from __future__ import annotations

import json
import re
import resource
import shutil
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.cli import cli_env

import nhbench

pytestmark = pytest.mark.core


@pytest.fixture(scope="module")
def server() -> Iterator[nhbench.TestServer]:
    with nhbench.TestServer(subprocess=True, admin="127.0.0.1:0") as srv:
        yield srv


def requests_seen(server: nhbench.TestServer) -> tuple[int, int]:
    """The server's request and connection totals, from its admin endpoint."""
    with urllib.request.urlopen(server.admin_url, timeout=10) as answer:
        stats = json.load(answer)
    return int(stats["requests"]), int(stats["connections_total"])


def limits(soft: int, hard: int | None) -> Callable[[], None]:
    """A preexec_fn: the child's RLIMIT_NOFILE (hard None: left as it is)."""
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE,
                           (soft, hard if hard is not None else resource.getrlimit(
                               resource.RLIMIT_NOFILE)[1]))
    return apply


def nhbench_limited(args: list[str], soft: int, hard: int | None,
                    timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nhbench", *args], capture_output=True,
                          text=True, env=cli_env(), preexec_fn=limits(soft, hard),
                          stdin=subprocess.DEVNULL, timeout=timeout, check=False)


def counters_of(stdout: str) -> dict[str, int]:
    entry = json.loads(stdout)["results"][-1]
    return {c["name"]: int(c["value"]) for c in entry["counters"]}


def run_args(url: str, connections: int, *extra: str) -> list[str]:
    # One burst of `connections` requests over `connections` connections opened up front:
    # one request on each, so that every connection is used and counted.
    return ["run", url, "--connections", str(connections), "--rps", str(connections),
            "--burst-size", str(connections), "--duration", "1s", "--prefetch-connections",
            "--output-format", "json", *extra]


# ---- the descriptor limit ------------------------------------------------------------------

HARD = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
needs_room = pytest.mark.skipif(HARD != resource.RLIM_INFINITY and HARD < 2000,
                                reason="the hard RLIMIT_NOFILE is below 2000 here")


@needs_room
def test_a_lowered_soft_limit_is_raised_and_the_run_opens_every_connection(
        server: nhbench.TestServer) -> None:
    n = 500
    proc = nhbench_limited(run_args(server.url, n, "--verbosity", "debug"), 200, None)
    assert proc.returncode == 0, proc.stderr
    assert "run: RLIMIT_NOFILE soft limit raised from 200 to " in proc.stderr
    counters = counters_of(proc.stdout)
    assert counters["upstream_cx_total"] == n
    assert "upstream_cx_connect_fail" not in counters
    assert counters["benchmark.http_2xx"] == counters["upstream_rq_total"]


def test_connections_beyond_the_hard_limit_are_refused_before_anything_is_sent(
        server: nhbench.TestServer) -> None:
    before = requests_seen(server)
    for args, needs in ((run_args(server.url, 500), "500 connections need "),
                        (run_args(server.url, 150, "--concurrency", "2"),
                         "150 connections per worker x 2 workers need "),
                        (["nighthawk", "client", "--connections", "500", "--rps", "10",
                          "--duration", "1", server.url], "500 connections need ")):
        proc = nhbench_limited(args, 200, 200)
        assert proc.returncode == 2, proc.stderr
        assert proc.stdout == ""
        lines = proc.stderr.splitlines()
        assert len(lines) == 1, proc.stderr
        assert lines[0].startswith(f"nhbench: error: --connections: {needs}"), lines
        assert "more than RLIMIT_NOFILE's hard limit of 200" in lines[0]
    # Fortio's spelling of the option: -c.
    proc = nhbench_limited(["fortio", "load", "-c", "500", "-qps", "10", "-t", "1s",
                            server.url], 200, 200)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines()[-1].startswith("nhbench fortio: -c: 500 connections need ")
    # Nothing reached the server: no connection, no request.
    assert requests_seen(server) == before


def test_just_under_the_hard_limit_runs(server: nhbench.TestServer) -> None:
    # The refusal says how many fit; exactly that many open and each carries its request.
    refused = nhbench_limited(run_args(server.url, 400), 200, 200)
    assert refused.returncode == 2, refused.stderr
    fit = int(re.search(r"at most (\d+) connections per worker fit", refused.stderr)[1])
    assert 100 < fit < 200
    before = requests_seen(server)
    proc = nhbench_limited(run_args(server.url, fit), 200, 200)
    assert proc.returncode == 0, proc.stderr
    counters = counters_of(proc.stdout)
    assert counters["upstream_cx_total"] == fit
    assert "upstream_cx_connect_fail" not in counters
    assert counters["benchmark.http_2xx"] == fit
    requests, connections = requests_seen(server)
    assert (requests - before[0], connections - before[1]) == (fit, fit)
    # One more is refused.
    proc = nhbench_limited(run_args(server.url, fit + 1), 200, 200)
    assert proc.returncode == 2 and f"at most {fit} connections" in proc.stderr


def test_python_api_raises_the_options_error() -> None:
    script = textwrap.dedent("""
        import json, resource, sys
        import nhbench
        resource.setrlimit(resource.RLIMIT_NOFILE, (150, 150))
        try:
            nhbench.run("http://127.0.0.1:9/", connections=300, rps=10, duration=1)
        except nhbench.OptionsError as exc:
            print(json.dumps({"option": exc.option, "text": str(exc)}))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=cli_env(), timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["option"] == "connections"
    assert out["text"].startswith("connections: 300 connections need ")
    assert "more than RLIMIT_NOFILE's hard limit of 150" in out["text"]


@needs_room
def test_the_server_raises_its_soft_limit_and_says_what_it_holds() -> None:
    with subprocess.Popen([sys.executable, "-m", "nhbench", "server", "--listen",
                           "127.0.0.1:0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, env=cli_env(), preexec_fn=limits(300, None)) as proc:
        try:
            assert proc.stdout is not None and proc.stderr is not None
            assert proc.stdout.readline().startswith("listening on http://127.0.0.1:")
            line = proc.stderr.readline()
        finally:
            proc.terminate()
            proc.communicate(timeout=30)
    hard = HARD if HARD != resource.RLIM_INFINITY else int(
        Path("/proc/sys/fs/nr_open").read_text())
    assert line == (f"nhbench: holds up to {hard - 64:,} connections at once (RLIMIT_NOFILE "
                    f"soft limit raised from 300 to {hard}, hard "
                    f"{HARD if HARD != resource.RLIM_INFINITY else 'unlimited'})\n"), line


# ---- source addresses ----------------------------------------------------------------------


def established_sources(port: int, kind: str = "-t") -> Counter[str]:
    """The local addresses of the established TCP connections (connected UDP sockets with
    `kind` "-u") to `port` (``ss``)."""
    out = subprocess.run(["ss", "-Hn", kind, "state", "established", f"( dport = :{port} )"],
                         capture_output=True, text=True, check=True).stdout
    return Counter(line.split()[2].rsplit(":", 1)[0] for line in out.splitlines() if line)


def run_watching_sources(args: list[str], port: int, kind: str = "-t",
                         ) -> tuple[subprocess.CompletedProcess[str], Counter[str]]:
    """``nhbench ARGS`` in a child, its connections' source addresses sampled with ``ss``
    while it runs; the finished process and the largest sample (all connections open)."""
    seen: list[Counter[str]] = []
    with subprocess.Popen([sys.executable, "-m", "nhbench", *args], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env=cli_env()) as proc:
        while proc.poll() is None:
            seen.append(established_sources(port, kind))
            time.sleep(0.1)
        out, err = proc.communicate(timeout=60)
    done = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    return done, max(seen, key=lambda c: sum(c.values()), default=Counter())


@pytest.mark.skipif(shutil.which("ss") is None, reason="needs ss (iproute2)")
def test_connections_spread_over_the_source_addresses_in_turn(
        server: nhbench.TestServer) -> None:
    port = int(server.url.rsplit(":", 1)[1].strip("/"))
    before = requests_seen(server)
    # A comma list; one worker, so the turn is 127.0.0.2, .3, .2, .3, ...
    proc, most = run_watching_sources(run_args(server.url, 7, "--source-address",
                                               "127.0.0.2,127.0.0.3", "--duration", "2s"),
                                      port)
    assert proc.returncode == 0, proc.stderr
    counters = counters_of(proc.stdout)
    assert counters["upstream_cx_total"] == 7
    assert most == Counter({"127.0.0.2": 4, "127.0.0.3": 3})
    requests, connections = requests_seen(server)
    assert connections - before[1] == 7
    assert requests - before[0] == counters["benchmark.http_2xx"] >= 7


def test_three_sources_repeated_flag_and_two_workers(server: nhbench.TestServer) -> None:
    # Repeated flags add up; two workers take the next turns after each other's
    # connections (worker 0: connections 0-2, worker 1: 3-5 of the run).
    port = int(server.url.rsplit(":", 1)[1].strip("/"))
    proc, most = run_watching_sources(run_args(server.url, 3, "--source-address", "127.0.0.2",
                                               "--source-address", "127.0.0.3,127.0.0.4",
                                               "--concurrency", "2", "--duration", "2s"), port)
    assert proc.returncode == 0, proc.stderr
    assert most == Counter({"127.0.0.2": 2, "127.0.0.3": 2, "127.0.0.4": 2})

@pytest.mark.skipif(shutil.which("ss") is None, reason="needs ss (iproute2)")
def test_udp_echo_sockets_take_the_source_addresses_in_turn() -> None:
    with nhbench.TestServer(udp_echo="127.0.0.1:0", subprocess=True) as server:
        host, port = server.udp_echo_addresses[0]
        proc, most = run_watching_sources(
            ["run", f"udp://{host}:{port}", "--connections", "5", "--rps", "50",
             "--duration", "2s", "--prefetch-connections", "--source-address",
             "127.0.0.2,127.0.0.3"], port, "-u")
    assert proc.returncode == 0, proc.stderr
    assert most == Counter({"127.0.0.2": 3, "127.0.0.3": 2})

@pytest.mark.skipif(shutil.which("ss") is None, reason="needs ss (iproute2)")
def test_http3_connections_take_the_source_addresses_in_turn() -> None:
    # Each HTTP/3 connection has a UDP socket of its own, bound to its source address.
    with nhbench.TestServer(http3=True, tls_self_signed=True, subprocess=True) as server:
        port = int(server.url.rsplit(":", 1)[1].strip("/"))
        proc, most = run_watching_sources(run_args(
            server.url, 3, "--protocol", "http3", "--cacert", str(server.ca_cert),
            "--source-address", "127.0.0.2,127.0.0.3", "--duration", "2s"), port, "-u")
    assert proc.returncode == 0, proc.stderr
    counters = counters_of(proc.stdout)
    assert counters["upstream_cx_http3_total"] == 3 and counters["ssl.handshake"] == 3
    assert counters["benchmark.http_2xx"] == counters["upstream_rq_total"] >= 3
    assert most == Counter({"127.0.0.2": 2, "127.0.0.3": 1})

# 192.0.2.0/24 is TEST-NET-1: never an address of this host. ::1 with an IPv4 target: the
# connections take the addresses in turn whatever the destination, so every second connect
# would fail; refused instead.
@pytest.mark.parametrize(("flag", "api", "stderr", "match"), [
    ("127.0.0.2,192.0.2.7", ["127.0.0.3", "192.0.2.7"],
     "--source-address: cannot bind 192.0.2.7: Cannot assign requested address "
     "(EADDRNOTAVAIL: not an address of this host?)",
     r"^source_address: cannot bind 192\.0\.2\.7"),
    ("127.0.0.2,::1", ["::1"],
     "--source-address: ::1 cannot reach the run's IPv4 destination (127.0.0.1); give "
     "source addresses of the same family",
     r"^source_address: ::1 cannot reach"),
], ids=["not-on-this-host", "other-family"])
def test_a_source_address_that_cannot_serve_is_refused_by_name_before_the_run(
        server: nhbench.TestServer, flag: str, api: list[str], stderr: str,
        match: str) -> None:
    before = requests_seen(server)
    proc = subprocess.run(
        [sys.executable, "-m", "nhbench", *run_args(server.url, 2, "--source-address", flag)],
        capture_output=True, text=True, env=cli_env(), timeout=60, check=False)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr == f"nhbench: error: {stderr}\n"
    assert requests_seen(server) == before
    with pytest.raises(nhbench.OptionsError, match=match):
        nhbench.run(server.url, source_address=api, duration=0.5)
    assert requests_seen(server) == before


#: In a network namespace of its own (lo only), with the ephemeral port range narrowed to
#: 4 ports: 8 connections from one source address, 4 to each of two listeners (on fixed
#: ports outside that range, which an ephemeral listener would take from it). Each
#: destination has its own 4 ports only when the port is chosen at connect time
#: (IP_BIND_ADDRESS_NO_PORT); a plain bind() would give the address 4 ports in all.
NETNS_SCRIPT = """
import json, subprocess, sys
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
with open("/proc/sys/net/ipv4/ip_local_port_range", "w") as f:
    f.write("40000 40003")
import nhbench
with nhbench.TestServer(listen=["127.0.0.1:18080", "127.0.0.1:18081"], subprocess=True):
    result = nhbench.run(
        multi_target_endpoint=["127.0.0.1:18080", "127.0.0.1:18081"],
        multi_target_path="/", connections=8, rps=8, burst_size=8, duration=1,
        prefetch_connections=True, source_address="127.0.0.2",
        no_default_failure_predicates=True)
    print(json.dumps(dict(result.counters)))
"""


@pytest.mark.skipif(shutil.which("unshare") is None or shutil.which("ip") is None,
                    reason="needs unshare and ip")
def test_one_source_address_has_its_port_range_per_destination() -> None:
    probe = subprocess.run(["unshare", "-rn", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"no network namespace here: {probe.stderr.decode().strip()}")
    proc = subprocess.run(["unshare", "-rn", sys.executable, "-c", NETNS_SCRIPT],
                          capture_output=True, text=True, env=cli_env(), timeout=120,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    counters = json.loads(proc.stdout.splitlines()[-1])
    assert counters["upstream_cx_total"] == 8
    assert counters["upstream_cx_connect_fail"] == 0, counters
    assert counters["benchmark.http_2xx"] == 8

