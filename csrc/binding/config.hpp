// config.hpp: the one conversion layer between a Python config dict and the
// C core's config structs (nhb_client_config for ClientRun, nhb_server_config
// for Server).
//
// Python (pydantic, nhbench.options) owns defaults and user-facing ranges and
// validates first; the dicts nhbench._core_config builds (client_core_config,
// server_core_config) reach these readers already valid. The C core's create
// functions check what would make the core unsafe (array counts, lengths,
// values its arithmetic or event loop cannot take), once, for every caller.
// What is checked here is only what the conversion itself needs, because the
// core never sees the Python value: its type (so that a cast cannot wrap or
// truncate: an integer must fit the C field it fills), a time that must become
// nanoseconds without overflow, a name that must become an enum or a counter
// index, a unix socket path that must fit sun_path, unknown keys. Every such
// mistake raises ValueError through config_error(), "<key>: <what>", naming
// the key; the core's own refusals come back as ValueError with its
// "<key>: <what>" text. See docs/architecture.md, "Binding contract".
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <initializer_list>
#include <string>

namespace py = pybind11;

struct nhb_sockaddr;

namespace nhb_config {

// ValueError "<key>: <what>": the only way a config reader fails.
[[noreturn]] void config_error(const std::string& key, const std::string& what);

// The value of `key`, or a null object when it is absent or None (= the
// default).
py::object value_of(const py::dict& d, const char* key);

// Raises for a key of `d` that is not in `known` ("unknown config key" when
// `where` is empty, else "<where>: unknown key").
void check_keys(const py::dict& d, std::initializer_list<const char*> known, const char* where = "");

// `key` converted by pybind11's caster (str and bytes for std::string, int
// for integers, int or float for double, lists for vectors), or `fallback`
// when absent; a value of the wrong type raises "<key>: has the wrong type".
template <typename T>
T get_as(const py::dict& d, const char* key, T fallback) {
  if (!d.contains(key)) return fallback;
  try {
    return d[key].cast<T>();
  } catch (const py::cast_error&) {
    config_error(key, "has the wrong type");
  }
}

// An integer (not a bool) in [lo, hi], the range of the C field it fills (not
// a user range); `dflt` when absent or None.
int64_t get_int(const py::dict& d, const char* key, int64_t dflt, int64_t lo, int64_t hi);
// The largest number of seconds a time may have: 1e10 s (317 years) in
// nanoseconds stays below 2^64, with room for adding a monotonic clock.
constexpr double kMaxSeconds = 1e10;
// Seconds (int or float, not a bool), finite, in [0, kMaxSeconds], as
// nanoseconds.
uint64_t get_seconds_ns(const py::dict& d, const char* key, double dflt);
// One of `names` (a string); returns its index.
int get_choice(const py::dict& d, const char* key, const char* dflt, std::initializer_list<const char*> names);

// Readers of one element (inside a list or tuple); `key` names it in errors.
std::string str_of(const py::handle& v, const std::string& key);
int port_of(const py::handle& v, const std::string& key);
py::sequence tuple_of(const py::handle& v, size_t n, const std::string& key, const char* shape);
// A Unix socket path (or "@name", a Linux abstract name) as a sockaddr_un;
// refuses an empty path, a NUL, or one longer than sun_path.
void fill_unix(const std::string& path, nhb_sockaddr* out, const std::string& key);

}  // namespace nhb_config
