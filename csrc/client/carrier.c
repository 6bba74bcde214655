/* carrier.c: the proxy leg of a tunnel, when it is more than plain TCP.
 *
 * With TLS to the proxy (--proxy https://) or a CONNECT on an HTTP/2 stream
 * (--proxy-protocol http2), the tunnel's bytes do not go straight to the
 * socket: they are encrypted for the proxy, framed as DATA on the CONNECT
 * stream, or both. A connection of such a run starts on this transport and
 * stays on it: once TCP is up it makes the TLS handshake with the proxy
 * (SNI and verification against the proxy's name, ALPN h2 or http/1.1),
 * sends the CONNECT (an HTTP/1.1 request head inside TLS, or a HEADERS frame
 * with :method CONNECT and :authority only, RFC 9113 section 8.5) and, once
 * the proxy answered 2xx, starts the transport the protocol would use
 * without a proxy (TLS or TCP to the origin: the "inner" one) above itself.
 * The inner transport's output comes back here: TCP's through this
 * transport's write, TLS's through nhb__carrier_send, which transport_tls.c
 * calls in place of its socket write. What arrives from the proxy goes the
 * other way: decrypted, taken out of DATA frames, then to the inner
 * transport's on_read.
 *
 * Runs without a proxy, and runs through a plain HTTP/1.1 proxy (tunnel.c),
 * never come here: they pay one pointer test per TLS socket write.
 *
 * Memory: per connection entry, the carrier and its socket output buffer
 * (and, for HTTP/2, the buffer of tunnel bytes waiting for DATA frames) are
 * allocated on the entry's first carried connection and kept; the proxy
 * TLS's plaintext goes to one buffer per worker. Per connection, the SSL
 * object, its two memory BIOs (which grow to the largest flight once) and
 * the nghttp2 session; nothing per request.
 *
 * Flow control: the proxy's HTTP/2 windows are opened wide (1 GiB for the
 * connection, 16 MiB for the stream) so that the client never throttles
 * the origin's bytes; nghttp2 returns what was consumed as it goes.
 */
#include <arpa/inet.h>
#include <nghttp2/nghttp2.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "client/client.h"
#include "common/tls_common.h"

/* The socket output buffer, and the HTTP/2 DATA staging buffer. */
#define CARRIER_OUT 65536
#define CARRIER_DQ 65536
/* Plaintext is encrypted in chunks of three full records. */
#define CARRIER_PLAIN_CHUNK (3 * 16384)
/* The proxy's HTTP/2 windows: connection and stream. */
#define CARRIER_CONN_WINDOW (1 << 30)
#define CARRIER_STREAM_WINDOW (1 << 24)

struct nhb__carrier {
  /* TLS to the proxy: the socket's ciphertext is written into rbio, what
   * OpenSSL sends is read out of wbio. */
  SSL* ssl;
  BIO* rbio;
  BIO* wbio;
  int tls_up;
  /* The CONNECT on HTTP/2. */
  nghttp2_session* h2;
  int32_t stream;
  int status;          /* the :status of the current answer head */
  uint32_t hdr_bytes;  /* the answer heads' bytes (against NHB__RESP_HEADER_BYTES) */
  uint32_t interims;
  int in_recv;         /* inside nghttp2_session_mem_recv: no sending from callbacks */
  int deferred;        /* the DATA provider waits for bytes */
  int stream_gone;
  int fail_err;        /* an error a callback left for the end of mem_recv */
  uint32_t goaway_sent; /* the error code of the GOAWAY nghttp2 sent */
  uint64_t produced;   /* bytes nghttp2 handed to send_cb */
  char* dq;            /* CARRIER_DQ bytes: tunnel bytes waiting for DATA frames */
  size_t dq_off, dq_len;
  /* The socket. */
  char* out;           /* CARRIER_OUT bytes */
  size_t out_len;
  int sock_pending;    /* a uv_write of `out` is outstanding */
  /* The inner transport's bytes not taken yet, and whether it waits for
   * word that they were. */
  const char* plain;
  size_t plain_len;
  int plain_waits;
  /* The CONNECT on an HTTP/3 stream (tunnel_udp.c), the entry's, kept. */
  nhb__udp_tunnel* h3;
};

static int carrier_pump(nhb__conn* c);

static int conn_live(const nhb__conn* c) { return c->state == NHB__CX_READY || c->state == NHB__CX_CONNECTING; }

/* ---- the socket ------------------------------------------------------------ */

static void carrier_notify(nhb__conn* c) {
  nhb__carrier* k = c->carrier;
  if (!k->plain_waits || k->plain_len > 0) return;
  k->plain_waits = 0;
  if (nhb__tunnel_inner(c) == &nhb__transport_tls) {
    nhb__tls_carried_written(c);
    return;
  }
  c->write_pending = 0;
  if (c->state == NHB__CX_READY && c->session->on_writable) c->session->on_writable(c);
}

static int carrier_flush(nhb__conn* c) {
  int r = carrier_pump(c);
  if (r < 0) return r;
  if (conn_live(c)) carrier_notify(c);
  return 0;
}

static void carrier_write_done(uv_write_t* req, int status) {
  nhb__conn* c = (nhb__conn*)req->handle->data;
  nhb__carrier* k = c->carrier;
  k->sock_pending = 0;
  if (status == UV_ECANCELED || !conn_live(c)) return;
  if (status == 0) status = carrier_flush(c);
  if (status < 0 && conn_live(c))
    nhb__conn_fail(c, status, c->state == NHB__CX_CONNECTING ? NHB_CTR_POOL_CONNECTION_FAILURE : NHB_CTR_STREAM_RESETS);
}

