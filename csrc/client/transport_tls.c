/* transport_tls.c: TLS through OpenSSL, without ever blocking the loop.
 *
 * OpenSSL never touches the socket. Each connection's SSL object reads and
 * writes ciphertext through one BIO of this file's own kind: reads
 * come straight from the bytes the socket delivered (the "window", set for
 * the duration of tls_on_read) and are decrypted with SSL_read(); plaintext is
 * encrypted with SSL_write() and the ciphertext lands directly in the
 * connection's output buffer, which is written with uv_try_write() (uv_write()
 * for what would block). A memory BIO would cost a copy and a buffer update
 * each way per record. Ciphertext produced while the output buffer is on its
 * way to the socket (or would not fit) waits in a spill memory BIO, in order.
 * The handshake runs the same way, one step per arrival of bytes, so no call
 * ever waits.
 *
 * One SSL_CTX is built per run (nhb__tls_ctx_create) and shared read-only by
 * the workers. With --tls-session-reuse each worker keeps the last session the
 * server gave it and offers it on every new connection; without, every
 * connection makes a full handshake (the lab practice).
 */
#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/stat.h>

#include "client/client.h"
#include "common/tls_common.h"

/* Ciphertext on its way to the socket. Kept per connection entry and reused by
 * every connection it makes, so sending never allocates. */
#define TLS_OUT_SIZE 65536
/* Plaintext is encrypted in chunks of three full records, whose ciphertext
 * fits the output buffer, so a large body goes out in large writes without
 * piling up in the BIO. */
#define TLS_PLAIN_CHUNK (3 * 16384)

struct nhb__tls {
  SSL* ssl;
  BIO* bio;   /* the SSL's read and write BIO (tls_bio_method), owned by ssl */
  BIO* spill; /* a memory BIO: ciphertext that could not go into `out` yet */
  const char* in; /* the window: ciphertext from the socket not yet read by OpenSSL */
  size_t in_len;
  char* out; /* TLS_OUT_SIZE bytes */
  size_t out_len; /* ciphertext in `out` not yet handed to the socket */
  const char* plain; /* plaintext handed to tls_write() and not yet encrypted */
  size_t plain_len;
  int sock_pending; /* a uv_write of `out` is outstanding */
  int handshake_done;
  int renegotiation_refused; /* the server asked for a renegotiation and was told no */
  uint64_t connected_ns;
};

static void tls_write_done(uv_write_t* req, int status);

/* ---- the BIO --------------------------------------------------------------- */

/* Reads: what is left of the window, or "retry" (SSL_ERROR_WANT_READ) when it
 * is used up. OpenSSL keeps a partial record in its own buffer, so the window
 * may end anywhere. */
static int tls_bio_read(BIO* b, char* buf, int len) {
  nhb__tls* t = (nhb__tls*)BIO_get_data(b);
  BIO_clear_retry_flags(b);
  if (len <= 0) return 0;
  if (t->in_len == 0) {
    BIO_set_retry_read(b);
    return -1;
  }
  size_t n = (size_t)len < t->in_len ? (size_t)len : t->in_len;
  memcpy(buf, t->in, n);
  t->in += n;
  t->in_len -= n;
  return (int)n;
}

/* Writes: appended to `out` while it is idle, has room and nothing spilled
 * before (so bytes keep their order); otherwise to the spill BIO, which
 * tls_pump() drains into `out` later. */
static int tls_bio_write(BIO* b, const char* data, int len) {
  nhb__tls* t = (nhb__tls*)BIO_get_data(b);
  BIO_clear_retry_flags(b);
  if (len <= 0) return 0;
  if (!t->sock_pending && t->spill == NULL && (size_t)len <= TLS_OUT_SIZE - t->out_len) {
    memcpy(t->out + t->out_len, data, (size_t)len);
    t->out_len += (size_t)len;
    return len;
  }
  if (t->spill == NULL) {
    if ((t->spill = BIO_new(BIO_s_mem())) == NULL) return -1;
    BIO_set_mem_eof_return(t->spill, -1);
  }
  return BIO_write(t->spill, data, len);
}

