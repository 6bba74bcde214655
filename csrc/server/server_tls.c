/* server_tls.c: TLS for the test server's HTTP connections.
 *
 * As on the client (transport_tls.c), OpenSSL never touches the socket: each
 * connection's SSL object reads ciphertext from a memory BIO that the
 * connection's reads append to, and writes ciphertext into another that is
 * moved to the socket with uv_try_write. The handshake advances one step per
 * arrival of bytes, so no call waits, and a client that stalls mid-handshake
 * costs nothing but its memory until the header time-out closes it.
 *
 * Plaintext from SSL_read goes to the connection's protocol, which ALPN chose
 * ("h2" or "http/1.1", the server's preference first); without ALPN the first
 * bytes decide, as on a plain port. Responses are encrypted as they are
 * written: small pieces are gathered into full records, and a large response
 * is encrypted in slices as the socket drains (server_conn.c), so the write
 * BIO holds at most about NHB__SRV_WRITE_HIGH bytes.
 *
 * One SSL_CTX serves every worker. Its certificate is read from PEM files or
 * generated at start-up (--tls-self-signed): an ECDSA P-256 key and a
 * self-signed certificate marked as a CA, whose subject alternative names
 * cover localhost, 127.0.0.1, ::1, the host name, the listen addresses and the
 * configured extra names, so that a client can trust it with --cacert and
 * check the host name as it would for any server. OpenSSL's C API does this
 * in a few calls and is already linked; no other dependency is needed.
 * Session resumption works as OpenSSL's server does by default (TLS 1.3
 * tickets, a TLS 1.2 session cache), and is counted.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server_internal.h"
#include "common/tls_common.h"

/* Plaintext per TLS record: small pieces are gathered up to this. */
#define TLS_RECORD 16384

struct nhb__srv_tls {
  SSL* ssl;
  BIO* rbio; /* ciphertext from the client, read by OpenSSL */
  BIO* wbio; /* ciphertext for the client, written by OpenSSL */
  int done;  /* the handshake completed */
};

/* ---- errors ---------------------------------------------------------------- */

/* An encrypted key would make OpenSSL ask for a password on the terminal;
 * there is none to give, so the load fails instead. */
static int no_password(char* buf, int size, int rwflag, void* userdata) {
  NHB__UNUSED(buf);
  NHB__UNUSED(size);
  NHB__UNUSED(rwflag);
  NHB__UNUSED(userdata);
  return 0;
}

static int ctx_error(char* err, size_t err_len, const char* what) {
  char reason[320];
  nhb__tls_error_text(reason, sizeof(reason));
  ERR_clear_error();
  if (err && err_len) snprintf(err, err_len, "%s%s%s", what, reason[0] ? ": " : "", reason);
  return NHB_EINVAL;
}

/* ---- the generated certificate ---------------------------------------------- */

static int add_name(GENERAL_NAMES* names, const char* text) {
  GENERAL_NAME* gn = GENERAL_NAME_new();
  if (!gn) return -1;
  unsigned char ip[16];
  if (inet_pton(AF_INET, text, ip) == 1 || inet_pton(AF_INET6, text, ip) == 1) {
    ASN1_OCTET_STRING* os = a2i_IPADDRESS(text);
    if (!os) goto fail;
    GENERAL_NAME_set0_value(gn, GEN_IPADD, os);
  } else {
    ASN1_IA5STRING* ia5 = ASN1_IA5STRING_new();
    if (!ia5 || !ASN1_STRING_set(ia5, text, (int)strlen(text))) {
      ASN1_IA5STRING_free(ia5);
      goto fail;
    }
    GENERAL_NAME_set0_value(gn, GEN_DNS, ia5);
  }
  if (sk_GENERAL_NAME_push(names, gn) > 0) return 0;
fail:
  GENERAL_NAME_free(gn);
  return -1;
}

/* Is this a name worth putting in a certificate (a plausible DNS name)? */
static int dns_name_ok(const char* s) {
  if (!*s || strlen(s) > 253) return 0;
  for (const char* p = s; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-' ||
          *p == '.' || *p == '*'))
      return 0;
  return 1;
}

