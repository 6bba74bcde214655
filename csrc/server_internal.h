/* server_internal.h: what the test server's translation units share.
 *
 *   server.c          life cycle, workers, listeners, the delay heap, stalls
 *   server_conn.c     HTTP/1.1 connections: parsing, the response queue, writes
 *   server_respond.c  dynamic responses: options merged per request, rendering
 *   server_options.c  parsers: durations, Nighthawk JSON, Fortio query strings
 *   server_echo.c     TCP and UDP echo listeners
 *
 * Every worker is one thread with one libuv loop; everything a worker owns
 * (its connections, heap, scratch buffers, counters) is touched by that thread
 * only, except the counters, which other threads read (see srv_bump()).
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

#include "internal.h"

/* One shared read buffer per worker: connections keep no input buffer of
 * their own, so an idle connection costs only its struct. */
#define SRV_READ_BUFFER (64u * 1024u)
/* Stop reading from a client that does not read its responses. */
#define SRV_MAX_QUEUED_WRITE (4u << 20)
/* Stop parsing pipelined requests when this many rendered bytes or responses
 * wait on one connection (behind a delay, or for the socket). */
#define SRV_MAX_OUT (8u << 20)
#define SRV_MAX_PENDING 256
/* Responses gathered into one writev. */
#define SRV_MAX_BATCH 64
/* Nighthawk's limit for response_body_size. */
#define SRV_NH_MAX_BODY (4u << 20)
#define SRV_MAX_CHOICES 16
#define SRV_MAX_ECHO_HEADERS 64
/* How long a closing connection keeps reading (and discarding) so that the
 * client sees the final response instead of a reset. */
#define SRV_LINGER_MS 2000
#define SRV_MAX_LISTENERS (3 * NHB_SERVER_MAX_LISTEN + 1)

typedef struct srv_worker srv_worker;
typedef struct srv_conn srv_conn;

/* ---- buffers ----------------------------------------------------------- */

/* A growable byte buffer. */
typedef struct srv_buf {
  char* p;
  size_t len, cap;
} srv_buf;

