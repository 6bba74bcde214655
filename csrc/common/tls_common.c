/* tls_common.c: memory-BIO set-up (the test server's, server_tls.c), ALPN
 * lists and error text, shared by the client's transport (transport_tls.c)
 * and the test server. */
#include <openssl/err.h>
#include <stdio.h>
#include <string.h>

#include "common/tls_common.h"

SSL* nhb__tls_new(SSL_CTX* ctx, BIO** rbio, BIO** wbio) {
  SSL* ssl = SSL_new(ctx);
  BIO* r = BIO_new(BIO_s_mem());
  BIO* w = BIO_new(BIO_s_mem());
  if (ssl == NULL || r == NULL || w == NULL) {
    SSL_free(ssl);
    BIO_free(r);
    BIO_free(w);
    ERR_clear_error();
    return NULL;
  }
  /* By default an empty memory BIO reports end of file, which OpenSSL would
   * take for a connection the peer closed; -1 makes it "retry later". */
  BIO_set_mem_eof_return(r, -1);
  BIO_set_mem_eof_return(w, -1);
  SSL_set_bio(ssl, r, w);
  *rbio = r;
  *wbio = w;
  return ssl;
}

int nhb__tls_alpn_wire(const char* list, unsigned char* out, size_t cap, size_t* out_len) {
  size_t n = 0;
  const char* p = list;
  while (*p != '\0') {
    const char* end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len == 0 || len > 255 || n + 1 + len > cap) return -1;
    out[n++] = (unsigned char)len;
    memcpy(out + n, p, len);
    n += len;
    p += len;
    if (*p == ',') p++;
  }
  *out_len = n;
  return n > 0 ? 0 : -1;
}

void nhb__tls_error_text(char* out, size_t len) {
  unsigned long e = ERR_peek_last_error();
  if (len == 0) return;
  out[0] = '\0';
  if (e == 0) return;
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  const char* reason = ERR_reason_error_string(e);
  if (reason != NULL) snprintf(out, len, "%s (%.200s)", reason, buf);
  else snprintf(out, len, "%.200s", buf);
}
