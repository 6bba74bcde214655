/* dns.c: DNS per connection (docs/engine.md "DNS per connection").
 *
 * A run whose config names dns_host resolves that name again for each new
 * connection, as a client of a DNS-balanced service (a Kubernetes headless
 * service, a round-robin record) does, instead of connecting to addresses
 * resolved once before the run. The resolution is libuv's uv_getaddrinfo on
 * the worker's loop: the resolver runs on libuv's thread pool and the loop
 * goes on meanwhile. Its memory (libuv's request copy of the name, the
 * resolver's answer list) is per connection, never per request; a run
 * without dns_host never comes here (one test per new connection in
 * pool.c's conn_start).
 *
 * The connection is CONNECTING while it resolves, with no handle yet
 * (dns_pending): it takes the requests a connecting one takes, and
 * --timeout bounds the resolution as it bounds the connect (each from its
 * start). Closing it meanwhile (a time-out, the end of the run) cancels the
 * resolution; the callback, which libuv calls even then, ends the entry.
 *
 * The `benchmark_http_client.dns` statistic times each resolution that gave
 * an address (request to answer), once per new connection, before `connect`
 * (which starts when the answer is in). Failures count by cause: dns.not_found
 * (no such name, or no address of the family), dns.try_again (the resolver
 * could not answer now: a server failure or no server reachable),
 * dns.fail (anything else), dns.timeout (no answer within --timeout); each is
 * also a connect failure of its connection (upstream_cx_connect_fail or
 * _timeout), whose requests fail as benchmark.pool_connection_failure.
 */
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"

int nhb__dns_run_init(nhb_run* run, char* err, size_t err_len) {
  const nhb_client_config* cfg = &run->config;
  const char* host = cfg->dns_host;
  if (host == NULL || host[0] == '\0') {
    /* Off: no histogram, so the statistic is absent from the result and
     * the merge skips it. */
    free(run->global.hists[NHB_HIST_DNS]);
    run->global.hists[NHB_HIST_DNS] = NULL;
    for (int i = 0; i < run->nworkers; i++) {
      nhb_stats* st = &run->workers[i].stats;
      free(st->hists[NHB_HIST_DNS]);
      st->hists[NHB_HIST_DNS] = NULL;
    }
    return 0;
  }
  const char* why = NULL;
  const struct sockaddr* target = (const struct sockaddr*)run->targets[0].bytes;
  if (run->ntargets != 1) why = "one target only";
  else if (target->sa_family != AF_INET && target->sa_family != AF_INET6) why = "not with a Unix socket target";
  else if (run->nendpoints > 1) why = "not with endpoints (the addresses come from each answer)";
  else if (cfg->ntunnel_requests != 0 || cfg->udp_tunnel_authority != NULL) why = "not through a proxy (the proxy resolves)";
  else if (strlen(host) > 253) why = "longer than 253 characters";
  else if (cfg->dns_family != AF_UNSPEC && cfg->dns_family != AF_INET && cfg->dns_family != AF_INET6) why = "dns_family: AF_UNSPEC, AF_INET or AF_INET6";
  else if (cfg->dns_pick < 0 || cfg->dns_pick > 2) why = "dns_pick: 0 (first), 1 (round robin) or 2 (random)";
  if (why != NULL) {
    if (err != NULL && err_len > 0) snprintf(err, err_len, "dns_host: %s", why);
    return NHB_EINVAL;
  }
  run->dns_host = strdup(host);
  if (run->dns_host == NULL) return NHB_ENOMEM;
  run->config.dns_host = run->dns_host;
  run->dns_port = target->sa_family == AF_INET ? ((const struct sockaddr_in*)target)->sin_port
                                               : ((const struct sockaddr_in6*)target)->sin6_port;
  for (int i = 0; i < run->nworkers; i++) {
    nhb__worker* w = &run->workers[i];
    if (w->ep_rng == 0) w->ep_rng = 0x9E3779B97F4A7C15ULL * (uint64_t)(i + 1) ^ nhb__now_ns();
  }
  return 0;
}

/* The counter of a failed resolution's cause. */
static nhb_counter_t dns_cause(int status) {
  switch (status) {
    case UV_EAI_NONAME:
    case UV_EAI_NODATA:
    case UV_EAI_ADDRFAMILY:
    case UV_EAI_FAMILY:
      return NHB_CTR_DNS_NOT_FOUND;
    case UV_EAI_AGAIN:
      return NHB_CTR_DNS_TRY_AGAIN;
    default:
      return NHB_CTR_DNS_FAIL;
  }
}

