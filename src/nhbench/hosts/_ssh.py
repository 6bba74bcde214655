"""`SSHHost`: the `Host` interface over one paramiko connection, and `SSHTarget`, the
parsed ``user@host[:port]`` a user names it with.

Security decisions, in one place:

* Host keys are checked against known_hosts (``~/.ssh/known_hosts`` and, for the default,
  ``/etc/ssh/ssh_known_hosts`` as OpenSSH does). An unknown key is refused unless
  ``accept_new`` is set, in which case it is appended to the known_hosts file (OpenSSH's
  ``StrictHostKeyChecking=accept-new``). A *changed* key is always refused. Both refusals
  happen after the key exchange and before any credential is sent.
* The password is a parameter of `SSHHost.connect` only. It is not stored on the host
  object, never formatted into a message, and paramiko's log records for the connection go
  through a filter that masks it should any library code ever log it.
* Background commands are stopped by sending SIGINT to their remote process group with a
  second ``kill`` command, because OpenSSH ignores the SSH "signal" channel request for
  commands without a terminal.
"""

from __future__ import annotations

import errno
import getpass
import logging
import os
import re
import shlex
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import paramiko
from paramiko.channel import Channel
from paramiko.common import MSG_CHANNEL_REQUEST

from .._exceptions import (
    AuthenticationError,
    CommandError,
    HostError,
    HostKeyError,
    OptionsError,
    UnreachableError,
)
from .._io import atomic_writer
from ._host import CommandResult

__all__ = ["SSHHost", "SSHTarget", "password_from_environment", "prompt_password"]

_log = logging.getLogger(__name__)

# paramiko logs everything a connection does to this logger (and ".sftp" below it). It
# stays under "paramiko." so that configuring the "paramiko" logger still shows it.
_PARAMIKO_LOG_CHANNEL = "paramiko.transport.nhbench"

_DEFAULT_KNOWN_HOSTS = "~/.ssh/known_hosts"
_SYSTEM_KNOWN_HOSTS = "/etc/ssh/ssh_known_hosts"


# --------------------------------------------------------------------------------------
# Targets and passwords
# --------------------------------------------------------------------------------------

_TARGET_RE = re.compile(
    r"""^(?:(?P<user>[^@\s:/\[\]]+)@)?       # optional user@
        (?:\[(?P<v6>[0-9A-Fa-f:.%\w-]+)\]    # [IPv6] ...
          |(?P<host>[^@\s:/\[\]]+))          # ... or a host name / IPv4 address
        (?::(?P<port>[0-9]+))?$              # optional :port
    """,
    re.VERBOSE,
)


@dataclass(frozen=True)
class SSHTarget:
    """Where to connect: user, host name or address, TCP port."""

    user: str
    host: str
    port: int = 22

    @classmethod
    def parse(cls, text: str, *, option: str = "ssh") -> SSHTarget:
        """Parse ``[user@]host[:port]``; an IPv6 address goes in brackets
        (``root@[::1]:2222``). The user defaults to the local user name, the port to 22.
        Raises OptionsError (naming `option`) with one line saying what is expected."""
        expected = "expected [user@]host[:port], with an IPv6 address in brackets as in root@[::1]:2222"
        spelled = f"--{option.replace('_', '-')}"
        stripped = text.strip() if isinstance(text, str) else ""
        match = _TARGET_RE.match(stripped)
        if match is None:
            # A bare IPv6 address has several colons and cannot carry a port; accept it as
            # a host rather than misreading its last group as a port number.
            bare = stripped.rpartition("@")
            if bare[2].count(":") >= 2 and "[" not in bare[2] and "]" not in bare[2]:
                try:
                    socket.inet_pton(socket.AF_INET6, bare[2].split("%")[0])
                except OSError:
                    pass
                else:
                    user = bare[0] if bare[1] else _local_user()
                    if user and "@" not in user and not any(c.isspace() for c in user):
                        return cls(user=user, host=bare[2], port=22)
            raise OptionsError(f"{spelled} {text!r}: {expected}", option=option)
        host = match.group("v6") or match.group("host")
        if match.group("v6") is not None:
            try:
                socket.inet_pton(socket.AF_INET6, host.split("%")[0])
            except OSError:
                raise OptionsError(
                    f"{spelled} {text!r}: {host!r} in brackets is not an IPv6 address", option=option
                ) from None
        port = 22
        if match.group("port") is not None:
            port = int(match.group("port"))
            if not 1 <= port <= 65535:
                raise OptionsError(
                    f"{spelled} {text!r}: port {port} is outside 1-65535", option=option
                )
        return cls(user=match.group("user") or _local_user(), host=host, port=port)

    @property
    def known_hosts_name(self) -> str:
        """The name OpenSSH and paramiko look up in known_hosts: ``host`` on port 22,
        ``[host]:port`` otherwise."""
        return self.host if self.port == 22 else f"[{self.host}]:{self.port}"

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.user}@{host}:{self.port}"


