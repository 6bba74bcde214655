/* server_fanout.c: HTTP fan-outs, like Fortio's -M "local url1 url2 ...".
 *
 * A connection accepted on a fan-out listener speaks HTTP/1.1 (llhttp, one
 * request at a time). Each complete request is sent to every target of the
 * listener over plain HTTP/1.1, in parallel or (serial mode) one after the
 * other, and the client gets one response: the targets' bodies back to back
 * in target order; the status is, in parallel mode, the first status other
 * than 200 in target order (503 for a target that failed), in serial mode
 * the first target's (503 if it failed). A target that fails (refused,
 * reset, closed early, a response llhttp refuses or over
 * NHB__SRV_FANOUT_MAX_RESPONSE, no answer within NHB__SRV_FANOUT_TIMEOUT_MS)
 * contributes "Error for URL: reason\n" to the body, as Fortio does.
 *
 * What goes to a target, as Fortio builds it: mirroring (the default), the
 * incoming method, the target's path with the request URI appended, every
 * end-to-end header (the hop-by-hop ones, Host and the framing headers are
 * the fan-out's own), the body with a Content-Length; otherwise a request
 * for the target's URL built from the client's query as Fortio reads it as
 * a form (nhb__srv_fanout_read_form(): "payload" is the body, "X" the
 * method), carrying only the trace headers (x-request-id, b3, x-b3-*) and
 * nhbench's User-Agent. Both add X-On-Behalf-Of (the client's address),
 * X-Proxy-Agent when the client's User-Agent is not nhbench's, and
 * X-Fortio-Multi-Id (the target's position, from 1).
 *
 * Every client connection owns one connection per target, opened at its
 * first request and kept alive across the client's requests (a target that
 * closes a kept-alive connection before answering gets the request again on
 * a new one). Buffers are the connection's and grow to the largest request
 * and responses seen; nothing is allocated per request once they have.
 * A client that closes or resets while its request is out aborts the
 * requests to the targets (as Go's request context does).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "server/server_internal.h"

/* Pipelined bytes read while a request is out, kept for later; past this
 * the client is not read until its response is written. */
#define FANOUT_MAX_STASH (64u * 1024u)

enum { UP_IDLE = 0, UP_CONNECTING, UP_READY, UP_CLOSING };

typedef struct fanout_up {
  uv_tcp_t tcp;
  uv_connect_t creq;
  uv_write_t wreq;
  llhttp_t parser;
  nhb__srv_fanout* f;
  nhb__srv_buf body;  /* the response body */
  nhb__srv_buf head;  /* this target's request line, Host and X-Fortio-Multi-Id */
  int idx;
  uint8_t state;
  uint8_t active;     /* a request is out to this target */
  uint8_t done;       /* its response (or failure) is in */
  uint8_t reused;     /* sent on a kept-alive connection */
  uint8_t got_bytes;  /* response bytes arrived */
  uint8_t keep;       /* the connection can take another request */
  uint8_t resend;     /* reopen and send again once closed */
  uint8_t retried;
  uint8_t too_big;
  uint8_t skip_body;  /* the request was a HEAD */
  int status;         /* > 0, or -1 failed */
  const char* err;
} fanout_up;

struct nhb__srv_fanout {
  uv_tcp_t tcp; /* the client */
  uv_write_t wreq;
  uv_timer_t timer;
  nhb__srv_worker* w;
  nhb__srv_fanout *prev, *next;
  const nhb_server_fanout_target* targets;
  int ntargets;
  llhttp_t parser;
  /* The request: URL, header fields and body, captured into one buffer. */
  nhb__srv_buf req;
  nhb__srv_hdr_pos* hdrs;
  size_t nhdrs, hdrs_cap;
  int hstate; /* 0 between fields, 1 in a name, 2 in a value */
  size_t url_off, url_len, body_off, head_bytes;
  uint64_t body_len;
  uint8_t complete, expect_continue, keep_alive, is_head;
  uint16_t refuse; /* 400/413/431 decided while parsing */
  /* What goes out: the common header block (built once per request). */
  nhb__srv_buf out;
  size_t method_len;
  char method[24];
  char peer[64];
  /* Not mirroring: the method and body read from the query, decoded into
   * `form`. */
  nhb__srv_buf form;
  nhb__srv_fanout_form fm;
  nhb__srv_buf resp;  /* the response to the client */
  nhb__srv_buf stash; /* input not parsed yet */
  nhb__srv_buf spare; /* the stash being parsed */
  uint8_t closing, busy, writing, reading, client_eof;
  int nopen;    /* handles not yet closed */
  int pending;  /* parallel: targets not done; serial: the next target */
  fanout_up up[];
};

static void client_on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);
static void up_on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);
static void up_start(nhb__srv_fanout* f, int i);
static void parse_input(nhb__srv_fanout* f, const char* p, size_t n);

static void fanout_alloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf) {
  NHB__UNUSED(suggested);
  nhb__srv_worker* w = handle->loop->data;
  buf->base = w->rbuf;
  buf->len = NHB__SRV_READ_BUFFER;
}

/* ---- closing ---------------------------------------------------------------------- */

/* One of the connection's handles is closed; the last frees it. */
static void fanout_unref(nhb__srv_fanout* f) {
  if (--f->nopen > 0) return;
  nhb__srv_worker* w = f->w;
  atomic_fetch_sub_explicit(&w->server->conns_open, 1 + (uint64_t)f->ntargets, memory_order_relaxed);
  for (int i = 0; i < f->ntargets; i++) {
    nhb__srv_buf_free(&f->up[i].body);
    nhb__srv_buf_free(&f->up[i].head);
  }
  nhb__srv_buf_free(&f->req);
  nhb__srv_buf_free(&f->out);
  nhb__srv_buf_free(&f->form);
  nhb__srv_buf_free(&f->resp);
  nhb__srv_buf_free(&f->stash);
  nhb__srv_buf_free(&f->spare);
  free(f->hdrs);
  free(f);
}

