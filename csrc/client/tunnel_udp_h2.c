/* tunnel_udp_h2.c: CONNECT-UDP on an HTTP/2 stream (RFC 9298 over RFC 8441).
 *
 * With config.udp_tunnel_authority and proxy_protocol 2, an HTTP/3 run's
 * connections reach the proxy over TCP (TLS with ALPN h2 to an https://
 * proxy, proxy_tls; h2c with prior knowledge to an http:// one) instead of
 * QUIC. Once the proxy's SETTINGS offer SETTINGS_ENABLE_CONNECT_PROTOCOL = 1
 * (else the tunnel fails: protocol_error) one extended CONNECT goes out:
 *
 *   :method CONNECT, :protocol connect-udp, :scheme https,
 *   :authority <proxy>, :path /.well-known/masque/udp/<host>/<port>/,
 *   capsule-protocol: ?1
 *
 * On a 2xx the inner QUIC connection (session_h3.c's, to the origin) starts,
 * as over HTTP/3 (tunnel_udp.c). Its UDP payloads travel as DATAGRAM
 * capsules (RFC 9297 section 3.5: type 0x00, length, context id 0, payload)
 * in the stream's DATA, and the proxy's capsules come back the same way.
 * Capsules of other types are skipped (section 3.2); DATAGRAM capsules with
 * another context id, no payload or a payload over TUN_DGRAM_MAX are dropped
 * and counted (tunnel.datagrams_dropped); a stream that ends inside a capsule
 * is malformed (section 3.3).
 *
 * The proxy leg is carrier.c's in kind (memory BIOs for TLS, an nghttp2
 * session, a socket output buffer the session writes into), on a TCP handle
 * of its own: the connection's handle is HTTP/3's UDP socket. The TLS
 * context is carrier.c's (nhb__proxy_ssl_ctx).
 *
 * Re-entrancy: nghttp2's callbacks only record (the answer, a failure, the
 * capsules' payloads in the reader's queue) and pause the session once a
 * DATA chunk queued a datagram; the connection fails, the tunnel comes up
 * and the datagrams go to the inner connection once nghttp2_session_mem_recv
 * returned, so that nothing frees the session under nghttp2's feet.
 *
 * Allocation: per connection entry the leg (its output buffers and capsule
 * queue), once; per connection the TCP handle, the SSL object and the
 * nghttp2 session (its header block is copied from the run's). Nothing per
 * request: an inner packet is framed straight into the DATA staging buffer.
 */
#include <nghttp2/nghttp2.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"
#include "common/tls_common.h"

/* The socket output buffer and the DATA staging buffer (capsules waiting
 * for nghttp2): as carrier.c's. */
#define H2U_OUT 65536
#define H2U_DQ 65536
#define H2U_PLAIN_CHUNK (3 * 16384)
/* The proxy's HTTP/2 windows: opened wide, as carrier.c's. */
#define H2U_CONN_WINDOW (1 << 30)
#define H2U_STREAM_WINDOW (1 << 24)

/* ---- the capsule reader ------------------------------------------------------ */

static int cap_vint(nhb__capsule_rx* k, const uint8_t** p, const uint8_t* end, uint64_t* out) {
  while (*p < end) {
    k->vbuf[k->vn++] = *(*p)++;
    size_t need = (size_t)1 << (k->vbuf[0] >> 6);
    if (k->vn == need) {
      uint64_t x = k->vbuf[0] & 0x3f;
      for (size_t i = 1; i < need; i++) x = (x << 8) | k->vbuf[i];
      k->vn = 0;
      *out = x;
      return 1;
    }
  }
  return 0;
}

void nhb__capsule_rx_init(nhb__capsule_rx* k) {
  k->vn = 0;
  k->stage = 0;
  k->type = k->left = 0;
  k->keep = 0;
  k->start = k->qlen = 0;
  k->nq = k->popped = 0;
}

int nhb__capsule_rx_partial(const nhb__capsule_rx* k) { return k->stage != 0 || k->vn != 0; }

/* A kept DATAGRAM capsule is complete at q[start, qlen): its context id,
 * then the payload. */
static void cap_done(nhb__capsule_rx* k, uint64_t* dropped) {
  const uint8_t* p = k->q + k->start;
  const uint8_t* end = k->q + k->qlen;
  uint8_t first = p < end ? p[0] : 0;
  size_t clen = (size_t)1 << (first >> 6);
  if (p == end || first != 0x00 || (size_t)(end - p) <= clen) {
    /* No context id, another one than 0 (RFC 9298 section 4), or nothing
     * after it. */
    (*dropped)++;
    k->qlen = k->start;
    return;
  }
  k->qoff[k->nq] = (uint16_t)(k->start + 1);
  k->qn[k->nq] = (uint16_t)(k->qlen - k->start - 1);
  k->nq++;
  k->start = k->qlen;
}

