/* fuzz_client_h2_tunnel.c: the client's reading of an HTTP/2 proxy's side of
 * a CONNECT (carrier.c, --proxy-protocol http2 over h2c): the proxy's
 * SETTINGS, HEADERS (the answer, interim ones, a second :status), DATA
 * before and after the answer, RST_STREAM, GOAWAY and broken framing, as the
 * carrier's nghttp2 session reads them, then the origin's bytes in DATA
 * frames, which go to the inner transport and the HTTP/1.1 (or HTTP/2)
 * session as a response.
 *
 * The carrier owns a real socket (it writes with uv_try_write and asks the
 * handle for its descriptor), so the harness does not replace the
 * transport: the run's proxy address is a loopback listener of the
 * harness, each connection really connects to it, and the carrier writes
 * its preface, SETTINGS, CONNECT and the tunnelled request into that
 * socket, which the harness accepts and drains. What the proxy answers is
 * the fuzz input, delivered through nhb__conn_read(), exactly as the
 * socket's read callback delivers a read, in pieces the input chooses.
 * carrier.c runs unchanged.
 *
 * Input: the first byte picks a configuration (below); then operations in
 * fuzz_client.h's format, so that its seeds' helpers serve here too: each
 * one byte, kind = b >> 5:
 *   0-3  a read of n bytes, n = the next byte
 *   4    a read of everything that is left
 *   5    the proxy closed the connection (EOF)
 *   6    the connection was reset (ECONNRESET)
 *   7    control, by b & 31: 2 run the loop once, 3 scan time-outs 10 s
 *        ahead, 4 stop the run (drain); others nothing (the proxy's socket
 *        takes every write, so there are no held writes to release)
 * Each read is copied into a buffer of exactly its length, so that
 * AddressSanitizer catches a read past its end. Reads go only to a
 * connection whose TCP connection to the proxy is up.
 *
 * Invariants checked after every operation (abort = a finding): responses
 * <= requests sent; the connection's requests add up to the worker's in
 * flight; no request disappears or ends twice (released = ended + in flight
 * + queued); tunnels established <= connections made, and a connection that
 * is ready through the tunnel has its tunnel up; once a tunnel failed, the
 * run has a first error. At the end the run is stopped, every handle closes
 * and LeakSanitizer checks that nothing leaked (the nghttp2 session).
 */
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client/client.h"

#define FUZZ_NVARIANTS 3
#define FUZZ_MAX_PEERS 64

static nhb_run* fuzz_runs[FUZZ_NVARIANTS];
static nhb__worker fuzz_worker;
static int fuzz_listener = -1;
static struct sockaddr_in fuzz_proxy;
static int fuzz_peers[FUZZ_MAX_PEERS];
static int fuzz_npeers;
static uint64_t fuzz_callback_base;

static const char fuzz_connect[] = "CONNECT origin.test:80 HTTP/1.1\r\nHost: origin.test:80\r\n\r\n";
static const char fuzz_get[] = "GET /fuzz HTTP/1.1\r\nHost: origin.test\r\n\r\n";

/* ---- the proxy's socket ------------------------------------------------------ */

static void fuzz_listen(void) {
  fuzz_listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  assert(fuzz_listener >= 0);
  memset(&fuzz_proxy, 0, sizeof(fuzz_proxy));
  fuzz_proxy.sin_family = AF_INET;
  fuzz_proxy.sin_addr.s_addr = htonl(0x7f000001);
  socklen_t len = sizeof(fuzz_proxy);
  if (bind(fuzz_listener, (struct sockaddr*)&fuzz_proxy, len) != 0 || listen(fuzz_listener, 128) != 0 ||
      getsockname(fuzz_listener, (struct sockaddr*)&fuzz_proxy, &len) != 0) {
    perror("fuzz: the proxy's listener");
    abort();
  }
}

/* Takes the connections made to the proxy and reads away what the client
 * sent, so that its writes never wait. */
