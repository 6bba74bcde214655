/* client.h: the load client's internal structures.
 *
 * One worker is one OS thread with its own uv_loop, pinned to one CPU. It owns
 * its connections, its pending-request queue, its counters and histograms;
 * nothing on the hot path is shared with other workers. The run merges the
 * workers' statistics after they have all stopped.
 *
 * The layers, from the bottom up:
 *   transport (transport_tcp.c, transport_tls.c) moves bytes,
 *   session   (session_h1.c, session_h2.c) turns requests and responses into bytes,
 *   pool      (pool.c) hands released requests to connections,
 *   sequencer (sequencer.c) releases requests on the schedule,
 *   client    (client.c) runs workers, evaluates predicates, merges statistics.
 */
#ifndef NHB_CLIENT_H
#define NHB_CLIENT_H

#include <llhttp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <uv.h>

#include "common/h2_mem.h"
#include "common/internal.h"

typedef struct nhb__worker nhb__worker;
typedef struct nhb__conn nhb__conn;
typedef struct nhb__tls nhb__tls;
typedef struct nhb__h2 nhb__h2;
typedef struct nhb__target_pool nhb__target_pool;
typedef struct nhb__grp_worker nhb__grp_worker;
typedef struct nhb__grp_h1 nhb__grp_h1;

/* Response observation (observe.c): what one response's headers
 * said about the latency response header (--latency-response-header-name)
 * so far. Names and values may arrive in pieces (HTTP/1.1 split across
 * reads), so matching and parsing are incremental and never copy. Lives in
 * the connection (HTTP/1.1: one response at a time) or the slot (HTTP/2). */
typedef struct nhb__olat {
  uint64_t value; /* the digits of the current value so far */
  uint32_t pos;   /* name bytes matched so far; NHB__OLAT_NOMATCH once it differs */
  uint8_t phase;  /* where the value parser is (observe.c) */
  uint8_t count;  /* headers of that name in this response, saturating at 2 */
  uint8_t bad;    /* one of them was not a non-negative integer */
  uint8_t neg;    /* the current value had a minus sign */
  uint8_t active; /* HTTP/2: this stream's response header block is being read */
} nhb__olat;

#define NHB__OLAT_NOMATCH UINT32_MAX
/* The longest header name accepted (nhbench.options holds users to the same). */
#define NHB__OLAT_NAME_MAX 256

/* Limits on what a server may send in a response's header blocks
 * (docs/reliability.md, "Client limits"). A hostile or broken origin could
 * otherwise stream header lines, an HPACK bomb or interim responses for ever:
 * the request would end only at --request-timeout, or be counted as a 2xx
 * after decoding megabytes per response. A block over a limit is a protocol
 * error at once (upstream_cx_protocol_error).
 *
 * One header block (the status line and fields of a response, each interim
 * 1xx response, the trailers) may hold NHB__RESP_HEADER_BYTES bytes and,
 * in HTTP/1.1, NHB__RESP_HEADER_FIELDS fields. 96 KiB is above what servers and proxies
 * send or pass on (Envoy refuses response heads over 60 KiB and 100 fields
 * by default, nginx's proxy buffers hold 4 or 8 KiB) and well under curl's
 * 300 KiB, so no real response is refused; 1000 fields is the test server's
 * own limit on a request. HTTP/1.1 counts the status line and each field
 * line as sent (name, value and 4 bytes of ": " and CRLF); HTTP/2 and
 * HTTP/3 count each field as name + value + 32, the measure of
 * SETTINGS_MAX_HEADER_LIST_SIZE and SETTINGS_MAX_FIELD_SECTION_SIZE, which
 * the client advertises with this value; the 32 bytes per field bound a
 * block to 3072 fields, so these need no count of their own (one compare
 * per field). HTTP/1.1 also bounds the raw bytes
 * of a head, blanks and line ends that llhttp skips without a callback
 * included, at twice the limit.
 *
 * At most NHB__RESP_INTERIM interim (1xx) responses may precede a response:
 * 100 Continue and 103 Early Hints come once or twice.
 *
 * An HTTP/1.1 chunk size or Content-Length above NHB__BODY_MAX (2^63 - 1,
 * the largest size curl and nginx accept: a signed 64-bit offset) is a
 * protocol error: llhttp takes up to 2^64 - 1, and the client would wait for
 * 18 EB. */
#define NHB__RESP_HEADER_BYTES (96u * 1024u)
#define NHB__RESP_HEADER_FIELDS 1000u
#define NHB__RESP_INTERIM 100u
#define NHB__BODY_MAX ((uint64_t)INT64_MAX)

/* HTTP/1.1 response-head replay (session_h1.c): at most this many header
 * values of the kept head may differ from one response to the next. */
#define NHB__H1_VARY_MAX 8u

/* One request's timestamps, all CLOCK_MONOTONIC ns. */
typedef struct nhb__request {
  uint64_t scheduled_ns; /* when the schedule wanted it released */
  uint64_t release_ns;   /* when the sequencer actually released it */
  uint64_t send_ns;      /* when it was handed to a connection */
  /* Which request of the run's request set this is: an index into
   * run->config.specs (0 when the run has a single request). Chosen by the
   * sequencer at release time (nhb__next_spec), so that the schedule, the
   * pool (its target) and the session (its bytes) all see the same one. */
  uint32_t spec;
} nhb__request;

/* ---- the request set (request.c) ----------------------------------------
 *
 * A template is a string split at run creation into literal runs and
 * placeholders, so that expanding it for a request is a walk over a few
 * segments into a buffer sized for its longest expansion: no parsing and no
 * allocation per request. */
typedef enum {
  NHB__SEG_LIT = 0, /* `len` bytes of the source at offset `arg` */
  NHB__SEG_SEQ,     /* {seq}: the request's sequence number */
  NHB__SEG_UUID,    /* {uuid}: a random version 4 UUID */
  NHB__SEG_RAND,    /* {rand:N}: a random number below N (`arg`) */
  NHB__SEG_WORKER,  /* {worker}: the worker's index */
  NHB__SEG_CLEN     /* {content-length}: the expanded body's length */
} nhb__seg_kind;

typedef struct nhb__seg {
  uint32_t kind;
  uint32_t len; /* literal: its length; placeholder: its longest expansion */
  uint64_t arg;
} nhb__seg;

typedef struct nhb__tmpl {
  const char* src;
  nhb__seg* segs;    /* NULL when the string has no placeholder */
  uint32_t nsegs;
  uint32_t body_seg; /* HTTP/1 request: segments from here on are the body */
  size_t head_max;   /* longest expansion of the segments before body_seg */
  size_t body_max;   /* ... and of the rest */
} nhb__tmpl;

/* What a template's placeholders expand to for one request. */
typedef struct nhb__tmpl_ctx {
  uint64_t seq;
  uint32_t worker;
  uint64_t* rng; /* the worker's generator state */
  uint64_t clen; /* the body's expanded length, for {content-length} */
} nhb__tmpl_ctx;

/* One entry of the run's request set as the sessions use it, built once by
 * nhb__request_set_create from run->config.specs. The strings live in
 * run->spec_strings. */
typedef struct nhb__spec {
  const char* request; /* HTTP/1 head and body */
  size_t request_len;
  const char* body;    /* the last body_size bytes of request */
  size_t body_size;
  int head_request;
  void* h2_nva;        /* nghttp2_nv[h2_nvlen] (session_h2.c), or NULL for HTTP/1 */
  size_t h2_nvlen;
  /* Templating only (config.templated), else NULL: the request's template
   * (HTTP/1 sends all of it, HTTP/2 its body) and one per HTTP/2 header
   * field value (nsegs 0 for values without placeholders). */
  nhb__tmpl* tmpl;
  nhb__tmpl* h2_vals;
} nhb__spec;

/* Streaming responses (stream.c, docs/engine.md "Streaming responses").
 *
 * The Server-Sent Events splitter: the WHATWG EventSource parsing rules
 * reduced to what dispatches an event. Lines end at CR, LF or CRLF; a blank
 * line dispatches the event when a "data" field was seen since the last
 * one (a field name is the line up to its first colon, or the whole line);
 * one leading UTF-8 BOM is skipped. Four bytes of state whatever the event's
 * size, and the same events whatever the split points of the input. */
typedef struct nhb__sse {
  uint8_t line;     /* 0 at a line start, 1-4 "data" matched so far, 5 other field, 6 data field */
  uint8_t cr;       /* the last byte was a CR: an LF right after it is part of the same line end */
  uint8_t has_data; /* a data field since the last dispatch */
  uint8_t bom;      /* bytes of the leading BOM matched; 3 once past the start */
} nhb__sse;

/* Returns the events that data[0..len) completed. */
uint32_t nhb__sse_feed(nhb__sse* p, const char* data, size_t len);

/* One response's events, in its slot: reset when the response's head
 * begins, so nothing is done per request on the send path. */
typedef struct nhb__str {
  uint64_t first_ns, last_ns; /* the first and the latest event */
  uint32_t events;
  uint8_t sse;     /* the final head said text/event-stream: events are SSE events */
  uint8_t name_at; /* bytes of "content-type" matched in the field name; 0xFF: another name */
  uint8_t val_at;  /* bytes of "text/event-stream" matched in its value; 0xFF: another type */
  uint8_t is_ct;   /* the field being read is a content-type */
  uint8_t chunk;   /* HTTP/1.1: the chunk being read has bytes (not the last, empty one) */
  nhb__sse p;
} nhb__str;

/* A request on its way: from the moment the pool gives it to a connection
 * (which may still be connecting) until it ends as a response or an error.
 * Slots come from a per-worker pool sized once in nhb__pool_init() (one per
 * connection for HTTP/1.1, --max-active-requests for HTTP/2), so carrying a
 * request never allocates. A connection keeps its slots in a list. */
