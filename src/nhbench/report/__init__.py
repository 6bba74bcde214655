"""Reports of a campaign (a sweep, or an adaptive search): report.txt, results.csv and a self-contained report.html.

``write_reports(directory, manifest)`` writes all three into the campaign directory;
``nhbench report DIR`` calls it with the saved manifest. The renderers are pure functions of
the manifest (plus, for the HTML, the directory its links point into).
"""

from .._svg import Series, line_chart
from ._adapt import adapt_summary, describe_search, search_lines
from ._common import format_latency
from ._csv import CSV_COLUMNS, render_csv
from ._html import render_html
from ._text import render_text
from ._write import REPORT_FILES, write_reports

__all__ = [
    "CSV_COLUMNS",
    "REPORT_FILES",
    "Series",
    "adapt_summary",
    "describe_search",
    "format_latency",
    "line_chart",
    "render_csv",
    "render_html",
    "render_text",
    "search_lines",
    "write_reports",
]
