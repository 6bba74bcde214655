/* fuzz_sse.c: the Server-Sent Events splitter (stream.c, nhb__sse_feed).
 * The input is split at its first 0xFF byte (a byte no UTF-8 text holds):
 * the event stream, then a list of cut points (each byte a piece length,
 * 0 = an empty piece) that feed the stream to the splitter in pieces.
 * Invariants: the pieces dispatch exactly as many events as the whole
 * stream in one block, and as many as a reference parser written from the
 * WHATWG EventSource rules line by line (lines split at CR, LF or CRLF over
 * the whole text, one leading BOM dropped, a blank line dispatching when a
 * "data" field came since the last one, an unterminated last line dropped). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"

static uint32_t reference(const char* s, size_t n) {
  size_t i = 0;
  if (n >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0) i = 3;
  uint32_t events = 0;
  int has_data = 0;
  while (i < n) {
    size_t start = i;
    while (i < n && s[i] != '\r' && s[i] != '\n') i++;
    if (i == n) break; /* no line end: the stream ended inside the line */
    size_t len = i - start;
    if (s[i] == '\r' && i + 1 < n && s[i + 1] == '\n') i++;
    i++;
    if (len == 0) {
      events += (uint32_t)has_data;
      has_data = 0;
      continue;
    }
    const char* colon = memchr(s + start, ':', len);
    size_t name_len = colon != NULL ? (size_t)(colon - (s + start)) : len;
    if (name_len == 4 && memcmp(s + start, "data", 4) == 0) has_data = 1;
  }
  return events;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const uint8_t* cut = memchr(data, 0xFF, size);
  size_t doc_len = cut != NULL ? (size_t)(cut - data) : size;
  const uint8_t* cuts = cut != NULL ? cut + 1 : data + size;
  size_t ncuts = size - (size_t)(cuts - data);
  /* A copy of exactly doc_len bytes, so that ASan catches any read past it. */
  char* doc = malloc(doc_len ? doc_len : 1);
  if (doc == NULL) return 0;
  memcpy(doc, data, doc_len);

  nhb__sse whole;
  memset(&whole, 0, sizeof(whole));
  uint32_t one = nhb__sse_feed(&whole, doc, doc_len);

  nhb__sse split;
  memset(&split, 0, sizeof(split));
  uint32_t pieces = 0;
  size_t at = 0, k = 0;
  while (at < doc_len) {
    size_t piece = k < ncuts ? (size_t)cuts[k++] : doc_len - at;
    if (piece > doc_len - at) piece = doc_len - at;
    /* Each piece from its own copy: the splitter keeps no pointer into it. */
    char* p = malloc(piece ? piece : 1);
    if (p == NULL) break;
    memcpy(p, doc + at, piece);
    pieces += nhb__sse_feed(&split, p, piece);
    free(p);
    at += piece;
    if (k > ncuts + doc_len) break;
  }
  if (at == doc_len && pieces != one) abort();
  if (one != reference(doc, doc_len)) abort();
  free(doc);
  return 0;
}