typedef struct nhb__slot {
  nhb__request rq;
  nhb__conn* conn;
  struct nhb__slot* next; /* the connection's list, or the worker's free list */
  struct nhb__slot* prev;
  /* The latency phases (docs/engine.md): when the request's last byte was
   * written (handed to the socket, or for HTTP/2 and HTTP/3 the flush that
   * carried its END_STREAM / FIN) and when the first byte of its response
   * was read; 0 = not yet. Both go back to 0 each time the request is sent. */
  uint64_t written_ns;
  uint64_t first_ns;
  uint64_t header_bytes;
  uint64_t body_bytes;
  uint64_t body_left; /* HTTP/2: request body bytes not yet handed to nghttp2 */
  int32_t stream_id;  /* HTTP/2: 0 = no stream yet (or refused, to be re-sent) */
  int status;         /* HTTP/2: the :status of the response so far */
  int sent;           /* times written (more than once: retries of a refused request) */
  int refused;        /* HTTP/2: the server refused the stream; re-sent on a new connection */
  nhb__olat olat;     /* HTTP/2: the latency response header of this stream's response */
  /* gRPC (session_grpc.c, on HTTP/2 with config.grpc): the response's
   * grpc-status (-1: none yet, -2: a bad or a second one), and the check of
   * its length-prefixed messages: prefix bytes of the current message seen
   * (0..5), its length as read so far, the bytes of it still expected, and
   * whether the framing or the status broke the protocol. */
  int grpc_status;
  uint32_t grpc_prefix;
  uint32_t grpc_len;
  uint64_t grpc_left;
  int grpc_bad;
  /* HTTP/2 (session_h2.c): the response checks that replace
   * nghttp2's HTTP messaging ones: what the response has shown so far
   * (H2_CHK_* flags) and its content-length (-1: none). */
  uint32_t h2_chk;
  int64_t h2_clen;
  /* HTTP/2 and HTTP/3: the header block being read, against the limit
   * above (name + value + 32 per field), and the interim responses so far. */
  uint32_t hdr_list;
  uint32_t interims;
  /* HTTP/2 and HTTP/3 with response checks (check.c): this slot's
   * evaluation state, allocated the first time the slot carries a final
   * response and kept for every later request it carries (the worker's slots
   * are reused, so never per request); NULL in runs without checks. */
  struct nhb__chk_state* chk;
  /* Traces (trace.c): the ids a sampled request carries; span_id 0 = not
   * traced. Set when the request is first sent (a retry keeps them), back to
   * 0 when its span is recorded. */
  uint64_t trace_hi, trace_lo, span_id;
  /* Grouping by a response header (group.c): the value's entry in the
   * worker's table, 0 until the header is read; back to 0 once counted. */
  uint32_t group;
  /* Streaming responses (stream.c), with config.stream_stats only. */
  nhb__str str;
} nhb__slot;

/* The transport moves bytes for a connection: plain TCP, or TLS through
 * OpenSSL with memory BIOs. */
typedef struct nhb__transport_vtable {
  const char* name;
  /* The TCP connection is up. The transport calls nhb__conn_ready() once
   * plaintext can flow (at once for TCP, after the handshake for TLS). */
  void (*on_connected)(nhb__conn* c);
  /* Bytes arrived from the socket; plaintext goes to c->session->on_data.
   * Returns 0, or a negative code to close the connection. */
  int (*on_read)(nhb__conn* c, const char* data, size_t len);
  /* Sends bytes that stay valid and unchanged until c->write_pending is 0
   * again (at once, or when session->on_writable is called). Only one write
   * may be outstanding: callers check c->write_pending first. */
  int (*write)(nhb__conn* c, const char* data, size_t len);
  /* Releases per-connection state; called from the handle's close callback. */
  void (*close)(nhb__conn* c);
  /* Starts the connection on c->tcp, which is initialized but unconnected,
   * and arranges for on_connected once it is up. NULL (TCP and TLS) means a
   * TCP connect to the run's address. Only the fuzz targets' memory transport
   * (csrc/fuzz/) sets it: it has no socket and lets the target decide when
   * the connection is up. Called once per connection, never per request. */
  int (*connect)(nhb__conn* c);
  /* A transport that is not a byte stream (UDP, and QUIC on it)
   * opens its own handle in place of the TCP/pipe one: `start` initializes
   * the handle at c->udp, connects it to `to` and calls on_connected (at once
   * for UDP, which has no handshake). NULL: a TCP or pipe stream. Called once
   * per connection. */
  int (*start)(nhb__conn* c, const nhb_sockaddr* to);
} nhb__transport_vtable;

/* The protocol session turns requests into bytes and bytes into responses.
 * It reports back through nhb__conn_response() and nhb__conn_slot_failed(). */
typedef struct nhb__session_vtable {
  const char* name;
  /* A new connection is ready: set up per-connection protocol state. */
  int (*open)(nhb__conn* c);
  /* Sends a request on this connection. */
  int (*send)(nhb__conn* c, nhb__slot* s);
  /* Plaintext from the transport. Returns 0, or a negative code when the
   * peer broke the protocol (the connection is then closed). */
  int (*on_data)(nhb__conn* c, const char* data, size_t len);
  /* The byte stream ended: `err` is UV_EOF when the peer closed its side,
   * else the error. Finishes a close-delimited response (HTTP/1.1) or marks
   * requests that never left as refused (HTTP/2). The pool then fails the
   * requests still waiting; < 0 fails them too. */
  int (*on_eof)(nhb__conn* c, int err);
  /* A write that was pending has gone out (may be NULL). */
  void (*on_writable)(nhb__conn* c);
  /* Abandons one request whose time-out expired, keeping the connection
   * (HTTP/2 resets the stream). NULL: the connection is closed instead. */
  void (*cancel)(nhb__conn* c, nhb__slot* s);
  /* Releases per-connection state; called from the handle's close callback. */
  void (*close)(nhb__conn* c);
} nhb__session_vtable;

/* One client protocol: what the run, its workers and their connections set up
 * and tear down for it, and the facts the pool decides on. Each is defined
 * in its session file (nhb__protocol_h1 in session_h1.c...), next to the
 * hooks it names, which are that file's own; nhb__protocols (protocol.c)
 * points at one per nhb_protocol_t, indexed by it. Only set-up,
 * teardown and per-connection decisions read it: the per-request path calls
 * the session and transport a connection was given when the pool was built.
 * A NULL hook has nothing to do. */
typedef struct nhb__protocol {
  const char* name; /* in error texts: "HTTP/2" */
  const nhb__session_vtable* session;
  /* The same session whose send carries trace headers on sampled requests
   * (trace.c), for runs with tracing on; NULL: the protocol cannot be traced. */
  const nhb__session_vtable* traced_session;
  /* NULL: a byte stream over TLS when config.tls is enabled, else TCP. */
  const nhb__transport_vtable* transport;
  /* Requests share a connection as streams: --max-active-requests bounds a
   * worker's requests in flight and --max-concurrent-streams a connection's
   * (otherwise one request per connection). */
  int multiplexes;
  /* --experimental-h1-connection-reuse-strategy lru applies. Nighthawk's
   * reuse strategy is HTTP/1's: an HTTP/2 connection takes requests until it
   * is full whatever the order. */
  int reuse_lru;
  /* Counted for each connection started, next to upstream_cx_total (an
   * nhb_counter_t); -1: none (the echo protocols speak no HTTP). */
  int cx_counter;
  /* How the server refuses a stream it did not process, in the error text of
   * a request refused too often (multiplexed protocols only). */
  const char* refused;
  int (*run_init)(nhb_run* run, char* err, size_t err_len); /* at run creation */
  void (*run_free)(nhb_run* run);                            /* also after a failed run_init */
  int (*worker_init)(nhb__worker* w);                        /* end of nhb__pool_init */
  void (*worker_close)(nhb__worker* w);                      /* nhb__pool_close_all */
  void (*worker_free)(nhb__worker* w);                       /* nhb__pool_free */
  void (*conn_closing)(nhb__conn* c);                        /* the pool closes it; socket still open */
  void (*conn_free)(nhb__conn* c);                           /* nhb__pool_free, per entry */
} nhb__protocol;

/* Every record of NHB_PROTOCOL_MAP (nhb.h): a protocol there without its
 * record in a session file is an undefined symbol (the selftest fails to
 * link, the extension to load). */
#define NHB__PROTO_RECORD(id, name, record) extern const nhb__protocol nhb__protocol_##record;
NHB_PROTOCOL_MAP(NHB__PROTO_RECORD)
#undef NHB__PROTO_RECORD
extern const nhb__protocol* const nhb__protocols[NHB_PROTO_COUNT];

typedef enum {
  NHB__CX_DISCONNECTED = 0, /* slot free, handle closed */
  NHB__CX_CONNECTING,       /* TCP connect and, with TLS, the handshake */
  NHB__CX_READY,            /* requests can be sent */
  NHB__CX_CLOSING           /* uv_close() called, waiting for the close callback */
} nhb__cx_state;

#define NHB__READ_BUFFER_SIZE 65536
/* nhb__worker.release_handles: the sequencer's handles that are initialised. */
#define NHB__RH_CHECK 1u
#define NHB__RH_POLL 2u
#define NHB__RH_SPIN 8u
#define NHB__RH_SLEEP 16u
/* A request the server refused unprocessed (HTTP/2 GOAWAY above its last
 * stream id, REFUSED_STREAM) is sent again at most this many times, then
 * given up (upstream_rq_retry_limit_exceeded): at most 4 attempts. Envoy
 * retries once by default and gRPC allows up to 5 attempts; 3 retries ride
 * out a graceful GOAWAY or a stream limit learnt late (which need one) with
 * room to spare, and bound what a server that refuses everything costs. */
#define NHB__MAX_RETRIES 3
/* Back-off on new connections after consecutive connections that failed to
 * connect or ended (GOAWAY, close) before a single response: the first waits
 * BASE, each next one twice as long, up to MAX; a response resets it. */
#define NHB__BACKOFF_BASE_MS 4
#define NHB__BACKOFF_MAX_MS 1000

/* The proxy's answer to a CONNECT (tunnel.c), as llhttp reads it: raw
 * bytes so far (against NHB__RESP_HEADER_BYTES), interim answers, the final
 * answer's status once its head is complete, and why it was refused. */
typedef struct nhb__tunnel_rx {
  uint32_t bytes;
  uint32_t interims;
  int status;
  const char* why;
} nhb__tunnel_rx;

/* nhb__conn.tunnel: where a connection's tunnel is; 0 without one or once
 * it is up (the inner transport runs). FAILED: failed and counted, so that
 * the failure paths that follow count nothing more. */
#define NHB__TUNNEL_TCP 1     /* TCP connecting to the proxy */
#define NHB__TUNNEL_WAITING 2 /* CONNECT written, reading the proxy's answer */
/* Response checks (check.c): the run's copy of the table, and the
 * evaluation state of one response in flight (HTTP/1.1: one per connection
 * entry; HTTP/2 and HTTP/3: one per request slot), both allocated once so
 * that evaluating allocates nothing per request. */
typedef struct nhb__chk_set {
  uint32_t n; /* 0: no checks, and the session installs no check callbacks */
  nhb_check c[NHB_MAX_CHECKS]; /* strings in `strings`, header names lower-case */
  char* strings;
  uint32_t hdr_mask, body_has_mask, sha_mask, json_mask; /* checks by kind */
  uint32_t all;        /* the checks of every response (entry 0) */
  uint32_t full;       /* all n checks: a response judged by each is counted once (check_every) */
  uint32_t* spec_mask; /* per request-set entry: `all` plus its own; NULL when no check is an entry's */
  uint32_t nspecs;
  uint32_t body_re_mask, hdr_re_mask; /* regex checks (check_regex.c) */
  struct nhb__chk_re* re;             /* their databases and scratches; NULL without any */
} nhb__chk_set;

