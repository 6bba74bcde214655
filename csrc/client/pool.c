/* pool.c: a worker's connections and the requests they carry.
 *
 * Capacity comes from three places, tried in order: a connection that can
 * take another request (the most recently used first, as Nighthawk's default
 * "mru" reuse strategy, or the least recently used with "lru"), a
 * disconnected entry that can start a new connection carrying the request,
 * and the pending queue (bounded by --max-pending-requests). When all three
 * are exhausted the sequencer either blocks (closed loop) or drops the
 * release (open loop).
 *
 * Several targets (--multi-target-endpoint, a Unix socket is one target too):
 * every connection entry belongs to one target for the whole run, and a
 * request only goes to a connection of its own target, as Envoy keeps one
 * connection pool per host. The worker's --connections is the total over its
 * targets (Nighthawk's connection limit is a circuit breaker of the cluster,
 * which holds every endpoint); the entries are split evenly, since round
 * robin sends each target the same share of requests, and every target gets
 * at least one (Envoy likewise lets a host with no connection open one over
 * the limit, so that no host waits for ever). The pending queue is shared, in
 * release order: its head waits for a connection of its own target.
 *
 * An HTTP/1.1 connection carries one request at a time; an HTTP/2 connection
 * up to min(--max-concurrent-streams, the server's SETTINGS) streams, and a
 * worker at most --max-active-requests in all. That is Nighthawk's closed-loop
 * rule: a release is refused when in-flight >= max_pending + (h2 ?
 * max_active_requests : connections).
 *
 * Requests travel in slots (client.h) from a per-worker pool; connections
 * that can take a request sit on the `avail` stack. Nothing here allocates
 * after nhb__pool_init().
 */
#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "client/client.h"

static void conn_on_close(uv_handle_t* handle);
static void conn_start(nhb__worker* w, nhb__conn* c);
static void on_backoff_end(uv_timer_t* handle);
static void conn_send(nhb__conn* c, nhb__slot* s);
static void pool_pump(nhb__worker* w);

void nhb__worker_record_error(nhb__worker* w, int err) {
  if (w->first_error == 0 && err < 0) w->first_error = err;
}

void nhb__worker_record_error_text(nhb__worker* w, int err, const char* text) {
  if (w->first_error != 0 || err >= 0) return;
  w->first_error = err;
  snprintf(w->first_error_text, sizeof(w->first_error_text), "%s", text);
}

/* ---- the run's targets --------------------------------------------------- */

/* ---- endpoints: where connections go, and their statistics --------------- */

/* An endpoint's histogram is allocated zeroed and left untouched until a
 * response lands in it, so that endpoints that take none cost no resident
 * memory (an nhb_hist is 221 KB). */
static nhb_endpoint_stats* endpoint_stats_alloc(uint32_t n) {
  nhb_endpoint_stats* ep = calloc(n, sizeof(nhb_endpoint_stats));
  if (ep == NULL) return NULL;
  for (uint32_t i = 0; i < n; i++) {
    ep[i].latency = calloc(1, sizeof(nhb_hist));
    if (ep[i].latency == NULL) {
      for (uint32_t j = 0; j < i; j++) free(ep[j].latency);
      free(ep);
      return NULL;
    }
    ep[i].latency->min = UINT64_MAX;
  }
  return ep;
}

static void endpoint_stats_free(nhb_endpoint_stats* ep, uint32_t n) {
  if (ep == NULL) return;
  for (uint32_t i = 0; i < n; i++) free(ep[i].latency);
  free(ep);
}

/* The endpoints are the targets, or, with config.endpoints, the single
 * target's addresses; statistics per endpoint only when there are several. */
static int endpoints_init(nhb_run* run, char* err, size_t err_len) {
  const nhb_client_config* cfg = &run->config;
  run->endpoints = run->targets;
  run->nendpoints = run->ntargets;
  if (cfg->nendpoints > 1) {
    if (run->ntargets > 1) {
      if (err) snprintf(err, err_len, "endpoints: only with one target");
      return NHB_EINVAL;
    }
    if (cfg->endpoints == NULL || cfg->nendpoints > NHB_MAX_TARGETS) {
      if (err) snprintf(err, err_len, "endpoints: 2 to %d addresses", NHB_MAX_TARGETS);
      return NHB_EINVAL;
    }
    run->endpoint_copies = calloc(cfg->nendpoints, sizeof(nhb_sockaddr));
    if (run->endpoint_copies == NULL) return NHB_ENOMEM;
    memcpy(run->endpoint_copies, cfg->endpoints, cfg->nendpoints * sizeof(nhb_sockaddr));
    for (uint32_t i = 0; i < cfg->nendpoints; i++) {
      const nhb_sockaddr* a = &run->endpoint_copies[i];
      sa_family_t family = a->len >= sizeof(sa_family_t) ? ((const struct sockaddr*)a->bytes)->sa_family : AF_UNSPEC;
      if (!((family == AF_INET && a->len == sizeof(struct sockaddr_in)) ||
            (family == AF_INET6 && a->len == sizeof(struct sockaddr_in6)))) {
        if (err) snprintf(err, err_len, "endpoints: entry %u is not an IPv4 or IPv6 address", i);
        return NHB_EINVAL;
      }
    }
    /* A Unix socket target has no addresses to spread over. */
    if (((const struct sockaddr*)run->targets[0].bytes)->sa_family == AF_UNIX) {
      if (err) snprintf(err, err_len, "endpoints: not with a Unix socket target");
      return NHB_EINVAL;
    }
    run->endpoints = run->endpoint_copies;
    run->nendpoints = cfg->nendpoints;
  }
  run->config.endpoints = run->endpoints;
  run->config.nendpoints = run->nendpoints;
  if (run->nendpoints > 1) {
    run->ep_global = endpoint_stats_alloc(run->nendpoints);
    if (run->ep_global == NULL) return NHB_ENOMEM;
    for (int i = 0; i < run->nworkers; i++) {
      nhb__worker* w = &run->workers[i];
      w->ep = endpoint_stats_alloc(run->nendpoints);
      if (w->ep == NULL) return NHB_ENOMEM;
      w->ep_published = calloc((size_t)run->nendpoints * 3, sizeof(_Atomic uint64_t));
      if (w->ep_published == NULL) return NHB_ENOMEM;
      w->ep_rng = 0x9E3779B97F4A7C15ULL * (uint64_t)(i + 1) ^ nhb__now_ns();
    }
  }
  return 0;
}

/* The address a new connection goes to. Several targets: its target's.
 * Several addresses for one target: the next one run-wide (Fortio's cached
 * round robin: each new connection takes the next address) or a random one. */
static uint32_t endpoint_pick(nhb__worker* w, const nhb__conn* c) {
  const nhb_run* run = w->run;
  if (run->nendpoints == run->ntargets) return c->target;
  if (run->config.endpoint_random) {
    return (uint32_t)((nhb__splitmix64(&w->ep_rng) >> 11) % run->nendpoints);
  }
  return atomic_fetch_add_explicit(&w->run->ep_next, 1, memory_order_relaxed) % run->nendpoints;
}

void nhb__pool_endpoints_end_warmup(nhb__worker* w) {
  if (w->ep == NULL) return;
  for (uint32_t i = 0; i < w->run->nendpoints; i++) {
    w->ep[i].requests = w->ep[i].errors = 0;
    if (w->ep[i].latency->total != 0) nhb_hist_init(w->ep[i].latency);
  }
}

void nhb__pool_endpoints_merge(nhb_run* run) {
  if (run->ep_global == NULL) return;
  for (int i = 0; i < run->nworkers; i++) {
    const nhb_endpoint_stats* ep = run->workers[i].ep;
    for (uint32_t e = 0; e < run->nendpoints; e++) {
      nhb_endpoint_stats* g = &run->ep_global[e];
      g->connections += ep[e].connections;
      g->requests += ep[e].requests;
      g->errors += ep[e].errors;
      if (ep[e].latency->total != 0) nhb_hist_add(g->latency, ep[e].latency);
    }
  }
}

