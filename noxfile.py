"""nox sessions for nhbench. Usually driven through ./dev (see docs/development.md).

    nox -s tests            # build (-Werror) + full pytest, then selftest + asan
    nox -s tests -- -k foo  # pytest args; a filtered run skips asan/selftest
    nox -s asan             # ASan+UBSan build + engine/server tests
    nox -s selftest         # C-only selftest (csrc/tests/selftest.c) under ASan+UBSan
    nox -s demo             # build + `nhbench demo`
    nox -s bench            # build + benchmarks/peer_compare.py + server_compare.py
    nox -s lint             # ruff (not part of the default run)
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent

nox.options.sessions = ["tests"]

# 2 cores on the dev/CI machines.
os.environ.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", "2")

WERROR = "--config-settings=cmake.define.NHB_WERROR=ON"
SANITIZE = "--config-settings=cmake.define.NHB_SANITIZE=ON"


def _gcc_runtime(name: str) -> str:
    """Absolute path of a gcc runtime library (libasan.so, libubsan.so)."""
    out = subprocess.run(
        ["gcc", f"-print-file-name={name}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    if not os.path.isabs(out) or not os.path.exists(out):
        raise RuntimeError(f"gcc cannot find {name} (got {out!r}); is gcc installed?")
    return os.path.realpath(out)


def _sanitizer_env() -> dict[str, str]:
    return {
        # The interpreter is not instrumented, so the runtimes must be loaded first.
        "LD_PRELOAD": " ".join(
            [_gcc_runtime("libasan.so"), _gcc_runtime("libubsan.so")]
        ),
        "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1",
        "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
    }


@nox.session(reuse_venv=True)
def tests(session: nox.Session) -> None:
    """Build with -Werror, run the whole pytest suite, then selftest and asan."""
    session.install(WERROR, ".[test]")
    session.run("pytest", "tests", *session.posargs)
    if session.posargs:
        session.log(
            "pytest arguments given: skipping the asan and selftest sessions "
            "(run them with ./dev asan / ./dev selftest)"
        )
        return
    # selftest first (quick), so the log ends with the asan pytest summary.
    if (ROOT / "csrc" / "tests" / "selftest.c").exists():
        session.notify("selftest", posargs=[])
    session.notify("asan", posargs=[])


@nox.session(reuse_venv=True)
def asan(session: nox.Session) -> None:
    """ASan+UBSan build of the extension; engine and server tests under it."""
    session.install(WERROR, SANITIZE, ".[test]")
    files = sorted(
        str(p.relative_to(ROOT))
        for pattern in ("test_engine*.py", "test_server*.py", "test_tls*.py", "test_h2*.py",
                        "hostile/test_*.py")
        for p in (ROOT / "tests").glob(pattern)
    )
    if not files:
        session.error("no tests/test_engine*.py or tests/test_server*.py to run")
    session.run(
        "pytest",
        # Leave fds 1/2 alone so a sanitizer report (written to fd 2 right before
        # the process dies) reaches the log instead of pytest's capture file.
        "--capture=sys",
        "-m",
        "not slow and not peer",
        *files,
        *session.posargs,
        env=_sanitizer_env(),
    )


@nox.session(venv_backend="none")
def selftest(session: nox.Session) -> None:
    """Plain-CMake build of the C core + csrc/tests/selftest.c under ASan+UBSan."""
    if not (ROOT / "csrc" / "tests" / "selftest.c").exists():
        session.skip("no csrc/tests/selftest.c")
    build = ROOT / "build" / "selftest"
    session.run(
        "cmake",
        "-S", str(ROOT),
        "-B", str(build),
        "-DNHB_PYTHON=OFF",
        "-DNHB_SANITIZE=ON",
        "-DNHB_WERROR=ON",
        external=True,
    )
    session.run("cmake", "--build", str(build), "--target", "nhb_selftest", external=True)
    with session.chdir(build):
        session.run(
            "ctest", "--output-on-failure", *session.posargs,
            external=True,
            env={
                "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=1",
                "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
            },
        )


@nox.session(reuse_venv=True)
def demo(session: nox.Session) -> None:
    """Build and run the self-contained demo (embedded server + 5 s load)."""
    session.install(".")
    session.run("nhbench", "demo", *session.posargs)


@nox.session(reuse_venv=True)
def bench(session: nox.Session) -> None:
    """Build and compare against peer tools (benchmarks/peer_compare.py), then the test
    server against nginx (benchmarks/server_compare.py)."""
    session.install(".")
    session.run("python", "benchmarks/peer_compare.py", *session.posargs)
    session.run("python", "benchmarks/server_compare.py", *session.posargs)


@nox.session(reuse_venv=True)
def soak(session: nox.Session) -> None:
    """Build and soak our client against our server (benchmarks/soak.py, default 10 min at
    2000 rps with 1 % connection churn), sampling RSS and fds; ARGS go to the script, e.g.
    `nox -s soak -- --duration 1m`."""
    session.install(".")
    session.run("python", "benchmarks/soak.py", *session.posargs)


@nox.session(reuse_venv=True)
def lint(session: nox.Session) -> None:
    """Static checks of the Python code (not in the default run)."""
    session.install("ruff")
    session.run("ruff", "check", "src", "tests", "noxfile.py", *session.posargs)
