/* client.h: the load client's internal structures.
 *
 * One worker is one OS thread with its own uv_loop, pinned to one CPU. It owns
 * its connections, its pending-request queue, its counters and histograms;
 * nothing on the hot path is shared with other workers. The run merges the
 * workers' statistics after they have all stopped.
 *
 * The layers, from the bottom up:
 *   transport (transport_tcp.c; TLS later) moves bytes,
 *   session   (session_h1.c; HTTP/2 later) turns requests and responses into bytes,
 *   pool      (pool.c) hands released requests to connections,
 *   sequencer (sequencer.c) releases requests on the schedule,
 *   client    (client.c) runs workers, evaluates predicates, merges statistics.
 */
#ifndef NHB_CLIENT_H
#define NHB_CLIENT_H

#include <llhttp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <uv.h>

#include "internal.h"

typedef struct nhb__worker nhb__worker;
typedef struct nhb__conn nhb__conn;

/* One request's timestamps, all CLOCK_MONOTONIC ns. */
typedef struct nhb__request {
  uint64_t scheduled_ns; /* when the schedule wanted it released */
  uint64_t release_ns;   /* when the sequencer actually released it */
  uint64_t send_ns;      /* when it was handed to a connection */
} nhb__request;

/* The transport moves bytes for a connection. TCP passes them through; TLS
 * (a later issue) will encrypt and run its handshake through the same calls. */
typedef struct nhb__transport_vtable {
  const char* name;
  /* The TCP connection is up. The transport calls nhb__conn_ready() once
   * plaintext can flow (at once for TCP, after the handshake for TLS). */
  void (*on_connected)(nhb__conn* c);
  /* Bytes arrived from the socket; plaintext goes to c->session->on_data.
   * Returns 0, or a negative code to close the connection. */
  int (*on_read)(nhb__conn* c, const char* data, size_t len);
  /* Sends plaintext that stays valid until written (the run's request bytes). */
  int (*write)(nhb__conn* c, const char* data, size_t len);
} nhb__transport_vtable;

/* The protocol session turns requests into bytes and bytes into responses.
 * It reports back through nhb__conn_response() and nhb__conn_fail(). */
typedef struct nhb__session_vtable {
  const char* name;
  /* A new connection is ready: reset per-connection protocol state. */
  void (*reset)(nhb__conn* c);
  /* How many more requests this connection can take now. */
  unsigned (*capacity)(const nhb__conn* c);
  /* Sends the run's request on this connection. */
  int (*send)(nhb__conn* c);
  /* Plaintext from the transport. Returns 0, or a negative code when the
   * peer broke the protocol (the connection is then closed). */
  int (*on_data)(nhb__conn* c, const char* data, size_t len);
  /* The peer closed its side: finishes a close-delimited response. */
  int (*on_eof)(nhb__conn* c);
} nhb__session_vtable;

typedef enum {
  NHB__CX_DISCONNECTED = 0, /* slot free, handle closed */
  NHB__CX_CONNECTING,
  NHB__CX_IDLE,    /* connected, no request in flight */
  NHB__CX_BUSY,    /* a request in flight */
  NHB__CX_CLOSING  /* uv_close() called, waiting for the close callback */
} nhb__cx_state;

#define NHB__READ_BUFFER_SIZE 65536

struct nhb__conn {
  uv_tcp_t tcp; /* first member: the handle's pointer is the connection's */
  uv_connect_t connect_req;
  uv_write_t write_req;
  nhb__worker* worker;
  const nhb__transport_vtable* transport;
  const nhb__session_vtable* session;
  nhb__cx_state state;
  int write_pending; /* a uv_write is outstanding */
  int keep_alive;
  uint64_t connect_start_ns;
  uint64_t requests_on_connection;
  nhb__request rq; /* HTTP/1.1: one request in flight per connection */
  /* HTTP/1.1 response parsing state. */
  llhttp_t parser;
  uint64_t header_bytes;
  uint64_t body_bytes;
  int response_done;
  char* read_buffer; /* NHB__READ_BUFFER_SIZE bytes, allocated with the pool */
};

