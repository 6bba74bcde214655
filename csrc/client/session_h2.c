/* session_h2.c: the HTTP/2 protocol session, on nghttp2.
 *
 * nghttp2 does the framing, HPACK and flow control; this file feeds it bytes
 * and turns its callbacks into the pool's events. Each request of the run's
 * request set has its header block built once per run (h2_run_init) as
 * an nghttp2_nv array that every stream of it shares (nghttp2 is told not to
 * copy the names and values); the body, when there is one, is read from the
 * entry's rendered request by a data provider. Templated requests are
 * expanded per stream (h2_expand).
 *
 * Output: nghttp2_session_mem_send() serializes frames into nghttp2's own
 * buffer, which stays valid only until the next call; they are copied into
 * the connection's staging buffer and handed to the transport in one write
 * per loop iteration. Sessions with something to send are marked dirty and
 * written from a uv_prepare handle, which runs right before the loop polls:
 * every request released or answered in one iteration shares that write.
 * When reads marked them, the write follows one more, non-blocking poll, so
 * that responses which arrived meanwhile share it too (h2_on_prepare).
 *
 * Streams are tied to slots through the stream user data. A slot can outlive
 * its stream (a time-out resets the stream and frees the slot), so every
 * callback checks that the slot still belongs to this connection and stream
 * before using it.
 *
 * Responses are checked here, not by nghttp2 (its HTTP messaging checks are
 * off): see "response checks" below for what is checked, what
 * was dropped and why.
 *
 * gRPC is this session with config.grpc: the call goes out as any request,
 * and what gRPC adds to the response (grpc-status, the message framing, the
 * call's end) is read by session_grpc.c through callbacks a plain HTTP/2 run
 * does not install.
 *
 * Flow control: the client announces a large stream window and raises the
 * connection window, and nghttp2 acknowledges consumed DATA automatically,
 * so large response bodies stream at full speed; request bodies go out as
 * fast as the server's windows allow.
 */
#include <nghttp2/nghttp2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"
#include "common/h2_mem.h"

#define H2_STAGE_SIZE 65536
/* h2load's defaults (-w 30 -W 30): windows large enough that a load test is
 * never limited by them. */
#define H2_STREAM_WINDOW ((1 << 30) - 1)
#define H2_CONNECTION_WINDOW ((1 << 30) - 1)

struct nhb__h2 {
  nghttp2_session* session;
  char* stage; /* H2_STAGE_SIZE bytes, kept across connections of this entry */
  const uint8_t* leftover; /* what of the last mem_send chunk did not fit the stage */
  size_t leftover_len;
  int dirty; /* on the worker's dirty stack */
  /* Responses whose first header block came in the current read and that
   * have not ended in it (their first_ns is H2_FIRST_PENDING). */
  uint32_t first_pending;
  nhb__slot* last_slot; /* h2_slot's answer last time */
};

/* A slot's first_ns while the read that brought its response's first byte is
 * still being parsed: timed at the end of that read, as HTTP/1.1 does, unless
 * the response ends in it (then the pool's own clock read serves, transfer
 * 0), so that a response read in one go costs no clock read of its own. */
#define H2_FIRST_PENDING 1u

static void h2_flush(nhb__conn* c);

static nhb__conn* conn_of(void* user_data) { return (nhb__conn*)user_data; }

/* The slot of a stream, or NULL when the stream is not (or no longer) one of
 * this connection's requests. */
static inline nhb__slot* h2_slot(nhb__conn* c, nghttp2_session* session, int32_t stream_id) {
  if (c->state != NHB__CX_READY) return NULL;
  /* The slot found last first: a request's callbacks come one after another
   * (its frame sent, its header block field by field, its DATA, its close),
   * and this spares nghttp2's stream map a lookup per callback. A slot's
   * stream_id is set when its stream is submitted and zeroed whenever the
   * stream stops being ours, and slots live as long as the run, so a slot of
   * this connection with this stream_id is the stream's slot. */
  nhb__h2* h = c->h2;
  nhb__slot* s = h->last_slot;
  if (NHB__LIKELY(s != NULL && s->stream_id == stream_id && s->conn == c)) return s;
  s = (nhb__slot*)nghttp2_session_get_stream_user_data(session, stream_id);
  if (s == NULL || s->conn != c || s->stream_id != stream_id) return NULL;
  h->last_slot = s;
  return s;
}

static void h2_mark_dirty(nhb__conn* c) {
  nhb__h2* h = c->h2;
  if (h->dirty) return;
  h->dirty = 1;
  nhb__worker* w = c->worker;
  w->h2_dirty[w->h2_ndirty++] = c;
}

/* ---- response checks ------------------------------------------ */

/* nghttp2's HTTP messaging checks are turned off for the client
 * (nghttp2_option_set_no_http_messaging, per run in h2_run_init): they
 * cost about 850 instructions per response, most of it a table lookup for
 * every byte of every field name and value. What a load tester must still
 * notice is checked here instead, on what the callbacks see anyway, and a
 * response that breaks a rule ends exactly as nghttp2 ended it: the stream is
 * reset with PROTOCOL_ERROR and the request counts as a stream reset with the
 * error text "stream reset before the response ended (PROTOCOL_ERROR)".
 *
 * Kept, as nghttp2 1.52 has them (RFC 9113 section 8): :status exactly once
 * per header block, three digits, not 101; no pseudo-header other than
 * :status, none after a regular field, none in trailers; no upper-case
 * letter in a field name; no connection-specific field (connection,
 * keep-alive, proxy-connection, transfer-encoding, upgrade; te other than
 * "trailers"); content-length a number, at most once, not on a 1xx, "0" on a
 * 204 (and then not counted, as nghttp2 drops it), equal to the DATA received
 * when the stream ends and never exceeded; no body on a HEAD request's
 * response, a 204 or a 304; no DATA and no END_STREAM on an interim 1xx
 * response; trailers must end the stream.
 *
 * Every regular field's name must be lower-case token characters and its
 * value free of control bytes (HT aside) and DEL, without white space at
 * either end (RFC 9113 section 8.2.1). nghttp2 1.52 resets the stream for
 * such a field too (with no on_invalid_header callback installed, an
 * "ignored" field is an error), so these are kept; they are checked eight
 * bytes at a time (h2_name_bad, h2_value_bad) instead of a table lookup per
 * byte, which was most of nghttp2's cost. A pseudo-header's value is covered
 * by the :status check. */
#define H2_CHK_STATUS 0x01u  /* this header block had :status */
#define H2_CHK_REGULAR 0x02u /* a regular field came: no pseudo-header may follow */
#define H2_CHK_FINAL 0x04u   /* the final response's block is complete: next come trailers */
#define H2_CHK_INTERIM 0x08u /* a 1xx block is complete: only a header block may follow */
#define H2_CHK_HEAD 0x10u    /* the request was HEAD: the response has no body */
#define H2_CHK_CONNECT 0x20u /* the request was CONNECT: a 2xx's content-length is ignored */
#define H2_CHK_METHOD (H2_CHK_HEAD | H2_CHK_CONNECT)

/* A request that ends as a stream reset: the error text and the counter that
 * nghttp2's closing of the stream with `error_code` has always produced. */
