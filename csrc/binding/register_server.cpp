// register_server.cpp: nhbench._core.Server, the test server.
//
// The config dict is converted with the GIL held (everything here touches
// Python objects); stop() and the destructor release it while the worker
// threads are joined. A bad config value raises ValueError naming its key.
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstddef>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "config.hpp"
#include "register.hpp"

#include <pybind11/stl.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>

extern "C" {
#include "nhb.h"
}

namespace {

using namespace nhb_config;

void fill_inet(const py::handle& item, nhb_sockaddr* out, const std::string& key) {
  py::sequence t = tuple_of(item, 2, key, "(host, port)");
  std::string host = str_of(t[0], key);
  out->len = fill_sockaddr(host, port_of(t[1], key), out->bytes, key.c_str());
}

// A list of addresses, each converted by `fill`. At most the array's
// NHB_SERVER_MAX_LISTEN entries are filled; the count is returned as it is,
// and nhb_server_create() refuses one over the array.
template <typename Fill>
int get_list(const py::dict& d, const char* key, nhb_sockaddr* out, Fill fill) {
  py::object v = value_of(d, key);
  if (!v) return 0;
  if (!py::isinstance<py::list>(v) && !py::isinstance<py::tuple>(v)) config_error(key, "expected a list");
  py::sequence seq = py::reinterpret_borrow<py::sequence>(v);
  size_t n = py::len(seq);
  for (size_t i = 0; i < n && i < NHB_SERVER_MAX_LISTEN; i++) fill(seq[i], &out[i], std::string(key));
  return n > INT_MAX ? INT_MAX : static_cast<int>(n);
}

py::object addr_to_py(const sockaddr_storage& ss, unsigned len, bool with_kind) {
  if (ss.ss_family == AF_UNIX) {
    const auto* un = reinterpret_cast<const sockaddr_un*>(&ss);
    size_t n = len > offsetof(sockaddr_un, sun_path) ? len - offsetof(sockaddr_un, sun_path) : 0;
    std::string path;
    if (n > 0 && un->sun_path[0] == '\0') path = "@" + std::string(un->sun_path + 1, n - 1);
    else path = std::string(un->sun_path, strnlen(un->sun_path, n));
    return py::make_tuple("unix", path, 0);
  }
  py::tuple hp = sockaddr_to_tuple(&ss);
  if (!with_kind) return std::move(hp);
  return py::make_tuple("tcp", hp[0], hp[1]);
}

// A bool key, false when absent.
int get_flag(const py::dict& d, const char* key) {
  py::object v = value_of(d, key);
  if (!v) return 0;
  if (!py::isinstance<py::bool_>(v)) config_error(key, "expected a bool");
  return v.cast<bool>() ? 1 : 0;
}

class Server {
 public:
  explicit Server(const py::dict& d) {
    check_keys(d, {"listen", "workers", "cpus", "response", "echo_default_params", "max_echo_delay",
                   "max_payload_kb", "stall_every", "stall_for", "error_body_every", "stream_events", "stream_gap", "stream_jitter", "tcp_echo", "udp_echo", "admin", "idle_timeout",
                   "header_timeout", "max_header_bytes", "max_body_bytes", "tls", "alpn", "max_concurrent_streams",
                   "max_delay", "max_connections", "tcp_proxy", "redirect", "echo_defaults_no_query", "debug_path",
                   "debug_env_dump", "forward", "http_fanout",
                   "http_fanout_serial", "http_fanout_mirror", "http3"});
    nhb_server_config& c = config_;
    nhb_server_config_init(&c);

    if (value_of(d, "listen")) {
      c.nlisten = get_list(d, "listen", c.listen, [](const py::handle& item, nhb_sockaddr* out, const std::string& key) {
        py::sequence t = tuple_of(item, 3, key, "(\"tcp\", host, port) or (\"unix\", path, 0)");
        std::string kind = str_of(t[0], key);
        if (kind == "tcp") {
          out->len = fill_sockaddr(str_of(t[1], key), port_of(t[2], key), out->bytes, key.c_str());
        } else if (kind == "unix") {
          if (port_of(t[2], key) != 0) config_error(key, "a unix socket entry has port 0");
          fill_unix(str_of(t[1], key), out, key);
        } else {
          config_error(key, "address kind must be \"tcp\" or \"unix\", not '" + kind + "'");
        }
      });
    } else {
      c.nlisten = 1;
      c.listen[0].len = fill_sockaddr("127.0.0.1", 0, c.listen[0].bytes, "listen");
    }
    c.ntcp_echo = get_list(d, "tcp_echo", c.tcp_echo, fill_inet);
    c.nudp_echo = get_list(d, "udp_echo", c.udp_echo, fill_inet);
    // ((listen host, port), (dest host, port)) pairs.
    if (py::object v = value_of(d, "tcp_proxy")) {
      if (!py::isinstance<py::list>(v) && !py::isinstance<py::tuple>(v)) config_error("tcp_proxy", "expected a list");
      py::sequence seq = py::reinterpret_borrow<py::sequence>(v);
      size_t n = py::len(seq);
      for (size_t i = 0; i < n && i < NHB_SERVER_MAX_LISTEN; i++) {
        py::sequence pair = tuple_of(seq[i], 2, "tcp_proxy", "((host, port), (host, port))");
        fill_inet(pair[0], &c.tcp_proxy[i], "tcp_proxy");
        fill_inet(pair[1], &c.tcp_proxy_dest[i], "tcp_proxy");
      }
      c.ntcp_proxy = n > INT_MAX ? INT_MAX : static_cast<int>(n);
    }
    c.nredirect = get_list(d, "redirect", c.redirect, fill_inet);
    // (path prefix, (host, port)): that path's connections piped to host:port.
    if (py::object v = value_of(d, "forward")) {
      py::sequence pair = tuple_of(v, 2, "forward", "(prefix, (host, port))");
      forward_prefix_ = str_of(pair[0], "forward");
      fill_inet(pair[1], &c.forward_dest, "forward");
      c.forward_prefix = forward_prefix_.c_str();
    }
    // ((listen host, port), [(ip, port, url, host header, path), ...]) per fan-out.
    if (py::object v = value_of(d, "http_fanout")) {
      if (!py::isinstance<py::list>(v) && !py::isinstance<py::tuple>(v)) config_error("http_fanout", "expected a list");
      py::sequence seq = py::reinterpret_borrow<py::sequence>(v);
      size_t n = py::len(seq);
      for (size_t i = 0; i < n && i < NHB_SERVER_MAX_FANOUT; i++) {
        py::sequence pair = tuple_of(seq[i], 2, "http_fanout", "((host, port), [targets])");
        fill_inet(pair[0], &c.http_fanout[i], "http_fanout");
        py::sequence targets = py::reinterpret_borrow<py::sequence>(pair[1]);
        size_t nt = py::len(targets);
        for (size_t k = 0; k < nt && k < NHB_SERVER_MAX_FANOUT_TARGETS; k++) {
          py::sequence t = tuple_of(targets[k], 5, "http_fanout", "(ip, port, url, host, path)");
          nhb_server_fanout_target& dst = c.http_fanout_target[i][k];
          dst.addr.len = fill_sockaddr(str_of(t[0], "http_fanout"), port_of(t[1], "http_fanout"), dst.addr.bytes,
                                       "http_fanout");
          const char** fields[3] = {&dst.url, &dst.host, &dst.path};
          for (int j = 0; j < 3; j++) {
            fanout_strings_.push_back(str_of(t[2 + j], "http_fanout"));
            *fields[j] = fanout_strings_.back().c_str();
          }
        }
        c.http_fanout_ntargets[i] = nt > INT_MAX ? INT_MAX : static_cast<int>(nt);
      }
      c.nhttp_fanout = n > INT_MAX ? INT_MAX : static_cast<int>(n);
    }
    c.http_fanout_serial = get_as<bool>(d, "http_fanout_serial", false) ? 1 : 0;
    c.http_fanout_no_mirror = get_as<bool>(d, "http_fanout_mirror", true) ? 0 : 1;
    if (py::object admin = value_of(d, "admin")) {
      fill_inet(admin, &c.admin, "admin");
      c.has_admin = 1;
    }

    c.nworkers = static_cast<int>(get_int(d, "workers", 1, INT_MIN, INT_MAX));
    if (py::object v = value_of(d, "cpus")) {
      if (!py::isinstance<py::list>(v) && !py::isinstance<py::tuple>(v)) config_error("cpus", "expected a list of CPU ids");
      for (const py::handle cpu : v) {
        if (!py::isinstance<py::int_>(cpu) || py::isinstance<py::bool_>(cpu)) config_error("cpus", "expected a list of CPU ids");
        long id = cpu.cast<long>();
        if (id < INT_MIN || id > INT_MAX) config_error("cpus", "a CPU id must fit a C int");
        cpus_.push_back(static_cast<int>(id));
      }
    }
    // Cycled over the workers, as the core reads one entry per worker; not
    // past NHB_MAX_WORKERS, a count the core refuses.
    if (!cpus_.empty() && c.nworkers <= NHB_MAX_WORKERS) {
      size_t given = cpus_.size();
      while (static_cast<int>(cpus_.size()) < c.nworkers) cpus_.push_back(cpus_[cpus_.size() % given]);
      c.cpus = cpus_.data();
    }

    if (py::object v = value_of(d, "response")) {
      if (!py::isinstance<py::dict>(v)) config_error("response", "expected a dict of Nighthawk response options");
      try {
        response_json_ = py::module_::import("json").attr("dumps")(v).cast<std::string>();
      } catch (const py::error_already_set& e) {
        config_error("response", std::string("not JSON-serializable: ") + e.what());
      }
      c.response_json = response_json_.c_str();
    }
    if (py::object v = value_of(d, "echo_default_params")) {
      echo_defaults_ = str_of(v, "echo_default_params");
      c.echo_default_params = echo_defaults_.c_str();
    }
    c.echo_defaults_no_query = get_flag(d, "echo_defaults_no_query");
    c.debug_env_dump = get_flag(d, "debug_env_dump");
    c.http3 = get_flag(d, "http3");
    if (py::object v = value_of(d, "debug_path")) {
      debug_path_ = str_of(v, "debug_path");
      c.debug_path = debug_path_.c_str();
    }
    c.max_echo_delay_ns = get_seconds_ns(d, "max_echo_delay", 1.5);
    c.max_delay_ns = get_seconds_ns(d, "max_delay", 60);
    c.max_connections = static_cast<uint64_t>(get_int(d, "max_connections", 0, 0, INT64_MAX));
    // KiB: a 32-bit count cannot overflow the multiplication.
    c.max_payload_bytes = static_cast<uint64_t>(get_int(d, "max_payload_kb", 256, 0, UINT32_MAX)) * 1024;
    c.stall_every_ns = get_seconds_ns(d, "stall_every", 0);
    c.stall_for_ns = get_seconds_ns(d, "stall_for", 0);
    c.error_body_every = static_cast<uint64_t>(get_int(d, "error_body_every", 0, 0, INT64_MAX));
    c.stream_events = static_cast<uint32_t>(get_int(d, "stream_events", 0, 0, NHB_SERVER_MAX_STREAM_EVENTS));
    c.stream_gap_ns = get_seconds_ns(d, "stream_gap", 0.01);
    c.stream_jitter_ns = get_seconds_ns(d, "stream_jitter", 0);
    c.idle_timeout_ns = get_seconds_ns(d, "idle_timeout", 60);
    c.header_timeout_ns = get_seconds_ns(d, "header_timeout", 10);
    c.max_header_bytes = static_cast<uint64_t>(get_int(d, "max_header_bytes", 65536, 0, INT64_MAX));
    c.max_body_bytes = static_cast<uint64_t>(get_int(d, "max_body_bytes", 64LL << 20, 0, INT64_MAX));
    c.max_concurrent_streams = static_cast<uint32_t>(get_int(d, "max_concurrent_streams", 100, 0, UINT32_MAX));

    if (py::object v = value_of(d, "alpn")) {
      if (!py::isinstance<py::list>(v) && !py::isinstance<py::tuple>(v)) config_error("alpn", "expected a list of protocol ids");
      // Joined as the core takes it, "h2,http/1.1"; nhb_server_create()
      // parses the list (an empty one means its default).
      for (const py::handle id : v) alpn_ += (alpn_.empty() ? "" : ",") + str_of(id, "alpn");
      c.alpn = alpn_.c_str();
    }
    if (py::object v = value_of(d, "tls")) {
      if (!py::isinstance<py::dict>(v)) config_error("tls", "expected a dict with cert and key, or self_signed");
      py::dict t = v.cast<py::dict>();
      check_keys(t, {"cert", "key", "self_signed", "san", "client_ca"}, "tls");
      c.tls = 1;
      if (py::object cert = value_of(t, "cert")) tls_cert_ = str_of(cert, "tls: cert");
      if (py::object key = value_of(t, "key")) tls_key_ = str_of(key, "tls: key");
      c.tls_cert_file = tls_cert_.c_str();
      c.tls_key_file = tls_key_.c_str();
      if (py::object ca = value_of(t, "client_ca")) {
        tls_client_ca_ = str_of(ca, "tls: client_ca");
        c.tls_client_ca = tls_client_ca_.c_str();
      }
      if (py::object ss = value_of(t, "self_signed")) {
        if (!py::isinstance<py::bool_>(ss)) config_error("tls", "self_signed: expected a bool");
        c.tls_self_signed = ss.cast<bool>() ? 1 : 0;
      }
      if (py::object san = value_of(t, "san")) {
        if (!py::isinstance<py::list>(san) && !py::isinstance<py::tuple>(san)) config_error("tls", "san: expected a list of names");
        for (const py::handle name : san) tls_san_.push_back(str_of(name, "tls: san"));
        // At most the array's entries are filled; the core refuses a count
        // over NHB_SERVER_MAX_SAN.
        c.ntls_san = tls_san_.size() > INT_MAX ? INT_MAX : static_cast<int>(tls_san_.size());
        for (size_t i = 0; i < tls_san_.size() && i < NHB_SERVER_MAX_SAN; i++) c.tls_san[i] = tls_san_[i].c_str();
      }
    }

    char err[300] = {0};
    int r = nhb_server_create(&c, &server_, err, sizeof(err));
    if (r == NHB_EINVAL) throw py::value_error(err[0] ? err : "invalid server config");
    if (r < 0) raise_core_error(r, "cannot create the server");
  }

