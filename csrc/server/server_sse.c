/* server_sse.c: event streams in the test server (--stream-events,
 * docs/server.md "Event streams").
 *
 * A client's streaming statistics (time to first event, gaps between
 * events) need a server whose gaps are known. With stream_events N, every
 * HTTP/1.1 request is answered with a Server-Sent Events stream: the head
 * at once (200, content-type: text/event-stream, chunked), then N events
 * "data: nhbench", event k at k gaps after the request was read, each gap
 * drawn uniformly from stream_gap +- stream_jitter, then the last chunk.
 *
 * The stream rides on the HTTP/1.1 response queue: the head and each event
 * are queued records whose deadlines the worker's delay heap and timerfd
 * already serve (server_delay.c, microseconds late at most), so a stream
 * needs no timer of its own and each connection's stream runs on its own
 * schedule. The records point at bytes rendered once per server (the heads
 * here, the event and the last chunk static), so an event costs no
 * allocation and no copy; the queue grows once per connection to the
 * longest stream (N + 2 records), as it grows for pipelined requests.
 *
 * An HTTP/1.0 request gets the events without chunked framing and the
 * connection closes after the last one.
 *
 * HTTP/2 and HTTP/3 streams (server_h2.c, server_h3.c) cannot queue records:
 * a response's body comes from a data source the library pulls. There the
 * stream keeps a few counters instead (nhb__srv_stream_core's ev_*): the
 * events not yet due, those due but not yet framed, and the next deadline.
 * The response is submitted at once with a data source that says "nothing
 * yet" (NGHTTP2_ERR_DEFERRED, NGHTTP3_ERR_WOULDBLOCK) until an event is due;
 * the connection sits in the same delay heap keyed by the earliest deadline
 * of its streams, and the wake-up makes the due events ready and resumes the
 * stream (nghttp2_session_resume_data, nghttp3_conn_resume_stream). So a
 * stream costs a fixed few bytes whatever N is, the connection one heap slot
 * whatever its streams, an event no allocation (the bytes are static; HTTP/2
 * copies them into the frame, HTTP/3 points at them), and a stream reset or a
 * connection closed takes its schedule with it: the stream's counters are
 * recycled with it, and the heap wake-up that finds nothing due drops the
 * connection (a closed one leaves the heap at once).
 */
#include <stdio.h>
#include <stdlib.h>

#include "server/server_internal.h"
#include "server/server_stream.h"

/* One event, whole in one chunk: "data: nhbench\n\n" is 15 bytes. */
static const char sse_event[] = "data: nhbench\n\n";
static const char sse_chunk[] = "f\r\ndata: nhbench\n\n\r\n";
static const char sse_last[] = "0\r\n\r\n";

enum { SSE_KEEP = 0, SSE_CLOSE = 1, SSE_HTTP10 = 2, SSE_KINDS = 3 };

struct nhb__srv_sse {
  char head[SSE_KINDS][256];
  size_t head_len[SSE_KINDS];
};

int nhb__srv_sse_init(nhb_server* s, char* err, size_t err_len) {
  const nhb_server_config* cfg = &s->config;
  if (cfg->stream_events == 0) return 0;
  if (cfg->stream_events > NHB_SERVER_MAX_STREAM_EVENTS || cfg->stream_jitter_ns > cfg->stream_gap_ns) {
    if (err != NULL && err_len > 0)
      snprintf(err, err_len, "stream_events: at most %u events, and stream_jitter at most stream_gap",
               NHB_SERVER_MAX_STREAM_EVENTS);
    return NHB_EINVAL;
  }
  s->sse = calloc(1, sizeof(*s->sse));
  if (s->sse == NULL) return NHB_ENOMEM;
  static const char* const framing[SSE_KINDS] = {
      "Transfer-Encoding: chunked\r\n",
      "Transfer-Encoding: chunked\r\nConnection: close\r\n",
      /* HTTP/1.0 has no chunked coding: the body ends with the connection. */
      "Connection: close\r\n",
  };
  for (int k = 0; k < SSE_KINDS; k++) {
    int n = snprintf(s->sse->head[k], sizeof(s->sse->head[k]),
                     "HTTP/1.1 200 OK\r\nServer: nhbench\r\nContent-Type: text/event-stream\r\n"
                     "Cache-Control: no-cache\r\n%s\r\n",
                     framing[k]);
    s->sse->head_len[k] = (size_t)n;
  }
  return 0;
}

void nhb__srv_sse_free(nhb_server* s) {
  free(s->sse);
  s->sse = NULL;
}

/* The next gap: stream_gap +- stream_jitter, uniform. */
static uint64_t sse_gap(nhb__srv_worker* w, const nhb_server_config* cfg) {
  uint64_t gap = cfg->stream_gap_ns;
  uint64_t j = cfg->stream_jitter_ns;
  if (j == 0) return gap;
  uint64_t draw = nhb__srv_rand(w) % (2 * j + 1);
  /* The options keep the jitter within the gap: never below 0. */
  return gap - j + draw;
}

