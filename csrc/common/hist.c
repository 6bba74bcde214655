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

uint64_t nhb_hist_bucket_value(size_t index, int highest) {
  /* hdrh's get_value_from_index, then its lowest or highest equivalent value:
   * a bucket's values are [sub << bucket, (sub + 1) << bucket). */
  int bucket = (int)(index >> NHB_HIST_SUB_BUCKET_HALF_COUNT_MAGNITUDE) - 1;
  uint64_t sub = (uint64_t)(index & (SUB_BUCKET_HALF_COUNT - 1)) + SUB_BUCKET_HALF_COUNT;
  if (bucket < 0) {
    sub -= SUB_BUCKET_HALF_COUNT;
    bucket = 0;
  }
  uint64_t low = sub << bucket;
  return highest ? low + ((uint64_t)1 << bucket) - 1 : low;
}

int nhb_hist_percentiles(const uint64_t* pairs, size_t npairs, const double* points,
                         size_t npoints, uint64_t* values, uint64_t* cumulative) {
  uint64_t total = 0;
  for (size_t k = 0; k < npairs; k++) {
    if (pairs[2 * k] >= NHB_HIST_COUNTS_LEN || (k && pairs[2 * k] < pairs[2 * k - 2])) return -1;
    if (__builtin_add_overflow(total, pairs[2 * k + 1], &total)) return 1;
  }
  if (total == 0) return 2;
  size_t reached = 0; /* one past the last pair taken */
  uint64_t sum = 0;
  size_t found = 0;
  for (size_t p = 0; p < npoints; p++) {
    /* hdrh's get_target_count_at_percentile in its own double arithmetic:
     * min(percentile, 100) * total / 100, rounded half up, at least 1. */
    double percent = points[p] * 100.0;
    if (percent > 100.0) percent = 100.0;
    double t = percent * (double)total / 100 + 0.5;
    uint64_t target = t >= 18446744073709551615.0 ? UINT64_MAX : t >= 1.0 ? (uint64_t)t : 1;
    while (sum < target && reached < npairs) {
      if (pairs[2 * reached + 1]) {
        sum += pairs[2 * reached + 1];
        found = (size_t)pairs[2 * reached];
      }
      reached++;
    }
    values[p] = nhb_hist_bucket_value(found, points[p] > 0);
    cumulative[p] = sum;
  }
  return 0;
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