static void h2_stream_failed(nhb__conn* c, nhb__slot* s, uint32_t error_code) {
  nhb__worker* w = c->worker;
  char text[sizeof(w->first_error_text)];
  snprintf(text, sizeof(text), "HTTP/2: stream reset before the response ended (%s)",
           nghttp2_http2_strerror(error_code));
  nhb__worker_record_error_text(w, NHB_EPROTO, text);
  s->stream_id = 0;
  nhb__conn_slot_failed(c, s, NHB_CTR_STREAM_RESETS);
}

/* A malformed response: reset the stream as nghttp2 did, and fail the
 * request now rather than when the reset is sent, so that nothing more of the
 * stream (the rest of the block, its END_STREAM, which would close the
 * stream with NO_ERROR first) reaches the slot. The slot may be reused at
 * once: callers must not touch it afterwards. */
static void h2_malformed(nhb__conn* c, nghttp2_session* session, nhb__slot* s) {
  int32_t id = s->stream_id;
  nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, id, NGHTTP2_PROTOCOL_ERROR);
  nghttp2_session_set_stream_user_data(session, id, NULL);
  h2_mark_dirty(c);
  h2_stream_failed(c, s, NGHTTP2_PROTOCOL_ERROR);
}

/* A response over one of the client's limits (client.h, NHB__RESP_*): a
 * protocol error, counted as one, and the request ends now as a stream
 * reset. `rst`: reset the stream here; else nghttp2 resets it, because the
 * header callback returns NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE, which also
 * stops the rest of the block from reaching the callbacks (nghttp2 still
 * decodes it, to keep the HPACK table in step, but hands nothing over). */
static void h2_over(nhb__conn* c, nghttp2_session* session, nhb__slot* s, const char* why, int rst) {
  nhb__worker* w = c->worker;
  int32_t id = s->stream_id;
  if (rst) nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, id, NGHTTP2_PROTOCOL_ERROR);
  nghttp2_session_set_stream_user_data(session, id, NULL);
  h2_mark_dirty(c);
  char text[sizeof(w->first_error_text)];
  snprintf(text, sizeof(text), "HTTP/2: stream reset: %s", why);
  nhb__worker_record_error_text(w, NHB_EPROTO, text);
  w->stats.counters[NHB_CTR_UPSTREAM_CX_PROTOCOL_ERROR]++;
  s->stream_id = 0;
  nhb__conn_slot_failed(c, s, NHB_CTR_STREAM_RESETS);
}

#define H2_ONES 0x0101010101010101ull
#define H2_HIGH (H2_ONES * 0x80)

/* The high bit of every byte of x that lies in lo..hi (both below 0x80): a
 * byte's low seven bits plus 0x80 - lo reach 0x80 from lo on, plus
 * 0x7f - hi from hi + 1 on, and neither sum carries into the next byte;
 * bytes of 0x80 and above are left out by ~x. */
static inline uint64_t h2_in_range(uint64_t x, unsigned lo, unsigned hi) {
  uint64_t low = x & (H2_ONES * 0x7f);
  return (low + H2_ONES * (0x80 - lo)) & ~(low + H2_ONES * (0x7f - hi)) & ~x & H2_HIGH;
}

/* RFC 9110's token characters, lower case only (nghttp2's
 * VALID_HD_NAME_CHARS): the slow path for bytes other than a-z, 0-9, '-'
 * and '.'. */
static int h2_name_byte_ok(uint8_t c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '!' ||
         (c >= '#' && c <= '\'') || c == '*' || c == '+' || c == '^' || c == '_' || c == '`' || c == '|' ||
         c == '~';
}

/* Whether eight name bytes are all lower-case token characters: one range
 * test per common class, the byte-wise check only when something else is
 * there (an underscore, say). */
static inline int h2_name_word_ok(uint64_t x) {
  if ((h2_in_range(x, 'a', 'z') | h2_in_range(x, '0', '9') | h2_in_range(x, '-', '.')) == H2_HIGH) return 1;
  uint8_t b[8];
  memcpy(b, &x, 8);
  for (int i = 0; i < 8; i++)
    if (!h2_name_byte_ok(b[i])) return 0;
  return 1;
}

/* Whether a regular field's name breaks RFC 9113 section 8.2.1: empty, an
 * upper-case letter, or any byte outside the token characters. nghttp2 made
 * this check with a table lookup per byte; here it is eight bytes at a time
 * (the last eight may overlap the ones before; names of four to seven bytes
 * are read as two overlapping halves). */
static int h2_name_bad(const uint8_t* p, size_t n) {
  uint64_t x;
  if (n >= 8) {
    for (size_t i = 0; i + 8 <= n; i += 8) {
      memcpy(&x, p + i, 8);
      if (!h2_name_word_ok(x)) return 1;
    }
    memcpy(&x, p + n - 8, 8);
    return !h2_name_word_ok(x);
  }
  if (n >= 4) {
    uint32_t lo, hi;
    memcpy(&lo, p, 4);
    memcpy(&hi, p + n - 4, 4);
    return !h2_name_word_ok((uint64_t)lo | ((uint64_t)hi << 32));
  }
  if (n == 0) return 1;
  for (size_t i = 0; i < n; i++)
    if (!h2_name_byte_ok(p[i])) return 1;
  return 0;
}

/* Whether eight value bytes hold a control byte other than HT, or DEL
 * (nghttp2's VALID_HD_VALUE_CHARS): the zero-byte test on x - 0x20 and on
 * x ^ 0x7f, then the byte-wise check only if one fired (a tab, say). */
static inline int h2_value_word_bad(uint64_t x) {
  uint64_t del = x ^ (H2_ONES * 0x7f);
  if ((((x - H2_ONES * 0x20) & ~x) | ((del - H2_ONES) & ~del)) & H2_HIGH) {
    uint8_t b[8];
    memcpy(b, &x, 8);
    for (int i = 0; i < 8; i++)
      if ((b[i] < 0x20 && b[i] != '\t') || b[i] == 0x7f) return 1;
  }
  return 0;
}

/* Whether a field value breaks RFC 9113 section 8.2.1: a control byte
 * (other than HT) or DEL anywhere, or white space at either end. */
static int h2_value_bad(const uint8_t* p, size_t n) {
  if (n == 0) return 0;
  if (p[0] == ' ' || p[0] == '\t' || p[n - 1] == ' ' || p[n - 1] == '\t') return 1;
  uint64_t x;
  if (n >= 8) {
    for (size_t i = 0; i + 8 <= n; i += 8) {
      memcpy(&x, p + i, 8);
      if (h2_value_word_bad(x)) return 1;
    }
    memcpy(&x, p + n - 8, 8);
    return h2_value_word_bad(x);
  }
  if (n >= 4) {
    uint32_t lo, hi;
    memcpy(&lo, p, 4);
    memcpy(&hi, p + n - 4, 4);
    return h2_value_word_bad((uint64_t)lo | ((uint64_t)hi << 32));
  }
  for (size_t i = 0; i < n; i++)
    if ((p[i] < 0x20 && p[i] != '\t') || p[i] == 0x7f) return 1;
  return 0;
}

/* content-length's value: decimal digits only, at least one, no overflow
 * (nghttp2's parse_uint); -1 otherwise. */