static void fuzz_peers_service(void) {
  for (;;) {
    int fd = accept4(fuzz_listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) break;
    /* Closed with a reset, so that no side keeps a TIME_WAIT port. */
    struct linger lg = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    if (fuzz_npeers == FUZZ_MAX_PEERS) {
      close(fd);
      continue;
    }
    fuzz_peers[fuzz_npeers++] = fd;
  }
  static char sink[65536];
  for (int i = 0; i < fuzz_npeers; i++)
    while (read(fuzz_peers[i], sink, sizeof(sink)) > 0) {
    }
}

static void fuzz_peers_close(void) {
  for (int i = 0; i < fuzz_npeers; i++) close(fuzz_peers[i]);
  fuzz_npeers = 0;
}

/* ---- configurations ------------------------------------------------------------ */

static nhb_run* fuzz_make_run(const nhb_client_config* cfg) {
  nhb_run* run = NULL;
  char err[256] = "";
  if (nhb_run_create_ex(cfg, &run, err, sizeof(err)) != 0) {
    fprintf(stderr, "fuzz: nhb_run_create: %s\n", err);
    abort();
  }
  return run;
}

static void fuzz_make_runs(void) {
  static const char* const rq[1] = {fuzz_connect};
  static const size_t rq_len[1] = {sizeof(fuzz_connect) - 1};
  nhb_request_spec spec;
  memset(&spec, 0, sizeof(spec));
  nhb_client_config cfg;
  memset(&cfg, 0, sizeof(cfg));
  memcpy(cfg.addr, &fuzz_proxy, sizeof(fuzz_proxy));
  cfg.addr_len = sizeof(fuzz_proxy);
  cfg.nworkers = 1;
  cfg.rps = 0; /* closed loop at the maximum rate */
  cfg.connections = 1;
  cfg.idle_strategy = NHB_IDLE_SLEEP;
  cfg.duration_ns = -1;
  cfg.connect_timeout_ns = 1000000000ULL;
  cfg.tunnel_requests = rq;
  cfg.tunnel_request_lens = rq_len;
  cfg.ntunnel_requests = 1;
  cfg.proxy_protocol = 2;
  spec.request = fuzz_get;
  spec.request_len = sizeof(fuzz_get) - 1;
  cfg.specs = &spec;
  cfg.nspecs = 1;
  /* 0: HTTP/1.1 GET to the origin through the tunnel. */
  fuzz_runs[0] = fuzz_make_run(&cfg);
  /* 1: three requests per connection (the tunnel is made again), with a
   * request time-out. */
  cfg.max_requests_per_connection = 3;
  cfg.request_timeout_ns = 1000000000ULL;
  fuzz_runs[1] = fuzz_make_run(&cfg);
  /* 2: HTTP/2 to the origin (prior knowledge) inside the tunnel. */
  /* HTTP/2 sends only the body part of the rendered request: none for a GET. */
  static const char body[] = "aaaaaaaaaaaaaaaa";
  static const nhb_header hdr = {"user-agent", 10, "nhbench", 7};
  cfg.max_requests_per_connection = 0;
  cfg.request_timeout_ns = 0;
  cfg.protocol = NHB_PROTO_HTTP2;
  cfg.h2_scheme = "http";
  cfg.max_active_requests = 2;
  memset(&spec, 0, sizeof(spec));
  spec.request = body;
  spec.request_len = sizeof(body) - 1;
  spec.h2_method = "GET";
  spec.h2_authority = "origin.test";
  spec.h2_path = "/fuzz";
  spec.h2_headers = &hdr;
  spec.h2_nheaders = 1;
  fuzz_runs[2] = fuzz_make_run(&cfg);
}

/* ---- the worker ------------------------------------------------------------------- */

static void fuzz_on_wakeup(uv_async_t* handle) { NHB__UNUSED(handle); }

