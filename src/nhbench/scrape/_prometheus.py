"""Prometheus text, parsed by prometheus-client's own parser (an extra: imported here, when
a scrape is read, never at import time).

A series' mode comes from its family's ``# TYPE``: the step's increase (``delta``) for a
counter's ``_total``, a histogram's ``_bucket``, ``_sum`` and ``_count`` and a summary's
``_sum`` and ``_count``; the value after the step for everything else (gauges, a summary's
quantiles, ``_created`` time stamps, and series without a type, which the format calls
untyped and which are not known to only grow).
"""

from __future__ import annotations

from ._samples import Mode, Sample

__all__ = ["parse_prometheus"]

_DELTA_SUFFIXES = {
    "counter": ("_total",),
    "histogram": ("_bucket", "_sum", "_count"),
    "summary": ("_sum", "_count"),
}


def _mode(kind: str, name: str, labels: dict[str, str]) -> Mode:
    if kind == "summary" and "quantile" in labels:
        return "value"
    suffixes = _DELTA_SUFFIXES.get(kind, ())
    return "delta" if name.endswith(suffixes) else "value"


def parse_prometheus(text: str) -> list[Sample]:
    """The samples of a Prometheus text page; ValueError when it does not parse."""
    from prometheus_client.parser import text_string_to_metric_families

    samples: list[Sample] = []
    try:
        for family in text_string_to_metric_families(text):
            kind = "untyped" if family.type == "unknown" else family.type
            for sample in family.samples:
                labels = dict(sample.labels)
                samples.append(Sample(sample.name, family.name, kind,
                                      _mode(kind, sample.name, labels), float(sample.value),
                                      labels))
    except (ValueError, IndexError, KeyError, TypeError) as exc:
        # prometheus-client raises ValueError for a bad line, and on some malformed input
        # an IndexError or KeyError from inside its tokenizer: all mean "not Prometheus text".
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ValueError(f"not Prometheus text: {message[:200]}") from None
    return samples
