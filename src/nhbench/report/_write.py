"""Writing the three reports into a campaign directory."""

from __future__ import annotations

from pathlib import Path

from .._io import write_text
from ..campaign import CampaignManifest
from ._csv import render_csv
from ._html import render_html
from ._text import render_text

__all__ = ["REPORT_FILES", "write_reports"]

#: The files `write_reports` writes, in the campaign directory.
REPORT_FILES = ("report.txt", "results.csv", "report.html")


def write_reports(campaign_dir: Path, manifest: CampaignManifest) -> list[Path]:
    """Render report.txt, results.csv and report.html for `manifest` and write them into
    `campaign_dir`, each atomically (`nhbench._io`: a temporary file in the same
    directory, then a rename), so a reader never sees half a report. All three are rendered
    before the first is written: a rendering error leaves the previous reports untouched.
    Returns the paths written; a file that cannot be written raises `nhbench.OutputError`
    (an OSError, one line)."""
    directory = Path(campaign_dir)
    texts = {
        "report.txt": render_text(manifest),
        "results.csv": render_csv(manifest),
        "report.html": render_html(manifest, directory),
    }
    written = []
    for name in REPORT_FILES:
        path = directory / name
        write_text(path, texts[name])
        written.append(path)
    return written
