/* server_delay.c: when the test server's responses may go out.
 *
 * Delayed responses: every worker keeps a min-heap of its connections whose
 * first queued response waits for a deadline, and one timerfd armed at the
 * earliest deadline. libuv's own timers have millisecond granularity; the
 * timerfd wakes the loop within microseconds of the deadline. Programming a
 * timerfd is a system call (about 15 us on some VMs), so it is re-armed only
 * when the earliest deadline moves earlier than what it is armed for; a
 * wake-up for a deadline that went away finds nothing due and re-arms.
 *
 * Stalls hold every worker's responses for a while (periodic windows, or a
 * per-request `stall=`); they move a response's deadline, so they live next
 * to the heap. The per-worker random numbers (Fortio's probability lists)
 * are here too: they decide delays more than anything else.
 */
#include <stdlib.h>

#include "server/server_internal.h"

/* ---- random numbers ---------------------------------------------------------- */

uint64_t nhb__srv_rand(nhb__srv_worker* w) {
  /* xorshift64*: a few cycles per draw, plenty for probability lists. */
  uint64_t x = w->rng;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  w->rng = x;
  return x * 0x2545F4914F6CDD1DULL;
}

static uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

void nhb__srv_rand_seed(nhb__srv_worker* w, int index) {
  /* Different for every worker and every run; never 0, which xorshift
   * cannot leave. */
  w->rng = splitmix64(nhb__now_ns() ^ ((uint64_t)(index + 1) * 0x9E3779B97F4A7C15ULL));
  if (w->rng == 0) w->rng = 1;
}

/* ---- stalls -------------------------------------------------------------------------- */

uint64_t nhb__srv_stall_release(nhb_server* s, uint64_t t) {
  uint64_t until = atomic_load_explicit(&s->stalled_until_ns, memory_order_relaxed);
  if (t < until) t = until;
  /* Periodic windows [k*every, k*every + for) from the start, k >= 0. A
   * release moved to a window's end is outside every window (for < every),
   * and still after `until`. */
  uint64_t every = s->config.stall_every_ns, len = s->config.stall_for_ns;
  if (every && len && t >= s->start_ns) {
    uint64_t off = (t - s->start_ns) % every;
    if (off < len) t += len - off;
  }
  return t;
}

void nhb__srv_stall_request(nhb__srv_worker* w, uint64_t now, uint64_t duration_ns) {
  nhb_server* s = w->server;
  uint64_t until = now + duration_ns;
  uint64_t cur = atomic_load_explicit(&s->stalled_until_ns, memory_order_relaxed);
  while (cur < until &&
         !atomic_compare_exchange_weak_explicit(&s->stalled_until_ns, &cur, until, memory_order_relaxed,
                                                memory_order_relaxed)) {
  }
  nhb__srv_bump(&w->counters.stalls, 1);
}

/* ---- the delay heap ---------------------------------------------------------- */

static void heap_swap(nhb__srv_worker* w, size_t i, size_t j) {
  nhb__srv_conn* t = w->heap[i];
  w->heap[i] = w->heap[j];
  w->heap[j] = t;
  w->heap[i]->heap_idx = i;
  w->heap[j]->heap_idx = j;
}

static void heap_up(nhb__srv_worker* w, size_t i) {
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (w->heap[parent]->wake_ns <= w->heap[i]->wake_ns) break;
    heap_swap(w, i, parent);
    i = parent;
  }
}

static void heap_down(nhb__srv_worker* w, size_t i) {
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < w->heap_len && w->heap[l]->wake_ns < w->heap[m]->wake_ns) m = l;
    if (r < w->heap_len && w->heap[r]->wake_ns < w->heap[m]->wake_ns) m = r;
    if (m == i) break;
    heap_swap(w, i, m);
    i = m;
  }
}

static void heap_arm(nhb__srv_worker* w) {
  if (w->heap_len == 0) return;
  uint64_t first = w->heap[0]->wake_ns;
  if (w->armed_ns != 0 && first >= w->armed_ns) return;
  if (nhb__timerfd_arm(w->timer_fd, first) == 0) w->armed_ns = first;
}

void nhb__srv_heap_set(nhb__srv_worker* w, nhb__srv_conn* c, uint64_t wake_ns) {
  if (c->heap_idx == SIZE_MAX) {
    if (w->heap_len == w->heap_cap) {
      size_t cap = w->heap_cap ? 2 * w->heap_cap : 64;
      nhb__srv_conn** h = realloc(w->heap, cap * sizeof(*h));
      if (!h) {
        /* Without a heap slot the response would never be sent. */
        nhb__srv_conn_close(c);
        return;
      }
      w->heap = h;
      w->heap_cap = cap;
    }
    c->wake_ns = wake_ns;
    c->heap_idx = w->heap_len;
    w->heap[w->heap_len++] = c;
    heap_up(w, c->heap_idx);
  } else {
    uint64_t old = c->wake_ns;
    c->wake_ns = wake_ns;
    if (wake_ns < old) heap_up(w, c->heap_idx);
    else heap_down(w, c->heap_idx);
  }
  heap_arm(w);
}

void nhb__srv_heap_remove(nhb__srv_worker* w, nhb__srv_conn* c) {
  size_t i = c->heap_idx;
  if (i == SIZE_MAX) return;
  c->heap_idx = SIZE_MAX;
  nhb__srv_conn* last = w->heap[--w->heap_len];
  if (i == w->heap_len) return;
  w->heap[i] = last;
  last->heap_idx = i;
  heap_down(w, i);
  heap_up(w, last->heap_idx);
}

void nhb__srv_on_delay_timer(uv_poll_t* handle, int status, int events) {
  NHB__UNUSED(events);
  nhb__srv_worker* w = handle->data;
  if (status < 0) return;
  w->armed_ns = 0;
  uint64_t now = nhb__now_ns();
  while (w->heap_len && w->heap[0]->wake_ns <= now) {
    nhb__srv_conn* c = w->heap[0];
    nhb__srv_heap_remove(w, c);
    /* Sends what is due and puts the connection back if more waits. */
    nhb__srv_conn_flush(c);
  }
  /* Re-arming also clears the timerfd's expiration count; only when nothing
   * is pending must it be read, or the level-triggered poll would spin. */
  if (w->heap_len) heap_arm(w);
  else nhb__timerfd_drain(w->timer_fd);
}
