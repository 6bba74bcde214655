/* pool.c: a worker's connections and the requests waiting for them.
 *
 * Capacity comes from three places, tried in order: an idle connection (the
 * most recently used first, as Nighthawk's default "mru" reuse strategy), a
 * disconnected slot that can start a new connection carrying the request, and
 * the pending queue (bounded by --max-pending-requests). When all three are
 * exhausted the sequencer either blocks (closed loop) or drops the release
 * (open loop). Nothing here allocates after nhb__pool_init().
 */
#include <stdlib.h>
#include <string.h>

#include "client.h"

static void conn_on_close(uv_handle_t* handle);
static void conn_send(nhb__conn* c, const nhb__request* rq);

void nhb__worker_record_error(nhb__worker* w, int err) {
  if (w->first_error == 0 && err < 0) w->first_error = err;
}

int nhb__pool_init(nhb__worker* w) {
  const nhb_client_config* cfg = &w->run->config;
  w->nconns = cfg->connections;
  w->conns = calloc(w->nconns, sizeof(nhb__conn));
  w->idle = calloc(w->nconns, sizeof(nhb__conn*));
  w->free_slots = calloc(w->nconns, sizeof(nhb__conn*));
  w->pending_cap = cfg->max_pending_requests;
  w->pending = calloc(w->pending_cap ? w->pending_cap : 1, sizeof(nhb__request));
  char* buffers = malloc((size_t)w->nconns * NHB__READ_BUFFER_SIZE);
  if (!w->conns || !w->idle || !w->free_slots || !w->pending || !buffers) {
    free(buffers);
    return NHB_ENOMEM;
  }
  /* Slots are stacked in reverse so that connection 0 is used first. */
  for (uint32_t i = 0; i < w->nconns; i++) {
    nhb__conn* c = &w->conns[i];
    c->worker = w;
    c->transport = &nhb__transport_tcp;
    c->session = &nhb__session_h1;
    c->state = NHB__CX_DISCONNECTED;
    c->read_buffer = buffers + (size_t)i * NHB__READ_BUFFER_SIZE;
    w->free_slots[w->nconns - 1 - i] = c;
  }
  w->nfree = w->nconns;
  return 0;
}

void nhb__pool_free(nhb__worker* w) {
  if (w->conns) free(w->conns[0].read_buffer);
  free(w->conns);
  free(w->idle);
  free(w->free_slots);
  free(w->pending);
  w->conns = NULL;
  w->idle = w->free_slots = NULL;
  w->pending = NULL;
}

/* ---- pending queue (a ring buffer of released requests) ---------------- */

static int pending_push(nhb__worker* w, const nhb__request* rq) {
  if (w->pending_len >= w->pending_cap) return 0;
  uint32_t tail = (w->pending_head + w->pending_len) % w->pending_cap;
  w->pending[tail] = *rq;
  w->pending_len++;
  w->stats.counters[NHB_CTR_UPSTREAM_RQ_PENDING_TOTAL]++;
  return 1;
}

static int pending_pop(nhb__worker* w, nhb__request* out) {
  if (w->pending_len == 0) return 0;
  *out = w->pending[w->pending_head];
  w->pending_head = (w->pending_head + 1) % w->pending_cap;
  w->pending_len--;
  return 1;
}

/* ---- connection life cycle ---------------------------------------------- */

static void conn_alloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf) {
  NHB__UNUSED(suggested);
  nhb__conn* c = (nhb__conn*)handle->data;
  buf->base = c->read_buffer;
  buf->len = NHB__READ_BUFFER_SIZE;
}

