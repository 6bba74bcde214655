/* sequencer.c: releases requests on a precise schedule.
 *
 * Release k of a worker is due at start + floor(k / burst) * burst * interval,
 * always computed from the start time, so that lateness never accumulates as
 * drift. Each release records its lateness (actual - scheduled).
 *
 * libuv's timers have millisecond granularity, which is far too coarse at
 * thousands of requests per second, so the wake-up for the next release is one
 * of three idle strategies (Nighthawk's names):
 *   poll:  a timerfd armed at the absolute deadline and watched by the loop;
 *          precise to tens of microseconds and costs nothing while idle;
 *          programmed by arm() when the next release's time moves.
 *   spin:  a uv_idle handle keeps the loop polling without sleeping; the most
 *          precise and burns a whole CPU.
 *   sleep: a libuv millisecond timer; the cheapest and up to ~1 ms late.
 *
 * When a due release finds no capacity, a closed-loop sequencer blocks until a
 * connection frees up (the wait goes to sequencer.blocking, and the requests
 * keep their scheduled times, so the scheduled-time latency includes it); an
 * open-loop sequencer drops the release and counts it in benchmark.pool_overflow.
 *
 * Schedule shapes (docs/engine.md "Shaping the schedule"): linear
 * stages (release k is due where the integral of the rate reaches k), an
 * explicit list of offsets (replay), jitter (a per-worker splitmix64, no
 * system call), --no-catchup (a late release moves the schedule), an exact
 * release count (a per-phase quota) and a warm-up phase before the measured
 * one. A run that uses none of them pays a predictable branch or two per
 * release: base_time() tests one pointer, the jitter one word.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"

static void begin_stop_at(nhb__worker* w, uint64_t t);

/* llround() of a time offset x >= 0 without the library call (a tenth of
 * a fixed-rate release's schedule arithmetic). For 0.5 <= x < 2^52 the sum
 * x + 0.5 is exact or rounds only where it must: x's spacing is at most
 * 0.5 there and a multiple of it, so x + 0.5 stays in x's binade, or the
 * next one only when x's fraction is at least 0.5 already, and truncating
 * it is rounding half away from zero, as llround() does. Smaller offsets
 * (x + 0.5 could round up across a binade) and larger ones (whole numbers,
 * where adding 0.5 makes a tie) take llround() itself. */
static inline uint64_t round_ns(double x) {
  if (NHB__LIKELY(x >= 0.5 && x < 0x1p52)) return (uint64_t)(x + 0.5);
  return (uint64_t)llround(x);
}

/* The due time of the first release of burst group g. nhb_run_create_ex()
 * bounds the rate (NHB_MAX_RPS), so the interval is at least 1 us and g stays
 * far below 2^53 for any run that fits in a uint64_t of nanoseconds; the
 * saturation only guards against arithmetic that could not be represented. */
static uint64_t group_time(const nhb__worker* w, uint64_t g) {
  double offset = (double)g * (double)w->run->config.burst_size * w->interval_ns;
  if (NHB__UNLIKELY(offset >= (double)(UINT64_MAX - w->sched_base_ns) - 1e6)) return UINT64_MAX;
  return w->sched_base_ns + round_ns(offset);
}

/* Stages: release k of this worker is due where the integral of the rate
 * reaches k + count_offset (the offset interleaves the workers, as the phase
 * offset does for a constant rate). Within a stage the rate is a + s*x, so
 * the count after x ns is a*x + s*x^2/2; x = 2m / (a + sqrt(a^2 + 2*s*m))
 * solves it for m releases without cancellation, whatever the sign of s and
 * also for s == 0. Beyond the last stage nothing is due (UINT64_MAX). */
static uint64_t stage_time_at(nhb__worker* w, double count) {
  const nhb__stage* st = w->run->stages;
  uint32_t n = w->run->config.nstages;
  uint32_t j = w->stage_hint;
  while (j > 0 && st[j].count_start > count) j--;
  while (j + 1 < n && st[j + 1].count_start <= count) j++;
  w->stage_hint = j;
  const nhb__stage* s = &st[j];
  double d = (double)s->duration_ns;
  double m = count - s->count_start;
  if (j + 1 == n && m >= (s->a + s->b) * d / 2) return UINT64_MAX;
  double slope = (s->b - s->a) / d;
  double disc = s->a * s->a + 2 * slope * m;
  double denom = s->a + sqrt(disc > 0 ? disc : 0);
  double x = denom > 0 ? 2 * m / denom : 0;
  if (x > d) x = d;
  return w->start_ns + s->start_ns + round_ns(x);
}

