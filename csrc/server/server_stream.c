/* server_stream.c: the request stream HTTP/2 and HTTP/3 share (server_stream.h). */
#include "server/server_stream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- the struct ------------------------------------------------------------------ */

void nhb__srv_stream_recycle(void* st, size_t size, nhb__srv_stream_core* core) {
  /* The buffers stay (grown to the largest request and response seen); the
   * rest starts over. */
  nhb__srv_req keep_req = core->req;
  nhb__srv_buf keep_out = core->out;
  nhb__srv_hdr_pos* keep_rh = core->rh;
  size_t keep_rh_cap = core->rh_cap;
  memset(st, 0, size);
  core->req.buf = keep_req.buf;
  core->req.buf.len = 0;
  core->req.hdrs = keep_req.hdrs;
  core->req.hdrs_cap = keep_req.hdrs_cap;
  core->req.nh_idx = -1;
  core->req.settings_idx = -1;
  core->out = keep_out;
  core->out.len = 0;
  core->rh = keep_rh;
  core->rh_cap = keep_rh_cap;
}

void nhb__srv_stream_core_free(nhb__srv_stream_core* core) {
  nhb__srv_buf_free(&core->req.buf);
  free(core->req.hdrs);
  nhb__srv_buf_free(&core->out);
  free(core->rh);
}

/* ---- the request ------------------------------------------------------------------- */

int nhb__srv_stream_header(nhb__srv_stream_core* sc, const nhb_server* s, const uint8_t* name, size_t name_len,
                           const uint8_t* value, size_t value_len) {
  nhb__srv_req* q = &sc->req;
  q->head_bytes += name_len + value_len + 4;
  if (q->head_bytes > s->config.max_header_bytes || q->nhdrs >= NHB__SRV_MAX_HEADERS) {
    sc->error_status = 431;
    return 0;
  }
  if (name_len > 0 && name[0] == ':') {
    if (name_len == 7 && memcmp(name, ":method", 7) == 0) {
      sc->method_off = q->buf.len;
      sc->method_len = value_len;
      if (nhb__srv_buf_append(&q->buf, value, value_len) < 0) return NHB_ENOMEM;
      sc->head_only = value_len == 4 && memcmp(value, "HEAD", 4) == 0;
    } else if (name_len == 5 && memcmp(name, ":path", 5) == 0) {
      q->url_off = q->buf.len;
      q->url_len = value_len;
      if (nhb__srv_buf_append(&q->buf, value, value_len) < 0) return NHB_ENOMEM;
      nhb__srv_req_note_url(q, s);
    } else if ((name_len == 10 && memcmp(name, ":authority", 10) == 0) ||
               (name_len == 7 && memcmp(name, ":scheme", 7) == 0)) {
      /* Kept with their names, for /debug and the header echo. */
      if (nhb__srv_req_add_header(q, name, name_len, value, value_len) < 0) return NHB_ENOMEM;
    }
    return 0;
  }
  if (nhb__srv_req_add_header(q, name, name_len, value, value_len) < 0) return NHB_ENOMEM;
  if (name_len == 14 && memcmp(name, "content-length", 14) == 0) {
    /* The library checks it against the data received; here it only says
     * early that a body will be too large. */
    uint64_t n = 0;
    for (size_t i = 0; i < value_len && n < (1ULL << 62); i++)
      if (value[i] >= '0' && value[i] <= '9') n = n * 10 + (uint64_t)(value[i] - '0');
    sc->content_length = n;
    sc->has_length = 1;
  }
  return 1;
}

unsigned nhb__srv_stream_head_done(nhb__srv_stream_core* sc, const nhb_server* s) {
  nhb__srv_req* q = &sc->req;
  q->body_off = q->buf.len;
  if (!sc->error_status && sc->has_length && sc->content_length > s->config.max_body_bytes) sc->error_status = 413;
  /* The forwarded path is served over plain HTTP/1.1 only: 421. */
  if (NHB__UNLIKELY(s->forward_prefix_len) && nhb__srv_req_forwarded(s, q)) q->is_debug = NHB__SRV_PATH_FORWARD_HERE;
  return sc->error_status;
}

int nhb__srv_stream_capture_body(const nhb__srv_stream_core* sc, const nhb_server* s) {
  const nhb__srv_req* q = &sc->req;
  /* As over HTTP/1.1: what the echo, the Nighthawk options or /debug may send back. */
  return !s->nh.has_body_size || s->static_dynamic || q->has_query || q->nh_idx >= 0 || q->is_debug;
}

int nhb__srv_stream_body(nhb__srv_stream_core* sc, const nhb_server* s, const void* data, size_t len, size_t cap) {
  nhb__srv_req* q = &sc->req;
  q->body_bytes += len;
  if (q->body_bytes > s->config.max_body_bytes) {
    sc->error_status = 413;
    return 413;
  }
  if (q->capture_body && q->body_len < cap) {
    size_t room = cap - q->body_len;
    size_t n = len < room ? len : room;
    if (nhb__srv_buf_append(&q->buf, data, n) < 0) return NHB_ENOMEM;
    q->body_len += n;
  }
  return 0;
}

/* ---- the response -------------------------------------------------------------------- */

nhb__srv_req* nhb__srv_stream_request(nhb__srv_stream_core* sc, uint8_t http_major) {
  nhb__srv_req* q = &sc->req;
  sc->responded = 1;
  q->method = q->buf.p + sc->method_off;
  q->method_len = sc->method_len;
  q->http_major = http_major;
  q->http_minor = 0;
  sc->out.len = 0;
  return q;
}