static long tls_bio_ctrl(BIO* b, int cmd, long num, void* ptr) {
  NHB__UNUSED(num);
  NHB__UNUSED(ptr);
  nhb__tls* t = (nhb__tls*)BIO_get_data(b);
  switch (cmd) {
    case BIO_CTRL_FLUSH: /* OpenSSL flushes after each handshake flight: nothing to do */
      return 1;
    case BIO_CTRL_PENDING:
      return (long)t->in_len;
    default: /* no kTLS, no dgram, no duplication */
      return 0;
  }
}

static int tls_bio_create(BIO* b) {
  BIO_set_init(b, 1);
  return 1;
}

static BIO_METHOD* tls_bio_method_ptr;
static pthread_once_t tls_bio_once = PTHREAD_ONCE_INIT;

/* Built once per process and never freed (OpenSSL's own methods are static
 * too); NULL if OpenSSL could not build it. */
static void tls_bio_method_init(void) {
  BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "nhbench client");
  if (m == NULL) return;
  if (!BIO_meth_set_read(m, tls_bio_read) || !BIO_meth_set_write(m, tls_bio_write) ||
      !BIO_meth_set_ctrl(m, tls_bio_ctrl) || !BIO_meth_set_create(m, tls_bio_create)) {
    BIO_meth_free(m);
    return;
  }
  tls_bio_method_ptr = m;
}

static const BIO_METHOD* tls_bio_method(void) {
  pthread_once(&tls_bio_once, tls_bio_method_init);
  return tls_bio_method_ptr;
}

/* ---- errors --------------------------------------------------------------- */

/* Describes the failure of the last OpenSSL call in one line: the verification
 * result when the certificate was rejected ("certificate verify failed:
 * self-signed certificate"), else OpenSSL's error string. */
static void tls_describe(nhb__conn* c, const char* what, char* text, size_t len) {
  nhb__tls* t = c->tls;
  const nhb_tls_config* tc = &c->worker->run->config.tls;
  long verify = t && t->ssl ? SSL_get_verify_result(t->ssl) : X509_V_OK;
  unsigned long e = ERR_peek_last_error();
  if (verify != X509_V_OK && !tc->insecure) {
    if (verify == X509_V_ERR_HOSTNAME_MISMATCH || verify == X509_V_ERR_IP_ADDRESS_MISMATCH) {
      snprintf(text, len, "%s: certificate verify failed: %s (the certificate is not valid for '%s')",
               what, X509_verify_cert_error_string(verify), tc->verify_name ? tc->verify_name : "");
    } else {
      snprintf(text, len, "%s: certificate verify failed: %s", what, X509_verify_cert_error_string(verify));
    }
  } else if (e != 0) {
    char reason[320];
    nhb__tls_error_text(reason, sizeof(reason));
    snprintf(text, len, "%s: %s", what, reason);
  } else {
    snprintf(text, len, "%s: the server closed the connection", what);
  }
  ERR_clear_error();
}

static int tls_pump(nhb__conn* c);

static void tls_fail_handshake(nhb__conn* c) {
  nhb__worker* w = c->worker;
  char text[sizeof(w->first_error_text)];
  tls_describe(c, "TLS handshake failed", text, sizeof(text));
  /* Send the alert that tells the server why (best effort), then give up. */
  tls_pump(c);
  w->stats.counters[NHB_CTR_SSL_CONNECTION_ERROR]++;
  nhb__worker_record_error_text(w, NHB_ETLS, text);
  nhb__conn_fail(c, NHB_ETLS, NHB_CTR_POOL_CONNECTION_FAILURE);
}

/* An error after the handshake (a bad record, an alert): the caller closes the
 * connection; the run keeps OpenSSL's reason. */
/* Is OpenSSL's pending error an alert by which the server refused the client
 * certificate (or its absence)? Under TLS 1.3 the client's handshake is over
 * before the server has checked the certificate, so the refusal arrives as an
 * alert on the first read: still a failed handshake, counted as one. */
