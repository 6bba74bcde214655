// module.cpp: the private compiled module nhbench._core.
#include "register.hpp"

extern "C" {
#include "nhb.h"
}

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdexcept>
#include <cstring>

unsigned fill_sockaddr(const std::string& host, int port, unsigned char* out, const char* what) {
  if (port < 0 || port > 65535) throw py::value_error(std::string(what) + ": port must be 0-65535");
  std::memset(out, 0, 28);
  auto* in4 = reinterpret_cast<sockaddr_in*>(out);
  if (inet_pton(AF_INET, host.c_str(), &in4->sin_addr) == 1) {
    in4->sin_family = AF_INET;
    in4->sin_port = htons(static_cast<uint16_t>(port));
    return sizeof(sockaddr_in);
  }
  auto* in6 = reinterpret_cast<sockaddr_in6*>(out);
  if (inet_pton(AF_INET6, host.c_str(), &in6->sin6_addr) == 1) {
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(static_cast<uint16_t>(port));
    return sizeof(sockaddr_in6);
  }
  throw py::value_error(std::string(what) + ": not a numeric IP address: '" + host + "'");
}

py::tuple sockaddr_to_tuple(const void* addr) {
  char buf[INET6_ADDRSTRLEN] = {0};
  const auto* sa = static_cast<const sockaddr*>(addr);
  if (sa->sa_family == AF_INET6) {
    const auto* in6 = static_cast<const sockaddr_in6*>(addr);
    inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof(buf));
    return py::make_tuple(std::string(buf), ntohs(in6->sin6_port));
  }
  const auto* in4 = static_cast<const sockaddr_in*>(addr);
  inet_ntop(AF_INET, &in4->sin_addr, buf, sizeof(buf));
  return py::make_tuple(std::string(buf), ntohs(in4->sin_port));
}

void raise_core_error(int err, const std::string& context) {
  // A RuntimeError that also carries the code and its name, so that the Python side can
  // hand them on (nhbench.CoreError.code and .name) without parsing the message.
  const char* name = nhb_err_name(err);
  py::object exc = py::reinterpret_borrow<py::object>(PyExc_RuntimeError)(
      context + ": " + nhb_strerror(err) + " (" + name + ")");
  exc.attr("code") = err;
  exc.attr("name") = name;
  PyErr_SetObject(PyExc_RuntimeError, exc.ptr());
  throw py::error_already_set();
}

PYBIND11_MODULE(_core, m) {
  m.doc() = "nhbench's C core (private; use the nhbench package).";
  m.attr("__version__") = nhb_version();
  m.attr("HIST_LOWEST") = NHB_HIST_LOWEST;
  m.attr("HIST_HIGHEST") = NHB_HIST_HIGHEST;
  m.attr("HIST_SIGFIG") = NHB_HIST_SIGFIG;
  m.attr("HIST_COUNTS_LEN") = NHB_HIST_COUNTS_LEN;
  register_histogram(m);
  register_client(m);
  register_server(m);
  register_calibrate(m);
  register_version(m);
}
