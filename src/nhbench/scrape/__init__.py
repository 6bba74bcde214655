"""Target-side metrics: scrapes of the target's Prometheus or Envoy /stats endpoints before
and after each step of a campaign (``--scrape``, ``--scrape-metric``; docs/sweep.md,
"Target metrics").

``_fetch``: one bounded HTTP GET; ``_prometheus``: Prometheus text through
prometheus-client's parser; ``_envoy``: Envoy's plain /stats text; ``_samples``: the
`Sample` both produce; ``_step``: the `Scraper` a campaign runs and the step's records
(``_models``: `StepScrape`, `ScrapedSeries`).
"""

from ._envoy import envoy_kind, looks_like_envoy, parse_envoy_stats
from ._fetch import MAX_SCRAPE_BYTES, fetch
from ._models import ScrapedSeries, StepScrape
from ._prometheus import parse_prometheus
from ._samples import Sample, series_key
from ._step import SCRAPE_DIR, Scraper, ScrapeSpec, Snapshot, failures, parse_page

__all__ = [
    "MAX_SCRAPE_BYTES",
    "SCRAPE_DIR",
    "Sample",
    "ScrapeSpec",
    "ScrapedSeries",
    "Scraper",
    "Snapshot",
    "StepScrape",
    "envoy_kind",
    "failures",
    "fetch",
    "looks_like_envoy",
    "parse_envoy_stats",
    "parse_page",
    "parse_prometheus",
    "series_key",
]
