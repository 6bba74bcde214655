"""The one place durations are formatted for people.

Two formats, on purpose, each with one function:

* `format_seconds` (``148.223us``, ``2.262ms``, ``5.000s``): the ``nhbench run`` report and
  its messages. Fixed three decimals and no space, the way Nighthawk prints durations, so a
  run's output reads like the tool it replaces and lines up in its statistic blocks.
* `format_latency` (``850 µs``, ``1.23 ms``, ``2.50 s``, ``-`` for no value): everything a
  sweep prints or writes (its step line, its stop reason, report.txt/csv/html). Three
  significant digits, which is what a table comparing steps needs.

A duration that is a format rather than text for people (the protobuf JSON Duration of a
Result, ``"0.000195004s"``) is written by `nhbench._result.format_json_duration`. CPU lists
are formatted by `nhbench.options.format_cpu_list`, next to the parser it is the inverse of.

`printable` makes text that came from outside (a label or an error read from a result file)
safe to print on a terminal.

`format_rate` writes a request rate for a table or a chart axis. The sweep's reports, their
SVG charts (`nhbench._svg`) and the notebook views of a `Result` or a `Campaign` all print
through these functions, so a p99 reads the same wherever it is shown; they live in the
lowest layer because the charts and the campaign, below the report package, need them too.
"""

from __future__ import annotations

import math
import re

__all__ = ["format_latency", "format_rate", "format_seconds", "printable"]

# What a terminal acts on rather than shows: C0 controls but tab (ESC starts colour, cursor
# and OSC title sequences; CR and LF rewrite or forge lines), DEL, C1 controls (0x9b is a
# one-byte CSI on some terminals), the bidirectional overrides and isolates that reorder
# what is shown, and lone surrogates, which no encoder writes.
_UNSAFE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069"
                     "\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """`text` with every character a terminal would act on written as an escape
    (``\\x1b``, ``\\n``, ``\\u202e``), so a label or an error from a result file
    shows as what it is and cannot clear the screen, set the title or forge a line."""
    return _UNSAFE.sub(_escape, text)


def format_seconds(seconds: float) -> str:
    """A duration in the most readable unit: ``148.223us``, ``2.262ms``, ``5.000s``."""
    magnitude = abs(seconds)
    if magnitude == 0:
        return "0s"
    if magnitude < 1e-6:
        return f"{seconds * 1e9:.0f}ns"
    if magnitude < 1e-3:
        return f"{seconds * 1e6:.3f}us"
    if magnitude < 1:
        return f"{seconds * 1e3:.3f}ms"
    return f"{seconds:.3f}s"


def _significant(value: float, digits: int = 3) -> str:
    """`value` with `digits` significant digits, without exponent: 1.23, 12.3, 123, 1234."""
    if value == 0:
        return "0"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    return f"{value:.{decimals}f}"


def format_latency(seconds: float | None) -> str:
    """Seconds in the unit that reads best, three significant digits: ``850 µs``,
    ``1.23 ms``, ``2.50 s``; ``-`` for no value."""
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)):
        return "-"
    if seconds < 0:
        return "-" + format_latency(-seconds)
    if seconds == 0:
        return "0 s"
    # Round to three significant digits first, so that 999.6 µs becomes 1.00 ms and not
    # "1000 µs".
    seconds = float(f"{seconds:.3g}")
    if seconds < 1e-6:
        # Below a microsecond only an impossible objective (p99<1ns) or a threshold shows.
        return f"{_significant(seconds * 1e9)} ns"
    if seconds < 1e-3:
        return f"{_significant(seconds * 1e6)} µs"
    if seconds < 1:
        return f"{_significant(seconds * 1e3)} ms"
    return f"{_significant(seconds)} s"


def format_rate(rps: float | None) -> str:
    """Requests per second for a table: thousands separated, one decimal below 100."""
    if rps is None:
        return "-"
    if abs(rps) < 100 and rps != int(rps):
        return f"{rps:.1f}"
    return f"{rps:,.0f}"
