/* server_h3.c: HTTP/3 in the test server: QUIC through ngtcp2 (its handshake
 * on GnuTLS through ngtcp2_crypto_gnutls, as the client does: OpenSSL 3.0
 * has no QUIC API), HTTP/3 framing and QPACK through nghttp3.
 *
 * Sockets: with config.http3, every TCP listen address gets a UDP socket on
 * the same port number, one per worker bound with SO_REUSEPORT, as the TCP
 * listeners are. The kernel spreads datagrams over a port group by their
 * 4-tuple, so every datagram of one client socket reaches the same worker,
 * and a connection lives on one worker's loop like a TCP one. A worker finds
 * the connection of a datagram by the client's address (a hash table per
 * worker): connection migration is not supported, and a client that changes
 * address starts over.
 *
 * Requests: each request stream is captured into the same nhb__srv_req as
 * HTTP/1.1 and HTTP/2 use, and answered by nhb__srv_reply_build(), so every
 * response option (Nighthawk's, per-request headers included, Fortio's echo
 * parameters, delays, stalls, /debug) behaves the same. Each QUIC connection
 * embeds an nhb__srv_conn (proto NHB__SRV_PROTO_H3, no socket of its own),
 * which is what reply_build and the worker's delay heap take: a delayed
 * response waits in the heap, and the heap's timer calls nhb__srv_h3_flush().
 *
 * Counting: a response counts (requests, status) when its last byte and
 * FIN are written into a packet handed to the socket, as an HTTP/2 one
 * counts when its END_STREAM frame is; a stream that closes before that
 * (reset by the client, or failed) counts in h3_streams_reset. Connections count in connections_total,
 * connections_active, connections_http3 and against max_connections from
 * their first Initial packet; a completed handshake in tls_handshakes, a
 * connection that ended before one in tls_handshake_errors.
 *
 * Output: after each datagram is processed, and when ngtcp2's timer expires,
 * the connection writes what ngtcp2 and nghttp3 have, one datagram per
 * packet with uv_udp_try_send on the worker's socket (a full socket buffer
 * drops the packet; QUIC retransmits).
 *
 * Closing: a connection that fails or idles out sends its CONNECTION_CLOSE
 * once and is freed at once (no closing period that would answer later
 * packets with it again): a client that lost it ends at its idle time-out.
 *
 * Allocation: per connection, ngtcp2, nghttp3 and GnuTLS allocate their
 * state and the connection struct is calloc'd; per request, ngtcp2 and
 * nghttp3 allocate stream objects through the worker's recycling allocator
 * (h2_mem.c), and the stream structs (with their grown buffers) are recycled
 * through a per-worker free list, so a warm worker calls no malloc per
 * request. The response header array is per worker and grows only.
 */
#include <arpa/inet.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <nghttp3/nghttp3.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/quic_common.h"
#include "server/server_internal.h"
#include "server/server_stream.h"

/* The largest UDP payload written (ngtcp2's default ceiling fits). */
#define H3_PKT_MAX 1500
/* Our server connection IDs. */
#define H3_SCID_LEN 18
/* Windows large enough that flow control never limits a test. */
#define H3_STREAM_WINDOW (1ull << 24)
#define H3_CONNECTION_WINDOW (1ull << 30)
/* Without an idle_timeout, QUIC's own (a connection must end some time). */
#define H3_DEFAULT_IDLE_NS (60ull * 1000000000ull)
#define H3_HANDSHAKE_TIMEOUT_NS (10ull * 1000000000ull)
#define H3_MAX_FREE_STREAMS 1024
#define H3_VECS 16
#define H3_HASH_MIN 256

typedef struct nhb__srv_h3c nhb__srv_h3c;
typedef struct nhb__srv_h3s nhb__srv_h3s;

/* One request stream. */
struct nhb__srv_h3s {
  nhb__srv_h3s *prev, *next; /* the connection's streams, or the free list */
  nhb__srv_h3c* q3;
  int64_t id;
  uint8_t submitted;
  uint8_t complete; /* our FIN went out: counted */
  nhb__srv_stream_core core; /* request, response, buffers (server_stream.h) */
};

/* One QUIC connection. `base` first: the delay heap and reply_build see it. */
struct nhb__srv_h3c {
  nhb__srv_conn base;
  nhb__srv_h3c* hnext; /* the worker's hash chain */
  nhb__srv_h3c *prev, *next; /* the worker's list */
  nhb__srv_listener* l;
  struct sockaddr_storage peer, local;
  socklen_t peer_len, local_len;
  uint64_t key;
  ngtcp2_cid odcid, scid; /* the client's first destination ID and ours: its Initials name one */
  ngtcp2_crypto_conn_ref conn_ref;
  ngtcp2_conn* qc;
  nghttp3_conn* hc;
  gnutls_session_t tls;
  ngtcp2_mem qmem;
  nghttp3_mem hmem;
  uv_timer_t timer;
  uint8_t handshake_done;
  uint8_t dead; /* freed once the current call returns */
  uint8_t in_lib;
  uint8_t timer_closing;
  uint8_t shared; /* another connection has the same client address (by_id) */
  nhb__srv_h3s* streams;
  size_t nwaiting;
};

struct nhb__srv_h3w {
  nhb__srv_h3c** buckets;
  size_t nbuckets, nconns;
  nhb__srv_h3c* conns;
  nhb__srv_h3s* free_streams;
  size_t nfree;
  nghttp3_nv* nv;
  size_t nv_cap;
  uint8_t pkt[H3_PKT_MAX];
};

static void conn_write(nhb__srv_h3c* q3);
static void conn_drop(nhb__srv_h3c* q3);

static nhb__srv_h3c* h3c_of(const nhb__srv_conn* c) { return (nhb__srv_h3c*)(uintptr_t)c; }

/* ---- the address table ----------------------------------------------------------- */

static uint64_t addr_key(const struct sockaddr* sa) {
  /* FNV-1a over the port and address. */
  const uint8_t* p;
  size_t n;
  uint16_t port;
  if (sa->sa_family == AF_INET6) {
    const struct sockaddr_in6* in6 = (const struct sockaddr_in6*)sa;
    p = in6->sin6_addr.s6_addr;
    n = 16;
    port = in6->sin6_port;
  } else {
    const struct sockaddr_in* in = (const struct sockaddr_in*)sa;
    p = (const uint8_t*)&in->sin_addr;
    n = 4;
    port = in->sin_port;
  }
  uint64_t h = 1469598103934665603ull ^ port;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h ? h : 1;
}

static int addr_same(const struct sockaddr* a, const struct sockaddr_storage* b) {
  if (a->sa_family != b->ss_family) return 0;
  if (a->sa_family == AF_INET6) {
    const struct sockaddr_in6 *x = (const struct sockaddr_in6*)a, *y = (const struct sockaddr_in6*)b;
    return x->sin6_port == y->sin6_port && memcmp(&x->sin6_addr, &y->sin6_addr, 16) == 0;
  }
  const struct sockaddr_in *x = (const struct sockaddr_in*)a, *y = (const struct sockaddr_in*)b;
  return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
}

static nhb__srv_h3c* table_find(nhb__srv_h3w* t, const struct sockaddr* sa, uint64_t key) {
  if (!t->nbuckets) return NULL;
  for (nhb__srv_h3c* q3 = t->buckets[key & (t->nbuckets - 1)]; q3; q3 = q3->hnext)
    if (q3->key == key && addr_same(sa, &q3->peer)) return q3;
  return NULL;
}

static int table_add(nhb__srv_h3w* t, nhb__srv_h3c* q3) {
  if (t->nconns + 1 > t->nbuckets) {
    size_t n = t->nbuckets ? 2 * t->nbuckets : H3_HASH_MIN;
    nhb__srv_h3c** b = calloc(n, sizeof(*b));
    if (!b) return NHB_ENOMEM;
    for (size_t i = 0; i < t->nbuckets; i++)
      for (nhb__srv_h3c *x = t->buckets[i], *nx; x; x = nx) {
        nx = x->hnext;
        x->hnext = b[x->key & (n - 1)];
        b[x->key & (n - 1)] = x;
      }
    free(t->buckets);
    t->buckets = b;
    t->nbuckets = n;
  }
  nhb__srv_h3c** slot = &t->buckets[q3->key & (t->nbuckets - 1)];
  q3->hnext = *slot;
  *slot = q3;
  t->nconns++;
  return 0;
}

