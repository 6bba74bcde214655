/* trace.c: traces (docs/telemetry.md, "Traces").
 *
 * A run with tracing on samples a fraction of its requests. Each worker draws
 * one number per request from its own splitmix64 generator and compares it
 * with a threshold (no lock, no shared state); a sampled request gets a
 * random 128-bit trace id and 64-bit span id, carried on the wire as a W3C
 * traceparent and, for Zipkin, B3 headers. When its request ends, the span
 * (ids, start, end, status) goes into the worker's ring: a single-producer,
 * single-consumer array whose head only the worker writes (release store)
 * and whose tail only nhb_run_take_spans() writes, under the run's lock.
 * A full ring drops the span and counts it: the worker never waits for the
 * exporter.
 *
 * What a run without tracing pays: nothing on the send path (its
 * connections hold the protocol's plain session, not the traced one) and
 * one test of a slot field that stays 0 when a request ends (pool.c).
 *
 * HTTP/1.1 copies a sampled request into a per-connection buffer with the
 * trace headers before the blank line; HTTP/2 and HTTP/3 append them to a
 * copy of the header block in a per-worker scratch that nghttp2 or nghttp3
 * copies on submit. Both
 * buffers are allocated once (per connection on its first sampled request,
 * per worker with the run), never per request.
 */
#include <nghttp2/nghttp2.h>
#include <nghttp3/nghttp3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"

/* A ring of 16384 spans per worker takes 900 KiB and holds 1.6 s of spans
 * at 10,000 sampled requests a second, while the exporter drains it every
 * 0.1 s. */
#define TRACE_RING_DEFAULT 16384u
#define TRACE_RING_MAX (1u << 24)
/* The longest HTTP/1.1 request (head and body) that can be traced: a sampled
 * request is copied whole into its connection's buffer, so the buffers stay
 * small (larger bodies are refused by name when the run is created). */
#define TRACE_H1_MAX (64u * 1024u)

typedef struct nhb__trace {
  nhb__trace_draw draw; /* first: nhb__trace_sample (client.h) reads it */
  int b3;
  uint32_t mask;      /* ring entries - 1 */
  nhb_span* ring;
  _Atomic uint64_t head; /* written by the worker */
  _Atomic uint64_t tail; /* written by nhb_run_take_spans */
  uint64_t tail_seen;    /* the worker's last look at tail */
  _Atomic uint64_t sampled, dropped; /* written by the worker only */
  nghttp2_nv* nva;       /* HTTP/2: the header block with the trace fields */
  nghttp3_nv* nva3;      /* HTTP/3: the same */
  size_t nva_cap;
  char vals[NHB__TRACE_HDR_MAX]; /* HTTP/2 and HTTP/3: their values */
} nhb__trace;

static void hex64(char* out, uint64_t v) {
  static const char hex[] = "0123456789abcdef";
  for (int i = 15; i >= 0; i--) {
    out[i] = hex[v & 15];
    v >>= 4;
  }
}