static int64_t h2_parse_length(const uint8_t* v, size_t n) {
  if (n == 0) return -1;
  int64_t len = 0;
  for (size_t i = 0; i < n; i++) {
    if (v[i] < '0' || v[i] > '9' || len > (INT64_MAX - 9) / 10) return -1;
    len = len * 10 + (v[i] - '0');
  }
  return len;
}

enum { H2_FIELD_BAD = -1, H2_FIELD_DROP = 0, H2_FIELD_TAKE = 1 };

/* :status (or another pseudo-header, or an empty name): the only response
 * pseudo-header, once, before any regular field, and not in trailers;
 * exactly three digits. Once per response, so out of line. */
__attribute__((noinline)) static int h2_check_pseudo(nhb__slot* s, const uint8_t* name, size_t namelen,
                                                     const uint8_t* value, size_t valuelen) {
  uint32_t chk = s->h2_chk;
  if (namelen == 0) return H2_FIELD_BAD;
  /* In trailers the final response's H2_CHK_STATUS is still set, so a
   * :status there fails on it (and any other pseudo-header on its name). */
  if ((chk & (H2_CHK_STATUS | H2_CHK_REGULAR)) || namelen != 7 || memcmp(name, ":status", 7) != 0 || valuelen != 3)
    return H2_FIELD_BAD;
  unsigned d0 = value[0] - (unsigned)'0', d1 = value[1] - (unsigned)'0', d2 = value[2] - (unsigned)'0';
  if (d0 > 9 || d1 > 9 || d2 > 9) return H2_FIELD_BAD;
  int status = (int)(d0 * 100 + d1 * 10 + d2);
  /* RFC 9110 section 15: a status under 100 is invalid (no class to count
   * it in, and no final response to judge); HTTP/2 has no Upgrade. */
  if (status < 100 || status == 101) return H2_FIELD_BAD;
  s->status = status;
  s->h2_chk = chk | H2_CHK_STATUS;
  return H2_FIELD_TAKE;
}

/* The field names whose length is one of these may be special. */
#define H2_SPECIAL_LENGTHS ((1u << 2) | (1u << 7) | (1u << 10) | (1u << 14) | (1u << 16) | (1u << 17))

/* The connection-specific fields, te and content-length. Out of line: most
 * names never get here, and the common one that does (content-length) comes
 * once per response. */
__attribute__((noinline)) static int h2_check_special(nhb__slot* s, const uint8_t* name, size_t namelen,
                                                      const uint8_t* value, size_t valuelen) {
  switch (namelen) {
    case 2:
      if (name[0] == 't' && name[1] == 'e' &&
          !(valuelen == 8 && (value[0] | 0x20) == 't' && (value[1] | 0x20) == 'r' && (value[2] | 0x20) == 'a' &&
            (value[3] | 0x20) == 'i' && (value[4] | 0x20) == 'l' && (value[5] | 0x20) == 'e' &&
            (value[6] | 0x20) == 'r' && (value[7] | 0x20) == 's'))
        return H2_FIELD_BAD;
      break;
    case 7:
      if (memcmp(name, "upgrade", 7) == 0) return H2_FIELD_BAD;
      break;
    case 10:
      if (memcmp(name, "connection", 10) == 0 || memcmp(name, "keep-alive", 10) == 0) return H2_FIELD_BAD;
      break;
    case 14:
      if (memcmp(name, "content-length", 14) == 0) {
        if (s->status == 204) {
          /* Forbidden, but some servers send "0": nghttp2 drops that one. */
          if (s->h2_clen != -1 || valuelen != 1 || value[0] != '0') return H2_FIELD_BAD;
          s->h2_clen = 0;
          return H2_FIELD_DROP;
        }
        if (s->status / 100 == 1) return H2_FIELD_BAD;
        if (s->status / 100 == 2 && (s->h2_chk & H2_CHK_CONNECT)) return H2_FIELD_DROP;
        if (s->h2_clen != -1 || (s->h2_clen = h2_parse_length(value, valuelen)) < 0) return H2_FIELD_BAD;
      }
      break;
    case 16:
      if (memcmp(name, "proxy-connection", 16) == 0) return H2_FIELD_BAD;
      break;
    case 17:
      if (memcmp(name, "transfer-encoding", 17) == 0) return H2_FIELD_BAD;
      break;
    default:
      break;
  }
  return H2_FIELD_TAKE;
}

/* One field of a response's header block against the rules above. TAKE: the
 * field stands (the callbacks look at it), DROP: nghttp2 would have dropped
 * it, BAD: the response is malformed. Sets the status from :status and counts
 * the regular fields' bytes (names plus values, as for HTTP/1.1). A common
 * regular field (server, date, content-type, ...) costs the word-wise byte
 * checks and a bit test of its length. */
static inline int h2_check_field(nhb__slot* s, const uint8_t* name, size_t namelen, const uint8_t* value,
                                 size_t valuelen) {
  if (NHB__UNLIKELY(namelen == 0 || name[0] == ':')) return h2_check_pseudo(s, name, namelen, value, valuelen);
  if (h2_name_bad(name, namelen) || h2_value_bad(value, valuelen)) return H2_FIELD_BAD;
  if (namelen < 32 && (H2_SPECIAL_LENGTHS >> namelen) & 1u) {
    int r = h2_check_special(s, name, namelen, value, valuelen);
    if (r != H2_FIELD_TAKE) return r;
  }
  s->h2_chk |= H2_CHK_REGULAR;
  s->header_bytes += namelen + valuelen;
  return H2_FIELD_TAKE;
}

/* The end of a HEADERS block or of a DATA frame, before the frame is acted
 * on (nghttp2 checked these before its on_frame_recv): what the block was
 * (an interim response, the final one or trailers) and, at END_STREAM, the
 * body against content-length. Returns 0 when the response was malformed
 * (the slot is gone then). */
static inline int h2_check_frame(nhb__conn* c, nghttp2_session* session, const nghttp2_frame* frame, nhb__slot* s) {
  uint32_t chk = s->h2_chk;
  int end = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
  if (frame->hd.type == NGHTTP2_HEADERS) {
    /* The next block (the response after an interim one, or trailers) has
     * the whole limit again. */
    s->hdr_list = 0;
    if (chk & H2_CHK_FINAL) {
      if (!end) goto bad; /* trailers end the stream */
    } else {
      if (!(chk & H2_CHK_STATUS)) goto bad;
      if (s->status / 100 == 1) {
        if (end) goto bad;
        if (NHB__UNLIKELY(++s->interims > NHB__RESP_INTERIM)) {
          h2_over(c, session, s, "more than 100 interim (1xx) responses to one request (the client's limit)", 1);
          return 0;
        }
        /* The next block is the response again, from scratch. */
        s->h2_chk = (chk & H2_CHK_METHOD) | H2_CHK_INTERIM;
        s->h2_clen = -1;
        return 1;
      }
      chk = (chk & ~H2_CHK_INTERIM) | H2_CHK_FINAL;
      if ((chk & H2_CHK_HEAD) || s->status == 204 || s->status == 304)
        s->h2_clen = 0; /* no body, whatever content-length said */
      else if (chk & H2_CHK_CONNECT)
        s->h2_clen = -1;
      s->h2_chk = chk;
    }
  } else if (end && (chk & H2_CHK_INTERIM)) {
    goto bad;
  }
  if (end && s->h2_clen >= 0 && (uint64_t)s->h2_clen != s->body_bytes) goto bad;
  return 1;
bad:
  h2_malformed(c, session, s);
  return 0;
}