int nhb__srv_buf_reserve(srv_buf* b, size_t extra);
int nhb__srv_buf_append_slow(srv_buf* b, const void* data, size_t n);
/* Inline: request capture appends a few bytes per header on the fast path. */
static inline int nhb__srv_buf_append(srv_buf* b, const void* data, size_t n) {
  if (NHB__LIKELY(b->cap - b->len >= n)) {
    if (n) memcpy(b->p + b->len, data, n);
    b->len += n;
    return 0;
  }
  return nhb__srv_buf_append_slow(b, data, n);
}
int nhb__srv_buf_printf(srv_buf* b, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void nhb__srv_buf_free(srv_buf* b);

/* A bump allocator over one block reserved up front: what it hands out never
 * moves, so parsers can keep pointers into it. */
typedef struct srv_arena {
  char* base;
  size_t len, cap;
} srv_arena;

/* Empties the arena and makes room for `cap` bytes. */
int nhb__srv_arena_reset(srv_arena* a, size_t cap);
/* 8-byte aligned; NULL when the reservation is exhausted. */
void* nhb__srv_arena_alloc(srv_arena* a, size_t n);
void nhb__srv_arena_free(srv_arena* a);

/* ---- options ----------------------------------------------------------- */

typedef struct srv_str {
  const char* p;
  size_t len;
} srv_str;

/* A response header; append = 0 replaces earlier ones of the same name. */
typedef struct srv_header {
  srv_str name, value;
  int append;
} srv_header;

enum { SRV_DELAY_NONE = 0, SRV_DELAY_STATIC = 1, SRV_DELAY_LINEAR = 2 };

/* Nighthawk's ResponseOptions. */
typedef struct srv_nh_opts {
  int has_body_size;
  uint64_t body_size;
  int has_echo_headers, echo_headers;
  int delay_kind;
  uint64_t static_delay_ns, linear_min_ns, linear_factor_ns;
  int has_emit;
  srv_str emit_header;
  srv_header* headers;
  size_t nheaders;
} srv_nh_opts;

/* A Fortio probability list: value i is chosen when a uniform draw in
 * [0, 100) is below cum[i]; above the last, the default applies. */
typedef struct srv_choices {
  int present;
  int n;
  double cum[SRV_MAX_CHOICES];
  int64_t val[SRV_MAX_CHOICES];
} srv_choices;

/* Fortio's echo parameters (plus nhbench's stall). */
typedef struct srv_echo_opts {
  srv_choices delay, status, size, close, gzip;
  int has_stall;
  uint64_t stall_ns;
  int has_headers;
  srv_header* headers;
  size_t nheaders;
} srv_echo_opts;

/* "1.5s", "150us", "1m30s" (Go syntax), or a bare number of seconds. */
int nhb__srv_parse_duration(const char* s, size_t len, uint64_t* out_ns);
int nhb__srv_token_ok(const char* s, size_t len);
int nhb__srv_value_ok(const char* s, size_t len);
/* Parses ResponseOptions JSON. Strings are copied into `arena` (reset here).
 * Returns 0, or -1 with a reason in err. */
int nhb__srv_nh_parse(const char* json, size_t len, srv_nh_opts* out, srv_arena* arena, char* err,
                      size_t err_len);
/* Parses a query string (without '?'). Delays and stalls above max_delay_ns
 * and sizes above max_size are clamped to them. Returns 0, or -1 with a
 * reason in err. */
int nhb__srv_echo_parse(const char* query, size_t len, uint64_t max_delay_ns, uint64_t max_size,
                        srv_echo_opts* out, srv_arena* arena, char* err, size_t err_len);
int64_t nhb__srv_choose(const srv_choices* c, double r, int64_t dflt);

/* ---- connections --------------------------------------------------------- */

/* A piece of a response: `len` bytes at `ext` (memory that outlives every
 * connection: the server's pre-rendered responses and body regions) or, when
 * ext is NULL, at offset `off` of the connection's out buffer. */
typedef struct srv_piece {
  const char* ext;
  size_t off, len;
} srv_piece;

/* A response waiting in a connection's queue, in request order. */
typedef struct srv_resp {
  uint64_t deadline_ns; /* 0 = ready now */
  uint8_t npieces;
  uint8_t close;   /* the connection closes after this response */
  uint8_t delayed; /* counted in the worker's `delayed` */
  uint16_t status;
  srv_piece p[3];
} srv_resp;

/* Where a request's head fields live in the connection's capture buffer. */
typedef struct srv_hdr_pos {
  size_t name_off, name_len, value_off, value_len;
} srv_hdr_pos;

enum { SRV_CONN_HTTP = 0, SRV_CONN_ADMIN = 1 };

/* The request being parsed. Every request is captured (URL, header names
 * and values, and the body when it may be echoed) into one buffer that the
 * connection reuses: it grows to the largest request seen and no further. */
typedef struct srv_req {
  srv_buf buf;
  size_t url_off, url_len;
  srv_hdr_pos* hdrs;
  size_t nhdrs, hdrs_cap;
  int state; /* 0 = between fields, 1 = in a name, 2 = in a value */
  size_t head_bytes;
  uint64_t body_bytes;
  size_t body_off, body_len;
  int capture_body;
  int nh_idx; /* index of x-nighthawk-test-server-config in hdrs, or -1 */
  int expect_continue, accept_gzip, has_query, is_debug;
} srv_req;

typedef union srv_stream {
  uv_handle_t handle;
  uv_stream_t stream;
  uv_tcp_t tcp;
  uv_pipe_t pipe;
} srv_stream;

struct srv_conn {
  srv_stream h;
  uv_shutdown_t shutdown;
  srv_worker* w;
  srv_conn *prev, *next; /* the worker's connection list: timeouts and stop */
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
  uint16_t error_status; /* 413/431 decided inside a parser callback */
  uint64_t last_active_ms, head_start_ms, linger_start_ms;
  size_t heap_idx; /* position in the worker's delay heap, or SIZE_MAX */
  uint64_t wake_ns;
  srv_req req;
  srv_resp* q;
  size_t q_head, q_len, q_cap;
  srv_buf out; /* rendered response bytes referenced by queued pieces */
  char* stash;
  size_t stash_off, stash_len;
};

/* ---- workers and the server ---------------------------------------------- */

/* Single-writer counters: the worker adds with plain loads and stores (no
 * locked instruction), readers on other threads load them relaxed. */
typedef struct srv_counters {
  _Atomic uint64_t requests, connections_total, connections_active, rx_bytes, tx_bytes, bad_requests;
  _Atomic uint64_t stall_requests, tcp_echo_bytes, udp_echo_packets;
  _Atomic uint64_t status[NHB_SERVER_STATUS_MAX];
} srv_counters;

static inline void srv_bump(_Atomic uint64_t* c, uint64_t n) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n, memory_order_relaxed);
}

enum { SRV_L_HTTP = 0, SRV_L_ADMIN, SRV_L_TCP_ECHO, SRV_L_UDP_ECHO };

typedef struct srv_listener {
  union {
    uv_handle_t handle;
    uv_stream_t stream;
    uv_tcp_t tcp;
    uv_pipe_t pipe;
    uv_udp_t udp;
  } h;
  int kind;
  int is_pipe;
} srv_listener;

typedef struct srv_echo_conn srv_echo_conn;

