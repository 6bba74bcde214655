"""A real OpenSSH server for tests: the session-scoped `sshd` fixture.

It starts ``/usr/sbin/sshd -D -e`` on 127.0.0.1 with a free port, a generated ed25519 host
key, a generated user key in its own authorized_keys file, and an internal SFTP server. It
runs as the user running the tests, and tests log in as that same user with `user_key`.
Registered for every test file through ``pytest_plugins`` in conftest.py.

Tests that need a password login use `SSHServer.password_login`, a throwaway system user
created only when the tests run as root and useradd/chpasswd exist (and removed at the end
of the session); otherwise it is None and `password_skip_reason` says why.

The whole fixture skips (with the reason) when sshd or ssh-keygen is not installed; ./dev
installs openssh-server for the test suite.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

__all__ = ["SSHServer", "sshd"]

SSHD = "/usr/sbin/sshd"


@dataclass
class SSHServer:
    """What a test needs to reach the fixture's sshd."""

    host: str
    port: int
    user: str
    #: Private key accepted for `user` (in the server's authorized_keys).
    user_key: Path
    #: A valid private key the server does NOT accept.
    other_key: Path
    #: A known_hosts file that holds the server's host key (tests must not modify it).
    known_hosts: Path
    #: The known_hosts line for the server's host key.
    known_hosts_line: str
    #: The host key's public half, "ssh-ed25519 AAAA...".
    host_public_key: str
    directory: Path
    log_file: Path
    #: (user, password) of a throwaway account that may log in with a password, or None.
    password_login: tuple[str, str] | None = None
    password_skip_reason: str = ""
    _process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def address(self) -> str:
        """``user@127.0.0.1:port``, as given to ``--ssh``."""
        return f"{self.user}@{self.host}:{self.port}"

    def target(self, user: str | None = None) -> Any:
        from nhbench.hosts import SSHTarget

        return SSHTarget(user=user or self.user, host=self.host, port=self.port)

    def connect(self, **options: Any) -> Any:
        """`SSHHost.connect` to this server with the user key and the fixture's
        known_hosts, without the SSH agent; keyword arguments override those."""
        from nhbench.hosts import SSHHost

        options.setdefault("key_filename", self.user_key)
        options.setdefault("known_hosts", self.known_hosts)
        options.setdefault("use_agent", False)
        target = options.pop("target", None) or self.target()
        return SSHHost.connect(target, **options)

    def log(self) -> str:
        """What sshd has logged so far (useful in assertion messages)."""
        return self.log_file.read_text(errors="replace")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _keygen(path: Path, comment: str) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True,
        capture_output=True,
    )


def _config(directory: Path, port: int, penalties: bool) -> str:
    lines = [
        f"Port {port}",
        "ListenAddress 127.0.0.1",
        f"HostKey {directory / 'ssh_host_ed25519_key'}",
        f"PidFile {directory / 'sshd.pid'}",
        f"AuthorizedKeysFile {directory / 'authorized_keys'}",
        # The tmp directory is not owned and locked down the way StrictModes wants.
        "StrictModes no",
        # Without PAM, sshd checks passwords against /etc/shadow itself (as root).
        "UsePAM no",
        "PermitRootLogin yes",
        "PubkeyAuthentication yes",
        "PasswordAuthentication yes",
        "KbdInteractiveAuthentication no",
        "AllowTcpForwarding yes",
        "Subsystem sftp internal-sftp",
        "LogLevel VERBOSE",
        # Tests connect many times in a row, some of them failing on purpose.
        "MaxStartups 100",
        "MaxAuthTries 10",
    ]
    if penalties:
        # OpenSSH 9.8 and later would otherwise refuse connections from 127.0.0.1 for a
        # while after the tests' deliberate authentication failures.
        lines.append("PerSourcePenalties no")
    return "\n".join(lines) + "\n"


def _wait_for_banner(port: int, process: subprocess.Popen[bytes], deadline: float) -> bool:
    """True once sshd answers with its SSH banner; False if it exited or time ran out."""
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
                if sock.recv(64).startswith(b"SSH-"):
                    return True
        except OSError:
            pass
        time.sleep(0.05)
    return False


