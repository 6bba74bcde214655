"""``nhbench service --listen HOST:PORT``: Nighthawk's gRPC service (docs/service.md)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
from typing import TYPE_CHECKING

from .._io import write_output
from .._signals import stop_on_signals
from ..options import Options, add_model_flags, format_validation_error
from ._common import die, note

if TYPE_CHECKING:
    from ._commands import Command, Subparsers

__all__ = ["add_parser", "run"]

# The run options the service applies to every execution: where the load comes from (a Ray
# cluster, or load generators over SSH or in containers).
_SERVICE_RUN_OPTIONS = ("ray", "hosts", "loadgen", "loadgen_python", "loadgen_ssh_key",
                        "loadgen_known_hosts", "loadgen_password_env", "loadgen_jump")


def add_parser(commands: Subparsers,
               command: Command) -> argparse.ArgumentParser:
    from ..service import DEFAULT_LISTEN

    parser = commands.add_parser(
        command.name,
        help=command.help,
        description="A gRPC server implementing nighthawk.client.NighthawkService, with "
        "server reflection and health, so that tools written against Nighthawk's service "
        "drive nhbench. See docs/service.md.",
        argument_default=argparse.SUPPRESS,
        allow_abbrev=False,
    )
    parser.add_argument(
        "--listen", metavar="HOST:PORT",
        help=f"Where to listen: HOST:PORT, [IPv6]:PORT, or a host alone (port 8443, as "
        f"Nighthawk's). Port 0 picks a free port; the line 'listening on HOST:PORT' on "
        f"stdout says which. Default {DEFAULT_LISTEN} (Nighthawk's 0.0.0.0:8443 without "
        f"its reach: the service has no TLS and no authentication).")
    parser.add_argument(
        "--listener-address-file", metavar="FILE", dest="address_file",
        help="Write HOST:PORT to FILE once listening (Nighthawk's --listener-address-file).")
    parser.add_argument(
        "--token", metavar="TOKEN",
        help="Require 'authorization: Bearer TOKEN' metadata on every call but health checks "
        "(also from the environment variable NHBENCH_SERVICE_TOKEN, which ps does not show). "
        "Needed to listen on an address other than loopback.")
    parser.add_argument(
        "--allow-unix-sockets", action="store_true",
        help="Let a request target a Unix socket of this machine (http://unix:PATH:/...); "
        "refused by default.")
    parser.add_argument(
        "--allow-local-files", action="store_true",
        help="Let a request name a local file (tls_context's trusted_ca filename); refused "
        "by default.")
    parser.add_argument(
        "--stream-idle-timeout", metavar="SECONDS", type=float, dest="idle_timeout",
        help="End an ExecutionStream that sends no request for this long, before its first "
        "StartRequest and after each answer (DEADLINE_EXCEEDED). Default 30.")
    add_model_flags(parser, Options, only=lambda name: name in _SERVICE_RUN_OPTIONS)
    return parser


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from pydantic import ValidationError

    from ..service import (
        DEFAULT_LISTEN,
        NEEDS_TOKEN,
        is_loopback,
        missing_dependencies,
        parse_listen,
        start_service,
    )

    missing = missing_dependencies()
    if missing:
        die(f"nhbench service needs {', '.join(missing)}: pip install 'nhbench[service]'",
            status=1)
    # gRPC's core logs to stderr on its own (a failed bind is an "E... add_port.cc" line
    # besides nhbench's one-line error); quiet unless the user asks for its logs.
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    listen = getattr(args, "listen", DEFAULT_LISTEN)
    try:
        host, _ = parse_listen(listen)
    except ValueError as exc:
        parser.error(f"--listen: {exc}")
    token = getattr(args, "token", None) or os.environ.get("NHBENCH_SERVICE_TOKEN") or None
    if token is not None and (len(token) < 16 or not token.isprintable()
                              or token != token.strip()):
        parser.error("--token: at least 16 printable characters, no surrounding spaces "
                     "(e.g. python -c 'import secrets; print(secrets.token_urlsafe())')")
    if token is None and not is_loopback(host):
        parser.error(f"--listen: {NEEDS_TOKEN}")
    idle_timeout = getattr(args, "idle_timeout", None)
    if idle_timeout is not None and not 0 < idle_timeout <= 86400:
        parser.error("--stream-idle-timeout: must be above 0 and at most 86400 seconds")
    overrides = {name: getattr(args, name) for name in _SERVICE_RUN_OPTIONS
                 if hasattr(args, name)}
    if overrides:
        # Checked once here (--hosts needs --ray, ...), so that a mistake is a startup
        # error rather than an error in every execution's answer.
        try:
            Options.model_validate({"uri": "http://127.0.0.1/", **overrides})
        except ValidationError as exc:
            parser.error(format_validation_error(exc, Options, cli=True))
    # One stderr line per execution started and ended, for whoever runs the service.
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("nhbench: service: %(message)s"))
    log = logging.getLogger("nhbench.service")
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    stop = threading.Event()
    with stop_on_signals(lambda signum: stop.set(), second_sigint_aborts=False):
        try:
            service = start_service(
                listen, overrides=overrides, idle_timeout=idle_timeout, token=token,
                allow_unix_sockets=getattr(args, "allow_unix_sockets", False),
                allow_local_files=getattr(args, "allow_local_files", False))
        except OSError as exc:
            die(str(exc), status=1)
        try:
            address_file = getattr(args, "address_file", None)
            if address_file:
                try:
                    write_output(address_file, service.address + "\n")
                except OSError as exc:
                    die(f"--listener-address-file: cannot write {address_file!r}: "
                        f"{exc.strerror or exc}", status=1)
            sys.stdout.write(f"listening on {service.address}\n")
            sys.stdout.flush()
            while not stop.is_set():
                stop.wait(0.5)
            note("service stopping: the running execution (if any) is stopped and answered")
        finally:
            service.stop()
    return 0
