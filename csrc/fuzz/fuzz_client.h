/* fuzz_client.h: the harness shared by fuzz_client_h1.c and fuzz_client_h2.c.
 *
 * It drives the real client worker: pool.c hands requests to connections,
 * session_h1.c / session_h2.c turn them into bytes and parse what comes back,
 * sequencer.c releases new requests at the maximum rate (closed loop) as
 * responses end. Only the transport is replaced: a memory transport with no
 * socket, whose connect completes when the harness says so, whose writes go
 * nowhere, and whose "received" bytes are the fuzz input, delivered through
 * nhb__conn_read() exactly as the socket's read callback delivers them.
 *
 * Input: the first byte picks one of four client configurations (FUZZ_PROTO
 * decides which ones, see the including file); then a list of operations,
 * each one byte (kind = b >> 5, connection = b & 1) plus its data:
 *   0-3  a read of n bytes on the connection, n = the next byte
 *   4    a read of everything that is left
 *   5    the server closed the connection (EOF)
 *   6    the connection was reset (ECONNRESET)
 *   7    control, by b & 31: 0 hold writes (the transport reports them
 *        pending), 1 complete held writes, 2 run the loop once, 3 scan
 *        request time-outs 10 s in the future, 4 stop the run (drain)
 * Reads go only to a connection that is up (as libuv would); after every
 * operation the loop runs once and connections being opened come up.
 *
 * Invariants checked after every operation (abort = a finding):
 *   - every slot is on exactly one connection: the connections' request
 *     counts add up to the worker's in-flight count, which never exceeds the
 *     slot pool (a "negative" count would wrap far above it);
 *   - a connection never carries more refused requests than requests, and an
 *     HTTP/1.1 connection never more than one request;
 *   - no request disappears or ends twice: released = ended + in flight +
 *     queued, where "ended" is the number of samples in sequencer.callback,
 *     which both the response and the failure paths record exactly once;
 *   - responses counted <= requests sent;
 *   - HTTP/1.1 writes are exactly the rendered request.
 * At the end the run is stopped and every handle closed; the loop must close
 * cleanly (no handle left) and LeakSanitizer checks that nothing leaked.
 */
#ifndef NHB_FUZZ_CLIENT_H
#define NHB_FUZZ_CLIENT_H

#include <arpa/inet.h>
#include <assert.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"

#define FUZZ_NVARIANTS 4

static nhb_run* fuzz_runs[FUZZ_NVARIANTS];
static nhb__worker fuzz_worker;
static int fuzz_hold_writes;

/* ---- the memory transport ------------------------------------------------ */

static void mem_on_connected(nhb__conn* c) { nhb__conn_ready(c); }

static int mem_on_read(nhb__conn* c, const char* data, size_t len) { return c->session->on_data(c, data, len); }

static int mem_write(nhb__conn* c, const char* data, size_t len) {
  const nhb_client_config* cfg = &c->worker->run->config;
  assert(!c->write_pending); /* callers check before writing */
  assert(len > 0);
  if (cfg->protocol == NHB_PROTO_HTTP1)
    assert(len == cfg->specs[0].request_len && memcmp(data, cfg->specs[0].request, len) == 0);
  c->worker->stats.counters[NHB_CTR_UPSTREAM_CX_TX_BYTES_TOTAL] += len;
  if (fuzz_hold_writes) c->write_pending = 1;
  return 0;
}

/* The connection comes up when the harness calls on_connected. */
static int mem_connect(nhb__conn* c) {
  NHB__UNUSED(c);
  return 0;
}

static const nhb__transport_vtable fuzz_mem_transport = {
    "fuzz-memory", mem_on_connected, mem_on_read, mem_write, NULL, mem_connect, NULL,
};

/* ---- configurations --------------------------------------------------------- */

static const char fuzz_h1_get[] = "GET /fuzz HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: nhbench\r\n\r\n";
static const char fuzz_h1_head[] = "HEAD /fuzz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
static const char fuzz_h1_post[] =
    "POST /fuzz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 16\r\n\r\naaaaaaaaaaaaaaaa";

static void fuzz_base_config(nhb_client_config* cfg) {
  memset(cfg, 0, sizeof(*cfg));
  struct sockaddr_in* sin = (struct sockaddr_in*)cfg->addr;
  /* Never connected to: the memory transport has no socket. */
  sin->sin_family = AF_INET;
  sin->sin_port = htons(9);
  sin->sin_addr.s_addr = htonl(0x7f000001);
  cfg->addr_len = sizeof(*sin);
  cfg->nworkers = 1;
  cfg->rps = 0; /* closed loop at the maximum rate: a response releases the next request */
  cfg->connections = 2;
  cfg->idle_strategy = NHB_IDLE_SLEEP;
  cfg->duration_ns = -1;
  cfg->connect_timeout_ns = 1000000000ULL;
  cfg->drain_timeout_ns = 0;
}

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
  nhb_client_config cfg;
  /* Each run sends a request set of one (the run copies it). */
  nhb_request_spec spec;
  memset(&spec, 0, sizeof(spec));
