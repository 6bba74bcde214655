/* tunnel.c: connections through an HTTP proxy's CONNECT tunnel.
 *
 * With config.tunnel_requests set, every connection goes to the proxy (the
 * run's targets are the proxy's address) and starts on this transport: once
 * TCP is up it writes the CONNECT request the caller rendered for its target
 * (the origin's authority, any Proxy-Authorization), reads the proxy's answer
 * with llhttp and, on a 2xx, hands the connection to the transport the
 * protocol would have used without a proxy (TLS or TCP), which then runs
 * inside the tunnel as if the socket went to the origin. Bytes the proxy sent
 * after its answer (the origin's first bytes) go to that transport at once.
 *
 * The tunnel is per connection: nothing here runs per request. Once the
 * tunnel is up, c->transport is the inner transport itself, so requests on a
 * tunnelled connection take exactly the path they take without a proxy; the
 * pool sets this transport again when the entry opens its next connection.
 *
 * The proxy's answer is bounded like an origin's head (client.h, NHB__RESP_*):
 * at most NHB__RESP_HEADER_BYTES raw bytes for every head it sends before its
 * final answer, interim (1xx) answers included, and at most NHB__RESP_INTERIM
 * of those; beyond, the tunnel fails as malformed. A proxy that never answers
 * is the connect time-out's (--timeout covers the tunnel as it covers a TLS
 * handshake). Each failure is counted once by its cause (the tunnel.*
 * counters) besides the connection failure that fails its requests.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"

/* ---- the proxy's answer --------------------------------------------------- */

static int rx_on_headers_complete(llhttp_t* p) {
  nhb__tunnel_rx* rx = (nhb__tunnel_rx*)p->data;
  int status = (int)llhttp_get_status_code(p);
  /* llhttp takes any three digits; HTTP's status codes start at 100. */
  if (status < 100) {
    rx->why = "a status code below 100";
    return -1;
  }
  if (status >= 100 && status < 200 && status != 101) {
    /* An interim answer: llhttp reads it as a message without a body and
     * goes on with the next head. */
    if (++rx->interims > NHB__RESP_INTERIM) {
      rx->why = "more than 100 interim (1xx) answers";
      return -1;
    }
    return 0;
  }
  rx->status = status;
  /* The final answer's head is all the tunnel reads: 2 tells llhttp that no
   * body follows and to pause as after an upgrade, so that the bytes after
   * the head stay unread (they are the tunnel's). */
  return 2;
}

static const llhttp_settings_t* rx_settings(void) {
  static llhttp_settings_t settings;
  static int ready;
  if (!ready) {
    llhttp_settings_init(&settings);
    settings.on_headers_complete = rx_on_headers_complete;
    ready = 1;
  }
  return &settings;
}

void nhb__tunnel_rx_init(llhttp_t* p, nhb__tunnel_rx* rx) {
  memset(rx, 0, sizeof(*rx));
  llhttp_init(p, HTTP_RESPONSE, rx_settings());
  p->data = rx;
}

int nhb__tunnel_rx_feed(llhttp_t* p, nhb__tunnel_rx* rx, const char* data, size_t len, size_t* used) {
  *used = len;
  enum llhttp_errno e = llhttp_execute(p, data, len);
  if (e == HPE_PAUSED_UPGRADE) {
    const char* at = llhttp_get_error_pos(p);
    size_t n = at != NULL && at >= data && at <= data + len ? (size_t)(at - data) : len;
    *used = n;
    rx->bytes += (uint32_t)n;
    if (rx->bytes > NHB__RESP_HEADER_BYTES) {
      rx->why = "an answer over 98304 bytes";
      return -1;
    }
    return 1;
  }
  if (e != HPE_OK) {
    if (rx->why == NULL) rx->why = llhttp_get_error_reason(p);
    if (rx->why == NULL) rx->why = llhttp_errno_name(e);
    return -1;
  }
  /* Each piece is at most one read, so the sum cannot wrap before the check. */
  rx->bytes += (uint32_t)len;
  if (rx->bytes > NHB__RESP_HEADER_BYTES) {
    rx->why = "an answer over 98304 bytes without its end";
    return -1;
  }
  return 0;
}

