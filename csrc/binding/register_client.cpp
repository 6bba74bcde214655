// register_client.cpp: nhbench._core.ClientRun.
//
// Arguments are converted with the GIL held; every call that waits on the C
// core (wait, destruction) releases it, so Python threads and signal handling
// go on while a run is in progress.
#include <array>
#include <climits>
#include <sys/socket.h>
#include <cmath>
#include <string>
#include <vector>

#include "config.hpp"
#include "register.hpp"
#include "stats_convert.hpp"

#include <pybind11/stl.h>

extern "C" {
#include "nhb.h"
}

namespace {

using namespace nhb_config;

// A counter's id: a response check's counter by the check's name
// ("check.NAME.pass|fail", NAME one of `check_names`), any other by the
// core's name for it; -1 for none.
int counter_id(const std::string& name, const std::vector<std::string>& check_names) {
  for (size_t i = 0; i < check_names.size(); i++) {
    const std::string prefix = "check." + check_names[i] + ".";
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    std::string rest = name.substr(prefix.size());
    if (rest == "pass") return NHB_CHECK_PASS_ID + static_cast<int>(i);
    if (rest == "fail") return NHB_CHECK_FAIL_ID + static_cast<int>(i);
  }
  // The core's own names of the checks' counters are by index, not taken here.
  if (name.compare(0, 6, "check.") == 0) return -1;
  return nhb_counter_lookup(name.c_str());
}

int parse_predicates(const py::dict& d, const char* key, nhb_predicate* out,
                     const std::vector<std::string>& check_names) {
  if (!d.contains(key)) return 0;
  auto items = get_as<std::vector<std::pair<std::string, uint64_t>>>(d, key, {});
  // At most the array's entries are filled; the count is passed as it is, and
  // the core refuses one over NHB_MAX_PREDICATES.
  for (size_t i = 0; i < items.size() && i < NHB_MAX_PREDICATES; i++) {
    int idx = counter_id(items[i].first, check_names);
    if (idx < 0) config_error(key, "unknown counter '" + items[i].first + "'");
    out[i].counter = idx;
    out[i].threshold = items[i].second;
  }
  return items.size() > INT_MAX ? INT_MAX : static_cast<int>(items.size());
}

class ClientRun {
 public:
  explicit ClientRun(const py::dict& d) {
    nhb_client_config& c = config_;
    c = nhb_client_config{};
    std::string address = get_as<std::string>(d, "address", "");
    int port = get_as<int>(d, "port", -1);
    // `targets` (parse_targets) replaces the single address.
    if (!value_of(d, "targets")) c.addr_len = fill_sockaddr(address, port, c.addr, "address");
    cpus_ = get_as<std::vector<int>>(d, "cpus", {-1});
    c.nworkers = cpus_.size() > INT_MAX ? INT_MAX : static_cast<int>(cpus_.size());
    c.cpus = cpus_.data();
    c.rps = get_as<double>(d, "rps", 5.0);
    c.burst_size = get_as<uint32_t>(d, "burst_size", 1);
    c.connections = get_as<uint32_t>(d, "connections", 100);
    c.max_pending_requests = get_as<uint32_t>(d, "max_pending_requests", 0);
    c.max_requests_per_connection = get_as<uint64_t>(d, "max_requests_per_connection", 0);
    c.prefetch_connections = get_as<bool>(d, "prefetch_connections", false);
    c.open_loop = get_as<bool>(d, "open_loop", false);
    static const nhb_idle_strategy_t kIdle[] = {NHB_IDLE_SPIN, NHB_IDLE_POLL, NHB_IDLE_SLEEP};
    c.idle_strategy = kIdle[get_choice(d, "idle_strategy", "poll", {"spin", "poll", "sleep"})];
    double duration = get_as<double>(d, "duration", 5.0);
    // < 0 means none; otherwise the nanoseconds must fit the core's int64_t.
    if (std::isnan(duration) || duration > kMaxSeconds / 2) config_error("duration", "must be < 0 (none) or 0-5e9 seconds");
    c.duration_ns = duration < 0 ? -1 : static_cast<int64_t>(std::llround(duration * 1e9));
    c.connect_timeout_ns = get_seconds_ns(d, "connect_timeout", 30.0);
    c.request_timeout_ns = get_seconds_ns(d, "request_timeout", 0.0);
    c.drain_timeout_ns = get_seconds_ns(d, "drain_timeout", 5.0);
    c.start_delay_ns = get_seconds_ns(d, "start_delay", 0.0);
    // The checks first: a predicate may name one's counter.
    parse_checks(d);
    c.n_termination = parse_predicates(d, "termination_predicates", c.termination, check_names_);
    c.n_failure = parse_predicates(d, "failure_predicates", c.failure, check_names_);
    c.stats_interval_ns = get_seconds_ns(d, "stats_interval", 0.0);
    c.trace_sample_rate = get_as<double>(d, "trace_sample_rate", 0.0);
    c.trace_b3 = get_as<bool>(d, "trace_b3", false);
    c.trace_ring = get_as<uint32_t>(d, "trace_ring", 0);
    c.stream_stats = get_as<bool>(d, "stream_stats", false) ? 1 : 0;
    parse_protocol(d);
    parse_requests(d);
    parse_schedule(d);
    parse_targets(d);
    parse_observation(d);
    parse_echo(d);
    parse_grpc(d);
    parse_h3(d);
    parse_tunnel(d);
    parse_udp_tunnel(d);
    parse_groups(d);
    char err[512] = "";
    int r = nhb_run_create_ex(&c, &run_, err, sizeof(err));
    if (r < 0 && err[0] != '\0') throw py::value_error(err);
    if (r < 0) raise_core_error(r, "cannot create the run");
  }

