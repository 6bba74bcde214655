/* tunnel_udp.c: HTTP/3 through a CONNECT-UDP proxy (RFC 9298, MASQUE).
 *
 * With config.udp_tunnel_authority set, an HTTP/3 run's connections go to
 * the proxy (the run's targets are its address). Each connection's UDP socket
 * first carries an outer QUIC + HTTP/3 connection to the proxy, on ngtcp2 and
 * GnuTLS as session_h3.c's: once its handshake is done we send our SETTINGS
 * (SETTINGS_H3_DATAGRAM = 1), wait for the proxy's (which must offer
 * SETTINGS_ENABLE_CONNECT_PROTOCOL and SETTINGS_H3_DATAGRAM), and send one
 * extended CONNECT on the first request stream:
 *
 *   :method CONNECT, :protocol connect-udp, :scheme https,
 *   :authority <proxy>, :path /.well-known/masque/udp/<host>/<port>/,
 *   capsule-protocol: ?1
 *
 * On a 2xx the inner QUIC connection (session_h3.c's, to the origin) starts:
 * each of its UDP payloads goes out as an HTTP Datagram (RFC 9297) in a QUIC
 * DATAGRAM frame of the outer connection: the quarter stream id of the
 * CONNECT stream (0, one byte), context id 0 (RFC 9298 section 4, one byte),
 * the payload. The proxy's datagrams come back the same way and are handed to
 * the inner connection as if they had arrived on the socket.
 *
 * The outer HTTP/3 is framed here, not by nghttp3: the nghttp3 we build on
 * can neither send SETTINGS_H3_DATAGRAM nor show the proxy's SETTINGS. What
 * is framed is small: our control stream (a constant), one HEADERS frame per
 * target encoded once per run (QPACK literals only, no dynamic table), and
 * the reading of the proxy's control stream, of its answer (nghttp3's QPACK
 * decoder, with no dynamic table: we announce none) and of capsules, which
 * are skipped (RFC 9297 section 3.2: unknown capsule types are ignored).
 *
 * Re-entrancy: the outer connection's DATAGRAM frames arrive inside
 * ngtcp2_conn_read_pkt(); handing them to the inner connection there could end
 * the connection (and free the outer one) under ngtcp2's feet. They are
 * copied into the connection's ring (RX_SLOTS datagrams, allocated with the
 * entry) and delivered once read_pkt returned.
 *
 * Failures before the 2xx are counted once by cause in the tunnel.* counters
 * (as tunnel.c's): the QUIC or TLS handshake with the proxy (connect_fail),
 * a refusal (non_2xx), a proxy that closes (proxy_closed), a malformed answer
 * or missing SETTINGS (protocol_error), --timeout (the pool's: timeout). A
 * tunnel that ends after its 2xx (the proxy closes the stream or the outer
 * connection) counts tunnel.proxy_closed and fails the requests in flight as
 * resets. Datagrams that carry nothing for the inner connection (another
 * quarter stream id, a context id other than 0, a DATAGRAM capsule, a full
 * ring) are dropped and counted in tunnel.datagrams_dropped.
 *
 * With proxy_protocol 2 the tunnel is CONNECT-UDP on an HTTP/2 stream
 * instead: each entry point hands the connection to tunnel_udp_h2.c's leg
 * (TCP to the proxy; the UDP socket then carries nothing), which shares the
 * failure accounting (nhb__udp_tunnel_fail) and the tunnel's coming up
 * (nhb__udp_tunnel_established) with this file.
 *
 * Allocation: per connection entry the tunnel's state (ring, packet buffer,
 * timer), once; per connection ngtcp2, GnuTLS and the QPACK decoder, as for
 * HTTP/3 itself. Nothing per request: a request's packets pass through
 * nhb__udp_tunnel_send, which writes one outer packet into the entry's buffer.
 */
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <nghttp3/nghttp3.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/client.h"
#include "common/h2_mem.h"
#include "common/quic_common.h"

/* Outer packets: the inner connection's largest (NHB__UDP_TUNNEL_INNER_MAX)
 * plus the outer short header, DATAGRAM frame and AEAD tag fit. */
#define TUN_PKT_MAX 1452
/* DATAGRAM frames we take: more than the inner packets can be (the proxy
 * relays the origin's, which the inner connection holds to 1200). */
#define TUN_DGRAM_MAX 1500
#define RX_SLOTS 16
#define TUN_IDLE_TIMEOUT_NS (30ull * 1000000000ull)
/* The proxy's answer: at most this many header block bytes per HEADERS frame
 * and NHB__RESP_INTERIM interim answers. */
#define TUN_HEADERS_MAX 16384
/* Peer unidirectional streams we follow (control, QPACK encoder, decoder,
 * one more); others are read and dropped. */
#define TUN_UNI 4
/* The HTTP/3 proxy leg of a TCP tunnel: our stream bytes kept until the
 * proxy acknowledged them, and its windows (wide, as the HTTP/2 leg's). */
#define TUN_SBUF (128u * 1024u)
#define TUN_STREAM_WINDOW (1u << 24)
#define TUN_CONN_WINDOW (1u << 30)

/* HTTP/3 frame and stream types, settings (RFC 9114, 9220, 9297). */
#define H3F_DATA 0x00
#define H3F_HEADERS 0x01
#define H3F_SETTINGS 0x04
#define H3F_GOAWAY 0x07
#define H3S_ENABLE_CONNECT_PROTOCOL 0x08
#define H3S_H3_DATAGRAM 0x33

/* Our control stream: its type (0x00) and SETTINGS with H3_DATAGRAM = 1. */
static const uint8_t TUN_CONTROL[] = {0x00, H3F_SETTINGS, 0x02, H3S_H3_DATAGRAM, 0x01};

/* ---- a streaming reader of QUIC varints and HTTP/3 frames --------------------- */

typedef struct vint {
  uint8_t buf[8];
  uint8_t n;
} vint;

/* Takes bytes from [*p, end) until a varint is complete: 1 and *out, or 0. */
static int vint_take(vint* v, const uint8_t** p, const uint8_t* end, uint64_t* out) {
  while (*p < end) {
    v->buf[v->n++] = *(*p)++;
    size_t need = (size_t)1 << (v->buf[0] >> 6);
    if (v->n == need) {
      uint64_t x = v->buf[0] & 0x3f;
      for (size_t i = 1; i < need; i++) x = (x << 8) | v->buf[i];
      v->n = 0;
      *out = x;
      return 1;
    }
  }
  return 0;
}

typedef struct frame_rx {
  vint v;
  uint8_t stage; /* 0: type, 1: length, 2: payload */
  uint64_t type;
  uint64_t left; /* payload bytes still to come */
} frame_rx;

/* A peer's unidirectional stream. */
typedef struct uni_rx {
  int64_t sid; /* -1: unused */
  int64_t type; /* -1: not read yet */
  vint v;
  frame_rx f;
  int settings_seen;
  int pair_stage; /* SETTINGS payload: 0 id, 1 value */
  uint64_t pair_id;
} uni_rx;

struct nhb__udp_tunnel {
  nhb__conn* conn;
  nhb__udp_h2* h2; /* the HTTP/2 leg (tunnel_udp_h2.c), NULL over HTTP/3 */
  ngtcp2_crypto_conn_ref conn_ref;
  ngtcp2_conn* qc;
  gnutls_session_t tls;
  nghttp3_qpack_decoder* dec;
  nghttp3_qpack_stream_context* sctx;
  ngtcp2_mem qmem;
  nghttp3_mem hmem;
  uv_timer_t timer;
  int timer_init;
  ngtcp2_path path; /* the socket's: local and the proxy */
  struct sockaddr_storage local;
  struct sockaddr_storage remote;
  int in_lib;
  int sock_error; /* a send to the proxy failed for good (ECONNREFUSED: its port is closed) */
  int handshake_done;
  int64_t ctrl_sid, req_sid; /* -1 until opened */
  size_t ctrl_sent, req_sent;
  const uint8_t* req;        /* this target's HEADERS frame (the run's) */
  size_t req_len;
  /* The proxy's SETTINGS and answer. */
  int settings; /* 1 once its SETTINGS arrived */
  int connect_protocol, h3_datagram;
  int status;         /* the final answer's, 0 until then */
  int hdr_status;     /* the header block being read */
  uint32_t interims;
  int req_closed;     /* the CONNECT stream ended or was reset */
  const char* why;    /* a protocol error seen in a callback */
  int up;
  frame_rx rx;        /* the CONNECT stream */
  frame_rx cap;       /* capsules inside its DATA frames */
  uni_rx uni[TUN_UNI];
  /* Datagrams for the inner connection, delivered after read_pkt. */
  uint32_t rx_head, rx_count;
  uint16_t rx_len[RX_SLOTS];
  uint8_t rx_buf[RX_SLOTS][TUN_DGRAM_MAX];
  uint8_t pkt[TUN_PKT_MAX];
  /* A classic CONNECT on the request stream (the HTTP/3 proxy leg of a TCP
   * tunnel, carrier.c; see "CONNECT on a request stream" below): set for the
   * entry's life. */
  int stream;
  int parser;      /* the fuzz target's tunnel: DATA is counted, not handed on */
  int req_reset;   /* the proxy reset the CONNECT stream */
  int inner_err;   /* the inner transport refused the origin's bytes */
  int s_freed;     /* an acknowledgement made room in sbuf */
  uint8_t* sbuf;   /* TUN_SBUF bytes: our stream's bytes until acknowledged */
  size_t s_acked, s_sent, s_end; /* stream offsets: acknowledged, sent, written */
  uint64_t delivered; /* the origin's bytes handed on (or counted) */
  int close_fd;       /* a copy of the socket for a CONNECTION_CLOSE after ngtcp2 returned, or -1 */
};

