// register_client.cpp: nhbench._core.ClientRun.
//
// Arguments are converted with the GIL held; every call that waits on the C
// core (wait, destruction) releases it, so Python threads and signal handling
// go on while a run is in progress.
#include <cmath>
#include <string>
#include <vector>

#include "register.hpp"
#include "stats_convert.hpp"

#include <pybind11/stl.h>

extern "C" {
#include "nhb.h"
}

namespace {

template <typename T>
T get(const py::dict& d, const char* key, T fallback) {
  if (!d.contains(key)) return fallback;
  try {
    return d[key].cast<T>();
  } catch (const py::cast_error&) {
    throw py::value_error(std::string("config '") + key + "' has the wrong type");
  }
}

uint64_t seconds_to_ns(const py::dict& d, const char* key, double fallback) {
  double s = get<double>(d, key, fallback);
  if (!std::isfinite(s) || s < 0) throw py::value_error(std::string("config '") + key + "' must be >= 0 seconds");
  return static_cast<uint64_t>(std::llround(s * 1e9));
}

int parse_predicates(const py::dict& d, const char* key, nhb_predicate* out) {
  if (!d.contains(key)) return 0;
  auto items = d[key].cast<std::vector<std::pair<std::string, uint64_t>>>();
  if (items.size() > NHB_MAX_PREDICATES) throw py::value_error(std::string(key) + ": at most 32 predicates");
  int n = 0;
  for (const auto& [name, threshold] : items) {
    int idx = nhb_counter_lookup(name.c_str());
    if (idx < 0) throw py::value_error(std::string(key) + ": unknown counter '" + name + "'");
    out[n].counter = idx;
    out[n].threshold = threshold;
    n++;
  }
  return n;
}

class ClientRun {
 public:
  explicit ClientRun(const py::dict& d) {
    nhb_client_config& c = config_;
    c = nhb_client_config{};
    std::string address = get<std::string>(d, "address", "");
    int port = get<int>(d, "port", -1);
    c.addr_len = fill_sockaddr(address, port, c.addr, "address");
    request_ = get<std::string>(d, "request", "");
    if (request_.empty()) throw py::value_error("config 'request' must not be empty");
    c.request = request_.data();
    c.request_len = request_.size();
    c.head_request = get<bool>(d, "head_request", false);
    cpus_ = get<std::vector<int>>(d, "cpus", {-1});
    if (cpus_.empty()) throw py::value_error("config 'cpus' needs one entry per worker");
    c.nworkers = static_cast<int>(cpus_.size());
    c.cpus = cpus_.data();
    c.rps = get<double>(d, "rps", 5.0);
    if (!std::isfinite(c.rps) || c.rps < 0) throw py::value_error("config 'rps' must be >= 0");
    c.burst_size = get<uint32_t>(d, "burst_size", 1);
    c.connections = get<uint32_t>(d, "connections", 100);
    if (c.connections < 1 || c.connections > 1000000) throw py::value_error("config 'connections' must be 1-1000000");
    c.max_pending_requests = get<uint32_t>(d, "max_pending_requests", 0);
    c.max_requests_per_connection = get<uint64_t>(d, "max_requests_per_connection", 0);
    c.prefetch_connections = get<bool>(d, "prefetch_connections", false);
    c.open_loop = get<bool>(d, "open_loop", false);
    std::string idle = get<std::string>(d, "idle_strategy", "poll");
    if (idle == "spin") c.idle_strategy = NHB_IDLE_SPIN;
    else if (idle == "poll") c.idle_strategy = NHB_IDLE_POLL;
    else if (idle == "sleep") c.idle_strategy = NHB_IDLE_SLEEP;
    else throw py::value_error("config 'idle_strategy' must be spin, poll or sleep");
    double duration = get<double>(d, "duration", 5.0);
    c.duration_ns = duration < 0 ? -1 : static_cast<int64_t>(std::llround(duration * 1e9));
    c.connect_timeout_ns = seconds_to_ns(d, "connect_timeout", 30.0);
    c.request_timeout_ns = seconds_to_ns(d, "request_timeout", 0.0);
    c.drain_timeout_ns = seconds_to_ns(d, "drain_timeout", 5.0);
    c.start_delay_ns = seconds_to_ns(d, "start_delay", 0.0);
    c.n_termination = parse_predicates(d, "termination_predicates", c.termination);
    c.n_failure = parse_predicates(d, "failure_predicates", c.failure);
    int r = nhb_run_create(&c, &run_);
    if (r < 0) raise_core_error(r, "cannot create the run");
  }

