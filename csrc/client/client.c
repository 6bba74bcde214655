/* client.c: a load run: workers, the controller, and the merged statistics.
 *
 * nhb_run_start() starts one thread per worker plus a controller thread. The
 * controller sleeps until an interval boundary or until a worker kicks it
 * (nhb__run_kick), sums the counters the workers publish, evaluates the
 * termination and failure predicates on the sums and asks every worker to
 * stop when one fires. When all workers are done it joins them, merges their
 * statistics and wakes whoever waits in nhb_run_wait().
 */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "client/client.h"

#define HOUSEKEEPING_MS 10
_Static_assert(HOUSEKEEPING_MS * 1000000ULL == NHB_HICCUP_PERIOD_NS,
               "the hiccup meter rides on the housekeeping timer");
#define TIMEOUT_SCAN_NS (50 * NHB__NS_PER_MS)
/* The controller's longest sleep without a kick: a safety net only, since
 * every event it acts on kicks it. */
#define CONTROLLER_MAX_SLEEP_NS (1000 * NHB__NS_PER_MS)
/* A stop request drains in-flight requests for at most this long, so that
 * Ctrl-C gives a partial result promptly. */
#define STOP_DRAIN_MAX_NS (1000 * NHB__NS_PER_MS)

static int stats_alloc(nhb_stats* st) {
  memset(st, 0, sizeof(*st));
  for (int i = 0; i < NHB_HIST_COUNT; i++) {
    st->hists[i] = malloc(sizeof(nhb_hist));
    if (!st->hists[i]) return NHB_ENOMEM;
    nhb_hist_init(st->hists[i]);
  }
  for (int i = 0; i < NHB_STREAM_COUNT; i++) nhb_stream_init(&st->streams[i]);
  return 0;
}

static void stats_free(nhb_stats* st) {
  for (int i = 0; i < NHB_HIST_COUNT; i++) {
    free(st->hists[i]);
    st->hists[i] = NULL;
  }
}

/* What publish() last stored for counter id `id` (the controller's sums'
 * layout: the fixed counters, the status codes, the gRPC ones, the checks). */
static uint64_t published_value(nhb__worker* w, int id) {
  if (id < NHB_CTR_COUNT) return atomic_load_explicit(&w->published[id], memory_order_relaxed);
  if (id < NHB_CHECK_PASS_ID)
    return atomic_load_explicit(&w->published_status[id - NHB_CTR_COUNT], memory_order_relaxed);
  return atomic_load_explicit(&w->published_checks[id - NHB_CHECK_PASS_ID], memory_order_relaxed);
}

/* The sum of the counters the predicates watch, as published: within a
 * phase counters only grow, so a change of the sum is a change of one. */
static uint64_t watched_sum(nhb__worker* w) {
  uint64_t sum = 0;
  for (int i = 0; i < w->run->nwatch; i++) sum += published_value(w, w->run->watch_ids[i]);
  return sum;
}

static void publish(nhb__worker* w) {
  uint64_t watched = w->run->nwatch > 0 ? watched_sum(w) : 0;
  /* After a warm-up the counters go on from the warm-up's; the predicates
   * and the progress see the measured phase's own (w->warm is zero without
   * a warm-up, and during it). */
  for (int i = 0; i < NHB_CTR_COUNT; i++)
    atomic_store_explicit(&w->published[i], w->stats.counters[i] - w->warm.counters[i], memory_order_relaxed);
  if (w->run->watch_status) {
    for (int i = 0; i < NHB_STATUS_COUNT; i++)
      atomic_store_explicit(&w->published_status[i], w->stats.status_codes[i] - w->warm.status_codes[i],
                            memory_order_relaxed);
    for (int i = 0; i < NHB_GRPC_STATUS_COUNT; i++)
      atomic_store_explicit(&w->published_status[NHB_STATUS_COUNT + i],
                            w->stats.grpc_status[i] - w->warm.grpc_status[i], memory_order_relaxed);
  }
  /* The checks' counters, for the live view and the predicates on them. */
  nhb__chk_fold(&w->stats, w->run->chk.n);
  for (uint32_t i = 0; i < w->run->chk.n; i++) {
    atomic_store_explicit(&w->published_checks[i], w->stats.check_pass[i] - w->warm.check_pass[i],
                          memory_order_relaxed);
    atomic_store_explicit(&w->published_checks[NHB_MAX_CHECKS + i], w->stats.check_fail[i] - w->warm.check_fail[i],
                          memory_order_relaxed);
  }
  nhb__pool_endpoints_publish(w);
  if (w->grp != NULL) nhb__grp_publish(w);
  /* The predicates are judged as soon as what they watch moves, and not
   * otherwise: a run whose error counters stay at zero never wakes the
   * controller from here. */
  if (w->run->nwatch > 0 && watched_sum(w) != watched) nhb__run_kick(w->run);
}

/* ---- load-generator health ---------------------------------------------- */

/* The worker's health is measured outside the request path: the OS's CPU
 * time and run-queue wait of the thread at the measured phase's two ends
 * (no per-request clock read), and how late the loop runs the housekeeping
 * timer it has anyway: how long the loop could not run anything else
 * (jHiccup's idea), at no extra wake-up, so that a run's instructions per
 * request stay what they were. */

static uint64_t thread_cpu_ns(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return (uint64_t)ts.tv_sec * NHB__NS_PER_S + (uint64_t)ts.tv_nsec;
}

/* The thread's run-queue wait so far: the second field of Linux's
 * /proc/thread-self/schedstat (ns runnable but not running), or -1 where
 * the kernel does not keep it. A starved generator waits there. */
static int64_t thread_wait_ns(void) {
  char buf[96];
  FILE* f = fopen("/proc/thread-self/schedstat", "re");
  if (f == NULL) return -1;
  unsigned long long run = 0, wait = 0;
  int ok = fgets(buf, sizeof(buf), f) != NULL && sscanf(buf, "%llu %llu", &run, &wait) == 2;
  fclose(f);
  return ok ? (int64_t)wait : -1;
}

static void load_begin(nhb__worker* w, uint64_t now) {
  w->load_state = 1;
  w->load_wall0_ns = now;
  w->load_cpu0_ns = thread_cpu_ns();
  w->load_wait0_ns = thread_wait_ns();
}

static void load_end(nhb__worker* w, uint64_t now) {
  if (w->load_state != 1) return;
  w->load_state = 2;
  w->load_cpu_ns = thread_cpu_ns() - w->load_cpu0_ns;
  w->load_wall_ns = now - w->load_wall0_ns;
  int64_t wait = thread_wait_ns();
  w->load_wait_ns = wait >= 0 && w->load_wait0_ns >= 0 ? wait - w->load_wait0_ns : -1;
}

/* The measured phase runs from the worker's first scheduled release after
 * any warm-up to its stop (the schedule's end, a count reached, a stop
 * request): seen from the housekeeping tick, so within its period of each. */
