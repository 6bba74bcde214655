/* server_h1.c: HTTP/1.1 on the test server's connections (llhttp).
 *
 * server_conn.c hands this file the plaintext of a connection that speaks
 * HTTP/1.1 (nhb__srv_h1_recv()); it parses it and answers every request in
 * order (pipelining). Every request's URL and headers are captured into a
 * per-connection nhb__srv_req (server_request.c) that is reused, so a request
 * costs no allocation; the bytes a connection cannot parse yet (it paused
 * for back-pressure) are copied aside, which is the rare case.
 *
 * Responses go through a per-connection queue in request order: a response
 * that waits for a deadline (a delay or a stall) holds back the ones behind
 * it. Ready responses are written together with one uv_try_write; the common
 * response is a pre-rendered one, shared by all connections. Dynamic
 * responses are rendered into the connection's `out` buffer, which is
 * emptied whenever the queue is.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server/server_internal.h"

static const char continue_100[] = "HTTP/1.1 100 Continue\r\n\r\n";

static int backpressure(const nhb__srv_conn* c) {
  return c->q_len >= NHB__SRV_MAX_PENDING || c->out.len >= NHB__SRV_MAX_OUT || nhb__srv_conn_queued(c) >= NHB__SRV_MAX_QUEUED_WRITE;
}

/* ---- the response queue ------------------------------------------------------------ */

int nhb__srv_h1_push(nhb__srv_conn* c, const nhb__srv_resp* r) {
  if (c->q_len == c->q_cap) {
    /* Two to start: a client with one request in flight (nearly all of
     * them) never needs more, and each idle kept-alive connection holds the
     * queue (memory per connection); pipelining doubles it. */
    size_t cap = c->q_cap ? 2 * c->q_cap : 2;
    nhb__srv_resp* q = malloc(cap * sizeof(*q));
    if (!q) return NHB_ENOMEM;
    for (size_t i = 0; i < c->q_len; i++) q[i] = c->q[(c->q_head + i) & (c->q_cap - 1)];
    free(c->q);
    c->q = q;
    c->q_cap = cap;
    c->q_head = 0;
  }
  nhb__srv_resp* slot = &c->q[(c->q_head + c->q_len) & (c->q_cap - 1)];
  *slot = *r;
  slot->delayed = 0;
  if (r->deadline_ns) {
    slot->delayed = 1;
    c->w->delayed++;
  }
  c->q_len++;
  if (r->close) c->close_after = 1;
  return 0;
}

void nhb__srv_h1_drop(nhb__srv_conn* c) {
  nhb__srv_worker* w = c->w;
  uint64_t ends = 0;
  for (size_t i = 0; i < c->q_len; i++) {
    const nhb__srv_resp* r = &c->q[(c->q_head + i) & (c->q_cap - 1)];
    if (r->delayed) w->delayed--;
    ends += r->event >> 1;
  }
  c->q_len = 0;
  /* An event stream dropped before its end is over all the same. */
  if (ends) nhb__srv_bump(&w->counters.event_streams_active, (uint64_t)-(int64_t)ends);
}

/* Moves the bytes still referenced by queued responses to the front of
 * `out` once the dead prefix is large, so a connection that always has a
 * response waiting does not grow `out` forever. */
static void conn_compact(nhb__srv_conn* c) {
  size_t lo = c->out.len;
  for (size_t i = 0; i < c->q_len; i++) {
    const nhb__srv_resp* r = &c->q[(c->q_head + i) & (c->q_cap - 1)];
    for (int k = 0; k < r->npieces; k++)
      if (!r->p[k].ext && r->p[k].off < lo) lo = r->p[k].off;
  }
  if (lo < 65536 || lo < c->out.len / 2) return;
  memmove(c->out.p, c->out.p + lo, c->out.len - lo);
  c->out.len -= lo;
  for (size_t i = 0; i < c->q_len; i++) {
    nhb__srv_resp* r = &c->q[(c->q_head + i) & (c->q_cap - 1)];
    for (int k = 0; k < r->npieces; k++)
      if (!r->p[k].ext) r->p[k].off -= lo;
  }
}