/* The run's part: the proxy's credentials and each target's HEADERS frame. */
typedef struct nhb__udp_tunnel_run {
  void* h2; /* tunnel_udp_h2.c's, with proxy_protocol 2; else NULL */
  gnutls_certificate_credentials_t cred;
  const char* sni;
  const char* verify_name;
  int insecure;
  uint32_t n;
  uint8_t** frame;
  size_t* frame_len;
} nhb__udp_tunnel_run;

static nhb__udp_tunnel_run* trun(const nhb_run* run) {
  /* CONNECT-UDP's, or the HTTP/3 proxy leg's of TCP tunnels (one or none). */
  return (nhb__udp_tunnel_run*)(run->udp_tunnel != NULL ? run->udp_tunnel : run->tunnel.h3_run);
}

const char* nhb__udp_tunnel_authority(const nhb_run* run) {
  const char* a = run->config.udp_tunnel_authority;
  return a != NULL ? a : "";
}

/* ---- failure accounting ------------------------------------------------------ */

void nhb__udp_tunnel_fail(nhb__conn* c, nhb_counter_t cause, const char* what) {
  nhb__worker* w = c->worker;
  char text[256];
  const nhb__run_tunnel* rt = &w->run->tunnel;
  if (rt->h3)
    snprintf(text, sizeof(text), "CONNECT %s via HTTP/3: %s", rt->authority[c->target < rt->n ? c->target : 0], what);
  else
    snprintf(text, sizeof(text), "CONNECT-UDP through %s: %s", nhb__udp_tunnel_authority(w->run), what);
  w->stats.counters[cause]++;
  nhb__worker_record_error_text(w, NHB_EPROXY, text);
  if (c->state == NHB__CX_CONNECTING) {
    c->tunnel = NHB__TUNNEL_FAILED;
    nhb__conn_fail(c, NHB_EPROXY, NHB_CTR_POOL_CONNECTION_FAILURE);
  } else if (c->state == NHB__CX_READY) {
    /* Up and carrying requests: they fail as on a connection the peer
     * reset. */
    c->tunnel = NHB__TUNNEL_FAILED;
    nhb__conn_fail(c, NHB_EPROXY, NHB_CTR_STREAM_RESETS);
  }
}

/* ---- ngtcp2 callbacks --------------------------------------------------------- */

static ngtcp2_conn* tun_get_conn(ngtcp2_crypto_conn_ref* ref) { return ((nhb__udp_tunnel*)ref->user_data)->qc; }

static int tun_handshake_completed(ngtcp2_conn* qc, void* user_data) {
  NHB__UNUSED(qc);
  ((nhb__udp_tunnel*)user_data)->handshake_done = 1;
  return 0;
}

/* One header field of the proxy's answer: only :status is looked at. */
static void tun_field(nhb__udp_tunnel* t, const nghttp3_qpack_nv* nv) {
  if (nv->token == NGHTTP3_QPACK_TOKEN__STATUS) {
    nghttp3_vec v = nghttp3_rcbuf_get_buf(nv->value);
    int status = 0;
    for (size_t i = 0; i < v.len; i++) {
      if (v.base[i] < '0' || v.base[i] > '9' || i >= 3) {
        status = -1;
        break;
      }
      status = status * 10 + (v.base[i] - '0');
    }
    t->hdr_status = v.len == 3 ? status : -1;
  }
}

/* Part of a HEADERS frame's payload; `fin`: the frame ends with it. */
static int tun_headers(nhb__udp_tunnel* t, const uint8_t* p, size_t len, int fin) {
  for (;;) {
    nghttp3_qpack_nv nv;
    uint8_t flags = 0;
    nghttp3_ssize n = nghttp3_qpack_decoder_read_request(t->dec, t->sctx, &nv, &flags, p, len, fin);
    if (n < 0) {
      t->why = "its answer's header block does not decode (QPACK)";
      return -1;
    }
    p += n;
    len -= (size_t)n;
    if (flags & NGHTTP3_QPACK_DECODE_FLAG_EMIT) {
      tun_field(t, &nv);
      nghttp3_rcbuf_decref(nv.name);
      nghttp3_rcbuf_decref(nv.value);
    }
    if (flags & NGHTTP3_QPACK_DECODE_FLAG_BLOCKED) {
      t->why = "its answer refers to a QPACK dynamic table we did not offer";
      return -1;
    }
    if (flags & NGHTTP3_QPACK_DECODE_FLAG_FINAL) {
      nghttp3_qpack_stream_context_reset(t->sctx);
      int status = t->hdr_status;
      t->hdr_status = 0;
      if (t->status != 0) return 0; /* trailers */
      if (status < 100 || status > 599) {
        t->why = "its answer has no valid :status";
        return -1;
      }
      if (status < 200) {
        if (++t->interims > NHB__RESP_INTERIM) {
          t->why = "more than 100 interim (1xx) answers";
          return -1;
        }
        return 0;
      }
      t->status = status;
      return 0;
    }
    if (!(flags & NGHTTP3_QPACK_DECODE_FLAG_EMIT)) {
      if (len == 0 && !fin) return 0;
      if (len == 0 || n == 0) {
        t->why = "its answer's header block is truncated";
        return -1;
      }
    }
  }
}

/* Capsules in the CONNECT stream's DATA (RFC 9297 section 3.2): skipped; a
 * DATAGRAM capsule is one the stream carries instead of a DATAGRAM frame,
 * which this client does not take (it is dropped and counted). */
static void tun_capsules(nhb__conn* c, nhb__udp_tunnel* t, const uint8_t* p, const uint8_t* end) {
  frame_rx* k = &t->cap;
  while (p < end) {
    if (k->stage == 0) {
      if (!vint_take(&k->v, &p, end, &k->type)) return;
      k->stage = 1;
    } else if (k->stage == 1) {
      if (!vint_take(&k->v, &p, end, &k->left)) return;
      k->stage = 2;
      if (k->type == 0x00) c->worker->stats.counters[NHB_CTR_TUNNEL_DATAGRAM_DROPPED]++;
    }
    if (k->stage == 2) {
      uint64_t n = (uint64_t)(end - p) < k->left ? (uint64_t)(end - p) : k->left;
      p += n;
      k->left -= n;
      if (k->left == 0) k->stage = 0;
    }
  }
}

/* Frame types a request stream must not carry (RFC 9114 section 7.2:
 * CANCEL_PUSH, SETTINGS, PUSH_PROMISE from a server to a client on it,
 * GOAWAY, MAX_PUSH_ID, and HTTP/2's reserved types). */
static int frame_unexpected_on_request(uint64_t type) {
  switch (type) {
    case 0x02: case 0x03: case 0x04: case 0x05: case 0x06: case 0x07: case 0x08: case 0x09: case 0x0d:
      return 1;
    default:
      return 0;
  }
}

static int tun_stream_data(nhb__conn* c, nhb__udp_tunnel* t, const uint8_t* p, size_t n);
static int tun_stream_answer(nhb__conn* c, nhb__udp_tunnel* t);
static void tun_closed_inside(nhb__conn* c, nhb__udp_tunnel* t);

/* The CONNECT stream's bytes from the proxy. 0, or -1 with t->why. */
static int tun_request_data(nhb__conn* c, nhb__udp_tunnel* t, const uint8_t* p, size_t len, int fin) {
  const uint8_t* end = p + len;
  frame_rx* f = &t->rx;
  while (p < end) {
    if (f->stage == 0) {
      if (!vint_take(&f->v, &p, end, &f->type)) break;
      f->stage = 1;
      continue;
    }
    if (f->stage == 1) {
      if (!vint_take(&f->v, &p, end, &f->left)) break;
      f->stage = 2;
      if (frame_unexpected_on_request(f->type)) {
        t->why = "a frame a request stream must not carry (H3_FRAME_UNEXPECTED)";
        return -1;
      }
      if (f->type == H3F_DATA && t->status == 0) {
        t->why = "DATA before its answer's HEADERS (H3_FRAME_UNEXPECTED)";
        return -1;
      }
      if (f->type == H3F_HEADERS && f->left > TUN_HEADERS_MAX) {
        t->why = "an answer header block over 16384 bytes";
        return -1;
      }
      if (f->type == H3F_HEADERS && f->left == 0) {
        t->why = "an empty HEADERS frame";
        return -1;
      }
      if (f->left == 0) f->stage = 0;
      continue;
    }
    size_t n = (uint64_t)(end - p) < f->left ? (size_t)(end - p) : (size_t)f->left;
    f->left -= n;
    if (f->type == H3F_HEADERS) {
      if (tun_headers(t, p, n, f->left == 0) < 0) return -1;
    } else if (f->type == H3F_DATA && t->status >= 200 && t->status < 300) {
      if (t->stream) {
        if (tun_stream_data(c, t, p, n) < 0) return -1;
      } else {
        tun_capsules(c, t, p, p + n);
      }
    }
    p += n;
    if (f->left == 0) f->stage = 0;
  }
  if (t->stream && t->status != 0 && !t->up && t->why == NULL && tun_stream_answer(c, t) < 0) return -1;
  if (fin && (f->stage != 0 || f->v.n != 0 || t->cap.stage != 0 || t->cap.v.n != 0)) {
    /* RFC 9297 section 3.3: a capsule (or frame) cut off by the stream's end
     * is malformed. */
    t->why = "its stream ended inside a frame or capsule";
    return -1;
  }
  return 0;
}