/* ---- the transport ----------------------------------------------------------- */

const nhb__transport_vtable* nhb__tunnel_inner(const nhb__conn* c) {
  const nhb__protocol* proto = c->worker->protocol;
  if (proto->transport != NULL) return proto->transport;
  return c->worker->run->config.tls.enabled ? &nhb__transport_tls : &nhb__transport_tcp;
}

void nhb__tunnel_count(nhb__conn* c, nhb_counter_t cause, const char* fmt, const char* a, int status) {
  nhb__worker* w = c->worker;
  c->tunnel = NHB__TUNNEL_FAILED;
  w->stats.counters[cause]++;
  char text[256];
  const nhb__run_tunnel* t = &w->run->tunnel;
  const char* authority =
      t->n != 0 ? t->authority[c->target < t->n ? c->target : 0] : nhb__udp_tunnel_authority(w->run);
  if (status != 0) {
    snprintf(text, sizeof(text), fmt, status, authority);
  } else {
    snprintf(text, sizeof(text), fmt, authority, a != NULL ? a : "");
  }
  nhb__worker_record_error_text(w, NHB_EPROXY, text);
}

static void tunnel_on_connected(nhb__conn* c) {
  uv_os_fd_t fd;
  int r = uv_fileno((const uv_handle_t*)&c->tcp, &fd);
  if (r < 0) {
    nhb__conn_fail(c, r, NHB_CTR_POOL_CONNECTION_FAILURE);
    return;
  }
  c->sock_fd = fd;
  c->tunnel = NHB__TUNNEL_WAITING;
  c->tunnel_start_ns = nhb__now_ns();
  nhb__tunnel_rx_init(&c->parser, &c->tunnel_rx);
  const nhb__run_tunnel* t = &c->worker->run->tunnel;
  uint32_t k = c->target < t->n ? c->target : 0;
  /* The request lives in the run until it ends, as a write's bytes must. */
  r = nhb__transport_tcp.write(c, t->request[k], t->request_len[k]);
  if (r < 0) nhb__conn_fail(c, r, NHB_CTR_POOL_CONNECTION_FAILURE);
}

void nhb__tunnel_up(nhb__conn* c) {
  nhb__worker* w = c->worker;
  w->stats.counters[NHB_CTR_TUNNEL_ESTABLISHED]++;
  nhb_hist* h = w->stats.hists[NHB_HIST_TUNNEL_SETUP];
  if (h != NULL) nhb_hist_record(h, nhb__now_ns() - c->tunnel_start_ns);
  c->tunnel = 0; /* up: the inner transport runs */
  /* A carried connection keeps its transport, which runs the inner one
   * above the proxy leg (carrier.c). */
  if (c->transport != &nhb__transport_carried) c->transport = nhb__tunnel_inner(c);
  nhb__tunnel_inner(c)->on_connected(c);
}

int nhb__tunnel_answer(nhb__conn* c, const char* data, size_t len) {
  if (c->tunnel != NHB__TUNNEL_WAITING) return NHB_EPROTO;
  size_t used = 0;
  int r = nhb__tunnel_rx_feed(&c->parser, &c->tunnel_rx, data, len, &used);
  if (r == 0) return 0;
  if (r < 0) {
    nhb__tunnel_count(c, NHB_CTR_TUNNEL_PROTOCOL_ERROR, "the proxy's answer to CONNECT %s is malformed: %s",
                      c->tunnel_rx.why, 0);
    return NHB_EPROXY;
  }
  int status = c->tunnel_rx.status;
  if (status < 200 || status > 299) {
    nhb__tunnel_count(c, NHB_CTR_TUNNEL_NON_2XX, "the proxy answered %d to CONNECT %s", NULL, status);
    /* A refusal is no protocol error: the connection fails here, uncounted
     * in upstream_cx_protocol_error. */
    nhb__conn_fail(c, NHB_EPROXY, NHB_CTR_POOL_CONNECTION_FAILURE);
    return 0;
  }
  nhb__tunnel_up(c);
  /* The origin's first bytes, if the proxy passed some on with its answer. */
  if (used < len && (c->state == NHB__CX_CONNECTING || c->state == NHB__CX_READY))
    return nhb__tunnel_inner(c)->on_read(c, data + used, len - used);
  return 0;
}