int nhb__trace_run_init(nhb_run* run, char* err, size_t err_len) {
  const nhb_client_config* cfg = &run->config;
  double rate = cfg->trace_sample_rate;
  if (rate == 0.0) return 0;
  if (!(rate > 0.0 && rate <= 1.0)) {
    if (err) snprintf(err, err_len, "trace_sample_rate: must be in (0, 1], not %g", rate);
    return NHB_EINVAL;
  }
  const nhb__protocol* proto = nhb__protocols[cfg->protocol];
  if (proto->traced_session == NULL) {
    if (err) snprintf(err, err_len, "tracing is not supported with %s (HTTP/1.1, HTTP/2, HTTP/3 and gRPC only)", proto->name);
    return NHB_EINVAL;
  }
  uint32_t ring = cfg->trace_ring ? cfg->trace_ring : TRACE_RING_DEFAULT;
  if (ring > TRACE_RING_MAX || (ring & (ring - 1)) != 0) {
    if (err) snprintf(err, err_len, "trace_ring: a power of two up to %u", TRACE_RING_MAX);
    return NHB_EINVAL;
  }
  size_t h1_max = 0, nvlen_max = 0;
  for (uint32_t i = 0; i < run->nspecs; i++) {
    const nhb__spec* sp = &run->specs[i];
    if (sp->request_len > h1_max) h1_max = sp->request_len;
    if (sp->h2_nvlen > nvlen_max) nvlen_max = sp->h2_nvlen;
    /* HTTP/3 builds its blocks from the config: four pseudo-headers and the fields. */
    size_t h3_nvlen = (size_t)cfg->specs[i].h2_nheaders + 4;
    if (cfg->protocol == NHB_PROTO_HTTP3 && h3_nvlen > nvlen_max) nvlen_max = h3_nvlen;
  }
  if (run->rq_h1_max > h1_max) h1_max = run->rq_h1_max;
  if (cfg->protocol == NHB_PROTO_HTTP1 && h1_max > TRACE_H1_MAX) {
    if (err)
      snprintf(err, err_len, "tracing HTTP/1.1 requests of more than %u bytes (head and body) is not supported",
               TRACE_H1_MAX);
    return NHB_EINVAL;
  }
  run->trace_h1_cap = h1_max + NHB__TRACE_HDR_MAX;
  uint64_t seed = nhb__realtime_ns();
  for (int i = 0; i < run->nworkers; i++) {
    nhb__trace* t = calloc(1, sizeof(nhb__trace));
    if (t == NULL) return NHB_ENOMEM;
    run->workers[i].trace = t;
    t->ring = calloc(ring, sizeof(nhb_span));
    t->nva_cap = nvlen_max + 4;
    if (cfg->protocol == NHB_PROTO_HTTP3)
      t->nva3 = calloc(t->nva_cap, sizeof(nghttp3_nv));
    else
      t->nva = calloc(t->nva_cap, sizeof(nghttp2_nv));
    if (t->ring == NULL || (t->nva == NULL && t->nva3 == NULL)) return NHB_ENOMEM;
    t->mask = ring - 1;
    t->draw.rng = seed ^ ((uint64_t)(i + 1) * 0xD1B54A32D192ED03ULL);
    /* A draw is uniform in [0, 2^64): at most rate * 2^64 - 1 with probability rate. */
    double scaled = rate * 18446744073709551616.0;
    if (rate >= 1.0 || scaled >= 18446744073709549568.0)
      t->draw.threshold = UINT64_MAX;
    else
      t->draw.threshold = scaled < 1.0 ? 0 : (uint64_t)scaled - 1;
    t->b3 = cfg->trace_b3;
  }
  return 0;
}

void nhb__trace_run_free(nhb_run* run) {
  if (run->workers == NULL) return;
  /* config.nworkers: a failed thread start lowers run->nworkers, not what was allocated. */
  for (int i = 0; i < run->config.nworkers; i++) {
    nhb__trace* t = run->workers[i].trace;
    if (t == NULL) continue;
    free(t->ring);
    free(t->nva);
    free(t->nva3);
    free(t);
    run->workers[i].trace = NULL;
  }
}

int nhb__trace_start(nhb__worker* w, nhb__slot* s) {
  nhb__trace* t = w->trace;
  s->trace_hi = nhb__splitmix64(&t->draw.rng);
  s->trace_lo = nhb__splitmix64(&t->draw.rng);
  uint64_t id = nhb__splitmix64(&t->draw.rng);
  s->span_id = id != 0 ? id : 1; /* all-zero ids are invalid in both formats */
  if (s->trace_hi == 0 && s->trace_lo == 0) s->trace_lo = 1;
  atomic_store_explicit(&t->sampled, atomic_load_explicit(&t->sampled, memory_order_relaxed) + 1,
                        memory_order_relaxed);
  return 1;
}

