/* server_buf.c: the test server's two memory helpers.
 *
 * nhb__srv_buf is a growable byte buffer (request capture, rendered responses,
 * the stats JSON); nhb__srv_arena is a bump allocator over one block reserved up
 * front, for the option parsers, whose results must not move. Both are reused
 * for the life of their owner (a connection, a worker), so that once they
 * have grown to the largest request seen a request allocates nothing.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server_internal.h"

/* ---- buffers -------------------------------------------------------------- */

int nhb__srv_buf_reserve(nhb__srv_buf* b, size_t extra) {
  if (b->cap - b->len >= extra) return 0;
  size_t cap = b->cap ? b->cap : 256;
  while (cap - b->len < extra) {
    if (cap > SIZE_MAX / 2) return NHB_ENOMEM;
    cap *= 2;
  }
  char* p = realloc(b->p, cap);
  if (!p) return NHB_ENOMEM;
  b->p = p;
  b->cap = cap;
  return 0;
}

int nhb__srv_buf_append_slow(nhb__srv_buf* b, const void* data, size_t n) {
  if (n == 0) return 0;
  if (nhb__srv_buf_reserve(b, n) < 0) return NHB_ENOMEM;
  memcpy(b->p + b->len, data, n);
  b->len += n;
  return 0;
}

int nhb__srv_buf_printf(nhb__srv_buf* b, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char small[256];
  int n = vsnprintf(small, sizeof(small), fmt, ap);
  va_end(ap);
  if (n < 0) return NHB_EINVAL;
  if ((size_t)n < sizeof(small)) return nhb__srv_buf_append(b, small, (size_t)n);
  if (nhb__srv_buf_reserve(b, (size_t)n + 1) < 0) return NHB_ENOMEM;
  va_start(ap, fmt);
  vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
  return 0;
}

void nhb__srv_buf_free(nhb__srv_buf* b) {
  free(b->p);
  b->p = NULL;
  b->len = b->cap = 0;
}

/* ---- arenas --------------------------------------------------------------- */

int nhb__srv_arena_reset(nhb__srv_arena* a, size_t cap) {
  a->len = 0;
  if (a->cap >= cap) return 0;
  /* Grow geometrically so that a worker's arenas settle after a few
   * requests; the old contents are dead at a reset, hence free + malloc. */
  size_t want = a->cap ? a->cap : 1024;
  while (want < cap) want *= 2;
  char* p = malloc(want);
  if (!p) return NHB_ENOMEM;
  free(a->base);
  a->base = p;
  a->cap = want;
  return 0;
}

void* nhb__srv_arena_alloc(nhb__srv_arena* a, size_t n) {
  size_t start = (a->len + 7) & ~(size_t)7;
  if (start > a->cap || a->cap - start < n) return NULL;
  a->len = start + n;
  return a->base + start;
}

void nhb__srv_arena_free(nhb__srv_arena* a) {
  free(a->base);
  a->base = NULL;
  a->len = a->cap = 0;
}
