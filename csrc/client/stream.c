/* stream.c: streaming responses (docs/engine.md "Streaming responses").
 *
 * LLM gateways and other event streams are judged by when the first token
 * comes and by the gaps between tokens, not by when the last byte of the
 * response arrives. With config.stream_stats set, each response's events
 * are timed as they arrive:
 *
 *   time_to_first_event  the request's last byte written (the phases'
 *                        written stamp) to the first event
 *   inter_event_gap      one event to the next, within a response
 *   stream_duration      the first event to the last, per response with one
 *   events_per_response  a streaming statistic (count, not time)
 *
 * An event is an SSE event when the final response's content-type is
 * text/event-stream (nhb__sse_feed: a blank line after a data field, split
 * anywhere across reads, chunks and frames), else a body piece as the
 * session sees it arrive: an HTTP/1.1 chunk (at its end) or, for a counted
 * or close-delimited body, each read that carries body bytes; an HTTP/2 DATA
 * frame with a payload; a piece of an HTTP/3 DATA frame as nghttp3 hands it
 * over (one per packet that carries body bytes).
 *
 * Cost: the sessions install the callbacks that call into this file only
 * when the option is on, and the statistics are not allocated otherwise, so
 * a run without it executes the same instructions as before. With it on, the
 * state is a few bytes in the slot (nhb__str), reset when a response's head
 * begins; nothing is allocated per request or per event, and an event costs
 * at most one clock read and one histogram record.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"

/* ---- the SSE splitter --------------------------------------------------------- */

static const char sse_bom[3] = {'\xEF', '\xBB', '\xBF'};

uint32_t nhb__sse_feed(nhb__sse* p, const char* data, size_t len) {
  uint32_t events = 0;
  size_t i = 0;
  while (i < len && p->bom < 3) {
    /* One leading byte order mark is not part of the first line. */
    if (data[i] == sse_bom[p->bom]) {
      p->bom++;
      i++;
      continue;
    }
    /* Part of a mark and then something else: those bytes began a field
     * name that cannot be "data". */
    if (p->bom > 0) p->line = 5;
    p->bom = 3;
  }
  while (i < len) {
    char b = data[i++];
    if (p->cr) {
      p->cr = 0;
      if (b == '\n') continue;
    }
    if (b == '\r' || b == '\n') {
      if (p->line == 0) {
        /* A blank line: dispatch, if the event has data. */
        events += p->has_data;
        p->has_data = 0;
      } else if (p->line == 4 || p->line == 6) {
        /* "data" alone, or "data:..." */
        p->has_data = 1;
      }
      p->line = 0;
      p->cr = b == '\r';
      continue;
    }
    if (p->line < 4) {
      p->line = b == "data"[p->line] ? (uint8_t)(p->line + 1) : 5;
    } else if (p->line == 4) {
      p->line = b == ':' ? 6 : 5;
    } else {
      /* The rest of the line says nothing more: skip to its end. */
      while (i < len && data[i] != '\n' && data[i] != '\r') i++;
    }
  }
  return events;
}

/* ---- the run -------------------------------------------------------------------- */

static const nhb_histogram_t str_hists[] = {NHB_HIST_TIME_TO_FIRST_EVENT, NHB_HIST_INTER_EVENT_GAP,
                                            NHB_HIST_STREAM_DURATION};

int nhb__str_run_init(nhb_run* run, char* err, size_t err_len) {
  const nhb_client_config* cfg = &run->config;
  if (cfg->stream_stats) {
    /* Events are HTTP bodies; a gRPC call's messages are not timed yet. */
    if ((cfg->protocol == NHB_PROTO_HTTP1 || cfg->protocol == NHB_PROTO_HTTP2 || cfg->protocol == NHB_PROTO_HTTP3) &&
        !cfg->grpc)
      return 0;
    if (err != NULL && err_len > 0)
      snprintf(err, err_len, "stream_stats: HTTP/1.1, HTTP/2 and HTTP/3 only (not gRPC, tcp:// or udp://)");
    return NHB_EINVAL;
  }
  /* Not measured: no histograms, so that the statistics are absent from
   * the result and the merge skips them. */
  for (size_t k = 0; k < sizeof(str_hists) / sizeof(str_hists[0]); k++) {
    nhb_histogram_t h = str_hists[k];
    free(run->global.hists[h]);
    run->global.hists[h] = NULL;
    for (int i = 0; i < run->nworkers; i++) {
      nhb_stats* st = &run->workers[i].stats;
      free(st->hists[h]);
      st->hists[h] = NULL;
    }
  }
  return 0;
}