static void load_tick(nhb__worker* w, uint64_t now) {
  if (w->load_state == 0 && !w->warming && !w->stopping && now >= w->start_ns)
    load_begin(w, now);
  else if (w->load_state == 1 && (w->stopping || now >= w->end_ns))
    load_end(w, now);
}

/* On each housekeeping tick: libuv runs a timer once the loop's clock (in
 * milliseconds) reaches its due time, so the tick can fire up to a
 * millisecond after the due instant on time; beyond that it is late. A
 * stall that swallowed several ticks records each, a period less late, as
 * jHiccup fills in what a stalled sampler could not see. */
static void hiccup_tick(nhb__worker* w, uint64_t now) {
  uint64_t due_ms = w->hiccup_due_ms;
  /* libuv re-arms a repeating timer from the loop's clock before calling it. */
  w->hiccup_due_ms = uv_now(&w->loop) + HOUSEKEEPING_MS;
  load_tick(w, now);
  if (due_ms == 0 || w->load_state != 1) return;
  uint64_t on_time = (due_ms + 1) * NHB__NS_PER_MS;
  uint64_t late = now > on_time ? now - on_time : 0;
  for (;;) {
    nhb_hist_record(w->hiccup, late);
    if (late < NHB_HICCUP_PERIOD_NS) break;
    late -= NHB_HICCUP_PERIOD_NS;
  }
}

/* ---- worker ------------------------------------------------------------- */

static void worker_finish(nhb__worker* w) {
  if (w->finishing) return;
  w->finishing = 1;
  load_end(w, nhb__now_ns());
  nhb__pool_close_all(w);
  nhb__sequencer_close(w);
  uv_close((uv_handle_t*)&w->housekeeping, NULL);
  /* Once the wake-up handle is closed nobody may send to it again. */
  pthread_mutex_lock(&w->run->lock);
  uv_close((uv_handle_t*)&w->wakeup, NULL);
  w->wakeup.data = NULL;
  pthread_mutex_unlock(&w->run->lock);
}

static void request_stop_all(nhb_run* run);

/* Did the warm-up (the worker's counters hold nothing else yet) have a call
 * that failed as Fortio counts failures: anything but a 2xx or a 418, a
 * connection that failed or reset, a time-out, a failed gRPC call or echo. */
static int warmup_failed(const nhb__worker* w) {
  const uint64_t* c = w->stats.counters;
  static const int failures[] = {
      NHB_CTR_HTTP_1XX,           NHB_CTR_HTTP_3XX,      NHB_CTR_HTTP_5XX,
      NHB_CTR_HTTP_XXX,           NHB_CTR_POOL_CONNECTION_FAILURE,
      NHB_CTR_STREAM_RESETS,      NHB_CTR_REQUEST_TIMEOUT,
      NHB_CTR_UPSTREAM_RQ_RETRY_LIMIT_EXCEEDED, NHB_CTR_GRPC_ERROR,
      NHB_CTR_GRPC_PROTOCOL_ERROR, NHB_CTR_ECHO_MISMATCH, NHB_CTR_CHECK_FAILED,
  };
  for (size_t i = 0; i < sizeof(failures) / sizeof(failures[0]); i++)
    if (c[failures[i]] > 0) return 1;
  return c[NHB_CTR_HTTP_4XX] > w->stats.status_codes[418 - NHB_STATUS_MIN];
}

void nhb__worker_maybe_finish(nhb__worker* w) {
  if (!w->stopping || w->finishing) return;
  if ((w->in_flight == 0 && w->pending_len == 0) || nhb__now_ns() >= w->drain_deadline_ns) {
    /* The end of a warm-up (drained, or its drain timed out) starts the
     * measured phase, unless the run was asked to stop. */
    if (NHB__UNLIKELY(w->warming) && !atomic_load(&w->run->stop_requested)) {
      if (!w->run->config.warmup_stop_on_error || !warmup_failed(w)) {
        nhb__sequencer_next_phase(w);
        return;
      }
      /* A failed warm-up call ends the run before its measured phase. */
      nhb__sequencer_end_warmup(w);
      request_stop_all(w->run);
    }
    worker_finish(w);
  }
}

static void worker_check_stop(nhb__worker* w) {
  if (!w->stopping && atomic_load(&w->run->stop_requested)) {
    w->stats.counters[NHB_CTR_GRACEFUL_STOP_REQUESTED]++;
    uint64_t drain = w->run->config.drain_timeout_ns;
    nhb__sequencer_stop_now(w, drain < STOP_DRAIN_MAX_NS ? drain : STOP_DRAIN_MAX_NS);
  }
}

static void on_wakeup(uv_async_t* handle) {
  nhb__worker* w = (nhb__worker*)handle->data;
  worker_check_stop(w);
  nhb__ivl_worker_poll(w);
}

static void on_housekeeping(uv_timer_t* handle);

/* Is there nothing the housekeeping tick would look after: no request in
 * flight or queued, no connection being made, not stopping? */
static int worker_idle(const nhb__worker* w) {
  if (w->stopping || w->in_flight != 0 || w->pending_len != 0) return 0;
  for (uint32_t i = 0; i < w->nconns; i++)
    if (w->conns[i].state == NHB__CX_CONNECTING) return 0;
  return 1;
}

/* Between releases far apart (a low fixed rate) a worker with nothing in
 * flight sleeps through its ticks until one period after the next release
 * (or the phase's start or end): the release wakes the loop by itself (the
 * sequencer's timer), and its response, if it leaves the worker idle again,
 * plans the next sleep (nhb__worker_went_idle), so that a run at 5 requests
 * a second wakes its worker about twice per request, for the release and
 * for the response, rather than 100 times a second. Nothing is lost:
 * progress is published on this tick or by that response and nothing can
 * change it before a release; time-outs need something in flight or
 * connecting, and a response slower than a period finds the ticks going
 * again; the phase's start and end are the sequencer's own timers; stops
 * and interval boundaries arrive through the wake-up handle; and the hiccup
 * meter measures stalls while there is something to measure (a stall in the
 * gap that delays the release is that release's lateness, validity's other
 * measure). */
static void plan_housekeeping(nhb__worker* w, uint64_t now) {
  uint64_t until = 0;
  if (w->next_due_ns != 0) {
    until = w->next_due_ns;
    if (w->end_ns < until) until = w->end_ns;
    if (w->load_state == 0 && w->start_ns > now && w->start_ns < until) until = w->start_ns;
    /* The gap first: the idle test walks the connections, which a run whose releases
     * are close together (most runs) need not pay on every tick. */
    if (until < now + NHB__IDLE_SKIP_MIN_NS || !worker_idle(w)) until = 0;
  }
  /* Otherwise the period goes on: libuv re-armed the repeating timer with it. */
  if (until != 0) {
    uint64_t ms = (until - now) / NHB__NS_PER_MS + HOUSEKEEPING_MS;
    uv_timer_start(&w->housekeeping, on_housekeeping, ms, HOUSEKEEPING_MS);
    w->hiccup_due_ms = uv_now(&w->loop) + ms;
  }
}

