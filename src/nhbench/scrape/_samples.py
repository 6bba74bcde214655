"""A scrape's numbers: `Sample`, one series as read, and how a step shows it.

Every parser (Prometheus text through prometheus-client, Envoy's plain ``/stats`` by hand)
produces samples with the same fields, so that selection and deltas need not know the
format. A sample's `mode` says what a step's column holds: ``delta`` (the increase over the
step: counters, histogram buckets, sums and counts) or ``value`` (the value after the step:
gauges, quantiles, untyped series).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["Mode", "Sample", "series_key"]

Mode = Literal["delta", "value"]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def series_key(name: str, labels: Mapping[str, str]) -> str:
    """``name{a="1",b="2"}`` with the labels sorted (``name`` alone without labels): the
    series' identity across scrapes, and its column's name."""
    if not labels:
        return name
    inner = ",".join(f'{key}="{_escape(labels[key])}"' for key in sorted(labels))
    return f"{name}{{{inner}}}"


@dataclass(frozen=True)
class Sample:
    """One series of a scrape."""

    name: str  # the sample name (envoy_cluster_upstream_rq_time_bucket)
    family: str  # the metric family (envoy_cluster_upstream_rq_time)
    kind: str  # counter, gauge, histogram, summary, untyped...
    mode: Mode
    value: float
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return series_key(self.name, self.labels)
