/* server_respond.c: the responses the test server builds per request.
 *
 * A request's response is built once, as a protocol-independent nhb__srv_reply
 * (status, headers, body pieces, delay, close), which HTTP/1.1 renders into a
 * head and queues (here) and HTTP/2 turns into a HEADERS frame and a data
 * source (server_h2.c). The common HTTP/1.1 response does not come here at
 * all: it is pre-rendered once (nhb__srv_render_canned) and shared.
 *
 * Options are merged in this order: static Nighthawk options, then the
 * request's Nighthawk JSON over them (scalars replace, response_headers
 * append), then Fortio's parameters (the request's, else the
 * echo_default_params ones, each parameter on its own; or, with
 * echo_defaults_no_query, the defaults only for a URI without '?').
 *
 * The body is chosen as: Fortio `size` if drawn, else Nighthawk
 * response_body_size if set, else the request body (echo); Nighthawk's
 * echo_request_headers appends a dump of the request head to any of them.
 * Nighthawk's delay and Fortio's `delay` add up.
 *
 * Dynamic bytes are written into the caller's buffer; bodies made of 'a'
 * bytes or of the random payload are not copied but referenced in the
 * server's shared regions.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/un.h>

#include "server/server_internal.h"

#include <arpa/inet.h>
#include <netinet/in.h>

static const char* reason_phrase(unsigned status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 203: return "Non-Authoritative Information";
    case 204: return "No Content";
    case 205: return "Reset Content";
    case 206: return "Partial Content";
    case 300: return "Multiple Choices";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 303: return "See Other";
    case 304: return "Not Modified";
    case 307: return "Temporary Redirect";
    case 308: return "Permanent Redirect";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 402: return "Payment Required";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 406: return "Not Acceptable";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 411: return "Length Required";
    case 412: return "Precondition Failed";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 416: return "Range Not Satisfiable";
    case 417: return "Expectation Failed";
    case 418: return "I'm a teapot";
    case 421: return "Misdirected Request";
    case 422: return "Unprocessable Content";
    case 425: return "Too Early";
    case 426: return "Upgrade Required";
    case 428: return "Precondition Required";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 451: return "Unavailable For Legal Reasons";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    case 507: return "Insufficient Storage";
    case 511: return "Network Authentication Required";
    default:
      if (status >= 200 && status < 300) return "Success";
      if (status >= 300 && status < 400) return "Redirection";
      if (status >= 400 && status < 500) return "Client Error";
      return "Server Error";
  }
}

const char* nhb__srv_reason(unsigned status) { return reason_phrase(status); }

static const nhb__srv_header server_header = {{"Server", 6}, {"nhbench", 7}, 0};
static const nhb__srv_header text_plain = {{"Content-Type", 12}, {"text/plain", 10}, 0};

static int same_name(const nhb__srv_header* a, const nhb__srv_header* b) {
  return a->name.len == b->name.len && strncasecmp(a->name.p, b->name.p, a->name.len) == 0;
}

int nhb__srv_headers_emit(const nhb__srv_headers* h, int (*emit)(void* ctx, const nhb__srv_header* hd), void* ctx) {
  const nhb__srv_header* lists[4] = {&server_header, h->list[0], h->list[1], h->list[2]};
  size_t counts[4] = {1, h->list[0] ? h->n[0] : 0, h->list[1] ? h->n[1] : 0, h->list[2] ? h->n[2] : 0};
  for (int l = 0; l < 4; l++) {
    for (size_t i = 0; i < counts[l]; i++) {
      const nhb__srv_header* hd = &lists[l][i];
      /* Skipped when a later header of the same name replaces it. */
      int replaced = 0;
      for (int l2 = l; l2 < 4 && !replaced; l2++)
        for (size_t j = (l2 == l ? i + 1 : 0); j < counts[l2] && !replaced; j++)
          replaced = !lists[l2][j].append && same_name(hd, &lists[l2][j]);
      if (replaced) continue;
      int r = emit(ctx, hd);
      if (r < 0) return r;
    }
  }
  for (size_t i = 0; i < h->nextra; i++) {
    int r = emit(ctx, &h->extra[i]);
    if (r < 0) return r;
  }
  return 0;
}

/* ---- HTTP/1.1 rendering ------------------------------------------------------------ */

static int h1_header(void* ctx, const nhb__srv_header* h) {
  nhb__srv_buf* b = ctx;
  if (nhb__srv_buf_reserve(b, h->name.len + h->value.len + 4) < 0) return NHB_ENOMEM;
  memcpy(b->p + b->len, h->name.p, h->name.len);
  b->len += h->name.len;
  memcpy(b->p + b->len, ": ", 2);
  b->len += 2;
  memcpy(b->p + b->len, h->value.p, h->value.len);
  b->len += h->value.len;
  memcpy(b->p + b->len, "\r\n", 2);
  b->len += 2;
  return 0;
}