typedef struct nhb__chk_state {
  uint32_t mask;     /* the checks that judge this response (its entry's) */
  uint32_t seen;     /* header and body-substring checks satisfied so far */
  uint32_t active;   /* header checks whose name the current field has */
  uint32_t name_len; /* the current field's name so far (> NHB_CHECK_TEXT_MAX: too long) */
  int in_value;      /* the current field's value has begun */
  uint32_t pos[NHB_MAX_CHECKS]; /* substring: window bytes; header ==: value bytes */
  char name[NHB_CHECK_TEXT_MAX];
  char win[NHB_MAX_CHECKS][NHB_CHECK_TEXT_MAX];
  void* sha[NHB_MAX_CHECKS]; /* SHA256_CTX*, for body.sha256 checks */
  uint32_t json_len;
  char* json; /* the body's first NHB_CHECK_JSON_PREFIX bytes, with JSON checks */
  struct nhb__chk_re_state* re; /* regex checks: the streams and the worker's scratch */
} nhb__chk_state;

/* nspecs: the request set's entries, which an entry's check (nhb_check.entry) must name. */
int nhb__chk_set_init(nhb__chk_set* set, const nhb_check* checks, uint32_t n, uint32_t nspecs, char* err,
                      size_t err_len);
void nhb__chk_set_free(nhb__chk_set* set);
int nhb__chk_run_init(nhb_run* run, char* err, size_t err_len);
/* `worker`: the index of the worker whose loop uses the state (the regex
 * checks' scratch is the worker's). */
nhb__chk_state* nhb__chk_state_new(const nhb__chk_set* set, int worker);
void nhb__chk_state_free(const nhb__chk_set* set, nhb__chk_state* st);
/* A new response to a request for entry `spec` of the request set. */
void nhb__chk_begin(const nhb__chk_set* set, nhb__chk_state* st, uint32_t spec);
void nhb__chk_name(const nhb__chk_set* set, nhb__chk_state* st, const char* at, size_t len);
void nhb__chk_value(const nhb__chk_set* set, nhb__chk_state* st, const char* at, size_t len);
void nhb__chk_value_end(const nhb__chk_set* set, nhb__chk_state* st);
void nhb__chk_body(const nhb__chk_set* set, nhb__chk_state* st, const char* at, size_t len);
/* The checks (bits by index, of st->mask) that the ended response failed. */
uint32_t nhb__chk_finish(const nhb__chk_set* set, nhb__chk_state* st, int status, uint64_t body_bytes);
/* The response of slot `s` ended (its status, s->body_bytes): judges it by
 * the checks of `st`, counts each check's pass or fail, and reports it to
 * the pool: nhb__conn_check_failed() for a 2xx that failed one, else
 * nhb__conn_response(). Every session's end of a checked response. */
void nhb__chk_response(nhb__conn* c, nhb__slot* s, nhb__chk_state* st, int status);
/* Counts a response's verdict: `failed` (bits by check index) among the
 * checks in `mask` (those that judge its entry), then the response itself. */
void nhb__chk_count(nhb__conn* c, nhb__slot* s, uint32_t mask, uint32_t failed, int status);
/* Moves stats->check_every into each check's pass counter; whoever reads a
 * worker's check counters calls it first (on the worker's thread, or after
 * it ended). */
void nhb__chk_fold(nhb_stats* stats, uint32_t n);
/* HTTP/2 and HTTP/3: the final response of slot `s` begins (its :status is
 * 2xx..5xx): the slot's state, allocated on the slot's first such response,
 * reset for this one. NULL when it cannot be allocated. */
nhb__chk_state* nhb__chk_slot_begin(nhb__worker* w, nhb__slot* s);
/* Frees the slots' states (nhb__pool_free, before the slots go). */
void nhb__chk_slots_free(nhb__worker* w);
/* Streaming substring search: 1 when needle occurs in the bytes fed so far
 * (win holds the last n - 1 of them, win_len how many). */
int nhb__chk_find(const char* needle, size_t n, char* win, uint32_t* win_len, const char* data, size_t len);
/* Regex checks (check_regex.c, Vectorscan): compiled at run creation into
 * one streaming database for the body's patterns and one for the headers',
 * with a scratch per worker (refused by name, with Vectorscan's reason, when
 * a pattern cannot be compiled or nhbench was built without it); one stream
 * of each per connection state, reset per response and per header value. */
int nhb__chk_re_init(nhb__chk_set* set, int nworkers, char* err, size_t err_len);
void nhb__chk_re_free(nhb__chk_set* set);
int nhb__chk_re_state_new(const nhb__chk_set* set, nhb__chk_state* st, int worker);
void nhb__chk_re_state_free(nhb__chk_state* st);
void nhb__chk_re_begin(nhb__chk_state* st);
void nhb__chk_re_header(const nhb__chk_set* set, nhb__chk_state* st, const char* at, size_t len);
void nhb__chk_re_header_end(const nhb__chk_set* set, nhb__chk_state* st);
void nhb__chk_re_body(const nhb__chk_set* set, nhb__chk_state* st, const char* at, size_t len);
void nhb__chk_re_body_end(const nhb__chk_set* set, nhb__chk_state* st);
/* RFC 6901 pointer over doc[0..len): 1 and the value's text when it is there, whole. */
int nhb__json_pointer(const char* doc, size_t len, const char* ptr, size_t ptr_len, const char** val, size_t* val_len);

/* Streaming responses (stream.c). The sessions call these only from the
 * callbacks they install when config.stream_stats is set. `now` 0: read the
 * clock (once per call, and only when an event completed). */
int nhb__str_run_init(nhb_run* run, char* err, size_t err_len);
/* A header block of the response begins (the final one, or an interim one). */
void nhb__str_begin(nhb__str* t);
/* A piece of a header field's name, a piece of its value, its end. */
void nhb__str_name(nhb__str* t, const char* at, size_t len);
void nhb__str_value(nhb__str* t, const char* at, size_t len);
void nhb__str_value_end(nhb__str* t);
/* Body bytes: SSE events, when the response is an event stream. */
void nhb__str_data(nhb__worker* w, nhb__slot* s, const char* at, size_t len, uint64_t now);
/* A body piece ended (an HTTP/1.1 chunk or read, an HTTP/2 DATA frame, an
 * HTTP/3 DATA piece): the unit of a response that is not an event stream. */
void nhb__str_piece(nhb__worker* w, nhb__slot* s, uint64_t now);
/* The final response ended: its event count and duration. */
void nhb__str_end(nhb__worker* w, nhb__slot* s);

#define NHB__TUNNEL_FAILED 3
#define NHB__TUNNEL_TLS 4     /* the TLS handshake with the proxy (carrier.c) */

/* The run's CONNECT requests (tunnel.c), copied from config.tunnel_requests:
 * one per target (or one for all), and each one's authority for error texts. */
typedef struct nhb__run_tunnel {
  uint32_t n; /* 0: no tunnel */
  const char** request;
  size_t* request_len;
  const char** authority;
  char* strings;
  /* The proxy leg (carrier.c): set when the tunnels run over TLS to the proxy
   * or on HTTP/2 streams; then ssl_ctx (TLS), and for HTTP/2 the callbacks,
   * the option and each target's CONNECT header block. */
  int carried;
  int h2;
  void* ssl_ctx;
  void* h2_callbacks;
  void* h2_option;
  void* h2_nva;       /* nghttp2_nv[]: every target's block, end to end */
  size_t* h2_nvoff;   /* n + 1 offsets into h2_nva */
  char* h2_strings;   /* lower-cased header names */
  /* proxy_protocol 3: the CONNECT on an HTTP/3 stream (tunnel_udp.c's
   * nhb__udp_tunnel_stream_*): its run part (TLS, each target's HEADERS). */
  int h3;
  void* h3_run;
} nhb__run_tunnel;

/* A connection's proxy leg (carrier.c), allocated on its entry's first
 * carried connection and kept. */
typedef struct nhb__carrier nhb__carrier;