  ~ClientRun() {
    py::gil_scoped_release release;
    nhb_run_destroy(run_);
  }

  ClientRun(const ClientRun&) = delete;
  ClientRun& operator=(const ClientRun&) = delete;

  void start() {
    int r = nhb_run_start(run_);
    if (r < 0) raise_core_error(r, "cannot start the run");
  }

  bool wait(std::optional<double> timeout) {
    int r;
    {
      py::gil_scoped_release release;
      r = nhb_run_wait(run_, timeout ? *timeout : -1.0);
    }
    if (r < 0) raise_core_error(r, "wait");
    return r == 1;
  }

  void stop() { nhb_run_stop(run_); }

  py::dict progress() {
    uint64_t counters[NHB_CTR_COUNT];
    double elapsed;
    nhb_run_progress(run_, counters, &elapsed);
    py::dict d, c;
    for (int i = 0; i < NHB_CTR_COUNT; i++) c[nhb_counter_names[i]] = counters[i];
    d["elapsed"] = elapsed;
    d["counters"] = c;
    return d;
  }

  py::dict result() {
    const nhb_stats* global = nhb_run_global_stats(run_);
    if (!global) throw std::runtime_error("the run has not finished");
    py::dict d;
    d["execution_start_ns"] = global->execution_start_ns;
    std::string reason;
    int counter = nhb_run_end_counter(run_);
    std::string counter_name = counter >= 0 ? nhb_counter_names[counter] : "";
    switch (nhb_run_end_reason(run_)) {
      case NHB_END_DURATION: reason = "duration"; break;
      case NHB_END_STOP: reason = "stop"; break;
      case NHB_END_TERMINATION_PREDICATE: reason = "termination_predicate:" + counter_name; break;
      case NHB_END_FAILURE_PREDICATE: reason = "failure_predicate:" + counter_name; break;
      default: reason = "error"; break;
    }
    d["terminated_by"] = reason;
    py::list failed;
    uint64_t bits = nhb_run_failed_predicates(run_);
    for (int i = 0; i < config_.n_failure; i++)
      if (bits & (1ULL << i)) failed.append(nhb_counter_names[config_.failure[i].counter]);
    d["failed_predicates"] = failed;
    std::string err = nhb_run_first_error(run_);
    d["error"] = err.empty() ? py::object(py::none()) : py::object(py::str(err));
    py::list workers;
    for (int i = 0; i < nhb_run_worker_count(run_); i++) workers.append(stats_to_dict(nhb_run_worker_stats(run_, i)));
    d["workers"] = workers;
    d["global"] = stats_to_dict(global);
    return d;
  }

 private:
  nhb_client_config config_{};
  std::string request_;
  std::vector<int> cpus_;
  nhb_run* run_ = nullptr;
};

}  // namespace

void register_client(py::module_& m) {
  py::class_<ClientRun>(m, "ClientRun")
      .def(py::init<const py::dict&>(), py::arg("config"))
      .def("start", &ClientRun::start)
      .def("wait", &ClientRun::wait, py::arg("timeout") = py::none())
      .def("stop", &ClientRun::stop)
      .def("progress", &ClientRun::progress)
      .def("result", &ClientRun::result);
}
