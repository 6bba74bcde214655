"""Connecting an `SSHHost`: the ``user@host[:port]`` a user names (`SSHTarget`), where its
password comes from, the host-key policy, authentication and jump hosts. `open_clients`
returns authenticated paramiko clients; running commands over them is ``_ssh.py``'s job.

Security decisions, in one place:

* Host keys are checked against known_hosts (``~/.ssh/known_hosts`` and, for the default,
  ``/etc/ssh/ssh_known_hosts`` as OpenSSH does). An unknown key is refused unless
  ``accept_new`` is set, in which case it is appended to the known_hosts file (OpenSSH's
  ``StrictHostKeyChecking=accept-new``). A *changed* key is always refused. Both refusals
  happen after the key exchange and before any credential is sent.
* The password is a parameter of `SSHHost.connect` (passed on to `open_clients`) only. It is
  not stored on the host object, never formatted into a message, and paramiko's log records
  for the connection go through a filter that masks it should any library code ever log it.
"""

from __future__ import annotations

import getpass
import logging
import os
import re
import shlex
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import paramiko
from paramiko.channel import Channel

from .._exceptions import AuthenticationError, HostError, HostKeyError, OptionsError, UnreachableError
from .._input import InputError, check_input

__all__ = [
    "PARAMIKO_LOG_CHANNEL",
    "SSHTarget",
    "open_clients",
    "password_from_environment",
    "prompt_password",
]

_log = logging.getLogger(__name__)

# paramiko logs everything a connection does to this logger (and ".sftp" below it). It
# stays under "paramiko." so that configuring the "paramiko" logger still shows it.
PARAMIKO_LOG_CHANNEL = "paramiko.transport.nhbench"

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


_PARAMIKO_LOGGERS = (PARAMIKO_LOG_CHANNEL, PARAMIKO_LOG_CHANNEL + ".sftp", "paramiko")
# --------------------------------------------------------------------------------------
# Connecting
# --------------------------------------------------------------------------------------


def open_clients(
    target: SSHTarget,
    *,
    key_filename: str | os.PathLike[str] | None,
    password: str | None,
    use_agent: bool,
    known_hosts: str | os.PathLike[str] | None,
    accept_new: bool,
    jump: SSHTarget | None,
    timeout: float,
) -> tuple[paramiko.SSHClient, paramiko.SSHClient | None]:
    """Connect and authenticate to `target`, through `jump` when given; return the target's
    client and the jump host's (None without `jump`). `SSHHost.connect` documents the
    parameters and the errors raised; on an error no client is left open."""
    if key_filename is not None:
        try:
            key_filename = check_input(key_filename, "pem", f"--ssh-key {key_filename}")
        except InputError as exc:
            raise OptionsError(str(exc), option="ssh_key") from None
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
    return client, jump_client


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
    client.set_log_channel(PARAMIKO_LOG_CHANNEL)
    # Keys go into paramiko's read-only "system" set: paramiko never writes those back, so
    # the only change to a known_hosts file is the line _AcceptNewKey appends.
    paths = [options.known_hosts]
    if options.system_known_hosts:
        paths.append(Path(_SYSTEM_KNOWN_HOSTS))
    for path in paths:
        try:
            # paramiko reads the file line by line with no bound: /dev/zero or a FIFO there
            # would grow memory or hang before a single host key is read.
            check_input(path, "known-hosts", f"known_hosts {_display_path(path)}")
            client.load_system_host_keys(str(path))
        except InputError as exc:
            if exc.reason == "no such file":
                continue
            client.close()
            raise HostKeyError(str(exc)) from None
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
