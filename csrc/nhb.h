/* nhb.h: the public C API of the nhbench core.
 *
 * Everything here is plain C11 and knows nothing about Python; the binding in
 * csrc/binding/ is the only code that includes Python or pybind11 headers.
 * Functions return 0 (or a non-negative value) on success and a negative error
 * code on failure; nhb_err_name() and nhb_strerror() turn a code into text.
 * Codes in the libuv range (negated errno) are passed through from libuv.
 */
#ifndef NHB_H
#define NHB_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Our own error codes sit below -4096 so that they never collide with the
 * negated errno values libuv returns. */
#define NHB_ERRNO_MAP(X)                                                        \
  X(EINVAL, -5001, "invalid argument")                                        \
  X(ENOMEM, -5002, "out of memory")                                           \
  X(ESTATE, -5003, "operation not valid in the current state")                \
  X(ECPU, -5004, "cannot pin a worker thread to the requested CPU")           \
  X(EADDR, -5005, "invalid or unsupported address")                           \
  X(ETIMERFD, -5006, "cannot create the high-resolution release timer")       \
  X(EPROTO, -5007, "protocol error")                                          \
  X(ETHREAD, -5008, "cannot start a worker thread")                           \
  X(ETLS, -5009, "TLS error")                                                 \
  X(EPROXY, -5010, "proxy error")

typedef enum {
#define NHB__ERR_ENUM(name, code, msg) NHB_##name = (code),
  NHB_ERRNO_MAP(NHB__ERR_ENUM)
#undef NHB__ERR_ENUM
} nhb_errno_t;

/* Returns the symbolic name ("EINVAL", "ECONNREFUSED") of an error code. */
const char* nhb_err_name(int err);
/* Returns a human-readable message for an error code. */
const char* nhb_strerror(int err);

/* ------------------------------------------------------------------------ */
/* The build (version.c): the package version ("0.2.0", "0.2.1.dev3+g1a2b3c4d"),
 * the commit the sources were at ("" when the build had no git and the version
 * names none), and whether the core was built with ASan+UBSan and with -Werror. */
const char* nhb_version(void);
const char* nhb_build_commit(void);
int nhb_build_sanitized(void);
int nhb_build_werror(void);

/* ------------------------------------------------------------------------ */
/* Histograms: the HdrHistogram bucket layout for 1 ns .. 60 s, 3 significant
 * digits. The layout constants are fixed so that the Python side can hand the
 * counts to the `hdrh` package index for index. */
#define NHB_HIST_LOWEST 1ULL
#define NHB_HIST_HIGHEST 60000000000ULL
#define NHB_HIST_SIGFIG 3
#define NHB_HIST_SUB_BUCKET_HALF_COUNT_MAGNITUDE 10
#define NHB_HIST_SUB_BUCKET_COUNT 2048
#define NHB_HIST_BUCKET_COUNT 26
#define NHB_HIST_COUNTS_LEN ((NHB_HIST_BUCKET_COUNT + 1) * (NHB_HIST_SUB_BUCKET_COUNT / 2))

typedef struct nhb_hist {
  uint64_t total;
  uint64_t min;
  uint64_t max;
  double sum;
  double sumsq;
  uint64_t counts[NHB_HIST_COUNTS_LEN];
} nhb_hist;

/* A streaming statistic: count, extremes and moments, no percentiles. */
typedef struct nhb_stream {
  uint64_t total;
  uint64_t min;
  uint64_t max;
  double sum;
  double sumsq;
} nhb_stream;

void nhb_hist_init(nhb_hist* h);
void nhb_hist_record(nhb_hist* h, uint64_t value);
void nhb_hist_add(nhb_hist* dst, const nhb_hist* src);
size_t nhb_hist_index(uint64_t value);
/* The value of bucket `index` as HdrHistogram reports it at a percentile: the
 * highest value the bucket holds (`highest` non-zero), or its lowest. */
uint64_t nhb_hist_bucket_value(size_t index, int highest);
/* HdrHistogram's percentile walk over sparse (index, count) pairs (2 * npairs
 * words, index non-decreasing, zero counts skipped): for each of the npoints
 * fractions (ascending) the bucket value and the cumulative count where the
 * count reaches the fraction's target, exactly as the hdrh package computes
 * them. Returns -1 (nothing written) for unsorted pairs or an index outside the
 * layout, 1 when the counts sum beyond 64 bits, 2 (nothing written) when
 * every count is zero, 0 otherwise. */
int nhb_hist_percentiles(const uint64_t* pairs, size_t npairs, const double* points,
                         size_t npoints, uint64_t* values, uint64_t* cumulative);
void nhb_stream_init(nhb_stream* s);
void nhb_stream_record(nhb_stream* s, uint64_t value);
void nhb_stream_add(nhb_stream* dst, const nhb_stream* src);

/* ------------------------------------------------------------------------ */
/* Statistics of a client run. The names follow Nighthawk's where Nighthawk has
 * one, so that users find what they look for. */
#define NHB_COUNTER_MAP(X)                                                 \
  X(HTTP_1XX, "benchmark.http_1xx")                                      \
  X(HTTP_2XX, "benchmark.http_2xx")                                      \
  X(HTTP_3XX, "benchmark.http_3xx")                                      \
  X(HTTP_4XX, "benchmark.http_4xx")                                      \
  X(HTTP_5XX, "benchmark.http_5xx")                                      \
  X(HTTP_XXX, "benchmark.http_xxx")                                      \
  X(POOL_OVERFLOW, "benchmark.pool_overflow")                            \
  X(POOL_CONNECTION_FAILURE, "benchmark.pool_connection_failure")        \
  X(STREAM_RESETS, "benchmark.stream_resets")                            \
  X(REQUEST_TIMEOUT, "benchmark.request_timeout")                        \
  X(SEQUENCER_RELEASED, "sequencer.released")                            \
  X(SEQUENCER_BLOCKED, "sequencer.blocked")                              \
  X(GRACEFUL_STOP_REQUESTED, "graceful_stop_requested")                  \
  X(UPSTREAM_RQ_TOTAL, "upstream_rq_total")                              \
  X(UPSTREAM_RQ_PENDING_TOTAL, "upstream_rq_pending_total")              \
  X(UPSTREAM_RQ_PENDING_OVERFLOW, "upstream_rq_pending_overflow")        \
  X(UPSTREAM_RQ_CANCELLED, "upstream_rq_cancelled")                      \
  X(UPSTREAM_CX_TOTAL, "upstream_cx_total")                              \
  X(UPSTREAM_CX_HTTP1_TOTAL, "upstream_cx_http1_total")                  \
  X(UPSTREAM_CX_HTTP2_TOTAL, "upstream_cx_http2_total")                  \
  X(UPSTREAM_CX_CONNECT_FAIL, "upstream_cx_connect_fail")                \
  X(UPSTREAM_CX_CONNECT_TIMEOUT, "upstream_cx_connect_timeout")          \
  X(UPSTREAM_CX_DESTROY_REMOTE, "upstream_cx_destroy_remote")            \
  X(UPSTREAM_CX_PROTOCOL_ERROR, "upstream_cx_protocol_error")            \
  X(UPSTREAM_CX_RX_BYTES_TOTAL, "upstream_cx_rx_bytes_total")            \
  X(UPSTREAM_CX_TX_BYTES_TOTAL, "upstream_cx_tx_bytes_total")            \
  X(UPSTREAM_CX_CLOSE_NOTIFY, "upstream_cx_close_notify")                \
  X(UPSTREAM_RQ_RETRY, "upstream_rq_retry")                              \
  X(UPSTREAM_RQ_RETRY_LIMIT_EXCEEDED, "upstream_rq_retry_limit_exceeded") \
  X(SSL_HANDSHAKE, "ssl.handshake")                                      \
  X(SSL_CONNECTION_ERROR, "ssl.connection_error")                        \
  X(SSL_SESSION_REUSED, "ssl.session_reused")                            \
  X(ORIGIN_LATENCY_HEADER_ERRORS, "benchmark.origin_latency_header_errors") \
  /* ---- gRPC (session_h2.c with config.grpc) ---- */          \
  X(GRPC_ERROR, "benchmark.grpc_error")                                  \
  X(GRPC_PROTOCOL_ERROR, "benchmark.grpc_protocol_error")                \
  /* ---- response checks (check.c): a 2xx response that failed one ---- */ \
  X(CHECK_FAILED, "benchmark.check_failed")                              \
  /* ---- echo (tcp:// udp://) ---- */                          \
  X(ECHO_MISMATCH, "benchmark.echo_mismatch")                            \
  X(UDP_LOST, "benchmark.udp_lost")                                      \
  X(UDP_LATE, "benchmark.udp_late")                                      \
  X(UDP_UNEXPECTED, "benchmark.udp_unexpected")                          \
  /* ---- HTTP/3 ---- */                                        \
  X(UPSTREAM_CX_HTTP3_TOTAL, "upstream_cx_http3_total")                \
  /* ---- proxies and tunnels (tunnel.c): tunnels up, and failed by cause ---- */ \
  X(TUNNEL_ESTABLISHED, "tunnel.established")                            \
  X(TUNNEL_CONNECT_FAIL, "tunnel.connect_fail")                          \
  X(TUNNEL_NON_2XX, "tunnel.non_2xx")                                    \
  X(TUNNEL_CLOSED, "tunnel.proxy_closed")                                \
  X(TUNNEL_PROTOCOL_ERROR, "tunnel.protocol_error")                      \
  X(TUNNEL_TIMEOUT, "tunnel.timeout")                                    \
  X(TUNNEL_DATAGRAM_DROPPED, "tunnel.datagrams_dropped")                \
  X(TUNNEL_TLS_FAIL, "tunnel.tls_fail")                                  \
  X(TUNNEL_RESET, "tunnel.reset")                                        \
  /* ---- DNS per connection (dns.c): resolutions, and failures by cause ---- */ \
  X(DNS_RESOLVED, "dns.resolved")                                        \
  X(DNS_NOT_FOUND, "dns.not_found")                                      \
  X(DNS_TRY_AGAIN, "dns.try_again")                                      \
  X(DNS_FAIL, "dns.fail")                                                \
  X(DNS_TIMEOUT, "dns.timeout")

