"""Campaign directories: the manifest, one record per step, and loading them back; the step
table every view of the steps reads (`STEP_TABLE`)."""

from ._charts import sweep_charts, watched_groups
from ._models import (
    CAMPAIGN_FORMAT,
    LATENCY_KEYS,
    AdaptBound,
    AdaptConfirmation,
    AdaptState,
    CampaignKind,
    CampaignManifest,
    CampaignStatus,
    SloCheck,
    StepRecord,
    SweepPlan,
)
from ._perfstat import perf_stat_rows
from ._scrape_columns import scrape_notes
from ._store import (
    Campaign,
    CampaignStore,
    atomic_write_text,
    check_resume,
    is_campaign,
    load_campaign,
    load_manifest,
    step_directory,
)
from ._table import (
    STEP_TABLE,
    VIEWS,
    PerCampaign,
    Shown,
    StepColumn,
    View,
    ViewColumn,
    format_percent,
    protocol_of,
    step_view,
    workers_of,
)

__all__ = [
    "scrape_notes",
    "CAMPAIGN_FORMAT",
    "LATENCY_KEYS",
    "STEP_TABLE",
    "VIEWS",
    "AdaptBound",
    "AdaptConfirmation",
    "AdaptState",
    "Campaign",
    "CampaignKind",
    "CampaignManifest",
    "CampaignStatus",
    "CampaignStore",
    "PerCampaign",
    "Shown",
    "SloCheck",
    "StepColumn",
    "StepRecord",
    "SweepPlan",
    "View",
    "ViewColumn",
    "atomic_write_text",
    "check_resume",
    "format_percent",
    "is_campaign",
    "load_campaign",
    "load_manifest",
    "perf_stat_rows",
    "protocol_of",
    "step_directory",
    "step_view",
    "sweep_charts",
    "watched_groups",
    "workers_of",
]
