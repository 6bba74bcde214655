"""report.txt: the campaign in plain fixed-width text (what a terminal and an e-mail show).

Layout: title, note, labels, URL, status; the plan and the watched CPU sets; the step table
(nhbench's columns, or with ``table: intel`` the Intel script's in its order, then nhbench's
others: campaign/_intel.py); the stop reason, the highest
passing step and the checks that failed; skipped captures and flame graph files; then the
machine facts of the target and of the load generator, grouped like the Intel script's
summary, side by side.
"""

from __future__ import annotations

import textwrap

from ..campaign import (
    CampaignManifest,
    StepRecord,
    intel_notes,
    perf_stat_rows,
    scrape_notes,
    table_layout,
    watched_cpu_lines,
)
from ._adapt import describe_search, search_lines
from ._common import (
    cluster_rows,
    describe_plan,
    fact_sections,
    format_check,
    format_latency,
    format_rate,
    highest_passing,
    machine_title,
    step_columns,
    validity_lines,
)

__all__ = ["render_text", "text_table"]

# Wide enough for a CPU model name ("Intel(R) Xeon(R) Platinum 8380 CPU @ 2.30GHz") on one
# line; long "unknown (reason)" texts wrap, so two machines fit in about 120 columns.
_FACT_WIDTH = 48


def text_table(
    headers: list[str],
    rows: list[list[str]],
    numeric: list[bool],
    *,
    max_width: int | None = None,
) -> list[str]:
    """A fixed-width table: numeric columns right-aligned, text left-aligned, two spaces
    between columns, a dashed rule under the header (neither when every header is empty).
    With `max_width`, longer cells are wrapped onto continuation lines (the facts' "unknown
    (reason)" texts can be long)."""
    wrapped_rows: list[list[list[str]]] = []
    for row in rows:
        wrapped_rows.append([
            textwrap.wrap(cell, max_width, break_on_hyphens=False) or [""]
            if max_width and len(cell) > max_width else [cell]
            for cell in row
        ])
    widths = [
        max([len(header), *(len(part) for row in wrapped_rows for part in row[i])])
        for i, header in enumerate(headers)
    ]

    def line(cells: list[str]) -> str:
        parts = [
            cell.rjust(width) if is_number else cell.ljust(width)
            for cell, width, is_number in zip(cells, widths, numeric, strict=True)
        ]
        return "  ".join(parts).rstrip()

    # A table of label/value rows has nothing to name its columns: no header line and no
    # rule under it (they printed as an empty line over a dashed one).
    out = [line(headers), "  ".join("-" * width for width in widths)] if any(headers) else []
    for wrapped in wrapped_rows:
        height = max(len(parts) for parts in wrapped)
        for index in range(height):
            out.append(line([parts[index] if index < len(parts) else "" for parts in wrapped]))
    return out


def _step_summary(step: StepRecord) -> str:
    p99 = format_latency(step.latency.get("p99"))
    return (
        f"No. {step.index}: {step.rps_per_worker:g} rps per worker, "
        f"{format_rate(step.requested_rps)} requested, {format_rate(step.achieved_rps)} "
        f"achieved, p99 {p99}"
    )


