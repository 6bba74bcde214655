/* server_conn.c: the test server's HTTP connections (TCP or unix): accepting,
 * reading, writing, closing, time-outs, and the choice of protocol.
 *
 * A connection's bytes pass through TLS when the server has it
 * (server_tls.c), then to its protocol: HTTP/1.1 (server_h1.c) or HTTP/2
 * (server_h2.c). Which one is decided by ALPN on TLS and otherwise by the
 * first bytes: the HTTP/2 client preface ("PRI * HTTP/2.0...") means HTTP/2
 * with prior knowledge (h2c), anything else HTTP/1.1, on the same port. An
 * HTTP/1.1 request with `Upgrade: h2c` switches the connection to HTTP/2.
 *
 * Input is read into the worker's one read buffer and handed to the
 * protocol at once. Writes go out with one uv_try_write; what the socket
 * cannot take is queued with libuv, copied when it lives in a buffer the
 * connection reuses, referenced when it is one of the server's own regions.
 *
 * Time-outs are checked by a per-worker sweep over the connection list
 * rather than by a timer per connection.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "server/server_internal.h"

static void conn_alloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf);
static void conn_on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);

/* A write that did not fit into the socket at once; owns copies of the
 * bytes that lived in the connection's out buffer. */
typedef struct nhb__srv_write_req {
  uv_write_t req;
  nhb__srv_conn* c;
  char data[];
} nhb__srv_write_req;

static const char h2_preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
#define H2_PREFACE_LEN 24

size_t nhb__srv_conn_queued(const nhb__srv_conn* c) {
  size_t n = c->h.stream.write_queue_size;
  if (c->tls) n += nhb__srv_tls_pending(c);
  return n;
}

/* Input that arrived but was not handed to the protocol yet. */
int nhb__srv_conn_has_input(const nhb__srv_conn* c) { return c->stash != NULL || (c->tls && nhb__srv_tls_has_input(c)); }

/* ---- closing -------------------------------------------------------------------- */

static void conn_free(uv_handle_t* handle) {
  nhb__srv_conn* c = handle->data;
  if (c->kind == NHB__SRV_CONN_HTTP) nhb__srv_bump(&c->w->counters.connections_active, (uint64_t)-1);
  if (c->kind != NHB__SRV_CONN_ADMIN) atomic_fetch_sub_explicit(&c->w->server->conns_open, 1, memory_order_relaxed);
  /* Its descriptor is closed by now: the admin reserve takes it back. */
  if (c->spare_fd) nhb__srv_admin_reserve_refill(c->w);
  if (c->tls) {
    /* Every TLS connection ends up counted once: as a handshake or as a
     * connection that never completed one (an alert, garbage, a time-out,
     * a client that went away). */
    if (!nhb__srv_tls_handshake_done(c)) nhb__srv_bump(&c->w->counters.tls_handshake_errors, 1);
    nhb__srv_tls_conn_free(c);
  }
  nhb__srv_h2_conn_free(c);
  nhb__srv_buf_free(&c->req.buf);
  free(c->req.hdrs);
  free(c->q);
  nhb__srv_buf_free(&c->out);
  free(c->stash);
  free(c);
}

void nhb__srv_conn_close(nhb__srv_conn* c) {
  if (c->closing) return;
  if (NHB__UNLIKELY(c->proto == NHB__SRV_PROTO_H3)) {
    nhb__srv_h3_conn_close(c);
    return;
  }
  c->closing = 1;
  nhb__srv_worker* w = c->w;
  if (c->prev) c->prev->next = c->next;
  else w->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  c->prev = c->next = NULL;
  nhb__srv_heap_remove(w, c);
  nhb__srv_h1_drop(c);
  w->delayed -= nhb__srv_h2_waiting(c);
  /* Pending writes and the shutdown are cancelled; their callbacks run
   * before conn_free(), and see `closing`. */
  uv_close(&c->h.handle, conn_free);
}

static void on_shutdown(uv_shutdown_t* req, int status) {
  nhb__srv_conn* c = req->data;
  if (c->closing) return;
  if (status < 0) {
    nhb__srv_conn_close(c);
    return;
  }
  /* Keep reading, and discarding, until the client closes: closing with
   * unread input would send a reset that can destroy the final response
   * before the client reads it. The sweep ends this after NHB__SRV_LINGER_MS. */
  c->lingering = 1;
  c->linger_start_ms = uv_now(&c->w->loop);
  if (!c->reading && uv_read_start(&c->h.stream, conn_alloc, conn_on_read) == 0) c->reading = 1;
  if (!c->reading) nhb__srv_conn_close(c);
}

