/* h2_mem.c: the recycling allocator for nghttp2 (see h2_mem.h).
 *
 * Small blocks come in 16-byte size classes up to 1 KiB; larger blocks (frame
 * buffers, the HPACK tables) go to malloc. Each block carries a 16-byte
 * header, which keeps the 16-byte alignment malloc gives. The lists only grow
 * to the owner's peak and are freed by nhb__h2_mem_release().
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/h2_mem.h"

#define H2_MEM_STEP 16

typedef struct h2_block {
  size_t cls;  /* size class (1..NHB__H2_MEM_CLASSES), 0 for a block from malloc */
  size_t size; /* cls 0: the usable size; on a free list: unused */
} h2_block;

typedef struct h2_free {
  struct h2_free* next;
} h2_free;

static void* h2_malloc(size_t size, void* user_data) {
  nhb__h2_mem* m = (nhb__h2_mem*)user_data;
  size_t cls = size == 0 ? 1 : (size + H2_MEM_STEP - 1) / H2_MEM_STEP;
  h2_block* b;
  if (cls <= NHB__H2_MEM_CLASSES) {
    h2_free* f = (h2_free*)m->free[cls - 1];
    if (f != NULL) {
      m->free[cls - 1] = f->next;
      b = (h2_block*)f;
    } else if ((b = malloc(sizeof(h2_block) + cls * H2_MEM_STEP)) == NULL) {
      return NULL;
    }
    b->cls = cls;
  } else {
    if ((b = malloc(sizeof(h2_block) + size)) == NULL) return NULL;
    b->cls = 0;
    b->size = size;
  }
  return b + 1;
}

static void h2_free_block(void* ptr, void* user_data) {
  if (ptr == NULL) return;
  nhb__h2_mem* m = (nhb__h2_mem*)user_data;
  h2_block* b = (h2_block*)ptr - 1;
  if (b->cls == 0) {
    free(b);
    return;
  }
  /* The list link overwrites the header: read the class first. */
  size_t cls = b->cls;
  h2_free* f = (h2_free*)b;
  f->next = (h2_free*)m->free[cls - 1];
  m->free[cls - 1] = f;
}

static void* h2_calloc(size_t nmemb, size_t size, void* user_data) {
  if (size != 0 && nmemb > SIZE_MAX / size) return NULL;
  void* p = h2_malloc(nmemb * size, user_data);
  if (p != NULL) memset(p, 0, nmemb * size);
  return p;
}

static void* h2_realloc(void* ptr, size_t size, void* user_data) {
  if (ptr == NULL) return h2_malloc(size, user_data);
  h2_block* b = (h2_block*)ptr - 1;
  size_t have = b->cls ? b->cls * H2_MEM_STEP : b->size;
  if (size <= have) return ptr;
  void* p = h2_malloc(size, user_data);
  if (p == NULL) return NULL;
  memcpy(p, ptr, have);
  h2_free_block(ptr, user_data);
  return p;
}

nghttp2_mem nhb__h2_mem_allocator(nhb__h2_mem* m) {
  nghttp2_mem mem = {m, h2_malloc, h2_free_block, h2_calloc, h2_realloc};
  return mem;
}

void nhb__h2_mem_release(nhb__h2_mem* m) {
  for (int i = 0; i < NHB__H2_MEM_CLASSES; i++) {
    h2_free* f = (h2_free*)m->free[i];
    while (f != NULL) {
      h2_free* next = f->next;
      free(f);
      f = next;
    }
    m->free[i] = NULL;
  }
}