static void table_remove(nhb__srv_h3w* t, nhb__srv_h3c* q3) {
  if (!t->nbuckets) return;
  for (nhb__srv_h3c** p = &t->buckets[q3->key & (t->nbuckets - 1)]; *p; p = &(*p)->hnext)
    if (*p == q3) {
      *p = q3->hnext;
      t->nconns--;
      return;
    }
}

/* ---- streams ------------------------------------------------------------------ */

static nhb__srv_h3s* stream_new(nhb__srv_h3c* q3, int64_t id) {
  nhb__srv_h3w* t = q3->base.w->h3;
  nhb__srv_h3s* st = t->free_streams;
  if (st) {
    t->free_streams = st->next;
    t->nfree--;
  } else if (!(st = calloc(1, sizeof(*st)))) {
    return NULL;
  }
  nhb__srv_stream_recycle(st, sizeof(*st), &st->core);
  st->q3 = q3;
  st->id = id;
  st->next = q3->streams;
  if (q3->streams) q3->streams->prev = st;
  q3->streams = st;
  return st;
}

static void stream_free_memory(nhb__srv_h3s* st) {
  nhb__srv_stream_core_free(&st->core);
  free(st);
}

static void stream_release(nhb__srv_h3s* st) {
  nhb__srv_h3c* q3 = st->q3;
  nhb__srv_worker* w = q3->base.w;
  nhb__srv_h3w* t = w->h3;
  if (st->prev) st->prev->next = st->next;
  else q3->streams = st->next;
  if (st->next) st->next->prev = st->prev;
  if (st->core.waiting) {
    q3->nwaiting--;
    w->delayed--;
  }
  /* An event stream is over (ended, reset, or its connection gone). */
  if (NHB__UNLIKELY(st->core.events)) nhb__srv_bump(&w->counters.event_streams_active, (uint64_t)-1);
  if (t->nfree >= H3_MAX_FREE_STREAMS) {
    stream_free_memory(st);
    return;
  }
  st->prev = NULL;
  st->next = t->free_streams;
  t->free_streams = st;
  t->nfree++;
}

/* ---- responses ------------------------------------------------------------------- */

static int h3_header(void* ctx, const nhb__srv_header* hd) {
  nhb__srv_h3s* st = ctx;
  if (nhb__srv_connection_specific(hd->name.p, hd->name.len)) return 0;
  /* The Alt-Svc the server adds to its static headers advertises this very
   * protocol: not repeated over HTTP/3. */
  if (hd->name.len == 7 && strncasecmp(hd->name.p, "alt-svc", 7) == 0 && st->q3->base.w->server->alt_svc[0] &&
      hd->value.p == st->q3->base.w->server->alt_svc)
    return 0;
  return nhb__srv_stream_rh_add(&st->core, hd->name.p, hd->name.len, hd->value.p, hd->value.len);
}

/* The same headers as HTTP/2 sends, in the same order. */
static int render(nhb__srv_h3s* st, const nhb__srv_reply* r) {
  return nhb__srv_stream_render(&st->core, r, h3_header, st);
}

/* The body: the reply's pieces, which live until the stream closes (its
 * buffer) or for ever (the server's regions), so nghttp3 refers to them
 * until they are acknowledged. */
static nghttp3_ssize read_body(nghttp3_conn* hc, int64_t sid, nghttp3_vec* vec, size_t veccnt, uint32_t* pflags,
                               void* user_data, void* stream_user_data) {
  NHB__UNUSED(hc);
  NHB__UNUSED(sid);
  NHB__UNUSED(user_data);
  nhb__srv_h3s* st = stream_user_data;
  *pflags |= NGHTTP3_DATA_FLAG_EOF;
  if (!st) return 0;
  size_t n = 0;
  for (int i = 0; i < st->core.nbody && n < veccnt; i++) {
    const nhb__srv_piece* p = &st->core.body[i];
    if (!p->len) continue;
    vec[n].base = (uint8_t*)(uintptr_t)(p->ext ? p->ext : st->core.out.p + p->off);
    vec[n].len = p->len;
    n++;
  }
  st->core.nbody = 0;
  return (nghttp3_ssize)n;
}

/* The data source of an event stream (--stream-events, server_sse.c): the
 * events that are due, each a vector on the static event bytes, or "nothing
 * yet" until the heap's wake-up makes the next one due and resumes the
 * stream. */
static nghttp3_ssize read_events(nghttp3_conn* hc, int64_t sid, nghttp3_vec* vec, size_t veccnt, uint32_t* pflags,
                                 void* user_data, void* stream_user_data) {
  NHB__UNUSED(hc);
  NHB__UNUSED(sid);
  NHB__UNUSED(user_data);
  nhb__srv_h3s* st = stream_user_data;
  if (!st) {
    *pflags |= NGHTTP3_DATA_FLAG_EOF;
    return 0;
  }
  size_t len;
  const uint8_t* event = nhb__srv_sse_event(&len);
  size_t n = 0;
  for (; n < veccnt && st->core.ev_ready > 0; n++, st->core.ev_ready--) {
    vec[n].base = (uint8_t*)(uintptr_t)event;
    vec[n].len = len;
  }
  if (n) nhb__srv_bump(&st->q3->base.w->counters.stream_events, n);
  if (st->core.ev_ready == 0 && st->core.ev_left == 0) *pflags |= NGHTTP3_DATA_FLAG_EOF;
  else if (n == 0) return NGHTTP3_ERR_WOULDBLOCK;
  return (nghttp3_ssize)n;
}

static void stream_fail(nhb__srv_h3s* st) {
  nhb__srv_h3c* q3 = st->q3;
  if (q3->qc) ngtcp2_conn_shutdown_stream(q3->qc, st->id, NGHTTP3_H3_INTERNAL_ERROR);
}

/* Gives flow-control credit back for `n` bytes consumed on stream sid (no
 * QUIC connection under the fuzz seam). */
static void consumed(nhb__srv_h3c* q3, int64_t sid, uint64_t n) {
  if (!q3->qc) return;
  ngtcp2_conn_extend_max_stream_offset(q3->qc, sid, n);
  ngtcp2_conn_extend_max_offset(q3->qc, n);
}

static void submit(nhb__srv_h3s* st) {
  nhb__srv_h3c* q3 = st->q3;
  nhb__srv_h3w* t = q3->base.w->h3;
  size_t n = st->core.nrh + 1;
  if (n > t->nv_cap) {
    size_t cap = n < 32 ? 32 : 2 * n;
    nghttp3_nv* nv = realloc(t->nv, cap * sizeof(*nv));
    if (!nv) {
      stream_fail(st);
      return;
    }
    t->nv = nv;
    t->nv_cap = cap;
  }
  nghttp3_nv* nv = t->nv;
  nv[0].name = (uint8_t*)":status";
  nv[0].namelen = 7;
  nv[0].value = (uint8_t*)st->core.status_txt;
  nv[0].valuelen = 3;
  nv[0].flags = NGHTTP3_NV_FLAG_NONE;
  for (size_t i = 0; i < st->core.nrh; i++) {
    const nhb__srv_hdr_pos* r = &st->core.rh[i];
    nv[i + 1].name = (uint8_t*)st->core.out.p + r->name_off;
    nv[i + 1].namelen = r->name_len;
    nv[i + 1].value = (uint8_t*)st->core.out.p + r->value_off;
    nv[i + 1].valuelen = r->value_len;
    nv[i + 1].flags = NGHTTP3_NV_FLAG_NONE;
  }
  nghttp3_data_reader dr = {NHB__UNLIKELY(st->core.events) ? read_events : read_body};
  st->submitted = 1;
  if (nghttp3_conn_submit_response(q3->hc, st->id, nv, n, st->core.nbody || st->core.events ? &dr : NULL) != 0)
    stream_fail(st);
}

