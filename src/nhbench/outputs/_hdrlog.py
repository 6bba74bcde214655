"""``--hdr-log FILE``: a result's latency histograms as an HdrHistogram log.

The format is the one HdrHistogram's Java ``HistogramLogWriter`` writes (log format version
1.3) and every HdrHistogram log reader reads (Java's ``HistogramLogReader`` and
``HistogramLogProcessor``, HistogramLogAnalyzer, ``hdrh.log.HistogramLogReader``)::

    #[Logged with nhbench 0.1.0]
    #[Histogram log format version 1.3]
    #[StartTime: 1700000000.123 (seconds since epoch), Tue Nov 14 22:13:20 UTC 2023]
    #[BaseTime: 1700000000.123 (seconds since epoch)]
    #[Values in nanoseconds; Interval_Max in milliseconds (...)]
    "StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"
    0.000,1.000,2.001,HISTFAAAACh42pNpmSzMwMDAzgABzFCaEYh5f7hHMNh/gAi83MTIdJWbCQB3+Aal
    Tag=benchmark_http_client.latency_2xx,0.000,5.000,1.969,HISTFAAA...

Timestamps are seconds relative to BaseTime, which is the run's first scheduled release
(wall clock), three decimals as Java writes them. Histogram values are nanoseconds, the unit
the core records in; Interval_Max is the histogram's max divided by 1e6 (milliseconds), the
ratio Java's writer uses by default and that its readers and HistogramLogAnalyzer assume for
nanosecond histograms.

Which lines:

* With interval histograms (``stats_interval`` on, the records made with
  ``keep_histogram``): one line per interval of the headline latency
  (``benchmark_http_client.scheduled_to_response``, coordinated-omission corrected), quiet
  intervals included, so the lines tile the run and their counts add up to the run's count.
* Without: one line for the whole run per latency statistic of the global result.

The headline latency is always the untagged stream, so that tools which read only untagged
histograms by default (``HistogramLogProcessor`` without ``-tag``) show it; every other
statistic is tagged with its id (``Tag=<stat id>,``). Readers that ignore tags and add up
every line (``hdrh``'s ``add_next_interval_histogram``) must filter on the tag when the log
holds tagged lines.

hdrh's own ``HistogramLogWriter`` is not used: it writes no tags, writes ``%f`` with a
floored Interval_Max instead of Java's ``%.3f``, and its ``output_start_time`` fails (it
calls ``datetime.iso_format``). The lines here follow Java's writer, checked against
HdrHistogram 2.2.2's own writer and read back with its ``HistogramLogReader`` in the tests.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .. import _histogram
from .._io import Written, write_output
from .._names import SCHEDULED_TO_RESPONSE
from .._version import __version__

if TYPE_CHECKING:
    from .._result import Result

__all__ = ["LEGEND", "MAX_VALUE_UNIT_RATIO", "render_hdr_log", "write_hdr_log"]

#: The legend line every HdrHistogram log has before its histograms.
LEGEND = '"StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"'
#: Interval_Max = the histogram's max (ns) / this: milliseconds, Java's default ratio.
MAX_VALUE_UNIT_RATIO = 1_000_000.0
_FORMAT_VERSION = "1.3"
# Java's writer refuses tags with these; stat ids never have them, but a name read from a
# foreign result might.
_BAD_TAG = re.compile(r"[,\s]")


def _line(tag: str | None, start: float, length: float, encoded: str) -> str:
    histogram = _histogram.decode(encoded)
    peak = histogram.get_max_value() / MAX_VALUE_UNIT_RATIO if histogram.total_count else 0.0
    prefix = "" if tag is None else f"Tag={tag},"
    return f"{prefix}{start:.3f},{length:.3f},{peak:.3f},{encoded}\n"


def _interval_lines(timeline: Iterable[Any]) -> list[str] | None:
    records = list(timeline)
    if not records or any(getattr(r, "hdr_histogram", None) is None for r in records):
        return None
    return [_line(None, r.start, r.duration, r.hdr_histogram) for r in records]


def _whole_run_lines(result: Result) -> list[str]:
    entry = result.global_result
    length = entry.execution_duration
    lines = []
    encoded = result.encoded_histograms("global")
    headline = encoded.pop(SCHEDULED_TO_RESPONSE, None)
    if headline is not None:
        lines.append(_line(None, 0.0, length, headline))
    for stat_id, text in encoded.items():
        tag = _BAD_TAG.sub("_", stat_id)
        lines.append(_line(tag, 0.0, length, text))
    return lines


def render_hdr_log(result: Result) -> str:
    """The HdrHistogram log of `result` (see the module doc)."""
    start = result.global_result.execution_start
    epoch = start.timestamp() if start is not None else result.timestamp.timestamp()
    when = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime(epoch))
    lines = _interval_lines(result.timeline)
    scope = (
        "one histogram per interval" if lines is not None else "the whole run"
    )
    if lines is None:
        lines = _whole_run_lines(result)
    head = [
        f"#[Logged with nhbench {__version__}]\n",
        f"#[Histogram log format version {_FORMAT_VERSION}]\n",
        f"#[StartTime: {epoch:.3f} (seconds since epoch), {when}]\n",
        f"#[BaseTime: {epoch:.3f} (seconds since epoch)]\n",
        f"#[Values in nanoseconds; Interval_Max in milliseconds (max / 1e6); {scope}; "
        f"untagged lines are {SCHEDULED_TO_RESPONSE}, tagged lines the statistic named]\n",
        LEGEND + "\n",
    ]
    return "".join(head + lines)


def write_hdr_log(path: str | os.PathLike[str], result: Result) -> Written:
    """Write `render_hdr_log(result)` to `path` by the package's file rules (`nhbench._io`):
    atomic for a regular file, streamed into a FIFO; raises `nhbench.OutputError`."""
    return write_output(path, render_hdr_log(result))