static int carrier_sock_write(nhb__conn* c) {
  nhb__carrier* k = c->carrier;
  size_t len = k->out_len;
  k->out_len = 0;
  uv_stream_t* stream = (uv_stream_t*)&c->tcp;
  uv_buf_t buf = uv_buf_init(k->out, (unsigned)len);
  c->worker->stats.counters[NHB_CTR_UPSTREAM_CX_TX_BYTES_TOTAL] += len;
  int n = uv_try_write(stream, &buf, 1);
  if (n == (int)len) return 0;
  if (n < 0 && n != UV_EAGAIN) return n;
  if (n < 0) n = 0;
  buf = uv_buf_init(k->out + n, (unsigned)(len - (size_t)n));
  int r = uv_write(&c->write_req, stream, &buf, 1, carrier_write_done);
  if (r == 0) k->sock_pending = 1;
  return r;
}

/* ---- HTTP/2 output --------------------------------------------------------- */

/* The inner transport's bytes into the DATA staging buffer, as far as they
 * fit; the DATA provider is woken if it waited. */
static void take_plain_h2(nhb__conn* c) {
  nhb__carrier* k = c->carrier;
  if (k->plain_len == 0) return;
  if (k->stream_gone) {
    k->plain_len = 0; /* nowhere to go: the connection is failing */
    return;
  }
  if (k->dq_off > 0 && k->dq_off + k->dq_len + k->plain_len > CARRIER_DQ) {
    memmove(k->dq, k->dq + k->dq_off, k->dq_len);
    k->dq_off = 0;
  }
  size_t room = CARRIER_DQ - k->dq_off - k->dq_len;
  size_t n = k->plain_len < room ? k->plain_len : room;
  if (n == 0) return;
  memcpy(k->dq + k->dq_off + k->dq_len, k->plain, n);
  k->dq_len += n;
  k->plain += n;
  k->plain_len -= n;
  if (k->deferred) {
    k->deferred = 0;
    nghttp2_session_resume_data(k->h2, k->stream);
  }
}

static ssize_t h2_send_cb(nghttp2_session* session, const uint8_t* data, size_t len, int flags, void* user) {
  NHB__UNUSED(session);
  NHB__UNUSED(flags);
  nhb__conn* c = user;
  nhb__carrier* k = c->carrier;
  if (k->ssl != NULL) {
    /* The memory BIO takes everything; hold back once a buffer's worth
     * waits, so that a slow proxy bounds what piles up. */
    if (BIO_ctrl_pending(k->wbio) >= CARRIER_OUT) return NGHTTP2_ERR_WOULDBLOCK;
    size_t n = len < CARRIER_PLAIN_CHUNK ? len : CARRIER_PLAIN_CHUNK;
    int m = SSL_write(k->ssl, data, (int)n);
    if (m <= 0) return NGHTTP2_ERR_CALLBACK_FAILURE;
    k->produced += (uint64_t)m;
    return (ssize_t)m;
  }
  if (k->sock_pending) return NGHTTP2_ERR_WOULDBLOCK;
  size_t room = CARRIER_OUT - k->out_len;
  if (room == 0) return NGHTTP2_ERR_WOULDBLOCK;
  size_t n = len < room ? len : room;
  memcpy(k->out + k->out_len, data, n);
  k->out_len += n;
  k->produced += n;
  return (ssize_t)n;
}

static ssize_t h2_data_read(nghttp2_session* session, int32_t stream_id, uint8_t* buf, size_t length,
                                  uint32_t* flags, nghttp2_data_source* source, void* user) {
  NHB__UNUSED(session);
  NHB__UNUSED(stream_id);
  NHB__UNUSED(flags);
  NHB__UNUSED(source);
  nhb__conn* c = user;
  nhb__carrier* k = c->carrier;
  if (k->dq_len == 0) {
    k->deferred = 1;
    return NGHTTP2_ERR_DEFERRED;
  }
  size_t n = length < k->dq_len ? length : k->dq_len;
  memcpy(buf, k->dq + k->dq_off, n);
  k->dq_off += n;
  k->dq_len -= n;
  if (k->dq_len == 0) k->dq_off = 0;
  return (ssize_t)n;
}

/* ---- the pump ---------------------------------------------------------------- */

/* Moves bytes down the leg: the inner transport's into HTTP/2 or TLS, TLS's
 * into the output buffer, the buffer to the socket; until all is out or the
 * socket is full. */
static int carrier_pump(nhb__conn* c) {
  nhb__carrier* k = c->carrier;
  while (!k->sock_pending && conn_live(c)) {
    if (k->out_len > 0) {
      int r = carrier_sock_write(c);
      if (r < 0) return r;
      continue;
    }
    if (k->ssl != NULL) {
      int n = BIO_read(k->wbio, k->out, CARRIER_OUT);
      if (n > 0) {
        k->out_len = (size_t)n;
        continue;
      }
    }
    if (k->h2 != NULL) {
      if (k->in_recv) break;
      take_plain_h2(c);
      if (!nghttp2_session_want_write(k->h2)) break;
      uint64_t before = k->produced;
      int rv = nghttp2_session_send(k->h2);
      if (rv != 0) return NHB_EPROTO;
      if (k->produced == before) break;
      continue;
    }
    if (k->ssl != NULL && k->tls_up && k->plain_len > 0 && c->tunnel == 0) {
      size_t chunk = k->plain_len < CARRIER_PLAIN_CHUNK ? k->plain_len : CARRIER_PLAIN_CHUNK;
      int m = SSL_write(k->ssl, k->plain, (int)chunk);
      if (m <= 0) {
        ERR_clear_error();
        return NHB_ETLS;
      }
      k->plain += m;
      k->plain_len -= (size_t)m;
      continue;
    }
    break;
  }
  return 0;
}

/* HTTP/3: the inner transport's bytes into the QUIC leg's ring, as far as
 * they fit. */
static void take_plain_h3(nhb__conn* c) {
  nhb__carrier* k = c->carrier;
  while (k->plain_len > 0) {
    size_t n = nhb__udp_tunnel_stream_put(c, k->h3, k->plain, k->plain_len);
    if (n == 0) break;
    k->plain += n;
    k->plain_len -= n;
  }
}

