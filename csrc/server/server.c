/* server.c: the test server's life cycle: workers, listeners, configuration.
 *
 * Each worker is a thread with its own loop. A TCP address gets one
 * listening socket per worker, all bound with SO_REUSEPORT, so the kernel
 * spreads connections over the workers without a shared accept lock. A unix
 * socket cannot be shared that way; it is bound once and every worker
 * listens on a dup() of it: the workers then race for each connection (the
 * losers' accept() returns EAGAIN, which libuv ignores), which spreads the
 * connections about as well. The admin listener runs on worker 0 only; the
 * echo listeners, like HTTP ones, on every worker. With HTTP/3, each TCP
 * listen address also gets a UDP socket per worker on the same port number
 * (SO_REUSEPORT again), served by server_h3.c.
 *
 * The delay heap, stalls and the per-worker random numbers are in
 * server_delay.c.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "server/server_internal.h"
#include "common/tls_common.h"

static void on_listener(uv_poll_t* handle, int status, int events);

/* ---- small helpers ----------------------------------------------------------- */

static void format_addr(const void* addr, char* out, size_t out_len) {
  const struct sockaddr* sa = addr;
  char host[INET6_ADDRSTRLEN] = "?";
  if (sa->sa_family == AF_INET) {
    const struct sockaddr_in* in = addr;
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    snprintf(out, out_len, "%s:%u", host, ntohs(in->sin_port));
  } else if (sa->sa_family == AF_INET6) {
    const struct sockaddr_in6* in6 = addr;
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    snprintf(out, out_len, "[%s]:%u", host, ntohs(in6->sin6_port));
  } else if (sa->sa_family == AF_UNIX) {
    const struct sockaddr_un* un = addr;
    if (un->sun_path[0] == '\0') snprintf(out, out_len, "@%.*s", (int)sizeof(un->sun_path) - 1, un->sun_path + 1);
    else snprintf(out, out_len, "%.*s", (int)sizeof(un->sun_path), un->sun_path);
  } else {
    snprintf(out, out_len, "(unknown address family)");
  }
}

static int set_error(nhb_server* s, int err, const char* what, const void* addr) {
  char a[160];
  format_addr(addr, a, sizeof(a));
  snprintf(s->err, sizeof(s->err), "%s %s: %s (%s)", what, a, nhb_strerror(err), nhb_err_name(err));
  return err;
}

static void on_sweep(uv_timer_t* timer) {
  nhb__srv_worker* w = timer->data;
  nhb_server* s = w->server;
  /* A per-request stall that has ended is cleared, which puts the fast path
   * back to not reading the clock. */
  uint64_t until = atomic_load_explicit(&s->stalled_until_ns, memory_order_relaxed);
  if (until && nhb__now_ns() >= until)
    atomic_compare_exchange_strong_explicit(&s->stalled_until_ns, &until, 0, memory_order_relaxed,
                                            memory_order_relaxed);
  nhb__srv_sweep(w);
  if (w->proxies) nhb__srv_proxy_sweep(w);
}

/* ---- workers ----------------------------------------------------------------- */

static void close_handle(uv_handle_t* h) {
  if (!uv_is_closing(h)) uv_close(h, NULL);
}

/* Closes everything the worker has open; the loop ends once the close
 * callbacks have run. */
static void worker_close_all(nhb__srv_worker* w) {
  w->stopping = 1;
  /* Before the sockets close: QUIC clients are told. */
  nhb__srv_h3_close_all(w);
  for (int i = 0; i < w->nlst; i++) {
    close_handle(&w->lst[i].h.handle);
    /* A poll handle does not own its descriptor; it is out of epoll once
     * uv_close() returns. */
    if (w->lst[i].fd >= 0) close(w->lst[i].fd);
    w->lst[i].fd = -1;
  }
  while (w->conns) {
    nhb__srv_conn* c = w->conns;
    /* Closing unlinks the connection from the list. */
    nhb__srv_conn_close(c);
    if (w->conns == c) break; /* cannot happen; guards the loop */
  }
  nhb__srv_echo_close_all(w);
  nhb__srv_proxy_close_all(w);
  nhb__srv_fanout_close_all(w);
  if (w->timer_fd >= 0) close_handle((uv_handle_t*)&w->timer_poll);
  close_handle((uv_handle_t*)&w->sweep);
  close_handle((uv_handle_t*)&w->accept_retry);
  close_handle((uv_handle_t*)&w->wakeup);
}

static void close_any(uv_handle_t* h, void* arg) {
  NHB__UNUSED(arg);
  close_handle(h);
}

/* After the loop ended: frees what the worker owned. */
static void worker_release(nhb__srv_worker* w) {
  if (w->loop_ready) {
    if (uv_loop_close(&w->loop) == UV_EBUSY) {
      /* Something was missed; close it rather than leak the loop. */
      uv_walk(&w->loop, close_any, NULL);
      uv_run(&w->loop, UV_RUN_DEFAULT);
      uv_loop_close(&w->loop);
    }
    w->loop_ready = 0;
  }
  if (w->timer_fd >= 0) close(w->timer_fd);
  w->timer_fd = -1;
  if (w->spare_fd >= 0) close(w->spare_fd);
  w->spare_fd = -1;
  for (int i = 0; i < NHB__SRV_ADMIN_RESERVE; i++) {
    if (w->admin_fds[i] >= 0) close(w->admin_fds[i]);
    w->admin_fds[i] = -1;
  }
  free(w->rbuf);
  w->rbuf = NULL;
  free(w->heap);
  w->heap = NULL;
  w->heap_len = w->heap_cap = 0;
  free(w->tls_plain);
  free(w->tls_out);
  free(w->h2_stage);
  w->tls_plain = w->tls_out = w->h2_stage = NULL;
  /* After the loop: every connection, hence every HTTP/2 session, is gone. */
  nhb__srv_h2_worker_free(w);
  nhb__srv_h3_worker_free(w);
  nhb__srv_arena_free(&w->nh_arena);
  nhb__srv_arena_free(&w->echo_arena);
  if (w->z_ready) deflateEnd(&w->z);
  w->z_ready = 0;
}

