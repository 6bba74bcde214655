/* server_request.c: request capture, shared by HTTP/1.1 and HTTP/2.
 *
 * Both protocols capture a request into a nhb__srv_req: the URL, every header
 * field (positions in one buffer that the connection or stream reuses, so
 * that it grows to the largest request seen and no further) and the body
 * when it may be echoed. HTTP/1.1 (server_h1.c) receives a field in pieces
 * from llhttp and appends them as they come; HTTP/2 (server_h2.c) receives
 * each field whole from nghttp2. Either way the same functions note what the
 * server looks at (the Nighthawk config header, Expect, Accept-Encoding,
 * Upgrade, HTTP2-Settings, the query string, /debug), and the responses
 * (server_respond.c) read the one structure.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server/server_internal.h"

void nhb__srv_req_reset(nhb__srv_req* q) {
  q->buf.len = 0;
  q->url_off = q->url_len = 0;
  q->nhdrs = 0;
  q->state = 0;
  q->head_bytes = 0;
  q->body_bytes = 0;
  q->body_off = q->body_len = 0;
  q->capture_body = 0;
  q->nh_idx = -1;
  q->settings_idx = -1;
  q->expect_continue = q->accept_gzip = q->has_query = q->is_debug = q->upgrade_h2c = 0;
}

nhb__srv_hdr_pos* nhb__srv_req_header_begin(nhb__srv_req* q) {
  if (q->nhdrs == q->hdrs_cap) {
    /* Doubles, so that a connection settles after its largest request;
     * eight to start, the headers of a typical load tester's request, since
     * every kept-alive connection holds the array (memory per
     * connection). */
    size_t cap = q->hdrs_cap ? 2 * q->hdrs_cap : 8;
    nhb__srv_hdr_pos* h = realloc(q->hdrs, cap * sizeof(*h));
    if (!h) return NULL;
    q->hdrs = h;
    q->hdrs_cap = cap;
  }
  nhb__srv_hdr_pos* h = &q->hdrs[q->nhdrs++];
  h->name_off = q->buf.len;
  h->name_len = 0;
  h->value_off = h->value_len = 0;
  return h;
}

int nhb__srv_req_add_header(nhb__srv_req* q, const void* name, size_t name_len, const void* value, size_t value_len) {
  nhb__srv_hdr_pos* hd = nhb__srv_req_header_begin(q);
  if (!hd) return NHB_ENOMEM;
  hd->name_len = name_len;
  if (nhb__srv_buf_append(&q->buf, name, name_len) < 0) return NHB_ENOMEM;
  hd->value_off = q->buf.len;
  hd->value_len = value_len;
  if (nhb__srv_buf_append(&q->buf, value, value_len) < 0) return NHB_ENOMEM;
  nhb__srv_req_note_header(q, q->nhdrs - 1);
  return 0;
}

void nhb__srv_req_note_url(nhb__srv_req* q, const nhb_server* s) {
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
  size_t dlen = s->debug_path_len;
  if (path_len == dlen) {
    q->is_debug = dlen && memcmp(url, s->debug_path, dlen) == 0;
  } else {
    /* A subtree ("/dbg/") covers the paths under it but not those under
     * "/dbg/echo/", which Fortio routes to the echo. */
    q->is_debug = s->debug_subtree && path_len > dlen && memcmp(url, s->debug_path, dlen) == 0 &&
                  !(path_len >= dlen + 5 && memcmp(url + dlen, "echo/", 5) == 0);
  }
}

int nhb__srv_req_forwarded(const nhb_server* s, const nhb__srv_req* q) {
  size_t plen = s->forward_prefix_len;
  if (!plen || q->url_len == 0) return 0;
  const char* url = q->buf.p + q->url_off;
  const char* mark = memchr(url, '?', q->url_len);
  size_t path_len = mark ? (size_t)(mark - url) : q->url_len;
  if (path_len >= plen && memcmp(url, s->forward_prefix, plen) == 0) return 1;
  /* "/fortio" for "/fortio/": the forwarded server redirects it. */
  return s->forward_prefix[plen - 1] == '/' && path_len == plen - 1 && memcmp(url, s->forward_prefix, plen - 1) == 0;
}

static int value_has_token(const char* v, size_t len, const char* token, size_t tlen) {
  for (size_t i = 0; i + tlen <= len; i++)
    if (strncasecmp(v + i, token, tlen) == 0) return 1;
  return 0;
}

void nhb__srv_req_note_header(nhb__srv_req* q, size_t i) {
  const nhb__srv_hdr_pos* h = &q->hdrs[i];
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