static int client_cert_refused(void) {
  unsigned long e = ERR_peek_last_error();
  if (ERR_GET_LIB(e) != ERR_LIB_SSL) return 0;
  switch (ERR_GET_REASON(e)) {
    case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
    case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_REVOKED:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
    case SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE:
    case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
      return 1;
    default:
      return 0;
  }
}

static int tls_fail_io(nhb__conn* c) {
  char text[sizeof(c->worker->first_error_text)];
  if (client_cert_refused()) {
    const nhb_tls_config* tc = &c->worker->run->config.tls;
    tls_describe(c,
                 tc->cert_pem != NULL ? "TLS handshake failed: the server refused the client certificate"
                                      : "TLS handshake failed: the server requires a client certificate (--cert, --key)",
                 text, sizeof(text));
    c->worker->stats.counters[NHB_CTR_SSL_CONNECTION_ERROR]++;
    nhb__worker_record_error_text(c->worker, NHB_ETLS, text);
    return NHB_ETLS;
  }
  /* A server that insists on renegotiating usually ends the connection with
   * a fatal alert once it is refused; its reason alone ("handshake failure")
   * would not say why. */
  tls_describe(c,
               c->tls->renegotiation_refused
                   ? "TLS error after the server asked to renegotiate (refused: nhbench never renegotiates)"
                   : "TLS error",
               text, sizeof(text));
  nhb__worker_record_error_text(c->worker, NHB_ETLS, text);
  return NHB_ETLS;
}

/* ---- output --------------------------------------------------------------- */

/* Hands the first `len` bytes of `out` to the socket; `out` is busy until
 * they are gone (sock_pending). */
static int tls_sock_write(nhb__conn* c, size_t len) {
  nhb__tls* t = c->tls;
  t->out_len = 0;
  /* Inside a tunnel over TLS to the proxy, HTTP/2 or HTTP/3, the proxy leg
   * takes the ciphertext in place of the socket (carrier.c). */
  if (NHB__UNLIKELY(c->carrier != NULL)) {
    int r = nhb__carrier_send(c, t->out, len);
    if (r == 1) {
      t->sock_pending = 1;
      return 0;
    }
    return r;
  }
  uv_stream_t* stream = (uv_stream_t*)&c->tcp;
  uv_buf_t buf = uv_buf_init(t->out, (unsigned)len);
  c->worker->stats.counters[NHB_CTR_UPSTREAM_CX_TX_BYTES_TOTAL] += len;
  int n = uv_try_write(stream, &buf, 1);
  if (n == (int)len) return 0;
  if (n < 0 && n != UV_EAGAIN) return n;
  if (n < 0) n = 0;
  buf = uv_buf_init(t->out + n, (unsigned)(len - (size_t)n));
  int r = uv_write(&c->write_req, stream, &buf, 1, tls_write_done);
  if (r == 0) t->sock_pending = 1;
  return r;
}

/* Moves ciphertext to the socket and encrypts pending plaintext, until both
 * are done or the socket is full. */
static int tls_pump(nhb__conn* c) {
  nhb__tls* t = c->tls;
  int r = 0;
  while (!t->sock_pending) {
    if (t->out_len > 0) {
      if ((r = tls_sock_write(c, t->out_len)) < 0) break;
      continue;
    }
    if (t->spill != NULL) {
      /* Spilled ciphertext goes out before anything newer. */
      int n = BIO_read(t->spill, t->out, TLS_OUT_SIZE);
      if (n > 0) {
        t->out_len = (size_t)n;
        continue;
      }
      BIO_free(t->spill);
      t->spill = NULL;
    }
    if (t->plain_len == 0) break;
    size_t chunk = t->plain_len < TLS_PLAIN_CHUNK ? t->plain_len : TLS_PLAIN_CHUNK;
    /* SSL_write could only want to read during a renegotiation (which the
     * client refuses, see nhb__tls_ctx_create) or a post-handshake
     * authentication (which it does not offer), and the BIO never refuses a
     * write: a failure here is a real error. */
    int m = SSL_write(t->ssl, t->plain, (int)chunk);
    if (m <= 0) {
      r = tls_fail_io(c);
      break;
    }
    t->plain += m;
    t->plain_len -= (size_t)m;
  }
  c->write_pending = t->sock_pending || t->plain_len > 0;
  return r;
}

