"""The repaired wheel works on a machine without the C libraries it vendors (docs/development.md,
"Wheels").

The wheel named by NHB_WHEEL (built by `nox -s wheel`, which runs this file) is installed into
a fresh venv; then, in a private mount namespace (`unshare -m`), an empty file is bind-mounted
over the system's copy of every library the wheel carries in nhbench.libs/ (libuv, nghttp2,
ngtcp2, nghttp3, GnuTLS and what it needs, OpenSSL, cJSON, Vectorscan, ...), so that a load of
any of them from the system fails. Inside, tests/support/wheel_inside.py checks that they
are hidden and runs `nhbench --version`, `nhbench server` + `nhbench run` over HTTP/1.1, h2c,
TLS (h1 and h2) and HTTP/3 on loopback, and `nhbench.run()` from Python.

Without NHB_WHEEL the test skips and says so: building the wheel takes minutes, so it runs
in its own session (`./dev wheel`), not in `./dev tests`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

pytestmark = [pytest.mark.wheel, pytest.mark.timeout(900)]

INSIDE = Path(__file__).parent / "support" / "wheel_inside.py"
# Extras installed with the wheel (from PyPI) and imported inside: the service's gRPC, the
# Prometheus endpoint, the notebook's pandas and matplotlib, and Ray (about 300 MB in all,
# from pip's cache after the first time).
EXTRAS = ("prometheus", "service", "notebook", "ray")
SYSTEM_LIBDIR = Path("/usr/lib/x86_64-linux-gnu")
# auditwheel names a vendored library by its file name with a hash after the base name:
# libuv.so.1.0.0 -> libuv-1a2b3c4d.so.1.0.0; the system's file of that name is the one the
# soname's link (libuv.so.1) points to.
VENDORED = re.compile(r"^(?P<base>.+?)-[0-9a-f]{8}(?P<ext>\.so(?:\.\d+)*)$")


def base(soname: str) -> str:
    """libuv.so.1.0.0 -> libuv."""
    return soname.split(".so")[0]


def vendored_sonames(wheel: Path) -> list[str]:
    """The file names of the libraries in the wheel's nhbench.libs/, as the system names them."""
    names = []
    with zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            if name.startswith("nhbench.libs/") and not name.endswith("/"):
                match = VENDORED.match(name.removeprefix("nhbench.libs/"))
                assert match, f"unexpected file in nhbench.libs: {name}"
                names.append(match["base"] + match["ext"])
    return sorted(names)