struct nhb__conn {
  /* First member: the handle's pointer is the connection's. A TCP handle,
   * or a pipe for a target that is a Unix socket; both begin with the
   * uv_stream_t fields, so the code writes (uv_stream_t*)&c->tcp for either. */
  union {
    uv_tcp_t tcp;
    uv_pipe_t pipe;
    uv_udp_t udp; /* udp:// echo and HTTP/3 (transport_udp.c) */
  };
  uv_connect_t connect_req;
  uv_write_t write_req;
  nhb__worker* worker;
  const nhb__transport_vtable* transport;
  const nhb__session_vtable* session;
  nhb__cx_state state;
  int write_pending; /* a write is outstanding (see nhb__transport_vtable.write) */
  int keep_alive;    /* HTTP/1.1: the last response allows another request */
  int draining;      /* takes no new requests (GOAWAY, request limit) */
  int32_t avail_pos; /* index in its target's avail ring, -1 when not there */
  uint32_t target;   /* the run target it connects to: an index into run->targets */
  uint32_t endpoint; /* the address it connects to: an index into run->endpoints */
  uint32_t capacity; /* requests it may carry at once */
  uint32_t nactive;  /* slots attached, refused ones included */
  uint32_t nrefused; /* HTTP/2: slots waiting to be re-sent on a new connection */
  nhb__slot* slots;  /* the attached slots */
  uint64_t connect_start_ns;
  uint64_t requests_on_connection;
  int answered;  /* a response arrived on this connection */
  int peer_gone; /* the server sent GOAWAY or closed the connection */
  /* HTTP/1.1 response parsing state. The sizes are counted here and copied
   * into the slot when the response ends (one pointer less per callback). */
  llhttp_t parser;
  uint64_t header_bytes;
  uint64_t body_bytes;
  int response_done;
  /* Obs-fold detection (session_h1.c): a header line is open between its
   * name and the end of its value; hdr_gap is where the bytes llhttp skipped
   * since the last name or value piece begin in the current read, and
   * hdr_gap_lf says that an earlier read left a line feed in that gap. */
  int hdr_open;
  int hdr_gap_lf;
  const char* hdr_gap;
  /* Response limits (session_h1.c, NHB__RESP_* above): the current header
   * block's bytes and fields, the interim responses to this request, the
   * raw bytes of reads that ended inside a head, whether the parser is past
   * the current head, and why a callback stopped the parser (NULL: no
   * limit was hit). */
  uint32_t h1_block_bytes;
  uint32_t h1_block_fields;
  uint32_t h1_interims;
  int h1_in_body;
  uint64_t h1_head_raw;
  const char* h1_limit;
  nhb__olat olat; /* HTTP/1.1: the latency response header of the current response */
  nhb__chk_state* chk; /* HTTP/1.1 with checks: allocated on the entry's first connection, kept */
  nhb__grp_h1* grp_h1; /* HTTP/1.1 grouping by a header (group.c): likewise */
  /* HTTP/1.1 response-head replay (session_h1.c): the head of the last
   * response that llhttp parsed whole from a message boundary, and what that
   * parse found, so that a byte-identical response skips the parser. */
  char* h1_head;            /* h1_head_cap bytes, allocated on the first such response */
  uint32_t h1_head_cap;
  uint32_t h1_head_len;     /* 0: nothing to replay */
  uint32_t h1_spec;         /* the request spec it answered (HEAD changes framing) */
  int h1_status;
  int h1_at_boundary;       /* llhttp has no bytes of an unfinished response */
  uint64_t h1_header_bytes;
  uint64_t h1_body_bytes;
  /* The bytes of the copy compared (the head's; with a check that reads the
   * body, the whole response's) and, with checks, their verdict. */
  uint32_t h1_cmp_len;
  uint32_t h1_chk_failed;   /* the kept response's failed checks (bits) */
  int h1_chk_keep;          /* the response being finished was just kept */
  /* The head's varying values (session_h1.c, "varying values"): where each
   * starts and ends (its CR) in h1_head; 0 of them: only a byte-identical
   * head is replayed. */
  uint32_t h1_nvary;
  uint32_t h1_vary_same;    /* the last head replayed had the kept values */
  uint16_t h1_vary_at[NHB__H1_VARY_MAX];
  uint16_t h1_vary_end[NHB__H1_VARY_MAX];
  /* CONNECT through a proxy (tunnel.c): where the tunnel is (0 once it is
   * up, or without one), when it began (TCP connected) and the answer so far,
   * read by c->parser before the session takes it over. */
  int tunnel;
  uint64_t tunnel_start_ns;
  nhb__tunnel_rx tunnel_rx;
  char* trace_buf; /* HTTP/1.1 with tracing: a sampled request with its trace headers (trace.c), allocated on the first */
  int sock_fd; /* plain TCP or Unix socket: the handle's descriptor, set on connect (transport_tcp.c) */
  char* read_buffer; /* NHB__READ_BUFFER_SIZE bytes, the worker's one read buffer (pool.c) */
  nhb__tls* tls;     /* TLS state, allocated on the first TLS connection of this entry */
  nhb__h2* h2;       /* HTTP/2 state, likewise */
  nhb__carrier* carrier; /* the proxy leg of a tunnel over TLS or HTTP/2, likewise (carrier.c) */
  /* The state of any other protocol, likewise: its session file's own type
   * (session_echo.c's nhb__echo, session_h3.c's nhb__h3), which only that
   * file casts to; its record's conn_free frees it. */
  void* proto;
  /* DNS per connection (dns.c): the resolution in flight (dns_pending: the
   * connection has no handle yet), when it began, and the address it gave,
   * which the connection connects to. */
  uv_getaddrinfo_t dns_req;
  int dns_pending;
  uint64_t dns_start_ns;
  nhb_sockaddr dns_addr;
};

/* One half of a worker's interval double buffer (interval.c). */
typedef struct nhb__ivl_buf {
  nhb_hist* hist;                    /* scheduled_to_response of the interval */
  uint64_t end_ns;                   /* when the worker closed it; 0 = never */
  /* The worker's counters when it closed it, by counter id: the fixed ones,
   * then the per-status-code and gRPC-status ones (NHB_COUNTER_ID_COUNT). */
  uint64_t counters[NHB_COUNTER_ID_COUNT];
} nhb__ivl_buf;

/* A worker's connections to one target. `avail` is a ring of the
 * connections that can take a request, in the order they became able to:
 * the most recently used is at avail_head + navail - 1, the least recently
 * used at avail_head. The default strategy (mru) takes the former and never
 * moves avail_head, so the ring is a plain stack; lru takes the latter.
 * `free_conns` is a stack of disconnected entries. Both arrays are slices of
 * the worker's, `size` entries long, allocated once with the pool. */
typedef struct nhb__target_pool {
  nhb__conn** avail;
  uint32_t avail_head;
  uint32_t navail;
  nhb__conn** free_conns;
  uint32_t nfree;
  uint32_t size;
} nhb__target_pool;

struct nhb__worker {
  nhb_run* run;
  int index;
  int cpu;
  uv_loop_t loop;
  pthread_t thread;
  uv_async_t wakeup;     /* stop requests from other threads */
  uv_timer_t housekeeping; /* 10 ms: publish progress, time-outs, drain */
  /* Sequencer. */
  uv_poll_t release_poll; /* NHB_IDLE_POLL: watches release_fd */
  uv_idle_t release_spin; /* NHB_IDLE_SPIN: runs every loop iteration */
  uv_timer_t release_sleep; /* NHB_IDLE_SLEEP: millisecond timer */
  uv_check_t release_check; /* spin, sleep: releases what fell due during I/O */
  /* Which of the release handles above uv_*_init() succeeded on (NHB__RH_*
   * bits): a worker whose set-up failed part way closes only those, since
   * uv_close() on a handle never initialised aborts the process. */
  unsigned release_handles;
  int release_fd;
  uint64_t next_due_ns;        /* the next release's due time; 0 = none wanted */
  uint64_t want_deadline_ns;   /* NHB_IDLE_POLL: when the timerfd should fire */
  uint64_t timer_deadline_ns;  /* NHB_IDLE_POLL: what it is programmed for; 0 = fired */
  uint64_t start_ns;    /* scheduled time of this worker's first release */
  uint64_t end_ns;      /* no release is scheduled at or after this; UINT64_MAX = none */
  double interval_ns;   /* between releases; 0 = closed loop at max rate */
  uint64_t next_index;  /* index of the next release on the schedule */
  uint64_t released;    /* releases made (sent, queued or dropped) */
  uint32_t spec_next;   /* the request set's next entry for this worker (nhb__next_spec) */
  /* Templating (request.c), untouched by untemplated runs: the sequence
   * numbers sent so far, the random generator, and the expansion buffers
   * (one per connection for HTTP/1, one per slot for HTTP/2 bodies, plus one
   * header block for HTTP/2), allocated once when the worker starts. */
  uint64_t rq_seq;
  uint64_t rq_rng;
  char* rq_buf;
  size_t rq_buf_each;
  void* rq_nva;     /* nghttp2_nv scratch: the header block being expanded */
  char* rq_hdr_buf; /* its expanded values (nghttp2 copies them on submit) */
  int blocked;          /* closed loop: the next release found no capacity */
  int releasing;        /* inside nhb__pool_dispatch (sequencer.c: no nested releases) */
  uint64_t blocked_since_ns;
  /* Schedule shapes (sequencer.c). sched_base_ns is where the rate
   * schedule counts from: start_ns, moved later by --no-catchup. */
  uint64_t sched_base_ns;
  uint64_t quota;       /* releases left to make in this phase's count; UINT64_MAX = no count */
  double count_offset;  /* stages: this worker's releases sit at counts k + count_offset */
  uint32_t stage_hint;  /* stages: the stage of the last release (a search hint) */
  uint64_t rng;         /* jitter: splitmix64 state, seeded per worker */
  uint64_t base_index;  /* rate schedules: k + 1 for the release whose base time is base_ns; 0 = none */
  uint64_t base_ns;
  uint64_t jit_index;   /* jitter: next_index + 1 the jittered time below is for; 0 = none */
  uint64_t jit_ns;      /* jitter: that release's jittered (scheduled) time */
  uint64_t prev_sched_ns; /* jitter: the previous release's scheduled time */
  uint64_t arr_rng;     /* Poisson arrivals: splitmix64 state, never 0 while on; 0 = uniform */
  double arr_count;     /* Poisson arrivals: the cumulative rate (in releases) of the last draw */
  uint64_t* arr_log;    /* record_arrivals (a test hook): drawn Poisson or jittered times, ns after the phase start */
  uint64_t arr_log_len;
  nhb_schedule_facts facts;
  uint64_t* stage_releases;  /* stages: releases per stage (nstages entries) */
  uint64_t* stage_responses; /* stages: responses per stage, by scheduled time */
  int warming;          /* in the warm-up phase */
  nhb_stats warm;       /* the warm-up's statistics (hists allocated only with a warm-up) */
  uint64_t phase_offset_ns; /* this worker's stagger after the run's t0 */
  /* Pool. */
  /* Pool. The connection entries are split among the run's targets (pool.c,
   * nhb__pool_init); each target has its own connections that can take a
   * request and its own disconnected entries. */
  nhb__conn* conns;
  uint32_t nconns;
  nhb__target_pool* tp;  /* one per run target */
  uint32_t ntargets;
  /* Per-endpoint statistics (pool.c), one per run->endpoints entry, or NULL
   * with one endpoint: the only cost a run with one address pays is the test. */
  nhb_endpoint_stats* ep;
  /* Its connections, requests and errors copied out with the counters
   * (publish), three per endpoint, for the live view; NULL with one endpoint. */
  _Atomic uint64_t* ep_published;
  uint64_t ep_rng;       /* endpoint_random: splitmix64 state */
  int response_extras;   /* stages, per-endpoint statistics or groups: a response calls response_extras (pool.c) */
  nhb__grp_worker* grp;  /* statistics per group (group.c), NULL without groups */
  const nhb__protocol* protocol; /* nhb__protocols[config.protocol] */
  int cx_counter;        /* its connection counter (-1: none), read per connection */
  int lru;               /* take the least recently used connection (HTTP/1.x, --experimental-h1-connection-reuse-strategy lru) */
  nhb__slot* slot_pool; /* every slot, allocated once */
  nhb__slot* free_slot_list;
  uint32_t max_in_flight; /* HTTP/2: --max-active-requests; HTTP/1.1: no limit beyond connections */
  uint32_t conn_capacity; /* requests one connection may carry: 1, or HTTP/2's stream limit */
  nhb__request* pending; /* ring buffer of queued requests */
  uint32_t pending_cap, pending_head, pending_len;
  uint32_t in_flight;   /* requests on a connection or waiting for one */
  /* Back-off (pool.c): while it runs, no new connection is started; entries
   * whose refused requests wait for a new connection stay disconnected with
   * their slots attached, and start when the timer fires. */
  uv_timer_t backoff_timer;
  int backoff_timer_init;
  int backoff_active;
  uint32_t backoff_failures; /* consecutive back-off steps since the last response */
  void* tls_session;    /* SSL_SESSION* to resume (--tls-session-reuse), or NULL */
  char* tls_plain;      /* NHB__READ_BUFFER_SIZE bytes: TLS plaintext (transport_tls.c) */
  char* carrier_plain;  /* NHB__READ_BUFFER_SIZE bytes: the proxy TLS's plaintext (carrier.c) */
  /* HTTP/2: connections with frames to write, written once per loop
   * iteration (right before the loop polls, or after one more non-blocking
   * poll when reads marked them) so that the requests released in one
   * iteration share a write. */
  uv_prepare_t h2_prepare;
  int h2_prepare_active;
  nhb__conn** h2_dirty;
  uint32_t h2_ndirty;
  /* After reads, the write waits for one non-blocking poll (h2_on_prepare):
   * the idle handle makes that poll non-blocking, the check handle writes
   * after it; both are active only then. */
  uv_idle_t h2_idle;
  uv_check_t h2_check;
  int h2_read_dirty; /* a read marked a connection since the last write pass */
  /* HTTP/2's latency phases: the clock read by the first request's END_STREAM
   * serialized in one pass over the dirty connections (or one flush when the
   * socket drains), shared by every request that pass writes; 0 = not read. */
  uint64_t h2_tx_ns;
  /* The latency phases recorded once per response and folded into the
   * statistics later (phases.c): the latency of 2xx responses whose
   * request_write and transfer were 0 (latency_2xx, request_to_response and
   * time_to_first_byte), of the other 2xx responses (latency_2xx and
   * request_to_response), and the count of other transfers of 0; and of
   * responses released when scheduled (scheduled_to_response and
   * sequencer.callback). */
  nhb_hist* ph_whole;
  nhb_hist* ph_ok;
  nhb_hist* ph_same;
  uint64_t ph_transfer0;
  /* HTTP/2: nghttp2 allocates a few small blocks per stream; they are
   * recycled through per-size free lists instead of going back to malloc. */
  nhb__h2_mem h2_mem;
  /* Life cycle. */
  int stopping;         /* no more releases */
  int finishing;        /* handles are being closed */
  uint64_t drain_deadline_ns;
  uint64_t last_timeout_scan_ns;
  /* Statistics, touched by this thread only. */
  nhb_stats stats;
  /* Live statistics (interval.c). ivl_hist is the histogram the hot path
   * records the CO-corrected latency into besides stats, ivl[ivl_epoch & 1]'s,
   * or NULL when intervals are off. ivl_epoch is the worker's own; ivl_closed
   * says which epochs it has closed (all below it), for the controller. */
  nhb_hist* ivl_hist;
  struct nhb__trace* trace; /* tracing's sampler and span ring (trace.c), NULL when off */
  uint64_t ivl_epoch;
  nhb__ivl_buf ivl[2];
  _Atomic uint64_t ivl_closed;
  /* Counters copied out every 10 ms for progress and predicates; the
   * per-status-code ones only when a predicate watches one (watch_status). */
  _Atomic uint64_t published[NHB_CTR_COUNT];
  /* ... then the gRPC ones, as the counter ids follow each other. */
  _Atomic uint64_t published_status[NHB_STATUS_COUNT + NHB_GRPC_STATUS_COUNT];
  /* ... and the response checks' pass then fail counters, in runs with checks. */
  _Atomic uint64_t published_checks[2 * NHB_MAX_CHECKS];
  /* Load-generator health (client.c), outside the request path: the
   * thread's CPU time and the wall time of the measured phase (sampled at
   * its boundaries from the OS), and how late the loop ran its own
   * housekeeping timer (a hiccup meter, as jHiccup's), in the measured phase. */
  nhb_hist* hiccup;       /* ns late; NULL until the worker starts */
  uint64_t hiccup_due_ms; /* the housekeeping timer's due time, loop clock; 0: none */
  int load_state;         /* 0 before the measured phase, 1 in it, 2 after */
  uint64_t load_cpu0_ns, load_wall0_ns, load_cpu_ns, load_wall_ns;
  int64_t load_wait0_ns, load_wait_ns; /* run-queue wait (schedstat); -1: unknown */
  atomic_int done;
  int first_error; /* first connection/protocol error code, 0 if none */
  char first_error_text[512]; /* its explanation when there is more to say (TLS) */
};

