/* server_h2.c: HTTP/2 in the test server, on nghttp2's server API.
 *
 * A connection speaks HTTP/2 when ALPN chose "h2", when its first bytes are
 * the client preface (h2c with prior knowledge, on the same port as
 * HTTP/1.1), or after an HTTP/1.1 `Upgrade: h2c` (101, then the response to
 * the upgrading request on stream 1). nghttp2 does the framing, HPACK, flow
 * control and the protocol's rules; this file captures each request into a
 * stream struct, builds its response with the same code as HTTP/1.1
 * (nhb__srv_reply_build, so every option behaves the same), and submits it.
 *
 * Streams are independent: a response that waits for a delay or a stall
 * waits on its own, and the others go out meanwhile. The connection sits in
 * the worker's delay heap keyed by the earliest deadline of its waiting
 * streams; the timer submits the ones that are due.
 *
 * Memory: stream structs (with the buffers they grew to) are recycled through
 * a per-worker free list, and nghttp2's own per-stream blocks through the
 * recycling allocator of h2_mem.c, so a request costs no malloc once the
 * worker is warm. Response bodies are copied into DATA frames by a data
 * source that reads the reply's pieces (the server's shared regions or the
 * stream's buffer); nghttp2 paces them by the client's flow-control windows.
 *
 * Output: frames from nghttp2_session_mem_send() are gathered into the
 * worker's stage and written through the connection (TLS or not) until about
 * NHB__SRV_WRITE_HIGH bytes wait for the socket; the write completion resumes.
 *
 * A gRPC call (a POST with content-type application/grpc) is captured the
 * same way and answered by server_grpc.c: HEADERS, one DATA frame with the
 * framed response message and trailers with grpc-status, or a trailers-only
 * response (one HEADERS frame with grpc-status) when the call fails.
 *
 * A Fortio `close` sends GOAWAY (NO_ERROR) naming the last stream begun: the
 * streams already received are answered, later ones are refused
 * (REFUSED_STREAM, which a client may retry elsewhere), and once nghttp2 has
 * nothing left to do the connection waits for the client to close it (at
 * most NHB__SRV_LINGER_MS).
 */
#include <nghttp2/nghttp2.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server/server_internal.h"
#include "server/server_stream.h"

/* Windows large enough that flow control never limits a test: request
 * bodies are consumed (captured or dropped) as they arrive. */
#define H2_STREAM_WINDOW ((1 << 24) - 1)
#define H2_CONNECTION_WINDOW ((1 << 30) - 1)
/* Stream structs kept for reuse per worker; more are freed. */
#define H2_MAX_FREE_STREAMS 1024
/* nghttp2's flood limits; see nhb__srv_h2_init(). */
#define H2_RESET_BURST 1000
#define H2_RESET_RATE 33
#define H2_MAX_CONTINUATIONS 8
/* A stream kept for reuse keeps capture and response buffers of a gRPC call
 * up to this size; larger ones are freed. */
#define H2_GRPC_KEEP (256u * 1024u)

struct nhb__srv_h2_stream {
  nhb__srv_h2_stream *prev, *next; /* the connection's streams, or the free list */
  nhb__srv_conn* c;
  int32_t id;
  uint8_t complete; /* our END_STREAM went out */
  nhb__srv_stream_core core; /* request, response, buffers (server_stream.h) */
  int body_i; /* the body pieces sent so far */
  size_t body_at, body_len;
  /* gRPC: what the head said, whether this is a call, whether its response
   * ends with trailers (a message was sent), and its grpc-status. */
  nhb__srv_grpc_head grpc;
  uint8_t grpc_call;
  uint8_t grpc_trailers;
  uint8_t grpc_code;
};

struct nhb__srv_h2 {
  nghttp2_session* session;
  nhb__srv_h2_stream* streams;
  size_t nstreams, nwaiting;
  int32_t max_id;      /* the highest stream begun */
  int32_t goaway_last; /* last_stream_id of our GOAWAY */
  uint8_t want_goaway; /* a GOAWAY is to be sent before the next frames */
  uint8_t goaway;      /* it was submitted */
  uint8_t sending;
  uint8_t calm;        /* ended with ENHANCE_YOUR_CALM: a header block too large to decode */
  /* The header block being received (any stream, trailers too): decoded
   * bytes and fields, against the connection-ending limit. */
  uint64_t block_bytes;
  uint32_t block_fields;
};

/* ---- streams ----------------------------------------------------------------- */

