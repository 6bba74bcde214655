/* session_h1.c: the HTTP/1.1 protocol session, parsing responses with llhttp.
 *
 * One request is in flight per connection (no pipelining, as in Nighthawk),
 * so the request being answered is always the connection's only slot. The
 * request bytes were rendered once for the whole run (one entry of the run's
 * request set, request.c), so sending is a single write of shared memory;
 * a templated request is first expanded into the connection's buffer. llhttp's callbacks only add up sizes; the parser is
 * paused at the end of each response so the pool can act on the response
 * outside the parser.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "client/client.h"

#define CONN_OF(parser) ((nhb__conn*)(parser)->data)

static int h1_on_message_begin(llhttp_t* p) {
  nhb__conn* c = CONN_OF(p);
  c->header_bytes = 0;
  c->body_bytes = 0;
  /* "HTTP/1.1 200 " and the line end; the reason phrase comes in on_status. */
  c->h1_block_bytes = 15;
  c->h1_block_fields = 0;
  return 0;
}

/* The per-request state of the response limits: at the start of a
 * connection and after each final response. */
static void h1_limits_reset(nhb__conn* c) {
  c->h1_interims = 0;
  c->h1_in_body = 0;
  c->h1_head_raw = 0;
  c->h1_limit = NULL;
}

/* The response limits (client.h, NHB__RESP_*): returns -1, which stops
 * llhttp, with the reason kept for the error text. */
static int h1_over(nhb__conn* c, const char* why) {
  c->h1_limit = why;
  return -1;
}

#define H1_OVER_BYTES "a header block over 98304 bytes (the client's limit on a response's head or trailers)"

static inline int h1_block_grow(nhb__conn* c, size_t len) {
  /* Each piece is at most one read (NHB__READ_BUFFER_SIZE), so the sum
   * cannot wrap before it is checked. */
  c->h1_block_bytes += (uint32_t)len;
  if (NHB__UNLIKELY(c->h1_block_bytes > NHB__RESP_HEADER_BYTES)) return h1_over(c, H1_OVER_BYTES);
  return 0;
}

static int h1_on_status(llhttp_t* p, const char* at, size_t len) {
  NHB__UNUSED(at);
  return h1_block_grow(CONN_OF(p), len);
}

/* Header size is counted as Envoy's HeaderMap::byteSize() counts it (names
 * plus values), so that it matches Nighthawk's response_header_size. */
static int h1_on_header_field(llhttp_t* p, const char* at, size_t len) {
  nhb__conn* c = CONN_OF(p);
  c->header_bytes += len;
  if (NHB__UNLIKELY(h1_block_grow(c, len) < 0)) return -1;
  c->hdr_open = 1;
  c->hdr_gap_lf = 0;
  c->hdr_gap = at + len;
  return 0;
}

/* llhttp 8 accepts obs-fold (a header line continued on the next line after
 * a space) in strict mode too and hands the value over in pieces with the
 * fold left out, so "Transfer-Encoding:\r\n chunked" frames the body as
 * chunked. RFC 9112 section 5.2 forbids servers to send it; a load tester
 * that accepted it would count responses that other clients read
 * differently. Within one header line, the only bytes llhttp skips between
 * the name and a value piece, or between two value pieces, are the colon and
 * white space; a line feed there is a fold, and the response is rejected.
 * Pieces split by a read boundary leave no gap (hdr_gap_lf carries a line
 * feed seen at the end of the previous read). */
static int h1_on_header_value(llhttp_t* p, const char* at, size_t len) {
  nhb__conn* c = CONN_OF(p);
  /* llhttp reports an empty value as an empty piece once it has seen the
   * line end; a fold needs a non-empty piece after it to change anything. */
  if (len == 0) return 0;
  c->header_bytes += len;
  if (NHB__UNLIKELY(h1_block_grow(c, len) < 0)) return -1;
  if (NHB__UNLIKELY(c->hdr_gap_lf) || (at > c->hdr_gap && memchr(c->hdr_gap, '\n', (size_t)(at - c->hdr_gap))))
    return -1;
  c->hdr_gap = at + len;
  return 0;
}

static int h1_on_header_value_complete(llhttp_t* p) {
  nhb__conn* c = CONN_OF(p);
  c->hdr_open = 0;
  if (NHB__UNLIKELY(++c->h1_block_fields > NHB__RESP_HEADER_FIELDS))
    return h1_over(c, "a header block of more than 1000 fields (the client's limit)");
  /* ": " and the line end */
  return h1_block_grow(c, 4);
}