void nhb__srv_h1_flush(nhb__srv_conn* c) {
  if (c->closing) return;
  nhb__srv_worker* w = c->w;
  nhb_server* s = w->server;
  int stall = c->kind == NHB__SRV_CONN_HTTP && nhb__srv_stall_possible(s);
  uint64_t now = 0;
  int finished = 0;
  while (c->q_len > 0 && !finished) {
    uv_buf_t bufs[NHB__SRV_MAX_BATCH * 3];
    uint8_t keep[NHB__SRV_MAX_BATCH * 3];
    unsigned nb = 0, nrec = 0;
    size_t total = 0;
    /* Plain TCP writes every ready response at once: the kernel takes what
     * fits and libuv keeps the rest, referenced. TLS must encrypt what it
     * sends, so a large response goes out in slices as the socket drains
     * (c->head_sent marks how far the first one got). */
    size_t budget = SIZE_MAX;
    if (c->tls) {
      size_t queued = nhb__srv_conn_queued(c);
      if (queued >= NHB__SRV_WRITE_HIGH) break;
      budget = NHB__SRV_WRITE_HIGH - queued;
    }
    int partial = 0, waiting = 0;
    /* What the batch answers, counted once its bytes are handed over. */
    uint16_t done_status[NHB__SRV_MAX_BATCH];
    uint8_t done_bad[NHB__SRV_MAX_BATCH];
    unsigned ndone = 0, nevents = 0, nends = 0;
    while (c->q_len > 0 && nrec < NHB__SRV_MAX_BATCH && budget > 0) {
      nhb__srv_resp* r = &c->q[c->q_head];
      if ((r->deadline_ns || stall) && c->head_sent == 0) {
        if (!now) now = nhb__now_ns();
        if (r->deadline_ns > now) {
          waiting = 1;
          break;
        }
        if (stall) {
          /* A stall that began after this response was queued holds it too. */
          uint64_t release = nhb__srv_stall_release(s, now);
          if (release > now) {
            r->deadline_ns = release;
            if (!r->delayed) {
              r->delayed = 1;
              w->delayed++;
            }
            waiting = 1;
            break;
          }
        }
      }
      size_t skip = c->head_sent;
      size_t taken = 0;
      for (int k = 0; k < r->npieces; k++) {
        const nhb__srv_piece* p = &r->p[k];
        size_t len = p->len;
        if (skip >= len) {
          skip -= len;
          continue;
        }
        const char* base = (p->ext ? p->ext : c->out.p + p->off) + skip;
        len -= skip;
        skip = 0;
        if (len > budget) {
          len = budget;
          partial = 1;
        }
        keep[nb] = p->ext != NULL;
        bufs[nb++] = uv_buf_init((char*)base, (unsigned)len);
        total += len;
        taken += len;
        budget -= len;
        if (partial) break;
      }
      if (partial) {
        c->head_sent += taken;
        break;
      }
      c->head_sent = 0;
      if (r->delayed) w->delayed--;
      if (r->status) {
        done_status[ndone] = r->status;
        done_bad[ndone++] = r->bad;
      } else if (NHB__UNLIKELY(r->event)) {
        nevents += r->event & 1u;
        nends += r->event >> 1;
      }
      finished = r->close;
      c->q_head = (c->q_head + 1) & (c->q_cap - 1);
      c->q_len--;
      nrec++;
      if (finished) break;
    }
    if (ndone && c->kind == NHB__SRV_CONN_HTTP) {
      /* Counted as the responses are handed to the socket, so a response
       * that waits for a delay, or is dropped with its connection before its
       * turn, is not among them; the admin endpoint's own are never counted.
       * Counted just before the write rather than after it, so that a client
       * holding a response never reads counters that do not include it yet
       * (HTTP/2 counts at the same point: when nghttp2 hands the frame over,
       * before the socket write). */
      nhb__srv_bump(&w->counters.requests, ndone);
      for (unsigned i = 0; i < ndone; i++) {
        if (done_status[i] < NHB_SERVER_STATUS_MAX) nhb__srv_bump(&w->counters.status[done_status[i]], 1);
        if (done_bad[i]) nhb__srv_bump(&w->counters.bad_requests, 1);
      }
    } else if (ndone && c->kind == NHB__SRV_CONN_REDIRECT) {
      nhb__srv_bump(&w->counters.redirects, ndone);
    }
    if (NHB__UNLIKELY(nevents | nends)) {
      nhb__srv_bump(&w->counters.stream_events, nevents);
      nhb__srv_bump(&w->counters.event_streams_active, (uint64_t)-(int64_t)nends);
    }
    if (nb && nhb__srv_conn_write(c, bufs, nb, total, keep) < 0) return;
    if (waiting || finished) break;
    if (!partial && nrec < NHB__SRV_MAX_BATCH) break;
  }
  if (finished) {
    /* Nothing is parsed after a closing response, so nothing should follow
     * it; drop anything that does. */
    nhb__srv_h1_drop(c);
  }
  if (c->q_len == 0) {
    c->out.len = 0;
    nhb__srv_heap_remove(w, c);
    if ((c->close_after || (c->eof && !nhb__srv_conn_has_input(c))) && !c->finishing) {
      nhb__srv_conn_finish(c);
      return;
    }
  } else {
    conn_compact(c);
    const nhb__srv_resp* head = &c->q[c->q_head];
    if (head->deadline_ns && c->head_sent == 0) nhb__srv_heap_set(w, c, head->deadline_ns);
  }
  nhb__srv_h1_resume(c);
}

