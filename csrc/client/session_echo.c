/* session_echo.c: tcp:// and udp:// echo load (issue 14, docs/protocols.md).
 *
 * SEAM: the echo engineer replaces this file. Until then a run with protocol
 * tcp or udp is refused at creation.
 */
#include "client/client.h"

int nhb__echo_run_init(nhb_run* run, char* err, size_t err_len) {
  nhb_protocol_t p = run->config.protocol;
  if (p != NHB_PROTO_TCP && p != NHB_PROTO_UDP) return 0;
  if (err) snprintf(err, err_len, "protocol: tcp:// and udp:// echo are not built yet");
  return NHB_EINVAL;
}

void nhb__echo_run_free(nhb_run* run) { NHB__UNUSED(run); }

void nhb__echo_conn_free(nhb__conn* c) { NHB__UNUSED(c); }

static int echo_open(nhb__conn* c) {
  NHB__UNUSED(c);
  return NHB_EPROTO;
}

static int echo_send(nhb__conn* c, nhb__slot* s) {
  NHB__UNUSED(c);
  NHB__UNUSED(s);
  return NHB_EPROTO;
}

static int echo_on_data(nhb__conn* c, const char* data, size_t len) {
  NHB__UNUSED(c);
  NHB__UNUSED(data);
  NHB__UNUSED(len);
  return NHB_EPROTO;
}

static int echo_on_eof(nhb__conn* c, int err) {
  NHB__UNUSED(c);
  return err == UV_EOF ? 0 : err;
}

const nhb__session_vtable nhb__session_tcp_echo = {
    "tcp-echo", echo_open, echo_send, echo_on_data, echo_on_eof, NULL, NULL, NULL,
};

const nhb__session_vtable nhb__session_udp_echo = {
    "udp-echo", echo_open, echo_send, echo_on_data, echo_on_eof, NULL, NULL, NULL,
};
