"""``nhbench fortio server|tcp-echo|udp-echo`` (docs/compat.md, "Fortio"): Fortio's servers
run by nhbench's test server and UI, driven by the real Fortio client (load, grpcping, nc,
curl) and compared with the real ``fortio server`` on the same requests. Every listener is
on 127.0.0.1 and a free port, never Fortio's 8080 defaults."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from support.peers import require_fortio

import nhbench
from nhbench.compat._fortio import main, parse
from nhbench.compat._fortio_flags import FORTIO_FLAGS
from nhbench.compat._fortio_server import server_options

pytestmark = pytest.mark.timeout(300)

NHB = [sys.executable, "-m", "nhbench", "fortio"]
READY = re.compile(r"All fortio .*servers started")


def free_port() -> int:
    """A port free for both TCP and UDP on 127.0.0.1 (Fortio's -tcp-port and -udp-port share
    their default)."""
    for _ in range(50):
        with socket.socket() as tcp, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            tcp.bind(("127.0.0.1", 0))
            port = tcp.getsockname()[1]
            try:
                udp.bind(("127.0.0.1", port))
            except OSError:
                continue
            return int(port)
    raise AssertionError("no free port")


@dataclass
class Running:
    process: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)

    @property
    def stderr(self) -> str:
        return "\n".join(self.lines)

    def ui_url(self) -> str:
        for index, line in enumerate(self.lines):
            if line.startswith("UI started - visit:"):
                return self.lines[index + 1].strip()
        raise AssertionError(self.stderr)

    def stats(self) -> dict[str, Any]:
        for line in self.lines:
            if line.startswith("stats {"):
                return dict(json.loads(line[len("stats "):]))
        raise AssertionError(self.stderr)


@contextmanager
def serving(argv: Sequence[str], *, real: bool = False, cwd: str | None = None,
            env: dict[str, str] | None = None) -> Iterator[Running]:
    """`nhbench fortio ARGV` (or the real `fortio ARGV`) until its servers are up; stopped
    with SIGTERM (ours must exit 0 then)."""
    command = [require_fortio(), *argv] if real else [*NHB, *argv]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                               text=True, cwd=cwd, env=env)
    running = Running(process)
    ready = threading.Event()

    def read() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            running.lines.append(line.rstrip("\n"))
            if READY.search(line):
                ready.set()
        ready.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert ready.wait(30) and process.poll() is None, running.stderr
        yield running
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        status = process.wait(timeout=30)
        reader.join(10)
        if process.stderr is not None:
            process.stderr.close()
        if not real:
            assert status == 0, running.stderr


def run(argv: Sequence[str], *, real: bool = True, stdin: str | None = None,
        timeout: float = 60) -> subprocess.CompletedProcess[str]:
    command = [require_fortio(), *argv] if real else [*NHB, *argv]
    return subprocess.run(command, capture_output=True, text=True, input=stdin,
                          timeout=timeout, check=False)


def ports(**names: int) -> list[str]:
    return [arg for name, port in names.items()
            for arg in (f"-{name.replace('_', '-')}", f"127.0.0.1:{port}")]


def get(url: str, timeout: float = 10) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


# ---- the server end to end, driven by the real Fortio client -------------------------------


def test_server_end_to_end(tmp_path: Any) -> None:
    require_fortio()
    http, grpc, echo = free_port(), free_port(), free_port()
    argv = ["server", *ports(http_port=http, grpc_port=grpc, tcp_port=echo, udp_port=echo),
            "-redirect-port", "disabled", "-data-dir", str(tmp_path)]
    with serving(argv) as server:
        load = run(["load", "-qps", "0", "-n", "40", "-c", "2",
                    f"http://127.0.0.1:{http}/"])
        assert load.returncode == 0, load.stderr
        assert "Code 200 : 40 " in load.stdout + load.stderr
        ping = run(["grpcping", "-n", "3", f"127.0.0.1:{grpc}"])
        assert ping.returncode == 0, ping.stderr
        grpc_load = run(["load", "-grpc", "-ping", "-qps", "0", "-n", "10", "-c", "1",
                         f"127.0.0.1:{grpc}"])
        assert grpc_load.returncode == 0, grpc_load.stderr
        assert "SERVING : 10" in grpc_load.stdout + grpc_load.stderr
        tcp = run(["nc", f"127.0.0.1:{echo}"], stdin="hello tcp\n")
        # Fortio's nc writes what it reads on stderr, between its log lines.
        assert tcp.returncode == 0 and "\nhello tcp\n" in tcp.stderr, tcp.stderr
        udp = run(["nc", f"udp://127.0.0.1:{echo}"], stdin="hello udp\n", timeout=30)
        assert "\nhello udp\n" in udp.stderr, udp.stderr
        curl = run(["curl", f"http://127.0.0.1:{http}/echo?status=418&delay=10ms"])
        assert "HTTP/1.1 418" in curl.stdout + curl.stderr
        assert curl.returncode == 1  # Fortio's curl: not a 2xx
    stats = server.stats()
    # The load's 40 (plus Fortio's warm-up request a connection: 2) and the curl; the
    # server counts each gRPC call as a request too.
    assert 41 <= stats["requests"] - stats["grpc_calls"] <= 43, stats
    assert stats["status"].get("418") == 1 or stats["status"].get(418) == 1, stats
    # grpcping's 3 pings and the load's 10, plus the clock-sync and warm-up calls Fortio adds.
    assert 13 <= stats["grpc_calls"] <= 20, stats
    assert stats["tcp_echo_bytes"] == len("hello tcp\n"), stats
    assert stats["udp_echo_packets"] == 1, stats


def default_params_answers(tmp_path: Any, paths: Sequence[str]) \
        -> dict[bool, list[tuple[int, int]]]:
    """(status, body length) of each path, from the real `fortio server` (True) and ours,
    both with -echo-server-default-params status=418&size=7."""
    require_fortio()
    answers = {}
    for real in (True, False):
        http = free_port()
        argv = ["server", "-http-port", f"127.0.0.1:{http}", "-grpc-port", "disabled",
                "-tcp-port", "disabled", "-udp-port", "disabled", "-redirect-port",
                "disabled", "-echo-server-default-params", "status=418&size=7",
                "-data-dir", str(tmp_path)]
        with serving(argv, real=real):
            answers[real] = [
                (code, len(body)) for code, body in
                (get(f"http://127.0.0.1:{http}{path}")
                 for path in paths)]
    return answers


def test_default_params_without_a_query_like_fortio(tmp_path: Any) -> None:
    answers = default_params_answers(tmp_path, ("/", "/foo", "/?status=201&size=0"))
    assert answers[False] == answers[True] == [(418, 7), (418, 7), (201, 0)]


def test_default_params_not_merged_into_a_query_like_fortio(tmp_path: Any) -> None:
    answers = default_params_answers(tmp_path, ("/?x=1", "/foo?size=3"))
    assert answers[True] == [(200, 0), (200, 3)]
    assert answers[False] == answers[True]


def test_ui_rest_run_on_the_http_port(tmp_path: Any) -> None:
    """The UI shares the echo port, as Fortio's: a script driving Fortio's REST API at
    http://host:HTTP_PORT/fortio/rest/... runs unchanged, and the echo keeps answering the
    other paths on that port."""
    http = free_port()
    argv = ["server", "-http-port", f"127.0.0.1:{http}", "-grpc-port", "disabled",
            "-tcp-port", "disabled", "-udp-port", "disabled", "-redirect-port", "disabled",
            "-data-dir", str(tmp_path), "-ui-path", "/fui/"]
    with serving(argv) as server:
        ui = server.ui_url()
        assert ui == f"http://127.0.0.1:{http}/fui/", ui
        code, body = get(f"{ui}rest/run?url=http://127.0.0.1:{http}/&qps=0&n=6&c=2")
        assert code == 200, body
        result = json.loads(body)
        assert result["DurationHistogram"]["Count"] == 6
        assert result["RetCodes"] == {"200": 6}
        code, body = get(f"{ui}rest/status")
        assert code == 200 and json.loads(body)["Statuses"] is not None, body
        assert get(f"http://127.0.0.1:{http}/?status=202")[0] == 202
        assert get(f"http://127.0.0.1:{http}/fortio/")[0] == 200  # not the UI's path: echo
        page = get(ui)
        assert page[0] == 200 and b"<html" in page[1].lower()
        # The real Fortio client fetches the UI's page through the echo port.
        done = run(["curl", ui])
        assert done.returncode == 0 and "HTTP/1.1 200" in done.stderr, done.stderr
        assert "<html" in done.stdout.lower()
    # The UI's 6 (no warm-up through the API's runner) and the 202 were the echo server's;
    # the UI's own requests were forwarded, not answered by it.
    stats = server.stats()
    assert stats["status"] == {"200": 7, "202": 1}, stats


def test_ui_on_every_interface_trusts_only_loopback_clients_without_a_token(
        tmp_path: Any) -> None:
    """Fortio's server listens on every interface: the UI there takes runs from loopback
    clients without a token and asks every other client for the printed one (the hostile
    cases are tests/hostile/test_ui_forward_attacks.py); with NHBENCH_UI_TOKEN it asks
    everyone."""
    http = free_port()
    base = ["server", "-http-port", f"0.0.0.0:{http}", "-grpc-port", "disabled",
            "-tcp-port", "disabled", "-udp-port", "disabled", "-redirect-port", "disabled",
            "-data-dir", str(tmp_path)]
    run_url = f"http://127.0.0.1:{http}/fortio/rest/run?url=http://127.0.0.1:{http}/&n=2&qps=0"
    with serving(base) as server:
        assert server.ui_url() == f"http://localhost:{http}/fortio/"
        assert "token (required from clients not on loopback" in server.stderr
        assert get(run_url)[0] == 200
        assert get(f"http://127.0.0.1:{http}/?status=202")[0] == 202
    env = dict(os.environ, NHBENCH_UI_TOKEN="s3cret-token")
    with serving(base, env=env) as server:
        assert "token (required" not in server.stderr
        refused = get(run_url)
        assert refused[0] == 403, refused
        assert get(run_url + "&token=s3cret-token")[0] == 200


def test_ui_over_tls_gets_its_own_port(tmp_path: Any) -> None:
    """A TLS echo port cannot carry the forward: the UI gets its own loopback port, says so,
    and the echo port answers the UI's path 421."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    http = free_port()
    argv = ["server", "-http-port", f"127.0.0.1:{http}", "-grpc-port", "disabled",
            "-tcp-port", "disabled", "-udp-port", "disabled", "-redirect-port", "disabled",
            "-cert", str(cert), "-key", str(key), "-data-dir", str(tmp_path)]
    with serving(argv) as server:
        assert "the UI cannot share a TLS HTTP port: it gets its own" in server.stderr
        ui = server.ui_url()
        assert ui.startswith("http://127.0.0.1:") and f":{http}/" not in ui, ui
        assert get(f"{ui}rest/status")[0] == 200


