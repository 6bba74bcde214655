"""docs/fortio.md, the Fortio migration guide, stays true: every command line in its ``sh``
blocks runs against real local servers, and every command of the real ``fortio help`` has a
row in its command table.

The examples use Fortio's ports on ``localhost`` (8080 HTTP, 8079 gRPC, 8078 TCP/UDP echo,
8081 redirector, 8088 a TCP proxy, 8090 a peer's ``report``). The test starts those peers on
free ports (one ``nhbench fortio server`` and one ``nhbench fortio report`` sharing a saved
run) and rewrites each line before running it: ``localhost:80xx`` becomes the peer's port,
any other port of 8000-9999 (a listen address of the example itself) a fresh free port, and
``-t``/``--duration`` one second. A command that serves (``server``, ``report``, ``ui``...)
is started, must print that it listens on each of its ports, and must exit 0 on SIGINT;
the others must exit with the status the line's comment gives (``# exit 1``), 0 by
default, and print what they are for (calls counted, the echo, the histogram...).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from support.peers import fortio_binary
from support.sockets import free_port

import nhbench

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "fortio.md"

#: The peers' ports, by the port the examples give them.
PEER_PORTS = (8078, 8079, 8080, 8081, 8088, 8090)
#: The commands that serve until stopped, and the port flags each opens by default.
SERVING = {
    ("fortio", "server"): ("-http-port", "-grpc-port", "-tcp-port", "-udp-port",
                           "-redirect-port"),
    ("fortio", "tcp-echo"): ("-tcp-port",),
    ("fortio", "udp-echo"): ("-udp-port",),
    ("fortio", "redirect"): ("-redirect-port",),
    ("fortio", "proxies"): (),
    ("fortio", "report"): ("-http-port",),
    ("server", ""): ("--listen",),
    ("ui", ""): ("--listen",),
    ("browse", ""): ("--listen",),
}
_READY = re.compile(r"All fortio servers started|UI started - visit:|^http://|listening on ",
                    re.M)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass
class Example:
    line: str  # as written in the doc, its comment removed
    status: int  # the exit status its comment gives, 0 by default
    number: int  # its line in the doc


def examples() -> list[Example]:
    """Every command line of the doc's ``sh`` blocks."""
    found = []
    fence: str | None = None
    for number, line in enumerate(DOC.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("```"):
            fence = line[3:].strip() if fence is None else None
            continue
        if fence != "sh" or not line.strip():
            continue
        command, _, comment = line.partition(" # ")
        status = re.search(r"\bexit (\d+)", comment)
        found.append(Example(command.strip(), int(status.group(1)) if status else 0, number))
    return found


def _words(line: str) -> tuple[str, str]:
    """(nhbench's command, the Fortio command when it is ``fortio``) of a line."""
    tokens = shlex.split(line.partition("|")[2] or line)
    tokens = tokens[tokens.index("nhbench") + 1:]
    if tokens[0] == "fortio":
        return "fortio", tokens[1]
    return tokens[0], ""


@dataclass
class Rewritten:
    line: str
    #: The fresh ports the line listens on (each must be printed).
    listens: list[int] = field(default_factory=list)


def rewrite(line: str, peers: dict[int, int]) -> Rewritten:
    """The line with the peers' ports, fresh ports for its own listeners and 1 s runs."""
    fresh: dict[str, int] = {}

    def own(port: str) -> str:
        if port not in fresh:
            fresh[port] = free_port()
        return str(fresh[port])

    def peer(match: re.Match[str]) -> str:
        port = int(match.group(2))
        if port in peers:
            return f"{match.group(1)}:{peers[port]}@@"  # @@: not a port to map again
        return f"{match.group(1)}:{own(match.group(2))}@@"

    text = re.sub(r"(localhost|127\.0\.0\.1):(\d{4})\b", peer, line)
    text = re.sub(r"(?<![\w.-])([89]\d{3})\b(?!@@)", lambda m: own(m.group(1)), text)
    text = text.replace("@@", "")
    text = re.sub(r"(?<=\s)-t \S+", "-t 1s", text)
    text = re.sub(r"--duration \S+", "--duration 1s", text)
    words = _words(line)
    if words in SERVING:
        given = set(shlex.split(line))
        for flag in SERVING[words]:
            if flag not in given:
                port = free_port()
                fresh[flag] = port
                text += f" {flag} 127.0.0.1:{port}"
    # Only the ports it listens on: a destination (`-P "8088 localhost:8080"`) is a peer's.
    return Rewritten(text, list(fresh.values()))


# ---- the peers ------------------------------------------------------------------------------


class Serving:
    """A serving command line, run by bash in its own process group, its output collected."""

    def __init__(self, line: str, cwd: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(["bash", "-c", line], cwd=cwd, env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, start_new_session=True)
        self.output: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for text in self.proc.stdout:
            self.output.append(text)

    @property
    def text(self) -> str:
        return "".join(self.output)

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if _READY.search(self.text) and self.proc.poll() is None:
                time.sleep(0.3)  # the lines after the first (the UI's, the last listener's)
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise AssertionError(f"not serving (exit {self.proc.returncode}):\n{self.text}")

    def stop(self) -> int:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
        try:
            status = self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            status = self.proc.wait()
        self._reader.join(timeout=5)
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        return status


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str],
                                                                       dict[int, int]]]:
    """A working directory (with results/ and pulled/), the environment (``nhbench`` on
    PATH is this checkout's, run by this Python) and the peers' ports."""
    base = tmp_path_factory.mktemp("fortio_doc")
    bin_dir = base / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "nhbench"
    shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m nhbench "$@"\n')
    shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           # The nhbench these tests import: a source tree on PYTHONPATH or the installed one.
           "PYTHONPATH": os.pathsep.join(filter(None, [
               str(Path(nhbench.__file__).resolve().parent.parent),
               os.environ.get("PYTHONPATH")]))}
    env.pop("NHBENCH_UI_TOKEN", None)
    peers = {port: free_port() for port in PEER_PORTS}
    peer_dir = base / "peer"
    (peer_dir / "data").mkdir(parents=True)
    local = "127.0.0.1:{}"
    server = Serving(
        f"nhbench fortio server -http-port {local.format(peers[8080])} "
        f"-grpc-port {local.format(peers[8079])} -tcp-port {local.format(peers[8078])} "
        f"-udp-port {local.format(peers[8078])} -redirect-port {local.format(peers[8081])} "
        f"-P '{local.format(peers[8088])} 127.0.0.1:{peers[8080]}' -ui-path ''",
        peer_dir, env)
    report = None
    try:
        server.wait_ready()
        subprocess.run(["nhbench", "fortio", "load", "-qps", "0", "-n", "10", "-a", "-data-dir",
                        "data", f"http://127.0.0.1:{peers[8080]}/echo"], cwd=peer_dir, env=env,
                       check=True, capture_output=True, timeout=60)
        report = Serving(f"nhbench fortio report -data-dir data -http-port "
                         f"{local.format(peers[8090])}", peer_dir, env)
        report.wait_ready()
        work = base / "work"
        for name in ("results", "pulled"):
            (work / name).mkdir(parents=True)
        yield work, env, peers
    finally:
        if report is not None:
            report.stop()
        server.stop()


