"""``nhbench fortio <command> [flags] [target]``: Fortio's client commands, grammar, defaults
and exit statuses, run by nhbench (docs/compat.md, "Fortio").

The command line is read with Go's flag grammar (`_goflag`) from the table of every Fortio
flag (`_fortio_flags`); `fortio_plan` turns Fortio's values into nhbench `Options` with
Fortio's meaning, and `FortioRun` (what Fortio prints that a Result does not hold). What is
printed, and where, is Fortio's: the banner and the report on stderr (Fortio's ``out`` is
stderr), the JSON with ``-json -`` on stdout; the text and the JSON themselves are
`_fortio_output`'s.

Fortio's load semantics carried over:

* ``-qps`` is the total over ``-c`` connections, each opened and warmed up with one request
  first (not counted), then used in turn: one nhbench worker at rps=qps over exactly c
  connections, the least recently used taking the next request; ``-qps 0`` (or less) is
  max speed: rps 0, c requests in flight.
* With a rate and a duration Fortio makes ``floor(qps*t)`` calls split evenly over the
  connections (at least 2 each: fewer connections otherwise) and stops: the same count here,
  with the duration as the cap. ``-n`` is that exact count with no time limit and no
  warm-up. ``-t 0`` runs until interrupted.
* Errors are counted and the run goes on (no failure predicate); ``-abort-on CODE`` stops it
  (and still exits 0, as Fortio). A warm-up error aborts with status 1 unless
  ``-allow-initial-errors``.
"""

from __future__ import annotations

import base64
import ipaddress
import math
import os
import socket
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TextIO
from urllib.parse import urlsplit

from .._exceptions import NHBenchError, OptionsError
from .._io import write_text
from .._signals import stop_on_signals
from ..options import parse_proxy_url
from ..outputs._output_dir import default_labels
from . import _fortio_output as output
from ._fortio_flags import FORTIO_FLAGS, FORTIO_KINDS, SERVER_REFUSAL, FortioArgs
from ._fortio_proxy import environment_proxy
from ._goflag import parse_go_flags, refused_for
from ._gofmt import go_duration
from ._table import ForeignFlag

__all__ = ["FORTIO_VERSION", "FortioPlan", "fortio_plan", "main", "usage"]

#: The Fortio release whose command line this front-end reads.
FORTIO_VERSION = "1.66.5"

#: Fortio's commands that are not here yet, and what to use instead.
_NOT_HERE = {"script": "Fortio's scripting mode"}
_NOT_HERE_REASON = ("{what} are not part of nhbench fortio yet: `nhbench fortio server` "
                    "serves the HTTP, gRPC, tcp-echo and udp-echo side; nothing was started")
#: The commands that start servers (`_fortio_server`).
_SERVERS = ("server", "tcp-echo", "udp-echo", "redirect", "proxies")

_PROG = "nhbench fortio"


def _err(message: str, stream: TextIO | None = None) -> None:
    out = stream or sys.stderr
    out.write(f"{message}\n")
    out.flush()


# ---- usage -------------------------------------------------------------------------------


def usage() -> str:
    """Fortio's usage text for this front-end, from the flag table."""
    lines = [
        f"nhbench fortio: Fortio {FORTIO_VERSION}'s command line, run by nhbench",
        "usage:",
        "\tnhbench fortio command [flags] target",
        "where command is one of: load (load testing), curl (single URL debug),",
        " report (report only UI over -data-dir: nhbench browse), grpcping (gRPC client),",
        " nc (single tcp or udp:// connection), server (echo, gRPC, tcp/udp echo and UI),",
        " tcp-echo, udp-echo, redirect (https redirector), proxies (-P TCP, -M HTTP proxies),",
        " version, help; script is refused.",
        "where target is a URL (http load tests) or host:port (grpc health test),",
        " or tcp://host:port (tcp load test), or udp://host:port (udp load test).",
        "flags (every Fortio flag; 'refused:' ones stop the command before anything is sent):",
    ]
    for record in sorted(FORTIO_FLAGS, key=lambda r: r.name.lower()):
        head = f"  {record.name}"
        if record.value is not None:
            head += f" {record.value}"
        lines.append(head)
        text = record.meaning
        if record.default:
            text += f" (default {record.default!r})"
        lines.append(f"    \t{text}")
        lines.append(f"    \t{'-> ' + record.nhbench if record.nhbench else 'refused: ' + record.refused}")
    return "\n".join(lines) + "\n"


# ---- the plan: Fortio's values as nhbench options --------------------------------------


@dataclass
class FortioPlan:
    """One Fortio load command line, read: the nhbench options and Fortio's run record."""

    options: dict[str, Any]
    run: Any  # _fortio_output.FortioRun
    args: FortioArgs
    #: Notes for stderr before the run (once each).
    notes: list[str] = field(default_factory=list)
    #: Files to remove after the run (a -payload-file - read from stdin).
    temporary: list[str] = field(default_factory=list)


