/* server_conn.c: the test server's HTTP connections (TCP or unix), and
 * HTTP/1.1 on them.
 *
 * A connection's bytes pass through TLS when the server has it
 * (server_tls.c), then to its protocol: HTTP/1.1 here, or HTTP/2
 * (server_h2.c). Which one is decided by ALPN on TLS and otherwise by the
 * first bytes: the HTTP/2 client preface ("PRI * HTTP/2.0...") means HTTP/2
 * with prior knowledge (h2c), anything else HTTP/1.1, on the same port. An
 * HTTP/1.1 request with `Upgrade: h2c` switches the connection to HTTP/2.
 *
 * Input is read into the worker's one read buffer and parsed at once; the
 * bytes a connection cannot parse yet (it paused for back-pressure) are
 * copied aside, which is the rare case. Every request's URL and headers are
 * captured into a per-connection buffer that is reused, so a request costs
 * no allocation.
 *
 * Responses go through a per-connection queue in request order (HTTP/1.1
 * pipelining): a response that waits for a deadline (a delay or a stall)
 * holds back the ones behind it. Ready responses are written together with
 * one uv_try_write; the common response is a pre-rendered one, shared by all
 * connections. Dynamic responses are rendered into the connection's `out`
 * buffer, which is emptied whenever the queue is.
 *
 * Time-outs are checked by a per-worker sweep over the connection list
 * rather than by a timer per connection.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "server/server_internal.h"

static void conn_run(srv_conn* c, const char* p, size_t n);
static void conn_alloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf);
static void conn_on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);

/* A write that did not fit into the socket at once; owns copies of the
 * bytes that lived in the connection's out buffer. */
typedef struct srv_write_req {
  uv_write_t req;
  srv_conn* c;
  char data[];
} srv_write_req;

static const char continue_100[] = "HTTP/1.1 100 Continue\r\n\r\n";
static const char h2_preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
#define H2_PREFACE_LEN 24

size_t nhb__srv_conn_queued(const srv_conn* c) {
  size_t n = c->h.stream.write_queue_size;
  if (c->tls) n += nhb__srv_tls_pending(c);
  return n;
}

static int backpressure(const srv_conn* c) {
  return c->q_len >= SRV_MAX_PENDING || c->out.len >= SRV_MAX_OUT || nhb__srv_conn_queued(c) >= SRV_MAX_QUEUED_WRITE;
}

/* Input that arrived but was not handed to the protocol yet. */
static int has_input(const srv_conn* c) { return c->stash != NULL || (c->tls && nhb__srv_tls_has_input(c)); }

/* ---- closing -------------------------------------------------------------------- */

static void conn_free(uv_handle_t* handle) {
  srv_conn* c = handle->data;
  if (c->kind == SRV_CONN_HTTP) {
    srv_bump(&c->w->counters.connections_active, (uint64_t)-1);
    atomic_fetch_sub_explicit(&c->w->server->conns_open, 1, memory_order_relaxed);
  }
  /* Its descriptor is closed by now: the admin reserve takes it back. */
  if (c->spare_fd) nhb__srv_admin_reserve_refill(c->w);
  if (c->tls) {
    /* Every TLS connection ends up counted once: as a handshake or as a
     * connection that never completed one (an alert, garbage, a time-out,
     * a client that went away). */
    if (!nhb__srv_tls_handshake_done(c)) srv_bump(&c->w->counters.tls_handshake_errors, 1);
    nhb__srv_tls_conn_free(c);
  }
  nhb__srv_h2_conn_free(c);
  nhb__srv_buf_free(&c->req.buf);
  free(c->req.hdrs);
  free(c->q);
  nhb__srv_buf_free(&c->out);
  free(c->stash);
  free(c);
}

void nhb__srv_conn_close(srv_conn* c) {
  if (c->closing) return;
  c->closing = 1;
  srv_worker* w = c->w;
  if (c->prev) c->prev->next = c->next;
  else w->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  c->prev = c->next = NULL;
  nhb__srv_heap_remove(w, c);
  for (size_t i = 0; i < c->q_len; i++)
    if (c->q[(c->q_head + i) & (c->q_cap - 1)].delayed) w->delayed--;
  c->q_len = 0;
  w->delayed -= nhb__srv_h2_waiting(c);
  /* Pending writes and the shutdown are cancelled; their callbacks run
   * before conn_free(), and see `closing`. */
  uv_close(&c->h.handle, conn_free);
}

static void on_shutdown(uv_shutdown_t* req, int status) {
  srv_conn* c = req->data;
  if (c->closing) return;
  if (status < 0) {
    nhb__srv_conn_close(c);
    return;
  }
  /* Keep reading, and discarding, until the client closes: closing with
   * unread input would send a reset that can destroy the final response
   * before the client reads it. The sweep ends this after SRV_LINGER_MS. */
  c->lingering = 1;
  c->linger_start_ms = uv_now(&c->w->loop);
  if (!c->reading && uv_read_start(&c->h.stream, conn_alloc, conn_on_read) == 0) c->reading = 1;
  if (!c->reading) nhb__srv_conn_close(c);
}

