/* fuzz_client_udp_tunnel.c: the client's reading of a CONNECT-UDP proxy
 * (tunnel_udp.c): the bytes it sends on the CONNECT stream (HTTP/3 frames,
 * its QPACK-encoded answer, capsules), on its control stream (SETTINGS) and
 * on other unidirectional streams, and its HTTP Datagrams (quarter stream id,
 * context id, payload), as ngtcp2 would hand them over once the CONNECT went
 * out. No QUIC: the parsers alone, on a tunnel from
 * nhb__udp_tunnel_parser_new.
 *
 * Input: a list of pieces, each a header byte and a length byte then that
 * many bytes (fewer at the end of the input). The header's low two bits pick
 * where the piece goes: 0 the CONNECT stream, 1 the control stream (id 3),
 * 2 a datagram, 3 another unidirectional stream (id 7); bit 2 ends that
 * stream with the piece (FIN). Each piece is copied into a buffer of exactly
 * its length, so that AddressSanitizer catches a read past its end.
 *
 * Besides memory safety: once a stream broke HTTP/3 the tunnel says why and
 * takes nothing more; a final answer's status is 200..599; the datagrams
 * waiting for the inner connection never exceed the ring, only follow a 2xx,
 * and every datagram fed is either queued or counted as dropped (while the
 * ring is not drained, as here). At the end the tunnel is freed and
 * LeakSanitizer checks that the QPACK decoder's blocks all went back.
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
  uint64_t datagrams = 0;
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
    int r = 0;
    switch (head & 3) {
      case 0: r = nhb__udp_tunnel_stream_bytes(t, 0, piece, n, fin); break;
      case 1: r = nhb__udp_tunnel_stream_bytes(t, 3, piece, n, fin); break;
      case 2:
        nhb__udp_tunnel_datagram(t, piece, n);
        datagrams++;
        break;
      default: r = nhb__udp_tunnel_stream_bytes(t, 7, piece, n, fin); break;
    }
    free(piece);
    const char* why = NULL;
    uint32_t queued = 0;
    int status = nhb__udp_tunnel_parsed(t, &why, &queued);
    if (r < 0) assert(why != NULL);
    if (broken && (head & 3) != 2) assert(r < 0);
    broken = why != NULL;
    assert(status == 0 || (status >= 200 && status <= 599));
    assert(queued <= 16);
    if (queued > 0) assert(status >= 200 && status <= 299);
    assert(queued + worker.stats.counters[NHB_CTR_TUNNEL_DATAGRAM_DROPPED] >= datagrams);
  }
  nhb__udp_tunnel_free(t);
  return 0;
}