#: Fortio's HTTP client flags, by flag: the FortioArgs field each sets.
_HTTP_ONLY = {
    "-H": "headers", "-X": "method", "-user": "user", "-content-type": "content_type",
    "-http1.0": "http1_0", "-h2": "h2", "-compression": "compression",
    "-stdclient": "stdclient", "-keepalive": "keepalive",
    "-connection-reuse": "connection_reuse", "-unix-socket": "unix_socket",
    "-resolve": "resolve", "-k": "insecure", "-https-insecure": "insecure",
    "-cacert": "cacert",
}
#: Those Fortio's gRPC runner does not read either (-H is its metadata, -k and -cacert its
#: TLS).
_NOT_FOR_GRPC = {flag: attr for flag, attr in _HTTP_ONLY.items()
                 if flag not in ("-H", "-user", "-k", "-https-insecure", "-cacert")}


def _elsewhere(record: ForeignFlag, command: str) -> str:
    if set(record.commands) & set(_SERVERS) and command not in _SERVERS:
        return SERVER_REFUSAL.replace("nhbench fortio load", f"nhbench fortio {command}")
    return refused_for(record, command)


def parse(command: str, argv: Sequence[str]) -> tuple[FortioArgs, list[str]] | None:
    """Read `argv` (after the command) with Go's grammar into Fortio's values; None when
    ``-h``/``-help`` asks for the usage."""
    parsed = parse_go_flags(argv, FORTIO_FLAGS, FORTIO_KINDS, command=command,
                            elsewhere=_elsewhere)
    if parsed.help:
        return None
    args = FortioArgs()
    by_name = {record.name: record for record in FORTIO_FLAGS}
    for name, value in parsed.values.items():
        record = by_name[name]
        assert record.apply is not None  # parse_go_flags refuses the refused ones
        record.apply(args, value)
        args.given.add(name)
    return args, parsed.args


def _percentiles(text: str) -> tuple[float, ...]:
    # Fortio's stats.ParsePercentiles: comma separated, spaces trimmed, each a float.
    values = []
    for part in text.split(","):
        part = part.strip()
        try:
            value = float(part)
        except ValueError:
            raise OptionsError(f"-p: {part!r} is not a percentile (Fortio's list: "
                               "50,75,90,99,99.9)", option="percentiles") from None
        if not 0 <= value <= 100:
            raise OptionsError(f"-p: {part} is outside 0-100", option="percentiles")
        values.append(value)
    return tuple(values)