static int add_listen_names(nhb_server* s, GENERAL_NAMES* names) {
  const nhb_server_config* c = &s->config;
  for (int i = 0; i < c->nlisten; i++) {
    const struct sockaddr* sa = (const struct sockaddr*)c->listen[i].bytes;
    char host[INET6_ADDRSTRLEN];
    if (sa->sa_family == AF_INET) {
      const struct sockaddr_in* in = (const struct sockaddr_in*)sa;
      if (in->sin_addr.s_addr == htonl(INADDR_ANY) || in->sin_addr.s_addr == htonl(INADDR_LOOPBACK)) continue;
      inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    } else if (sa->sa_family == AF_INET6) {
      const struct sockaddr_in6* in6 = (const struct sockaddr_in6*)sa;
      if (IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr) || IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr)) continue;
      inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    } else {
      continue;
    }
    if (add_name(names, host) < 0) return -1;
  }
  return 0;
}

static int add_ext(X509* x, int nid, const char* value) {
  X509V3_CTX v3;
  X509V3_set_ctx_nodb(&v3);
  X509V3_set_ctx(&v3, x, x, NULL, NULL, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(NULL, &v3, nid, value);
  if (!ext) return -1;
  int ok = X509_add_ext(x, ext, -1);
  X509_EXTENSION_free(ext);
  return ok ? 0 : -1;
}

/* A fresh ECDSA P-256 key and a self-signed CA certificate for it, valid from
 * a day ago (clock skew) for a year. */
static int make_self_signed(nhb_server* s, X509** out_cert, EVP_PKEY** out_key, char* err, size_t err_len) {
  const nhb_server_config* c = &s->config;
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* x = X509_new();
  BIGNUM* serial = BN_new();
  GENERAL_NAMES* names = sk_GENERAL_NAME_new_null();
  unsigned char rnd[16];
  int ok = key && x && serial && names && RAND_bytes(rnd, sizeof(rnd)) == 1;
  if (ok) {
    rnd[0] &= 0x7f; /* a positive serial number */
    ok = BN_bin2bn(rnd, sizeof(rnd), serial) && BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(x)) &&
         X509_set_version(x, 2) && X509_gmtime_adj(X509_getm_notBefore(x), -86400L) &&
         X509_gmtime_adj(X509_getm_notAfter(x), 365L * 86400L) && X509_set_pubkey(x, key);
  }
  if (ok) {
    X509_NAME* name = X509_get_subject_name(x);
    ok = X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, (const unsigned char*)"nhbench", -1, -1, 0) &&
         X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                    (const unsigned char*)"nhbench test server (self-signed)", -1, -1, 0) &&
         X509_set_issuer_name(x, name);
  }
  if (ok) {
    ok = add_name(names, "localhost") == 0 && add_name(names, "127.0.0.1") == 0 && add_name(names, "::1") == 0 &&
         add_listen_names(s, names) == 0;
    if (ok && dns_name_ok(s->hostname) && strcmp(s->hostname, "localhost") != 0)
      ok = add_name(names, s->hostname) == 0;
    for (int i = 0; ok && i < c->ntls_san; i++) ok = add_name(names, c->tls_san[i]) == 0;
  }
  ok = ok && X509_add1_ext_i2d(x, NID_subject_alt_name, names, 0, 0) == 1 &&
       add_ext(x, NID_basic_constraints, "critical,CA:TRUE") == 0 &&
       add_ext(x, NID_key_usage, "critical,digitalSignature,keyCertSign") == 0 &&
       add_ext(x, NID_ext_key_usage, "serverAuth") == 0 && add_ext(x, NID_subject_key_identifier, "hash") == 0 &&
       add_ext(x, NID_authority_key_identifier, "keyid:always") == 0 && X509_sign(x, key, EVP_sha256()) > 0;
  GENERAL_NAMES_free(names);
  BN_free(serial);
  if (!ok) {
    X509_free(x);
    EVP_PKEY_free(key);
    return ctx_error(err, err_len, "tls: cannot generate a self-signed certificate");
  }
  *out_cert = x;
  *out_key = key;
  return 0;
}

