/* server_proxy.c: TCP proxies, like Fortio's -P "local dest".
 *
 * Every connection accepted on a proxy listener gets a second socket,
 * connected to the listener's destination; once it is up, the bytes read on
 * either side are written to the other. Reads go into the worker's shared
 * read buffer and out with one uv_try_write; what the other socket cannot
 * take at once is copied into that direction's own buffer (grown once, to at
 * most one read, and reused) and the side it came from stops reading until
 * it is written. So a peer that does not read holds at most one read buffer
 * per direction here, and back-pressure reaches the sender through TCP.
 *
 * Half-close: EOF on one side shuts the other side's write half down (after
 * what is pending), and the other direction goes on; once both directions
 * have ended, both sockets close. A read or write error on either side
 * closes both. A destination that refuses, or does not answer within
 * NHB__SRV_PROXY_CONNECT_MS, closes the client's connection (counted in
 * proxy_connect_errors). An idle pair stays open (a proxy carries whatever
 * protocol its clients speak, idle or not), but one whose bytes have waited
 * for idle_timeout on a peer that takes none is closed: otherwise a
 * destination that never reads would hold the pair, and its client's FIN
 * (not read while reading is stopped), forever.
 *
 * Proxy connections are accepted by nhb__srv_accept() (server_conn.c) and
 * take two slots of max_connections, one per descriptor.
 *
 * The same pair carries a forwarded connection (forward_prefix: Fortio's
 * web UI on its echo port): an HTTP/1.x connection whose request head was
 * under the prefix is handed over by nhb__srv_forward_open(). Its
 * destination first receives a PROXY protocol v1 line (the client's address,
 * which the destination trusts on this connection only, and so judges the
 * real client, not this server) and the request as parsed so far; then bytes
 * both ways. A forwarded pair is not counted in the proxy statistics (those
 * are the -P proxies'), and is closed after idle_timeout without a byte
 * either way (the destination answers one request per connection, so an
 * idle pair is a client that holds it).
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/server_internal.h"

/* One side of a pair: its socket, and the write into it of what the other
 * side read. */
typedef struct proxy_side {
  uv_tcp_t tcp;
  uv_write_t wreq;
  uv_shutdown_t sreq;
  nhb__srv_buf pend; /* read from the other side, not yet taken by this socket */
  uint8_t writing;   /* wreq is in flight */
  uint8_t eof;       /* this side's peer ended its sending */
  uint8_t shut;      /* this side's write half is shut down (or being) */
  uint8_t shut_done;
} proxy_side;

struct nhb__srv_proxy {
  proxy_side side[2]; /* 0: the client, 1: the destination */
  uv_connect_t connect;
  nhb__srv_worker* w;
  nhb__srv_proxy *prev, *next;
  uint64_t start_ms;
  uint64_t progress_ms; /* a write began waiting, or one drained */
  uint64_t read_ms;     /* forwarded: the last read on either side */
  uint8_t connected, closing, nclosed;
  uint8_t forward; /* a forwarded HTTP connection, not a -P proxy's */
  uint8_t failed;  /* forwarded, the destination unreachable: answering 502 */
};

static void proxy_on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);

static int side_of(const nhb__srv_proxy* p, const uv_handle_t* h) { return h == (const uv_handle_t*)&p->side[1].tcp; }

static void proxy_free(uv_handle_t* handle) {
  nhb__srv_proxy* p = handle->data;
  if (++p->nclosed < 2) return;
  nhb__srv_worker* w = p->w;
  if (!p->forward) nhb__srv_bump(&w->counters.proxy_connections_active, (uint64_t)-1);
  atomic_fetch_sub_explicit(&w->server->conns_open, 2, memory_order_relaxed);
  nhb__srv_buf_free(&p->side[0].pend);
  nhb__srv_buf_free(&p->side[1].pend);
  free(p);
}

/* Closes both sockets; pending writes, shutdowns and the connect are
 * cancelled, and their callbacks see `closing`. */
static void proxy_close(nhb__srv_proxy* p) {
  if (p->closing) return;
  p->closing = 1;
  nhb__srv_worker* w = p->w;
  if (p->prev) p->prev->next = p->next;
  else w->proxies = p->next;
  if (p->next) p->next->prev = p->prev;
  p->prev = p->next = NULL;
  uv_close((uv_handle_t*)&p->side[0].tcp, proxy_free);
  uv_close((uv_handle_t*)&p->side[1].tcp, proxy_free);
}

static void proxy_alloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf) {
  NHB__UNUSED(suggested);
  nhb__srv_worker* w = handle->loop->data;
  buf->base = w->rbuf;
  buf->len = NHB__SRV_READ_BUFFER;
}

