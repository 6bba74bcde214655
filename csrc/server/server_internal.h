/* server_internal.h: what the test server's translation units share.
 *
 *   server.c          life cycle, workers, listeners, configuration
 *   server_delay.c    the delay heap and its timerfd, stalls, random numbers
 *   server_conn.c     connections: accepting, reading, writing, closing,
 *                     time-outs, protocol detection
 *   server_h1.c       HTTP/1.1 (llhttp): parsing, the response queue
 *   server_h2.c       HTTP/2 (nghttp2's server API): streams, responses
 *   server_h3.c       HTTP/3 (ngtcp2 + GnuTLS for QUIC, nghttp3): UDP
 *                     sockets on the TLS ports, connections, streams
 *   server_stream.c   what HTTP/2 and HTTP/3 streams share (server_stream.h)
 *   server_request.c  request capture, shared by HTTP/1.1 and HTTP/2
 *   server_tls.c      TLS on connections (OpenSSL, memory BIOs), the
 *                     server's SSL_CTX and the self-signed certificate
 *   server_respond.c  responses: options merged per request into a reply that
 *                     either protocol renders
 *   server_options.c  parsers: durations, Nighthawk JSON, Fortio query strings
 *   server_buf.c      the growable buffer and the arena
 *   server_echo.c     TCP and UDP echo listeners
 *   server_proxy.c    TCP proxies (Fortio's -P)
 *   server_fanout.c   HTTP fan-outs (Fortio's -M): llhttp both ways, one
 *                     kept-alive connection per target per client
 *   server_grpc.c     gRPC calls on HTTP/2: framing, protobuf, the health
 *                     and Fortio ping services
 *   server_sse.c      event streams (--stream-events): HTTP/1.1's queued
 *                     records, HTTP/2's and HTTP/3's stream counters
 *
 * The layers of an HTTP connection, from the socket up: the socket (reads into
 * the worker's buffer, writes with uv_try_write), optionally TLS (ciphertext
 * in, plaintext out, and the reverse), then one protocol: HTTP/1.1 (llhttp) or
 * HTTP/2 (nghttp2), chosen by ALPN on TLS or by the first bytes (the HTTP/2
 * client preface) otherwise, or switched to by an HTTP/1.1 `Upgrade: h2c`.
 *
 * Every worker is one thread with one libuv loop; everything a worker owns
 * (its connections, heap, scratch buffers, counters) is touched by that thread
 * only, except the counters, which other threads read (see nhb__srv_bump()).
 */
#ifndef NHB_SERVER_INTERNAL_H
#define NHB_SERVER_INTERNAL_H

#include <llhttp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <uv.h>
#include <zlib.h>

#include "common/h2_mem.h"
#include "common/internal.h"

/* One shared read buffer per worker: connections keep no input buffer of
 * their own, so an idle connection costs only its struct. */
#define NHB__SRV_READ_BUFFER (64u * 1024u)
/* Stop reading from a client that does not read its responses. */
#define NHB__SRV_MAX_QUEUED_WRITE (4u << 20)
/* Stop parsing pipelined requests when this many rendered bytes or responses
 * wait on one connection (behind a delay, or for the socket). */
#define NHB__SRV_MAX_OUT (8u << 20)
#define NHB__SRV_MAX_PENDING 256
/* Responses gathered into one writev. */
#define NHB__SRV_MAX_BATCH 64
/* Nighthawk's limit for response_body_size. */
#define NHB__SRV_NH_MAX_BODY (4u << 20)
#define NHB__SRV_MAX_CHOICES 16
#define NHB__SRV_MAX_ECHO_HEADERS 64
/* How long a closing connection keeps reading (and discarding) so that the
 * client sees the final response instead of a reset. */
#define NHB__SRV_LINGER_MS 2000
#define NHB__SRV_MAX_LISTENERS (6 * NHB_SERVER_MAX_LISTEN + 1)
/* Descriptors worker 0 keeps for the admin endpoint: that many /stats
 * connections can be open at once when the process is out of descriptors. */
#define NHB__SRV_ADMIN_RESERVE 2
/* Descriptors left free under the default max_connections (the soft
 * RLIMIT_NOFILE minus this): listeners, timers, the loops' own, the admin
 * reserve, and whatever else the process (a client in the same process,
 * Python) opens. */
#define NHB__SRV_FD_HEADROOM 64
/* HTTP/1.1 and HTTP/2: a request head with more header fields than this is
 * refused like one over max_header_bytes (431). */
#define NHB__SRV_MAX_HEADERS 1000
/* Accepts per readiness event on one listener, so that a burst of
 * connections cannot hold the worker's loop. */
#define NHB__SRV_ACCEPT_BATCH 64
/* A listener paused because the process is out of descriptors is polled
 * again after this long. */
#define NHB__SRV_ACCEPT_RETRY_MS 100
/* TLS: responses are encrypted in slices so that at most about this much
 * ciphertext waits in a connection's write BIO; the rest of a large response
 * stays referenced (not copied) until the socket drains. HTTP/2 stops asking
 * nghttp2 for frames at the same mark. */
#define NHB__SRV_WRITE_HIGH (256u * 1024u)
/* Ciphertext is moved from the write BIO to the socket in pieces this big. */
#define NHB__SRV_TLS_OUT (64u * 1024u)
/* HTTP/2 frames are gathered into one write up to this size. */
#define NHB__SRV_H2_STAGE (64u * 1024u)
/* A TCP proxy connection whose destination has not answered the connect
 * this long is closed (counted as a connect error). */
#define NHB__SRV_PROXY_CONNECT_MS 10000
/* An HTTP fan-out target that has not answered a request this long fails
 * it (Fortio's client time-out, 3 s). */
