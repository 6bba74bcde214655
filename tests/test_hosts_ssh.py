"""SSHHost against a real OpenSSH server (the `sshd` fixture in support/sshd_fixture.py).

Nothing is mocked: every case connects to /usr/sbin/sshd on 127.0.0.1 with generated keys.
"""

from __future__ import annotations

import logging
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.sshd_fixture import SSHServer

from nhbench._exceptions import (
    AuthenticationError,
    CommandError,
    HostError,
    HostKeyError,
    OptionsError,
    UnreachableError,
)
from nhbench.hosts import (
    BackgroundCommand,
    Host,
    LocalHost,
    SSHHost,
    SSHTarget,
    password_from_environment,
)

pytestmark = pytest.mark.peer


def _wait_for(path: Path, what: str) -> None:
    """Wait for a file a remote command creates; generous, because the machine is noisy.
    This is a precondition, not a timing assertion."""
    deadline = time.monotonic() + 60
    while not path.exists():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: {path} never appeared")
        time.sleep(0.02)


# --------------------------------------------------------------------------------------
# SSHTarget
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "user", "host", "port"),
    [
        ("root@10.0.0.5", "root", "10.0.0.5", 22),
        ("lab@gateway.example:2222", "lab", "gateway.example", 2222),
        ("lab@[::1]:2222", "lab", "::1", 2222),
        ("lab@[fe80::1%eth0]", "lab", "fe80::1%eth0", 22),
        ("lab@fe80::1", "lab", "fe80::1", 22),
    ],
)
def test_target_parse(text: str, user: str, host: str, port: int) -> None:
    assert SSHTarget.parse(text) == SSHTarget(user=user, host=host, port=port)


def test_target_defaults_to_local_user_and_port_22() -> None:
    import getpass

    assert SSHTarget.parse("10.0.0.5") == SSHTarget(user=getpass.getuser(), host="10.0.0.5", port=22)


def test_target_str_and_known_hosts_name() -> None:
    assert str(SSHTarget.parse("lab@[::1]:2222")) == "lab@[::1]:2222"
    assert SSHTarget.parse("lab@[::1]:2222").known_hosts_name == "[::1]:2222"
    assert SSHTarget.parse("lab@h").known_hosts_name == "h"


@pytest.mark.parametrize(
    "text",
    ["", "root@", "@host", "root@host:", "root@host:port", "root@host:70000", "root@[::1",
     "root@[nothex]:22", "a b@host", "root@host:22:33", "root@@host"],
)
def test_target_parse_rejects_bad_syntax(text: str) -> None:
    with pytest.raises(OptionsError) as info:
        SSHTarget.parse(text)
    message = str(info.value)
    assert message.startswith("--ssh ")
    assert "\n" not in message
    assert info.value.option == "ssh"


# --------------------------------------------------------------------------------------
# Passwords from the environment / terminal
# --------------------------------------------------------------------------------------


def test_password_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NHB_TEST_PW", "s3cret-value")
    assert password_from_environment("NHB_TEST_PW") == "s3cret-value"
    monkeypatch.setenv("NHB_TEST_PW", "")
    with pytest.raises(OptionsError, match="NHB_TEST_PW is empty") as info:
        password_from_environment("NHB_TEST_PW")
    monkeypatch.delenv("NHB_TEST_PW")
    with pytest.raises(OptionsError, match="NHB_TEST_PW is not set"):
        password_from_environment("NHB_TEST_PW")
    assert "s3cret" not in str(info.value)


def test_prompt_password_without_terminal_is_a_clear_error() -> None:
    # Run in a child without a controlling terminal (setsid) and with stdin from
    # /dev/null, which is how a CI job or a cron job calls nhbench.
    code = (
        "from nhbench.hosts import prompt_password, SSHTarget\n"
        "from nhbench._exceptions import OptionsError\n"
        "try:\n"
        "    prompt_password(SSHTarget.parse('lab@h'))\n"
        "except OptionsError as e:\n"
        "    print(e)\n"
    )
    proc = subprocess.run(
        ["setsid", sys.executable, "-c", code],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(Path(__file__).parents[1] / "src"), "PATH": "/usr/bin:/bin"},
        timeout=60,
        check=False,
    )
    assert "no terminal" in proc.stdout, proc.stderr


