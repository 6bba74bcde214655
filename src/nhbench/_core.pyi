"""Type stub of the compiled extension nhbench._core (see docs/architecture.md)."""

from typing import Any, TypedDict

__version__: str
HIST_LOWEST: int
HIST_HIGHEST: int
HIST_SIGFIG: int
# Length of the counts array of every histogram (the HdrHistogram layout above).
HIST_COUNTS_LEN: int
# The client's counter, histogram and stream names, in the core's enum order (nhb.h maps).
COUNTER_NAMES: tuple[str, ...]
HISTOGRAM_NAMES: tuple[str, ...]
STREAM_NAMES: tuple[str, ...]
# The test server's statistic names, in the order of Server.stats() (NHB_SERVER_STAT_MAP in nhb.h).
SERVER_STATS: tuple[str, ...]

class HistogramDict(TypedDict):
    count: int
    min: int
    max: int
    sum: float
    sumsq: float
    counts: list[tuple[int, int]]

class StreamDict(TypedDict):
    count: int
    min: int
    max: int
    sum: float
    sumsq: float

class WorkerResultDict(TypedDict):
    execution_start_ns: int
    execution_duration_ns: int
    counters: dict[str, int]
    histograms: dict[str, HistogramDict]
    streams: dict[str, StreamDict]

class EndpointDict(TypedDict):
    connections: int
    requests: int
    errors: int
    latency: HistogramDict

class ResultDict(TypedDict):
    execution_start_ns: int
    terminated_by: str
    failed_predicates: list[str]
    error: str | None
    insecure: bool
    workers: list[WorkerResultDict]
    # "global" is a keyword, so this entry is only reachable as result["global"]: a
    # WorkerResultDict, the merge of every worker's.
    warmup: WorkerResultDict | None
    # released, no_catchup_moves, no_catchup_shift (s), no_catchup_lost, warmup_released,
    # stages [(releases, responses)]
    schedule: dict[str, Any]
    # per endpoint (several targets, or the target's addresses); empty with one
    endpoints: list[EndpointDict]

class EndpointProgressDict(TypedDict):
    connections: int
    requests: int
    errors: int

class ProgressDict(TypedDict):
    elapsed: float
    counters: dict[str, int]
    # Per endpoint with several (the order of ResultDict's endpoints), else empty.
    endpoints: list[EndpointProgressDict]

class ClientRun:
    def __init__(self, config: dict[str, Any]) -> None: ...
    def start(self) -> None: ...
    # wake_fd >= 0: returns (False unless finished) as soon as it is readable too.
    def wait(self, timeout: float | None = None, wake_fd: int = -1) -> bool: ...
    def stop(self) -> None: ...
    def progress(self) -> ProgressDict: ...
    # Closed live-statistics intervals since the last call: index, start, duration (s),
    # counters (growth), latency (HistogramDict of scheduled_to_response).
    def take_intervals(self) -> list[dict[str, Any]]: ...
    def take_spans(self) -> list[tuple[int, int, int, int, int, int, str, int, int]]: ...
    def trace_counts(self) -> tuple[int, int]: ...
    def arrivals(self) -> list[list[int]]: ...
    # compact: every histogram but the load's hiccup has "buckets" (bytes of native uint64
    # (index, count) pairs, non-zero, by index) in place of HistogramDict's "counts".
    def result(self, compact: bool = False) -> dict[str, Any]: ...

class ServerStatsDict(TypedDict):
    requests: int
    connections_total: int
    connections_active: int
    rx_bytes: int
    tx_bytes: int
    bad_requests: int
    status: dict[str, int]  # "200" -> responses sent with that status
    stalls: int
    tcp_echo_bytes: int
    udp_echo_packets: int
    connections_http1: int
    connections_http2: int
    tls_handshakes: int
    tls_handshake_errors: int
    tls_session_reused: int
    tls_clients_verified: int
    tls_clients_refused: int
    h2_streams_reset: int
    h2_protocol_errors: int
    connections_refused: int
    grpc_calls: int
    grpc_errors: int
    error_bodies: int
    proxy_connections: int
    proxy_connections_active: int
    proxy_connect_errors: int
    proxy_bytes_up: int
    proxy_bytes_down: int
    redirects: int
    fanout_connections: int
    fanout_requests: int
    fanout_upstream_requests: int
    fanout_upstream_errors: int
    connections_http3: int
    h3_streams_reset: int
    h3_protocol_errors: int
    quic_packets_dropped: int
    quic_connections_beside: int
    stream_events: int
    event_streams_active: int

