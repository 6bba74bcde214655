/* fuzz_server_h3.c: the test server's HTTP/3 request path (server_h3.c)
 * without a QUIC handshake: nghttp3's server connection, as the server sets it
 * up, fed the bytes of the client's request stream (HEADERS and DATA frames,
 * QPACK field sections), and the server's capture, limits and responses
 * (nhb__srv_reply_build with the Fortio query parameters and the per-request
 * x-nighthawk-test-server-config JSON) on one worker set up on this thread
 * (nhb__srv_worker_open). Through the seam nhb__srv_h3_feed(): no socket, no
 * ngtcp2; whatever nghttp3 writes is taken as sent.
 *
 * Input: the first byte picks the server configuration (bit 0) and where the
 * rest is split into two reads (the other bits, scaled to the input); the
 * rest is the request stream's bytes, ended with FIN.
 *
 * Checked: memory safety (ASan), undefined behaviour (UBSan), leaks (LSan, at
 * exit), at most one response per input, and the worker's delayed count back
 * at zero after each input.
 */
#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server_internal.h"

#define NVARIANTS 2

static nhb_server* servers[NVARIANTS];

int LLVMFuzzerInitialize(int* argc, char*** argv) {
  NHB__UNUSED(argc);
  NHB__UNUSED(argv);
  for (int i = 0; i < NVARIANTS; i++) {
    nhb_server_config cfg;
    nhb_server_config_init(&cfg);
    cfg.idle_timeout_ns = 0;
    cfg.header_timeout_ns = 0;
    cfg.max_payload_bytes = 64 * 1024;
    if (i == 1) {
      /* Every request on the dynamic path, and small limits. */
      cfg.response_json =
          "{\"response_body_size\": 10, \"response_headers\": [{\"header\": {\"key\": \"x-static\", \"value\": "
          "\"1\"}}], \"echo_request_headers\": true}";
      cfg.echo_default_params = "size=100:50,2000:50&status=200:90,503:10&header=x-default:yes";
      cfg.max_header_bytes = 1024;
      cfg.max_body_bytes = 4096;
    }
    char err[256] = "";
    if (nhb_server_create(&cfg, &servers[i], err, sizeof(err)) != 0 ||
        nhb__srv_worker_open(servers[i], &servers[i]->workers[0]) != 0) {
      fprintf(stderr, "fuzz: cannot set up server %d: %s\n", i, err);
      abort();
    }
  }
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  nhb_server* s = servers[data[0] & 1];
  nhb__srv_worker* w = &s->workers[0];
  size_t split = size > 1 ? (size_t)(data[0] >> 1) * (size - 1) / 127 : 0;
  size_t responded = 0;
  int r = nhb__srv_h3_feed(w, data + 1, size - 1, split, &responded);
  assert(r == 0 || r == NHB_ENOMEM);
  assert(responded <= 1);
  assert(w->delayed == 0);
  assert(w->heap_len == 0);
  return 0;
}