static int h1_on_headers_complete(llhttp_t* p) {
  nhb__conn* c = CONN_OF(p);
  c->hdr_open = 0;
  /* The head is over: trailers, if any, are a block of their own. */
  c->h1_in_body = 1;
  c->h1_head_raw = 0;
  c->h1_block_bytes = 0;
  c->h1_block_fields = 0;
  if (NHB__UNLIKELY(p->content_length > NHB__BODY_MAX) && (p->flags & F_CONTENT_LENGTH))
    return h1_over(c, "a Content-Length over 2^63 - 1");
  int status = llhttp_get_status_code(p);
  /* Returning 1 tells llhttp that this response has no body. llhttp leaves it
   * to the caller to know which ones: responses to HEAD, 1xx, 204 and 304
   * (RFC 9112 section 6.3), whatever their Content-Length says. */
  const nhb_run* run = c->worker->run;
  if (run->specs[c->slots->rq.spec].head_request || status < 200 || status == 204 || status == 304) return 1;
  return 0;
}

/* llhttp takes a chunk size up to 2^64 - 1 (16 hex digits) and would wait
 * for all of it. */
static int h1_on_chunk_header(llhttp_t* p) {
  if (NHB__UNLIKELY(p->content_length > NHB__BODY_MAX)) return h1_over(CONN_OF(p), "a chunk size over 2^63 - 1");
  return 0;
}

static int h1_on_body(llhttp_t* p, const char* at, size_t len) {
  NHB__UNUSED(at);
  CONN_OF(p)->body_bytes += len;
  return 0;
}

static int h1_on_message_complete(llhttp_t* p) {
  nhb__conn* c = CONN_OF(p);
  int status = llhttp_get_status_code(p);
  /* Interim responses (100 Continue, 103 Early Hints) precede the real one. */
  if (status >= 100 && status < 200 && status != 101) {
    c->h1_in_body = 0;
    if (NHB__UNLIKELY(++c->h1_interims > NHB__RESP_INTERIM))
      return h1_over(c, "more than 100 interim (1xx) responses to one request (the client's limit)");
    return 0;
  }
  c->keep_alive = llhttp_should_keep_alive(p);
  if (!c->keep_alive) c->worker->stats.counters[NHB_CTR_UPSTREAM_CX_CLOSE_NOTIFY]++;
  /* Ready for the next request's response here rather than when it is sent,
   * so that a replayed response (which skips llhttp) pays nothing for it. */
  h1_limits_reset(c);
  /* An HTTP/1.0 request without keep-alive makes the connection last one
   * exchange (RFC 9112 section 9.3), whatever the server answers; Fortio's
   * -http1.0 closes it too. */
  if (NHB__UNLIKELY(c->worker->run->config.http10)) c->keep_alive = 0;
  c->response_done = 1;
  return HPE_PAUSED;
}

static const llhttp_settings_t h1_settings = {
    .on_message_begin = h1_on_message_begin,
    .on_status = h1_on_status,
    .on_chunk_header = h1_on_chunk_header,
    .on_header_field = h1_on_header_field,
    .on_header_value = h1_on_header_value,
    .on_header_value_complete = h1_on_header_value_complete,
    .on_headers_complete = h1_on_headers_complete,
    .on_body = h1_on_body,
    .on_message_complete = h1_on_message_complete,
};

/* The same callbacks plus the response observers (observer.c): each runs
 * the plain callback, then passes the event to the observer step, for runs
 * whose run->obs is not 0 (h1_open). A run without observers never reaches
 * these, so it pays nothing per field or body piece for them. Only the
 * head's fields are observed: trailers (fields after the head) are not
 * headers any observer looks at. */
static int h1_obs_on_message_begin(llhttp_t* p) {
  nhb__obs_h1_begin(CONN_OF(p));
  return h1_on_message_begin(p);
}

static int h1_obs_on_header_field(llhttp_t* p, const char* at, size_t len) {
  nhb__conn* c = CONN_OF(p);
  int r = h1_on_header_field(p, at, len);
  if (r == 0 && !c->h1_in_body) nhb__obs_h1_name(c, at, len);
  return r;
}

static int h1_obs_on_header_value(llhttp_t* p, const char* at, size_t len) {
  nhb__conn* c = CONN_OF(p);
  int r = h1_on_header_value(p, at, len);
  if (r == 0 && !c->h1_in_body) nhb__obs_h1_value(c, at, len);
  return r;
}

static int h1_obs_on_header_value_complete(llhttp_t* p) {
  nhb__conn* c = CONN_OF(p);
  if (!c->h1_in_body) nhb__obs_h1_value_end(c);
  return h1_on_header_value_complete(p);
}

