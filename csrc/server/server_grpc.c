/* server_grpc.c: gRPC calls in the test server.
 *
 * gRPC is HTTP/2 with rules of its own: a call is a POST whose content-type
 * is application/grpc (or application/grpc+proto, ...), its path names the
 * method (/package.Service/Method), request and response messages travel
 * in DATA frames each behind a 5-byte prefix (a compressed flag, then the
 * length, big-endian), and the outcome is a grpc-status (and grpc-message)
 * in the trailers, or in the only HEADERS frame of a "trailers-only"
 * response when there is no message to send. server_h2.c captures the call
 * like any request, asks this file for the answer and renders it.
 *
 * Served, so that gRPC load tools can test against nhbench and nhbench can
 * test itself:
 *   /grpc.health.v1.Health/Check   gRPC's standard health check
 *   /fgrpc.PingServer/Ping         Fortio's ping service (its package is
 *   /fortio.PingServer/Ping        "fgrpc"; the second name is an alias)
 * Anything else is UNIMPLEMENTED, as a gRPC server answers an unknown
 * method. The protobuf messages are few and tiny, so they are encoded and
 * decoded by hand here (varints and length-delimited fields; every unknown
 * field of every wire type is skipped) rather than with a protobuf library:
 * nothing is allocated but the response bytes in the stream's own buffer.
 *
 * The status codes follow gRPC's status code document and grpc-go's server,
 * the reference most load tools are built on: a message over the 4 MiB
 * receive limit is RESOURCE_EXHAUSTED, a compressed flag without a
 * compression is INTERNAL and a compression the server cannot read is
 * UNIMPLEMENTED, a unary call with no message or more than one is
 * UNIMPLEMENTED ("cardinality violation"), a message that does not decode
 * (a truncated frame, malformed protobuf, a string that is not UTF-8) is
 * INTERNAL, and a malformed grpc-timeout is INTERNAL.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "server/server_internal.h"

/* Fortio's ping service refuses nothing; it sleeps for delayNanos. A delay
 * is capped at --max-delay, the cap of the server's other service delays, so
 * that one request cannot hold a stream for hours. */

/* Groups (wire types 3 and 4, deprecated since proto2) nest: unknown groups
 * are skipped with a stack of their field numbers, this deep at most. */
#define PB_MAX_GROUP_DEPTH 64

enum { PB_VARINT = 0, PB_I64 = 1, PB_LEN = 2, PB_SGROUP = 3, PB_EGROUP = 4, PB_I32 = 5 };

/* ---- the request head --------------------------------------------------------- */

static int ci_eq(const uint8_t* a, size_t alen, const char* b) {
  size_t blen = strlen(b);
  return alen == blen && strncasecmp((const char*)a, b, blen) == 0;
}

/* grpc-timeout: at most 8 digits and a unit (H, M, S, m, u, n), as the gRPC
 * over HTTP/2 specification writes it. */
static int parse_timeout(const uint8_t* v, size_t len, uint64_t* out_ns) {
  if (len < 2 || len > 9) return -1;
  uint64_t n = 0;
  for (size_t i = 0; i + 1 < len; i++) {
    if (v[i] < '0' || v[i] > '9') return -1;
    n = n * 10 + (uint64_t)(v[i] - '0');
  }
  uint64_t unit;
  switch (v[len - 1]) {
    case 'H': unit = 3600ull * 1000000000ull; break;
    case 'M': unit = 60ull * 1000000000ull; break;
    case 'S': unit = 1000000000ull; break;
    case 'm': unit = 1000000ull; break;
    case 'u': unit = 1000ull; break;
    case 'n': unit = 1ull; break;
    default: return -1;
  }
  /* 99999999 hours does not fit in nanoseconds: such a deadline is none. */
  *out_ns = n > UINT64_MAX / unit ? UINT64_MAX : n * unit;
  if (*out_ns == 0) *out_ns = 1; /* 0n: already expired, not "no deadline" */
  return 0;
}

void nhb__srv_grpc_note_header(nhb__srv_grpc_head* g, const uint8_t* name, size_t name_len, const uint8_t* value,
                               size_t value_len) {
  switch (name_len) {
    case 12:
      if (ci_eq(name, name_len, "content-type")) {
        /* application/grpc, then nothing, a '+' (a codec: +proto, +json)
         * or a ';' (parameters), as gRPC servers accept it. */
        static const char ct[] = "application/grpc";
        size_t n = sizeof(ct) - 1;
        g->content_type = value_len >= n && strncasecmp((const char*)value, ct, n) == 0 &&
                          (value_len == n || value[n] == '+' || value[n] == ';');
      } else if (ci_eq(name, name_len, "grpc-timeout")) {
        g->bad_timeout = parse_timeout(value, value_len, &g->timeout_ns) < 0;
        if (g->bad_timeout) g->timeout_ns = 0;
      }
      break;
    case 13:
      if (ci_eq(name, name_len, "grpc-encoding")) g->encoded = !ci_eq(value, value_len, "identity");
      break;
    default:
      break;
  }
}