/* A SETTINGS frame's payload, in pieces. */
static int tun_settings(nhb__udp_tunnel* t, uni_rx* u, const uint8_t* p, const uint8_t* end) {
  while (p < end) {
    uint64_t x;
    if (!vint_take(&u->v, &p, end, &x)) break;
    if (u->pair_stage == 0) {
      u->pair_id = x;
      u->pair_stage = 1;
      continue;
    }
    u->pair_stage = 0;
    if (u->pair_id == H3S_ENABLE_CONNECT_PROTOCOL) t->connect_protocol = x == 1;
    if (u->pair_id == H3S_H3_DATAGRAM) t->h3_datagram = x == 1;
  }
  return 0;
}

static int tun_uni_data(nhb__udp_tunnel* t, int64_t sid, const uint8_t* p, size_t len, int fin) {
  uni_rx* u = NULL;
  for (int i = 0; i < TUN_UNI && u == NULL; i++)
    if (t->uni[i].sid == sid) u = &t->uni[i];
  for (int i = 0; i < TUN_UNI && u == NULL; i++)
    if (t->uni[i].sid < 0) {
      u = &t->uni[i];
      memset(u, 0, sizeof(*u));
      u->sid = sid;
      u->type = -1;
    }
  if (u == NULL) return 0; /* more streams than we follow: read and dropped */
  const uint8_t* end = p + len;
  if (u->type < 0) {
    uint64_t type;
    if (!vint_take(&u->v, &p, end, &type)) return 0;
    u->type = (int64_t)(type > INT64_MAX ? INT64_MAX : type);
    if (u->type == 0x00) {
      for (int i = 0; i < TUN_UNI; i++)
        if (&t->uni[i] != u && t->uni[i].sid >= 0 && t->uni[i].type == 0x00) {
          t->why = "a second control stream (H3_STREAM_CREATION_ERROR)";
          return -1;
        }
    }
  }
  if (u->type != 0x00) return 0; /* QPACK streams (no dynamic table), others: dropped */
  if (fin) {
    t->why = "it closed its control stream (H3_CLOSED_CRITICAL_STREAM)";
    return -1;
  }
  frame_rx* f = &u->f;
  while (p < end) {
    if (f->stage == 0) {
      if (!vint_take(&f->v, &p, end, &f->type)) break;
      f->stage = 1;
      if (!u->settings_seen && f->type != H3F_SETTINGS) {
        t->why = "its control stream does not start with SETTINGS (H3_MISSING_SETTINGS)";
        return -1;
      }
      if (u->settings_seen && f->type == H3F_SETTINGS) {
        t->why = "a second SETTINGS frame (H3_FRAME_UNEXPECTED)";
        return -1;
      }
      continue;
    }
    if (f->stage == 1) {
      if (!vint_take(&f->v, &p, end, &f->left)) break;
      f->stage = 2;
      if (f->type == H3F_SETTINGS) {
        u->settings_seen = 1;
        if (f->left > 4096) {
          t->why = "a SETTINGS frame over 4096 bytes";
          return -1;
        }
      }
      if (f->type == H3F_DATA || f->type == H3F_HEADERS) {
        t->why = "DATA or HEADERS on its control stream (H3_FRAME_UNEXPECTED)";
        return -1;
      }
    } else {
      size_t n = (uint64_t)(end - p) < f->left ? (size_t)(end - p) : (size_t)f->left;
      if (f->type == H3F_SETTINGS) tun_settings(t, u, p, p + n);
      p += n;
      f->left -= n;
    }
    if (f->stage == 2 && f->left == 0) {
      if (f->type == H3F_SETTINGS) {
        if (u->v.n != 0 || u->pair_stage != 0) {
          t->why = "a malformed SETTINGS frame (H3_FRAME_ERROR)";
          return -1;
        }
        t->settings = 1;
      }
      f->stage = 0;
    }
  }
  return 0;
}

int nhb__udp_tunnel_stream_bytes(nhb__udp_tunnel* t, int64_t sid, const uint8_t* data, size_t len, int fin) {
  int r = 0;
  if (t->why != NULL) return -1;
  if (sid == t->req_sid) {
    r = tun_request_data(t->conn, t, data, len, fin);
    if (fin) t->req_closed = 1;
  } else if ((sid & 0x2) != 0) { /* unidirectional */
    r = tun_uni_data(t, sid, data, len, fin);
  }
  return r;
}

static int tun_recv_stream_data(ngtcp2_conn* qc, uint32_t flags, int64_t sid, uint64_t offset, const uint8_t* data,
                                size_t len, void* user_data, void* stream_user_data) {
  NHB__UNUSED(offset);
  NHB__UNUSED(stream_user_data);
  nhb__udp_tunnel* t = user_data;
  int fin = (flags & NGTCP2_STREAM_DATA_FLAG_FIN) != 0;
  if (nhb__udp_tunnel_stream_bytes(t, sid, data, len, fin) < 0) return NGTCP2_ERR_CALLBACK_FAILURE;
  ngtcp2_conn_extend_max_stream_offset(qc, sid, len);
  ngtcp2_conn_extend_max_offset(qc, len);
  return 0;
}

static int tun_stream_close(ngtcp2_conn* qc, uint32_t flags, int64_t sid, uint64_t code, void* user_data,
                            void* stream_user_data) {
  NHB__UNUSED(qc);
  NHB__UNUSED(flags);
  NHB__UNUSED(code);
  NHB__UNUSED(stream_user_data);
  nhb__udp_tunnel* t = user_data;
  if (sid == t->req_sid) t->req_closed = 1;
  return 0;
}

static int tun_acked(ngtcp2_conn* qc, int64_t sid, uint64_t offset, uint64_t datalen, void* user_data,
                     void* stream_user_data);

static int tun_stream_reset(ngtcp2_conn* qc, int64_t sid, uint64_t final_size, uint64_t code, void* user_data,
                            void* stream_user_data) {
  NHB__UNUSED(final_size);
  nhb__udp_tunnel* t = user_data;
  if (sid == t->req_sid) t->req_reset = 1;
  return tun_stream_close(qc, 0, sid, code, user_data, stream_user_data);
}

/* An HTTP Datagram: copied into the ring when it is the CONNECT stream's
 * with context id 0 (RFC 9298 section 4: other context ids are dropped),
 * once the proxy answered 2xx (datagrams may share the answer's packet). */
void nhb__udp_tunnel_datagram(nhb__udp_tunnel* t, const uint8_t* data, size_t len) {
  uint64_t* ctr = t->conn->worker->stats.counters;
  const uint8_t* p = data;
  const uint8_t* end = data + len;
  vint v = {{0}, 0};
  uint64_t qsid, ctx;
  if (t->status / 100 != 2 || t->req_sid < 0 || !vint_take(&v, &p, end, &qsid) || qsid != (uint64_t)t->req_sid / 4 ||
      !vint_take(&v, &p, end, &ctx) || ctx != 0 || p == end || (size_t)(end - p) > TUN_DGRAM_MAX ||
      t->rx_count == RX_SLOTS) {
    ctr[NHB_CTR_TUNNEL_DATAGRAM_DROPPED]++;
    return;
  }
  uint32_t k = (t->rx_head + t->rx_count) % RX_SLOTS;
  t->rx_len[k] = (uint16_t)(end - p);
  memcpy(t->rx_buf[k], p, (size_t)(end - p));
  t->rx_count++;
}

static int tun_recv_datagram(ngtcp2_conn* qc, uint32_t flags, const uint8_t* data, size_t len, void* user_data) {
  NHB__UNUSED(qc);
  NHB__UNUSED(flags);
  nhb__udp_tunnel_datagram(user_data, data, len);
  return 0;
}

/* ---- output ----------------------------------------------------------------- */

static void tun_on_timer(uv_timer_t* timer);

static void tun_arm(nhb__udp_tunnel* t) {
  if (!t->timer_init || t->qc == NULL) return;
  uint64_t expiry = ngtcp2_conn_get_expiry(t->qc);
  uint64_t now = nhb__now_ns();
  uint64_t ms = expiry <= now ? 0 : (expiry - now + 999999) / 1000000;
  uv_timer_start(&t->timer, tun_on_timer, ms, 0);
}

static void tun_want_write(nhb__udp_tunnel* t) {
  if (t->timer_init) uv_timer_start(&t->timer, tun_on_timer, 0, 0);
}

