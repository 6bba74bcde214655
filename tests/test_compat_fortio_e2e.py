"""End to end with the output module: ``nhbench fortio load -json FILE`` (and ``-a``) read
by Fortio's own Go types (tests/support/fortio_decode, strict: an unknown field or a wrong
type fails) and listed by ``fortio report -data-dir``, for HTTP, gRPC ping, tcp:// and
udp://. Skipped where fortio, go or Fortio's Go module is absent."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.peers import build_fortio_decoder, fortio_binary, fortio_report

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def decoder(tmp_path_factory: Any) -> Path:
    built = build_fortio_decoder(tmp_path_factory.mktemp("fortio-decode"))
    if built is None:
        pytest.skip("go, Fortio's Go module or tests/support/fortio_decode is absent")
    return built


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
    with fortio_report(binary, tmp_path) as url:
        with urllib.request.urlopen(url, timeout=10) as page:
            assert saved.stem in page.read().decode()
        with urllib.request.urlopen(f"{url}data/{saved.name}", timeout=10) as served:
            assert json.loads(served.read())["DurationHistogram"]["Count"] == 6