#define NHB__SRV_FANOUT_TIMEOUT_MS 3000
/* The largest response body taken from one fan-out target; a larger one
 * fails that target. */
#define NHB__SRV_FANOUT_MAX_RESPONSE (16u << 20)

typedef struct nhb__srv_worker nhb__srv_worker;
typedef struct nhb__srv_conn nhb__srv_conn;
typedef struct nhb__srv_tls nhb__srv_tls;
typedef struct nhb__srv_h2 nhb__srv_h2;
typedef struct nhb__srv_h2_stream nhb__srv_h2_stream;

/* ---- buffers (server_buf.c) -------------------------------------------- */

/* A growable byte buffer. */
typedef struct nhb__srv_buf {
  char* p;
  size_t len, cap;
} nhb__srv_buf;

int nhb__srv_buf_reserve(nhb__srv_buf* b, size_t extra);
int nhb__srv_buf_append_slow(nhb__srv_buf* b, const void* data, size_t n);
/* Inline: request capture appends a few bytes per header on the fast path. */
static inline int nhb__srv_buf_append(nhb__srv_buf* b, const void* data, size_t n) {
  if (NHB__LIKELY(b->cap - b->len >= n)) {
    if (n) memcpy(b->p + b->len, data, n);
    b->len += n;
    return 0;
  }
  return nhb__srv_buf_append_slow(b, data, n);
}
int nhb__srv_buf_printf(nhb__srv_buf* b, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void nhb__srv_buf_free(nhb__srv_buf* b);

/* A bump allocator over one block reserved up front: what it hands out never
 * moves, so parsers can keep pointers into it. */
typedef struct nhb__srv_arena {
  char* base;
  size_t len, cap;
} nhb__srv_arena;

/* Empties the arena and makes room for `cap` bytes. */
int nhb__srv_arena_reset(nhb__srv_arena* a, size_t cap);
/* 8-byte aligned; NULL when the reservation is exhausted. */
void* nhb__srv_arena_alloc(nhb__srv_arena* a, size_t n);
void nhb__srv_arena_free(nhb__srv_arena* a);

/* ---- options ----------------------------------------------------------- */

typedef struct nhb__srv_str {
  const char* p;
  size_t len;
} nhb__srv_str;

/* A response header; append = 0 replaces earlier ones of the same name. */
typedef struct nhb__srv_header {
  nhb__srv_str name, value;
  int append;
} nhb__srv_header;

enum { NHB__SRV_DELAY_NONE = 0, NHB__SRV_DELAY_STATIC = 1, NHB__SRV_DELAY_LINEAR = 2 };

/* Nighthawk's ResponseOptions. */
typedef struct nhb__srv_nh_opts {
  int has_body_size;
  uint64_t body_size;
  int has_echo_headers, echo_headers;
  int delay_kind;
  uint64_t static_delay_ns, linear_min_ns, linear_factor_ns;
  int has_emit;
  nhb__srv_str emit_header;
  nhb__srv_header* headers;
  size_t nheaders;
} nhb__srv_nh_opts;

/* A Fortio probability list: value i is chosen when a uniform draw in
 * [0, 100) is below cum[i]; above the last, the default applies. */
typedef struct nhb__srv_choices {
  int present;
  int n;
  double cum[NHB__SRV_MAX_CHOICES];
  int64_t val[NHB__SRV_MAX_CHOICES];
} nhb__srv_choices;

/* Fortio's echo parameters (plus nhbench's stall). */
typedef struct nhb__srv_echo_opts {
  nhb__srv_choices delay, status, size, close, gzip;
  int has_stall;
  uint64_t stall_ns;
  int has_headers;
  nhb__srv_header* headers;
  size_t nheaders;
} nhb__srv_echo_opts;

/* "1.5s", "150us", "1m30s" (Go syntax), or a bare number of seconds. */
int nhb__srv_parse_duration(const char* s, size_t len, uint64_t* out_ns);
int nhb__srv_token_ok(const char* s, size_t len);
int nhb__srv_value_ok(const char* s, size_t len);
/* Parses ResponseOptions JSON. Strings are copied into `arena` (reset here).
 * Returns 0, or -1 with a reason in err. */
int nhb__srv_nh_parse(const char* json, size_t len, nhb__srv_nh_opts* out, nhb__srv_arena* arena, char* err,
                      size_t err_len);
/* Parses a query string (without '?'). Delays and stalls above max_delay_ns
 * and sizes above max_size are clamped to them. Returns 0, or -1 with a
 * reason in err. */
int nhb__srv_echo_parse(const char* query, size_t len, uint64_t max_delay_ns, uint64_t max_size,
                        nhb__srv_echo_opts* out, nhb__srv_arena* arena, char* err, size_t err_len);
int64_t nhb__srv_choose(const nhb__srv_choices* c, double r, int64_t dflt);
/* Whether the first `key` of a query string decodes to `value`, as Go's
 * url.Query().Get(key) sees it (pairs that do not decode are skipped). */
int nhb__srv_query_arg_is(const char* query, size_t len, const char* key, const char* value);

/* ---- connections --------------------------------------------------------- */

/* A piece of a response: `len` bytes at `ext` (memory that outlives every
 * connection: the server's pre-rendered responses and body regions) or, when
 * ext is NULL, at offset `off` of the connection's out buffer. */
typedef struct nhb__srv_piece {
  const char* ext;
  size_t off, len;
} nhb__srv_piece;

/* A response waiting in a connection's queue, in request order. */
typedef struct nhb__srv_resp {
  uint64_t deadline_ns; /* 0 = ready now */
  uint8_t npieces;
  uint8_t close;   /* the connection closes after this response */
  uint8_t delayed; /* counted in the worker's `delayed` */
  uint8_t bad;     /* a refused request (400, 413, 431, 505): counts in bad_requests */
  uint16_t status; /* 0 for an interim response (100 Continue), which is not counted */
  /* --stream-events (status 0): bit 0, one event (counts in stream_events);
   * bit 1, the stream's last record (ends it in event_streams_active). */
  uint8_t event;
  nhb__srv_piece p[3];
} nhb__srv_resp;

/* Where a request's head fields live in the connection's capture buffer. */
typedef struct nhb__srv_hdr_pos {
  size_t name_off, name_len, value_off, value_len;
} nhb__srv_hdr_pos;

/* REDIRECT: an https redirector's connection (HTTP/1.1 only, plain); it
 * counts against max_connections but in none of the HTTP counters. */
enum { NHB__SRV_CONN_HTTP = 0, NHB__SRV_CONN_ADMIN = 1, NHB__SRV_CONN_REDIRECT = 2 };
/* The protocol a connection speaks; DETECT until its first bytes (or ALPN)
 * decide. */
enum { NHB__SRV_PROTO_DETECT = 0, NHB__SRV_PROTO_H1 = 1, NHB__SRV_PROTO_H2 = 2, NHB__SRV_PROTO_H3 = 3 };

/* The request being parsed. Every request is captured (URL, header names
 * and values, and the body when it may be echoed) into one buffer that the
 * connection reuses: it grows to the largest request seen and no further. */
typedef struct nhb__srv_req {
  nhb__srv_buf buf;
  size_t url_off, url_len;
  nhb__srv_hdr_pos* hdrs;
  size_t nhdrs, hdrs_cap;
  int state; /* 0 = between fields, 1 = in a name, 2 = in a value */
  size_t head_bytes;
  uint64_t body_bytes;
  size_t body_off, body_len;
  int capture_body;
  int nh_idx; /* index of x-nighthawk-test-server-config in hdrs, or -1 */
  int settings_idx; /* HTTP/1.1: index of HTTP2-Settings in hdrs, or -1 */
  /* is_debug: 0, or NHB__SRV_PATH_*: /debug, or the forward prefix; any
   * nonzero value keeps the request off the pre-rendered fast path. */
  int expect_continue, accept_gzip, has_query, is_debug, upgrade_h2c;
  /* Set when the request is complete, before a response is built. */
  const char* method;
  size_t method_len;
  uint8_t http_major, http_minor;
} nhb__srv_req;

/* What q->is_debug says about the request's path. */
enum {
  NHB__SRV_PATH_DEBUG = 1,         /* /debug: the request echoed as text */
  NHB__SRV_PATH_FORWARD = 2,       /* under forward_prefix: hand the connection over */
  NHB__SRV_PATH_FORWARD_HERE = 3,  /* ... on a connection that cannot be forwarded: 421 */
  NHB__SRV_PATH_FORWARD_BUSY = 4   /* ... pipelined behind another response: 503 */
};

/* server_request.c */
/* Is q's path (its URL up to '?') the server's forward_prefix, inside it,
 * or the prefix without its final '/'? */
int nhb__srv_req_forwarded(const nhb_server* s, const nhb__srv_req* q);
/* Empties q for the next request (its buffers stay). */
void nhb__srv_req_reset(nhb__srv_req* q);
/* A new header field at the end of q's capture buffer, its name and value
 * empty; NULL when out of memory. */
nhb__srv_hdr_pos* nhb__srv_req_header_begin(nhb__srv_req* q);
/* A whole header field (HTTP/2), captured and noted. Returns 0 or
 * NHB_ENOMEM. */
int nhb__srv_req_add_header(nhb__srv_req* q, const void* name, size_t name_len, const void* value, size_t value_len);
/* Notes what the server looks at in header i of q (the Nighthawk config
 * header, Expect, Accept-Encoding, Upgrade, HTTP2-Settings). */
void nhb__srv_req_note_header(nhb__srv_req* q, size_t i);
/* Notes the query string and /debug from the URL q->buf[url_off, url_len). */
void nhb__srv_req_note_url(nhb__srv_req* q, const nhb_server* s);

typedef union nhb__srv_stream {
  uv_handle_t handle;
  uv_stream_t stream;
  uv_tcp_t tcp;
  uv_pipe_t pipe;
} nhb__srv_stream;

struct nhb__srv_conn {
  nhb__srv_stream h;
  uv_shutdown_t shutdown;
  nhb__srv_worker* w;
  nhb__srv_conn *prev, *next; /* the worker's connection list: timeouts and stop */
  llhttp_t parser;
  uint8_t kind;
  uint8_t closing;     /* uv_close() called */
  uint8_t reading;     /* uv_read_start() in effect */
  uint8_t paused;      /* parsing stopped by back-pressure; `stash` holds the rest */
  uint8_t close_after; /* no more requests: close once the queue is written */
  uint8_t finishing;   /* the last response is queued; input is discarded */
  uint8_t lingering;   /* write side shut down, discarding input until EOF */
  uint8_t in_head;     /* a request head is being received */
  uint8_t is_pipe;
  uint8_t eof;         /* the client half-closed; answer what was parsed, then close */
  uint8_t proto;       /* NHB__SRV_PROTO_* */
  uint8_t preface_n;   /* DETECT: bytes of the HTTP/2 client preface seen so far */
  uint8_t in_input;    /* TLS plaintext is being delivered (no re-entry) */
  uint8_t spare_fd;    /* admin: accepted with a reserved descriptor, given back at close */
  uint8_t tail_lf;     /* the input parsed so far ends in a line break (and blanks) */
  const char* parse_base; /* the start of the input being parsed */
  uint16_t error_status; /* 413/431 decided inside a parser callback */
  size_t head_sent;    /* TLS: bytes of the first queued response already written */
  nhb__srv_tls* tls;        /* TLS state, or NULL */
  nhb__srv_h2* h2;          /* HTTP/2 state, or NULL */
  uint64_t last_active_ms, head_start_ms, linger_start_ms;
  size_t heap_idx; /* position in the worker's delay heap, or SIZE_MAX */
  uint64_t wake_ns;
  nhb__srv_req req;
  nhb__srv_resp* q;
  size_t q_head, q_len, q_cap;
  nhb__srv_buf out; /* rendered response bytes referenced by queued pieces */
  char* stash;
  size_t stash_off, stash_len;
};

/* ---- workers and the server ---------------------------------------------- */

/* Single-writer counters: the worker adds with plain loads and stores (no
 * locked instruction), readers on other threads load them relaxed. One per
 * statistic of NHB_SERVER_STAT_MAP (nhb.h), the counts first and the status
 * array last, as before the map existed, so that the counts a request bumps
 * share a cache line. `stalls` here counts per-request stalls only;
 * nhb_server_stats_get() adds the periodic windows. */
#define NHB__SRV_COUNTER(name) _Atomic uint64_t name;
#define NHB__SRV_NO_COUNTER(name)
typedef struct nhb__srv_counters {
  NHB_SERVER_STAT_MAP(NHB__SRV_COUNTER, NHB__SRV_NO_COUNTER)
  _Atomic uint64_t status[NHB_SERVER_STATUS_MAX];
} nhb__srv_counters;
#undef NHB__SRV_COUNTER
#undef NHB__SRV_NO_COUNTER

static inline void nhb__srv_bump(_Atomic uint64_t* c, uint64_t n) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n, memory_order_relaxed);
}