/* Our two streams' bytes (both the run's, kept until it ends, as ngtcp2
 * needs until they are acknowledged) and whatever else QUIC has to send. */
static int tun_write(nhb__conn* c, nhb__udp_tunnel* t) {
  uint64_t ts = nhb__now_ns();
  for (int npkts = 0; npkts < 64; npkts++) {
    int64_t sid = -1;
    ngtcp2_vec v = {NULL, 0};
    size_t nv = 0;
    size_t* sent = NULL;
    if (t->ctrl_sid >= 0 && t->ctrl_sent < sizeof(TUN_CONTROL)) {
      sid = t->ctrl_sid;
      v.base = (uint8_t*)(uintptr_t)(TUN_CONTROL + t->ctrl_sent);
      v.len = sizeof(TUN_CONTROL) - t->ctrl_sent;
      sent = &t->ctrl_sent;
      nv = 1;
    } else if (t->stream && t->req_sid >= 0 && t->s_sent < t->s_end) {
      /* The ring's bytes up to its end; the rest in the next packet. */
      size_t at = t->s_sent % TUN_SBUF;
      size_t len = t->s_end - t->s_sent;
      v.base = t->sbuf + at;
      v.len = len < TUN_SBUF - at ? len : TUN_SBUF - at;
      sid = t->req_sid;
      sent = &t->s_sent;
      nv = 1;
    } else if (t->req_sid >= 0 && t->req_sent < t->req_len) {
      sid = t->req_sid;
      v.base = (uint8_t*)(uintptr_t)(t->req + t->req_sent);
      v.len = t->req_len - t->req_sent;
      sent = &t->req_sent;
      nv = 1;
    }
    ngtcp2_ssize ndata = -1;
    ngtcp2_pkt_info pi;
    ngtcp2_ssize n = ngtcp2_conn_writev_stream(t->qc, NULL, &pi, t->pkt, sizeof(t->pkt), &ndata,
                                               nv ? NGTCP2_WRITE_STREAM_FLAG_MORE : 0, sid, &v, nv, ts);
    if (n == NGTCP2_ERR_WRITE_MORE) {
      *sent += (size_t)ndata;
      continue;
    }
    if (n == NGTCP2_ERR_STREAM_DATA_BLOCKED || n == NGTCP2_ERR_STREAM_SHUT_WR) {
      /* Our stream bytes wait for credit (or the stream is gone): the rest
       * of what QUIC has goes out without them. */
      n = ngtcp2_conn_write_pkt(t->qc, NULL, &pi, t->pkt, sizeof(t->pkt), ts);
      ndata = -1;
    }
    if (n < 0) return (int)n;
    if (ndata > 0 && sent != NULL) *sent += (size_t)ndata;
    if (n == 0) break;
    uv_buf_t buf = uv_buf_init((char*)t->pkt, (unsigned)n);
    int r = nhb__udp_send(c, &buf, 1);
    if (r < 0) {
      /* A full socket buffer drops the packet (QUIC sends it again); any
       * other error is the kernel reporting an ICMP error for an earlier
       * datagram, once, to whichever call comes first. */
      if (r != UV_EAGAIN && r != UV_ENOBUFS) t->sock_error = r;
      ngtcp2_conn_update_pkt_tx_time(t->qc, ts);
      break;
    }
  }
  tun_arm(t);
  return 0;
}

int nhb__udp_tunnel_send(nhb__conn* c, nhb__udp_tunnel* t, const uint8_t* pkt, size_t len) {
  if (t->h2 != NULL) return nhb__udp_h2_send(t->h2, pkt, len);
  if (t->qc == NULL || !t->up) return UV_EAGAIN;
  /* Quarter stream id 0 and context id 0: the CONNECT stream is the
   * connection's first (client bidirectional stream 0). */
  static const uint8_t prefix[2] = {0x00, 0x00};
  ngtcp2_vec v[2] = {{(uint8_t*)(uintptr_t)prefix, 2}, {(uint8_t*)(uintptr_t)pkt, len}};
  int accepted = 0;
  ngtcp2_pkt_info pi;
  t->in_lib = 1;
  ngtcp2_ssize n = ngtcp2_conn_writev_datagram(t->qc, NULL, &pi, t->pkt, sizeof(t->pkt), &accepted,
                                               NGTCP2_WRITE_DATAGRAM_FLAG_NONE, 0, v, 2, nhb__now_ns());
  t->in_lib = 0;
  if (n < 0) {
    /* Too large for the proxy's DATAGRAM frames, or the outer connection
     * is closing: the inner packet is lost (QUIC sends it again, or its
     * connection ends on its own). */
    return UV_EAGAIN;
  }
  int r = 0;
  if (n > 0) {
    uv_buf_t buf = uv_buf_init((char*)t->pkt, (unsigned)n);
    r = nhb__udp_send(c, &buf, 1);
  }
  tun_arm(t);
  return r < 0 ? r : accepted ? 0 : UV_EAGAIN;
}

/* ---- after each library call: the tunnel's next step ------------------------ */

static void tun_deliver(nhb__conn* c, nhb__udp_tunnel* t) {
  while (t->rx_count > 0 && t->qc != NULL && (c->state == NHB__CX_CONNECTING || c->state == NHB__CX_READY)) {
    uint32_t k = t->rx_head;
    t->rx_head = (t->rx_head + 1) % RX_SLOTS;
    t->rx_count--;
    nhb__h3_tunnel_packet(c, t->rx_buf[k], t->rx_len[k]);
  }
  t->rx_count = 0;
}

static const char* tun_handshake_why(nhb__udp_tunnel* t, char* text, size_t len) {
  unsigned status = t->tls != NULL ? gnutls_session_get_verify_cert_status(t->tls) : 0;
  if (status != 0) {
    gnutls_datum_t out = {NULL, 0};
    if (gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &out, 0) == 0 && out.data != NULL) {
      size_t n = out.size;
      while (n > 0 && (out.data[n - 1] == ' ' || out.data[n - 1] == '\0')) n--;
      snprintf(text, len, "TLS handshake with the proxy failed: certificate verify failed: %.*s", (int)n,
               (const char*)out.data);
      gnutls_free(out.data);
      return text;
    }
  }
  uint8_t alert = ngtcp2_conn_get_tls_alert(t->qc);
  const char* name = alert ? gnutls_alert_get_strname((gnutls_alert_description_t)alert) : NULL;
  snprintf(text, len, "TLS handshake with the proxy failed: %s", name != NULL ? name : "the QUIC handshake broke off");
  return text;
}

int nhb__udp_tunnel_established(nhb__conn* c, nhb__udp_tunnel* t) {
  nhb__worker* w = c->worker;
  w->stats.counters[NHB_CTR_TUNNEL_ESTABLISHED]++;
  nhb_hist* h = w->stats.hists[NHB_HIST_TUNNEL_SETUP];
  if (h != NULL) nhb_hist_record(h, nhb__now_ns() - c->tunnel_start_ns);
  t->up = 1;
  c->tunnel = 0;
  return nhb__h3_tunnel_up(c);
}

/* ngtcp2 returned `r` from the outer connection; 0 when all is well. Returns
 * 0 when the connection goes on. */