/* The last response is queued for writing: shut the write side down after
 * it, then linger. */
void nhb__srv_conn_finish(nhb__srv_conn* c) {
  if (c->closing || c->finishing) return;
  if (c->tls) {
    /* close_notify, then every byte of ciphertext goes to the socket before
     * the shutdown that follows it. */
    nhb__srv_tls_shutdown(c);
    if (nhb__srv_tls_drain(c, 1) < 0) return;
  }
  if (c->reading) {
    uv_read_stop(&c->h.stream);
    c->reading = 0;
  }
  free(c->stash);
  c->stash = NULL;
  c->stash_len = c->stash_off = 0;
  c->shutdown.data = c;
  /* From here on input is discarded; until the writes are done, the idle
   * time-out (which write progress resets) applies, not the linger time. */
  c->finishing = 1;
  c->in_head = 0;
  if (uv_shutdown(&c->shutdown, &c->h.stream, on_shutdown) < 0) nhb__srv_conn_close(c);
}

/* ---- writing ---------------------------------------------------------------------- */

/* The socket took everything written so far: the protocol may go on. */
static void conn_output_ready(nhb__srv_conn* c) {
  if (c->proto == NHB__SRV_PROTO_H2) {
    nhb__srv_h2_send(c);
  } else if (c->tls && c->q_len > 0) {
    nhb__srv_conn_flush(c); /* the next slice of a large response */
  } else {
    nhb__srv_h1_resume(c);
  }
}

static void conn_on_write(uv_write_t* req, int status) {
  nhb__srv_write_req* wr = (nhb__srv_write_req*)req;
  nhb__srv_conn* c = wr->c;
  free(wr);
  if (c->closing) return;
  if (status < 0) {
    nhb__srv_conn_close(c);
    return;
  }
  c->last_active_ms = uv_now(&c->w->loop);
  if (c->finishing) return;
  if (c->tls && nhb__srv_tls_drain(c, 0) < 0) return;
  if (c->h.stream.write_queue_size == 0) conn_output_ready(c);
}

int nhb__srv_sock_write(nhb__srv_conn* c, uv_buf_t* bufs, unsigned nbufs, size_t total, const uint8_t* keep) {
  if (c->kind == NHB__SRV_CONN_HTTP) nhb__srv_bump(&c->w->counters.tx_bytes, total);
  int n = uv_try_write(&c->h.stream, bufs, nbufs);
  if (n == UV_EAGAIN || n == UV_ENOSYS) n = 0;
  if (n < 0) {
    nhb__srv_conn_close(c);
    return -1;
  }
  if ((size_t)n == total) return 0;
  /* The socket is full: queue the rest. Bytes that do not outlive the call
   * (the connection's `out`, which is reused, TLS and HTTP/2 staging) are
   * copied; the server's own regions are referenced. */
  unsigned first = 0;
  size_t skip = (size_t)n;
  while (skip >= bufs[first].len) skip -= bufs[first++].len;
  bufs[first].base += skip;
  bufs[first].len -= skip;
  size_t copy = 0;
  for (unsigned i = first; i < nbufs; i++)
    if (!keep || !keep[i]) copy += bufs[i].len;
  nhb__srv_write_req* wr = malloc(sizeof(*wr) + copy);
  if (!wr) {
    nhb__srv_conn_close(c);
    return -1;
  }
  wr->c = c;
  size_t at = 0;
  for (unsigned i = first; i < nbufs; i++) {
    if (!keep || !keep[i]) {
      memcpy(wr->data + at, bufs[i].base, bufs[i].len);
      bufs[i].base = wr->data + at;
      at += bufs[i].len;
    }
  }
  if (uv_write(&wr->req, &c->h.stream, bufs + first, nbufs - first, conn_on_write) < 0) {
    free(wr);
    nhb__srv_conn_close(c);
    return -1;
  }
  return 0;
}

int nhb__srv_conn_write(nhb__srv_conn* c, uv_buf_t* bufs, unsigned nbufs, size_t total, const uint8_t* keep) {
  if (c->tls) return nhb__srv_tls_write(c, bufs, nbufs);
  return nhb__srv_sock_write(c, bufs, nbufs, total, keep);
}

/* ---- the protocol's turn ------------------------------------------------------ */

/* Writes what the connection's protocol has ready: HTTP/1.1's queue in
 * request order, or HTTP/2's frames. Called after input was parsed, when a
 * delay or stall ends (the worker's delay timer), and when the socket
 * drained. */
