/* server.c: the test server, HTTP/1.1 on libuv + llhttp.
 *
 * Each worker is a thread with its own loop and its own listening socket per
 * address, all bound with SO_REUSEPORT so the kernel spreads connections over
 * the workers without a shared accept lock. Responses are rendered once at
 * start-up; answering a request is a write of shared, read-only bytes.
 * Pipelined requests are answered in order, several per write.
 *
 * A response delay pauses the parser, stops reading, and resumes both when
 * the delay's timer fires, so a delayed connection never blocks the loop.
 */
#include <errno.h>
#include <llhttp.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "internal.h"

#define SERVER_READ_BUFFER 16384
/* Stop reading from a client that does not read its responses. */
#define MAX_QUEUED_WRITE_BYTES (4u << 20)
#define MAX_BATCH 64

typedef struct srv_worker srv_worker;

/* A response in its four shapes: with or without body, keep-alive or close. */
typedef struct srv_response {
  char* bytes[2][2]; /* [close][head_only] */
  size_t len[2][2];
} srv_response;

typedef struct srv_conn {
  uv_tcp_t tcp;
  uv_timer_t delay_timer;
  srv_worker* worker;
  llhttp_t parser;
  int closing;
  int paused;          /* waiting for a delay to end */
  int close_after;     /* close once the queued responses are written */
  int want_close;      /* the current request asked for Connection: close */
  int head;            /* the current request is HEAD */
  unsigned batch;      /* responses waiting for the next flush */
  unsigned batch_close, batch_head[MAX_BATCH];
  size_t rb_off, rb_len; /* unparsed bytes in read_buffer while paused */
  char read_buffer[SERVER_READ_BUFFER];
} srv_conn;

typedef struct srv_counters {
  _Atomic uint64_t requests, connections_total, connections_active, rx_bytes, tx_bytes, bad_requests;
} srv_counters;

struct srv_worker {
  nhb_server* server;
  uv_loop_t loop;
  uv_async_t wakeup;
  pthread_t thread;
  int cpu;
  uv_tcp_t listeners[NHB_SERVER_MAX_LISTEN];
  int nlisteners;
  srv_counters counters __attribute__((aligned(64)));
};

struct nhb_server {
  nhb_server_config config;
  char* extra_headers;
  int* cpus;
  srv_response ok;
  srv_worker* workers;
  int started;
  int stopped;
  struct sockaddr_storage bound[NHB_SERVER_MAX_LISTEN];
  socklen_t bound_len[NHB_SERVER_MAX_LISTEN];
  char bad_request[128];
  size_t bad_request_len;
};

/* Single-writer counters: the worker adds with plain loads and stores (no
 * locked instruction), readers on other threads load them relaxed. */
static inline void bump(_Atomic uint64_t* c, uint64_t n) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n, memory_order_relaxed);
}

static int render_response(nhb_server* s) {
  const nhb_server_config* cfg = &s->config;
  for (int close = 0; close < 2; close++) {
    for (int head = 0; head < 2; head++) {
      char head_buf[256];
      int n = snprintf(head_buf, sizeof(head_buf),
                       "HTTP/1.1 200 OK\r\nServer: nhbench\r\nContent-Length: %llu\r\n%s",
                       (unsigned long long)cfg->response_body_size, close ? "Connection: close\r\n" : "");
      size_t body = head ? 0 : cfg->response_body_size;
      size_t len = (size_t)n + cfg->extra_headers_len + 2 + body;
      char* p = malloc(len);
      if (!p) return NHB_ENOMEM;
      memcpy(p, head_buf, (size_t)n);
      if (cfg->extra_headers_len) memcpy(p + n, s->extra_headers, cfg->extra_headers_len);
      memcpy(p + n + cfg->extra_headers_len, "\r\n", 2);
      memset(p + n + cfg->extra_headers_len + 2, 'a', body);
      s->ok.bytes[close][head] = p;
      s->ok.len[close][head] = len;
    }
  }
  s->bad_request_len = (size_t)snprintf(s->bad_request, sizeof(s->bad_request),
                                        "HTTP/1.1 400 Bad Request\r\nServer: nhbench\r\n"
                                        "Content-Length: 0\r\nConnection: close\r\n\r\n");
  return 0;
}

/* ---- connections -------------------------------------------------------- */

static void conn_on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);
static void conn_process(srv_conn* c);
static void on_delay_done(uv_timer_t* timer);

static void conn_free(uv_handle_t* handle) {
  srv_conn* c = (srv_conn*)handle->data;
  /* Two handles share the connection; the timer closes last. */
  if (handle == (uv_handle_t*)&c->tcp) {
    uv_close((uv_handle_t*)&c->delay_timer, conn_free);
    return;
  }
  bump(&c->worker->counters.connections_active, (uint64_t)-1);
  free(c);
}