def _threads(qps: float, duration: float, exactly: int, threads: int) -> tuple[int, int]:
    """Fortio's periodic runner: (threads, total calls; 0 when not counted in advance)."""
    if qps > 0 and (duration > 0 or exactly > 0):
        calls = exactly if exactly > 0 else int(qps * duration)
        if calls < 2:
            calls, threads = 2, 1
        if 2 * threads > calls:
            threads = calls // 2
        if exactly > 0:
            return threads, max(exactly, 2)
        return threads, (calls // threads) * threads
    return threads, exactly


def fortio_plan(args: FortioArgs, target: str, *, stdin: Any = None) -> FortioPlan:
    """Fortio's values and target as nhbench options and Fortio's run record."""
    notes: list[str] = []
    temporary: list[str] = []
    given = args.given
    options: dict[str, Any] = {"concurrency": 1, "no_default_failure_predicates": True,
                               "allow_no_success": True}
    url = target
    lowered = target.lower()
    echo = lowered.startswith(("tcp://", "udp://"))
    if args.grpc:
        if args.ping:
            run_type = "GRPC Ping"
            if args.grpc_ping_delay > 0:
                run_type += f" Delay={go_duration(round(args.grpc_ping_delay * 1e9))}"
        else:
            run_type = f"GRPC Health for '{args.healthservice}'"
    elif lowered.startswith("tcp://"):
        run_type = "TCP"
    elif lowered.startswith("udp://"):
        run_type = "UDP"
    else:
        run_type = "HTTP"
        if "://" not in target:
            # Fortio takes a bare host[:port]/path as http://.
            url = "http://" + target
    # Flags of Fortio's HTTP client that its other runners never read: ignored as Fortio
    # ignores them, and said so once each.
    unread = _HTTP_ONLY if echo else _NOT_FOR_GRPC if args.grpc else {}
    defaults = FortioArgs()
    for flag, attr in unread.items():
        if flag in given:
            setattr(args, attr, getattr(defaults, attr))
            notes.append(f"{flag}: ignored for {run_type.split()[0].lower()}"
                         f"{'://' if echo else ''} targets, as Fortio ignores it")
    secure = lowered.startswith("https://") or (args.grpc and bool(args.cacert))
    options["uri"] = url
    # -- the proxy Fortio's Go clients take from the environment (_fortio_proxy)
    found = None if echo else environment_proxy(url, stdclient=args.stdclient, h2=args.h2,
                                                grpc=args.grpc)
    if found is not None:
        variable, proxy = found
        try:
            parse_proxy_url(proxy, "proxy", default_port=80)
        except ValueError as exc:
            raise OptionsError(f"{variable}: {exc}", option="proxy") from None
        options["proxy"] = proxy
        notes.append(f"{variable}: the load goes through the proxy {proxy}, as Fortio's "
                     f"{'gRPC' if args.grpc else 'standard'} client's would")

    # -- the load shape
    qps = args.qps
    if not math.isfinite(qps):
        raise OptionsError(f"-qps: {qps} is no rate (a number, 0 or less for max)",
                           option="rps")
    if args.calc_qps:
        if args.exactly <= 0 or args.duration <= 0:
            raise OptionsError("-calc-qps: needs both -n and -t (Fortio's rule)",
                               option="calc_qps")
        qps = args.exactly / args.duration
    if qps > 1_000_000:
        raise OptionsError(f"-qps: {qps:g} is above nhbench's 1000000 a second",
                           option="rps")
    streams = max(args.streams, 1) if args.grpc else 1
    # Fortio's periodic runner: 0 threads is its default (4), fewer is 1.
    wanted = 4 if args.connections == 0 else max(args.connections, 1)
    if wanted * streams > 1_000_000:
        raise OptionsError(f"-c: {wanted * streams} connections and streams are above "
                           "nhbench's 1000000", option="connections")
    threads, total = _threads(qps, args.duration, args.exactly, wanted * streams)
    connections = -(-threads // streams)
    # Fortio opens and warms up all of -c before its runner lowers the threads (only -n
    # lowers them first): the connections opened are those of -c then.
    opened = connections if args.exactly > 0 else wanted
    options["connections"] = opened
    rate = qps if qps > 0 else 0.0
    if qps > 0 and total and args.duration > 0:
        # Fortio stretches each thread's schedule so that its last call (of `per`) is due
        # at total/qps: call i at (i + i/(per-1)) / (qps/threads), per-1 intervals where
        # a plain rate has per. The same spacing here: a rate of qps*(per-1)/per.
        per = total // threads
        if per >= 2:
            rate = qps * (per - 1) / per
    options["rps"] = rate
    if args.exactly > 0:
        options["requests"] = total
        options["no_duration"] = True
        requested_duration: float | None = None
    elif args.duration <= 0:
        options["no_duration"] = True
        requested_duration = None
    else:
        requested_duration = args.duration
        if total:
            # Fortio's calls are counted ahead and its last one is due at t: the count here,
            # the time of the last release (plus an interval) as the cap.
            options["requests"] = total
            options["duration"] = (total + 1) / rate
        else:
            options["duration"] = args.duration
    warmup = 0
    if args.exactly <= 0:
        # One warm-up request per connection, every connection opened first; not counted.
        options["sequential_warmup"] = True
        warmup = opened
        if args.allow_initial_errors:
            options["allow_initial_errors"] = True
    # Fortio opens every thread's connection before the first call, -n or not.
    options["prefetch_connections"] = True
    if run_type == "HTTP" or run_type == "TCP":
        # Fortio's threads each own a connection: take them in turn.
        options["experimental_h1_connection_reuse_strategy"] = "lru"
    if qps > 0 and threads > 1 and not args.jitter and not args.uniform:
        # Fortio's threads start together and keep in step: its calls come in bursts of one
        # a thread (what -uniform and -jitter undo); nhbench's releases are evenly spaced
        # unless asked for bursts.
        options["burst_size"] = threads
    if qps > 0:
        if args.jitter:
            options["jitter"] = True
        if args.nocatchup:
            options["no_catchup"] = True
        if args.uniform:
            options["uniform"] = True
    percentiles = _percentiles(args.percentiles)
    options["percentiles"] = percentiles
    if args.abort_on not in (0, -1) and not 100 <= args.abort_on <= 599:
        raise OptionsError(f"-abort-on: {args.abort_on} is no status code (100-599, or -1 "
                           "for socket errors)", option="abort_on")
    if args.abort_on == -1:
        options["failure_predicate"] = {"benchmark.pool_connection_failure": 0,
                                        "benchmark.stream_resets": 0}
    elif args.abort_on:
        options["abort_on"] = args.abort_on

    # -- the requests
    headers = list(args.headers)
    if args.user:
        token = base64.b64encode(args.user.encode()).decode()
        headers.append(f"Authorization: Basic {token}")
    if args.compression and (args.h2 or args.stdclient) and not echo:
        # Go's standard client asks for gzip when compression is on; the fast client never.
        headers.append("Accept-Encoding: gzip")
    if args.resolve:
        # Connect there; the URL's host stays in Host and the TLS name (nhbench's --resolve).
        options["resolve"] = (args.resolve,)
    if headers:
        options["request_header"] = tuple(headers)
    if args.method:
        options["request_method"] = args.method
    payload_length = 0
    if args.payload_size > 0:
        options["payload_size"] = payload_length = args.payload_size
    elif args.payload_file:
        path = args.payload_file
        if path == "-":
            data = (stdin or sys.stdin.buffer).read()
            handle, path = tempfile.mkstemp(prefix="nhbench-fortio-payload-")
            with os.fdopen(handle, "wb") as out:
                out.write(data)
            temporary.append(path)
        options["payload_file"] = path
        try:
            payload_length = os.path.getsize(path)
        except OSError:
            payload_length = 0  # the options refuse the missing file, by name
    elif args.payload:
        options["payload"] = args.payload
        payload_length = len(args.payload.encode())
    if args.grpc and payload_length:
        # Fortio's gRPC RunType names the payload's length.
        run_type += f" PayloadLength={payload_length}"
    if args.content_type:
        options["content_type"] = args.content_type
    if args.http1_0:
        options["http1_0"] = True
    if args.h2 and run_type == "HTTP":
        # Each of Fortio's threads has its own client: one call at a time a connection.
        options["protocol"] = "http2"
        options["max_concurrent_streams"] = 1
    if not args.keepalive:
        options["max_requests_per_connection"] = 1
    if args.connection_reuse:
        low, _, high = args.connection_reuse.partition(":")
        if high and high != low:
            raise OptionsError(
                f"-connection-reuse: a random reuse limit in {low}:{high} has no counterpart "
                "here (nhbench's --max-requests-per-connection is fixed: give N or N:N); "
                "nothing was sent")
        try:
            options["max_requests_per_connection"] = int(low)
        except ValueError:
            raise OptionsError(f"-connection-reuse: {args.connection_reuse!r} is not "
                                   "min:max; nothing was sent") from None
    if args.dns_method not in _DNS_METHODS:
        # Fortio's own validator refuses any other name, with this list.
        raise OptionsError(f"-dns-method: {args.dns_method!r} is none of cached-rr, first, "
                           "rnd or rr; nothing was sent", option="dns_method")
    if not args.unix_socket and "proxy" not in options:
        # A Unix socket has no addresses to pick from: Fortio reads no method then; through
        # an environment proxy the proxy resolves the origin's name.
        options["dns_method"] = _DNS_METHODS[args.dns_method]
        host = urlsplit(url).hostname or ""
        if (run_type == "HTTP" and args.dns_method != "cached-rr" and not args.no_reresolve
                and not args.resolve and not args.h2 and not args.stdclient
                and not _is_ip(host)):
            # Fortio's fast client looks the name up again for every new connection after
            # its first, unless the method is cached-rr or -no-reresolve is given; an IP (the
            # URL's or -resolve's) needs no lookup, and its standard and HTTP/2 clients
            # dial through Go's own resolver, which -dns-method does not steer.
            options["dns_refresh"] = "connection"
    families = {"ip4": "v4", "ip6": "v6", "ip": "auto"}
    if args.resolve_ip_type not in families:
        raise OptionsError(f"-resolve-ip-type: {args.resolve_ip_type!r} is none of ip4, "
                           "ip6, ip", option="address_family")
    options["address_family"] = families[args.resolve_ip_type]
    if args.resolve and _is_ip(args.resolve):
        # Fortio filters looked-up names by -resolve-ip-type, never a literal -resolve IP.
        options["address_family"] = "auto"
    if args.unix_socket:
        options["unix_socket"] = args.unix_socket

    # -- timeouts
    if run_type == "UDP":
        options["request_timeout"] = args.udp_timeout
    else:
        options["timeout"] = args.timeout if args.timeout > 0 else 3.0
        if run_type != "TCP" or "-timeout" in given:
            options["request_timeout"] = max(args.timeout, 0.0)

    # -- TLS: Fortio ignores -k and -cacert on http://
    if secure or (args.grpc and lowered.startswith("https://")):
        if args.insecure:
            options["insecure"] = True
        if args.cacert:
            options["cacert"] = args.cacert
    # -- the client certificate: wherever the run is TLS (Fortio's TLSConfig loads it with
    # the CA); on a cleartext run Fortio ignores it, as it does -cacert
    if secure or (args.grpc and (args.cacert or lowered.startswith("https://"))):
        if args.cert or args.key:
            options.update(cert=args.cert or None, key=args.key or None)
    # -- gRPC
    if args.grpc:
        options["grpc"] = True
        if args.cacert and not lowered.startswith(("https://", "grpcs://")):
            options["cacert"] = args.cacert
            if args.insecure:
                options["insecure"] = True
        if args.ping:
            options["ping"] = True
            if args.grpc_ping_delay > 0:
                options["grpc_ping_delay"] = args.grpc_ping_delay
        elif args.healthservice:
            options["grpc_service"] = args.healthservice
        # Fortio's c*s threads each make one call at a time, s of them sharing a
        # connection: s streams at most on each of the c connections.
        options["max_concurrent_streams"] = streams
    # -- what is printed
    level = "error" if args.quiet else {
        "debug": "debug", "verbose": "debug", "info": "info", "warning": "warn",
        "error": "error", "critical": "critical", "fatal": "critical",
    }.get(args.loglevel.lower())
    if level is None:
        raise OptionsError(f"-loglevel: {args.loglevel!r} is none of Debug Verbose Info "
                           "Warning Error Critical Fatal", option="verbosity")
    options["verbosity"] = level
    if "-r" in given:
        notes.append("-r: accepted for Fortio's report buckets; nhbench's histograms and "
                     "percentiles are exact")
    if "-gomaxprocs" in given:
        notes.append("-gomaxprocs: no effect, one nhbench event-loop worker carries every "
                     "connection")
    labels = args.labels or default_labels(target if "://" in target else url)
    record: dict[str, Any] = {
        "run_type": run_type, "url": target, "labels": labels,
        "requested_qps": qps if qps > 0 else -1.0,
        "requested_duration": requested_duration, "exactly": args.exactly,
        "connections": connections, "percentiles": percentiles,
        "resolution": args.resolution, "offset": args.offset, "jitter": args.jitter,
        "uniform": args.uniform, "nocatchup": args.nocatchup, "run_id": args.run_id,
        "streams": streams, "warmup": warmup,
    }
    # What only Fortio's flags know, for its JSON.
    if run_type == "HTTP":
        extra = {"UserCredentials": args.user, "MethodOverride": args.method,
                 "Resolve": args.resolve}
        record["json_fields"] = {k: v for k, v in extra.items() if v}
    run = output.FortioRun(**record)
    return FortioPlan(options=options, run=run, args=args, notes=notes, temporary=temporary)


# ---- the commands -----------------------------------------------------------------------


@contextmanager
def _stop_on_signals(stop: Callable[[], object]) -> Iterator[None]:
    # Fortio's ^C ends the run (or stops the servers) and prints what it has: every
    # SIGINT/SIGTERM drains, none aborts.
    def on_signal(signum: int) -> None:
        stop()

    with stop_on_signals(on_signal, second_sigint_aborts=False):
        yield


def _warmup_error(result: Any) -> str | None:
    """Fortio's reason for aborting after the warm-up: its first failed call."""
    warm = result.warmup
    if warm is None:
        return None
    counters = warm.counter_values
    for name in ("benchmark.pool_connection_failure", "benchmark.stream_resets",
                 "benchmark.request_timeout"):
        if counters.get(name, 0):
            return "-1"
    for name, value in sorted(counters.items()):
        if value and name.startswith("benchmark.http_") and name[15:].isdigit():
            code = int(name[15:])
            if not 200 <= code < 300 and code != 418:
                return str(code)
    for name in ("benchmark.grpc_error", "benchmark.echo_mismatch"):
        if counters.get(name, 0):
            return "-1"
    return None


def _benchmark(options: Any, stop_on_warmup_error: bool) -> Any:
    """The run on this machine; with `stop_on_warmup_error` a failed warm-up call ends it
    before the measured phase, as Fortio aborts (the core's ``warmup_stop_on_error``)."""
    from .._run import Benchmark

    class FortioBenchmark(Benchmark):
        def core_config(self) -> dict[str, Any]:
            config = super().core_config()
            if stop_on_warmup_error:
                config["warmup_stop_on_error"] = True
            return config

    return FortioBenchmark(options)


def _load(args: FortioArgs, target: str) -> int:
    from ..options import make_options

    plan = fortio_plan(args, target)
    try:
        _check_json_path(args)
        try:
            options = make_options(**plan.options)
        except OptionsError as exc:
            raise _in_fortio_terms(exc) from None
        for note in plan.notes:
            _err(note)
        sys.stderr.write(output.fortio_banner(plan.run))
        sys.stderr.flush()
        benchmark = _benchmark(options, options.sequential_warmup
                               and not args.allow_initial_errors)
        with _stop_on_signals(benchmark.stop):
            try:
                result = benchmark.run(None, None)
            except OptionsError as exc:
                # Refused at the start (the descriptor limit): nothing was sent.
                raise _in_fortio_terms(exc) from None
    finally:
        for path in plan.temporary:
            os.unlink(path)
    error = None if args.allow_initial_errors else _warmup_error(result)
    if error is not None:
        # The run ended with its warm-up: Fortio's one line, no report, no JSON, status 1.
        _err(f"Aborting because of error {error} for {target}")
        return 1
    sys.stderr.write(output.fortio_report(result, plan.run))
    sys.stderr.flush()
    if args.json or args.auto_save:
        _write_json(output.fortio_json_text(result, plan.run), args,
                    output.fortio_id(result, plan.run))
    if result.terminated_by == "error" and not result.counters.get("upstream_rq_total"):
        _err(f"Aborting because of {result.error or 'an error'}")
        return 1
    return 0


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text.strip().strip("[]"))
    except ValueError:
        return False
    return True


def _resolved_connector(resolve: str, family: str) -> Callable[..., socket.socket]:
    """http.client's socket factory for curl mode's -resolve: connect to `resolve` (an
    address, or a name resolved now) at the URL's port."""
    from ..options import parse_resolve_entry
    from ..options import resolve as resolve_host

    def connect(address: tuple[str, int], *args: Any, **kwargs: Any) -> socket.socket:
        host = resolve_host(parse_resolve_entry(resolve, resolve), address[1], family)
        return socket.create_connection((host, address[1]), *args, **kwargs)

    return connect


#: Fortio's -dns-method names (fnet's validator) and nhbench's --dns-method for each. Fortio's
#: cached-rr resolves once; its rr, rnd and first look the name up again for each new
#: connection of its fast client (--dns-refresh connection, set beside it).
_DNS_METHODS = {"cached-rr": "rr", "rr": "rr", "rnd": "random", "first": "first"}

#: nhbench's options by the Fortio flag that sets them, for messages.
_OPTION_FLAGS = {
    "uri": "target", "rps": "-qps", "connections": "-c", "duration": "-t",
    "requests": "-n", "percentiles": "-p", "request_header": "-H", "request_method": "-X",
    "payload": "-payload", "payload_file": "-payload-file", "payload_size": "-payload-size",
    "content_type": "-content-type", "cacert": "-cacert", "unix_socket": "-unix-socket",
    "timeout": "-timeout", "request_timeout": "-timeout", "abort_on": "-abort-on",
    "max_concurrent_streams": "-s", "grpc_service": "-healthservice",
    "grpc_ping_delay": "-grpc-ping-delay", "max_requests_per_connection": "-connection-reuse",
    "resolve": "-resolve", "dns_method": "-dns-method",
}


def _in_fortio_terms(exc: OptionsError) -> OptionsError:
    """The options' one-line refusal, named by the Fortio flag the user gave."""
    message = str(exc)
    flag = _OPTION_FLAGS.get(exc.option or "")
    if flag is not None and exc.option and message.startswith(f"{exc.option}:"):
        message = flag + message[len(exc.option):]
    return OptionsError(message, option=exc.option)


def _check_json_path(args: FortioArgs) -> None:
    """Refuse before the run a -json file or -a directory that cannot be written (Fortio
    finds out after the run, and dies)."""
    if args.json == "-" or not (args.json or args.auto_save):
        return
    directory = os.path.dirname(os.path.abspath(args.json)) if args.json else args.data_dir
    flag = "-json" if args.json else "-data-dir"
    if not os.path.isdir(directory):
        raise OptionsError(f"{flag}: {directory!r} is not a directory; nothing was sent")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise OptionsError(f"{flag}: {directory!r} is not writable; nothing was sent")


def _write_json(text: str, args: FortioArgs, ident: str) -> None:
    name = args.json
    if name == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        name = "stdout"
    else:
        if not name:
            name = os.path.join(args.data_dir, f"{ident}.json")
        try:
            write_text(name, text)
        except OSError as exc:
            raise NHBenchError(f"-json: {exc}") from None
    _err(f"Successfully wrote {len(text.encode())} bytes of Json data to {name}")


def _unix_http_connection(path: str, host: str, timeout: float) -> Any:
    """An http.client connection over the Unix stream socket at `path` (curl's
    -unix-socket); the URL's host is only the Host header."""
    import http.client
    import socket

    class UnixHTTPConnection(http.client.HTTPConnection):
        def connect(self) -> None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.settimeout(self.timeout)
                sock.connect(path)
            except OSError:
                sock.close()
                raise
            self.sock = sock

    return UnixHTTPConnection(host, timeout=timeout)


def _curl(args: FortioArgs, target: str) -> int:
    """One request, Fortio's curl: the status line and headers on stderr (stdout with
    -curl-stdout-headers), the body on stdout; exit 1 when it is not a 2xx."""
    import http.client
    import ssl

    plan = fortio_plan(args, target)
    try:
        options = plan.options
        if args.grpc or plan.run.run_type != "HTTP":
            raise OptionsError(f"{target}: nhbench fortio curl fetches http:// and "
                                   "https:// URLs only; nothing was sent")
        if args.h2:
            # The one request is Python's http.client, HTTP/1.x only: an h2 request would
            # silently be HTTP/1.1.
            raise OptionsError("-h2: nhbench fortio curl makes its request with HTTP/1.1 "
                               "(`nhbench fortio load -h2 -n 1 URL` makes one h2 call); "
                               "nothing was sent")
        parts = urlsplit(options["uri"])
        headers = dict(h.split(":", 1) for h in options.get("request_header", ()))
        headers = {k.strip(): v.strip() for k, v in headers.items()}
        headers.setdefault("User-Agent", f"fortio.org/fortio-{FORTIO_VERSION} (nhbench)")
        body: bytes | None = None
        if "payload_file" in options:
            with open(options["payload_file"], "rb") as source:
                body = source.read()
        elif "payload" in options:
            body = options["payload"].encode()
        elif "payload_size" in options:
            body = os.urandom(options["payload_size"])
        method = options.get("request_method") or ("POST" if body is not None or
                                                   args.content_type else "GET")
        if args.content_type:
            headers["Content-Type"] = args.content_type
        timeout = options.get("timeout", 3.0)
        connection: http.client.HTTPConnection
        unix_socket = options.get("unix_socket")
        if unix_socket and parts.scheme == "https":
            raise OptionsError("-unix-socket: nhbench fortio curl speaks plain HTTP over a "
                               "Unix socket, not https://; nothing was sent")
        if unix_socket:
            connection = _unix_http_connection(unix_socket, parts.hostname or "localhost",
                                              timeout)
        elif parts.scheme == "https":
            context = ssl.create_default_context(cafile=args.cacert or None)
            if args.cert or args.key:
                from ..options import check_key_pair

                # The same checks as `load`'s --cert/--key: refused by name, nothing sent.
                if not (args.cert and args.key):
                    raise OptionsError("-cert: needs -key (and -key needs -cert); nothing "
                                       "was sent")
                problem = check_key_pair(args.cert, args.key, None)
                if problem:
                    raise OptionsError(f"-{problem[0]}: {problem[1]}; nothing was sent")
                context.load_cert_chain(args.cert, args.key,
                                        password=_key_passphrase(args.key))
            if args.insecure:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            connection = http.client.HTTPSConnection(
                parts.hostname or "", parts.port, timeout=timeout, context=context)
        else:
            connection = http.client.HTTPConnection(parts.hostname or "", parts.port,
                                                    timeout=timeout)
        proxied = "proxy" in options and not unix_socket
        if proxied:
            # Fortio's standard client took a proxy from the environment (fortio_plan): the
            # one request goes through it too, CONNECT for https, absolute-form for http.
            proxy_host, proxy_port, proxy_auth = parse_proxy_url(options["proxy"], "proxy",
                                                                 default_port=80)
            auth = {"Proxy-Authorization": proxy_auth} if proxy_auth else {}
            if parts.scheme == "https":
                connection = http.client.HTTPSConnection(proxy_host, proxy_port,
                                                         timeout=timeout, context=context)
                connection.set_tunnel(parts.hostname or "", parts.port or 443, headers=auth)
            else:
                connection = http.client.HTTPConnection(proxy_host, proxy_port,
                                                        timeout=timeout)
                headers.update(auth)
        if args.resolve and not unix_socket and not proxied:
            # -resolve: the socket goes to that address; Host and the TLS name stay the
            # URL's, as in `load`. Through a proxy the proxy resolves the name.
            connection._create_connection = (  # type: ignore[attr-defined]
                _resolved_connector(args.resolve, options.get("address_family", "v4")))
        if args.http1_0:
            connection._http_vsn = 10  # type: ignore[attr-defined]
            connection._http_vsn_str = "HTTP/1.0"  # type: ignore[attr-defined]
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        if proxied and parts.scheme == "http":
            path = f"http://{parts.netloc}{path}"
        try:
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException) as exc:
            _err(f"Unable to connect to {target}: {exc}")
            return 1
        finally:
            connection.close()
    finally:
        for temp in plan.temporary:
            os.unlink(temp)
    head = [f"HTTP/{response.version / 10:.1f} {response.status} {response.reason}"]
    head += [f"{name}: {value}" for name, value in response.getheaders()]
    stream = sys.stdout if args.curl_stdout_headers else sys.stderr
    stream.write("\r\n".join(head) + "\r\n\r\n")
    stream.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.flush()
    return 0 if 200 <= response.status < 300 else 1