# --------------------------------------------------------------------------------------
# Commands
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ssh_host(sshd: SSHServer):
    host = sshd.connect()
    yield host
    host.close()


def test_sshhost_is_a_host(ssh_host: SSHHost, sshd: SSHServer) -> None:
    assert isinstance(ssh_host, Host)
    assert ssh_host.name == f"{sshd.user}@127.0.0.1:{sshd.port}"
    assert repr(ssh_host) == f"SSHHost({ssh_host.name!r})"


def test_run_exit_status_stdout_stderr(ssh_host: SSHHost) -> None:
    result = ssh_host.run("echo out; echo err >&2; exit 3")
    assert (result.exit_status, result.stdout, result.stderr) == (3, "out\n", "err\n")
    assert not result.ok
    with pytest.raises(CommandError, match="exit status 3: err"):
        result.check()
    assert ssh_host.run("true").check().ok


def test_run_quotes_and_pipelines(ssh_host: SSHHost) -> None:
    # The command is handed to sh unchanged, whatever quotes it contains.
    result = ssh_host.run("""printf '%s|' "a b" 'c"d' $((1+2)) | tr '|' ','""")
    assert result.stdout == 'a b,c"d,3,'


def test_run_has_empty_stdin(ssh_host: SSHHost) -> None:
    assert ssh_host.run("cat; echo done").stdout == "done\n"


def test_run_decodes_invalid_utf8_with_replacement(ssh_host: SSHHost) -> None:
    assert ssh_host.run(r"printf 'a\377b'").stdout == "a\ufffdb"


def test_run_large_output_on_both_streams(ssh_host: SSHHost) -> None:
    # More than paramiko's 2 MiB window on each stream at once: the reader must drain
    # stdout and stderr together or the remote command would block forever.
    result = ssh_host.run(
        "head -c 3000000 /dev/zero | tr '\\0' o & head -c 3000000 /dev/zero | tr '\\0' e >&2; wait",
        timeout=120,
    )
    assert result.ok
    assert (len(result.stdout), len(result.stderr)) == (3_000_000, 3_000_000)


def test_run_timeout_kills_the_command(ssh_host: SSHHost, tmp_path: Path) -> None:
    marker = tmp_path / "still-running"
    result = ssh_host.run(f"sleep 1000; touch {marker}", timeout=1)
    assert result.exit_status == -signal.SIGKILL
    assert "timed out after 1 s" in result.stderr
    # The sleep was killed with its shell, so nothing is left to create the marker.
    assert ssh_host.run("pgrep -f 'sleep 100[0]; touch' || true").stdout.strip() == ""


def test_sudo_as_root_runs_directly(ssh_host: SSHHost, sshd: SSHServer) -> None:
    if sshd.user != "root":
        pytest.skip("the fixture's sshd runs as a non-root user; sudo -n would need a sudoers rule")
    assert ssh_host.run("id -u", sudo=True).stdout == "0\n"


def test_start_and_stop_a_long_command(ssh_host: SSHHost, tmp_path: Path) -> None:
    started = tmp_path / "started"
    handle = ssh_host.start(f"touch {started}; exec sleep 30")
    assert isinstance(handle, BackgroundCommand)
    _wait_for(started, "the background command")
    result = handle.stop(timeout=60)
    # Killed by the SIGINT stop() sent, not by the SIGKILL it falls back to.
    assert result.exit_status == -signal.SIGINT, result
    assert handle.stop() is result