static int tun_after(nhb__conn* c, nhb__udp_tunnel* t, int r) {
  char text[200];
  /* The carrier's connection may have ended inside the call (its inner
   * transport failed it): nothing more to count. */
  if (t->stream && c->state != NHB__CX_READY && c->state != NHB__CX_CONNECTING) return -1;
  if (NHB__UNLIKELY(t->sock_error != 0)) {
    snprintf(text, sizeof(text), "the proxy's UDP port: %s", nhb_strerror(t->sock_error));
    nhb__udp_tunnel_fail(c, t->handshake_done ? NHB_CTR_TUNNEL_CLOSED : NHB_CTR_TUNNEL_CONNECT_FAIL, text);
    return -1;
  }
  if (r != 0 || t->why != NULL) {
    if (t->why != NULL) {
      snprintf(text, sizeof(text), "the proxy broke HTTP/3: %s", t->why);
      nhb__udp_tunnel_fail(c, NHB_CTR_TUNNEL_PROTOCOL_ERROR, text);
    } else if (r == NGTCP2_ERR_DRAINING || r == NGTCP2_ERR_CLOSING) {
      ngtcp2_connection_close_error ccerr;
      ngtcp2_conn_get_connection_close_error(t->qc, &ccerr);
      snprintf(text, sizeof(text), "the proxy closed its QUIC connection (error 0x%llx)",
               (unsigned long long)ccerr.error_code);
      nhb__udp_tunnel_fail(c, t->handshake_done ? NHB_CTR_TUNNEL_CLOSED : NHB_CTR_TUNNEL_CONNECT_FAIL, text);
    } else if (r == NGTCP2_ERR_IDLE_CLOSE || r == NGTCP2_ERR_HANDSHAKE_TIMEOUT) {
      nhb__udp_tunnel_fail(c, t->handshake_done ? NHB_CTR_TUNNEL_CLOSED : NHB_CTR_TUNNEL_TIMEOUT,
               "no packet from the proxy (QUIC idle time-out)");
    } else if (r == NGTCP2_ERR_CRYPTO) {
      nhb__udp_tunnel_fail(c, t->stream ? NHB_CTR_TUNNEL_TLS_FAIL : NHB_CTR_TUNNEL_CONNECT_FAIL,
               tun_handshake_why(t, text, sizeof(text)));
    } else {
      snprintf(text, sizeof(text), "QUIC with the proxy failed: %s", ngtcp2_strerror(r));
      nhb__udp_tunnel_fail(c, t->handshake_done ? NHB_CTR_TUNNEL_PROTOCOL_ERROR : NHB_CTR_TUNNEL_CONNECT_FAIL, text);
    }
    return -1;
  }
  if (t->handshake_done && t->ctrl_sid < 0) {
    if (ngtcp2_conn_open_uni_stream(t->qc, &t->ctrl_sid, NULL) != 0) {
      nhb__udp_tunnel_fail(c, NHB_CTR_TUNNEL_PROTOCOL_ERROR, "the proxy allows no unidirectional stream (HTTP/3 control)");
      return -1;
    }
  }
  if (t->settings && t->req_sid < 0) {
    if (!t->stream && (!t->connect_protocol || !t->h3_datagram)) {
      nhb__udp_tunnel_fail(c, NHB_CTR_TUNNEL_PROTOCOL_ERROR,
               !t->connect_protocol ? "the proxy does not offer extended CONNECT (SETTINGS_ENABLE_CONNECT_PROTOCOL)"
                                    : "the proxy does not offer HTTP Datagrams (SETTINGS_H3_DATAGRAM)");
      return -1;
    }
    const ngtcp2_transport_params* tp = ngtcp2_conn_get_remote_transport_params(t->qc);
    if (!t->stream && (tp == NULL || tp->max_datagram_frame_size < NHB__UDP_TUNNEL_INNER_MAX + 8)) {
      nhb__udp_tunnel_fail(c, NHB_CTR_TUNNEL_PROTOCOL_ERROR,
               "the proxy's QUIC DATAGRAM frames cannot carry a QUIC packet (max_datagram_frame_size)");
      return -1;
    }
    if (ngtcp2_conn_open_bidi_stream(t->qc, &t->req_sid, NULL) != 0 || t->req_sid != 0) {
      nhb__udp_tunnel_fail(c, NHB_CTR_TUNNEL_PROTOCOL_ERROR, "the proxy allows no request stream");
      return -1;
    }
    c->tunnel = NHB__TUNNEL_WAITING;
  }
  if (!t->up && t->status != 0) {
    if (t->status < 200 || t->status > 299) {
      snprintf(text, sizeof(text), "the proxy answered %d to CONNECT%s", t->status, t->stream ? "" : "-UDP");
      nhb__udp_tunnel_fail(c, NHB_CTR_TUNNEL_NON_2XX, text);
      return -1;
    }
    if (t->stream) {
      if (tun_stream_answer(c, t) < 0) return -1;
    } else if (nhb__udp_tunnel_established(c, t) < 0) {
      return -1;
    }
  }
  if (t->stream && t->req_closed && t->up && !t->req_reset) {
    /* The origin closed its side: the proxy ended the stream (RFC 9114
     * section 4.4). */
    t->req_closed = 0;
    nhb__conn_eof(c);
    return -1;
  }
  if (t->stream && t->req_reset) {
    nhb__udp_tunnel_fail(c, NHB_CTR_TUNNEL_RESET,
             t->up ? "the proxy reset the CONNECT stream" : "the proxy reset the CONNECT stream before its answer");
    return -1;
  }
  if (t->req_closed) {
    nhb__udp_tunnel_fail(c, NHB_CTR_TUNNEL_CLOSED,
             t->up ? "the proxy ended the tunnel (its CONNECT stream closed)"
                   : "the proxy closed the CONNECT stream before its answer");
    return -1;
  }
  if (t->up) tun_deliver(c, t);
  return c->state == NHB__CX_CONNECTING || c->state == NHB__CX_READY ? 0 : -1;
}

static void tun_on_timer(uv_timer_t* timer) {
  nhb__udp_tunnel* t = (nhb__udp_tunnel*)timer->data;
  nhb__conn* c = t->conn;
  if (t->qc == NULL || (c->state != NHB__CX_READY && c->state != NHB__CX_CONNECTING)) return;
  uint64_t now = nhb__now_ns();
  t->in_lib = 1;
  int r = 0;
  if (ngtcp2_conn_get_expiry(t->qc) <= now) r = ngtcp2_conn_handle_expiry(t->qc, now);
  if (r == 0) r = tun_write(c, t);
  t->in_lib = 0;
  (void)tun_after(c, t, r);
}

int nhb__udp_tunnel_read(nhb__conn* c, nhb__udp_tunnel* t, const char* data, size_t len) {
  if (t->qc == NULL) return 0; /* the HTTP/2 leg's UDP socket carries nothing */
  ngtcp2_pkt_info pi;
  memset(&pi, 0, sizeof(pi));
  t->in_lib = 1;
  int r = ngtcp2_conn_read_pkt(t->qc, &t->path, &pi, (const uint8_t*)data, len, nhb__now_ns());
  t->in_lib = 0;
  if (NHB__UNLIKELY(t->close_fd >= 0)) tun_closed_inside(c, t);
  if (tun_after(c, t, r) == 0) {
    tun_want_write(t);
    if (NHB__UNLIKELY(t->stream)) {
      if (t->inner_err < 0) return t->inner_err;
      if (t->s_freed) {
        t->s_freed = 0;
        nhb__carrier_h3_room(c);
      }
    }
  }
  return 0;
}

/* ---- per connection ---------------------------------------------------------- */

int nhb__udp_tunnel_new(nhb__conn* c, nhb__udp_tunnel** out) {
  nhb__udp_tunnel* t = calloc(1, sizeof(*t));
  if (t == NULL) return NHB_ENOMEM;
  t->conn = c;
  t->close_fd = -1;
  t->conn_ref.get_conn = tun_get_conn;
  t->conn_ref.user_data = t;
  nghttp2_mem m = nhb__h2_mem_allocator(&c->worker->h2_mem);
  t->qmem.user_data = m.mem_user_data;
  t->qmem.malloc = m.malloc;
  t->qmem.free = m.free;
  t->qmem.calloc = m.calloc;
  t->qmem.realloc = m.realloc;
  t->hmem.user_data = m.mem_user_data;
  t->hmem.malloc = m.malloc;
  t->hmem.free = m.free;
  t->hmem.calloc = m.calloc;
  t->hmem.realloc = m.realloc;
  int r = uv_timer_init(&c->worker->loop, &t->timer);
  if (r < 0) {
    free(t);
    return r;
  }
  t->timer.data = t;
  t->timer_init = 1;
  *out = t;
  void* h2run = trun(c->worker->run)->h2;
  if (h2run != NULL && (t->h2 = nhb__udp_h2_new(c, t, h2run)) == NULL) return NHB_ENOMEM;
  return 0;
}

void nhb__udp_tunnel_teardown(nhb__udp_tunnel* t) {
  if (t == NULL) return;
  nhb__udp_h2_teardown(t->h2);
  if (t->timer_init) uv_timer_stop(&t->timer);
  if (t->sctx != NULL) nghttp3_qpack_stream_context_del(t->sctx);
  if (t->dec != NULL) nghttp3_qpack_decoder_del(t->dec);
  if (t->qc != NULL) ngtcp2_conn_del(t->qc);
  if (t->tls != NULL) gnutls_deinit(t->tls);
  t->sctx = NULL;
  t->dec = NULL;
  t->qc = NULL;
  t->tls = NULL;
}

/* The run is over: a CONNECTION_CLOSE to the proxy (best effort), and the
 * timer closes with the loop. */
static void tun_send_close(nhb__conn* c, nhb__udp_tunnel* t, int fd);

void nhb__udp_tunnel_close(nhb__conn* c, nhb__udp_tunnel* t) {
  if (t == NULL) return;
  nhb__udp_h2_close(t->h2);
  tun_send_close(c, t, -1);
  if (t->timer_init) {
    t->timer_init = 0;
    uv_close((uv_handle_t*)&t->timer, NULL);
  }
}

/* A CONNECTION_CLOSE (H3_NO_ERROR) to the proxy, best effort: on the
 * connection's socket, or on `fd` (>= 0, its copy) once the handle closed. */
static void tun_send_close(nhb__conn* c, nhb__udp_tunnel* t, int fd) {
  if (t->qc != NULL && !ngtcp2_conn_is_in_closing_period(t->qc) && !ngtcp2_conn_is_in_draining_period(t->qc) &&
      t->handshake_done) {
    ngtcp2_connection_close_error ccerr;
    ngtcp2_connection_close_error_default(&ccerr);
    ngtcp2_connection_close_error_set_application_error(&ccerr, NGHTTP3_H3_NO_ERROR, NULL, 0);
    ngtcp2_pkt_info pi;
    ngtcp2_ssize n =
        ngtcp2_conn_write_connection_close(t->qc, NULL, &pi, t->pkt, sizeof(t->pkt), &ccerr, nhb__now_ns());
    if (n > 0 && fd >= 0) {
      if (send(fd, t->pkt, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) == n)
        c->worker->stats.counters[NHB_CTR_UPSTREAM_CX_TX_BYTES_TOTAL] += (uint64_t)n;
    } else if (n > 0) {
      uv_buf_t buf = uv_buf_init((char*)t->pkt, (unsigned)n);
      (void)nhb__udp_send(c, &buf, 1);
    }
  }
}

