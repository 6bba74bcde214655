/* server_options.c: the test server's option parsers.
 *
 * - durations, in Go's syntax ("1.5s", "150us", "1m30s") as Fortio and
 *   protobuf-JSON durations ("0.5s") write them, or a bare number of seconds;
 * - Nighthawk's ResponseOptions as JSON (cJSON), used for the static config
 *   and for the per-request x-nighthawk-test-server-config header alike, in
 *   protobuf's relaxed syntax too ({response_body_size:20}: see relax_json);
 * - Fortio's echo query parameters, each a value or a probability list.
 *
 * Parsers copy the strings they keep into an arena reserved before the first
 * copy, so the pointers they hand out stay valid until the arena is reset.
 */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server/server_internal.h"

static int fail(char* err, size_t err_len, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char* err, size_t err_len, const char* fmt, ...) {
  if (err && err_len) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
  }
  return -1;
}

/* Quotes at most 40 bytes of untrusted input for an error message, with
 * anything unprintable shown as '?'. */
static const char* shown(const char* s, size_t len, char out[48]) {
  size_t n = len < 40 ? len : 40, i;
  for (i = 0; i < n; i++) out[i] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
  if (len > n) {
    memcpy(out + n, "...", 3);
    n += 3;
  }
  out[n] = '\0';
  return out;
}

/* ---- durations -------------------------------------------------------------- */

int nhb__srv_parse_duration(const char* s, size_t len, uint64_t* out_ns) {
  size_t i = 0;
  double total = 0;
  if (len == 0) return -1;
  if (s[0] == '+') i++;
  if (i == len) return -1;
  int components = 0;
  while (i < len) {
    /* A decimal number: digits, optionally a fraction. */
    size_t start = i;
    double v = 0;
    int digits = 0;
    while (i < len && s[i] >= '0' && s[i] <= '9') {
      v = v * 10 + (s[i++] - '0');
      digits++;
    }
    if (i < len && s[i] == '.') {
      double scale = 0.1;
      i++;
      while (i < len && s[i] >= '0' && s[i] <= '9') {
        v += (s[i++] - '0') * scale;
        scale /= 10;
        digits++;
      }
    }
    if (digits == 0 || i == start) return -1;
    /* The unit; none at all means seconds, but only for a lone number. */
    double unit;
    if (i == len) {
      if (components > 0) return -1;
      unit = 1e9;
    } else if (len - i >= 2 && s[i] == 'n' && s[i + 1] == 's') {
      unit = 1, i += 2;
    } else if (len - i >= 2 && s[i] == 'u' && s[i + 1] == 's') {
      unit = 1e3, i += 2;
    } else if (len - i >= 3 && (unsigned char)s[i] == 0xc2 && (unsigned char)s[i + 1] == 0xb5 && s[i + 2] == 's') {
      unit = 1e3, i += 3; /* U+00B5 micro sign */
    } else if (len - i >= 3 && (unsigned char)s[i] == 0xce && (unsigned char)s[i + 1] == 0xbc && s[i + 2] == 's') {
      unit = 1e3, i += 3; /* U+03BC Greek mu */
    } else if (len - i >= 2 && s[i] == 'm' && s[i + 1] == 's') {
      unit = 1e6, i += 2;
    } else if (s[i] == 's') {
      unit = 1e9, i += 1;
    } else if (s[i] == 'm') {
      unit = 60e9, i += 1;
    } else if (s[i] == 'h') {
      unit = 3600e9, i += 1;
    } else {
      return -1;
    }
    total += v * unit;
    components++;
  }
  /* More than 100 years is a mistake, not a duration. */
  if (!(total >= 0) || total > 3.2e18) return -1;
  *out_ns = (uint64_t)llround(total);
  return 0;
}

/* ---- header syntax ------------------------------------------------------------ */

int nhb__srv_token_ok(const char* s, size_t len) {
  if (len == 0) return 0;
  for (size_t i = 0; i < len; i++) {
    unsigned char ch = (unsigned char)s[i];
    if (isalnum(ch)) continue;
    if (!strchr("!#$%&'*+-.^_`|~", ch) || ch == 0) return 0;
  }
  return 1;
}