  // The requests, always as a request set (a single request is a set of one),
  // templating and HTTP/1.0. Each entry of `specs` is a dict: request bytes,
  // body_size int, head_request bool, target int and, for HTTP/2 and HTTP/3,
  // h2_method / h2_path str, h2_authority bytes, h2_headers list[(bytes,
  // bytes)]. The strings are kept in spec_strings_ until the core has copied
  // them (nhb_run_create copies the whole set); without `specs` the core
  // refuses the run ("specs: must not be empty").
  void parse_requests(const py::dict& d) {
    nhb_client_config& c = config_;
    c.templated = get_as<bool>(d, "templated", false) ? 1 : 0;
    c.http10 = get_as<bool>(d, "http10", false) ? 1 : 0;
    if (!d.contains("specs") || d["specs"].is_none()) return;
    auto items = get_as<std::vector<py::dict>>(d, "specs", {});
    if (items.empty()) config_error("specs", "must not be empty");
    if (items.size() >= UINT32_MAX) config_error("specs", "too many entries");
    spec_strings_.resize(items.size());
    specs_.resize(items.size());
    for (size_t i = 0; i < items.size(); i++) {
      const py::dict& e = items[i];
      SpecStrings& k = spec_strings_[i];
      nhb_request_spec& s = specs_[i];
      s = nhb_request_spec{};
      k.request = get_as<std::string>(e, "request", "");
      k.method = get_as<std::string>(e, "h2_method", "GET");
      k.path = get_as<std::string>(e, "h2_path", "/");
      k.authority = get_as<std::string>(e, "h2_authority", "");
      k.headers = get_as<std::vector<std::pair<std::string, std::string>>>(e, "h2_headers", {});
      if (k.headers.size() > INT_MAX) config_error("specs", "too many h2_headers");
      for (const auto& [name, value] : k.headers)
        k.nv.push_back(nhb_header{name.data(), name.size(), value.data(), value.size()});
      s.request = k.request.data();
      s.request_len = k.request.size();
      s.body_size = get_as<size_t>(e, "body_size", 0);
      s.head_request = get_as<bool>(e, "head_request", false) ? 1 : 0;
      s.h2_method = k.method.c_str();
      s.h2_path = k.path.c_str();
      s.h2_authority = k.authority.c_str();
      s.h2_headers = k.nv.data();
      s.h2_nheaders = static_cast<int>(k.nv.size());
      s.target = get_as<uint32_t>(e, "target", 0);
    }
    c.specs = specs_.data();
    c.nspecs = static_cast<uint32_t>(specs_.size());
  }

  // Schedule shapes (jitter, stages, exact counts, warm-up, start time).
  // Keys (docs/architecture.md, "Binding contract"): jitter_uniform float s,
  // jitter_fraction float, no_catchup bool, total_requests int, stages
  // list[(float s, float rps per worker)], schedule_offsets list[float s],
  // warmup float s, warmup_requests int, allow_initial_errors bool,
  // warmup_stop_on_error bool, scheduled_start float epoch s (0 = none),
  // arrival "uniform" | "poisson", seed int (absent: from the clock).
  void parse_schedule(const py::dict& d) {
    nhb_client_config& c = config_;
    c.jitter_uniform_ns = get_seconds_ns(d, "jitter_uniform", 0.0);
    c.jitter_fraction = get_as<double>(d, "jitter_fraction", 0.0);
    c.no_catchup = get_as<bool>(d, "no_catchup", false);
    c.total_requests = get_as<uint64_t>(d, "total_requests", 0);
    auto stages = get_as<std::vector<std::pair<double, double>>>(d, "stages", {});
    for (const auto& [seconds, rps] : stages) {
      if (!(seconds > 0 && seconds <= kMaxSeconds)) config_error("stages", "each lasts more than 0 s");
      stage_ns_.push_back(static_cast<uint64_t>(std::llround(seconds * 1e9)));
      stage_rps_.push_back(rps);
    }
    c.stage_ns = stage_ns_.data();
    c.stage_rps = stage_rps_.data();
    c.nstages = static_cast<uint32_t>(stage_ns_.size());
    auto offsets = get_as<std::vector<double>>(d, "schedule_offsets", {});
    for (double seconds : offsets) {
      if (!(seconds >= 0 && seconds <= kMaxSeconds)) config_error("schedule_offsets", "must be 0 s or more");
      offsets_ns_.push_back(static_cast<uint64_t>(std::llround(seconds * 1e9)));
    }
    c.schedule_offsets_ns = offsets_ns_.data();
    c.nschedule_offsets = offsets_ns_.size();
    c.warmup_ns = get_seconds_ns(d, "warmup", 0.0);
    c.warmup_requests = get_as<uint64_t>(d, "warmup_requests", 0);
    c.allow_initial_errors = get_as<bool>(d, "allow_initial_errors", false);
    c.warmup_stop_on_error = get_as<bool>(d, "warmup_stop_on_error", false);
    double start = get_as<double>(d, "scheduled_start", 0.0);
    if (!(start >= 0 && start < 1e10)) config_error("scheduled_start", "must be epoch seconds");
    c.start_realtime_ns = static_cast<uint64_t>(std::llround(start * 1e9));
    std::string arrival = get_as<std::string>(d, "arrival", "uniform");
    if (arrival != "uniform" && arrival != "poisson") config_error("arrival", "uniform or poisson");
    c.arrival_poisson = arrival == "poisson";
    if (d.contains("seed") && !d["seed"].is_none()) {
      c.seed = get_as<uint64_t>(d, "seed", 0);
      c.seed_set = 1;
    }
    // A test hook (not an option): keep each worker's drawn Poisson or jittered times.
    c.record_arrivals = get_as<uint64_t>(d, "record_arrivals", 0);
  }

