"""Nighthawk's ``Output`` document: the proto3 JSON mapping of ``nighthawk.client.Output``
(api/client/output.proto, options.proto; our copies are in proto/ at the repo root) for a
`Result`, as a plain dict, and the way back.

Every Nighthawk-derived output format (``json``, ``yaml``, ``dotted``, ``csv``,
``prometheus``, ``fortio``, ``experimental_fortio_pedantic``) is a function of this document,
as Nighthawk's formatters are functions of its ``Output`` proto; so `nhbench transform` can
turn a file Nighthawk wrote into any of them without building a `Result` first.

The mapping follows what Nighthawk itself writes (its test data
test/test_data/output_formatter.json.gold and .medium.proto.gold are the reference): 64-bit
integers as strings, Durations as ``"0.002s"``, Timestamps in RFC 3339 with a ``Z``,
wrapper types unwrapped (``"connections": 100``), enum wrappers as ``{"value": "POLL"}``,
empty lists and maps written, doubles without a ``.0`` when they are whole.

What Nighthawk's schema has no place for travels in Nighthawk's own extension point, one
``Result.user_defined_outputs`` entry per result entry::

    {"plugin_name": "nhbench",
     "typed_output": {"@type": "type.googleapis.com/google.protobuf.Struct",
                      "value": {"statistics": {"<id>": {"hdr_histogram": "HISTFAAA...",
                                                        "mean": 0.00123456789, ...}},
                                "run": {...}}}}

``statistics`` holds, per statistic of that entry, the encoded HdrHistogram and the exact
mean/pstdev when the Duration (1 ns resolution) cannot carry them; ``zero_counters`` names
the counters that are zero (Nighthawk writes only the others). ``run`` (on the ``global``
entry only) holds the run-level fields: nhbench's version string, terminated_by,
failed_predicates, interrupted, error, insecure, the timeline, the per-endpoint
statistics (``endpoints``, when the connections went to several), a distributed run's
``hosts`` and ``scheduled_start`` (docs/distributed.md), and ``options``: every option
whose value the Nighthawk options and nhbench's defaults do not give back exactly
(nhbench-only options such as ``request_timeout`` or ``stats_interval`` when they are not at
their default, a fractional rps, ...). `result_fields` reads
both parts back, so the JSON is lossless; a strict protobuf parse accepts it because
``google.protobuf.Struct`` is a well-known type.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from .._predicates import DEFAULT_FAILURE_PREDICATES
from ..options import Options, format_json_duration, parse_json_duration
from ._nhfields import json_double

if TYPE_CHECKING:
    from .._result import Result, Statistic, WorkerResult
    from .._timeline import IntervalRecord

__all__ = [
    "PLUGIN_NAME",
    "command_line_options",
    "dumps",
    "format_timestamp",
    "is_nighthawk_document",
    "nhbench_extension",
    "nighthawk_output",
    "options_from_command_line",
    "result_fields",
    "statistic_document",
]

#: The ``plugin_name`` of nhbench's ``user_defined_outputs`` entry.
PLUGIN_NAME = "nhbench"
_STRUCT_TYPE = "type.googleapis.com/google.protobuf.Struct"
# Nighthawk's max_requests_per_connection default, its spelling of "unlimited"
# (options.proto says 4294937295 in a comment; the code uses 2^32 - 1).
_UINT32_MAX = 2**32 - 1
# The names of envoy.config.core.v3.RequestMethod that nhbench sends.
_METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH")


# ---- number and time spellings ---------------------------------------------------------------


def _double(value: float) -> float | int:
    # Protobuf's JSON printer writes a whole double without a fraction ("percentile": 0,
    # "raw_value": 14); Python's json would write 0.0. An int prints the same digits.
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def format_timestamp(moment: datetime) -> str:
    """A protobuf JSON Timestamp: RFC 3339 in UTC with ``Z`` and 0, 3, 6 or 9 fraction
    digits, as protobuf prints them (``"2009-02-13T23:31:31.567Z"``)."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(timezone.utc)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    micros = moment.microsecond
    if micros == 0:
        return f"{text}Z"
    if micros % 1000 == 0:
        return f"{text}.{micros // 1000:03d}Z"
    return f"{text}.{micros:06d}Z"