def _key_passphrase(key: str) -> str | None:
    """The passphrase of an encrypted -key, asked for on a terminal (check_key_pair has
    refused an encrypted key when there is none), else None."""
    from ..options import client_cert_pem

    return client_cert_pem(key, key, None)[2] or None


def _nc(args: FortioArgs, target: str) -> int:
    from ._fortio_nc import NcValues, nc_main

    return nc_main(NcValues(dont_stop_on_eof=args.nc_dont_stop_on_eof,
                            resolve_ip_type=args.resolve_ip_type), target)


def _grpcping(args: FortioArgs, target: str) -> int:
    from .._input import read_input
    from ._fortio_grpcping import GrpcPingValues, grpcping_main

    # Fortio's order: a random payload of -payload-size, else -payload-file, else -payload.
    if args.payload_size > 0:
        payload = os.urandom(args.payload_size)
    elif args.payload_file:
        payload = read_input(args.payload_file, "grpc-payload", "-payload-file", stdin=True)
    else:
        payload = args.payload.encode()
    headers = []
    for header in args.headers:
        name, _, value = header.partition(":")
        headers.append((name.strip(), value.strip()))
    return grpcping_main(GrpcPingValues(
        count=args.exactly, health=args.health, health_service=args.healthservice,
        payload=payload, ping_delay_ns=round(args.grpc_ping_delay * 1e9), cacert=args.cacert,
        cert=args.cert, key=args.key,
        insecure=args.insecure, unix_socket=args.unix_socket, headers=tuple(headers)), target)


