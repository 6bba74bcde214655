/* request.c: the run's request set, and templating.
 *
 * The request set is the list of requests the workers cycle through (issue
 * 13: request sources, several targets). nhb__request_set_create copies it
 * into memory the run owns when the run is created. A run of a single
 * request is a set of one (the config has no other way to say what to send),
 * so that the sessions have one path: send run->specs[slot's spec].
 *
 * Templating (config.templated) lets a request carry placeholders that change
 * from one request to the next: {seq}, {uuid}, {rand:N}, {worker}, and the
 * internal {content-length} that the Python side writes into the
 * Content-Length header of a templated body. Each template is split into
 * literal and placeholder segments once, here; each placeholder has a largest
 * expansion (20 digits for a 64-bit number, 36 characters for a UUID), so
 * that the buffers a worker expands into are sized before the run and every
 * expansion is a bounded walk over the segments. docs/engine.md ("What is
 * sent: bodies and templating") describes the placeholders to users.
 */
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"

/* The widest decimal 64-bit number. */
#define U64_DIGITS 20
#define UUID_LEN 36
/* {rand:N} takes N up to 10^18: 19 digits, far beyond any key space, and the
 * product with a 64-bit random number stays exact in 128 bits. */
#define RAND_MAX_BOUND 1000000000000000000ULL

static int set_error(char* err, size_t err_len, const char* fmt, uint32_t index) {
  if (err != NULL && err_len > 0) snprintf(err, err_len, fmt, (unsigned)index);
  return NHB_EINVAL;
}

static uint32_t digits_u64(uint64_t v) {
  uint32_t n = 1;
  while (v >= 10) {
    v /= 10;
    n++;
  }
  return n;
}

static size_t format_u64(char* out, uint64_t v) {
  char tmp[U64_DIGITS];
  size_t n = 0;
  do {
    tmp[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v != 0);
  for (size_t i = 0; i < n; i++) out[i] = tmp[n - 1 - i];
  return n;
}

/* A uniform number below `bound` by multiplying into 128 bits (Lemire's
 * method without the rejection step: the bias is below bound / 2^64, at most
 * 1e18 / 1.8e19 of one value's weight, invisible to a load test). */
static uint64_t random_below(uint64_t* state, uint64_t bound) {
  return (uint64_t)(((unsigned __int128)nhb__splitmix64(state) * bound) >> 64);
}

static size_t format_uuid(char* out, uint64_t* state) {
  static const char hex[] = "0123456789abcdef";
  uint8_t b[16];
  uint64_t hi = nhb__splitmix64(state), lo = nhb__splitmix64(state);
  for (int i = 0; i < 8; i++) {
    b[i] = (uint8_t)(hi >> (56 - 8 * i));
    b[8 + i] = (uint8_t)(lo >> (56 - 8 * i));
  }
  /* RFC 9562 section 5.4: version 4 in the high nibble of byte 6, variant
   * 10 in the top bits of byte 8. */
  b[6] = (uint8_t)((b[6] & 0x0F) | 0x40);
  b[8] = (uint8_t)((b[8] & 0x3F) | 0x80);
  size_t n = 0;
  for (int i = 0; i < 16; i++) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out[n++] = '-';
    out[n++] = hex[b[i] >> 4];
    out[n++] = hex[b[i] & 0x0F];
  }
  return n;
}

/* Recognizes a placeholder at p[0] == '{' within n bytes: returns its length
 * and fills kind and arg, or returns 0 when the text is not one (it is then
 * sent as it is: the Python side refuses unknown names before the run). */
