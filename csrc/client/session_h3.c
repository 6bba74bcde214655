/* session_h3.c: HTTP/3 over QUIC, on ngtcp2 + nghttp3 + GnuTLS
 * (docs/protocols.md "HTTP/3").
 *
 * Two vtables live here. The QUIC transport (nhb__transport_quic) rides on
 * the connected UDP socket of transport_udp.c: its `start` connects the
 * socket and sets up the connection's ngtcp2_conn and GnuTLS session; every
 * datagram goes to ngtcp2_conn_read_pkt(); the connection is reported ready
 * (nhb__conn_ready) only once the QUIC handshake is complete, so requests
 * that arrive meanwhile ride along as they do while a TCP or TLS connection
 * is on its way. The HTTP/3 session (nhb__session_h3) turns requests into
 * nghttp3 streams and nghttp3's callbacks into the pool's events.
 *
 * Why GnuTLS: OpenSSL 3.0 has no QUIC API, so the QUIC handshake runs on
 * GnuTLS through ngtcp2's crypto helper (libngtcp2_crypto_gnutls); the rest
 * of nhbench keeps OpenSSL. The run's TLS options map onto GnuTLS: --sni,
 * the certificate check (--cacert or the system store, the name it must be
 * valid for) and --insecure. Options GnuTLS cannot take from us (OpenSSL
 * cipher strings, TLS 1.2) are refused in Python before a run starts.
 *
 * Output: one uv_timer per connection (allocated with the connection entry,
 * once) serves both as ngtcp2's expiry timer and as the flush: anything that
 * gives QUIC something to send (a received packet to acknowledge, a request)
 * starts it with a zero time-out, so that everything of one loop iteration
 * goes out together in the next iteration's timer phase. The write loop asks
 * nghttp3 for stream data and ngtcp2 for packets, one datagram per packet,
 * sent with uv_udp_try_send (transport_udp.c): a full socket buffer drops the
 * packet, which QUIC's loss recovery sends again.
 *
 * Re-entrancy: ngtcp2 and nghttp3 call back into this file from inside
 * ngtcp2_conn_read_pkt(), and a response handed to the pool there may make
 * the pool send the next request at once. Requests are therefore never
 * submitted from inside the libraries: h3_send() only marks them, and
 * h3_open_waiting() opens their streams once the library call returned.
 * The same list holds requests waiting for the server to allow more streams
 * (MAX_STREAMS).
 *
 * Stream ids: QUIC's first client stream is 0, which the slot reserves for
 * "no stream", so a slot keeps id + 1 (SLOT_SID).
 *
 * Allocation: per connection ngtcp2, nghttp3 and GnuTLS allocate their state;
 * per request nghttp3 and ngtcp2 allocate a stream object and its buffers.
 * Both take an allocator, and get the worker's recycling one (h2_mem.c, as
 * nghttp2 does), so a busy worker reuses those blocks instead of calling
 * malloc per request. GnuTLS allocates with its own allocator, per connection.
 */
#include <fcntl.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <nghttp3/nghttp3.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/client.h"
#include "common/h2_mem.h"
#include "common/quic_common.h"

/* The largest UDP payload we send: ngtcp2's default ceiling for what it
 * writes (1452, Ethernet's 1500 less IPv6 and UDP headers) fits. */
#define H3_PKT_MAX 1500
/* QUIC's idle time-out that we announce: a server silent this long (hung,
 * or gone without an ICMP error) ends the connection; requests on it fail
 * as resets. Short enough to end a stuck run's connections within its drain,
 * long enough not to close a connection that merely idles between slow
 * releases. */
#define H3_IDLE_TIMEOUT_NS (30ull * 1000000000ull)
/* Flow control windows we grant: large enough that a load test is never
 * limited by them (as for HTTP/2, h2load's -w 30 -W 30). */
#define H3_STREAM_WINDOW (1ull << 24)
#define H3_CONNECTION_WINDOW (1ull << 30)
/* Stream data vectors per nghttp3_conn_writev_stream() call. */
#define H3_VECS 16

#define SLOT_SID(s) ((int64_t)(s)->stream_id - 1)

typedef struct nhb__h3_run {
  gnutls_certificate_credentials_t cred;
  nghttp3_nv* nva; /* every spec's header block, end to end */
  size_t* nvlen;   /* per spec */
  size_t* nvoff;   /* per spec: its first field in nva */
} nhb__h3_run;

/* A connection's QUIC and HTTP/3 state, in its nhb__conn's `proto`. */
typedef struct nhb__h3 {
  nhb__conn* conn;
  ngtcp2_crypto_conn_ref conn_ref; /* GnuTLS's session pointer: finds the ngtcp2_conn */
  ngtcp2_conn* qc;
  nghttp3_conn* hc;
  gnutls_session_t tls;
  ngtcp2_mem qmem; /* the worker's recycling allocator, for ngtcp2 ... */
  nghttp3_mem hmem; /* ... and for nghttp3 (both keep a pointer) */
  uv_timer_t timer;
  int timer_init;
  struct sockaddr_storage local;
  socklen_t local_len;
  uint64_t start_ns;  /* the handshake's start */
  uint64_t rx_ns;     /* the packet being read arrived: the latency phases' first byte */
  int handshake_done; /* ngtcp2 said so; reported to the pool after read_pkt returns */
  int in_lib;         /* inside an ngtcp2/nghttp3 call: no submissions now */
  int defer;          /* the pool is handing over the requests that rode along */
  int waiting;        /* slots without a stream yet (h3_open_waiting) */
  int goaway;         /* the server sent GOAWAY: streams from goaway_id on were never processed */
  int64_t goaway_id;
  int lib_error;      /* an nghttp3 error inside a callback, for the message */
  int sock_error;     /* a send failed for good (h3_write): the connection ends */
  int idle_closed;    /* QUIC's idle time-out ended it: closed without a word (RFC 9000 10.1) */
  int close_fd;       /* closed inside an ngtcp2 call: a copy of the socket for the CONNECTION_CLOSE
                       * once ngtcp2 returned (the pool closed the handle), or -1 */
  nhb__udp_tunnel* tun; /* through a CONNECT-UDP proxy (tunnel_udp.c), else NULL */
  uint8_t pkt[H3_PKT_MAX];
} nhb__h3;

static void h3_want_write(nhb__conn* c);
static void h3_open_waiting(nhb__conn* c);

/* ---- helpers ---------------------------------------------------------------- */

static nhb__h3_run* run_of(const nhb__conn* c) { return (nhb__h3_run*)c->worker->run->proto; }
static nhb__h3* h3_of(const nhb__conn* c) { return (nhb__h3*)c->proto; }

/* The slot of a stream, or NULL when it is not (or no longer) one of this
 * connection's requests: answered, timed out, or the connection is closing. */
static nhb__slot* h3_slot(nhb__conn* c, int64_t sid, void* stream_user_data) {
  nhb__slot* s = (nhb__slot*)stream_user_data;
  if (c->state != NHB__CX_READY || s == NULL || s->conn != c || s->stream_id == 0 || SLOT_SID(s) != sid)
    return NULL;
  return s;
}

static void h3_record(nhb__conn* c, int err, const char* fmt, const char* detail) {
  char text[sizeof(c->worker->first_error_text)];
  snprintf(text, sizeof(text), fmt, detail);
  nhb__worker_record_error_text(c->worker, err, text);
}

/* ---- ngtcp2 callbacks --------------------------------------------------------- */

static ngtcp2_conn* h3_get_conn(ngtcp2_crypto_conn_ref* ref) { return ((nhb__h3*)ref->user_data)->qc; }

static int h3_handshake_completed(ngtcp2_conn* qc, void* user_data) {
  NHB__UNUSED(qc);
  h3_of((nhb__conn*)user_data)->handshake_done = 1;
  return 0;
}

static int h3_setup_http(nhb__conn* c);

/* The 1-RTT keys are in: HTTP/3 is set up now, before the server's first
 * stream data (its control stream may share a datagram with the end of the
 * handshake). */
static int h3_recv_rx_key(ngtcp2_conn* qc, ngtcp2_crypto_level level, void* user_data) {
  NHB__UNUSED(qc);
  if (level != NGTCP2_CRYPTO_LEVEL_APPLICATION) return 0;
  return h3_setup_http((nhb__conn*)user_data) == 0 ? 0 : NGTCP2_ERR_CALLBACK_FAILURE;
}

static int h3_recv_stream_data(ngtcp2_conn* qc, uint32_t flags, int64_t sid, uint64_t offset, const uint8_t* data,
                               size_t len, void* user_data, void* stream_user_data) {
  NHB__UNUSED(offset);
  NHB__UNUSED(stream_user_data);
  nhb__h3* h = ((nhb__conn*)user_data)->proto;
  if (h->hc == NULL) return NGTCP2_ERR_CALLBACK_FAILURE;
  nghttp3_ssize n = nghttp3_conn_read_stream(h->hc, sid, data, len, flags & NGTCP2_STREAM_DATA_FLAG_FIN);
  if (n < 0) {
    h->lib_error = (int)n;
    return NGTCP2_ERR_CALLBACK_FAILURE;
  }
  ngtcp2_conn_extend_max_stream_offset(qc, sid, (uint64_t)n);
  ngtcp2_conn_extend_max_offset(qc, (uint64_t)n);
  return 0;
}

