/* quic_common.c: see quic_common.h. */
#include "common/quic_common.h"

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>

#include "common/internal.h"

void nhb__quic_rand(uint8_t* dest, size_t len, const ngtcp2_rand_ctx* ctx) {
  NHB__UNUSED(ctx);
  (void)gnutls_rnd(GNUTLS_RND_RANDOM, dest, len);
}

int nhb__quic_new_connection_id(ngtcp2_conn* qc, ngtcp2_cid* cid, uint8_t* token, size_t cidlen, void* user_data) {
  NHB__UNUSED(qc);
  NHB__UNUSED(user_data);
  if (gnutls_rnd(GNUTLS_RND_RANDOM, cid->data, cidlen) != 0 ||
      gnutls_rnd(GNUTLS_RND_RANDOM, token, NGTCP2_STATELESS_RESET_TOKENLEN) != 0)
    return NGTCP2_ERR_CALLBACK_FAILURE;
  cid->datalen = cidlen;
  return 0;
}