def _version_numbers(version: str) -> dict[str, int]:
    match = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", version)
    numbers = [int(n) for n in match.groups(default="0")] if match else [0, 0, 0]
    return {"major_number": numbers[0], "minor_number": numbers[1], "patch": numbers[2]}


# ---- Result -> document ------------------------------------------------------------------------


def statistic_document(statistic: Statistic) -> dict[str, Any]:
    """One ``nighthawk.client.Statistic`` (keys in the order Nighthawk writes them)."""
    out: dict[str, Any] = {"count": str(statistic.count), "id": statistic.id}
    if statistic.raw:
        out["percentiles"] = [
            {"percentile": _double(p.percentile), "count": str(p.count),
             "raw_value": _double(p.value)}
            for p in statistic.percentiles
        ]
        out.update(
            raw_mean=_double(statistic.mean), raw_pstdev=_double(statistic.pstdev),
            raw_min=str(int(statistic.min)), raw_max=str(int(statistic.max)),
        )
    else:
        out["percentiles"] = [
            {"percentile": _double(p.percentile), "count": str(p.count),
             "duration": format_json_duration(p.value)}
            for p in statistic.percentiles
        ]
        out.update(
            mean=format_json_duration(statistic.mean),
            pstdev=format_json_duration(statistic.pstdev),
            min=format_json_duration(statistic.min), max=format_json_duration(statistic.max),
        )
    return out


def _statistic_extras(statistic: Statistic) -> dict[str, Any]:
    # What the Statistic message cannot carry: the histogram itself, and any summary value
    # its spelling would round (a latency mean is a float of seconds; a Duration stops at
    # 1 ns; a raw min is a uint64).
    extras: dict[str, Any] = {}
    encoded = statistic.encoded()
    if encoded:
        extras["hdr_histogram"] = encoded
    for key in ("min", "max", "mean", "pstdev"):
        value = getattr(statistic, key)
        if statistic.raw:
            kept = float(int(value)) if key in ("min", "max") else value
        else:
            kept = parse_json_duration(format_json_duration(value))
        if kept != value:
            extras[key] = value
    return extras


def _user_defined_output(value: Mapping[str, Any]) -> dict[str, Any]:
    return {"plugin_name": PLUGIN_NAME,
            "typed_output": {"@type": _STRUCT_TYPE, "value": dict(value)}}


def _result_entry(entry: WorkerResult, run: Mapping[str, Any] | None) -> dict[str, Any]:
    counters = [{"name": c.name, "value": str(c.value)} for c in entry.counters if c.value]
    extension: dict[str, Any] = {}
    statistics = {s.id: extras for s in entry.statistics if (extras := _statistic_extras(s))}
    if statistics:
        extension["statistics"] = statistics
    zeros = [c.name for c in entry.counters if not c.value]
    if zeros:
        # Nighthawk writes only non-zero counters; nhbench keeps every counter it knows.
        extension["zero_counters"] = zeros
    if run is not None:
        extension["run"] = dict(run)
    out: dict[str, Any] = {
        "name": entry.name,
        "statistics": [statistic_document(s) for s in entry.statistics],
        "counters": counters,
        "user_defined_outputs": [_user_defined_output(extension)] if extension else [],
        "execution_duration": format_json_duration(entry.execution_duration),
    }
    if entry.execution_start is not None:
        out["execution_start"] = format_timestamp(entry.execution_start)
    return out