def _local_user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - getuser raises various errors without a user
        return "root" if os.geteuid() == 0 else str(os.geteuid())


def password_from_environment(variable: str) -> str:
    """Return the SSH password held in environment variable `variable`.

    Raises OptionsError when it is unset or empty; the message names the variable, never
    its value."""
    value = os.environ.get(variable)
    if not value:
        state = "is empty" if value == "" else "is not set"
        raise OptionsError(
            f"environment variable {variable} {state}; it should hold the SSH password",
            option="ssh_password_env",
        )
    return value


def prompt_password(target: SSHTarget | str) -> str:
    """Ask for the SSH password on the terminal without echoing it.

    Raises OptionsError when there is no terminal to ask on (the caller should then take
    the password from an environment variable)."""
    if not (sys.stdin.isatty() or _has_controlling_tty()):
        raise OptionsError(
            f"cannot prompt for the SSH password of {target}: there is no terminal; "
            "put it in an environment variable and name it with --ssh-password-env",
            option="ssh_password",
        )
    try:
        value = getpass.getpass(f"SSH password for {target}: ")
    except (EOFError, KeyboardInterrupt):
        raise OptionsError(f"no SSH password given for {target}", option="ssh_password") from None
    if not value:
        raise OptionsError(f"empty SSH password given for {target}", option="ssh_password")
    return value


def _has_controlling_tty() -> bool:
    try:
        fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    except OSError:
        return False
    os.close(fd)
    return True


# --------------------------------------------------------------------------------------
# Host keys
# --------------------------------------------------------------------------------------


def _fingerprint(key: paramiko.PKey) -> str:
    """``ssh-ed25519 SHA256:...``, as OpenSSH prints it."""
    return f"{key.get_name()} {key.fingerprint}"


def _display_path(path: Path) -> str:
    """A path as the user would write it: ``~/.ssh/known_hosts`` rather than /root/..."""
    home = Path.home()
    try:
        return "~/" + str(path.relative_to(home))
    except ValueError:
        return str(path)


class _RefuseUnknownKey(paramiko.RejectPolicy):
    """paramiko's RejectPolicy with a message that says what to do about it."""

    def __init__(self, known_hosts: Path, label: str) -> None:
        self._known_hosts = known_hosts
        self._label = label

    def missing_host_key(
        self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey
    ) -> NoReturn:
        raise HostKeyError(
            f"host key for {hostname}{self._label} is not in {_display_path(self._known_hosts)}; "
            "verify it and add it, or pass --ssh-accept-new to trust it on first use "
            f"(the server offered {_fingerprint(key)})"
        )


class _AcceptNewKey(paramiko.MissingHostKeyPolicy):
    """Trust a key seen for the first time and append it to known_hosts, as OpenSSH's
    accept-new does. It only ever appends one line: rewriting the file (what paramiko's
    save_host_keys does) would drop comments, markers and entries paramiko cannot parse.
    A *changed* key never reaches a policy: paramiko raises BadHostKeyException first."""

    def __init__(self, known_hosts: Path) -> None:
        self._known_hosts = known_hosts

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        line = f"{hostname} {key.get_name()} {key.get_base64()}\n"
        path = self._known_hosts
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
            with os.fdopen(fd, "a+b") as handle:
                # Do not glue the new entry onto a last line that lacks its newline.
                handle.seek(0, os.SEEK_END)
                if handle.tell() > 0:
                    handle.seek(-1, os.SEEK_END)
                    if handle.read(1) != b"\n":
                        line = "\n" + line
                handle.write(line.encode())
        except OSError as exc:
            # OpenSSH carries on in this case too; the key was accepted for this session.
            _log.warning(
                "trusted the new host key %s for %s but could not record it in %s: %s",
                _fingerprint(key), hostname, path, exc.strerror or exc,
            )
            return
        _log.warning(
            "trusted a new host key for %s (%s) and recorded it in %s",
            hostname, _fingerprint(key), _display_path(path),
        )