static void wait_or_submit(nhb__srv_h3s* st, uint64_t now, uint64_t deadline) {
  nhb__srv_h3c* q3 = st->q3;
  deadline = nhb__srv_stream_release_at(q3->base.w->server, now, deadline);
  if (deadline) {
    st->core.waiting = 1;
    st->core.deadline_ns = deadline;
    q3->nwaiting++;
    q3->base.w->delayed++;
    nhb__srv_conn* c = &q3->base;
    if (c->heap_idx == SIZE_MAX || deadline < c->wake_ns) nhb__srv_heap_set(c->w, c, deadline);
    return;
  }
  submit(st);
}

static void respond_error(nhb__srv_h3s* st) {
  nhb__srv_reply r;
  if (nhb__srv_stream_error_reply(&st->core, &r) < 0 || render(st, &r) < 0) {
    stream_fail(st);
    return;
  }
  submit(st);
}

/* --stream-events: every request is answered with an event stream, submitted
 * at once; its events are paced by the delay heap (nhb__srv_h3_flush). */
static void respond_events(nhb__srv_h3s* st) {
  nhb__srv_h3c* q3 = st->q3;
  nhb__srv_conn* c = &q3->base;
  st->core.responded = 1;
  uint64_t now = c->w->now_ns ? c->w->now_ns : nhb__now_ns();
  uint64_t next = UINT64_MAX;
  if (nhb__srv_sse_stream_start(c->w, &st->core, now, &next) < 0) {
    stream_fail(st);
    return;
  }
  submit(st);
  if (next != UINT64_MAX && (c->heap_idx == SIZE_MAX || next < c->wake_ns)) nhb__srv_heap_set(c->w, c, next);
}

static void respond(nhb__srv_h3s* st) {
  nhb__srv_h3c* q3 = st->q3;
  nhb__srv_worker* w = q3->base.w;
  if (st->core.responded) return;
  if (st->core.error_status) {
    respond_error(st);
    return;
  }
  if (NHB__UNLIKELY(w->server->sse != NULL)) {
    respond_events(st);
    return;
  }
  nhb__srv_req* q = nhb__srv_stream_request(&st->core, 3);
  uint64_t now = w->now_ns ? w->now_ns : nhb__now_ns();
  nhb__srv_reply r;
  if (nhb__srv_reply_build(&q3->base, q, &st->core.out, now, &r) < 0 || render(st, &r) < 0) {
    stream_fail(st);
    return;
  }
  st->core.status = (uint16_t)r.status;
  /* HTTP/1.1 closes after such a response; HTTP/3 says GOAWAY. */
  if (r.close) nghttp3_conn_submit_shutdown_notice(q3->hc);
  wait_or_submit(st, now, r.delay_ns ? now + r.delay_ns : 0);
}

/* ---- nghttp3 callbacks -------------------------------------------------------------- */

static int cb_begin_headers(nghttp3_conn* hc, int64_t sid, void* user_data, void* stream_user_data) {
  nhb__srv_h3c* q3 = user_data;
  if (stream_user_data) return 0; /* trailers */
  nhb__srv_h3s* st = stream_new(q3, sid);
  if (!st) return NGHTTP3_ERR_CALLBACK_FAILURE;
  nghttp3_conn_set_stream_user_data(hc, sid, st);
  q3->base.in_head = 1;
  return 0;
}

static int cb_recv_header(nghttp3_conn* hc, int64_t sid, int32_t token, nghttp3_rcbuf* name_rc, nghttp3_rcbuf* value_rc,
                          uint8_t flags, void* user_data, void* stream_user_data) {
  NHB__UNUSED(hc);
  NHB__UNUSED(sid);
  NHB__UNUSED(token);
  NHB__UNUSED(flags);
  nhb__srv_h3c* q3 = user_data;
  nhb__srv_h3s* st = stream_user_data;
  if (!st || st->core.error_status) return 0;
  nghttp3_vec nn = nghttp3_rcbuf_get_buf(name_rc);
  nghttp3_vec vv = nghttp3_rcbuf_get_buf(value_rc);
  const uint8_t *name = nn.base, *value = vv.base;
  size_t name_len = nn.len, value_len = vv.len;
  return nhb__srv_stream_header(&st->core, q3->base.w->server, name, name_len, value, value_len) < 0
             ? NGHTTP3_ERR_CALLBACK_FAILURE
             : 0;
}

static int cb_end_headers(nghttp3_conn* hc, int64_t sid, int fin, void* user_data, void* stream_user_data) {
  NHB__UNUSED(hc);
  NHB__UNUSED(sid);
  nhb__srv_h3c* q3 = user_data;
  nhb__srv_h3s* st = stream_user_data;
  if (!st || st->core.responded) return 0;
  nhb_server* s = q3->base.w->server;
  q3->base.in_head = 0;
  if (nhb__srv_stream_head_done(&st->core, s)) {
    respond_error(st);
    return 0;
  }
  if (fin) {
    respond(st);
    return 0;
  }
  st->core.req.capture_body = nhb__srv_stream_capture_body(&st->core, s);
  return 0;
}

static int cb_recv_data(nghttp3_conn* hc, int64_t sid, const uint8_t* data, size_t len, void* user_data,
                        void* stream_user_data) {
  NHB__UNUSED(hc);
  nhb__srv_h3c* q3 = user_data;
  nhb_server* s = q3->base.w->server;
  /* Consumed at once: the windows open again. */
  consumed(q3, sid, len);
  nhb__srv_h3s* st = stream_user_data;
  if (!st || st->core.responded) return 0;
  int r = nhb__srv_stream_body(&st->core, s, data, len, s->config.max_payload_bytes);
  if (r < 0) return NGHTTP3_ERR_CALLBACK_FAILURE;
  if (r > 0) respond_error(st);
  return 0;
}

static int cb_deferred_consume(nghttp3_conn* hc, int64_t sid, size_t n, void* user_data, void* stream_user_data) {
  NHB__UNUSED(hc);
  NHB__UNUSED(stream_user_data);
  consumed(user_data, sid, n);
  return 0;
}

static int cb_end_stream(nghttp3_conn* hc, int64_t sid, void* user_data, void* stream_user_data) {
  NHB__UNUSED(hc);
  NHB__UNUSED(sid);
  NHB__UNUSED(user_data);
  if (stream_user_data) respond(stream_user_data);
  return 0;
}

static int cb_stream_close(nghttp3_conn* hc, int64_t sid, uint64_t code, void* user_data, void* stream_user_data) {
  NHB__UNUSED(hc);
  nhb__srv_h3c* q3 = user_data;
  nhb__srv_worker* w = q3->base.w;
  if (q3->qc && ngtcp2_is_bidi_stream(sid)) ngtcp2_conn_extend_max_streams_bidi(q3->qc, 1);
  nhb__srv_h3s* st = stream_user_data;
  if (!st) return 0;
  NHB__UNUSED(code);
  if (!st->complete) nhb__srv_bump(&w->counters.h3_streams_reset, 1);
  stream_release(st);
  return 0;
}

static int cb_acked_stream_data(nghttp3_conn* hc, int64_t sid, uint64_t datalen, void* user_data,
                                void* stream_user_data) {
  NHB__UNUSED(hc);
  NHB__UNUSED(sid);
  NHB__UNUSED(datalen);
  NHB__UNUSED(user_data);
  NHB__UNUSED(stream_user_data);
  return 0;
}

static int cb_stop_sending(nghttp3_conn* hc, int64_t sid, uint64_t code, void* user_data, void* stream_user_data) {
  NHB__UNUSED(hc);
  NHB__UNUSED(stream_user_data);
  nhb__srv_h3c* q3 = user_data;
  if (!q3->qc) return 0;
  return ngtcp2_conn_shutdown_stream_read(q3->qc, sid, code) == 0 ? 0 : NGHTTP3_ERR_CALLBACK_FAILURE;
}

static int cb_reset_stream(nghttp3_conn* hc, int64_t sid, uint64_t code, void* user_data, void* stream_user_data) {
  NHB__UNUSED(hc);
  NHB__UNUSED(stream_user_data);
  nhb__srv_h3c* q3 = user_data;
  if (!q3->qc) return 0;
  return ngtcp2_conn_shutdown_stream_write(q3->qc, sid, code) == 0 ? 0 : NGHTTP3_ERR_CALLBACK_FAILURE;
}