static int h1_obs_on_headers_complete(llhttp_t* p) {
  nhb__obs_h1_head_end(CONN_OF(p), llhttp_get_status_code(p));
  return h1_on_headers_complete(p);
}

static int h1_obs_on_chunk_header(llhttp_t* p) {
  int r = h1_on_chunk_header(p);
  if (r == 0) nhb__obs_h1_chunk(CONN_OF(p), p->content_length);
  return r;
}

static int h1_obs_on_chunk_complete(llhttp_t* p) {
  nhb__obs_h1_chunk_end(CONN_OF(p));
  return 0;
}

static int h1_obs_on_body(llhttp_t* p, const char* at, size_t len) {
  nhb__conn* c = CONN_OF(p);
  c->body_bytes += len;
  nhb__obs_h1_body(c, at, len, (p->flags & F_CHUNKED) != 0);
  return 0;
}

static int h1_obs_on_message_complete(llhttp_t* p) {
  nhb__obs_h1_end(CONN_OF(p), llhttp_get_status_code(p));
  return h1_on_message_complete(p);
}

static const llhttp_settings_t h1_obs_settings = {
    .on_message_begin = h1_obs_on_message_begin,
    .on_status = h1_on_status,
    .on_chunk_header = h1_obs_on_chunk_header,
    .on_chunk_complete = h1_obs_on_chunk_complete,
    .on_header_field = h1_obs_on_header_field,
    .on_header_value = h1_obs_on_header_value,
    .on_header_value_complete = h1_obs_on_header_value_complete,
    .on_headers_complete = h1_obs_on_headers_complete,
    .on_body = h1_obs_on_body,
    .on_message_complete = h1_obs_on_message_complete,
};

/* Response-head replay. A load test asks the same request again and again,
 * and a server answers it with the same head: llhttp's state machine then
 * spends most of the client's instructions re-reading bytes it has read
 * before (docs/benchmarks.md, "Hot path"). llhttp's result is a
 * function of its state and the bytes it reads; at a message boundary of a
 * kept-alive connection its state is the same after every response, and the
 * bytes of a Content-Length body are counted, never inspected. So a read
 * that holds exactly one response whose head is byte-identical to a head that
 * llhttp parsed whole from a boundary, for the same request spec, parses as
 * that one did: same status, same header and body sizes, keep-alive, no
 * error. Such a read is answered from the copy without running llhttp; any
 * other read (a different byte, a different length, a response split across
 * reads or sharing one with other bytes) goes through llhttp as before. Only
 * heads up to NHB__H1_HEAD_MAX bytes are kept, in a buffer allocated once
 * per connection entry on the first cacheable response (idle connections
 * allocate nothing), and only when no per-response header callback is
 * needed (no latency response header).
 *
 * With response checks (check.c) the copy is kept with the checks' verdict
 * on it: the checks are functions of the response's bytes (and of the
 * request spec, which the copy is kept for), so a byte-identical response
 * has the same verdict, and it is counted again without llhttp or the check
 * callbacks. When a check reads the body (or the body is chunked), the
 * whole response is kept (up to NHB__H1_RESP_MAX bytes) and compared; when
 * the head decides every check, the head is, as without checks. Any byte
 * compared that differs sends the read through both, as without the copy.
 *
 * Varying values. Many origins add a value of their own to every response
 * (a request id, a time taken, the date): no two heads are byte-identical,
 * yet only those values change. When llhttp has parsed two heads in a row
 * (without checks) that differ only in the values of up to NHB__H1_VARY_MAX
 * fields, the kept head remembers where those values are, and a later head
 * is replayed when it has the kept head's bytes everywhere else and, in each
 * of those places, a value of any length made of printable ASCII with no
 * space at either end (llhttp reads such a value the same way whatever its
 * bytes, and reports exactly them). Fields that frame the response or the
 * connection (Content-Length, Transfer-Encoding, Connection,
 * Proxy-Connection, Upgrade), the status line, the names, their order and
 * the line ends are never among them: they are compared byte for byte, so
 * a response framed differently goes through llhttp. The header size is the
 * kept one plus the difference in the heads' lengths (the names are the
 * same; llhttp counts each value as its bytes). */
#define NHB__H1_HEAD_MAX 1024u
#define NHB__H1_RESP_MAX 16384u
/* A head with varying values may be longer than the kept one, up to this. */
#define NHB__H1_VARY_HEAD_MAX (2u * NHB__H1_HEAD_MAX)

