/*
 * The floor of an HTTP/1.1 load client on this kernel: the least work a client can
 * do per request, so that every tool can be reported as a ratio to it.
 *
 * N keep-alive connections, one request in flight on each, one epoll instance. Per request the
 * client makes exactly one write() of a fixed request and, per readiness event, one read();
 * it parses nothing: it only counts the bytes of a response whose size it learned from the
 * first response (or from --response-size) and keeps no statistics. It prints one JSON line:
 * the requests completed and its own CPU time (getrusage), measured from the moment every
 * connection is open to the end of the run, so connection set-up is not part of it.
 *
 * Two modes:
 *   request floor (default)  each connection sends its next request as soon as the response to
 *                            the previous one is complete (closed loop, as wrk does);
 *   timer floor (--rate R)   requests are released on a uniform schedule of R per second, one
 *                            timer wake-up per release; a release finds an idle connection or
 *                            waits in a backlog for the next one that becomes idle. Three timers:
 *                            --timer timerfd (default): a periodic timerfd in the epoll set, one
 *                            epoll_wait return and one read of the timerfd per release;
 *                            --timer pwait2: epoll_pwait2's nanosecond timeout up to the next
 *                            release, one system call per release (the clock is read through
 *                            the vDSO, which is not a system call);
 *                            --timer oneshot: a timerfd set (timerfd_settime, absolute) to the
 *                            next release whenever that changed, releases due sent after any
 *                            wake-up: nhbench's sequencer reduced to its system calls, to
 *                            price that design against the periodic timer.
 *                          --timer-slack NS sets the process's timer slack (prctl), which
 *                          epoll_pwait2's timeout obeys and a timerfd does not.
 *
 *   request_floor --port P [--host 127.0.0.1] [--connections 50] [--duration S | --requests N]
 *                 [--rate R [--timer timerfd|pwait2|oneshot] [--timer-slack NS]] [--cpu C] [--response-size B] [--path /]
 *
 * It is a benchmark tool, not part of nhbench: benchmarks/floor/build.py builds it with the
 * system cc into benchmarks/out/floor/.
 */
#define _GNU_SOURCE
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/timerfd.h>

#define FLOOR_NAME "request_floor"
#define FLOOR_USAGE                                                                                \
    "request_floor --port P [--host ADDR] [--connections N] [--duration S | --requests N] "        \
    "[--rate R] [--timer timerfd|pwait2|oneshot] [--timer-slack NS] [--cpu C] [--response-size B] " \
    "[--path /]"
#include "floor_common.h"

/* One connection: its socket and the bytes of the current response received so far. */
struct conn {
    int fd;
    int busy;          /* a request is in flight */
    size_t got;        /* bytes of the current response read so far */
};

/* The releases due by now on a schedule whose next release is at *next_ns: moves *next_ns
 * past them and counts the late ones (all but the first) in *late. */
static long long releases_due(long long *next_ns, long long period, long long *late) {
    long long t = now_ns(), ticks = 0;
    while (t >= *next_ns) {
        ticks++;
        *next_ns += period;
    }
    if (ticks > 1)
        *late += ticks - 1;
    return ticks;
}

