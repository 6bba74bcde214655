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

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._data import DataDirectory, safe_result_name
    from ._pages import MAX_COMPARED, campaign_page, compare_page, error_page, list_page, result_page
    from ._runs import LiveRun, RunManager
    from ._scan import MAX_DEPTH, MAX_FILE_BYTES, MAX_FILES, Catalogue, Entry, Listing
    from ._server import DATA_MOUNTS, BrowseServer
    from ._sync import SyncError, SyncLoop, SyncReport, sync_results
    from ._ui import UIHandle, UIRoutes, send, start_ui

# The names below are imported on first use: a reading process of a big list
# (`._pool`) imports `._scan` alone, not the pages, the server, sync and the UI (jinja2,
# the campaign models, paramiko through the hosts), about 0.2 s of its start.
_LAZY = {
    "DataDirectory": "_data",
    "safe_result_name": "_data",
    "MAX_COMPARED": "_pages",
    "campaign_page": "_pages",
    "compare_page": "_pages",
    "error_page": "_pages",
    "list_page": "_pages",
    "result_page": "_pages",
    "LiveRun": "_runs",
    "RunManager": "_runs",
    "MAX_DEPTH": "_scan",
    "MAX_FILE_BYTES": "_scan",
    "MAX_FILES": "_scan",
    "Catalogue": "_scan",
    "Entry": "_scan",
    "Listing": "_scan",
    "DATA_MOUNTS": "_server",
    "BrowseServer": "_server",
    "SyncError": "_sync",
    "SyncLoop": "_sync",
    "SyncReport": "_sync",
    "sync_results": "_sync",
    "UIHandle": "_ui",
    "UIRoutes": "_ui",
    "send": "_ui",
    "start_ui": "_ui",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # later uses are plain attribute lookups
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


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