/* The length of the value at `v` that ends at a CR within `n` bytes, when it
 * is clean: printable ASCII (0x20-0x7e), not empty, with no space at either
 * end; llhttp takes such a value whole, as one value of exactly these bytes.
 * SIZE_MAX otherwise (stricter than llhttp: a tab or obs-text sends the
 * response through it). One pass, sixteen bytes at a time with SSE2, then
 * eight at a time: a byte at or above
 * 0x7f (x, or x + 1 past 0x7f) or below 0x20 (x - 0x20 borrowing) sets its
 * high bit in `bad`, and the lowest one set is the first such byte (a carry
 * or borrow only crosses into the next byte from a byte that is itself
 * flagged), which must be the CR. */
static inline size_t h1_value_scan(const char* v, size_t n) {
  size_t i = 0;
#if defined(__SSE2__)
  /* Sixteen at a time where SSE2 is (every x86-64): as signed bytes, the
   * clean ones are those above 0x1f and below 0x7f. */
  const __m128i above = _mm_set1_epi8(0x1f), below = _mm_set1_epi8(0x7f);
  for (; i + 16 <= n; i += 16) {
    __m128i x = _mm_loadu_si128((const __m128i*)(const void*)(v + i));
    __m128i ok = _mm_and_si128(_mm_cmpgt_epi8(x, above), _mm_cmplt_epi8(x, below));
    unsigned bad = (unsigned)_mm_movemask_epi8(ok) ^ 0xffffu;
    if (bad != 0) {
      i += (size_t)__builtin_ctz(bad);
      goto found;
    }
  }
#endif
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
  for (; i + 8 <= n; i += 8) {
    uint64_t x;
    memcpy(&x, v + i, 8);
    uint64_t bad = (x | (x + ones) | ((x - 0x20 * ones) & ~x)) & highs;
    if (bad != 0) {
      i += (size_t)__builtin_ctzll(bad) >> 3;
      goto found;
    }
  }
#endif
  for (; i < n; i++) {
    unsigned char b = (unsigned char)v[i];
    if (b < 0x20 || b > 0x7e) goto found;
  }
  return SIZE_MAX;
found:
  if (v[i] != '\r' || i == 0 || v[0] == ' ' || v[i - 1] == ' ') return SIZE_MAX;
  return i;
}

/* Whether a field frames the response or the connection for llhttp. */
static int h1_framing_name(const char* name, size_t len) {
  static const char* const names[] = {"content-length", "transfer-encoding", "connection", "proxy-connection",
                                      "upgrade"};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
    if (strlen(names[i]) == len && strncasecmp(name, names[i], len) == 0) return 1;
  return 0;
}

/* The head `d` (`dl` bytes) that llhttp just parsed whole, for the kept
 * head's request spec with its status and body size, against the kept head:
 * the number of values that differ (or varied before), their places in `d`
 * in at/end (end: the value's CR). 0 when the heads differ in anything else
 * (see "Varying values" above), when a value is not clean, or when more than
 * NHB__H1_VARY_MAX vary: then only a byte-identical head is replayed. Both
 * heads passed llhttp; each line is walked to its CR. */
static uint32_t h1_vary_learn(const nhb__conn* c, const char* d, size_t dl, uint16_t* at, uint16_t* end) {
  const char* k = c->h1_head;
  size_t kl = c->h1_head_len;
  const char* kcr = memchr(k, '\r', kl);
  const char* dcr = memchr(d, '\r', dl);
  if (kcr == NULL || dcr == NULL || kcr - k != dcr - d || memcmp(k, d, (size_t)(kcr - k)) != 0) return 0;
  size_t kp = (size_t)(kcr - k), dp = kp;
  uint32_t n = 0, j = 0;
  for (;;) {
    /* kp, dp: the CR that ends a line in each. */
    if (kp + 2 >= kl || dp + 2 >= dl || k[kp + 1] != '\n' || d[dp + 1] != '\n') return 0;
    kp += 2;
    dp += 2;
    if (k[kp] == '\r' || d[dp] == '\r') {
      /* The blank line: the head's end in both. */
      int ends = kp + 2 == kl && dp + 2 == dl && k[kp] == '\r' && d[dp] == '\r' && k[kp + 1] == '\n' &&
                 d[dp + 1] == '\n';
      return ends ? n : 0;
    }
    const char* kline = k + kp;
    const char* dline = d + dp;
    kcr = memchr(kline, '\r', kl - kp);
    dcr = memchr(dline, '\r', dl - dp);
    if (kcr == NULL || dcr == NULL) return 0;
    const char* colon = memchr(kline, ':', (size_t)(kcr - kline));
    if (colon == NULL) return 0;
    size_t vs = (size_t)(colon - kline) + 1; /* the value's start: after the colon and white space */
    while (kline + vs < kcr && (kline[vs] == ' ' || kline[vs] == '\t')) vs++;
    size_t kll = (size_t)(kcr - kline), dll = (size_t)(dcr - dline);
    if (dll < vs || memcmp(kline, dline, vs) != 0) return 0;
    int was = j < c->h1_nvary && c->h1_vary_at[j] == kp + vs;
    if (was) j++;
    if (was || kll != dll || memcmp(kline + vs, dline + vs, kll - vs) != 0) {
      /* dline[dll] is the line's CR. */
      if (n == NHB__H1_VARY_MAX || h1_framing_name(kline, (size_t)(colon - kline)) ||
          h1_value_scan(dline + vs, dll - vs + 1) != dll - vs)
        return 0;
      at[n] = (uint16_t)(dp + vs);
      end[n] = (uint16_t)(dp + dll);
      n++;
    }
    kp += kll;
    dp += dll;
  }
}