def command_line_options(options: Options) -> dict[str, Any]:
    """``nighthawk.client.CommandLineOptions`` for `options`, the fields Nighthawk's own
    toCommandLineOptions sets that have an nhbench counterpart (key order as Nighthawk
    writes them: messages, then maps and lists, then wrapped scalars)."""
    out: dict[str, Any] = {
        "output_format": {"value": options.output_format.upper()},
        "address_family": {"value": options.address_family.upper()},
        "request_options": {
            "request_method": options.request_method,
            "request_headers": [
                {"header": {"key": name, "value": value}, "append": False}
                for name, value in options.headers
            ],
            "request_body_size": options.request_body_size,
        },
    }
    if options.sni is not None:
        out["tls_context"] = {"sni": options.sni}
    out.update({
        "sequencer_idle_strategy": {"value": options.sequencer_idle_strategy.upper()},
        "termination_predicates": {k: str(v) for k, v in options.termination_predicate.items()},
        "failure_predicates": {k: str(v) for k, v in options.failure_predicates.items()},
        "labels": list(options.label),
        "stats_sinks": [],
        "user_defined_plugin_configs": [],
        # requests_per_second is a uint32: a fractional rate is written rounded here and
        # exactly in the nhbench extension.
        "requests_per_second": int(round(options.rps)),
        "connections": options.connections,
    })
    duration = options.effective_duration
    if duration is None:
        out["no_duration"] = True
    else:
        out["duration"] = format_json_duration(duration)
    out.update({
        "timeout": format_json_duration(options.timeout),
        # Nighthawk's Protocol enum has HTTP3 (over QUIC) too.
        "protocol": {"value": options.protocol.upper()},
        "concurrency": str(options.concurrency),
        "prefetch_connections": options.prefetch_connections,
        "burst_size": options.burst_size,
        "max_pending_requests": options.max_pending_requests,
        "max_active_requests": options.max_active_requests,
        "max_requests_per_connection": options.max_requests_per_connection or _UINT32_MAX,
        "uri": options.uri,
        "no_default_failure_predicates": options.no_default_failure_predicates,
        "open_loop": options.open_loop,
        "max_concurrent_streams": options.max_concurrent_streams,
    })
    if options.execution_id is not None:  # Nighthawk: a StringValue, written when set.
        out["execution_id"] = options.execution_id
    return out


def _options_extension(options: Options, mapped: Mapping[str, Any]) -> dict[str, Any]:
    # Every option whose value the Nighthawk options (plus nhbench's defaults) do not give
    # back exactly: nhbench-only options that are not at their default, a fractional rps,
    # a default failure predicate the user also gave explicitly, ...
    echo: dict[str, Any] = options.model_dump(mode="json")
    try:
        back = Options.model_validate(options_from_command_line(mapped),
                                      context={"echo": True}).model_dump(mode="json")
    except ValueError:
        return echo
    return {key: value for key, value in echo.items() if back.get(key) != value}


def _timeline_exclude(record: IntervalRecord) -> set[str]:
    """The keys of an interval record the JSON leaves out: those the record does not have."""
    exclude = set()
    if record.hdr_histogram is None:
        exclude.add("hdr_histogram")
    if not record.warmup:
        exclude.add("warmup")
    return exclude


def nighthawk_output(result: Result) -> dict[str, Any]:
    """The Nighthawk ``Output`` JSON document of `result` (see the module doc)."""
    options = command_line_options(result.options)
    run: dict[str, Any] = {
        "version": result.version,
        "terminated_by": result.terminated_by,
        "failed_predicates": list(result.failed_predicates),
        "interrupted": result.interrupted,
        "error": result.error,
        "insecure": result.insecure,
        # A record without its interval histogram (an older file) is written without the
        # key; warmup only when true, so a run without a warm-up reads as before.
        "timeline": [record.model_dump(mode="json", exclude=_timeline_exclude(record) or None)
                     for record in result.timeline],
        "options": _options_extension(result.options, options),
        "schedule": result.schedule.model_dump(mode="json"),
    }
    if result.warmup is not None:
        run["warmup"] = _result_entry(result.warmup, None)
    if result.validity is not None:
        # The validity verdict (docs/trust.md): an nhbench key, as the timeline.
        run["validity"] = result.validity.model_dump(mode="json")
    if result.until is not None:
        # --until's target and how it went (docs/trust.md): an nhbench key, as the timeline.
        run["until"] = result.until.model_dump(mode="json")
    if result.endpoints:
        # Per endpoint (several targets or addresses): an nhbench key, as the timeline.
        run["endpoints"] = [endpoint.model_dump(mode="json") for endpoint in result.endpoints]
    if result.groups is not None:
        # --group-by (docs/engine.md "Groups"): an nhbench key, as the endpoints.
        run["groups"] = result.groups.model_dump(mode="json")
    if result.hosts:
        # A distributed run (docs/distributed.md): each host's merged statistics are a
        # results entry of its name; where it ran, its clock and its skew are here.
        run["hosts"] = [host.model_dump(mode="json") for host in result.hosts]
        if result.scheduled_start is not None:
            run["scheduled_start"] = format_timestamp(result.scheduled_start)
    # The run-level part goes on "global" (the last entry of every result nhbench makes);
    # a result without entries gets an empty carrier entry, dropped again when read.
    carrier = next((i for i, e in enumerate(result.results) if e.name == "global"),
                   len(result.results) - 1)
    results = [_result_entry(entry, run if i == carrier else None)
               for i, entry in enumerate(result.results)]
    if not results:
        results.append({"name": "global", "statistics": [], "counters": [],
                        "user_defined_outputs": [_user_defined_output(
                            {"run": run, "carrier_only": True})],
                        "execution_duration": "0s"})
    return {
        "options": options,
        "results": results,
        "version": {"version": _version_numbers(result.version)},
        "timestamp": format_timestamp(result.timestamp),
    }