static int h3_acked_stream_data(ngtcp2_conn* qc, int64_t sid, uint64_t offset, uint64_t len, void* user_data,
                                void* stream_user_data) {
  NHB__UNUSED(qc);
  NHB__UNUSED(offset);
  NHB__UNUSED(stream_user_data);
  nhb__h3* h = ((nhb__conn*)user_data)->proto;
  if (h->hc == NULL) return 0;
  int r = nghttp3_conn_add_ack_offset(h->hc, sid, len);
  if (r != 0) h->lib_error = r;
  return r == 0 ? 0 : NGTCP2_ERR_CALLBACK_FAILURE;
}

static int h3_stream_close(ngtcp2_conn* qc, uint32_t flags, int64_t sid, uint64_t code, void* user_data,
                           void* stream_user_data) {
  NHB__UNUSED(stream_user_data);
  nhb__h3* h = ((nhb__conn*)user_data)->proto;
  if (h->hc == NULL) return 0;
  if (!(flags & NGTCP2_STREAM_CLOSE_FLAG_APP_ERROR_CODE_SET)) code = NGHTTP3_H3_NO_ERROR;
  int r = nghttp3_conn_close_stream(h->hc, sid, code);
  if (r == NGHTTP3_ERR_STREAM_NOT_FOUND) {
    /* A stream nghttp3 never saw data on; a server's unidirectional one
     * still counts against its limit, which we raise again. */
    if (!ngtcp2_is_bidi_stream(sid)) ngtcp2_conn_extend_max_streams_uni(qc, 1);
    return 0;
  }
  if (r != 0) h->lib_error = r;
  return r == 0 ? 0 : NGTCP2_ERR_CALLBACK_FAILURE;
}

static int h3_stream_reset(ngtcp2_conn* qc, int64_t sid, uint64_t final_size, uint64_t code, void* user_data,
                           void* stream_user_data) {
  NHB__UNUSED(qc);
  NHB__UNUSED(final_size);
  NHB__UNUSED(code);
  NHB__UNUSED(stream_user_data);
  nhb__h3* h = ((nhb__conn*)user_data)->proto;
  if (h->hc != NULL && nghttp3_conn_shutdown_stream_read(h->hc, sid) != 0) return NGTCP2_ERR_CALLBACK_FAILURE;
  return 0;
}

static int h3_stream_stop_sending(ngtcp2_conn* qc, int64_t sid, uint64_t code, void* user_data,
                                  void* stream_user_data) {
  return h3_stream_reset(qc, sid, 0, code, user_data, stream_user_data);
}

static int h3_extend_max_stream_data(ngtcp2_conn* qc, int64_t sid, uint64_t max_data, void* user_data,
                                     void* stream_user_data) {
  NHB__UNUSED(qc);
  NHB__UNUSED(max_data);
  NHB__UNUSED(stream_user_data);
  nhb__h3* h = ((nhb__conn*)user_data)->proto;
  if (h->hc != NULL && nghttp3_conn_unblock_stream(h->hc, sid) != 0) return NGTCP2_ERR_CALLBACK_FAILURE;
  return 0;
}

/* ---- nghttp3 callbacks --------------------------------------------------------- */

static int h3_recv_data(nghttp3_conn* hc, int64_t sid, const uint8_t* data, size_t len, void* user_data,
                        void* stream_user_data) {
  NHB__UNUSED(hc);
  NHB__UNUSED(data);
  nhb__conn* c = (nhb__conn*)user_data;
  nhb__slot* s = h3_slot(c, sid, stream_user_data);
  if (s != NULL) s->body_bytes += len;
  /* The body is counted, not kept: the window opens again at once. */
  ngtcp2_conn_extend_max_stream_offset(h3_of(c)->qc, sid, len);
  ngtcp2_conn_extend_max_offset(h3_of(c)->qc, len);
  return 0;
}

static int h3_deferred_consume(nghttp3_conn* hc, int64_t sid, size_t consumed, void* user_data,
                               void* stream_user_data) {
  NHB__UNUSED(hc);
  NHB__UNUSED(stream_user_data);
  nhb__conn* c = (nhb__conn*)user_data;
  ngtcp2_conn_extend_max_stream_offset(h3_of(c)->qc, sid, consumed);
  ngtcp2_conn_extend_max_offset(h3_of(c)->qc, consumed);
  return 0;
}

/* A response over one of the client's limits (client.h, NHB__RESP_*): a
 * protocol error, counted as one; the stream is shut down and the request
 * ends now as a stream reset. The rest of the block still reaches
 * h3_recv_header, which finds no slot and returns at once. */
static void h3_over(nhb__conn* c, nghttp3_conn* hc, int64_t sid, nhb__slot* s, const char* why) {
  nhb__worker* w = c->worker;
  nghttp3_conn_set_stream_user_data(hc, sid, NULL);
  ngtcp2_conn_shutdown_stream(h3_of(c)->qc, sid, NGHTTP3_H3_EXCESSIVE_LOAD);
  h3_want_write(c);
  h3_record(c, NHB_EPROTO, "HTTP/3: stream reset: %s", why);
  w->stats.counters[NHB_CTR_UPSTREAM_CX_PROTOCOL_ERROR]++;
  s->stream_id = 0;
  nhb__conn_slot_failed(c, s, NHB_CTR_STREAM_RESETS);
}

/* One field against the limit, counted as SETTINGS_MAX_FIELD_SECTION_SIZE
 * counts it (name + value + 32, which also bounds the fields of a block).
 * Returns 0 when the request ended. */
static inline int h3_field_fits(nhb__conn* c, nghttp3_conn* hc, int64_t sid, nhb__slot* s, size_t namelen,
                                size_t valuelen) {
  uint64_t list = (uint64_t)s->hdr_list + namelen + valuelen + 32;
  if (NHB__UNLIKELY(list > NHB__RESP_HEADER_BYTES)) {
    h3_over(c, hc, sid, s,
            "a header block over 98304 bytes decoded (the client's limit, as SETTINGS_MAX_FIELD_SECTION_SIZE "
            "counts it: name + value + 32 per field)");
    return 0;
  }
  s->hdr_list = (uint32_t)list;
  return 1;
}

static int h3_begin_headers(nghttp3_conn* hc, int64_t sid, void* user_data, void* stream_user_data) {
  NHB__UNUSED(hc);
  nhb__slot* s = h3_slot((nhb__conn*)user_data, sid, stream_user_data);
  if (s == NULL) return 0;
  s->hdr_list = 0;
  /* The response's first byte: its first header block (an interim 1xx's
   * included), timed at the packet that brought it. */
  if (s->first_ns == 0) s->first_ns = h3_of((nhb__conn*)user_data)->rx_ns;
  return 0;
}

/* One field of a response's header block, held to the limit and, for
 * :status, read. Returns the slot when the field is a regular one that
 * stands, for the observers (observer.c); NULL when the field was the
 * status, or the request ended. */
static inline __attribute__((always_inline)) nhb__slot* h3_field(nhb__conn* c, nghttp3_conn* hc, int64_t sid,
                                                                 int32_t token, nghttp3_vec n, nghttp3_vec v,
                                                                 void* stream_user_data) {
  nhb__slot* s = h3_slot(c, sid, stream_user_data);
  if (s == NULL) return NULL;
  if (!h3_field_fits(c, hc, sid, s, n.len, v.len)) return NULL;
  if (token == NGHTTP3_QPACK_TOKEN__STATUS) {
    /* nghttp3 checked it is three digits, neither under 100 (RFC 9110
     * section 15) nor 101: its HTTP messaging checks, which the client keeps
     * on for HTTP/3, reset the stream of such a response with
     * H3_MESSAGE_ERROR before any callback sees the field (as session_h2.c's
     * own checks do for HTTP/2; tests/test_h3.py pins it down). */
    int status = 0;
    for (size_t i = 0; i < v.len && i < 3; i++) status = status * 10 + (v.base[i] - '0');
    s->status = status;
    return NULL;
  }
  if (n.len == 0 || n.base[0] == ':') return NULL;
  /* As for HTTP/1.1 and HTTP/2: names plus values of the regular fields. */
  s->header_bytes += n.len + v.len;
  return s;
}

static int h3_recv_header(nghttp3_conn* hc, int64_t sid, int32_t token, nghttp3_rcbuf* name,
                          nghttp3_rcbuf* value, uint8_t flags, void* user_data, void* stream_user_data) {
  NHB__UNUSED(flags);
  h3_field((nhb__conn*)user_data, hc, sid, token, nghttp3_rcbuf_get_buf(name), nghttp3_rcbuf_get_buf(value),
           stream_user_data);
  return 0;
}

static int h3_end_headers(nghttp3_conn* hc, int64_t sid, int fin, void* user_data, void* stream_user_data) {
  NHB__UNUSED(fin);
  nhb__conn* c = (nhb__conn*)user_data;
  nhb__slot* s = h3_slot(c, sid, stream_user_data);
  if (s == NULL) return 0;
  /* Trailers, if any, are a block of their own. */
  s->hdr_list = 0;
  if (s->status >= 100 && s->status < 200) {
    /* An interim response (103 Early Hints): the real one follows. */
    s->status = 0;
    s->header_bytes = 0;
    if (NHB__UNLIKELY(++s->interims > NHB__RESP_INTERIM))
      h3_over(c, hc, sid, s, "more than 100 interim (1xx) responses to one request (the client's limit)");
    return 0;
  }
  return 0;
}

