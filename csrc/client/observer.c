/* observer.c: the response observers (client.h, NHB__OBS_*).
 *
 * Five features look at a response beyond its status and sizes: the
 * latency response header, response checks, grouping by a response header,
 * streaming statistics and gRPC. Each session calls one step here per
 * response event (a head begins, a field, the head ends, body bytes, a body
 * piece ends, the response ends), and the step passes it to every feature
 * of the run's mask, in one fixed order; the features keep their own state
 * (per connection for HTTP/1.1, per slot for HTTP/2 and HTTP/3). A session
 * calls these only from the callbacks it installs when run->obs is not 0,
 * so a run without any of the features pays nothing here.
 *
 * The order within a step: the latency header, grouping, streaming
 * statistics, gRPC, then the checks, which go last because a slot they cannot
 * allocate for is given up.
 */
#include <string.h>

#include "client/client.h"

uint32_t nhb__obs_mask(const nhb_run* run) {
  uint32_t m = 0;
  if (run->olat_len != 0) m |= NHB__OBS_OLAT;
  if (run->chk.n != 0) m |= NHB__OBS_CHK;
  /* Grouping by request kind or target reads nothing of the response. */
  if (nhb__grp_by_header(run)) m |= NHB__OBS_GRP;
  if (run->config.stream_stats) m |= NHB__OBS_STR;
  if (run->config.grpc) m |= NHB__OBS_GRPC;
  return m;
}

/* ---- HTTP/2 and HTTP/3: whole fields, state in the slot ---------------------- */

int nhb__obs_begin(nhb__worker* w, nhb__slot* s) {
  uint32_t m = w->run->obs;
  if (m & NHB__OBS_OLAT) {
    nhb__olat_reset(&s->olat);
    s->olat.active = 1;
  }
  /* An interim response's field does not choose the final response's group. */
  if (m & NHB__OBS_GRP) s->group = 0;
  if (m & NHB__OBS_STR) nhb__str_begin(&s->str);
  if ((m & NHB__OBS_CHK) && NHB__UNLIKELY(nhb__chk_slot_begin(w, s) == NULL)) return NHB_ENOMEM;
  return 0;
}

void nhb__obs_field(nhb__worker* w, nhb__slot* s, const char* name, size_t namelen, const char* value,
                    size_t valuelen, int trailer) {
  const nhb_run* run = w->run;
  uint32_t m = run->obs;
  /* gRPC's status is in the trailers (or a head that ends the stream). */
  if ((m & NHB__OBS_GRPC) && namelen > 5 && memcmp(name, "grpc-", 5) == 0)
    nhb__grpc_on_field(w, s, (const uint8_t*)name, namelen, (const uint8_t*)value, valuelen);
  if (trailer) return;
  if ((m & NHB__OBS_OLAT) && s->olat.active) {
    nhb__olat_name(&s->olat, run, name, namelen);
    nhb__olat_value(&s->olat, run, value, valuelen);
    nhb__olat_value_end(&s->olat, run);
  }
  if (m & NHB__OBS_GRP) nhb__grp_field(w, s, name, namelen, value, valuelen);
  if (m & NHB__OBS_STR) {
    nhb__str_name(&s->str, name, namelen);
    nhb__str_value(&s->str, value, valuelen);
    nhb__str_value_end(&s->str);
  }
  if ((m & NHB__OBS_CHK) && s->chk != NULL) {
    const nhb__chk_set* set = &run->chk;
    nhb__chk_name(set, s->chk, name, namelen);
    if (valuelen > 0) nhb__chk_value(set, s->chk, value, valuelen);
    nhb__chk_value_end(set, s->chk);
  }
}

void nhb__obs_head_end(nhb__worker* w, nhb__slot* s) {
  /* The latency header is read from the final response's head only. */
  if ((w->run->obs & NHB__OBS_OLAT) && s->olat.active) {
    if (s->status >= 200) nhb__olat_finish(&s->olat, w);
    s->olat.active = 0;
  }
}

void nhb__obs_data(nhb__worker* w, nhb__slot* s, const char* at, size_t len, uint64_t now) {
  uint32_t m = w->run->obs;
  if (m & NHB__OBS_STR) nhb__str_data(w, s, at, len, now);
  if (m & NHB__OBS_GRPC) nhb__grpc_on_data(s, (const uint8_t*)at, len);
  /* DATA follows the final head, which began the slot's state. */
  if ((m & NHB__OBS_CHK) && s->chk != NULL) nhb__chk_body(&w->run->chk, s->chk, at, len);
}

void nhb__obs_piece(nhb__worker* w, nhb__slot* s, uint64_t now) {
  if (w->run->obs & NHB__OBS_STR) nhb__str_piece(w, s, now);
}