def _encode(value: Any, level: int) -> str:
    if isinstance(value, Mapping):
        if not value:
            return "{}"
        inner = " " * (level + 1)
        items = (f"{inner}{json.dumps(str(k), ensure_ascii=False)}: {_encode(v, level + 1)}"
                 for k, v in value.items())
        return "{\n" + ",\n".join(items) + "\n" + " " * level + "}"
    if isinstance(value, (list, tuple)):
        if not value:
            return "[]"
        inner = " " * (level + 1)
        items = (f"{inner}{_encode(v, level + 1)}" for v in value)
        return "[\n" + ",\n".join(items) + "\n" + " " * level + "]"
    if isinstance(value, float):
        return json_double(value)
    return json.dumps(value, ensure_ascii=False)


def dumps(document: Mapping[str, Any]) -> str:
    """The document as Nighthawk writes it: one space of indentation per level, UTF-8,
    ``[]`` and ``{}`` for empty lists and maps, doubles as protobuf prints them, and a final
    newline. Nighthawk's own output_formatter.json.gold comes out byte for byte."""
    return _encode(document, 0) + "\n"


# ---- document -> Result fields -------------------------------------------------------------------


def is_nighthawk_document(data: Any) -> bool:
    """True for the Output JSON mapping (Nighthawk's or ours), False for nhbench's JSON
    in its older shape (``version`` a string, nhbench option names)."""
    if not isinstance(data, Mapping) or not isinstance(data.get("results"), list):
        return False
    if isinstance(data.get("version"), Mapping):
        return True
    options = data.get("options")
    return isinstance(options, Mapping) and any(
        key in options for key in ("requests_per_second", "request_options", "h2", "protocol")
        if not isinstance(options.get(key), str)
    )


def nhbench_extension(entry: Any) -> dict[str, Any] | None:
    """The value of an entry's nhbench ``user_defined_outputs`` Struct, or None."""
    if not isinstance(entry, Mapping):
        return None
    outputs = entry.get("user_defined_outputs")
    for output in outputs if isinstance(outputs, list) else ():
        if isinstance(output, Mapping) and output.get("plugin_name") == PLUGIN_NAME:
            typed = output.get("typed_output")
            if isinstance(typed, Mapping) and isinstance(typed.get("value"), Mapping):
                return dict(typed["value"])
    return None


def _as_list(value: Any) -> list[Any]:
    # Nighthawk's C++ parser takes a single value where a list is expected (its
    # medium.proto.gold has "labels": "Nighthawk").
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


# The values of the enums nhbench reads, in number order (options.proto, Envoy's base.proto).
_ENUMS = {
    "protocol": ("HTTP1", "HTTP2", "HTTP3"),
    "sequencer_idle_strategy": ("DEFAULT", "SPIN", "POLL", "SLEEP"),
    "output_format": ("DEFAULT", "JSON", "HUMAN", "YAML", "DOTTED", "FORTIO",
                      "EXPERIMENTAL_FORTIO_PEDANTIC", "CSV", "PROMETHEUS"),
    "address_family": ("AUTO", "V4", "V6"),
    "request_method": ("METHOD_UNSPECIFIED", *_METHODS),
}


def _enum(kind: str, value: Any) -> str | None:
    # An enum, or an enum wrapper: {"value": "POLL"}. proto3 JSON also allows the number,
    # and a wrapper left at its default may be {} (value omitted: the first value).
    inner = value.get("value", 0) if isinstance(value, Mapping) else value
    names = _ENUMS[kind]
    if isinstance(inner, int) and not isinstance(inner, bool) and 0 <= inner < len(names):
        return names[inner]
    return inner if isinstance(inner, str) else None