  // Several targets, connection reuse, source address, Unix sockets.
  // `targets`: [("tcp", numeric host, port) | ("unix", path, 0), ...], which
  // replaces `address`/`port`; `reuse_strategy`: "mru" | "lru";
  // `source_addresses`: [(numeric host, port), ...], spread over round-robin.
  void parse_targets(const py::dict& d) {
    nhb_client_config& c = config_;
    if (py::object v = value_of(d, "targets")) {
      if (!py::isinstance<py::list>(v) && !py::isinstance<py::tuple>(v)) config_error("targets", "expected a list");
      py::sequence seq = py::reinterpret_borrow<py::sequence>(v);
      targets_.resize(py::len(seq));
      for (size_t i = 0; i < targets_.size(); i++) {
        py::sequence t = tuple_of(seq[i], 3, "targets", "(\"tcp\", host, port) or (\"unix\", path, 0)");
        std::string kind = str_of(t[0], "targets");
        if (kind == "tcp") {
          targets_[i].len = fill_sockaddr(str_of(t[1], "targets"), port_of(t[2], "targets"), targets_[i].bytes, "targets");
        } else if (kind == "unix") {
          if (port_of(t[2], "targets") != 0) config_error("targets", "a unix socket entry has port 0");
          fill_unix(str_of(t[1], "targets"), &targets_[i], "targets");
        } else {
          config_error("targets", "address kind must be \"tcp\" or \"unix\", not '" + kind + "'");
        }
      }
      c.targets = targets_.data();
      c.ntargets = targets_.size() > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(targets_.size());
    }
    // `endpoints`: [("tcp", numeric host, port), ...], the single target's
    // addresses, which new connections spread over by `endpoint_pick`
    // ("rr" | "random"); absent or one entry: the target alone.
    if (py::object v = value_of(d, "endpoints")) {
      if (!py::isinstance<py::list>(v) && !py::isinstance<py::tuple>(v)) config_error("endpoints", "expected a list");
      py::sequence seq = py::reinterpret_borrow<py::sequence>(v);
      endpoints_.resize(py::len(seq));
      for (size_t i = 0; i < endpoints_.size(); i++) {
        py::sequence t = tuple_of(seq[i], 3, "endpoints", "(\"tcp\", host, port)");
        if (str_of(t[0], "endpoints") != "tcp") config_error("endpoints", "address kind must be \"tcp\"");
        endpoints_[i].len = fill_sockaddr(str_of(t[1], "endpoints"), port_of(t[2], "endpoints"), endpoints_[i].bytes, "endpoints");
      }
      c.endpoints = endpoints_.data();
      c.nendpoints = endpoints_.size() > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(endpoints_.size());
    }
    c.endpoint_random = get_choice(d, "endpoint_pick", "rr", {"rr", "random"});
    c.reuse_lru = get_choice(d, "reuse_strategy", "mru", {"mru", "lru"});
    // `dns_host`: the target's name, resolved again for each new connection
    // (absent or "": off, the addresses above); `dns_pick` "first" | "rr" |
    // "random" picks among each answer's addresses of `dns_family` "auto" |
    // "v4" | "v6" (auto: IPv4 when the answer has one).
    dns_host_ = get_as<std::string>(d, "dns_host", "");
    c.dns_host = dns_host_.empty() ? nullptr : dns_host_.c_str();
    c.dns_pick = get_choice(d, "dns_pick", "first", {"first", "rr", "random"});
    static const int kDnsFamily[] = {AF_UNSPEC, AF_INET, AF_INET6};
    c.dns_family = kDnsFamily[get_choice(d, "dns_family", "auto", {"auto", "v4", "v6"})];
    if (py::object v = value_of(d, "source_addresses")) {
      if (!py::isinstance<py::list>(v) && !py::isinstance<py::tuple>(v))
        config_error("source_addresses", "expected a list");
      py::sequence seq = py::reinterpret_borrow<py::sequence>(v);
      sources_.resize(py::len(seq));
      for (size_t i = 0; i < sources_.size(); i++) {
        py::sequence t = tuple_of(seq[i], 2, "source_addresses", "(host, port)");
        sources_[i].len = fill_sockaddr(str_of(t[0], "source_addresses"), port_of(t[1], "source_addresses"),
                                        sources_[i].bytes, "source_addresses");
      }
      c.sources = sources_.data();
      c.nsources = sources_.size() > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(sources_.size());
    }
  }
  std::vector<nhb_sockaddr> targets_;
  std::vector<nhb_sockaddr> sources_;
  std::vector<nhb_sockaddr> endpoints_;
  std::string dns_host_;

