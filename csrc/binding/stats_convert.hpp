// stats_convert.hpp: C statistics -> the Python dicts of the binding contract.
#pragma once

#include "register.hpp"

extern "C" {
#include "nhb.h"
}

// `compact`: the non-zero buckets as "buckets", bytes of native uint64 (index,
// count) pairs, instead of "counts", a list of (index, count) tuples.
py::dict hist_to_dict(const nhb_hist* h, bool compact = false);
py::dict stream_to_dict(const nhb_stream* s);
py::dict stats_to_dict(const nhb_stats* st, bool compact = false);