/* `event`: the bits of nhb__srv_resp.event (an event, the stream's last record). */
static int sse_push(nhb__srv_conn* c, const char* bytes, size_t len, uint64_t deadline, uint16_t status, int close,
                    uint8_t event) {
  nhb__srv_resp r;
  memset(&r, 0, sizeof(r));
  r.deadline_ns = deadline;
  r.status = status; /* 0 for the events: the request counts once, with its head */
  r.event = event;
  r.close = (uint8_t)close;
  r.npieces = 1;
  r.p[0].ext = bytes;
  r.p[0].len = len;
  return nhb__srv_h1_push(c, &r);
}

int nhb__srv_sse_respond(nhb__srv_conn* c, int mode, int head_only, uint64_t now) {
  nhb__srv_worker* w = c->w;
  const nhb_server* s = w->server;
  const nhb_server_config* cfg = &s->config;
  int http10 = c->parser.http_major == 1 && c->parser.http_minor == 0;
  int kind = http10 ? SSE_HTTP10 : mode == NHB__SRV_MODE_CLOSE ? SSE_CLOSE : SSE_KEEP;
  int close = kind != SSE_KEEP;
  if (head_only) return sse_push(c, s->sse->head[kind], s->sse->head_len[kind], 0, 200, close, 0);
  int r = sse_push(c, s->sse->head[kind], s->sse->head_len[kind], 0, 200, 0, 0);
  uint64_t t = now != 0 ? now : nhb__now_ns();
  for (uint32_t k = 0; r == 0 && k < cfg->stream_events; k++) {
    t += sse_gap(w, cfg);
    int last = k + 1 == cfg->stream_events;
    /* A deadline of 0 would mean "now": a zero gap is due at once all the same. */
    if (http10)
      r = sse_push(c, sse_event, sizeof(sse_event) - 1, t, 0, last, (uint8_t)(1u | (last ? 2u : 0u)));
    else
      r = sse_push(c, sse_chunk, sizeof(sse_chunk) - 1, t, 0, 0, 1);
  }
  if (r == 0 && !http10) r = sse_push(c, sse_last, sizeof(sse_last) - 1, t, 0, close, 2);
  /* Begun once its last record is queued (which ends it, written or dropped); a
   * queue that could not take them all closes the connection, dropping what
   * was queued, and so never ends it. */
  if (r == 0) nhb__srv_bump(&w->counters.event_streams_active, 1);
  return r;
}

/* ---- HTTP/2 and HTTP/3 streams ----------------------------------------------------- */

#define SSE_EVENT_LEN (sizeof(sse_event) - 1)

const uint8_t* nhb__srv_sse_event(size_t* len) {
  *len = SSE_EVENT_LEN;
  return (const uint8_t*)sse_event;
}

int nhb__srv_sse_stream_tick(nhb__srv_worker* w, nhb__srv_stream_core* sc, uint64_t now, uint64_t* next) {
  if (sc->ev_left == 0) return 0;
  const nhb_server_config* cfg = &w->server->config;
  int fresh = 0;
  while (sc->ev_left > 0 && sc->ev_next_ns <= now) {
    sc->ev_left--;
    sc->ev_ready++;
    fresh = 1;
    /* The draws add up, as over HTTP/1.1: a late wake-up does not move the
     * later events. */
    if (sc->ev_left > 0) sc->ev_next_ns += sse_gap(w, cfg);
  }
  if (sc->ev_left > 0 && sc->ev_next_ns < *next) *next = sc->ev_next_ns;
  return fresh;
}

int nhb__srv_sse_stream_start(nhb__srv_worker* w, nhb__srv_stream_core* sc, uint64_t now, uint64_t* next) {
  const nhb_server_config* cfg = &w->server->config;
  sc->out.len = 0;
  sc->nrh = 0;
  sc->nbody = 0;
  memcpy(sc->status_txt, "200", 4);
  sc->status = 200;
  if (nhb__srv_stream_rh_add(sc, "server", 6, "nhbench", 7) < 0 ||
      nhb__srv_stream_rh_add(sc, "content-type", 12, "text/event-stream", 17) < 0 ||
      nhb__srv_stream_rh_add(sc, "cache-control", 13, "no-cache", 8) < 0)
    return NHB_ENOMEM;
  if (sc->head_only) return 0;
  /* Ends when the stream is released (server_h2.c, server_h3.c). */
  nhb__srv_bump(&w->counters.event_streams_active, 1);
  sc->events = 1;
  sc->ev_left = cfg->stream_events;
  sc->ev_ready = 0;
  sc->ev_at = 0;
  sc->ev_next_ns = now + sse_gap(w, cfg);
  nhb__srv_sse_stream_tick(w, sc, now, next);
  return 0;
}

size_t nhb__srv_sse_stream_copy(nhb__srv_worker* w, nhb__srv_stream_core* sc, uint8_t* buf, size_t len, int* eof) {
  size_t n = 0;
  uint64_t events = 0;
  while (sc->ev_ready > 0 && n < len) {
    size_t take = SSE_EVENT_LEN - sc->ev_at;
    if (take > len - n) take = len - n;
    memcpy(buf + n, sse_event + sc->ev_at, take);
    n += take;
    sc->ev_at += (uint32_t)take;
    if (sc->ev_at == SSE_EVENT_LEN) {
      sc->ev_at = 0;
      sc->ev_ready--;
      events++;
    }
  }
  if (events) nhb__srv_bump(&w->counters.stream_events, events);
  *eof = sc->ev_ready == 0 && sc->ev_left == 0;
  return n;
}
