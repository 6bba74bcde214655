/* group.c: statistics per group of requests (docs/engine.md "Groups").
 *
 * A run may split its requests into groups, each with its own request
 * count, response classes, failures and request_to_response histogram:
 *  - by request-set entry (a request kind, a target): the Python side maps
 *    each entry to a group index at run creation (config.spec_group), so a
 *    response's group is one array read;
 *  - by the value of a response header (config.group_header): the sessions
 *    hand this file the response's header fields, and the first field of
 *    that name selects the group. Values are found at run time; each worker
 *    keeps a fixed table of the first NHB_MAX_GROUPS it sees, so that a
 *    server sending a new value with every response costs bounded memory
 *    and a bounded search: the rest land in "other".
 *
 * Everything is allocated at run creation; a response adds to its group's
 * counters and histogram and allocates nothing. A run without groups never
 * calls in here: the pool's response path reaches it through the
 * response_extras test it already makes (stages, endpoints), and the
 * sessions install their header-reading callbacks only when grouping by a
 * header.
 *
 * Header mode's table per worker: [0] none (no such header, or no response
 * at all), [1..NHB_MAX_GROUPS] the values in the order seen, [GRP_OTHER]
 * other. The merge joins the workers' values by value into the same shape,
 * then moves "other" right after the last value, so that the run's table
 * has no holes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"

#define GRP_NONE 0u
#define GRP_OTHER (NHB_MAX_GROUPS + 1u)
#define GRP_HEADER_SLOTS (NHB_MAX_GROUPS + 2u)
#define GRP_NOMATCH UINT32_MAX

struct nhb__grp_worker {
  nhb_group_stats* g; /* run->grp->n entries */
  uint32_t nvalues;   /* header mode: values taken so far (entries 1..nvalues) */
  /* The live view's copy (nhb__grp_publish): each entry's requests and
   * errors, and how many values are published. A value's bytes are written
   * once, before the release store that publishes it, and never again, so a
   * reader that loads pub_nvalues with acquire reads them whole. */
  _Atomic uint64_t* pub; /* 2 per entry */
  _Atomic uint32_t pub_nvalues;
};

/* The run's configuration, copied, and the merged statistics. */
typedef struct nhb__grp_run {
  uint32_t n;           /* entries per table */
  uint32_t* spec_group; /* by request set: nspecs entries; NULL by header */
  uint32_t hdr_len;     /* by header: the name, lower-case */
  char hdr[NHB__OLAT_NAME_MAX + 1];
  nhb_group_stats* global;
  uint32_t nglobal;
} nhb__grp_run;

