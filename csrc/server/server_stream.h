/* server_stream.h: what a request stream of HTTP/2 (server_h2.c) and of
 * HTTP/3 (server_h3.c) have in common, and the code that works on it.
 *
 * Both capture a request from whole header fields into an nhb__srv_req,
 * answer it through nhb__srv_reply_build(), render the reply into lower-case
 * header fields held in one buffer, and may hold the response until a
 * deadline (delays, stalls). They differ in their libraries' types (nghttp2
 * and nghttp3) and in what surrounds a stream (gRPC over HTTP/2, QUIC flow
 * control), which stays in their files.
 *
 * Memory: a stream struct is recycled through its protocol's per-worker
 * free list, and its buffers (request capture, response bytes, header
 * positions) stay with it, grown to the largest request and response seen:
 * a warm worker allocates nothing per stream.
 */
#ifndef NHB_SERVER_STREAM_H
#define NHB_SERVER_STREAM_H

#include "server/server_internal.h"

typedef struct nhb__srv_stream_core {
  nhb__srv_req req;
  /* The response: header names and values (lower-case) and dynamic body
   * bytes live in `out`; rh[i] locates header i. */
  nhb__srv_buf out;
  nhb__srv_hdr_pos* rh;
  size_t nrh, rh_cap;
  char status_txt[4];
  nhb__srv_piece body[2];
  int nbody;
  /* The request head. */
  size_t method_off, method_len;
  uint64_t content_length;
  uint8_t has_length;
  uint8_t head_only;
  /* The response. */
  uint8_t responded;     /* a response is decided (submitted or waiting) */
  uint8_t waiting;       /* waits for deadline_ns */
  uint8_t bad;           /* the response refuses the request (413, 431) */
  uint16_t error_status; /* 413/431: the request is refused */
  uint16_t status;       /* of the response, counted when its end goes out */
  uint64_t deadline_ns;
  /* --stream-events (server_sse.c): the response is an event stream; its
   * events not yet due, those due but not yet taken by the data source
   * (bytes of the first already taken: HTTP/2 frames may cut an event), and
   * when the next one is due. Per stream, whatever N: no queue. */
  uint8_t events;
  uint32_t ev_left, ev_ready, ev_at;
  uint64_t ev_next_ns;
} nhb__srv_stream_core;

/* A stream struct of `size` bytes at `st`, taken from a free list (or just
 * calloc'd), zeroed for a new stream but for the buffers of its `core`,
 * which keep their memory, emptied. */
void nhb__srv_stream_recycle(void* st, size_t size, nhb__srv_stream_core* core);
/* Frees the buffers of `core` (the stream struct is the caller's). */
void nhb__srv_stream_core_free(nhb__srv_stream_core* core);

/* A request header field (name and value whole, as HPACK and QPACK give
 * them): pseudo-headers noted, the others captured. 431 in error_status when
 * the head grows too large. Returns 1 when a regular field was captured, 0
 * otherwise, NHB_ENOMEM. */
int nhb__srv_stream_header(nhb__srv_stream_core* sc, const nhb_server* s, const uint8_t* name, size_t name_len,
                           const uint8_t* value, size_t value_len);
/* The request head is complete: the body starts, 413 from content-length,
 * 421 for the forwarded path. Returns error_status (0: go on). */
unsigned nhb__srv_stream_head_done(nhb__srv_stream_core* sc, const nhb_server* s);
/* Whether the request body is kept: when the response may echo it. */
int nhb__srv_stream_capture_body(const nhb__srv_stream_core* sc, const nhb_server* s);
/* Request body bytes, captured up to `cap` when kept. Returns 413 once the
 * body is over max_body_bytes (error_status set), else 0; NHB_ENOMEM. */
int nhb__srv_stream_body(nhb__srv_stream_core* sc, const nhb_server* s, const void* data, size_t len, size_t cap);

/* The request, complete, as nhb__srv_reply_build() takes it; the response
 * buffer emptied. */
nhb__srv_req* nhb__srv_stream_request(nhb__srv_stream_core* sc, uint8_t http_major);
/* The 413/431 answer of error_status into `r` (responded, counted as bad).
 * Returns 0 or NHB_ENOMEM. */
int nhb__srv_stream_error_reply(nhb__srv_stream_core* sc, nhb__srv_reply* r);

/* Connection-specific fields (Connection, Keep-Alive, ...): meaningless in
 * HTTP/2 and HTTP/3, and a response carrying one is malformed there. */
int nhb__srv_connection_specific(const char* name, size_t len);
/* A response header, value trimmed, name lower-cased, into `out`. */
int nhb__srv_stream_rh_add(nhb__srv_stream_core* sc, const char* name, size_t name_len, const char* value,
                           size_t value_len);
/* A header whose value is already in `out` (at value_off): only the name is
 * added. */
int nhb__srv_stream_rh_add_self(nhb__srv_stream_core* sc, const char* name, size_t name_len, size_t value_off,
                                size_t value_len);
/* A reply rendered into the stream: status, the headers HTTP/1.1 would send
 * in its order (each through `emit`, which filters and adds them; `ctx` is
 * the stream), content-length, and the body pieces (none for HEAD). */
int nhb__srv_stream_render(nhb__srv_stream_core* sc, const nhb__srv_reply* r,
                           int (*emit)(void* ctx, const nhb__srv_header* hd), void* ctx);

/* When a response decided at `now` to go at `deadline` (0: at once) goes,
 * a stall that holds the server's responses included. */
uint64_t nhb__srv_stream_release_at(nhb_server* s, uint64_t now, uint64_t deadline);
/* For the heap's wake-up: whether the waiting response of `sc` is due at
 * `now` (then no longer waiting), else the earliest deadline into `next`. */
int nhb__srv_stream_due(nhb__srv_stream_core* sc, nhb_server* s, uint64_t now, int stall, uint64_t* next);

/* server_sse.c: event streams (--stream-events) on HTTP/2 and HTTP/3 streams. */
/* The event stream's head into sc (200, text/event-stream, no content-length)
 * and its schedule: the first event one gap after `now`; the events already
 * due (a zero gap) are ready at once. The next deadline goes into *next
 * (left alone when there is none). HEAD gets the head alone. Returns 0 or
 * NHB_ENOMEM. */
int nhb__srv_sse_stream_start(nhb__srv_worker* w, nhb__srv_stream_core* sc, uint64_t now, uint64_t* next);
/* For the heap's wake-up: the events due at `now` become ready (1: some did,
 * the data source is to be resumed); the next deadline into *next. */
int nhb__srv_sse_stream_tick(nhb__srv_worker* w, nhb__srv_stream_core* sc, uint64_t now, uint64_t* next);
/* HTTP/2's data source: copies ready event bytes into buf[0, len); *eof once
 * the last event is all taken. 0 without *eof: nothing ready yet. Counts
 * the events taken whole in stream_events. */
size_t nhb__srv_sse_stream_copy(nhb__srv_worker* w, nhb__srv_stream_core* sc, uint8_t* buf, size_t len, int* eof);
/* HTTP/3's: the bytes of one event, which live for ever (nghttp3 refers to
 * them until they are acknowledged). */
const uint8_t* nhb__srv_sse_event(size_t* len);

#endif /* NHB_SERVER_STREAM_H */
