// stats_convert.hpp: C statistics -> the Python dicts of the binding contract.
#pragma once

#include "register.hpp"

extern "C" {
#include "nhb.h"
}

py::dict hist_to_dict(const nhb_hist* h);
py::dict stream_to_dict(const nhb_stream* s);
py::dict stats_to_dict(const nhb_stats* st);