void nhb__worker_went_idle(nhb__worker* w, uint64_t now) {
  publish(w);
  plan_housekeeping(w, now);
}

void nhb__worker_publish(nhb__worker* w) { publish(w); }

static void on_housekeeping(uv_timer_t* handle) {
  nhb__worker* w = (nhb__worker*)handle->data;
  uint64_t now = nhb__now_ns();
  hiccup_tick(w, now);
  worker_check_stop(w);
  /* A new interval is normally picked up in on_wakeup; this catches one
   * whose wake-up coalesced with another. */
  nhb__ivl_worker_poll(w);
  if (now - w->last_timeout_scan_ns >= TIMEOUT_SCAN_NS) {
    w->last_timeout_scan_ns = now;
    nhb__pool_scan_timeouts(w, now);
  }
  /* The sequencer notices the end of the run on its own, except when it is
   * blocked or waiting for connections at max rate: then this does. It runs
   * once first, so that releases due before the end that it has not made yet
   * (this timer can fire before the release wake-up in the same iteration)
   * are made or counted as dropped, and the schedule's count stays exact. */
  if (!w->stopping && now >= w->end_ns) {
    nhb__sequencer_run(w);
    if (!w->stopping) nhb__sequencer_stop_now(w, w->run->config.drain_timeout_ns);
  }
  nhb__worker_maybe_finish(w);
  publish(w);
  plan_housekeeping(w, now);
}

static void* worker_main(void* arg) {
  nhb__worker* w = (nhb__worker*)arg;
  /* Named for top -H, perf and /proc (15 characters at most). */
  char name[16];
  snprintf(name, sizeof(name), "nhb-worker-%u", (unsigned)w->index % 10000u);
  pthread_setname_np(pthread_self(), name);
  nhb__pin_thread(w->cpu);
  int r = nhb__pool_init(w);
  if (r == 0) r = nhb__request_worker_init(w);
  if (r == 0) r = nhb__sequencer_init(w);
  if (r == 0 && (w->hiccup = malloc(sizeof(nhb_hist))) == NULL) r = NHB_ENOMEM;
  if (r == 0) nhb_hist_init(w->hiccup);
  if (r < 0) {
    nhb__worker_record_error(w, r);
    w->stopping = 1;
    worker_finish(w);
  } else {
    uv_timer_start(&w->housekeeping, on_housekeeping, HOUSEKEEPING_MS, HOUSEKEEPING_MS);
    w->hiccup_due_ms = uv_now(&w->loop) + HOUSEKEEPING_MS;
    if (w->run->config.prefetch_connections) nhb__pool_prefetch(w);
    worker_check_stop(w);
    nhb__sequencer_run(w);
  }
  uv_run(&w->loop, UV_RUN_DEFAULT);
  uv_loop_close(&w->loop);
  /* The phases recorded by count go into the statistics before they are read. */
  nhb__phases_fold(w);
  if (w->release_fd >= 0) close(w->release_fd);
  nhb__pool_free(w);
  nhb__request_worker_free(w);
  publish(w);
  nhb__ivl_worker_close(w);
  atomic_store(&w->done, 1);
  nhb__run_kick(w->run);
  return NULL;
}

/* ---- run ---------------------------------------------------------------- */

/* Copies the config's strings into one block owned by the run, so that the
 * caller's may go away after nhb_run_create(). The request set's strings are
 * copied with the set (nhb__request_set_create). */
static int copy_strings(nhb_run* run) {
  nhb_client_config* cfg = &run->config;
  const char** fields[] = {&cfg->tls.sni,     &cfg->tls.verify_name,  &cfg->tls.alpn,   &cfg->tls.cacert,
                           &cfg->tls.ciphers, &cfg->tls.ciphersuites, &cfg->tls.groups, &cfg->h2_scheme,
                           &cfg->tls.cert_pem, &cfg->tls.key_pem, &cfg->tls.key_passphrase,
                           &cfg->proxy_tls.sni, &cfg->proxy_tls.verify_name, &cfg->proxy_tls.alpn,
                           &cfg->proxy_tls.cacert, &cfg->proxy_tls.cert_pem};
  const size_t nfields = sizeof(fields) / sizeof(fields[0]);
  size_t total = 0;
  for (size_t i = 0; i < nfields; i++)
    if (*fields[i] != NULL) total += strlen(*fields[i]) + 1;
  run->strings = malloc(total ? total : 1);
  if (run->strings == NULL) return NHB_ENOMEM;
  char* p = run->strings;
  for (size_t i = 0; i < nfields; i++) {
    if (*fields[i] == NULL) continue;
    size_t len = strlen(*fields[i]);
    memcpy(p, *fields[i], len + 1);
    *fields[i] = p;
    p += len + 1;
  }
  return 0;
}

static int create_error(nhb_run* run, int code, char* err, size_t err_len, const char* text) {
  if (err != NULL && err_len > 0 && text != NULL && err[0] == '\0') snprintf(err, err_len, "%s", text);
  nhb_run_destroy(run);
  return code;
}

int nhb_run_create(const nhb_client_config* config, nhb_run** out) {
  return nhb_run_create_ex(config, out, NULL, 0);
}

/* The checks that keep the core safe whoever fills the config: the binding,
 * the selftest and the fuzz targets. Each one protects memory, arithmetic or
 * the event loop, and says what; the ranges a user is held to (connections up
 * to a million, time-outs up to an hour, ...) belong to nhbench.options and are
 * not repeated here (docs/architecture.md, "Binding contract"). Messages name
 * the binding's config key, "<key>: <what>". */
__attribute__((format(printf, 3, 4))) static int config_error(char* err, size_t err_len, const char* fmt, ...) {
  if (err != NULL && err_len > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
  }
  return NHB_EINVAL;
}