static int fuzz_tcp_connecting(const nhb__worker* w) {
  for (uint32_t i = 0; i < w->nconns; i++)
    if (w->conns[i].state == NHB__CX_CONNECTING && w->conns[i].tunnel == NHB__TUNNEL_TCP) return 1;
  return 0;
}

/* Runs the loop until no connection waits for its TCP connection to the
 * proxy (on loopback it comes at once), taking and draining the proxy's
 * side as it goes. */
static void fuzz_settle(nhb__worker* w) {
  uv_run(&w->loop, UV_RUN_NOWAIT);
  for (int round = 0; round < 64 && fuzz_tcp_connecting(w); round++) {
    fuzz_peers_service();
    uv_run(&w->loop, UV_RUN_ONCE);
  }
  fuzz_peers_service();
  uv_run(&w->loop, UV_RUN_NOWAIT);
}

static void fuzz_check(nhb__worker* w) {
  const uint64_t* ctr = w->stats.counters;
  uint64_t responses = 0;
  for (int k = NHB_CTR_HTTP_1XX; k <= NHB_CTR_HTTP_XXX; k++) responses += ctr[k];
  assert(responses <= ctr[NHB_CTR_UPSTREAM_RQ_TOTAL]);
  assert(ctr[NHB_CTR_TUNNEL_ESTABLISHED] <= ctr[NHB_CTR_UPSTREAM_CX_TOTAL]);
  uint64_t failed = ctr[NHB_CTR_TUNNEL_CONNECT_FAIL] + ctr[NHB_CTR_TUNNEL_NON_2XX] + ctr[NHB_CTR_TUNNEL_CLOSED] +
                    ctr[NHB_CTR_TUNNEL_PROTOCOL_ERROR] + ctr[NHB_CTR_TUNNEL_TIMEOUT] + ctr[NHB_CTR_TUNNEL_RESET];
  assert(failed <= ctr[NHB_CTR_UPSTREAM_CX_TOTAL]);
  if (w->finishing) return;
  uint64_t nactive = 0;
  for (uint32_t i = 0; i < w->nconns; i++) {
    const nhb__conn* c = &w->conns[i];
    assert(c->nrefused <= c->nactive);
    if (c->state == NHB__CX_READY) assert(c->tunnel == 0);
    if (c->state == NHB__CX_DISCONNECTED) assert(c->nactive == 0 || w->backoff_active);
    nactive += c->nactive;
  }
  assert(nactive == w->in_flight);
  uint64_t ended = w->stats.hists[NHB_HIST_SEQUENCER_CALLBACK]->total + w->ph_same->total - fuzz_callback_base;
  assert(ctr[NHB_CTR_SEQUENCER_RELEASED] == ended + w->in_flight + w->pending_len);
}

static void fuzz_worker_start(nhb__worker* w, nhb_run* run) {
  nhb_stats stats = run->workers[0].stats;
  memset(w, 0, sizeof(*w));
  w->run = run;
  w->cpu = -1;
  w->release_fd = -1;
  w->stats = stats;
  /* The histograms that the pool records into and phases.c folds in (a
   * closed loop's sequencer.callback among them). */
  w->ph_whole = run->workers[0].ph_whole;
  w->ph_ok = run->workers[0].ph_ok;
  w->ph_same = run->workers[0].ph_same;
  memset(w->stats.counters, 0, sizeof(w->stats.counters));
  fuzz_callback_base = w->stats.hists[NHB_HIST_SEQUENCER_CALLBACK]->total + w->ph_same->total;
  if (uv_loop_init(&w->loop) != 0 || uv_async_init(&w->loop, &w->wakeup, fuzz_on_wakeup) != 0 ||
      uv_timer_init(&w->loop, &w->housekeeping) != 0)
    abort();
  w->wakeup.data = w;
  w->housekeeping.data = w;
  w->start_ns = nhb__now_ns();
  w->end_ns = UINT64_MAX;
  w->interval_ns = 0;
  if (nhb__pool_init(w) != 0) abort();
  if (nhb__sequencer_init(w) != 0) abort();
  /* The phase's release count and end, as the worker thread sets them. */
  nhb__sequencer_worker_start(w);
  nhb__sequencer_run(w);
  fuzz_settle(w);
  fuzz_check(w);
}