def _wrapped(value: Any) -> Any:
    # A wrapper type is normally written unwrapped, but {"value": x} is accepted too.
    return value.get("value") if isinstance(value, Mapping) else value


def _thresholds(predicates: Mapping[Any, Any]) -> dict[str, Any]:
    # map<string, uint64>: thresholds are strings in JSON. A value that is no number is
    # passed on as it is, for the options' own check to report.
    out: dict[str, Any] = {}
    for name, value in predicates.items():
        try:
            out[str(name)] = int(value)
        except (TypeError, ValueError):
            out[str(name)] = value
    return out


def options_from_command_line(clo: Mapping[str, Any]) -> dict[str, Any]:
    """nhbench option values from Nighthawk's CommandLineOptions JSON: the options that exist
    in both. What has no nhbench counterpart (jitter, multi-target lists beyond the first
    endpoint, HTTP/3, trace, stats sinks, ...) is left out."""
    out: dict[str, Any] = {}
    uri = _wrapped(clo.get("uri"))
    if uri is None and isinstance(clo.get("multi_target"), Mapping):
        target = clo["multi_target"]
        endpoints = _as_list(target.get("endpoints"))
        if endpoints and isinstance(endpoints[0], Mapping):
            scheme = "https" if _wrapped(target.get("use_https")) else "http"
            address = _wrapped(endpoints[0].get("address"))
            port = _wrapped(endpoints[0].get("port"))
            path = _wrapped(target.get("path")) or "/"
            uri = f"{scheme}://{address}:{port}{path}"
    if uri is not None:
        out["uri"] = uri
    scalar = {
        "requests_per_second": "rps", "connections": "connections",
        "prefetch_connections": "prefetch_connections", "burst_size": "burst_size",
        "max_pending_requests": "max_pending_requests",
        "max_active_requests": "max_active_requests",
        "max_requests_per_connection": "max_requests_per_connection",
        "max_concurrent_streams": "max_concurrent_streams", "open_loop": "open_loop",
        "no_default_failure_predicates": "no_default_failure_predicates",
        "no_duration": "no_duration",
    }
    for key, name in scalar.items():
        if key in clo and _wrapped(clo[key]) is not None:
            out[name] = _wrapped(clo[key])
    if "concurrency" in clo:
        concurrency = _wrapped(clo["concurrency"])
        out["concurrency"] = concurrency
    for key in ("duration", "timeout"):
        if isinstance(clo.get(key), str):
            out[key] = parse_json_duration(clo[key])
    if out.get("no_duration") in (True, "true"):
        out.pop("duration", None)
    elif "no_duration" in out:
        del out["no_duration"]
    protocol = _enum("protocol", clo.get("protocol")) if "protocol" in clo else None
    if protocol in ("HTTP1", "HTTP2", "HTTP3"):
        out["protocol"] = protocol.lower()
    elif _wrapped(clo.get("h2")) is True:
        out["protocol"] = "http2"
    for key in ("sequencer_idle_strategy", "output_format", "address_family"):
        choice = _enum(key, clo.get(key)) if key in clo else None
        if choice is not None and choice != "DEFAULT":
            out[key] = choice.lower()
    request = clo.get("request_options")
    if isinstance(request, Mapping):
        method = _enum("request_method", request.get("request_method", 0))
        if method in _METHODS:
            out["request_method"] = method
        headers = []
        for option in _as_list(request.get("request_headers")):
            header = option.get("header") if isinstance(option, Mapping) else None
            if isinstance(header, Mapping):
                headers.append(f"{header.get('key', '')}: {header.get('value', '')}")
        out["request_header"] = headers
        if _wrapped(request.get("request_body_size")) is not None:
            out["request_body_size"] = _wrapped(request["request_body_size"])
    tls = clo.get("tls_context")
    if isinstance(tls, Mapping) and tls.get("sni") and str(uri or "").lower().startswith(
            "https:"):
        out["sni"] = tls["sni"]
    if isinstance(clo.get("termination_predicates"), Mapping):
        out["termination_predicate"] = _thresholds(clo["termination_predicates"])
    if isinstance(clo.get("failure_predicates"), Mapping):
        # Nighthawk writes the predicates in force, the defaults included; nhbench keeps
        # the user's own and adds the defaults unless no_default_failure_predicates.
        # When the file's predicates lack one of nhbench's defaults (Nighthawk's own
        # defaults are fewer), they are taken as the whole set, so that the loaded options
        # mean the predicates the run had.
        in_force = _thresholds(clo["failure_predicates"])
        has_defaults = all(name in in_force for name in DEFAULT_FAILURE_PREDICATES)
        if out.get("no_default_failure_predicates") or not has_defaults:
            out["no_default_failure_predicates"] = True
            out["failure_predicate"] = in_force
        else:
            out["failure_predicate"] = {
                k: v for k, v in in_force.items() if DEFAULT_FAILURE_PREDICATES.get(k) != v}
    if "labels" in clo:
        out["label"] = [str(label) for label in _as_list(clo["labels"])]
    return out