def _create_password_user() -> tuple[tuple[str, str] | None, str]:
    if os.geteuid() != 0:
        return None, "password login needs a throwaway system user, which only root can create"
    useradd, chpasswd = shutil.which("useradd"), shutil.which("chpasswd")
    if useradd is None or chpasswd is None:
        return None, "password login needs useradd and chpasswd (passwd package) to make a test user"
    name = f"nhbt{secrets.token_hex(4)}"
    # A distinctive password, so that a leak is easy to find in logs and files.
    password = f"pw-{secrets.token_urlsafe(12)}"
    proc = subprocess.run(
        [useradd, "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/bin/sh", name],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        return None, f"useradd failed: {proc.stderr.strip()}"
    proc = subprocess.run([chpasswd], input=f"{name}:{password}\n", capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        subprocess.run(["userdel", name], capture_output=True, check=False)
        return None, f"chpasswd failed: {proc.stderr.strip()}"
    return (name, password), ""


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SSHServer]:
    """A running OpenSSH server on 127.0.0.1 for the whole test session."""
    if not os.access(SSHD, os.X_OK):
        pytest.skip(f"{SSHD} is not installed (./dev installs openssh-server for the tests)")
    if shutil.which("ssh-keygen") is None:
        pytest.skip("ssh-keygen is not installed (package openssh-client)")
    directory = tmp_path_factory.mktemp("sshd")
    _keygen(directory / "ssh_host_ed25519_key", "nhbench-test-host")
    _keygen(directory / "user_key", "nhbench-test-user")
    _keygen(directory / "other_key", "nhbench-test-unauthorized")
    shutil.copyfile(directory / "user_key.pub", directory / "authorized_keys")
    host_public_key = " ".join((directory / "ssh_host_ed25519_key.pub").read_text().split()[:2])
    if os.geteuid() == 0:
        # sshd refuses to start as root without its privilege separation directory, which
        # a container may lack because no init system created it.
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)

    config = directory / "sshd_config"
    log_file = directory / "sshd.log"
    penalties = True
    process: subprocess.Popen[bytes] | None = None
    port = 0
    for _attempt in range(5):
        port = _free_port()
        config.write_text(_config(directory, port, penalties))
        check = subprocess.run([SSHD, "-t", "-f", str(config)], capture_output=True, text=True, check=False)
        if check.returncode != 0 and "PerSourcePenalties" in check.stderr:
            penalties = False
            config.write_text(_config(directory, port, penalties))
            check = subprocess.run([SSHD, "-t", "-f", str(config)], capture_output=True, text=True, check=False)
        if check.returncode != 0:
            pytest.fail(f"sshd rejects the test configuration: {check.stderr.strip()}")
        with log_file.open("ab") as log:
            process = subprocess.Popen(
                [SSHD, "-D", "-e", "-f", str(config), "-p", str(port)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
        if _wait_for_banner(port, process, time.monotonic() + 30):
            break
        # Most likely another process took the port between _free_port and sshd's bind.
        process.kill()
        process.wait()
        process = None
    if process is None:
        pytest.fail(f"sshd did not start; its log:\n{log_file.read_text(errors='replace')}")

    known_hosts_line = f"[127.0.0.1]:{port} {host_public_key}"
    known_hosts = directory / "known_hosts"
    known_hosts.write_text(known_hosts_line + "\n")
    password_login, skip_reason = _create_password_user()
    import getpass

    server = SSHServer(
        host="127.0.0.1",
        port=port,
        user=getpass.getuser(),
        user_key=directory / "user_key",
        other_key=directory / "other_key",
        known_hosts=known_hosts,
        known_hosts_line=known_hosts_line,
        host_public_key=host_public_key,
        directory=directory,
        log_file=log_file,
        password_login=password_login,
        password_skip_reason=skip_reason,
        _process=process,
    )
    try:
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if password_login is not None:
            subprocess.run(["userdel", password_login[0]], capture_output=True, check=False)