/* In nhb_server_socket_t's order. */
enum { NHB__SRV_L_HTTP = 0, NHB__SRV_L_ADMIN, NHB__SRV_L_TCP_ECHO, NHB__SRV_L_UDP_ECHO, NHB__SRV_L_TCP_PROXY,
       NHB__SRV_L_REDIRECT, NHB__SRV_L_HTTP_FANOUT, NHB__SRV_L_QUIC, NHB__SRV_L_KINDS };

typedef struct nhb__srv_listener {
  union {
    uv_handle_t handle;
    uv_stream_t stream;
    uv_tcp_t tcp;
    uv_pipe_t pipe;
    uv_udp_t udp;
    uv_poll_t poll; /* HTTP and admin listeners: accept() is ours (see server.c) */
  } h;
  int kind;
  int is_pipe;
  int fd;          /* HTTP and admin listeners: the listening socket */
  int paused;      /* out of descriptors: not polled until the retry timer */
  int index;       /* which address of its kind (a TCP proxy's destination) */
} nhb__srv_listener;

typedef struct nhb__srv_echo_conn nhb__srv_echo_conn;
typedef struct nhb__srv_proxy nhb__srv_proxy;
typedef struct nhb__srv_fanout nhb__srv_fanout;
typedef struct nhb__srv_h3w nhb__srv_h3w;

