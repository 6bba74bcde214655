/* fuzz_server.c: the test server's request paths, from the bytes a client
 * sends to the responses it gets: protocol detection, HTTP/1.1 (llhttp,
 * server_conn.c: pipelining, back-pressure, Expect, Upgrade: h2c), HTTP/2
 * (server_h2.c on nghttp2), and the response building of server_respond.c
 * with the Fortio query parameters and the per-request
 * x-nighthawk-test-server-config JSON.
 *
 * The server's own code runs unchanged on one worker set up on this thread
 * (nhb__srv_worker_open, as nhb_server_start does before it starts the
 * worker's thread). The worker's listener is a unix socket with an abstract
 * name (no file, no network); the harness connects to it with plain sockets,
 * so accepting, reading and writing are the server's real paths. The harness
 * writes the fuzz input as the client and reads (and discards) whatever the
 * server answers, so that large responses flow instead of blocking.
 *
 * Input: the first byte picks one of four server configurations; then
 * operations, each one byte (kind = b >> 5, client connection = b & 1) plus
 * its data:
 *   0-3  send n bytes, n = the next byte
 *   4    send everything that is left
 *   5    half-close the client's side (shutdown(SHUT_WR))
 *   6    close the client connection (a new one is opened by the next send)
 *   7    wait for the responses held back by a delay (at most WAIT_MAX_NS;
 *        Fortio's delay= is capped below that, a longer Nighthawk delay is
 *        not waited for) and send them
 * After every operation the loop runs until the server has nothing more to
 * say (bounded), reading every answer.
 *
 * Checked: memory safety (ASan), undefined behaviour (UBSan), leaks (LSan, at
 * exit), that the loop closes cleanly, and that the server's connection
 * accounting returns to zero active connections, with every accepted
 * connection counted once.
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "server/server_internal.h"

#define NVARIANTS 4
#define NCLIENTS 2
/* Rounds of "run the loop, read the answers" after one operation. A round
 * moves at least a socket buffer's worth (about 200 KiB), so this covers the
 * largest response (Nighthawk's 4 MiB body) several times over. */
#define MAX_ROUNDS 64
/* The longest wait for a delayed response (operation 7). */
#define WAIT_MAX_NS (5 * NHB__NS_PER_MS)

static nhb_server* servers[NVARIANTS];
static struct sockaddr_un listen_addr;
static socklen_t listen_addr_len;
static int clients[NCLIENTS];
static char sink[65536];

static void make_servers(void) {
  /* An abstract unix socket name (leading NUL), unique to this process. */
  memset(&listen_addr, 0, sizeof(listen_addr));
  listen_addr.sun_family = AF_UNIX;
  int n = snprintf(listen_addr.sun_path + 1, sizeof(listen_addr.sun_path) - 1, "nhbench-fuzz-%d", (int)getpid());
  listen_addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);

  for (int i = 0; i < NVARIANTS; i++) {
    nhb_server_config cfg;
    nhb_server_config_init(&cfg);
    cfg.nlisten = 1;
    memcpy(cfg.listen[0].bytes, &listen_addr, listen_addr_len);
    cfg.listen[0].len = listen_addr_len;
    /* Time-outs come from the sweep timer, which a fuzz run does not wait
     * for. Fortio delays are capped at 2 ms so that operation 7 can wait
     * for them; longer ones (Nighthawk's) stay queued until the teardown. */
    cfg.idle_timeout_ns = 0;
    cfg.header_timeout_ns = 0;
    cfg.max_echo_delay_ns = 2 * NHB__NS_PER_MS;
    cfg.max_payload_bytes = 64 * 1024;
    switch (i) {
      case 0: /* the defaults: h2 and http/1.1, no static response options */
        break;
      case 1: /* static Nighthawk options and Fortio defaults: every request takes the dynamic path */
        cfg.response_json =
            "{\"response_body_size\": 10, \"response_headers\": [{\"header\": {\"key\": \"x-static\", \"value\": "
            "\"1\"}}], \"echo_request_headers\": true}";
        cfg.echo_default_params = "size=100:50,2000:50&status=200:90,503:10&header=x-default:yes";
        break;
      case 2: /* HTTP/1.1 only, small limits */
        cfg.alpn = "http/1.1";
        cfg.max_header_bytes = 1024;
        cfg.max_body_bytes = 4096;
        break;
      default: /* HTTP/2 only, two streams per connection */
        cfg.alpn = "h2";
        cfg.max_concurrent_streams = 2;
        break;
    }
    char err[256] = "";
    if (nhb_server_create(&cfg, &servers[i], err, sizeof(err)) != 0) {
      fprintf(stderr, "fuzz: nhb_server_create: %s\n", err);
      abort();
    }
    /* nhb_server_start() (not called here) derives the connection limit from
     * RLIMIT_NOFILE; the two clients never come near any limit. */
    servers[i]->max_connections = UINT64_MAX;
  }
}