const nhb_endpoint_stats* nhb_run_endpoint_stats(const nhb_run* run, uint32_t* count) {
  *count = run->finished && run->ep_global != NULL ? run->nendpoints : 0;
  return *count ? run->ep_global : NULL;
}

void nhb__pool_endpoints_publish(nhb__worker* w) {
  if (w->ep_published == NULL) return;
  for (uint32_t i = 0; i < w->run->nendpoints; i++) {
    atomic_store_explicit(&w->ep_published[3 * i], w->ep[i].connections, memory_order_relaxed);
    atomic_store_explicit(&w->ep_published[3 * i + 1], w->ep[i].requests, memory_order_relaxed);
    atomic_store_explicit(&w->ep_published[3 * i + 2], w->ep[i].errors, memory_order_relaxed);
  }
}

uint32_t nhb_run_endpoint_progress(const nhb_run* run, uint64_t* out, uint32_t max) {
  if (run->ep_global == NULL) return 0;
  if (out == NULL) return run->nendpoints;
  uint32_t n = run->nendpoints < max ? run->nendpoints : max;
  memset(out, 0, (size_t)n * 3 * sizeof(uint64_t));
  for (int w = 0; w < run->nworkers; w++) {
    _Atomic uint64_t* p = run->workers[w].ep_published;
    if (p == NULL) continue;
    for (uint32_t i = 0; i < 3 * n; i++) out[i] += atomic_load_explicit(&p[i], memory_order_relaxed);
  }
  return n;
}

int nhb__pool_run_init(nhb_run* run, char* err, size_t err_len) {
  const nhb_client_config* cfg = &run->config;
  uint32_t n = cfg->ntargets ? cfg->ntargets : 1;
  /* Every target has at least one connection per worker; the bound keeps a
   * typo from allocating for ever and is far above any real endpoint list. */
  if (cfg->ntargets > NHB_MAX_TARGETS) {
    if (err) snprintf(err, err_len, "targets: at most %d", NHB_MAX_TARGETS);
    return NHB_EINVAL;
  }
  if (cfg->ntargets > 0 && cfg->targets == NULL) {
    if (err) snprintf(err, err_len, "targets: %u entries but no array", cfg->ntargets);
    return NHB_EINVAL;
  }
  run->targets = calloc(n, sizeof(nhb_sockaddr));
  if (run->targets == NULL) return NHB_ENOMEM;
  run->ntargets = n;
  if (cfg->ntargets == 0) {
    memcpy(run->targets[0].bytes, cfg->addr, cfg->addr_len);
    run->targets[0].len = cfg->addr_len;
  } else {
    memcpy(run->targets, cfg->targets, n * sizeof(nhb_sockaddr));
  }
  for (uint32_t i = 0; i < n; i++) {
    /* conn_start() connects by the family; the length is copied out of a
     * fixed buffer. An abstract Unix name would need uv_pipe_connect2(). */
    const nhb_sockaddr* a = &run->targets[i];
    sa_family_t family = a->len >= sizeof(sa_family_t) ? ((const struct sockaddr*)a->bytes)->sa_family : AF_UNSPEC;
    int ok = (family == AF_INET && a->len == sizeof(struct sockaddr_in)) ||
             (family == AF_INET6 && a->len == sizeof(struct sockaddr_in6)) ||
             (family == AF_UNIX && a->len > offsetof(struct sockaddr_un, sun_path) + 1 && a->len <= sizeof(struct sockaddr_un) &&
              ((const struct sockaddr_un*)a->bytes)->sun_path[0] != '\0' && a->bytes[a->len - 1] == '\0');
    if (!ok) {
      if (err) snprintf(err, err_len, "targets: entry %u is not an IPv4, IPv6 or Unix socket (path) address", i);
      return NHB_EINVAL;
    }
  }
  run->config.targets = run->targets;
  run->config.ntargets = n;
  int r = endpoints_init(run, err, err_len);
  if (r < 0) return r;
  if (cfg->nsources > NHB_MAX_SOURCES || (cfg->nsources > 0 && cfg->sources == NULL)) {
    if (err) snprintf(err, err_len, "sources: at most %d, in an array", NHB_MAX_SOURCES);
    return NHB_EINVAL;
  }
  if (cfg->nsources > 0) {
    run->sources = calloc(cfg->nsources, sizeof(nhb_sockaddr));
    if (run->sources == NULL) return NHB_ENOMEM;
    memcpy(run->sources, cfg->sources, cfg->nsources * sizeof(nhb_sockaddr));
    run->config.sources = run->sources;
  }
  for (uint32_t i = 0; i < cfg->nsources; i++) {
    const nhb_sockaddr* src = &run->sources[i];
    sa_family_t family = src->len >= sizeof(sa_family_t) ? ((const struct sockaddr*)src->bytes)->sa_family : AF_UNSPEC;
    if (!((family == AF_INET && src->len == sizeof(struct sockaddr_in)) ||
          (family == AF_INET6 && src->len == sizeof(struct sockaddr_in6)))) {
      if (err) snprintf(err, err_len, "sources: entry %u is not an IPv4 or IPv6 socket address", i);
      return NHB_EINVAL;
    }
  }
  /* Each request-set entry's target, looked up by the pool for every request
   * of a run with several targets (never with one). */
  if (n > 1) {
    uint32_t ns = cfg->nspecs ? cfg->nspecs : 1;
    run->spec_target = calloc(ns, sizeof(uint32_t));
    if (run->spec_target == NULL) return NHB_ENOMEM;
    for (uint32_t i = 0; i < cfg->nspecs; i++) {
      uint32_t t = cfg->specs[i].target;
      if (t >= n) {
        if (err) snprintf(err, err_len, "specs: entry %u names target %u of %u", i, t, n);
        return NHB_EINVAL;
      }
      run->spec_target[i] = t;
    }
  } else {
    for (uint32_t i = 0; i < cfg->nspecs; i++) {
      if (cfg->specs[i].target != 0) {
        if (err) snprintf(err, err_len, "specs: entry %u names target %u of 1", i, cfg->specs[i].target);
        return NHB_EINVAL;
      }
    }
  }
  return 0;
}

void nhb__pool_run_free(nhb_run* run) {
  endpoint_stats_free(run->ep_global, run->nendpoints);
  for (int i = 0; run->workers != NULL && i < run->nworkers; i++) {
    endpoint_stats_free(run->workers[i].ep, run->nendpoints);
    run->workers[i].ep = NULL;
    free((void*)run->workers[i].ep_published);
    run->workers[i].ep_published = NULL;
  }
  run->ep_global = NULL;
  free(run->endpoint_copies);
  run->endpoint_copies = NULL;
  free(run->targets);
  free(run->spec_target);
  free(run->sources);
  run->targets = NULL;
  run->spec_target = NULL;
  run->sources = NULL;
}

/* The target a request goes to: one predictable branch with one target. */
static inline uint32_t rq_target(const nhb__worker* w, const nhb__request* rq) {
  return NHB__UNLIKELY(w->ntargets > 1) ? w->run->spec_target[rq->spec] : 0;
}

