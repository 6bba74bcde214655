"""The list's quick row of a result file nhbench wrote: read straight from the parsed
document, without building the `Result` (its pydantic models and the options mapping cost
two thirds of a never-browsed scan).

`quick_entry` only accepts: it reads the fields a row shows (the labels, the URL and the
rate of the options, the global entry's counters, duration and headline statistic, the
workers' names, the run's end and its validity verdict), each checked for exactly the type
and range the full load takes, and returns None (the caller then takes
`Catalogue.summarise`'s path, which gives the full load's refusal) for anything it is not
sure of: another shape, a value of another type, a key it does not know that could change
the row (stages, an explicit schedule, a distributed run's hosts, ``allow_no_success``, a
fired failure predicate). It never has to say why. The headline statistic is built and
checked with the loader's own model and checks (`Statistic`, `_check_statistic`, the
histogram's decode), so its p50 and p99 are the ones the result page shows.

What it does not look at, as the summary's path did not look at the other statistics and
the timeline, is checked when the result is opened (`Catalogue.load`): the options the row
does not show, the schedule's facts, the workers' entries beyond their names, the
endpoints and groups. A file refused then becomes an unreadable row with the reason.
tests/test_browse_quick.py compares its rows with the full load's over the scan tests'
files and many mutated ones.

It is hand-written rather than a schema library's because what it must match is the
loader's own mapping of the Output JSON (wrapped values, 64-bit integers as strings,
durations as ``"1.5s"``, nhbench's extension entry); a JSON-schema validator would check
types but not give the row, and a second set of models is the cost being removed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from .._histogram import DecodeBudget, HistogramDecodeError, check
from .._load import MAX_FILE_HISTOGRAM_COUNTS, MAX_SECONDS, _check_statistic
from .._names import REQUEST_TO_RESPONSE, SCHEDULED_TO_RESPONSE, error_total, no_success_reason
from .._result import Counters, Statistic, Validity
from ..options import Options, parse_uri
from ..outputs._nighthawk import PLUGIN_NAME

__all__ = ["quick_fields"]

# A strict RFC 3339 time as nhbench writes it, which `datetime.fromisoformat` and pydantic
# read alike (more than six digits of fraction, a leap second or a week date are left to
# pydantic).
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,6})?(?:Z|[+-]\d\d:\d\d)\Z",
                   re.ASCII)
_COUNT = re.compile(r"[0-9]{1,20}\Z", re.ASCII)
# A duration as nhbench writes it (protobuf's JSON Duration): seconds with up to nine
# digits of fraction.
_DURATION = re.compile(r"([0-9]{1,12})(?:\.([0-9]{1,9}))?s\Z", re.ASCII)
_INT_LIMIT = 1 << 64
_VERDICTS = frozenset(("valid", "suspect", "invalid"))
# Option names (nhbench's, in the run's extension) that change what a row shows: the label,
# the URL, the requested rate and the verdict. A file with any of them takes the full path.
_ROW_OPTIONS = frozenset(("label", "uri", "rps", "stage", "schedule_offsets",
                          "allow_no_success", "failure_predicates", "multi_target_endpoint"))
_OPTION_NAMES = frozenset(Options.model_fields)
# The keys of the run's extension the quick row knows; another one (a newer nhbench's, or
# a distributed run's "hosts") takes the full path.
_RUN_KEYS = frozenset(("version", "terminated_by", "failed_predicates", "interrupted", "error",
                       "insecure", "timeline", "options", "schedule", "validity", "warmup",
                       "endpoints", "groups", "until", "scheduled_start"))


class _NotSure(Exception):
    """The quick reader hands the file to the full path."""


def _extension(entry: Mapping[str, Any]) -> dict[str, Any] | None:
    # As `nhbench_extension`, but a second nhbench output or one of another shape is not
    # guessed at.
    outputs = entry.get("user_defined_outputs")
    if outputs is None:
        return None
    if type(outputs) is not list:
        raise _NotSure
    found = None
    for output in outputs:
        if type(output) is not dict:
            raise _NotSure
        if output.get("plugin_name") == PLUGIN_NAME:
            typed = output.get("typed_output")
            if found is not None or type(typed) is not dict or type(typed.get("value")) is not dict:
                raise _NotSure
            found = typed["value"]
    return found


def _count(value: Any) -> int:
    if type(value) is str and _COUNT.match(value):
        number = int(value)
    elif type(value) is int:
        number = value
    else:
        raise _NotSure
    if not 0 <= number < _INT_LIMIT:
        raise _NotSure
    return number


def _seconds(value: Any) -> float:
    if type(value) is not str:
        raise _NotSure
    match = _DURATION.match(value)
    if match is None:
        raise _NotSure
    seconds = float(value[:-1])  # as the loader's `parse_json_duration` reads it
    if not 0 <= seconds <= MAX_SECONDS:
        raise _NotSure
    return seconds


def _times(entry: Mapping[str, Any]) -> None:
    if "execution_duration" in entry:
        _seconds(entry["execution_duration"])
    start = entry.get("execution_start")
    if start is not None and (type(start) is not str or not _TIME.match(start)):
        raise _NotSure


def _headline(entry: Mapping[str, Any], extension: Mapping[str, Any]) -> Statistic | None:
    """The latency the row shows (`headline_statistic`'s choice: the global entry's
    scheduled_to_response when it has samples, else its request_to_response); None when
    neither has samples. Both are built with the loader's model and checked with its
    checks, as the summary's path checks them."""
    statistics = entry.get("statistics", [])
    extras = extension.get("statistics", {})
    if type(statistics) is not list or type(extras) is not dict:
        raise _NotSure
    given: dict[str, dict[str, Any]] = {}
    for fields in statistics:
        if type(fields) is not dict or type(fields.get("id")) is not str \
                or not fields["id"].isascii():
            raise _NotSure
        if fields["id"] in (SCHEDULED_TO_RESPONSE, REQUEST_TO_RESPONSE):
            if fields["id"] in given:
                raise _NotSure  # the same id twice: the loader's first-match rule decides
            given[fields["id"]] = fields
    budget = DecodeBudget(MAX_FILE_HISTOGRAM_COUNTS, "the counters nhbench decodes per file")
    shown = None
    for stat_id in (SCHEDULED_TO_RESPONSE, REQUEST_TO_RESPONSE):
        fields = given.get(stat_id)
        if fields is None:
            continue
        mine = extras.get(stat_id)
        if mine is not None:
            # `_with_extras`: the exact values of the extension win.
            if type(mine) is not dict or any(key.startswith("raw_") for key in fields):
                raise _NotSure
            fields = {**fields, **{key: mine[key] for key in (
                "min", "max", "mean", "pstdev", "hdr_histogram") if key in mine}}
        try:
            statistic = Statistic.model_validate(fields)
            _check_statistic(statistic, "global")
            if statistic.hdr_histogram:
                check(statistic.hdr_histogram, budget=budget)
        except (ValueError, TypeError, HistogramDecodeError):
            raise _NotSure from None
        if shown is None and statistic.count:
            shown = statistic
    return shown


