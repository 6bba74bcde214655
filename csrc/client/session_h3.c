/* session_h3.c: HTTP/3 over QUIC (ngtcp2 + nghttp3) (issue 14, docs/protocols.md).
 *
 * SEAM: the HTTP/3 engineer replaces this file. Until then a run with protocol
 * http3 is refused at creation.
 */
#include "client/client.h"

int nhb__h3_run_init(nhb_run* run, char* err, size_t err_len) {
  nhb_protocol_t p = run->config.protocol;
  if (p != NHB_PROTO_HTTP3) return 0;
  if (err) snprintf(err, err_len, "protocol: HTTP/3 is not built yet");
  return NHB_EINVAL;
}

void nhb__h3_run_free(nhb_run* run) { NHB__UNUSED(run); }

void nhb__h3_conn_free(nhb__conn* c) { NHB__UNUSED(c); }

static int h3_open(nhb__conn* c) {
  NHB__UNUSED(c);
  return NHB_EPROTO;
}

static int h3_send(nhb__conn* c, nhb__slot* s) {
  NHB__UNUSED(c);
  NHB__UNUSED(s);
  return NHB_EPROTO;
}

static int h3_on_data(nhb__conn* c, const char* data, size_t len) {
  NHB__UNUSED(c);
  NHB__UNUSED(data);
  NHB__UNUSED(len);
  return NHB_EPROTO;
}

static int h3_on_eof(nhb__conn* c, int err) {
  NHB__UNUSED(c);
  return err == UV_EOF ? 0 : err;
}

const nhb__session_vtable nhb__session_h3 = {
    "h3", h3_open, h3_send, h3_on_data, h3_on_eof, NULL, NULL, NULL,
};