/* The trace header lines of `s`, HTTP/1.1 style; returns their length. */
static size_t trace_lines(const nhb__trace* t, const nhb__slot* s, char* out) {
  char* p = out;
  memcpy(p, "traceparent: 00-", 16);
  p += 16;
  hex64(p, s->trace_hi);
  hex64(p + 16, s->trace_lo);
  p[32] = '-';
  hex64(p + 33, s->span_id);
  memcpy(p + 49, "-01\r\n", 5);
  p += 54;
  if (t->b3) {
    memcpy(p, "x-b3-traceid: ", 14);
    hex64(p + 14, s->trace_hi);
    hex64(p + 30, s->trace_lo);
    memcpy(p + 46, "\r\nx-b3-spanid: ", 15);
    hex64(p + 61, s->span_id);
    memcpy(p + 77, "\r\nx-b3-sampled: 1\r\n", 19);
    p += 96;
  }
  return (size_t)(p - out);
}

int nhb__trace_h1(nhb__conn* c, const nhb__slot* s, const char* in, size_t len, const char** out, size_t* out_len) {
  nhb__worker* w = c->worker;
  size_t cap = w->run->trace_h1_cap;
  if (c->trace_buf == NULL) {
    c->trace_buf = malloc(cap);
    if (c->trace_buf == NULL) return NHB_ENOMEM;
  }
  /* The head ends at the first blank line; the body may hold anything. */
  const char* end = NULL;
  for (const char* p = in; p + 3 < in + len; p++) {
    p = memchr(p, '\r', (size_t)(in + len - 3 - p));
    if (p == NULL) break;
    if (p[1] == '\n' && p[2] == '\r' && p[3] == '\n') {
      end = p + 2;
      break;
    }
  }
  if (end == NULL || len + NHB__TRACE_HDR_MAX > cap) return NHB_EINVAL;
  size_t head = (size_t)(end - in);
  memcpy(c->trace_buf, in, head);
  size_t n = trace_lines(w->trace, s, c->trace_buf + head);
  memcpy(c->trace_buf + head + n, end, len - head);
  *out = c->trace_buf;
  *out_len = len + n;
  return 0;
}

/* The values of the trace fields of `s` into t->vals: the traceparent
 * (55 bytes), then the B3 trace id (32) and span id (16). */
static void trace_values(nhb__trace* t, const nhb__slot* s) {
  char* v = t->vals;
  memcpy(v, "00-", 3);
  hex64(v + 3, s->trace_hi);
  hex64(v + 19, s->trace_lo);
  v[35] = '-';
  hex64(v + 36, s->span_id);
  memcpy(v + 52, "-01", 3);
  if (t->b3) {
    char* b = v + 55;
    hex64(b, s->trace_hi);
    hex64(b + 16, s->trace_lo);
    hex64(b + 32, s->span_id);
  }
}

const void* nhb__trace_h2(nhb__worker* w, const nhb__slot* s, const void* nva, size_t* nvlen) {
  nhb__trace* t = w->trace;
  size_t n = *nvlen;
  if (t->nva == NULL || n + 4 > t->nva_cap) return nva; /* never: sized from the longest block */
  memcpy(t->nva, nva, n * sizeof(nghttp2_nv));
  trace_values(t, s);
  char* v = t->vals;
  nghttp2_nv* o = &t->nva[n];
  *o++ = (nghttp2_nv){(uint8_t*)"traceparent", (uint8_t*)v, 11, 55, NGHTTP2_NV_FLAG_NONE};
  if (t->b3) {
    char* b = v + 55;
    *o++ = (nghttp2_nv){(uint8_t*)"x-b3-traceid", (uint8_t*)b, 12, 32, NGHTTP2_NV_FLAG_NONE};
    *o++ = (nghttp2_nv){(uint8_t*)"x-b3-spanid", (uint8_t*)(b + 32), 11, 16, NGHTTP2_NV_FLAG_NONE};
    *o++ = (nghttp2_nv){(uint8_t*)"x-b3-sampled", (uint8_t*)"1", 12, 1, NGHTTP2_NV_FLAG_NONE};
  }
  *nvlen = (size_t)(o - t->nva);
  return t->nva;
}

/* As nhb__trace_h2, for nghttp3: the fields go without NO_COPY flags, so
 * nghttp3 copies their values (and the array) when the request is submitted,
 * before the scratch is reused. */