def clean_env() -> dict[str, str]:
    """The environment without the development venv's paths (PYTHONPATH puts the checkout's
    sources first; LD_LIBRARY_PATH could point at the build's libraries)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "LD_LIBRARY_PATH", "LD_PRELOAD", "VIRTUAL_ENV",
                        "PYTHONHOME")}
    env["PATH"] = "/usr/local/bin:/usr/bin:/bin"
    return env


@pytest.fixture(scope="module")
def wheel() -> Path:
    path = os.environ.get("NHB_WHEEL")
    if not path:
        pytest.skip("NHB_WHEEL is not set: run `./dev wheel` (nox -s wheel), which builds "
                    "and repairs the wheel, then runs this test")
    wheel = Path(path)
    assert wheel.is_file(), f"NHB_WHEEL={path}: no such file"
    return wheel


def test_wheel_tag_and_contents(wheel: Path) -> None:
    # A manylinux wheel (the platform tag auditwheel gave it), never a plain linux_x86_64 one.
    assert re.search(r"-manylinux_2_\d+_x86_64\.whl$", wheel.name), wheel.name
    sonames = vendored_sonames(wheel)
    for lib in ("libuv.so.1", "libnghttp2.so.14", "libngtcp2.so", "libnghttp3.so",
                "libngtcp2_crypto_gnutls.so", "libgnutls.so.30", "libssl.so.3",
                "libcrypto.so.3", "libcjson.so.1", "libhs.so.5"):
        assert any(s.startswith(lib) for s in sonames), (lib, sonames)


def _wheel_version(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as archive:
        (metadata,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        found = re.search(r"^Version: (\S+)$", archive.read(metadata).decode(), re.MULTILINE)
        assert found, metadata
        written = archive.read("nhbench/_version.txt").decode().strip()
    assert written == found.group(1), (written, found.group(1))
    return written


def test_the_wheel_and_the_sdist_carry_one_version(wheel: Path) -> None:
    # The version comes from git (docs/development.md, "Versions"): the wheel's metadata, the
    # file nhbench._version reads, and the sdist's PKG-INFO and copy of that file agree, so an
    # sdist built without git (no tags, no .git) still knows its version.
    version = _wheel_version(wheel)
    (sdist,) = wheel.parent.glob("nhbench-*.tar.gz")
    with tarfile.open(sdist) as archive:
        top = f"nhbench-{version}"
        pkg_info = archive.extractfile(f"{top}/PKG-INFO")
        written = archive.extractfile(f"{top}/src/nhbench/_version.txt")
        assert pkg_info is not None and written is not None
        assert f"\nVersion: {version}\n" in pkg_info.read().decode()
        assert written.read().decode().strip() == version


def test_wheel_runs_without_the_system_libraries(wheel: Path, tmp_path: Path) -> None:
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) not found")
    sonames = vendored_sonames(wheel)
    env = clean_env()
    venv = tmp_path / "venv"
    base_python = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base_python, "-m", "venv", str(venv)], check=True, env=env)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
                    "--disable-pip-version-check", f"{wheel}[{','.join(EXTRAS)}]"],
                   check=True, env=env)

    # The check is only worth something if the system has the libraries to hide.
    missing = [s for s in sonames if not (SYSTEM_LIBDIR / s).exists()]
    assert not missing, missing
    # The interpreter's own modules need a few of them (_ssl: OpenSSL, _ctypes: libffi), as
    # on any machine with Python: those stay, and the check below shows that the extension
    # loads the wheel's copies beside them. Every other one is hidden.
    needed = {base(s) for s in interpreter_sonames(base_python)}
    hide = [s for s in sonames if base(s) not in needed]
    assert {"libuv", "libnghttp2", "libngtcp2", "libnghttp3", "libgnutls", "libcjson",
            "libhs"} <= {base(s) for s in hide}, hide
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    mounts = " && ".join(f"mount --bind {empty} {SYSTEM_LIBDIR / s}" for s in hide)
    script = (f"{mounts} && cd {tmp_path} && exec {venv}/bin/python {INSIDE} "
              + " ".join(hide))
    proc = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True,
                          text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])

    # Hidden: a load of each system copy fails inside (the mount covers the real file).
    not_hidden = [s for s, why in report["hidden"].items() if not why]
    assert not not_hidden, not_hidden
    assert report["version"]["rc"] == 0
    assert report["version"]["out"] == f"nhbench {_wheel_version(wheel)}\n", report["version"]
    assert report["core_file"].startswith(str(venv))

    expect = {"h1": "upstream_cx_http1_total", "h2c": "upstream_cx_http2_total",
              "tls_h1": "upstream_cx_http1_total", "tls_h2": "upstream_cx_http2_total",
              "h3": "upstream_cx_http3_total"}
    for name, connections in expect.items():
        run = report["runs"][name]
        assert run["rc"] == 0, (name, run["stderr"])
        assert run["counters"]["benchmark.http_2xx"] == 10, (name, run["counters"])
        assert run["counters"].get(connections, 0) >= 1, (name, run["counters"])
    assert report["api"]["success"], report["api"]
    assert report["api"]["http_2xx"] == 10 and report["api"]["h3_connections"] >= 1
    assert report["extras"] == {"nhbench.service._server": "", "prometheus_client": "",
                                "pandas": "", "matplotlib": "", "ray": ""}, report["extras"]
    assert report["dataframe"]["type"] == "pandas" and report["dataframe"]["rows"] > 0

    # Every library of the wheel that the process mapped came from nhbench.libs/, none from
    # the system: the hidden ones cannot load, and the kept ones (OpenSSL for Python's _ssl)
    # are mapped twice, the system's for the interpreter and the wheel's for the extension.
    libs = Path(report["vendored_dir"]).name
    matches = [VENDORED.match(Path(p).name) for p in report["vendored_mapped"]
               if Path(p).parent.name == libs]
    wheel_mapped = {m["base"] for m in matches if m}
    assert {base(s) for s in sonames} <= wheel_mapped, (sonames, wheel_mapped)
    from_system = [p for p in report["mapped"]
                   if Path(p).parent == SYSTEM_LIBDIR and base(Path(p).name)
                   in {base(s) for s in hide}]
    assert not from_system, from_system


def interpreter_sonames(python: str) -> set[str]:
    """The sonames the interpreter and its extension modules (lib-dynload) link."""
    code = ("import sysconfig, glob, sys; print(sys.executable); "
            "print('\\n'.join(glob.glob(sysconfig.get_path('platstdlib') + '/lib-dynload/*.so')))")
    files = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True,
                           env=clean_env()).stdout.split()
    out = subprocess.run(["ldd", *files], capture_output=True, text=True).stdout
    return set(re.findall(r"^\s+(\S+\.so[.\d]*) =>", out, re.MULTILINE))
