"""``nhbench server``: the test server on the given addresses until SIGINT or SIGTERM.

Exit status: 0 when stopped by a signal (the final counters are printed); 1 when it cannot
start (an address cannot be bound, the extension is missing, the address file cannot be
written); 2 for invalid input (a flag, a --config file), one line on stderr.
"""

from __future__ import annotations

import argparse
import sys
import threading
from typing import TYPE_CHECKING, Any

from .._exceptions import CoreUnavailableError, ServerError
from .._signals import stop_on_signals
from ._common import NOT_OPTIONS, die, note

if TYPE_CHECKING:
    from ._commands import Command, Subparsers

__all__ = ["add_parser", "run", "server_options_from_args"]


def add_parser(commands: Subparsers,
               command: Command) -> argparse.ArgumentParser:
    from ..options import ServerOptions, add_model_flags

    parser = commands.add_parser(
        command.name,
        help=command.help,
        description="Serve HTTP/1.1 and HTTP/2 (h2c on the same port, detected by its "
        "preface or by Upgrade: h2c; over TLS, h2 by ALPN, with --tls-cert/--tls-key or "
        "--tls-self-signed) on the given addresses until SIGINT or SIGTERM. Responses "
        "follow Nighthawk's response options (static here or per request in the "
        "x-nighthawk-test-server-config header) and Fortio's echo parameters (?delay=, "
        "status=, size=, close=, header=, gzip=). Prints one line per bound address: "
        "'listening on http://HOST:PORT/' (or 'unix:PATH'), 'admin on ...', 'tcp-echo on "
        "...', 'udp-echo on ...' (https:// with TLS). See docs/server.md.",
        argument_default=argparse.SUPPRESS,
        allow_abbrev=False,
    )
    # --config and --print-stats-json are the only flags written here: they are not options
    # (one names where options come from, the other is TestServer's plumbing). Every other
    # flag, its help and its section are declared on the ServerOptions fields (`Flag`), and
    # values are validated by ServerOptions, so that the CLI, config files and TestServer
    # accept the same syntax and give the same messages.
    parser.add_argument(
        "--config", metavar="FILE",
        help="JSON or YAML file with server options, or Nighthawk's ResponseOptions (or an "
        "Envoy bootstrap of Nighthawk's test server). Flags override it.",
    )
    add_model_flags(parser, ServerOptions)
    # Used by TestServer(subprocess=True) to collect the server's statistics at exit.
    parser.add_argument("--print-stats-json", action="store_true", help=argparse.SUPPRESS)
    return parser



def server_options_from_args(
    args: argparse.Namespace, parser: argparse.ArgumentParser
) -> Any:
    """ServerOptions from the parsed flags over the --config file; errors exit 2."""
    from pydantic import ValidationError

    from ..options import ServerOptions, format_validation_error, load_config_file

    data = {k: v for k, v in vars(args).items()
            if k not in NOT_OPTIONS and k not in ("print_stats_json", "config")}
    config_name = getattr(args, "config", None)
    base: dict[str, Any] = {}
    if config_name is not None:
        try:
            base = load_config_file(config_name)
        except ValueError as exc:
            parser.error(f"--config: {exc}")
    try:
        return ServerOptions.model_validate({**base, **data})
    except ValidationError as exc:
        parser.error(format_validation_error(exc, ServerOptions, cli=True, cli_keys=data.keys(),
                                            config_name=config_name))


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from .._server import TestServer, address_lines, stats_line
    from ..options import raise_nofile

    options = server_options_from_args(args, parser)
    # As Go does for Fortio's server: the soft descriptor limit up to the hard one, so that
    # max_connections' default (the soft limit less 64) holds what the machine allows.
    was, soft, hard = raise_nofile("server")
    stop = threading.Event()
    # Every SIGINT or SIGTERM only stops serving: the final counters are always printed.
    with stop_on_signals(lambda signum: stop.set(), second_sigint_aborts=False):
        server = TestServer.from_options(options)
        try:
            try:
                server.start()
            except (ServerError, CoreUnavailableError) as exc:
                die(str(exc), status=1)
            except OSError as exc:  # the address file could not be written
                die(f"--address-file: cannot write {options.address_file!r}: "
                    f"{exc.strerror or exc}", status=1)
            lines = address_lines(
                [entry["url"] for entry in server.report()["listen"]],
                server.admin_url if server.admin_address is not None else None,
                server.tcp_echo_addresses,
                server.udp_echo_addresses,
                server.tcp_proxy_addresses,
                server.redirect_addresses,
                server.http_fanout_addresses,
            )
            sys.stdout.write("".join(line + "\n" for line in lines))
            sys.stdout.flush()
            note(_capacity_line(options.max_connections, was, soft, hard))
            if options.tls_ca_out:
                note(f"TLS: self-signed certificate written to {options.tls_ca_out} "
                     f"(clients: --cacert {options.tls_ca_out})")
            elif options.tls_self_signed:
                note("TLS: self-signed certificate; write it out for clients with --tls-ca-out "
                     "FILE (or let them skip verification: nhbench run -k, curl -k)")
            if options.http3:
                ports = sorted({port for _, port in server.addresses})
                note("HTTP/3: QUIC on UDP port" + ("s " if len(ports) > 1 else " ")
                     + ", ".join(map(str, ports)) + " (clients: nhbench run --protocol http3)")
            if options.debug_env_dump and options.debug_path:
                note(f"warning: {options.debug_path}?env=dump exposes this process's "
                     "environment (secrets included) to anyone who can reach the server")
            while not stop.is_set():
                stop.wait(0.5)
        finally:
            server.stop()
    try:
        stats = server.stats()
    except ServerError:
        stats = {}
    if getattr(args, "print_stats_json", False):
        sys.stdout.write(stats_line(stats) + "\n")
        sys.stdout.flush()
    if stats:
        requests = int(stats.get("requests", 0))
        connections = int(stats.get("connections_total", 0))
        note(
            f"server stopped: {requests} request{'s' if requests != 1 else ''} on "
            f"{connections} connection{'s' if connections != 1 else ''}"
        )
    return 0


# csrc/server: max_connections 0 is the soft RLIMIT_NOFILE less this headroom.
_SERVER_FD_HEADROOM = 64


def _capacity_line(max_connections: int, was: int, soft: int, hard: int) -> str:
    """What the server can hold, and the descriptor limit it holds it under."""
    import resource

    from ..options import limit_text

    if max_connections:
        holds = f"up to {max_connections:,} connections at once (--max-connections)"
    elif soft == resource.RLIM_INFINITY:
        holds = "connections without a limit of its own"
    else:
        most = soft - _SERVER_FD_HEADROOM if soft > 2 * _SERVER_FD_HEADROOM else soft // 2
        holds = f"up to {most:,} connections at once"
    raised = f"raised from {limit_text(was)} to " if was != soft else ""
    return (f"holds {holds} (RLIMIT_NOFILE soft limit {raised}{limit_text(soft)}, "
            f"hard {limit_text(hard)})")