int nhb__srv_render_head(nhb__srv_buf* b, unsigned status, int64_t content_length, int mode, const nhb__srv_headers* h) {
  if (nhb__srv_buf_printf(b, "HTTP/1.1 %u %s\r\n", status, reason_phrase(status)) < 0) return NHB_ENOMEM;
  /* The extras go after the framing headers, as they always have. */
  nhb__srv_headers main = *h;
  main.nextra = 0;
  if (nhb__srv_headers_emit(&main, h1_header, b) < 0) return NHB_ENOMEM;
  if (content_length >= 0 && nhb__srv_buf_printf(b, "Content-Length: %lld\r\n", (long long)content_length) < 0)
    return NHB_ENOMEM;
  if (mode == NHB__SRV_MODE_CLOSE && nhb__srv_buf_append(b, "Connection: close\r\n", 19) < 0) return NHB_ENOMEM;
  if (mode == NHB__SRV_MODE_KEEPALIVE && nhb__srv_buf_append(b, "Connection: keep-alive\r\n", 24) < 0)
    return NHB_ENOMEM;
  for (size_t i = 0; i < h->nextra; i++)
    if (h1_header(b, &h->extra[i]) < 0) return NHB_ENOMEM;
  return nhb__srv_buf_append(b, "\r\n", 2);
}

/* Detaches a rendered buffer as a malloc'd block of exactly its length. */
static int take(nhb__srv_buf* b, char** out, size_t* out_len) {
  *out = b->p;
  *out_len = b->len;
  b->p = NULL;
  b->len = b->cap = 0;
  return 0;
}

static int canned_error(unsigned status, const char* text, char** out, size_t* out_len) {
  nhb__srv_buf b = {0};
  size_t n = strlen(text);
  nhb__srv_headers h = {{NULL, NULL, NULL}, {0, 0, 0}, &text_plain, 1};
  if (nhb__srv_render_head(&b, status, (int64_t)n, NHB__SRV_MODE_CLOSE, &h) < 0 || nhb__srv_buf_append(&b, text, n) < 0) {
    nhb__srv_buf_free(&b);
    return NHB_ENOMEM;
  }
  return take(&b, out, out_len);
}

int nhb__srv_render_canned(nhb_server* s) {
  uint64_t size = s->nh.has_body_size ? s->nh.body_size : 0;
  nhb__srv_headers h = {{s->nh.headers, NULL, NULL}, {s->nh.nheaders, 0, 0}, NULL, 0};
  for (int mode = 0; mode < 3; mode++) {
    for (int head = 0; head < 2; head++) {
      nhb__srv_buf b = {0};
      if (nhb__srv_render_head(&b, 200, (int64_t)size, mode, &h) < 0 ||
          (!head && nhb__srv_buf_append(&b, s->a_region, size) < 0)) {
        nhb__srv_buf_free(&b);
        return NHB_ENOMEM;
      }
      take(&b, &s->ok[mode][head], &s->ok_len[mode][head]);
    }
  }
  if (s->config.error_body_every != 0) {
    static const char err_body[] = "{\"error\":\"injected\"}";
    static const nhb__srv_header err_hd = {{"x-nhbench-error", 15}, {"1", 1}, 0};
    nhb__srv_headers eh = {{s->nh.headers, NULL, NULL}, {s->nh.nheaders, 0, 0}, &err_hd, 1};
    size_t n = sizeof(err_body) - 1;
    for (int mode = 0; mode < 3; mode++) {
      for (int head = 0; head < 2; head++) {
        nhb__srv_buf b = {0};
        if (nhb__srv_render_head(&b, 200, (int64_t)n, mode, &eh) < 0 ||
            (!head && nhb__srv_buf_append(&b, err_body, n) < 0)) {
          nhb__srv_buf_free(&b);
          return NHB_ENOMEM;
        }
        take(&b, &s->err_ok[mode][head], &s->err_ok_len[mode][head]);
      }
    }
  }
  if (canned_error(400, "malformed request\n", &s->canned_400, &s->canned_400_len) < 0 ||
      canned_error(413, "request body too large\n", &s->canned_413, &s->canned_413_len) < 0 ||
      canned_error(431, "request header fields too large\n", &s->canned_431, &s->canned_431_len) < 0 ||
      canned_error(505, "this server speaks only HTTP/2 here\n", &s->canned_505, &s->canned_505_len) < 0)
    return NHB_ENOMEM;
  return 0;
}

/* ---- building blocks --------------------------------------------------------------- */

static nhb__srv_piece out_piece(size_t off, size_t len) {
  nhb__srv_piece p = {NULL, off, len};
  return p;
}

static nhb__srv_piece ext_piece(const char* p, size_t len) {
  nhb__srv_piece x = {p, 0, len};
  return x;
}

static void reply_init(nhb__srv_reply* r, unsigned status) {
  memset(&r->h, 0, sizeof(r->h));
  r->status = status;
  r->close = 0;
  r->no_body = 0;
  r->delay_ns = 0;
  r->h.extra = r->extra;
  r->nbody = 0;
  r->body_len = 0;
}