static void fanout_free(uv_handle_t* handle) { fanout_unref(handle->data); }

static void up_on_closed(uv_handle_t* handle);

static void fanout_close(nhb__srv_fanout* f) {
  if (f->closing) return;
  f->closing = 1;
  nhb__srv_worker* w = f->w;
  if (f->prev) f->prev->next = f->next;
  else w->fanouts = f->next;
  if (f->next) f->next->prev = f->prev;
  f->prev = f->next = NULL;
  for (int i = 0; i < f->ntargets; i++) {
    fanout_up* u = &f->up[i];
    if (u->state != UP_IDLE && u->state != UP_CLOSING) uv_close((uv_handle_t*)&u->tcp, up_on_closed);
    u->state = UP_CLOSING;
  }
  uv_close((uv_handle_t*)&f->timer, fanout_free);
  uv_close((uv_handle_t*)&f->tcp, fanout_free);
}

/* ---- the response to the client ---------------------------------------------------- */

static void arm_idle(nhb__srv_fanout* f);
static void fanout_on_timeout(uv_timer_t* timer);

static void on_client_written(uv_write_t* req, int status) {
  nhb__srv_fanout* f = req->handle->data;
  if (f->closing) return;
  f->writing = 0;
  if (status < 0) {
    fanout_close(f);
    return;
  }
  f->resp.len = 0;
  if (!f->keep_alive) {
    fanout_close(f);
    return;
  }
  /* The next request: what was read meanwhile first, then the socket. */
  if (!f->stash.len) {
    arm_idle(f);
    return;
  }
  nhb__srv_buf t = f->spare;
  f->spare = f->stash;
  f->stash = t;
  f->stash.len = 0;
  parse_input(f, f->spare.p, f->spare.len);
}

/* Writes f->resp; the connection goes on in on_client_written(). */
static void client_send(nhb__srv_fanout* f) {
  uv_buf_t b = uv_buf_init(f->resp.p, (unsigned)f->resp.len);
  f->writing = 1;
  if (uv_write(&f->wreq, (uv_stream_t*)&f->tcp, &b, 1, on_client_written) < 0) {
    fanout_close(f);
    return;
  }
  /* A client that does not read its response is dropped after idle_timeout,
   * as an idle one is. */
  uint64_t ms = f->w->server->config.idle_timeout_ns / NHB__NS_PER_MS;
  if (ms) uv_timer_start(&f->timer, fanout_on_timeout, ms, 0);
}

/* A canned error for a request refused before any target saw it; the
 * connection closes after it. */
static void client_refuse(nhb__srv_fanout* f, unsigned status) {
  f->keep_alive = 0;
  f->resp.len = 0;
  if (nhb__srv_buf_printf(&f->resp, "HTTP/1.1 %u %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", status,
                          nhb__srv_reason(status)) < 0) {
    fanout_close(f);
    return;
  }
  uv_timer_stop(&f->timer);
  client_send(f);
}

/* Every target is done: one response, the bodies in target order. */
static void fanout_answer(nhb__srv_fanout* f) {
  nhb_server* s = f->w->server;
  int status = 200;
  if (s->config.http_fanout_serial) {
    status = f->up[0].status;
  } else {
    for (int i = 0; i < f->ntargets; i++)
      if (f->up[i].status != 200) {
        status = f->up[i].status;
        break;
      }
  }
  if (status <= 0) status = 503;
  size_t total = 0;
  for (int i = 0; i < f->ntargets; i++) total += f->up[i].body.len;
  f->resp.len = 0;
  int r = nhb__srv_buf_printf(&f->resp, "HTTP/1.1 %d %s\r\nServer: nhbench\r\nContent-Length: %zu\r\n%s\r\n", status,
                              nhb__srv_reason((unsigned)status), total, f->keep_alive ? "" : "Connection: close\r\n");
  if (r == 0 && !f->is_head)
    for (int i = 0; i < f->ntargets && r == 0; i++) r = nhb__srv_buf_append(&f->resp, f->up[i].body.p, f->up[i].body.len);
  if (r < 0) {
    fanout_close(f);
    return;
  }
  nhb__srv_bump(&f->w->counters.fanout_requests, 1);
  f->busy = 0;
  uv_timer_stop(&f->timer);
  client_send(f);
}

/* ---- the form of a non-mirroring request -------------------------------------------------- */

/* Fortio (MakeSimpleRequest with CommonHTTPOptionsFromForm) reads the
 * request's form with Go's Request.FormValue. TeeHandler has read the body
 * before, so a form body gives nothing: the form is the query alone, as Go's
 * url.ParseQuery splits it (the server Fortio is built with sets no limit on
 * the number of pairs). */