/* ---- parser callbacks ------------------------------------------------------------ */

static inline nhb__srv_conn* conn_of(llhttp_t* p) { return (nhb__srv_conn*)p->data; }

static int head_grow(nhb__srv_conn* c, size_t n) {
  c->req.head_bytes += n;
  if (NHB__UNLIKELY(c->req.head_bytes > c->w->server->config.max_header_bytes)) {
    c->error_status = 431;
    return -1;
  }
  return 0;
}

static int on_message_begin(llhttp_t* p) {
  nhb__srv_conn* c = conn_of(p);
  nhb__srv_req* q = &c->req;
  if (!c->in_head) {
    c->in_head = 1;
    c->head_start_ms = uv_now(&c->w->loop);
  }
  nhb__srv_req_reset(q);
  q->head_bytes = 16; /* the request line's fixed parts, roughly */
  return 0;
}

static int on_url(llhttp_t* p, const char* at, size_t len) {
  nhb__srv_conn* c = conn_of(p);
  if (head_grow(c, len) < 0) return -1;
  if (nhb__srv_buf_append(&c->req.buf, at, len) < 0) return -1;
  c->req.url_len += len;
  return 0;
}

static int on_url_complete(llhttp_t* p) {
  nhb__srv_conn* c = conn_of(p);
  nhb__srv_req_note_url(&c->req, c->w->server);
  return 0;
}

static int on_header_field(llhttp_t* p, const char* at, size_t len) {
  nhb__srv_conn* c = conn_of(p);
  nhb__srv_req* q = &c->req;
  if (head_grow(c, len) < 0) return -1;
  if (q->state != 1) {
    if (NHB__UNLIKELY(q->nhdrs >= NHB__SRV_MAX_HEADERS)) {
      c->error_status = 431;
      return -1;
    }
    if (!nhb__srv_req_header_begin(q)) return -1;
    q->state = 1;
  }
  if (nhb__srv_buf_append(&q->buf, at, len) < 0) return -1;
  q->hdrs[q->nhdrs - 1].name_len += len;
  return 0;
}

/* Does a header value chunk at `at` begin on a line of its own, that is,
 * after a line break and blanks? That is obs-fold (a value continued on the
 * next line), which llhttp 8 accepts: `Transfer-Encoding:\r\n chunked`
 * reaches it as the value "chunked" without marking the request chunked, so
 * the body would be parsed as the next request. RFC 9112 section 5.2 lets a
 * server refuse it with 400, which this one does. */
static int value_is_folded(const nhb__srv_conn* c, const char* at) {
  const char* k = at;
  while (k > c->parse_base && (k[-1] == ' ' || k[-1] == '\t')) k--;
  if (k > c->parse_base) return k[-1] == '\n';
  return c->tail_lf; /* the line began in an earlier read */
}

/* Notes whether parsed input [start, end) ends in a line break and blanks,
 * for value_is_folded() at the start of the next read. */
static void note_tail(nhb__srv_conn* c, const char* start, const char* end) {
  while (end > start && (end[-1] == ' ' || end[-1] == '\t')) end--;
  if (end > start) c->tail_lf = end[-1] == '\n';
}

static int on_header_value(llhttp_t* p, const char* at, size_t len) {
  nhb__srv_conn* c = conn_of(p);
  nhb__srv_req* q = &c->req;
  if (head_grow(c, len) < 0) return -1;
  if (NHB__UNLIKELY(value_is_folded(c, at))) return -1;
  nhb__srv_hdr_pos* h = &q->hdrs[q->nhdrs - 1];
  if (q->state != 2) {
    h->value_off = q->buf.len;
    h->value_len = 0;
    q->state = 2;
  }
  if (nhb__srv_buf_append(&q->buf, at, len) < 0) return -1;
  h->value_len += len;
  return 0;
}