# --------------------------------------------------------------------------------------
# Logging: mask the password if anything ever tried to log it
# --------------------------------------------------------------------------------------


class _MaskSecret(logging.Filter):
    """Replaces a secret in a record's formatted message with ``********``.

    paramiko does not log passwords; this filter is there so that a future paramiko (or
    its debug hex dumps) cannot make us leak one either. It formats the message itself
    so that arguments cannot smuggle the secret past it."""

    def __init__(self, secret: str) -> None:
        super().__init__()
        self._secret = secret

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a broken record is the logging module's problem
            return True
        if self._secret in message:
            record.msg = message.replace(self._secret, "********")
            record.args = None
        if record.exc_text and self._secret in record.exc_text:
            record.exc_text = record.exc_text.replace(self._secret, "********")
        return True

    def __repr__(self) -> str:
        return "_MaskSecret(********)"


_PARAMIKO_LOGGERS = (_PARAMIKO_LOG_CHANNEL, _PARAMIKO_LOG_CHANNEL + ".sftp", "paramiko")


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
        if key_filename is not None:
            key_path = Path(key_filename).expanduser()
            if not key_path.is_file():
                raise OptionsError(f"--ssh-key {key_filename}: no such file", option="ssh_key")
            key_filename = str(key_path)
        custom_known_hosts = known_hosts is not None
        known = Path(known_hosts if known_hosts is not None else _DEFAULT_KNOWN_HOSTS).expanduser()
        options = _ConnectOptions(
            key_filename=key_filename,
            password=password,
            use_agent=use_agent,
            known_hosts=known,
            system_known_hosts=not custom_known_hosts,
            accept_new=accept_new,
            timeout=timeout,
        )
        masks = [_MaskSecret(password)] if password else []
        for name in _PARAMIKO_LOGGERS:
            for mask in masks:
                logging.getLogger(name).addFilter(mask)
        jump_client = None
        try:
            sock = None
            if jump is not None:
                jump_client = _open_client(jump, options, sock=None, label=" (the jump host)")
                sock = _open_tunnel(jump_client, jump, target, timeout)
            client = _open_client(target, options, sock=sock, label="")
        except BaseException:
            if jump_client is not None:
                jump_client.close()
            raise
        finally:
            for name in _PARAMIKO_LOGGERS:
                for mask in masks:
                    logging.getLogger(name).removeFilter(mask)
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


# --------------------------------------------------------------------------------------
# Connection internals
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _ConnectOptions:
    key_filename: str | None
    password: str | None
    use_agent: bool
    known_hosts: Path
    system_known_hosts: bool
    accept_new: bool
    timeout: float

    def __repr__(self) -> str:
        # Never print the password, even in a debugger or a traceback with locals.
        return f"_ConnectOptions(key_filename={self.key_filename!r}, password={'***' if self.password else None})"