static inline uint64_t stage_time(nhb__worker* w, uint64_t k) {
  return stage_time_at(w, (double)k + w->count_offset);
}

/* A uniform double in [0, 1). */
static double next_unit(uint64_t* state) { return (double)(nhb__splitmix64(state) >> 11) * 0x1.0p-53; }

/* Poisson arrivals by time rescaling: the cumulative rate (in releases) of
 * the next release is the last one's plus an exponential draw of mean 1, and
 * its time is where the schedule's integral of the rate reaches it: a fixed
 * rate divides, stages invert their ramp (a non-homogeneous Poisson process).
 * One draw per release, kept in base_index/base_ns as the fixed rate's time
 * is, since the wake-up that finds a release not yet due looks again when it
 * makes it. Releases are asked for in order (k, then k + 1), which is how
 * the sequencer walks its schedule. No allocation: one word of state. */
static uint64_t poisson_time(nhb__worker* w, uint64_t k) {
  if (w->base_index == k + 1) return w->base_ns;
  /* 1 - u lies in (0, 1], so the logarithm is finite. */
  w->arr_count -= log1p(-next_unit(&w->arr_rng));
  uint64_t t;
  if (w->run->stages != NULL) {
    t = stage_time_at(w, w->arr_count);
  } else {
    double offset = w->arr_count * w->interval_ns;
    t = offset >= (double)(UINT64_MAX - w->start_ns) - 1e6 ? UINT64_MAX
                                                             : w->start_ns + round_ns(offset);
  }
  w->base_index = k + 1;
  w->base_ns = t;
  if (NHB__UNLIKELY(w->arr_log != NULL) && t != UINT64_MAX && w->arr_log_len < w->run->config.record_arrivals)
    w->arr_log[w->arr_log_len++] = t - w->start_ns;
  return t;
}

/* The schedule's time for release k before jitter. A rate schedule's is
 * kept for the release it was computed for: on a fixed-rate run each
 * release is looked at twice, once by the wake-up that finds it not yet due
 * (and arms the timer for it) and once by the one that makes it, and the
 * division and rounding of group_time() were a tenth of the sequencer's
 * instructions per request. */
static uint64_t base_time(nhb__worker* w, uint64_t k) {
  const nhb_run* run = w->run;
  if (NHB__LIKELY(run->stages == NULL && run->schedule_offsets_ns == NULL)) {
    if (w->base_index == k + 1) return w->base_ns;
    if (NHB__UNLIKELY(w->arr_rng != 0)) return poisson_time(w, k);
    w->base_index = k + 1;
    w->base_ns = group_time(w, k / run->config.burst_size);
    return w->base_ns;
  }
  if (run->stages != NULL) return w->arr_rng != 0 ? poisson_time(w, k) : stage_time(w, k);
  return k < run->config.nschedule_offsets ? w->start_ns + run->schedule_offsets_ns[k] : UINT64_MAX;
}

/* The jittered time of release k (base time `base`), drawn once per release
 * and kept until it is made: the wake-up for it may run several times. The
 * jittered time is the release's scheduled time, so the latency of a
 * jittered request counts from it. It never precedes the previous release's
 * (a jitter longer than the interval would reorder them; Nighthawk sorts its
 * jittered releases, which amounts to the same set of times), nor the
 * worker's start, and stays before the end of the run, so that jitter never
 * changes how many releases a run makes. */