struct nhb__srv_worker {
  nhb_server* server;
  int index;
  int cpu;
  uv_loop_t loop;
  int loop_ready;
  uv_async_t wakeup;
  pthread_t thread;
  int thread_started;
  int stopping;
  nhb__srv_listener lst[NHB__SRV_MAX_LISTENERS];
  int nlst;
  /* Delays: a min-heap of connections keyed by the deadline of the first
   * queued response, and one timerfd armed at the earliest. */
  int timer_fd;
  uv_poll_t timer_poll;
  uint64_t armed_ns; /* what the timerfd is armed for; 0 = nothing pending */
  nhb__srv_conn** heap;
  size_t heap_len, heap_cap;
  uv_timer_t sweep;
  nhb__srv_conn* conns;
  nhb__srv_echo_conn* echo_conns;
  nhb__srv_proxy* proxies;
  nhb__srv_fanout* fanouts;
  /* File descriptors held in reserve (open on /dev/null): `spare_fd` lets an
   * accept() that failed for want of descriptors take the pending
   * connection and close it, so the listener does not stay readable and
   * spin; worker 0's `admin_fds` are given up one at a time so that the
   * admin endpoint can accept when nothing else can. */
  int spare_fd;
  int admin_fds[NHB__SRV_ADMIN_RESERVE];
  uv_timer_t accept_retry; /* re-polls paused listeners */
  int accept_retry_armed;
  char* rbuf;
  uint64_t now_ns;      /* when the input being parsed was read */
  uint64_t last_req_ns; /* the previous request on this worker */
  uint64_t error_body_n; /* pre-rendered 200s since the last error body */
  uint64_t rng;
  size_t delayed; /* queued responses waiting for a deadline */
  /* Per-request parse results; reset by each dynamic request. */
  nhb__srv_arena nh_arena, echo_arena;
  z_stream z;
  int z_ready;
  /* TLS: plaintext gathered into records, and ciphertext on its way out. */
  char* tls_plain;
  char* tls_out;
  /* HTTP/2: frames gathered for one write, stream structs to reuse, the
   * header array built for each response, nghttp2's recycled blocks. */
  char* h2_stage;
  nhb__srv_h2_stream* h2_free;
  size_t h2_nfree;
  void* h2_nv;
  size_t h2_nv_cap;
  nhb__h2_mem h2_mem;
  /* HTTP/3: the worker's QUIC connections and scratch (server_h3.c). */
  nhb__srv_h3w* h3;
  nhb__srv_counters counters __attribute__((aligned(64)));
};

enum { NHB__SRV_MODE_PLAIN = 0, NHB__SRV_MODE_CLOSE = 1, NHB__SRV_MODE_KEEPALIVE = 2 };

