/* server_respond.c: responses the test server renders per request.
 *
 * A request takes this path when something about it is dynamic: a query
 * string (Fortio's echo parameters), the x-nighthawk-test-server-config
 * header, /debug, a body to echo, or static options that differ per request.
 * The options are merged in this order: static Nighthawk options, then the
 * request's Nighthawk JSON over them (scalars replace, response_headers
 * append), then Fortio's parameters (the request's, else the
 * echo_default_params ones, each parameter on its own).
 *
 * The body is chosen as: Fortio `size` if drawn, else Nighthawk
 * response_body_size if set, else the request body (echo); Nighthawk's
 * echo_request_headers appends a dump of the request head to any of them.
 * Nighthawk's delay and Fortio's `delay` add up.
 *
 * Rendering writes into the connection's `out` buffer; bodies made of 'a'
 * bytes or of the random payload are not copied but referenced in the
 * server's shared regions.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/un.h>

#include "server_internal.h"

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

static const srv_header server_header = {{"Server", 6}, {"nhbench", 7}, 0};

static int same_name(const srv_header* a, const srv_header* b) {
  return a->name.len == b->name.len && strncasecmp(a->name.p, b->name.p, a->name.len) == 0;
}

int nhb__srv_render_head(srv_buf* b, unsigned status, int64_t content_length, int mode, const srv_header* h1,
                         size_t n1, const srv_header* h2, size_t n2, const srv_header* h3, size_t n3,
                         const char* extra) {
  const srv_header* lists[4] = {&server_header, h1, h2, h3};
  size_t counts[4] = {1, h1 ? n1 : 0, h2 ? n2 : 0, h3 ? n3 : 0};
  if (nhb__srv_buf_printf(b, "HTTP/1.1 %u %s\r\n", status, reason_phrase(status)) < 0) return NHB_ENOMEM;
  for (int l = 0; l < 4; l++) {
    for (size_t i = 0; i < counts[l]; i++) {
      const srv_header* h = &lists[l][i];
      /* Skipped when a later header of the same name replaces it. */
      int replaced = 0;
      for (int l2 = l; l2 < 4 && !replaced; l2++)
        for (size_t j = (l2 == l ? i + 1 : 0); j < counts[l2] && !replaced; j++)
          replaced = !lists[l2][j].append && same_name(h, &lists[l2][j]);
      if (replaced) continue;
      if (nhb__srv_buf_reserve(b, h->name.len + h->value.len + 4) < 0) return NHB_ENOMEM;
      memcpy(b->p + b->len, h->name.p, h->name.len);
      b->len += h->name.len;
      memcpy(b->p + b->len, ": ", 2);
      b->len += 2;
      memcpy(b->p + b->len, h->value.p, h->value.len);
      b->len += h->value.len;
      memcpy(b->p + b->len, "\r\n", 2);
      b->len += 2;
    }
  }
  if (content_length >= 0 && nhb__srv_buf_printf(b, "Content-Length: %lld\r\n", (long long)content_length) < 0)
    return NHB_ENOMEM;
  if (mode == SRV_MODE_CLOSE && nhb__srv_buf_append(b, "Connection: close\r\n", 19) < 0) return NHB_ENOMEM;
  if (mode == SRV_MODE_KEEPALIVE && nhb__srv_buf_append(b, "Connection: keep-alive\r\n", 24) < 0)
    return NHB_ENOMEM;
  if (extra && nhb__srv_buf_append(b, extra, strlen(extra)) < 0) return NHB_ENOMEM;
  return nhb__srv_buf_append(b, "\r\n", 2);
}

/* Detaches a rendered buffer as a malloc'd block of exactly its length. */
static int take(srv_buf* b, char** out, size_t* out_len) {
  *out = b->p;
  *out_len = b->len;
  b->p = NULL;
  b->len = b->cap = 0;
  return 0;
}

static int canned_error(unsigned status, const char* text, char** out, size_t* out_len) {
  srv_buf b = {0};
  size_t n = strlen(text);
  if (nhb__srv_render_head(&b, status, (int64_t)n, SRV_MODE_CLOSE, NULL, 0, NULL, 0, NULL, 0,
                           "Content-Type: text/plain\r\n") < 0 ||
      nhb__srv_buf_append(&b, text, n) < 0) {
    nhb__srv_buf_free(&b);
    return NHB_ENOMEM;
  }
  return take(&b, out, out_len);
}