/* Whether the head of `d`, `hl` bytes, is the kept head with other clean
 * values in its varying places (h1_vary_learn): 0 no, 2 with the kept values
 * in all of them, 1 with another in some. */
static inline int h1_vary_match(const nhb__conn* c, const char* d, size_t hl) {
  const char* k = c->h1_head;
  size_t kp = 0, dp = 0;
  int all_kept = 2;
  for (uint32_t i = 0; i < c->h1_nvary; i++) {
    /* The kept value again (a date within its second), through its CR:
     * nothing to scan. */
    size_t same = c->h1_vary_end[i] + 1u - kp;
    if (dp + same <= hl && memcmp(d + dp, k + kp, same) == 0) {
      dp += same - 1;
      kp += same - 1;
      continue;
    }
    all_kept = 1;
    size_t fixed = c->h1_vary_at[i] - kp;
    if (dp + fixed >= hl || memcmp(d + dp, k + kp, fixed) != 0) return 0;
    dp += fixed;
    size_t vl = h1_value_scan(d + dp, hl - dp);
    if (vl == SIZE_MAX) return 0;
    dp += vl;
    kp = c->h1_vary_end[i];
  }
  size_t fixed = c->h1_head_len - kp;
  return dp + fixed == hl && memcmp(d + dp, k + kp, fixed) == 0 ? all_kept : 0;
}

/* Whether the checks' verdict on a response with a counted body is decided
 * by its head: status, header and body.size checks (the size is the head's
 * Content-Length). Any other kind, today's or one added later, reads the
 * body, so the whole response is compared for it. Asked per kept response,
 * never per replayed one. */
static int h1_chk_head_decides(const nhb__chk_set* set) {
  for (uint32_t i = 0; i < set->n; i++) {
    switch (set->c[i].kind) {
      case NHB_CHECK_STATUS:
      case NHB_CHECK_HEADER_EXISTS:
      case NHB_CHECK_HEADER_HAS:
      case NHB_CHECK_HEADER_EQ:
      case NHB_CHECK_HEADER_ABSENT:
      case NHB_CHECK_BODY_SIZE: break;
      default: return 0;
    }
  }
  return 1;
}

/* Keeps the head (with checks, the whole) of the response that llhttp just
 * completed in `data`, `len` bytes read from a message boundary and ending
 * exactly with it. */