void nhb__carrier_h3_room(nhb__conn* c) {
  nhb__carrier* k = c->carrier;
  if (k == NULL || k->h3 == NULL || !conn_live(c)) return;
  take_plain_h3(c);
  carrier_notify(c);
}

int nhb__carrier_send(nhb__conn* c, const char* data, size_t len) {
  nhb__carrier* k = c->carrier;
  if (k->plain_len > 0) return NHB_ESTATE; /* one write at a time */
  if (k->h3 != NULL) {
    k->plain = data;
    k->plain_len = len;
    take_plain_h3(c);
    if (k->plain_len == 0) return 0;
    k->plain_waits = 1;
    return 1;
  }
  k->plain = data;
  k->plain_len = len;
  if (k->in_recv) {
    take_plain_h2(c); /* sent once nghttp2 has returned */
  } else {
    int r = carrier_pump(c);
    if (r < 0) return r;
  }
  if (k->plain_len == 0) return 0;
  k->plain_waits = 1;
  return 1;
}

/* ---- the HTTP/2 CONNECT stream --------------------------------------------------- */

static void h2_fail(nhb__conn* c, nhb_counter_t cause, const char* fmt, const char* a, int status, int err) {
  if (c->tunnel != 0) {
    nhb__tunnel_count(c, cause, fmt, a, status);
    nhb__conn_fail(c, NHB_EPROXY, NHB_CTR_POOL_CONNECTION_FAILURE);
    return;
  }
  /* The tunnel was up: the connection to the origin is lost with it. */
  nhb__tunnel_count(c, cause, fmt, a, status);
  c->tunnel = 0;
  nhb__conn_fail(c, err, NHB_CTR_STREAM_RESETS);
}

static int h2_on_begin_headers(nghttp2_session* session, const nghttp2_frame* frame, void* user) {
  NHB__UNUSED(session);
  nhb__conn* c = user;
  if (!conn_live(c)) return NGHTTP2_ERR_CALLBACK_FAILURE;
  if (frame->hd.stream_id == c->carrier->stream) c->carrier->status = 0;
  return 0;
}