static void conn_close(nhb__conn* c) {
  if (c->state == NHB__CX_DISCONNECTED || c->state == NHB__CX_CLOSING) return;
  if (c->state == NHB__CX_IDLE) {
    /* Take it off the idle stack; the stack is small and closing is rare. */
    nhb__worker* w = c->worker;
    for (uint32_t i = 0; i < w->nidle; i++) {
      if (w->idle[i] == c) {
        memmove(&w->idle[i], &w->idle[i + 1], (w->nidle - i - 1) * sizeof(nhb__conn*));
        w->nidle--;
        break;
      }
    }
  }
  c->state = NHB__CX_CLOSING;
  uv_read_stop((uv_stream_t*)&c->tcp);
  uv_close((uv_handle_t*)&c->tcp, conn_on_close);
}

static int conn_has_request(const nhb__conn* c) {
  return c->state == NHB__CX_BUSY || (c->state == NHB__CX_CONNECTING && c->rq.release_ns != 0);
}

void nhb__conn_fail(nhb__conn* c, int err, nhb_counter_t reason) {
  nhb__worker* w = c->worker;
  uint64_t* ctr = w->stats.counters;
  nhb__worker_record_error(w, err);
  if (c->state == NHB__CX_CONNECTING) {
    ctr[err == UV_ETIMEDOUT ? NHB_CTR_UPSTREAM_CX_CONNECT_TIMEOUT : NHB_CTR_UPSTREAM_CX_CONNECT_FAIL]++;
  }
  if (conn_has_request(c)) {
    /* The request ends as an error: it counts against its reason and in the
     * initiation-to-completion statistic, never silently disappears. */
    ctr[reason]++;
    nhb_hist_record(w->stats.hists[NHB_HIST_SEQUENCER_CALLBACK], nhb__now_ns() - c->rq.release_ns);
    w->in_flight--;
  }
  c->rq.release_ns = 0;
  conn_close(c);
  nhb__worker_maybe_finish(w);
}

static void conn_on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
  nhb__conn* c = (nhb__conn*)stream->data;
  nhb__worker* w = c->worker;
  if (nread > 0) {
    w->stats.counters[NHB_CTR_UPSTREAM_CX_RX_BYTES_TOTAL] += (uint64_t)nread;
    int r = c->transport->on_read(c, buf->base, (size_t)nread);
    if (r < 0 && c->state != NHB__CX_CLOSING && c->state != NHB__CX_DISCONNECTED) {
      w->stats.counters[NHB_CTR_UPSTREAM_CX_PROTOCOL_ERROR]++;
      nhb__conn_fail(c, r, NHB_CTR_STREAM_RESETS);
    }
    return;
  }
  if (nread == 0) return;
  w->stats.counters[NHB_CTR_UPSTREAM_CX_DESTROY_REMOTE]++;
  if (nread == UV_EOF && c->state == NHB__CX_BUSY) {
    /* A close-delimited response ends here; anything else is a reset. */
    c->session->on_eof(c);
    if (c->state == NHB__CX_BUSY) nhb__conn_fail(c, UV_ECONNRESET, NHB_CTR_STREAM_RESETS);
    return;
  }
  if (c->state == NHB__CX_BUSY) {
    nhb__conn_fail(c, (int)nread, NHB_CTR_STREAM_RESETS);
  } else {
    conn_close(c);
  }
}

static void conn_on_connect(uv_connect_t* req, int status) {
  nhb__conn* c = (nhb__conn*)req->handle->data;
  if (status == UV_ECANCELED || c->state != NHB__CX_CONNECTING) return;
  if (status < 0) {
    nhb__conn_fail(c, status, NHB_CTR_POOL_CONNECTION_FAILURE);
    return;
  }
  int r = uv_read_start((uv_stream_t*)&c->tcp, conn_alloc, conn_on_read);
  if (r < 0) {
    nhb__conn_fail(c, r, NHB_CTR_POOL_CONNECTION_FAILURE);
    return;
  }
  c->transport->on_connected(c);
}

/* Starts a connection in a free slot; `rq` (may be NULL) rides along and is
 * sent as soon as the connection is ready. */