static uint64_t jittered_time(nhb__worker* w, uint64_t k, uint64_t base) {
  if (w->jit_index == k + 1) return w->jit_ns;
  const nhb_client_config* cfg = &w->run->config;
  double t = (double)base;
  if (cfg->jitter_fraction > 0) t += (2 * next_unit(&w->rng) - 1) * cfg->jitter_fraction * w->interval_ns;
  if (cfg->jitter_uniform_ns > 0) t += next_unit(&w->rng) * (double)cfg->jitter_uniform_ns;
  uint64_t j = t <= (double)w->start_ns ? w->start_ns : t >= (double)UINT64_MAX ? UINT64_MAX : (uint64_t)t;
  if (j < w->prev_sched_ns) j = w->prev_sched_ns;
  if (w->end_ns != UINT64_MAX && j >= w->end_ns) j = w->end_ns - 1 > base ? w->end_ns - 1 : base;
  w->jit_index = k + 1;
  w->jit_ns = j;
  w->prev_sched_ns = j;
  if (NHB__UNLIKELY(w->arr_log != NULL) && w->arr_log_len < cfg->record_arrivals)
    w->arr_log[w->arr_log_len++] = j - w->start_ns;
  return j;
}

/* The index of the first release at or after next_index that is due after
 * `limit`. Computed from the rate rather than by stepping through the
 * releases, so that dropping a backlog costs the same at any rate; the
 * division may be one group off because of the rounding in group_time(), and
 * the two loops settle that. */
static uint64_t first_due_after(nhb__worker* w, uint64_t limit) {
  if (NHB__UNLIKELY(w->run->stages != NULL || w->run->schedule_offsets_ns != NULL || w->arr_rng != 0)) {
    /* Stages, offsets and Poisson arrivals have no constant interval to
     * divide by: step (a Poisson schedule draws each lost release's time, so
     * the schedule after the loss is the one the seed gives). */
    uint64_t k = w->next_index;
    while (base_time(w, k) <= limit) k++;
    return k;
  }
  const uint64_t burst = w->run->config.burst_size;
  double span = (double)burst * w->interval_ns;
  uint64_t g = limit > w->sched_base_ns ? (uint64_t)((double)(limit - w->sched_base_ns) / span) + 1 : 0;
  while (g > 0 && group_time(w, g - 1) > limit) g--;
  while (group_time(w, g) <= limit) g++;
  uint64_t k = g * burst;
  return k > w->next_index ? k : w->next_index;
}

static void on_release_poll(uv_poll_t* handle, int status, int events) {
  NHB__UNUSED(status);
  NHB__UNUSED(events);
  nhb__worker* w = (nhb__worker*)handle->data;
  /* The programmed deadline has passed. Re-programming the timerfd (which
   * arm() does when another release is wanted) also clears its expiration
   * count, so the fd needs a read() only when nothing is wanted. */
  w->timer_deadline_ns = 0;
  nhb__sequencer_run(w);
  if (w->want_deadline_ns == 0) nhb__timerfd_drain(w->release_fd);
}

/* Runs after every batch of I/O callbacks: releases that fell due while the
 * loop was busy anyway go out without a wake-up of their own. Only the spin
 * and sleep strategies keep it: with the timerfd (poll) every response
 * already looks at the schedule (nhb__conn_update() runs the sequencer when
 * a connection is free), and a release that falls due during anything else
 * finds the timerfd readable at the loop's next poll, which does not block.
 * A check handle is a queue walk and a clock read on every loop iteration,
 * two per fixed-rate request, for nothing in the common case. */
static void on_release_check(uv_check_t* handle) {
  nhb__worker* w = (nhb__worker*)handle->data;
  if (w->next_due_ns != 0 && nhb__now_ns() >= w->next_due_ns) nhb__sequencer_run(w);
}

static void on_release_spin(uv_idle_t* handle) {
  nhb__worker* w = (nhb__worker*)handle->data;
  if (nhb__now_ns() >= w->next_due_ns) nhb__sequencer_run(w);
}

static void on_release_sleep(uv_timer_t* handle) {
  nhb__worker* w = (nhb__worker*)handle->data;
  nhb__sequencer_run(w);
}

