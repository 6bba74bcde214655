/* fuzz_client_h3_tunnel.c: the client's reading of an HTTP/3 proxy's side of
 * a classic CONNECT (the HTTP/3 leg of a TCP tunnel, --proxy-protocol http3
 * for an HTTP/1.1 or HTTP/2 run; tunnel_udp.c's stream mode): its answer on
 * the CONNECT stream (HTTP/3 frames, a QPACK-encoded HEADERS), then the
 * origin's bytes in DATA frames, its control stream (SETTINGS) and other
 * unidirectional streams, as ngtcp2 would hand them over once the CONNECT
 * went out. No QUIC and no inner transport: a tunnel from
 * nhb__udp_tunnel_parser_new put in stream mode (nhb__udp_tunnel_parser_stream),
 * which counts the DATA payload it would hand on.
 *
 * Input: a list of pieces, each a header byte and a length byte then that
 * many bytes (fewer at the end of the input). The header's low two bits pick
 * where the piece goes: 0 the CONNECT stream, 1 the control stream (id 3),
 * 2 another unidirectional stream (id 7), 3 the CONNECT stream again; bit 2
 * ends that stream with the piece (FIN). Each piece is copied into a buffer
 * of exactly its length, so that AddressSanitizer catches a read past its end.
 *
 * Besides memory safety: once a stream broke HTTP/3 the tunnel says why and
 * takes nothing more; a final answer's status is 200..599; origin bytes are
 * handed on only after a 2xx, and never more than the CONNECT stream
 * carried. At the end LeakSanitizer checks that the QPACK decoder's blocks
 * all went back.
 */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static nhb__worker worker;
  static nhb__conn conn;
  memset(&worker.stats.counters, 0, sizeof(worker.stats.counters));
  conn.worker = &worker;
  nhb__udp_tunnel* t = nhb__udp_tunnel_parser_new(&conn);
  assert(t != NULL);
  (void)nhb__udp_tunnel_parser_stream(t, 1);
  uint64_t fed = 0;
  int broken = 0;
  size_t off = 0;
  while (off + 2 <= size) {
    uint8_t head = data[off];
    size_t n = data[off + 1];
    off += 2;
    if (n > size - off) n = size - off;
    uint8_t* piece = malloc(n > 0 ? n : 1);
    assert(piece != NULL);
    memcpy(piece, data + off, n);
    off += n;
    int fin = (head & 4) != 0;
    int64_t sid = (head & 3) == 1 ? 3 : (head & 3) == 2 ? 7 : 0;
    uint64_t before = nhb__udp_tunnel_parser_stream(t, 0);
    int r = nhb__udp_tunnel_stream_bytes(t, sid, piece, n, fin);
    free(piece);
    uint64_t after = nhb__udp_tunnel_parser_stream(t, 0);
    if (sid == 0) fed += n;
    else assert(after == before); /* only the CONNECT stream carries the origin's bytes */
    const char* why = NULL;
    uint32_t queued = 0;
    int status = nhb__udp_tunnel_parsed(t, &why, &queued);
    if (r < 0) assert(why != NULL);
    if (broken) assert(r < 0 && after == before);
    broken = why != NULL;
    assert(status == 0 || (status >= 200 && status <= 599));
    if (after > 0) assert(status >= 200 && status <= 299);
    assert(after <= fed);
    assert(queued == 0); /* no datagrams in stream mode */
  }
  nhb__udp_tunnel_free(t);
  return 0;
}
