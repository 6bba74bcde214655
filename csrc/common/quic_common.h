/* quic_common.h: ngtcp2 callbacks that the client's HTTP/3 session and the
 * test server's QUIC listener both hand to ngtcp2 unchanged: randomness and
 * new connection ids, drawn from GnuTLS (the TLS library under both QUIC
 * stacks). */
#ifndef NHB_QUIC_COMMON_H
#define NHB_QUIC_COMMON_H

#include <ngtcp2/ngtcp2.h>

/* ngtcp2_callbacks.rand: `len` random bytes into `dest`. */
void nhb__quic_rand(uint8_t* dest, size_t len, const ngtcp2_rand_ctx* ctx);
/* ngtcp2_callbacks.get_new_connection_id: a random id of `cidlen` bytes and
 * its stateless reset token. */
int nhb__quic_new_connection_id(ngtcp2_conn* qc, ngtcp2_cid* cid, uint8_t* token, size_t cidlen, void* user_data);

#endif /* NHB_QUIC_COMMON_H */
