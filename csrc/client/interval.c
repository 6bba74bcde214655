/* interval.c: live statistics, one interval at a time, without a lock on the
 * hot path (docs/live.md).
 *
 * Every worker owns two interval buffers (a histogram of the CO-corrected
 * latency plus a copy of its counters) and records into the one of its
 * current epoch, ivl[epoch & 1], with plain stores: the hot path sees only
 * the pointer w->ivl_hist (nhb__ivl_record in client.h). The controller
 * thread decides when an interval ends and collects it:
 *
 *   1. At a boundary the controller increments run->ivl_epoch from E to E+1
 *      (release) and wakes every worker's loop (uv_async_send).
 *   2. A worker that sees the new epoch (acquire; in on_wakeup, and in its
 *      10 ms housekeeping in case a wake-up was coalesced) stamps its buffer
 *      ivl[E & 1] with the time and its counters, switches ivl_hist to
 *      ivl[(E+1) & 1], publishes w->ivl_closed = E+1 (release) and kicks
 *      the controller.
 *   3. Once every worker has published E+1, or has finished, the controller
 *      merges the buffers ivl[E & 1], resets them, and queues the interval.
 *      Only then may it increment the epoch again (step 1).
 *
 * Why no lock is needed: a buffer has one writer at a time, and the hand-over
 * goes through one release/acquire pair each way. The worker's writes into
 * ivl[E & 1] (the histogram counts, the stamp) happen before its release
 * store of ivl_closed = E+1; the controller reads the buffer only after an
 * acquire load returned that value (or after the acquire load of w->done,
 * which the worker stores after its last close), so it sees all of them. In
 * the other direction the controller resets ivl[E & 1] before its release
 * store of epoch E+2, and the worker writes into ivl[E & 1] again only after
 * an acquire load returned E+2, so the reset is complete before the worker's
 * first new record. Because the controller never increments the epoch while
 * the previous interval is uncollected, the buffer a worker switches to is
 * always one the controller has finished with. A worker that is slow to
 * acknowledge (a long callback) delays the next boundary rather than losing
 * or double-counting a sample; each interval carries its measured duration.
 *
 * Every response recorded in stats' scheduled_to_response is recorded in the
 * interval buffer too, and every buffer is collected exactly once (the last,
 * partial one by nhb__ivl_controller_finish after the workers are joined), so
 * the intervals' totals add up to the run's total exactly.
 */
#include <stdlib.h>
#include <string.h>

#include "client/client.h"

int nhb__ivl_alloc(nhb_run* run) {
  if (run->config.stats_interval_ns == 0) return 0;
  /* Below a millisecond an interval would hold a handful of samples and the
   * controller's wake-ups would be most of what the run does. */
  if (run->config.stats_interval_ns < NHB__NS_PER_MS) return NHB_EINVAL;
  run->ivl_merge = malloc(sizeof(nhb_hist));
  run->ivl_last = calloc((size_t)run->nworkers * NHB_COUNTER_ID_COUNT, sizeof(uint64_t));
  if (run->ivl_merge == NULL || run->ivl_last == NULL) return NHB_ENOMEM;
  nhb_hist_init(run->ivl_merge);
  for (int i = 0; i < run->nworkers; i++) {
    nhb__worker* w = &run->workers[i];
    for (int b = 0; b < 2; b++) {
      w->ivl[b].hist = malloc(sizeof(nhb_hist));
      if (w->ivl[b].hist == NULL) return NHB_ENOMEM;
      nhb_hist_init(w->ivl[b].hist);
    }
    w->ivl_hist = w->ivl[0].hist;
  }
  return 0;
}

void nhb__ivl_free(nhb_run* run) {
  if (run->workers != NULL) {
    for (int i = 0; i < run->config.nworkers; i++)
      for (int b = 0; b < 2; b++) free(run->workers[i].ivl[b].hist);
  }
  for (size_t i = 0; i < run->ivl_len; i++) nhb_interval_free(&run->ivl_queue[i]);
  free(run->ivl_queue);
  free(run->ivl_merge);
  free(run->ivl_last);
}

static void worker_close_current(nhb__worker* w) {
  nhb__ivl_buf* b = &w->ivl[w->ivl_epoch & 1];
  b->end_ns = nhb__now_ns();
  memcpy(b->counters, w->stats.counters, sizeof(w->stats.counters));
  memcpy(b->counters + NHB_CTR_COUNT, w->stats.status_codes, sizeof(w->stats.status_codes));
  memcpy(b->counters + NHB_GRPC_STATUS_ID, w->stats.grpc_status, sizeof(w->stats.grpc_status));
  nhb__chk_fold(&w->stats, w->run->chk.n);
  memcpy(b->counters + NHB_CHECK_PASS_ID, w->stats.check_pass, sizeof(w->stats.check_pass));
  memcpy(b->counters + NHB_CHECK_FAIL_ID, w->stats.check_fail, sizeof(w->stats.check_fail));
}

