"""The result browser: ``nhbench browse DIR`` (a local web UI over a directory of results
and sweep campaigns) and the single-result page ``nhbench report RESULT.json -o page.html``
writes. docs/outputs.md, "The result browser", describes the pages.

`Catalogue` finds and summarises what a directory holds (`nhbench.load_result` reads each
file, so every format it reads is listed); `._pages` renders the pages (jinja2, inline SVG
charts from `nhbench._svg`); `BrowseServer` serves them with the standard library.
Fortio's result sharing: `DataDirectory` is the ``data/index.tsv`` it serves, and
`sync_results` (`SyncLoop` to repeat it) pulls a peer's results (``--sync``).
``nhbench ui DIR`` adds runs started from a form, streamed live (`start_ui`, `._ui`, `._runs`).
"""

from ._data import DataDirectory, safe_result_name
from ._pages import MAX_COMPARED, campaign_page, compare_page, error_page, list_page, result_page
from ._runs import LiveRun, RunManager
from ._scan import MAX_DEPTH, MAX_FILE_BYTES, MAX_FILES, Catalogue, Entry, Listing
from ._server import DATA_MOUNTS, BrowseServer
from ._sync import SyncError, SyncLoop, SyncReport, sync_results
from ._ui import UIHandle, UIRoutes, send, start_ui

__all__ = [
    "DATA_MOUNTS",
    "MAX_COMPARED",
    "MAX_DEPTH",
    "MAX_FILES",
    "MAX_FILE_BYTES",
    "BrowseServer",
    "LiveRun",
    "RunManager",
        "UIHandle",
    "UIRoutes",
    "Catalogue",
    "DataDirectory",
    "Entry",
    "Listing",
    "SyncError",
    "SyncLoop",
    "SyncReport",
    "campaign_page",
    "compare_page",
    "error_page",
    "list_page",
    "result_page",
    "safe_result_name",
    "sync_results",
    "send",
    "start_ui",
]