  // What the client reads from responses (origin latency header).
  // "latency_response_header_name" str: absent or "" = off.
  void parse_observation(const py::dict& d) {
    latency_response_header_name_ = get_as<std::string>(d, "latency_response_header_name", "");
    config_.latency_response_header_name =
        latency_response_header_name_.empty() ? nullptr : latency_response_header_name_.c_str();
  }
  std::string latency_response_header_name_;

  // Statistics per group (nhbench._groups plans them; docs/engine.md
  // "Groups"): "spec_group" list[int], each request-set entry's group, with
  // "ngroups" int; or "group_header" str, the response header whose values
  // are the groups. Absent = no groups.
  void parse_groups(const py::dict& d) {
    spec_group_ = get_as<std::vector<uint32_t>>(d, "spec_group", {});
    config_.ngroups = get_as<uint32_t>(d, "ngroups", 0);
    if (!spec_group_.empty() && spec_group_.size() != specs_.size())
      config_error("spec_group", "one group per request-set entry");
    config_.spec_group = spec_group_.empty() ? nullptr : spec_group_.data();
    group_header_ = get_as<std::string>(d, "group_header", "");
    config_.group_header = group_header_.empty() ? nullptr : group_header_.c_str();
  }
  std::vector<uint32_t> spec_group_;
  std::string group_header_;

  // Response checks (nhbench._checks compiles them; docs/checks.md):
  // "checks" list of dicts {name str, kind int (nhb_check_kind_t), header
  // bytes, text bytes, value bytes, ranges list[(int, int)], entry int (0:
  // every response; k: request-set entry k - 1's own)}; absent = none.
  // The core copies the strings; the names stay here for the counters.
  void parse_checks(const py::dict& d) {
    auto items = get_as<std::vector<py::dict>>(d, "checks", {});
    if (items.empty()) return;
    if (items.size() > NHB_MAX_CHECKS) config_error("checks", "at most 32");
    checks_.resize(items.size());
    check_strings_.resize(items.size());
    for (size_t i = 0; i < items.size(); i++) {
      const py::dict& e = items[i];
      nhb_check& k = checks_[i];
      k = nhb_check{};
      check_names_.push_back(get_as<std::string>(e, "name", ""));
      auto& keep = check_strings_[i];
      keep[0] = get_as<std::string>(e, "header", "");
      keep[1] = get_as<std::string>(e, "text", "");
      keep[2] = get_as<std::string>(e, "value", "");
      k.kind = get_as<int>(e, "kind", -1);
      k.header = keep[0].data();
      k.header_len = keep[0].size();
      k.text = keep[1].data();
      k.text_len = keep[1].size();
      k.value = keep[2].data();
      k.value_len = keep[2].size();
      auto ranges = get_as<std::vector<std::pair<uint64_t, uint64_t>>>(e, "ranges", {});
      if (ranges.size() > NHB_CHECK_MAX_RANGES) config_error("checks", "at most 16 ranges per check");
      for (size_t r = 0; r < ranges.size(); r++) {
        k.lo[r] = ranges[r].first;
        k.hi[r] = ranges[r].second;
      }
      k.nranges = static_cast<uint32_t>(ranges.size());
      k.entry = get_as<uint32_t>(e, "entry", 0);
    }
    config_.checks = checks_.data();
    config_.nchecks = static_cast<uint32_t>(checks_.size());
  }
  std::vector<nhb_check> checks_;
  std::vector<std::array<std::string, 3>> check_strings_;
  std::vector<std::string> check_names_;

  // A counter id's name, the checks' by their own names (the core knows them
  // by index); "" for none.
  std::string counter_name(int id) const {
    if (id >= NHB_CHECK_PASS_ID && id < NHB_COUNTER_ID_COUNT) {
      int fail = id >= NHB_CHECK_FAIL_ID;
      size_t i = static_cast<size_t>(id - (fail ? NHB_CHECK_FAIL_ID : NHB_CHECK_PASS_ID));
      if (i >= check_names_.size()) return "";
      return "check." + check_names_[i] + (fail ? ".fail" : ".pass");
    }
    char buf[64];
    return nhb_counter_name(id, buf, sizeof(buf)) == 0 ? std::string(buf) : std::string();
  }

  // The per-check counters, check.NAME.pass / check.NAME.fail, into a
  // statistics dict of stats_to_dict's form.
  py::dict with_checks(py::dict d, const nhb_stats* st) {
    if (check_names_.empty()) return d;
    py::dict counters = d["counters"].cast<py::dict>();
    for (size_t i = 0; i < check_names_.size(); i++) {
      counters[("check." + check_names_[i] + ".pass").c_str()] = st->check_pass[i];
      counters[("check." + check_names_[i] + ".fail").c_str()] = st->check_fail[i];
    }
    return d;
  }

  // tcp:// and udp:// echo keys (docs/protocols.md).
  // "echo_payload" bytes: what every tcp:// or udp:// request sends (the core copies it).
  void parse_echo(const py::dict& d) {
    echo_payload_ = get_as<std::string>(d, "echo_payload", "");
    config_.echo_payload = echo_payload_.data();
    config_.echo_payload_len = echo_payload_.size();
  }
  std::string echo_payload_;

  // gRPC keys ("grpc" bool: the HTTP/2 run is gRPC).
  void parse_grpc(const py::dict& d) { config_.grpc = get_as<bool>(d, "grpc", false) ? 1 : 0; }

  // HTTP/3 keys.
  void parse_h3(const py::dict& d) { (void)d; }