def test_stop_captures_output_printed_on_sigint(ssh_host: SSHHost, tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    handle = ssh_host.start(
        f"trap 'echo summary on SIGINT; echo bye >&2; exit 0' INT; echo started; "
        f"touch {ready}; while :; do sleep 0.1; done"
    )
    _wait_for(ready, "the trap")
    result = handle.stop(timeout=60)
    assert result.exit_status == 0
    assert result.stdout == "started\nsummary on SIGINT\n"
    assert result.stderr == "bye\n"


def test_stop_reaches_every_process_of_a_pipeline(ssh_host: SSHHost, tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    # Durations no other test uses, so that pgrep (machine-wide) sees only this pipeline.
    handle = ssh_host.start(f"touch {ready}; sleep 3017 | sleep 3018")
    _wait_for(ready, "the pipeline")
    result = handle.stop(timeout=60)
    # SIGINT ended it, not the SIGKILL that stop() falls back to.
    assert result.exit_status != -signal.SIGKILL, result
    # The shell may be reaped before the first sleep of the pipeline has finished exiting,
    # so the check waits (boundedly) for the processes to go rather than sampling once.
    left = ""
    for _ in range(100):
        left = ssh_host.run("pgrep -x -f 'sleep 301[78]' || true").stdout.strip()
        if not left:
            break
        time.sleep(0.1)
    assert left == ""


def test_stop_after_the_command_finished(ssh_host: SSHHost) -> None:
    handle = ssh_host.start("echo quick")
    result = handle.stop(timeout=60)
    assert (result.exit_status, result.stdout) == (0, "quick\n")


def test_stop_kills_a_command_that_ignores_sigint(ssh_host: SSHHost, tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    handle = ssh_host.start(f"trap '' INT; touch {ready}; exec sleep 300")
    _wait_for(ready, "the command")
    result = handle.stop(timeout=1)
    assert result.exit_status == -signal.SIGKILL
    assert "killed" in result.stderr


def test_fetch(ssh_host: SSHHost, tmp_path: Path) -> None:
    source = tmp_path / "remote.bin"
    payload = bytes(range(256)) * 1000
    source.write_bytes(payload)
    destination = tmp_path / "sub" / "local.bin"
    ssh_host.fetch(str(source), destination)
    assert destination.read_bytes() == payload
    # Only the final file is left: the temporary name was renamed into place.
    assert sorted(p.name for p in destination.parent.iterdir()) == ["local.bin"]


def test_fetch_missing_file(ssh_host: SSHHost, tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="cannot copy /nonexistent/file from"):
        ssh_host.fetch("/nonexistent/file", tmp_path / "x")
    assert list(tmp_path.iterdir()) == []


def test_local_fetch_of_a_missing_file_raises_the_same_error(tmp_path: Path) -> None:
    # Callers (the captures) handle one error type whatever the host is.
    with pytest.raises(CommandError, match="cannot copy /nonexistent/file from local"):
        LocalHost().fetch("/nonexistent/file", tmp_path / "x")
    assert list(tmp_path.iterdir()) == []


def test_closed_host_raises_host_error(sshd: SSHServer) -> None:
    host = sshd.connect()
    host.close()
    host.close()
    with pytest.raises(HostError, match="closed"):
        host.run("true")


# --------------------------------------------------------------------------------------
# Host keys
# --------------------------------------------------------------------------------------


def test_unknown_host_key_is_refused_and_nothing_written(sshd: SSHServer, tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    known.write_text("# empty\n")
    with pytest.raises(HostKeyError) as info:
        sshd.connect(known_hosts=known)
    message = str(info.value)
    assert message.startswith(f"host key for [127.0.0.1]:{sshd.port} is not in {known}; ")
    assert "--ssh-accept-new" in message
    assert "SHA256:" in message
    assert known.read_text() == "# empty\n"
    missing = tmp_path / "absent" / "known_hosts"
    with pytest.raises(HostKeyError):
        sshd.connect(known_hosts=missing)
    assert not missing.parent.exists()


def test_accept_new_records_the_key(sshd: SSHServer, tmp_path: Path) -> None:
    known = tmp_path / "ssh" / "known_hosts"
    with sshd.connect(known_hosts=known, accept_new=True) as host:
        assert host.run("echo hi").stdout == "hi\n"
    assert known.read_text() == sshd.known_hosts_line + "\n"
    with sshd.connect(known_hosts=known) as host:
        assert host.run("echo again").stdout == "again\n"
    # A known key is not appended a second time.
    with sshd.connect(known_hosts=known, accept_new=True):
        pass
    assert known.read_text() == sshd.known_hosts_line + "\n"


def test_accept_new_keeps_existing_lines(sshd: SSHServer, tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    # An existing file without a final newline, with a comment paramiko would drop if it
    # rewrote the file.
    known.write_text("# keep me\n"
                     "other.example ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG0zGK2cS0l4Dm1TyT0fXq0c3bMMZbIuR5Wl2f3yq0iD")
    with sshd.connect(known_hosts=known, accept_new=True):
        pass
    lines = known.read_text().splitlines()
    assert lines[0] == "# keep me"
    assert lines[1].startswith("other.example ")
    assert lines[2] == sshd.known_hosts_line


def test_changed_host_key_is_refused_even_with_accept_new(sshd: SSHServer, tmp_path: Path) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "impostor")], check=True
    )
    impostor = " ".join((tmp_path / "impostor.pub").read_text().split()[:2])
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{sshd.port} {impostor}\n")
    before = known.read_text()
    for accept_new in (False, True):
        with pytest.raises(HostKeyError) as info:
            sshd.connect(known_hosts=known, accept_new=accept_new)
        message = str(info.value)
        assert message.startswith(f"host key for [127.0.0.1]:{sshd.port} has CHANGED: ")
        expected = _fingerprint_of(tmp_path / "impostor.pub")
        offered = _fingerprint_of(sshd.directory / "ssh_host_ed25519_key.pub")
        assert f"has ssh-ed25519 {expected}, the server offered ssh-ed25519 {offered}" in message
        assert f"ssh-keygen -R '[127.0.0.1]:{sshd.port}'" in message
        assert "\n" not in message
    assert known.read_text() == before


def _fingerprint_of(public_key: Path) -> str:
    """The SHA256 fingerprint as OpenSSH's own ssh-keygen prints it."""
    out = subprocess.run(
        ["ssh-keygen", "-l", "-E", "sha256", "-f", str(public_key)], capture_output=True, text=True, check=True
    ).stdout
    return out.split()[1]


# --------------------------------------------------------------------------------------
# Authentication and reachability
# --------------------------------------------------------------------------------------


def test_wrong_user_key_is_refused(sshd: SSHServer) -> None:
    with pytest.raises(AuthenticationError) as info:
        sshd.connect(key_filename=sshd.other_key)
    message = str(info.value)
    assert message.startswith(f"{sshd.user}@127.0.0.1:{sshd.port} refused authentication; ")
    assert f"key {sshd.other_key}" in message


def test_missing_key_file_is_an_options_error(sshd: SSHServer, tmp_path: Path) -> None:
    with pytest.raises(OptionsError, match="--ssh-key .*: no such file"):
        sshd.connect(key_filename=tmp_path / "nope")


def test_unreachable_port(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        # Bound but not listening: connections to it are refused.
        with pytest.raises(UnreachableError, match=f"cannot connect to .*@127.0.0.1:{port}"):
            SSHHost.connect(SSHTarget("root", "127.0.0.1", port), known_hosts=tmp_path / "kh", timeout=5)


def test_unresolvable_host(tmp_path: Path) -> None:
    with pytest.raises(UnreachableError, match="cannot resolve nhbench-no-such-host.invalid"):
        SSHHost.connect(SSHTarget("root", "nhbench-no-such-host.invalid", 22), known_hosts=tmp_path / "kh", timeout=5)


def test_not_an_ssh_server(tmp_path: Path) -> None:
    # A TCP server that accepts and says something that is not an SSH banner.
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        import threading

        def answer() -> None:
            conn, _ = server.accept()
            with conn:
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")

        thread = threading.Thread(target=answer, daemon=True)
        thread.start()
        with pytest.raises(UnreachableError, match="did not answer like an SSH server"):
            SSHHost.connect(SSHTarget("root", "127.0.0.1", port), known_hosts=tmp_path / "kh", timeout=5)
        thread.join(10)


def test_password_login_never_leaks_the_password(
    sshd: SSHServer, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    if sshd.password_login is None:
        pytest.skip(sshd.password_skip_reason)
    user, password = sshd.password_login
    caplog.set_level(logging.DEBUG)  # the root logger: paramiko's records too
    target = sshd.target(user)
    with SSHHost.connect(target, password=password, known_hosts=sshd.known_hosts, use_agent=False) as host:
        assert host.run("id -un").stdout == f"{user}\n"
        assert password not in repr(host)
        assert password not in repr(vars(host))
    wrong = password + "-wrong"
    with pytest.raises(AuthenticationError) as info:
        SSHHost.connect(target, password=wrong, known_hosts=sshd.known_hosts, use_agent=False)
    assert "a password" in str(info.value)
    assert any(r.name.startswith("paramiko") for r in caplog.records), "paramiko's logging was not captured"
    for record in caplog.records:
        text = record.getMessage() + (record.exc_text or "")
        assert password not in text, record
    for text in (str(info.value), repr(info.value), str(info.value.__cause__), str(info.value.__context__)):
        assert password not in text


def test_masking_filter_hides_a_logged_password(sshd: SSHServer, caplog: pytest.LogCaptureFixture) -> None:
    # paramiko does not log passwords; this proves the safety net works should one ever
    # do so, by logging the password on paramiko's logger from inside the connection
    # (through a host-key policy, which paramiko calls in the middle of connect()).
    if sshd.password_login is None:
        pytest.skip(sshd.password_skip_reason)
    user, password = sshd.password_login
    from nhbench.hosts import _ssh_connect

    caplog.set_level(logging.DEBUG)
    original = _ssh_connect._RefuseUnknownKey.missing_host_key

    def leaky(self, client, hostname, key):  # type: ignore[no-untyped-def]
        logging.getLogger("paramiko.transport.nhbench").debug("oops %s", password)
        return original(self, client, hostname, key)

    _ssh_connect._RefuseUnknownKey.missing_host_key = leaky  # type: ignore[method-assign]
    try:
        with pytest.raises(HostKeyError):
            SSHHost.connect(sshd.target(user), password=password, known_hosts=sshd.directory / "none", use_agent=False)
    finally:
        _ssh_connect._RefuseUnknownKey.missing_host_key = original  # type: ignore[method-assign]
    messages = [r.getMessage() for r in caplog.records if r.getMessage().startswith("oops")]
    assert messages == ["oops ********"]


def test_jump_host(sshd: SSHServer) -> None:
    # The same sshd serves as the jump host and, through a direct-tcpip channel, the target.
    with sshd.connect(jump=sshd.target()) as host:
        assert host.run("echo via jump").stdout == "via jump\n"
        assert repr(host) == f"SSHHost({host.name!r} via {sshd.target()})"
    # The connection to the target went through sshd itself: it logged a forwarding.
    assert "direct-tcpip" in sshd.log() or "Connection from 127.0.0.1" in sshd.log()


def test_jump_host_that_cannot_reach_the_target(sshd: SSHServer) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        with pytest.raises(UnreachableError, match=f"jump host .* cannot reach 127.0.0.1 port {port}"):
            sshd.connect(target=SSHTarget(sshd.user, "127.0.0.1", port), jump=sshd.target())


def test_jump_host_key_unknown_names_the_jump_host(sshd: SSHServer, tmp_path: Path) -> None:
    with pytest.raises(HostKeyError, match=r"\(the jump host\) is not in"):
        sshd.connect(known_hosts=tmp_path / "kh", jump=sshd.target())