static void conn_close(srv_conn* c) {
  if (c->closing) return;
  c->closing = 1;
  uv_close((uv_handle_t*)&c->tcp, conn_free);
}

static void conn_on_write(uv_write_t* req, int status) {
  srv_conn* c = (srv_conn*)req->data;
  free(req);
  if (c->closing) return;
  if (status < 0) {
    conn_close(c);
    return;
  }
  if (c->close_after && c->tcp.write_queue_size == 0) {
    conn_close(c);
    return;
  }
  /* Reading stopped when too much was queued; start again once it drains. */
  if (!c->paused && c->tcp.write_queue_size < MAX_QUEUED_WRITE_BYTES) conn_process(c);
}

static void conn_write(srv_conn* c, uv_buf_t* bufs, unsigned nbufs) {
  if (nbufs == 0 || c->closing) return;
  size_t total = 0;
  for (unsigned i = 0; i < nbufs; i++) total += bufs[i].len;
  bump(&c->worker->counters.tx_bytes, total);
  int n = uv_try_write((uv_stream_t*)&c->tcp, bufs, nbufs);
  if (n == UV_EAGAIN) n = 0;
  if (n < 0) {
    conn_close(c);
    return;
  }
  if ((size_t)n == total) {
    if (c->close_after) conn_close(c);
    return;
  }
  /* The socket is full: queue the rest. This is the rare path, so the write
   * request is allocated here rather than kept per connection. */
  unsigned first = 0;
  size_t skip = (size_t)n;
  while (skip >= bufs[first].len) skip -= bufs[first++].len;
  bufs[first].base += skip;
  bufs[first].len -= skip;
  uv_write_t* req = malloc(sizeof(*req));
  if (!req) {
    conn_close(c);
    return;
  }
  req->data = c;
  if (uv_write(req, (uv_stream_t*)&c->tcp, bufs + first, nbufs - first, conn_on_write) < 0) {
    free(req);
    conn_close(c);
  }
}

static void conn_flush(srv_conn* c) {
  nhb_server* s = c->worker->server;
  uv_buf_t bufs[MAX_BATCH];
  unsigned n = c->batch;
  for (unsigned i = 0; i < n; i++) {
    int close = (i == n - 1) && c->batch_close;
    int head = (int)c->batch_head[i];
    bufs[i] = uv_buf_init(s->ok.bytes[close][head], (unsigned)s->ok.len[close][head]);
  }
  if (c->batch_close) c->close_after = 1;
  c->batch = 0;
  c->batch_close = 0;
  conn_write(c, bufs, n);
}

static int on_headers_complete(llhttp_t* p) {
  srv_conn* c = (srv_conn*)p->data;
  c->head = llhttp_get_method(p) == HTTP_HEAD;
  return 0;
}

static int on_message_complete(llhttp_t* p) {
  srv_conn* c = (srv_conn*)p->data;
  srv_worker* w = c->worker;
  bump(&w->counters.requests, 1);
  c->want_close = !llhttp_should_keep_alive(p);
  if (w->server->config.static_delay_ns > 0) {
    /* Answer after the delay; the parser stops here until then. */
    c->paused = 1;
    return HPE_PAUSED;
  }
  c->batch_head[c->batch++] = (unsigned)c->head;
  if (c->want_close) {
    c->batch_close = 1;
    return HPE_PAUSED;
  }
  if (c->batch == MAX_BATCH) conn_flush(c);
  return 0;
}

static const llhttp_settings_t server_settings = {
    .on_headers_complete = on_headers_complete,
    .on_message_complete = on_message_complete,
};

static void conn_bad_request(srv_conn* c) {
  nhb_server* s = c->worker->server;
  bump(&c->worker->counters.bad_requests, 1);
  conn_flush(c);
  c->close_after = 1;
  uv_buf_t buf = uv_buf_init(s->bad_request, (unsigned)s->bad_request_len);
  conn_write(c, &buf, 1);
}

static void conn_alloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf) {
  NHB__UNUSED(suggested);
  srv_conn* c = (srv_conn*)handle->data;
  buf->base = c->read_buffer;
  buf->len = sizeof(c->read_buffer);
}

/* Parses buffered bytes [rb_off, rb_len) until they run out or a delay pauses
 * the parser, then resumes reading if nothing holds it back. */