static int hex_value(unsigned char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c |= 0x20;
  return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Go's QueryUnescape takes s: every '%' starts a "%XX". */
static int q_valid(const char* s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (s[i] == '%') {
      if (i + 2 >= n || hex_value((unsigned char)s[i + 1]) < 0 || hex_value((unsigned char)s[i + 2]) < 0)
        return 0;
      i += 2;
    }
  return 1;
}

/* The next byte of the valid s at *i, unescaped ('+' is a space). */
static unsigned char q_byte(const char* s, size_t* i) {
  unsigned char c = (unsigned char)s[*i];
  if (c == '%') {
    c = (unsigned char)(hex_value((unsigned char)s[*i + 1]) << 4 | hex_value((unsigned char)s[*i + 2]));
    *i += 3;
    return c;
  }
  *i += 1;
  return c == '+' ? ' ' : c;
}

/* The valid s unescaped is lit. */
static int q_is(const char* s, size_t n, const char* lit) {
  size_t i = 0, j = 0;
  while (i < n)
    if (!lit[j] || q_byte(s, &i) != (unsigned char)lit[j++]) return 0;
  return !lit[j];
}

static int q_decode(nhb__srv_buf* b, const char* s, size_t n) {
  if (nhb__srv_buf_reserve(b, n) < 0) return NHB_ENOMEM;
  for (size_t i = 0; i < n;) b->p[b->len++] = (char)q_byte(s, &i);
  return 0;
}

/* Go's unicode.IsSpace as UTF-8: U+1680, U+2000-200A, U+2028, U+2029,
 * U+202F, U+205F, U+3000. */
static int space3(const unsigned char* s) {
  return (s[0] == 0xE1 && s[1] == 0x9A && s[2] == 0x80) ||
         (s[0] == 0xE2 && s[1] == 0x80 &&
          ((s[2] >= 0x80 && s[2] <= 0x8A) || s[2] == 0xA8 || s[2] == 0xA9 || s[2] == 0xAF)) ||
         (s[0] == 0xE2 && s[1] == 0x81 && s[2] == 0x9F) || (s[0] == 0xE3 && s[1] == 0x80 && s[2] == 0x80);
}

static int space1(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

/* Go's strings.TrimSpace (ASCII white space, U+0085, U+00A0 and the rest). */
static void trim_space(const char** sp, size_t* np) {
  const unsigned char* s = (const unsigned char*)*sp;
  size_t n = *np;
  for (;;) {
    if (n >= 1 && space1(s[0])) s += 1, n -= 1;
    else if (n >= 2 && s[0] == 0xC2 && (s[1] == 0x85 || s[1] == 0xA0)) s += 2, n -= 2;
    else if (n >= 3 && space3(s)) s += 3, n -= 3;
    else break;
  }
  for (;;) {
    if (n >= 1 && space1(s[n - 1])) n -= 1;
    else if (n >= 2 && s[n - 2] == 0xC2 && (s[n - 1] == 0x85 || s[n - 1] == 0xA0)) n -= 2;
    else if (n >= 3 && space3(s + n - 3)) n -= 3;
    else break;
  }
  *sp = (const char*)s;
  *np = n;
}

/* An "H" value as Fortio's AddAndValidateExtraHeader takes it. The header
 * is not sent (Fortio adds the H headers only when MakeSimpleRequest copies
 * all headers, which its fan-out never asks for), but a Content-Type makes
 * the method POST. 1 a non-empty Content-Type, 0 an empty one, -1 anything
 * else. */
static int h_content_type(const char* v, size_t n) {
  const char* colon = memchr(v, ':', n);
  if (!colon) return -1;
  const char* k = v;
  size_t kn = (size_t)(colon - v);
  trim_space(&k, &kn);
  /* strings.ToLower: no other rune lowers to these letters. */
  if (kn != 12 || strncasecmp(k, "content-type", 12) != 0) return -1;
  const char* val = colon + 1;
  size_t vn = n - (size_t)(val - v);
  trim_space(&val, &vn);
  return vn > 0;
}

/* RFC 9110's token, which Go's net/http requires of a method. */
static int is_token(const char* s, size_t n) {
  if (!n) return 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    int ok = (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') ||
             (c && strchr("!#$%&'*+-.^_`|~", c) != NULL);
    if (!ok) return 0;
  }
  return 1;
}

static int is_method(const nhb__srv_fanout_form* fm, const char* m) {
  size_t n = strlen(m);
  return fm->method_len == n && memcmp(fm->method, m, n) == 0;
}

/* The URL has a path (Go's URL.Path is not empty). */
static int url_has_path(const char* url) {
  const char* p = strstr(url, "://");
  p = p ? p + 3 : url;
  p += strcspn(p, "/?#");
  return *p == '/';
}

int nhb__srv_fanout_read_form(const char* uri, size_t n, nhb__srv_buf* b, nhb__srv_fanout_form* out) {
  b->len = 0;
  size_t pay_off = 0, pay_len = 0, m_off = 0, m_len = 0;
  int have_pay = 0, have_m = 0, content_type = 0;
  const char* end = uri + n;
  const char* q = memchr(uri, '?', n);
  q = q ? q + 1 : end;
  while (q < end) {
    const char* pair = q;
    const char* amp = memchr(q, '&', (size_t)(end - q));
    size_t pn = (size_t)((amp ? amp : end) - pair);
    q = amp ? amp + 1 : end;
    /* Go skips an empty pair, and one with a ';' (no longer a separator). */
    if (!pn || memchr(pair, ';', pn)) continue;
    const char* eq = memchr(pair, '=', pn);
    size_t kn = eq ? (size_t)(eq - pair) : pn;
    const char* v = eq ? eq + 1 : pair + pn;
    size_t vn = eq ? pn - kn - 1 : 0;
    /* A pair with a bad escape is dropped whole; the next one counts. */
    if (!q_valid(pair, kn) || !q_valid(v, vn)) continue;
    /* FormValue: the first value of a key. */
    if (!have_pay && q_is(pair, kn, "payload")) {
      have_pay = 1;
      pay_off = b->len;
      if (q_decode(b, v, vn) < 0) return NHB_ENOMEM;
      pay_len = b->len - pay_off;
    } else if (!have_m && q_is(pair, kn, "X")) {
      have_m = 1;
      m_off = b->len;
      if (q_decode(b, v, vn) < 0) return NHB_ENOMEM;
      m_len = b->len - m_off;
    } else if (q_is(pair, kn, "H")) {
      /* Every H, in order; the last Content-Type wins. */
      size_t at = b->len;
      if (q_decode(b, v, vn) < 0) return NHB_ENOMEM;
      int ct = b->len > at ? h_content_type(b->p + at, b->len - at) : -1;
      if (ct >= 0) content_type = ct;
      b->len = at;
    }
  }
  out->payload = pay_len ? b->p + pay_off : "";
  out->payload_len = pay_len;
  /* HTTPOptions.Method(). */
  if (m_len) {
    out->method = b->p + m_off;
    out->method_len = m_len;
  } else {
    out->method = pay_len || content_type ? "POST" : "GET";
    out->method_len = strlen(out->method);
  }
  out->method_ok = is_token(out->method, out->method_len);
  return 0;
}

/* ---- targets ------------------------------------------------------------------------ */


static void arm_request_timer(nhb__srv_fanout* f) {
  uv_timer_start(&f->timer, fanout_on_timeout, NHB__SRV_FANOUT_TIMEOUT_MS, 0);
}

/* Target i's answer is in (or it failed): the next target (serial), or the
 * response once all are. */
static void up_finished(nhb__srv_fanout* f, int i) {
  fanout_up* u = &f->up[i];
  u->active = 0;
  u->done = 1;
  if (f->w->server->config.http_fanout_serial) {
    if (i + 1 < f->ntargets) {
      arm_request_timer(f);
      up_start(f, i + 1);
    } else {
      fanout_answer(f);
    }
  } else if (--f->pending == 0) {
    fanout_answer(f);
  }
}

static void up_on_closed(uv_handle_t* handle) {
  fanout_up* u = handle->data;
  nhb__srv_fanout* f = u->f;
  if (f->closing) {
    fanout_unref(f);
    return;
  }
  f->nopen--;
  u->state = UP_IDLE;
  if (u->resend) {
    u->resend = 0;
    up_start(f, u->idx);
  }
}

static void up_close(fanout_up* u) {
  if (u->state == UP_IDLE || u->state == UP_CLOSING) return;
  u->state = UP_CLOSING;
  u->keep = 0;
  uv_close((uv_handle_t*)&u->tcp, up_on_closed);
}

/* Target i failed: its line in the body, and its connection closed. A
 * kept-alive connection the target closed before answering is tried once
 * more on a new one, as HTTP clients do. */
static void up_fail(nhb__srv_fanout* f, int i, const char* why, int retryable) {
  fanout_up* u = &f->up[i];
  if (!u->active) return;
  if (retryable && u->reused && !u->got_bytes && !u->retried) {
    u->retried = 1;
    u->resend = 1;
    up_close(u);
    return;
  }
  nhb__srv_bump(&f->w->counters.fanout_upstream_errors, 1);
  up_close(u);
  u->status = -1;
  u->body.len = 0;
  /* Fortio's line: the URL requested, then Go's url.Error ("Get \"URL\": ...")
   * around the reason. */
  const nhb_server_fanout_target* t = &f->targets[i];
  int mirror = !f->w->server->config.http_fanout_no_mirror;
  int r;
  if (mirror) {
    char op[24];
    size_t k = 0;
    const char* m = f->method;
    for (; k + 1 < sizeof(op) && m[k] && m[k] != ' '; k++) op[k] = (char)(k ? (m[k] | 0x20) : m[k]);
    op[k] = 0;
    r = nhb__srv_buf_printf(&u->body, "Error for http://%s%s%.*s: %s \"http://%s%s%.*s\": %s\n", t->host, t->path,
                            (int)f->url_len, f->req.p + f->url_off, op, t->host, t->path, (int)f->url_len,
                            f->req.p + f->url_off, why);
  } else {
    /* Go's url.Error names the method as "Put" for PUT (only A-Z lowered,
     * the first byte kept), whatever its length. */
    r = nhb__srv_buf_printf(&u->body, "Error for %s: ", t->url);
    if (r == 0) r = nhb__srv_buf_reserve(&u->body, f->fm.method_len);
    if (r == 0)
      for (size_t k = 0; k < f->fm.method_len; k++) {
        char c = f->fm.method[k];
        u->body.p[u->body.len++] = k && c >= 'A' && c <= 'Z' ? (char)(c | 0x20) : c;
      }
    if (r == 0) r = nhb__srv_buf_printf(&u->body, " \"%s\": %s\n", t->url, why);
  }
  if (r < 0) {
    fanout_close(f);
    return;
  }
  up_finished(f, i);
}

static int up_on_headers_complete(llhttp_t* p) {
  const fanout_up* u = p->data;
  /* llhttp reads a status of fewer than three digits ("HTTP/1.1 2 OK"); the
   * client would get it in its status line. */
  if (p->status_code < 100 || p->status_code > 999) return -1;
  /* A response to HEAD has no body whatever its headers say. */
  return u->skip_body;
}

static int up_on_body(llhttp_t* p, const char* at, size_t n) {
  fanout_up* u = p->data;
  if (u->body.len + n > NHB__SRV_FANOUT_MAX_RESPONSE) {
    u->too_big = 1;
    return HPE_USER;
  }
  return nhb__srv_buf_append(&u->body, at, n) < 0 ? HPE_USER : 0;
}

static int up_on_message_complete(llhttp_t* p) {
  fanout_up* u = p->data;
  /* Interim responses (100 Continue, 103) precede the real one. */
  if (p->status_code >= 100 && p->status_code < 200 && p->status_code != 101) {
    u->body.len = 0;
    return 0;
  }
  u->status = p->status_code;
  return HPE_PAUSED;
}

static const llhttp_settings_t up_settings = {
    .on_headers_complete = up_on_headers_complete,
    .on_body = up_on_body,
    .on_message_complete = up_on_message_complete,
};

/* The parser's verdict on the bytes just given: 1 complete (status set), 0
 * more needed, -1 refused. */
static int up_parse(llhttp_t* parser, const char* p, size_t n) {
  llhttp_errno_t e = llhttp_execute(parser, p, n);
  if (e == HPE_OK) return 0;
  if (e == HPE_PAUSED) {
    /* Bytes after the response: a target that says more than it was asked
     * cannot be trusted with the next request. */
    const char* pos = llhttp_get_error_pos(parser);
    return pos && pos < p + n ? 2 : 1;
  }
  return -1;
}

int nhb__srv_fanout_parse_response(const char* p, size_t n, size_t split, int head_request) {
  fanout_up u;
  memset(&u, 0, sizeof(u));
  u.skip_body = (uint8_t)(head_request != 0);
  llhttp_init(&u.parser, HTTP_RESPONSE, &up_settings);
  u.parser.data = &u;
  if (split > n) split = n;
  /* Two reads, as the socket may deliver them; then EOF. */
  int r = up_parse(&u.parser, p, split);
  if (r == 0) r = up_parse(&u.parser, p + split, n - split);
  if (r == 0 && llhttp_finish(&u.parser) == HPE_PAUSED) r = 1;
  /* What a complete response leaves behind: a status, and a body within the
   * cap. */
  if (r > 0 && (u.status < 100 || u.status > 999 || u.body.len > NHB__SRV_FANOUT_MAX_RESPONSE)) r = -2;
  nhb__srv_buf_free(&u.body);
  if (r == -2) return -2;
  if (r < 0) return -1;
  return r ? u.status : 0;
}

static void up_on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
  fanout_up* u = stream->data;
  nhb__srv_fanout* f = u->f;
  if (f->closing || u->state != UP_READY) return;
  if (!u->active) {
    /* Bytes, or EOF, on an idle kept-alive connection: not reusable. */
    up_close(u);
    return;
  }
  if (nread > 0) {
    u->got_bytes = 1;
    int r = up_parse(&u->parser, buf->base, (size_t)nread);
    if (r < 0) {
      up_fail(f, u->idx, u->too_big ? "response body too large" : "malformed HTTP response", 0);
    } else if (r > 0) {
      u->keep = r == 1 && llhttp_should_keep_alive(&u->parser);
      if (!u->keep) up_close(u);
      up_finished(f, u->idx);
    }
  } else if (nread == UV_EOF) {
    /* A body that runs to the end of the connection is complete now. */
    if (u->got_bytes && llhttp_finish(&u->parser) == HPE_PAUSED) {
      up_close(u);
      up_finished(f, u->idx);
    } else {
      up_fail(f, u->idx, "connection closed before a complete response", 1);
    }
  } else if (nread < 0) {
    up_fail(f, u->idx, uv_strerror((int)nread), nread == UV_ECONNRESET);
  }
}

static void up_on_written(uv_write_t* req, int status) {
  fanout_up* u = req->handle->data;
  if (u->f->closing || status == UV_ECANCELED || u->state != UP_READY) return;
  if (status < 0) up_fail(u->f, u->idx, uv_strerror(status), status == UV_EPIPE || status == UV_ECONNRESET);
}

static const char* const multi_id[NHB_SERVER_MAX_FANOUT_TARGETS] = {
    "X-Fortio-Multi-Id: 1\r\n", "X-Fortio-Multi-Id: 2\r\n", "X-Fortio-Multi-Id: 3\r\n", "X-Fortio-Multi-Id: 4\r\n",
    "X-Fortio-Multi-Id: 5\r\n", "X-Fortio-Multi-Id: 6\r\n", "X-Fortio-Multi-Id: 7\r\n", "X-Fortio-Multi-Id: 8\r\n"};

/* Writes the request to target i on its open connection: the request line
 * and Host are the target's, the header block (built once) is shared, the
 * body is the client's. */
static void up_send(nhb__srv_fanout* f, int i) {
  fanout_up* u = &f->up[i];
  const nhb_server_fanout_target* t = &f->targets[i];
  int mirror = !f->w->server->config.http_fanout_no_mirror;
  /* Three pieces at most: libuv copies a longer list into memory of its own
   * (an allocation per write). */
  nhb__srv_buf* h = &u->head;
  h->len = 0;
  int r;
  if (mirror) {
    r = nhb__srv_buf_append(h, f->method, f->method_len);
    if (r == 0) r = nhb__srv_buf_append(h, t->path, strlen(t->path));
    if (r == 0) r = nhb__srv_buf_append(h, f->req.p + f->url_off, f->url_len);
  } else {
    r = nhb__srv_buf_append(h, f->fm.method, f->fm.method_len);
    if (r == 0) r = nhb__srv_buf_append(h, " ", 1);
    /* Go writes CONNECT for a URL without a path in authority form. */
    if (r == 0 && is_method(&f->fm, "CONNECT") && !url_has_path(t->url))
      r = nhb__srv_buf_append(h, t->host, strlen(t->host));
    else if (r == 0)
      r = nhb__srv_buf_append(h, t->path[0] ? t->path : "/", t->path[0] ? strlen(t->path) : 1);
  }
  if (r == 0) r = nhb__srv_buf_append(h, " HTTP/1.1\r\nHost: ", 17);
  if (r == 0) r = nhb__srv_buf_append(h, t->host, strlen(t->host));
  if (r == 0) r = nhb__srv_buf_append(h, "\r\n", 2);
  if (r == 0) r = nhb__srv_buf_append(h, multi_id[i], strlen(multi_id[i]));
  if (r < 0) {
    fanout_close(f);
    return;
  }
  uv_buf_t b[3];
  unsigned n = 0;
  b[n++] = uv_buf_init(h->p, (unsigned)h->len);
  b[n++] = uv_buf_init(f->out.p, (unsigned)f->out.len);
  if (mirror && f->body_len) b[n++] = uv_buf_init(f->req.p + f->body_off, (unsigned)f->body_len);
  if (!mirror && f->fm.payload_len) b[n++] = uv_buf_init((char*)f->fm.payload, (unsigned)f->fm.payload_len);
  llhttp_init(&u->parser, HTTP_RESPONSE, &up_settings);
  u->parser.data = u;
  u->body.len = 0;
  u->got_bytes = 0;
  u->too_big = 0;
  /* Go reads no body in a response to HEAD (the method exactly). */
  u->skip_body = (uint8_t)(mirror ? f->is_head : is_method(&f->fm, "HEAD"));
  nhb__srv_bump(&f->w->counters.fanout_upstream_requests, 1);
  if (uv_write(&u->wreq, (uv_stream_t*)&u->tcp, b, n, up_on_written) < 0) up_fail(f, i, "write failed", 0);
}

static void up_on_connect(uv_connect_t* req, int status) {
  fanout_up* u = req->data;
  nhb__srv_fanout* f = u->f;
  if (f->closing || status == UV_ECANCELED || u->state != UP_CONNECTING) return;
  if (status < 0) {
    up_fail(f, u->idx, uv_strerror(status), 0);
    return;
  }
  u->state = UP_READY;
  uv_tcp_nodelay(&u->tcp, 1);
  /* Reading stays on while the connection lives: bytes or EOF on an idle
   * connection retire it. */
  if (uv_read_start((uv_stream_t*)&u->tcp, fanout_alloc, up_on_read) < 0) {
    up_fail(f, u->idx, "read failed", 0);
    return;
  }
  up_send(f, u->idx);
}

/* Sends the current request to target i: on its kept-alive connection, or
 * on a new one. */
static void up_start(nhb__srv_fanout* f, int i) {
  fanout_up* u = &f->up[i];
  u->active = 1;
  u->done = 0;
  u->status = 0;
  if (u->state == UP_CLOSING) {
    u->resend = 1; /* once the old handle is closed */
    return;
  }
  if (u->state == UP_READY && u->keep) {
    u->reused = 1;
    up_send(f, i);
    return;
  }
  up_close(u);
  if (u->state == UP_CLOSING) {
    u->resend = 1;
    return;
  }
  u->reused = 0;
  uv_tcp_init(&f->w->loop, &u->tcp);
  u->tcp.data = u;
  u->creq.data = u;
  u->state = UP_CONNECTING;
  f->nopen++;
  if (uv_tcp_connect(&u->creq, &u->tcp, (const struct sockaddr*)f->targets[i].addr.bytes, up_on_connect) < 0) {
    /* Out of descriptors, or the like: as unreachable. */
    up_fail(f, i, "connect failed", 0);
  }
}

static void fanout_on_timeout(uv_timer_t* timer) {
  nhb__srv_fanout* f = timer->data;
  if (f->closing) return;
  if (!f->busy) {
    /* Idle past idle_timeout, or a request head or body that did not
     * arrive in time. */
    fanout_close(f);
    return;
  }
  /* The targets out now (failing one may start the next, in serial mode,
   * which has its own time). */
  uint8_t out[NHB_SERVER_MAX_FANOUT_TARGETS];
  for (int i = 0; i < f->ntargets; i++) out[i] = f->up[i].active;
  for (int i = 0; i < f->ntargets && !f->closing; i++)
    if (out[i]) up_fail(f, i, "timeout awaiting the response (3s)", 0);
}

/* ---- the request from the client ----------------------------------------------------- */

static int is_hop_or_framing(const char* name, size_t len) {
  static const char* const names[] = {"host",    "connection", "keep-alive", "proxy-connection", "transfer-encoding",
                                      "content-length", "te", "trailer", "upgrade", "expect"};
  for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++)
    if (strlen(names[k]) == len && strncasecmp(names[k], name, len) == 0) return 1;
  return 0;
}