static void tls_written(nhb__conn* c, int status) {
  nhb__tls* t = c->tls;
  t->sock_pending = 0;
  if (status == UV_ECANCELED || (c->state != NHB__CX_READY && c->state != NHB__CX_CONNECTING)) return;
  if (status == 0) status = tls_pump(c);
  if (status < 0) {
    nhb__conn_fail(c, status, c->state == NHB__CX_CONNECTING ? NHB_CTR_POOL_CONNECTION_FAILURE
                                                             : NHB_CTR_STREAM_RESETS);
    return;
  }
  if (!c->write_pending && c->state == NHB__CX_READY && c->session->on_writable) c->session->on_writable(c);
}

static void tls_write_done(uv_write_t* req, int status) { tls_written((nhb__conn*)req->handle->data, status); }

void nhb__tls_carried_written(nhb__conn* c) {
  if (c->tls != NULL) tls_written(c, 0);
}

static int tls_write(nhb__conn* c, const char* data, size_t len) {
  nhb__tls* t = c->tls;
  if (t->plain_len > 0) return NHB_ESTATE; /* one write at a time */
  t->plain = data;
  t->plain_len = len;
  return tls_pump(c);
}

/* ---- handshake ------------------------------------------------------------- */

/* The handshake is over: statistics, the ALPN check, and plaintext may flow. */
static void tls_established(nhb__conn* c) {
  nhb__worker* w = c->worker;
  nhb__tls* t = c->tls;
  const nhb_client_config* cfg = &w->run->config;
  t->handshake_done = 1;
  w->stats.counters[NHB_CTR_SSL_HANDSHAKE]++;
  if (SSL_session_reused(t->ssl)) w->stats.counters[NHB_CTR_SSL_SESSION_REUSED]++;
  nhb_hist_record(w->stats.hists[NHB_HIST_TLS_HANDSHAKE], nhb__now_ns() - t->connected_ns);
  /* The session must speak what the server agreed to: HTTP/2 needs "h2"
   * (there is no other way to know a TLS server speaks it), and a server that
   * picked another protocol than the run's would not understand its bytes. */
  const unsigned char* sel = NULL;
  unsigned sel_len = 0;
  SSL_get0_alpn_selected(t->ssl, &sel, &sel_len);
  const char* want = cfg->protocol == NHB_PROTO_HTTP2 ? "h2" : "http/1.1";
  int mismatch = sel_len > 0 ? (sel_len != strlen(want) || memcmp(sel, want, sel_len) != 0)
                             : cfg->protocol == NHB_PROTO_HTTP2;
  if (mismatch) {
    char text[sizeof(w->first_error_text)];
    if (sel_len > 0) {
      snprintf(text, sizeof(text), "ALPN: the server selected '%.*s', but the run speaks %s",
               (int)sel_len, (const char*)sel, want);
    } else {
      snprintf(text, sizeof(text),
               "ALPN: the server did not select h2 (it does not offer HTTP/2 over TLS on this port)");
    }
    w->stats.counters[NHB_CTR_UPSTREAM_CX_PROTOCOL_ERROR]++;
    nhb__worker_record_error_text(w, NHB_EPROTO, text);
    nhb__conn_fail(c, NHB_EPROTO, NHB_CTR_POOL_CONNECTION_FAILURE);
    return;
  }
  nhb__conn_ready(c);
}

/* Runs one step of the handshake. Returns 0 (even when the handshake failed
 * and the connection was closed), or a negative code for an I/O error. */
static int tls_handshake(nhb__conn* c) {
  nhb__tls* t = c->tls;
  int r = SSL_do_handshake(t->ssl);
  int err = r == 1 ? SSL_ERROR_NONE : SSL_get_error(t->ssl, r);
  if (err != SSL_ERROR_NONE && err != SSL_ERROR_WANT_READ) {
    tls_fail_handshake(c);
    return 0;
  }
  int w = tls_pump(c);
  if (w < 0) return w;
  if (err == SSL_ERROR_NONE) tls_established(c);
  return 0;
}

