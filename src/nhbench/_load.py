"""Loading a result file back into a `Result`: ``nhbench.load_result(path)``.

A file is read whole, parsed as JSON, and its format is recognised from its shape by
`detect_format` before a loader of `LOADERS` turns it into a `Result`. Today nhbench reads its
own JSON (``nhbench run --output-format json``, a sweep step's ``result.json``); the output
formats of Nighthawk and Fortio are recognised so that the error can say what the file is,
and reading them is a matter of adding a loader here.

Every failure is a `ResultFileError` whose message is one line naming the file and the
reason (missing, a directory, not JSON, a format nhbench does not read, an invalid field).
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from collections.abc import Callable, Mapping
from typing import Any

from hdrh.codec import HdrCookieException, HdrHistogramSettingsException, HdrLengthException
from pydantic import ValidationError

from ._exceptions import ResultFileError
from ._load_fortio import load_fortio
from ._result import Result

__all__ = ["FORMAT_NAMES", "LOADERS", "detect_format", "load_result"]

#: What each recognised format is called in messages.
FORMAT_NAMES = {
    "nhbench": "nhbench JSON",
    "nighthawk": "Nighthawk's JSON output",
    "fortio": "Fortio's JSON output",
}


def detect_format(data: Any) -> str | None:
    """The format of a parsed JSON document: ``"nhbench"``, ``"nighthawk"``, ``"fortio"``,
    or None when it is none of them.

    nhbench's JSON has Nighthawk's shape (``results`` entries with ``statistics`` and
    ``counters``) but its ``version`` is nhbench's version string, where Nighthawk writes a
    structured version object. Fortio's has ``DurationHistogram`` and ``RunType``.
    """
    if not isinstance(data, Mapping):
        return None
    if "DurationHistogram" in data and "RunType" in data:
        return "fortio"
    if isinstance(data.get("results"), list) and "options" in data:
        if isinstance(data.get("version"), Mapping):
            return "nighthawk"
        if isinstance(data.get("version"), str) or "version" not in data:
            return "nhbench"
    return None


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


#: The loader of each format nhbench reads.
LOADERS: dict[str, Callable[[Any], Result]] = {"nhbench": _load_nhbench}
LOADERS["fortio"] = load_fortio


def _validation_reason(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "the document"
    more = exc.error_count() - 1
    extra = f" (and {more} more problem{'s' if more != 1 else ''})" if more else ""
    return f"{where}: {first['msg']}{extra}"


def load_result(path: str | os.PathLike[str]) -> Result:
    """Load a result file written by nhbench (``nhbench run --output-format json --output
    FILE``, ``Result.model_dump_json()``, a sweep step's ``result.json``).

    Raises `ResultFileError` (one line naming the file and the reason) when the file cannot
    be read, is not JSON, is in a format nhbench does not read, or is not a valid result.
    """
    name = os.fspath(path)

    def fail(reason: str) -> ResultFileError:
        return ResultFileError(f"cannot load result {name!r}: {reason}", name)

    try:
        with open(name, "rb") as handle:
            raw = handle.read()
    except OSError as exc:
        raise fail(exc.strerror or type(exc).__name__) from None
    try:
        data = json.loads(raw)
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
    loader = LOADERS.get(kind)
    if loader is None:
        readable = ", ".join(FORMAT_NAMES[k] for k in LOADERS)
        raise fail(f"this is {FORMAT_NAMES[kind]}, which nhbench cannot load yet "
                   f"(it reads: {readable})")
    try:
        return loader(data)
    except ValidationError as exc:
        raise fail(f"invalid {FORMAT_NAMES[kind]}: {_validation_reason(exc)}") from None
    except (ValueError, TypeError) as exc:
        # A validator outside pydantic's own checks (an encoded histogram that does not
        # decode, say) still names the file rather than escaping as a traceback.
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise fail(f"invalid {FORMAT_NAMES[kind]}: {text}") from None