int nhb__srv_render_canned(nhb_server* s) {
  uint64_t size = s->nh.has_body_size ? s->nh.body_size : 0;
  for (int mode = 0; mode < 3; mode++) {
    for (int head = 0; head < 2; head++) {
      srv_buf b = {0};
      if (nhb__srv_render_head(&b, 200, (int64_t)size, mode, s->nh.headers, s->nh.nheaders, NULL, 0, NULL, 0, NULL) <
              0 ||
          (!head && nhb__srv_buf_append(&b, s->a_region, size) < 0)) {
        nhb__srv_buf_free(&b);
        return NHB_ENOMEM;
      }
      take(&b, &s->ok[mode][head], &s->ok_len[mode][head]);
    }
  }
  if (canned_error(400, "malformed request\n", &s->canned_400, &s->canned_400_len) < 0 ||
      canned_error(413, "request body too large\n", &s->canned_413, &s->canned_413_len) < 0 ||
      canned_error(431, "request header fields too large\n", &s->canned_431, &s->canned_431_len) < 0)
    return NHB_ENOMEM;
  return 0;
}

/* ---- building blocks --------------------------------------------------------------- */

static srv_piece out_piece(size_t off, size_t len) {
  srv_piece p = {NULL, off, len};
  return p;
}

static srv_piece ext_piece(const char* p, size_t len) {
  srv_piece x = {p, 0, len};
  return x;
}