static void tls_on_connected(nhb__conn* c) {
  nhb__worker* w = c->worker;
  nhb_run* run = w->run;
  const nhb_tls_config* tc = &run->config.tls;
  nhb__tls* t = c->tls;
  if (w->tls_plain == NULL && (w->tls_plain = malloc(NHB__READ_BUFFER_SIZE)) == NULL) {
    nhb__conn_fail(c, NHB_ENOMEM, NHB_CTR_POOL_CONNECTION_FAILURE);
    return;
  }
  if (t == NULL) {
    t = calloc(1, sizeof(*t));
    if (t != NULL && (t->out = malloc(TLS_OUT_SIZE)) == NULL) {
      free(t);
      t = NULL;
    }
    if (t == NULL) {
      nhb__conn_fail(c, NHB_ENOMEM, NHB_CTR_POOL_CONNECTION_FAILURE);
      return;
    }
    c->tls = t;
  }
  t->plain_len = 0;
  t->sock_pending = 0;
  t->handshake_done = 0;
  t->renegotiation_refused = 0;
  t->in_len = 0;
  t->out_len = 0;
  t->connected_ns = nhb__now_ns();
  const BIO_METHOD* method = tls_bio_method();
  t->ssl = method != NULL ? SSL_new((SSL_CTX*)run->ssl_ctx) : NULL;
  t->bio = t->ssl != NULL ? BIO_new(method) : NULL;
  if (t->bio == NULL) {
    SSL_free(t->ssl);
    t->ssl = NULL;
    ERR_clear_error();
    nhb__conn_fail(c, NHB_ENOMEM, NHB_CTR_POOL_CONNECTION_FAILURE);
    return;
  }
  BIO_set_data(t->bio, t);
  SSL_set_bio(t->ssl, t->bio, t->bio); /* one BIO both ways: ssl takes the one reference */
  SSL_set_connect_state(t->ssl);
  SSL_set_app_data(t->ssl, c);
  if (tc->sni != NULL && tc->sni[0] != '\0') SSL_set_tlsext_host_name(t->ssl, tc->sni);
  if (tc->session_reuse && w->tls_session != NULL) SSL_set_session(t->ssl, (SSL_SESSION*)w->tls_session);
  int r = tls_handshake(c);
  if (r < 0 && c->state == NHB__CX_CONNECTING) nhb__conn_fail(c, r, NHB_CTR_POOL_CONNECTION_FAILURE);
}

/* ---- input ----------------------------------------------------------------- */

/* Decrypts the window. Every path that returns with some of it unread closes
 * the connection (or has closed it), so nothing is lost with it. */
static int tls_read_window(nhb__conn* c) {
  nhb__tls* t = c->tls;
  char* plain = c->worker->tls_plain;
  if (!t->handshake_done) {
    int r = tls_handshake(c);
    if (r < 0) return r;
    if (c->state != NHB__CX_READY) return 0;
  }
  for (;;) {
    int n = SSL_read(t->ssl, plain, NHB__READ_BUFFER_SIZE);
    if (n > 0) {
      int r = c->session->on_data(c, plain, (size_t)n);
      if (r < 0) return r;
      if (c->state != NHB__CX_READY) return 0;
      /* Nothing left to decrypt: another SSL_read would only report
       * SSL_ERROR_WANT_READ, which costs a full pass through OpenSSL. With
       * read-ahead the window's records wait in OpenSSL's buffer, not only
       * decrypted plaintext (SSL_pending), so SSL_has_pending asks for both. */
      if (t->in_len == 0 && !SSL_has_pending(t->ssl)) break;
      continue;
    }
    int err = SSL_get_error(t->ssl, n);
    if (err == SSL_ERROR_WANT_READ) break;
    if (err == SSL_ERROR_ZERO_RETURN) {
      /* close_notify: the server ended the connection cleanly. */
      ERR_clear_error();
      c->worker->stats.counters[NHB_CTR_UPSTREAM_CX_DESTROY_REMOTE]++;
      nhb__conn_eof(c);
      return 0;
    }
    return tls_fail_io(c);
  }
  /* Reading can produce output too (a KeyUpdate answer). */
  return c->write_pending ? 0 : tls_pump(c);
}