void nhb__udp_tunnel_free(nhb__udp_tunnel* t) {
  if (t == NULL) return;
  nhb__udp_tunnel_teardown(t);
  nhb__udp_h2_free(t->h2);
  free(t);
}

static int tun_tls_init(nhb__conn* c, nhb__udp_tunnel* t) {
  if (gnutls_init(&t->tls, GNUTLS_CLIENT) != 0) return NHB_ENOMEM;
  if (ngtcp2_crypto_gnutls_configure_client_session(t->tls) != 0 ||
      gnutls_priority_set_direct(t->tls, "NORMAL:-VERS-ALL:+VERS-TLS1.3:%DISABLE_TLS13_COMPAT_MODE", NULL) != 0 ||
      gnutls_credentials_set(t->tls, GNUTLS_CRD_CERTIFICATE, trun(c->worker->run)->cred) != 0)
    return NHB_ETLS;
  gnutls_session_set_ptr(t->tls, &t->conn_ref);
  static const gnutls_datum_t alpn = {(unsigned char*)"h3", 2};
  if (gnutls_alpn_set_protocols(t->tls, &alpn, 1, GNUTLS_ALPN_MANDATORY) != 0) return NHB_ETLS;
  const nhb__udp_tunnel_run* tr = trun(c->worker->run);
  const char* sni = tr->sni;
  if (sni != NULL && sni[0] != '\0' && gnutls_server_name_set(t->tls, GNUTLS_NAME_DNS, sni, strlen(sni)) != 0)
    return NHB_ETLS;
  if (!tr->insecure) {
    const char* name = tr->verify_name;
    gnutls_session_set_verify_cert(t->tls, name != NULL && name[0] ? name : NULL, 0);
  }
  return 0;
}

/* Everything of the previous connection goes; the entry's buffers stay. */
static void tun_reset(nhb__udp_tunnel* t) {
  nhb__udp_tunnel_teardown(t);
  t->in_lib = 0;
  t->sock_error = 0;
  t->handshake_done = 0;
  t->ctrl_sid = t->req_sid = -1;
  t->ctrl_sent = t->req_sent = 0;
  t->settings = t->connect_protocol = t->h3_datagram = 0;
  t->status = t->hdr_status = 0;
  t->interims = 0;
  t->req_closed = 0;
  t->why = NULL;
  t->up = 0;
  memset(&t->rx, 0, sizeof(t->rx));
  memset(&t->cap, 0, sizeof(t->cap));
  for (int i = 0; i < TUN_UNI; i++) t->uni[i].sid = -1;
  t->rx_head = t->rx_count = 0;
}

nhb__udp_tunnel* nhb__udp_tunnel_parser_new(nhb__conn* c) {
  nhb__udp_tunnel* t = calloc(1, sizeof(*t));
  if (t == NULL) return NULL;
  t->conn = c;
  t->close_fd = -1;
  t->hmem = *nghttp3_mem_default();
  tun_reset(t);
  t->req_sid = 0;
  if (nghttp3_qpack_decoder_new(&t->dec, 0, 0, &t->hmem) != 0 ||
      nghttp3_qpack_stream_context_new(&t->sctx, 0, &t->hmem) != 0) {
    nhb__udp_tunnel_free(t);
    return NULL;
  }
  return t;
}

int nhb__udp_tunnel_parsed(const nhb__udp_tunnel* t, const char** why, uint32_t* queued) {
  *why = t->why;
  *queued = t->rx_count;
  return t->status;
}

int nhb__udp_tunnel_start(nhb__conn* c, nhb__udp_tunnel* t, const struct sockaddr* local, size_t local_len,
                          const nhb_sockaddr* to) {
  tun_reset(t);
  const nhb__udp_tunnel_run* tr = trun(c->worker->run);
  uint32_t k = c->target < tr->n ? c->target : 0;
  t->req = tr->frame[k];
  t->req_len = tr->frame_len[k];
  memcpy(&t->local, local, local_len);
  memcpy(&t->remote, to->bytes, to->len);
  t->path.local.addr = (ngtcp2_sockaddr*)&t->local;
  t->path.local.addrlen = (ngtcp2_socklen)local_len;
  t->path.remote.addr = (ngtcp2_sockaddr*)&t->remote;
  t->path.remote.addrlen = (ngtcp2_socklen)to->len;
  t->path.user_data = NULL;
  c->tunnel = NHB__TUNNEL_TCP;
  c->tunnel_start_ns = nhb__now_ns();
  if (t->h2 != NULL) return nhb__udp_h2_start(t->h2, to);

  if (nghttp3_qpack_decoder_new(&t->dec, 0, 0, &t->hmem) != 0 ||
      nghttp3_qpack_stream_context_new(&t->sctx, 0, &t->hmem) != 0)
    return NHB_ENOMEM;
  int r = tun_tls_init(c, t);
  if (r < 0) return r;

  ngtcp2_callbacks cb;
  memset(&cb, 0, sizeof(cb));
  cb.client_initial = ngtcp2_crypto_client_initial_cb;
  cb.recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb;
  cb.handshake_completed = tun_handshake_completed;
  cb.encrypt = ngtcp2_crypto_encrypt_cb;
  cb.decrypt = ngtcp2_crypto_decrypt_cb;
  cb.hp_mask = ngtcp2_crypto_hp_mask_cb;
  cb.recv_stream_data = tun_recv_stream_data;
  cb.stream_close = tun_stream_close;
  cb.recv_retry = ngtcp2_crypto_recv_retry_cb;
  cb.rand = nhb__quic_rand;
  cb.get_new_connection_id = nhb__quic_new_connection_id;
  cb.update_key = ngtcp2_crypto_update_key_cb;
  cb.stream_reset = tun_stream_reset;
  cb.delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb;
  cb.delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb;
  cb.get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb;
  cb.version_negotiation = ngtcp2_crypto_version_negotiation_cb;
  cb.recv_datagram = tun_recv_datagram;

  ngtcp2_cid dcid, scid;
  dcid.datalen = 18;
  scid.datalen = 17;
  if (gnutls_rnd(GNUTLS_RND_RANDOM, dcid.data, dcid.datalen) != 0 ||
      gnutls_rnd(GNUTLS_RND_RANDOM, scid.data, scid.datalen) != 0)
    return NHB_ENOMEM;
  const nhb_client_config* cfg = &c->worker->run->config;
  ngtcp2_settings settings;
  ngtcp2_settings_default(&settings);
  settings.initial_ts = nhb__now_ns();
  settings.handshake_timeout = cfg->connect_timeout_ns ? 2 * cfg->connect_timeout_ns : UINT64_MAX;
  /* The inner connection's packets plus the outer overhead must fit from
   * the first packet on: no shaping to 1200 bytes. */
  settings.max_tx_udp_payload_size = TUN_PKT_MAX;
  settings.no_tx_udp_payload_size_shaping = 1;
  ngtcp2_transport_params params;
  ngtcp2_transport_params_default(&params);
  params.initial_max_streams_uni = TUN_UNI;
  params.initial_max_streams_bidi = 0;
  params.initial_max_stream_data_bidi_local = 1u << 20;
  params.initial_max_stream_data_uni = 1u << 16;
  params.initial_max_data = 1u << 22;
  params.max_idle_timeout = TUN_IDLE_TIMEOUT_NS;
  params.max_datagram_frame_size = TUN_DGRAM_MAX + 16;
  if (t->stream) {
    /* The origin's bytes on the CONNECT stream: windows as wide as the
     * HTTP/2 leg's, returned as the inner transport takes the bytes. */
    params.initial_max_stream_data_bidi_local = TUN_STREAM_WINDOW;
    params.initial_max_data = TUN_CONN_WINDOW;
    cb.acked_stream_data_offset = tun_acked;
  }
  if (ngtcp2_conn_client_new(&t->qc, &dcid, &scid, &t->path, NGTCP2_PROTO_VER_V1, &cb, &settings, &params, &t->qmem,
                             t) != 0)
    return NHB_ENOMEM;
  ngtcp2_conn_set_tls_native_handle(t->qc, t->tls);
  tun_want_write(t);
  return 0;
}

/* ---- per run ---------------------------------------------------------------- */

static size_t put_vint(uint8_t* p, uint64_t x) {
  if (x < 64) {
    p[0] = (uint8_t)x;
    return 1;
  }
  if (x < 16384) {
    p[0] = (uint8_t)(0x40 | (x >> 8));
    p[1] = (uint8_t)x;
    return 2;
  }
  p[0] = (uint8_t)(0x80 | (x >> 24));
  p[1] = (uint8_t)(x >> 16);
  p[2] = (uint8_t)(x >> 8);
  p[3] = (uint8_t)x;
  return 4;
}

/* A QPACK prefixed integer (RFC 7541 section 5.1): `first` holds the
 * pattern bits above the `bits`-bit prefix. */