int nhb__srv_value_ok(const char* s, size_t len) {
  for (size_t i = 0; i < len; i++) {
    unsigned char ch = (unsigned char)s[i];
    if ((ch < 0x20 && ch != '\t') || ch == 0x7f) return 0;
  }
  return 1;
}

/* Headers the server itself frames the response with. */
static int reserved_header(const char* name, size_t len) {
  return (len == 14 && strncasecmp(name, "content-length", 14) == 0) ||
         (len == 17 && strncasecmp(name, "transfer-encoding", 17) == 0) ||
         (len == 10 && strncasecmp(name, "connection", 10) == 0);
}

/* ---- Nighthawk ResponseOptions --------------------------------------------------- */

/* Proto JSON accepts the snake_case field name and its lowerCamelCase form. */
static int field_is(const char* name, const char* snake, const char* camel) {
  return strcmp(name, snake) == 0 || (camel && strcmp(name, camel) == 0);
}

static int json_duration(const cJSON* v, uint64_t* ns) {
  if (cJSON_IsNumber(v)) {
    double d = v->valuedouble;
    if (!(d >= 0) || d > 3.2e9) return -1;
    *ns = (uint64_t)llround(d * 1e9);
    return 0;
  }
  if (cJSON_IsString(v)) return nhb__srv_parse_duration(v->valuestring, strlen(v->valuestring), ns);
  return -1;
}

static int json_uint(const cJSON* v, uint64_t max, uint64_t* out) {
  /* uint32 fields may come as numbers or, in proto JSON, as strings. */
  if (cJSON_IsNumber(v)) {
    double d = v->valuedouble;
    if (!(d >= 0) || d > (double)max || d != floor(d)) return -1;
    *out = (uint64_t)d;
    return 0;
  }
  if (cJSON_IsString(v)) {
    const char* s = v->valuestring;
    if (!*s) return -1;
    uint64_t n = 0;
    for (; *s; s++) {
      if (*s < '0' || *s > '9') return -1;
      n = n * 10 + (uint64_t)(*s - '0');
      if (n > max) return -1;
    }
    *out = n;
    return 0;
  }
  return -1;
}

static int json_bool(const cJSON* v, int* out) {
  if (!cJSON_IsBool(v)) return -1;
  *out = cJSON_IsTrue(v) ? 1 : 0;
  return 0;
}

static int copy_str(nhb__srv_arena* a, const char* s, nhb__srv_str* out) {
  size_t n = strlen(s);
  char* p = nhb__srv_arena_alloc(a, n + 1);
  if (!p) return -1;
  memcpy(p, s, n + 1);
  out->p = p;
  out->len = n;
  return 0;
}

