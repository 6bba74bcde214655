/* internal.h: helpers shared by the C core's translation units (nhb__ prefix). */
#ifndef NHB_INTERNAL_H
#define NHB_INTERNAL_H

#include <stdint.h>
#include <time.h>

#include "nhb.h"

#define NHB__NS_PER_S 1000000000ULL
#define NHB__NS_PER_MS 1000000ULL

/* The core's one clock: CLOCK_MONOTONIC in nanoseconds. libuv's uv_now() is
 * millisecond-granular and cached per loop iteration, which is too coarse for
 * release scheduling and latency, so every timestamp comes from here (a vDSO
 * call, about 20 ns). */
static inline uint64_t nhb__now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * NHB__NS_PER_S + (uint64_t)ts.tv_nsec;
}

static inline uint64_t nhb__realtime_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * NHB__NS_PER_S + (uint64_t)ts.tv_nsec;
}

/* Pins the calling thread to one CPU; returns 0 or NHB_ECPU. */
int nhb__pin_thread(int cpu);

/* A timerfd armed at absolute CLOCK_MONOTONIC times: the sub-millisecond wake-up
 * that libuv's own timers cannot give. Returns the fd or a negative code. */
int nhb__timerfd_create(void);
int nhb__timerfd_arm(int fd, uint64_t deadline_ns);
void nhb__timerfd_drain(int fd);

#define NHB__UNUSED(x) ((void)(x))
#define NHB__LIKELY(x) __builtin_expect(!!(x), 1)
#define NHB__UNLIKELY(x) __builtin_expect(!!(x), 0)

#endif /* NHB_INTERNAL_H */
