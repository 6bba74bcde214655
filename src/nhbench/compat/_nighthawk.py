"""``nhbench nighthawk client|transform|service|test-server``: Nighthawk's four binaries
(``nighthawk_client``, ``nighthawk_output_transform``, ``nighthawk_service``,
``nighthawk_test_server``) with their TCLAP grammar (`_tclap`), flags, defaults and outputs,
carried out by nhbench (docs/compat.md, "Nighthawk").

`plan` reads a command line and says what to do, without doing it: print a text and exit
(`Done`: help, version), run a benchmark (`ClientRun`: nhbench `Options` built with
Nighthawk's defaults and meanings), or run one of nhbench's own commands (`Native`:
``nhbench transform``, ``nhbench service``, ``nhbench server`` with the argument list they
take). The CLI module (``nhbench.cli._nighthawk``) carries the plan out with ``nhbench run``'s
reporting and exit statuses, so nothing here writes or sends anything. Invalid input is an
`OptionsError` (exit 2, one line, nothing sent).

Nighthawk's defaults that differ from ``nhbench run``'s, and are applied here:

* the output is Nighthawk's human layout (format ``nighthawk_human``);
* the server's certificate is not verified (``insecure``): nighthawk_client's URI "in case of
  https no certificates are validated", and its lab and CI origins have self-signed
  certificates; a --tls-context or --transport-socket with a validation context (trusted CA)
  verifies, as in Nighthawk. The result records that the certificate was not verified;
* ``--timeout`` (30 s) also bounds the final drain, and a request has no timeout of its own;
* a run without a 2xx response is no failure by itself (Nighthawk has no such check: its
  failure predicates decide).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._exceptions import OptionsError
from ._nighthawk_flags import NIGHTHAWK_CLIENT_FLAGS, NIGHTHAWK_OUTPUT_FORMATS, apply_flag
from ._table import ForeignFlag
from ._tclap import HELP, TclapArg, TclapParse, parse, usage

if TYPE_CHECKING:
    from ..options import Options

__all__ = ["CLIENT_ARGS", "COMMANDS", "TEST_SERVER_FLAGS", "ClientRun", "Done", "Native",
           "client_options", "plan"]

#: The binaries, by the name ``nhbench nighthawk`` takes.
COMMANDS = {
    "client": "nighthawk_client",
    "transform": "nighthawk_output_transform",
    "service": "nighthawk_service",
    "test-server": "nighthawk_test_server",
}


@dataclass(frozen=True)
class Done:
    """Print `stdout` and exit with `status` (help, version)."""

    status: int
    stdout: str = ""


@dataclass(frozen=True)
class ClientRun:
    """Run these options and report as nighthawk_client does."""

    options: Options


@dataclass(frozen=True)
class Native:
    """Run ``nhbench ARGV...`` (one of nhbench's own commands); remove `temporary` after."""

    argv: tuple[str, ...]
    temporary: tuple[str, ...] = ()


def _arg(flag: ForeignFlag) -> TclapArg:
    long = next(name[2:] for name in flag.names if name.startswith("--"))
    short = next((name[1:] for name in flag.names if not name.startswith("--")), "")
    value = flag.value
    allowed = tuple(value.split("|")) if value and "|" in value else ()
    return TclapArg(long, short, value, multi=flag.repeatable, allowed=allowed,
                    help=flag.meaning)


#: nighthawk_client's TCLAP arguments, made from the flag table.
CLIENT_ARGS = tuple(_arg(flag) for flag in NIGHTHAWK_CLIENT_FLAGS)
_CLIENT_FLAG = {_arg(flag).name: flag for flag in NIGHTHAWK_CLIENT_FLAGS}

_DESCRIPTION = "L7 (HTTP/HTTPS/HTTP2) performance characterization tool."


def _version(program: str) -> str:
    from .._version import __version__

    # TCLAP's --version layout, with nhbench's version: a script that records it sees which
    # tool ran.
    return f"\n{program}  version: {__version__} (nhbench {__version__})\n\n"


def _parse(argv: Sequence[str], program: str, args: Sequence[TclapArg],
           positional: str | None, description: str = _DESCRIPTION) -> TclapParse | Done:
    parsed = parse(argv, args, positional=positional, program=program)
    if parsed == HELP:
        return Done(0, usage(program, args, positional, description))
    if isinstance(parsed, str):
        return Done(0, _version(program))
    return parsed


# ---- nighthawk_client -------------------------------------------------------------------------


def client_options(parsed: TclapParse) -> Options:
    """nhbench `Options` for a parsed nighthawk_client command line, Nighthawk's defaults
    included. Raises OptionsError (OptionsError is turned into one)."""
    from ..options import make_options

    for name in parsed.values:
        flag = _CLIENT_FLAG[name]
        if flag.refused:
            raise OptionsError(str(flag.refusal(parsed.given[name])))
    # options_impl.cc's own exclusions (TCLAP cannot express them).
    if "duration" in parsed and "no-duration" in parsed:
        raise OptionsError("--duration and --no-duration are mutually exclusive")
    if "h2" in parsed and "protocol" in parsed:
        raise OptionsError("--h2 and --protocol are mutually exclusive")
    if "stats-flush-interval" in parsed and "stats-flush-interval-duration" in parsed:
        raise OptionsError("--stats-flush-interval and --stats-flush-interval-duration are "
                           "mutually exclusive")
    if (("stats-flush-interval" in parsed or "stats-flush-interval-duration" in parsed)
            and "stats-sinks" not in parsed):
        raise OptionsError("if --stats-flush-interval or --stats-flush-interval-duration is "
                           "set, then --stats-sinks must also be set")
    values: dict[str, Any] = {
        # Nighthawk's defaults where nhbench's differ (docs/compat.md).
        "output_format": NIGHTHAWK_OUTPUT_FORMATS["human"],
        "drain_timeout": 30,
        "request_timeout": 0,
        "allow_no_success": True,
    }
    for name, value in parsed.values.items():
        apply_flag(_CLIENT_FLAG[name], values, value, parsed.given[name])
    if parsed.positional is not None:
        values["uri"] = parsed.positional
    elif not values.get("multi_target_endpoint"):
        raise OptionsError("nighthawk_client needs a URI or --multi-target-* options")
    if _https(values) and not _verifies(values):
        values["insecure"] = True
    try:
        return make_options(**values)
    except OptionsError as exc:
        raise OptionsError(_as_given(str(exc), parsed)) from None


def _as_given(message: str, parsed: TclapParse) -> str:
    # The options' messages name the field ("concurrency: must be ..."); the user typed a
    # flag, so the flag is named as given when the field has the flag's name.
    field, colon, rest = message.partition(":")
    name = field.replace("_", "-")
    if colon and name in parsed.given:
        return f"{parsed.given[name]}:{rest}"
    return message


def _https(values: dict[str, Any]) -> bool:
    uri = str(values.get("uri") or "")
    return uri.lower().startswith("https:") or bool(values.get("multi_target_use_https"))


def _verifies(values: dict[str, Any]) -> bool:
    # A TLS context with a validation context (a trusted CA, a verification mode) asks for
    # verification, as it does in Nighthawk; Options refuses insecure next to it.
    import json

    for field, path in (("tls_context", ()), ("transport_socket", ("typed_config",))):
        if not values.get(field):
            continue
        context: Any = json.loads(values[field])
        for key in (*path, "common_tls_context"):
            context = context.get(key) if isinstance(context, dict) else None
        return isinstance(context, dict) and "validation_context" in context
    return False


def _client(argv: Sequence[str]) -> Done | ClientRun:
    parsed = _parse(argv, "nighthawk_client", CLIENT_ARGS, "uri format")
    if isinstance(parsed, Done):
        return parsed
    return ClientRun(client_options(parsed))


# ---- nighthawk_output_transform ---------------------------------------------------------------

_TRANSFORM_ARGS = (
    TclapArg("output-format", value="string", allowed=tuple(NIGHTHAWK_OUTPUT_FORMATS),
             required=True, help="Output format."),
)


def _transform(argv: Sequence[str]) -> Done | Native:
    parsed = _parse(argv, "nighthawk_output_transform", _TRANSFORM_ARGS, None,
                    "L7 (HTTP/HTTPS/HTTP2) performance characterization transformation tool.")
    if isinstance(parsed, Done):
        return parsed
    output_format = NIGHTHAWK_OUTPUT_FORMATS[str(parsed.text("output-format"))]
    # Nighthawk's JSON on stdin, the chosen format on stdout: nhbench transform's own job.
    return Native(("transform", "--output-format", output_format, "-"))


# ---- nighthawk_service ------------------------------------------------------------------------

_SERVICE_ARGS = (
    TclapArg("service", value="string",
             allowed=("traffic-generator-service", "dummy-request-source"),
             help="Specifies which service to run."),
    TclapArg("listener-address-file", value="", help="Where to write the address:port."),
    TclapArg("listen", value="address:port", help="The address:port to listen on."),
)


def _service(argv: Sequence[str]) -> Done | Native:
    parsed = _parse(argv, "nighthawk_service", _SERVICE_ARGS, None)
    if isinstance(parsed, Done):
        return parsed
    if parsed.text("service") == "dummy-request-source":
        raise OptionsError("--service dummy-request-source: Nighthawk's test request source "
                           "service has no counterpart here (nhbench service serves "
                           "NighthawkService only)")
    native = ["service"]
    # No --listen: nhbench service's default, 127.0.0.1:8443, rather than Nighthawk's
    # 0.0.0.0:8443: the service has no TLS and no authentication unless given a token.
    if parsed.text("listen") is not None:
        native += ["--listen", str(parsed.text("listen"))]
    if parsed.text("listener-address-file"):
        native += ["--listener-address-file", str(parsed.text("listener-address-file"))]
    return Native(tuple(native))


# ---- nighthawk_test_server (Envoy) ------------------------------------------------------------

#: Envoy's flags as nighthawk_test_server takes them: mapped onto nhbench server, accepted
#: without effect where they only concern what nhbench server does not have (hot restart,
#: xDS identity, log levels), or refused by name.
TEST_SERVER_FLAGS: tuple[ForeignFlag, ...] = (
    ForeignFlag(("-c", "--config-path"), "string", "the Envoy bootstrap file (YAML or JSON)",
                nhbench="nhbench server --config (Nighthawk's test-server bootstraps)"),
    ForeignFlag(("--config-yaml",), "string", "an Envoy bootstrap given inline as YAML",
                nhbench="nhbench server --config (a temporary file)"),
    ForeignFlag(("--concurrency",), "uint32_t", "worker threads (default: every CPU)",
                nhbench="nhbench server --workers (default auto, as Envoy's)",
                default="every CPU"),
    ForeignFlag(("-l", "--log-level"), "string", "the log level",
                nhbench="accepted: nhbench server logs only its listening lines and errors",
                default="info"),
    ForeignFlag(("--component-log-level",), "string", "log levels per component",
                nhbench="accepted: nhbench server logs only its listening lines and errors"),
    ForeignFlag(("--log-format",), "string", "the log line format",
                nhbench="accepted: nhbench server logs only its listening lines and errors"),
    ForeignFlag(("--base-id",), "uint32_t", "the shared memory id of hot restart",
                nhbench="accepted: nhbench server has no hot restart and no shared memory",
                default="0"),
    ForeignFlag(("--use-dynamic-base-id",), None, "pick a free shared memory id",
                nhbench="accepted: nhbench server has no hot restart and no shared memory"),
    ForeignFlag(("--disable-hot-restart",), None, "no hot restart",
                nhbench="accepted: nhbench server has no hot restart"),
    ForeignFlag(("--restart-epoch",), "uint32_t", "the hot restart epoch",
                refused="hot restart has no counterpart here"),
    ForeignFlag(("--service-cluster",), "string", "the local cluster name (xDS, stats)",
                nhbench="accepted: nhbench server has no xDS and no stats tags"),
    ForeignFlag(("--service-node",), "string", "the local node name (xDS, stats)",
                nhbench="accepted: nhbench server has no xDS and no stats tags"),
    ForeignFlag(("--service-zone",), "string", "the local zone (xDS, stats)",
                nhbench="accepted: nhbench server has no xDS and no stats tags"),
    ForeignFlag(("--mode",), "serve|validate|init_only", "serve, or check the config only",
                nhbench="serve only; validate and init_only are refused", default="serve"),
    ForeignFlag(("--log-path",), "string", "write the log to this file",
                refused="nhbench server keeps no log file"),
    ForeignFlag(("--admin-address-path",), "string", "write the admin address to this file",
                refused="use nhbench server --address-file (JSON of every bound address)"),
    ForeignFlag(("--drain-time-s",), "uint32_t", "drain time of hot restart and shutdown",
                refused="Envoy's drain manager has no counterpart here"),
    ForeignFlag(("--parent-shutdown-time-s",), "uint32_t", "hot restart parent shutdown",
                refused="hot restart has no counterpart here"),
    ForeignFlag(("--drain-strategy",), "gradual|immediate", "how listeners drain",
                refused="Envoy's drain manager has no counterpart here"),
    ForeignFlag(("--local-address-ip-version",), "v4|v6", "the local address family",
                refused="nhbench server listens where the bootstrap's listeners say"),
    ForeignFlag(("--file-flush-interval-msec",), "uint32_t", "access log flush interval",
                refused="nhbench server writes no access log"),
    ForeignFlag(("--cpuset-threads",), None, "size --concurrency by the cpuset",
                refused="use --concurrency (nhbench server's auto counts the affinity mask)"),
    ForeignFlag(("--enable-mutex-tracing",), None, "mutex contention tracing",
                refused="Envoy's mutex tracing has no counterpart here"),
    ForeignFlag(("--disable-extensions",), "string", "disable Envoy extensions",
                refused="nhbench server has no Envoy extensions"),
    ForeignFlag(("--allow-unknown-static-fields",), None,
                "accept unknown fields in the bootstrap",
                refused="nhbench server reads only the bootstrap fields it serves as Envoy "
                "would and refuses the others by name"),
    ForeignFlag(("--reject-unknown-dynamic-fields",), None, "xDS field checks",
                refused="nhbench server has no xDS"),
    ForeignFlag(("--ignore-unknown-dynamic-fields",), None, "xDS field checks",
                refused="nhbench server has no xDS"),
)

_SERVER_ARGS = tuple(_arg(flag) for flag in TEST_SERVER_FLAGS)
_SERVER_FLAG = {_arg(flag).name: flag for flag in TEST_SERVER_FLAGS}


def _test_server(argv: Sequence[str]) -> Done | Native:
    parsed = _parse(argv, "nighthawk_test_server", _SERVER_ARGS, None,
                    "envoy (nhbench server with Envoy's command line)")
    if isinstance(parsed, Done):
        return parsed
    for name in parsed.values:
        flag = _SERVER_FLAG[name]
        if flag.refused:
            raise OptionsError(str(flag.refusal(parsed.given[name])))
    mode = parsed.text("mode")
    if mode not in (None, "serve"):
        raise OptionsError(f"--mode {mode}: nhbench server only serves (its --config is "
                           f"checked when it starts)")
    if "config-path" in parsed and "config-yaml" in parsed:
        # Envoy merges the YAML over the file; nhbench server reads one config.
        raise OptionsError("--config-yaml: merging it over --config-path has no counterpart "
                           "here; give one of them")
    concurrency = parsed.text("concurrency") or "auto"
    if concurrency != "auto" and not concurrency.isdigit():
        raise OptionsError(f"--concurrency: must be a whole number (got {concurrency!r})")
    native = ["server", "--workers", concurrency]
    temporary: tuple[str, ...] = ()
    if parsed.text("config-path") is not None:
        native += ["--config", str(parsed.text("config-path"))]
    elif parsed.text("config-yaml") is not None:
        descriptor, path = tempfile.mkstemp(prefix="nhbench-envoy-", suffix=".yaml")
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(str(parsed.text("config-yaml")))
        native += ["--config", path]
        temporary = (path,)
    else:
        raise OptionsError("nighthawk_test_server needs -c/--config-path FILE or "
                           "--config-yaml YAML (an Envoy bootstrap)")
    return Native(tuple(native), temporary)


# ---- all of them ------------------------------------------------------------------------------

_USAGE = """\
usage: nhbench nighthawk COMMAND [flags]

Nighthawk's binaries with their own command lines (TCLAP's grammar, Nighthawk's flags,
defaults and outputs), carried out by nhbench. See docs/compat.md, "Nighthawk".

commands:
  client       nighthawk_client: run a benchmark (--rps, --connections, ... URI)
  transform    nighthawk_output_transform: Nighthawk's JSON on stdin, --output-format
  service      nighthawk_service: the gRPC service (--listen, --listener-address-file)
  test-server  nighthawk_test_server: Envoy's command line (-c FILE) on nhbench server

nhbench nighthawk COMMAND --help lists a command's flags.
"""


def plan(argv: Sequence[str]) -> Done | ClientRun | Native:
    """What ``nhbench nighthawk ARGV...`` does. Raises OptionsError for invalid input."""
    if not argv:
        raise OptionsError("nighthawk: missing command: client, transform, service or "
                           "test-server")
    if argv[0] in ("-h", "--help", "help"):
        return Done(0, _USAGE)
    command, rest = argv[0], list(argv[1:])
    if command == "client":
        return _client(rest)
    if command == "transform":
        return _transform(rest)
    if command == "service":
        return _service(rest)
    if command == "test-server":
        return _test_server(rest)
    raise OptionsError(f"nighthawk {command}: not a Nighthawk command (client, transform, "
                       f"service or test-server)")
