/* fuzz_client_tunnel.c: the client's reading of a proxy's answer to CONNECT
 * (tunnel.c: nhb__tunnel_rx_feed), the bytes a proxy sends back before the
 * tunnel is up.
 *
 * The first input byte is the size of the reads (0: everything in one read,
 * else 1 to 255 bytes each); the rest is the proxy's answer. Each read is
 * copied into a buffer of exactly its length, so that AddressSanitizer catches
 * a read past its end (the client parses straight from its read buffer).
 *
 * Besides memory safety: the parse stops at the first read that completes the
 * final answer's head or breaks a rule, the bytes it says were the answer's
 * lie within that read, a complete answer has a final status (100..999 and not
 * an interim one), the interim answers and the bytes stay within the limits
 * (client.h, NHB__RESP_*), and a refusal says why.
 */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  size_t step = data[0];
  data++;
  size--;
  if (step == 0) step = size > 0 ? size : 1;
  llhttp_t parser;
  nhb__tunnel_rx rx;
  nhb__tunnel_rx_init(&parser, &rx);
  size_t off = 0;
  int r = 0;
  while (off < size && r == 0) {
    size_t n = size - off < step ? size - off : step;
    char* piece = malloc(n);
    assert(piece != NULL);
    memcpy(piece, data + off, n);
    size_t used = SIZE_MAX;
    r = nhb__tunnel_rx_feed(&parser, &rx, piece, n, &used);
    free(piece);
    assert(used <= n);
    if (r == 0) assert(used == n);
    off += n;
  }
  if (r == 1) {
    assert(rx.status >= 100 && rx.status <= 999);
    assert(rx.status >= 200 || rx.status == 101);
    assert(rx.bytes <= NHB__RESP_HEADER_BYTES);
  }
  if (r < 0) assert(rx.why != NULL);
  assert(rx.interims <= NHB__RESP_INTERIM + 1);
  return 0;
}