int nhb__pool_init(nhb__worker* w) {
  const nhb_client_config* cfg = &w->run->config;
  const nhb__protocol* proto = nhb__protocols[cfg->protocol];
  w->protocol = proto;
  w->cx_counter = proto->cx_counter;
  w->response_extras = w->stage_responses != NULL || w->ep != NULL || w->grp != NULL;
  /* The entries are split evenly over the targets, at least one each (see
   * the top of this file). */
  uint32_t nt = w->run->ntargets;
  uint32_t share = cfg->connections / nt, extra = cfg->connections % nt;
  uint64_t total = 0;
  for (uint32_t t = 0; t < nt; t++) total += share + (t < extra) + (share == 0 && t >= extra);
  w->nconns = (uint32_t)total;
  w->ntargets = nt;
  w->lru = cfg->reuse_lru && proto->reuse_lru;
  /* HTTP/1.1 carries one request per connection, so one slot per connection
   * suffices; a multiplexing protocol (HTTP/2, HTTP/3) never has more than
   * --max-active-requests in flight. */
  const int streams = proto->multiplexes;
  uint32_t nslots = streams ? cfg->max_active_requests : w->nconns;
  w->max_in_flight = streams ? cfg->max_active_requests : UINT32_MAX;
  w->conn_capacity = 1;
  if (streams) {
    uint32_t mcs = cfg->max_concurrent_streams ? cfg->max_concurrent_streams : UINT32_MAX;
    w->conn_capacity = mcs < cfg->max_active_requests ? mcs : cfg->max_active_requests;
  }
  w->conns = calloc(w->nconns, sizeof(nhb__conn));
  nhb__conn** avail = calloc(w->nconns, sizeof(nhb__conn*));
  nhb__conn** free_conns = calloc(w->nconns, sizeof(nhb__conn*));
  w->tp = calloc(nt, sizeof(nhb__target_pool));
  w->slot_pool = calloc(nslots, sizeof(nhb__slot));
  w->pending_cap = cfg->max_pending_requests;
  w->pending = calloc(w->pending_cap ? w->pending_cap : 1, sizeof(nhb__request));
  /* One read buffer serves every connection of the worker: libuv reads one
   * socket at a time, and every session and transport is done with the
   * bytes of a read when its callback returns (nghttp2 and ngtcp2 copy what
   * they keep; h1 keeps no pointer into them across reads). A buffer per
   * connection cost a resident page per connection that ever read (issue
   * 16: 5.2 KB per used idle connection instead of 1.1 KB) and spread the
   * reads of a busy worker over as many pages. */
  char* buffers = malloc(NHB__READ_BUFFER_SIZE);
  if (w->tp != NULL) {
    /* Even before the check: nhb__pool_free() frees the arrays through tp[0]. */
    w->tp[0].avail = avail;
    w->tp[0].free_conns = free_conns;
  } else {
    free(avail);
    free(free_conns);
  }
  if (!w->conns || !avail || !free_conns || !w->tp || !w->slot_pool || !w->pending || !buffers) {
    free(buffers);
    /* The failure path (nhb__pool_close_all, the HTTP/3 close) walks the
     * connections: without the array there are none. */
    if (!w->conns) w->nconns = 0;
    return NHB_ENOMEM;
  }
  for (uint32_t i = nslots; i-- > 0;) {
    w->slot_pool[i].next = w->free_slot_list;
    w->free_slot_list = &w->slot_pool[i];
  }
  /* Target t owns the entries [base, base + size): its slices of the arrays. */
  uint32_t base = 0;
  for (uint32_t t = 0; t < nt; t++) {
    nhb__target_pool* tp = &w->tp[t];
    tp->size = share + (t < extra) + (share == 0 && t >= extra);
    tp->avail = avail + base;
    tp->free_conns = free_conns + base;
    tp->nfree = tp->size;
    /* Entries are stacked in reverse so that the target's first is used first. */
    for (uint32_t i = 0; i < tp->size; i++) {
      w->conns[base + i].target = t;
      tp->free_conns[tp->size - 1 - i] = &w->conns[base + i];
    }
    base += tp->size;
  }
  /* The protocol picks the session and its transport, once per connection
   * entry: the per-request path calls what the entry holds. */
  const nhb__transport_vtable* transport = proto->transport;
  if (transport == NULL) transport = cfg->tls.enabled ? &nhb__transport_tls : &nhb__transport_tcp;
  const nhb__session_vtable* session = w->trace != NULL ? proto->traced_session : proto->session;
  for (uint32_t i = 0; i < w->nconns; i++) {
    nhb__conn* c = &w->conns[i];
    c->worker = w;
    c->transport = transport;
    c->session = session;
    c->state = NHB__CX_DISCONNECTED;
    c->avail_pos = -1;
    c->read_buffer = buffers;
  }
  int r = uv_timer_init(&w->loop, &w->backoff_timer);
  if (r < 0) return r;
  w->backoff_timer.data = w;
  w->backoff_timer_init = 1;
  return proto->worker_init != NULL ? proto->worker_init(w) : 0;
}

void nhb__pool_free(nhb__worker* w) {
  /* NULL when nhb__pool_init never ran. */
  const nhb__protocol* proto = w->protocol;
  if (w->conns) {
    for (uint32_t i = 0; i < w->nconns; i++) {
      nhb__tls_conn_free(&w->conns[i]);
      nhb__carrier_conn_free(&w->conns[i]);
      if (proto->conn_free != NULL) proto->conn_free(&w->conns[i]);
      free(w->conns[i].trace_buf);
    }
    free(w->conns[0].read_buffer); /* the worker's one buffer */
  }
  nhb__tls_worker_free(w);
  nhb__carrier_worker_free(w);
  if (proto != NULL && proto->worker_free != NULL) proto->worker_free(w);
  nhb__chk_slots_free(w);
  free(w->conns);
  if (w->tp) {
    free(w->tp[0].avail);
    free(w->tp[0].free_conns);
  }
  free(w->tp);
  free(w->slot_pool);
  free(w->pending);
  w->conns = NULL;
  w->tp = NULL;
  w->slot_pool = w->free_slot_list = NULL;
  w->pending = NULL;
}

/* ---- slots --------------------------------------------------------------- */

static inline nhb__slot* slot_get(nhb__worker* w, const nhb__request* rq) {
  nhb__slot* s = w->free_slot_list;
  w->free_slot_list = s->next;
  /* The sessions reset the response sizes and the stream when they send. */
  s->rq = *rq;
  s->stream_id = 0;
  s->sent = 0;
  s->refused = 0;
  w->in_flight++;
  return s;
}

static void avail_remove(nhb__worker* w, nhb__conn* c);

/* Gives a request to a connection. --max-requests-per-connection counts the
 * requests given, not those sent, so that an HTTP/2 connection that is still
 * connecting does not collect more than its share. */
static void slot_attach(nhb__conn* c, nhb__slot* s) {
  s->conn = c;
  s->prev = NULL;
  s->next = c->slots;
  if (c->slots) c->slots->prev = s;
  c->slots = s;
  c->nactive++;
  uint64_t max_rq = c->worker->run->config.max_requests_per_connection;
  if (++c->requests_on_connection == max_rq) {
    c->draining = 1;
    if (c->avail_pos >= 0) avail_remove(c->worker, c);
  }
}

/* Detaches a slot from its connection and returns it to the pool: the request
 * is over. */
static void slot_release(nhb__worker* w, nhb__conn* c, nhb__slot* s) {
  if (s->prev) s->prev->next = s->next;
  else c->slots = s->next;
  if (s->next) s->next->prev = s->prev;
  c->nactive--;
  if (s->refused) c->nrefused--;
  s->conn = NULL;
  s->next = w->free_slot_list;
  w->free_slot_list = s;
  w->in_flight--;
}

/* Ends a request as a failure: it counts against its reason and in the
 * initiation-to-completion statistic, and never silently disappears. */
static void slot_fail(nhb__worker* w, nhb__conn* c, nhb__slot* s, nhb_counter_t reason, uint64_t now) {
  w->stats.counters[reason]++;
  if (NHB__UNLIKELY(w->ep != NULL)) {
    w->ep[c->endpoint].requests++;
    w->ep[c->endpoint].errors++;
  }
  if (NHB__UNLIKELY(w->grp != NULL)) nhb__grp_failed(w, s, reason);
  nhb_hist_record(w->stats.hists[NHB_HIST_SEQUENCER_CALLBACK], now - s->rq.release_ns);
  if (NHB__UNLIKELY(s->span_id != 0)) nhb__trace_end(w, s, 0, reason, now);
  slot_release(w, c, s);
}