def _open_client(target: SSHTarget, options: _ConnectOptions, *, sock: Any, label: str) -> paramiko.SSHClient:
    client = paramiko.SSHClient()
    client.set_log_channel(_PARAMIKO_LOG_CHANNEL)
    # Keys go into paramiko's read-only "system" set: paramiko never writes those back, so
    # the only change to a known_hosts file is the line _AcceptNewKey appends.
    paths = [options.known_hosts]
    if options.system_known_hosts:
        paths.append(Path(_SYSTEM_KNOWN_HOSTS))
    for path in paths:
        try:
            client.load_system_host_keys(str(path))
        except FileNotFoundError:
            pass
        except OSError as exc:
            client.close()
            raise HostKeyError(f"cannot read {path}: {exc.strerror or exc}") from None
    if options.accept_new:
        client.set_missing_host_key_policy(_AcceptNewKey(options.known_hosts))
    else:
        client.set_missing_host_key_policy(_RefuseUnknownKey(options.known_hosts, label))
    where = f"{target}{label}"
    try:
        client.connect(
            target.host,
            port=target.port,
            username=target.user,
            password=options.password,
            key_filename=options.key_filename,
            allow_agent=options.use_agent,
            look_for_keys=options.key_filename is None,
            timeout=options.timeout,
            banner_timeout=options.timeout,
            auth_timeout=options.timeout,
            channel_timeout=options.timeout,
            sock=sock,
        )
    except HostKeyError:
        client.close()
        raise
    except paramiko.BadHostKeyException as exc:
        client.close()
        raise HostKeyError(
            f"host key for {target.known_hosts_name}{label} has CHANGED: "
            f"{_display_path(options.known_hosts)} has {_fingerprint(exc.expected_key)}, the server "
            f"offered {_fingerprint(exc.key)}; this may be an attack or a reinstalled host; "
            f"if the change is expected, remove the old entry with "
            f"ssh-keygen -R {shlex.quote(target.known_hosts_name)}"
        ) from None
    except paramiko.AuthenticationException as exc:
        client.close()
        raise AuthenticationError(_auth_failure_message(where, options, exc)) from None
    except socket.gaierror as exc:
        client.close()
        raise UnreachableError(f"cannot resolve {target.host}{label}: {exc.strerror or exc}") from None
    except TimeoutError:
        client.close()
        raise UnreachableError(f"no answer from {where} within {options.timeout:g} s") from None
    except paramiko.ssh_exception.NoValidConnectionsError as exc:
        client.close()
        # The stubs say Exception; paramiko stores the OSError of each address tried.
        reasons = sorted({
            (e.strerror if isinstance(e, OSError) else None) or str(e)
            for e in exc.errors.values()
        })
        raise UnreachableError(f"cannot connect to {where}: {'; '.join(reasons)}") from None
    except OSError as exc:
        client.close()
        raise UnreachableError(f"cannot connect to {where}: {exc.strerror or exc}") from None
    except paramiko.SSHException as exc:
        client.close()
        text = str(exc)
        if "No authentication methods available" in text:
            raise AuthenticationError(
                f"{where}: no credential to offer (no key file, no SSH agent key, no default "
                "key in ~/.ssh, no password)"
            ) from None
        if "banner" in text.lower():
            raise UnreachableError(f"{where} did not answer like an SSH server ({text})") from None
        raise HostError(f"SSH connection to {where} failed: {text}") from None
    except EOFError:
        client.close()
        raise UnreachableError(f"{where} closed the connection during the SSH handshake") from None
    transport = client.get_transport()
    if transport is not None:
        # Sweeps leave the connection idle for minutes between steps; keepalives stop
        # NAT boxes and firewalls from dropping it.
        transport.set_keepalive(30)
        _install_exit_signal_handler(transport)
    return client


def _open_tunnel(jump_client: paramiko.SSHClient, jump: SSHTarget, target: SSHTarget, timeout: float) -> Channel:
    transport = jump_client.get_transport()
    assert transport is not None
    try:
        return transport.open_channel(
            "direct-tcpip", (target.host, target.port), ("127.0.0.1", 0), timeout=timeout
        )
    except paramiko.ChannelException as exc:
        raise UnreachableError(
            f"jump host {jump} cannot reach {target.host} port {target.port}: {exc.text}"
        ) from None
    except (paramiko.SSHException, OSError, EOFError) as exc:
        raise UnreachableError(f"jump host {jump} cannot reach {target.host} port {target.port}: {exc}") from None


def _auth_failure_message(where: str, options: _ConnectOptions, exc: Exception) -> str:
    tried: list[str] = []
    if options.key_filename is not None:
        tried.append(f"key {options.key_filename}")
    if options.use_agent:
        agent_keys = _agent_key_count()
        tried.append(
            "the SSH agent (not running)" if agent_keys is None else f"the SSH agent ({agent_keys} keys)"
        )
    if options.key_filename is None:
        found = [p.name for p in _default_keys()]
        tried.append(f"~/.ssh/{', ~/.ssh/'.join(found)}" if found else "no default key in ~/.ssh")
    if options.password:
        tried.append("a password")
    message = f"{where} refused authentication; tried {', '.join(tried)}"
    if isinstance(exc, paramiko.PasswordRequiredException):
        message += f"; the key {options.key_filename or 'file'} is encrypted: load it with ssh-add"
    allowed = getattr(exc, "allowed_types", None)
    if allowed:
        message += f"; the server accepts: {', '.join(allowed)}"
    return message


def _agent_key_count() -> int | None:
    if not os.environ.get("SSH_AUTH_SOCK"):
        return None
    try:
        agent = paramiko.Agent()
        try:
            return len(agent.get_keys())
        finally:
            agent.close()
    except (paramiko.SSHException, OSError):
        return None


def _default_keys() -> list[Path]:
    ssh_dir = Path.home() / ".ssh"
    return [ssh_dir / name for name in ("id_rsa", "id_ecdsa", "id_ed25519") if (ssh_dir / name).is_file()]
