"""End to end with the output module: ``nhbench fortio load -json FILE`` (and ``-a``) read
by Fortio's own Go types (tests/support/fortio_decode, strict: an unknown field or a wrong
type fails) and listed by ``fortio report -data-dir``, for HTTP, gRPC ping, tcp:// and
udp://. Skipped where the output module, fortio, go or Fortio's Go module is absent."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.peers import fortio_binary

pytestmark = [
    pytest.mark.timeout(900),
    pytest.mark.skipif(importlib.util.find_spec("nhbench.compat._fortio_output") is None,
                       reason="the Fortio output module is not in this tree"),
]

GO = shutil.which("go") or "/usr/local/go/bin/go"
FORTIO_MODULE = Path.home() / "go/pkg/mod/fortio.org/fortio@v1.66.5"
DECODER = Path(__file__).parent / "support" / "fortio_decode"


@pytest.fixture(scope="module")
def decoder(tmp_path_factory: Any) -> Path:
    if not os.access(GO, os.X_OK) or not FORTIO_MODULE.is_dir() or not DECODER.is_dir():
        pytest.skip("go, Fortio's Go module or tests/support/fortio_decode is absent")
    build = tmp_path_factory.mktemp("fortio-decode")
    for name in ("main.go", "go.mod"):
        shutil.copy(DECODER / name, build / name)
    env = {**os.environ, "GOPROXY": "off", "GOFLAGS": "-mod=mod", "GOSUMDB": "off"}
    subprocess.run([GO, "build", "-o", "decode", "."], cwd=build, env=env, check=True,
                   capture_output=True, timeout=600)
    return build / "decode"


@pytest.fixture(scope="module")
def target() -> Iterator[Any]:
    import nhbench

    with nhbench.TestServer(tcp_echo="127.0.0.1:0", udp_echo="127.0.0.1:0") as server:
        yield server


def targets(server: Any) -> dict[str, tuple[list[str], str]]:
    hostport = server.url.split("//", 1)[1].rstrip("/")
    tcp = "tcp://{}:{}".format(*server.tcp_echo_address[:2])
    udp = "udp://{}:{}".format(*server.udp_echo_address[:2])
    return {
        "http": (["-qps", "40", "-t", "1s", "-c", "2"], server.url + "?status=503:20"),
        "grpc": (["-grpc", "-ping", "-payload", "hello", "-n", "10", "-c", "2"], hostport),
        "tcp": (["-n", "10", "-c", "2", "-payload", "hello"], tcp),
        "udp": (["-n", "10", "-c", "2", "-payload", "hello"], udp),
    }


@pytest.mark.parametrize("kind", ["http", "grpc", "tcp", "udp"])
def test_fortio_decodes_our_json(kind: str, decoder: Path, target: Any,
                                 tmp_path: Path) -> None:
    flags, url = targets(target)[kind]
    out = tmp_path / f"{kind}.json"
    done = subprocess.run([sys.executable, "-m", "nhbench", "fortio", "load", *flags,
                           "-allow-initial-errors", "-json", str(out), url],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    line = json.loads(subprocess.run([str(decoder), str(out)], capture_output=True,
                                     text=True, check=True, timeout=60).stdout)
    assert line.get("Error") is None, line
    expected = 40 if kind == "http" else 10
    assert abs(line["Count"] - expected) <= 1
    document = json.loads(out.read_text())
    assert document["RunType"].startswith({"http": "HTTP", "grpc": "GRPC Ping",
                                           "tcp": "TCP", "udp": "UDP"}[kind])
    # The text report's last line agrees with the JSON's count.
    assert f"All done {line['Count']} calls" in done.stderr


def test_fortio_report_lists_our_auto_saved_result(target: Any, tmp_path: Path) -> None:
    binary = fortio_binary()
    if binary is None:
        pytest.skip("fortio is not installed")
    done = subprocess.run([sys.executable, "-m", "nhbench", "fortio", "load", "-a",
                           "-data-dir", str(tmp_path), "-n", "6", "-c", "2", target.url],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    (saved,) = tmp_path.glob("*.json")
    process = subprocess.Popen([binary, "report", "-data-dir", str(tmp_path), "-http-port",
                                "127.0.0.1:0", "-redirect-port", "disabled"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert process.stdout is not None
        url = None
        for text in process.stdout:
            match = re.search(r"(http://127\.0\.0\.1:\d+/)", text)
            if match:
                url = match.group(1)
                break
        assert url, "fortio report did not say where it listens"
        with urllib.request.urlopen(url, timeout=10) as page:
            assert saved.stem in page.read().decode()
        with urllib.request.urlopen(f"{url}data/{saved.name}", timeout=10) as served:
            assert json.loads(served.read())["DurationHistogram"]["Count"] == 6
    finally:
        process.terminate()
        process.wait(timeout=10)
        assert process.stdout is not None
        process.stdout.close()