/* ---- one response ------------------------------------------------------------- */

void nhb__str_begin(nhb__str* t) { memset(t, 0, sizeof(*t)); }

static const char ct_name[] = "content-type";
static const char ct_value[] = "text/event-stream";
#define CT_NAME_LEN 12u
#define CT_VALUE_LEN 17u
#define STR_OTHER 0xFFu

static inline char lower(char c) { return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c; }

void nhb__str_name(nhb__str* t, const char* at, size_t len) {
  for (size_t i = 0; i < len && t->name_at != STR_OTHER; i++) {
    if (t->name_at < CT_NAME_LEN && lower(at[i]) == ct_name[t->name_at]) t->name_at++;
    else t->name_at = STR_OTHER;
  }
}

void nhb__str_value(nhb__str* t, const char* at, size_t len) {
  if (t->name_at != CT_NAME_LEN) return;
  t->is_ct = 1;
  for (size_t i = 0; i < len && t->val_at != STR_OTHER; i++) {
    char c = lower(at[i]);
    if (t->val_at < CT_VALUE_LEN) {
      t->val_at = c == ct_value[t->val_at] ? (uint8_t)(t->val_at + 1) : STR_OTHER;
    } else if (t->val_at == CT_VALUE_LEN) {
      /* The type ends at its parameters (";charset=utf-8") or blanks. */
      t->val_at = (c == ';' || c == ' ' || c == '\t') ? (uint8_t)(CT_VALUE_LEN + 1) : STR_OTHER;
    }
  }
}

void nhb__str_value_end(nhb__str* t) {
  /* The last content-type field decides; an empty one is another type. */
  if (t->is_ct) t->sse = t->val_at == CT_VALUE_LEN || t->val_at == CT_VALUE_LEN + 1;
  t->name_at = 0;
  t->val_at = 0;
  t->is_ct = 0;
}

static void str_events(nhb__worker* w, nhb__slot* s, uint32_t n, uint64_t now) {
  nhb__str* t = &s->str;
  nhb_stats* st = &w->stats;
  if (now == 0) now = nhb__now_ns();
  if (t->events == 0) {
    /* From the request's last byte written, as time_to_first_byte; a
     * request whose write was still pending counts from its hand-over. */
    uint64_t from = s->written_ns != 0 ? s->written_ns : s->rq.send_ns;
    nhb_hist_record(st->hists[NHB_HIST_TIME_TO_FIRST_EVENT], now > from ? now - from : 0);
    t->first_ns = now;
    t->last_ns = now;
    t->events = 1;
    n--;
  }
  /* Events that one piece completed together are 0 apart. */
  for (; n > 0; n--) {
    nhb_hist_record(st->hists[NHB_HIST_INTER_EVENT_GAP], now > t->last_ns ? now - t->last_ns : 0);
    t->last_ns = now;
    if (t->events < UINT32_MAX) t->events++;
  }
}

void nhb__str_data(nhb__worker* w, nhb__slot* s, const char* at, size_t len, uint64_t now) {
  nhb__str* t = &s->str;
  if (!t->sse) return;
  uint32_t n = nhb__sse_feed(&t->p, at, len);
  if (n != 0) str_events(w, s, n, now);
}

void nhb__str_piece(nhb__worker* w, nhb__slot* s, uint64_t now) {
  if (!s->str.sse) str_events(w, s, 1, now);
}

void nhb__str_end(nhb__worker* w, nhb__slot* s) {
  nhb__str* t = &s->str;
  nhb_stats* st = &w->stats;
  nhb_stream_record(&st->streams[NHB_STREAM_EVENTS_PER_RESPONSE], t->events);
  if (t->events != 0) nhb_hist_record(st->hists[NHB_HIST_STREAM_DURATION], t->last_ns - t->first_ns);
  /* Counted once: a late callback for the same response adds nothing. */
  memset(t, 0, sizeof(*t));
}
