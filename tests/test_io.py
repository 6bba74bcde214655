"""The one file writer (`nhbench._io`) and the files the CLI and the test server write.

Real files, FIFOs, devices and processes: the writer itself in this process, ``nhbench run
--output`` and ``nhbench server --address-file/--tls-ca-out`` as subprocesses against the
real test server.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

import nhbench
from nhbench._io import (
    OutputError,
    atomic_writer,
    check_output_path,
    remove_written,
    write_bytes,
    write_output,
    write_text,
)

PACKAGE_PARENT = str(Path(nhbench.__file__).resolve().parent.parent)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_PARENT, env.get("PYTHONPATH")]))
    return env


def cli(*args: str, timeout: float = 60, cwd: Path | None = None
        ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nhbench", *args], capture_output=True, text=True,
        timeout=timeout, env=_env(), stdin=subprocess.DEVNULL, cwd=cwd, check=False,
    )


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("nhbench: error: ")
    return lines[0]


def leftovers(directory: Path) -> list[str]:
    """Temporary files the writer may have left (it must not)."""
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


T = TypeVar("T")


def _fifo_with_reader(fifo: Path, read: Callable[[Path], T]) -> tuple[threading.Thread, list[T]]:
    """Make a FIFO at `fifo` and start a thread that opens it and reads it to the end with
    `read` (the writer's open blocks until a reader has it open); the one value read lands
    in the returned list once the thread ends."""
    os.mkfifo(fifo)
    received: list[T] = []
    reader = threading.Thread(target=lambda: received.append(read(fifo)))
    reader.start()
    return reader, received


@pytest.fixture
def umask_022() -> Iterator[None]:
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


# ---- the writer -------------------------------------------------------------------------


def test_new_file_gets_the_umask_mode(tmp_path: Path) -> None:
    previous = os.umask(0o027)
    try:
        written = write_text(tmp_path / "new.txt", "hello\n")
    finally:
        os.umask(previous)
    target = tmp_path / "new.txt"
    assert target.read_text() == "hello\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert written.created and written.identity == (target.stat().st_dev, target.stat().st_ino)
    assert leftovers(tmp_path) == []


def test_existing_file_keeps_its_mode_and_is_replaced_atomically(tmp_path: Path) -> None:
    target = tmp_path / "result.json"
    target.write_text("old\n")
    target.chmod(0o604)
    old_inode = target.stat().st_ino
    written = write_bytes(target, b"new\n")
    assert target.read_bytes() == b"new\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o604
    assert target.stat().st_ino != old_inode  # a new file renamed into place
    assert not written.created
    assert leftovers(tmp_path) == []


def test_failure_inside_the_writer_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "result.json"
    target.write_text("old\n")
    with pytest.raises(RuntimeError), atomic_writer(target) as handle:
        handle.write("half of the new")
        raise RuntimeError("rendering failed")
    assert target.read_text() == "old\n"
    assert leftovers(tmp_path) == []


def test_symlink_is_followed_and_stays_a_link(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    real = elsewhere / "real.json"
    real.write_text("old\n")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    written = write_text(link, "new\n")
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text() == "new\n"
    assert written.path == str(real)
    assert leftovers(tmp_path) == [] and leftovers(elsewhere) == []


def test_dangling_symlink_creates_its_target(tmp_path: Path) -> None:
    link = tmp_path / "link.json"
    link.symlink_to("target.json")
    written = write_text(link, "x\n")
    assert link.is_symlink() and (tmp_path / "target.json").read_text() == "x\n"
    assert written.created


def test_fifo_is_streamed_into_while_a_reader_reads(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    reader, received = _fifo_with_reader(fifo, Path.read_bytes)
    written = write_output(fifo, b"x" * 300_000)  # more than a pipe buffer holds
    reader.join(timeout=30)
    assert received == [b"x" * 300_000]
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert written.identity is None and not remove_written(written)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]


def test_dev_null_is_streamed_into_and_stays_a_device() -> None:
    before = os.stat("/dev/null")
    written = write_text("/dev/null", "x\n")
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev
    assert after.st_ino == before.st_ino
    assert written.identity is None and not remove_written(written)


def test_descriptor_paths_append_to_what_stdout_is(tmp_path: Path) -> None:
    # `--output /dev/stdout >> log` must append to log, not replace it with a new file.
    log = tmp_path / "log"
    log.write_text("before\n")
    inode = log.stat().st_ino
    code = ("import nhbench._io as io; io.write_output('/dev/stdout', 'a\\n'); "
            "io.write_output('/proc/self/fd/1', 'b\\n'); io.write_output('-', b'c\\n')")
    with log.open("a") as out:
        subprocess.run([sys.executable, "-c", code], stdout=out, env=_env(), check=True,
                       timeout=60)
    assert log.read_text() == "before\na\nb\nc\n"
    assert log.stat().st_ino == inode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log"]


def test_closed_descriptor_path_is_refused() -> None:
    with pytest.raises(ValueError, match="is not an open descriptor"):
        check_output_path("/dev/fd/987")


def test_dev_full_gives_one_line_with_the_reason() -> None:
    with pytest.raises(OutputError) as info:
        write_text("/dev/full", "x" * 10000)
    assert str(info.value) == "cannot write '/dev/full': No space left on device"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("missing/x.json", "directory '{d}/missing' does not exist"),
        ("dir", "'{d}/dir' is a directory"),
        ("file.txt/x.json", "a component of the path is not a directory"),
        ("", "must be a file path"),
    ],
)
def test_check_output_path_refuses(tmp_path: Path, name: str, expected: str) -> None:
    (tmp_path / "dir").mkdir()
    (tmp_path / "file.txt").write_text("x")
    path = str(tmp_path / name) if name else ""
    with pytest.raises(ValueError) as info:
        check_output_path(path)
    assert expected.format(d=tmp_path) in str(info.value)
    with pytest.raises(OutputError):
        write_text(path, "x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir", "file.txt"]


@pytest.mark.parametrize("path", ["/sys/fs/nhbench-x.json", "/sys/kernel/mm/nhbench-x.json"])
def test_a_directory_where_no_file_can_be_created_is_refused_up_front(path: str) -> None:
    # sysfs: its mode bits let root write (access() says yes), and it refuses to create any
    # file; the check tries what the write will do instead of trusting the mode bits.
    if not os.path.isdir(os.path.dirname(path)):
        pytest.skip("no sysfs")
    with pytest.raises(ValueError, match="directory '/sys/"):
        check_output_path(path)


def test_the_check_leaves_nothing_behind(tmp_path: Path) -> None:
    (tmp_path / "old.json").write_text("x")
    before = os.stat(tmp_path / "old.json")
    assert check_output_path(str(tmp_path / "old.json")) == str(tmp_path / "old.json")
    assert check_output_path(str(tmp_path / "new.json")) == str(tmp_path / "new.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.json"]
    assert os.stat(tmp_path / "old.json").st_mtime_ns == before.st_mtime_ns


def test_block_device_is_refused() -> None:
    devices = [e.path for e in os.scandir("/dev")
               if stat.S_ISBLK(e.stat(follow_symlinks=False).st_mode)]
    if not devices:
        pytest.skip("no block device in /dev")
    with pytest.raises(ValueError, match="is a block device"):
        check_output_path(devices[0])
    with pytest.raises(OutputError, match="is a block device"):
        write_text(devices[0], "x")


def test_remove_written_only_removes_what_was_created_and_is_unchanged(tmp_path: Path) -> None:
    created = write_text(tmp_path / "a.json", "x")
    assert remove_written(created) and not (tmp_path / "a.json").exists()

    existing = tmp_path / "b.json"
    existing.write_text("theirs")
    replaced = write_text(existing, "ours")
    assert not remove_written(replaced) and existing.read_text() == "ours"

    created_then_replaced = write_text(tmp_path / "c.json", "ours")
    (tmp_path / "c.json").unlink()
    (tmp_path / "c.json").write_text("someone else's")
    assert not remove_written(created_then_replaced)
    assert (tmp_path / "c.json").read_text() == "someone else's"


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs (needs root and mount permission; skipped otherwise)."""
    mount = tmp_path / "small"
    mount.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {proc.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def test_full_disk_leaves_the_old_file_and_no_temporary(small_tmpfs: Path) -> None:
    target = small_tmpfs / "result.json"
    target.write_text("old\n")
    with pytest.raises(OutputError) as info:
        write_text(target, "x" * 1_000_000)
    assert str(info.value) == f"cannot write {str(target)!r}: No space left on device"
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in small_tmpfs.iterdir()) == ["result.json"]


# ---- nhbench run --output ------------------------------------------------------------------


def test_run_output_into_a_fifo_streams_the_json(server: nhbench.TestServer,
                                                 tmp_path: Path) -> None:
    fifo = tmp_path / "results.pipe"
    reader, received = _fifo_with_reader(fifo, Path.read_text)
    proc = cli("run", server.url, "--rps", "50", "--duration", "0.5", "--output-format", "json",
               "--output", str(fifo))
    reader.join(timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert len(received) == 1
    result = nhbench.Result.model_validate_json(received[0])
    assert result.counters["benchmark.http_2xx"] > 0
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.pipe"]


def test_run_output_dev_null_leaves_a_character_device(server: nhbench.TestServer) -> None:
    before = os.stat("/dev/null")
    proc = cli("run", server.url, "--rps", "20", "--duration", "0.3", "--output", "/dev/null")
    assert proc.returncode == 0, proc.stderr
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and (after.st_ino, after.st_rdev) == (
        before.st_ino, before.st_rdev)


def test_run_output_through_a_symlink(server: nhbench.TestServer, tmp_path: Path) -> None:
    (tmp_path / "results").mkdir()
    link = tmp_path / "latest.json"
    link.symlink_to(tmp_path / "results" / "run1.json")
    proc = cli("run", server.url, "--rps", "20", "--duration", "0.3", "--output-format", "json",
               "--output", str(link))
    assert proc.returncode == 0, proc.stderr
    assert link.is_symlink()
    json.loads((tmp_path / "results" / "run1.json").read_text())
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == ["run1.json"]


def test_run_output_to_a_full_device_is_one_line_exit_1(server: nhbench.TestServer) -> None:
    proc = cli("run", server.url, "--rps", "20", "--duration", "0.3", "--output", "/dev/full")
    assert proc.returncode == 1
    line = one_error_line(proc)
    assert line == "nhbench: error: --output: cannot write '/dev/full': No space left on device"


def test_run_bad_output_path_fails_before_any_load(server: nhbench.TestServer,
                                                   tmp_path: Path) -> None:
    proc = cli("run", server.url, "--rps", "100", "--duration", "2",
               "--output", "/nonexistent-dir/x.json")
    assert proc.returncode == 2
    assert "directory '/nonexistent-dir' does not exist" in one_error_line(proc)
    stats = server.stats()
    assert stats["connections_total"] == 0 and stats["requests"] == 0


# ---- --cacert ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (bytes(range(256)), "no certificate or crl found"),
        (b"", "no certificate or crl found"),
        (b"-----BEGIN CERTIFICATE-----\nAAAA!!\n-----END CERTIFICATE-----\n", "PEM"),
    ],
    ids=["garbage", "empty", "broken-pem"],
)
def test_bad_cacert_exits_2_naming_the_file_and_openssl_reason(
    tmp_path: Path, content: bytes, reason: str
) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_bytes(content)
    proc = cli("run", "https://127.0.0.1:1/", "--cacert", str(ca))
    assert proc.returncode == 2
    line = one_error_line(proc)
    assert f"--cacert: OpenSSL cannot load CA certificates from {str(ca)!r}" in line
    assert reason in line