struct nhb_server {
  nhb_server_config config;
  char* response_json;
  char* echo_default_params;
  /* The debug echo's path (empty: none), whether it is a subtree, and the
   * environment for ?env=dump as "K=V\n" lines (NULL unless enabled). */
  char* debug_path;
  size_t debug_path_len;
  int debug_subtree;
  char* env_dump;
  size_t env_dump_len;
  char* forward_prefix; /* "" = none */
  size_t forward_prefix_len;
  int* cpus;
  nhb__srv_worker* workers;
  int started, stopped;
  char err[256];
  char hostname[64];
  /* The static response options and echo defaults. */
  nhb__srv_nh_opts nh;
  nhb__srv_arena nh_arena;
  nhb__srv_echo_opts echo_defaults;
  nhb__srv_arena echo_arena;
  int has_echo_defaults;
  /* Every request must take the dynamic path (per-request draws, header
   * echo, time deltas, concurrency-based delays). */
  int static_dynamic;
  /* Pre-rendered responses: [mode][head_only]. */
  char* ok[3][2];
  size_t ok_len[3][2];
  char* err_ok[3][2]; /* the error body of error_body_every, NULL without it */
  size_t err_ok_len[3][2];
  uint64_t ok_delay_ns;
  char* canned_400;
  size_t canned_400_len;
  char* canned_413;
  size_t canned_413_len;
  char* canned_431;
  size_t canned_431_len;
  char* canned_505;
  size_t canned_505_len;
  /* TLS and protocols. */
  void* ssl_ctx;   /* SSL_CTX*, NULL without TLS */
  char* cert_pem;  /* the certificate served (PEM), NULL without TLS */
  void* h2_callbacks; /* nghttp2_session_callbacks* */
  void* h2_option;    /* nghttp2_option*: the flood limits */
  int h1_ok, h2_ok;   /* protocols spoken (config.alpn) */
  void* h3_cred;      /* gnutls_certificate_credentials_t: HTTP/3's certificate, NULL without */
  char alt_svc[160];  /* HTTP/3: the Alt-Svc value advertised, "" without */
  nhb__srv_header* alt_headers; /* the static headers with Alt-Svc first (nh.headers then) */
  unsigned char alpn_wire[32];
  size_t alpn_wire_len;
  /* Body sources: Nighthawk's 'a' bytes and Fortio's pseudo-random payload. */
  struct nhb__srv_sse* sse; /* --stream-events' rendered heads (server_sse.c), NULL when off */
  char* a_region;
  char* payload;
  uint64_t start_ns;
  _Atomic uint64_t stop_ns; /* 0 while running; stops the count of stall windows */
  _Atomic uint64_t stalled_until_ns;
  /* HTTP connections open on all workers, against max_connections. */
  _Atomic uint64_t conns_open;
  uint64_t max_connections; /* resolved at start (the config's 0 = from RLIMIT_NOFILE) */
  /* Bound addresses. */
  struct sockaddr_storage bound[NHB__SRV_L_KINDS][NHB_SERVER_MAX_LISTEN];
  socklen_t bound_len[NHB__SRV_L_KINDS][NHB_SERVER_MAX_LISTEN];
  int nbound[NHB__SRV_L_KINDS];
};

/* server.c */
/* Test seam for the fuzz targets (csrc/fuzz/): sets up worker w of a created,
 * unstarted server on the caller's thread (its loop, buffers, timers), as
 * nhb_server_start() does for each worker before its thread runs, and closes
 * and frees it again (also after a failed open). Neither is used by the
 * server itself. */
int nhb__srv_worker_open(nhb_server* s, nhb__srv_worker* w);
void nhb__srv_worker_shut(nhb__srv_worker* w);
/* Wraps a bound, listening socket in worker w's listener table (polled, and
 * accepted by nhb__srv_accept()); closes fd on failure. Used by the server's
 * own set-up and by the fuzz targets' listener. */
int nhb__srv_add_listener(nhb__srv_worker* w, int fd, int kind, int is_pipe);
/* Takes back one of worker 0's admin descriptors after an admin connection
 * that used one closed. */
void nhb__srv_admin_reserve_refill(nhb__srv_worker* w);
/* Stops polling a listener until the retry timer (out of descriptors). */
void nhb__srv_listener_pause(nhb__srv_worker* w, nhb__srv_listener* l);

/* server_delay.c */
/* Puts c in (or moves it within) the worker's delay heap, to be flushed at
 * wake_ns; closes c if the heap cannot grow. */
void nhb__srv_heap_set(nhb__srv_worker* w, nhb__srv_conn* c, uint64_t wake_ns);
void nhb__srv_heap_remove(nhb__srv_worker* w, nhb__srv_conn* c);
/* The earliest time >= t at which no stall holds responses. */
uint64_t nhb__srv_stall_release(nhb_server* s, uint64_t t);
static inline int nhb__srv_stall_possible(nhb_server* s) {
  return s->config.stall_every_ns != 0 ||
         atomic_load_explicit(&s->stalled_until_ns, memory_order_relaxed) != 0;
}
void nhb__srv_stall_request(nhb__srv_worker* w, uint64_t now, uint64_t duration_ns);
uint64_t nhb__srv_rand(nhb__srv_worker* w);
/* Seeds worker w's generator (different per worker and per run). */
void nhb__srv_rand_seed(nhb__srv_worker* w, int index);
/* The worker's delay timerfd is readable: flushes the connections due. */
void nhb__srv_on_delay_timer(uv_poll_t* handle, int status, int events);
static inline double nhb__srv_rand_pct(nhb__srv_worker* w) {
  return (double)(nhb__srv_rand(w) >> 11) * (100.0 / 9007199254740992.0);
}