static int is_trace(const char* name, size_t len) {
  return (len == 12 && strncasecmp(name, "x-request-id", 12) == 0) || (len == 2 && strncasecmp(name, "b3", 2) == 0) ||
         (len >= 5 && strncasecmp(name, "x-b3-", 5) == 0);
}

static const char agent[] = "nhbench";

/* The header block every target gets (after its own request line, Host and
 * X-Fortio-Multi-Id), and the body framing. Returns 0, NHB_ENOMEM, or 400
 * for a header value that may not be forwarded. */
static int build_out(nhb__srv_fanout* f) {
  int mirror = !f->w->server->config.http_fanout_no_mirror;
  nhb__srv_buf* o = &f->out;
  o->len = 0;
  const char* ua = NULL;
  size_t ua_len = 0;
  for (size_t i = 0; i < f->nhdrs; i++) {
    const nhb__srv_hdr_pos* h = &f->hdrs[i];
    const char* name = f->req.p + h->name_off;
    const char* value = f->req.p + h->value_off;
    if (h->name_len == 10 && strncasecmp(name, "user-agent", 10) == 0) {
      ua = value;
      ua_len = h->value_len;
      if (!mirror) continue;
    }
    if (mirror ? is_hop_or_framing(name, h->name_len) : !is_trace(name, h->name_len)) continue;
    /* llhttp passes an obsolete line folding through as CR LF SP: forwarded
     * as it is, it would start a header line of the client's choosing. */
    if (!nhb__srv_value_ok(value, h->value_len)) return 400;
    if (nhb__srv_buf_append(o, name, h->name_len) < 0 || nhb__srv_buf_append(o, ": ", 2) < 0 ||
        nhb__srv_buf_append(o, value, h->value_len) < 0 || nhb__srv_buf_append(o, "\r\n", 2) < 0)
      return NHB_ENOMEM;
  }
  int r = 0;
  if (!mirror) r = nhb__srv_buf_printf(o, "User-Agent: %s\r\n", agent);
  if (r == 0) r = nhb__srv_buf_printf(o, "X-On-Behalf-Of: %s\r\n", f->peer);
  /* Fortio names itself unless the client already is the same program. */
  int same = mirror ? (ua && ua_len == sizeof(agent) - 1 && memcmp(ua, agent, ua_len) == 0) : 1;
  if (r == 0 && !same) r = nhb__srv_buf_printf(o, "X-Proxy-Agent: %s\r\n", agent);
  int has_body_method = f->parser.method == HTTP_POST || f->parser.method == HTTP_PUT || f->parser.method == HTTP_PATCH;
  if (r == 0 && mirror && (f->body_len || has_body_method))
    r = nhb__srv_buf_printf(o, "Content-Length: %llu\r\n", (unsigned long long)f->body_len);
  /* Go's client: the payload's length, or 0 for these methods (exactly). */
  if (r == 0 && !mirror &&
      (f->fm.payload_len || is_method(&f->fm, "POST") || is_method(&f->fm, "PUT") || is_method(&f->fm, "PATCH")))
    r = nhb__srv_buf_printf(o, "Content-Length: %zu\r\n", f->fm.payload_len);
  if (r == 0) r = nhb__srv_buf_append(o, "\r\n", 2);
  return r < 0 ? NHB_ENOMEM : 0;
}