/* Trailers are not looked at, only held to the limits. */
static int h3_recv_trailer(nghttp3_conn* hc, int64_t sid, int32_t token, nghttp3_rcbuf* name,
                           nghttp3_rcbuf* value, uint8_t flags, void* user_data, void* stream_user_data) {
  NHB__UNUSED(token);
  NHB__UNUSED(flags);
  nhb__conn* c = (nhb__conn*)user_data;
  nhb__slot* s = h3_slot(c, sid, stream_user_data);
  if (s == NULL) return 0;
  h3_field_fits(c, hc, sid, s, nghttp3_rcbuf_get_buf(name).len, nghttp3_rcbuf_get_buf(value).len);
  return 0;
}

/* The response is complete (the server's FIN). */
static int h3_end_stream(nghttp3_conn* hc, int64_t sid, void* user_data, void* stream_user_data) {
  nhb__conn* c = (nhb__conn*)user_data;
  nhb__slot* s = h3_slot(c, sid, stream_user_data);
  if (s == NULL) return 0;
  nghttp3_conn_set_stream_user_data(hc, sid, NULL);
  s->stream_id = 0;
  nhb__conn_response(c, s, s->status);
  return 0;
}

/* The stream closed; a request still on it never got its whole response. */
static int h3_http_stream_close(nghttp3_conn* hc, int64_t sid, uint64_t code, void* user_data,
                                void* stream_user_data) {
  NHB__UNUSED(hc);
  nhb__conn* c = (nhb__conn*)user_data;
  if (ngtcp2_is_bidi_stream(sid) == 0) {
    ngtcp2_conn_extend_max_streams_uni(h3_of(c)->qc, 1);
    return 0;
  }
  nhb__slot* s = h3_slot(c, sid, stream_user_data);
  if (s == NULL) return 0;
  s->stream_id = 0;
  if (code == NGHTTP3_H3_REQUEST_REJECTED) {
    /* Never processed (RFC 9114 section 4.1.1): safe to send again. */
    nhb__conn_slot_refused(c, s);
    return 0;
  }
  char code_text[32];
  snprintf(code_text, sizeof(code_text), "0x%llx", (unsigned long long)code);
  h3_record(c, NHB_EPROTO, "HTTP/3: stream reset before the response ended (error %s)", code_text);
  nhb__conn_slot_failed(c, s, NHB_CTR_STREAM_RESETS);
  return 0;
}

static int h3_stop_sending(nghttp3_conn* hc, int64_t sid, uint64_t code, void* user_data, void* stream_user_data) {
  NHB__UNUSED(hc);
  NHB__UNUSED(stream_user_data);
  nhb__conn* c = (nhb__conn*)user_data;
  return ngtcp2_conn_shutdown_stream_read(h3_of(c)->qc, sid, code) == 0 ? 0 : NGHTTP3_ERR_CALLBACK_FAILURE;
}

static int h3_reset_stream(nghttp3_conn* hc, int64_t sid, uint64_t code, void* user_data, void* stream_user_data) {
  NHB__UNUSED(hc);
  NHB__UNUSED(stream_user_data);
  nhb__conn* c = (nhb__conn*)user_data;
  return ngtcp2_conn_shutdown_stream_write(h3_of(c)->qc, sid, code) == 0 ? 0 : NGHTTP3_ERR_CALLBACK_FAILURE;
}

/* GOAWAY: requests on streams from `id` on were never processed. */
static int h3_shutdown(nghttp3_conn* hc, int64_t id, void* user_data) {
  NHB__UNUSED(hc);
  nhb__conn* c = (nhb__conn*)user_data;
  nhb__h3* h = c->proto;
  if (!h->goaway) c->worker->stats.counters[NHB_CTR_UPSTREAM_CX_CLOSE_NOTIFY]++;
  h->goaway = 1;
  h->goaway_id = id;
  return 0;
}

/* The request body: the spec's, which lives as long as the run, so nghttp3
 * may keep pointing into it until the server acknowledged it. */
static nghttp3_ssize h3_read_body(nghttp3_conn* hc, int64_t sid, nghttp3_vec* vec, size_t veccnt,
                                  uint32_t* pflags, void* user_data, void* stream_user_data) {
  NHB__UNUSED(hc);
  NHB__UNUSED(veccnt);
  nhb__conn* c = (nhb__conn*)user_data;
  nhb__slot* s = h3_slot(c, sid, stream_user_data);
  *pflags |= NGHTTP3_DATA_FLAG_EOF;
  if (s == NULL || s->body_left == 0) return 0;
  const nhb__spec* sp = &c->worker->run->specs[s->rq.spec];
  vec[0].base = (uint8_t*)(uintptr_t)(sp->body + sp->body_size - s->body_left);
  vec[0].len = (size_t)s->body_left;
  s->body_left = 0;
  return 1;
}

static const nghttp3_callbacks h3_http_callbacks = {
    NULL, /* acked_stream_data: the bodies are the run's, nothing to free */
    h3_http_stream_close,
    h3_recv_data,
    h3_deferred_consume,
    h3_begin_headers,
    h3_recv_header,
    h3_end_headers,
    NULL, /* begin_trailers: trailers are not looked at */
    h3_recv_trailer,
    NULL, /* end_trailers */
    h3_stop_sending,
    h3_end_stream,
    h3_reset_stream,
    h3_shutdown,
};

/* ---- response observers (observer.c) ------------------------------------------ */

/* The callbacks of a run with response observers (the latency header,
 * checks, grouping by a header, streaming statistics): the plain ones' work,
 * then one observer step per event, each body piece timed at the packet
 * that brought it. A run without observers gives nghttp3 h3_http_callbacks
 * and pays nothing per field or chunk. Each stream's response is observed
 * with its slot's own state: a header block (the first, or the one after an
 * interim response) begins it, its regular fields and DATA feed it, its FIN
 * ends it. Trailers are held to the limits only: no observer reads them
 * on HTTP/3 (gRPC, the one that does, runs on HTTP/2). */
static int h3_obs_begin_headers(nghttp3_conn* hc, int64_t sid, void* user_data, void* stream_user_data) {
  h3_begin_headers(hc, sid, user_data, stream_user_data);
  nhb__conn* c = (nhb__conn*)user_data;
  nhb__slot* s = h3_slot(c, sid, stream_user_data);
  if (s == NULL || nhb__obs_begin(c->worker, s) == 0) return 0;
  /* No memory for the slot's check state (once per slot): the connection fails. */
  h3_record(c, NHB_ENOMEM, "HTTP/3: %s", "no memory for a stream's response checks");
  return NGHTTP3_ERR_CALLBACK_FAILURE;
}

static int h3_obs_recv_header(nghttp3_conn* hc, int64_t sid, int32_t token, nghttp3_rcbuf* name,
                              nghttp3_rcbuf* value, uint8_t flags, void* user_data, void* stream_user_data) {
  NHB__UNUSED(flags);
  nhb__conn* c = (nhb__conn*)user_data;
  nghttp3_vec n = nghttp3_rcbuf_get_buf(name);
  nghttp3_vec v = nghttp3_rcbuf_get_buf(value);
  nhb__slot* s = h3_field(c, hc, sid, token, n, v, stream_user_data);
  if (s != NULL) nhb__obs_field(c->worker, s, (const char*)n.base, n.len, (const char*)v.base, v.len, 0);
  return 0;
}

static int h3_obs_end_headers(nghttp3_conn* hc, int64_t sid, int fin, void* user_data, void* stream_user_data) {
  nhb__conn* c = (nhb__conn*)user_data;
  nhb__slot* s = h3_slot(c, sid, stream_user_data);
  if (s != NULL) nhb__obs_head_end(c->worker, s);
  return h3_end_headers(hc, sid, fin, user_data, stream_user_data);
}

static int h3_obs_recv_data(nghttp3_conn* hc, int64_t sid, const uint8_t* data, size_t len, void* user_data,
                            void* stream_user_data) {
  nhb__conn* c = (nhb__conn*)user_data;
  nhb__slot* s = h3_slot(c, sid, stream_user_data);
  /* DATA comes after the final response's header block (nghttp3 refuses
   * it before one), which began the slot's observers. */
  if (s != NULL && len != 0) {
    uint64_t now = h3_of(c)->rx_ns;
    nhb__obs_data(c->worker, s, (const char*)data, len, now);
    nhb__obs_piece(c->worker, s, now);
  }
  return h3_recv_data(hc, sid, data, len, user_data, stream_user_data);
}

static int h3_obs_end_stream(nghttp3_conn* hc, int64_t sid, void* user_data, void* stream_user_data) {
  nhb__conn* c = (nhb__conn*)user_data;
  nhb__slot* s = h3_slot(c, sid, stream_user_data);
  if (s == NULL) return 0;
  nghttp3_conn_set_stream_user_data(hc, sid, NULL);
  s->stream_id = 0;
  nhb__obs_end(c, s);
  return 0;
}

static const nghttp3_callbacks h3_obs_callbacks = {
    NULL,
    h3_http_stream_close,
    h3_obs_recv_data,
    h3_deferred_consume,
    h3_obs_begin_headers,
    h3_obs_recv_header,
    h3_obs_end_headers,
    NULL,
    h3_recv_trailer,
    NULL,
    h3_stop_sending,
    h3_obs_end_stream,
    h3_reset_stream,
    h3_shutdown,
};