int nhb__sequencer_init(nhb__worker* w) {
  const nhb_client_config* cfg = &w->run->config;
  int r;
  w->release_fd = -1;
  w->release_check.data = w;
  if ((r = uv_check_init(&w->loop, &w->release_check)) < 0) return r;
  w->release_handles |= NHB__RH_CHECK;
  if (w->interval_ns > 0 && cfg->idle_strategy != NHB_IDLE_POLL)
    uv_check_start(&w->release_check, on_release_check);
  switch (cfg->idle_strategy) {
    case NHB_IDLE_POLL: {
      int fd = nhb__timerfd_create();
      if (fd < 0) return fd;
      w->release_fd = fd;
      if ((r = uv_poll_init(&w->loop, &w->release_poll, fd)) < 0) return r;
      w->release_handles |= NHB__RH_POLL;
      w->release_poll.data = w;
      return uv_poll_start(&w->release_poll, UV_READABLE, on_release_poll);
    }
    case NHB_IDLE_SPIN:
      w->release_spin.data = w;
      if ((r = uv_idle_init(&w->loop, &w->release_spin)) < 0) return r;
      w->release_handles |= NHB__RH_SPIN;
      return 0;
    case NHB_IDLE_SLEEP:
      w->release_sleep.data = w;
      if ((r = uv_timer_init(&w->loop, &w->release_sleep)) < 0) return r;
      w->release_handles |= NHB__RH_SLEEP;
      return 0;
  }
  return NHB_EINVAL;
}

/* Arranges a wake-up for the release due at `deadline` (monotonic ns). */
static void arm(nhb__worker* w, uint64_t deadline) {
  w->next_due_ns = deadline;
  switch (w->run->config.idle_strategy) {
    case NHB_IDLE_POLL:
      /* The timerfd is programmed only when the wanted deadline moves: a
       * response that looks at the schedule finds the same next release
       * and costs no system call. It moves once per release (a release is
       * made, the next one is wanted), which is one timerfd_settime() per
       * release, as when a prepare handle programmed it before each poll;
       * programming it here spares the loop that handle, a queue walk on
       * every iteration. On a virtual machine each timerfd_settime() costs
       * about as much as a whole request, so it is never made for an
       * unchanged deadline. */
      w->want_deadline_ns = deadline;
      if (deadline != w->timer_deadline_ns) {
        nhb__timerfd_arm(w->release_fd, deadline);
        w->timer_deadline_ns = deadline;
      }
      break;
    case NHB_IDLE_SPIN:
      if (!uv_is_active((uv_handle_t*)&w->release_spin))
        uv_idle_start(&w->release_spin, on_release_spin);
      break;
    case NHB_IDLE_SLEEP: {
      uint64_t now = nhb__now_ns();
      uint64_t ms = deadline > now ? (deadline - now + NHB__NS_PER_MS - 1) / NHB__NS_PER_MS : 0;
      uv_update_time(&w->loop);
      uv_timer_start(&w->release_sleep, on_release_sleep, ms, 0);
      break;
    }
  }
}

/* Stops the wake-ups while the sequencer waits for capacity or has stopped.
 * The timerfd is left as it is: a stale wake-up finds nothing due, and not
 * re-programming it saves a system call every time the sequencer blocks. */
static void disarm(nhb__worker* w) {
  w->next_due_ns = 0;
  w->want_deadline_ns = 0;
  switch (w->run->config.idle_strategy) {
    case NHB_IDLE_POLL:
      break;
    case NHB_IDLE_SPIN:
      uv_idle_stop(&w->release_spin);
      break;
    case NHB_IDLE_SLEEP:
      uv_timer_stop(&w->release_sleep);
      break;
  }
}

/* Hands one release to the pool. A connection that is up at once (a
 * connected UDP socket) reports ready from inside the pool, which
 * then asks the sequencer for more releases: that nested call must do
 * nothing, or it would release the same index again (and a count could run
 * past its end); the loop that called dispatch() goes on by itself. */
static inline int dispatch(nhb__worker* w, uint64_t t, uint64_t now, uint32_t spec) {
  w->releasing = 1;
  int r = nhb__pool_dispatch(w, t, now, spec);
  w->releasing = 0;
  return r;
}

static void release_max_rate(nhb__worker* w, uint64_t now) {
  /* Closed loop as fast as the connections allow: every free connection gets
   * a request at once; the "schedule" is the release itself. */
  while (!w->stopping && !w->finishing && nhb__pool_has_connection(w)) {
    if (NHB__UNLIKELY(w->quota == 0)) {
      begin_stop_at(w, now);
      return;
    }
    dispatch(w, now, now, nhb__next_spec(w));
    w->released++;
    w->quota--;
    w->stats.counters[NHB_CTR_SEQUENCER_RELEASED]++;
  }
}

