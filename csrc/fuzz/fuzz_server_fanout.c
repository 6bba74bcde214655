/* fuzz_server_fanout.c: what an HTTP fan-out target may answer, and what a
 * client's query makes a non-mirroring fan-out send (server_fanout.c).
 *
 * Byte 0 bit 1 clear: the llhttp response parser with the fan-out's
 * callbacks (interim 1xx responses skipped, HEAD responses without a body,
 * the body kept up to NHB__SRV_FANOUT_MAX_RESPONSE, a body that runs to EOF)
 * and the test of bytes left after a complete response. Byte 0 bit 0 says
 * the request was a HEAD; byte 1 is where the response is split in two
 * reads (as a fraction of its length); the rest is the response as the
 * socket delivers it, followed by EOF. fuzz_server covers the request side,
 * which the fan-out parses the same way (llhttp).
 *
 * Byte 0 bit 1 set: the rest (from byte 2) is a request URI, read as
 * Fortio's form (nhb__srv_fanout_read_form(): Go's url.ParseQuery
 * splitting and unescaping, the first payload and X, every H's
 * Content-Type, the method's choice and the token test).
 *
 * Checked: memory safety (ASan), undefined behaviour (UBSan); that a
 * complete response has a status in 100-999 and a body within the cap (the
 * seam returns -2 otherwise); that a form's payload is no longer than the
 * URI, its method a token whenever it is said to be one (so nothing can
 * reach a request line but a token), and a URI without a query a GET with
 * no payload.
 */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/server_internal.h"

static int tchar(unsigned char c) {
  return c > 0x20 && c < 0x7f && !strchr("\"(),/:;<=>?@[\\]{}", c);
}

static void fuzz_form(const char* uri, size_t n) {
  nhb__srv_buf scratch = {0};
  nhb__srv_fanout_form fm;
  if (nhb__srv_fanout_read_form(uri, n, &scratch, &fm) == 0) {
    assert(fm.payload_len <= n && fm.payload_len <= scratch.len);
    assert((fm.method && fm.method_len > 0) || !fm.method_ok);
    if (fm.method_ok)
      for (size_t i = 0; i < fm.method_len; i++) assert(tchar((unsigned char)fm.method[i]));
    if (!memchr(uri, '?', n)) assert(fm.payload_len == 0 && fm.method_len == 3 && !memcmp(fm.method, "GET", 3));
    if (fm.payload_len) assert(fm.payload >= scratch.p && fm.payload + fm.payload_len <= scratch.p + scratch.len);
  }
  nhb__srv_buf_free(&scratch);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  if (data[0] & 2) {
    fuzz_form((const char*)data + 2, size - 2);
    return 0;
  }
  int head = data[0] & 1;
  size_t n = size - 2;
  size_t split = n * data[1] / 255;
  int r = nhb__srv_fanout_parse_response((const char*)data + 2, n, split, head);
  assert(r != -2);
  assert(r == -1 || r == 0 || (r >= 100 && r <= 999));
  return 0;
}