static void add_extra(nhb__srv_reply* r, const char* name, size_t name_len, const char* value, size_t value_len) {
  nhb__srv_header* h = &r->extra[r->h.nextra++];
  h->name.p = name;
  h->name.len = name_len;
  h->value.p = value;
  h->value.len = value_len;
  h->append = 1;
}

/* Gzips the body pieces into `out`, replacing them with one piece. */
static int gzip_body(nhb__srv_worker* w, nhb__srv_buf* out, nhb__srv_piece* body, int* nbody) {
  if (!w->z_ready) {
    memset(&w->z, 0, sizeof(w->z));
    /* windowBits 15 + 16: a gzip wrapper rather than zlib's. */
    if (deflateInit2(&w->z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
      return NHB_ENOMEM;
    w->z_ready = 1;
  } else if (deflateReset(&w->z) != Z_OK) {
    return NHB_ENOMEM;
  }
  size_t total = 0;
  for (int i = 0; i < *nbody; i++) total += body[i].len;
  size_t bound = deflateBound(&w->z, (uLong)total) + 64;
  if (nhb__srv_buf_reserve(out, bound) < 0) return NHB_ENOMEM;
  size_t start = out->len;
  w->z.next_out = (Bytef*)out->p + start;
  w->z.avail_out = (uInt)bound;
  for (int i = 0; i < *nbody; i++) {
    /* Resolved after the reserve, which may have moved `out`. */
    w->z.next_in = (Bytef*)(body[i].ext ? body[i].ext : out->p + body[i].off);
    w->z.avail_in = (uInt)body[i].len;
    while (w->z.avail_in > 0)
      if (deflate(&w->z, Z_NO_FLUSH) != Z_OK) return NHB_ENOMEM;
  }
  if (deflate(&w->z, Z_FINISH) != Z_STREAM_END) return NHB_ENOMEM;
  size_t produced = bound - w->z.avail_out;
  out->len = start + produced;
  body[0] = out_piece(start, produced);
  *nbody = 1;
  return 0;
}

int nhb__srv_reply_text(nhb__srv_reply* r, nhb__srv_buf* out, unsigned status, const char* prefix, const char* text) {
  reply_init(r, status);
  size_t body_off = out->len;
  if (nhb__srv_buf_printf(out, "%s%s", prefix, text) < 0) return NHB_ENOMEM;
  r->body[0] = out_piece(body_off, out->len - body_off);
  r->nbody = 1;
  r->body_len = out->len - body_off;
  r->extra[0] = text_plain;
  r->h.nextra = 1;
  return 0;
}

/* Nighthawk's echo_request_headers text: after the body, "\nRequest
 * Headers:\n" and one "'name', 'value'" line per header, names lowercased
 * as Envoy's HTTP/1 codec shows them, pseudo-headers first. */
static int dump_headers(const nhb__srv_req* q, nhb__srv_buf* out) {
  if (nhb__srv_buf_printf(out, "\nRequest Headers:\n':method', '%.*s'\n':path', '%.*s'\n", (int)q->method_len,
                          q->method, (int)q->url_len,
                          /* An empty URL may leave the buffer unallocated (NULL): no offset
                           * may be applied to it then, not even zero. */
                          q->url_len ? q->buf.p + q->url_off : "") < 0)
    return NHB_ENOMEM;
  for (size_t i = 0; i < q->nhdrs; i++) {
    const nhb__srv_hdr_pos* h = &q->hdrs[i];
    if (nhb__srv_buf_reserve(out, h->name_len + h->value_len + 8) < 0) return NHB_ENOMEM;
    char* d = out->p + out->len;
    *d++ = '\'';
    for (size_t k = 0; k < h->name_len; k++) {
      char ch = q->buf.p[h->name_off + k];
      *d++ = (ch >= 'A' && ch <= 'Z') ? (char)(ch + 32) : ch;
    }
    memcpy(d, "', '", 4);
    d += 4;
    memcpy(d, q->buf.p + h->value_off, h->value_len);
    d += h->value_len;
    *d++ = '\'';
    *d++ = '\n';
    out->len = (size_t)(d - out->p);
  }
  return 0;
}

static void peer_name(nhb__srv_conn* c, char* out, size_t out_len) {
  struct sockaddr_storage ss;
  int len = sizeof(ss);
  snprintf(out, out_len, "unix socket");
  if (c->proto == NHB__SRV_PROTO_H3) {
    nhb__srv_h3_peer(c, out, out_len);
    return;
  }
  if (c->is_pipe || uv_tcp_getpeername(&c->h.tcp, (struct sockaddr*)&ss, &len) != 0) return;
  char host[INET6_ADDRSTRLEN] = "?";
  if (ss.ss_family == AF_INET) {
    const struct sockaddr_in* in = (const struct sockaddr_in*)&ss;
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    snprintf(out, out_len, "%s:%u", host, ntohs(in->sin_port));
  } else if (ss.ss_family == AF_INET6) {
    const struct sockaddr_in6* in6 = (const struct sockaddr_in6*)&ss;
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    snprintf(out, out_len, "[%s]:%u", host, ntohs(in6->sin6_port));
  }
}

/* /debug: the request as text, like Fortio's debug handler. */
static int reply_debug(nhb__srv_conn* c, const nhb__srv_req* q, nhb__srv_buf* out, uint64_t now, nhb__srv_reply* r) {
  nhb_server* s = c->w->server;
  char peer[80];
  peer_name(c, peer, sizeof(peer));
  reply_init(r, 200);
  size_t body_off = out->len;
  double up = (double)(now - s->start_ns) / 1e9;
  if (nhb__srv_buf_printf(out,
                          "nhbench %s echo debug server up for %.3fs on %s - request from %s%s\n\n"
                          "%.*s %.*s HTTP/%u.%u\n\nheaders:\n\n",
                          nhb_version(), up, s->hostname, peer,
                          c->tls ? " (TLS)" : c->proto == NHB__SRV_PROTO_H3 ? " (QUIC)" : "", (int)q->method_len,
                          q->method, (int)q->url_len, q->buf.p + q->url_off, q->http_major, q->http_minor) < 0)
    return NHB_ENOMEM;
  for (size_t i = 0; i < q->nhdrs; i++) {
    const nhb__srv_hdr_pos* h = &q->hdrs[i];
    if (nhb__srv_buf_printf(out, "%.*s: %.*s\n", (int)h->name_len, q->buf.p + h->name_off, (int)h->value_len,
                            q->buf.p + h->value_off) < 0)
      return NHB_ENOMEM;
  }
  if (q->body_len < q->body_bytes) {
    if (nhb__srv_buf_printf(out, "\nbody: %llu bytes (first %zu shown)\n\n", (unsigned long long)q->body_bytes,
                            q->body_len) < 0)
      return NHB_ENOMEM;
  } else if (nhb__srv_buf_printf(out, "\nbody: %llu bytes\n\n", (unsigned long long)q->body_bytes) < 0) {
    return NHB_ENOMEM;
  }
  if (nhb__srv_buf_append(out, q->buf.p + q->body_off, q->body_len) < 0) return NHB_ENOMEM;
  if (s->env_dump && q->has_query) {
    const char* url = q->buf.p + q->url_off;
    const char* mark = memchr(url, '?', q->url_len);
    size_t qlen = q->url_len - (size_t)(mark + 1 - url);
    const char* hash = memchr(mark + 1, '#', qlen);
    if (hash) qlen = (size_t)(hash - (mark + 1));
    if (nhb__srv_query_arg_is(mark + 1, qlen, "env", "dump") &&
        (nhb__srv_buf_append(out, "\n\nenvironment:\n\n", 16) < 0 ||
         nhb__srv_buf_append(out, s->env_dump, s->env_dump_len) < 0))
      return NHB_ENOMEM;
  }
  r->body[0] = out_piece(body_off, out->len - body_off);
  r->nbody = 1;
  r->body_len = out->len - body_off;
  add_extra(r, "Content-Type", 12, "text/plain; charset=utf-8", 25);
  return 0;
}

/* ---- the dynamic path -------------------------------------------------------------- */

static void take_default(nhb__srv_choices* mine, const nhb__srv_choices* dflt) {
  if (!mine->present) *mine = *dflt;
}

int nhb__srv_reply_build(nhb__srv_conn* c, nhb__srv_req* q, nhb__srv_buf* out, uint64_t now, nhb__srv_reply* r) {
  nhb__srv_worker* w = c->w;
  nhb_server* s = w->server;
  char why[256];
  if (!now) now = nhb__now_ns();
  uint64_t prev = w->last_req_ns;
  w->last_req_ns = now;

  /* Nighthawk: the static options, the request's JSON merged over them. */
  nhb__srv_nh_opts nh = s->nh;
  nhb__srv_nh_opts rq;
  memset(&rq, 0, sizeof(rq));
  if (q->nh_idx >= 0) {
    const nhb__srv_hdr_pos* h = &q->hdrs[q->nh_idx];
    if (nhb__srv_nh_parse(q->buf.p + h->value_off, h->value_len, &rq, &w->nh_arena, why, sizeof(why)) < 0)
      return nhb__srv_reply_text(r, out, 500, "test-server didn't understand the request: ", why);
    if (rq.has_body_size) nh.has_body_size = 1, nh.body_size = rq.body_size;
    if (rq.has_echo_headers) nh.has_echo_headers = 1, nh.echo_headers = rq.echo_headers;
    if (rq.delay_kind) {
      nh.delay_kind = rq.delay_kind;
      nh.static_delay_ns = rq.static_delay_ns;
      nh.linear_min_ns = rq.linear_min_ns;
      nh.linear_factor_ns = rq.linear_factor_ns;
    }
    if (rq.has_emit) nh.has_emit = 1, nh.emit_header = rq.emit_header;
  }
  if (q->is_debug) {
    if (q->is_debug == NHB__SRV_PATH_FORWARD_HERE)
      return nhb__srv_reply_text(r, out, 421, s->forward_prefix,
                                 ": forwarded on plain-text HTTP/1.x connections only (not HTTP/2, TLS or a Unix socket)\n");
    if (q->is_debug == NHB__SRV_PATH_FORWARD_BUSY)
      return nhb__srv_reply_text(r, out, 503, s->forward_prefix,
                                 ": not forwarded: a response was still on its way on this connection (send the request "
                                 "after it, or on a new connection)\n");
    return reply_debug(c, q, out, now, r);
  }

  /* Fortio: the request's parameters, the defaults for those it lacks. */
  nhb__srv_echo_opts e;
  memset(&e, 0, sizeof(e));
  if (q->has_query) {
    const char* url = q->buf.p + q->url_off;
    const char* mark = memchr(url, '?', q->url_len);
    size_t qlen = q->url_len - (size_t)(mark + 1 - url);
    /* A fragment is not part of the query. */
    const char* hash = memchr(mark + 1, '#', qlen);
    if (hash) qlen = (size_t)(hash - (mark + 1));
    if (nhb__srv_echo_parse(mark + 1, qlen, s->config.max_echo_delay_ns, s->config.max_payload_bytes, &e,
                            &w->echo_arena, why, sizeof(why)) < 0)
      return nhb__srv_reply_text(r, out, 400, "", why);
  }
  /* Fortio's rule leaves a request with any '?' to its own parameters. */
  if (s->has_echo_defaults && !(q->has_query && s->config.echo_defaults_no_query)) {
    const nhb__srv_echo_opts* d = &s->echo_defaults;
    take_default(&e.delay, &d->delay);
    take_default(&e.status, &d->status);
    take_default(&e.size, &d->size);
    take_default(&e.close, &d->close);
    take_default(&e.gzip, &d->gzip);
    if (!e.has_headers && d->has_headers) e.has_headers = 1, e.headers = d->headers, e.nheaders = d->nheaders;
    if (!e.has_stall && d->has_stall) e.has_stall = 1, e.stall_ns = d->stall_ns;
  }
  /* Independent draws, one per parameter, as Fortio does. */
  unsigned status = e.status.present ? (unsigned)nhb__srv_choose(&e.status, nhb__srv_rand_pct(w), 200) : 200;
  int64_t size = e.size.present ? nhb__srv_choose(&e.size, nhb__srv_rand_pct(w), -1) : -1;
  uint64_t delay = e.delay.present ? (uint64_t)nhb__srv_choose(&e.delay, nhb__srv_rand_pct(w), 0) : 0;
  int close = e.close.present && nhb__srv_choose(&e.close, nhb__srv_rand_pct(w), 0);
  int gzip = e.gzip.present && nhb__srv_choose(&e.gzip, nhb__srv_rand_pct(w), 0) && q->accept_gzip;
  if (e.has_stall) nhb__srv_stall_request(w, now, e.stall_ns);
  uint64_t nh_delay = 0;
  if (nh.delay_kind == NHB__SRV_DELAY_STATIC) {
    nh_delay = nh.static_delay_ns;
  } else if (nh.delay_kind == NHB__SRV_DELAY_LINEAR) {
    /* Nighthawk's model of an overloaded server: the delay grows with the
     * requests in progress on this worker, this one included. Saturating,
     * as a factor from the request header may be anything. */
    uint64_t n = (uint64_t)w->delayed + 1;
    nh_delay = nh.linear_factor_ns > (UINT64_MAX - nh.linear_min_ns) / n ? UINT64_MAX
                                                                         : nh.linear_min_ns + nh.linear_factor_ns * n;
  }
  /* Clamped, as Fortio clamps `delay`: otherwise a request could hold its
   * connection (and a descriptor) for as long as it likes. */
  if (nh_delay > s->config.max_delay_ns) nh_delay = s->config.max_delay_ns;
  delay += nh_delay;
  reply_init(r, status);
  r->close = close;
  r->delay_ns = delay;

  /* The body. */
  int no_body = status == 204 || status == 304;
  r->no_body = no_body;
  if (!no_body) {
    if (size >= 0) {
      r->body[r->nbody++] = ext_piece(s->payload, (size_t)size);
    } else if (nh.has_body_size) {
      r->body[r->nbody++] = ext_piece(s->a_region, nh.body_size);
    } else if (q->body_len) {
      size_t off = out->len;
      if (nhb__srv_buf_append(out, q->buf.p + q->body_off, q->body_len) < 0) return NHB_ENOMEM;
      r->body[r->nbody++] = out_piece(off, q->body_len);
    }
    if (nh.has_echo_headers && nh.echo_headers) {
      size_t off = out->len;
      if (dump_headers(q, out) < 0) return NHB_ENOMEM;
      nhb__srv_piece* last = r->nbody ? &r->body[r->nbody - 1] : NULL;
      if (last && !last->ext && last->off + last->len == off)
        last->len += out->len - off; /* adjacent in `out`: one piece */
      else
        r->body[r->nbody++] = out_piece(off, out->len - off);
    }
    if (gzip && gzip_body(w, out, r->body, &r->nbody) < 0) return NHB_ENOMEM;
  }
  for (int i = 0; i < r->nbody; i++) r->body_len += r->body[i].len;

  /* The headers: the options' lists, then the server's extras. */
  r->h.list[0] = nh.headers;
  r->h.n[0] = nh.nheaders;
  r->h.list[1] = rq.headers;
  r->h.n[1] = rq.nheaders;
  r->h.list[2] = e.has_headers ? e.headers : NULL;
  r->h.n[2] = e.nheaders;
  if (nh.has_emit && prev != 0 && nh.emit_header.len < 256) {
    int n = snprintf(r->extra_buf, sizeof(r->extra_buf), "%llu", (unsigned long long)(now - prev));
    add_extra(r, nh.emit_header.p, nh.emit_header.len, r->extra_buf, (size_t)n);
  }
  if (gzip && !no_body) {
    add_extra(r, "Content-Encoding", 16, "gzip", 4);
    add_extra(r, "Vary", 4, "Accept-Encoding", 15);
  }
  /* --error-body-every over HTTP/2 and HTTP/3: the requests that HTTP/1.1
   * answers with its pre-rendered 200 (server_h1.c's fast path, which injects
   * there and never gets here) share the worker's count and get the same
   * error body and header. */
  if (NHB__UNLIKELY(s->config.error_body_every != 0) && status == 200 && !s->static_dynamic && !q->has_query &&
      q->nh_idx < 0 && (q->body_bytes == 0 || s->nh.has_body_size) && ++w->error_body_n >= s->config.error_body_every) {
    static const char err_body[] = "{\"error\":\"injected\"}";
    w->error_body_n = 0;
    r->nbody = 1;
    r->body[0] = ext_piece(err_body, sizeof(err_body) - 1);
    r->body_len = sizeof(err_body) - 1;
    add_extra(r, "x-nhbench-error", 15, "1", 1);
    nhb__srv_bump(&w->counters.error_bodies, 1);
  }
  return 0;
}

/* ---- HTTP/1.1 ---------------------------------------------------------------------- */

/* Queues head + body pieces as one response. */
static int queue_response(nhb__srv_conn* c, unsigned status, int mode, int head_only, uint64_t now, uint64_t delay_ns,
                          size_t head_off, const nhb__srv_piece* body, int nbody) {
  nhb__srv_worker* w = c->w;
  nhb_server* s = w->server;
  nhb__srv_resp r;
  memset(&r, 0, sizeof(r));
  r.status = (uint16_t)status;
  r.close = mode == NHB__SRV_MODE_CLOSE;
  r.p[0] = out_piece(head_off, c->out.len - head_off);
  r.npieces = 1;
  if (!head_only)
    for (int i = 0; i < nbody; i++) r.p[r.npieces++] = body[i];
  r.deadline_ns = delay_ns ? now + delay_ns : 0;
  /* Stalls hold HTTP responses; the admin endpoint keeps answering. */
  if (c->kind == NHB__SRV_CONN_HTTP && nhb__srv_stall_possible(s)) {
    uint64_t t = r.deadline_ns ? r.deadline_ns : now;
    uint64_t release = nhb__srv_stall_release(s, t);
    if (release > t) r.deadline_ns = release;
  }
  /* Counted when it is written (nhb__srv_conn_flush). */
  return nhb__srv_h1_push(c, &r);
}

static int queue_reply(nhb__srv_conn* c, const nhb__srv_reply* r, int mode, int head_only, uint64_t now) {
  if (r->close) mode = NHB__SRV_MODE_CLOSE;
  size_t head_off = c->out.len;
  if (nhb__srv_render_head(&c->out, r->status, r->no_body ? -1 : (int64_t)r->body_len, mode, &r->h) < 0)
    return NHB_ENOMEM;
  return queue_response(c, r->status, mode, head_only, now, r->delay_ns, head_off, r->body, r->nbody);
}

int nhb__srv_respond(nhb__srv_conn* c, int mode, int head_only, uint64_t now) {
  if (NHB__UNLIKELY(c->w->server->sse != NULL)) return nhb__srv_sse_respond(c, mode, head_only, now);
  nhb__srv_req* q = &c->req;
  q->method = llhttp_method_name((llhttp_method_t)c->parser.method);
  q->method_len = strlen(q->method);
  q->http_major = c->parser.http_major;
  q->http_minor = c->parser.http_minor;
  nhb__srv_reply r;
  if (nhb__srv_reply_build(c, q, &c->out, now, &r) < 0) return NHB_ENOMEM;
  return queue_reply(c, &r, mode, head_only, now);
}

/* ---- admin ------------------------------------------------------------------------- */

void nhb__srv_render_stats_json(const nhb_server* s, nhb__srv_buf* b) {
  nhb_server_stats st;
  nhb_server_stats_get(s, &st);
  /* Keys in NHB_SERVER_STAT_MAP's order; "status" is an object of the
   * status codes that occurred. */
  const char* sep = "{";
#define COUNT(name)                                                                        \
  nhb__srv_buf_printf(b, "%s\"" #name "\": %llu", sep, (unsigned long long)st.name); \
  sep = ", ";
#define STATUS(name)                                                                    \
  nhb__srv_buf_printf(b, "%s\"" #name "\": {", sep);                                   \
  for (int i = 0, n = 0; i < NHB_SERVER_STATUS_MAX; i++) {                              \
    if (!st.name[i]) continue;                                                          \
    nhb__srv_buf_printf(b, "%s\"%d\": %llu", n++ ? ", " : "", i, (unsigned long long)st.name[i]); \
  }                                                                                     \
  nhb__srv_buf_printf(b, "}");                                                          \
  sep = ", ";
  NHB_SERVER_STAT_MAP(COUNT, STATUS)
#undef COUNT
#undef STATUS
  nhb__srv_buf_printf(b, "}\n");
}

int nhb__srv_respond_admin(nhb__srv_conn* c, int mode, int head_only) {
  nhb__srv_req* q = &c->req;
  const char* url = q->buf.p + q->url_off;
  const char* mark = q->url_len ? memchr(url, '?', q->url_len) : NULL;
  size_t path_len = mark ? (size_t)(mark - url) : q->url_len;
  int method = c->parser.method;
  uint64_t now = nhb__now_ns();
  nhb__srv_reply r;
  if (!(path_len == 6 && memcmp(url, "/stats", 6) == 0) || (method != HTTP_GET && method != HTTP_HEAD)) {
    if (nhb__srv_reply_text(&r, &c->out, 404, "", "not found; try GET /stats\n") < 0) return NHB_ENOMEM;
    return queue_reply(c, &r, mode, head_only, now);
  }
  reply_init(&r, 200);
  size_t body_off = c->out.len;
  nhb__srv_render_stats_json(c->w->server, &c->out);
  r.body[0] = out_piece(body_off, c->out.len - body_off);
  r.nbody = 1;
  r.body_len = c->out.len - body_off;
  add_extra(&r, "Content-Type", 12, "application/json", 16);
  return queue_reply(c, &r, mode, head_only, now);
}

/* ---- the https redirector -------------------------------------------------------- */

/* What Go's net/http (Fortio's redirector) does with a request target, so
 * that Location matches Fortio's byte for byte: a path whose bytes are all
 * valid in an encoded path is kept as sent; otherwise it is decoded and
 * encoded again (Go's url.EscapedPath()). The query is kept as sent. */
static int path_byte_valid(unsigned char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
         (ch && strchr("-._~!$&'()*+,;=:@[]/%", ch) != NULL);
}

static int path_byte_plain(unsigned char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
         (ch && strchr("-._~$&+,/:;=@", ch) != NULL);
}

static int hex_val(unsigned char ch) {
  if (ch >= '0' && ch <= '9') return ch - '0';
  if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
  if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
  return -1;
}

/* Appends one byte of the URL: percent-encoded when `hex` (a byte Go hex-
 * escapes), HTML-escaped when `html` (the body's link). */
static int url_byte(nhb__srv_buf* b, unsigned char ch, int hex, int html) {
  static const char digits[] = "0123456789ABCDEF";
  if (hex) {
    char e[3] = {'%', digits[ch >> 4], digits[ch & 15]};
    return nhb__srv_buf_append(b, e, 3);
  }
  if (html) {
    switch (ch) {
      case '&': return nhb__srv_buf_append(b, "&amp;", 5);
      case '<': return nhb__srv_buf_append(b, "&lt;", 4);
      case '>': return nhb__srv_buf_append(b, "&gt;", 4);
      case '"': return nhb__srv_buf_append(b, "&#34;", 5);
      case '\'': return nhb__srv_buf_append(b, "&#39;", 5);
      default: break;
    }
  }
  return nhb__srv_buf_append(b, &ch, 1);
}

/* "https://" + host + the target as Go's URL.String() gives it. For Location
 * (html = 0) bytes above 0x7f are hex-escaped, as Go's http.Redirect does;
 * for the body's link (html = 1) the URL is HTML-escaped instead. */
static int append_https_url(nhb__srv_buf* b, const char* host, size_t host_len, const char* t, size_t len,
                            int reencode, int html) {
  if (nhb__srv_buf_append(b, "https://", 8) < 0) return NHB_ENOMEM;
  for (size_t i = 0; i < host_len; i++)
    if (url_byte(b, (unsigned char)host[i], !html && (unsigned char)host[i] > 0x7f, html) < 0) return NHB_ENOMEM;
  const char* mark = memchr(t, '?', len);
  size_t path_len = mark ? (size_t)(mark - t) : len;
  for (size_t i = 0; i < len; i++) {
    unsigned char ch = (unsigned char)t[i];
    int hex = 0;
    if (i < path_len && reencode) {
      if (ch == '%') {
        ch = (unsigned char)(hex_val((unsigned char)t[i + 1]) << 4 | hex_val((unsigned char)t[i + 2]));
        i += 2;
      }
      hex = !path_byte_plain(ch);
    } else if (!html) {
      hex = ch > 0x7f;
    }
    if (url_byte(b, ch, hex, html) < 0) return NHB_ENOMEM;
  }
  return 0;
}

static int host_byte_ok(unsigned char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
         (ch && strchr("!$%&'()*+,-.:;=[]_~", ch) != NULL);
}

int nhb__srv_respond_redirect(nhb__srv_conn* c, int mode, int head_only) {
  nhb__srv_req* q = &c->req;
  uint64_t now = nhb__now_ns();
  nhb__srv_reply r;
  const char* t = q->url_len ? q->buf.p + q->url_off : "";
  size_t len = q->url_len;
  /* The host: the Host header (exactly one in HTTP/1.1, as Go requires), or
   * the authority of an absolute-form target, which Go prefers. */
  const char* host = "";
  size_t host_len = 0;
  int nhost = 0;
  for (size_t i = 0; i < q->nhdrs; i++) {
    const nhb__srv_hdr_pos* h = &q->hdrs[i];
    if (h->name_len == 4 && strncasecmp(q->buf.p + h->name_off, "host", 4) == 0) {
      host = q->buf.p + h->value_off;
      host_len = h->value_len;
      nhost++;
    }
  }
  const char* why = NULL;
  if (nhost > 1) why = "too many Host headers";
  else if (nhost == 0 && c->parser.http_major == 1 && c->parser.http_minor >= 1) why = "missing required Host header";
  for (size_t i = 0; i < host_len && !why; i++)
    if (!host_byte_ok((unsigned char)host[i])) why = "malformed Host header";
  const char* scheme_end = len && t[0] != '/' ? memchr(t, ':', len) : NULL;
  if (scheme_end && (size_t)(t + len - scheme_end) > 3 && memcmp(scheme_end, "://", 3) == 0) {
    const char* a = scheme_end + 3;
    const char* end = a;
    while (end < t + len && *end != '/' && *end != '?') end++;
    host = a;
    host_len = (size_t)(end - a);
  }
  /* A malformed percent-escape in the path makes Go refuse the request. */
  const char* mark = memchr(t, '?', len);
  size_t path_len = mark ? (size_t)(mark - t) : len;
  int reencode = 0;
  for (size_t i = 0; i < path_len && !why; i++) {
    unsigned char ch = (unsigned char)t[i];
    if (ch == '%' && (i + 2 >= path_len || hex_val((unsigned char)t[i + 1]) < 0 || hex_val((unsigned char)t[i + 2]) < 0))
      why = "";
    if (!path_byte_valid(ch)) reencode = 1;
  }
  if (why) {
    if (nhb__srv_reply_text(&r, &c->out, 400, *why ? "400 Bad Request: " : "400 Bad Request", why) < 0)
      return NHB_ENOMEM;
    r.close = 1;
    return queue_reply(c, &r, mode, head_only, now);
  }
  int method = c->parser.method;
  /* HEAD: the head a GET would get, its Content-Length included. */
  int with_body = method == HTTP_GET || method == HTTP_HEAD;
  reply_init(&r, 303);
  size_t loc_off = c->out.len;
  if (append_https_url(&c->out, host, host_len, t, len, reencode, 0) < 0) return NHB_ENOMEM;
  size_t loc_len = c->out.len - loc_off;
  if (with_body) {
    size_t body_off = c->out.len;
    if (nhb__srv_buf_append(&c->out, "<a href=\"", 9) < 0 ||
        append_https_url(&c->out, host, host_len, t, len, reencode, 1) < 0 ||
        nhb__srv_buf_append(&c->out, "\">See Other</a>.\n\n", 18) < 0)
      return NHB_ENOMEM;
    r.body[0] = out_piece(body_off, c->out.len - body_off);
    r.nbody = 1;
    r.body_len = c->out.len - body_off;
  }
  /* Location points into `out`: room for the whole head first, so that
   * rendering it does not move the buffer. */
  if (nhb__srv_buf_reserve(&c->out, loc_len + 256) < 0) return NHB_ENOMEM;
  if (method == HTTP_GET || method == HTTP_HEAD) add_extra(&r, "Content-Type", 12, "text/html; charset=utf-8", 24);
  add_extra(&r, "Location", 8, c->out.p + loc_off, loc_len);
  return queue_reply(c, &r, mode, head_only, now);
}