/* A warm-up by count (--simple-warmup, -sequential-warmup): one request at a
 * time, the next when the previous one has ended, as Fortio's sequential
 * warm-up and Nighthawk's single warm-up request do. */
static void release_sequential(nhb__worker* w, uint64_t now) {
  if (now < w->start_ns) {
    arm(w, w->start_ns);
    return;
  }
  disarm(w);
  if (w->quota == 0) {
    begin_stop_at(w, now);
    return;
  }
  if (w->in_flight > 0 || !nhb__pool_has_connection(w)) return; /* a response calls us again */
  dispatch(w, now, now, nhb__next_spec(w));
  w->released++;
  w->quota--;
  w->stats.counters[NHB_CTR_SEQUENCER_RELEASED]++;
}

void nhb__sequencer_run(nhb__worker* w) {
  if (w->stopping || w->finishing || NHB__UNLIKELY(w->releasing)) return;
  uint64_t now = nhb__now_ns();
  /* Armed with the timerfd for a release not yet due: nothing can be
   * released, and arm() would program the deadline it has. Every response
   * asks (nhb__conn_update()), so on a fixed-rate run this is one of the
   * two looks per request; it spares that look the schedule's arithmetic.
   * Only for the timerfd: it is always programmed for next_due_ns while a
   * release is wanted (arm() does that), so the wake-up comes by itself,
   * whereas a sleep timer that fired a little early must be started again. */
  if (w->run->config.idle_strategy == NHB_IDLE_POLL && now < w->next_due_ns) {
    /* A low rate's response that leaves nothing in flight: the worker can
     * sleep until after the next release (one compare at higher rates). */
    if (NHB__UNLIKELY(w->next_due_ns - now >= NHB__IDLE_SKIP_MIN_NS) && w->in_flight == 0)
      nhb__worker_went_idle(w, now);
    return;
  }
  nhb_stats* st = &w->stats;
  const int open_loop = w->run->config.open_loop;

  if (NHB__UNLIKELY(w->warming) && w->run->config.warmup_requests > 0) {
    release_sequential(w, now);
    return;
  }
  if (w->interval_ns <= 0) {
    if (now < w->start_ns) {
      arm(w, w->start_ns);
    } else if (now >= w->end_ns) {
      begin_stop_at(w, w->end_ns);
    } else {
      disarm(w);
      release_max_rate(w, now);
    }
    return;
  }

  for (;;) {
    /* A stop asked for from another thread (SIGINT) is acted on by the wake-up
     * handle once this returns; checking here keeps a long burst of releases
     * from delaying it. */
    if (NHB__UNLIKELY(atomic_load_explicit(&w->run->stop_requested, memory_order_relaxed))) return;
    if (NHB__UNLIKELY(w->quota == 0)) {
      /* The count is made (--requests, an explicit schedule, a warm-up by
       * count): the phase ends with its last release. */
      disarm(w);
      begin_stop_at(w, now);
      return;
    }
    uint64_t t = base_time(w, w->next_index);
    if (t >= w->end_ns) {
      if (w->blocked) nhb_hist_record(st->hists[NHB_HIST_SEQUENCER_BLOCKING], now - w->blocked_since_ns);
      w->blocked = 0;
      disarm(w);
      begin_stop_at(w, w->end_ns);
      return;
    }
    uint64_t base = t;
    if (NHB__UNLIKELY(w->rng != 0)) t = jittered_time(w, w->next_index, base);
    if (t > now) {
      arm(w, t);
      return;
    }
    if (dispatch(w, t, now, nhb__next_spec(w))) {
      if (w->blocked) {
        nhb_hist_record(st->hists[NHB_HIST_SEQUENCER_BLOCKING], now - w->blocked_since_ns);
        w->blocked = 0;
      }
      nhb_hist_record(st->hists[NHB_HIST_RELEASE_LATENESS], now - t);
      st->counters[NHB_CTR_SEQUENCER_RELEASED]++;
      if (NHB__UNLIKELY(w->stage_releases != NULL)) w->stage_releases[w->stage_hint]++;
      if (NHB__UNLIKELY(w->run->config.no_catchup) && !w->warming &&
          (double)(now - t) >= (double)w->run->config.burst_size * w->interval_ns) {
        /* --no-catchup: this release is so late that the next one is due
         * already. Instead of catching up in a burst, the schedule moves:
         * this group's time becomes now, the next is one interval later. */
        uint64_t moved = now - base;
        w->sched_base_ns += moved;
        w->base_index = 0; /* the kept base time counted from the old base */
        w->facts.no_catchup_moves++;
        w->facts.no_catchup_shift_ns += moved;
      }
    } else if (open_loop) {
      /* No back-pressure: the release is lost, loudly. Nothing can free
       * capacity before this returns to the loop, so every release due by
       * now (and before the end) is lost too: they are counted at once, so
       * that the cost of falling behind does not grow with the rate. */
      uint64_t limit = now < w->end_ns ? now : w->end_ns - 1;
      uint64_t next = first_due_after(w, limit);
      /* Jitter can make a release due before its unjittered time, which is
       * what first_due_after() counts by: that release is lost as well, or
       * this loop would try it again for ever. */
      if (next <= w->next_index) next = w->next_index + 1;
      uint64_t dropped = next - w->next_index;
      if (dropped > w->quota) {
        dropped = w->quota;
        next = w->next_index + dropped;
      }
      w->quota -= w->quota == UINT64_MAX ? 0 : dropped;
      st->counters[NHB_CTR_POOL_OVERFLOW] += dropped;
      st->counters[NHB_CTR_UPSTREAM_RQ_PENDING_OVERFLOW] += dropped;
      w->next_index = next;
      w->released += dropped;
      continue;
    } else {
      if (!w->blocked) {
        w->blocked = 1;
        w->blocked_since_ns = now;
        st->counters[NHB_CTR_SEQUENCER_BLOCKED]++;
      }
      disarm(w);
      return; /* a freed connection calls us again */
    }
    w->next_index++;
    w->released++;
    if (w->quota != UINT64_MAX) w->quota--;
    if (w->stopping || w->finishing) return;
  }
}