void nhb__capsule_rx_feed(nhb__capsule_rx* k, const uint8_t* p, size_t len, uint64_t* dropped) {
  const uint8_t* end = p + len;
  while (p < end) {
    if (k->stage == 0) {
      if (!cap_vint(k, &p, end, &k->type)) return;
      k->stage = 1;
      continue;
    }
    if (k->stage == 1) {
      if (!cap_vint(k, &p, end, &k->left)) return;
      k->stage = 2;
      k->keep = 0;
      if (k->type == 0x00) {
        /* A DATAGRAM: kept when it fits a packet and the queue. */
        if (k->left <= NHB__CAPSULE_VALUE_MAX && k->nq < NHB__CAPSULE_QN &&
            k->qlen + k->left <= NHB__CAPSULE_QBYTES) {
          k->keep = 1;
          k->start = k->qlen;
        } else {
          (*dropped)++;
        }
      }
      if (k->left == 0) {
        if (k->keep) cap_done(k, dropped);
        k->stage = 0;
        continue;
      }
    }
    size_t n = (uint64_t)(end - p) < k->left ? (size_t)(end - p) : (size_t)k->left;
    if (k->keep) {
      memcpy(k->q + k->qlen, p, n);
      k->qlen += (uint32_t)n;
    }
    p += n;
    k->left -= n;
    if (k->left == 0) {
      if (k->keep) cap_done(k, dropped);
      k->keep = 0;
      k->stage = 0;
    }
  }
}

int nhb__capsule_rx_next(nhb__capsule_rx* k, const uint8_t** payload, size_t* len) {
  if (k->popped == k->nq) {
    /* All taken: the capsule being kept, if any, moves to the front. */
    if (k->nq > 0 && k->start < k->qlen) memmove(k->q, k->q + k->start, k->qlen - k->start);
    if (k->nq > 0) {
      k->qlen -= k->start;
      k->start = 0;
      k->nq = k->popped = 0;
    }
    return 0;
  }
  *payload = k->q + k->qoff[k->popped];
  *len = k->qn[k->popped];
  k->popped++;
  return 1;
}

uint32_t nhb__capsule_rx_queued(const nhb__capsule_rx* k) { return k->nq - k->popped; }

/* ---- the run ------------------------------------------------------------------ */

typedef struct h2u_run {
  void* ssl_ctx; /* SSL_CTX*, NULL for h2c */
  nghttp2_session_callbacks* cb;
  nghttp2_option* opt;
  uint32_t n;
  nghttp2_nv* nva; /* each target's block, end to end */
  size_t* nvoff;   /* n + 1 offsets */
} h2u_run;

/* The TCP handle, its connect and write requests: one per connection,
 * freed by its close callback (it may outlive the connection by a loop
 * iteration). */
typedef struct h2u_sock {
  uv_tcp_t tcp;
  uv_connect_t connect_req;
  uv_write_t write_req;
  nhb__udp_h2* h; /* NULL once the connection is torn down */
} h2u_sock;

struct nhb__udp_h2 {
  nhb__conn* conn;
  nhb__udp_tunnel* tun;
  const h2u_run* run;
  uint32_t gen; /* the connection's number: a callback that failed it may start the next */
  h2u_sock* sock;
  uv_timer_t timer; /* flushes what the inner connection wrote this iteration */
  int timer_init;
  SSL* ssl;
  BIO* rbio;
  BIO* wbio;
  int tls_up;
  nghttp2_session* h2;
  int32_t sid; /* -1 until the CONNECT went out */
  int settings;
  int status;
  uint32_t interims;
  uint32_t hdr_bytes;
  int up;
  int stream_closed;
  int answer_end; /* the 2xx answer ended the stream */
  int in_recv;
  int deferred;
  uint64_t produced;
  nhb_counter_t fail_ctr; /* a failure a callback left for after mem_recv; 0: none */
  char fail_text[200];
  uint32_t goaway_sent;
  uint8_t* out;
  size_t out_len;
  int sock_pending;
  uint8_t* dq;
  size_t dq_off, dq_len;
  nhb__capsule_rx cap;
};

static int live(const nhb__conn* c) { return c->state == NHB__CX_READY || c->state == NHB__CX_CONNECTING; }

static void h2u_record(nhb__udp_h2* h, nhb_counter_t ctr, const char* fmt, const char* a) {
  if (h->fail_ctr != 0) return;
  h->fail_ctr = ctr;
  snprintf(h->fail_text, sizeof(h->fail_text), fmt, a);
}

/* The failure a callback recorded, or `ctr` and the text. */
static void h2u_fail(nhb__udp_h2* h, nhb_counter_t ctr, const char* text) {
  nhb__conn* c = h->conn;
  if (!live(c)) return;
  if (h->fail_ctr != 0) {
    ctr = h->fail_ctr;
    text = h->fail_text;
  }
  nhb__udp_tunnel_fail(c, ctr, text);
}

/* ---- output ------------------------------------------------------------------- */

static int h2u_pump(nhb__udp_h2* h);