static size_t placeholder_at(const char* p, size_t n, uint32_t* kind, uint64_t* arg) {
  static const struct {
    const char* text;
    uint32_t kind;
  } names[] = {{"{seq}", NHB__SEG_SEQ},
               {"{uuid}", NHB__SEG_UUID},
               {"{worker}", NHB__SEG_WORKER},
               {"{content-length}", NHB__SEG_CLEN}};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    size_t len = strlen(names[i].text);
    if (n >= len && memcmp(p, names[i].text, len) == 0) {
      *kind = names[i].kind;
      *arg = 0;
      return len;
    }
  }
  if (n < 8 || memcmp(p, "{rand:", 6) != 0) return 0;
  uint64_t bound = 0;
  size_t i = 6;
  for (; i < n && p[i] >= '0' && p[i] <= '9'; i++) {
    bound = bound * 10 + (uint64_t)(p[i] - '0');
    if (bound > RAND_MAX_BOUND) return 0;
  }
  if (i == 6 || i >= n || p[i] != '}' || bound == 0) return 0;
  *kind = NHB__SEG_RAND;
  *arg = bound;
  return i + 1;
}

/* Splits src[0, len) into segments; those from body_at on are the body
 * (len for none). A placeholder never straddles body_at, and
 * {content-length} is recognized in the head only (the body's length cannot
 * depend on itself). Leaves t->segs NULL when there is no placeholder. */
static int tmpl_parse(const nhb_run* run, const char* src, size_t len, size_t body_at, nhb__tmpl* t) {
  memset(t, 0, sizeof(*t));
  t->src = src;
  uint32_t worker_digits = digits_u64((uint64_t)(run->nworkers > 0 ? run->nworkers - 1 : 0));
  /* Two passes over the same scan: count, then fill. */
  for (int pass = 0; pass < 2; pass++) {
    uint32_t n = 0, nph = 0;
    size_t lit = 0; /* start of the pending literal */
    size_t head_max = 0, body_max = 0;
    uint32_t body_seg = UINT32_MAX;
#define EMIT(KIND, LEN, ARG)                                       \
  do {                                                             \
    if (pass == 1) t->segs[n] = (nhb__seg){(KIND), (uint32_t)(LEN), (ARG)}; \
    if (body_seg == UINT32_MAX) head_max += (LEN);                 \
    else body_max += (LEN);                                        \
    n++;                                                           \
  } while (0)
    for (size_t i = 0; i <= len; i++) {
      if (i == body_at && body_seg == UINT32_MAX) {
        if (i > lit) EMIT(NHB__SEG_LIT, i - lit, lit);
        lit = i;
        body_seg = n;
      }
      if (i == len) break;
      if (src[i] != '{') continue;
      uint32_t kind;
      uint64_t arg;
      size_t limit = i < body_at ? body_at - i : len - i;
      size_t plen = placeholder_at(src + i, limit, &kind, &arg);
      if (plen == 0 || (kind == NHB__SEG_CLEN && i >= body_at)) continue;
      if (i > lit) EMIT(NHB__SEG_LIT, i - lit, lit);
      uint32_t width = kind == NHB__SEG_UUID     ? UUID_LEN
                       : kind == NHB__SEG_RAND   ? digits_u64(arg - 1)
                       : kind == NHB__SEG_WORKER ? worker_digits
                                                 : U64_DIGITS;
      EMIT(kind, width, arg);
      nph++;
      i += plen - 1;
      lit = i + 1;
    }
    if (len > lit) EMIT(NHB__SEG_LIT, len - lit, lit);
#undef EMIT
    if (nph == 0) {
      t->head_max = head_max;
      t->body_max = body_max;
      return 0;
    }
    if (pass == 0) {
      t->segs = calloc(n, sizeof(nhb__seg));
      if (t->segs == NULL) return NHB_ENOMEM;
    } else {
      t->nsegs = n;
      t->body_seg = body_seg == UINT32_MAX ? n : body_seg;
      t->head_max = head_max;
      t->body_max = body_max;
    }
  }
  return 0;
}

