/* session_echo.c: tcp:// and udp:// echo load (docs/protocols.md).
 *
 * A request sends the run's payload (config.echo_payload, drawn or read once
 * for the whole run) and ends when the peer has sent it back, as Fortio's
 * tcp and udp runners do against its tcp-echo and udp-echo servers. A
 * complete, correct echo is reported as status 200, so that it feeds the
 * same counters (benchmark.http_2xx), latency histograms, predicates and
 * live intervals as an HTTP response; its "body" is the echoed payload.
 *
 * TCP (nhb__session_tcp_echo, on transport_tcp): one request in flight per
 * connection, and connections are kept across requests. Every byte that
 * comes back is compared with the payload at its offset as it arrives, so a
 * peer that is not an echo server is caught at its first wrong byte rather
 * than after a time-out: the request fails as benchmark.echo_mismatch and
 * the connection is closed, since nothing says where the peer's next bytes
 * would belong. Bytes with no request in flight, or beyond the end of the
 * echo in the same read, break the protocol: the connection is closed and
 * counted in upstream_cx_protocol_error (an echo that ended in that read is
 * still counted, as HTTP/1.1 does with bytes after a response). A TCP echo
 * that never comes back ends with --request-timeout, closing the connection
 * like HTTP/1.1: the byte stream cannot skip an echo that may still come.
 *
 * UDP (nhb__session_udp_echo, on transport_udp): one request in flight per
 * socket (the "connection"; --connections sockets give the concurrency, as
 * Fortio's UDP runner has one outstanding datagram per connection). The
 * datagram is an 8-byte big-endian sequence number, unique per connection
 * entry for the run, followed by the payload; the echo must be that same
 * datagram. Datagrams may be lost, duplicated or late, so nothing a peer
 * sends closes the socket:
 *   - the echo of the request in flight completes it, or fails it as
 *     benchmark.echo_mismatch when its payload differs;
 *   - a request whose echo has not come within the request time-out fails as
 *     benchmark.request_timeout and counts in benchmark.udp_lost, and its
 *     sequence number goes into a small ring of lost ones;
 *   - an echo of a lost request that comes later counts in
 *     benchmark.udp_late (once) and completes nothing: the sequence number
 *     tells it from the echo of the request now in flight;
 *   - anything else (a datagram shorter than the sequence number, an unknown
 *     or repeated sequence number) counts in benchmark.udp_unexpected.
 * With one datagram in flight per socket, reordering within a socket shows
 * as a late echo; the counters cannot see reordering across sockets.
 *
 * Nothing here allocates per request: the per-connection state is allocated
 * on the entry's first connection (like c->h2) and the sequence number is
 * written on the stack and sent gathered with the payload.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"

/* How many lost sequence numbers a UDP connection remembers to recognize
 * their late echoes. A late echo is rare and looked up by a linear scan; 64
 * covers a burst of losses well beyond what a healthy path shows, and an
 * echo later than that is still counted (as unexpected), never matched. */
#define NHB__ECHO_LOST_RING 64
/* The sequence number in front of every UDP echo datagram. */
#define NHB__ECHO_SEQ_BYTES 8

/* A connection's echo state, in its nhb__conn's `proto`. */
typedef struct nhb__echo {
  uint64_t got;       /* TCP: bytes of the current echo received so far */
  int send_waiting;   /* TCP: an earlier write was still going; on_writable sends */
  uint64_t next_seq;  /* UDP: the last sequence number sent on this entry (never reset) */
  uint64_t wait_seq;  /* UDP: the sequence number of the request in flight; 0 = none */
  uint32_t lost_next; /* UDP: where the next lost sequence number goes in `lost` */
  uint64_t lost[NHB__ECHO_LOST_RING]; /* UDP: recently lost sequence numbers (0 = empty) */
} nhb__echo;

static nhb__echo* echo_of(const nhb__conn* c) { return (nhb__echo*)c->proto; }

/* ---- per run ------------------------------------------------------------- */