/* {"header": {"key": k, "value": v}, "append": bool} */
static int parse_header_option(const cJSON* item, nhb__srv_header* h, nhb__srv_arena* a, char* err, size_t err_len,
                               const char* field) {
  if (!cJSON_IsObject(item)) return fail(err, err_len, "%s: each entry must be an object", field);
  const cJSON* header = NULL;
  h->append = 0;
  for (const cJSON* f = item->child; f; f = f->next) {
    if (strcmp(f->string, "header") == 0) {
      header = f;
    } else if (strcmp(f->string, "append") == 0) {
      if (cJSON_IsNull(f)) continue;
      /* Envoy writes BoolValue wrappers as plain booleans in JSON. */
      if (json_bool(f, &h->append) < 0) return fail(err, err_len, "%s: 'append' must be a boolean", field);
    } else if (strcmp(f->string, "keep_empty_value") == 0 || strcmp(f->string, "keepEmptyValue") == 0 ||
               strcmp(f->string, "append_action") == 0 || strcmp(f->string, "appendAction") == 0) {
      /* Envoy's other HeaderValueOption fields: accepted, and only
       * APPEND_IF_EXISTS_OR_ADD (the meaning of append) is honoured. */
      if (cJSON_IsString(f) && (strcmp(f->string, "append_action") == 0 || strcmp(f->string, "appendAction") == 0))
        h->append = strcmp(f->valuestring, "OVERWRITE_IF_EXISTS_OR_ADD") != 0;
    } else {
      char q[48];
      return fail(err, err_len, "%s: unknown field '%s'", field, shown(f->string, strlen(f->string), q));
    }
  }
  if (!cJSON_IsObject(header)) return fail(err, err_len, "%s: each entry needs a 'header' object", field);
  const cJSON* key = NULL;
  const cJSON* value = NULL;
  for (const cJSON* f = header->child; f; f = f->next) {
    if (strcmp(f->string, "key") == 0) key = f;
    else if (strcmp(f->string, "value") == 0) value = f;
    else if (strcmp(f->string, "raw_value") == 0 || strcmp(f->string, "rawValue") == 0) value = f;
    else {
      char q[48];
      return fail(err, err_len, "%s: unknown field 'header.%s'", field, shown(f->string, strlen(f->string), q));
    }
  }
  if (!cJSON_IsString(key)) return fail(err, err_len, "%s: 'header.key' must be a string", field);
  if (value && !cJSON_IsString(value) && !cJSON_IsNull(value))
    return fail(err, err_len, "%s: 'header.value' must be a string", field);
  const char* v = cJSON_IsString(value) ? value->valuestring : "";
  char q[48];
  if (!nhb__srv_token_ok(key->valuestring, strlen(key->valuestring)))
    return fail(err, err_len, "%s: invalid header name '%s'", field,
                shown(key->valuestring, strlen(key->valuestring), q));
  if (reserved_header(key->valuestring, strlen(key->valuestring)))
    return fail(err, err_len, "%s: header '%s' is set by the server", field, key->valuestring);
  if (!nhb__srv_value_ok(v, strlen(v)))
    return fail(err, err_len, "%s: invalid value for header '%s'", field, key->valuestring);
  if (copy_str(a, key->valuestring, &h->name) < 0 || copy_str(a, v, &h->value) < 0)
    return fail(err, err_len, "%s: out of memory", field);
  return 0;
}

static int count_headers(const cJSON* root, size_t* n) {
  *n = 0;
  for (const cJSON* f = root->child; f; f = f->next)
    if (cJSON_IsArray(f)) *n += (size_t)cJSON_GetArraySize(f);
  return 0;
}

