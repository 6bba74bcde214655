/* session_h1.c: the HTTP/1.1 protocol session, parsing responses with llhttp.
 *
 * One request is in flight per connection (no pipelining, as in Nighthawk),
 * so the request being answered is always the connection's only slot. The
 * request bytes were rendered once for the whole run, so sending is a single
 * write of shared memory. llhttp's callbacks only add up sizes; the parser is
 * paused at the end of each response so the pool can act on the response
 * outside the parser.
 */
#include "client.h"

#define CONN_OF(parser) ((nhb__conn*)(parser)->data)

static int h1_on_message_begin(llhttp_t* p) {
  nhb__conn* c = CONN_OF(p);
  c->header_bytes = 0;
  c->body_bytes = 0;
  return 0;
}

/* Header size is counted as Envoy's HeaderMap::byteSize() counts it (names
 * plus values), so that it matches Nighthawk's response_header_size. */
static int h1_on_header_bytes(llhttp_t* p, const char* at, size_t len) {
  NHB__UNUSED(at);
  CONN_OF(p)->header_bytes += len;
  return 0;
}

static int h1_on_headers_complete(llhttp_t* p) {
  nhb__conn* c = CONN_OF(p);
  int status = llhttp_get_status_code(p);
  /* Returning 1 tells llhttp that this response has no body. llhttp leaves it
   * to the caller to know which ones: responses to HEAD, 1xx, 204 and 304
   * (RFC 9112 section 6.3), whatever their Content-Length says. */
  if (c->worker->run->config.head_request || status < 200 || status == 204 || status == 304) return 1;
  return 0;
}

static int h1_on_body(llhttp_t* p, const char* at, size_t len) {
  NHB__UNUSED(at);
  CONN_OF(p)->body_bytes += len;
  return 0;
}

static int h1_on_message_complete(llhttp_t* p) {
  nhb__conn* c = CONN_OF(p);
  int status = llhttp_get_status_code(p);
  /* Interim responses (100 Continue, 103 Early Hints) precede the real one. */
  if (status >= 100 && status < 200 && status != 101) return 0;
  c->keep_alive = llhttp_should_keep_alive(p);
  if (!c->keep_alive) c->worker->stats.counters[NHB_CTR_UPSTREAM_CX_CLOSE_NOTIFY]++;
  c->response_done = 1;
  return HPE_PAUSED;
}

static const llhttp_settings_t h1_settings = {
    .on_message_begin = h1_on_message_begin,
    .on_header_field = h1_on_header_bytes,
    .on_header_value = h1_on_header_bytes,
    .on_headers_complete = h1_on_headers_complete,
    .on_body = h1_on_body,
    .on_message_complete = h1_on_message_complete,
};

static int h1_open(nhb__conn* c) {
  llhttp_init(&c->parser, HTTP_RESPONSE, &h1_settings);
  c->parser.data = c;
  c->response_done = 0;
  c->keep_alive = 1;
  return 0;
}

static int h1_send(nhb__conn* c, nhb__slot* s) {
  NHB__UNUSED(s);
  const nhb_client_config* cfg = &c->worker->run->config;
  c->response_done = 0;
  return c->transport->write(c, cfg->request, cfg->request_len);
}

/* Ends the response that the parser just completed. */
static int h1_finish_response(nhb__conn* c) {
  int status = llhttp_get_status_code(&c->parser);
  c->response_done = 0;
  /* A response that arrives before the request was fully written means the
   * server did not read all of it: the connection cannot be reused. */
  if (c->write_pending) c->keep_alive = 0;
  nhb__slot* s = c->slots;
  s->header_bytes = c->header_bytes;
  s->body_bytes = c->body_bytes;
  nhb__conn_response(c, s, status);
  return 0;
}

static int h1_on_data(nhb__conn* c, const char* data, size_t len) {
  if (c->nactive == 0) {
    /* Bytes with no request in flight: the server is broken. */
    return NHB_EPROTO;
  }
  llhttp_errno_t err = llhttp_execute(&c->parser, data, len);
  if (err == HPE_OK) return 0;
  if (err == HPE_PAUSED && c->response_done) {
    const char* pos = llhttp_get_error_pos(&c->parser);
    llhttp_resume(&c->parser);
    /* Anything after the response is a response nobody asked for. */
    if (pos != NULL && pos < data + len) return NHB_EPROTO;
    return h1_finish_response(c);
  }
  return NHB_EPROTO;
}

static int h1_on_eof(nhb__conn* c, int err) {
  if (c->nactive == 0) return 0;
  if (err != UV_EOF) return err;
  llhttp_errno_t end = llhttp_finish(&c->parser);
  if ((end == HPE_OK || end == HPE_PAUSED) && c->response_done) {
    /* A close-delimited body ended with the connection. */
    c->keep_alive = 0;
    return h1_finish_response(c);
  }
  return NHB_EPROTO;
}

const nhb__session_vtable nhb__session_h1 = {
    "http/1.1", h1_open, h1_send, h1_on_data, h1_on_eof, NULL, NULL, NULL,
};