/* nghttp3 with its control and QPACK streams. */
static int h3_setup_http(nhb__conn* c) {
  nhb__h3* h = c->proto;
  if (h->hc != NULL) return 0;
  if (ngtcp2_conn_get_max_local_streams_uni(h->qc) < 3) {
    h3_record(c, NHB_EPROTO, "HTTP/3: the server allows %s unidirectional streams (3 needed)", "fewer than 3");
    return -1;
  }
  nghttp3_settings settings;
  nghttp3_settings_default(&settings);
  /* Our QPACK decoder offers no dynamic table: the server encodes responses
   * with the static table and literals, so a response never waits for the
   * server's encoder stream (no blocked streams). Requests are encoded by
   * nghttp3 with a dynamic table when the server's SETTINGS offer one
   * (nghttp3's default), as HPACK does for HTTP/2. */
  settings.qpack_max_dtable_capacity = 0;
  settings.qpack_blocked_streams = 0;
  /* What the client takes (client.h); h3_recv_header enforces it. */
  settings.max_field_section_size = NHB__RESP_HEADER_BYTES;
  const nghttp3_callbacks* cbs = c->worker->run->obs != 0 ? &h3_obs_callbacks : &h3_http_callbacks;
  if (nghttp3_conn_client_new(&h->hc, cbs, &settings, &h->hmem, c) != 0) return -1;
  int64_t ctrl, enc, dec;
  if (ngtcp2_conn_open_uni_stream(h->qc, &ctrl, NULL) != 0 || nghttp3_conn_bind_control_stream(h->hc, ctrl) != 0 ||
      ngtcp2_conn_open_uni_stream(h->qc, &enc, NULL) != 0 || ngtcp2_conn_open_uni_stream(h->qc, &dec, NULL) != 0 ||
      nghttp3_conn_bind_qpack_streams(h->hc, enc, dec) != 0)
    return -1;
  return 0;
}

/* ---- connection set-up and tear-down ------------------------------------------ */

static void h3_on_timer(uv_timer_t* timer);

static int h3_alloc(nhb__conn* c) {
  if (c->proto != NULL) return 0;
  nhb__h3* h = calloc(1, sizeof(*h));
  if (h == NULL) return NHB_ENOMEM;
  h->conn = c;
  h->close_fd = -1;
  h->conn_ref.get_conn = h3_get_conn;
  h->conn_ref.user_data = h;
  nghttp2_mem m = nhb__h2_mem_allocator(&c->worker->h2_mem);
  h->qmem.user_data = m.mem_user_data;
  h->qmem.malloc = m.malloc;
  h->qmem.free = m.free;
  h->qmem.calloc = m.calloc;
  h->qmem.realloc = m.realloc;
  h->hmem.user_data = m.mem_user_data;
  h->hmem.malloc = m.malloc;
  h->hmem.free = m.free;
  h->hmem.calloc = m.calloc;
  h->hmem.realloc = m.realloc;
  int r = uv_timer_init(&c->worker->loop, &h->timer);
  if (r < 0) {
    free(h);
    return r;
  }
  h->timer.data = c;
  h->timer_init = 1;
  c->proto = h;
  if (NHB__UNLIKELY(c->worker->run->udp_tunnel != NULL)) return nhb__udp_tunnel_new(c, &h->tun);
  return 0;
}

/* Drops the connection's QUIC, HTTP/3 and TLS state (the entry keeps its
 * buffer and timer for the next connection). */
static void h3_teardown(nhb__conn* c) {
  nhb__h3* h = c->proto;
  if (h == NULL) return;
  if (h->timer_init) uv_timer_stop(&h->timer);
  if (h->close_fd >= 0) close(h->close_fd);
  h->close_fd = -1;
  if (h->tun != NULL) nhb__udp_tunnel_teardown(h->tun);
  if (h->hc != NULL) nghttp3_conn_del(h->hc);
  if (h->qc != NULL) ngtcp2_conn_del(h->qc);
  if (h->tls != NULL) gnutls_deinit(h->tls);
  h->hc = NULL;
  h->qc = NULL;
  h->tls = NULL;
}

static int h3_tls_init(nhb__conn* c) {
  nhb__h3* h = c->proto;
  const nhb_tls_config* tc = &c->worker->run->config.tls;
  if (gnutls_init(&h->tls, GNUTLS_CLIENT) != 0) return NHB_ENOMEM;
  /* QUIC is TLS 1.3 only, and QUIC has no middleboxes to fool (RFC 9001
   * section 8.4: no compatibility mode). */
  if (ngtcp2_crypto_gnutls_configure_client_session(h->tls) != 0 ||
      gnutls_priority_set_direct(h->tls, "NORMAL:-VERS-ALL:+VERS-TLS1.3:%DISABLE_TLS13_COMPAT_MODE", NULL) != 0 ||
      gnutls_credentials_set(h->tls, GNUTLS_CRD_CERTIFICATE, run_of(c)->cred) != 0)
    return NHB_ETLS;
  gnutls_session_set_ptr(h->tls, &h->conn_ref);
  static const gnutls_datum_t alpn = {(unsigned char*)"h3", 2};
  if (gnutls_alpn_set_protocols(h->tls, &alpn, 1, GNUTLS_ALPN_MANDATORY) != 0) return NHB_ETLS;
  if (tc->sni != NULL && tc->sni[0] != '\0' &&
      gnutls_server_name_set(h->tls, GNUTLS_NAME_DNS, tc->sni, strlen(tc->sni)) != 0)
    return NHB_ETLS;
  /* GnuTLS checks the chain and, given a name, that the certificate is valid
   * for it (an IP address is matched against the IP addresses it names). */
  if (!tc->insecure)
    gnutls_session_set_verify_cert(h->tls, tc->verify_name != NULL && tc->verify_name[0] ? tc->verify_name : NULL,
                                   0);
  return 0;
}

static int h3_quic_init(nhb__conn* c, const nhb_sockaddr* to) {
  nhb__h3* h = c->proto;
  const nhb_client_config* cfg = &c->worker->run->config;
  ngtcp2_callbacks cb;
  memset(&cb, 0, sizeof(cb));
  cb.client_initial = ngtcp2_crypto_client_initial_cb;
  cb.recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb;
  cb.handshake_completed = h3_handshake_completed;
  cb.encrypt = ngtcp2_crypto_encrypt_cb;
  cb.decrypt = ngtcp2_crypto_decrypt_cb;
  cb.hp_mask = ngtcp2_crypto_hp_mask_cb;
  cb.recv_stream_data = h3_recv_stream_data;
  cb.acked_stream_data_offset = h3_acked_stream_data;
  cb.stream_close = h3_stream_close;
  cb.recv_retry = ngtcp2_crypto_recv_retry_cb;
  cb.rand = nhb__quic_rand;
  cb.get_new_connection_id = nhb__quic_new_connection_id;
  cb.update_key = ngtcp2_crypto_update_key_cb;
  cb.stream_reset = h3_stream_reset;
  cb.extend_max_stream_data = h3_extend_max_stream_data;
  cb.delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb;
  cb.delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb;
  cb.get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb;
  cb.stream_stop_sending = h3_stream_stop_sending;
  cb.version_negotiation = ngtcp2_crypto_version_negotiation_cb;
  cb.recv_rx_key = h3_recv_rx_key;

  ngtcp2_cid dcid, scid;
  dcid.datalen = 18;
  scid.datalen = 17;
  if (gnutls_rnd(GNUTLS_RND_RANDOM, dcid.data, dcid.datalen) != 0 ||
      gnutls_rnd(GNUTLS_RND_RANDOM, scid.data, scid.datalen) != 0)
    return NHB_ENOMEM;

  ngtcp2_settings settings;
  ngtcp2_settings_default(&settings);
  settings.initial_ts = nhb__now_ns();
  /* The pool's connect time-out (--timeout) ends a slow handshake with its
   * own message; ngtcp2's own limit stays out of its way. */
  settings.handshake_timeout = cfg->connect_timeout_ns ? 2 * cfg->connect_timeout_ns : UINT64_MAX;

  ngtcp2_transport_params params;
  ngtcp2_transport_params_default(&params);
  /* The server opens its control and QPACK streams; we take no pushes and
   * open no bidirectional streams of the server's. */
  params.initial_max_streams_uni = 3;
  params.initial_max_streams_bidi = 0;
  params.initial_max_stream_data_bidi_local = H3_STREAM_WINDOW;
  params.initial_max_stream_data_uni = H3_STREAM_WINDOW;
  params.initial_max_data = H3_CONNECTION_WINDOW;
  params.max_idle_timeout = H3_IDLE_TIMEOUT_NS;
  if (h->tun != NULL) {
    /* Inside a CONNECT-UDP tunnel each packet rides in a DATAGRAM frame of
     * the proxy connection: QUIC's smallest size both ways, no probing. */
    settings.max_tx_udp_payload_size = NHB__UDP_TUNNEL_INNER_MAX;
    settings.no_pmtud = 1;
    params.max_udp_payload_size = NHB__UDP_TUNNEL_INNER_MAX;
  }

  ngtcp2_path path;
  path.local.addr = (ngtcp2_sockaddr*)&h->local;
  path.local.addrlen = h->local_len;
  path.remote.addr = (ngtcp2_sockaddr*)(uintptr_t)to->bytes;
  path.remote.addrlen = to->len;
  path.user_data = NULL;
  if (ngtcp2_conn_client_new(&h->qc, &dcid, &scid, &path, NGTCP2_PROTO_VER_V1, &cb, &settings, &params, &h->qmem,
                             c) != 0)
    return NHB_ENOMEM;
  ngtcp2_conn_set_tls_native_handle(h->qc, h->tls);
  return 0;
}