  // Proxies and tunnels: "tunnel_requests" list[bytes], the CONNECT request
  // head each target's connections send to the proxy (the targets are then the
  // proxy's address), one per target or one for all; absent = no tunnel.
  void parse_tunnel(const py::dict& d) {
    tunnel_requests_ = get_as<std::vector<std::string>>(d, "tunnel_requests", {});
    if (tunnel_requests_.empty()) return;
    if (tunnel_requests_.size() > NHB_MAX_TARGETS) config_error("tunnel_requests", "at most one per target");
    for (const std::string& rq : tunnel_requests_) {
      tunnel_ptrs_.push_back(rq.data());
      tunnel_lens_.push_back(rq.size());
    }
    config_.tunnel_requests = tunnel_ptrs_.data();
    config_.tunnel_request_lens = tunnel_lens_.data();
    config_.ntunnel_requests = static_cast<uint32_t>(tunnel_requests_.size());
    // The proxy leg: "proxy_protocol" "http1" | "http2" | "http3" (the CONNECT
    // on an HTTP/2 or HTTP/3 stream), "proxy_tls" dict (sni, verify_name, cacert,
    // cacert_pem: the CAs' PEM text, insecure)
    // for TLS to the proxy; absent = plain TCP (http3 needs it: QUIC is TLS).
    config_.proxy_protocol = get_choice(d, "proxy_protocol", "http1", {"http1", "http2", "http3"}) + 1;
    if (d.contains("proxy_tls") && !d["proxy_tls"].is_none()) parse_proxy_tls(d["proxy_tls"].cast<py::dict>());
  }
  // TLS to the proxy (sni, verify_name, cacert, cacert_pem, insecure): the CONNECT
  // tunnels' proxy leg and CONNECT-UDP's HTTP/2 leg read the same dict.
  void parse_proxy_tls(const py::dict& pt) {
    nhb_tls_config& t = config_.proxy_tls;
    auto str = [&](const char* key, std::string& keep) -> const char* {
      keep = get_as<std::string>(pt, key, "");
      return keep.empty() ? nullptr : keep.c_str();
    };
    t.enabled = 1;
    t.sni = str("sni", proxy_sni_);
    t.verify_name = str("verify_name", proxy_verify_name_);
    t.cacert = str("cacert", proxy_cacert_);
    t.cert_pem = str("cacert_pem", proxy_cacert_pem_);
    t.insecure = get_as<bool>(pt, "insecure", false);
  }
  std::string proxy_sni_, proxy_verify_name_, proxy_cacert_, proxy_cacert_pem_;
  std::vector<std::string> tunnel_requests_;

  // CONNECT-UDP: "udp_tunnel" dict {"authority": str, "paths": list[str] (one per
  // target or one), "authorization", "sni", "verify_name", "cacert": str or None,
  // "insecure": bool}; absent = none.
  void parse_udp_tunnel(const py::dict& d) {
    if (!d.contains("udp_tunnel") || d["udp_tunnel"].is_none()) return;
    py::dict u = d["udp_tunnel"].cast<py::dict>();
    udp_tunnel_authority_ = get_as<std::string>(u, "authority", "");
    udp_tunnel_paths_ = get_as<std::vector<std::string>>(u, "paths", {});
    if (udp_tunnel_authority_.empty() || udp_tunnel_paths_.empty())
      config_error("udp_tunnel", "needs an authority and a path");
    if (udp_tunnel_paths_.size() > NHB_MAX_TARGETS) config_error("udp_tunnel", "at most one path per target");
    for (const std::string& p : udp_tunnel_paths_) udp_tunnel_path_ptrs_.push_back(p.c_str());
    udp_tunnel_authorization_ = get_as<std::string>(u, "authorization", "");
    udp_tunnel_sni_ = get_as<std::string>(u, "sni", "");
    udp_tunnel_verify_name_ = get_as<std::string>(u, "verify_name", "");
    udp_tunnel_cacert_ = get_as<std::string>(u, "cacert", "");
    config_.udp_tunnel_authority = udp_tunnel_authority_.c_str();
    config_.udp_tunnel_paths = udp_tunnel_path_ptrs_.data();
    config_.nudp_tunnel_paths = static_cast<uint32_t>(udp_tunnel_paths_.size());
    config_.udp_tunnel_authorization = udp_tunnel_authorization_.empty() ? nullptr : udp_tunnel_authorization_.c_str();
    config_.udp_tunnel_sni = udp_tunnel_sni_.c_str();
    config_.udp_tunnel_verify_name = udp_tunnel_verify_name_.c_str();
    config_.udp_tunnel_cacert = udp_tunnel_cacert_.empty() ? nullptr : udp_tunnel_cacert_.c_str();
    config_.udp_tunnel_insecure = get_as<bool>(u, "insecure", false) ? 1 : 0;
    // "protocol": "http3" (QUIC to the proxy) or "http2" (an extended CONNECT
    // on an HTTP/2 stream, tunnel_udp_h2.c), whose TLS to the proxy is the
    // "tls" dict (sni, verify_name, cacert, cacert_pem, insecure; absent: h2c).
    if (get_choice(u, "protocol", "http3", {"http3", "http2"}) == 1) {
      config_.proxy_protocol = 2;
      if (u.contains("tls") && !u["tls"].is_none()) parse_proxy_tls(u["tls"].cast<py::dict>());
    }
  }
  std::string udp_tunnel_authority_, udp_tunnel_authorization_, udp_tunnel_sni_, udp_tunnel_verify_name_,
      udp_tunnel_cacert_;
  std::vector<std::string> udp_tunnel_paths_;
  std::vector<const char*> udp_tunnel_path_ptrs_;
  std::vector<const char*> tunnel_ptrs_;
  std::vector<size_t> tunnel_lens_;