/* ---- the stack of connections that can take a request ------------------- */

/* The ring position of the i-th connection from the least recently used. */
static inline uint32_t avail_at(const nhb__target_pool* tp, uint32_t i) {
  uint32_t k = tp->avail_head + i;
  return k >= tp->size ? k - tp->size : k;
}

static void avail_remove(nhb__worker* w, nhb__conn* c) {
  /* Rare (a connection that closes or drains while it could take requests),
   * so the order of the others is kept at the price of a short move. */
  nhb__target_pool* tp = &w->tp[c->target];
  uint32_t i = (uint32_t)c->avail_pos + tp->size - tp->avail_head;
  if (i >= tp->size) i -= tp->size;
  for (uint32_t j = i + 1; j < tp->navail; j++) {
    uint32_t to = avail_at(tp, j - 1);
    tp->avail[to] = tp->avail[avail_at(tp, j)];
    tp->avail[to]->avail_pos = (int32_t)to;
  }
  tp->navail--;
  c->avail_pos = -1;
}

static inline void avail_sync(nhb__worker* w, nhb__conn* c) {
  int can_take = (c->state == NHB__CX_READY || c->state == NHB__CX_CONNECTING) && !c->draining &&
                 c->keep_alive && c->nactive < c->capacity;
  if (can_take && c->avail_pos < 0) {
    nhb__target_pool* tp = &w->tp[c->target];
    /* mru never moves avail_head from 0: the ring is the stack of before. */
    uint32_t k = NHB__UNLIKELY(w->lru) ? avail_at(tp, tp->navail) : tp->navail;
    tp->navail++;
    c->avail_pos = (int32_t)k;
    tp->avail[k] = c;
  } else if (!can_take && c->avail_pos >= 0) {
    avail_remove(w, c);
  }
}

/* The connection a request takes: the most recently used, or with lru the
 * least recently used. The caller checked that there is one. */
static inline nhb__conn* avail_pick(const nhb__worker* w, const nhb__target_pool* tp) {
  return tp->avail[NHB__UNLIKELY(w->lru) ? tp->avail_head : tp->navail - 1];
}

/* Takes the connection avail_pick() returned out of the ring: it is full. */
static inline void avail_take(nhb__worker* w, nhb__target_pool* tp, nhb__conn* c) {
  if (NHB__UNLIKELY(w->lru)) {
    tp->avail_head = avail_at(tp, 1);
  }
  tp->navail--;
  c->avail_pos = -1;
}

/* ---- pending queue (a ring buffer of released requests) ---------------- */

static int pending_push(nhb__worker* w, const nhb__request* rq) {
  if (w->pending_len >= w->pending_cap) return 0;
  uint32_t tail = (w->pending_head + w->pending_len) % w->pending_cap;
  w->pending[tail] = *rq;
  w->pending_len++;
  w->stats.counters[NHB_CTR_UPSTREAM_RQ_PENDING_TOTAL]++;
  return 1;
}

/* The target the request at the head of the queue waits for. */
static inline uint32_t pending_head_target(const nhb__worker* w) {
  return rq_target(w, &w->pending[w->pending_head]);
}

static int pending_pop(nhb__worker* w, nhb__request* out) {
  if (w->pending_len == 0) return 0;
  *out = w->pending[w->pending_head];
  w->pending_head = (w->pending_head + 1) % w->pending_cap;
  w->pending_len--;
  return 1;
}

/* ---- back-off on failing connections ------------------------------------ */

/* A port that refuses connections, or a server that answers every connection
 * with GOAWAY, fails a new connection within microseconds; without a pause
 * the worker would open tens of thousands a second (and re-send refused
 * requests as often). After such a failure no new connection starts for a
 * while, doubling with each consecutive failure up to NHB__BACKOFF_MAX_MS,
 * until a response arrives. Connections that were already on their way when
 * the back-off began may fail during it: they do not lengthen it, so a pool
 * of many connections backs off as one. Costs nothing per request: one flag
 * in nhb__pool_has_connection() and one in nhb__conn_response(). */
static void backoff_step(nhb__worker* w) {
  if (w->backoff_active || w->finishing || !w->backoff_timer_init) return;
  uint32_t n = w->backoff_failures < 16 ? w->backoff_failures : 16;
  uint64_t ms = (uint64_t)NHB__BACKOFF_BASE_MS << n;
  if (ms > NHB__BACKOFF_MAX_MS) ms = NHB__BACKOFF_MAX_MS;
  w->backoff_failures++;
  w->backoff_active = 1;
  uv_update_time(&w->loop);
  uv_timer_start(&w->backoff_timer, on_backoff_end, ms, 0);
}

/* The back-off is over: entries holding refused requests reconnect, queued
 * requests go out, and a blocked sequencer goes on. */
static void on_backoff_end(uv_timer_t* handle) {
  nhb__worker* w = (nhb__worker*)handle->data;
  w->backoff_active = 0;
  if (w->finishing) return;
  for (uint32_t i = 0; i < w->nconns; i++) {
    nhb__conn* c = &w->conns[i];
    if (c->state == NHB__CX_DISCONNECTED && c->nactive > 0) conn_start(w, c);
  }
  pool_pump(w);
  nhb__sequencer_run(w);
  nhb__worker_maybe_finish(w);
}

/* ---- connection life cycle ---------------------------------------------- */

static void conn_alloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf) {
  NHB__UNUSED(suggested);
  nhb__conn* c = (nhb__conn*)handle->data;
  buf->base = c->read_buffer;
  buf->len = NHB__READ_BUFFER_SIZE;
}

static void conn_close(nhb__conn* c) {
  if (c->state == NHB__CX_DISCONNECTED || c->state == NHB__CX_CLOSING) return;
  if (c->avail_pos >= 0) avail_remove(c->worker, c);
  const nhb__protocol* proto = c->worker->protocol;
  if (NHB__UNLIKELY(proto->conn_closing != NULL)) proto->conn_closing(c);
  c->state = NHB__CX_CLOSING;
  if (NHB__UNLIKELY(c->dns_pending)) {
    /* Still resolving, no handle yet: the resolution's callback (dns.c),
     * called even when cancelled, finishes the close. */
    uv_cancel((uv_req_t*)&c->dns_req);
    return;
  }
  /* A UDP handle is no stream (uv_close stops its receiving). */
  if (NHB__LIKELY(c->transport->start == NULL)) uv_read_stop((uv_stream_t*)&c->tcp);
  /* The HTTP/3 proxy leg tells the proxy while its socket is open. */
  else if (NHB__UNLIKELY(c->transport == &nhb__transport_carried_h3)) nhb__carrier_h3_closing(c);
  uv_close((uv_handle_t*)&c->tcp, conn_on_close);
}

void nhb__conn_fail(nhb__conn* c, int err, nhb_counter_t reason) {
  nhb__worker* w = c->worker;
  uint64_t* ctr = w->stats.counters;
  /* A tunnel that failed on its way up counts its cause (once), and its text
   * comes first. */
  if (NHB__UNLIKELY(c->tunnel != 0) && c->state == NHB__CX_CONNECTING) nhb__tunnel_conn_failed(c, err);
  nhb__worker_record_error(w, err);
  if (c->state == NHB__CX_CONNECTING) {
    ctr[err == UV_ETIMEDOUT ? NHB_CTR_UPSTREAM_CX_CONNECT_TIMEOUT : NHB_CTR_UPSTREAM_CX_CONNECT_FAIL]++;
    if (NHB__UNLIKELY(c->dns_pending) && err == UV_ETIMEDOUT) ctr[NHB_CTR_DNS_TIMEOUT]++;
    backoff_step(w);
  }
  /* Every request the connection carries fails once, refused ones included. */
  uint64_t now = nhb__now_ns();
  while (c->slots != NULL) slot_fail(w, c, c->slots, reason, now);
  conn_close(c);
  nhb__worker_maybe_finish(w);
}