/* A DATA chunk against the response so far: none on an interim response,
 * never beyond content-length (nghttp2 checked each chunk as it came, so a
 * stream that overruns fails at once, not at its end). */
static inline int h2_check_data(nhb__conn* c, nghttp2_session* session, nhb__slot* s, size_t len) {
  if (NHB__UNLIKELY((s->h2_chk & H2_CHK_INTERIM) ||
                    (s->h2_clen >= 0 && s->body_bytes + len > (uint64_t)s->h2_clen))) {
    h2_malformed(c, session, s);
    return 0;
  }
  s->body_bytes += len;
  return 1;
}

/* The slot of a header field's stream, and whether the field stands: NULL
 * when the field is not a response field of one of our streams, or was
 * dropped, or made the response malformed (then the stream is reset);
 * H2_OVER when the block went over a limit (the request has ended, and the
 * callback must return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE). */
static nhb__slot h2_over_mark;
#define H2_OVER (&h2_over_mark)
static inline nhb__slot* h2_field_slot(nhb__conn* c, nghttp2_session* session, const nghttp2_frame* frame,
                                const uint8_t* name, size_t namelen, const uint8_t* value, size_t valuelen) {
  if (frame->hd.type != NGHTTP2_HEADERS) return NULL;
  nhb__slot* s = h2_slot(c, session, frame->hd.stream_id);
  if (s == NULL) return NULL;
  /* A response's first byte: the first field of its first header block (an
   * interim 1xx's included), decoded from the read that brought it. Marked
   * here rather than in an on_begin_headers callback, which would cost every
   * response a callback and a stream lookup more. */
  if (NHB__UNLIKELY(s->first_ns == 0)) {
    s->first_ns = H2_FIRST_PENDING;
    c->h2->first_pending++;
  }
  /* The block against the limits, counted as SETTINGS_MAX_HEADER_LIST_SIZE
   * counts it, before anything looks at the field: an HPACK bomb (a large
   * entry of the dynamic table indexed thousands of times in a small block)
   * stops at the field that crosses the limit. The 32 bytes per field also
   * bound the fields of a block (client.h). nghttp2 caps a name and a value
   * at 64 KiB each, so the sum cannot wrap. */
  uint32_t list = s->hdr_list + (uint32_t)(namelen + valuelen + 32);
  if (NHB__UNLIKELY(list > NHB__RESP_HEADER_BYTES)) {
    h2_over(c, session, s,
            "a header block over 98304 bytes decoded (the client's limit, as SETTINGS_MAX_HEADER_LIST_SIZE "
            "counts it: name + value + 32 per field)",
            0);
    return H2_OVER;
  }
  s->hdr_list = list;
  int r = h2_check_field(s, name, namelen, value, valuelen);
  if (NHB__LIKELY(r == H2_FIELD_TAKE)) return s;
  if (r == H2_FIELD_BAD) h2_malformed(c, session, s);
  return NULL;
}

/* ---- nghttp2 callbacks ----------------------------------------------------- */

/* The end of a read: the responses that began in it and go on are timed. */
static void h2_first_byte_stamp(nhb__conn* c) {
  uint64_t now = nhb__now_ns();
  for (nhb__slot* s = c->slots; s != NULL; s = s->next)
    if (s->first_ns == H2_FIRST_PENDING) s->first_ns = now;
  c->h2->first_pending = 0;
}

/* A request's last byte written: the frame carrying its END_STREAM (HEADERS
 * of a request without a body, else its last DATA) left in this flush. */
static int h2_on_frame_send(nghttp2_session* session, const nghttp2_frame* frame, void* user_data) {
  if (!(frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) return 0;
  if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) return 0;
  nhb__conn* c = conn_of(user_data);
  nhb__slot* s = h2_slot(c, session, frame->hd.stream_id);
  if (s == NULL) return 0;
  nhb__worker* w = c->worker;
  if (w->h2_tx_ns == 0) w->h2_tx_ns = nhb__now_ns();
  s->written_ns = w->h2_tx_ns;
  return 0;
}

static int h2_on_header(nghttp2_session* session, const nghttp2_frame* frame, const uint8_t* name,
                        size_t namelen, const uint8_t* value, size_t valuelen, uint8_t flags,
                        void* user_data) {
  NHB__UNUSED(flags);
  nhb__slot* s = h2_field_slot(conn_of(user_data), session, frame, name, namelen, value, valuelen);
  return NHB__UNLIKELY(s == H2_OVER) ? NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE : 0;
}

static int h2_on_data_chunk(nghttp2_session* session, uint8_t flags, int32_t stream_id,
                            const uint8_t* data, size_t len, void* user_data) {
  NHB__UNUSED(flags);
  NHB__UNUSED(data);
  nhb__conn* c = conn_of(user_data);
  nhb__slot* s = h2_slot(c, session, stream_id);
  if (s != NULL) h2_check_data(c, session, s, len);
  return 0;
}

/* A HEADERS or DATA frame of one of our streams, once h2_check_frame has
 * passed it. `observed`: the run has response observers (observer.c), which
 * hear of the head's end, each DATA frame as a body piece, and the end; a
 * constant, so that the plain callbacks compile without them. */
static inline __attribute__((always_inline)) int h2_on_response_frame(nhb__conn* c, nghttp2_session* session,
                                                                      const nghttp2_frame* frame, nhb__slot* s,
                                                                      int observed) {
  if (frame->hd.type == NGHTTP2_HEADERS) {
    if (observed) nhb__obs_head_end(c->worker, s);
    if (s->status >= 100 && s->status < 200) {
      /* An interim response (100 Continue, 103 Early Hints): the real one follows. */
      s->status = 0;
      s->header_bytes = 0;
      return 0;
    }
  } else if (observed && frame->hd.length > frame->data.padlen) {
    /* A DATA frame with a payload is one piece of the body. */
    nhb__obs_piece(c->worker, s, 0);
  }
  if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) {
    /* The response is complete; the stream may linger until our side of
     * it is closed too, but the request is over. */
    nghttp2_session_set_stream_user_data(session, frame->hd.stream_id, NULL);
    s->stream_id = 0;
    if (s->first_ns == H2_FIRST_PENDING) {
      /* Begun and ended in this read: the pool's clock read is its first byte's. */
      s->first_ns = 0;
      c->h2->first_pending--;
    }
    if (observed) nhb__obs_end(c, s);
    else nhb__conn_response(c, s, s->status);
  }
  return 0;
}