  // Protocol, TLS and HTTP/2 keys. The strings are kept in members until the
  // core has copied them (nhb_run_create copies every string).
  void parse_protocol(const py::dict& d) {
    nhb_client_config& c = config_;
    // The choices in the enum's order, so that a choice's index is its value.
#define NHB__PROTO_NAME(id, name, record) name,
    c.protocol = static_cast<nhb_protocol_t>(get_choice(d, "protocol", "http1", {NHB_PROTOCOL_MAP(NHB__PROTO_NAME)}));
#undef NHB__PROTO_NAME
    std::string scheme = get_choice(d, "scheme", "http", {"http", "https"}) == 0 ? "http" : "https";
    c.max_concurrent_streams = get_as<uint32_t>(d, "max_concurrent_streams", 0);
    c.max_active_requests = get_as<uint32_t>(d, "max_active_requests", 100);
    // HTTP/2 and HTTP/3 send the scheme as every request's :scheme; the rest
    // of each header block is the request set's (parse_requests).
    if (c.protocol == NHB_PROTO_HTTP2 || c.protocol == NHB_PROTO_HTTP3) {
      h2_scheme_ = scheme;
      c.h2_scheme = h2_scheme_.c_str();
    }
    if (scheme == "https") {
      py::dict tls = d.contains("tls") && !d["tls"].is_none() ? d["tls"].cast<py::dict>() : py::dict();
      nhb_tls_config& t = c.tls;
      t.enabled = 1;
      auto str = [&](const char* key, std::string& keep) -> const char* {
        keep = get_as<std::string>(tls, key, "");
        return keep.empty() ? nullptr : keep.c_str();
      };
      t.sni = str("sni", tls_sni_);
      t.verify_name = str("verify_name", tls_verify_name_);
      t.cacert = str("cacert", tls_cacert_);
      t.cert_pem = str("cert_pem", tls_cert_);
      t.key_pem = str("key_pem", tls_key_);
      t.key_passphrase = str("key_passphrase", tls_key_passphrase_);
      t.ciphers = str("ciphers", tls_ciphers_);
      t.ciphersuites = str("ciphersuites", tls_ciphersuites_);
      t.groups = str("groups", tls_groups_);
      std::vector<std::string> alpn = get_as<std::vector<std::string>>(tls, "alpn", {});
      for (const auto& id : alpn) tls_alpn_ += (tls_alpn_.empty() ? "" : ",") + id;
      t.alpn = tls_alpn_.empty() ? nullptr : tls_alpn_.c_str();
      t.insecure = get_as<bool>(tls, "insecure", false);
      t.session_reuse = get_as<bool>(tls, "session_reuse", true);
      t.min_version = tls_version(get_as<std::string>(tls, "min_version", ""), "min_version");
      t.max_version = tls_version(get_as<std::string>(tls, "max_version", ""), "max_version");
      insecure_ = t.insecure;
    }
  }