/* Schedule shapes: what keeps the sequencer's arithmetic sound. */
static int check_schedule(const nhb_client_config* c, char* err, size_t err_len) {
  /* Jitter is added to nanosecond times as a double. */
  if (!(c->jitter_fraction >= 0 && c->jitter_fraction <= 1))
    return config_error(err, err_len, "jitter_fraction: must be 0-1");
  if (c->jitter_uniform_ns > (uint64_t)NHB__NS_PER_S * 3600)
    return config_error(err, err_len, "jitter_uniform: at most an hour");
  /* The arrays are copied by their counts. */
  if (c->nstages > 0 && (c->stage_ns == NULL || c->stage_rps == NULL))
    return config_error(err, err_len, "stages: missing");
  if (c->nschedule_offsets > 0 && c->schedule_offsets_ns == NULL)
    return config_error(err, err_len, "schedule_offsets: missing");
  if (c->nstages > 0 && c->nschedule_offsets > 0)
    return config_error(err, err_len, "stages: not with schedule_offsets");
  /* The stages' times add up in a uint64_t of nanoseconds; a zero-length
   * stage has no rate to ramp (and would divide by zero); the rate bound is
   * the constant one's. */
  for (uint32_t i = 0; i < c->nstages; i++) {
    if (c->stage_ns[i] == 0 || c->stage_ns[i] > (uint64_t)NHB__NS_PER_S * 31536000ULL)
      return config_error(err, err_len, "stages: each lasts 1 ns to a year");
    if (!(c->stage_rps[i] >= 0 && c->stage_rps[i] <= NHB_MAX_RPS))
      return config_error(err, err_len, "stages: rates must be 0-%d per worker", NHB_MAX_RPS);
  }
  /* stage_time() and the replay rely on the order. */
  for (uint64_t i = 1; i < c->nschedule_offsets; i++)
    if (c->schedule_offsets_ns[i] < c->schedule_offsets_ns[i - 1])
      return config_error(err, err_len, "schedule_offsets: must not decrease");
  if (c->nschedule_offsets > 0 && c->schedule_offsets_ns[c->nschedule_offsets - 1] > (uint64_t)NHB__NS_PER_S * 31536000ULL)
    return config_error(err, err_len, "schedule_offsets: at most a year");
  if (c->warmup_ns > 0 && c->warmup_requests > 0)
    return config_error(err, err_len, "warmup: a duration or a count, not both");
  if (c->warmup_ns > (uint64_t)NHB__NS_PER_S * 31536000ULL)
    return config_error(err, err_len, "warmup: at most a year");
  /* The hook's arrays are allocated with the run: 8 bytes a release per
   * worker. (What Poisson arrivals are not combined with is the options'
   * rule: none of those combinations is unsafe here.) */
  if (c->record_arrivals > 100000000ULL) return config_error(err, err_len, "record_arrivals: at most 100000000");
  return 0;
}

static int check_config(const nhb_client_config* c, char* err, size_t err_len) {
  /* The target is copied by its length out of a fixed 28-byte buffer. */
  if (c->ntargets == 0 && (c->addr_len == 0 || c->addr_len > sizeof(c->addr)))
    return config_error(err, err_len, "address: an IPv4 or IPv6 socket address");
  /* Every release sends an entry of the request set: there must be one. The
   * entries are checked as they are copied (nhb__request_set_create). */
  if (c->nspecs == 0 || c->specs == NULL) return config_error(err, err_len, "specs: must not be empty");
  /* Per-worker arrays, histograms and threads are sized by it; the merge
   * divides by it. */
  if (c->nworkers < 1 || c->nworkers > NHB_MAX_WORKERS)
    return config_error(err, err_len, "cpus: one entry per worker, 1-%d workers", NHB_MAX_WORKERS);
  /* Each worker's connection arrays are sized by it (calloc(0) may fail). */
  if (c->connections < 1) return config_error(err, err_len, "connections: must be at least %d", 1);
  /* It indexes the protocol table, which has a record for every protocol. */
  if ((unsigned)c->protocol >= NHB_PROTO_COUNT)
    return config_error(err, err_len, "protocol: unknown (%d)", (int)c->protocol);
  /* Past the bound the schedule's arithmetic loses precision (sequencer.c
   * relies on an interval of at least 1 us); NaN or a negative rate would
   * make it undefined. */
  if (!(c->rps >= 0 && c->rps <= NHB_MAX_RPS))
    return config_error(err, err_len, "rps: must be 0-%d per worker", NHB_MAX_RPS);
  /* The predicates live in fixed arrays, and fired failure predicates in a
   * 64-bit mask (nhb_run_failed_predicates). */
  _Static_assert(NHB_MAX_PREDICATES <= 64, "failed predicates are a 64-bit mask");
  if (c->n_termination < 0 || c->n_termination > NHB_MAX_PREDICATES)
    return config_error(err, err_len, "termination_predicates: at most %d", NHB_MAX_PREDICATES);
  if (c->n_failure < 0 || c->n_failure > NHB_MAX_PREDICATES)
    return config_error(err, err_len, "failure_predicates: at most %d", NHB_MAX_PREDICATES);
  /* A predicate's counter indexes the counter arrays. */
  for (int i = 0; i < c->n_termination + c->n_failure; i++) {
    const nhb_predicate* p = i < c->n_termination ? &c->termination[i] : &c->failure[i - c->n_termination];
    if (p->counter < 0 || p->counter >= NHB_COUNTER_ID_COUNT)
      return config_error(err, err_len, "%s: unknown counter %d",
                          i < c->n_termination ? "termination_predicates" : "failure_predicates", p->counter);
  }
  return check_schedule(c, err, err_len);
}

