/* observe.c: the latency response header.
 *
 * Nighthawk's --latency-response-header-name names a response header whose
 * value the origin sets to a latency it measured, in nanoseconds (Nighthawk's
 * test server and ours emit the time since the previous request arrived with
 * emit_previous_request_delta_in_response_header; Envoy's
 * x-envoy-upstream-service-time is another). Nighthawk records the value
 * into benchmark_http_client.origin_latency_statistic when the response has
 * exactly one such header whose value absl::SimpleAtoi reads as an int64
 * that is not negative; otherwise it logs "Bad origin delta" (at most every
 * power of two times) and records nothing. nhbench does the same and counts
 * the rejected responses in benchmark.origin_latency_header_errors, so that a
 * malformed header is visible in the result rather than in a log.
 *
 * The sessions install callbacks that call into this file only when the
 * option is set, so a run without it does no extra work per header.
 * Matching and parsing are incremental (HTTP/1.1 hands names and values over
 * in pieces when they straddle reads) and never copy or allocate.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"

/* Value parser phases, after absl::SimpleAtoi: white space, an optional
 * sign, decimal digits, white space. */
enum { PH_LEAD = 0, PH_SIGN, PH_DIGITS, PH_TRAIL, PH_BAD };

#define INT64_LIMIT ((uint64_t)INT64_MAX)

static int is_space(char ch) { return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n' || ch == '\v' || ch == '\f'; }

/* RFC 9110 token characters: what a header name may consist of. */
static int is_tchar(unsigned char ch) {
  if ((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')) return 1;
  return ch != '\0' && strchr("!#$%&'*+-.^_`|~", ch) != NULL;
}

int nhb__observe_init(nhb_run* run, char* err, size_t err_len) {
  const char* name = run->config.latency_response_header_name;
  size_t len = name != NULL ? strlen(name) : 0;
  run->olat_len = 0;
  /* A copy owned by the run, so the config's string may go away. */
  run->config.latency_response_header_name = NULL;
  if (len > NHB__OLAT_NAME_MAX) {
    if (err != NULL && err_len > 0)
      snprintf(err, err_len, "latency_response_header_name: longer than %d characters", NHB__OLAT_NAME_MAX);
    return NHB_EINVAL;
  }
  for (size_t i = 0; i < len; i++) {
    if (!is_tchar((unsigned char)name[i])) {
      if (err != NULL && err_len > 0) snprintf(err, err_len, "latency_response_header_name: not a header name");
      return NHB_EINVAL;
    }
    /* Lower-case once here, so the hot path lower-cases only what it reads. */
    char ch = name[i];
    run->olat_name[i] = (ch >= 'A' && ch <= 'Z') ? (char)(ch - 'A' + 'a') : ch;
  }
  run->olat_name[len] = '\0';
  run->olat_len = (uint32_t)len;
  if (len > 0) {
    run->config.latency_response_header_name = run->olat_name;
    return 0;
  }
  /* Not measured: no histogram, so that the statistic is absent from the
   * result (Nighthawk reports it only when the option is given) and the
   * merge skips it. */
  free(run->global.hists[NHB_HIST_ORIGIN_LATENCY]);
  run->global.hists[NHB_HIST_ORIGIN_LATENCY] = NULL;
  for (int i = 0; i < run->nworkers; i++) {
    nhb_stats* st = &run->workers[i].stats;
    free(st->hists[NHB_HIST_ORIGIN_LATENCY]);
    st->hists[NHB_HIST_ORIGIN_LATENCY] = NULL;
  }
  return 0;
}

void nhb__olat_reset(nhb__olat* o) { memset(o, 0, sizeof(*o)); }

void nhb__olat_name(nhb__olat* o, const nhb_run* run, const char* at, size_t len) {
  if (o->pos == NHB__OLAT_NOMATCH) return;
  if (len > run->olat_len - o->pos) {
    o->pos = NHB__OLAT_NOMATCH;
    return;
  }
  const char* want = run->olat_name + o->pos;
  for (size_t i = 0; i < len; i++) {
    char ch = at[i];
    if (ch >= 'A' && ch <= 'Z') ch = (char)(ch - 'A' + 'a');
    if (ch != want[i]) {
      o->pos = NHB__OLAT_NOMATCH;
      return;
    }
  }
  o->pos += (uint32_t)len;
}

void nhb__olat_value(nhb__olat* o, const nhb_run* run, const char* at, size_t len) {
  if (o->pos != run->olat_len) return;
  for (size_t i = 0; i < len && o->phase != PH_BAD; i++) {
    char ch = at[i];
    int digit = ch >= '0' && ch <= '9';
    switch (o->phase) {
      case PH_LEAD:
        if (is_space(ch)) break;
        if (ch == '+' || ch == '-') {
          o->neg = ch == '-';
          o->phase = PH_SIGN;
          break;
        }
        /* A digit starts the number, anything else is bad: as after a sign. */
        __attribute__((fallthrough));
      case PH_SIGN:
      case PH_DIGITS:
        if (digit) {
          uint64_t d = (uint64_t)(ch - '0');
          /* The value must fit an int64 (what Nighthawk parses into). */
          o->phase = (o->value > (INT64_LIMIT - d) / 10) ? PH_BAD : PH_DIGITS;
          o->value = o->value * 10 + d;
        } else if (o->phase == PH_DIGITS && is_space(ch)) {
          o->phase = PH_TRAIL;
        } else {
          o->phase = PH_BAD;
        }
        break;
      case PH_TRAIL:
        if (!is_space(ch)) o->phase = PH_BAD;
        break;
      default:
        break;
    }
  }
}

void nhb__olat_value_end(nhb__olat* o, const nhb_run* run) {
  if (o->pos == run->olat_len) {
    int ok = (o->phase == PH_DIGITS || o->phase == PH_TRAIL) && !(o->neg && o->value != 0);
    if (!ok) o->bad = 1;
    if (o->count < 2) o->count++;
  }
  /* The next header line starts afresh; value keeps the number read (only
   * a response with exactly one such header uses it). */
  o->pos = 0;
  o->phase = PH_LEAD;
  o->neg = 0;
}

void nhb__olat_finish(nhb__olat* o, nhb__worker* w) {
  if (o->count == 1 && !o->bad) {
    nhb_hist_record(w->stats.hists[NHB_HIST_ORIGIN_LATENCY], o->value);
  } else if (o->count != 0) {
    /* Malformed, negative, too large, or more than one such header (Envoy
     * reads those as "multiple values", which Nighthawk rejects). */
    w->stats.counters[NHB_CTR_ORIGIN_LATENCY_HEADER_ERRORS]++;
  }
  nhb__olat_reset(o);
}
