/* fuzz_client_capsules.c: the client's capsule reader (tunnel_udp_h2.c,
 * RFC 9297 section 3.2), which takes what a CONNECT-UDP proxy on an HTTP/2
 * stream sends in the CONNECT stream's DATA frames, in whatever pieces the
 * frames cut it into.
 *
 * Input: a list of pieces, each a header byte and a length byte then that
 * many bytes (fewer at the end of the input). The header's bit 0 says
 * whether the queue is drained after the piece (as the leg does once
 * nghttp2_session_mem_recv returned) or left to fill up. Each piece is
 * copied into a buffer of exactly its length, so that AddressSanitizer
 * catches a read past its end.
 *
 * Besides memory safety: every payload popped is non-empty, at most
 * NHB__CAPSULE_VALUE_MAX - 1 bytes, lies inside the reader's queue, and is
 * byte for byte the payload of a DATAGRAM capsule of context id 0 of the
 * input (checked against a simple reference reader over the whole stream,
 * which knows nothing of pieces); the queue never exceeds its bounds; every
 * DATAGRAM capsule that completes is popped, counted as dropped or still
 * queued; and at the end of the input the reader is inside a capsule exactly
 * when the reference is.
 */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"

/* The reference: a whole stream's capsules, one at a time. 1 and the
 * capsule, or 0 when the stream ends inside one (or is empty). */
static int ref_vint(const uint8_t* s, size_t n, size_t* at, uint64_t* out) {
  if (*at >= n) return 0;
  size_t len = (size_t)1 << (s[*at] >> 6);
  if (*at + len > n) return 0;
  uint64_t x = s[*at] & 0x3f;
  for (size_t i = 1; i < len; i++) x = (x << 8) | s[*at + i];
  *at += len;
  *out = x;
  return 1;
}

static int ref_next(const uint8_t* s, size_t n, size_t* at, uint64_t* type, const uint8_t** value, uint64_t* len) {
  size_t p = *at;
  if (!ref_vint(s, n, &p, type) || !ref_vint(s, n, &p, len) || *len > n - p) return 0;
  *value = s + p;
  *at = p + (size_t)*len;
  return 1;
}

static nhb__capsule_rx reader;

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  /* The stream the pieces make, for the reference. */
  uint8_t* stream = malloc(size > 0 ? size : 1);
  assert(stream != NULL);
  size_t slen = 0;
  nhb__capsule_rx_init(&reader);
  uint64_t dropped = 0, popped = 0;
  size_t ref_at = 0;
  size_t off = 0;
  while (off + 2 <= size) {
    uint8_t head = data[off];
    size_t n = data[off + 1];
    off += 2;
    if (n > size - off) n = size - off;
    uint8_t* piece = malloc(n > 0 ? n : 1);
    assert(piece != NULL);
    memcpy(piece, data + off, n);
    memcpy(stream + slen, data + off, n);
    slen += n;
    off += n;
    nhb__capsule_rx_feed(&reader, piece, n, &dropped);
    free(piece);
    assert(reader.nq <= NHB__CAPSULE_QN && reader.popped <= reader.nq);
    assert(reader.start <= reader.qlen && reader.qlen <= NHB__CAPSULE_QBYTES);
    if (!(head & 1)) continue;
    const uint8_t* p;
    size_t len;
    while (nhb__capsule_rx_next(&reader, &p, &len)) {
      assert(len > 0 && len <= NHB__CAPSULE_VALUE_MAX - 1);
      assert(p >= reader.q && p + len <= reader.q + NHB__CAPSULE_QBYTES);
      /* The reference's next DATAGRAM of context id 0 with a payload that
       * fit: the same bytes. */
      uint64_t type, vlen;
      const uint8_t* value;
      int found = 0;
      while (ref_next(stream, slen, &ref_at, &type, &value, &vlen)) {
        if (type == 0 && vlen >= 2 && vlen <= NHB__CAPSULE_VALUE_MAX && value[0] == 0) {
          if (vlen - 1 == len && memcmp(value + 1, p, len) == 0) {
            found = 1;
            break;
          }
        }
      }
      assert(found);
      popped++;
    }
  }
  /* Every DATAGRAM capsule the stream completed: popped, dropped or queued. */
  uint64_t complete = 0;
  size_t at = 0;
  uint64_t type, vlen;
  const uint8_t* value;
  while (ref_next(stream, slen, &at, &type, &value, &vlen))
    if (type == 0) complete++;
  /* A DATAGRAM capsule dropped when it began (too large, no room) counts
   * before it completes. */
  uint64_t open_dropped = reader.stage == 2 && reader.type == 0 && !reader.keep;
  assert(popped + dropped + nhb__capsule_rx_queued(&reader) == complete + open_dropped);
  assert(nhb__capsule_rx_partial(&reader) == (at != slen));
  free(stream);
  return 0;
}