static void conn_process(srv_conn* c) {
  while (c->rb_off < c->rb_len && !c->closing && !c->paused && !c->close_after) {
    const char* start = c->read_buffer + c->rb_off;
    size_t len = c->rb_len - c->rb_off;
    llhttp_errno_t err = llhttp_execute(&c->parser, start, len);
    if (err == HPE_OK) {
      c->rb_off = c->rb_len;
    } else if (err == HPE_PAUSED) {
      c->rb_off = (size_t)(llhttp_get_error_pos(&c->parser) - c->read_buffer);
      llhttp_resume(&c->parser);
      if (c->batch_close) break;
    } else {
      conn_bad_request(c);
      return;
    }
  }
  if (c->closing) return;
  conn_flush(c);
  if (c->close_after) {
    uv_read_stop((uv_stream_t*)&c->tcp);
    return;
  }
  if (c->paused) {
    uint64_t ms = (c->worker->server->config.static_delay_ns + NHB__NS_PER_MS - 1) / NHB__NS_PER_MS;
    uv_read_stop((uv_stream_t*)&c->tcp);
    uv_timer_start(&c->delay_timer, on_delay_done, ms, 0);
    return;
  }
  if (c->rb_off >= c->rb_len) {
    c->rb_off = c->rb_len = 0;
    if (c->tcp.write_queue_size < MAX_QUEUED_WRITE_BYTES)
      uv_read_start((uv_stream_t*)&c->tcp, conn_alloc, conn_on_read);
    else
      uv_read_stop((uv_stream_t*)&c->tcp);
  }
}

static void on_delay_done(uv_timer_t* timer) {
  srv_conn* c = (srv_conn*)timer->data;
  if (c->closing) return;
  c->paused = 0;
  c->batch_head[c->batch++] = (unsigned)c->head;
  if (c->want_close) c->batch_close = 1;
  conn_process(c);
}

static void conn_on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
  srv_conn* c = (srv_conn*)stream->data;
  NHB__UNUSED(buf);
  if (nread > 0) {
    bump(&c->worker->counters.rx_bytes, (uint64_t)nread);
    c->rb_off = 0;
    c->rb_len = (size_t)nread;
    conn_process(c);
  } else if (nread < 0) {
    conn_close(c);
  }
}

static void on_connection(uv_stream_t* listener, int status) {
  srv_worker* w = (srv_worker*)listener->data;
  if (status < 0) return;
  srv_conn* c = calloc(1, sizeof(*c));
  if (!c) return;
  c->worker = w;
  uv_tcp_init(&w->loop, &c->tcp);
  uv_timer_init(&w->loop, &c->delay_timer);
  c->tcp.data = c;
  c->delay_timer.data = c;
  bump(&w->counters.connections_active, 1);
  if (uv_accept(listener, (uv_stream_t*)&c->tcp) < 0) {
    conn_close(c);
    return;
  }
  bump(&w->counters.connections_total, 1);
  uv_tcp_nodelay(&c->tcp, 1);
  llhttp_init(&c->parser, HTTP_REQUEST, &server_settings);
  c->parser.data = c;
  uv_read_start((uv_stream_t*)&c->tcp, conn_alloc, conn_on_read);
}

/* ---- workers and listeners ---------------------------------------------- */

static void close_any(uv_handle_t* handle, void* arg) {
  NHB__UNUSED(arg);
  if (uv_is_closing(handle)) return;
  if (handle->type == UV_TCP && handle->data != NULL && ((uv_tcp_t*)handle)->data != NULL) {
    /* Connections close through conn_close() so that both handles go. */
    srv_worker* w = (srv_worker*)handle->loop->data;
    int is_listener = 0;
    for (int i = 0; i < w->nlisteners; i++) is_listener |= handle == (uv_handle_t*)&w->listeners[i];
    if (!is_listener) {
      conn_close((srv_conn*)handle->data);
      return;
    }
  }
  if (handle->type == UV_TIMER && handle->data != NULL) return; /* closed with its connection */
  uv_close(handle, NULL);
}

static void on_wakeup(uv_async_t* handle) { uv_walk(handle->loop, close_any, NULL); }

static void* worker_main(void* arg) {
  srv_worker* w = (srv_worker*)arg;
  nhb__pin_thread(w->cpu);
  uv_run(&w->loop, UV_RUN_DEFAULT);
  uv_loop_close(&w->loop);
  return NULL;
}

/* Opens one listening socket with SO_REUSEPORT, so every worker can have its
 * own on the same address (libuv 1.44 has no flag for this). */