const void* nhb__trace_h3(nhb__worker* w, const nhb__slot* s, const void* nva, size_t* nvlen) {
  nhb__trace* t = w->trace;
  size_t n = *nvlen;
  if (t->nva3 == NULL || n + 4 > t->nva_cap) return nva; /* never: sized from the longest block */
  memcpy(t->nva3, nva, n * sizeof(nghttp3_nv));
  trace_values(t, s);
  uint8_t* v = (uint8_t*)t->vals;
  nghttp3_nv* o = &t->nva3[n];
  *o++ = (nghttp3_nv){(uint8_t*)"traceparent", v, 11, 55, NGHTTP3_NV_FLAG_NONE};
  if (t->b3) {
    uint8_t* b = v + 55;
    *o++ = (nghttp3_nv){(uint8_t*)"x-b3-traceid", b, 12, 32, NGHTTP3_NV_FLAG_NONE};
    *o++ = (nghttp3_nv){(uint8_t*)"x-b3-spanid", b + 32, 11, 16, NGHTTP3_NV_FLAG_NONE};
    *o++ = (nghttp3_nv){(uint8_t*)"x-b3-sampled", (uint8_t*)"1", 12, 1, NGHTTP3_NV_FLAG_NONE};
  }
  *nvlen = (size_t)(o - t->nva3);
  return t->nva3;
}

void nhb__trace_end(nhb__worker* w, nhb__slot* s, int status, nhb_counter_t reason, uint64_t now) {
  nhb__trace* t = w->trace;
  uint64_t head = atomic_load_explicit(&t->head, memory_order_relaxed);
  if (head - t->tail_seen > t->mask) {
    t->tail_seen = atomic_load_explicit(&t->tail, memory_order_acquire);
    if (head - t->tail_seen > t->mask) {
      atomic_store_explicit(&t->dropped, atomic_load_explicit(&t->dropped, memory_order_relaxed) + 1,
                            memory_order_relaxed);
      s->span_id = 0;
      return;
    }
  }
  nhb_span* sp = &t->ring[head & t->mask];
  sp->trace_hi = s->trace_hi;
  sp->trace_lo = s->trace_lo;
  sp->span_id = s->span_id;
  sp->start_ns = s->rq.send_ns; /* monotonic here, wall clock once taken */
  sp->end_ns = now;
  sp->status = status > 0 ? status : 0;
  sp->reason = status > 0 ? 0u : (uint32_t)reason;
  sp->spec = s->rq.spec;
  sp->worker = (uint32_t)w->index;
  atomic_store_explicit(&t->head, head + 1, memory_order_release);
  s->span_id = 0;
}

int nhb_run_take_spans(nhb_run* run, nhb_span* out, int max) {
  if (run == NULL || run->workers == NULL || max <= 0) return 0;
  int n = 0;
  pthread_mutex_lock(&run->lock);
  /* Monotonic to wall clock, by the instant the run took as its start. */
  int64_t shift = (int64_t)run->t0_realtime_ns - (int64_t)run->t0_ns;
  for (int i = 0; i < run->nworkers && n < max; i++) {
    nhb__trace* t = run->workers[i].trace;
    if (t == NULL) continue;
    uint64_t tail = atomic_load_explicit(&t->tail, memory_order_relaxed);
    uint64_t head = atomic_load_explicit(&t->head, memory_order_acquire);
    while (tail != head && n < max) {
      nhb_span sp = t->ring[tail & t->mask];
      sp.start_ns = (uint64_t)((int64_t)sp.start_ns + shift);
      sp.end_ns = (uint64_t)((int64_t)sp.end_ns + shift);
      out[n++] = sp;
      tail++;
    }
    atomic_store_explicit(&t->tail, tail, memory_order_release);
  }
  pthread_mutex_unlock(&run->lock);
  return n;
}

void nhb_run_trace_counts(nhb_run* run, uint64_t* sampled, uint64_t* dropped) {
  *sampled = *dropped = 0;
  if (run == NULL || run->workers == NULL) return;
  for (int i = 0; i < run->nworkers; i++) {
    nhb__trace* t = run->workers[i].trace;
    if (t == NULL) continue;
    *sampled += atomic_load_explicit(&t->sampled, memory_order_relaxed);
    *dropped += atomic_load_explicit(&t->dropped, memory_order_relaxed);
  }
}