/* The last response is queued for writing: shut the write side down after
 * it, then linger. */
void nhb__srv_conn_finish(srv_conn* c) {
  if (c->closing || c->finishing) return;
  if (c->tls) {
    /* close_notify, then every byte of ciphertext goes to the socket before
     * the shutdown that follows it. */
    nhb__srv_tls_shutdown(c);
    if (nhb__srv_tls_drain(c, 1) < 0) return;
  }
  if (c->reading) {
    uv_read_stop(&c->h.stream);
    c->reading = 0;
  }
  free(c->stash);
  c->stash = NULL;
  c->stash_len = c->stash_off = 0;
  c->shutdown.data = c;
  /* From here on input is discarded; until the writes are done, the idle
   * time-out (which write progress resets) applies, not the linger time. */
  c->finishing = 1;
  c->in_head = 0;
  if (uv_shutdown(&c->shutdown, &c->h.stream, on_shutdown) < 0) nhb__srv_conn_close(c);
}

/* ---- writing ---------------------------------------------------------------------- */

static void conn_maybe_resume(srv_conn* c);

/* The socket took everything written so far: the protocol may go on. */
static void conn_output_ready(srv_conn* c) {
  if (c->proto == SRV_PROTO_H2) {
    nhb__srv_h2_send(c);
  } else if (c->tls && c->q_len > 0) {
    nhb__srv_conn_flush(c); /* the next slice of a large response */
  } else {
    conn_maybe_resume(c);
  }
}

static void conn_on_write(uv_write_t* req, int status) {
  srv_write_req* wr = (srv_write_req*)req;
  srv_conn* c = wr->c;
  free(wr);
  if (c->closing) return;
  if (status < 0) {
    nhb__srv_conn_close(c);
    return;
  }
  c->last_active_ms = uv_now(&c->w->loop);
  if (c->finishing) return;
  if (c->tls && nhb__srv_tls_drain(c, 0) < 0) return;
  if (c->h.stream.write_queue_size == 0) conn_output_ready(c);
}

int nhb__srv_sock_write(srv_conn* c, uv_buf_t* bufs, unsigned nbufs, size_t total, const uint8_t* keep) {
  if (c->kind == SRV_CONN_HTTP) srv_bump(&c->w->counters.tx_bytes, total);
  int n = uv_try_write(&c->h.stream, bufs, nbufs);
  if (n == UV_EAGAIN || n == UV_ENOSYS) n = 0;
  if (n < 0) {
    nhb__srv_conn_close(c);
    return -1;
  }
  if ((size_t)n == total) return 0;
  /* The socket is full: queue the rest. Bytes that do not outlive the call
   * (the connection's `out`, which is reused, TLS and HTTP/2 staging) are
   * copied; the server's own regions are referenced. */
  unsigned first = 0;
  size_t skip = (size_t)n;
  while (skip >= bufs[first].len) skip -= bufs[first++].len;
  bufs[first].base += skip;
  bufs[first].len -= skip;
  size_t copy = 0;
  for (unsigned i = first; i < nbufs; i++)
    if (!keep || !keep[i]) copy += bufs[i].len;
  srv_write_req* wr = malloc(sizeof(*wr) + copy);
  if (!wr) {
    nhb__srv_conn_close(c);
    return -1;
  }
  wr->c = c;
  size_t at = 0;
  for (unsigned i = first; i < nbufs; i++) {
    if (!keep || !keep[i]) {
      memcpy(wr->data + at, bufs[i].base, bufs[i].len);
      bufs[i].base = wr->data + at;
      at += bufs[i].len;
    }
  }
  if (uv_write(&wr->req, &c->h.stream, bufs + first, nbufs - first, conn_on_write) < 0) {
    free(wr);
    nhb__srv_conn_close(c);
    return -1;
  }
  return 0;
}

int nhb__srv_conn_write(srv_conn* c, uv_buf_t* bufs, unsigned nbufs, size_t total, const uint8_t* keep) {
  if (c->tls) return nhb__srv_tls_write(c, bufs, nbufs);
  return nhb__srv_sock_write(c, bufs, nbufs, total, keep);
}

