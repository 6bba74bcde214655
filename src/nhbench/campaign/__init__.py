"""Campaign directories: the manifest, one record per step, and loading them back."""

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

__all__ = [
    "CAMPAIGN_FORMAT",
    "LATENCY_KEYS",
    "AdaptBound",
    "AdaptConfirmation",
    "AdaptState",
    "Campaign",
    "CampaignKind",
    "CampaignManifest",
    "CampaignStatus",
    "CampaignStore",
    "SloCheck",
    "StepRecord",
    "SweepPlan",
    "atomic_write_text",
    "check_resume",
    "is_campaign",
    "load_campaign",
    "load_manifest",
    "step_directory",
    "sweep_charts",
    "watched_groups",
]