void nhb__ivl_worker_poll(nhb__worker* w) {
  if (w->ivl_hist == NULL) return;
  uint64_t e = atomic_load_explicit(&w->run->ivl_epoch, memory_order_acquire);
  if (e == w->ivl_epoch) return;
  /* The controller moves one epoch at a time and waits for every worker
   * before the next, so e is w->ivl_epoch + 1. */
  worker_close_current(w);
  w->ivl_epoch = e;
  w->ivl_hist = w->ivl[e & 1].hist;
  atomic_store_explicit(&w->ivl_closed, e, memory_order_release);
  nhb__run_kick(w->run);
}

void nhb__ivl_worker_close(nhb__worker* w) {
  /* Called after the loop has ended, before w->done is stored: the buffer of
   * the current epoch is final and the controller takes it once it sees done. */
  if (w->ivl_hist != NULL) worker_close_current(w);
}

/* Adds worker w's buffer for epoch `e` to the interval being merged. */
static void take_buffer(nhb_run* run, nhb__worker* w, uint64_t e, uint64_t* counters, uint64_t* end_ns) {
  nhb__ivl_buf* b = &w->ivl[e & 1];
  uint64_t* last = &run->ivl_last[(size_t)w->index * NHB_COUNTER_ID_COUNT];
  nhb_hist_add(run->ivl_merge, b->hist);
  if (b->end_ns != 0) {
    for (int c = 0; c < NHB_COUNTER_ID_COUNT; c++) {
      counters[c] += b->counters[c] - last[c];
      last[c] = b->counters[c];
    }
    if (b->end_ns > *end_ns) *end_ns = b->end_ns;
  }
  if (b->hist->total != 0) nhb_hist_init(b->hist);
  b->end_ns = 0;
}

/* Queues the merged interval; run->ivl_merge is reset for the next one. */
static void queue_interval(nhb_run* run, const uint64_t* counters, uint64_t end_ns, int warmup) {
  nhb_interval iv;
  memset(&iv, 0, sizeof(iv));
  iv.warmup = warmup;
  const nhb_hist* h = run->ivl_merge;
  iv.start_ns = (int64_t)(run->ivl_start_ns - run->t0_ns);
  iv.duration_ns = end_ns > run->ivl_start_ns ? end_ns - run->ivl_start_ns : 0;
  memcpy(iv.counters, counters, sizeof(iv.counters));
  size_t ncodes = 0;
  for (int c = NHB_CTR_COUNT; c < NHB_COUNTER_ID_COUNT; c++) ncodes += counters[c] != 0;
  iv.total = h->total;
  iv.min = h->total ? h->min : 0;
  iv.max = h->max;
  iv.sum = h->sum;
  size_t n = 0;
  if (h->total != 0)
    for (size_t i = 0; i < NHB_HIST_COUNTS_LEN; i++) n += h->counts[i] != 0;
  /* Allocation here is per interval on the controller thread, never per
   * request; an interval that cannot be stored is dropped whole rather than
   * reported wrong. */
  iv.buckets = n ? malloc(n * sizeof(nhb_interval_bucket)) : NULL;
  iv.codes = ncodes ? malloc(ncodes * sizeof(nhb_interval_bucket)) : NULL;
  if ((n == 0 || iv.buckets != NULL) && (ncodes == 0 || iv.codes != NULL)) {
    for (int c = NHB_CTR_COUNT; c < NHB_COUNTER_ID_COUNT; c++)
      if (counters[c] != 0) iv.codes[iv.ncodes++] = (nhb_interval_bucket){(uint32_t)c, counters[c]};
    for (size_t i = 0; i < NHB_HIST_COUNTS_LEN && iv.nbuckets < n; i++)
      if (h->counts[i] != 0) iv.buckets[iv.nbuckets++] = (nhb_interval_bucket){(uint32_t)i, h->counts[i]};
    pthread_mutex_lock(&run->lock);
    iv.index = run->ivl_count++;
    if (run->ivl_len == run->ivl_cap) {
      size_t cap = run->ivl_cap ? run->ivl_cap * 2 : 16;
      nhb_interval* q = realloc(run->ivl_queue, cap * sizeof(*q));
      if (q != NULL) {
        run->ivl_queue = q;
        run->ivl_cap = cap;
      }
    }
    if (run->ivl_len < run->ivl_cap) {
      run->ivl_queue[run->ivl_len++] = iv;
      iv.buckets = NULL;
      iv.codes = NULL;
    }
    pthread_mutex_unlock(&run->lock);
  }
  free(iv.buckets);
  free(iv.codes);
  if (h->total != 0) nhb_hist_init(run->ivl_merge);
  run->ivl_start_ns = end_ns > run->ivl_start_ns ? end_ns : run->ivl_start_ns;
}