int LLVMFuzzerInitialize(int* argc, char*** argv) {
  NHB__UNUSED(argc);
  NHB__UNUSED(argv);
  /* The worker runs on this thread: block SIGPIPE as its own thread does
   * (worker_main in server.c), so that writing to a client that went away
   * fails with EPIPE instead of killing the process. */
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  make_servers();
  for (int i = 0; i < NCLIENTS; i++) clients[i] = -1;
  return 0;
}

static int client_open(void) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) abort();
  /* A unix stream connect completes at once (the listener's backlog is
   * large and the harness accepts after every operation). */
  if (connect(fd, (const struct sockaddr*)&listen_addr, listen_addr_len) != 0) abort();
  return fd;
}

static void client_close(int i) {
  if (clients[i] >= 0) close(clients[i]);
  clients[i] = -1;
}

/* Reads what the server sent on every client connection; returns the bytes. */
static size_t drain_clients(void) {
  size_t total = 0;
  for (int i = 0; i < NCLIENTS; i++) {
    if (clients[i] < 0) continue;
    for (;;) {
      ssize_t n = read(clients[i], sink, sizeof(sink));
      if (n > 0) {
        total += (size_t)n;
        continue;
      }
      /* EOF (the server closed) or an error (the server reset): this
       * connection is done; the next send opens another. */
      if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) client_close(i);
      break;
    }
  }
  return total;
}

static void settle(nhb__srv_worker* w) {
  for (int round = 0; round < MAX_ROUNDS; round++) {
    uv_run(&w->loop, UV_RUN_NOWAIT);
    if (drain_clients() == 0 && round > 0) break;
  }
}

/* Writes as much of p[0..n) as the socket takes: a server that stopped
 * reading (back-pressure) is allowed to. */
static void client_send(nhb__srv_worker* w, int i, const uint8_t* p, size_t n) {
  if (clients[i] < 0) {
    clients[i] = client_open();
    uv_run(&w->loop, UV_RUN_NOWAIT); /* accept */
  }
  while (n > 0) {
    ssize_t k = send(clients[i], p, n, MSG_NOSIGNAL);
    if (k <= 0) break;
    p += k;
    n -= (size_t)k;
    if (n > 0) settle(w);
    if (clients[i] < 0) break;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  nhb_server* s = servers[data[0] % NVARIANTS];
  nhb__srv_worker* w = &s->workers[0];
  memset(w, 0, sizeof(*w));
  w->timer_fd = -1;
  if (nhb__srv_worker_open(s, w) != 0) abort();
  /* The sweep handles time-outs only (all off here) and the lingering of
   * closed connections, which the teardown ends anyway; it must not make a
   * run depend on the clock. */
  uv_timer_stop(&w->sweep);
  /* The real listener path: a polled socket accepted by nhb__srv_accept(). */
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0 || bind(fd, (const struct sockaddr*)&listen_addr, listen_addr_len) != 0 || listen(fd, 128) != 0 ||
      nhb__srv_add_listener(w, fd, NHB__SRV_L_HTTP, 1) != 0) {
    perror("fuzz: listener");
    abort();
  }

  const uint8_t* p = data + 1;
  const uint8_t* end = data + size;
  while (p < end) {
    uint8_t b = *p++;
    int kind = b >> 5;
    int i = b & 1;
    if (kind <= 4) {
      if (kind < 4 && p == end) break;
      size_t want = kind < 4 ? *p++ : SIZE_MAX;
      size_t n = (size_t)(end - p) < want ? (size_t)(end - p) : want;
      if (n > 0) client_send(w, i, p, n);
      p += n;
    } else if (kind == 5) {
      if (clients[i] >= 0) shutdown(clients[i], SHUT_WR);
    } else if (kind == 6) {
      client_close(i);
    } else if (w->heap_len > 0) {
      /* The delay heap's timerfd fires in the loop, through the real path. */
      uint64_t now = nhb__now_ns(), due = w->heap[0]->wake_ns;
      if (due > now && due - now <= WAIT_MAX_NS) {
        struct timespec ts = {0, (long)(due - now)};
        nanosleep(&ts, NULL);
      }
    }
    settle(w);
  }

  for (int i = 0; i < NCLIENTS; i++) client_close(i);
  uint64_t accepted = atomic_load(&w->counters.connections_total);
  nhb__srv_worker_shut(w);
  /* Every connection was counted once and is gone. */
  assert(atomic_load(&w->counters.connections_active) == 0);
  assert(atomic_load(&w->counters.connections_total) == accepted);
  assert(w->conns == NULL && w->delayed == 0);
  return 0;
}
