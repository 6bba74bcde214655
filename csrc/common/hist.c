/* hist.c: histograms in the exact HdrHistogram bucket layout.
 *
 * HdrHistogram_c is not packaged anywhere we can install from, so the core
 * records into a counts array laid out exactly as HdrHistogram lays it out for
 * lowest=1, highest=60 s, 3 significant digits, and the Python side hands the
 * array to the `hdrh` package for percentiles, merging and the standard
 * compressed encoding. tests/test_histogram.py proves the layouts agree.
 */
#include <string.h>

#include "nhb.h"

/* unit_magnitude is 0 (lowest trackable value 1), so the sub-bucket mask is
 * sub_bucket_count - 1. */
#define SUB_BUCKET_MASK ((uint64_t)NHB_HIST_SUB_BUCKET_COUNT - 1)
#define SUB_BUCKET_HALF_COUNT (NHB_HIST_SUB_BUCKET_COUNT / 2)

size_t nhb_hist_index(uint64_t value) {
  if (value > NHB_HIST_HIGHEST) value = NHB_HIST_HIGHEST;
  /* The bucket is found from the position of the highest set bit; OR-ing the
   * mask in makes every value below sub_bucket_count land in bucket 0. */
  int pow2ceiling = 64 - __builtin_clzll(value | SUB_BUCKET_MASK);
  int bucket = pow2ceiling - (NHB_HIST_SUB_BUCKET_HALF_COUNT_MAGNITUDE + 1);
  uint64_t sub_bucket = value >> bucket;
  size_t base = (size_t)(bucket + 1) << NHB_HIST_SUB_BUCKET_HALF_COUNT_MAGNITUDE;
  return base + (size_t)sub_bucket - SUB_BUCKET_HALF_COUNT;
}

void nhb_hist_init(nhb_hist* h) {
  memset(h, 0, sizeof(*h));
  h->min = UINT64_MAX;
}

void nhb_hist_record(nhb_hist* h, uint64_t value) {
  if (value > NHB_HIST_HIGHEST) value = NHB_HIST_HIGHEST;
  h->counts[nhb_hist_index(value)]++;
  h->total++;
  if (value < h->min) h->min = value;
  if (value > h->max) h->max = value;
  double v = (double)value;
  h->sum += v;
  h->sumsq += v * v;
}

void nhb_hist_add(nhb_hist* dst, const nhb_hist* src) {
  if (src->total == 0) return;
  for (size_t i = 0; i < NHB_HIST_COUNTS_LEN; i++) dst->counts[i] += src->counts[i];
  dst->total += src->total;
  if (src->min < dst->min) dst->min = src->min;
  if (src->max > dst->max) dst->max = src->max;
  dst->sum += src->sum;
  dst->sumsq += src->sumsq;
}

void nhb_stream_init(nhb_stream* s) {
  memset(s, 0, sizeof(*s));
  s->min = UINT64_MAX;
}

void nhb_stream_record(nhb_stream* s, uint64_t value) {
  s->total++;
  if (value < s->min) s->min = value;
  if (value > s->max) s->max = value;
  double v = (double)value;
  s->sum += v;
  s->sumsq += v * v;
}

void nhb_stream_add(nhb_stream* dst, const nhb_stream* src) {
  if (src->total == 0) return;
  dst->total += src->total;
  if (src->min < dst->min) dst->min = src->min;
  if (src->max > dst->max) dst->max = src->max;
  dst->sum += src->sum;
  dst->sumsq += src->sumsq;
}