@pytest.mark.parametrize("command", ["tcp-echo", "udp-echo"])
def test_echo_commands(command: str) -> None:
    require_fortio()
    port = free_port()
    flag = "-tcp-port" if command == "tcp-echo" else "-udp-port"
    extra = ["-udp-async"] if command == "udp-echo" else []
    with serving([command, flag, f"127.0.0.1:{port}", *extra]) as server:
        target = f"127.0.0.1:{port}" if command == "tcp-echo" else f"udp://127.0.0.1:{port}"
        done = run(["nc", target], stdin="ping\n", timeout=30)
        assert "\nping\n" in done.stderr, done.stderr
        assert not any("UI started" in line for line in server.lines)
    if extra:
        assert "-udp-async: no effect here" in server.stderr


def test_tls_cert_and_key(tmp_path: Any) -> None:
    require_fortio()
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-addext",
                    "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    http, grpc = free_port(), free_port()
    argv = ["server", *ports(http_port=http, grpc_port=grpc), "-tcp-port", "disabled",
            "-udp-port", "disabled", "-redirect-port", "disabled", "-cert", str(cert),
            "-key", str(key), "-data-dir", str(tmp_path)]
    with serving(argv) as server:
        done = run(["curl", "-k", f"https://127.0.0.1:{http}/?status=203"])
        assert "203" in done.stdout + done.stderr, done.stderr
        ping = run(["grpcping", "-cacert", str(cert), "-n", "1", f"https://localhost:{grpc}"])
        assert ping.returncode == 0, ping.stderr
    assert server.stats()["tls_handshakes"] >= 2


