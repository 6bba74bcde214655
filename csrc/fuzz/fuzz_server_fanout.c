/* fuzz_server_fanout.c: what an HTTP fan-out target may answer
 * (server_fanout.c): the llhttp response parser with the fan-out's
 * callbacks (interim 1xx responses skipped, HEAD responses without a body,
 * the body kept up to NHB__SRV_FANOUT_MAX_RESPONSE, a body that runs to EOF)
 * and the test of bytes left after a complete response. fuzz_server covers
 * the request side, which the fan-out parses the same way (llhttp).
 *
 * Input: byte 0 bit 0 says the request was a HEAD; byte 1 is where the
 * response is split in two reads (as a fraction of its length); the rest is
 * the response as the socket delivers it, followed by EOF.
 *
 * Checked: memory safety (ASan), undefined behaviour (UBSan), and that a
 * complete response has a status in 100-999 and a body within the cap (the
 * seam returns -2 otherwise).
 */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "server/server_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  int head = data[0] & 1;
  size_t n = size - 2;
  size_t split = n * data[1] / 255;
  int r = nhb__srv_fanout_parse_response((const char*)data + 2, n, split, head);
  assert(r != -2);
  assert(r == -1 || r == 0 || (r >= 100 && r <= 999));
  return 0;
}