int nhb_run_create_ex(const nhb_client_config* config, nhb_run** out, char* err, size_t err_len) {
  *out = NULL;
  if (err != NULL && err_len > 0) err[0] = '\0';
  int bad = check_config(config, err, err_len);
  if (bad < 0) return bad;
  nhb_run* run = calloc(1, sizeof(*run));
  if (!run) return NHB_ENOMEM;
  run->config = *config;
  run->nworkers = config->nworkers;
  for (int i = 0; i < config->n_termination + config->n_failure; i++) {
    const nhb_predicate* p = i < config->n_termination ? &config->termination[i]
                                                       : &config->failure[i - config->n_termination];
    if (p->counter >= NHB_CTR_COUNT) run->watch_status = 1;
    int seen = 0;
    for (int k = 0; k < run->nwatch; k++) seen |= run->watch_ids[k] == p->counter;
    if (!seen) run->watch_ids[run->nwatch++] = p->counter;
  }
  run->ctl_fd = -1;
  run->finished_fd = -1;
  run->cpus = calloc((size_t)run->nworkers, sizeof(int));
  run->workers = calloc((size_t)run->nworkers, sizeof(nhb__worker));
  if (!run->cpus || !run->workers || stats_alloc(&run->global) < 0 || copy_strings(run) < 0)
    return create_error(run, NHB_ENOMEM, err, err_len, NULL);
  for (int i = 0; i < run->nworkers; i++) run->cpus[i] = config->cpus ? config->cpus[i] : -1;
  run->config.cpus = run->cpus;
  if (run->config.burst_size == 0) run->config.burst_size = 1;
  /* Nighthawk's default: at most 100 requests in flight per worker over HTTP/2. */
  if (run->config.max_active_requests == 0) run->config.max_active_requests = 100;
  /* Schedule shapes: owned copies of the arrays. */
  if (config->nstages > 0) {
    run->stage_ns = malloc(config->nstages * sizeof(uint64_t));
    run->stage_rps = malloc(config->nstages * sizeof(double));
    if (!run->stage_ns || !run->stage_rps) return create_error(run, NHB_ENOMEM, err, err_len, NULL);
    memcpy(run->stage_ns, config->stage_ns, config->nstages * sizeof(uint64_t));
    memcpy(run->stage_rps, config->stage_rps, config->nstages * sizeof(double));
    run->config.stage_ns = run->stage_ns;
    run->config.stage_rps = run->stage_rps;
  }
  if (config->nschedule_offsets > 0) {
    run->schedule_offsets_ns = malloc(config->nschedule_offsets * sizeof(uint64_t));
    if (!run->schedule_offsets_ns) return create_error(run, NHB_ENOMEM, err, err_len, NULL);
    memcpy(run->schedule_offsets_ns, config->schedule_offsets_ns, config->nschedule_offsets * sizeof(uint64_t));
    run->config.schedule_offsets_ns = run->schedule_offsets_ns;
  }
  run->has_warmup = config->warmup_ns > 0 || config->warmup_requests > 0;
  if (run->has_warmup && stats_alloc(&run->warm_global) < 0) return create_error(run, NHB_ENOMEM, err, err_len, NULL);
  pthread_mutex_init(&run->lock, NULL);
  pthread_cond_init(&run->finished_cond, NULL);
  run->end_counter = -1;
  for (int i = 0; i < run->nworkers; i++) {
    nhb__worker* w = &run->workers[i];
    w->run = run;
    w->index = i;
    w->cpu = run->cpus[i];
    w->release_fd = -1;
    if (stats_alloc(&w->stats) < 0 || nhb__phases_alloc(w) < 0) return create_error(run, NHB_ENOMEM, err, err_len, NULL);
    /* The warm-up's statistics; without one they stay zero (publish()
     * subtracts its counters) and no histogram is allocated. */
    if (run->has_warmup && stats_alloc(&w->warm) < 0) return create_error(run, NHB_ENOMEM, err, err_len, NULL);
  }
  if (nhb__sequencer_run_init(run) < 0) return create_error(run, NHB_ENOMEM, err, err_len, NULL);
  int ri = nhb__ivl_alloc(run);
  if (ri < 0)
    return create_error(run, ri, err, err_len, ri == NHB_EINVAL ? "stats_interval: must be at least 1 ms" : NULL);
  /* Built once and shared read-only by the workers: the request set (its
   * copies and templates), the TLS context (its settings fail here, with
   * OpenSSL's reason, not in the middle of a run) and the protocol's own
   * (HTTP/2's callbacks and header blocks, say). */
  const nhb__protocol* proto = nhb__protocols[run->config.protocol];
  int r = nhb__request_set_create(run, err, err_len);
  if (r == 0) r = nhb__observe_init(run, err, err_len);
  if (r == 0) r = nhb__chk_run_init(run, err, err_len);
  if (r == 0) r = nhb__grp_run_init(run, err, err_len);
  if (r == 0) r = nhb__str_run_init(run, err, err_len);
  /* The response observers, before the protocol chooses its callbacks. */
  if (r == 0) run->obs = nhb__obs_mask(run);
  if (r == 0) r = nhb__pool_run_init(run, err, err_len);
  if (r == 0) r = nhb__tunnel_run_init(run, err, err_len);
  if (r == 0) r = nhb__udp_tunnel_run_init(run, err, err_len);
  if (r == 0) r = nhb__dns_run_init(run, err, err_len);
  if (r == 0) r = nhb__tls_ctx_create(run, err, err_len);
  if (r == 0 && proto->run_init != NULL) r = proto->run_init(run, err, err_len);
  if (r == 0) r = nhb__trace_run_init(run, err, err_len);
  if (r < 0) return create_error(run, r, err, err_len, NULL);
  *out = run;
  return 0;
}

void nhb__run_wake_workers(nhb_run* run) {
  pthread_mutex_lock(&run->lock);
  for (int i = 0; i < run->nworkers; i++) {
    nhb__worker* w = &run->workers[i];
    if (w->wakeup.data != NULL) uv_async_send(&w->wakeup);
  }
  pthread_mutex_unlock(&run->lock);
}

void nhb__run_kick(nhb_run* run) {
  if (run->ctl_fd < 0 || atomic_exchange(&run->ctl_kicked, 1)) return;
  uint64_t one = 1;
  /* Cannot fail short of a counter overflow, which the controller's read
   * resets long before. */
  (void)!write(run->ctl_fd, &one, sizeof(one));
}

/* Sleeps until the next interval boundary, a kick, or the safety net. */
static void controller_sleep(nhb_run* run) {
  uint64_t now = nhb__now_ns();
  uint64_t wait = CONTROLLER_MAX_SLEEP_NS;
  /* While the workers close an interval they kick as each one has. */
  if (run->config.stats_interval_ns != 0 && !run->ivl_waiting) {
    uint64_t next = run->ivl_next_ns != 0 ? run->ivl_next_ns : run->t0_ns + run->config.stats_interval_ns;
    wait = next <= now ? 0 : next - now < wait ? next - now : wait;
  }
  if (wait > 0) {
    struct pollfd p = {.fd = run->ctl_fd, .events = POLLIN};
    struct timespec ts = {(time_t)(wait / NHB__NS_PER_S), (long)(wait % NHB__NS_PER_S)};
    ppoll(&p, 1, &ts, NULL);
  }
  uint64_t v;
  (void)!read(run->ctl_fd, &v, sizeof(v));
  /* An exchange, not a store: it reads the flag a worker set after its
   * publish, so the sums below see what that worker published. */
  atomic_exchange(&run->ctl_kicked, 0);
}

static void request_stop_all(nhb_run* run) {
  atomic_store(&run->stop_requested, 1);
  pthread_mutex_lock(&run->lock);
  for (int i = 0; i < run->nworkers; i++) {
    nhb__worker* w = &run->workers[i];
    if (w->wakeup.data != NULL) uv_async_send(&w->wakeup);
  }
  pthread_mutex_unlock(&run->lock);
}

/* `counters` below is indexed by counter id: the fixed counters, then the
 * per-status-code ones, then the gRPC ones (NHB_COUNTER_ID_COUNT entries in
 * all). */

/* Returns the index of the first predicate that fires on `counters`, or -1. */
static int first_firing(const nhb_predicate* preds, int n, const uint64_t* counters) {
  for (int i = 0; i < n; i++)
    if (counters[preds[i].counter] > preds[i].threshold) return i;
  return -1;
}