struct nhb_run {
  nhb_client_config config;
  int* cpus;
  nhb__worker* workers;
  int nworkers;
  pthread_t controller;
  pthread_mutex_t lock;
  pthread_cond_t finished_cond;
  /* The controller sleeps until the next interval boundary or a kick
   * (nhb__run_kick): a worker finished, closed an interval, ended its
   * warm-up, or published a new value of a counter a predicate watches. A
   * run whose predicates watch error counters that stay at zero wakes it
   * only at its interval boundaries. */
  int ctl_fd;            /* eventfd the workers write to; -1 until started */
  int finished_fd;       /* eventfd written once when the run has finished; -1 until started */
  atomic_int ctl_kicked; /* a kick is pending: the next one need not write */
  int nwatch;            /* counter ids the predicates watch */
  int watch_ids[2 * NHB_MAX_PREDICATES];
  int started;
  int finished;
  atomic_int stop_requested;
  uint64_t t0_ns;          /* first scheduled release, monotonic */
  uint64_t t0_realtime_ns; /* the same instant on the wall clock */
  uint64_t start_call_ns;
  nhb_stats global;
  nhb_end_reason_t end_reason;
  int end_counter;
  uint64_t failed_predicates;
  /* A predicate watches a per-status-code counter: only then do the workers
   * publish those and the controller sum them (500 more each time). */
  int watch_status;
  char first_error[512];
  /* The targets (pool.c, nhb__pool_run_init): config.targets copied, or
   * config.addr as the one target; config.targets points here. spec_target
   * is each request-set entry's target (NULL with one target). */
  nhb_sockaddr* targets;
  uint32_t ntargets;
  uint32_t* spec_target;
  /* The source addresses (pool.c): config.sources copied; config.sources
   * points here. NULL with none. */
  nhb_sockaddr* sources;
  /* Where connections go (pool.c): the targets (run->targets itself) or,
   * with config.endpoints, the single target's addresses (endpoint_copies).
   * ep_next is the next address a round-robin connection takes, run-wide;
   * ep_global the merged per-endpoint statistics (NULL with one). */
  const nhb_sockaddr* endpoints;
  uint32_t nendpoints;
  nhb_sockaddr* endpoint_copies;
  _Atomic uint32_t ep_next;
  /* DNS per connection (dns.c): the run's copy of config.dns_host (NULL:
   * off) and the target's port, network order. */
  char* dns_host;
  uint16_t dns_port;
  nhb_endpoint_stats* ep_global;
  /* Owned copies of the config's strings (config.* point into these). */
  char* strings;
  /* Schedule shapes: owned copies of the stage and offset arrays,
   * and the stages' precomputed shape (per worker: rates in releases/ns). */
  uint64_t* stage_ns;
  double* stage_rps;
  uint64_t* schedule_offsets_ns;
  struct nhb__stage* stages;
  uint64_t stages_end_ns;   /* the stages' total duration */
  int has_warmup;
  atomic_int warming;       /* workers still in their warm-up */
  nhb_stats warm_global;
  /* Built once per run from the config, shared read-only by the workers. */
  void* ssl_ctx;        /* SSL_CTX* when TLS is enabled */
  void* h2_callbacks;   /* nghttp2_session_callbacks* for HTTP/2 */
  void* h2_option;      /* nghttp2_option*: nghttp2's HTTP messaging checks off (session_h2.c) */
  void* h2_nva;         /* nghttp2_nv[]: every spec's header block, end to end */
  /* The request set (request.c): nspecs >= 1 entries; config.specs points to
   * run-owned copies of the caller's (or one made from the legacy fields). */
  nhb__spec* specs;
  uint32_t nspecs;
  nhb_request_spec* spec_copies;
  nhb_header* spec_headers;
  char* spec_strings;
  nhb__tmpl* tmpls;    /* templating: one per spec, then the HTTP/2 values */
  nhb__seg* tmpl_segs;
  size_t rq_h1_max;    /* templating: the longest HTTP/1 expansion (head_max + body_max) */
  size_t rq_body_max;  /* ... the longest body */
  size_t rq_hdr_max;   /* ... the longest sum of one spec's HTTP/2 values */
  size_t rq_nvlen_max; /* the longest HTTP/2 header block, in fields */
  /* Live statistics (interval.c): the controller owns everything here but
   * ivl_epoch (read by the workers) and the queue (under `lock`). */
  _Atomic uint64_t ivl_epoch; /* the interval the workers record into */
  int ivl_waiting;            /* epoch bumped, the previous one not collected yet */
  uint64_t ivl_next_ns;       /* when to close the current interval */
  uint64_t ivl_start_ns;      /* when the interval being collected began */
  uint64_t ivl_bump_ns;       /* when the controller last bumped the epoch */
  /* Per epoch parity: a worker was still warming when the epoch began. The
   * count of warming workers only falls, so an epoch that began with none
   * holds no warm-up request; one that began with some may. */
  int ivl_warm[2];
  uint64_t* ivl_last;         /* nworkers x NHB_COUNTER_ID_COUNT: counters at each worker's last close */
  nhb_hist* ivl_merge;        /* scratch for merging the workers' buffers */
  uint64_t ivl_count;         /* intervals queued so far */
  nhb_interval* ivl_queue;    /* closed intervals not taken yet */
  size_t ivl_len, ivl_cap;
  /* Response observation (observe.c): the latency response header's
   * name, lower-case, and its length; 0 = off, and the sessions then install
   * callbacks that do not look at it at all. */
  uint32_t olat_len;
  char olat_name[NHB__OLAT_NAME_MAX + 1];
  /* The response observers that are on (observer.c, NHB__OBS_* bits); 0:
   * the sessions keep their plain callbacks. */
  uint32_t obs;
  /* Response checks (check.c); chk.n == 0 without any. */
  nhb__chk_set chk;
  /* Statistics per group (group.c), NULL without groups. */
  struct nhb__grp_run* grp;
  /* Echo (session_echo.c): the run's own copy of the payload;
   * config.echo_payload points here once its run_init has run. */
  char* echo_payload;
  /* Proxies (tunnel.c): the CONNECT request each target's connections send. */
  nhb__run_tunnel tunnel;
  /* CONNECT-UDP (tunnel_udp.c): its own per-run state, NULL without one. */
  void* udp_tunnel;
  /* The protocol's own per-run state, of its session file's own type (HTTP/3:
   * the GnuTLS credentials and the request set's header blocks, built once
   * per run by its run_init, freed by its run_free). */
  void* proto;
  size_t trace_h1_cap; /* tracing, HTTP/1.1: the size of a connection's trace_buf */
};

/* The transports a protocol's record may name (or that a session's own
 * transport wraps, as HTTP/3's QUIC wraps UDP). The sessions are reached
 * through their records only, except the udp:// echo session, which
 * transport_udp.c recognises to count unexpected datagrams. */
extern const nhb__transport_vtable nhb__transport_tcp;
extern const nhb__transport_vtable nhb__transport_tls;
extern const nhb__transport_vtable nhb__transport_udp;
extern const nhb__session_vtable nhb__session_udp_echo;

