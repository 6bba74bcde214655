/* server_echo.c: TCP and UDP echo listeners, like Fortio's tcp-echo and
 * udp-echo.
 *
 * TCP: every byte read is written back. Reads go to the worker's shared
 * read buffer; when the socket cannot take the echo at once the rest is
 * copied and reading stops until it is written, so a client that does not
 * read cannot make the server buffer without bound. At EOF the write side is
 * shut down after the pending echo, then the connection is closed.
 *
 * TCP echo connections are accepted by nhb__srv_accept() (server_conn.c),
 * like HTTP ones, and count against max_connections.
 *
 * UDP: every datagram is sent back to its sender with a non-blocking send;
 * when the socket buffer is full the reply is dropped, as UDP may.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/server_internal.h"

struct nhb__srv_echo_conn {
  union {
    uv_handle_t handle;
    uv_stream_t stream;
    uv_tcp_t tcp;
  } h;
  uv_shutdown_t shutdown;
  nhb__srv_worker* w;
  nhb__srv_echo_conn *prev, *next;
  int closing;
};

typedef struct echo_write {
  uv_write_t req;
  nhb__srv_echo_conn* e;
  char data[];
} echo_write;

static void echo_free(uv_handle_t* handle) {
  nhb__srv_echo_conn* e = handle->data;
  /* Echo connections hold descriptors too: they count against
   * max_connections with the HTTP ones. */
  atomic_fetch_sub_explicit(&e->w->server->conns_open, 1, memory_order_relaxed);
  free(e);
}

static void echo_close(nhb__srv_echo_conn* e) {
  if (e->closing) return;
  e->closing = 1;
  nhb__srv_worker* w = e->w;
  if (e->prev) e->prev->next = e->next;
  else w->echo_conns = e->next;
  if (e->next) e->next->prev = e->prev;
  uv_close(&e->h.handle, echo_free);
}

static void echo_alloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf) {
  NHB__UNUSED(suggested);
  nhb__srv_worker* w = handle->loop->data;
  buf->base = w->rbuf;
  buf->len = NHB__SRV_READ_BUFFER;
}

static void echo_on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);

static void echo_on_write(uv_write_t* req, int status) {
  echo_write* wr = (echo_write*)req;
  nhb__srv_echo_conn* e = wr->e;
  free(wr);
  if (e->closing) return;
  if (status < 0) {
    echo_close(e);
    return;
  }
  if (e->h.stream.write_queue_size == 0) uv_read_start(&e->h.stream, echo_alloc, echo_on_read);
}

static void echo_on_shutdown(uv_shutdown_t* req, int status) {
  NHB__UNUSED(status);
  echo_close(req->data);
}

static void echo_on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
  nhb__srv_echo_conn* e = stream->data;
  if (nread > 0) {
    nhb__srv_bump(&e->w->counters.tcp_echo_bytes, (uint64_t)nread);
    uv_buf_t b = uv_buf_init(buf->base, (unsigned)nread);
    int n = uv_try_write(stream, &b, 1);
    if (n == UV_EAGAIN || n == UV_ENOSYS) n = 0;
    if (n < 0) {
      echo_close(e);
      return;
    }
    if (n == nread) return;
    size_t rest = (size_t)nread - (size_t)n;
    echo_write* wr = malloc(sizeof(*wr) + rest);
    if (!wr) {
      echo_close(e);
      return;
    }
    wr->e = e;
    memcpy(wr->data, buf->base + n, rest);
    b = uv_buf_init(wr->data, (unsigned)rest);
    if (uv_write(&wr->req, stream, &b, 1, echo_on_write) < 0) {
      free(wr);
      echo_close(e);
      return;
    }
    uv_read_stop(stream);
  } else if (nread == UV_EOF) {
    uv_read_stop(stream);
    e->shutdown.data = e;
    if (uv_shutdown(&e->shutdown, stream, echo_on_shutdown) < 0) echo_close(e);
  } else if (nread < 0) {
    echo_close(e);
  }
}

void nhb__srv_echo_open(nhb__srv_worker* w, int fd) {
  nhb__srv_echo_conn* e = calloc(1, sizeof(*e));
  if (!e) {
    close(fd);
    atomic_fetch_sub_explicit(&w->server->conns_open, 1, memory_order_relaxed);
    return;
  }
  e->w = w;
  uv_tcp_init(&w->loop, &e->h.tcp);
  e->h.handle.data = e;
  e->next = w->echo_conns;
  if (w->echo_conns) w->echo_conns->prev = e;
  w->echo_conns = e;
  if (uv_tcp_open(&e->h.tcp, fd) < 0) {
    close(fd); /* not the handle's yet */
    echo_close(e);
    return;
  }
  uv_tcp_nodelay(&e->h.tcp, 1);
  if (uv_read_start(&e->h.stream, echo_alloc, echo_on_read) < 0) echo_close(e);
}

static void udp_on_recv(uv_udp_t* handle, ssize_t nread, const uv_buf_t* buf, const struct sockaddr* addr,
                        unsigned flags) {
  nhb__srv_worker* w = handle->loop->data;
  /* nread == 0 with no address means "nothing more to read", not an empty
   * datagram; a truncated datagram (larger than the buffer) is dropped. */
  if (nread < 0 || addr == NULL || (flags & UV_UDP_PARTIAL)) return;
  nhb__srv_bump(&w->counters.udp_echo_packets, 1);
  uv_buf_t b = uv_buf_init(buf->base, (unsigned)nread);
  uv_udp_try_send(handle, &b, 1, addr);
}

int nhb__srv_echo_start(nhb__srv_worker* w, nhb__srv_listener* l) {
  NHB__UNUSED(w);
  return uv_udp_recv_start(&l->h.udp, echo_alloc, udp_on_recv);
}

void nhb__srv_echo_close_all(nhb__srv_worker* w) {
  while (w->echo_conns) echo_close(w->echo_conns);
}