static void on_wakeup(uv_async_t* handle) { worker_close_all(handle->data); }

static void* worker_main(void* arg) {
  nhb__srv_worker* w = arg;
  /* libuv writes with write(2), which raises SIGPIPE when a client has
   * reset the connection; blocked in this thread, the write just fails with
   * EPIPE, whatever the host process does with the signal. */
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  nhb__pin_thread(w->cpu);
  uv_run(&w->loop, UV_RUN_DEFAULT);
  return NULL;
}

/* A descriptor held only to be given up when the process runs out. */
static int reserve_fd(void) { return open("/dev/null", O_RDONLY | O_CLOEXEC); }

void nhb__srv_admin_reserve_refill(nhb__srv_worker* w) {
  for (int i = 0; i < NHB__SRV_ADMIN_RESERVE; i++)
    if (w->admin_fds[i] < 0) {
      w->admin_fds[i] = reserve_fd();
      return;
    }
}

/* Listeners paused for want of descriptors are polled again, and the
 * reserves refilled, a while later: by then connections may have closed. */
static void on_accept_retry(uv_timer_t* timer) {
  nhb__srv_worker* w = timer->data;
  w->accept_retry_armed = 0;
  if (w->stopping) return;
  if (w->spare_fd < 0) w->spare_fd = reserve_fd();
  if (w->index == 0 && w->server->config.has_admin)
    for (int i = 0; i < NHB__SRV_ADMIN_RESERVE; i++)
      if (w->admin_fds[i] < 0) w->admin_fds[i] = reserve_fd();
  for (int i = 0; i < w->nlst; i++) {
    nhb__srv_listener* l = &w->lst[i];
    if (l->paused && l->fd >= 0 && uv_poll_start(&l->h.poll, UV_READABLE, on_listener) == 0) l->paused = 0;
  }
}

void nhb__srv_listener_pause(nhb__srv_worker* w, nhb__srv_listener* l) {
  if (!l->paused) {
    uv_poll_stop(&l->h.poll);
    l->paused = 1;
  }
  if (!w->accept_retry_armed && uv_timer_start(&w->accept_retry, on_accept_retry, NHB__SRV_ACCEPT_RETRY_MS, 0) == 0)
    w->accept_retry_armed = 1;
}

static uint64_t sweep_period_ms(const nhb_server_config* c) {
  uint64_t t = 4 * NHB__NS_PER_S;
  if (c->idle_timeout_ns && c->idle_timeout_ns < t) t = c->idle_timeout_ns;
  if (c->header_timeout_ns && c->header_timeout_ns < t) t = c->header_timeout_ns;
  uint64_t ms = t / 4 / NHB__NS_PER_MS;
  return ms < 5 ? 5 : ms;
}

static int worker_init(nhb_server* s, nhb__srv_worker* w, int index) {
  w->server = s;
  w->index = index;
  w->cpu = s->cpus[index];
  w->timer_fd = -1;
  w->spare_fd = reserve_fd();
  for (int i = 0; i < NHB__SRV_ADMIN_RESERVE; i++)
    w->admin_fds[i] = index == 0 && s->config.has_admin ? reserve_fd() : -1;
  nhb__srv_rand_seed(w, index);
  w->rbuf = malloc(NHB__SRV_READ_BUFFER);
  if (!w->rbuf) return NHB_ENOMEM;
  /* Scratch for TLS and HTTP/2 output, set up once per worker. */
  if (s->ssl_ctx && (!(w->tls_plain = malloc(16384)) || !(w->tls_out = malloc(NHB__SRV_TLS_OUT)))) return NHB_ENOMEM;
  if (s->h2_ok && !(w->h2_stage = malloc(NHB__SRV_H2_STAGE))) return NHB_ENOMEM;
  int r = uv_loop_init(&w->loop);
  if (r < 0) return r;
  w->loop_ready = 1;
  w->loop.data = w;
  r = uv_async_init(&w->loop, &w->wakeup, on_wakeup);
  if (r < 0) return r;
  w->wakeup.data = w;
  r = uv_timer_init(&w->loop, &w->sweep);
  if (r < 0) return r;
  w->sweep.data = w;
  r = uv_timer_init(&w->loop, &w->accept_retry);
  if (r < 0) return r;
  w->accept_retry.data = w;
  uint64_t period = sweep_period_ms(&s->config);
  uv_timer_start(&w->sweep, on_sweep, period, period);
  int fd = nhb__timerfd_create();
  if (fd < 0) return fd;
  r = uv_poll_init(&w->loop, &w->timer_poll, fd);
  if (r < 0) {
    close(fd);
    return r;
  }
  w->timer_fd = fd;
  w->timer_poll.data = w;
  return uv_poll_start(&w->timer_poll, UV_READABLE, nhb__srv_on_delay_timer);
}