/* server_conn.c */
/* A listener is readable: accepts what is pending (server.c calls it). */
void nhb__srv_accept(nhb__srv_listener* l);
void nhb__srv_conn_close(nhb__srv_conn* c);
/* Writes what the connection's protocol has ready (HTTP/1.1 or HTTP/2). */
void nhb__srv_conn_flush(nhb__srv_conn* c);
void nhb__srv_sweep(nhb__srv_worker* w);
/* Input that arrived but was not handed to the protocol yet (the HTTP/1.1
 * stash, or plaintext TLS still holds). */
int nhb__srv_conn_has_input(const nhb__srv_conn* c);
/* Starts or stops reading from the socket. */
void nhb__srv_conn_set_reading(nhb__srv_conn* c, int want);
/* Plaintext from the socket or from TLS, to the connection's protocol. */
void nhb__srv_conn_deliver(nhb__srv_conn* c, const char* p, size_t n);
/* Sends bufs, through TLS if the connection has it. keep[i] != 0 says bufs[i]
 * outlives the connection (the server's shared regions) and need not be
 * copied if the socket cannot take it at once; keep may be NULL. Returns 0,
 * or -1 when the connection was closed. */
int nhb__srv_conn_write(nhb__srv_conn* c, uv_buf_t* bufs, unsigned nbufs, size_t total, const uint8_t* keep);
/* The same on the socket itself, below TLS. */
int nhb__srv_sock_write(nhb__srv_conn* c, uv_buf_t* bufs, unsigned nbufs, size_t total, const uint8_t* keep);
/* Bytes written but not yet taken by the kernel (plus ciphertext not yet
 * handed to the socket). */
size_t nhb__srv_conn_queued(const nhb__srv_conn* c);
/* No more responses: shut the write side down after what is queued, then
 * linger (discarding input) until the client closes. */
void nhb__srv_conn_finish(nhb__srv_conn* c);
/* The client ended its side (EOF, or TLS close_notify). */
void nhb__srv_conn_eof(nhb__srv_conn* c);
/* Starts the protocol a connection will speak (counts it). */
int nhb__srv_conn_set_proto(nhb__srv_conn* c, int proto);

/* server_h1.c */
/* Sets up the connection's llhttp parser. */
void nhb__srv_h1_init(nhb__srv_conn* c);
/* Parses p[0..n) (fresh plaintext), or the stash when p is NULL, answers
 * what it can, and writes what is ready. */
void nhb__srv_h1_recv(nhb__srv_conn* c, const char* p, size_t n);
/* Writes the ready responses at the head of the queue (in request order). */
void nhb__srv_h1_flush(nhb__srv_conn* c);
/* The socket drained: parsing paused for back-pressure goes on. */
void nhb__srv_h1_resume(nhb__srv_conn* c);
/* HTTP/1.1 input on a server that speaks only HTTP/2: 505, then close. */
void nhb__srv_h1_refuse(nhb__srv_conn* c);
/* Appends a response to the queue; returns 0 or NHB_ENOMEM. */
int nhb__srv_h1_push(nhb__srv_conn* c, const nhb__srv_resp* r);
/* Drops every queued response (the connection ends), with the accounts
 * they hold: delayed, event_streams_active. */
void nhb__srv_h1_drop(nhb__srv_conn* c);

/* server_respond.c */

/* The headers of a response: the server's own (Server: nhbench), then three
 * lists from the options, each header with append = 0 replacing earlier ones
 * of its name, then the extras (content type, gzip, the time delta), which
 * nothing replaces. */
typedef struct nhb__srv_headers {
  const nhb__srv_header* list[3];
  size_t n[3];
  const nhb__srv_header* extra;
  size_t nextra;
} nhb__srv_headers;

/* Calls emit() for every header that goes out, in order. Stops at (and
 * returns) the first negative return. */
int nhb__srv_headers_emit(const nhb__srv_headers* h, int (*emit)(void* ctx, const nhb__srv_header* hd), void* ctx);

/* A response, independent of the protocol that carries it. Its bytes live in
 * the `out` buffer it was built into (pieces with ext == NULL are offsets in
 * it) or in the server's shared regions; header names and values point into
 * the options and into extra_buf, so a reply must be rendered before the
 * worker builds the next one. */
typedef struct nhb__srv_reply {
  unsigned status;
  int close;   /* the connection ends after this response */
  int no_body; /* 204, 304: neither a body nor a Content-Length */
  uint64_t delay_ns;
  nhb__srv_headers h;
  nhb__srv_header extra[4];
  char extra_buf[32];
  nhb__srv_piece body[2];
  int nbody;
  size_t body_len;
} nhb__srv_reply;

/* Builds the response to the complete request q (its method and version
 * set), appending dynamic bytes to out. Returns 0 or NHB_ENOMEM. */
int nhb__srv_reply_build(nhb__srv_conn* c, nhb__srv_req* q, nhb__srv_buf* out, uint64_t now, nhb__srv_reply* r);
/* A text response (errors): body "<prefix><text>", Content-Type text/plain. */
int nhb__srv_reply_text(nhb__srv_reply* r, nhb__srv_buf* out, unsigned status, const char* prefix, const char* text);
/* HTTP/1.1: renders the response to the request just parsed and queues it. */
int nhb__srv_respond(nhb__srv_conn* c, int mode, int head_only, uint64_t now);
int nhb__srv_respond_admin(nhb__srv_conn* c, int mode, int head_only);
/* The https redirector's answer to the request just parsed. */
int nhb__srv_respond_redirect(nhb__srv_conn* c, int mode, int head_only);
/* Renders an HTTP/1.1 head; content_length < 0 = none. */
int nhb__srv_render_head(nhb__srv_buf* b, unsigned status, int64_t content_length, int mode, const nhb__srv_headers* h);
int nhb__srv_render_canned(nhb_server* s);
void nhb__srv_render_stats_json(const nhb_server* s, nhb__srv_buf* b);