/* --no-catchup: the releases the unmoved schedule would have made by `end`
 * (the end of the run, or when it stopped) that this one did not make. */
static void count_lost(nhb__worker* w, uint64_t end) {
  const nhb_client_config* cfg = &w->run->config;
  if (!cfg->no_catchup || w->warming || w->interval_ns <= 0 || end <= w->start_ns) return;
  double span = (double)cfg->burst_size * w->interval_ns;
  double groups = ceil((double)(end - w->start_ns) / span);
  double planned = groups * (double)cfg->burst_size;
  double made = (double)w->released;
  if (cfg->total_requests > 0 && planned > made + (double)w->quota) planned = made + (double)w->quota;
  w->facts.no_catchup_lost = planned > made ? (uint64_t)(planned - made) : 0;
}

static void begin_stop_at(nhb__worker* w, uint64_t t) {
  if (w->stopping) return;
  w->stopping = 1;
  uint64_t now = nhb__now_ns();
  uint64_t end = t > w->start_ns && t != UINT64_MAX ? t : now;
  w->stats.execution_duration_ns = end > w->start_ns ? end - w->start_ns : 0;
  count_lost(w, end);
  w->drain_deadline_ns = now + w->run->config.drain_timeout_ns;
  nhb__worker_maybe_finish(w);
}

void nhb__sequencer_stop_now(nhb__worker* w, uint64_t drain_ns) {
  if (w->stopping) return;
  uint64_t now = nhb__now_ns();
  if (w->blocked) {
    nhb_hist_record(w->stats.hists[NHB_HIST_SEQUENCER_BLOCKING], now - w->blocked_since_ns);
    w->blocked = 0;
  }
  w->stopping = 1;
  disarm(w);
  /* The run lasted until now, or until its scheduled end if that came first
   * (the housekeeping timer notices the end up to 10 ms late). */
  uint64_t end = now < w->end_ns ? now : w->end_ns;
  w->stats.execution_duration_ns = end > w->start_ns ? end - w->start_ns : 0;
  count_lost(w, end);
  w->drain_deadline_ns = now + drain_ns;
  nhb__worker_maybe_finish(w);
}