/* ---- the QUIC transport ------------------------------------------------------ */

static int quic_start(nhb__conn* c, const nhb_sockaddr* to) {
  int r = h3_alloc(c);
  if (r < 0) return r;
  nhb__h3* h = c->proto;
  h->handshake_done = 0;
  h->in_lib = 0;
  h->defer = 0;
  h->waiting = 0;
  h->goaway = 0;
  h->lib_error = 0;
  h->sock_error = 0;
  h->idle_closed = 0;
  h->start_ns = nhb__now_ns();
  /* The connected UDP socket of transport_udp.c: its datagrams come back
   * through c->transport->on_read, ours. */
  r = nhb__transport_udp.start(c, to);
  if (r < 0) return r;
  int len = (int)sizeof(h->local);
  r = uv_udp_getsockname(&c->udp, (struct sockaddr*)&h->local, &len);
  if (r < 0) return r;
  h->local_len = (socklen_t)len;
  /* Through a CONNECT-UDP proxy the socket carries the tunnel first; the
   * QUIC connection to the origin starts once it is up (nhb__h3_tunnel_up). */
  if (NHB__UNLIKELY(h->tun != NULL))
    return nhb__udp_tunnel_start(c, h->tun, (const struct sockaddr*)&h->local, h->local_len, to);
  r = h3_tls_init(c);
  if (r == 0) r = h3_quic_init(c, to);
  return r;
}

int nhb__h3_tunnel_up(nhb__conn* c) {
  nhb__h3* h = c->proto;
  h->start_ns = nhb__now_ns();
  int r = h3_tls_init(c);
  if (r == 0) r = h3_quic_init(c, &c->worker->run->endpoints[c->endpoint]);
  if (r < 0) {
    nhb__conn_fail(c, r, NHB_CTR_POOL_CONNECTION_FAILURE);
    return r;
  }
  h3_want_write(c);
  return 0;
}

/* The socket is connected: the client's first flight goes out (the
 * tunnel's, through a proxy: its timer is armed already). */
static void quic_on_connected(nhb__conn* c) {
  if (NHB__LIKELY(h3_of(c)->tun == NULL)) h3_want_write(c);
}

/* Why the handshake failed, in one line, as the TLS transport says it. */
static void h3_handshake_error(nhb__conn* c, char* text, size_t len) {
  nhb__h3* h = c->proto;
  unsigned status = h->tls != NULL ? gnutls_session_get_verify_cert_status(h->tls) : 0;
  const nhb_tls_config* tc = &c->worker->run->config.tls;
  if (status != 0 && !tc->insecure) {
    gnutls_datum_t out = {NULL, 0};
    if (gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &out, 0) == 0 && out.data != NULL) {
      /* GnuTLS ends its sentences with a space: one line, trimmed. */
      size_t n = out.size;
      while (n > 0 && (out.data[n - 1] == ' ' || out.data[n - 1] == '\0')) n--;
      snprintf(text, len, "TLS handshake failed (HTTP/3): certificate verify failed: %.*s", (int)n,
               (const char*)out.data);
      gnutls_free(out.data);
      return;
    }
  }
  uint8_t alert = ngtcp2_conn_get_tls_alert(h->qc);
  const char* name = alert ? gnutls_alert_get_strname((gnutls_alert_description_t)alert) : NULL;
  if (name != NULL)
    snprintf(text, len, "TLS handshake failed (HTTP/3): %s", name);
  else
    snprintf(text, len, "TLS handshake failed (HTTP/3): the QUIC handshake broke off");
}

/* The CONNECTION_CLOSE for `ccerr` built in h->pkt: its length, or 0 when
 * there is none to send (the connection is closing or draining already). */
static size_t h3_close_packet(nhb__h3* h, const ngtcp2_connection_close_error* ccerr) {
  if (h == NULL || h->qc == NULL || ngtcp2_conn_is_in_closing_period(h->qc) ||
      ngtcp2_conn_is_in_draining_period(h->qc))
    return 0;
  ngtcp2_path_storage ps;
  ngtcp2_path_storage_zero(&ps);
  ngtcp2_pkt_info pi;
  ngtcp2_ssize n = ngtcp2_conn_write_connection_close(h->qc, &ps.path, &pi, h->pkt, sizeof(h->pkt), ccerr,
                                                      nhb__now_ns());
  return n > 0 ? (size_t)n : 0;
}

/* Sends a CONNECTION_CLOSE (best effort: a lost one ends at the server's
 * idle time-out). */
static void h3_send_close(nhb__conn* c, const ngtcp2_connection_close_error* ccerr) {
  nhb__h3* h = c->proto;
  size_t n = h3_close_packet(h, ccerr);
  if (n == 0) return;
  if (h->tun != NULL)
    (void)nhb__udp_tunnel_send(c, h->tun, h->pkt, n);
  else
    (void)nhb__transport_udp.write(c, (const char*)h->pkt, n);
}

/* The close of a connection we are done with: NO_ERROR. */
static ngtcp2_connection_close_error h3_done(void) {
  ngtcp2_connection_close_error ccerr;
  ngtcp2_connection_close_error_default(&ccerr);
  ngtcp2_connection_close_error_set_application_error(&ccerr, NGHTTP3_H3_NO_ERROR, NULL, 0);
  return ccerr;
}

/* After ngtcp2 returned: the CONNECTION_CLOSE a close inside it left
 * (h3_conn_closing), on the copy of the closed socket. */
static void h3_closed_inside(nhb__conn* c) {
  nhb__h3* h = c->proto;
  ngtcp2_connection_close_error ccerr = h3_done();
  size_t n = h3_close_packet(h, &ccerr);
  if (n > 0 && send(h->close_fd, h->pkt, n, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)n)
    c->worker->stats.counters[NHB_CTR_UPSTREAM_CX_TX_BYTES_TOTAL] += n;
  close(h->close_fd);
  h->close_fd = -1;
}

/* ngtcp2 refused what arrived or ended the connection: `r` is its error. */
static void h3_conn_error(nhb__conn* c, int r) {
  nhb__h3* h = c->proto;
  nhb__worker* w = c->worker;
  int connecting = c->state == NHB__CX_CONNECTING;
  char text[sizeof(w->first_error_text)];
  if (r == NGTCP2_ERR_DRAINING || r == NGTCP2_ERR_CLOSING) {
    /* The server closed the connection (CONNECTION_CLOSE). */
    ngtcp2_connection_close_error ccerr;
    ngtcp2_conn_get_connection_close_error(h->qc, &ccerr);
    w->stats.counters[NHB_CTR_UPSTREAM_CX_DESTROY_REMOTE]++;
    if (connecting) {
      w->stats.counters[NHB_CTR_SSL_CONNECTION_ERROR]++;
      if (ccerr.type == NGTCP2_CONNECTION_CLOSE_ERROR_CODE_TYPE_TRANSPORT && (ccerr.error_code & 0xff00) == 0x0100)
        snprintf(text, sizeof(text), "TLS handshake failed (HTTP/3): the server sent the TLS alert %s",
                 gnutls_alert_get_strname((gnutls_alert_description_t)(ccerr.error_code & 0xff))
                     ? gnutls_alert_get_strname((gnutls_alert_description_t)(ccerr.error_code & 0xff))
                     : "(unknown)");
      else
        snprintf(text, sizeof(text), "HTTP/3: the server closed the connection during the handshake (error 0x%llx)",
                 (unsigned long long)ccerr.error_code);
      nhb__worker_record_error_text(w, NHB_ETLS, text);
      nhb__conn_fail(c, NHB_ETLS, NHB_CTR_POOL_CONNECTION_FAILURE);
      return;
    }
    if (c->nactive > c->nrefused) {
      snprintf(text, sizeof(text), "HTTP/3: the server closed the connection (error 0x%llx%s%.*s)",
               (unsigned long long)ccerr.error_code, ccerr.reasonlen ? ": " : "", (int)ccerr.reasonlen,
               ccerr.reasonlen ? (const char*)ccerr.reason : "");
      nhb__worker_record_error_text(w, UV_ECONNRESET, text);
    }
    /* As a TCP peer's close: requests in flight fail as resets. */
    nhb__conn_eof(c);
    return;
  }
  if (r == NGTCP2_ERR_IDLE_CLOSE || r == NGTCP2_ERR_HANDSHAKE_TIMEOUT) {
    if (connecting) {
      nhb__worker_record_error_text(w, UV_ETIMEDOUT, "HTTP/3: no answer to the QUIC handshake (timed out)");
      nhb__conn_fail(c, UV_ETIMEDOUT, NHB_CTR_POOL_CONNECTION_FAILURE);
      return;
    }
    if (c->nactive > c->nrefused) {
      snprintf(text, sizeof(text), "HTTP/3: no packet from the server for %g s (QUIC idle time-out)",
               (double)H3_IDLE_TIMEOUT_NS / 1e9);
      nhb__worker_record_error_text(w, UV_ETIMEDOUT, text);
      nhb__conn_fail(c, UV_ETIMEDOUT, NHB_CTR_STREAM_RESETS);
      return;
    }
    /* Idle with nothing in flight: closed quietly, like a server's idle close. */
    h->idle_closed = 1;
    c->draining = 1;
    nhb__conn_update(c);
    return;
  }
  ngtcp2_connection_close_error ccerr;
  ngtcp2_connection_close_error_default(&ccerr);
  if (r == NGTCP2_ERR_CRYPTO) {
    h3_handshake_error(c, text, sizeof(text));
    ngtcp2_connection_close_error_set_transport_error_tls_alert(&ccerr, ngtcp2_conn_get_tls_alert(h->qc), NULL, 0);
    w->stats.counters[NHB_CTR_SSL_CONNECTION_ERROR]++;
    h3_send_close(c, &ccerr);
    nhb__worker_record_error_text(w, NHB_ETLS, text);
    nhb__conn_fail(c, NHB_ETLS, connecting ? NHB_CTR_POOL_CONNECTION_FAILURE : NHB_CTR_STREAM_RESETS);
    return;
  }
  if (h->lib_error != 0) {
    snprintf(text, sizeof(text), "HTTP/3: %s", nghttp3_strerror(h->lib_error));
    ngtcp2_connection_close_error_set_application_error(&ccerr, nghttp3_err_infer_quic_app_error_code(h->lib_error),
                                                        NULL, 0);
  } else {
    snprintf(text, sizeof(text), "HTTP/3: QUIC: %s", ngtcp2_strerror(r));
    ngtcp2_connection_close_error_set_transport_error_liberr(&ccerr, r, NULL, 0);
  }
  h3_send_close(c, &ccerr);
  if (connecting) w->stats.counters[NHB_CTR_SSL_CONNECTION_ERROR]++;
  w->stats.counters[NHB_CTR_UPSTREAM_CX_PROTOCOL_ERROR]++;
  nhb__worker_record_error_text(w, NHB_EPROTO, text);
  nhb__conn_fail(c, NHB_EPROTO, connecting ? NHB_CTR_POOL_CONNECTION_FAILURE : NHB_CTR_STREAM_RESETS);
}

