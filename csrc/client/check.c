/* check.c: response checks (--check, docs/checks.md).
 *
 * nhbench's Python side (nhbench._checks) parses and validates each check and
 * hands the core a table of nhb_check; here the table is copied once per run
 * (nhb__chk_set) and each response in flight has one state (nhb__chk_state):
 * HTTP/1.1 reads one response at a time, so its state is the connection
 * entry's, allocated with its first connection; HTTP/2 and HTTP/3 read many
 * streams at once, so each request slot has its own, allocated the first
 * time the slot carries a final response. Either is reused for every later
 * response, so that evaluating checks allocates nothing per request. A check
 * may belong to one entry of the request set (a request source's own
 * checks): the state's mask, set per response from its request's entry, says
 * which checks judge it.
 * The session feeds the state as the response arrives: header names and
 * values in the pieces the parser hands over (a read boundary may split
 * them), body bytes as they come (substrings are found across reads with a
 * rolling window of the needle's length minus one, SHA-256 is incremental,
 * a JSON pointer looks at a copy of the first NHB_CHECK_JSON_PREFIX bytes),
 * and nhb__chk_finish() gives the checks that failed once the response ends.
 *
 * Every function below but the set's init and free and the state's new and
 * free is allocation-free (SHA-256 is OpenSSL's low-level SHA256_CTX, a plain
 * struct reset per response: EVP_DigestInit_ex2 frees and allocates the
 * provider's context on every call, measured with OpenSSL 3, which would be
 * one allocation per request), and the JSON pointer evaluator and the streaming
 * matcher are exposed for the fuzz targets (csrc/fuzz/fuzz_check.c).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The SHA256_* functions are deprecated in OpenSSL 3 in favour of EVP, whose
 * re-initialisation allocates (above); they remain part of its API. */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>

#include "client/client.h"

static char lower(char ch) { return (ch >= 'A' && ch <= 'Z') ? (char)(ch - 'A' + 'a') : ch; }

static int set_error(char* err, size_t err_len, uint32_t i, const char* why) {
  if (err != NULL && err_len > 0) snprintf(err, err_len, "checks[%u]: %s", i, why);
  return NHB_EINVAL;
}

int nhb__chk_set_init(nhb__chk_set* set, const nhb_check* checks, uint32_t n, uint32_t nspecs, char* err,
                      size_t err_len) {
  memset(set, 0, sizeof(*set));
  if (n == 0) return 0;
  if (n > NHB_MAX_CHECKS || checks == NULL) return set_error(err, err_len, n, "more than 32 checks");
  int per_entry = 0;
  size_t total = 0;
  for (uint32_t i = 0; i < n; i++) {
    const nhb_check* c = &checks[i];
    if (c->kind < 0 || c->kind >= NHB_CHECK_KIND_COUNT) return set_error(err, err_len, i, "unknown kind");
    if (c->header_len > NHB_CHECK_TEXT_MAX || c->text_len > NHB_CHECK_TEXT_MAX || c->value_len > NHB_CHECK_TEXT_MAX)
      return set_error(err, err_len, i, "a text over 256 bytes");
    if (c->nranges > NHB_CHECK_MAX_RANGES) return set_error(err, err_len, i, "more than 16 ranges");
    if ((c->kind == NHB_CHECK_STATUS || c->kind == NHB_CHECK_BODY_SIZE) && c->nranges == 0)
      return set_error(err, err_len, i, "no range");
    if (((c->kind >= NHB_CHECK_HEADER_EXISTS && c->kind <= NHB_CHECK_HEADER_EQ) || c->kind == NHB_CHECK_HEADER_ABSENT ||
         c->kind == NHB_CHECK_HEADER_RE) &&
        c->header_len == 0)
      return set_error(err, err_len, i, "no header name");
    if (c->kind == NHB_CHECK_BODY_SHA256 && c->text_len != 32) return set_error(err, err_len, i, "a digest is 32 bytes");
    if (c->entry > nspecs) return set_error(err, err_len, i, "entry past the request set");
    per_entry |= c->entry != 0;
    if ((c->kind == NHB_CHECK_BODY_RE || c->kind == NHB_CHECK_HEADER_RE) && c->text_len == 0)
      return set_error(err, err_len, i, "an empty pattern");
    total += c->header_len + c->text_len + c->value_len;
  }
  set->strings = malloc(total + 1);
  if (set->strings == NULL) return NHB_ENOMEM;
  if (per_entry && (set->spec_mask = calloc(nspecs, sizeof(uint32_t))) == NULL) {
    free(set->strings);
    set->strings = NULL;
    return NHB_ENOMEM;
  }
  set->nspecs = nspecs;
  char* p = set->strings;
  for (uint32_t i = 0; i < n; i++) {
    nhb_check* c = &set->c[i];
    *c = checks[i];
    /* Copies owned by the run; header names lower-cased once here, so the
     * hot path lower-cases only what it reads. */
    for (size_t k = 0; k < c->header_len; k++) p[k] = lower(checks[i].header[k]);
    c->header = p;
    p += c->header_len;
    if (c->text_len) memcpy(p, checks[i].text, c->text_len);
    c->text = p;
    p += c->text_len;
    if (c->value_len) memcpy(p, checks[i].value, c->value_len);
    c->value = p;
    p += c->value_len;
    uint32_t bit = 1u << i;
    if (c->entry == 0) set->all |= bit;
    else set->spec_mask[c->entry - 1] |= bit;
    switch (c->kind) {
      case NHB_CHECK_HEADER_EXISTS:
      case NHB_CHECK_HEADER_HAS:
      case NHB_CHECK_HEADER_EQ:
      case NHB_CHECK_HEADER_ABSENT: set->hdr_mask |= bit; break;
      case NHB_CHECK_HEADER_RE:
        set->hdr_mask |= bit;
        set->hdr_re_mask |= bit;
        break;
      case NHB_CHECK_BODY_RE: set->body_re_mask |= bit; break;
      case NHB_CHECK_BODY_HAS: set->body_has_mask |= bit; break;
      case NHB_CHECK_BODY_SHA256: set->sha_mask |= bit; break;
      case NHB_CHECK_JSON_EXISTS:
      case NHB_CHECK_JSON_EQ: set->json_mask |= bit; break;
      default: break;
    }
  }
  /* An entry is judged by the run's checks and its own. */
  if (set->spec_mask != NULL)
    for (uint32_t k = 0; k < nspecs; k++) set->spec_mask[k] |= set->all;
  set->n = n;
  set->full = n == 32 ? ~0u : (1u << n) - 1u;
  return 0;
}