static int nh_parse_tree(const cJSON* root, size_t json_len, nhb__srv_nh_opts* o, nhb__srv_arena* a, char* err,
                         size_t err_len) {
  if (!cJSON_IsObject(root)) return fail(err, err_len, "expected a JSON object");
  size_t nh;
  count_headers(root, &nh);
  /* Decoded strings are never longer than their JSON text. */
  size_t need = json_len + 32 * nh + 64 + nh * sizeof(nhb__srv_header);
  if (nhb__srv_arena_reset(a, need) < 0) return fail(err, err_len, "out of memory");
  o->headers = nh ? nhb__srv_arena_alloc(a, nh * sizeof(nhb__srv_header)) : NULL;
  int has_static = 0, has_linear = 0;
  for (const cJSON* f = root->child; f; f = f->next) {
    const char* name = f->string;
    if (cJSON_IsNull(f)) continue; /* proto JSON: null = field not set */
    if (field_is(name, "response_body_size", "responseBodySize")) {
      if (json_uint(f, NHB__SRV_NH_MAX_BODY, &o->body_size) < 0)
        return fail(err, err_len, "response_body_size: must be an integer between 0 and %u", NHB__SRV_NH_MAX_BODY);
      o->has_body_size = 1;
    } else if (field_is(name, "response_headers", "responseHeaders") ||
               field_is(name, "v3_response_headers", "v3ResponseHeaders")) {
      if (!cJSON_IsArray(f)) return fail(err, err_len, "%s: must be a list", name);
      for (const cJSON* item = f->child; item; item = item->next) {
        if (parse_header_option(item, &o->headers[o->nheaders], a, err, err_len, name) < 0) return -1;
        o->nheaders++;
      }
    } else if (field_is(name, "echo_request_headers", "echoRequestHeaders")) {
      if (json_bool(f, &o->echo_headers) < 0) return fail(err, err_len, "echo_request_headers: must be a boolean");
      o->has_echo_headers = 1;
    } else if (field_is(name, "static_delay", "staticDelay")) {
      if (json_duration(f, &o->static_delay_ns) < 0)
        return fail(err, err_len, "static_delay: must be a duration such as \"0.5s\"");
      has_static = 1;
    } else if (field_is(name, "concurrency_based_linear_delay", "concurrencyBasedLinearDelay")) {
      if (!cJSON_IsObject(f)) return fail(err, err_len, "concurrency_based_linear_delay: must be an object");
      o->linear_min_ns = o->linear_factor_ns = 0;
      for (const cJSON* g = f->child; g; g = g->next) {
        uint64_t* dst;
        if (field_is(g->string, "minimal_delay", "minimalDelay")) dst = &o->linear_min_ns;
        else if (field_is(g->string, "concurrency_delay_factor", "concurrencyDelayFactor")) dst = &o->linear_factor_ns;
        else {
          /* Quoted like every other piece of untrusted input, so that a name
           * holding a newline cannot make a multi-line error. */
          char q[48];
          return fail(err, err_len, "concurrency_based_linear_delay: unknown field '%s'",
                      shown(g->string, strlen(g->string), q));
        }
        if (cJSON_IsNull(g)) continue;
        if (json_duration(g, dst) < 0)
          return fail(err, err_len, "concurrency_based_linear_delay.%s: must be a duration such as \"0.01s\"",
                      g->string);
      }
      has_linear = 1;
    } else if (field_is(name, "emit_previous_request_delta_in_response_header",
                        "emitPreviousRequestDeltaInResponseHeader")) {
      if (!cJSON_IsString(f))
        return fail(err, err_len, "emit_previous_request_delta_in_response_header: must be a header name");
      size_t n = strlen(f->valuestring);
      if (n == 0) {
        o->has_emit = 0;
        continue;
      }
      char q[48];
      if (n > 255 || !nhb__srv_token_ok(f->valuestring, n) || reserved_header(f->valuestring, n))
        return fail(err, err_len, "emit_previous_request_delta_in_response_header: invalid header name '%s'",
                    shown(f->valuestring, n, q));
      if (copy_str(a, f->valuestring, &o->emit_header) < 0) return fail(err, err_len, "out of memory");
      o->has_emit = 1;
    } else {
      char q[48];
      return fail(err, err_len, "unknown field '%s'", shown(name, strlen(name), q));
    }
  }
  /* In the proto these two are a oneof. */
  if (has_static && has_linear)
    return fail(err, err_len, "static_delay and concurrency_based_linear_delay cannot both be set");
  if (has_static) o->delay_kind = NHB__SRV_DELAY_STATIC;
  if (has_linear) o->delay_kind = NHB__SRV_DELAY_LINEAR;
  return 0;
}

/* ---- protobuf's relaxed JSON ------------------------------------------------------
 *
 * Nighthawk parses ResponseOptions with protobuf's JsonStringToMessage (through
 * Envoy's MessageUtil::loadFromJson), whose parser runs with its legacy syntax on
 * by default and so also accepts what its README shows,
 * {response_body_size:20, static_delay: "0s"}:
 *   - object keys that are bare words ([A-Za-z_][A-Za-z0-9_]*, not true, false
 *     or null);
 *   - strings in single quotes, and the escapes \' and \U (as \u);
 *   - raw control characters inside strings;
 *   - one trailing comma before '}' or ']'.
 * Anything else it refuses (a bare word as a value, {,}, [1,,]) stays refused.
 *
 * Rather than a second JSON parser, the text is rewritten into strict JSON,
 * which cJSON then parses exactly as before; strict JSON is never rewritten,
 * since cJSON accepts it on the first try. The rewrite is one pass over the
 * input without recursion: it needs no nesting stack, because a bare word is a
 * key exactly when a ':' follows it. It runs twice, first only to count the
 * bytes, so that the one allocation is exact (at most 6 bytes per input byte:
 * a control character becomes \u00XX). */

static int is_word_start(unsigned char c) { return c == '_' || (c < 0x80 && isalpha(c)); }
static int is_word_char(unsigned char c) { return c == '_' || (c < 0x80 && isalnum(c)); }
static int is_json_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* Writes the strict form of in[0..len) to out (when out is not NULL) and
 * returns its length, or -1 with *bad_at the offset of the first byte that
 * cannot be rewritten (an unterminated string). */
