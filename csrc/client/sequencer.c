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
 *          precise to tens of microseconds and costs nothing while idle.
 *   spin:  a uv_idle handle keeps the loop polling without sleeping; the most
 *          precise and burns a whole CPU.
 *   sleep: a libuv millisecond timer; the cheapest and up to ~1 ms late.
 *
 * When a due release finds no capacity, a closed-loop sequencer blocks until a
 * connection frees up (the wait goes to sequencer.blocking, and the requests
 * keep their scheduled times, so the scheduled-time latency includes it); an
 * open-loop sequencer drops the release and counts it in benchmark.pool_overflow.
 */
#include <math.h>
#include <stdatomic.h>

#include "client/client.h"

static void begin_stop_at(nhb__worker* w, uint64_t t);

/* The due time of the first release of burst group g. nhb_run_create_ex()
 * bounds the rate (NHB_MAX_RPS), so the interval is at least 1 us and g stays
 * far below 2^53 for any run that fits in a uint64_t of nanoseconds; the
 * saturation only guards against arithmetic that could not be represented. */
static uint64_t group_time(const nhb__worker* w, uint64_t g) {
  double offset = (double)g * (double)w->run->config.burst_size * w->interval_ns;
  if (NHB__UNLIKELY(offset >= (double)(UINT64_MAX - w->start_ns) - 1e6)) return UINT64_MAX;
  return w->start_ns + (uint64_t)llround(offset);
}

static uint64_t scheduled_time(const nhb__worker* w, uint64_t k) {
  return group_time(w, k / w->run->config.burst_size);
}

/* The index of the first release at or after next_index that is due after
 * `limit`. Computed from the rate rather than by stepping through the
 * releases, so that dropping a backlog costs the same at any rate; the
 * division may be one group off because of the rounding in group_time(), and
 * the two loops settle that. */
static uint64_t first_due_after(const nhb__worker* w, uint64_t limit) {
  const uint64_t burst = w->run->config.burst_size;
  double span = (double)burst * w->interval_ns;
  uint64_t g = limit > w->start_ns ? (uint64_t)((double)(limit - w->start_ns) / span) + 1 : 0;
  while (g > 0 && group_time(w, g - 1) > limit) g--;
  while (group_time(w, g) <= limit) g++;
  uint64_t k = g * burst;
  return k > w->next_index ? k : w->next_index;
}

static void on_release_poll(uv_poll_t* handle, int status, int events) {
  NHB__UNUSED(status);
  NHB__UNUSED(events);
  nhb__worker* w = (nhb__worker*)handle->data;
  /* The programmed deadline has passed. Re-programming the timerfd (which the
   * prepare callback does when another release is wanted) also clears its
   * expiration count, so the fd needs a read() only when nothing is wanted. */
  w->timer_deadline_ns = 0;
  nhb__sequencer_run(w);
  if (w->want_deadline_ns == 0) nhb__timerfd_drain(w->release_fd);
}

/* Runs once per loop iteration, right before the loop blocks in epoll: the
 * only place that programs the timerfd, and only when the wanted deadline
 * changed. On a virtual machine each timerfd_settime() costs about as much as
 * a whole request, so re-programming for every release would double the
 * client's CPU. */
static void on_release_prepare(uv_prepare_t* handle) {
  nhb__worker* w = (nhb__worker*)handle->data;
  if (w->want_deadline_ns != 0 && w->want_deadline_ns != w->timer_deadline_ns) {
    nhb__timerfd_arm(w->release_fd, w->want_deadline_ns);
    w->timer_deadline_ns = w->want_deadline_ns;
  }
}

/* Runs after every batch of I/O callbacks: releases that fell due while the
 * loop was busy anyway go out without a timer wake-up of their own. */
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
  if (w->interval_ns > 0) uv_check_start(&w->release_check, on_release_check);
  switch (cfg->idle_strategy) {
    case NHB_IDLE_POLL: {
      int fd = nhb__timerfd_create();
      if (fd < 0) return fd;
      w->release_fd = fd;
      if ((r = uv_poll_init(&w->loop, &w->release_poll, fd)) < 0) return r;
      w->release_poll.data = w;
      w->release_prepare.data = w;
      if ((r = uv_prepare_init(&w->loop, &w->release_prepare)) < 0) return r;
      uv_prepare_start(&w->release_prepare, on_release_prepare);
      return uv_poll_start(&w->release_poll, UV_READABLE, on_release_poll);
    }
    case NHB_IDLE_SPIN:
      w->release_spin.data = w;
      return uv_idle_init(&w->loop, &w->release_spin);
    case NHB_IDLE_SLEEP:
      w->release_sleep.data = w;
      return uv_timer_init(&w->loop, &w->release_sleep);
  }
  return NHB_EINVAL;
}