  static int tls_version(const std::string& v, const char* key) {
    if (v.empty()) return 0;
    if (v == "1.2") return 0x0303;
    if (v == "1.3") return 0x0304;
    config_error(std::string("tls: ") + key, "must be 1.2 or 1.3");
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

  // wake_fd >= 0: also return (False) once it is readable, e.g. Python's
  // signal wake-up fd (nhb_run_wait_fd).
  bool wait(std::optional<double> timeout, int wake_fd) {
    int r;
    {
      py::gil_scoped_release release;
      r = nhb_run_wait_fd(run_, timeout ? *timeout : -1.0, wake_fd);
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
    if (!check_names_.empty()) {
      uint64_t pass[NHB_MAX_CHECKS], fail[NHB_MAX_CHECKS];
      nhb_run_check_progress(run_, pass, fail);
      for (size_t i = 0; i < check_names_.size(); i++) {
        c[("check." + check_names_[i] + ".pass").c_str()] = pass[i];
        c[("check." + check_names_[i] + ".fail").c_str()] = fail[i];
      }
    }
    d["elapsed"] = elapsed;
    d["counters"] = c;
    // Per endpoint (several only), in the order of result()'s endpoints.
    py::list endpoints;
    uint32_t nep = nhb_run_endpoint_progress(run_, nullptr, 0);
    if (nep > 0) {
      std::vector<uint64_t> ep(static_cast<size_t>(nep) * 3);
      nep = nhb_run_endpoint_progress(run_, ep.data(), nep);
      for (uint32_t i = 0; i < nep; i++) {
        py::dict e;
        e["connections"] = ep[3 * i];
        e["requests"] = ep[3 * i + 1];
        e["errors"] = ep[3 * i + 2];
        endpoints.append(e);
      }
    }
    d["endpoints"] = endpoints;
    // Per group (--group-by), as result()'s groups without their histograms;
    // empty without groups.
    py::list groups;
    nhb_group_progress gp[NHB_MAX_GROUPS + 2];
    uint32_t ngp = nhb_run_group_progress(run_, gp, NHB_MAX_GROUPS + 2);
    static const char* const kinds[] = {"index", "value", "none", "other"};
    for (uint32_t i = 0; i < ngp; i++) {
      py::dict e;
      e["kind"] = kinds[gp[i].kind < 4 ? gp[i].kind : 0];
      e["value"] = py::bytes(gp[i].value, gp[i].value_len);
      e["requests"] = gp[i].requests;
      e["errors"] = gp[i].errors;
      groups.append(e);
    }
    d["groups"] = groups;
    return d;
  }

  // The intervals closed since the last call (docs/live.md): a list of dicts
  // with index, start and duration (s), counters (the growth of every
  // counter) and latency (scheduled_to_response, in the histogram dict form
  // of result(), sumsq 0).
  py::list take_intervals() {
    py::list out;
    nhb_interval batch[64];
    for (;;) {
      int n = nhb_run_take_intervals(run_, batch, 64);
      for (int i = 0; i < n; i++) {
        nhb_interval& iv = batch[i];
        py::dict d, c, h;
        d["index"] = iv.index;
        d["start"] = static_cast<double>(iv.start_ns) / 1e9;
        d["duration"] = static_cast<double>(iv.duration_ns) / 1e9;
        d["warmup"] = iv.warmup != 0;
        for (int k = 0; k < NHB_CTR_COUNT; k++) c[nhb_counter_names[k]] = iv.counters[k];
        // The per-status-code, gRPC-status and check counters that grew, by the
        // names the result gives them (benchmark.http_<code>,
        // benchmark.grpc_status_<code>, check.NAME.pass|fail).
        for (size_t k = 0; k < iv.ncodes; k++) {
          std::string code_name = counter_name(static_cast<int>(iv.codes[k].index));
          if (!code_name.empty()) c[code_name.c_str()] = iv.codes[k].count;
        }
        d["counters"] = c;
        h["count"] = iv.total;
        h["min"] = iv.min;
        h["max"] = iv.max;
        h["sum"] = iv.sum;
        h["sumsq"] = 0.0;
        py::list counts;
        for (size_t k = 0; k < iv.nbuckets; k++) counts.append(py::make_tuple(iv.buckets[k].index, iv.buckets[k].count));
        h["counts"] = counts;
        d["latency"] = h;
        out.append(d);
        nhb_interval_free(&iv);
      }
      if (n < 64) break;
    }
    return out;
  }

  // Traces: the spans finished since the last call, as tuples (trace_hi,
  // trace_lo, span_id, start_ns, end_ns, status, reason, spec, worker);
  // times on the wall clock, reason the counter a failed request went to
  // ("" for a response).
  py::list take_spans() {
    py::list out;
    std::vector<nhb_span> batch(1024);
    char name_buf[64];
    for (;;) {
      int n;
      {
        py::gil_scoped_release nogil;
        n = nhb_run_take_spans(run_, batch.data(), static_cast<int>(batch.size()));
      }
      for (int i = 0; i < n; i++) {
        const nhb_span& s = batch[i];
        std::string reason;
        if (s.status == 0 && nhb_counter_name(static_cast<int>(s.reason), name_buf, sizeof(name_buf)) == 0) reason = name_buf;
        out.append(py::make_tuple(s.trace_hi, s.trace_lo, s.span_id, s.start_ns, s.end_ns, s.status, reason, s.spec,
                                  s.worker));
      }
      if (n < static_cast<int>(batch.size())) break;
    }
    return out;
  }

  py::tuple trace_counts() {
    uint64_t sampled = 0, dropped = 0;
    nhb_run_trace_counts(run_, &sampled, &dropped);
    return py::make_tuple(sampled, dropped);
  }

  // `compact`: histograms as hist_to_dict's packed "buckets" (the run's own
  // Result is built from those), except each worker's small hiccup histogram.
  py::dict result(bool compact) {
    const nhb_stats* global = nhb_run_global_stats(run_);
    if (!global) throw std::runtime_error("the run has not finished");
    py::dict d;
    d["execution_start_ns"] = global->execution_start_ns;
    std::string reason;
    int counter = nhb_run_end_counter(run_);
    std::string end_name = counter_name(counter);
    switch (nhb_run_end_reason(run_)) {
      case NHB_END_DURATION: reason = "duration"; break;
      case NHB_END_STOP: reason = "stop"; break;
      case NHB_END_TERMINATION_PREDICATE: reason = "termination_predicate:" + end_name; break;
      case NHB_END_FAILURE_PREDICATE: reason = "failure_predicate:" + end_name; break;
      default: reason = "error"; break;
    }
    d["terminated_by"] = reason;
    py::list failed;
    uint64_t bits = nhb_run_failed_predicates(run_);
    for (int i = 0; i < config_.n_failure; i++) {
      std::string name = (bits & (1ULL << i)) ? counter_name(config_.failure[i].counter) : std::string();
      if (!name.empty()) failed.append(name);
    }
    d["failed_predicates"] = failed;
    std::string err = nhb_run_first_error(run_);
    d["error"] = err.empty() ? py::object(py::none()) : py::object(py::str(err));
    d["insecure"] = insecure_;
    py::list workers;
    for (int i = 0; i < nhb_run_worker_count(run_); i++) workers.append(with_checks(stats_to_dict(nhb_run_worker_stats(run_, i), compact), nhb_run_worker_stats(run_, i)));
    d["workers"] = workers;
    d["global"] = with_checks(stats_to_dict(global, compact), global);
    // Per endpoint (the targets, or the target's addresses), in their order;
    // empty with one endpoint.
    uint32_t nep = 0;
    const nhb_endpoint_stats* ep = nhb_run_endpoint_stats(run_, &nep);
    py::list endpoints;
    for (uint32_t i = 0; i < nep; i++) {
      py::dict e;
      e["connections"] = ep[i].connections;
      e["requests"] = ep[i].requests;
      e["errors"] = ep[i].errors;
      e["latency"] = hist_to_dict(ep[i].latency, compact);
      endpoints.append(e);
    }
    d["endpoints"] = endpoints;
    // Per group, in the core's order (docs/engine.md "Groups"); empty without.
    uint32_t ngr = 0;
    const nhb_group_stats* gr = nhb_run_group_stats(run_, &ngr);
    py::list groups;
    static const char* const kinds[] = {"index", "value", "none", "other"};
    for (uint32_t i = 0; i < ngr; i++) {
      py::dict e;
      e["kind"] = kinds[gr[i].kind < 4 ? gr[i].kind : 0];
      e["value"] = py::bytes(gr[i].value, gr[i].value_len);
      e["requests"] = gr[i].requests;
      py::list classes;
      for (int k = 0; k < 6; k++) classes.append(gr[i].classes[k]);
      e["classes"] = classes;
      e["failures"] = gr[i].failures;
      e["check_failed"] = gr[i].check_failed;
      e["latency"] = hist_to_dict(gr[i].latency, compact);
      groups.append(e);
    }
    d["groups"] = groups;
    // The load generator's own health, per worker (the validity verdict's).
    py::list load;
    for (int i = 0; i < nhb_run_worker_count(run_); i++) {
      nhb_worker_load wl{};
      if (nhb_run_worker_load(run_, i, &wl) != 0) continue;
      py::dict e;
      e["cpu_ns"] = wl.cpu_ns;
      e["wall_ns"] = wl.wall_ns;
      e["wait_ns"] = wl.wait_ns >= 0 ? py::object(py::int_(wl.wait_ns)) : py::object(py::none());
      e["hiccup"] = wl.hiccup ? py::object(hist_to_dict(wl.hiccup)) : py::object(py::none());
      load.append(e);
    }
    d["load"] = load;
    // Schedule shapes: what the schedule did.
    const nhb_stats* warm = nhb_run_warmup_stats(run_);
    d["warmup"] = warm ? py::object(with_checks(stats_to_dict(warm, compact), warm)) : py::object(py::none());
    nhb_schedule_facts f{};
    nhb_run_schedule_facts(run_, -1, &f);
    py::dict sched;
    sched["released"] = f.released;
    sched["no_catchup_moves"] = f.no_catchup_moves;
    sched["no_catchup_shift"] = static_cast<double>(f.no_catchup_shift_ns) / 1e9;
    sched["no_catchup_lost"] = f.no_catchup_lost;
    sched["warmup_released"] = f.warmup_released;
    py::list stages;
    for (uint32_t i = 0; i < config_.nstages; i++) {
      uint64_t rel = 0, resp = 0;
      nhb_run_stage_counts(run_, i, &rel, &resp);
      stages.append(py::make_tuple(rel, resp));
    }
    sched["stages"] = stages;
    d["schedule"] = sched;
    return d;
  }

  // The test hook's record (record_arrivals): per worker, the random release
  // times it drew, ns after its phase start. Empty lists without the hook.
  py::list arrivals() {
    py::list out;
    for (int i = 0; i < config_.nworkers; i++) {
      const uint64_t* times = nullptr;
      uint64_t n = 0;
      if (nhb_run_arrivals(run_, i, &times, &n) < 0) throw std::runtime_error("arrivals: the run has not finished");
      py::list one;
      for (uint64_t k = 0; k < n; k++) one.append(times[k]);
      out.append(one);
    }
    return out;
  }

 private:
  nhb_client_config config_{};
  // The request set's strings (parse_requests), one entry per spec.
  struct SpecStrings {
    std::string request, method, path, authority;
    std::vector<std::pair<std::string, std::string>> headers;
    std::vector<nhb_header> nv;
  };
  std::vector<SpecStrings> spec_strings_;
  std::vector<nhb_request_spec> specs_;
  std::vector<int> cpus_;
  std::string h2_scheme_;
  std::vector<uint64_t> stage_ns_, offsets_ns_;
  std::vector<double> stage_rps_;
  std::string tls_cert_, tls_key_, tls_key_passphrase_;
  std::string tls_sni_, tls_verify_name_, tls_cacert_, tls_ciphers_, tls_ciphersuites_, tls_groups_, tls_alpn_;
  bool insecure_ = false;
  nhb_run* run_ = nullptr;
};

}  // namespace

void register_client(py::module_& m) {
  py::class_<ClientRun>(m, "ClientRun")
      .def(py::init<const py::dict&>(), py::arg("config"))
      .def("start", &ClientRun::start)
      .def("wait", &ClientRun::wait, py::arg("timeout") = py::none(), py::arg("wake_fd") = -1)
      .def("stop", &ClientRun::stop)
      .def("progress", &ClientRun::progress)
      .def("take_intervals", &ClientRun::take_intervals)
      .def("take_spans", &ClientRun::take_spans)
      .def("trace_counts", &ClientRun::trace_counts)
      .def("arrivals", &ClientRun::arrivals)
      .def("result", &ClientRun::result, py::arg("compact") = false);
}