static size_t put_qint(uint8_t* p, uint8_t first, int bits, uint64_t x) {
  uint64_t max = (1u << bits) - 1;
  if (x < max) {
    p[0] = (uint8_t)(first | x);
    return 1;
  }
  size_t n = 0;
  p[n++] = (uint8_t)(first | max);
  x -= max;
  while (x >= 128) {
    p[n++] = (uint8_t)(0x80 | (x & 0x7f));
    x >>= 7;
  }
  p[n++] = (uint8_t)x;
  return n;
}

/* One field as a "literal field line with literal name" (RFC 9204 section
 * 4.5.6), no Huffman: 001N H=0 then the name's length in 3 bits. */
static size_t put_field(uint8_t* p, const char* name, const char* value) {
  size_t n = 0;
  size_t nl = strlen(name), vl = strlen(value);
  n += put_qint(p + n, 0x20, 3, nl);
  memcpy(p + n, name, nl);
  n += nl;
  n += put_qint(p + n, 0x00, 7, vl);
  memcpy(p + n, value, vl);
  return n + vl;
}

/* The run's part of either use of the outer QUIC connection (CONNECT-UDP, or
 * a CONNECT stream for the carrier), stored at *slot so that a failed set-up
 * is freed with the run: the proxy's TLS names and one request frame per
 * target. */
static nhb__udp_tunnel_run* tun_run_new(void* slot, const char* sni, const char* verify_name, int insecure,
                                        uint32_t n) {
  nhb__udp_tunnel_run* tr = calloc(1, sizeof(*tr));
  if (tr == NULL) return NULL;
  *(nhb__udp_tunnel_run**)slot = tr;
  tr->sni = sni;
  tr->verify_name = verify_name;
  tr->insecure = insecure;
  tr->n = n;
  tr->frame = calloc(n, sizeof(*tr->frame));
  tr->frame_len = calloc(n, sizeof(*tr->frame_len));
  return tr->frame != NULL && tr->frame_len != NULL ? tr : NULL;
}

static void tun_run_free(void* slot) {
  nhb__udp_tunnel_run* tr = *(nhb__udp_tunnel_run**)slot;
  if (tr == NULL) return;
  if (tr->cred != NULL) gnutls_certificate_free_credentials(tr->cred);
  nhb__udp_h2_run_free(tr->h2);
  for (uint32_t i = 0; tr->frame != NULL && i < tr->n; i++) free(tr->frame[i]);
  free(tr->frame);
  free(tr->frame_len);
  free(tr);
  *(nhb__udp_tunnel_run**)slot = NULL;
}

/* The credentials that check the proxy's certificate: a CA file or OpenSSL-style
 * directory (`what` names it in an error), CAs as PEM text (Nighthawk's
 * trusted_ca.inline_string), or the system's store when neither is given;
 * nothing to trust with `insecure`. */
static int tun_trust(gnutls_certificate_credentials_t* cred, int insecure, const char* ca, const char* pem,
                     const char* what, char* err, size_t err_len) {
  if (gnutls_certificate_allocate_credentials(cred) != 0) {
    *cred = NULL;
    return NHB_ENOMEM;
  }
  if (insecure) return 0;
  int have_ca = ca != NULL && ca[0] != '\0';
  if (have_ca) {
    struct stat st;
    int is_dir = stat(ca, &st) == 0 && S_ISDIR(st.st_mode);
    int r = is_dir ? gnutls_certificate_set_x509_trust_dir(*cred, ca, GNUTLS_X509_FMT_PEM)
                   : gnutls_certificate_set_x509_trust_file(*cred, ca, GNUTLS_X509_FMT_PEM);
    if (r <= 0) {
      if (err) snprintf(err, err_len, "%s: GnuTLS cannot load CA certificates from '%s'", what, ca);
      return NHB_EINVAL;
    }
  }
  if (pem != NULL && pem[0] != '\0') {
    gnutls_datum_t d = {(unsigned char*)(uintptr_t)pem, (unsigned)strlen(pem)};
    if (gnutls_certificate_set_x509_trust_mem(*cred, &d, GNUTLS_X509_FMT_PEM) <= 0) {
      if (err) snprintf(err, err_len, "proxy_tls cacert_pem: no PEM certificate in it");
      return NHB_EINVAL;
    }
  } else if (!have_ca && gnutls_certificate_set_x509_system_trust(*cred) < 0) {
    if (err) snprintf(err, err_len, "proxy: GnuTLS cannot load the system's CA certificates");
    return NHB_EINVAL;
  }
  return 0;
}

int nhb__udp_tunnel_run_init(nhb_run* run, char* err, size_t err_len) {
  const nhb_client_config* cfg = &run->config;
  if (cfg->udp_tunnel_authority == NULL) return 0;
  if (cfg->protocol != NHB_PROTO_HTTP3) {
    if (err) snprintf(err, err_len, "udp_tunnel: CONNECT-UDP carries HTTP/3 only");
    return NHB_EINVAL;
  }
  uint32_t ntargets = run->ntargets > 0 ? run->ntargets : 1;
  if (cfg->nudp_tunnel_paths != 1 && cfg->nudp_tunnel_paths != ntargets) {
    if (err) snprintf(err, err_len, "udp_tunnel: one path per target (%u), or one for all", (unsigned)ntargets);
    return NHB_EINVAL;
  }
  nhb__udp_tunnel_run* tr = tun_run_new(&run->udp_tunnel, cfg->udp_tunnel_sni, cfg->udp_tunnel_verify_name,
                                        cfg->udp_tunnel_insecure, cfg->nudp_tunnel_paths);
  if (tr == NULL) return NHB_ENOMEM;
  const char* auth = cfg->udp_tunnel_authorization;
  for (uint32_t i = 0; i < tr->n; i++) {
    const char* path = cfg->udp_tunnel_paths[i];
    size_t need = 64 + 2 * (strlen(cfg->udp_tunnel_authority) + strlen(path) + (auth ? strlen(auth) : 0)) + 128;
    if (path[0] != '/' || need > 65536) {
      if (err) snprintf(err, err_len, "udp_tunnel: a path starts with '/' and is at most a few kB");
      return NHB_EINVAL;
    }
    uint8_t* block = malloc(need);
    uint8_t* frame = malloc(need + 16);
    if (block == NULL || frame == NULL) {
      free(block);
      free(frame);
      return NHB_ENOMEM;
    }
    /* Required Insert Count 0, Base 0: nothing from a dynamic table. */
    size_t n = 0;
    block[n++] = 0;
    block[n++] = 0;
    n += put_field(block + n, ":method", "CONNECT");
    n += put_field(block + n, ":protocol", "connect-udp");
    n += put_field(block + n, ":scheme", "https");
    n += put_field(block + n, ":authority", cfg->udp_tunnel_authority);
    n += put_field(block + n, ":path", path);
    n += put_field(block + n, "capsule-protocol", "?1");
    if (auth != NULL && auth[0] != '\0') n += put_field(block + n, "proxy-authorization", auth);
    size_t f = 0;
    f += put_vint(frame + f, H3F_HEADERS);
    f += put_vint(frame + f, n);
    memcpy(frame + f, block, n);
    free(block);
    tr->frame[i] = frame;
    tr->frame_len[i] = f + n;
  }
  if (cfg->proxy_protocol == 2) return nhb__udp_h2_run_init(run, &tr->h2, err, err_len);
  return tun_trust(&tr->cred, cfg->udp_tunnel_insecure, cfg->udp_tunnel_cacert, NULL, "proxy_cacert", err,
                   err_len);
}

void nhb__udp_tunnel_run_free(nhb_run* run) { tun_run_free(&run->udp_tunnel); }

/* ---- CONNECT on a request stream (the HTTP/3 proxy leg of a TCP tunnel) ----------
 *
 * With proxy_protocol 3 and tunnel_requests, a TCP tunnel's proxy leg is this
 * connection (carrier.c owns the UDP socket and the carrier): the same QUIC,
 * control stream and answer reading as CONNECT-UDP's above, but the request
 * is a classic CONNECT (RFC 9114 section 4.4: :method CONNECT and :authority
 * host:port only, then the CONNECT request head's fields but Host), the
 * proxy's SETTINGS need offer nothing, and once the answer is 2xx the
 * stream's DATA frames carry the origin's bytes both ways: theirs go to the
 * inner transport (TCP or TLS to the origin) from inside ngtcp2's callback,
 * ours are framed into sbuf (a ring the entry allocates once) and sent from
 * there; they stay until the proxy acknowledged them (ngtcp2 may send them
 * again). While ngtcp2 runs (in_lib) nothing calls it: the inner
 * transport's writes only fill the ring, which is sent once it returned.
 */

static int tun_acked(ngtcp2_conn* qc, int64_t sid, uint64_t offset, uint64_t datalen, void* user_data,
                     void* stream_user_data) {
  NHB__UNUSED(qc);
  NHB__UNUSED(offset);
  NHB__UNUSED(stream_user_data);
  nhb__udp_tunnel* t = user_data;
  if (sid != t->req_sid) return 0;
  /* ngtcp2 reports the acknowledged bytes in order, each once. */
  t->s_acked += (size_t)datalen;
  t->s_freed = 1;
  return 0;
}