static void maybe_done(nhb__srv_proxy* p) {
  if (p->side[0].shut_done && p->side[1].shut_done) proxy_close(p);
}

static void on_shutdown(uv_shutdown_t* req, int status) {
  nhb__srv_proxy* p = req->handle->data;
  if (p->closing) return;
  if (status < 0) {
    proxy_close(p);
    return;
  }
  p->side[side_of(p, (uv_handle_t*)req->handle)].shut_done = 1;
  maybe_done(p);
}

/* Side i's peer sent its FIN and everything it sent before is written to
 * side j: pass the FIN on. */
static void pass_eof(nhb__srv_proxy* p, int j) {
  proxy_side* d = &p->side[j];
  if (d->shut) return;
  d->shut = 1;
  if (uv_shutdown(&d->sreq, (uv_stream_t*)&d->tcp, on_shutdown) < 0) proxy_close(p);
}

static int start_reading(nhb__srv_proxy* p, int i) {
  if (uv_read_start((uv_stream_t*)&p->side[i].tcp, proxy_alloc, proxy_on_read) < 0) {
    proxy_close(p);
    return -1;
  }
  return 0;
}

static void on_written(uv_write_t* req, int status) {
  nhb__srv_proxy* p = req->handle->data;
  if (p->closing) return;
  int j = side_of(p, (uv_handle_t*)req->handle), i = 1 - j;
  proxy_side* d = &p->side[j];
  d->writing = 0;
  d->pend.len = 0;
  p->progress_ms = uv_now(&p->w->loop);
  if (status < 0) {
    proxy_close(p);
    return;
  }
  /* The direction i -> j drained: read side i again, or pass its FIN on. */
  if (p->side[i].eof) pass_eof(p, j);
  else start_reading(p, i);
}

static void proxy_on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
  nhb__srv_proxy* p = stream->data;
  if (p->closing) return;
  int i = side_of(p, (uv_handle_t*)stream), j = 1 - i;
  proxy_side* d = &p->side[j];
  if (nread > 0) {
    nhb__srv_worker* w = p->w;
    if (!p->forward) nhb__srv_bump(i == 0 ? &w->counters.proxy_bytes_up : &w->counters.proxy_bytes_down, (uint64_t)nread);
    else p->read_ms = uv_now(&w->loop);
    uv_buf_t b = uv_buf_init(buf->base, (unsigned)nread);
    int n = uv_try_write((uv_stream_t*)&d->tcp, &b, 1);
    if (n == UV_EAGAIN || n == UV_ENOSYS) n = 0;
    if (n < 0) {
      proxy_close(p);
      return;
    }
    if (n == nread) return;
    /* The rest waits in this direction's buffer; side i stops reading until
     * it is written (at most one read is ever held). */
    size_t rest = (size_t)nread - (size_t)n;
    d->pend.len = 0;
    if (nhb__srv_buf_append(&d->pend, buf->base + n, rest) < 0) {
      proxy_close(p);
      return;
    }
    uv_read_stop(stream);
    b = uv_buf_init(d->pend.p, (unsigned)rest);
    if (uv_write(&d->wreq, (uv_stream_t*)&d->tcp, &b, 1, on_written) < 0) {
      proxy_close(p);
      return;
    }
    /* The stall clock starts when the first write begins to wait. */
    if (!p->side[i].writing) p->progress_ms = uv_now(&p->w->loop);
    d->writing = 1;
  } else if (nread == UV_EOF) {
    uv_read_stop(stream);
    p->side[i].eof = 1;
    if (!d->writing) pass_eof(p, j);
  } else if (nread < 0) {
    proxy_close(p);
  }
}

static void on_bad_gateway_written(uv_write_t* req, int status) {
  NHB__UNUSED(status);
  nhb__srv_proxy* p = req->handle->data;
  if (!p->closing) proxy_close(p);
}

/* A forwarded request whose destination cannot be reached gets an answer
 * (as a reverse proxy gives), not a bare close the client cannot tell from a
 * crash; a -P proxy's client is a TCP stream and is just closed. */