def _statistic_fields(statistic: Any, extras: Mapping[str, Any]) -> Any:
    if not isinstance(statistic, Mapping):
        return statistic
    fields = dict(statistic)
    mine = extras.get(str(fields.get("id")))
    if isinstance(mine, Mapping):
        fields = _with_extras(fields, mine)
    return fields


def _with_extras(fields: dict[str, Any], extras: Mapping[str, Any]) -> dict[str, Any]:
    # The Statistic JSON with nhbench's extras applied: the exact values win.
    raw = any(key.startswith("raw_") for key in fields)
    for key in ("min", "max", "mean", "pstdev"):
        if key in extras:
            fields.pop(f"raw_{key}", None)
            fields[key] = extras[key]
    if raw:
        fields["raw"] = True
    if "hdr_histogram" in extras:
        fields["hdr_histogram"] = extras["hdr_histogram"]
    return fields


def _entry_fields(entry: Any, extension: Mapping[str, Any]) -> Any:
    if not isinstance(entry, Mapping):
        return entry
    extras = extension.get("statistics")
    extras = extras if isinstance(extras, Mapping) else {}
    fields = {key: entry[key] for key in
              ("name", "counters", "execution_start", "execution_duration") if key in entry}
    fields["statistics"] = [_statistic_fields(s, extras) for s in
                            _as_list(entry.get("statistics"))]
    counters = _as_list(fields.get("counters"))
    zeros = extension.get("zero_counters")
    if isinstance(zeros, list) and zeros:
        counters = sorted([*counters, *({"name": name, "value": 0} for name in zeros)],
                          key=lambda c: str(c.get("name")) if isinstance(c, Mapping) else "")
    fields["counters"] = counters
    return fields


def _version_text(version: Any) -> str:
    inner = version.get("version") if isinstance(version, Mapping) else None
    if not isinstance(inner, Mapping):
        return "Nighthawk"
    numbers = [inner.get(key, 0) for key in ("major_number", "minor_number", "patch")]
    return "Nighthawk " + ".".join(str(n) for n in numbers)


def result_fields(document: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a `Result` (for ``Result.model_validate``) from an Output document:
    ours (the nhbench extension makes it exact) or one Nighthawk wrote."""
    run: Mapping[str, Any] = {}
    entries = []
    for entry in _as_list(document.get("results")):
        extension = nhbench_extension(entry) or {}
        if isinstance(extension.get("run"), Mapping):
            run = extension["run"]
        if extension.get("carrier_only"):
            continue
        entries.append(_entry_fields(entry, extension))
    clo = document.get("options")
    options = options_from_command_line(clo if isinstance(clo, Mapping) else {})
    extra_options = run.get("options")
    if isinstance(extra_options, Mapping):
        options.update(extra_options)
    fields: dict[str, Any] = {"options": options, "results": entries}
    if "timestamp" in document:
        fields["timestamp"] = document["timestamp"]
    version = run.get("version")
    fields["version"] = version if isinstance(version, str) else _version_text(
        document.get("version"))
    for key in ("terminated_by", "failed_predicates", "interrupted", "error", "insecure",
                "timeline", "schedule", "hosts", "scheduled_start", "endpoints", "validity",
                "until", "groups"):
        if key in run:
            fields[key] = run[key]
    if isinstance(run.get("warmup"), Mapping):
        fields["warmup"] = _entry_fields(run["warmup"], nhbench_extension(run["warmup"]) or {})
    return fields

