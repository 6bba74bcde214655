/* fuzz_check.c: the response checks' evaluators (check.c): the RFC 6901 JSON
 * pointer over a bounded document and the streaming substring matcher, fed
 * from one input. The input is split in three at its first two 0xFF bytes:
 * a JSON pointer (also the needle, capped at NHB_CHECK_TEXT_MAX), the
 * document, and a list of cut points (each byte a piece length) that feed the
 * document to the matcher in pieces. Invariants: the pointer evaluator never
 * reads outside the document and a value it returns lies inside it; the
 * streaming matcher finds the needle exactly when memmem over the whole
 * document does, whatever the pieces; the window never exceeds n - 1 bytes. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const uint8_t* a = memchr(data, 0xFF, size);
  if (a == NULL) return 0;
  const uint8_t* b = memchr(a + 1, 0xFF, size - (size_t)(a + 1 - data));
  if (b == NULL) return 0;
  size_t ptr_len = (size_t)(a - data);
  const char* ptr = (const char*)data;
  size_t doc_len = (size_t)(b - (a + 1));
  /* A copy of exactly doc_len bytes, so that ASan catches any read past it. */
  char* doc = malloc(doc_len ? doc_len : 1);
  if (doc == NULL) return 0;
  memcpy(doc, a + 1, doc_len);
  const uint8_t* cuts = b + 1;
  size_t ncuts = size - (size_t)(cuts - data);

  const char* val = NULL;
  size_t val_len = 0;
  if (nhb__json_pointer(doc, doc_len, ptr, ptr_len, &val, &val_len)) {
    if (val < doc || val + val_len > doc + doc_len || val_len == 0) abort();
  }

  size_t n = ptr_len < NHB_CHECK_TEXT_MAX ? ptr_len : NHB_CHECK_TEXT_MAX;
  if (n > 0) {
    char win[NHB_CHECK_TEXT_MAX];
    uint32_t win_len = 0;
    int found = 0;
    size_t at = 0, k = 0;
    while (at < doc_len && !found) {
      size_t piece = k < ncuts ? (size_t)cuts[k++] : doc_len - at;
      if (piece > doc_len - at) piece = doc_len - at;
      found = nhb__chk_find(ptr, n, win, &win_len, doc + at, piece);
      if (win_len > n - 1) abort();
      at += piece;
    }
    int expect = doc_len >= n && memmem(doc, doc_len, ptr, n) != NULL;
    if (found != expect) abort();
  }
  free(doc);
  return 0;
}