#if !FUZZ_HTTP2
  /* 0: GET on two connections. */
  fuzz_base_config(&cfg);
  spec.request = fuzz_h1_get;
  spec.request_len = sizeof(fuzz_h1_get) - 1;
  cfg.specs = &spec;
  cfg.nspecs = 1;
  fuzz_runs[0] = fuzz_make_run(&cfg);
  /* 1: HEAD (responses have no body whatever they say). */
  spec.request = fuzz_h1_head;
  spec.request_len = sizeof(fuzz_h1_head) - 1;
  spec.head_request = 1;
  fuzz_runs[1] = fuzz_make_run(&cfg);
  /* 2: one connection, three requests each, with a request time-out. */
  fuzz_base_config(&cfg);
  memset(&spec, 0, sizeof(spec));
  spec.request = fuzz_h1_get;
  spec.request_len = sizeof(fuzz_h1_get) - 1;
  cfg.specs = &spec;
  cfg.nspecs = 1;
  cfg.connections = 1;
  cfg.max_requests_per_connection = 3;
  cfg.request_timeout_ns = 1000000000ULL;
  /* ... grouped by a response header's value (group.c reads every field). */
  cfg.group_header = "X-Served-By";
  fuzz_runs[2] = fuzz_make_run(&cfg);
  /* 3: POST with a body, with a request time-out. */
  fuzz_base_config(&cfg);
  spec.request = fuzz_h1_post;
  spec.request_len = sizeof(fuzz_h1_post) - 1;
  spec.body_size = 16;
  cfg.specs = &spec;
  cfg.nspecs = 1;
  cfg.request_timeout_ns = 1000000000ULL;
  /* ... grouped by request kind (one group). */
  static const uint32_t spec_group[1] = {0};
  cfg.ngroups = 1;
  cfg.spec_group = spec_group;
  fuzz_runs[3] = fuzz_make_run(&cfg);
#else
  static const char body[] = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
  static const nhb_header hdr = {"user-agent", 10, "nhbench", 7};
  fuzz_base_config(&cfg);
  cfg.protocol = NHB_PROTO_HTTP2;
  cfg.h2_scheme = "http";
  spec.request = body; /* HTTP/2 sends only the body part of the rendered request */
  spec.request_len = sizeof(body) - 1;
  spec.h2_method = "GET";
  spec.h2_authority = "127.0.0.1";
  spec.h2_path = "/fuzz";
  spec.h2_headers = &hdr;
  spec.h2_nheaders = 1;
  cfg.specs = &spec;
  cfg.nspecs = 1;
  /* 0: one connection, four streams, every kind of response check (check.c):
   * each stream's response is judged with its slot's own state. */
  cfg.connections = 1;
  cfg.max_active_requests = 4;
  static const unsigned char digest[32] = {0x2c, 0xf2, 0x4d, 0xba}; /* sha256("hello") begins so */
  nhb_check checks[8];
  memset(checks, 0, sizeof(checks));
  checks[0].kind = NHB_CHECK_STATUS;
  checks[0].lo[0] = 200;
  checks[0].hi[0] = 299;
  checks[0].nranges = 1;
  checks[1].kind = NHB_CHECK_HEADER_HAS;
  checks[1].header = "Content-Type";
  checks[1].header_len = 12;
  checks[1].text = "json";
  checks[1].text_len = 4;
  checks[2].kind = NHB_CHECK_HEADER_EQ;
  checks[2].header = "x-a";
  checks[2].header_len = 3;
  checks[2].text = "ok";
  checks[2].text_len = 2;
  checks[3].kind = NHB_CHECK_BODY_HAS;
  checks[3].text = "\"ok\":true";
  checks[3].text_len = 9;
  checks[4].kind = NHB_CHECK_BODY_SIZE;
  checks[4].lo[0] = 1;
  checks[4].hi[0] = 64;
  checks[4].nranges = 1;
  checks[5].kind = NHB_CHECK_BODY_SHA256;
  checks[5].text = (const char*)digest;
  checks[5].text_len = 32;
  checks[6].kind = NHB_CHECK_JSON_EQ;
  checks[6].text = "/a/0";
  checks[6].text_len = 4;
  checks[6].value = "1";
  checks[6].value_len = 1;
  checks[7].kind = NHB_CHECK_HEADER_ABSENT;
  checks[7].header = "x-error";
  checks[7].header_len = 7;
  cfg.checks = checks;
  cfg.nchecks = 8;
  fuzz_runs[0] = fuzz_make_run(&cfg);
  cfg.checks = NULL;
  cfg.nchecks = 0;
  /* 1: POST with a body, two connections of at most two streams. */
  spec.h2_method = "POST";
  cfg.connections = 2;
  cfg.max_active_requests = 8;
  cfg.max_concurrent_streams = 2;
  spec.body_size = sizeof(body) - 1;
  fuzz_runs[1] = fuzz_make_run(&cfg);
  /* 2: five requests per connection, with a request time-out. */
  spec.h2_method = "GET";
  spec.body_size = 0;
  cfg.connections = 1;
  cfg.max_active_requests = 3;
  cfg.max_concurrent_streams = 0;
  cfg.max_requests_per_connection = 5;
  cfg.request_timeout_ns = 1000000000ULL;
  fuzz_runs[2] = fuzz_make_run(&cfg);
  /* 3: one stream at a time, a request set of two entries (HEAD, then GET)
   * whose second has its own check besides the run's, grouped by a response
   * header's value. */
  cfg.max_requests_per_connection = 0;
  cfg.request_timeout_ns = 0;
  cfg.max_active_requests = 1;
  nhb_request_spec two[2];
  two[0] = spec;
  two[0].h2_method = "HEAD";
  two[1] = spec;
  cfg.specs = two;
  cfg.nspecs = 2;
  cfg.checks = checks;
  cfg.nchecks = 2;
  checks[1].entry = 2;
  cfg.group_header = "x-served-by";
  fuzz_runs[3] = fuzz_make_run(&cfg);