size_t nhb__tmpl_expand(const nhb__tmpl* t, uint32_t from, uint32_t to, const nhb__tmpl_ctx* x, char* out,
                        size_t cap) {
  size_t n = 0;
  for (uint32_t i = from; i < to; i++) {
    const nhb__seg* g = &t->segs[i];
    /* len is the segment's widest expansion: checking it before writing
     * keeps every write below inside the buffer. */
    if (g->len > cap - n) return SIZE_MAX;
    switch (g->kind) {
      case NHB__SEG_LIT:
        memcpy(out + n, t->src + g->arg, g->len);
        n += g->len;
        break;
      case NHB__SEG_SEQ:
        n += format_u64(out + n, x->seq);
        break;
      case NHB__SEG_UUID:
        n += format_uuid(out + n, x->rng);
        break;
      case NHB__SEG_RAND:
        n += format_u64(out + n, random_below(x->rng, g->arg));
        break;
      case NHB__SEG_WORKER:
        n += format_u64(out + n, x->worker);
        break;
      default: /* NHB__SEG_CLEN */
        n += format_u64(out + n, x->clen);
        break;
    }
  }
  return n;
}

/* ---- the request set -------------------------------------------------------- */

static size_t cstr_size(const char* s) { return s != NULL ? strlen(s) + 1 : 0; }

static const char* copy_cstr(char** p, const char* s) {
  if (s == NULL) return NULL;
  size_t n = strlen(s) + 1;
  memcpy(*p, s, n);
  const char* out = *p;
  *p += n;
  return out;
}

int nhb__request_set_create(nhb_run* run, char* err, size_t err_len) {
  nhb_client_config* cfg = &run->config;
  const int h2 = cfg->protocol == NHB_PROTO_HTTP2;
  /* check_config has made sure there is at least one entry. */
  const nhb_request_spec* src = cfg->specs;
  uint32_t n = cfg->nspecs;
  size_t total = 0, nheaders = 0;
  for (uint32_t i = 0; i < n; i++) {
    const nhb_request_spec* s = &src[i];
    /* Every request writes its bytes: NULL would be dereferenced, and an
     * empty write never completes. */
    if (s->request == NULL || s->request_len == 0) return set_error(err, err_len, "specs[%u]: empty request", i);
    /* The body is the tail of the request: a longer one would point before it. */
    if (s->body_size > s->request_len) return set_error(err, err_len, "specs[%u]: body_size exceeds the request", i);
    if (h2 &&
        (s->h2_method == NULL || s->h2_path == NULL || s->h2_authority == NULL || s->h2_nheaders < 0 ||
         (s->h2_nheaders > 0 && s->h2_headers == NULL)))
      return set_error(err, err_len, "specs[%u]: HTTP/2 needs h2_method, h2_authority and h2_path", i);
    total += s->request_len + cstr_size(s->h2_method) + cstr_size(s->h2_path) + cstr_size(s->h2_authority);
    int nh = s->h2_headers != NULL && s->h2_nheaders > 0 ? s->h2_nheaders : 0;
    for (int k = 0; k < nh; k++) total += s->h2_headers[k].name_len + s->h2_headers[k].value_len + 2;
    nheaders += (size_t)nh;
  }
  run->spec_copies = calloc(n, sizeof(nhb_request_spec));
  run->specs = calloc(n, sizeof(nhb__spec));
  run->spec_headers = nheaders ? calloc(nheaders, sizeof(nhb_header)) : NULL;
  run->spec_strings = malloc(total ? total : 1);
  if (!run->spec_copies || !run->specs || (nheaders && !run->spec_headers) || !run->spec_strings)
    return NHB_ENOMEM;
  char* p = run->spec_strings;
  nhb_header* hp = run->spec_headers;
  for (uint32_t i = 0; i < n; i++) {
    const nhb_request_spec* s = &src[i];
    nhb_request_spec* d = &run->spec_copies[i];
    *d = *s;
    memcpy(p, s->request, s->request_len);
    d->request = p;
    p += s->request_len;
    d->h2_method = copy_cstr(&p, s->h2_method);
    d->h2_path = copy_cstr(&p, s->h2_path);
    d->h2_authority = copy_cstr(&p, s->h2_authority);
    int nh = s->h2_headers != NULL && s->h2_nheaders > 0 ? s->h2_nheaders : 0;
    d->h2_headers = nh ? hp : NULL;
    d->h2_nheaders = nh;
    for (int k = 0; k < nh; k++, hp++) {
      const nhb_header* sh = &s->h2_headers[k];
      memcpy(p, sh->name, sh->name_len);
      p[sh->name_len] = '\0';
      hp->name = p;
      hp->name_len = sh->name_len;
      p += sh->name_len + 1;
      memcpy(p, sh->value, sh->value_len);
      p[sh->value_len] = '\0';
      hp->value = p;
      hp->value_len = sh->value_len;
      p += sh->value_len + 1;
    }
    nhb__spec* sp = &run->specs[i];
    sp->request = d->request;
    sp->request_len = d->request_len;
    sp->body_size = d->body_size;
    sp->body = d->request + d->request_len - d->body_size;
    sp->head_request = d->head_request;
  }
  run->nspecs = n;
  cfg->specs = run->spec_copies;
  cfg->nspecs = n;
  if (!cfg->templated) return 0;
  /* One template per spec's request, then (session_h2.c, at run creation) one per
   * HTTP/2 header field value: allocated together so that they are freed
   * together. */
  size_t ntmpl = n;
  if (h2)
    for (uint32_t i = 0; i < n; i++) ntmpl += 4 + (size_t)run->spec_copies[i].h2_nheaders;
  run->tmpls = calloc(ntmpl, sizeof(nhb__tmpl));
  if (run->tmpls == NULL) return NHB_ENOMEM;
  for (uint32_t i = 0; i < n; i++) {
    nhb__spec* sp = &run->specs[i];
    nhb__tmpl* t = &run->tmpls[i];
    int r = tmpl_parse(run, sp->request, sp->request_len, sp->request_len - sp->body_size, t);
    if (r < 0) return r;
    if (t->head_max + t->body_max > NHB_MAX_TEMPLATED_REQUEST) {
      /* Each connection or slot gets a buffer of the longest expansion. */
      if (err != NULL && err_len > 0)
        snprintf(err, err_len, "specs[%u]: a templated request may expand to at most %d bytes", (unsigned)i,
                 NHB_MAX_TEMPLATED_REQUEST);
      return NHB_EINVAL;
    }
    sp->tmpl = t;
    if (t->head_max + t->body_max > run->rq_h1_max) run->rq_h1_max = t->head_max + t->body_max;
    if (t->body_max > run->rq_body_max) run->rq_body_max = t->body_max;
  }
  if (h2) {
    nhb__tmpl* v = run->tmpls + n;
    for (uint32_t i = 0; i < n; i++) {
      run->specs[i].h2_vals = v;
      v += 4 + (size_t)run->spec_copies[i].h2_nheaders;
    }
  }
  return 0;
}

