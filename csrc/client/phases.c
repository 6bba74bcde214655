/* phases.c: the latency phases' per-request recording, folded into the
 * worker's statistics once rather than recorded value by value.
 *
 * A 2xx response's latency goes into three statistics at least (its class's
 * latency, request_to_response and, when the response came in one read after
 * a request the socket took at once, time_to_first_byte), and the phases
 * that are 0 in the common case (request_write, transfer) into two more. Each
 * record is an HDR bucket computation and the updates of a count, the
 * moments and the extremes: done five times per request it was most of what
 * the phases cost a run (docs/benchmarks.md "Latency phases: the hot-path
 * cost"). Histograms add exactly (counts, totals, sums, extremes), so the
 * pool records such a latency once, into one of two worker histograms below
 * chosen by which statistics it belongs to, and counts a transfer of 0
 * (nhb__conn_response in pool.c); nhb__phases_fold adds them to the
 * statistics they stand for when those are next read: at the end of the
 * warm-up and when the worker's loop has ended (client.c), before anything
 * reads the worker's statistics. The result is the one the value-by-value
 * recording gave, count for count; only the order in which the floating
 * sums were added differs (as between workers merged in any order).
 *
 * The same holds for two statistics that are not phases but were recorded
 * beside them, scheduled_to_response and sequencer.callback: a release made
 * when it was scheduled (a closed loop, --rps 0) gives them one value, which
 * is recorded once too. It is not what the phases cost, but it is what a
 * run pays per response for its statistics, and it pays for them
 * (docs/benchmarks.md has the figures of each).
 */
#include <stdlib.h>

#include "client/client.h"

int nhb__phases_alloc(nhb__worker* w) {
  w->ph_whole = malloc(sizeof(nhb_hist));
  w->ph_ok = malloc(sizeof(nhb_hist));
  w->ph_same = malloc(sizeof(nhb_hist));
  if (w->ph_whole == NULL || w->ph_ok == NULL || w->ph_same == NULL) return NHB_ENOMEM;
  nhb_hist_init(w->ph_whole);
  nhb_hist_init(w->ph_ok);
  nhb_hist_init(w->ph_same);
  w->ph_transfer0 = 0;
  return 0;
}

void nhb__phases_free(nhb__worker* w) {
  free(w->ph_whole);
  free(w->ph_ok);
  free(w->ph_same);
  w->ph_whole = w->ph_ok = w->ph_same = NULL;
}

/* n values of 0: the count, bucket 0 and the minimum (the sums and the
 * maximum cannot change). */
static void add_zeros(nhb_hist* h, uint64_t n) {
  h->counts[0] += n;
  h->total += n;
  h->min = 0;
}

void nhb__phases_fold(nhb__worker* w) {
  nhb_stats* st = &w->stats;
  nhb_hist* whole = w->ph_whole;
  nhb_hist* ok = w->ph_ok;
  if (whole != NULL && whole->total != 0) {
    /* Whole latency to the first byte: request_write and transfer 0. */
    nhb_hist_add(st->hists[NHB_HIST_LATENCY_2XX], whole);
    nhb_hist_add(st->hists[NHB_HIST_REQUEST_TO_RESPONSE], whole);
    nhb_hist_add(st->hists[NHB_HIST_TIME_TO_FIRST_BYTE], whole);
    add_zeros(st->hists[NHB_HIST_REQUEST_WRITE], whole->total);
    add_zeros(st->hists[NHB_HIST_TRANSFER], whole->total);
    nhb_hist_init(whole);
  }
  if (ok != NULL && ok->total != 0) {
    nhb_hist_add(st->hists[NHB_HIST_LATENCY_2XX], ok);
    nhb_hist_add(st->hists[NHB_HIST_REQUEST_TO_RESPONSE], ok);
    nhb_hist_init(ok);
  }
  nhb_hist* same = w->ph_same;
  if (same != NULL && same->total != 0) {
    /* Released when scheduled (a closed loop): the two are one value. */
    nhb_hist_add(st->hists[NHB_HIST_SCHEDULED_TO_RESPONSE], same);
    nhb_hist_add(st->hists[NHB_HIST_SEQUENCER_CALLBACK], same);
    nhb_hist_init(same);
  }
  if (w->ph_transfer0 != 0) {
    add_zeros(st->hists[NHB_HIST_TRANSFER], w->ph_transfer0);
    w->ph_transfer0 = 0;
  }
}