/* tunnel.c: CONNECT through an HTTP proxy. A connection of a run with a
 * tunnel starts on nhb__transport_tunnel, which hands it to the protocol's
 * own transport once the proxy answered 2xx. The run_init checks and copies
 * the requests (and drops the setup histogram of a run without a tunnel);
 * the pool calls the conn hooks on connection failures only, to count the
 * tunnel's by cause. The rx functions are the answer's parser alone (the
 * fuzz target feeds them). */
extern const nhb__transport_vtable nhb__transport_tunnel;
int nhb__tunnel_run_init(nhb_run* run, char* err, size_t err_len);
void nhb__tunnel_run_free(nhb_run* run);
void nhb__tunnel_conn_failed(nhb__conn* c, int err);
void nhb__tunnel_conn_lost(nhb__conn* c, int err);
void nhb__tunnel_rx_init(llhttp_t* p, nhb__tunnel_rx* rx);
/* The proxy's HTTP/1.1 answer read from `data` (tunnel.c); on a 2xx the
 * tunnel is up (nhb__tunnel_up) and any bytes after the answer go on. */
int nhb__tunnel_answer(nhb__conn* c, const char* data, size_t len);
/* The tunnel is up: counted, timed, and the protocol's transport started. */
void nhb__tunnel_up(nhb__conn* c);
/* The transport the protocol would use without a proxy. */
const nhb__transport_vtable* nhb__tunnel_inner(const nhb__conn* c);
/* Counts a failed tunnel by its cause and records the first error's text:
 * fmt takes (authority, a), or (status, authority) when status != 0. */
void nhb__tunnel_count(nhb__conn* c, nhb_counter_t cause, const char* fmt, const char* a, int status);
/* carrier.c: the proxy leg of a tunnel over TLS to the proxy and/or an
 * HTTP/2 CONNECT stream. A carried connection starts and stays on
 * nhb__transport_carried, which runs the protocol's transport (TLS or TCP
 * to the origin) above it; TLS to the origin hands its ciphertext to
 * nhb__carrier_send in place of the socket (transport_tls.c). */
extern const nhb__transport_vtable nhb__transport_carried;
int nhb__carrier_run_init(nhb_run* run, char* err, size_t err_len);
void nhb__carrier_run_free(nhb_run* run);
void nhb__carrier_conn_free(nhb__conn* c);
void nhb__carrier_worker_free(nhb__worker* w);
/* Takes bytes for the proxy leg: 0 taken (the caller's buffer is free), 1
 * taken later (nhb__tls_carried_written follows for TLS), < 0 an error. */
int nhb__carrier_send(nhb__conn* c, const char* data, size_t len);
/* transport_tls.c: the carrier took the ciphertext it had kept. */
void nhb__tls_carried_written(nhb__conn* c);
/* Returns 0: more is needed; 1: the final answer's head is complete (its
 * status in rx->status, *used bytes of data were its); -1: malformed or over
 * a limit (rx->why says which). */
int nhb__tunnel_rx_feed(llhttp_t* p, nhb__tunnel_rx* rx, const char* data, size_t len, size_t* used);

/* tunnel_udp.c: HTTP/3 through a CONNECT-UDP proxy (RFC 9298). The HTTP/3
 * session (session_h3.c) owns one per connection entry when the run has a
 * proxy: its socket then carries the tunnel's outer QUIC connection, and the
 * inner connection's packets go through nhb__udp_tunnel_send and come back
 * through nhb__h3_tunnel_packet. The inner connection's largest packet is
 * QUIC's smallest allowed, so that it fits a DATAGRAM frame of the outer. */
#define NHB__UDP_TUNNEL_INNER_MAX 1200
typedef struct nhb__udp_tunnel nhb__udp_tunnel;
int nhb__udp_tunnel_run_init(nhb_run* run, char* err, size_t err_len);
void nhb__udp_tunnel_run_free(nhb_run* run);
const char* nhb__udp_tunnel_authority(const nhb_run* run);
int nhb__udp_tunnel_new(nhb__conn* c, nhb__udp_tunnel** out);
int nhb__udp_tunnel_start(nhb__conn* c, nhb__udp_tunnel* t, const struct sockaddr* local, size_t local_len,
                          const nhb_sockaddr* to);
int nhb__udp_tunnel_read(nhb__conn* c, nhb__udp_tunnel* t, const char* data, size_t len);
int nhb__udp_tunnel_send(nhb__conn* c, nhb__udp_tunnel* t, const uint8_t* pkt, size_t len);
void nhb__udp_tunnel_teardown(nhb__udp_tunnel* t);
void nhb__udp_tunnel_close(nhb__conn* c, nhb__udp_tunnel* t);
void nhb__udp_tunnel_free(nhb__udp_tunnel* t);
/* The proxy's bytes on its streams (the CONNECT stream, a unidirectional
 * one: 0, or -1 once it broke HTTP/3) and its datagrams, as ngtcp2 hands
 * them over. The fuzz target (fuzz_client_udp_tunnel.c) drives them on a
 * tunnel from nhb__udp_tunnel_parser_new: no QUIC, the CONNECT sent;
 * nhb__udp_tunnel_parsed gives the final answer's status (0: none yet), why
 * it broke and how many datagrams wait for the inner connection. */
int nhb__udp_tunnel_stream_bytes(nhb__udp_tunnel* t, int64_t sid, const uint8_t* data, size_t len, int fin);
void nhb__udp_tunnel_datagram(nhb__udp_tunnel* t, const uint8_t* data, size_t len);
nhb__udp_tunnel* nhb__udp_tunnel_parser_new(nhb__conn* c);
int nhb__udp_tunnel_parsed(const nhb__udp_tunnel* t, const char** why, uint32_t* queued);
int nhb__h3_tunnel_up(nhb__conn* c);
/* The HTTP/3 proxy leg of a TCP tunnel (proxy_protocol 3): tunnel_udp.c's
 * QUIC connection to the proxy with a classic CONNECT on its request stream;
 * carrier.c's nhb__transport_carried_h3 owns the UDP socket and runs the
 * inner transport above it. stream_put frames bytes as DATA into the
 * connection's ring and returns how many it took (0: the ring is full, and
 * nhb__carrier_h3_room is called once acknowledgements made room). */
extern const nhb__transport_vtable nhb__transport_carried_h3;
int nhb__udp_tunnel_stream_run_init(nhb_run* run, char* err, size_t err_len);
void nhb__udp_tunnel_stream_run_free(nhb_run* run);
int nhb__udp_tunnel_stream_start(nhb__conn* c, nhb__udp_tunnel* t, const struct sockaddr* local, size_t local_len,
                                 const nhb_sockaddr* to);
size_t nhb__udp_tunnel_stream_put(nhb__conn* c, nhb__udp_tunnel* t, const char* data, size_t len);
void nhb__udp_tunnel_stream_close(nhb__conn* c, nhb__udp_tunnel* t, int live);
/* The connection closes mid-run: a CONNECTION_CLOSE while the socket is open
 * (the pool's conn_close, through nhb__carrier_h3_closing). */
void nhb__udp_tunnel_stream_closing(nhb__conn* c, nhb__udp_tunnel* t);
void nhb__carrier_h3_closing(nhb__conn* c);
void nhb__udp_tunnel_stream_free(nhb__udp_tunnel* t);
void nhb__carrier_h3_room(nhb__conn* c);
void nhb__carrier_worker_close(nhb__worker* w);
/* The fuzz target's seam: `on` makes a parser tunnel read a classic
 * CONNECT's answer (DATA after a 2xx is counted, not handed on); returns the
 * bytes counted so far. */
uint64_t nhb__udp_tunnel_parser_stream(nhb__udp_tunnel* t, int on);
void nhb__h3_tunnel_packet(nhb__conn* c, const uint8_t* data, size_t len);
/* What tunnel_udp.c's legs share: a failure by cause (counted once, the
 * connection failed), and the tunnel coming up after a 2xx (counted, the
 * inner connection started; < 0 when that failed the connection). */
void nhb__udp_tunnel_fail(nhb__conn* c, nhb_counter_t cause, const char* what);
int nhb__udp_tunnel_established(nhb__conn* c, nhb__udp_tunnel* t);

/* tunnel_udp_h2.c: CONNECT-UDP on an HTTP/2 stream (proxy_protocol 2): the
 * leg tunnel_udp.c hands a connection's tunnel to. */
typedef struct nhb__udp_h2 nhb__udp_h2;
int nhb__udp_h2_run_init(const nhb_run* run, void** out, char* err, size_t err_len);
void nhb__udp_h2_run_free(void* part);
nhb__udp_h2* nhb__udp_h2_new(nhb__conn* c, nhb__udp_tunnel* t, const void* run_part);
int nhb__udp_h2_start(nhb__udp_h2* h, const nhb_sockaddr* to);
int nhb__udp_h2_send(nhb__udp_h2* h, const uint8_t* pkt, size_t len);
void nhb__udp_h2_teardown(nhb__udp_h2* h);
void nhb__udp_h2_close(nhb__udp_h2* h);
void nhb__udp_h2_free(nhb__udp_h2* h);
/* carrier.c's TLS context for a proxy (ALPN h2 when `h2`), shared. */
int nhb__proxy_ssl_ctx(const nhb_tls_config* pc, int h2, void** out, char* err, size_t err_len);

/* The capsule reader (RFC 9297 section 3.2) of the HTTP/2 leg: capsules in
 * pieces as DATA frames cut them. DATAGRAM capsules (type 0) of context id
 * 0 with a payload queue their payload; other types are skipped; DATAGRAM
 * capsules with another context id, none, an empty payload, a value over
 * NHB__CAPSULE_VALUE_MAX or no room in the queue count in *dropped.
 * nhb__capsule_rx_next pops the queue (the payload stays valid until the
 * next feed); _partial: inside a capsule (a stream ending there is
 * malformed). The fuzz target fuzz_client_capsules.c drives it alone. */
#define NHB__CAPSULE_VALUE_MAX 1508
#define NHB__CAPSULE_QBYTES 32768
#define NHB__CAPSULE_QN 512
typedef struct nhb__capsule_rx {
  uint8_t vbuf[8];
  uint8_t vn;
  uint8_t stage; /* 0 type, 1 length, 2 value */
  int keep;      /* the value being read is a DATAGRAM kept in q */
  uint64_t type, left;
  uint32_t start, qlen; /* the kept value's first byte; bytes in q */
  uint32_t nq, popped;
  uint16_t qoff[NHB__CAPSULE_QN];
  uint16_t qn[NHB__CAPSULE_QN];
  uint8_t q[NHB__CAPSULE_QBYTES];
} nhb__capsule_rx;
void nhb__capsule_rx_init(nhb__capsule_rx* k);
void nhb__capsule_rx_feed(nhb__capsule_rx* k, const uint8_t* p, size_t len, uint64_t* dropped);
int nhb__capsule_rx_next(nhb__capsule_rx* k, const uint8_t** payload, size_t* len);
uint32_t nhb__capsule_rx_queued(const nhb__capsule_rx* k);
int nhb__capsule_rx_partial(const nhb__capsule_rx* k);