int main(int argc, char **argv) {
    struct floor_opts o = FLOOR_OPTS_DEFAULT;
    double rate = 0;
    long long slack_ns = 0;
    int timer_mode = 0; /* 0 periodic timerfd, 1 epoll_pwait2, 2 oneshot timerfd */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc)
            usage("every option takes a value");
        const char *v = argv[++i];
        if (floor_opt(&o, a, v))
            continue;
        if (!strcmp(a, "--rate"))
            rate = atof(v);
        else if (!strcmp(a, "--timer") && (!strcmp(v, "timerfd") || !strcmp(v, "pwait2") ||
                                            !strcmp(v, "oneshot")))
            timer_mode = !strcmp(v, "pwait2") ? 1 : !strcmp(v, "oneshot") ? 2 : 0;
        else if (!strcmp(a, "--timer"))
            usage("--timer must be timerfd, pwait2 or oneshot");
        else if (!strcmp(a, "--timer-slack"))
            slack_ns = atoll(v);
        else
            usage("unknown option");
    }
    if (rate < 0)
        usage("--rate must be positive");
    struct sockaddr_in addr;
    char req[1024];
    int req_len = floor_setup(&o, INT32_MAX, &addr, req, sizeof req);
    const int nconn = o.nconn;
    const double duration = o.duration;
    const long long max_requests = o.max_requests;
    size_t resp_size = o.resp_size;

    struct conn *conns = calloc((size_t)nconn, sizeof *conns);
    int *idle = calloc((size_t)nconn, sizeof *idle); /* stack of idle connections (timer mode) */
    if (conns == NULL || idle == NULL)
        die("calloc", errno);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        die("epoll_create1", errno);
    for (int i = 0; i < nconn; i++) {
        conns[i].fd = open_conn(&addr);
        if (i == 0 && resp_size == 0)
            resp_size = learn_response_size(conns[0].fd, req, (size_t)req_len);
        /* Level-triggered read interest, registered once: no epoll_ctl per request. */
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, conns[i].fd, &ev) != 0)
            die("epoll_ctl", errno);
    }
    if (resp_size == 0)
        usage("--response-size must be positive");

    int tfd = -1;
    long long period = rate > 0 ? (long long)(1e9 / rate) : 0, next_ns = 0;
    if (period <= 0)
        period = 1;
    if (rate > 0 && timer_mode != 1) {
        tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
        if (tfd < 0)
            die("timerfd_create", errno);
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = UINT32_MAX};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &ev) != 0)
            die("epoll_ctl (timerfd)", errno);
    }

    struct rusage r0, r1;
    getrusage(RUSAGE_SELF, &r0);
    double t0 = now_s(), deadline = duration > 0 ? t0 + duration : 0;
    long long issued = 0, completed = 0, backlog = 0, late = 0, reopened = 0;
    int nidle = 0, stopping = 0, inflight = 0;
    long long armed_ns = 0; /* oneshot: the deadline the timerfd holds */
    /* The kernel may delay a sleeping task's timeouts (epoll_pwait2's among them, not a
     * timerfd's) by its timer slack, 50 us by default, to merge wake-ups: cheaper, and less
     * precise. --timer-slack NS sets it (1 = precise) to price that. */
    if (slack_ns > 0 && prctl(PR_SET_TIMERSLACK, (unsigned long)slack_ns) != 0)
        die("prctl (PR_SET_TIMERSLACK)", errno);
    if (rate > 0 && timer_mode) {
        next_ns = now_ns() + period;
        for (int i = 0; i < nconn; i++)
            idle[nidle++] = i;
    } else if (tfd >= 0) {
        struct itimerspec its = {
            .it_interval = {.tv_sec = period / 1000000000, .tv_nsec = period % 1000000000},
            .it_value = {.tv_sec = period / 1000000000, .tv_nsec = period % 1000000000},
        };
        if (timerfd_settime(tfd, 0, &its, NULL) != 0)
            die("timerfd_settime", errno);
        for (int i = 0; i < nconn; i++)
            idle[nidle++] = i;
    } else {
        for (int i = 0; i < nconn && (max_requests == 0 || issued < max_requests); i++) {
            if (write(conns[i].fd, req, (size_t)req_len) != req_len)
                die("write", errno);
            conns[i].busy = 1;
            issued++;
            inflight++;
        }
    }

    static char buf[65536];
    struct epoll_event evs[256];
    while (!stopping || inflight > 0) {
        int n;
        if (timer_mode == 2) {
            /* oneshot: the timerfd holds the next release's absolute deadline, set again only
             * when that changed (as nhbench's sequencer does); releases that fell due are
             * sent after any wake-up, the timer's or a response's. */
            if (armed_ns != next_ns) {
                struct itimerspec its = {.it_value = {.tv_sec = next_ns / 1000000000LL,
                                                      .tv_nsec = next_ns % 1000000000LL}};
                if (timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL) != 0)
                    die("timerfd_settime", errno);
                armed_ns = next_ns;
            }
            n = epoll_wait(ep, evs, 256, 100);
            backlog += releases_due(&next_ns, period, &late);
        } else if (next_ns > 0) {
            /* The next release is the timeout: one system call per release. */
            long long wait = next_ns - now_ns();
            struct timespec ts = {0, 0};
            if (wait > 0) {
                ts.tv_sec = wait / 1000000000LL;
                ts.tv_nsec = wait % 1000000000LL;
            }
            n = epoll_pwait2(ep, evs, 256, &ts, NULL);
            backlog += releases_due(&next_ns, period, &late);
        } else {
            /* A 100 ms timeout bounds how late the duration check can be; not a schedule. */
            n = epoll_wait(ep, evs, 256, 100);
        }
        if (n < 0) {
            if (errno == EINTR)
                continue;
            die("epoll_wait", errno);
        }
        if (deadline > 0 && !stopping && now_s() >= deadline) {
            /* A duration run ends at the deadline: the requests in flight are not waited for. */
            break;
        }
        for (int k = 0; k < n; k++) {
            uint32_t id = evs[k].data.u32;
            if (id == UINT32_MAX) {
                if (timer_mode == 2)
                    continue; /* counted from the clock above; the re-arm clears the fd */
                uint64_t ticks = 0;
                if (read(tfd, &ticks, sizeof ticks) != (ssize_t)sizeof ticks)
                    continue;
                if (ticks > 1)
                    late += (long long)ticks - 1;
                backlog += (long long)ticks;
                continue;
            }
            struct conn *c = &conns[id];
            ssize_t got = read(c->fd, buf, sizeof buf);
            if (got <= 0) {
                if (got < 0 && errno == EAGAIN)
                    continue;
                if (!c->busy) {
                    /* The server closed an idle connection (its idle time-out: at a low --rate
                     * the idle stack leaves most connections unused): reopen it, as any client
                     * would. Not a cost of a request; counted in the JSON. */
                    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
                    close(c->fd);
                    c->fd = open_conn(&addr);
                    c->got = 0;
                    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = id};
                    if (epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev) != 0)
                        die("epoll_ctl", errno);
                    reopened++;
                    continue;
                }
                die("read (the server closed a connection)", got == 0 ? ECONNRESET : errno);
            }
            c->got += (size_t)got;
            if (c->got < resp_size)
                continue;
            if (c->got != resp_size)
                usage("a response was larger than the first one: give --response-size");
            c->got = 0;
            c->busy = 0;
            completed++;
            inflight--;
            if (stopping)
                continue;
            if (rate > 0) {
                /* Idle now: a release waiting in the backlog takes it below, after this
                 * wake-up's other events (the top of the stack goes first). */
                idle[nidle++] = (int)id;
                continue;
            }
            if (max_requests > 0 && issued >= max_requests) {
                stopping = 1;
                continue;
            }
            if (write(c->fd, req, (size_t)req_len) != req_len)
                die("write", errno);
            c->busy = 1;
            issued++;
            inflight++;
        }
        /* Releases due (timer mode) go to the idle connections, the one just freed first; the
         * rest wait in the backlog for a connection to become idle. */
        while (backlog > 0 && nidle > 0 && !stopping) {
            struct conn *c = &conns[idle[--nidle]];
            if (write(c->fd, req, (size_t)req_len) != req_len)
                die("write", errno);
            c->busy = 1;
            backlog--;
            inflight++;
            if (max_requests > 0 && ++issued >= max_requests)
                stopping = 1;
        }
        if (max_requests > 0 && issued >= max_requests)
            stopping = 1;
    }
    double wall = now_s() - t0;
    getrusage(RUSAGE_SELF, &r1);
    double user = tv_s(&r1.ru_utime) - tv_s(&r0.ru_utime), sys = tv_s(&r1.ru_stime) - tv_s(&r0.ru_stime);
    printf("{\"requests\": %lld, \"duration\": %.6f, \"cpu_s\": %.6f, \"user_s\": %.6f, "
           "\"sys_s\": %.6f, \"response_bytes\": %zu, \"connections\": %d, \"rate\": %g, "
           "\"late_ticks\": %lld, \"timer\": \"%s\", \"reopened\": %lld}\n",
           completed, wall, user + sys, user, sys, resp_size, nconn, rate, late,
           rate > 0 ? (timer_mode == 1 ? "pwait2" : timer_mode == 2 ? "oneshot" : "timerfd") : "none", reopened);
    for (int i = 0; i < nconn; i++)
        close(conns[i].fd);
    if (tfd >= 0)
        close(tfd);
    close(ep);
    free(conns);
    free(idle);
    return 0;
}