def _report(args: FortioArgs, rest: list[str]) -> int:
    """Fortio's report-only UI: nhbench's result browser over -data-dir on -http-port
    (a bare port is served on loopback, where Fortio listens on every interface)."""
    import threading
    from pathlib import Path

    from ..browse import BrowseServer

    if rest:
        _err(f"{_PROG}: At most 0 argument expected, got {len(rest)}")
        return 1
    port = args.http_port
    host = "127.0.0.1"
    if ":" in port:
        host, _, port = port.rpartition(":")
        host = host.strip("[]") or "0.0.0.0"
    if not port.isdigit() or int(port) > 65535:
        raise OptionsError(f"-http-port: {args.http_port!r} is not a TCP port here "
                               "(nhbench browse listens on TCP); nothing was started")
    directory = Path(args.data_dir)
    if not directory.is_dir():
        raise OptionsError(f"-data-dir: {args.data_dir!r} is not a directory; nothing "
                               "was started")
    status, loop = _sync(args, directory)
    if status:
        return status
    server = BrowseServer(directory, host, int(port), base_url=args.base_url,
                          reading_processes=True)
    stop = threading.Event()
    with _stop_on_signals(stop.set):
        try:
            bound = server.start()
        except OSError as exc:
            _err(f"{_PROG}: -http-port: cannot listen on {host}:{port}: "
                 f"{exc.strerror or exc}")
            return 1
        try:
            shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
            _err(f"UI started - visit:\nhttp://{shown}:{bound[1]}/")
            server.warm()
            if loop is not None:
                loop.start()
            while not stop.is_set():
                stop.wait(0.5)
        finally:
            if loop is not None:
                loop.stop()
            server.stop()
    return 0