struct nhb__worker {
  nhb_run* run;
  int index;
  int cpu;
  uv_loop_t loop;
  pthread_t thread;
  uv_async_t wakeup;     /* stop requests from other threads */
  uv_timer_t housekeeping; /* 10 ms: publish progress, time-outs, drain */
  /* Sequencer. */
  uv_poll_t release_poll; /* NHB_IDLE_POLL: watches release_fd */
  uv_idle_t release_spin; /* NHB_IDLE_SPIN: runs every loop iteration */
  uv_timer_t release_sleep; /* NHB_IDLE_SLEEP: millisecond timer */
  uv_prepare_t release_prepare; /* NHB_IDLE_POLL: programs release_fd */
  uv_check_t release_check; /* releases what fell due during I/O */
  int release_fd;
  uint64_t next_due_ns;        /* the next release's due time; 0 = none wanted */
  uint64_t want_deadline_ns;   /* NHB_IDLE_POLL: when the timerfd should fire */
  uint64_t timer_deadline_ns;  /* NHB_IDLE_POLL: what it is programmed for; 0 = fired */
  uint64_t start_ns;    /* scheduled time of this worker's first release */
  uint64_t end_ns;      /* no release is scheduled at or after this; UINT64_MAX = none */
  double interval_ns;   /* between releases; 0 = closed loop at max rate */
  uint64_t next_index;  /* index of the next release on the schedule */
  uint64_t released;    /* releases made (sent, queued or dropped) */
  int blocked;          /* closed loop: the next release found no capacity */
  uint64_t blocked_since_ns;
  /* Pool. */
  nhb__conn* conns;
  uint32_t nconns;
  nhb__conn** idle;     /* stack of idle connections: most recently used first */
  uint32_t nidle;
  nhb__conn** free_slots; /* stack of disconnected slots */
  uint32_t nfree;
  nhb__request* pending; /* ring buffer of queued requests */
  uint32_t pending_cap, pending_head, pending_len;
  uint32_t in_flight;   /* requests on a connection or waiting for one */
  /* Life cycle. */
  int stopping;         /* no more releases */
  int finishing;        /* handles are being closed */
  uint64_t drain_deadline_ns;
  uint64_t last_timeout_scan_ns;
  /* Statistics, touched by this thread only. */
  nhb_stats stats;
  /* Counters copied out every 10 ms for progress and predicates. */
  _Atomic uint64_t published[NHB_CTR_COUNT];
  atomic_int done;
  int first_error; /* first connection/protocol error code, 0 if none */
};

struct nhb_run {
  nhb_client_config config;
  int* cpus;
  nhb__worker* workers;
  int nworkers;
  pthread_t controller;
  pthread_mutex_t lock;
  pthread_cond_t finished_cond;
  int started;
  int finished;
  atomic_int stop_requested;
  uint64_t t0_ns;          /* first scheduled release, monotonic */
  uint64_t t0_realtime_ns; /* the same instant on the wall clock */
  uint64_t start_call_ns;
  nhb_stats global;
  nhb_end_reason_t end_reason;
  int end_counter;
  uint64_t failed_predicates;
  char first_error[256];
};

extern const nhb__transport_vtable nhb__transport_tcp;
extern const nhb__session_vtable nhb__session_h1;

/* pool.c */
int nhb__pool_init(nhb__worker* w);
void nhb__pool_free(nhb__worker* w);
void nhb__pool_prefetch(nhb__worker* w);
/* Hands a released request to a connection, starts a connection for it or
 * queues it. Returns 1 if taken, 0 if there is no capacity. */
int nhb__pool_dispatch(nhb__worker* w, uint64_t scheduled_ns, uint64_t release_ns);
/* Closed loop at max rate: can a request go out at once? */
int nhb__pool_has_connection(const nhb__worker* w);
void nhb__pool_scan_timeouts(nhb__worker* w, uint64_t now);
void nhb__pool_close_all(nhb__worker* w);
/* Called by the transport when plaintext can flow. */
void nhb__conn_ready(nhb__conn* c);
/* Called by the session when a response ended. */
void nhb__conn_response(nhb__conn* c, int status);
/* Closes a connection after an error; fails its request if one is in flight. */
void nhb__conn_fail(nhb__conn* c, int err, nhb_counter_t reason);
void nhb__worker_record_error(nhb__worker* w, int err);

/* sequencer.c */
int nhb__sequencer_init(nhb__worker* w);
/* Releases every request that is due and arms the wake-up for the next one. */
void nhb__sequencer_run(nhb__worker* w);
void nhb__sequencer_close(nhb__worker* w);
/* Stops releasing now (a stop request or a predicate) and drains in-flight
 * requests for at most drain_ns. */
void nhb__sequencer_stop_now(nhb__worker* w, uint64_t drain_ns);

/* client.c */
void nhb__worker_maybe_finish(nhb__worker* w);

#endif /* NHB_CLIENT_H */