static inline __attribute__((always_inline)) int h2_frame_recv(nghttp2_session* session, const nghttp2_frame* frame,
                                                               void* user_data, int observed) {
  nhb__conn* c = conn_of(user_data);
  if (c->state != NHB__CX_READY) return 0;
  nhb__worker* w = c->worker;
  switch (frame->hd.type) {
    case NGHTTP2_HEADERS:
    case NGHTTP2_DATA: {
      nhb__slot* s = h2_slot(c, session, frame->hd.stream_id);
      if (s == NULL || !h2_check_frame(c, session, frame, s)) return 0;
      return h2_on_response_frame(c, session, frame, s, observed);
    }
    case NGHTTP2_GOAWAY:
      /* The server is going away: no new streams on this connection. Streams
       * above last_stream_id are closed by nghttp2 with REFUSED_STREAM. */
      w->stats.counters[NHB_CTR_UPSTREAM_CX_CLOSE_NOTIFY]++;
      c->peer_gone = 1;
      if (frame->goaway.error_code != NGHTTP2_NO_ERROR) {
        char text[sizeof(w->first_error_text)];
        snprintf(text, sizeof(text), "HTTP/2: the server sent GOAWAY (%s)",
                 nghttp2_http2_strerror(frame->goaway.error_code));
        nhb__worker_record_error_text(w, NHB_EPROTO, text);
      }
      c->draining = 1;
      nhb__conn_update(c);
      return 0;
    case NGHTTP2_SETTINGS:
      if (!(frame->hd.flags & NGHTTP2_FLAG_ACK)) {
        /* The server's stream limit caps the connection's capacity. */
        uint32_t limit = nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
        uint32_t cap = w->conn_capacity < limit ? w->conn_capacity : limit;
        if (cap != c->capacity) {
          c->capacity = cap;
          nhb__conn_update(c);
        }
      }
      return 0;
    default:
      return 0;
  }
}

static int h2_on_frame_recv(nghttp2_session* session, const nghttp2_frame* frame, void* user_data) {
  return h2_frame_recv(session, frame, user_data, 0);
}

/* ---- response observers (observer.c) --------------------------------------- */

/* The callbacks of a run with response observers (the latency header,
 * checks, grouping by a header, streaming statistics, gRPC): the plain ones'
 * work, then one observer step per event. A run without observers installs
 * the plain callbacks (h2_run_init) and pays nothing per field or chunk.
 * Each stream's response is observed with its slot's own state: a header
 * block that starts before the final status (the first, or the one after an
 * interim 1xx response) begins it, its regular fields and DATA feed it, its
 * END_STREAM ends it (h2_on_response_frame). A block after the final status
 * is trailers, which only gRPC reads; a field nghttp2 would have dropped
 * (content-length: 0 on a 204) is not seen. Names with an upper-case letter
 * never get here (h2_check_field). */
static int h2_obs_on_begin_headers(nghttp2_session* session, const nghttp2_frame* frame, void* user_data) {
  if (frame->hd.type != NGHTTP2_HEADERS) return 0;
  nhb__conn* c = conn_of(user_data);
  nhb__slot* s = h2_slot(c, session, frame->hd.stream_id);
  if (s == NULL || s->status != 0) return 0;
  if (NHB__LIKELY(nhb__obs_begin(c->worker, s) == 0)) return 0;
  /* No memory for the slot's check state (once per slot): the request ends
   * as a reset, which nghttp2 sends for the failed callback. */
  nghttp2_session_set_stream_user_data(session, s->stream_id, NULL);
  nhb__worker_record_error_text(c->worker, NHB_ENOMEM, "HTTP/2: no memory for a stream's response checks");
  s->stream_id = 0;
  nhb__conn_slot_failed(c, s, NHB_CTR_STREAM_RESETS);
  return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
}

static int h2_obs_on_header(nghttp2_session* session, const nghttp2_frame* frame, const uint8_t* name,
                            size_t namelen, const uint8_t* value, size_t valuelen, uint8_t flags, void* user_data) {
  NHB__UNUSED(flags);
  nhb__conn* c = conn_of(user_data);
  nhb__slot* s = h2_field_slot(c, session, frame, name, namelen, value, valuelen);
  if (NHB__UNLIKELY(s == H2_OVER)) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  /* A field that stands has a name (h2_check_field); pseudo-headers are the
   * session's. */
  if (s == NULL || name[0] == ':') return 0;
  nhb__obs_field(c->worker, s, (const char*)name, namelen, (const char*)value, valuelen,
                 (s->h2_chk & H2_CHK_FINAL) != 0);
  return 0;
}

static int h2_obs_on_data_chunk(nghttp2_session* session, uint8_t flags, int32_t stream_id, const uint8_t* data,
                                size_t len, void* user_data) {
  NHB__UNUSED(flags);
  nhb__conn* c = conn_of(user_data);
  nhb__slot* s = h2_slot(c, session, stream_id);
  /* DATA of the final response only (h2_check_data refuses it before one). */
  if (s != NULL && h2_check_data(c, session, s, len)) nhb__obs_data(c->worker, s, (const char*)data, len, 0);
  return 0;
}

static int h2_obs_on_frame_recv(nghttp2_session* session, const nghttp2_frame* frame, void* user_data) {
  return h2_frame_recv(session, frame, user_data, 1);
}

static int h2_on_stream_close(nghttp2_session* session, int32_t stream_id, uint32_t error_code,
                              void* user_data) {
  nhb__conn* c = conn_of(user_data);
  nhb__slot* s = h2_slot(c, session, stream_id);
  if (s == NULL) return 0; /* answered, timed out, or the connection is closing */
  nghttp2_session_set_stream_user_data(session, stream_id, NULL);
  if (error_code == NGHTTP2_REFUSED_STREAM) {
    /* Never processed (RFC 9113 section 8.7): safe to send again. */
    nhb__conn_slot_refused(c, s);
    return 0;
  }
  h2_stream_failed(c, s, error_code);
  return 0;
}

/* A frame nghttp2 gave up sending. For a request's HEADERS that means the
 * stream never opened (a GOAWAY arrived while it waited for a free stream),
 * so nghttp2 will never close it: the request is sent again elsewhere. */
static int h2_on_frame_not_send(nghttp2_session* session, const nghttp2_frame* frame, int lib_error_code,
                                void* user_data) {
  NHB__UNUSED(session);
  nhb__conn* c = conn_of(user_data);
  if (frame->hd.type != NGHTTP2_HEADERS || c->state != NHB__CX_READY) return 0;
  nhb__slot* s = c->slots;
  while (s != NULL && s->stream_id != frame->hd.stream_id) s = s->next;
  if (s == NULL) return 0;
  s->stream_id = 0;
  if (lib_error_code == NGHTTP2_ERR_START_STREAM_NOT_ALLOWED || lib_error_code == NGHTTP2_ERR_STREAM_CLOSING ||
      lib_error_code == NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE) {
    /* Never sent: it goes out on the next connection. */
    c->draining = 1;
    nhb__conn_slot_refused(c, s);
  } else {
    char text[sizeof(c->worker->first_error_text)];
    snprintf(text, sizeof(text), "HTTP/2: cannot send a request: %s", nghttp2_strerror(lib_error_code));
    nhb__worker_record_error_text(c->worker, NHB_EPROTO, text);
    nhb__conn_slot_failed(c, s, NHB_CTR_STREAM_RESETS);
  }
  return 0;
}

/* The request body: the tail of the spec's rendered request (the payload, or
 * 'a' bytes as Nighthawk sends), or the slot's expansion of a templated one.
 * The source points at the body's end, so the next bytes are the last
 * body_left of it. */