static nhb__srv_h2_stream* stream_new(nhb__srv_conn* c, int32_t id) {
  nhb__srv_worker* w = c->w;
  nhb__srv_h2* h = c->h2;
  nhb__srv_h2_stream* st = w->h2_free;
  if (st) {
    w->h2_free = st->next;
    w->h2_nfree--;
  } else if (!(st = calloc(1, sizeof(*st)))) {
    return NULL;
  }
  nhb__srv_stream_recycle(st, sizeof(*st), &st->core);
  st->c = c;
  st->id = id;
  st->next = h->streams;
  if (h->streams) h->streams->prev = st;
  h->streams = st;
  h->nstreams++;
  if (id > h->max_id) h->max_id = id;
  return st;
}

static void stream_free_memory(nhb__srv_h2_stream* st) {
  nhb__srv_stream_core_free(&st->core);
  free(st);
}

/* Unlinks a stream and keeps it for reuse. `account`: the worker's count of
 * waiting responses still includes it (not when the connection closed). */
static void stream_release(nhb__srv_h2_stream* st, int account) {
  nhb__srv_conn* c = st->c;
  nhb__srv_worker* w = c->w;
  nhb__srv_h2* h = c->h2;
  if (st->prev) st->prev->next = st->next;
  else h->streams = st->next;
  if (st->next) st->next->prev = st->prev;
  h->nstreams--;
  if (st->core.waiting) {
    h->nwaiting--;
    if (account) w->delayed--;
  }
  /* An event stream is over (ended, reset, or its connection gone). */
  if (NHB__UNLIKELY(st->core.events)) nhb__srv_bump(&w->counters.event_streams_active, (uint64_t)-1);
  if (w->h2_nfree >= H2_MAX_FREE_STREAMS) {
    stream_free_memory(st);
    return;
  }
  if (st->grpc_call && (st->core.req.buf.cap > H2_GRPC_KEEP || st->core.out.cap > H2_GRPC_KEEP)) {
    /* A gRPC message may be 4 MiB: a stream kept for reuse does not keep
     * such a buffer (1024 of them would hold gigabytes). */
    if (st->core.req.buf.cap > H2_GRPC_KEEP) nhb__srv_buf_free(&st->core.req.buf);
    if (st->core.out.cap > H2_GRPC_KEEP) nhb__srv_buf_free(&st->core.out);
  }
  st->prev = NULL;
  st->next = w->h2_free;
  w->h2_free = st;
  w->h2_nfree++;
}

static nhb__srv_h2_stream* stream_of(nghttp2_session* session, int32_t id) {
  return (nhb__srv_h2_stream*)nghttp2_session_get_stream_user_data(session, id);
}

/* ---- responses ------------------------------------------------------------------ */

static int h2_header(void* ctx, const nhb__srv_header* hd) {
  nhb__srv_h2_stream* st = ctx;
  /* Connection-specific fields mean nothing in HTTP/2, and a client must
   * treat a response carrying one as malformed: they are left out. */
  if (nhb__srv_connection_specific(hd->name.p, hd->name.len)) return 0;
  return nhb__srv_stream_rh_add(&st->core, hd->name.p, hd->name.len, hd->value.p, hd->value.len);
}

/* Turns a reply into the stream's header list and body pieces; the same
 * headers as HTTP/1.1 sends, in the same order, lower-cased. */
static int render(nhb__srv_h2_stream* st, const nhb__srv_reply* r) {
  if (nhb__srv_stream_render(&st->core, r, h2_header, st) < 0) return NHB_ENOMEM;
  st->body_len = st->core.nbody ? r->body_len : 0;
  st->body_i = 0;
  st->body_at = 0;
  return 0;
}

/* The data source: copies the next bytes of the body pieces into the frame. */
static ssize_t read_body(nghttp2_session* session, int32_t id, uint8_t* buf, size_t length, uint32_t* flags,
                         nghttp2_data_source* source, void* user_data) {
  NHB__UNUSED(user_data);
  nhb__srv_h2_stream* st = source->ptr;
  size_t done = 0;
  while (done < length && st->body_i < st->core.nbody) {
    const nhb__srv_piece* p = &st->core.body[st->body_i];
    size_t take = p->len - st->body_at;
    if (take > length - done) take = length - done;
    memcpy(buf + done, (p->ext ? p->ext : st->core.out.p + p->off) + st->body_at, take);
    done += take;
    st->body_at += take;
    if (st->body_at == p->len) {
      st->body_i++;
      st->body_at = 0;
    }
  }
  if (st->body_i >= st->core.nbody) {
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    if (st->grpc_trailers) {
      /* gRPC: the stream ends with the trailers, not with this DATA frame. */
      static const nghttp2_nv ok[] = {
          {(uint8_t*)"grpc-status", (uint8_t*)"0", 11, 1, NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE}};
      if (nghttp2_submit_trailer(session, id, ok, 1) == 0) *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
    }
  }
  return (ssize_t)done;
}

/* The data source of an event stream (--stream-events, server_sse.c): the
 * events that are due, or "nothing yet" until the heap's wake-up makes the
 * next one due and resumes the stream. */
