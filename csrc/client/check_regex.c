/* check_regex.c: the response checks' regular expressions (`body =~ /re/`,
 * `header:NAME =~ /re/`, docs/checks.md), on Vectorscan (the portable fork of
 * Intel Hyperscan).
 *
 * Vectorscan compiles a pattern to automata that match in time linear in the
 * input with no backtracking, and refuses what it cannot run so
 * (backreferences, arbitrary lookaround, patterns too large): a hostile body
 * cannot make a check cost more than a bounded amount per byte. Its
 * streaming mode keeps a fixed-size state between scans, so a match split by
 * a read or a chunk boundary is found without copying the body.
 *
 * At run creation (nhb__chk_re_init) the body's patterns compile into one
 * streaming database and the headers' into another (HS_FLAG_SINGLEMATCH: a
 * check wants to know that it matched, once), the pattern id being the
 * check's index. The compile runs in a child process (compile_bounded): how
 * long Vectorscan takes and how much it allocates depend on the patterns'
 * shapes in ways that no look at them bounds, and a compile cannot be
 * interrupted in place, so the child has NHB_CHECK_RE_CPU_S of CPU and
 * NHB_CHECK_RE_MEM_MAX of memory, and hands the serialised databases back
 * through a pipe; past a bound the run is refused by name. A prototype
 * scratch sized for both is cloned once per
 * worker (a scratch is used by one thread at a time). Each connection
 * state (nhb__chk_state, allocated once per connection entry) opens one
 * stream per database once; a response resets the body stream, a header
 * value resets the header stream when it ends. Scanning allocates nothing.
 *
 * Matches are reported to a callback that sets the check's `seen` bit; the
 * header stream runs every header pattern over a value, and only the checks
 * whose header name the field has (st->active) count. A pattern anchored at
 * the end ($) matches only when the data is known to end: the stream is
 * reset with the callback at the end of a value or a response, which reports
 * such matches.
 *
 * Built without Vectorscan (pkg-config 'libhs' not found), every function is
 * a no-op and a run with a regex check is refused by name at creation. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client/client.h"

#define RE_IS(kind) ((kind) == NHB_CHECK_BODY_RE || (kind) == NHB_CHECK_HEADER_RE)

static int re_error(char* err, size_t err_len, int i, const char* why) {
  if (err != NULL && err_len > 0) {
    if (i >= 0)
      snprintf(err, err_len, "checks[%d]: %s", i, why);
    else
      snprintf(err, err_len, "checks: %s", why);
  }
  return NHB_EINVAL;
}

#ifdef NHB_HAVE_VECTORSCAN
#include <hs/hs.h>

typedef struct nhb__chk_re {
  hs_database_t* body; /* NULL without body patterns */
  hs_database_t* hdr;  /* NULL without header patterns */
  int nworkers;
  hs_scratch_t* scratch[]; /* one per worker */
} nhb__chk_re;

/* A header value's trailing blanks are not part of it (RFC 9110 5.5; llhttp
 * hands them over, `header ==` ignores them too): the blanks at the end of a
 * value piece wait here until a later piece shows that more follows; only the
 * last RE_BLANKS_MAX of a run wait, the ones before are scanned. */
#define RE_BLANKS_MAX 64

typedef struct nhb__chk_re_state {
  hs_stream_t* body;
  hs_stream_t* hdr;
  hs_scratch_t* scratch; /* the worker's */
  uint32_t blanks;       /* trailing blanks of the current value held back */
  char blank[RE_BLANKS_MAX];
} nhb__chk_re_state;

/* What a scan's callback may mark: the state's `seen` and the checks that
 * count for this scan. */
typedef struct re_ctx {
  uint32_t* seen;
  uint32_t wanted;
} re_ctx;

static int on_match(unsigned int id, unsigned long long from, unsigned long long to, unsigned int flags,
                    void* ctx) {
  NHB__UNUSED(from);
  NHB__UNUSED(to);
  NHB__UNUSED(flags);
  re_ctx* x = ctx;
  if (id < NHB_MAX_CHECKS && ((x->wanted >> id) & 1u)) *x->seen |= 1u << id;
  /* Non-zero stops the scan: nothing this scan can find is still wanted. */
  return (x->wanted & ~*x->seen) == 0;
}