typedef enum {
#define NHB__CTR_ENUM(name, str) NHB_CTR_##name,
  NHB_COUNTER_MAP(NHB__CTR_ENUM)
#undef NHB__CTR_ENUM
  NHB_CTR_COUNT
} nhb_counter_t;

#define NHB_HISTOGRAM_MAP(X)                                                        \
  X(QUEUE_TO_CONNECT, "benchmark_http_client.queue_to_connect")                   \
  X(REQUEST_TO_RESPONSE, "benchmark_http_client.request_to_response")             \
  X(LATENCY_1XX, "benchmark_http_client.latency_1xx")                             \
  X(LATENCY_2XX, "benchmark_http_client.latency_2xx")                             \
  X(LATENCY_3XX, "benchmark_http_client.latency_3xx")                             \
  X(LATENCY_4XX, "benchmark_http_client.latency_4xx")                             \
  X(LATENCY_5XX, "benchmark_http_client.latency_5xx")                             \
  X(LATENCY_XXX, "benchmark_http_client.latency_xxx")                             \
  X(SCHEDULED_TO_RESPONSE, "benchmark_http_client.scheduled_to_response")         \
  X(SEQUENCER_CALLBACK, "sequencer.callback")                                     \
  X(SEQUENCER_BLOCKING, "sequencer.blocking")                                     \
  X(RELEASE_LATENESS, "sequencer.release_lateness")                               \
  X(TLS_HANDSHAKE, "benchmark_http_client.tls_handshake")                         \
  /* ---- latency phases (docs/engine.md "Latency phases") ---- */              \
  X(CONNECT, "benchmark_http_client.connect")                                     \
  X(REQUEST_WRITE, "benchmark_http_client.request_write")                         \
  X(TIME_TO_FIRST_BYTE, "benchmark_http_client.time_to_first_byte")               \
  X(TRANSFER, "benchmark_http_client.transfer")                                   \
  X(ORIGIN_LATENCY, "benchmark_http_client.origin_latency_statistic")             \
  X(TUNNEL_SETUP, "benchmark_http_client.tunnel_setup")                         \
  X(LATENCY_CHECK_FAILED, "benchmark_http_client.latency_check_failed")       \
  /* ---- streaming responses (stream.c; only with stream_stats) ---- */         \
  X(TIME_TO_FIRST_EVENT, "benchmark_http_client.time_to_first_event")             \
  X(INTER_EVENT_GAP, "benchmark_http_client.inter_event_gap")                     \
  X(STREAM_DURATION, "benchmark_http_client.stream_duration")                     \
  /* ---- DNS per connection (dns.c; only with dns_host) ---- */                  \
  X(DNS, "benchmark_http_client.dns")

typedef enum {
#define NHB__HIST_ENUM(name, str) NHB_HIST_##name,
  NHB_HISTOGRAM_MAP(NHB__HIST_ENUM)
#undef NHB__HIST_ENUM
  NHB_HIST_COUNT
} nhb_histogram_t;

#define NHB_STREAM_MAP(X)                                                   \
  X(RESPONSE_HEADER_SIZE, "benchmark_http_client.response_header_size")   \
  X(RESPONSE_BODY_SIZE, "benchmark_http_client.response_body_size")      \
  X(EVENTS_PER_RESPONSE, "benchmark_http_client.events_per_response")

typedef enum {
#define NHB__STREAM_ENUM(name, str) NHB_STREAM_##name,
  NHB_STREAM_MAP(NHB__STREAM_ENUM)
#undef NHB__STREAM_ENUM
  NHB_STREAM_COUNT
} nhb_stream_t;

/* Per-status-code counters. Every response whose status is 100..599 is also
 * counted by its exact code, in a fixed array indexed by code - NHB_STATUS_MIN
 * (anything else is what benchmark.http_xxx counts, so that counter is the
 * array's "other" bucket). Their names are "benchmark.http_<code>". Predicates
 * refer to them by counter ids past the fixed ones:
 * NHB_CTR_COUNT + code - NHB_STATUS_MIN, below NHB_COUNTER_ID_COUNT. */
/* The largest test-server event stream (nhb_server_config.stream_events). */
#define NHB_SERVER_MAX_STREAM_EVENTS 10000u
#define NHB_STATUS_MIN 100
#define NHB_STATUS_MAX 599
#define NHB_STATUS_COUNT (NHB_STATUS_MAX - NHB_STATUS_MIN + 1)
/* gRPC: the calls of a gRPC run are also counted by their
 * grpc-status, 0 (OK) .. 16 (UNAUTHENTICATED), the codes the gRPC spec
 * defines, as "benchmark.grpc_status_<code>". Their ids follow the
 * per-status-code ones: NHB_GRPC_STATUS_ID + code. */
#define NHB_GRPC_STATUS_COUNT 17
#define NHB_GRPC_STATUS_ID (NHB_CTR_COUNT + NHB_STATUS_COUNT)
/* Response checks: check i's pass counter is NHB_CHECK_PASS_ID + i, its fail
 * counter NHB_CHECK_FAIL_ID + i (i below the run's nchecks), in the order of
 * nhb_stats' check_pass and check_fail. The core knows them by index only
 * ("check.<i>.pass"); the binding names them after the checks. */
#define NHB_CHECK_PASS_ID (NHB_GRPC_STATUS_ID + NHB_GRPC_STATUS_COUNT)
#define NHB_CHECK_FAIL_ID (NHB_CHECK_PASS_ID + NHB_MAX_CHECKS)
#define NHB_COUNTER_ID_COUNT (NHB_CHECK_FAIL_ID + NHB_MAX_CHECKS)

extern const char* const nhb_counter_names[NHB_CTR_COUNT];
extern const char* const nhb_histogram_names[NHB_HIST_COUNT];
extern const char* const nhb_stream_names[NHB_STREAM_COUNT];
/* Returns the counter id for a name (a fixed counter's index, the id of a
 * per-status-code counter "benchmark.http_<code>" with code 100..599, of a
 * gRPC one "benchmark.grpc_status_<code>" with code 0..16, or of a check's
 * "check.<index>.pass|fail"), or -1. */
int nhb_counter_lookup(const char* name);
/* Writes the name of counter id `id` into buf (NUL-terminated, truncated to
 * len); returns 0, or -1 for an id that names no counter. */
int nhb_counter_name(int id, char* buf, size_t len);

/* Everything one worker (or the merged run) measured. */
/* Response checks (check.c, docs/checks.md): declarative tests of each
 * final response, compiled by nhbench's Python side (nhbench._checks) and
 * evaluated as the response arrives, without allocation per request. */