static void conn_start(nhb__worker* w, nhb__conn* c, const nhb__request* rq) {
  const nhb_client_config* cfg = &w->run->config;
  uint64_t* ctr = w->stats.counters;
  memset(&c->rq, 0, sizeof(c->rq));
  if (rq) c->rq = *rq;
  c->state = NHB__CX_CONNECTING;
  c->requests_on_connection = 0;
  c->write_pending = 0;
  c->connect_start_ns = nhb__now_ns();
  ctr[NHB_CTR_UPSTREAM_CX_TOTAL]++;
  ctr[NHB_CTR_UPSTREAM_CX_HTTP1_TOTAL]++;
  if (rq) w->in_flight++;
  int r = uv_tcp_init(&w->loop, &c->tcp);
  if (r < 0) {
    /* Without a handle there is nothing to close: fail the request here. */
    nhb__worker_record_error(w, r);
    ctr[NHB_CTR_UPSTREAM_CX_CONNECT_FAIL]++;
    if (rq) {
      ctr[NHB_CTR_POOL_CONNECTION_FAILURE]++;
      w->in_flight--;
    }
    c->state = NHB__CX_DISCONNECTED;
    w->free_slots[w->nfree++] = c;
    return;
  }
  c->tcp.data = c;
  uv_tcp_nodelay(&c->tcp, 1);
  r = uv_tcp_connect(&c->connect_req, &c->tcp, (const struct sockaddr*)cfg->addr, conn_on_connect);
  if (r < 0) nhb__conn_fail(c, r, NHB_CTR_POOL_CONNECTION_FAILURE);
}

static void conn_on_close(uv_handle_t* handle) {
  nhb__conn* c = (nhb__conn*)handle->data;
  nhb__worker* w = c->worker;
  c->state = NHB__CX_DISCONNECTED;
  if (w->finishing) return;
  nhb__request rq;
  if (pending_pop(w, &rq)) {
    conn_start(w, c, &rq);
    return;
  }
  w->free_slots[w->nfree++] = c;
  /* A slot came free: a blocked or max-rate sequencer can go on. */
  nhb__sequencer_run(w);
  nhb__worker_maybe_finish(w);
}

/* The connection has nothing in flight: serve the queue or go idle. */
static void conn_idle(nhb__conn* c) {
  nhb__worker* w = c->worker;
  nhb__request rq;
  if (pending_pop(w, &rq)) {
    conn_send(c, &rq);
    return;
  }
  c->state = NHB__CX_IDLE;
  w->idle[w->nidle++] = c;
  nhb__sequencer_run(w);
}

void nhb__conn_ready(nhb__conn* c) {
  c->session->reset(c);
  if (c->rq.release_ns != 0) {
    nhb__request rq = c->rq;
    c->worker->in_flight--; /* conn_send counts it again */
    conn_send(c, &rq);
  } else {
    conn_idle(c);
  }
}

static void conn_send(nhb__conn* c, const nhb__request* rq) {
  nhb__worker* w = c->worker;
  c->rq = *rq;
  c->rq.send_ns = nhb__now_ns();
  c->state = NHB__CX_BUSY;
  c->requests_on_connection++;
  w->in_flight++;
  w->stats.counters[NHB_CTR_UPSTREAM_RQ_TOTAL]++;
  nhb_hist_record(w->stats.hists[NHB_HIST_QUEUE_TO_CONNECT], c->rq.send_ns - c->rq.release_ns);
  int r = c->session->send(c);
  if (r < 0) nhb__conn_fail(c, r, NHB_CTR_STREAM_RESETS);
}