static ssize_t h2_read_body(nghttp2_session* session, int32_t stream_id, uint8_t* buf, size_t length,
                            uint32_t* data_flags, nghttp2_data_source* source, void* user_data) {
  nhb__conn* c = conn_of(user_data);
  nhb__slot* s = h2_slot(c, session, stream_id);
  if (s == NULL) {
    *data_flags |= NGHTTP2_DATA_FLAG_EOF;
    return 0;
  }
  const char* end = (const char*)source->ptr;
  size_t n = s->body_left < length ? (size_t)s->body_left : length;
  memcpy(buf, end - s->body_left, n);
  s->body_left -= n;
  if (s->body_left == 0) *data_flags |= NGHTTP2_DATA_FLAG_EOF;
  return (ssize_t)n;
}

/* ---- the session vtable ---------------------------------------------------- */

static int h2_open(nhb__conn* c) {
  nhb__h2* h = c->h2;
  if (h == NULL) {
    h = calloc(1, sizeof(*h));
    if (h != NULL && (h->stage = malloc(H2_STAGE_SIZE)) == NULL) {
      free(h);
      h = NULL;
    }
    if (h == NULL) return NHB_ENOMEM;
    c->h2 = h;
  }
  h->leftover_len = 0;
  h->last_slot = NULL;
  const nhb_run* run = c->worker->run;
  /* nghttp2's per-stream allocations come from the worker's free lists
   * (h2_mem.c); nghttp2 copies the allocator. */
  nghttp2_mem mem = nhb__h2_mem_allocator(&c->worker->h2_mem);
  if (nghttp2_session_client_new3(&h->session, (const nghttp2_session_callbacks*)run->h2_callbacks, c,
                                  (const nghttp2_option*)run->h2_option, &mem) != 0)
    return NHB_ENOMEM;
  nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, H2_STREAM_WINDOW},
      /* What the client takes (client.h), so that a server that honours it
       * refuses with a 431 or trims instead. */
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, NHB__RESP_HEADER_BYTES},
  };
  if (nghttp2_submit_settings(h->session, NGHTTP2_FLAG_NONE, settings, 3) != 0 ||
      nghttp2_session_set_local_window_size(h->session, NGHTTP2_FLAG_NONE, 0, H2_CONNECTION_WINDOW) != 0)
    return NHB_ENOMEM;
  /* The preface and SETTINGS go out with the first requests. */
  h2_mark_dirty(c);
  return 0;
}

/* Templating: expands the body into the slot's buffer (it is read while the
 * stream lives) and the header block's templated values into the worker's
 * scratch block, which nghttp2 copies when the request is submitted (the
 * expanded values lose NGHTTP2_NV_FLAG_NO_COPY_VALUE). */
static int h2_expand(nhb__conn* c, nhb__slot* s, const nhb__spec* sp, const nghttp2_nv** nva, const char** body) {
  nhb__worker* w = c->worker;
  const nhb__tmpl* t = sp->tmpl;
  nhb__tmpl_ctx x;
  nhb__request_ctx(w, &x);
  if (t->segs != NULL) {
    char* buf = w->rq_buf + (size_t)(s - w->slot_pool) * w->rq_buf_each;
    size_t n = nhb__tmpl_expand(t, t->body_seg, t->nsegs, &x, buf, w->rq_buf_each);
    if (n == SIZE_MAX) return NHB_EINVAL;
    *body = buf;
    s->body_left = n;
  }
  x.clen = s->body_left;
  nghttp2_nv* out = (nghttp2_nv*)w->rq_nva;
  memcpy(out, sp->h2_nva, sp->h2_nvlen * sizeof(nghttp2_nv));
  size_t used = 0, cap = w->run->rq_hdr_max;
  for (size_t k = 0; k < sp->h2_nvlen; k++) {
    const nhb__tmpl* v = &sp->h2_vals[k];
    if (v->nsegs == 0) continue;
    size_t n = nhb__tmpl_expand(v, 0, v->nsegs, &x, w->rq_hdr_buf + used, cap - used);
    if (n == SIZE_MAX) return NHB_EINVAL;
    out[k].value = (uint8_t*)(w->rq_hdr_buf + used);
    out[k].valuelen = n;
    out[k].flags &= (uint8_t)~NGHTTP2_NV_FLAG_NO_COPY_VALUE;
    used += n;
  }
  *nva = out;
  return 0;
}

/* `traced` is a constant in each caller: h2_send compiles to the send of a
 * run without tracing, h2_send_traced adds the trace fields (trace.c). */
static inline __attribute__((always_inline)) int h2_send_with(nhb__conn* c, nhb__slot* s, int traced) {
  nhb__h2* h = c->h2;
  const nhb__spec* sp = &c->worker->run->specs[s->rq.spec];
  s->header_bytes = 0;
  s->body_bytes = 0;
  s->status = 0;
  s->h2_clen = -1;
  s->hdr_list = 0;
  s->interims = 0;
  if (NHB__UNLIKELY(c->worker->run->config.grpc)) nhb__grpc_call_start(s);
  s->body_left = sp->body_size;
  const nghttp2_nv* nva = (const nghttp2_nv*)sp->h2_nva;
  const char* bytes = sp->body;
  if (NHB__UNLIKELY(sp->tmpl != NULL)) {
    int r = h2_expand(c, s, sp, &nva, &bytes);
    if (r < 0) return r;
  }
  /* The response checks need the method (nva[0] is :method): HEAD and
   * CONNECT change what the response may carry. */
  s->h2_chk = 0;
  if (NHB__UNLIKELY(nva[0].valuelen == 4 && memcmp(nva[0].value, "HEAD", 4) == 0))
    s->h2_chk = H2_CHK_HEAD;
  else if (NHB__UNLIKELY(nva[0].valuelen == 7 && memcmp(nva[0].value, "CONNECT", 7) == 0))
    s->h2_chk = H2_CHK_CONNECT;
  size_t nvlen = sp->h2_nvlen;
  if (traced) nva = (const nghttp2_nv*)nhb__trace_h2(c->worker, s, nva, &nvlen);
  nghttp2_data_provider body;
  body.source.ptr = (void*)(uintptr_t)(bytes + s->body_left);
  body.read_callback = h2_read_body;
  int32_t id = nghttp2_submit_request(h->session, NULL, nva, nvlen, s->body_left > 0 ? &body : NULL, s);
  if (id == NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE) {
    /* Stream ids exhausted (2^30 requests): carry on on a new connection. */
    c->draining = 1;
    nhb__conn_slot_refused(c, s);
    return 0;
  }
  if (id < 0) return NHB_EPROTO;
  s->stream_id = id;
  h->last_slot = s;
  h2_mark_dirty(c);
  return 0;
}

static int h2_send(nhb__conn* c, nhb__slot* s) { return h2_send_with(c, s, 0); }

/* With tracing on: a sampled request carries its trace fields. */
static int h2_send_traced(nhb__conn* c, nhb__slot* s) {
  return nhb__trace_sample(c->worker, s) ? h2_send_with(c, s, 1) : h2_send_with(c, s, 0);
}

