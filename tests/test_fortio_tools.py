"""Fortio's ``nc`` and ``grpcping`` (compat/_fortio_nc.py, compat/_fortio_grpcping.py) side
by side with real Fortio 1.66.5.

Everything runs as processes: ours through `nhbench fortio nc|grpcping` (real stdin,
stderr and exit status), Fortio's binary, ``fortio server``/``tcp-echo``/``udp-echo`` and
nhbench's test server as the peers, plus small socket peers for the half-close, remote
close and reset cases. Tests that need Fortio skip only when it is absent.
"""

from __future__ import annotations

import os
import re
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.fortio_tools import fortio_tool_argv
from support.peers import fortio_binary
from support.polling import settle, wait_until
from support.sockets import reserved_port

import nhbench

FORTIO = fortio_binary()
needs_fortio = pytest.mark.skipif(FORTIO is None, reason="fortio is not installed "
                                  "(go install fortio.org/fortio@v1.66.5)")
REPO = Path(__file__).resolve().parent.parent
TIMEOUT = 60


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}


def ours(command: str, target: str, stdin: bytes = b"", **values: Any
         ) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(fortio_tool_argv(command, target, **values), input=stdin,
                          capture_output=True,
                          timeout=TIMEOUT, cwd=REPO, env=_env())


def theirs(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    assert FORTIO is not None
    return subprocess.run([FORTIO, *args], input=stdin, capture_output=True, timeout=TIMEOUT,
                          env=_env())


def ours_popen(command: str, target: str, **values: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen(fortio_tool_argv(command, target, **values), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO,
                            env=_env())


def theirs_popen(*args: str) -> subprocess.Popen[bytes]:
    assert FORTIO is not None
    return subprocess.Popen([FORTIO, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=_env())


def fortio_data(stderr: bytes) -> bytes:
    """What Fortio's nc wrote (to stderr), without its JSON log lines."""
    return b"".join(line for line in stderr.splitlines(keepends=True)
                    if not line.startswith(b'{"ts":'))


def hostport(address: tuple[str, int]) -> str:
    return f"{address[0]}:{address[1]}"


def _free_port(kind: int) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tcp_up(port: int) -> Callable[[], bool]:
    def up() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            return False
    return up


# ---- peers ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fortio_server() -> Iterator[dict[str, int]]:
    """``fortio server`` with its gRPC, TCP and UDP echo ports (HTTP kept for its UI)."""
    if FORTIO is None:
        pytest.skip("fortio is not installed")
    ports = {"http": _free_port(socket.SOCK_STREAM), "grpc": _free_port(socket.SOCK_STREAM),
             "tcp": _free_port(socket.SOCK_STREAM), "udp": _free_port(socket.SOCK_DGRAM)}
    proc = subprocess.Popen(
        [FORTIO, "server", "-http-port", f"127.0.0.1:{ports['http']}",
         "-grpc-port", f"127.0.0.1:{ports['grpc']}", "-tcp-port", f"127.0.0.1:{ports['tcp']}",
         "-udp-port", f"127.0.0.1:{ports['udp']}", "-redirect-port", "disabled"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env())
    try:
        for name in ("http", "grpc", "tcp"):
            assert wait_until(_tcp_up(ports[name]), timeout=20), f"fortio {name} did not start"
        yield ports
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def server() -> Iterator[nhbench.TestServer]:
    with nhbench.TestServer(tcp_echo=["127.0.0.1:0"], udp_echo=["127.0.0.1:0"]) as s:
        yield s


class Peer:
    """A one-connection TCP (or Unix) peer whose behaviour the test chooses."""

    def __init__(self, behave: Callable[[socket.socket], None], unix: str | None = None) -> None:
        if unix is None:
            self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self.listener.bind(("127.0.0.1", 0))
            self.target = f"127.0.0.1:{self.listener.getsockname()[1]}"
        else:
            self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.listener.bind(unix)
            self.target = unix
        self.listener.listen(4)
        self.behave = behave
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn:
            self.behave(conn)

    def close(self) -> None:
        self.listener.close()


def _count_then_answer(conn: socket.socket) -> None:
    """Reads to EOF (the client's half-close), then answers how much came, then closes."""
    got = b""
    while chunk := conn.recv(65536):
        got += chunk
    conn.sendall(f"got {len(got)} bytes\n".encode())


def _bye(conn: socket.socket) -> None:
    conn.sendall(b"bye\n")


def _reset(conn: socket.socket) -> None:
    conn.recv(100)
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


@pytest.fixture
def peer() -> Iterator[Callable[..., Peer]]:
    made: list[Peer] = []

    def make(behave: Callable[[socket.socket], None], unix: str | None = None) -> Peer:
        made.append(Peer(behave, unix))
        return made[-1]

    yield make
    for p in made:
        p.close()


# ---- nc -------------------------------------------------------------------------------------

LINES = b"".join(b"line %d of the nc test\n" % i for i in range(200))


@needs_fortio
@pytest.mark.parametrize("echo", ["fortio", "nhbench"])
def test_nc_tcp_echo_round_trip_as_fortio(echo: str, fortio_server: dict[str, int],
                                         server: nhbench.TestServer) -> None:
    if echo == "fortio":
        target = f"127.0.0.1:{fortio_server['tcp']}"
    else:
        target = hostport(server.tcp_echo_addresses[0])
    mine = ours("nc", target, stdin=LINES)
    real = theirs("nc", target, stdin=LINES)
    # Both write what came back to stderr (Fortio's choice), and end with 0: stdin's end
    # half-closed the connection, the echo server closed its side, nc returned.
    assert (mine.returncode, mine.stdout, mine.stderr) == (0, b"", LINES)
    assert (real.returncode, real.stdout, fortio_data(real.stderr)) == (0, b"", LINES)
    # tcp:// and a trailing slash are the same destination for both.
    assert ours("nc", f"tcp://{target}/", stdin=b"x\n").stderr == b"x\n"


@needs_fortio
@pytest.mark.parametrize("echo", ["fortio", "nhbench"])
def test_nc_udp_echo_round_trip_as_fortio(echo: str, fortio_server: dict[str, int],
                                         server: nhbench.TestServer) -> None:
    if echo == "fortio":
        target = f"udp://127.0.0.1:{fortio_server['udp']}"
    else:
        target = "udp://" + hostport(server.udp_echo_addresses[0])
    datagram = b"one datagram\n"
    # The UDP listener may start after the TCP one: retry until one answer comes back.
    assert wait_until(lambda: ours("nc", target, stdin=datagram).stderr == datagram,
                      timeout=20)
    mine = ours("nc", target, stdin=datagram)
    real = theirs("nc", target, stdin=datagram)
    assert (mine.returncode, mine.stderr) == (0, datagram)
    assert (real.returncode, fortio_data(real.stderr)) == (0, datagram)


@needs_fortio
def test_nc_udp_to_a_closed_port_still_exits_0_as_fortio() -> None:
    port = _free_port(socket.SOCK_DGRAM)
    mine = ours("nc", f"udp://127.0.0.1:{port}", stdin=b"nobody\n")
    real = theirs("nc", f"udp://127.0.0.1:{port}", stdin=b"nobody\n")
    assert mine.returncode == real.returncode == 0


@needs_fortio
def test_nc_half_close_lets_the_peer_answer_after_stdin_ends(peer: Callable[..., Peer]) -> None:
    p = peer(_count_then_answer)
    mine = ours("nc", p.target, stdin=LINES)
    real = theirs("nc", p.target, stdin=LINES)
    answer = f"got {len(LINES)} bytes\n".encode()
    assert (mine.returncode, mine.stderr) == (0, answer)
    assert (real.returncode, fortio_data(real.stderr)) == (0, answer)


def _end(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


def _wait_output(proc: subprocess.Popen[bytes], want: bytes) -> bytes:
    """Reads the process's stderr until `want` has arrived."""
    assert proc.stderr is not None
    seen = b""
    while want not in fortio_data(seen):
        chunk = os.read(proc.stderr.fileno(), 4096)
        assert chunk, f"stderr closed before {want!r}: {seen!r}"
        seen += chunk
    return seen


@needs_fortio
@pytest.mark.parametrize("who", ["ours", "fortio"])
def test_nc_stops_when_the_remote_closes_even_with_stdin_open(
        peer: Callable[..., Peer], who: str) -> None:
    p = peer(_bye)
    proc = ours_popen("nc", p.target) if who == "ours" else theirs_popen("nc", p.target)
    try:
        # stdin stays open: nc ends only because the peer closed.
        assert proc.wait(timeout=TIMEOUT) == 0
        assert proc.stderr is not None
        assert b"bye\n" in fortio_data(proc.stderr.read())
    finally:
        _end(proc)


@needs_fortio
@pytest.mark.parametrize("who", ["ours", "fortio"])
def test_nc_dont_stop_on_eof_waits_for_stdin(peer: Callable[..., Peer], who: str) -> None:
    p = peer(_bye)
    proc = (ours_popen("nc", p.target, dont_stop_on_eof=True) if who == "ours"
            else theirs_popen("nc", "-nc-dont-stop-on-eof", p.target))
    try:
        _wait_output(proc, b"bye\n")
        # The peer has closed, and nc is still there: it waits for stdin's end.
        assert not wait_until(lambda: proc.poll() is not None, timeout=1.0)
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.wait(timeout=TIMEOUT) == 0
    finally:
        _end(proc)


@needs_fortio
def test_nc_reset_by_the_peer_exits_1_as_fortio(peer: Callable[..., Peer]) -> None:
    p = peer(_reset)
    mine = ours("nc", p.target, stdin=b"hello\n")
    real = theirs("nc", p.target, stdin=b"hello\n")
    assert mine.returncode == real.returncode == 1
    assert b"reset" in mine.stderr.lower()


@needs_fortio
def test_nc_connection_refused_exits_1_as_fortio() -> None:
    with reserved_port() as port:
        mine = ours("nc", f"127.0.0.1:{port}")
        real = theirs("nc", f"127.0.0.1:{port}")
    assert mine.returncode == real.returncode == 1
    assert mine.stderr.decode().startswith("nc: connection error to")


@pytest.mark.parametrize("target", ["localhost", "udp://localhost", "localhost:",
                                    "udp://"])
def test_nc_refuses_a_target_that_is_not_host_port(target: str) -> None:
    # Fortio logs it and exits 1; nhbench refuses bad input by name with 2.
    mine = ours("nc", target)
    assert mine.returncode == 2
    assert mine.stderr.decode().count("\n") == 1
    assert "is not host:port" in mine.stderr.decode()


def test_nc_over_a_unix_socket(peer: Callable[..., Peer], tmp_path: Path) -> None:
    # nhbench's addition: Fortio's nc takes only host:port.
    p = peer(_count_then_answer, unix=str(tmp_path / "peer.sock"))
    mine = ours("nc", p.target, stdin=LINES)
    assert (mine.returncode, mine.stderr) == (0, f"got {len(LINES)} bytes\n".encode())


# ---- grpcping -------------------------------------------------------------------------------

_NUMBER = re.compile(r"-?\d+(\.\d+)?(e[-+]\d+)?")


def layout(text: str) -> list[str]:
    """The output with numbers masked and runs of bucket lines folded into one: what must be
    the same whatever the timings."""
    out: list[str] = []
    for line in text.splitlines():
        masked = _NUMBER.sub("N", line)
        if masked.startswith("> N <="):
            masked = ">= N <= N , N , N, N"  # every bucket line reads as the first
        if not out or out[-1] != masked:
            out.append(masked)
    return out


def _counts(text: str) -> list[tuple[str, int]]:
    return [(m.group(1), int(m.group(2)))
            for m in re.finditer(r"^(.*?) : count (\d+) ", text, re.MULTILINE)]


def _bucket_total(text: str, title: str) -> int:
    block = text.split(title, 1)[1].split("# target", 1)[0]
    return sum(int(m.group(1)) for m in re.finditer(r", (\d+)$", block, re.MULTILINE))


@needs_fortio
@pytest.mark.parametrize("against", ["fortio", "nhbench"])
def test_grpcping_output_as_fortio(against: str, fortio_server: dict[str, int],
                                   server: nhbench.TestServer) -> None:
    target = (f"127.0.0.1:{fortio_server['grpc']}" if against == "fortio"
              else hostport(server.address))
    mine = ours("grpcping", target, count=4, payload="hello")
    real = theirs("grpcping", "-n", "4", "-payload", "hello", target)
    assert mine.returncode == real.returncode == 0, (mine.stderr, real.stderr)
    text, real_text = mine.stdout.decode(), real.stdout.decode()
    # One skew per round, three round trips per round.
    expected = [("Clock skew histogram usec", 4), ("RTT histogram usec", 12)]
    assert _counts(text) == _counts(real_text) == expected
    assert layout(text) == layout(real_text)
    assert _bucket_total(text, "RTT histogram usec") == 12
    assert _bucket_total(text, "Clock skew histogram usec") == 4
    assert mine.stderr.decode().count("Ping RTT ") == 4


def test_grpcping_calls_reach_the_server(server: nhbench.TestServer) -> None:
    before = server.stats()["grpc_calls"]
    mine = ours("grpcping", hostport(server.address), count=3)
    assert mine.returncode == 0, mine.stderr
    # One warm-up call, then two per round, as Fortio.
    after = settle(server, lambda s: s["grpc_calls"] - before >= 7)
    assert after["grpc_calls"] - before == 7


def test_grpcping_default_count_is_1(server: nhbench.TestServer) -> None:
    mine = ours("grpcping", hostport(server.address), count=0)
    assert _counts(mine.stdout.decode()) == [("Clock skew histogram usec", 1),
                                             ("RTT histogram usec", 3)]


def test_grpcping_ping_delay_is_in_every_round_trip(server: nhbench.TestServer) -> None:
    mine = ours("grpcping", hostport(server.address), count=2, ping_delay_ns=50_000_000)
    assert mine.returncode == 0, mine.stderr
    m = re.search(r"RTT histogram usec : count 6 avg \S+ \+/- \S+ min (\S+)",
                  mine.stdout.decode())
    assert m and float(m.group(1)) >= 50_000, mine.stdout


@needs_fortio
@pytest.mark.parametrize("against", ["fortio", "nhbench"])
@pytest.mark.parametrize(("service", "status", "code"), [
    ("", "SERVING", 0), ("ping", "SERVING", 0), ("ping_down", "NOT_SERVING", 1)])
def test_grpcping_health_as_fortio(against: str, service: str, status: str, code: int,
                                   fortio_server: dict[str, int],
                                   server: nhbench.TestServer) -> None:
    target = (f"127.0.0.1:{fortio_server['grpc']}" if against == "fortio"
              else hostport(server.address))
    mine = ours("grpcping", target, count=3, health=True, health_service=service)
    real = theirs("grpcping", "-n", "3", "-health", "-healthservice", service, target)
    assert mine.returncode == real.returncode == code, (mine.stderr, real.stderr)
    assert f"Health {status} : 3" in mine.stdout.decode()
    assert f"Health {status} : 3" in real.stdout.decode()
    assert layout(mine.stdout.decode()) == layout(real.stdout.decode())


@needs_fortio
def test_grpcping_health_of_an_unknown_service_fails_as_fortio(
        fortio_server: dict[str, int]) -> None:
    target = f"127.0.0.1:{fortio_server['grpc']}"
    mine = ours("grpcping", target, health=True, health_service="nope")
    real = theirs("grpcping", "-health", "-healthservice", "nope", target)
    assert mine.returncode == real.returncode == 1
    assert mine.stdout == real.stdout == b""
    assert "NOT_FOUND" in mine.stderr.decode()


@needs_fortio
def test_grpcping_to_nothing_fails_as_fortio() -> None:
    with reserved_port() as port:
        mine = ours("grpcping", f"127.0.0.1:{port}")
        real = theirs("grpcping", f"127.0.0.1:{port}")
    assert mine.returncode == real.returncode == 1
    assert "UNAVAILABLE" in mine.stderr.decode()


@pytest.fixture(scope="module")
def tls_server() -> Iterator[nhbench.TestServer]:
    with nhbench.TestServer(tls_self_signed=True) as s:
        yield s


@pytest.mark.parametrize("form", ["https://localhost:{port}", "localhost:{port}"])
def test_grpcping_over_tls_with_cacert(tls_server: nhbench.TestServer, form: str) -> None:
    before = tls_server.stats()["tls_handshakes"]
    mine = ours("grpcping", form.format(port=tls_server.address[1]), count=2,
                cacert=str(tls_server.ca_cert))
    assert mine.returncode == 0, mine.stderr
    assert _counts(mine.stdout.decode())[1] == ("RTT histogram usec", 6)
    assert tls_server.stats()["tls_handshakes"] > before


def test_grpcping_with_a_client_certificate(tmp_path: Path) -> None:
    # A server that requires client certificates (--tls-client-ca): -cert/-key get the ping
    # through, verified; without them the handshake is refused and nothing is answered.
    from support.pki import make_pki

    pki = make_pki(tmp_path)
    with nhbench.TestServer(tls_self_signed=True, tls_client_ca=pki.ca) as s:
        target = f"localhost:{s.address[1]}"
        mine = ours("grpcping", target, count=2, cacert=str(s.ca_cert), cert=pki.cert,
                    key=pki.key)
        assert mine.returncode == 0, mine.stderr
        calls = s.stats()["grpc_calls"]
        refused = ours("grpcping", target, cacert=str(s.ca_cert))
        assert refused.returncode == 1
        stats = s.stats()
    assert stats["tls_clients_verified"] >= 1 and stats["tls_clients_refused"] >= 1
    assert stats["grpc_calls"] == calls >= 2


def test_grpcping_https_without_cacert_verifies_against_the_system_roots(
        tls_server: nhbench.TestServer) -> None:
    # The self-signed certificate is in no system store: the call fails, nothing is
    # sent in clear.
    before = tls_server.stats()["grpc_calls"]
    mine = ours("grpcping", f"https://localhost:{tls_server.address[1]}")
    assert mine.returncode == 1
    assert "UNAVAILABLE" in mine.stderr.decode()
    assert tls_server.stats()["grpc_calls"] == before


def test_grpcping_with_cacert_never_falls_back_to_cleartext(
        server: nhbench.TestServer, tls_server: nhbench.TestServer) -> None:
    before = server.stats()["grpc_calls"]
    mine = ours("grpcping", hostport(server.address), cacert=str(tls_server.ca_cert))
    assert mine.returncode == 1
    assert server.stats()["grpc_calls"] == before


@pytest.mark.parametrize(("values", "message"), [
    ({"insecure": True}, "-k (do not verify the server certificate) is not supported"),
    ({"cacert": "/nonexistent/ca.pem"}, "cannot read the CA certificate"),
    ({"cert": "/tmp/c.pem"}, "grpcping: -cert and -key go together"),
    ({"ping_delay_ns": -1}, "-grpc-ping-delay must not be negative"),
])
def test_grpcping_refuses_by_name_and_sends_nothing(server: nhbench.TestServer,
                                                    values: dict[str, Any],
                                                    message: str) -> None:
    before = server.stats()["grpc_calls"]
    mine = ours("grpcping", hostport(server.address), **values)
    assert mine.returncode == 2
    assert mine.stderr.decode().count("\n") == 1 and message in mine.stderr.decode()
    assert mine.stdout == b""
    assert server.stats()["grpc_calls"] == before


def test_grpcping_without_grpcio_is_refused_by_name() -> None:
    code = ("import sys; sys.modules['grpc'] = None\n"
            "from nhbench.compat._fortio_grpcping import GrpcPingValues, grpcping_main\n"
            "sys.exit(grpcping_main(GrpcPingValues(), '127.0.0.1:1'))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=TIMEOUT, cwd=REPO, env=_env())
    assert proc.returncode == 2
    assert proc.stderr == "grpcping: needs grpcio (pip install 'nhbench[grpc]')\n"


def test_grpcping_sends_payload_delay_and_metadata() -> None:
    """A grpcio server records what arrives: Fortio's PingMessage fields and the -H
    metadata (content-type dropped, user-agent and host moved to the channel)."""
    grpc = pytest.importorskip("grpc")
    from concurrent import futures

    seen: list[tuple[bytes, dict[str, str]]] = []

    def ping(request: bytes, context: Any) -> bytes:
        seen.append((request, dict(context.invocation_metadata())))
        return request

    handler = grpc.method_handlers_generic_handler(
        "fgrpc.PingServer", {"Ping": grpc.unary_unary_rpc_method_handler(ping)})
    srv = grpc.server(futures.ThreadPoolExecutor(max_workers=2), handlers=[handler])
    port = srv.add_insecure_port("127.0.0.1:0")
    srv.start()
    try:
        mine = ours("grpcping", f"127.0.0.1:{port}", count=1, payload="caf\u00e9",
                    ping_delay_ns=1000,
                    headers=[["X-Trace", "abc"], ["Content-Type", "text/plain"],
                             ["User-Agent", "tester/1"]])
    finally:
        srv.stop(None)
    # The server answers with the request, so no time stamp: the run still completes.
    assert mine.returncode == 0, mine.stderr
    from nhbench._grpc import ping_message
    assert [request for request, _ in seen] == [
        ping_message(payload="caf\u00e9", delay_nanos=1000)] + [
        ping_message(seq=1, ts=_ts(request), payload="caf\u00e9", delay_nanos=1000)
        for request, _ in seen[1:]]
    for _, metadata in seen:
        assert metadata["x-trace"] == "abc"
        assert "content-type" not in metadata or metadata["content-type"] == "application/grpc"
        assert metadata["user-agent"].startswith("tester/1")


def _ts(request: bytes) -> int:
    from nhbench.compat._fortio_grpcping import _Ping
    return _Ping.decode(request).ts


@needs_fortio
@pytest.mark.parametrize("who", ["ours", "fortio"])
@pytest.mark.parametrize("rounds", [1, 2, 7])
def test_grpcping_histograms_print_fortios_numbers(who: str, rounds: int,
                                                   fortio_server: dict[str, int]) -> None:
    """Both log every round's three round trips and clock skew (ns) to stderr; fed those
    values, Fortio's histograms (its shapes: offset -10 us by 2 us for the skew, 0 by 10 us
    for the RTT) print each one's stdout byte for byte (buckets, moments, interpolated p50)."""
    from nhbench.compat._fortio_grpcping import _Recorder

    target = f"127.0.0.1:{fortio_server['grpc']}"
    run = (ours("grpcping", target, count=rounds) if who == "ours"
           else theirs("grpcping", "-n", str(rounds), target))
    assert run.returncode == 0, run.stderr
    logged = re.findall(r"Ping RTT -?\d+ \(avg of (-?\d+), (-?\d+), (-?\d+) ns\) "
                        r"clock skew (-?\d+)", run.stderr.decode())
    assert len(logged) == rounds
    skew, rtt = _Recorder(-10.0, 2.0), _Recorder(0.0, 10.0)
    for rt1, remote, rt2, clock in logged:
        for value in (rt1, rt2, remote):  # Fortio's recording order
            rtt.record(int(value) / 1000.0)
        skew.record(int(clock) / 1000.0)
    lines = skew.lines("Clock skew histogram usec") + rtt.lines("RTT histogram usec")
    assert "".join(line + "\n" for line in lines) == run.stdout.decode()


def test_grpcping_histogram_of_a_known_run() -> None:
    """A run of real Fortio, its logged values and its printed histograms (kept as text, so
    this check needs no Fortio): the bucket edges, the %.6g ends and the p50 interpolation."""
    from nhbench.compat._fortio_grpcping import _RTT_SHAPE, _SKEW_SHAPE, _Recorder

    # The module's own histogram shapes: this checks them against Fortio's text.
    skew, rtt = _Recorder(*_SKEW_SHAPE), _Recorder(*_RTT_SHAPE)
    for value in (1729913, 110636, 550217, 79253, 52556, 63945):
        rtt.record(value / 1000.0)
    for value in (-199687, -1514):
        skew.record(value / 1000.0)
    assert skew.lines("Clock skew histogram usec") + rtt.lines("RTT histogram usec") == [
        "Clock skew histogram usec : count 2 avg -100.6005 +/- 99.09 min -199.687 max -1.514 "
        "sum -201.201",
        "# range, mid point, percentile, count",
        ">= -199.687 <= -10 , -104.844 , 50.00, 1",
        "> -2 <= -1.514 , -1.757 , 100.00, 1",
        "# target 50% -199.687",
        "RTT histogram usec : count 6 avg 431.08667 +/- 606.3 min 52.556 max 1729.913 "
        "sum 2586.52",
        "# range, mid point, percentile, count",
        ">= 52.556 <= 60 , 56.278 , 16.67, 1",
        "> 60 <= 70 , 65 , 33.33, 1",
        "> 70 <= 80 , 75 , 50.00, 1",
        "> 110 <= 120 , 115 , 66.67, 1",
        "> 500 <= 600 , 550 , 83.33, 1",
        "> 1600 <= 1729.91 , 1664.96 , 100.00, 1",
        "# target 50% 80",
    ]


@needs_fortio
def test_grpcping_through_a_unix_socket_as_fortio(tmp_path: Path) -> None:
    assert FORTIO is not None
    path = str(tmp_path / "grpc.sock")
    proc = subprocess.Popen(
        [FORTIO, "server", "-http-port", "disabled", "-grpc-port", path, "-tcp-port",
         "disabled", "-udp-port", "disabled", "-redirect-port", "disabled"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env())
    try:
        assert wait_until(lambda: os.path.exists(path), timeout=20)
        # The host:port names the authority only; the bytes go through the socket.
        with reserved_port() as port:
            mine = ours("grpcping", f"localhost:{port}", count=2, unix_socket=path)
            real = theirs("grpcping", "-n", "2", "-unix-socket", path, f"localhost:{port}")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert mine.returncode == real.returncode == 0, (mine.stderr, real.stderr)
    assert _counts(mine.stdout.decode()) == _counts(real.stdout.decode()) == [
        ("Clock skew histogram usec", 2), ("RTT histogram usec", 6)]


@pytest.mark.parametrize(("target", "expected"), [
    ("localhost", ("localhost:8079", False)),
    ("10.0.0.1:1234", ("10.0.0.1:1234", False)),
    ("::1", ("[::1]:8079", False)),
    ("[::1]:9", ("[::1]:9", False)),
    ("http://example.com/", ("example.com:80", False)),
    ("https://example.com", ("example.com:443", True)),
    ("https://example.com:8443/", ("example.com:8443", True)),
])
def test_grpcping_destination_as_fortios(target: str, expected: tuple[str, bool]) -> None:
    from nhbench.compat._fortio_grpcping import grpc_destination
    assert grpc_destination(target) == expected


@pytest.mark.parametrize(("payload", "sent"), [
    (b"plain", "plain"), (b"caf\xc3\xa9", "caf\u00e9"),
    # Fortio's PayloadUTF8: invalid bytes dropped, the length kept with X.
    (b"a\xffb\xfe\xfd", "abXXX"), (b"\xe2\x82", "XX"),
])
def test_grpcping_payload_is_made_utf8_as_fortio(payload: bytes, sent: str) -> None:
    from nhbench.compat._fortio_grpcping import _payload_utf8
    assert _payload_utf8(payload) == sent