static void h2u_write_done(uv_write_t* req, int status) {
  h2u_sock* s = (h2u_sock*)req->data;
  nhb__udp_h2* h = s->h;
  if (h == NULL || status == UV_ECANCELED) return;
  h->sock_pending = 0;
  if (!live(h->conn)) return;
  if (status == 0) status = h2u_pump(h);
  if (status < 0 && live(h->conn)) {
    char text[160];
    snprintf(text, sizeof(text), "writing to the proxy failed: %s", nhb_strerror(status));
    h2u_fail(h, h->up ? NHB_CTR_TUNNEL_CLOSED : NHB_CTR_TUNNEL_CONNECT_FAIL, text);
  }
}

static int h2u_sock_write(nhb__udp_h2* h) {
  size_t len = h->out_len;
  h->out_len = 0;
  uv_stream_t* stream = (uv_stream_t*)&h->sock->tcp;
  uv_buf_t buf = uv_buf_init((char*)h->out, (unsigned)len);
  h->conn->worker->stats.counters[NHB_CTR_UPSTREAM_CX_TX_BYTES_TOTAL] += len;
  int n = uv_try_write(stream, &buf, 1);
  if (n == (int)len) return 0;
  if (n < 0 && n != UV_EAGAIN) return n;
  if (n < 0) n = 0;
  buf = uv_buf_init((char*)h->out + n, (unsigned)(len - (size_t)n));
  h->sock->write_req.data = h->sock;
  int r = uv_write(&h->sock->write_req, stream, &buf, 1, h2u_write_done);
  if (r == 0) h->sock_pending = 1;
  return r;
}

static ssize_t h2u_send_cb(nghttp2_session* session, const uint8_t* data, size_t len, int flags, void* user) {
  NHB__UNUSED(session);
  NHB__UNUSED(flags);
  nhb__udp_h2* h = user;
  if (h->ssl != NULL) {
    if (BIO_ctrl_pending(h->wbio) >= H2U_OUT) return NGHTTP2_ERR_WOULDBLOCK;
    size_t n = len < H2U_PLAIN_CHUNK ? len : H2U_PLAIN_CHUNK;
    int m = SSL_write(h->ssl, data, (int)n);
    if (m <= 0) return NGHTTP2_ERR_CALLBACK_FAILURE;
    h->produced += (uint64_t)m;
    return (ssize_t)m;
  }
  if (h->sock_pending) return NGHTTP2_ERR_WOULDBLOCK;
  size_t room = H2U_OUT - h->out_len;
  if (room == 0) return NGHTTP2_ERR_WOULDBLOCK;
  size_t n = len < room ? len : room;
  memcpy(h->out + h->out_len, data, n);
  h->out_len += n;
  h->produced += n;
  return (ssize_t)n;
}

static ssize_t h2u_data_read(nghttp2_session* session, int32_t stream_id, uint8_t* buf, size_t length,
                             uint32_t* flags, nghttp2_data_source* source, void* user) {
  NHB__UNUSED(session);
  NHB__UNUSED(stream_id);
  NHB__UNUSED(flags);
  NHB__UNUSED(source);
  nhb__udp_h2* h = user;
  if (h->dq_len == 0) {
    h->deferred = 1;
    return NGHTTP2_ERR_DEFERRED;
  }
  size_t n = length < h->dq_len ? length : h->dq_len;
  memcpy(buf, h->dq + h->dq_off, n);
  h->dq_off += n;
  h->dq_len -= n;
  if (h->dq_len == 0) h->dq_off = 0;
  return (ssize_t)n;
}

/* Moves bytes down the leg: nghttp2's into TLS or the output buffer, TLS's
 * into the buffer, the buffer to the socket; until all is out or the socket
 * is busy. */
static int h2u_pump(nhb__udp_h2* h) {
  while (h->sock != NULL && !h->sock_pending && live(h->conn)) {
    if (h->out_len > 0) {
      int r = h2u_sock_write(h);
      if (r < 0) return r;
      continue;
    }
    if (h->ssl != NULL) {
      int n = BIO_read(h->wbio, h->out, H2U_OUT);
      if (n > 0) {
        h->out_len = (size_t)n;
        continue;
      }
    }
    if (h->h2 != NULL && !h->in_recv && nghttp2_session_want_write(h->h2)) {
      uint64_t before = h->produced;
      if (nghttp2_session_send(h->h2) != 0) return NHB_EPROTO;
      if (h->produced == before) break;
      continue;
    }
    break;
  }
  return 0;
}

static void h2u_on_timer(uv_timer_t* timer) {
  nhb__udp_h2* h = timer->data;
  if (h->h2 == NULL || !live(h->conn)) return;
  int r = h2u_pump(h);
  if (r < 0) h2u_fail(h, NHB_CTR_TUNNEL_PROTOCOL_ERROR, "sending HTTP/2 to the proxy failed");
}