static int h2_on_data(nhb__conn* c, const char* data, size_t len) {
  nhb__h2* h = c->h2;
  h->first_pending = 0;
  ssize_t n = nghttp2_session_mem_recv(h->session, (const uint8_t*)data, len);
  if (c->state != NHB__CX_READY) return 0;
  if (NHB__UNLIKELY(h->first_pending != 0)) h2_first_byte_stamp(c);
  if (n < 0) {
    char text[sizeof(c->worker->first_error_text)];
    snprintf(text, sizeof(text), "HTTP/2: %s", nghttp2_strerror((int)n));
    nhb__worker_record_error_text(c->worker, NHB_EPROTO, text);
    return NHB_EPROTO;
  }
  /* SETTINGS acknowledgements, WINDOW_UPDATEs, new requests. */
  h2_mark_dirty(c);
  c->worker->h2_read_dirty = 1;
  return 0;
}

static int h2_on_eof(nhb__conn* c, int err) {
  NHB__UNUSED(err);
  /* A request nghttp2 still holds back (waiting for a free stream when the
   * server's GOAWAY and close arrived in one read) never left: it goes out
   * again on the next connection. The pool fails the others. */
  nhb__h2* h = c->h2;
  c->draining = 1;
  for (nhb__slot* s = c->slots; s != NULL;) {
    nhb__slot* next = s->next;
    if (!s->refused && s->stream_id > 0 && nghttp2_session_find_stream(h->session, s->stream_id) == NULL)
      nhb__conn_slot_refused(c, s);
    s = next;
  }
  return 0;
}

static void h2_cancel(nhb__conn* c, nhb__slot* s) {
  nhb__h2* h = c->h2;
  if (s->stream_id > 0) {
    nghttp2_submit_rst_stream(h->session, NGHTTP2_FLAG_NONE, s->stream_id, NGHTTP2_CANCEL);
    nghttp2_session_set_stream_user_data(h->session, s->stream_id, NULL);
    s->stream_id = 0;
    h2_mark_dirty(c);
  }
}

static void h2_close(nhb__conn* c) {
  nhb__h2* h = c->h2;
  if (h == NULL || h->session == NULL) return;
  nghttp2_session_del(h->session);
  h->session = NULL;
  h->leftover_len = 0;
}

/* Serializes what nghttp2 has to send into the stage and writes it, until
 * nothing is left or the transport is busy (on_writable resumes). */
static void h2_flush(nhb__conn* c) {
  nhb__h2* h = c->h2;
  while (c->state == NHB__CX_READY && !c->write_pending) {
    size_t len = 0;
    while (len < H2_STAGE_SIZE) {
      if (h->leftover_len == 0) {
        const uint8_t* p;
        ssize_t n = nghttp2_session_mem_send(h->session, &p);
        /* nghttp2's callbacks may have closed the connection meanwhile: a
         * request it could not start after the server's GOAWAY is refused,
         * and the last refusal closes the connection so that the refused
         * requests go out on a new one. Nothing more may be written then. */
        if (c->state != NHB__CX_READY) return;
        if (n < 0) {
          nhb__conn_fail(c, NHB_EPROTO, NHB_CTR_STREAM_RESETS);
          return;
        }
        if (n == 0) break;
        h->leftover = p;
        h->leftover_len = (size_t)n;
      }
      size_t take = h->leftover_len < H2_STAGE_SIZE - len ? h->leftover_len : H2_STAGE_SIZE - len;
      memcpy(h->stage + len, h->leftover, take);
      len += take;
      h->leftover += take;
      h->leftover_len -= take;
    }
    if (len == 0) break;
    int r = c->transport->write(c, h->stage, len);
    if (r < 0) {
      nhb__conn_fail(c, r, NHB_CTR_STREAM_RESETS);
      return;
    }
  }
  if (c->state != NHB__CX_READY || c->write_pending) return;
  if (!nghttp2_session_want_read(h->session) && !nghttp2_session_want_write(h->session)) {
    /* nghttp2 ended the session (a GOAWAY sent or received and nothing left
     * to do): streams still open will never complete. */
    if (c->nactive > c->nrefused) {
      nhb__worker_record_error_text(c->worker, NHB_EPROTO, "HTTP/2: the session ended with streams open");
      c->worker->stats.counters[NHB_CTR_UPSTREAM_CX_PROTOCOL_ERROR]++;
      nhb__conn_fail(c, NHB_EPROTO, NHB_CTR_STREAM_RESETS);
    } else {
      c->draining = 1;
      nhb__conn_update(c);
    }
  }
}

static void h2_on_writable(nhb__conn* c) {
  c->worker->h2_tx_ns = 0;
  h2_flush(c);
}

static const nhb__session_vtable nhb__session_h2 = {
    "h2", h2_open, h2_send, h2_on_data, h2_on_eof, h2_on_writable, h2_cancel, h2_close,
};

static const nhb__session_vtable nhb__session_h2_traced = {
    "h2", h2_open, h2_send_traced, h2_on_data, h2_on_eof, h2_on_writable, h2_cancel, h2_close,
};

/* ---- per worker ------------------------------------------------------------ */

/* Writes every dirty connection, one clock read for the requests the pass
 * writes (h2_on_frame_send). A stack: a connection flushed here can be
 * marked again (by another's failure, say) and is then simply flushed
 * again. */
static void h2_flush_dirty(nhb__worker* w) {
  w->h2_read_dirty = 0;
  w->h2_tx_ns = 0;
  while (w->h2_ndirty > 0) {
    nhb__conn* c = w->h2_dirty[--w->h2_ndirty];
    c->h2->dirty = 0;
    if (c->state == NHB__CX_READY && c->h2->session != NULL) h2_flush(c);
  }
}

/* Nothing to do: an active idle handle only makes the loop's next poll
 * non-blocking (libuv polls with a zero timeout while one is active). */
static void h2_on_idle(uv_idle_t* handle) { NHB__UNUSED(handle); }

/* After the non-blocking poll and the reads it brought: everything freed by
 * the responses of both polls goes out now, in one write per connection. */
static void h2_on_check(uv_check_t* handle) {
  nhb__worker* w = (nhb__worker*)handle->data;
  uv_idle_stop(&w->h2_idle);
  uv_check_stop(&w->h2_check);
  h2_flush_dirty(w);
}

/* Runs right before the loop polls. When reads marked connections (their
 * responses freed requests, or nghttp2 owes the server an answer), the
 * write waits for one more poll, a non-blocking one: responses that arrived
 * while this iteration's reads were parsed (the server keeps answering the
 * other streams meanwhile) are read and free their requests first, and all
 * of it shares one send per connection. Over loopback a send costs the
 * client the server's receive path too, so fewer, larger sends are the
 * cheaper kernel side; the measured effect is in docs/benchmarks.md ("HTTP/2:
 * sends, windows and the stage"). No request waits for anything that can
 * block: the extra poll has a zero timeout, and the write follows it in the
 * same iteration (the check phase), whatever it returned; at most one such
 * poll per write, as the write clears the read mark. Requests released by
 * the sequencer or the pool alone (no read since the last write) go out
 * here at once, as before. */
