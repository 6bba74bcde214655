/* session_grpc.c: gRPC calls on the HTTP/2 session.
 *
 * gRPC is a flag on the HTTP/2 session (config.grpc), not a protocol of its
 * own, so that every HTTP/2 path (TLS and h2c, the response checks, resets,
 * GOAWAY, time-outs) keeps applying to it. The request is an HTTP/2 request
 * whose body the run renders once (a length-prefixed message); session_h2.c
 * sends it and, in a gRPC run only, hands this file what gRPC adds to the
 * response: its grpc-status and grpc-message fields, its DATA (followed as
 * length-prefixed messages) and its end, where the call is counted by
 * grpc-status and reported exactly once (docs/protocols.md).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "client/client.h"

/* The status names of the gRPC spec (doc/statuscodes.md), for the error text. */
static const char* const grpc_status_names[NHB_GRPC_STATUS_COUNT] = {
    "OK",        "CANCELLED",         "UNKNOWN",        "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
    "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",
    "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
};

static int hexval(uint8_t ch) {
  if (ch >= '0' && ch <= '9') return ch - '0';
  if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
  if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
  return -1;
}

/* A run's first non-OK status becomes its first error, with grpc-message
 * percent-decoded when it came after grpc-status (as grpcio and grpc-go
 * send them); nothing is kept per stream for a message that came first. */
static void grpc_record_status(nhb__worker* w, int status, const uint8_t* msg, size_t msg_len) {
  if (w->first_error != 0) return;
  char text[sizeof(w->first_error_text)];
  int n = snprintf(text, sizeof(text), "gRPC: status %d (%s)", status, grpc_status_names[status]);
  if (msg_len > 0 && n > 0 && (size_t)n + 3 < sizeof(text)) {
    size_t at = (size_t)n;
    text[at++] = ':';
    text[at++] = ' ';
    for (size_t i = 0; i < msg_len && at + 1 < sizeof(text); i++) {
      int hi, lo;
      uint8_t ch = msg[i];
      if (ch == '%' && i + 2 < msg_len && (hi = hexval(msg[i + 1])) >= 0 && (lo = hexval(msg[i + 2])) >= 0) {
        ch = (uint8_t)(hi * 16 + lo);
        i += 2;
      }
      /* Control bytes would break the one-line error. */
      text[at++] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
    }
    text[at] = '\0';
  }
  nhb__worker_record_error_text(w, NHB_EPROTO, text);
}

/* grpc-status is 1 to 2 decimal digits naming a code of 0..16; anything else
 * is a protocol error (the slot's grpc_bad). */
void nhb__grpc_on_field(nhb__worker* w, nhb__slot* s, const uint8_t* name, size_t namelen, const uint8_t* value,
                        size_t valuelen) {
  if (namelen == 11 && memcmp(name, "grpc-status", 11) == 0) {
    int code = valuelen >= 1 && valuelen <= 2 ? 0 : -1;
    for (size_t i = 0; i < valuelen && code >= 0; i++)
      code = value[i] >= '0' && value[i] <= '9' ? code * 10 + (value[i] - '0') : -1;
    if (code < 0 || code >= NHB_GRPC_STATUS_COUNT || (valuelen == 2 && value[0] == '0') || s->grpc_status != -1) {
      /* Unparsable, outside the spec's codes, or a second one: the call has
       * no status to count (-2 stays, whatever follows). */
      s->grpc_status = -2;
      s->grpc_bad = 1;
      return;
    }
    s->grpc_status = code;
  } else if (namelen == 12 && memcmp(name, "grpc-message", 12) == 0 && s->grpc_status > 0) {
    grpc_record_status(w, s->grpc_status, value, valuelen);
  }
}

/* Follows the response's length-prefixed messages across DATA chunks: a
 * 5-byte prefix (a compressed flag of 0 or 1, then the length, big-endian)
 * and that many bytes, again and again. The bytes themselves are not
 * looked at: a load test counts, it does not decode. */
void nhb__grpc_on_data(nhb__slot* s, const uint8_t* data, size_t len) {
  while (len > 0 && !s->grpc_bad) {
    if (s->grpc_left > 0) {
      size_t take = s->grpc_left < len ? (size_t)s->grpc_left : len;
      s->grpc_left -= take;
      data += take;
      len -= take;
      continue;
    }
    uint8_t b = *data++;
    len--;
    if (s->grpc_prefix == 0) {
      if (b > 1) s->grpc_bad = 1;
      s->grpc_len = 0;
    } else {
      s->grpc_len = (s->grpc_len << 8) | b;
    }
    if (++s->grpc_prefix == 5) {
      s->grpc_prefix = 0;
      s->grpc_left = s->grpc_len;
    }
  }
}

/* The end of a gRPC call's response. A request ends exactly once: as an
 * HTTP response when the status is not 200 (a proxy's 503, say: counted by
 * its HTTP status as any response), as a success (an HTTP 200 response) when
 * grpc-status is 0 and the framing held, and otherwise as a failure counted
 * against benchmark.grpc_protocol_error (no grpc-status, a bad one, a broken
 * or cut message) or benchmark.grpc_error (a non-OK grpc-status), without a
 * latency, like a reset. The grpc-status is counted per code whenever there
 * is a valid one. */
void nhb__grpc_end(nhb__conn* c, nhb__slot* s) {
  nhb__worker* w = c->worker;
  int bad = s->grpc_bad || s->grpc_prefix != 0 || s->grpc_left != 0;
  if (s->grpc_status >= 0) w->stats.grpc_status[s->grpc_status]++;
  if (s->status != 200) {
    nhb__conn_response(c, s, s->status);
  } else if (bad || s->grpc_status < 0) {
    nhb__worker_record_error_text(w, NHB_EPROTO,
                                  bad ? "gRPC: a response broke the protocol (a grpc-status that is not 0..16, "
                                        "or a message whose 5-byte length prefix does not match its DATA)"
                                      : "gRPC: a response ended without grpc-status");
    nhb__conn_slot_failed(c, s, NHB_CTR_GRPC_PROTOCOL_ERROR);
  } else if (s->grpc_status != 0) {
    grpc_record_status(w, s->grpc_status, NULL, 0);
    nhb__conn_slot_failed(c, s, NHB_CTR_GRPC_ERROR);
  } else {
    nhb__conn_response(c, s, 200);
  }
}