int nhb__srv_stream_error_reply(nhb__srv_stream_core* sc, nhb__srv_reply* r) {
  sc->responded = 1;
  sc->out.len = 0;
  /* As over HTTP/1.1, counted (bad_requests, requests, status) when the
   * response is out. */
  sc->bad = 1;
  sc->status = sc->error_status;
  const char* text = sc->error_status == 413 ? "request body too large\n" : "request header fields too large\n";
  return nhb__srv_reply_text(r, &sc->out, sc->error_status, "", text);
}

static const char connection_specific[][18] = {"connection", "keep-alive", "proxy-connection", "transfer-encoding",
                                               "upgrade", "te"};

int nhb__srv_connection_specific(const char* name, size_t len) {
  for (size_t i = 0; i < sizeof(connection_specific) / sizeof(connection_specific[0]); i++)
    if (len == strlen(connection_specific[i]) && strncasecmp(name, connection_specific[i], len) == 0) return 1;
  return 0;
}

/* Room for one more response header position: the array grows by doubling,
 * so a response with many headers reallocates a few times, not per header. */
static int rh_room(nhb__srv_stream_core* sc) {
  if (sc->nrh == sc->rh_cap) {
    size_t cap = sc->rh_cap ? 2 * sc->rh_cap : 16;
    nhb__srv_hdr_pos* r = realloc(sc->rh, cap * sizeof(*r));
    if (!r) return NHB_ENOMEM;
    sc->rh = r;
    sc->rh_cap = cap;
  }
  return 0;
}

int nhb__srv_stream_rh_add(nhb__srv_stream_core* sc, const char* name, size_t name_len, const char* value,
                           size_t value_len) {
  if (rh_room(sc) < 0) return NHB_ENOMEM;
  /* Trimmed: HTTP/2 and HTTP/3 forbid leading and trailing white space in values. */
  while (value_len && (value[0] == ' ' || value[0] == '\t')) value++, value_len--;
  while (value_len && (value[value_len - 1] == ' ' || value[value_len - 1] == '\t')) value_len--;
  nhb__srv_buf* b = &sc->out;
  if (nhb__srv_buf_reserve(b, name_len + value_len) < 0) return NHB_ENOMEM;
  nhb__srv_hdr_pos* r = &sc->rh[sc->nrh++];
  r->name_off = b->len;
  r->name_len = name_len;
  /* Header names are lower case in both. */
  for (size_t i = 0; i < name_len; i++) {
    char ch = name[i];
    b->p[b->len++] = (ch >= 'A' && ch <= 'Z') ? (char)(ch + 32) : ch;
  }
  r->value_off = b->len;
  r->value_len = value_len;
  memcpy(b->p + b->len, value, value_len);
  b->len += value_len;
  return 0;
}

int nhb__srv_stream_rh_add_self(nhb__srv_stream_core* sc, const char* name, size_t name_len, size_t value_off,
                                size_t value_len) {
  if (rh_room(sc) < 0) return NHB_ENOMEM;
  nhb__srv_buf* b = &sc->out;
  if (nhb__srv_buf_append(b, name, name_len) < 0) return NHB_ENOMEM;
  nhb__srv_hdr_pos* r = &sc->rh[sc->nrh++];
  r->name_off = b->len - name_len;
  r->name_len = name_len;
  r->value_off = value_off;
  r->value_len = value_len;
  return 0;
}

int nhb__srv_stream_render(nhb__srv_stream_core* sc, const nhb__srv_reply* r,
                           int (*emit)(void* ctx, const nhb__srv_header* hd), void* ctx) {
  sc->nrh = 0;
  snprintf(sc->status_txt, sizeof(sc->status_txt), "%03u", r->status % 1000);
  nhb__srv_headers main = r->h;
  main.nextra = 0;
  if (nhb__srv_headers_emit(&main, emit, ctx) < 0) return NHB_ENOMEM;
  if (!r->no_body) {
    char len[24];
    int n = snprintf(len, sizeof(len), "%zu", r->body_len);
    if (nhb__srv_stream_rh_add(sc, "content-length", 14, len, (size_t)n) < 0) return NHB_ENOMEM;
  }
  for (size_t i = 0; i < r->h.nextra; i++)
    if (emit(ctx, &r->h.extra[i]) < 0) return NHB_ENOMEM;
  sc->nbody = r->no_body || sc->head_only ? 0 : r->nbody;
  for (int i = 0; i < sc->nbody; i++) sc->body[i] = r->body[i];
  return 0;
}

/* ---- waiting ------------------------------------------------------------------------- */

uint64_t nhb__srv_stream_release_at(nhb_server* s, uint64_t now, uint64_t deadline) {
  if (nhb__srv_stall_possible(s)) {
    uint64_t t = deadline ? deadline : now;
    uint64_t release = nhb__srv_stall_release(s, t);
    if (release > t) deadline = release;
  }
  return deadline;
}

int nhb__srv_stream_due(nhb__srv_stream_core* sc, nhb_server* s, uint64_t now, int stall, uint64_t* next) {
  if (!sc->waiting) return 0;
  if (sc->deadline_ns <= now && stall) {
    /* A stall that began after this response was decided holds it too. */
    uint64_t release = nhb__srv_stall_release(s, now);
    if (release > now) sc->deadline_ns = release;
  }
  if (sc->deadline_ns > now) {
    if (sc->deadline_ns < *next) *next = sc->deadline_ns;
    return 0;
  }
  sc->waiting = 0;
  sc->deadline_ns = 0;
  return 1;
}