# ---- the examples --------------------------------------------------------------------------


def test_the_doc_has_its_examples() -> None:
    # The extraction itself: a broken fence or a renamed block would otherwise run nothing.
    found = examples()
    assert len(found) >= 40, [e.line for e in found]
    kinds = {_words(e.line) for e in found}
    assert {("fortio", c) for c in ("load", "curl", "nc", "grpcping", "server", "tcp-echo",
                                    "udp-echo", "redirect", "proxies", "report", "version",
                                    "help")} <= kinds
    assert {("run", ""), ("server", ""), ("ui", ""), ("browse", "")} <= kinds


def test_rewrite_maps_peers_and_own_ports() -> None:
    peers = {port: 10000 + port % 100 for port in PEER_PORTS}
    out = rewrite('nhbench fortio proxies -P "8088 localhost:8080" -t 30s', peers)
    port = out.listens[0]
    assert out.line == f'nhbench fortio proxies -P "{port} localhost:10080" -t 1s'
    out = rewrite("nhbench fortio report -data-dir results", peers)
    assert out.line == f"nhbench fortio report -data-dir results -http-port 127.0.0.1:" \
        f"{out.listens[0]}"
    assert rewrite("nhbench fortio load -qps 5000 -c 8 http://localhost:8079/", peers).line \
        == "nhbench fortio load -qps 5000 -c 8 http://localhost:10079/"