/* After a library call: the handshake may be complete, the server may have
 * sent GOAWAY, requests may wait for a stream. */
static void h3_after(nhb__conn* c) {
  nhb__h3* h = c->proto;
  nhb__worker* w = c->worker;
  if (c->state == NHB__CX_CONNECTING && h->handshake_done) {
    if (h->hc == NULL) {
      nhb__worker_record_error_text(w, NHB_EPROTO, "HTTP/3: the server's handshake set up no HTTP/3");
      nhb__conn_fail(c, NHB_EPROTO, NHB_CTR_POOL_CONNECTION_FAILURE);
      return;
    }
    w->stats.counters[NHB_CTR_SSL_HANDSHAKE]++;
    nhb_hist_record(w->stats.hists[NHB_HIST_TLS_HANDSHAKE], nhb__now_ns() - h->start_ns);
    /* The requests that rode along are marked by h3_send while the pool
     * hands them over (newest first) and submitted here oldest first, so
     * that requests a GOAWAY sent back get the lowest stream ids of the new
     * connection: the ones a server that goes away again will process. */
    h->defer = 1;
    nhb__conn_ready(c);
    h->defer = 0;
    if (c->state != NHB__CX_READY) return;
  }
  if (c->state != NHB__CX_READY) return;
  if (NHB__UNLIKELY(h->goaway) && !c->draining) {
    /* No new requests here; the ones the server will not process go out
     * again on the next connection. */
    c->peer_gone = 1;
    c->draining = 1;
    for (nhb__slot* s = c->slots; s != NULL;) {
      nhb__slot* next = s->next;
      if (!s->refused && (s->stream_id == 0 || SLOT_SID(s) >= h->goaway_id)) {
        if (s->stream_id != 0) {
          nghttp3_conn_set_stream_user_data(h->hc, SLOT_SID(s), NULL);
          ngtcp2_conn_shutdown_stream(h->qc, SLOT_SID(s), NGHTTP3_H3_REQUEST_CANCELLED);
        }
        nhb__conn_slot_refused(c, s);
        if (c->state != NHB__CX_READY) return;
      }
      s = next;
    }
    h->waiting = 0;
    nhb__conn_update(c);
    if (c->state != NHB__CX_READY) return;
  }
  if (h->waiting) h3_open_waiting(c);
}

/* One QUIC packet of the connection to the origin. */
static int h3_read_packet(nhb__conn* c, const char* data, size_t len) {
  nhb__h3* h = c->proto;
  if (h->qc == NULL) return 0;
  ngtcp2_path path;
  path.local.addr = (ngtcp2_sockaddr*)&h->local;
  path.local.addrlen = h->local_len;
  path.remote.addr = (ngtcp2_sockaddr*)(uintptr_t)c->worker->run->endpoints[c->endpoint].bytes;
  path.remote.addrlen = c->worker->run->endpoints[c->endpoint].len;
  path.user_data = NULL;
  ngtcp2_pkt_info pi;
  memset(&pi, 0, sizeof(pi));
  h->in_lib = 1;
  h->rx_ns = nhb__now_ns();
  int r = ngtcp2_conn_read_pkt(h->qc, &path, &pi, (const uint8_t*)data, len, h->rx_ns);
  h->in_lib = 0;
  if (NHB__UNLIKELY(h->close_fd >= 0)) h3_closed_inside(c);
  if (c->state != NHB__CX_READY && c->state != NHB__CX_CONNECTING) return 0;
  if (r != 0) {
    h3_conn_error(c, r);
    return 0;
  }
  h3_after(c);
  if (c->state == NHB__CX_READY || c->state == NHB__CX_CONNECTING) h3_want_write(c);
  return 0;
}

static int quic_on_read(nhb__conn* c, const char* data, size_t len) {
  nhb__h3* h = c->proto;
  if (NHB__UNLIKELY(h->tun != NULL)) return nhb__udp_tunnel_read(c, h->tun, data, len);
  return h3_read_packet(c, data, len);
}

void nhb__h3_tunnel_packet(nhb__conn* c, const uint8_t* data, size_t len) {
  (void)h3_read_packet(c, (const char*)data, len);
}

static int quic_write(nhb__conn* c, const char* data, size_t len) { return nhb__transport_udp.write(c, data, len); }

static void quic_close(nhb__conn* c) { h3_teardown(c); }

static const nhb__transport_vtable nhb__transport_quic = {
    "quic", quic_on_connected, quic_on_read, quic_write, quic_close, NULL, quic_start,
};

/* ---- output -------------------------------------------------------------------- */

static void h3_want_write(nhb__conn* c) {
  nhb__h3* h = c->proto;
  /* A zero time-out runs in the next iteration's timer phase: whatever this
   * iteration produces goes out together. */
  if (h->timer_init) uv_timer_start(&h->timer, h3_on_timer, 0, 0);
}

/* Writes packets until ngtcp2 has nothing more to send now (or pacing or the
 * congestion window holds it back), then arms the timer for ngtcp2's next
 * expiry. Returns 0, or < 0 after the connection failed. */
/* A request's last byte written: the packet carrying its FIN was built
 * (`ts`, the time this write began). Neither library hands back the stream's
 * slot here, so it is looked up among the connection's, newest first: the
 * request whose FIN goes out is almost always the one just opened. */
static void h3_written(nhb__conn* c, int64_t sid, uint64_t ts) {
  for (nhb__slot* s = c->slots; s != NULL; s = s->next) {
    if (s->stream_id != 0 && SLOT_SID(s) == sid) {
      if (s->written_ns == 0) s->written_ns = ts;
      return;
    }
  }
}