/* The run's copy of config.checks; without checks the failed-check latency
 * is not measured, so the statistic is absent from the result (as the origin
 * latency is without its header) and the merge skips it. */
int nhb__chk_run_init(nhb_run* run, char* err, size_t err_len) {
  const nhb_client_config* cfg = &run->config;
  int r = nhb__chk_set_init(&run->chk, cfg->checks, cfg->nchecks, run->nspecs, err, err_len);
  run->config.checks = NULL;
  if (r < 0) return r;
  /* The HTTP sessions judge responses; gRPC's status is the call's verdict
   * and the echo protocols have no response to judge. */
  if (run->chk.n != 0 && ((cfg->protocol != NHB_PROTO_HTTP1 && cfg->protocol != NHB_PROTO_HTTP2 &&
                           cfg->protocol != NHB_PROTO_HTTP3) ||
                          cfg->grpc)) {
    if (err != NULL && err_len > 0) snprintf(err, err_len, "checks: HTTP/1.1, HTTP/2 and HTTP/3 only (not gRPC)");
    return NHB_EINVAL;
  }
  /* A predicate on a check's counter names one of the run's checks. */
  for (int i = 0; i < cfg->n_termination + cfg->n_failure; i++) {
    const nhb_predicate* p = i < cfg->n_termination ? &cfg->termination[i] : &cfg->failure[i - cfg->n_termination];
    if (p->counter < NHB_CHECK_PASS_ID) continue;
    uint32_t index = (uint32_t)(p->counter - NHB_CHECK_PASS_ID) % NHB_MAX_CHECKS;
    if (index >= run->chk.n) {
      if (err != NULL && err_len > 0)
        snprintf(err, err_len, "%s: counter %d is check %u's, and the run has %u checks",
                 i < cfg->n_termination ? "termination_predicates" : "failure_predicates", p->counter, index,
                 run->chk.n);
      return NHB_EINVAL;
    }
  }
  /* The regular expressions compile here, before anything is sent. */
  if (run->chk.n != 0) return nhb__chk_re_init(&run->chk, run->nworkers, err, err_len);
  free(run->global.hists[NHB_HIST_LATENCY_CHECK_FAILED]);
  run->global.hists[NHB_HIST_LATENCY_CHECK_FAILED] = NULL;
  for (int i = 0; i < run->nworkers; i++) {
    nhb_stats* st = &run->workers[i].stats;
    free(st->hists[NHB_HIST_LATENCY_CHECK_FAILED]);
    st->hists[NHB_HIST_LATENCY_CHECK_FAILED] = NULL;
  }
  return 0;
}