static void evaluate_predicates(nhb_run* run, const uint64_t* counters) {
  const nhb_client_config* cfg = &run->config;
  for (int i = 0; i < cfg->n_failure; i++)
    if (counters[cfg->failure[i].counter] > cfg->failure[i].threshold) {
      run->failed_predicates |= 1ULL << i;
      if (run->end_reason == NHB_END_NONE) {
        run->end_reason = NHB_END_FAILURE_PREDICATE;
        run->end_counter = cfg->failure[i].counter;
      }
    }
  int t = first_firing(cfg->termination, cfg->n_termination, counters);
  if (t >= 0 && run->end_reason == NHB_END_NONE) {
    run->end_reason = NHB_END_TERMINATION_PREDICATE;
    run->end_counter = cfg->termination[t].counter;
  }
}

/* A warm-up's statistics apart from the measured phase's: each worker's
 * counters lose what its warm-up counted, and the warm-ups are merged into
 * run->warm_global. */
static void merge_warmup(nhb_run* run) {
  nhb_stats* g = &run->warm_global;
  uint64_t duration_sum = 0, first_start = UINT64_MAX;
  for (int i = 0; i < run->nworkers; i++) {
    nhb__worker* w = &run->workers[i];
    nhb_stats* st = &w->stats;
    nhb_stats* wm = &w->warm;
    /* Stopped during its warm-up: everything it did was warm-up. */
    nhb__sequencer_end_warmup(w);
    for (int c = 0; c < NHB_CTR_COUNT; c++) {
      st->counters[c] -= wm->counters[c];
      g->counters[c] += wm->counters[c];
    }
    for (int c = 0; c < NHB_STATUS_COUNT; c++) {
      st->status_codes[c] -= wm->status_codes[c];
      g->status_codes[c] += wm->status_codes[c];
    }
    for (int c = 0; c < NHB_GRPC_STATUS_COUNT; c++) {
      st->grpc_status[c] -= wm->grpc_status[c];
      g->grpc_status[c] += wm->grpc_status[c];
    }
    for (int c = 0; c < NHB_MAX_CHECKS; c++) {
      st->check_pass[c] -= wm->check_pass[c];
      g->check_pass[c] += wm->check_pass[c];
      st->check_fail[c] -= wm->check_fail[c];
      g->check_fail[c] += wm->check_fail[c];
    }
    for (int h = 0; h < NHB_HIST_COUNT; h++)
      if (wm->hists[h] != NULL && st->hists[h] != NULL) nhb_hist_add(g->hists[h], wm->hists[h]);
    for (int s = 0; s < NHB_STREAM_COUNT; s++) nhb_stream_add(&g->streams[s], &wm->streams[s]);
    duration_sum += wm->execution_duration_ns;
    if (wm->execution_start_ns < first_start) first_start = wm->execution_start_ns;
  }
  g->execution_duration_ns = duration_sum / (uint64_t)run->nworkers;
  g->execution_start_ns = first_start;
  /* What the measured phase does not keep, the warm-up does not report. */
  for (int h = 0; h < NHB_HIST_COUNT; h++)
    if (run->global.hists[h] == NULL) {
      free(g->hists[h]);
      g->hists[h] = NULL;
    }
}

static void merge(nhb_run* run) {
  nhb_stats* g = &run->global;
  uint64_t duration_sum = 0;
  for (int i = 0; i < run->nworkers; i++) nhb__chk_fold(&run->workers[i].stats, run->chk.n);
  if (run->has_warmup) merge_warmup(run);
  for (int i = 0; i < run->nworkers; i++) {
    run->workers[i].facts.released = run->workers[i].released;
    nhb_stats* st = &run->workers[i].stats;
    for (int c = 0; c < NHB_CTR_COUNT; c++) g->counters[c] += st->counters[c];
    for (int c = 0; c < NHB_STATUS_COUNT; c++) g->status_codes[c] += st->status_codes[c];
    for (int c = 0; c < NHB_GRPC_STATUS_COUNT; c++) g->grpc_status[c] += st->grpc_status[c];
    for (int c = 0; c < NHB_MAX_CHECKS; c++) {
      g->check_pass[c] += st->check_pass[c];
      g->check_fail[c] += st->check_fail[c];
    }
    for (int h = 0; h < NHB_HIST_COUNT; h++)
      if (g->hists[h] != NULL) nhb_hist_add(g->hists[h], st->hists[h]);
    for (int s = 0; s < NHB_STREAM_COUNT; s++) nhb_stream_add(&g->streams[s], &st->streams[s]);
    duration_sum += st->execution_duration_ns;
  }
  nhb__pool_endpoints_merge(run);
  nhb__grp_merge(run);
  /* As in Nighthawk, the global execution duration is the workers' mean. */
  g->execution_duration_ns = duration_sum / (uint64_t)run->nworkers;
  g->execution_start_ns = run->t0_realtime_ns;
  if (run->has_warmup) {
    /* The measured phase began when the first worker's warm-up ended. */
    g->execution_start_ns = UINT64_MAX;
    for (int i = 0; i < run->nworkers; i++)
      if (run->workers[i].stats.execution_start_ns < g->execution_start_ns)
        g->execution_start_ns = run->workers[i].stats.execution_start_ns;
  }
  for (int i = 0; i < run->nworkers && run->first_error[0] == '\0'; i++) {
    const nhb__worker* w = &run->workers[i];
    int e = w->first_error;
    if (e < 0 && w->first_error_text[0] != '\0') {
      snprintf(run->first_error, sizeof(run->first_error), "%s", w->first_error_text);
    } else if (e < 0) {
      snprintf(run->first_error, sizeof(run->first_error), "%s (%s)", nhb_strerror(e), nhb_err_name(e));
    }
  }
}

