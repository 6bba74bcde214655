"""The real client against a hostile origin, one misbehaviour per mode (origin_modes.py).

Every mode gets the same checks: the run returns (no crash, no hang) within duration +
drain_timeout + 1 s, its memory stays bounded, and every released request ended exactly once
(accounting.py). Each mode adds what its counters must say (``Mode.expect``). Most modes
run the client in-process (``nhbench.run()``); a few run ``python -m nhbench run`` as a
subprocess, so that a crash shows as a signal exit and the child's own peak RSS is measured.

Modes whose expectation fails because of a known defect (docs/reliability.md) are marked
``xfail(strict=True)`` with the defect's number; the mark goes when the fix is merged.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.accounting import accounting, assert_accounting
from support.cli import PEAK_RSS_MAIN
from support.scripted_origin import ScriptedOrigin

import nhbench

from .origin_modes import DRAIN, DURATION, Mode, modes

pytestmark = [pytest.mark.hostile, pytest.mark.core]

CPUS = sorted(os.sched_getaffinity(0))
CLIENT_CPU = str(CPUS[0])

# Wide on purpose: the client's working set is a few MB. An endless body or header block
# kept in full grows at loopback speed (hundreds of MB per second even from a Python
# sender), so it very likely crosses this within the run; a slow leak would not, which is
# what the soak benchmark is for.
RSS_BOUND_MB = 200
# Under the ASan+UBSan build (nox -s asan preloads the runtimes) a child's RSS starts with
# ASan's shadow memory and grows by its 256 MB free quarantine: a control run peaks at about
# 430 MB. The bound for a subprocess there is wider; an unbounded buffer still breaks it.
SANITIZED = "libasan" in os.environ.get("LD_PRELOAD", "")
SUBPROCESS_RSS_BOUND_MB = 1024 if SANITIZED else RSS_BOUND_MB

# The table, built once with a placeholder stop event for the names and marks; each test
# builds its own handlers bound to its own origin.
_TABLE = {m.name: m for m in modes(threading.Event())}
# These also run as a subprocess: one per family (h1 framing, endless, h2 storm, h2 HPACK,
# TLS) plus a control.
SUBPROCESS_MODES = ["h1_ok", "garbage_after_chunk_data", "endless_headers",
                    "h2_goaway_zero_every_connection", "h2_hpack_bomb",
                    "tls_garbage_after_handshake"]


def _params(names: list[str]) -> list[object]:
    return [
        pytest.param(name, marks=[pytest.mark.xfail(strict=True, reason=_TABLE[name].xfail)]
                     if _TABLE[name].xfail else [], id=name)
        for name in names
    ]


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A self-signed EC certificate for 127.0.0.1 (the openssl command, as nginx_origin.py)."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is not installed")
    tmp = tmp_path_factory.mktemp("hostile-tls")
    cert, key = tmp / "cert.pem", tmp / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=hostile",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )
    return str(cert), str(key)


def _origin(name: str, tls_files: tuple[str, str] | None) -> ScriptedOrigin:
    """A scripted origin serving mode ``name``, its handler bound to the origin's stop event."""
    import ssl

    handlers: list[object] = []
    mode = _TABLE[name]
    context = None
    if mode.tls and mode.origin_tls:
        assert tls_files is not None
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*tls_files)
        context.set_alpn_protocols(["http/1.1"])
    origin = ScriptedOrigin(handler=lambda conn: handlers[0](conn), ssl_context=context)
    # The handlers wait on the origin's own stop event, which exists only now.
    handlers.append({m.name: m for m in modes(origin.stopped)}[name].handler)
    return origin


def _url(origin: ScriptedOrigin, mode: Mode) -> str:
    return f"https://127.0.0.1:{origin.port}/" if mode.tls else origin.url


@pytest.fixture
def maybe_tls(request: pytest.FixtureRequest) -> Iterator[tuple[str, str] | None]:
    name = request.node.callspec.params["name"]
    yield request.getfixturevalue("tls_files") if _TABLE[name].tls else None


def _client_kwargs(mode: Mode, tls: tuple[str, str] | None) -> dict[str, object]:
    kw: dict[str, object] = {
        "rps": 200, "duration": DURATION, "drain_timeout": DRAIN, "connections": 2,
        "cpus": CLIENT_CPU, "no_default_failure_predicates": True, "protocol": mode.protocol,
    }
    if tls is not None:
        kw["cacert"] = tls[0]
    kw.update(mode.client)
    return kw