void nhb__chk_set_free(nhb__chk_set* set) {
  nhb__chk_re_free(set);
  free(set->strings);
  free(set->spec_mask);
  memset(set, 0, sizeof(*set));
}

nhb__chk_state* nhb__chk_state_new(const nhb__chk_set* set, int worker) {
  nhb__chk_state* st = calloc(1, sizeof(*st));
  if (st == NULL) return NULL;
  if (set->json_mask != 0 && (st->json = malloc(NHB_CHECK_JSON_PREFIX)) == NULL) goto fail;
  for (uint32_t i = 0; i < set->n; i++)
    if ((set->sha_mask >> i) & 1u)
      if ((st->sha[i] = malloc(sizeof(SHA256_CTX))) == NULL) goto fail;
  if (set->re != NULL && nhb__chk_re_state_new(set, st, worker) < 0) goto fail;
  return st;
fail:
  nhb__chk_state_free(set, st);
  return NULL;
}

void nhb__chk_state_free(const nhb__chk_set* set, nhb__chk_state* st) {
  if (st == NULL) return;
  for (uint32_t i = 0; i < set->n; i++) free(st->sha[i]);
  nhb__chk_re_state_free(st);
  free(st->json);
  free(st);
}

void nhb__chk_begin(const nhb__chk_set* set, nhb__chk_state* st, uint32_t spec) {
  st->mask = set->spec_mask != NULL && spec < set->nspecs ? set->spec_mask[spec] : set->all;
  st->seen = 0;
  st->active = 0;
  st->name_len = 0;
  st->in_value = 0;
  st->json_len = 0;
  for (uint32_t i = 0; i < set->n; i++) st->pos[i] = 0;
  uint32_t m = set->sha_mask & st->mask;
  while (m != 0) {
    uint32_t i = (uint32_t)__builtin_ctz(m);
    m &= m - 1;
    SHA256_Init((SHA256_CTX*)st->sha[i]);
  }
  if (st->re != NULL) nhb__chk_re_begin(st);
}

int nhb__chk_find(const char* needle, size_t n, char* win, uint32_t* win_len, const char* data, size_t len) {
  if (n == 0) return 1;
  size_t keep = n - 1;
  if (*win_len > 0 && len > 0) {
    /* A match that begins in the earlier bytes and ends in these. */
    char joined[2 * NHB_CHECK_TEXT_MAX];
    size_t take = len < keep ? len : keep;
    memcpy(joined, win, *win_len);
    memcpy(joined + *win_len, data, take);
    if (memmem(joined, *win_len + take, needle, n) != NULL) return 1;
  }
  if (len >= n && memmem(data, len, needle, n) != NULL) return 1;
  /* The window: the last n - 1 bytes seen, which a later match may begin in. */
  if (len >= keep) {
    memcpy(win, data + len - keep, keep);
    *win_len = (uint32_t)keep;
  } else {
    size_t have = *win_len;
    if (have + len > keep) {
      size_t drop = have + len - keep;
      memmove(win, win + drop, have - drop);
      have -= drop;
    }
    memcpy(win + have, data, len);
    *win_len = (uint32_t)(have + len);
  }
  return 0;
}

void nhb__chk_name(const nhb__chk_set* set, nhb__chk_state* st, const char* at, size_t len) {
  if (st->in_value) {
    /* A new field: the previous one ended (nhb__chk_value_end). */
    st->in_value = 0;
    st->name_len = 0;
  }
  NHB__UNUSED(set);
  for (size_t k = 0; k < len; k++) {
    if (st->name_len < NHB_CHECK_TEXT_MAX) st->name[st->name_len] = lower(at[k]);
    if (st->name_len <= NHB_CHECK_TEXT_MAX) st->name_len++;
  }
}

static void value_start(const nhb__chk_set* set, nhb__chk_state* st) {
  st->in_value = 1;
  st->active = 0;
  uint32_t m = set->hdr_mask & st->mask;
  while (m != 0) {
    uint32_t i = (uint32_t)__builtin_ctz(m);
    m &= m - 1;
    const nhb_check* c = &set->c[i];
    if (c->header_len == st->name_len && memcmp(c->header, st->name, st->name_len) == 0) {
      st->active |= 1u << i;
      st->pos[i] = 0;
      if (c->kind == NHB_CHECK_HEADER_EXISTS || c->kind == NHB_CHECK_HEADER_ABSENT) st->seen |= 1u << i;
    }
  }
}