  ~Server() {
    py::gil_scoped_release release;
    nhb_server_destroy(server_);
  }

  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  void start() {
    int r;
    {
      py::gil_scoped_release release;
      r = nhb_server_start(server_);
    }
    if (r == NHB_ESTATE) throw std::runtime_error("the server was already started");
    if (r < 0) {
      const char* why = nhb_server_error(server_);
      if (why && *why) throw std::runtime_error(std::string("cannot start the server: ") + why);
      raise_core_error(r, "cannot start the server");
    }
  }

  py::list bound(nhb_server_socket_t kind, bool with_kind) const {
    py::list out;
    int n = nhb_server_bound_count(server_, kind);
    for (int i = 0; i < n; i++) {
      sockaddr_storage ss{};
      unsigned len = sizeof(ss);
      if (nhb_server_bound(server_, kind, i, &ss, &len) == 0) out.append(addr_to_py(ss, len, with_kind));
    }
    return out;
  }

  py::list addresses() const { return bound(NHB_SOCK_HTTP, true); }
  py::object admin_address() const {
    py::list l = bound(NHB_SOCK_ADMIN, false);
    return l.empty() ? py::object(py::none()) : py::object(l[0]);
  }
  py::list tcp_echo_addresses() const { return bound(NHB_SOCK_TCP_ECHO, false); }
  py::list udp_echo_addresses() const { return bound(NHB_SOCK_UDP_ECHO, false); }
  py::list tcp_proxy_addresses() const { return bound(NHB_SOCK_TCP_PROXY, false); }
  py::list redirect_addresses() const { return bound(NHB_SOCK_REDIRECT, false); }
  py::list http_fanout_addresses() const { return bound(NHB_SOCK_HTTP_FANOUT, false); }
  py::list quic_addresses() const { return bound(NHB_SOCK_QUIC, false); }