void nhb__srv_conn_flush(nhb__srv_conn* c) {
  if (c->closing) return;
  if (c->proto >= NHB__SRV_PROTO_H2) {
    if (c->proto == NHB__SRV_PROTO_H2) nhb__srv_h2_flush(c);
    else nhb__srv_h3_flush(c);
    return;
  }
  nhb__srv_h1_flush(c);
}

/* ---- reading ----------------------------------------------------------- */

static void conn_alloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf) {
  NHB__UNUSED(suggested);
  nhb__srv_conn* c = handle->data;
  /* Safe to share: libuv calls alloc, read() and the read callback in a
   * row for one stream, and the callback consumes or copies every byte. */
  buf->base = c->w->rbuf;
  buf->len = NHB__SRV_READ_BUFFER;
}

void nhb__srv_conn_set_reading(nhb__srv_conn* c, int want) {
  if (want && !c->reading) {
    if (uv_read_start(&c->h.stream, conn_alloc, conn_on_read) == 0) c->reading = 1;
  } else if (!want && c->reading) {
    uv_read_stop(&c->h.stream);
    c->reading = 0;
  }
}

int nhb__srv_conn_set_proto(nhb__srv_conn* c, int proto) {
  nhb__srv_worker* w = c->w;
  c->proto = (uint8_t)proto;
  if (proto == NHB__SRV_PROTO_H2) {
    nhb__srv_bump(&w->counters.connections_http2, 1);
    return nhb__srv_h2_start(c);
  }
  nhb__srv_bump(&w->counters.connections_http1, 1);
  return 0;
}

void nhb__srv_conn_deliver(nhb__srv_conn* c, const char* p, size_t n) {
  if (NHB__LIKELY(c->proto == NHB__SRV_PROTO_H1)) {
    nhb__srv_h1_recv(c, p, n);
    return;
  }
  if (c->proto == NHB__SRV_PROTO_H2) {
    nhb__srv_h2_recv(c, p, n);
    return;
  }
  /* Not decided yet: the HTTP/2 client preface means HTTP/2 with prior
   * knowledge, anything else HTTP/1.1. The preface may arrive in pieces. */
  nhb_server* s = c->w->server;
  size_t have = c->preface_n;
  size_t m = n < H2_PREFACE_LEN - have ? n : H2_PREFACE_LEN - have;
  if (s->h2_ok && memcmp(p, h2_preface + have, m) == 0) {
    c->preface_n = (uint8_t)(have + m);
    if (c->preface_n < H2_PREFACE_LEN) return;
    if (nhb__srv_conn_set_proto(c, NHB__SRV_PROTO_H2) < 0) {
      nhb__srv_conn_close(c);
      return;
    }
    /* nghttp2 reads the preface itself. */
    nhb__srv_h2_recv(c, h2_preface, H2_PREFACE_LEN);
    if (!c->closing && n > m) nhb__srv_h2_recv(c, p + m, n - m);
    return;
  }
  if (!s->h1_ok) {
    c->proto = NHB__SRV_PROTO_H1;
    nhb__srv_h1_refuse(c);
    return;
  }
  nhb__srv_conn_set_proto(c, NHB__SRV_PROTO_H1);
  if (have == 0) {
    nhb__srv_h1_recv(c, p, n);
    return;
  }
  /* A prefix of the preface came first (rare): parse it with the rest. */
  char* joined = malloc(have + n);
  if (!joined) {
    nhb__srv_conn_close(c);
    return;
  }
  memcpy(joined, h2_preface, have);
  memcpy(joined + have, p, n);
  nhb__srv_h1_recv(c, joined, have + n);
  free(joined);
}

void nhb__srv_conn_eof(nhb__srv_conn* c) {
  if (c->proto == NHB__SRV_PROTO_H1 && c->q_len > 0 && c->head_sent == 0 && c->q[c->q_head].deadline_ns &&
      c->q[c->q_head].deadline_ns > nhb__now_ns()) {
    /* The response next in line waits for a delay or a stall, and the
     * client has closed: almost always it is gone (a timed-out client, or
     * one that asked for a long delay and left), and holding the
     * connection and its descriptor for the rest of the delay is how a few
     * hundred such clients used to exhaust the server's descriptors. The
     * connection and its waiting responses go now, as over HTTP/2; a client
     * that only half-closed loses these responses. */
    nhb__srv_conn_close(c);
    return;
  }
  if (c->proto == NHB__SRV_PROTO_H1 && (c->q_len > 0 || nhb__srv_conn_has_input(c)) && !c->finishing) {
    /* The client half-closed with requests still to answer: answer them,
     * then close. */
    nhb__srv_conn_set_reading(c, 0);
    c->eof = 1;
    return;
  }
  nhb__srv_conn_close(c);
}