static int on_header_value_complete(llhttp_t* p) {
  nhb__srv_conn* c = conn_of(p);
  nhb__srv_req* q = &c->req;
  if (head_grow(c, 4) < 0) return -1;
  nhb__srv_hdr_pos* h = &q->hdrs[q->nhdrs - 1];
  if (q->state != 2) { /* an empty value */
    h->value_off = q->buf.len;
    h->value_len = 0;
  }
  q->state = 0;
  nhb__srv_req_note_header(q, q->nhdrs - 1);
  return 0;
}

static int on_headers_complete(llhttp_t* p) {
  nhb__srv_conn* c = conn_of(p);
  nhb__srv_req* q = &c->req;
  nhb_server* s = c->w->server;
  c->in_head = 0;
  /* Transfer-Encoding in an HTTP/1.0 request means its framing cannot be
   * trusted (RFC 9112 section 6.1): refused, as every other ambiguous framing
   * is by llhttp itself (Content-Length with Transfer-Encoding, differing or
   * repeated Content-Length, a coding after chunked). */
  if (NHB__UNLIKELY((p->flags & F_TRANSFER_ENCODING) && p->http_major == 1 && p->http_minor == 0)) return -1;
  if (NHB__UNLIKELY(s->forward_prefix_len) && c->kind == NHB__SRV_CONN_HTTP && nhb__srv_req_forwarded(s, q)) {
    /* The connection is handed over from here (nhb__srv_h1_recv), body
     * and all; a TLS or Unix socket connection cannot be, and is answered
     * 421 once its request is complete; nor can one with a response still
     * on its way (pipelined behind another request), which must reach the
     * client first: 503. */
    if (c->tls || c->is_pipe) {
      q->is_debug = NHB__SRV_PATH_FORWARD_HERE;
    } else if (c->q_len || nhb__srv_conn_queued(c)) {
      q->is_debug = NHB__SRV_PATH_FORWARD_BUSY;
    } else {
      q->is_debug = NHB__SRV_PATH_FORWARD;
      return HPE_PAUSED;
    }
  }
  int has_length = (p->flags & F_CONTENT_LENGTH) != 0;
  if (has_length && p->content_length > s->config.max_body_bytes) {
    c->error_status = 413;
    return -1;
  }
  int has_body = (p->flags & F_CHUNKED) || (has_length && p->content_length > 0);
  if (has_body) {
    /* The body is kept when it may be echoed: that is, unless a static
     * body size answers every plain request. */
    q->capture_body = c->kind == NHB__SRV_CONN_HTTP && (!s->nh.has_body_size || s->static_dynamic || q->has_query ||
                                                   q->nh_idx >= 0 || q->is_debug);
    q->body_off = q->buf.len;
    if (q->expect_continue && c->q_len == 0) {
      nhb__srv_resp r;
      memset(&r, 0, sizeof(r));
      r.npieces = 1;
      r.p[0].ext = continue_100;
      r.p[0].len = sizeof(continue_100) - 1;
      if (nhb__srv_h1_push(c, &r) < 0) return -1;
      nhb__srv_conn_flush(c);
    }
  }
  return 0;
}

static int on_body(llhttp_t* p, const char* at, size_t len) {
  nhb__srv_conn* c = conn_of(p);
  nhb__srv_req* q = &c->req;
  nhb_server* s = c->w->server;
  q->body_bytes += len;
  if (q->body_bytes > s->config.max_body_bytes) {
    c->error_status = 413;
    return -1;
  }
  if (q->capture_body && q->body_len < s->config.max_payload_bytes) {
    size_t room = s->config.max_payload_bytes - q->body_len;
    size_t n = len < room ? len : room;
    if (nhb__srv_buf_append(&q->buf, at, n) < 0) return -1;
    q->body_len += n;
  }
  return 0;
}