static int open_listener(const struct sockaddr* addr, socklen_t len, int* out_fd) {
  int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
  if (addr->sa_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
  if (bind(fd, addr, len) < 0 || listen(fd, 4096) < 0) {
    int err = -errno;
    close(fd);
    return err;
  }
  *out_fd = fd;
  return 0;
}

int nhb_server_create(const nhb_server_config* config, nhb_server** out) {
  *out = NULL;
  if (config->nlisten < 1 || config->nlisten > NHB_SERVER_MAX_LISTEN || config->nworkers < 1 ||
      config->nworkers > 1024 || config->response_body_size > (1ULL << 30))
    return NHB_EINVAL;
  nhb_server* s = calloc(1, sizeof(*s));
  if (!s) return NHB_ENOMEM;
  s->config = *config;
  s->extra_headers = malloc(config->extra_headers_len + 1);
  s->cpus = calloc((size_t)config->nworkers, sizeof(int));
  s->workers = calloc((size_t)config->nworkers, sizeof(srv_worker));
  if (!s->extra_headers || !s->cpus || !s->workers) {
    nhb_server_destroy(s);
    return NHB_ENOMEM;
  }
  if (config->extra_headers_len) memcpy(s->extra_headers, config->extra_headers, config->extra_headers_len);
  s->config.extra_headers = s->extra_headers;
  for (int i = 0; i < config->nworkers; i++) s->cpus[i] = config->cpus ? config->cpus[i] : -1;
  s->config.cpus = s->cpus;
  int r = render_response(s);
  if (r < 0) {
    nhb_server_destroy(s);
    return r;
  }
  *out = s;
  return 0;
}

int nhb_server_start(nhb_server* s) {
  if (s->started) return NHB_ESTATE;
  const nhb_server_config* cfg = &s->config;
  for (int i = 0; i < cfg->nworkers; i++) {
    srv_worker* w = &s->workers[i];
    w->server = s;
    w->cpu = s->cpus[i];
    int r = uv_loop_init(&w->loop);
    if (r == 0) r = uv_async_init(&w->loop, &w->wakeup, on_wakeup);
    if (r < 0) return r;
    w->loop.data = w;
    w->wakeup.data = NULL;
  }
  for (int a = 0; a < cfg->nlisten; a++) {
    struct sockaddr_storage addr;
    socklen_t len = cfg->listen_addr_len[a];
    memcpy(&addr, cfg->listen_addr[a], len);
    for (int i = 0; i < cfg->nworkers; i++) {
      srv_worker* w = &s->workers[i];
      int fd = -1;
      int r = open_listener((struct sockaddr*)&addr, len, &fd);
      if (r < 0) return r;
      if (i == 0) {
        /* Port 0 picks a free port; the other workers bind that same one. */
        s->bound_len[a] = sizeof(s->bound[a]);
        getsockname(fd, (struct sockaddr*)&s->bound[a], &s->bound_len[a]);
        memcpy(&addr, &s->bound[a], s->bound_len[a]);
        len = s->bound_len[a];
      }
      uv_tcp_t* l = &w->listeners[w->nlisteners++];
      uv_tcp_init(&w->loop, l);
      l->data = w;
      r = uv_tcp_open(l, fd);
      if (r == 0) r = uv_listen((uv_stream_t*)l, 4096, on_connection);
      if (r < 0) return r;
    }
  }
  s->started = 1;
  for (int i = 0; i < cfg->nworkers; i++)
    if (pthread_create(&s->workers[i].thread, NULL, worker_main, &s->workers[i]) != 0) {
      s->config.nworkers = i;
      nhb_server_stop(s);
      return NHB_ETHREAD;
    }
  return 0;
}

int nhb_server_address(const nhb_server* s, int i, void* addr, unsigned* addr_len) {
  if (!s->started || i < 0 || i >= s->config.nlisten || *addr_len < s->bound_len[i]) return NHB_EINVAL;
  memcpy(addr, &s->bound[i], s->bound_len[i]);
  *addr_len = s->bound_len[i];
  return 0;
}

void nhb_server_stats_get(const nhb_server* s, nhb_server_stats* out) {
  memset(out, 0, sizeof(*out));
  for (int i = 0; i < s->config.nworkers; i++) {
    const srv_counters* c = &s->workers[i].counters;
    out->requests += atomic_load_explicit(&c->requests, memory_order_relaxed);
    out->connections_total += atomic_load_explicit(&c->connections_total, memory_order_relaxed);
    out->connections_active += atomic_load_explicit(&c->connections_active, memory_order_relaxed);
    out->rx_bytes += atomic_load_explicit(&c->rx_bytes, memory_order_relaxed);
    out->tx_bytes += atomic_load_explicit(&c->tx_bytes, memory_order_relaxed);
    out->bad_requests += atomic_load_explicit(&c->bad_requests, memory_order_relaxed);
  }
}

void nhb_server_stop(nhb_server* s) {
  if (!s->started || s->stopped) return;
  s->stopped = 1;
  for (int i = 0; i < s->config.nworkers; i++) uv_async_send(&s->workers[i].wakeup);
  for (int i = 0; i < s->config.nworkers; i++) pthread_join(s->workers[i].thread, NULL);
}

void nhb_server_destroy(nhb_server* s) {
  if (!s) return;
  nhb_server_stop(s);
  for (int c = 0; c < 2; c++)
    for (int h = 0; h < 2; h++) free(s->ok.bytes[c][h]);
  free(s->extra_headers);
  free(s->cpus);
  free(s->workers);
  free(s);
}