static long relax_json(const char* in, size_t len, char* out, size_t* bad_at) {
  size_t n = 0, i = 0;
  unsigned char last = 0; /* the last byte written outside strings and spaces */
#define PUT(ch)                          \
  do {                                   \
    if (out) out[n] = (char)(ch);        \
    n++;                                 \
  } while (0)
  while (i < len) {
    unsigned char c = (unsigned char)in[i];
    if (c == '"' || c == '\'') {
      unsigned char quote = c;
      size_t start = i++;
      PUT('"');
      for (;;) {
        if (i >= len) {
          *bad_at = start;
          return -1;
        }
        unsigned char d = (unsigned char)in[i++];
        if (d == quote) break;
        if (d == '\\') {
          if (i >= len) {
            *bad_at = start;
            return -1;
          }
          unsigned char e = (unsigned char)in[i++];
          if (e == '\'') {
            PUT('\'');
          } else {
            PUT('\\');
            /* Any other escape goes to cJSON as written, which refuses the
             * ones JSON does not have, as protobuf does. */
            PUT(e == 'U' ? 'u' : e);
          }
        } else if (d == '"') {
          PUT('\\'); /* a double quote inside a single-quoted string */
          PUT('"');
        } else if (d < 0x20) {
          static const char hex[] = "0123456789abcdef";
          PUT('\\');
          PUT('u');
          PUT('0');
          PUT('0');
          PUT(hex[d >> 4]);
          PUT(hex[d & 15]);
        } else {
          PUT(d);
        }
      }
      PUT('"');
      last = '"';
    } else if (is_word_start(c)) {
      size_t start = i;
      while (i < len && is_word_char((unsigned char)in[i])) i++;
      size_t j = i;
      while (j < len && is_json_space((unsigned char)in[j])) j++;
      size_t wl = i - start;
      int literal = (wl == 4 && (!memcmp(in + start, "true", 4) || !memcmp(in + start, "null", 4))) ||
                    (wl == 5 && !memcmp(in + start, "false", 5));
      int key = !literal && j < len && in[j] == ':';
      if (key) PUT('"');
      for (size_t k = start; k < i; k++) PUT(in[k]);
      if (key) PUT('"');
      last = 'w';
    } else if (c == ',') {
      size_t j = i + 1;
      while (j < len && is_json_space((unsigned char)in[j])) j++;
      /* One trailing comma after a value is dropped; "{,}" or "[1,,]" keep
       * theirs, and cJSON refuses them. */
      int trailing = j < len && (in[j] == '}' || in[j] == ']') && last != 0 && last != '{' && last != '[' &&
                     last != ',';
      if (!trailing) PUT(c);
      last = ',';
      i++;
    } else {
      PUT(c);
      if (!is_json_space(c)) last = c;
      i++;
    }
  }
#undef PUT
  return (long)n;
}

int nhb__srv_nh_parse(const char* json, size_t len, nhb__srv_nh_opts* out, nhb__srv_arena* arena, char* err,
                      size_t err_len) {
  memset(out, 0, sizeof(*out));
  const char* end = NULL;
  /* cJSON also records a parse failure in a process-wide variable; this
   * code never reads it, so workers that fail concurrently do no harm. */
  cJSON* root = cJSON_ParseWithLengthOpts(json, len, &end, 0);
  if (!root) {
    size_t at = end && end >= json && end <= json + len ? (size_t)(end - json) : 0;
    /* Not strict JSON: perhaps protobuf's relaxed syntax (above). The error
     * reported stays the strict parse's, whose offset is in the text sent. */
    size_t bad_at = 0;
    long need = relax_json(json, len, NULL, &bad_at);
    if (need < 0) return fail(err, err_len, "invalid JSON at offset %zu: unterminated string", bad_at);
    char* strict = malloc((size_t)need + 1);
    if (!strict) return fail(err, err_len, "out of memory");
    relax_json(json, len, strict, &bad_at);
    strict[need] = '\0';
    const char* strict_end = NULL;
    root = cJSON_ParseWithLengthOpts(strict, (size_t)need, &strict_end, 0);
    int trailing = 0;
    if (root && strict_end) {
      while (strict_end < strict + need && isspace((unsigned char)*strict_end)) strict_end++;
      trailing = strict_end < strict + need;
    }
    if (!root || trailing) {
      cJSON_Delete(root);
      free(strict);
      return fail(err, err_len, "invalid JSON at offset %zu", at);
    }
    free(strict);
    /* The arena is sized from the text length: the rewritten text is the
     * longer of the two, and no decoded string is longer than it. */
    int r = nh_parse_tree(root, (size_t)need, out, arena, err, err_len);
    cJSON_Delete(root);
    if (r < 0) memset(out, 0, sizeof(*out));
    return r;
  }
  /* Anything after the value other than whitespace is an error too. */
  if (end) {
    while (end < json + len && isspace((unsigned char)*end)) end++;
    if (end < json + len) {
      size_t at = (size_t)(end - json);
      cJSON_Delete(root);
      return fail(err, err_len, "invalid JSON at offset %zu: trailing characters", at);
    }
  }
  int r = nh_parse_tree(root, len, out, arena, err, err_len);
  cJSON_Delete(root);
  if (r < 0) memset(out, 0, sizeof(*out));
  return r;
}