static const nghttp3_callbacks h3_callbacks = {
    cb_acked_stream_data,
    cb_stream_close,
    cb_recv_data,
    cb_deferred_consume,
    cb_begin_headers,
    cb_recv_header,
    cb_end_headers,
    NULL, /* begin_trailers */
    NULL, /* recv_trailer: trailers are not looked at */
    NULL, /* end_trailers */
    cb_stop_sending,
    cb_end_stream,
    cb_reset_stream,
    NULL, /* shutdown */
};

/* ---- ngtcp2 callbacks ------------------------------------------------------------ */

/* Whether client certificates are required (mutual TLS, as on TCP). */
static int client_ca_set(const nhb_server* s) { return s->config.tls_client_ca && *s->config.tls_client_ca; }

static ngtcp2_conn* get_conn(ngtcp2_crypto_conn_ref* ref) { return ((nhb__srv_h3c*)ref->user_data)->qc; }

static int q_handshake_completed(ngtcp2_conn* qc, void* user_data) {
  NHB__UNUSED(qc);
  nhb__srv_h3c* q3 = user_data;
  q3->handshake_done = 1;
  nhb__srv_bump(&q3->base.w->counters.tls_handshakes, 1);
  if (client_ca_set(q3->base.w->server)) nhb__srv_bump(&q3->base.w->counters.tls_clients_verified, 1);
  return 0;
}

static int http_new(nhb__srv_h3c* q3) {
  nhb_server* s = q3->base.w->server;
  nghttp3_settings settings;
  nghttp3_settings_default(&settings);
  /* No dynamic QPACK table of ours: no stream ever waits for the encoder. */
  settings.qpack_max_dtable_capacity = 0;
  settings.qpack_blocked_streams = 0;
  settings.max_field_section_size = s->config.max_header_bytes + 65536;
  if (nghttp3_conn_server_new(&q3->hc, &h3_callbacks, &settings, &q3->hmem, q3) != 0) {
    q3->hc = NULL;
    return -1;
  }
  nghttp3_conn_set_max_client_streams_bidi(q3->hc, s->config.max_concurrent_streams);
  return 0;
}

static int setup_http(nhb__srv_h3c* q3) {
  if (q3->hc) return 0;
  if (ngtcp2_conn_get_max_local_streams_uni(q3->qc) < 3 || http_new(q3) < 0) return -1;
  int64_t ctrl, enc, dec;
  if (ngtcp2_conn_open_uni_stream(q3->qc, &ctrl, NULL) != 0 || nghttp3_conn_bind_control_stream(q3->hc, ctrl) != 0 ||
      ngtcp2_conn_open_uni_stream(q3->qc, &enc, NULL) != 0 || ngtcp2_conn_open_uni_stream(q3->qc, &dec, NULL) != 0 ||
      nghttp3_conn_bind_qpack_streams(q3->hc, enc, dec) != 0)
    return -1;
  return 0;
}

/* The 1-RTT send keys: HTTP/3's own streams can be opened. */
static int q_recv_tx_key(ngtcp2_conn* qc, ngtcp2_crypto_level level, void* user_data) {
  NHB__UNUSED(qc);
  if (level != NGTCP2_CRYPTO_LEVEL_APPLICATION) return 0;
  return setup_http(user_data) == 0 ? 0 : NGTCP2_ERR_CALLBACK_FAILURE;
}

static int q_recv_stream_data(ngtcp2_conn* qc, uint32_t flags, int64_t sid, uint64_t offset, const uint8_t* data,
                              size_t len, void* user_data, void* stream_user_data) {
  NHB__UNUSED(offset);
  NHB__UNUSED(stream_user_data);
  nhb__srv_h3c* q3 = user_data;
  if (!q3->hc) return NGTCP2_ERR_CALLBACK_FAILURE;
  nghttp3_ssize n = nghttp3_conn_read_stream(q3->hc, sid, data, len, flags & NGTCP2_STREAM_DATA_FLAG_FIN);
  if (n < 0) {
    ngtcp2_connection_close_error ccerr;
    NHB__UNUSED(ccerr);
    return NGTCP2_ERR_CALLBACK_FAILURE;
  }
  ngtcp2_conn_extend_max_stream_offset(qc, sid, (uint64_t)n);
  ngtcp2_conn_extend_max_offset(qc, (uint64_t)n);
  return 0;
}

static int q_acked_stream_data(ngtcp2_conn* qc, int64_t sid, uint64_t offset, uint64_t len, void* user_data,
                               void* stream_user_data) {
  NHB__UNUSED(qc);
  NHB__UNUSED(offset);
  NHB__UNUSED(stream_user_data);
  nhb__srv_h3c* q3 = user_data;
  if (!q3->hc) return 0;
  return nghttp3_conn_add_ack_offset(q3->hc, sid, len) == 0 ? 0 : NGTCP2_ERR_CALLBACK_FAILURE;
}

static int q_stream_close(ngtcp2_conn* qc, uint32_t flags, int64_t sid, uint64_t code, void* user_data,
                          void* stream_user_data) {
  NHB__UNUSED(stream_user_data);
  nhb__srv_h3c* q3 = user_data;
  if (!q3->hc) return 0;
  if (!(flags & NGTCP2_STREAM_CLOSE_FLAG_APP_ERROR_CODE_SET)) code = NGHTTP3_H3_NO_ERROR;
  int r = nghttp3_conn_close_stream(q3->hc, sid, code);
  if (r == NGHTTP3_ERR_STREAM_NOT_FOUND) {
    if (ngtcp2_is_bidi_stream(sid)) ngtcp2_conn_extend_max_streams_bidi(qc, 1);
    return 0;
  }
  return r == 0 ? 0 : NGTCP2_ERR_CALLBACK_FAILURE;
}

static int q_stream_reset(ngtcp2_conn* qc, int64_t sid, uint64_t final_size, uint64_t code, void* user_data,
                          void* stream_user_data) {
  NHB__UNUSED(final_size);
  NHB__UNUSED(code);
  NHB__UNUSED(stream_user_data);
  nhb__srv_h3c* q3 = user_data;
  if (q3->hc && nghttp3_conn_shutdown_stream_read(q3->hc, sid) != 0) return NGTCP2_ERR_CALLBACK_FAILURE;
  /* A request the client gave up before it was complete will never be
   * answered: our side is reset too, so that the stream closes (and counts
   * in h3_streams_reset) now rather than at the end of the connection. */
  for (nhb__srv_h3s* st = q3->streams; st; st = st->next)
    if (st->id == sid) {
      if (!st->core.responded) {
        st->core.responded = 1;
        ngtcp2_conn_shutdown_stream_write(qc, sid, NGHTTP3_H3_REQUEST_CANCELLED);
      }
      break;
    }
  return 0;
}

static int q_stream_stop_sending(ngtcp2_conn* qc, int64_t sid, uint64_t code, void* user_data,
                                 void* stream_user_data) {
  return q_stream_reset(qc, sid, 0, code, user_data, stream_user_data);
}

static int q_extend_max_stream_data(ngtcp2_conn* qc, int64_t sid, uint64_t max_data, void* user_data,
                                    void* stream_user_data) {
  NHB__UNUSED(qc);
  NHB__UNUSED(max_data);
  NHB__UNUSED(stream_user_data);
  nhb__srv_h3c* q3 = user_data;
  if (q3->hc && nghttp3_conn_unblock_stream(q3->hc, sid) != 0) return NGTCP2_ERR_CALLBACK_FAILURE;
  return 0;
}

static int q_extend_max_remote_streams_bidi(ngtcp2_conn* qc, uint64_t max_streams, void* user_data) {
  NHB__UNUSED(qc);
  nhb__srv_h3c* q3 = user_data;
  if (q3->hc) nghttp3_conn_set_max_client_streams_bidi(q3->hc, max_streams);
  return 0;
}

/* ---- connections --------------------------------------------------------------------- */

static void conn_freed(uv_handle_t* handle) {
  nhb__srv_h3c* q3 = handle->data;
  free(q3);
}