/* server_sse.c: event streams (stream_events). */
/* Checks the options and renders the heads; nothing when stream_events is 0. */
int nhb__srv_sse_init(nhb_server* s, char* err, size_t err_len);
void nhb__srv_sse_free(nhb_server* s);
/* HTTP/1.1: queues the event stream that answers the request just parsed. */
int nhb__srv_sse_respond(nhb__srv_conn* c, int mode, int head_only, uint64_t now);

/* server_tls.c */
/* Builds the SSL_CTX from the config (loading or generating the certificate). */
int nhb__srv_tls_init(nhb_server* s, char* err, size_t err_len);
void nhb__srv_tls_free(nhb_server* s);
/* Per-connection TLS state for an accepted connection; returns 0 or NHB_ENOMEM. */
int nhb__srv_tls_accept(nhb__srv_conn* c);
/* Ciphertext from the socket: handshake, then plaintext to the protocol. */
void nhb__srv_tls_on_read(nhb__srv_conn* c, const char* p, size_t n);
/* Delivers plaintext still buffered (after back-pressure let go). */
void nhb__srv_tls_pull(nhb__srv_conn* c);
/* Is there input not yet delivered? */
int nhb__srv_tls_has_input(const nhb__srv_conn* c);
/* Encrypts bufs into the write BIO and moves what it can to the socket.
 * Returns 0 or -1 (the connection was closed). */
int nhb__srv_tls_write(nhb__srv_conn* c, const uv_buf_t* bufs, unsigned nbufs);
/* Moves ciphertext from the write BIO to the socket: while the socket takes
 * it at once, or all of it (queued behind what is pending) when `all`. */
int nhb__srv_tls_drain(nhb__srv_conn* c, int all);
size_t nhb__srv_tls_pending(const nhb__srv_conn* c);
/* Queues close_notify. */
void nhb__srv_tls_shutdown(nhb__srv_conn* c);
int nhb__srv_tls_handshake_done(const nhb__srv_conn* c);
void nhb__srv_tls_conn_free(nhb__srv_conn* c);

/* server_h2.c */
int nhb__srv_h2_init(nhb_server* s);
void nhb__srv_h2_free(nhb_server* s);
/* An HTTP/2 session for the connection (prior knowledge, ALPN, upgrade). */
int nhb__srv_h2_start(nhb__srv_conn* c);
void nhb__srv_h2_recv(nhb__srv_conn* c, const char* p, size_t n);
/* Writes what nghttp2 has to send, up to NHB__SRV_WRITE_HIGH queued. */
void nhb__srv_h2_send(nhb__srv_conn* c);
/* Submits the responses whose deadline has come, then sends. */
void nhb__srv_h2_flush(nhb__srv_conn* c);
/* HTTP/1.1 `Upgrade: h2c` for the request just parsed into c->req: 101, then
 * the response on stream 1 over HTTP/2. Returns 0, 1 when the upgrade was
 * declined (a malformed HTTP2-Settings: answer over HTTP/1.1), or a negative
 * code. */
int nhb__srv_h2_upgrade(nhb__srv_conn* c, int head_only);
/* Idle: GOAWAY and close once it is out. */
void nhb__srv_h2_goaway(nhb__srv_conn* c);
int nhb__srv_h2_busy(const nhb__srv_conn* c);
/* Responses waiting for a deadline (for the worker's `delayed`). */
size_t nhb__srv_h2_waiting(const nhb__srv_conn* c);
void nhb__srv_h2_conn_free(nhb__srv_conn* c);
void nhb__srv_h2_worker_free(nhb__srv_worker* w);

/* server_h3.c */
/* Loads the certificate and key into GnuTLS credentials (config.http3). */
int nhb__srv_h3_init(nhb_server* s, char* err, size_t err_len);
void nhb__srv_h3_free(nhb_server* s);
/* Starts serving QUIC on a bound UDP listener of worker w. */
int nhb__srv_h3_listen(nhb__srv_worker* w, nhb__srv_listener* l);
/* The delay timer: submits the streams whose deadline came, then sends. */
void nhb__srv_h3_flush(nhb__srv_conn* c);
/* Ends a QUIC connection (the delay heap could not take it). */
void nhb__srv_h3_conn_close(nhb__srv_conn* c);
/* The QUIC peer's address as text, for /debug. */
void nhb__srv_h3_peer(const nhb__srv_conn* c, char* out, size_t out_len);
/* Stop: CONNECTION_CLOSE to every client, then every handle closed. */
void nhb__srv_h3_close_all(nhb__srv_worker* w);
void nhb__srv_h3_worker_free(nhb__srv_worker* w);
/* Test seam for the fuzz target: an HTTP/3 server connection of worker w
 * without QUIC under it (nghttp3 alone, its unidirectional streams bound to
 * ids 3, 7 and 11), fed p[0, split) then p[split, n) with FIN as the client's
 * request stream 0; delayed responses are released at once and everything
 * nghttp3 writes is taken. *responded: the responses written (0 or 1).
 * Returns 0 (also when nghttp3 refused the input) or NHB_ENOMEM. */
int nhb__srv_h3_feed(nhb__srv_worker* w, const uint8_t* p, size_t n, size_t split, size_t* responded);

/* server_grpc.c */
/* The largest gRPC request message accepted: gRPC's own default receive
 * limit (4 MiB); a larger one is answered RESOURCE_EXHAUSTED as soon as its
 * 5-byte prefix has arrived. */