#define NHB_MAX_CHECKS 32 /* the run's and its request-set entries' together: a bit each in a uint32_t */
#define NHB_CHECK_MAX_RANGES 16
#define NHB_CHECK_TEXT_MAX 256        /* a header name, a substring, a value, a JSON pointer */
#define NHB_CHECK_JSON_PREFIX 16384   /* the body bytes a JSON pointer looks at */
/* Regular expressions (check_regex.c, Vectorscan): a pattern is a text (at
 * most NHB_CHECK_TEXT_MAX bytes); the body's and the headers' patterns each
 * compile to one streaming database of at most NHB_CHECK_RE_DB_MAX bytes
 * whose stream state (one per connection) is at most NHB_CHECK_RE_STREAM_MAX. */
#define NHB_CHECK_RE_DB_MAX (1u << 20)
#define NHB_CHECK_RE_STREAM_MAX 4096u
/* Vectorscan's compile time and memory grow with a pattern's shape in ways
 * no cheap look at it bounds (32 patterns of 50 bytes take a minute), so
 * the patterns compile in a child process of at most NHB_CHECK_RE_CPU_S
 * seconds of CPU and NHB_CHECK_RE_MEM_MAX bytes of memory above the
 * process's own; past either the run is refused by name. */
#define NHB_CHECK_RE_CPU_S 5u
#define NHB_CHECK_RE_MEM_MAX (1ull << 30)
typedef enum {
  NHB_CHECK_STATUS = 0,     /* status in ranges */
  NHB_CHECK_HEADER_EXISTS,  /* header:NAME exists */
  NHB_CHECK_HEADER_HAS,     /* header:NAME ~ "text": one such header's value contains text */
  NHB_CHECK_HEADER_EQ,      /* header:NAME == "text": one such header's value is text */
  NHB_CHECK_BODY_HAS,       /* body ~ "text" */
  NHB_CHECK_BODY_SIZE,      /* body.size in ranges */
  NHB_CHECK_BODY_SHA256,    /* body.sha256 == 32 bytes */
  NHB_CHECK_JSON_EXISTS,    /* json:/pointer exists (over the first NHB_CHECK_JSON_PREFIX bytes) */
  NHB_CHECK_JSON_EQ,        /* json:/pointer == JSON text (compared as written) */
  NHB_CHECK_HEADER_ABSENT,  /* header:NAME absent */
  NHB_CHECK_BODY_RE,        /* body =~ /re/: text the pattern, value its flags ("i", "s", "m") */
  NHB_CHECK_HEADER_RE,      /* header:NAME =~ /re/: one such header's value matches */
  NHB_CHECK_KIND_COUNT
} nhb_check_kind_t;

typedef struct nhb_check {
  int kind;                 /* nhb_check_kind_t */
  const char* header;       /* header checks: the name (any case) */
  size_t header_len;
  const char* text;         /* substring, value, digest (32 bytes) or JSON pointer */
  size_t text_len;
  const char* value;        /* NHB_CHECK_JSON_EQ: the JSON text; regex: its flags */
  size_t value_len;
  uint64_t lo[NHB_CHECK_MAX_RANGES]; /* status / size: inclusive ranges */
  uint64_t hi[NHB_CHECK_MAX_RANGES];
  uint32_t nranges;
  /* Which responses the check judges: 0 every response of the run; k > 0
   * only the responses to request-set entry k - 1 (a request-source entry's
   * own check). Zero-initialised, a check applies to the whole run. */
  uint32_t entry;
} nhb_check;

typedef struct nhb_stats {
  uint64_t execution_start_ns; /* CLOCK_REALTIME of the first scheduled release */
  uint64_t execution_duration_ns;
  uint64_t counters[NHB_CTR_COUNT];
  uint64_t status_codes[NHB_STATUS_COUNT]; /* [code - NHB_STATUS_MIN] */
  uint64_t grpc_status[NHB_GRPC_STATUS_COUNT]; /* [grpc-status]; all 0 but in gRPC runs */
  /* Response checks (check.c): per configured check, the final responses
   * that passed and failed it; all 0 without checks. */
  uint64_t check_pass[NHB_MAX_CHECKS];
  uint64_t check_fail[NHB_MAX_CHECKS];
  /* Responses judged by every check and counted here once, not in each
   * check_pass: the worker adds them to each check_pass (and takes a
   * failed check's back off it) before anything reads the counters
   * (nhb__chk_fold), so a response costs one increment, not one per check. */
  uint64_t check_every;
  /* NULL for a statistic the run does not measure: origin_latency_statistic
   * without latency_response_header_name (Nighthawk does not report it then). */
  nhb_hist* hists[NHB_HIST_COUNT];
  nhb_stream streams[NHB_STREAM_COUNT];
} nhb_stats;

/* ------------------------------------------------------------------------ */
/* Client runs. */
typedef enum {
  NHB_IDLE_SPIN = 0,
  NHB_IDLE_POLL = 1,
  NHB_IDLE_SLEEP = 2
} nhb_idle_strategy_t;

/* The largest udp:// echo payload: 65507 bytes (the largest UDP
 * payload over IPv4) minus the 8-byte sequence number. */
#define NHB_ECHO_UDP_MAX_PAYLOAD 65499

/* The client's protocols: X(ID, name, record) gives NHB_PROTO_<ID> (in this
 * order, from 0), the name the binding's `protocol` key takes and the record
 * that says what it runs (session, transport, set-up): nhb__protocol_<record>,
 * defined in its session file under csrc/client/ (client.h declares it and
 * protocol.c indexes it from this map). No code depends on the order. */
#define NHB_PROTOCOL_MAP(X)                                                          \
  X(HTTP1, "http1", h1)                                                              \
  X(HTTP2, "http2", h2) /* gRPC too: HTTP/2 with config.grpc set (session_grpc.c) */ \
  X(HTTP3, "http3", h3) /* QUIC (ngtcp2) + HTTP/3 (nghttp3): session_h3.c */         \
  X(TCP, "tcp", tcp_echo) /* tcp:// echo: a payload out, the same bytes back (session_echo.c) */ \
  X(UDP, "udp", udp_echo) /* udp:// echo: one datagram out, one back (session_echo.c) */

typedef enum {
#define NHB__PROTO_ENUM(id, name, record) NHB_PROTO_##id,
  NHB_PROTOCOL_MAP(NHB__PROTO_ENUM)
#undef NHB__PROTO_ENUM
  NHB_PROTO_COUNT
} nhb_protocol_t;

/* A request header for HTTP/2 (HTTP/1.1 sends pre-rendered bytes instead). */
typedef struct nhb_header {
  const char* name; /* lower-case, as HTTP/2 requires */
  size_t name_len;
  const char* value;
  size_t value_len;
} nhb_header;

/* TLS settings of a client run. Strings may be NULL or "" for "not set"; they
 * are copied by nhb_run_create(). */
typedef struct nhb_tls_config {
  int enabled;             /* https:// */
  const char* sni;         /* server name sent in the handshake; none when unset */
  const char* verify_name; /* DNS name or IP address the certificate must match */
  const char* alpn;        /* comma-separated ids; unset = from the protocol */
  const char* cacert;      /* trusted CA file or directory; unset = the system store */
  int insecure;            /* skip certificate verification */
  const char* ciphers;      /* TLS 1.2 cipher list (OpenSSL syntax) */
  const char* ciphersuites; /* TLS 1.3 cipher suites */
  const char* groups;       /* key exchange groups, e.g. "X25519:P-256" */
  int min_version;          /* 0x0303 = TLS 1.2, 0x0304 = TLS 1.3; 0 = default */
  int max_version;          /* 0 = highest supported */
  int session_reuse;        /* resume the worker's last session on new connections */
  /* The client certificate (chain) and its key, PEM text (the binding reads
   * the files), sent when the server asks; unset = none. key_passphrase
   * decrypts an encrypted key (never prompted for here: an encrypted key
   * without it fails). */
  const char* cert_pem;
  const char* key_pem;
  const char* key_passphrase;
} nhb_tls_config;

/* A socket address: struct sockaddr_in, sockaddr_in6 or sockaddr_un (a path,
 * or a Linux abstract name when sun_path[0] is NUL). */
typedef struct nhb_sockaddr {
  unsigned char bytes[128];
  unsigned len;
} nhb_sockaddr;

