// register_histogram.cpp: statistic conversion shared by the client binding,
// and a test hook that records values with the C recorder.
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "register.hpp"
#include "stats_convert.hpp"

#include <pybind11/stl.h>

extern "C" {
#include "nhb.h"
}

namespace {

// The sparse (index, count) pairs of several histograms of the core's layout as one:
// counts add bucket by bucket, which is HdrHistogram's merge. In C because a distributed
// run's controller merges every worker's histograms, and 256 workers' pairs (millions of
// Python tuples) took half a second through a Python dict.
py::list merge_sparse(py::handle parts) {
  std::vector<uint64_t> dense(NHB_HIST_COUNTS_LEN, 0);
  size_t low = NHB_HIST_COUNTS_LEN, high = 0;
  py::object outer = py::reinterpret_steal<py::object>(
      PySequence_Fast(parts.ptr(), "histogram_merge: parts must be a sequence"));
  if (!outer) throw py::error_already_set();
  Py_ssize_t n_parts = PySequence_Fast_GET_SIZE(outer.ptr());
  for (Py_ssize_t p = 0; p < n_parts; p++) {
    PyObject* part = PySequence_Fast_GET_ITEM(outer.ptr(), p);
    py::object pairs = py::reinterpret_steal<py::object>(
        PySequence_Fast(part, "histogram_merge: each part must be a sequence of pairs"));
    if (!pairs) throw py::error_already_set();
    Py_ssize_t n = PySequence_Fast_GET_SIZE(pairs.ptr());
    PyObject** items = PySequence_Fast_ITEMS(pairs.ptr());
    for (Py_ssize_t k = 0; k < n; k++) {
      PyObject* pair = items[k];
      PyObject *index_obj, *count_obj;
      if (PyTuple_Check(pair) && PyTuple_GET_SIZE(pair) == 2) {
        index_obj = PyTuple_GET_ITEM(pair, 0);
        count_obj = PyTuple_GET_ITEM(pair, 1);
      } else if (PyList_Check(pair) && PyList_GET_SIZE(pair) == 2) {
        index_obj = PyList_GET_ITEM(pair, 0);
        count_obj = PyList_GET_ITEM(pair, 1);
      } else {
        throw py::type_error("histogram_merge: a bucket is not an (index, count) pair");
      }
      // Any integer (numpy's too, through __index__); a huge one is clamped to the
      // Py_ssize_t range (for a plain int too, whose own conversion would raise
      // OverflowError), then refused below with the same ValueError as any index outside.
      Py_ssize_t index = PyLong_CheckExact(index_obj) ? PyLong_AsSsize_t(index_obj)
                                                      : PyNumber_AsSsize_t(index_obj, nullptr);
      if (index == -1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) throw py::error_already_set();
        PyErr_Clear();
        index = PyNumber_AsSsize_t(index_obj, nullptr);
        if (index == -1 && PyErr_Occurred()) throw py::error_already_set();
      }
      if (index < 0 || static_cast<size_t>(index) >= NHB_HIST_COUNTS_LEN)
        throw py::value_error("histogram_merge: bucket index " + std::to_string(index) +
                              " outside 0.." + std::to_string(NHB_HIST_COUNTS_LEN - 1));
      // An integer of another type (numpy's) through its __index__; a float is refused.
      py::object count_int;
      if (!PyLong_Check(count_obj)) {
        count_int = py::reinterpret_steal<py::object>(PyNumber_Index(count_obj));
        if (!count_int) {
          PyErr_Clear();
          throw py::type_error("histogram_merge: a count is not an int");
        }
        count_obj = count_int.ptr();
      }
      unsigned long long count = PyLong_AsUnsignedLongLong(count_obj);
      if (count == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
        // Negative ints fail here too (OverflowError): one message for both.
        PyErr_Clear();
        throw py::value_error("histogram_merge: a count outside 0..2^64-1");
      }
      if (count == 0) continue;
      size_t i = static_cast<size_t>(index);
      if (__builtin_add_overflow(dense[i], count, &dense[i]))
        throw py::value_error("histogram_merge: a bucket's count overflows 64 bits");
      if (i < low) low = i;
      if (i > high) high = i;
    }
  }
  py::list out;
  for (size_t i = low; i <= high && i < NHB_HIST_COUNTS_LEN; i++)
    if (dense[i]) out.append(py::make_tuple(i, dense[i]));
  return out;
}

}  // namespace