/* The request is complete: out to the targets. */
static void fanout_start(nhb__srv_fanout* f) {
  f->busy = 1;
  const char* m = llhttp_method_name((llhttp_method_t)f->parser.method);
  f->method_len = (size_t)snprintf(f->method, sizeof(f->method), "%s ", m);
  if (f->method_len >= sizeof(f->method)) f->method_len = sizeof(f->method) - 1;
  f->is_head = f->parser.method == HTTP_HEAD;
  f->keep_alive = (uint8_t)llhttp_should_keep_alive(&f->parser);
  if (f->w->server->config.http_fanout_no_mirror) {
    if (nhb__srv_fanout_read_form(f->req.p + f->url_off, f->url_len, &f->form, &f->fm) < 0) {
      fanout_close(f);
      return;
    }
    /* The payload is a body: bounded as the client's would be (it cannot
     * be longer than max_header_bytes either, being in the request line). */
    if (f->fm.payload_len > f->w->server->config.max_body_bytes) {
      f->busy = 0;
      client_refuse(f, 413);
      return;
    }
    if (!f->fm.method_ok) {
      /* Go's http.NewRequest refuses the method (so nothing can be injected
       * into the request line): Fortio sends nothing and its parallel mode
       * answers 503 with an empty body. Its serial mode answers 200 with an
       * empty body; nhbench answers 503 there too, as nothing was sent. */
      for (int i = 0; i < f->ntargets; i++) {
        f->up[i].status = -1;
        f->up[i].body.len = 0;
      }
      fanout_answer(f);
      return;
    }
  }
  int r = build_out(f);
  if (r == 400) {
    f->busy = 0;
    client_refuse(f, 400);
    return;
  }
  if (r < 0) {
    fanout_close(f);
    return;
  }
  for (int i = 0; i < f->ntargets; i++) {
    f->up[i].done = 0;
    f->up[i].retried = 0;
  }
  arm_request_timer(f);
  if (f->w->server->config.http_fanout_serial) {
    up_start(f, 0);
  } else {
    f->pending = f->ntargets;
    for (int i = 0; i < f->ntargets && !f->closing; i++) up_start(f, i);
  }
}