static int h2_on_header(nghttp2_session* session, const nghttp2_frame* frame, const uint8_t* name, size_t namelen,
                        const uint8_t* value, size_t valuelen, uint8_t flags, void* user) {
  NHB__UNUSED(session);
  NHB__UNUSED(flags);
  nhb__conn* c = user;
  nhb__carrier* k = c->carrier;
  if (!conn_live(c)) return NGHTTP2_ERR_CALLBACK_FAILURE;
  if (frame->hd.stream_id != k->stream || c->tunnel != NHB__TUNNEL_WAITING) return 0;
  k->hdr_bytes += (uint32_t)(namelen + valuelen + 32);
  if (k->hdr_bytes > NHB__RESP_HEADER_BYTES) {
    h2_fail(c, NHB_CTR_TUNNEL_PROTOCOL_ERROR, "the proxy's answer to CONNECT %s is malformed: %s",
            "headers over 98304 bytes", 0, NHB_EPROXY);
    return NGHTTP2_ERR_CALLBACK_FAILURE;
  }
  if (namelen == 7 && memcmp(name, ":status", 7) == 0) {
    int st = 0;
    if (valuelen == 3 && value[0] >= '1' && value[0] <= '9' && value[1] >= '0' && value[1] <= '9' && value[2] >= '0' &&
        value[2] <= '9')
      st = (value[0] - '0') * 100 + (value[1] - '0') * 10 + (value[2] - '0');
    if (st == 0 || k->status != 0) {
      h2_fail(c, NHB_CTR_TUNNEL_PROTOCOL_ERROR, "the proxy's answer to CONNECT %s is malformed: %s",
              st == 0 ? "a :status that is not three digits from 100" : "two :status fields", 0, NHB_EPROXY);
      return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    k->status = st;
  }
  return 0;
}

static int h2_answer(nhb__conn* c, const nghttp2_frame* frame) {
  nhb__carrier* k = c->carrier;
  int st = k->status;
  if (st == 0) {
    h2_fail(c, NHB_CTR_TUNNEL_PROTOCOL_ERROR, "the proxy's answer to CONNECT %s is malformed: %s", "no :status", 0,
            NHB_EPROXY);
    return NGHTTP2_ERR_CALLBACK_FAILURE;
  }
  if (st >= 100 && st < 200) {
    if (++k->interims > NHB__RESP_INTERIM) {
      h2_fail(c, NHB_CTR_TUNNEL_PROTOCOL_ERROR, "the proxy's answer to CONNECT %s is malformed: %s",
              "more than 100 interim (1xx) answers", 0, NHB_EPROXY);
      return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    return 0;
  }
  if (st < 200 || st > 299) {
    h2_fail(c, NHB_CTR_TUNNEL_NON_2XX, "the proxy answered %d to CONNECT %s", NULL, st, NHB_EPROXY);
    return NGHTTP2_ERR_CALLBACK_FAILURE;
  }
  if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) {
    h2_fail(c, NHB_CTR_TUNNEL_CLOSED, "the proxy ended the CONNECT %s stream with its answer%s", "", 0, NHB_EPROXY);
    return NGHTTP2_ERR_CALLBACK_FAILURE;
  }
  nhb__tunnel_up(c);
  return conn_live(c) ? 0 : NGHTTP2_ERR_CALLBACK_FAILURE;
}

static int h2_on_frame_recv(nghttp2_session* session, const nghttp2_frame* frame, void* user) {
  NHB__UNUSED(session);
  nhb__conn* c = user;
  nhb__carrier* k = c->carrier;
  if (!conn_live(c)) return NGHTTP2_ERR_CALLBACK_FAILURE;
  if (frame->hd.type == NGHTTP2_GOAWAY) {
    if (frame->goaway.error_code != NGHTTP2_NO_ERROR || frame->goaway.last_stream_id < k->stream) {
      h2_fail(c, NHB_CTR_TUNNEL_RESET, "the proxy ended the HTTP/2 connection of CONNECT %s: GOAWAY %s",
              nghttp2_http2_strerror(frame->goaway.error_code), 0, UV_ECONNRESET);
      return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    return 0;
  }
  if (frame->hd.stream_id != k->stream) return 0;
  if (frame->hd.type == NGHTTP2_HEADERS && c->tunnel == NHB__TUNNEL_WAITING) return h2_answer(c, frame);
  if ((frame->hd.type == NGHTTP2_DATA || frame->hd.type == NGHTTP2_HEADERS) &&
      (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) && c->tunnel == 0) {
    /* The origin closed its side: the proxy ends the stream (RFC 9113 8.5). */
    nhb__conn_eof(c);
    return conn_live(c) ? 0 : NGHTTP2_ERR_CALLBACK_FAILURE;
  }
  return 0;
}

static int h2_on_data(nghttp2_session* session, uint8_t flags, int32_t stream_id, const uint8_t* data, size_t len,
                      void* user) {
  NHB__UNUSED(session);
  NHB__UNUSED(flags);
  nhb__conn* c = user;
  nhb__carrier* k = c->carrier;
  if (!conn_live(c)) return NGHTTP2_ERR_CALLBACK_FAILURE;
  if (stream_id != k->stream) return 0;
  if (c->tunnel != 0) {
    h2_fail(c, NHB_CTR_TUNNEL_PROTOCOL_ERROR, "the proxy's answer to CONNECT %s is malformed: %s",
            "DATA before its answer's HEADERS", 0, NHB_EPROXY);
    return NGHTTP2_ERR_CALLBACK_FAILURE;
  }
  int r = nhb__tunnel_inner(c)->on_read(c, (const char*)data, len);
  if (r < 0) {
    k->fail_err = r;
    return NGHTTP2_ERR_CALLBACK_FAILURE;
  }
  return conn_live(c) ? 0 : NGHTTP2_ERR_CALLBACK_FAILURE;
}

static int h2_on_stream_close(nghttp2_session* session, int32_t stream_id, uint32_t error_code, void* user) {
  NHB__UNUSED(session);
  nhb__conn* c = user;
  nhb__carrier* k = c->carrier;
  if (stream_id != k->stream) return 0;
  k->stream_gone = 1;
  if (!conn_live(c)) return 0;
  if (error_code == NGHTTP2_NO_ERROR && c->tunnel == 0) {
    nhb__conn_eof(c);
    return 0;
  }
  h2_fail(c, NHB_CTR_TUNNEL_RESET, "the proxy reset the CONNECT %s stream: RST_STREAM %s",
          nghttp2_http2_strerror(error_code), 0, UV_ECONNRESET);
  return 0;
}

static int h2_on_frame_send(nghttp2_session* session, const nghttp2_frame* frame, void* user) {
  NHB__UNUSED(session);
  nhb__conn* c = user;
  if (frame->hd.type == NGHTTP2_GOAWAY) c->carrier->goaway_sent = frame->goaway.error_code;
  return 0;
}

static int h2_start(nhb__conn* c) {
  nhb__carrier* k = c->carrier;
  const nhb__run_tunnel* t = &c->worker->run->tunnel;
  if (nghttp2_session_client_new2(&k->h2, (nghttp2_session_callbacks*)t->h2_callbacks, c,
                                  (nghttp2_option*)t->h2_option) != 0)
    return NHB_ENOMEM;
  nghttp2_settings_entry iv[] = {
      {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, CARRIER_STREAM_WINDOW},
  };
  if (nghttp2_submit_settings(k->h2, NGHTTP2_FLAG_NONE, iv, sizeof(iv) / sizeof(iv[0])) != 0 ||
      nghttp2_session_set_local_window_size(k->h2, NGHTTP2_FLAG_NONE, 0, CARRIER_CONN_WINDOW) != 0)
    return NHB_ENOMEM;
  uint32_t i = c->target < t->n ? c->target : 0;
  const nghttp2_nv* nva = (const nghttp2_nv*)t->h2_nva;
  nghttp2_data_provider prd;
  prd.source.ptr = NULL;
  prd.read_callback = h2_data_read;
  int32_t id = nghttp2_submit_request(k->h2, NULL, nva + t->h2_nvoff[i], t->h2_nvoff[i + 1] - t->h2_nvoff[i], &prd,
                                       NULL);
  if (id < 0) return NHB_ENOMEM;
  k->stream = id;
  return 0;
}

/* ---- TLS to the proxy ----------------------------------------------------------- */

static void proxy_tls_fail(nhb__conn* c) {
  nhb__carrier* k = c->carrier;
  const nhb_tls_config* pc = &c->worker->run->config.proxy_tls;
  char reason[320];
  long verify = SSL_get_verify_result(k->ssl);
  if (verify != X509_V_OK && !pc->insecure) {
    snprintf(reason, sizeof(reason), "certificate verify failed: %s%s%s%s", X509_verify_cert_error_string(verify),
             verify == X509_V_ERR_HOSTNAME_MISMATCH || verify == X509_V_ERR_IP_ADDRESS_MISMATCH
                 ? " (the certificate is not valid for '"
                 : "",
             verify == X509_V_ERR_HOSTNAME_MISMATCH || verify == X509_V_ERR_IP_ADDRESS_MISMATCH
                 ? (pc->verify_name != NULL ? pc->verify_name : "")
                 : "",
             verify == X509_V_ERR_HOSTNAME_MISMATCH || verify == X509_V_ERR_IP_ADDRESS_MISMATCH ? "')" : "");
  } else if (ERR_peek_last_error() != 0) {
    nhb__tls_error_text(reason, sizeof(reason));
  } else {
    snprintf(reason, sizeof(reason), "the proxy closed the connection");
  }
  ERR_clear_error();
  carrier_pump(c); /* the alert that tells the proxy why, best effort */
  nhb__tunnel_count(c, NHB_CTR_TUNNEL_TLS_FAIL, "TLS handshake with the proxy for CONNECT %s failed: %s", reason, 0);
  nhb__conn_fail(c, NHB_EPROXY, NHB_CTR_POOL_CONNECTION_FAILURE);
}

/* The proxy leg is ready for the CONNECT: send it. */
static int send_connect(nhb__conn* c) {
  nhb__carrier* k = c->carrier;
  const nhb__run_tunnel* t = &c->worker->run->tunnel;
  c->tunnel = NHB__TUNNEL_WAITING;
  if (t->h2) return h2_start(c);
  uint32_t i = c->target < t->n ? c->target : 0;
  nhb__tunnel_rx_init(&c->parser, &c->tunnel_rx);
  if (SSL_write(k->ssl, t->request[i], (int)t->request_len[i]) <= 0) {
    ERR_clear_error();
    return NHB_ETLS;
  }
  return 0;
}

/* One step of the handshake with the proxy; 0 also when it failed (and the
 * connection was closed). */
static int proxy_handshake(nhb__conn* c) {
  nhb__carrier* k = c->carrier;
  int r = SSL_do_handshake(k->ssl);
  if (r != 1) {
    int err = SSL_get_error(k->ssl, r);
    if (err == SSL_ERROR_WANT_READ) return carrier_pump(c);
    proxy_tls_fail(c);
    return 0;
  }
  k->tls_up = 1;
  if (c->worker->run->tunnel.h2) {
    const unsigned char* sel = NULL;
    unsigned sel_len = 0;
    SSL_get0_alpn_selected(k->ssl, &sel, &sel_len);
    if (sel_len != 2 || memcmp(sel, "h2", 2) != 0) {
      nhb__tunnel_count(c, NHB_CTR_TUNNEL_TLS_FAIL, "TLS handshake with the proxy for CONNECT %s failed: %s",
                        "ALPN: the proxy did not select h2 (--proxy-protocol http2 needs HTTP/2 over TLS)", 0);
      nhb__conn_fail(c, NHB_EPROXY, NHB_CTR_POOL_CONNECTION_FAILURE);
      return 0;
    }
  }
  return send_connect(c);
}

/* ---- the transport ----------------------------------------------------------------- */

/* Bytes from the proxy leg, decrypted: HTTP/2 frames, the HTTP/1.1 answer,
 * or the tunnel's. */
static int carrier_up(nhb__conn* c, const char* data, size_t len) {
  nhb__carrier* k = c->carrier;
  if (k->h2 != NULL) {
    k->in_recv = 1;
    k->fail_err = 0;
    ssize_t n = nghttp2_session_mem_recv(k->h2, (const uint8_t*)data, len);
    k->in_recv = 0;
    if (!conn_live(c)) return 0;
    if (n < 0) {
      if (k->fail_err < 0) return k->fail_err;
      if (c->tunnel != 0) {
        nhb__tunnel_count(c, NHB_CTR_TUNNEL_PROTOCOL_ERROR, "the proxy broke HTTP/2 on CONNECT %s: %s",
                          nghttp2_strerror((int)n), 0);
        return NHB_EPROXY;
      }
      return NHB_EPROTO;
    }
    /* On a connection error of the proxy's nghttp2 ends the session: it
     * wants to read no more once its GOAWAY is out (best effort), and the
     * connection closes. */
    int r = carrier_pump(c);
    if (r < 0 || !conn_live(c)) return r;
    if (!nghttp2_session_want_read(k->h2)) {
      char why[96];
      snprintf(why, sizeof(why), ": GOAWAY %s sent", nghttp2_http2_strerror(k->goaway_sent));
      if (c->tunnel != 0) {
        nhb__tunnel_count(c, NHB_CTR_TUNNEL_PROTOCOL_ERROR, "the proxy broke HTTP/2 on CONNECT %s%s", why, 0);
        return NHB_EPROXY;
      }
      char text[256];
      snprintf(text, sizeof(text), "the proxy broke HTTP/2 in the tunnel%s", why);
      nhb__worker_record_error_text(c->worker, NHB_EPROTO, text);
      return NHB_EPROTO;
    }
    return 0;
  }
  if (c->tunnel == NHB__TUNNEL_WAITING) return nhb__tunnel_answer(c, data, len);
  return nhb__tunnel_inner(c)->on_read(c, data, len);
}

static int carrier_on_read(nhb__conn* c, const char* data, size_t len) {
  nhb__carrier* k = c->carrier;
  int r;
  if (k->ssl == NULL) {
    r = carrier_up(c, data, len);
  } else {
    if (BIO_write(k->rbio, data, (int)len) != (int)len) return NHB_ENOMEM;
    if (!k->tls_up) {
      r = proxy_handshake(c);
      if (r < 0 || !k->tls_up || !conn_live(c)) return r;
    }
    char* plain = c->worker->carrier_plain;
    r = 0;
    for (;;) {
      int n = SSL_read(k->ssl, plain, NHB__READ_BUFFER_SIZE);
      if (n > 0) {
        r = carrier_up(c, plain, (size_t)n);
        if (r < 0 || !conn_live(c)) return r;
        continue;
      }
      int err = SSL_get_error(k->ssl, n);
      if (err == SSL_ERROR_WANT_READ) break;
      if (err == SSL_ERROR_ZERO_RETURN) {
        ERR_clear_error();
        nhb__conn_eof(c);
        return 0;
      }
      char reason[320];
      nhb__tls_error_text(reason, sizeof(reason));
      ERR_clear_error();
      if (c->tunnel != 0) {
        nhb__tunnel_count(c, NHB_CTR_TUNNEL_TLS_FAIL, "TLS error from the proxy on CONNECT %s: %s", reason, 0);
        return NHB_EPROXY;
      }
      char text[400];
      snprintf(text, sizeof(text), "TLS error from the proxy: %s", reason);
      nhb__worker_record_error_text(c->worker, NHB_ETLS, text);
      return NHB_ETLS;
    }
  }
  if (r < 0 || !conn_live(c)) return r;
  return carrier_flush(c);
}

static int carrier_alloc(nhb__conn* c) {
  nhb__worker* w = c->worker;
  if (w->carrier_plain == NULL && (w->carrier_plain = malloc(NHB__READ_BUFFER_SIZE)) == NULL) return NHB_ENOMEM;
  nhb__carrier* k = c->carrier;
  if (k == NULL) {
    if ((k = calloc(1, sizeof(*k))) == NULL) return NHB_ENOMEM;
    c->carrier = k;
    if ((k->out = malloc(CARRIER_OUT)) == NULL) return NHB_ENOMEM;
  }
  if (w->run->tunnel.h2 && k->dq == NULL && (k->dq = malloc(CARRIER_DQ)) == NULL) return NHB_ENOMEM;
  return 0;
}

static void carrier_on_connected(nhb__conn* c) {
  uv_os_fd_t fd;
  int r = uv_fileno((const uv_handle_t*)&c->tcp, &fd);
  if (r == 0) r = carrier_alloc(c);
  if (r < 0) {
    nhb__conn_fail(c, r, NHB_CTR_POOL_CONNECTION_FAILURE);
    return;
  }
  c->sock_fd = fd;
  nhb__carrier* k = c->carrier;
  char* out = k->out;
  char* dq = k->dq;
  memset(k, 0, sizeof(*k));
  k->out = out;
  k->dq = dq;
  c->tunnel_start_ns = nhb__now_ns();
  nhb_run* run = c->worker->run;
  if (run->tunnel.ssl_ctx != NULL) {
    const nhb_tls_config* pc = &run->config.proxy_tls;
    k->ssl = SSL_new((SSL_CTX*)run->tunnel.ssl_ctx);
    k->rbio = BIO_new(BIO_s_mem());
    k->wbio = BIO_new(BIO_s_mem());
    if (k->ssl == NULL || k->rbio == NULL || k->wbio == NULL) {
      BIO_free(k->rbio);
      BIO_free(k->wbio);
      k->rbio = k->wbio = NULL;
      SSL_free(k->ssl);
      k->ssl = NULL;
      ERR_clear_error();
      nhb__conn_fail(c, NHB_ENOMEM, NHB_CTR_POOL_CONNECTION_FAILURE);
      return;
    }
    BIO_set_mem_eof_return(k->rbio, -1);
    SSL_set_bio(k->ssl, k->rbio, k->wbio);
    SSL_set_connect_state(k->ssl);
    if (pc->sni != NULL && pc->sni[0] != '\0') SSL_set_tlsext_host_name(k->ssl, pc->sni);
    c->tunnel = NHB__TUNNEL_TLS;
    r = proxy_handshake(c);
  } else {
    r = send_connect(c);
  }
  if (r == 0 && conn_live(c)) r = carrier_flush(c);
  if (r < 0 && conn_live(c)) nhb__conn_fail(c, r, NHB_CTR_POOL_CONNECTION_FAILURE);
}

static int carrier_write(nhb__conn* c, const char* data, size_t len) {
  if (nhb__tunnel_inner(c) == &nhb__transport_tls) return nhb__transport_tls.write(c, data, len);
  int r = nhb__carrier_send(c, data, len);
  if (r == 1) {
    c->write_pending = 1;
    return 0;
  }
  return r;
}

static void carrier_close(nhb__conn* c) {
  nhb__carrier* k = c->carrier;
  const nhb__transport_vtable* inner = nhb__tunnel_inner(c);
  if (inner->close != NULL) inner->close(c);
  if (k == NULL) return;
  if (k->h2 != NULL) nghttp2_session_del(k->h2);
  k->h2 = NULL;
  SSL_free(k->ssl); /* frees its BIOs */
  k->ssl = NULL;
  k->rbio = k->wbio = NULL;
  k->out_len = 0;
  k->plain_len = 0;
  k->plain_waits = 0;
  k->sock_pending = 0;
  k->dq_len = k->dq_off = 0;
  if (k->h3 != NULL) nhb__udp_tunnel_teardown(k->h3);
}

/* ---- the HTTP/3 leg ------------------------------------------------------------------
 *
 * The connection's handle is a UDP socket to the proxy (the pool opens one
 * for a transport with `start`); tunnel_udp.c runs QUIC, the CONNECT and its
 * answer on it, and on a 2xx starts the inner transport, whose bytes come
 * back through carrier_write (TCP) or nhb__carrier_send (TLS). */

static void h3leg_on_connected(nhb__conn* c) {
  /* The pool reports a UDP socket up at once; the tunnel comes up with the
   * proxy's answer. */
  NHB__UNUSED(c);
}

static int h3leg_on_read(nhb__conn* c, const char* data, size_t len) {
  return nhb__udp_tunnel_read(c, c->carrier->h3, data, len);
}

static int h3leg_start(nhb__conn* c, const nhb_sockaddr* to) {
  nhb__carrier* k = c->carrier;
  if (k == NULL) {
    if ((k = calloc(1, sizeof(*k))) == NULL) return NHB_ENOMEM;
    c->carrier = k;
  }
  k->plain_len = 0;
  k->plain_waits = 0;
  int r = k->h3 == NULL ? nhb__udp_tunnel_new(c, &k->h3) : 0;
  if (r == 0) r = nhb__transport_udp.start(c, to);
  if (r < 0) return r;
  struct sockaddr_storage local;
  int len = (int)sizeof(local);
  r = uv_udp_getsockname(&c->udp, (struct sockaddr*)&local, &len);
  uv_os_fd_t fd;
  if (r == 0) r = uv_fileno((const uv_handle_t*)&c->udp, &fd);
  if (r < 0) return r;
  c->sock_fd = fd;
  return nhb__udp_tunnel_stream_start(c, k->h3, (const struct sockaddr*)&local, (size_t)len, to);
}

const nhb__transport_vtable nhb__transport_carried_h3 = {
    "carried-h3", h3leg_on_connected, h3leg_on_read, carrier_write, carrier_close, NULL, h3leg_start,
};

void nhb__carrier_h3_closing(nhb__conn* c) {
  if (c->carrier != NULL && c->carrier->h3 != NULL) nhb__udp_tunnel_stream_closing(c, c->carrier->h3);
}

void nhb__carrier_worker_close(nhb__worker* w) {
  for (uint32_t i = 0; i < w->nconns; i++) {
    nhb__conn* c = &w->conns[i];
    if (c->carrier != NULL && c->carrier->h3 != NULL) nhb__udp_tunnel_stream_close(c, c->carrier->h3, conn_live(c));
  }
}

const nhb__transport_vtable nhb__transport_carried = {
    "carried", carrier_on_connected, carrier_on_read, carrier_write, carrier_close, NULL, NULL,
};

void nhb__carrier_conn_free(nhb__conn* c) {
  if (c->carrier == NULL) return;
  carrier_close(c);
  nhb__udp_tunnel_stream_free(c->carrier->h3);
  free(c->carrier->out);
  free(c->carrier->dq);
  free(c->carrier);
  c->carrier = NULL;
}

void nhb__carrier_worker_free(nhb__worker* w) {
  free(w->carrier_plain);
  w->carrier_plain = NULL;
}

/* ---- the run ----------------------------------------------------------------------- */

static int carrier_error(char* err, size_t err_len, const char* fmt, const char* arg) {
  char reason[256] = "";
  unsigned long e = ERR_peek_last_error();
  if (e != 0) {
    const char* r = ERR_reason_error_string(e);
    if (r != NULL) snprintf(reason, sizeof(reason), " (%s)", r);
  }
  ERR_clear_error();
  if (err != NULL && err_len > 0) {
    char msg[512];
    snprintf(msg, sizeof(msg), fmt, arg);
    snprintf(err, err_len, "%s%s", msg, reason);
  }
  return NHB_EINVAL;
}

static int set_str(const char* s) { return s != NULL && s[0] != '\0'; }

/* The TLS context for a proxy (`pc`; ALPN h2 or http/1.1): this file's, and
 * tunnel_udp_h2.c's for CONNECT-UDP on an HTTP/2 stream. *out is set as
 * soon as the context exists, so that the caller frees it on failure too. */
int nhb__proxy_ssl_ctx(const nhb_tls_config* pc, int h2, void** out, char* err, size_t err_len) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == NULL) return carrier_error(err, err_len, "%s", "proxy_tls: cannot create the TLS context");
  *out = ctx;
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  const unsigned char* alpn = h2 ? (const unsigned char*)"\x02h2" : (const unsigned char*)"\x08http/1.1";
  if (SSL_CTX_set_alpn_protos(ctx, alpn, h2 ? 3 : 9) != 0)
    return carrier_error(err, err_len, "%s", "proxy_tls: OpenSSL refuses the ALPN list");
  if (pc->insecure) {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
  } else {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    if (set_str(pc->cacert)) {
      struct stat st;
      int is_dir = stat(pc->cacert, &st) == 0 && S_ISDIR(st.st_mode);
      if (!SSL_CTX_load_verify_locations(ctx, is_dir ? NULL : pc->cacert, is_dir ? pc->cacert : NULL))
        return carrier_error(err, err_len, "proxy_tls cacert: cannot load CA certificates from '%s'", pc->cacert);
    } else if (!set_str(pc->cert_pem) && !SSL_CTX_set_default_verify_paths(ctx)) {
      return carrier_error(err, err_len, "%s", "proxy_tls: cannot load the system's CA certificates");
    }
    if (set_str(pc->cert_pem)) {
      /* CAs given as PEM text (Nighthawk's trusted_ca.inline_string). */
      BIO* b = BIO_new_mem_buf(pc->cert_pem, -1);
      X509_STORE* store = SSL_CTX_get_cert_store(ctx);
      X509* ca;
      int added = 0;
      while (b != NULL && (ca = PEM_read_bio_X509(b, NULL, NULL, NULL)) != NULL) {
        added += X509_STORE_add_cert(store, ca) == 1;
        X509_free(ca);
      }
      BIO_free(b);
      ERR_clear_error(); /* the end of the text is a "no start line" */
      if (added == 0) return carrier_error(err, err_len, "%s", "proxy_tls cacert_pem: no PEM certificate in it");
    }
    if (set_str(pc->verify_name)) {
      X509_VERIFY_PARAM* param = SSL_CTX_get0_param(ctx);
      unsigned char ip[16];
      int is_ip = inet_pton(AF_INET, pc->verify_name, ip) == 1 || inet_pton(AF_INET6, pc->verify_name, ip) == 1;
      X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
      int ok = is_ip ? X509_VERIFY_PARAM_set1_ip_asc(param, pc->verify_name)
                     : X509_VERIFY_PARAM_set1_host(param, pc->verify_name, 0);
      if (!ok) return carrier_error(err, err_len, "proxy_tls: cannot check the certificate against '%s'", pc->verify_name);
    }
  }
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_TICKET);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  return 0;
}