void nhb__sequencer_close(nhb__worker* w) {
  /* Only the handles nhb__sequencer_init() got to: it may not have run at
   * all (an earlier set-up step failed) or stopped part way. */
  unsigned h = w->release_handles;
  w->release_handles = 0;
  if (h & NHB__RH_CHECK) uv_close((uv_handle_t*)&w->release_check, NULL);
  if (h & NHB__RH_POLL) uv_close((uv_handle_t*)&w->release_poll, NULL);
  if (h & NHB__RH_SPIN) uv_close((uv_handle_t*)&w->release_spin, NULL);
  if (h & NHB__RH_SLEEP) uv_close((uv_handle_t*)&w->release_sleep, NULL);
}

/* ---- schedule shapes: set-up ---------------------------------- */

int nhb__sequencer_run_init(nhb_run* run) {
  const nhb_client_config* cfg = &run->config;
  uint32_t n = cfg->nstages;
  int random = cfg->arrival_poisson || cfg->jitter_uniform_ns > 0 || cfg->jitter_fraction > 0;
  if (random && cfg->record_arrivals > 0) {
    for (int i = 0; i < run->nworkers; i++) {
      run->workers[i].arr_log = calloc(cfg->record_arrivals, sizeof(uint64_t));
      if (run->workers[i].arr_log == NULL) return NHB_ENOMEM;
    }
  }
  if (n == 0) return 0;
  run->stages = calloc(n, sizeof(nhb__stage));
  if (run->stages == NULL) return NHB_ENOMEM;
  /* Stage i ramps from the previous stage's target (0 before the first). */
  double count = 0, from = 0;
  uint64_t at = 0;
  for (uint32_t i = 0; i < n; i++) {
    nhb__stage* s = &run->stages[i];
    s->start_ns = at;
    s->duration_ns = cfg->stage_ns[i];
    s->count_start = count;
    s->a = from / 1e9;
    s->b = cfg->stage_rps[i] / 1e9;
    count += (s->a + s->b) * (double)s->duration_ns / 2;
    at += s->duration_ns;
    from = cfg->stage_rps[i];
  }
  run->stages_end_ns = at;
  for (int i = 0; i < run->nworkers; i++) {
    nhb__worker* w = &run->workers[i];
    w->stage_releases = calloc(n, sizeof(uint64_t));
    w->stage_responses = calloc(n, sizeof(uint64_t));
    if (w->stage_releases == NULL || w->stage_responses == NULL) return NHB_ENOMEM;
  }
  return 0;
}

/* Sets up one phase of a worker's schedule starting at `start`. */
static void setup_phase(nhb__worker* w, uint64_t start, int warming) {
  const nhb_run* run = w->run;
  const nhb_client_config* cfg = &run->config;
  w->start_ns = start;
  w->sched_base_ns = start;
  w->next_index = 0;
  w->released = 0;
  w->jit_index = 0;
  w->base_index = 0;
  w->prev_sched_ns = 0;
  w->stage_hint = 0;
  w->arr_count = 0;
  w->warming = warming;
  if (warming) {
    w->quota = cfg->warmup_requests > 0 ? cfg->warmup_requests : UINT64_MAX;
    w->end_ns = cfg->warmup_requests > 0 ? UINT64_MAX : start + cfg->warmup_ns;
    return;
  }
  if (run->schedule_offsets_ns != NULL) {
    w->quota = cfg->nschedule_offsets;
  } else if (cfg->total_requests > 0) {
    uint64_t n = (uint64_t)run->nworkers;
    w->quota = cfg->total_requests / n + ((uint64_t)w->index < cfg->total_requests % n ? 1 : 0);
  } else {
    w->quota = UINT64_MAX;
  }
  if (run->stages != NULL) {
    w->end_ns = start + run->stages_end_ns;
  } else if (cfg->duration_ns < 0) {
    w->end_ns = UINT64_MAX;
  } else {
    w->end_ns = start + (uint64_t)cfg->duration_ns;
  }
}