#define NHB__SRV_GRPC_MAX_MSG (4u << 20)
/* gRPC status codes the server answers with. */
enum {
  NHB__SRV_GRPC_OK = 0,
  NHB__SRV_GRPC_DEADLINE_EXCEEDED = 4,
  NHB__SRV_GRPC_NOT_FOUND = 5,
  NHB__SRV_GRPC_RESOURCE_EXHAUSTED = 8,
  NHB__SRV_GRPC_UNIMPLEMENTED = 12,
  NHB__SRV_GRPC_INTERNAL = 13
};

/* What an HTTP/2 request's head says about gRPC; zero for any other
 * request. */
typedef struct nhb__srv_grpc_head {
  uint8_t content_type; /* application/grpc, application/grpc+proto, ...;charset */
  uint8_t encoded;      /* grpc-encoding names a compression (not identity) */
  uint8_t bad_timeout;  /* grpc-timeout does not parse */
  uint64_t timeout_ns;  /* grpc-timeout; 0 = none */
} nhb__srv_grpc_head;

/* The answer to one gRPC call: its status, the grpc-message text (percent-
 * encoded, in out at msg_off, empty when msg_len is 0), the framed response
 * message (in out at body_off; only with status OK) and the service's delay. */
typedef struct nhb__srv_grpc_answer {
  unsigned code;
  size_t msg_off, msg_len;
  size_t body_off, body_len;
  uint64_t delay_ns;
} nhb__srv_grpc_answer;

/* Notes a regular request header field (content-type, grpc-timeout,
 * grpc-encoding) in g. */
void nhb__srv_grpc_note_header(nhb__srv_grpc_head* g, const uint8_t* name, size_t name_len, const uint8_t* value,
                               size_t value_len);
/* Called while the body arrives: nonzero when the captured prefix already
 * decides the answer (a message over NHB__SRV_GRPC_MAX_MSG, a compressed
 * message the server cannot read), which is then answered at once. */
int nhb__srv_grpc_early(const nhb__srv_grpc_head* g, const char* body, size_t len);
/* Answers the call to `path` whose body is body[0..len) of body_total bytes
 * received (the capture stops at NHB__SRV_GRPC_MAX_MSG + 5). Appends the
 * grpc-message and the framed response message to out. Returns 0 or
 * NHB_ENOMEM. */
int nhb__srv_grpc_answer_call(nhb__srv_worker* w, const nhb__srv_grpc_head* g, const char* path, size_t path_len,
                              const char* body, size_t len, uint64_t body_total, nhb__srv_buf* out,
                              nhb__srv_grpc_answer* a);

/* server_echo.c */
/* Starts a UDP echo listener. */
int nhb__srv_echo_start(nhb__srv_worker* w, nhb__srv_listener* l);
/* Starts a TCP echo connection on an accepted socket (counted in conns_open). */
void nhb__srv_echo_open(nhb__srv_worker* w, int fd);
void nhb__srv_echo_close_all(nhb__srv_worker* w);

/* server_proxy.c */
/* Starts proxying an accepted socket to TCP proxy `index`'s destination
 * (two slots of conns_open already taken; given back when it closes). */
void nhb__srv_proxy_open(nhb__srv_worker* w, int fd, int index);
/* Closes the proxy connections whose destination did not answer in time,
 * and those whose bytes waited idle_timeout on a peer that takes none. */
void nhb__srv_proxy_sweep(nhb__srv_worker* w);
void nhb__srv_proxy_close_all(nhb__srv_worker* w);
/* The HTTP/1.x request whose head c just parsed is under forward_prefix
 * (and nothing is queued on c): hands c's socket to a pipe to forward_dest,
 * which is sent a PROXY protocol v1 line naming the client, the request head
 * (rebuilt from the capture) and rest[0..rest_len) (what followed the head
 * in the input). Closes c in any case: without a connection slot or memory
 * the client's connection is closed, as max_connections refuses one. */
void nhb__srv_forward_open(nhb__srv_conn* c, const char* rest, size_t rest_len);

/* server_fanout.c */
/* Starts an HTTP fan-out connection on an accepted socket for fan-out
 * `index` (1 + its targets slots of conns_open already taken; given back
 * when it closes). */
void nhb__srv_fanout_open(nhb__srv_worker* w, int fd, int index);
void nhb__srv_fanout_close_all(nhb__srv_worker* w);
/* Test seam for the fuzz target: feeds p[0, split) then p[split, n) and EOF
 * to a fresh llhttp response parser set up as a fan-out target's (callbacks
 * and body cap). Returns the status (> 0) of a complete response, 0 when
 * more input was needed, -1 for a response the fan-out refuses, -2 when a
 * complete response broke an invariant (a status outside 100-999, a body
 * past the cap). */
int nhb__srv_fanout_parse_response(const char* p, size_t n, size_t split, int head_request);
/* What a non-mirroring fan-out sends, read from the request URI's query as
 * Fortio reads its form (Go's url.ParseQuery and Request.FormValue): the
 * first "payload" is the body, the method is the first "X", else POST when
 * there is a payload or an "H" value names a non-empty Content-Type, else
 * GET. The decoded payload and method go in `scratch` (reset here); the
 * pointers stay valid until it is used again. */
typedef struct nhb__srv_fanout_form {
  const char* payload;
  size_t payload_len;
  const char* method;
  size_t method_len;
  int method_ok; /* a token, as Go's net/http requires of a method */
} nhb__srv_fanout_form;
/* Returns 0, or NHB_ENOMEM. Also the fuzz target's seam. */
int nhb__srv_fanout_read_form(const char* uri, size_t n, nhb__srv_buf* scratch, nhb__srv_fanout_form* out);

/* server_respond.c */
const char* nhb__srv_reason(unsigned status);

#endif /* NHB_SERVER_INTERNAL_H */