/* One entry of a run's request set (request sources, templating,
 * several targets). Workers cycle through the set in order. Strings are copied
 * by nhb_run_create(). */
typedef struct nhb_request_spec {
  /* HTTP/1.x: the request as sent, head and body; the last body_size bytes
   * are the body (HTTP/2 sends those as DATA). */
  const char* request;
  size_t request_len;
  size_t body_size;
  int head_request;
  /* HTTP/2: the header block's parts (the scheme is the run's). */
  const char* h2_method;
  const char* h2_path;
  const char* h2_authority;
  const nhb_header* h2_headers; /* regular headers, lower-case, no Host */
  int h2_nheaders;
  /* Which of the run's targets it goes to (config.targets); 0 with one. */
  uint32_t target;
} nhb_request_spec;

typedef struct nhb_predicate {
  int counter; /* a counter id: nhb_counter_t, or a per-status-code counter's */
  uint64_t threshold;
} nhb_predicate;

#define NHB_MAX_PREDICATES 32

/* The highest rate a worker may be asked for, as Nighthawk's --rps bound
 * (1 to 1000000 per worker). nhb_run_create() refuses more. */
#define NHB_MAX_RPS 1000000
/* The most workers a run or a server may have: their arrays, histograms and
 * threads are allocated when it is created. */
#define NHB_MAX_WORKERS 4096
/* The longest a templated request (HTTP/1 head and body) may expand to. Each
 * connection (HTTP/1) or slot (HTTP/2) has a buffer this size at most,
 * allocated before the run; 64 KiB keeps 100 connections under 7 MB per
 * worker. Untemplated requests are bounded only by the caller. */
#define NHB_MAX_TEMPLATED_REQUEST 65536
/* The most targets a run may have (several targets): each one has
 * at least one connection, with its 64 KiB read buffer, in every worker. */
#define NHB_MAX_TARGETS 1024
/* Source addresses a run's connections spread over (config.sources). */
#define NHB_MAX_SOURCES 1024

