/* util.c: thread pinning, the release timer, and the statistic name tables. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "common/internal.h"

const char* const nhb_counter_names[NHB_CTR_COUNT] = {
#define NHB__CTR_NAME(name, str) str,
    NHB_COUNTER_MAP(NHB__CTR_NAME)
#undef NHB__CTR_NAME
};

const char* const nhb_histogram_names[NHB_HIST_COUNT] = {
#define NHB__HIST_NAME(name, str) str,
    NHB_HISTOGRAM_MAP(NHB__HIST_NAME)
#undef NHB__HIST_NAME
};

const char* const nhb_stream_names[NHB_STREAM_COUNT] = {
#define NHB__STREAM_NAME(name, str) str,
    NHB_STREAM_MAP(NHB__STREAM_NAME)
#undef NHB__STREAM_NAME
};

#define STATUS_PREFIX "benchmark.http_"
#define GRPC_STATUS_PREFIX "benchmark.grpc_status_"

/* "benchmark.grpc_status_<code>" with code 0..16 written the way
 * the result writes it (no leading zero), so that a typo is refused. */
static int grpc_status_lookup(const char* name) {
  size_t plen = sizeof(GRPC_STATUS_PREFIX) - 1;
  if (strncmp(name, GRPC_STATUS_PREFIX, plen) != 0) return -1;
  const char* d = name + plen;
  int code = 0, n = 0;
  for (; d[n] >= '0' && d[n] <= '9' && n < 3; n++) code = code * 10 + (d[n] - '0');
  if (n == 0 || d[n] != '\0' || (n > 1 && d[0] == '0') || code >= NHB_GRPC_STATUS_COUNT) return -1;
  return NHB_GRPC_STATUS_ID + code;
}

#define CHECK_PREFIX "check."

/* "check.<index>.pass|fail", index 0..NHB_MAX_CHECKS-1 without a leading
 * zero: the core's name for a check's counter (the binding gives the
 * check's own name and translates). */
static int check_lookup(const char* name) {
  size_t plen = sizeof(CHECK_PREFIX) - 1;
  if (strncmp(name, CHECK_PREFIX, plen) != 0) return -1;
  const char* d = name + plen;
  int index = 0, n = 0;
  for (; d[n] >= '0' && d[n] <= '9' && n < 3; n++) index = index * 10 + (d[n] - '0');
  if (n == 0 || (n > 1 && d[0] == '0') || index >= NHB_MAX_CHECKS) return -1;
  if (strcmp(d + n, ".pass") == 0) return NHB_CHECK_PASS_ID + index;
  if (strcmp(d + n, ".fail") == 0) return NHB_CHECK_FAIL_ID + index;
  return -1;
}

int nhb_counter_lookup(const char* name) {
  for (int i = 0; i < NHB_CTR_COUNT; i++)
    if (strcmp(nhb_counter_names[i], name) == 0) return i;
  int grpc = grpc_status_lookup(name);
  if (grpc >= 0) return grpc;
  int check = check_lookup(name);
  if (check >= 0) return check;
  /* Exactly three digits, so that "benchmark.http_0200" or "benchmark.http_2"
   * is not taken for a code, the way a typo must not silently mean something. */
  size_t plen = sizeof(STATUS_PREFIX) - 1;
  if (strncmp(name, STATUS_PREFIX, plen) != 0) return -1;
  const char* d = name + plen;
  for (int i = 0; i < 3; i++)
    if (d[i] < '0' || d[i] > '9') return -1;
  if (d[3] != '\0') return -1;
  int code = (d[0] - '0') * 100 + (d[1] - '0') * 10 + (d[2] - '0');
  if (code < NHB_STATUS_MIN || code > NHB_STATUS_MAX) return -1;
  return NHB_CTR_COUNT + code - NHB_STATUS_MIN;
}

int nhb_counter_name(int id, char* buf, size_t len) {
  if (len == 0) return -1;
  buf[0] = '\0';
  if (id >= 0 && id < NHB_CTR_COUNT) {
    snprintf(buf, len, "%s", nhb_counter_names[id]);
    return 0;
  }
  if (id >= NHB_CTR_COUNT && id < NHB_GRPC_STATUS_ID) {
    snprintf(buf, len, STATUS_PREFIX "%d", id - NHB_CTR_COUNT + NHB_STATUS_MIN);
    return 0;
  }
  if (id >= NHB_GRPC_STATUS_ID && id < NHB_CHECK_PASS_ID) {
    snprintf(buf, len, GRPC_STATUS_PREFIX "%d", id - NHB_GRPC_STATUS_ID);
    return 0;
  }
  if (id >= NHB_CHECK_PASS_ID && id < NHB_COUNTER_ID_COUNT) {
    int fail = id >= NHB_CHECK_FAIL_ID;
    snprintf(buf, len, CHECK_PREFIX "%d.%s", id - (fail ? NHB_CHECK_FAIL_ID : NHB_CHECK_PASS_ID),
             fail ? "fail" : "pass");
    return 0;
  }
  return -1;
}

int nhb__pin_thread(int cpu) {
  /* The kernel may defer a sleeping thread's wake-up by its timer slack (50 us
   * by default) to batch wake-ups; release timing wants it as exact as it can
   * be, so the slack is set to its minimum for every engine thread. */
  prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  if (cpu < 0) return 0;
  if (cpu >= CPU_SETSIZE) return NHB_ECPU;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0 ? 0 : NHB_ECPU;
}

int nhb__timerfd_create(void) {
  int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  return fd >= 0 ? fd : NHB_ETIMERFD;
}

int nhb__timerfd_arm(int fd, uint64_t deadline_ns) {
  struct itimerspec its;
  memset(&its, 0, sizeof(its));
  /* A zero it_value would disarm the timer; a deadline in the past must fire
   * at once instead, so it is clamped to 1 ns after the epoch. */
  if (deadline_ns == 0) deadline_ns = 1;
  its.it_value.tv_sec = (time_t)(deadline_ns / NHB__NS_PER_S);
  its.it_value.tv_nsec = (long)(deadline_ns % NHB__NS_PER_S);
  return timerfd_settime(fd, TFD_TIMER_ABSTIME, &its, NULL) == 0 ? 0 : -errno;
}

void nhb__timerfd_drain(int fd) {
  uint64_t expirations;
  ssize_t n;
  do {
    n = read(fd, &expirations, sizeof(expirations));
  } while (n < 0 && errno == EINTR);
}