static void fuzz_worker_end(nhb__worker* w) {
  /* The proxy's side goes first, with a reset: the client's close then
   * leaves no TIME_WAIT behind. */
  fuzz_peers_close();
  if (!w->stopping) {
    nhb__sequencer_stop_now(w, 0);
  } else {
    w->drain_deadline_ns = 0;
    nhb__worker_maybe_finish(w);
  }
  assert(w->finishing);
  uv_run(&w->loop, UV_RUN_DEFAULT);
  const uint64_t* ctr = w->stats.counters;
  uint64_t ended = w->stats.hists[NHB_HIST_SEQUENCER_CALLBACK]->total + w->ph_same->total - fuzz_callback_base;
  assert(ctr[NHB_CTR_SEQUENCER_RELEASED] == ended + ctr[NHB_CTR_UPSTREAM_RQ_CANCELLED]);
  if (ctr[NHB_CTR_TUNNEL_NON_2XX] + ctr[NHB_CTR_TUNNEL_CLOSED] + ctr[NHB_CTR_TUNNEL_PROTOCOL_ERROR] +
          ctr[NHB_CTR_TUNNEL_RESET] >
      0)
    assert(w->first_error != 0); /* its text is the first error's, which may be an earlier one */
  int r = uv_loop_close(&w->loop);
  assert(r == 0);
  (void)r;
  nhb__pool_free(w);
}

static void fuzz_op(nhb__worker* w, const uint8_t** pp, const uint8_t* end) {
  const uint8_t* p = *pp;
  uint8_t b = *p++;
  int kind = b >> 5;
  nhb__conn* c = &w->conns[0];
  int up = (c->state == NHB__CX_READY || (c->state == NHB__CX_CONNECTING && c->tunnel != NHB__TUNNEL_TCP)) &&
           !w->finishing;
  if (kind <= 4) {
    size_t n = (size_t)(end - p);
    if (kind < 4) {
      if (p == end) {
        *pp = p;
        return;
      }
      size_t want = *p++;
      n = (size_t)(end - p) < want ? (size_t)(end - p) : want;
    }
    if (up && n > 0) {
      char* buf = malloc(n);
      assert(buf != NULL);
      memcpy(buf, p, n);
      nhb__conn_read(c, (ssize_t)n, buf);
      free(buf);
    }
    p += n;
  } else if (kind == 5) {
    if (up) nhb__conn_read(c, UV_EOF, NULL);
  } else if (kind == 6) {
    if (up) nhb__conn_read(c, UV_ECONNRESET, NULL);
  } else {
    switch (b & 31) {
      case 2:
        uv_run(&w->loop, UV_RUN_NOWAIT);
        break;
      case 3:
        if (!w->finishing) nhb__pool_scan_timeouts(w, nhb__now_ns() + 10 * NHB__NS_PER_S);
        break;
      case 4:
        nhb__sequencer_stop_now(w, 60 * NHB__NS_PER_S);
        break;
      default:
        break;
    }
  }
  *pp = p;
}

int LLVMFuzzerInitialize(int* argc, char*** argv) {
  NHB__UNUSED(argc);
  NHB__UNUSED(argv);
  fuzz_listen();
  fuzz_make_runs();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  nhb__worker* w = &fuzz_worker;
  fuzz_worker_start(w, fuzz_runs[data[0] % FUZZ_NVARIANTS]);
  const uint8_t* p = data + 1;
  const uint8_t* end = data + size;
  while (p < end) {
    fuzz_op(w, &p, end);
    fuzz_settle(w);
    fuzz_check(w);
  }
  fuzz_worker_end(w);
  return 0;
}