def test_mtls_against_the_real_fortio_client(tmp_path: Any) -> None:
    # -mtls: client certificates required and verified against -cacert's CAs, as Fortio's
    # server does; the real Fortio's curl and load with -cert/-key get in, without them not,
    # and nhbench's own fortio load with the same flags gets in too.
    from support.pki import make_pki

    require_fortio()
    pki = make_pki(tmp_path)
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-addext",
                    "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", str(key), "-out",
                    str(cert)], check=True, capture_output=True)
    http = free_port()
    argv = ["server", *ports(http_port=http), "-grpc-port", "disabled", "-tcp-port",
            "disabled", "-udp-port", "disabled", "-redirect-port", "disabled", "-cert",
            str(cert), "-key", str(key), "-mtls", "-cacert", pki.ca, "-data-dir", str(tmp_path)]
    url = f"https://localhost:{http}/"
    with serving(argv) as server:
        good = run(["curl", "-cacert", str(cert), "-cert", pki.cert, "-key", pki.key, url])
        assert good.returncode == 0 and "HTTP/1.1 200" in good.stdout + good.stderr, \
            good.stderr
        bad = run(["curl", "-cacert", str(cert), url])
        assert bad.returncode != 0 and "HTTP/1.1" not in bad.stdout + bad.stderr
        load = run(["load", "-qps", "0", "-n", "20", "-c", "2", "-cacert", str(cert), "-cert",
                    pki.cert, "-key", pki.key, url])
        assert load.returncode == 0 and "Code 200 : 20 " in load.stdout + load.stderr, \
            load.stderr
        ours = run(["load", "-qps", "0", "-n", "20", "-c", "2", "-cacert", str(cert), "-cert",
                    pki.cert, "-key", pki.key, url], real=False)
        assert ours.returncode == 0 and "Code 200 : 20 " in ours.stdout + ours.stderr, \
            ours.stderr
    stats = server.stats()
    assert stats["tls_clients_refused"] >= 1
    assert stats["tls_clients_verified"] >= 5  # curl, and each load's connections
    assert stats["status"]["200"] == 41