/* ---- Fortio echo parameters ------------------------------------------------------- */

enum { KIND_DELAY, KIND_STATUS, KIND_SIZE, KIND_BOOL };

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* URL-decodes s into dst ('+' is a space; a malformed escape stays as is). */
static size_t url_decode(const char* s, size_t len, char* dst) {
  size_t o = 0;
  for (size_t i = 0; i < len; i++) {
    if (s[i] == '+') {
      dst[o++] = ' ';
    } else if (s[i] == '%' && i + 2 < len && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
      dst[o++] = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
      i += 2;
    } else {
      dst[o++] = s[i];
    }
  }
  return o;
}

static int parse_int(const char* s, size_t len, int64_t* out) {
  if (len == 0 || len > 18) return -1;
  int64_t v = 0;
  for (size_t i = 0; i < len; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    v = v * 10 + (s[i] - '0');
  }
  *out = v;
  return 0;
}

static int parse_pct(const char* s, size_t len, double* out) {
  char tmp[32];
  if (len == 0 || len >= sizeof(tmp)) return -1;
  memcpy(tmp, s, len);
  tmp[len] = '\0';
  char* end;
  double d = strtod(tmp, &end);
  if (end != tmp + len || !(d >= 0) || d > 100) return -1;
  *out = d;
  return 0;
}

static int parse_value(int kind, const char* s, size_t len, uint64_t max_delay, uint64_t max_size, int64_t* out) {
  switch (kind) {
    case KIND_DELAY: {
      uint64_t ns;
      if (nhb__srv_parse_duration(s, len, &ns) < 0) return -1;
      *out = (int64_t)(ns > max_delay ? max_delay : ns);
      return 0;
    }
    case KIND_STATUS: {
      int64_t v;
      if (parse_int(s, len, &v) < 0 || v < 200 || v >= NHB_SERVER_STATUS_MAX) return -1;
      *out = v;
      return 0;
    }
    case KIND_SIZE: {
      int64_t v;
      if (parse_int(s, len, &v) < 0) {
        /* Beyond 18 digits: still a size, just over any cap. */
        size_t i;
        for (i = 0; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
        }
        if (len == 0 || i != len) return -1;
        v = INT64_MAX;
      }
      *out = (uint64_t)v > max_size ? (int64_t)max_size : v;
      return 0;
    }
    default:
      if (len == 4 && strncasecmp(s, "true", 4) == 0) *out = 1;
      else if (len == 5 && strncasecmp(s, "false", 5) == 0) *out = 0;
      else return -1;
      return 0;
  }
}

static const char* const kind_hint[] = {
    "a duration such as 150us or 0.5s", "a status code 200-599", "a size in bytes", "true or false"};

