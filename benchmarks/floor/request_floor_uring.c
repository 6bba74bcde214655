/*
 * The request floor of request_floor.c with io_uring instead of epoll (issue 16 reports the two
 * within 5 % of each other on its machine; this lets that be checked here). Needs liburing
 * (Debian: liburing-dev); benchmarks/floor/build.py builds it only when <liburing.h> exists.
 *
 * N keep-alive connections, one request in flight on each. Per request it queues one send of the
 * fixed request and one recv per chunk of the response into the connection's own buffer; it
 * parses nothing and counts bytes of a response whose size it learned from one request sent
 * before the measured part (or --response-size). All completions of one wait are handled before
 * the next io_uring_submit_and_wait, so one system call carries many requests' operations.
 * Output: one JSON line, as request_floor's.
 *
 *   request_floor_uring --port P [--host 127.0.0.1] [--connections 50]
 *                       [--duration S | --requests N] [--cpu C] [--response-size B]
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <liburing.h>
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

#define BUF 4096

struct conn {
    int fd;
    size_t got;
    char buf[BUF];
};

static void die(const char *what, int err) {
    fprintf(stderr, "request_floor_uring: %s: %s\n", what, err ? strerror(err) : "failed");
    exit(2);
}

static void usage(const char *msg) {
    fprintf(stderr,
            "request_floor_uring: %s (usage: request_floor_uring --port P [--host ADDR] "
            "[--connections N] [--duration S | --requests N] [--cpu C] [--response-size B])\n",
            msg);
    exit(2);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double tv(const struct timeval *t) { return (double)t->tv_sec + (double)t->tv_usec / 1e6; }

/* One request and its size, learned on a blocking socket before the measured part. */
static size_t learn_response_size(int fd, const char *req, size_t req_len) {
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
        char *cl = strcasestr(buf, "\r\ncontent-length:");
        if (cl == NULL || cl > end)
            usage("the first response has no Content-Length: give --response-size");
        size_t total = (size_t)(end - buf) + 4 + (size_t)strtoull(cl + 17, NULL, 10);
        while (have < total) {
            n = read(fd, buf, sizeof buf < total - have ? sizeof buf : total - have);
            if (n <= 0)
                die("read (first response body)", n == 0 ? ECONNRESET : errno);
            have += (size_t)n;
        }
        return total;
    }
}

/* user_data: the connection's index times two, plus one for a recv. */
static void queue(struct io_uring *ring, struct conn *c, uint64_t i, int recv, const char *req,
                  size_t req_len) {
    struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
    if (sqe == NULL) {
        io_uring_submit(ring);
        sqe = io_uring_get_sqe(ring);
        if (sqe == NULL)
            die("io_uring_get_sqe", EBUSY);
    }
    if (recv)
        io_uring_prep_recv(sqe, c->fd, c->buf, BUF, 0);
    else
        io_uring_prep_send(sqe, c->fd, req, req_len, 0);
    io_uring_sqe_set_data64(sqe, i * 2 + (uint64_t)recv);
}

