/* calibrate.c: measures the host for `nhbench calibrate` (docs/trust.md,
 * "Calibrating the host"), outside any run.
 *
 * The wake-ups use the sequencer's own mechanisms (sequencer.c), one loop per
 * call, so the figures are what a run on this host would get:
 *   poll:  a timerfd armed at the absolute deadline, watched by uv_poll;
 *   spin:  a uv_idle handle that reads the clock until the deadline;
 *   sleep: a libuv millisecond timer rounded up to the deadline.
 * Each wake-up records its lateness (when the callback ran - the deadline) in
 * an HDR histogram. The deadlines are computed from the start, as the
 * sequencer's are, so lateness never accumulates.
 *
 * The clock-read and system-call loops time many calls and divide: one call
 * is far below the clock's own resolution on some hosts. */
#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <uv.h>

#include "common/internal.h"

typedef struct {
  uv_loop_t loop;
  uv_poll_t poll;
  uv_idle_t idle;
  uv_timer_t timer;
  nhb_idle_strategy_t strategy;
  int fd;
  uint64_t start_ns;
  uint64_t interval_ns;
  uint64_t deadline_ns;
  uint32_t done;
  uint32_t count;
  int err;
  nhb_hist* hist;
} nhb__calib;

static void calib_arm(nhb__calib* c);

/* Records the lateness of the wake-up that just ran, then arms the next one
 * or stops the loop after the last. */
static void calib_woke(nhb__calib* c) {
  uint64_t now = nhb__now_ns();
  nhb_hist_record(c->hist, now > c->deadline_ns ? now - c->deadline_ns : 0);
  if (++c->done >= c->count) {
    uv_stop(&c->loop);
    return;
  }
  calib_arm(c);
}

static void calib_on_poll(uv_poll_t* handle, int status, int events) {
  NHB__UNUSED(events);
  nhb__calib* c = (nhb__calib*)handle->data;
  if (status < 0) {
    c->err = status;
    uv_stop(&c->loop);
    return;
  }
  nhb__timerfd_drain(c->fd);
  /* A stale expiry (none is expected: one arm per wake-up) finds nothing due. */
  if (nhb__now_ns() < c->deadline_ns) return;
  calib_woke(c);
}

static void calib_on_idle(uv_idle_t* handle) {
  nhb__calib* c = (nhb__calib*)handle->data;
  if (nhb__now_ns() >= c->deadline_ns) calib_woke(c);
}

static void calib_on_timer(uv_timer_t* handle) {
  calib_woke((nhb__calib*)handle->data);
}

static void calib_arm(nhb__calib* c) {
  c->deadline_ns = c->start_ns + (uint64_t)(c->done + 1) * c->interval_ns;
  switch (c->strategy) {
    case NHB_IDLE_POLL: {
      int r = nhb__timerfd_arm(c->fd, c->deadline_ns);
      if (r < 0) {
        c->err = r;
        uv_stop(&c->loop);
      }
      break;
    }
    case NHB_IDLE_SPIN:
      break; /* the idle handle stays active and checks the clock */
    case NHB_IDLE_SLEEP: {
      uint64_t now = nhb__now_ns();
      uint64_t ms = c->deadline_ns > now
                        ? (c->deadline_ns - now + NHB__NS_PER_MS - 1) / NHB__NS_PER_MS
                        : 0;
      uv_update_time(&c->loop);
      uv_timer_start(&c->timer, calib_on_timer, ms, 0);
      break;
    }
  }
}

static void calib_close_cb(uv_handle_t* handle) { NHB__UNUSED(handle); }

static void calib_close_walk(uv_handle_t* handle, void* arg) {
  NHB__UNUSED(arg);
  if (!uv_is_closing(handle)) uv_close(handle, calib_close_cb);
}

int nhb_calibrate_wakeups(nhb_idle_strategy_t strategy, uint32_t count, uint64_t interval_ns,
                          nhb_hist* out) {
  if (out == NULL || count == 0 || interval_ns == 0) return NHB_EINVAL;
  if (strategy != NHB_IDLE_POLL && strategy != NHB_IDLE_SPIN && strategy != NHB_IDLE_SLEEP)
    return NHB_EINVAL;
  nhb__calib c;
  memset(&c, 0, sizeof(c));
  c.strategy = strategy;
  c.fd = -1;
  c.count = count;
  c.interval_ns = interval_ns;
  c.hist = out;
  int r = uv_loop_init(&c.loop);
  if (r < 0) return r;
  switch (strategy) {
    case NHB_IDLE_POLL:
      c.fd = nhb__timerfd_create();
      if (c.fd < 0) {
        r = c.fd;
        break;
      }
      if ((r = uv_poll_init(&c.loop, &c.poll, c.fd)) < 0) break;
      c.poll.data = &c;
      r = uv_poll_start(&c.poll, UV_READABLE, calib_on_poll);
      break;
    case NHB_IDLE_SPIN:
      if ((r = uv_idle_init(&c.loop, &c.idle)) < 0) break;
      c.idle.data = &c;
      r = uv_idle_start(&c.idle, calib_on_idle);
      break;
    case NHB_IDLE_SLEEP:
      if ((r = uv_timer_init(&c.loop, &c.timer)) < 0) break;
      c.timer.data = &c;
      break;
  }
  if (r >= 0) {
    c.start_ns = nhb__now_ns();
    calib_arm(&c);
    if (c.err == 0) uv_run(&c.loop, UV_RUN_DEFAULT);
    r = c.err;
  }
  uv_walk(&c.loop, calib_close_walk, NULL);
  uv_run(&c.loop, UV_RUN_DEFAULT);
  uv_loop_close(&c.loop);
  if (c.fd >= 0) close(c.fd);
  return r < 0 ? r : 0;
}

double nhb_calibrate_clock_read_ns(uint32_t iterations) {
  if (iterations == 0) return 0.0;
  /* The sink keeps the compiler from dropping the calls. */
  volatile uint64_t sink = 0;
  uint64_t t0 = nhb__now_ns();
  for (uint32_t i = 0; i < iterations; i++) sink += nhb__now_ns();
  uint64_t t1 = nhb__now_ns();
  NHB__UNUSED(sink);
  return (double)(t1 - t0) / (double)iterations;
}

double nhb_calibrate_syscall_ns(uint32_t iterations) {
  if (iterations == 0) return 0.0;
  /* getppid through syscall(): a real kernel entry that glibc cannot cache or
   * answer from the vDSO, and that does no work of its own. */
  volatile long sink = 0;
  uint64_t t0 = nhb__now_ns();
  for (uint32_t i = 0; i < iterations; i++) sink += syscall(SYS_getppid);
  uint64_t t1 = nhb__now_ns();
  NHB__UNUSED(sink);
  return (double)(t1 - t0) / (double)iterations;
}