void nhb__chk_value(const nhb__chk_set* set, nhb__chk_state* st, const char* at, size_t len) {
  if (!st->in_value) value_start(set, st);
  uint32_t m = st->active & ~st->seen;
  while (m != 0) {
    uint32_t i = (uint32_t)__builtin_ctz(m);
    m &= m - 1;
    const nhb_check* c = &set->c[i];
    if (c->kind == NHB_CHECK_HEADER_HAS) {
      if (nhb__chk_find(c->text, c->text_len, st->win[i], &st->pos[i], at, len)) st->seen |= 1u << i;
    } else if (c->kind == NHB_CHECK_HEADER_EQ) {
      /* Kept whole up to the expected length plus trailing white space. */
      size_t room = NHB_CHECK_TEXT_MAX - st->pos[i];
      if (len > room) {
        st->pos[i] = NHB_CHECK_TEXT_MAX + 1; /* too long to be equal */
        st->active &= ~(1u << i);
        continue;
      }
      memcpy(st->win[i] + st->pos[i], at, len);
      st->pos[i] += (uint32_t)len;
    }
  }
  if (st->active & set->hdr_re_mask & ~st->seen) nhb__chk_re_header(set, st, at, len);
}

void nhb__chk_value_end(const nhb__chk_set* set, nhb__chk_state* st) {
  /* A field with an empty value has had no value piece. */
  if (!st->in_value) value_start(set, st);
  uint32_t m = st->active & ~st->seen;
  while (m != 0) {
    uint32_t i = (uint32_t)__builtin_ctz(m);
    m &= m - 1;
    const nhb_check* c = &set->c[i];
    if (c->kind != NHB_CHECK_HEADER_EQ) continue;
    size_t vl = st->pos[i];
    while (vl > 0 && (st->win[i][vl - 1] == ' ' || st->win[i][vl - 1] == '\t')) vl--;
    if (vl == c->text_len && memcmp(st->win[i], c->text, vl) == 0) st->seen |= 1u << i;
  }
  if (st->active & set->hdr_re_mask) nhb__chk_re_header_end(set, st);
  st->active = 0;
}

void nhb__chk_body(const nhb__chk_set* set, nhb__chk_state* st, const char* at, size_t len) {
  uint32_t m = set->body_has_mask & st->mask & ~st->seen;
  while (m != 0) {
    uint32_t i = (uint32_t)__builtin_ctz(m);
    m &= m - 1;
    const nhb_check* c = &set->c[i];
    if (nhb__chk_find(c->text, c->text_len, st->win[i], &st->pos[i], at, len)) st->seen |= 1u << i;
  }
  if (set->body_re_mask & ~st->seen) nhb__chk_re_body(set, st, at, len);
  m = set->sha_mask & st->mask;
  while (m != 0) {
    uint32_t i = (uint32_t)__builtin_ctz(m);
    m &= m - 1;
    SHA256_Update((SHA256_CTX*)st->sha[i], at, len);
  }
  if (st->json != NULL && (set->json_mask & st->mask) != 0 && st->json_len < NHB_CHECK_JSON_PREFIX) {
    size_t take = NHB_CHECK_JSON_PREFIX - st->json_len;
    if (take > len) take = len;
    memcpy(st->json + st->json_len, at, take);
    st->json_len += (uint32_t)take;
  }
}

/* ---- a JSON pointer (RFC 6901) over a bounded document, non-allocating ---- */

#define JSON_DEPTH_MAX 64

static const char* json_ws(const char* p, const char* e) {
  while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
  return p;
}

/* p at the opening quote; returns just past the closing one, or NULL. */
static const char* json_string_end(const char* p, const char* e) {
  for (p++; p < e; p++) {
    if (*p == '\\') {
      if (++p >= e) return NULL;
    } else if (*p == '"') {
      return p + 1;
    } else if ((unsigned char)*p < 0x20) {
      return NULL;
    }
  }
  return NULL;
}

