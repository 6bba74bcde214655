"""`SSHHost`: the `Host` interface over one paramiko connection: run a command, start and
stop a background command, fetch a file. Connecting it (targets, passwords, host keys,
authentication, jump hosts) is ``_ssh_connect.py``'s job.

Background commands are stopped by sending SIGINT to their remote process group with a
second ``kill`` command, because OpenSSH ignores the SSH "signal" channel request for
commands without a terminal.
"""

from __future__ import annotations

import errno
import logging
import os
import shlex
import signal
import threading
import time
from pathlib import Path
from typing import Any

import paramiko
from paramiko.channel import Channel
from paramiko.common import MSG_CHANNEL_REQUEST

from .._exceptions import CommandError, HostError
from .._io import atomic_writer
from ._host import CommandResult
from ._ssh_connect import SSHTarget, open_clients

__all__ = ["SSHHost"]

_log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------
# Exit signals
# --------------------------------------------------------------------------------------


def _handle_channel_request(chan: Channel, m: paramiko.Message) -> None:
    """paramiko's channel-request handler, plus "exit-signal".

    OpenSSH reports a command killed by a signal with an "exit-signal" request instead of
    "exit-status"; paramiko ignores it and reports exit status -1. `CommandResult` promises
    -N for a command killed by signal N (as subprocess does), so we read it here and pass
    every other request on to paramiko unchanged."""
    start = m.packet.tell()
    if m.get_text() != "exit-signal":
        m.packet.seek(start)
        # A private paramiko method (so not in its type stubs): the request is passed on.
        Channel._handle_request(chan, m)  # type: ignore[attr-defined]
        return
    m.get_boolean()  # want_reply: always false for exit-signal (RFC 4254 6.10)
    name = m.get_text()
    number = getattr(signal, f"SIG{name}", None)
    chan.exit_status = -int(number) if number is not None else -1
    chan.status_event.set()


def _install_exit_signal_handler(transport: paramiko.Transport) -> None:
    # Transport dispatches channel messages through `self._channel_handler_table`; an
    # instance copy changes only this connection. If a future paramiko renames the table
    # we simply keep its behaviour (-1 for a killed command).
    table = getattr(transport, "_channel_handler_table", None)
    if isinstance(table, dict) and MSG_CHANNEL_REQUEST in table:
        table = dict(table)
        table[MSG_CHANNEL_REQUEST] = _handle_channel_request
        transport._channel_handler_table = table  # type: ignore[attr-defined]


# --------------------------------------------------------------------------------------
# Commands
# --------------------------------------------------------------------------------------

# The wrapper every command runs in. It prints "PID PGID" as its first line, then replaces
# itself with the command, so a later `kill -s INT -- -PGID` reaches the command and any
# pipeline it started. (sshd puts each session's command in a new session, so PGID is
# normally the command's own PID; under sudo it is sudo's group, which sudo relays.)
_WRAPPER = (
    "read -r _ _ _ _ g _ 2>/dev/null </proc/$$/stat || g=$$; "
    'echo "$$ $g"; exec sh -c "$1"'
)