typedef struct nhb_client_config {
  /* Target. `addr` is a struct sockaddr_in or sockaddr_in6. */
  unsigned char addr[28];
  unsigned addr_len;
  /* Workers: one per entry, pinned to that CPU (or unpinned when -1). */
  int nworkers;
  const int* cpus;
  /* Load shape, per worker. */
  double rps; /* 0 = closed loop as fast as connections allow */
  uint32_t burst_size;
  uint32_t connections;
  uint32_t max_pending_requests;
  uint64_t max_requests_per_connection; /* 0 = unlimited */
  int prefetch_connections;
  int open_loop;
  nhb_idle_strategy_t idle_strategy;
  /* Times, in nanoseconds. duration < 0 means no duration. */
  int64_t duration_ns;
  uint64_t connect_timeout_ns;
  uint64_t request_timeout_ns; /* 0 = none */
  uint64_t drain_timeout_ns;
  uint64_t start_delay_ns;
  /* Protocol. HTTP/1.1 sends each spec's `request` as it is; HTTP/2 and
   * HTTP/3 send its h2_* as headers (with h2_scheme) and the last body_size
   * bytes of its `request` as the body. */
  nhb_protocol_t protocol;
  nhb_tls_config tls;
  uint32_t max_concurrent_streams; /* HTTP/2, per connection; 0 = unlimited */
  uint32_t max_active_requests;    /* HTTP/2, per worker; 0 = 100 */
  const char* h2_scheme; /* HTTP/2 and HTTP/3: every request's :scheme */
  /* The requests: a set of at least one, rendered once and copied by
   * nhb_run_create() (a run of a single request is a set of one). */
  const nhb_request_spec* specs;
  uint32_t nspecs;
  /* ---- what is sent (request.c, session_h1.c, session_h2.c) ---- */
  /* Templating (docs/engine.md "What is sent"): every spec's HTTP/1 bytes and
   * HTTP/2 path and header values may hold {seq} {uuid} {rand:N} {worker}
   * and {content-length}, expanded for each request. 0: sent as they are. */
  int templated;
  /* HTTP/1.0 (Fortio's -http1.0): the requests say HTTP/1.0 without
   * keep-alive, so every connection is closed after its response. */
  int http10;
  /* ---- schedule shapes (sequencer.c) ---- */
  /* Jitter: each release is delayed by a uniform random time in
   * [0, jitter_uniform_ns] (Nighthawk's --jitter-uniform), and/or moved by a
   * uniform random fraction in [-jitter_fraction, +jitter_fraction] of the
   * interval (Fortio's -jitter: 0.1). Both 0 = off. */
  uint64_t jitter_uniform_ns;
  double jitter_fraction;
  /* Fortio's -nocatchup: a release at least one interval late moves the rest
   * of the schedule instead of bursting to catch up (rate schedules only). */
  int no_catchup;
  /* Exactly this many releases over all workers (worker i makes N/W, plus one
   * for the first N%W), then the run drains and ends. 0 = no count. */
  uint64_t total_requests;
  /* Linear stages (k6-style): stage i ramps the per-worker rate linearly from
   * the previous stage's end rate (0 before the first) to stage_rps[i] over
   * stage_ns[i]. nstages 0 = off (then rps applies). */
  const uint64_t* stage_ns;
  const double* stage_rps;
  uint32_t nstages;
  /* An explicit schedule (replay): each worker releases request k at
   * schedule_offsets_ns[k] after its start, exactly nschedule_offsets
   * requests, then ends. Non-decreasing. 0 entries = off. */
  const uint64_t* schedule_offsets_ns;
  uint64_t nschedule_offsets;
  /* Warm-up before the measured phase: a phase of warmup_ns at the run's rate,
   * or warmup_requests requests per worker sent one after another; its
   * statistics are kept apart (nhb_run_warmup_stats). With
   * allow_initial_errors, failure predicates are not judged during it. */
  uint64_t warmup_ns;
  uint64_t warmup_requests;
  int allow_initial_errors;
  /* A warm-up call that failed (not 2xx nor 418, a connection failure, a
   * reset, a time-out, a gRPC or echo error) ends the run when the warm-up
   * does, before the measured phase: Fortio's rule for its warm-up calls. */
  int warmup_stop_on_error;
  /* The first release at this CLOCK_REALTIME instant (ns) instead of after
   * start_delay_ns; 0 = none. */
  uint64_t start_realtime_ns;
  /* Open-model arrivals: 1 = each worker's releases form a Poisson process at
   * its rate (exponential gaps in cumulative-rate time, so stages give a
   * non-homogeneous one); 0 = the uniform schedule. Fixed rates and stages
   * only (not with jitter, --no-catchup, bursts or an explicit schedule). */
  int arrival_poisson;
  /* The random schedule's seed (Poisson arrivals, jitter): each worker's
   * generator starts from it and its index, so the same seed gives the same
   * schedule. seed_set 0: seeded from the clock. */
  uint64_t seed;
  int seed_set;
  /* A test hook: each worker keeps the first record_arrivals release times
   * its random schedule draws (Poisson or jittered; ns after its phase start)
   * in an array allocated with the run (nhb_run_arrivals). 0 = off; a uniform
   * schedule without jitter never looks at it. */
  uint64_t record_arrivals;
  /* ---- targets and transport (pool.c, transport_tcp.c) ---- */
  /* The run's targets, each a sockaddr_in, sockaddr_in6 or sockaddr_un (a
   * Unix socket path; abstract names are refused). ntargets == 0: the single
   * target `addr`. A request goes to specs[spec].target; each connection
   * belongs to one target. Copied by nhb_run_create(). */
  const nhb_sockaddr* targets;
  uint32_t ntargets;
  /* The single target's addresses (a name that has several, --dns-method
   * rr|random): each new connection connects to one of them, the next one
   * run-wide (round robin) or, with endpoint_random, one drawn at random.
   * Only with one target; 0 or 1 entries: the target alone. Copied by
   * nhb_run_create(). */
  const nhb_sockaddr* endpoints;
  uint32_t nendpoints;
  int endpoint_random;
  /* DNS per connection (dns.c, docs/engine.md "DNS per connection"): the
   * single target's name, resolved again (uv_getaddrinfo on the worker's
   * loop) for each new connection, which connects to the answer dns_pick
   * chooses: 0 the first, 1 the next one run-wide (round robin), 2 one drawn
   * at random. dns_family: AF_UNSPEC, AF_INET or AF_INET6. The port is the
   * target's (addr, which is also where a run without it connects). NULL or
   * "": off, the addresses above (resolved before the run). One TCP or UDP
   * target, no endpoints, no tunnel. Copied by nhb_run_create(). */
  const char* dns_host;
  int dns_family;
  int dns_pick;
  /* HTTP/1.x: which available connection takes the next request: 0 = the
   * most recently used (Nighthawk's default "mru"), 1 = the least recently
   * used ("lru", a FIFO), which spreads requests over all connections. */
  int reuse_lru;
  /* Outgoing connections bind to one of these local addresses (port 0: the
   * kernel picks it, at connect time for TCP: IP_BIND_ADDRESS_NO_PORT) before
   * connecting: entry k of worker w's n connection entries binds to
   * sources[(w * n + k) % nsources]. nsources 0 = the kernel chooses the
   * address. Copied by nhb_run_create(); at most NHB_MAX_SOURCES. */
  const nhb_sockaddr* sources;
  uint32_t nsources;
  /* ---- response observation (session_h1.c, session_h2.c) ---- */
  /* Nighthawk's --latency-response-header-name: the response header whose
   * value (an integer of nanoseconds) goes into origin_latency_statistic.
   * NULL or "" = off. Matched case-insensitively; copied by nhb_run_create(). */
  const char* latency_response_header_name;
  /* ---- echo: tcp:// and udp:// (session_echo.c, transport_udp.c) ---- */
  /* The bytes every echo request sends (docs/protocols.md): TCP writes them
   * and waits for the same bytes back; UDP sends one datagram of an 8-byte
   * sequence number followed by them. TCP needs at least 1 byte, UDP at most
   * NHB_ECHO_UDP_MAX_PAYLOAD. Copied by nhb_run_create(). */
  const char* echo_payload;
  size_t echo_payload_len;
  /* ---- gRPC (session_h2.c with grpc set) ---- */
  /* 1: the HTTP/2 run is gRPC: the request set's bodies are gRPC messages
   * already framed (5-byte prefix), the responses end with grpc-status
   * trailers, counted per code (docs/protocols.md). */
  int grpc;
  /* ---- HTTP/3 (session_h3.c) ---- */
  /* ---- proxies and tunnels (tunnel.c) ---- */
  /* CONNECT through an HTTP proxy: the targets are the proxy's address, and
   * every connection first writes tunnel_requests[its target] (a whole
   * CONNECT request head: "CONNECT host:port HTTP/1.1", Host, any
   * Proxy-Authorization, the blank line), waits for a 2xx answer, then runs
   * TLS or TCP inside the tunnel. ntunnel_requests: 0 = no tunnel, else one
   * per target or one for all. Copied by nhb_run_create(). */
  const char* const* tunnel_requests;
  const size_t* tunnel_request_lens;
  uint32_t ntunnel_requests;
  /* CONNECT-UDP (tunnel_udp.c, RFC 9298): an HTTP/3 run through a proxy that
   * speaks HTTP/3. The targets are the proxy's address; each connection
   * first opens QUIC to it and sends an extended CONNECT (:protocol
   * connect-udp, :authority udp_tunnel_authority, :path
   * udp_tunnel_paths[its target], one per target or one for all), then runs
   * HTTP/3 to the origin inside it. NULL authority = no such tunnel. The TLS
   * to the proxy: SNI, the name its certificate must be valid for, the CA
   * file or directory (NULL: the system's), or no check at all. */
  const char* udp_tunnel_authority;
  const char* const* udp_tunnel_paths;
  uint32_t nudp_tunnel_paths;
  const char* udp_tunnel_authorization; /* Proxy-Authorization, or NULL */
  const char* udp_tunnel_sni;
  const char* udp_tunnel_verify_name;
  const char* udp_tunnel_cacert;
  int udp_tunnel_insecure;
  /* The proxy leg of those tunnels (carrier.c): proxy_tls.enabled is TLS to
   * the proxy (only sni, verify_name, cacert and insecure are read, and
   * cert_pem, which here is PEM text of CAs to trust besides cacert),
   * proxy_protocol 2 carries the CONNECT on an HTTP/2 stream (1 or 0: an
   * HTTP/1.1 CONNECT). Either one needs tunnel_requests, or, with
   * udp_tunnel_authority, proxy_protocol 2 carries the CONNECT-UDP on an
   * HTTP/2 stream instead of HTTP/3 (tunnel_udp_h2.c; proxy_tls then its TLS,
   * else h2c; the udp_tunnel_sni, _verify_name, _cacert and _insecure are
   * not read). */
  nhb_tls_config proxy_tls;
  int proxy_protocol;
  /* Predicates: counter > threshold. */
  int n_termination;
  nhb_predicate termination[NHB_MAX_PREDICATES];
  int n_failure;
  nhb_predicate failure[NHB_MAX_PREDICATES];
  /* Live statistics (docs/live.md): every this many nanoseconds the run closes
   * an interval (nhb_run_take_intervals). 0 = off: nothing is allocated and
   * the hot path only tests one pointer. */
  uint64_t stats_interval_ns;
  /* ---- traces (trace.c; docs/telemetry.md "Traces") ---- */
  /* The fraction of requests traced, in (0, 1]; 0 = off: nothing is
   * allocated, the sessions' untraced send runs and the response path tests
   * one slot field that stays 0. A traced request carries a W3C traceparent
   * (and, with trace_b3, Zipkin's B3 headers) with a random trace and span
   * id, and its span (ids, times, status) goes into a per-worker ring of
   * trace_ring entries (0: 16384) that nhb_run_take_spans() drains; a full
   * ring drops the span and counts it, never waits. HTTP/1.1 and HTTP/2
   * (gRPC included) only. */
  double trace_sample_rate;
  int trace_b3;
  uint32_t trace_ring;
  /* ---- response checks (check.c): HTTP/1.1, HTTP/2, HTTP/3 (not gRPC); copied by nhb_run_create() ---- */
  const nhb_check* checks;
  uint32_t nchecks;
  /* ---- statistics per group (group.c, docs/engine.md "Groups") ----
   * By request kind or target: ngroups (1..NHB_MAX_GROUPS + 1) groups and
   * spec_group[i], the group of request-set entry i (nspecs entries). By a
   * response header: group_header names it and the groups are its values,
   * found at run time. At most one of the two; neither (ngroups 0,
   * group_header NULL): no groups, and nothing per request. Copied. */
  uint32_t ngroups;
  const uint32_t* spec_group;
  const char* group_header;
  /* ---- streaming responses (stream.c, docs/engine.md "Streaming responses") ----
   * 1: time each response's events (SSE events of a text/event-stream body,
   * else body pieces as they arrive) into time_to_first_event,
   * inter_event_gap, stream_duration and events_per_response. 0: the
   * sessions install none of its callbacks and the statistics are absent. */
  int stream_stats;
} nhb_client_config;

typedef enum {
  NHB_END_NONE = 0,
  NHB_END_DURATION,
  NHB_END_STOP,
  NHB_END_TERMINATION_PREDICATE,
  NHB_END_FAILURE_PREDICATE,
  NHB_END_ERROR
} nhb_end_reason_t;

typedef struct nhb_run nhb_run;

/* Validates the config and prepares a run; nothing starts yet. The config is
 * copied, but `request` must stay valid until nhb_run_destroy(). */
int nhb_run_create(const nhb_client_config* config, nhb_run** out);
/* The same; on failure `err` (if not NULL) says what is wrong, e.g. OpenSSL's
 * reason for rejecting a cipher list or a CA file. */
int nhb_run_create_ex(const nhb_client_config* config, nhb_run** out, char* err, size_t err_len);
/* Starts the workers and returns at once. */
int nhb_run_start(nhb_run* run);
/* Waits up to timeout_s seconds (negative = forever). Returns 1 when the run
 * has finished and its statistics are final, 0 on time-out. */
int nhb_run_wait(nhb_run* run, double timeout_s);
/* The same, also returning (0, unless the run finished meanwhile) as soon as
 * `wake_fd` is readable or a signal interrupts the wait: the caller's signal
 * handlers run then, without waking on a timer to find out (the Python thread
 * that waits for a run passes its signal wake-up fd). The caller drains
 * wake_fd. A negative wake_fd: nhb_run_wait. */