/* observe.c: the latency response header (--latency-response-header-name).
 * nhb__observe_init() checks and copies the name at run creation and drops
 * the origin latency histograms of a run that does not measure it. The
 * sessions feed a response's header names and values through the rest and
 * call nhb__olat_finish() once its headers are complete. */
int nhb__observe_init(nhb_run* run, char* err, size_t err_len);
void nhb__olat_reset(nhb__olat* o);
void nhb__olat_name(nhb__olat* o, const nhb_run* run, const char* at, size_t len);
void nhb__olat_value(nhb__olat* o, const nhb_run* run, const char* at, size_t len);
void nhb__olat_value_end(nhb__olat* o, const nhb_run* run);
void nhb__olat_finish(nhb__olat* o, nhb__worker* w);

/* observer.c: the response observers, the features that look at a
 * response's fields and body: the latency response header (observe.c),
 * response checks (check.c), grouping by a response header (group.c),
 * streaming statistics (stream.c) and gRPC (session_grpc.c). Which of them
 * a run has is chosen once at run creation (run->obs, NHB__OBS_* bits); each
 * session calls one step per response event, which passes it to every
 * observer that is on, in one place, so that no feature's hook can be left
 * out of another's. A session installs its observed callbacks only when
 * run->obs is not 0: a run without any keeps the plain ones and pays nothing
 * per field or body piece. */
#define NHB__OBS_OLAT 1u
#define NHB__OBS_CHK 2u
#define NHB__OBS_GRP 4u
#define NHB__OBS_STR 8u
#define NHB__OBS_GRPC 16u
/* The run's observers, from what its init functions set up. */
uint32_t nhb__obs_mask(const nhb_run* run);
/* HTTP/2 and HTTP/3, whole fields. A header block of slot s's response
 * begins (the first one, or the one after an interim response; never
 * trailers): every observer starts the response afresh, so nothing an
 * interim response carried counts for the final one. NHB_ENOMEM when the
 * checks' state of the slot cannot be allocated (the request must end). */
int nhb__obs_begin(nhb__worker* w, nhb__slot* s);
/* One regular field (lower-case name, not a pseudo-header) of that block,
 * or of the trailers (`trailer`): the trailers are only gRPC's. */
void nhb__obs_field(nhb__worker* w, nhb__slot* s, const char* name, size_t namelen, const char* value,
                    size_t valuelen, int trailer);
/* The block ended, s->status its status (1xx: an interim response). */
void nhb__obs_head_end(nhb__worker* w, nhb__slot* s);
/* Body bytes of the final response, and the end of a body piece (an HTTP/2
 * DATA frame, an HTTP/3 DATA piece); `now` 0: read the clock if needed. */
void nhb__obs_data(nhb__worker* w, nhb__slot* s, const char* at, size_t len, uint64_t now);
void nhb__obs_piece(nhb__worker* w, nhb__slot* s, uint64_t now);
/* The response ended (END_STREAM, FIN): the observers' end, then the
 * response is reported (gRPC's call end, the checks' verdict, or plain). */
void nhb__obs_end(nhb__conn* c, nhb__slot* s);
/* HTTP/1.1, fields in pieces as llhttp hands them over, with the
 * connection's state: a message (head) begins, a piece of a field's name,
 * of its value (len may be 0: an empty value), the field's end, the head's
 * end (status), body bytes (chunked: the body is framed in chunks), a
 * chunk's size line and end, and the message's end. Only head fields, never
 * trailers, reach the field steps. */
void nhb__obs_h1_begin(nhb__conn* c);
void nhb__obs_h1_name(nhb__conn* c, const char* at, size_t len);
void nhb__obs_h1_value(nhb__conn* c, const char* at, size_t len);
void nhb__obs_h1_value_end(nhb__conn* c);
void nhb__obs_h1_head_end(nhb__conn* c, int status);
void nhb__obs_h1_body(nhb__conn* c, const char* at, size_t len, int chunked);
void nhb__obs_h1_chunk(nhb__conn* c, uint64_t size);
void nhb__obs_h1_chunk_end(nhb__conn* c);
void nhb__obs_h1_end(nhb__conn* c, int status);

/* group.c: statistics per group (request kind, target, or a response
 * header's value). The run's part is set up at run creation and merged
 * with the endpoints; the pool records through response_extras and
 * slot_fail; the sessions call the header functions only when
 * nhb__grp_by_header() (their callbacks for it are installed only then). */
int nhb__grp_run_init(nhb_run* run, char* err, size_t err_len);
void nhb__grp_run_free(nhb_run* run);
int nhb__grp_by_header(const nhb_run* run);
void nhb__grp_end_warmup(nhb__worker* w);
void nhb__grp_merge(nhb_run* run);
/* The worker's group counts for the live view (nhb_run_group_progress):
 * called with the other live counters, every 10 ms, not per request. */
void nhb__grp_publish(nhb__worker* w);
void nhb__grp_response(nhb__worker* w, nhb__slot* s, uint64_t latency, int klass);
void nhb__grp_failed(nhb__worker* w, nhb__slot* s, nhb_counter_t reason);
/* The requests in the worker's groups (the fuzz targets' invariant). */
uint64_t nhb__grp_requests(const nhb__worker* w);
/* The entry of a header value in the worker's table (at most
 * NHB_MAX_GROUPS values, then "other"). */
uint32_t nhb__grp_value_index(nhb__worker* w, const char* v, size_t len);
/* HTTP/2, HTTP/3: one whole response field. */
void nhb__grp_field(nhb__worker* w, nhb__slot* s, const char* name, size_t namelen, const char* value,
                    size_t valuelen);
/* HTTP/1.1: a response's fields in pieces, as llhttp hands them over. */
nhb__grp_h1* nhb__grp_h1_new(void);
void nhb__grp_h1_free(nhb__grp_h1* h);
void nhb__grp_h1_begin(nhb__grp_h1* h, nhb__slot* s);
void nhb__grp_h1_name(nhb__grp_h1* h, const nhb_run* run, const char* at, size_t len);
void nhb__grp_h1_value(nhb__grp_h1* h, const nhb_run* run, const nhb__slot* s, const char* at, size_t len);
void nhb__grp_h1_value_end(nhb__grp_h1* h, nhb__worker* w, nhb__slot* s);

/* pool.c */
/* Copies and checks the targets (run->targets, run->spec_target) at run
 * creation; frees them with the run. */
int nhb__pool_run_init(nhb_run* run, char* err, size_t err_len);
void nhb__pool_run_free(nhb_run* run);
/* Per-endpoint statistics: the warm-up's requests are dropped when it ends
 * (its connections stay counted); the workers' are merged when the run ends. */
void nhb__pool_endpoints_end_warmup(nhb__worker* w);
void nhb__pool_endpoints_merge(nhb_run* run);
void nhb__pool_endpoints_publish(nhb__worker* w);
int nhb__pool_init(nhb__worker* w);
void nhb__pool_free(nhb__worker* w);
void nhb__pool_prefetch(nhb__worker* w);
/* Hands a released request to a connection, starts a connection for it or
 * queues it. Returns 1 if taken, 0 if there is no capacity. */
int nhb__pool_dispatch(nhb__worker* w, uint64_t scheduled_ns, uint64_t release_ns, uint32_t spec);
/* Can a request go out at once? A connection with a free slot (or an entry to
 * open one, unless new connections are backing off) and, for HTTP/2, fewer
 * than --max-active-requests in flight. */
/* splitmix64, the client's one generator (jitter, templated values, endpoint
 * picks, trace sampling and ids): one add and a few multiplies per number,
 * every seed a full period, one word of state per worker, so no lock and no
 * system call. Not cryptographic, which a load test does not need. */
static inline uint64_t nhb__splitmix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

static inline int nhb__pool_has_connection_to(const nhb__worker* w, uint32_t target) {
  const nhb__target_pool* tp = &w->tp[target];
  return (tp->navail > 0 || (tp->nfree > 0 && !w->backoff_active)) && w->in_flight < w->max_in_flight;
}
/* The same for the worker's next release (nhb__next_spec's entry): with
 * several targets it can go out only on a connection to its own target. A
 * run with one target pays one predictable branch. */
static inline int nhb__pool_has_connection(const nhb__worker* w) {
  uint32_t t = 0;
  if (NHB__UNLIKELY(w->ntargets > 1)) t = w->run->spec_target[w->spec_next];
  return nhb__pool_has_connection_to(w, t);
}
void nhb__pool_scan_timeouts(nhb__worker* w, uint64_t now);
void nhb__pool_close_all(nhb__worker* w);
/* Called by the transport when plaintext can flow. */
void nhb__conn_ready(nhb__conn* c);
/* Called by the transport when the peer ended the stream of bytes. */
void nhb__conn_eof(nhb__conn* c);
/* What the socket's read callback does with one read: nread > 0 bytes at
 * `data` go through the transport to the session, UV_EOF or an error ends
 * the connection. The fuzz targets (csrc/fuzz/) call it to deliver their
 * input as received bytes without a socket. */
void nhb__conn_read(nhb__conn* c, ssize_t nread, const char* data);
/* Called by the session when the response of slot `s` ended. */
void nhb__conn_response(nhb__conn* c, nhb__slot* s, int status);
/* Called by the session when one request failed and the connection lives on
 * (HTTP/2 RST_STREAM): counts it against `reason` and frees the slot. */
void nhb__conn_slot_failed(nhb__conn* c, nhb__slot* s, nhb_counter_t reason);
/* A 2xx response that failed a check: an error (benchmark.check_failed),
 * its latency in latency_check_failed only. */
void nhb__conn_check_failed(nhb__conn* c, nhb__slot* s);
/* The latency phases' worker histograms (phases.c): allocated with the run,
 * folded into w->stats before anything reads them (warm-up end, loop end). */
int nhb__phases_alloc(nhb__worker* w);
void nhb__phases_free(nhb__worker* w);
void nhb__phases_fold(nhb__worker* w);
/* Called by the session when the server refused a stream it never processed
 * (GOAWAY above its last stream id, REFUSED_STREAM): the request is re-sent
 * on a new connection once this one has closed. */
void nhb__conn_slot_refused(nhb__conn* c, nhb__slot* s);
/* Called by the session when the connection may take another request (a
 * stream ended, SETTINGS raised the limit) or must take no more (draining). */