int main(int argc, char **argv) {
    const char *host = "127.0.0.1";
    int port = 0, nconn = 50, cpu = -1;
    double duration = 0;
    long long max_requests = 0;
    size_t resp_size = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc)
            usage("every option takes a value");
        const char *v = argv[++i];
        if (!strcmp(a, "--host"))
            host = v;
        else if (!strcmp(a, "--port"))
            port = atoi(v);
        else if (!strcmp(a, "--connections"))
            nconn = atoi(v);
        else if (!strcmp(a, "--duration"))
            duration = atof(v);
        else if (!strcmp(a, "--requests"))
            max_requests = atoll(v);
        else if (!strcmp(a, "--cpu"))
            cpu = atoi(v);
        else if (!strcmp(a, "--response-size"))
            resp_size = (size_t)atoll(v);
        else
            usage("unknown option");
    }
    if (port <= 0 || port > 65535)
        usage("--port must be 1..65535");
    if (nconn <= 0 || nconn > 16384)
        usage("--connections must be 1..16384");
    if ((duration > 0) == (max_requests > 0))
        usage("give exactly one of --duration S and --requests N");
    if (cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        if (sched_setaffinity(0, sizeof set, &set) != 0)
            die("sched_setaffinity", errno);
    }
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1)
        usage("--host must be an IPv4 address");
    char req[256];
    int req_len = snprintf(req, sizeof req, "GET / HTTP/1.1\r\nHost: %s:%d\r\n\r\n", host, port);

    struct conn *conns = calloc((size_t)nconn, sizeof *conns);
    if (conns == NULL)
        die("calloc", errno);
    for (int i = 0; i < nconn; i++) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0)
            die("connect", errno);
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        conns[i].fd = fd;
        if (i == 0 && resp_size == 0)
            resp_size = learn_response_size(fd, req, (size_t)req_len);
    }
    if (resp_size == 0)
        usage("--response-size must be positive");
    struct io_uring ring;
    int rc = io_uring_queue_init((unsigned)(2 * nconn + 8), &ring, 0);
    if (rc < 0)
        die("io_uring_queue_init", -rc);

    struct rusage r0, r1;
    getrusage(RUSAGE_SELF, &r0);
    double t0 = now_s(), deadline = duration > 0 ? t0 + duration : 0;
    long long issued = 0, completed = 0;
    int inflight = 0, stopping = 0;
    for (int i = 0; i < nconn && (max_requests == 0 || issued < max_requests); i++) {
        queue(&ring, &conns[i], (uint64_t)i, 0, req, (size_t)req_len);
        queue(&ring, &conns[i], (uint64_t)i, 1, req, (size_t)req_len);
        issued++;
        inflight++;
    }
    while (inflight > 0) {
        rc = io_uring_submit_and_wait(&ring, 1);
        if (rc < 0 && rc != -EINTR)
            die("io_uring_submit_and_wait", -rc);
        if (deadline > 0 && now_s() >= deadline)
            break; /* a duration run ends at the deadline, as request_floor's does */
        struct io_uring_cqe *cqe;
        unsigned head, seen = 0;
        io_uring_for_each_cqe(&ring, head, cqe) {
            seen++;
            uint64_t data = io_uring_cqe_get_data64(cqe);
            struct conn *c = &conns[data / 2];
            if ((data & 1) == 0) {
                if (cqe->res != req_len)
                    die("send", cqe->res < 0 ? -cqe->res : EIO);
                continue;
            }
            if (cqe->res <= 0)
                die("recv (the server closed a connection)", cqe->res < 0 ? -cqe->res : ECONNRESET);
            c->got += (size_t)cqe->res;
            if (c->got < resp_size) {
                queue(&ring, c, data / 2, 1, req, (size_t)req_len);
                continue;
            }
            if (c->got != resp_size)
                usage("a response was larger than the first one: give --response-size");
            c->got = 0;
            completed++;
            inflight--;
            if (max_requests > 0 && issued >= max_requests)
                stopping = 1;
            if (stopping)
                continue;
            queue(&ring, c, data / 2, 0, req, (size_t)req_len);
            queue(&ring, c, data / 2, 1, req, (size_t)req_len);
            issued++;
            inflight++;
        }
        io_uring_cq_advance(&ring, seen);
    }
    double wall = now_s() - t0;
    getrusage(RUSAGE_SELF, &r1);
    double user = tv(&r1.ru_utime) - tv(&r0.ru_utime), sys = tv(&r1.ru_stime) - tv(&r0.ru_stime);
    printf("{\"requests\": %lld, \"duration\": %.6f, \"cpu_s\": %.6f, \"user_s\": %.6f, "
           "\"sys_s\": %.6f, \"response_bytes\": %zu, \"connections\": %d, \"io\": \"io_uring\"}\n",
           completed, wall, user + sys, user, sys, resp_size, nconn);
    io_uring_queue_exit(&ring);
    for (int i = 0; i < nconn; i++)
        close(conns[i].fd);
    free(conns);
    return 0;
}