/* Collects epoch `e` if every worker has closed it or finished; returns 1
 * when it did. `final`: every worker has been joined. */
static int collect(nhb_run* run, uint64_t e, int final) {
  for (int i = 0; i < run->nworkers && !final; i++) {
    nhb__worker* w = &run->workers[i];
    if (!atomic_load_explicit(&w->done, memory_order_acquire) &&
        atomic_load_explicit(&w->ivl_closed, memory_order_acquire) <= e)
      return 0;
  }
  uint64_t counters[NHB_COUNTER_ID_COUNT];
  memset(counters, 0, sizeof(counters));
  uint64_t end_ns = 0;
  for (int i = 0; i < run->nworkers; i++) {
    nhb__worker* w = &run->workers[i];
    /* done is loaded first: once it is seen, ivl_closed and ivl_epoch are
     * final. A worker that finished in an earlier epoch has nothing left. */
    int done = atomic_load_explicit(&w->done, memory_order_acquire);
    uint64_t closed = atomic_load_explicit(&w->ivl_closed, memory_order_acquire);
    if (closed > e || (done && w->ivl_epoch == e)) take_buffer(run, w, e, counters, &end_ns);
  }
  if (end_ns == 0) end_ns = final ? nhb__now_ns() : run->ivl_bump_ns;
  queue_interval(run, counters, end_ns, run->ivl_warm[e & 1]);
  return 1;
}

void nhb__ivl_controller_tick(nhb_run* run, uint64_t now) {
  if (run->config.stats_interval_ns == 0) return;
  uint64_t e = atomic_load_explicit(&run->ivl_epoch, memory_order_relaxed);
  if (run->ivl_waiting) {
    if (!collect(run, e - 1, 0)) return;
    run->ivl_waiting = 0;
  }
  if (run->ivl_start_ns == 0) {
    run->ivl_start_ns = run->t0_ns;
    run->ivl_next_ns = run->t0_ns + run->config.stats_interval_ns;
    run->ivl_warm[e & 1] = atomic_load(&run->warming) > 0;
  }
  if (now < run->ivl_next_ns) return;
  /* Boundaries stay on the grid t0 + k * interval; one missed (a slow
   * worker) is skipped rather than made up with short intervals. */
  while (run->ivl_next_ns <= now) run->ivl_next_ns += run->config.stats_interval_ns;
  run->ivl_bump_ns = now;
  /* Read before the bump: the workers close epoch e, and start e + 1, after it. */
  run->ivl_warm[(e + 1) & 1] = atomic_load(&run->warming) > 0;
  atomic_store_explicit(&run->ivl_epoch, e + 1, memory_order_release);
  run->ivl_waiting = 1;
  nhb__run_wake_workers(run);
}

void nhb__ivl_controller_finish(nhb_run* run) {
  if (run->config.stats_interval_ns == 0) return;
  uint64_t e = atomic_load_explicit(&run->ivl_epoch, memory_order_relaxed);
  if (run->ivl_start_ns == 0) {
    run->ivl_start_ns = run->t0_ns;
    run->ivl_warm[e & 1] = run->has_warmup;
  }
  if (run->ivl_waiting) collect(run, e - 1, 1);
  run->ivl_waiting = 0;
  collect(run, e, 1);
}

int nhb_run_take_intervals(nhb_run* run, nhb_interval* out, int max) {
  if (max <= 0) return 0;
  pthread_mutex_lock(&run->lock);
  size_t n = run->ivl_len < (size_t)max ? run->ivl_len : (size_t)max;
  /* The queue is NULL until the first interval closes; memcpy must not see it. */
  if (n > 0) {
    memcpy(out, run->ivl_queue, n * sizeof(*out));
    memmove(run->ivl_queue, run->ivl_queue + n, (run->ivl_len - n) * sizeof(*out));
    run->ivl_len -= n;
  }
  pthread_mutex_unlock(&run->lock);
  return (int)n;
}

void nhb_interval_free(nhb_interval* iv) {
  free(iv->buckets);
  iv->buckets = NULL;
  iv->nbuckets = 0;
  free(iv->codes);
  iv->codes = NULL;
  iv->ncodes = 0;
}