/* An answer's address the connection may go to: of the family `want`
 * (AF_UNSPEC: either) and of its family's size. */
static int usable(const struct addrinfo* ai, int want) {
  if (want != AF_UNSPEC && ai->ai_family != want) return 0;
  return (ai->ai_family == AF_INET && ai->ai_addrlen == sizeof(struct sockaddr_in)) ||
         (ai->ai_family == AF_INET6 && ai->ai_addrlen == sizeof(struct sockaddr_in6));
}

static void dns_on_resolved(uv_getaddrinfo_t* req, int status, struct addrinfo* res) {
  nhb__conn* c = (nhb__conn*)req->data;
  nhb__worker* w = c->worker;
  nhb_run* run = w->run;
  c->dns_pending = 0;
  if (c->state != NHB__CX_CONNECTING) {
    /* Closed while resolving (a time-out, the end of the run), counted then. */
    uv_freeaddrinfo(res);
    nhb__conn_closed(c);
    return;
  }
  /* address_family auto prefers IPv4, as the run's start does (options'
   * resolve): the IPv6 answers count only when there is no IPv4 one. */
  int want = run->config.dns_family;
  uint32_t n = 0;
  if (status == 0 && want == AF_UNSPEC) {
    for (const struct addrinfo* ai = res; ai != NULL; ai = ai->ai_next) n += (uint32_t)usable(ai, AF_INET);
    want = n > 0 ? AF_INET : AF_INET6;
  }
  n = 0;
  if (status == 0)
    for (const struct addrinfo* ai = res; ai != NULL; ai = ai->ai_next) n += (uint32_t)usable(ai, want);
  if (n == 0) {
    if (status == 0) status = UV_EAI_NODATA;
    uv_freeaddrinfo(res);
    w->stats.counters[dns_cause(status)]++;
    char text[sizeof(w->first_error_text)];
    snprintf(text, sizeof(text), "DNS: %s: %s", run->dns_host, uv_strerror(status));
    nhb__worker_record_error_text(w, status, text);
    nhb__conn_fail_unopened(w, c, status);
    /* Its requests failed: the sequencer may release others. */
    nhb__sequencer_run(w);
    nhb__worker_maybe_finish(w);
    return;
  }
  /* --dns-method over this answer, in the resolver's order. */
  uint32_t k = 0;
  if (run->config.dns_pick == 1)
    k = atomic_fetch_add_explicit(&run->ep_next, 1, memory_order_relaxed) % n;
  else if (run->config.dns_pick == 2)
    k = (uint32_t)((nhb__splitmix64(&w->ep_rng) >> 11) % n);
  const struct addrinfo* ai = res;
  for (;; ai = ai->ai_next) {
    if (!usable(ai, want)) continue;
    if (k == 0) break;
    k--;
  }
  nhb_sockaddr* to = &c->dns_addr;
  memset(to->bytes, 0, sizeof(to->bytes));
  memcpy(to->bytes, ai->ai_addr, ai->ai_addrlen);
  to->len = (unsigned)ai->ai_addrlen;
  if (ai->ai_family == AF_INET)
    ((struct sockaddr_in*)to->bytes)->sin_port = run->dns_port;
  else
    ((struct sockaddr_in6*)to->bytes)->sin6_port = run->dns_port;
  uv_freeaddrinfo(res);
  uint64_t now = nhb__now_ns();
  w->stats.counters[NHB_CTR_DNS_RESOLVED]++;
  nhb_hist_record(w->stats.hists[NHB_HIST_DNS], now - c->dns_start_ns);
  /* The connect phase (and --timeout's bound on it) starts now. */
  c->connect_start_ns = now;
  nhb__conn_open(w, c, to);
}

int nhb__dns_start(nhb__worker* w, nhb__conn* c) {
  struct addrinfo hints;
  memset(&hints, 0, sizeof(hints));
  hints.ai_family = w->run->config.dns_family;
  /* One entry per address (not one per socket type); the port is set on
   * the chosen one. */
  hints.ai_socktype = SOCK_STREAM;
  c->dns_req.data = c;
  c->dns_start_ns = c->connect_start_ns;
  int r = uv_getaddrinfo(&w->loop, &c->dns_req, dns_on_resolved, w->run->dns_host, NULL, &hints);
  if (r < 0) return r;
  c->dns_pending = 1;
  return 0;
}
