"""The `Host` interface: run a command, start a background capture, fetch a file.

A sweep does the same things on the target machine whatever the way there is: it reads
machine facts, starts mpstat and perf while a step runs, stops them and copies their output
back. `Host` is that small surface. `LocalHost` implements it with subprocesses on this
machine; `SSHHost` (in ``_ssh.py``) implements it over one paramiko connection (connected by ``_ssh_connect.py``).

Commands are shell command lines (POSIX ``sh``), because the facts and captures are
naturally written as pipelines and the remote side of SSH is a shell anyway. Callers quote
with `shlex.quote` where a value comes from the user.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from .._exceptions import CommandError
from .._io import atomic_writer

__all__ = ["BackgroundCommand", "CommandResult", "Host", "LocalHost"]


@dataclass(frozen=True)
class CommandResult:
    """What a finished command left behind. `exit_status` is -N when killed by signal N."""

    command: str
    exit_status: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exit_status == 0

    def check(self) -> CommandResult:
        """Return self, or raise CommandError naming the command and its first stderr line."""
        if self.exit_status != 0:
            first = (self.stderr.strip().splitlines() or ["no output"])[0]
            raise CommandError(
                f"command {self.command!r} failed with exit status {self.exit_status}: {first}"
            )
        return self


@runtime_checkable
class BackgroundCommand(Protocol):
    """A long-running command (mpstat, perf record) started with `Host.start`."""

    def stop(self, timeout: float = 10.0) -> CommandResult:
        """Send SIGINT (so perf and mpstat write their output), wait up to `timeout`, then
        kill. Returns what the command printed. Calling it twice returns the same result."""
        ...


@runtime_checkable
class Host(Protocol):
    """A machine a sweep runs commands on."""

    #: "local", or "user@host:port" for SSH. Shown in reports; never contains a secret.
    name: str

    def run(self, command: str, *, timeout: float = 60.0, sudo: bool = False) -> CommandResult:
        """Run a shell command to completion. `sudo` runs it as root (directly when already
        root, else through ``sudo -n``, which fails rather than prompts). Never raises for a
        non-zero exit status (see `CommandResult.check`); raises HostError when the host
        itself cannot be used."""
        ...

    def start(self, command: str, *, sudo: bool = False) -> BackgroundCommand:
        """Start a shell command in the background and return a handle to stop it."""
        ...

    def fetch(self, remote_path: str, local_path: Path) -> None:
        """Copy a file from the host to `local_path` on this machine (atomic: written to a
        temporary name in the same directory, then renamed). A file that cannot be read
        raises CommandError, on every kind of host."""
        ...

    def close(self) -> None:
        """Release the connection. Idempotent."""
        ...


def _as_root(command: str, sudo: bool) -> list[str]:
    if sudo and os.geteuid() != 0:
        return ["sudo", "-n", "sh", "-c", command]
    return ["sh", "-c", command]


class _LocalBackground:
    def __init__(self, command: str, argv: list[str]) -> None:
        self._command = command
        # A command started through sudo runs as root: a non-root user signals it through
        # sudo as well.
        self._via_sudo = argv[0] == "sudo"
        # A new session so that SIGINT reaches the whole pipeline and not our own process.
        self._proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self._result: CommandResult | None = None

    def _signal(self, signum: int) -> None:
        try:
            os.killpg(self._proc.pid, signum)
        except ProcessLookupError:
            pass
        except PermissionError:
            if self._via_sudo:
                subprocess.run(["sudo", "-n", "kill", f"-{signum}", "--", f"-{self._proc.pid}"],
                               capture_output=True, check=False)

    def stop(self, timeout: float = 10.0) -> CommandResult:
        if self._result is not None:
            return self._result
        if self._proc.poll() is None:
            self._signal(signal.SIGINT)
        try:
            out, err = self._proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._signal(signal.SIGKILL)
            out, err = self._proc.communicate()
        self._result = CommandResult(self._command, self._proc.returncode, out, err)
        return self._result


class LocalHost:
    """This machine, through subprocesses."""

    name = "local"

    def run(self, command: str, *, timeout: float = 60.0, sudo: bool = False) -> CommandResult:
        try:
            proc = subprocess.run(
                _as_root(command, sudo),
                capture_output=True,
                text=True,
                timeout=timeout,
                errors="replace",
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else ""
            return CommandResult(command, -int(signal.SIGKILL), out, f"timed out after {timeout} s")
        return CommandResult(command, proc.returncode, proc.stdout, proc.stderr)

    def start(self, command: str, *, sudo: bool = False) -> BackgroundCommand:
        return _LocalBackground(command, _as_root(command, sudo))

    def fetch(self, remote_path: str, local_path: Path) -> None:
        local_path = Path(local_path)
        local_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            # The package's one writer (nhbench._io): a temporary file renamed into place,
            # removed if the copy fails.
            with open(remote_path, "rb") as source, \
                    atomic_writer(local_path, binary=True) as handle:
                shutil.copyfileobj(source, handle)
        except OSError as exc:
            raise CommandError(
                f"cannot copy {remote_path} from {self.name}: {exc.strerror or exc}"
            ) from exc

    def close(self) -> None:
        pass

    def __repr__(self) -> str:
        return "LocalHost()"