int nhb_run_wait_fd(nhb_run* run, double timeout_s, int wake_fd);
/* Asks the run to stop gracefully. Thread-safe and idempotent. */
void nhb_run_stop(nhb_run* run);
/* A live snapshot: counters summed over workers, refreshed about every 10 ms. */
void nhb_run_progress(nhb_run* run, uint64_t counters[NHB_CTR_COUNT], double* elapsed_s);
/* The response checks' counters so far, summed over the workers as
 * nhb_run_progress sums the others (published every 10 ms): pass[i] and
 * fail[i] for each of the run's nchecks checks. */
void nhb_run_check_progress(nhb_run* run, uint64_t pass[NHB_MAX_CHECKS], uint64_t fail[NHB_MAX_CHECKS]);
/* One closed interval of a run with stats_interval_ns set: the
 * coordinated-omission-corrected latency (scheduled_to_response) of the
 * responses that arrived in it, merged over workers, and the counters' growth
 * over it. Over all intervals of a run the histogram totals add up exactly to
 * the run's scheduled_to_response total and the counter deltas to its
 * counters. */
typedef struct nhb_interval_bucket {
  uint32_t index; /* in the HdrHistogram layout above */
  uint64_t count;
} nhb_interval_bucket;

typedef struct nhb_interval {
  uint64_t index;       /* 0, 1, 2, ... */
  int64_t start_ns;     /* since the first scheduled release */
  uint64_t duration_ns; /* measured: from when the workers closed the previous one */
  /* 1 when a worker may have been in its warm-up during the interval: the
   * warm-up's requests are in it, so it is not the measured phase's. */
  int warmup;
  uint64_t counters[NHB_CTR_COUNT]; /* growth over the interval */
  uint64_t total, min, max;         /* min is 0 when total is 0 */
  double sum;
  size_t nbuckets;
  nhb_interval_bucket* buckets; /* owned; nhb_interval_free() */
  /* The per-status-code and gRPC-status counters that grew, as (counter id,
   * growth) pairs (nhb_counter_name names them); owned like buckets. */
  size_t ncodes;
  nhb_interval_bucket* codes;
} nhb_interval;

/* Moves up to `max` closed intervals, oldest first, into out[] and returns
 * how many. Thread-safe; any time after nhb_run_start(). Once nhb_run_wait()
 * returned 1, every interval of the run (the last, partial one included) is
 * ready. The caller frees each with nhb_interval_free(). */
int nhb_run_take_intervals(nhb_run* run, nhb_interval* out, int max);
void nhb_interval_free(nhb_interval* iv);
/* One traced request (config.trace_sample_rate). Times are CLOCK_REALTIME ns:
 * start when the request was first handed to its connection, end when its
 * response ended or it failed. status: the response's status, 0 when it
 * failed; reason then names the counter it failed under (nhb_counter_t). */
typedef struct nhb_span {
  uint64_t trace_hi, trace_lo; /* the 128-bit trace id */
  uint64_t span_id;
  uint64_t start_ns, end_ns;
  int32_t status;
  uint32_t reason;
  uint32_t spec;   /* its entry of the request set */
  uint32_t worker;
} nhb_span;

/* Moves up to `max` finished spans into out[] and returns how many (0 when
 * tracing is off). Thread-safe (one caller at a time takes them, under the
 * run's lock); any time after nhb_run_create(), also after the run ended. */
int nhb_run_take_spans(nhb_run* run, nhb_span* out, int max);
/* Requests sampled so far, and spans dropped because a worker's ring was full. */
void nhb_run_trace_counts(nhb_run* run, uint64_t* sampled, uint64_t* dropped);
/* After the run finished: per-worker and merged statistics. */
int nhb_run_worker_count(const nhb_run* run);
const nhb_stats* nhb_run_worker_stats(const nhb_run* run, int index);
const nhb_stats* nhb_run_global_stats(const nhb_run* run);
nhb_end_reason_t nhb_run_end_reason(const nhb_run* run);
/* The counter of the predicate that ended the run, or -1. */
int nhb_run_end_counter(const nhb_run* run);
/* Failure predicates that fired: a bit per entry of config.failure. */
uint64_t nhb_run_failed_predicates(const nhb_run* run);
/* The first connection or protocol error the run saw, "" if none. */
const char* nhb_run_first_error(const nhb_run* run);
/* Schedule shapes: what the schedule did, for one worker (index
 * 0..nworkers-1) or, with index -1, summed over all of them. Valid once the
 * run has finished; returns NHB_ESTATE before, NHB_EINVAL for a bad index. */
typedef struct nhb_schedule_facts {
  uint64_t released;       /* releases made in the measured phase */
  uint64_t no_catchup_moves; /* times a late release moved the schedule */
  uint64_t no_catchup_shift_ns; /* total time the schedule moved */
  uint64_t no_catchup_lost;     /* releases the unmoved schedule had made by the end */
  uint64_t warmup_released;     /* releases made during the warm-up */
} nhb_schedule_facts;
int nhb_run_schedule_facts(const nhb_run* run, int index, nhb_schedule_facts* out);
/* The warm-up phase's merged statistics, or NULL when the run had none (or
 * has not finished). */
const nhb_stats* nhb_run_warmup_stats(const nhb_run* run);
/* Per endpoint: the run's targets (several targets) or the single target's
 * addresses (config.endpoints), merged over the workers once the run has
 * finished; NULL (and *count 0) with one endpoint. */
typedef struct nhb_endpoint_stats {
  uint64_t connections; /* connections started to it, the warm-up's included */
  uint64_t requests;    /* measured requests that ended on its connections */
  uint64_t errors;      /* those that ended in anything but a 2xx response */
  nhb_hist* latency;    /* request_to_response of its measured responses */
} nhb_endpoint_stats;
const nhb_endpoint_stats* nhb_run_endpoint_stats(const nhb_run* run, uint32_t* count);
/* Per group (config.ngroups or config.group_header), merged over the workers
 * once the run has finished. Grouping by a response header, each worker
 * keeps the first NHB_MAX_GROUPS distinct values it sees, each of at most
 * NHB_GROUP_VALUE_MAX bytes; a longer value, or one more, goes to the "other"
 * group, and a response without the header to the "none" one. The merge
 * joins the workers' values by value, with the same bound. */
#define NHB_MAX_GROUPS 64
#define NHB_GROUP_VALUE_MAX 128
typedef enum {
  NHB_GROUP_INDEX = 0, /* config.spec_group's group of that index */
  NHB_GROUP_VALUE,     /* a value of the header */
  NHB_GROUP_NONE,      /* responses without the header, and requests that got no response */
  NHB_GROUP_OTHER      /* values past the bound, or longer than NHB_GROUP_VALUE_MAX */
} nhb_group_kind_t;
typedef struct nhb_group_stats {
  uint32_t kind;        /* nhb_group_kind_t */
  uint32_t value_len;   /* NHB_GROUP_VALUE: the value's bytes */
  char value[NHB_GROUP_VALUE_MAX];
  uint64_t requests;    /* measured requests that ended: responses and failures */
  uint64_t classes[6];  /* responses by class: [1]..[5] 1xx..5xx, [0] any other status */
  uint64_t failures;    /* requests that ended without a counted response (resets, time-outs...) */
  uint64_t check_failed; /* of those, 2xx responses that failed a --check */
  nhb_hist* latency;    /* request_to_response of its responses (not the failed checks') */
} nhb_group_stats;
const nhb_group_stats* nhb_run_group_stats(const nhb_run* run, uint32_t* count);
/* The groups during the run (as of the workers' last 10 ms publish), merged
 * as nhb_run_group_stats merges them, without the histograms: into out, at
 * most `max` entries (NHB_MAX_GROUPS + 2 hold every group); returns how many
 * were written, 0 without groups. */
typedef struct nhb_group_progress {
  uint32_t kind; /* nhb_group_kind_t */
  uint32_t value_len;
  char value[NHB_GROUP_VALUE_MAX];
  uint64_t requests; /* ended: responses and failures */
  uint64_t errors;   /* of those, all but the 2xx responses */
} nhb_group_progress;
uint32_t nhb_run_group_progress(const nhb_run* run, nhb_group_progress* out, uint32_t max);
/* The same endpoints' connections, requests and errors during the run (as of
 * the workers' last 10 ms publish), into out[3*i .. 3*i+2] for the first
 * `max` endpoints; returns how many were written (0 with one endpoint), or
 * with out NULL how many there are. */