/* The connection may have room again, or may have to go: close it when it is
 * done, else give it queued requests and let the sequencer use the rest. */
void nhb__conn_update(nhb__conn* c) {
  nhb__worker* w = c->worker;
  if (c->state != NHB__CX_READY) return;
  if (NHB__UNLIKELY(c->draining | !c->keep_alive | w->finishing) && c->nactive == c->nrefused) {
    /* Closing re-sends refused requests on a new connection (conn_on_close). */
    conn_close(c);
    return;
  }
  nhb__request rq;
  while (w->pending_len > 0 && !c->draining && c->keep_alive && c->nactive < c->capacity &&
         w->in_flight < w->max_in_flight && pending_head_target(w) == c->target && pending_pop(w, &rq)) {
    nhb__slot* s = slot_get(w, &rq);
    slot_attach(c, s);
    conn_send(c, s);
    if (c->state != NHB__CX_READY) return;
  }
  avail_sync(w, c);
  /* A request that ended frees room beyond this connection too (HTTP/2's
   * --max-active-requests): queued requests and a blocked or max-rate
   * sequencer may go on elsewhere. */
  if (NHB__UNLIKELY(w->pending_len > 0)) pool_pump(w);
  if (nhb__pool_has_connection(w)) nhb__sequencer_run(w);
}

/* The byte stream ended: `err` is UV_EOF for a clean end, else the error. A
 * close-delimited HTTP/1.1 response ends here; requests still waiting for
 * their response fail as resets; refused HTTP/2 requests go out again on the
 * next connection (a server may reset the connection right after its GOAWAY). */
static void conn_lost(nhb__conn* c, int err) {
  nhb__worker* w = c->worker;
  if (c->state == NHB__CX_CONNECTING) {
    /* Only a tunnel and TLS read before the connection is ready: the proxy
     * went away before its answer, or the handshake broke. */
    if (NHB__UNLIKELY(c->tunnel != 0)) {
      nhb__tunnel_conn_lost(c, err);
      err = NHB_EPROXY;
    } else if (c->transport == &nhb__transport_tls ||
               (c->carrier != NULL && nhb__tunnel_inner(c) == &nhb__transport_tls)) {
      w->stats.counters[NHB_CTR_SSL_CONNECTION_ERROR]++;
    }
    if (err == UV_EOF) {
      nhb__worker_record_error_text(w, NHB_ETLS, "TLS handshake failed: the server closed the connection");
      err = NHB_ETLS;
    }
    nhb__conn_fail(c, err, NHB_CTR_POOL_CONNECTION_FAILURE);
    return;
  }
  if (c->state != NHB__CX_READY) return;
  c->peer_gone = 1;
  if (c->nactive > c->nrefused) {
    int r = c->session->on_eof(c, err);
    if (c->state != NHB__CX_READY) return;
    if (r < 0 || c->nactive > c->nrefused) {
      nhb__worker_record_error(w, err == UV_EOF ? UV_ECONNRESET : err);
      uint64_t now = nhb__now_ns();
      for (nhb__slot* s = c->slots; s != NULL;) {
        nhb__slot* next = s->next;
        if (!s->refused) slot_fail(w, c, s, NHB_CTR_STREAM_RESETS, now);
        s = next;
      }
    }
  }
  conn_close(c);
  nhb__worker_maybe_finish(w);
}

void nhb__conn_eof(nhb__conn* c) { conn_lost(c, UV_EOF); }

void nhb__conn_read(nhb__conn* c, ssize_t nread, const char* data) {
  nhb__worker* w = c->worker;
  if (nread > 0) {
    w->stats.counters[NHB_CTR_UPSTREAM_CX_RX_BYTES_TOTAL] += (uint64_t)nread;
    int r = c->transport->on_read(c, data, (size_t)nread);
    if (r < 0 && (c->state == NHB__CX_READY || c->state == NHB__CX_CONNECTING)) {
      w->stats.counters[NHB_CTR_UPSTREAM_CX_PROTOCOL_ERROR]++;
      nhb__conn_fail(c, r, c->state == NHB__CX_CONNECTING ? NHB_CTR_POOL_CONNECTION_FAILURE
                                                          : NHB_CTR_STREAM_RESETS);
    }
    return;
  }
  if (nread == 0) return;
  w->stats.counters[NHB_CTR_UPSTREAM_CX_DESTROY_REMOTE]++;
  conn_lost(c, (int)nread);
}

static void conn_on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
  nhb__conn_read((nhb__conn*)stream->data, nread, buf->base);
}

static void conn_on_connect(uv_connect_t* req, int status) {
  nhb__conn* c = (nhb__conn*)req->handle->data;
  if (status == UV_ECANCELED || c->state != NHB__CX_CONNECTING) return;
  if (status < 0) {
    nhb__conn_fail(c, status, NHB_CTR_POOL_CONNECTION_FAILURE);
    return;
  }
  int r = uv_read_start((uv_stream_t*)&c->tcp, conn_alloc, conn_on_read);
  if (r < 0) {
    nhb__conn_fail(c, r, NHB_CTR_POOL_CONNECTION_FAILURE);
    return;
  }
  /* The connect phase: once per new stream connection (to the proxy, when
   * there is one), from the connect call to the kernel's answer. */
  nhb_hist_record(c->worker->stats.hists[NHB_HIST_CONNECT], nhb__now_ns() - c->connect_start_ns);
  c->transport->on_connected(c);
}

/* Starts a connection in a disconnected entry; the slots attached to it (if
 * any) ride along and are sent as soon as the connection is ready. */
static void conn_start(nhb__worker* w, nhb__conn* c) {
  const nhb_client_config* cfg = &w->run->config;
  uint64_t* ctr = w->stats.counters;
  c->state = NHB__CX_CONNECTING;
  /* The requests riding along count against its request limit. */
  c->requests_on_connection = c->nactive;
  uint64_t max_rq = cfg->max_requests_per_connection;
  c->write_pending = 0;
  c->keep_alive = 1;
  c->draining = max_rq != 0 && c->requests_on_connection >= max_rq;
  c->capacity = w->conn_capacity;
  c->answered = 0;
  c->peer_gone = 0;
  c->connect_start_ns = nhb__now_ns();
  /* Through a proxy's tunnel, the connection speaks CONNECT first (tunnel.c),
   * which then hands it to the protocol's transport; over TLS to the proxy or
   * HTTP/2 the carrier runs that transport above the proxy leg (carrier.c). */
  if (NHB__UNLIKELY(w->run->tunnel.n != 0)) {
    c->transport = w->run->tunnel.h3        ? &nhb__transport_carried_h3
                   : w->run->tunnel.carried ? &nhb__transport_carried
                                            : &nhb__transport_tunnel;
    c->tunnel = NHB__TUNNEL_TCP;
  }
  ctr[NHB_CTR_UPSTREAM_CX_TOTAL]++;
  /* The protocol's own connection counter, if it has one (pool init). */
  if (NHB__LIKELY(w->cx_counter >= 0)) ctr[w->cx_counter]++;
  uint32_t ep = c->target;
  if (NHB__UNLIKELY(w->ep != NULL)) {
    ep = endpoint_pick(w, c);
    w->ep[ep].connections++;
  }
  c->endpoint = ep;
  /* DNS per connection: the connection opens once its name has resolved
   * (dns.c); meanwhile it takes requests as a connecting one does. */
  if (NHB__UNLIKELY(w->run->dns_host != NULL)) {
    int r = nhb__dns_start(w, c);
    if (r < 0) {
      nhb__conn_fail_unopened(w, c, r);
      return;
    }
    avail_sync(w, c);
    return;
  }
  nhb__conn_open(w, c, &w->run->endpoints[ep]);
}