static int on_message_begin(llhttp_t* p) {
  nhb__srv_fanout* f = p->data;
  f->req.len = 0;
  f->nhdrs = 0;
  f->hstate = 0;
  f->url_off = f->url_len = f->body_off = 0;
  f->head_bytes = 0;
  f->body_len = 0;
  f->complete = f->expect_continue = 0;
  /* The head and body must arrive within header_timeout. */
  uint64_t ms = f->w->server->config.header_timeout_ns / NHB__NS_PER_MS;
  if (ms) uv_timer_start(&f->timer, fanout_on_timeout, ms, 0);
  return 0;
}

static int head_grow(nhb__srv_fanout* f, size_t n) {
  f->head_bytes += n;
  if (f->head_bytes > f->w->server->config.max_header_bytes) {
    f->refuse = 431;
    return HPE_USER;
  }
  return 0;
}

static int on_url(llhttp_t* p, const char* at, size_t n) {
  nhb__srv_fanout* f = p->data;
  if (head_grow(f, n)) return HPE_USER;
  if (!f->url_len) f->url_off = f->req.len;
  f->url_len += n;
  return nhb__srv_buf_append(&f->req, at, n) < 0 ? HPE_USER : 0;
}

static int on_header_field(llhttp_t* p, const char* at, size_t n) {
  nhb__srv_fanout* f = p->data;
  if (head_grow(f, n)) return HPE_USER;
  if (f->hstate != 1) {
    if (f->nhdrs >= NHB__SRV_MAX_HEADERS) {
      f->refuse = 431;
      return HPE_USER;
    }
    if (f->nhdrs == f->hdrs_cap) {
      size_t cap = f->hdrs_cap ? f->hdrs_cap * 2 : 32;
      nhb__srv_hdr_pos* h = realloc(f->hdrs, cap * sizeof(*h));
      if (!h) return HPE_USER;
      f->hdrs = h;
      f->hdrs_cap = cap;
    }
    nhb__srv_hdr_pos* h = &f->hdrs[f->nhdrs++];
    h->name_off = f->req.len;
    h->name_len = 0;
    h->value_off = 0;
    h->value_len = 0;
    f->hstate = 1;
  }
  f->hdrs[f->nhdrs - 1].name_len += n;
  return nhb__srv_buf_append(&f->req, at, n) < 0 ? HPE_USER : 0;
}