int nhb__srv_conn_push(srv_conn* c, const srv_resp* r) {
  if (c->q_len == c->q_cap) {
    size_t cap = c->q_cap ? 2 * c->q_cap : 8;
    srv_resp* q = malloc(cap * sizeof(*q));
    if (!q) return NHB_ENOMEM;
    for (size_t i = 0; i < c->q_len; i++) q[i] = c->q[(c->q_head + i) & (c->q_cap - 1)];
    free(c->q);
    c->q = q;
    c->q_cap = cap;
    c->q_head = 0;
  }
  srv_resp* slot = &c->q[(c->q_head + c->q_len) & (c->q_cap - 1)];
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

/* Moves the bytes still referenced by queued responses to the front of
 * `out` once the dead prefix is large, so a connection that always has a
 * response waiting does not grow `out` forever. */
static void conn_compact(srv_conn* c) {
  size_t lo = c->out.len;
  for (size_t i = 0; i < c->q_len; i++) {
    const srv_resp* r = &c->q[(c->q_head + i) & (c->q_cap - 1)];
    for (int k = 0; k < r->npieces; k++)
      if (!r->p[k].ext && r->p[k].off < lo) lo = r->p[k].off;
  }
  if (lo < 65536 || lo < c->out.len / 2) return;
  memmove(c->out.p, c->out.p + lo, c->out.len - lo);
  c->out.len -= lo;
  for (size_t i = 0; i < c->q_len; i++) {
    srv_resp* r = &c->q[(c->q_head + i) & (c->q_cap - 1)];
    for (int k = 0; k < r->npieces; k++)
      if (!r->p[k].ext) r->p[k].off -= lo;
  }
}

void nhb__srv_conn_flush(srv_conn* c) {
  if (c->closing) return;
  if (c->proto == SRV_PROTO_H2) {
    nhb__srv_h2_flush(c);
    return;
  }
  srv_worker* w = c->w;
  nhb_server* s = w->server;
  int stall = c->kind == SRV_CONN_HTTP && srv_stall_possible(s);
  uint64_t now = 0;
  int finished = 0;
  while (c->q_len > 0 && !finished) {
    uv_buf_t bufs[SRV_MAX_BATCH * 3];
    uint8_t keep[SRV_MAX_BATCH * 3];
    unsigned nb = 0, nrec = 0;
    size_t total = 0;
    /* Plain TCP writes every ready response at once: the kernel takes what
     * fits and libuv keeps the rest, referenced. TLS must encrypt what it
     * sends, so a large response goes out in slices as the socket drains
     * (c->head_sent marks how far the first one got). */
    size_t budget = SIZE_MAX;
    if (c->tls) {
      size_t queued = nhb__srv_conn_queued(c);
      if (queued >= SRV_WRITE_HIGH) break;
      budget = SRV_WRITE_HIGH - queued;
    }
    int partial = 0, waiting = 0;
    /* What the batch answers, counted once its bytes are handed over. */
    uint16_t done_status[SRV_MAX_BATCH];
    uint8_t done_bad[SRV_MAX_BATCH];
    unsigned ndone = 0;
    while (c->q_len > 0 && nrec < SRV_MAX_BATCH && budget > 0) {
      srv_resp* r = &c->q[c->q_head];
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
        const srv_piece* p = &r->p[k];
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
      }
      finished = r->close;
      c->q_head = (c->q_head + 1) & (c->q_cap - 1);
      c->q_len--;
      nrec++;
      if (finished) break;
    }
    if (ndone && c->kind == SRV_CONN_HTTP) {
      /* Counted as the responses are handed to the socket, so a response
       * that waits for a delay, or is dropped with its connection before its
       * turn, is not among them; the admin endpoint's own are never counted.
       * Counted just before the write rather than after it, so that a client
       * holding a response never reads counters that do not include it yet
       * (HTTP/2 counts at the same point: when nghttp2 hands the frame over,
       * before the socket write). */
      srv_bump(&w->counters.requests, ndone);
      for (unsigned i = 0; i < ndone; i++) {
        if (done_status[i] < NHB_SERVER_STATUS_MAX) srv_bump(&w->counters.status[done_status[i]], 1);
        if (done_bad[i]) srv_bump(&w->counters.bad_requests, 1);
      }
    }
    if (nb && nhb__srv_conn_write(c, bufs, nb, total, keep) < 0) return;
    if (waiting || finished) break;
    if (!partial && nrec < SRV_MAX_BATCH) break;
  }
  if (finished) {
    /* Nothing is parsed after a closing response, so nothing should follow
     * it; drop anything that does. */
    for (size_t i = 0; i < c->q_len; i++)
      if (c->q[(c->q_head + i) & (c->q_cap - 1)].delayed) w->delayed--;
    c->q_len = 0;
  }
  if (c->q_len == 0) {
    c->out.len = 0;
    nhb__srv_heap_remove(w, c);
    if ((c->close_after || (c->eof && !has_input(c))) && !c->finishing) {
      nhb__srv_conn_finish(c);
      return;
    }
  } else {
    conn_compact(c);
    const srv_resp* head = &c->q[c->q_head];
    if (head->deadline_ns && c->head_sent == 0) nhb__srv_heap_set(w, c, head->deadline_ns);
  }
  conn_maybe_resume(c);
}

/* ---- parser callbacks ------------------------------------------------------------ */

static inline srv_conn* conn_of(llhttp_t* p) { return (srv_conn*)p->data; }