/* A 2xx answer: the tunnel is up, counted and timed, and the inner
 * transport starts above it. 0, or -1 when the connection ended. */
static int tun_stream_answer(nhb__conn* c, nhb__udp_tunnel* t) {
  if (t->up || t->status < 200 || t->status > 299) return 0;
  t->up = 1;
  if (t->parser) return 0;
  nhb__worker* w = c->worker;
  w->stats.counters[NHB_CTR_TUNNEL_ESTABLISHED]++;
  nhb_hist* h = w->stats.hists[NHB_HIST_TUNNEL_SETUP];
  if (h != NULL) nhb_hist_record(h, nhb__now_ns() - c->tunnel_start_ns);
  c->tunnel = 0;
  nhb__tunnel_inner(c)->on_connected(c);
  return c->state == NHB__CX_CONNECTING || c->state == NHB__CX_READY ? 0 : -1;
}

/* The origin's bytes (a DATA frame's payload, in pieces). */
static int tun_stream_data(nhb__conn* c, nhb__udp_tunnel* t, const uint8_t* p, size_t n) {
  if (!t->up && tun_stream_answer(c, t) < 0) return 0;
  t->delivered += n;
  if (t->parser || t->inner_err < 0 || n == 0) return 0;
  if (c->state != NHB__CX_CONNECTING && c->state != NHB__CX_READY) return 0;
  int r = nhb__tunnel_inner(c)->on_read(c, (const char*)p, n);
  /* Handed up once ngtcp2 returned (nhb__udp_tunnel_read). */
  if (r < 0) t->inner_err = r;
  return 0;
}

static void ring_put(nhb__udp_tunnel* t, const uint8_t* p, size_t n) {
  size_t at = t->s_end % TUN_SBUF;
  size_t first = n < TUN_SBUF - at ? n : TUN_SBUF - at;
  memcpy(t->sbuf + at, p, first);
  memcpy(t->sbuf, p + first, n - first);
  t->s_end += n;
}

size_t nhb__udp_tunnel_stream_put(nhb__conn* c, nhb__udp_tunnel* t, const char* data, size_t len) {
  size_t room = TUN_SBUF - (t->s_end - t->s_acked);
  /* A DATA frame: type 0, a length of at most 4 bytes, the bytes. */
  if (len == 0 || room <= 5 || t->qc == NULL) return 0;
  size_t n = len < room - 5 ? len : room - 5;
  uint8_t head[5];
  size_t hn = put_vint(head, H3F_DATA);
  hn += put_vint(head + hn, n);
  ring_put(t, head, hn);
  ring_put(t, (const uint8_t*)data, n);
  if (!t->in_lib) {
    t->in_lib = 1;
    int r = tun_write(c, t);
    t->in_lib = 0;
    /* An error is the timer's to report, outside the caller's write. */
    if (r != 0) tun_want_write(t);
  }
  return n;
}

int nhb__udp_tunnel_stream_start(nhb__conn* c, nhb__udp_tunnel* t, const struct sockaddr* local, size_t local_len,
                                 const nhb_sockaddr* to) {
  if (t->sbuf == NULL && (t->sbuf = malloc(TUN_SBUF)) == NULL) return NHB_ENOMEM;
  t->stream = 1;
  t->req_reset = 0;
  t->inner_err = 0;
  t->s_freed = 0;
  t->s_acked = t->s_sent = t->s_end = 0;
  t->delivered = 0;
  if (t->close_fd >= 0) close(t->close_fd);
  t->close_fd = -1;
  int r = nhb__udp_tunnel_start(c, t, local, local_len, to);
  if (r < 0) return r;
  /* The CONNECT's HEADERS frame goes out first from the ring. */
  ring_put(t, t->req, t->req_len);
  t->req_len = 0;
  return 0;
}

/* The run is over: a CONNECTION_CLOSE when the connection is live, then the
 * timer closes. The run can end inside ngtcp2's stream callback (the last
 * response came in the origin's bytes there): then neither a write nor the
 * QUIC state's end, which ngtcp2 is not made for; the state goes with the
 * connection's handle (carrier.c's close), after ngtcp2 returned. */
void nhb__udp_tunnel_stream_close(nhb__conn* c, nhb__udp_tunnel* t, int live) {
  if (t == NULL) return;
  if (live && !t->in_lib) {
    nhb__udp_tunnel_close(c, t);
    return;
  }
  if (live) nhb__udp_tunnel_stream_closing(c, t); /* after ngtcp2 returned */
  if (t->timer_init) {
    t->timer_init = 0;
    uv_timer_stop(&t->timer);
    uv_close((uv_handle_t*)&t->timer, NULL);
  }
}

void nhb__udp_tunnel_stream_closing(nhb__conn* c, nhb__udp_tunnel* t) {
  if (t == NULL) return;
  if (!t->in_lib) {
    tun_send_close(c, t, -1);
    return;
  }
  /* Inside ngtcp2 (not re-entrant), and the handle closes at once: a copy of
   * the socket takes the CONNECTION_CLOSE once ngtcp2 returned. */
  if (t->close_fd < 0) t->close_fd = dup(c->sock_fd);
}

/* After ngtcp2 returned: the CONNECTION_CLOSE a close inside it left. */
static void tun_closed_inside(nhb__conn* c, nhb__udp_tunnel* t) {
  tun_send_close(c, t, t->close_fd);
  close(t->close_fd);
  t->close_fd = -1;
}

void nhb__udp_tunnel_stream_free(nhb__udp_tunnel* t) {
  if (t == NULL) return;
  if (t->close_fd >= 0) close(t->close_fd);
  free(t->sbuf);
  nhb__udp_tunnel_free(t);
}

uint64_t nhb__udp_tunnel_parser_stream(nhb__udp_tunnel* t, int on) {
  if (on) {
    t->stream = 1;
    t->parser = 1;
  }
  return t->delivered;
}

/* Each target's HEADERS frame, from its CONNECT request head (tunnel.c's):
 * :method CONNECT, :authority, then the head's fields but Host, names
 * lower-cased (RFC 9114 sections 4.2 and 4.4); and the TLS to the proxy
 * (config.proxy_tls, on GnuTLS as QUIC's). */
int nhb__udp_tunnel_stream_run_init(nhb_run* run, char* err, size_t err_len) {
  const nhb_client_config* cfg = &run->config;
  const nhb__run_tunnel* rt = &run->tunnel;
  const nhb_tls_config* pc = &cfg->proxy_tls;
  nhb__udp_tunnel_run* tr = tun_run_new(&run->tunnel.h3_run, pc->sni, pc->verify_name, pc->insecure, rt->n);
  if (tr == NULL) return NHB_ENOMEM;
  for (uint32_t i = 0; i < tr->n; i++) {
    size_t need = 64 + 2 * rt->request_len[i];
    uint8_t* block = malloc(need);
    uint8_t* frame = malloc(need + 16);
    char* field = malloc(rt->request_len[i] + 2);
    if (block == NULL || frame == NULL || field == NULL) {
      free(block);
      free(frame);
      free(field);
      return NHB_ENOMEM;
    }
    size_t n = 0;
    block[n++] = 0; /* Required Insert Count 0, Base 0: no dynamic table */
    block[n++] = 0;
    n += put_field(block + n, ":method", "CONNECT");
    n += put_field(block + n, ":authority", rt->authority[i]);
    const char* p = memchr(rt->request[i], '\n', rt->request_len[i]);
    const char* end = rt->request[i] + rt->request_len[i];
    while (p != NULL && ++p < end) {
      const char* eol = memchr(p, '\r', (size_t)(end - p));
      if (eol == NULL || eol == p) break;
      const char* colon = memchr(p, ':', (size_t)(eol - p));
      if (colon == NULL) {
        free(block);
        free(frame);
        free(field);
        if (err != NULL && err_len > 0) snprintf(err, err_len, "tunnel_requests: a header line without ':'");
        return NHB_EINVAL;
      }
      size_t nlen = (size_t)(colon - p);
      const char* v = colon + 1;
      while (v < eol && (*v == ' ' || *v == '\t')) v++;
      if (!(nlen == 4 && strncasecmp(p, "host", 4) == 0)) {
        /* put_field takes C strings: the name, NUL, the value, NUL. */
        for (size_t m = 0; m < nlen; m++) field[m] = (char)(p[m] >= 'A' && p[m] <= 'Z' ? p[m] + 32 : p[m]);
        field[nlen] = '\0';
        size_t vlen = (size_t)(eol - v);
        memcpy(field + nlen + 1, v, vlen);
        field[nlen + 1 + vlen] = '\0';
        n += put_field(block + n, field, field + nlen + 1);
      }
      p = memchr(eol, '\n', (size_t)(end - eol));
    }
    free(field);
    size_t f = 0;
    f += put_vint(frame + f, H3F_HEADERS);
    f += put_vint(frame + f, n);
    memcpy(frame + f, block, n);
    free(block);
    tr->frame[i] = frame;
    tr->frame_len[i] = f + n;
  }
  return tun_trust(&tr->cred, pc->insecure, pc->cacert, pc->cert_pem, "proxy_tls cacert", err, err_len);
}

void nhb__udp_tunnel_stream_run_free(nhb_run* run) { tun_run_free(&run->tunnel.h3_run); }