#endif
}

/* ---- the worker ------------------------------------------------------------------ */

static void fuzz_on_wakeup(uv_async_t* handle) { NHB__UNUSED(handle); }

static uint32_t fuzz_nslots(const nhb__worker* w) {
  const nhb_client_config* cfg = &w->run->config;
  return cfg->protocol == NHB_PROTO_HTTP2 ? cfg->max_active_requests : cfg->connections;
}

static uint64_t fuzz_callback_base;
static uint64_t fuzz_group_base;

/* Requests ended so far: sequencer.callback's count, with the responses
 * whose callback time phases.c has not folded in yet (released when
 * scheduled: the closed loop's). */
static uint64_t fuzz_callbacks(const nhb__worker* w) {
  return w->stats.hists[NHB_HIST_SEQUENCER_CALLBACK]->total + w->ph_same->total;
}

static void fuzz_check(nhb__worker* w) {
  const uint64_t* ctr = w->stats.counters;
  uint64_t responses = ctr[NHB_CTR_CHECK_FAILED];
  for (int k = NHB_CTR_HTTP_1XX; k <= NHB_CTR_HTTP_XXX; k++) responses += ctr[k];
  assert(responses <= ctr[NHB_CTR_UPSTREAM_RQ_TOTAL]);
  /* Response checks: over HTTP/2 every response is judged once by each of
   * the run's checks (an entry's own judge that entry's only), and only a
   * 2xx that failed one counts as check_failed. */
  const nhb__chk_set* set = &w->run->chk;
  nhb__chk_fold(&w->stats, set->n);
  if (set->n != 0 && w->run->config.protocol == NHB_PROTO_HTTP2) {
    uint64_t fails = 0, judged_own = 0;
    for (uint32_t i = 0; i < set->n; i++) {
      uint64_t judged = w->stats.check_pass[i] + w->stats.check_fail[i];
      if (set->c[i].entry == 0) assert(judged == responses);
      else judged_own += judged;
      fails += w->stats.check_fail[i];
    }
    assert(judged_own <= responses);
    assert(ctr[NHB_CTR_CHECK_FAILED] <= fails);
  }
  if (w->finishing) return; /* close_all dropped the counts; the slots stay put */
  uint64_t nactive = 0;
  for (uint32_t i = 0; i < w->nconns; i++) {
    const nhb__conn* c = &w->conns[i];
    assert(c->nrefused <= c->nactive);
    if (w->run->config.protocol == NHB_PROTO_HTTP1) assert(c->nactive <= 1);
    /* A closed connection keeps its refused requests only while the back-off
     * holds them (pool.c, conn_on_close): they go out when it ends. */
    if (c->state == NHB__CX_DISCONNECTED) assert(c->nactive == 0 || w->backoff_active);
    nactive += c->nactive;
  }
  assert(w->in_flight <= fuzz_nslots(w));
  assert(nactive == w->in_flight);
  uint64_t ended = fuzz_callbacks(w) - fuzz_callback_base;
  assert(ctr[NHB_CTR_SEQUENCER_RELEASED] == ended + w->in_flight + w->pending_len);
  /* Grouped runs: every request that ended is in exactly one group. */
  if (w->grp != NULL) assert(nhb__grp_requests(w) - fuzz_group_base == ended);
}

