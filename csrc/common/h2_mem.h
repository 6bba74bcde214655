/* h2_mem.h: a recycling allocator for nghttp2, shared by the client's HTTP/2
 * session and the test server's.
 *
 * nghttp2 allocates a few small blocks for every stream (the stream, its
 * outbound item, a copy of the header array, one buffer per received
 * header). Through this allocator the small blocks come from per-owner free
 * lists, so that a busy worker reuses them instead of calling malloc for
 * every request. One nhb__h2_mem belongs to one thread (a client or server
 * worker) and must outlive every session that uses it.
 */
#ifndef NHB_H2_MEM_H
#define NHB_H2_MEM_H

#include <nghttp2/nghttp2.h>

#define NHB__H2_MEM_CLASSES 64

typedef struct nhb__h2_mem {
  void* free[NHB__H2_MEM_CLASSES]; /* one free list per 16-byte size class */
} nhb__h2_mem;

/* The allocator to hand to nghttp2_session_*_new3(); nghttp2 copies it. */
nghttp2_mem nhb__h2_mem_allocator(nhb__h2_mem* m);
/* Frees the blocks on the lists; every session using `m` must be gone. */
void nhb__h2_mem_release(nhb__h2_mem* m);

#endif /* NHB_H2_MEM_H */
