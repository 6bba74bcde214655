"""Run by the Python of a fresh venv that has only the repaired wheel installed, inside a
mount namespace where the system's copies of the libraries the wheel vendors are hidden
(tests/test_wheel.py). It imports nothing from the repository: only the standard library
and the installed nhbench. Prints one JSON object on stdout for the test to check.

    python wheel_inside.py SONAME [SONAME ...]    (the system libraries that must be hidden)
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NHBENCH = str(Path(sys.executable).with_name("nhbench"))
LOADER = "/lib64/ld-linux-x86-64.so.2"
SYSTEM_LIBDIR = "/usr/lib/x86_64-linux-gnu"


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


def hidden(sonames: list[str]) -> dict[str, str]:
    """soname -> why the dynamic loader cannot load the system's copy (empty when it can:
    not hidden). The loader itself is asked (`ld.so --list`), not ctypes: ctypes needs
    libffi, which may be one of the hidden libraries."""
    out = {}
    for soname in sonames:
        proc = subprocess.run([LOADER, "--list", f"{SYSTEM_LIBDIR}/{soname}"],
                              capture_output=True, text=True)
        out[soname] = "" if proc.returncode == 0 else (proc.stderr.strip() or "failed")
    return out


def mapped_libraries() -> list[str]:
    """The shared objects this process has mapped, by path."""
    paths = set()
    for line in Path("/proc/self/maps").read_text().splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and ".so" in fields[5]:
            paths.add(fields[5].strip())
    return sorted(paths)


def start_server(*args: str) -> tuple[subprocess.Popen[str], int]:
    port = free_port()
    proc = subprocess.Popen(
        [NHBENCH, "server", "--listen", f"127.0.0.1:{port}", *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if "listening on" not in line:
        proc.kill()
        raise SystemExit(f"server did not start: {line!r}{proc.stdout.read()}")
    return proc, port


def cli_run(url: str, *args: str) -> dict[str, object]:
    proc = subprocess.run(
        [NHBENCH, "run", url, "--rps", "20", "--duration", "0.5", "--output-format", "json",
         *args],
        capture_output=True, text=True, timeout=60,
    )
    result: dict[str, object] = {"rc": proc.returncode, "stderr": proc.stderr[-2000:]}
    if proc.returncode == 0:
        doc = json.loads(proc.stdout)
        glob = next(r for r in doc["results"] if r["name"] == "global")
        result["counters"] = {c["name"]: int(c["value"]) for c in glob["counters"]}
    return result


def main() -> None:
    sonames = sys.argv[1:]
    report: dict[str, object] = {"hidden": hidden(sonames)}
    version = subprocess.run([NHBENCH, "--version"], capture_output=True, text=True, timeout=60)
    report["version"] = {"rc": version.returncode, "out": version.stdout + version.stderr}

    import nhbench
    import nhbench._core as core

    report["core_file"] = core.__file__
    # The modules of the installed extras ([service], [prometheus], [notebook], [ray]): ""
    # when they import.
    extras = {}
    for module in ("nhbench.service._server", "prometheus_client", "pandas", "matplotlib",
                   "ray"):
        try:
            importlib.import_module(module)
            extras[module] = ""
        except ImportError as exc:  # a missing module or a shared library that will not load
            extras[module] = repr(exc)
    report["extras"] = extras
    plain, plain_port = start_server()
    with tempfile.TemporaryDirectory() as tmp:
        ca = os.path.join(tmp, "ca.pem")
        tls, tls_port = start_server("--tls-self-signed", "--http3", "--tls-ca-out", ca)
        try:
            for _ in range(100):
                if os.path.exists(ca):
                    break
                time.sleep(0.05)
            http = f"http://127.0.0.1:{plain_port}/"
            https = f"https://127.0.0.1:{tls_port}/"
            report["runs"] = {
                "h1": cli_run(http),
                "h2c": cli_run(http, "--h2c"),
                "tls_h1": cli_run(https, "--cacert", ca, "--protocol", "http1"),
                "tls_h2": cli_run(https, "--cacert", ca, "--h2"),
                "h3": cli_run(https, "--cacert", ca, "--h3"),
            }
            api = nhbench.run(https, rps=20, duration=0.5, cacert=ca, protocol="http3")
            report["api"] = {
                "success": api.success, "error": api.error,
                "http_2xx": api.counters.get("benchmark.http_2xx", 0),
                "h3_connections": api.counters.get("upstream_cx_http3_total", 0),
            }
            # [notebook]: the result as a DataFrame, as a notebook shows it.
            frame = api.to_dataframe()
            report["dataframe"] = {"type": type(frame).__module__.split(".")[0],
                                   "rows": len(frame)}
        finally:
            for proc in (plain, tls):
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=30)
    # After the C core ran: every library it maps, by path (the wheel's copies or the
    # system's), for the test to check that none of the vendored names came from the system.
    mapped = mapped_libraries()
    report["mapped"] = mapped
    report["vendored_dir"] = str(Path(core.__file__).parent.parent / "nhbench.libs")
    report["vendored_mapped"] = [p for p in mapped if "/nhbench.libs/" in p]
    print(json.dumps(report))


if __name__ == "__main__":
    main()