static int on_header_value(llhttp_t* p, const char* at, size_t n) {
  nhb__srv_fanout* f = p->data;
  if (head_grow(f, n)) return HPE_USER;
  nhb__srv_hdr_pos* h = &f->hdrs[f->nhdrs - 1];
  if (f->hstate != 2) {
    h->value_off = f->req.len;
    f->hstate = 2;
  }
  h->value_len += n;
  return nhb__srv_buf_append(&f->req, at, n) < 0 ? HPE_USER : 0;
}

static int on_header_value_complete(llhttp_t* p) {
  nhb__srv_fanout* f = p->data;
  f->hstate = 0;
  const nhb__srv_hdr_pos* h = &f->hdrs[f->nhdrs - 1];
  if (h->name_len == 6 && strncasecmp(f->req.p + h->name_off, "expect", 6) == 0 && h->value_len == 12 &&
      strncasecmp(f->req.p + h->value_off, "100-continue", 12) == 0)
    f->expect_continue = 1;
  return 0;
}

static int on_headers_complete(llhttp_t* p) {
  nhb__srv_fanout* f = p->data;
  const nhb_server_config* c = &f->w->server->config;
  if ((p->flags & F_CONTENT_LENGTH) && p->content_length > c->max_body_bytes) {
    f->refuse = 413;
    return HPE_USER;
  }
  if (p->upgrade || p->method == HTTP_CONNECT) {
    f->refuse = 400;
    return HPE_USER;
  }
  f->body_off = f->req.len;
  /* curl waits a second for this before it sends a large body. */
  if (f->expect_continue) {
    uv_buf_t b = uv_buf_init("HTTP/1.1 100 Continue\r\n\r\n", 25);
    uv_try_write((uv_stream_t*)&f->tcp, &b, 1);
  }
  return 0;
}