static nghttp2_nv nv(const char* name, size_t nlen, const char* value, size_t vlen) {
  nghttp2_nv v = {(uint8_t*)name, (uint8_t*)value, nlen, vlen, NGHTTP2_NV_FLAG_NONE};
  return v;
}

/* Each target's HTTP/2 CONNECT header block, from its HTTP/1.1 request head:
 * :method CONNECT, :authority (the request target), then the head's fields
 * but Host, names lower-cased (RFC 9113 section 8.2.2 and 8.5). */
static int h2_blocks(nhb_run* run, char* err, size_t err_len) {
  nhb__run_tunnel* t = &run->tunnel;
  size_t fields = 0, bytes = 0;
  for (uint32_t i = 0; i < t->n; i++) {
    for (size_t j = 0; j + 1 < t->request_len[i]; j++)
      if (t->request[i][j] == '\r' && t->request[i][j + 1] == '\n') fields++;
    bytes += t->request_len[i];
  }
  nghttp2_nv* nva = calloc(fields + 2 * t->n, sizeof(*nva));
  t->h2_nvoff = calloc(t->n + 1, sizeof(*t->h2_nvoff));
  t->h2_strings = malloc(bytes + 1);
  t->h2_nva = nva;
  if (nva == NULL || t->h2_nvoff == NULL || t->h2_strings == NULL) return NHB_ENOMEM;
  char* names = t->h2_strings;
  size_t n = 0;
  for (uint32_t i = 0; i < t->n; i++) {
    t->h2_nvoff[i] = n;
    nva[n++] = nv(":method", 7, "CONNECT", 7);
    nva[n++] = nv(":authority", 10, t->authority[i], strlen(t->authority[i]));
    const char* p = memchr(t->request[i], '\n', t->request_len[i]);
    const char* end = t->request[i] + t->request_len[i];
    while (p != NULL && ++p < end) {
      const char* eol = memchr(p, '\r', (size_t)(end - p));
      if (eol == NULL || eol == p) break;
      const char* colon = memchr(p, ':', (size_t)(eol - p));
      if (colon == NULL) {
        if (err != NULL && err_len > 0) snprintf(err, err_len, "tunnel_requests: a header line without ':'");
        return NHB_EINVAL;
      }
      size_t nlen = (size_t)(colon - p);
      const char* v = colon + 1;
      while (v < eol && (*v == ' ' || *v == '\t')) v++;
      if (!(nlen == 4 && strncasecmp(p, "host", 4) == 0)) {
        for (size_t m = 0; m < nlen; m++) names[m] = (char)(p[m] >= 'A' && p[m] <= 'Z' ? p[m] + 32 : p[m]);
        nva[n++] = nv(names, nlen, v, (size_t)(eol - v));
        names += nlen;
      }
      p = memchr(eol, '\n', (size_t)(end - eol));
    }
  }
  t->h2_nvoff[t->n] = n;
  nghttp2_session_callbacks* cb = NULL;
  nghttp2_option* opt = NULL;
  if (nghttp2_session_callbacks_new(&cb) != 0) return NHB_ENOMEM;
  t->h2_callbacks = cb;
  if (nghttp2_option_new(&opt) != 0) return NHB_ENOMEM;
  t->h2_option = opt;
  /* A CONNECT's answer is checked here (h2_on_header, h2_answer). */
  nghttp2_option_set_no_http_messaging(opt, 1);
  nghttp2_session_callbacks_set_send_callback(cb, h2_send_cb);
  nghttp2_session_callbacks_set_on_begin_headers_callback(cb, h2_on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(cb, h2_on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, h2_on_frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, h2_on_data);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, h2_on_stream_close);
  nghttp2_session_callbacks_set_on_frame_send_callback(cb, h2_on_frame_send);
  return 0;
}