def test_missing_cacert_exits_2_naming_the_file() -> None:
    proc = cli("run", "https://127.0.0.1:1/", "--cacert", "/nonexistent/ca.pem")
    assert proc.returncode == 2
    assert "--cacert: no such file or directory: '/nonexistent/ca.pem'" in one_error_line(proc)


def test_a_configuration_the_core_rejects_is_invalid_input() -> None:
    # Python checks the syntax of --tls-groups only; OpenSSL knows the names.
    with pytest.raises(nhbench.ConfigRejectedError) as info:
        nhbench.run("https://127.0.0.1:1/", insecure=True, tls_groups="nosuchgroup",
                    duration=1)
    assert isinstance(info.value, nhbench.CoreError)
    assert isinstance(info.value, nhbench.OptionsError)
    proc = cli("run", "https://127.0.0.1:1/", "-k", "--tls-groups", "nosuchgroup")
    assert proc.returncode == 2
    assert "nosuchgroup" in one_error_line(proc)


def test_result_with_a_cacert_of_another_machine_still_loads(tmp_path: Path) -> None:
    options = nhbench.Options(uri="https://127.0.0.1:1/", insecure=True)
    data = json.loads(nhbench.Result.model_validate(
        {"options": options.model_dump(), "results": []}).model_dump_json())
    # cacert is an nhbench-only option: it travels in the nhbench user_defined_outputs entry
    # of Nighthawk's JSON.
    run = data["results"][-1]["user_defined_outputs"][0]["typed_output"]["value"]["run"]
    run["options"]["cacert"] = "/only/on/the/other/machine.pem"
    loaded = nhbench.Result.model_validate(data)
    assert loaded.options.cacert == "/only/on/the/other/machine.pem"


