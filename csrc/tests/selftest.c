/* selftest.c: the C core on its own, without Python, under ASan + UBSan with
 * leak detection (nox -s selftest). The pytest suite exercises behaviour; this
 * checks that a whole server + client life cycle frees everything it takes,
 * which the Python-hosted sanitizer run cannot (leak checking is off there). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nhb.h"

static int failures = 0;

#define CHECK(cond)                                                  \
  do {                                                               \
    if (!(cond)) {                                                   \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      failures++;                                                    \
    }                                                                \
  } while (0)

static const char request[] = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

static void loopback(unsigned char* addr, unsigned* len, int port) {
  struct sockaddr_in in;
  memset(&in, 0, sizeof(in));
  in.sin_family = AF_INET;
  in.sin_port = htons((uint16_t)port);
  inet_pton(AF_INET, "127.0.0.1", &in.sin_addr);
  memcpy(addr, &in, sizeof(in));
  *len = sizeof(in);
}

static nhb_client_config client_config(int port, double rps, double duration_s) {
  nhb_client_config c;
  memset(&c, 0, sizeof(c));
  loopback(c.addr, &c.addr_len, port);
  c.request = request;
  c.request_len = sizeof(request) - 1;
  c.nworkers = 2;
  c.rps = rps;
  c.burst_size = 1;
  c.connections = 4;
  c.idle_strategy = NHB_IDLE_POLL;
  c.duration_ns = (int64_t)(duration_s * 1e9);
  c.connect_timeout_ns = 1000000000ULL;
  c.request_timeout_ns = 1000000000ULL;
  c.drain_timeout_ns = 1000000000ULL;
  c.n_failure = 1;
  c.failure[0].counter = nhb_counter_lookup("benchmark.pool_connection_failure");
  return c;
}

static const nhb_stats* run(nhb_client_config* c, nhb_run** out) {
  CHECK(nhb_run_create(c, out) == 0);
  CHECK(nhb_run_start(*out) == 0);
  CHECK(nhb_run_wait(*out, 30.0) == 1);
  return nhb_run_global_stats(*out);
}

int main(void) {
  /* The server, with a body and an extra header. */
  nhb_server_config sc;
  memset(&sc, 0, sizeof(sc));
  sc.nlisten = 1;
  loopback(sc.listen_addr[0], &sc.listen_addr_len[0], 0);
  sc.nworkers = 2;
  sc.response_body_size = 100;
  sc.extra_headers = "x-selftest: 1\r\n";
  sc.extra_headers_len = strlen(sc.extra_headers);
  nhb_server* server;
  CHECK(nhb_server_create(&sc, &server) == 0);
  CHECK(nhb_server_start(server) == 0);
  struct sockaddr_in bound;
  unsigned bound_len = sizeof(bound);
  CHECK(nhb_server_address(server, 0, &bound, &bound_len) == 0);
  int port = ntohs(bound.sin_port);

  /* A fixed rate: 2 workers x 200 rps x 0.5 s. */
  nhb_client_config c = client_config(port, 200, 0.5);
  nhb_run* r;
  const nhb_stats* g = run(&c, &r);
  CHECK(g && g->counters[NHB_CTR_HTTP_2XX] == 200);
  CHECK(g && g->hists[NHB_HIST_RELEASE_LATENESS]->total == 200);
  CHECK(g && g->streams[NHB_STREAM_RESPONSE_BODY_SIZE].max == 100);
  CHECK(nhb_run_end_reason(r) == NHB_END_DURATION);
  nhb_run_destroy(r);

  /* Max rate, then a stop from outside before the duration ends. */
  c = client_config(port, 0, 30.0);
  CHECK(nhb_run_create(&c, &r) == 0);
  CHECK(nhb_run_start(r) == 0);
  CHECK(nhb_run_wait(r, 0.3) == 0);
  nhb_run_stop(r);
  CHECK(nhb_run_wait(r, 10.0) == 1);
  g = nhb_run_global_stats(r);
  CHECK(g && g->counters[NHB_CTR_HTTP_2XX] > 0);
  CHECK(nhb_run_end_reason(r) == NHB_END_STOP);
  nhb_run_destroy(r);

  nhb_server_stats ss;
  nhb_server_stats_get(server, &ss);
  CHECK(ss.requests >= 200);
  nhb_server_stop(server);
  nhb_server_destroy(server);

  /* Nothing listens now: the connection-failure predicate ends the run. */
  c = client_config(port, 100, 30.0);
  g = run(&c, &r);
  CHECK(g && g->counters[NHB_CTR_POOL_CONNECTION_FAILURE] >= 1);
  CHECK(nhb_run_end_reason(r) == NHB_END_FAILURE_PREDICATE);
  CHECK(strstr(nhb_run_first_error(r), "ECONNREFUSED") != NULL);
  nhb_run_destroy(r);

  /* A destroyed run that never started, and bad configs, leak nothing. */
  c = client_config(port, 100, 1.0);
  CHECK(nhb_run_create(&c, &r) == 0);
  nhb_run_destroy(r);
  c.connections = 0;
  CHECK(nhb_run_create(&c, &r) == NHB_EINVAL);

  if (failures) fprintf(stderr, "selftest: %d check(s) failed\n", failures);
  else printf("selftest: all checks passed\n");
  return failures ? 1 : 0;
}
