"""Loading a result file back into a `Result`: ``nhbench.load_result(path)``.

A file is read whole, parsed as JSON (`parse_json`: with the leniency Nighthawk's own reader
has, see below), and its format is recognised from its shape by `detect_format` before a
loader of `LOADERS` turns it into a `Result`. nhbench reads its own JSON (``nhbench run
--output-format json``, a sweep step's ``result.json``, also as written before issue 12) and
Nighthawk's JSON output; Fortio's is recognised, and read once its loader is registered.

Every failure is a `ResultFileError` whose message is one line naming the file and the
reason (missing, a directory, not JSON with its line and column, a format nhbench does not
read, an invalid field).
"""

from __future__ import annotations

import json
import os
import re
import struct
import zlib
from collections.abc import Callable, Mapping
from typing import Any

from hdrh.codec import HdrCookieException, HdrHistogramSettingsException, HdrLengthException
from pydantic import ValidationError

from ._exceptions import ResultFileError
from ._input import InputError, read_input
from ._load_fortio import load_fortio
from ._result import Result
from .outputs import is_nighthawk_document, nhbench_extension

__all__ = ["FORMAT_NAMES", "LOADERS", "detect_format", "load_result", "parse_json",
           "read_result_text", "result_from_document"]

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
    ``version``). nhbench's JSON of before issue 12 has ``results`` and ``options`` with
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
    merged: dict[str, Any] = {}
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


# What hdrh raises for an encoding that is not one (bad base64 is a ValueError).
_DECODE_ERRORS = (ValueError, zlib.error, struct.error, HdrCookieException, HdrLengthException,
                  HdrHistogramSettingsException)


def _check_histograms(result: Result) -> None:
    """Decode every encoded histogram now, so that a corrupt one is an error of the file
    rather than of the first percentile or chart that needs it later."""
    for entry in result.results:
        for statistic in entry.statistics:
            if statistic.hdr_histogram:
                try:
                    statistic.histogram()
                except _DECODE_ERRORS as exc:
                    raise ValueError(f"{entry.name} {statistic.id}: hdr_histogram does not "
                                     f"decode ({type(exc).__name__})") from None


def _load_nhbench(data: Any) -> Result:
    result = Result.model_validate(data)
    _check_histograms(result)
    return result


def _load_nighthawk(data: Any) -> Result:
    # Result's validator maps Nighthawk's Output (its CommandLineOptions onto nhbench's
    # options where both have them; percentiles kept as written, since a file of
    # Nighthawk's has no histogram to recompute them from).
    result = Result.model_validate(data)
    _check_histograms(result)
    return result


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
    kind = detect_format(data)
    if kind is None:
        raise fail("not a result: no format nhbench reads has this shape "
                   "(nhbench JSON has 'options' and 'results')")
    return kind, data


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
        return loader(data)
    except ValidationError as exc:
        raise fail(f"invalid {FORMAT_NAMES.get(kind, kind)}: "
                   f"{_validation_reason(exc)}") from None
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        # A validator outside pydantic's own checks (an encoded histogram that does not
        # decode, say) still names the file rather than escaping as a traceback.
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
    before issue 12) or Nighthawk's JSON output (``nighthawk_client --output-format json``).

    Raises `ResultFileError` (one line naming the file and the reason) when the file cannot
    be read, is not JSON, is in a format nhbench does not read, or is not a valid result.
    """
    name = os.fspath(path)
    raw = read_result_bytes(name)
    kind, data = read_result_text(raw, name)
    return result_from_document(kind, data, name)
