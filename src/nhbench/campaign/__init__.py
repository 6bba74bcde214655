"""Campaign directories: the manifest, one record per step, and loading them back."""

from ._models import (
    CAMPAIGN_FORMAT,
    LATENCY_KEYS,
    CampaignManifest,
    CampaignStatus,
    SloCheck,
    StepRecord,
    SweepPlan,
)

__all__ = [
    "CAMPAIGN_FORMAT",
    "LATENCY_KEYS",
    "CampaignManifest",
    "CampaignStatus",
    "SloCheck",
    "StepRecord",
    "SweepPlan",
]