/* Runs the loop once (close callbacks, HTTP/2 writes) and brings up the
 * connections being opened, which send their requests. */
static void fuzz_settle(nhb__worker* w) {
  for (int round = 0; round < 4; round++) {
    uv_run(&w->loop, UV_RUN_NOWAIT);
    int connected = 0;
    for (uint32_t i = 0; i < w->nconns; i++) {
      nhb__conn* c = &w->conns[i];
      if (c->state == NHB__CX_CONNECTING) {
        c->transport->on_connected(c);
        connected = 1;
      }
    }
    if (!connected) break;
  }
}

static void fuzz_worker_start(nhb__worker* w, nhb_run* run) {
  nhb_stats stats = run->workers[0].stats;
  memset(w, 0, sizeof(*w));
  w->run = run;
  w->cpu = -1;
  w->release_fd = -1;
  w->stats = stats;
  w->grp = run->workers[0].grp;
  fuzz_group_base = w->grp != NULL ? nhb__grp_requests(w) : 0;
  /* The histograms that the pool records into and phases.c folds in. */
  w->ph_whole = run->workers[0].ph_whole;
  w->ph_ok = run->workers[0].ph_ok;
  w->ph_same = run->workers[0].ph_same;
  memset(w->stats.counters, 0, sizeof(w->stats.counters));
  memset(w->stats.check_pass, 0, sizeof(w->stats.check_pass));
  memset(w->stats.check_fail, 0, sizeof(w->stats.check_fail));
  w->stats.check_every = 0;
  fuzz_callback_base = fuzz_callbacks(w);
  fuzz_hold_writes = 0;
  if (uv_loop_init(&w->loop) != 0 || uv_async_init(&w->loop, &w->wakeup, fuzz_on_wakeup) != 0 ||
      uv_timer_init(&w->loop, &w->housekeeping) != 0)
    abort();
  w->wakeup.data = w;
  w->housekeeping.data = w;
  w->start_ns = nhb__now_ns();
  w->end_ns = UINT64_MAX;
  w->interval_ns = 0;
  if (nhb__pool_init(w) != 0) abort();
  for (uint32_t i = 0; i < w->nconns; i++) w->conns[i].transport = &fuzz_mem_transport;
  if (nhb__sequencer_init(w) != 0) abort();
  /* The phase's release count and end, as the worker thread sets them:
   * without it the count is 0 and the run stops before its first request. */
  nhb__sequencer_worker_start(w);
  nhb__sequencer_run(w);
  fuzz_settle(w);
  fuzz_check(w);
}

static void fuzz_worker_end(nhb__worker* w) {
  /* Stop with no drain (or end a drain that an operation started): every
   * request still out is cancelled. */
  if (!w->stopping) {
    nhb__sequencer_stop_now(w, 0);
  } else {
    w->drain_deadline_ns = 0;
    nhb__worker_maybe_finish(w);
  }
  assert(w->finishing);
  uv_run(&w->loop, UV_RUN_DEFAULT);
  const uint64_t* ctr = w->stats.counters;
  uint64_t ended = fuzz_callbacks(w) - fuzz_callback_base;
  assert(ctr[NHB_CTR_SEQUENCER_RELEASED] == ended + ctr[NHB_CTR_UPSTREAM_RQ_CANCELLED]);
  /* Every handle was closed. */
  int r = uv_loop_close(&w->loop);
  assert(r == 0);
  (void)r;
  nhb__pool_free(w);
}

static void fuzz_op(nhb__worker* w, const uint8_t** pp, const uint8_t* end) {
  const uint8_t* p = *pp;
  uint8_t b = *p++;
  int kind = b >> 5;
  nhb__conn* c = &w->conns[(b & 1) % w->nconns];
  int up = c->state == NHB__CX_READY && !w->finishing;
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
      /* A buffer of exactly n bytes, as the socket's read buffer would hold
       * them, so that reading past the end is caught. */
      char* buf = malloc(n);
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
      case 0:
        fuzz_hold_writes = 1;
        break;
      case 1:
        fuzz_hold_writes = 0;
        for (uint32_t i = 0; i < w->nconns; i++) {
          nhb__conn* d = &w->conns[i];
          if (!d->write_pending) continue;
          d->write_pending = 0;
          if (d->state == NHB__CX_READY && d->session->on_writable) d->session->on_writable(d);
        }
        break;
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

#endif /* NHB_FUZZ_CLIENT_H */
