"""The step table: every column a campaign's steps are shown with, in one place.

Five views read it: results.csv (``csv``), report.txt and report.html (``report``: the two
reports show the same table), `Campaign.rows` and its DataFrame (``frame``), the browser's
campaign page (``browse``) and the notebook's table, `Campaign._repr_html_` (``notebook``).

A column is one `StepColumn`: its key, its value (unformatted: what the CSV writes and the
DataFrame holds; the CSV writes it by its type), its text (what the tables people read show),
whether it is a number (right-aligned), and its name in each view that shows it (None: that
view leaves it out), with the view's own text where that differs. Columns that depend on the
campaign as a whole (one per watched CPU group, the worker pinning) are a `PerCampaign` entry,
expanded for each manifest.

Each view shows its columns in the table's order, with two exceptions that keep the orders
the views already had: ``Shown(after=KEY)`` puts a column right after another one in that
view, and ``Shown(last=True)`` after every column without it (the CSV's per-campaign columns,
which come after its fixed ones so that those keep their positions).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from .._format import format_latency, format_rate

# The worker pinning is written as --cpus takes it.
from ..options import format_cpu_list
from ._charts import changed_groups, group_cpus, watched_groups
from ._models import LATENCY_KEYS, CampaignManifest, StepRecord
from ._perfstat import perf_stat_columns

__all__ = [
    "STEP_TABLE",
    "VIEWS",
    "PerCampaign",
    "Shown",
    "StepColumn",
    "View",
    "ViewColumn",
    "format_percent",
    "protocol_of",
    "step_view",
    "workers_of",
]

View = Literal["csv", "report", "frame", "browse", "notebook"]
VIEWS: tuple[View, ...] = ("csv", "report", "frame", "browse", "notebook")

Cell = Callable[[StepRecord], Any]
Text = Callable[[StepRecord], str]


@dataclass(frozen=True)
class Shown:
    """How one view shows a column (a bare string is ``Shown(name)``)."""

    name: str  # the CSV or DataFrame column name, or the table header
    text: Text | None = None  # the cell, when this view does not show the column's text
    after: str | None = None  # key of the column this one follows in this view
    last: bool = False  # after every column of this view without it
    css: Text | None = None  # the browser's cell class (else "num" for a number)
    link: bool = False  # the browser's cell links to the step's result page


@dataclass(frozen=True)
class StepColumn:
    """One column of the step table."""

    key: str
    value: Cell
    text: Text | None = None  # None: the value as str()
    numeric: bool = True
    csv: Shown | str | None = None
    report: Shown | str | None = None
    frame: Shown | str | None = None
    browse: Shown | str | None = None
    notebook: Shown | str | None = None

    def shown(self, view: View) -> Shown | None:
        spec: Shown | str | None = getattr(self, view)
        return Shown(spec) if isinstance(spec, str) else spec

    def columns(self, manifest: CampaignManifest | None) -> Iterable[StepColumn]:
        return (self,)


@dataclass(frozen=True)
class PerCampaign:
    """Columns that depend on the campaign: `expand` gives them for one manifest."""

    key: str
    expand: Callable[[CampaignManifest], Iterable[StepColumn]]

    def columns(self, manifest: CampaignManifest | None) -> Iterable[StepColumn]:
        # Without a manifest only the fixed columns exist (CSV_COLUMNS is that part).
        return () if manifest is None else self.expand(manifest)


@dataclass(frozen=True)
class ViewColumn:
    """A column as one view shows it: what a renderer iterates over."""

    key: str
    name: str
    numeric: bool
    value: Cell
    text: Text
    css: Text | None
    link: bool

    def css_class(self, step: StepRecord) -> str:
        if self.css is not None:
            return self.css(step)
        return "num" if self.numeric else ""


# ---- cell texts ------------------------------------------------------------------------------


def format_percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def workers_of(manifest: CampaignManifest, step: StepRecord) -> str:
    """The "Workers" column: the load generator's worker count, and the CPUs they were
    pinned to. (Not the Intel table's "Core/Thread", which describes the target's ingress
    CPUs: campaign/_intel.py.)"""
    cpus = manifest.options.get("cpus")
    if cpus:
        return f"{step.workers} @{format_cpu_list([int(c) for c in cpus])}"
    return str(step.workers)


def protocol_of(manifest: CampaignManifest) -> str:
    """http1 / http2, with /tls for an https URL (the Intel table's http1, http2, https)."""
    protocol = str(manifest.options.get("protocol") or "http1")
    uri = str(manifest.options.get("uri") or manifest.url)
    return f"{protocol}/tls" if uri.lower().startswith("https:") else protocol


def _errors_text(step: StepRecord) -> str:
    total = step.error_count
    if total == 0:
        return "0"
    return f"{total} ({step.error_rate * 100:.2g}%)"


def _latency_name(key: str) -> str:
    return "latency_" + key.replace(".", "_") + "_s"


def _extra_latency_keys(manifest: CampaignManifest) -> list[str]:
    """Percentiles beyond the headline ones that a step recorded (a stop rule needed them),
    lowest first."""
    return sorted(
        {key for step in manifest.steps for key in step.latency} - set(LATENCY_KEYS),
        key=lambda key: float(key[1:]) if key[1:].replace(".", "", 1).isdigit() else 1e9,
    )


def _recorded_groups(manifest: CampaignManifest) -> list[str]:
    """The CPU groups the steps recorded, in the order they first did."""
    groups: list[str] = []
    for step in manifest.steps:
        groups += [name for name in step.target_cpu if name not in groups]
    return groups


# ---- the table -------------------------------------------------------------------------------

_LATENCY_HEADERS = {"p50": "P50", "p90": "P90", "p99": "P99", "p99.9": "P99.9"}
# The browser's campaign page shows two percentiles; the other tables all four.
_BROWSED_LATENCY = ("p50", "p99")


def _latency_of(key: str) -> Cell:
    return lambda s: s.latency.get(key)


def _cpu_of(group: str) -> Cell:
    return lambda s: s.target_cpu.get(group)


def _percent(value: Cell) -> Text:
    return lambda s: format_percent(value(s))


def _latency(key: str) -> StepColumn:
    return StepColumn(
        key,
        _latency_of(key),
        lambda s: format_latency(s.latency.get(key)),
        csv=_latency_name(key),
        report=_LATENCY_HEADERS[key],
        frame=key,
        browse=key if key in _BROWSED_LATENCY else None,
        notebook=key,
    )


def _workers_pinned(manifest: CampaignManifest) -> list[StepColumn]:
    return [StepColumn("workers_pinned", lambda s: s.workers, lambda s: workers_of(manifest, s),
                       report="Workers")]


def _protocol(manifest: CampaignManifest) -> list[StepColumn]:
    protocol = protocol_of(manifest)
    return [StepColumn("protocol", lambda s: protocol, lambda s: protocol, numeric=False,
                       report="Protocol")]


def _target_cpu(manifest: CampaignManifest) -> list[StepColumn]:
    # The reports and the CSV show every watched group (the capture spec's first), even one
    # no step measured; the DataFrame only those the steps recorded (`_frame_cpu`).
    return [
        StepColumn(
            f"target_cpu_{group}",
            _cpu_of(group),
            _percent(_cpu_of(group)),
            csv=Shown(f"target_cpu_{group}", last=True),
            report=f"{group} CPU %",
        )
        for group in watched_groups(manifest)
    ]


def _target_cpus(manifest: CampaignManifest) -> list[StepColumn]:
    # A --watch-pod group whose pod moved during the campaign watched other CPUs on some
    # steps: each step shows the set it watched, so that no step's CPU % reads as the
    # load of CPUs it did not watch (the DataFrame's cpus_GROUP next to its cpu_GROUP). Absent
    # when nothing changed (the header has the set).
    def cpus_of(group: str) -> Cell:
        return lambda s: format_cpu_list(group_cpus(manifest, s, group) or [])

    return [
        StepColumn(f"target_cpus_{group}", cpus_of(group), numeric=False,
                   csv=Shown(f"target_cpus_{group}", last=True), report=f"{group} CPUs",
                   frame=f"cpus_{group}")
        for group in changed_groups(manifest)
    ]


def _frame_cpu(manifest: CampaignManifest) -> list[StepColumn]:
    return [
        StepColumn(f"cpu_{group}", _cpu_of(group), frame=f"cpu_{group}")
        for group in _recorded_groups(manifest)
    ]


def _extra_latency(manifest: CampaignManifest) -> list[StepColumn]:
    return [
        StepColumn(_latency_name(key), _latency_of(key),
                   csv=Shown(_latency_name(key), last=True))
        for key in _extra_latency_keys(manifest)
    ]


def _scrape(manifest: CampaignManifest) -> list[StepColumn]:
    # The target's metrics (--scrape-metric). Imported here: that module builds its columns
    # from this one's StepColumn.
    from ._scrape_columns import scrape_columns

    return scrape_columns(manifest)


# The browser's cell classes (its stylesheet colours them): their own, not a step's pass/fail
# ones, since a step may pass its stop rules and still be invalid.
_VALIDITY_CSS = {"valid": "validity-valid", "suspect": "validity-suspect",
                 "invalid": "validity-invalid"}


def _yes_no(passed: str, failed: str) -> Text:
    return lambda s: passed if s.passed else failed


# In reading order; the CSV's and the notebook's older orders are kept with `after=`.
STEP_TABLE: tuple[StepColumn | PerCampaign, ...] = (
    StepColumn("index", lambda s: s.index, csv="index", report="No.", frame="step",
               browse=Shown("No.", link=True), notebook="No."),
    PerCampaign("workers_pinned", _workers_pinned),
    PerCampaign("protocol", _protocol),
    StepColumn("rps_per_worker", lambda s: s.rps_per_worker,
               lambda s: format_rate(s.rps_per_worker), csv="rps_per_worker",
               report="RPS per worker", frame="rps_per_worker",
               browse=Shown("rps per worker", lambda s: f"{s.rps_per_worker:g}")),
    StepColumn("workers", lambda s: s.workers, csv="workers", frame="workers"),
    StepColumn("requested_rps", lambda s: s.requested_rps,
               lambda s: format_rate(s.requested_rps), csv="requested_rps",
               report="Requested RPS", frame="requested_rps", browse="requested rps",
               notebook="requested"),
    StepColumn("achieved_rps", lambda s: s.achieved_rps,
               lambda s: format_rate(s.achieved_rps), csv="achieved_rps",
               report="Achieved RPS", frame="achieved_rps", browse="achieved rps",
               notebook="achieved"),
    *(_latency(key) for key in LATENCY_KEYS),
    StepColumn("blocked", lambda s: s.blocked,
               lambda s: f"yes ({s.blocked_count})" if s.blocked else "no", numeric=False,
               csv="blocked", report="Blocked", frame="blocked"),
    StepColumn("blocked_count", lambda s: s.blocked_count, csv="blocked_count",
               frame="blocked_count", notebook=Shown("blocked", after="errors")),
    StepColumn("errors", lambda s: s.error_count, _errors_text, csv="errors", report="Errors",
               frame="errors", browse=Shown("errors", lambda s: f"{s.error_count:,}"),
               notebook=Shown("errors", lambda s: str(s.error_count))),
    StepColumn("error_rate", lambda s: s.error_rate, csv="error_rate", frame="error_rate"),
    PerCampaign("target_cpu", _target_cpu),
    PerCampaign("target_cpus", _target_cpus),
    PerCampaign("frame_cpu", _frame_cpu),
    # perf stat per watched group: IPC in the reports' table (every count in their own
    # perf stat table), every count in the CSV and the DataFrame (campaign/_perfstat.py).
    PerCampaign("perf_stat", lambda manifest: perf_stat_columns(manifest, StepColumn, Shown)),
    StepColumn("loadgen_cpu", lambda s: s.loadgen_cpu, lambda s: format_percent(s.loadgen_cpu),
               csv="loadgen_cpu", report="Loadgen CPU %", frame="loadgen_cpu"),
    StepColumn("nhbench_cpu", lambda s: s.nhbench_cpu, lambda s: format_percent(s.nhbench_cpu),
               csv="nhbench_cpu", report="nhbench CPU %", frame="nhbench_cpu"),
    PerCampaign("scrape", _scrape),
    StepColumn("passed", lambda s: s.passed, _yes_no("pass", "FAIL"), numeric=False,
               csv="passed", report="Result", frame="passed",
               browse=Shown("passed", _yes_no("yes", "no"), css=_yes_no("ok", "failed")),
               notebook=Shown("passed", _yes_no("yes", "NO"))),
    # The step's validity verdict (docs/trust.md "Validity"): whether its numbers measured
    # the server or the load generator's own trouble. After the CSV's older fixed columns,
    # so that those keep their positions; "-" for a step recorded before steps carried it.
    StepColumn("validity", lambda s: s.validity, lambda s: s.validity or "-", numeric=False,
               csv=Shown("validity", after="ended_at"), report="Validity", frame="validity",
               browse=Shown("validity", css=lambda s: _VALIDITY_CSS.get(s.validity or "", "")),
               notebook="validity"),
    StepColumn("validity_reasons", lambda s: "; ".join(s.validity_reasons),
               csv=Shown("validity_reasons", after="validity")),
    StepColumn("failed_checks",
               lambda s: "; ".join(check.expression for check in s.slo if not check.passed),
               csv="failed_checks"),
    StepColumn("duration", lambda s: s.duration, csv=Shown("duration_s", after="achieved_rps"),
               frame="duration"),
    StepColumn("requests", lambda s: s.requests, csv=Shown("requests", after="duration"),
               frame="requests"),
    StepColumn("http_2xx", lambda s: s.http_2xx, csv=Shown("http_2xx", after="requests"),
               frame="http_2xx"),
    StepColumn("started_at", lambda s: s.started_at, csv="started_at", frame="started_at"),
    StepColumn("ended_at", lambda s: s.ended_at, csv="ended_at"),
    StepColumn("directory", lambda s: s.directory, csv=Shown("directory", after="index"),
               frame="directory"),
    PerCampaign("extra_latency", _extra_latency),
)


def _str(column: StepColumn) -> Text:
    return lambda s: str(column.value(s))


def step_view(manifest: CampaignManifest | None, view: View) -> list[ViewColumn]:
    """The columns `view` shows for `manifest`, in its order (without a manifest, the fixed
    columns only)."""
    shown: list[tuple[ViewColumn, Shown]] = []
    for entry in STEP_TABLE:
        for column in entry.columns(manifest):
            spec = column.shown(view)
            if spec is None:
                continue
            text = spec.text or column.text or _str(column)
            shown.append((ViewColumn(column.key, spec.name, column.numeric, column.value, text,
                                     spec.css, spec.link), spec))
    ordered = [item for item in shown if item[1].after is None]
    for item in shown:
        anchor = item[1].after
        if anchor is None:
            continue
        keys = [column.key for column, _ in ordered]
        if anchor not in keys:
            raise ValueError(f"step table: {item[0].key!r} follows {anchor!r}, which the "
                             f"{view} view does not show before it")
        ordered.insert(keys.index(anchor) + 1, item)
    ordered.sort(key=lambda item: item[1].last)
    return [column for column, _ in ordered]