int nhb__carrier_run_init(nhb_run* run, char* err, size_t err_len) {
  const nhb_client_config* cfg = &run->config;
  nhb__run_tunnel* t = &run->tunnel;
  if (cfg->proxy_protocol < 0 || cfg->proxy_protocol > 3) {
    if (err != NULL && err_len > 0) snprintf(err, err_len, "proxy_protocol: 1 (HTTP/1.1), 2 (HTTP/2) or 3 (HTTP/3)");
    return NHB_EINVAL;
  }
  if (cfg->proxy_protocol == 3) {
    /* QUIC is TLS (GnuTLS's, as the HTTP/3 client's): no OpenSSL context. */
    if (!cfg->proxy_tls.enabled) {
      if (err != NULL && err_len > 0) snprintf(err, err_len, "proxy_protocol 3 (HTTP/3): needs proxy_tls");
      return NHB_EINVAL;
    }
    t->h3 = 1;
    t->carried = 1;
    return nhb__udp_tunnel_stream_run_init(run, err, err_len);
  }
  t->h2 = cfg->proxy_protocol == 2;
  t->carried = t->h2 || cfg->proxy_tls.enabled;
  if (!t->carried) return 0;
  if (cfg->proxy_tls.enabled) {
    int r = nhb__proxy_ssl_ctx(&cfg->proxy_tls, t->h2, &t->ssl_ctx, err, err_len);
    if (r < 0) return r;
  }
  return t->h2 ? h2_blocks(run, err, err_len) : 0;
}

void nhb__carrier_run_free(nhb_run* run) {
  nhb__run_tunnel* t = &run->tunnel;
  nhb__udp_tunnel_stream_run_free(run);
  if (t->ssl_ctx != NULL) SSL_CTX_free((SSL_CTX*)t->ssl_ctx);
  if (t->h2_callbacks != NULL) nghttp2_session_callbacks_del((nghttp2_session_callbacks*)t->h2_callbacks);
  if (t->h2_option != NULL) nghttp2_option_del((nghttp2_option*)t->h2_option);
  free(t->h2_nva);
  free(t->h2_nvoff);
  free(t->h2_strings);
  t->ssl_ctx = t->h2_callbacks = t->h2_option = t->h2_nva = NULL;
  t->h2_nvoff = NULL;
  t->h2_strings = NULL;
}
