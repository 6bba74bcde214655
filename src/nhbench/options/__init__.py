"""Every option nhbench takes, in one place: the run's `Options`, the test server's
`ServerOptions`, and the value grammar they share (durations, CPU lists, addresses).

The CLI's flags and the sweep's scenario keys are built from these models; everything above
this package imports it through this face (an import-linter contract), never a private module.
"""

from __future__ import annotations

from ._flags import Flag, add_model_flags, flag_of, model_flags
from ._run import (
    DEFAULT_DURATION,
    DEFAULT_PERCENTILES,
    CpuCheck,
    Options,
    Target,
    affinity_cpus,
    format_cpu_list,
    format_validation_error,
    machine_cpus,
    make_options,
    parse_cpu_list,
    parse_duration,
    parse_uri,
)
from ._server import (
    DEFAULT_LISTEN,
    MAX_RESPONSE_BODY_SIZE,
    RESPONSE_FIELDS,
    LinearDelay,
    ResponseHeader,
    ResponseOptions,
    ServerOptions,
    format_address,
    format_server_error,
    load_config_file,
    make_server_options,
    parse_address,
    parse_echo_params,
    parse_listen,
)

__all__ = [
    "DEFAULT_DURATION",
    "DEFAULT_LISTEN",
    "DEFAULT_PERCENTILES",
    "MAX_RESPONSE_BODY_SIZE",
    "RESPONSE_FIELDS",
    "CpuCheck",
    "Flag",
    "LinearDelay",
    "Options",
    "ResponseHeader",
    "ResponseOptions",
    "ServerOptions",
    "Target",
    "add_model_flags",
    "affinity_cpus",
    "flag_of",
    "format_address",
    "format_cpu_list",
    "format_server_error",
    "format_validation_error",
    "load_config_file",
    "machine_cpus",
    "make_options",
    "make_server_options",
    "model_flags",
    "parse_address",
    "parse_cpu_list",
    "parse_duration",
    "parse_echo_params",
    "parse_listen",
    "parse_uri",
]