def quick_fields(data: Any) -> dict[str, Any] | None:
    """The row's fields (`Entry`'s keyword arguments but the path and kind) of a parsed
    nhbench Output document, or None when the full path must decide."""
    try:
        return _fields(data)
    except (_NotSure, LookupError, TypeError, ValueError, ArithmeticError):
        return None  # whatever it did not foresee: the full path decides


def _fields(data: Any) -> dict[str, Any]:
    if type(data) is not dict or type(data.get("version")) is not dict:
        raise _NotSure
    clo = data.get("options")
    entries = data.get("results")
    if type(clo) is not dict or type(entries) is not list:
        raise _NotSure
    when = data.get("timestamp")
    if type(when) is not str or not _TIME.match(when):
        raise _NotSure
    moment = datetime.fromisoformat(when.replace("Z", "+00:00"))

    # The entries: exactly one global one, the others named (their count is the workers').
    run: dict[str, Any] | None = None
    global_entry = global_extension = None
    workers = 0
    for entry in entries:
        if type(entry) is not dict:
            raise _NotSure
        extension = _extension(entry)
        if extension is not None:
            if "carrier_only" in extension:
                raise _NotSure
            if "run" in extension:
                if run is not None or type(extension["run"]) is not dict:
                    raise _NotSure
                run = extension["run"]
        name = entry.get("name")
        if type(name) is not str:
            raise _NotSure
        _times(entry)  # every entry's, as the summary's path checks them
        if name == "global":
            if global_entry is not None:
                raise _NotSure
            global_entry, global_extension = entry, extension or {}
        else:
            workers += 1
    if global_entry is None or global_extension is None or run is None:
        raise _NotSure
    if not set(run) <= _RUN_KEYS:
        raise _NotSure
    warmup = run.get("warmup")
    if warmup is not None:
        # The warm-up's entry: its name and times, as the summary's path checks them.
        if type(warmup) is not dict or type(warmup.get("name")) is not str:
            raise _NotSure
        _times(warmup)
    extra_options = run.get("options", {})
    if type(extra_options) is not dict or not _ROW_OPTIONS.isdisjoint(extra_options) \
            or not extra_options.keys() <= _OPTION_NAMES:
        raise _NotSure
    worker_count = max(1, workers)

    # The options the row shows, as `options_from_command_line` maps them.
    if "multi_target" in clo or "allow_no_success" in clo:
        raise _NotSure
    labels = clo.get("labels", [])
    uri = clo.get("uri")
    rate: Any = clo.get("requests_per_second")
    if type(labels) is not list or any(type(label) is not str for label in labels):
        raise _NotSure
    if type(uri) is not str or type(rate) not in (int, float):
        raise _NotSure
    if not (math.isfinite(rate) and 0 <= rate <= 1_000_000):
        raise _NotSure
    try:
        parse_uri(uri)  # the options' own check of the URL (remembered per text)
    except ValueError:
        raise _NotSure from None

    # The global entry's counters (with the zero ones its extension names) and duration.
    counters = global_entry.get("counters", [])
    zeros = global_extension.get("zero_counters", [])
    if type(counters) is not list or type(zeros) is not list:
        raise _NotSure
    values: dict[str, int] = {}
    for counter in counters:
        if type(counter) is not dict or type(counter.get("name")) is not str:
            raise _NotSure
        if set(counter) != {"name", "value"} or counter["name"] in values:
            raise _NotSure
        values[counter["name"]] = _count(counter["value"])
    for name in zeros:
        if type(name) is not str or name in values:
            raise _NotSure
        values[name] = 0
    totals = Counters(values)
    duration = _seconds(global_entry["execution_duration"]) \
        if "execution_duration" in global_entry else 0.0
    latency = _headline(global_entry, global_extension)

    # The run's end and its verdicts.
    terminated_by = run.get("terminated_by", "duration")
    failed = run.get("failed_predicates", [])
    if type(terminated_by) is not str or failed != [] or type(failed) is not list:
        raise _NotSure
    validity = run.get("validity")
    verdict_of_validity = ""
    if validity is not None:
        if type(validity) is not dict or type(validity.get("verdict")) is not str \
                or validity["verdict"] not in _VERDICTS:
            raise _NotSure
        try:
            verdict_of_validity = Validity.model_validate(validity).verdict
        except ValueError:
            raise _NotSure from None
    if terminated_by == "error":
        ok, verdict = False, "FAILED: the run ended with an error"
    else:
        reason = no_success_reason(totals)
        ok, verdict = (True, "OK") if reason is None else (False, f"FAILED: {reason}")

    return {
        "label": ", ".join(labels), "time": moment, "url": uri,
        "requested_rps": float(rate) * worker_count,
        "achieved_rps": totals["benchmark.http_2xx"] / duration if duration > 0 else 0.0,
        "latency": latency, "errors": error_total(totals), "ok": ok, "verdict": verdict,
        "validity": verdict_of_validity,
    }