static int parse_choices(const char* name, int kind, const char* v, size_t len, uint64_t max_delay, uint64_t max_size,
                         nhb__srv_choices* c, char* err, size_t err_len) {
  memset(c, 0, sizeof(*c));
  if (len == 0) return 0; /* an empty value is no value, as in Fortio */
  c->present = 1;
  char q[48];
  const char* colon = memchr(v, ':', len);
  const char* comma = memchr(v, ',', len);
  if (!colon && !comma) {
    int64_t val;
    if (parse_value(kind, v, len, max_delay, max_size, &val) == 0) {
      c->n = 1;
      c->cum[0] = 100;
      c->val[0] = val;
      return 0;
    }
    /* Fortio's close=N (and gzip=N): true with N percent probability. */
    double pct;
    if (kind == KIND_BOOL && parse_pct(v, len, &pct) == 0) {
      c->n = 1;
      c->cum[0] = pct;
      c->val[0] = 1;
      return 0;
    }
    return fail(err, err_len, "echo parameter %s: '%s' is not %s", name, shown(v, len, q), kind_hint[kind]);
  }
  double sum = 0;
  size_t i = 0;
  while (i <= len) {
    size_t j = i;
    while (j < len && v[j] != ',') j++;
    const char* item = v + i;
    size_t ilen = j - i;
    const char* sep = memchr(item, ':', ilen);
    if (!sep)
      return fail(err, err_len, "echo parameter %s: '%s' needs value:percent entries", name, shown(item, ilen, q));
    if (c->n == NHB__SRV_MAX_CHOICES)
      return fail(err, err_len, "echo parameter %s: more than %d entries", name, NHB__SRV_MAX_CHOICES);
    int64_t val;
    double pct;
    size_t vlen = (size_t)(sep - item);
    if (parse_value(kind, item, vlen, max_delay, max_size, &val) < 0)
      return fail(err, err_len, "echo parameter %s: '%s' is not %s", name, shown(item, vlen, q), kind_hint[kind]);
    if (parse_pct(sep + 1, ilen - vlen - 1, &pct) < 0)
      return fail(err, err_len, "echo parameter %s: '%s' is not a percentage 0-100", name,
                  shown(sep + 1, ilen - vlen - 1, q));
    sum += pct;
    if (sum > 100 + 1e-9) return fail(err, err_len, "echo parameter %s: percentages add up to more than 100", name);
    c->cum[c->n] = sum;
    c->val[c->n] = val;
    c->n++;
    i = j + 1;
  }
  return 0;
}

/* Compares the percent-decoded s[0, len) with lit: 1 equal, 0 not, -1 when
 * s has a malformed escape (Go's query parser drops such a pair). */
static int decoded_equals(const char* s, size_t len, const char* lit) {
  size_t o = 0;
  int same = 1;
  for (size_t i = 0; i < len; i++) {
    char ch = s[i];
    if (ch == '+') {
      ch = ' ';
    } else if (ch == '%') {
      if (i + 2 >= len || hexval(s[i + 1]) < 0 || hexval(s[i + 2]) < 0) return -1;
      ch = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
      i += 2;
    }
    if (same && lit[o] != '\0' && lit[o] == ch) o++;
    else same = 0;
  }
  return same && lit[o] == '\0';
}

int nhb__srv_query_arg_is(const char* query, size_t len, const char* key, const char* value) {
  size_t i = 0;
  while (i < len) {
    size_t j = i;
    while (j < len && query[j] != '&') j++;
    /* Go refuses (and skips) a pair with a semicolon in it. */
    if (!memchr(query + i, ';', j - i)) {
      const char* eq = memchr(query + i, '=', j - i);
      size_t klen = eq ? (size_t)(eq - (query + i)) : j - i;
      if (decoded_equals(query + i, klen, key) == 1) {
        int v = eq ? decoded_equals(eq + 1, (size_t)(query + j - eq - 1), value) : value[0] == '\0';
        if (v >= 0) return v;
      }
    }
    i = j + 1;
  }
  return 0;
}

int64_t nhb__srv_choose(const nhb__srv_choices* c, double r, int64_t dflt) {
  for (int i = 0; i < c->n; i++)
    if (r < c->cum[i]) return c->val[i];
  return dflt;
}