static char* cert_to_pem(X509* x) {
  BIO* b = BIO_new(BIO_s_mem());
  char* pem = NULL;
  if (b && PEM_write_bio_X509(b, x)) {
    char* data;
    long n = BIO_get_mem_data(b, &data);
    pem = malloc((size_t)n + 1);
    if (pem) {
      memcpy(pem, data, (size_t)n);
      pem[n] = '\0';
    }
  }
  BIO_free(b);
  return pem;
}

/* ---- the SSL_CTX --------------------------------------------------------- */

/* ALPN: the first of the server's protocols that the client offers. With no
 * overlap the handshake goes on without ALPN (as nginx does), and the first
 * bytes decide. */
static int alpn_select(SSL* ssl, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
                       unsigned int inlen, void* arg) {
  NHB__UNUSED(ssl);
  nhb_server* s = arg;
  unsigned char* sel = NULL;
  unsigned char sel_len = 0;
  if (SSL_select_next_proto(&sel, &sel_len, s->alpn_wire, (unsigned)s->alpn_wire_len, in, inlen) !=
      OPENSSL_NPN_NEGOTIATED)
    return SSL_TLSEXT_ERR_NOACK;
  *out = sel;
  *outlen = sel_len;
  return SSL_TLSEXT_ERR_OK;
}

int nhb__srv_tls_init(nhb_server* s, char* err, size_t err_len) {
  const nhb_server_config* c = &s->config;
  if (!c->tls) return 0;
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (!ctx) return ctx_error(err, err_len, "tls: cannot create the TLS context");
  s->ssl_ctx = ctx;
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_RENEGOTIATION);
  /* Resumed sessions must be bound to this server's context. */
  SSL_CTX_set_session_id_context(ctx, (const unsigned char*)"nhbench", 7);
  if (c->tls_self_signed) {
    X509* x = NULL;
    EVP_PKEY* key = NULL;
    int r = make_self_signed(s, &x, &key, err, err_len);
    if (r < 0) return r;
    int ok = SSL_CTX_use_certificate(ctx, x) && SSL_CTX_use_PrivateKey(ctx, key);
    s->cert_pem = ok ? cert_to_pem(x) : NULL;
    X509_free(x);
    EVP_PKEY_free(key);
    if (!ok) return ctx_error(err, err_len, "tls: cannot use the generated certificate");
  } else {
    char what[600];
    if (!c->tls_cert_file || !c->tls_key_file || !*c->tls_cert_file || !*c->tls_key_file) {
      if (err && err_len) snprintf(err, err_len, "tls: needs a certificate and a key file, or self_signed");
      return NHB_EINVAL;
    }
    SSL_CTX_set_default_passwd_cb(ctx, no_password);
    snprintf(what, sizeof(what), "tls_cert: cannot load a PEM certificate (chain) from '%.500s'", c->tls_cert_file);
    if (!SSL_CTX_use_certificate_chain_file(ctx, c->tls_cert_file)) return ctx_error(err, err_len, what);
    snprintf(what, sizeof(what), "tls_key: cannot load a PEM private key from '%.500s'", c->tls_key_file);
    if (!SSL_CTX_use_PrivateKey_file(ctx, c->tls_key_file, SSL_FILETYPE_PEM)) return ctx_error(err, err_len, what);
    if (!SSL_CTX_check_private_key(ctx))
      return ctx_error(err, err_len, "tls_key: the key does not match the certificate");
    X509* x = SSL_CTX_get0_certificate(ctx);
    s->cert_pem = x ? cert_to_pem(x) : NULL;
  }
  if (!s->cert_pem) return ctx_error(err, err_len, "tls: cannot encode the certificate");
  /* Client certificates: asked for in every full handshake (the CA names go
   * in the CertificateRequest), and a client without one, or with one that
   * does not chain to these CAs or is out of date, fails the handshake. A
   * resumed session was verified when it was made, and keeps its client's
   * identity (bound to the session id context set above). */
  if (c->tls_client_ca && *c->tls_client_ca) {
    char what[600];
    snprintf(what, sizeof(what), "tls_client_ca: cannot load PEM CA certificates from '%.500s'", c->tls_client_ca);
    if (!SSL_CTX_load_verify_locations(ctx, c->tls_client_ca, NULL)) return ctx_error(err, err_len, what);
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(c->tls_client_ca);
    if (!names) return ctx_error(err, err_len, what);
    SSL_CTX_set_client_CA_list(ctx, names);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
  }
  SSL_CTX_set_alpn_select_cb(ctx, alpn_select, s);
  return 0;
}