static int tunnel_write(nhb__conn* c, const char* data, size_t len) {
  /* Nothing but the CONNECT request is written before the tunnel is up. */
  NHB__UNUSED(data);
  NHB__UNUSED(len);
  NHB__UNUSED(c);
  return NHB_ESTATE;
}

const nhb__transport_vtable nhb__transport_tunnel = {
    "tunnel", tunnel_on_connected, nhb__tunnel_answer, tunnel_write, NULL, NULL, NULL,
};

/* ---- the pool's hooks (connection failures only) -------------------------------- */

void nhb__tunnel_conn_failed(nhb__conn* c, int err) {
  if (c->tunnel == NHB__TUNNEL_TLS) {
    nhb__tunnel_count(c, err == UV_ETIMEDOUT ? NHB_CTR_TUNNEL_TIMEOUT : NHB_CTR_TUNNEL_TLS_FAIL,
                      err == UV_ETIMEDOUT ? "the proxy's TLS handshake for CONNECT %s did not finish within --timeout%s"
                                          : "TLS handshake with the proxy for CONNECT %s failed: %s",
                      err == UV_ETIMEDOUT ? "" : nhb_strerror(err), 0);
  } else if (c->tunnel == NHB__TUNNEL_TCP) {
    nhb__tunnel_count(c, err == UV_ETIMEDOUT ? NHB_CTR_TUNNEL_TIMEOUT : NHB_CTR_TUNNEL_CONNECT_FAIL,
                 "could not connect to the proxy for CONNECT %s: %s", nhb_strerror(err), 0);
  } else if (c->tunnel == NHB__TUNNEL_WAITING) {
    nhb__tunnel_count(c, err == UV_ETIMEDOUT ? NHB_CTR_TUNNEL_TIMEOUT : NHB_CTR_TUNNEL_CLOSED,
                 err == UV_ETIMEDOUT ? "the proxy did not answer CONNECT %s within --timeout%s"
                                     : "the proxy's connection failed before its answer to CONNECT %s: %s",
                 err == UV_ETIMEDOUT ? "" : nhb_strerror(err), 0);
  }
}

void nhb__tunnel_conn_lost(nhb__conn* c, int err) {
  /* Before the proxy connection is up only a UDP socket reads (CONNECT-UDP,
   * tunnel_udp.c): an ICMP error from the proxy's port. */
  if (c->tunnel == NHB__TUNNEL_TCP) {
    nhb__tunnel_count(c, NHB_CTR_TUNNEL_CONNECT_FAIL, "could not connect to the proxy for CONNECT %s: %s",
                      nhb_strerror(err), 0);
    return;
  }
  if (c->tunnel == NHB__TUNNEL_TLS) {
    nhb__tunnel_count(c, NHB_CTR_TUNNEL_TLS_FAIL,
                      err == UV_EOF ? "TLS handshake with the proxy for CONNECT %s failed: the proxy closed the connection%s"
                                    : "TLS handshake with the proxy for CONNECT %s failed: %s",
                      err == UV_EOF ? "" : nhb_strerror(err), 0);
    return;
  }
  nhb__tunnel_count(c, NHB_CTR_TUNNEL_CLOSED,
               err == UV_EOF ? "the proxy closed the connection before its answer to CONNECT %s%s"
                             : "the proxy's connection failed before its answer to CONNECT %s: %s",
               err == UV_EOF ? "" : nhb_strerror(err), 0);
}

/* ---- the run ------------------------------------------------------------------------ */