int nhb__srv_echo_parse(const char* query, size_t len, uint64_t max_delay_ns, uint64_t max_size,
                        nhb__srv_echo_opts* out, nhb__srv_arena* arena, char* err, size_t err_len) {
  memset(out, 0, sizeof(*out));
  /* Decoded text is never longer than the query. */
  if (nhb__srv_arena_reset(arena, 2 * len + 64 + NHB__SRV_MAX_ECHO_HEADERS * sizeof(nhb__srv_header)) < 0)
    return fail(err, err_len, "out of memory");
  out->headers = nhb__srv_arena_alloc(arena, NHB__SRV_MAX_ECHO_HEADERS * sizeof(nhb__srv_header));
  char* key = nhb__srv_arena_alloc(arena, len + 1);
  char* text = nhb__srv_arena_alloc(arena, len + 1);
  size_t text_len = 0;
  size_t i = 0;
  while (i < len) {
    size_t j = i;
    while (j < len && query[j] != '&') j++;
    const char* eq = memchr(query + i, '=', j - i);
    size_t kraw = eq ? (size_t)(eq - (query + i)) : j - i;
    size_t klen = url_decode(query + i, kraw, key);
    char* val = text + text_len;
    size_t vlen = eq ? url_decode(eq + 1, (size_t)(query + j - eq - 1), val) : 0;
    text_len += vlen;
    i = j + 1;
    nhb__srv_choices* target = NULL;
    int kind = KIND_DELAY;
#define KEY_IS(lit) (klen == sizeof(lit) - 1 && memcmp(key, lit, klen) == 0)
    if (KEY_IS("delay")) target = &out->delay, kind = KIND_DELAY;
    else if (KEY_IS("status")) target = &out->status, kind = KIND_STATUS;
    else if (KEY_IS("size")) target = &out->size, kind = KIND_SIZE;
    else if (KEY_IS("close")) target = &out->close, kind = KIND_BOOL;
    else if (KEY_IS("gzip")) target = &out->gzip, kind = KIND_BOOL;
    if (target) {
      /* A repeated parameter: the first one counts, as with Go's FormValue. */
      if (target->present) continue;
      char name[8];
      memcpy(name, key, klen);
      name[klen] = '\0';
      if (parse_choices(name, kind, val, vlen, max_delay_ns, max_size, target, err, err_len) < 0) return -1;
    } else if (KEY_IS("stall")) {
      if (out->has_stall || vlen == 0) continue;
      uint64_t ns;
      char q[48];
      if (nhb__srv_parse_duration(val, vlen, &ns) < 0)
        return fail(err, err_len, "echo parameter stall: '%s' is not a duration", shown(val, vlen, q));
      out->has_stall = 1;
      out->stall_ns = ns > max_delay_ns ? max_delay_ns : ns;
    } else if (KEY_IS("header")) {
      if (vlen == 0) continue;
      char q[48];
      const char* colon = memchr(val, ':', vlen);
      if (!colon) return fail(err, err_len, "echo parameter header: '%s' is not name:value", shown(val, vlen, q));
      size_t nlen = (size_t)(colon - val);
      const char* hv = colon + 1;
      size_t hvlen = vlen - nlen - 1;
      while (hvlen && (*hv == ' ' || *hv == '\t')) hv++, hvlen--;
      while (hvlen && (hv[hvlen - 1] == ' ' || hv[hvlen - 1] == '\t')) hvlen--;
      if (!nhb__srv_token_ok(val, nlen))
        return fail(err, err_len, "echo parameter header: invalid header name '%s'", shown(val, nlen, q));
      if (reserved_header(val, nlen))
        return fail(err, err_len, "echo parameter header: '%s' is set by the server", shown(val, nlen, q));
      if (!nhb__srv_value_ok(hv, hvlen))
        return fail(err, err_len, "echo parameter header: invalid value for '%s'", shown(val, nlen, q));
      if (out->nheaders == NHB__SRV_MAX_ECHO_HEADERS)
        return fail(err, err_len, "echo parameter header: more than %d headers", NHB__SRV_MAX_ECHO_HEADERS);
      nhb__srv_header* h = &out->headers[out->nheaders++];
      h->name.p = val;
      h->name.len = nlen;
      h->value.p = hv;
      h->value.len = hvlen;
      h->append = 1;
      out->has_headers = 1;
    }
    /* Anything else is not an echo parameter and is ignored, as in Fortio. */
#undef KEY_IS
  }
  return 0;
}