/* The socket's bytes (in the connection's read buffer) are OpenSSL's input
 * for this call only: the window closes when it returns. The plaintext goes
 * to the worker's own buffer, as the read buffer still holds ciphertext not
 * yet read; sessions handle their bytes before returning, so one buffer
 * serves every connection of the worker. */
static int tls_on_read(nhb__conn* c, const char* data, size_t len) {
  nhb__tls* t = c->tls;
  t->in = data;
  t->in_len = len;
  int r = tls_read_window(c);
  t->in_len = 0;
  return r;
}

static void tls_close(nhb__conn* c) {
  nhb__tls* t = c->tls;
  if (t == NULL || t->ssl == NULL) return;
  /* OpenSSL marks the session of a connection freed without a shutdown as not
   * resumable; the connection may close for ordinary reasons (a request
   * limit, the server's), so it is declared shut down and the worker's saved
   * session stays usable. */
  SSL_set_shutdown(t->ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
  SSL_free(t->ssl); /* frees the BIO */
  t->ssl = NULL;
  t->bio = NULL;
  BIO_free(t->spill); /* ciphertext for a connection that is gone */
  t->spill = NULL;
  t->in_len = 0;
  t->out_len = 0;
  t->plain_len = 0;
  t->sock_pending = 0;
}

const nhb__transport_vtable nhb__transport_tls = {
    "tls",
    tls_on_connected,
    tls_on_read,
    tls_write,
    tls_close,
    NULL,
    NULL,
};

void nhb__tls_conn_free(nhb__conn* c) {
  if (c->tls == NULL) return;
  tls_close(c);
  free(c->tls->out);
  free(c->tls);
  c->tls = NULL;
}

void nhb__tls_worker_free(nhb__worker* w) {
  free(w->tls_plain);
  w->tls_plain = NULL;
  if (w->tls_session != NULL) SSL_SESSION_free((SSL_SESSION*)w->tls_session);
  w->tls_session = NULL;
}

/* ---- the run's SSL_CTX ----------------------------------------------------- */

/* A new session from the server (TLS 1.3 sends them after the handshake):
 * the worker keeps the latest one to resume on its next connections. */
static int tls_new_session(SSL* ssl, SSL_SESSION* session) {
  nhb__conn* c = (nhb__conn*)SSL_get_app_data(ssl);
  if (c == NULL) return 0;
  nhb__worker* w = c->worker;
  if (w->tls_session != NULL) SSL_SESSION_free((SSL_SESSION*)w->tls_session);
  w->tls_session = session;
  return 1; /* the reference is ours */
}

/* OpenSSL reports alerts and handshake steps here, never application
 * records, so requests do not pay for it. The one event of interest is the
 * client's refusal of a renegotiation (a no_renegotiation warning alert, sent
 * from inside SSL_read when a TLS 1.2 server's HelloRequest arrives): the
 * connection remembers it so that the error the server may end it with names
 * the reason. */
static void tls_info(const SSL* ssl, int where, int ret) {
  if (!(where & SSL_CB_WRITE_ALERT) || ret != (SSL3_AL_WARNING << 8 | SSL_AD_NO_RENEGOTIATION)) return;
  nhb__conn* c = (nhb__conn*)SSL_get_app_data(ssl);
  if (c != NULL && c->tls != NULL) c->tls->renegotiation_refused = 1;
}

static int set_str(const char* s) { return s != NULL && s[0] != '\0'; }

/* The key's passphrase, when one was given; never a prompt (OpenSSL's default
 * would ask on the terminal): without it an encrypted key fails to load. */
static int key_password(char* buf, int size, int rwflag, void* userdata) {
  (void)rwflag;
  const char* pass = userdata;
  if (pass == NULL || size <= 0) return 0;
  size_t n = strlen(pass);
  if (n > (size_t)size) return -1;
  memcpy(buf, pass, n);
  return (int)n;
}

static int ctx_error(char* err, size_t err_len, const char* fmt, const char* arg) {
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

/* The certificate chain (the leaf first) and its key, from PEM text: -1 the
 * certificates, -2 the key, -3 a key that is not the certificate's. */
static int use_client_cert(SSL_CTX* ctx, const nhb_tls_config* tc) {
  BIO* b = BIO_new_mem_buf(tc->cert_pem, -1);
  X509* leaf = b != NULL ? PEM_read_bio_X509_AUX(b, NULL, NULL, NULL) : NULL;
  int ok = leaf != NULL && SSL_CTX_use_certificate(ctx, leaf) == 1;
  X509_free(leaf);
  X509* ca;
  while (ok && (ca = PEM_read_bio_X509(b, NULL, NULL, NULL)) != NULL) {
    if (!SSL_CTX_add0_chain_cert(ctx, ca)) {
      X509_free(ca);
      ok = 0;
    }
  }
  BIO_free(b);
  if (!ok) return -1;
  ERR_clear_error(); /* the end of the chain is a "no start line" */
  b = BIO_new_mem_buf(tc->key_pem, -1);
  EVP_PKEY* key = b != NULL ? PEM_read_bio_PrivateKey(b, NULL, key_password, (void*)tc->key_passphrase) : NULL;
  BIO_free(b);
  ok = key != NULL && SSL_CTX_use_PrivateKey(ctx, key) == 1;
  EVP_PKEY_free(key);
  if (!ok) return -2;
  return SSL_CTX_check_private_key(ctx) ? 0 : -3;
}

int nhb__tls_ctx_create(nhb_run* run, char* err, size_t err_len) {
  const nhb_client_config* cfg = &run->config;
  const nhb_tls_config* tc = &cfg->tls;
  /* HTTP/3's handshake is GnuTLS's (session_h3.c builds and checks its own
   * credentials, the CA file included): no OpenSSL context for it. */
  if (!tc->enabled || cfg->protocol == NHB_PROTO_HTTP3) return 0;
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == NULL) return ctx_error(err, err_len, "%s", "cannot create the TLS context");
  run->ssl_ctx = ctx;
  if (!SSL_CTX_set_min_proto_version(ctx, tc->min_version ? tc->min_version : TLS1_2_VERSION))
    return ctx_error(err, err_len, "%s", "tls min_version: not supported by this OpenSSL");
  if (tc->max_version && !SSL_CTX_set_max_proto_version(ctx, tc->max_version))
    return ctx_error(err, err_len, "%s", "tls max_version: not supported by this OpenSSL");
  if (set_str(tc->ciphers) && !SSL_CTX_set_cipher_list(ctx, tc->ciphers))
    return ctx_error(err, err_len, "tls ciphers: OpenSSL accepts none of '%s'", tc->ciphers);
  if (set_str(tc->ciphersuites) && !SSL_CTX_set_ciphersuites(ctx, tc->ciphersuites))
    return ctx_error(err, err_len, "tls ciphersuites: OpenSSL does not accept '%s'", tc->ciphersuites);
  if (set_str(tc->groups) && !SSL_CTX_set1_groups_list(ctx, tc->groups))
    return ctx_error(err, err_len, "tls groups: OpenSSL does not accept '%s'", tc->groups);

  /* ALPN: what the user asked for, else the run's protocol. */
  const char* alpn = set_str(tc->alpn) ? tc->alpn : cfg->protocol == NHB_PROTO_HTTP2 ? "h2" : "http/1.1";
  unsigned char wire[256];
  size_t wire_len = 0;
  if (nhb__tls_alpn_wire(alpn, wire, sizeof(wire), &wire_len) < 0)
    return ctx_error(err, err_len, "tls alpn: not a comma-separated list of protocol ids: '%s'", alpn);
  /* Unlike most of OpenSSL, this one returns 0 on success. */
  if (SSL_CTX_set_alpn_protos(ctx, wire, (unsigned)wire_len) != 0)
    return ctx_error(err, err_len, "tls alpn: OpenSSL does not accept '%s'", alpn);

  /* Verification is on unless --insecure says otherwise; Nighthawk never
   * verifies, nhbench does by default. */
  if (tc->insecure) {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
  } else {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    if (set_str(tc->cacert)) {
      struct stat st;
      int is_dir = stat(tc->cacert, &st) == 0 && S_ISDIR(st.st_mode);
      if (!SSL_CTX_load_verify_locations(ctx, is_dir ? NULL : tc->cacert, is_dir ? tc->cacert : NULL))
        return ctx_error(err, err_len, "cacert: cannot load CA certificates from '%s'", tc->cacert);
    } else if (!SSL_CTX_set_default_verify_paths(ctx)) {
      return ctx_error(err, err_len, "%s", "cannot load the system's CA certificates");
    }
    /* The host name check is set once on the context; every SSL_new() copies
     * it, so connections pay nothing for it. */
    if (set_str(tc->verify_name)) {
      X509_VERIFY_PARAM* param = SSL_CTX_get0_param(ctx);
      unsigned char ip[16];
      int is_ip = inet_pton(AF_INET, tc->verify_name, ip) == 1 || inet_pton(AF_INET6, tc->verify_name, ip) == 1;
      X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
      int ok = is_ip ? X509_VERIFY_PARAM_set1_ip_asc(param, tc->verify_name)
                     : X509_VERIFY_PARAM_set1_host(param, tc->verify_name, 0);
      if (!ok) return ctx_error(err, err_len, "tls: cannot check the certificate against '%s'", tc->verify_name);
    }
  }

  /* The client certificate: loaded once here, sent by every connection whose
   * server asks for one (a CertificateRequest); connections pay nothing more
   * when none asks. Resumed sessions keep the client's identity. */
  if (set_str(tc->cert_pem) || set_str(tc->key_pem)) {
    if (!set_str(tc->cert_pem) || !set_str(tc->key_pem))
      return ctx_error(err, err_len, "%s", "tls: a client certificate needs both cert and key");
    int r = use_client_cert(ctx, tc);
    if (r < 0) return r == -1 ? ctx_error(err, err_len, "%s", "cert: cannot load the PEM certificate (chain)")
                    : r == -2 ? ctx_error(err, err_len, "%s", "key: cannot load the PEM private key")
                              : ctx_error(err, err_len, "%s", "key: the key does not match the certificate");
  }

  /* A server-initiated renegotiation (TLS 1.2 HelloRequest) is refused with a
   * no_renegotiation warning alert, as Envoy's client does by default
   * (allow_renegotiation: false) and so Nighthawk; HTTP/2 forbids
   * renegotiation outright (RFC 9113, 9.2.1). Whether the connection goes on
   * is the server's choice: OpenSSL's server ends it with a fatal alert. */
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
  SSL_CTX_set_info_callback(ctx, tls_info);
  /* Read-ahead: OpenSSL takes as much of the window as its record buffer
   * holds in one BIO read, instead of a header and a body read per record
   * (docs/benchmarks.md). */
  SSL_CTX_set_read_ahead(ctx, 1);

  if (tc->session_reuse) {
    /* The workers keep their sessions themselves (no shared cache, no lock). */
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(ctx, tls_new_session);
  } else {
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
  }
  return 0;
}

void nhb__tls_ctx_free(nhb_run* run) {
  if (run->ssl_ctx != NULL) SSL_CTX_free((SSL_CTX*)run->ssl_ctx);
  run->ssl_ctx = NULL;
  /* The key and its passphrase are in the run's string block (copy_strings):
   * wiped before that is freed. */
  char* secret[] = {(char*)run->config.tls.key_pem, (char*)run->config.tls.key_passphrase};
  for (size_t i = 0; i < sizeof(secret) / sizeof(secret[0]); i++)
    if (secret[i] != NULL) OPENSSL_cleanse(secret[i], strlen(secret[i]));
}