def _sync(args: FortioArgs, directory: Any) -> tuple[int, Any]:
    """-sync before serving (Fortio syncs first, and exits 1 when the listing cannot be
    read): (exit status, the -sync-interval loop to start or None)."""
    if not args.sync:
        return 0, None
    from ..browse import SyncError, SyncLoop, sync_results

    try:
        report = sync_results(args.sync, directory)
    except (SyncError, ValueError) as exc:
        _err(f"{_PROG}: -sync: {exc}")
        return 1, None
    _err(f"sync: {report.summary()}")
    for line in report.problems:
        _err(f"sync: {line}")
    if args.sync_interval > 0:
        return 0, SyncLoop(args.sync, directory, args.sync_interval)
    return 0, None


def _version(full: bool) -> int:
    """``fortio version``: Fortio's version first (what a script reads), then who answers.
    ``fortio buildinfo``: Fortio's shape (its long version line, then Go's build-info lines:
    ``path``, ``mod``, one ``dep`` a module, ``build key=value``) with nhbench's facts:
    Python for Go, the C libraries for the Go modules, the core's build options."""
    from .._version import __version__, build_info

    if not full:
        sys.stdout.write(f"{FORTIO_VERSION} (nhbench {__version__})\n")
        return 0
    info = build_info()
    core = info["core"]
    arch = info["platform"].split()
    lines = [f"{FORTIO_VERSION} nhbench/{__version__} python{info['python']} "
             f"{arch[-1]} {arch[0]}",
             f"python\t{info['python_implementation']} {info['python']}",
             "path\tnhbench.compat (Fortio's command line, run by nhbench)",
             f"mod\tnhbench\t{__version__}\t{info['commit'] or 'unknown'}"]
    if core is None:
        lines.append(f"build\tcore=unavailable ({info.get('core_error', '')})")
    else:
        lines += [f"dep\t{name}\t{v['linked'] or v['built']}"
                  for name, v in core["libraries"].items()]
        lines += [f"build\t{key}={str(bool(core[key])).lower()}"
                  for key in ("http3", "regex_checks", "sanitizers", "werror")]
    sys.stdout.write("\n".join(lines) + "\n")
    return 0 if core is not None else 1


