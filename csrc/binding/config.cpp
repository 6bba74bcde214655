// config.cpp: the config readers of config.hpp.
#include "config.hpp"

#include <cmath>
#include <cstddef>
#include <cstring>

#include <sys/socket.h>
#include <sys/un.h>

extern "C" {
#include "nhb.h"
}

namespace nhb_config {

void config_error(const std::string& key, const std::string& what) { throw py::value_error(key + ": " + what); }

py::object value_of(const py::dict& d, const char* key) {
  if (!d.contains(key)) return py::object();
  py::object v = d[key];
  return v.is_none() ? py::object() : v;
}

void check_keys(const py::dict& d, std::initializer_list<const char*> known, const char* where) {
  for (const auto& item : d) {
    if (!py::isinstance<py::str>(item.first)) {
      if (*where) config_error(where, "unknown key '?'");
      throw py::value_error("config keys must be strings");
    }
    std::string key = item.first.cast<std::string>();
    bool found = false;
    for (const char* k : known) found |= key == k;
    if (found) continue;
    if (*where) config_error(where, "unknown key '" + key + "'");
    throw py::value_error("unknown config key '" + key + "'");
  }
}

int64_t get_int(const py::dict& d, const char* key, int64_t dflt, int64_t lo, int64_t hi) {
  py::object v = value_of(d, key);
  if (!v) return dflt;
  if (!py::isinstance<py::int_>(v) || py::isinstance<py::bool_>(v)) config_error(key, "expected an integer");
  int64_t n;
  try {
    n = v.cast<int64_t>();
  } catch (const py::cast_error&) {
    config_error(key, "integer out of range");
  }
  if (n < lo || n > hi) config_error(key, "must be " + std::to_string(lo) + "-" + std::to_string(hi));
  return n;
}

uint64_t get_seconds_ns(const py::dict& d, const char* key, double dflt) {
  py::object v = value_of(d, key);
  double s = dflt;
  if (v) {
    if (!(py::isinstance<py::float_>(v) || py::isinstance<py::int_>(v)) || py::isinstance<py::bool_>(v))
      config_error(key, "expected a number of seconds");
    s = v.cast<double>();
  }
  // A negative, infinite or NaN time would wrap the unsigned nanoseconds the
  // core keeps, and a larger one would overflow them.
  if (!std::isfinite(s) || s < 0 || s > kMaxSeconds) config_error(key, "must be 0-1e10 seconds");
  return static_cast<uint64_t>(std::llround(s * 1e9));
}

int get_choice(const py::dict& d, const char* key, const char* dflt, std::initializer_list<const char*> names) {
  std::string v = get_as<std::string>(d, key, dflt);
  int i = 0;
  std::string list;
  for (const char* name : names) {
    if (v == name) return i;
    list += (i == 0 ? "" : (static_cast<size_t>(i) + 1 == names.size() ? " or " : ", ")) + std::string(name);
    i++;
  }
  config_error(key, "must be " + list);
}

std::string str_of(const py::handle& v, const std::string& key) {
  if (!py::isinstance<py::str>(v)) config_error(key, "expected a string");
  return v.cast<std::string>();
}

int port_of(const py::handle& v, const std::string& key) {
  if (!py::isinstance<py::int_>(v) || py::isinstance<py::bool_>(v)) config_error(key, "port must be an integer");
  long port = v.cast<long>();
  if (port < 0 || port > 65535) config_error(key, "port must be 0-65535");
  return static_cast<int>(port);
}

py::sequence tuple_of(const py::handle& v, size_t n, const std::string& key, const char* shape) {
  if (!py::isinstance<py::sequence>(v) || py::isinstance<py::str>(v) || py::len(v) != n)
    config_error(key, std::string("expected ") + shape);
  return py::reinterpret_borrow<py::sequence>(v);
}

void fill_unix(const std::string& path, nhb_sockaddr* out, const std::string& key) {
  sockaddr_un un{};
  un.sun_family = AF_UNIX;
  if (path.empty() || path == "@") config_error(key, "empty unix socket path");
  if (path.find('\0') != std::string::npos) config_error(key, "NUL in unix socket path");
  if (path.size() >= sizeof(un.sun_path)) config_error(key, "unix socket path longer than 107 bytes: '" + path + "'");
  size_t len;
  if (path[0] == '@') {
    // Linux abstract namespace: a leading NUL, no file.
    un.sun_path[0] = '\0';
    std::memcpy(un.sun_path + 1, path.data() + 1, path.size() - 1);
    len = offsetof(sockaddr_un, sun_path) + path.size();
  } else {
    std::memcpy(un.sun_path, path.data(), path.size());
    len = offsetof(sockaddr_un, sun_path) + path.size() + 1;
  }
  std::memcpy(out->bytes, &un, sizeof(un));
  out->len = static_cast<unsigned>(len);
}

}  // namespace nhb_config