static int re_flags(const nhb_check* c, unsigned* out) {
  unsigned f = HS_FLAG_SINGLEMATCH;
  for (size_t k = 0; k < c->value_len; k++) {
    switch (c->value[k]) {
      case 'i': f |= HS_FLAG_CASELESS; break;
      case 's': f |= HS_FLAG_DOTALL; break;
      case 'm': f |= HS_FLAG_MULTILINE; break;
      default: return -1;
    }
  }
  *out = f;
  return 0;
}

/* Compiles the checks of `mask` (patterns in set->c, NUL-terminated copies in
 * pat) into one streaming database within the documented bounds. */
static int compile_db(const nhb__chk_set* set, uint32_t mask, char (*pat)[NHB_CHECK_TEXT_MAX + 1],
                      hs_database_t** db, char* err, size_t err_len) {
  const char* exprs[NHB_MAX_CHECKS];
  unsigned flags[NHB_MAX_CHECKS];
  unsigned ids[NHB_MAX_CHECKS];
  unsigned n = 0;
  for (uint32_t i = 0; i < set->n; i++) {
    if (!((mask >> i) & 1u)) continue;
    exprs[n] = pat[i];
    ids[n] = i;
    if (re_flags(&set->c[i], &flags[n]) < 0) {
      if (err != NULL && err_len > 0)
        snprintf(err, err_len, "checks[%u]: a regular expression's flags are i, s and m, not '%.*s'", i,
                 (int)set->c[i].value_len, set->c[i].value);
      return NHB_EINVAL;
    }
    n++;
  }
  if (n == 0) return 0;
  hs_compile_error_t* ce = NULL;
  if (hs_compile_multi(exprs, flags, ids, n, HS_MODE_STREAM, NULL, db, &ce) != HS_SUCCESS) {
    /* Named by the check, with Vectorscan's own reason. */
    int at = ce != NULL && ce->expression >= 0 && (unsigned)ce->expression < n ? (int)ids[ce->expression] : -1;
    const char* why = ce != NULL && ce->message != NULL ? ce->message : "cannot compile";
    if (err != NULL && err_len > 0) {
      if (at >= 0)
        snprintf(err, err_len, "checks[%d]: Vectorscan refused the regular expression: %s", at, why);
      else
        snprintf(err, err_len, "checks: Vectorscan refused the regular expressions: %s", why);
    }
    if (ce != NULL) hs_free_compile_error(ce);
    *db = NULL;
    return NHB_EINVAL;
  }
  size_t db_size = 0, stream_size = 0;
  if (hs_database_size(*db, &db_size) != HS_SUCCESS || hs_stream_size(*db, &stream_size) != HS_SUCCESS)
    return re_error(err, err_len, -1, "Vectorscan cannot size the compiled expressions");
  if (db_size > NHB_CHECK_RE_DB_MAX || stream_size > NHB_CHECK_RE_STREAM_MAX) {
    if (err != NULL && err_len > 0)
      snprintf(err, err_len,
               "checks: the regular expressions compile to %zu bytes with %zu bytes of state per connection, "
               "over the bounds (%u and %u): simplify them",
               db_size, stream_size, NHB_CHECK_RE_DB_MAX, NHB_CHECK_RE_STREAM_MAX);
    return NHB_EINVAL;
  }
  return 0;
}

/* ---- the bounded compile ------------------------------------------------------
 *
 * The child compiles both databases as the run would, then writes one reply:
 * its status, its error text and the two serialised databases, each with its
 * length. The parent reads it as it comes (a pipe holds 64 KiB, a database up
 * to NHB_CHECK_RE_DB_MAX), reaps the child and deserialises. A child that
 * ends without a whole reply was stopped by a bound: SIGXCPU or SIGKILL past
 * the CPU limit, anything else past the memory limit (Vectorscan reports a
 * failed allocation as an error, which the reply carries). The parent gives
 * the child RE_WALL_S of wall time as well, for a machine so loaded that the
 * CPU seconds come slowly. */