void nhb__conn_response(nhb__conn* c, int status) {
  nhb__worker* w = c->worker;
  nhb_stats* st = &w->stats;
  uint64_t now = nhb__now_ns();
  uint64_t latency = now - c->rq.send_ns;
  int klass = status / 100;
  nhb_counter_t ctr = NHB_CTR_HTTP_XXX;
  nhb_histogram_t hist = NHB_HIST_LATENCY_XXX;
  if (klass >= 1 && klass <= 5) {
    ctr = (nhb_counter_t)(NHB_CTR_HTTP_1XX + klass - 1);
    hist = (nhb_histogram_t)(NHB_HIST_LATENCY_1XX + klass - 1);
  }
  st->counters[ctr]++;
  nhb_hist_record(st->hists[hist], latency);
  nhb_hist_record(st->hists[NHB_HIST_REQUEST_TO_RESPONSE], latency);
  nhb_hist_record(st->hists[NHB_HIST_SCHEDULED_TO_RESPONSE], now - c->rq.scheduled_ns);
  nhb_hist_record(st->hists[NHB_HIST_SEQUENCER_CALLBACK], now - c->rq.release_ns);
  nhb_stream_record(&st->streams[NHB_STREAM_RESPONSE_HEADER_SIZE], c->header_bytes);
  nhb_stream_record(&st->streams[NHB_STREAM_RESPONSE_BODY_SIZE], c->body_bytes);
  w->in_flight--;
  c->rq.release_ns = 0;
  uint64_t max_rq = w->run->config.max_requests_per_connection;
  if (c->keep_alive && !w->finishing && (max_rq == 0 || c->requests_on_connection < max_rq)) {
    conn_idle(c);
  } else {
    conn_close(c);
  }
  nhb__worker_maybe_finish(w);
}

/* ---- what the sequencer and the housekeeping timer call ----------------- */

int nhb__pool_dispatch(nhb__worker* w, uint64_t scheduled_ns, uint64_t release_ns) {
  nhb__request rq = {scheduled_ns, release_ns, 0};
  if (w->nidle > 0) {
    conn_send(w->idle[--w->nidle], &rq);
    return 1;
  }
  if (w->nfree > 0) {
    conn_start(w, w->free_slots[--w->nfree], &rq);
    return 1;
  }
  return pending_push(w, &rq);
}

int nhb__pool_has_connection(const nhb__worker* w) { return w->nidle > 0 || w->nfree > 0; }

void nhb__pool_prefetch(nhb__worker* w) {
  while (w->nfree > 0 && !w->finishing) conn_start(w, w->free_slots[--w->nfree], NULL);
}

void nhb__pool_scan_timeouts(nhb__worker* w, uint64_t now) {
  const nhb_client_config* cfg = &w->run->config;
  for (uint32_t i = 0; i < w->nconns; i++) {
    nhb__conn* c = &w->conns[i];
    if (c->state == NHB__CX_CONNECTING && now - c->connect_start_ns > cfg->connect_timeout_ns) {
      nhb__conn_fail(c, UV_ETIMEDOUT, NHB_CTR_POOL_CONNECTION_FAILURE);
    } else if (c->state == NHB__CX_BUSY && cfg->request_timeout_ns != 0 &&
               now - c->rq.send_ns > cfg->request_timeout_ns) {
      nhb__conn_fail(c, UV_ETIMEDOUT, NHB_CTR_REQUEST_TIMEOUT);
    }
  }
}

void nhb__pool_close_all(nhb__worker* w) {
  /* Whatever is still queued or in flight now will never complete. */
  w->stats.counters[NHB_CTR_UPSTREAM_RQ_CANCELLED] += w->in_flight + w->pending_len;
  w->in_flight = 0;
  w->pending_len = 0;
  w->nidle = 0;
  for (uint32_t i = 0; i < w->nconns; i++) {
    nhb__conn* c = &w->conns[i];
    if (c->state == NHB__CX_CONNECTING || c->state == NHB__CX_IDLE || c->state == NHB__CX_BUSY) {
      c->state = NHB__CX_CLOSING;
      uv_read_stop((uv_stream_t*)&c->tcp);
      uv_close((uv_handle_t*)&c->tcp, conn_on_close);
    }
  }
}
