"""Every option nhbench takes, in one place: the run's `Options`, the test server's
`ServerOptions`, and the value grammar they share (durations, sizes, CPU lists, headers,
addresses: `_values`).

The CLI's flags and the sweep's scenario keys are built from these models; everything above
this package imports it through this face (an import-linter contract), never a private module.
"""

from __future__ import annotations

from ._config_files import load_config_file
from ._docs import markdown_table, render_option_docs
from ._echo import parse_echo_params
from ._errors import format_validation_error
from ._flags import Flag, add_model_flags, flag_of, model_flags
from ._listen import DEFAULT_LISTEN, parse_listen
from ._nofile import limit_text, nofile_refusal, raise_nofile
from ._request_set import request_specs
from ._response import (
    MAX_RESPONSE_BODY_SIZE,
    RESPONSE_FIELDS,
    LinearDelay,
    ResponseHeader,
    ResponseOptions,
)
from ._response_checks import (
    ResponseCheck,
    core_check_error,
    parse_check,
    parse_checks,
    run_checks,
)
from ._run import Options, make_options
from ._run_load import DEFAULT_DURATION
from ._run_output import DEFAULT_PERCENTILES
from ._run_proxy import parse_proxy_url, proxy_tls
from ._run_push import DEFAULT_FLUSH_INTERVAL, MIN_FLUSH_INTERVAL
from ._run_targets import target_addresses
from ._run_tls import check_key_pair, client_cert_pem
from ._run_trace import TraceTarget, trace_target
from ._run_until import UNTIL_MIN_INTERVALS, UNTIL_STATISTICS, parse_until, until_targets
from ._scrape import (
    DEFAULT_SCRAPE_TIMEOUT,
    MetricSelector,
    parse_metric_selector,
    parse_scrape_sources,
)
from ._server import ServerOptions, fanout_target, fanout_url, make_server_options
from ._stats_sinks import apply_stats_sinks, parse_stats_sink
from ._targets import (
    parse_bind_config,
    parse_resolve_entry,
    parse_unix_url,
    source_family_refusal,
)
from ._tls_context import parse_tls_context
from ._ui_limits import DEFAULT_UI_LIMITS, UILimits, allowed_target
from ._values import (
    LATENCY_UNITS,
    MAX_DURATION,
    UNIT_SECONDS,
    CpuCheck,
    Target,
    affinity_cpus,
    format_address,
    format_cpu_list,
    format_json_duration,
    machine_cpus,
    parse_address,
    parse_cpu_list,
    parse_duration,
    parse_go_duration,
    parse_header,
    parse_json_duration,
    parse_server_duration,
    parse_size,
    parse_uri,
    resolve,
    resolve_all,
)

__all__ = [
    "PodRef",
    "ServiceRef",
    "parse_pod_ref",
    "parse_service_ref",
    "DEFAULT_SCRAPE_TIMEOUT",
    "MetricSelector",
    "parse_metric_selector",
    "parse_scrape_sources",
    "ResponseCheck",
    "parse_check",
    "parse_checks",
    "run_checks",
    "core_check_error",
    "apply_stats_sinks",
    "DEFAULT_UI_LIMITS",
    "UILimits",
    "allowed_target",
    "check_key_pair",
    "client_cert_pem",
    "TraceTarget",
    "trace_target",
    "DEFAULT_DURATION",
    "DEFAULT_FLUSH_INTERVAL",
    "MIN_FLUSH_INTERVAL",
    "DEFAULT_LISTEN",
    "DEFAULT_PERCENTILES",
    "LATENCY_UNITS",
    "MAX_DURATION",
    "MAX_RESPONSE_BODY_SIZE",
    "RESPONSE_FIELDS",
    "UNIT_SECONDS",
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
    "format_json_duration",
    "format_validation_error",
    "load_config_file",
    "machine_cpus",
    "make_options",
    "make_server_options",
    "fanout_target",
    "fanout_url",
    "markdown_table",
    "model_flags",
    "parse_address",
    "parse_bind_config",
    "parse_proxy_url",
    "proxy_tls",
    "parse_cpu_list",
    "parse_duration",
    "parse_echo_params",
    "parse_go_duration",
    "parse_header",
    "parse_json_duration",
    "parse_listen",
    "parse_server_duration",
    "parse_size",
    "parse_resolve_entry",
    "parse_stats_sink",
    "parse_tls_context",
    "parse_unix_url",
    "source_family_refusal",
    "parse_uri",
    "render_option_docs",
    "request_specs",
    "resolve",
    "resolve_all",
    "target_addresses",
    "UNTIL_MIN_INTERVALS",
    "UNTIL_STATISTICS",
    "parse_until",
    "until_targets",
]

# The sweep's options and the grammars they need (stop rules, step plans), kept apart from
# the list above so that the run and server options can change without touching these lines.
# The search settings of ``nhbench adapt``.
from ._adapt import (
    ADAPT_KEYS,
    DEFAULT_MAX_SEARCH_STEPS,
    NOT_IN_AN_ADAPT,
    AdaptOptions,
    parse_precision,
    split_adapt,
)
from ._k8s import PodRef, ServiceRef, parse_pod_ref, parse_service_ref
from ._rules import (
    HEADLINE_STATISTIC,
    DetailedMeasures,
    Measures,
    SloCheck,
    StopRule,
    format_check,
    format_rule_value,
    latency_points,
    parse_rule,
    parse_rules,
)
from ._steps import (
    DEFAULT_STEP_RPS,
    MAX_COOLDOWN,
    MAX_STEPS,
    PLAN_KEYS,
    check_cooldown,
    check_extension,
    parse_rate,
    parse_step_list,
    parse_steps,
    plan_steps,
    round_rate,
    step_size,
)
from ._sweep import (
    CLI_ONLY,
    EMBEDDED_URL,
    NOT_IN_A_SWEEP,
    RUN_OPTION_KEYS,
    SCENARIO_KEYS,
    TABLE_LAYOUTS,
    SweepOptions,
    parse_watch_cpus,
    sweep_options_table,
    validate_sweep,
)

__all__ += [
    "limit_text",
    "nofile_refusal",
    "raise_nofile",
    "ADAPT_KEYS",
    "DEFAULT_MAX_SEARCH_STEPS",
    "NOT_IN_AN_ADAPT",
    "AdaptOptions",
    "parse_precision",
    "split_adapt",
    "CLI_ONLY",
    "HEADLINE_STATISTIC",
    "DetailedMeasures",
    "DEFAULT_STEP_RPS",
    "EMBEDDED_URL",
    "MAX_COOLDOWN",
    "MAX_STEPS",
    "NOT_IN_A_SWEEP",
    "PLAN_KEYS",
    "RUN_OPTION_KEYS",
    "SCENARIO_KEYS",
    "Measures",
    "SloCheck",
    "StopRule",
    "SweepOptions",
    "TABLE_LAYOUTS",
    "check_cooldown",
    "check_extension",
    "format_check",
    "format_rule_value",
    "latency_points",
    "parse_rate",
    "parse_rule",
    "parse_rules",
    "parse_step_list",
    "parse_steps",
    "parse_watch_cpus",
    "plan_steps",
    "round_rate",
    "step_size",
    "sweep_options_table",
    "validate_sweep",
]