void nhb__conn_fail_unopened(nhb__worker* w, nhb__conn* c, int err) {
  nhb__worker_record_error(w, err);
  w->stats.counters[NHB_CTR_UPSTREAM_CX_CONNECT_FAIL]++;
  backoff_step(w);
  if (c->avail_pos >= 0) avail_remove(w, c);
  uint64_t now = nhb__now_ns();
  while (c->slots != NULL) slot_fail(w, c, c->slots, NHB_CTR_POOL_CONNECTION_FAILURE, now);
  c->state = NHB__CX_DISCONNECTED;
  nhb__target_pool* tp = &w->tp[c->target];
  tp->free_conns[tp->nfree++] = c;
}

const nhb_sockaddr* nhb__conn_source(const nhb__conn* c) {
  const nhb__worker* w = c->worker;
  const nhb_client_config* cfg = &w->run->config;
  if (NHB__LIKELY(cfg->nsources == 0)) return NULL;
  /* Round-robin by the connection's place in the run, so that a connection
   * that reconnects keeps its address and the spread stays even. */
  uint64_t k = (uint64_t)w->index * w->nconns + (uint64_t)(c - w->conns);
  return &cfg->sources[k % cfg->nsources];
}

/* Binds a TCP handle made for the source address's family (uv_tcp_init_ex)
 * to that address. IP_BIND_ADDRESS_NO_PORT leaves the choice of port to
 * connect(), which picks one free for the whole 4-tuple. Without it, bind()
 * takes a port no other connection from that address may use, to any
 * destination, so one address would hold at most its ephemeral range. */
static int tcp_bind_source(nhb__conn* c, const nhb_sockaddr* src) {
  uv_os_fd_t fd;
  int one = 1;
  int r = uv_fileno((const uv_handle_t*)&c->tcp, &fd);
  /* SOL_IP on an IPv6 socket too: Linux hands it to the IPv4 options. */
  if (r == 0 && setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one)) != 0) r = uv_translate_sys_error(errno);
  if (r == 0) r = uv_tcp_bind(&c->tcp, (const struct sockaddr*)src->bytes, 0);
  return r;
}

/* Opens the handle of a connection that conn_start began and connects it to
 * `to`: one of the run's addresses, or the one its name resolved to. */
void nhb__conn_open(nhb__worker* w, nhb__conn* c, const nhb_sockaddr* to) {
  const int unix_socket = ((const struct sockaddr*)to->bytes)->sa_family == AF_UNIX;
  /* A datagram transport (udp:// echo, HTTP/3) has a UDP handle,
   * which its `start` connects. */
  const int datagram = c->transport->start != NULL;
  const nhb_sockaddr* src = NHB__UNLIKELY(datagram || unix_socket) ? NULL : nhb__conn_source(c);
  int r = NHB__UNLIKELY(datagram)      ? uv_udp_init(&w->loop, &c->udp)
          : NHB__UNLIKELY(unix_socket) ? uv_pipe_init(&w->loop, &c->pipe, 0)
          : NHB__UNLIKELY(src != NULL)
              ? uv_tcp_init_ex(&w->loop, &c->tcp, ((const struct sockaddr*)src->bytes)->sa_family)
              : uv_tcp_init(&w->loop, &c->tcp);
  if (r < 0) {
    /* Without a handle there is nothing to close: fail the requests here. */
    nhb__conn_fail_unopened(w, c, r);
    return;
  }
  c->tcp.data = c;
  if (NHB__UNLIKELY(datagram)) {
    r = c->transport->start(c, to);
  } else if (NHB__UNLIKELY(unix_socket)) {
    /* libuv reports a failed pipe connect through the callback only. The
     * path is NUL-terminated (nhb__pool_run_init checked). */
    uv_pipe_connect(&c->connect_req, &c->pipe, ((const struct sockaddr_un*)to->bytes)->sun_path, conn_on_connect);
    r = 0;
  } else {
    uv_tcp_nodelay(&c->tcp, 1);
    /* --source-address: a bind that fails (the address is no longer this
     * host's) fails the connection like a refused one. */
    if (NHB__UNLIKELY(src != NULL)) r = tcp_bind_source(c, src);
    if (r == 0 && NHB__LIKELY(c->transport->connect == NULL))
      r = uv_tcp_connect(&c->connect_req, &c->tcp, (const struct sockaddr*)to->bytes, conn_on_connect);
    else if (r == 0)
      r = c->transport->connect(c);
  }
  if (r < 0) {
    nhb__conn_fail(c, r, NHB_CTR_POOL_CONNECTION_FAILURE);
    return;
  }
  /* HTTP/2: a connection that is still connecting takes requests up to its
   * capacity, as Envoy's pool attaches pending streams to a connecting client. */
  avail_sync(w, c);
  /* A connected UDP socket is up at once; it is reported here, once the
   * entry is in its place, rather than from inside `start`. */
  if (NHB__UNLIKELY(datagram)) c->transport->on_connected(c);
}

/* Hands a request to the most recently used connection that has room, or to
 * a new connection. The caller checked nhb__pool_has_connection(). */
static void assign(nhb__worker* w, const nhb__request* rq) {
  nhb__slot* s = slot_get(w, rq);
  nhb__target_pool* tp = &w->tp[rq_target(w, rq)];
  if (tp->navail > 0) {
    nhb__conn* c = avail_pick(w, tp);
    slot_attach(c, s);
    if (c->nactive >= c->capacity && c->avail_pos >= 0) avail_take(w, tp, c);
    if (c->state == NHB__CX_READY) conn_send(c, s);
    /* else it rides along with the connection and goes out when it is ready */
  } else {
    nhb__conn* c = tp->free_conns[--tp->nfree];
    slot_attach(c, s);
    conn_start(w, c);
  }
}

/* Serves the pending queue while there is capacity. */
static void pool_pump(nhb__worker* w) {
  nhb__request rq;
  while (w->pending_len > 0 && !w->finishing && nhb__pool_has_connection_to(w, pending_head_target(w))) {
    pending_pop(w, &rq);
    assign(w, &rq);
  }
}

static void conn_on_close(uv_handle_t* handle) {
  nhb__conn* c = (nhb__conn*)handle->data;
  if (c->transport->close) c->transport->close(c);
  if (c->session->close) c->session->close(c);
  nhb__conn_closed(c);
}

void nhb__conn_closed(nhb__conn* c) {
  nhb__worker* w = c->worker;
  c->state = NHB__CX_DISCONNECTED;
  if (w->finishing) return;
  /* The server went away (GOAWAY, close) before answering anything on this
   * connection: the next one may fare no better, so wait before opening it.
   * A connection that never carried a request (prefetched, closed by the
   * server's idle time-out) says nothing about that. */
  if (c->peer_gone && !c->answered && c->requests_on_connection > 0) backoff_step(w);
  if (c->nactive > 0) {
    /* Requests the server refused without processing them (RFC 9113 section
     * 8.7) go out again on a fresh connection in this entry, at once or when
     * the back-off ends (on_backoff_end). */
    for (nhb__slot* s = c->slots; s != NULL; s = s->next) s->refused = 0;
    c->nrefused = 0;
    if (w->backoff_active) return;
    conn_start(w, c);
    pool_pump(w);
    return;
  }
  nhb__request rq;
  if (!w->backoff_active && w->in_flight < w->max_in_flight && w->pending_len > 0 &&
      pending_head_target(w) == c->target && pending_pop(w, &rq)) {
    slot_attach(c, slot_get(w, &rq));
    conn_start(w, c);
    pool_pump(w);
    return;
  }
  nhb__target_pool* tp = &w->tp[c->target];
  tp->free_conns[tp->nfree++] = c;
  /* An entry came free: a blocked or max-rate sequencer can go on. */
  nhb__sequencer_run(w);
  nhb__worker_maybe_finish(w);
}