static void h1_head_keep(nhb__conn* c, const char* data, size_t len, int status) {
  const nhb__worker* w = c->worker;
  /* Checks that read the body keep the whole response (h1_chk_head_decides);
   * every other observer (the latency header, grouping by a header, streaming
   * statistics) reads every response, so nothing is replayed for it. */
  if ((w->run->obs & ~NHB__OBS_CHK) != 0 || !c->keep_alive || status < 200 || status == 101)
    return;
  if (c->body_bytes > len) return;
  size_t head_len = len - (size_t)c->body_bytes;
  size_t keep = head_len;
  int counted = !(c->parser.flags & (F_CHUNKED | F_TRANSFER_ENCODING));
  if (NHB__UNLIKELY(w->run->chk.n != 0) && (!counted || !h1_chk_head_decides(&w->run->chk))) {
    /* Checks that read the body, or a body whose framing is in its bytes:
     * all of it is compared. */
    if (len > NHB__H1_RESP_MAX) return;
    keep = len;
  } else {
    /* A chunked body's bytes are parsed, and so are a close-delimited one's
     * (never complete here anyway): only counted bodies can be skipped. */
    if (!counted) return;
    if (head_len > NHB__H1_HEAD_MAX) return;
  }
  if (head_len == 0) return;
  /* Varying values (above): learnt from the kept head before it goes. */
  uint16_t at[NHB__H1_VARY_MAX], end[NHB__H1_VARY_MAX];
  uint32_t nvary = 0;
  if (w->run->chk.n == 0 && c->h1_head_len != 0 && c->h1_spec == c->slots->rq.spec && c->h1_status == status &&
      c->h1_body_bytes == c->body_bytes)
    nvary = h1_vary_learn(c, data, head_len, at, end);
  if (keep > c->h1_head_cap) {
    /* Grows at most a few times per connection entry: never per request. */
    uint32_t cap = (uint32_t)((keep + 63u) & ~(size_t)63u);
    char* buf = realloc(c->h1_head, cap);
    if (buf == NULL) return;
    c->h1_head = buf;
    c->h1_head_cap = cap;
  }
  memcpy(c->h1_head, data, keep);
  c->h1_cmp_len = (uint32_t)keep;
  /* The verdict is the one h1_finish_response is about to give. */
  c->h1_chk_keep = 1;
  c->h1_head_len = (uint32_t)head_len;
  c->h1_spec = c->slots->rq.spec;
  c->h1_status = status;
  c->h1_header_bytes = c->header_bytes;
  c->h1_body_bytes = c->body_bytes;
  c->h1_nvary = nvary;
  c->h1_vary_same = 1;
  memcpy(c->h1_vary_at, at, nvary * sizeof(at[0]));
  memcpy(c->h1_vary_end, end, nvary * sizeof(end[0]));
}

static int h1_open(nhb__conn* c) {
  const nhb_run* run = c->worker->run;
  const llhttp_settings_t* settings = &h1_settings;
  if (NHB__UNLIKELY(run->obs != 0)) {
    /* The observers' per-connection state: once per connection entry, kept
     * for its later connections. */
    if ((run->obs & NHB__OBS_CHK) && c->chk == NULL &&
        (c->chk = nhb__chk_state_new(&run->chk, c->worker->index)) == NULL)
      return NHB_ENOMEM;
    if ((run->obs & NHB__OBS_GRP) && c->grp_h1 == NULL && (c->grp_h1 = nhb__grp_h1_new()) == NULL) return NHB_ENOMEM;
    settings = &h1_obs_settings;
  }
  llhttp_init(&c->parser, HTTP_RESPONSE, settings);
  /* Strict parsing (docs/engine.md): llhttp's lenient modes are off by
   * default, and are turned off here explicitly so that it stays so. The
   * checks that llhttp makes only when compiled with LLHTTP_STRICT_MODE
   * (CRLF after chunk data, header name characters) depend on the build;
   * CMakeLists.txt makes sure of it. */
  llhttp_set_lenient_headers(&c->parser, 0);
  llhttp_set_lenient_chunked_length(&c->parser, 0);
  llhttp_set_lenient_keep_alive(&c->parser, 0);
  llhttp_set_lenient_transfer_encoding(&c->parser, 0);
  c->parser.data = c;
  c->response_done = 0;
  c->hdr_open = 0;
  c->hdr_gap_lf = 0;
  c->keep_alive = 1;
  c->h1_at_boundary = 1;
  h1_limits_reset(c);
  nhb__olat_reset(&c->olat);
  return 0;
}

/* Writes the request. When the socket took it all at once (the usual case)
 * its last byte was written by the call that started at the hand-over: the
 * stamp is the hand-over's own clock read, so the phases cost HTTP/1.1 no
 * clock read here (the write call's own time, on loopback the kernel's
 * delivery too, counts in time_to_first_byte). When the rest waits for the
 * socket to drain, the stamp stays 0 and the pool counts the wait in
 * request_write, up to the response's first byte. */
static inline int h1_write(nhb__conn* c, nhb__slot* s, const char* bytes, size_t len) {
  int r = c->transport->write(c, bytes, len);
  if (NHB__LIKELY(r == 0 && !c->write_pending)) s->written_ns = s->rq.send_ns;
  return r;
}

static int h1_send(nhb__conn* c, nhb__slot* s) {
  const nhb__spec* sp = &c->worker->run->specs[s->rq.spec];
  c->response_done = 0;
  if (NHB__UNLIKELY(sp->tmpl != NULL)) {
    /* Templating: expanded into this connection's buffer, which stays put
     * until the next request on the connection, after this one's write. */
    const char* bytes;
    size_t len;
    int r = nhb__request_h1_expand(c, sp, &bytes, &len);
    if (r < 0) return r;
    return h1_write(c, s, bytes, len);
  }
  return h1_write(c, s, sp->request, sp->request_len);
}