static void connect_failed(nhb__srv_proxy* p) {
#define BAD_GATEWAY_BODY "the forwarded path's server is not reachable\n"
  static char bad_gateway[] =
      "HTTP/1.1 502 Bad Gateway\r\nServer: nhbench\r\nContent-Type: text/plain\r\nContent-Length: 45\r\n"
      "Connection: close\r\n\r\n" BAD_GATEWAY_BODY;
  _Static_assert(sizeof BAD_GATEWAY_BODY - 1 == 45, "Content-Length above");
  if (!p->forward) {
    nhb__srv_bump(&p->w->counters.proxy_connect_errors, 1);
    proxy_close(p);
    return;
  }
  /* Connected is set so that the sweep's connect time-out does not fire
   * again (and `failed` so that a late connect is not used); the idle
   * time-out still closes a client that does not read. */
  p->connected = p->failed = 1;
  p->progress_ms = uv_now(&p->w->loop);
  p->side[0].writing = 1;
  uv_buf_t b = uv_buf_init(bad_gateway, (unsigned)(sizeof bad_gateway - 1));
  if (uv_write(&p->side[0].wreq, (uv_stream_t*)&p->side[0].tcp, &b, 1, on_bad_gateway_written) < 0) proxy_close(p);
}

static void on_connect(uv_connect_t* req, int status) {
  nhb__srv_proxy* p = req->data;
  if (p->closing || p->failed) return;
  if (status < 0) {
    connect_failed(p);
    return;
  }
  p->connected = 1;
  uv_tcp_nodelay(&p->side[1].tcp, 1);
  proxy_side* d = &p->side[1];
  if (d->pend.len) {
    /* Forwarded: what the client sent before the hand-over goes first; the
     * client is read once it is written (on_written). */
    uv_buf_t b = uv_buf_init(d->pend.p, (unsigned)d->pend.len);
    if (uv_write(&d->wreq, (uv_stream_t*)&d->tcp, &b, 1, on_written) < 0) {
      proxy_close(p);
      return;
    }
    d->writing = 1;
    p->progress_ms = uv_now(&p->w->loop);
    start_reading(p, 1);
    return;
  }
  if (start_reading(p, 0) == 0) start_reading(p, 1);
}

/* Opens the pair on the client's socket fd and connects it to dest; p is
 * zeroed but for side[1].pend (what to send first) and `forward`. */
static void pair_start(nhb__srv_worker* w, nhb__srv_proxy* p, int fd, const nhb_sockaddr* dest) {
  p->w = w;
  p->start_ms = uv_now(&w->loop);
  uv_tcp_init(&w->loop, &p->side[0].tcp);
  uv_tcp_init(&w->loop, &p->side[1].tcp);
  p->side[0].tcp.data = p->side[1].tcp.data = p;
  p->connect.data = p;
  p->next = w->proxies;
  if (w->proxies) w->proxies->prev = p;
  w->proxies = p;
  p->read_ms = p->start_ms;
  /* From here proxy_free() gives back what the pair holds. */
  if (!p->forward) nhb__srv_bump(&w->counters.proxy_connections_active, 1);
  if (uv_tcp_open(&p->side[0].tcp, fd) < 0) {
    close(fd); /* not the handle's yet */
    proxy_close(p);
    return;
  }
  if (!p->forward) nhb__srv_bump(&w->counters.proxy_connections, 1);
  uv_tcp_nodelay(&p->side[0].tcp, 1);
  if (uv_tcp_connect(&p->connect, &p->side[1].tcp, (const struct sockaddr*)dest->bytes, on_connect) < 0) {
    /* Out of descriptors, or the like: as unreachable. */
    connect_failed(p);
  }
}

void nhb__srv_proxy_open(nhb__srv_worker* w, int fd, int index) {
  nhb__srv_proxy* p = calloc(1, sizeof(*p));
  if (!p) {
    close(fd);
    atomic_fetch_sub_explicit(&w->server->conns_open, 2, memory_order_relaxed);
    return;
  }
  pair_start(w, p, fd, &w->server->config.tcp_proxy_dest[index]);
}

/* "PROXY TCP4 src dst sport dport\r\n" (or TCP6) for the client on fd, or
 * "PROXY UNKNOWN\r\n" when its addresses cannot be had. */
static int proxy_line(int fd, nhb__srv_buf* b) {
  struct sockaddr_storage peer, local;
  socklen_t plen = sizeof(peer), llen = sizeof(local);
  char src[INET6_ADDRSTRLEN], dst[INET6_ADDRSTRLEN];
  unsigned sport = 0, dport = 0;
  const char* fam = NULL;
  if (getpeername(fd, (struct sockaddr*)&peer, &plen) == 0 && getsockname(fd, (struct sockaddr*)&local, &llen) == 0 &&
      peer.ss_family == local.ss_family) {
    if (peer.ss_family == AF_INET) {
      const struct sockaddr_in *a = (const struct sockaddr_in*)&peer, *l = (const struct sockaddr_in*)&local;
      if (inet_ntop(AF_INET, &a->sin_addr, src, sizeof(src)) && inet_ntop(AF_INET, &l->sin_addr, dst, sizeof(dst)))
        fam = "TCP4", sport = ntohs(a->sin_port), dport = ntohs(l->sin_port);
    } else if (peer.ss_family == AF_INET6) {
      const struct sockaddr_in6 *a = (const struct sockaddr_in6*)&peer, *l = (const struct sockaddr_in6*)&local;
      if (inet_ntop(AF_INET6, &a->sin6_addr, src, sizeof(src)) && inet_ntop(AF_INET6, &l->sin6_addr, dst, sizeof(dst)))
        fam = "TCP6", sport = ntohs(a->sin6_port), dport = ntohs(l->sin6_port);
    }
  }
  if (!fam) return nhb__srv_buf_append(b, "PROXY UNKNOWN\r\n", 15);
  return nhb__srv_buf_printf(b, "PROXY %s %s %s %u %u\r\n", fam, src, dst, sport, dport);
}