static void conn_on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
  nhb__srv_conn* c = stream->data;
  NHB__UNUSED(buf);
  if (nread > 0) {
    if (c->kind == NHB__SRV_CONN_HTTP) nhb__srv_bump(&c->w->counters.rx_bytes, (uint64_t)nread);
    c->last_active_ms = uv_now(&c->w->loop);
    if (c->finishing || (c->close_after && c->proto != NHB__SRV_PROTO_H2)) return; /* discarded */
    c->w->now_ns = nhb__now_ns();
    if (c->tls) nhb__srv_tls_on_read(c, c->w->rbuf, (size_t)nread);
    else nhb__srv_conn_deliver(c, c->w->rbuf, (size_t)nread);
  } else if (nread < 0) {
    if (nread == UV_EOF && !c->finishing) {
      nhb__srv_conn_eof(c);
      return;
    }
    nhb__srv_conn_close(c);
  }
}

/* Starts a connection on an accepted socket; `spare`: it took one of the
 * admin endpoint's reserved descriptors. */
static void conn_open(nhb__srv_worker* w, nhb__srv_listener* l, int fd, int spare) {
  nhb_server* s = w->server;
  int http = l->kind != NHB__SRV_L_ADMIN;
  nhb__srv_conn* c = calloc(1, sizeof(*c));
  if (!c) {
    close(fd);
    if (http) atomic_fetch_sub_explicit(&s->conns_open, 1, memory_order_relaxed);
    if (spare) nhb__srv_admin_reserve_refill(w);
    return;
  }
  c->w = w;
  c->kind = !http ? NHB__SRV_CONN_ADMIN : l->kind == NHB__SRV_L_REDIRECT ? NHB__SRV_CONN_REDIRECT : NHB__SRV_CONN_HTTP;
  c->is_pipe = (uint8_t)l->is_pipe;
  c->spare_fd = (uint8_t)spare;
  c->heap_idx = SIZE_MAX;
  c->req.nh_idx = -1;
  c->req.settings_idx = -1;
  if (c->is_pipe) uv_pipe_init(&w->loop, &c->h.pipe, 0);
  else uv_tcp_init(&w->loop, &c->h.tcp);
  c->h.handle.data = c;
  c->next = w->conns;
  if (w->conns) w->conns->prev = c;
  w->conns = c;
  if (c->kind == NHB__SRV_CONN_HTTP) nhb__srv_bump(&w->counters.connections_active, 1);
  /* From here conn_free() gives back what the connection holds. */
  if ((c->is_pipe ? uv_pipe_open(&c->h.pipe, fd) : uv_tcp_open(&c->h.tcp, fd)) < 0) {
    close(fd); /* not the handle's yet */
    nhb__srv_conn_close(c);
    return;
  }
  if (c->kind == NHB__SRV_CONN_HTTP) nhb__srv_bump(&w->counters.connections_total, 1);
  if (!c->is_pipe) uv_tcp_nodelay(&c->h.tcp, 1);
  nhb__srv_h1_init(c);
  /* The admin endpoint and the redirectors speak HTTP/1.1 only; an HTTP
   * listener decides by the first bytes (or ALPN) unless it speaks only
   * HTTP/1.1. */
  if (c->kind != NHB__SRV_CONN_HTTP) c->proto = NHB__SRV_PROTO_H1;
  else if (!s->h2_ok && !s->ssl_ctx) nhb__srv_conn_set_proto(c, NHB__SRV_PROTO_H1);
  if (c->kind == NHB__SRV_CONN_HTTP && s->ssl_ctx && nhb__srv_tls_accept(c) < 0) {
    nhb__srv_conn_close(c);
    return;
  }
  /* The header time-out runs from the accept (the TLS handshake included)
   * until the first head is in. */
  c->in_head = 1;
  c->head_start_ms = c->last_active_ms = uv_now(&w->loop);
  nhb__srv_conn_set_reading(c, 1);
}

static int accept_fd(int lfd) { return accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC); }

/* accept() failed for want of descriptors (EMFILE, ENFILE, or the kernel's
 * memory). Unanswered, the pending connection would keep the listener
 * readable and the loop would spin on it. The admin endpoint gives up one of
 * its reserved descriptors and serves the connection; another listener gives
 * up its spare to take the connection and close it at once (the classic
 * trick), counted in connections_refused. When no reserve is left the
 * listener is paused for NHB__SRV_ACCEPT_RETRY_MS. Returns 1 when accepting may
 * go on. */