void nhb__conn_ready(nhb__conn* c) {
  c->state = NHB__CX_READY;
  int r = c->session->open(c);
  if (r < 0) {
    nhb__conn_fail(c, r, NHB_CTR_POOL_CONNECTION_FAILURE);
    return;
  }
  /* Requests that rode along with the connection go out now. */
  nhb__slot* s = c->slots;
  while (s != NULL && c->state == NHB__CX_READY) {
    nhb__slot* next = s->next;
    conn_send(c, s);
    s = next;
  }
  nhb__conn_update(c);
  nhb__worker_maybe_finish(c->worker);
}

static void conn_send(nhb__conn* c, nhb__slot* s) {
  nhb__worker* w = c->worker;
  uint64_t* ctr = w->stats.counters;
  if (NHB__LIKELY(s->sent++ == 0)) {
    s->rq.send_ns = nhb__now_ns();
    nhb_hist_record(w->stats.hists[NHB_HIST_QUEUE_TO_CONNECT], s->rq.send_ns - s->rq.release_ns);
  } else {
    /* A refused request goes out again; its times stay those of the first
     * attempt, so its latency includes the detour. */
    ctr[NHB_CTR_UPSTREAM_RQ_RETRY]++;
  }
  ctr[NHB_CTR_UPSTREAM_RQ_TOTAL]++;
  s->written_ns = 0;
  s->first_ns = 0;
  int r = c->session->send(c, s);
  if (r < 0) nhb__conn_fail(c, r, NHB_CTR_STREAM_RESETS);
}

/* What a response adds besides the run's own statistics: its stage's count
 * (--stage), its endpoint's (several endpoints) and its group's (group.c). */
__attribute__((noinline)) static void response_extras(nhb__worker* w, const nhb__conn* c, nhb__slot* s,
                                                      uint64_t latency, int klass) {
  if (w->grp != NULL) nhb__grp_response(w, s, latency, klass);
  nhb__stage_response(w, s->rq.scheduled_ns);
  if (w->ep != NULL) {
    nhb_endpoint_stats* e = &w->ep[c->endpoint];
    e->requests++;
    e->errors += klass != 2;
    nhb_hist_record(e->latency, latency);
  }
}

/* Records a phase. A phase of 0 needs only the count, bucket 0 and the
 * minimum: its sum and sum of squares do not change, nor can it raise the
 * maximum. */
static inline void phase_zero(nhb_hist* h) {
  h->counts[0]++;
  h->total++;
  h->min = 0;
}

static inline void phase_record(nhb_hist* h, uint64_t value) {
  if (value == 0) {
    phase_zero(h);
    return;
  }
  nhb_hist_record(h, value);
}

/* The phases of a response that is not the common case (below): split from
 * the four timestamps, a transfer of 0 counted for phases.c to fold in. */
static inline void phases_split(nhb__worker* w, const nhb__slot* s, uint64_t now) {
  nhb_stats* st = &w->stats;
  uint64_t first = s->first_ns;
  uint64_t written = s->written_ns;
  /* A missing or out-of-order stamp (a response that began before the
   * request was fully written, a session that could not stamp) collapses
   * onto its neighbour, so the three always add up to the latency. */
  if (NHB__UNLIKELY(first == 0 || first > now)) first = now;
  if (NHB__UNLIKELY(first < s->rq.send_ns)) first = s->rq.send_ns;
  if (NHB__UNLIKELY(written == 0 || written > first)) written = first;
  if (NHB__UNLIKELY(written < s->rq.send_ns)) written = s->rq.send_ns;
  phase_record(st->hists[NHB_HIST_REQUEST_WRITE], written - s->rq.send_ns);
  phase_record(st->hists[NHB_HIST_TIME_TO_FIRST_BYTE], first - written);
  if (now == first) w->ph_transfer0++;
  else nhb_hist_record(st->hists[NHB_HIST_TRANSFER], now - first);
}

void nhb__conn_response(nhb__conn* c, nhb__slot* s, int status) {
  nhb__worker* w = c->worker;
  nhb_stats* st = &w->stats;
  uint64_t now = nhb__now_ns();
  uint64_t latency = now - s->rq.send_ns;
  int klass = status / 100;
  nhb_counter_t ctr = NHB_CTR_HTTP_XXX;
  nhb_histogram_t hist = NHB_HIST_LATENCY_XXX;
  if (klass >= 1 && klass <= 5) {
    ctr = (nhb_counter_t)(NHB_CTR_HTTP_1XX + klass - 1);
    hist = (nhb_histogram_t)(NHB_HIST_LATENCY_1XX + klass - 1);
    /* A class of 1..5 means a status of 100..599, the per-code array's range;
     * any other status is counted by benchmark.http_xxx alone. */
    st->status_codes[status - NHB_STATUS_MIN]++;
  }
  st->counters[ctr]++;
  /* A closed loop's release is its schedule: scheduled_to_response and
   * sequencer.callback are then the same value, recorded once (phases.c). */
  if (NHB__LIKELY(s->rq.scheduled_ns == s->rq.release_ns)) {
    nhb_hist_record(w->ph_same, now - s->rq.scheduled_ns);
  } else {
    nhb_hist_record(st->hists[NHB_HIST_SCHEDULED_TO_RESPONSE], now - s->rq.scheduled_ns);
    nhb_hist_record(st->hists[NHB_HIST_SEQUENCER_CALLBACK], now - s->rq.release_ns);
  }
  /* The phases split request_to_response exactly: send -> written -> first
   * byte -> now. A 2xx's latency is recorded once, into a worker histogram
   * that phases.c folds into every statistic it belongs to: in the common
   * case (HTTP/1.1's request taken by the socket at once and its response
   * read in one go: no first-byte stamp) that is latency_2xx,
   * request_to_response and time_to_first_byte, with request_write and
   * transfer 0; otherwise latency_2xx and request_to_response, the phases
   * split apart. */
  if (NHB__LIKELY(klass == 2)) {
    if (NHB__LIKELY(s->first_ns == 0 && s->written_ns == s->rq.send_ns)) {
      nhb_hist_record(w->ph_whole, latency);
    } else {
      nhb_hist_record(w->ph_ok, latency);
      phases_split(w, s, now);
    }
  } else {
    nhb_hist_record(st->hists[hist], latency);
    nhb_hist_record(st->hists[NHB_HIST_REQUEST_TO_RESPONSE], latency);
    phases_split(w, s, now);
  }
  nhb__ivl_record(w, now - s->rq.scheduled_ns);
  nhb_stream_record(&st->streams[NHB_STREAM_RESPONSE_HEADER_SIZE], s->header_bytes);
  nhb_stream_record(&st->streams[NHB_STREAM_RESPONSE_BODY_SIZE], s->body_bytes);
  /* Stages and per-endpoint statistics share one test, so that a run with
   * neither pays what it paid before either existed. */
  if (NHB__UNLIKELY(w->response_extras)) response_extras(w, c, s, latency, klass);
  c->answered = 1;
  if (NHB__UNLIKELY(w->backoff_failures != 0)) w->backoff_failures = 0;
  if (NHB__UNLIKELY(s->span_id != 0)) nhb__trace_end(w, s, status > 0 ? status : 1, NHB_CTR_COUNT, now);
  slot_release(w, c, s);
  nhb__conn_update(c);
  nhb__worker_maybe_finish(w);
}

