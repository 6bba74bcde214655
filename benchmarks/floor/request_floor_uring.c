/*
 * The request floor of request_floor.c with io_uring instead of epoll (the two were reported
 * within 5 % of each other on one machine; this lets that be checked here). Needs liburing
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
 *                       [--duration S | --requests N] [--cpu C] [--response-size B] [--path /]
 */
#define _GNU_SOURCE
#include <liburing.h>

#define FLOOR_NAME "request_floor_uring"
#define FLOOR_USAGE                                                                                \
    "request_floor_uring --port P [--host ADDR] [--connections N] [--duration S | --requests N] " \
    "[--cpu C] [--response-size B] [--path /]"
#include "floor_common.h"

#define BUF 4096

struct conn {
    int fd;
    size_t got;
    char buf[BUF];
};

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
    struct floor_opts o = FLOOR_OPTS_DEFAULT;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc)
            usage("every option takes a value");
        const char *v = argv[++i];
        if (!floor_opt(&o, a, v))
            usage("unknown option");
    }
    struct sockaddr_in addr;
    char req[1024];
    int req_len = floor_setup(&o, 16384, &addr, req, sizeof req);
    const int nconn = o.nconn;
    const double duration = o.duration;
    const long long max_requests = o.max_requests;
    size_t resp_size = o.resp_size;

    struct conn *conns = calloc((size_t)nconn, sizeof *conns);
    if (conns == NULL)
        die("calloc", errno);
    for (int i = 0; i < nconn; i++) {
        int fd = open_conn(&addr);
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
    double user = tv_s(&r1.ru_utime) - tv_s(&r0.ru_utime), sys = tv_s(&r1.ru_stime) - tv_s(&r0.ru_stime);
    printf("{\"requests\": %lld, \"duration\": %.6f, \"cpu_s\": %.6f, \"user_s\": %.6f, "
           "\"sys_s\": %.6f, \"response_bytes\": %zu, \"connections\": %d, \"io\": \"io_uring\"}\n",
           completed, wall, user + sys, user, sys, resp_size, nconn);
    io_uring_queue_exit(&ring);
    for (int i = 0; i < nconn; i++)
        close(conns[i].fd);
    free(conns);
    return 0;
}
