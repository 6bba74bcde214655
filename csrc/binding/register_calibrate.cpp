// register_calibrate.cpp: the host calibration entries (`nhbench calibrate`).
// Each blocks for as long as it measures, with the GIL released so that other
// Python threads (a progress line, a server in the same process) keep running.
#include <memory>
#include <string>

#include "register.hpp"
#include "stats_convert.hpp"

extern "C" {
#include "nhb.h"
}

void register_calibrate(py::module_& m) {
  m.def(
      "calibrate_wakeups",
      [](const std::string& strategy, uint32_t count, uint64_t interval_ns) {
        nhb_idle_strategy_t s;
        if (strategy == "poll") s = NHB_IDLE_POLL;
        else if (strategy == "spin") s = NHB_IDLE_SPIN;
        else if (strategy == "sleep") s = NHB_IDLE_SLEEP;
        else throw py::value_error("strategy must be poll, spin or sleep, not '" + strategy + "'");
        auto h = std::make_unique<nhb_hist>();
        nhb_hist_init(h.get());
        int r;
        {
          py::gil_scoped_release release;
          r = nhb_calibrate_wakeups(s, count, interval_ns, h.get());
        }
        if (r < 0) raise_core_error(r, "calibrate " + strategy + " wake-ups");
        return hist_to_dict(h.get());
      },
      py::arg("strategy"), py::arg("count"), py::arg("interval_ns"),
      "`count` wake-ups `interval_ns` apart with the sequencer's idle strategy; the "
      "histogram dict of their lateness (ns).");
  m.def(
      "calibrate_clock_read_ns",
      [](uint32_t iterations) {
        py::gil_scoped_release release;
        return nhb_calibrate_clock_read_ns(iterations);
      },
      py::arg("iterations"), "Mean ns of one CLOCK_MONOTONIC read over `iterations`.");
  m.def(
      "calibrate_syscall_ns",
      [](uint32_t iterations) {
        py::gil_scoped_release release;
        return nhb_calibrate_syscall_ns(iterations);
      },
      py::arg("iterations"), "Mean ns of one trivial system call over `iterations`.");
}