void nhb__conn_update(nhb__conn* c);
/* Closes a connection after an error; fails every request it carries. */
void nhb__conn_fail(nhb__conn* c, int err, nhb_counter_t reason);
/* The source address connection `c` binds to (round-robin over
 * config.sources by its place in the run), NULL without --source-address. */
const nhb_sockaddr* nhb__conn_source(const nhb__conn* c);

/* DNS per connection (dns.c and pool.c). conn_open starts a connection's
 * handle and connect to `to`; conn_fail_unopened fails a connection that has
 * no handle (its requests, the connect failure, the back-off) and frees its
 * entry; conn_closed is the close callback's work after the handle is gone
 * (or was never made). */
int nhb__dns_run_init(nhb_run* run, char* err, size_t err_len);
int nhb__dns_start(nhb__worker* w, nhb__conn* c);
void nhb__conn_open(nhb__worker* w, nhb__conn* c, const nhb_sockaddr* to);
void nhb__conn_fail_unopened(nhb__worker* w, nhb__conn* c, int err);
void nhb__conn_closed(nhb__conn* c);
void nhb__worker_record_error(nhb__worker* w, int err);
/* The same, with an explanation that replaces the code's generic message in
 * the run's first error (OpenSSL's reason, for instance). */
void nhb__worker_record_error_text(nhb__worker* w, int err, const char* text);

/* transport_tls.c */
int nhb__tls_ctx_create(nhb_run* run, char* err, size_t err_len);
void nhb__tls_ctx_free(nhb_run* run);
void nhb__tls_worker_free(nhb__worker* w);
void nhb__tls_conn_free(nhb__conn* c);

/* transport_udp.c: sends one datagram gathered from `n` buffers, at once or
 * not at all (UV_EAGAIN when the socket buffer is full); the buffers may be
 * reused as soon as it returns. The udp:// echo session sends its sequence
 * number and the run's payload this way, without copying them together. */
int nhb__udp_send(nhb__conn* c, const uv_buf_t* bufs, unsigned n);

/* session_grpc.c: gRPC, a flag on the HTTP/2 session (config.grpc). HTTP/2
 * carries the call; these read what gRPC adds to its response: the
 * grpc-status and grpc-message fields, the length-prefixed messages of the
 * DATA, and the call's end, which counts the status and reports the request
 * once. session_h2.c calls them from its gRPC callbacks only, so a plain
 * HTTP/2 run never reaches them. */
/* Before a call's request goes out: no status yet, no message begun. */
static inline void nhb__grpc_call_start(nhb__slot* s) {
  s->grpc_status = -1;
  s->grpc_prefix = 0;
  s->grpc_left = 0;
  s->grpc_bad = 0;
}
/* A response field whose name starts with "grpc-". */
void nhb__grpc_on_field(nhb__worker* w, nhb__slot* s, const uint8_t* name, size_t namelen, const uint8_t* value,
                        size_t valuelen);
/* A chunk of the response's DATA. */
void nhb__grpc_on_data(nhb__slot* s, const uint8_t* data, size_t len);
/* The response ended (END_STREAM): reports the request. */
void nhb__grpc_end(nhb__conn* c, nhb__slot* s);

/* The request set's next entry for a release of this worker: every worker
 * cycles through the run's request set from its first entry, in order (as
 * each of Nighthawk's workers has its own request source). A run with a
 * single request pays one predictable branch. */
static inline uint32_t nhb__next_spec(nhb__worker* w) {
  uint32_t n = w->run->config.nspecs;
  if (NHB__LIKELY(n <= 1)) return 0;
  uint32_t k = w->spec_next;
  w->spec_next = k + 1 == n ? 0 : k + 1;
  return k;
}

/* request.c */
/* Copies the request set (config.specs) into the run and, with templating,
 * splits every template. */
int nhb__request_set_create(nhb_run* run, char* err, size_t err_len);
void nhb__request_set_free(nhb_run* run);
/* Templating: the worker's buffers and generator (nothing otherwise). */
int nhb__request_worker_init(nhb__worker* w);
void nhb__request_worker_free(nhb__worker* w);
/* Expands segments [from, to) of `t` into out (at most cap bytes); returns
 * the length, or SIZE_MAX if it would not fit (never, with buffers sized
 * from the template's maxima; checked all the same). */
size_t nhb__tmpl_expand(const nhb__tmpl* t, uint32_t from, uint32_t to, const nhb__tmpl_ctx* x, char* out,
                        size_t cap);
/* Templating, HTTP/2: splits the header field values of one spec's header
 * block (an nghttp2_nv array that session_h2.c built at run creation). */
int nhb__request_h2_values(nhb_run* run, uint32_t spec, const void* nva, size_t nvlen);
/* Templating: the context of the next request a worker sends. */
void nhb__request_ctx(nhb__worker* w, nhb__tmpl_ctx* x);
/* Templating, HTTP/1: expands the request for connection c into its buffer. */
int nhb__request_h1_expand(nhb__conn* c, const nhb__spec* sp, const char** out, size_t* len);
/* One linear stage, precomputed (sequencer.c): it begins start_ns after the
 * worker's start, when count_start releases are due, and its rate goes from
 * a to b releases per ns over duration_ns. */
typedef struct nhb__stage {
  uint64_t start_ns;
  uint64_t duration_ns;
  double count_start;
  double a, b;
} nhb__stage;

/* sequencer.c */
/* Precomputes run->stages from the config; allocation at run creation. */
int nhb__sequencer_run_init(nhb_run* run);
/* Sets a worker's schedule for its first phase (warm-up or measured). */
void nhb__sequencer_worker_start(nhb__worker* w);
/* Moves the warm-up's statistics apart (w->warm); no event-loop calls, so
 * that the merge can use it on a worker stopped during its warm-up. */
void nhb__sequencer_end_warmup(nhb__worker* w);
/* The warm-up is over and drained: starts the measured phase now. */
void nhb__sequencer_next_phase(nhb__worker* w);
/* Stages: counts a response to the request scheduled at `scheduled_ns`
 * against its stage. One predictable branch for runs without stages. */
void nhb__sequencer_stage_response(nhb__worker* w, uint64_t scheduled_ns);
static inline void nhb__stage_response(nhb__worker* w, uint64_t scheduled_ns) {
  if (NHB__UNLIKELY(w->stage_responses != NULL)) nhb__sequencer_stage_response(w, scheduled_ns);
}
int nhb__sequencer_init(nhb__worker* w);
/* Releases every request that is due and arms the wake-up for the next one. */
void nhb__sequencer_run(nhb__worker* w);
void nhb__sequencer_close(nhb__worker* w);
/* Stops releasing now (a stop request or a predicate) and drains in-flight
 * requests for at most drain_ns. */
void nhb__sequencer_stop_now(nhb__worker* w, uint64_t drain_ns);

/* client.c */
void nhb__worker_maybe_finish(nhb__worker* w);
/* Nothing is in flight and the next release is at least this far away: the
 * worker may sleep through its housekeeping ticks (client.c). */
#define NHB__IDLE_SKIP_MIN_NS (50 * NHB__NS_PER_MS)
/* A response left the worker with nothing in flight and its next release
 * NHB__IDLE_SKIP_MIN_NS or more away: publishes now and sleeps through the
 * ticks until after that release. */
void nhb__worker_went_idle(nhb__worker* w, uint64_t now);
/* Publishes the worker's counters for the controller and the progress. */
void nhb__worker_publish(nhb__worker* w);
/* Asks every worker's loop to run on_wakeup (stop requests, new intervals). */
void nhb__run_wake_workers(nhb_run* run);
/* Wakes the controller (any thread; a no-op while a kick is pending). */
void nhb__run_kick(nhb_run* run);

/* interval.c */
int nhb__ivl_alloc(nhb_run* run);
void nhb__ivl_free(nhb_run* run);
/* Worker: switches to the controller's new interval if there is one. */
void nhb__ivl_worker_poll(nhb__worker* w);
/* Worker, at its very end: closes its last interval for the controller. */
void nhb__ivl_worker_close(nhb__worker* w);
/* Controller: closes intervals on time and collects them (every tick). */
void nhb__ivl_controller_tick(nhb_run* run, uint64_t now);
/* Controller, after every worker has been joined: collects the rest. */
void nhb__ivl_controller_finish(nhb_run* run);

/* trace.c: traces (config.trace_sample_rate). */
/* The longest trace header block: traceparent and the three B3 fields. */
#define NHB__TRACE_HDR_MAX 192
/* Checks the config and allocates each worker's ring, after the protocol's run_init. */
int nhb__trace_run_init(nhb_run* run, char* err, size_t err_len);
void nhb__trace_run_free(nhb_run* run);
/* What the per-request decision reads: the first members of the worker's
 * nhb__trace (trace.c), so that the draw is inlined into the traced sends and
 * only a sampled request makes a call. */
typedef struct nhb__trace_draw {
  uint64_t rng;       /* splitmix64 state */
  uint64_t threshold; /* sampled when a draw is at most this: rate * 2^64 - 1, UINT64_MAX for 1 */
} nhb__trace_draw;
/* A sampled request: draws its ids into the slot and counts it. */
int nhb__trace_start(nhb__worker* w, nhb__slot* s);
/* Decides whether the request in `s` is traced (a retry keeps its decision). */
static inline int nhb__trace_sample(nhb__worker* w, nhb__slot* s) {
  if (s->span_id != 0) return 1;
  nhb__trace_draw* d = (nhb__trace_draw*)(void*)w->trace;
  if (NHB__LIKELY(nhb__splitmix64(&d->rng) > d->threshold)) return 0;
  return nhb__trace_start(w, s);
}
/* HTTP/1.1: `in` (a request's head and body) with the trace headers of `s`
 * before the blank line, into c->trace_buf. */
int nhb__trace_h1(nhb__conn* c, const nhb__slot* s, const char* in, size_t len, const char** out, size_t* out_len);
/* HTTP/2: the header block `nva` with the trace fields of `s` appended, in
 * the worker's scratch (nghttp2 copies it on submit). */
const void* nhb__trace_h2(nhb__worker* w, const nhb__slot* s, const void* nva, size_t* nvlen);
/* HTTP/3: the same for an nghttp3 header block (nghttp3 copies it on submit). */
const void* nhb__trace_h3(nhb__worker* w, const nhb__slot* s, const void* nva, size_t* nvlen);
/* The request of a sampled slot ended: status > 0 a response, else `reason`. */
void nhb__trace_end(nhb__worker* w, nhb__slot* s, int status, nhb_counter_t reason, uint64_t now);

/* The hot path's only cost of live statistics: with intervals off, one test
 * of a pointer that never changes, which the branch predictor gets right. */
static inline void nhb__ivl_record(nhb__worker* w, uint64_t value) {
  if (w->ivl_hist != NULL) nhb_hist_record(w->ivl_hist, value);
}

#endif /* NHB_CLIENT_H */