static void h2_on_prepare(uv_prepare_t* handle) {
  nhb__worker* w = (nhb__worker*)handle->data;
  if (w->h2_read_dirty && w->h2_ndirty > 0) {
    w->h2_read_dirty = 0;
    uv_idle_start(&w->h2_idle, h2_on_idle);
    uv_check_start(&w->h2_check, h2_on_check);
    return;
  }
  h2_flush_dirty(w);
}

static int h2_worker_init(nhb__worker* w) {
  w->h2_dirty = calloc(w->nconns, sizeof(nhb__conn*));
  if (w->h2_dirty == NULL) return NHB_ENOMEM;
  /* The three handles are initialised together (their init cannot fail
   * on Unix) so that h2_worker_close closes all or none. */
  int r = uv_prepare_init(&w->loop, &w->h2_prepare);
  if (r == 0) r = uv_idle_init(&w->loop, &w->h2_idle);
  if (r == 0) r = uv_check_init(&w->loop, &w->h2_check);
  if (r < 0) return r;
  w->h2_prepare.data = w;
  w->h2_check.data = w;
  w->h2_prepare_active = 1;
  return uv_prepare_start(&w->h2_prepare, h2_on_prepare);
}

static void h2_worker_close(nhb__worker* w) {
  if (!w->h2_prepare_active) return;
  w->h2_prepare_active = 0;
  w->h2_ndirty = 0;
  uv_close((uv_handle_t*)&w->h2_prepare, NULL);
  uv_close((uv_handle_t*)&w->h2_idle, NULL);
  uv_close((uv_handle_t*)&w->h2_check, NULL);
}

static void h2_worker_free(nhb__worker* w) {
  free(w->h2_dirty);
  w->h2_dirty = NULL;
  /* Every session is gone by now (they are deleted in the close callbacks),
   * so every small block is on a list. */
  nhb__h2_mem_release(&w->h2_mem);
}

static void h2_conn_free(nhb__conn* c) {
  if (c->h2 == NULL) return;
  h2_close(c);
  free(c->h2->stage);
  free(c->h2);
  c->h2 = NULL;
}

/* ---- per run --------------------------------------------------------------- */

static nghttp2_nv make_nv(const char* name, size_t name_len, const char* value, size_t value_len) {
  nghttp2_nv nv;
  nv.name = (uint8_t*)name;
  nv.namelen = name_len;
  nv.value = (uint8_t*)value;
  nv.valuelen = value_len;
  /* The strings live as long as the run: nghttp2 need not copy them. */
  nv.flags = NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE;
  return nv;
}

static int h2_run_init(nhb_run* run, char* err, size_t err_len) {
  const nhb_client_config* cfg = &run->config;
  if (cfg->protocol != NHB_PROTO_HTTP2) return 0;
  /* One header block per entry of the request set, end to end in one array;
   * the set's entries were checked as they were copied (request.c), the
   * run's scheme here. */
  size_t total = 0;
  int ok = cfg->h2_scheme != NULL;
  for (uint32_t i = 0; i < run->nspecs && ok; i++) {
    const nhb_request_spec* sp = &cfg->specs[i];
    ok = sp->h2_method != NULL && sp->h2_authority != NULL && sp->h2_path != NULL;
    total += (size_t)sp->h2_nheaders + 4;
  }
  if (!ok) {
    if (err) snprintf(err, err_len, "HTTP/2 needs h2_method, h2_scheme, h2_authority and h2_path");
    return NHB_EINVAL;
  }
  nghttp2_nv* nva = calloc(total, sizeof(nghttp2_nv));
  nghttp2_session_callbacks* cb = NULL;
  if (nva == NULL || nghttp2_session_callbacks_new(&cb) != 0) {
    free(nva);
    return NHB_ENOMEM;
  }
  run->h2_nva = nva;
  run->h2_callbacks = cb;
  /* nghttp2's HTTP messaging checks off: session_h2.c makes its own
   * ("response checks" above). */
  nghttp2_option* opt = NULL;
  if (nghttp2_option_new(&opt) != 0) return NHB_ENOMEM;
  nghttp2_option_set_no_http_messaging(opt, 1);
  run->h2_option = opt;
  /* With response observers (observer.c: the latency header, checks,
   * grouping by a header, streaming statistics, gRPC), the callbacks that
   * also pass each event to them; otherwise the plain ones. */
  int obs = run->obs != 0;
  nghttp2_session_callbacks_set_on_header_callback(cb, obs ? h2_obs_on_header : h2_on_header);
  /* gRPC alone has nothing to begin per head: its runs pay no callback for it. */
  if (run->obs & ~NHB__OBS_GRPC) nghttp2_session_callbacks_set_on_begin_headers_callback(cb, h2_obs_on_begin_headers);
  nghttp2_session_callbacks_set_on_frame_send_callback(cb, h2_on_frame_send);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, obs ? h2_obs_on_data_chunk : h2_on_data_chunk);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, obs ? h2_obs_on_frame_recv : h2_on_frame_recv);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, h2_on_stream_close);
  nghttp2_session_callbacks_set_on_frame_not_send_callback(cb, h2_on_frame_not_send);
  for (uint32_t i = 0; i < run->nspecs; i++) {
    const nhb_request_spec* sp = &cfg->specs[i];
    size_t n = 0;
    nva[n++] = make_nv(":method", 7, sp->h2_method, strlen(sp->h2_method));
    nva[n++] = make_nv(":scheme", 7, cfg->h2_scheme, strlen(cfg->h2_scheme));
    nva[n++] = make_nv(":authority", 10, sp->h2_authority, strlen(sp->h2_authority));
    nva[n++] = make_nv(":path", 5, sp->h2_path, strlen(sp->h2_path));
    for (int k = 0; k < sp->h2_nheaders; k++) {
      const nhb_header* hd = &sp->h2_headers[k];
      nva[n++] = make_nv(hd->name, hd->name_len, hd->value, hd->value_len);
    }
    run->specs[i].h2_nva = nva;
    run->specs[i].h2_nvlen = n;
    if (cfg->templated) {
      int r = nhb__request_h2_values(run, i, nva, n);
      if (r < 0) return r;
    }
    nva += n;
  }
  return 0;
}

static void h2_run_free(nhb_run* run) {
  if (run->h2_callbacks != NULL) nghttp2_session_callbacks_del((nghttp2_session_callbacks*)run->h2_callbacks);
  run->h2_callbacks = NULL;
  if (run->h2_option != NULL) nghttp2_option_del((nghttp2_option*)run->h2_option);
  run->h2_option = NULL;
  free(run->h2_nva);
  run->h2_nva = NULL;
}

/* The protocol (nhb__protocol in client.h; NHB_PROTOCOL_MAP in nhb.h). gRPC
 * too: this session with config.grpc (session_grpc.c). */
const nhb__protocol nhb__protocol_h2 = {
    .name = "HTTP/2",
    .session = &nhb__session_h2,
    .traced_session = &nhb__session_h2_traced,
    .multiplexes = 1,
    .cx_counter = NHB_CTR_UPSTREAM_CX_HTTP2_TOTAL,
    .refused = "REFUSED_STREAM",
    .run_init = h2_run_init,
    .run_free = h2_run_free,
    .worker_init = h2_worker_init,
    .worker_close = h2_worker_close,
    .worker_free = h2_worker_free,
    .conn_free = h2_conn_free,
};