static int on_message_complete(llhttp_t* p) {
  nhb__srv_conn* c = conn_of(p);
  nhb__srv_worker* w = c->w;
  nhb_server* s = w->server;
  nhb__srv_req* q = &c->req;
  c->in_head = 0;
  int keep = llhttp_should_keep_alive(p);
  int mode = !keep ? NHB__SRV_MODE_CLOSE : (p->http_major == 1 && p->http_minor == 0) ? NHB__SRV_MODE_KEEPALIVE : NHB__SRV_MODE_PLAIN;
  int head_only = p->method == HTTP_HEAD;
  int r;
  if (NHB__UNLIKELY(q->upgrade_h2c) && c->kind == NHB__SRV_CONN_HTTP && !c->tls && s->h2_ok && q->settings_idx >= 0 &&
      c->q_len == 0) {
    /* Upgrade: h2c (what curl --http2 sends to an http:// URL): 101, and
     * the rest of the connection is HTTP/2. Only when nothing is queued
     * ahead of it, since the 101 must come first. */
    int u = nhb__srv_h2_upgrade(c, head_only);
    if (u < 0) nhb__srv_conn_close(c);
    if (u <= 0) return HPE_PAUSED;
  }
  if (NHB__UNLIKELY(c->kind != NHB__SRV_CONN_HTTP)) {
    r = c->kind == NHB__SRV_CONN_ADMIN ? nhb__srv_respond_admin(c, mode, head_only)
                                       : nhb__srv_respond_redirect(c, mode, head_only);
  } else {
    if (NHB__LIKELY(!s->static_dynamic && !q->has_query && !q->is_debug && q->nh_idx < 0 &&
                    (q->body_bytes == 0 || s->nh.has_body_size))) {
      /* The fast path: the pre-rendered response. */
      w->last_req_ns = w->now_ns;
      nhb__srv_resp rec;
      rec.deadline_ns = s->ok_delay_ns ? w->now_ns + s->ok_delay_ns : 0;
      if (NHB__UNLIKELY(nhb__srv_stall_possible(s))) {
        uint64_t t = rec.deadline_ns ? rec.deadline_ns : w->now_ns;
        uint64_t release = nhb__srv_stall_release(s, t);
        if (release > t) rec.deadline_ns = release;
      }
      rec.npieces = 1;
      rec.close = mode == NHB__SRV_MODE_CLOSE;
      rec.status = 200;
      rec.p[0].ext = s->ok[mode][head_only];
      rec.p[0].off = 0;
      rec.p[0].len = s->ok_len[mode][head_only];
      if (NHB__UNLIKELY(s->config.error_body_every != 0) && ++w->error_body_n >= s->config.error_body_every) {
        w->error_body_n = 0;
        rec.p[0].ext = s->err_ok[mode][head_only];
        rec.p[0].len = s->err_ok_len[mode][head_only];
        nhb__srv_bump(&w->counters.error_bodies, 1);
      }
      rec.bad = 0;
      r = nhb__srv_h1_push(c, &rec);
    } else {
      r = nhb__srv_respond(c, mode, head_only, w->now_ns);
    }
  }
  if (NHB__UNLIKELY(r < 0)) {
    nhb__srv_conn_close(c);
    return HPE_PAUSED;
  }
  /* After a closing response nothing more is parsed. */
  if (c->close_after) return HPE_PAUSED;
  if (c->q_len >= NHB__SRV_MAX_BATCH) nhb__srv_conn_flush(c);
  if (c->closing) return HPE_PAUSED;
  if (NHB__UNLIKELY(backpressure(c))) {
    c->paused = 1;
    return HPE_PAUSED;
  }
  return 0;
}

static const llhttp_settings_t server_settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_url_complete = on_url_complete,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_header_value_complete = on_header_value_complete,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

/* ---- reading and parsing ---------------------------------------------------------- */

void nhb__srv_h1_init(nhb__srv_conn* c) {
  llhttp_init(&c->parser, HTTP_REQUEST, &server_settings);
  c->parser.data = c;
}

/* A request the parser rejected: the matching canned response, then close. */
static void h1_fail(nhb__srv_conn* c, unsigned status) {
  nhb_server* s = c->w->server;
  nhb__srv_resp r;
  memset(&r, 0, sizeof(r));
  r.npieces = 1;
  r.close = 1;
  r.status = (uint16_t)status;
  r.p[0].ext = status == 413 ? s->canned_413 : status == 431 ? s->canned_431 : status == 505 ? s->canned_505 : s->canned_400;
  r.p[0].len = status == 413   ? s->canned_413_len
               : status == 431 ? s->canned_431_len
               : status == 505 ? s->canned_505_len
                               : s->canned_400_len;
  r.bad = 1; /* counted with the response, when it is written */
  if (nhb__srv_h1_push(c, &r) < 0) nhb__srv_conn_close(c);
}

/* Parses p[0..n) (fresh input), or the stash when p is NULL, until the input
 * runs out, a closing response ends the connection, or back-pressure pauses
 * it; writes what is ready; resumes from the stash while it can. */