// The non-zero buckets as one bytes object of native uint64 (index, count)
// pairs: a run's result has up to tens of thousands of buckets per histogram,
// and a Python tuple per bucket (with its two ints) was most of the Python
// thread's work in building the result (docs/benchmarks.md "The threads
// besides the workers"). The Python side reads them with array('Q').
static py::bytes packed_buckets(const nhb_hist* h) {
  size_t n = 0;
  if (h->total)
    for (size_t i = 0; i < NHB_HIST_COUNTS_LEN; i++) n += h->counts[i] != 0;
  py::bytes out = py::reinterpret_steal<py::bytes>(
      PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(n * 2 * sizeof(uint64_t))));
  if (!out) throw py::error_already_set();
  uint64_t* w = reinterpret_cast<uint64_t*>(PyBytes_AS_STRING(out.ptr()));
  for (size_t i = 0; n && i < NHB_HIST_COUNTS_LEN; i++)
    if (h->counts[i]) {
      *w++ = i;
      *w++ = h->counts[i];
    }
  return out;
}

// The percentile walk of nhb_hist_percentiles over packed buckets (see there):
// a list of (value, cumulative count), one per point, [] for no samples.
static py::list percentiles_of_packed(const py::bytes& buckets, const std::vector<double>& points) {
  char* data = nullptr;
  Py_ssize_t size = 0;
  if (PyBytes_AsStringAndSize(buckets.ptr(), &data, &size) != 0) throw py::error_already_set();
  if (size % (2 * sizeof(uint64_t)) != 0)
    throw py::value_error("histogram_percentiles: buckets is not whole (index, count) pairs");
  for (size_t p = 0; p < points.size(); p++) {
    if (std::isnan(points[p])) throw py::value_error("histogram_percentiles: a point is NaN");
    if (p && points[p] < points[p - 1])
      throw py::value_error("histogram_percentiles: the points are not in ascending order");
  }
  size_t npairs = static_cast<size_t>(size) / (2 * sizeof(uint64_t));
  // CPython's bytes data is 8-byte aligned (it follows the object's header); should
  // another build not align it, the words are copied out.
  const uint64_t* words = reinterpret_cast<const uint64_t*>(data);
  std::vector<uint64_t> copy;
  if (reinterpret_cast<uintptr_t>(data) % alignof(uint64_t) != 0) {
    copy.resize(npairs * 2);
    memcpy(copy.data(), data, static_cast<size_t>(size));
    words = copy.data();
  }
  py::list out;
  std::vector<uint64_t> values(points.size()), cumulative(points.size());
  int rc = nhb_hist_percentiles(words, npairs, points.data(), points.size(), values.data(),
                                cumulative.data());
  if (rc == 2) return out;  // every count zero: no samples
  if (rc < 0)
    throw py::value_error("histogram_percentiles: bucket indexes out of order or outside 0.." +
                          std::to_string(NHB_HIST_COUNTS_LEN - 1));
  if (rc == 1) throw py::value_error("histogram_percentiles: the counts sum beyond 64 bits");
  for (size_t p = 0; p < points.size(); p++) out.append(py::make_tuple(values[p], cumulative[p]));
  return out;
}

py::dict hist_to_dict(const nhb_hist* h, bool compact) {
  py::dict d;
  d["count"] = h->total;
  d["min"] = h->total ? h->min : 0;
  d["max"] = h->max;
  d["sum"] = h->sum;
  d["sumsq"] = h->sumsq;
  if (compact) {
    d["buckets"] = packed_buckets(h);
    return d;
  }
  py::list counts;
  if (h->total) {
    for (size_t i = 0; i < NHB_HIST_COUNTS_LEN; i++)
      if (h->counts[i]) counts.append(py::make_tuple(i, h->counts[i]));
  }
  d["counts"] = counts;
  return d;
}