void nhb__obs_end(nhb__conn* c, nhb__slot* s) {
  nhb__worker* w = c->worker;
  uint32_t m = w->run->obs;
  if ((m & NHB__OBS_STR) && s->status >= 200) nhb__str_end(w, s);
  if (m & NHB__OBS_GRPC) {
    nhb__grpc_end(c, s);
    return;
  }
  if ((m & NHB__OBS_CHK) && s->chk != NULL && s->status >= 200) {
    nhb__chk_response(c, s, s->chk, s->status);
    return;
  }
  nhb__conn_response(c, s, s->status);
}

/* ---- HTTP/1.1: pieces, state in the connection ------------------------------ */

void nhb__obs_h1_begin(nhb__conn* c) {
  const nhb_run* run = c->worker->run;
  uint32_t m = run->obs;
  if (m & NHB__OBS_OLAT) nhb__olat_reset(&c->olat);
  if (m & NHB__OBS_GRP) nhb__grp_h1_begin(c->grp_h1, c->slots);
  if (m & NHB__OBS_STR) nhb__str_begin(&c->slots->str);
  if (m & NHB__OBS_CHK) nhb__chk_begin(&run->chk, c->chk, c->slots->rq.spec);
}

void nhb__obs_h1_name(nhb__conn* c, const char* at, size_t len) {
  const nhb_run* run = c->worker->run;
  uint32_t m = run->obs;
  if (m & NHB__OBS_OLAT) nhb__olat_name(&c->olat, run, at, len);
  if (m & NHB__OBS_GRP) nhb__grp_h1_name(c->grp_h1, run, at, len);
  if (m & NHB__OBS_STR) nhb__str_name(&c->slots->str, at, len);
  if (m & NHB__OBS_CHK) nhb__chk_name(&run->chk, c->chk, at, len);
}

void nhb__obs_h1_value(nhb__conn* c, const char* at, size_t len) {
  const nhb_run* run = c->worker->run;
  uint32_t m = run->obs;
  if (m & NHB__OBS_OLAT) nhb__olat_value(&c->olat, run, at, len);
  if (m & NHB__OBS_GRP) nhb__grp_h1_value(c->grp_h1, run, c->slots, at, len);
  /* An empty value makes the field another content type. */
  if (m & NHB__OBS_STR) nhb__str_value(&c->slots->str, at, len);
  if ((m & NHB__OBS_CHK) && len > 0) nhb__chk_value(&run->chk, c->chk, at, len);
}

void nhb__obs_h1_value_end(nhb__conn* c) {
  const nhb_run* run = c->worker->run;
  uint32_t m = run->obs;
  if (m & NHB__OBS_OLAT) nhb__olat_value_end(&c->olat, run);
  if (m & NHB__OBS_GRP) nhb__grp_h1_value_end(c->grp_h1, c->worker, c->slots);
  if (m & NHB__OBS_STR) nhb__str_value_end(&c->slots->str);
  if (m & NHB__OBS_CHK) nhb__chk_value_end(&run->chk, c->chk);
}

void nhb__obs_h1_head_end(nhb__conn* c, int status) {
  /* An interim response (1xx) is not the one whose latency header counts;
   * the next message begins afresh. */
  if ((c->worker->run->obs & NHB__OBS_OLAT) && status >= 200) nhb__olat_finish(&c->olat, c->worker);
}

void nhb__obs_h1_body(nhb__conn* c, const char* at, size_t len, int chunked) {
  const nhb_run* run = c->worker->run;
  uint32_t m = run->obs;
  if (m & NHB__OBS_STR) {
    nhb__str_data(c->worker, c->slots, at, len, 0);
    /* A counted or close-delimited body: each read's bytes are one piece. */
    if (!chunked) nhb__str_piece(c->worker, c->slots, 0);
  }
  if (m & NHB__OBS_CHK) nhb__chk_body(&run->chk, c->chk, at, len);
}

void nhb__obs_h1_chunk(nhb__conn* c, uint64_t size) {
  if (c->worker->run->obs & NHB__OBS_STR) c->slots->str.chunk = size != 0;
}

void nhb__obs_h1_chunk_end(nhb__conn* c) {
  if ((c->worker->run->obs & NHB__OBS_STR) && c->slots->str.chunk) nhb__str_piece(c->worker, c->slots, 0);
}

void nhb__obs_h1_end(nhb__conn* c, int status) {
  if ((c->worker->run->obs & NHB__OBS_STR) && (status >= 200 || status == 101)) nhb__str_end(c->worker, c->slots);
}