/* With tracing on (trace.c): a sampled request goes out with its trace
 * headers, from the connection's trace buffer; the others as h1_send. */
static int h1_send_traced(nhb__conn* c, nhb__slot* s) {
  if (!nhb__trace_sample(c->worker, s)) return h1_send(c, s);
  const nhb__spec* sp = &c->worker->run->specs[s->rq.spec];
  c->response_done = 0;
  const char* bytes = sp->request;
  size_t len = sp->request_len;
  if (sp->tmpl != NULL) {
    int r = nhb__request_h1_expand(c, sp, &bytes, &len);
    if (r < 0) return r;
  }
  int r = nhb__trace_h1(c, s, bytes, len, &bytes, &len);
  if (r < 0) return r;
  return h1_write(c, s, bytes, len);
}

/* Ends the response that the parser (or, `replayed`, the replay) just
 * completed. */
static inline int h1_finish_response(nhb__conn* c, int status, int replayed) {
  c->response_done = 0;
  /* A response that arrives before the request was fully written means the
   * server did not read all of it: the connection cannot be reused. */
  if (c->write_pending) c->keep_alive = 0;
  nhb__slot* s = c->slots;
  s->header_bytes = c->header_bytes;
  s->body_bytes = c->body_bytes;
  if (NHB__UNLIKELY(c->chk != NULL)) {
    uint32_t failed;
    if (replayed) {
      failed = c->h1_chk_failed;
    } else {
      failed = nhb__chk_finish(&c->worker->run->chk, c->chk, status, c->body_bytes);
      if (c->h1_chk_keep) c->h1_chk_failed = failed;
    }
    c->h1_chk_keep = 0;
    /* A replayed response's entry is the kept one's (the replay compares the
     * spec), so the state's mask from that response's begin is its own. */
    nhb__chk_count(c, s, c->chk->mask, failed, status);
    return 0;
  }
  nhb__conn_response(c, s, status);
  return 0;
}

/* Records why the parser gave up, once per worker (the run's first error). */
static void h1_parse_error(nhb__conn* c, const char* reason) {
  nhb__worker* w = c->worker;
  if (w->first_error != 0) return;
  char text[sizeof(w->first_error_text)];
  snprintf(text, sizeof(text), "HTTP/1.1: invalid response from the server: %s", reason);
  nhb__worker_record_error_text(w, NHB_EPROTO, text);
}