/* Arranges a wake-up for the release due at `deadline` (monotonic ns). */
static void arm(nhb__worker* w, uint64_t deadline) {
  w->next_due_ns = deadline;
  switch (w->run->config.idle_strategy) {
    case NHB_IDLE_POLL:
      w->want_deadline_ns = deadline;
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

static void release_max_rate(nhb__worker* w, uint64_t now) {
  /* Closed loop as fast as the connections allow: every free connection gets
   * a request at once; the "schedule" is the release itself. */
  while (!w->stopping && !w->finishing && nhb__pool_has_connection(w)) {
    nhb__pool_dispatch(w, now, now, nhb__next_spec(w));
    w->released++;
    w->stats.counters[NHB_CTR_SEQUENCER_RELEASED]++;
  }
}

void nhb__sequencer_run(nhb__worker* w) {
  if (w->stopping || w->finishing) return;
  uint64_t now = nhb__now_ns();
  nhb_stats* st = &w->stats;
  const int open_loop = w->run->config.open_loop;

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
    uint64_t t = scheduled_time(w, w->next_index);
    if (t >= w->end_ns) {
      if (w->blocked) nhb_hist_record(st->hists[NHB_HIST_SEQUENCER_BLOCKING], now - w->blocked_since_ns);
      w->blocked = 0;
      disarm(w);
      begin_stop_at(w, w->end_ns);
      return;
    }
    if (t > now) {
      arm(w, t);
      return;
    }
    if (nhb__pool_dispatch(w, t, now, nhb__next_spec(w))) {
      if (w->blocked) {
        nhb_hist_record(st->hists[NHB_HIST_SEQUENCER_BLOCKING], now - w->blocked_since_ns);
        w->blocked = 0;
      }
      nhb_hist_record(st->hists[NHB_HIST_RELEASE_LATENESS], now - t);
      st->counters[NHB_CTR_SEQUENCER_RELEASED]++;
    } else if (open_loop) {
      nhb__spec_unget(w); /* issue 13, requests: a lost release sends no entry */
      /* No back-pressure: the release is lost, loudly. Nothing can free
       * capacity before this returns to the loop, so every release due by
       * now (and before the end) is lost too: they are counted at once, so
       * that the cost of falling behind does not grow with the rate. */
      uint64_t limit = now < w->end_ns ? now : w->end_ns - 1;
      uint64_t next = first_due_after(w, limit);
      uint64_t dropped = next - w->next_index;
      st->counters[NHB_CTR_POOL_OVERFLOW] += dropped;
      st->counters[NHB_CTR_UPSTREAM_RQ_PENDING_OVERFLOW] += dropped;
      w->next_index = next;
      w->released += dropped;
      continue;
    } else {
      nhb__spec_unget(w); /* issue 13, requests: the next release sends this entry */
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
    if (w->stopping || w->finishing) return;
  }
}

static void begin_stop_at(nhb__worker* w, uint64_t t) {
  if (w->stopping) return;
  w->stopping = 1;
  uint64_t now = nhb__now_ns();
  w->stats.execution_duration_ns = (t > w->start_ns ? t : now) - w->start_ns;
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
  w->drain_deadline_ns = now + drain_ns;
  nhb__worker_maybe_finish(w);
}

void nhb__sequencer_close(nhb__worker* w) {
  uv_close((uv_handle_t*)&w->release_check, NULL);
  switch (w->run->config.idle_strategy) {
    case NHB_IDLE_POLL:
      uv_close((uv_handle_t*)&w->release_prepare, NULL);
      uv_close((uv_handle_t*)&w->release_poll, NULL);
      break;
    case NHB_IDLE_SPIN:
      uv_close((uv_handle_t*)&w->release_spin, NULL);
      break;
    case NHB_IDLE_SLEEP:
      uv_close((uv_handle_t*)&w->release_sleep, NULL);
      break;
  }
}
