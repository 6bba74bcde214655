/* fuzz_server_options.c: the test server's option parsers (server_options.c).
 *
 * The first input byte picks the parser, the rest is its text:
 *   0  nhb__srv_parse_duration   ("1.5s", "150us", "1m30s", "2")
 *   1  nhb__srv_nh_parse         (x-nighthawk-test-server-config JSON)
 *   2  nhb__srv_echo_parse       (Fortio query: delay=10ms:50,0:50&status=...)
 *   3  nhb__srv_token_ok / nhb__srv_value_ok
 * The text is copied into a buffer of exactly its length, without a NUL, so
 * that AddressSanitizer catches any read past the end (the server hands these
 * parsers slices of its read buffer, never NUL-terminated strings).
 *
 * Besides memory safety, what a successful parse returns must make sense:
 * probability lists are cumulative and end at or below 100 percent, values
 * respect the caps given to the parser, header names are tokens and values
 * legal field values, and every string points into the arena.
 */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/server_internal.h"

/* The caps the fuzzed server would run with (nhbench server's defaults are
 * larger; the values only have to be checked against). */
#define MAX_DELAY_NS (5ULL * 1000000000ULL)
#define MAX_SIZE (256u * 1024u)

static nhb__srv_arena arena;

static int in_arena(const nhb__srv_arena* a, const char* p, size_t len) {
  return len == 0 || (p >= a->base && p + len <= a->base + a->len);
}

static void check_choices(const nhb__srv_choices* c, int64_t lo, int64_t hi) {
  if (!c->present) {
    assert(c->n == 0);
    return;
  }
  assert(c->n >= 0 && c->n <= NHB__SRV_MAX_CHOICES);
  double prev = 0;
  for (int i = 0; i < c->n; i++) {
    assert(c->cum[i] >= prev);
    assert(c->cum[i] <= 100 + 1e-6);
    assert(c->val[i] >= lo && c->val[i] <= hi);
    prev = c->cum[i];
  }
  /* A draw picks one of the values or the default, nothing else. */
  static const double draws[] = {0.0, 0.5, 49.999, 50.0, 99.999};
  for (size_t k = 0; k < sizeof(draws) / sizeof(draws[0]); k++) {
    int64_t v = nhb__srv_choose(c, draws[k], -1);
    int found = v == -1;
    for (int i = 0; i < c->n && !found; i++) found = c->val[i] == v;
    assert(found);
  }
}

static void check_headers(const nhb__srv_arena* a, const nhb__srv_header* h, size_t n) {
  for (size_t i = 0; i < n; i++) {
    assert(h[i].name.len > 0);
    assert(nhb__srv_token_ok(h[i].name.p, h[i].name.len));
    assert(nhb__srv_value_ok(h[i].value.p, h[i].value.len));
    assert(in_arena(a, h[i].name.p, h[i].name.len));
    assert(in_arena(a, h[i].value.p, h[i].value.len));
  }
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  int which = data[0] & 3;
  size_t len = size - 1;
  /* malloc(0) may return NULL; keep a valid pointer for empty texts. */
  char* text = malloc(len ? len : 1);
  if (!text) return 0;
  memcpy(text, data + 1, len);
  char err[256];
  err[0] = '\0';
  switch (which) {
    case 0: {
      uint64_t ns = 0;
      if (nhb__srv_parse_duration(text, len, &ns) == 0) {
        /* The same text gives the same duration. */
        uint64_t again = 1;
        assert(nhb__srv_parse_duration(text, len, &again) == 0 && again == ns);
      }
      break;
    }
    case 1: {
      nhb__srv_nh_opts o;
      if (nhb__srv_nh_parse(text, len, &o, &arena, err, sizeof(err)) == 0) {
        if (o.has_body_size) assert(o.body_size <= NHB__SRV_NH_MAX_BODY);
        assert(o.delay_kind == NHB__SRV_DELAY_NONE || o.delay_kind == NHB__SRV_DELAY_STATIC ||
               o.delay_kind == NHB__SRV_DELAY_LINEAR);
        check_headers(&arena, o.headers, o.nheaders);
        if (o.has_emit) assert(in_arena(&arena, o.emit_header.p, o.emit_header.len));
      } else {
        /* A failure always says why, in one line. */
        assert(err[0] != '\0' && strchr(err, '\n') == NULL);
      }
      break;
    }
    case 2: {
      nhb__srv_echo_opts o;
      if (nhb__srv_echo_parse(text, len, MAX_DELAY_NS, MAX_SIZE, &o, &arena, err, sizeof(err)) == 0) {
        check_choices(&o.delay, 0, (int64_t)MAX_DELAY_NS);
        check_choices(&o.status, 200, NHB_SERVER_STATUS_MAX - 1);
        check_choices(&o.size, 0, MAX_SIZE);
        check_choices(&o.close, 0, 1);
        check_choices(&o.gzip, 0, 1);
        if (o.has_stall) assert(o.stall_ns <= MAX_DELAY_NS);
        assert(o.nheaders <= NHB__SRV_MAX_ECHO_HEADERS);
        check_headers(&arena, o.headers, o.nheaders);
      } else {
        assert(err[0] != '\0' && strchr(err, '\n') == NULL);
      }
      break;
    }
    default: {
      int tok = nhb__srv_token_ok(text, len);
      int val = nhb__srv_value_ok(text, len);
      /* A token is never empty and never holds what a value may not. */
      if (tok) assert(len > 0 && val);
      break;
    }
  }
  free(text);
  return 0;
}
