// register.hpp: one register_* function per area of the core, as in boost-histogram.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

namespace py = pybind11;

void register_client(py::module_& m);
void register_server(py::module_& m);
void register_histogram(py::module_& m);
void register_calibrate(py::module_& m);
void register_version(py::module_& m);

// Turns a numeric IPv4/IPv6 address and a port into a sockaddr. Throws
// ValueError naming `what` when the address is not numeric.
unsigned fill_sockaddr(const std::string& host, int port, unsigned char* out, const char* what);
// The inverse: (host, port) from a sockaddr.
py::tuple sockaddr_to_tuple(const void* addr);
// Raises RuntimeError with the core's message for a negative code.
[[noreturn]] void raise_core_error(int err, const std::string& context);