void nhb__srv_tls_free(nhb_server* s) {
  if (s->ssl_ctx) SSL_CTX_free((SSL_CTX*)s->ssl_ctx);
  s->ssl_ctx = NULL;
  free(s->cert_pem);
  s->cert_pem = NULL;
}

/* ---- connections -------------------------------------------------------------- */

int nhb__srv_tls_accept(nhb__srv_conn* c) {
  nhb__srv_tls* t = calloc(1, sizeof(*t));
  if (!t) return NHB_ENOMEM;
  t->ssl = nhb__tls_new((SSL_CTX*)c->w->server->ssl_ctx, &t->rbio, &t->wbio);
  if (!t->ssl) {
    free(t);
    return NHB_ENOMEM;
  }
  SSL_set_accept_state(t->ssl);
  c->tls = t;
  return 0;
}

void nhb__srv_tls_conn_free(nhb__srv_conn* c) {
  nhb__srv_tls* t = c->tls;
  if (!t) return;
  SSL_free(t->ssl); /* frees both BIOs */
  free(t);
  c->tls = NULL;
}

int nhb__srv_tls_handshake_done(const nhb__srv_conn* c) { return c->tls && c->tls->done; }

size_t nhb__srv_tls_pending(const nhb__srv_conn* c) { return BIO_ctrl_pending(c->tls->wbio); }

int nhb__srv_tls_has_input(const nhb__srv_conn* c) {
  return BIO_ctrl_pending(c->tls->rbio) > 0 || SSL_pending(c->tls->ssl) > 0;
}

int nhb__srv_tls_drain(nhb__srv_conn* c, int all) {
  nhb__srv_tls* t = c->tls;
  char* out = c->w->tls_out;
  while (!c->closing && BIO_ctrl_pending(t->wbio) > 0) {
    /* In order: nothing may overtake what the socket has not taken yet. */
    if (!all && c->h.stream.write_queue_size > 0) break;
    int n = BIO_read(t->wbio, out, NHB__SRV_TLS_OUT);
    if (n <= 0) break;
    uv_buf_t b = uv_buf_init(out, (unsigned)n);
    if (nhb__srv_sock_write(c, &b, 1, (size_t)n, NULL) < 0) return -1;
  }
  return c->closing ? -1 : 0;
}

static int ssl_write_all(nhb__srv_conn* c, const char* p, size_t n) {
  if (n == 0) return 0;
  /* Memory BIOs never push back, so SSL_write takes everything or fails. */
  if (SSL_write(c->tls->ssl, p, (int)n) <= 0) {
    ERR_clear_error();
    nhb__srv_conn_close(c);
    return -1;
  }
  return 0;
}

int nhb__srv_tls_write(nhb__srv_conn* c, const uv_buf_t* bufs, unsigned nbufs) {
  if (!c->tls->done) return 0; /* nothing is answered before the handshake */
  char* plain = c->w->tls_plain;
  size_t have = 0;
  for (unsigned i = 0; i < nbufs; i++) {
    const char* p = bufs[i].base;
    size_t len = bufs[i].len;
    if (len <= TLS_RECORD - have) {
      /* A head, a small body: gathered so that a response is one record. */
      memcpy(plain + have, p, len);
      have += len;
      continue;
    }
    if (ssl_write_all(c, plain, have) < 0) return -1;
    have = 0;
    if (len <= TLS_RECORD) {
      memcpy(plain, p, len);
      have = len;
    } else if (ssl_write_all(c, p, len) < 0) {
      return -1;
    }
  }
  if (ssl_write_all(c, plain, have) < 0) return -1;
  return nhb__srv_tls_drain(c, 0);
}

void nhb__srv_tls_shutdown(nhb__srv_conn* c) {
  nhb__srv_tls* t = c->tls;
  if (t->done) SSL_shutdown(t->ssl); /* queues close_notify; the client's is not awaited */
  ERR_clear_error();
}