int nhb__udp_h2_send(nhb__udp_h2* h, const uint8_t* pkt, size_t len) {
  if (h->h2 == NULL || !h->up || h->stream_closed) return UV_EAGAIN;
  /* A DATAGRAM capsule: type 0, a two-byte length, context id 0. */
  size_t need = 4 + len;
  if (h->dq_off > 0 && h->dq_off + h->dq_len + need > H2U_DQ) {
    memmove(h->dq, h->dq + h->dq_off, h->dq_len);
    h->dq_off = 0;
  }
  if (len > NHB__CAPSULE_VALUE_MAX - 1 || h->dq_off + h->dq_len + need > H2U_DQ) {
    /* The proxy is slower than the inner connection: the packet is lost, as
     * on a full socket buffer (QUIC sends it again). */
    return UV_EAGAIN;
  }
  uint8_t* p = h->dq + h->dq_off + h->dq_len;
  size_t vlen = len + 1;
  p[0] = 0x00;
  p[1] = (uint8_t)(0x40 | (vlen >> 8));
  p[2] = (uint8_t)vlen;
  p[3] = 0x00;
  memcpy(p + 4, pkt, len);
  h->dq_len += need;
  if (h->deferred) {
    h->deferred = 0;
    nghttp2_session_resume_data(h->h2, h->sid);
  }
  /* What the inner connection writes in this loop iteration goes out
   * together. */
  if (!h->in_recv && h->timer_init && !uv_is_active((uv_handle_t*)&h->timer))
    uv_timer_start(&h->timer, h2u_on_timer, 0, 0);
  return 0;
}

/* ---- the proxy's HTTP/2 -------------------------------------------------------- */

static int h2u_on_begin_headers(nghttp2_session* session, const nghttp2_frame* frame, void* user) {
  NHB__UNUSED(session);
  nhb__udp_h2* h = user;
  if (frame->hd.stream_id == h->sid && !h->up && h->status / 100 != 2) h->status = 0;
  return 0;
}

