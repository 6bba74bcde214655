/* fuzz_server_grpc.c: the test server's gRPC calls (server_grpc.c) without
 * HTTP/2 around them: the 5-byte framing, the hand-written protobuf decoder
 * (varints, length-delimited fields, groups, every unknown wire type), the
 * UTF-8 check, grpc-timeout and the answer's encoding. fuzz_server reaches
 * the same code through nghttp2, but rarely gets a well-formed HPACK block
 * and a DATA frame past it; here every input is a call.
 *
 * Input: byte 0 chooses the call
 *   bits 0-1  the method: health check, Fortio's ping, its alias, unknown
 *   bit 2     a grpc-encoding was sent (a compressed flag is then readable)
 *   bit 3     byte 1 is a grpc-timeout in milliseconds (0 means 1 ns)
 *   bit 4     bytes 1-10 (after the timeout byte) are a grpc-timeout header
 *             value as sent, parsed by nhb__srv_grpc_note_header
 *   bits 5-6  the server's own delay: none, static, linear
 * and the rest is the request body (prefix and message).
 *
 * Checked: memory safety (ASan), undefined behaviour (UBSan), and the
 * answer's invariants: a known status code; OK carries exactly one framed,
 * uncompressed message whose prefix gives its length, and no grpc-message;
 * an error carries a grpc-message of printable ASCII (percent-encoded) and no
 * message; an answer the prefix decided early is never OK; the delay stays
 * within --max-delay twice over (the ping's own plus the server's) and within
 * the grpc-timeout.
 */
#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "server/server_internal.h"

#define MAX_DELAY_NS (60ull * 1000000000ull)

static nhb_server server;
static nhb__srv_worker worker;

static const char* const paths[] = {"/grpc.health.v1.Health/Check", "/fgrpc.PingServer/Ping",
                                    "/fortio.PingServer/Ping", "/a.B/C"};

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  memset(&server, 0, sizeof(server));
  memset(&worker, 0, sizeof(worker));
  server.config.max_delay_ns = MAX_DELAY_NS;
  worker.server = &server;
  uint8_t how = data[0];
  data++, size--;
  server.nh.delay_kind = (how >> 5) & 3;
  server.nh.static_delay_ns = 1000000;
  server.nh.linear_min_ns = 1000;
  server.nh.linear_factor_ns = UINT64_MAX / 3; /* the overflow guard */
  nhb__srv_grpc_head g = {.content_type = 1, .encoded = (how >> 2) & 1};
  if ((how & 8) && size >= 1) {
    g.timeout_ns = data[0] ? (uint64_t)data[0] * 1000000u : 1;
    data++, size--;
  }
  if (how & 16) {
    size_t n = size < 10 ? size : 10;
    nhb__srv_grpc_note_header(&g, (const uint8_t*)"grpc-timeout", 12, data, n);
    data += n, size -= n;
  }
  const char* path = paths[how & 3];
  const char* body = size ? (const char*)data : "";
  int early = nhb__srv_grpc_early(&g, body, size);
  nhb__srv_buf out = {0};
  nhb__srv_grpc_answer a;
  int r = nhb__srv_grpc_answer_call(&worker, &g, path, strlen(path), body, size, size, &out, &a);
  if (r < 0) {
    nhb__srv_buf_free(&out);
    return 0; /* out of memory */
  }
  assert(a.code == NHB__SRV_GRPC_OK || a.code == NHB__SRV_GRPC_DEADLINE_EXCEEDED || a.code == NHB__SRV_GRPC_NOT_FOUND ||
         a.code == NHB__SRV_GRPC_RESOURCE_EXHAUSTED || a.code == NHB__SRV_GRPC_UNIMPLEMENTED ||
         a.code == NHB__SRV_GRPC_INTERNAL);
  if (a.code == NHB__SRV_GRPC_OK) {
    assert(!early && !g.bad_timeout);
    assert(a.msg_len == 0 && a.body_len >= 5 && a.body_off + a.body_len <= out.len);
    const uint8_t* p = (const uint8_t*)out.p + a.body_off;
    uint32_t n = (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | (uint32_t)p[4];
    assert(p[0] == 0 && n == a.body_len - 5);
  } else {
    assert(a.body_len == 0 && a.msg_len > 0 && a.msg_off + a.msg_len <= out.len);
    for (size_t i = 0; i < a.msg_len; i++) {
      char ch = out.p[a.msg_off + i];
      assert(ch >= 0x20 && ch <= 0x7e);
    }
  }
  assert(a.delay_ns <= 2 * MAX_DELAY_NS);
  if (g.timeout_ns) assert(a.delay_ns <= g.timeout_ns);
  nhb__srv_buf_free(&out);
  return 0;
}
