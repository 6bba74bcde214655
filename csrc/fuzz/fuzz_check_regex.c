/* fuzz_check_regex.c: the response checks' regular expressions
 * (check_regex.c, Vectorscan's streaming mode) against a one-block match.
 *
 * Input: FLAGS PATTERN 0xFF DOCUMENT 0xFF CUTS. FLAGS' low bits pick i, s
 * and m; with bit 0x80 the pattern is one of a fixed table (by PATTERN's
 * first byte) rather than PATTERN itself, so that most inputs reach the
 * matcher rather than the compiler. A body check and a header check of the
 * same pattern are fed the document in the pieces CUTS gives (each byte a
 * length), after a first response cut short half-way (its streams must be
 * reset by the next response's begin).
 *
 * Invariants: a pattern the core accepts compiles in block mode too, and
 * each check passes exactly when Vectorscan's block scan of the whole
 * document (for the header, without its last 64 trailing blanks at most)
 * finds a match, whatever the pieces. The last set compiled is kept
 * (libFuzzer mostly mutates the document), so a pattern compiles once. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"

#ifdef NHB_HAVE_VECTORSCAN
#include <hs/hs.h>

static const char* const fixed[] = {
    "needle", "^\\{\"ok\":true", "\"error\"\\s*:", "(a|aa)*b", "x[0-9]{3,5}y$", "^$|z", "a.b",
    "\\bword\\b", "(foo|bar|baz)+qux", "[^\\n]{10}\\n", "^v[0-9]+\\.[0-9]+$", "(?i)CaSe",
};
#define NFIXED (sizeof(fixed) / sizeof(fixed[0]))

static struct {
  int ready;
  char pat[NHB_CHECK_TEXT_MAX + 1];
  char flags[4];
  nhb__chk_set set;
  nhb__chk_state* st;
  hs_database_t* block;
  hs_scratch_t* scratch;
} cache;

static void drop(void) {
  if (cache.st != NULL) nhb__chk_state_free(&cache.set, cache.st);
  nhb__chk_set_free(&cache.set);
  if (cache.block != NULL) hs_free_database(cache.block);
  if (cache.scratch != NULL) hs_free_scratch(cache.scratch);
  memset(&cache, 0, sizeof(cache));
}

/* 1: ready; 0: the core refused the pattern (then block mode may refuse it
 * too, or accept it only because the stream bounds are the core's). */
static int prepare(const char* pat, const char* flags) {
  if (cache.ready && strcmp(pat, cache.pat) == 0 && strcmp(flags, cache.flags) == 0) return cache.ready == 1;
  drop();
  snprintf(cache.pat, sizeof(cache.pat), "%s", pat);
  snprintf(cache.flags, sizeof(cache.flags), "%s", flags);
  nhb_check c[2];
  memset(c, 0, sizeof(c));
  c[0].kind = NHB_CHECK_BODY_RE;
  c[1].kind = NHB_CHECK_HEADER_RE;
  c[1].header = "x-v";
  c[1].header_len = 3;
  for (int k = 0; k < 2; k++) {
    c[k].text = cache.pat;
    c[k].text_len = strlen(cache.pat);
    c[k].value = cache.flags;
    c[k].value_len = strlen(cache.flags);
  }
  char err[512];
  if (nhb__chk_set_init(&cache.set, c, 2, 0, err, sizeof(err)) < 0) abort();
  if (nhb__chk_re_init(&cache.set, 1, err, sizeof(err)) < 0) {
    cache.ready = 2; /* refused: remembered so that it is not compiled again */
    return 0;
  }
  if ((cache.st = nhb__chk_state_new(&cache.set, 0)) == NULL) abort();
  unsigned f = HS_FLAG_SINGLEMATCH;
  for (const char* p = flags; *p; p++)
    f |= *p == 'i' ? HS_FLAG_CASELESS : *p == 's' ? HS_FLAG_DOTALL : HS_FLAG_MULTILINE;
  hs_compile_error_t* ce = NULL;
  if (hs_compile(cache.pat, f, HS_MODE_BLOCK, NULL, &cache.block, &ce) != HS_SUCCESS) abort();
  if (hs_alloc_scratch(cache.block, &cache.scratch) != HS_SUCCESS) abort();
  cache.ready = 1;
  return 1;
}

