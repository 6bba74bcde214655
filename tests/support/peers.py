"""Where the independent peers the compatibility tests run live on this machine.

Fortio has no Debian package: ./dev installs it with `go install` into Go's bin directory
(GOBIN, else GOPATH/bin), which is usually not on PATH, so it is looked up there too.
Chromium and its driver come from Debian (`chromium`, `chromium-driver`).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

from .polling import wait_until

__all__ = ["FORTIO_MODULE", "build_fortio_decoder", "chromedriver_binary", "chromium_binary",
           "fortio_binary", "fortio_echo_server", "fortio_report", "fortio_servers", "peer_env",
           "require_fortio"]

#: Fortio's Go module as `go install fortio.org/fortio@v1.66.5` left it in the module cache.
FORTIO_MODULE = Path.home() / "go/pkg/mod/fortio.org/fortio@v1.66.5"
_DECODER = Path(__file__).parent / "fortio_decode"


def _go() -> str | None:
    found = shutil.which("go")
    if found:
        return found
    return "/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK) else None


@cache
def fortio_binary() -> str | None:
    """The path of `fortio`, or None when it is not installed."""
    found = shutil.which("fortio")
    if found:
        return found
    go = _go()
    if go is None:
        return None
    try:
        gobin = subprocess.run([go, "env", "GOBIN"], capture_output=True, text=True,
                               check=True, timeout=30).stdout.strip()
        if not gobin:
            gopath = subprocess.run([go, "env", "GOPATH"], capture_output=True, text=True,
                                    check=True, timeout=30).stdout.strip()
            gobin = os.path.join(gopath.split(os.pathsep)[0], "bin")
    except (OSError, subprocess.SubprocessError):
        return None
    candidate = os.path.join(gobin, "fortio")
    return candidate if os.access(candidate, os.X_OK) else None


def peer_env() -> dict[str, str]:
    """This process's environment without the sanitizer runtimes: the asan session preloads
    them for the interpreter, and an independent peer (curl, openssl, fortio) started with
    them preloaded can hang; it needs none of it."""
    return {k: v for k, v in os.environ.items()
            if k not in ("LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS")}


def require_fortio() -> str:
    """The path of `fortio`; the calling test is skipped when it is not installed."""
    import pytest

    binary = fortio_binary()
    if binary is None:
        pytest.skip("fortio is not installed (go install fortio.org/fortio@v1.66.5)")
    return binary


#: Fortio's log line for each server it has bound: its name ("http-echo", "Multi on ...") and
#: the port the kernel gave it.
_FORTIO_LISTENING = re.compile(r'"msg":"Fortio [\d.]+ (.+?) server listening on tcp [\d.]+:(\d+)"')
_FORTIO_READY = re.compile(r"All fortio .* servers started")


@contextmanager
def fortio_echo_server(*args: str) -> Iterator[int]:
    """Real ``fortio server`` with only its HTTP echo (on a loopback port the kernel picks)
    and `args`; the port. The calling test is skipped when Fortio is not installed."""
    with fortio_servers(*args) as ports:
        yield ports["http-echo"]


@contextmanager
def fortio_servers(*args: str) -> Iterator[dict[str, int]]:
    """Real ``fortio server`` with its HTTP echo on port 0 and `args` (pass port 0 for any
    other server too, e.g. ``-M "127.0.0.1:0 URL"``); each server's port by the name Fortio
    logs it under ("http-echo", "Multi on 127.0.0.1:0"), once Fortio has said all are
    started. Read from its log rather than picked beforehand: a port bound and closed to find
    it free can be taken by a parallel test before Fortio binds it."""
    binary = require_fortio()
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(
            [binary, "server", "-http-port", "127.0.0.1:0", "-grpc-port", "disabled",
             "-redirect-port", "disabled", "-tcp-port", "disabled", "-udp-port", "disabled",
             *args],
            stdout=subprocess.DEVNULL, stderr=log)
        try:
            def started() -> bool:
                log.seek(0)
                return bool(_FORTIO_READY.search(log.read())) or proc.poll() is not None

            assert wait_until(started, timeout=20), "fortio server did not start"
            log.seek(0)
            text = log.read()
            assert proc.poll() is None, f"fortio server exited: {text}"
            yield {name: int(port) for name, port in _FORTIO_LISTENING.findall(text)}
        finally:
            proc.terminate()
            proc.wait(timeout=10)


def chromium_binary() -> str | None:
    """Debian's Chromium, or None."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def chromedriver_binary() -> str | None:
    """Debian's chromedriver, or None."""
    return shutil.which("chromedriver")


def build_fortio_decoder(directory: Path) -> Path | None:
    """tests/support/fortio_decode (a strict decoder into Fortio's own result types) built
    offline into `directory` from the module cache; None when go or the module is absent."""
    go = _go()
    if go is None or not FORTIO_MODULE.is_dir():
        return None
    for name in ("main.go", "go.mod"):
        shutil.copy(_DECODER / name, directory / name)
    env = {**os.environ, "GOPROXY": "off", "GOFLAGS": "-mod=mod", "GOSUMDB": "off"}
    subprocess.run([go, "build", "-o", "decode", "."], cwd=directory, env=env, check=True,
                   capture_output=True, timeout=600)
    return directory / "decode"


@contextmanager
def fortio_report(binary: str, data_dir: Path) -> Iterator[str]:
    """The real `fortio report` over `data_dir` on a free loopback port (its redirector
    off), until the block ends; yields its base URL (``http://127.0.0.1:PORT/``)."""
    process = subprocess.Popen(
        [binary, "report", "-data-dir", str(data_dir), "-http-port", "127.0.0.1:0",
         "-redirect-port", "disabled"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url = None
        assert process.stdout is not None
        for line in process.stdout:
            match = re.search(r"(http://127\.0\.0\.1:\d+/)", line)
            if match:
                url = match.group(1)
                break
        assert url, "fortio report did not say where it listens"
        # Fortio prints its URL before it adds its handlers (ui.Report): until then every
        # page is a 404.
        ready = url

        def serving() -> bool:
            try:
                with urllib.request.urlopen(ready, timeout=5) as page:
                    return bool(page.status == 200)
            except urllib.error.HTTPError as exc:
                exc.close()
                return False

        assert wait_until(serving, 30), "fortio report never served its index"
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)
        assert process.stdout is not None
        process.stdout.close()