static int h1_on_data(nhb__conn* c, const char* data, size_t len) {
  if (c->nactive == 0) {
    /* Bytes with no request in flight: the server is broken. */
    h1_parse_error(c, "bytes with no request in flight");
    return NHB_EPROTO;
  }
  /* The response's first byte is timed when the client is done with the
   * read that brought it (an interim response's included): a response whose
   * last byte came in the same read ends in the pool, whose clock read then
   * serves for both (transfer 0); one that goes on into later reads reads
   * the clock at the end of this one. So a small response costs no clock
   * read of its own. */
  int first = c->slots->first_ns == 0;
  int at_boundary = c->h1_at_boundary;
  if (at_boundary && c->h1_head_len != 0 && c->slots->rq.spec == c->h1_spec) {
    /* With varying values, the byte-identical compare is tried first only
     * while heads come back identical (nginx's Date within its second); an
     * origin whose every head differs goes to the values at once. */
    if ((c->h1_nvary == 0 || c->h1_vary_same) && len == c->h1_head_len + c->h1_body_bytes &&
        memcmp(data, c->h1_head, c->h1_cmp_len) == 0) {
      /* The replay (above): what llhttp's callbacks would have set. */
      c->header_bytes = c->h1_header_bytes;
      c->body_bytes = c->h1_body_bytes;
      c->keep_alive = 1;
      return h1_finish_response(c, c->h1_status, 1);
    }
    int m;
    if (c->h1_nvary != 0 && len > c->h1_body_bytes && len - c->h1_body_bytes <= NHB__H1_VARY_HEAD_MAX &&
        (m = h1_vary_match(c, data, len - (size_t)c->h1_body_bytes)) != 0) {
      /* The same with varying values: the header size follows the head's. */
      c->h1_vary_same = m == 2;
      c->header_bytes = c->h1_header_bytes + (len - c->h1_body_bytes) - c->h1_head_len;
      c->body_bytes = c->h1_body_bytes;
      c->keep_alive = 1;
      return h1_finish_response(c, c->h1_status, 1);
    }
  }
  c->h1_at_boundary = 0;
  if (c->hdr_open) c->hdr_gap = data;
  llhttp_errno_t err = llhttp_execute(&c->parser, data, len);
  if (err == HPE_OK) {
    if (NHB__UNLIKELY(c->hdr_open) && memchr(c->hdr_gap, '\n', (size_t)(data + len - c->hdr_gap)))
      c->hdr_gap_lf = 1;
    if (!c->h1_in_body) {
      /* The read ended inside a head (or before one): its bytes are the
       * head's, or an interim response's before it. This catches what the
       * callbacks never see (blank lines before the status line, blanks
       * before a value), at twice the limit, which a head within the limit
       * cannot reach even with an interim response in the same read. */
      c->h1_head_raw += len;
      if (NHB__UNLIKELY(c->h1_head_raw > 2u * NHB__RESP_HEADER_BYTES)) {
        h1_parse_error(c, "a head over 196608 bytes, padding included (twice the client's limit on a response's head)");
        return NHB_EPROTO;
      }
    }
    if (first) c->slots->first_ns = nhb__now_ns();
    return 0;
  }
  if (err == HPE_PAUSED && c->response_done) {
    const char* pos = llhttp_get_error_pos(&c->parser);
    int status = llhttp_get_status_code(&c->parser);
    llhttp_resume(&c->parser);
    if (pos == NULL || pos == data + len) {
      c->h1_at_boundary = 1;
      if (at_boundary) h1_head_keep(c, data, len, status);
    }
    if (NHB__UNLIKELY(pos != NULL && pos < data + len)) {
      /* A complete response followed by bytes nobody asked for (a body
       * after HEAD or 204, a second response, a body longer than its
       * Content-Length). The response itself arrived and is counted; the
       * rest breaks the protocol, so the connection is not used again
       * (keep_alive = 0 makes the pool close it once the response is
       * counted) and the next request goes out on a new one. */
      h1_parse_error(c, "bytes after the end of a response");
      c->worker->stats.counters[NHB_CTR_UPSTREAM_CX_PROTOCOL_ERROR]++;
      c->keep_alive = 0;
    }
    return h1_finish_response(c, status, 0);
  }
  if (NHB__UNLIKELY(c->h1_limit != NULL)) {
    h1_parse_error(c, c->h1_limit);
    c->h1_limit = NULL;
  } else if (err == HPE_USER) {
    h1_parse_error(c, "obs-fold (a header line continued on the next line)");
  } else {
    const char* reason = llhttp_get_error_reason(&c->parser);
    h1_parse_error(c, reason != NULL ? reason : llhttp_errno_name(err));
  }
  return NHB_EPROTO;
}

static int h1_on_eof(nhb__conn* c, int err) {
  if (c->nactive == 0) return 0;
  if (err != UV_EOF) return err;
  llhttp_errno_t end = llhttp_finish(&c->parser);
  if ((end == HPE_OK || end == HPE_PAUSED) && c->response_done) {
    /* A close-delimited body ended with the connection. */
    c->keep_alive = 0;
    return h1_finish_response(c, llhttp_get_status_code(&c->parser), 0);
  }
  return NHB_EPROTO;
}

static const nhb__session_vtable nhb__session_h1 = {
    "http/1.1", h1_open, h1_send, h1_on_data, h1_on_eof, NULL, NULL, NULL,
};

static const nhb__session_vtable nhb__session_h1_traced = {
    "http/1.1", h1_open, h1_send_traced, h1_on_data, h1_on_eof, NULL, NULL, NULL,
};

/* The head kept for replaying identical responses outlives each connection
 * of the entry; it goes with the pool. */
static void h1_conn_free(nhb__conn* c) {
  free(c->h1_head);
  c->h1_head = NULL;
  if (c->chk != NULL) nhb__chk_state_free(&c->worker->run->chk, c->chk);
  c->chk = NULL;
  nhb__grp_h1_free(c->grp_h1);
  c->grp_h1 = NULL;
}

/* The protocol (nhb__protocol in client.h; NHB_PROTOCOL_MAP in nhb.h). */
const nhb__protocol nhb__protocol_h1 = {
    .name = "HTTP/1.1",
    .session = &nhb__session_h1,
    .traced_session = &nhb__session_h1_traced,
    .reuse_lru = 1,
    .cx_counter = NHB_CTR_UPSTREAM_CX_HTTP1_TOTAL,
    .conn_free = h1_conn_free,
};