class _Drain:
    """Reads a channel's stdout and stderr on two threads until both reach end of file, so
    that a chatty command never stalls on a full SSH window while we wait for it."""

    def __init__(self, chan: Channel) -> None:
        self._chan = chan
        self._out: list[bytes] = []
        self._err: list[bytes] = []
        self.pid_line = threading.Event()
        self._threads = [
            threading.Thread(target=self._read, args=(chan.recv, self._out, True), daemon=True),
            threading.Thread(target=self._read, args=(chan.recv_stderr, self._err, False), daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _read(self, recv: Any, sink: list[bytes], watch_pid: bool) -> None:
        try:
            while True:
                data = recv(65536)
                if not data:
                    break
                sink.append(data)
                if watch_pid and b"\n" in data:
                    self.pid_line.set()
        except (OSError, EOFError, paramiko.SSHException):
            pass
        finally:
            if watch_pid:
                self.pid_line.set()

    def wait(self, timeout: float | None) -> bool:
        """Wait until both streams ended; False if `timeout` passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in self._threads:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            thread.join(remaining)
        return not any(thread.is_alive() for thread in self._threads)

    def ids(self) -> tuple[int, int] | None:
        """(PID, PGID) printed by the wrapper, or None when it never printed them."""
        first, _, _ = b"".join(self._out).partition(b"\n")
        parts = first.split()
        if len(parts) == 2 and all(p.isdigit() for p in parts):
            return int(parts[0]), int(parts[1])
        return None

    def output(self) -> tuple[str, str]:
        out = b"".join(self._out)
        if self.ids() is not None:
            out = out.partition(b"\n")[2]
        return out.decode(errors="replace"), b"".join(self._err).decode(errors="replace")


class _SSHBackground:
    """A command started with `SSHHost.start`."""

    def __init__(self, host: SSHHost, command: str, sudo: bool) -> None:
        self._host = host
        self._command = command
        self._sudo = sudo
        self._chan = host._exec(command, sudo)
        self._drain = _Drain(self._chan)
        self._result: CommandResult | None = None
        self._lock = threading.Lock()

    def stop(self, timeout: float = 10.0) -> CommandResult:
        with self._lock:
            if self._result is None:
                self._result = self._stop(timeout)
            return self._result

    def _stop(self, timeout: float) -> CommandResult:
        # The wrapper prints its ids first thing; give it the same time budget to do so.
        self._drain.pid_line.wait(timeout)
        ids = self._drain.ids()
        note = ""
        if ids is not None and not self._drain.wait(0):
            self._host._signal(ids, "INT", self._sudo)
            if not self._drain.wait(timeout):
                self._host._signal(ids, "KILL", self._sudo)
                note = f"did not stop within {timeout} s of SIGINT; killed"
        if not self._drain.wait(timeout):
            # The command is gone or unkillable; do not hang on the channel any longer.
            self._chan.close()
            self._drain.wait(5.0)
            note = note or "no output end after stopping; channel closed"
        status = self._host._exit_status(self._chan, timeout=5.0)
        if note and status == -1:
            status = -int(signal.SIGKILL)
        out, err = self._drain.output()
        self._chan.close()
        if note:
            err = f"{err}{'' if not err or err.endswith(chr(10)) else chr(10)}nhbench: {note}\n"
        return CommandResult(self._command, status, out, err)

    def __repr__(self) -> str:
        return f"<background {self._command!r} on {self._host.name}>"


# --------------------------------------------------------------------------------------
# The host
# --------------------------------------------------------------------------------------


class SSHHost:
    """A machine reached over SSH (one paramiko connection, optionally through a jump host).

    Create it with `SSHHost.connect`. It implements `Host`: `run`, `start`, `fetch`,
    `close`; it is also a context manager."""

    def __init__(self, target: SSHTarget, client: paramiko.SSHClient,
                 jump_client: paramiko.SSHClient | None, jump: SSHTarget | None) -> None:
        self.target = target
        self.jump = jump
        #: Shown in reports: "user@host:port"; never holds a secret.
        self.name = str(target)
        self._client = client
        self._jump_client = jump_client
        self._sftp: paramiko.SFTPClient | None = None
        self._is_root: bool | None = None
        self._lock = threading.Lock()
        self._closed = False

    # -- connecting ---------------------------------------------------------------------

    @classmethod
    def connect(
        cls,
        target: SSHTarget,
        *,
        key_filename: str | os.PathLike[str] | None = None,
        password: str | None = None,
        use_agent: bool = True,
        known_hosts: str | os.PathLike[str] | None = None,
        accept_new: bool = False,
        jump: SSHTarget | None = None,
        timeout: float = 10.0,
    ) -> SSHHost:
        """Connect and authenticate to `target`, through `jump` when given (same
        credentials, same known_hosts).

        Credentials are tried in paramiko's order: `key_filename`, the SSH agent
        (`use_agent`), the default ``~/.ssh/id_*`` keys (only when no `key_filename` is
        given), then `password`.

        Raises UnreachableError (DNS, refused, timeout, not an SSH server), HostKeyError
        (unknown or changed key; nothing was sent), AuthenticationError (every credential
        refused), OptionsError (the key file does not exist)."""
        client, jump_client = open_clients(
            target,
            key_filename=key_filename,
            password=password,
            use_agent=use_agent,
            known_hosts=known_hosts,
            accept_new=accept_new,
            jump=jump,
            timeout=timeout,
        )
        # Reading "exit-signal" is about how a command reports its end, so it is installed
        # here, next to the code that runs commands, before any command can run.
        for opened in (client, jump_client):
            transport = opened.get_transport() if opened is not None else None
            if transport is not None:
                _install_exit_signal_handler(transport)
        host = cls(target, client, jump_client, jump)
        _log.debug("connected to %s%s", host.name, f" through {jump}" if jump else "")
        return host

    # -- the Host interface ---------------------------------------------------------------

    def run(self, command: str, *, timeout: float = 60.0, sudo: bool = False) -> CommandResult:
        chan = self._exec(command, sudo)
        drain = _Drain(chan)
        if not drain.wait(timeout):
            ids = drain.ids()
            if ids is not None:
                self._signal(ids, "KILL", sudo)
            drain.wait(5.0)
            chan.close()
            out, err = drain.output()
            return CommandResult(command, -int(signal.SIGKILL), out, f"timed out after {timeout} s")
        status = self._exit_status(chan, timeout=timeout)
        out, err = drain.output()
        chan.close()
        return CommandResult(command, status, out, err)

    def start(self, command: str, *, sudo: bool = False) -> _SSHBackground:
        return _SSHBackground(self, command, sudo)

    def open_stream(self, command: str) -> Channel:
        """Start `command` with its stdin open and return its channel, to talk to it both
        ways (a load generator's agent: nhbench.distributed). Closing the channel ends the
        command's input."""
        chan = self._open_channel()
        try:
            chan.exec_command(f"exec sh -c {shlex.quote(command)}")
        except (paramiko.SSHException, OSError, EOFError) as exc:
            chan.close()
            raise HostError(f"cannot start a command on {self.name}: {exc}") from exc
        return chan

    def fetch(self, remote_path: str, local_path: Path) -> None:
        local_path = Path(local_path)
        local_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with self._lock:
                if self._sftp is None:
                    self._sftp = self._client.open_sftp()
                sftp = self._sftp
            # The package's one writer (nhbench._io): a temporary file renamed into place,
            # removed if the transfer fails.
            with atomic_writer(local_path, binary=True) as handle:
                size = sftp.getfo(remote_path, handle)
                if handle.seekable() and handle.tell() != size:
                    raise OSError(errno.EIO, f"short transfer ({handle.tell()} of {size} bytes)")
        except OSError as exc:
            raise CommandError(
                f"cannot copy {remote_path} from {self.name}: {exc.strerror or exc}"
            ) from exc
        except paramiko.SSHException as exc:
            raise HostError(f"SFTP to {self.name} failed: {exc}") from exc

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._sftp is not None:
                self._sftp.close()
            self._client.close()
            if self._jump_client is not None:
                self._jump_client.close()

    def __enter__(self) -> SSHHost:  # noqa: PYI034 - typing.Self needs Python 3.11
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        via = f" via {self.jump}" if self.jump is not None else ""
        return f"SSHHost({self.name!r}{via})"

    # -- helpers shared with _SSHBackground -------------------------------------------------

    def _root_prefix(self, sudo: bool) -> str:
        if not sudo:
            return ""
        if self._is_root is None:
            chan = self._open_channel()
            chan.exec_command("id -u")
            chan.shutdown_write()
            out = chan.makefile("rb").read().decode(errors="replace").strip()
            chan.recv_exit_status()
            chan.close()
            self._is_root = out == "0"
        return "" if self._is_root else "sudo -n "

    def _open_channel(self) -> Channel:
        if self._closed:
            raise HostError(f"the SSH connection to {self.name} is closed")
        transport = self._client.get_transport()
        if transport is None or not transport.is_active():
            raise HostError(f"lost the SSH connection to {self.name}")
        try:
            return transport.open_session()
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise HostError(f"cannot open a channel to {self.name}: {exc}") from exc

    def _exec(self, command: str, sudo: bool) -> Channel:
        """Start `command` in the wrapper (see _WRAPPER) and return its channel. The
        outer ``exec sh -c`` makes this independent of the remote login shell."""
        inner = f"{self._root_prefix(sudo)}sh -c {shlex.quote(_WRAPPER)} sh {shlex.quote(command)}"
        chan = self._open_channel()
        try:
            chan.exec_command(f"exec {inner}")
            # The command gets an empty stdin, as it would with ssh -n.
            chan.shutdown_write()
        except (paramiko.SSHException, OSError, EOFError) as exc:
            chan.close()
            raise HostError(f"cannot start a command on {self.name}: {exc}") from exc
        return chan

    def _signal(self, ids: tuple[int, int], name: str, sudo: bool) -> None:
        """Send signal `name` to the process group (or, if that is gone, the process)."""
        pid, pgid = ids
        command = f"kill -s {name} -- -{pgid} 2>/dev/null || kill -s {name} {pid} 2>/dev/null"
        chan = self._open_channel()
        try:
            chan.exec_command(f"{self._root_prefix(sudo)}sh -c {shlex.quote(command)}")
            chan.shutdown_write()
            chan.recv_exit_status()
        finally:
            chan.close()

    @staticmethod
    def _exit_status(chan: Channel, timeout: float) -> int:
        if chan.status_event.wait(timeout):
            return chan.exit_status
        return -1