static const char* json_value_end(const char* p, const char* e, int depth) {
  p = json_ws(p, e);
  if (p >= e) return NULL;
  if (*p == '"') return json_string_end(p, e);
  if (*p == '{' || *p == '[') {
    if (depth >= JSON_DEPTH_MAX) return NULL;
    char close = *p == '{' ? '}' : ']';
    int object = *p == '{';
    p = json_ws(p + 1, e);
    if (p < e && *p == close) return p + 1;
    for (;;) {
      if (object) {
        p = json_ws(p, e);
        if (p >= e || *p != '"' || (p = json_string_end(p, e)) == NULL) return NULL;
        p = json_ws(p, e);
        if (p >= e || *p != ':') return NULL;
        p++;
      }
      if ((p = json_value_end(p, e, depth + 1)) == NULL) return NULL;
      p = json_ws(p, e);
      if (p >= e) return NULL;
      if (*p == close) return p + 1;
      if (*p != ',') return NULL;
      p++;
    }
  }
  /* A number or a literal: its characters up to a delimiter. */
  const char* s = p;
  while (p < e && ((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') || *p == '-' || *p == '+' || *p == '.' ||
                   *p == 'E'))
    p++;
  if (p == s || p >= e) return NULL; /* a scalar cut by the prefix's end is not whole */
  return p;
}

/* Does the JSON string at p (opening quote) .. q (past the closing one)
 * equal the pointer token tok (unescaped per RFC 6901: ~1 is '/', ~0 is '~')?
 * The string's escapes \" \\ \/ are decoded; a key with any other escape
 * matches no token (documented). */
static int json_key_is(const char* p, const char* q, const char* tok, size_t tok_len) {
  const char* k = p + 1;
  const char* kend = q - 1;
  size_t t = 0;
  while (k < kend) {
    char kc = *k++;
    if (kc == '\\') {
      char x = *k++;
      if (x != '"' && x != '\\' && x != '/') return 0;
      kc = x;
    }
    if (t >= tok_len) return 0;
    char tc = tok[t++];
    if (tc == '~') {
      if (t >= tok_len) return 0;
      char y = tok[t++];
      if (y == '0') tc = '~';
      else if (y == '1') tc = '/';
      else return 0;
    }
    if (kc != tc) return 0;
  }
  return t == tok_len;
}

int nhb__json_pointer(const char* doc, size_t len, const char* ptr, size_t ptr_len, const char** val, size_t* val_len) {
  const char* p = doc;
  const char* e = doc + len;
  size_t at = 0;
  if (ptr_len > 0 && ptr[0] != '/') return 0;
  p = json_ws(p, e);
  while (at < ptr_len) {
    /* The next token: after this '/', up to the next one. */
    at++;
    size_t tok_start = at;
    while (at < ptr_len && ptr[at] != '/') at++;
    const char* tok = ptr + tok_start;
    size_t tok_len = at - tok_start;
    if (p >= e) return 0;
    if (*p == '{') {
      p = json_ws(p + 1, e);
      if (p < e && *p == '}') return 0;
      for (;;) {
        if (p >= e || *p != '"') return 0;
        const char* q = json_string_end(p, e);
        if (q == NULL) return 0;
        int hit = json_key_is(p, q, tok, tok_len);
        p = json_ws(q, e);
        if (p >= e || *p != ':') return 0;
        p = json_ws(p + 1, e);
        if (hit) break;
        if ((p = json_value_end(p, e, 1)) == NULL) return 0;
        p = json_ws(p, e);
        if (p >= e || *p != ',') return 0;
        p = json_ws(p + 1, e);
      }
    } else if (*p == '[') {
      /* An index: digits, no leading zero. */
      if (tok_len == 0 || tok_len > 9 || (tok_len > 1 && tok[0] == '0')) return 0;
      size_t index = 0;
      for (size_t k = 0; k < tok_len; k++) {
        if (tok[k] < '0' || tok[k] > '9') return 0;
        index = index * 10 + (size_t)(tok[k] - '0');
      }
      p = json_ws(p + 1, e);
      if (p < e && *p == ']') return 0;
      for (size_t k = 0; k < index; k++) {
        if ((p = json_value_end(p, e, 1)) == NULL) return 0;
        p = json_ws(p, e);
        if (p >= e || *p != ',') return 0;
        p = json_ws(p + 1, e);
      }
    } else {
      return 0;
    }
  }
  const char* end = json_value_end(p, e, 0);
  if (end == NULL) return 0;
  *val = p;
  *val_len = (size_t)(end - p);
  return 1;
}

static int in_ranges(const nhb_check* c, uint64_t v) {
  for (uint32_t r = 0; r < c->nranges; r++)
    if (v >= c->lo[r] && v <= c->hi[r]) return 1;
  return 0;
}

uint32_t nhb__chk_finish(const nhb__chk_set* set, nhb__chk_state* st, int status, uint64_t body_bytes) {
  uint32_t failed = 0;
  /* A pattern that ends at the body's end ($, \b) matches only once it is known to end. */
  if (set->body_re_mask & ~st->seen) nhb__chk_re_body_end(set, st);
  uint32_t m = st->mask;
  while (m != 0) {
    uint32_t i = (uint32_t)__builtin_ctz(m);
    m &= m - 1;
    const nhb_check* c = &set->c[i];
    int ok = 0;
    switch (c->kind) {
      case NHB_CHECK_STATUS: ok = status >= 0 && in_ranges(c, (uint64_t)status); break;
      case NHB_CHECK_BODY_SIZE: ok = in_ranges(c, body_bytes); break;
      case NHB_CHECK_BODY_SHA256: {
        unsigned char md[SHA256_DIGEST_LENGTH];
        ok = SHA256_Final(md, (SHA256_CTX*)st->sha[i]) == 1 && memcmp(md, c->text, SHA256_DIGEST_LENGTH) == 0;
        break;
      }
      case NHB_CHECK_JSON_EXISTS:
      case NHB_CHECK_JSON_EQ: {
        const char* v = NULL;
        size_t vl = 0;
        ok = nhb__json_pointer(st->json, st->json_len, c->text, c->text_len, &v, &vl);
        if (ok && c->kind == NHB_CHECK_JSON_EQ) ok = vl == c->value_len && memcmp(v, c->value, vl) == 0;
        break;
      }
      case NHB_CHECK_HEADER_ABSENT: ok = !((st->seen >> i) & 1u); break;
      default: ok = (st->seen >> i) & 1u; break;
    }
    if (!ok) failed |= 1u << i;
  }
  return failed;
}

void nhb__chk_response(nhb__conn* c, nhb__slot* s, nhb__chk_state* st, int status) {
  uint32_t failed = nhb__chk_finish(&c->worker->run->chk, st, status, s->body_bytes);
  nhb__chk_count(c, s, st->mask, failed, status);
}

void nhb__chk_count(nhb__conn* c, nhb__slot* s, uint32_t mask, uint32_t failed, int status) {
  nhb_stats* stats = &c->worker->stats;
  if (NHB__LIKELY(mask == c->worker->run->chk.full)) {
    /* Judged by every check: one count for all of them, and a failed
     * check's pass taken back (unsigned, so a pass counter may wrap below
     * zero until nhb__chk_fold adds check_every to it). */
    stats->check_every++;
    for (uint32_t m = failed; m != 0; m &= m - 1) {
      uint32_t i = (uint32_t)__builtin_ctz(m);
      stats->check_fail[i]++;
      stats->check_pass[i]--;
    }
  } else {
    for (uint32_t m = mask; m != 0; m &= m - 1) {
      uint32_t i = (uint32_t)__builtin_ctz(m);
      if ((failed >> i) & 1u) stats->check_fail[i]++;
      else stats->check_pass[i]++;
    }
  }
  /* A 2xx that failed a check is an error; any other status already is one
   * (or a 1xx/3xx...), counted by its class as before. */
  if (failed != 0 && status >= 200 && status < 300) nhb__conn_check_failed(c, s);
  else nhb__conn_response(c, s, status);
}

void nhb__chk_fold(nhb_stats* stats, uint32_t n) {
  uint64_t every = stats->check_every;
  if (every == 0) return;
  for (uint32_t i = 0; i < n; i++) stats->check_pass[i] += every;
  stats->check_every = 0;
}

nhb__chk_state* nhb__chk_slot_begin(nhb__worker* w, nhb__slot* s) {
  const nhb__chk_set* set = &w->run->chk;
  if (NHB__UNLIKELY(s->chk == NULL) && (s->chk = nhb__chk_state_new(set, w->index)) == NULL) return NULL;
  nhb__chk_begin(set, s->chk, s->rq.spec);
  return s->chk;
}

void nhb__chk_slots_free(nhb__worker* w) {
  /* Only the multiplexed sessions keep a state per slot; their slots are
   * --max-active-requests (pool.c). */
  if (w->slot_pool == NULL || w->protocol == NULL || !w->protocol->multiplexes) return;
  for (uint32_t i = 0; i < w->run->config.max_active_requests; i++) {
    nhb__chk_state_free(&w->run->chk, w->slot_pool[i].chk);
    w->slot_pool[i].chk = NULL;
  }
}

