/* selftest.c: the C core on its own, without Python, under ASan + UBSan with
 * leak detection (nox -s selftest). The pytest suite exercises behaviour; this
 * checks that a whole server + client life cycle frees everything it takes,
 * which the Python-hosted sanitizer run cannot (leak checking is off there).
 * It also drives every test-server feature over real sockets and feeds the
 * server random, truncated and mutated byte streams (HTTP/1.1, HTTP/2 frames
 * after a valid preface, TLS records and handshakes): the server must answer
 * or close, never crash, and keep serving. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <zlib.h>

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

/* The start of every server test here: the defaults, listening on one ephemeral
 * loopback port (a test that needs more listeners adds them after this). */
static void server_config_loopback(nhb_server_config* sc) {
  nhb_server_config_init(sc);
  sc->nlisten = 1;
  loopback(sc->listen[0].bytes, &sc->listen[0].len, 0);
}

/* The request set of one that most tests send (the run copies it). */
static const nhb_request_spec request_spec = {.request = request, .request_len = sizeof(request) - 1};

static nhb_client_config client_config(int port, double rps, double duration_s) {
  nhb_client_config c;
  memset(&c, 0, sizeof(c));
  loopback(c.addr, &c.addr_len, port);
  c.specs = &request_spec;
  c.nspecs = 1;
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

/* ---- the test server over raw sockets ------------------------------------ */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int connect_tcp(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in in;
  unsigned len;
  loopback((unsigned char*)&in, &len, port);
  if (fd < 0 || connect(fd, (struct sockaddr*)&in, len) < 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  return fd;
}

static int connect_unix(const char* path) {
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un un;
  memset(&un, 0, sizeof(un));
  un.sun_family = AF_UNIX;
  snprintf(un.sun_path, sizeof(un.sun_path), "%s", path);
  if (fd < 0 || connect(fd, (struct sockaddr*)&un, sizeof(un)) < 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  return fd;
}

static void send_all(int fd, const void* data, size_t len) {
  const char* p = data;
  while (len > 0) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
    if (n <= 0) return; /* the server may close first; that is fine here */
    p += n;
    len -= (size_t)n;
  }
}

/* Reads until EOF, `cap` bytes or timeout_ms without data. Returns the count,
 * and sets *closed when the server closed. */
static size_t read_until_close(int fd, char* out, size_t cap, int timeout_ms, int* closed) {
  size_t got = 0;
  *closed = 0;
  while (got + 1 < cap) {
    struct pollfd pfd = {fd, POLLIN, 0};
    if (poll(&pfd, 1, timeout_ms) <= 0) break;
    ssize_t n = recv(fd, out + got, cap - 1 - got, 0);
    if (n <= 0) {
      *closed = 1;
      break;
    }
    got += (size_t)n;
  }
  out[got] = '\0';
  return got;
}

/* One exchange on a fresh connection (requests should say Connection:
 * close). Returns the response length. */
static size_t http_fd(int fd, const char* req, size_t req_len, char* out, size_t cap) {
  int closed;
  if (fd < 0) {
    out[0] = '\0';
    return 0;
  }
  send_all(fd, req, req_len);
  size_t n = read_until_close(fd, out, cap, 5000, &closed);
  close(fd);
  return n;
}

static size_t http(int port, const char* req, char* out, size_t cap) {
  return http_fd(connect_tcp(port), req, strlen(req), out, cap);
}

static const char* body_of(const char* resp) {
  const char* p = strstr(resp, "\r\n\r\n");
  return p ? p + 4 : "";
}

static int status_of(const char* resp) {
  int st = 0;
  return sscanf(resp, "HTTP/1.1 %d", &st) == 1 ? st : 0;
}

static int server_answers(int port) {
  char buf[4096];
  http(port, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", buf, sizeof(buf));
  return status_of(buf) == 200;
}

static uint64_t fuzz_rand(uint64_t* x) {
  *x ^= *x << 13;
  *x ^= *x >> 7;
  *x ^= *x << 17;
  return *x;
}

static const char* const fuzz_seeds[] = {
    "GET / HTTP/1.1\r\nHost: a\r\n\r\n",
    "POST /?size=10&delay=1ms HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello",
    "GET /debug?a=b HTTP/1.1\r\nHost: a\r\nX-Nighthawk-Test-Server-Config: "
    "{\"response_body_size\": 3, \"echo_request_headers\": true, \"static_delay\": \"0.001s\"}\r\n\r\n",
    "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    "GET /?status=503:50,200:10&gzip=true&header=a:b&close=50 HTTP/1.1\r\nAccept-Encoding: gzip\r\n\r\n",
    "GET /x HTTP/1.1\r\nx-nighthawk-test-server-config: {\"response_headers\": [{\"header\": {\"key\": \"k\", "
    "\"value\": \"v\"}, \"append\": true}], \"concurrency_based_linear_delay\": {\"minimal_delay\": \"1ms\"}}\r\n\r\n",
    "HEAD /?size=100&stall=1ms HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    "GET /?delay=1ms:50,2ms:50&size=1:10,100000:20 HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc",
    "CONNECT a:1 HTTP/1.1\r\nHost: a\r\n\r\n",
    "GET / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
};

/* Random bytes, truncated requests, mutated requests and pipelined
 * mixtures, sent in random pieces; the server must answer or close (within
 * a deadline) and keep serving others. */
static void fuzz_server(nhb_server* s, int port) {
  nhb_server_stats before, after;
  nhb_server_stats_get(s, &before);
  /* NHB_SELFTEST_FUZZ=iterations[:seed] runs a longer campaign. */
  uint64_t x = 0x9e3779b97f4a7c15ULL;
  int N = 600;
  const char* env = getenv("NHB_SELFTEST_FUZZ");
  if (env) {
    unsigned long long seed = 0;
    if (sscanf(env, "%d:%llu", &N, &seed) == 2 && seed) x = seed;
  }
  static char buf[16384], resp[1 << 20];
  int hung = 0;
  size_t nseeds = sizeof(fuzz_seeds) / sizeof(fuzz_seeds[0]);
  for (int i = 0; i < N; i++) {
    size_t len = 0;
    int mode = (int)(fuzz_rand(&x) % 4);
    if (mode == 0) {
      len = 1 + fuzz_rand(&x) % 2048;
      for (size_t k = 0; k < len; k++) buf[k] = (char)fuzz_rand(&x);
    } else {
      int parts = mode == 3 ? 1 + (int)(fuzz_rand(&x) % 5) : 1;
      for (int p = 0; p < parts; p++) {
        const char* seed = fuzz_seeds[fuzz_rand(&x) % nseeds];
        size_t sl = strlen(seed);
        if (len + sl >= sizeof(buf)) break;
        memcpy(buf + len, seed, sl);
        len += sl;
      }
      if (mode == 1) len = 1 + fuzz_rand(&x) % len; /* truncated */
      int flips = mode == 2 ? 1 + (int)(fuzz_rand(&x) % 8) : (mode == 3 ? (int)(fuzz_rand(&x) % 3) : 0);
      for (int f = 0; f < flips; f++) {
        uint64_t r = fuzz_rand(&x);
        static const char interesting[] = " \r\n:?&=,%0-9aZ\x7f";
        buf[r % len] = (r >> 40) % 3 == 0 ? (char)(r >> 32) : interesting[(r >> 32) % (sizeof(interesting) - 1)];
      }
    }
    int fd = connect_tcp(port);
    CHECK(fd >= 0);
    if (fd < 0) continue;
    size_t off = 0;
    while (off < len) {
      size_t piece = 1 + fuzz_rand(&x) % (len - off);
      send_all(fd, buf + off, piece);
      off += piece;
    }
    if (fuzz_rand(&x) % 3 == 0) {
      close(fd); /* the client goes away without reading */
      continue;
    }
    shutdown(fd, SHUT_WR);
    int closed;
    read_until_close(fd, resp, sizeof(resp), 3000, &closed);
    if (!closed) hung++;
    close(fd);
    if (i % 100 == 99) CHECK(server_answers(port));
  }
  CHECK(hung == 0);
  CHECK(server_answers(port));
  nhb_server_stats_get(s, &after);
  printf("selftest: fuzz: %d inputs, %llu requests answered, %llu rejected, %llu connections\n", N,
         (unsigned long long)(after.requests - before.requests),
         (unsigned long long)(after.bad_requests - before.bad_requests),
         (unsigned long long)(after.connections_total - before.connections_total));
}

/* ---- HTTP/2 frames and TLS, written by hand for the fuzzers ---------------- */

static const char h2_preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

static size_t h2_frame(char* out, int type, int flags, uint32_t stream, const void* payload, size_t len) {
  out[0] = (char)(len >> 16);
  out[1] = (char)(len >> 8);
  out[2] = (char)len;
  out[3] = (char)type;
  out[4] = (char)flags;
  out[5] = (char)(stream >> 24);
  out[6] = (char)(stream >> 16);
  out[7] = (char)(stream >> 8);
  out[8] = (char)stream;
  if (len) memcpy(out + 9, payload, len);
  return 9 + len;
}

/* HPACK literal fields without indexing, new names, no Huffman (names and
 * values under 127 bytes). */
static size_t hpack_field(char* out, const char* name, const char* value) {
  size_t n = strlen(name), v = strlen(value);
  out[0] = 0;
  out[1] = (char)n;
  memcpy(out + 2, name, n);
  out[2 + n] = (char)v;
  memcpy(out + 3 + n, value, v);
  return 3 + n + v;
}

static size_t h2_request(char* out, uint32_t stream, const char* path, const char* extra_name,
                         const char* extra_value, int end_stream) {
  char block[512];
  size_t n = hpack_field(block, ":method", end_stream ? "GET" : "POST");
  n += hpack_field(block + n, ":scheme", "http");
  n += hpack_field(block + n, ":authority", "a");
  n += hpack_field(block + n, ":path", path);
  if (extra_name) n += hpack_field(block + n, extra_name, extra_value);
  return h2_frame(out, 1, 4 | (end_stream ? 1 : 0), stream, block, n);
}

/* A plausible HTTP/2 conversation after the preface: requests (with
 * delays, bodies, Nighthawk options), DATA, resets, pings, window updates,
 * priorities, settings and a GOAWAY, in random order. */
static size_t h2_conversation(char* out, size_t cap, uint64_t* x) {
  static const char* const paths[] = {"/", "/?delay=1ms", "/?size=2000&gzip=true", "/?status=503:50",
                                      "/debug", "/?close=true", "/?stall=1ms", "/?header=a:b"};
  size_t n = 0;
  uint32_t stream = 1;
  int frames = 1 + (int)(fuzz_rand(x) % 12);
  for (int f = 0; f < frames && n + 700 < cap; f++) {
    unsigned char pl[64];
    memset(pl, 0, sizeof(pl));
    switch (fuzz_rand(x) % 9) {
      case 0:
      case 1:
        n += h2_request(out + n, stream, paths[fuzz_rand(x) % 8], NULL, NULL, 1);
        stream += 2;
        break;
      case 2:
        n += h2_request(out + n, stream, "/", "x-nighthawk-test-server-config",
                        "{\"response_body_size\": 70000, \"static_delay\": \"0.001s\"}", 1);
        stream += 2;
        break;
      case 3: /* a request with a body in DATA frames */
        n += h2_request(out + n, stream, "/echo", "content-length", "10", 0);
        n += h2_frame(out + n, 0, 0, stream, "hello", 5);
        n += h2_frame(out + n, 0, 1, stream, "world", 5);
        stream += 2;
        break;
      case 4:
        pl[3] = 8; /* RST_STREAM CANCEL on a recent stream */
        n += h2_frame(out + n, 3, 0, stream > 2 ? stream - 2 : 1, pl, 4);
        break;
      case 5:
        n += h2_frame(out + n, 6, 0, 0, "pingping", 8);
        break;
      case 6:
        pl[1] = 1; /* WINDOW_UPDATE of 65536 */
        n += h2_frame(out + n, 8, 0, fuzz_rand(x) % 2 ? 0 : 1, pl, 4);
        break;
      case 7:
        pl[1] = 3; /* SETTINGS MAX_CONCURRENT_STREAMS = 5, PRIORITY */
        pl[5] = 5;
        n += h2_frame(out + n, 4, 0, 0, pl, 6);
        n += h2_frame(out + n, 2, 0, stream, pl + 8, 5);
        break;
      default:
        n += h2_frame(out + n, 7, 0, 0, pl, 8); /* GOAWAY NO_ERROR */
        break;
    }
  }
  return n;
}

/* Sends `data` in random pieces, half-closes (unless the client just goes
 * away) and reads until the server closes; returns 1 if it did not close. */
static int fuzz_exchange(int port, const char* data, size_t len, uint64_t* x, char* resp, size_t cap) {
  int fd = connect_tcp(port);
  CHECK(fd >= 0);
  if (fd < 0) return 0;
  size_t off = 0;
  while (off < len) {
    size_t piece = 1 + fuzz_rand(x) % (len - off);
    send_all(fd, data + off, piece);
    off += piece;
  }
  if (fuzz_rand(x) % 3 == 0) {
    close(fd);
    return 0;
  }
  shutdown(fd, SHUT_WR);
  int closed;
  read_until_close(fd, resp, cap, 3000, &closed);
  close(fd);
  return !closed;
}

static void mutate(char* buf, size_t from, size_t len, int flips, uint64_t* x) {
  for (int f = 0; f < flips && len > from; f++) {
    uint64_t r = fuzz_rand(x);
    buf[from + r % (len - from)] = (char)(r >> 32);
  }
}

/* HTTP/2 after a valid preface: the frames above, truncated, mutated,
 * mixed with random bytes. nghttp2 must reject what is wrong with GOAWAY or
 * RST_STREAM; the server must close or answer and keep serving. */
static void fuzz_h2(nhb_server* s, int port) {
  nhb_server_stats before, after;
  nhb_server_stats_get(s, &before);
  uint64_t x = 0x243f6a8885a308d3ULL;
  static char buf[16384], resp[1 << 20];
  int hung = 0, N = 400;
  for (int i = 0; i < N; i++) {
    size_t len = sizeof(h2_preface) - 1;
    memcpy(buf, h2_preface, len);
    len += h2_frame(buf + len, 4, 0, 0, NULL, 0); /* SETTINGS */
    size_t body = len;
    int mode = (int)(fuzz_rand(&x) % 4);
    if (mode == 0) {
      size_t n = 1 + fuzz_rand(&x) % 1500;
      for (size_t k = 0; k < n; k++) buf[len++] = (char)fuzz_rand(&x);
    } else {
      len += h2_conversation(buf + len, sizeof(buf) - len, &x);
      if (mode == 1) len = body + fuzz_rand(&x) % (len - body + 1); /* truncated */
      if (mode == 2) mutate(buf, body, len, 1 + (int)(fuzz_rand(&x) % 6), &x);
    }
    hung += fuzz_exchange(port, buf, len, &x, resp, sizeof(resp));
    if (i % 100 == 99) CHECK(server_answers(port));
  }
  CHECK(hung == 0);
  CHECK(server_answers(port));
  nhb_server_stats_get(s, &after);
  CHECK(after.connections_http2 - before.connections_http2 >= (uint64_t)N / 2);
  CHECK(after.h2_protocol_errors > before.h2_protocol_errors);
  printf("selftest: h2 fuzz: %d inputs, %llu requests answered, %llu protocol errors, %llu streams reset\n", N,
         (unsigned long long)(after.requests - before.requests),
         (unsigned long long)(after.h2_protocol_errors - before.h2_protocol_errors),
         (unsigned long long)(after.h2_streams_reset - before.h2_streams_reset));
}

/* A ClientHello as OpenSSL writes it (the seed for TLS mutations). */
static size_t client_hello(SSL_CTX* ctx, char* out, size_t cap) {
  SSL* ssl = SSL_new(ctx);
  BIO* r = BIO_new(BIO_s_mem());
  BIO* w = BIO_new(BIO_s_mem());
  SSL_set_bio(ssl, r, w);
  SSL_set_connect_state(ssl);
  SSL_do_handshake(ssl);
  int n = BIO_read(w, out, (int)cap);
  SSL_free(ssl);
  ERR_clear_error();
  return n > 0 ? (size_t)n : 0;
}

/* A real TLS client (blocking): handshake, then `data` as application
 * bytes, then read until the server closes. Returns 0, or -1 when the
 * handshake failed. */
static int tls_exchange(SSL_CTX* ctx, int port, const char* data, size_t len, char* resp, size_t cap,
                        size_t* got) {
  int fd = connect_tcp(port);
  *got = 0;
  if (fd < 0) return -1;
  struct timeval tv = {3, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  SSL* ssl = SSL_new(ctx);
  SSL_set_fd(ssl, fd);
  SSL_set_tlsext_host_name(ssl, "localhost");
  int r = -1;
  if (SSL_connect(ssl) == 1) {
    r = 0;
    if (len) SSL_write(ssl, data, (int)len);
    shutdown(fd, SHUT_WR);
    int n;
    while (*got + 1 < cap && (n = SSL_read(ssl, resp + *got, (int)(cap - 1 - *got))) > 0) *got += (size_t)n;
    resp[*got] = '\0';
  }
  SSL_free(ssl);
  ERR_clear_error();
  close(fd);
  return r;
}

/* TLS: random bytes, truncated and mutated ClientHellos, and real sessions
 * carrying garbage, HTTP/1.1 and HTTP/2. Every connection must end counted
 * as a handshake or a handshake error. */
static void fuzz_tls(nhb_server* s, int port, SSL_CTX* ctx, SSL_CTX* ctx_h1) {
  nhb_server_stats before, after;
  nhb_server_stats_get(s, &before);
  uint64_t x = 0x13198a2e03707344ULL;
  static char buf[16384], hello[4096], resp[1 << 20];
  size_t hello_len = client_hello(ctx, hello, sizeof(hello));
  CHECK(hello_len > 100);
  int hung = 0, N = 160, sessions = 0;
  for (int i = 0; i < N; i++) {
    size_t len = 0;
    int mode = (int)(fuzz_rand(&x) % 5);
    if (mode == 0) {
      len = 1 + fuzz_rand(&x) % 2000;
      for (size_t k = 0; k < len; k++) buf[k] = (char)fuzz_rand(&x);
    } else if (mode <= 2) {
      memcpy(buf, hello, hello_len);
      len = hello_len;
      if (mode == 1) len = 1 + fuzz_rand(&x) % hello_len;
      else mutate(buf, 0, len, 1 + (int)(fuzz_rand(&x) % 8), &x);
    }
    if (mode <= 2) {
      hung += fuzz_exchange(port, buf, len, &x, resp, sizeof(resp));
      continue;
    }
    /* A real session, then nonsense (or a request) inside it: random bytes
     * to HTTP/1.1 or HTTP/2 (by ALPN), or HTTP/2 frames. */
    SSL_CTX* use = ctx;
    if (mode == 3) {
      len = 1 + fuzz_rand(&x) % 800;
      for (size_t k = 0; k < len; k++) buf[k] = (char)fuzz_rand(&x);
      if (fuzz_rand(&x) % 2) use = ctx_h1;
    } else {
      len = sizeof(h2_preface) - 1;
      memcpy(buf, h2_preface, len);
      len += h2_frame(buf + len, 4, 0, 0, NULL, 0);
      len += h2_conversation(buf + len, sizeof(buf) - len, &x);
      if (fuzz_rand(&x) % 2) mutate(buf, sizeof(h2_preface) - 1, len, 2, &x);
    }
    size_t got;
    if (tls_exchange(use, port, buf, len, resp, sizeof(resp), &got) == 0) sessions++;
  }
  CHECK(hung == 0);
  CHECK(sessions > 0);
  /* Still serving: a proper request over TLS is answered. */
  size_t got;
  static const char req[] = "GET /?status=201 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";
  CHECK(tls_exchange(ctx_h1, port, req, sizeof(req) - 1, resp, sizeof(resp), &got) == 0 &&
        status_of(resp) == 201);
  /* Every connection ended as a handshake or a handshake error. */
  for (int wait = 0; wait < 300; wait++) {
    nhb_server_stats_get(s, &after);
    if (after.connections_active == 0) break;
    usleep(10000);
  }
  CHECK(after.connections_active == 0);
  CHECK(after.tls_handshakes + after.tls_handshake_errors - before.tls_handshakes - before.tls_handshake_errors ==
        after.connections_total - before.connections_total);
  CHECK(after.tls_handshake_errors > before.tls_handshake_errors);
  printf("selftest: tls fuzz: %d inputs, %llu handshakes, %llu handshake errors, %d sessions with garbage\n", N + 1,
         (unsigned long long)(after.tls_handshakes - before.tls_handshakes),
         (unsigned long long)(after.tls_handshake_errors - before.tls_handshake_errors), sessions);
}

/* TLS and HTTP/2 end to end, for the leak check: the client over h2c and
 * over TLS (h1 and h2) against a server with a generated certificate, then
 * the fuzzers. */
static void test_server_tls_h2(void) {
  char ca_path[64];
  snprintf(ca_path, sizeof(ca_path), "/tmp/nhb-selftest-ca-%d.pem", (int)getpid());
  nhb_server_config sc;
  server_config_loopback(&sc);
  sc.nworkers = 2;
  sc.tls = 1;
  sc.tls_self_signed = 1;
  sc.ntls_san = 1;
  sc.tls_san[0] = "selftest.example";
  sc.max_echo_delay_ns = 50000000ULL;
  sc.header_timeout_ns = 500000000ULL;
  sc.response_json = "{\"response_body_size\": 3000}";
  nhb_server* tls_server;
  char err[256] = "";
  CHECK(nhb_server_create(&sc, &tls_server, err, sizeof(err)) == 0);
  if (err[0]) fprintf(stderr, "selftest: %s\n", err);
  CHECK(nhb_server_start(tls_server) == 0);
  struct sockaddr_in bound;
  unsigned len = sizeof(bound);
  CHECK(nhb_server_address(tls_server, 0, &bound, &len) == 0);
  int tls_port = ntohs(bound.sin_port);
  const char* pem = nhb_server_tls_cert_pem(tls_server);
  CHECK(pem != NULL && strncmp(pem, "-----BEGIN CERTIFICATE-----", 27) == 0);
  FILE* f = fopen(ca_path, "w");
  if (f) {
    fputs(pem, f);
    fclose(f);
  }

  server_config_loopback(&sc);
  sc.max_echo_delay_ns = 50000000ULL;
  sc.max_concurrent_streams = 8;
  nhb_server* plain;
  CHECK(nhb_server_create(&sc, &plain, NULL, 0) == 0 && nhb_server_start(plain) == 0);
  len = sizeof(bound);
  CHECK(nhb_server_address(plain, 0, &bound, &len) == 0);
  int plain_port = ntohs(bound.sin_port);

  for (int variant = 0; variant < 3; variant++) {
    int tls = variant > 0, h2 = variant != 1;
    nhb_client_config c = client_config(tls ? tls_port : plain_port, 100, 0.5);
    nhb_request_spec h2_spec = request_spec;
    if (h2) {
      h2_spec.h2_method = "GET";
      h2_spec.h2_authority = "127.0.0.1";
      h2_spec.h2_path = "/?delay=1ms";
      c.specs = &h2_spec;
      c.protocol = NHB_PROTO_HTTP2;
      c.h2_scheme = tls ? "https" : "http";
    }
    if (tls) {
      c.tls.enabled = 1;
      c.tls.cacert = ca_path;
      c.tls.verify_name = "127.0.0.1";
      c.tls.session_reuse = 1;
    }
    nhb_run* r;
    const nhb_stats* g = run(&c, &r);
    CHECK(g && g->counters[NHB_CTR_HTTP_2XX] == 100);
    if (tls) CHECK(g && g->counters[NHB_CTR_SSL_HANDSHAKE] >= 2);
    if (strlen(nhb_run_first_error(r))) fprintf(stderr, "selftest: variant %d: %s\n", variant, nhb_run_first_error(r));
    nhb_run_destroy(r);
  }
  nhb_server_stats st;
  nhb_server_stats_get(plain, &st);
  CHECK(st.requests == 100 && st.connections_http2 >= 1);
  nhb_server_stats_get(tls_server, &st);
  CHECK(st.requests == 200 && st.tls_handshakes >= 4 && st.connections_http2 >= 1 && st.connections_http1 >= 1);

  fuzz_h2(plain, plain_port);
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
  unsigned char alpn[] = "\x02h2\x08http/1.1";
  SSL_CTX_set_alpn_protos(ctx, alpn, sizeof(alpn) - 1);
  SSL_CTX* ctx_h1 = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_verify(ctx_h1, SSL_VERIFY_NONE, NULL);
  SSL_CTX_set_alpn_protos(ctx_h1, alpn + 3, sizeof(alpn) - 4);
  fuzz_tls(tls_server, tls_port, ctx, ctx_h1);
  SSL_CTX_free(ctx);
  SSL_CTX_free(ctx_h1);

  nhb_server_destroy(plain);
  nhb_server_destroy(tls_server);
  unlink(ca_path);
}

static size_t gunzip(const char* in, size_t len, char* out, size_t cap) {
  z_stream z;
  memset(&z, 0, sizeof(z));
  if (inflateInit2(&z, 15 + 16) != Z_OK) return 0;
  z.next_in = (Bytef*)in;
  z.avail_in = (uInt)len;
  z.next_out = (Bytef*)out;
  z.avail_out = (uInt)cap;
  int r = inflate(&z, Z_FINISH);
  size_t n = cap - z.avail_out;
  inflateEnd(&z);
  return r == Z_STREAM_END ? n : 0;
}

static void test_server_features(void) {
  char sock_path[108];
  snprintf(sock_path, sizeof(sock_path), "/tmp/nhb-selftest-%d.sock", (int)getpid());
  nhb_server_config sc;
  server_config_loopback(&sc);
  sc.nworkers = 2;
  sc.nlisten = 2;
  struct sockaddr_un un;
  memset(&un, 0, sizeof(un));
  un.sun_family = AF_UNIX;
  snprintf(un.sun_path, sizeof(un.sun_path), "%s", sock_path);
  memcpy(sc.listen[1].bytes, &un, sizeof(un));
  sc.listen[1].len = sizeof(un);
  sc.has_admin = 1;
  loopback(sc.admin.bytes, &sc.admin.len, 0);
  sc.ntcp_echo = 1;
  loopback(sc.tcp_echo[0].bytes, &sc.tcp_echo[0].len, 0);
  sc.nudp_echo = 1;
  loopback(sc.udp_echo[0].bytes, &sc.udp_echo[0].len, 0);
  sc.max_header_bytes = 2048;
  sc.max_body_bytes = 8192;
  sc.max_echo_delay_ns = 50000000ULL; /* keeps fuzzed delays short */
  sc.header_timeout_ns = 300000000ULL;
  sc.idle_timeout_ns = 600000000ULL;
  nhb_server* s;
  CHECK(nhb_server_create(&sc, &s, NULL, 0) == 0);
  CHECK(nhb_server_start(s) == 0);
  CHECK(nhb_server_bound_count(s, NHB_SOCK_HTTP) == 2);
  struct sockaddr_storage ss;
  unsigned ss_len = sizeof(ss);
  CHECK(nhb_server_bound(s, NHB_SOCK_HTTP, 0, &ss, &ss_len) == 0);
  int port = ntohs(((struct sockaddr_in*)&ss)->sin_port);
  ss_len = sizeof(ss);
  CHECK(nhb_server_bound(s, NHB_SOCK_ADMIN, 0, &ss, &ss_len) == 0);
  int admin_port = ntohs(((struct sockaddr_in*)&ss)->sin_port);
  ss_len = sizeof(ss);
  CHECK(nhb_server_bound(s, NHB_SOCK_TCP_ECHO, 0, &ss, &ss_len) == 0);
  int echo_port = ntohs(((struct sockaddr_in*)&ss)->sin_port);
  ss_len = sizeof(ss);
  CHECK(nhb_server_bound(s, NHB_SOCK_UDP_ECHO, 0, &ss, &ss_len) == 0);
  struct sockaddr_in udp_addr;
  memcpy(&udp_addr, &ss, sizeof(udp_addr));

  static char r[1 << 20];
  /* Fortio parameters. */
  http(port, "GET /?status=503&size=10 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", r, sizeof(r));
  CHECK(status_of(r) == 503 && strstr(r, "Content-Length: 10\r\n") != NULL);
  http(port, "GET /?status=503:60,500:50 HTTP/1.1\r\nConnection: close\r\n\r\n", r, sizeof(r));
  CHECK(status_of(r) == 400 && strstr(body_of(r), "more than 100") != NULL);
  http(port, "GET /?size=999999999 HTTP/1.1\r\nConnection: close\r\n\r\n", r, sizeof(r));
  CHECK(strstr(r, "Content-Length: 262144\r\n") != NULL); /* the cap, not a failure */
  http(port, "GET /?header=X-A:1&header=X-B:%20two HTTP/1.1\r\nConnection: close\r\n\r\n", r, sizeof(r));
  CHECK(strstr(r, "\r\nX-A: 1\r\n") != NULL && strstr(r, "\r\nX-B: two\r\n") != NULL);
  http(port, "GET /?header=X-A:1%0d%0aEvil:1 HTTP/1.1\r\nConnection: close\r\n\r\n", r, sizeof(r));
  CHECK(status_of(r) == 400); /* no response splitting */
  http(port, "POST /echo HTTP/1.1\r\nContent-Length: 11\r\nConnection: close\r\n\r\nhello world", r, sizeof(r));
  CHECK(status_of(r) == 200 && strcmp(body_of(r), "hello world") == 0);
  size_t n = http(port, "GET /?size=5000&gzip=true HTTP/1.1\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n",
                  r, sizeof(r));
  const char* gz = body_of(r);
  static char plain[8192];
  CHECK(strstr(r, "Content-Encoding: gzip") != NULL);
  CHECK(n > (size_t)(gz - r) && gunzip(gz, n - (size_t)(gz - r), plain, sizeof(plain)) == 5000);
  http(port, "GET /debug HTTP/1.1\r\nX-Test: 1\r\nConnection: close\r\n\r\n", r, sizeof(r));
  CHECK(strstr(body_of(r), "GET /debug HTTP/1.1") != NULL && strstr(body_of(r), "X-Test: 1") != NULL);

  /* Nighthawk options per request. */
  http(port,
       "GET / HTTP/1.1\r\nx-nighthawk-test-server-config: {\"response_body_size\": 7, \"response_headers\": "
       "[{\"header\": {\"key\": \"foo\", \"value\": \"bar\"}}]}\r\nConnection: close\r\n\r\n",
       r, sizeof(r));
  CHECK(strcmp(body_of(r), "aaaaaaa") == 0 && strstr(r, "\r\nfoo: bar\r\n") != NULL);
  http(port, "GET / HTTP/1.1\r\nx-nighthawk-test-server-config: {\"response_body_size\": }\r\nConnection: close\r\n\r\n",
       r, sizeof(r));
  CHECK(status_of(r) == 500 && strncmp(body_of(r), "test-server didn't understand the request: ", 43) == 0);
  http(port,
       "GET /p HTTP/1.1\r\nx-nighthawk-test-server-config: {\"echo_request_headers\": true}\r\nConnection: close\r\n\r\n",
       r, sizeof(r));
  CHECK(strstr(body_of(r), "Request Headers:\n") != NULL && strstr(body_of(r), "':path', '/p'") != NULL);

  /* A delay, and order behind it (pipelined). */
  double t0 = now_s();
  static const char pipelined[] =
      "GET /?delay=30ms HTTP/1.1\r\n\r\nGET /?status=201 HTTP/1.1\r\n\r\nGET /?status=202 HTTP/1.1\r\nConnection: "
      "close\r\n\r\n";
  http_fd(connect_tcp(port), pipelined, sizeof(pipelined) - 1, r, sizeof(r));
  double dt = now_s() - t0;
  CHECK(dt >= 0.030 && dt < 1.0);
  const char* second = strstr(r + 1, "HTTP/1.1");
  const char* third = second ? strstr(second + 1, "HTTP/1.1") : NULL;
  CHECK(status_of(r) == 200 && second && status_of(second) == 201 && third && status_of(third) == 202);

  /* A per-request stall holds other connections' responses too. */
  int stall_fd = connect_tcp(port);
  send_all(stall_fd, "GET /?stall=40ms HTTP/1.1\r\n\r\n", 29);
  usleep(5000);
  t0 = now_s();
  CHECK(server_answers(port));
  CHECK(now_s() - t0 >= 0.025);
  close(stall_fd);

  /* Limits: 431, 413, 400. */
  static char big[4096];
  snprintf(big, sizeof(big), "GET / HTTP/1.1\r\nX-Big: %03000d\r\n\r\n", 0);
  http(port, big, r, sizeof(r));
  CHECK(status_of(r) == 431);
  http(port, "POST / HTTP/1.1\r\nContent-Length: 100000\r\n\r\n", r, sizeof(r));
  CHECK(status_of(r) == 413);
  http(port, "GARBAGE\r\n\r\n", r, sizeof(r));
  CHECK(status_of(r) == 400);

  /* Time-outs: a head that never completes, and an idle keep-alive. */
  int fd = connect_tcp(port);
  send_all(fd, "GET / HTTP/1.1\r\nHo", 18);
  int closed;
  t0 = now_s();
  read_until_close(fd, r, sizeof(r), 3000, &closed);
  CHECK(closed && now_s() - t0 < 2.0);
  close(fd);

  /* Unix socket, admin, echo listeners. */
  http_fd(connect_unix(sock_path), "GET /?status=418 HTTP/1.1\r\nConnection: close\r\n\r\n", 48, r, sizeof(r));
  CHECK(status_of(r) == 418);
  http(admin_port, "GET /stats HTTP/1.1\r\nConnection: close\r\n\r\n", r, sizeof(r));
  CHECK(status_of(r) == 200 && strstr(body_of(r), "\"requests\": ") != NULL);
  http(admin_port, "GET /other HTTP/1.1\r\nConnection: close\r\n\r\n", r, sizeof(r));
  CHECK(status_of(r) == 404);
  fd = connect_tcp(echo_port);
  send_all(fd, "echo me", 7);
  shutdown(fd, SHUT_WR);
  read_until_close(fd, r, sizeof(r), 3000, &closed);
  CHECK(strcmp(r, "echo me") == 0);
  close(fd);
  int ufd = socket(AF_INET, SOCK_DGRAM, 0);
  sendto(ufd, "datagram", 8, 0, (struct sockaddr*)&udp_addr, sizeof(udp_addr));
  struct pollfd pfd = {ufd, POLLIN, 0};
  CHECK(poll(&pfd, 1, 3000) == 1 && recv(ufd, r, 100, 0) == 8 && memcmp(r, "datagram", 8) == 0);
  close(ufd);

  /* Many idle connections cost memory only. */
  enum { IDLE = 300 };
  int idle[IDLE];
  for (int i = 0; i < IDLE; i++) idle[i] = connect_tcp(port);
  CHECK(server_answers(port));
  for (int i = 0; i < IDLE; i++)
    if (idle[i] >= 0) close(idle[i]);

  /* Counters are exact at the time of the call. */
  nhb_server_stats before, after;
  nhb_server_stats_get(s, &before);
  for (int i = 0; i < 5; i++) server_answers(port);
  nhb_server_stats_get(s, &after);
  CHECK(after.requests - before.requests == 5);
  CHECK(after.status[200] - before.status[200] == 5);
  CHECK(after.bad_requests >= 3 && after.status[431] == 1 && after.status[413] == 1);
  CHECK(after.stalls >= 1 && after.tcp_echo_bytes == 7 && after.udp_echo_packets == 1);

  fuzz_server(s, port);

  nhb_server_stop(s);
  nhb_server_destroy(s);
  CHECK(access(sock_path, F_OK) != 0); /* the socket file is removed */
}

/* Static options: a pre-rendered response with a delay, then options that
 * make every response dynamic, echo defaults and periodic stalls. */
static void test_server_static(void) {
  static char r[65536];
  nhb_server_config sc;
  server_config_loopback(&sc);
  sc.response_json = "{\"response_body_size\": 4, \"static_delay\": \"0.02s\", \"response_headers\": "
                     "[{\"header\": {\"key\": \"server\", \"value\": \"other\"}}, {\"header\": {\"key\": \"x-s\", "
                     "\"value\": \"1\"}}, {\"header\": {\"key\": \"x-s\", \"value\": \"2\"}, \"append\": true}]}";
  nhb_server* s;
  CHECK(nhb_server_create(&sc, &s, NULL, 0) == 0 && nhb_server_start(s) == 0);
  struct sockaddr_in bound;
  unsigned len = sizeof(bound);
  CHECK(nhb_server_address(s, 0, &bound, &len) == 0);
  int port = ntohs(bound.sin_port);
  double t0 = now_s();
  http(port, "GET / HTTP/1.1\r\nConnection: close\r\n\r\n", r, sizeof(r));
  CHECK(now_s() - t0 >= 0.020);
  CHECK(strcmp(body_of(r), "aaaa") == 0 && strstr(r, "\r\nx-s: 1\r\nx-s: 2\r\n") != NULL);
  CHECK(strstr(r, "\r\nserver: other\r\n") != NULL && strstr(r, "nhbench") == NULL);
  /* HTTP/1.0 keep-alive is confirmed; a plain HTTP/1.0 request is closed. */
  static const char two[] = "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET / HTTP/1.0\r\n\r\n";
  http_fd(connect_tcp(port), two, sizeof(two) - 1, r, sizeof(r));
  CHECK(strstr(r, "Connection: keep-alive\r\n") != NULL && strstr(r, "Connection: close\r\n") != NULL);
  nhb_server_destroy(s);

  server_config_loopback(&sc);
  sc.response_json = "{\"echo_request_headers\": true, \"emit_previous_request_delta_in_response_header\": \"x-delta\"}";
  sc.echo_default_params = "status=418&header=X-D:1";
  sc.stall_every_ns = 50000000ULL;
  sc.stall_for_ns = 5000000ULL;
  CHECK(nhb_server_create(&sc, &s, NULL, 0) == 0 && nhb_server_start(s) == 0);
  len = sizeof(bound);
  CHECK(nhb_server_address(s, 0, &bound, &len) == 0);
  port = ntohs(bound.sin_port);
  static const char pair[] = "GET /a HTTP/1.1\r\n\r\nGET /b?status=201 HTTP/1.1\r\nConnection: close\r\n\r\n";
  http_fd(connect_tcp(port), pair, sizeof(pair) - 1, r, sizeof(r));
  const char* second = strstr(r + 1, "HTTP/1.1 ");
  CHECK(status_of(r) == 418 && strstr(r, "\r\nX-D: 1\r\n") != NULL);
  CHECK(second && status_of(second) == 201 && strstr(second, "\r\nx-delta: ") != NULL);
  CHECK(strstr(r, "\nRequest Headers:\n':method', 'GET'\n':path', '/a'\n") != NULL);
  usleep(120000);
  nhb_server_stats st;
  nhb_server_stats_get(s, &st);
  CHECK(st.stalls >= 3 && st.status[418] == 1 && st.status[201] == 1);
  nhb_server_stop(s);
  nhb_server_destroy(s);
}

static void test_server_config_errors(void) {
  nhb_server_config sc;
  nhb_server* s = NULL;
  char err[256];
  server_config_loopback(&sc);
  sc.response_json = "{\"bogus\": 1}";
  CHECK(nhb_server_create(&sc, &s, err, sizeof(err)) == NHB_EINVAL && strstr(err, "bogus") != NULL);
  sc.response_json = "{\"static_delay\": \"1s\", \"concurrency_based_linear_delay\": {}}";
  CHECK(nhb_server_create(&sc, &s, err, sizeof(err)) == NHB_EINVAL);
  sc.response_json = NULL;
  sc.echo_default_params = "delay=1s:70,2s:40";
  CHECK(nhb_server_create(&sc, &s, err, sizeof(err)) == NHB_EINVAL && strstr(err, "echo_default_params") != NULL);
  sc.echo_default_params = NULL;
  sc.stall_every_ns = 1000000;
  sc.stall_for_ns = 2000000;
  CHECK(nhb_server_create(&sc, &s, err, sizeof(err)) == NHB_EINVAL && strstr(err, "stall_for") != NULL);

  /* A busy explicit port fails to start, and leaks nothing. */
  server_config_loopback(&sc);
  nhb_server* a;
  CHECK(nhb_server_create(&sc, &a, NULL, 0) == 0 && nhb_server_start(a) == 0);
  struct sockaddr_in bound;
  unsigned len = sizeof(bound);
  CHECK(nhb_server_address(a, 0, &bound, &len) == 0);
  sc.nworkers = 2;
  loopback(sc.listen[0].bytes, &sc.listen[0].len, ntohs(bound.sin_port));
  CHECK(nhb_server_create(&sc, &s, NULL, 0) == 0);
  CHECK(nhb_server_start(s) == -EADDRINUSE && strstr(nhb_server_error(s), "in use") != NULL);
  nhb_server_destroy(s);
  nhb_server_destroy(a);
}

/* Per-status-code counter names: exactly three digits in 100..599, and the
 * ids they map to name them back. */
static void test_counter_names(void) {
  char buf[64];
  CHECK(nhb_counter_lookup("benchmark.http_2xx") == NHB_CTR_HTTP_2XX);
  CHECK(nhb_counter_lookup("benchmark.http_100") == NHB_CTR_COUNT);
  CHECK(nhb_counter_lookup("benchmark.http_599") == NHB_GRPC_STATUS_ID - 1);
  /* The gRPC status counters follow, 0..16 without leading zeros. */
  CHECK(nhb_counter_lookup("benchmark.grpc_status_0") == NHB_GRPC_STATUS_ID);
  CHECK(nhb_counter_lookup("benchmark.grpc_status_16") == NHB_CHECK_PASS_ID - 1);
  /* Then the checks' counters, by index (the binding names them). */
  CHECK(nhb_counter_lookup("check.0.pass") == NHB_CHECK_PASS_ID);
  CHECK(nhb_counter_lookup("check.31.fail") == NHB_COUNTER_ID_COUNT - 1);
  CHECK(nhb_counter_name(NHB_CHECK_FAIL_ID + 3, buf, sizeof(buf)) == 0 && strcmp(buf, "check.3.fail") == 0);
  CHECK(nhb_counter_name(NHB_GRPC_STATUS_ID + 14, buf, sizeof(buf)) == 0 &&
        strcmp(buf, "benchmark.grpc_status_14") == 0);
  const char* bad[] = {"benchmark.http_099",      "benchmark.http_600",      "benchmark.http_0200",
                       "benchmark.http_20",       "benchmark.http_",         "benchmark.http_2x0",
                       "http_200",                "benchmark.grpc_status_17", "benchmark.grpc_status_01",
                       "benchmark.grpc_status_",  "benchmark.grpc_status_1x", "benchmark.grpc_status_100",
                       "check.32.pass",           "check.01.pass",           "check.0.ok",
                       "check..pass",             "check.0.pass.x"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) CHECK(nhb_counter_lookup(bad[i]) == -1);
  int id = nhb_counter_lookup("benchmark.http_503");
  CHECK(nhb_counter_name(id, buf, sizeof(buf)) == 0 && strcmp(buf, "benchmark.http_503") == 0);
  CHECK(nhb_counter_name(NHB_CTR_HTTP_5XX, buf, sizeof(buf)) == 0 && strcmp(buf, "benchmark.http_5xx") == 0);
  CHECK(nhb_counter_name(-1, buf, sizeof(buf)) == -1 && buf[0] == '\0');
  CHECK(nhb_counter_name(NHB_COUNTER_ID_COUNT, buf, sizeof(buf)) == -1);
  /* A predicate on a per-code counter is a valid config; one past them is not. */
  nhb_client_config c = client_config(9, 100, 1.0);
  nhb_run* r;
  c.n_failure = 1;
  c.failure[0].counter = id;
  c.failure[0].threshold = 0;
  CHECK(nhb_run_create(&c, &r) == 0);
  nhb_run_destroy(r);
  c.failure[0].counter = NHB_COUNTER_ID_COUNT;
  CHECK(nhb_run_create(&c, &r) == NHB_EINVAL);
  /* A check's counter names a check of the run: none configured here. */
  c.failure[0].counter = NHB_CHECK_FAIL_ID;
  CHECK(nhb_run_create(&c, &r) == NHB_EINVAL);
}

int main(void) {
  /* The fuzzers' TLS client writes with OpenSSL's socket BIO (write(2)); a
   * server that already closed must fail that write, not kill the test. */
  signal(SIGPIPE, SIG_IGN);
  /* The server, with a body and an extra header. */
  nhb_server_config sc;
  server_config_loopback(&sc);
  sc.nworkers = 2;
  sc.response_json = "{\"response_body_size\": 100, \"response_headers\": "
                     "[{\"header\": {\"key\": \"x-selftest\", \"value\": \"1\"}}]}";
  nhb_server* server;
  CHECK(nhb_server_create(&sc, &server, NULL, 0) == 0);
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
  /* Every 2xx here is a 200, counted once more by its exact code. */
  CHECK(g && g->status_codes[200 - NHB_STATUS_MIN] == 200);
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

  /* A request set of two, templated (request.c): every request is framed
   * right (the server answers 200 only to a body of its Content-Length), and
   * the set's copies outlive the caller's strings. */
  {
    char a[] = "GET /a?n={seq}&w={worker}&r={rand:7} HTTP/1.1\r\nHost: x\r\nX-Id: {uuid}\r\n\r\n";
    char b[] = "POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: {content-length}\r\n\r\n{seq}:{uuid}";
    nhb_request_spec specs[2];
    memset(specs, 0, sizeof(specs));
    specs[0].request = a;
    specs[0].request_len = strlen(a);
    specs[1].request = b;
    specs[1].request_len = strlen(b);
    specs[1].body_size = strlen("{seq}:{uuid}");
    c = client_config(port, 200, 0.5);
    c.specs = specs;
    c.nspecs = 2;
    c.templated = 1;
    CHECK(nhb_run_create(&c, &r) == 0);
    memset(a, 'x', sizeof(a) - 1);
    memset(b, 'x', sizeof(b) - 1);
    CHECK(nhb_run_start(r) == 0);
    CHECK(nhb_run_wait(r, 30.0) == 1);
    g = nhb_run_global_stats(r);
    CHECK(g && g->counters[NHB_CTR_HTTP_2XX] == 200);
    nhb_run_destroy(r);
    /* Bad entries are refused at create, naming the entry. */
    char err[256];
    specs[0].request = request;
    specs[0].request_len = sizeof(request) - 1;
    specs[1].body_size = specs[1].request_len + 1;
    CHECK(nhb_run_create_ex(&c, &r, err, sizeof(err)) == NHB_EINVAL && strstr(err, "specs[1]") != NULL);
    specs[1].body_size = 0;
    specs[1].request = NULL;
    CHECK(nhb_run_create_ex(&c, &r, err, sizeof(err)) == NHB_EINVAL && strstr(err, "specs[1]") != NULL);
    /* A template whose longest expansion exceeds the bound. */
    static char big[NHB_MAX_TEMPLATED_REQUEST];
    memset(big, 'y', sizeof(big));
    memcpy(big, "GET /{seq} HTTP/1.1\r\n\r\n", 24);
    specs[1].request = big;
    specs[1].request_len = sizeof(big);
    CHECK(nhb_run_create_ex(&c, &r, err, sizeof(err)) == NHB_EINVAL && strstr(err, "at most") != NULL);
  }

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

  test_counter_names();
  test_server_features();
  test_server_tls_h2();
  test_server_static();
  test_server_config_errors();

  if (failures) fprintf(stderr, "selftest: %d check(s) failed\n", failures);
  else printf("selftest: all checks passed\n");
  return failures ? 1 : 0;
}