# ---- config and scenario files -------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "name", "content", "expected"),
    [
        ("server", "deep.json", b"[" * 10000 + b"]" * 10000, "nested too deeply"),
        ("server", "deep.yaml", b"a: " + b"[" * 10000 + b"]" * 10000, "nested too deeply"),
        ("server", "latin1.yaml", "note: caf\u00e9\n".encode("latin-1"),
         "not UTF-8 text (byte 0xe9 at offset 9)"),
        ("sweep", "deep.yaml", b"a: " + b"{" * 10000 + b"}" * 10000, "nested too deeply"),
        ("sweep", "latin1.yaml", "note: caf\u00e9\n".encode("latin-1"),
         "not UTF-8 text (byte 0xe9 at offset 9)"),
    ],
)
def test_config_and_scenario_files_give_one_line(
    tmp_path: Path, command: str, name: str, content: bytes, expected: str
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    flag = "--config" if command == "server" else "--scenario"
    proc = cli(command, flag, str(path), cwd=tmp_path)
    assert proc.returncode == 2
    line = one_error_line(proc)
    assert str(path) in line and expected in line
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


# ---- the server's address and CA files -----------------------------------------------------


def _start_server(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "nhbench", "server", "--listen", "127.0.0.1:0", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
        stdin=subprocess.DEVNULL,
    )


def _stop_server(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    line = proc.stdout.readline()  # 'listening on ...': every file has been written
    assert line.startswith("listening on "), proc.stderr.read() if proc.stderr else ""
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    return line


def test_server_removes_the_files_it_created(tmp_path: Path) -> None:
    addresses, ca = tmp_path / "addresses.json", tmp_path / "ca.pem"
    proc = _start_server("--address-file", str(addresses), "--tls-self-signed",
                         "--tls-ca-out", str(ca))
    line = _stop_server(proc)
    assert line.startswith("listening on https://")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_server_leaves_files_that_existed_before_it_started(tmp_path: Path) -> None:
    addresses, ca = tmp_path / "addresses.json", tmp_path / "ca.pem"
    addresses.write_text("{}\n")
    ca.write_text("an older certificate\n")
    proc = _start_server("--address-file", str(addresses), "--tls-self-signed",
                         "--tls-ca-out", str(ca))
    _stop_server(proc)
    # Both were replaced by this server's, and both are still there after it stopped.
    assert json.loads(addresses.read_text())["listen"][0]["kind"] == "tcp"
    assert ca.read_text().startswith("-----BEGIN CERTIFICATE-----")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["addresses.json", "ca.pem"]


def test_server_leaves_a_file_someone_replaced_while_it_ran(tmp_path: Path) -> None:
    addresses = tmp_path / "addresses.json"
    with nhbench.TestServer(address_file=str(addresses)):
        assert json.loads(addresses.read_text())["listen"]
        replacement = tmp_path / "mine.json"
        replacement.write_text("mine\n")
        os.replace(replacement, addresses)
    assert addresses.read_text() == "mine\n"


def test_in_process_server_keeps_an_existing_ca_file_and_removes_a_new_one(
    tmp_path: Path,
) -> None:
    existing, new = tmp_path / "existing.pem", tmp_path / "new.pem"
    existing.write_text("old\n")
    with nhbench.TestServer(tls_self_signed=True, tls_ca_out=str(existing)) as server:
        assert server.ca_cert == str(existing)
        assert existing.read_text().startswith("-----BEGIN CERTIFICATE-----")
    assert existing.exists()
    with nhbench.TestServer(tls_self_signed=True, tls_ca_out=str(new)):
        assert new.exists()
    assert not new.exists()


def test_server_address_file_into_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "addresses.pipe"
    reader, received = _fifo_with_reader(fifo, Path.read_text)
    proc = _start_server("--address-file", str(fifo))
    deadline = time.monotonic() + 30
    while reader.is_alive() and time.monotonic() < deadline:
        reader.join(timeout=0.1)
    _stop_server(proc)
    assert json.loads(received[0])["listen"][0]["kind"] == "tcp"
    assert stat.S_ISFIFO(fifo.lstat().st_mode)  # not removed, not replaced
