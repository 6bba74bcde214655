"""The container image of Containerfile works (docs/development.md, "Container image").

The image named by NHB_IMAGE (built by `nox -s image`, which runs this file) is run with
Debian's podman (tests/support/podman.py works around this host's quirks): `nhbench
--version`, its user (not root) and its declared entrypoint and ports; the extras it carries
import; then `nhbench server` runs in containers of its own (plain, and TLS with HTTP/3) and
`nhbench run` in others reaches them over the host's network with HTTP/1.1, h2c, TLS (h1,
h2) and HTTP/3, each run's count checked against the server's, and the servers stop on the
SIGTERM of `podman stop` with status 0 (nhbench is the containers' PID 1).

Only the standard library and pytest: `nox -s image` runs this file with --noconftest in
a venv without nhbench. Without NHB_IMAGE the test skips and says so: building the image
takes minutes, so it runs in its own session (`./dev image`), not in `./dev tests`.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest
from support.podman import RUN_LIMITS, podman

pytestmark = [pytest.mark.image, pytest.mark.timeout(600)]

UID = "10001"
PORTS = {"8000/tcp", "8000/udp", "8080/tcp", "8443/tcp"}
# The modules of the extras the image installs (Containerfile EXTRAS): the gRPC service,
# the Prometheus endpoint, the OTLP push of metrics and the OTLP traces.
EXTRA_MODULES = ("nhbench.service._server", "prometheus_client",
                 "opentelemetry.exporter.otlp.proto.http.metric_exporter", "opentelemetry.proto")


@pytest.fixture(scope="module")
def image() -> str:
    name = os.environ.get("NHB_IMAGE")
    if not name:
        pytest.skip("NHB_IMAGE is not set: run `./dev image` (nox -s image), which builds the "
                    "image from Containerfile, then runs this test")
    if shutil.which("podman") is None or shutil.which("unshare") is None:
        pytest.skip("podman is not installed (./dev image installs it)")
    assert podman("image", "exists", name).returncode == 0, f"NHB_IMAGE={name}: no such image"
    return name


def run(image: str, *args: str, entrypoint: str | None = None, volume: Path | None = None,
        timeout: float = 120) -> tuple[int, str, str]:
    """`podman run --rm` of the image on the host's network: (status, stdout, stderr)."""
    options = ["--rm", "--network", "host", *RUN_LIMITS]
    if entrypoint is not None:
        options += ["--entrypoint", entrypoint]
    if volume is not None:
        options += ["--volume", f"{volume}:/out"]
    proc = podman("run", *options, image, *args, timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr


def free_port() -> int:
    """A port free on loopback for both TCP and UDP (the HTTP/3 server binds both)."""
    while True:
        with socket.socket() as tcp:
            tcp.bind(("127.0.0.1", 0))
            port = int(tcp.getsockname()[1])
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            try:
                udp.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port


def test_version_user_entrypoint_and_ports(image: str) -> None:
    status, out, err = run(image, "--version")
    assert status == 0, err
    assert out.startswith("nhbench "), out
    # The version the image session read from the checkout (the build context has no .git).
    if os.environ.get("NHB_IMAGE_VERSION"):
        assert out == f"nhbench {os.environ['NHB_IMAGE_VERSION']}\n", out
    # The process runs as the image's user, not root, in a group of its own.
    status, out, err = run(image, "-c", "import os; print(os.getuid(), os.getgid())",
                           entrypoint="python3")
    assert status == 0, err
    assert out.split() == [UID, UID]
    inspect = podman("image", "inspect", image)
    assert inspect.returncode == 0, inspect.stderr
    config = json.loads(inspect.stdout)[0]["Config"]
    assert config["User"] == f"{UID}:{UID}"
    assert config["Entrypoint"] == ["nhbench"]
    assert set(config["ExposedPorts"]) == PORTS
    # The image's default command is the help (the only way to print it and exit 0).
    status, out, err = run(image)
    assert status == 0, err
    assert out.startswith("usage: nhbench"), out


def test_the_extras_import(image: str) -> None:
    code = "import importlib, sys\nfor m in sys.argv[1:]: importlib.import_module(m)\nprint('ok')"
    status, out, err = run(image, "-c", code, *EXTRA_MODULES, entrypoint="python3")
    assert status == 0, err
    assert out.strip() == "ok"


@pytest.fixture
def out_dir(tmp_path: Path) -> Path:
    """A directory the containers' user can write (the TLS server's CA certificate)."""
    out = tmp_path / "out"
    out.mkdir()
    out.chmod(0o777)
    return out


class Servers(NamedTuple):
    names: list[str]
    http: str
    https: str
    admin: str


@pytest.fixture
def servers(image: str, out_dir: Path) -> Iterator[Servers]:
    """Two `nhbench server` containers on the host's network: plain (with its admin
    listener) and TLS with HTTP/3 (its generated CA in out_dir)."""
    names = []
    plain, admin, tls = free_port(), free_port(), free_port()
    commands = {
        "plain": ["server", "--listen", f"127.0.0.1:{plain}", "--admin", f"127.0.0.1:{admin}"],
        "tls": ["server", "--listen", f"127.0.0.1:{tls}", "--tls-self-signed", "--http3",
                "--tls-ca-out", "/out/ca.pem"],
    }
    try:
        for kind, command in commands.items():
            name = f"nhbench-image-{kind}-{uuid.uuid4().hex[:8]}"
            started = podman("run", "-d", "--name", name, "--network", "host", *RUN_LIMITS,
                             "--volume", f"{out_dir}:/out", image, *command)
            assert started.returncode == 0, started.stderr
            names.append(name)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            logs = [podman("logs", name).stdout for name in names]
            if all("listening on" in log for log in logs) and (out_dir / "ca.pem").exists():
                break
            time.sleep(0.2)
        else:
            pytest.fail(f"the servers did not start: {logs}")
        yield Servers(names, f"http://127.0.0.1:{plain}/", f"https://127.0.0.1:{tls}/",
                      f"http://127.0.0.1:{admin}/stats")
    finally:
        for name in names:
            podman("rm", "-f", "-t", "0", name)


def served(admin: str) -> int:
    with urllib.request.urlopen(admin, timeout=10) as response:
        return int(json.load(response)["requests"])


def test_server_and_run_in_containers_over_each_protocol(
        image: str, servers: Servers, out_dir: Path) -> None:
    http, https = servers.http, servers.https
    runs = {
        "h1": ([http], "upstream_cx_http1_total"),
        "h2c": ([http, "--h2c"], "upstream_cx_http2_total"),
        "tls_h1": ([https, "--cacert", "/out/ca.pem", "--protocol", "http1"],
                   "upstream_cx_http1_total"),
        "tls_h2": ([https, "--cacert", "/out/ca.pem", "--h2"], "upstream_cx_http2_total"),
        "h3": ([https, "--cacert", "/out/ca.pem", "--h3"], "upstream_cx_http3_total"),
    }
    before = served(servers.admin)
    for name, (args, connections) in runs.items():
        status, out, err = run(image, "run", *args, "--rps", "20", "--duration", "0.5",
                               "--output-format", "json", volume=out_dir)
        assert status == 0, (name, err)
        result = next(r for r in json.loads(out)["results"] if r["name"] == "global")
        counters = {c["name"]: int(c["value"]) for c in result["counters"]}
        assert counters["benchmark.http_2xx"] == 10, (name, counters)
        assert counters.get(connections, 0) >= 1, (name, counters)
    # The plain server's container served the h1 and h2c runs' requests, no more, no less.
    assert served(servers.admin) - before == 20
    # SIGTERM (podman stop) ends each server cleanly: nhbench is PID 1 and handles it.
    for name in servers.names:
        stopped = podman("stop", "-t", "20", name)
        assert stopped.returncode == 0, stopped.stderr
        state = podman("inspect", "--format", "{{.State.ExitCode}}", name)
        assert state.stdout.strip() == "0", (name, state.stdout, podman("logs", name).stderr)