/* The request head as parsed: the request line and every header field, as
 * captured (names and values unchanged, one field a line). */
static int request_head(const nhb__srv_conn* c, nhb__srv_buf* b) {
  const nhb__srv_req* q = &c->req;
  const char* method = llhttp_method_name((llhttp_method_t)c->parser.method);
  if (nhb__srv_buf_printf(b, "%s ", method) < 0 || nhb__srv_buf_append(b, q->buf.p + q->url_off, q->url_len) < 0 ||
      nhb__srv_buf_printf(b, " HTTP/%u.%u\r\n", (unsigned)c->parser.http_major, (unsigned)c->parser.http_minor) < 0)
    return NHB_ENOMEM;
  for (size_t i = 0; i < q->nhdrs; i++) {
    const nhb__srv_hdr_pos* h = &q->hdrs[i];
    if (nhb__srv_buf_append(b, q->buf.p + h->name_off, h->name_len) < 0 || nhb__srv_buf_append(b, ": ", 2) < 0 ||
        nhb__srv_buf_append(b, q->buf.p + h->value_off, h->value_len) < 0 || nhb__srv_buf_append(b, "\r\n", 2) < 0)
      return NHB_ENOMEM;
  }
  return nhb__srv_buf_append(b, "\r\n", 2);
}

void nhb__srv_forward_open(nhb__srv_conn* c, const char* rest, size_t rest_len) {
  nhb__srv_worker* w = c->w;
  nhb_server* s = w->server;
  /* Two descriptors from here; c's one is given back when it closes. */
  uint64_t open_now = atomic_fetch_add_explicit(&s->conns_open, 2, memory_order_relaxed) + 2;
  if (open_now > s->max_connections + 1) {
    nhb__srv_bump(&w->counters.connections_refused, 1);
    goto refused;
  }
  int fd;
  if (uv_fileno(&c->h.handle, &fd) < 0) goto refused;
  nhb__srv_proxy* p = calloc(1, sizeof(*p));
  if (!p) goto refused;
  nhb__srv_buf* first = &p->side[1].pend;
  int dupfd = -1;
  if (proxy_line(fd, first) < 0 || request_head(c, first) < 0 || nhb__srv_buf_append(first, rest, rest_len) < 0 ||
      (dupfd = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0) {
    nhb__srv_buf_free(first);
    free(p);
    goto refused;
  }
  /* c's handle closes its descriptor; the socket lives on in dupfd. */
  nhb__srv_conn_close(c);
  p->forward = 1;
  pair_start(w, p, dupfd, &s->config.forward_dest);
  return;
refused:
  atomic_fetch_sub_explicit(&s->conns_open, 2, memory_order_relaxed);
  nhb__srv_conn_close(c);
}

void nhb__srv_proxy_sweep(nhb__srv_worker* w) {
  uint64_t now = uv_now(&w->loop);
  uint64_t idle_ns = w->server->config.idle_timeout_ns;
  uint64_t idle_ms = idle_ns / NHB__NS_PER_MS;
  if (idle_ns && !idle_ms) idle_ms = 1;
  nhb__srv_proxy* next;
  for (nhb__srv_proxy* p = w->proxies; p; p = next) {
    next = p->next;
    if (!p->connected && now - p->start_ms >= NHB__SRV_PROXY_CONNECT_MS) {
      connect_failed(p);
    } else if (p->forward && idle_ms && now - p->read_ms >= idle_ms) {
      proxy_close(p);
    } else if (idle_ms && (p->side[0].writing || p->side[1].writing) && now - p->progress_ms >= idle_ms) {
      proxy_close(p);
    }
  }
}

void nhb__srv_proxy_close_all(nhb__srv_worker* w) {
  while (w->proxies) proxy_close(w->proxies);
}