static int accept_starved(nhb__srv_worker* w, nhb__srv_listener* l) {
  if (l->kind == NHB__SRV_L_ADMIN) {
    for (int i = 0; i < NHB__SRV_ADMIN_RESERVE; i++) {
      if (w->admin_fds[i] < 0) continue;
      close(w->admin_fds[i]);
      w->admin_fds[i] = -1;
      int fd = accept_fd(l->fd);
      if (fd >= 0) {
        conn_open(w, l, fd, 1);
        return 1;
      }
      nhb__srv_admin_reserve_refill(w);
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
      break;
    }
  } else if (w->spare_fd >= 0) {
    close(w->spare_fd);
    int fd = accept_fd(l->fd);
    if (fd >= 0) {
      /* Counted before the close, so that a client that sees its connection
       * refused finds it in the statistics. */
      nhb__srv_bump(&w->counters.connections_refused, 1);
      close(fd);
    }
    int again = fd >= 0 || errno == EAGAIN || errno == EWOULDBLOCK;
    w->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    /* Another thread may have taken the descriptor meanwhile. */
    if (w->spare_fd >= 0 && again) return fd >= 0;
  }
  nhb__srv_listener_pause(w, l);
  return 0;
}

void nhb__srv_accept(nhb__srv_listener* l) {
  nhb__srv_worker* w = l->h.handle.loop->data;
  nhb_server* s = w->server;
  for (int i = 0; i < NHB__SRV_ACCEPT_BATCH && !w->stopping && !l->paused; i++) {
    int fd = accept_fd(l->fd);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        if (accept_starved(w, l)) continue;
      }
      return; /* EAGAIN: nothing pending (another worker may have taken it) */
    }
    if (l->kind != NHB__SRV_L_ADMIN) {
      /* One atomic add per connection (not per request) keeps the limit
       * exact across workers. A proxied connection holds two descriptors. */
      uint64_t need = l->kind == NHB__SRV_L_TCP_PROXY ? 2 : 1;
      /* A fan-out connection holds one more per target. */
      if (l->kind == NHB__SRV_L_HTTP_FANOUT) need = 1 + (uint64_t)s->config.http_fanout_ntargets[l->index];
      uint64_t open_now = atomic_fetch_add_explicit(&s->conns_open, need, memory_order_relaxed) + need;
      if (open_now > s->max_connections) {
        atomic_fetch_sub_explicit(&s->conns_open, need, memory_order_relaxed);
        /* Counted before the close (see accept_starved). */
        nhb__srv_bump(&w->counters.connections_refused, 1);
        close(fd);
        continue;
      }
    }
    if (l->kind == NHB__SRV_L_TCP_ECHO) nhb__srv_echo_open(w, fd);
    else if (l->kind == NHB__SRV_L_TCP_PROXY) nhb__srv_proxy_open(w, fd, l->index);
    else if (l->kind == NHB__SRV_L_HTTP_FANOUT) nhb__srv_fanout_open(w, fd, l->index);
    else conn_open(w, l, fd, 0);
  }
}

/* ---- time-outs ------------------------------------------------------------------------- */

void nhb__srv_sweep(nhb__srv_worker* w) {
  const nhb_server_config* cfg = &w->server->config;
  uint64_t now = uv_now(&w->loop);
  uint64_t idle_ms = cfg->idle_timeout_ns / NHB__NS_PER_MS;
  uint64_t head_ms = cfg->header_timeout_ns / NHB__NS_PER_MS;
  if (cfg->idle_timeout_ns && !idle_ms) idle_ms = 1;
  if (cfg->header_timeout_ns && !head_ms) head_ms = 1;
  nhb__srv_conn* next;
  for (nhb__srv_conn* c = w->conns; c; c = next) {
    next = c->next;
    int busy = c->proto == NHB__SRV_PROTO_H2 ? nhb__srv_h2_busy(c) : c->q_len > 0;
    if (c->lingering) {
      if (now - c->linger_start_ms >= NHB__SRV_LINGER_MS) nhb__srv_conn_close(c);
    } else if (c->in_head && head_ms && now - c->head_start_ms >= head_ms) {
      nhb__srv_conn_close(c);
    } else if (idle_ms && !busy && !c->finishing && now - c->last_active_ms >= idle_ms) {
      /* HTTP/2 says goodbye with GOAWAY; HTTP/1.1 just closes. */
      if (c->proto == NHB__SRV_PROTO_H2) nhb__srv_h2_goaway(c);
      else nhb__srv_conn_close(c);
    }
  }
}