uint32_t nhb_run_endpoint_progress(const nhb_run* run, uint64_t* out, uint32_t max);
/* The load generator's own health in the measured phase, for one worker
 * (index 0..nworkers-1), once the run has finished: its thread's CPU time
 * (CLOCK_THREAD_CPUTIME_ID), the wall time between the same two samples,
 * the time it was runnable but waited for a CPU, and how late its event
 * loop ran its own periodic housekeeping timer (ns, every
 * NHB_HICCUP_PERIOD_NS; NULL if the worker never started). Returns
 * NHB_ESTATE before, NHB_EINVAL for a bad index. */
#define NHB_HICCUP_PERIOD_NS 10000000ULL
typedef struct nhb_worker_load {
  uint64_t cpu_ns;
  uint64_t wall_ns;
  int64_t wait_ns; /* time runnable but waiting for a CPU (/proc schedstat); -1: unknown */
  const nhb_hist* hiccup;
} nhb_worker_load;
int nhb_run_worker_load(const nhb_run* run, int index, nhb_worker_load* out);
/* Releases and responses per stage (index 0..nstages-1), summed over the
 * workers; returns NHB_EINVAL for a bad index. */
int nhb_run_stage_counts(const nhb_run* run, uint32_t stage, uint64_t* releases, uint64_t* responses);
/* The random release times worker `worker` drew (config.record_arrivals),
 * ns after its phase start, in order; *count of them. After the run. */
int nhb_run_arrivals(const nhb_run* run, int worker, const uint64_t** times, uint64_t* count);
void nhb_run_destroy(nhb_run* run);

/* Host calibration (`nhbench calibrate`), outside any run. The wake-ups use
 * the sequencer's idle strategy `strategy`: `count` wake-ups `interval_ns`
 * apart, each one's lateness (ns) recorded in `out` (initialised by the
 * caller). Blocks for about count * interval_ns; returns 0 or a negative code. */
int nhb_calibrate_wakeups(nhb_idle_strategy_t strategy, uint32_t count, uint64_t interval_ns,
                          nhb_hist* out);
/* The mean cost (ns) of one clock read (the core's CLOCK_MONOTONIC), and of one
 * trivial system call, over `iterations` back-to-back calls. */
double nhb_calibrate_clock_read_ns(uint32_t iterations);
double nhb_calibrate_syscall_ns(uint32_t iterations);

/* ------------------------------------------------------------------------ */
/* The test server. */
#define NHB_SERVER_MAX_LISTEN 16
/* Per-status counters cover codes 0..599. */
#define NHB_SERVER_STATUS_MAX 600
/* Extra names for a generated certificate. */
#define NHB_SERVER_MAX_SAN 16

/* HTTP fan-outs (Fortio's -M): listeners, and targets per listener. */
#define NHB_SERVER_MAX_FANOUT 4
#define NHB_SERVER_MAX_FANOUT_TARGETS 8

/* One target of an HTTP fan-out: plain http:// only. The strings belong to
 * the caller and must outlive the server. */
typedef struct nhb_server_fanout_target {
  nhb_sockaddr addr; /* numeric: the caller resolves the URL's host */
  const char* url;   /* the URL as given, quoted in error bodies */
  const char* host;  /* the Host header sent (the URL's host[:port]) */
  const char* path;  /* mirroring: the URL's path without a trailing '/',
                      * to which the request URI is appended; otherwise
                      * the path and query requested ("/" at least) */
} nhb_server_fanout_target;

typedef struct nhb_server_config {
  /* HTTP listeners: TCP (every worker has its own SO_REUSEPORT socket) or
   * unix (one socket that every worker accepts from). */
  int nlisten;
  nhb_sockaddr listen[NHB_SERVER_MAX_LISTEN];
  /* Optional admin listener (GET /stats), served by worker 0. */
  int has_admin;
  nhb_sockaddr admin;
  /* Echo listeners (TCP: bytes back; UDP: datagrams back), on every worker. */
  int ntcp_echo;
  nhb_sockaddr tcp_echo[NHB_SERVER_MAX_LISTEN];
  int nudp_echo;
  nhb_sockaddr udp_echo[NHB_SERVER_MAX_LISTEN];
  int nworkers;
  const int* cpus; /* nworkers entries, -1 = unpinned; may be NULL */
  /* Static Nighthawk ResponseOptions as JSON; NULL or "" = none. */
  const char* response_json;
  /* Fortio query string applied for parameters a request lacks; may be NULL. */
  const char* echo_default_params;
  /* 0: the defaults fill in each parameter a request lacks; 1: they apply
   * only to a request whose URI has no '?' at all (Fortio's rule). */
  int echo_defaults_no_query;
  /* The path of the debug echo (the request as text): NULL means "/debug",
   * "" none. A path ending in '/' also covers the paths under it, except
   * those under PATH "echo/" (Fortio's mux). */
  const char* debug_path;
  /* The debug echo answers ?env=dump with the environment the server
   * started with, as Fortio does: off unless asked, as it exposes secrets. */
  int debug_env_dump;
  uint64_t max_echo_delay_ns;
  /* Cap for Nighthawk's delays (static_delay, concurrency_based_linear_delay),
   * static or per request: a longer one is clamped to it. */
  uint64_t max_delay_ns;
  uint64_t max_payload_bytes;
  /* Every stall_every, all workers hold responses for stall_for (0 = never). */
  uint64_t stall_every_ns, stall_for_ns;
  /* Every this many pre-rendered 200 responses of a worker, one goes out as
   * an error body instead (still 200, with x-nhbench-error: 1 and the body
   * {"error":"injected"}), counted in error_bodies: a known share of
   * responses a client's response checks must catch (0 = never). */
  uint64_t error_body_every;
  /* Event streams (server_sse.c, docs/server.md "Event streams"): every
   * request (HTTP/1.1, HTTP/2, HTTP/3) is answered with a text/event-stream
   * of stream_events events (0 = off; at most NHB_SERVER_MAX_STREAM_EVENTS),
   * one every stream_gap_ns drawn uniformly within +- stream_jitter_ns (at
   * most the gap), the first one gap after the request. */
  uint32_t stream_events;
  uint64_t stream_gap_ns, stream_jitter_ns;
  uint64_t idle_timeout_ns;   /* 0 = none */
  uint64_t header_timeout_ns; /* 0 = none */
  uint64_t max_header_bytes;
  uint64_t max_body_bytes;
  /* TLS on every HTTP listener (the admin listener stays plain HTTP): a
   * certificate chain and its key (PEM files), or a self-signed certificate
   * generated at nhb_server_create(). */
  int tls;
  const char* tls_cert_file;
  const char* tls_key_file;
  int tls_self_signed;
  /* PEM CA certificates: when set, every TLS client must present a
   * certificate that chains to one of them, or the handshake fails. */
  const char* tls_client_ca;
  /* Generated certificate: names (DNS names or IP addresses) on top of
   * localhost, 127.0.0.1, ::1, the host name and the listen addresses. */
  int ntls_san;
  const char* tls_san[NHB_SERVER_MAX_SAN];
  /* The protocols spoken, as ALPN ids in the server's order of preference:
   * "h2,http/1.1" (NULL or "" means that), "http/1.1,h2", "http/1.1" or
   * "h2". Over TLS this is the ALPN list; on plain connections HTTP/2 (the
   * client preface, Upgrade: h2c) is honoured only when "h2" is in it. */
  const char* alpn;
  /* HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS, per connection (default 100). */
  uint32_t max_concurrent_streams;
  /* HTTP connections open at once, over all workers; more are accepted and
   * closed at once. 0 = the soft RLIMIT_NOFILE minus a reserve. */
  uint64_t max_connections;
  /* TCP proxies (Fortio's -P): every connection accepted on tcp_proxy[i] is
   * forwarded to tcp_proxy_dest[i], bytes both ways, a FIN on one side
   * passed on as a FIN to the other. On every worker; each proxied
   * connection holds two descriptors and counts twice against
   * max_connections. IPv4 or IPv6 on both ends. */
  int ntcp_proxy;
  nhb_sockaddr tcp_proxy[NHB_SERVER_MAX_LISTEN];
  nhb_sockaddr tcp_proxy_dest[NHB_SERVER_MAX_LISTEN];
  /* HTTP/1.1 listeners that answer every request with 303 See Other to the
   * same host and path over https:// (Fortio's -redirect-port). Plain HTTP
   * whatever `tls` says; on every worker; counted against max_connections. */
  int nredirect;
  nhb_sockaddr redirect[NHB_SERVER_MAX_LISTEN];
  /* A path forwarded elsewhere (Fortio's web UI on its echo port): an
   * HTTP/1.x request on a plain (not TLS) TCP listen connection whose path
   * is forward_prefix or begins with it (e.g. "/fortio/") turns the
   * connection into a byte pipe to forward_dest, which first receives a
   * PROXY protocol v1 line naming the client, then the request. The same
   * prefix on HTTP/2, TLS or a Unix socket is answered 421. NULL or "" =
   * none. */
  const char* forward_prefix;
  nhb_sockaddr forward_dest;
  /* HTTP fan-outs (Fortio's -M): every HTTP/1.1 request accepted on
   * http_fanout[i] is sent to each of its http_fanout_ntargets[i] targets
   * (plain HTTP/1.1, keep-alive), and the client gets one response: the
   * targets' bodies back to back in target order, the status of the first
   * target that did not answer 200 (parallel) or of the first target
   * (serial). Each client connection holds one connection per target and
   * counts 1 + targets against max_connections. */
  int nhttp_fanout;
  nhb_sockaddr http_fanout[NHB_SERVER_MAX_FANOUT];
  int http_fanout_ntargets[NHB_SERVER_MAX_FANOUT];
  nhb_server_fanout_target http_fanout_target[NHB_SERVER_MAX_FANOUT][NHB_SERVER_MAX_FANOUT_TARGETS];
  /* One target at a time, in order (Fortio's -multi-serial-mode). */
  int http_fanout_serial;
  /* Send a GET of each target's URL with only the trace headers instead of
   * the incoming method, URI, headers and body (Fortio's
   * -multi-mirror-origin=false). */
  int http_fanout_no_mirror;
  /* HTTP/3 (QUIC over UDP) on the same port numbers as the TCP listen
   * addresses, with the same certificate: needs `tls`; unix listen
   * addresses get none. Responses over TLS then carry Alt-Svc: h3=":PORT". */
  int http3;
} nhb_server_config;

