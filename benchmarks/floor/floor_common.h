/*
 * floor_common.h: what the floor clients share: their common options, the request
 * they send, connecting, learning the response size before the measured part, errors and
 * clocks. Each floor stays one translation unit: it defines FLOOR_NAME (its program name) and
 * FLOOR_USAGE (its usage line) and includes this once; everything here is static inline, so a
 * floor need not use all of it.
 * benchmarks/floor/build.py rebuilds a floor when this header is newer than its binary.
 */
#ifndef FLOOR_COMMON_H
#define FLOOR_COMMON_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static inline void die(const char *what, int err) {
    fprintf(stderr, FLOOR_NAME ": %s: %s\n", what, err ? strerror(err) : "failed");
    exit(2);
}

/* Bad input: one line naming the problem, exit status 2. */
static inline void usage(const char *msg) {
    fprintf(stderr, FLOOR_NAME ": %s (usage: " FLOOR_USAGE ")\n", msg);
    exit(2);
}

static inline double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline double tv_s(const struct timeval *t) { return (double)t->tv_sec + (double)t->tv_usec / 1e6; }

/* The options every floor takes. */
struct floor_opts {
    const char *host, *path;
    int port, nconn, cpu;
    double duration;
    long long max_requests;
    size_t resp_size;
};

#define FLOOR_OPTS_DEFAULT {.host = "127.0.0.1", .path = "/", .port = 0, .nconn = 50, .cpu = -1}

/* Takes option `a` with value `v` if it is a common one; 0 if it is not. */
static inline int floor_opt(struct floor_opts *o, const char *a, const char *v) {
    if (!strcmp(a, "--host"))
        o->host = v;
    else if (!strcmp(a, "--port"))
        o->port = atoi(v);
    else if (!strcmp(a, "--connections"))
        o->nconn = atoi(v);
    else if (!strcmp(a, "--duration"))
        o->duration = atof(v);
    else if (!strcmp(a, "--requests"))
        o->max_requests = atoll(v);
    else if (!strcmp(a, "--cpu"))
        o->cpu = atoi(v);
    else if (!strcmp(a, "--response-size"))
        o->resp_size = (size_t)atoll(v);
    else if (!strcmp(a, "--path"))
        o->path = v;
    else
        return 0;
    return 1;
}

/* Checks the common options (at most max_conns connections), pins the process to --cpu and
 * builds the server's address and the request; returns the request's length. */
static inline int floor_setup(const struct floor_opts *o, int max_conns, struct sockaddr_in *addr,
                       char *req, size_t req_cap) {
    if (o->port <= 0 || o->port > 65535)
        usage("--port must be 1..65535");
    if (o->nconn <= 0 || o->nconn > max_conns)
        usage("--connections is out of range (at least 1; 16384 at most with io_uring)");
    if ((o->duration > 0) == (o->max_requests > 0))
        usage("give exactly one of --duration S and --requests N");
    if (o->cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(o->cpu, &set);
        if (sched_setaffinity(0, sizeof set, &set) != 0)
            die("sched_setaffinity", errno);
    }
    *addr = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons((uint16_t)o->port)};
    if (inet_pton(AF_INET, o->host, &addr->sin_addr) != 1)
        usage("--host must be an IPv4 address");
    int len = snprintf(req, req_cap, "GET %s HTTP/1.1\r\nHost: %s:%d\r\n\r\n", o->path, o->host,
                       o->port);
    if (len <= 0 || (size_t)len >= req_cap)
        usage("--path is too long");
    return len;
}

/* A blocking connect; the floors make the socket non-blocking themselves where they need to. */
static inline int open_conn(const struct sockaddr_in *addr) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        die("socket", errno);
    if (connect(fd, (const struct sockaddr *)addr, sizeof *addr) != 0)
        die("connect", errno);
    int one = 1;
    /* Each write is a whole request, so Nagle's algorithm could only add delay. */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

/*
 * Learns the size of one response by sending one request on a blocking socket and reading the
 * head and a Content-Length body. This is the only parsing a floor ever does, and it happens
 * before the measured part; the hot loop only counts bytes.
 */
static inline size_t learn_response_size(int fd, const char *req, size_t req_len) {
    char buf[65536];
    size_t have = 0;
    if (write(fd, req, req_len) != (ssize_t)req_len)
        die("write (first request)", errno);
    for (;;) {
        if (have == sizeof buf - 1)
            usage("the first response's head is larger than 64 KiB");
        ssize_t n = read(fd, buf + have, sizeof buf - 1 - have);
        if (n <= 0)
            die("read (first response)", n == 0 ? ECONNRESET : errno);
        have += (size_t)n;
        buf[have] = '\0';
        char *end = strstr(buf, "\r\n\r\n");
        if (end == NULL)
            continue;
        size_t head = (size_t)(end - buf) + 4;
        char *cl = strcasestr(buf, "\r\ncontent-length:");
        if (cl == NULL || cl > end)
            usage("the first response has no Content-Length: give --response-size");
        size_t total = head + (size_t)strtoull(cl + 17, NULL, 10);
        while (have < total) {
            n = read(fd, buf, sizeof buf < total - have ? sizeof buf : total - have);
            if (n <= 0)
                die("read (first response body)", n == 0 ? ECONNRESET : errno);
            have += (size_t)n;
        }
        if (have != total)
            usage("the server sent more than one response to one request");
        return total;
    }
}

#endif