def main(argv: list[str]) -> int:
    """``nhbench fortio`` with every argument after it; the exit status."""
    if not argv:
        _err(usage().rstrip("\n"))
        _err("Error: nhbench fortio needs a command (load, curl, report, nc, grpcping, version, help)")
        return 1
    command, rest = argv[0], argv[1:]
    if command in ("help", "-h", "-help", "--help", "envhelp"):
        sys.stdout.write(usage())
        return 0
    if command in ("version", "buildinfo") and not rest:
        # Fortio's special words only alone: with anything after them they are an
        # unknown command once the flags have been read (below).
        return _version(command == "buildinfo")
    if command in _NOT_HERE:
        _err(f"{_PROG} {command}: " + _NOT_HERE_REASON.format(what=_NOT_HERE[command]))
        return 2
    if command in ("version", "buildinfo"):
        # `fortio version -s`: Go reads the flags first (-s wants a value: 2), then the word
        # is no command (1).
        try:
            if parse("load", rest) is None:
                sys.stderr.write(usage())
                return 0
        except (OptionsError, ValueError) as exc:
            _err(f"{_PROG}: {exc}")
            return 2
        _err(f'{_PROG}: Error: unknown command "{command}"')
        return 1
    if command not in ("load", "curl", "report", "nc", "grpcping") + _SERVERS:
        _err(f'{_PROG}: Error: unknown command "{command}" (load, curl, report, nc, '
             "grpcping, server, tcp-echo, udp-echo, redirect, proxies, version, help)")
        return 1
    try:
        read = parse(command, rest)
        if read is None:
            sys.stderr.write(usage())
            return 0
        args, targets = read
        if command == "report":
            return _report(args, targets)
        if command in _SERVERS:
            from ._fortio_server import server_main

            return server_main(args, command, targets, stop_on_signals=_stop_on_signals,
                               sync=_sync)
        if command in ("nc", "grpcping") and len(targets) == 1:
            return (_nc if command == "nc" else _grpcping)(args, targets[0])
        if len(targets) != 1:
            if targets:
                _err(f"{_PROG}: At most 1 argument expected, got {len(targets)}")
            else:
                _err(f"{_PROG}: Error: fortio load/curl needs a URL or destination")
            return 1
        if command == "curl" or args.curl:
            return _curl(args, targets[0])
        return _load(args, targets[0])
    except OptionsError as exc:
        _err(f"{_PROG}: {exc}")
        return 2
    except NHBenchError as exc:
        _err(f"{_PROG}: {exc}")
        return 1
    except ValueError as exc:
        _err(f"{_PROG}: {exc}")
        return 2