/* Frees the connection now (its timer once libuv lets go of it). */
static void conn_drop(nhb__srv_h3c* q3) {
  nhb__srv_conn* c = &q3->base;
  if (c->closing) return;
  c->closing = 1;
  nhb__srv_worker* w = c->w;
  nhb__srv_h3w* t = w->h3;
  nhb__srv_heap_remove(w, c);
  table_remove(t, q3);
  if (q3->prev) q3->prev->next = q3->next;
  else t->conns = q3->next;
  if (q3->next) q3->next->prev = q3->prev;
  if (q3->hc) nghttp3_conn_del(q3->hc);
  q3->hc = NULL;
  while (q3->streams) stream_release(q3->streams);
  if (q3->qc) ngtcp2_conn_del(q3->qc);
  q3->qc = NULL;
  if (q3->tls) gnutls_deinit(q3->tls);
  q3->tls = NULL;
  nhb__srv_buf_free(&c->req.buf);
  free(c->req.hdrs);
  if (!q3->handshake_done) nhb__srv_bump(&w->counters.tls_handshake_errors, 1);
  nhb__srv_bump(&w->counters.connections_active, (uint64_t)-1);
  atomic_fetch_sub_explicit(&w->server->conns_open, 1, memory_order_relaxed);
  uv_timer_stop(&q3->timer);
  uv_close((uv_handle_t*)&q3->timer, conn_freed);
}

static void send_pkt(nhb__srv_h3c* q3, const uint8_t* p, size_t n) {
  uv_buf_t b = uv_buf_init((char*)(uintptr_t)p, (unsigned)n);
  int r = uv_udp_try_send(&q3->l->h.udp, &b, 1, (const struct sockaddr*)&q3->peer);
  if (r > 0) nhb__srv_bump(&q3->base.w->counters.tx_bytes, (uint64_t)r);
}

/* Ends the connection after a protocol failure `r` from ngtcp2 (or a
 * callback), telling the client why when there is anything to tell. */
/* The alerts GnuTLS sends when a client certificate is missing or does not
 * verify (RFC 8446 6.2): what tls_clients_refused counts. */
static int cert_alert(uint8_t alert) {
  switch (alert) {
    case GNUTLS_A_BAD_CERTIFICATE:
    case GNUTLS_A_UNSUPPORTED_CERTIFICATE:
    case GNUTLS_A_CERTIFICATE_REVOKED:
    case GNUTLS_A_CERTIFICATE_EXPIRED:
    case GNUTLS_A_CERTIFICATE_UNKNOWN:
    case GNUTLS_A_UNKNOWN_CA:
    case GNUTLS_A_CERTIFICATE_REQUIRED:
      return 1;
    default:
      return 0;
  }
}

static void conn_fail(nhb__srv_h3c* q3, int r) {
  nhb__srv_worker* w = q3->base.w;
  if (r == NGTCP2_ERR_DRAINING || r == NGTCP2_ERR_IDLE_CLOSE || r == NGTCP2_ERR_DROP_CONN) {
    /* The client closed, or went silent: nothing to send. */
    conn_drop(q3);
    return;
  }
  nhb__srv_bump(&w->counters.h3_protocol_errors, 1);
  if (q3->qc && !ngtcp2_conn_is_in_closing_period(q3->qc) && !ngtcp2_conn_is_in_draining_period(q3->qc)) {
    ngtcp2_connection_close_error ccerr;
    ngtcp2_connection_close_error_default(&ccerr);
    if (r == NGTCP2_ERR_CRYPTO) {
      uint8_t alert = ngtcp2_conn_get_tls_alert(q3->qc);
      if (!q3->handshake_done && client_ca_set(w->server) && cert_alert(alert))
        nhb__srv_bump(&w->counters.tls_clients_refused, 1);
      ngtcp2_connection_close_error_set_transport_error_tls_alert(&ccerr, alert, NULL, 0);
    } else
      ngtcp2_connection_close_error_set_transport_error_liberr(&ccerr, r, NULL, 0);
    ngtcp2_path_storage ps;
    ngtcp2_path_storage_zero(&ps);
    ngtcp2_pkt_info pi;
    ngtcp2_ssize n = ngtcp2_conn_write_connection_close(q3->qc, &ps.path, &pi, w->h3->pkt, sizeof(w->h3->pkt), &ccerr,
                                                        nhb__now_ns());
    if (n > 0) send_pkt(q3, w->h3->pkt, (size_t)n);
  }
  conn_drop(q3);
}

static void on_timer(uv_timer_t* timer) {
  nhb__srv_h3c* q3 = timer->data;
  if (q3->base.closing || !q3->qc) return;
  uint64_t now = nhb__now_ns();
  if (ngtcp2_conn_get_expiry(q3->qc) <= now) {
    q3->in_lib = 1;
    int r = ngtcp2_conn_handle_expiry(q3->qc, now);
    q3->in_lib = 0;
    if (r != 0) {
      conn_fail(q3, r);
      return;
    }
  }
  conn_write(q3);
}

/* Stream `sid`'s FIN went out with `ndata` of the `nvec` vectors' bytes:
 * when that was all of them, its response is written, and counts. */
static void fin_written(nhb__srv_h3c* q3, int64_t sid, const nghttp3_vec* vec, nghttp3_ssize nvec, ngtcp2_ssize ndata) {
  size_t total = 0;
  for (nghttp3_ssize i = 0; i < nvec; i++) total += vec[i].len;
  if ((size_t)ndata != total || !ngtcp2_is_bidi_stream(sid)) return;
  for (nhb__srv_h3s* st = q3->streams; st; st = st->next) {
    if (st->id != sid) continue;
    if (!st->complete && st->submitted && st->core.status) {
      nhb__srv_worker* w = q3->base.w;
      st->complete = 1;
      nhb__srv_bump(&w->counters.requests, 1);
      if (st->core.status < NHB_SERVER_STATUS_MAX) nhb__srv_bump(&w->counters.status[st->core.status], 1);
      if (st->core.bad) nhb__srv_bump(&w->counters.bad_requests, 1);
    }
    return;
  }
}

/* Writes packets until ngtcp2 has nothing more to send now, then arms the
 * timer for ngtcp2's next expiry. */
static void conn_write(nhb__srv_h3c* q3) {
  if (q3->base.closing) return;
  nhb__srv_h3w* t = q3->base.w->h3;
  ngtcp2_path_storage ps;
  ngtcp2_path_storage_zero(&ps);
  uint64_t ts = nhb__now_ns();
  size_t pkt_max = ngtcp2_conn_get_max_tx_udp_payload_size(q3->qc);
  if (pkt_max > sizeof(t->pkt)) pkt_max = sizeof(t->pkt);
  size_t quantum = ngtcp2_conn_get_send_quantum(q3->qc) / pkt_max;
  if (quantum == 0) quantum = 1;
  for (size_t npkts = 0;;) {
    int64_t sid = -1;
    int fin = 0;
    nghttp3_vec vec[H3_VECS];
    nghttp3_ssize nvec = 0;
    if (q3->hc && ngtcp2_conn_get_max_data_left(q3->qc) > 0) {
      nvec = nghttp3_conn_writev_stream(q3->hc, &sid, &fin, vec, H3_VECS);
      if (nvec < 0) {
        conn_fail(q3, NGTCP2_ERR_CALLBACK_FAILURE);
        return;
      }
    }
    ngtcp2_ssize ndata = -1;
    uint32_t flags = NGTCP2_WRITE_STREAM_FLAG_MORE | (fin ? NGTCP2_WRITE_STREAM_FLAG_FIN : 0);
    ngtcp2_pkt_info pi;
    ngtcp2_ssize n = ngtcp2_conn_writev_stream(q3->qc, &ps.path, &pi, t->pkt, pkt_max, &ndata, flags, sid,
                                               (const ngtcp2_vec*)vec, (size_t)nvec, ts);
    if (n < 0) {
      if (n == NGTCP2_ERR_STREAM_DATA_BLOCKED) {
        nghttp3_conn_block_stream(q3->hc, sid);
        continue;
      }
      if (n == NGTCP2_ERR_STREAM_SHUT_WR) {
        nghttp3_conn_shutdown_stream_write(q3->hc, sid);
        continue;
      }
      if (n == NGTCP2_ERR_WRITE_MORE) {
        if (nghttp3_conn_add_write_offset(q3->hc, sid, (size_t)ndata) != 0) {
          conn_fail(q3, NGTCP2_ERR_CALLBACK_FAILURE);
          return;
        }
        if (fin) fin_written(q3, sid, vec, nvec, ndata);
        continue;
      }
      conn_fail(q3, (int)n);
      return;
    }
    if (ndata >= 0) {
      if (nghttp3_conn_add_write_offset(q3->hc, sid, (size_t)ndata) != 0) {
        conn_fail(q3, NGTCP2_ERR_CALLBACK_FAILURE);
        return;
      }
      if (fin) fin_written(q3, sid, vec, nvec, ndata);
    }
    if (n == 0) break;
    send_pkt(q3, t->pkt, (size_t)n);
    if (++npkts >= quantum) {
      ngtcp2_conn_update_pkt_tx_time(q3->qc, ts);
      break;
    }
  }
  uint64_t expiry = ngtcp2_conn_get_expiry(q3->qc);
  uint64_t now = nhb__now_ns();
  uint64_t ms = expiry <= now ? 0 : (expiry - now + 999999) / 1000000;
  uv_timer_start(&q3->timer, on_timer, ms, 0);
}