void nhb__sequencer_worker_start(nhb__worker* w) {
  const nhb_run* run = w->run;
  const nhb_client_config* cfg = &run->config;
  /* Stages and explicit schedules have no constant interval: the sequencer
   * takes the scheduled path with a nominal one (first_due_after() and
   * --no-catchup, which use it, are for constant rates). */
  if (run->stages != NULL || run->schedule_offsets_ns != NULL) w->interval_ns = 1.0;
  /* Stages interleave the workers by count, as the phase offset does for a
   * constant rate: worker i's releases sit at counts k + i/W. */
  w->count_offset = run->stages != NULL ? (double)w->index / run->nworkers : 0;
  /* Each worker's generator starts from the run's seed (or the clock) and
   * its index, so that a seed gives the same schedule and the workers'
   * schedules are independent of each other. */
  uint64_t run_seed = cfg->seed_set ? cfg->seed : nhb__realtime_ns();
  if (cfg->jitter_uniform_ns > 0 || cfg->jitter_fraction > 0) {
    uint64_t seed = run_seed ^ ((uint64_t)(w->index + 1) * 0xD1B54A32D192ED03ULL);
    w->rng = nhb__splitmix64(&seed) | 1; /* never 0: 0 means no jitter */
  }
  if (cfg->arrival_poisson) {
    uint64_t seed = run_seed ^ ((uint64_t)(w->index + 1) * 0x8CB92BA72F3D8DD7ULL);
    (void)nhb__splitmix64(&seed);
    w->arr_rng = nhb__splitmix64(&seed) | 1; /* never 0: 0 means uniform */
  }
  setup_phase(w, w->start_ns, run->has_warmup);
}

void nhb__sequencer_end_warmup(nhb__worker* w) {
  nhb_stats* st = &w->stats;
  nhb_stats* wm = &w->warm;
  if (!w->warming) return;
  /* The warm-up's phases recorded by count belong to its statistics. */
  nhb__phases_fold(w);
  /* The counters go on counting (the live intervals and the published
   * progress take differences of them); what the warm-up counted is kept
   * here and taken off when the run ends. The histograms and streams swap
   * with fresh ones allocated with the run. */
  memcpy(wm->counters, st->counters, sizeof(wm->counters));
  memcpy(wm->status_codes, st->status_codes, sizeof(wm->status_codes));
  memcpy(wm->grpc_status, st->grpc_status, sizeof(wm->grpc_status));
  nhb__chk_fold(st, w->run->chk.n);
  memcpy(wm->check_pass, st->check_pass, sizeof(wm->check_pass));
  memcpy(wm->check_fail, st->check_fail, sizeof(wm->check_fail));
  for (int i = 0; i < NHB_HIST_COUNT; i++) {
    /* A statistic the run does not keep (the origin latency without
     * --latency-response-header-name) has no histogram: it stays absent. */
    if (st->hists[i] == NULL) continue;
    nhb_hist* h = st->hists[i];
    st->hists[i] = wm->hists[i];
    wm->hists[i] = h;
  }
  memcpy(wm->streams, st->streams, sizeof(wm->streams));
  for (int i = 0; i < NHB_STREAM_COUNT; i++) nhb_stream_init(&st->streams[i]);
  wm->execution_start_ns = st->execution_start_ns;
  wm->execution_duration_ns = st->execution_duration_ns;
  nhb__pool_endpoints_end_warmup(w);
  nhb__grp_end_warmup(w);
  w->facts.warmup_released = w->released;
  w->released = 0;
  w->warming = 0;
  st->execution_duration_ns = 0;
  /* The predicates wait for the measured phase: judge them now, on the
   * measured phase's counters (zero so far), not on what the warm-up last
   * published, which a kicked controller would otherwise read before the
   * worker's next publication. */
  nhb__worker_publish(w);
  atomic_fetch_sub(&w->run->warming, 1);
  nhb__run_kick(w->run);
}

void nhb__sequencer_next_phase(nhb__worker* w) {
  nhb__sequencer_end_warmup(w);
  /* The measured phase starts at once, keeping the worker's stagger. */
  uint64_t start = nhb__now_ns() + w->phase_offset_ns;
  w->stats.execution_start_ns = nhb__realtime_ns() + w->phase_offset_ns;
  w->stopping = 0;
  w->blocked = 0;
  setup_phase(w, start, 0);
  arm(w, start);
}

void nhb__sequencer_stage_response(nhb__worker* w, uint64_t scheduled_ns) {
  const nhb__stage* st = w->run->stages;
  uint32_t n = w->run->config.nstages;
  uint64_t at = scheduled_ns > w->start_ns ? scheduled_ns - w->start_ns : 0;
  uint32_t j = 0;
  while (j + 1 < n && st[j + 1].start_ns <= at) j++;
  w->stage_responses[j]++;
}