static int h3_write(nhb__conn* c) {
  nhb__h3* h = c->proto;
  ngtcp2_path_storage ps;
  ngtcp2_path_storage_zero(&ps);
  uint64_t ts = nhb__now_ns();
  size_t pkt_max = ngtcp2_conn_get_max_tx_udp_payload_size(h->qc);
  if (pkt_max > sizeof(h->pkt)) pkt_max = sizeof(h->pkt);
  size_t quantum = ngtcp2_conn_get_send_quantum(h->qc) / pkt_max;
  if (quantum == 0) quantum = 1;
  for (size_t npkts = 0;;) {
    int64_t sid = -1;
    int fin = 0;
    nghttp3_vec vec[H3_VECS];
    nghttp3_ssize nvec = 0;
    if (h->hc != NULL && ngtcp2_conn_get_max_data_left(h->qc) > 0) {
      nvec = nghttp3_conn_writev_stream(h->hc, &sid, &fin, vec, H3_VECS);
      if (nvec < 0) {
        h->lib_error = (int)nvec;
        return NGTCP2_ERR_CALLBACK_FAILURE;
      }
    }
    ngtcp2_ssize ndata = -1;
    uint32_t flags = NGTCP2_WRITE_STREAM_FLAG_MORE | (fin ? NGTCP2_WRITE_STREAM_FLAG_FIN : 0);
    ngtcp2_pkt_info pi;
    ngtcp2_ssize n = ngtcp2_conn_writev_stream(h->qc, &ps.path, &pi, h->pkt, pkt_max, &ndata, flags, sid,
                                               (const ngtcp2_vec*)vec, (size_t)nvec, ts);
    if (n < 0) {
      switch (n) {
        case NGTCP2_ERR_STREAM_DATA_BLOCKED:
          nghttp3_conn_block_stream(h->hc, sid);
          continue;
        case NGTCP2_ERR_STREAM_SHUT_WR:
          nghttp3_conn_shutdown_stream_write(h->hc, sid);
          continue;
        case NGTCP2_ERR_WRITE_MORE: {
          int r = nghttp3_conn_add_write_offset(h->hc, sid, (size_t)ndata);
          if (r != 0) {
            h->lib_error = r;
            return NGTCP2_ERR_CALLBACK_FAILURE;
          }
          if (fin && (size_t)ndata == nghttp3_vec_len(vec, (size_t)nvec)) h3_written(c, sid, ts);
          continue;
        }
        default:
          return (int)n;
      }
    }
    if (ndata >= 0) {
      int r = nghttp3_conn_add_write_offset(h->hc, sid, (size_t)ndata);
      if (r != 0) {
        h->lib_error = r;
        return NGTCP2_ERR_CALLBACK_FAILURE;
      }
      if (fin && (size_t)ndata == nghttp3_vec_len(vec, (size_t)nvec)) h3_written(c, sid, ts);
    }
    if (n == 0) break;
    /* Through a CONNECT-UDP proxy, each packet is an HTTP Datagram of the
     * tunnel's outer connection (tunnel_udp.c). */
    int r = NHB__UNLIKELY(h->tun != NULL) ? nhb__udp_tunnel_send(c, h->tun, h->pkt, (size_t)n)
                                          : nhb__transport_udp.write(c, (const char*)h->pkt, (size_t)n);
    /* A full socket buffer drops the packet; QUIC sends it again. Any other
     * error (ECONNREFUSED: the server's port answered an earlier datagram
     * with an ICMP error, which the kernel reports once, to whichever call
     * comes first) ends the connection as a failed read would. */
    if (r < 0 && r != UV_EAGAIN && r != UV_ENOBUFS) h->sock_error = r;
    if (r < 0 || ++npkts >= quantum) {
      ngtcp2_conn_update_pkt_tx_time(h->qc, ts);
      break;
    }
  }
  uint64_t expiry = ngtcp2_conn_get_expiry(h->qc);
  uint64_t now = nhb__now_ns();
  uint64_t ms = expiry <= now ? 0 : (expiry - now + 999999) / 1000000;
  uv_timer_start(&h->timer, h3_on_timer, ms, 0);
  return 0;
}

static void h3_on_timer(uv_timer_t* timer) {
  nhb__conn* c = (nhb__conn*)timer->data;
  nhb__h3* h = c->proto;
  if ((c->state != NHB__CX_READY && c->state != NHB__CX_CONNECTING) || h->qc == NULL) return;
  uint64_t now = nhb__now_ns();
  h->in_lib = 1;
  int r = 0;
  if (ngtcp2_conn_get_expiry(h->qc) <= now) r = ngtcp2_conn_handle_expiry(h->qc, now);
  if (r == 0) r = h3_write(c);
  h->in_lib = 0;
  if (NHB__UNLIKELY(h->close_fd >= 0)) h3_closed_inside(c);
  if (c->state != NHB__CX_READY && c->state != NHB__CX_CONNECTING) return;
  if (NHB__UNLIKELY(h->sock_error != 0)) {
    int e = h->sock_error;
    h->sock_error = 0;
    nhb__conn_read(c, e, NULL);
    return;
  }
  if (r != 0) {
    h3_conn_error(c, r);
    return;
  }
  /* Writing may have freed a stream credit or a waiting request. */
  if (h->waiting && c->state == NHB__CX_READY) {
    h3_open_waiting(c);
    if (c->state == NHB__CX_READY && !uv_is_active((uv_handle_t*)&h->timer)) h3_want_write(c);
  }
}

/* ---- requests -------------------------------------------------------------------- */

/* Opens the stream of a request and submits it. 0 when done or when the
 * server allows no more streams yet (the request keeps waiting); < 0 on a
 * failure of the connection. */
static int h3_start_stream(nhb__conn* c, nhb__slot* s) {
  nhb__h3* h = c->proto;
  int64_t sid;
  int r = ngtcp2_conn_open_bidi_stream(h->qc, &sid, NULL);
  if (r == NGTCP2_ERR_STREAM_ID_BLOCKED) return 1;
  if (r != 0) {
    h3_record(c, NHB_EPROTO, "HTTP/3: cannot open a stream: %s", ngtcp2_strerror(r));
    return NHB_EPROTO;
  }
  if (sid >= INT32_MAX) {
    /* 2^29 requests on one connection: the rest go out on a new one. */
    ngtcp2_conn_shutdown_stream(h->qc, sid, NGHTTP3_H3_REQUEST_CANCELLED);
    c->draining = 1;
    nhb__conn_slot_refused(c, s);
    return 0;
  }
  s->stream_id = (int32_t)(sid + 1);
  const nhb__h3_run* hr = run_of(c);
  uint32_t k = s->rq.spec;
  nghttp3_data_reader dr = {h3_read_body};
  const nghttp3_nv* nva = hr->nva + hr->nvoff[k];
  size_t nvlen = hr->nvlen[k];
  /* A sampled request (h3_send_traced) carries its trace fields; span_id
   * stays 0 in a run without tracing. */
  if (NHB__UNLIKELY(s->span_id != 0)) nva = (const nghttp3_nv*)nhb__trace_h3(c->worker, s, nva, &nvlen);
  r = nghttp3_conn_submit_request(h->hc, sid, nva, nvlen, s->body_left > 0 ? &dr : NULL, s);
  if (r != 0) {
    h3_record(c, NHB_EPROTO, "HTTP/3: cannot send a request: %s", nghttp3_strerror(r));
    return NHB_EPROTO;
  }
  return 0;
}

/* Submits the requests that wait for a stream, oldest first (the pool puts
 * the newest at the head of the connection's list). */
static void h3_open_waiting(nhb__conn* c) {
  nhb__h3* h = c->proto;
  h->waiting = 0;
  int opened = 0;
  nhb__slot* s = c->slots;
  while (s != NULL && s->next != NULL) s = s->next;
  while (s != NULL && c->state == NHB__CX_READY) {
    nhb__slot* prev = s->prev;
    if (s->stream_id == 0 && !s->refused && s->sent) {
      int r = h3_start_stream(c, s);
      if (r > 0) {
        h->waiting = 1;
        break;
      }
      if (r < 0) {
        nhb__conn_fail(c, NHB_EPROTO, NHB_CTR_STREAM_RESETS);
        return;
      }
      opened = 1;
    }
    s = prev;
  }
  if (opened && c->state == NHB__CX_READY) h3_want_write(c);
}

/* ---- the session vtable ---------------------------------------------------------- */

static int h3_open(nhb__conn* c) { return c->proto != NULL && h3_of(c)->hc != NULL ? 0 : NHB_EPROTO; }

static int h3_send(nhb__conn* c, nhb__slot* s) {
  nhb__h3* h = c->proto;
  const nhb__spec* sp = &c->worker->run->specs[s->rq.spec];
  s->header_bytes = 0;
  s->body_bytes = 0;
  s->status = 0;
  s->stream_id = 0;
  s->hdr_list = 0;
  s->interims = 0;
  s->body_left = sp->body_size;
  nhb__olat_reset(&s->olat);
  /* The usual case: a stream at once, without looking at the others. */
  if (!h->in_lib && !h->defer && !h->waiting) {
    int r = h3_start_stream(c, s);
    if (r > 0) h->waiting = 1;
    if (r == 0) h3_want_write(c);
    return r < 0 ? r : 0;
  }
  /* Inside the libraries (a response completed and the pool sends the next
   * request at once) the stream is opened once the call returned; behind
   * requests that wait for stream credit, it waits its turn. */
  h->waiting = 1;
  if (!h->in_lib && !h->defer) h3_open_waiting(c);
  return 0;
}

/* With tracing on (trace.c): the decision is taken when the request is
 * sent, and its stream, opened now or once it no longer waits, carries the
 * trace fields (h3_start_stream). */
static int h3_send_traced(nhb__conn* c, nhb__slot* s) {
  (void)nhb__trace_sample(c->worker, s);
  return h3_send(c, s);
}

/* The datagram socket failed (ECONNREFUSED: the server's port is closed).
 * The pool fails the requests in flight. */
static int h3_on_eof(nhb__conn* c, int err) {
  NHB__UNUSED(err);
  c->draining = 1;
  return 0;
}

static void h3_cancel(nhb__conn* c, nhb__slot* s) {
  nhb__h3* h = c->proto;
  if (s->stream_id != 0 && h->qc != NULL) {
    int64_t sid = SLOT_SID(s);
    if (h->hc != NULL) nghttp3_conn_set_stream_user_data(h->hc, sid, NULL);
    ngtcp2_conn_shutdown_stream(h->qc, sid, NGHTTP3_H3_REQUEST_CANCELLED);
    h3_want_write(c);
  }
  s->stream_id = 0;
}

static void h3_close(nhb__conn* c) { h3_teardown(c); }

/* The QUIC transport hands datagrams to ngtcp2, never plaintext to the
 * session: bytes here would be a wiring mistake. */