/* Parses the templates of one spec's HTTP/2 header field values; called by
 * session_h2.c at run creation with the header block it built. */
int nhb__request_h2_values(nhb_run* run, uint32_t spec, const void* nva, size_t nvlen) {
  const nghttp2_nv* nv = (const nghttp2_nv*)nva;
  nhb__spec* sp = &run->specs[spec];
  if (sp->h2_vals == NULL) return 0;
  size_t sum = 0;
  for (size_t k = 0; k < nvlen; k++) {
    /* The pseudo-header fields :method, :scheme and :authority stay as
     * they are: they choose the route, not the request's content. */
    if (k < 3) continue;
    int r = tmpl_parse(run, (const char*)nv[k].value, nv[k].valuelen, nv[k].valuelen, &sp->h2_vals[k]);
    if (r < 0) return r;
    if (sp->h2_vals[k].nsegs > 0) sum += sp->h2_vals[k].head_max;
  }
  /* The worker's header scratch is sized by the largest sum. */
  if (sum > NHB_MAX_TEMPLATED_REQUEST) return NHB_EINVAL;
  if (sum > run->rq_hdr_max) run->rq_hdr_max = sum;
  if (nvlen > run->rq_nvlen_max) run->rq_nvlen_max = nvlen;
  return 0;
}