static int tls_init(nhb__srv_h3c* q3) {
  nhb_server* s = q3->base.w->server;
  if (gnutls_init(&q3->tls, GNUTLS_SERVER | GNUTLS_ENABLE_EARLY_DATA | GNUTLS_NO_END_OF_EARLY_DATA) != 0) {
    q3->tls = NULL;
    return NHB_ENOMEM;
  }
  if (ngtcp2_crypto_gnutls_configure_server_session(q3->tls) != 0 ||
      gnutls_priority_set_direct(q3->tls, "NORMAL:-VERS-ALL:+VERS-TLS1.3:%DISABLE_TLS13_COMPAT_MODE", NULL) != 0 ||
      gnutls_credentials_set(q3->tls, GNUTLS_CRD_CERTIFICATE, (gnutls_certificate_credentials_t)s->h3_cred) != 0)
    return NHB_ETLS;
  gnutls_session_set_ptr(q3->tls, &q3->conn_ref);
  /* Only "h3": a client that offers nothing else fails the handshake. */
  static const gnutls_datum_t alpn = {(unsigned char*)"h3", 2};
  if (gnutls_alpn_set_protocols(q3->tls, &alpn, 1, GNUTLS_ALPN_MANDATORY) != 0) return NHB_ETLS;
  /* Mutual TLS: a client certificate is required and verified during the
   * handshake (chain to tls_client_ca, dates), so a client without one, or
   * with one those CAs did not issue, fails it with a TLS alert. */
  if (client_ca_set(s)) {
    gnutls_certificate_server_set_request(q3->tls, GNUTLS_CERT_REQUIRE);
    gnutls_session_set_verify_cert(q3->tls, NULL, 0);
  }
  return 0;
}

/* A new connection from the client Initial `hd`, in a place of conns_open the
 * caller reserved (given back here if it cannot be made). */
static nhb__srv_h3c* conn_new(nhb__srv_listener* l, const ngtcp2_pkt_hd* hd, const struct sockaddr* peer,
                              uint64_t key) {
  nhb__srv_worker* w = l->h.handle.loop->data;
  nhb_server* s = w->server;
  nhb__srv_h3c* q3 = calloc(1, sizeof(*q3));
  if (!q3) {
    atomic_fetch_sub_explicit(&s->conns_open, 1, memory_order_relaxed);
    return NULL;
  }
  nhb__srv_conn* c = &q3->base;
  c->w = w;
  c->kind = NHB__SRV_CONN_HTTP;
  c->proto = NHB__SRV_PROTO_H3;
  c->heap_idx = SIZE_MAX;
  c->req.nh_idx = -1;
  c->req.settings_idx = -1;
  q3->l = l;
  q3->key = key;
  q3->peer_len = peer->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
  memcpy(&q3->peer, peer, q3->peer_len);
  int len = (int)sizeof(q3->local);
  uv_udp_getsockname(&l->h.udp, (struct sockaddr*)&q3->local, &len);
  q3->local_len = (socklen_t)len;
  q3->conn_ref.get_conn = get_conn;
  q3->conn_ref.user_data = q3;
  nghttp2_mem m = nhb__h2_mem_allocator(&w->h2_mem);
  q3->qmem.user_data = q3->hmem.user_data = m.mem_user_data;
  q3->qmem.malloc = q3->hmem.malloc = m.malloc;
  q3->qmem.free = q3->hmem.free = m.free;
  q3->qmem.calloc = q3->hmem.calloc = m.calloc;
  q3->qmem.realloc = q3->hmem.realloc = m.realloc;
  uv_timer_init(&w->loop, &q3->timer);
  q3->timer.data = q3;
  /* Counted from here on (conns_open since the caller reserved the place);
   * conn_drop() takes it all back. */
  nhb__srv_bump(&w->counters.connections_total, 1);
  nhb__srv_bump(&w->counters.connections_active, 1);
  nhb__srv_bump(&w->counters.connections_http3, 1);
  nhb__srv_h3w* t = w->h3;
  q3->next = t->conns;
  if (t->conns) t->conns->prev = q3;
  t->conns = q3;
  if (table_add(t, q3) < 0) {
    conn_drop(q3);
    return NULL;
  }

  ngtcp2_callbacks cb;
  memset(&cb, 0, sizeof(cb));
  cb.recv_client_initial = ngtcp2_crypto_recv_client_initial_cb;
  cb.recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb;
  cb.handshake_completed = q_handshake_completed;
  cb.encrypt = ngtcp2_crypto_encrypt_cb;
  cb.decrypt = ngtcp2_crypto_decrypt_cb;
  cb.hp_mask = ngtcp2_crypto_hp_mask_cb;
  cb.recv_stream_data = q_recv_stream_data;
  cb.acked_stream_data_offset = q_acked_stream_data;
  cb.stream_close = q_stream_close;
  cb.rand = nhb__quic_rand;
  cb.get_new_connection_id = nhb__quic_new_connection_id;
  cb.update_key = ngtcp2_crypto_update_key_cb;
  cb.stream_reset = q_stream_reset;
  cb.extend_max_remote_streams_bidi = q_extend_max_remote_streams_bidi;
  cb.extend_max_stream_data = q_extend_max_stream_data;
  cb.delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb;
  cb.delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb;
  cb.get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb;
  cb.stream_stop_sending = q_stream_stop_sending;
  cb.version_negotiation = ngtcp2_crypto_version_negotiation_cb;
  cb.recv_tx_key = q_recv_tx_key;

  ngtcp2_settings settings;
  ngtcp2_settings_default(&settings);
  settings.initial_ts = nhb__now_ns();
  settings.handshake_timeout = H3_HANDSHAKE_TIMEOUT_NS;
  ngtcp2_transport_params params;
  ngtcp2_transport_params_default(&params);
  params.initial_max_streams_bidi = s->config.max_concurrent_streams;
  params.initial_max_streams_uni = 3;
  params.initial_max_stream_data_bidi_remote = H3_STREAM_WINDOW;
  params.initial_max_stream_data_uni = H3_STREAM_WINDOW;
  params.initial_max_data = H3_CONNECTION_WINDOW;
  params.max_idle_timeout = s->config.idle_timeout_ns ? s->config.idle_timeout_ns : H3_DEFAULT_IDLE_NS;
  params.original_dcid = hd->dcid;
  ngtcp2_cid scid;
  scid.datalen = H3_SCID_LEN;
  if (gnutls_rnd(GNUTLS_RND_RANDOM, scid.data, scid.datalen) != 0 ||
      gnutls_rnd(GNUTLS_RND_RANDOM, params.stateless_reset_token, NGTCP2_STATELESS_RESET_TOKENLEN) != 0) {
    conn_drop(q3);
    return NULL;
  }
  params.stateless_reset_token_present = 1;
  q3->odcid = hd->dcid;
  q3->scid = scid;
  ngtcp2_path path;
  path.local.addr = (ngtcp2_sockaddr*)&q3->local;
  path.local.addrlen = q3->local_len;
  path.remote.addr = (ngtcp2_sockaddr*)&q3->peer;
  path.remote.addrlen = q3->peer_len;
  path.user_data = NULL;
  if (ngtcp2_conn_server_new(&q3->qc, &hd->scid, &scid, &path, hd->version, &cb, &settings, &params, &q3->qmem,
                             q3) != 0) {
    q3->qc = NULL;
    conn_drop(q3);
    return NULL;
  }
  if (tls_init(q3) < 0) {
    conn_drop(q3);
    return NULL;
  }
  ngtcp2_conn_set_tls_native_handle(q3->qc, q3->tls);
  return q3;
}