void nhb__conn_slot_failed(nhb__conn* c, nhb__slot* s, nhb_counter_t reason) {
  nhb__worker* w = c->worker;
  slot_fail(w, c, s, reason, nhb__now_ns());
  nhb__conn_update(c);
  nhb__worker_maybe_finish(w);
}

void nhb__conn_check_failed(nhb__conn* c, nhb__slot* s) {
  nhb__worker* w = c->worker;
  uint64_t now = nhb__now_ns();
  /* Kept apart: a failed check's latency is not a success's, and the
   * headline statistics hold successes and non-2xx responses only. */
  nhb_hist_record(w->stats.hists[NHB_HIST_LATENCY_CHECK_FAILED], now - s->rq.send_ns);
  c->answered = 1;
  slot_fail(w, c, s, NHB_CTR_CHECK_FAILED, now);
  nhb__conn_update(c);
  nhb__worker_maybe_finish(w);
}

void nhb__conn_slot_refused(nhb__conn* c, nhb__slot* s) {
  nhb__worker* w = c->worker;
  s->stream_id = 0;
  if (s->sent > NHB__MAX_RETRIES) {
    /* A server that refuses the same request again and again (GOAWAY with
     * last stream id 0 on every connection, REFUSED_STREAM every time) would
     * make it go round for ever: it ends here, counted on its own. */
    if (w->first_error == 0) {
      char text[sizeof(w->first_error_text)];
      snprintf(text, sizeof(text),
               "%s: the server refused a request %d times without processing it (GOAWAY or "
               "%s); given up after %d retries",
               w->protocol->name, s->sent, w->protocol->refused, NHB__MAX_RETRIES);
      nhb__worker_record_error_text(w, NHB_EPROTO, text);
    }
    nhb__conn_slot_failed(c, s, NHB_CTR_UPSTREAM_RQ_RETRY_LIMIT_EXCEEDED);
    return;
  }
  if (!c->draining && c->state == NHB__CX_READY) {
    /* Refused without a GOAWAY: over the server's stream limit, whose
     * SETTINGS had not arrived when the request left. The connection sends
     * it again; nghttp2 holds it back until a stream is free. */
    conn_send(c, s);
    return;
  }
  /* The server is going away: the request waits for this connection to close
   * and goes out on the next one (conn_on_close). */
  if (!s->refused) {
    s->refused = 1;
    c->nrefused++;
  }
  nhb__conn_update(c);
}

/* ---- what the sequencer and the housekeeping timer call ----------------- */

int nhb__pool_dispatch(nhb__worker* w, uint64_t scheduled_ns, uint64_t release_ns, uint32_t spec) {
  nhb__request rq = {scheduled_ns, release_ns, 0, spec};
  /* Its own target: the sequencer has already moved on to the next entry,
   * which nhb__pool_has_connection() would look at. */
  if (nhb__pool_has_connection_to(w, rq_target(w, &rq))) {
    assign(w, &rq);
    return 1;
  }
  if (pending_push(w, &rq)) return 1;
  /* Refused: the sequencer blocks (closed loop) and tries again when a
   * connection frees, or drops the release (open loop). Either way this entry
   * of the request set was not sent, so the next release takes it again
   * (nhb__next_spec had moved past it): the set keeps its order on the wire,
   * and with several targets a blocked release waits for its own target. */
  if (NHB__UNLIKELY(w->run->config.nspecs > 1)) w->spec_next = spec;
  return 0;
}

void nhb__pool_prefetch(nhb__worker* w) {
  for (uint32_t t = 0; t < w->ntargets; t++) {
    nhb__target_pool* tp = &w->tp[t];
    while (tp->nfree > 0 && !w->finishing) conn_start(w, tp->free_conns[--tp->nfree]);
  }
}

/* Both time-outs are UV_ETIMEDOUT, whose text is "connection timed out": the
 * first error would then call a request time-out a connect failure. Each gets
 * its own words, written once per worker (only the first error is kept). */
static void record_timeout(nhb__worker* w, const char* what, uint64_t ns) {
  if (w->first_error != 0) return;
  char text[sizeof(w->first_error_text)];
  snprintf(text, sizeof(text), "%s %g s (ETIMEDOUT)", what, (double)ns / 1e9);
  nhb__worker_record_error_text(w, UV_ETIMEDOUT, text);
}

void nhb__pool_scan_timeouts(nhb__worker* w, uint64_t now) {
  const nhb_client_config* cfg = &w->run->config;
  for (uint32_t i = 0; i < w->nconns; i++) {
    nhb__conn* c = &w->conns[i];
    if (c->state == NHB__CX_CONNECTING && now - c->connect_start_ns > cfg->connect_timeout_ns) {
      record_timeout(w,
                     NHB__UNLIKELY(c->tunnel == NHB__TUNNEL_WAITING) ? "connect timed out: the proxy did not answer CONNECT within --timeout"
                     : NHB__UNLIKELY(c->dns_pending) ? "connect timed out: the name did not resolve within --timeout"
                                                   : "connect timed out: no connection within --timeout",
                     cfg->connect_timeout_ns);
      nhb__conn_fail(c, UV_ETIMEDOUT, NHB_CTR_POOL_CONNECTION_FAILURE);
      continue;
    }
    if (c->state != NHB__CX_READY || cfg->request_timeout_ns == 0) continue;
    int expired = 0;
    for (nhb__slot* s = c->slots; s != NULL && c->state == NHB__CX_READY;) {
      nhb__slot* next = s->next;
      if (s->sent && now - s->rq.send_ns > cfg->request_timeout_ns) {
        record_timeout(w, "request timed out: no response within --request-timeout",
                       cfg->request_timeout_ns);
        if (c->session->cancel == NULL) {
          /* HTTP/1.1 cannot abandon a request and keep the connection. */
          nhb__conn_fail(c, UV_ETIMEDOUT, NHB_CTR_REQUEST_TIMEOUT);
          break;
        }
        nhb__worker_record_error(w, UV_ETIMEDOUT);
        c->session->cancel(c, s);
        slot_fail(w, c, s, NHB_CTR_REQUEST_TIMEOUT, now);
        expired = 1;
      }
      s = next;
    }
    if (expired) nhb__conn_update(c);
  }
  nhb__worker_maybe_finish(w);
}

void nhb__pool_close_all(nhb__worker* w) {
  /* Whatever is still queued or in flight now will never complete. */
  w->stats.counters[NHB_CTR_UPSTREAM_RQ_CANCELLED] += w->in_flight + w->pending_len;
  w->in_flight = 0;
  w->pending_len = 0;
  for (uint32_t t = 0; w->tp != NULL && t < w->ntargets; t++) {
    w->tp[t].navail = 0;
    w->tp[t].avail_head = 0;
  }
  if (w->backoff_timer_init) {
    w->backoff_timer_init = 0;
    w->backoff_active = 0;
    uv_close((uv_handle_t*)&w->backoff_timer, NULL);
  }
  if (w->protocol != NULL && w->protocol->worker_close != NULL) w->protocol->worker_close(w);
  if (NHB__UNLIKELY(w->run->tunnel.h3)) nhb__carrier_worker_close(w);
  for (uint32_t i = 0; i < w->nconns; i++) {
    nhb__conn* c = &w->conns[i];
    c->avail_pos = -1;
    if (c->state == NHB__CX_CONNECTING || c->state == NHB__CX_READY) {
      c->state = NHB__CX_CLOSING;
      if (NHB__UNLIKELY(c->dns_pending)) {
        uv_cancel((uv_req_t*)&c->dns_req); /* its callback ends the entry (dns.c) */
        continue;
      }
      if (NHB__LIKELY(c->transport->start == NULL)) uv_read_stop((uv_stream_t*)&c->tcp);
      uv_close((uv_handle_t*)&c->tcp, conn_on_close);
    }
  }
}
