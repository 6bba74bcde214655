"""``nhbench fortio server|tcp-echo|udp-echo|redirect|proxies``: Fortio's servers, run by
nhbench's test server (`nhbench.TestServer`) and its web UI (`start_fortio_ui`);
docs/compat.md, "Fortio".

Fortio's ports become one nhbench server: ``-http-port`` and ``-grpc-port`` are two listen
addresses of it (it answers HTTP and gRPC on every HTTP/2 listener, so each port answers
both, where Fortio's answer one each), ``-tcp-port`` and ``-udp-port`` its echo listeners,
``-redirect-port`` its https redirector, each ``-P "local dest"`` a TCP proxy and each
``-M "local url1 url2"`` an HTTP fan-out.
A port is Fortio's form: ``8080`` (every interface), ``host:port``, a Unix path (HTTP and
gRPC only) or ``disabled``.

The UI (under ``-ui-path``, over ``-data-dir``) is Python and the echo server C; they share
the HTTP port as Fortio's do: the UI listens on a free loopback port, and the C server
forwards every plain HTTP/1.x connection whose request path is under ``-ui-path`` to it
(``forward_prefix``), with a PROXY line naming the client, so the UI judges the real
client: loopback clients act without a token (unless ``NHBENCH_UI_TOKEN`` gives one), any
other client needs the token, printed when generated (the UI's rule, `start_ui`). Over
TLS (``-cert``), on a Unix socket, or at ``-ui-path /``, the UI cannot be forwarded and
gets its own port as before: on loopback, or with a token in ``NHBENCH_UI_TOKEN`` on the
HTTP port's host. The echo, gRPC, TCP and UDP listeners bind as Fortio's do: they start no
load.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

from .._exceptions import NHBenchError, OptionsError
from ._fortio_flags import FortioArgs

__all__ = ["DISABLED", "listen_address", "server_main"]

#: Fortio's word for a port it does not open.
DISABLED = "disabled"
#: The environment variable that gives the UI a token (then it may leave loopback).
TOKEN_ENV = "NHBENCH_UI_TOKEN"
#: The health service names nhbench's gRPC health service answers SERVING.
_SERVING = ("", "ping")


def _err(message: str) -> None:
    sys.stderr.write(f"{message}\n")
    sys.stderr.flush()


def listen_address(flag: str, value: str, *, unix: bool = True) -> str:
    """Fortio's port forms as nhbench's: ``8080`` -> ``0.0.0.0:8080`` (Fortio's every
    interface), ``host:port`` unchanged, a path with a ``/`` a Unix socket."""
    if "/" in value:
        if not unix:
            raise OptionsError(f"{flag}: {value!r}: a Unix socket is not served here (only "
                               "-http-port and -grpc-port take one); nothing was started")
        return value
    host, colon, port = value.rpartition(":")
    if not colon:
        host, port = "0.0.0.0", value
    elif not host:
        host = "0.0.0.0"
    if not port.isdigit() or int(port) > 65535:
        raise OptionsError(f"{flag}: {value!r} is not a port (8080, host:port, a Unix path "
                           f"or {DISABLED}); nothing was started")
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"{host}:{int(port)}"


def _tcp_proxy(spec: str) -> str:
    """Fortio's ``-P "localport dest_host:dest_port"`` as nhbench's ``LOCAL=DEST``."""
    parts = spec.split()
    if len(parts) != 2:
        raise OptionsError(f"-P: {spec!r}: expected \"localport dest_host:dest_port\"; "
                           "nothing was started")
    return f"{listen_address('-P', parts[0], unix=False)}={parts[1]}"


def _http_fanout(spec: str) -> str:
    """Fortio's ``-M "localport url1 url2..."`` (space separated) as nhbench's
    ``LOCAL=URL,URL``; a target nhbench's fan-out cannot reach is refused by -M's name."""
    from ..options import fanout_url

    parts = spec.split()
    if len(parts) < 2:
        raise OptionsError(f"-M: {spec!r}: expected \"localport destURL1 destURL2...\"; "
                           "nothing was started")
    urls = []
    for url in parts[1:]:
        try:
            urls.append(fanout_url(url))
        except ValueError as exc:
            raise OptionsError(f"-M: {exc}; nothing was started") from None
        if "," in url:
            raise OptionsError(f"-M: {url!r}: write a comma in a target URL as %2C; nothing "
                               "was started")
    return f"{listen_address('-M', parts[0], unix=False)}={','.join(urls)}"


def server_options(args: FortioArgs, command: str) -> dict[str, Any]:
    """The `TestServer` keywords for Fortio's server flags of `command`; refuses (by the
    Fortio flag's name) what nhbench's server cannot do."""
    debug = args.echo_debug_path
    if debug and (not debug.startswith("/") or debug == "/" or len(debug) > 1024 or any(
            ch in "?#{}" or ord(ch) <= 0x20 or ord(ch) == 0x7F for ch in debug)):
        # Fortio hands it to Go's ServeMux, where "dbg" is a host name, "{x}" a wildcard
        # and "/" collides with the echo; nhbench matches a plain path.
        raise OptionsError(f"-echo-debug-path: {debug!r}: expected \"\" or a path under / "
                           "(not / itself) without '?', '#', braces, spaces or control "
                           "characters; nothing was started")
    if args.healthservice not in _SERVING:
        raise OptionsError(f"-healthservice: {args.healthservice!r}: nhbench's gRPC health "
                           "service answers SERVING for \"\" and \"ping\" only; nothing was "
                           "started")
    if bool(args.cert) != bool(args.key):
        missing = "-key" if args.cert else "-cert"
        raise OptionsError(f"{missing}: server TLS needs both -cert and -key; nothing was "
                           "started")
    # Only `server` has Fortio's debug echo; the echo-only commands' loopback listener
    # gets none.
    options: dict[str, Any] = {"tcp_echo": (), "udp_echo": (), "debug_path": ""}
    listen: list[str] = []
    if command == "server":
        for flag, value in (("-http-port", args.http_port), ("-grpc-port", args.grpc_port)):
            if value != DISABLED:
                address = listen_address(flag, value)
                if address not in listen:
                    listen.append(address)
        # Fortio: the defaults only for a URI without '?'; its debug handler always
        # honours ?env=dump.
        options.update(echo_default_params=args.echo_server_default_params,
                       echo_default_params_when="no-query",
                       debug_path=debug, debug_env_dump=bool(debug),
                       max_echo_delay=args.max_echo_delay,
                       max_payload_kb=args.maxpayloadsizekb,
                       idle_timeout=args.server_idle_timeout)
        if args.grpc_max_streams > 0:
            options["max_concurrent_streams"] = args.grpc_max_streams
        if args.cert:
            options.update(tls_cert=args.cert, tls_key=args.key)
        # Fortio's TLSConfig: -mtls requires client certificates verified against -cacert's
        # CAs (the server reads -cacert for nothing else).
        if args.mtls:
            if not args.cert:
                raise OptionsError("-mtls: needs -cert and -key (mutual TLS is TLS); "
                                   "nothing was started")
            if not args.cacert:
                raise OptionsError("-mtls: needs -cacert, the CAs that issued the client "
                                   "certificates; nothing was started")
            options["tls_client_ca"] = args.cacert
        elif args.cacert:
            raise OptionsError("-cacert: the server reads it only with -mtls (the CAs of "
                               "client certificates); nothing was started")
    if command in ("server", "tcp-echo") and args.tcp_port != DISABLED:
        options["tcp_echo"] = (listen_address("-tcp-port", args.tcp_port, unix=False),)
    if command in ("server", "udp-echo") and args.udp_port != DISABLED:
        options["udp_echo"] = (listen_address("-udp-port", args.udp_port, unix=False),)
    if command in ("server", "redirect") and args.redirect_port != DISABLED:
        options["redirect_listen"] = (
            listen_address("-redirect-port", args.redirect_port, unix=False),)
    if command in ("server", "proxies"):
        options["tcp_proxy"] = tuple(_tcp_proxy(spec) for spec in args.proxies)
        options["http_fanout"] = tuple(_http_fanout(spec) for spec in args.multis)
        options["http_fanout_serial"] = args.multi_serial_mode
        options["http_fanout_no_mirror"] = not args.multi_mirror_origin
    # nhbench's server always has an HTTP listener: the echo-only commands (and a server
    # with both HTTP ports disabled) get one on a free loopback port, said on stderr.
    options["listen"] = tuple(listen) or ("127.0.0.1:0",)
    return options


def _serve_until(stop: threading.Event) -> None:
    while not stop.is_set():
        stop.wait(0.5)


def server_main(args: FortioArgs, command: str, rest: list[str], *,
                stop_on_signals: Callable[[Callable[[], None]], Any],
                sync: Callable[[FortioArgs, str], tuple[int, Any]]) -> int:
    """Fortio's ``server``, ``tcp-echo`` or ``udp-echo`` with its flags read into `args`:
    runs until SIGINT/SIGTERM (`stop_on_signals` installs the handler); exit 0 then.
    `sync(args, directory)` is report's -sync (status, loop or None)."""
    from .. import TestServer
    from ._fortio_rest import start_fortio_ui

    if rest:
        _err(f"nhbench fortio: At most 0 argument expected, got {len(rest)}")
        return 1
    options = server_options(args, command)
    ui_on = command == "server" and args.http_port != DISABLED and bool(args.ui_path)
    token = os.environ.get(TOKEN_ENV) or None
    if ui_on and not os.path.isdir(args.data_dir):
        raise OptionsError(f"-data-dir: {args.data_dir!r} is not a directory; nothing was "
                           "started")
    if args.udp_async:
        _err("nhbench fortio: -udp-async: no effect here (the event loop answers each "
             "datagram as it reads it)")
    loop = None
    if ui_on and args.sync:
        status, loop = sync(args, args.data_dir)
        if status:
            return status
    prefix = "/" + args.ui_path.strip("/") + "/" if args.ui_path.strip("/") else "/"
    first = options["listen"][0]
    ui = None
    if ui_on and "/" not in first and not args.cert and prefix != "/":
        # The UI first, on loopback: the C server forwards its path there.
        try:
            ui = start_fortio_ui(args.data_dir, "127.0.0.1", 0, prefix=prefix, token=token,
                                 stderr=sys.stderr,
                                 forwarded_from=first.rpartition(":")[0].strip("[]"))
        except (OSError, ValueError) as exc:
            _err(f"nhbench fortio {command}: the UI: {exc}")
            return 1
        options["forward_prefix"] = f"{prefix}=127.0.0.1:{ui.port}"
    try:
        server = TestServer(**options)
    except BaseException:
        if ui is not None:
            ui.stop()
        raise
    stop = threading.Event()
    with stop_on_signals(stop.set):
        try:
            server.start()
        except NHBenchError as exc:
            if ui is not None:
                ui.stop()
            _err(f"nhbench fortio {command}: {exc}")
            return 1
        try:
            scheme = server.scheme
            http_lines = command == "server" and any(
                value != DISABLED for value in (args.http_port, args.grpc_port))
            for host, port in server.addresses if http_lines else ():
                shown = f"[{host}]" if ":" in host else host
                _err(f"Fortio {command} (nhbench) listening on {scheme}://{shown}:{port}/ "
                     "(HTTP echo and gRPC)")
            for path in server.unix_paths if http_lines else ():
                _err(f"Fortio {command} (nhbench) listening on unix:{path}")
            for host, port in server.tcp_echo_addresses:
                _err(f"Fortio TCP echo server listening on {host}:{port}")
            for host, port in server.udp_echo_addresses:
                _err(f"Fortio UDP echo server listening on {host}:{port}")
            for host, port in server.redirect_addresses:
                _err(f"Https redirector (nhbench) running on {host}:{port}")
            for (host, port), (dest, dest_port) in server.tcp_proxy_addresses:
                _err(f"TCP proxy (nhbench) {host}:{port} -> {dest}:{dest_port}")
            for (host, port), urls in server.http_fanout_addresses:
                _err(f"Multi-server (nhbench) on {host}:{port} -> {' '.join(urls)}")
            if options.get("debug_env_dump"):
                _err(f"nhbench fortio {command}: warning: {options['debug_path']}?env=dump "
                     "exposes this process's environment (secrets included) to anyone who "
                     "can reach the HTTP port, as Fortio's does")
            if ui is not None:
                host, port = server.addresses[0]
                shown = "localhost" if host in ("0.0.0.0", "::") else (
                    f"[{host}]" if ":" in host else host)
                _err(f"UI started - visit:\nhttp://{shown}:{port}{prefix}")
                if loop is not None:
                    loop.start()
            elif ui_on:
                ui_host = "127.0.0.1"
                if token is not None and "/" not in first:
                    ui_host = first.rpartition(":")[0].strip("[]")
                _err(f"nhbench fortio {command}: the UI cannot share "
                     f"{'a TLS' if args.cert else 'a Unix socket' if '/' in first else 'the'}"
                     f" HTTP port{' at -ui-path /' if prefix == '/' else ''}: it gets its own")
                try:
                    ui = start_fortio_ui(args.data_dir, ui_host, 0, prefix=prefix,
                                         token=token, stderr=sys.stderr)
                except (OSError, ValueError) as exc:
                    _err(f"nhbench fortio {command}: the UI: {exc}")
                    return 1
                _err(f"UI started - visit:\n{ui.url}")
                if loop is not None:
                    loop.start()
            _err("All fortio servers started (nhbench)!")
            _serve_until(stop)
        finally:
            if loop is not None and ui is not None:
                loop.stop()
            if ui is not None:
                ui.stop()
            server.stop()
            # The server's own counters, as `nhbench server --print-stats-json` prints them.
            _err("stats " + json.dumps(server.stats(), sort_keys=True))
    return 0