# ---- each server flag: its effect, or its refusal by name -----------------------------------


def options(*argv: str, command: str = "server") -> dict[str, Any]:
    read = parse(command, list(argv))
    assert read is not None
    return server_options(read[0], command)


def test_port_forms() -> None:
    assert options()["listen"] == ("0.0.0.0:8080", "0.0.0.0:8079")
    assert options()["tcp_echo"] == options()["udp_echo"] == ("0.0.0.0:8078",)
    assert options("-http-port", "/tmp/x.sock", "-grpc-port", "disabled")["listen"] == (
        "/tmp/x.sock",)
    assert options("-http-port", "[::1]:81", "-grpc-port", ":82")["listen"] == (
        "[::1]:81", "0.0.0.0:82")
    assert options("-http-port", "disabled", "-grpc-port", "disabled")["listen"] == (
        "127.0.0.1:0",)
    assert options("-tcp-port", "disabled", "-udp-port", "disabled")["tcp_echo"] == ()
    assert options(command="tcp-echo")["tcp_echo"] == ("0.0.0.0:8078",)
    assert options(command="tcp-echo")["udp_echo"] == ()


def test_unix_http_port(tmp_path: Any) -> None:
    path = str(tmp_path / "echo.sock")
    argv = ["server", "-http-port", path, "-grpc-port", "disabled", "-tcp-port", "disabled",
            "-udp-port", "disabled", "-redirect-port", "disabled", "-data-dir",
            str(tmp_path)]
    with serving(argv):
        with socket.socket(socket.AF_UNIX) as client:
            client.connect(path)
            client.sendall(b"GET /?status=204 HTTP/1.1\r\nHost: x\r\n\r\n")
            assert client.recv(100).startswith(b"HTTP/1.1 204")