/* ---- framing --------------------------------------------------------------------- */

static uint32_t be32(const char* p) {
  const uint8_t* u = (const uint8_t*)p;
  return (uint32_t)u[0] << 24 | (uint32_t)u[1] << 16 | (uint32_t)u[2] << 8 | (uint32_t)u[3];
}

/* The answer the 5-byte prefix alone decides, or -1 to read on. */
static int prefix_verdict(const nhb__srv_grpc_head* g, const char* body, const char** msg) {
  uint8_t flag = (uint8_t)body[0];
  if (flag == 1) {
    /* grpc-go: a compressed message without a grpc-encoding is the
     * client's error; a compression the server does not have is
     * UNIMPLEMENTED (gRPC's status code document says the same). */
    if (!g->encoded) {
      *msg = "grpc: compressed flag set with identity or empty encoding";
      return NHB__SRV_GRPC_INTERNAL;
    }
    *msg = "grpc: the nhbench test server reads no compressed messages";
    return NHB__SRV_GRPC_UNIMPLEMENTED;
  }
  if (flag != 0) {
    *msg = "grpc: received unexpected payload format";
    return NHB__SRV_GRPC_INTERNAL;
  }
  if (be32(body + 1) > NHB__SRV_GRPC_MAX_MSG) {
    *msg = "grpc: received message larger than max (4194304 bytes)";
    return NHB__SRV_GRPC_RESOURCE_EXHAUSTED;
  }
  return -1;
}

int nhb__srv_grpc_early(const nhb__srv_grpc_head* g, const char* body, size_t len) {
  const char* msg;
  return len >= 5 && prefix_verdict(g, body, &msg) >= 0;
}

/* ---- protobuf ------------------------------------------------------------------------ */

typedef struct pb_reader {
  const uint8_t* p;
  const uint8_t* end;
} pb_reader;

static int pb_varint(pb_reader* r, uint64_t* out) {
  uint64_t v = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (r->p >= r->end) return -1;
    uint8_t b = *r->p++;
    /* The tenth byte carries the top bit only. */
    if (shift == 63 && b > 1) return -1;
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *out = v;
      return 0;
    }
  }
  return -1;
}

/* Skips the value of a field of wire type `wire` whose key was just read.
 * Groups are skipped whole; their end must name their field. */
static int pb_skip(pb_reader* r, unsigned wire, uint64_t field) {
  uint64_t stack[PB_MAX_GROUP_DEPTH];
  int depth = 0;
  for (;;) {
    uint64_t v;
    switch (wire) {
      case PB_VARINT:
        if (pb_varint(r, &v) < 0) return -1;
        break;
      case PB_I64:
        if (r->end - r->p < 8) return -1;
        r->p += 8;
        break;
      case PB_I32:
        if (r->end - r->p < 4) return -1;
        r->p += 4;
        break;
      case PB_LEN:
        if (pb_varint(r, &v) < 0 || v > (uint64_t)(r->end - r->p)) return -1;
        r->p += v;
        break;
      case PB_SGROUP:
        if (depth == PB_MAX_GROUP_DEPTH) return -1;
        stack[depth++] = field;
        break;
      case PB_EGROUP:
        if (depth == 0 || stack[depth - 1] != field) return -1;
        depth--;
        break;
      default:
        return -1;
    }
    if (depth == 0) return 0;
    /* Inside a group: the next field. */
    uint64_t key;
    if (pb_varint(r, &key) < 0) return -1;
    wire = (unsigned)(key & 7);
    field = key >> 3;
    if (field == 0 || field > 0x1fffffff) return -1;
  }
}

/* Reads the next field's key; 1 at the end of the message, -1 when malformed. */
static int pb_key(pb_reader* r, uint64_t* field, unsigned* wire) {
  if (r->p == r->end) return 1;
  uint64_t key;
  if (pb_varint(r, &key) < 0) return -1;
  *wire = (unsigned)(key & 7);
  *field = key >> 3;
  /* An end-group key outside a group, field 0, or a number over 2^29 - 1. */
  if (*field == 0 || *field > 0x1fffffff || *wire == PB_EGROUP) return -1;
  return 0;
}