def _check_output(words: tuple[str, str], line: str, stdout: str, stderr: str,
                  cwd: Path) -> None:
    """What the command is for, in its output."""
    tool, sub = words
    if words == ("fortio", "load"):
        done = re.search(r"All done (\d+) calls", stderr)
        assert done and int(done.group(1)) > 0, stderr
        counted = re.search(r"(?:Code 200|SERVING|tcp OK|udp OK) : (\d+)", stderr)
        assert counted and int(counted.group(1)) > 0, stderr
        target = re.search(r"-json (\S+)", line)
        saved = re.search(r">\s*(\S+)\s*$", line)
        if target and target.group(1) != "-":
            assert json.loads((cwd / target.group(1)).read_text())["RunType"] == "HTTP"
        if saved:
            result = json.loads((cwd / saved.group(1)).read_text())
            assert result["DurationHistogram"]["Count"] > 0
    elif words == ("fortio", "curl"):
        assert stderr.startswith("HTTP/1.1 "), stderr
        if "-payload hello" in line:
            assert stdout == "hello"
    elif words == ("fortio", "nc"):
        assert "hello" in stderr
    elif words == ("fortio", "grpcping"):
        count = re.search(r"RTT histogram usec : count (\d+)", stdout)
        assert count and int(count.group(1)) > 0, stdout
    elif words == ("fortio", "version"):
        assert stdout.startswith("1.66.5 (nhbench ")
    elif words == ("fortio", "help"):
        assert "usage:" in stdout and "-qps" in stdout
    elif tool == "run":
        assert "Achieved rate" in stdout + stderr, stdout + stderr
    else:
        raise AssertionError(f"no check for `nhbench {tool} {sub}`: add one")


@pytest.mark.parametrize("example", examples(), ids=lambda e: f"line{e.number}")
def test_example_runs(example: Example,
                      world: tuple[Path, dict[str, str], dict[int, int]]) -> None:
    cwd, env, peers = world
    out = rewrite(example.line, peers)
    words = _words(example.line)
    if words in SERVING:
        serving = Serving(out.line, cwd, env)
        serving.wait_ready()
        status = serving.stop()
        assert status == 0, serving.text
        for port in out.listens:
            assert f":{port}" in serving.text, (out.line, serving.text)
        if "-sync" in out.line:
            assert "sync: 1 fetched" in serving.text, serving.text
        return
    proc = subprocess.run(["bash", "-c", out.line], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == example.status, (out.line, proc.stdout[-2000:],
                                               proc.stderr[-2000:])
    _check_output(words, out.line, proc.stdout, proc.stderr, cwd)


# ---- every command of the real fortio ------------------------------------------------------


def fortio_commands(help_text: str) -> set[str]:
    """The commands `fortio help` names: each ``word (`` of its "where command is one of"
    sentence, and the special arguments in ``{help|envhelp|...}``."""
    text = _ANSI.sub("", help_text)
    sentence = text[text.index("where command is one of:"):text.index("where target is")]
    sentence = re.sub(r"\([^)]*\)", "()", sentence)  # "server (starts ui, ...)"
    found = set(re.findall(r"([a-z][a-z-]*) \(\)", sentence))
    special = re.search(r"\{([a-z|]+)\}", text)
    assert special is not None, text
    return found | set(special.group(1).split("|"))


def test_every_fortio_command_has_a_row() -> None:
    binary = fortio_binary()
    if binary is None:
        pytest.skip("fortio is not installed")
    proc = subprocess.run([binary, "help"], capture_output=True, text=True, timeout=30)
    commands = fortio_commands(proc.stdout + proc.stderr)
    # Fortio 1.66.5's list: a parser that finds fewer has broken, not the doc.
    assert commands >= {"load", "server", "tcp-echo", "udp-echo", "report", "redirect",
                        "proxies", "grpcping", "curl", "nc", "version", "help", "envhelp",
                        "buildinfo"}, commands
    rows = set(re.findall(r"^\| `fortio ([a-z-]+)` \|", DOC.read_text(encoding="utf-8"), re.M))
    assert commands - rows == set()


def test_a_missing_command_is_found() -> None:
    sample = ("where command is one of: load (load testing), server (starts ui,\n"
              " redirect, proxies and grpc ping servers), or nc (single connection).\n"
              "where target is a URL\n\tfortio {help|version}\n")
    assert fortio_commands(sample) == {"load", "server", "nc", "help", "version"}