def test_echo_caps_and_idle_timeout(tmp_path: Any) -> None:
    http = free_port()
    argv = ["server", "-http-port", f"127.0.0.1:{http}", "-grpc-port", "disabled",
            "-tcp-port", "disabled", "-udp-port", "disabled", "-redirect-port", "disabled",
            "-max-echo-delay", "50ms", "-maxpayloadsizekb", "1", "-server-idle-timeout",
            "300ms", "-ui-path", "", "-data-dir", str(tmp_path)]
    with serving(argv) as server:
        assert not any("UI started" in line for line in server.lines)
        start = time.monotonic()
        assert get(f"http://127.0.0.1:{http}/?delay=5s")[0] == 200
        assert time.monotonic() - start < 3  # capped at 50ms, not 5s
        assert len(get(f"http://127.0.0.1:{http}/?size=50000")[1]) == 1024
        with socket.create_connection(("127.0.0.1", http), timeout=10) as idle:
            start = time.monotonic()
            assert idle.recv(10) == b""  # closed by the server's idle timeout
            assert time.monotonic() - start < 8


def test_grpc_max_streams_and_health_service() -> None:
    assert options("-grpc-max-streams", "7")["max_concurrent_streams"] == 7
    assert "max_concurrent_streams" not in options()
    assert "max_concurrent_streams" not in options("-grpc-max-streams", "0")
    require_fortio()
    grpc = free_port()
    argv = ["server", "-http-port", "disabled", "-grpc-port", f"127.0.0.1:{grpc}",
            "-tcp-port", "disabled", "-udp-port", "disabled", "-redirect-port", "disabled",
            "-healthservice", "ping", "-grpc-max-streams", "7"]
    with serving(argv):
        done = run(["grpcping", "-health", "-healthservice", "ping", "-n", "1",
                    f"127.0.0.1:{grpc}"])
        assert done.returncode == 0, done.stderr


def debug_answers(tmp_path: Any, flags: Sequence[str], paths: Sequence[str]) \
        -> dict[bool, list[tuple[bool, list[str] | None]]]:
    """For each path, from the real `fortio server` (True) and ours: whether the debug
    handler answered, and the lines of its environment section (None without one). Both
    run with the same environment, which holds a marker variable."""
    require_fortio()
    env = dict(os.environ, NHB_FORTIO_ENV_MARKER="marker-value-7")
    answers = {}
    for real in (True, False):
        http = free_port()
        argv = ["server", "-http-port", f"127.0.0.1:{http}", "-grpc-port", "disabled",
                "-tcp-port", "disabled", "-udp-port", "disabled", "-redirect-port",
                "disabled", "-data-dir", str(tmp_path), *flags]
        with serving(argv, real=real, env=env) as server:
            if not real:
                warned = [line for line in server.lines if "?env=dump exposes" in line]
                assert len(warned) == (1 if "-echo-debug-path" not in flags
                                       or flags[flags.index("-echo-debug-path") + 1] else 0)
            answers[real] = []
            for path in paths:
                code, body = get(f"http://127.0.0.1:{http}{path}")
                text = body.decode("utf-8", "replace")
                _, sep, dump = text.partition("\n\nenvironment:\n\n")
                answers[real].append((code == 200 and "echo debug server up for" in text,
                                      dump.splitlines() if sep else None))
    return answers


def test_echo_options_mapping() -> None:
    pick = ("echo_default_params_when", "debug_path", "debug_env_dump")
    assert [options()[k] for k in pick] == ["no-query", "/debug", True]
    assert [options("-echo-debug-path", "")[k] for k in pick] == ["no-query", "", False]
    assert [options("-echo-debug-path", "/d/")[k] for k in pick] == ["no-query", "/d/", True]
    # The echo-only commands' loopback HTTP listener has no debug echo.
    assert options(command="tcp-echo")["debug_path"] == ""
    assert "debug_env_dump" not in options(command="tcp-echo")


def test_debug_env_dump_like_fortio(tmp_path: Any) -> None:
    queries = ("", "?env=dump", "?env=dum%70", "?env=x&env=dump", "?a=%zz&env=dump",
               "?x;y&env=dump", "?env=dump2")
    answers = debug_answers(tmp_path, (), [f"/debug{q}" for q in queries])
    dumped = [(debug, env is not None) for debug, env in answers[True]]
    assert dumped == [(True, False), (True, True), (True, True), (True, False),
                      (True, True), (True, True), (True, False)]
    assert [(debug, env is not None) for debug, env in answers[False]] == dumped
    fortio_env, our_env = answers[True][1][1], answers[False][1][1]
    assert fortio_env is not None and our_env is not None
    assert "NHB_FORTIO_ENV_MARKER=marker-value-7" in fortio_env
    assert "NHB_FORTIO_ENV_MARKER=marker-value-7" in our_env
    # The same NAME=value lines (ours may have a few the interpreter adds, never fewer).
    assert set(fortio_env) <= set(our_env), set(fortio_env) - set(our_env)