/* proto3 strings must be UTF-8; gRPC's protobuf libraries refuse others. */
static int utf8_ok(const uint8_t* s, size_t n) {
  size_t i = 0;
  while (i < n) {
    uint8_t c = s[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    size_t len;
    uint32_t cp;
    if (c >= 0xc2 && c <= 0xdf) len = 2, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef) len = 3, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4) len = 4, cp = c & 0x07;
    else return 0;
    if (n - i < len) return 0;
    for (size_t k = 1; k < len; k++) {
      if ((s[i + k] & 0xc0) != 0x80) return 0;
      cp = cp << 6 | (s[i + k] & 0x3f);
    }
    /* Overlong forms, surrogates, beyond U+10FFFF. */
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff))
      return 0;
    i += len;
  }
  return 1;
}

static size_t put_varint(uint8_t* p, uint64_t v) {
  size_t n = 0;
  while (v >= 0x80) {
    p[n++] = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  p[n++] = (uint8_t)v;
  return n;
}

/* ---- services ------------------------------------------------------------------------- */

typedef struct call {
  nhb__srv_buf* out;
  nhb__srv_grpc_answer* a;
} call;

/* grpc-message is percent-encoded (gRPC over HTTP/2): every byte outside
 * printable ASCII, and '%' itself. */
static int set_message(call* k, const char* text, const char* arg, size_t arg_len) {
  nhb__srv_buf* b = k->out;
  size_t tlen = strlen(text);
  /* The name quoted is the client's: kept short, so that the trailers stay
   * well under a client's metadata limit (grpc-go and grpcio: 8 KiB). */
  if (arg_len > 200) arg_len = 200;
  if (nhb__srv_buf_reserve(b, tlen + 3 * arg_len + 2) < 0) return NHB_ENOMEM;
  k->a->msg_off = b->len;
  static const char hex[] = "0123456789ABCDEF";
  for (size_t i = 0; i < tlen; i++) {
    /* "%s" in text marks where the argument (the method's name) goes. */
    if (text[i] == '%' && text[i + 1] == 's') {
      for (size_t j = 0; j < arg_len; j++) {
        uint8_t ch = (uint8_t)arg[j];
        if (ch >= 0x20 && ch <= 0x7e && ch != '%') {
          b->p[b->len++] = (char)ch;
        } else {
          b->p[b->len++] = '%';
          b->p[b->len++] = hex[ch >> 4];
          b->p[b->len++] = hex[ch & 15];
        }
      }
      i++;
      continue;
    }
    b->p[b->len++] = text[i];
  }
  k->a->msg_len = b->len - k->a->msg_off;
  return 0;
}

static int fail(call* k, unsigned code, const char* text, const char* arg, size_t arg_len) {
  k->a->code = code;
  k->a->body_len = 0;
  return set_message(k, text, arg, arg_len);
}

/* The one answer to a request message protobuf cannot parse, as grpc-go words it. */
static int malformed(call* k) {
  return fail(k, NHB__SRV_GRPC_INTERNAL, "grpc: error unmarshalling request: malformed protobuf", "", 0);
}

/* Reads the value of a length-delimited field whose key was just read: its
 * bytes stay in the message. Returns -1 if the length runs past the end. */
static int pb_bytes(pb_reader* r, const uint8_t** at, size_t* len) {
  uint64_t v;
  if (pb_varint(r, &v) < 0 || v > (uint64_t)(r->end - r->p)) return -1;
  *at = r->p;
  *len = (size_t)v;
  r->p += v;
  return 0;
}

/* Reserves the 5-byte prefix of the response message; the message follows. */
static int begin_message(call* k, size_t max_len) {
  if (nhb__srv_buf_reserve(k->out, 5 + max_len) < 0) return NHB_ENOMEM;
  k->a->body_off = k->out->len;
  k->out->len += 5;
  return 0;
}

static void end_message(call* k) {
  nhb__srv_buf* b = k->out;
  size_t n = b->len - k->a->body_off - 5;
  uint8_t* p = (uint8_t*)b->p + k->a->body_off;
  p[0] = 0;
  p[1] = (uint8_t)(n >> 24);
  p[2] = (uint8_t)(n >> 16);
  p[3] = (uint8_t)(n >> 8);
  p[4] = (uint8_t)n;
  k->a->body_len = b->len - k->a->body_off;
  k->a->code = NHB__SRV_GRPC_OK;
}

/* HealthCheckRequest {string service = 1} -> HealthCheckResponse
 * {ServingStatus status = 1}. Known: "" (the server as a whole) and
 * Fortio's own names, "ping" (SERVING) and "ping_down" (NOT_SERVING), so
 * that Fortio's health checks find what they find on `fortio server`.
 * Anything else is NOT_FOUND, as grpc-go's health server answers. */
static int health_check(call* k, const uint8_t* m, size_t n) {
  pb_reader r = {m, m + n};
  const uint8_t* svc = NULL;
  size_t svc_len = 0;
  for (;;) {
    uint64_t field;
    unsigned wire;
    int e = pb_key(&r, &field, &wire);
    if (e > 0) break;
    if (e < 0) return malformed(k);
    if (field == 1 && wire == PB_LEN) {
      if (pb_bytes(&r, &svc, &svc_len) < 0) return malformed(k);
    } else if (pb_skip(&r, wire, field) < 0) {
      return malformed(k);
    }
  }
  if (svc_len && !utf8_ok(svc, svc_len))
    return fail(k, NHB__SRV_GRPC_INTERNAL, "grpc: error unmarshalling request: service is not UTF-8", "", 0);
  unsigned status;
  if (svc_len == 0 || (svc_len == 4 && memcmp(svc, "ping", 4) == 0)) status = 1; /* SERVING */
  else if (svc_len == 9 && memcmp(svc, "ping_down", 9) == 0) status = 2;          /* NOT_SERVING */
  else return fail(k, NHB__SRV_GRPC_NOT_FOUND, "unknown service %s", (const char*)svc, svc_len);
  if (begin_message(k, 2) < 0) return NHB_ENOMEM;
  k->out->p[k->out->len++] = 0x08; /* field 1, varint */
  k->out->p[k->out->len++] = (char)status;
  end_message(k);
  return 0;
}

/* Fortio's PingMessage {int64 seq = 1; int64 ts = 2; string payload = 3;
 * int64 delayNanos = 4}: Fortio's server answers a copy of the request
 * with ts set to its clock (Unix nanoseconds), after sleeping delayNanos.
 * Here the sleep is the stream's deadline on the worker's timer, capped at
 * --max-delay. A known field of an unexpected wire type is an unknown field,
 * as protobuf's parsers treat it; unknown fields are not echoed. */
static int ping(call* k, nhb_server* s, const uint8_t* m, size_t n) {
  pb_reader r = {m, m + n};
  uint64_t seq = 0, delay = 0;
  const uint8_t* payload = NULL;
  size_t payload_len = 0;
  for (;;) {
    uint64_t field, v;
    unsigned wire;
    int e = pb_key(&r, &field, &wire);
    if (e > 0) break;
    if (e < 0) return malformed(k);
    if ((field == 1 || field == 2 || field == 4) && wire == PB_VARINT) {
      if (pb_varint(&r, &v) < 0) return malformed(k);
      if (field == 1) seq = v;
      else if (field == 4) delay = v;
    } else if (field == 3 && wire == PB_LEN) {
      if (pb_bytes(&r, &payload, &payload_len) < 0) return malformed(k);
    } else if (pb_skip(&r, wire, field) < 0) {
      return malformed(k);
    }
  }
  if (payload_len && !utf8_ok(payload, payload_len))
    return fail(k, NHB__SRV_GRPC_INTERNAL, "grpc: error unmarshalling request: payload is not UTF-8", "", 0);
  /* An int64: negative delays are none. */
  int64_t d = (int64_t)delay;
  uint64_t delay_ns = d > 0 ? (uint64_t)d : 0;
  if (delay_ns > s->config.max_delay_ns) delay_ns = s->config.max_delay_ns;
  k->a->delay_ns = delay_ns;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
  /* Four keys, three varints of at most 10 bytes, a length. */
  if (begin_message(k, 4 + 3 * 10 + 10 + payload_len) < 0) return NHB_ENOMEM;
  uint8_t* p = (uint8_t*)k->out->p + k->out->len;
  size_t at = 0;
  /* proto3: fields at their default value (0, "") are not written. */
  if (seq) p[at++] = 0x08, at += put_varint(p + at, seq);
  p[at++] = 0x10;
  at += put_varint(p + at, now);
  if (payload_len) {
    p[at++] = 0x1a;
    at += put_varint(p + at, payload_len);
    memcpy(p + at, payload, payload_len);
    at += payload_len;
  }
  if (delay) p[at++] = 0x20, at += put_varint(p + at, delay);
  k->out->len += at;
  end_message(k);
  return 0;
}

/* The server's own delays that apply to every call: Nighthawk's static or
 * concurrency-based delay, capped as for HTTP. */
static uint64_t server_delay(nhb__srv_worker* w) {
  nhb_server* s = w->server;
  const nhb__srv_nh_opts* nh = &s->nh;
  uint64_t d = 0;
  if (nh->delay_kind == NHB__SRV_DELAY_STATIC) {
    d = nh->static_delay_ns;
  } else if (nh->delay_kind == NHB__SRV_DELAY_LINEAR) {
    uint64_t n = (uint64_t)w->delayed + 1;
    d = nh->linear_factor_ns > (UINT64_MAX - nh->linear_min_ns) / n ? UINT64_MAX
                                                                   : nh->linear_min_ns + nh->linear_factor_ns * n;
  }
  return d > s->config.max_delay_ns ? s->config.max_delay_ns : d;
}

enum { SVC_NONE = 0, SVC_HEALTH, SVC_PING };

int nhb__srv_grpc_answer_call(nhb__srv_worker* w, const nhb__srv_grpc_head* g, const char* path, size_t path_len,
                              const char* body, size_t len, uint64_t body_total, nhb__srv_buf* out,
                              nhb__srv_grpc_answer* a) {
  memset(a, 0, sizeof(*a));
  call k = {out, a};
  if (g->bad_timeout) return fail(&k, NHB__SRV_GRPC_INTERNAL, "malformed grpc-timeout", "", 0);
  /* The method: /service/method, as grpc-go splits it. */
  const char* slash = path_len > 1 && path[0] == '/' ? memchr(path + 1, '/', path_len - 1) : NULL;
  if (!slash) return fail(&k, NHB__SRV_GRPC_UNIMPLEMENTED, "malformed method name: %s", path, path_len);
  const char* svc = path + 1;
  size_t svc_len = (size_t)(slash - svc);
  const char* method = slash + 1;
  size_t method_len = path_len - (size_t)(method - path);
  int which = SVC_NONE;
#define IS(p, n, lit) ((n) == sizeof(lit) - 1 && memcmp((p), (lit), (n)) == 0)
  if (IS(svc, svc_len, "grpc.health.v1.Health")) {
    if (IS(method, method_len, "Check")) which = SVC_HEALTH;
    /* Watch is a server stream that stays open for status changes, and
     * this server's statuses never change: not served. */
  } else if (IS(svc, svc_len, "fgrpc.PingServer") || IS(svc, svc_len, "fortio.PingServer")) {
    if (IS(method, method_len, "Ping")) which = SVC_PING;
  } else {
    return fail(&k, NHB__SRV_GRPC_UNIMPLEMENTED, "unknown service %s", svc, svc_len);
  }
#undef IS
  if (which == SVC_NONE) return fail(&k, NHB__SRV_GRPC_UNIMPLEMENTED, "unknown method %s", path + 1, path_len - 1);
  /* Exactly one message, whole. */
  if (body_total == 0)
    return fail(&k, NHB__SRV_GRPC_UNIMPLEMENTED, "grpc: cardinality violation: no request message", "", 0);
  if (len < 5) return fail(&k, NHB__SRV_GRPC_INTERNAL, "grpc: truncated message prefix", "", 0);
  const char* why = NULL;
  int code = prefix_verdict(g, body, &why);
  if (code >= 0) return fail(&k, (unsigned)code, why, "", 0);
  uint32_t mlen = be32(body + 1);
  if (len - 5 < mlen) return fail(&k, NHB__SRV_GRPC_INTERNAL, "grpc: truncated message", "", 0);
  if (body_total > 5 + (uint64_t)mlen)
    return fail(&k, NHB__SRV_GRPC_UNIMPLEMENTED,
                "grpc: cardinality violation: more than one request message for a unary method", "", 0);
  const uint8_t* m = (const uint8_t*)body + 5;
  int r = which == SVC_HEALTH ? health_check(&k, m, mlen) : ping(&k, w->server, m, mlen);
  if (r < 0) return r;
  /* A refused request is answered at once; an answer waits for the
   * service's delay and the server's own. */
  if (a->code != NHB__SRV_GRPC_OK) return 0;
  uint64_t extra = server_delay(w);
  a->delay_ns = a->delay_ns > UINT64_MAX - extra ? UINT64_MAX : a->delay_ns + extra;
  if (g->timeout_ns && a->delay_ns >= g->timeout_ns) {
    /* The answer would come after the client's deadline: grpc-go's server
     * ends such a call with DEADLINE_EXCEEDED when the deadline passes. */
    uint64_t t = g->timeout_ns;
    if (fail(&k, NHB__SRV_GRPC_DEADLINE_EXCEEDED, "grpc: the deadline passed before the answer was due", "", 0) < 0)
      return NHB_ENOMEM;
    a->delay_ns = t;
  }
  return 0;
}