void nhb__srv_h1_recv(nhb__srv_conn* c, const char* p, size_t n) {
  if (!p && c->stash) {
    p = c->stash + c->stash_off;
    n = c->stash_len;
  }
  for (;;) {
    while (n > 0) {
      c->parse_base = p;
      llhttp_errno_t err = llhttp_execute(&c->parser, p, n);
      if (c->closing) return;
      if (c->proto == NHB__SRV_PROTO_H2) {
        /* Upgraded to HTTP/2 by the request just parsed: what follows it is
         * HTTP/2 (the client preface). */
        const char* pos = llhttp_get_error_pos(&c->parser);
        size_t rest = pos && pos >= p && pos <= p + n ? n - (size_t)(pos - p) : 0;
        char* stash = c->stash;
        c->stash = NULL;
        c->stash_len = c->stash_off = 0;
        if (rest) nhb__srv_h2_recv(c, pos, rest);
        free(stash);
        return;
      }
      if (err == HPE_OK) {
        note_tail(c, p, p + n);
        n = 0;
      } else if (err == HPE_PAUSED) {
        const char* pos = llhttp_get_error_pos(&c->parser);
        if (NHB__UNLIKELY(c->req.is_debug == NHB__SRV_PATH_FORWARD)) {
          /* Paused after a head under forward_prefix: the rest of the input
           * (the body, and anything pipelined behind it) goes along. */
          nhb__srv_forward_open(c, pos, n - (size_t)(pos - p));
          return;
        }
        note_tail(c, p, pos);
        llhttp_resume(&c->parser);
        n -= (size_t)(pos - p);
        p = pos;
        if (c->close_after) n = 0;
        if (c->paused) break;
      } else if (err == HPE_PAUSED_UPGRADE) {
        /* Upgrade (other than h2c) and CONNECT were answered as plain
         * requests; this server switches to no other protocol, so the
         * connection ends there. */
        c->close_after = 1;
        n = 0;
      } else {
        h1_fail(c, c->error_status ? c->error_status : 400);
        if (c->closing) return;
        n = 0;
      }
    }
    /* Keep what could not be parsed: in place if it is the stash already. */
    if (c->stash && p >= c->stash && p <= c->stash + c->stash_off + c->stash_len) {
      if (n == 0) {
        free(c->stash);
        c->stash = NULL;
        c->stash_off = c->stash_len = 0;
      } else {
        c->stash_off = (size_t)(p - c->stash);
        c->stash_len = n;
      }
    } else if (n > 0) {
      c->stash = malloc(n);
      if (!c->stash) {
        nhb__srv_conn_close(c);
        return;
      }
      memcpy(c->stash, p, n);
      c->stash_off = 0;
      c->stash_len = n;
    }
    c->paused |= 2; /* keeps conn_maybe_resume() from re-entering from the flush */
    nhb__srv_conn_flush(c);
    if (c->closing) return;
    c->paused &= 1;
    if (c->paused && !c->close_after && !backpressure(c)) {
      c->paused = 0;
      if (c->stash) {
        c->w->now_ns = nhb__now_ns();
        p = c->stash + c->stash_off;
        n = c->stash_len;
        continue;
      }
    }
    break;
  }
  if (c->finishing) return;
  if (!c->paused && !c->close_after && nhb__srv_conn_queued(c) >= NHB__SRV_MAX_QUEUED_WRITE) c->paused = 1;
  /* After the last request (close_after) the connection still reads, and
   * discards, so that it sees the client leave while a response waits. */
  nhb__srv_conn_set_reading(c, !c->paused && !c->eof);
  /* TLS may hold more plaintext than the parser took before it paused. */
  if (c->tls && !c->paused && !c->close_after && !c->in_input) nhb__srv_tls_pull(c);
}

void nhb__srv_h1_resume(nhb__srv_conn* c) {
  if (c->paused != 1 || c->closing || c->close_after || backpressure(c)) return;
  c->paused = 0;
  if (c->stash) c->w->now_ns = nhb__now_ns();
  nhb__srv_h1_recv(c, NULL, 0);
}

/* HTTP/1.1 input on a server that speaks only HTTP/2 here. */
void nhb__srv_h1_refuse(nhb__srv_conn* c) {
  c->close_after = 1;
  h1_fail(c, 505);
  if (!c->closing) nhb__srv_conn_flush(c);
}
