/* transport_tcp.c: plain TCP. Bytes pass straight through to the session.
 *
 * Writes go out from the caller's stack with uv_try_write(); only the rest of
 * a write that would block is handed to uv_write(), so the loop watches for
 * writability only when the socket buffer is actually full.
 */
#include "client/client.h"

static void tcp_on_connected(nhb__conn* c) { nhb__conn_ready(c); }

static int tcp_on_read(nhb__conn* c, const char* data, size_t len) {
  return c->session->on_data(c, data, len);
}

static void tcp_write_done(uv_write_t* req, int status) {
  nhb__conn* c = (nhb__conn*)req->handle->data;
  c->write_pending = 0;
  if (c->state != NHB__CX_READY || status == UV_ECANCELED) return;
  if (status < 0) {
    nhb__conn_fail(c, status, NHB_CTR_STREAM_RESETS);
  } else if (c->session->on_writable) {
    c->session->on_writable(c);
  }
}

static int tcp_write(nhb__conn* c, const char* data, size_t len) {
  uv_stream_t* stream = (uv_stream_t*)&c->tcp;
  uv_buf_t buf = uv_buf_init((char*)data, (unsigned)len);
  c->worker->stats.counters[NHB_CTR_UPSTREAM_CX_TX_BYTES_TOTAL] += len;
  int n = c->write_pending ? UV_EAGAIN : uv_try_write(stream, &buf, 1);
  if (n == (int)len) return 0;
  if (n < 0 && n != UV_EAGAIN) return n;
  if (n < 0) n = 0;
  buf = uv_buf_init((char*)data + n, (unsigned)(len - (size_t)n));
  int r = uv_write(&c->write_req, stream, &buf, 1, tcp_write_done);
  if (r == 0) c->write_pending = 1;
  return r;
}

const nhb__transport_vtable nhb__transport_tcp = {
    "tcp",
    tcp_on_connected,
    tcp_on_read,
    tcp_write,
    NULL,
    NULL,
    NULL,
};