int nhb__tunnel_run_init(nhb_run* run, char* err, size_t err_len) {
  const nhb_client_config* cfg = &run->config;
  nhb__run_tunnel* t = &run->tunnel;
  uint32_t ntargets = run->ntargets > 0 ? run->ntargets : 1;
  if (cfg->ntunnel_requests == 0) {
    /* CONNECT-UDP keeps the histogram (tunnel_udp.c records into it). */
    if (cfg->udp_tunnel_authority != NULL) return 0;
    if (cfg->proxy_tls.enabled || cfg->proxy_protocol >= 2) {
      if (err != NULL && err_len > 0) snprintf(err, err_len, "proxy_tls, proxy_protocol: need tunnel_requests");
      return NHB_EINVAL;
    }
    /* No tunnel: no histogram, so the statistic is absent from the result
     * and the merge skips it. */
    free(run->global.hists[NHB_HIST_TUNNEL_SETUP]);
    run->global.hists[NHB_HIST_TUNNEL_SETUP] = NULL;
    for (int i = 0; i < run->nworkers; i++) {
      nhb_stats* st = &run->workers[i].stats;
      free(st->hists[NHB_HIST_TUNNEL_SETUP]);
      st->hists[NHB_HIST_TUNNEL_SETUP] = NULL;
    }
    return 0;
  }
  if (cfg->ntunnel_requests != 1 && cfg->ntunnel_requests != ntargets) {
    if (err != NULL && err_len > 0)
      snprintf(err, err_len, "tunnel_requests: one per target (%u), or one for all", (unsigned)ntargets);
    return NHB_EINVAL;
  }
  if (cfg->protocol == NHB_PROTO_HTTP3 || cfg->protocol == NHB_PROTO_UDP) {
    if (err != NULL && err_len > 0) snprintf(err, err_len, "tunnel_requests: a CONNECT tunnel carries TCP only");
    return NHB_EINVAL;
  }
  size_t total = 0;
  for (uint32_t i = 0; i < cfg->ntunnel_requests; i++) {
    const char* rq = cfg->tunnel_requests[i];
    size_t n = cfg->tunnel_request_lens[i];
    /* "CONNECT " authority " HTTP/1.1\r\n" ... "\r\n\r\n". */
    if (rq == NULL || n < 14 || n > 65536 || memcmp(rq, "CONNECT ", 8) != 0 || memcmp(rq + n - 4, "\r\n\r\n", 4) != 0) {
      if (err != NULL && err_len > 0) snprintf(err, err_len, "tunnel_requests: not a CONNECT request head");
      return NHB_EINVAL;
    }
    /* The request, then its authority (for error texts), each NUL-terminated. */
    total += 2 * (n + 1);
  }
  t->n = cfg->ntunnel_requests;
  t->request = calloc(t->n, sizeof(*t->request));
  t->authority = calloc(t->n, sizeof(*t->authority));
  t->request_len = calloc(t->n, sizeof(*t->request_len));
  t->strings = malloc(total);
  if (t->request == NULL || t->authority == NULL || t->request_len == NULL || t->strings == NULL) return NHB_ENOMEM;
  char* p = t->strings;
  for (uint32_t i = 0; i < t->n; i++) {
    size_t n = cfg->tunnel_request_lens[i];
    memcpy(p, cfg->tunnel_requests[i], n);
    p[n] = '\0';
    t->request[i] = p;
    t->request_len[i] = n;
    p += n + 1;
    const char* start = t->request[i] + 8;
    const char* end = memchr(start, ' ', n - 8);
    size_t an = end != NULL ? (size_t)(end - start) : 0;
    memcpy(p, start, an);
    p[an] = '\0';
    t->authority[i] = p;
    p += an + 1;
  }
  return nhb__carrier_run_init(run, err, err_len);
}

void nhb__tunnel_run_free(nhb_run* run) {
  nhb__carrier_run_free(run);
  free(run->tunnel.strings);
  free((void*)run->tunnel.request);
  free((void*)run->tunnel.authority);
  free(run->tunnel.request_len);
  memset(&run->tunnel, 0, sizeof(run->tunnel));
}
