/* tls_common.h: what the client's TLS transport and the test server's TLS
 * connections share.
 *
 * Neither side lets OpenSSL touch the socket, so that no call ever blocks the
 * loop. The server runs OpenSSL over memory BIOs (nhb__tls_new): bytes from
 * the socket are appended to the read BIO, OpenSSL writes ciphertext into the
 * write BIO, and the caller moves it to the socket. The client's transport
 * has a BIO of its own that saves those two copies (transport_tls.c).
 */
#ifndef NHB_TLS_COMMON_H
#define NHB_TLS_COMMON_H

#include <openssl/ssl.h>
#include <stddef.h>

/* A new SSL object of `ctx` wired to two fresh memory BIOs (an empty read
 * BIO means "no bytes yet", not end of file). On success *rbio and *wbio
 * belong to the SSL object (SSL_free frees them). Returns NULL on failure,
 * with nothing left allocated and OpenSSL's error queue cleared. */
SSL* nhb__tls_new(SSL_CTX* ctx, BIO** rbio, BIO** wbio);

/* Turns "h2,http/1.1" into ALPN's wire format (length-prefixed ids).
 * Returns 0, or -1 for an empty list, an empty id, an id over 255 bytes or
 * a result over `cap`. */
int nhb__tls_alpn_wire(const char* list, unsigned char* out, size_t cap, size_t* out_len);

/* OpenSSL's last error as "reason (full error string)", or "" when the queue
 * is empty. The queue is left alone (callers clear it). */
void nhb__tls_error_text(char* out, size_t len);

#endif /* NHB_TLS_COMMON_H */
