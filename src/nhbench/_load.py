"""Loading a result file back into a `Result`: ``nhbench.load_result(path)``.

A file is read whole, parsed as JSON (`parse_json`: with the leniency Nighthawk's own reader
has, see below), and its format is recognised from its shape by `detect_format` before a
loader of `LOADERS` turns it into a `Result`. nhbench reads its own JSON (``nhbench run
--output-format json``, a sweep step's ``result.json``, also in nhbench's older shape) and
Nighthawk's JSON output; Fortio's is recognised, and read once its loader is registered.

Every failure is a `ResultFileError` whose message is one line naming the file and the
reason (missing, a directory, not JSON with its line and column, a format nhbench does not
read, an invalid field).

A result file may come from anyone, so what a loader returns is checked before any renderer
sees it (docs/reliability.md, "Result files"): every number in the document is finite and
fits 64 bits, every string is valid Unicode, the lists that grow with a file (result
entries, statistics, percentiles) are bounded before the models are built, and the `Result`
itself has a ``global`` entry, no negative count or counter, percentiles in [0, 1] and
durations and latencies in [0, `MAX_SECONDS`]. Encoded histograms are decoded within a
budget (`MAX_FILE_HISTOGRAM_COUNTS`): the header is checked before anything is allocated and
the payload inflated no further than the header allows (`nhbench._histogram.decode`).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from . import _histogram
from ._exceptions import ResultFileError
from ._input import InputError, read_input
from ._load_fortio import load_fortio
from ._result import Result, Statistic, WorkerResult
from .outputs import is_nighthawk_document, nhbench_extension

__all__ = ["FORMAT_NAMES", "LOADERS", "MAX_FILE_HISTOGRAM_COUNTS", "MAX_PERCENTILES",
           "MAX_RESULT_ENTRIES", "MAX_SECONDS", "MAX_STATISTICS", "check_result_document",
           "detect_format", "load_result", "parse_json", "parse_result_text",
           "read_result_text", "result_from_document"]

#: Result entries (workers, hosts, global) one file may have. A run has one per worker plus
#: global; a distributed run one per worker and per host: 4096 is 64 hosts of 63 workers.
#: 20,000 entries in a 131 MB file took more than 4 GB to load.
MAX_RESULT_ENTRIES = 4096
#: Statistics one entry may have (nhbench writes 10, Nighthawk up to about 20).
MAX_STATISTICS = 1000
#: Percentile points one statistic may have (nhbench writes 16 by default, Nighthawk's
#: output about 100, a Fortio histogram one per bucket, a few dozen). 10^6 points in a 69 MB
#: file took 1.4 GB to load.
MAX_PERCENTILES = 10_000
#: The largest duration or latency, in seconds, a result may hold: ten years. Options
#: allow a run of at most a year; 1e300 s overflows every integer nanosecond conversion.
MAX_SECONDS = 10 * 365 * 86400.0
#: Counters all the encoded histograms of one file may need in all once decoded: 2^31, about
#: 77,000 histograms of nhbench's layout (4096 entries of 16 statistics fit) and about 3 ns
#: of decoding each, so a file of many small bombs costs seconds, not minutes. They are
#: decoded one at a time and not kept; each on its own is bounded by
#: `nhbench._histogram.MAX_DECODED_COUNTS`.
MAX_FILE_HISTOGRAM_COUNTS = 1 << 31

# Integers a result holds are counts (uint64) or signed 64-bit values.
_INT_MIN = -(1 << 63)
_INT_LIMIT = 1 << 64

#: What each recognised format is called in messages.
FORMAT_NAMES = {
    "nhbench": "nhbench JSON",
    "nighthawk": "Nighthawk's JSON output",
    "fortio": "Fortio's JSON output",
}


def detect_format(data: Any) -> str | None:
    """The format of a parsed JSON document: ``"nhbench"``, ``"nighthawk"``, ``"fortio"``,
    or None when it is none of them.

    nhbench's JSON is Nighthawk's Output mapping carrying an ``nhbench`` entry in
    ``user_defined_outputs``; Nighthawk's has the same shape without it (and a structured
    ``version``). nhbench's older JSON has ``results`` and ``options`` with
    nhbench's option names and ``version`` as a string. Fortio's has ``DurationHistogram``
    and ``RunType``.
    """
    if not isinstance(data, Mapping):
        return None
    if "DurationHistogram" in data and "RunType" in data:
        return "fortio"
    if not isinstance(data.get("results"), list) or "options" not in data:
        return None
    if is_nighthawk_document(data):
        if any(nhbench_extension(entry) is not None for entry in data["results"]):
            return "nhbench"
        return "nighthawk"
    if isinstance(data.get("version"), str) or "version" not in data:
        return "nhbench"
    return None


def _merge_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # Nighthawk reads its JSON with protobuf's C++ parser, which merges a repeated field
    # given twice and takes the last value of a singular one; its own medium.proto.gold has
    # "labels" three times. Python's json would keep only the last.
    merged = dict(pairs)
    if len(merged) == len(pairs):
        return merged  # no key given twice: what json.loads itself makes
    merged = {}
    for key, value in pairs:
        if key in merged and (isinstance(merged[key], list) or isinstance(value, list)):
            before = merged[key] if isinstance(merged[key], list) else [merged[key]]
            merged[key] = before + (value if isinstance(value, list) else [value])
        else:
            merged[key] = value
    return merged


# A JSON string, or a comma before a closing bracket (which is kept out of the match).
_TRAILING_COMMA = re.compile(r'"(?:[^"\\]|\\.)*"|,(?=\s*[}\]])')


def parse_json(text: str | bytes) -> Any:
    """Parse result JSON with the leniency of Nighthawk's reader: repeated keys merge (see
    above) and a comma before ``}`` or ``]`` is ignored, as files Nighthawk users edited
    by hand have them. Raises json.JSONDecodeError (of the text as given), ValueError
    (not UTF-8) or RecursionError."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    try:
        return json.loads(text, object_pairs_hook=_merge_pairs)
    except json.JSONDecodeError as first:
        relaxed = _TRAILING_COMMA.sub(lambda m: m.group(0) if m.group(0) != "," else "", text)
        if relaxed == text:
            raise
        try:
            return json.loads(relaxed, object_pairs_hook=_merge_pairs)
        except json.JSONDecodeError:
            raise first from None