static int head_grow(srv_conn* c, size_t n) {
  c->req.head_bytes += n;
  if (NHB__UNLIKELY(c->req.head_bytes > c->w->server->config.max_header_bytes)) {
    c->error_status = 431;
    return -1;
  }
  return 0;
}

static int on_message_begin(llhttp_t* p) {
  srv_conn* c = conn_of(p);
  srv_req* q = &c->req;
  if (!c->in_head) {
    c->in_head = 1;
    c->head_start_ms = uv_now(&c->w->loop);
  }
  q->buf.len = 0;
  q->url_off = q->url_len = 0;
  q->nhdrs = 0;
  q->state = 0;
  q->head_bytes = 16; /* the request line's fixed parts, roughly */
  q->body_bytes = 0;
  q->body_off = q->body_len = 0;
  q->capture_body = 0;
  q->nh_idx = -1;
  q->settings_idx = -1;
  q->expect_continue = q->accept_gzip = q->has_query = q->is_debug = q->upgrade_h2c = 0;
  return 0;
}

static int on_url(llhttp_t* p, const char* at, size_t len) {
  srv_conn* c = conn_of(p);
  if (head_grow(c, len) < 0) return -1;
  if (nhb__srv_buf_append(&c->req.buf, at, len) < 0) return -1;
  c->req.url_len += len;
  return 0;
}

void nhb__srv_req_note_url(srv_req* q) {
  /* An empty URL ("CONNECT " then a bare LF) can end before anything was
   * captured, when the buffer is still NULL: NULL + 0 is undefined in C. */
  if (q->url_len == 0) {
    q->has_query = 0;
    q->is_debug = 0;
    return;
  }
  const char* url = q->buf.p + q->url_off;
  const char* mark = q->url_len ? memchr(url, '?', q->url_len) : NULL;
  size_t path_len = mark ? (size_t)(mark - url) : q->url_len;
  q->has_query = mark != NULL;
  q->is_debug = path_len == 6 && memcmp(url, "/debug", 6) == 0;
}

static int on_url_complete(llhttp_t* p) {
  nhb__srv_req_note_url(&conn_of(p)->req);
  return 0;
}