/* ---- the socket ------------------------------------------------------------------ */

static void on_alloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf) {
  NHB__UNUSED(suggested);
  nhb__srv_worker* w = handle->loop->data;
  buf->base = w->rbuf;
  buf->len = NHB__SRV_READ_BUFFER;
}

static void dropped(nhb__srv_worker* w) { nhb__srv_bump(&w->counters.quic_packets_dropped, 1); }

static int cid_is(const ngtcp2_cid* cid, const uint8_t* p, size_t n) {
  return cid->datalen == n && memcmp(cid->data, p, n) == 0;
}

/* Connections are found by the client's address: one socket, one
 * connection, and a short-header packet costs no more than a hash lookup.
 * But a client Initial from a known address that names neither of the
 * connection's IDs is another connection from that port: the kernel gave it
 * to a new socket after the old one went away without CONNECTION_CLOSE (lost,
 * or never sent), or someone forged the address. Either way it starts a
 * connection of its own beside the first (`shared`, both), and from then on
 * that address's packets go to the connection they name (our ID, or the
 * client's first one in its early Initials), else to the newest. Nothing
 * ends the older one: a stale one goes at its idle time-out, and a forged
 * Initial cannot cut a live client off.
 *
 * `newest` is the address's first connection in the table; NULL means the
 * packet is a new connection's Initial. */
static nhb__srv_h3c* by_id(nhb__srv_h3c* newest, const struct sockaddr* sa, const uint8_t* data, size_t len) {
  ngtcp2_version_cid vc;
  if (ngtcp2_pkt_decode_version_cid(&vc, data, len, H3_SCID_LEN) != 0) return newest;
  for (nhb__srv_h3c* q3 = newest; q3 != NULL; q3 = q3->hnext)
    if (q3->key == newest->key && addr_same(sa, &q3->peer) &&
        (cid_is(&q3->scid, vc.dcid, vc.dcidlen) || cid_is(&q3->odcid, vc.dcid, vc.dcidlen)))
      return q3;
  ngtcp2_pkt_hd hd;
  return (data[0] & 0x80) && ngtcp2_accept(&hd, data, len) == 0 ? NULL : newest;
}

static void on_recv(uv_udp_t* handle, ssize_t nread, const uv_buf_t* buf, const struct sockaddr* addr,
                    unsigned flags) {
  nhb__srv_listener* l = handle->data;
  nhb__srv_worker* w = handle->loop->data;
  if (nread <= 0 || !addr || w->stopping) {
    if (nread == 0 && addr) dropped(w); /* an empty datagram */
    return;
  }
  nhb__srv_bump(&w->counters.rx_bytes, (uint64_t)nread);
  if (flags & UV_UDP_PARTIAL) {
    dropped(w);
    return;
  }
  const uint8_t* data = (const uint8_t*)buf->base;
  size_t len = (size_t)nread;
  uint64_t key = addr_key(addr);
  nhb__srv_h3c* q3 = table_find(w->h3, addr, key);
  /* The connection a new one from the same address begins beside, if any:
   * only a long header (the handshake's) can start one. */
  nhb__srv_h3c* beside = NULL;
  if (q3 && NHB__UNLIKELY(q3->shared | (data[0] & 0x80))) {
    nhb__srv_h3c* named = by_id(q3, addr, data, len);
    if (!named) beside = q3;
    q3 = named;
  }
  if (!q3) {
    ngtcp2_pkt_hd hd;
    /* Only a client Initial (of a version we speak, big enough) starts a
     * connection; anything else for no connection is dropped. */
    if (ngtcp2_accept(&hd, data, len) != 0) {
      dropped(w);
      return;
    }
    nhb_server* s = w->server;
    /* The place is reserved before the connection exists: every worker reads
     * its own UDP socket, and a load-then-add would let two of them both take
     * the last place. */
    if (atomic_fetch_add_explicit(&s->conns_open, 1, memory_order_relaxed) >= s->max_connections) {
      atomic_fetch_sub_explicit(&s->conns_open, 1, memory_order_relaxed);
      nhb__srv_bump(&w->counters.connections_refused, 1);
      dropped(w);
      return;
    }
    q3 = conn_new(l, &hd, addr, key);
    if (!q3) {
      dropped(w);
      return;
    }
    if (beside) {
      beside->shared = q3->shared = 1;
      nhb__srv_bump(&w->counters.quic_connections_beside, 1);
    }
  }
  w->now_ns = nhb__now_ns();
  ngtcp2_path path;
  path.local.addr = (ngtcp2_sockaddr*)&q3->local;
  path.local.addrlen = q3->local_len;
  path.remote.addr = (ngtcp2_sockaddr*)(uintptr_t)addr;
  path.remote.addrlen = q3->peer_len;
  path.user_data = NULL;
  ngtcp2_pkt_info pi = {0};
  q3->in_lib = 1;
  int r = ngtcp2_conn_read_pkt(q3->qc, &path, &pi, data, len, w->now_ns);
  q3->in_lib = 0;
  w->now_ns = 0;
  if (q3->base.closing) return;
  if (q3->dead) r = NGTCP2_ERR_INTERNAL;
  if (r != 0) {
    if (r == NGTCP2_ERR_DISCARD_PKT) {
      /* Undecryptable, a duplicate, or for a state already left. */
      dropped(w);
      return;
    }
    conn_fail(q3, r);
    return;
  }
  conn_write(q3);
}

int nhb__srv_h3_listen(nhb__srv_worker* w, nhb__srv_listener* l) {
  if (!w->h3 && !(w->h3 = calloc(1, sizeof(*w->h3)))) return NHB_ENOMEM;
  l->h.handle.data = l;
  return uv_udp_recv_start(&l->h.udp, on_alloc, on_recv);
}

/* ---- the rest of the server -------------------------------------------------------- */

void nhb__srv_h3_flush(nhb__srv_conn* c) {
  nhb__srv_h3c* q3 = h3c_of(c);
  if (c->closing || !q3->hc) return;
  nhb_server* s = c->w->server;
  uint64_t now = nhb__now_ns();
  uint64_t next = UINT64_MAX;
  int stall = nhb__srv_stall_possible(s);
  for (nhb__srv_h3s* st = q3->streams; st; st = st->next) {
    /* An event stream's next events (server_sse.c). */
    if (NHB__UNLIKELY(st->core.events) && nhb__srv_sse_stream_tick(c->w, &st->core, now, &next))
      nghttp3_conn_resume_stream(q3->hc, st->id);
    if (!nhb__srv_stream_due(&st->core, s, now, stall, &next)) continue;
    q3->nwaiting--;
    c->w->delayed--;
    submit(st);
  }
  if (next != UINT64_MAX) nhb__srv_heap_set(c->w, c, next);
  else nhb__srv_heap_remove(c->w, c);
  conn_write(q3);
}

void nhb__srv_h3_conn_close(nhb__srv_conn* c) {
  nhb__srv_h3c* q3 = h3c_of(c);
  /* Inside ngtcp2 or nghttp3 the connection is ended once the call returns. */
  if (q3->in_lib) q3->dead = 1;
  else conn_fail(q3, NGTCP2_ERR_INTERNAL);
}

void nhb__srv_h3_peer(const nhb__srv_conn* c, char* out, size_t out_len) {
  const nhb__srv_h3c* q3 = h3c_of(c);
  char host[INET6_ADDRSTRLEN] = "?";
  if (q3->peer.ss_family == AF_INET6) {
    const struct sockaddr_in6* in6 = (const struct sockaddr_in6*)&q3->peer;
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    snprintf(out, out_len, "[%s]:%u", host, ntohs(in6->sin6_port));
  } else {
    const struct sockaddr_in* in = (const struct sockaddr_in*)&q3->peer;
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    snprintf(out, out_len, "%s:%u", host, ntohs(in->sin_port));
  }
}