/* Gzips the body pieces into `out`, replacing them with one piece. */
static int gzip_body(srv_worker* w, srv_buf* out, srv_piece* body, int* nbody) {
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

/* Queues head + body pieces as one response. */
static int queue_response(srv_conn* c, unsigned status, int mode, int head_only, uint64_t now, uint64_t delay_ns,
                          size_t head_off, const srv_piece* body, int nbody) {
  srv_worker* w = c->w;
  nhb_server* s = w->server;
  srv_resp r;
  memset(&r, 0, sizeof(r));
  r.status = (uint16_t)status;
  r.close = mode == SRV_MODE_CLOSE;
  r.p[0] = out_piece(head_off, c->out.len - head_off);
  r.npieces = 1;
  if (!head_only)
    for (int i = 0; i < nbody; i++) r.p[r.npieces++] = body[i];
  r.deadline_ns = delay_ns ? now + delay_ns : 0;
  /* Stalls hold HTTP responses; the admin endpoint keeps answering. */
  if (c->kind == SRV_CONN_HTTP && srv_stall_possible(s)) {
    uint64_t t = r.deadline_ns ? r.deadline_ns : now;
    uint64_t release = nhb__srv_stall_release(s, t);
    if (release > t) r.deadline_ns = release;
  }
  if (c->kind == SRV_CONN_HTTP && status < NHB_SERVER_STATUS_MAX) srv_bump(&w->counters.status[status], 1);
  return nhb__srv_conn_push(c, &r);
}

static int respond_text(srv_conn* c, unsigned status, int mode, int head_only, uint64_t now, const char* prefix,
                        const char* text) {
  srv_buf* out = &c->out;
  size_t body_off = out->len;
  if (nhb__srv_buf_printf(out, "%s%s", prefix, text) < 0) return NHB_ENOMEM;
  size_t body_len = out->len - body_off;
  size_t head_off = out->len;
  if (nhb__srv_render_head(out, status, (int64_t)body_len, mode, NULL, 0, NULL, 0, NULL, 0,
                           "Content-Type: text/plain\r\n") < 0)
    return NHB_ENOMEM;
  srv_piece body = out_piece(body_off, body_len);
  return queue_response(c, status, mode, head_only, now, 0, head_off, &body, 1);
}

/* Nighthawk's echo_request_headers text: after the body, "\nRequest
 * Headers:\n" and one "'name', 'value'" line per header, names lowercased
 * as Envoy's HTTP/1 codec shows them, pseudo-headers first. */
static int dump_headers(srv_conn* c) {
  srv_req* q = &c->req;
  srv_buf* out = &c->out;
  const char* method = llhttp_method_name((llhttp_method_t)c->parser.method);
  if (nhb__srv_buf_printf(out, "\nRequest Headers:\n':method', '%s'\n':path', '%.*s'\n", method, (int)q->url_len,
                          q->buf.p + q->url_off) < 0)
    return NHB_ENOMEM;
  for (size_t i = 0; i < q->nhdrs; i++) {
    const srv_hdr_pos* h = &q->hdrs[i];
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

static void peer_name(srv_conn* c, char* out, size_t out_len) {
  struct sockaddr_storage ss;
  int len = sizeof(ss);
  snprintf(out, out_len, "unix socket");
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
static int respond_debug(srv_conn* c, int mode, int head_only, uint64_t now) {
  srv_worker* w = c->w;
  nhb_server* s = w->server;
  srv_req* q = &c->req;
  srv_buf* out = &c->out;
  char peer[80];
  peer_name(c, peer, sizeof(peer));
  size_t body_off = out->len;
  double up = (double)(now - s->start_ns) / 1e9;
  if (nhb__srv_buf_printf(out,
                          "nhbench %s echo debug server up for %.3fs on %s - request from %s\n\n"
                          "%s %.*s HTTP/%u.%u\n\nheaders:\n\n",
                          NHB_VERSION, up, s->hostname, peer,
                          llhttp_method_name((llhttp_method_t)c->parser.method), (int)q->url_len,
                          q->buf.p + q->url_off, c->parser.http_major, c->parser.http_minor) < 0)
    return NHB_ENOMEM;
  for (size_t i = 0; i < q->nhdrs; i++) {
    const srv_hdr_pos* h = &q->hdrs[i];
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
  size_t body_len = out->len - body_off;
  size_t head_off = out->len;
  if (nhb__srv_render_head(out, 200, (int64_t)body_len, mode, NULL, 0, NULL, 0, NULL, 0,
                           "Content-Type: text/plain; charset=utf-8\r\n") < 0)
    return NHB_ENOMEM;
  srv_piece body = out_piece(body_off, body_len);
  return queue_response(c, 200, mode, head_only, now, 0, head_off, &body, 1);
}

/* ---- the dynamic path -------------------------------------------------------------- */

static void take_default(srv_choices* mine, const srv_choices* dflt) {
  if (!mine->present) *mine = *dflt;
}

int nhb__srv_respond(srv_conn* c, int mode, int head_only, uint64_t now) {
  srv_worker* w = c->w;
  nhb_server* s = w->server;
  srv_req* q = &c->req;
  char why[256];
  if (!now) now = nhb__now_ns();
  uint64_t prev = w->last_req_ns;
  w->last_req_ns = now;

  /* Nighthawk: the static options, the request's JSON merged over them. */
  srv_nh_opts nh = s->nh;
  srv_nh_opts rq;
  memset(&rq, 0, sizeof(rq));
  if (q->nh_idx >= 0) {
    const srv_hdr_pos* h = &q->hdrs[q->nh_idx];
    if (nhb__srv_nh_parse(q->buf.p + h->value_off, h->value_len, &rq, &w->nh_arena, why, sizeof(why)) < 0)
      return respond_text(c, 500, mode, head_only, now, "test-server didn't understand the request: ", why);
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
  if (q->is_debug) return respond_debug(c, mode, head_only, now);

  /* Fortio: the request's parameters, the defaults for those it lacks. */
  srv_echo_opts e;
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
      return respond_text(c, 400, mode, head_only, now, "", why);
  }
  if (s->has_echo_defaults) {
    const srv_echo_opts* d = &s->echo_defaults;
    take_default(&e.delay, &d->delay);
    take_default(&e.status, &d->status);
    take_default(&e.size, &d->size);
    take_default(&e.close, &d->close);
    take_default(&e.gzip, &d->gzip);
    if (!e.has_headers && d->has_headers) e.has_headers = 1, e.headers = d->headers, e.nheaders = d->nheaders;
    if (!e.has_stall && d->has_stall) e.has_stall = 1, e.stall_ns = d->stall_ns;
  }
  /* Independent draws, one per parameter, as Fortio does. */
  unsigned status = e.status.present ? (unsigned)nhb__srv_choose(&e.status, srv_rand_pct(w), 200) : 200;
  int64_t size = e.size.present ? nhb__srv_choose(&e.size, srv_rand_pct(w), -1) : -1;
  uint64_t delay = e.delay.present ? (uint64_t)nhb__srv_choose(&e.delay, srv_rand_pct(w), 0) : 0;
  int close = e.close.present && nhb__srv_choose(&e.close, srv_rand_pct(w), 0);
  int gzip = e.gzip.present && nhb__srv_choose(&e.gzip, srv_rand_pct(w), 0) && q->accept_gzip;
  if (e.has_stall) nhb__srv_stall_request(w, now, e.stall_ns);
  if (nh.delay_kind == SRV_DELAY_STATIC) {
    delay += nh.static_delay_ns;
  } else if (nh.delay_kind == SRV_DELAY_LINEAR) {
    /* Nighthawk's model of an overloaded server: the delay grows with the
     * requests in progress on this worker, this one included. */
    delay += nh.linear_min_ns + nh.linear_factor_ns * (uint64_t)(w->delayed + 1);
  }
  if (close) mode = SRV_MODE_CLOSE;

  /* The body. */
  srv_buf* out = &c->out;
  srv_piece body[2];
  int nbody = 0;
  int no_body = status == 204 || status == 304;
  if (!no_body) {
    if (size >= 0) {
      body[nbody++] = ext_piece(s->payload, (size_t)size);
    } else if (nh.has_body_size) {
      body[nbody++] = ext_piece(s->a_region, nh.body_size);
    } else if (q->body_len) {
      size_t off = out->len;
      if (nhb__srv_buf_append(out, q->buf.p + q->body_off, q->body_len) < 0) return NHB_ENOMEM;
      body[nbody++] = out_piece(off, q->body_len);
    }
    if (nh.has_echo_headers && nh.echo_headers) {
      size_t off = out->len;
      if (dump_headers(c) < 0) return NHB_ENOMEM;
      if (nbody && !body[nbody - 1].ext && body[nbody - 1].off + body[nbody - 1].len == off)
        body[nbody - 1].len += out->len - off; /* adjacent in `out`: one piece */
      else
        body[nbody++] = out_piece(off, out->len - off);
    }
    if (gzip && gzip_body(w, out, body, &nbody) < 0) return NHB_ENOMEM;
  }
  size_t body_len = 0;
  for (int i = 0; i < nbody; i++) body_len += body[i].len;

  /* The head. */
  /* Room for a 255-byte header name, its value and the gzip headers. */
  char extra[384];
  size_t xl = 0;
  extra[0] = '\0';
  if (nh.has_emit && prev != 0 && nh.emit_header.len < 256)
    xl += (size_t)snprintf(extra + xl, sizeof(extra) - xl, "%.*s: %llu\r\n", (int)nh.emit_header.len,
                           nh.emit_header.p, (unsigned long long)(now - prev));
  if (gzip && !no_body) snprintf(extra + xl, sizeof(extra) - xl, "Content-Encoding: gzip\r\nVary: Accept-Encoding\r\n");
  size_t head_off = out->len;
  if (nhb__srv_render_head(out, status, no_body ? -1 : (int64_t)body_len, mode, nh.headers, nh.nheaders, rq.headers,
                           rq.nheaders, e.has_headers ? e.headers : NULL, e.nheaders, extra) < 0)
    return NHB_ENOMEM;
  return queue_response(c, status, mode, head_only, now, delay, head_off, body, nbody);
}

/* ---- admin ------------------------------------------------------------------------- */

void nhb__srv_render_stats_json(const nhb_server* s, srv_buf* b) {
  nhb_server_stats st;
  nhb_server_stats_get(s, &st);
  nhb__srv_buf_printf(b,
                      "{\"requests\": %llu, \"connections_total\": %llu, \"connections_active\": %llu, "
                      "\"rx_bytes\": %llu, \"tx_bytes\": %llu, \"bad_requests\": %llu, \"status\": {",
                      (unsigned long long)st.requests, (unsigned long long)st.connections_total,
                      (unsigned long long)st.connections_active, (unsigned long long)st.rx_bytes,
                      (unsigned long long)st.tx_bytes, (unsigned long long)st.bad_requests);
  const char* sep = "";
  for (int i = 0; i < NHB_SERVER_STATUS_MAX; i++) {
    if (!st.status[i]) continue;
    nhb__srv_buf_printf(b, "%s\"%d\": %llu", sep, i, (unsigned long long)st.status[i]);
    sep = ", ";
  }
  nhb__srv_buf_printf(b, "}, \"stalls\": %llu, \"tcp_echo_bytes\": %llu, \"udp_echo_packets\": %llu}\n",
                      (unsigned long long)st.stalls, (unsigned long long)st.tcp_echo_bytes,
                      (unsigned long long)st.udp_echo_packets);
}

int nhb__srv_respond_admin(srv_conn* c, int mode, int head_only) {
  srv_req* q = &c->req;
  const char* url = q->buf.p + q->url_off;
  const char* mark = q->url_len ? memchr(url, '?', q->url_len) : NULL;
  size_t path_len = mark ? (size_t)(mark - url) : q->url_len;
  int method = c->parser.method;
  uint64_t now = nhb__now_ns();
  if (!(path_len == 6 && memcmp(url, "/stats", 6) == 0) || (method != HTTP_GET && method != HTTP_HEAD))
    return respond_text(c, 404, mode, head_only, now, "", "not found; try GET /stats\n");
  srv_buf* out = &c->out;
  size_t body_off = out->len;
  nhb__srv_render_stats_json(c->w->server, out);
  size_t body_len = out->len - body_off;
  size_t head_off = out->len;
  if (nhb__srv_render_head(out, 200, (int64_t)body_len, mode, NULL, 0, NULL, 0, NULL, 0,
                           "Content-Type: application/json\r\n") < 0)
    return NHB_ENOMEM;
  srv_piece body = out_piece(body_off, body_len);
  return queue_response(c, 200, mode, head_only, now, 0, head_off, &body, 1);
}