py::dict stream_to_dict(const nhb_stream* s) {
  py::dict d;
  d["count"] = s->total;
  d["min"] = s->total ? s->min : 0;
  d["max"] = s->max;
  d["sum"] = s->sum;
  d["sumsq"] = s->sumsq;
  return d;
}

py::dict stats_to_dict(const nhb_stats* st, bool compact) {
  py::dict d;
  d["execution_start_ns"] = st->execution_start_ns;
  d["execution_duration_ns"] = st->execution_duration_ns;
  py::dict counters, hists, streams;
  for (int i = 0; i < NHB_CTR_COUNT; i++) counters[nhb_counter_names[i]] = st->counters[i];
  // Only the status codes that occurred, as Nighthawk lists only non-zero
  // counters: 500 zeros would swamp every listing of the counters.
  for (int i = 0; i < NHB_STATUS_COUNT; i++)
    if (st->status_codes[i] != 0)
      counters[("benchmark.http_" + std::to_string(i + NHB_STATUS_MIN)).c_str()] = st->status_codes[i];
  // Likewise the gRPC calls by grpc-status (only gRPC runs count them).
  for (int i = 0; i < NHB_GRPC_STATUS_COUNT; i++)
    if (st->grpc_status[i] != 0)
      counters[("benchmark.grpc_status_" + std::to_string(i)).c_str()] = st->grpc_status[i];
  // A NULL histogram is one the run does not measure (origin_latency_statistic
  // without latency_response_header_name): absent, as in Nighthawk's output.
  for (int i = 0; i < NHB_HIST_COUNT; i++)
    if (st->hists[i] != nullptr) hists[nhb_histogram_names[i]] = hist_to_dict(st->hists[i], compact);
  for (int i = 0; i < NHB_STREAM_COUNT; i++) {
    // events_per_response is measured only with stream_stats: absent without.
    if (i == NHB_STREAM_EVENTS_PER_RESPONSE && st->streams[i].total == 0) continue;
    streams[nhb_stream_names[i]] = stream_to_dict(&st->streams[i]);
  }
  d["counters"] = counters;
  d["histograms"] = hists;
  d["streams"] = streams;
  return d;
}

void register_histogram(py::module_& m) {
  m.def(
      "histogram_counts",
      [](const std::vector<uint64_t>& values) {
        auto h = std::make_unique<nhb_hist>();
        nhb_hist_init(h.get());
        for (uint64_t v : values) nhb_hist_record(h.get(), v);
        return hist_to_dict(h.get());
      },
      py::arg("values"), "Records `values` (ns) with the C recorder and returns the histogram dict.");
  m.def("histogram_index", &nhb_hist_index, py::arg("value"));
  m.def("histogram_percentiles", &percentiles_of_packed, py::arg("buckets"), py::arg("points"),
        "(value, cumulative count) at each point (fractions, ascending) of packed (index, count) "
        "uint64 pairs (index non-decreasing), as the hdrh package computes them; [] when empty.");
  m.def("histogram_merge", &merge_sparse, py::arg("parts"),
        "The (index, count) pairs of several histograms of the core's layout added bucket by "
        "bucket: sorted by index, zero counts left out.");
  py::list counters, hists, streams;
  for (int i = 0; i < NHB_CTR_COUNT; i++) counters.append(nhb_counter_names[i]);
  for (int i = 0; i < NHB_HIST_COUNT; i++) hists.append(nhb_histogram_names[i]);
  for (int i = 0; i < NHB_STREAM_COUNT; i++) streams.append(nhb_stream_names[i]);
  m.attr("COUNTER_NAMES") = py::tuple(counters);
  m.attr("HISTOGRAM_NAMES") = py::tuple(hists);
  m.attr("STREAM_NAMES") = py::tuple(streams);
}