static int h3_on_data(nhb__conn* c, const char* data, size_t len) {
  NHB__UNUSED(c);
  NHB__UNUSED(data);
  NHB__UNUSED(len);
  return NHB_EPROTO;
}

static const nhb__session_vtable nhb__session_h3 = {
    "h3", h3_open, h3_send, h3_on_data, h3_on_eof, NULL, h3_cancel, h3_close,
};

static const nhb__session_vtable nhb__session_h3_traced = {
    "h3", h3_open, h3_send_traced, h3_on_data, h3_on_eof, NULL, h3_cancel, h3_close,
};

/* ---- per worker, per connection entry --------------------------------------------- */

/* A connection that is done (its --max-requests-per-connection answered, the
 * run over) tells the server, with NO_ERROR, as closing a TCP connection
 * would, rather than leave it there until the server's idle time-out: a
 * server that finds connections by address would hand a later connection
 * from the same port (the kernel gives it out again) to the stale one. Called
 * while the socket is still open; closes that already told the server (an
 * error's CONNECTION_CLOSE), that it told us of, or an idle time-out's, say
 * nothing more. Most closes come from inside ngtcp2_conn_read_pkt (the
 * response that was the connection's last), where ngtcp2 may not be called:
 * the packet is then built once that call returns (h3_closed_inside) and
 * sent on a copy of the socket the pool is closing now. Through a CONNECT-UDP
 * proxy nothing is owed: the packets ride the connection to the proxy, which
 * the pool is closing, and with it the proxy closes its own socket to the
 * origin. */
static void h3_conn_closing(nhb__conn* c) {
  nhb__h3* h = c->proto;
  if (c->state != NHB__CX_READY || h == NULL || h->qc == NULL || h->idle_closed || h->close_fd >= 0) return;
  if (NHB__LIKELY(!h->in_lib)) {
    ngtcp2_connection_close_error ccerr = h3_done();
    h3_send_close(c, &ccerr);
    return;
  }
  uv_os_fd_t fd;
  if (h->tun == NULL && uv_fileno((const uv_handle_t*)&c->udp, &fd) == 0)
    h->close_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
}

static void h3_worker_close(nhb__worker* w) {
  if (w->run->config.protocol != NHB_PROTO_HTTP3) return;
  for (uint32_t i = 0; i < w->nconns; i++) {
    nhb__conn* c = &w->conns[i];
    nhb__h3* h = c->proto;
    if (h == NULL) continue;
    h3_conn_closing(c);
    if (h->timer_init) {
      h->timer_init = 0;
      uv_close((uv_handle_t*)&h->timer, NULL);
    }
    if (h->tun != NULL) nhb__udp_tunnel_close(c, h->tun);
  }
}

static void h3_conn_free(nhb__conn* c) {
  if (c->proto == NULL) return;
  h3_teardown(c);
  nhb__udp_tunnel_free(h3_of(c)->tun);
  free(c->proto);
  c->proto = NULL;
}

/* ---- per run -------------------------------------------------------------------- */

static nghttp3_nv make_nv(const char* name, size_t name_len, const char* value, size_t value_len) {
  nghttp3_nv nv;
  nv.name = (uint8_t*)(uintptr_t)name;
  nv.namelen = name_len;
  nv.value = (uint8_t*)(uintptr_t)value;
  nv.valuelen = value_len;
  /* The strings live as long as the run: nghttp3 need not copy them. */
  nv.flags = NGHTTP3_NV_FLAG_NO_COPY_NAME | NGHTTP3_NV_FLAG_NO_COPY_VALUE;
  return nv;
}

static int h3_error(char* err, size_t err_len, const char* fmt, const char* detail) {
  if (err) snprintf(err, err_len, fmt, detail);
  return NHB_EINVAL;
}

static int h3_run_init(nhb_run* run, char* err, size_t err_len) {
  const nhb_client_config* cfg = &run->config;
  if (cfg->protocol != NHB_PROTO_HTTP3) return 0;
  const nhb_tls_config* tc = &cfg->tls;
  if (!tc->enabled) return h3_error(err, err_len, "protocol: HTTP/3 %s", "runs over QUIC, whose handshake is TLS");
  if (cfg->templated) return h3_error(err, err_len, "templating: %s", "not supported over HTTP/3");
  size_t total = 0;
  int ok = cfg->h2_scheme != NULL;
  for (uint32_t i = 0; i < run->nspecs && ok; i++) {
    const nhb_request_spec* sp = &cfg->specs[i];
    ok = sp->h2_method != NULL && sp->h2_authority != NULL && sp->h2_path != NULL;
    total += (size_t)sp->h2_nheaders + 4;
  }
  if (!ok) return h3_error(err, err_len, "HTTP/3 needs h2_method, h2_scheme, h2_authority and h2_path%s", "");
  nhb__h3_run* hr = calloc(1, sizeof(*hr));
  if (hr == NULL) return NHB_ENOMEM;
  run->proto = hr;
  hr->nva = calloc(total, sizeof(nghttp3_nv));
  hr->nvlen = calloc(run->nspecs, sizeof(size_t));
  hr->nvoff = calloc(run->nspecs, sizeof(size_t));
  if (hr->nva == NULL || hr->nvlen == NULL || hr->nvoff == NULL) return NHB_ENOMEM;
  size_t n = 0;
  for (uint32_t i = 0; i < run->nspecs; i++) {
    const nhb_request_spec* sp = &cfg->specs[i];
    hr->nvoff[i] = n;
    hr->nva[n++] = make_nv(":method", 7, sp->h2_method, strlen(sp->h2_method));
    hr->nva[n++] = make_nv(":scheme", 7, cfg->h2_scheme, strlen(cfg->h2_scheme));
    hr->nva[n++] = make_nv(":authority", 10, sp->h2_authority, strlen(sp->h2_authority));
    hr->nva[n++] = make_nv(":path", 5, sp->h2_path, strlen(sp->h2_path));
    for (int k = 0; k < sp->h2_nheaders; k++) {
      const nhb_header* hd = &sp->h2_headers[k];
      hr->nva[n++] = make_nv(hd->name, hd->name_len, hd->value, hd->value_len);
    }
    hr->nvlen[i] = n - hr->nvoff[i];
  }
  /* The certificate check: the CA file or directory given, else the system
   * store; none with --insecure. Shared read-only by every worker. */
  if (gnutls_certificate_allocate_credentials(&hr->cred) != 0) {
    hr->cred = NULL;
    return NHB_ENOMEM;
  }
  if (!tc->insecure) {
    int r;
    if (tc->cacert != NULL && tc->cacert[0] != '\0') {
      struct stat st;
      int is_dir = stat(tc->cacert, &st) == 0 && S_ISDIR(st.st_mode);
      r = is_dir ? gnutls_certificate_set_x509_trust_dir(hr->cred, tc->cacert, GNUTLS_X509_FMT_PEM)
                 : gnutls_certificate_set_x509_trust_file(hr->cred, tc->cacert, GNUTLS_X509_FMT_PEM);
      if (r <= 0) return h3_error(err, err_len, "cacert: GnuTLS cannot load CA certificates from '%s'", tc->cacert);
    } else {
      r = gnutls_certificate_set_x509_system_trust(hr->cred);
      if (r < 0) return h3_error(err, err_len, "tls: GnuTLS cannot load the system's CA certificates%s", "");
    }
  }
  /* The client certificate, sent when the server asks for one. GnuTLS never
   * prompts: an encrypted key without its passphrase fails to load. */
  if (tc->cert_pem != NULL && tc->cert_pem[0] != '\0') {
    const char* pass = tc->key_passphrase != NULL && tc->key_passphrase[0] ? tc->key_passphrase : NULL;
    const char* key = tc->key_pem != NULL ? tc->key_pem : "";
    gnutls_datum_t cert_d = {(unsigned char*)tc->cert_pem, (unsigned)strlen(tc->cert_pem)};
    gnutls_datum_t key_d = {(unsigned char*)key, (unsigned)strlen(key)};
    if (gnutls_certificate_set_x509_key_mem2(hr->cred, &cert_d, &key_d, GNUTLS_X509_FMT_PEM, pass, 0) < 0)
      return h3_error(err, err_len, "cert: GnuTLS cannot use the client certificate and key%s", "");
  }
  return 0;
}

static void h3_run_free(nhb_run* run) {
  nhb__h3_run* hr = (nhb__h3_run*)run->proto;
  if (hr == NULL) return;
  if (hr->cred != NULL) gnutls_certificate_free_credentials(hr->cred);
  free(hr->nva);
  free(hr->nvlen);
  free(hr->nvoff);
  free(hr);
  run->proto = NULL;
}

/* The protocol (nhb__protocol in client.h; NHB_PROTOCOL_MAP in nhb.h). */
const nhb__protocol nhb__protocol_h3 = {
    .name = "HTTP/3",
    .session = &nhb__session_h3,
    .traced_session = &nhb__session_h3_traced,
    .transport = &nhb__transport_quic,
    .multiplexes = 1,
    .reuse_lru = 1,
    .cx_counter = NHB_CTR_UPSTREAM_CX_HTTP3_TOTAL,
    .refused = "H3_REQUEST_REJECTED",
    .run_init = h3_run_init,
    .run_free = h3_run_free,
    .worker_close = h3_worker_close,
    .conn_closing = h3_conn_closing,
    .conn_free = h3_conn_free,
};