/* The handshake is over: statistics, and the protocol ALPN chose. */
static int established(nhb__srv_conn* c) {
  nhb__srv_tls* t = c->tls;
  nhb__srv_worker* w = c->w;
  nhb_server* s = w->server;
  t->done = 1;
  nhb__srv_bump(&w->counters.tls_handshakes, 1);
  if (SSL_session_reused(t->ssl)) nhb__srv_bump(&w->counters.tls_session_reused, 1);
  if (s->config.tls_client_ca && *s->config.tls_client_ca) nhb__srv_bump(&w->counters.tls_clients_verified, 1);
  const unsigned char* sel = NULL;
  unsigned sel_len = 0;
  SSL_get0_alpn_selected(t->ssl, &sel, &sel_len);
  if (sel_len == 2 && memcmp(sel, "h2", 2) == 0) return nhb__srv_conn_set_proto(c, NHB__SRV_PROTO_H2);
  if ((sel_len == 8 && memcmp(sel, "http/1.1", 8) == 0) || !s->h2_ok) return nhb__srv_conn_set_proto(c, NHB__SRV_PROTO_H1);
  return 0; /* no ALPN: the first bytes decide */
}

void nhb__srv_tls_pull(nhb__srv_conn* c) {
  nhb__srv_tls* t = c->tls;
  if (!t || !t->done || c->in_input) return;
  nhb__srv_worker* w = c->w;
  c->in_input = 1;
  for (;;) {
    if (c->closing || c->finishing) break;
    /* HTTP/1.1 under back-pressure keeps the rest encrypted until it resumes. */
    if (c->proto != NHB__SRV_PROTO_H2 && (c->paused || c->close_after)) break;
    int n = SSL_read(t->ssl, w->rbuf, NHB__SRV_READ_BUFFER);
    if (n > 0) {
      nhb__srv_conn_deliver(c, w->rbuf, (size_t)n);
      /* Nothing left to decrypt: another SSL_read would only report
       * SSL_ERROR_WANT_READ, which costs a full pass through OpenSSL. */
      if (BIO_ctrl_pending(t->rbio) == 0 && SSL_pending(t->ssl) == 0) break;
      continue;
    }
    int e = SSL_get_error(t->ssl, n);
    ERR_clear_error();
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) break;
    c->in_input = 0;
    if (e == SSL_ERROR_ZERO_RETURN) {
      /* close_notify: the client is done sending. */
      if (nhb__srv_tls_drain(c, 0) == 0) nhb__srv_conn_eof(c);
    } else {
      /* A record that does not decrypt, an alert: nothing more to say. */
      nhb__srv_conn_close(c);
    }
    return;
  }
  c->in_input = 0;
  /* Reading can produce output too (a KeyUpdate answer, tickets). */
  if (!c->closing && !c->finishing) nhb__srv_tls_drain(c, 0);
}

void nhb__srv_tls_on_read(nhb__srv_conn* c, const char* p, size_t n) {
  nhb__srv_tls* t = c->tls;
  if (BIO_write(t->rbio, p, (int)n) != (int)n) {
    nhb__srv_conn_close(c);
    return;
  }
  if (!t->done) {
    int r = SSL_do_handshake(t->ssl);
    if (r != 1) {
      int e = SSL_get_error(t->ssl, r);
      unsigned long why = ERR_peek_error();
      ERR_clear_error();
      if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        nhb__srv_tls_drain(c, 0);
        return;
      }
      /* No certificate, or one the CAs do not vouch for (a verify failure
       * leaves its result on the connection). */
      if (ERR_GET_LIB(why) == ERR_LIB_SSL && (ERR_GET_REASON(why) == SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE ||
                                              ERR_GET_REASON(why) == SSL_R_CERTIFICATE_VERIFY_FAILED))
        nhb__srv_bump(&c->w->counters.tls_clients_refused, 1);
      /* The handshake failed: the alert OpenSSL queued goes out (best
       * effort), then the connection closes; conn_free counts it. */
      nhb__srv_tls_drain(c, 1);
      nhb__srv_conn_close(c);
      return;
    }
    /* The server's last flight (and TLS 1.3 session tickets). */
    if (nhb__srv_tls_drain(c, 0) < 0) return;
    if (established(c) < 0) {
      nhb__srv_conn_close(c);
      return;
    }
  }
  nhb__srv_tls_pull(c);
}