static int is_tchar(unsigned char ch) {
  if ((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')) return 1;
  return ch != '\0' && strchr("!#$%&'*+-.^_`|~", ch) != NULL;
}

static inline char lower(char ch) { return (ch >= 'A' && ch <= 'Z') ? (char)(ch - 'A' + 'a') : ch; }

/* A table's histograms are allocated zeroed and untouched until a response
 * lands in them, so groups that take none cost no resident memory (an
 * nhb_hist is 221 KB), as the endpoints' (pool.c). */
static nhb_group_stats* table_alloc(uint32_t n, int header) {
  nhb_group_stats* t = calloc(n, sizeof(nhb_group_stats));
  if (t == NULL) return NULL;
  for (uint32_t i = 0; i < n; i++) {
    t[i].latency = calloc(1, sizeof(nhb_hist));
    if (t[i].latency == NULL) {
      for (uint32_t j = 0; j < i; j++) free(t[j].latency);
      free(t);
      return NULL;
    }
    t[i].latency->min = UINT64_MAX;
    t[i].kind = header ? (i == GRP_NONE ? NHB_GROUP_NONE : i == GRP_OTHER ? NHB_GROUP_OTHER : NHB_GROUP_VALUE)
                       : NHB_GROUP_INDEX;
  }
  return t;
}

static void table_free(nhb_group_stats* t, uint32_t n) {
  if (t == NULL) return;
  for (uint32_t i = 0; i < n; i++) free(t[i].latency);
  free(t);
}

static int grp_error(char* err, size_t err_len, const char* msg) {
  if (err != NULL && err_len > 0) snprintf(err, err_len, "%s", msg);
  return NHB_EINVAL;
}

int nhb__grp_run_init(nhb_run* run, char* err, size_t err_len) {
  const char* name = run->config.group_header;
  const uint32_t* spec_group = run->config.spec_group;
  uint32_t ngroups = run->config.ngroups;
  /* The config's pointers are the caller's: not kept. */
  run->config.group_header = NULL;
  run->config.spec_group = NULL;
  if (ngroups == 0 && name == NULL) return 0;
  if (ngroups != 0 && name != NULL) return grp_error(err, err_len, "groups: by request set or by header, not both");
  nhb__grp_run* g = calloc(1, sizeof(*g));
  if (g == NULL) return NHB_ENOMEM;
  run->grp = g;
  if (name != NULL) {
    size_t len = strlen(name);
    if (len == 0 || len > NHB__OLAT_NAME_MAX)
      return grp_error(err, err_len, "group_header: 1 to 256 characters");
    for (size_t i = 0; i < len; i++) {
      if (!is_tchar((unsigned char)name[i])) return grp_error(err, err_len, "group_header: not a header name");
      g->hdr[i] = lower(name[i]);
    }
    g->hdr_len = (uint32_t)len;
    g->n = GRP_HEADER_SLOTS;
  } else {
    if (ngroups > NHB_MAX_GROUPS + 1u)
      return grp_error(err, err_len, "groups: at most 65 (64 and \"other\")");
    /* The legacy single request has no spec array of its own: nspecs 1. */
    uint32_t nspecs = run->nspecs != 0 ? run->nspecs : 1;
    if (spec_group == NULL) return grp_error(err, err_len, "groups: spec_group missing");
    g->spec_group = calloc(nspecs, sizeof(uint32_t));
    if (g->spec_group == NULL) return NHB_ENOMEM;
    for (uint32_t i = 0; i < nspecs; i++) {
      if (spec_group[i] >= ngroups) return grp_error(err, err_len, "groups: an entry's group is out of range");
      g->spec_group[i] = spec_group[i];
    }
    g->n = ngroups;
  }
  int header = g->hdr_len != 0;
  g->global = table_alloc(g->n, header);
  if (g->global == NULL) return NHB_ENOMEM;
  for (int i = 0; i < run->nworkers; i++) {
    nhb__worker* w = &run->workers[i];
    w->grp = calloc(1, sizeof(*w->grp));
    if (w->grp == NULL) return NHB_ENOMEM;
    w->grp->g = table_alloc(g->n, header);
    if (w->grp->g == NULL) return NHB_ENOMEM;
    w->grp->pub = calloc((size_t)g->n * 2, sizeof(_Atomic uint64_t));
    if (w->grp->pub == NULL) return NHB_ENOMEM;
  }
  return 0;
}

void nhb__grp_run_free(nhb_run* run) {
  nhb__grp_run* g = run->grp;
  if (g == NULL) return;
  for (int i = 0; run->workers != NULL && i < run->nworkers; i++) {
    nhb__worker* w = &run->workers[i];
    if (w->grp == NULL) continue;
    table_free(w->grp->g, g->n);
    free((void*)w->grp->pub);
    free(w->grp);
    w->grp = NULL;
  }
  table_free(g->global, g->n);
  free(g->spec_group);
  free(g);
  run->grp = NULL;
}

int nhb__grp_by_header(const nhb_run* run) {
  const nhb__grp_run* g = run->grp;
  return g != NULL && g->hdr_len != 0;
}

/* ---- the value table ------------------------------------------------------ */

uint32_t nhb__grp_value_index(nhb__worker* w, const char* v, size_t len) {
  nhb__grp_worker* gw = w->grp;
  /* Optional white space around a field value is not part of it (RFC 9110
   * section 5.5); llhttp drops the leading one. */
  while (len > 0 && (v[len - 1] == ' ' || v[len - 1] == '\t')) len--;
  while (len > 0 && (v[0] == ' ' || v[0] == '\t')) {
    v++;
    len--;
  }
  if (len > NHB_GROUP_VALUE_MAX) return GRP_OTHER;
  /* A linear search over at most NHB_MAX_GROUPS values, the length first:
   * load balancers and canaries have a handful. */
  for (uint32_t i = 1; i <= gw->nvalues; i++) {
    const nhb_group_stats* e = &gw->g[i];
    if (e->value_len == len && memcmp(e->value, v, len) == 0) return i;
  }
  if (gw->nvalues == NHB_MAX_GROUPS) return GRP_OTHER;
  uint32_t i = ++gw->nvalues;
  memcpy(gw->g[i].value, v, len);
  gw->g[i].value_len = (uint32_t)len;
  return i;
}

/* HTTP/2 and HTTP/3: one whole field of the response. Names arrive
 * lower-case (both protocols require it, and the sessions refuse others). */
void nhb__grp_field(nhb__worker* w, nhb__slot* s, const char* name, size_t namelen, const char* value,
                    size_t valuelen) {
  const nhb__grp_run* g = w->run->grp;
  if (s->group != 0 || namelen != g->hdr_len || memcmp(name, g->hdr, namelen) != 0) return;
  s->group = nhb__grp_value_index(w, value, valuelen);
}

/* ---- HTTP/1.1: names and values in pieces ---------------------------------- */

struct nhb__grp_h1 {
  uint32_t pos; /* bytes of the name matched so far; GRP_NOMATCH once it differs */
  uint32_t len; /* bytes of the value kept so far; NHB_GROUP_VALUE_MAX + 1: too long */
  char val[NHB_GROUP_VALUE_MAX];
};

nhb__grp_h1* nhb__grp_h1_new(void) { return calloc(1, sizeof(nhb__grp_h1)); }

void nhb__grp_h1_free(nhb__grp_h1* h) { free(h); }

void nhb__grp_h1_begin(nhb__grp_h1* h, nhb__slot* s) {
  h->pos = 0;
  h->len = 0;
  /* An interim response's field does not choose the final response's group. */
  s->group = 0;
}

void nhb__grp_h1_name(nhb__grp_h1* h, const nhb_run* run, const char* at, size_t len) {
  const nhb__grp_run* g = run->grp;
  if (h->pos == GRP_NOMATCH) return;
  if (len > g->hdr_len - h->pos) {
    h->pos = GRP_NOMATCH;
    return;
  }
  for (size_t i = 0; i < len; i++) {
    if (lower(at[i]) != g->hdr[h->pos + i]) {
      h->pos = GRP_NOMATCH;
      return;
    }
  }
  h->pos += (uint32_t)len;
}

void nhb__grp_h1_value(nhb__grp_h1* h, const nhb_run* run, const nhb__slot* s, const char* at, size_t len) {
  if (h->pos != run->grp->hdr_len || s->group != 0 || h->len > NHB_GROUP_VALUE_MAX) return;
  if (len > NHB_GROUP_VALUE_MAX - h->len) {
    h->len = NHB_GROUP_VALUE_MAX + 1;
    return;
  }
  memcpy(h->val + h->len, at, len);
  h->len += (uint32_t)len;
}

void nhb__grp_h1_value_end(nhb__grp_h1* h, nhb__worker* w, nhb__slot* s) {
  if (h->pos == w->run->grp->hdr_len && s->group == 0)
    s->group = h->len > NHB_GROUP_VALUE_MAX ? GRP_OTHER : nhb__grp_value_index(w, h->val, h->len);
  h->pos = 0;
  h->len = 0;
}

/* ---- recording --------------------------------------------------------------- */

static inline nhb_group_stats* group_of(nhb__worker* w, nhb__slot* s) {
  const nhb__grp_run* g = w->run->grp;
  uint32_t i = g->spec_group != NULL ? g->spec_group[s->rq.spec] : s->group;
  /* Ready for the slot's next request. */
  s->group = 0;
  return &w->grp->g[i];
}

void nhb__grp_response(nhb__worker* w, nhb__slot* s, uint64_t latency, int klass) {
  nhb_group_stats* e = group_of(w, s);
  e->requests++;
  e->classes[klass >= 1 && klass <= 5 ? klass : 0]++;
  nhb_hist_record(e->latency, latency);
}

void nhb__grp_failed(nhb__worker* w, nhb__slot* s, nhb_counter_t reason) {
  nhb_group_stats* e = group_of(w, s);
  e->requests++;
  e->failures++;
  if (reason == NHB_CTR_CHECK_FAILED) e->check_failed++;
}

/* The requests counted in the worker's groups, and a check of the table's
 * bounds (the fuzz targets' invariant: each ended request in exactly one). */
uint64_t nhb__grp_requests(const nhb__worker* w) {
  const nhb__grp_worker* gw = w->grp;
  if (gw->nvalues > NHB_MAX_GROUPS) abort();
  uint64_t n = 0;
  for (uint32_t i = 0; i < w->run->grp->n; i++) {
    if (gw->g[i].value_len > NHB_GROUP_VALUE_MAX) abort();
    n += gw->g[i].requests;
  }
  return n;
}

/* The warm-up's requests are dropped when it ends; the values it found
 * stay in the table. */
void nhb__grp_end_warmup(nhb__worker* w) {
  if (w->grp == NULL) return;
  for (uint32_t i = 0; i < w->run->grp->n; i++) {
    nhb_group_stats* e = &w->grp->g[i];
    e->requests = e->failures = e->check_failed = 0;
    memset(e->classes, 0, sizeof(e->classes));
    if (e->latency->total != 0) nhb_hist_init(e->latency);
  }
}

static void add_into(nhb_group_stats* dst, const nhb_group_stats* src) {
  dst->requests += src->requests;
  for (int k = 0; k < 6; k++) dst->classes[k] += src->classes[k];
  dst->failures += src->failures;
  dst->check_failed += src->check_failed;
  if (src->latency->total != 0) nhb_hist_add(dst->latency, src->latency);
}

void nhb__grp_merge(nhb_run* run) {
  nhb__grp_run* g = run->grp;
  if (g == NULL) return;
  uint32_t nvalues = 0;
  for (int i = 0; i < run->nworkers; i++) {
    const nhb__grp_worker* gw = run->workers[i].grp;
    if (g->hdr_len == 0) {
      for (uint32_t k = 0; k < g->n; k++) add_into(&g->global[k], &gw->g[k]);
      continue;
    }
    add_into(&g->global[GRP_NONE], &gw->g[GRP_NONE]);
    add_into(&g->global[GRP_OTHER], &gw->g[GRP_OTHER]);
    for (uint32_t k = 1; k <= gw->nvalues; k++) {
      const nhb_group_stats* e = &gw->g[k];
      /* A value found in the warm-up that took no measured request is not one of the run's. */
      if (e->requests == 0) continue;
      uint32_t j = 1;
      while (j <= nvalues && !(g->global[j].value_len == e->value_len &&
                               memcmp(g->global[j].value, e->value, e->value_len) == 0))
        j++;
      if (j > nvalues) {
        if (nvalues == NHB_MAX_GROUPS) {
          j = GRP_OTHER;
        } else {
          j = ++nvalues;
          memcpy(g->global[j].value, e->value, e->value_len);
          g->global[j].value_len = e->value_len;
        }
      }
      add_into(&g->global[j], e);
    }
  }
  g->nglobal = g->n;
  if (g->hdr_len != 0) {
    /* "other" right after the last value: swapped whole, histograms too. */
    uint32_t last = nvalues + 1;
    if (last != GRP_OTHER) {
      nhb_group_stats t = g->global[last];
      g->global[last] = g->global[GRP_OTHER];
      g->global[GRP_OTHER] = t;
    }
    g->nglobal = nvalues + 2;
  }
}

/* ---- the live view ---------------------------------------------------------------- */

void nhb__grp_publish(nhb__worker* w) {
  nhb__grp_worker* gw = w->grp;
  for (uint32_t i = 0; i < w->run->grp->n; i++) {
    const nhb_group_stats* e = &gw->g[i];
    atomic_store_explicit(&gw->pub[2 * i], e->requests, memory_order_relaxed);
    atomic_store_explicit(&gw->pub[2 * i + 1], e->requests - e->classes[2], memory_order_relaxed);
  }
  atomic_store_explicit(&gw->pub_nvalues, gw->nvalues, memory_order_release);
}

static void progress_add(nhb_group_progress* dst, const nhb__grp_worker* gw, uint32_t i) {
  dst->requests += atomic_load_explicit(&gw->pub[2 * i], memory_order_relaxed);
  dst->errors += atomic_load_explicit(&gw->pub[2 * i + 1], memory_order_relaxed);
}

uint32_t nhb_run_group_progress(const nhb_run* run, nhb_group_progress* out, uint32_t max) {
  const nhb__grp_run* g = run->grp;
  if (g == NULL || out == NULL || max == 0) return 0;
  if (g->hdr_len == 0) {
    uint32_t n = g->n < max ? g->n : max;
    memset(out, 0, (size_t)n * sizeof(*out));
    for (uint32_t k = 0; k < n; k++) out[k].kind = NHB_GROUP_INDEX;
    for (int i = 0; i < run->nworkers; i++)
      for (uint32_t k = 0; k < n; k++) progress_add(&out[k], run->workers[i].grp, k);
    return n;
  }
  /* By a header: "none", the values joined by value (bounded as the merge
   * is), "other" last. */
  if (max < 2) return 0;
  uint32_t cap = max - 2 < NHB_MAX_GROUPS ? max - 2 : NHB_MAX_GROUPS;
  nhb_group_progress other;
  memset(out, 0, sizeof(*out));
  memset(&other, 0, sizeof(other));
  out[0].kind = NHB_GROUP_NONE;
  other.kind = NHB_GROUP_OTHER;
  uint32_t nvalues = 0;
  for (int i = 0; i < run->nworkers; i++) {
    const nhb__grp_worker* gw = run->workers[i].grp;
    progress_add(&out[0], gw, GRP_NONE);
    progress_add(&other, gw, GRP_OTHER);
    uint32_t seen = atomic_load_explicit(&gw->pub_nvalues, memory_order_acquire);
    for (uint32_t k = 1; k <= seen && k <= NHB_MAX_GROUPS; k++) {
      const nhb_group_stats* e = &gw->g[k];
      uint32_t j = 1;
      while (j <= nvalues && !(out[j].value_len == e->value_len && memcmp(out[j].value, e->value, e->value_len) == 0))
        j++;
      nhb_group_progress* dst = &other;
      if (j <= nvalues) {
        dst = &out[j];
      } else if (nvalues < cap) {
        dst = &out[++nvalues];
        memset(dst, 0, sizeof(*dst));
        dst->kind = NHB_GROUP_VALUE;
        dst->value_len = e->value_len;
        memcpy(dst->value, e->value, e->value_len);
      }
      progress_add(dst, gw, k);
    }
  }
  out[nvalues + 1] = other;
  return nvalues + 2;
}

const nhb_group_stats* nhb_run_group_stats(const nhb_run* run, uint32_t* count) {
  const nhb__grp_run* g = run->grp;
  *count = run->finished && g != NULL ? g->nglobal : 0;
  return *count ? g->global : NULL;
}
