"""The HTML a notebook shows for a `Campaign`: what ran, the steps and the sweep's charts.

The charts are report.html's own (`sweep_charts`), with inline styles instead of the
report's stylesheet; the table is the step table's ``notebook`` view (`STEP_TABLE`), a
compact version of the report's. Plain HTML and inline SVG, every string escaped, no
JavaScript, as for `Result._repr_html_`.
"""

from __future__ import annotations

import html
from pathlib import Path

from ._charts import sweep_charts
from ._models import CampaignManifest
from ._table import step_view

__all__ = ["campaign_html"]

_CELL = "border:1px solid #ddd;padding:2px 8px;"
_NUM = _CELL + "text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap;"
_HEAD = _CELL + "background:#f3f3f3;font-weight:600;"


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def campaign_html(directory: Path, manifest: CampaignManifest) -> str:
    """Title, status, one row per finished step, and the charts."""
    title = f"nhbench {manifest.kind}" + (f": {', '.join(manifest.label)}" if manifest.label else "")
    best = manifest.highest_passing_step
    out = [
        '<div class="nhbench-campaign" style="font-family:system-ui,-apple-system,Segoe UI,'
        'Roboto,sans-serif;font-size:13px;color:#222;background:#fff;padding:6px;">',
        f"<div><b>{_e(title)}</b> &middot; <code>{_e(manifest.url)}</code> &middot; "
        f"{_e(manifest.status)} &middot; {len(manifest.steps)} step"
        f"{'s' if len(manifest.steps) != 1 else ''} &middot; <code>{_e(directory)}</code></div>",
        f"<div>Stop reason: {_e(manifest.stop_reason or 'none (every planned step ran)')}"
        f" &middot; highest passing step: {_e(best if best is not None else 'none')}</div>",
    ]
    if manifest.note:
        out.append(f"<div>Note: {_e(manifest.note)}</div>")
    columns = step_view(manifest, "notebook")
    out.append('<table style="border-collapse:collapse;font-size:12px;margin:4px 0;">'
               "<thead><tr>" + "".join(f'<th style="{_HEAD}">{_e(c.name)}</th>' for c in columns)
               + "</tr></thead><tbody>")
    for step in manifest.steps:
        colour = "" if step.passed else "background:#fff1f0;"
        # Every cell right-aligned, as the notebook's table has always been.
        out.append("<tr>" + "".join(f'<td style="{_NUM}{colour}">{_e(c.text(step))}</td>'
                                    for c in columns) + "</tr>")
    out.append("</tbody></table>")
    charts = sweep_charts(manifest, inline_style=True)
    if charts:
        out.append('<div style="display:flex;flex-wrap:wrap;gap:12px;">')
        out += [f"<div>{chart}</div>" for chart in charts]
        out.append("</div>")
        out.append('<div style="font-size:11px;color:#555;">Hollow markers: steps that failed '
                   "a stop rule. Latency is scheduled_to_response (from the intended send "
                   "time).</div>")
    out.append("</div>")
    return "\n".join(out)