static int on_header_field(llhttp_t* p, const char* at, size_t len) {
  srv_conn* c = conn_of(p);
  srv_req* q = &c->req;
  if (head_grow(c, len) < 0) return -1;
  if (q->state != 1) {
    if (NHB__UNLIKELY(q->nhdrs >= SRV_MAX_HEADERS)) {
      c->error_status = 431;
      return -1;
    }
    if (q->nhdrs == q->hdrs_cap) {
      size_t cap = q->hdrs_cap ? 2 * q->hdrs_cap : 16;
      srv_hdr_pos* h = realloc(q->hdrs, cap * sizeof(*h));
      if (!h) return -1;
      q->hdrs = h;
      q->hdrs_cap = cap;
    }
    srv_hdr_pos* h = &q->hdrs[q->nhdrs++];
    h->name_off = q->buf.len;
    h->name_len = 0;
    h->value_off = h->value_len = 0;
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
static int value_is_folded(const srv_conn* c, const char* at) {
  const char* k = at;
  while (k > c->parse_base && (k[-1] == ' ' || k[-1] == '\t')) k--;
  if (k > c->parse_base) return k[-1] == '\n';
  return c->tail_lf; /* the line began in an earlier read */
}

/* Notes whether parsed input [start, end) ends in a line break and blanks,
 * for value_is_folded() at the start of the next read. */
static void note_tail(srv_conn* c, const char* start, const char* end) {
  while (end > start && (end[-1] == ' ' || end[-1] == '\t')) end--;
  if (end > start) c->tail_lf = end[-1] == '\n';
}

static int on_header_value(llhttp_t* p, const char* at, size_t len) {
  srv_conn* c = conn_of(p);
  srv_req* q = &c->req;
  if (head_grow(c, len) < 0) return -1;
  if (NHB__UNLIKELY(value_is_folded(c, at))) return -1;
  srv_hdr_pos* h = &q->hdrs[q->nhdrs - 1];
  if (q->state != 2) {
    h->value_off = q->buf.len;
    h->value_len = 0;
    q->state = 2;
  }
  if (nhb__srv_buf_append(&q->buf, at, len) < 0) return -1;
  h->value_len += len;
  return 0;
}

static int value_has_token(const char* v, size_t len, const char* token, size_t tlen) {
  for (size_t i = 0; i + tlen <= len; i++)
    if (strncasecmp(v + i, token, tlen) == 0) return 1;
  return 0;
}

void nhb__srv_req_note_header(srv_req* q, size_t i) {
  const srv_hdr_pos* h = &q->hdrs[i];
  const char* name = q->buf.p + h->name_off;
  const char* value = q->buf.p + h->value_off;
  /* Only a few header names matter; their lengths rule out almost every
   * other header without a comparison. */
  switch (h->name_len) {
    case 30:
      if (strncasecmp(name, "x-nighthawk-test-server-config", 30) == 0) q->nh_idx = (int)i;
      break;
    case 6:
      if (strncasecmp(name, "expect", 6) == 0 && h->value_len == 12 && strncasecmp(value, "100-continue", 12) == 0)
        q->expect_continue = 1;
      break;
    case 15:
      if (strncasecmp(name, "accept-encoding", 15) == 0 && value_has_token(value, h->value_len, "gzip", 4))
        q->accept_gzip = 1;
      break;
    case 7:
      if (strncasecmp(name, "upgrade", 7) == 0 && value_has_token(value, h->value_len, "h2c", 3))
        q->upgrade_h2c = 1;
      break;
    case 14:
      /* Exactly one, as RFC 7540 section 3.2.1 requires. */
      if (strncasecmp(name, "http2-settings", 14) == 0) q->settings_idx = q->settings_idx == -1 ? (int)i : -2;
      break;
    default:
      break;
  }
}

static int on_header_value_complete(llhttp_t* p) {
  srv_conn* c = conn_of(p);
  srv_req* q = &c->req;
  if (head_grow(c, 4) < 0) return -1;
  srv_hdr_pos* h = &q->hdrs[q->nhdrs - 1];
  if (q->state != 2) { /* an empty value */
    h->value_off = q->buf.len;
    h->value_len = 0;
  }
  q->state = 0;
  nhb__srv_req_note_header(q, q->nhdrs - 1);
  return 0;
}

static int on_headers_complete(llhttp_t* p) {
  srv_conn* c = conn_of(p);
  srv_req* q = &c->req;
  nhb_server* s = c->w->server;
  c->in_head = 0;
  /* Transfer-Encoding in an HTTP/1.0 request means its framing cannot be
   * trusted (RFC 9112 section 6.1): refused, as every other ambiguous framing
   * is by llhttp itself (Content-Length with Transfer-Encoding, differing or
   * repeated Content-Length, a coding after chunked). */
  if (NHB__UNLIKELY((p->flags & F_TRANSFER_ENCODING) && p->http_major == 1 && p->http_minor == 0)) return -1;
  int has_length = (p->flags & F_CONTENT_LENGTH) != 0;
  if (has_length && p->content_length > s->config.max_body_bytes) {
    c->error_status = 413;
    return -1;
  }
  int has_body = (p->flags & F_CHUNKED) || (has_length && p->content_length > 0);
  if (has_body) {
    /* The body is kept when it may be echoed: that is, unless a static
     * body size answers every plain request. */
    q->capture_body = c->kind == SRV_CONN_HTTP && (!s->nh.has_body_size || s->static_dynamic || q->has_query ||
                                                   q->nh_idx >= 0 || q->is_debug);
    q->body_off = q->buf.len;
    if (q->expect_continue && c->q_len == 0) {
      srv_resp r;
      memset(&r, 0, sizeof(r));
      r.npieces = 1;
      r.p[0].ext = continue_100;
      r.p[0].len = sizeof(continue_100) - 1;
      if (nhb__srv_conn_push(c, &r) < 0) return -1;
      nhb__srv_conn_flush(c);
    }
  }
  return 0;
}

static int on_body(llhttp_t* p, const char* at, size_t len) {
  srv_conn* c = conn_of(p);
  srv_req* q = &c->req;
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
  srv_conn* c = conn_of(p);
  srv_worker* w = c->w;
  nhb_server* s = w->server;
  srv_req* q = &c->req;
  c->in_head = 0;
  int keep = llhttp_should_keep_alive(p);
  int mode = !keep ? SRV_MODE_CLOSE : (p->http_major == 1 && p->http_minor == 0) ? SRV_MODE_KEEPALIVE : SRV_MODE_PLAIN;
  int head_only = p->method == HTTP_HEAD;
  int r;
  if (NHB__UNLIKELY(q->upgrade_h2c) && c->kind == SRV_CONN_HTTP && !c->tls && s->h2_ok && q->settings_idx >= 0 &&
      c->q_len == 0) {
    /* Upgrade: h2c (what curl --http2 sends to an http:// URL): 101, and
     * the rest of the connection is HTTP/2. Only when nothing is queued
     * ahead of it, since the 101 must come first. */
    int u = nhb__srv_h2_upgrade(c, head_only);
    if (u < 0) nhb__srv_conn_close(c);
    if (u <= 0) return HPE_PAUSED;
  }
  if (NHB__UNLIKELY(c->kind == SRV_CONN_ADMIN)) {
    r = nhb__srv_respond_admin(c, mode, head_only);
  } else {
    if (NHB__LIKELY(!s->static_dynamic && !q->has_query && !q->is_debug && q->nh_idx < 0 &&
                    (q->body_bytes == 0 || s->nh.has_body_size))) {
      /* The fast path: the pre-rendered response. */
      w->last_req_ns = w->now_ns;
      srv_resp rec;
      rec.deadline_ns = s->ok_delay_ns ? w->now_ns + s->ok_delay_ns : 0;
      if (NHB__UNLIKELY(srv_stall_possible(s))) {
        uint64_t t = rec.deadline_ns ? rec.deadline_ns : w->now_ns;
        uint64_t release = nhb__srv_stall_release(s, t);
        if (release > t) rec.deadline_ns = release;
      }
      rec.npieces = 1;
      rec.close = mode == SRV_MODE_CLOSE;
      rec.status = 200;
      rec.p[0].ext = s->ok[mode][head_only];
      rec.p[0].off = 0;
      rec.p[0].len = s->ok_len[mode][head_only];
      rec.bad = 0;
      r = nhb__srv_conn_push(c, &rec);
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
  if (c->q_len >= SRV_MAX_BATCH) nhb__srv_conn_flush(c);
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

/* ---- reading and parsing ----------------------------------------------------------- */

/* A request the parser rejected: the matching canned response, then close. */
static void conn_fail(srv_conn* c, unsigned status) {
  nhb_server* s = c->w->server;
  srv_resp r;
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
  if (nhb__srv_conn_push(c, &r) < 0) nhb__srv_conn_close(c);
}

static void conn_alloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf) {
  NHB__UNUSED(suggested);
  srv_conn* c = handle->data;
  /* Safe to share: libuv calls alloc, read() and the read callback in a
   * row for one stream, and the callback consumes or copies every byte. */
  buf->base = c->w->rbuf;
  buf->len = SRV_READ_BUFFER;
}

static void set_reading(srv_conn* c, int want) {
  if (want && !c->reading) {
    if (uv_read_start(&c->h.stream, conn_alloc, conn_on_read) == 0) c->reading = 1;
  } else if (!want && c->reading) {
    uv_read_stop(&c->h.stream);
    c->reading = 0;
  }
}

/* Parses p[0..n) (fresh input), or the stash when p is NULL, until the input
 * runs out, a closing response ends the connection, or back-pressure pauses
 * it; writes what is ready; resumes from the stash while it can. */
static void conn_run(srv_conn* c, const char* p, size_t n) {
  if (!p && c->stash) {
    p = c->stash + c->stash_off;
    n = c->stash_len;
  }
  for (;;) {
    while (n > 0) {
      c->parse_base = p;
      llhttp_errno_t err = llhttp_execute(&c->parser, p, n);
      if (c->closing) return;
      if (c->proto == SRV_PROTO_H2) {
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
        conn_fail(c, c->error_status ? c->error_status : 400);
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
  if (!c->paused && !c->close_after && nhb__srv_conn_queued(c) >= SRV_MAX_QUEUED_WRITE) c->paused = 1;
  /* After the last request (close_after) the connection still reads, and
   * discards, so that it sees the client leave while a response waits. */
  set_reading(c, !c->paused && !c->eof);
  /* TLS may hold more plaintext than the parser took before it paused. */
  if (c->tls && !c->paused && !c->close_after && !c->in_input) nhb__srv_tls_pull(c);
}

static void conn_maybe_resume(srv_conn* c) {
  if (c->paused != 1 || c->closing || c->close_after || backpressure(c)) return;
  c->paused = 0;
  if (c->stash) c->w->now_ns = nhb__now_ns();
  conn_run(c, NULL, 0);
}

int nhb__srv_conn_set_proto(srv_conn* c, int proto) {
  srv_worker* w = c->w;
  c->proto = (uint8_t)proto;
  if (proto == SRV_PROTO_H2) {
    srv_bump(&w->counters.connections_http2, 1);
    return nhb__srv_h2_start(c);
  }
  srv_bump(&w->counters.connections_http1, 1);
  return 0;
}

/* HTTP/1.1 input on a server that speaks only HTTP/2 here. */
static void refuse_http1(srv_conn* c) {
  c->close_after = 1;
  conn_fail(c, 505);
  if (!c->closing) nhb__srv_conn_flush(c);
}

void nhb__srv_conn_deliver(srv_conn* c, const char* p, size_t n) {
  if (NHB__LIKELY(c->proto == SRV_PROTO_H1)) {
    conn_run(c, p, n);
    return;
  }
  if (c->proto == SRV_PROTO_H2) {
    nhb__srv_h2_recv(c, p, n);
    return;
  }
  /* Not decided yet: the HTTP/2 client preface means HTTP/2 with prior
   * knowledge, anything else HTTP/1.1. The preface may arrive in pieces. */
  nhb_server* s = c->w->server;
  size_t have = c->preface_n;
  size_t m = n < H2_PREFACE_LEN - have ? n : H2_PREFACE_LEN - have;
  if (s->h2_ok && memcmp(p, h2_preface + have, m) == 0) {
    c->preface_n = (uint8_t)(have + m);
    if (c->preface_n < H2_PREFACE_LEN) return;
    if (nhb__srv_conn_set_proto(c, SRV_PROTO_H2) < 0) {
      nhb__srv_conn_close(c);
      return;
    }
    /* nghttp2 reads the preface itself. */
    nhb__srv_h2_recv(c, h2_preface, H2_PREFACE_LEN);
    if (!c->closing && n > m) nhb__srv_h2_recv(c, p + m, n - m);
    return;
  }
  if (!s->h1_ok) {
    c->proto = SRV_PROTO_H1;
    refuse_http1(c);
    return;
  }
  nhb__srv_conn_set_proto(c, SRV_PROTO_H1);
  if (have == 0) {
    conn_run(c, p, n);
    return;
  }
  /* A prefix of the preface came first (rare): parse it with the rest. */
  char* joined = malloc(have + n);
  if (!joined) {
    nhb__srv_conn_close(c);
    return;
  }
  memcpy(joined, h2_preface, have);
  memcpy(joined + have, p, n);
  conn_run(c, joined, have + n);
  free(joined);
}

void nhb__srv_conn_eof(srv_conn* c) {
  if (c->proto == SRV_PROTO_H1 && c->q_len > 0 && c->head_sent == 0 && c->q[c->q_head].deadline_ns &&
      c->q[c->q_head].deadline_ns > nhb__now_ns()) {
    /* The response next in line waits for a delay or a stall, and the
     * client has closed: almost always it is gone (a timed-out client, or
     * one that asked for a long delay and left), and holding the
     * connection and its descriptor for the rest of the delay is how a few
     * hundred such clients used to exhaust the server's descriptors. The
     * connection and its waiting responses go now, as over HTTP/2; a client
     * that only half-closed loses these responses. */
    nhb__srv_conn_close(c);
    return;
  }
  if (c->proto == SRV_PROTO_H1 && (c->q_len > 0 || has_input(c)) && !c->finishing) {
    /* The client half-closed with requests still to answer: answer them,
     * then close. */
    set_reading(c, 0);
    c->eof = 1;
    return;
  }
  nhb__srv_conn_close(c);
}

static void conn_on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
  srv_conn* c = stream->data;
  NHB__UNUSED(buf);
  if (nread > 0) {
    if (c->kind == SRV_CONN_HTTP) srv_bump(&c->w->counters.rx_bytes, (uint64_t)nread);
    c->last_active_ms = uv_now(&c->w->loop);
    if (c->finishing || (c->close_after && c->proto != SRV_PROTO_H2)) return; /* discarded */
    c->w->now_ns = nhb__now_ns();
    if (c->tls) nhb__srv_tls_on_read(c, c->w->rbuf, (size_t)nread);
    else nhb__srv_conn_deliver(c, c->w->rbuf, (size_t)nread);
  } else if (nread < 0) {
    if (nread == UV_EOF && !c->finishing) {
      nhb__srv_conn_eof(c);
      return;
    }
    nhb__srv_conn_close(c);
  }
}

/* Starts a connection on an accepted socket; `spare`: it took one of the
 * admin endpoint's reserved descriptors. */
static void conn_open(srv_worker* w, srv_listener* l, int fd, int spare) {
  nhb_server* s = w->server;
  int http = l->kind != SRV_L_ADMIN;
  srv_conn* c = calloc(1, sizeof(*c));
  if (!c) {
    close(fd);
    if (http) atomic_fetch_sub_explicit(&s->conns_open, 1, memory_order_relaxed);
    if (spare) nhb__srv_admin_reserve_refill(w);
    return;
  }
  c->w = w;
  c->kind = http ? SRV_CONN_HTTP : SRV_CONN_ADMIN;
  c->is_pipe = (uint8_t)l->is_pipe;
  c->spare_fd = (uint8_t)spare;
  c->heap_idx = SIZE_MAX;
  c->req.nh_idx = -1;
  c->req.settings_idx = -1;
  if (c->is_pipe) uv_pipe_init(&w->loop, &c->h.pipe, 0);
  else uv_tcp_init(&w->loop, &c->h.tcp);
  c->h.handle.data = c;
  c->next = w->conns;
  if (w->conns) w->conns->prev = c;
  w->conns = c;
  if (http) srv_bump(&w->counters.connections_active, 1);
  /* From here conn_free() gives back what the connection holds. */
  if ((c->is_pipe ? uv_pipe_open(&c->h.pipe, fd) : uv_tcp_open(&c->h.tcp, fd)) < 0) {
    close(fd); /* not the handle's yet */
    nhb__srv_conn_close(c);
    return;
  }
  if (http) srv_bump(&w->counters.connections_total, 1);
  if (!c->is_pipe) uv_tcp_nodelay(&c->h.tcp, 1);
  llhttp_init(&c->parser, HTTP_REQUEST, &server_settings);
  c->parser.data = c;
  /* The admin endpoint speaks HTTP/1.1 only; an HTTP listener decides by the
   * first bytes (or ALPN) unless it speaks only HTTP/1.1. */
  if (c->kind == SRV_CONN_ADMIN) c->proto = SRV_PROTO_H1;
  else if (!s->h2_ok && !s->ssl_ctx) nhb__srv_conn_set_proto(c, SRV_PROTO_H1);
  if (c->kind == SRV_CONN_HTTP && s->ssl_ctx && nhb__srv_tls_accept(c) < 0) {
    nhb__srv_conn_close(c);
    return;
  }
  /* The header time-out runs from the accept (the TLS handshake included)
   * until the first head is in. */
  c->in_head = 1;
  c->head_start_ms = c->last_active_ms = uv_now(&w->loop);
  set_reading(c, 1);
}

static int accept_fd(int lfd) { return accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC); }

/* accept() failed for want of descriptors (EMFILE, ENFILE, or the kernel's
 * memory). Unanswered, the pending connection would keep the listener
 * readable and the loop would spin on it. The admin endpoint gives up one of
 * its reserved descriptors and serves the connection; another listener gives
 * up its spare to take the connection and close it at once (the classic
 * trick), counted in connections_refused. When no reserve is left the
 * listener is paused for SRV_ACCEPT_RETRY_MS. Returns 1 when accepting may
 * go on. */
static int accept_starved(srv_worker* w, srv_listener* l) {
  if (l->kind == SRV_L_ADMIN) {
    for (int i = 0; i < SRV_ADMIN_RESERVE; i++) {
      if (w->admin_fds[i] < 0) continue;
      close(w->admin_fds[i]);
      w->admin_fds[i] = -1;
      int fd = accept_fd(l->fd);
      if (fd >= 0) {
        conn_open(w, l, fd, 1);
        return 1;
      }
      nhb__srv_admin_reserve_refill(w);
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
      break;
    }
  } else if (w->spare_fd >= 0) {
    close(w->spare_fd);
    int fd = accept_fd(l->fd);
    if (fd >= 0) {
      close(fd);
      srv_bump(&w->counters.connections_refused, 1);
    }
    int again = fd >= 0 || errno == EAGAIN || errno == EWOULDBLOCK;
    w->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    /* Another thread may have taken the descriptor meanwhile. */
    if (w->spare_fd >= 0 && again) return fd >= 0;
  }
  nhb__srv_listener_pause(w, l);
  return 0;
}

void nhb__srv_accept(srv_listener* l) {
  srv_worker* w = l->h.handle.loop->data;
  nhb_server* s = w->server;
  for (int i = 0; i < SRV_ACCEPT_BATCH && !w->stopping && !l->paused; i++) {
    int fd = accept_fd(l->fd);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        if (accept_starved(w, l)) continue;
      }
      return; /* EAGAIN: nothing pending (another worker may have taken it) */
    }
    if (l->kind != SRV_L_ADMIN) {
      /* One atomic add per connection (not per request) keeps the limit
       * exact across workers. */
      uint64_t open_now = atomic_fetch_add_explicit(&s->conns_open, 1, memory_order_relaxed) + 1;
      if (open_now > s->max_connections) {
        atomic_fetch_sub_explicit(&s->conns_open, 1, memory_order_relaxed);
        close(fd);
        srv_bump(&w->counters.connections_refused, 1);
        continue;
      }
    }
    if (l->kind == SRV_L_TCP_ECHO) nhb__srv_echo_open(w, fd);
    else conn_open(w, l, fd, 0);
  }
}

/* ---- time-outs ------------------------------------------------------------------------- */

void nhb__srv_sweep(srv_worker* w) {
  const nhb_server_config* cfg = &w->server->config;
  uint64_t now = uv_now(&w->loop);
  uint64_t idle_ms = cfg->idle_timeout_ns / NHB__NS_PER_MS;
  uint64_t head_ms = cfg->header_timeout_ns / NHB__NS_PER_MS;
  if (cfg->idle_timeout_ns && !idle_ms) idle_ms = 1;
  if (cfg->header_timeout_ns && !head_ms) head_ms = 1;
  srv_conn* next;
  for (srv_conn* c = w->conns; c; c = next) {
    next = c->next;
    int busy = c->proto == SRV_PROTO_H2 ? nhb__srv_h2_busy(c) : c->q_len > 0;
    if (c->lingering) {
      if (now - c->linger_start_ms >= SRV_LINGER_MS) nhb__srv_conn_close(c);
    } else if (c->in_head && head_ms && now - c->head_start_ms >= head_ms) {
      nhb__srv_conn_close(c);
    } else if (idle_ms && !busy && !c->finishing && now - c->last_active_ms >= idle_ms) {
      /* HTTP/2 says goodbye with GOAWAY; HTTP/1.1 just closes. */
      if (c->proto == SRV_PROTO_H2) nhb__srv_h2_goaway(c);
      else nhb__srv_conn_close(c);
    }
  }
}