static ssize_t read_events(nghttp2_session* session, int32_t id, uint8_t* buf, size_t length, uint32_t* flags,
                           nghttp2_data_source* source, void* user_data) {
  NHB__UNUSED(session);
  NHB__UNUSED(id);
  NHB__UNUSED(user_data);
  nhb__srv_h2_stream* st = source->ptr;
  int eof = 0;
  size_t n = nhb__srv_sse_stream_copy(st->c->w, &st->core, buf, length, &eof);
  if (eof) *flags |= NGHTTP2_DATA_FLAG_EOF;
  else if (n == 0) return NGHTTP2_ERR_DEFERRED;
  return (ssize_t)n;
}

static void submit(nhb__srv_h2_stream* st) {
  nhb__srv_conn* c = st->c;
  nhb__srv_worker* w = c->w;
  size_t n = st->core.nrh + 1;
  if (n > w->h2_nv_cap) {
    size_t cap = n < 32 ? 32 : 2 * n;
    void* nv = realloc(w->h2_nv, cap * sizeof(nghttp2_nv));
    if (!nv) {
      nghttp2_submit_rst_stream(c->h2->session, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
      return;
    }
    w->h2_nv = nv;
    w->h2_nv_cap = cap;
  }
  nghttp2_nv* nv = w->h2_nv;
  nv[0].name = (uint8_t*)":status";
  nv[0].namelen = 7;
  nv[0].value = (uint8_t*)st->core.status_txt;
  nv[0].valuelen = 3;
  nv[0].flags = NGHTTP2_NV_FLAG_NO_COPY_NAME;
  for (size_t i = 0; i < st->core.nrh; i++) {
    const nhb__srv_hdr_pos* r = &st->core.rh[i];
    nv[i + 1].name = (uint8_t*)st->core.out.p + r->name_off;
    nv[i + 1].namelen = r->name_len;
    nv[i + 1].value = (uint8_t*)st->core.out.p + r->value_off;
    nv[i + 1].valuelen = r->value_len;
    nv[i + 1].flags = NGHTTP2_NV_FLAG_NONE;
  }
  nghttp2_data_provider body;
  body.source.ptr = st;
  body.read_callback = NHB__UNLIKELY(st->core.events) ? read_events : read_body;
  if (nghttp2_submit_response(c->h2->session, st->id, nv, n, st->core.nbody || st->core.events ? &body : NULL) != 0)
    nghttp2_submit_rst_stream(c->h2->session, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
}

/* Puts the connection in the delay heap for its earliest waiting stream. */
static void schedule(nhb__srv_conn* c, uint64_t deadline) {
  if (c->heap_idx == SIZE_MAX || deadline < c->wake_ns) nhb__srv_heap_set(c->w, c, deadline);
}

static void wait_or_submit(nhb__srv_h2_stream* st, uint64_t deadline) {
  nhb__srv_conn* c = st->c;
  if (deadline) {
    st->core.waiting = 1;
    st->core.deadline_ns = deadline;
    c->h2->nwaiting++;
    c->w->delayed++;
    schedule(c, deadline);
    return;
  }
  submit(st);
}

static void respond_error(nhb__srv_h2_stream* st) {
  nhb__srv_conn* c = st->c;
  nhb__srv_reply r;
  if (nhb__srv_stream_error_reply(&st->core, &r) < 0 || render(st, &r) < 0) {
    nghttp2_submit_rst_stream(c->h2->session, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
    return;
  }
  submit(st);
}

/* The response waits until `deadline` (0 = now), and any stall on top. */
static void release_at(nhb__srv_h2_stream* st, uint64_t now, uint64_t deadline) {
  wait_or_submit(st, nhb__srv_stream_release_at(st->c->w->server, now, deadline));
}

/* A gRPC call: server_grpc.c decides the answer, rendered here as HEADERS,
 * the framed message and trailers, or trailers-only when it failed. */
static void respond_grpc(nhb__srv_h2_stream* st) {
  nhb__srv_conn* c = st->c;
  nhb__srv_worker* w = c->w;
  nhb__srv_req* q = &st->core.req;
  st->core.responded = 1;
  uint64_t now = w->now_ns ? w->now_ns : nhb__now_ns();
  st->core.out.len = 0;
  st->core.nrh = 0;
  nhb__srv_grpc_answer a;
  const char* path = q->url_len ? q->buf.p + q->url_off : "";
  const char* body = q->body_len ? q->buf.p + q->body_off : "";
  if (nhb__srv_grpc_answer_call(w, &st->grpc, path, q->url_len, body, q->body_len, q->body_bytes, &st->core.out,
                                &a) < 0 ||
      nhb__srv_stream_rh_add(&st->core, "content-type", 12, "application/grpc", 16) < 0) {
    nghttp2_submit_rst_stream(c->h2->session, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
    return;
  }
  memcpy(st->core.status_txt, "200", 4);
  st->core.status = 200;
  st->grpc_code = (uint8_t)a.code;
  st->core.nbody = 0;
  st->body_len = 0;
  st->body_i = 0;
  st->body_at = 0;
  st->grpc_trailers = 0;
  if (a.code == NHB__SRV_GRPC_OK) {
    st->core.nbody = 1;
    st->core.body[0].ext = NULL;
    st->core.body[0].off = a.body_off;
    st->core.body[0].len = a.body_len;
    st->body_len = a.body_len;
    st->grpc_trailers = 1;
  } else {
    char code[4];
    int n = snprintf(code, sizeof(code), "%u", a.code);
    /* rh_add copies into `out`, which may move: the message is copied
     * from where it is now, through a position. */
    if (nhb__srv_stream_rh_add(&st->core, "grpc-status", 11, code, (size_t)n) < 0 ||
        (a.msg_len && nhb__srv_stream_rh_add_self(&st->core, "grpc-message", 12, a.msg_off, a.msg_len) < 0)) {
      nghttp2_submit_rst_stream(c->h2->session, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
      return;
    }
  }
  release_at(st, now, a.delay_ns ? now + a.delay_ns : 0);
}

/* --stream-events: every request (gRPC calls too, as every HTTP/1.1 one) is
 * answered with an event stream, submitted at once; its events are paced by
 * the delay heap (nhb__srv_h2_flush). */
static void respond_events(nhb__srv_h2_stream* st) {
  nhb__srv_conn* c = st->c;
  nhb__srv_worker* w = c->w;
  st->core.responded = 1;
  uint64_t now = w->now_ns ? w->now_ns : nhb__now_ns();
  uint64_t next = UINT64_MAX;
  if (nhb__srv_sse_stream_start(w, &st->core, now, &next) < 0) {
    nghttp2_submit_rst_stream(c->h2->session, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
    return;
  }
  submit(st);
  if (next != UINT64_MAX) schedule(c, next);
}

static void respond(nhb__srv_h2_stream* st) {
  nhb__srv_conn* c = st->c;
  nhb__srv_worker* w = c->w;
  if (st->core.responded) return;
  if (st->core.error_status) {
    respond_error(st);
    return;
  }
  if (NHB__UNLIKELY(w->server->sse != NULL)) {
    respond_events(st);
    return;
  }
  if (st->grpc_call) {
    respond_grpc(st);
    return;
  }
  nhb__srv_req* q = nhb__srv_stream_request(&st->core, 2);
  uint64_t now = w->now_ns ? w->now_ns : nhb__now_ns();
  nhb__srv_reply r;
  if (nhb__srv_reply_build(c, q, &st->core.out, now, &r) < 0 || render(st, &r) < 0) {
    nghttp2_submit_rst_stream(c->h2->session, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
    return;
  }
  st->core.status = (uint16_t)r.status;
  /* HTTP/1.1 closes after such a response; HTTP/2 says GOAWAY. */
  if (r.close) c->h2->want_goaway = 1;
  release_at(st, now, r.delay_ns ? now + r.delay_ns : 0);
}

/* ---- nghttp2 callbacks ------------------------------------------------------------ */

static int on_begin_headers(nghttp2_session* session, const nghttp2_frame* frame, void* user_data) {
  nhb__srv_conn* c = user_data;
  nhb__srv_h2* h = c->h2;
  h->block_bytes = 0;
  h->block_fields = 0;
  if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
  if (h->goaway && frame->hd.stream_id > h->goaway_last) {
    /* After our GOAWAY: refused unprocessed, so the client may retry it. */
    nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id, NGHTTP2_REFUSED_STREAM);
    return 0;
  }
  nhb__srv_h2_stream* st = stream_new(c, frame->hd.stream_id);
  if (!st) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* resets the stream */
  nghttp2_session_set_stream_user_data(session, frame->hd.stream_id, st);
  return 0;
}

static int on_header(nghttp2_session* session, const nghttp2_frame* frame, const uint8_t* name, size_t name_len,
                     const uint8_t* value, size_t value_len, uint8_t flags, void* user_data) {
  NHB__UNUSED(flags);
  nhb__srv_conn* c = user_data;
  nhb__srv_h2* h = c->h2;
  uint64_t max_head = c->w->server->config.max_header_bytes;
  /* An HPACK bomb: a small block whose fields refer many times to a large
   * entry of the dynamic table decodes to megabytes, which nghttp2 checks
   * field by field before this callback: 16 KiB of frame cost 30 ms of CPU.
   * Every block (trailers, refused streams included) is limited to twice
   * max_header_bytes plus 64 KiB of decoded fields, and 2 x NHB__SRV_MAX_HEADERS
   * fields: beyond that the connection ends with ENHANCE_YOUR_CALM at once,
   * and the rest of the input is not decoded. Under the limit, a request
   * head over max_header_bytes gets 431 on its stream, as before. */
  h->block_bytes += name_len + value_len + 4;
  h->block_fields++;
  if (NHB__UNLIKELY(h->block_bytes > 2 * max_head + 65536 || h->block_fields > 2 * NHB__SRV_MAX_HEADERS)) {
    h->calm = 1;
    nghttp2_session_terminate_session(session, NGHTTP2_ENHANCE_YOUR_CALM);
    return NGHTTP2_ERR_CALLBACK_FAILURE;
  }
  if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0; /* trailers */
  nhb__srv_h2_stream* st = stream_of(session, frame->hd.stream_id);
  if (!st || st->core.error_status) return 0;
  int r = nhb__srv_stream_header(&st->core, c->w->server, name, name_len, value, value_len);
  if (r < 0) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  if (r > 0) nhb__srv_grpc_note_header(&st->grpc, name, name_len, value, value_len);
  return 0;
}

/* The request head is complete. */
static void head_done(nhb__srv_conn* c, nhb__srv_h2_stream* st, int end_stream) {
  nhb_server* s = c->w->server;
  nhb__srv_req* q = &st->core.req;
  /* The header time-out ends with the first complete request head. */
  c->in_head = 0;
  if (nhb__srv_stream_head_done(&st->core, s)) {
    respond_error(st);
    return;
  }
  /* gRPC is a POST with its content type; anything else is plain HTTP. */
  st->grpc_call =
      st->grpc.content_type && st->core.method_len == 4 && memcmp(q->buf.p + st->core.method_off, "POST", 4) == 0;
  if (end_stream) {
    respond(st);
    return;
  }
  /* The body is kept when it may be echoed, as for HTTP/1.1, and for a gRPC
   * call, whose message it is. */
  q->capture_body = st->grpc_call || nhb__srv_stream_capture_body(&st->core, s);
  if (q->expect_continue) {
    nghttp2_nv nv = {(uint8_t*)":status", (uint8_t*)"100", 7, 3, NGHTTP2_NV_FLAG_NO_COPY_NAME};
    nghttp2_submit_headers(c->h2->session, NGHTTP2_FLAG_NONE, st->id, NULL, &nv, 1, NULL);
  }
}

static int on_frame_recv(nghttp2_session* session, const nghttp2_frame* frame, void* user_data) {
  nhb__srv_conn* c = user_data;
  int end = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
  if (frame->hd.type == NGHTTP2_HEADERS) {
    c->h2->block_bytes = 0;
    c->h2->block_fields = 0;
    nhb__srv_h2_stream* st = stream_of(session, frame->hd.stream_id);
    if (!st) return 0;
    if (frame->headers.cat == NGHTTP2_HCAT_REQUEST) head_done(c, st, end);
    else if (end) respond(st); /* trailers end the request */
  } else if (frame->hd.type == NGHTTP2_DATA && end) {
    nhb__srv_h2_stream* st = stream_of(session, frame->hd.stream_id);
    if (st) respond(st);
  }
  return 0;
}

static int on_data_chunk(nghttp2_session* session, uint8_t flags, int32_t id, const uint8_t* data, size_t len,
                         void* user_data) {
  NHB__UNUSED(flags);
  nhb__srv_conn* c = user_data;
  nhb_server* s = c->w->server;
  nhb__srv_h2_stream* st = stream_of(session, id);
  if (!st || st->core.responded) return 0; /* after an early answer the rest is dropped */
  nhb__srv_req* q = &st->core.req;
  /* A gRPC message is captured up to the largest accepted (and its prefix);
   * an echo up to --max-payload-kb. */
  size_t cap = st->grpc_call ? NHB__SRV_GRPC_MAX_MSG + 5 : s->config.max_payload_bytes;
  int r = nhb__srv_stream_body(&st->core, s, data, len, cap);
  if (r < 0) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  if (r > 0) {
    respond_error(st);
    return 0;
  }
  /* A message too large, or compressed: answered without waiting for it. */
  if (st->grpc_call && q->body_len >= 5 && nhb__srv_grpc_early(&st->grpc, q->buf.p + q->body_off, q->body_len))
    respond(st);
  return 0;
}

static int on_frame_send(nghttp2_session* session, const nghttp2_frame* frame, void* user_data) {
  nhb__srv_conn* c = user_data;
  if (frame->hd.type == NGHTTP2_GOAWAY) {
    /* nghttp2 sends GOAWAY with an error when the client broke the protocol. */
    if (frame->goaway.error_code != NGHTTP2_NO_ERROR) nhb__srv_bump(&c->w->counters.h2_protocol_errors, 1);
    return 0;
  }
  if ((frame->hd.type == NGHTTP2_DATA || frame->hd.type == NGHTTP2_HEADERS) &&
      (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
    nhb__srv_h2_stream* st = stream_of(session, frame->hd.stream_id);
    /* The rest of a refused request's body is read and dropped. RFC 9113
     * section 8.1 would allow RST_STREAM NO_ERROR here to stop the upload,
     * but clients such as curl then report the stream as failed. */
    if (st && !st->complete && st->core.status) {
      /* The response's last frame is serialized, and goes to the socket
       * (or TLS) in this same send: it counts now, as HTTP/1.1's does
       * when it is written. A stream reset or a connection closed before
       * this point was never answered and is not counted. */
      nhb__srv_worker* w = c->w;
      nhb__srv_bump(&w->counters.requests, 1);
      if (st->core.status < NHB_SERVER_STATUS_MAX) nhb__srv_bump(&w->counters.status[st->core.status], 1);
      if (st->core.bad) nhb__srv_bump(&w->counters.bad_requests, 1);
      if (st->grpc_call) {
        nhb__srv_bump(&w->counters.grpc_calls, 1);
        if (st->grpc_code) nhb__srv_bump(&w->counters.grpc_errors, 1);
      }
    }
    if (st) st->complete = 1;
  }
  return 0;
}

static int on_stream_close(nghttp2_session* session, int32_t id, uint32_t error_code, void* user_data) {
  nhb__srv_conn* c = user_data;
  nhb__srv_h2_stream* st = stream_of(session, id);
  if (!st) return 0;
  /* Reset before its response was out (by the client, or refused by ours). */
  if (!st->complete && error_code != NGHTTP2_REFUSED_STREAM) nhb__srv_bump(&c->w->counters.h2_streams_reset, 1);
  nghttp2_session_set_stream_user_data(session, id, NULL);
  stream_release(st, 1);
  return 0;
}

/* ---- the connection ------------------------------------------------------------ */

int nhb__srv_h2_init(nhb_server* s) {
  if (!s->h2_ok) return 0;
  nghttp2_session_callbacks* cb = NULL;
  if (nghttp2_session_callbacks_new(&cb) != 0) return NHB_ENOMEM;
  nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
  nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
  s->h2_callbacks = cb;
  nghttp2_option* opt = NULL;
  if (nghttp2_option_new(&opt) != 0) return NHB_ENOMEM;
  /* Set explicitly (they are the defaults of the installed nghttp2, 1.52
   * with Debian's backports) so the bounds do not depend on its version:
   * rapid reset (CVE-2023-44487): a token bucket of 1000 RST_STREAMs from
   * the client, refilled at 33 per second, after which the connection gets
   * GOAWAY; CONTINUATION flood (CVE-2024-27316 and kin): at most 8
   * CONTINUATION frames after a HEADERS frame; at most 32 entries in a
   * SETTINGS frame. */
  nghttp2_option_set_stream_reset_rate_limit(opt, H2_RESET_BURST, H2_RESET_RATE);
  nghttp2_option_set_max_continuations(opt, H2_MAX_CONTINUATIONS);
  nghttp2_option_set_max_settings(opt, 32);
  s->h2_option = opt;
  return 0;
}

void nhb__srv_h2_free(nhb_server* s) {
  if (s->h2_callbacks) nghttp2_session_callbacks_del((nghttp2_session_callbacks*)s->h2_callbacks);
  s->h2_callbacks = NULL;
  if (s->h2_option) nghttp2_option_del((nghttp2_option*)s->h2_option);
  s->h2_option = NULL;
}

int nhb__srv_h2_start(nhb__srv_conn* c) {
  nhb__srv_worker* w = c->w;
  nhb_server* s = w->server;
  nhb__srv_h2* h = calloc(1, sizeof(*h));
  if (!h) return NHB_ENOMEM;
  c->h2 = h;
  nghttp2_mem mem = nhb__h2_mem_allocator(&w->h2_mem);
  if (nghttp2_session_server_new3(&h->session, (const nghttp2_session_callbacks*)s->h2_callbacks, c,
                                  (const nghttp2_option*)s->h2_option, &mem) !=
      0) {
    h->session = NULL;
    return NHB_ENOMEM;
  }
  uint64_t max_header = s->config.max_header_bytes;
  nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, s->config.max_concurrent_streams},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, H2_STREAM_WINDOW},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, max_header > UINT32_MAX ? UINT32_MAX : (uint32_t)max_header},
  };
  if (nghttp2_submit_settings(h->session, NGHTTP2_FLAG_NONE, settings, 3) != 0 ||
      nghttp2_session_set_local_window_size(h->session, NGHTTP2_FLAG_NONE, 0, H2_CONNECTION_WINDOW) != 0)
    return NHB_ENOMEM;
  return 0;
}

void nhb__srv_h2_recv(nhb__srv_conn* c, const char* p, size_t n) {
  nhb__srv_h2* h = c->h2;
  if (!h || !h->session || c->closing || c->finishing) return;
  ssize_t r = nghttp2_session_mem_recv(h->session, (const uint8_t*)p, n);
  if (c->closing) return;
  if (r < 0 && h->calm) {
    /* A header block over the limit: the GOAWAY (ENHANCE_YOUR_CALM, which
     * counts in h2_protocol_errors as it goes out) is sent, then the
     * connection ends; nothing more is decoded. */
    nhb__srv_h2_send(c);
    if (!c->closing) nhb__srv_conn_finish(c);
    return;
  }
  if (r < 0) {
    /* Not HTTP/2 at all (a bad preface), a flood, or out of memory. */
    nhb__srv_bump(&c->w->counters.h2_protocol_errors, 1);
    nhb__srv_conn_close(c);
    return;
  }
  nhb__srv_h2_send(c);
}

static int write_out(nhb__srv_conn* c, const char* p, size_t n) {
  uv_buf_t b = uv_buf_init((char*)p, (unsigned)n);
  return nhb__srv_conn_write(c, &b, 1, n, NULL);
}

void nhb__srv_h2_send(nhb__srv_conn* c) {
  nhb__srv_h2* h = c->h2;
  if (!h || !h->session || c->closing || c->finishing || h->sending) return;
  h->sending = 1;
  if (h->want_goaway && !h->goaway) {
    /* Every stream begun is answered; later ones are refused. */
    h->goaway = 1;
    h->goaway_last = h->max_id;
    nghttp2_submit_goaway(h->session, NGHTTP2_FLAG_NONE, h->max_id, NGHTTP2_NO_ERROR, NULL, 0);
  }
  char* stage = c->w->h2_stage;
  size_t have = 0;
  int failed = 0;
  while (nhb__srv_conn_queued(c) < NHB__SRV_WRITE_HIGH) {
    const uint8_t* data;
    ssize_t n = nghttp2_session_mem_send(h->session, &data);
    if (n < 0) {
      h->sending = 0;
      nhb__srv_conn_close(c);
      return;
    }
    if (n == 0) break;
    if (have + (size_t)n > NHB__SRV_H2_STAGE) {
      if (write_out(c, stage, have) < 0) {
        failed = 1;
        break;
      }
      have = 0;
    }
    if ((size_t)n > NHB__SRV_H2_STAGE) {
      if (write_out(c, (const char*)data, (size_t)n) < 0) {
        failed = 1;
        break;
      }
    } else {
      memcpy(stage + have, data, (size_t)n);
      have += (size_t)n;
    }
  }
  if (!failed && have) failed = write_out(c, stage, have) < 0;
  h->sending = 0;
  if (failed || c->closing) return;
  if (!c->lingering && !nghttp2_session_want_read(h->session) && !nghttp2_session_want_write(h->session)) {
    /* GOAWAY sent or received and every stream done: the session is over.
     * The client closes next (it knows from the GOAWAY which of its requests
     * to send elsewhere); until it does, or NHB__SRV_LINGER_MS pass, the
     * connection keeps reading, and nghttp2 ignores what comes, rather than
     * closing under frames still in flight (RFC 9113 section 6.8). */
    c->lingering = 1;
    c->linger_start_ms = uv_now(&c->w->loop);
  }
}

void nhb__srv_h2_flush(nhb__srv_conn* c) {
  nhb__srv_h2* h = c->h2;
  if (!h || !h->session) return;
  nhb_server* s = c->w->server;
  uint64_t now = nhb__now_ns();
  uint64_t next = UINT64_MAX;
  int stall = nhb__srv_stall_possible(s);
  for (nhb__srv_h2_stream* st = h->streams; st; st = st->next) {
    /* An event stream's next events (server_sse.c). */
    if (NHB__UNLIKELY(st->core.events) && nhb__srv_sse_stream_tick(c->w, &st->core, now, &next))
      nghttp2_session_resume_data(h->session, st->id);
    if (!nhb__srv_stream_due(&st->core, s, now, stall, &next)) continue;
    h->nwaiting--;
    c->w->delayed--;
    submit(st);
  }
  if (next != UINT64_MAX) nhb__srv_heap_set(c->w, c, next);
  else nhb__srv_heap_remove(c->w, c);
  nhb__srv_h2_send(c);
}

void nhb__srv_h2_goaway(nhb__srv_conn* c) {
  if (!c->h2 || !c->h2->session) {
    nhb__srv_conn_close(c);
    return;
  }
  c->h2->want_goaway = 1;
  nhb__srv_h2_send(c);
}

int nhb__srv_h2_busy(const nhb__srv_conn* c) { return c->h2 && c->h2->nstreams > 0; }

size_t nhb__srv_h2_waiting(const nhb__srv_conn* c) { return c->h2 ? c->h2->nwaiting : 0; }

/* base64url without padding (RFC 7540 section 3.2.1), through OpenSSL's
 * base64 decoder. Returns the decoded length or -1. */
static int base64url_decode(const char* in, size_t len, uint8_t* out, size_t cap) {
  char tmp[1024];
  if (len + 4 > sizeof(tmp) || (len % 4) == 1) return -1;
  size_t n = 0;
  for (size_t i = 0; i < len; i++) {
    char ch = in[i];
    if (ch == '-') ch = '+';
    else if (ch == '_') ch = '/';
    else if (ch == '=') break;
    tmp[n++] = ch;
  }
  if (n == 0) return 0; /* no settings: valid, and nothing to decode */
  size_t pad = (4 - n % 4) % 4;
  for (size_t i = 0; i < pad; i++) tmp[n++] = '=';
  if (n / 4 * 3 > cap + 3) return -1;
  unsigned char dec[1024];
  int r = EVP_DecodeBlock(dec, (const unsigned char*)tmp, (int)n);
  if (r < 0 || (size_t)r < pad || (size_t)r - pad > cap) return -1;
  memcpy(out, dec, (size_t)r - pad);
  return r - (int)pad;
}

int nhb__srv_h2_upgrade(nhb__srv_conn* c, int head_only) {
  nhb__srv_worker* w = c->w;
  nhb__srv_req* q = &c->req;
  const nhb__srv_hdr_pos* hs = &q->hdrs[q->settings_idx];
  uint8_t settings[512];
  int slen = base64url_decode(q->buf.p + hs->value_off, hs->value_len, settings, sizeof(settings));
  static const char switching[] = "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n";
  /* A malformed HTTP2-Settings: no upgrade (RFC 7540 section 3.2.1), the
   * request is answered over HTTP/1.1. */
  if (slen < 0 || slen % 6 != 0) return 1;
  const char* method = llhttp_method_name((llhttp_method_t)c->parser.method);
  uv_buf_t b = uv_buf_init((char*)switching, sizeof(switching) - 1);
  uint8_t keep = 1;
  if (nhb__srv_sock_write(c, &b, 1, b.len, &keep) < 0) return 0; /* closed */
  /* Counted as HTTP/1.1 when its first bytes came; it speaks HTTP/2 now. */
  nhb__srv_bump(&w->counters.connections_http1, (uint64_t)-1);
  if (nhb__srv_conn_set_proto(c, NHB__SRV_PROTO_H2) < 0) return NHB_ENOMEM;
  nhb__srv_h2* h = c->h2;
  nhb__srv_h2_stream* st = stream_new(c, 1);
  if (!st) return NHB_ENOMEM;
  /* The request moves to stream 1, buffers and all; the connection gets the
   * stream's empty ones. */
  nhb__srv_req tmp = st->core.req;
  st->core.req = *q;
  *q = tmp;
  nhb__srv_req* sq = &st->core.req;
  st->core.method_off = sq->buf.len;
  st->core.method_len = strlen(method);
  if (nhb__srv_buf_append(&sq->buf, method, st->core.method_len) < 0) return NHB_ENOMEM;
  st->core.head_only = (uint8_t)head_only;
  if (nghttp2_session_upgrade2(h->session, settings, (size_t)slen, head_only, st) != 0) return NHB_EPROTO;
  nghttp2_session_set_stream_user_data(h->session, 1, st);
  c->in_head = 0;
  respond(st);
  nhb__srv_h2_send(c);
  return 0;
}

void nhb__srv_h2_conn_free(nhb__srv_conn* c) {
  nhb__srv_h2* h = c->h2;
  if (!h) return;
  /* nghttp2 calls nothing back while it is deleted; the streams it referred
   * to are released after. */
  if (h->session) nghttp2_session_del(h->session);
  h->session = NULL;
  while (h->streams) stream_release(h->streams, 0);
  free(h);
  c->h2 = NULL;
}

void nhb__srv_h2_worker_free(nhb__srv_worker* w) {
  while (w->h2_free) {
    nhb__srv_h2_stream* st = w->h2_free;
    w->h2_free = st->next;
    stream_free_memory(st);
  }
  w->h2_nfree = 0;
  free(w->h2_nv);
  w->h2_nv = NULL;
  w->h2_nv_cap = 0;
  nhb__h2_mem_release(&w->h2_mem);
}