@pytest.mark.parametrize("path", ["/dbg/", "/dbg", ""])
def test_echo_debug_path_like_fortio(tmp_path: Any, path: str) -> None:
    paths = ("/debug", "/debug?env=dump", "/dbg", "/dbg/", "/dbg/x?y=1", "/dbg/echo/",
             "/dbg/echo/x", "/dbgx")
    answers = debug_answers(tmp_path, ("-echo-debug-path", path), paths)
    # Go's mux redirects /dbg to /dbg/ (301) for a subtree: that path is not compared.
    if path == "/dbg/":
        answers = {real: [a for p, a in zip(paths, answers[real], strict=True) if p != "/dbg"]
                   for real in answers}
    shape = {real: [(debug, env is not None) for debug, env in answers[real]]
             for real in answers}
    assert shape[False] == shape[True]
    assert any(debug for debug, _ in shape[True]) == bool(path)


def test_sync_before_serving(tmp_path: Any) -> None:
    """-sync as `report` does it: an unreadable listing exits 1 before anything listens."""
    http = free_port()
    done = run(["server", "-http-port", f"127.0.0.1:{http}", "-grpc-port", "disabled",
                "-tcp-port", "disabled", "-udp-port", "disabled", "-redirect-port",
                "disabled", "-data-dir", str(tmp_path), "-sync",
                f"http://127.0.0.1:{free_port()}/index.tsv", "-sync-interval", "1m"],
               real=False)
    assert done.returncode == 1 and "-sync:" in done.stderr, done.stderr
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", http))  # never listened on


