/* transport_tcp.c: plain TCP. Bytes pass straight through to the session.
 *
 * Writes go out from the caller's stack with one non-blocking send(); only
 * the rest of a write that would block is handed to uv_write(), so the loop
 * watches for writability only when the socket buffer is actually full.
 */
#include <errno.h>
#include <sys/socket.h>

#include "client/client.h"

/* The descriptor is looked up once per connection, not per write. */
static void tcp_on_connected(nhb__conn* c) {
  uv_os_fd_t fd;
  int r = uv_fileno((const uv_handle_t*)&c->tcp, &fd);
  if (r < 0) {
    nhb__conn_fail(c, r, NHB_CTR_POOL_CONNECTION_FAILURE);
    return;
  }
  c->sock_fd = fd;
  nhb__conn_ready(c);
}

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
  c->worker->stats.counters[NHB_CTR_UPSTREAM_CX_TX_BYTES_TOTAL] += len;
  int n = 0;
  if (!c->write_pending) {
    /* What uv_try_write() does, without its two layers of checks that a
     * connection with no write outstanding does not need (about 50
     * instructions per request). MSG_NOSIGNAL: a peer that reset the
     * connection is an error return, never SIGPIPE (which Python ignores
     * anyway, so this changes nothing for nhbench itself). The handle is a
     * TCP socket or a Unix stream socket; send() serves both. */
    ssize_t sent;
    do {
      sent = send(c->sock_fd, data, len, MSG_DONTWAIT | MSG_NOSIGNAL);
    } while (sent < 0 && errno == EINTR);
    if (sent < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK) return -errno;
    } else if ((size_t)sent == len) {
      return 0;
    } else {
      n = (int)sent;
    }
  }
  uv_buf_t buf = uv_buf_init((char*)data + n, (unsigned)(len - (size_t)n));
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
