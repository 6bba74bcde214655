// register_server.cpp: nhbench._core.Server, the test server.
#include <string>
#include <vector>

#include "register.hpp"

#include <pybind11/stl.h>

#include <netinet/in.h>
#include <sys/socket.h>

extern "C" {
#include "nhb.h"
}

namespace {

class Server {
 public:
  explicit Server(const py::dict& d) {
    nhb_server_config& c = config_;
    c = nhb_server_config{};
    auto listen = d.contains("listen") ? d["listen"].cast<std::vector<std::pair<std::string, int>>>()
                                       : std::vector<std::pair<std::string, int>>{{"127.0.0.1", 0}};
    if (listen.empty() || listen.size() > NHB_SERVER_MAX_LISTEN)
      throw py::value_error("listen: between 1 and 16 addresses");
    c.nlisten = static_cast<int>(listen.size());
    for (size_t i = 0; i < listen.size(); i++)
      c.listen_addr_len[i] = fill_sockaddr(listen[i].first, listen[i].second, c.listen_addr[i], "listen");
    c.nworkers = d.contains("workers") ? d["workers"].cast<int>() : 1;
    if (c.nworkers < 1 || c.nworkers > 1024) throw py::value_error("workers: must be 1-1024");
    if (d.contains("cpus")) cpus_ = d["cpus"].cast<std::vector<int>>();
    if (!cpus_.empty()) {
      while (static_cast<int>(cpus_.size()) < c.nworkers) cpus_.push_back(cpus_[cpus_.size() % cpus_.size()]);
      c.cpus = cpus_.data();
    }
    c.response_body_size = d.contains("response_body_size") ? d["response_body_size"].cast<uint64_t>() : 0;
    double delay = d.contains("static_delay") ? d["static_delay"].cast<double>() : 0.0;
    if (delay < 0) throw py::value_error("static_delay: must be >= 0");
    c.static_delay_ns = static_cast<uint64_t>(delay * 1e9);
    if (d.contains("response_headers")) {
      for (const auto& [name, value] : d["response_headers"].cast<std::vector<std::pair<std::string, std::string>>>()) {
        if (name.find_first_of("\r\n:") != std::string::npos || value.find_first_of("\r\n") != std::string::npos)
          throw py::value_error("response_headers: CR, LF or ':' in a header");
        headers_ += name + ": " + value + "\r\n";
      }
    }
    c.extra_headers = headers_.data();
    c.extra_headers_len = headers_.size();
    int r = nhb_server_create(&c, &server_);
    if (r < 0) raise_core_error(r, "cannot create the server");
  }

  ~Server() {
    py::gil_scoped_release release;
    nhb_server_destroy(server_);
  }

  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  void start() {
    int r = nhb_server_start(server_);
    if (r < 0) raise_core_error(r, "cannot start the server");
  }

  py::list addresses() const {
    py::list out;
    for (int i = 0; i < config_.nlisten; i++) {
      sockaddr_storage ss{};
      unsigned len = sizeof(ss);
      if (nhb_server_address(server_, i, &ss, &len) == 0) out.append(sockaddr_to_tuple(&ss));
    }
    return out;
  }

  py::dict stats() const {
    nhb_server_stats s;
    nhb_server_stats_get(server_, &s);
    py::dict d;
    d["requests"] = s.requests;
    d["connections_total"] = s.connections_total;
    d["connections_active"] = s.connections_active;
    d["rx_bytes"] = s.rx_bytes;
    d["tx_bytes"] = s.tx_bytes;
    d["bad_requests"] = s.bad_requests;
    return d;
  }

  void stop() {
    py::gil_scoped_release release;
    nhb_server_stop(server_);
  }

 private:
  nhb_server_config config_{};
  std::vector<int> cpus_;
  std::string headers_;
  nhb_server* server_ = nullptr;
};

}  // namespace

void register_server(py::module_& m) {
  py::class_<Server>(m, "Server")
      .def(py::init<const py::dict&>(), py::arg("config"))
      .def("start", &Server::start)
      .def_property_readonly("addresses", &Server::addresses)
      .def("stats", &Server::stats)
      .def("stop", &Server::stop);
}