@pytest.mark.parametrize(("argv", "message"), [
    (["-redirect-port", "x:y"], "-redirect-port: 'x:y' is not a port"),
    (["-echo-debug-path", "dbg"], "-echo-debug-path: 'dbg': expected \"\" or a path"),
    (["-echo-debug-path", "/"], "-echo-debug-path: '/': expected"),
    (["-echo-debug-path", "/x/{y}"], "-echo-debug-path: '/x/{y}': expected"),
    (["-healthservice", "other"], "-healthservice: 'other': nhbench's gRPC health"),
    (["-cert", "/x.pem"], "-key: server TLS needs both"),
    (["-tcp-port", "/tmp/t.sock"], "-tcp-port: '/tmp/t.sock': a Unix socket"),
    (["-http-port", "x:y"], "-http-port: 'x:y' is not a port"),
    (["-data-dir", "/nonexistent"], "-data-dir: '/nonexistent' is not a directory"),
    (["-mtls"], "-mtls: needs -cert and -key (mutual TLS is TLS)"),
    (["-cacert", "ca.pem"], "-cacert: the server reads it only with -mtls"),
    (["-P", "1:2"], "-P: '1:2': expected \"localport dest_host:dest_port\""),
    (["-M", "1"], "-M: '1': expected \"localport destURL1 destURL2...\""),
    (["-M", "127.0.0.1:0 https://127.0.0.1:1/"], "-M: https:// fan-out targets are not supported"),
    (["-base-url", "http://x/"], "-base-url: only with `report`"),
])
def test_refused_server_values(argv: list[str], message: str,
                               capsys: pytest.CaptureFixture[str]) -> None:
    http = free_port()
    assert main(["server", "-http-port", f"127.0.0.1:{http}", "-grpc-port", "disabled",
                 "-tcp-port", "disabled", "-udp-port", "disabled", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", http))  # nothing was started


def test_server_flags_refused_by_the_client_commands(capsys: pytest.CaptureFixture[str]) \
        -> None:
    for flag in ("-grpc-port", "-tcp-port", "-ui-path", "-max-echo-delay"):
        assert main(["load", flag, "1", "http://127.0.0.1:1/"]) == 2
        assert f"{flag}: a Fortio server flag" in capsys.readouterr().err
    # tcp-echo reads none of the HTTP server's flags.
    assert main(["tcp-echo", "-http-port", "1"]) == 2
    assert "only with `server`" in capsys.readouterr().err


#: The server commands' flags, each exercised above (test_compat_fortio's
#: test_every_mapped_flag_has_a_test counts them as tested here).
SERVER_FLAGS = {
    "-http-port", "-grpc-port", "-tcp-port", "-udp-port", "-redirect-port",
    "-echo-server-default-params", "-max-echo-delay", "-maxpayloadsizekb",
    "-server-idle-timeout", "-cert", "-key", "-echo-debug-path", "-ui-path", "-data-dir",
    "-sync", "-sync-interval", "-healthservice", "-grpc-max-streams", "-udp-async", "-P",
    "-mtls", "-cacert",
    "-M", "-multi-serial-mode", "-multi-mirror-origin",
}


def test_redirect_and_proxies_commands_as_fortios() -> None:
    # `fortio redirect` and `fortio proxies -P "local dest"`: the same command lines on
    # nhbench, driven by the real Fortio client. The redirect answers Fortio's 303 to https://;
    # a load through the proxy reaches the origin whole.
    redirect = free_port()
    with serving(["redirect", "-redirect-port", f"127.0.0.1:{redirect}"]) as ours:
        status, _ = get_no_follow(f"http://127.0.0.1:{redirect}/some/path?x=1")
        assert status == 303, ours.stderr
    assert ours.stats()["redirects"] >= 1
    with nhbench.TestServer() as origin:
        local = free_port()
        host, port = origin.address
        argv = ["proxies", "-P", f"127.0.0.1:{local} {host}:{port}"]
        with serving(argv) as proxies:
            load = run(["load", "-qps", "0", "-n", "20", "-c", "2",
                        f"http://127.0.0.1:{local}/"])
            assert load.returncode == 0, load.stderr
        assert proxies.stats()["proxy_connections"] >= 2
        assert origin.stats()["requests"] >= 20


def test_proxies_multi_as_fortios() -> None:
    # `fortio proxies -M "local url1 url2"` (and its mode flags): a Fortio load through the
    # fan-out reaches both targets; serial mode with mirroring off fetches each target's own
    # URL and answers the first target's status.
    with nhbench.TestServer() as a, nhbench.TestServer() as b:
        local = free_port()
        argv = ["proxies", "-M", f"127.0.0.1:{local} {a.url} {b.url}"]
        with serving(argv) as multi:
            load = run(["load", "-qps", "0", "-n", "20", "-c", "2",
                        f"http://127.0.0.1:{local}/echo?size=10"])
            assert load.returncode == 0, load.stderr
        assert multi.stats()["fanout_requests"] == 20
        assert a.stats()["requests"] == b.stats()["requests"] == 20
        local = free_port()
        argv = ["server", "-http-port", "disabled", "-grpc-port", "disabled", "-tcp-port",
                "disabled", "-udp-port", "disabled", "-ui-path", "", "-multi-serial-mode",
                "-multi-mirror-origin=false",
                "-M", f"127.0.0.1:{local} {a.url}echo?status=202 {b.url}echo?status=500"]
        with serving(argv):
            import http.client

            connection = http.client.HTTPConnection("127.0.0.1", local, timeout=10)
            connection.request("POST", "/ignored", body=b"x")
            assert connection.getresponse().status == 202
            connection.close()
        assert a.stats()["status"] == {"200": 20, "202": 1}
        assert b.stats()["status"] == {"200": 20, "500": 1}


def get_no_follow(url: str) -> tuple[int, str]:
    """The status and Location of one GET, redirects not followed."""
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        connection.request("GET", parts.path + ("?" + parts.query if parts.query else ""))
        response = connection.getresponse()
        return response.status, response.getheader("Location") or ""
    finally:
        connection.close()


def test_every_server_flag_is_tested_here() -> None:
    servers = {record.name for record in FORTIO_FLAGS
               if {"server", "tcp-echo", "udp-echo", "redirect", "proxies"}
               & set(record.commands)}
    assert servers == SERVER_FLAGS