def render_text(manifest: CampaignManifest) -> str:
    """The text report of a campaign (the content of report.txt)."""
    out: list[str] = []
    title = f"nhbench {manifest.kind}" + (f": {', '.join(manifest.label)}" if manifest.label else "")
    out += [title, "=" * len(title), ""]
    if manifest.note:
        out += [f"Note:     {line}" if i == 0 else f"          {line}"
                for i, line in enumerate(manifest.note.splitlines() or [""])]
    if manifest.label:
        out.append(f"Labels:   {', '.join(manifest.label)}")
    out.append(f"URL:      {manifest.url}")
    if manifest.ssh:
        out.append(f"Target:   {manifest.ssh}")
    out.append(f"Status:   {manifest.status}")
    out.append(
        f"Created:  {manifest.created_at:%Y-%m-%d %H:%M:%S %Z}".rstrip()
        + f"  (nhbench {manifest.nhbench_version})"
    )
    if manifest.adapt is not None:
        plan = describe_search(manifest.adapt, manifest.plan.duration, manifest.plan.cooldown)
    else:
        plan = describe_plan(manifest.plan)
    out.append(f"Plan:     {plan[0]}")
    out += [f"          {line}" for line in plan[1:]]
    # The watched target CPU sets, as the Intel script's header gives its pods' ("Ingress
    # cpu: 5,22,77,94 (4)"), with their cores and threads.
    out += [f"{'CPUs:' if i == 0 else '':<10}{line}"
            for i, line in enumerate(watched_cpu_lines(manifest))]
    out.append("")

    out += ["Steps", "-----"]
    if manifest.steps:
        columns = step_columns(manifest)
        rows = [[column.text(step) for column in columns] for step in manifest.steps]
        out += text_table(
            [column.name for column in columns], rows, [column.numeric for column in columns]
        )
        out.append("Latency: scheduled_to_response (from the intended send time). "
                   "CPU %: 100 - %idle, mean over the step.")
        if table_layout(manifest) == "intel":
            out += intel_notes(manifest)
        invalid = validity_lines(manifest)
        if invalid:
            out += ["Validity (docs/trust.md): steps whose numbers may not be the server's",
                    *(f"  {line}" for line in invalid)]
        metrics = scrape_notes(manifest)
        if metrics:
            out += ["Target metrics (--scrape): unknown cells and why",
                    *(f"  {line}" for line in metrics)]
    else:
        out.append("No step finished yet.")
    out.append("")

    out += _perf_stat_section(manifest)

    search = search_lines(manifest)
    if search:
        out += ["Search", "------", *search, ""]

    out.append(f"Stop reason: {manifest.stop_reason or 'none (every planned step ran)'}")
    best = highest_passing(manifest)
    out.append("Highest passing step: " + (_step_summary(best) if best else "none"))
    failed = [step for step in manifest.steps if not step.passed]
    for step in failed:
        checks = [format_check(check) for check in step.slo if not check.passed]
        out.append(f"  No. {step.index} failed: " + ("; ".join(checks) or "no check recorded"))
    out.append("")

    notes = _capture_notes(manifest)
    if notes:
        out += ["Captures", "--------", *notes, ""]

    if manifest.facts:
        out += ["Machines", "--------"]
        out += _facts_side_by_side(manifest)
        cluster = cluster_rows(manifest.facts.get("target"))
        if cluster:
            out += ["", "Cluster (target node)", "---------------------"]
            out += text_table(["", ""], [[row.label, row.value] for row in cluster],
                              [False, False], max_width=_FACT_WIDTH)
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def _perf_stat_section(manifest: CampaignManifest) -> list[str]:
    """perf stat's counts per step and watched group (none without --perf-stat)."""
    headers, rows = perf_stat_rows(manifest)
    if not rows:
        return []
    return ["perf stat (target)", "------------------",
            *text_table(headers, rows, [header != "Group" for header in headers]),
            "Counts over the step, summed over the group's CPUs; ~N (P%): perf counted P% "
            "of the time and scaled.", ""]


def _capture_notes(manifest: CampaignManifest) -> list[str]:
    """Skipped captures (each distinct reason once, with the steps it applies to) and the
    flame graph files."""
    skipped: dict[str, list[int]] = {}
    flamegraphs: list[str] = []
    for step in manifest.steps:
        for role, capture in (("target", step.target_capture), ("loadgen", step.loadgen_capture)):
            if capture is None:
                continue
            for what, reason in capture.skipped.items():
                skipped.setdefault(f"{role} {what}: {reason}", []).append(step.index)
            if capture.flamegraph_file:
                flamegraphs.append(f"{step.directory}/{capture.flamegraph_file}")
    lines = []
    for text, indices in skipped.items():
        where = "all steps" if len(indices) == len(manifest.steps) else (
            "steps " + ",".join(map(str, indices)))
        lines.append(f"skipped, {where}: {text}")
    if flamegraphs:
        lines.append("Flame graphs:")
        lines += [f"  {path}" for path in flamegraphs]
    return lines


def _facts_side_by_side(manifest: CampaignManifest) -> list[str]:
    roles: list[str] = [role for role in ("target", "loadgen") if role in manifest.facts]
    roles += [role for role in manifest.facts if role not in roles]
    sections = {role: fact_sections(manifest.facts[role]) for role in roles}
    headers = ["", *(machine_title(role, manifest.facts[role]) for role in roles)]
    rows: list[list[str]] = []
    first = sections[roles[0]]
    for index, section in enumerate(first):
        rows.append([f"[{section.title}]", *("" for _ in roles)])
        for row_index, row in enumerate(section.rows):
            rows.append([
                f"  {row.label}",
                *(sections[role][index].rows[row_index].value for role in roles),
            ])
    return text_table(headers, rows, [False] * len(headers), max_width=_FACT_WIDTH)