struct srv_worker {
  nhb_server* server;
  int index;
  int cpu;
  uv_loop_t loop;
  int loop_ready;
  uv_async_t wakeup;
  pthread_t thread;
  int thread_started;
  int stopping;
  srv_listener lst[SRV_MAX_LISTENERS];
  int nlst;
  /* Delays: a min-heap of connections keyed by the deadline of the first
   * queued response, and one timerfd armed at the earliest. */
  int timer_fd;
  uv_poll_t timer_poll;
  uint64_t armed_ns; /* what the timerfd is armed for; 0 = nothing pending */
  srv_conn** heap;
  size_t heap_len, heap_cap;
  uv_timer_t sweep;
  srv_conn* conns;
  srv_echo_conn* echo_conns;
  char* rbuf;
  uint64_t now_ns;      /* when the input being parsed was read */
  uint64_t last_req_ns; /* the previous request on this worker */
  uint64_t rng;
  size_t delayed; /* queued responses waiting for a deadline */
  /* Per-request parse results; reset by each dynamic request. */
  srv_arena nh_arena, echo_arena;
  z_stream z;
  int z_ready;
  srv_counters counters __attribute__((aligned(64)));
};

enum { SRV_MODE_PLAIN = 0, SRV_MODE_CLOSE = 1, SRV_MODE_KEEPALIVE = 2 };

struct nhb_server {
  nhb_server_config config;
  char* response_json;
  char* echo_default_params;
  int* cpus;
  srv_worker* workers;
  int started, stopped;
  char err[256];
  char hostname[64];
  /* The static response options and echo defaults. */
  srv_nh_opts nh;
  srv_arena nh_arena;
  srv_echo_opts echo_defaults;
  srv_arena echo_arena;
  int has_echo_defaults;
  /* Every request must take the dynamic path (per-request draws, header
   * echo, time deltas, concurrency-based delays). */
  int static_dynamic;
  /* Pre-rendered responses: [mode][head_only]. */
  char* ok[3][2];
  size_t ok_len[3][2];
  uint64_t ok_delay_ns;
  char* canned_400;
  size_t canned_400_len;
  char* canned_413;
  size_t canned_413_len;
  char* canned_431;
  size_t canned_431_len;
  /* Body sources: Nighthawk's 'a' bytes and Fortio's pseudo-random payload. */
  char* a_region;
  char* payload;
  uint64_t start_ns;
  _Atomic uint64_t stop_ns; /* 0 while running; stops the count of stall windows */
  _Atomic uint64_t stalled_until_ns;
  /* Bound addresses. */
  struct sockaddr_storage bound[4][NHB_SERVER_MAX_LISTEN];
  socklen_t bound_len[4][NHB_SERVER_MAX_LISTEN];
  int nbound[4];
};

/* server.c */
void nhb__srv_heap_set(srv_worker* w, srv_conn* c, uint64_t wake_ns);
void nhb__srv_heap_remove(srv_worker* w, srv_conn* c);
/* The earliest time >= t at which no stall holds responses. */
uint64_t nhb__srv_stall_release(nhb_server* s, uint64_t t);
static inline int srv_stall_possible(nhb_server* s) {
  return s->config.stall_every_ns != 0 ||
         atomic_load_explicit(&s->stalled_until_ns, memory_order_relaxed) != 0;
}
void nhb__srv_stall_request(srv_worker* w, uint64_t now, uint64_t duration_ns);
uint64_t nhb__srv_rand(srv_worker* w);
static inline double srv_rand_pct(srv_worker* w) {
  return (double)(nhb__srv_rand(w) >> 11) * (100.0 / 9007199254740992.0);
}

/* server_conn.c */
void nhb__srv_on_connection(uv_stream_t* listener, int status);
void nhb__srv_conn_close(srv_conn* c);
void nhb__srv_conn_flush(srv_conn* c);
/* Appends a response to the queue; returns 0 or NHB_ENOMEM. */
int nhb__srv_conn_push(srv_conn* c, const srv_resp* r);
void nhb__srv_sweep(srv_worker* w);

/* server_respond.c */
/* Renders the response to the request just parsed and queues it. */
int nhb__srv_respond(srv_conn* c, int mode, int head_only, uint64_t now);
int nhb__srv_respond_admin(srv_conn* c, int mode, int head_only);
/* Renders a head; content_length < 0 = none. Headers are applied in order,
 * append = 0 replacing earlier ones of the same name. */
int nhb__srv_render_head(srv_buf* b, unsigned status, int64_t content_length, int mode,
                         const srv_header* h1, size_t n1, const srv_header* h2, size_t n2,
                         const srv_header* h3, size_t n3, const char* extra);
int nhb__srv_render_canned(nhb_server* s);
void nhb__srv_render_stats_json(const nhb_server* s, srv_buf* b);

/* server_echo.c */
int nhb__srv_echo_start(srv_worker* w, srv_listener* l);
void nhb__srv_echo_close_all(srv_worker* w);

#endif /* NHB_SERVER_INTERNAL_H */