void nhb__srv_h3_close_all(nhb__srv_worker* w) {
  nhb__srv_h3w* t = w->h3;
  if (!t) return;
  while (t->conns) {
    nhb__srv_h3c* q3 = t->conns;
    /* The server stops: NO_ERROR, so that clients do not wait for their
     * idle time-out. */
    if (q3->qc && q3->handshake_done && !ngtcp2_conn_is_in_closing_period(q3->qc) &&
        !ngtcp2_conn_is_in_draining_period(q3->qc)) {
      ngtcp2_connection_close_error ccerr;
      ngtcp2_connection_close_error_default(&ccerr);
      ngtcp2_connection_close_error_set_application_error(&ccerr, NGHTTP3_H3_NO_ERROR, NULL, 0);
      ngtcp2_path_storage ps;
      ngtcp2_path_storage_zero(&ps);
      ngtcp2_pkt_info pi;
      ngtcp2_ssize n =
          ngtcp2_conn_write_connection_close(q3->qc, &ps.path, &pi, t->pkt, sizeof(t->pkt), &ccerr, nhb__now_ns());
      if (n > 0) send_pkt(q3, t->pkt, (size_t)n);
    }
    conn_drop(q3);
  }
}

void nhb__srv_h3_worker_free(nhb__srv_worker* w) {
  nhb__srv_h3w* t = w->h3;
  if (!t) return;
  while (t->free_streams) {
    nhb__srv_h3s* st = t->free_streams;
    t->free_streams = st->next;
    stream_free_memory(st);
  }
  free(t->buckets);
  free(t->nv);
  free(t);
  w->h3 = NULL;
}

int nhb__srv_h3_init(nhb_server* s, char* err, size_t err_len) {
  const nhb_server_config* c = &s->config;
  if (!c->http3) return 0;
  if (!s->ssl_ctx) {
    if (err && err_len) snprintf(err, err_len, "http3: HTTP/3 runs over QUIC, whose handshake is TLS: needs tls");
    return NHB_EINVAL;
  }
  gnutls_certificate_credentials_t cred = NULL;
  if (gnutls_certificate_allocate_credentials(&cred) != 0) return NHB_ENOMEM;
  s->h3_cred = cred;
  int r;
  /* Client certificates, as the TCP listener asks for them (server_tls.c):
   * the same CA file, now as GnuTLS's trust list; tls_init requires one. */
  if (c->tls_client_ca && *c->tls_client_ca) {
    r = gnutls_certificate_set_x509_trust_file(cred, c->tls_client_ca, GNUTLS_X509_FMT_PEM);
    if (r <= 0) {
      if (err && err_len)
        snprintf(err, err_len, "http3: GnuTLS cannot load CA certificates from tls_client_ca '%.500s'",
                 c->tls_client_ca);
      return NHB_EINVAL;
    }
  }
  if (c->tls_self_signed) {
    /* The generated key, handed over in PEM. */
    EVP_PKEY* key = SSL_CTX_get0_privatekey((SSL_CTX*)s->ssl_ctx);
    BIO* b = BIO_new(BIO_s_mem());
    char* kp = NULL;
    long kn = 0;
    if (b && key && PEM_write_bio_PrivateKey(b, key, NULL, NULL, 0, NULL, NULL)) kn = BIO_get_mem_data(b, &kp);
    gnutls_datum_t cert_d = {(unsigned char*)s->cert_pem, (unsigned)strlen(s->cert_pem)};
    gnutls_datum_t key_d = {(unsigned char*)kp, (unsigned)kn};
    r = kn > 0 ? gnutls_certificate_set_x509_key_mem(cred, &cert_d, &key_d, GNUTLS_X509_FMT_PEM) : -1;
    if (kp) OPENSSL_cleanse(kp, (size_t)kn);
    BIO_free(b);
  } else {
    r = gnutls_certificate_set_x509_key_file(cred, c->tls_cert_file, c->tls_key_file, GNUTLS_X509_FMT_PEM);
  }
  if (r < 0) {
    if (err && err_len)
      snprintf(err, err_len, "http3: GnuTLS cannot use the certificate and key (%s)", gnutls_strerror(r));
    return NHB_EINVAL;
  }
  return 0;
}

void nhb__srv_h3_free(nhb_server* s) {
  if (s->h3_cred) gnutls_certificate_free_credentials((gnutls_certificate_credentials_t)s->h3_cred);
  s->h3_cred = NULL;
}

/* ---- the fuzz seam -------------------------------------------------------------------- */

int nhb__srv_h3_feed(nhb__srv_worker* w, const uint8_t* p, size_t n, size_t split, size_t* responded) {
  if (!w->h3 && !(w->h3 = calloc(1, sizeof(*w->h3)))) return NHB_ENOMEM;
  nhb__srv_h3c* q3 = calloc(1, sizeof(*q3));
  if (!q3) return NHB_ENOMEM;
  q3->base.w = w;
  q3->base.kind = NHB__SRV_CONN_HTTP;
  q3->base.proto = NHB__SRV_PROTO_H3;
  q3->base.heap_idx = SIZE_MAX;
  q3->peer.ss_family = AF_INET;
  /* Marked as inside a library call throughout: a close asked for meanwhile
   * (the delay heap out of memory) only marks the connection, which is freed
   * below in any case. */
  q3->in_lib = 1;
  nghttp2_mem m = nhb__h2_mem_allocator(&w->h2_mem);
  q3->hmem.user_data = m.mem_user_data;
  q3->hmem.malloc = m.malloc;
  q3->hmem.free = m.free;
  q3->hmem.calloc = m.calloc;
  q3->hmem.realloc = m.realloc;
  int r = http_new(q3);
  /* The server's unidirectional streams (control, QPACK encoder, decoder)
   * have the ids QUIC gives a server's first three. */
  if (r == 0 && (nghttp3_conn_bind_control_stream(q3->hc, 3) != 0 || nghttp3_conn_bind_qpack_streams(q3->hc, 7, 11) != 0))
    r = -1;
  if (split > n) split = n;
  /* The request on the client's first bidirectional stream, in two reads. */
  if (r == 0 && nghttp3_conn_read_stream(q3->hc, 0, p, split, 0) < 0) r = 1;
  if (r == 0 && nghttp3_conn_read_stream(q3->hc, 0, p + split, n - split, 1) < 0) r = 1;
  /* Responses waiting for a delay are released now. */
  if (r == 0)
    for (nhb__srv_h3s* st = q3->streams; st; st = st->next)
      if (st->core.waiting) {
        st->core.waiting = 0;
        q3->nwaiting--;
        w->delayed--;
        submit(st);
      }
  /* Everything nghttp3 would send, taken as written. */
  size_t out = 0;
  for (int rounds = 0; r == 0 && rounds < 100000; rounds++) {
    int64_t sid = -1;
    int fin = 0;
    nghttp3_vec vec[H3_VECS];
    nghttp3_ssize nvec = nghttp3_conn_writev_stream(q3->hc, &sid, &fin, vec, H3_VECS);
    if (nvec < 0) {
      r = 1;
      break;
    }
    if (sid < 0) break;
    size_t total = 0;
    for (nghttp3_ssize i = 0; i < nvec; i++) total += vec[i].len;
    if (fin) fin_written(q3, sid, vec, nvec, (ngtcp2_ssize)total);
    if (nghttp3_conn_add_write_offset(q3->hc, sid, total) != 0) {
      r = 1;
      break;
    }
    out += total;
    if (!total && !fin) break;
  }
  if (responded) *responded = 0;
  for (nhb__srv_h3s* st = q3->streams; st; st = st->next)
    if (st->complete && responded) (*responded)++;
  NHB__UNUSED(out);
  nhb__srv_heap_remove(w, &q3->base);
  if (q3->hc) nghttp3_conn_del(q3->hc);
  while (q3->streams) stream_release(q3->streams);
  nhb__srv_buf_free(&q3->base.req.buf);
  free(q3->base.req.hdrs);
  free(q3);
  return r < 0 ? NHB_ENOMEM : 0;
}
