"""``nhbench fortio``: real Fortio 1.66.5 and nhbench's front-end side by side on the same
command lines against the same origin (the origin's own counters and request log), and
every Fortio flag in a test: mapped (its effect on the wire or in the run) or refused (exit
2, one line, nothing sent)."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest
from support.peers import fortio_binary
from support.recording_origin import RecordingOrigin

from nhbench.compat._fortio import fortio_plan, main, parse
from nhbench.compat._fortio_flags import FORTIO_FLAGS

pytestmark = pytest.mark.timeout(300)

NHB = [sys.executable, "-m", "nhbench", "fortio"]


def run(argv: Sequence[str], *, fortio: bool = False, stdin: bytes | None = None,
        timeout: float = 60) -> subprocess.CompletedProcess[str]:
    if fortio:
        binary = fortio_binary()
        if binary is None:
            pytest.skip("fortio is not installed")
        command = [binary, *argv]
    else:
        command = [*NHB, *argv]
    return subprocess.run(command, capture_output=True, timeout=timeout, check=False,
                          input=stdin.decode() if stdin is not None else None, text=True)


def needs_fortio() -> None:
    if fortio_binary() is None:
        pytest.skip("fortio is not installed")


@pytest.fixture
def origin() -> Iterator[RecordingOrigin]:
    with RecordingOrigin() as recording:
        yield recording


# ---- side by side: the same command line, the same origin, the same traffic ------------

COUNTED = ("requests", "connections_total", "connections_http2", "grpc_calls",
           "tcp_echo_bytes", "udp_echo_packets", "tls_handshakes")


def delta(server: Any, action: Callable[[], subprocess.CompletedProcess[str]]) \
        -> tuple[subprocess.CompletedProcess[str], dict[str, int]]:
    before = server.stats()
    done = action()
    # The server counts a request when it has answered it: let the last ones land.
    time.sleep(0.2)
    after = server.stats()
    return done, {key: after[key] - before[key] for key in COUNTED}


SIDE_BY_SIDE = [
    # Fortio's defaults spelled out: the total rate over exact connections, each warmed up.
    "load -qps 100 -t 1s -c 4 URL",
    # The seed's command line (-qps 5000 -t 60s -c 8 -r 0.0001 -H "Host: ...") scaled down.
    "load -qps 500 -t 1s -c 8 -r 0.0001 -H Host:seed.example URL",
    # An exact count: no warm-up, and Fortio lowers 4 connections to 3 (at least 2 calls each).
    "load -n 7 -qps 20 URL",
    "load -n 10 -qps 0 -c 2 URL",
    # -c 0 is Fortio's default (4 connections), below 0 it is 1.
    "load -c 0 -n 8 -qps 0 URL",
    "load -c -3 -n 4 -qps 0 URL",
    "load -calc-qps -n 10 -t 1s -c 2 URL",
    "load -keepalive=false -n 6 -qps 0 -c 2 URL",
    "load -connection-reuse 2:2 -n 8 -qps 0 -c 2 URL",
    # The seed's gRPC example and gRPC streams (-s): c connections, c*s calls in flight.
    "load -grpc -ping -payload hello -n 10 -c 2 HOSTPORT",
    "load -grpc -s 2 -qps 40 -t 1s -c 2 HOSTPORT",
    "load -grpc -qps 20 -t 1s HOSTPORT",
    # Max speed (-qps 0): one call in flight a connection (a stream with gRPC -s), so a
    # server that takes 150 ms a call sees 7 calls a connection in 1 s, from both (on a
    # busy host, as many as each run's own latency allows: closed_loop_calls below).
    "load -qps 0 -t 1s -c 3 URL?delay=150ms",
    "load -h2 -qps 0 -t 1s -c 2 URL?delay=150ms",
    "load -grpc -ping -grpc-ping-delay 150ms -qps 0 -t 1s -c 2 -s 2 HOSTPORT",
    "load -grpc -ping -grpc-ping-delay 150ms -qps 0 -t 1s -c 2 HOSTPORT",
    # Fortio opens and warms up all of -c before lowering its threads (fewer than 2 calls
    # each): 4 connections and warm-ups for 2 calls on 1 of them.
    "load -qps 1 -t 1s URL",
    "load -grpc -qps 2 -t 1s -c 3 HOSTPORT",
    # -h2 on http:// is h2c, as Fortio's.
    "load -h2 -n 4 -c 2 URL",
    "load -h2 -qps 20 -t 1s -c 2 URL",
    # tcp:// and udp:// echo with -n, and tcp:// at a rate (warm-up included).
    "load -n 10 -c 2 -payload hello TCP",
    "load -n 10 -c 2 -payload hello UDP",
    "load -qps 40 -t 1s -c 2 -payload hello TCP",
]


@pytest.fixture
def echo_server() -> Iterator[Any]:
    import nhbench

    with nhbench.TestServer(tcp_echo="127.0.0.1:0", udp_echo="127.0.0.1:0") as server:
        yield server


def expand(line: str, server: Any) -> list[str]:
    hostport = server.url.split("//", 1)[1].rstrip("/")
    tcp_host, tcp_port = server.tcp_echo_address[:2]
    udp_host, udp_port = server.udp_echo_address[:2]
    return [word.replace("URL", server.url).replace("HOSTPORT", hostport)
            .replace("TCP", f"tcp://{tcp_host}:{tcp_port}")
            .replace("UDP", f"udp://{udp_host}:{udp_port}")
            for word in line.split()]


@pytest.mark.parametrize("line", SIDE_BY_SIDE)
def test_same_traffic_as_fortio(line: str, echo_server: Any) -> None:
    needs_fortio()
    argv = expand(line, echo_server)
    theirs, seen_theirs = delta(echo_server, lambda: run(argv, fortio=True))
    ours, seen_ours = delta(echo_server, lambda: run(argv))
    assert ours.returncode == theirs.returncode == 0, (ours.stderr, theirs.stderr)
    assert seen_theirs["requests"] + seen_theirs["tcp_echo_bytes"] \
        + seen_theirs["udp_echo_packets"] > 0
    timed = "-qps 0" in line and " -t " in line
    if timed:
        closed_loop_calls(argv, (theirs, seen_theirs), (ours, seen_ours))
    for key in COUNTED:
        if timed and key in ("requests", "grpc_calls"):
            continue
        # Rate rounding may give one call more or less; bytes are 5 a call.
        slack = 5 if key == "tcp_echo_bytes" else 1
        assert abs(seen_ours[key] - seen_theirs[key]) <= slack, (key, seen_ours, seen_theirs)
    # Connections exactly: every one of Fortio's -c is opened, no more. With a reuse limit
    # Fortio's threads each replace their own connection where nhbench's connections are
    # one pool: a request may start the next connection of another (docs/compat.md).
    slack = 1 if "-connection-reuse" in argv else 0
    assert abs(seen_ours["connections_total"] - seen_theirs["connections_total"]) <= slack


_ALL_DONE = re.compile(r"All done (\d+) calls \(plus (\d+) warmup\)")
_CALL_TIMES = re.compile(r"Aggregated Function Time : count (\d+) avg \S+ \+/- \S+ "
                         r"min (\S+) max \S+ sum (\S+)")


def closed_loop_calls(argv: Sequence[str],
                      *runs: tuple[subprocess.CompletedProcess[str], dict[str, int]]) -> None:
    """Each run of a closed loop over a duration made the calls its own call times allow.

    Each slot (a connection, or a stream with gRPC -s) calls again as soon as its call
    ends and starts no call after the duration: its calls but the last ended within the
    duration (at most duration/min + 1 calls), and its calls cover the duration but for
    the moments between them. On a busy host the call times are what the host made them
    at that moment, and Fortio and nhbench run at different moments: once (load 4-12)
    nhbench made 8 calls where Fortio made 16, and under CPU hogs (load 12) nhbench alone
    made 12 to 16 over 21 runs, 152 to 436 ms a call on average against the server's 150.
    So each run is held to its own call times, which both report ("Aggregated Function
    Time : count N avg ... min M max ... sum S"), and to the server's count; the delay is
    held by the shortest call: none came back before the server's delay.
    """
    def value(flag: str, default: str) -> str:
        return argv[argv.index(flag) + 1] if flag in argv else default

    duration = float(value("-t", "").removesuffix("s"))
    # The server's delay: -grpc-ping-delay 150ms, or ?delay=150ms on the URL.
    asked = re.search(r"delay[= ](\d+)ms", " ".join(argv))
    delay = int(asked[1]) / 1000 if asked else 0.0
    slots = int(value("-c", "4")) * (int(value("-s", "1")) if "-grpc" in argv else 1)
    warmups = []
    for done, seen in runs:
        totals, times = _ALL_DONE.search(done.stderr), _CALL_TIMES.search(done.stderr)
        assert totals and times, done.stderr[-800:]
        calls, warmup = int(totals[1]), int(totals[2])
        count, shortest, busy = int(times[1]), float(times[2]), float(times[3])
        warmups.append(warmup)
        # The server saw every call the report counts, warm-up included.
        assert count == calls and seen["requests"] == calls + warmup, (seen, totals[0])
        assert shortest >= delay, times[0]
        assert calls <= slots * (duration / shortest + 1), (slots, times[0])
        # Three quarters of the slots' time in calls: a slot that stopped early (half the
        # calls) is well below, the turns between calls are well within.
        assert busy >= 0.75 * slots * duration, (slots, times[0])
    # Fortio's warm-up: one call a slot (Fortio's threads; nhbench's connections).
    assert len(set(warmups)) == 1, warmups


@pytest.mark.parametrize(("line", "status"), [
    # Errors are counted and the run goes on: exit 0.
    ("load -allow-initial-errors -qps 20 -t 0.5s -c 2 URLstatus/503", 0),
    # A warm-up error aborts: exit 1.
    ("load -qps 20 -t 0.5s -c 2 URLstatus/503", 1),
    # -abort-on stops the run, which still exits 0 as Fortio's.
    ("load -allow-initial-errors -abort-on 503 -qps 20 -t 2s -c 2 URLstatus/503", 0),
    ("load -n 4 -qps 0 -c 2 URLstatus/404", 0),
    # No target, two targets, an unknown command: 1; a flag Go refuses: 2; -h: 0.
    ("load", 1),
    ("load URL URL", 1),
    ("lode URL", 1),
    # A flag before the command is an unknown command to Fortio: 1.
    ("-httpbufferkb 5 load URL", 1),
    ("load -qps abc URL", 2),
    ("load -bogus URL", 2),
    ("load -h", 0),
    ("help", 0),
    ("version", 0),
])
def test_same_exit_status_as_fortio(line: str, status: int, origin: RecordingOrigin) -> None:
    needs_fortio()
    argv = line.replace("URL", origin.url).split()
    theirs = run(argv, fortio=True)
    sent_theirs = len(origin.requests)
    origin.reset()
    ours = run(argv)
    assert (ours.returncode, theirs.returncode) == (status, status), (ours.stderr,
                                                                      theirs.stderr[-500:])
    if status == 1 and "-qps" in argv:
        # The failed warm-up ends the run before its measured phase: one call a
        # connection, as Fortio's, and Fortio's one line.
        assert len(origin.requests) == sent_theirs == 2
        assert ours.stderr.splitlines()[-1] == theirs.stderr.splitlines()[-1].split(" (")[0]
    if "-abort-on" in argv:
        # Stopped well before the 2 s at 20 a second (40 calls) by both.
        assert len(origin.requests) < 20 and sent_theirs < 20
    if status == 2:
        assert len(ours.stderr.splitlines()) == 1
        assert len(origin.requests) == 0


def test_report_text_goes_to_stderr_json_to_stdout(origin: RecordingOrigin) -> None:
    """Fortio writes its banner and report on stderr; `-json -` is the only stdout."""
    needs_fortio()
    for fortio in (True, False):
        quiet = run(["load", "-n", "4", "-c", "2", origin.url], fortio=fortio)
        assert quiet.stdout == ""
        assert "All done 4 calls (plus 0 warmup)" in quiet.stderr
        to_stdout = run(["load", "-json", "-", "-n", "4", "-c", "2", origin.url],
                        fortio=fortio)
        assert to_stdout.stdout.lstrip().startswith("{")
        assert "Successfully wrote" in to_stdout.stderr


WIRE = [
    ["-H", "X-Test: one", "-H", "X-Other: two"],
    ["-X", "PUT"],
    ["-payload", "abc"],
    ["-payload", "abc", "-content-type", "text/x-test"],
    ["-content-type", "text/x-test"],
    ["-payload-size", "33"],
    ["-user", "alice:s3cret"],
    ["-http1.0"],
    ["-compression"],
    ["-stdclient", "-compression"],
]


def wire_view(requests: Sequence[Any]) -> list[tuple[Any, ...]]:
    keep = ("x-test", "x-other", "content-type", "authorization", "accept-encoding")
    return [(r.method, r.version, len(r.body), r.body if len(r.body) < 10 else b"",
             tuple((k, r.headers[k]) for k in keep if k in r.headers)) for r in requests]


@pytest.mark.parametrize("flags", WIRE, ids=lambda f: " ".join(f))
def test_same_requests_on_the_wire(flags: list[str], origin: RecordingOrigin) -> None:
    needs_fortio()
    argv = ["load", *flags, "-n", "2", "-qps", "0", "-c", "1", origin.url]
    assert run(argv, fortio=True).returncode == 0
    theirs = wire_view(origin.requests)
    origin.reset()
    ours = run(argv)
    assert ours.returncode == 0, ours.stderr
    assert wire_view(origin.requests) == theirs


def test_resolve_keeps_the_host(origin: RecordingOrigin) -> None:
    needs_fortio()
    url = f"http://fortio-resolve.invalid:{origin.port}/path"
    argv = ["load", "-resolve", "127.0.0.1", "-n", "2", "-qps", "0", "-c", "1", url]
    assert run(argv, fortio=True).returncode == 0
    theirs = [(r.path, r.headers["host"]) for r in origin.requests]
    origin.reset()
    assert run(argv).returncode == 0
    assert [(r.path, r.headers["host"]) for r in origin.requests] == theirs
    assert theirs[0] == ("/path", f"fortio-resolve.invalid:{origin.port}")


def test_curl_as_fortio(origin: RecordingOrigin) -> None:
    needs_fortio()
    for argv in (["curl", "-H", "X-Test: one", origin.url],
                 ["load", "-curl", origin.url],
                 ["curl", "-curl-stdout-headers", origin.url],
                 ["curl", origin.url + "status/404"]):
        theirs = run(argv, fortio=True)
        ours = run(argv)
        assert ours.returncode == theirs.returncode
        assert ours.stdout.endswith("hello from the recording origin\n")
        header_stream = ours.stdout if "-curl-stdout-headers" in argv else ours.stderr
        assert header_stream.startswith("HTTP/1.")
    assert len(origin.requests) == 8
    assert {r.headers.get("x-test") for r in origin.requests[:2]} == {"one"}


# ---- every flag: mapped (its effect) or refused ----------------------------------------


@contextmanager
def silent_listener() -> Iterator[str]:
    """A listening socket: the test checks that nothing ever connected to it."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        listener.setblocking(False)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/"
        with pytest.raises(BlockingIOError):
            listener.accept()


REFUSED = [record for record in FORTIO_FLAGS if record.refused]


@pytest.mark.parametrize("record", REFUSED, ids=lambda r: r.name)
def test_refused_flag(record: Any, capsys: pytest.CaptureFixture[str]) -> None:
    with silent_listener() as url:
        argv = ["load", record.name] + (["1"] if record.value is not None else []) + [url]
        assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith(f"nhbench fortio: {record.name}: ")
    assert err.rstrip().endswith("nothing was sent")


def test_refused_flag_through_the_command() -> None:
    with silent_listener() as url:
        done = run(["load", "-qps", "10", "--httpbufferkb=64", url])
    assert done.returncode == 2
    assert done.stderr == ("nhbench fortio: -httpbufferkb: a Fortio buffer size with no "
                           "counterpart here; nothing was sent\n")


@pytest.mark.parametrize("command", ["script"])
def test_server_commands_refused(command: str) -> None:
    with silent_listener() as url:
        done = run([command, url])
    assert done.returncode == 2
    assert len(done.stderr.splitlines()) == 1
    assert "nhbench fortio server" in done.stderr


@pytest.mark.parametrize(("argv", "message"), [
    (["-connection-reuse", "10:30"], "-connection-reuse: a random reuse limit"),
    (["-dns-method", "random"], "-dns-method: 'random' is none of cached-rr, first, rnd or rr"),
    (["-abort-on", "42"], "-abort-on: 42 is no status code"),
    (["-p", "50,abc"], "-p: 'abc' is not a percentile"),
    (["-http-port", "9090"], "-http-port: a Fortio server flag"),
    # nhbench's own refusals, named by the Fortio flag given.
    (["-payload-file", "/nonexistent"], "-payload-file: no such file"),
    (["-H", "no colon"], "-H: must be 'name: value'"),
    (["-qps", "inf"], "-qps: inf is no rate"),
    (["-qps", "NaN"], "-qps: nan is no rate"),
    (["-c", "2000000"], "-c: 2000000 connections"),
    # Fortio finds an unwritable -json after the run (and dies); refused before it here.
    (["-json", "/nonexistent/dir/f.json"], "-json: '/nonexistent/dir' is not a directory"),
    (["-a", "-data-dir", "/nonexistent"], "-data-dir: '/nonexistent' is not a directory"),
])
def test_refused_values(argv: list[str], message: str,
                        capsys: pytest.CaptureFixture[str]) -> None:
    with silent_listener() as url:
        assert main(["load", *argv, url]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


def plan(*argv: str, target: str = "http://127.0.0.1:1/") -> dict[str, Any]:
    args, _ = parse("load", list(argv))
    built = fortio_plan(args, target)
    return {**built.options, "run": built.run, "notes": built.notes}


# Mapped flags whose effect is in the run nhbench builds (its options, and Fortio's run
# record that the report and JSON print); the wire tests above and below cover the rest.
IN_THE_RUN: dict[str, tuple[list[str], Callable[[dict[str, Any]], bool]]] = {
    "-jitter": (["-jitter"], lambda p: p["jitter"] and p["run"].jitter),
    "-uniform": (["-uniform"], lambda p: p["uniform"] and p["run"].uniform
                 and "burst_size" not in p),
    "-nocatchup": (["-nocatchup"], lambda p: p["no_catchup"] and p["run"].nocatchup),
    "-offset": (["-offset", "5ms"], lambda p: p["run"].offset == 0.005),
    "-runid": (["-runid", "7"], lambda p: p["run"].run_id == 7),
    "-labels": (["-labels", "my run"], lambda p: p["run"].labels == "my run"),
    "-p": (["-p", "50, 99.99"], lambda p: p["percentiles"] == (50.0, 99.99)
           and p["run"].percentiles == (50.0, 99.99)),
    "-r": (["-r", "0.0001"], lambda p: p["run"].resolution == 0.0001 and p["notes"]),
    "-loglevel": (["-loglevel", "Warning"], lambda p: p["verbosity"] == "warn"),
    "-quiet": (["-quiet"], lambda p: p["verbosity"] == "error"),
    "-gomaxprocs": (["-gomaxprocs", "2"], lambda p: "-gomaxprocs" in p["notes"][0]),
    "-resolve-ip-type": (["-resolve-ip-type", "ip6"], lambda p: p["address_family"] == "v6"),
    "-dns-method": (["-dns-method", "rnd"], lambda p: p["dns_method"] == "random"),
    "-timeout": (["-timeout", "250ms"], lambda p: p["timeout"] == p["request_timeout"] == 0.25),
    "-t": (["-t", "1m30s", "-qps", "0"], lambda p: p["duration"] == 90
           and p["run"].requested_duration == 90),
    "-qps": (["-qps", "-1"], lambda p: p["rps"] == 0 and p["run"].requested_qps < 0),
    "-n": (["-n", "9"], lambda p: p["requests"] == 9 and p["no_duration"]
           and "sequential_warmup" not in p),
    "-c": (["-c", "6"], lambda p: p["connections"] == 6 and p["run"].warmup == 6),
    "-allow-initial-errors": (["-allow-initial-errors"],
                              lambda p: p["allow_initial_errors"]),
    "-abort-on": (["-abort-on", "-1"], lambda p: "benchmark.pool_connection_failure"
                  in p["failure_predicate"]),
    "-sequential-warmup": (["-sequential-warmup"], lambda p: p["sequential_warmup"]),
    "-no-reresolve": (["-no-reresolve"], lambda p: p["uri"] == "http://127.0.0.1:1/"),
    "-log-errors": (["-log-errors=false"], lambda p: p["no_default_failure_predicates"]),
    "-unix-socket": (["-unix-socket", "/tmp/x.sock"],
                     lambda p: p["unix_socket"] == "/tmp/x.sock"),
    "-grpc-ping-delay": (["-grpc", "-ping", "-grpc-ping-delay", "10ms"],
                         lambda p: p["grpc_ping_delay"] == 0.01
                         and p["run"].run_type == "GRPC Ping Delay=10ms"),
}
for _name in ("-logger-file-line", "-logger-force-color", "-logger-goroutine",
              "-logger-json", "-logger-no-color", "-logger-timestamp"):
    IN_THE_RUN[_name] = ([f"{_name}=false"], lambda p: p["verbosity"] == "info")


@pytest.mark.parametrize("name", sorted(IN_THE_RUN))
def test_mapped_flag_in_the_run(name: str) -> None:
    argv, check = IN_THE_RUN[name]
    assert check(plan(*argv)), name


def test_udp_timeout() -> None:
    assert plan("-udp-timeout", "2s", target="udp://127.0.0.1:9")["request_timeout"] == 2.0
    assert plan(target="udp://127.0.0.1:9")["request_timeout"] == 0.75


# Mapped flags checked on the wire or by a run in the tests of this file.
ON_THE_WIRE = {
    "-H", "-X", "-payload", "-content-type", "-payload-size", "-user", "-http1.0",
    "-compression", "-stdclient", "-resolve", "-curl", "-curl-stdout-headers", "-c", "-n",
    "-qps", "-t", "-calc-qps", "-keepalive", "-connection-reuse", "-grpc", "-ping", "-s",
    "-payload-file", "-json", "-a", "-data-dir", "-k", "-https-insecure", "-cacert", "-h2",
    "-healthservice", "-abort-on", "-allow-initial-errors", "-http-port",
    "-grpc-ping-delay", "-unix-socket", "-timeout",
    # grpcping's and nc's own flags, through the front-end (tests/test_fortio_tools.py), and
    # report's sync (tests/test_browse_sync.py).
    "-health", "-nc-dont-stop-on-eof", "-sync", "-sync-interval", "-base-url",
    # The server commands' flags (tests/test_compat_fortio_server.py, SERVER_FLAGS).
    "-grpc-port", "-tcp-port", "-udp-port", "-redirect-port", "-echo-server-default-params",
    "-max-echo-delay", "-maxpayloadsizekb", "-server-idle-timeout", "-cert", "-key",
    "-echo-debug-path", "-ui-path", "-grpc-max-streams", "-udp-async", "-P", "-mtls", "-M",
    "-multi-serial-mode", "-multi-mirror-origin",
    # (-cert and -key on the client commands: tests/test_tls_client_cert.py against nginx,
    # and test_compat_fortio_server.py's -mtls test with the real Fortio client.)
    # udp:// runs only: test_udp_timeout.
    "-udp-timeout",
}


def test_every_mapped_flag_has_a_test() -> None:
    mapped = {record.name for record in FORTIO_FLAGS if record.nhbench}
    assert sorted(mapped - ON_THE_WIRE - set(IN_THE_RUN)) == []
    assert len(REFUSED) + len(mapped) == len(FORTIO_FLAGS) == 98


def test_payload_file_and_stdin(origin: RecordingOrigin, tmp_path: Any) -> None:
    path = tmp_path / "body.bin"
    path.write_bytes(b"from a file")
    assert run(["load", "-payload-file", str(path), "-n", "2", "-c", "1", origin.url]) \
        .returncode == 0
    assert run(["load", "-payload-file", "-", "-n", "2", "-c", "1", origin.url],
               stdin=b"from stdin").returncode == 0
    assert [(r.method, r.body) for r in origin.requests] == [
        ("POST", b"from a file")] * 2 + [("POST", b"from stdin")] * 2


def test_json_file_and_auto_save(origin: RecordingOrigin, tmp_path: Any) -> None:
    out = tmp_path / "result.json"
    done = run(["load", "-json", str(out), "-n", "2", "-c", "1", origin.url])
    assert done.returncode == 0 and out.stat().st_size > 0
    assert f"Json data to {out}" in done.stderr
    saved = tmp_path / "saved"
    saved.mkdir()
    done = run(["load", "-a", "-data-dir", str(saved), "-n", "2", "-c", "1", origin.url])
    assert done.returncode == 0, done.stderr
    assert [p.suffix for p in saved.iterdir()] == [".json"]


def test_tls_flags(tmp_path: Any) -> None:
    """-cacert and -k (and -https-insecure) on https://; both ignored on http://, as Fortio
    ignores them (a missing CA file there is not read)."""
    import nhbench

    with nhbench.TestServer(tls_self_signed=True) as tls:
        url = tls.url
        assert url.startswith("https://")
        base = ["load", "-n", "2", "-c", "1"]
        for flags in (["-cacert", str(tls.ca_cert)], ["-k"], ["-https-insecure"]):
            before = tls.stats()["requests"]
            done = run([*base, *flags, url])
            assert done.returncode == 0, (flags, done.stderr)
            assert tls.stats()["requests"] - before == 2
        # Without either the certificate is refused: the warm-up fails, exit 1 (Fortio's).
        done = run(["load", "-qps", "10", "-t", "0.5s", "-c", "1", url])
        assert done.returncode == 1
        assert "Aborting because of error -1" in done.stderr
    with nhbench.TestServer() as plain:
        done = run(["load", "-n", "2", "-c", "1", "-cacert", str(tmp_path / "none.pem"), "-k",
                    plain.url])
        assert done.returncode == 0, done.stderr
        assert plain.stats()["requests"] == 2


def test_h2_and_grpc_flags(echo_server: Any) -> None:
    hostport = echo_server.url.split("//", 1)[1].rstrip("/")
    done = run(["load", "-h2", "-n", "4", "-c", "1", echo_server.url])
    assert done.returncode == 0, done.stderr
    assert echo_server.stats()["connections_http2"] == 1
    # -healthservice names the service the health check asks about: unknown -> errors.
    errors = echo_server.stats()["grpc_errors"]
    assert run(["load", "-grpc", "-healthservice", "no.such.Service", "-n", "4", "-c", "1",
                hostport]).returncode == 0
    assert echo_server.stats()["grpc_errors"] - errors == 4
    # -grpc-ping-delay: the server waits that long before each answer.
    start = time.monotonic()
    assert run(["load", "-grpc", "-ping", "-grpc-ping-delay", "300ms", "-n", "4", "-c", "1",
                "-qps", "0", hostport]).returncode == 0
    assert time.monotonic() - start >= 1.2


def test_timeout_counts_errors_and_goes_on(origin: RecordingOrigin) -> None:
    done = run(["load", "-timeout", "200ms", "-n", "2", "-c", "1", "-qps", "0",
                origin.url + "sleep/1"])
    assert done.returncode == 0, done.stderr
    assert len(origin.requests) == 2


def test_unix_socket(tmp_path: Any) -> None:
    import nhbench

    path = str(tmp_path / "origin.sock")
    with nhbench.TestServer(listen=f"unix:{path}") as unix:
        done = run(["load", "-unix-socket", path, "-n", "3", "-c", "1",
                    "http://localhost/"])
        assert done.returncode == 0, done.stderr
        assert unix.stats()["requests"] == 3


def test_curl_over_a_unix_socket(tmp_path: Any) -> None:
    # The request goes to the socket, not to the URL's host (nothing listens on localhost:80).
    import nhbench

    path = str(tmp_path / "origin.sock")
    with nhbench.TestServer(listen=f"unix:{path}") as unix:
        done = run(["curl", "-unix-socket", path, "-payload", "hello", "http://localhost/echo"])
        assert done.returncode == 0, done.stderr
        assert done.stdout == "hello"
        assert done.stderr.startswith("HTTP/1.1 200 ")
        assert unix.stats()["requests"] == 1
        if fortio_binary() is not None:
            theirs = run(["curl", "-unix-socket", path, "-payload", "hello",
                          "http://localhost/echo"], fortio=True)
            assert (theirs.returncode, theirs.stdout) == (0, "hello")
    missing = run(["curl", "-unix-socket", str(tmp_path / "none.sock"), "http://localhost/"])
    assert missing.returncode == 1
    assert "Unable to connect" in missing.stderr


def test_curl_refuses_h2(origin: RecordingOrigin) -> None:
    # curl's one request is HTTP/1.1 (Python's http.client): -h2 would be ignored, so it is
    # refused by name before anything is sent.
    for argv in (["curl", "-h2", origin.url], ["load", "-curl", "-h2", origin.url]):
        done = run(argv)
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith("nhbench fortio: -h2: ")
        assert done.stderr.count("\n") == 1
    assert origin.requests == []


def test_report_serves_the_data_dir(tmp_path: Any) -> None:
    """`report` is nhbench browse over -data-dir on -http-port."""
    import urllib.request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([*NHB, "report", "-data-dir", str(tmp_path), "-http-port",
                                f"127.0.0.1:{port}"], stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as page:
                    assert page.status == 200
                    break
            except OSError:
                assert time.monotonic() < deadline and process.poll() is None
                time.sleep(0.2)
    finally:
        process.terminate()
        _, err = process.communicate(timeout=20)
    assert process.returncode == 0, err
    assert f"http://127.0.0.1:{port}/" in err


def test_version_and_help() -> None:
    done = run(["version"])
    assert done.returncode == 0
    assert done.stdout.startswith("1.66.5 ") and "nhbench" in done.stdout
    helped = run(["help"])
    assert helped.returncode == 0
    for record in FORTIO_FLAGS:
        assert f"\n  {record.name}" in helped.stdout
    asked = run(["load", "-h"])
    assert (asked.returncode, asked.stdout) == (0, "")
    assert asked.stderr == helped.stdout




def test_until_interrupted(echo_server: Any) -> None:
    """-t 0 runs until SIGINT, then reports and exits 0, as Fortio."""
    import signal

    needs_fortio()
    binary = fortio_binary()
    assert binary is not None
    for command in ([binary], NHB):
        before = echo_server.stats()["requests"]
        process = subprocess.Popen([*command, "load", "-t", "0", "-qps", "50", "-c", "2",
                                    echo_server.url], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
        # SIGINT once the run is under way (on a busy machine the start alone can take
        # seconds, and a signal before the run's handler is Python's KeyboardInterrupt).
        deadline = time.monotonic() + 30
        while echo_server.stats()["requests"] - before <= 10 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert echo_server.stats()["requests"] - before > 10
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
        assert process.returncode == 0, err
        assert out == ""
        assert "All done " in err and "(plus 2 warmup)" in err


def test_default_labels() -> None:
    # Fortio's: the URL without its scheme, " , ", the host name up to its first dot.
    host = socket.gethostname().split(".")[0]
    assert plan(target="http://127.0.0.1:1/a?b=c")["run"].labels == f"127.0.0.1:1/a?b=c , {host}"
    assert plan(target="tcp://127.0.0.1:9")["run"].labels == f"tcp://127.0.0.1:9 , {host}"


def test_grpc_cacert_turns_tls_on_as_fortio() -> None:
    """-cacert on a bare host:port makes the gRPC run TLS, trusting that CA (Fortio's)."""
    import nhbench

    needs_fortio()
    with nhbench.TestServer(tls_self_signed=True) as tls:
        hostport = tls.url.split("//", 1)[1].rstrip("/")
        argv = ["load", "-grpc", "-cacert", str(tls.ca_cert), "-n", "4", "-c", "2", hostport]
        theirs, seen_theirs = delta(tls, lambda: run(argv, fortio=True))
        ours, seen_ours = delta(tls, lambda: run(argv))
    assert ours.returncode == theirs.returncode == 0, ours.stderr
    assert seen_ours == seen_theirs
    assert seen_ours["tls_handshakes"] == 2 and seen_ours["grpc_calls"] == 4


def small_gaps(requests: Sequence[Any], warmup: int) -> float:
    """The share of the measured calls that arrived within 8 ms of the previous one."""
    times = sorted(r.at for r in requests)[warmup:]
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    return sum(gap < 0.008 for gap in gaps) / len(gaps)


def test_same_schedule_shape_as_fortio(origin: RecordingOrigin) -> None:
    """Fortio's threads start together and stay in step: at -qps 40 -c 4 its calls come
    in bursts of 4 every 100 ms; -uniform spreads them 25 ms apart. The same here."""
    needs_fortio()
    shares = {}
    for shape in ([], ["-uniform"]):
        argv = ["load", *shape, "-qps", "40", "-t", "1s", "-c", "4", origin.url]
        for fortio in (True, False):
            origin.reset()
            assert run(argv, fortio=fortio).returncode == 0
            shares[(bool(shape), fortio)] = small_gaps(origin.requests, 4)
    assert shares[(False, True)] >= 0.5 and shares[(False, False)] >= 0.5, shares
    assert shares[(True, True)] <= 0.25 and shares[(True, False)] <= 0.25, shares


@pytest.mark.parametrize(("flags", "kind"), [
    (["-H", "X-A: 1", "-user", "a:b", "-content-type", "a/b", "-k", "-h2"], "TCP"),
    (["-X", "PUT", "-http1.0", "-keepalive=false", "-unix-socket", "/nonexistent"], "UDP"),
    (["-X", "PUT", "-http1.0", "-content-type", "a/b", "-h2"], "HOSTPORT"),
])
def test_http_flags_ignored_by_other_runners(flags: list[str], kind: str,
                                             echo_server: Any) -> None:
    """Fortio's tcp, udp and gRPC runners never read its HTTP client's flags: ignored here
    too (the same calls as Fortio's), each said once on stderr."""
    needs_fortio()
    grpc = ["-grpc"] if kind == "HOSTPORT" else []
    argv = expand(" ".join(["load", *grpc, "-n", "4", "-c", "1", kind]), echo_server)
    argv[1:1] = flags
    theirs, seen_theirs = delta(echo_server, lambda: run(argv, fortio=True))
    ours, seen_ours = delta(echo_server, lambda: run(argv))
    assert ours.returncode == theirs.returncode == 0, ours.stderr
    assert seen_ours == seen_theirs
    given = [f.split("=")[0] for f in flags if f.startswith("-")]
    for flag in given:
        assert f"{flag}: ignored for " in ours.stderr


def test_same_schedule_span_as_fortio(origin: RecordingOrigin) -> None:
    """Fortio stretches each thread's schedule so that its last call is due at -t: at
    -qps 20 -t 1s -c 2, ten bursts of 2 from 0 to 1 s (not to 0.9 s, as a plain 20 a
    second would), so its ActualQPS is the -qps asked for. The same here."""
    needs_fortio()
    argv = ["load", "-qps", "20", "-t", "1s", "-c", "2", origin.url]
    for fortio in (True, False):
        origin.reset()
        assert run(argv, fortio=fortio).returncode == 0
        times = sorted(r.at for r in origin.requests)[2:]  # after the 2 warm-up calls
        assert len(times) == 20
        assert 0.97 <= times[-1] - times[0] <= 1.2, (fortio, times[-1] - times[0])


@pytest.mark.parametrize(("argv", "target", "refresh"), [
    (["-dns-method", "rr"], "http://localhost:8080/", "connection"),
    (["-dns-method", "first"], "http://localhost:8080/", "connection"),
    (["-dns-method", "rnd"], "localhost:8080", "connection"),
    ([], "http://localhost:8080/", None),                        # cached-rr: resolved once
    (["-dns-method", "rr", "-no-reresolve"], "http://localhost:8080/", None),
    (["-dns-method", "rr"], "http://127.0.0.1:8080/", None),      # an IP needs no lookup
    (["-dns-method", "rr", "-resolve", "127.0.0.1"], "http://localhost:8080/", None),
    (["-dns-method", "rr", "-stdclient"], "http://localhost:8080/", None),
    (["-dns-method", "rr", "-h2"], "http://localhost:8080/", None),
])
def test_dns_method_looks_the_name_up_per_connection_where_fortio_does(
        argv: list[str], target: str, refresh: str | None) -> None:
    # Fortio's fast client resolves again for each new connection with rr, rnd and first
    # (fhttp: resolve() when socketCount > 1 and not -no-reresolve); cached-rr keeps the
    # first answer; Go's standard and HTTP/2 clients dial through Go's own resolver.
    assert plan(*argv, target=target).get("dns_refresh") == refresh
