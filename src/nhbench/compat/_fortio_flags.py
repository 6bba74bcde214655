"""Every flag of Fortio 1.66.5 (``fortio help``: 98 flags), one `ForeignFlag` each.

`FORTIO_FLAGS` is the single source for ``nhbench fortio``'s parser (`_goflag`), its usage
text, docs/options.md's migration table (`_migration`) and the tests (which run the real ``fortio help`` and fail when
a flag is in one and not the other). A mapped flag's ``apply`` stores its value, converted
as Go's flag type (`FORTIO_KINDS`), into `FortioArgs` (Fortio's defaults); `_fortio` turns
those into nhbench's options. A refused flag is refused by name with its reason, before
anything is sent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ._goflag import Kind
from ._table import ForeignFlag

__all__ = ["FORTIO_FLAGS", "FORTIO_KINDS", "SERVER_REFUSAL", "FortioArgs",
           "fortio_flag"]


@dataclass
class FortioArgs:
    """The values of Fortio's mapped flags, with Fortio's defaults."""

    headers: list[str] = field(default_factory=list)
    follow_redirects: bool = False
    method: str = ""
    auto_save: bool = False
    base_url: str = ""
    abort_on: int = 0
    allow_initial_errors: bool = False
    connections: int = 4
    cacert: str = ""
    calc_qps: bool = False
    compression: bool = False
    connection_reuse: str = ""
    content_type: str = ""
    curl: bool = False
    curl_stdout_headers: bool = False
    data_dir: str = "."
    dns_method: str = "cached-rr"
    gomaxprocs: int = 0
    grpc: bool = False
    grpc_ping_delay: float = 0.0
    h2: bool = False
    health: bool = False
    healthservice: str = ""
    http_port: str = "8080"
    http1_0: bool = False
    insecure: bool = False
    jitter: bool = False
    json: str = ""
    keepalive: bool = True
    labels: str = ""
    log_errors: bool = True
    loglevel: str = "Info"
    nc_dont_stop_on_eof: bool = False
    exactly: int = 0
    no_reresolve: bool = False
    nocatchup: bool = False
    offset: float = 0.0
    percentiles: str = "50,75,90,99,99.9"
    payload: str = ""
    payload_file: str = ""
    payload_size: int = 0
    ping: bool = False
    qps: float = 8.0
    quiet: bool = False
    resolution: float = 0.001
    resolve: str = ""
    resolve_ip_type: str = "ip4"
    run_id: int = 0
    streams: int = 1
    sync: str = ""
    sync_interval: float = 0.0
    sequential_warmup: bool = False
    stdclient: bool = False
    duration: float = 5.0
    timeout: float = 3.0
    udp_timeout: float = 0.75
    uniform: bool = False
    unix_socket: str = ""
    user: str = ""
    # The server commands' (server, tcp-echo, udp-echo).
    grpc_port: str = "8079"
    tcp_port: str = "8078"
    udp_port: str = "8078"
    redirect_port: str = "8081"
    proxies: list[str] = field(default_factory=list)
    multis: list[str] = field(default_factory=list)
    multi_mirror_origin: bool = True
    multi_serial_mode: bool = False
    echo_server_default_params: str = ""
    max_echo_delay: float = 1.5
    maxpayloadsizekb: int = 256
    server_idle_timeout: float = 30.0
    cert: str = ""
    key: str = ""
    mtls: bool = False
    echo_debug_path: str = "/debug"
    ui_path: str = "/fortio/"
    grpc_max_streams: int = 0
    udp_async: bool = False
    #: The flags given, by their first name (what was explicit, as Fortio's "was it set").
    given: set[str] = field(default_factory=set)


def _store(attr: str) -> Callable[[FortioArgs, Any], None]:
    def apply(args: FortioArgs, value: Any) -> None:
        setattr(args, attr, value)
    apply.__name__ = f"store_{attr}"
    return apply


#: Go's flag type of each non-bool flag, by its first name (the parser converts with it).
FORTIO_KINDS: dict[str, Kind] = {}

#: Why a Fortio server flag is refused by ``nhbench fortio load`` (and ``curl``).
SERVER_REFUSAL = ("a Fortio server flag: nhbench fortio load does not start servers; "
                  "`nhbench server` serves the echo side")


def fortio_flag(name: str, value: str | None, meaning: str, *, nhbench: str = "",
                refused: str = "", kind: Kind | None = None, attr: str = "",
                default: str = "", repeatable: bool = False,
                commands: tuple[str, ...] = ()) -> ForeignFlag:
    """One record of the table; a mapped flag stores into ``FortioArgs.<attr>``."""
    if kind is not None and value is not None:
        FORTIO_KINDS[name] = kind
    apply = _store(attr or name.lstrip("-").replace("-", "_").replace(".", "_")) \
        if nhbench else None
    return ForeignFlag(names=(name,), value=value, meaning=meaning, nhbench=nhbench,
                       refused=refused, default=default, repeatable=repeatable,
                       commands=commands, apply=apply)


_LOAD = ("load",)
_CLIENT = ("load", "curl")
# The flags grpcping reads besides its own (Fortio's cli: the gRPC client's and -n).
_PING = ("grpcping",)
# The server commands: `server` starts every listener, tcp-echo and udp-echo one each.
_SERVER = ("server",)
_SERVERS = ("server", "tcp-echo", "udp-echo")
_UI = ("server", "report")
_NO_LOG = "nhbench prints plain text lines on stderr, not Fortio's JSON log: no effect"

FORTIO_FLAGS: tuple[ForeignFlag, ...] = (
    fortio_flag("-H", "key:value", "Additional HTTP header(s) or gRPC metadata",
                nhbench="--request-header (gRPC: sent as metadata)", attr="headers",
                repeatable=True, commands=_CLIENT + _PING),
    fortio_flag("-L", None, "Follow redirects (implies -std-client)",
                refused="nhbench does not follow redirects (each response is measured as "
                "it comes)"),
    fortio_flag("-M", "value", "HTTP multi proxy to run", attr="multis", repeatable=True,
                commands=("server", "proxies"),
                nhbench="`server`, `proxies`: nhbench server --http-fanout LOCAL=URL[,URL...]"),
    fortio_flag("-P", "value", "TCP proxies to run", attr="proxies", repeatable=True,
                commands=("server", "proxies"),
                nhbench="`server`, `proxies`: nhbench server --tcp-proxy LOCAL=DEST"),
    fortio_flag("-X", "string", "HTTP method to use instead of GET/POST",
                nhbench="--request-method", attr="method", commands=_CLIENT),
    fortio_flag("-a", None, "Automatically save JSON result with filename based on labels "
                "& timestamp", nhbench="writes Fortio's JSON as DATA-DIR/ID.json",
                attr="auto_save", commands=_LOAD),
    fortio_flag("-abort-on", "int", "HTTP status code that aborts the run, -1 for socket "
                "errors", kind="int", attr="abort_on", commands=_LOAD,
                nhbench="--abort-on CODE (-1: a failure predicate on connection failures "
                "and resets); the run stops and exits 0, as Fortio's"),
    fortio_flag("-access-log-file", "path", "file path to log all requests to",
                refused="a Fortio per-request log with no counterpart here (nhbench "
                "--hdr-log keeps every latency)"),
    fortio_flag("-access-log-format", "format", "format for access log (json, influx)",
                default="json", refused="a Fortio per-request log with no counterpart "
                "here (nhbench --hdr-log keeps every latency)"),
    fortio_flag("-allow-initial-errors", None, "Allow and don't abort on initial warmup "
                "errors", nhbench="--allow-initial-errors", commands=_LOAD),
    fortio_flag("-base-url", "URL", "base URL used as prefix for data/index.tsv generation",
                nhbench="`report`: nhbench browse --base-url (not `server`: its UI has no "
                "base URL)", attr="base_url", commands=("report",)),
    fortio_flag("-c", "int", "Number of connections/goroutine/threads", default="4",
                kind="int", attr="connections", commands=_LOAD,
                nhbench="--connections N, every one opened and used (one worker; Fortio "
                "lowers it to n/2 when fewer than 2 calls each, and so does this)"),
    fortio_flag("-cacert", "Path", "Custom CA certificate file for TLS client connections",
                nhbench="--cacert (https:// and gRPC, where it turns TLS on as Fortio's; "
                "ignored on http:// as Fortio does); `server` with -mtls: --tls-client-ca",
                commands=_CLIENT + _PING + _SERVER),
    fortio_flag("-calc-qps", None, "Calculate the qps based on number of requests (-n) and "
                "duration (-t)", nhbench="--rps n/t", attr="calc_qps", commands=_LOAD),
    fortio_flag("-cert", "Path", "Certificate file for client or server TLS",
                nhbench="--cert with -key (the client certificate, on https:// and gRPC over "
                "TLS); `server`: --tls-cert (HTTPS and gRPC over TLS on the HTTP and gRPC "
                "ports)", commands=_CLIENT + _PING + _SERVER),
    fortio_flag("-compression", None, "Enable HTTP compression",
                nhbench="Accept-Encoding: gzip with Fortio's standard client (-h2, "
                "-stdclient), no effect otherwise as Fortio's fast client",
                commands=_CLIENT),
    fortio_flag("-config-dir", "directory", "Config directory to watch for dynamic flag "
                "changes", refused="Fortio's dynamic flags with no counterpart here: "
                "nhbench reads its flags once"),
    fortio_flag("-config-port", "port", "Config port to open for dynamic flag UI/api",
                refused="Fortio's dynamic flags with no counterpart here: nhbench reads its "
                "flags once"),
    fortio_flag("-connection-reuse", "min:max", "Range for the max number of connection "
                "reuses per thread", commands=_LOAD,
                nhbench="--max-requests-per-connection N for N or N:N; a random range is "
                "refused (nhbench's limit is fixed)"),
    fortio_flag("-content-type", "string", "Sets HTTP content type (switches to POST)",
                nhbench="--content-type", commands=_CLIENT),
    fortio_flag("-curl", None, "Just fetch the content once", nhbench="nhbench fortio curl",
                commands=_LOAD),
    fortio_flag("-curl-stdout-headers", None, "curl mode: HTTP headers on stdout (pre 1.22)",
                nhbench="curl mode: the headers on stdout instead of stderr",
                commands=_CLIENT),
    fortio_flag("-data-dir", "Directory", "Directory where JSON results are stored/read",
                default=".", attr="data_dir", commands=("load",) + _UI,
                nhbench="-a's directory; `report` and `server`'s UI browse it"),
    fortio_flag("-dns-method", "method", "Which of several resolved IPs to pick",
                default="cached-rr", commands=_CLIENT,
                nhbench="--dns-method: cached-rr and rr are rr (each new connection the "
                "next address), rnd is random, first first; rr, rnd and first also look "
                "the name up again per new connection as Fortio's fast client does "
                "(--dns-refresh connection); other names are refused"),
    fortio_flag("-echo-debug-path", "URI", "http echo server URI for debug",
                default="/debug", commands=_SERVER,
                nhbench="`server`: --debug-path (\"\" disables the debug echo), with "
                "--debug-env-dump as Fortio answers ?env=dump; a path Go's mux reads as a "
                "host or a wildcard pattern is refused"),
    fortio_flag("-echo-server-default-params", "value", "Default echo server parameters",
                nhbench="`server`: --echo-default-params with --echo-default-params-when "
                "no-query (only for a URI without '?', as Fortio)", commands=_SERVER),
    fortio_flag("-gomaxprocs", "int", "Setting for runtime.GOMAXPROCS", kind="int",
                nhbench="accepted, no effect: one nhbench event-loop worker carries every "
                "connection (a note on stderr)"),
    fortio_flag("-grpc", None, "Use gRPC (health check by default, add -ping for ping)",
                nhbench="--grpc (health check, grpc:// or grpcs:// with -cacert)",
                commands=_LOAD),
    fortio_flag("-grpc-compression", None, "Enable gRPC compression",
                refused="nhbench sends gRPC messages uncompressed"),
    fortio_flag("-grpc-max-streams", "uint", "MaxConcurrentStreams for the gRPC server",
                kind="uint", commands=_SERVER,
                nhbench="`server`: --max-concurrent-streams (0: nhbench's default, 100)"),
    fortio_flag("-grpc-ping-delay", "duration", "gRPC ping delay in response",
                kind="duration", nhbench="--grpc-ping-delay", commands=_LOAD + _PING),
    fortio_flag("-grpc-port", "port", "grpc server port", default="8079",
                commands=_SERVER,
                nhbench="`server`: another --listen of the same server (gRPC is answered on "
                "every HTTP/2 listener, the HTTP echo too)"),
    fortio_flag("-h2", None, "Attempt to use HTTP/2.0 / h2 (TLS and h2c)",
                nhbench="--protocol h2 (h2c on http://); `curl` refuses it (its one request "
                "is HTTP/1.1: `load -h2 -n 1` makes one h2 call)", commands=_CLIENT),
    fortio_flag("-halfclose", None, "When not keepalive, half close the connection",
                refused="nhbench closes both directions of a connection"),
    fortio_flag("-health", None, "gRPC ping client mode: use health instead of ping",
                nhbench="`grpcping`: the health check (exit 1 unless SERVING)",
                commands=_PING),
    fortio_flag("-healthservice", "string", "which service string to pass to health check",
                nhbench="--grpc-service; `server`: \"\" or ping (the names nhbench's "
                "health service answers SERVING), another is refused",
                commands=_LOAD + _PING + _SERVER),
    fortio_flag("-http-port", "port", "http-echo server port (report: the UI's port)",
                default="8080", commands=_UI,
                nhbench="`server`: --listen (port: every interface, host:port, a Unix path, "
                "disabled); `report`: nhbench browse --listen on that port"),
    fortio_flag("-http1.0", None, "Use HTTP/1.0 (instead of HTTP/1.1)",
                nhbench="--http1.0", attr="http1_0", commands=_CLIENT),
    fortio_flag("-httpbufferkb", "kbytes", "Buffer size of the optimized HTTP client",
                default="128", refused="a Fortio buffer size with no counterpart here"),
    fortio_flag("-httpccch", None, "Check for Connection: Close Header",
                refused="a switch of Fortio's fast client with no counterpart here"),
    fortio_flag("-https-insecure", None, "Long form of the -k flag", attr="insecure",
                nhbench="--insecure (https:// and gRPC; ignored on http:// as Fortio does)",
                commands=_CLIENT + _PING),
    fortio_flag("-jitter", None, "de-synchronize parallel clients by 10%",
                nhbench="--jitter", commands=_LOAD),
    fortio_flag("-json", "path", "JSON output to the file or '-' for stdout",
                nhbench="Fortio's JSON result (stdout with '-')", commands=_LOAD),
    fortio_flag("-k", None, "Do not verify certs in HTTPS/TLS/gRPC connections",
                attr="insecure",
                nhbench="--insecure (https:// and gRPC; ignored on http:// as Fortio does)",
                commands=_CLIENT + _PING),
    fortio_flag("-keepalive", None, "Keep connection alive (only for fast HTTP/1.1)",
                default="true", commands=_CLIENT,
                nhbench="-keepalive=false: --max-requests-per-connection 1 (a new "
                "connection for every request)"),
    fortio_flag("-key", "Path", "Key file matching -cert",
                nhbench="--key (an encrypted key's passphrase: on a terminal, asked for); "
                "`server`: --tls-key", commands=_CLIENT + _PING + _SERVER),
    fortio_flag("-labels", "string", "Labels added to the JSON result (default: URL and "
                "hostname)", nhbench="Fortio's Labels (and nhbench's label)",
                commands=_LOAD),
    fortio_flag("-log-errors", None, "Log HTTP non-2xx status codes as they occur",
                default="true", commands=_LOAD,
                nhbench="accepted: nhbench counts the codes in the report's Code lines and "
                "prints no line per error"),
    fortio_flag("-logger-file-line", None, "file and line in JSON logs", default="true",
                nhbench=_NO_LOG, attr="ignored"),
    fortio_flag("-logger-force-color", None, "Force color log output", nhbench=_NO_LOG,
                attr="ignored"),
    fortio_flag("-logger-goroutine", None, "GoroutineID in JSON/color logs", default="true",
                nhbench=_NO_LOG, attr="ignored"),
    fortio_flag("-logger-json", None, "Log in JSON format", default="true", nhbench=_NO_LOG,
                attr="ignored"),
    fortio_flag("-logger-no-color", None, "Prevent colorized log output", nhbench=_NO_LOG,
                attr="ignored"),
    fortio_flag("-logger-timestamp", None, "Timestamps in JSON logs", default="true",
                nhbench=_NO_LOG, attr="ignored"),
    fortio_flag("-loglevel", "level", "log level, one of [Debug Verbose Info Warning Error "
                "Critical Fatal]", default="Info",
                nhbench="--verbosity (Debug/Verbose: debug, Info: info, Warning: warning, "
                "Error and above: error)"),
    fortio_flag("-max-echo-delay", "value", "Maximum sleep time for delay= echo parameter",
                default="1.5s", kind="duration", commands=_SERVER,
                nhbench="`server`: --max-echo-delay"),
    fortio_flag("-maxpayloadsizekb", "Kbytes", "MaxPayloadSize of the EchoHandler size= "
                "argument", default="256", kind="int", commands=_SERVER,
                nhbench="`server`: --max-payload-kb"),
    fortio_flag("-mtls", None, "Require client certificate signed by -cacert",
                nhbench="`server`: --tls-client-ca with -cacert's file (needs -cacert, "
                "-cert and -key)", commands=_SERVER),
    fortio_flag("-multi-mirror-origin", None, "Mirror the request URL for multi proxies",
                default="true", commands=("server", "proxies"),
                nhbench="`server`, `proxies`: =false is --http-fanout-no-mirror"),
    fortio_flag("-multi-serial-mode", None, "Multi server (-M) requests one at a time",
                commands=("server", "proxies"), nhbench="`server`, `proxies`: "
                "--http-fanout-serial"),
    fortio_flag("-n", "int", "Run for exactly this number of calls instead of duration",
                kind="int", attr="exactly", commands=_LOAD + _PING,
                nhbench="--requests N with no time limit (and no warm-up, as Fortio's)"),
    fortio_flag("-nc-dont-stop-on-eof", None, "nc mode: don't stop when the remote closes",
                nhbench="`nc`: wait for stdin's end too", commands=("nc",)),
    fortio_flag("-no-reresolve", None, "Keep the initial DNS resolution for new connections",
                nhbench="no --dns-refresh connection for -dns-method rr, rnd or first: "
                "the name is looked up once per run",
                commands=_CLIENT),
    fortio_flag("-nocatchup", None, "exact fixed qps, no catch up when the target is slow",
                nhbench="--no-catchup", commands=_LOAD),
    fortio_flag("-offset", "duration", "Offset of the histogram data", kind="duration",
                nhbench="Fortio's histogram offset in the report and JSON", commands=_LOAD),
    fortio_flag("-p", "string", "List of pXX to calculate", default="50,75,90,99,99.9",
                attr="percentiles", nhbench="--percentiles", commands=_LOAD),
    fortio_flag("-payload", "string", "Payload string to send along",
                nhbench="--payload (POST for HTTP)", commands=_CLIENT + _PING),
    fortio_flag("-payload-file", "path", "File to be used as payload ('-': stdin here too)",
                nhbench="--payload-file (read once before the run)",
                commands=_CLIENT + _PING),
    fortio_flag("-payload-size", "int", "Additional random payload size (switches to POST)",
                kind="int", nhbench="--payload-size", commands=_CLIENT + _PING),
    fortio_flag("-ping", None, "gRPC load test: use ping instead of health",
                nhbench="--ping", commands=_LOAD),
    fortio_flag("-pprof", None, "Enable pprof HTTP endpoint in the Web UI handler server",
                refused="Go profiles of Fortio's server with no counterpart here"),
    fortio_flag("-profile", "file", "write .cpu and .mem profiles to file",
                refused="Go profiles of Fortio itself with no counterpart here"),
    fortio_flag("-proxy-all-headers", None, "Headers copied by the fetch2 ui/server endpoint",
                default="true", refused="the UI's fetch2 proxy endpoint is not served "
                "here"),
    fortio_flag("-qps", "float", "Queries Per Seconds or 0 for no wait/max qps", default="8",
                kind="float", commands=_LOAD,
                nhbench="--rps (the total: one worker over -c connections); 0 or less: "
                "--rps 0 (closed loop)"),
    fortio_flag("-quiet", None, "Quiet mode, sets loglevel to Error",
                nhbench="--verbosity error and Fortio's shorter report"),
    fortio_flag("-r", "float", "Resolution of the histogram lowest buckets in seconds",
                default="0.001", kind="float", attr="resolution", commands=_LOAD,
                nhbench="Fortio's buckets in the report and JSON; nhbench's percentiles are "
                "exact (said once on stderr)"),
    fortio_flag("-redirect-port", "port", "Redirect all incoming traffic to https:// URL",
                default="8081", commands=("server", "redirect"),
                nhbench="`server`, `redirect`: nhbench server --redirect-listen (303 to "
                "https://, as Fortio's)"),
    fortio_flag("-resolve", "IP", "Resolve host name to this IP", commands=_CLIENT,
                nhbench="--resolve: connects to IP (or a name's addresses, by "
                "-dns-method), keeps the URL's Host header and TLS name"),
    fortio_flag("-resolve-ip-type", "type", "ip4, ip6 or ip", default="ip4",
                commands=_CLIENT + ("nc",), nhbench="--address-family v4|v6|auto"),
    fortio_flag("-runid", "int", "RunID added to the JSON result and auto save filename",
                kind="int", attr="run_id", nhbench="Fortio's RunID", commands=_LOAD),
    fortio_flag("-s", "int", "Number of streams per gRPC connection", default="1",
                kind="int", attr="streams", commands=_LOAD,
                nhbench="--max-concurrent-streams (gRPC: -c x -s calls in flight)"),
    fortio_flag("-sequential-warmup", None, "http(s) warmup done sequentially",
                nhbench="always so: nhbench warms the connections up one after another",
                commands=_LOAD),
    fortio_flag("-server-idle-timeout", "value", "Default IdleTimeout for servers",
                default="30s", kind="duration", commands=_SERVER,
                nhbench="`server`: --idle-timeout"),
    fortio_flag("-static-dir", "path", "Deprecated/unused path.",
                refused="deprecated and unused by Fortio itself"),
    fortio_flag("-stdclient", None, "Use the slower net/http standard client",
                nhbench="nhbench has one client; only -compression's header follows it",
                commands=_CLIENT),
    fortio_flag("-stream", None, "Stream payload from stdin (only for fortio curl mode)",
                refused="nhbench fortio curl sends its payload whole (-payload-file -)"),
    fortio_flag("-sync", "URL", "index.tsv or bucket URL to fetch for server modes",
                nhbench="`report`, `server`: nhbench browse --sync (the listing's own host "
                "only)", commands=_UI),
    fortio_flag("-sync-interval", "duration", "Refresh the -sync URL every interval",
                kind="duration", nhbench="`report`, `server`: nhbench browse --sync-interval",
                attr="sync_interval", commands=_UI),
    fortio_flag("-t", "duration", "How long to run the test or 0 to run until ^C",
                default="5s", kind="duration", attr="duration", commands=_LOAD,
                nhbench="--duration (Go syntax: 1m30s); 0: --no-duration"),
    fortio_flag("-tcp-port", "port", "tcp-echo server port", default="8078",
                commands=("server", "tcp-echo"),
                nhbench="--tcp-echo (port: every IPv4 interface; host:port; disabled)"),
    fortio_flag("-timeout", "duration", "Connection and read timeout value (for HTTP)",
                default="3s", kind="duration", commands=_CLIENT,
                nhbench="--timeout and --request-timeout"),
    fortio_flag("-udp-async", None, "udp echo server replies from a separate goroutine",
                commands=("server", "udp-echo"),
                nhbench="accepted, no effect: the event loop answers each datagram as it "
                "reads it (a note on stderr)"),
    fortio_flag("-udp-port", "port", "udp-echo server port", default="8078",
                commands=("server", "udp-echo"),
                nhbench="--udp-echo (port: every IPv4 interface; host:port; disabled)"),
    fortio_flag("-udp-timeout", "duration", "Udp timeout", default="750ms", kind="duration",
                commands=_LOAD, nhbench="--request-timeout of a udp:// run"),
    fortio_flag("-ui-path", "URI", "HTTP server URI for UI", default="/fortio/",
                commands=_SERVER,
                nhbench="`server`: the UI's prefix, served on the HTTP port (\"\": no UI)"),
    fortio_flag("-uniform", None, "de-synchronize parallel clients' requests uniformly",
                nhbench="calls evenly spaced at 1/qps, where Fortio's default (and this "
                "front-end's) sends a burst of one a connection every c/qps",
                commands=_LOAD),
    fortio_flag("-unix-socket", "path", "Unix domain socket path for the connection",
                nhbench="--unix-socket", commands=_CLIENT + _PING),
    fortio_flag("-user", "user:password", "User credentials for basic authentication",
                nhbench="an Authorization: Basic header", commands=_CLIENT),
)