static int h2u_on_header(nghttp2_session* session, const nghttp2_frame* frame, const uint8_t* name, size_t namelen,
                         const uint8_t* value, size_t valuelen, uint8_t flags, void* user) {
  NHB__UNUSED(session);
  NHB__UNUSED(flags);
  nhb__udp_h2* h = user;
  if (frame->hd.stream_id != h->sid || h->up || h->status / 100 == 2) return 0; /* trailers */
  h->hdr_bytes += (uint32_t)(namelen + valuelen + 32);
  if (h->hdr_bytes > NHB__RESP_HEADER_BYTES) {
    h2u_record(h, NHB_CTR_TUNNEL_PROTOCOL_ERROR, "the proxy's answer is malformed: %s", "headers over 98304 bytes");
    return NGHTTP2_ERR_CALLBACK_FAILURE;
  }
  if (namelen == 7 && memcmp(name, ":status", 7) == 0) {
    int st = 0;
    if (valuelen == 3 && value[0] >= '1' && value[0] <= '5' && value[1] >= '0' && value[1] <= '9' && value[2] >= '0' &&
        value[2] <= '9')
      st = (value[0] - '0') * 100 + (value[1] - '0') * 10 + (value[2] - '0');
    if (st == 0 || h->status != 0) {
      h2u_record(h, NHB_CTR_TUNNEL_PROTOCOL_ERROR, "the proxy's answer is malformed: %s",
                 st == 0 ? "a :status that is not three digits from 100 to 599" : "two :status fields");
      return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    h->status = st;
  }
  return 0;
}

static int h2u_submit_connect(nhb__udp_h2* h) {
  nhb__conn* c = h->conn;
  uint32_t k = c->target < h->run->n ? c->target : 0;
  nghttp2_data_provider dp;
  dp.source.ptr = NULL;
  dp.read_callback = h2u_data_read;
  int32_t sid = nghttp2_submit_request(h->h2, NULL, h->run->nva + h->run->nvoff[k],
                                       h->run->nvoff[k + 1] - h->run->nvoff[k], &dp, NULL);
  if (sid < 0) {
    h2u_record(h, NHB_CTR_TUNNEL_PROTOCOL_ERROR, "%s", "nghttp2 refused the extended CONNECT");
    return NGHTTP2_ERR_CALLBACK_FAILURE;
  }
  h->sid = sid;
  return 0;
}

static int h2u_on_frame_recv(nghttp2_session* session, const nghttp2_frame* frame, void* user) {
  nhb__udp_h2* h = user;
  if (frame->hd.type == NGHTTP2_SETTINGS && !(frame->hd.flags & NGHTTP2_FLAG_ACK) && !h->settings) {
    h->settings = 1;
    if (nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_ENABLE_CONNECT_PROTOCOL) != 1) {
      h2u_record(h, NHB_CTR_TUNNEL_PROTOCOL_ERROR, "%s",
                 "the proxy does not offer extended CONNECT (SETTINGS_ENABLE_CONNECT_PROTOCOL)");
      return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    return h2u_submit_connect(h);
  }
  if (frame->hd.type == NGHTTP2_GOAWAY) {
    if (frame->goaway.error_code != NGHTTP2_NO_ERROR || h->sid < 0 || frame->goaway.last_stream_id < h->sid) {
      h2u_record(h, NHB_CTR_TUNNEL_RESET, "the proxy ended its HTTP/2 connection: GOAWAY %s",
                 nghttp2_http2_strerror(frame->goaway.error_code));
      return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    return 0;
  }
  if (frame->hd.stream_id != h->sid || h->sid < 0) return 0;
  int end = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
  if (frame->hd.type == NGHTTP2_HEADERS && !h->up && h->status / 100 != 2) {
    int st = h->status;
    h->hdr_bytes = 0;
    if (st == 0) {
      h2u_record(h, NHB_CTR_TUNNEL_PROTOCOL_ERROR, "the proxy's answer is malformed: %s", "no :status");
      return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    if (st < 200) {
      h->status = 0;
      if (++h->interims > NHB__RESP_INTERIM) {
        h2u_record(h, NHB_CTR_TUNNEL_PROTOCOL_ERROR, "the proxy's answer is malformed: %s",
                   "more than 100 interim (1xx) answers");
        return NGHTTP2_ERR_CALLBACK_FAILURE;
      }
      return 0;
    }
    if (st > 299) {
      char n[16];
      snprintf(n, sizeof(n), "%d", st % 1000);
      h2u_record(h, NHB_CTR_TUNNEL_NON_2XX, "the proxy answered %s to CONNECT-UDP", n);
      return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
  }
  if ((frame->hd.type == NGHTTP2_DATA || frame->hd.type == NGHTTP2_HEADERS) && end) {
    h->stream_closed = 1;
    if (frame->hd.type == NGHTTP2_HEADERS && !h->up) h->answer_end = 1;
  }
  return 0;
}

static int h2u_on_data(nghttp2_session* session, uint8_t flags, int32_t stream_id, const uint8_t* data, size_t len,
                       void* user) {
  NHB__UNUSED(session);
  NHB__UNUSED(flags);
  nhb__udp_h2* h = user;
  if (stream_id != h->sid || h->sid < 0) return 0;
  if (h->status / 100 != 2) {
    h2u_record(h, NHB_CTR_TUNNEL_PROTOCOL_ERROR, "the proxy's answer is malformed: %s",
               "DATA before its answer's HEADERS");
    return NGHTTP2_ERR_CALLBACK_FAILURE;
  }
  nhb__capsule_rx_feed(&h->cap, data, len, &h->conn->worker->stats.counters[NHB_CTR_TUNNEL_DATAGRAM_DROPPED]);
  /* Queued datagrams go to the inner connection once mem_recv returned. */
  return nhb__capsule_rx_queued(&h->cap) > 0 ? NGHTTP2_ERR_PAUSE : 0;
}

static int h2u_on_stream_close(nghttp2_session* session, int32_t stream_id, uint32_t error_code, void* user) {
  NHB__UNUSED(session);
  nhb__udp_h2* h = user;
  if (stream_id != h->sid || h->sid < 0) return 0;
  h->stream_closed = 1;
  if (error_code != NGHTTP2_NO_ERROR)
    h2u_record(h, NHB_CTR_TUNNEL_RESET, "the proxy reset the CONNECT-UDP stream (%s)",
               nghttp2_http2_strerror(error_code));
  return 0;
}

static int h2u_on_frame_send(nghttp2_session* session, const nghttp2_frame* frame, void* user) {
  NHB__UNUSED(session);
  nhb__udp_h2* h = user;
  if (frame->hd.type == NGHTTP2_GOAWAY) h->goaway_sent = frame->goaway.error_code;
  return 0;
}

/* After mem_recv: the answer's outcome, the datagrams, the stream's end.
 * 0 when the connection goes on. */
static int h2u_after(nhb__udp_h2* h, uint32_t gen) {
  nhb__conn* c = h->conn;
  if (!h->up && h->status / 100 == 2) {
    if (h->answer_end) {
      h2u_fail(h, NHB_CTR_TUNNEL_CLOSED, "the proxy ended the CONNECT-UDP stream with its answer");
      return -1;
    }
    h->up = 1;
    if (nhb__udp_tunnel_established(c, h->tun) < 0 || h->gen != gen) return -1;
  }
  const uint8_t* p;
  size_t n;
  while (nhb__capsule_rx_next(&h->cap, &p, &n)) {
    nhb__h3_tunnel_packet(c, p, n);
    if (h->gen != gen || !live(c)) return -1;
  }
  if (h->stream_closed) {
    if (nhb__capsule_rx_partial(&h->cap)) {
      h2u_fail(h, NHB_CTR_TUNNEL_PROTOCOL_ERROR, "the proxy broke HTTP/2: its stream ended inside a capsule");
    } else {
      h2u_fail(h, NHB_CTR_TUNNEL_CLOSED,
               h->up ? "the proxy ended the tunnel (its CONNECT-UDP stream closed)"
                     : "the proxy closed the CONNECT-UDP stream before its answer");
    }
    return -1;
  }
  return 0;
}

/* The proxy's HTTP/2 bytes (decrypted). 0 when the connection goes on. */
static int h2u_recv(nhb__udp_h2* h, const uint8_t* data, size_t len) {
  uint32_t gen = h->gen;
  while (len > 0) {
    h->in_recv = 1;
    ssize_t n = nghttp2_session_mem_recv(h->h2, data, len);
    h->in_recv = 0;
    if (h->fail_ctr != 0) {
      h2u_fail(h, 0, NULL);
      return -1;
    }
    if (n < 0) {
      char text[160];
      snprintf(text, sizeof(text), "the proxy broke HTTP/2: %s", nghttp2_strerror((int)n));
      h2u_fail(h, NHB_CTR_TUNNEL_PROTOCOL_ERROR, text);
      return -1;
    }
    data += n;
    len -= (size_t)n;
    if (h2u_after(h, gen) < 0) return -1;
  }
  if (h2u_pump(h) < 0) {
    h2u_fail(h, NHB_CTR_TUNNEL_PROTOCOL_ERROR, "sending HTTP/2 to the proxy failed");
    return -1;
  }
  if (h->h2 != NULL && !nghttp2_session_want_read(h->h2) && live(h->conn)) {
    /* nghttp2 saw a connection error of the proxy's and sent GOAWAY. */
    char text[160];
    snprintf(text, sizeof(text), "the proxy broke HTTP/2: GOAWAY %s sent", nghttp2_http2_strerror(h->goaway_sent));
    h2u_fail(h, NHB_CTR_TUNNEL_PROTOCOL_ERROR, text);
    return -1;
  }
  return 0;
}

static int h2u_session_start(nhb__udp_h2* h) {
  if (nghttp2_session_client_new2(&h->h2, h->run->cb, h, h->run->opt) != 0) return NHB_ENOMEM;
  nghttp2_settings_entry iv[2] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
                                  {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, H2U_STREAM_WINDOW}};
  if (nghttp2_submit_settings(h->h2, NGHTTP2_FLAG_NONE, iv, 2) != 0 ||
      nghttp2_session_set_local_window_size(h->h2, NGHTTP2_FLAG_NONE, 0, H2U_CONN_WINDOW) != 0)
    return NHB_ENOMEM;
  h->conn->tunnel = NHB__TUNNEL_WAITING;
  return h2u_pump(h);
}

/* ---- TLS and the socket --------------------------------------------------------- */

static void h2u_tls_fail(nhb__udp_h2* h) {
  char reason[320] = "";
  long v = SSL_get_verify_result(h->ssl);
  if (v != X509_V_OK)
    snprintf(reason, sizeof(reason), "certificate verify failed: %s", X509_verify_cert_error_string(v));
  else
    nhb__tls_error_text(reason, sizeof(reason));
  ERR_clear_error();
  char text[400];
  snprintf(text, sizeof(text), "TLS handshake with the proxy failed: %s",
           reason[0] ? reason : "the connection broke off");
  nhb__udp_tunnel_fail(h->conn, NHB_CTR_TUNNEL_TLS_FAIL, text);
}

/* One step of the handshake: 0 (done or waiting), -1 after the failure. */
static int h2u_handshake(nhb__udp_h2* h) {
  int r = SSL_do_handshake(h->ssl);
  if (r != 1) {
    if (SSL_get_error(h->ssl, r) == SSL_ERROR_WANT_READ) return h2u_pump(h) < 0 ? -1 : 0;
    h2u_tls_fail(h);
    return -1;
  }
  h->tls_up = 1;
  const unsigned char* sel = NULL;
  unsigned sel_len = 0;
  SSL_get0_alpn_selected(h->ssl, &sel, &sel_len);
  if (sel_len != 2 || memcmp(sel, "h2", 2) != 0) {
    nhb__udp_tunnel_fail(h->conn, NHB_CTR_TUNNEL_TLS_FAIL,
                         "TLS handshake with the proxy failed: ALPN: the proxy did not select h2");
    return -1;
  }
  if (h2u_session_start(h) < 0) {
    h2u_fail(h, NHB_CTR_TUNNEL_PROTOCOL_ERROR, "cannot start HTTP/2 to the proxy");
    return -1;
  }
  return 0;
}

static void h2u_alloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf) {
  NHB__UNUSED(suggested);
  h2u_sock* s = handle->data;
  buf->base = s->h != NULL ? s->h->conn->read_buffer : NULL;
  buf->len = s->h != NULL ? NHB__READ_BUFFER_SIZE : 0;
}

static void h2u_on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
  h2u_sock* s = stream->data;
  nhb__udp_h2* h = s->h;
  if (h == NULL || nread == 0 || !live(h->conn)) return;
  nhb__conn* c = h->conn;
  if (nread < 0) {
    char text[160];
    if (nread == UV_EOF)
      snprintf(text, sizeof(text), "the proxy closed the connection%s",
               h->up ? " (the tunnel ended)" : " before its answer");
    else
      snprintf(text, sizeof(text), "the proxy's connection failed: %s", nhb_strerror((int)nread));
    if (h->ssl != NULL && !h->tls_up)
      h2u_tls_fail(h);
    else
      h2u_fail(h, NHB_CTR_TUNNEL_CLOSED, text);
    return;
  }
  c->worker->stats.counters[NHB_CTR_UPSTREAM_CX_RX_BYTES_TOTAL] += (uint64_t)nread;
  uint32_t gen = h->gen;
  if (h->ssl == NULL) {
    (void)h2u_recv(h, (const uint8_t*)buf->base, (size_t)nread);
    return;
  }
  if (BIO_write(h->rbio, buf->base, (int)nread) != (int)nread) {
    h2u_fail(h, NHB_CTR_TUNNEL_TLS_FAIL, "TLS to the proxy: out of memory");
    return;
  }
  if (!h->tls_up && (h2u_handshake(h) < 0 || !h->tls_up)) return;
  nhb__worker* w = c->worker;
  if (w->carrier_plain == NULL && (w->carrier_plain = malloc(NHB__READ_BUFFER_SIZE)) == NULL) {
    h2u_fail(h, NHB_CTR_TUNNEL_PROTOCOL_ERROR, "out of memory");
    return;
  }
  for (;;) {
    int n = SSL_read(h->ssl, w->carrier_plain, NHB__READ_BUFFER_SIZE);
    if (n > 0) {
      if (h2u_recv(h, (const uint8_t*)w->carrier_plain, (size_t)n) < 0 || h->gen != gen || h->ssl == NULL) return;
      continue;
    }
    int err = SSL_get_error(h->ssl, n);
    if (err == SSL_ERROR_WANT_READ) break;
    if (err == SSL_ERROR_ZERO_RETURN) {
      ERR_clear_error();
      h2u_fail(h, NHB_CTR_TUNNEL_CLOSED, h->up ? "the proxy closed TLS (the tunnel ended)"
                                               : "the proxy closed TLS before its answer");
      return;
    }
    char reason[320];
    nhb__tls_error_text(reason, sizeof(reason));
    ERR_clear_error();
    char text[400];
    snprintf(text, sizeof(text), "TLS error from the proxy: %s", reason);
    h2u_fail(h, NHB_CTR_TUNNEL_TLS_FAIL, text);
    return;
  }
  if (h2u_pump(h) < 0) h2u_fail(h, NHB_CTR_TUNNEL_PROTOCOL_ERROR, "sending to the proxy failed");
}

static void h2u_on_connect(uv_connect_t* req, int status) {
  h2u_sock* s = req->data;
  nhb__udp_h2* h = s->h;
  if (h == NULL || status == UV_ECANCELED || !live(h->conn)) return;
  nhb__conn* c = h->conn;
  if (status < 0) {
    /* c->tunnel is NHB__TUNNEL_TCP: the pool counts tunnel.connect_fail. */
    nhb__conn_fail(c, status, NHB_CTR_POOL_CONNECTION_FAILURE);
    return;
  }
  uv_tcp_nodelay(&s->tcp, 1);
  int r = uv_read_start((uv_stream_t*)&s->tcp, h2u_alloc, h2u_on_read);
  if (r < 0) {
    nhb__conn_fail(c, r, NHB_CTR_POOL_CONNECTION_FAILURE);
    return;
  }
  if (h->run->ssl_ctx != NULL) {
    h->ssl = nhb__tls_new((SSL_CTX*)h->run->ssl_ctx, &h->rbio, &h->wbio);
    if (h->ssl == NULL) {
      nhb__conn_fail(c, NHB_ENOMEM, NHB_CTR_POOL_CONNECTION_FAILURE);
      return;
    }
    const char* sni = c->worker->run->config.proxy_tls.sni;
    if (sni != NULL && sni[0] != '\0') SSL_set_tlsext_host_name(h->ssl, sni);
    SSL_set_connect_state(h->ssl);
    c->tunnel = NHB__TUNNEL_TLS;
    (void)h2u_handshake(h);
    return;
  }
  if (h2u_session_start(h) < 0) h2u_fail(h, NHB_CTR_TUNNEL_PROTOCOL_ERROR, "cannot start HTTP/2 to the proxy");
}

static void h2u_sock_closed(uv_handle_t* handle) { free(handle->data); }

/* ---- per connection --------------------------------------------------------------- */

nhb__udp_h2* nhb__udp_h2_new(nhb__conn* c, nhb__udp_tunnel* t, const void* run_part) {
  nhb__udp_h2* h = calloc(1, sizeof(*h));
  if (h == NULL) return NULL;
  h->conn = c;
  h->tun = t;
  h->run = run_part;
  h->sid = -1;
  h->out = malloc(H2U_OUT);
  h->dq = malloc(H2U_DQ);
  if (h->out == NULL || h->dq == NULL || uv_timer_init(&c->worker->loop, &h->timer) < 0) {
    free(h->out);
    free(h->dq);
    free(h);
    return NULL;
  }
  h->timer.data = h;
  h->timer_init = 1;
  return h;
}

int nhb__udp_h2_start(nhb__udp_h2* h, const nhb_sockaddr* to) {
  nhb__udp_h2_teardown(h);
  h->gen++;
  h2u_sock* s = calloc(1, sizeof(*s));
  if (s == NULL) return NHB_ENOMEM;
  int r = uv_tcp_init(&h->conn->worker->loop, &s->tcp);
  if (r < 0) {
    free(s);
    return r;
  }
  s->tcp.data = s;
  s->connect_req.data = s;
  s->h = h;
  h->sock = s;
  r = uv_tcp_connect(&s->connect_req, &s->tcp, (const struct sockaddr*)to->bytes, h2u_on_connect);
  return r;
}

void nhb__udp_h2_teardown(nhb__udp_h2* h) {
  if (h == NULL) return;
  if (h->timer_init) uv_timer_stop(&h->timer);
  if (h->sock != NULL) {
    h->sock->h = NULL;
    uv_close((uv_handle_t*)&h->sock->tcp, h2u_sock_closed);
    h->sock = NULL;
  }
  if (h->h2 != NULL) nghttp2_session_del(h->h2);
  h->h2 = NULL;
  SSL_free(h->ssl); /* frees its BIOs */
  h->ssl = NULL;
  h->rbio = h->wbio = NULL;
  h->tls_up = 0;
  h->sid = -1;
  h->settings = h->status = h->up = h->stream_closed = h->answer_end = 0;
  h->interims = h->hdr_bytes = 0;
  h->in_recv = h->deferred = 0;
  h->fail_ctr = 0;
  h->goaway_sent = 0;
  h->out_len = 0;
  h->sock_pending = 0;
  h->dq_off = h->dq_len = 0;
  nhb__capsule_rx_init(&h->cap);
}

/* The run is over: the socket and the timer close with the loop. */
void nhb__udp_h2_close(nhb__udp_h2* h) {
  if (h == NULL) return;
  nhb__udp_h2_teardown(h);
  if (h->timer_init) {
    h->timer_init = 0;
    uv_close((uv_handle_t*)&h->timer, NULL);
  }
}

void nhb__udp_h2_free(nhb__udp_h2* h) {
  if (h == NULL) return;
  nhb__udp_h2_teardown(h);
  free(h->out);
  free(h->dq);
  free(h);
}

/* ---- per run ------------------------------------------------------------------------- */

static nghttp2_nv nv(const char* name, const char* value) {
  nghttp2_nv v = {(uint8_t*)(uintptr_t)name, (uint8_t*)(uintptr_t)value, strlen(name), strlen(value),
                  NGHTTP2_NV_FLAG_NONE};
  return v;
}

int nhb__udp_h2_run_init(const nhb_run* run, void** out, char* err, size_t err_len) {
  const nhb_client_config* cfg = &run->config;
  h2u_run* r = calloc(1, sizeof(*r));
  if (r == NULL) return NHB_ENOMEM;
  *out = r;
  if (cfg->proxy_tls.enabled) {
    int rc = nhb__proxy_ssl_ctx(&cfg->proxy_tls, 1, &r->ssl_ctx, err, err_len);
    if (rc < 0) return rc;
  }
  r->n = cfg->nudp_tunnel_paths;
  const char* auth = cfg->udp_tunnel_authorization;
  size_t per = 6 + (auth != NULL && auth[0] != '\0');
  r->nva = calloc(per * r->n, sizeof(*r->nva));
  r->nvoff = calloc(r->n + 1, sizeof(*r->nvoff));
  if (r->nva == NULL || r->nvoff == NULL) return NHB_ENOMEM;
  /* The strings are the run's config's, which outlives the run's
   * connections. */
  size_t k = 0;
  for (uint32_t i = 0; i < r->n; i++) {
    r->nvoff[i] = k;
    r->nva[k++] = nv(":method", "CONNECT");
    r->nva[k++] = nv(":protocol", "connect-udp");
    r->nva[k++] = nv(":scheme", "https");
    r->nva[k++] = nv(":authority", cfg->udp_tunnel_authority);
    r->nva[k++] = nv(":path", cfg->udp_tunnel_paths[i]);
    r->nva[k++] = nv("capsule-protocol", "?1");
    if (per == 7) r->nva[k++] = nv("proxy-authorization", auth);
  }
  r->nvoff[r->n] = k;
  if (nghttp2_session_callbacks_new(&r->cb) != 0 || nghttp2_option_new(&r->opt) != 0) return NHB_ENOMEM;
  /* The answer is checked here; nghttp2 would refuse :protocol in a request
   * without http messaging off. */
  nghttp2_option_set_no_http_messaging(r->opt, 1);
  nghttp2_session_callbacks_set_send_callback(r->cb, h2u_send_cb);
  nghttp2_session_callbacks_set_on_begin_headers_callback(r->cb, h2u_on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(r->cb, h2u_on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(r->cb, h2u_on_frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(r->cb, h2u_on_data);
  nghttp2_session_callbacks_set_on_stream_close_callback(r->cb, h2u_on_stream_close);
  nghttp2_session_callbacks_set_on_frame_send_callback(r->cb, h2u_on_frame_send);
  return 0;
}

void nhb__udp_h2_run_free(void* part) {
  h2u_run* r = part;
  if (r == NULL) return;
  if (r->ssl_ctx != NULL) SSL_CTX_free((SSL_CTX*)r->ssl_ctx);
  if (r->cb != NULL) nghttp2_session_callbacks_del(r->cb);
  if (r->opt != NULL) nghttp2_option_del(r->opt);
  free(r->nva);
  free(r->nvoff);
  free(r);
}
