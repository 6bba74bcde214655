"""``nhbench version`` and Fortio's ``version``/``buildinfo`` (docs/development.md, "Versions").

Each case runs the real CLI against the compiled extension of this tree. What it prints is
checked against independent sources: the package's own version string, the commit git
names, the C libraries' versions pkg-config reports for the headers the build used, and the
sanitizer runtime the asan session preloads.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_cli_errors import nhbench_cli

from nhbench import __version__

ROOT = Path(__file__).resolve().parents[1]
LIBRARIES = ["libuv", "llhttp", "nghttp2", "ngtcp2", "nghttp3", "OpenSSL", "GnuTLS", "cJSON",
             "zlib"]
# pkg-config's names of the libraries whose headers the build compiled against.
PKG_CONFIG = {"libuv": "libuv", "nghttp2": "libnghttp2", "ngtcp2": "libngtcp2",
              "nghttp3": "libnghttp3", "GnuTLS": "gnutls", "cJSON": "libcjson", "zlib": "zlib",
              "OpenSSL": "openssl", "Vectorscan": "libhs"}


def _info() -> dict:
    proc = nhbench_cli("version", "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


# Marked core: the asan session runs it against its ASan+UBSan build, where "sanitizers" must
# be true.
@pytest.mark.core
def test_the_json_names_this_build() -> None:
    info = _info()
    assert info["version"] == __version__
    core = info["core"]
    # The extension was compiled with the same version the package reads.
    assert core["version"] == __version__
    assert core["http3"] is True
    asan = "libasan" in os.environ.get("LD_PRELOAD", "")
    assert core["sanitizers"] is asan
    assert set(LIBRARIES) <= set(core["libraries"])
    assert ("Vectorscan" in core["libraries"]) is core["regex_checks"]
    for name, versions in core["libraries"].items():
        assert re.fullmatch(r"\d+\.\d+\.\d+", versions["built"]), (name, versions)
        if name == "llhttp":
            assert versions["linked"] is None
        else:
            assert re.fullmatch(r"\d+\.\d+\.\d+", versions["linked"]), (name, versions)


def test_the_commit_is_the_one_the_version_names() -> None:
    info = _info()
    commit = info["commit"]
    assert commit is not None and re.fullmatch(r"[0-9a-f]{7,40}", commit), commit
    # setuptools-scm's development versions name the commit too (+g<abbreviated hash>).
    named = re.search(r"\+g([0-9a-f]+)", __version__)
    if named:
        assert commit.startswith(named.group(1)), (commit, __version__)
    if (ROOT / ".git").exists() and shutil.which("git"):
        # Built from this checkout: the commit is in its history.
        proc = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-t", commit],
                              capture_output=True, text=True, check=False)
        assert proc.stdout.strip() == "commit", proc.stderr


def test_the_built_against_versions_are_the_headers_pkg_config_names() -> None:
    if shutil.which("pkg-config") is None:
        pytest.skip("pkg-config is not installed: nothing independent to compare with")
    libraries = _info()["core"]["libraries"]
    compared = 0
    for name, package in PKG_CONFIG.items():
        if name not in libraries:
            continue
        proc = subprocess.run(["pkg-config", "--modversion", package], capture_output=True,
                              text=True, check=False)
        if proc.returncode != 0:
            continue
        assert libraries[name]["built"] == proc.stdout.strip(), (name, libraries[name])
        compared += 1
    assert compared >= 5, "pkg-config knew too few of the libraries to compare"


def test_the_human_report_and_the_short_form() -> None:
    proc = nhbench_cli("version")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"nhbench {__version__}"
    info = _info()
    assert f"commit        {info['commit']}" in lines
    for name, versions in info["core"]["libraries"].items():
        assert any(line.split()[:2] == [name, versions["linked"] or versions["built"]]
                   for line in lines), (name, proc.stdout)
    short = nhbench_cli("version", "-s")
    assert (short.returncode, short.stdout, short.stderr) == (0, f"{__version__}\n", "")


def test_json_and_short_are_exclusive() -> None:
    proc = nhbench_cli("version", "--json", "-s")
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "not allowed with" in proc.stderr


def test_fortio_buildinfo_has_fortios_shape() -> None:
    proc = nhbench_cli("fortio", "buildinfo")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    first = lines[0].split(" ")
    assert first[:2] == ["1.66.5", f"nhbench/{__version__}"] and first[2].startswith("python")
    info = _info()
    assert f"mod\tnhbench\t{__version__}\t{info['commit']}" in lines
    deps = {line.split("\t")[1]: line.split("\t")[2] for line in lines if line.startswith("dep\t")}
    assert deps == {name: v["linked"] or v["built"] for name, v in info["core"]["libraries"].items()}
    assert f"build\tsanitizers={str(info['core']['sanitizers']).lower()}" in lines
    # Every line after the first is Go's `key<TAB>value...`.
    assert all(re.fullmatch(r"[a-z]+\t.+", line) for line in lines[1:]), lines


@pytest.mark.parametrize(("argv", "status", "stderr"), [
    # As Fortio 1.66.5: the special words only alone; -s wants a value (Go's flag error, 2);
    # with a value the flags are fine and `version` is an unknown command (1).
    (["version", "-s"], 2, "flag needs an argument: -s"),
    (["version", "-s", "1"], 1, 'unknown command "version"'),
    (["buildinfo", "extra"], 1, 'unknown command "buildinfo"'),
])
def test_fortio_version_words_with_arguments_are_fortios_errors(argv: list[str], status: int,
                                                                 stderr: str) -> None:
    proc = nhbench_cli("fortio", *argv)
    assert proc.returncode == status, proc.stderr
    assert proc.stdout == ""
    assert stderr in proc.stderr


def test_without_the_compiled_extension_it_says_so_and_exits_1(tmp_path: Path) -> None:
    # A copy of the package without its extension (a checkout that was never built, or a
    # broken install): the version and Python are still printed, the core is null and why.
    import nhbench

    package = Path(nhbench.__file__).resolve().parent
    shutil.copytree(package, tmp_path / "src" / "nhbench",
                    ignore=shutil.ignore_patterns("__pycache__", "_core*.so"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(tmp_path / "src")
    proc = subprocess.run([sys.executable, "-m", "nhbench", "version", "--json"], env=env,
                          capture_output=True, text=True, timeout=60, check=False,
                          stdin=subprocess.DEVNULL, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    info = json.loads(proc.stdout)
    assert info["version"] == __version__ and info["core"] is None and info["commit"] is None
    assert "_core" in info["core_error"]
    human = subprocess.run([sys.executable, "-m", "nhbench", "version"], env=env,
                           capture_output=True, text=True, timeout=60, check=False,
                           stdin=subprocess.DEVNULL, cwd=tmp_path)
    assert human.returncode == 1
    assert re.search(r"^C core +not available: .*_core", human.stdout, re.MULTILINE), human.stdout
    assert re.search(r"^commit +unknown \(the C core records it\)$", human.stdout, re.MULTILINE)