static void* controller_main(void* arg) {
  nhb_run* run = (nhb_run*)arg;
  pthread_setname_np(pthread_self(), "nhb-controller");
  uint64_t sums[NHB_COUNTER_ID_COUNT];
  for (;;) {
    controller_sleep(run);
    int all_done = 1;
    memset(sums, 0, sizeof(sums));
    for (int i = 0; i < run->nworkers; i++) {
      nhb__worker* w = &run->workers[i];
      if (!atomic_load(&w->done)) all_done = 0;
      for (int c = 0; c < NHB_CTR_COUNT; c++)
        sums[c] += atomic_load_explicit(&w->published[c], memory_order_relaxed);
      if (run->watch_status) {
        for (int c = 0; c < NHB_STATUS_COUNT + NHB_GRPC_STATUS_COUNT; c++)
          sums[NHB_CTR_COUNT + c] += atomic_load_explicit(&w->published_status[c], memory_order_relaxed);
        for (int c = 0; c < 2 * NHB_MAX_CHECKS; c++)
          sums[NHB_CHECK_PASS_ID + c] += atomic_load_explicit(&w->published_checks[c], memory_order_relaxed);
      }
    }
    if (all_done) break;
    nhb__ivl_controller_tick(run, nhb__now_ns());
    /* During a warm-up the termination predicates wait for the measured
     * phase, and with allow_initial_errors so do the failure ones. */
    if (NHB__UNLIKELY(atomic_load(&run->warming) > 0)) {
      if (run->config.allow_initial_errors) continue;
      pthread_mutex_lock(&run->lock);
      nhb_end_reason_t was = run->end_reason;
      int n_term = run->config.n_termination;
      run->config.n_termination = 0;
      evaluate_predicates(run, sums);
      run->config.n_termination = n_term;
      int failed = was == NHB_END_NONE && run->end_reason != NHB_END_NONE;
      pthread_mutex_unlock(&run->lock);
      if (failed) request_stop_all(run);
      continue;
    }
    pthread_mutex_lock(&run->lock);
    nhb_end_reason_t before = run->end_reason;
    evaluate_predicates(run, sums);
    int fired = before == NHB_END_NONE && run->end_reason != NHB_END_NONE;
    pthread_mutex_unlock(&run->lock);
    if (fired) request_stop_all(run);
  }
  for (int i = 0; i < run->nworkers; i++) pthread_join(run->workers[i].thread, NULL);
  merge(run);
  nhb__ivl_controller_finish(run);
  pthread_mutex_lock(&run->lock);
  /* Failure predicates are judged once more on the exact final counts. */
  memcpy(sums, run->global.counters, sizeof(run->global.counters));
  memcpy(sums + NHB_CTR_COUNT, run->global.status_codes, sizeof(run->global.status_codes));
  memcpy(sums + NHB_GRPC_STATUS_ID, run->global.grpc_status, sizeof(run->global.grpc_status));
  memcpy(sums + NHB_CHECK_PASS_ID, run->global.check_pass, sizeof(run->global.check_pass));
  memcpy(sums + NHB_CHECK_FAIL_ID, run->global.check_fail, sizeof(run->global.check_fail));
  evaluate_predicates(run, sums);
  if (run->end_reason == NHB_END_NONE)
    run->end_reason = atomic_load(&run->stop_requested) ? NHB_END_STOP : NHB_END_DURATION;
  run->finished = 1;
  pthread_cond_broadcast(&run->finished_cond);
  pthread_mutex_unlock(&run->lock);
  {
    uint64_t one = 1;
    (void)!write(run->finished_fd, &one, sizeof(one));
  }
  return NULL;
}

int nhb_run_start(nhb_run* run) {
  if (run->started) return NHB_ESTATE;
  const nhb_client_config* cfg = &run->config;
  uint64_t now = nhb__now_ns();
  run->start_call_ns = now;
  run->t0_ns = now + cfg->start_delay_ns;
  run->t0_realtime_ns = nhb__realtime_ns() + cfg->start_delay_ns;
  if (cfg->start_realtime_ns > 0) {
    /* --scheduled-start: the wall-clock instant, reached on the monotonic
     * clock (a start already past begins at once). */
    uint64_t rt = nhb__realtime_ns();
    uint64_t delay = cfg->start_realtime_ns > rt ? cfg->start_realtime_ns - rt : 0;
    run->t0_ns = now + delay;
    run->t0_realtime_ns = rt + delay;
  }
  atomic_store(&run->warming, run->has_warmup ? run->nworkers : 0);
  double interval = cfg->rps > 0 ? 1e9 / cfg->rps : 0;
  /* A tiny rate (1e-300) would make the interval infinite and the schedule's
   * arithmetic NaN. Thirty years between releases is the same thing for any
   * run that can happen, and stays finite. */
  if (interval > 1e18) interval = 1e18;
  for (int i = 0; i < run->nworkers; i++) {
    nhb__worker* w = &run->workers[i];
    int r = uv_loop_init(&w->loop);
    if (r == 0) r = uv_async_init(&w->loop, &w->wakeup, on_wakeup);
    if (r == 0) r = uv_timer_init(&w->loop, &w->housekeeping);
    if (r < 0) return r; /* nothing runs yet; destroy() cleans up */
    w->wakeup.data = w;
    w->housekeeping.data = w;
    w->load_wait_ns = -1;
    w->interval_ns = interval;
    /* Workers' schedules are phase-offset so that their releases interleave
     * instead of arriving at the target in lock-step. */
    w->phase_offset_ns = (uint64_t)llround(interval * i / run->nworkers);
    /* Stages interleave by count and an explicit schedule is the same for
     * every worker: neither is phase-offset. */
    if (run->stages != NULL || run->schedule_offsets_ns != NULL) w->phase_offset_ns = 0;
    /* Independent Poisson processes that start together add up to one at
     * the sum of their rates; a stagger would thin the first interval. */
    if (run->config.arrival_poisson) w->phase_offset_ns = 0;
    w->start_ns = run->t0_ns + w->phase_offset_ns;
    w->stats.execution_start_ns = run->t0_realtime_ns + (w->start_ns - run->t0_ns);
    nhb__sequencer_worker_start(w); /* end_ns, the count, jitter, warm-up */
  }
  run->ctl_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (run->ctl_fd < 0) return NHB_ETHREAD;
  run->finished_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (run->finished_fd < 0) return NHB_ETHREAD;
  run->started = 1;
  for (int i = 0; i < run->nworkers; i++) {
    if (pthread_create(&run->workers[i].thread, NULL, worker_main, &run->workers[i]) != 0) {
      /* Stop the ones already running; the controller still joins them. */
      for (int j = i; j < run->nworkers; j++) atomic_store(&run->workers[j].done, 1);
      run->nworkers = i;
      atomic_store(&run->stop_requested, 1);
      run->end_reason = NHB_END_ERROR;
      snprintf(run->first_error, sizeof(run->first_error), "%s", nhb_strerror(NHB_ETHREAD));
      break;
    }
  }
  if (run->end_reason == NHB_END_ERROR) request_stop_all(run);
  if (pthread_create(&run->controller, NULL, controller_main, run) != 0) return NHB_ETHREAD;
  return 0;
}

int nhb_run_wait(nhb_run* run, double timeout_s) {
  if (!run->started) return NHB_ESTATE;
  pthread_mutex_lock(&run->lock);
  if (timeout_s < 0) {
    while (!run->finished) pthread_cond_wait(&run->finished_cond, &run->lock);
  } else if (!run->finished) {
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    uint64_t ns = (uint64_t)(timeout_s * 1e9);
    deadline.tv_sec += (time_t)(ns / NHB__NS_PER_S);
    deadline.tv_nsec += (long)(ns % NHB__NS_PER_S);
    if (deadline.tv_nsec >= (long)NHB__NS_PER_S) {
      deadline.tv_sec++;
      deadline.tv_nsec -= (long)NHB__NS_PER_S;
    }
    while (!run->finished) {
      if (pthread_cond_timedwait(&run->finished_cond, &run->lock, &deadline) == ETIMEDOUT) break;
    }
  }
  int finished = run->finished;
  pthread_mutex_unlock(&run->lock);
  return finished;
}