class ServerTlsDict(TypedDict, total=False):
    cert: str  # PEM certificate (chain) file, with key
    key: str  # PEM private key file
    self_signed: bool  # generate a key and a self-signed certificate instead
    san: list[str]  # extra names (DNS or IP) for the generated certificate

class Server:
    """The test server (docs/architecture.md, "The test server").

    config keys: listen [("tcp", host, port) | ("unix", path, 0)], workers, cpus, response
    (Nighthawk ResponseOptions dict), echo_default_params, max_echo_delay, max_payload_kb,
    stall_every, stall_for, tcp_echo [(host, port)], udp_echo [(host, port)],
    tcp_proxy [((host, port), (host, port))] (listen, destination), redirect [(host, port)],
    http_fanout [((host, port), [(ip, port, url, host header, path)])], http_fanout_serial,
    http_fanout_mirror,
    admin (host, port) | None, idle_timeout, header_timeout, max_header_bytes, max_body_bytes,
    tls (ServerTlsDict) | None, alpn [str] (h2, http/1.1; preference order),
    max_concurrent_streams, max_delay (s; cap for Nighthawk delays), max_connections (0 =
    from RLIMIT_NOFILE), http3 (bool; QUIC on the TCP listen ports, needs tls).
    """

    # bound addresses, valid after start(): ("tcp", host, port) or ("unix", path, 0)
    addresses: list[tuple[str, str, int]]
    admin_address: tuple[str, int] | None
    tcp_echo_addresses: list[tuple[str, int]]
    udp_echo_addresses: list[tuple[str, int]]
    # bound local addresses, in the order of the config's tcp_proxy
    tcp_proxy_addresses: list[tuple[str, int]]
    redirect_addresses: list[tuple[str, int]]
    # bound local addresses, in the order of the config's http_fanout
    http_fanout_addresses: list[tuple[str, int]]
    # HTTP/3 (UDP) sockets, one per TCP listen address, on the same ports
    quic_addresses: list[tuple[str, int]]
    # the certificate presented (PEM; the generated one with tls.self_signed), None without TLS
    tls_cert_pem: str | None
    def __init__(self, config: dict[str, Any]) -> None: ...
    def start(self) -> None: ...
    def stats(self) -> ServerStatsDict: ...
    def stop(self) -> None: ...

def histogram_counts(values: list[int]) -> HistogramDict: ...
# The index in the counts array a value (ns) is recorded at.
def histogram_index(value: int) -> int: ...
# The (index, count) pairs of several histograms added bucket by bucket, sorted, no zeros.
def histogram_merge(parts: list[Any] | tuple[Any, ...]) -> list[tuple[int, int]]: ...
# (value, cumulative count) at each point (fractions, ascending) of packed buckets (result's
# compact form), hdrh's percentile rule; [] when every count is zero.
def histogram_percentiles(buckets: bytes, points: list[float]) -> list[tuple[int, int]]: ...

# Host calibration (nhbench calibrate): `count` wake-ups `interval_ns` apart with the
# sequencer's idle strategy ("poll", "spin" or "sleep"); the histogram of their lateness (ns).
def calibrate_wakeups(strategy: str, count: int, interval_ns: int) -> HistogramDict: ...
# Mean ns of one CLOCK_MONOTONIC read / one trivial system call over `iterations`.
def calibrate_clock_read_ns(iterations: int) -> float: ...
def calibrate_syscall_ns(iterations: int) -> float: ...

# What this build is (nhbench version; nhbench._version.build_info): "version", "commit"
# ("" when the build knew none), "http3", "regex_checks", "sanitizers", "werror" and
# "libraries": name -> {"linked": the version loaded now (None: llhttp has no call for it),
# "built": the version of the headers at build time}.
def build_info() -> dict[str, Any]: ...