#define RE_WALL_S 120

typedef struct re_reply {
  int32_t r;
  uint32_t err_len;
  uint64_t len[2]; /* body, headers; 0 without */
} re_reply;

static int compile_both(const nhb__chk_set* set, char (*pat)[NHB_CHECK_TEXT_MAX + 1], hs_database_t** db,
                        char* err, size_t err_len) {
  int r = compile_db(set, set->body_re_mask, pat, &db[0], err, err_len);
  if (r == 0) r = compile_db(set, set->hdr_re_mask, pat, &db[1], err, err_len);
  return r;
}

static int write_all(int fd, const void* buf, size_t len) {
  const char* p = buf;
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

/* The child's side: never returns. */
static void compile_child(int fd, const nhb__chk_set* set, char (*pat)[NHB_CHECK_TEXT_MAX + 1]) {
  struct rlimit cpu = {NHB_CHECK_RE_CPU_S, NHB_CHECK_RE_CPU_S + 1};
  setrlimit(RLIMIT_CPU, &cpu);
  /* Above what the process already maps (the interpreter, the run's tables). */
  long pages = 0;
  FILE* f = fopen("/proc/self/statm", "r");
  if (f != NULL) {
    if (fscanf(f, "%ld", &pages) != 1) pages = 0;
    fclose(f);
  }
  if (pages > 0) {
    struct rlimit as;
    as.rlim_cur = as.rlim_max = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + NHB_CHECK_RE_MEM_MAX;
    setrlimit(RLIMIT_AS, &as);
  }
  hs_database_t* db[2] = {NULL, NULL};
  char* ser[2] = {NULL, NULL};
  char err[512] = "";
  re_reply rep;
  memset(&rep, 0, sizeof(rep));
  rep.r = compile_both(set, pat, db, err, sizeof(err));
  for (int k = 0; k < 2 && rep.r == 0; k++) {
    size_t len = 0;
    if (db[k] == NULL) continue;
    if (hs_serialize_database(db[k], &ser[k], &len) != HS_SUCCESS) {
      rep.r = NHB_ENOMEM;
      snprintf(err, sizeof(err), "checks: Vectorscan cannot serialise the compiled expressions");
    }
    rep.len[k] = len;
  }
  if (rep.r != 0) rep.len[0] = rep.len[1] = 0;
  rep.err_len = (uint32_t)strlen(err);
  int bad = write_all(fd, &rep, sizeof(rep)) < 0 || write_all(fd, err, rep.err_len) < 0;
  for (int k = 0; k < 2 && !bad; k++)
    if (rep.len[k] != 0) bad = write_all(fd, ser[k], rep.len[k]) < 0;
  _exit(bad ? 3 : 0);
}

/* Reads len bytes by the deadline (CLOCK_MONOTONIC ns); 0, or -1 at the end
 * of the pipe, an error or the deadline. */
static int read_all(int fd, void* buf, size_t len, uint64_t deadline) {
  char* p = buf;
  while (len > 0) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    if (now >= deadline) return -1;
    struct pollfd pfd = {fd, POLLIN, 0};
    int ms = (int)((deadline - now) / 1000000u) + 1;
    int pr = poll(&pfd, 1, ms);
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) return -1;
    ssize_t n = read(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

static int compile_bounded(const nhb__chk_set* set, char (*pat)[NHB_CHECK_TEXT_MAX + 1], hs_database_t** db,
                           char* err, size_t err_len) {
  int fds[2];
  /* Close-on-exec: a process another thread starts meanwhile must not hold
   * the write end, or a child stopped by a bound would not end the read. */
  if (pipe2(fds, O_CLOEXEC) != 0) return re_error(err, err_len, -1, "regular expressions: cannot open a pipe to compile them");
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return re_error(err, err_len, -1, "regular expressions: cannot start the process that compiles them");
  }
  if (pid == 0) {
    close(fds[0]);
    compile_child(fds[1], set, pat);
  }
  close(fds[1]);
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t deadline = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec + RE_WALL_S * 1000000000ull;
  re_reply rep;
  char why[512];
  char* buf[2] = {NULL, NULL};
  int whole = read_all(fds[0], &rep, sizeof(rep), deadline) == 0 && rep.err_len < sizeof(why) &&
              rep.len[0] <= NHB_CHECK_RE_DB_MAX * 4ull && rep.len[1] <= NHB_CHECK_RE_DB_MAX * 4ull &&
              read_all(fds[0], why, rep.err_len, deadline) == 0;
  for (int k = 0; k < 2 && whole; k++) {
    if (rep.len[k] == 0) continue;
    buf[k] = malloc(rep.len[k]);
    whole = buf[k] != NULL && read_all(fds[0], buf[k], rep.len[k], deadline) == 0;
  }
  close(fds[0]);
  if (!whole) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  int r = 0;
  if (!whole) {
    int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    if (err != NULL && err_len > 0) {
      if (sig == SIGXCPU || sig == SIGKILL)
        snprintf(err, err_len,
                 "checks: compiling the regular expressions took over %u s of CPU (or %d s in all): "
                 "simplify them (fewer or smaller bounded repeats and alternations)",
                 NHB_CHECK_RE_CPU_S, RE_WALL_S);
      else
        snprintf(err, err_len,
                 "checks: compiling the regular expressions needed over %llu MiB of memory "
                 "(the compiler ended %s %d): simplify them",
                 (unsigned long long)(NHB_CHECK_RE_MEM_MAX >> 20), sig != 0 ? "by signal" : "with status",
                 sig != 0 ? sig : WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
    r = NHB_EINVAL;
  } else if (rep.r != 0) {
    why[rep.err_len] = '\0';
    if (err != NULL && err_len > 0) snprintf(err, err_len, "%s", why);
    r = rep.r;
  } else {
    for (int k = 0; k < 2 && r == 0; k++) {
      if (buf[k] != NULL && hs_deserialize_database(buf[k], rep.len[k], &db[k]) != HS_SUCCESS)
        r = re_error(err, err_len, -1, "Vectorscan cannot load the compiled expressions");
    }
  }
  free(buf[0]);
  free(buf[1]);
  return r;
}

int nhb__chk_re_init(nhb__chk_set* set, int nworkers, char* err, size_t err_len) {
  set->re = NULL;
  if ((set->body_re_mask | set->hdr_re_mask) == 0) return 0;
  if (nworkers < 1) nworkers = 1;
  if (hs_valid_platform() != HS_SUCCESS)
    return re_error(err, err_len, -1, "regular expressions: this CPU lacks what Vectorscan needs (SSE4.2)");
  /* NUL-terminated copies for the compiler, checked for a NUL within. */
  char(*pat)[NHB_CHECK_TEXT_MAX + 1] = calloc(NHB_MAX_CHECKS, sizeof(*pat));
  nhb__chk_re* re = calloc(1, sizeof(*re) + (size_t)nworkers * sizeof(hs_scratch_t*));
  int r = NHB_ENOMEM;
  if (pat == NULL || re == NULL) goto out;
  set->re = re;
  re->nworkers = nworkers;
  for (uint32_t i = 0; i < set->n; i++) {
    const nhb_check* c = &set->c[i];
    if (!RE_IS(c->kind)) continue;
    if (memchr(c->text, '\0', c->text_len) != NULL) {
      r = re_error(err, err_len, (int)i, "a regular expression holds a NUL byte: write it \\x00");
      goto out;
    }
    memcpy(pat[i], c->text, c->text_len);
  }
  hs_database_t* db[2] = {NULL, NULL};
  r = compile_bounded(set, pat, db, err, err_len);
  re->body = db[0];
  re->hdr = db[1];
  if (r < 0) goto out;
  hs_scratch_t* proto = NULL;
  r = NHB_ENOMEM;
  if (re->body != NULL && hs_alloc_scratch(re->body, &proto) != HS_SUCCESS) goto out_proto;
  if (re->hdr != NULL && hs_alloc_scratch(re->hdr, &proto) != HS_SUCCESS) goto out_proto;
  for (int w = 0; w < nworkers; w++)
    if (hs_clone_scratch(proto, &re->scratch[w]) != HS_SUCCESS) goto out_proto;
  r = 0;
out_proto:
  if (proto != NULL) hs_free_scratch(proto);
out:
  free(pat);
  if (r < 0 && set->re == NULL) free(re);
  return r;
}

void nhb__chk_re_free(nhb__chk_set* set) {
  nhb__chk_re* re = set->re;
  if (re == NULL) return;
  for (int w = 0; w < re->nworkers; w++)
    if (re->scratch[w] != NULL) hs_free_scratch(re->scratch[w]);
  if (re->body != NULL) hs_free_database(re->body);
  if (re->hdr != NULL) hs_free_database(re->hdr);
  free(re);
  set->re = NULL;
}

int nhb__chk_re_state_new(const nhb__chk_set* set, nhb__chk_state* st, int worker) {
  const nhb__chk_re* re = set->re;
  if (re == NULL) return 0;
  if (worker < 0 || worker >= re->nworkers) return NHB_EINVAL;
  nhb__chk_re_state* rs = calloc(1, sizeof(*rs));
  if (rs == NULL) return NHB_ENOMEM;
  st->re = rs;
  rs->scratch = re->scratch[worker];
  if (re->body != NULL && hs_open_stream(re->body, 0, &rs->body) != HS_SUCCESS) return NHB_ENOMEM;
  if (re->hdr != NULL && hs_open_stream(re->hdr, 0, &rs->hdr) != HS_SUCCESS) return NHB_ENOMEM;
  return 0;
}

void nhb__chk_re_state_free(nhb__chk_state* st) {
  nhb__chk_re_state* rs = st->re;
  if (rs == NULL) return;
  /* No scratch: whatever the streams would still report is dropped. */
  if (rs->body != NULL) hs_close_stream(rs->body, NULL, NULL, NULL);
  if (rs->hdr != NULL) hs_close_stream(rs->hdr, NULL, NULL, NULL);
  free(rs);
  st->re = NULL;
}

void nhb__chk_re_begin(nhb__chk_state* st) {
  /* A response cut short (a reset, a timeout) left its streams mid-way. */
  nhb__chk_re_state* rs = st->re;
  if (rs->body != NULL) hs_reset_stream(rs->body, 0, NULL, NULL, NULL);
  if (rs->hdr != NULL) hs_reset_stream(rs->hdr, 0, NULL, NULL, NULL);
  rs->blanks = 0;
}

/* Scans len bytes in pieces that fit an unsigned int. A scan that the
 * callback stopped (HS_SCAN_TERMINATED) leaves the stream terminated until
 * its next reset; the callers' masks keep it from being scanned again. */
static void scan(hs_stream_t* s, hs_scratch_t* scratch, re_ctx* x, const char* at, size_t len) {
  while (len > 0) {
    unsigned piece = len > (1u << 30) ? (1u << 30) : (unsigned)len;
    if (hs_scan_stream(s, at, piece, 0, scratch, on_match, x) != HS_SUCCESS) return;
    at += piece;
    len -= piece;
  }
}

void nhb__chk_re_header(const nhb__chk_set* set, nhb__chk_state* st, const char* at, size_t len) {
  nhb__chk_re_state* rs = st->re;
  if (rs == NULL || rs->hdr == NULL) return;
  re_ctx x = {&st->seen, st->active & set->hdr_re_mask};
  size_t keep = len;
  while (keep > 0 && (at[keep - 1] == ' ' || at[keep - 1] == '\t')) keep--;
  if (keep > 0) {
    /* The blanks held back were inside the value after all. */
    if (rs->blanks > 0) scan(rs->hdr, rs->scratch, &x, rs->blank, rs->blanks);
    rs->blanks = 0;
    scan(rs->hdr, rs->scratch, &x, at, keep);
  }
  size_t more = len - keep;
  if (more == 0) return;
  if (rs->blanks + more > RE_BLANKS_MAX) {
    /* Only the last RE_BLANKS_MAX blanks wait; the ones before are scanned, oldest first. */
    size_t excess = rs->blanks + more - RE_BLANKS_MAX;
    size_t old = excess < rs->blanks ? excess : rs->blanks;
    if (old > 0) {
      scan(rs->hdr, rs->scratch, &x, rs->blank, old);
      memmove(rs->blank, rs->blank + old, rs->blanks - old);
      rs->blanks -= (uint32_t)old;
    }
    if (excess > old) {
      scan(rs->hdr, rs->scratch, &x, at + keep, excess - old);
      keep += excess - old;
      more -= excess - old;
    }
  }
  memcpy(rs->blank + rs->blanks, at + keep, more);
  rs->blanks += (uint32_t)more;
}

void nhb__chk_re_header_end(const nhb__chk_set* set, nhb__chk_state* st) {
  nhb__chk_re_state* rs = st->re;
  if (rs == NULL || rs->hdr == NULL) return;
  /* Reports the matches that needed the value's end, and readies the
   * stream for the next value. */
  re_ctx x = {&st->seen, st->active & set->hdr_re_mask & ~st->seen};
  rs->blanks = 0;
  hs_reset_stream(rs->hdr, 0, x.wanted != 0 ? rs->scratch : NULL, x.wanted != 0 ? on_match : NULL, &x);
}

void nhb__chk_re_body(const nhb__chk_set* set, nhb__chk_state* st, const char* at, size_t len) {
  nhb__chk_re_state* rs = st->re;
  if (rs == NULL || rs->body == NULL) return;
  re_ctx x = {&st->seen, set->body_re_mask};
  scan(rs->body, rs->scratch, &x, at, len);
}

void nhb__chk_re_body_end(const nhb__chk_set* set, nhb__chk_state* st) {
  nhb__chk_re_state* rs = st->re;
  if (rs == NULL || rs->body == NULL) return;
  re_ctx x = {&st->seen, set->body_re_mask & ~st->seen};
  hs_reset_stream(rs->body, 0, rs->scratch, on_match, &x);
}

#else /* built without Vectorscan */

int nhb__chk_re_init(nhb__chk_set* set, int nworkers, char* err, size_t err_len) {
  NHB__UNUSED(nworkers);
  set->re = NULL;
  for (uint32_t i = 0; i < set->n; i++)
    if (RE_IS(set->c[i].kind))
      return re_error(err, err_len, (int)i,
                      "regular expressions: nhbench was built without Vectorscan (install libvectorscan-dev and "
                      "rebuild)");
  return 0;
}

void nhb__chk_re_free(nhb__chk_set* set) { set->re = NULL; }
int nhb__chk_re_state_new(const nhb__chk_set* set, nhb__chk_state* st, int worker) {
  NHB__UNUSED(set);
  NHB__UNUSED(st);
  NHB__UNUSED(worker);
  return 0;
}
void nhb__chk_re_state_free(nhb__chk_state* st) { st->re = NULL; }
void nhb__chk_re_begin(nhb__chk_state* st) { NHB__UNUSED(st); }
void nhb__chk_re_header(const nhb__chk_set* set, nhb__chk_state* st, const char* at, size_t len) {
  NHB__UNUSED(set);
  NHB__UNUSED(st);
  NHB__UNUSED(at);
  NHB__UNUSED(len);
}
void nhb__chk_re_header_end(const nhb__chk_set* set, nhb__chk_state* st) {
  NHB__UNUSED(set);
  NHB__UNUSED(st);
}
void nhb__chk_re_body(const nhb__chk_set* set, nhb__chk_state* st, const char* at, size_t len) {
  NHB__UNUSED(set);
  NHB__UNUSED(st);
  NHB__UNUSED(at);
  NHB__UNUSED(len);
}
void nhb__chk_re_body_end(const nhb__chk_set* set, nhb__chk_state* st) {
  NHB__UNUSED(set);
  NHB__UNUSED(st);
}

#endif