def _reset_peak_rss() -> int | None:
    """Reset this process's peak RSS (VmHWM) to its current RSS; the RSS in kB, or None
    when the kernel does not allow it (then the memory check is skipped, and says so)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return None
    return _status_kb("VmRSS")


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/self/status")


@pytest.mark.serial
@pytest.mark.parametrize("name", _params(list(_TABLE)))
def test_client_survives_hostile_origin(name: str, maybe_tls: tuple[str, str] | None) -> None:
    mode = _TABLE[name]
    with _origin(name, maybe_tls) as origin:
        base_kb = _reset_peak_rss()
        start = time.monotonic()
        result = nhbench.run(_url(origin, mode), **_client_kwargs(mode, maybe_tls))
        elapsed = time.monotonic() - start
    c = result.counters
    assert elapsed <= DURATION + DRAIN + 1.0, f"the run took {elapsed:.2f} s"
    if base_kb is not None:
        grown_mb = (_status_kb("VmHWM") - base_kb) / 1024
        assert grown_mb < RSS_BOUND_MB, f"peak RSS grew by {grown_mb:.0f} MB"
    assert_accounting(c)
    assert mode.expect(c), accounting(c)


def _startup_allowance() -> float:
    """Seconds ``python -m nhbench`` needs to start and exit on this machine right now (the
    interpreter and the package import), measured, so that the subprocess bound is still
    "duration + drain + 1 s" for the run itself on a loaded 2-core machine."""
    start = time.monotonic()
    # The package imports its run modules on first use, so they are imported here
    # as a run imports them (``run --help`` alone no longer loads them).
    subprocess.run([sys.executable, "-c", "import nhbench._run, nhbench.distributed\n"
                    "from nhbench.cli import main\nmain(['run', '--help'])"], check=True,
                   capture_output=True)
    return time.monotonic() - start


def _wait_with_rusage(proc: subprocess.Popen[bytes], timeout: float) -> tuple[int, int]:
    """(exit status, peak RSS in kB) of the child, through wait4 (its own rusage, not the
    maximum over every child this process ever had). Kills it after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, usage.ru_maxrss
        if time.monotonic() > deadline:
            proc.kill()
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            raise AssertionError(f"the client did not exit within {timeout:.1f} s")
        time.sleep(0.02)


@pytest.mark.serial
@pytest.mark.parametrize("name", _params(SUBPROCESS_MODES))
def test_client_subprocess_survives_hostile_origin(
    name: str, maybe_tls: tuple[str, str] | None, tmp_path: Path
) -> None:
    mode = _TABLE[name]
    allowance = _startup_allowance()
    kw = _client_kwargs(mode, maybe_tls)
    # The child's own peak RSS (VmHWM at its exit): wait4's would count this test process,
    # which the child is forked from.
    peak_file = tmp_path / "peak"
    args = [sys.executable, "-c", PEAK_RSS_MAIN, "run", "--output-format", "json",
            "--rps", str(kw["rps"]), "--duration", str(DURATION), "--drain-timeout", str(DRAIN),
            "--connections", "2", "--cpus", CLIENT_CPU, "--no-default-failure-predicates",
            "--protocol", mode.protocol]
    if maybe_tls is not None:
        args += ["--cacert", maybe_tls[0]]
    for key, value in mode.client.items():
        flag = "--" + key.replace("_", "-")
        if key != "rps":  # already given, from kw
            args += [flag] if value is True else [flag, str(value)]
    out, err = tmp_path / "out.json", tmp_path / "err.txt"
    with _origin(name, maybe_tls) as origin, open(out, "wb") as stdout, open(err, "wb") as stderr:
        start = time.monotonic()
        proc = subprocess.Popen([*args, _url(origin, mode)], stdout=stdout, stderr=stderr,
                                env={**os.environ, "NHB_PEAK_FILE": str(peak_file)})
        code, _ = _wait_with_rusage(proc, DURATION + DRAIN + 1.0 + allowance + 10)
        elapsed = time.monotonic() - start
    stderr_text = err.read_text(errors="replace")
    # A signal shows as a negative status; 2 would be an options error (a broken test).
    # 0 or 1: whether a run with no success is a failure is branch `outcome`'s rule.
    assert code in (0, 1), f"exit status {code}: {stderr_text[-2000:]}"
    assert "Traceback" not in stderr_text
    assert elapsed <= DURATION + DRAIN + 1.0 + allowance, \
        f"exited after {elapsed:.2f} s (start-up allowance {allowance:.2f} s)"
    maxrss_kb = int(peak_file.read_text())
    assert maxrss_kb / 1024 < SUBPROCESS_RSS_BOUND_MB, f"peak RSS {maxrss_kb / 1024:.0f} MB"
    result = nhbench.Result.model_validate_json(out.read_text())
    assert_accounting(result.counters)
    assert mode.expect(result.counters), accounting(result.counters)