static int on_block(unsigned int id, unsigned long long from, unsigned long long to, unsigned int flags, void* ctx) {
  (void)id;
  (void)from;
  (void)to;
  (void)flags;
  *(int*)ctx = 1;
  return 1;
}

/* One response whose x-v header value and body are doc, fed in pieces. */
static uint32_t respond(const char* doc, size_t len, const uint8_t* cuts, size_t ncuts, size_t stop) {
  nhb__chk_set* set = &cache.set;
  nhb__chk_state* st = cache.st;
  nhb__chk_begin(set, st, 0);
  nhb__chk_name(set, st, "X-", 2);
  nhb__chk_name(set, st, "V", 1);
  size_t at = 0, k = 0;
  while (at < len && at < stop) {
    size_t piece = k < ncuts ? (size_t)cuts[k++] : len - at;
    if (piece > len - at) piece = len - at;
    nhb__chk_value(set, st, doc + at, piece);
    at += piece;
  }
  if (stop < len) return 0; /* cut short: no value end, no body, no finish */
  nhb__chk_value_end(set, st);
  at = 0;
  k = ncuts / 2;
  while (at < len) {
    size_t piece = k < ncuts ? (size_t)cuts[k++] : len - at;
    if (piece > len - at) piece = len - at;
    nhb__chk_body(set, st, doc + at, piece);
    at += piece;
  }
  return nhb__chk_finish(set, st, 200, len);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  uint8_t fl = data[0];
  const uint8_t* a = memchr(data + 1, 0xFF, size - 1);
  if (a == NULL) return 0;
  const uint8_t* b = memchr(a + 1, 0xFF, size - (size_t)(a + 1 - data));
  if (b == NULL) return 0;
  char pat[NHB_CHECK_TEXT_MAX + 1];
  size_t plen = (size_t)(a - (data + 1));
  if (fl & 0x80) {
    snprintf(pat, sizeof(pat), "%s", fixed[plen > 0 ? data[1] % NFIXED : 0]);
  } else {
    if (plen == 0 || plen > NHB_CHECK_TEXT_MAX || memchr(data + 1, 0, plen) != NULL) return 0;
    memcpy(pat, data + 1, plen);
    pat[plen] = '\0';
  }
  char flags[4];
  size_t nf = 0;
  if (fl & 1) flags[nf++] = 'i';
  if (fl & 2) flags[nf++] = 's';
  if (fl & 4) flags[nf++] = 'm';
  flags[nf] = '\0';
  if (!prepare(pat, flags)) return 0;

  size_t len = (size_t)(b - (a + 1));
  /* A copy of exactly len bytes, so that ASan catches any read past it. */
  char* doc = malloc(len ? len : 1);
  if (doc == NULL) return 0;
  memcpy(doc, a + 1, len);
  const uint8_t* cuts = b + 1;
  size_t ncuts = size - (size_t)(cuts - data);

  int expect = 0, expect_hdr = 0;
  if (hs_scan(cache.block, doc, (unsigned)len, 0, cache.scratch, on_block, &expect) != HS_SUCCESS &&
      expect == 0)
    abort();
  /* A header value is matched without its last 64 trailing blanks at most. */
  size_t vlen = len;
  while (vlen > 0 && len - vlen < 64 && (doc[vlen - 1] == ' ' || doc[vlen - 1] == '\t')) vlen--;
  if (hs_scan(cache.block, doc, (unsigned)vlen, 0, cache.scratch, on_block, &expect_hdr) != HS_SUCCESS &&
      expect_hdr == 0)
    abort();
  respond(doc, len, cuts, ncuts, len / 2); /* cut short */
  uint32_t failed = respond(doc, len, cuts, ncuts, SIZE_MAX);
  if (((failed & 1u) == 0) != (expect == 1)) abort(); /* the body check */
  if (((failed & 2u) == 0) != (expect_hdr == 1)) abort(); /* the header check */
  free(doc);
  return 0;
}

#else /* built without Vectorscan: nothing to fuzz */

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)data;
  (void)size;
  return 0;
}

#endif