static int echo_run_init(nhb_run* run, char* err, size_t err_len) {
  nhb_client_config* cfg = &run->config;
  nhb_protocol_t p = cfg->protocol;
  if (p != NHB_PROTO_TCP && p != NHB_PROTO_UDP) return 0;
  const char* name = p == NHB_PROTO_TCP ? "tcp" : "udp";
  if (cfg->tls.enabled) {
    if (err) snprintf(err, err_len, "tls: %s:// echo runs take no TLS", name);
    return NHB_EINVAL;
  }
  if (cfg->echo_payload == NULL && cfg->echo_payload_len > 0) {
    if (err) snprintf(err, err_len, "echo_payload: %zu bytes but no data", cfg->echo_payload_len);
    return NHB_EINVAL;
  }
  /* A TCP request of 0 bytes would have no echo to wait for. */
  if (p == NHB_PROTO_TCP && cfg->echo_payload_len == 0) {
    if (err) snprintf(err, err_len, "echo_payload: a tcp:// echo payload needs at least 1 byte");
    return NHB_EINVAL;
  }
  if (p == NHB_PROTO_UDP && cfg->echo_payload_len > NHB_ECHO_UDP_MAX_PAYLOAD) {
    if (err)
      snprintf(err, err_len,
               "echo_payload: a udp:// payload is at most %d bytes (the largest UDP datagram "
               "minus the 8-byte sequence number), got %zu",
               NHB_ECHO_UDP_MAX_PAYLOAD, cfg->echo_payload_len);
    return NHB_EINVAL;
  }
  /* A lost datagram would otherwise keep its request (and its socket, which
   * carries one at a time) for the rest of the run. */
  if (p == NHB_PROTO_UDP && cfg->request_timeout_ns == 0) {
    if (err) snprintf(err, err_len, "request_timeout: a udp:// echo run needs one (a lost datagram never ends)");
    return NHB_EINVAL;
  }
  if (cfg->templated || cfg->nspecs > 1) {
    if (err) snprintf(err, err_len, "specs: %s:// echo runs send one payload, untemplated", name);
    return NHB_EINVAL;
  }
  run->echo_payload = malloc(cfg->echo_payload_len ? cfg->echo_payload_len : 1);
  if (run->echo_payload == NULL) return NHB_ENOMEM;
  if (cfg->echo_payload_len) memcpy(run->echo_payload, cfg->echo_payload, cfg->echo_payload_len);
  cfg->echo_payload = run->echo_payload;
  return 0;
}

static void echo_run_free(nhb_run* run) {
  free(run->echo_payload);
  run->echo_payload = NULL;
}

static void echo_conn_free(nhb__conn* c) {
  free(c->proto);
  c->proto = NULL;
}