/* The server's statistics, in the order of TestServer.stats(), the admin
 * endpoint's /stats JSON and nhbench._core.SERVER_STATS (one list: the struct
 * below, each worker's counters, the JSON writer and the binding's dict are
 * all generated from it). X(name) is a count; STATUS(name) is the one map,
 * responses by status code. Meanings: nhbench._names.SERVER_STAT_DESCRIPTIONS
 * and docs/server.md. */
#define NHB_SERVER_STAT_MAP(X, STATUS)                                           \
  X(requests)             /* responses written */                              \
  X(connections_total)    /* HTTP connections accepted */                      \
  X(connections_active)   /* HTTP connections open now */                      \
  X(rx_bytes)                                                                  \
  X(tx_bytes)                                                                  \
  X(bad_requests)                                                              \
  STATUS(status)          /* responses by status code */                       \
  X(stalls)               /* stall windows begun: periodic plus per-request */ \
  X(tcp_echo_bytes)                                                            \
  X(udp_echo_packets)                                                          \
  X(connections_http1)    /* connections that spoke HTTP/1.x only */           \
  X(connections_http2)    /* ... HTTP/2 (prior knowledge, ALPN, or upgraded) */ \
  X(tls_handshakes)       /* TLS handshakes completed */                       \
  X(tls_handshake_errors) /* TLS connections that ended before the handshake */ \
  X(tls_session_reused)   /* handshakes that resumed a session */              \
  X(tls_clients_verified) /* handshakes with a verified client certificate */ \
  X(tls_clients_refused)  /* ... failed: client certificate missing or rejected */ \
  X(h2_streams_reset)     /* streams the client reset before their response */ \
  X(h2_protocol_errors)   /* HTTP/2 connections ended for a protocol error */  \
  X(connections_refused)  /* closed at accept: over max_connections, or no fds */ \
  X(grpc_calls)           /* gRPC calls answered (HTTP/2, server_grpc.c) */    \
  X(grpc_errors)          /* ... of them with a grpc-status other than OK */  \
  X(error_bodies)         /* 200 error bodies sent for error_body_every */    \
  X(proxy_connections)    /* connections accepted by the TCP proxies */        \
  X(proxy_connections_active) /* ... open now */                               \
  X(proxy_connect_errors) /* ... closed because the destination was unreachable */ \
  X(proxy_bytes_up)       /* bytes forwarded from proxy clients to destinations */ \
  X(proxy_bytes_down)     /* bytes forwarded from destinations to proxy clients */ \
  X(redirects)            /* responses written by the https redirectors */  \
  X(fanout_connections)   /* connections accepted by the HTTP fan-outs */       \
  X(fanout_requests)      /* requests the HTTP fan-outs answered */             \
  X(fanout_upstream_requests) /* ... requests they sent to their targets */     \
  X(fanout_upstream_errors) /* ... of those that failed (no response, bad response, time-out) */ \
  X(connections_http3)    /* QUIC connections accepted (HTTP/3, server_h3.c) */ \
  X(h3_streams_reset)     /* HTTP/3 streams reset before their response was delivered */ \
  X(h3_protocol_errors)   /* QUIC connections ended for a protocol or handshake error */ \
  X(quic_packets_dropped) /* datagrams that were no QUIC packet for a connection, or refused */ \
  X(quic_connections_beside) /* client Initials that began a connection beside one from their address */ \
  X(stream_events)        /* --stream-events: events written, every protocol */ \
  X(event_streams_active) /* --stream-events: event streams begun and not yet ended or dropped */

typedef struct nhb_server_stats {
#define NHB__SRV_STAT_FIELD(name) uint64_t name;
#define NHB__SRV_STATUS_FIELD(name) uint64_t name[NHB_SERVER_STATUS_MAX];
  NHB_SERVER_STAT_MAP(NHB__SRV_STAT_FIELD, NHB__SRV_STATUS_FIELD)
#undef NHB__SRV_STAT_FIELD
#undef NHB__SRV_STATUS_FIELD
} nhb_server_stats;

/* Which bound sockets nhb_server_bound() reports. */
typedef enum {
  NHB_SOCK_HTTP = 0,
  NHB_SOCK_ADMIN = 1,
  NHB_SOCK_TCP_ECHO = 2,
  NHB_SOCK_UDP_ECHO = 3,
  NHB_SOCK_TCP_PROXY = 4,
  NHB_SOCK_REDIRECT = 5,
  NHB_SOCK_HTTP_FANOUT = 6,
  NHB_SOCK_QUIC = 7
} nhb_server_socket_t;

typedef struct nhb_server nhb_server;

/* Fills the defaults: one worker, no listeners, 1.5 s echo delay cap, 60 s
 * Nighthawk delay cap, max_connections from RLIMIT_NOFILE, 256 KiB
 * payload cap, 60 s idle and 10 s header time-outs, 64 KiB heads, 64 MiB
 * bodies. */
void nhb_server_config_init(nhb_server_config* config);
/* Validates the config and prepares the server (nothing is bound yet). On
 * NHB_EINVAL, `err` (if not NULL) says which setting and why. */
int nhb_server_create(const nhb_server_config* config, nhb_server** out, char* err, size_t err_len);
/* Binds every address and starts the workers. On failure nothing stays
 * bound, and nhb_server_error() names the address. */
int nhb_server_start(nhb_server* server);
const char* nhb_server_error(const nhb_server* server);
/* The bound address of socket i of a kind (port 0 resolved). */
int nhb_server_bound(const nhb_server* server, nhb_server_socket_t kind, int i, void* addr,
                     unsigned* addr_len);
/* How many sockets of a kind are bound (0 before start). */
int nhb_server_bound_count(const nhb_server* server, nhb_server_socket_t kind);
/* Shorthand for nhb_server_bound(server, NHB_SOCK_HTTP, ...). */
int nhb_server_address(const nhb_server* server, int i, void* addr, unsigned* addr_len);
/* Exact at the moment of the call (each counter is read once). */
void nhb_server_stats_get(const nhb_server* server, nhb_server_stats* out);
/* The certificate the server presents (PEM; for a generated one, what a
 * client must trust), or NULL without TLS. Valid until nhb_server_destroy. */
const char* nhb_server_tls_cert_pem(const nhb_server* server);
/* Stops accepting, closes connections and joins the workers. Idempotent. */
void nhb_server_stop(nhb_server* server);
void nhb_server_destroy(nhb_server* server);

#ifdef __cplusplus
}
#endif
#endif /* NHB_H */