void nhb__request_set_free(nhb_run* run) {
  if (run->tmpls != NULL) {
    size_t ntmpl = run->nspecs;
    if (run->config.protocol == NHB_PROTO_HTTP2)
      for (uint32_t i = 0; i < run->nspecs; i++) ntmpl += 4 + (size_t)run->spec_copies[i].h2_nheaders;
    for (size_t i = 0; i < ntmpl; i++) free(run->tmpls[i].segs);
  }
  free(run->tmpls);
  free(run->specs);
  free(run->spec_copies);
  free(run->spec_headers);
  free(run->spec_strings);
  run->tmpls = NULL;
  run->specs = NULL;
  run->spec_copies = NULL;
  run->spec_headers = NULL;
  run->spec_strings = NULL;
}

/* ---- per worker --------------------------------------------------------------- */

int nhb__request_worker_init(nhb__worker* w) {
  const nhb_run* run = w->run;
  if (!run->config.templated) return 0;
  /* Different workers, and different runs, draw different numbers: the
   * clock, the worker's index and its address all go into the seed. */
  w->rq_rng = nhb__realtime_ns() ^ ((uint64_t)w->index << 40) ^ (uint64_t)(uintptr_t)w;
  (void)nhb__splitmix64(&w->rq_rng);
  if (run->config.protocol == NHB_PROTO_HTTP2) {
    /* One body buffer per slot (a body is read while its stream lives),
     * one header block for the request being submitted. */
    size_t nslots = run->config.max_active_requests;
    w->rq_buf_each = run->rq_body_max;
    w->rq_buf = malloc(nslots * w->rq_buf_each + 1);
    w->rq_hdr_buf = malloc(run->rq_hdr_max + 1);
    w->rq_nva = calloc(run->rq_nvlen_max + 1, sizeof(nghttp2_nv));
    if (w->rq_buf == NULL || w->rq_hdr_buf == NULL || w->rq_nva == NULL) return NHB_ENOMEM;
  } else {
    /* One request buffer per connection: HTTP/1 has one request in flight
     * on each, and its bytes must stay put until the write completes. */
    w->rq_buf_each = run->rq_h1_max;
    w->rq_buf = malloc((size_t)w->nconns * w->rq_buf_each + 1);
    if (w->rq_buf == NULL) return NHB_ENOMEM;
  }
  return 0;
}

void nhb__request_worker_free(nhb__worker* w) {
  free(w->rq_buf);
  free(w->rq_hdr_buf);
  free(w->rq_nva);
  w->rq_buf = NULL;
  w->rq_hdr_buf = NULL;
  w->rq_nva = NULL;
}

void nhb__request_ctx(nhb__worker* w, nhb__tmpl_ctx* x) {
  /* Numbers unique across the run without sharing a counter between the
   * workers: worker i of n sends i, i + n, i + 2n, ... */
  x->seq = w->rq_seq++ * (uint64_t)w->run->nworkers + (uint64_t)w->index;
  x->worker = (uint32_t)w->index;
  x->rng = &w->rq_rng;
  x->clen = 0;
}

int nhb__request_h1_expand(nhb__conn* c, const nhb__spec* sp, const char** out, size_t* len) {
  nhb__worker* w = c->worker;
  const nhb__tmpl* t = sp->tmpl;
  char* buf = w->rq_buf + (size_t)(c - w->conns) * w->rq_buf_each;
  if (t->segs == NULL) {
    *out = sp->request;
    *len = sp->request_len;
    return 0;
  }
  nhb__tmpl_ctx x;
  nhb__request_ctx(w, &x);
  /* The body first, after room for the longest head, so that the head's
   * {content-length} knows its length; then the head, and the body moved up
   * to follow it. */
  size_t body = nhb__tmpl_expand(t, t->body_seg, t->nsegs, &x, buf + t->head_max, w->rq_buf_each - t->head_max);
  if (body == SIZE_MAX) return NHB_EINVAL;
  x.clen = body;
  size_t head = nhb__tmpl_expand(t, 0, t->body_seg, &x, buf, t->head_max);
  if (head == SIZE_MAX) return NHB_EINVAL;
  if (head < t->head_max && body > 0) memmove(buf + head, buf + t->head_max, body);
  *out = buf;
  *len = head + body;
  return 0;
}
