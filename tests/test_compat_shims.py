"""``nhbench compat install|uninstall --bin-dir DIR``: wrappers named like Fortio's and
Nighthawk's binaries, run as a script would run them (by name, with DIR first on PATH)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from nhbench.compat._shims import MARKER, SHIMS, install

NAMES = ["fortio", "nighthawk_client", "nighthawk_output_transform", "nighthawk_service",
         "nighthawk_test_server"]


def nhbench_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nhbench", *args], capture_output=True,
                          text=True, timeout=60, check=False)


def by_name(bin_dir: Path, *argv: str, stdin: str | None = None
            ) -> subprocess.CompletedProcess[str]:
    """Run `argv` as a lab script would: by its name, with `bin_dir` first on PATH."""
    env = dict(os.environ, PATH=os.pathsep.join([str(bin_dir), os.environ.get("PATH", "")]))
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=60, env=env,
                          check=False, input=stdin)


def test_install_writes_one_executable_wrapper_per_binary(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"  # created: it does not exist yet
    proc = nhbench_cli("compat", "install", "--bin-dir", str(bin_dir))
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in bin_dir.iterdir()) == sorted(NAMES)
    assert proc.stdout.splitlines() == [
        f"{bin_dir / name} -> nhbench {' '.join(SHIMS[name])}" for name in NAMES]
    for name in NAMES:
        path = bin_dir / name
        assert stat.S_IMODE(path.stat().st_mode) == 0o755
        lines = path.read_text(encoding="utf-8").splitlines()
        assert lines[0] == "#!/bin/sh" and lines[1] == MARKER
        assert lines[2].startswith(f"exec {sys.executable} -m nhbench ")
        assert lines[2].endswith('"$@"')
    assert (bin_dir / "nighthawk_client").read_text().splitlines()[2] == \
        f'exec {sys.executable} -m nhbench nighthawk client "$@"'


def test_the_wrappers_run_nhbench_front_ends(tmp_path: Path) -> None:
    install(tmp_path)
    fortio = by_name(tmp_path, "fortio", "version")
    client = by_name(tmp_path, "nighthawk_client", "--version")
    for proc in (fortio, client):
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip(), proc.stderr


def test_lab_command_lines_run_unchanged_through_the_wrappers(tmp_path: Path,
                                                              server: Any) -> None:
    # What a lab script runs, by name: Nighthawk's README command line (scaled down, human
    # output, Nighthawk's default), its transform of the JSON, and Fortio's load.
    install(tmp_path)
    client = by_name(tmp_path, "nighthawk_client", "--rps", "20", "--connections", "4",
                     "--prefetch-connections", "-v", "info", "--duration", "1",
                     "--output-format", "json", server.url)
    assert client.returncode == 0, client.stderr
    served = server.stats()["requests"]
    assert 15 <= served <= 25
    human = by_name(tmp_path, "nighthawk_output_transform", "--output-format", "human",
                    stdin=client.stdout)
    assert human.returncode == 0, human.stderr
    assert human.stdout.startswith("Nighthawk - A layer 7 protocol benchmarking tool.")
    fortio = by_name(tmp_path, "fortio", "load", "-qps", "20", "-n", "10", "-c", "2",
                     server.url)
    assert fortio.returncode == 0, fortio.stderr
    assert "All done 10 calls" in fortio.stderr
    # Fortio's -n runs with no warm-up: exactly ten more requests reach the origin.
    assert server.stats()["requests"] == served + 10


def test_a_wrapper_passes_every_argument_through_unchanged(tmp_path: Path) -> None:
    # A wrapper of the same making for a command that exists today (`nhbench run`): an
    # argument with spaces, quotes and a $ arrives as given (the error quotes it back).
    install(tmp_path, shims={"nhb_run": ("run",)})
    assert by_name(tmp_path, "nhb_run", "--version").stdout.startswith("nhbench ")
    value = "a 'b' \"c\"$HOME"
    proc = by_name(tmp_path, "nhb_run", "http://127.0.0.1:1/", "--rps", value)
    assert proc.returncode == 2
    assert proc.stderr == f"nhbench: error: --rps: must be a number (got {value!r})\n"


def test_a_file_it_did_not_write_is_never_overwritten(tmp_path: Path) -> None:
    foreign = tmp_path / "nighthawk_service"
    foreign.write_text("#!/bin/sh\necho the real one\n")
    proc = nhbench_cli("compat", "install", "--bin-dir", str(tmp_path))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == (
        f"nhbench: error: --bin-dir: '{foreign}' exists and was not written by nhbench compat "
        f"install; nothing was written (--force replaces it)\n")
    # Nothing written: not even the wrappers whose names were free.
    assert [p.name for p in tmp_path.iterdir()] == ["nighthawk_service"]
    assert foreign.read_text() == "#!/bin/sh\necho the real one\n"
    # A symbolic link (the real binary installed by a package manager) is refused the same.
    foreign.unlink()
    (tmp_path / "fortio").symlink_to("/bin/true")
    assert nhbench_cli("compat", "install", "--bin-dir", str(tmp_path)).returncode == 2
    assert [p.name for p in tmp_path.iterdir()] == ["fortio"]
    # --force replaces it.
    proc = nhbench_cli("compat", "install", "--bin-dir", str(tmp_path), "--force")
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / "fortio").is_symlink()
    assert (tmp_path / "fortio").read_text().splitlines()[1] == MARKER


def test_a_reinstall_replaces_its_own_wrappers(tmp_path: Path) -> None:
    install(tmp_path, python="/old/python")
    assert "/old/python" in (tmp_path / "fortio").read_text()
    proc = nhbench_cli("compat", "install", "--bin-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert f"exec {sys.executable} -m nhbench fortio" in (tmp_path / "fortio").read_text()


def test_uninstall_removes_only_its_own(tmp_path: Path) -> None:
    install(tmp_path)
    (tmp_path / "fortio").unlink()
    (tmp_path / "fortio").write_text("#!/bin/sh\n# the real fortio\n")
    (tmp_path / "other").write_text("x")
    proc = nhbench_cli("compat", "uninstall", "--bin-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [f"removed {tmp_path / name}" for name in NAMES[1:]]
    assert proc.stderr == f"nhbench: left {tmp_path / 'fortio'}: not written by nhbench " \
        "compat install\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fortio", "other"]


@pytest.mark.parametrize(("args", "expected"), [
    (("install",), "the following arguments are required: --bin-dir"),
    (("uninstall", "--bin-dir", "/nonexistent/nhbench-bin"),
     "--bin-dir: '/nonexistent/nhbench-bin' does not exist"),
    (("install", "--bin-dir", "/etc/hostname"), "--bin-dir: '/etc/hostname' is not a directory"),
    (("install", "--bin-dir", "x", "-force"), "unrecognized arguments: -force"),
    ((), "the following arguments are required: ACTION"),
])
def test_bad_input_is_one_line_and_exit_2(args: tuple[str, ...], expected: str) -> None:
    proc = nhbench_cli("compat", *args)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and expected in proc.stderr, proc.stderr