def _where(path: Iterable[Any]) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "the document"


def _valid_text(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _document_ok(data: Any) -> bool:
    """Whether every number of the document is finite and within 64 bits and every string
    valid Unicode: the quick pass of `_check_document`, which keeps no paths (on a 65 MB
    timeline it takes a third of the time of the pass that does)."""
    isfinite = math.isfinite
    stack = [data]
    while stack:
        value = stack.pop()
        if type(value) is dict:
            for key in value:
                if not key.isascii() and not _valid_text(key):
                    return False
            items: Iterable[Any] = value.values()
        elif type(value) is list:
            items = value
        else:
            items = (value,)
        for item in items:
            kind = type(item)
            if kind is dict or kind is list:
                stack.append(item)
            elif kind is float:
                if not isfinite(item):
                    return False
            elif kind is int:
                if not _INT_MIN <= item < _INT_LIMIT:
                    return False
            elif kind is str and not item.isascii() and not _valid_text(item):
                return False
    return True


def _check_document(data: Any) -> None:
    """Refuse, by where it is, the first value no result holds: a number that is not finite
    (NaN, Infinity, 1e400) or beyond 64 bits, or a string that is not valid Unicode (a lone
    surrogate, which no output can encode). Iterative: the document may nest as deep as
    the JSON parser allows."""
    if _document_ok(data):
        return
    stack: list[tuple[Any, tuple[Any, ...]]] = [(data, ())]
    while stack:
        value, path = stack.pop()
        nested: list[tuple[Any, tuple[Any, ...]]] = []
        if isinstance(value, dict):
            for key, item in value.items():
                if not key.isascii():
                    _check_text(key, path)
                if isinstance(item, (dict, list)):
                    nested.append((item, (*path, key)))
                elif not isinstance(item, (bool, type(None))):
                    _check_scalar(item, (*path, key))
        elif isinstance(value, list):
            for index, item in enumerate(value):
                if isinstance(item, (dict, list)):
                    nested.append((item, (*path, index)))
                elif not isinstance(item, (bool, type(None))):
                    _check_scalar(item, (*path, index))
        else:
            _check_scalar(value, path)
        # Reversed, so that the first bad value in the document's order is the one named.
        stack.extend(reversed(nested))


def _check_scalar(value: Any, path: tuple[Any, ...]) -> None:
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{_where(path)}: {value} is not a finite number")
    elif isinstance(value, int):
        if not _INT_MIN <= value < _INT_LIMIT:
            raise ValueError(f"{_where(path)}: an integer beyond 64 bits")
    elif isinstance(value, str) and not value.isascii():
        _check_text(value, path)


def _check_text(text: str, path: tuple[Any, ...]) -> None:
    if not _valid_text(text):
        raise ValueError(f"{_where(path)}: a string that is not valid Unicode "
                         "(a lone surrogate)")


def _check_sizes(kind: str, data: Mapping[str, Any]) -> None:
    """Bound the lists that grow with a file before the models are built from them (each
    element costs far more as a model than as JSON)."""
    if kind == "fortio":
        for key in ("DurationHistogram", "Sizes", "HeaderSizes"):
            histogram = data.get(key)
            if isinstance(histogram, Mapping):
                for part in ("Data", "Percentiles"):
                    _bounded(histogram.get(part), MAX_PERCENTILES, f"{key}.{part}")
        return
    entries = data.get("results")
    _bounded(entries, MAX_RESULT_ENTRIES, "results")
    for i, entry in enumerate(entries if isinstance(entries, list) else ()):
        statistics = entry.get("statistics") if isinstance(entry, Mapping) else None
        _bounded(statistics, MAX_STATISTICS, f"results[{i}].statistics")
        for j, statistic in enumerate(statistics if isinstance(statistics, list) else ()):
            if isinstance(statistic, Mapping):
                _bounded(statistic.get("percentiles"), MAX_PERCENTILES,
                         f"results[{i}].statistics[{j}].percentiles")


def _bounded(value: Any, limit: int, where: str) -> None:
    if isinstance(value, list) and len(value) > limit:
        raise ValueError(f"{where}: {len(value):,} entries, more than the {limit:,} nhbench "
                         "reads")


def _check_seconds(value: float | None, where: str) -> None:
    if value is not None and not 0 <= value <= MAX_SECONDS:
        raise ValueError(f"{where}: {value:g} s is outside 0..{MAX_SECONDS:g} s")


def _check_count(value: int, where: str) -> None:
    if not 0 <= value < _INT_LIMIT:
        raise ValueError(f"{where}: {value} is not a count (0..2^64-1)")


def _check_statistic(statistic: Statistic, where: str) -> None:
    where = f"{where} {statistic.id}"
    _check_count(statistic.count, f"{where}: count")
    for key in ("min", "max", "mean", "pstdev"):
        value = getattr(statistic, key)
        if statistic.raw:
            if not 0 <= value < _INT_LIMIT:
                raise ValueError(f"{where}: {key} {value:g} is outside 0..2^64")
        else:
            _check_seconds(value, f"{where}: {key}")
    for point in statistic.percentiles:
        if not 0 <= point.percentile <= 1:
            raise ValueError(f"{where}: percentile {point.percentile:g} is outside [0, 1]")
        _check_count(point.count, f"{where}: percentile {point.percentile:g} count")
        if statistic.raw:
            if not 0 <= point.value < _INT_LIMIT:
                raise ValueError(f"{where}: percentile {point.percentile:g} value "
                                 f"{point.value:g} is outside 0..2^64")
        else:
            _check_seconds(point.value, f"{where}: percentile {point.percentile:g} value")


def _check_entry(entry: WorkerResult, budget: _histogram.DecodeBudget) -> None:
    _check_seconds(entry.execution_duration, f"{entry.name}: execution_duration")
    for counter in entry.counters:
        _check_count(counter.value, f"{entry.name}: counter {counter.name}")
    for statistic in entry.statistics:
        _check_statistic(statistic, entry.name)
        if statistic.hdr_histogram:
            # Decoded to check it and dropped: a renderer that needs the histogram decodes
            # it again, within the same per-histogram bound.
            try:
                _histogram.check(statistic.hdr_histogram, budget=budget)
            except _histogram.HistogramDecodeError as exc:
                raise ValueError(f"{entry.name} {statistic.id}: hdr_histogram does not "
                                 f"decode: {exc}") from None


def _check_result(result: Result) -> Result:
    """The checks of a loaded `Result` that its models leave to the loader (see the module
    doc); ValueError (one line) for the first that fails."""
    if not any(entry.name == "global" for entry in result.results):
        raise ValueError("results: no 'global' entry (the merged result every format has)")
    budget = _histogram.DecodeBudget(
        MAX_FILE_HISTOGRAM_COUNTS,
        f"the {MAX_FILE_HISTOGRAM_COUNTS:,} counters nhbench decodes per file")
    entries = list(result.results)
    if result.warmup is not None:
        entries.append(result.warmup)
    for entry in entries:
        _check_entry(entry, budget)
    for i, record in enumerate(result.timeline):
        where = f"timeline[{i}]"
        _check_seconds(record.start, f"{where}.start")
        _check_seconds(record.duration, f"{where}.duration")
        for key in ("p50", "p90", "p99", "max"):
            _check_seconds(getattr(record, key), f"{where}.{key}")
        for key in ("requests", "errors", "blocked"):
            _check_count(getattr(record, key), f"{where}.{key}")
        if record.rps < 0:
            raise ValueError(f"{where}.rps: {record.rps:g} is negative")
        for name, value in record.counters.items():
            _check_count(value, f"{where}.counters.{name}")
    for host in result.hosts:
        for key in ("clock_uncertainty",):
            _check_seconds(getattr(host, key), f"hosts {host.name}: {key}")
        for key in ("clock_offset", "start_skew", "ready_margin"):
            if abs(getattr(host, key)) > MAX_SECONDS:
                raise ValueError(f"hosts {host.name}: {key} beyond {MAX_SECONDS:g} s")
    stats = result.schedule
    for key in ("released", "no_catchup_moves", "lost_releases", "warmup_released"):
        _check_count(getattr(stats, key), f"schedule.{key}")
    _check_seconds(stats.no_catchup_shift, "schedule.no_catchup_shift")
    for stage in stats.stages:
        _check_seconds(stage.duration, f"schedule.stages[{stage.index}].duration")
        _check_count(stage.releases, f"schedule.stages[{stage.index}].releases")
        _check_count(stage.responses, f"schedule.stages[{stage.index}].responses")
    return result


def _load_nhbench(data: Any) -> Result:
    return Result.model_validate(data)


def _load_nighthawk(data: Any) -> Result:
    # Result's validator maps Nighthawk's Output (its CommandLineOptions onto nhbench's
    # options where both have them; percentiles kept as written, since a file of
    # Nighthawk's has no histogram to recompute them from).
    return Result.model_validate(data)


#: The loader of each format nhbench reads.
LOADERS: dict[str, Callable[[Any], Result]] = {
    "nhbench": _load_nhbench,
    "nighthawk": _load_nighthawk,
    "fortio": load_fortio,
}


def _validation_reason(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "the document"
    more = exc.error_count() - 1
    extra = f" (and {more} more problem{'s' if more != 1 else ''})" if more else ""
    return f"{where}: {first['msg']}{extra}"


def read_result_text(raw: str | bytes, name: str) -> tuple[str, Any]:
    """The format and parsed document of result text (a file's contents, stdin), or a
    `ResultFileError` saying in one line why it is not a result; `name` names the source."""
    kind, data = parse_result_text(raw, name)
    check_result_document(kind, data, name)
    return kind, data


def parse_result_text(raw: str | bytes, name: str) -> tuple[str, Any]:
    """The first half of `read_result_text`: the text parsed and its format recognised,
    nothing of the document checked yet (`check_result_document` does that)."""

    def fail(reason: str) -> ResultFileError:
        return ResultFileError(f"cannot load result {name!r}: {reason}", name)

    try:
        data = parse_json(raw)
    except UnicodeDecodeError:
        raise fail("not JSON (not UTF-8 text)") from None
    except json.JSONDecodeError as exc:
        raise fail(f"not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except RecursionError:
        raise fail("not JSON nhbench can read (nested too deeply)") from None
    except ValueError as exc:
        # Python's own limit on integer literals (4300 digits) and the like.
        raise fail(f"not JSON nhbench can read ({str(exc).split(';')[0]})") from None
    kind = detect_format(data)
    if kind is None:
        raise fail("not a result: no format nhbench reads has this shape "
                   "(nhbench JSON has 'options' and 'results')")
    return kind, data


def check_result_document(kind: str, data: Any, name: str, *,
                          sizes_of: Any = None) -> None:
    """The second half of `read_result_text`: every number finite and within 64 bits,
    every string valid Unicode, the growing lists bounded; `ResultFileError` (one line)
    otherwise. `sizes_of`: the document whose list sizes are checked when it is not `data`
    (the browser's list checks a summary's values but the whole file's sizes)."""
    try:
        _check_document(data)
        _check_sizes(kind, data if sizes_of is None else sizes_of)
    except ValueError as exc:
        raise ResultFileError(f"cannot load result {name!r}: invalid "
                              f"{FORMAT_NAMES.get(kind, kind)}: {exc}", name) from None


def result_from_document(kind: str, data: Any, name: str) -> Result:
    """The `Result` of a parsed document of format `kind` (see `read_result_text`)."""

    def fail(reason: str) -> ResultFileError:
        return ResultFileError(f"cannot load result {name!r}: {reason}", name)

    loader = LOADERS.get(kind)
    if loader is None:
        readable = ", ".join(FORMAT_NAMES.get(k, k) for k in LOADERS)
        raise fail(f"this is {FORMAT_NAMES.get(kind, kind)}, which nhbench cannot load yet "
                   f"(it reads: {readable})")
    try:
        return _check_result(loader(data))
    except ValidationError as exc:
        raise fail(f"invalid {FORMAT_NAMES.get(kind, kind)}: "
                   f"{_validation_reason(exc)}") from None
    except (ValueError, TypeError, KeyError, AttributeError, ArithmeticError) as exc:
        # The checks above and validators outside pydantic's own checks still name the
        # file rather than escaping as a traceback.
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise fail(f"invalid {FORMAT_NAMES.get(kind, kind)}: {text}") from None


def read_result_bytes(name: str, *, stdin: bool = False) -> bytes:
    """The bytes of result file `name` through the one reader (a regular file of at most
    the result limit, docs/reliability.md); ResultFileError (one line) otherwise."""
    try:
        return read_input(name, "result", f"cannot load result {name!r}", stdin=stdin)
    except InputError as exc:
        raise ResultFileError(str(exc), name) from None


def load_result(path: str | os.PathLike[str]) -> Result:
    """Load a result file: nhbench's JSON (``nhbench run --output-format json --output
    FILE``, ``Result.model_dump_json()``, a sweep step's ``result.json``, also as written
    in nhbench's older shape) or Nighthawk's JSON output (``nighthawk_client --output-format json``).

    Raises `ResultFileError` (one line naming the file and the reason) when the file cannot
    be read, is not JSON, is in a format nhbench does not read, or is not a valid result.
    """
    name = os.fspath(path)
    raw = read_result_bytes(name)
    kind, data = read_result_text(raw, name)
    del raw  # up to 64 MiB the models being built need not share memory with
    return result_from_document(kind, data, name)