int nhb_run_wait_fd(nhb_run* run, double timeout_s, int wake_fd) {
  if (!run->started) return NHB_ESTATE;
  if (wake_fd < 0) return nhb_run_wait(run, timeout_s);
  /* The finished eventfd stays readable once written: poll() returns at once
   * for every later wait. */
  struct pollfd p[2] = {{.fd = run->finished_fd, .events = POLLIN}, {.fd = wake_fd, .events = POLLIN}};
  int ms = timeout_s < 0 ? -1 : timeout_s > 2e6 ? 2000000000 : (int)(timeout_s * 1000.0);
  /* EINTR too returns: a signal arrived, whose handler the caller runs. */
  (void)poll(p, 2, ms);
  return nhb_run_wait(run, 0.0);
}

void nhb_run_stop(nhb_run* run) {
  if (!run->started) return;
  request_stop_all(run);
}

void nhb_run_progress(nhb_run* run, uint64_t counters[NHB_CTR_COUNT], double* elapsed_s) {
  memset(counters, 0, sizeof(uint64_t) * NHB_CTR_COUNT);
  for (int i = 0; i < run->nworkers; i++)
    for (int c = 0; c < NHB_CTR_COUNT; c++)
      counters[c] += atomic_load_explicit(&run->workers[i].published[c], memory_order_relaxed);
  uint64_t now = nhb__now_ns();
  *elapsed_s = run->started && now > run->t0_ns ? (double)(now - run->t0_ns) / 1e9 : 0.0;
}

void nhb_run_check_progress(nhb_run* run, uint64_t pass[NHB_MAX_CHECKS], uint64_t fail[NHB_MAX_CHECKS]) {
  memset(pass, 0, sizeof(uint64_t) * NHB_MAX_CHECKS);
  memset(fail, 0, sizeof(uint64_t) * NHB_MAX_CHECKS);
  for (int i = 0; i < run->nworkers; i++)
    for (uint32_t c = 0; c < run->chk.n; c++) {
      pass[c] += atomic_load_explicit(&run->workers[i].published_checks[c], memory_order_relaxed);
      fail[c] += atomic_load_explicit(&run->workers[i].published_checks[NHB_MAX_CHECKS + c], memory_order_relaxed);
    }
}

int nhb_run_worker_count(const nhb_run* run) { return run->nworkers; }

const nhb_stats* nhb_run_worker_stats(const nhb_run* run, int index) {
  if (!run->finished || index < 0 || index >= run->nworkers) return NULL;
  return &run->workers[index].stats;
}

const nhb_stats* nhb_run_global_stats(const nhb_run* run) { return run->finished ? &run->global : NULL; }
nhb_end_reason_t nhb_run_end_reason(const nhb_run* run) { return run->end_reason; }
int nhb_run_end_counter(const nhb_run* run) { return run->end_counter; }
uint64_t nhb_run_failed_predicates(const nhb_run* run) { return run->failed_predicates; }
const char* nhb_run_first_error(const nhb_run* run) { return run->first_error; }

int nhb_run_schedule_facts(const nhb_run* run, int index, nhb_schedule_facts* out) {
  if (!run->finished) return NHB_ESTATE;
  if (index < -1 || index >= run->nworkers) return NHB_EINVAL;
  memset(out, 0, sizeof(*out));
  for (int i = 0; i < run->nworkers; i++) {
    if (index >= 0 && i != index) continue;
    const nhb_schedule_facts* f = &run->workers[i].facts;
    out->released += f->released;
    out->no_catchup_moves += f->no_catchup_moves;
    out->no_catchup_shift_ns += f->no_catchup_shift_ns;
    out->no_catchup_lost += f->no_catchup_lost;
    out->warmup_released += f->warmup_released;
  }
  return 0;
}

int nhb_run_worker_load(const nhb_run* run, int index, nhb_worker_load* out) {
  if (!run->finished) return NHB_ESTATE;
  if (index < 0 || index >= run->nworkers) return NHB_EINVAL;
  const nhb__worker* w = &run->workers[index];
  out->cpu_ns = w->load_cpu_ns;
  out->wall_ns = w->load_wall_ns;
  out->wait_ns = w->load_wait_ns;
  out->hiccup = w->hiccup;
  return 0;
}

const nhb_stats* nhb_run_warmup_stats(const nhb_run* run) {
  return run->finished && run->has_warmup ? &run->warm_global : NULL;
}

int nhb_run_stage_counts(const nhb_run* run, uint32_t stage, uint64_t* releases, uint64_t* responses) {
  if (!run->finished) return NHB_ESTATE;
  if (stage >= run->config.nstages) return NHB_EINVAL;
  *releases = *responses = 0;
  for (int i = 0; i < run->nworkers; i++) {
    *releases += run->workers[i].stage_releases[stage];
    *responses += run->workers[i].stage_responses[stage];
  }
  return 0;
}

int nhb_run_arrivals(const nhb_run* run, int worker, const uint64_t** times, uint64_t* count) {
  if (!run->finished) return NHB_ESTATE;
  if (worker < 0 || worker >= run->nworkers) return NHB_EINVAL;
  *times = run->workers[worker].arr_log;
  *count = run->workers[worker].arr_log_len;
  return 0;
}

void nhb_run_destroy(nhb_run* run) {
  if (!run) return;
  if (run->started) {
    nhb_run_stop(run);
    nhb_run_wait(run, -1);
    pthread_join(run->controller, NULL);
  }
  if (run->workers) {
    for (int i = 0; i < run->config.nworkers; i++) {
      stats_free(&run->workers[i].stats);
      stats_free(&run->workers[i].warm);
      free(run->workers[i].hiccup);
      nhb__phases_free(&run->workers[i]);
      free(run->workers[i].stage_releases);
      free(run->workers[i].stage_responses);
      free(run->workers[i].arr_log);
    }
  }
  stats_free(&run->global);
  stats_free(&run->warm_global);
  free(run->stage_ns);
  free(run->stage_rps);
  free(run->schedule_offsets_ns);
  free(run->stages);
  nhb__ivl_free(run);
  nhb__tls_ctx_free(run);
  /* The run exists only with a protocol check_config accepted. */
  const nhb__protocol* proto = nhb__protocols[run->config.protocol];
  if (proto->run_free != NULL) proto->run_free(run);
  nhb__request_set_free(run);
  nhb__pool_run_free(run);
  nhb__tunnel_run_free(run);
  nhb__udp_tunnel_run_free(run);
  nhb__trace_run_free(run);
  nhb__chk_set_free(&run->chk);
  nhb__grp_run_free(run);
  free(run->strings);
  free(run->dns_host);
  free(run->workers);
  free(run->cpus);
  if (run->ctl_fd >= 0) close(run->ctl_fd);
  if (run->finished_fd >= 0) close(run->finished_fd);
  pthread_mutex_destroy(&run->lock);
  pthread_cond_destroy(&run->finished_cond);
  free(run);
}