static int on_body(llhttp_t* p, const char* at, size_t n) {
  nhb__srv_fanout* f = p->data;
  if (f->body_len + n > f->w->server->config.max_body_bytes) {
    f->refuse = 413;
    return HPE_USER;
  }
  f->body_len += n;
  return nhb__srv_buf_append(&f->req, at, n) < 0 ? HPE_USER : 0;
}

static int on_message_complete(llhttp_t* p) {
  nhb__srv_fanout* f = p->data;
  f->complete = 1;
  return HPE_PAUSED;
}

static const llhttp_settings_t client_settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_header_value_complete = on_header_value_complete,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

static void set_reading(nhb__srv_fanout* f, int want) {
  if (want == f->reading || f->closing) return;
  if (want) {
    if (uv_read_start((uv_stream_t*)&f->tcp, fanout_alloc, client_on_read) < 0) {
      fanout_close(f);
      return;
    }
  } else {
    uv_read_stop((uv_stream_t*)&f->tcp);
  }
  f->reading = (uint8_t)want;
}

/* Parses client input; a complete request goes out to the targets and the
 * rest waits in the stash until its response is written. */
static void parse_input(nhb__srv_fanout* f, const char* p, size_t n) {
  if (f->complete) llhttp_resume(&f->parser);
  f->complete = 0;
  llhttp_errno_t e = llhttp_execute(&f->parser, p, n);
  if (e == HPE_PAUSED && f->complete) {
    const char* pos = llhttp_get_error_pos(&f->parser);
    size_t used = pos ? (size_t)(pos - p) : n;
    f->stash.len = 0;
    if (used < n && nhb__srv_buf_append(&f->stash, p + used, n - used) < 0) {
      fanout_close(f);
      return;
    }
    /* Reading goes on (into the stash) so that a client that leaves is
     * noticed while its request is out. */
    set_reading(f, f->stash.len < FANOUT_MAX_STASH);
    fanout_start(f);
    return;
  }
  if (e != HPE_OK) {
    client_refuse(f, f->refuse ? f->refuse : 400);
    set_reading(f, 0);
    return;
  }
  set_reading(f, 1);
}

static void client_on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
  nhb__srv_fanout* f = stream->data;
  if (f->closing) return;
  if (nread > 0) {
    if (f->busy || f->writing) {
      if (nhb__srv_buf_append(&f->stash, buf->base, (size_t)nread) < 0) fanout_close(f);
      else if (f->stash.len >= FANOUT_MAX_STASH) set_reading(f, 0);
      return;
    }
    parse_input(f, buf->base, (size_t)nread);
  } else if (nread < 0) {
    /* Gone (or half-closed, which Go's server also takes as gone): the
     * requests out to the targets are abandoned. */
    fanout_close(f);
  }
}

static void arm_idle(nhb__srv_fanout* f) {
  uint64_t ms = f->w->server->config.idle_timeout_ns / NHB__NS_PER_MS;
  if (ms) uv_timer_start(&f->timer, fanout_on_timeout, ms, 0);
  else uv_timer_stop(&f->timer);
  set_reading(f, 1);
}

void nhb__srv_fanout_open(nhb__srv_worker* w, int fd, int index) {
  nhb_server* s = w->server;
  int n = s->config.http_fanout_ntargets[index];
  nhb__srv_fanout* f = calloc(1, sizeof(*f) + (size_t)n * sizeof(fanout_up));
  if (!f) {
    close(fd);
    atomic_fetch_sub_explicit(&s->conns_open, 1 + (uint64_t)n, memory_order_relaxed);
    return;
  }
  f->w = w;
  f->ntargets = n;
  f->targets = s->config.http_fanout_target[index];
  for (int i = 0; i < n; i++) {
    f->up[i].f = f;
    f->up[i].idx = i;
  }
  uv_tcp_init(&w->loop, &f->tcp);
  uv_timer_init(&w->loop, &f->timer);
  f->tcp.data = f->timer.data = f;
  f->nopen = 2;
  f->next = w->fanouts;
  if (w->fanouts) w->fanouts->prev = f;
  w->fanouts = f;
  llhttp_init(&f->parser, HTTP_REQUEST, &client_settings);
  f->parser.data = f;
  /* From here fanout_free() gives back what the connection holds. */
  if (uv_tcp_open(&f->tcp, fd) < 0) {
    close(fd); /* not the handle's yet */
    fanout_close(f);
    return;
  }
  nhb__srv_bump(&w->counters.fanout_connections, 1);
  uv_tcp_nodelay(&f->tcp, 1);
  struct sockaddr_storage ss;
  int len = sizeof(ss);
  char ip[INET6_ADDRSTRLEN] = "";
  if (uv_tcp_getpeername(&f->tcp, (struct sockaddr*)&ss, &len) == 0) {
    if (ss.ss_family == AF_INET) {
      const struct sockaddr_in* a = (const struct sockaddr_in*)&ss;
      inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
      snprintf(f->peer, sizeof(f->peer), "%s:%u", ip, ntohs(a->sin_port));
    } else if (ss.ss_family == AF_INET6) {
      const struct sockaddr_in6* a = (const struct sockaddr_in6*)&ss;
      inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof(ip));
      snprintf(f->peer, sizeof(f->peer), "[%s]:%u", ip, ntohs(a->sin6_port));
    }
  }
  arm_idle(f);
}

void nhb__srv_fanout_close_all(nhb__srv_worker* w) {
  while (w->fanouts) fanout_close(w->fanouts);
}