/* Records why an echo failed, once per worker (the run's first error). */
static void echo_error(nhb__conn* c, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static void echo_error(nhb__conn* c, const char* fmt, ...) {
  nhb__worker* w = c->worker;
  if (w->first_error != 0) return;
  char text[sizeof(w->first_error_text)];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  nhb__worker_record_error_text(w, NHB_EPROTO, text);
}

/* Sets up the entry's state on a new connection; allocated on the entry's
 * first connection only. The UDP sequence numbers go on from the previous
 * socket of the entry: the peer never sees two datagrams with one number. */
static int echo_open(nhb__conn* c) {
  nhb__echo* e = c->proto;
  if (e == NULL) {
    e = calloc(1, sizeof(*e));
    if (e == NULL) return NHB_ENOMEM;
    c->proto = e;
  }
  e->got = 0;
  e->send_waiting = 0;
  e->wait_seq = 0;
  return 0;
}

/* ---- TCP --------------------------------------------------------------------- */

static int tcp_echo_write(nhb__conn* c) {
  const nhb_client_config* cfg = &c->worker->run->config;
  return c->transport->write(c, cfg->echo_payload, cfg->echo_payload_len);
}

static int tcp_echo_send(nhb__conn* c, nhb__slot* s) {
  NHB__UNUSED(s);
  nhb__echo* e = c->proto;
  e->got = 0;
  /* The previous request's echo can be complete before libuv has reported
   * its write done (a large payload echoed as it goes out): this request
   * goes out as soon as it has. */
  if (NHB__UNLIKELY(c->write_pending)) {
    e->send_waiting = 1;
    return 0;
  }
  return tcp_echo_write(c);
}

static void tcp_echo_on_writable(nhb__conn* c) {
  nhb__echo* e = c->proto;
  if (!e->send_waiting) return;
  e->send_waiting = 0;
  if (c->nactive == 0) return;
  int r = tcp_echo_write(c);
  if (r < 0) nhb__conn_fail(c, r, NHB_CTR_STREAM_RESETS);
}

static int tcp_echo_on_data(nhb__conn* c, const char* data, size_t len) {
  nhb__echo* e = c->proto;
  const nhb_client_config* cfg = &c->worker->run->config;
  if (NHB__UNLIKELY(c->nactive == 0)) {
    echo_error(c, "tcp echo: the peer sent %zu bytes with no request in flight", len);
    return NHB_EPROTO;
  }
  size_t want = cfg->echo_payload_len - (size_t)e->got;
  size_t n = len < want ? len : want;
  if (NHB__UNLIKELY(memcmp(data, cfg->echo_payload + e->got, n) != 0)) {
    size_t at = 0;
    while (data[at] == cfg->echo_payload[e->got + at]) at++;
    echo_error(c, "tcp echo: the bytes that came back differ from those sent (byte %llu of %llu)",
               (unsigned long long)(e->got + at), (unsigned long long)cfg->echo_payload_len);
    nhb__conn_fail(c, NHB_EPROTO, NHB_CTR_ECHO_MISMATCH);
    return 0;
  }
  e->got += n;
  if (e->got < cfg->echo_payload_len) return 0;
  e->got = 0;
  nhb__slot* s = c->slots;
  s->header_bytes = 0;
  s->body_bytes = cfg->echo_payload_len;
  if (NHB__UNLIKELY(n < len)) {
    /* More than the echo: the peer answers twice or talks on its own. The
     * echo is counted; the connection is not used again. */
    echo_error(c, "tcp echo: the peer sent %llu bytes beyond the %llu of the echo",
               (unsigned long long)(len - n), (unsigned long long)cfg->echo_payload_len);
    c->worker->stats.counters[NHB_CTR_UPSTREAM_CX_PROTOCOL_ERROR]++;
    c->keep_alive = 0;
  }
  nhb__conn_response(c, s, 200);
  return 0;
}

static int tcp_echo_on_eof(nhb__conn* c, int err) {
  if (c->nactive == 0) return 0;
  const nhb_client_config* cfg = &c->worker->run->config;
  if (err == UV_EOF) {
    echo_error(c, "tcp echo: the peer closed the connection after %llu of the %llu bytes of the echo",
               (unsigned long long)echo_of(c)->got, (unsigned long long)cfg->echo_payload_len);
    return NHB_EPROTO;
  }
  return err;
}

/* ---- UDP --------------------------------------------------------------------- */

static int udp_echo_send(nhb__conn* c, nhb__slot* s) {
  NHB__UNUSED(s);
  nhb__echo* e = c->proto;
  const nhb_client_config* cfg = &c->worker->run->config;
  uint64_t seq = ++e->next_seq;
  unsigned char head[NHB__ECHO_SEQ_BYTES];
  for (int i = NHB__ECHO_SEQ_BYTES - 1; i >= 0; i--) {
    head[i] = (unsigned char)(seq & 0xff);
    seq >>= 8;
  }
  uv_buf_t bufs[2] = {uv_buf_init((char*)head, sizeof(head)),
                      uv_buf_init((char*)cfg->echo_payload, (unsigned)cfg->echo_payload_len)};
  int r = nhb__udp_send(c, bufs, cfg->echo_payload_len ? 2 : 1);
  if (r < 0) return r;
  e->wait_seq = e->next_seq;
  return 0;
}

/* A request timed out (the pool fails it as benchmark.request_timeout right
 * after): its sequence number is remembered so that a late echo of it is
 * recognized, and can never complete the next request. */
static void udp_echo_cancel(nhb__conn* c, nhb__slot* s) {
  NHB__UNUSED(s);
  nhb__echo* e = c->proto;
  if (e->wait_seq != 0) {
    e->lost[e->lost_next] = e->wait_seq;
    e->lost_next = (e->lost_next + 1) % NHB__ECHO_LOST_RING;
    e->wait_seq = 0;
  }
  c->worker->stats.counters[NHB_CTR_UDP_LOST]++;
}

static int udp_echo_on_data(nhb__conn* c, const char* data, size_t len) {
  nhb__echo* e = c->proto;
  uint64_t* ctr = c->worker->stats.counters;
  const nhb_client_config* cfg = &c->worker->run->config;
  if (NHB__UNLIKELY(len < NHB__ECHO_SEQ_BYTES)) {
    ctr[NHB_CTR_UDP_UNEXPECTED]++;
    return 0;
  }
  uint64_t seq = 0;
  for (int i = 0; i < NHB__ECHO_SEQ_BYTES; i++) seq = seq << 8 | (unsigned char)data[i];
  if (NHB__LIKELY(seq == e->wait_seq && seq != 0 && c->nactive > 0)) {
    e->wait_seq = 0;
    nhb__slot* s = c->slots;
    size_t plen = len - NHB__ECHO_SEQ_BYTES;
    if (NHB__UNLIKELY(plen != cfg->echo_payload_len ||
                      memcmp(data + NHB__ECHO_SEQ_BYTES, cfg->echo_payload, plen) != 0)) {
      echo_error(c, "udp echo: the datagram that came back differs from the one sent (%llu payload bytes for %llu)",
                 (unsigned long long)plen, (unsigned long long)cfg->echo_payload_len);
      nhb__conn_slot_failed(c, s, NHB_CTR_ECHO_MISMATCH);
      return 0;
    }
    s->header_bytes = 0;
    s->body_bytes = plen;
    nhb__conn_response(c, s, 200);
    return 0;
  }
  for (uint32_t i = 0; seq != 0 && i < NHB__ECHO_LOST_RING; i++) {
    if (e->lost[i] == seq) {
      /* Counted once: a second copy of it is unexpected. */
      e->lost[i] = 0;
      ctr[NHB_CTR_UDP_LATE]++;
      return 0;
    }
  }
  ctr[NHB_CTR_UDP_UNEXPECTED]++;
  return 0;
}

/* A UDP socket has no end of stream; only an error reaches here (an ICMP
 * port unreachable for an earlier datagram: ECONNREFUSED). */
static int udp_echo_on_eof(nhb__conn* c, int err) {
  NHB__UNUSED(c);
  return err == UV_EOF ? NHB_EPROTO : err;
}

static const nhb__session_vtable nhb__session_tcp_echo = {
    "tcp-echo", echo_open, tcp_echo_send, tcp_echo_on_data, tcp_echo_on_eof, tcp_echo_on_writable, NULL, NULL,
};

const nhb__session_vtable nhb__session_udp_echo = {
    "udp-echo", echo_open, udp_echo_send, udp_echo_on_data, udp_echo_on_eof, NULL, udp_echo_cancel, NULL,
};

/* The protocols (nhb__protocol in client.h; NHB_PROTOCOL_MAP in nhb.h). They
 * speak no HTTP: upstream_cx_total only. */
const nhb__protocol nhb__protocol_tcp_echo = {
    .name = "tcp:// echo",
    .session = &nhb__session_tcp_echo,
    .transport = &nhb__transport_tcp,
    .reuse_lru = 1,
    .cx_counter = -1,
    .run_init = echo_run_init,
    .run_free = echo_run_free,
    .conn_free = echo_conn_free,
};

const nhb__protocol nhb__protocol_udp_echo = {
    .name = "udp:// echo",
    .session = &nhb__session_udp_echo,
    .transport = &nhb__transport_udp,
    .reuse_lru = 1,
    .cx_counter = -1,
    .run_init = echo_run_init,
    .run_free = echo_run_free,
    .conn_free = echo_conn_free,
};