  py::dict stats() const {
    nhb_server_stats s;
    nhb_server_stats_get(server_, &s);
    py::dict d;
    // Keys in NHB_SERVER_STAT_MAP's order (nhb.h), the order of SERVER_STATS.
#define NHB_PY_COUNT(name) d[#name] = s.name;
#define NHB_PY_STATUS(name)                                                          \
  {                                                                                  \
    py::dict codes;                                                                  \
    for (int i = 0; i < NHB_SERVER_STATUS_MAX; i++)                                  \
      if (s.name[i]) codes[py::str(std::to_string(i))] = s.name[i];                  \
    d[#name] = codes;                                                                \
  }
    NHB_SERVER_STAT_MAP(NHB_PY_COUNT, NHB_PY_STATUS)
#undef NHB_PY_COUNT
#undef NHB_PY_STATUS
    return d;
  }

  py::object tls_cert_pem() const {
    const char* pem = nhb_server_tls_cert_pem(server_);
    return pem ? py::object(py::str(pem)) : py::object(py::none());
  }

  void stop() {
    py::gil_scoped_release release;
    nhb_server_stop(server_);
  }

 private:
  nhb_server_config config_{};
  std::vector<int> cpus_;
  std::string response_json_;
  std::string echo_defaults_;
  std::string debug_path_;
  std::string alpn_;
  std::string forward_prefix_;
  std::string tls_cert_;
  std::string tls_key_;
  std::string tls_client_ca_;
  std::vector<std::string> tls_san_;
  // A deque: the strings' addresses stay put as more are added.
  std::deque<std::string> fanout_strings_;
  nhb_server* server_ = nullptr;
};

}  // namespace

void register_server(py::module_& m) {
  py::class_<Server>(m, "Server")
      .def(py::init<const py::dict&>(), py::arg("config"))
      .def("start", &Server::start)
      .def_property_readonly("addresses", &Server::addresses)
      .def_property_readonly("admin_address", &Server::admin_address)
      .def_property_readonly("tcp_echo_addresses", &Server::tcp_echo_addresses)
      .def_property_readonly("udp_echo_addresses", &Server::udp_echo_addresses)
      .def_property_readonly("tcp_proxy_addresses", &Server::tcp_proxy_addresses)
      .def_property_readonly("redirect_addresses", &Server::redirect_addresses)
      .def_property_readonly("http_fanout_addresses", &Server::http_fanout_addresses)
      .def_property_readonly("quic_addresses", &Server::quic_addresses)
      .def_property_readonly("tls_cert_pem", &Server::tls_cert_pem)
      .def("stats", &Server::stats)
      .def("stop", &Server::stop);

  // The names of stats(), in order: nhbench._names.SERVER_STATS is checked
  // against this (tests/test_server_tls.py).
  py::list names;
#define NHB_PY_NAME(name) names.append(#name);
  NHB_SERVER_STAT_MAP(NHB_PY_NAME, NHB_PY_NAME)
#undef NHB_PY_NAME
  m.attr("SERVER_STATS") = py::tuple(names);
}