/* ---- listeners --------------------------------------------------------------- */

static int open_inet(const nhb_sockaddr* a, int type, int* out_fd) {
  const struct sockaddr* sa = (const struct sockaddr*)a->bytes;
  int fd = socket(sa->sa_family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  /* libuv 1.44 has no flag for SO_REUSEPORT, hence the raw socket. */
  setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
  if (sa->sa_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
  if (bind(fd, sa, a->len) < 0 || (type == SOCK_STREAM && listen(fd, 4096) < 0)) {
    int err = -errno;
    close(fd);
    return err;
  }
  *out_fd = fd;
  return 0;
}

/* Binds a unix socket. A socket file left by a server that is gone (connect
 * is refused) is removed first; a live one, or any other kind of file, is
 * left alone and the bind fails with EADDRINUSE. */
static int open_unix(const nhb_sockaddr* a, int* out_fd) {
  const struct sockaddr_un* un = (const struct sockaddr_un*)a->bytes;
  if (un->sun_path[0] != '\0') {
    struct stat st;
    if (lstat(un->sun_path, &st) == 0) {
      if (!S_ISSOCK(st.st_mode)) return UV_EADDRINUSE;
      int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (probe < 0) return -errno;
      int live = connect(probe, (const struct sockaddr*)un, a->len) == 0 || errno != ECONNREFUSED;
      close(probe);
      if (live) return UV_EADDRINUSE;
      unlink(un->sun_path);
    }
  }
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  if (bind(fd, (const struct sockaddr*)un, a->len) < 0 || listen(fd, 4096) < 0) {
    int err = -errno;
    close(fd);
    return err;
  }
  *out_fd = fd;
  return 0;
}

/* SO_REUSEPORT lets any socket of the same user join a port group, so a
 * second server started on a busy port would silently share it. A probe
 * bound without SO_REUSEPORT fails with EADDRINUSE when anything holds the
 * port; it is closed at once (port 0 needs no probe). */
static int probe_port(const nhb_sockaddr* a, int type) {
  const struct sockaddr* sa = (const struct sockaddr*)a->bytes;
  uint16_t port = sa->sa_family == AF_INET ? ((const struct sockaddr_in*)sa)->sin_port
                                           : ((const struct sockaddr_in6*)sa)->sin6_port;
  if (port == 0) return 0;
  int fd = socket(sa->sa_family, type | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (sa->sa_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
  int r = bind(fd, sa, a->len) < 0 ? -errno : 0;
  close(fd);
  return r;
}

static void on_listener(uv_poll_t* handle, int status, int events) {
  NHB__UNUSED(events);
  if (status < 0) return;
  nhb__srv_accept(handle->data);
}

/* Wraps a bound socket in a libuv handle on worker w; the fd is closed on
 * failure.
 *
 * Stream listeners (HTTP, admin, TCP echo) are polled and accepted from here (server_conn.c)
 * rather than through uv_listen(): when accept() fails for want of
 * descriptors, libuv's listener retries in a loop that only its one reserve
 * descriptor breaks, and with several workers in a process another thread
 * can take that descriptor, after which the loop spins at 100 % CPU; nor can
 * a uv_listen() listener be paused. */
int nhb__srv_add_listener(nhb__srv_worker* w, int fd, int kind, int is_pipe) {
  nhb__srv_listener* l = &w->lst[w->nlst];
  int r;
  l->fd = -1;
  l->paused = 0;
  if (kind != NHB__SRV_L_UDP_ECHO && kind != NHB__SRV_L_QUIC) {
    r = uv_poll_init(&w->loop, &l->h.poll, fd);
    if (r < 0) {
      close(fd);
      return r;
    }
    w->nlst++;
    l->kind = kind;
    l->is_pipe = is_pipe;
    l->fd = fd;
    l->h.handle.data = l;
    return uv_poll_start(&l->h.poll, UV_READABLE, on_listener);
  }
  r = uv_udp_init(&w->loop, &l->h.udp);
  if (r < 0) {
    close(fd);
    return r;
  }
  w->nlst++;
  l->kind = kind;
  l->is_pipe = is_pipe;
  l->h.handle.data = l;
  r = uv_udp_open(&l->h.udp, fd);
  if (r < 0) {
    close(fd);
    return r;
  }
  return kind == NHB__SRV_L_QUIC ? nhb__srv_h3_listen(w, l) : nhb__srv_echo_start(w, l);
}

static void record_bound(nhb_server* s, int kind, int i, int fd) {
  s->bound_len[kind][i] = sizeof(s->bound[kind][i]);
  getsockname(fd, (struct sockaddr*)&s->bound[kind][i], &s->bound_len[kind][i]);
  if (s->nbound[kind] < i + 1) s->nbound[kind] = i + 1;
}

/* One SO_REUSEPORT socket per worker (or only on worker 0); port 0 is
 * resolved by the first and reused by the others. */
static int bind_inet(nhb_server* s, int kind, int i, const nhb_sockaddr* addr, int all_workers) {
  nhb_sockaddr a = *addr;
  int type = kind == NHB__SRV_L_UDP_ECHO || kind == NHB__SRV_L_QUIC ? SOCK_DGRAM : SOCK_STREAM;
  int n = all_workers ? s->config.nworkers : 1;
  static const char* const what[NHB__SRV_L_KINDS] = {"listen", "admin", "tcp_echo", "udp_echo", "tcp_proxy",
                                                     "redirect", "http_fanout", "http3 (UDP)"};
  int r = probe_port(&a, type);
  if (r < 0) return set_error(s, r, what[kind], a.bytes);
  for (int k = 0; k < n; k++) {
    int fd = -1;
    r = open_inet(&a, type, &fd);
    if (r < 0) return set_error(s, r, what[kind], a.bytes);
    if (k == 0) {
      record_bound(s, kind, i, fd);
      memcpy(a.bytes, &s->bound[kind][i], s->bound_len[kind][i]);
      a.len = s->bound_len[kind][i];
    }
    nhb__srv_worker* w = &s->workers[k];
    r = nhb__srv_add_listener(w, fd, kind, 0);
    if (r < 0) return set_error(s, r, what[kind], a.bytes);
    w->lst[w->nlst - 1].index = i;
  }
  return 0;
}

static int bind_unix(nhb_server* s, int i, const nhb_sockaddr* a) {
  int fd = -1;
  int r = open_unix(a, &fd);
  if (r < 0) return set_error(s, r, "listen", a->bytes);
  record_bound(s, NHB__SRV_L_HTTP, i, fd);
  for (int k = 0; k < s->config.nworkers && r == 0; k++) {
    int dfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    r = dfd < 0 ? -errno : nhb__srv_add_listener(&s->workers[k], dfd, NHB__SRV_L_HTTP, 1);
  }
  close(fd);
  return r < 0 ? set_error(s, r, "listen", a->bytes) : 0;
}

static void unlink_unix_paths(nhb_server* s) {
  for (int i = 0; i < s->nbound[NHB__SRV_L_HTTP]; i++) {
    const struct sockaddr_un* un = (const struct sockaddr_un*)&s->bound[NHB__SRV_L_HTTP][i];
    if (un->sun_family == AF_UNIX && un->sun_path[0] != '\0') unlink(un->sun_path);
  }
}

/* HTTP/3: a UDP socket per worker on each TCP listen address's port (port 0
 * resolved by its TCP listener), and the Alt-Svc that names them, added to
 * the static response headers (the pre-rendered responses are rendered
 * again with it). */
static int bind_quic(nhb_server* s) {
  const nhb_server_config* c = &s->config;
  size_t at = 0;
  uint16_t seen[NHB_SERVER_MAX_LISTEN];
  int nseen = 0, nq = 0;
  for (int i = 0; i < c->nlisten; i++) {
    const struct sockaddr* sa = (const struct sockaddr*)&s->bound[NHB__SRV_L_HTTP][i];
    if (sa->sa_family != AF_INET && sa->sa_family != AF_INET6) continue;
    nhb_sockaddr a;
    memcpy(a.bytes, sa, s->bound_len[NHB__SRV_L_HTTP][i]);
    a.len = s->bound_len[NHB__SRV_L_HTTP][i];
    int r = bind_inet(s, NHB__SRV_L_QUIC, nq++, &a, 1);
    if (r < 0) return r;
    uint16_t port = sa->sa_family == AF_INET ? ntohs(((const struct sockaddr_in*)sa)->sin_port)
                                             : ntohs(((const struct sockaddr_in6*)sa)->sin6_port);
    int dup = 0;
    for (int k = 0; k < nseen; k++) dup |= seen[k] == port;
    if (dup) continue;
    seen[nseen++] = port;
    int n = snprintf(s->alt_svc + at, sizeof(s->alt_svc) - at, "%sh3=\":%u\"", at ? ", " : "", port);
    if (n > 0 && (size_t)n < sizeof(s->alt_svc) - at) at += (size_t)n;
  }
  if (!at) return 0;
  nhb__srv_header* hs = calloc(s->nh.nheaders + 1, sizeof(*hs));
  if (!hs) return NHB_ENOMEM;
  /* First, so that a response option of the same name replaces it. */
  hs[0].name.p = "Alt-Svc";
  hs[0].name.len = 7;
  hs[0].value.p = s->alt_svc;
  hs[0].value.len = at;
  hs[0].append = 1;
  if (s->nh.nheaders) memcpy(hs + 1, s->nh.headers, s->nh.nheaders * sizeof(*hs));
  s->nh.headers = hs;
  s->nh.nheaders++;
  s->alt_headers = hs;
  for (int m = 0; m < 3; m++)
    for (int h = 0; h < 2; h++) {
      free(s->ok[m][h]);
      free(s->err_ok[m][h]);
      s->err_ok[m][h] = NULL;
    }
  free(s->canned_400);
  free(s->canned_413);
  free(s->canned_431);
  free(s->canned_505);
  return nhb__srv_render_canned(s);
}

/* ---- the public API ---------------------------------------------------------- */

static int config_error(char* err, size_t err_len, const char* msg) {
  if (err && err_len) snprintf(err, err_len, "%s", msg);
  return NHB_EINVAL;
}

void nhb_server_config_init(nhb_server_config* c) {
  memset(c, 0, sizeof(*c));
  c->nworkers = 1;
  c->max_echo_delay_ns = 1500 * NHB__NS_PER_MS;
  c->max_delay_ns = 60 * NHB__NS_PER_S;
  c->max_payload_bytes = 256 * 1024;
  c->idle_timeout_ns = 60 * NHB__NS_PER_S;
  c->header_timeout_ns = 10 * NHB__NS_PER_S;
  c->max_header_bytes = 65536;
  c->max_body_bytes = 64ULL << 20;
  c->max_concurrent_streams = 100;
}

/* The paths the request parser can match byte for byte: no query or
 * fragment, nothing a request line could not carry. "/" would turn every
 * request into the debug echo. */
static int debug_path_ok(const char* p) {
  size_t len = strlen(p);
  if (len == 0) return 1;
  if (p[0] != '/' || len == 1 || len > 1024) return 0;
  for (size_t i = 0; i < len; i++) {
    unsigned char ch = (unsigned char)p[i];
    if (ch <= 0x20 || ch == 0x7f || ch == '?' || ch == '#') return 0;
  }
  return 1;
}

extern char** environ;

/* ?env=dump answers with the environment as it was at start-up: a copy taken
 * here, so that workers never read environ while another thread may change
 * it (setenv is not thread-safe). */
static int snapshot_environment(nhb_server* s) {
  size_t len = 0;
  for (char** e = environ; e && *e; e++) len += strlen(*e) + 1;
  s->env_dump = malloc(len + 1);
  if (!s->env_dump) return -1;
  size_t off = 0;
  for (char** e = environ; e && *e; e++) {
    size_t n = strlen(*e);
    memcpy(s->env_dump + off, *e, n);
    s->env_dump[off + n] = '\n';
    off += n + 1;
  }
  s->env_dump[off] = '\0';
  s->env_dump_len = off;
  return 0;
}

/* "h2,http/1.1" and the like: which protocols, and ALPN's wire format. */
static int parse_alpn(nhb_server* s, const char* list, char* err, size_t err_len) {
  if (!list || !*list) list = "h2,http/1.1";
  const char* p = list;
  while (*p) {
    const char* end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len == 2 && memcmp(p, "h2", 2) == 0 && !s->h2_ok) s->h2_ok = 1;
    else if (len == 8 && memcmp(p, "http/1.1", 8) == 0 && !s->h1_ok) s->h1_ok = 1;
    else return config_error(err, err_len, "alpn: a list of h2 and http/1.1, each at most once");
    p += len;
    if (*p == ',') p++;
  }
  if (nhb__tls_alpn_wire(list, s->alpn_wire, sizeof(s->alpn_wire), &s->alpn_wire_len) < 0)
    return config_error(err, err_len, "alpn: a list of h2 and http/1.1, each at most once");
  return 0;
}


static int check_addrs(const nhb_sockaddr* a, int n, int allow_unix) {
  for (int i = 0; i < n; i++) {
    const struct sockaddr* sa = (const struct sockaddr*)a[i].bytes;
    if (sa->sa_family == AF_INET && a[i].len == sizeof(struct sockaddr_in)) continue;
    if (sa->sa_family == AF_INET6 && a[i].len == sizeof(struct sockaddr_in6)) continue;
    if (allow_unix && sa->sa_family == AF_UNIX && a[i].len > offsetof(struct sockaddr_un, sun_path) + 1 &&
        a[i].len <= sizeof(struct sockaddr_un))
      continue;
    return -1;
  }
  return 0;
}

int nhb_server_create(const nhb_server_config* config, nhb_server** out, char* err, size_t err_len) {
  *out = NULL;
  const nhb_server_config* c = config;
  /* Only what keeps the core safe whoever fills the config (the binding, the
   * selftest, the fuzz targets), each saying what it protects. The ranges a
   * user is held to (delays up to an hour, 1-1024 workers, ...) belong to
   * nhbench.options and are not repeated here (docs/architecture.md,
   * "Binding contract"). Messages name the binding's config key. */
  /* The address arrays have 16 entries, and each address is used by its
   * length as a sockaddr of its family. */
  if (c->nlisten < 0 || c->nlisten > NHB_SERVER_MAX_LISTEN || check_addrs(c->listen, c->nlisten, 1) < 0)
    return config_error(err, err_len, "listen: up to 16 IPv4, IPv6 or unix socket addresses");
  if (c->ntcp_echo < 0 || c->ntcp_echo > NHB_SERVER_MAX_LISTEN || check_addrs(c->tcp_echo, c->ntcp_echo, 0) < 0)
    return config_error(err, err_len, "tcp_echo: up to 16 IPv4 or IPv6 addresses");
  if (c->nudp_echo < 0 || c->nudp_echo > NHB_SERVER_MAX_LISTEN || check_addrs(c->udp_echo, c->nudp_echo, 0) < 0)
    return config_error(err, err_len, "udp_echo: up to 16 IPv4 or IPv6 addresses");
  if (c->ntcp_proxy < 0 || c->ntcp_proxy > NHB_SERVER_MAX_LISTEN || check_addrs(c->tcp_proxy, c->ntcp_proxy, 0) < 0 ||
      check_addrs(c->tcp_proxy_dest, c->ntcp_proxy, 0) < 0)
    return config_error(err, err_len, "tcp_proxy: up to 16 pairs of IPv4 or IPv6 addresses");
  if (c->nredirect < 0 || c->nredirect > NHB_SERVER_MAX_LISTEN || check_addrs(c->redirect, c->nredirect, 0) < 0)
    return config_error(err, err_len, "redirect: up to 16 IPv4 or IPv6 addresses");
  if (c->forward_prefix && *c->forward_prefix &&
      (c->forward_prefix[0] != '/' || strlen(c->forward_prefix) > 256 || check_addrs(&c->forward_dest, 1, 0) < 0))
    return config_error(err, err_len, "forward: a path prefix beginning with / (at most 256 bytes) and an IPv4 or IPv6 address");
  if (c->nhttp_fanout < 0 || c->nhttp_fanout > NHB_SERVER_MAX_FANOUT ||
      check_addrs(c->http_fanout, c->nhttp_fanout, 0) < 0)
    return config_error(err, err_len, "http_fanout: up to 4 IPv4 or IPv6 addresses");
  for (int i = 0; i < c->nhttp_fanout; i++) {
    int n = c->http_fanout_ntargets[i];
    if (n < 1 || n > NHB_SERVER_MAX_FANOUT_TARGETS)
      return config_error(err, err_len, "http_fanout: 1 to 8 targets per fan-out");
    for (int k = 0; k < n; k++) {
      const nhb_server_fanout_target* t = &c->http_fanout_target[i][k];
      if (check_addrs(&t->addr, 1, 0) < 0 || !t->url || !t->host || !t->path || (t->path[0] && t->path[0] != '/'))
        return config_error(err, err_len,
                            "http_fanout: a target is an IPv4 or IPv6 address, a URL, a host and a path");
    }
  }
  if (c->has_admin && check_addrs(&c->admin, 1, 0) < 0)
    return config_error(err, err_len, "admin: an IPv4 or IPv6 address");
  /* The worker array (and worker 0, which serves the admin listener) is
   * allocated and zeroed here. */
  if (c->nworkers < 1 || c->nworkers > NHB_MAX_WORKERS)
    return config_error(err, err_len, "workers: must be 1-4096");
  /* The payload is allocated and written here, byte by byte. */
  if (c->max_payload_bytes > (256ULL << 20)) return config_error(err, err_len, "max_payload_kb: at most 262144");
  /* HTTP/2 limits a header block to 2 * max_header_bytes + 64 KiB: that sum
   * must not wrap. */
  if (c->max_header_bytes > (1ULL << 62)) return config_error(err, err_len, "max_header_bytes: at most 2^62");
  /* A response held to a stall window's end is re-checked when its timer
   * fires: with stall_for >= stall_every that end lies in the next window
   * again, and with windows closer than 100 us the re-checks come so fast
   * that the worker spins. */
  if (c->stall_every_ns && c->stall_for_ns >= c->stall_every_ns)
    return config_error(err, err_len, "stall_for: must be shorter than stall_every");
  if (c->stall_every_ns > 0 && c->stall_every_ns < 100000)
    return config_error(err, err_len, "stall_every: must be at least 100 us");
  /* Copied into the certificate's fixed array and read as C strings. */
  if (c->ntls_san < 0 || c->ntls_san > NHB_SERVER_MAX_SAN)
    return config_error(err, err_len, "tls: at most 16 extra certificate names");
  for (int i = 0; i < c->ntls_san; i++)
    if (!c->tls_san[i]) return config_error(err, err_len, "tls: a certificate name is NULL");
  /* Handed to OpenSSL as file names. */
  if (c->tls && !c->tls_self_signed && (!c->tls_cert_file || !*c->tls_cert_file || !c->tls_key_file || !*c->tls_key_file))
    return config_error(err, err_len, "tls: needs a certificate and a key file, or self_signed");

  const char* debug_path = c->debug_path ? c->debug_path : "/debug";
  if (!debug_path_ok(debug_path))
    return config_error(err, err_len,
                        "debug_path: \"\" or a path under / (not / itself) without '?', '#', "
                        "spaces or control characters, at most 1024 bytes");

  nhb_server* s = calloc(1, sizeof(*s));
  if (!s) return NHB_ENOMEM;
  s->config = *c;
  s->cpus = calloc((size_t)c->nworkers, sizeof(int));
  /* Workers hold 64-byte-aligned counters, which calloc does not promise. */
  size_t wsize = (size_t)c->nworkers * sizeof(nhb__srv_worker);
  void* wmem = NULL;
  if (posix_memalign(&wmem, 64, wsize) == 0) memset(wmem, 0, wsize);
  s->workers = wmem;
  s->response_json = strdup(c->response_json ? c->response_json : "");
  s->echo_default_params = strdup(c->echo_default_params ? c->echo_default_params : "");
  s->debug_path = strdup(debug_path);
  s->forward_prefix = strdup(c->forward_prefix ? c->forward_prefix : "");
  s->a_region = malloc(NHB__SRV_NH_MAX_BODY);
  /* At least one byte: malloc(0) may return NULL, and 0 is a valid cap. */
  s->payload = malloc(c->max_payload_bytes ? c->max_payload_bytes : 1);
  if (!s->cpus || !s->workers || !s->response_json || !s->echo_default_params || !s->debug_path ||
      !s->forward_prefix || !s->a_region || !s->payload ||
      (c->debug_env_dump && snapshot_environment(s) < 0)) {
    nhb_server_destroy(s);
    return NHB_ENOMEM;
  }
  s->config.response_json = s->response_json;
  s->config.echo_default_params = s->echo_default_params;
  s->config.debug_path = s->debug_path;
  s->debug_path_len = strlen(s->debug_path);
  s->debug_subtree = s->debug_path_len && s->debug_path[s->debug_path_len - 1] == '/';
  s->config.forward_prefix = s->forward_prefix;
  s->forward_prefix_len = strlen(s->forward_prefix);
  for (int i = 0; i < c->nworkers; i++) {
    s->cpus[i] = c->cpus ? c->cpus[i] : -1;
    s->workers[i].timer_fd = -1;
    s->workers[i].spare_fd = -1;
    for (int k = 0; k < NHB__SRV_ADMIN_RESERVE; k++) s->workers[i].admin_fds[k] = -1;
  }
  s->config.cpus = s->cpus;
  memset(s->a_region, 'a', NHB__SRV_NH_MAX_BODY);
  /* Fortio's payload is random so that compression cannot shrink it; this
   * one is pseudo-random and the same on every run. */
  uint64_t x = 0x6e6862656e6368ULL;
  for (uint64_t i = 0; i < c->max_payload_bytes; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    s->payload[i] = (char)(x >> 32);
  }
  if (gethostname(s->hostname, sizeof(s->hostname) - 1) < 0) strcpy(s->hostname, "localhost");

  char why[200];
  size_t jlen = strlen(s->response_json);
  if (jlen && nhb__srv_nh_parse(s->response_json, jlen, &s->nh, &s->nh_arena, why, sizeof(why)) < 0) {
    if (err && err_len) snprintf(err, err_len, "response: %s", why);
    nhb_server_destroy(s);
    return NHB_EINVAL;
  }
  size_t qlen = strlen(s->echo_default_params);
  const char* q = s->echo_default_params;
  if (qlen && q[0] == '?') q++, qlen--;
  if (qlen) {
    if (nhb__srv_echo_parse(q, qlen, c->max_echo_delay_ns, c->max_payload_bytes, &s->echo_defaults, &s->echo_arena,
                            why, sizeof(why)) < 0) {
      if (err && err_len) snprintf(err, err_len, "echo_default_params: %s", why);
      nhb_server_destroy(s);
      return NHB_EINVAL;
    }
    s->has_echo_defaults = 1;
  }
  int r = parse_alpn(s, c->alpn, err, err_len);
  if (r == 0) r = nhb__srv_tls_init(s, err, err_len);
  if (r == 0) r = nhb__srv_h2_init(s);
  if (r == 0) r = nhb__srv_h3_init(s, err, err_len);
  if (r < 0) {
    nhb_server_destroy(s);
    return r;
  }
  if (r == 0) r = nhb__srv_sse_init(s, err, err_len);
  if (r < 0) {
    nhb_server_destroy(s);
    return r;
  }
  /* An event stream answers every request: none takes the fast path. */
  s->static_dynamic = (s->nh.has_echo_headers && s->nh.echo_headers) || s->nh.has_emit ||
                      s->nh.delay_kind == NHB__SRV_DELAY_LINEAR || s->has_echo_defaults || s->sse != NULL;
  /* Clamped to max_delay like a per-request delay (nhbench.options refuses a
   * static one over the cap before it gets here). */
  s->ok_delay_ns = s->nh.delay_kind == NHB__SRV_DELAY_STATIC ? s->nh.static_delay_ns : 0;
  if (s->ok_delay_ns > c->max_delay_ns) s->ok_delay_ns = c->max_delay_ns;
  r = nhb__srv_render_canned(s);
  if (r < 0) {
    nhb_server_destroy(s);
    return r;
  }
  *out = s;
  return 0;
}

static void teardown_unstarted(nhb__srv_worker* w) {
  if (!w->loop_ready) return;
  worker_close_all(w);
  uv_run(&w->loop, UV_RUN_DEFAULT);
  worker_release(w);
}

int nhb__srv_worker_open(nhb_server* s, nhb__srv_worker* w) { return worker_init(s, w, (int)(w - s->workers)); }

void nhb__srv_worker_shut(nhb__srv_worker* w) { teardown_unstarted(w); }

int nhb_server_start(nhb_server* s) {
  if (s->started || s->stopped) return NHB_ESTATE;
  const nhb_server_config* c = &s->config;
  s->err[0] = '\0';
  s->start_ns = nhb__now_ns();
  s->max_connections = c->max_connections;
  if (!s->max_connections) {
    /* Enough descriptors stay free that the admin endpoint, the listeners'
     * reserves and the rest of the process never run short because of
     * HTTP connections. */
    struct rlimit rl;
    s->max_connections = UINT64_MAX;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
      s->max_connections = rl.rlim_cur > 2 * NHB__SRV_FD_HEADROOM ? rl.rlim_cur - NHB__SRV_FD_HEADROOM : rl.rlim_cur / 2;
  }
  int r = 0;
  for (int i = 0; i < c->nworkers && r == 0; i++) {
    r = worker_init(s, &s->workers[i], i);
    if (r < 0) snprintf(s->err, sizeof(s->err), "worker %d: %s (%s)", i, nhb_strerror(r), nhb_err_name(r));
  }
  for (int i = 0; i < c->nlisten && r == 0; i++) {
    const struct sockaddr* sa = (const struct sockaddr*)c->listen[i].bytes;
    r = sa->sa_family == AF_UNIX ? bind_unix(s, i, &c->listen[i]) : bind_inet(s, NHB__SRV_L_HTTP, i, &c->listen[i], 1);
  }
  if (r == 0 && c->has_admin) r = bind_inet(s, NHB__SRV_L_ADMIN, 0, &c->admin, 0);
  for (int i = 0; i < c->ntcp_echo && r == 0; i++) r = bind_inet(s, NHB__SRV_L_TCP_ECHO, i, &c->tcp_echo[i], 1);
  for (int i = 0; i < c->nudp_echo && r == 0; i++) r = bind_inet(s, NHB__SRV_L_UDP_ECHO, i, &c->udp_echo[i], 1);
  for (int i = 0; i < c->ntcp_proxy && r == 0; i++) r = bind_inet(s, NHB__SRV_L_TCP_PROXY, i, &c->tcp_proxy[i], 1);
  for (int i = 0; i < c->nredirect && r == 0; i++) r = bind_inet(s, NHB__SRV_L_REDIRECT, i, &c->redirect[i], 1);
  for (int i = 0; i < c->nhttp_fanout && r == 0; i++)
    r = bind_inet(s, NHB__SRV_L_HTTP_FANOUT, i, &c->http_fanout[i], 1);
  if (r == 0 && c->http3) r = bind_quic(s);
  if (r < 0) {
    for (int i = 0; i < c->nworkers; i++) teardown_unstarted(&s->workers[i]);
    unlink_unix_paths(s);
    memset(s->nbound, 0, sizeof(s->nbound));
    return r;
  }
  s->started = 1;
  for (int i = 0; i < c->nworkers; i++) {
    nhb__srv_worker* w = &s->workers[i];
    if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
      snprintf(s->err, sizeof(s->err), "cannot start worker thread %d", i);
      nhb_server_stop(s);
      return NHB_ETHREAD;
    }
    w->thread_started = 1;
  }
  return 0;
}

const char* nhb_server_error(const nhb_server* s) { return s->err; }

const char* nhb_server_tls_cert_pem(const nhb_server* s) { return s->cert_pem; }

int nhb_server_bound_count(const nhb_server* s, nhb_server_socket_t kind) {
  if ((int)kind < 0 || kind > NHB_SOCK_QUIC || !s->started) return 0;
  return s->nbound[kind];
}

int nhb_server_bound(const nhb_server* s, nhb_server_socket_t kind, int i, void* addr, unsigned* addr_len) {
  if ((int)kind < 0 || kind > NHB_SOCK_QUIC || !s->started || i < 0 || i >= s->nbound[kind] ||
      *addr_len < s->bound_len[kind][i])
    return NHB_EINVAL;
  memcpy(addr, &s->bound[kind][i], s->bound_len[kind][i]);
  *addr_len = s->bound_len[kind][i];
  return 0;
}

int nhb_server_address(const nhb_server* s, int i, void* addr, unsigned* addr_len) {
  return nhb_server_bound(s, NHB_SOCK_HTTP, i, addr, addr_len);
}

void nhb_server_stats_get(const nhb_server* s, nhb_server_stats* out) {
  memset(out, 0, sizeof(*out));
  for (int i = 0; i < s->config.nworkers; i++) {
    const nhb__srv_counters* c = &s->workers[i].counters;
#define LOAD(x) atomic_load_explicit(&c->x, memory_order_relaxed)
#define ADD(name) out->name += LOAD(name);
#define ADD_STATUS(name) \
  for (int k = 0; k < NHB_SERVER_STATUS_MAX; k++) out->name[k] += LOAD(name[k]);
    NHB_SERVER_STAT_MAP(ADD, ADD_STATUS)
#undef ADD
#undef ADD_STATUS
#undef LOAD
  }
  if (s->started && s->config.stall_every_ns && s->config.stall_for_ns) {
    uint64_t end = atomic_load_explicit(&s->stop_ns, memory_order_relaxed);
    if (!end) end = nhb__now_ns();
    out->stalls += (end - s->start_ns) / s->config.stall_every_ns + 1;
  }
}

void nhb_server_stop(nhb_server* s) {
  if (!s->started || s->stopped) return;
  s->stopped = 1;
  atomic_store_explicit(&s->stop_ns, nhb__now_ns(), memory_order_relaxed);
  for (int i = 0; i < s->config.nworkers; i++)
    if (s->workers[i].thread_started) uv_async_send(&s->workers[i].wakeup);
  for (int i = 0; i < s->config.nworkers; i++) {
    nhb__srv_worker* w = &s->workers[i];
    if (w->thread_started) {
      pthread_join(w->thread, NULL);
      w->thread_started = 0;
      worker_release(w);
    } else {
      teardown_unstarted(w);
    }
  }
  unlink_unix_paths(s);
}

void nhb_server_destroy(nhb_server* s) {
  if (!s) return;
  nhb_server_stop(s);
  for (int m = 0; m < 3; m++)
    for (int h = 0; h < 2; h++) {
      free(s->ok[m][h]);
      free(s->err_ok[m][h]);
      s->err_ok[m][h] = NULL;
    }
  free(s->canned_400);
  free(s->canned_413);
  free(s->canned_431);
  free(s->canned_505);
  nhb__srv_sse_free(s);
  nhb__srv_tls_free(s);
  nhb__srv_h2_free(s);
  nhb__srv_h3_free(s);
  free(s->alt_headers);
  nhb__srv_arena_free(&s->nh_arena);
  nhb__srv_arena_free(&s->echo_arena);
  free(s->a_region);
  free(s->payload);
  free(s->response_json);
  free(s->echo_default_params);
  free(s->debug_path);
  free(s->env_dump);
  free(s->forward_prefix);
  free(s->cpus);
  free(s->workers);
  free(s);
}
